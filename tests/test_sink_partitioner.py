"""murmur2 and the partitioning rules of the sink, against Kafka's Java partitioner.

kafka-python's ``murmur2`` mirrors Java's ``Utils.murmur2`` line by line and is the referee;
the hard-coded vectors below are checked against it too (they are the inputs Kafka's own
``UtilsTest`` uses for murmur2). Every test runs on the numpy path and on the compiled
loop (tests/helpers/decoder_paths.py).
"""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st
from kafka.partitioner.default import murmur2 as referee

from kafka_sink.partitioner import (
    StickyPartitioner,
    key_partitions,
    murmur2,
    murmur2_bytes,
    to_positive,
)

from .helpers.decoder_paths import decoder_path  # noqa: F401 (autouse: numpy and compiled)

# (key, Java's signed murmur2)
VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
    (b"", 275646681),
]


def _signed(u: int) -> int:
    return u - (1 << 32) if u >= 1 << 31 else u


@pytest.mark.parametrize("key,expected", VECTORS)
def test_known_vectors(key, expected):
    assert murmur2_bytes(key) == expected
    assert _signed(referee(key)) == expected


def test_matches_referee_on_random_keys_of_every_length():
    rng = random.Random(7)
    keys = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 70))) for _ in range(4000)]
    got = murmur2(pa.array(keys, pa.binary()))
    assert got.dtype == np.uint32
    assert got.tolist() == [referee(k) for k in keys]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=30))
def test_matches_referee_property(keys):
    assert murmur2(pa.array(keys, pa.binary())).tolist() == [referee(k) for k in keys]


@given(st.integers(0, 23), st.integers(1, 50), st.integers(0, 5))
def test_fixed_width_keys_match_referee(width, n, skip):
    """Keys of one width, end to end, take the table path; a slice starts mid-buffer."""
    keys = [bytes((i * 7 + j) % 256 for j in range(width)) for i in range(n + skip)]
    got = murmur2(pa.array(keys, pa.binary()).slice(skip))
    assert got.tolist() == [referee(k) for k in keys[skip:]]


def test_string_sliced_large_and_null_keys():
    words = ["", "a", "héllo", "kafka-key-123", "x" * 33]
    expected = [referee(w.encode()) for w in words]
    assert murmur2(pa.array(words, pa.string())).tolist() == expected
    assert murmur2(pa.array(words, pa.large_string())).tolist() == expected
    assert murmur2(pa.array([w.encode() for w in words], pa.large_binary())).tolist() == expected
    sliced = pa.array(["zz"] + words, pa.string()).slice(1)
    assert murmur2(sliced).tolist() == expected
    with_nulls = pa.array([b"abc", None, b"de"], pa.binary())
    assert murmur2(with_nulls).tolist() == [referee(b"abc"), referee(b""), referee(b"de")]
    assert murmur2(pa.array([], pa.binary())).tolist() == []


def test_key_partitions_is_java_rule():
    keys = [f"user-{i}".encode() for i in range(500)]
    for n in (1, 3, 7, 100):
        got = key_partitions(pa.array(keys), n)
        assert got.tolist() == [(referee(k) & 0x7FFFFFFF) % n for k in keys]
    assert to_positive(np.array([0xFFFFFFFF], np.uint32)).tolist() == [0x7FFFFFFF]


def test_sticky_runs_fill_one_partition_then_move_on():
    sticky = StickyPartitioner(batch_size=100, rng=random.Random(0))
    sizes = np.full(25, 10)
    parts = sticky.assign("t", sizes, 4)
    first = int(parts[0])
    expected = [(first + i // 10) % 4 for i in range(25)]
    assert parts.tolist() == expected
    # the run goes on across calls: 5 more rows finish the third run, then the fourth
    more = sticky.assign("t", np.full(10, 10), 4)
    assert more.tolist() == [(first + 2) % 4] * 5 + [(first + 3) % 4] * 5
    # topics have runs of their own
    other = sticky.assign("u", np.full(3, 10), 2)
    assert len(set(other.tolist())) == 1


def test_sticky_spreads_evenly():
    sticky = StickyPartitioner(batch_size=1000, rng=random.Random(1))
    parts = sticky.assign("t", np.full(12_000, 10), 6)
    assert np.bincount(parts, minlength=6).tolist() == [2000] * 6
    assert sticky.assign("t", np.zeros(0, np.int64), 6).size == 0


def test_round_robin_and_uniform_sticky_ignore_keys():
    """kafka.partitioner.class: RoundRobinPartitioner deals rows out one partition after
    the other across batches, UniformStickyPartitioner keeps runs, both ignoring keys;
    the partition column still wins."""
    from kafka_sink.columns import prepare
    from kafka_sink.partitioner import RoundRobinPartitioner
    from kafka_sink.validation import WritePlan
    from kafka_sink.writer import route_rows

    plan = WritePlan(
        topic_option="t",
        topic_column=False,
        key_column=True,
        headers_column=False,
        partition_column=True,
        timestamp_kind=None,
    )
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([b"same"] * 6),
            pa.array([b"v"] * 6),
            pa.array([None, None, 0, None, None, None], pa.int32()),
        ],
        names=["key", "value", "partition"],
    )
    rows = prepare(batch, plan)
    rr = RoundRobinPartitioner(random.Random(0))
    first = route_rows(rows, {"t": 3}, rr, use_keys=False)
    second = route_rows(rows, {"t": 3}, rr, use_keys=False)
    dealt = [int(p) for i, p in enumerate(list(first) + list(second)) if i % 6 != 2]
    assert [(b - a) % 3 for a, b in zip(dealt, dealt[1:])] == [1] * 9
    assert first[2] == 0 and second[2] == 0
    sticky = route_rows(rows, {"t": 3}, StickyPartitioner(10**6, random.Random(0)), use_keys=False)
    assert len({int(p) for i, p in enumerate(sticky) if i != 2}) == 1
    keyed = route_rows(rows, {"t": 3}, StickyPartitioner(10**6, random.Random(0)))
    assert len({int(p) for i, p in enumerate(keyed) if i != 2}) == 1  # one key, one place
