"""The registry of every API schema the client speaks.

``ALL_APIS`` lists them by key; ``BY_KEY`` maps an API key to its ``Api`` and ``BY_NAME`` the
guide's API name ("Fetch", "ListOffsets"...) to it. Each is also importable by its constant
name: ``from protocol.schemas import FETCH``.
"""

from ..schema import Api
from .add_offsets_to_txn import ADD_OFFSETS_TO_TXN
from .add_partitions_to_txn import ADD_PARTITIONS_TO_TXN
from .api_versions import API_VERSIONS
from .create_topics import CREATE_TOPICS
from .delegation_tokens import (
    CREATE_DELEGATION_TOKEN,
    DESCRIBE_DELEGATION_TOKEN,
    EXPIRE_DELEGATION_TOKEN,
    RENEW_DELEGATION_TOKEN,
)
from .delete_records import DELETE_RECORDS
from .delete_topics import DELETE_TOPICS
from .end_txn import END_TXN
from .fetch import FETCH
from .find_coordinator import FIND_COORDINATOR
from .init_producer_id import INIT_PRODUCER_ID
from .list_offsets import LIST_OFFSETS
from .list_transactions import LIST_TRANSACTIONS
from .metadata import METADATA
from .offset_commit import OFFSET_COMMIT
from .offset_fetch import OFFSET_FETCH
from .produce import PRODUCE
from .sasl_authenticate import SASL_AUTHENTICATE
from .sasl_handshake import SASL_HANDSHAKE
from .txn_offset_commit import TXN_OFFSET_COMMIT

ALL_APIS: list[Api] = sorted(
    [
        PRODUCE,
        FETCH,
        LIST_OFFSETS,
        METADATA,
        OFFSET_COMMIT,
        OFFSET_FETCH,
        FIND_COORDINATOR,
        SASL_HANDSHAKE,
        API_VERSIONS,
        CREATE_TOPICS,
        DELETE_TOPICS,
        DELETE_RECORDS,
        INIT_PRODUCER_ID,
        ADD_PARTITIONS_TO_TXN,
        ADD_OFFSETS_TO_TXN,
        END_TXN,
        TXN_OFFSET_COMMIT,
        SASL_AUTHENTICATE,
        LIST_TRANSACTIONS,
        CREATE_DELEGATION_TOKEN,
        RENEW_DELEGATION_TOKEN,
        EXPIRE_DELEGATION_TOKEN,
        DESCRIBE_DELEGATION_TOKEN,
    ],
    key=lambda api: api.key,
)

BY_KEY: dict[int, Api] = {api.key: api for api in ALL_APIS}
BY_NAME: dict[str, Api] = {api.name: api for api in ALL_APIS}

assert len(BY_KEY) == len(ALL_APIS) and len(BY_NAME) == len(ALL_APIS), "duplicate API"

__all__ = [
    "ALL_APIS",
    "BY_KEY",
    "BY_NAME",
    "ADD_OFFSETS_TO_TXN",
    "ADD_PARTITIONS_TO_TXN",
    "API_VERSIONS",
    "CREATE_DELEGATION_TOKEN",
    "CREATE_TOPICS",
    "DELETE_RECORDS",
    "DELETE_TOPICS",
    "DESCRIBE_DELEGATION_TOKEN",
    "END_TXN",
    "EXPIRE_DELEGATION_TOKEN",
    "FETCH",
    "FIND_COORDINATOR",
    "INIT_PRODUCER_ID",
    "LIST_OFFSETS",
    "LIST_TRANSACTIONS",
    "METADATA",
    "OFFSET_COMMIT",
    "OFFSET_FETCH",
    "PRODUCE",
    "RENEW_DELEGATION_TOKEN",
    "SASL_AUTHENTICATE",
    "SASL_HANDSHAKE",
    "TXN_OFFSET_COMMIT",
]
