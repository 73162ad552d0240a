"""Flat Protobuf messages decoded column by column with NumPy, all rows at once.

*Flat*: every field a single (not repeated) scalar (int32, int64, uint32, uint64, sint32,
sint64, fixed32, fixed64, sfixed32, sfixed64, bool, float, double, string, bytes, enum),
with or without presence (``optional``, ``required``, oneof members). Not flat: a nested
message (Timestamp, Duration too), a repeated field, a map, a group, or a uint64/fixed64
under ``upcast.unsigned.ints`` (a decimal); ``flat_decoder`` answers None for those.

A vector holds each row's position in the column's one buffer. A round reads the next tag
of every row still inside its payload, its value by wire type (varint, 8 bytes, 4 bytes,
or a length and its bytes), and stores it in its field's column, as the protobuf runtime
does: the last occurrence wins, a oneof member clears the others, an unknown field number
or a known one of another wire type is read past. Then each column is converted at once:
int32 and enums truncated to 32 bits, sint zigzag-decoded, uint32 and uint64 as the int
and long of their bits (uint32 as a long with ``upcast.unsigned.ints``), enums as names
(an unknown number as its digits) unless ``enums.as.ints``. A field without presence is
null when absent or zero, one with presence when absent (with ``emit.default.values``:
the default instead).

The rest is the row path's, row by row, its result and error flag put in place: a row
that is malformed (truncated, a length past its end, a varint over ten bytes, field
number 0, wire type 6 or 7), holds a group, a string not UTF-8 (or replaced by a later
one), an unknown number of a closed enum, or has fields left when fewer than ``SMALL``
rows do. So the corrupt rows are exactly the row path's.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from protocol.records.vectorized import PAD, word_varints, zigzag_decode

from ..avro.arrays import binary_array
from ..avro.kernels import gather_slices

from .spark_types import ProtoOptions, repeated

__all__ = ["flat_decoder", "FlatDecoder", "SMALL", "unsigned_bits"]

#: when fewer rows than this still have fields to read, the row path takes them (a NumPy
#: round costs about what the row path spends on a dozen rows)
SMALL = 16

_WIRE_VARINT, _WIRE_I64, _WIRE_LEN, _WIRE_I32 = 0, 1, 2, 5
_WIRES = (_WIRE_VARINT, _WIRE_I64, _WIRE_LEN, _WIRE_I32)
_U32 = np.uint64(0xFFFFFFFF)


def _kinds():
    """Field type -> (wire type, conversion)."""
    from google.protobuf.descriptor import FieldDescriptor as F

    return {
        F.TYPE_INT32: (_WIRE_VARINT, "i32"),
        F.TYPE_INT64: (_WIRE_VARINT, "i64"),
        F.TYPE_UINT32: (_WIRE_VARINT, "u32"),
        F.TYPE_UINT64: (_WIRE_VARINT, "i64"),
        F.TYPE_SINT32: (_WIRE_VARINT, "s32"),
        F.TYPE_SINT64: (_WIRE_VARINT, "s64"),
        F.TYPE_BOOL: (_WIRE_VARINT, "bool"),
        F.TYPE_ENUM: (_WIRE_VARINT, "enum"),
        F.TYPE_FIXED32: (_WIRE_I32, "u32"),
        F.TYPE_SFIXED32: (_WIRE_I32, "i32"),
        F.TYPE_FLOAT: (_WIRE_I32, "f32"),
        F.TYPE_FIXED64: (_WIRE_I64, "i64"),
        F.TYPE_SFIXED64: (_WIRE_I64, "i64"),
        F.TYPE_DOUBLE: (_WIRE_I64, "f64"),
        F.TYPE_STRING: (_WIRE_LEN, "str"),
        F.TYPE_BYTES: (_WIRE_LEN, "bytes"),
    }


class _Field:
    """What the decoder needs of one field: its wire type, conversion and presence."""

    def __init__(self, f, atype: pa.DataType, opts: ProtoOptions, oneofs: dict):
        self.name, self.number, self.atype = f.name, f.number, atype
        self.wire, self.kind = _kinds()[f.type]
        self.presence = bool(f.has_presence)
        group = f.containing_oneof
        self.oneof = None if group is None else oneofs.setdefault(group.full_name, len(oneofs))
        self.names = None  # enum number -> name (string enums)
        self.closed = None  # the known numbers of a closed enum
        if self.kind == "enum":
            names = {v.number: v.name for v in f.enum_type.values}  # the last alias wins
            if getattr(f.enum_type, "is_closed", True):
                self.closed = np.array(sorted(names), dtype=np.int32)
            if not opts.enums_as_ints:
                self.names = names
        if self.names is not None:
            self.known = np.array(sorted(self.names), dtype=np.int64)
            self.dictionary = [self.names[k] for k in self.known.tolist()]
        default = f.default_value
        if self.names is not None:
            default = self.names.get(default) or str(default)
        wrap = unsigned_bits(f, opts)
        if wrap is not None:
            default = wrap(default)
        self.default = default if opts.emit_defaults else None


def unsigned_bits(f, opts: ProtoOptions):
    """For a uint32/fixed32 field (without ``upcast.unsigned.ints``) or a uint64/fixed64
    one: the function giving the signed integer of a value's bits (Spark's int or long of
    them), else None."""
    from google.protobuf.descriptor import FieldDescriptor as F

    if f.type in (F.TYPE_UINT32, F.TYPE_FIXED32) and not opts.upcast:
        bits = 32
    elif f.type in (F.TYPE_UINT64, F.TYPE_FIXED64) and not opts.upcast:
        bits = 64
    else:
        return None
    top, span = 1 << (bits - 1), 1 << bits
    return lambda v: v - span if v >= top else v


def flat_decoder(descriptor, atype: pa.StructType, opts: ProtoOptions) -> FlatDecoder | None:
    """The vectorised decoder of ``descriptor`` when its message is flat, else None."""
    from google.protobuf.descriptor import FieldDescriptor as F

    kinds = _kinds()
    fields = list(descriptor.fields)
    if not fields or atype.num_fields != len(fields):
        return None
    oneofs: dict = {}
    out = []
    for f, af in zip(fields, atype):
        if repeated(f) or f.type not in kinds or af.name != f.name:
            return None
        if opts.upcast and f.type in (F.TYPE_UINT64, F.TYPE_FIXED64):
            return None  # decimal(20, 0)
        if getattr(f, "has_presence", None) is None:
            return None  # a runtime too old to say
        out.append(_Field(f, af.type, opts, oneofs))
    return FlatDecoder(out, atype, len(oneofs), opts)


class _Columns:
    """Every field's latest value per row: raw bits (a varint, the 8 or 4 bytes, or a
    length), the position of the bytes of a length-delimited value, whether it was seen,
    and for each oneof the field last set."""

    def __init__(self, n: int, fields: list, groups: int):
        self.raw = [np.zeros(n, dtype=np.uint64) for _ in fields]
        self.at = [np.zeros(n if f.wire == _WIRE_LEN else 0, dtype=np.int64) for f in fields]
        self.seen = [np.zeros(n, dtype=bool) for _ in fields]
        self.which = [np.full(n, -1, dtype=np.int32) for _ in range(groups)]
        self.a = np.zeros(PAD, dtype=np.uint8)  # the padded buffer they point into


def _varints(a: np.ndarray, word: np.ndarray, pos: np.ndarray):
    """The unsigned varint at each position: (raw uint64, size in bytes). A varint longer
    than ten bytes has size 11; bits past the 64th are dropped, as the runtime drops them."""
    b0 = a[pos]
    if pos.size == 0 or int(b0.max()) < 0x80:
        return b0.astype(np.uint64), np.ones(pos.size, dtype=np.int64)
    x, size, longer = word_varints(word[pos])
    if longer.any():  # nine bytes or more
        sub = np.flatnonzero(longer)
        b8 = a[pos[sub] + 8].astype(np.uint64)
        b9 = a[pos[sub] + 9].astype(np.uint64)
        x[sub] |= (b8 & np.uint64(0x7F)) << np.uint64(56)
        ten = b8 >= 0x80
        x[sub[ten]] |= (b9[ten] & np.uint64(1)) << np.uint64(63)
        size[sub] = np.where(ten, np.where(b9 >= 0x80, 11, 10), 9)
    return x, size


def _values(a, word, pos, end, wire: int):
    """The values of one wire type at ``pos``: (raw uint64, where the bytes of a
    length-delimited value start, the positions after them, which rows went wrong)."""
    if wire == _WIRE_VARINT:
        raw, size = _varints(a, word, pos)
        return raw, pos, pos + size, size > 10
    if wire == _WIRE_I64:
        return word[pos], pos, pos + 8, np.zeros(pos.size, dtype=bool)
    if wire == _WIRE_I32:
        return word[pos] & _U32, pos, pos + 4, np.zeros(pos.size, dtype=bool)
    if wire == _WIRE_LEN:
        raw, size = _varints(a, word, pos)
        at = pos + size
        room = np.maximum(end - at, 0).astype(np.uint64)
        bad = (size > 10) | (raw > room)
        raw[bad] = 0
        return raw, at, at + raw.astype(np.int64), bad
    return np.zeros(pos.size, dtype=np.uint64), pos, pos, np.ones(pos.size, dtype=bool)


class FlatDecoder:
    """Decodes payloads of a flat message into ``atype`` (``flat_decoder`` builds it)."""

    def __init__(self, fields: list, atype: pa.StructType, groups: int, opts: ProtoOptions):
        self.fields, self.atype, self.groups, self.opts = fields, atype, groups, opts
        numbers = np.array([f.number for f in fields], dtype=np.int64)
        top = int(numbers.max())
        # field number -> column (-1: unknown), the last entry for every number past it
        self.table = np.full(min(top, 1 << 16) + 2, -1, dtype=np.int32)
        self.order = np.argsort(numbers)
        self.sorted = numbers[self.order]
        for i, k in enumerate(numbers.tolist()):
            if k < self.table.size - 1:
                self.table[k] = i
        self.wire = np.array([f.wire for f in fields], dtype=np.int64)

    def _column_of(self, number: np.ndarray) -> np.ndarray:
        if self.sorted[-1] < self.table.size - 1:
            return self.table[np.minimum(number, self.table.size - 1)]
        i = np.minimum(np.searchsorted(self.sorted, number), self.sorted.size - 1)
        return np.where(self.sorted[i] == number, self.order[i], -1).astype(np.int32)

    def decode(self, values, starts, row_path) -> tuple[pa.Array, np.ndarray]:
        """``(array, errors)`` as ``row_path(values, starts)`` gives them, which decodes
        the rows this path leaves to it."""
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
        buf, begin, end, valid = _inputs(values, starts)
        n = len(values)
        a = np.zeros(buf.size + PAD, dtype=np.uint8)
        a[: buf.size] = buf
        word = np.ndarray(shape=(a.size - 8,), dtype="<u8", buffer=a, strides=(1,))
        cols = _Columns(n, self.fields, self.groups)
        cols.a = a
        left = np.zeros(n, dtype=bool)  # rows for the row path
        rows = np.flatnonzero(valid & (begin < end))
        pos, stop = begin[rows], end[rows]
        while rows.size:
            if rows.size < SMALL:
                left[rows] = True
                break
            rows, pos, stop = self._round(a, word, rows, pos, stop, cols, left)
        arrays = [self._array(i, f, cols, left) for i, f in enumerate(self.fields)]
        ok = valid & ~left
        arrays = [_null_where(arr, ~ok) for arr in arrays]
        out = pa.StructArray.from_arrays(arrays, fields=list(self.atype), mask=pa.array(~ok))
        errors = np.zeros(n, dtype=bool)
        if left.any():
            out = _merge(out, errors, left, values, starts, row_path)
        return out, errors

    def _round(self, a, word, rows, pos, stop, cols: _Columns, left):
        """One field of every row in ``rows``: returns the rows, positions and ends of
        those with more to read. Rows are taken by tag (a field's rows in one go), the
        rows of tags over one byte together."""
        b0 = a[pos]
        lo, hi = int(b0.min()), int(b0.max())
        groups: list = [(lo, None)]
        if lo != hi:
            tags = np.flatnonzero(np.bincount(b0, minlength=256)[:0x80]).tolist()
            groups = [(t, np.flatnonzero(b0 == t)) for t in tags]
            if hi >= 0x80:
                groups.append((0x80, np.flatnonzero(b0 >= 0x80)))
        new, bad = pos.copy(), np.zeros(rows.size, dtype=bool)
        for tag, sel in groups:
            part = (rows, pos, stop) if sel is None else (rows[sel], pos[sel], stop[sel])
            if tag < 0x80 and tag >> 3 and tag & 7 in _WIRES:
                got = self._one_tag(tag, a, word, *part, cols, left)
            else:
                got = self._mixed(a, word, *part, cols, left)
            if sel is None:
                new, bad = got
            else:
                new[sel], bad[sel] = got
        if bad.any():
            left[rows[bad]] = True
        more = ~bad & (new < stop)
        if more.all():
            return rows, new, stop
        return rows[more], new[more], stop[more]

    def _one_tag(self, tag: int, a, word, rows, pos, stop, cols: _Columns, left):
        """The rows whose next tag is the one byte ``tag``: (new positions, bad rows)."""
        wire = tag & 7
        raw, at, new, bad = _values(a, word, pos + 1, stop, wire)
        bad |= new > stop
        c = int(self._column_of(np.array([tag >> 3]))[0])
        if c >= 0 and self.fields[c].wire == wire:
            if bad.any():
                ok = ~bad
                self._store(cols, c, rows[ok], raw[ok], at[ok], left)
            else:
                self._store(cols, c, rows, raw, at, left)
        return new, bad

    def _mixed(self, a, word, rows, pos, stop, cols: _Columns, left):
        """``_round`` for rows of any tags: (new positions, bad rows)."""
        tag, size = _varints(a, word, pos)
        wire = (tag & np.uint64(7)).astype(np.int64)
        number = (tag >> np.uint64(3)).astype(np.int64)
        # a tag over 5 bytes or 32 bits, field number 0, groups, wire types 6 and 7
        bad = (size > 5) | (tag > _U32) | (number == 0)
        bad |= (wire == 3) | (wire == 4) | (wire > 5)
        pos = pos + size
        raw = np.zeros(rows.size, dtype=np.uint64)
        at, new = pos.copy(), pos.copy()
        for w in np.unique(wire).tolist():
            sel = np.flatnonzero(wire == w)
            raw[sel], at[sel], new[sel], wrong = _values(a, word, pos[sel], stop[sel], w)
            bad[sel] |= wrong
        bad |= new > stop
        col = self._column_of(number)
        store = ~bad & (col >= 0)
        store &= self.wire[np.maximum(col, 0)] == wire
        if store.any():
            for c in np.unique(col[store]).tolist():
                sel = np.flatnonzero(store & (col == c))
                self._store(cols, c, rows[sel], raw[sel], at[sel], left)
        return new, bad

    def _store(self, cols: _Columns, c: int, r, raw, at, left):
        """Values of field ``c`` for rows ``r``: the latest occurrence wins."""
        f = self.fields[c]
        if f.kind == "str":  # each string is checked once: at most one per row here
            again = cols.seen[c][r]
            if again.any():
                left[r[again]] = True
        if f.wire == _WIRE_LEN:
            cols.at[c][r] = at
        cols.raw[c][r] = raw
        cols.seen[c][r] = True
        if f.oneof is not None:
            cols.which[f.oneof][r] = c

    def _array(self, i: int, f: _Field, cols: _Columns, left) -> pa.Array:
        """Column ``i`` as Arrow (rows that fail a check join ``left``)."""
        seen, raw = cols.seen[i], cols.raw[i]
        if f.oneof is not None:
            replaced = seen & (cols.which[f.oneof] != i)
            if f.kind == "str" and replaced.any():
                left |= replaced  # the runtime checked the UTF-8 of the replaced string
            seen = seen & ~replaced
        if f.wire == _WIRE_LEN:
            lengths = np.where(seen, raw, 0).astype(np.int64)
            arr = _blobs(f, cols.a, cols.at[i], lengths, left)
            zero = lengths == 0
        else:
            values = _convert(f, raw, self.opts)
            if f.closed is not None:
                left |= seen & ~np.isin(values, f.closed)
            zero = values == 0 if values.dtype == bool else values.view(f"u{values.itemsize}") == 0
            if f.names is not None:
                arr = _enum_names(f, values)
            elif values.dtype == bool:
                arr = pa.array(values, pa.bool_())
            else:
                arr = pa.Array.from_buffers(f.atype, values.size, [None, pa.py_buffer(values)])
        if f.default is not None:  # emit.default.values
            if f.presence:
                arr = pc.if_else(pa.array(seen), arr, pa.scalar(f.default, f.atype))
            return arr
        present = seen if f.presence else seen & ~zero
        return _null_where(arr, ~present)


def _inputs(values: pa.Array, starts):
    """(value bytes, row begins past ``starts``, row ends, non-null rows)."""
    t = values.type
    if pa.types.is_large_binary(t) or pa.types.is_large_string(t):
        odt = np.int64
    elif pa.types.is_binary(t) or pa.types.is_string(t):
        odt = np.int32
    else:
        raise TypeError(f"protobuf values must be a binary column, not {t}")
    n = len(values)
    bufs = values.buffers()
    if bufs[1] is None:
        offsets = np.zeros(n + 1, dtype=np.int64)
    else:
        offsets = np.frombuffer(bufs[1], dtype=odt)[values.offset : values.offset + n + 1]
        offsets = offsets.astype(np.int64)
    raw = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    lo = int(offsets[0]) if n else 0
    offsets = offsets - lo
    end = offsets[1:]
    begin = offsets[:-1].copy()
    if starts is not None:
        begin += np.asarray(starts, dtype=np.int64)
    begin = np.minimum(begin, end)  # a header longer than the value: an empty message
    valid = (
        np.ones(n, dtype=bool)
        if values.null_count == 0
        else values.is_valid().to_numpy(zero_copy_only=False)
    )
    return raw[lo : lo + (int(end[-1]) if n else 0)], begin, end, valid


def _convert(f: _Field, raw: np.ndarray, opts: ProtoOptions) -> np.ndarray:
    """A column's raw bits as the values of its Arrow type."""
    k = f.kind
    if k in ("i32", "enum"):
        return raw.astype(np.uint32).view(np.int32)  # the low 32 bits, as the runtime
    if k == "u32":
        u = raw.astype(np.uint32)
        return u.astype(np.int64) if opts.upcast else u.view(np.int32)
    if k == "s32":
        u = raw.astype(np.uint32)
        return ((u >> np.uint32(1)) ^ (np.uint32(0) - (u & np.uint32(1)))).view(np.int32)
    if k == "s64":
        return zigzag_decode(raw)
    if k == "bool":
        return raw != 0
    if k == "f32":
        return raw.astype(np.uint32).view(np.float32)
    if k == "f64":
        return raw.view(np.float64)
    return raw.view(np.int64)


def _enum_names(f: _Field, values: np.ndarray) -> pa.Array:
    """Enum numbers as their names, an unknown number as its digits (as the row path)."""
    v = values.astype(np.int64)
    i = np.minimum(np.searchsorted(f.known, v), f.known.size - 1)
    hit = f.known[i] == v
    names = f.dictionary
    if not hit.all():
        other = np.unique(v[~hit])
        names = names + [str(x) for x in other.tolist()]
        i = np.where(hit, i, f.known.size + np.searchsorted(other, v))
    return pa.array(names, pa.string()).take(pa.array(i))


def _blobs(f: _Field, a: np.ndarray, at: np.ndarray, lengths: np.ndarray, left) -> pa.Array:
    """A string or bytes column from each row's slice; rows whose string is not valid
    UTF-8 join ``left`` (and come out empty here)."""
    data, offsets = gather_slices(a, at, lengths)
    arr = binary_array(f.atype, data, offsets)
    if f.kind != "str":
        return arr
    try:
        arr.validate(full=True)
        return arr
    except pa.ArrowInvalid:
        pass
    raw = binary_array(pa.binary(), data, offsets).to_pylist()
    bad = np.array([not _utf8(b) for b in raw], dtype=bool)
    left |= bad
    lengths = np.where(bad, 0, lengths)
    data, offsets = gather_slices(a, at, lengths)
    return binary_array(f.atype, data, offsets)


def _utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _null_where(arr: pa.Array, mask: np.ndarray) -> pa.Array:
    """``arr`` with the rows of ``mask`` null too."""
    if not mask.any():
        return arr
    if arr.offset:
        return pc.if_else(pa.array(mask), pa.nulls(len(arr), arr.type), arr)
    valid = ~mask
    if arr.null_count:
        valid &= arr.is_valid().to_numpy(zero_copy_only=False)
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(arr.type, len(arr), [bitmap, *arr.buffers()[1:]])


def _merge(out: pa.Array, errors: np.ndarray, left, values, starts, row_path) -> pa.Array:
    """``out`` with the rows of ``left`` as ``row_path`` decodes them (and their errors)."""
    n = len(out)
    idx = np.flatnonzero(left)
    sub = np.asarray(starts)[idx] if starts is not None else np.zeros(idx.size, np.int64)
    arr, err = row_path(values.take(pa.array(idx)), sub)
    errors[idx] = err
    order = np.arange(n)
    order[idx] = n + np.arange(idx.size)
    return pa.concat_arrays([out, arr]).take(pa.array(order))
