"""Bearer tokens, their claims, and the per-process cache that refreshes them.

``BearerToken`` holds a token (as a ``protocol.config.Secret``), when it expires, and the
SASL extensions to send with it. ``jwt_claims`` reads a JWT's claims without checking the
signature (the broker checks it; the client only needs ``exp`` and the principal).

``TokenCache`` keeps one token per source per process (sources are pickled to every
executor; the cache stays behind) and fetches a new one following Kafka's
``sasl.login.refresh.*`` rules: at ``window.factor`` (0.8) of the lifetime plus up to
``window.jitter`` (0.05) of it, but no earlier than ``min.period.seconds`` (60) after the
token was fetched and, where that still allows, ``buffer.seconds`` (300) before it expires.
A refresh that fails while the cached token is still valid keeps that token (and logs);
one that fails after it expired raises.

A due refresh runs in a background thread, one per source at a time: the connection that
starts it waits for it at most ``patience_s`` (1 s), the others not at all, and they sign
in with the cached token while it is still valid. So an identity provider that is down or
slow (its retries and timeouts add up to over a minute) holds up no reconnection while a
valid token is at hand; only a connection with no valid token waits for the fetch (and
gets its error).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import random
import threading
import time
from dataclasses import dataclass, field

from protocol.retry import RELOGIN_RETRY_S
from protocol.config import Secret
from protocol.errors import ConfigError

__all__ = ["BearerToken", "RefreshPolicy", "TokenCache", "jwt_claims", "b64url", "TOKEN_CACHE"]

log = logging.getLogger("pykafka.oauth")


def b64url(data: bytes) -> str:
    """base64url without padding, as JWTs use it."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def jwt_claims(token: str, what: str) -> dict:
    """The claims (payload) of a compact JWT, unverified; ConfigError naming ``what`` (and
    never quoting the token) if it is not one."""
    parts = token.split(".")
    if len(parts) != 3:
        raise ConfigError(
            f"{what}: the token is not a JWT (expected 3 parts separated by "
            f"'.', found {len(parts)})"
        )
    try:
        claims = json.loads(_b64url_decode(parts[1]).decode("utf-8"))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise ConfigError(f"{what}: the token's payload is not base64url JSON") from None
    if not isinstance(claims, dict):
        raise ConfigError(f"{what}: the token's payload is not a JSON object")
    return claims


@dataclass(frozen=True)
class BearerToken:
    """A token, its principal, when it was fetched and expires (seconds since the epoch),
    and the SASL extensions to send with it. The repr shows no token."""

    value: Secret = field(repr=False)
    expires_at: float
    principal: str = ""
    issued_at: float = 0.0
    extensions: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.value, Secret):
            object.__setattr__(self, "value", Secret(self.value))


@dataclass(frozen=True)
class RefreshPolicy:
    """Kafka's ``sasl.login.refresh.*`` settings."""

    window_factor: float = 0.8
    window_jitter: float = 0.05
    min_period_s: float = 60.0
    buffer_s: float = 300.0

    def refresh_at(self, token: BearerToken, fetched_at: float, rng: random.Random) -> float:
        """When a token fetched at ``fetched_at`` should be replaced."""
        start = token.issued_at or fetched_at
        lifetime = max(0.0, token.expires_at - start)
        at = start + lifetime * (self.window_factor + self.window_jitter * rng.random())
        at = min(at, token.expires_at - self.buffer_s)  # the buffer, where it fits...
        return max(at, fetched_at + self.min_period_s)  # ...but never before min period


class TokenCache:
    """One token per source key per process, refreshed by ``RefreshPolicy``."""

    def __init__(
        self, clock=time.time, rng: random.Random | None = None, patience_s: float = 1.0
    ) -> None:
        self._clock, self._rng = clock, rng or random.Random()
        self._patience_s = patience_s
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[BearerToken, float]] = {}  # key -> (token, refresh)
        self._locks: dict[str, threading.Lock] = {}
        self._refreshing: dict[str, threading.Event] = {}  # key -> set when it is done

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def _key_lock(self, key: str) -> threading.Lock:
        with self._lock:
            return self._locks.setdefault(key, threading.Lock())

    def get(self, source, policy: RefreshPolicy) -> BearerToken:
        """The cached token of ``source`` (whose ``cache_key`` names it), fetched anew with
        ``source.fetch()`` when due or when ``source.changed()`` says its input changed:
        at once when there is no valid token, else in the background (the caller that
        starts it waits at most ``patience_s``; every caller goes on with the valid token
        while it is under way)."""
        key = source.cache_key
        lock = self._key_lock(key)
        with lock:  # one fetch per source at a time; other sources are not held up
            now = self._clock()
            entry = self._entries.get(key)
            if entry is None or now >= entry[0].expires_at:
                return self._fetch_now(key, source, policy, now)
            token, refresh = entry
            if now < refresh and not source.changed():
                return token
            if key in self._refreshing:  # under way: go on with the valid token
                return token
            done = self._refreshing[key] = threading.Event()
            threading.Thread(
                target=self._refresh,
                args=(key, source, policy, done),
                name="pykafka-token-refresh",
                daemon=True,
            ).start()
        done.wait(max(0.0, min(self._patience_s, token.expires_at - now)))
        with lock:
            current = self._entries.get(key, entry)[0]
        return current if self._clock() < current.expires_at else token

    def _fetch_now(self, key, source, policy: RefreshPolicy, now: float) -> BearerToken:
        """Fetch while the caller waits (there is no valid token to go on with)."""
        fresh = source.fetch()
        if fresh.expires_at <= now:
            raise ConfigError(f"{source.describe()}: the token has already expired")
        self._entries[key] = (fresh, policy.refresh_at(fresh, now, self._rng))
        return fresh

    def _refresh(self, key, source, policy: RefreshPolicy, done: threading.Event) -> None:
        """The background refresh of a token that is still valid."""
        try:
            try:
                fresh, error = source.fetch(), None
            except Exception as e:
                fresh, error = None, e
            with self._key_lock(key):
                now = self._clock()
                if fresh is not None and fresh.expires_at > now:
                    self._entries[key] = (fresh, policy.refresh_at(fresh, now, self._rng))
                    return
                current = self._entries.get(key)
                if current is None:
                    return
                problem = error if error is not None else "the new token has expired"
                log.warning(
                    "refreshing the OAUTHBEARER token failed (%s); the current "
                    "one stays valid for %.0f s",
                    problem,
                    current[0].expires_at - now,
                )
                self._entries[key] = (current[0], now + min(policy.min_period_s, RELOGIN_RETRY_S))
        finally:
            with self._key_lock(key):
                self._refreshing.pop(key, None)
            done.set()


#: The process's cache, shared by every connection of every query.
TOKEN_CACHE = TokenCache()
