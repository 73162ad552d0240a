"""Arrow columns with Spark's types into Avro binary datums, columnar.

``Encoder(schema).encode(array)`` writes one datum per row (the payload Confluent's
``AvroSerializer`` puts after its 5-byte header), as Spark's ``to_avro`` would: struct
fields are matched to record fields by name (each needs a place there), a null goes to the
union's ``null`` branch, a struct of ``member*`` fields (how Spark reads a union) to the
branch of its one non-null member, timestamps to ``timestamp-millis``/``-micros`` longs,
decimals to the minimal big-endian two's complement bytes (sign-extended for ``fixed``),
strings to enum symbols.
A value the schema cannot hold (a null outside a union with ``null``, an unknown enum
symbol, a fixed of the wrong size, a missing field) raises ``AvroEncodeError`` naming the
field. Null rows give null datums.

Every node turns its values into per-row byte strings at once (NumPy): the bytes and the
offsets of each row's piece; a record lays its fields' pieces side by side.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from protocol.records.vectorized import varint_sizes, write_varints, zigzag_encode

from .schema import AvroSchema


class AvroEncodeError(ValueError):
    """A value that does not fit the Avro schema it is written with."""


def _pieces_varint(values: np.ndarray):
    u = zigzag_encode(values.astype(np.int64, copy=False))
    size = varint_sizes(u)
    offsets = np.zeros(size.size + 1, dtype=np.int64)
    np.cumsum(size, out=offsets[1:])
    out = np.zeros(int(offsets[-1]), dtype=np.uint8)
    write_varints(out, offsets[:-1], u, size)
    return out, offsets


def _fixed_pieces(raw: np.ndarray, width: int):
    n = raw.size // width if width else 0
    return raw.reshape(-1), np.arange(n + 1, dtype=np.int64) * width


def concat_rows(parts, n: int):
    """Row ``i`` of the result is row ``i`` of every ``(data, offsets)`` part, in order."""
    parts = [p for p in parts if p is not None]
    if not parts:
        return np.zeros(0, dtype=np.uint8), np.zeros(n + 1, dtype=np.int64)
    if len(parts) == 1:
        return parts[0]
    lengths = sum(np.diff(off) for _, off in parts)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    out = np.empty(int(offsets[-1]), dtype=np.uint8)
    before = offsets[:-1].copy()
    for data, off in parts:
        ln = np.diff(off)
        if data.size:
            idx = np.repeat(before - off[:-1], ln)
            idx += np.arange(data.size, dtype=np.int64)
            out[idx] = data
        before += ln
    return out, offsets


def _blob_pieces(arr: pa.Array):
    """Avro bytes/string: the length then the bytes, per row."""
    arr = arr.cast(pa.large_binary()) if not pa.types.is_large_binary(arr.type) else arr
    n = len(arr)
    bufs = arr.buffers()
    off = np.frombuffer(bufs[1], dtype=np.int64)[arr.offset : arr.offset + n + 1]
    data = (
        np.frombuffer(bufs[2], dtype=np.uint8)[off[0] : off[-1]]
        if bufs[2] is not None
        else np.zeros(0, dtype=np.uint8)
    )
    return concat_rows([_pieces_varint(np.diff(off)), (data, off - off[0])], n)


def _numpy(arr: pa.Array, dtype):
    if arr.null_count:
        arr = arr.fill_null(False if pa.types.is_boolean(arr.type) else 0)
    return np.ascontiguousarray(arr.to_numpy(zero_copy_only=False).astype(dtype, copy=False))


def _decimal_bytes(arr: pa.Array, fixed_size: int | None, where: str):
    """decimal128 values as big-endian two's complement: minimal, or ``fixed_size``."""
    n = len(arr)
    arr = arr.fill_null(0) if arr.null_count else arr
    le = np.frombuffer(arr.buffers()[1], dtype=np.uint8)[arr.offset * 16 : (arr.offset + n) * 16]
    be = le.reshape(n, 16)[:, ::-1]
    neg = be[:, 0] >= 0x80
    sign = np.where(neg, 0xFF, 0).astype(np.uint8)
    # leading bytes that only repeat the sign, keeping the next byte's top bit right
    same = be == sign[:, None]
    lead = np.argmin(same, axis=1)
    lead[same.all(axis=1)] = 16
    first = be[np.arange(n), np.minimum(lead, 15)]
    need_sign = (lead == 16) | ((first >= 0x80) != neg)
    length = 16 - lead + need_sign
    length = np.maximum(length, 1)
    if fixed_size is not None:
        if (length > fixed_size).any():
            raise AvroEncodeError(
                f"{where}: a decimal does not fit the fixed of {fixed_size} bytes"
            )
        length = np.full(n, fixed_size, dtype=np.int64)
    width = max(17, fixed_size or 0)  # room for a sign byte, or the whole fixed
    wide = np.concatenate([np.repeat(sign[:, None], width - 16, axis=1), be], axis=1)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(length, out=offsets[1:])
    idx = np.repeat(np.arange(n) * width + width - length, length)
    idx += np.arange(int(offsets[-1])) - np.repeat(offsets[:-1], length)
    return wide.reshape(-1)[idx], offsets


class _Enc:
    def __init__(self, schema: AvroSchema, where: str):
        self.s, self.where = schema, where
        self._kids: dict[object, _Enc] = {}

    def kid(self, key, schema, where):
        if key not in self._kids:
            self._kids[key] = _Enc(schema, where)
        return self._kids[key]

    def encode(self, arr: pa.Array):
        """(data, offsets) of the values of ``arr``; nulls must have been routed away."""
        s, t, n = self.s, self.s.type, len(arr)
        if t != "union" and t != "null" and arr.null_count:
            raise AvroEncodeError(
                f"{self.where}: a null value, but the Avro type {s.name or t} "
                "is not a union with null"
            )
        if t == "null":
            return np.zeros(0, dtype=np.uint8), np.zeros(n + 1, dtype=np.int64)
        if t == "boolean":
            return _fixed_pieces(_numpy(arr, np.uint8), 1)
        if t in ("int", "long"):
            return _pieces_varint(self._integers(arr))
        if t == "float":
            return _fixed_pieces(_numpy(arr, "<f4").view(np.uint8), 4)
        if t == "double":
            return _fixed_pieces(_numpy(arr, "<f8").view(np.uint8), 8)
        if t in ("bytes", "fixed") and pa.types.is_decimal(arr.type):
            if arr.type.scale != s.scale and s.logical == "decimal":
                arr = arr.cast(pa.decimal128(38, s.scale))
            data, off = _decimal_bytes(arr, s.size if t == "fixed" else None, self.where)
            if t == "fixed":
                return data, off
            return concat_rows([_pieces_varint(np.diff(off)), (data, off)], n)
        if t in ("bytes", "string"):
            return _blob_pieces(arr)
        if t == "fixed":
            a = arr.cast(pa.large_binary())
            lengths = pc.binary_length(a).to_numpy(zero_copy_only=False)
            if n and (lengths != s.size).any():
                wrong = int(lengths[lengths != s.size][0])
                raise AvroEncodeError(
                    f"{self.where}: a value of {wrong} bytes for the fixed {s.name} of {s.size}"
                )
            bufs = a.buffers()
            off = np.frombuffer(bufs[1], dtype=np.int64)[a.offset : a.offset + n + 1]
            data = (
                np.frombuffer(bufs[2], dtype=np.uint8)[off[0] : off[-1]]
                if n and s.size
                else np.zeros(0, dtype=np.uint8)
            )
            return data, off - off[0]
        if t == "enum":
            index = pc.index_in(arr.cast(pa.string()), value_set=pa.array(list(s.symbols)))
            if index.null_count:
                bad = arr.filter(index.is_null())[0]
                raise AvroEncodeError(f"{self.where}: {bad} is not a symbol of the enum {s.name}")
            return _pieces_varint(index.to_numpy(zero_copy_only=False))
        if t == "record":
            return self._record(arr)
        if t in ("array", "map"):
            return self._repeated(arr)
        if t == "union":
            return self._union(arr)
        raise AvroEncodeError(f"{self.where}: cannot write Avro type {t}")

    def _integers(self, arr: pa.Array) -> np.ndarray:
        s = self.s
        if pa.types.is_timestamp(arr.type):
            v = _numpy(arr.cast(pa.timestamp("us", tz=arr.type.tz)).view(pa.int64()), np.int64)
            return np.floor_divide(v, 1000) if (s.logical or "").endswith("millis") else v
        if pa.types.is_date(arr.type):
            return _numpy(arr.cast(pa.date32()).view(pa.int32()), np.int64)
        if not (pa.types.is_integer(arr.type) or pa.types.is_boolean(arr.type)):
            raise AvroEncodeError(f"{self.where}: a {arr.type} column for the Avro type {s.type}")
        v = _numpy(arr, np.int64)
        if s.type == "int" and n_out_of_int32(v):
            raise AvroEncodeError(f"{self.where}: a value beyond the Avro int range")
        return v

    def _record(self, arr: pa.Array):
        s, n = self.s, len(arr)
        if not pa.types.is_struct(arr.type):
            raise AvroEncodeError(f"{self.where}: a {arr.type} column for the record {s.name}")
        parts = []
        for f in s.fields:
            i = arr.type.get_field_index(f.name)
            if i < 0:
                raise AvroEncodeError(
                    f"{self.where}: the column has no field {f.name!r} for the record {s.name}"
                )
            child = arr.field(i)
            parts.append(self.kid(f.name, f.type, f"{self.where}.{f.name}").encode(child))
        known = {f.name for f in s.fields}
        extra = [
            arr.type.field(j).name
            for j in range(arr.type.num_fields)
            if arr.type.field(j).name not in known
        ]
        if extra:  # as Spark's AvroSerializer: every column must have a place
            raise AvroEncodeError(
                f"{self.where}: the field {extra[0]!r} is not in the record "
                f"{s.name} ({', '.join(sorted(known))})"
            )
        return concat_rows(parts, n)

    def _repeated(self, arr: pa.Array):
        s, n = self.s, len(arr)
        is_map = s.type == "map"
        if is_map != pa.types.is_map(arr.type) or not (
            pa.types.is_list(arr.type)
            or pa.types.is_large_list(arr.type)
            or pa.types.is_map(arr.type)
        ):
            raise AvroEncodeError(f"{self.where}: a {arr.type} column for an Avro {s.type}")
        offsets = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
        counts = np.diff(offsets)
        lo, hi = int(offsets[0]), int(offsets[-1])
        if is_map:
            keys = arr.keys.slice(lo, hi - lo)
            items = arr.items.slice(lo, hi - lo)
            kd, ko = _blob_pieces(keys)
            vd, vo = self.kid("v", s.values, self.where + "{}").encode(items)
            item_data, item_off = concat_rows([(kd, ko), (vd, vo)], hi - lo)
        else:
            items = arr.values.slice(lo, hi - lo)
            item_data, item_off = self.kid("v", s.items, self.where + "[]").encode(items)
        # every row's items laid together, between its count and the closing zero
        rel = offsets - lo
        body_off = item_off[rel]
        body = (item_data, body_off - body_off[0])
        count = _pieces_varint(counts)
        closing = np.where(counts > 0, 1, 0).astype(np.int64)
        close_off = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(closing, out=close_off[1:])
        close = (np.zeros(int(close_off[-1]), dtype=np.uint8), close_off)
        return concat_rows([count, body, close], n)

    def _union(self, arr: pa.Array):
        s, n = self.s, len(arr)
        nulls = [i for i, b in enumerate(s.branches) if b.type == "null"]
        others = [i for i, b in enumerate(s.branches) if b.type != "null"]
        branch = np.full(n, -1, dtype=np.int64)
        valid = (
            np.ones(n, dtype=bool)
            if arr.null_count == 0
            else arr.is_valid().to_numpy(zero_copy_only=False)
        )
        if (~valid).any():
            if not nulls:
                raise AvroEncodeError(f"{self.where}: a null value, but the union has no null")
            branch[~valid] = nulls[0]
        values_of = {}
        member_struct = (
            len(others) > 1
            and pa.types.is_struct(arr.type)
            and all(arr.type.field(j).name.startswith("member") for j in range(arr.type.num_fields))
            and arr.type.num_fields == len(others)
            and not any(
                s.branches[i].type == "record" and _same_field_names(s.branches[i], arr.type)
                for i in others
            )
        )
        if member_struct:  # Spark's struct of members: the non-null one says the branch
            for j, i in enumerate(others):
                m = arr.field(j)
                mv = m.is_valid().to_numpy(zero_copy_only=False) & valid
                branch[mv & (branch < 0)] = i
                values_of[i] = m
            if (valid & (branch < 0)).any():
                raise AvroEncodeError(f"{self.where}: a union value with no member set")
        elif valid.any():
            i = _branch_for(s, others, arr.type)
            if i < 0:
                raise AvroEncodeError(f"{self.where}: no branch of the union fits {arr.type}")
            branch[valid] = i
            values_of[i] = arr
        index = _pieces_varint(branch)
        parts = []
        for i in sorted(set(branch.tolist())):
            sel = np.flatnonzero(branch == i)
            if s.branches[i].type == "null":
                continue
            b = s.branches[i]
            data, off = self.kid(i, b, f"{self.where}<{b.name or b.type}>").encode(
                values_of[i].take(pa.array(sel))
            )
            parts.append((sel, data, off))
        # scatter each branch's pieces to its rows
        lengths = np.zeros(n, dtype=np.int64)
        for sel, _, off in parts:
            lengths[sel] = np.diff(off)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        out = np.empty(int(offsets[-1]), dtype=np.uint8)
        for sel, data, off in parts:
            if data.size:
                ln = np.diff(off)
                idx = np.repeat(offsets[sel] - off[:-1], ln) + np.arange(data.size)
                out[idx] = data
        return concat_rows([index, (out, offsets)], n)


def _same_field_names(record: AvroSchema, st: pa.StructType) -> bool:
    return [f.name for f in record.fields] == [st.field(j).name for j in range(st.num_fields)]


def n_out_of_int32(v: np.ndarray) -> bool:
    return bool(v.size) and (v.min() < -(1 << 31) or v.max() >= (1 << 31))


def _branch_for(s: AvroSchema, others, t: pa.DataType) -> int:
    """The first union branch that holds Arrow type ``t``."""

    def fits(b: AvroSchema) -> bool:
        bt = b.type
        if pa.types.is_struct(t):
            return bt == "record"
        if pa.types.is_map(t):
            return bt == "map"
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return bt == "array"
        if pa.types.is_decimal(t):
            return b.logical == "decimal"
        if pa.types.is_timestamp(t):
            return bt == "long" and (b.logical or "").startswith(
                "timestamp" if t.tz is not None else "local-timestamp"
            )
        if pa.types.is_date(t):
            return bt == "int" and b.logical == "date"
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return bt in ("string", "enum")
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            return bt in ("bytes", "fixed")
        if pa.types.is_boolean(t):
            return bt == "boolean"
        if pa.types.is_integer(t):
            return bt in ("int", "long") if t.bit_width <= 32 else bt == "long"
        if pa.types.is_floating(t):
            return bt == ("float" if t.bit_width == 32 else "double")
        return False

    for i in others:
        if fits(s.branches[i]):
            return i
    if pa.types.is_integer(t) or pa.types.is_floating(t):  # a widening
        for i in others:
            if s.branches[i].type in ("long", "float", "double"):
                return i
    return -1


class Encoder:
    """Writes Arrow values as Avro datums of ``schema``."""

    def __init__(self, schema: AvroSchema):
        self.schema = schema
        self.root = _Enc(schema, schema.name or "value")

    def encode(self, arr) -> pa.BinaryArray:
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        n = len(arr)
        valid = (
            np.ones(n, dtype=bool)
            if arr.null_count == 0 or self.schema.type == "union"
            else arr.is_valid().to_numpy(zero_copy_only=False)
        )
        rows = np.flatnonzero(valid)
        part = arr if rows.size == n else arr.take(pa.array(rows))
        data, offsets = self.root.encode(part)
        if rows.size != n:
            full = np.zeros(n + 1, dtype=np.int64)
            lengths = np.zeros(n, dtype=np.int64)
            lengths[rows] = np.diff(offsets)
            np.cumsum(lengths, out=full[1:])
            offsets = full
        if offsets[-1] > np.iinfo(np.int32).max:
            return pa.Array.from_buffers(
                pa.large_binary(), n, [_validity(valid), pa.py_buffer(offsets), pa.py_buffer(data)]
            )
        return pa.Array.from_buffers(
            pa.binary(),
            n,
            [_validity(valid), pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)],
        )


def _validity(valid: np.ndarray):
    if valid.all():
        return None
    return pa.py_buffer(np.packbits(valid, bitorder="little"))
