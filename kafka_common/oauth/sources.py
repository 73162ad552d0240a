"""Where OAUTHBEARER tokens come from: each source fetches one ``BearerToken``.

- ``ClientCredentials``: OIDC client credentials (KIP-768): a POST of
  ``grant_type=client_credentials`` (and ``scope``) with HTTP Basic authentication to the
  token endpoint, over verified TLS, retried with Kafka's ``sasl.login.retry.backoff.*``.
- ``TokenFile``: a token kept in a file (Kafka's ``file:`` endpoint URL), read again when
  the file changes.
- ``TokenCallback``: a Python callable ``module:function`` with confluent-kafka's
  ``oauth_cb`` contract: called with the configuration string, it returns
  ``(token, expiry)`` or ``(token, expiry, principal[, extensions])``, expiry in seconds
  since the epoch.
- ``UnsecuredToken``: Kafka's unsecured JWS (``alg: none``) built from the JAAS
  ``unsecuredLogin*`` options, for development brokers.

A source is small and picklable (the driver builds it, every executor uses it); its repr
holds no secret. ``cache_key`` names it in ``tokens.TOKEN_CACHE`` (a digest, so no secret
shows), ``changed()`` says whether its input changed since the last fetch, and
``describe()`` names the options to look at in an error.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Protocol, cast

from protocol.config import Secret, redact
from protocol.errors import AuthenticationError, ConfigError
from protocol.retry import RetryPolicy, RetryRule
from protocol.sasl_oauthbearer import check_extensions, check_token

from .. import trust
from ..bounded_cache import BoundedCache
from .tokens import BearerToken, b64url, jwt_claims

__all__ = ["ClientCredentials", "TokenFile", "TokenCallback", "UnsecuredToken", "TokenSource"]

log = logging.getLogger("pykafka.oauth")

_MAX_TOKEN_RESPONSE = 1 << 20  # bytes; a token response is a few KB
_MAX_ERROR_TEXT = 300
_ENDPOINT_OPTION = "kafka.sasl.oauthbearer.token.endpoint.url"


def _digest(*parts: object) -> str:
    return hashlib.sha256(repr(parts).encode("utf-8")).hexdigest()[:32]


def _claims_token(value: str, what: str, sub_claim: str = "sub") -> BearerToken:
    """A BearerToken from a JWT: ``exp`` gives its expiry, ``sub_claim`` its principal, as
    Kafka's LoginAccessTokenValidator demands."""
    check_token(value, f"{what}: the token")
    claims = jwt_claims(value, what)
    exp = claims.get("exp")
    if isinstance(exp, bool) or not isinstance(exp, (int, float)):
        raise ConfigError(f"{what}: the token has no numeric 'exp' claim")
    principal = claims.get(sub_claim)
    if not isinstance(principal, str) or not principal:
        raise ConfigError(
            f"{what}: the token has no '{sub_claim}' claim (see "
            "kafka.sasl.oauthbearer.sub.claim.name)"
        )
    iat = claims.get("iat")
    issued = float(iat) if isinstance(iat, (int, float)) and not isinstance(iat, bool) else 0.0
    return BearerToken(Secret(value), float(exp), principal, issued)


class TokenSource(Protocol):
    """What ``TOKEN_CACHE`` uses of a token source (these classes, AWS MSK's)."""

    @property
    def cache_key(self) -> str: ...
    def describe(self) -> str: ...
    def fetch(self) -> BearerToken: ...

    def changed(self) -> bool:
        """Whether the source's input changed since its last fetch: never, but for a file."""
        return False


class _Unreachable(Exception):
    """The token endpoint could not be reached or answered 5xx: retried."""


@dataclass(frozen=True)
class ClientCredentials(TokenSource):
    """OIDC client credentials against ``endpoint``."""

    endpoint: str
    client_id: str
    client_secret: Secret = field(repr=False)
    scope: str = ""
    sub_claim: str = "sub"
    urlencode_header: bool = False
    connect_timeout_ms: int = 10_000
    read_timeout_ms: int = 10_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 10_000
    cafile: str | None = None

    @property
    def cache_key(self) -> str:
        return "oidc:" + _digest(
            self.endpoint, self.client_id, self.client_secret.reveal(), self.scope, self.sub_claim
        )

    def describe(self) -> str:
        return (
            "kafka.sasl.oauthbearer.token.endpoint.url and the clientId, clientSecret "
            "and scope of kafka.sasl.jaas.config"
        )

    def _request(self) -> urllib.request.Request:
        user, secret = self.client_id, self.client_secret.reveal()
        if self.urlencode_header:
            user, secret = urllib.parse.quote(user, safe=""), urllib.parse.quote(secret, safe="")
        import base64

        basic = base64.b64encode(f"{user}:{secret}".encode()).decode("ascii")
        form = {"grant_type": "client_credentials"}
        if self.scope:
            form["scope"] = self.scope
        return urllib.request.Request(
            self.endpoint,
            data=urllib.parse.urlencode(form).encode("ascii"),
            method="POST",
            headers={
                "Authorization": f"Basic {basic}",
                "Accept": "application/json",
                "Content-Type": "application/x-www-form-urlencoded",
                "Cache-Control": "no-cache",
            },
        )

    def fetch(self) -> BearerToken:
        """A token from the endpoint (checked against ``PYKAFKA_ALLOWED_URLS`` in this
        process), no redirect followed, the answer bounded in size and time."""
        trust.check_url(self.endpoint, _ENDPOINT_OPTION, "token endpoint")
        context = None
        if self.endpoint.lower().startswith("https:"):
            context = ssl.create_default_context(cafile=self.cafile)
        timeout = max(self.connect_timeout_ms, self.read_timeout_ms) / 1000

        def attempt(_tries) -> bytes:
            try:
                with trust.open_url(self._request(), timeout=timeout, context=context) as response:
                    return trust.read_bounded(
                        response,
                        _MAX_TOKEN_RESPONSE,
                        time.monotonic() + timeout,
                        f"the token endpoint {self.endpoint}",
                    )
            except trust.RedirectRefused as e:
                raise trust.RedirectRefused(f"{_ENDPOINT_OPTION}: {e}") from None
            except ConfigError as e:  # sent too much
                raise AuthenticationError(str(e)) from None
            except urllib.error.HTTPError as e:
                text = redact(_error_text(e), self.client_secret.reveal())
                if e.code < 500:  # the endpoint refused us: retrying will not help
                    raise AuthenticationError(
                        f"the token endpoint {self.endpoint} refused the client credentials "
                        f"of client {self.client_id!r} "
                        f"(HTTP {e.code}{': ' + text if text else ''}); "
                        f"check {self.describe()}"
                    ) from None
                raise _Unreachable(f"HTTP {e.code}") from None
            except (urllib.error.URLError, OSError) as e:
                reason = getattr(e, "reason", e)
                if isinstance(reason, ssl.SSLError):
                    raise AuthenticationError(
                        f"TLS to the token endpoint {self.endpoint} failed: {reason}"
                    ) from None
                raise _Unreachable(str(reason)) from None

        def gave_up(tries, error: BaseException) -> BaseException:
            return AuthenticationError(
                f"the token endpoint {self.endpoint} could not be reached after {tries.count} "
                f"attempts ({error}); check kafka.sasl.oauthbearer.token.endpoint.url "
                "and kafka.sasl.login.retry.backoff.max.ms"
            )

        policy = RetryPolicy.within_backoff(self.retry_backoff_ms, self.retry_backoff_max_ms)
        body = policy.run(
            f"token endpoint {self.endpoint}",
            attempt,
            retriable=RetryRule(types=(_Unreachable,)),
            give_up=gave_up,
            level=logging.INFO,
            logger=log,
        )
        if len(body) > _MAX_TOKEN_RESPONSE:
            raise AuthenticationError(
                f"the token endpoint {self.endpoint} sent more than {_MAX_TOKEN_RESPONSE} bytes"
            )
        try:
            payload = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise AuthenticationError(
                f"the token endpoint {self.endpoint} did not answer with JSON"
            ) from None
        token = payload.get("access_token") if isinstance(payload, dict) else None
        if not isinstance(token, str) or not token:
            raise AuthenticationError(
                f"the token endpoint {self.endpoint} answered without an access_token"
            )
        return _claims_token(token, f"the token from {self.endpoint}", self.sub_claim)


def _error_text(error: urllib.error.HTTPError) -> str:
    """The OAuth error and description of a refused token request, shortened."""
    try:
        raw = error.read(4096).decode("utf-8", "replace")
    except OSError:
        return ""
    try:
        data = json.loads(raw)
        if isinstance(data, dict):
            raw = " - ".join(str(data[k]) for k in ("error", "error_description") if k in data)
    except ValueError:
        pass
    return raw[:_MAX_ERROR_TEXT]


#: path -> (mtime_ns, size) when last read (None: it could not be stat'ed)
_FILE_SEEN: BoundedCache[str, tuple[int, int] | None] = BoundedCache(64)


@dataclass(frozen=True)
class TokenFile(TokenSource):
    """A token (a JWT) in a file, read again whenever the file changes."""

    path: str
    sub_claim: str = "sub"
    url: str = ""  # as the option gave it; the path's file: URL when empty

    @classmethod
    def from_url(cls, url: str, sub_claim: str = "sub") -> TokenFile:
        parsed = urllib.parse.urlparse(url)
        return cls(urllib.request.url2pathname(parsed.path), sub_claim, url)

    def check(self) -> None:
        """The file's URL must be in ``PYKAFKA_ALLOWED_URLS`` of this process."""
        url = self.url or "file://" + urllib.request.pathname2url(os.path.abspath(self.path))
        trust.check_url(url, _ENDPOINT_OPTION, "token file")

    @property
    def cache_key(self) -> str:
        return "file:" + _digest(self.path, self.sub_claim)

    def describe(self) -> str:
        return f"the token file {self.path} (kafka.sasl.oauthbearer.token.endpoint.url)"

    def _stat(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def changed(self) -> bool:
        return self._stat() != _FILE_SEEN.get(self.path)

    def fetch(self) -> BearerToken:
        self.check()
        seen = self._stat()
        try:
            with open(self.path, encoding="utf-8") as f:
                value = f.read(_MAX_TOKEN_RESPONSE).strip()
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(
                f"kafka.sasl.oauthbearer.token.endpoint.url: cannot read the "
                f"token file {self.path}: {type(e).__name__}"
            ) from None
        _FILE_SEEN.put(self.path, seen)
        return _claims_token(value, self.describe(), self.sub_claim)


@dataclass(frozen=True)
class TokenCallback(TokenSource):
    """A Python callable ``module:function`` (confluent-kafka's ``oauth_cb`` contract),
    resolved in each process that uses it."""

    name: str
    config: Secret = field(default_factory=lambda: Secret(""), repr=False)
    option: str = "kafka.sasl.login.callback.handler.class"

    @property
    def cache_key(self) -> str:
        return "callable:" + _digest(self.name, self.config.reveal())

    def describe(self) -> str:
        return f"the token callback {self.name} ({self.option})"

    def fetch(self) -> BearerToken:
        function = trust.load_callback(self.name, self.option)
        try:
            result = function(self.config.reveal())
        except Exception as e:
            raise AuthenticationError(f"{self.describe()} raised {type(e).__name__}") from e
        if not isinstance(result, (tuple, list)) or not 2 <= len(result) <= 4:
            raise ConfigError(
                f"{self.describe()} must return (token, expiry) or (token, "
                "expiry, principal[, extensions])"
            )
        value, expiry = result[0], result[1]
        principal = result[2] if len(result) > 2 else ""
        extensions = result[3] if len(result) > 3 else {}
        check_token(value, f"{self.describe()}: the token")
        if isinstance(expiry, bool) or not isinstance(expiry, (int, float)):
            raise ConfigError(f"{self.describe()}: the expiry must be seconds since the epoch")
        extensions = check_extensions(extensions or {}, f"{self.describe()}: extension")
        return BearerToken(
            Secret(value), float(expiry), str(principal or ""), time.time(), extensions
        )


@dataclass(frozen=True)
class UnsecuredToken(TokenSource):
    """Kafka's unsecured JWS (``{"alg":"none"}``, empty signature), as its default login
    callback handler builds it from the JAAS ``unsecuredLogin*`` options."""

    claims: tuple[tuple[str, object], ...]  # the string, number and list claims
    principal_claim: str = "sub"
    lifetime_s: int = 3600

    @property
    def cache_key(self) -> str:
        return "unsecured:" + _digest(self.claims, self.principal_claim, self.lifetime_s)

    def describe(self) -> str:
        return "the unsecuredLogin options of kafka.sasl.jaas.config"

    def fetch(self) -> BearerToken:
        now = time.time()
        claims = dict(self.claims)
        claims.setdefault("iat", int(now))
        claims.setdefault("exp", int(now) + self.lifetime_s)
        header = b64url(json.dumps({"alg": "none"}, separators=(",", ":")).encode())
        payload = b64url(json.dumps(claims, separators=(",", ":")).encode())
        exp = cast("float | str", claims["exp"])  # a number, or one given as a string
        return BearerToken(
            Secret(f"{header}.{payload}."),
            float(exp),
            str(claims.get(self.principal_claim, "")),
            now,
        )
