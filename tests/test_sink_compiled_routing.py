"""The writer's compiled routing, grouping, batch cutting and buffer reuse give the pure
path's answers.

With the compiled encoder (protocol/records/_fastencode.c) the sink routes keyed rows
(``key_partitions``), groups rows by topic and partition (``group_rows``) and cuts pending
rows into batches (``batch_stops``) in one call each, and writes a batch into a delivered
batch's buffer. Each is checked here against the numpy code it replaces, on random rows:
keyed, null and unkeyed rows, a partition column with nulls, several topics, timestamps.
"""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from kafka_sink.batch_state import SPARE_BUFFERS, Batch, SendState
from kafka_sink.batching import PartitionBatcher
from kafka_sink.columns import prepare
from kafka_sink.options import parse_writer_options
from kafka_sink.partitioner import StickyPartitioner
from kafka_sink.writer import _hand_over, route_rows
from protocol.records import accel
from protocol.records.encode_arrow import encode_rows, split_for_batch_size
from protocol.records.row_source import RowSource
from protocol.retry import RetryPolicy

from .helpers.sink import plan_for

pytestmark = pytest.mark.skipif(
    accel.encoder() is None, reason="the compiled encoder is not built or not in use"
)

TOPICS = ["a", "b", "c"]
COUNTS = {"a": 3, "b": 1, "c": 7}


def random_batch(rnd: random.Random, n: int, *, topics: bool, partitions: bool, stamps: bool):
    """Rows with null, empty and random keys, and the columns asked for."""
    keys = [
        None if rnd.random() < 0.2 else bytes(rnd.randrange(256) for _ in range(rnd.randrange(9)))
        for _ in range(n)
    ]
    columns = {
        "key": pa.array(keys, pa.binary()),
        "value": pa.array([b"v" * (i % 5) for i in range(n)]),
    }
    if topics:
        columns["topic"] = pa.array([rnd.choice(TOPICS) for _ in range(n)])
    if partitions:
        columns["partition"] = pa.array(
            [None if rnd.random() < 0.5 else rnd.randrange(1) for _ in range(n)], pa.int32()
        )
    if stamps:
        columns["timestamp"] = pa.array(
            [None if rnd.random() < 0.3 else 1_700_000_000_000_000 + i for i in range(n)],
            pa.timestamp("us", tz="UTC"),
        )
    return pa.RecordBatch.from_pydict(columns)


def _rows(rnd, n, **kinds):
    batch = random_batch(rnd, n, **kinds)
    return prepare(batch, plan_for(batch, None if kinds["topics"] else "a"))


def _route(rows, use_keys, compiled: bool):
    with accel.forced(compiled):
        sticky = StickyPartitioner(40, random.Random(5))
        return [route_rows(rows, COUNTS, sticky, use_keys=use_keys) for _ in range(2)]


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(1, 300),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_compiled_routing_gives_the_pure_partitions(seed, n, topics, partitions, use_keys):
    rows = _rows(random.Random(seed), n, topics=topics, partitions=partitions, stamps=False)
    compiled, pure = _route(rows, use_keys, True), _route(rows, use_keys, False)
    for c, p in zip(compiled, pure):
        assert c.dtype == p.dtype == np.int32
        assert c.tolist() == p.tolist()


class RecordingBatcher:
    def __init__(self):
        self.added = []

    def add(self, topic, partition, s):
        ts = None if s.timestamp_ms is None else s.timestamp_ms.tolist()
        valid = None if s.timestamp_valid is None else s.timestamp_valid.tolist()
        self.added.append(
            (topic, partition, s.rows.tolist(), ts, valid, s.size, s.base_sizes.tolist())
        )


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 300), st.booleans(), st.booleans())
def test_compiled_grouping_gives_the_sorted_groups(seed, n, topics, stamps):
    """``group_rows`` against numpy's stable argsort (the compiled encoder's other path,
    taken when ``group_rows`` declines), group for group, row for row."""
    rows = _rows(random.Random(seed), n, topics=topics, partitions=True, stamps=stamps)
    ext = accel.encoder()
    with accel.forced(True):
        partition = route_rows(rows, COUNTS, StickyPartitioner(40, random.Random(5)))
        compiled = RecordingBatcher()
        _hand_over(rows, partition, compiled)
        numpy_path = RecordingBatcher()
        original = ext.group_rows
        ext.group_rows = lambda *args: None
        try:
            _hand_over(rows, partition, numpy_path)
        finally:
            ext.group_rows = original
    assert compiled.added == numpy_path.added
    assert sum(len(a[2]) for a in compiled.added) == n


def test_group_rows_declines_far_more_partitions_than_rows_and_checks_its_input():
    ext = accel.encoder()
    one = np.zeros(1, np.int64)
    assert ext.group_rows(np.array([1_000_000], np.int32), None, one, one) is None
    with pytest.raises(ValueError, match="negative"):
        ext.group_rows(np.array([-1], np.int32), None, one, one)
    with pytest.raises(ValueError, match="int32"):
        ext.group_rows(np.zeros(2, np.int32), None, one, one)
    with pytest.raises(ValueError, match="topic code"):
        ext.key_partitions(one, one, b"x", np.array([3], np.int32), np.array([2], np.int64))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 20_000), min_size=1, max_size=200),
    st.integers(62, 60_000),
    st.sampled_from([None, 0, 10**6]),
)
def test_compiled_batch_cuts_are_the_pure_ones(base, max_bytes, span):
    base_sizes = np.array(base, np.int64)
    stamps = None if span is None else np.array([0] * (len(base) - 1) + [span], np.int64)
    cuts = []
    for compiled in (True, False):
        with accel.forced(compiled):
            cuts.append(
                split_for_batch_size(
                    None,
                    None,
                    max_batch_bytes=max_bytes,
                    timestamps_ms=stamps,
                    base_sizes=base_sizes,
                )
            )
    assert cuts[0] == cuts[1]


def test_a_batch_written_into_a_used_buffer_is_the_same_bytes():
    src = RowSource(
        pa.array([b"k%d" % i for i in range(50)]), pa.array([b"v" * i for i in range(50)])
    )
    rows = np.arange(3, 40, 2, dtype=np.int64)
    settings_ = dict(timestamps_ms=1_700_000_000_000, producer_id=7, base_sequence=3)
    fresh = encode_rows([(src, rows)], **settings_)
    with accel.forced(False):
        assert encode_rows([(src, rows)], **settings_) == fresh
    for size in (0, 10, len(fresh), 10 * len(fresh)):
        used = bytearray(b"\xaa" * size)
        out = encode_rows([(src, rows)], out=used, **settings_)
        assert out is used and out == fresh
    held = bytearray(b"\xaa" * 10)
    with memoryview(held):  # a view still held: it cannot be resized, a new buffer is used
        out = encode_rows([(src, rows)], out=held, **settings_)
        assert out is not held and out == fresh


class RecyclingProducer:
    """Appends as the task's producer does and hands every batch's buffer back for reuse
    once the next one was built (as if delivered), keeping a copy of its bytes."""

    transactional_id = None

    def __init__(self):
        self.state = SendState()
        self.batches = []
        self.last = None
        self.reused = 0

    def spare_buffer(self):
        return self.state.spare_buffer()

    def append(self, topic, partition, count, build):
        spare = self.state.spare[-1] if self.state.spare else None
        data = build(5, 0, 0)
        self.reused += data is spare
        self.batches.append((topic, partition, count, bytes(data)))
        if self.last is not None:
            self.state.recycle(self.last)
        self.last = Batch(topic, partition, data, count, 0.0, tries=RetryPolicy().start("t"))


def test_batches_written_into_delivered_buffers_are_the_pure_bytes():
    rnd = random.Random(11)
    stamps = pa.array(range(400), pa.timestamp("ms", tz="UTC"))  # no "now": the same bytes
    data = [
        random_batch(rnd, 400, topics=True, partitions=False, stamps=False).append_column(
            "timestamp", stamps
        )
        for _ in range(6)
    ]
    options = parse_writer_options(
        {"kafka.bootstrap.servers": "x:1", "kafka.batch.size": "2000", "kafka.linger.ms": "0"}
    )
    results, reused = [], []
    for compiled in (True, False):
        with accel.forced(compiled):
            producer = RecyclingProducer()
            batcher = PartitionBatcher(options, producer)
            sticky = StickyPartitioner(options.batch_size, random.Random(3))
            for batch in data:
                rows = prepare(batch, plan_for(batch, None))
                _hand_over(rows, route_rows(rows, COUNTS, sticky), batcher)
            batcher.flush()
            results.append(producer.batches)
            reused.append(producer.reused)
    assert len(results[0]) > 20
    assert reused[0] == len(results[0]) - 2 and reused[1] == 0  # the pure path makes new ones
    assert results[0] == results[1]


def test_send_state_keeps_a_few_delivered_buffers_and_forgets_their_batches():
    state = SendState()
    batches = [
        Batch("t", 0, bytearray(10), 1, 0.0, tries=RetryPolicy().start("t"))
        for _ in range(SPARE_BUFFERS + 2)
    ]
    buffers = [b.data for b in batches]
    for b in batches:
        state.recycle(b)
        assert b.data == b""
    assert [id(x) for x in state.spare] == [id(x) for x in buffers[:SPARE_BUFFERS]]
    state.recycle(Batch("t", 0, b"bytes", 1, 0.0, tries=RetryPolicy().start("t")))
    assert state.spare_buffer() is buffers[SPARE_BUFFERS - 1]
