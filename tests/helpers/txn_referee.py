"""Referees for exactly-once tests on Apache Kafka: what a read_committed reader must see,
and what Kafka itself says of the transactions afterwards.

- ``committed_values``: Kafka's rule applied to the log (read uncommitted, record by
  record): a transactional record counts once its producer's COMMIT marker follows it,
  never when an ABORT marker does, and not while its transaction is open (read again
  for a moment while one is: the markers follow EndTxn's answer). It judges the
  log itself, not the broker's AbortedTransactions list that the readers below rely on;
- ``aborted_values`` / ``open_transactions``: the transactions the log shows aborted, or
  open (no marker after them);
- ``stable_offsets_behind``: the partitions whose last stable offset has not reached the
  high watermark within a bounded wait. Kafka writes the markers after it answered
  EndTxn, so a read_committed reader may see a transaction open for a moment after its
  commit: the readers are compared once this is empty;
- ``librdkafka_read_committed``: confluent-kafka's consumer with
  ``isolation.level=read_committed``;
- ``kafka_unfinished_transactions`` / ``kafka_hanging_transactions`` /
  ``kafka_transactions_verdict``: Kafka's own ``TransactionsCommand`` (``list``: the
  coordinator's state of each transactional id; ``find-hanging``: open transactions on the
  partitions that the coordinator does not know of);
- ``kafka_of_transaction_version``: the cluster of a ``transaction.version`` (KIP-890).
"""

from __future__ import annotations

import concurrent.futures
import time

import confluent_kafka

from protocol.client.cluster import KafkaClient
from protocol.records.batch import (
    ABORT,
    COMMIT,
    control_type,
    iter_batches,
    parse_header,
)
from protocol.records.reference_decode import parse_records

TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"
#: The coordinator's states of a transaction that has not ended (KIP-664's listing).
UNFINISHED_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})
#: States Kafka leaves only by itself, after writing markers (not an open transaction).
TRANSIENT_STATES = UNFINISHED_STATES - {"Ongoing"}


def log_of(bootstrap: str, topic: str, partitions: int, from_earliest: bool = False):
    """Every batch of the topic: [(partition, header, records)] in log order (from offset
    0, or with ``from_earliest`` from the log start offset: a log that dropped its start)."""
    out = []
    with KafkaClient(bootstrap_servers=bootstrap) as client:
        for p in range(partitions):
            end = client.latest_offsets([(topic, p)])[(topic, p)]
            offset = client.earliest_offsets([(topic, p)])[(topic, p)] if from_earliest else 0
            while offset < end:
                part = client.fetch({(topic, p): offset})[(topic, p)]
                data = bytes(part["records"] or b"")
                moved = False
                for pos, _base, size, _ in iter_batches(data):
                    h = parse_header(data, pos)
                    if h.base_offset + h.last_offset_delta < offset:
                        continue
                    out.append((p, h, parse_records(data[pos + 61 : pos + size], h)))
                    offset = h.base_offset + h.last_offset_delta + 1
                    moved = True
                if not moved:
                    break
    return out


def committed_values(
    bootstrap: str, topic: str, partitions: int, settle_s: float = 10.0
) -> list[str]:
    """The values a Kafka broker shows read_committed readers, by Kafka's rule. Kafka
    writes a transaction's markers after it answered EndTxn, so while the log shows an
    open transaction the log is read again, for up to ``settle_s`` seconds (0: the log as
    it is now, for a test that expects a transaction left open)."""
    deadline = time.monotonic() + settle_s
    while True:
        visible, still_open = _visible_by_kafkas_rule(log_of(bootstrap, topic, partitions))
        if not still_open or time.monotonic() >= deadline:
            return visible
        time.sleep(0.1)  # a wait helper's poll; what is left is its answer


def _visible_by_kafkas_rule(log) -> tuple[list[str], bool]:
    """(the values a read_committed reader sees, whether a transaction is still open)."""
    visible, open_txn = [], {}
    for p, h, records in log:
        if h.attributes & 0x20:  # control batch
            kind = control_type(records[0].key)
            pending = open_txn.pop((p, h.producer_id), [])
            if kind == COMMIT:
                visible.extend(pending)
            else:
                assert kind == ABORT
            continue
        values = [r.value.decode() for r in records]
        if h.attributes & 0x10:
            open_txn.setdefault((p, h.producer_id), []).extend(values)
        else:
            visible.extend(values)
    return visible, bool(open_txn)


def aborted_values(bootstrap: str, topic: str, partitions: int) -> list[str]:
    """Values of transactions that ended with an ABORT marker."""
    aborted, open_txn = [], {}
    for p, h, records in log_of(bootstrap, topic, partitions):
        if h.attributes & 0x20:
            pending = open_txn.pop((p, h.producer_id), [])
            if control_type(records[0].key) == ABORT:
                aborted.extend(pending)
        elif h.attributes & 0x10:
            open_txn.setdefault((p, h.producer_id), []).extend(r.value.decode() for r in records)
    return aborted


def open_transactions(bootstrap: str, topic: str, partitions: int) -> list[str]:
    """The transactions the log leaves open, by Kafka's rule: a producer's transactional
    batches on a partition with no COMMIT or ABORT marker of that producer after them.
    Each is described (partition, producer, epoch, first offset, records), so a failing
    assertion names what was left open; empty when nothing is. Markers come after EndTxn
    is answered: call it once ``stable_offsets_behind`` is empty, or expect a moment's lag."""
    opened: dict[tuple[int, int], list] = {}
    for p, h, records in log_of(bootstrap, topic, partitions):
        if h.attributes & 0x20:
            opened.pop((p, h.producer_id), None)
        elif h.attributes & 0x10:
            entry = opened.setdefault((p, h.producer_id), [h.producer_epoch, h.base_offset, 0])
            entry[2] += len(records)
    return [
        f"partition {p}: producer {pid} epoch {epoch} from offset {first} "
        f"({count} records, no marker after them)"
        for (p, pid), (epoch, first, count) in sorted(opened.items())
    ]


def nothing_left_open(bootstrap: str, topic: str, partitions: int) -> bool:
    """No transaction is left open on the topic (see ``open_transactions``)."""
    return not open_transactions(bootstrap, topic, partitions)


def stable_offsets_behind(
    bootstrap: str, topic: str, partitions: int, wait_s: float = 10.0
) -> list[str]:
    """The partitions whose last stable offset (a read_committed Fetch's answer) is still
    below the high watermark after polling for up to ``wait_s`` seconds; empty once every
    partition's reaches it. Kafka writes the markers after EndTxn is answered, so a
    read_committed reader may see a transaction open for a moment after its commit;
    read_committed readers are compared only once this is empty."""
    deadline = time.monotonic() + wait_s
    with KafkaClient(bootstrap_servers=bootstrap) as client:
        while True:
            behind = []
            for p in range(partitions):
                part = client.fetch({(topic, p): 0}, isolation_level=1)[(topic, p)]
                lso, hwm = part["last_stable_offset"], part["high_watermark"]
                if lso != hwm:
                    behind.append(f"partition {p}: last stable offset {lso}, high watermark {hwm}")
            if not behind or time.monotonic() > deadline:
                return behind
            time.sleep(0.2)  # a wait helper's poll; what is left is its answer


def librdkafka_read_committed(
    bootstrap: str, topic: str, partitions: int, idle_s: float = 3.0
) -> list[str]:
    """Values confluent-kafka's read_committed consumer returns, from the start, until
    it has been idle for ``idle_s`` seconds (a polling end, not a timed assertion)."""
    c = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "referee",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        got, idle_until = [], time.monotonic() + idle_s
        while time.monotonic() < idle_until:
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            got.append(m.value().decode())
            idle_until = time.monotonic() + idle_s
        return got
    finally:
        c.close()


# ---- Kafka's own view: kafka.tools.TransactionsCommand -------------------------------------


def _table(output: str) -> list[dict[str, str]]:
    """The rows of a table Kafka's tools print (tab-separated, a header line first)."""
    lines = [line for line in output.splitlines() if line.strip()]
    if not lines:
        return []
    header = [h.strip() for h in lines[0].split("\t")]
    return [dict(zip(header, (c.strip() for c in line.split("\t")))) for line in lines[1:]]


def kafka_transaction_states(cluster, prefix: str) -> dict[str, str]:
    """``TransactionsCommand list``: the coordinator's state of every transactional id
    starting with ``prefix`` (``Empty``, ``Ongoing``, ``CompleteCommit``, ...)."""
    run = cluster.tool(TRANSACTIONS_COMMAND, "--bootstrap-server", cluster.bootstrap, "list")
    return {
        row["TransactionalId"]: row["TransactionState"]
        for row in _table(run.stdout)
        if row.get("TransactionalId", "").startswith(prefix)
    }


def kafka_unfinished_transactions(cluster, prefix: str, wait_s: float = 20.0) -> list[str]:
    """The transactional ids starting with ``prefix`` that Kafka's coordinator has not
    ended (``Ongoing``, ``Prepare...``), as ``"id: state"``; empty when none. A
    ``Prepare...`` state is Kafka still writing its markers, so it is asked again (bounded
    by ``wait_s``); an ``Ongoing`` one is an open transaction and answered at once."""
    deadline = time.monotonic() + wait_s
    while True:
        states = kafka_transaction_states(cluster, prefix)
        unfinished = sorted(
            f"{tid}: {state}" for tid, state in states.items() if state in UNFINISHED_STATES
        )
        transient = any(state in TRANSIENT_STATES for state in states.values())
        if not transient or time.monotonic() > deadline:
            return unfinished
        time.sleep(0.5)  # a wait helper's poll; what is left is its answer


def kafka_hanging_transactions(cluster, topic: str, broker_id: int = 1) -> list[str]:
    """``TransactionsCommand find-hanging --broker-id 1`` on ``topic``'s partitions: open
    transactions there (of any age: ``--max-transaction-timeout 0``) that their
    coordinator does not list as writing to that partition. Empty when none."""
    run = cluster.tool(
        TRANSACTIONS_COMMAND,
        "--bootstrap-server",
        cluster.bootstrap,
        "find-hanging",
        "--broker-id",
        str(broker_id),
        "--topic",
        topic,
        "--max-transaction-timeout",
        "0",
    )
    return [" ".join(f"{k}={v}" for k, v in row.items()) for row in _table(run.stdout)]


def kafka_transactions_verdict(cluster, topic: str, prefix: str) -> list[str]:
    """What Kafka's tools find wrong after a scenario: transactions of ``prefix`` its
    coordinator has not ended, and hanging transactions on ``topic``; empty when none.
    Both tools (a JVM each) run at once."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        unfinished = pool.submit(kafka_unfinished_transactions, cluster, prefix)
        hanging = pool.submit(kafka_hanging_transactions, cluster, topic)
        return [f"unfinished: {line}" for line in unfinished.result()] + [
            f"hanging: {line}" for line in hanging.result()
        ]


def kafka_of_transaction_version(request, version: int):
    """The Apache Kafka cluster of ``transaction.version`` ``version`` for a test: the
    session's ``kafka`` (4.x's default, 2) or a shared one formatted with 1."""
    if version == 2:
        return request.getfixturevalue("kafka")
    return request.getfixturevalue("kafka_clusters").get(transaction_version=version)
