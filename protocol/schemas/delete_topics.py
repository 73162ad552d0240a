"""DeleteTopics (key 20)."""

from ..schema import Api, F, Message

DELETE_TOPICS = Api(
    20,
    "DeleteTopics",
    request=Message(
        "1-6",
        flexible="4+",
        fields=[
            F(
                "topics",
                [
                    F("name", "string", nullable="6+", default=None),
                    F("topic_id", "uuid"),
                ],
                "6+",
                about="by name or by id",
            ),
            F("topic_names", "[string]", "0-5"),
            F("timeout_ms", "int32", default=30000),
        ],
    ),
    response=Message(
        "1-6",
        flexible="4+",
        fields=[
            F("throttle_time_ms", "int32", "1+"),
            F(
                "responses",
                [
                    F("name", "string", nullable="6+"),
                    F("topic_id", "uuid", "6+"),
                    F("error_code", "int16"),
                    F("error_message", "string", "5+", nullable="5+", default=None),
                ],
            ),
        ],
    ),
)
