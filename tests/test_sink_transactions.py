"""Exactly-once writes without Spark: tasks' transactions, the driver's commit, replays,
losing attempts, aborts, the errors that name an option, and the transaction requests
themselves.

Which broker: Tansu. librdkafka's mock cluster cannot show any of the transactional
behaviour (checked by ``test_what_the_mock_cluster_gets_wrong``): its InitProducerId hands
out a new producer id at epoch 0 every time and never aborts the open transaction of the
id, it accepts EndTxn and Produce under fenced epochs, it keeps no transactional offsets,
and its Fetch answers the high watermark as the last stable offset under an open
transaction. It serves only where a coordinator's error answer must be injected
(``push_request_errors``): a busy coordinator, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
PRODUCER_FENCED on EndTxn. A broker without transactions is Tansu behind the fault
proxy, which removes the transaction APIs from its ApiVersions answer. Neither broker
aborts a transaction when its timeout passes (see
``test_a_fenced_transaction_fails_the_commit_naming_the_timeout``).

What Tansu gets wrong (``test_what_tansu_gets_right_and_wrong``): it answers Fetch with
the right LastStableOffset, aborts the open transaction of an id on InitProducerId (ABORT
marker, epoch bumped) and fences old epochs on Produce (PRODUCER_FENCED), but it never
sends AbortedTransactions, so every read_committed reader (librdkafka's, ours) shows the
records of aborted transactions; it never aborts a transaction whose timeout passed; it
closes the connection on EndTxn with a fenced epoch instead of answering
PRODUCER_FENCED; it does not keep the metadata of committed offsets; and OffsetFetch with
require_stable does not wait for a pending transactional offset. So the tests judge what
became visible by Kafka's rule applied to the log (``txn_referee.committed_values``), and
by librdkafka's read_committed consumer and our reader wherever the log holds no aborted
transaction.
"""

from __future__ import annotations

import logging
import uuid

import pyarrow as pa
import pytest
from kafka_sink.batch_state import ProduceError
from kafka_sink.options import parse_writer_options
from kafka_sink.transactions import (StaleAttemptError, TransactionCommitError,
                                     abort_transactions, commit_transactions, committed_batch,
                                     job_prefix)
from kafka_sink.validation import WritePlan
from kafka_sink.writer import create_writer, write_task
from protocol import transactions as txn
from protocol.cluster import KafkaClient
from protocol.errors import ConfigError
from protocol.framing import decode_response_header
from protocol.records.encode_arrow import encode_batch
from protocol.schemas import API_VERSIONS

from .broker_setup import create_topic, tansu_behind_fault_proxy
from .txn_referee import (aborted_values, committed_values, librdkafka_read_committed,
                          open_transactions, stable_offsets_behind)

INIT_PRODUCER_ID_KEY, END_TXN_KEY = 22, 26


def create(broker, topic, partitions=2):
    with KafkaClient(bootstrap_servers=broker.bootstrap) as c:
        c.create_topics({topic: partitions})


def produce_in_txn(client, tid, pid, epoch, topic, value: bytes) -> None:
    """Partition 0 of ``topic`` joins the open transaction and gets one record, ``value``."""
    txn.add_partitions(client, tid, pid, epoch, [(topic, 0)])
    client.produce(topic, 0, encode_batch(None, pa.array([value]), producer_id=pid,
                                          producer_epoch=epoch, base_sequence=0,
                                          transactional=True), transactional_id=tid)


def options(broker, topic, **extra):
    return parse_writer_options({"kafka.bootstrap.servers": broker.bootstrap, "topic": topic,
                                 "exactlyOnce": "true", **extra})


def rows(tag, n):
    return pa.RecordBatch.from_arrays(
        [pa.array([b"k%d" % i for i in range(n)]),
         pa.array([f"{tag}-{i}".encode() for i in range(n)])], names=["key", "value"])


PLAN_KEY_VALUE = dict(topic_column=False, key_column=True, headers_column=False,
                      partition_column=False, timestamp_kind=None)


def task(broker, topic, prefix, tag, n, partition_id=0, attempt=0, batch_id=None,
         fresh_ids=False, **extra):
    plan = WritePlan(topic_option=topic, **PLAN_KEY_VALUE)
    return write_task(iter([rows(tag, n)]), options(broker, topic, **extra), plan,
                      prefix=prefix, task=(partition_id, attempt, batch_id),
                      fresh_ids=fresh_ids)


def values(tag, n):
    return [f"{tag}-{i}" for i in range(n)]


def commit(broker, topic, prefix, messages, batch_id=None):
    with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        return commit_transactions(client, options(broker, topic), prefix, messages,
                                   batch_id)


def test_nothing_is_visible_until_the_driver_commits(tansu, topic_name):
    """Two tasks write in open transactions: read_committed readers see nothing (Tansu's
    last stable offset stays below the open transactions), then the driver commits both
    and every row is visible, to librdkafka's read_committed consumer too."""
    create(tansu, topic_name)
    prefix = f"eos-{uuid.uuid4().hex[:8]}"
    m0 = task(tansu, topic_name, prefix, "a", 50, partition_id=0)
    m1 = task(tansu, topic_name, prefix, "b", 30, partition_id=1)
    assert m0.transaction.transactional_id == f"{prefix}-0-0" and m0.records == 50
    assert m0.transaction.marker is not None and not m0.transaction.skipped
    assert committed_values(tansu.bootstrap, topic_name, 2) == []
    assert librdkafka_read_committed(tansu.bootstrap, topic_name, 2, idle_s=1.5) == []
    with KafkaClient(bootstrap_servers=tansu.bootstrap) as c:
        lso = c.latest_offsets([(topic_name, 0), (topic_name, 1)])
        assert any(lso.values())  # the records are in the log, uncommitted
    left_open = open_transactions(tansu.bootstrap, topic_name, 2)
    assert {line.split(" from ")[0] for line in left_open} >= {
        f"partition {p}: producer {m.transaction.producer_id} epoch {m.transaction.epoch}"
        for m in (m0, m1) for p in (0, 1) if m.partitions.get((topic_name, p))}
    assert stable_offsets_behind(tansu.bootstrap, topic_name, 2, wait_s=0)

    counts = commit(tansu, topic_name, prefix, [m0, m1])
    assert counts["committed"] == 2
    expected = sorted(values("a", 50) + values("b", 30))
    assert sorted(committed_values(tansu.bootstrap, topic_name, 2)) == expected
    assert open_transactions(tansu.bootstrap, topic_name, 2) == []
    assert stable_offsets_behind(tansu.bootstrap, topic_name, 2) == []
    assert sorted(librdkafka_read_committed(tansu.bootstrap, topic_name, 2)) == expected


def test_a_replayed_micro_batch_is_written_once(tansu, topic_name):
    """Batch 7 commits (with its marker in the same transaction); the same batch run
    again after a restart: a task that sees the marker writes nothing; a task that wrote
    anyway (no batch id known to it) has its transaction aborted by the driver."""
    create(tansu, topic_name)
    prefix = f"eos-{uuid.uuid4().hex[:8]}"
    first = task(tansu, topic_name, prefix, "x", 20, partition_id=0, batch_id=7)
    assert commit(tansu, topic_name, prefix, [first], 7)["committed"] == 1
    with KafkaClient(bootstrap_servers=tansu.bootstrap) as client:
        assert committed_batch(client, prefix, 0) == 7
        assert committed_batch(client, prefix, 0, topic=topic_name) == 7
        assert committed_batch(client, prefix, 1, topic=topic_name) == -1

    again = task(tansu, topic_name, prefix, "x", 20, partition_id=0, batch_id=7)
    assert again.transaction.skipped and again.records == 0
    blind = task(tansu, topic_name, prefix, "x", 20, partition_id=0, attempt=1)
    counts = commit(tansu, topic_name, prefix, [again, blind], 7)
    assert counts == {"committed": 0, "replayed": 1, "skipped": 1}
    assert sorted(committed_values(tansu.bootstrap, topic_name, 2)) == sorted(values("x", 20))
    assert sorted(aborted_values(tansu.bootstrap, topic_name, 2)) == sorted(values("x", 20))

    nxt = task(tansu, topic_name, prefix, "y", 5, partition_id=0, batch_id=8)
    assert commit(tansu, topic_name, prefix, [nxt], 8)["committed"] == 1
    assert sorted(committed_values(tansu.bootstrap, topic_name, 2)) == sorted(
        values("x", 20) + values("y", 5))


def test_losing_attempts_are_aborted(tansu, topic_name):
    """Attempts 0 and 2 of partition 0 finish; Spark commits attempt 1 (a speculative
    copy, say). The driver commits attempt 1 and fences attempts 0 and 2: only attempt
    1's rows are visible, the others end in ABORT markers."""
    create(tansu, topic_name)
    prefix = f"eos-{uuid.uuid4().hex[:8]}"
    lost0 = task(tansu, topic_name, prefix, "lost0", 10, attempt=0)
    won = task(tansu, topic_name, prefix, "won", 10, attempt=1)
    lost2 = task(tansu, topic_name, prefix, "lost2", 10, attempt=2)
    assert lost0.transaction.transactional_id != won.transaction.transactional_id
    commit(tansu, topic_name, prefix, [won])
    assert sorted(committed_values(tansu.bootstrap, topic_name, 2)) == sorted(values("won", 10))
    assert sorted(aborted_values(tansu.bootstrap, topic_name, 2)) == sorted(
        values("lost0", 10) + values("lost2", 10))


def test_abort_leaves_nothing_visible(tansu, topic_name):
    """A failed job: the driver's abort aborts the finished tasks' transactions and
    fences the attempts of the failed one (None), whose transaction was left open."""
    create(tansu, topic_name)
    prefix = f"eos-{uuid.uuid4().hex[:8]}"
    done = task(tansu, topic_name, prefix, "done", 10, partition_id=0)
    failed = task(tansu, topic_name, prefix, "failed", 10, partition_id=1)  # never reported
    with KafkaClient(bootstrap_servers=tansu.bootstrap) as client:
        assert abort_transactions(client, options(tansu, topic_name), prefix,
                                  [done, None]) == 1
    assert committed_values(tansu.bootstrap, topic_name, 2) == []
    assert sorted(aborted_values(tansu.bootstrap, topic_name, 2)) == sorted(
        values("done", 10) + values("failed", 10))
    assert failed.transaction.partition_id == 1


def test_a_task_attempt_that_starts_after_the_driver_ended_the_job_writes_nothing(
        tansu, topic_name):
    """Spark calls a batch job's abort without waiting for its other running tasks, and a
    Python worker that starts late still gets the input Spark had already sent it: such
    an attempt opened its transaction after the driver's fencing and, with reusable ids,
    left it open (read_committed readers stall; the CI failure of the Spark test). A batch
    job's ids are its own (job_prefix), so the late attempt finds its id used (epoch 1)
    and writes nothing. The same for a losing attempt that starts after the commit."""
    create(tansu, topic_name)
    prefix = job_prefix(f"eos-{uuid.uuid4().hex[:8]}")
    with KafkaClient(bootstrap_servers=tansu.bootstrap) as client:
        abort_transactions(client, options(tansu, topic_name), prefix, [None, None])
    with pytest.raises(StaleAttemptError, match=f"{prefix}-1-0.*epoch 1"):
        task(tansu, topic_name, prefix, "late", 10, partition_id=1, fresh_ids=True)

    second = job_prefix(prefix.rsplit("-", 1)[0])  # the next job: ids of its own
    won = task(tansu, topic_name, second, "won", 10, partition_id=0, attempt=2,
               fresh_ids=True)
    commit(tansu, topic_name, second, [won])  # fences attempts 0, 1 and 3
    with pytest.raises(StaleAttemptError, match=f"{second}-0-3"):
        task(tansu, topic_name, second, "loser", 10, partition_id=0, attempt=3,
             fresh_ids=True)
    assert sorted(committed_values(tansu.bootstrap, topic_name, 2)) == sorted(
        values("won", 10))
    assert aborted_values(tansu.bootstrap, topic_name, 2) == []  # the late ones wrote nothing
    assert open_transactions(tansu.bootstrap, topic_name, 2) == []


def test_a_failing_task_aborts_its_own_transaction(tansu, topic_name):
    """A task's input fails after some of its records were sent (tiny batches and buffer
    make them go out at once): before the error goes to Spark the task aborts its
    transaction itself, so nothing is left open even before any driver acts."""
    create(tansu, topic_name)
    prefix = f"eos-{uuid.uuid4().hex[:8]}"

    def batches():
        yield rows("sent", 20)
        raise ValueError("the input fails")

    plan = WritePlan(topic_option=topic_name, **PLAN_KEY_VALUE)
    opts = options(tansu, topic_name,
                   **{"kafka.buffer.memory": "100", "kafka.batch.size": "100"})
    with pytest.raises(ValueError, match="the input fails"):
        write_task(batches(), opts, plan, prefix=prefix, task=(0, 0, None))
    aborted = aborted_values(tansu.bootstrap, topic_name, 2)
    assert aborted and set(aborted) <= set(values("sent", 20))  # what went out was aborted
    assert committed_values(tansu.bootstrap, topic_name, 2) == []
    assert open_transactions(tansu.bootstrap, topic_name, 2) == []


def test_a_fenced_transaction_fails_the_commit_naming_the_timeout(tansu, topic_name):
    """A micro-batch's task writes; before the driver commits, the transaction is aborted
    and its epoch bumped, which is what a Kafka coordinator does when
    kafka.transaction.timeout.ms passes. Neither broker here times a transaction out
    (found by experiment: a transaction opened with a 1000 ms timeout was still open 15 s
    later on Tansu and on librdkafka's mock), so a newer holder of the id does that
    abort, with Tansu's real fencing. The driver's commit is refused (Tansu answers the
    TxnOffsetCommit with PRODUCER_FENCED) and fails naming kafka.transaction.timeout.ms;
    the batch marker does not move and nothing of the task is visible."""
    create(tansu, topic_name)
    prefix = f"eos-{uuid.uuid4().hex[:8]}"
    late = task(tansu, topic_name, prefix, "late", 10, partition_id=0, batch_id=3)
    with KafkaClient(bootstrap_servers=tansu.bootstrap) as client:
        txn.init_producer_id(client, late.transaction.transactional_id, 60000)
    with pytest.raises(TransactionCommitError) as info:
        commit(tansu, topic_name, prefix, [late], 3)
    said = str(info.value)
    assert "PRODUCER_FENCED" in said and "kafka.transaction.timeout.ms" in said
    assert "Spark partition 0" in said and "transactionalIdPrefix" in said
    with KafkaClient(bootstrap_servers=tansu.bootstrap) as client:
        assert committed_batch(client, prefix, 0, topic=topic_name) == -1
    assert committed_values(tansu.bootstrap, topic_name, 2) == []
    assert sorted(aborted_values(tansu.bootstrap, topic_name, 2)) == sorted(
        values("late", 10))


def test_init_producer_id_retries_a_busy_coordinator(mock_cluster, topic_name, caplog):
    """CONCURRENT_TRANSACTIONS (the coordinator is still aborting the id's transaction),
    COORDINATOR_LOAD_IN_PROGRESS and NOT_COORDINATOR are retried, as Kafka's clients do,
    for the task's InitProducerId and for the driver's fencing alike (the same function)."""
    create_topic(mock_cluster, topic_name, 1)
    caplog.set_level(logging.DEBUG, logger="pykafka.protocol.cluster")
    mock_cluster.push_request_errors(INIT_PRODUCER_ID_KEY, [51, 14, 16])
    with KafkaClient(bootstrap_servers=mock_cluster.bootstrap, retry_backoff_ms=10) as c:
        pid, epoch = txn.init_producer_id(c, f"tx-{uuid.uuid4().hex[:8]}", 60000)
    assert pid >= 0 and epoch >= 0
    retried = [r.getMessage() for r in caplog.records if "retrying after" in r.getMessage()]
    for name in ("CONCURRENT_TRANSACTIONS", "COORDINATOR_LOAD_IN_PROGRESS",
                 "NOT_COORDINATOR"):
        assert sum(name in m for m in retried) == 1, retried


def test_an_unauthorized_transactional_id_fails_the_task_naming_the_prefix(mock_cluster,
                                                                           topic_name):
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
            (topic_name, 0): 0, (topic_name, 1): 0}  # nothing was written


@pytest.mark.parametrize("code, option", [
    (53, "transactionalIdPrefix"),  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    (90, "kafka.transaction.timeout.ms"),  # PRODUCER_FENCED: Kafka's answer after a timeout
], ids=["unauthorized", "timed out"])
def test_the_drivers_commit_names_the_option_when_the_broker_refuses(mock_cluster,
                                                                     topic_name, code,
                                                                     option):
    """A batch write's task writes; the coordinator refuses the driver's EndTxn (the mock
    answers what it is told: Kafka answers PRODUCER_FENCED to the EndTxn of a transaction
    it aborted after its timeout, and Tansu closes the connection instead). The job fails
    with an error naming the option to change, and the log holds no commit marker."""
    create_topic(mock_cluster, topic_name, 2)
    prefix = job_prefix(f"eos-{uuid.uuid4().hex[:8]}")
    done = task(mock_cluster, topic_name, prefix, "x", 10, fresh_ids=True)
    mock_cluster.push_request_errors(END_TXN_KEY, [code])
    with pytest.raises(TransactionCommitError) as info:
        commit(mock_cluster, topic_name, prefix, [done])
    assert option in str(info.value) and "Spark partition 0" in str(info.value)
    assert committed_values(mock_cluster.bootstrap, topic_name, 2) == []


def _without_transaction_apis(frame: bytearray, version: int):
    """An ApiVersions answer without AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and
    TxnOffsetCommit: a broker that does not support transactions."""
    view = memoryview(bytes(frame))[4:]
    _, pos = decode_response_header(API_VERSIONS, version, view)
    body, _ = API_VERSIONS.response.decode(version, view[pos:])
    body["api_keys"] = [k for k in body["api_keys"] if k["api_key"] not in (24, 25, 26, 28)]
    out = bytearray(frame[:4 + pos])
    API_VERSIONS.response.encode(version, body, out)
    out[:4] = (len(out) - 4).to_bytes(4, "big")
    return out


def test_a_broker_without_transactions_is_refused_when_the_writer_is_created(topic_name):
    """Tansu behind a proxy that removes the transaction APIs from its ApiVersions answer:
    creating an exactlyOnce writer (on the driver, before any task) fails naming
    exactlyOnce, and nothing is written."""
    from pyspark.sql.types import BinaryType, StructField, StructType
    with tansu_behind_fault_proxy() as (proxy, broker):
        create_topic(broker, topic_name, 1)
        proxy.rewrite_response(API_VERSIONS.key, _without_transaction_apis, count=10**6)
        schema = StructType([StructField("value", BinaryType())])
        with pytest.raises(ConfigError) as info:
            create_writer({"kafka.bootstrap.servers": proxy.address, "topic": topic_name,
                           "exactlyOnce": "true", "transactionalIdPrefix": "p"}, schema,
                          False)
        assert "exactlyOnce" in str(info.value) and "[24, 25, 26, 28]" in str(info.value)
        assert proxy.stats["rewrites"] >= 1
        with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
            assert client.fetch({(topic_name, 0): 0})[(topic_name, 0)]["high_watermark"] == 0


def test_transaction_requests_on_tansu(tansu, topic_name):
    """The protocol functions: InitProducerId aborts an open transaction (ABORT marker,
    epoch + 1), TxnOffsetCommit becomes the group's offset only at commit."""
    create(tansu, topic_name, 1)
    tid, group = f"tx-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    with KafkaClient(bootstrap_servers=tansu.bootstrap) as client:
        client.metadata([topic_name])
        pid, epoch = txn.init_producer_id(client, tid, 60000)
        produce_in_txn(client, tid, pid, epoch, topic_name, b"open")
        pid2, epoch2 = txn.init_producer_id(client, tid, 60000)
        assert (pid2, epoch2) == (pid, epoch + 1)
        assert aborted_values(tansu.bootstrap, topic_name, 1) == ["open"]
        produce_in_txn(client, tid, pid2, epoch2, topic_name, b"kept")
        txn.add_offsets(client, tid, pid2, epoch2, group)
        txn.txn_offset_commit(client, tid, pid2, epoch2, group, {(topic_name, 0): 42}, "m")
        txn.end_txn(client, tid, pid2, epoch2, True)
        assert txn.fetch_stable_offsets(client, group, None)[(topic_name, 0)][0] == 42
    assert committed_values(tansu.bootstrap, topic_name, 1) == ["kept"]


def test_what_tansu_gets_right_and_wrong(tansu, topic_name):
    """Under an open transaction Tansu's Fetch answers a last stable offset below the high
    watermark (right), and after an abort it sends no AbortedTransactions (wrong), so
    librdkafka's read_committed consumer shows the aborted record."""
    create(tansu, topic_name, 1)
    tid = f"tx-{uuid.uuid4().hex[:8]}"
    with KafkaClient(bootstrap_servers=tansu.bootstrap) as client:
        client.metadata([topic_name])
        pid, epoch = txn.init_producer_id(client, tid, 60000)
        produce_in_txn(client, tid, pid, epoch, topic_name, b"gone")
        part = client.fetch({(topic_name, 0): 0}, isolation_level=1)[(topic_name, 0)]
        assert (part["last_stable_offset"], part["high_watermark"]) == (0, 1)
        txn.end_txn(client, tid, pid, epoch, False)
        part = client.fetch({(topic_name, 0): 0}, isolation_level=1)[(topic_name, 0)]
        assert part["last_stable_offset"] == part["high_watermark"] == 2
        assert not part["aborted_transactions"]  # Kafka would list (pid, 0)
    assert committed_values(tansu.bootstrap, topic_name, 1) == []
    assert librdkafka_read_committed(tansu.bootstrap, topic_name, 1, idle_s=1.5) == ["gone"]


def test_what_the_mock_cluster_gets_wrong(mock_cluster, topic_name):
    """librdkafka's mock: InitProducerId on a transactional id with an open transaction
    gives a new producer id at epoch 0 and leaves the transaction open (no ABORT marker),
    and Fetch reports the high watermark as the last stable offset meanwhile. None of the
    exactly-once tests can run on it."""
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
    # the log still shows it open, which is why the referees judge by the log
    assert open_transactions(mock_cluster.bootstrap, topic_name, 1) == [
        f"partition 0: producer {pid} epoch {epoch} from offset 0 (1 records, no marker "
        f"after them)"]
