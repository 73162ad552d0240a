"""Every request version the client can send, against Kafka 4.x's message definitions.

tests/data/kafka_request_versions.json holds, for each request of Kafka 4.x, its
``validVersions``, ``latestVersionUnstable``, the versions KIP-896 removed, what a broker
still advertises (Produce from v0, KAFKA-18659), the versions meant for clients and the
highest version allowed inside a transaction of the first transaction protocol (the one
this client speaks: it adds partitions with AddPartitionsToTxn). It is extracted from
Kafka's ``*Request.json`` files by scripts/extract_kafka_versions.py; nothing here reads them.

``SENDS`` lists every request the client sends with the cap its code path puts on the version;
``test_every_place_that_picks_a_version_is_listed`` keeps the list complete by counting, in the
library's source, the calls that pick a request version. A broker that speaks Kafka 4.x's
ApiVersions (``Kafka4Broker``, scripted) then checks what the client picks on the wire.
"""

from __future__ import annotations

import ast
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from protocol.client import cluster, group_offsets, transactions
from protocol.client.cluster import KafkaClient
from protocol.schemas import (ADD_OFFSETS_TO_TXN, ADD_PARTITIONS_TO_TXN, ALL_APIS, API_VERSIONS,
                              CREATE_TOPICS, DELETE_RECORDS, DELETE_TOPICS, END_TXN, FETCH,
                              FIND_COORDINATOR, INIT_PRODUCER_ID, LIST_OFFSETS,
                              LIST_TRANSACTIONS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, PRODUCE,
                              SASL_AUTHENTICATE, SASL_HANDSHAKE, TXN_OFFSET_COMMIT)
from tests.scripted_broker import NODE_ID, Request, ScriptedBroker, metadata_answer, response_frame
from tests.test_logging import ROOT, library_sources

KAFKA = json.loads((Path(ROOT) / "tests" / "data" / "kafka_request_versions.json")
                   .read_text(encoding="utf-8"))
KAFKA4 = KAFKA["apis"]

# What the client sends: (api, the cap its code path puts on the version (None: none),
# sent inside a transaction, where). ApiVersions goes out at v3 before anything is known.
SENDS = [
    (API_VERSIONS, 3, False, "protocol/client/connection.py: first request on a connection"),
    (SASL_HANDSHAKE, None, False, "protocol/client/connection.py"),
    (SASL_AUTHENTICATE, None, False, "protocol/client/connection.py"),
    (METADATA, None, False, "protocol/client/cluster.py"),
    (LIST_OFFSETS, None, False, "protocol/client/cluster.py"),
    (FETCH, None, False, "protocol/client/cluster.py: topic ids known"),
    (FETCH, cluster.MAX_FETCH_VERSION_BY_NAME, False, "protocol/client/cluster.py: an id unknown"),
    (PRODUCE, None, False, "protocol/client/cluster.py, kafka_sink/producer.py: topic ids known"),
    (PRODUCE, cluster.MAX_PRODUCE_VERSION_BY_NAME, False, "an id unknown"),
    (PRODUCE, transactions.MAX_TXN_PRODUCE_VERSION, True, "kafka_sink/producer.py"),
    (FIND_COORDINATOR, None, False, "protocol/client/group_offsets.py"),
    (OFFSET_COMMIT, group_offsets.MAX_OFFSET_COMMIT_VERSION, False,
     "protocol/client/group_offsets.py: v10 names topics by id only"),
    (OFFSET_FETCH, group_offsets.MAX_OFFSET_FETCH_VERSION, False,
     "protocol/client/group_offsets.py (also for transactions.py's committed micro-batches): v10 "
     "names topics by id only"),
    (CREATE_TOPICS, None, False, "protocol/client/admin.py"),
    (DELETE_TOPICS, None, False, "protocol/client/admin.py"),
    (DELETE_RECORDS, None, False, "protocol/client/admin.py"),
    (INIT_PRODUCER_ID, transactions.MAX_INIT_PRODUCER_ID_VERSION, False,
     "kafka_sink/producer_ids.py (idempotent), protocol/client/transactions.py"),
    (ADD_PARTITIONS_TO_TXN, transactions.MAX_ADD_PARTITIONS_VERSION, True,
     "protocol/client/transactions.py"),
    (ADD_OFFSETS_TO_TXN, None, True, "protocol/client/transactions.py"),
    (TXN_OFFSET_COMMIT, transactions.MAX_TXN_OFFSET_COMMIT_VERSION, True,
     "protocol/client/transactions.py"),
    (END_TXN, transactions.MAX_END_TXN_VERSION, True, "protocol/client/transactions.py"),
    (LIST_TRANSACTIONS, None, False,
     "protocol/client/transactions.py: open_transactional_ids (a stream's commit)"),
]

# The calls that pick a request version, by file: ``version_for(...)`` and ``.request`` /
# ``.send`` without a version (which pick the highest common one). A new one means a new
# request or a new code path: add what it sends to SENDS, then count it here.
PICKS = {
    "kafka_sink/producer.py": 1,
    "kafka_sink/producer_ids.py": 1,
    "protocol/client/admin.py": 2,
    "protocol/client/cluster.py": 3,
    "protocol/client/connection.py": 3,
    "protocol/client/group_offsets.py": 3,
    "protocol/client/transactions.py": 4,
}


def _ranges(unstable: bool) -> dict[int, tuple[int, int]]:
    """A Kafka 4.x broker's ApiVersions answer (``unstable``: with
    ``unstable.api.versions.enable``): key -> (min, max)."""
    return {row["key"]: (row["advertised_min"],
                         row["valid"][1] - (row["latest_unstable"] and not unstable))
            for row in KAFKA4.values()}


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
            out.append(f"{api.name} v{v} is not allowed in a transaction of the first "
                       f"protocol (up to v{row['transaction_v1_max']})")
    return out


def test_the_data_holds_what_kip_896_and_the_transaction_rules_say():
    """The extraction kept the facts the checks below stand on (a wrong regex in the
    script would leave these out and make every check pass)."""
    assert KAFKA4["Produce"]["removed"] == [0, 2] and KAFKA4["Produce"]["advertised_min"] == 0
    assert KAFKA4["Fetch"]["valid"][0] == 4 and KAFKA4["ListOffsets"]["removed"] == [0, 0]
    assert KAFKA4["TxnOffsetCommit"]["transaction_v1_max"] == 4
    assert KAFKA4["TxnOffsetCommit"]["valid"][1] >= 5
    assert KAFKA4["Produce"]["transaction_v1_max"] == 11
    assert KAFKA4["EndTxn"]["transaction_v1_max"] == 4
    assert KAFKA4["AddPartitionsToTxn"]["client_max"] == 3
    assert KAFKA["kafka_version"].startswith("4.")


def test_every_api_the_client_speaks_is_in_kafka_4_and_overlaps_it():
    for api in ALL_APIS:
        assert api.name in KAFKA4, f"{api.name} is not a Kafka 4.x request"
        row = KAFKA4[api.name]
        assert row["key"] == api.key, api.name
        ours = api.request.versions
        assert ours.lo <= row["valid"][1] and ours.hi >= row["valid"][0], api.name


def test_every_request_the_client_sends_is_listed():
    assert {api.name for api, *_ in SENDS} == {api.name for api in ALL_APIS}


@pytest.mark.parametrize("api,cap,in_txn,where", SENDS,
                         ids=[f"{s[0].name}-{s[1]}" for s in SENDS])
def test_the_versions_a_code_path_may_send_are_all_kafka_4_versions(api, cap, in_txn, where):
    """Every version in the client's range under the code path's cap, whatever the broker
    advertises: none removed, unstable, broker-only or forbidden in the transaction."""
    ours = api.request.versions
    hi = ours.hi if cap is None else min(ours.hi, cap)
    assert not _problems(api, range(ours.lo, hi + 1), in_txn), where


def test_the_version_checks_catch_the_faults_they_are_for():
    """The checks above fail on what was wrong before: TxnOffsetCommit v5 in a transaction,
    InitProducerId v6 (unstable) uncapped, Produce v0 (removed) and AddPartitionsToTxn v4."""
    assert _problems(TXN_OFFSET_COMMIT, range(5, 6), True)
    assert not _problems(TXN_OFFSET_COMMIT, range(5, 6), False)
    assert _problems(INIT_PRODUCER_ID, range(6, 7), False)
    assert _problems(PRODUCE, range(0, 1), False)
    assert _problems(ADD_PARTITIONS_TO_TXN, range(4, 5), True)


@dataclass
class Kafka4Broker(ScriptedBroker):
    """One scripted broker that answers ApiVersions as Kafka 4.x does (from the data file;
    ``unstable``: also the versions marked unstable), Metadata, FindCoordinator and
    TxnOffsetCommit, and keeps ``(api name, version)`` of every request."""

    unstable: bool = False
    requests: list[tuple[str, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(name="kafka4-broker")

    def answer(self, request_frame: bytes, session) -> bytes | None:
        req = Request.read(request_frame)
        api = req.api
        self.requests.append((api.name, req.version))
        if api is API_VERSIONS:
            keys = [{"api_key": k, "min_version": lo, "max_version": hi}
                    for k, (lo, hi) in sorted(_ranges(self.unstable).items())]
            body = {"error_code": 0, "api_keys": keys, "throttle_time_ms": 0}
        elif api is METADATA:
            body = metadata_answer(self.port, "kafka4", [("t", [0])])
        elif api is FIND_COORDINATOR:
            found = {"node_id": NODE_ID, "host": "127.0.0.1", "port": self.port,
                     "error_code": 0, "error_message": None}
            body = {"throttle_time_ms": 0, **found,
                    "coordinators": [{"key": req.body()["coordinator_keys"][0], **found}]}
        elif api is TXN_OFFSET_COMMIT:
            body = {"throttle_time_ms": 0, "topics": [
                {"name": t["name"], "partitions": [
                    {"partition_index": p["partition_index"], "error_code": 0}
                    for p in t["partitions"]]} for t in req.body()["topics"]]}
        else:
            return None
        return response_frame(api, req.version, req.correlation_id, body)


@pytest.mark.parametrize("unstable", [False, True], ids=["default", "unstable-enabled"])
def test_against_kafka_4_api_versions_the_client_picks_kafka_4_versions(unstable):
    """Over a connection to a broker answering ApiVersions as 4.x does (Produce advertised
    from v0), each code path picks a version 4.x accepts, also when the broker lists its
    unstable versions."""
    with Kafka4Broker(unstable=unstable) as broker, \
            KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        conn = client.connection(NODE_ID)
        assert conn.api_versions[PRODUCE.key][0] == 0
        for api, cap, in_txn, where in SENDS:
            if api is API_VERSIONS:
                continue
            version = conn.version_for(api, cap)
            assert not _problems(api, range(version, version + 1), in_txn), where
    assert broker.requests[0] == ("ApiVersions", 3)


def test_txn_offset_commit_goes_out_as_v4_to_a_kafka_4_broker():
    """TxnOffsetCommit v5 belongs to the second transaction protocol; Kafka 4.x lists v5,
    and the client, which adds partitions and offsets itself, sends v4 (as Java's does)."""
    with Kafka4Broker() as broker, KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        transactions.txn_offset_commit(client, "tid", 7, 0, "group", {("t", 0): 42})
    sent = [v for name, v in broker.requests if name == "TxnOffsetCommit"]
    assert sent == [4]
    assert KAFKA4["TxnOffsetCommit"]["valid"][1] > 4  # the broker offered more


def _picks(tree: ast.AST) -> int:
    n = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        name = node.func.attr
        if name == "version_for":
            n += 1
        elif name in ("request", "send") and len(node.args) == 2 and not any(
                k.arg in ("version", "body", "headers") for k in node.keywords):
            # (an HTTP request, such as the Schema Registry client's, names body= or headers=)
            n += 1
    return n


def test_every_place_that_picks_a_version_is_listed():
    found = Counter()
    for path in library_sources():
        with open(path, encoding="utf-8") as f:
            count = _picks(ast.parse(f.read()))
        if count:
            found[os.path.relpath(path, ROOT).replace(os.sep, "/")] = count
    assert dict(found) == PICKS, (
        "the places that pick a request version changed: add what a new one sends to SENDS "
        "and count it in PICKS")
