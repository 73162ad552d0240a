"""The Arrow columns of Spark's Kafka source, built from decoded record fields.

``decode_arrow`` and ``decode_arena`` hand over numpy arrays of offsets, timestamps and
the arena positions of keys, values and headers, or the buffers of the compiled decoder
(accel.py); these functions turn them into the columns, without a Python object per record.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptRecordError

# Spark's Arrow types: timestamps are UTC microseconds, list items are named "element".
HEADERS_TYPE = pa.list_(
    pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
)
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")


def repeated_offsets(length: int, n: int) -> np.ndarray:
    """The int32 offsets of ``n`` values of ``length`` bytes each, one after the other."""
    return np.arange(n + 1, dtype=np.int32) * np.int32(length)


def topic_column(topic: str, n: int) -> pa.Array:
    raw = topic.encode("utf-8")
    if n * len(raw) >= 1 << 31:
        return pa.array([topic] * n, pa.string())
    offsets = repeated_offsets(len(raw), n)
    return pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)]
    )


def _validity(valid: np.ndarray):
    if valid.all():
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), int(valid.size - valid.sum())


def slices(arena: pa.Buffer, starts: list, lengths: list, types: list) -> list[pa.Array]:
    """Binary arrays of the arena slices [start, start + max(length, 0)), null where length
    is -1: one offsets array cuts the arena at every boundary, ``take`` gathers."""
    k = len(starts)
    n = starts[0].size
    if n == 0:
        return [pa.array([], t) for t in types]
    cuts = np.empty((n, 2 * k), dtype=np.int32)
    for i in range(k):
        cuts[:, 2 * i] = starts[i]
        cuts[:, 2 * i + 1] = starts[i] + np.maximum(lengths[i], 0)
    cuts = cuts.reshape(-1)
    pieces = pa.Array.from_buffers(pa.binary(), cuts.size - 1, [None, pa.py_buffer(cuts), arena])
    out = []
    for i in range(k):
        idx = pa.array(np.arange(2 * i, cuts.size - 1, 2 * k, dtype=np.int32), pa.int32())
        taken = pc.take(pieces, idx, boundscheck=False)
        validity, nulls = _validity(lengths[i] >= 0)
        bufs = taken.buffers()
        out.append(
            pa.Array.from_buffers(types[i], n, [validity, bufs[1], bufs[2]], null_count=nulls)
        )
    return out


def utf8_or_replace(arr: pa.Array) -> pa.Array:
    try:
        arr.validate(full=True)
        return arr
    except pa.ArrowInvalid:
        raw = arr.cast(pa.binary()).to_pylist()
        return pa.array(
            [None if b is None else b.decode("utf-8", "replace") for b in raw], pa.string()
        )


# Kafka timestamps are milliseconds; Spark's are microseconds in an int64.
_MAX_MS = ((1 << 63) - 1) // 1000
_MIN_MS = -(1 << 63) // 1000 + 1


def assemble(keys, values, topic, partition, offsets, ts_ms, ts_type, headers, schema):
    n = len(offsets)
    if n and (ts_ms.max() > _MAX_MS or ts_ms.min() < _MIN_MS):
        bad = int(np.flatnonzero((ts_ms > _MAX_MS) | (ts_ms < _MIN_MS))[0])
        raise CorruptRecordError(
            f"record timestamp {int(ts_ms[bad])} ms is out of the range of a timestamp in "
            f"microseconds",
            topic=topic,
            partition=partition,
            offset=int(offsets[bad]),
        )
    cols = [
        keys,
        values,
        topic_column(topic, n),
        pa.array(np.full(n, partition, dtype=np.int32), pa.int32()),
        pa.array(offsets, pa.int64()),
        pa.Array.from_buffers(
            TIMESTAMP_TYPE, n, [None, pa.py_buffer(ts_ms.astype(np.int64) * 1000)]
        ),
        pa.array(ts_type.astype(np.int32, copy=False), pa.int32()),
    ]
    if headers is not None:
        cols.append(headers)
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def from_records(recs, topic, partition, include_headers, schema) -> pa.RecordBatch:
    """Columns from reference ``Record``s (legacy message sets: not the hot path)."""
    headers = None
    if include_headers:
        headers = pa.array(
            [[{"key": k, "value": v} for k, v in r.headers] or None for r in recs], HEADERS_TYPE
        )
    return assemble(
        pa.array([r.key for r in recs], pa.binary()),
        pa.array([r.value for r in recs], pa.binary()),
        topic,
        partition,
        np.array([r.offset for r in recs], dtype=np.int64),
        np.array([r.timestamp for r in recs], dtype=np.int64),
        np.array([r.timestamp_type for r in recs], dtype=np.int32),
        headers,
        schema,
    )


def _binary_from(arrow_type, n, offsets, validity, data) -> pa.Array:
    nulls = (
        0
        if validity is None
        else n
        - int(
            np.unpackbits(np.frombuffer(validity, dtype=np.uint8), count=n, bitorder="little").sum()
        )
    )
    return pa.Array.from_buffers(
        arrow_type,
        n,
        [
            None if validity is None else pa.py_buffer(validity),
            pa.py_buffer(offsets),
            pa.py_buffer(data),
        ],
        null_count=nulls,
    )


def from_compiled(out, topic, partition, include_headers, schema) -> pa.RecordBatch:
    """The batch from the buffers of the compiled decoder (accel.py)."""
    n, ko, kv, kd, vo, vv, vd, offsets, stamps, types, headers = out
    cols = [
        _binary_from(pa.binary(), n, ko, kv, kd),
        _binary_from(pa.binary(), n, vo, vv, vd),
        topic_column(topic, n),
        pa.array(np.full(n, partition, dtype=np.int32), pa.int32()),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(offsets)]),
        pa.Array.from_buffers(TIMESTAMP_TYPE, n, [None, pa.py_buffer(stamps)]),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(types)]),
    ]
    if include_headers:
        if headers is None:
            cols.append(pa.nulls(n, HEADERS_TYPE))
        else:
            lo, lv, hko, hkd, hvo, hvv, hvd = headers
            entries_n = len(hko) // 4 - 1
            keys = utf8_or_replace(_binary_from(pa.string(), entries_n, hko, None, hkd))
            entries = pa.StructArray.from_arrays(
                [keys, _binary_from(pa.binary(), entries_n, hvo, hvv, hvd)],
                fields=list(HEADERS_TYPE.value_type),
            )
            cols.append(
                pa.Array.from_buffers(
                    HEADERS_TYPE,
                    n,
                    [None if lv is None else pa.py_buffer(lv), pa.py_buffer(lo)],
                    null_count=-1 if lv is not None else 0,
                    children=[entries],
                )
            )
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def headers_column(arena, n, header_count, parts):
    if header_count is None or not header_count.any():
        return pa.nulls(n, HEADERS_TYPE)
    _, key_start, key_len, value_start, value_len = parts
    keys, values = slices(
        arena, [key_start, value_start], [key_len, value_len], [pa.string(), pa.binary()]
    )
    keys = utf8_or_replace(keys)
    entries = pa.StructArray.from_arrays([keys, values], fields=list(HEADERS_TYPE.value_type))
    list_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(header_count, out=list_offsets[1:])
    validity, nulls = _validity(header_count > 0)
    return pa.Array.from_buffers(
        HEADERS_TYPE,
        n,
        [validity, pa.py_buffer(list_offsets)],
        null_count=nulls,
        children=[entries],
    )
