"""The transaction coordinator's requests, as functions over a ``KafkaClient``.

A Kafka transaction is a transactional id, the producer id and epoch InitProducerId gave
it, and a few requests to the coordinator of that id: AddPartitionsToTxn before the first
Produce to a partition, AddOffsetsToTxn + TxnOffsetCommit to put a group's offsets in the
same transaction, EndTxn to commit or abort. Nothing ties these requests to the client
that sent InitProducerId: whoever knows the id, producer id and epoch may finish the
transaction. ``kafka_sink`` relies on that: write tasks open transactions and the driver
ends them.

Versions: the classic transaction protocol (Kafka's "transaction version 1"). Since
Kafka 4.0 a client that sends EndTxn v5 or Produce v12 says it speaks version 2, in which
partitions join a transaction implicitly and every commit bumps the epoch; this client
adds partitions itself, so it caps AddPartitionsToTxn at v3, EndTxn at v4, TxnOffsetCommit
at v4 (Kafka's message definition: "If V2 is disabled, the client can't use TxnOffsetCommit
request version higher than 4 within a transaction") and (in ``kafka_sink``) transactional
Produce at v11, as Kafka's Java client does on clusters without version 2. InitProducerId
stays below v6 (two-phase commit, KIP-939; unstable in Kafka 4.x).

Every function of one transactional id retries what the coordinator answers while it is
busy or moving (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, ...)
within ``timeout_ms`` (the client's request timeout by default) and raises the
``BrokerError`` of anything else. ``open_transactional_ids`` asks every broker once
(ListTransactions, Kafka 3.0+) and skips, with a warning, a broker that cannot answer.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterable

from ..authorization import request_error
from ..errors import PyKafkaError
from .group_offsets import (
    TRANSACTION_KEY,
    commit_request_topics,
    fetch_offsets,
    raise_commit_errors,
)

__all__ = [
    "MAX_ADD_PARTITIONS_VERSION",
    "MAX_END_TXN_VERSION",
    "MAX_INIT_PRODUCER_ID_VERSION",
    "MAX_TXN_OFFSET_COMMIT_VERSION",
    "MAX_TXN_PRODUCE_VERSION",
    "init_producer_id",
    "add_partitions",
    "add_offsets",
    "txn_offset_commit",
    "end_txn",
    "fetch_stable_offsets",
    "open_transactional_ids",
]

log = logging.getLogger("pykafka.protocol.transactions")

TopicPartition = tuple[str, int]

MAX_ADD_PARTITIONS_VERSION = 3  # v4+ is for brokers
MAX_END_TXN_VERSION = 4  # v5 means transaction version 2
MAX_TXN_PRODUCE_VERSION = 11  # v12 means transaction version 2
MAX_TXN_OFFSET_COMMIT_VERSION = 4  # v5 means transaction version 2
MAX_INIT_PRODUCER_ID_VERSION = 5  # v6 is two-phase commit (KIP-939)


def _txn_request(
    client,
    txn_id: str,
    api,
    body: dict,
    what: str,
    timeout_ms=None,
    max_version: int | None = None,
    request: str | None = None,
) -> dict:
    def attempt():
        conn = client.coordinator(txn_id, TRANSACTION_KEY)
        response = conn.request(api, body, conn.version_for(api, max_version))
        code = response.get("error_code", 0)
        if code:
            raise request_error(
                code,
                request or what,
                f"{what} for transactional id {txn_id!r}",
                transactional_id=txn_id,
                group=body.get("group_id"),
            )
        return response

    return client.retrying(f"{what} for transactional id {txn_id!r}", attempt, timeout_ms)


def init_producer_id(
    client, txn_id: str, transaction_timeout_ms: int, *, timeout_ms: int | None = None
) -> tuple[int, int]:
    """InitProducerId for ``txn_id``: ``(producer_id, epoch)``. The coordinator aborts a
    transaction the id left open and bumps the epoch, fencing every earlier holder."""
    from ..schemas import INIT_PRODUCER_ID

    response = _txn_request(
        client,
        txn_id,
        INIT_PRODUCER_ID,
        {
            "transactional_id": txn_id,
            "transaction_timeout_ms": transaction_timeout_ms,
            "producer_id": -1,
            "producer_epoch": -1,
            "enable2_pc": False,
            "keep_prepared_txn": False,
        },
        "InitProducerId",
        timeout_ms,
        max_version=MAX_INIT_PRODUCER_ID_VERSION,
    )
    return response["producer_id"], response["producer_epoch"]


def add_partitions(
    client,
    txn_id: str,
    producer_id: int,
    epoch: int,
    tps: Iterable[TopicPartition],
    *,
    timeout_ms: int | None = None,
) -> None:
    """AddPartitionsToTxn: enlist ``tps`` before the first Produce to them."""
    from ..schemas import ADD_PARTITIONS_TO_TXN

    topics: dict[str, list[int]] = {}
    for t, p in sorted(set(tps)):
        topics.setdefault(t, []).append(p)
    body = {
        "v3_and_below_transactional_id": txn_id,
        "v3_and_below_producer_id": producer_id,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        "transactions": [],
    }

    def attempt():
        conn = client.coordinator(txn_id, TRANSACTION_KEY)
        version = conn.version_for(ADD_PARTITIONS_TO_TXN, MAX_ADD_PARTITIONS_VERSION)
        response = conn.request(ADD_PARTITIONS_TO_TXN, body, version)
        first = None
        for t in response["results_by_topic_v3_and_below"]:
            for p in t["results_by_partition"]:
                code = p["partition_error_code"]
                # OPERATION_NOT_ATTEMPTED (55) marks the partitions that were fine when
                # another partition of the request failed
                if code and code != 55 and (first is None or first.retriable):
                    first = request_error(
                        code,
                        "AddPartitionsToTxn",
                        f"AddPartitionsToTxn for transactional id {txn_id!r}",
                        topic=t["name"],
                        partition=p["partition_index"],
                        transactional_id=txn_id,
                    )
        if first is not None:
            raise first

    client.retrying(f"AddPartitionsToTxn for transactional id {txn_id!r}", attempt, timeout_ms)


def add_offsets(
    client, txn_id: str, producer_id: int, epoch: int, group: str, *, timeout_ms: int | None = None
) -> None:
    """AddOffsetsToTxn: the offsets of ``group`` will be part of the transaction."""
    from ..schemas import ADD_OFFSETS_TO_TXN

    _txn_request(
        client,
        txn_id,
        ADD_OFFSETS_TO_TXN,
        {
            "transactional_id": txn_id,
            "producer_id": producer_id,
            "producer_epoch": epoch,
            "group_id": group,
        },
        "AddOffsetsToTxn",
        timeout_ms,
    )


def txn_offset_commit(
    client,
    txn_id: str,
    producer_id: int,
    epoch: int,
    group: str,
    offsets: dict[TopicPartition, int],
    metadata: str | None = None,
    *,
    timeout_ms: int | None = None,
) -> None:
    """TxnOffsetCommit to ``group``'s coordinator: the offsets become the group's when the
    transaction commits, and are dropped if it aborts."""
    from ..schemas import TXN_OFFSET_COMMIT

    body = {
        "transactional_id": txn_id,
        "group_id": group,
        "producer_id": producer_id,
        "producer_epoch": epoch,
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": commit_request_topics(offsets, metadata),
    }

    def attempt():
        conn = client.coordinator(group)
        version = conn.version_for(TXN_OFFSET_COMMIT, MAX_TXN_OFFSET_COMMIT_VERSION)
        response = conn.request(TXN_OFFSET_COMMIT, body, version)
        raise_commit_errors(
            response,
            "TxnOffsetCommit",
            f"TxnOffsetCommit to group {group!r} for transactional id {txn_id!r}",
            group,
            txn_id,
        )

    client.retrying(f"TxnOffsetCommit to group {group!r}", attempt, timeout_ms)


def end_txn(
    client,
    txn_id: str,
    producer_id: int,
    epoch: int,
    commit: bool,
    *,
    timeout_ms: int | None = None,
) -> None:
    """EndTxn: commit (``commit=True``) or abort the transaction."""
    from ..schemas import END_TXN

    _txn_request(
        client,
        txn_id,
        END_TXN,
        {
            "transactional_id": txn_id,
            "producer_id": producer_id,
            "producer_epoch": epoch,
            "committed": commit,
        },
        "EndTxn commit" if commit else "EndTxn abort",
        timeout_ms,
        max_version=MAX_END_TXN_VERSION,
        request="EndTxn",
    )


def fetch_stable_offsets(
    client, group: str, tps: Iterable[TopicPartition] | None, *, timeout_ms: int | None = None
) -> dict[TopicPartition, tuple[int, str | None]]:
    """The offsets and metadata ``group`` has committed for ``tps`` (``(-1, None)`` where
    none; every partition the group has when ``tps`` is None), asking the coordinator to
    wait for the transactions that write to them
    (``require_stable``: UNSTABLE_OFFSET_COMMIT, retried, while one is open)."""
    return fetch_offsets(client, group, tps, require_stable=True, timeout_ms=timeout_ms)


def open_transactional_ids(
    client,
    pattern: str | None = None,
    *,
    timeout_ms: int | None = None,
    skipped: dict | None = None,
) -> set[str]:
    """The transactional ids of the cluster's Ongoing transactions: ListTransactions to
    every broker (each answers for the ids it coordinates), all sent before any answer is
    read. ``pattern``, a regular expression the whole id must match, goes to brokers that
    take one (v2, KIP-1152) to keep their answers short; the caller still filters, as
    older brokers send every id.

    Best effort, one round: a broker that does not speak ListTransactions (Kafka before
    3.0, some stand-ins), cannot be reached or answers an error is skipped, and its
    transactions are missing from the result. A broker without ListTransactions is a
    warning once per connection; one that cannot be reached or answers an error is a
    warning, or with ``skipped`` (a dict) put there as node id -> error for the caller
    to say (a stream's commit lists at every micro-batch)."""
    from ..schemas import LIST_TRANSACTIONS

    body = {
        "state_filters": ["Ongoing"],
        "producer_id_filters": [],
        "duration_filter": -1,
        "transactional_id_pattern": pattern,
    }
    sent = []
    for node in sorted(client.metadata().brokers):
        try:
            conn = client.connection(node)
            if LIST_TRANSACTIONS.key not in conn.api_versions:
                _warn_once_per_connection(conn)
                continue
            version = conn.version_for(LIST_TRANSACTIONS)
            sent.append((node, conn, conn.send(LIST_TRANSACTIONS, body, version)))
        except PyKafkaError as e:
            _skip(skipped, node, e, "ListTransactions not sent")
    found: set[str] = set()
    for node, conn, correlation_id in sent:
        try:
            response = conn.receive(correlation_id, timeout_ms)
            if response["error_code"]:
                raise request_error(response["error_code"], "ListTransactions", "ListTransactions")
        except PyKafkaError as e:
            _skip(skipped, node, e, "no answer used")
            continue
        found.update(
            t["transactional_id"]
            for t in response["transaction_states"]
            if t["transaction_state"] == "Ongoing"
        )
    return found


def _skip(skipped: dict | None, node: int, error: BaseException, what: str) -> None:
    if skipped is None:
        log.warning("open transactions: broker %s skipped (%s): %s", node, what, error)
    else:
        skipped[node] = error


#: The connections already warned about (weak: one that is gone drops out).
_WARNED: weakref.WeakSet[object] = weakref.WeakSet()


def _warn_once_per_connection(conn) -> None:
    """A broker without ListTransactions stays without it: warn once per connection (a
    pooled client keeps its connections), not at every micro-batch's commit."""
    level = logging.DEBUG if conn in _WARNED else logging.WARNING
    _WARNED.add(conn)
    log.log(
        level,
        "open transactions: broker %s:%s does not support ListTransactions "
        "(Kafka 3.0+): skipped, its open transactions end by their timeout",
        conn.host,
        conn.port,
    )
