"""Kafka's authorizer as the referee (issue 39): what a principal without a grant is told.

One Apache Kafka (the newest pinned version, one node) for the module, with KRaft's
``StandardAuthorizer`` and ``allow.everyone.if.no.acl.found=false``; its PLAINTEXT listener
is the super user (the admin here), and ``alice`` signs in on the SASL listener with
SCRAM-SHA-256. Alice's grants, made with Kafka's own ``AclCommand`` (prefixed ACLs, three
runs):

- Read on topics ``r-*`` and ``rw-*`` and on groups ``app-*``;
- Write on topics ``w-*`` and ``rw-*`` and on transactional ids ``app-*``;
- Describe on topics ``d-*``;

and nothing on topic ``closed``, group ``other-g`` or transactional ids ``other-*``. Each
test shows the query working with its grants (the rows of the table in
``docs/security.md``) and refused without one.

Every refusal must name the resource, its type, the operation Kafka's authorizer wanted and
the grant the query needs, within 10 s, never as a topic that does not exist or a
coordinator that is missing. The driver-side functions are called directly (no Spark): the
writer's topic check and a task's write, a batch read's planning and a task's read, a
stream's group commit, a transactional producer's InitProducerId and an exactlyOnce
stream's commit.

What Apache Kafka 4.4.0 answered that this rests on (``protocol.authorization``): Metadata
answers TOPIC_AUTHORIZATION_FAILED, with no partitions, for a topic the principal may not
describe whether it exists or not (the writer took that for a missing topic and retried it
for 2 s); FindCoordinator refuses a group or transactional id with Describe (the group
commit said "no coordinator"); OffsetFetch refuses a partition alone, with offset -1 and
TOPIC_AUTHORIZATION_FAILED (``committed_offsets`` read it as "no offset"); Write on a topic
lets the principal describe it; and TxnOffsetCommit wants Read on the topic of the offsets,
so an exactlyOnce stream, which records its micro-batch ids as offsets of partition 0 of
the topic it writes, needs Read on that topic as well as Write.
"""

from __future__ import annotations

import logging
import time

import pyarrow as pa
import pytest

from kafka_sink.options import parse_writer_options
from kafka_sink.producer import ProduceError, TaskProducer
from kafka_sink.transactions import (TransactionCommitError, abort_transactions,
                                     commit_transactions, job_prefix)
from kafka_sink.validation import WritePlan
from kafka_sink.writer import _check_topic_exists, write_task
from kafka_source.batch_reader import KafkaBatchReader
from kafka_source.fetcher import read_range
from kafka_source.options import parse_reader_options
from kafka_source.stream_reader import KafkaStreamReader
from kafka_testbed import SASL_USERS, KafkaCluster
from protocol.cluster import READ_COMMITTED, KafkaClient
from protocol.errors import TopicAuthorizationFailed
from protocol.records.batch import Record, build_batch

USER = "alice"
PRINCIPAL = f"User:{USER}"
LIMIT_S = 10  # every refusal within this


@pytest.fixture(scope="module")
def secured():
    cluster = KafkaCluster(sasl=True, authorizer=True).start()
    try:
        with KafkaClient(bootstrap_servers=cluster.bootstrap) as admin:
            admin.create_topics({"closed": 1, "r-in": 1, "w-plain": 1, "w-out": 1,
                                 "rw-out": 1, "d-seen": 1})
            for topic in ("r-in", "d-seen"):
                admin.produce(topic, 0, build_batch([Record(0, 0, None, b"v")]))
        cluster.acl(PRINCIPAL, "Read", topics=["r-", "rw-"], groups="app-", prefixed=True)
        cluster.acl(PRINCIPAL, "Write", topics=["w-", "rw-"], transactional_ids="app-",
                    prefixed=True)
        cluster.acl(PRINCIPAL, "Describe", topics="d-", prefixed=True)
        yield cluster
    finally:
        cluster.stop()


def alice(cluster, **options) -> dict:
    return {"kafka.bootstrap.servers": cluster.listener("SASL"),
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "SCRAM-SHA-256", "kafka.sasl.username": USER,
            "kafka.sasl.password": SASL_USERS[USER], "kafka.request.timeout.ms": "10000",
            **options}


def refused(call, error=TopicAuthorizationFailed) -> str:
    """What ``call()`` raised (of type ``error``), checked to come within ``LIMIT_S``."""
    started = time.monotonic()
    with pytest.raises(error) as info:
        call()
    took = time.monotonic() - started
    said = str(info.value)
    assert took < LIMIT_S, (took, said)
    assert "not exist" not in said and "no coordinator" not in said, said
    return said


def plan(topic: str) -> WritePlan:
    return WritePlan(topic_option=topic, topic_column=False, key_column=False,
                     headers_column=False, partition_column=False, timestamp_kind=None)


def values(cluster, topic: str, **options) -> list:
    """The values of ``topic`` as the admin reads them (read_committed by default;
    ``options``: another reader's)."""
    read = parse_reader_options({"kafka.bootstrap.servers": cluster.bootstrap,
                                 "subscribe": topic, "kafka.isolation.level":
                                 "read_committed", **options})
    return [v for part in KafkaBatchReader(read).partitions() for rng in part.ranges
            for batch in read_range(read, rng) for v in batch.column("value").to_pylist()]


def committed_values(cluster, topic: str, timeout_s: float = 10) -> list:
    """``values(cluster, topic)`` once every transaction on partition 0 ended: a commit or
    an abort returns before its markers are written, and until then a read_committed
    reader stops before the transaction."""
    tp = (topic, 0)
    deadline = time.monotonic() + timeout_s
    with KafkaClient(bootstrap_servers=cluster.bootstrap) as admin:
        while (admin.latest_offsets([tp], READ_COMMITTED) != admin.latest_offsets([tp])
               and time.monotonic() < deadline):
            time.sleep(0.05)
    return values(cluster, topic)


def test_a_write_to_a_topic_the_user_may_not_describe_names_the_grant(secured):
    """The user's report: the writer's check said "topic(s) 'closed' do not exist in the
    cluster ... create it first" after 2 s. It names the grant now, and so does a task
    whose rows go there; nothing is written. With Describe only, the Produce is refused
    naming Write. Write alone is enough to write (Kafka takes it for Describe, and for the
    idempotent producer's InitProducerId)."""
    rows = pa.record_batch({"value": pa.array([b"x"], pa.binary())})
    granted = parse_writer_options(alice(secured, topic="w-plain"))
    _check_topic_exists(granted)
    with KafkaClient(granted.client_config) as c:
        message = write_task(iter([rows]), granted, plan("w-plain"), client=c)
    assert message.partitions[("w-plain", 0)][0] == 1 and message.producer_ids
    assert values(secured, "w-plain") == [b"x"]

    options = parse_writer_options(alice(secured, topic="closed"))
    said = refused(lambda: _check_topic_exists(options))
    assert said.startswith("[TOPIC_AUTHORIZATION_FAILED (29)] not authorized to Describe "
                           "topic 'closed' (Metadata): grant the principal Write and "
                           "Describe on it (Kafka answers so for every topic the principal "
                           "may not describe, whether it exists or not)"), said
    with KafkaClient(options.client_config) as c:
        said = refused(lambda: write_task(iter([rows]), options, plan("closed"), client=c))
    assert "not authorized to Describe topic 'closed'" in said
    assert "grant the principal Write and Describe on it" in said
    assert values(secured, "closed") == []
    described = parse_writer_options(alice(secured, topic="d-seen"))  # Describe, no Write
    with KafkaClient(described.client_config) as c:
        said = refused(lambda: write_task(iter([rows]), described, plan("d-seen"), client=c),
                       ProduceError)
    assert said == ("Writing to topic 'd-seen' partition 0 failed: "
                    "[TOPIC_AUTHORIZATION_FAILED (29)] not "
                    "authorized to Write topic 'd-seen' (Produce): grant the principal Write "
                    "and Describe on it")
    assert values(secured, "d-seen") == [b"v"]


def test_a_read_the_user_may_not_describe_or_read_names_the_grant(secured):
    """Read on a topic reads it, and subscribePattern sees the topics the user may
    describe only. Planning a read of a topic the user may not describe names Read and
    Describe; with Describe only, planning works and the task's Fetch is refused naming
    Read."""
    assert values(secured, "r-in", **alice(secured)) == [b"v"]
    pattern = KafkaBatchReader(parse_reader_options(alice(secured, subscribePattern=".*")))
    assert sorted({r.topic for p in pattern.partitions() for r in p.ranges}) == [
        "d-seen", "r-in", "rw-out", "w-out", "w-plain"]
    closed = parse_reader_options(alice(secured, subscribe="closed"))
    said = refused(lambda: KafkaBatchReader(closed).partitions())
    assert ("not authorized to Describe topic 'closed' (Metadata): grant the principal "
            "Read and Describe on it") in said
    seen = parse_reader_options(alice(secured, subscribe="d-seen"))
    [part] = KafkaBatchReader(seen).partitions()
    said = refused(lambda: [b for rng in part.ranges for b in read_range(seen, rng)])
    assert ("[TOPIC_AUTHORIZATION_FAILED (29)] not authorized to Read topic 'd-seen' "
            "(Fetch): grant the principal Read on it") in said


def test_commit_offsets_to_a_group_without_read_warns_once_a_query(secured, caplog):
    """commitOffsetsToGroup to a group the user may not read: the stream goes on; one
    warning per query names Read on the group (it said "no coordinator for group" at every
    micro-batch), the repeats are debug lines that count. With Read on the group the
    offsets are committed and the admin sees them."""
    caplog.set_level(logging.DEBUG, logger="pykafka.source")

    def query(group):
        return KafkaStreamReader(parse_reader_options(
            alice(secured, subscribe="r-in", commitOffsetsToGroup=group), for_streaming=True))

    def said(level):
        return [r.getMessage() for r in caplog.records
                if r.levelno == level and "commitOffsetsToGroup" in r.getMessage()]

    refused_query = query("other-g")
    started = time.monotonic()
    for end in range(4):
        refused_query.commit({"r-in": {"0": end}})
    assert time.monotonic() - started < LIMIT_S
    [warning] = said(logging.WARNING)
    assert warning == (
        "could not commit offsets to consumer group 'other-g' (commitOffsetsToGroup): "
        "[GROUP_AUTHORIZATION_FAILED (30)] not authorized to Describe group 'other-g' "
        "(FindCoordinator): grant the principal Read on it")
    assert said(logging.DEBUG)[-1].endswith("(again: 3 times since the warning)")
    refused_query.stop()
    query("other-g").commit({"r-in": {"0": 1}})  # another query: warned about again
    assert len(said(logging.WARNING)) == 2

    granted = query("app-g")
    granted.commit({"r-in": {"0": 1}})
    granted.stop()
    with KafkaClient(bootstrap_servers=secured.bootstrap) as admin:
        assert admin.committed_offsets("app-g", [("r-in", 0)]) == {("r-in", 0): 1}
    assert len(said(logging.WARNING)) == 2


def test_exactly_once_needs_its_ids_and_a_stream_its_groups_and_read_on_its_topic(secured):
    """A batch exactlyOnce write needs Write on its transactional ids (by their prefix) and
    on its topic; a transactional id outside them is refused naming the prefix to grant. A
    stream records each micro-batch as an offset of a group under the prefix on partition
    0 of its topic, which Kafka's TxnOffsetCommit allows with Read on the group and on the
    topic: with Write alone on the topic the commit is refused naming Read, and nothing of
    it becomes visible; with Read and Write it commits."""
    other = parse_writer_options(alice(secured, topic="w-out", exactlyOnce="true",
                                       transactionalIdPrefix="other-x"))
    with TaskProducer(other, transactional_id="other-x-0-0") as producer:
        said = refused(producer.producer_identity, ProduceError)
    assert said == (
        "[TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53)] not authorized to Describe "
        "transactional id 'other-x-0-0' (FindCoordinator): grant the principal Write and "
        "Describe on transactional ids starting with 'other-x' (a prefixed ACL: every "
        "task's id starts with the transactionalIdPrefix); or choose a "
        "transactionalIdPrefix the principal may use")

    rows = pa.record_batch({"value": pa.array([b"a", b"b"], pa.binary())})

    def write(topic, prefix, batch_id):
        options = parse_writer_options(alice(secured, topic=topic, exactlyOnce="true",
                                             transactionalIdPrefix=prefix))
        client = KafkaClient(options.client_config)
        job = prefix if batch_id is not None else job_prefix(prefix)
        message = write_task(iter([rows]), options, plan(topic), client=client, prefix=job,
                             task=(0, 0, batch_id), fresh_ids=batch_id is None)
        return client, options, job, message

    client, options, job, message = write("w-out", "app-b", None)  # a batch job
    with client:
        assert commit_transactions(client, options, job, [message], None)["committed"] == 1
    assert committed_values(secured, "w-out") == [b"a", b"b"]

    client, options, job, message = write("w-out", "app-s", 1)  # a stream's batch 1
    with client:
        said = refused(lambda: commit_transactions(client, options, job, [message], 1),
                       TransactionCommitError)
        abort_transactions(client, options, job, [message])
    assert ("[TOPIC_AUTHORIZATION_FAILED (29)] not authorized to Read topic 'w-out' "
            "(TxnOffsetCommit): grant the principal Read on it; an exactlyOnce stream "
            "records each micro-batch's id as an offset of partition 0 of the topic it "
            "writes") in said
    uncommitted = {"kafka.isolation.level": "read_uncommitted"}
    assert values(secured, "w-out", **uncommitted) == [b"a", b"b"] * 2  # and the stream's
    assert committed_values(secured, "w-out") == [b"a", b"b"]  # the stream's aborted

    client, options, job, message = write("rw-out", "app-r", 1)
    with client:
        assert commit_transactions(client, options, job, [message], 1)["committed"] == 1
    assert committed_values(secured, "rw-out") == [b"a", b"b"]


def test_committed_offsets_raise_a_partition_s_error(secured):
    """OffsetFetch refuses a partition the user may not describe in that partition's
    answer (offset -1): an error naming the grant, not "no offset committed"."""
    with KafkaClient(parse_reader_options(alice(secured, subscribe="r-in")).client_config
                     ) as client:
        assert client.committed_offsets("app-h", [("r-in", 0)]) == {("r-in", 0): -1}
        said = refused(lambda: client.committed_offsets("app-h", [("r-in", 0), ("closed", 0)]))
    assert ("not authorized to Describe topic 'closed' (OffsetFetch): grant the principal "
            "Describe on it") in said
