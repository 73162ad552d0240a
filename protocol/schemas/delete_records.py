"""DeleteRecords (key 21): move partitions' log start offsets forward."""

from ..schema import Api, F, Message

DELETE_RECORDS = Api(
    21,
    "DeleteRecords",
    request=Message(
        "0-2",
        flexible="2+",
        fields=[
            F(
                "topics",
                [
                    F("name", "string"),
                    F(
                        "partitions",
                        [
                            F("partition_index", "int32"),
                            F("offset", "int64", about="-1: the high watermark"),
                        ],
                    ),
                ],
            ),
            F("timeout_ms", "int32", default=30000),
        ],
    ),
    response=Message(
        "0-2",
        flexible="2+",
        fields=[
            F("throttle_time_ms", "int32"),
            F(
                "topics",
                [
                    F("name", "string"),
                    F(
                        "partitions",
                        [
                            F("partition_index", "int32"),
                            F("low_watermark", "int64"),
                            F("error_code", "int16"),
                        ],
                    ),
                ],
            ),
        ],
    ),
)
