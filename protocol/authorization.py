"""What Kafka's authorizer refused, in words a user can act on: written once, for every
request.

A broker whose authorizer refuses a request answers one of four error codes, which say
the kind of resource: TOPIC_AUTHORIZATION_FAILED (29), GROUP_AUTHORIZATION_FAILED (30),
CLUSTER_AUTHORIZATION_FAILED (31), TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53). Which
operation it wanted depends on the request (``OPERATIONS``, after Kafka's table
"Operations and Resources on Protocols"; the rows the connector meets were checked on
Apache Kafka 4.4.0 with ``StandardAuthorizer``, ``tests/test_kafka_authorization.py``).

``request_error(code, request, ...)`` is the one way a request's error code becomes an
exception: ``BrokerError.for_code`` for any code, and for the four above the same typed
error (``TopicAuthorizationFailed``, ...) whose message says "not authorized to
<operation> <resource type> '<name>' (<request>): grant the principal <operations> on
it", never "does not exist" or "no coordinator". The request knows the operation; only
the caller knows what its query needs (a write needs Write where Metadata checks
Describe, a group commit Read on a group whose coordinator lookup checks Describe):
``refine(error, grant=..., on=..., advice=...)`` rewrites the grant of such an error in
place with the same words. ``error.authorization`` keeps the parts.

Kafka's authorizer takes Read, Write, Delete and Alter for Describe: a principal granted
Write on a topic may describe it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import cast

from .errors import BrokerError

__all__ = [
    "TOPIC",
    "GROUP",
    "CLUSTER",
    "TRANSACTIONAL_ID",
    "RESOURCE_TYPES",
    "OPERATIONS",
    "Authorization",
    "authorization_message",
    "request_error",
    "refine",
    "is_authorization_error",
]

TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = "topic", "group", "cluster", "transactional id"

#: Error code -> the kind of resource the authorizer refused.
RESOURCE_TYPES: dict[int, str] = {29: TOPIC, 30: GROUP, 31: CLUSTER, 53: TRANSACTIONAL_ID}

#: (request, resource type) -> the operation Kafka's authorizer checks for it.
OPERATIONS: dict[tuple[str, str], str] = {
    ("Metadata", TOPIC): "Describe",
    ("ListOffsets", TOPIC): "Describe",
    ("Fetch", TOPIC): "Read",
    ("Produce", TOPIC): "Write",
    ("Produce", TRANSACTIONAL_ID): "Write",
    ("FindCoordinator", GROUP): "Describe",
    ("FindCoordinator", TRANSACTIONAL_ID): "Describe",
    ("OffsetCommit", GROUP): "Read",
    ("OffsetCommit", TOPIC): "Read",
    ("OffsetFetch", GROUP): "Describe",
    ("OffsetFetch", TOPIC): "Describe",
    ("InitProducerId", TRANSACTIONAL_ID): "Write",
    # without a transactional id: IdempotentWrite on the cluster, or (Kafka 2.8+) Write on
    # any topic
    ("InitProducerId", CLUSTER): "IdempotentWrite",
    ("AddPartitionsToTxn", TRANSACTIONAL_ID): "Write",
    ("AddPartitionsToTxn", TOPIC): "Write",
    ("AddOffsetsToTxn", TRANSACTIONAL_ID): "Write",
    ("AddOffsetsToTxn", GROUP): "Read",
    ("TxnOffsetCommit", TRANSACTIONAL_ID): "Write",
    ("TxnOffsetCommit", GROUP): "Read",
    ("TxnOffsetCommit", TOPIC): "Read",
    ("EndTxn", TRANSACTIONAL_ID): "Write",
    # Kafka leaves out of the answer the ids the principal may not Describe (no error)
    ("ListTransactions", TRANSACTIONAL_ID): "Describe",
    ("CreateTopics", TOPIC): "Create",
    ("CreateTopics", CLUSTER): "Create",
    ("DeleteTopics", TOPIC): "Delete",
    ("DeleteRecords", TOPIC): "Delete",
}


@dataclass(frozen=True)
class Authorization:
    """The parts of an authorization failure: what was refused and what to grant."""

    request: str  # the Kafka request, e.g. "Metadata"
    resource_type: str  # TOPIC, GROUP, CLUSTER or TRANSACTIONAL_ID
    name: str | None  # the resource's name (None: the cluster, or unknown)
    operation: str | None  # what the authorizer checked (None: not in OPERATIONS)
    grant: tuple[str, ...]  # the operations to grant
    on: str | None = None  # where to grant them, when not on the resource itself
    advice: str | None = None  # what else the user may do


def _and(words: Sequence[str]) -> str:
    words = list(dict.fromkeys(words))
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def authorization_message(a: Authorization) -> str:
    """The words of an authorization failure (without the error code, which
    ``BrokerError`` puts in front)."""
    if a.resource_type == CLUSTER:
        resource = "the cluster"
    elif a.name is None:
        resource = f"a {a.resource_type}"
    else:
        resource = f"{a.resource_type} {a.name!r}"
    verb = f"to {a.operation} {resource}" if a.operation else f"for {resource}"
    text = f"not authorized {verb} ({a.request})"
    if a.grant:
        text += f": grant the principal {_and(a.grant)} on {a.on or 'it'}"
    if a.resource_type == TOPIC and a.operation == "Describe":
        text += (
            " (Kafka answers so for every topic the principal may not describe, "
            "whether it exists or not)"
        )
    if a.advice:
        text += f"; {a.advice}"
    return text


def is_authorization_error(error: BaseException) -> bool:
    return isinstance(error, BrokerError) and error.code in RESOURCE_TYPES


def request_error(
    code: int,
    request: str,
    message: str | None = None,
    *,
    topic: str | None = None,
    partition: int | None = None,
    group: str | None = None,
    transactional_id: str | None = None,
    grant: Mapping[str, Sequence[str]] | None = None,
) -> BrokerError:
    """The typed ``BrokerError`` of ``code`` answered to ``request``. For an authorization
    code its message names the resource of that type among ``topic``, ``group`` and
    ``transactional_id``, the operation ``request`` needs on it (``OPERATIONS``) and, to
    grant, ``grant[resource type]`` or else that operation; ``message`` is then left out
    (Kafka's own text says nothing more). Other codes: ``BrokerError.for_code(code,
    message, topic=topic, partition=partition)``."""
    kind = RESOURCE_TYPES.get(code)
    if kind is None:
        return BrokerError.for_code(code, message, topic=topic, partition=partition)
    name = {TOPIC: topic, GROUP: group, TRANSACTIONAL_ID: transactional_id}.get(kind)
    operation = OPERATIONS.get((request, kind))
    wanted = tuple((grant or {}).get(kind) or ((operation,) if operation else ()))
    details = Authorization(request, kind, name, operation, wanted)
    error = BrokerError.for_code(code, authorization_message(details))
    error.topic, error.partition = topic, partition
    error.authorization = details
    return error


def refine(
    error: BaseException,
    *,
    resource_type: str | None = None,
    grant: Sequence[str] | None = None,
    on: str | None = None,
    advice: str | None = None,
) -> BaseException:
    """``error`` with the grant its caller knows its query needs: for an authorization
    error (of ``resource_type`` when given), the operations to ``grant``, where (``on``,
    e.g. a prefix) and ``advice``, in ``authorization_message``'s words. Changed in place
    (the traceback stays) and returned; any other error is returned unchanged."""
    details = getattr(error, "authorization", None)
    if details is None or (resource_type is not None and details.resource_type != resource_type):
        return error
    details = replace(
        details,
        grant=tuple(grant) if grant is not None else details.grant,
        on=on if on is not None else details.on,
        advice=advice if advice is not None else details.advice,
    )
    broker_error = cast(BrokerError, error)  # only a BrokerError carries an authorization
    broker_error.authorization = details
    broker_error.args = (
        f"[{broker_error.name} ({broker_error.code})] {authorization_message(details)}",
    )
    return error
