"""Produce (key 0): append record batches to partitions."""

from ..schema import F, Struct, api

# A broker's address, sent back with NOT_LEADER_OR_FOLLOWER so the client can move at once.
NODE_ENDPOINT = [
    F("node_id", "int32"),
    F("host", "string"),
    F("port", "int32"),
    F("rack", "string", nullable="0+", default=None),
]

LEADER_ID_AND_EPOCH = Struct(
    [
        F("leader_id", "int32", default=-1),
        F("leader_epoch", "int32", default=-1),
    ]
)

PRODUCE = api(
    0,
    "Produce",
    "3-13",
    flexible="9+",
    request=[
        F("transactional_id", "string", nullable="0+", default=None),
        F("acks", "int16", default=-1, about="0: none, 1: the leader, -1: every in-sync replica"),
        F("timeout_ms", "int32", default=30000),
        F(
            "topic_data",
            [
                F("name", "string", "0-12"),
                F("topic_id", "uuid", "13+"),
                F(
                    "partition_data",
                    [
                        F("index", "int32"),
                        F("records", "records", nullable="0+"),
                    ],
                ),
            ],
        ),
    ],
    response=[
        F(
            "responses",
            [
                F("name", "string", "0-12"),
                F("topic_id", "uuid", "13+"),
                F(
                    "partition_responses",
                    [
                        F("index", "int32"),
                        F("error_code", "int16"),
                        F("base_offset", "int64"),
                        F("log_append_time_ms", "int64", default=-1),
                        F("log_start_offset", "int64", "5+", default=-1),
                        F(
                            "record_errors",
                            [
                                F("batch_index", "int32"),
                                F(
                                    "batch_index_error_message",
                                    "string",
                                    nullable="0+",
                                    default=None,
                                ),
                            ],
                            "8+",
                        ),
                        F("error_message", "string", "8+", nullable="0+", default=None),
                        F(
                            "current_leader",
                            LEADER_ID_AND_EPOCH,
                            "10+",
                            tag=0,
                            about="the new leader, with NOT_LEADER_OR_FOLLOWER",
                        ),
                    ],
                ),
            ],
        ),
        F("throttle_time_ms", "int32"),
        F("node_endpoints", NODE_ENDPOINT, "10+", tag=0),
    ],
)
