"""The compiled path of the JSON decoder: a whole batch of framed payloads parsed at once by
Arrow's C++ JSON reader, for the common case the pure path (``decoder``) would read the
same way.

The payloads lie in the value buffer one after the other, each behind its header (the
magic byte and schema id). Overwriting every header with a newline and spaces turns the
buffer into newline-delimited JSON, one line per row, which ``pyarrow.json`` reads with
the reader's schema as the explicit schema, in one call, without a Python object per row.

It is taken only when its answer is the pure path's: the target is a struct of bigint, int,
double, boolean, string and such structs (types Arrow's reader converts as ``from_json``
does, refusing what ``from_json`` would refuse or read otherwise: a number for a string
column, a float or an out-of-range number for an integer, duplicate keys); every payload
is ASCII, one object (its first byte ``{``, its last ``}``, no line break inside) and the
reader gives one row per payload. Anything else -- nulls, other types, plain values
without a header, one payload Arrow refuses -- returns None and the pure path decodes the
batch and names the bad rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["read_rows", "compiles"]

_SIMPLE = (pa.int64(), pa.int32(), pa.float64(), pa.bool_(), pa.string())
_NEWLINE, _RETURN, _SPACE, _OPEN, _CLOSE = 0x0A, 0x0D, 0x20, ord("{"), ord("}")


def compiles(atype: pa.DataType) -> bool:
    """Whether rows of ``atype`` can take the compiled path."""
    if not pa.types.is_struct(atype):
        return False
    for i in range(atype.num_fields):
        t = atype.field(i).type
        if t not in _SIMPLE and not compiles(t):
            return False
    return True


def _lines(values: pa.Array, starts) -> np.ndarray | None:
    """The payloads as newline-delimited JSON (a copy of the value buffer with each header
    turned into a newline and spaces), or None when a payload is not one ASCII object on a
    line of its own."""
    n = len(values)
    head = np.asarray(starts, dtype=np.int64)
    skip = int(head[0])
    if skip < 1 or (head != skip).any():
        return None
    bufs = values.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int32)[values.offset : values.offset + n + 1]
    offsets = offsets.astype(np.int64)
    base = int(offsets[0])
    begin, end = offsets[:-1] - base, offsets[1:] - base
    if ((end - begin) <= skip + 1).any():  # empty, or too short for an object
        return None
    data = np.frombuffer(bufs[2], dtype=np.uint8)[base : int(offsets[-1])].copy()
    data[(begin[:, None] + np.arange(skip)).ravel()] = _SPACE
    data[begin] = _NEWLINE
    if not ((data[begin + skip] == _OPEN).all() and (data[end - 1] == _CLOSE).all()):
        return None  # Arrow's reader must never see a line that starts otherwise
    if (
        np.count_nonzero(data == _NEWLINE) != n
        or np.count_nonzero(data == _RETURN)
        or np.count_nonzero(data >= 0x80)
    ):
        return None
    return data


def read_rows(values: pa.Array, starts, atype: pa.StructType) -> pa.Array | None:
    """The framed JSON payloads of the binary column ``values`` (each from its start
    offset) as a struct array of ``atype``; None when the pure path must decide."""
    n = len(values)
    if n == 0 or values.null_count or values.type != pa.binary() or not compiles(atype):
        return None
    data = _lines(values, starts)
    if data is None:
        return None
    import pyarrow.json as pj

    fields = [atype.field(i) for i in range(atype.num_fields)]
    try:
        table = pj.read_json(
            pa.BufferReader(pa.py_buffer(data)),
            read_options=pj.ReadOptions(use_threads=False, block_size=max(1 << 20, data.size)),
            parse_options=pj.ParseOptions(
                explicit_schema=pa.schema(fields), unexpected_field_behavior="ignore"
            ),
        )
    except (pa.ArrowException, ValueError):
        return None
    if table.num_rows != n:
        return None
    columns = [table.column(i).combine_chunks() for i in range(len(fields))]
    return pa.StructArray.from_arrays(columns, fields=fields)
