"""The MSK IAM options, as AWS's Java library reads them, into mechanism factories.

``kafka.sasl.mechanism=AWS_MSK_IAM`` with ``kafka.sasl.jaas.config`` =
``software.amazon.msk.auth.iam.IAMLoginModule required [awsProfileName=...]
[awsRoleArn=... awsRoleSessionName=... awsStsRegion=...];`` (and Java's
``IAMClientCallbackHandler`` as ``kafka.sasl.client.callback.handler.class``, accepted and
not needed) gives ``MskIamFactory``; OAUTHBEARER with ``IAMOAuthBearerLoginCallbackHandler``
gives ``MskOAuthSource`` for ``kafka_common.oauth``. The region is the broker host name's
(``AWS_REGION``/``AWS_DEFAULT_REGION`` when it names none, or first for OAUTHBEARER, whose
Java handler reads only the region chain).
"""

from __future__ import annotations

import datetime as _dt
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from protocol.config import Secret
from protocol.errors import ConfigError
from protocol.sasl import canonical_class
from protocol.sasl_aws_msk_iam import (
    EXPIRES_S,
    AwsCredentials,
    AwsMskIamMechanism,
    msk_iam_payload,
    msk_oauth_token,
    region_from_host,
)

from .. import trust
from ..oauth.tokens import BearerToken
from .credentials import MskCredentials

__all__ = [
    "MskIamFactory",
    "MskOAuthSource",
    "msk_iam_factory",
    "msk_oauth_source",
    "USER_AGENT",
]

IAM_CLIENT_HANDLER = "software.amazon.msk.auth.iam.IAMClientCallbackHandler"
USER_AGENT = "pyspark-pykafka/0.1.0"
_KNOWN = {
    "awsProfileName",
    "awsRoleArn",
    "awsRoleSessionName",
    "awsStsRegion",
    "awsRoleAccessKeyId",
    "awsRoleSecretAccessKey",
    "awsRoleSessionToken",
    "awsDebugCreds",
    "awsMaxRetries",
    "awsMaxBackOffTimeMs",
}


def _env_region() -> str | None:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None


def msk_credentials(options: dict[str, str]) -> MskCredentials:
    """The credential options of the JAAS line (unknown ones are an error naming them)."""
    unknown = sorted(set(options) - _KNOWN)
    if unknown:
        raise ConfigError(
            f"kafka.sasl.jaas.config: unknown MSK IAM options {unknown}; known: {sorted(_KNOWN)}"
        )
    base = None
    if options.get("awsRoleAccessKeyId") or options.get("awsRoleSecretAccessKey"):
        if not options.get("awsRoleArn"):
            raise ConfigError("kafka.sasl.jaas.config: awsRoleAccessKeyId needs awsRoleArn")
        token = options.get("awsRoleSessionToken")
        base = AwsCredentials(
            options.get("awsRoleAccessKeyId", ""),
            Secret(options.get("awsRoleSecretAccessKey", "")),
            Secret(token) if token else None,
        )
    credentials = MskCredentials(
        profile=options.get("awsProfileName") or None,
        role_arn=options.get("awsRoleArn") or None,
        role_session_name=options.get("awsRoleSessionName") or "aws-msk-iam-auth",
        sts_region=options.get("awsStsRegion") or None,
        role_base=base,
    )
    if credentials.role_arn:  # the STS endpoint must be allowed: say so before any task
        from .sts import STS_OPTION, sts_endpoint

        trust.check_url(
            sts_endpoint(credentials.sts_region or _env_region()), STS_OPTION, "STS endpoint"
        )
    return credentials


@dataclass(frozen=True)
class MskIamFactory:
    """``ClientConfig.sasl_mechanism_factory`` for AWS_MSK_IAM: a payload signed now, with
    the current credentials, for the broker being connected to."""

    credentials: MskCredentials
    user_agent: str = USER_AGENT
    clock: Callable[[], _dt.datetime] | None = None  # tests: the signing datetime

    def __call__(self, host: str) -> AwsMskIamMechanism:
        region = region_from_host(host) or _env_region()
        when = self.clock() if self.clock is not None else _dt.datetime.now(_dt.timezone.utc)
        payload = msk_iam_payload(self.credentials.resolve(), host, region, when, self.user_agent)
        return AwsMskIamMechanism(payload, hint=self.credentials.describe())


@dataclass(frozen=True)
class MskOAuthSource:
    """An OAUTHBEARER token source: AWS's presigned-URL token for one region."""

    credentials: MskCredentials
    region: str | None = None
    user_agent: str = USER_AGENT

    def for_host(self, host: str) -> MskOAuthSource:
        if self.region:
            return self
        return MskOAuthSource(
            self.credentials, _env_region() or region_from_host(host), self.user_agent
        )

    @property
    def cache_key(self) -> str:
        return f"msk-oauth:{self.region}:{self.credentials!r}"

    def changed(self) -> bool:
        return False

    def describe(self) -> str:
        return f"{self.credentials.describe()} (MSK IAM, region {self.region})"

    def fetch(self) -> BearerToken:
        """A presigned token valid for 15 minutes, or until its credentials expire if that
        is sooner (AWS refuses a token signed with expired credentials)."""
        now = time.time()
        when = _dt.datetime.fromtimestamp(int(now), _dt.timezone.utc)
        credentials = self.credentials.resolve()
        token = msk_oauth_token(credentials, self.region, when, self.user_agent)
        expires_at: float = int(now) + EXPIRES_S
        if credentials.expires_at is not None:
            expires_at = min(expires_at, credentials.expires_at)
        return BearerToken(Secret(token), expires_at, "", int(now))


def msk_oauth_source(options: dict[str, str]) -> MskOAuthSource:
    return MskOAuthSource(msk_credentials(options))


def msk_iam_factory(opts) -> MskIamFactory:
    jaas = opts.get("kafka.sasl.jaas.config")
    options = trust.jaas_options(jaas, "AWS_MSK_IAM")
    handler = opts.get("kafka.sasl.client.callback.handler.class")
    if handler is not None and canonical_class(handler) != IAM_CLIENT_HANDLER:
        raise ConfigError(
            f"kafka.sasl.client.callback.handler.class: {handler} is not "
            f"implemented; AWS_MSK_IAM uses {IAM_CLIENT_HANDLER} (or none)"
        )
    if (opts.get("kafka.security.protocol") or "").upper() == "SASL_PLAINTEXT":
        trust.warn_plaintext(
            "aws-msk-iam",
            "kafka.sasl.mechanism AWS_MSK_IAM over "
            "SASL_PLAINTEXT sends a signed sign-in, usable by whoever "
            "sees it for 15 minutes, in the clear; use SASL_SSL.",
        )
    return MskIamFactory(msk_credentials(options))
