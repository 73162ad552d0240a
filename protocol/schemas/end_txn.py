"""EndTxn (key 26): commit or abort a transaction."""

from ..schema import Api, F, Message

END_TXN = Api(
    26,
    "EndTxn",
    request=Message(
        "0-5",
        flexible="3+",
        fields=[
            F("transactional_id", "string"),
            F("producer_id", "int64"),
            F("producer_epoch", "int16"),
            F("committed", "bool", about="True to commit, False to abort"),
        ],
    ),
    response=Message(
        "0-5",
        flexible="3+",
        fields=[
            F("throttle_time_ms", "int32"),
            F("error_code", "int16"),
            F("producer_id", "int64", "5+", default=-1),
            F("producer_epoch", "int16", "5+", default=-1),
        ],
    ),
)
