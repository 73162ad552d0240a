"""The one retry policy: what is retried, how often, for how long, with what backoff, and
what the error says when it gives up. Every loop of the library that retries or waits to
try again takes its rules from here, and only this module waits for them. It imports no
client, so the Kafka client and the HTTP clients (Schema Registry, token endpoints) share it.

- **What** is retried: a ``RetryRule``, keyed by Kafka error codes and exception types, one
  row per kind of call: a Kafka request (``REQUEST``: what Kafka marks retriable, what fresh
  metadata cures, a lost connection, a timeout), a driver lookup (``DRIVER_LOOKUP``: any
  failure of the cluster, as Spark's ``withRetries``), a Produce answer (``PRODUCE``). A
  mistake in the options and a refusal (an authorization failure, a failed sign-in) are
  never retried: a grant or a password does not come back by waiting.
- **How often, how long, what backoff:** ``RetryPolicy``: at most ``attempts`` attempts (0:
  as many as the time allows), none starting after ``timeout_ms``; waits as Kafka's clients
  (``retry.backoff.ms`` doubling up to ``retry.backoff.max.ms``, 20 % jitter) or Spark's
  fixed ``fetchOffset.retryIntervalMs``.
- **One loop per operation:** ``RetryPolicy.run(..., within=)`` retries a driver lookup's
  Kafka-retriable errors at Kafka's backoff within the request timeout and counts only what
  is left against Spark's attempts; the client's own loop makes one attempt inside it.
- **The end:** a ``KafkaTimeoutError`` naming what was tried, the timeout and the last
  error, or the last error itself, saying ``gave up after N attempts in M ms``.

Loops that are not a call retried (the fetcher waiting for records, the producer resending
batches) hold an ``Attempts``; ``pause``/``pause_until`` are their waits that are not
backoffs of a failure.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import random
import time
from dataclasses import dataclass, field
from typing import NoReturn, TypeVar
from collections.abc import Callable, Iterator

from .authorization import RESOURCE_TYPES
from .errors import (
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
    "RetryRule",
    "REQUEST",
    "DRIVER_LOOKUP",
    "PRODUCE",
    "REFUSALS",
    "is_retriable",
    "is_refusal",
    "outer_loop_retries",
    "one_attempt_each",
    "request_failed_for_outer_loop",
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
#: How long a background refresh of an OAUTHBEARER token, or renewal of a delegation token,
#: that failed waits before it tries again, while the current token stays valid: Kafka's
#: ``ExpiringCredentialRefreshingLogin`` (``DELAY_SECONDS_BEFORE_NEXT_RETRY_WHEN_RELOGIN_FAILS``),
#: never later than the refresh policy's minimum period.
RELOGIN_RETRY_S = 10.0

# ---- the table of which errors retry ----------------------------------------------------


@dataclass(frozen=True)
class RetryRule:
    """Which errors another attempt may cure: those of ``types`` and the broker errors of
    ``codes`` (or that Kafka marks retriable, with ``kafka_retriable``), except those of
    ``never_types`` and ``never_codes``, which no rule retries."""

    types: tuple[type[BaseException], ...] = ()
    codes: frozenset[int] = frozenset()
    kafka_retriable: bool = False
    never_types: tuple[type[BaseException], ...] = ()
    never_codes: frozenset[int] = field(default_factory=frozenset)

    def __call__(self, error: BaseException) -> bool:
        if isinstance(error, self.never_types):
            return False
        if isinstance(error, BrokerError):
            if error.code in self.never_codes:
                return False
            if error.code in self.codes or (self.kafka_retriable and error.retriable):
                return True
        return isinstance(error, self.types)

    def also(self, *types: type[BaseException]) -> RetryRule:
        """This rule, retrying the caller's own ``types`` too."""
        return RetryRule(
            self.types + types, self.codes, self.kafka_retriable, self.never_types, self.never_codes
        )


#: Refusals of the principal: the four authorization failures (TOPIC_, GROUP_, CLUSTER_,
#: TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and SASL_AUTHENTICATION_FAILED.
REFUSALS = frozenset(RESOURCE_TYPES) | {58}
#: NOT_CONTROLLER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH: Kafka does not mark them
#: retriable, but a fresh look at the metadata cures them.
_CURED_BY_METADATA = frozenset({41, 74, 75})
#: A Produce answer's errors after which the broker has certainly not written the batch,
#: resent whether Kafka marks them retriable or not: CORRUPT_MESSAGE,
#: UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER,
#: NOT_ENOUGH_REPLICAS, OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID,
#: FENCED_LEADER_EPOCH (the sequence rules of ``kafka_sink.produce_answers`` decide how).
_RESENT_BY_PRODUCER = frozenset({2, 3, 5, 6, 19, 45, 59, 74})
_NEVER = (ConfigError, AuthenticationError)

#: A Kafka request (``KafkaClient.retrying``, the fetcher): what Kafka marks retriable,
#: what fresh metadata cures, a lost connection, a timeout.
REQUEST = RetryRule(
    types=(KafkaConnectionError, KafkaTimeoutError),
    codes=_CURED_BY_METADATA,
    kafka_retriable=True,
    never_types=_NEVER,
    never_codes=REFUSALS,
)
#: A driver lookup (the reader's offsets and metadata, the writer's and the dead-letter
#: topic's checks): any failure of the cluster or of the way to it, as Spark's
#: ``KafkaOffsetReaderAdmin.withRetries``, but a refusal or a mistake in the options.
DRIVER_LOOKUP = RetryRule(types=(PyKafkaError,), never_types=_NEVER, never_codes=REFUSALS)
#: A Produce answer's error that resends the batch (its ``codes``: not written for sure).
PRODUCE = RetryRule(
    codes=_RESENT_BY_PRODUCER, kafka_retriable=True, never_types=_NEVER, never_codes=REFUSALS
)

is_retriable = REQUEST


def is_refusal(error: BaseException) -> bool:
    """The cluster refused the principal (a row of ``REFUSALS``, or a failed sign-in)."""
    if isinstance(error, AuthenticationError):
        return True
    return isinstance(error, BrokerError) and error.code in REFUSALS


# ---- one loop per operation --------------------------------------------------------------


class _OuterLoop:
    """An attempt of a loop that retries its client's requests itself: whether one of
    them failed with an error the client would have retried on its own, and which."""

    __slots__ = ("request_failed", "request")

    def __init__(self) -> None:
        self.request_failed = False
        self.request = ""  # what the client's own loop calls the request (ListOffsets)


_OUTER_LOOP: contextvars.ContextVar[_OuterLoop | None] = contextvars.ContextVar(
    "outer_loop", default=None
)


@contextlib.contextmanager
def one_attempt_each() -> Iterator[_OuterLoop]:
    """Inside, an operation's own retry loop (``KafkaClient.retrying``) makes one attempt
    and leaves its retriable failure (``request_failed_for_outer_loop``) to the loop of
    ``RetryPolicy.run(..., within=)`` around it."""
    token = _OUTER_LOOP.set(_OuterLoop())
    try:
        yield _OUTER_LOOP.get()  # type: ignore[misc]
    finally:
        _OUTER_LOOP.reset(token)


def outer_loop_retries() -> bool:
    """An outer loop retries the call in hand (``one_attempt_each``)."""
    return _OUTER_LOOP.get() is not None


def request_failed_for_outer_loop(request: str) -> None:
    """A request (named as its own loop names it) failed with an error its own loop would
    have retried: the outer loop retries it at the request's backoff, within the request's
    timeout, and its end names the request."""
    loop = _OUTER_LOOP.get()
    if loop is not None:
        loop.request_failed, loop.request = True, request


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
        retriable: Callable[[BaseException], bool] = REQUEST,
        within: RetryPolicy | None = None,
        between: Callable[[Attempts, BaseException], None] | None = None,
        give_up: Callable[[Attempts, BaseException], BaseException] | None = None,
        level: int = logging.DEBUG,
        logger: logging.Logger | None = None,
    ) -> T:
        """``call(attempts)`` until it returns, raises an error that is not ``retriable``,
        or the policy gives up (``give_up(attempts, last error)`` says how; by default
        ``Attempts.gave_up``). Each retry is logged at ``level`` naming ``what``; ``between``
        runs after each wait, before the next attempt (a metadata refresh).

        ``within``: the policy of a Kafka request (``RetryPolicy.for_client``). The call's
        ``REQUEST``-retriable errors are retried under it first, in this same loop, and only
        its end (the request's timeout) counts as a failed attempt of this policy: Spark's
        ``fetchOffset.numRetries`` attempts, each of which is an admin client call retrying
        inside. The call's client makes one attempt each time and says when it would have
        retried (``one_attempt_each``); other failures count against this policy at once."""
        tries = self.start(what)
        inner = within.start(what) if within is not None else None
        while True:
            try:
                if inner is None:
                    return call(tries)
                with one_attempt_each() as loop:
                    return call(tries)
            except Exception as e:  # noqa: BLE001 -- `retriable` decides
                error: BaseException = e
                if inner is not None and loop.request_failed and REQUEST(e):
                    inner.what = loop.request or what
                    delay = inner.failed_once()
                    if delay is not None:
                        _log_retry(log, logging.DEBUG, f"{what}: {inner.what}", inner, delay, e)
                        pause(delay)
                        if between is not None:
                            between(tries, e)
                        continue
                    error = inner.gave_up(e)
                if not retriable(error):
                    _reraise(error, e)
                delay = tries.failed_once()
                if delay is None:
                    _reraise((give_up or Attempts.gave_up)(tries, error), e)
                _log_retry(logger or log, level, what, tries, delay, error)
                pause(delay)
                if within is not None:  # a new attempt: a new request timeout
                    inner = within.start(what)
                if between is not None:
                    between(tries, error)


def _log_retry(
    logger: logging.Logger, level: int, what: str, tries: Attempts, delay: float, error
) -> None:
    logger.log(
        level,
        "%s failed (attempt %d%s), retrying in %d ms: %s",
        what,
        tries.count,
        tries.of(),
        round(delay * 1000),
        error,
    )


def _reraise(ended: BaseException, caught: BaseException) -> NoReturn:
    """Raise how a loop ended: the error caught as it is, or the one it became."""
    if ended is caught:
        raise caught
    raise ended.with_traceback(caught.__traceback__) from caught


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
        if not REQUEST(error):
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
