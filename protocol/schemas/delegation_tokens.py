"""The delegation token APIs (keys 38-41): create, renew, expire and describe a token.

A delegation token is a token id and an HMAC a broker issues to a signed-in principal; a
client then signs in with SCRAM using the id as user name and the HMAC (base64) as password.
Versions from 1: Kafka 4 removed version 0 of each.
"""

from ..schema import F, api


def _principal() -> list[F]:
    return [F("principal_type", "string"), F("principal_name", "string")]


def _token(timestamp_suffix: str) -> list[F]:
    """A token's owner, requester, times, id and HMAC (the times' names end in ``_ms`` in
    CreateDelegationToken's response only)."""
    return [
        *_principal(),
        F("token_requester_principal_type", "string", "3+"),
        F("token_requester_principal_name", "string", "3+"),
        F(f"issue_timestamp{timestamp_suffix}", "int64"),
        F(f"expiry_timestamp{timestamp_suffix}", "int64"),
        F(f"max_timestamp{timestamp_suffix}", "int64"),
        F("token_id", "string"),
        F("hmac", "bytes"),
    ]


# RenewDelegationToken and ExpireDelegationToken answer alike: the token's new expiry.
_NEW_EXPIRY = [
    F("error_code", "int16"),
    F("expiry_timestamp_ms", "int64"),
    F("throttle_time_ms", "int32"),
]

CREATE_DELEGATION_TOKEN = api(
    38,
    "CreateDelegationToken",
    "1-3",
    flexible="2+",
    request=[
        F("owner_principal_type", "string", "3+", nullable="3+", default=None),
        F("owner_principal_name", "string", "3+", nullable="3+", default=None),
        F("renewers", _principal()),
        F("max_lifetime_ms", "int64", default=-1, about="-1: the broker's default"),
    ],
    response=[F("error_code", "int16"), *_token("_ms"), F("throttle_time_ms", "int32")],
)

RENEW_DELEGATION_TOKEN = api(
    39,
    "RenewDelegationToken",
    "1-2",
    flexible="2+",
    request=[F("hmac", "bytes"), F("renew_period_ms", "int64", default=-1)],
    response=_NEW_EXPIRY,
)

EXPIRE_DELEGATION_TOKEN = api(
    40,
    "ExpireDelegationToken",
    "1-2",
    flexible="2+",
    request=[
        F("hmac", "bytes"),
        F("expiry_time_period_ms", "int64", default=-1, about="-1: now"),
    ],
    response=_NEW_EXPIRY,
)

DESCRIBE_DELEGATION_TOKEN = api(
    41,
    "DescribeDelegationToken",
    "1-3",
    flexible="2+",
    request=[F("owners", _principal(), nullable="0+", default=None, about="null: all")],
    response=[
        F("error_code", "int16"),
        F("tokens", [*_token(""), F("renewers", _principal())]),
        F("throttle_time_ms", "int32"),
    ],
)
