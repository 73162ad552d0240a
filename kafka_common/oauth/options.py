"""The OAUTHBEARER options, read as Kafka's Java client reads them, into a mechanism factory.

Which token source applies is decided as the JVM decides it:

- ``kafka.sasl.login.callback.handler.class`` names Kafka's ``OAuthBearerLoginCallbackHandler``
  (with or without the ``kafkashaded.`` prefix Databricks uses): OIDC client credentials from
  ``kafka.sasl.oauthbearer.token.endpoint.url`` with ``clientId``/``clientSecret``/``scope``
  of the JAAS line (or KIP-1139's ``kafka.sasl.oauthbearer.client.credentials.*`` and
  ``kafka.sasl.oauthbearer.scope``), or a token file when that URL is ``file:``;
- it names a Python callable ``module:function``: that callable (``kafka.sasl.oauthbearer.config``
  is the string it gets, as confluent-kafka's ``oauth_cb``);
- it names AWS's ``IAMOAuthBearerLoginCallbackHandler``: a SigV4-presigned MSK IAM token;
- it is absent: Kafka's unsecured tokens from the JAAS ``unsecuredLogin*`` options.

The JAAS line's ``extension_<name>`` options become SASL extensions. Everything is checked
on the driver, before any task runs; errors never quote a secret.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from protocol.config import Secret
from protocol.errors import ConfigError
from protocol.sasl import canonical_class
from protocol.sasl_oauthbearer import OAuthBearerMechanism, check_extensions

from .. import trust
from ..option_map import warn_once
from .google import GCP_HANDLER
from .option_table import ENDPOINT_OPTION, HANDLER_OPTION, OAUTH_OPTIONS
from .sources import (
    ClientCredentials,
    TokenCallback,
    TokenFile,
    TokenSource,
    UnsecuredToken,
)
from .tokens import TOKEN_CACHE, RefreshPolicy

__all__ = [
    "OAUTH_OPTIONS",
    "oauthbearer_factory",
    "OAuthBearerFactory",
    "canonical_class",
]

_LOGIN_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
)
_UNSECURED_HANDLER = (
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
    "OAuthBearerUnsecuredLoginCallbackHandler"
)
MSK_OAUTH_HANDLER = "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler"
_RETRIEVERS = {  # KIP-1139's sasl.oauthbearer.jwt.retriever.class
    "org.apache.kafka.common.security.oauthbearer.ClientCredentialsJwtRetriever": "oidc",
    "org.apache.kafka.common.security.oauthbearer.FileJwtRetriever": "file",
}


@dataclass(frozen=True)
class OAuthBearerFactory:
    """``ClientConfig.sasl_mechanism_factory`` for OAUTHBEARER: a mechanism holding the
    source's current token (from the per-process cache) for each authentication."""

    source: TokenSource
    extensions: dict[str, str] = field(default_factory=dict)
    policy: RefreshPolicy = RefreshPolicy()

    def __call__(self, host: str) -> OAuthBearerMechanism:
        source = self.source
        for_host = getattr(source, "for_host", None)
        if for_host is not None:
            source = for_host(host)
        token = TOKEN_CACHE.get(source, self.policy)
        extensions = {**self.extensions, **token.extensions}
        return OAuthBearerMechanism(token.value.reveal(), extensions, hint=source.describe())


def _float(opts, name: str, default: float, low: float, high: float) -> float:
    text = opts.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{name}: {text!r} is not a number") from None
    if not low <= value <= high:
        raise ConfigError(f"{name}: {value} is outside [{low}, {high}]")
    return value


def refresh_policy(opts) -> RefreshPolicy:
    """Kafka's ``sasl.login.refresh.*`` options, with Kafka's bounds."""
    return RefreshPolicy(
        window_factor=_float(opts, "kafka.sasl.login.refresh.window.factor", 0.8, 0.5, 1.0),
        window_jitter=_float(opts, "kafka.sasl.login.refresh.window.jitter", 0.05, 0.0, 0.25),
        min_period_s=_float(opts, "kafka.sasl.login.refresh.min.period.seconds", 60, 0, 900),
        buffer_s=_float(opts, "kafka.sasl.login.refresh.buffer.seconds", 300, 0, 3600),
    )


def _unsecured(options: dict[str, str]) -> UnsecuredToken:
    claims: dict[str, object] = {}
    for key, value in options.items():
        if key.startswith("unsecuredLoginStringClaim_"):
            claims[key[len("unsecuredLoginStringClaim_") :]] = value
        elif key.startswith("unsecuredLoginNumberClaim_"):
            try:
                number = float(value)
            except ValueError:
                raise ConfigError(f"kafka.sasl.jaas.config: {key} is not a number") from None
            claims[key[len("unsecuredLoginNumberClaim_") :]] = (
                int(number) if number.is_integer() else number
            )
        elif key.startswith("unsecuredLoginListClaim_"):
            sep, items = (value[0], value[1:]) if value else (",", "")
            claims[key[len("unsecuredLoginListClaim_") :]] = [i for i in items.split(sep) if i]
    principal = options.get("unsecuredLoginPrincipalClaimName", "sub")
    if not isinstance(claims.get(principal), str) or not claims[principal]:
        raise ConfigError(
            f"kafka.sasl.jaas.config: OAUTHBEARER without {HANDLER_OPTION} uses Kafka's "
            f"unsecured tokens and needs unsecuredLoginStringClaim_{principal}; for real "
            f"tokens set {HANDLER_OPTION} to one of: {', '.join(_LOGIN_HANDLERS[:1])}, "
            f"{MSK_OAUTH_HANDLER}, or a Python module:function"
        )
    lifetime = options.get("unsecuredLoginLifetimeSeconds", "3600")
    if not lifetime.isdigit() or int(lifetime) <= 0:
        raise ConfigError(
            "kafka.sasl.jaas.config: unsecuredLoginLifetimeSeconds must be a positive integer"
        )
    return UnsecuredToken(tuple(sorted(claims.items())), principal, int(lifetime))


def _client_credentials(opts, options: dict[str, str], endpoint: str) -> ClientCredentials:
    client_id = opts.get("kafka.sasl.oauthbearer.client.credentials.client.id") or options.get(
        "clientId"
    )
    secret = opts.get("kafka.sasl.oauthbearer.client.credentials.client.secret") or options.get(
        "clientSecret"
    )
    if not client_id:
        raise ConfigError(
            "OAUTHBEARER client credentials need a client id: clientId in "
            "kafka.sasl.jaas.config (or "
            "kafka.sasl.oauthbearer.client.credentials.client.id)"
        )
    if not secret:
        raise ConfigError(
            "OAUTHBEARER client credentials need a secret: clientSecret in "
            "kafka.sasl.jaas.config (or "
            "kafka.sasl.oauthbearer.client.credentials.client.secret)"
        )
    scheme = endpoint.split(":", 1)[0].lower()
    if scheme not in ("https", "http"):
        raise ConfigError(f"{ENDPOINT_OPTION}: use an https:, http: or file: URL, not {scheme}:")
    trust.check_url(endpoint, ENDPOINT_OPTION, "token endpoint")
    if scheme == "http":
        trust.warn_plaintext(
            "oauth-client-secret",
            f"{ENDPOINT_OPTION} is an http: URL: the "
            "client secret goes to the token endpoint in the clear; use "
            "https: outside a test setup.",
        )
    return ClientCredentials(
        endpoint=endpoint,
        client_id=client_id,
        client_secret=Secret(secret),
        scope=opts.get("kafka.sasl.oauthbearer.scope") or options.get("scope", ""),
        sub_claim=opts.get("kafka.sasl.oauthbearer.sub.claim.name") or "sub",
        urlencode_header=opts.boolean("kafka.sasl.oauthbearer.header.urlencode", False),
        connect_timeout_ms=opts.integer("kafka.sasl.login.connect.timeout.ms", 10_000),
        read_timeout_ms=opts.integer("kafka.sasl.login.read.timeout.ms", 10_000),
        retry_backoff_ms=opts.integer("kafka.sasl.login.retry.backoff.ms", 100),
        retry_backoff_max_ms=opts.integer("kafka.sasl.login.retry.backoff.max.ms", 10_000),
        cafile=opts.get("kafka.sasl.oauthbearer.ssl.cafile") or None,
    )


def oauthbearer_factory(opts, log: logging.Logger, *, uses_tls: bool) -> OAuthBearerFactory:
    """The factory of the OAUTHBEARER options; ConfigError for anything missing or unknown."""
    jaas = opts.get("kafka.sasl.jaas.config")
    options = trust.jaas_options(jaas, "OAUTHBEARER")
    extensions = check_extensions(
        {k[len("extension_") :]: v for k, v in options.items() if k.startswith("extension_")},
        "kafka.sasl.jaas.config: extension",
    )
    if not uses_tls:
        warn_once(
            log,
            "oauthbearer-plaintext",
            "kafka.sasl.mechanism OAUTHBEARER over "
            "SASL_PLAINTEXT sends the token in the clear; use SASL_SSL outside a test "
            "setup.",
        )
    handler = canonical_class(opts.get(HANDLER_OPTION))
    source: TokenSource
    endpoint = opts.get(ENDPOINT_OPTION)
    retriever = canonical_class(opts.get("kafka.sasl.oauthbearer.jwt.retriever.class"))
    if retriever is not None and retriever not in _RETRIEVERS:
        raise ConfigError(
            f"kafka.sasl.oauthbearer.jwt.retriever.class: {retriever} is not "
            f"implemented; use one of {', '.join(_RETRIEVERS)}"
        )
    if handler in _LOGIN_HANDLERS:
        if not endpoint:
            raise ConfigError(
                f"{HANDLER_OPTION} {handler.rsplit('.', 1)[1]} needs "
                f"{ENDPOINT_OPTION} (the identity provider's token endpoint "
                "or a file: URL)"
            )
        kind = _RETRIEVERS.get(retriever or "") or (
            "file" if endpoint.lower().startswith("file:") else "oidc"
        )
        if kind == "file":
            source = TokenFile.from_url(
                endpoint, opts.get("kafka.sasl.oauthbearer.sub.claim.name") or "sub"
            )
            source.check()
        else:
            source = _client_credentials(opts, options, endpoint)
    elif handler == GCP_HANDLER:
        import importlib.util

        if importlib.util.find_spec("google.auth") is None:
            raise ConfigError(
                f"{HANDLER_OPTION} {GCP_HANDLER} needs the google-auth package "
                "on the driver and every executor (pip install google-auth)"
            )
        source = TokenCallback("kafka_common.oauth.google:token", Secret(""))
    elif handler == MSK_OAUTH_HANDLER:
        from kafka_common.aws_msk_iam.options import msk_oauth_source

        source = msk_oauth_source(options)
    elif handler is not None and ":" in handler:
        trust.load_callback(handler, HANDLER_OPTION)  # fails here, before any task runs
        source = TokenCallback(handler, Secret(opts.get("kafka.sasl.oauthbearer.config") or ""))
    elif handler is None or handler == _UNSECURED_HANDLER:
        source = _unsecured(options)
    else:
        raise ConfigError(
            f"{HANDLER_OPTION}: {handler} is not implemented by this "
            f"connector; use {_LOGIN_HANDLERS[0]} (OIDC or token file), "
            f"{MSK_OAUTH_HANDLER}, {GCP_HANDLER}, {_UNSECURED_HANDLER}, or a "
            "Python module:function token callback"
        )
    return OAuthBearerFactory(source, extensions, refresh_policy(opts))
