"""Fetch (key 1): read record batches from partitions."""

from ..schema import F, Struct, api
from .produce import LEADER_ID_AND_EPOCH, NODE_ENDPOINT

INT64_MAX = (1 << 63) - 1

FETCH = api(
    1,
    "Fetch",
    "4-18",
    flexible="12+",
    request=[
        F("cluster_id", "string", "12+", nullable="12+", tag=0, default=None),
        F("replica_id", "int32", "0-14", default=-1, about="-1 for a consumer"),
        F(
            "replica_state",
            Struct(
                [
                    F("replica_id", "int32", default=-1),
                    F("replica_epoch", "int64", default=-1),
                ]
            ),
            "15+",
            tag=1,
            about="followers only",
        ),
        F("max_wait_ms", "int32", default=500),
        F("min_bytes", "int32", default=1),
        F("max_bytes", "int32", default=0x7FFFFFFF),
        F("isolation_level", "int8", default=0, about="0 read_uncommitted, 1 read_committed"),
        F("session_id", "int32", "7+", default=0),
        F("session_epoch", "int32", "7+", default=-1),
        F(
            "topics",
            [
                F("topic", "string", "0-12"),
                F("topic_id", "uuid", "13+"),
                F(
                    "partitions",
                    [
                        F("partition", "int32"),
                        F("current_leader_epoch", "int32", "9+", default=-1),
                        F("fetch_offset", "int64"),
                        F("last_fetched_epoch", "int32", "12+", default=-1),
                        F("log_start_offset", "int64", "5+", default=-1),
                        F("partition_max_bytes", "int32", default=1 << 20),
                        F("replica_directory_id", "uuid", "17+", tag=0, about="followers only"),
                        F(
                            "high_watermark",
                            "int64",
                            "18+",
                            tag=1,
                            default=INT64_MAX,
                            about="followers only",
                        ),
                    ],
                ),
            ],
        ),
        F(
            "forgotten_topics_data",
            [
                F("topic", "string", "0-12"),
                F("topic_id", "uuid", "13+"),
                F("partitions", "[int32]"),
            ],
            "7+",
        ),
        F("rack_id", "string", "11+", default=""),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16", "7+"),
        F("session_id", "int32", "7+", default=0),
        F(
            "responses",
            [
                F("topic", "string", "0-12"),
                F("topic_id", "uuid", "13+"),
                F(
                    "partitions",
                    [
                        F("partition_index", "int32"),
                        F("error_code", "int16"),
                        F("high_watermark", "int64"),
                        F("last_stable_offset", "int64", default=-1),
                        F("log_start_offset", "int64", "5+", default=-1),
                        F(
                            "diverging_epoch",
                            Struct(
                                [
                                    F("epoch", "int32", default=-1),
                                    F("end_offset", "int64", default=-1),
                                ]
                            ),
                            "12+",
                            tag=0,
                        ),
                        F("current_leader", LEADER_ID_AND_EPOCH, "12+", tag=1),
                        F(
                            "snapshot_id",
                            Struct(
                                [
                                    F("end_offset", "int64", default=-1),
                                    F("epoch", "int32", default=-1),
                                ]
                            ),
                            "12+",
                            tag=2,
                        ),
                        F(
                            "aborted_transactions",
                            [
                                F("producer_id", "int64"),
                                F("first_offset", "int64"),
                            ],
                            nullable="0+",
                        ),
                        F("preferred_read_replica", "int32", "11+", default=-1),
                        F("records", "records", nullable="0+"),
                    ],
                ),
            ],
        ),
        F("node_endpoints", NODE_ENDPOINT, "16+", tag=0),
    ],
)
