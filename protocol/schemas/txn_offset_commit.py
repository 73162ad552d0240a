"""TxnOffsetCommit (key 28): commit a group's offsets inside a transaction."""

from ..schema import Api, F, Message

TXN_OFFSET_COMMIT = Api(
    28,
    "TxnOffsetCommit",
    request=Message(
        "0-5",
        flexible="3+",
        fields=[
            F("transactional_id", "string"),
            F("group_id", "string"),
            F("producer_id", "int64"),
            F("producer_epoch", "int16"),
            F("generation_id", "int32", "3+", default=-1),
            F("member_id", "string", "3+", default=""),
            F("group_instance_id", "string", "3+", nullable="3+", default=None),
            F(
                "topics",
                [
                    F("name", "string"),
                    F(
                        "partitions",
                        [
                            F("partition_index", "int32"),
                            F("committed_offset", "int64"),
                            F("committed_leader_epoch", "int32", "2+", default=-1),
                            F("committed_metadata", "string", nullable="0+", default=None),
                        ],
                    ),
                ],
            ),
        ],
    ),
    response=Message(
        "0-5",
        flexible="3+",
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
                            F("error_code", "int16"),
                        ],
                    ),
                ],
            ),
        ],
    ),
)
