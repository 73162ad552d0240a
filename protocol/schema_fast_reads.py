"""Fast readers the schema compiler picks for fixed-width data: a run of fixed-width fields
read with one unpack, an array of a fixed-width primitive unpacked at once, and an array of
all-fixed-width structs unpacked row by row into dicts. They decode exactly what the general
readers of ``protocol.schema`` decode, only faster (a Metadata or ListOffsets answer of
thousands of partitions)."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any, TypeAlias, cast

from . import primitives as p
from .errors import ProtocolError

# A reader returns (value, next position).
Reader: TypeAlias = Callable[[p.Buffer, int], tuple[Any, int]]

# The struct format of each fixed-width primitive that decodes to a plain value: runs of
# them are read with one unpack (``fused_reader``), arrays of them with one too.
FORMATS = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint16": "H",
    "uint32": "I",
    "float64": "d",
    "bool": "?",
}


def fused_reader(names: list[str], formats: str) -> Reader:
    """One reader for consecutive fixed-width fields: their values as a tuple."""
    layout = struct.Struct(">" + formats)
    size, unpack_from = layout.size, layout.unpack_from
    what = "fields " + ", ".join(names)

    def read(buf: p.Buffer, pos: int) -> tuple[Any, int]:
        if pos + size > len(buf):
            raise ProtocolError(
                f"truncated {what}: need {size} bytes at position {pos}, {len(buf) - pos} left"
            )
        return unpack_from(buf, pos), pos + size

    return read


def fixed_array_reader(fmt: str, compact: bool, nullable: bool) -> Reader:
    """An array of a fixed-width primitive, unpacked at once."""
    read_count = p.read_array_count
    width = struct.calcsize(fmt)
    layouts: dict[int, struct.Struct] = {}

    def read_array(buf: p.Buffer, pos: int) -> tuple[list[Any] | None, int]:
        first = buf[pos] if compact and pos < len(buf) else 0
        if 0 < first < 0x80:  # a compact count of one byte: the usual case
            n, pos = first - 1, pos + 1
        else:
            count, pos = read_count(buf, pos, compact, nullable)
            if count is None:
                return None, pos
            n = count
        size = n * width
        if pos + size > len(buf):
            raise ProtocolError(
                f"truncated array of {n} {fmt!r}: need {size} bytes at position {pos}, "
                f"{len(buf) - pos} left"
            )
        layout = layouts.get(n)
        if layout is None:
            layout = struct.Struct(f">{n}{fmt}")
            if len(layouts) < 64:
                layouts[n] = layout
        return list(layout.unpack_from(buf, pos)), pos + size

    return read_array


# The decoders of structs whose fields are all fixed-width, with their row layout (names,
# struct format, the defaults of absent fields, flexible): arrays of them read by rows.
FIXED_ROWS: dict[Reader, tuple[tuple[str, ...], str, dict[str, Any], bool]] = {}


def fixed_rows_reader(
    layout: tuple[tuple[str, ...], str, dict[str, Any], bool],
    compact: bool,
    nullable: bool,
    generic: Reader,
) -> Reader:
    """An array of structs whose fields are all fixed-width (a ListOffsets answer's
    partitions): every element has the same size, so the rows are unpacked at C speed.
    Where an element carries tagged fields, or the bytes run short, ``generic`` reads it
    (and names what is wrong)."""
    names, fmt, defaults, flexible = layout
    row = struct.Struct(">" + fmt + ("B" if flexible else ""))
    stride = row.size
    read_count = p.read_array_count
    as_dicts = row_dicts(names, defaults, flexible)

    def read_array(buf: p.Buffer, pos: int) -> tuple[list[Any] | None, int]:
        start = pos
        count, pos = read_count(buf, pos, compact, nullable)
        if count is None:
            return None, pos
        end = pos + count * stride
        if end > len(buf):
            return generic(buf, start)
        view = memoryview(buf)
        # tagged fields (a row's last byte, its tag count, not 0): the general way
        if flexible and view[pos + stride - 1 : end : stride].tobytes().count(0) != count:
            return generic(buf, start)
        return as_dicts(row.iter_unpack(view[pos:end])), end

    return read_array


_RowDicts: TypeAlias = Callable[[Iterator[tuple[Any, ...]]], list[dict[str, Any]]]


def row_dicts(names: tuple[str, ...], defaults: dict[str, Any], flexible: bool) -> _RowDicts:
    """``rows -> [dict, ...]`` for rows of ``names`` (and a trailing tag count when
    ``flexible``), each dict with ``defaults`` and the row's values: a comprehension with
    the names as constant keys, made for this layout, builds a dict twice as fast as
    ``dict(zip(names, row))`` (a ListOffsets answer of 10,000 partitions: 10,000 dicts).
    Only the schema's own field names (keys, written with ``repr``) go into the source."""
    values = [f"_{i}" for i in range(len(names))]
    pairs = ", ".join(f"{name!r}: {v}" for name, v in zip(names, values))
    unpacked = ", ".join(values + (["_tags"] if flexible else [])) + ","
    body = f"{{**defaults, {pairs}}}" if defaults else f"{{{pairs}}}"
    source = f"lambda rows: [{body} for ({unpacked}) in rows]"
    return cast(_RowDicts, eval(source, {"__builtins__": {}, "defaults": dict(defaults)}))
