"""Offsets behind latest (``kafka_source.lag``): Spark's JVM source metrics
``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest``, ``avgOffsetsBehindLatest`` computed
from a pykafka source's ``endOffset`` and ``latestOffset`` in the progress.

The latest offsets must be in the progress of every batch in every mode: checked on the
stream reader's driver side with a stub client (default trigger including a fresh query's
batch 0, maxOffsetsPerTrigger, maxBytesPerTrigger, a batch held back by
minOffsetsPerTrigger, Trigger.AvailableNow), and on one real query against Apache Kafka,
whose progress reports and listener events give the figures a query's own offsets predict.
"""

from __future__ import annotations

import json

import pytest

from kafka_source.lag import (
    KafkaLagListener,
    java_double,
    offsets_behind_latest,
    source_lag,
    with_lag_metrics,
)

from .helpers.broker_setup import create_topic
from .helpers.streaming import A0, A1, B0, StubClient, produce, stub_reader, values_for
from .helpers.lag import PROGRESS
from .helpers.waiting import wait_until

LAG = {
    "minOffsetsBehindLatest": "0",
    "maxOffsetsBehindLatest": "25",
    "avgOffsetsBehindLatest": "8.666666666666666",
}


def test_three_figures_from_progress_json_dict_and_text():
    """latest - end per partition: a-0 0, a-1 25, b-0 1; the rate source is left out."""
    expected = [{"description": PROGRESS["sources"][0]["description"], **LAG}]
    assert offsets_behind_latest(PROGRESS) == expected
    assert offsets_behind_latest(json.dumps(PROGRESS)) == expected


def test_with_lag_metrics_puts_them_where_spark_puts_its_own():
    report = with_lag_metrics(json.dumps(PROGRESS))
    assert report["sources"][0]["metrics"] == LAG
    assert report["sources"][1]["metrics"] == {}  # not a Kafka source: untouched
    assert "metrics" not in PROGRESS["sources"][0]  # the caller's dict is not changed


def test_offsets_as_json_text_as_pyspark_objects_give_them():
    """``SourceProgress.endOffset`` / ``latestOffset`` are JSON text in PySpark."""
    source = {
        k: json.dumps(v) if k.endswith("Offset") else v for k, v in PROGRESS["sources"][0].items()
    }
    assert source_lag(source) == LAG


@pytest.mark.parametrize("latest", [None, "null", {}, 5, "not json", {"a": {"0": "x"}}])
def test_no_figures_without_kafka_latest_offsets(latest):
    """As Spark: no latest offsets seen yet (a restarted batch, batch 0 before the fix),
    nothing reported; anything that is not Kafka offsets is not a pykafka source."""
    source = dict(PROGRESS["sources"][0], latestOffset=latest)
    assert source_lag(source) == {}


def test_only_partitions_in_both_offsets_count():
    """A partition that appeared after the batch was planned (in latest only) or went (in
    the end only) is not counted; a batch at the latest offsets is 0 behind."""
    source = {"endOffset": {"a": {"0": 10, "1": 7}}, "latestOffset": {"a": {"0": 10, "2": 99}}}
    assert source_lag(source) == {
        "minOffsetsBehindLatest": "0",
        "maxOffsetsBehindLatest": "0",
        "avgOffsetsBehindLatest": "0.0",
    }
    assert source_lag({"endOffset": {"a": {"1": 7}}, "latestOffset": {"a": {"2": 9}}}) == {}


@pytest.mark.parametrize(
    "x, text",
    [
        (0, "0.0"),
        (3, "3.0"),
        (12.5, "12.5"),
        (1 / 3, "0.3333333333333333"),
        (1e7, "1.0E7"),
        (123456789.5, "1.234567895E8"),
        (1.5e-4, "1.5E-4"),
        (0.001, "0.001"),
    ],
)
def test_mean_written_as_spark_writes_a_double(x, text):
    assert java_double(x) == text


def test_bad_progress_is_a_type_error():
    with pytest.raises(TypeError, match="StreamingQueryProgress"):
        offsets_behind_latest(42)


class _Event:
    def __init__(self, progress):
        self.progress = progress


class _Progress:
    """What the listener reads of a StreamingQueryProgress."""

    id, name, batchId = "id-1", "q", 7
    json = json.dumps(PROGRESS)


def test_listener_logs_or_exports_and_never_raises(caplog):
    seen = []
    KafkaLagListener(lambda progress, lags: seen.append((progress.batchId, lags))).onQueryProgress(
        _Event(_Progress())
    )
    assert seen == [(7, offsets_behind_latest(PROGRESS))]
    with caplog.at_level("INFO", logger="pykafka.lag"):
        KafkaLagListener().onQueryProgress(_Event(_Progress()))
        KafkaLagListener(lambda p, lags: 1 / 0).onQueryProgress(_Event(_Progress()))
    messages = [r.getMessage() for r in caplog.records]
    assert any("min 0, max 25, avg 8.666666666666666" in m for m in messages)
    assert any("could not report" in m and "division by zero" in m for m in messages)


# ---- latestOffset in the progress of every batch, every mode (driver side, stub client) ----


class _FetchlessStub(StubClient):
    def fetch(self, offsets, **kwargs):  # maxBytesPerTrigger's size sample: none here
        return {}


@pytest.mark.parametrize(
    "options",
    [
        {"startingOffsets": "latest"},
        {"startingOffsets": "earliest"},
        {"startingOffsets": "earliest", "maxOffsetsPerTrigger": "4"},
        {"startingOffsets": "earliest", "maxBytesPerTrigger": "2k"},
        {"startingOffsets": "earliest", "minOffsetsPerTrigger": "1000", "maxTriggerDelay": "1h"},
    ],
)
@pytest.mark.parametrize("available_now", [False, True])
def test_latest_offset_reported_for_every_batch(options, available_now):
    client = _FetchlessStub({A0: 10, A1: 3, B0: 0})
    reader = stub_reader(client, **options)
    if available_now:
        reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    limit = reader.getDefaultReadLimit()
    for batch in range(4):
        end = reader.latestOffset(start, limit)
        latest = reader.reportLatestOffset()
        # what the broker said (the run's target under AvailableNow, fetched once)
        assert latest == {"a": {"0": 10, "1": 3}, "b": {"0": 0}}, (batch, latest)
        lag = source_lag({"endOffset": end, "latestOffset": latest})
        behind = [10 - end["a"]["0"], 3 - end["a"]["1"], 0 - end["b"]["0"]]
        assert lag["maxOffsetsBehindLatest"] == str(max(behind))
        start = end


# ---- one real query ------------------------------------------------------------------------


def test_lag_of_a_real_query_from_its_progress_and_listener(spark, kafka, topic_name, tmp_path):
    """AvailableNow with maxOffsetsPerTrigger=4 over 2 partitions of 6 records: batches end
    at 2, 4, 6 per partition while the latest offsets are 6, so the figures are 4, 2, 0
    behind, in the progress reports and in what the listener exported."""
    create_topic(kafka, topic_name, 2)
    produce(kafka.bootstrap, topic_name, values_for("lag", 2, 6))
    exported = []
    listener = KafkaLagListener(
        lambda progress, lags: exported.append(
            (progress.batchId, lags[0]["maxOffsetsBehindLatest"])
        )
    )
    spark.streams.addListener(listener)
    try:
        query = (
            spark.readStream.format("pykafka")
            .option("kafka.bootstrap.servers", kafka.bootstrap)
            .option("subscribe", topic_name)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "4")
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120)
        reports = [p for p in query.recentProgress if p.numInputRows > 0]
        figures = [offsets_behind_latest(p)[0] for p in reports]
        assert [
            (f["minOffsetsBehindLatest"], f["maxOffsetsBehindLatest"], f["avgOffsetsBehindLatest"])
            for f in figures
        ] == [("4", "4", "4.0"), ("2", "2", "2.0"), ("0", "0", "0.0")]
        want = [(p.batchId, f["maxOffsetsBehindLatest"]) for p, f in zip(reports, figures)]
        # listener events arrive asynchronously
        wait_until(lambda: set(want) <= set(exported), 30, lambda: f"{want} in {exported}")
    finally:
        spark.streams.removeListener(listener)
