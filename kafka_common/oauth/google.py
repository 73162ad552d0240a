"""Google Managed Service for Apache Kafka: its OAUTHBEARER token shape.

Google's brokers take neither a plain access token nor a JWT from an identity provider,
but the three base64url parts its own ``GcpLoginCallbackHandler`` joins with dots: the
header ``{"typ":"JWT","alg":"GOOG_OAUTH2_TOKEN"}``, the claims (``exp``, ``iat``,
``iss`` ``Google``, ``scope`` ``kafka``, ``sub`` the principal's email), and the Google
access token itself. ``token_value`` builds it; ``token`` is the token callback the
``GcpLoginCallbackHandler`` option maps to: it gets Application Default Credentials from
google-auth (installed by the user: not a dependency of this project) and names the
principal from the service account, or ``GOOGLE_MANAGED_KAFKA_AUTH_PRINCIPAL`` as Google's
handler does.
"""

from __future__ import annotations

import json
import os
import time

from protocol.errors import AuthenticationError

from .tokens import b64url

__all__ = ["GCP_HANDLER", "token_value", "token"]

GCP_HANDLER = "com.google.cloud.hosted.kafka.auth.GcpLoginCallbackHandler"
_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
_HEADER = {"typ": "JWT", "alg": "GOOG_OAUTH2_TOKEN"}


def token_value(access_token: str, expires_at: float, principal: str, issued_at: float) -> str:
    """Google's token: base64url(header) . base64url(claims) . base64url(access token)."""
    claims = {
        "exp": int(expires_at),
        "iat": int(issued_at),
        "iss": "Google",
        "scope": "kafka",
        "sub": principal,
    }
    return ".".join(
        (
            b64url(json.dumps(_HEADER).encode()),
            b64url(json.dumps(claims).encode()),
            b64url(access_token.encode("utf-8")),
        )
    )


def token(_config: str = "") -> tuple[str, float, str]:
    """The token callback (confluent-kafka's ``oauth_cb`` contract) for Google's brokers."""
    import google.auth
    import google.auth.transport.requests

    credentials, _ = google.auth.default(scopes=[_SCOPE])
    credentials.refresh(google.auth.transport.requests.Request())
    principal = os.environ.get("GOOGLE_MANAGED_KAFKA_AUTH_PRINCIPAL") or getattr(
        credentials, "service_account_email", None
    )
    if not principal or principal == "default":
        raise AuthenticationError(
            "Google Managed Kafka: the credentials name no service account; set "
            "GOOGLE_MANAGED_KAFKA_AUTH_PRINCIPAL to the principal's email"
        )
    expiry = credentials.expiry
    expires_at = (
        expiry.timestamp()
        if expiry.tzinfo
        else expiry.replace(tzinfo=__import__("datetime").timezone.utc).timestamp()
    )
    now = time.time()
    return token_value(credentials.token, expires_at, principal, now), expires_at, principal
