"""How to reach the brokers: the connection options the reader and the writer share.

``SECURITY_OPTIONS`` documents the TLS and SASL options once, for both option tables.
``client_config(opts, role=..., log=...)`` checks ``kafka.bootstrap.servers``,
``kafka.client.id``, ``kafka.request.timeout.ms``, ``kafka.connections.max.idle.ms`` (how
long this worker's pool keeps an unused client, ``CONNECTIONS_MAX_IDLE_OPTION``) and the
security options and builds the
``protocol.config.ClientConfig`` both sides connect with, so a reader and a writer given
the same options connect the same way. The SASL password (``kafka.sasl.password``, or the
one inside ``kafka.sasl.jaas.config``) and ``kafka.ssl.key.password`` end up in
``protocol.config.Secret`` and never appear in a repr, a log line or an error message; so
do the key and trust store options (``ssl_store_options``).
"""

from __future__ import annotations

import logging
from typing import Any

from protocol.config import SASL_MECHANISMS, SECURITY_PROTOCOLS, ClientConfig, parse_host_port
from protocol.errors import ConfigError
from protocol.sasl import parse_jaas_config

from .delegation_token_options import DELEGATION_TOKEN_OPTIONS, with_delegation_token
from .oauth.option_table import OAUTH_OPTIONS
from .ssl_store_options import STORE_OPTIONS, java_ssl
from .trust import login_mechanism

from .option_map import INT32_MAX, OptionMap, warn_once

__all__ = [
    "SECURITY_OPTIONS",
    "CONNECTIONS_MAX_IDLE_OPTION",
    "RETRY_BACKOFF_OPTIONS",
    "security_settings",
    "client_config",
]

#: The pool's idle bound, the same for the reader and the writer: (name, default, meaning).
CONNECTIONS_MAX_IDLE_OPTION: tuple[str, str, str] = (
    "kafka.connections.max.idle.ms",
    "540000",
    "How long a Python worker keeps an unused client (its broker connections, metadata "
    "and, for the writer, its idempotent producer id) for the next task; 0 closes it after "
    "each task, -1 keeps it while the worker lives. See docs/pool.md.",
)

#: The backoff of every retry (protocol.retry's policy), named as Kafka's clients name it,
#: the same for the reader and the writer: (name, default, meaning).
RETRY_BACKOFF_OPTIONS: tuple[tuple[str, str, str], ...] = (
    (
        "kafka.retry.backoff.ms",
        "100",
        "Wait before the first retry of a request (a resend, a metadata refresh, a lookup "
        "after a retriable error); doubles at each retry, with 20% jitter, up to "
        "kafka.retry.backoff.max.ms.",
    ),
    (
        "kafka.retry.backoff.max.ms",
        "1000",
        "Longest wait between two retries; below kafka.retry.backoff.ms, every wait is this "
        "long (as Kafka's clients do).",
    ),
)

#: The connection security options, the same for the reader and the writer:
#: (name, default, meaning).
SECURITY_OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("kafka.security.protocol", '"PLAINTEXT"', "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."),
    (
        "kafka.sasl.mechanism",
        '"PLAIN"',
        "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM or GSSAPI (Kerberos).",
    ),
    ("kafka.sasl.username", "none", "SASL user name (or give kafka.sasl.jaas.config)."),
    ("kafka.sasl.password", "none", "SASL password; never logged."),
    (
        "kafka.sasl.jaas.config",
        "none",
        "JVM-style JAAS line holding the username and password, e.g. "
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="u" password="p"; for OAUTHBEARER the OAuthBearerLoginModule line with '
        "clientId, clientSecret, scope and extension_<name> (or unsecuredLogin* options); "
        "for AWS_MSK_IAM software.amazon.msk.auth.iam.IAMLoginModule (awsProfileName, "
        "awsRoleArn...); for GSSAPI com.sun.security.auth.module.Krb5LoginModule with "
        'useKeyTab=true keyTab="/path" principal="user@REALM", or useTicketCache=true.',
    ),
    (
        "kafka.sasl.kerberos.service.name",
        '"kafka"',
        "GSSAPI: the Kerberos service name of the brokers; the service principal is "
        "<name>/<broker host>.",
    ),
    ("kafka.ssl.cafile", "system CAs", "PEM file of the certificate authorities to trust."),
    ("kafka.ssl.certfile", "none", "PEM client certificate for mutual TLS."),
    ("kafka.ssl.keyfile", "none", "PEM private key of the client certificate."),
    (
        "kafka.ssl.key.password",
        "none",
        "Password of an encrypted kafka.ssl.keyfile, or of the key in the key store "
        "(default: kafka.ssl.keystore.password); never logged.",
    ),
    *STORE_OPTIONS,
    (
        "kafka.ssl.endpoint.identification.algorithm",
        '"https"',
        '"https" checks the broker\'s host name against its certificate; an empty '
        "string skips that check (the chain is still verified).",
    ),
    *OAUTH_OPTIONS,
    *DELEGATION_TOKEN_OPTIONS,
)


def security_settings(opts: OptionMap, log: logging.Logger) -> dict[str, Any]:
    """The ``ClientConfig`` arguments for TLS and SASL; warnings about options that the
    security protocol leaves unused go to ``log`` (once)."""
    protocol = (opts.get("kafka.security.protocol") or "PLAINTEXT").upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ConfigError(
            f"kafka.security.protocol: unknown value {protocol!r}; use one of "
            f"{', '.join(SECURITY_PROTOCOLS)}"
        )
    uses_sasl = protocol.startswith("SASL_")
    uses_tls = protocol in ("SSL", "SASL_SSL")
    _warn_unused(opts, log, protocol, uses_sasl=uses_sasl, uses_tls=uses_tls)
    settings: dict[str, Any] = {"security_protocol": protocol}
    if uses_tls:
        settings.update(_tls_settings(opts))
    if uses_sasl:
        settings.update(_sasl_settings(opts, log, protocol, uses_tls=uses_tls))
    return settings


#: The table's SASL and TLS options: a warning names those the security protocol leaves unused.
_SASL_OPTIONS = tuple(n for n, _, _ in SECURITY_OPTIONS if n.startswith("kafka.sasl."))
_TLS_OPTIONS = tuple(n for n, _, _ in SECURITY_OPTIONS if n.startswith("kafka.ssl."))


def _warn_unused(
    opts: OptionMap, log: logging.Logger, protocol: str, *, uses_sasl: bool, uses_tls: bool
) -> None:
    """A warning (once) for SASL or TLS options the security protocol does not use."""
    sasl_options = [o for o in _SASL_OPTIONS if opts.has(o)]
    ssl_options = [o for o in _TLS_OPTIONS if opts.has(o)]
    if sasl_options and not uses_sasl:
        warn_once(
            log,
            f"sasl-unused:{protocol}",
            "Options %s are ignored because "
            "kafka.security.protocol is %s (use SASL_PLAINTEXT or SASL_SSL).",
            ", ".join(sasl_options),
            protocol,
        )
    if ssl_options and not uses_tls:
        warn_once(
            log,
            f"ssl-unused:{protocol}",
            "Options %s are ignored because kafka.security.protocol is %s (use SSL or SASL_SSL).",
            ", ".join(ssl_options),
            protocol,
        )


def _tls_settings(opts: OptionMap) -> dict[str, Any]:
    algorithm = opts.get("kafka.ssl.endpoint.identification.algorithm", "https")
    if algorithm.lower() not in ("https", ""):
        raise ConfigError(
            f"kafka.ssl.endpoint.identification.algorithm: unsupported "
            f"value {algorithm!r}; use 'https' or '' (no host name check)"
        )
    settings: dict[str, Any] = dict(
        ssl_cafile=opts.get("kafka.ssl.cafile") or None,
        ssl_certfile=opts.get("kafka.ssl.certfile") or None,
        ssl_keyfile=opts.get("kafka.ssl.keyfile") or None,
        ssl_key_password=opts.get("kafka.ssl.key.password"),
        ssl_check_hostname=algorithm.lower() == "https",
        ssl_java=java_ssl(opts),
    )
    if settings["ssl_certfile"] is None:
        key_store = settings["ssl_java"] is not None and settings["ssl_java"].has_key_store
        for option in ("kafka.ssl.keyfile", "kafka.ssl.key.password"):
            if opts.has(option) and not (key_store and option == "kafka.ssl.key.password"):
                raise ConfigError(f"{option} is set without kafka.ssl.certfile")
    return settings


def _sasl_settings(
    opts: OptionMap, log: logging.Logger, protocol: str, *, uses_tls: bool
) -> dict[str, Any]:
    mechanism = (opts.get("kafka.sasl.mechanism") or "").upper()
    if mechanism == "OAUTHBEARER":
        from .oauth.options import oauthbearer_factory

        return dict(
            sasl_mechanism=mechanism,
            sasl_mechanism_factory=oauthbearer_factory(opts, log, uses_tls=uses_tls),
        )
    if mechanism == "AWS_MSK_IAM":
        from .aws_msk_iam.options import msk_iam_factory

        return dict(sasl_mechanism=mechanism, sasl_mechanism_factory=msk_iam_factory(opts))
    if mechanism == "GSSAPI":
        from .kerberos import kerberos_factory

        return dict(sasl_mechanism=mechanism, sasl_mechanism_factory=kerberos_factory(opts))
    return _sasl_credentials(opts, protocol)


def _sasl_credentials(opts: OptionMap, protocol: str) -> dict[str, Any]:
    mechanism = opts.get("kafka.sasl.mechanism")
    if mechanism is not None:
        mechanism = mechanism.upper()
        if mechanism not in SASL_MECHANISMS:
            raise ConfigError(
                f"kafka.sasl.mechanism: unsupported {mechanism!r}; use one of "
                f"{', '.join(SASL_MECHANISMS)}"
            )
    jaas = opts.get("kafka.sasl.jaas.config")
    username = opts.get("kafka.sasl.username")
    password = opts.get("kafka.sasl.password")
    if jaas is not None:
        if username is not None or password is not None:
            raise ConfigError(
                "kafka.sasl.jaas.config: give either kafka.sasl.jaas.config or "
                "kafka.sasl.username and kafka.sasl.password, not both"
            )
        username, password, module = parse_jaas_config(jaas)
        mechanism = login_mechanism(module, mechanism)
    else:
        mechanism = mechanism or "PLAIN"
        if not username or not password:
            raise ConfigError(
                f"kafka.security.protocol {protocol} needs credentials: set "
                f"kafka.sasl.jaas.config, or kafka.sasl.username and "
                f"kafka.sasl.password"
            )
    return {"sasl_mechanism": mechanism, "sasl_username": username, "sasl_password": password}


def client_config(
    opts: OptionMap, *, role: str, log: logging.Logger, **settings: Any
) -> ClientConfig:
    """The ``ClientConfig`` of the bootstrap servers, client id, request timeout and
    security options; ``role`` ("consumer" or "producer") words the error of missing
    servers as Spark's does, ``settings`` adds the side's own ``ClientConfig`` fields."""
    servers_text = opts.get("kafka.bootstrap.servers")
    servers = [s.strip() for s in (servers_text or "").split(",") if s.strip()]
    if not servers:
        raise ConfigError(
            f"Option 'kafka.bootstrap.servers' must be specified for configuring Kafka {role}"
        )
    for server in servers:
        parse_host_port(server)  # raises a ConfigError naming kafka.bootstrap.servers
    client_id = opts.get("kafka.client.id")
    if client_id is not None and not client_id:
        raise ConfigError("kafka.client.id must not be empty")
    backoff = opts.integer("kafka.retry.backoff.ms", 100, minimum=0, maximum=INT32_MAX)
    backoff_max = opts.integer("kafka.retry.backoff.max.ms", 1000, minimum=0, maximum=INT32_MAX)
    config = ClientConfig(
        retry_backoff_ms=min(backoff, backoff_max),
        retry_backoff_max_ms=backoff_max,
        bootstrap_servers=servers,
        client_id=client_id or ClientConfig.client_id,
        request_timeout_ms=opts.integer("kafka.request.timeout.ms", 30_000, maximum=INT32_MAX),
        connections_max_idle_ms=opts.integer("kafka.connections.max.idle.ms", 540_000, minimum=-1),
        **settings,
        **security_settings(opts, log),
    )
    return with_delegation_token(opts, config)
