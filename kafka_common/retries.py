"""The driver's cluster lookups, retried and reported the same way by the reader and the writer.

Spark's Kafka source retries a whole offset or metadata lookup ``fetchOffset.numRetries``
times (3), ``fetchOffset.retryIntervalMs`` (1000 ms) apart (``KafkaOffsetReaderAdmin.
withRetries``), so a wrong bootstrap address or a missing topic fails a read in a few
seconds. The writer's driver-side check (the topic exists, the brokers reach) takes the
same path (``with_retries``, the same defaults, ``kafka.max.block.ms`` as an upper bound),
so a write to the same mistake fails as fast and says the same thing:

- ``with_retries``: a lookup tried ``attempts`` times, ``interval_ms`` apart, under the
  library's one retry policy (``protocol.client.retry``); what it retries is the caller's
  selection of ``protocol.client.retry.RETRIABLE`` (by default any failure of the cluster, as
  Spark's ``withRetries``, but a refusal); an error that comes from the options
  (``ConfigError``) or a refusal of the principal (an authorization failure, a failed
  sign-in) fails at once, since another attempt cannot change it, where Spark's
  ``withRetries`` retries authorization failures too; when the attempts run out, a
  connection or timeout error says how many attempts were made and how long they really
  took;
- ``missing_topics_message``: the words for topics the cluster does not have.
"""

from __future__ import annotations

import logging
import time
from typing import TypeVar
from collections.abc import Callable, Iterable

from protocol.client.retry import RETRIABLE, RetryPolicy

__all__ = ["ATTEMPTS", "INTERVAL_MS", "with_retries", "missing_topics_message"]

#: Spark's defaults of ``fetchOffset.numRetries`` and ``fetchOffset.retryIntervalMs``.
ATTEMPTS = 3
INTERVAL_MS = 1000

T = TypeVar("T")


def missing_topics_message(option: str, topics: Iterable[str]) -> str:
    """``subscribe: topic(s) 'a', 'b' do not exist in the cluster`` (``option`` names what
    the user typed the topics in)."""
    return f"{option}: topic(s) {', '.join(repr(t) for t in topics)} do not exist in the cluster"


def with_retries(
    what: str,
    call: Callable[[], T],
    *,
    attempts: int | None = ATTEMPTS,
    interval_ms: int = INTERVAL_MS,
    log: logging.Logger,
    between: Callable[[], None] | None = None,
    deadline: float | None = None,
    retriable: Callable[[BaseException], bool] = RETRIABLE["driver lookup"],
) -> T:
    """``call()`` under ``protocol.client.retry.RetryPolicy.fixed``: tried up to
    ``attempts`` times (at least once; None: as often as ``deadline`` allows),
    ``interval_ms`` apart, while it raises an error ``retriable`` selects (default: any
    ``PyKafkaError`` but ``ConfigError`` and a refusal); each retry is logged as a warning
    naming ``what``. ``between`` runs before each new attempt (a metadata refresh); no
    attempt starts after ``deadline`` (a ``time.monotonic()``). An attempt may be a
    ``KafkaClient`` call, which retries what Kafka marks retriable within its request
    timeout: that is one attempt here, as each of Spark's ``fetchOffset`` attempts is one
    admin-client call that retries inside (``tests/test_jvm_connector_differential.py``
    compares the two)."""
    timeout_ms = None if deadline is None else max(0, round((deadline - time.monotonic()) * 1000))
    if attempts is None:  # no count: the deadline alone bounds it
        policy = RetryPolicy(interval_ms, interval_ms, timeout_ms=timeout_ms, jitter=0.0)
    else:
        policy = RetryPolicy.fixed(interval_ms, attempts, timeout_ms)
    return policy.run(
        what,
        lambda _tries: call(),
        retriable=retriable,
        between=None if between is None else (lambda _tries, _error: between()),
        level=logging.WARNING,
        logger=log,
    )
