"""ListTransactions (key 66, KIP-664, Kafka 3.0+): the transactions a broker coordinates.

Each broker answers only for the transactional ids whose coordinator it is, so a client
that wants every open transaction of a cluster asks every broker. v1 adds a minimum
duration, v2 (KIP-1152) a regular expression the ids must match.
"""

from ..schema import F, api

LIST_TRANSACTIONS = api(
    66,
    "ListTransactions",
    "0-2",
    flexible="0+",
    request=[
        F("state_filters", "[string]", about="e.g. Ongoing; empty: every state"),
        F("producer_id_filters", "[int64]", about="empty: every producer id"),
        F(
            "duration_filter",
            "int64",
            "1+",
            default=-1,
            about="only transactions running longer than this (ms); -1: all",
        ),
        F(
            "transactional_id_pattern",
            "string",
            "2+",
            nullable="2+",
            default=None,
            about="a Java regular expression the ids must match; null or empty: all",
        ),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("unknown_state_filters", "[string]"),
        F(
            "transaction_states",
            [
                F("transactional_id", "string"),
                F("producer_id", "int64"),
                F("transaction_state", "string"),
            ],
        ),
    ],
)
