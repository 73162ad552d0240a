"""Exactly-once writes without Spark: tasks' transactions, the driver's commit, replays,
losing attempts, aborts, the broker's transaction timeout, the errors that name an option,
and the transaction requests themselves.

Which broker: Apache Kafka (the session's ``kafka``, transaction.version 2; the tests of
the requests themselves, of replays and of fencing run on transaction.version 1 too,
through ``eos_kafka``). What became visible is judged twice: by Kafka's rule applied to the
log (``txn_referee.committed_values``), and by librdkafka's read_committed consumer, which
on Kafka hides aborted records (the broker's AbortedTransactions) and waits behind open
transactions (the last stable offset). librdkafka's mock cluster serves only where a
coordinator's error answer must be injected (``push_request_errors``): a busy coordinator,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; its own transactions are wrong
(``test_what_the_mock_cluster_gets_wrong``). A broker without transactions is Apache
Kafka behind a proxy that hides the transaction APIs.
"""

from __future__ import annotations

import logging
import uuid

import pytest
from kafka_sink.batch_state import ProduceError
from kafka_sink.transactions import (
    StaleAttemptError,
    TransactionCommitError,
    abort_transactions,
    commit_transactions,
    committed_batch,
    job_prefix,
)
from kafka_sink.validation import WritePlan
from kafka_sink.writer import create_writer, write_task
from protocol.client import transactions as txn
from protocol.client.cluster import KafkaClient
from protocol.errors import BrokerError, ConfigError, KafkaTimeoutError
from protocol.schemas import API_VERSIONS

from .helpers.broker_setup import create_topic
from .helpers.frames import rewriting
from .helpers.waiting import wait_until
from .helpers.txn_referee import (
    aborted_values,
    committed_values,
    kafka_of_transaction_version,
    kafka_transactions_verdict,
    librdkafka_read_committed,
    open_transactions,
    stable_offsets_behind,
)
from .helpers.transactions import (
    PLAN_KEY_VALUE,
    assert_read_committed_shows,
    commit,
    create,
    options,
    produce_in_txn,
    rows,
    task,
    values,
)

INIT_PRODUCER_ID_KEY, END_TXN_KEY = 22, 26
READ_COMMITTED = 1


@pytest.fixture(params=[2, 1], ids=["tv2", "tv1"])
def eos_kafka(request):
    """Apache Kafka with transaction.version 2 (the session's) and 1 (KIP-890)."""
    return kafka_of_transaction_version(request, request.param)


def test_nothing_is_visible_until_the_driver_commits(kafka, topic_name):
    """Two tasks write in open transactions: read_committed readers see nothing (Kafka's
    last stable offset stays at the open transactions' first offset, and so does
    ListOffsets at read_committed) and Kafka's TransactionsCommand lists both as Ongoing;
    then the driver commits both and every row is visible, to librdkafka's read_committed
    consumer too, and Kafka's tools find nothing unfinished or hanging (the referee the
    Spark tests use, shown here to see an open transaction)."""
    create(kafka, topic_name)
    prefix = f"eos-{uuid.uuid4().hex[:8]}"
    m0 = task(kafka, topic_name, prefix, "a", 50, partition_id=0)
    m1 = task(kafka, topic_name, prefix, "b", 30, partition_id=1)
    assert m0.transaction.transactional_id == f"{prefix}-0-0" and m0.records == 50
    assert m0.transaction.marker is not None and not m0.transaction.skipped
    assert committed_values(kafka.bootstrap, topic_name, 2, settle_s=0) == []
    assert librdkafka_read_committed(kafka.bootstrap, topic_name, 2, idle_s=1.5) == []
    tps = [(topic_name, 0), (topic_name, 1)]
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as c:
        assert sum(c.latest_offsets(tps).values()) == 80  # in the log, uncommitted
        assert c.latest_offsets(tps, READ_COMMITTED) == {tp: 0 for tp in tps}
    left_open = open_transactions(kafka.bootstrap, topic_name, 2)
    assert {line.split(" from ")[0] for line in left_open} == {
        f"partition {p}: producer {m.transaction.producer_id} epoch {m.transaction.epoch}"
        for m in (m0, m1)
        for p in (0, 1)
        if m.partitions.get((topic_name, p))
    }
    assert len(stable_offsets_behind(kafka.bootstrap, topic_name, 2, wait_s=0)) == 2
    # Kafka's tools see both open (and not hanging: the coordinator knows their partitions)
    assert kafka_transactions_verdict(kafka, topic_name, prefix) == [
        f"unfinished: {prefix}-0-0: Ongoing",
        f"unfinished: {prefix}-1-0: Ongoing",
    ]

    counts = commit(kafka, topic_name, prefix, [m0, m1])
    assert counts["committed"] == 2
    assert_read_committed_shows(kafka, topic_name, 2, values("a", 50) + values("b", 30))
    assert kafka_transactions_verdict(kafka, topic_name, prefix) == []
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as c:
        assert c.latest_offsets(tps, READ_COMMITTED) == c.latest_offsets(tps)


def test_a_replayed_micro_batch_is_written_once(eos_kafka, topic_name):
    """Batch 7 commits (with its marker in the same transaction); the same batch run
    again after a restart: a task that sees the marker writes nothing; a task that wrote
    anyway (no batch id known to it) has its transaction aborted by the driver, and
    read_committed readers never see its copy."""
    broker = eos_kafka
    create(broker, topic_name)
    prefix = f"eos-{uuid.uuid4().hex[:8]}"
    first = task(broker, topic_name, prefix, "x", 20, partition_id=0, batch_id=7)
    assert commit(broker, topic_name, prefix, [first], 7)["committed"] == 1
    with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        # named partitions first: require_stable waits while Kafka still writes the
        # commit's marker to the offsets topic, which a fetch of all partitions does not
        assert committed_batch(client, prefix, 0, topic=topic_name) == 7
        assert committed_batch(client, prefix, 0) == 7
        assert committed_batch(client, prefix, 1, topic=topic_name) == -1

    again = task(broker, topic_name, prefix, "x", 20, partition_id=0, batch_id=7)
    assert again.transaction.skipped and again.records == 0
    blind = task(broker, topic_name, prefix, "x", 20, partition_id=0, attempt=1)
    counts = commit(broker, topic_name, prefix, [again, blind], 7)
    assert counts == {"committed": 0, "replayed": 1, "skipped": 1}
    assert sorted(aborted_values(broker.bootstrap, topic_name, 2)) == sorted(values("x", 20))

    nxt = task(broker, topic_name, prefix, "y", 5, partition_id=0, batch_id=8)
    assert commit(broker, topic_name, prefix, [nxt], 8)["committed"] == 1
    assert_read_committed_shows(broker, topic_name, 2, values("x", 20) + values("y", 5))


def test_losing_attempts_are_aborted(eos_kafka, topic_name):
    """Attempts 0 and 2 of partition 0 finish; Spark commits attempt 1 (a speculative
    copy, say). The driver commits attempt 1 and fences attempts 0 and 2: only attempt
    1's rows are visible, the others end in ABORT markers."""
    broker = eos_kafka
    create(broker, topic_name)
    prefix = f"eos-{uuid.uuid4().hex[:8]}"
    lost0 = task(broker, topic_name, prefix, "lost0", 10, attempt=0)
    won = task(broker, topic_name, prefix, "won", 10, attempt=1)
    lost2 = task(broker, topic_name, prefix, "lost2", 10, attempt=2)
    assert lost0.transaction.transactional_id != won.transaction.transactional_id
    commit(broker, topic_name, prefix, [won])
    assert_read_committed_shows(broker, topic_name, 2, values("won", 10))
    assert sorted(aborted_values(broker.bootstrap, topic_name, 2)) == sorted(
        values("lost0", 10) + values("lost2", 10)
    )
    assert lost2.transaction.attempt == 2


def test_abort_leaves_nothing_visible(kafka, topic_name):
    """A failed job: the driver's abort aborts the finished tasks' transactions and
    fences the attempts of the failed one (None), whose transaction was left open."""
    create(kafka, topic_name)
    prefix = f"eos-{uuid.uuid4().hex[:8]}"
    done = task(kafka, topic_name, prefix, "done", 10, partition_id=0)
    failed = task(kafka, topic_name, prefix, "failed", 10, partition_id=1)  # never reported
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        assert abort_transactions(client, options(kafka, topic_name), prefix, [done, None]) == 1
    assert_read_committed_shows(kafka, topic_name, 2, [])
    assert sorted(aborted_values(kafka.bootstrap, topic_name, 2)) == sorted(
        values("done", 10) + values("failed", 10)
    )
    assert failed.transaction.partition_id == 1


def test_a_task_attempt_that_starts_after_the_driver_ended_the_job_writes_nothing(
    kafka, topic_name
):
    """Spark calls a batch job's abort without waiting for its other running tasks, and a
    Python worker that starts late still gets the input Spark had already sent it: such
    an attempt opened its transaction after the driver's fencing and, with reusable ids,
    left it open (read_committed readers stall; the CI failure of the Spark test). A batch
    job's ids are its own (job_prefix), so the late attempt finds its id used (epoch 1)
    and writes nothing. The same for a losing attempt that starts after the commit."""
    create(kafka, topic_name)
    prefix = job_prefix(f"eos-{uuid.uuid4().hex[:8]}")
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        abort_transactions(client, options(kafka, topic_name), prefix, [None, None])
    with pytest.raises(StaleAttemptError, match=f"{prefix}-1-0.*epoch 1"):
        task(kafka, topic_name, prefix, "late", 10, partition_id=1, fresh_ids=True)

    second = job_prefix(prefix.rsplit("-", 1)[0])  # the next job: ids of its own
    won = task(kafka, topic_name, second, "won", 10, partition_id=0, attempt=2, fresh_ids=True)
    commit(kafka, topic_name, second, [won])  # fences attempts 0, 1 and 3
    with pytest.raises(StaleAttemptError, match=f"{second}-0-3"):
        task(kafka, topic_name, second, "loser", 10, partition_id=0, attempt=3, fresh_ids=True)
    assert_read_committed_shows(kafka, topic_name, 2, values("won", 10))
    assert aborted_values(kafka.bootstrap, topic_name, 2) == []  # the late ones wrote nothing


def test_a_failing_task_aborts_its_own_transaction(kafka, topic_name):
    """A task's input fails after some of its records were sent (tiny batches and buffer
    make them go out at once): before the error goes to Spark the task aborts its
    transaction itself, so nothing is left open even before any driver acts."""
    create(kafka, topic_name)
    prefix = f"eos-{uuid.uuid4().hex[:8]}"

    def batches():
        yield rows("sent", 20)
        raise ValueError("the input fails")

    plan = WritePlan(topic_option=topic_name, **PLAN_KEY_VALUE)
    opts = options(kafka, topic_name, **{"kafka.buffer.memory": "100", "kafka.batch.size": "100"})
    with pytest.raises(ValueError, match="the input fails"):
        write_task(batches(), opts, plan, prefix=prefix, task=(0, 0, None))
    assert_read_committed_shows(kafka, topic_name, 2, [])
    aborted = aborted_values(kafka.bootstrap, topic_name, 2)
    assert aborted and set(aborted) <= set(values("sent", 20))  # what went out was aborted


def _wait_until_kafka_aborts(broker, topic, expected, wait_s=40.0) -> None:
    """Until the log shows ``expected`` aborted and nothing open: the coordinator aborts a
    timed-out transaction at its next check (every 10 s by default:
    transaction.abort.timed.out.transaction.cleanup.interval.ms)."""
    wait_until(
        lambda: sorted(aborted_values(broker.bootstrap, topic, 2)) == sorted(expected),
        wait_s,
        lambda: (
            "Kafka aborting the timed-out transactions: "
            f"{open_transactions(broker.bootstrap, topic, 2)}"
        ),
        interval=0.5,
    )


def test_a_transaction_the_broker_timed_out_fails_the_commit_naming_the_timeout(kafka, topic_name):
    """Two tasks write with kafka.transaction.timeout.ms=1000 and the driver commits only
    after Kafka's coordinator aborted both transactions for their timeout (and bumped
    their epochs). Both commits fail naming kafka.transaction.timeout.ms: a stream's at
    AddOffsetsToTxn (it records the batch marker first), a batch write's at EndTxn. The
    batch marker does not move and nothing of the tasks is visible."""
    create(kafka, topic_name)
    prefix = f"eos-{uuid.uuid4().hex[:8]}"
    short = {"kafka.transaction.timeout.ms": "1000"}
    streamed = task(kafka, topic_name, prefix, "streamed", 10, partition_id=0, batch_id=3, **short)
    batched = task(kafka, topic_name, prefix, "batched", 10, partition_id=1, **short)
    _wait_until_kafka_aborts(kafka, topic_name, values("streamed", 10) + values("batched", 10))
    for message, batch_id, request in (
        (streamed, 3, "recording micro-batch 3"),
        (batched, None, "committing the transaction"),
    ):
        with pytest.raises(TransactionCommitError) as info:
            commit(kafka, topic_name, prefix, [message], batch_id)
        said = str(info.value)
        assert said.startswith(request), said
        assert "kafka.transaction.timeout.ms" in said and "no longer open" in said
        assert f"Spark partition {message.transaction.partition_id}" in said
        assert any(code in said for code in ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")), said
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        assert committed_batch(client, prefix, 0, topic=topic_name) == -1
    assert_read_committed_shows(kafka, topic_name, 2, [])


def test_init_producer_id_retries_a_busy_coordinator(mock_cluster, topic_name, caplog):
    """CONCURRENT_TRANSACTIONS (the coordinator is still aborting the id's transaction),
    COORDINATOR_LOAD_IN_PROGRESS and NOT_COORDINATOR are retried, as Kafka's clients do,
    for the task's InitProducerId and for the driver's fencing alike (the same function).
    On the mock, which answers what it is told."""
    create_topic(mock_cluster, topic_name, 1)
    caplog.set_level(logging.DEBUG, logger="pykafka.protocol.cluster")
    mock_cluster.push_request_errors(INIT_PRODUCER_ID_KEY, [51, 14, 16])
    with KafkaClient(bootstrap_servers=mock_cluster.bootstrap, retry_backoff_ms=10) as c:
        pid, epoch = txn.init_producer_id(c, f"tx-{uuid.uuid4().hex[:8]}", 60000)
    assert pid >= 0 and epoch >= 0
    retried = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    for name in ("CONCURRENT_TRANSACTIONS", "COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR"):
        assert sum(name in m for m in retried) == 1, retried


def test_an_unauthorized_transactional_id_fails_the_task_naming_the_prefix(
    mock_cluster, topic_name
):
    """TRANSACTIONAL_ID_AUTHORIZATION_FAILED on the task's InitProducerId (librdkafka's
    mock answers it when told to): the task fails before writing anything, with an error
    that names transactionalIdPrefix."""
    create_topic(mock_cluster, topic_name, 2)
    prefix = f"eos-{uuid.uuid4().hex[:8]}"
    mock_cluster.push_request_errors(INIT_PRODUCER_ID_KEY, [53])
    with pytest.raises(ProduceError) as info:
        task(mock_cluster, topic_name, prefix, "x", 10)
    said = str(info.value)
    assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in said
    assert "transactionalIdPrefix" in said and f"{prefix}-0-0" in said
    with KafkaClient(bootstrap_servers=mock_cluster.bootstrap) as client:
        assert client.latest_offsets([(topic_name, 0), (topic_name, 1)]) == {
            (topic_name, 0): 0,
            (topic_name, 1): 0,
        }  # nothing was written


def test_the_drivers_commit_names_the_prefix_when_the_coordinator_refuses_it(
    mock_cluster, topic_name
):
    """A batch write's task writes; the coordinator refuses the driver's EndTxn with
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED (the mock answers what it is told; Kafka's
    refusal after a timeout is test_a_transaction_the_broker_timed_out_...). The job
    fails with an error naming transactionalIdPrefix, and the log holds no commit
    marker."""
    create_topic(mock_cluster, topic_name, 2)
    prefix = job_prefix(f"eos-{uuid.uuid4().hex[:8]}")
    done = task(mock_cluster, topic_name, prefix, "x", 10, fresh_ids=True)
    mock_cluster.push_request_errors(END_TXN_KEY, [53])
    with pytest.raises(TransactionCommitError) as info:
        commit(mock_cluster, topic_name, prefix, [done])
    said = str(info.value)
    assert "transactionalIdPrefix" in said and "Spark partition 0" in said
    assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in said
    assert committed_values(mock_cluster.bootstrap, topic_name, 2, settle_s=0) == []


def _drop_transaction_apis(body) -> bool:
    body["api_keys"] = [k for k in body["api_keys"] if k["api_key"] not in (24, 25, 26, 28)]
    return True


# An ApiVersions answer without AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and
# TxnOffsetCommit: a broker that does not support transactions.
_without_transaction_apis = rewriting(API_VERSIONS, _drop_transaction_apis)


def test_a_broker_without_transactions_is_refused_when_the_writer_is_created(
    proxied_kafka, topic_name
):
    """Apache Kafka behind a proxy that removes the transaction APIs from its ApiVersions
    answer (a broker without transactions, which no Apache Kafka is; clients that bootstrap
    through the proxy reach it only through it, so every connection gets the rewritten
    answer): creating an exactlyOnce writer (on the driver, before any task) fails naming
    exactlyOnce, and nothing is written."""
    from pyspark.sql.types import BinaryType, StructField, StructType

    proxy, broker = proxied_kafka
    proxy.reset()
    create_topic(broker, topic_name, 1)
    proxy.rewrite_response(API_VERSIONS.key, _without_transaction_apis, count=10**6)
    try:
        schema = StructType([StructField("value", BinaryType())])
        with pytest.raises(ConfigError) as info:
            create_writer(
                {
                    "kafka.bootstrap.servers": proxy.address,
                    "topic": topic_name,
                    "exactlyOnce": "true",
                    "transactionalIdPrefix": "p",
                    "kafka.client.id": "without-transactions",
                },
                schema,
                False,
            )
        assert "exactlyOnce" in str(info.value) and "[24, 25, 26, 28]" in str(info.value)
        assert proxy.stats["rewrites"] >= 1
    finally:
        proxy.reset()
    with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        assert client.fetch({(topic_name, 0): 0})[(topic_name, 0)]["high_watermark"] == 0


def test_transaction_requests_on_kafka(eos_kafka, topic_name):
    """The protocol functions at the versions the client caps them to, on both
    transaction versions: InitProducerId aborts an open transaction (ABORT marker, same
    producer id, a higher epoch that fences the old one), TxnOffsetCommit becomes the
    group's offset (with its metadata) only at commit (OffsetFetch with require_stable
    waits for it meanwhile), and read_committed readers see only the committed record."""
    broker = eos_kafka
    create(broker, topic_name, 1)
    tid, group = f"tx-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        client.metadata([topic_name])
        pid, epoch = txn.init_producer_id(client, tid, 60000)
        produce_in_txn(client, tid, pid, epoch, topic_name, b"open")
        pid2, epoch2 = txn.init_producer_id(client, tid, 60000)
        assert pid2 == pid and epoch2 > epoch  # Kafka fences (+1) to abort, then bumps
        with pytest.raises(BrokerError) as fenced:  # the old epoch may not go on
            txn.add_partitions(client, tid, pid, epoch, [(topic_name, 0)])
        assert fenced.value.code in (47, 90)  # INVALID_PRODUCER_EPOCH, PRODUCER_FENCED
        assert stable_offsets_behind(broker.bootstrap, topic_name, 1) == []
        assert aborted_values(broker.bootstrap, topic_name, 1) == ["open"]
        produce_in_txn(client, tid, pid2, epoch2, topic_name, b"kept")
        txn.add_offsets(client, tid, pid2, epoch2, group)
        txn.txn_offset_commit(client, tid, pid2, epoch2, group, {(topic_name, 0): 42}, "m")
        with pytest.raises(KafkaTimeoutError, match="UNSTABLE_OFFSET_COMMIT"):
            # require_stable: Kafka holds the pending offset back until the transaction ends
            txn.fetch_stable_offsets(client, group, [(topic_name, 0)], timeout_ms=600)
        txn.end_txn(client, tid, pid2, epoch2, True)
        assert txn.fetch_stable_offsets(client, group, [(topic_name, 0)]) == {
            (topic_name, 0): (42, "m")
        }
    assert_read_committed_shows(broker, topic_name, 1, ["kept"])


def test_kafka_hides_an_aborted_transaction_from_read_committed_readers(eos_kafka, topic_name):
    """What the referees rely on: under an open transaction Kafka's Fetch answers a last
    stable offset at its first offset; after EndTxn(abort) (markers written) the Fetch
    names the aborted transaction (producer id, first offset) and librdkafka's
    read_committed consumer shows nothing."""
    broker = eos_kafka
    create(broker, topic_name, 1)
    tid = f"tx-{uuid.uuid4().hex[:8]}"
    with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        client.metadata([topic_name])
        pid, epoch = txn.init_producer_id(client, tid, 60000)
        produce_in_txn(client, tid, pid, epoch, topic_name, b"gone")
        part = client.fetch({(topic_name, 0): 0}, isolation_level=1)[(topic_name, 0)]
        assert (part["last_stable_offset"], part["high_watermark"]) == (0, 1)
        txn.end_txn(client, tid, pid, epoch, False)
        assert stable_offsets_behind(broker.bootstrap, topic_name, 1) == []
        part = client.fetch({(topic_name, 0): 0}, isolation_level=1)[(topic_name, 0)]
        assert part["last_stable_offset"] == part["high_watermark"] == 2
        assert [(a["producer_id"], a["first_offset"]) for a in part["aborted_transactions"]] == [
            (pid, 0)
        ]
    assert aborted_values(broker.bootstrap, topic_name, 1) == ["gone"]
    assert_read_committed_shows(broker, topic_name, 1, [])


def test_what_the_mock_cluster_gets_wrong(mock_cluster, topic_name):
    """librdkafka's mock: InitProducerId on a transactional id with an open transaction
    gives a new producer id at epoch 0 and leaves the transaction open (no ABORT marker),
    and Fetch reports the high watermark as the last stable offset meanwhile. Why the
    exactly-once tests run on Apache Kafka and the mock only injects errors."""
    mock_cluster.create_topic(topic_name, 1, 1)
    tid = f"tx-{uuid.uuid4().hex[:8]}"
    with KafkaClient(bootstrap_servers=mock_cluster.bootstrap) as client:
        client.metadata([topic_name])
        pid, epoch = txn.init_producer_id(client, tid, 60000)
        produce_in_txn(client, tid, pid, epoch, topic_name, b"open")
        pid2, epoch2 = txn.init_producer_id(client, tid, 60000)
        assert pid2 != pid and epoch2 == 0  # Kafka: the same id, epoch + 1
        part = client.fetch({(topic_name, 0): 0}, isolation_level=1)[(topic_name, 0)]
        assert part["high_watermark"] == 1  # no ABORT marker was written
        assert part["last_stable_offset"] == 1  # Kafka: 0, the open transaction's start
    assert open_transactions(mock_cluster.bootstrap, topic_name, 1) == [
        f"partition 0: producer {pid} epoch {epoch} from offset 0 (1 records, no marker after them)"
    ]


def test_the_driver_commit_looks_each_coordinator_up_once(proxied_kafka, topic_name):
    """The driver's commit of a micro-batch of three tasks (a marker read, AddOffsetsToTxn,
    TxnOffsetCommit and EndTxn per task, then the fencing of the next attempts), through the
    fault proxy, which keeps the FindCoordinator requests: one per transactional id and
    marker group, not one before every request (about ten per task before)."""
    from protocol.schemas import FIND_COORDINATOR

    proxy, broker = proxied_kafka
    proxy.reset()
    create(broker, topic_name, 3)
    prefix = f"eos-{uuid.uuid4().hex[:8]}"
    messages = [
        task(broker, topic_name, prefix, f"t{p}", 10, partition_id=p, batch_id=0) for p in range(3)
    ]
    proxy.keep_requests(FIND_COORDINATOR.key)
    try:
        with KafkaClient(bootstrap_servers=proxy.bootstrap) as client:
            counts = commit_transactions(client, options(proxy, topic_name), prefix, messages, 0)
        lookups = len(proxy.kept)
    finally:
        proxy.reset()
    assert counts["committed"] == 3
    # each task: its transactional id, its marker group, the next attempt's id (fenced)
    assert lookups <= 3 * 3, f"{lookups} FindCoordinator requests for 3 tasks"
    assert_read_committed_shows(
        broker, topic_name, 3, values("t0", 10) + values("t1", 10) + values("t2", 10)
    )
