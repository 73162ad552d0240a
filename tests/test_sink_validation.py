"""Every bad input is refused with a clear message before anything is written.

Schema checks run on the driver (no Spark session is needed: they take a ``StructType``);
data checks run in the task. After each refused write the topic's latest offsets are read
back (on the mock cluster, whose ListOffsets is exact) to prove nothing reached Kafka.
"""

from __future__ import annotations

import re
import time

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kafka_sink.options import parse_writer_options
from kafka_sink.validation import check_save_mode, check_schema
from kafka_sink.writer import create_stream_writer, create_writer, write_task
from protocol.client.cluster import KafkaClient
from protocol.errors import ConfigError

from .helpers.sink import HEADERS_TYPE, make_topic, options, plan_for, rows

HEADERS = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def schema(**columns) -> StructType:
    return StructType([StructField(name, data_type) for name, data_type in columns.items()])


# ---- the schema, on the driver -------------------------------------------------------------


def test_a_full_schema_is_accepted():
    plan = check_schema(
        schema(
            topic=StringType(),
            key=StringType(),
            value=BinaryType(),
            headers=HEADERS,
            partition=IntegerType(),
            timestamp=TimestampType(),
        ),
        None,
    )
    assert plan.topic_column and plan.key_column and plan.headers_column
    assert plan.partition_column and plan.timestamp_kind == "timestamp"
    plan = check_schema(schema(value=StringType(), timestamp=DoubleType()), "t")
    assert plan.topic_option == "t" and not plan.topic_column and not plan.key_column
    assert plan.timestamp_kind == "double"


@pytest.mark.parametrize(
    "columns,topic,message",
    [
        (dict(key=BinaryType()), "t", "Required attribute 'value' not found"),
        (
            dict(value=BinaryType()),
            None,
            "topic option required when no 'topic' attribute is present. Use the topic option for "
            "setting a topic.",
        ),
        (
            dict(topic=IntegerType(), value=BinaryType()),
            None,
            "topic attribute unsupported type int. topic must be a(n) string",
        ),
        (
            dict(value=IntegerType()),
            "t",
            "value attribute unsupported type int. value must be a(n) string or binary",
        ),
        (
            dict(key=LongType(), value=BinaryType()),
            "t",
            "key attribute unsupported type bigint. key must be a(n) string or binary",
        ),
        (
            dict(value=BinaryType(), partition=LongType()),
            "t",
            "partition attribute unsupported type bigint. partition must be a(n) int",
        ),
        (
            dict(value=BinaryType(), partition=StringType()),
            "t",
            "partition attribute unsupported type string. partition must be a(n) int",
        ),
        (
            dict(value=BinaryType(), headers=MapType(StringType(), BinaryType())),
            "t",
            "headers attribute unsupported type map<string,binary>. headers must be a(n) "
            "array<struct<key:string,value:binary>>",
        ),
        (
            dict(
                value=BinaryType(),
                headers=ArrayType(
                    StructType(
                        [StructField("key", StringType()), StructField("value", StringType())]
                    )
                ),
            ),
            "t",
            "headers attribute unsupported type array<struct<key:string,value:string>>",
        ),
        (
            dict(value=BinaryType(), timestamp=LongType()),
            "t",
            "timestamp attribute unsupported type bigint. timestamp must be a(n) double or "
            "timestamp",
        ),
    ],
)
def test_schema_misuse(columns, topic, message):
    with pytest.raises(ConfigError) as info:
        check_schema(schema(**columns), topic)
    assert message in str(info.value)


def test_the_topic_option_wins_over_a_topic_column_of_any_type():
    plan = check_schema(schema(topic=IntegerType(), value=BinaryType()), "t")
    assert plan.topic_option == "t" and not plan.topic_column


def test_save_modes():
    check_save_mode(False)
    with pytest.raises(ConfigError) as info:
        check_save_mode(True)
    # Issue 32: one message that says what to write, not modes Spark refuses itself.
    assert str(info.value) == (
        'Save mode Overwrite not allowed for Kafka. Write with .mode("append"): records are '
        "only ever appended to a topic, and Spark refuses its default save mode "
        "(ErrorIfExists) for Python data sources, so append must be named."
    )
    assert "Allowed save modes" not in str(info.value)
    with pytest.raises(ConfigError, match="Save mode Overwrite not allowed for Kafka"):
        create_writer(
            {"kafka.bootstrap.servers": "localhost:1", "topic": "t"},
            schema(value=BinaryType()),
            True,
        )


def test_driver_checks_options_then_schema_then_topic(mock_cluster, topic_name):
    boot = {"kafka.bootstrap.servers": mock_cluster.bootstrap}
    with pytest.raises(ConfigError, match="kafka.acks"):
        create_writer({**boot, "kafka.acks": "1"}, schema(value=BinaryType()), False)
    with pytest.raises(ConfigError, match="Required attribute 'value' not found"):
        create_writer({**boot, "topic": topic_name}, schema(key=BinaryType()), False)
    with pytest.raises(ConfigError) as info:
        create_stream_writer(
            {**boot, "topic": topic_name, "kafka.max.block.ms": "300"},
            schema(value=BinaryType()),
            False,
        )
    # the reader's words, and the time the check really took (within max.block.ms=300)
    assert str(info.value).startswith(
        f"topic: topic(s) '{topic_name}' do not exist in the "
        f"cluster (Topic {topic_name} not present in metadata "
        "after "
    )
    waited = int(str(info.value).split("metadata after ")[1].split(" ms")[0])
    assert 0 <= waited < 300
    make_topic(mock_cluster, topic_name, 1)
    writer = create_writer({**boot, "topic": topic_name}, schema(value=BinaryType()), False)
    assert writer.options.topic == topic_name and writer.plan.topic_option == topic_name


# ---- the data, in the task -----------------------------------------------------------------


def latest(broker, topic: str, partitions: int) -> list[int]:
    with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        offsets = client.latest_offsets([(topic, p) for p in range(partitions)])
    return [offsets[(topic, p)] for p in range(partitions)]


def refused(broker, topic, data, plan_topic, partitions=3, **extra) -> str:
    opts = options(broker, plan_topic, **extra)
    with pytest.raises(ConfigError) as info:
        write_task(iter(data), opts, plan_for(data[0], plan_topic))
    assert latest(broker, topic, partitions) == [0] * partitions, "something was written"
    return str(info.value)


def test_null_topic_reports_the_row_count(mock_cluster, topic_name):
    make_topic(mock_cluster, topic_name, 3)
    good = pa.RecordBatch.from_arrays(
        [pa.array([topic_name] * 5), pa.array([b"v"] * 5)], names=["topic", "value"]
    )
    bad = pa.RecordBatch.from_arrays(
        [pa.array([topic_name, None, None, topic_name]), pa.array([b"v"] * 4)],
        names=["topic", "value"],
    )
    text = refused(mock_cluster, topic_name, [good, bad], None)
    assert "null topic present in the data (2 of 4 rows in this batch)" in text
    assert "Use the topic option for setting a default topic." in text


def test_unknown_topic_in_the_column(kafka, topic_name):
    """A topic column naming a topic that does not exist fails the write within seconds
    (three Metadata answers, as the driver's check of the topic option and the reader
    ask), not after kafka.max.block.ms (60 s by default, left as it is here), naming the
    topic and the time the lookup took; nothing is written (issue 32)."""
    make_topic(kafka, topic_name, 3)
    batch = pa.RecordBatch.from_arrays(
        [pa.array([topic_name, topic_name + "-missing"]), pa.array([b"a", b"b"])],
        names=["topic", "value"],
    )
    started = time.monotonic()
    text = refused(kafka, topic_name, [batch], None)
    took = time.monotonic() - started
    assert took < 10, took
    assert f"topic(s) '{topic_name}-missing' do not exist in the cluster" in text
    waited = int(re.search(r"not present in metadata after (\d+) ms", text)[1])
    assert waited <= took * 1000


@pytest.mark.parametrize("bad", [3, -1, 1000])
def test_partition_out_of_range(mock_cluster, topic_name, bad):
    make_topic(mock_cluster, topic_name, 3)
    data = [
        rows(10, partitions=lambda i: i % 3),
        rows(10, 10, partitions=lambda i: bad if i == 15 else 0),
    ]
    text = refused(mock_cluster, topic_name, data, topic_name)
    assert (
        f"Invalid partition given with record: {bad} is not in the range [0...3) of "
        f"topic {topic_name!r}, which has 3 partitions"
    ) in text
    assert "the first at row 5" in text and "partition column" in text


def test_record_larger_than_max_request_size(mock_cluster, topic_name):
    make_topic(mock_cluster, topic_name, 3)
    data = [rows(20, value_size=100), rows(3, 20, value_size=2000)]
    text = refused(
        mock_cluster, topic_name, data, topic_name, **{"max.request.size": 1500, "batch.size": 1000}
    )
    assert (
        "bytes when serialized which is larger than 1500, which is the value of the "
        "max.request.size configuration (kafka.max.request.size)" in text
    )
    assert f"Topic {topic_name!r}, row 0 of this batch; 3 such rows" in text


def test_negative_timestamp(mock_cluster, topic_name):
    make_topic(mock_cluster, topic_name, 3)
    batch = pa.RecordBatch.from_arrays(
        [pa.array([b"a", b"b"]), pa.array([1_000_000, -5_000], pa.timestamp("us", tz="UTC"))],
        names=["value", "timestamp"],
    )
    text = refused(mock_cluster, topic_name, [batch], topic_name)
    assert "Invalid timestamp: -5. Timestamp should always be non-negative or null." in text


def test_nan_double_timestamp(mock_cluster, topic_name):
    make_topic(mock_cluster, topic_name, 3)
    batch = pa.RecordBatch.from_arrays(
        [pa.array([b"a", b"b"]), pa.array([1.5, float("nan")])], names=["value", "timestamp"]
    )
    text = refused(mock_cluster, topic_name, [batch], topic_name)
    assert "timestamp column: a double timestamp is NaN or infinite" in text


def test_null_header_key_and_null_header_entry(mock_cluster, topic_name):
    make_topic(mock_cluster, topic_name, 3)
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([b"a", b"b"]),
            pa.array(
                [[{"key": "ok", "value": b"1"}], [{"key": None, "value": b"2"}]], HEADERS_TYPE
            ),
        ],
        names=["value", "headers"],
    )
    text = refused(mock_cluster, topic_name, [batch], topic_name)
    assert "headers column: Null header keys are not permitted (1 null keys" in text
    entry_type = HEADERS_TYPE.value_type
    headers = pa.ListArray.from_arrays(
        pa.array([0, 1, 2], pa.int32()), pa.array([{"key": "k", "value": b"1"}, None], entry_type)
    )
    batch = pa.RecordBatch.from_arrays(
        [pa.array([b"a", b"b"]), headers], names=["value", "headers"]
    )
    text = refused(mock_cluster, topic_name, [batch], topic_name)
    assert "headers column: a header entry is null (1 in this batch)" in text


def test_a_bad_row_late_in_a_small_task_stops_the_whole_task(mock_cluster, topic_name):
    """The task's input fits in checkBeforeSendBytes: every batch is checked before the
    first record is sent, so a bad row in the last batch leaves the topic untouched."""
    make_topic(mock_cluster, topic_name, 3)
    data = [rows(1000, s, partitions=lambda i: i % 3) for s in range(0, 5000, 1000)]
    data.append(rows(10, 5000, partitions=lambda i: 7))
    text = refused(mock_cluster, topic_name, data, topic_name)
    assert "Invalid partition given with record: 7" in text


def test_a_large_task_never_sends_a_batch_with_a_bad_row(mock_cluster, topic_name):
    """Past checkBeforeSendBytes (or kafka.buffer.memory, if smaller) a task starts sending,
    but a bad batch is still refused whole: the rows before it are written, none of it."""
    make_topic(mock_cluster, topic_name, 1)
    data = [rows(1000, s, partitions=lambda i: 0) for s in range(0, 5000, 1000)]
    data.append(rows(10, 5000, partitions=lambda i: 0 if i < 5005 else 1))
    for limit in ({"checkBeforeSendBytes": "20000"}, {"kafka.buffer.memory": "20000"}):
        opts = parse_writer_options(
            {
                "kafka.bootstrap.servers": mock_cluster.bootstrap,
                "topic": topic_name,
                "kafka.batch.size": "5000",
                **limit,
            }
        )
        before = latest(mock_cluster, topic_name, 1)[0]
        with pytest.raises(ConfigError, match="Invalid partition given with record: 1"):
            write_task(iter(data), opts, plan_for(data[0], topic_name))
        written = latest(mock_cluster, topic_name, 1)[0] - before
        assert 0 < written <= 5000, limit
