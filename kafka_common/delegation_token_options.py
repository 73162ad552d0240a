"""``delegationToken.enabled``: the driver signs in with its own credentials, creates a
Kafka delegation token and gives its tasks the token instead, so no password, secret or
keytab of the driver travels to the executors (Spark's connector does the same with
``spark.kafka.clusters.*``, which a Python data source cannot read).

Parsing the options creates no token: ``with_delegation_token`` returns a
``DriverTokenConfig``, the driver's own sign-in, which the driver's clients use (offset
lookups, topic checks, a stream's commits). Only where Spark pickles it for the tasks (a
batch reader or writer, a micro-batch's writer or partitions) does it become the sign-in
with the driver's current token (``tasks_config``). Each process keeps one
``TokenKeeper`` per set of credentials: it finds the principal's live token with
DescribeDelegationToken before it creates one, renews it at 75% of its life (in the
background too, for the tasks that hold it) and replaces it near its maximum lifetime,
so Spark's many Python processes on the driver share one token.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from protocol.client.delegation_tokens import (
    TOKEN_MECHANISMS,
    TokenKeeper,
    in_background,
    token_config,
)
from protocol.config import ClientConfig
from protocol.errors import ConfigError

from .bounded_cache import BoundedCache
from .option_map import OptionMap

__all__ = ["DELEGATION_TOKEN_OPTIONS", "DriverTokenConfig", "with_delegation_token", "tasks_config"]

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

#: This process's keepers, by the credentials they sign in with.
_keepers: BoundedCache[tuple, TokenKeeper] = BoundedCache(16)
_lock = threading.Lock()
#: The mechanisms whose user name is the principal's name (Kafka's default principal
#: builder): a keeper looks for that principal's live tokens before creating one.
_NAMED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclasses.dataclass
class DriverTokenConfig(ClientConfig):
    """The driver's own sign-in, with ``delegationToken.enabled``. Pickled (what Spark
    sends to the tasks), it is the sign-in with the driver's current token instead:
    neither the driver's credentials nor a way to get them leave the driver."""

    token_mechanism: str = "SCRAM-SHA-512"

    def __reduce_ex__(self, protocol: Any) -> Any:
        # A plain ClientConfig, made and then given the token sign-in's fields (a copy
        # makes a token too: the driver's code never copies its configs).
        return ClientConfig, (), dict(tasks_config(self).__dict__)


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
    """``config`` as is, or, with ``delegationToken.enabled``, as a ``DriverTokenConfig``
    whose tasks sign in with a token. Creates no token."""
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
    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(ClientConfig)}
    return DriverTokenConfig(**fields, token_mechanism=mechanism)


def _keeper(config: ClientConfig) -> TokenKeeper:
    from protocol.client.cluster import KafkaClient

    named = config.sasl_mechanism in _NAMED_MECHANISMS and config.sasl_username
    with _lock:
        key = _identity(config)
        keeper = _keepers.get(key)
        if keeper is None:
            keeper = _keepers.put(
                key,
                TokenKeeper(
                    lambda: KafkaClient(config),
                    owner=f"User:{config.sasl_username}" if named else None,
                    schedule=in_background,
                ),
            )
    return keeper


def tasks_config(config: DriverTokenConfig) -> ClientConfig:
    """The sign-in with the driver's current token (found, renewed, replaced or created as
    due by this process's keeper), a plain ``ClientConfig`` for the tasks."""
    driver = ClientConfig(
        **{f.name: getattr(config, f.name) for f in dataclasses.fields(ClientConfig)}
    )
    return token_config(driver, _keeper(driver).current(), config.token_mechanism)
