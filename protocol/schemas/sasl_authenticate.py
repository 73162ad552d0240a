"""SaslAuthenticate (key 36): one SASL round trip, framed as a Kafka request."""

from ..schema import F, api

SASL_AUTHENTICATE = api(
    36,
    "SaslAuthenticate",
    "0-2",
    flexible="2+",
    request=[
        F("auth_bytes", "bytes"),
    ],
    response=[
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("auth_bytes", "bytes"),
        F("session_lifetime_ms", "int64", "1+", default=0),
    ],
)
