"""DeleteRecords (key 21): move partitions' log start offsets forward."""

from ..schema import F, api, topics

DELETE_RECORDS = api(
    21,
    "DeleteRecords",
    "0-2",
    flexible="2+",
    request=[
        topics(
            F("partition_index", "int32"),
            F("offset", "int64", about="-1: the high watermark"),
        ),
        F("timeout_ms", "int32", default=30000),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        topics(
            F("partition_index", "int32"),
            F("low_watermark", "int64"),
            F("error_code", "int16"),
        ),
    ],
)
