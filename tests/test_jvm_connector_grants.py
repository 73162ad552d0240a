"""What Spark's JVM Kafka connector needs granted, beside ours (issue 39; ``make test-jvm``):
the same queries through ``format("kafka")`` and ``format("pykafka")`` on an Apache Kafka
with KRaft's ``StandardAuthorizer``, by principals granted exactly the row's grants of the
table in ``docs/security.md``. What "How it differs" (``docs/differences.md``) says about
grants rests on this.

One child driver (``tests/helpers/jvm_referee_child.py`` under PySpark 4.2.0, as the differential
suite runs it) signs in with SCRAM through ``kafka.sasl.jaas.config`` (both connectors take
it) as

- ``bob``, granted Read on topics ``r-*`` and nothing else: a batch read (from earliest,
  by time, by a pattern that also matches a topic he may not describe) and a
  ``readStream`` work in both connectors. Spark's reads plan with an admin client and their
  executors' consumers, though given a group id (``spark-kafka-relation-<uuid>-executor``,
  ``spark-kafka-source-<uuid>-...-executor``), are assigned partitions and never reach the
  group coordinator: no group grant. With Spark's
  ``spark.sql.streaming.kafka.useDeprecatedOffsetFetching=true`` its driver plans with a
  consumer that joins a group of its own (``spark-kafka-relation-<uuid>-driver-<n>``,
  ``spark-kafka-source-<uuid>-<hash>-driver-<n>``), refused without Read on it ("Not
  authorized to access group"); ours reads either way. A write by bob (no Write on any
  topic) is refused in both, at the idempotent producer's InitProducerId: Spark's says
  "Cluster authorization failed", ours names Write on the topics written;
- ``alice``, granted Read on topics ``r-*`` and on groups ``app-*`` and Write on topics
  ``w-*``: with ``groupIdPrefix=app-`` Spark's deprecated offset fetching reads; a write
  with Write alone lands in both.
"""

from __future__ import annotations

import time

import pytest

from kafka_testbed import SASL_USERS, KafkaCluster
from kafka_testbed.maven_jars import spark_kafka_jars
from protocol.client.cluster import KafkaClient
from protocol.records.batch import Record, build_batch

from .helpers.own_envs import own_env
from .helpers.jvm_connector import REFEREE_REQUIREMENTS, SPARK_VERSION, ok, run_child

pytestmark = [pytest.mark.spark, pytest.mark.jvm_referee, pytest.mark.timeout(1800)]

DEPRECATED_FETCHING = {"spark.sql.streaming.kafka.useDeprecatedOffsetFetching": "true"}
RECORDS = [b"a", b"b", b"c"]


def jaas(cluster, user: str) -> dict:
    return {
        "kafka.bootstrap.servers": cluster.listener("SASL"),
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "SCRAM-SHA-256",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
        f'required username="{user}" '
        f'password="{SASL_USERS[user]}";',
    }


def scenarios(cluster) -> list[dict]:
    bob, alice = jaas(cluster, "bob"), jaas(cluster, "alice")
    read = {"kind": "read", "options": {**bob, "subscribe": "r-in", "startingOffsets": "earliest"}}
    granted = {**alice, "subscribe": "r-in", "startingOffsets": "earliest", "groupIdPrefix": "app-"}
    write = {"kind": "write", "sql": "SELECT 'x' AS value", "read_back_after_error": True}
    return [
        {"name": "batch", **read},
        {"name": "stream", **read, "stream": True},
        {
            "name": "by-time",
            "kind": "read",
            "options": {
                **bob,
                "subscribe": "r-in",
                "startingTimestamp": "1000",
                "endingTimestamp": "3000",
            },
        },
        {
            "name": "pattern",
            "kind": "read",
            "options": {**bob, "subscribePattern": "^(r-in|closed)$"},
        },
        {"name": "batch-deprecated-fetching", **read, "sql_conf": DEPRECATED_FETCHING},
        {
            "name": "stream-deprecated-fetching",
            **read,
            "stream": True,
            "sql_conf": DEPRECATED_FETCHING,
        },
        {
            "name": "stream-deprecated-fetching-granted",
            "kind": "read",
            "options": granted,
            "stream": True,
            "sql_conf": DEPRECATED_FETCHING,
        },
        {
            "name": "write",
            **write,
            "options": {**alice, "topic": "w-<fmt>"},
            "read_back": ["w-<fmt>"],
        },
        {
            "name": "write-without-write",
            **write,
            "options": {**bob, "topic": "r-w<fmt>"},
            "read_back": ["r-w<fmt>"],
        },
    ]


@pytest.fixture(scope="module")
def grants(tmp_path_factory):
    python = own_env(f"pyspark-{SPARK_VERSION}", REFEREE_REQUIREMENTS)
    jars = [str(p) for p in spark_kafka_jars(SPARK_VERSION)]
    with KafkaCluster(sasl=True, authorizer=True) as cluster:
        with KafkaClient(bootstrap_servers=cluster.bootstrap) as admin:
            admin.create_topics(
                {
                    "r-in": 1,
                    "closed": 1,
                    "w-kafka": 1,
                    "w-pykafka": 1,
                    "r-wkafka": 1,
                    "r-wpykafka": 1,
                }
            )
            admin.produce(
                "r-in",
                0,
                build_batch([Record(i, 1_000 * (i + 1), None, v) for i, v in enumerate(RECORDS)]),
            )
            admin.produce("closed", 0, build_batch([Record(0, 0, None, b"z")]))
        cluster.acl("User:bob", "Read", topics="r-", prefixed=True)
        cluster.acl("User:alice", "Read", topics="r-", groups="app-", prefixed=True)
        cluster.acl("User:alice", "Write", topics="w-", prefixed=True)
        began = time.monotonic()
        results = run_child(
            python,
            {
                "bootstrap": cluster.bootstrap,
                "jars": jars,
                "avro": False,
                "threads": 2,
                "scenarios": scenarios(cluster),
            },
            str(tmp_path_factory.mktemp("grants")),
        )
        print(
            f"\njvm grants child: {time.monotonic() - began:.1f} s "
            f"(session {results['_session_seconds']} s)"
        )
    return results


def read_values(result: dict) -> list[bytes]:
    return [
        bytes.fromhex(r["value"])
        for r in sorted(ok(result)["rows"], key=lambda r: (r["partition"], r["offset"]))
    ]


def failure(result: dict) -> str:
    """The error's message and its causes (the JVM's ``Caused by:`` lines)."""
    assert "error" in result, f"no error: {str(result)[:2000]}"
    return "\n".join([result["error"]["message"], *result["error"].get("causes", [])])


@pytest.mark.parametrize(
    "name,records",
    [("batch", RECORDS), ("stream", RECORDS), ("by-time", RECORDS[:2]), ("pattern", RECORDS)],
)
def test_reads_need_read_on_their_topics_and_no_group_in_both(grants, name, records):
    """bob, with Read on the topic alone, reads the same records through both: from
    earliest, as a stream, between two timestamps (ListOffsets by time wants Describe),
    and by a pattern that also matches a topic he may not describe, which Kafka leaves
    out of both connectors' topic lists."""
    assert read_values(grants[name]["kafka"]) == records
    assert read_values(grants[name]["pykafka"]) == records


@pytest.mark.parametrize(
    "name,group",
    [
        ("batch-deprecated-fetching", "spark-kafka-relation-"),
        ("stream-deprecated-fetching", "spark-kafka-source-"),
    ],
)
def test_spark_s_deprecated_offset_fetching_needs_read_on_its_driver_s_group(grants, name, group):
    """Under ``useDeprecatedOffsetFetching`` Spark's driver joins a group of its own, which
    bob may not read: refused naming it. Ours never joins a group and reads."""
    said = failure(grants[name]["kafka"])
    assert f"Not authorized to access group: {group}" in said, said[-3000:]
    assert read_values(grants[name]["pykafka"]) == RECORDS


def test_spark_s_deprecated_offset_fetching_reads_with_read_on_its_group_prefix(grants):
    """Read on groups ``app-*`` and ``groupIdPrefix=app-``: Spark's driver group is
    granted and it reads; ours reads too (the option names nothing of ours)."""
    result = grants["stream-deprecated-fetching-granted"]
    assert read_values(result["kafka"]) == RECORDS
    assert read_values(result["pykafka"]) == RECORDS


def test_writes_need_write_on_their_topic_in_both(grants):
    """alice, with Write alone on the topic, writes through both; bob, with no Write on any
    topic, is refused by both at the idempotent producer's InitProducerId, and nothing is
    written. Spark's words name the cluster; ours name the grant to give."""
    for fmt in ("kafka", "pykafka"):
        result = ok(grants["write"][fmt])
        assert [bytes.fromhex(r["value"]) for r in result["read_back"][f"w-{fmt}"]] == [b"x"]
    refused = grants["write-without-write"]
    assert "ClusterAuthorizationException: Cluster authorization failed" in failure(
        refused["kafka"]
    ), failure(refused["kafka"])[-3000:]
    assert (
        "not authorized to IdempotentWrite the cluster (InitProducerId): grant the "
        "principal Write on the topics written"
    ) in failure(refused["pykafka"])
    for fmt in ("kafka", "pykafka"):
        assert refused[fmt]["read_back"][f"r-w{fmt}"] == []
