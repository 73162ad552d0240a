"""The driver's cluster lookups, retried and reported the same way by the reader and the writer.

Spark's Kafka source retries a whole offset or metadata lookup ``fetchOffset.numRetries``
times (3), ``fetchOffset.retryIntervalMs`` (1000 ms) apart (``KafkaOffsetReaderAdmin.
withRetries``), so a wrong bootstrap address or a missing topic fails a read in a few
seconds. The writer's driver-side check (the topic exists, the brokers reach) takes the
same path (``with_retries``, the same defaults, ``kafka.max.block.ms`` as an upper bound),
so a write to the same mistake fails as fast and says the same thing:

- ``with_retries``: a lookup tried ``attempts`` times, ``interval_ms`` apart; an error that
  comes from the options (``ConfigError``) fails at once, since another attempt cannot
  change it; when the attempts run out, a connection or timeout error says how many
  attempts were made and how long they really took;
- ``missing_topics_message``: the words for topics the cluster does not have.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Iterable, TypeVar

from protocol.errors import ConfigError, KafkaConnectionError, KafkaTimeoutError, PyKafkaError

__all__ = ["ATTEMPTS", "INTERVAL_MS", "with_retries", "missing_topics_message"]

#: Spark's defaults of ``fetchOffset.numRetries`` and ``fetchOffset.retryIntervalMs``.
ATTEMPTS = 3
INTERVAL_MS = 1000

T = TypeVar("T")


def missing_topics_message(option: str, topics: Iterable[str]) -> str:
    """``subscribe: topic(s) 'a', 'b' do not exist in the cluster`` (``option`` names what
    the user typed the topics in)."""
    return (f"{option}: topic(s) {', '.join(repr(t) for t in topics)} do not exist in the "
            f"cluster")


def _gave_up(exc: PyKafkaError, what: str, attempts: int, started: float) -> PyKafkaError:
    """``exc`` with the attempts made and the time they took, for the two errors whose
    message comes from the network (another type is kept as it is)."""
    if type(exc) not in (KafkaConnectionError, KafkaTimeoutError):
        return exc
    waited_ms = round((time.monotonic() - started) * 1000)
    tried = f"{attempts} attempts" if attempts != 1 else "1 attempt"
    out = type(exc)(f"{exc} ({what}: gave up after {tried} in {waited_ms} ms)")
    return out.with_traceback(exc.__traceback__)


def with_retries(what: str, call: Callable[[], T], *, attempts: int = ATTEMPTS,
                 interval_ms: int = INTERVAL_MS, log: logging.Logger,
                 between: Callable[[], None] | None = None,
                 deadline: float | None = None) -> T:
    """``call()``, tried up to ``attempts`` times (at least once), ``interval_ms`` apart,
    while it raises ``PyKafkaError`` other than ``ConfigError``; each retry is logged as a
    warning naming ``what``. ``between`` runs before each new attempt (a metadata
    refresh); no attempt starts after ``deadline`` (a ``time.monotonic()``)."""
    started = time.monotonic()
    attempts = max(1, attempts)
    attempt = 0
    while True:
        try:
            return call()
        except PyKafkaError as e:
            attempt += 1
            late = deadline is not None and time.monotonic() + interval_ms / 1000 > deadline
            if isinstance(e, ConfigError) or attempt >= attempts or late:
                reported = _gave_up(e, what, attempt, started)
                if reported is e:
                    raise
                raise reported from None
            log.warning("%s failed (attempt %d of %d), retrying in %d ms: %s", what,
                        attempt, attempts, interval_ms, e)
            time.sleep(interval_ms / 1000)
            if between is not None:
                between()
