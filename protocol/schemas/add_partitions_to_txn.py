"""AddPartitionsToTxn (key 24): enlist partitions in a transaction."""

from ..schema import F, api

_TOPIC = [
    F("name", "string"),
    F("partitions", "[int32]"),
]

_TOPIC_RESULT = [
    F("name", "string"),
    F(
        "results_by_partition",
        [
            F("partition_index", "int32"),
            F("partition_error_code", "int16"),
        ],
    ),
]

ADD_PARTITIONS_TO_TXN = api(
    24,
    "AddPartitionsToTxn",
    "0-5",
    flexible="3+",
    request=[
        F(
            "transactions",
            [
                F("transactional_id", "string"),
                F("producer_id", "int64"),
                F("producer_epoch", "int16"),
                F("verify_only", "bool"),
                F("topics", _TOPIC),
            ],
            "4+",
            about="v4+ is for brokers; clients send v3 and below",
        ),
        F("v3_and_below_transactional_id", "string", "0-3"),
        F("v3_and_below_producer_id", "int64", "0-3"),
        F("v3_and_below_producer_epoch", "int16", "0-3"),
        F("v3_and_below_topics", _TOPIC, "0-3"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16", "4+"),
        F(
            "results_by_transaction",
            [
                F("transactional_id", "string"),
                F("topic_results", _TOPIC_RESULT),
            ],
            "4+",
        ),
        F("results_by_topic_v3_and_below", _TOPIC_RESULT, "0-3"),
    ],
)
