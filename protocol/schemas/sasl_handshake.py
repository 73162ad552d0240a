"""SaslHandshake (key 17): choose a SASL mechanism."""

from ..schema import Api, F, Message

SASL_HANDSHAKE = Api(
    17,
    "SaslHandshake",
    request=Message(
        "0-1",
        fields=[
            F("mechanism", "string"),
        ],
    ),
    response=Message(
        "0-1",
        fields=[
            F("error_code", "int16"),
            F("mechanisms", "[string]"),
        ],
    ),
)
