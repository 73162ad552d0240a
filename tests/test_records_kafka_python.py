"""kafka-python as a third-party referee, without a broker: bytes its record builders write
decode to the same records through ``decode_records``, and batches ``encode_batch`` writes
parse with its reader to the same keys, values, headers, timestamps and offsets.

kafka-python reads snappy through the ``python-snappy`` module, which is not a dependency
here; the tests hand it a two-function stand-in over cramjam's raw snappy block codec, so
the framing (xerial, chunking) stays kafka-python's own.
"""

import random
import struct
import types

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kafka.codec as kafka_codec  # noqa: E402
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder  # noqa: E402
from kafka.record.legacy_records import LegacyRecordBatchBuilder  # noqa: E402

import cramjam  # noqa: E402

from protocol.records import decode_records  # noqa: E402
from protocol.records.encode_arrow import encode_batch  # noqa: E402

TS = 1_700_000_000_000
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


@pytest.fixture(autouse=True)
def snappy_for_kafka_python(monkeypatch):
    if not kafka_codec.has_snappy():
        monkeypatch.setattr(
            kafka_codec,
            "snappy",
            types.SimpleNamespace(
                compress=lambda b: bytes(cramjam.snappy.compress_raw(bytes(b))),
                decompress=lambda b: bytes(cramjam.snappy.decompress_raw(bytes(b))),
            ),
        )


def kp_batch(base_offset, rows, codec, transactional=False):
    """A v2 batch from kafka-python's builder, with the base offset a broker would assign."""
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=CODECS[codec],
        is_transactional=transactional,
        producer_id=77 if transactional else -1,
        producer_epoch=0 if transactional else -1,
        base_sequence=0 if transactional else -1,
        batch_size=1 << 30,
    )
    for delta, (key, value, headers, ts) in enumerate(rows):
        assert b.append(delta, ts, key, value, headers) is not None
    raw = bytearray(b.build())
    struct.pack_into(">q", raw, 0, base_offset)  # outside the CRC, set by the broker
    return bytes(raw)


def table_rows(batch):
    ts = batch.column("timestamp").cast(pa.int64()).to_pylist()
    out = []
    for i, r in enumerate(batch.select(["offset", "key", "value", "headers"]).to_pylist()):
        headers = [(h["key"], h["value"]) for h in r["headers"]] if r["headers"] else []
        out.append((r["offset"], r["key"], r["value"], headers, ts[i] // 1000))
    return out


row_st = st.tuples(
    st.none() | st.binary(max_size=20),
    st.none() | st.binary(max_size=300),
    st.lists(st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=6)), max_size=3),
    st.integers(TS - 10**9, TS + 10**9),
)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.lists(row_st, min_size=1, max_size=25), min_size=1, max_size=4),
    st.sampled_from(sorted(CODECS)),
    st.integers(0, 1 << 48),
)
def test_kafka_python_v2_batches_decode_identically(groups, codec, base):
    blob, expect, offset = b"", [], base
    for rows in groups:
        blob += kp_batch(offset, rows, codec)
        expect += [(offset + i, k, v, list(h), ts) for i, (k, v, h, ts) in enumerate(rows)]
        offset += len(rows)
    batch, nxt = decode_records(
        blob, topic="t", partition=0, start_offset=base, include_headers=True
    )
    assert table_rows(batch) == expect
    assert nxt == offset
    # and kafka-python reads its own bytes the same way
    pos, seen = 0, []
    while pos < len(blob):
        size = 12 + struct.unpack_from(">i", blob, pos + 8)[0]
        kb = DefaultRecordBatch(bytearray(blob[pos : pos + size]))
        assert kb.validate_crc()
        seen += [(r.offset, r.key, r.value, list(r.headers), r.timestamp) for r in kb]
        pos += size
    assert seen == expect


@settings(max_examples=80, deadline=None)
@given(
    st.lists(row_st, min_size=1, max_size=60),
    st.sampled_from(sorted(CODECS)),
    st.integers(0, 1 << 48),
    st.booleans(),
)
def test_our_batches_parse_with_kafka_python(rows, codec, base, transactional):
    keys = pa.array([r[0] for r in rows], pa.binary())
    values = pa.array([r[1] for r in rows], pa.binary())
    headers = pa.array([[{"key": k, "value": v} for k, v in r[2]] for r in rows], HEADERS)
    ts = np.array([r[3] for r in rows], dtype=np.int64)
    raw = encode_batch(
        keys,
        values,
        headers=headers,
        timestamps_ms=ts,
        base_offset=base,
        compression=codec,
        compression_fallback=False,
        transactional=transactional,
        producer_id=5 if transactional else -1,
        producer_epoch=0 if transactional else -1,
        base_sequence=0 if transactional else -1,
    )
    kb = DefaultRecordBatch(bytearray(raw))
    assert kb.validate_crc()
    assert kb.compression_type == CODECS[codec]
    assert kb.is_transactional == transactional
    assert kb.base_offset == base and kb.next_offset == base + len(rows)
    got = [(r.offset, r.key, r.value, list(r.headers), r.timestamp, r.timestamp_type) for r in kb]
    assert got == [(base + i, k, v, list(h), t, 0) for i, (k, v, h, t) in enumerate(rows)]


def kp_legacy(magic, codec, first_offset, rows):
    """A magic 0/1 message set from kafka-python, offsets assigned as a broker would."""
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 30)
    for i, (key, value, ts) in enumerate(rows):
        # inner offsets: relative in a magic 1 wrapper, absolute otherwise
        inner = i if (codec and magic == 1) else first_offset + i
        assert b.append(inner, ts, key, value) is not None
    raw = bytearray(b.build())
    if codec:  # the wrapper carries the last offset
        struct.pack_into(">q", raw, 0, first_offset + len(rows) - 1)
    return bytes(raw)


legacy_row_st = st.tuples(
    st.none() | st.binary(max_size=20), st.none() | st.binary(max_size=200), st.integers(0, TS * 2)
)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.lists(legacy_row_st, min_size=1, max_size=10), min_size=1, max_size=4),
    st.sampled_from([0, 1]),
    st.sampled_from([0, 1, 2, 3]),
    st.integers(0, 1 << 40),
)
def test_kafka_python_legacy_message_sets(groups, magic, codec, base):
    if magic == 0 and codec == 3 and kafka_codec.xxhash is None:
        codec = 1  # kafka-python needs xxhash to write Kafka 0.8's lz4 framing
    blob, expect, offset = b"", [], base
    for rows in groups:
        blob += kp_legacy(magic, codec, offset, rows)
        expect += [(offset + i, k, v, [], ts if magic else -1) for i, (k, v, ts) in enumerate(rows)]
        offset += len(rows)
    batch, nxt = decode_records(
        blob, topic="t", partition=0, start_offset=base, include_headers=True
    )
    assert table_rows(batch) == expect
    assert batch.column("timestampType").to_pylist() == [0 if magic else -1] * len(expect)
    assert nxt == offset


def test_mixed_formats_like_an_upgraded_topic():
    rnd = random.Random(5)
    rows = [(rnd.randbytes(5), rnd.randbytes(50), TS + i) for i in range(30)]
    blob = (
        kp_legacy(0, 1, 0, rows[:10])
        + kp_legacy(1, 2, 10, rows[10:20])
        + kp_batch(20, [(k, v, [], ts) for k, v, ts in rows[20:]], "zstd")
    )
    batch, nxt = decode_records(blob, topic="t", partition=0, start_offset=0)
    assert batch.column("value").to_pylist() == [v for _, v, _ in rows]
    assert batch.column("offset").to_pylist() == list(range(30)) and nxt == 30
