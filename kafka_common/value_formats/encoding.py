"""Encode: the executor side of the writer's ``valueFormat``/``keyFormat``. The value (key)
column of a batch encoded with the resolved schema and framed as Confluent's serializers
frame it, column-wise (no Python per row). A null value stays null (a tombstone)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from kafka_common.bounded_cache import BoundedCache
from kafka_common.schema_registry.framing import frame, message_index_bytes

from .specs import SinkFormat

__all__ = ["encode_formats", "framed"]

_encoders: BoundedCache[tuple, tuple] = BoundedCache(256)


def _encoder(f: SinkFormat):
    """(encoder with ``.encode(array) -> binary array``, bytes after the schema id)."""
    key = (f.format, f.schema_id, f.schema, f.message_name)
    found = _encoders.get(key)
    if found is None:
        assert f.schema is not None  # filled by registry_lookups.resolve_sink_formats
        if f.format == "avro":
            from kafka_common.avro import Encoder as AvroEncoder, parse_schema

            found = (AvroEncoder(parse_schema(f.schema, [t for _, t in f.references])), b"")
        elif f.format == "protobuf":
            from kafka_common.protobuf.encoder import Encoder as ProtobufEncoder

            encoder = ProtobufEncoder(f.schema, f.references, f.message_name)
            found = (encoder, message_index_bytes(encoder.path))
        else:
            from kafka_common.json_schema.encoder import Encoder as JsonEncoder

            found = (JsonEncoder(), b"")
        _encoders.put(key, found)
    return found


def framed(payloads: pa.Array, prefix: bytes) -> pa.Array:
    """``prefix`` + each payload, nulls kept (one pass over the buffers)."""
    if isinstance(payloads, pa.ChunkedArray):
        payloads = payloads.combine_chunks()
    payloads = payloads.cast(pa.binary())
    n, k = len(payloads), len(prefix)
    bufs = payloads.buffers()
    offsets = np.frombuffer(bufs[1], np.int32)[payloads.offset : payloads.offset + n + 1].astype(
        np.int64
    )
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
    out[keep] = data[offsets[0] : offsets[-1]]
    if new_offsets[-1] > 2**31 - 1:
        raise ValueError("a batch of framed values exceeds 2 GiB")
    validity = pa.array(valid).buffers()[1] if payloads.null_count else None
    return pa.Array.from_buffers(
        pa.binary(),
        n,
        [validity, pa.py_buffer(new_offsets.astype(np.int32)), pa.py_buffer(out)],
        payloads.null_count,
    )


def encode_formats(batch: pa.RecordBatch, formats: tuple[SinkFormat, ...]) -> pa.RecordBatch:
    """``batch`` with each formatted column replaced by its framed Avro bytes."""
    columns = list(batch.columns)
    names = batch.schema.names
    for f in formats:
        i = names.index(f.column)
        column = columns[i]
        encoder, after_id = _encoder(f)
        assert f.schema_id is not None  # filled by registry_lookups.resolve_sink_formats
        payloads = encoder.encode(column)
        if column.null_count:
            # A null value is a tombstone, as Spark's to_avro gives null for null: never
            # the union's null branch.
            import pyarrow.compute as pc  # at first use: its import costs a worker 0.1-0.3 s

            payloads = pc.if_else(column.is_valid(), payloads, pa.nulls(len(column), pa.binary()))
        columns[i] = framed(payloads, frame(f.schema_id) + after_id)
    return pa.RecordBatch.from_arrays(columns, names=names)
