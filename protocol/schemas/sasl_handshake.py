"""SaslHandshake (key 17): choose a SASL mechanism."""

from ..schema import F, api

SASL_HANDSHAKE = api(
    17,
    "SaslHandshake",
    "0-1",
    request=[
        F("mechanism", "string"),
    ],
    response=[
        F("error_code", "int16"),
        F("mechanisms", "[string]"),
    ],
)
