"""``delegationToken.enabled``: the driver signs in with its own credentials, creates a
Kafka delegation token and gives its tasks the token instead, so no password, secret or
keytab of the driver travels to the executors (Spark's connector does the same with
``spark.kafka.clusters.*``, which a Python data source cannot read).

The driver keeps one ``TokenKeeper`` per set of credentials in this process (never
pickled): a query planned again by the same process reuses its token, renewed at 75% of
its life (``current_token_config``), and a new one is created near its maximum lifetime.
"""

from __future__ import annotations

import threading

from protocol.client.delegation_tokens import TOKEN_MECHANISMS, TokenKeeper, token_config
from protocol.config import ClientConfig
from protocol.errors import ConfigError

from .bounded_cache import BoundedCache
from .option_map import OptionMap

__all__ = ["DELEGATION_TOKEN_OPTIONS", "with_delegation_token", "current_token_config"]

#: (name, default, meaning), documented with the security options.
DELEGATION_TOKEN_OPTIONS: tuple[tuple[str, str, str], ...] = (
    (
        "delegationToken.enabled",
        "false",
        "true: the driver signs in with the kafka.sasl.* credentials, creates a Kafka "
        "delegation token and the tasks sign in with the token (SCRAM), not with those "
        "credentials. The brokers need delegation.token.secret.key.",
    ),
    (
        "delegationToken.mechanism",
        '"SCRAM-SHA-512"',
        "The SCRAM mechanism the tasks sign in with the token (Spark's "
        "spark.kafka.clusters.<id>.sasl.token.mechanism).",
    ),
)

#: The driver's keepers, by the credentials they sign in with; and token id -> keeper.
_keepers: BoundedCache[tuple, TokenKeeper] = BoundedCache(16)
_by_token: BoundedCache[str, TokenKeeper] = BoundedCache(64)
_lock = threading.Lock()


def _identity(config: ClientConfig) -> tuple:
    password = config.sasl_password.reveal() if config.sasl_password else None
    return (
        tuple(config.bootstrap_servers),
        config.security_protocol,
        config.sasl_mechanism,
        config.sasl_username,
        password,
        repr(config.sasl_mechanism_factory),
    )


def with_delegation_token(opts: OptionMap, config: ClientConfig) -> ClientConfig:
    """``config`` as is, or, with ``delegationToken.enabled``, signing in with a token the
    driver's credentials in ``config`` created."""
    enabled = (opts.get("delegationToken.enabled") or "false").strip().lower()
    if enabled not in ("true", "false"):
        raise ConfigError(f"delegationToken.enabled must be true or false, not {enabled!r}")
    mechanism = (opts.get("delegationToken.mechanism") or "SCRAM-SHA-512").upper()
    if mechanism not in TOKEN_MECHANISMS:
        raise ConfigError(
            f"delegationToken.mechanism: unsupported {mechanism!r}; use one of "
            f"{', '.join(TOKEN_MECHANISMS)}"
        )
    if enabled == "false":
        return config
    if not config.uses_sasl:
        raise ConfigError(
            "delegationToken.enabled: Kafka issues delegation tokens only to a principal "
            "signed in with SASL: set kafka.security.protocol to SASL_PLAINTEXT or SASL_SSL "
            f"(it is {config.security_protocol}) and the kafka.sasl.* credentials"
        )
    from protocol.client.cluster import KafkaClient

    with _lock:
        key = _identity(config)
        keeper = _keepers.get(key)
        if keeper is None:
            keeper = _keepers.put(key, TokenKeeper(lambda: KafkaClient(config)))
    return _config_of(keeper, config, mechanism)


def _config_of(keeper: TokenKeeper, config: ClientConfig, mechanism: str) -> ClientConfig:
    token = keeper.current()
    _by_token.put(token.token_id, keeper)
    return token_config(config, token, mechanism)


def current_token_config(config: ClientConfig) -> ClientConfig:
    """For a token config this process created (on the driver): the same, with the
    token renewed or replaced when due; any other config as is."""
    keeper = _by_token.get(config.sasl_username or "") if config.sasl_token_auth else None
    if keeper is None:
        return config
    return _config_of(keeper, config, config.sasl_mechanism)
