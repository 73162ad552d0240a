"""DeleteTopics (key 20)."""

from ..schema import F, api

DELETE_TOPICS = api(
    20,
    "DeleteTopics",
    "1-6",
    flexible="4+",
    request=[
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
    response=[
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
)
