"""The ``schema.registry.*`` options, shared by the reader and the writer.

Named as Confluent's clients name them (``schema.registry.url``,
``schema.registry.basic.auth.user.info``, ``schema.registry.bearer.auth.token``,
``schema.registry.ssl.*``), plus ``schema.registry.timeout.ms``: how long a call may keep
retrying a registry that is down, slow or answers 5xx before the query fails. The user
info, the token and the key password are secrets (``option_map.SECRET_OPTIONS``), kept as
``protocol.config.Secret``: they never appear in a repr, a log line or an error, nor does
a registry's answer that echoes one (``RegistrySettings.secrets``, redacted by the client).

Also the one check both sides make of a column left binary (``check_binary_column``): the
options that name its schema are refused in the same words by the reader and the writer.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from protocol.config import Secret
from protocol.errors import ConfigError

from .. import trust
from ..option_map import INT32_MAX, OptionMap

__all__ = [
    "REGISTRY_OPTIONS",
    "RegistrySettings",
    "registry_settings",
    "SCHEMA_OPTION_SUFFIXES",
    "check_binary_column",
]

#: The options of a column's schema (``valueSubject``, ``keyMessageName``, ...): they mean
#: nothing while the column's format is binary.
SCHEMA_OPTION_SUFFIXES = ("Subject", "SchemaVersion", "Schema", "MessageName")

#: (name, default, meaning) of each registry option, for the option tables.
REGISTRY_OPTIONS: tuple[tuple[str, str, str], ...] = (
    (
        "schema.registry.url",
        "none",
        "Comma-separated base URLs of the Schema Registry (http or https); needed by the avro, "
        "protobuf and json formats unless the schema is given inline. Tried in order.",
    ),
    (
        "schema.registry.basic.auth.user.info",
        "none",
        "user:password for HTTP basic authentication; never logged.",
    ),
    (
        "schema.registry.bearer.auth.token",
        "none",
        "A static bearer token sent as Authorization: Bearer; never logged.",
    ),
    (
        "schema.registry.ssl.ca.location",
        "system CAs",
        "PEM file of the certificate authorities to trust for an https registry.",
    ),
    (
        "schema.registry.ssl.certificate.location",
        "none",
        "PEM client certificate for mutual TLS with the registry.",
    ),
    ("schema.registry.ssl.key.location", "none", "PEM private key of that certificate."),
    ("schema.registry.ssl.key.password", "none", "Password of an encrypted key; never logged."),
    (
        "schema.registry.ssl.endpoint.identification.algorithm",
        '"https"',
        '"https" checks the registry\'s host name against its certificate; "none" or an '
        "empty string skips that check (the chain is still verified).",
    ),
    (
        "schema.registry.timeout.ms",
        "30000",
        "How long (ms) one registry lookup may take, retries of 5xx answers, timeouts and "
        "refused connections included, before the query fails (401/403 fail at once).",
    ),
)


def check_binary_column(
    opts: OptionMap, column: str, suffixes: tuple[str, ...] = SCHEMA_OPTION_SUFFIXES
) -> None:
    """ConfigError for the first option of ``column``'s schema (``column`` + each of
    ``suffixes``) set while ``{column}Format`` is binary."""
    for suffix in suffixes:
        if opts.has(column + suffix):
            raise ConfigError(
                f"{column}{suffix} is set but {column}Format is binary "
                f"(set {column}Format to avro, protobuf or json)"
            )


@dataclass(frozen=True)
class RegistrySettings:
    """How to reach the registry. Picklable: the driver ships it to the executors."""

    urls: tuple[str, ...]
    user_info: Secret | None = field(default=None, repr=False)
    bearer_token: Secret | None = field(default=None, repr=False)
    ca_location: str | None = None
    certificate_location: str | None = None
    key_location: str | None = None
    key_password: Secret | None = field(default=None, repr=False)
    check_hostname: bool = True
    timeout_ms: int = 30_000

    def secrets(self) -> tuple[str, ...]:
        """The secret values, in every form a registry's answer could echo them in: the
        user info (whole, its password, as the Basic header carries it), the token and the
        key password; the longest first."""
        found = []
        if self.user_info is not None:
            info = self.user_info.reveal()
            found += [info, info.partition(":")[2], base64.b64encode(info.encode()).decode()]
        for secret in (self.bearer_token, self.key_password):
            if secret is not None:
                found.append(secret.reveal())
        return tuple(sorted({s for s in found if s}, key=len, reverse=True))


def registry_settings(opts: OptionMap) -> RegistrySettings | None:
    """The registry settings in ``opts``, or None when ``schema.registry.url`` is not set."""
    text = opts.get("schema.registry.url")
    if text is None:
        for name in (o[0] for o in REGISTRY_OPTIONS[1:]):
            if opts.has(name):
                raise ConfigError(f"{name} is set without schema.registry.url")
        return None
    urls = tuple(u.strip().rstrip("/") for u in text.split(",") if u.strip())
    if not urls:
        raise ConfigError("schema.registry.url: give at least one URL, e.g. http://registry:8081")
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"schema.registry.url: {url!r} is not an http(s) URL")
        if parts.username or parts.password:
            raise ConfigError(
                "schema.registry.url: put the credentials in "
                "schema.registry.basic.auth.user.info, not in the URL"
            )
        trust.check_url(url, "schema.registry.url", "registry")
    # secrets (option_map.SECRET_OPTIONS): read exactly as given
    user_info = opts.get("schema.registry.basic.auth.user.info")
    if user_info is not None and ":" not in user_info:
        raise ConfigError("schema.registry.basic.auth.user.info must be user:password")
    token = opts.get("schema.registry.bearer.auth.token")
    if user_info is not None and token is not None:
        raise ConfigError(
            "schema.registry.basic.auth.user.info and "
            "schema.registry.bearer.auth.token cannot both be set"
        )
    algorithm = (
        opts.get("schema.registry.ssl.endpoint.identification.algorithm", "https") or "none"
    ).lower()
    if algorithm not in ("https", "none"):
        raise ConfigError(
            "schema.registry.ssl.endpoint.identification.algorithm must be "
            f"https, none or empty, got {algorithm!r}"
        )
    if (user_info is not None or token is not None) and any(
        u.lower().startswith("http:") for u in urls
    ):
        trust.warn_plaintext(
            "registry",
            "schema.registry.url has an http: URL: the "
            "registry credentials (schema.registry.basic.auth.user.info or "
            "bearer.auth.token) travel in the clear; use https:.",
        )
    key_password = opts.get("schema.registry.ssl.key.password")
    return RegistrySettings(
        urls=urls,
        user_info=Secret(user_info) if user_info is not None else None,
        bearer_token=Secret(token.strip()) if token is not None else None,
        ca_location=opts.get("schema.registry.ssl.ca.location"),
        certificate_location=opts.get("schema.registry.ssl.certificate.location"),
        key_location=opts.get("schema.registry.ssl.key.location"),
        key_password=Secret(key_password) if key_password is not None else None,
        check_hostname=algorithm == "https",
        timeout_ms=opts.integer("schema.registry.timeout.ms", 30_000, maximum=INT32_MAX),
    )
