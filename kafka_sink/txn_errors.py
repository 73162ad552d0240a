"""What a transaction's error codes mean for the user, naming the option to change."""

from __future__ import annotations

from protocol.errors import BrokerError

__all__ = ["transaction_hint"]

TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
UNSUPPORTED = frozenset({35, 42})  # UNSUPPORTED_VERSION, INVALID_REQUEST
TIMED_OUT_OR_FENCED = frozenset({47, 48, 49, 90})  # epoch, txn state, id mapping, fenced
INVALID_TRANSACTION_TIMEOUT = 50


def transaction_hint(error: BrokerError, txn_id: str | None) -> str:
    """``error`` with what to do about it."""
    code = getattr(error, "code", None)
    where = f"transactional id {txn_id!r}"
    if code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        return (f"{error}: the principal may not use {where}; grant it Write and Describe on "
                f"transactional ids starting with the transactionalIdPrefix option, or "
                f"choose a transactionalIdPrefix it may use")
    if code == INVALID_TRANSACTION_TIMEOUT:
        return (f"{error}: kafka.transaction.timeout.ms is above the broker's "
                f"transaction.max.timeout.ms; lower kafka.transaction.timeout.ms")
    if code in UNSUPPORTED:
        return (f"{error}: the broker does not support transactions for {where}; set "
                f"exactlyOnce=false")
    if code in TIMED_OUT_OR_FENCED:
        return (f"{error}: the transaction of {where} is no longer open: the broker aborted "
                f"it after kafka.transaction.timeout.ms (raise kafka.transaction.timeout.ms "
                f"above the time from a task's start to the driver's commit), or another "
                f"writer with the same transactionalIdPrefix fenced it (give every query its "
                f"own transactionalIdPrefix). Nothing of this transaction became visible")
    return f"{error} ({where})"
