"""``spark.readStream.format("pykafka")``: streaming reads.

Spark queries run against Apache Kafka (the session's ``kafka``) unless the behaviour needs
librdkafka's mock cluster (records deleted under a query, leaders moved). Each query is
bounded (``Trigger.AvailableNow``, or a processing-time query stopped once its rows
arrived) and writes to a parquet sink read back through the sink's own log, so "exactly
once" is what a reader of the sink sees. confluent-kafka produces the data and reads the
committed group offsets.

``startingTimestamp`` and ``startingOffsetsByTimestamp`` are tested without Spark, on
records produced to Apache Kafka with chosen timestamps (its ListOffsets by timestamp).
``rate_limit``, the offset JSON and ``latestOffset``'s admission control are tested without
Spark too, on a stub client.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CKTopicPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxBytes,
    ReadMaxRows,
    ReadMinRows,
)

from kafka_source.batch_reader import plan_partitions
from kafka_source.fetcher import DataLossError
from kafka_source.offset_reader import OffsetReader
from kafka_source.offset_specs import (
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    SpecificOffsets,
    SpecificTimestamps,
)
from kafka_source.options import parse_reader_options
from kafka_source.planning import PlanningError
from kafka_source.task_split import ONE_TASK_RECORDS, RANGES_PER_SMALL_TASK
from kafka_source.checkpoint_offsets import OffsetsJson, from_json, to_json
from kafka_source.admission import AvailableNowEndError, rate_limit
from kafka_source.stream_reader import KafkaStreamReader, start_is_reproducible
from protocol.client.cluster import KafkaClient

from .helpers.broker_setup import create_topic
from .helpers.waiting import wait_until
from .helpers.streaming import (
    A0,
    A1,
    B0,
    QUERY_TIMEOUT_S,
    StubClient,
    expected_rows,
    produce,
    read_sink,
    run_available_now,
    start_query,
    stub_reader,
    values_for,
)


# ---- helpers ----------------------------------------------------------------------------


def merge(*parts: dict[int, list[str]]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for part in parts:
        for p, vals in part.items():
            out.setdefault(p, []).extend(vals)
    return out


def _offsets(raw) -> dict[tuple[str, int], int]:
    offsets = (json.loads(raw) if isinstance(raw, str) else raw) or {}  # "null": none yet
    return {(t, int(p)): o for t, parts in offsets.items() for p, o in parts.items()}


def start_offsets(progress) -> dict[tuple[str, int], int]:
    return _offsets(progress.sources[0].startOffset)


def end_offsets(progress) -> dict[tuple[str, int], int]:
    return _offsets(progress.sources[0].endOffset)


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets as confluent-kafka reads them."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = c.committed([CKTopicPartition(topic, p) for p in range(partitions)], timeout=20)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


class BackgroundProducer:
    """Produces one-record batches alternately to each partition until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int):
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 0})
        while not self._stop.is_set():
            p.produce(
                self.topic,
                value=f"live-{self.sent}".encode(),
                partition=self.sent % self.partitions,
            )
            p.flush(10)
            self.sent += 1
            time.sleep(0.05)  # paces the producer: a record every 50 ms while the query runs
        p.flush(10)

    def __enter__(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def check_contiguous_once(rows: list[tuple]) -> dict[int, tuple[int, int]]:
    """Each partition's offsets in ``rows`` are distinct and gap-free; returns
    ``{partition: (first, last + 1)}``."""
    by_part: dict[int, list[int]] = {}
    for _, partition, offset, _ in rows:
        by_part.setdefault(partition, []).append(offset)
    spans = {}
    for partition, offsets in by_part.items():
        offsets.sort()
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), partition
        spans[partition] = (offsets[0], offsets[-1] + 1)
    return spans


# ---- a query stopped and restarted on its checkpoint -------------------------------------


@pytest.fixture(scope="module")
def restarted_query(spark, kafka, tmp_path_factory):
    """Two AvailableNow runs of one query (one checkpoint, one parquet sink, with
    ``maxOffsetsPerTrigger=25`` and ``commitOffsetsToGroup``), with records produced
    before each. Partition 0 gets 40 then 10 records, partition 1 gets 10 then 10."""
    tmp = tmp_path_factory.mktemp("restarted")
    topic = f"t-restarted-{tmp.name}"
    group = f"g-{topic}"
    create_topic(kafka, topic, 2)
    options = {
        "kafka.bootstrap.servers": kafka.bootstrap,
        "subscribe": topic,
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": "25",
        "commitOffsetsToGroup": group,
    }
    sink, ck = str(tmp / "sink"), str(tmp / "ck")
    runs = []
    produced: dict[int, list[str]] = {}
    for tag, counts in (("a", [40, 10]), ("b", [10, 10])):
        values = values_for(tag, 2, counts, start=len(produced.get(0, [])))
        produce(kafka.bootstrap, topic, values)
        produced = merge(produced, values)
        progress = run_available_now(spark, options, sink, ck)
        runs.append(
            {
                "progress": progress,
                "sink": read_sink(spark, sink),
                "expected": expected_rows(topic, produced),
                "committed": committed(kafka.bootstrap, group, topic, 2),
            }
        )
    return topic, runs


@pytest.mark.spark
def test_file_sink_sees_every_record_once_across_a_restart(restarted_query):
    """After each run the sink holds every (partition, offset) produced so far exactly
    once, with its value; the second run starts where the first ended."""
    topic, (first, second) = restarted_query
    assert first["sink"] == first["expected"]
    assert second["sink"] == second["expected"]
    assert end_offsets(first["progress"][-1]) == {(topic, 0): 40, (topic, 1): 10}
    assert start_offsets(second["progress"][0]) == {(topic, 0): 40, (topic, 1): 10}
    assert end_offsets(second["progress"][-1]) == {(topic, 0): 50, (topic, 1): 20}


@pytest.mark.spark
def test_max_offsets_per_trigger_bounds_each_batch_split_by_backlog(restarted_query):
    """maxOffsetsPerTrigger=25 over a 40 + 10 backlog: two batches of 25, each taking from
    both partitions in proportion to their backlog (4:1); then one batch of 20."""
    topic, (first, second) = restarted_query
    assert [p.numInputRows for p in first["progress"]] == [25, 25]
    for p in first["progress"]:
        start, end = start_offsets(p), end_offsets(p)  # no start: the first batch
        taken = {tp: end[tp] - start.get(tp, 0) for tp in end}
        assert sum(taken.values()) == p.numInputRows <= 25
        assert taken[(topic, 0)] == 4 * taken[(topic, 1)] > 0
    assert [p.numInputRows for p in second["progress"]] == [20]


@pytest.mark.spark
def test_committed_group_offsets_are_the_query_end_offsets(restarted_query):
    """commitOffsetsToGroup: after each run confluent-kafka's ``committed()`` shows the
    end offsets of the run's last batch (not the batch before it)."""
    topic, runs = restarted_query
    for run in runs:
        end = end_offsets(run["progress"][-1])
        assert run["committed"] == {p: o for (_, p), o in end.items()}
    assert runs[-1]["committed"] == {0: 50, 1: 20}


# ---- Trigger.AvailableNow ---------------------------------------------------------------


@pytest.mark.spark
def test_available_now_drains_what_is_there_and_stops(spark, kafka, topic_name, tmp_path):
    """The query reads everything present when it starts, in several batches, and stops
    although a producer keeps writing during the whole run."""
    create_topic(kafka, topic_name, 2)
    values = values_for("a", 2, 30)
    produce(kafka.bootstrap, topic_name, values)
    options = {
        "kafka.bootstrap.servers": kafka.bootstrap,
        "subscribe": topic_name,
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": "40",
    }
    with BackgroundProducer(kafka.bootstrap, topic_name, 2) as live:
        progress = run_available_now(spark, options, str(tmp_path / "sink"), str(tmp_path / "ck"))
        sent_during_run = live.sent
    assert sent_during_run > 0
    assert len(progress) >= 2
    rows = read_sink(spark, str(tmp_path / "sink"))
    spans = check_contiguous_once(rows)
    assert {p: first for p, (first, _) in spans.items()} == {0: 0, 1: 0}
    assert set(expected_rows(topic_name, values)) <= set(rows)
    assert len(rows) < 60 + sent_during_run  # it did not chase the live producer
    assert {p: end for p, (_, end) in spans.items()} == {
        p: o for (_, p), o in end_offsets(progress[-1]).items()
    }


# ---- startingOffsets on a fresh query ---------------------------------------------------


@pytest.mark.spark
def test_starting_offsets_json_with_an_offset_and_earliest(spark, kafka, topic_name, tmp_path):
    create_topic(kafka, topic_name, 2)
    values = values_for("a", 2, 10)
    produce(kafka.bootstrap, topic_name, values)
    options = {
        "kafka.bootstrap.servers": kafka.bootstrap,
        "subscribe": topic_name,
        "startingOffsets": json.dumps({topic_name: {"0": 6, "1": -2}}),
    }
    run_available_now(spark, options, str(tmp_path / "sink"), str(tmp_path / "ck"))
    expected = [r for r in expected_rows(topic_name, values) if r[1] == 1 or r[2] >= 6]
    assert read_sink(spark, str(tmp_path / "sink")) == expected


@pytest.mark.spark
def test_starting_offsets_latest_reads_only_what_comes_after_the_start(
    spark, kafka, topic_name, tmp_path
):
    """A running query started at "latest" reads the records produced after it started and
    none of those before."""
    create_topic(kafka, topic_name, 2)
    produce(kafka.bootstrap, topic_name, values_for("old", 2, 10))
    options = {
        "kafka.bootstrap.servers": kafka.bootstrap,
        "subscribe": topic_name,
        "startingOffsets": "latest",
    }
    sink = str(tmp_path / "sink")
    query = start_query(spark, options, sink, str(tmp_path / "ck"), available_now=False)
    try:

        def progressed():  # its first trigger has bound the start
            assert query.isActive, query.exception()
            return query.lastProgress is not None

        wait_until(progressed, QUERY_TIMEOUT_S, "the query's first trigger", interval=0.2)
        new = values_for("new", 2, 5, start=10)
        produce(kafka.bootstrap, topic_name, new)
        expected = expected_rows(topic_name, new, first_offset=10)

        def all_rows():
            rows = read_sink(spark, sink)
            assert len(rows) <= len(expected), rows
            assert query.isActive, query.exception()
            return rows == expected

        wait_until(all_rows, QUERY_TIMEOUT_S, "the new rows in the sink", interval=0.5)
    finally:
        query.stop()


@pytest.mark.spark
def test_available_now_from_latest_while_a_producer_writes(spark, kafka, topic_name, tmp_path):
    """Regression: Spark asks for the AvailableNow target before the initial offsets, so a
    "latest" start bound afterwards landed beyond the target while a producer wrote, and the
    query failed with a made-up data loss ("offsets went back")."""
    create_topic(kafka, topic_name, 2)
    produce(kafka.bootstrap, topic_name, values_for("old", 2, 10))
    options = {
        "kafka.bootstrap.servers": kafka.bootstrap,
        "subscribe": topic_name,
        "startingOffsets": "latest",
    }
    with BackgroundProducer(kafka.bootstrap, topic_name, 2) as producer:
        wait_until(lambda: producer.sent >= 3, 30, "the producer writing")
        run_available_now(spark, options, str(tmp_path / "sink"), str(tmp_path / "ck"))
    rows = read_sink(spark, str(tmp_path / "sink"))
    check_contiguous_once(rows)
    assert all(offset >= 10 for _, _, offset, _ in rows)


# ---- subscribePattern picks up a new topic ----------------------------------------------


@pytest.mark.spark
def test_subscribe_pattern_reads_a_topic_created_mid_stream_from_earliest(
    spark, kafka, topic_name, tmp_path
):
    first, later = f"{topic_name}-a", f"{topic_name}-b"
    create_topic(kafka, first, 2)
    a1 = values_for("a1", 2, 8)
    produce(kafka.bootstrap, first, a1)
    options = {
        "kafka.bootstrap.servers": kafka.bootstrap,
        "subscribePattern": f"^{re.escape(topic_name)}-",
        "startingOffsets": "earliest",
    }
    sink, ck = str(tmp_path / "sink"), str(tmp_path / "ck")
    run_available_now(spark, options, sink, ck)
    assert read_sink(spark, sink) == expected_rows(first, a1)

    create_topic(kafka, later, 3)
    b = values_for("b", 3, 6)
    produce(kafka.bootstrap, later, b)
    a2 = values_for("a2", 2, 4, start=8)
    produce(kafka.bootstrap, first, a2)
    progress = run_available_now(spark, options, sink, ck)
    assert start_offsets(progress[0]) == {(first, 0): 8, (first, 1): 8}
    assert read_sink(spark, sink) == sorted(
        expected_rows(first, merge(a1, a2)) + expected_rows(later, b)
    )


# ---- records deleted under a query (mock cluster) ---------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_records_deleted_between_runs(spark, mock_cluster, topic_name, tmp_path, fail_on_data_loss):
    """Run, produce more, delete partition 0 below offset 30 (the next start is 20), run
    again: failOnDataLoss=true fails naming topic, partition and the lost range;
    false skips them, and the sink holds exactly the surviving records, once."""
    create_topic(mock_cluster, topic_name, 2)
    first = values_for("a", 2, 20)
    produce(mock_cluster.bootstrap, topic_name, first)
    options = {
        "kafka.bootstrap.servers": mock_cluster.bootstrap,
        "subscribe": topic_name,
        "startingOffsets": "earliest",
        "failOnDataLoss": str(fail_on_data_loss).lower(),
    }
    sink, ck = str(tmp_path / "sink"), str(tmp_path / "ck")
    run_available_now(spark, options, sink, ck)
    assert read_sink(spark, sink) == expected_rows(topic_name, first)

    second = values_for("b", 2, 20, start=20)
    produce(mock_cluster.bootstrap, topic_name, second)
    mock_cluster.partition_delete_records(topic_name, 0, 30)
    if fail_on_data_loss:
        with pytest.raises(Exception) as failure:
            run_available_now(spark, options, sink, ck)
        message = str(failure.value)
        assert f"[20, 30) of topic {topic_name!r} partition 0" in message, message
        assert "failOnDataLoss" in message
        assert read_sink(spark, sink) == expected_rows(topic_name, first)
    else:
        run_available_now(spark, options, sink, ck)
        survivors = merge(first, second)
        expected = [
            r for r in expected_rows(topic_name, survivors) if not (r[1] == 0 and 20 <= r[2] < 30)
        ]
        assert read_sink(spark, sink) == expected


# ---- maxBytesPerTrigger -----------------------------------------------------------------


@pytest.mark.spark
def test_max_bytes_per_trigger_bounds_each_batch(spark, kafka, topic_name, tmp_path):
    """200 records of 100-byte values with maxBytesPerTrigger=10k (10,240 bytes): several
    batches, each one's values alone within the budget (the estimate counts whole records),
    none far below it."""
    create_topic(kafka, topic_name, 1)
    values = values_for("v", 1, 200)
    produce(kafka.bootstrap, topic_name, values, value_bytes=100)
    options = {
        "kafka.bootstrap.servers": kafka.bootstrap,
        "subscribe": topic_name,
        "startingOffsets": "earliest",
        "maxBytesPerTrigger": "10k",
    }
    sink = str(tmp_path / "sink")
    progress = run_available_now(spark, options, sink, str(tmp_path / "ck"))
    sizes = [p.numInputRows for p in progress]
    assert sum(sizes) == 200 and len(sizes) >= 2, sizes
    assert all(0 < n and n * 100 <= 10 * 1024 for n in sizes), sizes
    assert max(sizes) >= 50, sizes
    assert read_sink(spark, sink) == expected_rows(topic_name, values, value_bytes=100)


# ---- startingTimestamp / startingOffsetsByTimestamp (Apache Kafka's ListOffsets) -------------

# (offset, timestamp) of the records the lookups land on; the offsets before them hold
# records stamped earlier (100 + offset ms), so an offset found is no record count.
STAMPED = {0: [(10, 1000), (11, 2000), (12, 3000)], 1: [(4, 1500), (5, 2500), (6, 2600)]}


@pytest.fixture(scope="module")
def stamped_topic(kafka) -> str:
    """A 2-partition topic holding ``STAMPED`` (CreateTime timestamps set by the producer),
    each partition written in one batch. Stamped in 1970, the records are past any time
    retention: the topic keeps them with retention.ms=-1."""
    topic = f"t-stamped-{uuid.uuid4().hex[:8]}"
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        client.create_topics({topic: 2}, configs={"retention.ms": "-1"})
    errors: list = []
    p = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 50})
    for partition, records in STAMPED.items():
        first = records[0][0]
        stamps = [100 + o for o in range(first)] + [ts for _, ts in records]
        for offset, ts in enumerate(stamps):
            p.produce(
                topic,
                value=b"%d" % offset,
                partition=partition,
                timestamp=ts,
                on_delivery=lambda err, msg: err and errors.append(err),
            )
    assert p.flush(30) == 0 and errors == []
    return topic


def _initial_offset(bootstrap: str, topic: str, **options: str) -> dict:
    reader = KafkaStreamReader(
        parse_reader_options(
            {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, **options},
            for_streaming=True,
        )
    )
    try:
        return reader.initialOffset()
    finally:
        reader.stop()


@pytest.mark.parametrize(
    "options, expected",
    [
        ({"startingTimestamp": "2000"}, {"0": 11, "1": 5}),
        ({"startingTimestamp": "1000"}, {"0": 10, "1": 4}),
        ({"startingTimestamp": "2550"}, {"0": 12, "1": 6}),
        ({"startingOffsetsByTimestamp": {"0": 2500, "1": 1000}}, {"0": 12, "1": 4}),
        # the timestamp option wins over startingOffsets
        ({"startingTimestamp": "2000", "startingOffsets": "earliest"}, {"0": 11, "1": 5}),
    ],
)
def test_initial_offset_by_timestamp(kafka, stamped_topic, options, expected):
    """Each partition starts at its first record whose timestamp is at or after the one
    asked for."""
    options = {
        k: json.dumps({stamped_topic: v}) if isinstance(v, dict) else v for k, v in options.items()
    }
    assert _initial_offset(kafka.bootstrap, stamped_topic, **options) == {stamped_topic: expected}


def test_initial_offset_by_timestamp_strategy_error_names_the_partition(kafka, stamped_topic):
    """Partition 1 has no record at or after 2700, so the default strategy fails naming
    it (and not partition 0, which has one)."""
    with pytest.raises(PlanningError) as e:
        _initial_offset(kafka.bootstrap, stamped_topic, startingTimestamp="2700")
    message = str(e.value)
    assert f"{stamped_topic}-1" in message and "2700" in message, message
    assert "startingTimestamp" in message and f"{stamped_topic}-0" not in message


@pytest.mark.parametrize("by_partition", [False, True])
def test_initial_offset_by_timestamp_strategy_latest_falls_back_to_latest(
    kafka, stamped_topic, by_partition
):
    """With strategy "latest" a partition with nothing at or after the timestamp starts at
    its latest offset (7, its high watermark); the others still go by timestamp."""
    option = (
        {"startingOffsetsByTimestamp": json.dumps({stamped_topic: {"0": 2700, "1": 2700}})}
        if by_partition
        else {"startingTimestamp": "2700"}
    )
    assert _initial_offset(
        kafka.bootstrap, stamped_topic, startingOffsetsByTimestampStrategy="latest", **option
    ) == {stamped_topic: {"0": 12, "1": 7}}


# ---- rate_limit, offset JSON --------------------------------------------------------------


def test_rate_limit_splits_the_budget_by_backlog():
    begin = {A0: 0, A1: 100, B0: 5}
    end = {A0: 300, A1: 200, B0: 105}  # backlogs 300, 100, 100
    assert rate_limit(begin, end, 50) == {A0: 30, A1: 110, B0: 15}
    assert rate_limit(begin, end, 500) == end  # everything fits
    assert rate_limit(begin, end, 10_000) == end


def test_rate_limit_never_starves_a_small_partition():
    begin = {A0: 0, A1: 0}
    end = {A0: 10_000, A1: 3}
    out = rate_limit(begin, end, 100)
    assert out[A1] == 1  # a share below one offset rounds up
    assert out[A0] == 99  # 100 * 10000 / 10003, floored


def test_rate_limit_leaves_idle_and_new_partitions_alone():
    begin = {A0: 50, A1: 7}
    end = {A0: 50, A1: 107, B0: 40}  # A0 idle; B0 unknown to begin (no backlog counted)
    assert rate_limit(begin, end, 10) == {A0: 50, A1: 17, B0: 40}
    assert rate_limit({}, {}, 10) == {}


def test_rate_limit_with_byte_weights():
    """Weights are bytes per offset: a 10k budget over 100-byte and 1000-byte records with
    equal byte backlogs gives 50 and 5 offsets."""
    begin = {A0: 0, A1: 0}
    end = {A0: 1000, A1: 100}
    assert rate_limit(begin, end, 10_000, {A0: 100.0, A1: 1000.0}) == {A0: 50, A1: 5}


def test_offsets_json_round_trip():
    offsets = {B0: 9, A1: 2**40, A0: 0, ("a", 10): 5}
    j = to_json(offsets)
    assert j == {"a": {"0": 0, "1": 2**40, "10": 5}, "b": {"0": 9}}
    assert json.loads(json.dumps(j)) == j
    assert from_json(j) == offsets
    assert from_json(json.loads('{"a": {"3": 4}}')) == {("a", 3): 4}
    assert from_json(None) == {} and from_json({}) == {} and to_json({}) == {}


def test_remembered_offsets_json_answers_as_the_plain_conversions():
    """``OffsetsJson`` answers a repeat from what it remembers: the same JSON as
    ``to_json``, and offsets that equal ``from_json``'s but are the caller's to change."""
    memo = OffsetsJson()
    offsets = {B0: 9, A1: 2**40, A0: 0}
    j = memo.to_json(offsets)
    assert j == to_json(offsets) and memo.to_json(dict(offsets)) is j
    decoded = memo.from_json(json.loads(json.dumps(j)))  # as Spark hands it back
    assert decoded == offsets
    decoded[A0] = 99  # the caller's copy: the memo keeps the offsets it saw
    assert memo.from_json(json.loads(json.dumps(j))) == offsets
    moved = {**offsets, A0: 1}
    assert memo.to_json(moved) == to_json(moved) != j
    assert memo.from_json({"a": {"0": 5}}) == {A0: 5} and memo.from_json(None) == {}
    for i in range(10):  # only the last few are kept, and the answers stay right
        assert memo.from_json({"a": {"0": i}}) == {A0: i}
    assert memo.from_json(j) == offsets


def test_offsets_json_of_the_same_partitions_keeps_their_order_and_follows_new_ones():
    """``OffsetsJson.to_json`` lays out the partitions once and fills in new offsets
    while the partitions stay: the JSON, its key order too (Spark compares offsets as
    JSON text), is ``to_json``'s, also after partitions come and go."""
    memo = OffsetsJson()
    offsets = {("b", 0): 1, ("a", 10): 2, ("a", 2): 3}
    for step in range(12):  # beyond the remembered few, so each one is laid out anew
        offsets = {tp: o + step for tp, o in offsets.items()}
        if step == 5:
            offsets[("a", 1)] = 0  # a partition added
        if step == 8:
            del offsets[("b", 0)]  # a topic gone
        got = memo.to_json(offsets)
        assert json.dumps(got) == json.dumps(to_json(offsets))
    assert list(got) == ["a"] and list(got["a"]) == ["1", "2", "10"]


def test_offsets_json_lays_out_partitions_and_parses_json_only_when_new(monkeypatch):
    """What ``OffsetsJson`` remembers saves work: the partitions are laid out again only
    when they change, and JSON it has seen is not parsed again."""
    from kafka_source import checkpoint_offsets

    laid_out, parsed = [], []
    layout, parse = checkpoint_offsets._layout, checkpoint_offsets.from_json
    monkeypatch.setattr(checkpoint_offsets, "_layout", lambda p: laid_out.append(p) or layout(p))
    monkeypatch.setattr(checkpoint_offsets, "from_json", lambda j: parsed.append(j) or parse(j))
    memo = OffsetsJson()
    offsets = {A0: 1, A1: 2, B0: 3}
    for step in range(12):  # past the remembered few: every one new
        memo.to_json({tp: o + step for tp, o in offsets.items()})
    assert len(laid_out) == 1
    memo.to_json({**offsets, ("c", 0): 0})
    assert len(laid_out) == 2
    j = json.loads(json.dumps(memo.to_json(offsets)))
    assert memo.from_json(j) == offsets and memo.from_json(dict(j)) == offsets
    assert parsed == []  # the JSON it made itself
    assert memo.from_json({"a": {"0": 42}}) == {A0: 42}
    assert memo.from_json({"a": {"0": 42}}) == {A0: 42}
    assert len(parsed) == 1


def test_a_stream_s_partitions_are_found_again_only_when_its_topics_changed(monkeypatch):
    """Each micro-batch finds the subscription's partitions in the metadata: while the
    metadata is the same snapshot (the same answer), they are its view, found once (no
    walk over every partition); a new snapshot is walked anew."""
    from kafka_source import stream_reader

    walks = []
    walk = stream_reader.partitions_from_metadata
    monkeypatch.setattr(
        stream_reader, "partitions_from_metadata", lambda s, m: walks.append(m) or walk(s, m)
    )
    client = StubClient({A0: 1, A1: 2, B0: 3})
    reader = stub_reader(client)
    meta = client.refresh_metadata()
    first = reader._partitions_of(meta)
    assert sorted(first) == [A0, A1, B0]
    assert reader._partitions_of(meta) is first and len(walks) == 1
    assert isinstance(first, tuple)  # a view nobody can change
    client.latest[("a", 2)] = 0  # a partition added: a new answer, new topic objects
    assert sorted(reader._partitions_of(client.refresh_metadata())) == [A0, A1, ("a", 2), B0]
    assert len(walks) == 2


# ---- latestOffset's admission control, on a stub client -----------------------------------


def test_default_read_limit_follows_the_options():
    client = StubClient({A0: 0})
    assert stub_reader(client).getDefaultReadLimit() == ReadAllAvailable()
    assert stub_reader(client, maxOffsetsPerTrigger="7").getDefaultReadLimit() == ReadMaxRows(7)
    assert stub_reader(client, minOffsetsPerTrigger="7").getDefaultReadLimit() == ReadMinRows(7)
    assert stub_reader(client, maxBytesPerTrigger="1k").getDefaultReadLimit() == ReadMaxBytes(1024)


def test_min_offsets_holds_the_batch_back_until_enough_or_the_delay():
    """As Spark: the first batch of a run never waits; later ones wait for
    minOffsetsPerTrigger offsets or for maxTriggerDelay since the last batch let through."""
    client = StubClient({A0: 30, A1: 20})
    reader = stub_reader(client, minOffsetsPerTrigger="100", maxTriggerDelay="10s")
    start = {"a": {"0": 0, "1": 0}}
    limit = reader.getDefaultReadLimit()
    first = reader.latestOffset(start, limit)  # 50 waiting < 100, but the run's first batch
    assert first == {"a": {"0": 30, "1": 20}}
    client.latest = {A0: 40, A1: 20}
    assert reader.latestOffset(first, limit) == first  # 10 waiting < 100
    assert reader.latestOffset(first, limit) == first
    reader._last_batch_at -= 11  # maxTriggerDelay has passed since the last batch
    assert reader.latestOffset(first, limit) == {"a": {"0": 40, "1": 20}}
    # the delay counts again from that batch
    held = {"a": {"0": 40, "1": 20}}
    client.latest = {A0: 50, A1: 20}
    assert reader.latestOffset(held, limit) == held
    client.latest = {A0: 140, A1: 20}  # 100 waiting: no need to wait
    assert reader.latestOffset(held, limit) == {"a": {"0": 140, "1": 20}}
    # ReadAllAvailable (Spark's choice for some triggers) admits everything
    client.latest = {A0: 150, A1: 20}
    assert reader.latestOffset(start, ReadAllAvailable()) == {"a": {"0": 150, "1": 20}}


def test_min_and_max_offsets_together():
    client = StubClient({A0: 30, A1: 30})
    reader = stub_reader(
        client, minOffsetsPerTrigger="15", maxOffsetsPerTrigger="20", maxTriggerDelay="1h"
    )
    limit = reader.getDefaultReadLimit()
    assert limit == ReadMaxRows(20)
    start = {"a": {"0": 0, "1": 0}}
    assert reader.latestOffset(start, limit) == {"a": {"0": 10, "1": 10}}
    client.latest = {A0: 15, A1: 19}  # 14 waiting after that batch, below 15
    begin = {"a": {"0": 10, "1": 10}}
    assert reader.latestOffset(begin, limit) == begin


def test_available_now_ignores_min_offsets_and_stops_at_the_target():
    """Spark's order: prepareForTriggerAvailableNow, initialOffset, then latestOffset for
    batch 0, which fixes the offsets the run reads up to. A start from "earliest" can be
    resolved again after a crash, so batch 0 reads from it."""
    client = StubClient({A0: 5, A1: 5})
    reader = stub_reader(
        client, minOffsetsPerTrigger="6", maxOffsetsPerTrigger="6", startingOffsets="earliest"
    )
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    assert start == {"a": {"0": 0, "1": 0}}
    limit = reader.getDefaultReadLimit()
    first = reader.latestOffset(start, limit)  # batch 0
    assert first == {"a": {"0": 3, "1": 3}}
    client.latest = {A0: 500, A1: 500}  # written after the run started: not for this run
    second = reader.latestOffset(first, limit)  # 4 left, below the minimum: read anyway
    assert second == {"a": {"0": 5, "1": 5}}
    assert reader.latestOffset(second, limit) == second


def test_available_now_start_bound_before_the_target():
    """Spark calls prepareForTriggerAvailableNow before initialOffset: the run's end is
    fetched after the start is bound, so a "latest" start never lands beyond it while a
    producer writes."""
    client = StubClient({A0: 5})
    reader = stub_reader(client, startingOffsets="latest")
    reader.prepareForTriggerAvailableNow()
    client.latest = {A0: 7}
    start = reader.initialOffset()
    assert start == {"a": {"0": 7}}
    client.latest = {A0: 9}
    assert reader.latestOffset(start, ReadAllAvailable()) == start
    assert reader.latestOffset(start, ReadAllAvailable()) == {"a": {"0": 9}}


def test_a_small_micro_batch_is_one_task_and_a_large_one_packs_only_its_small_ranges():
    """Tasks in waves were most of a low-rate stream's latency: up to ONE_TASK_RECORDS
    records, one task reads every range of the micro-batch; past it, ranges of up to
    SMALL_RANGE_RECORDS share tasks and the larger ones have a task each, as Spark's
    connector plans them; when the user asks for a split (minPartitions,
    maxRecordsPerPartition), a task per range."""
    start = {"a": {"0": 0, "1": 0}, "b": {"0": 0}}
    small = {"a": {"0": 10, "1": 3}, "b": {"0": ONE_TASK_RECORDS - 13}}
    large = {"a": {"0": 10, "1": 3}, "b": {"0": ONE_TASK_RECORDS - 12}}
    reader = stub_reader(StubClient({A0: 0, A1: 0, B0: 0}), startingOffsets="earliest")
    [one] = reader.partitions(start, small)
    assert [tuple(r[:4]) for r in one.ranges] == [
        ("a", 0, 0, 10),
        ("a", 1, 0, 3),
        ("b", 0, 0, ONE_TASK_RECORDS - 13),
    ]
    assert [[tuple(r[:4]) for r in p.ranges] for p in reader.partitions(start, large)] == [
        [("a", 0, 0, 10), ("a", 1, 0, 3)],
        [("b", 0, 0, ONE_TASK_RECORDS - 12)],
    ]
    for option, value, tasks in (
        ("minPartitions", "2", 3),
        ("minPartitions", "4", 4),
        ("maxRecordsPerPartition", "100000", 3),
    ):
        split = stub_reader(
            StubClient({A0: 0, A1: 0, B0: 0}), startingOffsets="earliest", **{option: value}
        )
        assert len(split.partitions(start, small)) == tasks, option
        assert all(len(p.ranges) == 1 for p in split.partitions(start, small)), option


def test_a_small_read_over_many_partitions_shares_few_tasks():
    """A small micro-batch or batch read over more than RANGES_PER_SMALL_TASK partitions
    is cut into the fewest
    tasks of at most that many ranges, as even as can be, every range once and in order
    (a batch read's with their open ends)."""
    n = 2 * RANGES_PER_SMALL_TASK + 1
    tps = {("c", p): 1 for p in range(n)}
    reader = stub_reader(StubClient(tps), startingOffsets="earliest")
    micro_batch = reader.partitions(
        {"c": {str(p): 0 for p in range(n)}}, {"c": {str(p): 1 for p in range(n)}}
    )
    batch = plan_partitions(
        parse_reader_options({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "c"}),
        StubClient(tps),
    )
    for parts in (micro_batch, batch):
        sizes = [len(p.ranges) for p in parts]
        assert len(sizes) == 3 and max(sizes) <= RANGES_PER_SMALL_TASK
        assert max(sizes) - min(sizes) <= 1 and sum(sizes) == n
        assert [(r.partition, r.start, r.end) for p in parts for r in p.ranges] == [
            (p, 0, 1) for p in range(n)
        ]
    assert all(e is not None for p in batch for e in p.open_ends)  # endingOffsets latest
    exactly = {("c", p): 0 for p in range(RANGES_PER_SMALL_TASK)}
    reader = stub_reader(StubClient(exactly), startingOffsets="earliest")
    assert (
        len(
            reader.partitions(
                {"c": {str(p): 0 for p in range(RANGES_PER_SMALL_TASK)}},
                {"c": {str(p): 1 for p in range(RANGES_PER_SMALL_TASK)}},
            )
        )
        == 1
    )


def test_available_now_batch_end_is_checked_against_the_target_and_latest():
    """verifyEndOffsetForTriggerAvailableNow: a batch may not end beyond the offsets the run
    set out to read, nor beyond the partitions' latest offsets, nor name other partitions."""
    client = StubClient({A0: 10, A1: 10})
    reader = stub_reader(client, startingOffsets="earliest")
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    reader.latestOffset(start, ReadAllAvailable())
    assert [len(p.ranges) for p in reader.partitions(start, {"a": {"0": 10, "1": 10}})] == [2]
    with pytest.raises(AvailableNowEndError, match="pre-fetched offset: {a-0: 10, a-1: 10}"):
        reader.partitions(start, {"a": {"0": 11, "1": 10}})
    with pytest.raises(AvailableNowEndError, match="same topic partitions"):
        reader.partitions(start, {"a": {"0": 10}})
    client.latest = {A0: 8, A1: 10}  # the log now ends below the batch's end
    with pytest.raises(AvailableNowEndError, match="latest offset: {a-0: 8, a-1: 10}"):
        reader.partitions(start, {"a": {"0": 10, "1": 10}})


def test_fresh_query_logs_its_start_as_batch_0_and_a_restart_reuses_it():
    """Batch 0 of a fresh query ends where it starts (Spark writes that end to the offset
    log before anything is read). A new reader on the same checkpoint re-running the
    unfinished batch 0 gets initialOffset resolved anew (latest moved on) as the start and
    the logged end as the end: it plans nothing, and the next batch reads everything
    written since the first start. Spark's calls, in order, are replayed here."""
    client = StubClient({A0: 10, A1: 3})
    reader = stub_reader(client, startingOffsets="latest")
    start = reader.initialOffset()
    assert start == {"a": {"0": 10, "1": 3}}
    assert reader.latestOffset(start, ReadAllAvailable()) == start  # batch 0, logged
    assert reader.initialOffset() == start  # runBatch asks again
    assert reader.partitions(start, start) == []
    # killed here; records arrive; a new driver restarts from the checkpoint
    client.latest = {A0: 25, A1: 3}
    restarted = stub_reader(client, startingOffsets="latest")
    assert restarted.initialOffset() == {"a": {"0": 25, "1": 3}}
    assert restarted.partitions({"a": {"0": 25, "1": 3}}, start) == []  # not "went back"
    end = restarted.latestOffset(start, ReadAllAvailable())
    assert end == {"a": {"0": 25, "1": 3}}
    assert [tuple(p.range[:4]) for p in restarted.partitions(start, end)] == [("a", 0, 10, 25)]


def test_restart_of_batch_0_from_earliest_reads_it_again():
    """A start from "earliest" resolves to the same offsets again, so batch 0 reads from it
    at once, and its re-run after a crash (a new reader: initialOffset anew, then the
    partitions of the logged batch) reads the same records."""
    client = StubClient({A0: 10})
    reader = stub_reader(client, startingOffsets="earliest")
    start = reader.initialOffset()
    assert start == {"a": {"0": 0}}
    end = reader.latestOffset(start, ReadAllAvailable())  # batch 0, logged
    assert end == {"a": {"0": 10}}
    assert [tuple(p.range[:4]) for p in reader.partitions(start, end)] == [("a", 0, 0, 10)]
    # killed before batch 0 commits; a new driver restarts from the checkpoint
    client.latest = {A0: 30}
    restarted = stub_reader(client, startingOffsets="earliest")
    assert restarted.initialOffset() == start
    assert [tuple(p.range[:4]) for p in restarted.partitions(start, end)] == [("a", 0, 0, 10)]
    assert restarted.latestOffset(end, ReadAllAvailable()) == {"a": {"0": 30}}


@pytest.mark.parametrize(
    "starting, reproducible",
    [
        ("earliest", True),
        ("latest", False),
        ('{"a":{"0":4,"1":-2}}', True),
        ('{"a":{"0":4,"1":-1}}', False),
    ],
)
def test_only_a_start_that_cannot_be_resolved_again_gets_an_empty_batch_0(starting, reproducible):
    client = StubClient({A0: 10, A1: 10})
    reader = stub_reader(client, startingOffsets=starting)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert (end != start) == reproducible
    if reproducible:
        assert end == {"a": {"0": 10, "1": 10}}


@pytest.mark.parametrize(
    "spec, reproducible",
    [
        (EarliestOffsets(), True),
        (LatestOffsets("startingOffsets"), False),
        (SpecificOffsets(((("a", 0), 4), (("a", 1), -2))), True),
        (SpecificOffsets(((("a", 0), 4), (("a", 1), -1))), False),
        (SpecificTimestamps(((("a", 0), 1000),), "error"), True),
        (SpecificTimestamps(((("a", 0), 1000),), "latest"), False),
        (GlobalTimestamp(1000, "error"), True),
        (GlobalTimestamp(1000, "latest"), False),
    ],
)
def test_start_is_reproducible(spec, reproducible):
    assert start_is_reproducible(spec) is reproducible


def test_new_partitions_are_read_from_their_earliest_offset():
    client = StubClient({A0: 10, A1: 10, B0: 108}, earliest={B0: 100})
    reader = stub_reader(client, maxOffsetsPerTrigger="12")
    start = {"a": {"0": 4, "1": 10}}  # B0 is new: backlogs A0 6, B0 8 share 12
    assert reader.latestOffset(start, reader.getDefaultReadLimit()) == {
        "a": {"0": 9, "1": 10},
        "b": {"0": 106},
    }
    assert reader.latestOffset(start, ReadAllAvailable()) == {
        "a": {"0": 10, "1": 10},
        "b": {"0": 108},
    }


def test_latest_offset_publishes_the_finished_batch_to_the_group():
    """Spark passes a batch's end to commit() only when it plans the next batch; the end of
    the last finished batch reaches the group when Spark next asks for latestOffset, and
    each offset set is committed once."""
    client = StubClient({A0: 10})
    reader = stub_reader(client, commitOffsetsToGroup="watchers")
    reader.latestOffset({"a": {"0": 4}}, ReadAllAvailable())
    reader.commit({"a": {"0": 4}})
    reader.latestOffset({"a": {"0": 4}}, ReadAllAvailable())
    reader.latestOffset({"a": {"0": 10}}, ReadAllAvailable())
    assert client.commits == [("watchers", {A0: 4}), ("watchers", {A0: 10})]
    # without the option nothing is committed
    quiet = StubClient({A0: 10})
    stub_reader(quiet).latestOffset({"a": {"0": 4}}, ReadAllAvailable())
    assert quiet.commits == []


# ---- data loss checks and offset retries, on a stub client -------------------------------


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_added_partition_not_starting_at_zero_is_data_loss(fail_on_data_loss):
    """As Spark: a partition that appeared since the batch's start is read from its
    earliest offset, and an earliest offset above 0 means records went unseen."""
    client = StubClient({A0: 10, B0: 108}, earliest={B0: 100})
    reader = stub_reader(client, failOnDataLoss=str(fail_on_data_loss).lower())
    start, end = {"a": {"0": 4}}, {"a": {"0": 10}, "b": {"0": 108}}
    if fail_on_data_loss:
        with pytest.raises(
            DataLossError, match="Added partition b-0 starts from 100 instead of 0.*failOnDataLoss"
        ):
            reader.partitions(start, end)
    else:
        assert sorted(tuple(r[:4]) for p in reader.partitions(start, end) for r in p.ranges) == [
            ("a", 0, 4, 10),
            ("b", 0, 100, 108),
        ]


def test_latest_offset_going_back_is_asked_again_before_data_loss():
    """SPARK-26267: a latest offset below the batch's start is asked again, up to
    fetchOffset.numRetries attempts in all; only a persistent one reaches partitions()
    and is reported there."""

    class Stale(StubClient):
        def __init__(self, *args, stale_answers: int, **kwargs):
            super().__init__(*args, **kwargs)
            self.stale_answers, self.asked = stale_answers, 0

        def list_offsets(self, timestamps, isolation_level=0):
            answer = super().list_offsets(timestamps, isolation_level)
            if all(ts == -1 for ts in timestamps.values()):
                self.asked += 1
                if self.stale_answers > 0:
                    self.stale_answers -= 1
                    return {tp: (3, -1) for tp in answer}
            return answer

    start = {"a": {"0": 8}}
    client = Stale({A0: 12}, stale_answers=2)
    reader = stub_reader(client, **{"fetchOffset.numRetries": "3"})
    assert reader.latestOffset(start, ReadAllAvailable()) == {"a": {"0": 12}}
    assert client.asked == 3

    client = Stale({A0: 12}, stale_answers=3)
    reader = stub_reader(client, **{"fetchOffset.numRetries": "3"})
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"a": {"0": 3}} and client.asked == 3
    with pytest.raises(DataLossError, match="a-0's offsets went back from 8 to 3"):
        reader.partitions(start, end)


def test_fetch_offset_num_retries_counts_attempts_and_retries_any_broker_error():
    """As Spark's withRetries: numRetries=3 makes three calls in all, and every broker or
    connection failure is retried (not only the ones Kafka calls retriable); an error of
    the options fails at once, and so does a refusal (Spark's retries it)."""
    from protocol.errors import BrokerError, ConfigError, KafkaConnectionError

    class Failing(StubClient):
        def __init__(self, errors):
            super().__init__({A0: 7})
            self.errors, self.calls = list(errors), 0

        def list_offsets(self, timestamps, isolation_level=0):
            self.calls += 1
            if self.errors:
                raise self.errors.pop(0)
            return super().list_offsets(timestamps, isolation_level)

    authz = BrokerError.for_code(29, topic="a")  # TOPIC_AUTHORIZATION_FAILED
    assert not authz.retriable
    client = Failing([KafkaConnectionError("cut"), BrokerError.for_code(-1)])
    assert OffsetReader(client, 3, 0).latest_offsets([A0]) == {A0: 7}  # UNKNOWN_SERVER_ERROR
    assert client.calls == 3
    client = Failing([KafkaConnectionError("cut"), authz])
    with pytest.raises(type(authz)):
        OffsetReader(client, 3, 0).latest_offsets([A0])
    assert client.calls == 2
    client = Failing([KafkaConnectionError("cut")] * 3)
    with pytest.raises(KafkaConnectionError):
        OffsetReader(client, 3, 0).latest_offsets([A0])
    assert client.calls == 3
    client = Failing([ConfigError("bad option")])
    with pytest.raises(ConfigError):
        OffsetReader(client, 3, 0).latest_offsets([A0])
    assert client.calls == 1
    client = Failing([KafkaConnectionError("cut")])
    with pytest.raises(KafkaConnectionError):
        OffsetReader(client, 0, 0).latest_offsets([A0])  # below 1: still one attempt


def test_rate_limit_prorates_like_spark_even_when_everything_fits():
    """Spark computes each share as budget * (backlog / total) in floating point and floors
    it, even when the whole backlog fits the budget: 22 * (15 / 22) is 14.999..., so one
    record of the 22 waits for the next batch, exactly as in Spark."""
    begin, end = {A0: 0, A1: 0}, {A0: 15, A1: 7}
    assert rate_limit(begin, end, 22) == {A0: 14, A1: 7}
    assert rate_limit(begin, end, 23) == {A0: 15, A1: 7}


def test_latest_offset_follows_new_topics_and_leader_moves_on_a_real_cluster(
    mock_cluster, topic_name
):
    """latestOffset sends the Metadata and the ListOffsets of the partitions it knows in
    one round trip; a topic that appears, or a leader that moves, between two micro-batches
    makes it ask ListOffsets again on the fresh metadata, so the answer is still complete
    and right (on librdkafka's mock cluster of three brokers)."""

    def send(topic: str, partition: int, n: int) -> None:
        p = Producer({"bootstrap.servers": mock_cluster.bootstrap, "linger.ms": 0})
        for _ in range(n):
            p.produce(topic, b"x", partition=partition)
        assert p.flush(10) == 0

    first, second = f"{topic_name}-a", f"{topic_name}-b"
    create_topic(mock_cluster, first, 2, 3)
    send(first, 0, 3)
    reader = KafkaStreamReader(
        parse_reader_options(
            {
                "kafka.bootstrap.servers": mock_cluster.bootstrap,
                "subscribePattern": re.escape(topic_name) + "-.*",
                "startingOffsets": "earliest",
            },
            for_streaming=True,
        )
    )
    try:
        start = reader.initialOffset()
        assert reader.latestOffset(start, ReadAllAvailable()) == {first: {"0": 3, "1": 0}}
        create_topic(mock_cluster, second, 1, 3)
        send(second, 0, 2)
        send(first, 1, 1)
        assert reader.latestOffset(start, ReadAllAvailable()) == {
            first: {"0": 3, "1": 1},
            second: {"0": 2},
        }
        leader = reader.client.leader_for(first, 0)
        mock_cluster.partition_set_leader(first, 0, 1 + leader % 3)
        send(first, 0, 1)
        assert reader.latestOffset(start, ReadAllAvailable()) == {
            first: {"0": 4, "1": 1},
            second: {"0": 2},
        }
        assert reader.client.leader_for(first, 0) == 1 + leader % 3
    finally:
        reader.stop()
