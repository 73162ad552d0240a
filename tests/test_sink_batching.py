"""Rows to record batches, without a broker: reading Arrow batches, routing, batching.

A recording stand-in for the producer keeps what the batcher appends; the batches are
decoded back with the reference decoder of ``protocol.records.batch``. Every test runs on
the pure-Python path and on the compiled encoder (tests/helpers/decoder_paths.py).
"""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from kafka.partitioner.default import murmur2 as referee_murmur2
from kafka_sink.batching import PartitionBatcher
from kafka_sink.columns import _trunc_div, as_binary, prepare
from kafka_sink.options import parse_writer_options
from kafka_sink.partitioner import StickyPartitioner
from kafka_sink.validation import WritePlan
from kafka_sink.writer import _hand_over, route_rows
from protocol.records import reference_decode

from .helpers.decoder_paths import decoder_path  # noqa: F401 (autouse: both encoders)
from .helpers.sink import HEADERS_TYPE, plan_for, rows


class RecordingProducer:
    def __init__(self):
        self.batches = []  # (topic, partition, count, bytes)
        self.sequences: dict = {}

    def append(self, topic, partition, count, build):
        seq = self.sequences.get((topic, partition), 0)
        self.sequences[(topic, partition)] = seq + count
        self.batches.append((topic, partition, count, build(5, 0, seq)))


def opts(**extra):
    return parse_writer_options(
        {
            "kafka.bootstrap.servers": "x:1",
            "topic": "t",
            **{f"kafka.{k}": str(v) for k, v in extra.items()},
        }
    )


def feed(data, options, counts, plan=None, waits=None):
    producer = RecordingProducer()
    batcher = PartitionBatcher(options, producer)
    sticky = StickyPartitioner(options.batch_size, random.Random(3))
    for i, batch in enumerate(data):
        if waits is not None:
            batcher.input_waited(waits[i])
        r = prepare(batch, plan or plan_for(batch, "t"))
        _hand_over(r, route_rows(r, counts, sticky), batcher)
    return producer, batcher


def decoded(producer):
    out = {}
    for topic, partition, count, data in producer.batches:
        header, records = reference_decode.decode_batch(data)
        assert header.record_count == count == len(records)
        assert (header.producer_id, header.producer_epoch) == (5, 0)
        out.setdefault((topic, partition), []).append((header, records))
    return out


def test_rows_become_batches_within_the_size_limit_in_order():
    options = opts(**{"batch.size": 5000})
    producer, batcher = feed([rows(3000, s) for s in range(0, 12_000, 3000)], options, {"t": 3})
    batcher.flush()
    got = decoded(producer)
    total = 0
    for (_topic, partition), entries in got.items():
        sequence = 0
        values = []
        for header, records in entries:
            assert header.size <= 5000
            assert header.base_sequence == sequence
            sequence += header.record_count
            for r in records:
                assert (referee_murmur2(r.key) & 0x7FFFFFFF) % 3 == partition
                values.append(int(r.value[1:]))
        assert values == sorted(values)
        total += len(values)
    assert total == 12_000
    # batches fill up across Arrow batches: all but the last of a partition are near full
    for entries in got.values():
        for header, _ in entries[:-1]:
            assert header.size > 5000 * 0.9


def test_a_record_larger_than_batch_size_gets_a_batch_of_its_own():
    options = opts(**{"batch.size": 1000})
    producer, batcher = feed(
        [rows(5, value_size=3000)],
        options,
        {"t": 1},
        plan=WritePlan("t", False, True, False, False, None),
    )
    batcher.flush()
    assert [count for _, _, count, _ in producer.batches] == [1] * 5


def test_linger_counts_only_time_waiting_for_input():
    options = opts(**{"linger.ms": 50})
    data = [rows(100, s, keys=False) for s in range(0, 500, 100)]
    producer, batcher = feed(data, options, {"t": 1}, waits=[0.001] * 5)
    assert producer.batches == []  # fast input: rows wait for a full batch
    batcher.input_waited(0.06)  # the input stalls past linger.ms
    assert sum(c for _, _, c, _ in producer.batches) == 500
    batcher.flush()
    assert sum(c for _, _, c, _ in producer.batches) == 500


def test_headers_timestamps_and_nulls_survive():
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([b"a", None, b"c"]),
            pa.array([b"1", b"2", None]),
            pa.array([[{"key": "x", "value": b"y"}], None, []], HEADERS_TYPE),
            pa.array([5_000_999, None, 7_000_000], pa.timestamp("us", tz="UTC")),
        ],
        names=["key", "value", "headers", "timestamp"],
    )
    producer, batcher = feed([batch], opts(), {"t": 1})
    batcher.flush()
    ((_, records),) = decoded(producer)[("t", 0)]
    assert [(r.key, r.value, tuple(r.headers)) for r in records] == [
        (b"a", b"1", (("x", b"y"),)),
        (None, b"2", ()),
        (b"c", None, ()),
    ]
    assert records[0].timestamp == 5_000 and records[2].timestamp == 7_000
    assert records[1].timestamp > 1_600_000_000_000  # null: now


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches(codec):
    producer, batcher = feed(
        [rows(2000, value_size=80)], opts(**{"compression.type": codec}), {"t": 2}
    )
    batcher.flush()
    got = decoded(producer)
    assert sum(len(recs) for entries in got.values() for _, recs in entries) == 2000
    for entries in got.values():
        assert all(h.compression != 0 for h, _ in entries)


def test_prepare_reads_spark_types():
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(["t1", None, "t2", "t1"]),
            pa.array(["k", None, "k2", "k3"], pa.large_string()),
            pa.array(["v1", "v2", "v3", "v4"]),
            pa.array([1, None, 0, 2], pa.int32()),
            pa.array([1.0015, -0.0005, None, 2.5]),
        ],
        names=["topic", "key", "value", "partition", "timestamp"],
    )
    plan = WritePlan(None, True, True, False, True, "double")
    r = prepare(batch, plan)
    assert r.topics == ["t1", "t2"] and r.topic_codes.tolist() == [0, -1, 1, 0]
    assert r.null_topics == 1
    assert r.key.type == pa.binary() and r.key.to_pylist() == [b"k", None, b"k2", b"k3"]
    assert r.value.to_pylist() == [b"v1", b"v2", b"v3", b"v4"]
    assert r.partition_valid.tolist() == [True, False, True, True]
    assert r.partition[r.partition_valid].tolist() == [1, 0, 2]
    assert r.timestamp_valid.tolist() == [True, True, False, True]
    # seconds -> micros (truncated) -> ms (truncated toward zero, like Java)
    assert r.timestamp_ms[r.timestamp_valid].tolist() == [1001, 0, 2500]
    assert (r.sizes > 0).all()


def test_java_division_and_binary_views():
    values = np.array([-2500, -1000, -999, 0, 999, 1000, 2500])
    assert _trunc_div(values, 1000).tolist() == [-2, -1, 0, 0, 0, 1, 2]
    s = pa.array(["é", None])
    assert as_binary(s).to_pylist() == ["é".encode(), None]
    assert as_binary(pa.array([b"x"], pa.large_binary())).type == pa.binary()


def test_route_rows_rules():
    n = 12
    keys = pa.array([None, b"a", b"b", None] * 3, pa.binary())
    batch = pa.RecordBatch.from_arrays(
        [keys, pa.array([b"v"] * n), pa.array([None, None, 3, None] * 3, pa.int32())],
        names=["key", "value", "partition"],
    )
    r = prepare(batch, WritePlan("t", False, True, False, True, None))
    parts = route_rows(r, {"t": 4}, StickyPartitioner(10**6, random.Random(0)))
    for i in range(n):
        if i % 4 == 2:
            assert parts[i] == 3
        elif i % 4 == 1:
            assert parts[i] == (referee_murmur2(b"a") & 0x7FFFFFFF) % 4
    assert len({int(parts[i]) for i in range(n) if i % 4 in (0, 3)}) == 1
