"""STS AssumeRole over HTTPS, signed with SigV4 in the standard library.

The endpoint is ``https://sts.<region>.amazonaws.com/`` (the global one without a region),
or ``AWS_ENDPOINT_URL_STS`` / ``AWS_ENDPOINT_URL`` when set, as the AWS SDKs allow. The
region (``awsStsRegion``, an option) must look like one (letters, digits, dashes), so it
cannot move the host; the endpoint must be in ``PYKAFKA_ALLOWED_URLS``
(``kafka_common.trust``); no redirect is followed (the request is signed) and the answer
is bounded in size and time.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import os
import re
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from typing import Any

from protocol.config import Secret
from protocol.errors import AuthenticationError, ConfigError
from protocol.sasl_aws_msk_iam import ALGORITHM, AwsCredentials, signing_key

from .. import trust

__all__ = ["assume_role", "sign_post"]

_NS = "{https://sts.amazonaws.com/doc/2011-06-15/}"
_REGION = re.compile(r"[a-z]{2}(-[a-z0-9]+)+")
_MAX_ANSWER = 1 << 20
STS_OPTION = "awsRoleArn/awsStsRegion of kafka.sasl.jaas.config (STS AssumeRole)"


def sts_endpoint(region: str | None) -> str:
    """The STS endpoint for ``region`` (checked to be a region name)."""
    explicit = os.environ.get("AWS_ENDPOINT_URL_STS") or os.environ.get("AWS_ENDPOINT_URL")
    if explicit:
        return explicit
    if region and not _REGION.fullmatch(region):
        raise ConfigError(f"awsStsRegion: {region[:60]!r} is not an AWS region name")
    return f"https://sts.{region}.amazonaws.com/" if region else "https://sts.amazonaws.com/"


def sign_post(
    credentials: AwsCredentials, url: str, body: str, region: str, service: str, when: _dt.datetime
) -> dict[str, str]:
    """The headers of a SigV4-signed form POST (Authorization included)."""
    parts = urllib.parse.urlsplit(url)
    stamp = when.astimezone(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    headers = {
        "content-type": "application/x-www-form-urlencoded; charset=utf-8",
        "host": parts.netloc,
        "x-amz-date": stamp,
    }
    if credentials.session_token is not None:
        headers["x-amz-security-token"] = credentials.session_token.reveal()
    signed = ";".join(sorted(headers))
    canonical = "\n".join(
        (
            "POST",
            parts.path or "/",
            "",
            "".join(f"{k}:{headers[k]}\n" for k in sorted(headers)),
            signed,
            hashlib.sha256(body.encode("utf-8")).hexdigest(),
        )
    )
    scope = f"{stamp[:8]}/{region}/{service}/aws4_request"
    to_sign = "\n".join(
        (ALGORITHM, stamp, scope, hashlib.sha256(canonical.encode("utf-8")).hexdigest())
    )
    key = signing_key(credentials.secret_access_key.reveal(), stamp[:8], region, service)
    signature = hmac.new(key, to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    headers["authorization"] = (
        f"{ALGORITHM} Credential={credentials.access_key_id}/{scope}, "
        f"SignedHeaders={signed}, Signature={signature}"
    )
    return headers


def assume_role(
    base: AwsCredentials,
    role_arn: str,
    session_name: str,
    region: str | None,
    timeout_s: float = 10.0,
) -> AwsCredentials:
    """Temporary credentials of ``role_arn``; AuthenticationError naming awsRoleArn."""
    endpoint = trust.check_url(sts_endpoint(region), STS_OPTION, "STS endpoint")
    if not endpoint.lower().startswith("https:"):
        trust.warn_plaintext(
            "sts",
            f"the STS endpoint {endpoint} is not https: the signed "
            "AssumeRole request and the role's credentials travel in the "
            "clear",
        )
    body = urllib.parse.urlencode(
        {
            "Action": "AssumeRole",
            "Version": "2011-06-15",
            "RoleArn": role_arn,
            "RoleSessionName": session_name,
        }
    )
    headers = sign_post(
        base, endpoint, body, region or "us-east-1", "sts", _dt.datetime.now(_dt.timezone.utc)
    )
    request = urllib.request.Request(
        endpoint, data=body.encode("utf-8"), method="POST", headers=headers
    )
    context = ssl.create_default_context() if endpoint.startswith("https:") else None
    try:
        with trust.open_url(request, timeout=timeout_s, context=context) as response:
            document = trust.read_bounded(
                response, _MAX_ANSWER, time.monotonic() + timeout_s, f"STS at {endpoint}"
            )
    except trust.RedirectRefused as e:
        raise AuthenticationError(f"STS AssumeRole of {role_arn}: {e}") from None
    except ConfigError as e:
        raise AuthenticationError(f"STS AssumeRole of {role_arn}: {e}") from None
    except urllib.error.HTTPError as e:
        raise AuthenticationError(
            f"STS AssumeRole of {role_arn} (awsRoleArn in "
            f"kafka.sasl.jaas.config) was refused: HTTP {e.code}"
        ) from None
    except (urllib.error.URLError, OSError) as e:
        raise AuthenticationError(
            f"STS AssumeRole of {role_arn}: cannot reach {endpoint}: {getattr(e, 'reason', e)}"
        ) from None
    try:
        root = ET.fromstring(document)
        creds = root.find(f"{_NS}AssumeRoleResult/{_NS}Credentials")
        # a missing element is None, whose .find or .text is the AttributeError caught below
        values: dict[str, Any] = {
            name: creds.find(_NS + name).text  # type: ignore[union-attr]
            for name in ("AccessKeyId", "SecretAccessKey", "SessionToken", "Expiration")
        }
    except (ET.ParseError, AttributeError):
        raise AuthenticationError(
            f"STS AssumeRole of {role_arn}: the answer is not an AssumeRoleResponse"
        ) from None
    expires = _dt.datetime.fromisoformat(values["Expiration"].replace("Z", "+00:00"))
    return AwsCredentials(
        values["AccessKeyId"],
        Secret(values["SecretAccessKey"]),
        Secret(values["SessionToken"]),
        expires.timestamp(),
    )
