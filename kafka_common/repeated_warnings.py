"""A warning that a stream would repeat at every micro-batch, said once and then counted.

A query that meets the same problem at every trigger (a consumer group it may not commit
to, say) would otherwise log the same warning every second and bury everything else.
``RepeatedWarnings`` belongs to one owner (a query's stream reader, so: once per query):
the first time a key comes, its warning is logged; after that each repeat is a debug line,
and at most every ``every_s`` seconds (10 minutes) a warning says it again with how many
times it came since it was last logged.
"""

from __future__ import annotations

import logging
import time
from typing import Any

__all__ = ["RepeatedWarnings", "REPEAT_EVERY_S"]

#: How often a repeated warning is logged again as a warning (with its count).
REPEAT_EVERY_S = 600.0


class RepeatedWarnings:
    """Warnings by key: logged the first time, then counted (see the module's text)."""

    def __init__(self, logger: logging.Logger, every_s: float = REPEAT_EVERY_S):
        self.logger = logger
        self.every_s = every_s
        #: key -> [when last logged as a warning (time.monotonic()), repeats since]
        self._seen: dict[str, list] = {}

    def warn(self, key: str, message: str, *args: Any) -> None:
        now = time.monotonic()
        seen = self._seen.get(key)
        if seen is None:
            self._seen[key] = [now, 0]
            self.logger.warning(message, *args)
            return
        seen[1] += 1
        if now - seen[0] >= self.every_s:
            self.logger.warning(
                message + " (the same warning %d times since it was last logged, %.0f min ago)",
                *args,
                seen[1],
                (now - seen[0]) / 60,
            )
            seen[0], seen[1] = now, 0
            return
        self.logger.debug(message + " (again: %d times since the warning)", *args, seen[1])

    def forget(self, prefix: str) -> None:
        """The problems of the keys starting with ``prefix`` went away: the next
        occurrence of one is warned about again."""
        for key in [k for k in self._seen if k.startswith(prefix)]:
            del self._seen[key]
