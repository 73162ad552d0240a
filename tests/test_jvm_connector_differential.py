"""Spark's own JVM Kafka connector as the referee (issue 30): the same queries on the same
Apache Kafka through ``format("kafka")`` and ``format("pykafka")``, compared row for row
(topic, partition, offset, key, value, timestamp, timestampType, headers) and schema for
schema.

Maven serves the JVM connector up to Spark 4.2.0, so the comparison runs under PySpark 4.2.0
in a virtualenv of its own (``.venv-pyspark-4.2.0``, built on first use: 3-4 min). One
child driver (``tests/helpers/jvm_referee_child.py``: one SparkSession, ``local[2]``, the
connector's jars from ``kafka_testbed.maven_jars.spark_kafka_jars`` in ``spark.jars``, ours
imported from the checkout) runs every scenario of this module through both connectors;
the module's fixture prepares the topics on the session's Apache Kafka (librdkafka writes
them), runs the child once, and each test judges one scenario.

Streams are compared micro-batch for micro-batch (each batch's size and start and end
offsets from its progress JSON): maxOffsetsPerTrigger, minOffsetsPerTrigger with
maxTriggerDelay, Trigger.AvailableNow, and "steps" scenarios whose runs share a
checkpoint while the child changes the topics between them (a restart, a checkpoint
written by the other connector, a partition added, a topic deleted).

Where the two differ by design, the test pins the difference README's "How it differs
from Spark's Kafka connector" documents: both sides' outcomes are asserted.

A second child (``edge_referee``, at the end) runs what needs more than the session's
broker: a Kafka with a TLS listener (Java truststore options, PKCS12 and JKS, against PEM
files), reached through a fault proxy that spoils ListOffsets and Fetch answers by topic
(``fetchOffset.numRetries`` against broker errors), in a Spark session started with a
4 s ``spark.network.timeout`` (Spark's connector takes its poll timeout from it, ours not).
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
import trustme
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_testbed.broker_node import java_executable
from kafka_testbed.maven_jars import spark_kafka_jars
from protocol.client.cluster import KafkaClient
from protocol.schemas import FETCH, LIST_OFFSETS

from .helpers.broker_setup import create_topic, kafka_behind_fault_proxy
from .helpers.own_envs import own_env
from .helpers.jvm_connector import REFEREE_REQUIREMENTS, SPARK_VERSION, ok, run_child
from .helpers.frames import decoded, encoded

CHILD_THREADS = 2  # scenarios the child runs at a time

# A first run builds .venv-pyspark-4.2.0 (pip builds PySpark's sdist) inside the fixture.
pytestmark = [pytest.mark.spark, pytest.mark.jvm_referee, pytest.mark.timeout(1800)]

# ---- the topics ----------------------------------------------------------------------------
# Record i of partition p of the "basic" topic (3 partitions, 6 records each): key k<p><i>
# (null for i=1), value v<p><i> (null for i=2), headers on i=3 (a repeated key, a null
# value) and i=4 (an empty value), timestamp T0 + i s + p*10 ms.
BASIC_PARTITIONS, BASIC_RECORDS = 3, 6
CODECS = ("gzip", "snappy", "lz4", "zstd")
CODEC_RECORDS = 12
DELETED_RECORDS, DELETED_BEFORE = 10, 4


def basic_timestamp(t0: int, partition: int, i: int) -> int:
    return t0 + i * 1000 + partition * 10


def basic_headers(i: int):
    if i == 3:
        return [("h1", b"a"), ("h2", None), ("h1", b"b")]
    if i == 4:
        return [("e", b"")]
    return None


def produce_basic(bootstrap: str, topic: str, t0: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for p in range(BASIC_PARTITIONS):
        for i in range(BASIC_RECORDS):
            producer.produce(
                topic,
                partition=p,
                key=None if i == 1 else f"k{p}{i}",
                value=None if i == 2 else f"v{p}{i}",
                headers=basic_headers(i),
                timestamp=basic_timestamp(t0, p, i),
            )
    assert producer.flush(30) == 0


def produce_codecs(bootstrap: str, topic: str) -> None:
    """Partition i written by a producer compressing with CODECS[i], in two batches."""
    for p, codec in enumerate(CODECS):
        producer = Producer(
            {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 50}
        )
        for half in range(2):
            for i in range(CODEC_RECORDS // 2):
                n = half * CODEC_RECORDS // 2 + i
                producer.produce(
                    topic,
                    partition=p,
                    key=f"{codec}-{n}",
                    value=f"{codec} value {n} " * 8,
                    headers=[("codec", codec.encode())],
                )
            assert producer.flush(30) == 0


def produce_transactions(bootstrap: str, topic: str, transactional_id: str) -> None:
    """Committed c0-c2, aborted a0-a2 (flushed first, so the broker holds them), committed
    c3-c4: with the transaction markers, offsets 0-10."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    for values, commit in (
        (["c0", "c1", "c2"], True),
        (["a0", "a1", "a2"], False),
        (["c3", "c4"], True),
    ):
        producer.begin_transaction()
        for v in values:
            producer.produce(topic, partition=0, key=v, value=v)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)


def produce_and_delete(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(DELETED_RECORDS):
        producer.produce(topic, partition=0, key=f"d{i}", value=f"d{i}")
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, DELETED_BEFORE)]).values():
        assert future.result(30).low_watermark == DELETED_BEFORE


def produce_log_append_time(bootstrap: str, topic: str) -> None:
    """A topic whose broker stamps each record (timestampType 1)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, 1, 1, config={"message.timestamp.type": "LogAppendTime"})
    admin.create_topics([new])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        producer.produce(topic, key=f"l{i}", value=f"l{i}", timestamp=1000 + i)
    assert producer.flush(30) == 0


# ---- the scenarios -------------------------------------------------------------------------
# Placeholders <B> <B2> <C> <X> <D> <L> <P> (the topics and the run's prefix) and <T0>,
# <T0+n> are replaced by the fixture; <T> in write scenarios by the child, per sink.


def ts_json(**by_partition: str) -> str:
    """``{"<B>":{"0":<T0+1000>,...}}``: the placeholders stand for numbers, unquoted."""
    return '{"<B>":{' + ",".join(f'"{p}":{v}' for p, v in by_partition.items()) + "}}"


# Read scenarios both connectors must answer alike, with the number of rows expected.
READS = {
    "default-earliest-to-latest": ({"subscribe": "<B>"}, 18),
    "json-minus-two-and-minus-one": (
        {
            "subscribe": "<B>",
            "startingOffsets": '{"<B>":{"0":-2,"1":2,"2":-2}}',
            "endingOffsets": '{"<B>":{"0":3,"1":-1,"2":5}}',
        },
        3 + 4 + 5,
    ),
    "json-specific-offsets-assign": (
        {"assign": '{"<B>":[0,1,2]}', "startingOffsets": '{"<B>":{"0":1,"1":4,"2":6}}'},
        5 + 2 + 0,
    ),
    # a pattern matches anywhere in a topic's name in both (Spark: Regex.findFirstIn)
    "subscribe-pattern-matches-anywhere": ({"subscribePattern": "<P>-basic"}, 18 + 2),
    "assign-two-partitions": ({"assign": '{"<B>":[0,2]}'}, 12),
    "include-headers": ({"subscribe": "<B>", "includeHeaders": "true"}, 18),
    "starting-timestamp": ({"subscribe": "<B>", "startingTimestamp": "<T0+2500>"}, 9),
    "ending-timestamp": ({"subscribe": "<B>", "endingTimestamp": "<T0+2005>"}, 3 + 2 + 2),
    "offsets-by-timestamp": (
        {
            "subscribe": "<B>",
            "startingOffsetsByTimestamp": ts_json(
                **{"0": "<T0+1000>", "1": "-2", "2": "<T0+4015>"}
            ),
            "endingOffsetsByTimestamp": ts_json(**{"0": "<T0+4000>", "1": "<T0+99000>", "2": "-1"}),
        },
        3 + 6 + 2,
    ),
    "by-timestamp-strategy-latest": (
        {
            "subscribe": "<B>",
            "startingOffsetsByTimestamp": ts_json(
                **{"0": "<T0+99000>", "1": "<T0>", "2": "<T0+5000>"}
            ),
            "startingOffsetsByTimestampStrategy": "latest",
        },
        0 + 6 + 1,
    ),
    "read-committed": ({"subscribe": "<X>", "kafka.isolation.level": "read_committed"}, 5),
    "read-uncommitted": ({"subscribe": "<X>", "kafka.isolation.level": "read_uncommitted"}, 8),
    "compression-codecs": (
        {"subscribe": "<C>", "includeHeaders": "true"},
        len(CODECS) * CODEC_RECORDS,
    ),
    "log-append-time": ({"subscribe": "<L>"}, 3),
    "deleted-records-earliest": ({"subscribe": "<D>"}, DELETED_RECORDS - DELETED_BEFORE),
    "deleted-records-fail-on-data-loss-false": (
        {"subscribe": "<D>", "startingOffsets": '{"<D>":{"0":0}}', "failOnDataLoss": "false"},
        DELETED_RECORDS - DELETED_BEFORE,
    ),
    # the offset JSON read as leniently as Spark's json4s where harmless: 1.0 is 1, a
    # partition key may be "+1" (issue 17 item 14)
    "json-lenient-numbers": (
        {"subscribe": "<B>", "startingOffsets": '{"<B>":{"0":1.0,"+1":2,"2":-2}}'},
        5 + 4 + 6,
    ),
    # kafka.group.id and groupIdPrefix change no row (ours ignores them: no group is joined)
    "group-id-and-prefix": (
        {"subscribe": "<B2>", "kafka.group.id": "<P>-group", "groupIdPrefix": "<P>-prefix"},
        2,
    ),
    # assign naming a partition that does not exist (yet) reads the others (item 6)
    "assign-a-partition-not-there-yet": ({"assign": '{"<B>":[0,7]}'}, 6),
    # internal topics are never read, whatever the pattern says (item 13)
    "subscribe-pattern-skips-internal-topics": (
        {"subscribePattern": "<P>-basic2|__transaction_state|__consumer_offsets"},
        2,
    ),
}

# Reads on which the two differ by design (README "How it differs"): (options, Spark's
# number of rows, what our error names).
DIFFERING_READS = {
    # subscribePattern is a Python regular expression: Java-only syntax is refused here
    "pattern-java-only-construct": (
        {"subscribePattern": r"<P>-\p{Alpha}asic2"},
        2,
        "subscribePattern",
    ),
    # where Spark's parser turns a mistake into a number without a word: a fraction (Spark
    # floors it), null (Spark: 0), a timestamp below -2 (Spark asks the broker: -3 is the
    # record with the largest timestamp)
    "json-fraction-offset": (
        {"subscribe": "<B>", "startingOffsets": '{"<B>":{"0":5.7,"1":-2,"2":-2}}'},
        1 + 6 + 6,
        "startingOffsets",
    ),
    "json-null-offset": (
        {"subscribe": "<B>", "startingOffsets": '{"<B>":{"0":null,"1":-2,"2":-2}}'},
        18,
        "startingOffsets",
    ),
    "timestamp-below-minus-two": (
        {"subscribe": "<B>", "startingOffsetsByTimestamp": '{"<B>":{"0":-3,"1":-2,"2":-2}}'},
        1 + 6 + 6,
        "startingOffsetsByTimestamp",
    ),
}

# Reads whose Spark partitions are compared too.
SPLITS = {
    "min-partitions": ({"subscribe": "<B>", "minPartitions": "6"}, 18),
    "max-records-per-partition-explicit-offsets": (
        {
            "subscribe": "<B>",
            "maxRecordsPerPartition": "2",
            "startingOffsets": '{"<B>":{"0":0,"1":0,"2":0}}',
            "endingOffsets": '{"<B>":{"0":6,"1":6,"2":6}}',
        },
        18,
    ),
}
# Documented difference: Spark 4.2 decides whether maxRecordsPerPartition splits a batch
# before it resolves earliest/latest (an unresolved range "has" one record), so it splits
# only ranges given as offsets; ours splits every range. (scenario, Spark's, ours)
MAX_RECORDS_EARLIEST_LATEST = (
    "max-records-per-partition-earliest-to-latest",
    {"subscribe": "<B>", "maxRecordsPerPartition": "2"},
    3,
    9,
)
# Documented difference: a small read (here 18 records) is one task of ours, a task per
# Kafka partition of Spark's. (scenario, Spark's, ours)
SMALL_READ = ("small-read-in-one-task", {"subscribe": "<B>"}, 3, 1)

# Streams (Trigger.AvailableNow into a memory table): rows and input rows per micro-batch.
STREAMS = {
    "stream-max-offsets-per-trigger": (
        {"subscribe": "<B>", "startingOffsets": "earliest", "maxOffsetsPerTrigger": "6"},
        18,
    ),
    "stream-read-committed": (
        {
            "subscribe": "<X>",
            "startingOffsets": "earliest",
            "kafka.isolation.level": "read_committed",
        },
        5,
    ),
    # backlogs 6, 4 and 1: Spark's rateLimit prorates 4 offsets as 2, 1 and 1 (a share
    # below one offset is rounded up), then 2 and 1 of 4 and 3, ...
    "stream-max-offsets-uneven-backlogs": (
        {
            "subscribe": "<B>",
            "startingOffsets": '{"<B>":{"0":0,"1":2,"2":5}}',
            "maxOffsetsPerTrigger": "4",
        },
        11,
    ),
    # a stream ignores endingTimestamp in both (issue 17 item 9)
    "stream-ignores-ending-timestamp": (
        {"subscribe": "<B2>", "startingOffsets": "earliest", "endingTimestamp": "<T0>"},
        2,
    ),
}
# Documented difference: Trigger.AvailableNow with minOffsetsPerTrigger. Spark's connector
# applies the minimum, so the run ends once fewer records are left than it (of the 18
# here, 7 at most a batch prorate to 6, and the last 6 are never read); ours reads every
# batch up to the run's end. (options, Spark's batch sizes, ours)
AVAILABLE_NOW_MIN_OFFSETS = (
    "stream-available-now-with-min-offsets",
    {
        "subscribe": "<B>",
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": "7",
        "minOffsetsPerTrigger": "7",
        "maxTriggerDelay": "10m",
    },
    [6, 6],
    [6, 6, 6],
)

# Streams run again on one checkpoint, with the topics changed between runs: each connector
# gets topics of its own (<S>, created empty by the fixture, as <T> for writes). The steps
# (tests/helpers/jvm_referee_child.py, run_steps): "stream" runs one (Trigger.AvailableNow unless a
# processing-time "trigger" is given), "produce" writes ``count`` records "<tag>-<i>" into
# a partition at once, "add_partitions", "delete_topic", "delete_records"; "batch" and
# "collect" run a batch DataFrame's actions. ({topic suffix: partitions}, steps)


def stream(checkpoint: str = "c", **options: str) -> dict:
    return {"do": "stream", "checkpoint": checkpoint, "options": options}


def put(count: int, tag: str, partition: int = 0, topic: str = "<S>") -> dict:
    return {"do": "produce", "topic": topic, "partition": partition, "count": count, "tag": tag}


STEPS = {
    # the default start (latest) skips what is there; each restart reads exactly what came
    "steps-restart-from-the-checkpoint": (
        {"": 2},
        [
            put(3, "a"),
            put(3, "a", 1),
            stream(subscribe="<S>"),
            put(2, "b"),
            put(1, "b", 1),
            stream(subscribe="<S>"),
            put(1, "c", 1),
            stream(subscribe="<S>"),
        ],
    ),
    # a checkpoint written by the other connector: a run with nothing new, then one that
    # reads exactly the new records
    "steps-checkpoint-from-the-other-connector": (
        {"": 1},
        [
            put(3, "a"),
            {**stream(subscribe="<S>", startingOffsets="earliest"), "format": "other"},
            stream(subscribe="<S>", startingOffsets="earliest"),
            put(2, "b"),
            stream(subscribe="<S>", startingOffsets="earliest"),
        ],
    ),
    # a partition added between runs is read from its earliest offset; one whose first
    # records were deleted before the query saw them is data loss (issue 17 item 3)
    "steps-partition-added": (
        {"": 1},
        [
            put(2, "a"),
            stream(subscribe="<S>", startingOffsets="earliest"),
            {"do": "add_partitions", "topic": "<S>", "total": 2},
            put(3, "b", 1),
            put(1, "c"),
            stream(subscribe="<S>", startingOffsets="earliest"),
            {"do": "add_partitions", "topic": "<S>", "total": 3},
            put(3, "d", 2),
            {"do": "delete_records", "topic": "<S>", "partition": 2, "before": 1},
            stream(subscribe="<S>", startingOffsets="earliest"),
            stream(subscribe="<S>", startingOffsets="earliest", failOnDataLoss="false"),
        ],
    ),
    # minOffsetsPerTrigger: the first batch never waits; 2 records (below 5) wait for
    # maxTriggerDelay, then come in one batch; 6 come at the next trigger
    "steps-min-offsets-with-max-trigger-delay": (
        {"": 1},
        [
            put(2, "a"),
            {
                **stream(
                    subscribe="<S>",
                    startingOffsets="earliest",
                    minOffsetsPerTrigger="5",
                    maxTriggerDelay="3s",
                ),
                "trigger": "500 milliseconds",
                "until_rows": 10,
                "settle_s": 1,
                "during": [
                    {"after_rows": 2, "steps": [put(2, "b")]},
                    {"after_rows": 4, "steps": [put(6, "c")]},
                ],
            },
        ],
    ),
    # streaming writes in update mode and with a continuous trigger: Spark's sink takes
    # both; Spark refuses update mode for a Python sink, and runs a continuous query on
    # one that writes nothing (8 s here; Spark's sink lands the rows in 2-3)
    "steps-stream-writes-update-mode-and-continuous": (
        {"": 1, "-update": 1, "-cont": 1},
        [
            put(3, "a"),
            {
                "do": "stream_write",
                "from": "<S>",
                "to": "<S>-update",
                "output_mode": "update",
                "checkpoint": "update",
            },
            {
                "do": "stream_write",
                "from": "<S>",
                "to": "<S>-cont",
                "trigger": "continuous",
                "until_rows": 3,
                "timeout_s": 8,
                "checkpoint": "cont",
            },
        ],
    ),
    # a batch DataFrame's second action after records and a partition were added
    "steps-batch-dataframe-run-twice": (
        {"": 1},
        [
            put(2, "a"),
            {"do": "batch", "df": "d", "options": {"subscribe": "<S>"}},
            {"do": "collect", "df": "d"},
            put(1, "b"),
            {"do": "add_partitions", "topic": "<S>", "total": 2},
            put(2, "c", 1),
            {"do": "collect", "df": "d"},
        ],
    ),
}
# A topic deleted between runs: subscribed by name, the run after fails in both (whatever
# failOnDataLoss says); matched by a pattern, its partitions are gone, which is data loss
# (failOnDataLoss true: the run fails; false, on the same checkpoint: it goes on).
for _how, _subscription, _after in (
    ("subscribe", {"subscribe": "<S>-a,<S>-b"}, [{}]),
    (
        "pattern",
        {"subscribePattern": "<S>-[ab]"},
        [{"failOnDataLoss": "true"}, {"failOnDataLoss": "false"}],
    ),
):
    STEPS[f"steps-topic-deleted-{_how}"] = (
        {"-a": 1, "-b": 1},
        [
            put(2, "a", topic="<S>-a"),
            put(2, "b", topic="<S>-b"),
            stream(**_subscription, startingOffsets="earliest"),
            {"do": "delete_topic", "topic": "<S>-b"},
            put(1, "c", topic="<S>-a"),
            *[stream(**_subscription, startingOffsets="earliest", **extra) for extra in _after],
        ],
    )

# Mistakes both connectors refuse: (options, what our message must name, what Spark's
# message says, to show it failed for the same mistake).
MISUSE = {
    "no-bootstrap-servers": (
        {"subscribe": "<B>"},
        "kafka.bootstrap.servers",
        "'kafka.bootstrap.servers' must be specified",
    ),
    "subscribe-and-assign": (
        {"subscribe": "<B>", "assign": '{"<B>":[0]}'},
        "assign",
        "only one of the following options",
    ),
    "no-subscription": ({}, "subscribe", "one of the following options must be specified"),
    "bad-starting-offsets-json": (
        {"subscribe": "<B>", "startingOffsets": '{"<B>":{"0":'},
        "startingOffsets",
        "expected e.g.",
    ),
    "batch-starting-at-latest": (
        {"subscribe": "<B>", "startingOffsets": "latest"},
        "startingOffsets",
        "can't be latest for batch",
    ),
    "batch-ending-at-earliest": (
        {"subscribe": "<B>", "endingOffsets": "earliest"},
        "endingOffsets",
        "can't be earliest for batch",
    ),
    "batch-json-start-minus-one": (
        {"subscribe": "<B>", "startingOffsets": '{"<B>":{"0":-1,"1":-2,"2":-2}}'},
        "startingOffsets",
        "can't be latest for batch",
    ),
    "json-missing-a-partition": (
        {"subscribe": "<B>", "startingOffsets": '{"<B>":{"0":0}}'},
        "startingOffsets",
        "don't match what are assigned",
    ),
    "by-timestamp-strategy-error": (
        {
            "subscribe": "<B>",
            "startingOffsetsByTimestamp": ts_json(**{"0": "<T0+99000>", "1": "<T0>", "2": "<T0>"}),
        },
        "startingOffsetsByTimestamp",
        "no offset matched",
    ),
    # Spark's says UnknownTopicOrPartitionException; ours names the option and the topic
    "subscribe-unknown-topic": (
        {"subscribe": "<P>-unknown"},
        "subscribe",
        "unknowntopicorpartition",
    ),
    "assign-unknown-topic": (
        {"assign": '{"<P>-unknown":[0]}'},
        "assign",
        "unknowntopicorpartition",
    ),
    "starting-offsets-of-an-unknown-topic": (
        {"assign": '{"<B>":[0]}', "startingOffsets": '{"<P>-unknown":{"0":0}}'},
        "startingOffsets",
        "don't match what are assigned",
    ),
    # GSSAPI without a JAAS line: ours fails when the read is defined, naming
    # kafka.sasl.jaas.config and the Krb5LoginModule line to give; Spark's connector sets up
    # a Kerberos login, which fails when its first client is built (no JAAS entry). A
    # Kerberos success is tests/test_kerberos.py's (make test-security, a real KDC)
    "sasl-gssapi": (
        {
            "subscribe": "<B>",
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "GSSAPI",
        },
        "kafka.sasl.mechanism gssapi needs kafka.sasl.jaas.config",
        "failed to create new kafkaadminclient",
    ),
    "deleted-records-fail-on-data-loss": (
        {"subscribe": "<D>", "startingOffsets": '{"<D>":{"0":0}}'},
        "failOnDataLoss",
        "some data may have been lost",
    ),
}

# Writes: the same rows through both sinks into topics of their own (<T> per sink), read
# back by Spark's connector. (sql, options, {topic suffix: partitions})
KEYED_ROWS = """
SELECT concat('key-', id) AS key, concat('value-', id) AS value,
       CASE id % 3
         WHEN 0 THEN array(named_struct('key', 'h', 'value', CAST(concat('x', id) AS BINARY)),
                           named_struct('key', 'n', 'value', CAST(NULL AS BINARY)))
         WHEN 1 THEN NULL
         ELSE slice(array(named_struct('key', 'h', 'value', CAST('' AS BINARY))), 1, 0)
       END AS headers
FROM range(0, 40, 1, 1)"""
WRITES = {
    "write-keys-partitioned-by-murmur2": (KEYED_ROWS, {"topic": "<T>"}, {"": 3}),
    "write-null-keys-and-values": (
        "SELECT CASE WHEN id % 2 = 0 THEN NULL ELSE CAST(id AS STRING) END AS key, "
        "CASE WHEN id % 3 = 0 THEN NULL ELSE CAST(concat('v', id) AS BINARY) END AS value "
        "FROM range(0, 12, 1, 1)",
        {"topic": "<T>"},
        {"": 1},
    ),
    "write-topic-option-over-topic-column": (
        "SELECT '<T>-col' AS topic, CAST(id AS STRING) AS key, 'v' AS value FROM range(0, 6, 1, 1)",
        {"topic": "<T>-opt"},
        {"-opt": 1, "-col": 1},
    ),
    "write-topic-column": (
        "SELECT CASE WHEN id % 2 = 0 THEN '<T>-a' ELSE '<T>-b' END AS topic, "
        "CAST(id AS STRING) AS key, concat('v', id) AS value FROM range(0, 8, 1, 1)",
        {},
        {"-a": 1, "-b": 1},
    ),
    # Kafka's own partitioner named: murmur2 of the key in both
    "write-default-partitioner-class": (
        KEYED_ROWS,
        {
            "topic": "<T>",
            "kafka.partitioner.class": (
                "org.apache.kafka.clients.producer.internals.DefaultPartitioner"
            ),
        },
        {"": 3},
    ),
    # exactlyOnce (ours, transactions the driver commits) lands the rows Spark's
    # at-least-once sink does, which ignores the option
    "write-exactly-once": (
        KEYED_ROWS,
        {"topic": "<T>", "exactlyOnce": "true", "transactionalIdPrefix": "<T>-txn"},
        {"": 3},
    ),
    # a null partition falls back to the partitioner (murmur2 of the key)
    "write-explicit-partition": (
        "SELECT CAST(id AS STRING) AS key, 'v' AS value, "
        "CASE WHEN id % 3 = 0 THEN NULL ELSE CAST(id % 2 AS INT) END AS partition "
        "FROM range(0, 12, 1, 1)",
        {"topic": "<T>"},
        {"": 3},
    ),
}
# A timestamp column: ours writes it as the record's timestamp; Spark 4.2's sink has no
# timestamp column (it ignores it: the producer stamps the time of sending).
WRITE_TIMESTAMPS = (
    "SELECT CAST(id AS STRING) AS key, 'v' AS value, "
    "timestamp_millis(<T0> + id * 1000) AS timestamp FROM range(0, 4, 1, 1)",
    {"topic": "<T>"},
    {"": 1},
)

# Write mistakes both sinks refuse: (sql, options, mode, what our message must name, what
# Spark's message says).
WRITE_MISUSE = {
    "write-overwrite-mode": (
        "SELECT 'v' AS value",
        {"topic": "<T>"},
        "overwrite",
        "overwrite",
        "save mode overwrite not allowed",
    ),
    "write-no-value-column": (
        "SELECT 'k' AS key",
        {"topic": "<T>"},
        "append",
        "value",
        "required attribute 'value' not found",
    ),
    "write-no-topic": ("SELECT 'v' AS value", {}, "append", "topic", "topic option required"),
    "write-int-key": (
        "SELECT 1 AS key, 'v' AS value",
        {"topic": "<T>"},
        "append",
        "key",
        "key attribute unsupported type",
    ),
}


# Writes on which the two sinks differ by design (README "How it differs"): (sql, options,
# mode, scenario flags, rows Spark's sink lands, rows ours lands, what our error names).
FOUR_ROWS = "SELECT CAST(id AS STRING) AS key, 'v' AS value FROM range(0, 4, 1, 1)"
WRITE_DIFFERS = {
    # Spark refuses the default save mode (errorifexists) for a Python data source
    "write-default-save-mode": (FOUR_ROWS, {"topic": "<T>"}, "errorifexists", {}, 4, None, "mode"),
    # acks 1 needs kafka.enable.idempotence=false here; Java turns idempotence off itself
    "write-acks-one": (
        FOUR_ROWS,
        {"topic": "<T>", "kafka.acks": "1"},
        "append",
        {},
        4,
        None,
        "kafka.enable.idempotence",
    ),
    # a missing topic: Spark's producer has the broker create it (auto.create.topics.enable
    # is on); ours never creates topics
    "write-to-a-missing-topic": (
        FOUR_ROWS,
        {"topic": "<T>-missing"},
        "append",
        {"read_back": ["<T>-missing"]},
        4,
        None,
        "<T>-missing",
    ),
    # a bad row after good ones: Java's producer has sent the rows before it, ours checks
    # the task's rows before sending any (checkBeforeSendBytes)
    "write-bad-row-after-good-ones": (
        "SELECT CASE WHEN id < 3 THEN '<T>' END AS topic, CAST(id AS STRING) AS key, "
        "'v' AS value FROM range(0, 4, 1, 1)",
        {},
        "append",
        {"read_back_after_error": True},
        3,
        0,
        "topic",
    ),
    # df.write from a Python thread that never set the active session
    "write-in-a-thread-of-its-own": (
        FOUR_ROWS,
        {"topic": "<T>"},
        "append",
        {"fresh_thread": True},
        4,
        None,
        "DATA_SOURCE_NOT_FOUND",
    ),
}


def read_scenarios() -> list[dict]:
    out = [{"name": n, "kind": "read", "options": o} for n, (o, _) in READS.items()]
    out += [
        {"name": n, "kind": "read", "options": o, "partitions": True}
        for n, (o, _) in SPLITS.items()
    ]
    for name, options, _, _ in (MAX_RECORDS_EARLIEST_LATEST, SMALL_READ):
        out.append({"name": name, "kind": "read", "options": options, "partitions": True})
    out += [
        {"name": n, "kind": "read", "options": o, "stream": True} for n, (o, _) in STREAMS.items()
    ]
    out.append(
        {
            "name": AVAILABLE_NOW_MIN_OFFSETS[0],
            "kind": "read",
            "options": AVAILABLE_NOW_MIN_OFFSETS[1],
            "stream": True,
        }
    )
    out += [{"name": n, "kind": "read", "options": o} for n, (o, *_) in DIFFERING_READS.items()]
    out += [
        {"name": n, "kind": "read", "options": o, "no_bootstrap": n == "no-bootstrap-servers"}
        for n, (o, _, _) in MISUSE.items()
    ]
    return out


def sink_topic(prefix: str, name: str, fmt: str) -> str:
    return f"{prefix}-{name}-{'jvm' if fmt == 'kafka' else 'py'}"


def steps_scenarios(prefix: str) -> list[dict]:
    return [
        {
            "name": name,
            "kind": "steps",
            "steps": steps,
            "topics": topics,
            "subst": {fmt: {"S": sink_topic(prefix, name, fmt)} for fmt in ("kafka", "pykafka")},
        }
        for name, (topics, steps) in STEPS.items()
    ]


def write_scenarios(prefix: str) -> list[dict]:
    out = []
    specs = {
        **{n: (sql, o, t, "append") for n, (sql, o, t) in WRITES.items()},
        "write-timestamp-column": (*WRITE_TIMESTAMPS, "append"),
        **{n: (sql, o, {"": 1}, mode) for n, (sql, o, mode, _, _) in WRITE_MISUSE.items()},
    }
    flags = {}
    for name, (sql, options, mode, flag, *_) in WRITE_DIFFERS.items():
        specs[name] = (sql, options, {"": 1}, mode)
        flags[name] = flag
    for name, (sql, options, topics, mode) in specs.items():
        out.append(
            {
                "name": name,
                "kind": "write",
                "sql": sql,
                "options": options,
                "mode": mode,
                "read_back": [f"<T>{suffix}" for suffix in topics],
                "topics": topics,
                **flags.get(name, {}),
                "subst": {
                    fmt: {"T": sink_topic(prefix, name, fmt)} for fmt in ("kafka", "pykafka")
                },
            }
        )
    return out


def resolve(value, names: dict[str, str]):
    """``<name>`` placeholders of the fixture's names replaced, recursively."""
    if isinstance(value, str):
        for name, replacement in names.items():
            value = value.replace(f"<{name}>", replacement)
        return value
    if isinstance(value, list):
        return [resolve(v, names) for v in value]
    if isinstance(value, dict):
        return {resolve(k, names): resolve(v, names) for k, v in value.items()}
    return value


def placeholders(prefix: str, t0: int) -> dict[str, str]:
    names = {
        "B": f"{prefix}-basic",
        "B2": f"{prefix}-basic2",
        "C": f"{prefix}-codecs",
        "L": f"{prefix}-log-append-time",
        "X": f"{prefix}-txn",
        "D": f"{prefix}-deleted",
        "P": prefix,
        "T0": str(t0),
    }
    for delta in (1000, 2005, 2500, 4000, 4015, 5000, 99000):
        names[f"T0+{delta}"] = str(t0 + delta)
    return names


# ---- the run -------------------------------------------------------------------------------


def prepare_topics(kafka, names: dict[str, str], t0: int) -> None:
    create_topic(kafka, names["B"], BASIC_PARTITIONS)
    create_topic(kafka, names["B2"], 1)
    create_topic(kafka, names["C"], len(CODECS))
    create_topic(kafka, names["X"], 1)
    create_topic(kafka, names["D"], 1)
    produce_basic(kafka.bootstrap, names["B"], t0)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for i in range(2):
        producer.produce(names["B2"], key=f"b{i}", value=f"b{i}", timestamp=t0 + i)
    assert producer.flush(30) == 0
    produce_codecs(kafka.bootstrap, names["C"])
    produce_transactions(kafka.bootstrap, names["X"], f"{names['P']}-txn")
    produce_and_delete(kafka.bootstrap, names["D"])
    produce_log_append_time(kafka.bootstrap, names["L"])


@pytest.fixture(scope="module")
def referee(kafka, tmp_path_factory):
    """Every scenario's results through both connectors: {name: {"kafka": .., "pykafka": ..}},
    plus the names the placeholders stood for ("_names") and the run's timings."""
    began = time.monotonic()
    python = own_env(f"pyspark-{SPARK_VERSION}", REFEREE_REQUIREMENTS)
    jars = [str(p) for p in spark_kafka_jars(SPARK_VERSION)]
    env_s = time.monotonic() - began
    prefix = f"jvmref-{uuid.uuid4().hex[:8]}"
    t0 = (int(time.time()) - 3600) * 1000  # an hour ago: inside the broker's retention
    names = placeholders(prefix, t0)
    prepare_topics(kafka, names, t0)
    writes = write_scenarios(prefix) + steps_scenarios(prefix)
    for scenario in writes:
        for fmt in ("kafka", "pykafka"):
            for suffix, partitions in scenario["topics"].items():
                create_topic(kafka, sink_topic(prefix, scenario["name"], fmt) + suffix, partitions)
    scenarios = resolve(read_scenarios(), names) + resolve(writes, names)
    prepared = time.monotonic()
    results = run_child(
        python,
        {
            "bootstrap": kafka.bootstrap,
            "jars": jars,
            "scenarios": scenarios,
            "threads": CHILD_THREADS,
        },
        str(tmp_path_factory.mktemp("ref")),
    )
    keep = os.environ.get("PYKAFKA_JVM_REFEREE_RESULTS")
    if keep:  # every scenario's rows and errors, for a look by hand
        with open(keep, "w") as f:
            json.dump(results, f, indent=1)
    results["_names"] = names
    results["_timings"] = {
        "env_and_jars_s": round(env_s, 1),
        "topics_s": round(prepared - began - env_s, 1),
        "child_s": round(time.monotonic() - prepared, 1),
    }
    print(
        f"\njvm referee timings: {results['_timings']}, "
        f"session {results['_session_seconds']} s, child CPU {results['_cpu_seconds']} s"
    )
    return results


# ---- judging -------------------------------------------------------------------------------


def by_position(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: (r["topic"], r["partition"], r["offset"]))


def same_reads(referee, name: str) -> tuple[dict, dict]:
    jvm, ours = ok(referee[name]["kafka"]), ok(referee[name]["pykafka"])
    assert ours["schema"] == jvm["schema"]
    assert by_position(ours["rows"]) == by_position(jvm["rows"])
    return jvm, ours


@pytest.mark.parametrize("name", sorted(READS))
def test_batch_reads_agree(referee, name):
    jvm, _ = same_reads(referee, name)
    assert len(jvm["rows"]) == READS[name][1]


def test_headers_rows_hold_null_and_repeated_header_values(referee):
    """The referee's own answer for includeHeaders, so an agreement on nothing cannot pass."""
    jvm, _ = same_reads(referee, "include-headers")
    headers = {(r["partition"], r["offset"]): r["headers"] for r in jvm["rows"]}
    assert headers[(0, 3)] == [
        {"key": "h1", "value": b"a".hex()},
        {"key": "h2", "value": None},
        {"key": "h1", "value": b"b".hex()},
    ]
    assert headers[(1, 4)] == [{"key": "e", "value": ""}]
    assert headers[(2, 0)] is None


def test_log_append_time_is_timestamp_type_1(referee):
    jvm, _ = same_reads(referee, "log-append-time")
    assert {r["timestampType"] for r in jvm["rows"]} == {1}
    assert all(r["timestamp"] > 1_000_000_000_000_000 for r in jvm["rows"])  # not 1000 + i


def test_aborted_records_are_read_uncommitted_only(referee):
    committed = {
        bytes.fromhex(r["value"]).decode() for r in same_reads(referee, "read-committed")[1]["rows"]
    }
    uncommitted = {
        bytes.fromhex(r["value"]).decode()
        for r in same_reads(referee, "read-uncommitted")[1]["rows"]
    }
    assert committed == {"c0", "c1", "c2", "c3", "c4"}
    assert uncommitted == committed | {"a0", "a1", "a2"}


@pytest.mark.parametrize("name", sorted(SPLITS))
def test_split_reads_agree_with_the_same_spark_partitions(referee, name):
    jvm, ours = same_reads(referee, name)
    assert len(jvm["rows"]) == SPLITS[name][1]
    assert ours["partitions"] == jvm["partitions"]


def test_max_records_per_partition_splits_earliest_to_latest_here_only(referee):
    name, _, jvm_partitions, our_partitions = MAX_RECORDS_EARLIEST_LATEST
    jvm, ours = ok(referee[name]["kafka"]), ok(referee[name]["pykafka"])
    assert by_position(ours["rows"]) == by_position(jvm["rows"]) and len(jvm["rows"]) == 18
    assert (jvm["partitions"], ours["partitions"]) == (jvm_partitions, our_partitions)


def test_a_small_read_is_one_task_here_and_a_task_per_partition_there(referee):
    name, _, jvm_partitions, our_partitions = SMALL_READ
    jvm, ours = ok(referee[name]["kafka"]), ok(referee[name]["pykafka"])
    assert by_position(ours["rows"]) == by_position(jvm["rows"]) and len(jvm["rows"]) == 18
    assert (jvm["partitions"], ours["partitions"]) == (jvm_partitions, our_partitions)


def batch_bounds(batches: list[dict], nonempty: bool = False) -> list[tuple]:
    """Each micro-batch's (input rows, startOffset, endOffset) from its progress JSON."""
    return [
        (b["numInputRows"], b["startOffset"], b["endOffset"])
        for b in batches
        if b["numInputRows"] or not nonempty
    ]


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_streams_agree_batch_for_batch(referee, name):
    """The same micro-batches: sizes and start and end offsets, from the progress."""
    jvm, ours = same_reads(referee, name)
    assert len(jvm["rows"]) == STREAMS[name][1]
    assert batch_bounds(ours["batches"], True) == batch_bounds(jvm["batches"], True)
    assert sum(b["numInputRows"] for b in jvm["batches"]) == STREAMS[name][1]


def test_max_offsets_per_trigger_prorates_uneven_backlogs_alike(referee):
    """Spark's rateLimit to the offset: 4 of backlogs 6/4/1 is 2+1+1 (a share below one
    offset rounds up), then 2+1 of 4/3, then the last 4."""
    jvm, _ = same_reads(referee, "stream-max-offsets-uneven-backlogs")
    topic = referee["_names"]["B"]
    assert [(n, end[topic]) for n, _, end in batch_bounds(jvm["batches"], True)] == [
        (4, {"0": 2, "1": 3, "2": 6}),
        (3, {"0": 4, "1": 4, "2": 6}),
        (4, {"0": 6, "1": 6, "2": 6}),
    ]


def test_offsets_behind_latest_from_our_progress_are_sparks_metrics(referee):
    """Documented difference (metrics): Spark's source reports min/max/avg offsets behind
    latest in each batch's metrics; ours cannot publish source metrics, but reports
    latestOffset, from which kafka_source.lag computes the same three figures."""
    from kafka_source.lag import source_lag

    jvm, ours = same_reads(referee, "stream-max-offsets-per-trigger")
    jvm_batches = [b for b in jvm["batches"] if b["numInputRows"]]
    our_batches = [b for b in ours["batches"] if b["numInputRows"]]
    assert len(jvm_batches) == len(our_batches) == 3
    for theirs, mine in zip(jvm_batches, our_batches):
        assert not mine["metrics"]
        assert mine["latestOffset"] == theirs["latestOffset"]
        assert source_lag(mine) == theirs["metrics"]
    assert jvm_batches[0]["metrics"]["maxOffsetsBehindLatest"] == "4"


def test_available_now_applies_min_offsets_in_spark_only(referee):
    """Documented difference: under Trigger.AvailableNow Spark's connector applies
    minOffsetsPerTrigger (the run ends with 6 records unread); ours reads up to the run's
    end."""
    name, _, jvm_sizes, our_sizes = AVAILABLE_NOW_MIN_OFFSETS
    jvm, ours = ok(referee[name]["kafka"]), ok(referee[name]["pykafka"])
    assert [n for n, *_ in batch_bounds(jvm["batches"], True)] == jvm_sizes
    assert [n for n, *_ in batch_bounds(ours["batches"], True)] == our_sizes
    assert batch_bounds(ours["batches"], True)[:2] == batch_bounds(jvm["batches"], True)
    assert len(ours["rows"]) == 18
    assert {(r["partition"], r["offset"]) for r in jvm["rows"]} < {
        (r["partition"], r["offset"]) for r in ours["rows"]
    }


def failed_alike(referee, name: str, ours_names: str, spark_says: str) -> None:
    """Both refused; Spark's message shows the mistake, ours names the option (or column)."""
    jvm, ours = referee[name]["kafka"], referee[name]["pykafka"]
    assert "error" in jvm, f"Spark's connector accepted {name}: {jvm}"
    assert "error" in ours, f"ours accepted {name}: {ours}"
    both = f"ours: {ours['error']['message'][:3000]}\nSpark's: {jvm['error']['message'][:3000]}"
    assert spark_says in jvm["error"]["message"].lower(), both
    assert ours_names.lower() in ours["error"]["message"].lower(), both


@pytest.mark.parametrize("name", sorted(MISUSE))
def test_mistakes_fail_both_and_ours_names_the_option(referee, name):
    failed_alike(referee, name, *MISUSE[name][1:])


def test_batch_only_option_errors_wait_for_the_first_action_here(referee):
    """Documented difference (option errors and load()): Spark's connector checks a batch
    read's options at load(); ours raises at load() what a batch and a stream share, and a
    batch-only mistake when the query is planned (Spark does not tell schema() which)."""
    phases = {
        name: (referee[name]["kafka"]["error"]["phase"], referee[name]["pykafka"]["error"]["phase"])
        for name in MISUSE
    }
    for shared in (
        "no-bootstrap-servers",
        "subscribe-and-assign",
        "no-subscription",
        "bad-starting-offsets-json",
        "batch-ending-at-earliest",
    ):
        assert phases[shared] == ("load", "load"), shared
    for batch_only in ("batch-starting-at-latest", "batch-json-start-minus-one"):
        assert phases[batch_only] == ("load", "collect"), batch_only


@pytest.mark.parametrize("name", sorted(DIFFERING_READS))
def test_reads_spark_takes_and_ours_refuses(referee, name):
    """Documented differences (subscribePattern is Python's re; the offset and timestamp
    JSON refuses what Spark's parser turns into a number without a word): Spark's
    connector reads, ours fails at load() naming the option."""
    _, jvm_rows, ours_names = DIFFERING_READS[name]
    jvm, ours = ok(referee[name]["kafka"]), referee[name]["pykafka"]
    assert len(jvm["rows"]) == jvm_rows
    assert "error" in ours and ours["error"]["phase"] == "load", ours
    assert ours_names in ours["error"]["message"]


def read_back(referee, name: str, fmt: str) -> dict[str, list[dict]]:
    """What the sink ``fmt`` wrote, read by Spark's connector, with its topic names put
    back to their placeholders (so the two sinks' topics compare)."""
    topic = sink_topic(referee["_names"]["P"], name, fmt)
    out = {}
    for t, rows in ok(referee[name][fmt])["read_back"].items():
        out[t.replace(topic, "<T>")] = by_position(
            [{**r, "topic": r["topic"].replace(topic, "<T>")} for r in rows]
        )
    return out


def without_timestamps(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "timestamp"} for r in rows]


@pytest.mark.parametrize("name", sorted(WRITES))
def test_writes_land_alike(referee, name):
    """Same partitions, offsets, keys, values and headers; the timestamps are each
    producer's clock at sending (CreateTime): both of this run."""
    jvm, ours = read_back(referee, name, "kafka"), read_back(referee, name, "pykafka")
    assert sorted(ours) == sorted(jvm)
    for topic in jvm:
        assert without_timestamps(ours[topic]) == without_timestamps(jvm[topic]), topic
    assert sum(len(rows) for rows in jvm.values()) > 0
    run_began_us = (int(referee["_names"]["T0"]) + 3600_000) * 1000 - 60_000_000
    for sink in (jvm, ours):
        assert {r["timestampType"] for rows in sink.values() for r in rows} == {0}
        assert all(r["timestamp"] > run_began_us for rows in sink.values() for r in rows)


def test_write_partitions_by_murmur2_of_the_key(referee):
    """Both sinks agree above; this pins what they agree on: Kafka's murmur2 of the key."""
    import pyarrow as pa

    from kafka_sink.partitioner import key_partitions

    rows = read_back(referee, "write-keys-partitioned-by-murmur2", "kafka")["<T>"]
    keys = pa.array([bytes.fromhex(r["key"]) for r in rows], pa.binary())
    assert [r["partition"] for r in rows] == key_partitions(keys, 3).tolist()
    assert {r["partition"] for r in rows} == {0, 1, 2}


def test_topic_option_wins_over_the_topic_column(referee):
    for fmt in ("kafka", "pykafka"):
        topics = read_back(referee, "write-topic-option-over-topic-column", fmt)
        assert len(topics["<T>-opt"]) == 6 and topics["<T>-col"] == [], fmt


def test_timestamp_column_is_written_by_ours_and_ignored_by_spark_4_2(referee):
    """Documented difference: Spark 4.2's sink has no timestamp column (the producer stamps
    the time of sending); ours writes the column's value as the record's CreateTime."""
    t0 = int(referee["_names"]["T0"])
    jvm = read_back(referee, "write-timestamp-column", "kafka")["<T>"]
    ours = read_back(referee, "write-timestamp-column", "pykafka")["<T>"]
    assert [r["timestamp"] for r in ours] == [(t0 + i * 1000) * 1000 for i in range(4)]
    assert all(r["timestamp"] > (t0 + 1800_000) * 1000 for r in jvm)  # sent just now
    assert without_timestamps(ours) == without_timestamps(jvm)


@pytest.mark.parametrize("name", sorted(WRITE_MISUSE))
def test_write_mistakes_fail_both(referee, name):
    failed_alike(referee, name, *WRITE_MISUSE[name][3:])


@pytest.mark.parametrize("name", sorted(WRITE_DIFFERS))
def test_writes_spark_lands_and_ours_refuses(referee, name):
    """Documented differences of the sinks: Spark's lands the rows, ours fails naming what
    to change (and, for a bad row, has sent none of the task's rows)."""
    *_, jvm_rows, our_rows, ours_names = WRITE_DIFFERS[name]
    jvm, ours = referee[name]["kafka"], referee[name]["pykafka"]
    if our_rows is None:  # else Spark's sink failed too, after sending the good rows
        ok(jvm)
    assert sum(len(rows) for rows in jvm["read_back"].values()) == jvm_rows
    assert "error" in ours, ours
    topic = sink_topic(referee["_names"]["P"], name, "pykafka")
    assert ours_names.replace("<T>", topic) in ours["error"]["message"]
    if our_rows is not None:
        assert sum(len(rows) for rows in ours["read_back"].values()) == our_rows


# ---- scenarios of steps ----------------------------------------------------------------


def steps_runs(referee, name: str, fmt: str) -> list[dict]:
    """The runs of a steps scenario through ``fmt``, its topic names put back to <S>."""
    result = referee[name][fmt]
    assert "error" not in result, json.dumps(result["error"], indent=1)[:6000]
    topic = sink_topic(referee["_names"]["P"], name, fmt)
    return json.loads(json.dumps(result["runs"]).replace(topic, "<S>"))


def same_runs(referee, name: str) -> list[dict]:
    """Both connectors' runs agree: failed alike, the same rows, the same micro-batches
    (each one's size and start and end offsets, empty ones too). Spark's runs."""
    jvm, ours = steps_runs(referee, name, "kafka"), steps_runs(referee, name, "pykafka")
    assert len(ours) == len(jvm)
    for i, (theirs, mine) in enumerate(zip(jvm, ours)):
        both = f"run {i}: ours {mine.get('error')}\nSpark's {theirs.get('error')}"
        assert ("error" in mine) == ("error" in theirs), both
        # each connector's topics were written apart: their timestamps differ
        assert without_timestamps(by_position(mine["rows"])) == without_timestamps(
            by_position(theirs["rows"])
        ), i
        if "batches" in theirs:
            assert batch_bounds(mine["batches"]) == batch_bounds(theirs["batches"]), i
    return jvm


def read_at(run: dict) -> list[tuple]:
    return [(r["topic"], r["partition"], r["offset"]) for r in by_position(run["rows"])]


def test_a_restart_reads_exactly_what_came_since(referee):
    runs = same_runs(referee, "steps-restart-from-the-checkpoint")
    assert [len(run["rows"]) for run in runs] == [0, 3, 1]
    assert read_at(runs[2]) == [("<S>", 1, 4)]
    assert read_at(runs[1]) == [("<S>", 0, 3), ("<S>", 0, 4), ("<S>", 1, 3)]
    assert batch_bounds(runs[0]["batches"]) == [(0, None, {"<S>": {"0": 3, "1": 3}})]


def test_a_checkpoint_moves_between_the_connectors(referee):
    """Documented (checkpoint offsets): either connector resumes the other's checkpoint;
    the first run after the move, with nothing new, runs one empty batch in both."""
    runs = same_runs(referee, "steps-checkpoint-from-the-other-connector")
    assert [len(run["rows"]) for run in runs] == [3, 0, 2]
    assert batch_bounds(runs[1]["batches"]) == [(0, {"<S>": {"0": 3}}, {"<S>": {"0": 3}})]
    assert read_at(runs[2]) == [("<S>", 0, 3), ("<S>", 0, 4)]


def test_a_partition_added_between_runs_is_read_from_earliest(referee):
    """...and one whose first records were deleted before the query saw it is data loss:
    the run fails with failOnDataLoss, and goes on from its earliest offset without."""
    runs = same_runs(referee, "steps-partition-added")
    assert read_at(runs[1]) == [("<S>", 0, 2), ("<S>", 1, 0), ("<S>", 1, 1), ("<S>", 1, 2)]
    assert "some data may have been lost" in runs[2]["error"]["message"].lower()
    ours = steps_runs(referee, "steps-partition-added", "pykafka")[2]["error"]["message"]
    assert "starts from 1 instead of 0" in ours and "failOnDataLoss" in ours
    assert read_at(runs[3]) == [("<S>", 2, 1), ("<S>", 2, 2)]


def test_min_offsets_wait_for_max_trigger_delay_alike(referee):
    """The first batch never waits; 2 records (below minOffsetsPerTrigger 5) wait until
    maxTriggerDelay (3 s) has passed since the last batch, then come in one batch; 6 come
    at the next trigger (every 500 ms)."""
    name = "steps-min-offsets-with-max-trigger-delay"
    same_runs(referee, name)
    for fmt in ("kafka", "pykafka"):
        batches = [b for b in steps_runs(referee, name, fmt)[0]["batches"] if b["numInputRows"]]
        assert [(n, end) for n, _, end in batch_bounds(batches)] == [
            (2, {"<S>": {"0": 2}}),
            (2, {"<S>": {"0": 4}}),
            (6, {"<S>": {"0": 10}}),
        ], fmt
        assert batches[1]["began_ms"] - batches[0]["began_ms"] >= 2500, fmt


def test_stream_writes_in_update_mode_or_continuous_are_sparks_only(referee):
    """Documented differences (writes; no continuous trigger): Spark's sink writes a
    stream in update mode and under a continuous trigger. For ours Spark 4.2 refuses update
    mode when the query starts; a continuous query starts, but Spark never hands the
    Python sink the rows: nothing lands. That its commit then refuses every epoch (none is
    committed) is shown by test_sink_spark.test_a_continuous_trigger_commits_no_epoch,
    which waits until epochs have ended; this run stops too soon to show it."""
    name = "steps-stream-writes-update-mode-and-continuous"
    jvm, ours = steps_runs(referee, name, "kafka"), steps_runs(referee, name, "pykafka")
    for run in jvm:
        assert "error" not in run, run["error"]
        assert [bytes.fromhex(r["value"]).decode() for r in by_position(run["rows"])] == [
            "a-0",
            "a-1",
            "a-2",
        ]
    update, continuous = ours
    assert (
        "error" in update and "does not support update mode" in update["error"]["message"].lower()
    ), update
    assert "error" not in continuous, continuous["error"]
    assert update["rows"] == continuous["rows"] == []


def test_a_batch_dataframe_run_twice_sees_new_records_not_new_partitions(referee):
    """The second action of one batch DataFrame reads the records added since in the
    partitions it had, and not a partition created since, in both (README: "A batch
    DataFrame run twice")."""
    runs = same_runs(referee, "steps-batch-dataframe-run-twice")
    assert read_at(runs[0]) == [("<S>", 0, 0), ("<S>", 0, 1)]
    assert read_at(runs[1]) == [("<S>", 0, 0), ("<S>", 0, 1), ("<S>", 0, 2)]


def test_a_subscribed_topic_deleted_between_runs_fails_the_next(referee):
    """Subscribed by name, a deleted topic fails the next run in both: Spark's says
    UnknownTopicOrPartition, ours names the topic."""
    name = "steps-topic-deleted-subscribe"
    runs = same_runs(referee, name)
    assert len(runs[0]["rows"]) == 4
    assert "unknowntopicorpartition" in runs[1]["error"]["message"].lower()
    ours = steps_runs(referee, name, "pykafka")[1]["error"]["message"]
    assert "<S>-b" in ours and "do not exist" in ours


def test_a_topic_deleted_under_a_pattern_is_data_loss(referee):
    """Matched by a pattern, a deleted topic's partitions are gone: with failOnDataLoss
    the next run fails in both; without, the same checkpoint goes on with the rest."""
    name = "steps-topic-deleted-pattern"
    runs = same_runs(referee, name)
    assert "some data may have been lost" in runs[1]["error"]["message"].lower()
    ours = steps_runs(referee, name, "pykafka")[1]["error"]["message"]
    assert "<S>-b-0 is gone" in ours and "failOnDataLoss" in ours
    assert read_at(runs[2]) == [("<S>-a", 0, 2)]


def test_jars_are_the_connector_and_what_it_needs_beyond_pyspark(referee):
    """Five jars, no more, and they load: the reads above ran on the connector, and the
    child decoded an Avro record with spark-avro's from_avro."""
    assert referee["_avro"] == {"ok": [1, "a"]}
    names = sorted(p.name for p in spark_kafka_jars(SPARK_VERSION))
    assert names == [
        "commons-pool2-2.13.1.jar",
        "kafka-clients-3.9.2.jar",
        f"spark-avro_2.13-{SPARK_VERSION}.jar",
        f"spark-sql-kafka-0-10_2.13-{SPARK_VERSION}.jar",
        f"spark-token-provider-kafka-0-10_2.13-{SPARK_VERSION}.jar",
    ]


# ---- TLS stores, broker errors, spark.network.timeout: a run of their own ------------------
# Three documented differences need what the run above lacks: a broker with a TLS listener,
# a fault proxy in front of it (tests/helpers/fault_proxy.py; the broker advertises the proxy's
# port, so every connection of both connectors, Java's admin client and consumers
# included, goes through it) and a Spark session started with a changed
# spark.network.timeout. So one more Apache Kafka (PLAINTEXT, SSL and the proxied
# listener) and one more child driver, whose session has spark.network.timeout=4s. Each
# connector reads topics of its own (``sink_topic``), and the proxy picks the answers it
# spoils by topic, so both meet the same faults, however the two order their requests.

NETWORK_TIMEOUT_S = 4
WITHHELD_S = 8  # how long Fetch answers come without their records (> NETWORK_TIMEOUT_S)
RETRY_INTERVAL_MS = 500  # fetchOffset.retryIntervalMs of the offset scenarios
UNKNOWN_SERVER_ERROR, NOT_LEADER_OR_FOLLOWER = -1, 6
# short client timeouts where the scenario would wait for them (defaults: 30 s, 60 s); Kafka's
# admin client refuses a default.api.timeout.ms below request.timeout.ms
REQUEST_TIMEOUT_MS, API_TIMEOUT_MS = 1000, 2000
SHORT_TIMEOUTS = {
    "kafka.request.timeout.ms": str(REQUEST_TIMEOUT_MS),
    "kafka.default.api.timeout.ms": str(API_TIMEOUT_MS),
}
EDGE_RECORDS = 4
TRUSTSTORE_PASSWORD = "store-secret"
EDGE_SPARK_CONF = {
    "spark.network.timeout": f"{NETWORK_TIMEOUT_S}s",
    # Spark refuses to start with these above spark.network.timeout
    "spark.network.timeoutInterval": "1s",
    "spark.executor.heartbeatInterval": "1s",
    # the RPC timeouts stay at 120 s: they too take their default from it
    "spark.rpc.askTimeout": "120s",
    "spark.rpc.lookupTimeout": "120s",
}
# Every scenario but the one about it sets the poll timeout to the usual 120 s, so that the
# session's short spark.network.timeout cannot fail Spark's reads on a busy machine.
USUAL_POLL_TIMEOUT = {"kafkaConsumer.pollTimeoutMs": "120000"}

# The driver's offset lookups answered with a broker error: the proxy sets the error in
# ListOffsets answers for the scenario's topic, the first ``times`` of them (None: every
# one). UNKNOWN_SERVER_ERROR is not retriable to Kafka's clients (each attempt fails at
# once: fetchOffset.numRetries is what retries it); NOT_LEADER_OR_FOLLOWER is, so each
# client retries it within an attempt first. (error, times, stream, options)
OFFSET_FAULTS = {
    "offsets-broker-error-twice": (UNKNOWN_SERVER_ERROR, 2, True, {}),
    "offsets-broker-error-always": (UNKNOWN_SERVER_ERROR, None, True, {}),
    # a batch read from earliest to latest: Spark's connector resolves both in its tasks
    "offsets-broker-error-always-batch": (UNKNOWN_SERVER_ERROR, None, False, SHORT_TIMEOUTS),
    "offsets-not-leader-always": (NOT_LEADER_OR_FOLLOWER, None, True, SHORT_TIMEOUTS),
}
WITHHELD = "records-withheld-past-the-network-timeout"


class BrokerFaults:
    """The answers the fault proxy spoils, chosen by topic: ListOffsets answers carry an
    error (``fail_offsets``), Fetch answers come without their records for a while
    (``withhold_records``). ``answers[topic]`` keeps when each spoiled answer passed
    (``time.monotonic()``), to count the attempts and measure the waits."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.offset_errors: dict[str, list] = {}  # topic -> [error, answers left or None]
        self.withheld: dict[object, list] = {}  # topic id -> [topic, seconds, first or None]
        self.answers: dict[str, list[float]] = collections.defaultdict(list)

    def fail_offsets(self, topic: str, error: int, times: int | None) -> None:
        self.offset_errors[topic] = [error, times]

    def withhold_records(self, topic: str, topic_id, seconds: float) -> None:
        """Fetch answers (v13 and later name topics by id) hold the partitions' high
        watermark but no records for ``seconds`` from the first one."""
        self.withheld[topic_id] = [topic, seconds, None]

    def install(self, proxy) -> None:
        proxy.rewrite_response(LIST_OFFSETS.key, self._list_offsets, count=10**9)
        proxy.rewrite_response(FETCH.key, self._fetch, count=10**9)

    def _list_offsets(self, frame: bytearray, version: int):
        pos, body = decoded(LIST_OFFSETS, frame, version)
        spoiled = False
        with self.lock:
            for topic in body["topics"]:
                rule = self.offset_errors.get(topic["name"])
                if rule is None or rule[1] == 0:
                    continue
                if rule[1] is not None:
                    rule[1] -= 1
                spoiled = True
                self.answers[topic["name"]].append(time.monotonic())
                for p in topic["partitions"]:
                    p.update(error_code=rule[0], offset=-1, timestamp=-1)
        return encoded(LIST_OFFSETS, frame, version, pos, body) if spoiled else None

    def _fetch(self, frame: bytearray, version: int):
        """Java's consumer asks again at once for records an answer lacked (the broker has
        them, so it answers at once too): each spoiled answer is held 50 ms, so that this
        loop does not spin the proxy."""
        pos, body = decoded(FETCH, frame, version)
        now, spoiled = time.monotonic(), False
        with self.lock:
            for topic in body["responses"]:
                rule = self.withheld.get(topic.get("topic_id")) or next(
                    (r for r in self.withheld.values() if r[0] == topic.get("topic")), None
                )
                if rule is None or not any(p.get("records") for p in topic["partitions"]):
                    continue
                rule[2] = now if rule[2] is None else rule[2]
                if now - rule[2] > rule[1]:
                    continue
                spoiled = True
                self.answers[rule[0]].append(now)
                for p in topic["partitions"]:
                    p["records"] = b""
        if not spoiled:
            return None
        time.sleep(0.05)  # the proxy's hold of a spoiled answer (see above), not a wait
        return encoded(FETCH, frame, version, pos, body)


def make_pki(directory: Path) -> tuple[str, str, str]:
    """A CA and the broker's certificate for 127.0.0.1: (CA PEM, chain PEM, key PEM)."""
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    server = ca.issue_cert("127.0.0.1", "localhost")
    server.private_key_pem.write_to_path(str(directory / "server.key"))
    (directory / "server.pem").write_bytes(b"".join(c.bytes() for c in server.cert_chain_pems))
    return tuple(str(directory / name) for name in ("ca.pem", "server.pem", "server.key"))


def java_truststore(ca_pem: str, path: Path, kind: str = "PKCS12") -> str:
    """A truststore of type ``kind`` (PKCS12, JKS) holding the CA, made by the JDK's keytool
    (as a Java user has one)."""
    keytool = Path(os.path.realpath(java_executable())).with_name("keytool")
    done = subprocess.run(
        [
            str(keytool),
            "-importcert",
            "-noprompt",
            "-alias",
            "ca",
            "-file",
            ca_pem,
            "-keystore",
            str(path),
            "-storetype",
            kind,
            "-storepass",
            TRUSTSTORE_PASSWORD,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return str(path)


def fill_topic(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(EDGE_RECORDS):
        producer.produce(topic, key=f"k{i}", value=f"v{i}")
    assert producer.flush(30) == 0


def per_connector(prefix: str, name: str, options: dict, **scenario) -> dict:
    """A read scenario whose ``<S>`` is a topic of each connector's own."""
    return {
        "name": name,
        "kind": "read",
        "options": {"subscribe": "<S>", **options},
        "subst": {fmt: {"S": sink_topic(prefix, name, fmt)} for fmt in ("kafka", "pykafka")},
        **scenario,
    }


def edge_scenarios(
    prefix: str, cluster, proxy, ca_pem: str, truststore: str, jks_truststore: str
) -> list[dict]:
    tls = {
        "kafka.bootstrap.servers": cluster.listener("SSL"),
        "subscribe": f"{prefix}-tls",
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.location": truststore,
        "kafka.ssl.truststore.password": TRUSTSTORE_PASSWORD,
        "kafka.ssl.truststore.type": "PKCS12",
        **USUAL_POLL_TIMEOUT,
    }
    out = [
        {"name": "tls-truststore", "kind": "read", "options": tls},
        {
            "name": "tls-truststore-jks",
            "kind": "read",
            "options": {
                **tls,
                "kafka.ssl.truststore.location": jks_truststore,
                "kafka.ssl.truststore.type": "JKS",
            },
        },
        {
            "name": "tls-cafile",
            "kind": "read",
            "formats": ["pykafka"],
            "options": {
                **{k: v for k, v in tls.items() if not k.startswith("kafka.ssl.truststore.")},
                "kafka.ssl.cafile": ca_pem,
            },
        },
    ]
    proxied = {"kafka.bootstrap.servers": proxy.bootstrap}
    for name, (_, _, stream, options) in OFFSET_FAULTS.items():
        out.append(
            per_connector(
                prefix,
                name,
                {
                    **proxied,
                    **USUAL_POLL_TIMEOUT,
                    "fetchOffset.retryIntervalMs": str(RETRY_INTERVAL_MS),
                    **({"startingOffsets": "earliest"} if stream else {}),
                    **options,
                },
                stream=stream,
            )
        )
    out.append(per_connector(prefix, WITHHELD, proxied))
    return out


def prepare_edge_topics(cluster, prefix: str, faults: BrokerFaults) -> None:
    """Every scenario's topics, filled; the faults set on them."""
    names = [f"{prefix}-tls"] + [
        sink_topic(prefix, name, fmt)
        for name in [*OFFSET_FAULTS, WITHHELD]
        for fmt in ("kafka", "pykafka")
    ]
    for topic in names:
        create_topic(cluster, topic, 1)
        fill_topic(cluster.bootstrap, topic)
    for name, (error, times, _, _) in OFFSET_FAULTS.items():
        for fmt in ("kafka", "pykafka"):
            faults.fail_offsets(sink_topic(prefix, name, fmt), error, times)
    withheld = [sink_topic(prefix, WITHHELD, fmt) for fmt in ("kafka", "pykafka")]
    with KafkaClient(bootstrap_servers=cluster.bootstrap) as client:
        metadata = client.refresh_metadata(withheld)
    for topic in withheld:
        faults.withhold_records(topic, metadata.topics[topic].topic_id, WITHHELD_S)


@pytest.fixture(scope="module")
def edge_referee(tmp_path_factory):
    """The scenarios of this section through both connectors, as ``referee``, with
    ``_answers``: when the proxy spoiled each answer, by topic."""
    began = time.monotonic()
    python = own_env(f"pyspark-{SPARK_VERSION}", REFEREE_REQUIREMENTS)
    jars = [str(p) for p in spark_kafka_jars(SPARK_VERSION)]
    workdir = tmp_path_factory.mktemp("edges")
    (workdir / "pki").mkdir()
    ca_pem, chain_pem, key_pem = make_pki(workdir / "pki")
    truststore = java_truststore(ca_pem, workdir / "pki" / "truststore.p12")
    jks_truststore = java_truststore(ca_pem, workdir / "pki" / "truststore.jks", "JKS")
    prefix = f"jvmedge-{uuid.uuid4().hex[:8]}"
    faults = BrokerFaults()
    with kafka_behind_fault_proxy(ssl=(chain_pem, key_pem)) as (proxy, cluster):
        prepare_edge_topics(cluster, prefix, faults)
        faults.install(proxy)
        prepared = time.monotonic()
        results = run_child(
            python,
            {
                "bootstrap": cluster.bootstrap,
                "jars": jars,
                "threads": CHILD_THREADS,
                "avro": False,
                "spark_conf": EDGE_SPARK_CONF,
                "scenarios": edge_scenarios(
                    prefix, cluster, proxy, ca_pem, truststore, jks_truststore
                ),
            },
            str(workdir),
        )
    keep = os.environ.get("PYKAFKA_JVM_REFEREE_RESULTS")
    if keep:  # as the referee's, next to them
        with open(f"{keep}.edges.json", "w") as f:
            json.dump(results, f, indent=1)
    results["_answers"] = {topic: times for topic, times in faults.answers.items()}
    results["_names"] = {"P": prefix}
    print(
        f"\njvm edge referee: setup {prepared - began:.1f} s, child "
        f"{time.monotonic() - prepared:.1f} s (session {results['_session_seconds']} s)"
    )
    return results


def spoiled(edge_referee, name: str, fmt: str) -> list[float]:
    """When the proxy spoiled an answer for the scenario's topic of ``fmt``."""
    return edge_referee["_answers"].get(sink_topic(edge_referee["_names"]["P"], name, fmt), [])


def values(rows: list[dict]) -> list[str]:
    return [bytes.fromhex(r["value"]).decode() for r in by_position(rows)]


def error_text(result: dict, part: str = "message") -> str:
    """The error's ``message`` (its first 6000 characters) or ``gist`` (the connector's own
    exception line: for ours, the end of a long Python traceback)."""
    assert "error" in result, f"no error: {json.dumps(result)[:2000]}"
    return result["error"][part]


def test_tls_truststore_options_serve_both_connectors(edge_referee):
    """With the same Java truststore options (a PKCS12 and a JKS store keytool made) both
    connectors read the same rows over TLS; ours also with kafka.ssl.cafile (the CA's
    PEM)."""
    jvm = ok(edge_referee["tls-truststore"]["kafka"])
    assert values(jvm["rows"]) == [f"v{i}" for i in range(EDGE_RECORDS)]
    for name in ("tls-truststore", "tls-truststore-jks"):
        assert by_position(ok(edge_referee[name]["kafka"])["rows"]) == by_position(jvm["rows"])
        ours = ok(edge_referee[name]["pykafka"])
        assert by_position(ours["rows"]) == by_position(jvm["rows"]), name
    with_cafile = ok(edge_referee["tls-cafile"]["pykafka"])
    assert by_position(with_cafile["rows"]) == by_position(jvm["rows"])


def intervals(times: list[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:])]


def test_offset_lookups_outlast_broker_errors_within_the_attempts_alike(edge_referee):
    """A stream whose driver's offset lookups get a broker error twice (not retriable to
    Kafka's clients, so each attempt fails at once) reads every record in both: the third
    of fetchOffset.numRetries' 3 attempts succeeds, fetchOffset.retryIntervalMs after the
    second."""
    name = "offsets-broker-error-twice"
    for fmt in ("kafka", "pykafka"):
        run = ok(edge_referee[name][fmt])
        assert values(run["rows"]) == [f"v{i}" for i in range(EDGE_RECORDS)], fmt
        times = spoiled(edge_referee, name, fmt)
        assert len(times) == 2, (fmt, times)
        assert all(gap >= RETRY_INTERVAL_MS / 1000 * 0.9 for gap in intervals(times)), (
            fmt,
            intervals(times),
        )


def test_a_lasting_broker_error_fails_after_fetch_offset_num_retries_alike(edge_referee):
    """Every answer an error: both streams fail after exactly 3 lookups (the default
    fetchOffset.numRetries counts attempts), fetchOffset.retryIntervalMs apart, naming the
    broker's error."""
    name = "offsets-broker-error-always"
    jvm, ours = edge_referee[name]["kafka"], edge_referee[name]["pykafka"]
    assert "UnknownServerException" in error_text(jvm, "gist")
    assert "UNKNOWN_SERVER_ERROR" in error_text(ours, "gist")
    for fmt in ("kafka", "pykafka"):
        times = spoiled(edge_referee, name, fmt)
        assert len(times) == 3, (fmt, times)
        assert all(gap >= RETRY_INTERVAL_MS / 1000 * 0.9 for gap in intervals(times)), (
            fmt,
            intervals(times),
        )


def test_a_batch_read_resolves_earliest_and_latest_in_spark_tasks_on_our_driver(edge_referee):
    """Documented difference (fetchOffset.numRetries): a batch read from earliest to latest
    (the defaults). Spark's connector leaves both to its tasks, whose Kafka consumer asks
    again and again until kafka.default.api.timeout.ms (2 s here; 60 s by default) and
    then fails the task: fetchOffset.numRetries plays no part. Ours looks them up on the
    driver: 3 attempts, then the broker's error (kafka.default.api.timeout.ms is ignored)."""
    name = "offsets-broker-error-always-batch"
    jvm, ours = edge_referee[name]["kafka"], edge_referee[name]["pykafka"]
    topic = sink_topic(edge_referee["_names"]["P"], name, "kafka")
    gist = error_text(jvm, "gist")
    assert gist.startswith("org.apache.spark.SparkException: Job aborted due to stage failure"), (
        gist
    )  # a task's
    assert (
        f"Timeout of {API_TIMEOUT_MS}ms expired before the position for partition "
        f"{topic}-0 could be determined"
    ) in gist
    assert len(spoiled(edge_referee, name, "kafka")) > 3
    assert "UNKNOWN_SERVER_ERROR" in error_text(ours, "gist")
    # raised while Spark plans the read (in our reader's partitions()), not by a task
    assert "Failed to generate Python data source read partitions" in error_text(ours)
    assert len(spoiled(edge_referee, name, "pykafka")) == 3


def test_a_retriable_error_is_retried_within_each_attempt_up_to_different_bounds(edge_referee):
    """Documented difference: NOT_LEADER_OR_FOLLOWER in every answer. Both clients retry it
    within an attempt, then fetchOffset.numRetries makes 3 attempts; each of Spark's lasts
    kafka.default.api.timeout.ms (Kafka's admin client; 2 s here, 60 s by default), each of
    ours kafka.request.timeout.ms (1 s here, 30 s by default)."""
    name = "offsets-not-leader-always"
    jvm, ours = edge_referee[name]["kafka"], edge_referee[name]["pykafka"]
    assert (
        "TimeoutException: Timed out waiting for a node assignment. Call: listOffsets"
        in error_text(jvm, "gist")
    )
    assert jvm["seconds"] >= 3 * API_TIMEOUT_MS / 1000, jvm["seconds"]
    gist = error_text(ours, "gist")
    assert gist.startswith(
        "protocol.errors.KafkaTimeoutError: ListOffsets did not succeed "
        f"within {REQUEST_TIMEOUT_MS} ms"
    ), gist
    assert "NOT_LEADER_OR_FOLLOWER" in gist and "gave up after 3 attempts" in gist, gist
    for fmt in ("kafka", "pykafka"):  # each attempt asked more than once
        assert len(spoiled(edge_referee, name, fmt)) > 3, fmt


def test_a_changed_network_timeout_is_the_poll_timeout_of_spark_only(edge_referee):
    """Documented difference (kafkaConsumer.pollTimeoutMs): the broker answers Fetch without
    the records for 8 s. Spark's connector takes its poll timeout from the session's
    spark.network.timeout (4 s) and fails the task after 4 s; ours keeps its 120 s and
    reads every record once they come."""
    jvm, ours = edge_referee[WITHHELD]["kafka"], edge_referee[WITHHELD]["pykafka"]
    gist = error_text(jvm, "gist")
    assert gist.startswith("org.apache.spark.SparkException: Job aborted due to stage failure"), (
        gist
    )  # a task's
    assert f"Cannot fetch record for offset 0 in {NETWORK_TIMEOUT_S * 1000} milliseconds" in gist
    jvm_waited = spoiled(edge_referee, WITHHELD, "kafka")
    assert jvm_waited and jvm_waited[-1] - jvm_waited[0] < WITHHELD_S - 1
    assert values(ok(ours)["rows"]) == [f"v{i}" for i in range(EDGE_RECORDS)]
    our_wait = spoiled(edge_referee, WITHHELD, "pykafka")
    assert our_wait[-1] - our_wait[0] >= WITHHELD_S - 1, our_wait
