"""The driver's cluster lookups, retried and reported the same way by the reader and the writer.

Spark's Kafka source retries a whole offset or metadata lookup ``fetchOffset.numRetries``
times (3), ``fetchOffset.retryIntervalMs`` (1000 ms) apart (``KafkaOffsetReaderAdmin.
withRetries``), each attempt an admin client call that retries Kafka's retriable errors
inside; so a wrong bootstrap address or a missing topic fails a read in a few seconds. The
writer's driver-side check and the dead-letter topic's take the same path, so a write to
the same mistake fails as fast and says the same thing:

- ``with_retries``: a lookup as one loop of the library's retry policy (``protocol.retry``):
  Kafka's retriable errors retried at ``retry.backoff.ms`` within ``request.timeout.ms``,
  and what is left (by default any failure of the cluster, as Spark's ``withRetries``, but
  a refusal or a mistake in the options) tried ``attempts`` times, ``interval_ms`` apart;
  when the attempts run out, a connection or timeout error says how many attempts were
  made and how long they really took;
- ``missing_topics_message``: the words for topics the cluster does not have.
"""

from __future__ import annotations

import logging
import time
from typing import TypeVar
from collections.abc import Callable, Iterable

from protocol.config import ClientConfig
from protocol.retry import DRIVER_LOOKUP, Attempts, RetryPolicy

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
    config: ClientConfig,
    attempts: int | None = ATTEMPTS,
    interval_ms: int = INTERVAL_MS,
    log: logging.Logger,
    between: Callable[[], None] | None = None,
    deadline: float | None = None,
    retriable: Callable[[BaseException], bool] = DRIVER_LOOKUP,
    give_up: Callable[[Attempts, BaseException], BaseException] | None = None,
) -> T:
    """``call()`` as one loop: the Kafka-retriable errors of its client calls retried under
    ``config``'s backoff within its ``request.timeout.ms``; what is left, if ``retriable``
    selects it, counts as a failed attempt of ``RetryPolicy.fixed``: up to ``attempts``
    (at least one; None: as many as ``deadline`` allows), ``interval_ms`` apart, each retry
    logged as a warning naming ``what``. ``between`` runs before each new attempt (a
    metadata refresh); no attempt starts after ``deadline`` (a ``time.monotonic()``);
    ``give_up`` words the end (``RetryPolicy.run``).
    ``tests/test_jvm_connector_differential.py`` compares the attempts with Spark's."""
    timeout_ms = None if deadline is None else max(0, round((deadline - time.monotonic()) * 1000))
    if attempts is None:  # no count: the deadline alone bounds it
        policy = RetryPolicy(interval_ms, interval_ms, timeout_ms=timeout_ms, jitter=0.0)
    else:
        policy = RetryPolicy.fixed(interval_ms, attempts, timeout_ms)
    return policy.run(
        what,
        lambda _tries: call(),
        retriable=retriable,
        within=RetryPolicy.for_client(config, config.request_timeout_ms),
        between=None if between is None else (lambda _tries, _error: between()),
        give_up=give_up,
        level=logging.WARNING,
        logger=log,
    )
