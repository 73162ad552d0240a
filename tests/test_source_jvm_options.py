"""Options that must behave as in Spark's JVM Kafka connector (issue 17 items 6, 9, 10,
14), against real brokers:

- ``assign`` naming a partition that does not exist yet reads the others, and a stream
  reads that partition once it exists (Spark's AssignStrategy filters the topics'
  partitions by the assignment);
- timestamps -1 and -2 resolve to the latest and the earliest offsets (Spark hands them to
  ListOffsets as they are);
- option errors are raised by ``load()``, before any action, for ``spark.read`` and
  ``spark.readStream`` alike, and a stream given ``endingTimestamp`` runs (Spark ignores
  it there).
"""

from __future__ import annotations

import pytest

from kafka_source.batch_reader import KafkaBatchReader
from kafka_source.options import parse_reader_options
from kafka_source.stream_reader import KafkaStreamReader

from .helpers.broker_setup import create_topic
from .helpers.streaming import produce, values_for


def _options(bootstrap: str, *, streaming: bool, **extra: str):
    return parse_reader_options(
        {"kafka.bootstrap.servers": bootstrap, **extra}, for_streaming=streaming
    )


def test_batch_assign_reads_the_partitions_that_exist(mock_cluster, topic_name):
    create_topic(mock_cluster, topic_name, 2)
    produce(mock_cluster.bootstrap, topic_name, values_for("v", 2, [3, 4]))
    reader = KafkaBatchReader(
        _options(mock_cluster.bootstrap, streaming=False, assign=f'{{"{topic_name}":[0,1,5]}}')
    )
    ranges = sorted((r.partition, r.start, r.end) for p in reader.partitions() for r in p.ranges)
    assert ranges == [(0, 0, 3), (1, 0, 4)]


def test_stream_reads_an_assigned_partition_once_it_exists(mock_cluster, topic_name):
    """The mock cluster cannot add partitions to a topic, so the topic (still empty) is
    deleted and created again with a third partition: the stream started on two."""
    create_topic(mock_cluster, topic_name, 2)
    reader = KafkaStreamReader(
        _options(
            mock_cluster.bootstrap,
            streaming=True,
            assign=f'{{"{topic_name}":[0,1,2]}}',
            startingOffsets="earliest",
        )
    )
    try:
        start = reader.initialOffset()
        assert start == {topic_name: {"0": 0, "1": 0}}
        assert reader.latestOffset(start, None) == start  # batch 0: nothing to read yet
        assert list(reader.partitions(start, start)) == []
        mock_cluster.delete_topic(topic_name)
        create_topic(mock_cluster, topic_name, 3)
        produce(mock_cluster.bootstrap, topic_name, {2: ["a", "b", "c"]})
        end = reader.latestOffset(start, None)
        assert end == {topic_name: {"0": 0, "1": 0, "2": 3}}
        ranges = [
            (p.range.partition, p.range.start, p.range.end) for p in reader.partitions(start, end)
        ]
        assert ranges == [(2, 0, 3)]
    finally:
        reader.stop()


def test_minus_one_and_minus_two_timestamps_start_at_latest_and_earliest(mock_cluster, topic_name):
    create_topic(mock_cluster, topic_name, 2)
    produce(mock_cluster.bootstrap, topic_name, values_for("v", 2, [5, 2]))
    for option, value in (
        ("startingOffsetsByTimestamp", f'{{"{topic_name}":{{"0":-1,"1":-2}}}}'),
        ("startingTimestamp", "-1"),
    ):
        reader = KafkaStreamReader(
            _options(
                mock_cluster.bootstrap, streaming=True, subscribe=topic_name, **{option: value}
            )
        )
        try:
            expected = {"0": 5, "1": 0} if option != "startingTimestamp" else {"0": 5, "1": 2}
            assert reader.initialOffset() == {topic_name: expected}
        finally:
            reader.stop()


@pytest.mark.spark
def test_load_raises_option_errors_before_any_action(spark, mock_cluster, topic_name):
    """Spark calls the source's schema() at load(): option errors surface there, for
    spark.read and spark.readStream alike. A good load() touches no broker (the address
    below has none), and a stream with endingTimestamp loads (Spark ignores it)."""
    base = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"}

    def load(reader, options):
        for k, v in options.items():
            reader = reader.option(k, v)
        return reader.load()

    with pytest.raises(Exception) as info:
        load(spark.read.format("pykafka"), {**base, "minPartitions": "0"})
    assert "minPartitions must be positive" in str(info.value)
    with pytest.raises(Exception) as info:
        load(spark.readStream.format("pykafka"), {**base, "startingOffsets": "{bad"})
    assert "startingOffsets: Expected e.g." in str(info.value)
    with pytest.raises(Exception) as info:
        load(spark.readStream.format("pykafka"), {"kafka.bootstrap.servers": "h:1"})
    assert "One of the following options must be specified for Kafka source" in str(info.value)

    assert load(spark.read.format("pykafka"), base).columns[:2] == ["key", "value"]
    assert load(spark.readStream.format("pykafka"), {**base, "endingTimestamp": "1"}).isStreaming

    # endingTimestamp in a stream is ignored, as in Spark: the query reads what arrives.
    create_topic(mock_cluster, topic_name, 1)
    produce(mock_cluster.bootstrap, topic_name, {0: ["x", "y"]})
    rows = []
    query = (
        load(
            spark.readStream.format("pykafka"),
            {
                "kafka.bootstrap.servers": mock_cluster.bootstrap,
                "subscribe": topic_name,
                "startingOffsets": "earliest",
                "endingTimestamp": "1",
            },
        )
        .selectExpr("CAST(value AS STRING) AS v")
        .writeStream.foreachBatch(lambda df, _: rows.extend(r.v for r in df.collect()))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(rows) == ["x", "y"]
