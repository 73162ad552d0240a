"""AddOffsetsToTxn (key 25): enlist a consumer group's offsets in a transaction."""

from ..schema import Api, F, Message

ADD_OFFSETS_TO_TXN = Api(
    25,
    "AddOffsetsToTxn",
    request=Message(
        "0-4",
        flexible="3+",
        fields=[
            F("transactional_id", "string"),
            F("producer_id", "int64"),
            F("producer_epoch", "int16"),
            F("group_id", "string"),
        ],
    ),
    response=Message(
        "0-4",
        flexible="3+",
        fields=[
            F("throttle_time_ms", "int32"),
            F("error_code", "int16"),
        ],
    ),
)
