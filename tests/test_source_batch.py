"""spark.read.format("pykafka") end to end, against Apache Kafka (the session's ``kafka``)
and, for records deleted under a read, librdkafka's mock cluster.

Spark sessions are slow to start, so these tests share one session and each checks much.
"""

import datetime as dt
import uuid

import confluent_kafka
import pytest

from protocol.client.cluster import KafkaClient

from .helpers.broker_setup import create_topic

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def produce_all_codecs(bootstrap, topic):
    """Every codec, headers, null keys and values, in multi-record batches, stamped in
    November 2023. Returns the expected rows."""
    expected, errors = [], []
    for codec in CODECS:
        p = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap,
                "compression.type": codec,
                "linger.ms": 20,
                "enable.idempotence": False,
            }
        )
        for i in range(60):
            key = None if i % 7 == 0 else f"{codec}-k{i}".encode()
            value = None if i % 11 == 0 else f"{codec}-v{i}".encode() * (1 + i % 5)
            headers = (
                [("codec", codec.encode()), ("i", str(i).encode()), ("n", None)] if i % 2 else None
            )
            p.produce(
                topic,
                key=key,
                value=value,
                partition=i % 2,
                headers=headers,
                timestamp=1_700_000_000_000 + i,
                on_delivery=lambda err, msg: err and errors.append(err),
            )
            expected.append((i % 2, key, value, headers))
        assert p.flush(10) == 0
    assert errors == []
    return expected


def read(spark, bootstrap, **options):
    reader = spark.read.format("pykafka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_every_codec_with_headers_and_nulls_reads_back_record_for_record(spark, kafka, topic_name):
    # Records stamped in 2023 are past Kafka's default retention (7 days): without
    # retention.ms=-1 the next retention check deletes them.
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        client.create_topics({topic_name: 2}, configs={"retention.ms": "-1"})
    expected = produce_all_codecs(kafka.bootstrap, topic_name)
    df = read(spark, kafka.bootstrap, subscribe=topic_name, includeHeaders="true")
    assert df.columns == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    got = df.orderBy("partition", "offset").collect()
    assert len(got) == len(expected)
    for part in (0, 1):
        mine = [r for r in got if r.partition == part]
        want = [e for e in expected if e[0] == part]
        assert [r.offset for r in mine] == list(range(len(want)))  # no gaps, no repeats
        # Records without headers have null headers, as in Spark's JVM connector.
        assert [
            (r.key, r.value, r.headers and [(h.key, h.value) for h in r.headers]) for r in mine
        ] == [(k, v, h) for _, k, v, h in want]
    assert {r.topic for r in got} == {topic_name}
    assert {r.timestampType for r in got} == {0}
    first = [r for r in got if r.partition == 0][0]
    assert first.timestamp == dt.datetime(2023, 11, 14, 22, 13, 20)  # 1_700_000_000_000 ms, UTC


NUMBERED_PREFIX = f"numbered-batch-{uuid.uuid4().hex[:8]}-"


@pytest.fixture(scope="module")
def numbered_topic(kafka):
    """3 partitions x 200 records, values = b"p<partition>-<n>"; the only topic whose name
    starts with ``NUMBERED_PREFIX``."""
    topic = NUMBERED_PREFIX + "reads"
    create_topic(kafka, topic, 3)
    p = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 10})
    for part in range(3):
        for n in range(200):
            p.produce(topic, value=b"p%d-%d" % (part, n), partition=part)
    assert p.flush(10) == 0
    return topic


def test_offsets_options_select_exact_slices(spark, kafka, numbered_topic):
    t = numbered_topic
    df = read(
        spark,
        kafka.bootstrap,
        assign=f'{{"{t}":[0,2]}}',
        startingOffsets=f'{{"{t}":{{"0":10,"2":-2}}}}',
        endingOffsets=f'{{"{t}":{{"0":20,"2":5}}}}',
    )
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(10, 20)] + [(2, o) for o in range(0, 5)]

    pattern = read(spark, kafka.bootstrap, subscribePattern=NUMBERED_PREFIX + ".*")
    assert pattern.count() == 600


def test_a_small_read_is_one_task_and_min_partitions_or_max_records_split_the_plan(
    spark, kafka, numbered_topic
):
    """Up to ONE_TASK_RECORDS records, one task reads every partition's range (Spark's
    launch of a Python task costs more than reading them); a user who asks for a split
    gets it, a task per range as Spark's connector plans them."""
    df = read(spark, kafka.bootstrap, subscribe=numbered_topic)
    assert df.rdd.getNumPartitions() == 1
    assert sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect()) == [
        (p, o) for p in range(3) for o in range(200)
    ]
    df = read(spark, kafka.bootstrap, subscribe=numbered_topic, minPartitions="12")
    assert df.rdd.getNumPartitions() >= 12
    assert df.count() == 600
    df = read(spark, kafka.bootstrap, subscribe=numbered_topic, maxRecordsPerPartition="30")
    assert df.rdd.getNumPartitions() == 3 * 7  # ceil(200 / 30) per partition
    assert df.select("partition", "offset").distinct().count() == 600


def test_pushdown_narrows_the_plan_and_keeps_the_result(spark, kafka, numbered_topic):
    query = "partition = 1 AND offset >= 150 AND offset < 170"
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    try:
        unpushed = read(spark, kafka.bootstrap, subscribe=numbered_topic).where(query)
        expected = sorted(r.value for r in unpushed.collect())
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
        pushed = read(spark, kafka.bootstrap, subscribe=numbered_topic).where(query)
        assert sorted(r.value for r in pushed.collect()) == expected
        assert expected == [b"p1-%d" % n for n in range(150, 170)]
        narrowed = read(
            spark, kafka.bootstrap, subscribe=numbered_topic, maxRecordsPerPartition="10"
        ).where(query)
        assert narrowed.rdd.getNumPartitions() == 2  # offsets 150..169 of one partition
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")


@pytest.mark.parametrize(
    "options, message",
    [
        ({}, "subscribe"),
        ({"subscribe": "a", "assign": '{"a":[0]}'}, "subscribe"),
        ({"subscribe": "a", "startingOffsets": "latest"}, "startingOffsets"),
        ({"subscribe": "a", "endingOffsets": "earliest"}, "endingOffsets"),
        ({"subscribe": "a", "minPartitions": "0"}, "minPartitions"),
        ({"assign": "{not json"}, "assign"),
    ],
)
def test_misuse_fails_before_any_job_naming_the_option(spark, options, message):
    reader = spark.read.format("pykafka").option("kafka.bootstrap.servers", "127.0.0.1:1")
    for k, v in options.items():
        reader = reader.option(k, v)
    with pytest.raises(Exception, match=message):
        reader.load().count()


def test_a_user_schema_is_refused(spark):
    with pytest.raises(Exception, match="fixed schema"):
        (
            spark.read.format("pykafka")
            .schema("value string")
            .option("kafka.bootstrap.servers", "127.0.0.1:1")
            .option("subscribe", "x")
            .load()
            .count()
        )


def test_fail_on_data_loss_after_delete_records(spark, mock_cluster, topic_name):
    mock_cluster.create_topic(topic_name, 1, 1)
    p = confluent_kafka.Producer(
        {"bootstrap.servers": mock_cluster.bootstrap, "batch.num.messages": 10}
    )
    for i in range(50):
        p.produce(topic_name, value=b"%d" % i, partition=0)
    p.flush(10)
    mock_cluster.partition_delete_records(topic_name, 0, 20)
    start = f'{{"{topic_name}":{{"0":0}}}}'
    with pytest.raises(Exception, match=rf"\[0, 20\) of topic '{topic_name}' partition 0"):
        read(spark, mock_cluster.bootstrap, subscribe=topic_name, startingOffsets=start).count()
    rows = (
        read(
            spark,
            mock_cluster.bootstrap,
            subscribe=topic_name,
            startingOffsets=start,
            failOnDataLoss="false",
        )
        .select("offset")
        .collect()
    )
    assert sorted(r.offset for r in rows) == list(range(20, 50))
