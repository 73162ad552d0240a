"""Signed JWTs for the OAUTHBEARER tests."""

from __future__ import annotations

import json
from kafka_common.oauth.tokens import b64url


def jwt(claims: dict, header: dict | None = None) -> str:
    return ".".join(
        (
            b64url(json.dumps(header or {"alg": "none"}).encode()),
            b64url(json.dumps(claims).encode()),
            "sig",
        )
    )
