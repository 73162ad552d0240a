"""The delegation token APIs (keys 38-41): create, renew, expire and describe a token.

A delegation token is a token id and an HMAC a broker issues to a signed-in principal; a
client then signs in with SCRAM using the id as user name and the HMAC (base64) as password.
Versions from 1: Kafka 4 removed version 0 of each.
"""

from ..schema import Api, F, Message


def _principal() -> list[F]:
    return [F("principal_type", "string"), F("principal_name", "string")]


CREATE_DELEGATION_TOKEN = Api(
    38,
    "CreateDelegationToken",
    request=Message(
        "1-3",
        flexible="2+",
        fields=[
            F("owner_principal_type", "string", "3+", nullable="3+", default=None),
            F("owner_principal_name", "string", "3+", nullable="3+", default=None),
            F("renewers", _principal()),
            F("max_lifetime_ms", "int64", default=-1, about="-1: the broker's default"),
        ],
    ),
    response=Message(
        "1-3",
        flexible="2+",
        fields=[
            F("error_code", "int16"),
            *_principal(),
            F("token_requester_principal_type", "string", "3+"),
            F("token_requester_principal_name", "string", "3+"),
            F("issue_timestamp_ms", "int64"),
            F("expiry_timestamp_ms", "int64"),
            F("max_timestamp_ms", "int64"),
            F("token_id", "string"),
            F("hmac", "bytes"),
            F("throttle_time_ms", "int32"),
        ],
    ),
)

RENEW_DELEGATION_TOKEN = Api(
    39,
    "RenewDelegationToken",
    request=Message(
        "1-2",
        flexible="2+",
        fields=[F("hmac", "bytes"), F("renew_period_ms", "int64", default=-1)],
    ),
    response=Message(
        "1-2",
        flexible="2+",
        fields=[
            F("error_code", "int16"),
            F("expiry_timestamp_ms", "int64"),
            F("throttle_time_ms", "int32"),
        ],
    ),
)

EXPIRE_DELEGATION_TOKEN = Api(
    40,
    "ExpireDelegationToken",
    request=Message(
        "1-2",
        flexible="2+",
        fields=[
            F("hmac", "bytes"),
            F("expiry_time_period_ms", "int64", default=-1, about="-1: now"),
        ],
    ),
    response=Message(
        "1-2",
        flexible="2+",
        fields=[
            F("error_code", "int16"),
            F("expiry_timestamp_ms", "int64"),
            F("throttle_time_ms", "int32"),
        ],
    ),
)

DESCRIBE_DELEGATION_TOKEN = Api(
    41,
    "DescribeDelegationToken",
    request=Message(
        "1-3",
        flexible="2+",
        fields=[F("owners", _principal(), nullable="0+", default=None, about="null: all")],
    ),
    response=Message(
        "1-3",
        flexible="2+",
        fields=[
            F("error_code", "int16"),
            F(
                "tokens",
                [
                    *_principal(),
                    F("token_requester_principal_type", "string", "3+"),
                    F("token_requester_principal_name", "string", "3+"),
                    F("issue_timestamp", "int64"),
                    F("expiry_timestamp", "int64"),
                    F("max_timestamp", "int64"),
                    F("token_id", "string"),
                    F("hmac", "bytes"),
                    F("renewers", _principal()),
                ],
            ),
            F("throttle_time_ms", "int32"),
        ],
    ),
)
