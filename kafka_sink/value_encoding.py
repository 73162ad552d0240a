"""Executor side of the writer's ``valueFormat``/``keyFormat``: the value (key) column of
a batch encoded with the resolved schema and framed as Confluent's serializers frame it,
column-wise (no Python per row). A null value stays null (a tombstone)."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kafka_common.arrow_json import decimal_text, key_text, non_finite_text, rows
from kafka_common.bounded_cache import BoundedCache
from kafka_common.schema_registry.framing import frame, message_index_bytes

from .value_formats import SinkFormat

__all__ = ["encode_formats", "framed"]

_encoders: BoundedCache[tuple, tuple] = BoundedCache(256)


def _encoder(f: SinkFormat):
    """(encoder with ``.encode(array) -> binary array``, bytes after the schema id)."""
    key = (f.format, f.schema_id, f.schema, f.message_name)
    found = _encoders.get(key)
    if found is None:
        if f.format == "avro":
            from kafka_common.avro import Encoder, parse_schema
            found = (Encoder(parse_schema(f.schema, [t for _, t in f.references])), b"")
        elif f.format == "protobuf":
            from kafka_common.protobuf.encoder import Encoder
            encoder = Encoder(f.schema, f.references, f.message_name)
            found = (encoder, message_index_bytes(encoder.path))
        else:
            found = (_JsonEncoder(), b"")
        _encoders.put(key, found)
    return found


class _JsonEncoder:
    """Each row as JSON text (UTF-8), as confluent-kafka's JSONSerializer writes it:
    dates and timestamps as ISO 8601 strings, binary as base64, maps as objects (also when
    empty), decimals with every digit as JSON numbers, NaN and infinities as the strings
    Spark's ``to_json`` writes (``kafka_common.arrow_json``)."""

    def encode(self, array: pa.Array) -> pa.Array:
        exact = _holds_decimals(array.type)
        return pa.array([None if row is None else _json_bytes(row, exact)
                         for row in rows(array)], pa.binary())


def _holds_decimals(t: pa.DataType) -> bool:
    if pa.types.is_decimal(t):
        return True
    if pa.types.is_struct(t):
        return any(_holds_decimals(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _holds_decimals(t.key_type) or _holds_decimals(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _holds_decimals(t.value_type)
    return False


def _json_bytes(row, exact: bool) -> bytes:
    """``row`` as JSON text: by ``json.dumps`` (C) when it can write the row exactly (no
    decimal in the type, no NaN or infinity in the row), else by ``_json_text``."""
    if not exact:
        try:
            return json.dumps(row, separators=(",", ":"), allow_nan=False,
                              default=_json_scalar).encode()
        except (ValueError, TypeError):
            pass  # a NaN or an infinity, or a map key json.dumps does not take
    return _json_text(row).encode()


def _json_scalar(v):
    """The JSON value of a date, timestamp or binary value (``json.dumps``'s default)."""
    if isinstance(v, (dt.date, dt.datetime)):
        return v.isoformat()
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    raise TypeError(f"valueFormat=json cannot write a {type(v).__name__} value ({v!r})")


def _json_text(v) -> str:
    """``v`` (a row of ``arrow_json.rows``) as compact JSON text, decimals with every digit
    (``json.dumps`` writes them only through ``float``) and NaN and the infinities quoted."""
    if v is None:
        return "null"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return int.__repr__(v)
    if isinstance(v, float):
        special = non_finite_text(v)
        return float.__repr__(v) if special is None else f'"{special}"'
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(key_text(k)) + ":" + _json_text(x)
                              for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_json_text(x) for x in v) + "]"
    if isinstance(v, decimal.Decimal):
        return decimal_text(v)
    return json.dumps(_json_scalar(v))


def framed(payloads: pa.Array, prefix: bytes) -> pa.Array:
    """``prefix`` + each payload, nulls kept (one pass over the buffers)."""
    if isinstance(payloads, pa.ChunkedArray):
        payloads = payloads.combine_chunks()
    payloads = payloads.cast(pa.binary())
    n, k = len(payloads), len(prefix)
    bufs = payloads.buffers()
    offsets = np.frombuffer(bufs[1], np.int32)[payloads.offset:payloads.offset + n + 1] \
        .astype(np.int64)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    valid = np.asarray(payloads.is_valid()) if payloads.null_count else np.ones(n, bool)
    lengths = np.diff(offsets) + np.where(valid, k, 0)
    new_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    out = np.empty(int(new_offsets[-1]), np.uint8)
    keep = np.ones(out.size, bool)
    heads = new_offsets[:-1][valid]
    for i, byte in enumerate(prefix):
        out[heads + i] = byte
        keep[heads + i] = False
    out[keep] = data[offsets[0]:offsets[-1]]
    if new_offsets[-1] > 2**31 - 1:
        raise ValueError("a batch of framed values exceeds 2 GiB")
    validity = pa.array(valid).buffers()[1] if payloads.null_count else None
    return pa.Array.from_buffers(pa.binary(), n, [validity,
                                                  pa.py_buffer(new_offsets.astype(np.int32)),
                                                  pa.py_buffer(out)], payloads.null_count)


def encode_formats(batch: pa.RecordBatch, formats: tuple[SinkFormat, ...]) -> pa.RecordBatch:
    """``batch`` with each formatted column replaced by its framed Avro bytes."""
    columns = list(batch.columns)
    names = batch.schema.names
    for f in formats:
        i = names.index(f.column)
        column = columns[i]
        encoder, after_id = _encoder(f)
        payloads = encoder.encode(column)
        if column.null_count:
            # A null value is a tombstone, as Spark's to_avro gives null for null: never
            # the union's null branch.
            payloads = pc.if_else(column.is_valid(), payloads,
                                          pa.nulls(len(column), pa.binary()))
        columns[i] = framed(payloads, frame(f.schema_id) + after_id)
    return pa.RecordBatch.from_arrays(columns, names=names)
