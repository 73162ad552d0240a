"""A restarted exactly-once stream fences the open transactions its crashed run left.

The ids of a stream's tasks are ``{prefix}-{partition}-{attempt}``, the same in every run.
A re-run micro-batch with fewer tasks than the crashed run, or an attempt more than one
above the winner's, leaves an id that no task of the batch takes again and the driver's
fencing does not name: its transaction stayed open until ``kafka.transaction.timeout.ms``
(60 s) and read_committed readers of its partitions stood still. The driver's streaming
commit now lists the Ongoing transactions of every broker (ListTransactions, Kafka 3.0+)
and fences those of its own task ids.

Here, without Spark, on Apache Kafka: the listing itself (by Kafka's TransactionsCommand
too, and across the coordinators of a 3-node cluster); the crashed run simulated by task
transactions left open, then the re-run's commit with one task, on the newest Kafka (the
broker filters by the ids' pattern, ListTransactions v2) and on the oldest pinned Kafka
(v1: the driver filters); and on librdkafka's mock cluster, which does not speak
ListTransactions, the commit going on without it, as behind a proxy that turns every
answer into an error (one warning per query, not per micro-batch).
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
import uuid

import pytest

from kafka_sink.transactions import commit_transactions
from kafka_testbed import OLDEST_KAFKA
from protocol.client import transactions as txn
from protocol.client.cluster import KafkaClient
from protocol.errors import BrokerError
from protocol.client.group_offsets import TRANSACTION_KEY
from protocol.schemas import LIST_TRANSACTIONS

from .helpers.broker_setup import create_topic
from .helpers.transactions import (
    assert_read_committed_shows,
    commit,
    create,
    options,
    produce_in_txn,
    task,
    values,
)
from .helpers.txn_referee import (
    aborted_values,
    committed_values,
    kafka_transaction_states,
    open_transactions,
    stable_offsets_behind,
)


def open_in_txn(client, tid: str, topic: str) -> tuple[int, int]:
    """A transaction of ``tid`` left open with one record (its id) on partition 0 of
    ``topic``; returns its producer id and epoch."""
    pid, epoch = txn.init_producer_id(client, tid, 60000)
    produce_in_txn(client, tid, pid, epoch, topic, tid.encode())
    return pid, epoch


def test_open_transactional_ids_lists_ongoing_transactions_only(kafka, topic_name):
    """Two transactions left open, one id initialised without a transaction: the listing
    names the two (Kafka's TransactionsCommand sees the same states), a pattern keeps the
    broker's answer to the ids it matches (v2), and once one is committed and the other
    aborted neither is listed."""
    create(kafka, topic_name, 1)
    base = f"lt-{uuid.uuid4().hex[:8]}"
    kept, dropped, idle = f"{base}-kept", f"{base}-dropped", f"{base}-idle"
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        client.metadata([topic_name])
        opened = {tid: open_in_txn(client, tid, topic_name) for tid in (kept, dropped)}
        txn.init_producer_id(client, idle, 60000)
        listed = txn.open_transactional_ids(client)
        assert {kept, dropped} <= listed and idle not in listed
        assert kafka_transaction_states(kafka, base) == {
            kept: "Ongoing",
            dropped: "Ongoing",
            idle: "Empty",
        }
        conn = client.connection(min(client.metadata().brokers))
        assert conn.version_for(LIST_TRANSACTIONS) == 2
        assert txn.open_transactional_ids(client, f"^{re.escape(kept)}$") == {kept}

        txn.end_txn(client, kept, *opened[kept], True)
        txn.end_txn(client, dropped, *opened[dropped], False)
        listed = txn.open_transactional_ids(client)
        assert kept not in listed and dropped not in listed
    assert committed_values(kafka.bootstrap, topic_name, 1) == [kept]


def test_open_transactional_ids_asks_every_coordinator(kafka_clusters, topic_name):
    """On three nodes the transactional ids are spread over coordinators (the leaders of
    __transaction_state's partitions), each of which lists only its own: the listing asks
    every broker and finds every id."""
    cluster = kafka_clusters.get(nodes=3)
    create(cluster, topic_name, 1)
    base = f"lt3-{uuid.uuid4().hex[:8]}"
    with KafkaClient(bootstrap_servers=cluster.bootstrap) as client:
        client.metadata([topic_name])
        by_node: dict[int, list[str]] = {}
        for tid in (f"{base}-{i}" for i in range(24)):  # all 24 on one node: 3**-23
            by_node.setdefault(client.coordinator(tid, TRANSACTION_KEY).node_id, []).append(tid)
        assert len(by_node) >= 2, by_node
        tids = [tid for ids in by_node.values() for tid in ids[:3]]
        opened = {tid: open_in_txn(client, tid, topic_name) for tid in tids}
        assert set(tids) <= txn.open_transactional_ids(client)
        for tid, (pid, epoch) in opened.items():
            txn.end_txn(client, tid, pid, epoch, False)
        assert not set(tids) & txn.open_transactional_ids(client)


@pytest.fixture(params=["newest", "oldest"])
def any_kafka(request):
    """The session's Kafka (ListTransactions v2: the broker filters by pattern) and the
    oldest pinned one, 3.9 (v1: every Ongoing id comes back, the driver filters)."""
    if request.param == "newest":
        return request.getfixturevalue("kafka")
    return request.getfixturevalue("kafka_clusters").get(version=OLDEST_KAFKA)


def test_a_restarted_stream_fences_what_its_crashed_run_left_open(any_kafka, topic_name, caplog):
    """The crashed run of micro-batch 5 had tasks 0 and 1 (and a zombie attempt 3 of
    partition 0), all wrote and none was committed. The re-run plans one task: its
    InitProducerId aborts ``P-0-0``'s transaction, and the driver's commit fences
    ``P-1-0`` and ``P-0-3``, which no task of the batch took again. read_committed
    readers reach the end of both partitions at once (not after the 60 s transaction
    timeout) and see the re-run's rows only; the crashed run's are aborted. Open
    transactions of other prefixes stay open: one that extends the prefix's text
    (``Pother-1-0``) and one whose id ends like a task's under a longer prefix
    (``P-x-1-0``)."""
    broker = any_kafka
    create(broker, topic_name, 2)
    others_topic = f"{topic_name}-others"
    create(broker, others_topic, 1)
    prefix = f"eos-{uuid.uuid4().hex[:8]}"
    for p in (0, 1):
        task(broker, topic_name, prefix, f"crashed{p}", 10, partition_id=p, batch_id=5)
    task(broker, topic_name, prefix, "zombie", 10, partition_id=0, attempt=3, batch_id=5)
    others = [f"{prefix}other-1-0", f"{prefix}-x-1-0"]
    with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        client.metadata([others_topic])
        other_txns = {tid: open_in_txn(client, tid, others_topic) for tid in others}
    try:
        assert len(stable_offsets_behind(broker.bootstrap, topic_name, 2, wait_s=0)) == 2

        rerun = task(broker, topic_name, prefix, "rerun", 10, partition_id=0, batch_id=5)
        caplog.set_level(logging.INFO, logger="pykafka.sink")
        started = time.monotonic()
        assert commit(broker, topic_name, prefix, [rerun], 5) == {
            "committed": 1,
            "replayed": 0,
            "skipped": 0,
        }
        assert stable_offsets_behind(broker.bootstrap, topic_name, 2, wait_s=5) == []
        assert time.monotonic() - started < 15  # the transaction timeout is 60 s
        assert_read_committed_shows(broker, topic_name, 2, values("rerun", 10))
        assert sorted(aborted_values(broker.bootstrap, topic_name, 2)) == sorted(
            values("crashed0", 10) + values("crashed1", 10) + values("zombie", 10)
        )
        fenced = [r.getMessage() for r in caplog.records if "fenced 2 open" in r.getMessage()]
        assert len(fenced) == 1 and f"{prefix}-0-3, {prefix}-1-0" in fenced[0], fenced

        assert len(open_transactions(broker.bootstrap, others_topic, 1)) == 2
        with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
            assert set(others) <= txn.open_transactional_ids(client)
    finally:  # best effort: a fenced one (a failure above) cannot be ended
        with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
            for tid, (pid, epoch) in other_txns.items():
                with contextlib.suppress(BrokerError):
                    txn.end_txn(client, tid, pid, epoch, False)


def test_a_batch_write_leaves_other_transactions_of_its_prefix_alone(kafka, topic_name):
    """A batch write's commit (no micro-batch id) lists nothing and fences nothing beyond
    its own tasks' attempts: other jobs may share the transactionalIdPrefix and run at the
    same time, and a transaction under ``P-1-0`` stays open."""
    create(kafka, topic_name, 2)
    prefix = f"eos-{uuid.uuid4().hex[:8]}"
    other = task(kafka, topic_name, prefix, "other", 10, partition_id=1)
    mine = task(kafka, topic_name, prefix, "mine", 10, partition_id=0)
    assert commit(kafka, topic_name, prefix, [mine])["committed"] == 1
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        assert other.transaction.transactional_id in txn.open_transactional_ids(client)
    assert commit(kafka, topic_name, prefix, [other])["committed"] == 1
    assert_read_committed_shows(kafka, topic_name, 2, values("mine", 10) + values("other", 10))


def test_a_broker_without_list_transactions_is_skipped(mock_cluster, topic_name, caplog):
    """librdkafka's mock cluster does not speak ListTransactions (nor do Kafka brokers
    before 3.0): a stream's commit warns once per broker connection, skips the listing
    and commits as before; the next micro-batch's commit on the same (pooled) client does
    not warn again."""
    create_topic(mock_cluster, topic_name, 1)
    prefix = f"eos-{uuid.uuid4().hex[:8]}"
    caplog.set_level(logging.WARNING, logger="pykafka")

    def warnings() -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if "does not support ListTransactions" in r.getMessage()
        ]

    with KafkaClient(bootstrap_servers=mock_cluster.bootstrap) as client:
        for batch_id, tag in ((2, "x"), (3, "y")):
            message = task(mock_cluster, topic_name, prefix, tag, 10, batch_id=batch_id)
            counts = commit_transactions(
                client, options(mock_cluster, topic_name), prefix, [message], batch_id
            )
            assert counts["committed"] == 1
            assert len(warnings()) == 3, warnings()  # the mock's three brokers, once
    assert committed_values(mock_cluster.bootstrap, topic_name, 1) == (
        values("x", 10) + values("y", 10)
    )


def _busy(frame: bytearray, version: int) -> bytearray:
    """A ListTransactions answer turned into COORDINATOR_LOAD_IN_PROGRESS: its error code
    sits after the size, the correlation id, the header's tagged fields (one byte, none)
    and throttle_time_ms."""
    frame[13:15] = (14).to_bytes(2, "big")
    return frame


def test_a_broker_that_cannot_list_is_a_warning_once_a_query(proxied_kafka, topic_name, caplog):
    """A broker whose answer to the stream's ListTransactions is an error at every
    micro-batch's commit (the proxy makes it COORDINATOR_LOAD_IN_PROGRESS): the
    micro-batches commit; the skipped broker is one warning per query (it was one per
    micro-batch), then debug lines that count; another query (another prefix) warns
    again."""
    proxy, cluster = proxied_kafka
    proxy.reset()
    create(cluster, topic_name, 1)
    first, second = (f"eos-{uuid.uuid4().hex[:8]}" for _ in range(2))
    caplog.set_level(logging.DEBUG, logger="pykafka.sink")
    proxy.rewrite_response(LIST_TRANSACTIONS.key, _busy, count=3)
    try:
        with KafkaClient(bootstrap_servers=proxy.address) as client:
            for batch_id, prefix in ((1, first), (2, first), (1, second)):
                message = task(
                    cluster, topic_name, prefix, f"{prefix}-{batch_id}", 2, batch_id=batch_id
                )
                assert (
                    commit_transactions(
                        client, options(cluster, topic_name), prefix, [message], batch_id
                    )["committed"]
                    == 1
                )
        assert proxy.pending_rewrites(LIST_TRANSACTIONS.key) == 0
    finally:
        proxy.reset()
    skipped = [r for r in caplog.records if "open transactions: broker" in r.getMessage()]
    assert [r.levelno for r in skipped] == [logging.WARNING, logging.DEBUG, logging.WARNING]
    said = skipped[0].getMessage()
    assert said.startswith(
        "open transactions: broker 1 skipped (the open transactions it "
        "coordinates end by kafka.transaction.timeout.ms): "
        "[COORDINATOR_LOAD_IN_PROGRESS (14)]"
    ), said
    assert skipped[1].getMessage().endswith("(again: 1 times since the warning)")
    assert sorted(committed_values(cluster.bootstrap, topic_name, 1)) == sorted(
        values(f"{first}-1", 2) + values(f"{first}-2", 2) + values(f"{second}-1", 2)
    )
