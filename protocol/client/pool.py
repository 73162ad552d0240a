"""Warm cluster clients shared by the tasks of one process (a Spark Python worker).

Spark reuses a Python worker for task after task. Instead of every task opening a
``KafkaClient`` (connections, ApiVersions, Metadata; with TLS and SASL a handshake and a
sign-in each), a task checks a client out of this pool and gives it back when it ends.

- Clients are pooled per ``pool_key(config)``: every ``ClientConfig`` field except those
  that only bound waits (``NOT_IDENTITY``), so credentials decide which client a task may
  take; one task holds a client at a time.
- On checkout every connection is tested without blocking (``prune_connections``): one
  closed while idle, left with an unanswered request or whose SASL session is ending is
  dropped. A connection that breaks just after fails as any broken one, which every caller
  retries.
- Idle clients close after ``kafka.connections.max.idle.ms`` (0: no pooling, -1: kept
  until exit), at most ``max_idle_clients`` kept, all closed at exit.
- ``Lease.state`` stays with the pooled client between checkouts (the sink's idempotent
  producer identity).
- ``PYKAFKA_CLIENT_POOL=0`` in the workers' environment turns pooling off;
  ``PYKAFKA_CLIENT_POOL_MAX_IDLE`` sets ``max_idle_clients`` (default 8).

Use: ``with pool.borrow(config) as lease: lease.client.list_offsets(...)``. The
process-wide pool is ``pool.default_pool()``; ``ClientPool`` makes others (tests).
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import os
import threading
import time
from collections import Counter
from contextlib import contextmanager
from collections.abc import Callable, Iterator

from .cluster import KafkaClient
from ..config import ClientConfig

__all__ = [
    "ClientPool",
    "Lease",
    "pool_key",
    "NOT_IDENTITY",
    "default_pool",
    "borrow",
    "checkout",
    "give_back",
    "DEFAULT_MAX_IDLE_CLIENTS",
    "ENV_ENABLED",
    "ENV_MAX_IDLE",
]

log = logging.getLogger("pykafka.protocol.pool")

#: ``ClientConfig`` fields that bound waits and do not tell connections apart.
NOT_IDENTITY = frozenset(
    {
        "request_timeout_ms",
        "connect_timeout_ms",
        "retry_backoff_ms",
        "retry_backoff_max_ms",
        "metadata_max_age_ms",
        "connections_max_idle_ms",
    }
)
DEFAULT_MAX_IDLE_CLIENTS = 8
ENV_ENABLED = "PYKAFKA_CLIENT_POOL"
ENV_MAX_IDLE = "PYKAFKA_CLIENT_POOL_MAX_IDLE"


def _freeze(value):
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # e.g. a token source's factory (OAUTHBEARER): equal by its fields, so a config
        # unpickled in another task finds the same clients
        return (
            type(value).__qualname__,
            tuple((f.name, _freeze(getattr(value, f.name))) for f in dataclasses.fields(value)),
        )
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    try:
        hash(value)
    except TypeError:
        return ("unhashable", id(value))  # never equal to another object's
    return value


def pool_key(config: ClientConfig) -> tuple:
    """What identifies ``config``'s connections: every field but ``NOT_IDENTITY``. Secrets
    stay ``protocol.config.Secret`` (their repr is hidden); the key is never logged."""
    return tuple(
        (f.name, _freeze(getattr(config, f.name)))
        for f in dataclasses.fields(config)
        if f.name not in NOT_IDENTITY
    )


class Lease:
    """One checked-out client. ``client`` uses the config it was checked out with;
    ``state`` stays with the client in the pool (see the module doc); ``reused`` says
    whether the client served an earlier checkout."""

    __slots__ = ("client", "state", "key", "reused", "_pool", "_done")

    def __init__(
        self, pool: ClientPool, key: tuple, client: KafkaClient, state: dict, reused: bool
    ):
        self._pool, self.key, self.client, self.state = pool, key, client, state
        self.reused = reused
        self._done = False

    def give_back(self, reusable: bool = True) -> None:
        """Return the client (``reusable=False``: close it instead). Idempotent."""
        if not self._done:
            self._done = True
            self._pool._give_back(self, reusable)

    def __repr__(self) -> str:
        return f"Lease(reused={self.reused}, done={self._done})"


class _Idle:
    __slots__ = ("client", "state", "since", "max_idle_ms")

    def __init__(self, client, state, since, max_idle_ms):
        self.client, self.state, self.since, self.max_idle_ms = (client, state, since, max_idle_ms)

    def expires(self) -> float | None:
        if self.max_idle_ms < 0:
            return None
        return self.since + self.max_idle_ms / 1000


class ClientPool:
    """Idle ``KafkaClient`` objects per ``pool_key``; thread-safe. ``stats`` counts
    ``created``, ``reused``, ``replaced_connections`` (found closed or unusable on
    checkout), ``evicted_idle``, ``evicted_full``, ``closed``."""

    def __init__(
        self,
        *,
        enabled: bool = True,
        max_idle_clients: int = DEFAULT_MAX_IDLE_CLIENTS,
        factory: Callable[[ClientConfig], KafkaClient] = KafkaClient,
        clock: Callable[[], float] = time.monotonic,
        reaper: bool = True,
    ):
        self.enabled = enabled
        self.max_idle_clients = max(0, max_idle_clients)
        self._factory, self._clock = factory, clock
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._idle: dict[tuple, list[_Idle]] = {}  # most recently given back last
        self._closed = False
        self._reaper_wanted = reaper
        self._reaper: threading.Thread | None = None
        # When the waiting reaper wakes next by itself (its clock); a client given back
        # that expires before then wakes it, no other give-back does.
        self._reaper_due: float | None = None
        self.stats: Counter = Counter()

    # ---- checkout / give back -------------------------------------------------------------

    def checkout(self, config: ClientConfig) -> Lease:
        """A client for ``config``: an idle one of the same identity (its dead
        connections dropped, ``config``'s timeouts put on it), else a new one."""
        key = pool_key(config)
        entry = None
        if self.enabled and config.connections_max_idle_ms != 0:
            with self._lock:
                self._evict_expired_locked(self._clock())
                idle = self._idle.get(key)
                if idle:
                    entry = idle.pop()
                    if not idle:
                        del self._idle[key]
        if entry is None:
            self._count("created")
            return Lease(self, key, self._factory(config), {}, False)
        client = entry.client
        client.use_config(config)
        dropped = client.prune_connections()
        if dropped:
            log.debug("pooled client: %d connection(s) closed while idle, reopened on use", dropped)
        self._count("reused")
        self._count("replaced_connections", dropped)
        return Lease(self, key, client, entry.state, True)

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.stats[name] += n

    def _give_back(self, lease: Lease, reusable: bool) -> None:
        client = lease.client
        max_idle = client.config.connections_max_idle_ms
        keep = reusable and self.enabled and max_idle != 0 and self.max_idle_clients > 0
        if keep:
            # Anything left unanswered would desync the next task: drop it now.
            client.prune_connections()
        to_close = []
        with self._lock:
            if keep and not self._closed:
                entry = _Idle(client, lease.state, self._clock(), max_idle)
                self._idle.setdefault(lease.key, []).append(entry)
                to_close = self._evict_over_limit_locked()
                self._wake_reaper_locked(entry.expires())
            else:
                to_close = [client]
        for c in to_close:
            self._close(c)

    @contextmanager
    def borrow(self, config: ClientConfig) -> Iterator[Lease]:
        """Check a client out for the ``with`` block; it goes back whatever happens
        (connections the block left busy are closed on the way)."""
        lease = self.checkout(config)
        try:
            yield lease
        finally:
            lease.give_back()

    # ---- eviction -------------------------------------------------------------------------

    def _evict_expired_locked(self, now: float) -> list:
        gone = []
        for key in list(self._idle):
            kept = []
            for e in self._idle[key]:
                expires = e.expires()
                if expires is not None and expires <= now:
                    gone.append(e.client)
                else:
                    kept.append(e)
            if kept:
                self._idle[key] = kept
            else:
                del self._idle[key]
        self.stats["evicted_idle"] += len(gone)
        return gone

    def _evict_over_limit_locked(self) -> list:
        entries = sorted(
            ((e.since, key, e) for key, es in self._idle.items() for e in es), key=lambda t: t[0]
        )
        excess = len(entries) - self.max_idle_clients
        gone = []
        for _, key, e in entries[: max(0, excess)]:
            self._idle[key].remove(e)
            if not self._idle[key]:
                del self._idle[key]
            gone.append(e.client)
        self.stats["evicted_full"] += len(gone)
        return gone

    def _next_expiry_locked(self) -> float | None:
        times = [t for es in self._idle.values() for e in es if (t := e.expires()) is not None]
        return min(times, default=None)

    def _wake_reaper_locked(self, expires: float | None) -> None:
        """Start the reaper, or wake it when a client given back expires before it would
        wake by itself. A task's give-back does not wake it otherwise: a woken thread
        competes with the task's own for the GIL, and a task of a micro-batch gives a
        client back every time (on a busy machine that cost milliseconds a task)."""
        if not self._reaper_wanted:
            return
        if self._reaper is None or not self._reaper.is_alive():
            self._reaper_due = None
            self._reaper = threading.Thread(
                target=self._reap, name="pykafka-pool-reaper", daemon=True
            )
            self._reaper.start()
        elif expires is not None and (self._reaper_due is None or expires < self._reaper_due):
            self._wake.notify_all()

    def _reap(self) -> None:
        # Stays while the pool is in use: a worker's client is checked out by every task
        # (the pool is empty meanwhile), and a thread started again at each give-back
        # would cost each task a thread start. It ends after a whole wait with nothing
        # idle, or when the pool closes.
        empty_wakes = 0
        while True:
            with self._lock:
                empty_wakes = 0 if self._idle else empty_wakes + 1
                if self._closed or empty_wakes > 1:
                    self._reaper = self._reaper_due = None
                    return
                now = self._clock()
                gone = self._evict_expired_locked(now)
                if not gone:
                    expiry = self._next_expiry_locked()
                    wait = 60.0 if expiry is None else min(max(0.01, expiry - now), 60.0)
                    self._reaper_due = now + wait
                    self._wake.wait(wait)
                    self._reaper_due = None
            for c in gone:
                self._close(c)

    # ---- closing --------------------------------------------------------------------------

    def close(self) -> None:
        """Close every idle client; clients checked out are closed when given back."""
        with self._lock:
            self._closed = True
            gone = [e.client for es in self._idle.values() for e in es]
            self._idle.clear()
            self._wake.notify_all()
        for c in gone:
            self._close(c)

    def _close(self, client: KafkaClient) -> None:
        self._count("closed")
        try:
            client.close()
        except Exception:  # pragma: no cover - closing sockets does not fail the task
            log.debug("closing a pooled client failed", exc_info=True)


# ---- the process-wide pool ------------------------------------------------------------------


def _from_env() -> ClientPool:
    enabled = os.environ.get(ENV_ENABLED, "1").strip().lower() not in ("0", "false", "off", "no")
    try:
        size = int(os.environ.get(ENV_MAX_IDLE, DEFAULT_MAX_IDLE_CLIENTS))
    except ValueError:
        log.warning(
            "%s=%r is not a number; keeping %d idle clients",
            ENV_MAX_IDLE,
            os.environ.get(ENV_MAX_IDLE),
            DEFAULT_MAX_IDLE_CLIENTS,
        )
        size = DEFAULT_MAX_IDLE_CLIENTS
    return ClientPool(enabled=enabled, max_idle_clients=size)


_default: ClientPool | None = None
_default_lock = threading.Lock()


def default_pool() -> ClientPool:
    """This process's pool, made on first use from the environment (see the module doc)."""
    global _default
    pool = _default
    if pool is None:
        with _default_lock:
            if _default is None:
                _default = _from_env()
            pool = _default
    return pool


def checkout(config: ClientConfig) -> Lease:
    """``default_pool().checkout(config)``: give it back with ``lease.give_back()``."""
    return default_pool().checkout(config)


def give_back(lease: Lease, reusable: bool = True) -> None:
    lease.give_back(reusable)


def borrow(config: ClientConfig):
    """``with borrow(config) as lease:`` a client of the process-wide pool."""
    return default_pool().borrow(config)


def _close_default() -> None:
    if _default is not None:
        _default.close()


def _forget_after_fork() -> None:
    # A forked child shares the parent's sockets: it must neither use nor close them.
    global _default
    _default = None


atexit.register(_close_default)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
