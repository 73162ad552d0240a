"""AWS MSK IAM sign-in, sans-IO: SigV4 presigning in the standard library.

Two ways to sign in to an MSK cluster with IAM, both from a SigV4 presigned
``GET https://<host>/?Action=kafka-cluster:Connect`` for service ``kafka-cluster``, valid
900 s:

- the ``AWS_MSK_IAM`` mechanism (``AwsMskIamMechanism``): one JSON message holding the
  presigned query's parameters (lower-cased), ``version`` ``2020_10_22``, ``host`` and
  ``user-agent``, as AWS's Java library sends it; signed for the broker's own host name.
  The broker answers with a JSON object (version and request id) on success.
- OAUTHBEARER with AWS's ``IAMOAuthBearerLoginCallbackHandler`` (``msk_oauth_token``): the
  base64url (no padding) of the presigned URL of ``kafka.<region>.amazonaws.com`` with
  ``User-Agent`` appended after the signature, byte for byte as AWS's Python signer
  (botocore's ``SigV4QueryAuth``) builds it.

Both sign the hash of the empty payload, as botocore's ``SigV4QueryAuth`` and the Java
SDK's ``Aws4Signer.presign`` do for a non-S3 service.

``region_from_host`` reads the region out of a broker host name (as AWS's library does).
Nothing here reads credentials or the clock on its own: callers pass ``AwsCredentials``
and the signing time. Secret keys are ``Secret`` and never in a repr or message.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import hmac
import json
import re
from dataclasses import dataclass, field
from urllib.parse import quote

from .config import Secret
from .errors import AuthenticationError, ConfigError, ProtocolError
from .sasl import Mechanism

__all__ = [
    "AwsCredentials",
    "presign",
    "msk_iam_payload",
    "msk_oauth_token",
    "region_from_host",
    "AwsMskIamMechanism",
    "SERVICE",
    "EXPIRES_S",
]

SERVICE = "kafka-cluster"
ACTION = "kafka-cluster:Connect"
EXPIRES_S = 900
VERSION = "2020_10_22"
ALGORITHM = "AWS4-HMAC-SHA256"
EMPTY_PAYLOAD_HASH = hashlib.sha256(b"").hexdigest()
_REGION_RE = re.compile(
    r"(?<![a-z0-9])((?:[a-z]{2}|us-gov|us-iso[a-z]?|eu-isoe?|cn)"
    r"-[a-z]+-\d+)(?![a-z0-9])"
)
_MAX_SERVER_MESSAGE = 8192


@dataclass(frozen=True)
class AwsCredentials:
    """An access key, its secret and an optional session token."""

    access_key_id: str
    secret_access_key: Secret = field(repr=False)
    session_token: Secret | None = field(default=None, repr=False)
    expires_at: float | None = None  # seconds since the epoch, for temporary credentials

    def __post_init__(self) -> None:
        if not self.access_key_id or not self.secret_access_key:
            raise ConfigError("AWS credentials need an access key id and a secret access key")
        if not isinstance(self.secret_access_key, Secret):
            object.__setattr__(self, "secret_access_key", Secret(self.secret_access_key))
        if self.session_token is not None and not isinstance(self.session_token, Secret):
            object.__setattr__(self, "session_token", Secret(self.session_token))


def region_from_host(host: str) -> str | None:
    """The AWS region named in a host name (``b-1.c.abc.c2.kafka.eu-west-1.amazonaws.com``
    -> ``eu-west-1``), or None."""
    match = _REGION_RE.search(host.lower())
    return match.group(1) if match else None


def _quote(text: str) -> str:
    return quote(text, safe="-_.~")


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode("utf-8"), hashlib.sha256).digest()


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = _hmac(("AWS4" + secret).encode("utf-8"), date)
    return _hmac(_hmac(_hmac(key, region), service), "aws4_request")


def presign(
    credentials: AwsCredentials,
    host: str,
    region: str | None,
    when: _dt.datetime,
    *,
    params: dict[str, str] | None = None,
    expires: int = EXPIRES_S,
    service: str = SERVICE,
) -> list[tuple[str, str]]:
    """The query parameters of a SigV4 presigned ``GET https://host/?params``: the
    operation's, then the auth ones (in botocore's order), then ``X-Amz-Signature``. No
    ``region`` is a ConfigError."""
    if not region:
        raise ConfigError(
            "AWS MSK IAM: no AWS region (none in the broker host name; set "
            "the AWS_REGION environment variable)"
        )
    stamp = when.astimezone(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    date = stamp[:8]
    scope = f"{date}/{region}/{service}/aws4_request"
    query = list((params or {"Action": ACTION}).items())
    query += [
        ("X-Amz-Algorithm", ALGORITHM),
        ("X-Amz-Credential", f"{credentials.access_key_id}/{scope}"),
        ("X-Amz-Date", stamp),
        ("X-Amz-Expires", str(expires)),
        ("X-Amz-SignedHeaders", "host"),
    ]
    if credentials.session_token is not None:
        query.append(("X-Amz-Security-Token", credentials.session_token.reveal()))
    canonical_query = "&".join(f"{_quote(k)}={_quote(v)}" for k, v in sorted(query))
    canonical_request = "\n".join(
        ("GET", "/", canonical_query, f"host:{host}", "", "host", EMPTY_PAYLOAD_HASH)
    )
    string_to_sign = "\n".join(
        (ALGORITHM, stamp, scope, hashlib.sha256(canonical_request.encode("utf-8")).hexdigest())
    )
    key = signing_key(credentials.secret_access_key.reveal(), date, region, service)
    signature = hmac.new(key, string_to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    return query + [("X-Amz-Signature", signature)]


def msk_iam_payload(
    credentials: AwsCredentials, host: str, region: str | None, when: _dt.datetime, user_agent: str
) -> bytes:
    """The AWS_MSK_IAM client message for the broker at ``host``."""
    query = presign(credentials, host, region, when)
    payload = {"version": VERSION, "host": host, "user-agent": user_agent}
    payload.update((k.lower(), v) for k, v in query)
    return json.dumps(payload, separators=(",", ":")).encode("utf-8")


def msk_oauth_token(
    credentials: AwsCredentials, region: str | None, when: _dt.datetime, user_agent: str
) -> str:
    """The OAUTHBEARER token of AWS's MSK IAM signer: base64url of the presigned URL."""
    host = f"kafka.{region}.amazonaws.com"
    query = presign(credentials, host, region, when)
    query.append(("User-Agent", user_agent))
    url = f"https://{host}/?" + "&".join(f"{_quote(k)}={_quote(v)}" for k, v in query)
    return base64.urlsafe_b64encode(url.encode("utf-8")).rstrip(b"=").decode("ascii")


class AwsMskIamMechanism(Mechanism):
    """The client side of one AWS_MSK_IAM exchange: the signed JSON, then the broker's
    JSON answer (``version`` and ``request-id``)."""

    name = "AWS_MSK_IAM"

    def __init__(self, payload: bytes, *, hint: str = "") -> None:
        self._payload: bytes | None = payload
        self.hint = hint
        self.request_id: str | None = None
        self._state = "initial"

    def __repr__(self) -> str:
        return f"AwsMskIamMechanism(state={self._state!r})"

    def initial_response(self) -> bytes:
        if self._payload is None:
            raise ConfigError("AWS_MSK_IAM: initial_response() may be called only once")
        payload, self._payload = self._payload, None
        self._state = "sent"
        return payload

    def respond(self, challenge: bytes) -> bytes | None:
        if self._state != "sent":
            raise ConfigError(f"AWS_MSK_IAM: respond() called in state {self._state!r}")
        challenge = bytes(challenge)
        if len(challenge) > _MAX_SERVER_MESSAGE:
            raise ProtocolError(
                f"AWS_MSK_IAM: the broker's answer is too long ({len(challenge)} bytes)"
            )
        try:
            answer = json.loads(challenge.decode("utf-8")) if challenge else None
        except (UnicodeDecodeError, ValueError):
            raise ProtocolError("AWS_MSK_IAM: the broker's answer is not JSON") from None
        if not isinstance(answer, dict) or answer.get("version") != VERSION:
            raise AuthenticationError(
                "AWS_MSK_IAM: the broker's answer is not a version "
                f"{VERSION} authentication response"
            )
        request_id = answer.get("request-id")
        self.request_id = request_id if isinstance(request_id, str) else None
        self._state = "done"
        return None

    def failure_text(self) -> str:
        return f"check {self.hint}" if self.hint else ""
