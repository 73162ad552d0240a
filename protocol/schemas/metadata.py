"""Metadata (key 3): brokers, topics, partitions and their leaders."""

from ..schema import F, api

NO_AUTHORIZED_OPERATIONS = -(1 << 31)

METADATA = api(
    3,
    "Metadata",
    "0-13",
    flexible="9+",
    request=[
        F(
            "topics",
            [
                F("topic_id", "uuid", "10+"),
                F("name", "string", nullable="10+"),
            ],
            nullable="1+",
            about="null (v1+) for every topic; in v0 an empty list means every topic",
        ),
        F("allow_auto_topic_creation", "bool", "4+", default=True),
        F("include_cluster_authorized_operations", "bool", "8-10"),
        F("include_topic_authorized_operations", "bool", "8+"),
    ],
    response=[
        F("throttle_time_ms", "int32", "3+"),
        F(
            "brokers",
            [
                F("node_id", "int32"),
                F("host", "string"),
                F("port", "int32"),
                F("rack", "string", "1+", nullable="0+", default=None),
            ],
        ),
        F("cluster_id", "string", "2+", nullable="0+", default=None),
        F("controller_id", "int32", "1+", default=-1),
        F(
            "topics",
            [
                F("error_code", "int16"),
                F("name", "string", nullable="12+"),
                F("topic_id", "uuid", "10+"),
                F("is_internal", "bool", "1+"),
                F(
                    "partitions",
                    [
                        F("error_code", "int16"),
                        F("partition_index", "int32"),
                        F("leader_id", "int32"),
                        F("leader_epoch", "int32", "7+", default=-1),
                        F("replica_nodes", "[int32]"),
                        F("isr_nodes", "[int32]"),
                        F("offline_replicas", "[int32]", "5+"),
                    ],
                ),
                F("topic_authorized_operations", "int32", "8+", default=NO_AUTHORIZED_OPERATIONS),
            ],
        ),
        F("cluster_authorized_operations", "int32", "8-10", default=NO_AUTHORIZED_OPERATIONS),
        F("error_code", "int16", "13+"),
    ],
)
