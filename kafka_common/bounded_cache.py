"""``BoundedCache``: the per-process caches of schemas, decoders and encoders, bounded.

A Python worker lives as long as its executor and reads whatever topics its tasks are
given: a cache keyed by schema id, schema text or option set grows with every schema a
long-lived cluster ever meets unless it forgets. Each cache keeps at most ``limit``
entries and forgets the least recently used one first; a forgotten entry is built again
(one registry call, one parse) when it is needed again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar
from collections.abc import Callable, Hashable

__all__ = ["BoundedCache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    """A thread-safe map of at most ``limit`` entries, least recently used forgotten first."""

    def __init__(self, limit: int):
        if limit < 1:
            raise ValueError("a cache holds at least one entry")
        self.limit = limit
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: K, value: V) -> V:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.limit:
                self._items.popitem(last=False)
        return value

    def get_or_make(self, key: K, make: Callable[[], V]) -> V:
        """The cached value, else ``make()``'s (built outside the lock: two threads may
        both build it, and the second one's is kept; entries are equal by construction)."""
        found = self.get(key)
        return found if found is not None else self.put(key, make())

    def keys(self) -> list[K]:
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
