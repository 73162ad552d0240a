"""What the sink's error codes mean for the user, naming the option to change or the grant
to ask for (the words of an authorization failure are ``protocol.authorization``'s)."""

from __future__ import annotations

from protocol.authorization import GROUP, TOPIC, TRANSACTIONAL_ID, refine
from protocol.errors import BrokerError

__all__ = ["transaction_hint", "exactly_once_grant", "WRITE_GRANT"]

#: What a write needs on its topics (Kafka takes Write for Describe; both are named).
WRITE_GRANT = ("Write", "Describe")
UNSUPPORTED = frozenset({35, 42})  # UNSUPPORTED_VERSION, INVALID_REQUEST
TIMED_OUT_OR_FENCED = frozenset({47, 48, 49, 90})  # epoch, txn state, id mapping, fenced
INVALID_TRANSACTION_TIMEOUT = 50


def exactly_once_grant(error: BaseException, prefix: str) -> BaseException:
    """``error`` (``protocol.authorization.refine``) with the grant exactlyOnce needs for
    the resource refused, its ids and groups all under ``prefix`` (the resolved
    transactionalIdPrefix; a batch write's ids add a job token after it): Write and
    Describe on the transactional ids and (streams) Read on the groups that start with it,
    Write and Describe on the topics written, and Read on the topic that holds a stream's
    micro-batch marker (Kafka's TxnOffsetCommit wants it). Other errors are returned
    unchanged."""
    details = getattr(error, "authorization", None)
    if details is None:
        return error
    if details.resource_type == TRANSACTIONAL_ID:
        return refine(
            error,
            grant=WRITE_GRANT,
            on=f"transactional ids starting with {prefix!r} (a prefixed ACL: "
            f"every task's id starts with the transactionalIdPrefix)",
            advice="or choose a transactionalIdPrefix the principal may use",
        )
    if details.resource_type == GROUP:
        return refine(
            error,
            grant=("Read",),
            on=f"groups starting with {prefix!r} (a prefixed ACL): an exactlyOnce "
            f"stream records each committed micro-batch in the group "
            f"'{prefix}-<Spark partition>'",
        )
    if details.resource_type == TOPIC and details.request == "TxnOffsetCommit":
        return refine(
            error,
            grant=("Read",),
            advice="an exactlyOnce stream records each micro-batch's id as an "
            "offset of partition 0 of the topic it writes (Kafka's "
            "TxnOffsetCommit wants Read on that topic)",
        )
    if details.resource_type == TOPIC and details.request in ("AddPartitionsToTxn", "Produce"):
        return refine(error, grant=WRITE_GRANT)
    return error


def transaction_hint(error: BrokerError, txn_id: str | None, prefix: str | None = None) -> str:
    """``error`` with what to do about it; ``prefix``: the transactionalIdPrefix option
    (by default the part of ``txn_id`` before its partition and attempt)."""
    code = getattr(error, "code", None)
    where = f"transactional id {txn_id!r}"
    if getattr(error, "authorization", None) is not None:
        if prefix is None:
            prefix = txn_id.rsplit("-", 2)[0] if txn_id else ""
        return str(exactly_once_grant(error, prefix))
    if code == INVALID_TRANSACTION_TIMEOUT:
        return (
            f"{error}: kafka.transaction.timeout.ms is above the broker's "
            f"transaction.max.timeout.ms; lower kafka.transaction.timeout.ms"
        )
    if code in UNSUPPORTED:
        return (
            f"{error}: the broker does not support transactions for {where}; set exactlyOnce=false"
        )
    if code in TIMED_OUT_OR_FENCED:
        return (
            f"{error}: the transaction of {where} is no longer open: the broker aborted "
            f"it after kafka.transaction.timeout.ms (raise kafka.transaction.timeout.ms "
            f"above the time from a task's start to the driver's commit), or another "
            f"writer with the same transactionalIdPrefix fenced it (give every query its "
            f"own transactionalIdPrefix). Nothing of this transaction became visible"
        )
    return f"{error} ({where})"
