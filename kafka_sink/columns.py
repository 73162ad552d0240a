"""An Arrow batch of the DataFrame, read into the columns a Kafka record needs.

``prepare(batch, plan)`` returns ``Rows``: keys and values as Arrow binary arrays (a string
column is reinterpreted, not copied), the headers list column as Spark gives it, the topic
of each row as a small code into ``topics``, the partition and timestamp columns as numpy
arrays with validity masks, and an upper bound of every record's encoded size. Nothing is
done per row in Python.

Conversions follow Spark's Kafka sink: a string key or value is its UTF-8 bytes; a
timestamp is Spark's microseconds divided by 1000 (truncated, as Java's long division); a
double timestamp is seconds, cast as Spark casts a double to a timestamp; a null timestamp
means "now" (filled in when the batch is encoded).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from protocol.errors import ConfigError
from protocol.records.encode_arrow import sizes_in_batch
from protocol.records.row_source import RowSource

from .validation import HEADERS, KEY, PARTITION, TIMESTAMP, TOPIC, VALUE, WritePlan

__all__ = ["Rows", "prepare", "as_binary"]


def as_binary(arr) -> pa.Array:
    """A binary or string column as ``pa.binary()`` (zero-copy for binary and string)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if pa.types.is_binary(t):
        return arr
    if pa.types.is_string(t):
        return arr.view(pa.binary())
    return arr.cast(pa.binary())


@dataclass
class Rows:
    """The rows of one Arrow batch, ready to be partitioned, checked and encoded."""

    n: int
    topics: list[str]  # the distinct topics, indexed by topic_codes
    topic_codes: np.ndarray  # int32 per row; -1 for a null topic
    null_topics: int
    key: pa.Array | None  # binary; None when there is no key column
    value: pa.Array  # binary
    headers: pa.Array | None  # list<struct<key string, value binary>>
    null_header_keys: int
    null_header_entries: int
    partition: np.ndarray | None  # int32 (0 where null)
    partition_valid: np.ndarray | None  # bool
    timestamp_ms: np.ndarray | None  # int64 (0 where null)
    timestamp_valid: np.ndarray | None  # bool
    sizes: np.ndarray  # int64: an upper bound of each record's size inside a batch
    base_sizes: np.ndarray  # int64: the part of each size no batch changes (the batcher's)
    source: RowSource | None = None  # the encoder's view of the columns (None: bad headers)

    def topic_of(self, i: int) -> str | None:
        code = int(self.topic_codes[i])
        return self.topics[code] if code >= 0 else None


def _column(batch: pa.RecordBatch, name: str):
    index = batch.schema.get_field_index(name)
    return None if index < 0 else batch.column(index)


def _valid(arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _timestamp_ms(arr: pa.Array, kind: str) -> tuple[np.ndarray, np.ndarray]:
    valid = _valid(arr)
    if kind == "double":
        seconds = arr.to_numpy(zero_copy_only=False).astype(np.float64)
        finite = np.isfinite(seconds)
        if (valid & ~finite).any():
            raise ConfigError(
                "timestamp column: a double timestamp is NaN or infinite; it "
                "cannot be cast to a timestamp"
            )
        with np.errstate(invalid="ignore", over="ignore"):
            micros = np.where(valid & finite, seconds * 1_000_000, 0).astype(np.int64)
    else:
        unit = arr.type.unit
        raw = arr.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
        micros = raw * {"s": 1_000_000, "ms": 1000, "us": 1, "ns": 1}[unit]
        if unit == "ns":
            micros = _trunc_div(raw, 1000)
    return _trunc_div(micros, 1000), valid


def _trunc_div(values: np.ndarray, divisor: int) -> np.ndarray:
    """Integer division rounding toward zero, as Java's ``/`` on longs."""
    q = values // divisor
    q[(values < 0) & (values % divisor != 0)] += 1
    return q


def prepare(batch: pa.RecordBatch, plan: WritePlan) -> Rows:
    """Read one Arrow batch of the DataFrame (Spark's Arrow types) into ``Rows``. A topic
    or a headers column needs ``pyarrow.compute``; a plain key and value do not."""
    n = batch.num_rows
    value = as_binary(_column(batch, VALUE))

    if plan.topic_option is not None:
        topics = [plan.topic_option]
        codes = np.zeros(n, dtype=np.int32)
        null_topics = 0
    else:
        import pyarrow.compute as pc

        encoded = pc.dictionary_encode(_column(batch, TOPIC))
        if isinstance(encoded, pa.ChunkedArray):
            encoded = encoded.combine_chunks()
        topics = encoded.dictionary.to_pylist()
        codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32)
        null_topics = int(encoded.null_count)

    key = None
    if plan.key_column:
        key = as_binary(_column(batch, KEY))
        if key.null_count == n:
            key = None

    headers = None
    null_keys = null_entries = 0
    if plan.headers_column:
        headers = _column(batch, HEADERS)
        if isinstance(headers, pa.ChunkedArray):
            headers = headers.combine_chunks()
        import pyarrow.compute as pc

        flat = pc.list_flatten(headers)
        if len(flat) == 0:
            headers = None
        else:
            null_entries = int(flat.null_count)
            null_keys = int(pc.struct_field(flat, [0]).null_count) - null_entries

    partition = partition_valid = None
    if plan.partition_column:
        column = _column(batch, PARTITION)
        partition_valid = _valid(column)
        if partition_valid.any():
            partition = (
                column.cast(pa.int32()).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int32)
            )
        else:
            partition_valid = None

    timestamp_ms = timestamp_valid = None
    if plan.timestamp_kind is not None:
        column = _column(batch, TIMESTAMP)
        if column.null_count < n:
            timestamp_ms, timestamp_valid = _timestamp_ms(column, plan.timestamp_kind)

    rows = Rows(
        n=n,
        topics=topics,
        topic_codes=codes,
        null_topics=null_topics,
        key=key,
        value=value,
        headers=headers,
        null_header_keys=max(null_keys, 0),
        null_header_entries=null_entries,
        partition=partition,
        partition_valid=partition_valid,
        timestamp_ms=timestamp_ms,
        timestamp_valid=timestamp_valid,
        sizes=np.zeros(n, dtype=np.int64),
        base_sizes=np.zeros(n, dtype=np.int64),
    )
    if n and not (null_keys or null_entries):
        rows.source = RowSource(key, value, headers)
        rows.base_sizes = rows.source.base_sizes()
        rows.sizes = sizes_in_batch(rows.base_sizes, _timestamp_span(rows), n)
    return rows


def _timestamp_span(rows: Rows) -> int:
    """The span of the rows' timestamps, in ms, for sizing their deltas."""
    if rows.timestamp_ms is None or rows.timestamp_valid is None:
        return 0
    if rows.timestamp_valid.all():
        return int(rows.timestamp_ms.max() - rows.timestamp_ms.min())
    # a null timestamp becomes "now": size the deltas as if it were the largest
    filled = np.where(
        rows.timestamp_valid, rows.timestamp_ms, max(int(rows.timestamp_ms.max()), 2**41)
    )
    return int(filled.max() - filled.min())
