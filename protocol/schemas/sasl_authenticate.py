"""SaslAuthenticate (key 36): one SASL round trip, framed as a Kafka request."""

from ..schema import Api, F, Message

SASL_AUTHENTICATE = Api(
    36,
    "SaslAuthenticate",
    request=Message(
        "0-2",
        flexible="2+",
        fields=[
            F("auth_bytes", "bytes"),
        ],
    ),
    response=Message(
        "0-2",
        flexible="2+",
        fields=[
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+", default=None),
            F("auth_bytes", "bytes"),
            F("session_lifetime_ms", "int64", "1+", default=0),
        ],
    ),
)
