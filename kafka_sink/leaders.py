"""Where a write task's batches go: the partition counts of the topics it writes and the
leader of each partition it has batches for.

``Leaders`` asks the cluster's metadata for both, shares the producer's ``SendState``
(leaders and topic ids land on its partitions) and paces refreshes that fail or leave a
partition without a leader under the producer's resend policy, so a cluster that is down
is not asked in a busy loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from kafka_common.retries import ATTEMPTS
from protocol.authorization import RESOURCE_TYPES, refine, request_error
from protocol.client.cluster import KafkaClient
from protocol.errors import KafkaConnectionError, KafkaTimeoutError
from protocol.retry import Attempts, RetryPolicy, RetryRule

from .batch_state import SendState
from .options import WriterOptions
from .txn_errors import WRITE_GRANT

__all__ = ["Leaders"]

log = logging.getLogger("pykafka.sink")


class Leaders:
    """The topics' partition counts and the partitions' leaders, from the metadata."""

    def __init__(
        self,
        state: SendState,
        options: WriterOptions,
        client: KafkaClient,
        resend_policy: RetryPolicy,
    ):
        self._state = state
        self.options = options
        self.client = client
        self._resend_policy = resend_policy
        self.retry_at = 0.0  # no refresh before this (time.monotonic())
        self._tries: Attempts | None = None  # refreshes in a row without leaders
        self.missing_lookup_ms = 0  # how long the last partition_counts took

    def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        """The number of partitions of each topic that exists; missing ones are left out.
        A topic not in the metadata is asked for ``ATTEMPTS`` times (Spark's
        ``fetchOffset.numRetries``, as the driver's check of the ``topic`` option and the
        reader do), so a topic column naming a topic that does not exist fails a write in
        a second, not after ``max.block.ms``; a broker that cannot be reached is retried
        up to ``max.block.ms``. ``missing_lookup_ms``: how long the last lookup took."""
        topics = sorted(set(topics))
        found: dict[str, int] = {}
        # the answers a missing topic is asked for: ATTEMPTS in all
        answers = RetryPolicy(attempts=ATTEMPTS).start(f"topics {topics}")
        started = time.monotonic()

        def attempt(_tries) -> dict[str, int]:
            meta = self.client.refresh_metadata(topics)
            answers.begin()
            for name in topics:
                info = meta.topics.get(name)
                if info is not None and info.error_code in RESOURCE_TYPES:
                    raise refine(
                        request_error(info.error_code, "Metadata", topic=name), grant=WRITE_GRANT
                    )
                if info is not None and not info.error_code and info.partitions:
                    self._state.topic_ids[name] = info.topic_id
                    found[name] = len(info.partitions)
            if len(found) < len(topics) and not answers.exhausted():
                raise _TopicsMissing()
            return found

        def gave_up(tries, error: BaseException) -> BaseException:
            if isinstance(error, _TopicsMissing):
                return error
            return KafkaTimeoutError(
                f"could not fetch the metadata of topics {topics} within "
                f"{self.options.max_block_ms} ms (kafka.max.block.ms; {tries.summary()}): "
                f"{error}"
            )

        policy = RetryPolicy(
            backoff_ms=self.options.retry_backoff_ms or 50,
            max_backoff_ms=self.options.client_config.retry_backoff_max_ms,
            timeout_ms=self.options.max_block_ms,
        )
        try:
            return policy.run(
                f"metadata of topics {topics}",
                attempt,
                give_up=gave_up,
                retriable=RetryRule(
                    types=(_TopicsMissing, KafkaConnectionError, KafkaTimeoutError)
                ),
            )
        except _TopicsMissing:
            return dict(found)
        finally:
            self.missing_lookup_ms = round((time.monotonic() - started) * 1000)

    def refresh(self) -> None:
        """Look up the leader of every partition with batches, unless a refresh that failed
        or left one without a leader was too recent (``retry_at``)."""
        now = time.monotonic()
        if now < self.retry_at:
            return
        partitions = self._state.partitions
        topics = sorted({p.topic for p in partitions.values()})
        try:
            meta = self.client.refresh_metadata(topics)
        except (KafkaConnectionError, KafkaTimeoutError) as e:
            self.retry_at = now + self._backoff_s()
            log.debug("metadata refresh failed: %s", e)
            for p in partitions.values():  # what a batch that never left waits for
                if p.leader is None and p.queue and p.queue[0].last_error is None:
                    p.queue[0].last_error = f"no leader known: metadata refresh failed: {e}"
            return
        self._state.metadata_stale = False
        for p in partitions.values():
            info = meta.topics.get(p.topic)
            part = info.partitions.get(p.partition) if info is not None else None
            p.leader = part.leader if part is not None and part.leader >= 0 else None
            if info is not None:
                self._state.topic_ids[p.topic] = info.topic_id
        if any(p.leader is None for p in partitions.values() if p.queue):
            self._state.metadata_stale = True
            self.retry_at = now + self._backoff_s()
        else:
            self._tries = None

    def _backoff_s(self) -> float:
        """The wait before the next refresh after one that failed or left a partition
        without a leader: the resend policy's backoff, growing while refreshes keep
        failing (``kafka.retry.backoff.ms`` up to ``.max.ms``, with jitter)."""
        if self._tries is None:
            self._tries = self._resend_policy.start("metadata refresh")
        delay = self._tries.failed_once()
        return self._resend_policy.max_backoff_ms / 1000 if delay is None else delay


class _TopicsMissing(Exception):
    """Topics the metadata does not have (yet): asked again, ``ATTEMPTS`` answers in all."""
