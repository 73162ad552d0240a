"""The compiled decode of the common flat case: a record of primitives, read row by row in
one C call (``protocol.records._fastdecode.decode_avro``) straight into Arrow buffers.

``compile_program`` turns a resolution into a small field program once per schema pair
(the ``Decoder`` keeps it): per writer field, the wire format of each union branch (or of
the one value) and how it lands in its column. It answers None for anything else -- nested
records, arrays, maps, decimals, unions shown as structs -- which the NumPy decoder keeps.
``decode`` runs the program and builds the same Arrow array and corrupt-row flags as the
NumPy path: the same rows corrupt, the same values, nulls where a value is null or corrupt.
It answers None when the extension is not in use (``PYKAFKA_PURE_PYTHON=1``,
``accel.forced(False)``, not built) or refuses the input, and the NumPy path decodes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from protocol.records import accel

from .arrays import nulls_where
from .defaults import default_array
from .resolution import Resolution
from .spark_types import MappingOptions, union_shape

__all__ = ["Program", "compile_program", "decode"]

# wire formats, conversions and column storages: the W_*, CV_* and AS_* of _fastdecode.c
W_ERROR, W_NULL, W_BOOL, W_V5, W_V10, W_FLOAT, W_DOUBLE, W_BYTES, W_FIXED, W_ENUM = range(10)
CV_NONE, CV_BOOL, CV_I32, CV_I64, CV_MS, CV_F32, CV_F64, CV_BIN, CV_ENUM = range(9)
AS_BOOL, AS_I32, AS_I64, AS_F32, AS_F64, AS_BIN = range(6)
_STORE = {
    CV_BOOL: AS_BOOL,
    CV_I32: AS_I32,
    CV_ENUM: AS_I32,
    CV_I64: AS_I64,
    CV_MS: AS_I64,
    CV_F32: AS_F32,
    CV_F64: AS_F64,
    CV_BIN: AS_BIN,
}
# which conversions each wire format may take (a promotion the resolution allows)
_FITS = {
    W_BOOL: (CV_BOOL,),
    W_V5: (CV_I32, CV_I64, CV_MS, CV_F32, CV_F64),
    W_V10: (CV_I64, CV_MS, CV_F32, CV_F64),
    W_FLOAT: (CV_F32, CV_F64),
    W_DOUBLE: (CV_F64,),
    W_BYTES: (CV_BIN,),
    W_FIXED: (CV_BIN,),
    W_ENUM: (CV_ENUM,),
}
_WIRE = {"boolean": W_BOOL, "int": W_V5, "long": W_V10, "float": W_FLOAT, "double": W_DOUBLE}
_WIRE.update({"bytes": W_BYTES, "string": W_BYTES, "null": W_NULL})
# a value read past (``Skip``): ints, longs and enums as 10-byte varints, as the NumPy path
_SKIP = {"null": (W_NULL, 0), "boolean": (W_FIXED, 1), "float": (W_FIXED, 4)}
_SKIP.update({"double": (W_FIXED, 8), "int": (W_V10, 0), "long": (W_V10, 0), "enum": (W_V10, 0)})
_SKIP.update({"bytes": (W_BYTES, 0), "string": (W_BYTES, 0)})


class _NotFlat(Exception):
    """The schema is not one the compiled path reads."""


@dataclass
class Program:
    """The words for ``decode_avro`` and how its columns become the struct's fields:
    ``columns`` (field index, Arrow type, enum symbols or None) in the program's order,
    ``nulls`` the fields always null, ``defaults`` the fields the writer lacks."""

    atype: pa.StructType
    words: bytes = b""
    columns: list = field(default_factory=list)
    nulls: list = field(default_factory=list)
    defaults: list = field(default_factory=list)
    reader_fields: list = field(default_factory=list)


def _conversion(res: Resolution, atype: pa.DataType) -> int:
    if atype == pa.bool_():
        return CV_BOOL
    if atype in (pa.int32(), pa.date32()):
        return CV_I32
    if atype == pa.int64():
        return CV_I64
    if pa.types.is_timestamp(atype) and atype.unit == "us":
        return CV_MS if (res.read_as.logical or "").endswith("millis") else CV_I64
    if atype == pa.float32():
        return CV_F32
    if atype == pa.float64():
        return CV_F64
    if atype in (pa.string(), pa.binary()):
        return CV_BIN
    raise _NotFlat(f"{atype}")


def _leaf(res: Resolution, atype: pa.DataType) -> tuple[list[int], int]:
    """(branch words, conversion) of a primitive, fixed or enum read into ``atype``."""
    if res.kind == "enum":
        if atype != pa.string():
            raise _NotFlat("enum")
        return [W_ENUM, len(res.enum_map), *res.enum_map], CV_ENUM
    w = res.writer
    if res.kind == "fixed":
        wire, arg = W_FIXED, w.size
    elif res.kind == "primitive" and w.type in _WIRE:
        wire, arg = _WIRE[w.type], 0
    else:
        raise _NotFlat(res.kind)
    if wire == W_NULL:
        return [W_NULL, 0], CV_NONE
    conv = _conversion(res, atype)
    if conv not in _FITS[wire]:
        raise _NotFlat(f"{w.type} as {atype}")
    return [wire, arg], conv


def _branch(res: Resolution | str, atype: pa.DataType) -> tuple[list[int], int]:
    """One value (or one writer union branch) read into ``atype``."""
    if isinstance(res, str):  # a writer branch the reader cannot read: the row is corrupt
        return [W_ERROR, 0], CV_NONE
    if res.kind == "reader_union":
        if union_shape(res.read_as)[0] == "struct":
            raise _NotFlat("union as struct")
        if res.read_as.branches[res.branch].type == "null":
            return [W_NULL, 0], CV_NONE
        return _leaf(res.inner, atype)
    return _leaf(res, atype)


def _field_words(res: Resolution, atype: pa.DataType) -> tuple[list[int], int, bool]:
    """(branch count and branch words, conversion, nullable) of one field read."""
    parts = [_branch(b, atype) for b in res.branches] if res.kind == "writer_union" else []
    if res.kind != "writer_union":
        parts = [_branch(res, atype)]
    convs = {c for _, c in parts if c != CV_NONE}
    if len(convs) > 1:
        raise _NotFlat("branches of several conversions")
    conv = convs.pop() if convs else CV_NONE
    words = [len(parts) if res.kind == "writer_union" else 0]
    for w, _ in parts:
        words += w
    return words, conv, any(w[0] == W_NULL for w, _ in parts)


def _skip_words(writer) -> list[int]:
    branches = writer.branches if writer.type == "union" else [writer]
    words = [len(branches) if writer.type == "union" else 0]
    for b in branches:
        if b.type == "fixed":
            words += [W_FIXED, b.size]
        elif b.type in _SKIP:
            words += list(_SKIP[b.type])
        else:
            raise _NotFlat(f"skip {b.type}")
    return words


def compile_program(res: Resolution, atype: pa.DataType, opts: MappingOptions) -> Program | None:
    """The program reading ``res`` (a record of primitives) into ``atype``, or None."""
    if res.kind != "record" or not isinstance(atype, pa.StructType) or not atype.num_fields:
        return None
    prog = Program(atype)
    columns: list[tuple[int, int]] = []  # (storage, nullable)
    steps: list[int] = []
    try:
        for j, child in res.steps:
            i = -1 if j is None else atype.get_field_index(res.read_as.fields[j].name)
            if i < 0:
                steps += [-1, CV_NONE, *_skip_words(child.writer)]
                continue
            ftype = atype.field(i).type
            words, conv, nullable = _field_words(child, ftype)
            if conv == CV_NONE:  # only nulls (and corrupt rows) in this field
                prog.nulls.append(i)
                steps += [-1, CV_NONE, *words]
                continue
            symbols = None
            if conv == CV_ENUM:
                symbols = pa.array(list(_enum_reader(child).symbols), type=pa.string())
            prog.columns.append((i, ftype, symbols))
            steps += [len(columns), conv, *words]
            columns.append((_STORE[conv], int(nullable)))
    except _NotFlat:
        return None
    prog.defaults = list(res.defaults)
    prog.reader_fields = list(res.read_as.fields)
    head = [len(columns)] + [x for c in columns for x in c] + [len(res.steps)]
    prog.words = np.asarray(head + steps, dtype=np.int32).tobytes()
    return prog


def _enum_reader(res: Resolution):
    """The reader's enum of a field read as an enum (maybe through unions)."""
    for r in [res, *(b for b in res.branches if not isinstance(b, str))]:
        node = r.inner if r.kind == "reader_union" else r
        if node.kind == "enum":
            return node.read_as
    raise _NotFlat("enum")


def decode(prog: Program, opts: MappingOptions, buf, offsets, valid, starts):
    """(array, errors) of the rows (``_input_buffers``' value bytes, int64 row offsets and
    validity; ``starts`` the bytes before each datum or None), or None when the compiled
    decoder is not in use or refuses the input."""
    ext = accel.module()
    if ext is None or not hasattr(ext, "decode_avro"):
        return None
    n = offsets.size - 1
    bad = np.zeros(n, dtype=bool)
    if starts is not None:
        starts = np.ascontiguousarray(np.broadcast_to(np.asarray(starts, dtype=np.int64), (n,)))
    nulls = None if valid.all() else ~valid
    got = ext.decode_avro(
        prog.words,
        np.ascontiguousarray(buf),
        np.ascontiguousarray(offsets, dtype=np.int64),
        starts,
        None if nulls is None else valid.view(np.uint8),
        bad.view(np.uint8),
    )
    if got is None:
        return None
    atype = prog.atype
    arrays: list = [None] * atype.num_fields
    for (i, ftype, symbols), (validity, data, offs) in zip(prog.columns, got):
        if symbols is not None:
            index = pa.Array.from_buffers(pa.int32(), n, [_buffer(validity), pa.py_buffer(data)])
            arrays[i] = symbols.take(index) if len(symbols) else pa.nulls(n, ftype)
        elif offs is not None:
            bufs = [_buffer(validity), pa.py_buffer(offs), pa.py_buffer(data)]
            arrays[i] = pa.Array.from_buffers(ftype, n, bufs)
        else:
            arrays[i] = pa.Array.from_buffers(ftype, n, [_buffer(validity), pa.py_buffer(data)])
    for i in prog.nulls:
        arrays[i] = pa.nulls(n, atype.field(i).type)
    reader = prog.reader_fields
    for j in prog.defaults:
        f = reader[j]
        i = atype.get_field_index(f.name)
        if i >= 0:
            arrays[i] = default_array(f.type, f.default, atype.field(i).type, opts, n)
    fields = [atype.field(i) for i in range(atype.num_fields)]
    arr = pa.StructArray.from_arrays(arrays, fields=fields)
    return nulls_where(arr, bad if nulls is None else bad | nulls), bad


def _buffer(raw):
    return None if raw is None else pa.py_buffer(raw)
