"""OffsetFetch (key 9): read a consumer group's committed positions."""

from ..schema import F, api

_PARTITION_OFFSET = [
    F("partition_index", "int32"),
    F("committed_offset", "int64", default=-1),
    F("committed_leader_epoch", "int32", "5+", default=-1),
    F("metadata", "string", nullable="0+", default=None),
    F("error_code", "int16"),
]

OFFSET_FETCH = api(
    9,
    "OffsetFetch",
    "1-10",
    flexible="6+",
    request=[
        F("group_id", "string", "0-7"),
        F(
            "topics",
            [
                F("name", "string"),
                F("partition_indexes", "[int32]"),
            ],
            "0-7",
            nullable="2-7",
            about="null (v2+) for every partition the group has",
        ),
        F(
            "groups",
            [
                F("group_id", "string"),
                F("member_id", "string", "9+", nullable="9+", default=None),
                F("member_epoch", "int32", "9+", default=-1),
                F(
                    "topics",
                    [
                        F("name", "string", "0-9"),
                        F("topic_id", "uuid", "10+"),
                        F("partition_indexes", "[int32]"),
                    ],
                    nullable="8+",
                ),
            ],
            "8+",
        ),
        F("require_stable", "bool", "7+"),
    ],
    response=[
        F("throttle_time_ms", "int32", "3+"),
        F(
            "topics",
            [
                F("name", "string"),
                F("partitions", _PARTITION_OFFSET),
            ],
            "0-7",
        ),
        F("error_code", "int16", "2-7"),
        F(
            "groups",
            [
                F("group_id", "string"),
                F(
                    "topics",
                    [
                        F("name", "string", "0-9"),
                        F("topic_id", "uuid", "10+"),
                        F("partitions", _PARTITION_OFFSET),
                    ],
                ),
                F("error_code", "int16"),
            ],
            "8+",
        ),
    ],
)
