"""Delegation tokens, on the driver: create, renew, expire and describe them.

A principal signed in to Kafka with its own credentials (SCRAM, PLAIN, OAUTHBEARER,
Kerberos...) asks a broker for a token: an id and an HMAC. Anyone holding both signs in as
that principal with SCRAM (``ClientConfig.sasl_token_auth``), so the driver hands its tasks
the token instead of its own credentials. A token expires ``delegation.token.expiry.time.ms``
(a day by default) after it was issued or last renewed, and never lives past its maximum
lifetime (``delegation.token.max.lifetime.ms``, a week).

- ``create_token``, ``renew_token``, ``expire_token``, ``describe_tokens``: one request each
  on a ``KafkaClient`` (any broker answers: it forwards to the controller), under the
  client's retry policy; the token errors are never retried and say what to change.
- ``TokenKeeper``: the driver's current token, found among its principal's live tokens
  (``reusable_token``) or created, renewed at ``RENEW_AT`` of its life and replaced near
  its maximum lifetime or once expired.
- ``token_config``: the ``ClientConfig`` that signs in with a token instead of the
  driver's credentials.
"""

from __future__ import annotations

import base64
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from dataclasses import dataclass, field

from ..config import ClientConfig, Secret
from ..errors import BrokerError, ConfigError, KafkaTimeoutError
from ..retry import RELOGIN_RETRY_S, RetryPolicy, is_retriable
from ..schemas import (
    CREATE_DELEGATION_TOKEN,
    DESCRIBE_DELEGATION_TOKEN,
    EXPIRE_DELEGATION_TOKEN,
    RENEW_DELEGATION_TOKEN,
)

__all__ = [
    "DelegationToken",
    "TOKEN_MECHANISMS",
    "RENEW_AT",
    "REPLACE_AT",
    "create_token",
    "renew_token",
    "expire_token",
    "describe_tokens",
    "token_config",
    "wait_known",
    "renewal_due",
    "must_replace",
    "reusable_token",
    "in_background",
    "TokenKeeper",
]

log = logging.getLogger("pykafka.protocol.delegation_tokens")

#: The mechanisms a token signs in with (Spark's spark.kafka.clusters.*.sasl.token.mechanism).
TOKEN_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
#: Renew once this share of the time between the last renewal and the expiry has passed
#: (Spark renews its credentials at 75% of their life).
RENEW_AT = 0.75
#: Create a new token once this share of a token's maximum lifetime has passed: a renewal
#: cannot carry it past its maximum, and the tasks handed it last keep the rest (a quarter
#: of the maximum lifetime) to finish.
REPLACE_AT = 0.75

#: What each token error means for the user, by error code.
_HINTS = {
    61: "the brokers issue no delegation tokens: set delegation.token.secret.key "
    "(delegation.token.master.key before Kafka 3) on every broker",
    63: "the signed-in principal neither owns this token nor may renew it",
    64: "a delegation token is issued only to a principal signed in with SASL over "
    "SASL_PLAINTEXT or SASL_SSL with its own credentials, not over PLAINTEXT or SSL "
    "and not with a delegation token",
    65: "the signed-in principal may not create, renew or describe this token "
    "(grant it CreateTokens or DescribeTokens on the User resource)",
    66: "the delegation token has expired: the driver creates a new one",
    62: "the broker knows no such delegation token (expired and removed?)",
}


@dataclass
class DelegationToken:
    """A token as the broker issued it. ``hmac`` is the SCRAM password (base64 of the
    HMAC), a ``Secret``; times in milliseconds since the epoch."""

    token_id: str
    hmac: Secret = field(repr=False)
    owner: str
    issue_ms: int
    expiry_ms: int
    max_ms: int
    #: When this token was issued or last renewed (ms since the epoch).
    renewed_ms: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.hmac, Secret):
            self.hmac = Secret(self.hmac)
        self.renewed_ms = self.renewed_ms or self.issue_ms

    @property
    def hmac_bytes(self) -> bytes:
        return base64.b64decode(self.hmac.reveal())


def _check(code: int, request: str, token_id: str | None = None) -> None:
    if not code:
        return
    about = f" (token {token_id})" if token_id else ""
    hint = _HINTS.get(code)
    raise BrokerError.for_code(code, f"{request}{about}: {hint}" if hint else request + about)


def _ask(client, api, body: dict, token_id: str | None = None) -> dict:
    """The answer of any broker to ``api`` (it forwards to the controller), under the
    client's retry policy; a token error raises."""

    def attempt() -> dict:
        answer = client._any_connection().request(api, body)
        _check(answer["error_code"], api.name, token_id)
        return answer

    return client.retrying(api.name, attempt)


def _principal(name: str) -> dict:
    """``"User:name"`` as the protocol's principal struct."""
    return dict(zip(("principal_type", "principal_name"), name.split(":", 1)))


def _token(answer: dict, owner_type: str = "principal_type") -> DelegationToken:
    return DelegationToken(
        token_id=answer["token_id"],
        hmac=Secret(base64.b64encode(bytes(answer["hmac"])).decode("ascii")),
        owner=f"{answer[owner_type]}:{answer['principal_name']}",
        issue_ms=answer.get("issue_timestamp_ms", answer.get("issue_timestamp", 0)),
        expiry_ms=answer.get("expiry_timestamp_ms", answer.get("expiry_timestamp", 0)),
        max_ms=answer.get("max_timestamp_ms", answer.get("max_timestamp", 0)),
    )


def create_token(
    client, *, max_lifetime_ms: int = -1, renewers: Iterable[str] = ()
) -> DelegationToken:
    """A new token for the principal ``client`` signed in as; ``renewers`` as
    ``"User:name"`` (the owner may always renew); -1: the brokers' maximum lifetime."""
    body = {
        "owner_principal_type": None,
        "owner_principal_name": None,
        "renewers": [_principal(r) for r in renewers],
        "max_lifetime_ms": max_lifetime_ms,
    }
    token = _token(_ask(client, CREATE_DELEGATION_TOKEN, body))
    log.info("created delegation token %s for %s", token.token_id, token.owner)
    return token


def _extend(client, api, token: DelegationToken, period_field: str, period_ms: int) -> int:
    body = {"hmac": token.hmac_bytes, period_field: period_ms}
    return _ask(client, api, body, token.token_id)["expiry_timestamp_ms"]


def renew_token(client, token: DelegationToken, renew_period_ms: int = -1) -> int:
    """Renew ``token`` (-1: by the brokers' expiry time); returns its new expiry time."""
    return _extend(client, RENEW_DELEGATION_TOKEN, token, "renew_period_ms", renew_period_ms)


def expire_token(client, token: DelegationToken, expiry_time_period_ms: int = -1) -> int:
    """Make ``token`` expire in ``expiry_time_period_ms`` (-1: now)."""
    return _extend(
        client, EXPIRE_DELEGATION_TOKEN, token, "expiry_time_period_ms", expiry_time_period_ms
    )


def describe_tokens(client, owners: Iterable[str] | None = None) -> list[DelegationToken]:
    """The tokens the signed-in principal may see (of ``owners``, ``"User:name"``, if given)."""
    body = {"owners": None if owners is None else [_principal(o) for o in owners]}
    return [_token(t) for t in _ask(client, DESCRIBE_DELEGATION_TOKEN, body)["tokens"]]


def wait_known(client, token: DelegationToken) -> None:
    """Until the broker ``client`` talks to lists ``token`` (within ``request.timeout.ms``):
    the controller issues it, the brokers learn it from the metadata log a moment later,
    and a sign-in with it before then fails."""
    tries = RetryPolicy.for_client(client.config, client.config.request_timeout_ms).start(
        f"delegation token {token.token_id} known to the brokers"
    )
    while token.token_id not in {t.token_id for t in describe_tokens(client)}:
        if tries.expired() or not tries.wait():
            raise KafkaTimeoutError(
                f"delegation token {token.token_id}: the brokers did not know it within "
                f"{client.config.request_timeout_ms} ms ({tries.summary()})"
            )


def token_config(
    config: ClientConfig, token: DelegationToken, mechanism: str = "SCRAM-SHA-512"
) -> ClientConfig:
    """``config`` signing in with ``token`` instead of its own SASL credentials: every
    ``sasl_*`` setting (passwords, token sources, keytabs) back to its default."""
    if mechanism not in TOKEN_MECHANISMS:
        raise ConfigError(
            f"delegationToken.mechanism: unsupported {mechanism!r}; use one of "
            f"{', '.join(TOKEN_MECHANISMS)}"
        )
    cleared: dict[str, Any] = {
        f.name: f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        for f in dataclasses.fields(ClientConfig)
        if f.name.startswith("sasl_")
    }
    cleared.update(
        sasl_mechanism=mechanism,
        sasl_username=token.token_id,
        sasl_password=token.hmac,
        sasl_token_auth=True,
    )
    return dataclasses.replace(config, **cleared)


def renewal_due(token: DelegationToken, now_ms: int) -> bool:
    """Whether ``RENEW_AT`` of the time between ``token``'s last renewal and its expiry
    has passed."""
    return now_ms >= token.renewed_ms + (token.expiry_ms - token.renewed_ms) * RENEW_AT


def must_replace(token: DelegationToken, now_ms: int) -> bool:
    """Whether ``token`` expired or is past ``REPLACE_AT`` of its maximum lifetime."""
    return now_ms >= token.expiry_ms or now_ms >= (
        token.issue_ms + (token.max_ms - token.issue_ms) * REPLACE_AT
    )


def reusable_token(
    tokens: Iterable[DelegationToken], owner: str, now_ms: int
) -> DelegationToken | None:
    """Of the described ``tokens``, the one of ``owner`` that lives longest and needs no
    replacement yet; None when there is none."""
    usable = [t for t in tokens if t.owner == owner and not must_replace(t, now_ms)]
    return max(usable, key=lambda t: (t.max_ms, t.expiry_ms), default=None)


def in_background(delay_s: float, action: Callable[[], None]) -> None:
    """Run ``action`` in a daemon thread after ``delay_s`` seconds."""
    timer = threading.Timer(delay_s, action)
    timer.daemon = True
    timer.start()


#: DELEGATION_TOKEN_NOT_FOUND, DELEGATION_TOKEN_EXPIRED: a described token gone meanwhile.
_GONE = (62, 66)


class TokenKeeper:
    """The driver's delegation token in this process: ``current()`` finds ``owner``'s live
    token (``reusable_token``: another process of the driver may have created it) or
    creates one, renews it at ``RENEW_AT`` of the time to its expiry, and finds or creates
    another past ``REPLACE_AT`` of its maximum lifetime or once it expired.
    ``client_factory()`` gives a ``KafkaClient`` signed in with the driver's own
    credentials; ``owner`` (``"User:name"``, None: unknown until the first token is
    created) is the principal they sign in as; ``clock`` gives seconds since the epoch;
    ``schedule(delay_s, action)``, if given, runs ``action`` later (``in_background``):
    every token handed out is then renewed when due until its maximum lifetime."""

    def __init__(
        self,
        client_factory: Callable[[], Any],
        *,
        owner: str | None = None,
        max_lifetime_ms: int = -1,
        clock: Callable[[], float] = time.time,
        schedule: Callable[[float, Callable[[], None]], Any] | None = None,
    ) -> None:
        self._client_factory = client_factory
        self._owner = owner
        self._max_lifetime_ms = max_lifetime_ms
        self._clock = clock
        self._schedule = schedule
        self._lock = threading.Lock()
        self._renewing: set[str] = set()
        self.token: DelegationToken | None = None

    def __repr__(self) -> str:
        return f"TokenKeeper(token={self.token!r})"

    def current(self) -> DelegationToken:
        with self._lock:
            now = int(self._clock() * 1000)
            token = self.token
            if token is None or must_replace(token, now):
                self.token = token = self._with_client(lambda c: self._find_or_create(c, now))
            elif renewal_due(token, now):
                self._with_client(lambda c: self._renew(c, token, now))
            if self._schedule is not None and token.token_id not in self._renewing:
                self._renewing.add(token.token_id)
                self._renew_later(token)
            return token

    def _renew_later(self, token: DelegationToken) -> None:
        """With ``schedule``: renew a token handed out in the background when due, until
        no renewal extends it, as long as this process lives: the tasks that got it may
        run past the next ``current()`` (a stream calls it only between micro-batches)."""
        due = token.renewed_ms + (token.expiry_ms - token.renewed_ms) * RENEW_AT
        self._schedule_renewal(max(0.0, due / 1000 - self._clock()), token)

    def _schedule_renewal(self, delay_s: float, token: DelegationToken) -> None:
        assert self._schedule is not None
        self._schedule(delay_s, lambda: self._renew_in_background(token))

    def _renew_in_background(self, token: DelegationToken) -> None:
        with self._lock:
            now = int(self._clock() * 1000)
            if token.expiry_ms >= token.max_ms or now >= token.expiry_ms:
                self._renewing.discard(token.token_id)
                return
            try:
                if renewal_due(token, now):  # unless current() renewed it meanwhile
                    self._with_client(lambda c: self._renew(c, token, now))
            except Exception as e:  # a background thread: say why
                if not is_retriable(e):
                    log.warning("delegation token %s not renewed: %s", token.token_id, e)
                    self._renewing.discard(token.token_id)
                    return
                # the cluster or the way to it: again while the token lives (as a failed
                # background re-login tries again), at most halfway to its expiry
                left_s = max(0.0, token.expiry_ms / 1000 - self._clock())
                delay = min(RELOGIN_RETRY_S, left_s / 2)
                log.warning(
                    "delegation token %s not renewed (again in %.0f s): %s",
                    token.token_id,
                    delay,
                    e,
                )
                self._schedule_renewal(delay, token)
                return
        self._renew_later(token)

    def _find_or_create(self, client, now: int) -> DelegationToken:
        if self._owner is not None:
            found = reusable_token(describe_tokens(client, [self._owner]), self._owner, now)
            if found is not None:
                try:
                    if renewal_due(found, now):
                        self._renew(client, found, now)
                    log.info("reusing delegation token %s of %s", found.token_id, found.owner)
                    return found
                except BrokerError as e:
                    if e.code not in _GONE:
                        raise
        token = create_token(client, max_lifetime_ms=self._max_lifetime_ms)
        wait_known(client, token)
        self._owner = token.owner
        return token

    def _renew(self, client, token: DelegationToken, now: int) -> None:
        token.expiry_ms = renew_token(client, token)
        token.renewed_ms = now
        log.info("renewed delegation token %s until %d", token.token_id, token.expiry_ms)

    def _with_client(self, call):
        client = self._client_factory()
        try:
            return call(client)
        finally:
            client.close()
