"""A task's first Fetch, shared by the ranges it reads (``SharedFetch``), and the Fetch of
one reader (``start_fetch``): what ``kafka_source.fetcher`` sends.

A task that reads many small ranges sends one Fetch request per broker for the first answer
of all of them, not one per range; each reader takes its partition's part. With
``kafka.client.rack``, the partitions whose leaders name a closer replica are asked there at
once, in one Fetch per replica.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Protocol

from protocol.client.read_replicas import ReadReplicas
from protocol.retry import is_retriable
from protocol.errors import BrokerError, KafkaConnectionError, KafkaTimeoutError

if TYPE_CHECKING:
    from protocol.client.cluster import KafkaClient
    from protocol.client.leader_requests import PendingFetch

__all__ = ["SharedFetch", "start_fetch", "InFlight"]


class InFlight(Protocol):
    """A reader's Fetch in flight: its own (``PendingFetch``) or its part of a
    ``SharedFetch``. ``result`` waits at most ``timeout_ms`` for each broker's answer;
    the reader's ``deadline`` (a ``time.monotonic()``) bounds a lone Fetch's wait too, and
    what a shared one sends again on the way."""

    def result(self, timeout_ms: int | None = None, deadline: float | None = None) -> dict: ...

    def cancel(self) -> None: ...


def start_fetch(
    client: KafkaClient, o, offsets: dict, deadline: float | None = None
) -> PendingFetch:
    """A Fetch of ``offsets`` with the reader's fetch options, sent (one request per
    leader), not waited for; sending goes on no longer than until ``deadline``."""
    return client.start_fetch(
        offsets,
        max_wait_ms=o.fetch_max_wait_ms,
        min_bytes=o.fetch_min_bytes,
        max_bytes=o.fetch_max_bytes,
        partition_max_bytes=o.max_partition_fetch_bytes,
        isolation_level=o.isolation_level_code,
        deadline=deadline,
    )


class SharedFetch:
    """One Fetch (a request per leader) holding the first answer of several readers; each
    takes its partition's part (``share(tp)``), and only its own: the part is dropped from
    here once taken.

    A failure costs one recovery, not one per partition it touched: when a broker's part
    fails (its connection cut, no answer in time, an error for its whole request, or a
    retriable error for its partitions) the other brokers' answers are kept; the first
    reader of the failed partitions gets the failure and recovers as a lone reader does
    (one warning, the backoff, a metadata refresh), and the next reader of them asks again,
    after that recovery, in one Fetch for all of them still waiting (at the offsets first
    asked for)."""

    def __init__(self, client: KafkaClient, options, offsets: dict):
        self._client, self._options = client, options
        self._offsets = dict(offsets)  # partition -> offset, until its reader takes it
        self._pending: PendingFetch | None = start_fetch(client, options, offsets)
        self._parts: dict = {}
        self._failed: dict[tuple, _Failure] = {}

    def share(self, tp) -> _Share:
        return _Share(self, tp)

    def part(self, tp, timeout_ms: int | None, deadline: float | None = None) -> dict:
        """``tp``'s part of the answers, waited for (``InFlight.result``) by its reader."""
        if tp not in self._offsets:
            return {}  # taken already
        if tp not in self._parts and tp not in self._failed:
            self._collect(timeout_ms, deadline)
        failure = self._failed.get(tp)
        if failure is not None and failure.handed:  # recovered from: ask again
            self._ask_again(timeout_ms, deadline)
            failure = self._failed.get(tp)
        del self._offsets[tp]
        if failure is not None:  # this reader recovers, for all the partitions it failed
            failure.handed = True
            del self._failed[tp]
            if failure.error is not None:
                raise failure.error
        return {tp: self._parts.pop(tp)} if tp in self._parts else {}

    def _collect(self, timeout_ms: int | None, deadline: float | None, follow: bool = True) -> None:
        """The answers of the Fetch in flight: parts kept, failures noted per broker; with
        ``follow``, partitions whose leader named a closer replica asked there at once."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        parts, failed = pending.results(timeout_ms)  # each broker its wait, as a lone one
        for tps, error in failed:
            self._note(tps, _Failure(error))
        self._parts.update(parts)
        retried: dict[int, _Failure] = {}  # parts with a retriable error, by the error
        for tp, part in parts.items():
            code = part["error_code"]
            if code and is_retriable(BrokerError.for_code(code)):
                self._note([tp], retried.setdefault(code, _Failure(None)))
        redirected = [
            tp
            for tp, part in parts.items()
            if tp in self._offsets and ReadReplicas.is_redirect(part)
        ]
        if redirected and follow and self._client.read_replicas is not None:
            self._follow(redirected, timeout_ms, deadline)

    def _follow(self, tps: list, timeout_ms: int | None, deadline: float | None) -> None:
        """One Fetch for every partition whose leader named a closer replica to read from
        (``kafka.client.rack``): the replicas answer for them, not each reader alone."""
        waiting = {tp: self._offsets[tp] for tp in tps}
        for tp in waiting:
            del self._parts[tp]
        self._fetch_again(waiting, timeout_ms, deadline, follow=False)

    def _note(self, tps, failure: _Failure) -> None:
        for tp in tps:
            if tp in self._offsets:
                self._failed[tp] = failure

    def _ask_again(self, timeout_ms: int | None, deadline: float | None) -> None:
        """One Fetch for every partition whose failure a reader recovered from."""
        waiting = {tp: self._offsets[tp] for tp, f in self._failed.items() if f.handed}
        for tp in waiting:
            del self._failed[tp]
            self._parts.pop(tp, None)
        self._fetch_again(waiting, timeout_ms, deadline)

    def _fetch_again(
        self, waiting: dict, timeout_ms: int | None, deadline: float | None, follow: bool = True
    ) -> None:
        try:
            self._pending = start_fetch(self._client, self._options, waiting, deadline)
        except (KafkaConnectionError, KafkaTimeoutError, BrokerError) as e:
            self._note(waiting, _Failure(e))
            return
        self._collect(timeout_ms, deadline, follow=follow)

    def cancel(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None


class _Failure:
    """A failure of a ``SharedFetch``'s answer for some of its partitions: ``error`` (None
    when the parts themselves carry a retriable error) and whether a reader took it on."""

    __slots__ = ("error", "handed")

    def __init__(self, error: Exception | None):
        self.error, self.handed = error, False


class _Share(NamedTuple):
    """A reader's view of a ``SharedFetch``: what ``PendingFetch`` is to a lone reader."""

    fetch: SharedFetch
    tp: tuple

    def result(self, timeout_ms: int | None = None, deadline: float | None = None) -> dict:
        return self.fetch.part(self.tp, timeout_ms, deadline)

    def cancel(self) -> None:
        self.fetch.cancel()
