"""The Kafka versions under test and the requests the client sends them."""

from __future__ import annotations

import json
from pathlib import Path
from protocol.client import cluster, group_offsets, transactions
from protocol.schemas import (
    CREATE_DELEGATION_TOKEN,
    DESCRIBE_DELEGATION_TOKEN,
    EXPIRE_DELEGATION_TOKEN,
    RENEW_DELEGATION_TOKEN,
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    API_VERSIONS,
    CREATE_TOPICS,
    DELETE_RECORDS,
    DELETE_TOPICS,
    END_TXN,
    FETCH,
    FIND_COORDINATOR,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    LIST_TRANSACTIONS,
    METADATA,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    PRODUCE,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    TXN_OFFSET_COMMIT,
)
from .library import ROOT


KAFKA = json.loads(
    (Path(ROOT) / "tests" / "data" / "kafka_request_versions.json").read_text(encoding="utf-8")
)


KAFKA4 = KAFKA["apis"]


# What the client sends: (api, the cap its code path puts on the version (None: none),
# sent inside a transaction, where). ApiVersions goes out at v3 before anything is known.
SENDS = [
    (API_VERSIONS, 3, False, "protocol/client/connection.py: first request on a connection"),
    (SASL_HANDSHAKE, None, False, "protocol/client/sasl_signin.py"),
    (SASL_AUTHENTICATE, None, False, "protocol/client/sasl_signin.py"),
    (METADATA, None, False, "protocol/client/cluster.py"),
    (LIST_OFFSETS, None, False, "protocol/client/offset_requests.py"),
    (FETCH, None, False, "protocol/client/record_requests.py: topic ids known"),
    (
        FETCH,
        cluster.MAX_FETCH_VERSION_BY_NAME,
        False,
        "protocol/client/record_requests.py: an id unknown",
    ),
    (
        PRODUCE,
        None,
        False,
        "protocol/client/record_requests.py, kafka_sink/sending.py: topic ids known",
    ),
    (PRODUCE, cluster.MAX_PRODUCE_VERSION_BY_NAME, False, "an id unknown"),
    (PRODUCE, transactions.MAX_TXN_PRODUCE_VERSION, True, "kafka_sink/sending.py"),
    (FIND_COORDINATOR, None, False, "protocol/client/group_offsets.py"),
    (
        OFFSET_COMMIT,
        group_offsets.MAX_OFFSET_COMMIT_VERSION,
        False,
        "protocol/client/group_offsets.py: v10 names topics by id only",
    ),
    (
        OFFSET_FETCH,
        group_offsets.MAX_OFFSET_FETCH_VERSION,
        False,
        "protocol/client/group_offsets.py (also for transactions.py's committed "
        "micro-batches): v10 names topics by id only",
    ),
    (CREATE_TOPICS, None, False, "protocol/client/admin.py"),
    (DELETE_TOPICS, None, False, "protocol/client/admin.py"),
    (DELETE_RECORDS, None, False, "protocol/client/admin.py"),
    (
        INIT_PRODUCER_ID,
        transactions.MAX_INIT_PRODUCER_ID_VERSION,
        False,
        "kafka_sink/producer_ids.py (idempotent), protocol/client/transactions.py",
    ),
    (
        ADD_PARTITIONS_TO_TXN,
        transactions.MAX_ADD_PARTITIONS_VERSION,
        True,
        "protocol/client/transactions.py",
    ),
    (ADD_OFFSETS_TO_TXN, None, True, "protocol/client/transactions.py"),
    (
        TXN_OFFSET_COMMIT,
        transactions.MAX_TXN_OFFSET_COMMIT_VERSION,
        True,
        "protocol/client/transactions.py",
    ),
    (END_TXN, transactions.MAX_END_TXN_VERSION, True, "protocol/client/transactions.py"),
    (
        LIST_TRANSACTIONS,
        None,
        False,
        "protocol/client/transactions.py: open_transactional_ids (a stream's commit)",
    ),
    *(
        (api, None, False, "protocol/client/delegation_tokens.py")
        for api in (
            CREATE_DELEGATION_TOKEN,
            RENEW_DELEGATION_TOKEN,
            EXPIRE_DELEGATION_TOKEN,
            DESCRIBE_DELEGATION_TOKEN,
        )
    ),
]


def _problems(api, versions: range, in_txn: bool) -> list[str]:
    """Why any of ``versions`` of ``api`` is not one Kafka 4.x accepts from this client."""
    row = KAFKA4[api.name]
    lo, hi = row["valid"]
    out = []
    for v in versions:
        if not lo <= v <= hi:
            out.append(f"{api.name} v{v} is outside Kafka 4.x's {lo}-{hi}")
        elif row["removed"] and row["removed"][0] <= v <= row["removed"][1]:
            out.append(f"{api.name} v{v} was removed in Kafka 4.0")
        elif row["latest_unstable"] and v == hi:
            out.append(f"{api.name} v{v} is unstable in Kafka 4.x")
        elif row["client_max"] is not None and v > row["client_max"]:
            out.append(f"{api.name} v{v} is for brokers (clients: up to {row['client_max']})")
        elif in_txn and row["transaction_v1_max"] is not None and v > row["transaction_v1_max"]:
            out.append(
                f"{api.name} v{v} is not allowed in a transaction of the first "
                f"protocol (up to v{row['transaction_v1_max']})"
            )
    return out
