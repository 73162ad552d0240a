"""EndTxn (key 26): commit or abort a transaction."""

from ..schema import F, api

END_TXN = api(
    26,
    "EndTxn",
    "0-5",
    flexible="3+",
    request=[
        F("transactional_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("committed", "bool", about="True to commit, False to abort"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("producer_id", "int64", "5+", default=-1),
        F("producer_epoch", "int16", "5+", default=-1),
    ],
)
