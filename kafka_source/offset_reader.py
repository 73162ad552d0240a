"""The driver's offset lookups, retried as Spark's ``fetchOffset.numRetries`` and
``fetchOffset.retryIntervalMs`` say.

A lookup is one loop (``kafka_common.retries.with_retries``): Kafka's retriable errors are
retried within the request timeout, as the admin client inside each of Spark's attempts
does, and the whole lookup as Spark's ``KafkaOffsetReaderAdmin.withRetries`` does:

- ``fetchOffset.numRetries`` counts *attempts*, as in Spark (the default 3 makes three
  calls, not four); a value below 1 still makes one;
- every failure of the broker or of the connection is retried (Spark retries any
  non-fatal exception), not only the errors Kafka calls retriable; errors that come from
  the options themselves (``ConfigError``) and refusals of the principal (an authorization
  failure, naming the grant; a failed sign-in) fail at once, since another attempt cannot
  change them (Spark retries those too);
- ``latest_offsets(..., known=...)`` also retries an answer in which a partition's latest
  offset is below one the query already knows (SPARK-26267: a broker that lost its
  leadership may answer with a stale end), and gives the last answer back when the attempts
  run out, for the caller to report as data loss.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from protocol.client.cluster import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, READ_UNCOMMITTED
from kafka_common.retries import with_retries
from protocol.errors import PyKafkaError
from protocol.retry import DRIVER_LOOKUP

from .offset_specs import format_tp

log = logging.getLogger("pykafka.source")


class OffsetReader:
    """Wraps a ``KafkaClient``: offset lookups retried, everything else passed through."""

    def __init__(self, client, num_retries: int = 3, retry_interval_ms: int = 1000):
        self._client = client
        self.num_retries = num_retries
        self.retry_interval_ms = retry_interval_ms

    @property
    def attempts(self) -> int:
        """How many times a lookup is tried: ``fetchOffset.numRetries``, at least once."""
        return max(1, self.num_retries)

    def __getattr__(self, name):
        return getattr(self._client, name)

    def list_offsets(self, timestamps, isolation_level: int = READ_UNCOMMITTED):
        return self._retry(
            "fetching offsets", lambda: self._client.list_offsets(timestamps, isolation_level)
        )

    def refresh_metadata(self, topics=None):
        """The partition discovery of planning and of every micro-batch, retried like the
        offset lookups (as Spark's reader retries its whole lookup): a connection broken
        once must not fail the query."""
        return self._retry(
            "fetching metadata", lambda: self._client.refresh_metadata(topics), refresh=False
        )

    def _retry(self, what: str, call, refresh: bool = True, **rules):
        """``call`` retried by ``kafka_common.retries.with_retries``, the path the writer's
        driver-side check takes too: one loop, the client's calls inside it making one
        attempt each."""
        return with_retries(
            what,
            call,
            config=self._client.config,
            attempts=self.attempts,
            interval_ms=self.retry_interval_ms,
            log=log,
            between=self._refresh if refresh else None,
            **rules,
        )

    def _refresh(self) -> None:
        try:
            self._client.refresh_in_use()
        except PyKafkaError:
            pass

    def earliest_offsets(self, tps):
        return {
            tp: o
            for tp, (o, _) in self.list_offsets({tp: EARLIEST_TIMESTAMP for tp in tps}).items()
        }

    def metadata_and_latest(self, topics, tps, isolation_level: int = READ_UNCOMMITTED):
        """``refresh_metadata(topics)`` (retried as it is) and the latest offsets of
        ``tps`` from the same round trip where the client sends both at once
        (``KafkaClient.metadata_and_offsets``). Returns ``(metadata, latest)``; ``latest``
        is None when that answer cannot be used (see there): ask ``latest_offsets``."""
        both = getattr(self._client, "metadata_and_offsets", None)
        tps = list(tps)
        if both is None or not tps:
            return self.refresh_metadata(topics), None
        metadata, answers = self._retry(
            "fetching metadata",
            lambda: both(topics, dict.fromkeys(tps, LATEST_TIMESTAMP), isolation_level),
            refresh=False,
        )
        return metadata, (None if answers is None else {tp: o for tp, (o, _) in answers.items()})

    def latest_offsets(
        self,
        tps,
        isolation_level: int = READ_UNCOMMITTED,
        known: Mapping | None = None,
        first: Mapping | None = None,
    ):
        """The latest offset of each of ``tps``. With ``known`` (offsets the query has
        already seen), an answer below a known offset is asked again, up to
        ``fetchOffset.numRetries`` attempts ``fetchOffset.retryIntervalMs`` apart; the last
        answer is returned either way. ``first``: an answer already in hand for exactly
        ``tps`` (``metadata_and_latest``), taken as the first attempt."""
        tps = list(tps)
        answers = [first]

        def attempt() -> dict:
            answer, answers[0] = answers[0], None
            if answer is not None:
                latest = dict(answer)
            else:
                asked = dict.fromkeys(tps, LATEST_TIMESTAMP)
                answered = self._client.list_offsets(asked, isolation_level)
                latest = {tp: o for tp, (o, _) in answered.items()}
            seen = (known or {}).get
            behind = sorted((tp, seen(tp), o) for tp, o in latest.items() if seen(tp, o) > o)
            if behind:
                raise _BehindKnown(
                    latest, ", ".join(f"{format_tp(tp)} {k} -> {o}" for tp, k, o in behind)
                )
            return latest

        def gave_up(tries, e: BaseException) -> BaseException:
            if isinstance(e, _BehindKnown):
                log.warning("%s after %d attempts", e, tries.count)
                return e
            return tries.gave_up(e)

        try:
            return self._retry(
                "fetching offsets",
                attempt,
                retriable=DRIVER_LOOKUP.also(_BehindKnown),
                give_up=gave_up,
            )
        except _BehindKnown as e:
            return e.latest


class _BehindKnown(Exception):
    """An answer with a partition's latest offset below one the query has seen: asked
    again (SPARK-26267); ``latest`` is the answer, the message lists the partitions."""

    def __init__(self, latest: dict, described: str):
        super().__init__(
            "latest offsets below offsets already seen (partition, previous offset -> "
            f"fetched offset): {described}"
        )
        self.latest = latest
