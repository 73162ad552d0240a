"""Kafka's authorizer as the referee (issue 39): the grants each query needs, and what a
principal without one of them is told. One test per row of the table "Authorization: the
grants each query needs" in ``docs/security.md``: with exactly the grants of its row the
query works (its data checked); with each grant of the row taken away in turn it fails
within 10 s naming that grant (resource, type, operation), or for a group commit warns once
a query; a refused write leaves nothing in the topic.

One Apache Kafka (the newest pinned version, one node) for the module, with KRaft's
``StandardAuthorizer`` and ``allow.everyone.if.no.acl.found=false``; its PLAINTEXT listener
is the super user (the admin here), and ``alice`` and ``bob`` sign in on the SASL listener
with SCRAM-SHA-256. Their grants, made with Kafka's own ``AclCommand`` (prefixed ACLs, four
runs):

- bob: Read on topics ``r-*``, nothing else: the reads' rows, and a write by a principal
  with no Write anywhere;
- alice: Read on topics ``r-*`` and ``rw-*`` and on groups ``app-*``, ``gro-*`` and
  ``<FX>-*``; Write on topics ``w-*`` and ``rw-*`` and on transactional ids ``app-*``,
  ``nog-*`` and ``<FX>-0-0*``; Describe on topics ``d-*``;

and nothing on topic ``closed``, group ``other-g`` or transactional ids ``other-*``. Rows
do not share resources: each query's topics, groups and transactional ids carry exactly
its row's grants (a row "taken away" one grant runs on resources that have all the others:
an exactlyOnce stream under prefix ``nog-q`` has Write on its ids and no Read on its
groups, one under ``gro-q`` the groups and not the ids).

The driver-side functions are called directly (no Spark): a batch read's planning and a
task's read, a stream reader's offsets, partitions and reads, a stream's group commit, the
writer's topic check and a task's write, a transactional task's write and the driver's
exactlyOnce commit and fencing, a task's read with exactlyOnce dead-letter copies.
``tests/test_kafka_authorization_spark.py`` (``make test-authz``) runs the rows as Spark
queries.

What Apache Kafka 4.4.0 answered that this rests on (``protocol.authorization``): Metadata
answers TOPIC_AUTHORIZATION_FAILED, with no partitions, for a topic the principal may not
describe whether it exists or not (the writer took that for a missing topic and retried it
for 2 s), and lists to a pattern only the topics the principal may describe;
FindCoordinator refuses a group or transactional id with Describe (the group commit said
"no coordinator"); OffsetFetch refuses a partition alone, with offset -1 and
TOPIC_AUTHORIZATION_FAILED (``committed_offsets`` read it as "no offset"); Write on a topic
lets the principal describe it, and Write on any topic gives the idempotent producer's
InitProducerId; TxnOffsetCommit wants Read on the topic of the offsets, so an exactlyOnce
stream, which records its micro-batch ids as offsets of partition 0 of the topic it writes,
needs Read on that topic as well as Write; and ListTransactions lists only the
transactional ids the principal may describe, which Write on them allows.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import time
import typing
import uuid

import pyarrow as pa
import pytest

from kafka_sink.options import parse_writer_options
from kafka_sink.producer import ProduceError, TaskProducer
from kafka_sink.transactions import (
    TransactionCommitError,
    abort_transactions,
    commit_transactions,
    job_prefix,
)
from kafka_sink.validation import WritePlan
from kafka_sink.writer import _CHECKED, _check_key, _check_topic_exists, write_task
from kafka_source.batch_reader import KafkaBatchReader, KafkaRangesPartition
from kafka_source.fetcher import read_range
from kafka_source.options import parse_reader_options
from kafka_source.planning import discover_partitions
from kafka_source.stream_reader import KafkaStreamReader
from kafka_testbed import SASL_USERS, KafkaCluster
from protocol.client.cluster import READ_COMMITTED, KafkaClient
from protocol.errors import AuthenticationError, BrokerError, PyKafkaError
from protocol.records.batch import Record, build_batch
from tests.helpers.waiting import wait_until

LIMIT_S = 10  # every refusal within this
TopicAuthorizationFailed = type(BrokerError.for_code(29))  # made from Kafka's error table
#: A prefix whose grant is narrower than a stream's ids: Write on ``<FX>-0-0*`` only.
FX = f"fx{uuid.uuid4().hex[:6]}"
#: The records of topic r-time: (timestamp ms, value).
TIMED = [(1_000, b"a"), (2_000, b"b"), (3_000, b"c")]


@pytest.fixture(scope="module")
def secured():
    cluster = KafkaCluster(sasl=True, authorizer=True).start()
    try:
        with KafkaClient(bootstrap_servers=cluster.bootstrap) as admin:
            admin.create_topics(
                {
                    "closed": 1,
                    "r-in": 1,
                    "r-stream": 1,
                    "r-time": 1,
                    "r-eos": 1,
                    "w-plain": 1,
                    "w-dlt": 2,
                    "w-out": 1,
                    "w-eos": 1,
                    "rw-out": 1,
                    "rw-left": 1,
                    "rw-fx": 1,
                    "rw-nog": 1,
                    "rw-gro": 1,
                    "d-seen": 1,
                }
            )
            for topic in ("r-in", "d-seen", "closed"):
                admin.produce(topic, 0, build_batch([Record(0, 0, None, b"v")]))
            admin.produce(
                "r-time",
                0,
                build_batch([Record(i, ts, None, v) for i, (ts, v) in enumerate(TIMED)]),
            )
        cluster.acl("User:bob", "Read", topics="r-", prefixed=True)
        cluster.acl(
            "User:alice",
            "Read",
            topics=["r-", "rw-"],
            groups=["app-", "gro-", f"{FX}-"],
            prefixed=True,
        )
        cluster.acl(
            "User:alice",
            "Write",
            topics=["w-", "rw-"],
            transactional_ids=["app-", "nog-", f"{FX}-0-0"],
            prefixed=True,
        )
        cluster.acl("User:alice", "Describe", topics="d-", prefixed=True)
        yield cluster
    finally:
        cluster.stop()


def signed_in(cluster, user: str, **options) -> dict:
    return {
        "kafka.bootstrap.servers": cluster.listener("SASL"),
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "SCRAM-SHA-256",
        "kafka.sasl.username": user,
        "kafka.sasl.password": SASL_USERS[user],
        "kafka.request.timeout.ms": "10000",
        **options,
    }


def alice(cluster, **options) -> dict:
    return signed_in(cluster, "alice", **options)


def bob(cluster, **options) -> dict:
    return signed_in(cluster, "bob", **options)


def refused(call, error=TopicAuthorizationFailed, within_s: float = LIMIT_S) -> str:
    """What ``call()`` raised (of type ``error``), checked to come within ``within_s``."""
    started = time.monotonic()
    with pytest.raises(error) as info:
        call()
    took = time.monotonic() - started
    said = str(info.value)
    assert took < within_s, (took, said)
    assert "not exist" not in said and "no coordinator" not in said, said
    return said


def plan(topic: str) -> WritePlan:
    return WritePlan(
        topic_option=topic,
        topic_column=False,
        key_column=False,
        headers_column=False,
        partition_column=False,
        timestamp_kind=None,
    )


ROWS = pa.record_batch({"value": pa.array([b"a", b"b"], pa.binary())})


def read(options: dict) -> list:
    """The values a batch read with ``options`` gives: planned, then each task's read."""
    parsed = parse_reader_options(options)
    return [
        v
        for part in KafkaBatchReader(parsed).partitions()
        for rng in typing.cast(KafkaRangesPartition, part).ranges
        for batch in read_range(parsed, rng)
        for v in batch.column("value").to_pylist()
    ]


def values(cluster, topic: str, **options) -> list:
    """The values of ``topic`` as the admin reads them (read_committed by default;
    ``options``: another reader's)."""
    return read(
        {
            "kafka.bootstrap.servers": cluster.bootstrap,
            "subscribe": topic,
            "kafka.isolation.level": "read_committed",
            **options,
        }
    )


def everything(cluster, topic: str) -> list:
    """Every value in ``topic``, open and aborted transactions' too: what a refused write
    must not have added to."""
    return values(cluster, topic, **{"kafka.isolation.level": "read_uncommitted"})


def committed_values(cluster, topic: str, timeout_s: float = 10) -> list:
    """``values(cluster, topic)`` once every transaction on partition 0 ended (within
    ``timeout_s``): a commit or an abort returns before its markers are written, and until
    then a read_committed reader stops before the transaction."""
    tp = (topic, 0)
    with KafkaClient(bootstrap_servers=cluster.bootstrap) as admin:
        wait_until(
            lambda: admin.latest_offsets([tp], READ_COMMITTED) == admin.latest_offsets([tp]),
            timeout_s,
            f"every transaction on {topic!r} ended",
        )
    return values(cluster, topic)


# ---- reads ---------------------------------------------------------------------------------


def test_batch_read_needs_read_on_its_topics(secured):
    """Row "Batch read": bob, granted Read on ``r-*`` and nothing else, reads a topic by
    ``subscribe`` and by ``assign``. A topic he may not describe is refused when the read is
    planned, naming Read and Describe on it; with Describe only (alice on ``d-seen``)
    planning works and the task's Fetch is refused naming Read."""
    assert read(bob(secured, subscribe="r-in")) == [b"v"]
    assert read(bob(secured, assign='{"r-in":[0]}')) == [b"v"]
    for strategy in ({"subscribe": "closed"}, {"assign": '{"closed":[0]}'}):
        said = refused(lambda strategy=strategy: read(bob(secured, **strategy)))
        assert (
            "[TOPIC_AUTHORIZATION_FAILED (29)] not authorized to Describe topic "
            "'closed' (Metadata): grant the principal Read and Describe on it"
        ) in said
    seen = parse_reader_options(alice(secured, subscribe="d-seen"))
    [part] = typing.cast(list[KafkaRangesPartition], KafkaBatchReader(seen).partitions())
    said = refused(lambda: [b for rng in part.ranges for b in read_range(seen, rng)])
    assert (
        "[TOPIC_AUTHORIZATION_FAILED (29)] not authorized to Read topic 'd-seen' "
        "(Fetch): grant the principal Read on it"
    ) in said


def test_streaming_read_needs_read_on_its_topics_at_every_trigger(secured):
    """Row "Streaming read": bob's stream reader binds its start, plans and reads
    micro-batch after micro-batch with Read on the topic (each trigger asks Metadata and
    ListOffsets again, the tasks Fetch). Without a grant the query's start is refused naming
    Read and Describe; with Describe only a micro-batch's read is refused naming Read."""

    def micro_batch(reader, start):
        end = reader.latestOffset(start)
        got = [
            v
            for p in reader.partitions(start, end)
            for b in reader.read(p)
            for v in b.column("value").to_pylist()
        ]
        return end, got

    reader = KafkaStreamReader(
        parse_reader_options(
            bob(secured, subscribe="r-stream", startingOffsets="earliest"), for_streaming=True
        )
    )
    start = reader.initialOffset()
    with KafkaClient(bootstrap_servers=secured.bootstrap) as admin:
        admin.produce("r-stream", 0, build_batch([Record(0, 0, None, b"one")]))
        start, got = micro_batch(reader, start)
        assert got == [b"one"] and start == {"r-stream": {"0": 1}}
        admin.produce("r-stream", 0, build_batch([Record(0, 0, None, b"two")]))
    start, got = micro_batch(reader, start)
    assert got == [b"two"] and start == {"r-stream": {"0": 2}}
    reader.stop()

    closed = KafkaStreamReader(
        parse_reader_options(bob(secured, subscribe="closed"), for_streaming=True)
    )
    said = refused(closed.initialOffset)
    assert (
        "not authorized to Describe topic 'closed' (Metadata): grant the principal "
        "Read and Describe on it"
    ) in said
    seen = KafkaStreamReader(
        parse_reader_options(
            alice(secured, subscribe="d-seen", startingOffsets="earliest"), for_streaming=True
        )
    )
    begin = seen.initialOffset()
    end = seen.latestOffset(begin)
    [part] = seen.partitions(begin, end)
    said = refused(lambda: list(seen.read(part)))
    assert "not authorized to Read topic 'd-seen' (Fetch): grant the principal Read on it" in said
    seen.stop()


def test_offsets_by_time_need_nothing_more_than_the_read(secured):
    """Row "Offsets by time": ListOffsets by timestamp wants Describe on the topic, which
    Read gives: bob reads ``r-time`` between timestamps (global and per partition) with
    Read alone. Without a grant the read is refused when planned, naming Read and
    Describe."""
    assert read(bob(secured, subscribe="r-time", startingTimestamp="2000")) == [b"b", b"c"]
    assert read(
        bob(secured, subscribe="r-time", startingTimestamp="1500", endingTimestamp="3000")
    ) == [b"b"]
    assert read(
        bob(
            secured,
            subscribe="r-time",
            startingOffsetsByTimestamp='{"r-time": {"0": 1000}}',
            endingOffsetsByTimestamp='{"r-time": {"0": 2000}}',
        )
    ) == [b"a"]
    said = refused(lambda: read(bob(secured, subscribe="closed", startingTimestamp="0")))
    assert (
        "not authorized to Describe topic 'closed' (Metadata): grant the principal "
        "Read and Describe on it"
    ) in said


def sent(monkeypatch) -> collections.Counter:
    """The requests every client sends from now on, counted by API name as they leave
    (the real send: the broker answers them)."""
    from protocol.client.connection import BrokerConnection

    counts: collections.Counter = collections.Counter()
    real_send = BrokerConnection.send

    def counting_send(self, api, *args, **kwargs):
        counts[api.name] += 1
        return real_send(self, api, *args, **kwargs)

    monkeypatch.setattr(BrokerConnection, "send", counting_send)
    return counts


#: The driver's lookups.
LOOKUPS = ("Metadata", "ListOffsets")
#: Spark's connector would try a lookup 5 times, 2 s apart, under these.
PATIENT = {"fetchOffset.numRetries": "5", "fetchOffset.retryIntervalMs": "2000"}


def test_a_refusal_is_not_retried_under_fetch_offset_num_retries(secured, monkeypatch, caplog):
    """A refusal is not transient: a batch read, a stream's start and a read by time that
    the principal may not make fail at the first refused request, naming the grant, and a
    wrong password at the first refused sign-in, whatever fetchOffset.numRetries allows
    (Spark's connector tries them fetchOffset.numRetries times). Counted: as many
    Metadata (ListOffsets, SaslAuthenticate) requests as with numRetries=1, and no retry
    logged."""
    caplog.set_level(logging.WARNING, logger="pykafka.source")
    counts = sent(monkeypatch)

    def requests(call, retries: str, error=TopicAuthorizationFailed, asked=LOOKUPS) -> tuple:
        """What ``call(retries)()`` raised, and how many requests of ``asked`` it sent (not
        the others: a pooled connection signs in once for several reads)."""
        counts.clear()
        said = refused(call(retries), error)
        return said, {api: counts[api] for api in asked if counts[api]}

    cases = {
        "batch read": lambda n: (
            lambda: read(
                bob(secured, subscribe="closed", **{**PATIENT, "fetchOffset.numRetries": n})
            )
        ),
        "stream start": lambda n: (
            KafkaStreamReader(
                parse_reader_options(
                    bob(secured, subscribe="closed", **{**PATIENT, "fetchOffset.numRetries": n}),
                    for_streaming=True,
                )
            ).initialOffset
        ),
        "read by time": lambda n: (
            lambda: read(
                bob(
                    secured,
                    assign='{"closed":[0]}',
                    startingTimestamp="0",
                    **{**PATIENT, "fetchOffset.numRetries": n},
                )
            )
        ),
    }
    for name, call in cases.items():
        said, once = requests(call, "1")
        assert (
            "not authorized to Describe topic 'closed' (Metadata): grant the principal "
            "Read and Describe on it"
        ) in said, name
        assert requests(call, "5") == (said, once), name
        assert 1 <= sum(once.values()) <= 2, (name, once)

    def wrong_password(n):
        options = bob(secured, subscribe="r-in", **{**PATIENT, "fetchOffset.numRetries": n})
        return lambda: read({**options, "kafka.sasl.password": "not-bob-s"})

    sign_in = ("SaslAuthenticate", *LOOKUPS)
    said, once = requests(wrong_password, "1", AuthenticationError, sign_in)
    assert "bob" in said and "not-bob-s" not in said
    assert requests(wrong_password, "5", AuthenticationError, sign_in) == (said, once)
    # one SCRAM exchange: the client-first message, then the client-final one, refused
    assert once == {"SaslAuthenticate": 2}, once
    assert not [r for r in caplog.records if "retrying" in r.getMessage()]


def test_a_grant_taken_from_a_stream_fails_its_next_micro_batch_at_once(
    secured, monkeypatch, caplog
):
    """A stream whose Read on its topic is taken away between two micro-batches fails the
    next one at the first refused lookup, naming the grant, where Spark's connector asks
    fetchOffset.numRetries times (here 5, 2 s apart): one Metadata and one ListOffsets
    (sent together), no retry logged."""
    caplog.set_level(logging.WARNING, logger="pykafka.source")
    topic = f"x-revoked-{uuid.uuid4().hex[:8]}"
    with KafkaClient(bootstrap_servers=secured.bootstrap) as admin:
        admin.create_topics({topic: 1})
        admin.produce(topic, 0, build_batch([Record(0, 0, None, b"v")]))
    secured.acl("User:bob", "Read", topics=topic)
    stream = KafkaStreamReader(
        parse_reader_options(
            bob(secured, subscribe=topic, startingOffsets="earliest", **PATIENT),
            for_streaming=True,
        )
    )
    start = stream.initialOffset()
    end = stream.latestOffset(start)
    assert end == {topic: {"0": 1}}
    secured.acl("User:bob", "Read", topics=topic, remove=True)
    with KafkaClient(parse_reader_options(bob(secured, subscribe=topic)).client_config) as c:
        wait_until(  # the broker applies the ACL change soon after
            lambda: c.refresh_metadata([topic]).topics[topic].error_code,
            30,
            "the grant taken away",
        )
    counts = sent(monkeypatch)
    said = refused(lambda: stream.latestOffset(end))
    stream.stop()
    assert f"not authorized to Describe topic '{topic}'" in said and "grant the principal" in said
    assert counts["Metadata"] + counts["ListOffsets"] <= 2, counts
    assert not [r for r in caplog.records if "retrying" in r.getMessage()]


def test_subscribe_pattern_sees_the_topics_it_may_describe(secured, caplog):
    """Row "subscribePattern": Kafka lists to a principal only the topics it may describe,
    so bob's pattern finds the ``r-*`` topics and leaves the others out (no error: Kafka
    does not say they exist). A pattern that finds nothing says so once, naming the grant.
    A topic alice may describe but not read (``d-seen``) is found, and its Fetch refused
    naming Read. A stream's topic that the pattern no longer finds because its grant was
    taken away fails the micro-batch naming the grant."""
    caplog.set_level(logging.WARNING, logger="pykafka.source")

    def found(options):
        parsed = parse_reader_options(options)
        with KafkaClient(parsed.client_config) as client:
            return sorted({t for t, _ in discover_partitions(parsed.subscription, client)})

    assert found(bob(secured, subscribePattern=".*")) == ["r-eos", "r-in", "r-stream", "r-time"]
    assert found(alice(secured, subscribePattern="^[dc]")) == ["d-seen"]
    assert read(bob(secured, subscribePattern="^clo")) == []
    [warning] = [r.getMessage() for r in caplog.records if "'^clo'" in r.getMessage()]
    assert warning == (
        "subscribePattern '^clo' matches no topic the cluster lists: nothing is read. On a "
        "cluster with an authorizer Kafka lists a principal only the topics it may "
        "describe, so a topic without a grant is left out, not refused: grant the "
        "principal Read on the topics to read"
    )
    said = refused(lambda: read(alice(secured, subscribePattern="^d-")))
    assert "not authorized to Read topic 'd-seen' (Fetch)" in said

    # A stream's topic whose grant is taken away drops out of Kafka's listing, so its
    # partitions leave the micro-batch's end: refused naming the grant, not reported as a
    # deleted topic (data loss, which failOnDataLoss=false would skip without a word).
    for lossy in ("true", "false"):
        stream = KafkaStreamReader(
            parse_reader_options(
                bob(secured, subscribePattern="^(r-in|closed)$", failOnDataLoss=lossy),
                for_streaming=True,
            )
        )
        said = refused(
            lambda stream=stream: stream.partitions(
                {"closed": {"0": 0}, "r-in": {"0": 0}}, {"r-in": {"0": 1}}
            )
        )
        stream.stop()
        assert (
            "not authorized to Describe topic 'closed' (Metadata): grant the principal "
            "Read and Describe on it"
        ) in said


def test_commit_offsets_to_a_group_needs_read_on_it_and_warns_once_a_query(secured, caplog):
    """Row "commitOffsetsToGroup": with Read on the group (and on the topic, which the read
    has) the offsets are committed and Kafka's admin sees them. Without Read on the group
    the stream goes on; one warning per query names Read on the group (it said "no
    coordinator for group" at every micro-batch), the repeats are debug lines that count.
    Without Read on the topic (Describe only) the commit's OffsetCommit is refused for
    that partition, warned naming Read on the topic."""
    caplog.set_level(logging.DEBUG, logger="pykafka.source")

    def query(group, topic="r-in"):
        return KafkaStreamReader(
            parse_reader_options(
                alice(secured, subscribe=topic, commitOffsetsToGroup=group), for_streaming=True
            )
        )

    def said(level):
        return [
            r.getMessage()
            for r in caplog.records
            if r.levelno == level and "commitOffsetsToGroup" in r.getMessage()
        ]

    granted = query("app-g")
    granted.commit({"r-in": {"0": 1}})
    granted.stop()
    with KafkaClient(bootstrap_servers=secured.bootstrap) as admin:
        assert admin.committed_offsets("app-g", [("r-in", 0)]) == {("r-in", 0): 1}
    assert said(logging.WARNING) == []

    refused_query = query("other-g")
    started = time.monotonic()
    for end in range(4):
        refused_query.commit({"r-in": {"0": end}})
    assert time.monotonic() - started < LIMIT_S
    [warning] = said(logging.WARNING)
    assert warning == (
        "could not commit offsets to consumer group 'other-g' (commitOffsetsToGroup): "
        "[GROUP_AUTHORIZATION_FAILED (30)] not authorized to Describe group 'other-g' "
        "(FindCoordinator): grant the principal Read on it"
    )
    assert said(logging.DEBUG)[-1].endswith("(again: 3 times since the warning)")
    refused_query.stop()
    query("other-g").commit({"r-in": {"0": 1}})  # another query: warned about again
    assert len(said(logging.WARNING)) == 2

    unread = query("app-d", topic="d-seen")
    unread.commit({"d-seen": {"0": 1}})
    unread.commit({"d-seen": {"0": 2}})
    unread.stop()
    assert said(logging.WARNING)[2:] == [
        "could not commit offsets to consumer group 'app-d' (commitOffsetsToGroup): "
        "[TOPIC_AUTHORIZATION_FAILED (29)] not authorized to Read topic 'd-seen' "
        "(OffsetCommit): grant the principal Read on it"
    ]
    with KafkaClient(bootstrap_servers=secured.bootstrap) as admin:
        assert admin.committed_offsets("app-d", [("d-seen", 0)]) == {("d-seen", 0): -1}


def test_committed_offsets_raise_a_partition_s_error(secured):
    """OffsetFetch refuses a partition the user may not describe in that partition's
    answer (offset -1): an error naming the grant, not "no offset committed"."""
    with KafkaClient(
        parse_reader_options(alice(secured, subscribe="r-in")).client_config
    ) as client:
        assert client.committed_offsets("app-h", [("r-in", 0)]) == {("r-in", 0): -1}
        said = refused(lambda: client.committed_offsets("app-h", [("r-in", 0), ("closed", 0)]))
    assert (
        "not authorized to Describe topic 'closed' (OffsetFetch): grant the principal "
        "Describe on it"
    ) in said


# ---- writes --------------------------------------------------------------------------------


def test_a_dead_letter_topic_needs_describe_when_planned_and_write_when_written(secured):
    """Row "deadLetterTopic": the driver's look at the topic when the query is planned
    needs Describe on it, a task's write of the records that could not be read or written
    needs Write. bob (Read on ``r-*``, which lets him describe them) passes the look at
    ``r-in`` and is refused the write there naming Write; a topic he may not describe is
    refused at the look naming Write and Describe on it; alice, granted Write on ``w-*``,
    writes a dead letter to ``w-dlt``."""
    from kafka_common.dead_letter import check_dead_letter_topic, send_dead_letters

    record = [Record(0, 1_000, b"k", b"undecodable")]
    log = logging.getLogger("pykafka.test")
    with KafkaClient(parse_reader_options(bob(secured, subscribe="r-in")).client_config) as c:
        check_dead_letter_topic(c, "r-in", log=log)
        said = refused(lambda: send_dead_letters(c, "r-in", 0, record))
        assert "not authorized to Write topic 'r-in' (Produce)" in said, said
        said = refused(lambda: check_dead_letter_topic(c, "closed", log=log))
        assert (
            "not authorized to Describe topic 'closed' (Metadata): grant the principal "
            "Write and Describe on it"
        ) in said, said
    with KafkaClient(parse_reader_options(alice(secured, subscribe="w-dlt")).client_config) as c:
        check_dead_letter_topic(c, "w-dlt", log=log)
        send_dead_letters(c, "w-dlt", 1, record)
    assert values(secured, "w-dlt") == [b"undecodable"]


def test_a_write_needs_write_on_its_topic(secured):
    """Rows "df.write" and "writeStream" (the same requests: the writer's check on the
    driver, then each task's InitProducerId and Produce): Write alone is enough (Kafka takes
    it for Describe, and for the idempotent producer's InitProducerId). Taken away:

    - a topic the user may not describe: the writer's check said "topic(s) 'closed' do not
      exist in the cluster ... create it first" after 2 s; it names the grant now, at once
      (not retried as a broken lookup is: also when a check passed before, which a
      stream's writer repeats every ``kafka.metadata.max.age.ms`` and retries for up to
      ``kafka.max.block.ms``, 60 s, to ride out an outage), and so does a task whose rows
      go there;
    - Describe only (alice on ``d-seen``): the Produce is refused naming Write;
    - a principal with no Write on any topic (bob, who may read ``r-in``): the idempotent
      producer's InitProducerId is refused, naming Write on the topics written.

    Nothing is written by any of them."""
    granted = parse_writer_options(alice(secured, topic="w-plain"))
    _check_topic_exists(granted)
    with KafkaClient(granted.client_config) as c:
        message = write_task(iter([ROWS]), granted, plan("w-plain"), client=c)
    assert message.partitions[("w-plain", 0)][0] == 2 and message.producer_ids
    assert values(secured, "w-plain") == [b"a", b"b"]

    options = parse_writer_options(alice(secured, topic="closed"))
    said = refused(lambda: _check_topic_exists(options), within_s=1)
    assert said.startswith(
        "[TOPIC_AUTHORIZATION_FAILED (29)] not authorized to Describe "
        "topic 'closed' (Metadata): grant the principal Write and "
        "Describe on it (Kafka answers so for every topic the principal "
        "may not describe, whether it exists or not)"
    ), said
    _CHECKED.put(_check_key(options), time.monotonic() - 3600)  # passed once, long ago
    assert refused(lambda: _check_topic_exists(options), within_s=1) == said
    with KafkaClient(options.client_config) as c:
        said = refused(lambda: write_task(iter([ROWS]), options, plan("closed"), client=c))
    assert "not authorized to Describe topic 'closed'" in said
    assert "grant the principal Write and Describe on it" in said
    assert everything(secured, "closed") == [b"v"]

    described = parse_writer_options(alice(secured, topic="d-seen"))  # Describe, no Write
    _check_topic_exists(described)
    with KafkaClient(described.client_config) as c:
        said = refused(
            lambda: write_task(iter([ROWS]), described, plan("d-seen"), client=c), ProduceError
        )
    assert said == (
        "Writing to topic 'd-seen' partition 0 failed: "
        "[TOPIC_AUTHORIZATION_FAILED (29)] not "
        "authorized to Write topic 'd-seen' (Produce): grant the principal Write "
        "and Describe on it"
    )
    assert everything(secured, "d-seen") == [b"v"]

    reader_only = parse_writer_options(bob(secured, topic="r-in"))
    _check_topic_exists(reader_only)
    with KafkaClient(reader_only.client_config) as c:
        said = refused(
            lambda: write_task(iter([ROWS]), reader_only, plan("r-in"), client=c), ProduceError
        )
    assert said == (
        "could not get a producer id: [CLUSTER_AUTHORIZATION_FAILED (31)] not authorized "
        "to IdempotentWrite the cluster (InitProducerId): grant the principal Write on the "
        "topics written (Kafka 2.8+ takes it for IdempotentWrite on the cluster); or grant "
        "IdempotentWrite on the cluster, or set kafka.enable.idempotence=false"
    )
    assert everything(secured, "r-in") == [b"v"]


def eos_write(
    cluster, topic: str, prefix: str, batch_id: int | None, partition: int = 0, rows=ROWS
):
    """One exactlyOnce task of alice's (a batch job's when ``batch_id`` is None, else
    Spark partition ``partition`` of a stream's micro-batch ``batch_id``), its transaction
    left open: (client, options, job prefix, commit message)."""
    options = parse_writer_options(
        alice(cluster, topic=topic, exactlyOnce="true", transactionalIdPrefix=prefix)
    )
    client = KafkaClient(options.client_config)
    job = prefix if batch_id is not None else job_prefix(prefix)
    try:
        message = write_task(
            iter([rows]),
            options,
            plan(topic),
            client=client,
            prefix=job,
            task=(partition, 0, batch_id),
            fresh_ids=batch_id is None,
        )
    except BaseException:
        client.close()
        raise
    return client, options, job, message


def eos_refused(cluster, topic: str, prefix: str, batch_id: int | None, error=ProduceError) -> str:
    """An exactlyOnce task refused within ``LIMIT_S``, having written nothing."""
    before = everything(cluster, topic)
    said = refused(lambda: eos_write(cluster, topic, prefix, batch_id), error)
    assert everything(cluster, topic) == before
    return said


def test_an_exactly_once_batch_write_needs_its_ids_and_its_topic(secured):
    """Row "exactlyOnce batch write": Write on the topic and on the transactional ids that
    start with the prefix; the job commits. Taken away: ids outside the grant are refused
    at the task's InitProducerId naming the prefix to grant; a topic with Describe only at
    its AddPartitionsToTxn naming Write. Neither writes anything."""
    other = parse_writer_options(
        alice(secured, topic="w-out", exactlyOnce="true", transactionalIdPrefix="other-x")
    )
    with TaskProducer(other, transactional_id="other-x-0-0") as producer:
        said = refused(producer.producer_identity, ProduceError)
    assert said == (
        "[TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53)] not authorized to Describe "
        "transactional id 'other-x-0-0' (FindCoordinator): grant the principal Write and "
        "Describe on transactional ids starting with 'other-x' (a prefixed ACL: every "
        "task's id starts with the transactionalIdPrefix); or choose a "
        "transactionalIdPrefix the principal may use"
    )

    client, options, job, message = eos_write(secured, "w-out", "app-b", None)
    with client:
        assert commit_transactions(client, options, job, [message], None)["committed"] == 1
    assert committed_values(secured, "w-out") == [b"a", b"b"]

    said = eos_refused(secured, "w-out", "other-b", None)
    assert (
        "not authorized to Describe transactional id 'other-b-" in said
        and "grant the principal Write and Describe on transactional ids starting with 'other-b'"
        in said
    ), said
    said = eos_refused(secured, "d-seen", "app-b", None)
    assert said == (
        "[TOPIC_AUTHORIZATION_FAILED (29)] not authorized to Write topic "
        "'d-seen' (AddPartitionsToTxn): grant the principal Write and Describe "
        "on it"
    )


def test_an_exactly_once_stream_needs_its_ids_groups_and_read_and_write_on_its_topic(
    secured, caplog
):
    """Row "exactlyOnce stream": Write and Read on the topic, Write on the transactional
    ids and Read on the groups that start with the prefix. Micro-batch 1 commits with its
    marker in group ``<prefix>-0`` (Kafka's admin sees it), and a transaction a crashed run
    left open under the prefix (Spark partition 1) is listed (ListTransactions shows the
    ids the principal may describe, which Write on them allows) and fenced by that commit.
    Each grant taken away:

    - Read on the topic (``w-out``: Write only): the driver's TxnOffsetCommit is refused
      naming Read, and nothing of the micro-batch becomes visible;
    - Write on the topic (``r-eos``: Read only): the task's AddPartitionsToTxn, naming
      Write;
    - Read on the groups (prefix ``nog-q``): the task's look at its marker, naming Read on
      the groups under the prefix;
    - Write on the ids (prefix ``gro-q``): the task's InitProducerId, naming the prefix.

    The refused tasks write nothing."""
    caplog.set_level(logging.INFO, logger="pykafka.sink")
    leftover = eos_write(
        secured,
        "rw-left",
        "app-r",
        1,
        partition=1,
        rows=pa.record_batch({"value": pa.array([b"x"], pa.binary())}),
    )
    leftover[0].close()
    client, options, job, message = eos_write(secured, "rw-left", "app-r", 1)
    with client:
        assert commit_transactions(client, options, job, [message], 1)["committed"] == 1
    assert committed_values(secured, "rw-left", timeout_s=5) == [b"a", b"b"]
    assert any(
        "fenced 1 open transaction(s) left under prefix app-r by an earlier run or "
        "attempt: app-r-1-0" in r.getMessage()
        for r in caplog.records
    )
    with KafkaClient(bootstrap_servers=secured.bootstrap) as admin:
        assert admin.committed_offsets("app-r-0", [("rw-left", 0)]) == {("rw-left", 0): 1}

    before = committed_values(secured, "w-out")
    client, options, job, message = eos_write(secured, "w-out", "app-s", 1)
    with client:
        said = refused(
            lambda: commit_transactions(client, options, job, [message], 1), TransactionCommitError
        )
        abort_transactions(client, options, job, [message])
    assert (
        "[TOPIC_AUTHORIZATION_FAILED (29)] not authorized to Read topic 'w-out' "
        "(TxnOffsetCommit): grant the principal Read on it; an exactlyOnce stream "
        "records each micro-batch's id as an offset of partition 0 of the topic it "
        "writes"
    ) in said
    assert committed_values(secured, "w-out") == before  # the micro-batch's aborted

    said = eos_refused(secured, "r-eos", "app-t", 1)
    assert said == (
        "[TOPIC_AUTHORIZATION_FAILED (29)] not authorized to Write topic "
        "'r-eos' (AddPartitionsToTxn): grant the principal Write and Describe "
        "on it"
    )
    said = eos_refused(secured, "rw-nog", "nog-q", 1, PyKafkaError)
    assert said == (
        "[GROUP_AUTHORIZATION_FAILED (30)] not authorized to Describe group 'nog-q-0' "
        "(FindCoordinator): grant the principal Read on groups starting with 'nog-q' (a "
        "prefixed ACL): an exactlyOnce stream records each committed micro-batch in the "
        "group 'nog-q-<Spark partition>'"
    )
    said = eos_refused(secured, "rw-gro", "gro-q", 1)
    assert said.startswith(
        "[TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53)] not authorized to Describe "
        "transactional id 'gro-q-0-0' (FindCoordinator): grant the principal Write and "
        "Describe on transactional ids starting with 'gro-q'"
    ), said


def test_fencing_refused_by_a_narrow_grant_warns_once_a_query(secured, caplog):
    """Write on the transactional id ``<FX>-0-0`` alone, not on every id under the prefix:
    the stream's micro-batches commit, but the fencing of the next attempt's id
    (``<FX>-0-1``, at every commit) is refused. It said so at every micro-batch; now once
    per query, naming the grant, then debug lines that count."""
    caplog.set_level(logging.DEBUG, logger="pykafka.sink")
    for batch_id, value in ((1, b"one"), (2, b"two")):
        client, options, job, message = eos_write(
            secured,
            "rw-fx",
            FX,
            batch_id,
            rows=pa.record_batch({"value": pa.array([value], pa.binary())}),
        )
        with client:
            counts = commit_transactions(client, options, job, [message], batch_id)
        assert counts["committed"] == 1
    assert committed_values(secured, "rw-fx") == [b"one", b"two"]
    fencing = [r for r in caplog.records if "could not fence" in r.getMessage()]
    assert [r.levelno for r in fencing] == [logging.WARNING, logging.DEBUG]
    assert fencing[0].getMessage() == (
        f"could not fence transactional id(s) {FX}-0-1 (the broker aborts their open "
        f"transactions after kafka.transaction.timeout.ms): "
        f"[TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53)] not authorized to Describe "
        f"transactional id '{FX}-0-1' (FindCoordinator): grant the principal Write and "
        f"Describe on transactional ids starting with '{FX}' (a prefixed ACL: every task's "
        f"id starts with the transactionalIdPrefix); or choose a transactionalIdPrefix the "
        f"principal may use"
    )
    assert fencing[1].getMessage().endswith("(again: 1 times since the warning)")


# ---- the reader's exactlyOnce dead-letter copies --------------------------------------------

DLT_SCHEMA = '{"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}'
#: Avro longs 0..3 in Confluent's framing (schema id 1), and two values that are not.
DLT_GOOD = [b"\x00\x00\x00\x00\x01" + bytes([i << 1]) for i in range(4)]
DLT_BAD = [b"bad-1", b"bad-2"]


def dead_letter_read(cluster, source: str, dlt: str, prefix: str, stream=False) -> tuple:
    """A task's read of ``source`` partition 0 by alice with exactlyOnce under ``prefix``,
    a batch read's (or a micro-batch's): (the ids read, the prefix with the read's token)."""
    from kafka_common.value_formats import resolve_formats
    from kafka_source.offset_specs import OffsetRange

    options = parse_reader_options(
        alice(
            cluster,
            subscribe=source,
            valueFormat="avro",
            valueSchema=DLT_SCHEMA,
            deadLetterTopic=dlt,
            exactlyOnce="true",
            transactionalIdPrefix=prefix,
        ),
        for_streaming=stream,
    )
    options = dataclasses.replace(options, formats=resolve_formats(options.formats))
    assert options.dead_letter_txn is not None
    rng = OffsetRange(source, 0, 0, len(DLT_GOOD) + len(DLT_BAD))
    ids = [v["id"] for b in read_range(options, rng) for v in b.column("value").to_pylist()]
    return ids, options.dead_letter_txn.prefix


def test_an_exactly_once_read_with_dead_letters_needs_its_ids_and_its_group(secured):
    """Row "exactlyOnce read with deadLetterTopic": alice, with Read on the topic read and
    Write on the dead-letter topic, reads with exactlyOnce. With Write on the transactional
    ids and Read on the groups that start with the prefix (``app-*``) the copies are
    committed, and the range's end in the group ``<prefix>-dlt``. Taken away, the task's
    first copy is refused within 10 s, writing nothing: Write on the ids (prefix ``gro-*``,
    Read on its groups only) at its InitProducerId, naming the prefix; Read on the group
    (prefix ``nog-*``, Write on its ids only) at its look at the marker, naming the group.
    A batch read's ids and group carry a token after the prefix: the grant named is on the
    transactionalIdPrefix as given; a stream's group is ``<prefix>-dlt`` itself."""
    tag = uuid.uuid4().hex[:8]
    source, dlt = f"r-dleo-{tag}", f"w-dleo-{tag}"
    with KafkaClient(bootstrap_servers=secured.bootstrap) as admin:
        admin.create_topics({source: 1, dlt: 1})
        values_in = DLT_GOOD[:2] + [DLT_BAD[0]] + DLT_GOOD[2:] + [DLT_BAD[1]]
        admin.produce(
            source, 0, build_batch([Record(i, 0, None, v) for i, v in enumerate(values_in)])
        )

    said = refused(lambda: dead_letter_read(secured, source, dlt, "gro-d"), PyKafkaError)
    assert said.startswith(
        "[TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53)] not authorized to Describe "
        "transactional id 'gro-d-"
    ), said
    assert (
        "grant the principal Write and Describe on transactional ids starting with 'gro-d' "
        "(a prefixed ACL: the reader's ids are 'gro-d-<token of the read>-dlt-<topic>-"
        "<partition>'); or choose a transactionalIdPrefix the principal may use"
    ) in said, said
    said = refused(lambda: dead_letter_read(secured, source, dlt, "nog-d"), PyKafkaError)
    assert said.startswith(
        "[GROUP_AUTHORIZATION_FAILED (30)] not authorized to Describe group 'nog-d-"
    ), said
    assert (
        "grant the principal Read on groups starting with 'nog-d' (a prefixed ACL: a batch "
        "read's group is 'nog-d-<token of the read>-dlt'): the reader records there which "
        "ranges' dead-letter copies are committed"
    ) in said, said
    said = refused(
        lambda: dead_letter_read(secured, source, dlt, "nog-s", stream=True), PyKafkaError
    )
    assert (
        "not authorized to Describe group 'nog-s-dlt' (FindCoordinator): grant the "
        "principal Read on the group 'nog-s-dlt' (or a prefixed ACL on 'nog-s')"
    ) in said, said
    assert everything(secured, dlt) == []

    ids, prefix = dead_letter_read(secured, source, dlt, "app-d")
    assert ids == [0, 1, 2, 3]
    assert sorted(committed_values(secured, dlt)) == DLT_BAD
    assert everything(secured, dlt) == DLT_BAD  # no aborted copy either
    with KafkaClient(bootstrap_servers=secured.bootstrap) as admin:
        marker = admin.committed_offsets(f"{prefix}-dlt", [(source, 0)])
    assert marker == {(source, 0): len(values_in)}
