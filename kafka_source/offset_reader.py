"""The driver's offset lookups, retried as Spark's ``fetchOffset.numRetries`` and
``fetchOffset.retryIntervalMs`` say.

Each attempt is a ``KafkaClient`` call, which already follows leaders and retries retriable
errors within the request timeout; this layer retries the whole lookup a few more times
(a broker restarting, a controller moving) before the query gives up.
"""

from __future__ import annotations

import logging
import time

from protocol.cluster import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, READ_UNCOMMITTED
from protocol.errors import (BrokerError, KafkaConnectionError, KafkaTimeoutError,
                             PyKafkaError)

log = logging.getLogger("pykafka.source")


def _retriable(e: PyKafkaError) -> bool:
    return isinstance(e, (KafkaConnectionError, KafkaTimeoutError)) or (
        isinstance(e, BrokerError) and e.retriable)


class OffsetReader:
    """Wraps a ``KafkaClient``: offset lookups retried, everything else passed through."""

    def __init__(self, client, num_retries: int = 3, retry_interval_ms: int = 1000):
        self._client = client
        self.num_retries = num_retries
        self.retry_interval_ms = retry_interval_ms

    def __getattr__(self, name):
        return getattr(self._client, name)

    def list_offsets(self, timestamps, isolation_level: int = READ_UNCOMMITTED):
        return self._retry("fetching offsets",
                           lambda: self._client.list_offsets(timestamps, isolation_level))

    def refresh_metadata(self, topics=None):
        """The partition discovery of planning and of every micro-batch, retried like the
        offset lookups (as Spark's reader retries its whole lookup): a connection broken
        once must not fail the query."""
        return self._retry("fetching metadata", lambda: self._client.refresh_metadata(topics),
                           refresh=False)

    def _retry(self, what: str, call, refresh: bool = True):
        attempt = 0
        while True:
            try:
                return call()
            except PyKafkaError as e:
                attempt += 1
                if not _retriable(e) or attempt > self.num_retries:
                    raise
                log.warning("%s failed (attempt %d of %d), retrying in %d ms: %s", what,
                            attempt, self.num_retries + 1, self.retry_interval_ms, e)
                time.sleep(self.retry_interval_ms / 1000)
                if refresh:
                    try:
                        self._client.refresh_metadata()
                    except PyKafkaError:
                        pass

    def earliest_offsets(self, tps):
        return {tp: o for tp, (o, _) in
                self.list_offsets({tp: EARLIEST_TIMESTAMP for tp in tps}).items()}

    def latest_offsets(self, tps, isolation_level: int = READ_UNCOMMITTED):
        return {tp: o for tp, (o, _) in
                self.list_offsets({tp: LATEST_TIMESTAMP for tp in tps}, isolation_level).items()}
