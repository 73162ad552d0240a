"""FindCoordinator (key 10): the broker coordinating a group or a transactional id."""

from ..schema import F, api

FIND_COORDINATOR = api(
    10,
    "FindCoordinator",
    "0-6",
    flexible="3+",
    request=[
        F("key", "string", "0-3"),
        F("key_type", "int8", "1+", default=0, about="0 group, 1 transaction, 2 share group"),
        F("coordinator_keys", "[string]", "4+"),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16", "0-3"),
        F("error_message", "string", "1-3", nullable="0+", default=None),
        F("node_id", "int32", "0-3"),
        F("host", "string", "0-3"),
        F("port", "int32", "0-3"),
        F(
            "coordinators",
            [
                F("key", "string"),
                F("node_id", "int32"),
                F("host", "string"),
                F("port", "int32"),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+", default=None),
            ],
            "4+",
        ),
    ],
)
