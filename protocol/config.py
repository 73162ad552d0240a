"""Client settings shared by every connection: security, timeouts, identity.

``ClientConfig`` is small and picklable, so the Spark driver can hand it to executors.
The SASL password is kept out of ``repr`` and ``str``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = (
    "PLAIN",
    "SCRAM-SHA-256",
    "SCRAM-SHA-512",
    "OAUTHBEARER",
    "AWS_MSK_IAM",
    "GSSAPI",
)
#: The mechanisms whose credentials come from ``ClientConfig.sasl_mechanism_factory``.
FACTORY_MECHANISMS = ("OAUTHBEARER", "AWS_MSK_IAM", "GSSAPI")


class Secret(str):
    """A string whose repr never shows its value."""

    def __repr__(self) -> str:
        return "'******'"

    __str__ = __repr__

    def reveal(self) -> str:
        return str.__str__(self)

    def __reduce__(self) -> tuple[type[Secret], tuple[str]]:
        return (Secret, (str.__str__(self),))


def redact(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` replaced by ``******``, also in the forms an error text
    may carry it: escaped as a Python str or bytes repr would show it, or URL-encoded (a
    form body echoed back)."""
    if not secret:
        return text
    from urllib.parse import quote

    for form in {
        secret,
        repr(secret)[1:-1],
        repr(secret.encode("utf-8"))[2:-1],
        quote(secret, safe=""),
    }:
        text = text.replace(form, "******")
    return text


@dataclass
class ClientConfig:
    bootstrap_servers: list[str] = field(default_factory=list)
    client_id: str = "pyspark-pykafka"
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    sasl_username: str | None = None
    sasl_password: Secret | None = field(default=None, repr=False)
    #: For OAUTHBEARER and AWS_MSK_IAM: a picklable callable ``factory(host)`` returning a
    #: fresh ``protocol.sasl.Mechanism`` (with a fresh token or signature) for each
    #: authentication to the broker at ``host``. Its repr must hold no secret.
    sasl_mechanism_factory: Any = None
    #: Sign in with a delegation token: SCRAM with the token id as ``sasl_username``, its
    #: HMAC (base64) as ``sasl_password`` and the extension ``tokenauth=true``.
    sasl_token_auth: bool = False
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: Secret | None = field(default=None, repr=False)
    ssl_check_hostname: bool = True
    ssl_verify: bool = True
    #: Java key and trust stores, protocols and cipher suites (``kafka.ssl.truststore.*``,
    #: ``kafka.ssl.keystore.*``...): a ``protocol.tls_stores.options.JavaSsl``, or None.
    ssl_java: Any = None
    request_timeout_ms: int = 30_000
    connect_timeout_ms: int = 10_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    max_response_size: int = 128 * 1024 * 1024
    metadata_max_age_ms: int = 300_000
    #: The client's rack (``kafka.client.rack``), sent in every Fetch: a cluster with a
    #: rack-aware replica selector may then name a closer replica to read from (KIP-392,
    #: ``protocol.client.read_replicas``). Empty: every Fetch goes to the leader.
    client_rack: str = ""
    #: How long a pooled client may sit unused before it is closed (``protocol.client.pool``);
    #: 0: not pooled, -1: no limit. Not part of a connection's identity.
    connections_max_idle_ms: int = 540_000

    def __post_init__(self) -> None:
        if isinstance(self.bootstrap_servers, str):
            self.bootstrap_servers = [
                s.strip() for s in self.bootstrap_servers.split(",") if s.strip()
            ]
        self.security_protocol = self.security_protocol.upper()
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"kafka.security.protocol: unknown value "
                f"{self.security_protocol!r}; use one of {SECURITY_PROTOCOLS}"
            )
        self.sasl_mechanism = self.sasl_mechanism.upper()
        if self.uses_sasl and self.sasl_mechanism not in SASL_MECHANISMS:
            raise ConfigError(
                f"kafka.sasl.mechanism: unsupported {self.sasl_mechanism!r}; "
                f"use one of {SASL_MECHANISMS}"
            )
        if (
            self.uses_sasl
            and self.sasl_mechanism in FACTORY_MECHANISMS
            and not callable(self.sasl_mechanism_factory)
        ):
            raise ConfigError(
                f"kafka.sasl.mechanism {self.sasl_mechanism} needs a token "
                "source (sasl_mechanism_factory)"
            )
        if self.sasl_password is not None and not isinstance(self.sasl_password, Secret):
            self.sasl_password = Secret(self.sasl_password)
        if self.ssl_key_password is not None and not isinstance(self.ssl_key_password, Secret):
            self.ssl_key_password = Secret(self.ssl_key_password)
        for name in ("request_timeout_ms", "connect_timeout_ms", "max_response_size"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def parse_host_port(server: str) -> tuple[str, int]:
    """'host:port' or '[v6]:port' -> (host, port), with an error naming the bad entry."""
    text = server.strip()
    if "://" in text:
        text = text.split("://", 1)[1]
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(f"kafka.bootstrap.servers: {server!r} is not host:port")
    return host.strip("[]"), int(port)
