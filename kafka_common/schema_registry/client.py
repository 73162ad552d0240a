"""``RegistryClient``: the Confluent Schema Registry REST calls the connector makes.

Only the endpoints Confluent's serializers use: ``GET /schemas/ids/{id}``,
``GET /schemas/guids/{guid}``, ``GET /subjects/{s}/versions[/{v}]``, ``POST /subjects/{s}/versions``
(register) and ``POST /subjects/{s}`` (look up). One ``http.client`` socket per call (no pool
to leak across Spark tasks); the driver calls a few times per query, each executor once per
unseen schema id.

A call retries 5xx, 429, refused connections and timeouts over the URLs in turn until
``schema.registry.timeout.ms`` has passed, then raises ``RegistryError`` (data is never
nulled because a registry is down); each attempt waits at most the timeout divided by the
number of URLs. 401/403 raise ``RegistryAuthError`` at once; other 4xx raise
``RegistryError`` with the registry's ``error_code`` and message. No error, log line or repr
holds a credential, even when the registry echoes one (``RegistrySettings.secrets``).

A 404 id or GUID is remembered as missing for ``MISSING_TTL_S`` (at most ``MISSING_MAX``):
under PERMISSIVE, values that merely start with byte 0 carry made-up ids.

Answers are data: no redirect is followed (the request carries credentials), an answer is
read up to 8 MB within the call's time limit, and each URL is checked against
``PYKAFKA_ALLOWED_URLS`` in the calling process (``kafka_common.trust``).
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import quote, urlsplit

from protocol.config import redact
from protocol.errors import ConfigError, PyKafkaError
from protocol.retry import RetryPolicy, RetryRule

from .. import trust
from ..bounded_cache import BoundedCache
from .settings import RegistrySettings

__all__ = [
    "RegisteredSchema",
    "RegistryClient",
    "RegistryError",
    "RegistryAuthError",
    "SCHEMA_TYPE",
    "SUBJECT_NOT_FOUND",
]

SUBJECT_NOT_FOUND = 40401
#: The registry's schemaType of each valueFormat/keyFormat (reader and writer alike).
SCHEMA_TYPE = {"avro": "AVRO", "protobuf": "PROTOBUF", "json": "JSON"}
SCHEMAS_MAX = 4096  # schemas a client keeps by id and by subject version (least used go)
MISSING_TTL_S = 60.0  # how long an id or GUID the registry does not have stays "missing"
MISSING_MAX = 4096  # how many such ids and GUIDs are remembered at most
_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_MAX_ANSWER = 8 << 20  # bytes: a schema with its metadata is far smaller


#: The waits between a call's attempts (the registry has no option for them): 100 ms,
#: doubling up to 1.6 s, with the policy's jitter; ``schema.registry.timeout.ms`` bounds
#: them all.
_BACKOFF_MS = 100
_MAX_BACKOFF_MS = 1600


class RegistryError(PyKafkaError):
    """The registry refused a call or could not be reached within the timeout."""

    def __init__(self, message: str, *, status: int | None = None, error_code: int | None = None):
        super().__init__(message)
        self.status, self.error_code = status, error_code


class RegistryAuthError(RegistryError):
    """The registry answered 401 or 403: wrong or missing credentials, or no permission."""


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the registry holds it (``id`` -1 when looked up by GUID and the registry
    did not say). ``schema_type`` is AVRO, PROTOBUF or JSON;
    ``references`` are (name, subject, version) triples (Protobuf imports, named Avro
    types of other subjects)."""

    id: int
    schema_type: str
    text: str
    references: tuple[tuple[str, str, int], ...] = ()
    subject: str | None = None
    version: int | None = None
    guid: str | None = None


def _schema_from(
    body: dict, *, id: int | None = None, subject: str | None = None, guid: str | None = None
) -> RegisteredSchema:
    refs = tuple((r["name"], r["subject"], int(r["version"])) for r in body.get("references") or ())
    return RegisteredSchema(
        id=int(body["id"]) if body.get("id") is not None else int(id) if id is not None else -1,
        schema_type=(body.get("schemaType") or "AVRO").upper(),
        text=body["schema"],
        references=refs,
        subject=body.get("subject", subject),
        version=body.get("version"),
        guid=body.get("guid", guid),
    )


class _MissingSchemas:
    """Schema ids and GUIDs the registry answered 404 for, each with the error it gave,
    remembered for ``ttl_s`` and at most ``limit`` of them (the oldest dropped first): a
    bounded negative cache. Not thread-safe: the client holds its lock around it."""

    def __init__(
        self, ttl_s: float = MISSING_TTL_S, limit: int = MISSING_MAX, clock=time.monotonic
    ):
        self.ttl_s, self.limit, self._clock = ttl_s, limit, clock
        # key -> (expiry, (message, status, error code)), oldest first
        self._errors: dict[object, tuple[float, tuple]] = {}

    def __len__(self) -> int:
        return len(self._errors)

    def error_for(self, key) -> RegistryError | None:
        found = self._errors.get(key)
        if found is None:
            return None
        if self._clock() >= found[0]:
            del self._errors[key]
            return None
        message, status, code = found[1]
        return RegistryError(message, status=status, error_code=code)  # a fresh one

    def remember(self, key, error: RegistryError) -> None:
        self._errors.pop(key, None)
        self._errors[key] = (
            self._clock() + self.ttl_s,
            (str(error), error.status, error.error_code),
        )
        while len(self._errors) > self.limit:
            del self._errors[next(iter(self._errors))]


class RegistryClient:
    """Calls to one registry (several URLs of the same registry are tried in turn).

    Thread-safe; caches what never changes (a schema id's text, a subject version's
    schema) for the life of the client."""

    def __init__(self, settings: RegistrySettings):
        self.settings = settings
        self._ssl: ssl.SSLContext | None = None
        self._lock = threading.Lock()
        self._by_id: BoundedCache[int, RegisteredSchema] = BoundedCache(SCHEMAS_MAX)
        self._by_version: BoundedCache[tuple[str, int], RegisteredSchema] = BoundedCache(
            SCHEMAS_MAX
        )
        self._missing = _MissingSchemas()
        self._next_url = 0

    def __repr__(self) -> str:
        return f"RegistryClient({', '.join(self.settings.urls)})"

    # ---- the endpoints ------------------------------------------------------------------

    def schema_by_id(self, schema_id: int, subject: str | None = None) -> RegisteredSchema:
        cached = self._by_id.get(schema_id)
        if cached is not None:
            return cached
        path = f"/schemas/ids/{int(schema_id)}"
        if subject:
            path += f"?subject={quote(subject, safe='')}"
        found = _schema_from(
            self._call_unless_missing(
                ("id", schema_id), "GET", path, what=f"schema id {schema_id}"
            ),
            id=schema_id,
        )
        return self._by_id.put(schema_id, found)

    def schema_by_guid(self, guid: str) -> RegisteredSchema:
        body = self._call_unless_missing(
            ("guid", guid),
            "GET",
            f"/schemas/guids/{quote(guid, safe='')}",
            what=f"schema guid {guid}",
        )
        return _schema_from(body, guid=guid)

    def versions(self, subject: str) -> list[int]:
        return [
            int(v)
            for v in self._call(
                "GET", f"/subjects/{quote(subject, safe='')}/versions", what=f"subject {subject!r}"
            )
        ]

    def version(self, subject: str, version: int | str = "latest") -> RegisteredSchema:
        if version != "latest":
            cached = self._by_version.get((subject, int(version)))
            if cached is not None:
                return cached
        body = self._call(
            "GET",
            f"/subjects/{quote(subject, safe='')}/versions/{version}",
            what=f"subject {subject!r} version {version}",
        )
        found = _schema_from(body, subject=subject)
        # The versions endpoint always answers the version.
        self._by_version.put((subject, int(cast(int, found.version))), found)
        if self._by_id.get(found.id) is None:
            self._by_id.put(found.id, found)
        return found

    def register(self, subject: str, text: str, schema_type: str = "AVRO", references=()) -> int:
        body = self._call(
            "POST",
            f"/subjects/{quote(subject, safe='')}/versions",
            _payload(text, schema_type, references),
            what=f"registering a schema under subject {subject!r}",
        )
        return int(body["id"])

    def lookup(
        self, subject: str, text: str, schema_type: str = "AVRO", references=()
    ) -> RegisteredSchema:
        body = self._call(
            "POST",
            f"/subjects/{quote(subject, safe='')}",
            _payload(text, schema_type, references),
            what=f"looking the schema up under subject {subject!r}",
        )
        return _schema_from(body, subject=subject)

    def referenced(self, schema: RegisteredSchema) -> dict[str, RegisteredSchema]:
        """Every schema ``schema`` references, transitively, by reference name, each after
        the schemas it references itself (the order a parser needs them in)."""
        found: dict[str, RegisteredSchema] = {}

        def visit(refs, depth: int) -> None:
            if depth > 32:
                raise RegistryError("schema references nest deeper than 32 levels")
            for name, subject, version in refs:
                if name in found:
                    continue
                ref = self.version(subject, version)
                visit(ref.references, depth + 1)
                found[name] = ref

        visit(schema.references, 0)
        return found

    # ---- HTTP ---------------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        headers = {
            "Accept": _CONTENT_TYPE + ", application/json",
            "Content-Type": _CONTENT_TYPE,
            "User-Agent": "pyspark-pykafka",
        }
        s = self.settings
        if s.user_info is not None:
            token = base64.b64encode(s.user_info.reveal().encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        elif s.bearer_token is not None:
            headers["Authorization"] = f"Bearer {s.bearer_token.reveal()}"
        return headers

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            from protocol.client.tls import build_ssl_context

            s = self.settings
            try:
                self._ssl = build_ssl_context(
                    cafile=s.ca_location,
                    certfile=s.certificate_location,
                    keyfile=s.key_location,
                    key_password=s.key_password.reveal() if s.key_password else None,
                    check_hostname=s.check_hostname,
                )
            except ConfigError as exc:
                raise ConfigError(
                    str(exc)
                    .replace("kafka.ssl.", "schema.registry.ssl.")
                    .replace("cafile", "ca.location")
                    .replace("certfile", "certificate.location")
                    .replace("keyfile", "key.location")
                ) from None
        return self._ssl

    def _call_unless_missing(self, key, method: str, path: str, *, what: str) -> Any:
        """``_call``, unless the registry said within ``MISSING_TTL_S`` that it has no
        ``key`` (an id or GUID): then the same 404 error again, without a call."""
        with self._lock:
            known = self._missing.error_for(key)
        if known is not None:
            raise known
        try:
            return self._call(method, path, what=what)
        except RegistryError as exc:
            if exc.status == 404:
                with self._lock:
                    self._missing.remember(key, exc)
            raise

    def _call(self, method: str, path: str, body: Any = None, *, what: str) -> Any:
        """One REST call under the library's retry policy (``protocol.retry``): a URL that
        cannot be reached, a 5xx or a 429 is retried on the next URL, 100 ms apart doubling
        up to 1.6 s, until ``schema.registry.timeout.ms``; any other answer ends it."""
        import http.client  # here: a write or read without a registry never loads it

        s = self.settings
        share = s.timeout_ms / 1000 / len(s.urls)  # each URL's time per attempt
        data = json.dumps(body).encode() if body is not None else None
        first = self._next_url

        def attempt(tries) -> Any:
            index = (first + tries.count) % len(s.urls)
            url = s.urls[index]
            try:
                status, payload = self._send(
                    url, method, path, data, max(0.001, min(tries.time_left_s(), share))
                )
            except (OSError, http.client.HTTPException) as exc:
                if isinstance(exc, ssl.SSLCertVerificationError):
                    raise RegistryError(
                        f"Schema Registry {url}: TLS certificate not trusted ({exc.verify_message})"
                    ) from None
                # later calls start past a URL that could not be reached
                self._next_url = (index + 1) % len(s.urls)
                raise _Unavailable(f"{url}: {type(exc).__name__}: {exc}") from None
            if status < 300:
                return payload
            code, message = _error_of(payload)
            for secret in s.secrets():  # a registry (or a proxy) may echo a credential
                message = redact(message, secret)
            if 300 <= status < 400:
                raise RegistryError(
                    f"Schema Registry {url}: {what}: HTTP {status}, a "
                    "redirect; redirects are not followed (the request "
                    "carries the credentials): set schema.registry.url "
                    "to the final URL",
                    status=status,
                )
            if status in (401, 403):
                raise RegistryAuthError(
                    f"Schema Registry {url} refused {what}: HTTP {status} "
                    f"({message}); check schema.registry.basic.auth.user.info or "
                    "schema.registry.bearer.auth.token",
                    status=status,
                    error_code=code,
                )
            if status < 500 and status != 429:
                raise RegistryError(
                    f"Schema Registry {url}: {what}: HTTP {status}, error {code}: {message}",
                    status=status,
                    error_code=code,
                )
            raise _Unavailable(f"{url}: HTTP {status} ({message})")

        def say_waiting(tries, error: BaseException) -> None:
            if tries.count == 1:
                _say_waiting(what, str(error), s.timeout_ms)

        def gave_up(tries, error: BaseException) -> BaseException:
            return RegistryError(
                f"Schema Registry did not answer {what} within schema.registry.timeout.ms="
                f"{s.timeout_ms} ({tries.summary()}; last: {error})"
            )

        policy = RetryPolicy(
            backoff_ms=_BACKOFF_MS, max_backoff_ms=_MAX_BACKOFF_MS, timeout_ms=s.timeout_ms
        )
        return policy.run(
            what,
            attempt,
            retriable=RetryRule(types=(_Unavailable,)),
            between=say_waiting,
            give_up=gave_up,
        )

    def _send(
        self, url: str, method: str, path: str, data: bytes | None, timeout: float
    ) -> tuple[int, Any]:
        import http.client

        trust.check_url(url, "schema.registry.url", "registry")
        deadline = time.monotonic() + timeout
        parts = urlsplit(url)
        host = parts.hostname or ""  # RegistrySettings admits only URLs with a host
        conn: http.client.HTTPConnection
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(
                host, parts.port or 443, timeout=timeout, context=self._context()
            )
        else:
            conn = http.client.HTTPConnection(host, parts.port or 80, timeout=timeout)
        try:
            conn.request(method, (parts.path or "") + path, body=data, headers=self._headers())
            response = conn.getresponse()
            raw = trust.read_bounded(response, _MAX_ANSWER, deadline, f"Schema Registry {url}")
        except ConfigError as exc:  # sent too much: no retry will change that
            raise RegistryError(str(exc)) from None
        except TimeoutError as exc:
            raise TimeoutError(f"no answer within {timeout:.1f}s") from exc
        finally:
            conn.close()
        try:
            payload = json.loads(raw) if raw else None
        except ValueError:
            payload = raw[:200].decode("utf-8", "replace")
        return response.status, payload


def _payload(text: str, schema_type: str, references) -> dict:
    body: dict[str, Any] = {"schema": text}
    if schema_type.upper() != "AVRO":
        body["schemaType"] = schema_type.upper()
    if references:
        body["references"] = [{"name": n, "subject": s, "version": v} for n, s, v in references]
    return body


class _Unavailable(Exception):
    """A registry URL that could not be reached, or answered 5xx or 429: retried."""


def _error_of(payload: Any) -> tuple[int | None, str]:
    if isinstance(payload, dict):
        return payload.get("error_code"), str(payload.get("message", ""))[:300]
    return None, str(payload or "")[:300]


def _say_waiting(what: str, last: str, timeout_ms: int) -> None:
    """A registry that does not answer is retried for ``schema.registry.timeout.ms`` (30 s
    by default): say so at the first failure instead of waiting in silence (issue 32)."""
    import logging

    logging.getLogger("pykafka.registry").warning(
        "Schema Registry did not answer %s (%s); retrying until schema.registry.timeout.ms"
        "=%d has passed. Is the registry running at that address?",
        what,
        last,
        timeout_ms,
    )
