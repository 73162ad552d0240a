"""The one retry policy: what is retried, how often, for how long, with what backoff, and
what the error says when it gives up. Every loop of the library that retries or waits to
try again takes its rules from here, and only this module sleeps for them.

- **What** is retried: one table (``RETRIABLE``), a selection per kind of call, because the
  callers differ on purpose: a Kafka request retries what Kafka marks retriable, what a
  fresh look at the metadata cures, a lost connection and a timeout (``is_retriable``); a
  driver lookup (the reader's offset and metadata lookups under ``fetchOffset.numRetries``,
  the writer's topic check) retries any failure of the cluster, as Spark's ``withRetries``
  does, except a refusal (``is_outage``). A mistake in the options (``ConfigError``) and a
  refusal (``is_refusal``: an authorization failure, a failed sign-in) are never retried:
  another attempt cannot change them (a grant or a password does not come back by waiting).
- **How often, how long:** at most ``attempts`` attempts (0: as many as the time allows),
  and no retry that would start after ``timeout_ms`` from the first attempt (None: only
  the count bounds it).
- **Backoff:** as Kafka's clients (``retry.backoff.ms``, default 100, doubling up to
  ``retry.backoff.max.ms``, default 1000, each wait moved by up to ``jitter`` (20 %) either
  way and never past the cap). ``RetryPolicy.fixed`` is Spark's fixed interval
  (``fetchOffset.retryIntervalMs``), without jitter; ``RetryPolicy.for_client`` reads a
  ``ClientConfig``.
- **The end:** when the time runs out, a ``KafkaTimeoutError`` naming what was tried, the
  timeout and the last error; when the count runs out, the last error itself, a network
  error's message extended with the attempts made and the time they really took. Both say
  ``gave up after N attempts in M ms``. A retried error of the caller's own kind (not
  Kafka's, not the network's) ends as it is, and a caller whose errors name options of its
  own (the registry's, a token endpoint's) passes ``give_up`` to word its end.

``RetryPolicy.run`` retries a call. Loops that are not a call retried (the fetcher waiting
for records, the producer resending batches per partition) hold an ``Attempts`` of their
policy: its deadline, its backoff (``Attempts.failed_once``, ``Attempts.wait``), its count
and its ending; ``pause``/``pause_until`` are the waits of such loops that are not
backoffs of a failure (asking again for records not there yet).
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from typing import TypeVar
from collections.abc import Callable

from ..authorization import is_authorization_error
from ..errors import (
    AuthenticationError,
    BrokerError,
    ConfigError,
    KafkaConnectionError,
    KafkaTimeoutError,
    PyKafkaError,
)

__all__ = [
    "RetryPolicy",
    "Attempts",
    "RETRIABLE",
    "is_retriable",
    "is_kafka_failure",
    "is_outage",
    "is_refusal",
    "pause",
    "pause_until",
    "DEFAULT_BACKOFF_MS",
    "DEFAULT_MAX_BACKOFF_MS",
    "JITTER",
    "RELOGIN_RETRY_S",
]

T = TypeVar("T")
log = logging.getLogger("pykafka.retry")

#: Kafka's defaults of ``retry.backoff.ms`` and ``retry.backoff.max.ms``, and the jitter of
#: its ``ExponentialBackoff`` (``CommonClientConfigs.RETRY_BACKOFF_JITTER``).
DEFAULT_BACKOFF_MS = 100
DEFAULT_MAX_BACKOFF_MS = 1000
JITTER = 0.2
#: How long a background refresh of an OAUTHBEARER token that failed waits before it tries
#: again, while the current token stays valid: Kafka's ``ExpiringCredentialRefreshingLogin``
#: (``DELAY_SECONDS_BEFORE_NEXT_RETRY_WHEN_RELOGIN_FAILS``), never later than the refresh
#: policy's minimum period.
RELOGIN_RETRY_S = 10.0

# ---- the table of which errors retry ----------------------------------------------------

# Broker errors Kafka does not mark retriable but that a fresh look at the metadata cures.
_CURED_BY_METADATA = ("NOT_CONTROLLER", "UNKNOWN_LEADER_EPOCH", "FENCED_LEADER_EPOCH")


def is_retriable(exc: BaseException) -> bool:
    """A Kafka request's error that another attempt may not meet: a retriable broker error,
    one that fresh metadata cures, a lost connection or a timeout."""
    if isinstance(exc, BrokerError):
        return exc.retriable or exc.name in _CURED_BY_METADATA
    return isinstance(exc, (KafkaConnectionError, KafkaTimeoutError))


def is_kafka_failure(exc: BaseException) -> bool:
    """Any failure of the cluster or of the way to it, whether Kafka marks it retriable or
    not (Spark's ``KafkaOffsetReaderAdmin.withRetries``); not a mistake in the options."""
    return isinstance(exc, PyKafkaError) and not isinstance(exc, ConfigError)


def is_refusal(exc: BaseException) -> bool:
    """The cluster refused the principal: an authorization failure (TOPIC_, GROUP_,
    CLUSTER_ or TRANSACTIONAL_ID_AUTHORIZATION_FAILED) or a failed sign-in (SASL or TLS,
    SASL_AUTHENTICATION_FAILED). Never retried: waiting grants nothing."""
    if isinstance(exc, AuthenticationError) or is_authorization_error(exc):
        return True
    return isinstance(exc, BrokerError) and exc.name == "SASL_AUTHENTICATION_FAILED"


def is_outage(exc: BaseException) -> bool:
    """A failure that waiting may cure: any of ``is_kafka_failure`` but a refusal
    (``is_refusal``)."""
    return is_kafka_failure(exc) and not is_refusal(exc)


#: Which errors retry, per kind of call (the ``retriable`` of ``RetryPolicy.run``).
RETRIABLE: dict[str, Callable[[BaseException], bool]] = {
    "request": is_retriable,  # a Kafka request: KafkaClient.retrying, the fetcher
    "driver lookup": is_outage,  # the reader's offset and metadata lookups
    "topic check": is_outage,  # the writer's driver-side check of its topic
}

# ---- the policy ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    """How often, how long and how far apart attempts are made (see the module's text)."""

    backoff_ms: int = DEFAULT_BACKOFF_MS
    max_backoff_ms: int = DEFAULT_MAX_BACKOFF_MS
    attempts: int = 0
    timeout_ms: int | None = None
    jitter: float = JITTER

    @classmethod
    def for_client(cls, config, timeout_ms: int | None = None, attempts: int = 0) -> RetryPolicy:
        """The backoff of a ``ClientConfig`` (``kafka.retry.backoff.ms`` / ``.max.ms``)."""
        return cls(
            backoff_ms=config.retry_backoff_ms,
            max_backoff_ms=config.retry_backoff_max_ms,
            attempts=attempts,
            timeout_ms=timeout_ms,
        )

    @classmethod
    def fixed(cls, interval_ms: int, attempts: int, timeout_ms: int | None = None) -> RetryPolicy:
        """``attempts`` attempts ``interval_ms`` apart (Spark's ``fetchOffset.*``)."""
        return cls(
            backoff_ms=interval_ms,
            max_backoff_ms=interval_ms,
            attempts=max(1, attempts),
            timeout_ms=timeout_ms,
            jitter=0.0,
        )

    @classmethod
    def within_backoff(cls, backoff_ms: int, max_backoff_ms: int) -> RetryPolicy:
        """Doubling waits from ``backoff_ms`` for as long as their sum stays within
        ``max_backoff_ms`` (Kafka's ``sasl.login.retry.backoff.ms`` / ``.max.ms``)."""
        attempts, waited, wait = 1, 0, max(1, backoff_ms)
        while waited + wait <= max_backoff_ms:
            attempts, waited, wait = attempts + 1, waited + wait, min(wait * 2, max_backoff_ms)
        return cls(
            backoff_ms=backoff_ms, max_backoff_ms=max_backoff_ms, attempts=attempts, jitter=0.0
        )

    def delay_s(self, retry: int) -> float:
        """The wait before retry number ``retry`` (1: the first retry) without jitter, in
        seconds."""
        first = max(0, self.backoff_ms)
        return min(first * 2 ** min(max(retry - 1, 0), 30), max(first, self.max_backoff_ms)) / 1000

    def jittered_delay_s(self, retry: int) -> float:
        """``delay_s`` moved at random by up to ``jitter`` either way, never past the cap."""
        delay = self.delay_s(retry)
        if self.jitter <= 0 or delay <= 0:
            return delay
        cap = max(self.backoff_ms, self.max_backoff_ms) / 1000
        return min(cap, delay * random.uniform(1 - self.jitter, 1 + self.jitter))

    def start(self, what: str) -> Attempts:
        return Attempts(self, what)

    def run(
        self,
        what: str,
        call: Callable[[Attempts], T],
        *,
        retriable: Callable[[BaseException], bool] = is_retriable,
        between: Callable[[Attempts, BaseException], None] | None = None,
        give_up: Callable[[Attempts, BaseException], BaseException] | None = None,
        level: int = logging.DEBUG,
        logger: logging.Logger | None = None,
    ) -> T:
        """``call(attempts)`` until it returns, raises an error that is not ``retriable``,
        or the policy gives up (``give_up(attempts, last error)`` says how; by default
        ``Attempts.gave_up``). Each retry is logged at ``level`` naming ``what``; ``between``
        runs after each wait, before the next attempt (a metadata refresh)."""
        tries = self.start(what)
        while True:
            try:
                return call(tries)
            except Exception as e:  # noqa: BLE001 -- `retriable` decides
                if not retriable(e):
                    raise
                delay = tries.failed_once()
                if delay is None:
                    ended = (give_up or Attempts.gave_up)(tries, e)
                    if ended is e:
                        raise
                    raise ended.with_traceback(e.__traceback__) from e
                (logger or log).log(
                    level,
                    "%s failed (attempt %d%s), retrying in %d ms: %s",
                    what,
                    tries.count,
                    tries.of(),
                    round(delay * 1000),
                    e,
                )
                time.sleep(delay)
                if between is not None:
                    between(tries, e)


class Attempts:
    """One run of a ``RetryPolicy``: the attempts failed so far and the deadline."""

    def __init__(self, policy: RetryPolicy, what: str):
        self.policy, self.what = policy, what
        self.count = 0  # failed attempts
        self.made = 0  # attempts started (``begin``), for loops that count sends
        self.started = time.monotonic()
        self.deadline: float | None = None
        self.restart_clock()

    def restart_clock(self) -> None:
        """Progress was made: the timeout counts from now and the backoff starts over
        (the fetcher's poll timeout)."""
        self.count = 0
        if self.policy.timeout_ms is not None:
            self.deadline = time.monotonic() + self.policy.timeout_ms / 1000

    def time_left_s(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline

    def of(self) -> str:
        """How many attempts there may be, for a log line after ``attempt N``: `` of 3``,
        or with no count, the deadline as a wall-clock time (``, until 14:03:27``)."""
        if self.policy.attempts:
            return f" of {self.policy.attempts}"
        left = self.time_left_s()
        if left is None:
            return ""
        return ", until " + time.strftime("%H:%M:%S", time.localtime(time.time() + left))

    def failed_once(self) -> float | None:
        """Counts a failed attempt; the seconds to wait before the next one, or None when
        the policy gives up (the count is spent, or the next attempt would start late)."""
        self.count += 1
        if self.policy.attempts and self.count >= self.policy.attempts:
            return None
        delay = self.policy.jittered_delay_s(self.count)
        if self.deadline is not None and time.monotonic() + delay > self.deadline:
            return None
        return delay

    def wait(self) -> bool:
        """Counts a failed attempt and waits its backoff, at most until the deadline (the
        caller finds out with ``expired`` whether it is over); False, at once and without
        waiting, when the count is spent: no attempt is left to wait for."""
        delay = self.failed_once()
        if delay is None and not self.timed_out():
            return False
        left = self.time_left_s()
        if delay is None:
            delay = 0.0 if left is None else left
        pause(delay if left is None else min(delay, left))
        return True

    def begin(self) -> None:
        """Counts an attempt that starts (the producer's send of a batch)."""
        self.made += 1

    def exhausted(self) -> bool:
        """Every attempt the policy allows has started."""
        return bool(self.policy.attempts) and self.made >= self.policy.attempts

    def waited_ms(self) -> int:
        return round((time.monotonic() - self.started) * 1000)

    def summary(self) -> str:
        tried = "1 attempt" if self.count == 1 else f"{self.count} attempts"
        return f"gave up after {tried} in {self.waited_ms()} ms"

    def timed_out(self) -> bool:
        """The policy gave up for lack of time (not of attempts)."""
        return not (self.policy.attempts and self.count >= self.policy.attempts)

    def gave_up(self, error: BaseException) -> BaseException:
        """The error the policy ends with (see the module's text). An error of the
        caller's own kind (not Kafka's, not the network's) is left as it is, for the
        caller to word."""
        if not is_retriable(error):
            return error
        if self.timed_out() and self.policy.timeout_ms is not None:
            return KafkaTimeoutError(
                f"{self.what} did not succeed within "
                f"{self.policy.timeout_ms} ms ({self.summary()}); "
                f"last error: {error}"
            )
        if type(error) in (KafkaConnectionError, KafkaTimeoutError):
            return type(error)(f"{error} ({self.what}: {self.summary()})")
        return error


def pause(seconds: float) -> None:
    """Wait ``seconds`` (nothing when not positive): the one sleep of the library's loops."""
    if seconds > 0:
        time.sleep(seconds)


def pause_until(moment: float, *, at_most: float) -> None:
    """Wait until ``moment`` (a ``time.monotonic()``), at most ``at_most`` seconds."""
    pause(min(at_most, moment - time.monotonic()))
