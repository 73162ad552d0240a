"""The grants each query needs, as Spark queries (issue 39; ``make test-authz``, marker
``authorization``): the rows of the table in ``docs/security.md`` whose behaviour is
Spark's as much as ours, on an Apache Kafka with KRaft's ``StandardAuthorizer``.
``tests/test_kafka_authorization.py`` calls the same requests' code driver-side, row by row
and grant by grant, in ``make test``; here each is a real ``spark.read``, ``readStream``,
``df.write`` or ``writeStream`` in one Spark session, on one cluster for the module:

- a batch read with ``startingTimestamp``/``endingTimestamp`` and Read alone, and a topic
  without a grant refused naming it;
- a ``readStream`` with Read alone and ``commitOffsetsToGroup`` with Read on its group
  (Kafka's admin sees the offsets), and two running ``readStream``s (``subscribe``,
  ``subscribePattern``) whose Read is revoked: the next trigger fails each within 10 s
  naming Read on the topic;
- a ``writeStream`` and a ``df.write`` with Write alone; a ``writeStream`` to a topic with
  Describe only fails within 10 s naming Write and writes nothing, a ``df.write`` to a
  topic without a grant fails at its check naming the grant;
- an ``exactlyOnce`` stream with its row's grants over several micro-batches and two
  Spark partitions: every row visible once to read_committed readers and each partition's
  marker group ``<prefix>-<partition>`` holding the last micro-batch it committed; without
  Read on those groups it fails within 10 s naming them, and nothing is written.

Principals as there: ``bob`` with Read on topics ``r-*`` and ``rv-*`` (the latter revoked
by the stream test); ``alice`` with Read on topics ``r-*``/``rw-*`` and groups ``app-*``,
Write on topics ``w-*``/``rw-*`` and on transactional ids ``app-*``/``nog-*``, Describe on
topics ``d-*``.
"""

from __future__ import annotations

import time

import pytest

from kafka_testbed import SASL_USERS, KafkaCluster
from protocol.client.cluster import KafkaClient
from protocol.records.batch import Record, build_batch

from .helpers.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.authorization, pytest.mark.timeout(600)]

LIMIT_S = 10  # every refusal within this
QUERY_TIMEOUT_S = 120
SOURCE = [(p, f"s{p}{i}".encode()) for p in (0, 1) for i in range(3)]  # topic r-src


@pytest.fixture(scope="module")
def secured():
    cluster = KafkaCluster(sasl=True, authorizer=True).start()
    try:
        with KafkaClient(bootstrap_servers=cluster.bootstrap) as admin:
            admin.create_topics(
                {
                    "closed": 1,
                    "r-time": 1,
                    "r-in": 1,
                    "r-src": 2,
                    "rv-in": 1,
                    "w-stream": 1,
                    "w-batch": 1,
                    "rw-eos": 1,
                    "rw-nog": 1,
                    "d-seen": 1,
                }
            )
            admin.produce(
                "r-time",
                0,
                build_batch(
                    [Record(i, 1_000 * (i + 1), None, v) for i, v in enumerate([b"a", b"b", b"c"])]
                ),
            )
            for topic in ("r-in", "rv-in", "d-seen", "closed"):
                admin.produce(topic, 0, build_batch([Record(0, 0, None, b"v")]))
            for p in (0, 1):
                admin.produce(
                    "r-src",
                    p,
                    build_batch(
                        [
                            Record(i, 0, None, v)
                            for i, (_, v) in enumerate(x for x in SOURCE if x[0] == p)
                        ]
                    ),
                )
        cluster.acl("User:bob", "Read", topics=["r-", "rv-"], prefixed=True)
        cluster.acl("User:alice", "Read", topics=["r-", "rw-"], groups="app-", prefixed=True)
        cluster.acl(
            "User:alice",
            "Write",
            topics=["w-", "rw-"],
            transactional_ids=["app-", "nog-"],
            prefixed=True,
        )
        cluster.acl("User:alice", "Describe", topics="d-", prefixed=True)
        yield cluster
    finally:
        cluster.stop()


def signed_in(cluster, user: str) -> dict:
    return {
        "kafka.bootstrap.servers": cluster.listener("SASL"),
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "SCRAM-SHA-256",
        "kafka.sasl.username": user,
        "kafka.sasl.password": SASL_USERS[user],
        "kafka.request.timeout.ms": "10000",
    }


def values(spark, cluster, topic: str, level: str = "read_committed") -> list[bytes]:
    """``topic``'s values as the admin (the super user) reads them."""
    return [
        bytes(r.value)
        for r in spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", cluster.bootstrap)
        .option("subscribe", topic)
        .option("kafka.isolation.level", level)
        .load()
        .select("value")
        .collect()
    ]


def failure_of(query, started: float) -> tuple[str, float]:
    """The query's failure (it must fail) and the seconds from ``started`` to it."""
    with pytest.raises(Exception) as info:  # noqa: PT011 - Spark's StreamingQueryException
        query.awaitTermination(QUERY_TIMEOUT_S)
    took = time.monotonic() - started
    query.stop()
    return str(info.value), took


def test_a_batch_read_by_time_needs_read_alone(spark, secured):
    """Rows "Batch read" and "Offsets by time": bob, with Read on the topic and nothing
    else, reads between two timestamps (ListOffsets by time wants Describe, which Read
    gives); a topic he may not describe fails the read within 10 s naming Read and
    Describe."""
    rows = (
        spark.read.format("pykafka")
        .options(**signed_in(secured, "bob"))
        .option("subscribe", "r-time")
        .option("startingTimestamp", "1500")
        .option("endingTimestamp", "3000")
        .load()
        .select("value", "offset")
        .collect()
    )
    assert [(bytes(r.value), r.offset) for r in rows] == [(b"b", 1)]
    started = time.monotonic()
    with pytest.raises(Exception) as info:  # noqa: PT011 - Spark wraps ours
        (
            spark.read.format("pykafka")
            .options(**signed_in(secured, "bob"))
            .option("subscribe", "closed")
            .option("startingTimestamp", "0")
            .load()
            .collect()
        )
    assert time.monotonic() - started < LIMIT_S
    assert (
        "not authorized to Describe topic 'closed' (Metadata): grant the principal Read "
        "and Describe on it"
    ) in str(info.value)


def test_a_stream_reads_with_read_and_fails_at_the_trigger_after_read_is_revoked(
    spark, secured, tmp_path
):
    """Rows "Streaming read", "subscribePattern" and "commitOffsetsToGroup": alice's
    readStream with Read on the topic and on its group reads every record and commits the
    end offsets to the group, which Kafka's admin sees. bob's two running readStreams of
    ``rv-in`` (by ``subscribe`` and by ``subscribePattern``, whose listing then leaves the
    topic out) fail within 10 s of the grant's revocation, at their next trigger, naming
    Read on the topic, not as a deleted topic."""
    query = (
        spark.readStream.format("pykafka")
        .options(**signed_in(secured, "alice"))
        .option("subscribe", "r-src")
        .option("startingOffsets", "earliest")
        .option("commitOffsetsToGroup", "app-lag")
        .load()
        .writeStream.format("memory")
        .queryName("authz_lag")
        .option("checkpointLocation", str(tmp_path / "lag"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(QUERY_TIMEOUT_S) and query.exception() is None
    assert sorted(bytes(r.value) for r in spark.table("authz_lag").collect()) == sorted(
        v for _, v in SOURCE
    )
    with KafkaClient(bootstrap_servers=secured.bootstrap) as admin:
        assert admin.committed_offsets("app-lag", [("r-src", 0), ("r-src", 1)]) == {
            ("r-src", 0): 3,
            ("r-src", 1): 3,
        }

    queries = {
        strategy: (
            spark.readStream.format("pykafka")
            .options(**signed_in(secured, "bob"))
            .option(strategy, value)
            .option("startingOffsets", "earliest")
            .load()
            .writeStream.format("memory")
            .queryName(f"authz_revoked_{strategy}")
            .option("checkpointLocation", str(tmp_path / strategy))
            .trigger(processingTime="500 milliseconds")
            .start()
        )
        for strategy, value in (("subscribe", "rv-in"), ("subscribePattern", "^rv-"))
    }
    try:
        for strategy, query in queries.items():
            table = f"authz_revoked_{strategy}"

            def read_one(query=query, table=table) -> int:
                assert query.isActive, query.exception()
                return spark.table(table).count()

            wait_until(read_one, QUERY_TIMEOUT_S, f"{table}: a row", interval=0.2)
            assert [bytes(r.value) for r in spark.table(table).collect()] == [b"v"]
        secured.acl("User:bob", "Read", topics="rv-", prefixed=True, remove=True)
        revoked = time.monotonic()
        failures = {strategy: failure_of(query, revoked) for strategy, query in queries.items()}
    finally:
        for query in queries.values():
            query.stop()
    for strategy, (said, took) in failures.items():
        assert took < LIMIT_S, (strategy, took)
        assert (
            "[TOPIC_AUTHORIZATION_FAILED (29)] not authorized to Describe topic 'rv-in' "
            "(Metadata): grant the principal Read and Describe on it"
        ) in said, (strategy, said[-3000:])


def test_writes_need_write_on_their_topic(spark, secured, tmp_path):
    """Rows "df.write" and "writeStream": with Write alone on the topic, a writeStream
    (from a readStream with Read) and a df.write land every row. A writeStream to a topic
    with Describe only fails within 10 s naming Write, a df.write to one without a grant
    at the writer's check naming Write and Describe; neither writes anything."""
    alice = signed_in(secured, "alice")
    source = (
        spark.readStream.format("pykafka")
        .options(**alice)
        .option("subscribe", "r-src")
        .option("startingOffsets", "earliest")
        .load()
        .select("value")
    )
    query = (
        source.writeStream.format("pykafka")
        .options(**alice)
        .option("topic", "w-stream")
        .option("checkpointLocation", str(tmp_path / "ok"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(QUERY_TIMEOUT_S) and query.exception() is None
    assert sorted(values(spark, secured, "w-stream")) == sorted(v for _, v in SOURCE)
    (
        spark.createDataFrame([("x",)], "value STRING")
        .write.format("pykafka")
        .options(**alice)
        .option("topic", "w-batch")
        .mode("append")
        .save()
    )
    assert values(spark, secured, "w-batch") == [b"x"]

    started = time.monotonic()
    query = (
        source.writeStream.format("pykafka")
        .options(**alice)
        .option("topic", "d-seen")
        .option("checkpointLocation", str(tmp_path / "no"))
        .trigger(availableNow=True)
        .start()
    )
    said, took = failure_of(query, started)
    assert took < LIMIT_S, took
    assert (
        "[TOPIC_AUTHORIZATION_FAILED (29)] not authorized to Write topic 'd-seen' "
        "(Produce): grant the principal Write and Describe on it"
    ) in said, said[-3000:]
    assert values(spark, secured, "d-seen", "read_uncommitted") == [b"v"]

    started = time.monotonic()
    with pytest.raises(Exception) as info:  # noqa: PT011 - Spark wraps ours
        (
            spark.createDataFrame([("x",)], "value STRING")
            .write.format("pykafka")
            .options(**alice)
            .option("topic", "closed")
            .mode("append")
            .save()
        )
    assert time.monotonic() - started < LIMIT_S
    assert (
        "not authorized to Describe topic 'closed' (Metadata): grant the principal "
        "Write and Describe on it"
    ) in str(info.value)
    assert values(spark, secured, "closed", "read_uncommitted") == [b"v"]


def test_an_exactly_once_stream_records_its_micro_batches_in_its_groups(spark, secured, tmp_path):
    """Row "exactlyOnce stream": Write and Read on the topic, Write on the transactional
    ids and Read on the groups under ``app-e``: three micro-batches of two Spark
    partitions each commit, every source row is visible once to read_committed readers,
    and the groups ``app-e-0`` and ``app-e-1`` hold the micro-batch each partition
    committed last (the offset of partition 0 of the topic). Under ``nog-e``, with Write on
    the ids but no Read on the groups, the stream fails within 10 s naming Read on the
    groups under the prefix, and nothing is written."""
    alice = signed_in(secured, "alice")

    def stream(topic: str, prefix: str):
        return (
            spark.readStream.format("pykafka")
            .options(**alice)
            .option("subscribe", "r-src")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "2")
            .option("minPartitions", "2")  # a task per Kafka partition, small or not
            .load()
            .select("value")
            .writeStream.format("pykafka")
            .options(**alice)
            .option("topic", topic)
            .option("exactlyOnce", "true")
            .option("transactionalIdPrefix", prefix)
            .option("checkpointLocation", str(tmp_path / prefix))
            .trigger(availableNow=True)
            .start()
        )

    query = stream("rw-eos", "app-e")
    assert query.awaitTermination(QUERY_TIMEOUT_S) and query.exception() is None
    last = query.lastProgress["batchId"]
    assert last >= 2
    assert sorted(values(spark, secured, "rw-eos")) == sorted(v for _, v in SOURCE)
    assert values(spark, secured, "rw-eos", "read_uncommitted") == values(spark, secured, "rw-eos")
    with KafkaClient(bootstrap_servers=secured.bootstrap) as admin:
        markers = [
            admin.committed_offsets(f"app-e-{p}", [("rw-eos", 0)])[("rw-eos", 0)] for p in (0, 1)
        ]
    assert max(markers) == last and min(markers) >= 0, (markers, last)

    started = time.monotonic()
    said, took = failure_of(stream("rw-nog", "nog-e"), started)
    assert took < LIMIT_S, took
    assert "[GROUP_AUTHORIZATION_FAILED (30)] not authorized to Describe group 'nog-e-" in said, (
        said[-3000:]
    )
    assert (
        "grant the principal Read on groups starting with 'nog-e' (a prefixed ACL): an "
        "exactlyOnce stream records each committed micro-batch in the group "
        "'nog-e-<Spark partition>'"
    ) in said, said[-3000:]
    assert values(spark, secured, "rw-nog", "read_uncommitted") == []
