"""Planning: topic resolution, offset resolution, range pairing and range splitting."""

import logging
import pickle
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_source.options import parse_reader_options
from kafka_source.offset_specs import (
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    OffsetRange,
    SpecificOffsets,
    SpecificTimestamps,
    Subscription,
)
from kafka_source.planning import (
    PlanningError,
    build_ranges,
    discover_partitions,
    partitions_from_metadata,
    plan_batch,
    resolve_offsets,
)
from kafka_source.task_split import plan_ranges
from protocol.client.cluster import ClusterMetadata, PartitionInfo, TopicInfo
from protocol.errors import BrokerError, ConfigError


def r(topic, start, end, partition=1, host=None):
    return OffsetRange(topic, partition, start, end, host)


# ---- plan_ranges: the expectations of Spark's KafkaOffsetRangeCalculatorSuite -----------
# Three topic-partitions t1-1, t2-1, t3-1 as in that suite; each case is
# (minPartitions, maxRecordsPerPartition, input ranges, expected ranges).

SPARK_CASES = {
    "no options: N ranges to N ranges": (None, None, [r("t1", 1, 2)], [r("t1", 1, 2)]),
    "no options: empty ranges dropped": (
        None,
        None,
        [r("t1", 1, 2), r("t2", 1, 1)],
        [r("t1", 1, 2)],
    ),
    "min 3: N ranges to N ranges": (
        3,
        None,
        [r("t1", 1, 2), r("t2", 1, 2), r("t3", 1, 2)],
        [r("t1", 1, 2), r("t2", 1, 2), r("t3", 1, 2)],
    ),
    "min 4: one range to four": (
        4,
        None,
        [r("t1", 1, 5)],
        [r("t1", 1, 2), r("t1", 2, 3), r("t1", 3, 4), r("t1", 4, 5)],
    ),
    "min 4: skewed ranges": (
        4,
        None,
        [r("t1", 1, 5), r("t2", 1, 21)],
        [r("t1", 1, 5), r("t2", 1, 7), r("t2", 7, 14), r("t2", 14, 21)],
    ),
    "min 4: empty range ignored, the rest split (SPARK-30656)": (
        4,
        None,
        [r("t1", 1, 1), r("t2", 1, 21)],
        [r("t2", 1, 6), r("t2", 6, 11), r("t2", 11, 16), r("t2", 16, 21)],
    ),
    "min 4: very skewed ranges (SPARK-30656)": (
        4,
        None,
        [r("t1", 1, 2), r("t2", 1, 1001)],
        [r("t1", 1, 2), r("t2", 1, 334), r("t2", 334, 667), r("t2", 667, 1001)],
    ),
    "min 1: fewer than the ranges (SPARK-30656)": (
        1,
        None,
        [r("t1", 1, 5), r("t2", 1, 21)],
        [r("t1", 1, 5), r("t2", 1, 21)],
    ),
    "min 3: inexact multiple": (
        3,
        None,
        [r("t1", 1, 11)],
        [r("t1", 1, 4), r("t1", 4, 7), r("t1", 7, 11)],
    ),
    "min 4: empty ranges ignored": (
        4,
        None,
        [r("t1", 1, 5), r("t2", 1, 21), r("t3", 1, 1)],
        [r("t1", 1, 5), r("t2", 1, 7), r("t2", 7, 14), r("t2", 14, 21)],
    ),
    "min 6: never drop offsets (SPARK-28489)": (
        6,
        None,
        [r("t1", 0, 10), r("t2", 0, 10), r("t3", 0, 1)],
        [
            r("t1", 0, 3),
            r("t1", 3, 6),
            r("t1", 6, 10),
            r("t2", 0, 3),
            r("t2", 3, 6),
            r("t2", 6, 10),
            r("t3", 0, 1),
        ],
    ),
    "min 9: no small range, three large (SPARK-36576)": (
        9,
        None,
        [r("t1", 0, 10000), r("t2", 0, 15000), r("t3", 0, 20000)],
        [
            r("t1", 0, 5000),
            r("t1", 5000, 10000),
            r("t2", 0, 5000),
            r("t2", 5000, 10000),
            r("t2", 10000, 15000),
            r("t3", 0, 5000),
            r("t3", 5000, 10000),
            r("t3", 10000, 15000),
            r("t3", 15000, 20000),
        ],
    ),
    "min 6: one small range, two large (SPARK-36576)": (
        6,
        None,
        [r("t1", 0, 500), r("t2", 0, 12000), r("t3", 0, 15001)],
        [
            r("t1", 0, 500),
            r("t2", 0, 6000),
            r("t2", 6000, 12000),
            r("t3", 0, 5000),
            r("t3", 5000, 10000),
            r("t3", 10000, 15001),
        ],
    ),
    "min 6: two small ranges, one large (SPARK-36576)": (
        6,
        None,
        [r("t1", 0, 1), r("t2", 0, 1), r("t3", 0, 10000)],
        [
            r("t1", 0, 1),
            r("t2", 0, 1),
            r("t3", 0, 2500),
            r("t3", 2500, 5000),
            r("t3", 5000, 7500),
            r("t3", 7500, 10000),
        ],
    ),
    "min 4: small ranges stay whole (SPARK-46798)": (
        4,
        None,
        [r("t1", 0, 1), r("t2", 0, 1), r("t3", 0, 2)],
        [r("t1", 0, 1), r("t2", 0, 1), r("t3", 0, 1), r("t3", 1, 2)],
    ),
    "max 4: a range of 4 is not split (SPARK-49259)": (None, 4, [r("t1", 1, 5)], [r("t1", 1, 5)]),
    "max 4: a range of 1 is not split (SPARK-49259)": (None, 4, [r("t1", 1, 2)], [r("t1", 1, 2)]),
    "max 4: a range of 5 is split in two (SPARK-49259)": (
        None,
        4,
        [r("t1", 1, 6)],
        [r("t1", 1, 3), r("t1", 3, 6)],
    ),
    "max 20: N ranges (SPARK-49259)": (
        None,
        20,
        [r("t1", 1, 40), r("t2", 1, 50), r("t3", 1, 60)],
        [
            r("t1", 1, 20),
            r("t1", 20, 40),
            r("t2", 1, 17),
            r("t2", 17, 33),
            r("t2", 33, 50),
            r("t3", 1, 20),
            r("t3", 20, 40),
            r("t3", 40, 60),
        ],
    ),
    "min 1 and max 20 (SPARK-49259)": (1, 20, [r("t1", 1, 40)], [r("t1", 1, 20), r("t1", 20, 40)]),
    "min 4 and max 20 (SPARK-49259)": (
        4,
        20,
        [r("t1", 1, 40)],
        [r("t1", 1, 10), r("t1", 10, 20), r("t1", 20, 30), r("t1", 30, 40)],
    ),
}


@pytest.mark.parametrize("case", list(SPARK_CASES))
def test_spark_calculator_examples(case):
    min_partitions, max_records, ranges, expected = SPARK_CASES[case]
    assert plan_ranges(ranges, min_partitions, max_records) == expected


def test_unsplit_ranges_keep_their_host_and_split_ones_lose_it():
    ranges = [r("t1", 0, 1, host="h1"), r("t2", 0, 1, host="h2"), r("t3", 0, 1, host="h3")]
    assert plan_ranges(ranges, 3) == ranges
    assert [x.preferred_host for x in plan_ranges(ranges)] == ["h1", "h2", "h3"]
    split = plan_ranges([r("t1", 0, 1, host="h1"), r("t3", 0, 2, host="h3")], 3)
    assert [x.preferred_host for x in split] == [None, None, None]


def test_half_rounds_up_like_the_jvm():
    # Shares of 5/8 and 3/8 of 4 parts are 2.5 and 1.5 parts: Math.round makes them 3 and
    # 2; Python's round (half to even) would make them 2 and 2.
    ranges = [r("t1", 0, 5), r("t2", 0, 3)]
    assert [x.topic for x in plan_ranges(ranges, 4)] == ["t1"] * 3 + ["t2"] * 2
    ranges = [r("t1", 0, 5), r("t2", 0, 5)]
    parts = plan_ranges(ranges, 5)  # each share is 2.5 parts
    assert [x.topic for x in parts] == ["t1"] * 3 + ["t2"] * 3


def test_inverted_ranges_are_dropped():
    assert plan_ranges([r("t1", 5, 3), r("t2", 0, 2)]) == [r("t2", 0, 2)]
    assert plan_ranges([r("t1", 5, 3)], 4, 2) == []


@pytest.mark.parametrize(
    "kwargs, option",
    [
        ({"min_partitions": 0}, "minPartitions"),
        ({"max_records_per_partition": -1}, "maxRecordsPerPartition"),
        ({"min_partitions": 2.5}, "minPartitions"),
    ],
)
def test_bad_split_settings(kwargs, option):
    with pytest.raises(ConfigError, match=option):
        plan_ranges([r("t1", 0, 10)], **kwargs)


def test_offset_range_is_small_and_picklable():
    x = OffsetRange("t", 3, 10, 20)
    assert x.size == 10 and x.topic_partition == ("t", 3) and x.preferred_host is None
    assert pickle.loads(pickle.dumps(x)) == x


# ---- plan_ranges properties -------------------------------------------------------------

range_lists = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 10**12), st.integers(-5, 2000)),
    max_size=8,
    unique_by=lambda t: t[0],
).map(
    lambda items: [OffsetRange(f"topic{i % 2}", i, start, start + size) for i, start, size in items]
)
optional_min_partitions = st.one_of(st.none(), st.integers(1, 64))
optional_max_records = st.one_of(st.none(), st.integers(1, 8), st.integers(9, 3000))


@settings(max_examples=120, deadline=None)
@given(range_lists, optional_min_partitions, optional_max_records)
def test_parts_cover_each_range_exactly(ranges, min_partitions, max_records):
    parts = plan_ranges(ranges, min_partitions, max_records)
    assert all(p.size > 0 for p in parts)
    for rng in ranges:
        mine = [p for p in parts if p.topic_partition == rng.topic_partition]
        if rng.size <= 0:
            assert mine == []
            continue
        # contiguous, in order, no gap and no overlap, exactly [start, end)
        assert mine[0].start == rng.start and mine[-1].end == rng.end
        assert all(a.end == b.start for a, b in zip(mine, mine[1:]))
        assert sum(p.size for p in mine) == rng.size
    # the input order of topic-partitions is kept
    order = [p.topic_partition for p in parts]
    assert order == sorted(order, key=[x.topic_partition for x in ranges].index)


@settings(max_examples=120, deadline=None)
@given(range_lists, st.one_of(st.integers(1, 8), st.integers(9, 5000)))
def test_max_records_bounds_every_part(ranges, max_records):
    parts = plan_ranges(ranges, None, max_records)
    assert all(0 < p.size <= max_records for p in parts)
    for rng in ranges:  # and uses the fewest parts that can
        if rng.size > 0:
            count = sum(p.topic_partition == rng.topic_partition for p in parts)
            assert count == -(-rng.size // max_records)


@settings(max_examples=120, deadline=None)
@given(range_lists, st.integers(1, 64), optional_max_records)
def test_min_partitions_never_reduces_parts(ranges, min_partitions, max_records):
    without = plan_ranges(ranges, None, max_records)
    with_min = plan_ranges(ranges, min_partitions, max_records)
    assert len(with_min) >= len(without)
    if max_records is not None:
        assert all(p.size <= max_records for p in with_min)


# ---- topic resolution -------------------------------------------------------------------


def topic(name, partitions, *, internal=False, error=0, leader=1):
    return TopicInfo(
        name,
        uuid.UUID(int=0),
        {p: PartitionInfo(name, p, leader) for p in range(partitions)},
        error,
        internal,
    )


def metadata(*topics):
    return ClusterMetadata(
        {1: ("kafka-1.local", 9092), 2: ("kafka-2.local", 9092)},
        1,
        "cluster",
        {t.name: t for t in topics},
    )


META = metadata(
    topic("orders.eu", 2),
    topic("orders.us", 1),
    topic("audit", 3),
    topic("__consumer_offsets", 2, internal=True),
    topic("myorders.x", 1),
)


def test_subscribe_lists_every_partition():
    sub = Subscription("subscribe", topics=("orders.us", "audit"))
    assert partitions_from_metadata(sub, META) == [
        ("audit", 0),
        ("audit", 1),
        ("audit", 2),
        ("orders.us", 0),
    ]


def test_subscribe_to_a_missing_topic():
    sub = Subscription("subscribe", topics=("orders.us", "nope"))
    with pytest.raises(PlanningError, match="subscribe.*'nope'"):
        partitions_from_metadata(sub, META)


def test_pattern_searches_names_and_skips_internal_topics():
    sub = Subscription("subscribePattern", pattern=r"orders\.")
    assert partitions_from_metadata(sub, META) == [
        ("myorders.x", 0),
        ("orders.eu", 0),
        ("orders.eu", 1),
        ("orders.us", 0),
    ]
    anchored = Subscription("subscribePattern", pattern=r"^orders\..*$")
    assert {t for t, _ in partitions_from_metadata(anchored, META)} == {"orders.eu", "orders.us"}
    everything = Subscription("subscribePattern", pattern=".*")
    assert "__consumer_offsets" not in {t for t, _ in partitions_from_metadata(everything, META)}
    assert partitions_from_metadata(Subscription("subscribePattern", pattern="zzz"), META) == []


def test_assign_leaves_out_partitions_that_do_not_exist_yet(caplog):
    """As Spark's AssignStrategy (the topic's partitions, filtered by the assignment): a
    partition the topic does not have is left out with a warning, not an error (issue 17
    item 6). A missing topic is still an error, as Spark's describeTopics makes it."""
    caplog.set_level(logging.WARNING, logger="pykafka.source")
    sub = Subscription("assign", partitions=(("audit", 2), ("orders.us", 0)))
    assert partitions_from_metadata(sub, META) == [("audit", 2), ("orders.us", 0)]
    assert caplog.text == ""
    ahead = Subscription("assign", partitions=(("audit", 7), ("orders.us", 0)))
    assert partitions_from_metadata(ahead, META) == [("orders.us", 0)]
    assert "audit-7" in caplog.text and "do not exist (yet)" in caplog.text
    grown = metadata(topic("audit", 8), topic("orders.us", 1))
    assert partitions_from_metadata(ahead, grown) == [("audit", 7), ("orders.us", 0)]
    with pytest.raises(PlanningError, match=r"assign.*'gone'"):
        partitions_from_metadata(Subscription("assign", partitions=(("gone", 0),)), META)


def test_internal_topics_are_never_read(caplog):
    """Spark's strategies drop internal topics for subscribe and assign as well as for a
    pattern (issue 17 item 13); naming one is warned about."""
    caplog.set_level(logging.WARNING, logger="pykafka.source")
    sub = Subscription("subscribe", topics=("__consumer_offsets", "orders.us"))
    assert partitions_from_metadata(sub, META) == [("orders.us", 0)]
    assert "skipping internal topic(s) __consumer_offsets" in caplog.text
    only = Subscription("subscribe", topics=("__consumer_offsets",))
    assert partitions_from_metadata(only, META) == []
    assigned = Subscription("assign", partitions=(("__consumer_offsets", 0), ("audit", 1)))
    assert partitions_from_metadata(assigned, META) == [("audit", 1)]
    assert "do not exist" not in caplog.text


def test_an_empty_assignment_selects_nothing():
    assert partitions_from_metadata(Subscription("assign", partitions=()), META) == []


def test_topic_errors_surface_as_broker_errors():
    meta = metadata(topic("secret", 1, error=29))
    with pytest.raises(BrokerError, match="TOPIC_AUTHORIZATION_FAILED"):
        partitions_from_metadata(Subscription("subscribe", topics=("secret",)), meta)


# ---- offset resolution (a fake client: resolve_offsets depends only on its answers) -----


class FakeClient:
    """Answers ListOffsets from a tiny model of each partition: its log start, its high
    watermark, its last stable offset, and the timestamps of its records."""

    def __init__(self, partitions, meta=None):
        # partitions: {(topic, p): (log_start, high_watermark, last_stable, [timestamps])}
        self.partitions = partitions
        self.meta = meta
        self.calls = []

    def list_offsets(self, timestamps, isolation_level=0):
        self.calls.append((dict(timestamps), isolation_level))
        answers = {}
        for tp, ts in timestamps.items():
            start, high, stable, times = self.partitions[tp]
            if ts == -2:
                answers[tp] = (start, -1)
            elif ts == -1:
                answers[tp] = (stable if isolation_level == 1 else high, -1)
            else:
                found = [(start + i, t) for i, t in enumerate(times) if t >= ts]
                answers[tp] = found[0] if found else (-1, -1)
        return answers

    def refresh_metadata(self, topics=None):
        self.calls.append(("metadata", topics))
        return self.meta


TP0, TP1 = ("t", 0), ("t", 1)
CLIENT_MODEL = {
    TP0: (10, 20, 18, [100 + i for i in range(10)]),
    TP1: (0, 5, 5, [50, 60, 70, 80, 90]),
}


def test_minus_one_and_minus_two_timestamps_ask_for_latest_and_earliest():
    """-1/-2 go to ListOffsets as they are, as Spark's admin client sends them."""
    client = FakeClient(CLIENT_MODEL)
    spec = SpecificTimestamps(((TP0, -1), (TP1, -2)))
    assert resolve_offsets(spec, [TP0, TP1], client) == {TP0: 20, TP1: 0}
    assert resolve_offsets(GlobalTimestamp(-1), [TP0, TP1], client) == {TP0: 20, TP1: 5}


def test_earliest_and_latest():
    client = FakeClient(CLIENT_MODEL)
    assert resolve_offsets(EarliestOffsets(), [TP0, TP1], client) == {TP0: 10, TP1: 0}
    assert resolve_offsets(LatestOffsets(), [TP0, TP1], client) == {TP0: 20, TP1: 5}
    assert resolve_offsets(LatestOffsets(), [TP0, TP1], client, isolation_level=1) == {
        TP0: 18,
        TP1: 5,
    }
    assert client.calls[-1][1] == 1


def test_specific_offsets_bind_sentinels_in_one_request():
    client = FakeClient(CLIENT_MODEL)
    spec = SpecificOffsets(((TP0, -2), (TP1, 3)))
    assert resolve_offsets(spec, [TP0, TP1], client) == {TP0: 10, TP1: 3}
    spec = SpecificOffsets(((TP0, -1), (TP1, -2)), "endingOffsets")
    assert resolve_offsets(spec, [TP0, TP1], client, is_starting=False) == {TP0: 20, TP1: 0}
    assert len(client.calls) == 2
    assert resolve_offsets(SpecificOffsets(((TP0, 12), (TP1, 1))), [TP0, TP1], FakeClient({})) == {
        TP0: 12,
        TP1: 1,
    }


def test_specific_offsets_must_name_exactly_the_assigned_partitions():
    client = FakeClient(CLIENT_MODEL)
    with pytest.raises(PlanningError) as info:
        resolve_offsets(SpecificOffsets(((TP0, 1),)), [TP0, TP1], client)
    message = str(info.value)
    assert message.startswith("startingOffsets:")
    assert "don't match what are assigned" in message and "not specified: {t-1}" in message
    with pytest.raises(PlanningError, match=r"endingOffsets.*not assigned: \{t-9\}"):
        resolve_offsets(
            SpecificOffsets(((TP0, 1), (TP1, 1), (("t", 9), 1)), "endingOffsets"),
            [TP0, TP1],
            client,
            is_starting=False,
        )


def test_timestamps_resolve_to_the_first_offset_at_or_after():
    client = FakeClient(CLIENT_MODEL)
    spec = SpecificTimestamps(((TP0, 103), (TP1, 65)))
    assert resolve_offsets(spec, [TP0, TP1], client) == {TP0: 13, TP1: 2}
    assert resolve_offsets(GlobalTimestamp(0), [TP0, TP1], client) == {TP0: 10, TP1: 0}


def test_no_offset_at_a_starting_timestamp_is_an_error_by_default():
    client = FakeClient(CLIENT_MODEL)
    with pytest.raises(PlanningError) as info:
        resolve_offsets(GlobalTimestamp(95), [TP0, TP1], client)
    message = str(info.value)
    assert message.startswith("startingTimestamp:")
    assert "No offset matched from request of topic-partition t-1 and timestamp 95" in message
    with pytest.raises(PlanningError, match="startingOffsetsByTimestamp.*t-0.*500"):
        resolve_offsets(SpecificTimestamps(((TP0, 500), (TP1, 0))), [TP0, TP1], client)


def test_latest_strategy_and_ending_timestamps_fall_back_to_latest():
    client = FakeClient(CLIENT_MODEL)
    spec = GlobalTimestamp(95, "latest")
    assert resolve_offsets(spec, [TP0, TP1], client) == {TP0: 10, TP1: 5}
    ending = SpecificTimestamps(((TP0, 500), (TP1, 70)), "error", "endingOffsetsByTimestamp")
    assert resolve_offsets(ending, [TP0, TP1], client, is_starting=False) == {TP0: 20, TP1: 2}
    assert resolve_offsets(ending, [TP0, TP1], client, is_starting=False, isolation_level=1) == {
        TP0: 18,
        TP1: 2,
    }


def test_timestamps_must_name_exactly_the_assigned_partitions():
    with pytest.raises(PlanningError, match="endingOffsetsByTimestamp.*timestamp based end"):
        resolve_offsets(
            SpecificTimestamps(((TP0, 1),), "error", "endingOffsetsByTimestamp"),
            [TP0, TP1],
            FakeClient(CLIENT_MODEL),
            is_starting=False,
        )


def test_a_partition_the_cluster_does_not_answer_for():
    class Silent(FakeClient):
        def list_offsets(self, timestamps, isolation_level=0):
            return {}

    with pytest.raises(PlanningError, match="startingOffsets.*t-0"):
        resolve_offsets(EarliestOffsets(), [TP0], Silent({}))


# ---- build_ranges -----------------------------------------------------------------------


def test_build_ranges_pairs_and_sorts():
    assert build_ranges({TP1: 0, TP0: 3}, {TP0: 8, TP1: 0}, {TP0: "h"}) == [
        OffsetRange("t", 0, 3, 8, "h"),
        OffsetRange("t", 1, 0, 0, None),
    ]


def test_build_ranges_start_after_end():
    with pytest.raises(PlanningError) as info:
        build_ranges({TP0: 9}, {TP0: 4})
    message = str(info.value)
    assert "startingOffsets" in message
    assert (
        "The resolved start offset 9 is greater than the resolved end offset 4 for "
        "topic t partition 0" in message
    )


def test_build_ranges_different_partitions():
    with pytest.raises(PlanningError, match="different topic partitions"):
        build_ranges({TP0: 0}, {TP1: 0})


# ---- plan_batch -------------------------------------------------------------------------


def test_plan_batch_end_to_end():
    meta = metadata(topic("t", 2, leader=2), topic("other", 1))
    client = FakeClient(CLIENT_MODEL, meta)
    options = parse_reader_options(
        {
            "kafka.bootstrap.servers": "b:9092",
            "subscribe": "t",
            "startingOffsets": '{"t":{"0":12,"1":-2}}',
            "minPartitions": "3",
        }
    )
    ranges = plan_batch(options, client)
    assert client.calls[0] == ("metadata", ["t"])
    # t-0 [12, 20) and t-1 [0, 5): three parts, the larger range split in two
    assert ranges == [
        OffsetRange("t", 0, 12, 16),
        OffsetRange("t", 0, 16, 20),
        OffsetRange("t", 1, 0, 5),
    ]
    unsplit = plan_batch(
        parse_reader_options({"kafka.bootstrap.servers": "b:9092", "subscribe": "t"}), client
    )
    assert unsplit == [
        OffsetRange("t", 0, 10, 20, "kafka-2.local"),
        OffsetRange("t", 1, 0, 5, "kafka-2.local"),
    ]


def test_plan_batch_with_a_pattern_matching_nothing():
    client = FakeClient(CLIENT_MODEL, metadata(topic("t", 2)))
    options = parse_reader_options(
        {"kafka.bootstrap.servers": "b:9092", "subscribePattern": "^nothing$"}
    )
    assert plan_batch(options, client) == []
    assert client.calls == [("metadata", None)]


def test_plan_batch_needs_batch_options():
    options = parse_reader_options(
        {"kafka.bootstrap.servers": "b:9092", "subscribe": "t"}, for_streaming=True
    )
    with pytest.raises(ConfigError):
        plan_batch(options, FakeClient(CLIENT_MODEL))


def test_discover_partitions_asks_only_for_named_topics():
    client = FakeClient(CLIENT_MODEL, META)
    sub = Subscription("assign", partitions=(("orders.us", 0), ("audit", 1)))
    assert discover_partitions(sub, client) == [("audit", 1), ("orders.us", 0)]
    assert client.calls == [("metadata", ["audit", "orders.us"])]


def test_a_large_read_packs_its_small_ranges_into_few_tasks():
    """Past ONE_TASK_RECORDS, ranges of up to SMALL_RANGE_RECORDS share tasks of at most
    RANGES_PER_SMALL_TASK ranges and ONE_TASK_RECORDS records, each group where its first
    range stands; a larger range keeps a task of its own; minPartitions or
    maxRecordsPerPartition give every range its task."""
    from kafka_source.task_split import (
        ONE_TASK_RECORDS,
        RANGES_PER_SMALL_TASK,
        SMALL_RANGE_RECORDS,
        task_groups,
    )

    wide = list(range(10_000))  # a topic of 10,000 partitions of 20 records each
    groups = task_groups(wide, [20] * len(wide), None, None)
    assert [len(g) for g in groups] == [RANGES_PER_SMALL_TASK] * 10
    assert [i for g in groups for i in g] == wide
    # records bound a group too: 25 ranges of 1,000 records -> 20 + 5
    assert [len(g) for g in task_groups(list(range(25)), [1_000] * 25, None, None)] == [20, 5]
    sizes = [5, SMALL_RANGE_RECORDS + 1, 7, ONE_TASK_RECORDS, 3]
    assert task_groups(list("abcde"), sizes, None, None) == [["a", "c", "e"], ["b"], ["d"]]
    assert task_groups(list("abcde"), sizes, 2, None) == [[c] for c in "abcde"]
    assert task_groups(list("abcde"), sizes, None, 10) == [[c] for c in "abcde"]
    # a small read (ONE_TASK_RECORDS or fewer in all): one task per 1,000 ranges, as before
    assert task_groups(list("abc"), [1, 2, 3], None, None) == [["a", "b", "c"]]
