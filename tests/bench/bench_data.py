"""The benchmark's data sets: generated once, produced once to a Tansu broker.

Every record has a 10-byte key (its number, zero padded), a value of ``value_size`` bytes
(JSON-like text from a small vocabulary, so lz4 and zstd have something to do; the first 10
bytes are the record number) and one header (``trace-id`` -> 16 hex bytes). Timestamps
advance one millisecond every 8 records. Records are spread evenly over the partitions and
written in batches of about 64 KB uncompressed, the last batch of each partition holding
one record: Tansu answers ListOffsets "latest" with the last batch's base offset + 1, which
is the true end only then.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

KEY_SIZE = 10
HEADER_KEY = "trace-id"
HEADER_VALUE_SIZE = 16
TS0 = 1_700_000_000_000
BATCH_BYTES = 64 * 1024

_WORDS = (
    "page_view",
    "click",
    "add_to_cart",
    "purchase",
    "search",
    "login",
    "logout",
    "scroll",
    "/products/shoes",
    "/products/hats",
    "/checkout",
    "/home",
    "mobile",
    "desktop",
    "tablet",
    "de-DE",
    "en-US",
    "fr-FR",
    "campaign",
    "organic",
    "referral",
    "true",
    "false",
    "null",
    "EUR",
    "USD",
    "session",
    "user",
    "item",
    "price",
)


@dataclass
class DataSet:
    name: str
    records: int
    value_size: int
    codec: str
    partitions: int
    topic: str = ""
    per_batch: int = 0
    wire_bytes: int = 0  # record-batch bytes as stored (compressed for lz4/zstd)
    ends: dict = field(default_factory=dict)  # partition -> end offset (exclusive)

    @property
    def record_bytes(self) -> int:
        """Payload bytes of one record: key + value + header key and value."""
        return KEY_SIZE + self.value_size + len(HEADER_KEY) + HEADER_VALUE_SIZE

    @property
    def payload_mb(self) -> float:
        return self.records * self.record_bytes / 1e6

    def head(self, records: int) -> DataSet:
        """The first ``records`` of this data set (rounded down to whole partitions' worth),
        the same number from each partition."""
        per = max(1, min(records, self.records) // self.partitions)
        return DataSet(
            self.name,
            per * self.partitions,
            self.value_size,
            self.codec,
            self.partitions,
            self.topic,
            self.per_batch,
            0,
            {p: min(end, per) for p, end in self.ends.items()},
        )

    def describe(self) -> str:
        ratio = self.records * self.record_bytes / self.wire_bytes if self.wire_bytes else 0
        return (
            f"{self.name}: {self.records:,} records, {KEY_SIZE}-byte keys, "
            f"{self.value_size}-byte values, 1 header, {self.codec}, {self.partitions} "
            f"partitions, {self.per_batch} records/batch; payload {self.payload_mb:,.0f} MB, "
            f"stored {self.wire_bytes / 1e6:,.0f} MB ({ratio:.1f}x)"
        )


@functools.cache
def _pool(value_size: int, count: int = 512, seed: int = 7) -> np.ndarray:
    """``count`` distinct JSON-like texts of exactly ``value_size`` bytes, as uint8 rows."""
    rng = np.random.default_rng(seed + value_size)
    out = np.empty((count, value_size), dtype=np.uint8)
    words = np.array(_WORDS, dtype=object)
    for i in range(count):
        parts = []
        size = 0
        while size < value_size:
            w = words[rng.integers(len(words))]
            part = f'"{w}":{int(rng.integers(0, 100000))},'
            parts.append(part)
            size += len(part)
        text = ("{" + "".join(parts))[:value_size].encode()
        out[i] = np.frombuffer(text, dtype=np.uint8)
    return out


def _digits(numbers: np.ndarray, width: int) -> np.ndarray:
    """Zero-padded decimal digits of ``numbers`` as an (n, width) uint8 array."""
    powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    return (48 + (numbers[:, None] // powers) % 10).astype(np.uint8)


def _fixed_binary(mat: np.ndarray) -> pa.Array:
    n, width = mat.shape
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(mat))]
    )


def columns(first: int, n: int, value_size: int, seed: int = 7):
    """Keys, values, headers and timestamps of records ``first .. first + n - 1``."""
    rng = np.random.default_rng(seed + first)
    numbers = np.arange(first, first + n, dtype=np.int64)
    key_digits = _digits(numbers, KEY_SIZE)
    pool = _pool(value_size)
    values = pool[rng.integers(0, len(pool), n)]
    values[:, :KEY_SIZE] = key_digits
    hex_digits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    header_values = hex_digits[rng.integers(0, 16, (n, HEADER_VALUE_SIZE))]
    hkeys = pa.array([HEADER_KEY], pa.string()).take(pa.array(np.zeros(n, dtype=np.int32)))
    entries = pa.StructArray.from_arrays(
        [hkeys, _fixed_binary(header_values)], names=["key", "value"]
    )
    headers = pa.ListArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32)), entries)
    timestamps = TS0 + numbers // 8
    return _fixed_binary(key_digits), _fixed_binary(values), headers, timestamps


def produce(bootstrap: str, ds: DataSet, replication_factor: int = 1) -> DataSet:
    """Create ``ds.topic`` and write the data set to it, one thread per partition (acks=all
    when replicated: the end offsets checked at the end are the leaders' high watermarks)."""
    from protocol.client.cluster import KafkaClient
    from protocol.records import encode_batch

    with KafkaClient(bootstrap_servers=bootstrap) as client:
        client.create_topics({ds.topic: ds.partitions}, replication_factor)
        client.wait_for_topics([ds.topic])
    ds.per_batch = max(1, BATCH_BYTES // (ds.record_bytes + 8))
    acks = -1 if replication_factor > 1 else 1
    per_partition = ds.records // ds.partitions
    sizes = [0] * ds.partitions
    errors: list[BaseException] = []

    def write(p: int) -> None:
        try:
            count = per_partition + (1 if p < ds.records % ds.partitions else 0)
            first = p * per_partition + min(p, ds.records % ds.partitions)
            with KafkaClient(bootstrap_servers=bootstrap) as client:
                done = 0
                while done < count:
                    chunk = min(count - done, 50 * ds.per_batch)
                    keys, values, headers, ts = columns(first + done, chunk, ds.value_size)
                    pos = 0
                    while pos < chunk:
                        # whole batches, then the partition's last record alone (see above)
                        step = min(ds.per_batch, count - done - pos - 1) or 1
                        step = min(step, chunk - pos)
                        blob = encode_batch(
                            keys.slice(pos, step),
                            values.slice(pos, step),
                            headers=headers.slice(pos, step),
                            timestamps_ms=ts[pos : pos + step],
                            compression=ds.codec,
                            compression_fallback=False,
                        )
                        response = client.produce(ds.topic, p, blob, acks=acks)
                        if response["error_code"]:
                            raise RuntimeError(f"produce to {ds.topic}-{p} failed: {response}")
                        sizes[p] += len(blob)
                        pos += step
                    done += chunk
            ds.ends[p] = count
        except BaseException as e:  # noqa: BLE001 - reported by the caller
            errors.append(e)

    threads = [threading.Thread(target=write, args=(p,)) for p in range(ds.partitions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    ds.wire_bytes = sum(sizes)
    with KafkaClient(bootstrap_servers=bootstrap) as client:
        latest = client.latest_offsets([(ds.topic, p) for p in range(ds.partitions)])
    for (_, p), end in latest.items():
        if end != ds.ends[p]:
            raise RuntimeError(
                f"{ds.topic}-{p}: broker says the log ends at {end}, "
                f"{ds.ends[p]} records were written"
            )
    return ds
