"""Where the AWS credentials of MSK IAM come from, in the order of AWS's MSK library:

1. ``awsRoleArn`` (with ``awsRoleSessionName``, ``awsStsRegion`` and, optionally, the base
   keys ``awsRoleAccessKeyId``/``awsRoleSecretAccessKey``/``awsRoleSessionToken``): STS
   AssumeRole with the base credentials (those keys, else the ones below);
2. ``awsProfileName``: that profile of the shared credentials and config files (through
   botocore when installed, which also knows SSO and process profiles; else the static
   keys of the files, read with the standard library);
3. the environment: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``;
4. botocore's default chain (instance roles, web identity, ...) when botocore is installed
   (the optional ``aws`` extra).

``MskCredentials`` is picklable and keeps resolved credentials per process, until five
minutes before temporary ones expire: role credentials from STS, and botocore's
credentials object per profile (botocore refreshes its temporary credentials itself, ahead
of their expiry), so a broker connection costs no botocore session, instance-metadata or
STS call; static credentials botocore found are looked up again after five minutes.
"""

from __future__ import annotations

import configparser
import os
import threading
import time
from dataclasses import dataclass, field

from protocol.config import Secret
from protocol.errors import ConfigError
from protocol.sasl_aws_msk_iam import AwsCredentials

from ..bounded_cache import BoundedCache

__all__ = ["MskCredentials"]

_CACHE: BoundedCache[tuple, AwsCredentials] = BoundedCache(64)  # assumed roles
_LOCK = threading.Lock()
_EARLY_S = 300


def _from_env() -> AwsCredentials | None:
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if not key or not secret:
        return None
    token = os.environ.get("AWS_SESSION_TOKEN")
    return AwsCredentials(key, Secret(secret), Secret(token) if token else None)


_BOTOCORE: BoundedCache[tuple, tuple] = BoundedCache(64)  # key -> (credentials, until)
_STATIC_S = 300  # how long botocore's credentials without an expiry are kept
#: The environment botocore's chain reads: another value is another set of credentials.
_CHAIN_ENV = (
    "AWS_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "AWS_ACCESS_KEY_ID",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_EC2_METADATA_DISABLED",
)


def _botocore_credentials(profile: str | None):
    """botocore's credentials object of ``profile``, made once per process (a session and
    its provider chain cost instance-metadata, STS or SSO calls) and reused while botocore
    keeps it fresh; None when botocore is missing or finds none."""
    key = (profile, *(os.environ.get(name) for name in _CHAIN_ENV))
    with _LOCK:
        cached = _BOTOCORE.get(key)
        if cached is not None and time.time() < cached[1]:
            return cached[0]
    try:
        import botocore.session
    except ImportError:
        return None
    creds = botocore.session.Session(profile=profile).get_credentials()
    if creds is None:
        return None
    refreshes = getattr(creds, "refresh_needed", None) is not None
    with _LOCK:
        _BOTOCORE.put(key, (creds, float("inf") if refreshes else time.time() + _STATIC_S))
    return creds


def _expiry(creds) -> float | None:
    expiry = getattr(creds, "_expiry_time", None)
    return expiry.timestamp() if expiry is not None else None


def _from_botocore(profile: str | None) -> AwsCredentials | None:
    creds = _botocore_credentials(profile)
    if creds is None:
        return None
    frozen = creds.get_frozen_credentials()  # refreshed by botocore ahead of expiry
    return AwsCredentials(
        frozen.access_key,
        Secret(frozen.secret_key),
        Secret(frozen.token) if frozen.token else None,
        _expiry(creds),
    )


def _from_files(profile: str) -> AwsCredentials | None:
    files = (
        (os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials", profile),
        (
            os.environ.get("AWS_CONFIG_FILE") or "~/.aws/config",
            profile if profile == "default" else f"profile {profile}",
        ),
    )
    for path, section in files:
        parser = configparser.RawConfigParser()
        try:
            parser.read(os.path.expanduser(path), encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError):
            raise ConfigError(f"awsProfileName: cannot parse {path}") from None
        if parser.has_section(section):
            items = dict(parser.items(section))
            if items.get("aws_access_key_id") and items.get("aws_secret_access_key"):
                token = items.get("aws_session_token")
                return AwsCredentials(
                    items["aws_access_key_id"],
                    Secret(items["aws_secret_access_key"]),
                    Secret(token) if token else None,
                )
    return None


@dataclass(frozen=True)
class MskCredentials:
    """The credential options of an MSK IAM JAAS line."""

    profile: str | None = None
    role_arn: str | None = None
    role_session_name: str = "aws-msk-iam-auth"
    sts_region: str | None = None
    role_base: AwsCredentials | None = field(default=None, repr=False)

    def describe(self) -> str:
        if self.role_arn:
            return f"awsRoleArn {self.role_arn} in kafka.sasl.jaas.config"
        if self.profile:
            return f"awsProfileName {self.profile} in kafka.sasl.jaas.config"
        return "the AWS credentials of the environment (AWS_ACCESS_KEY_ID...)"

    def _base(self) -> AwsCredentials:
        if self.role_base is not None and self.role_arn:
            return self.role_base
        if self.profile:
            found = _from_botocore(self.profile) or _from_files(self.profile)
            if found is None:
                raise ConfigError(
                    f"awsProfileName: the profile {self.profile!r} holds no credentials"
                )
            return found
        found = _from_env() or _from_botocore(None)
        if found is None:
            raise ConfigError(
                "AWS MSK IAM: no AWS credentials: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, or awsProfileName or awsRoleArn in "
                "kafka.sasl.jaas.config, or install botocore (the aws extra) "
                "for its credential chain"
            )
        return found

    def resolve(self) -> AwsCredentials:
        """The credentials to sign with now."""
        if not self.role_arn:
            return self._base()
        key = (
            self.profile,
            self.role_arn,
            self.role_session_name,
            self.sts_region,
            self.role_base.access_key_id if self.role_base else None,
        )
        with _LOCK:
            cached = _CACHE.get(key)
            if cached is not None and (cached.expires_at or 0) - _EARLY_S > time.time():
                return cached
            from .sts import assume_role

            region = (
                self.sts_region
                or os.environ.get("AWS_REGION")
                or os.environ.get("AWS_DEFAULT_REGION")
            )
            fresh = assume_role(self._base(), self.role_arn, self.role_session_name, region)
            return _CACHE.put(key, fresh)
