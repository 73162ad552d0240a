"""OffsetCommit (key 8): store a consumer group's positions."""

from ..schema import F, api

OFFSET_COMMIT = api(
    8,
    "OffsetCommit",
    "2-10",
    flexible="8+",
    request=[
        F("group_id", "string"),
        F("generation_id_or_member_epoch", "int32", default=-1),
        F("member_id", "string"),
        F("group_instance_id", "string", "7+", nullable="0+", default=None),
        F("retention_time_ms", "int64", "2-4", default=-1),
        F(
            "topics",
            [
                F("name", "string", "0-9"),
                F("topic_id", "uuid", "10+"),
                F(
                    "partitions",
                    [
                        F("partition_index", "int32"),
                        F("committed_offset", "int64"),
                        F("committed_leader_epoch", "int32", "6+", default=-1),
                        F("committed_metadata", "string", nullable="0+", default=None),
                    ],
                ),
            ],
        ),
    ],
    response=[
        F("throttle_time_ms", "int32", "3+"),
        F(
            "topics",
            [
                F("name", "string", "0-9"),
                F("topic_id", "uuid", "10+"),
                F(
                    "partitions",
                    [
                        F("partition_index", "int32"),
                        F("error_code", "int16"),
                    ],
                ),
            ],
        ),
    ],
)
