"""CreateTopics (key 19)."""

from ..schema import F, api

CREATE_TOPICS = api(
    19,
    "CreateTopics",
    "2-7",
    flexible="5+",
    request=[
        F(
            "topics",
            [
                F("name", "string"),
                F("num_partitions", "int32", default=-1, about="-1: the broker's default"),
                F("replication_factor", "int16", default=-1, about="-1: the broker's default"),
                F(
                    "assignments",
                    [
                        F("partition_index", "int32"),
                        F("broker_ids", "[int32]"),
                    ],
                ),
                F(
                    "configs",
                    [
                        F("name", "string"),
                        F("value", "string", nullable="0+", default=None),
                    ],
                ),
            ],
        ),
        F("timeout_ms", "int32", default=60000),
        F("validate_only", "bool", "1+"),
    ],
    response=[
        F("throttle_time_ms", "int32", "2+"),
        F(
            "topics",
            [
                F("name", "string"),
                F("topic_id", "uuid", "7+"),
                F("error_code", "int16"),
                F("error_message", "string", "1+", nullable="0+", default=None),
                F("topic_config_error_code", "int16", "5+", tag=0),
                F("num_partitions", "int32", "5+", default=-1),
                F("replication_factor", "int16", "5+", default=-1),
                F(
                    "configs",
                    [
                        F("name", "string"),
                        F("value", "string", nullable="0+", default=None),
                        F("read_only", "bool"),
                        F("config_source", "int8", default=-1),
                        F("is_sensitive", "bool"),
                    ],
                    "5+",
                    nullable="5+",
                ),
            ],
        ),
    ],
)
