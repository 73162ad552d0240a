"""ListOffsets (key 2): the offset of a timestamp, or the earliest / latest offset."""

from ..schema import F, api, topics

LIST_OFFSETS = api(
    2,
    "ListOffsets",
    "1-10",
    flexible="6+",
    request=[
        F("replica_id", "int32", default=-1),
        F("isolation_level", "int8", "2+", default=0),
        topics(
            F("partition_index", "int32"),
            F("current_leader_epoch", "int32", "4+", default=-1),
            F(
                "timestamp",
                "int64",
                default=-1,
                about="-1 latest, -2 earliest, ...",
            ),
        ),
        F("timeout_ms", "int32", "10+", default=30000),
    ],
    response=[
        F("throttle_time_ms", "int32", "2+"),
        topics(
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("timestamp", "int64", default=-1),
            F("offset", "int64", default=-1),
            F("leader_epoch", "int32", "4+", default=-1),
        ),
    ],
)
