"""InitProducerId (key 22): a producer id and epoch, for idempotence and transactions."""

from ..schema import F, api

INIT_PRODUCER_ID = api(
    22,
    "InitProducerId",
    "0-6",
    flexible="2+",
    request=[
        F("transactional_id", "string", nullable="0+", default=None),
        F("transaction_timeout_ms", "int32"),
        F("producer_id", "int64", "3+", default=-1),
        F("producer_epoch", "int16", "3+", default=-1),
        F("enable2_pc", "bool", "6+", about="two-phase commit (KIP-939); v6 is unstable"),
        F("keep_prepared_txn", "bool", "6+"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("producer_id", "int64", default=-1),
        F("producer_epoch", "int16"),
        F("ongoing_txn_producer_id", "int64", "6+", default=-1),
        F("ongoing_txn_producer_epoch", "int16", "6+", default=-1),
    ],
)
