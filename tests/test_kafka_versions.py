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
import os
from collections import Counter
from dataclasses import dataclass, field

import pytest

from protocol.client import transactions
from protocol.client.cluster import KafkaClient
from protocol.schemas import (
    ADD_PARTITIONS_TO_TXN,
    ALL_APIS,
    API_VERSIONS,
    FIND_COORDINATOR,
    INIT_PRODUCER_ID,
    METADATA,
    PRODUCE,
    TXN_OFFSET_COMMIT,
)
from tests.helpers.scripted_broker import (
    NODE_ID,
    Request,
    ScriptedBroker,
    metadata_answer,
    response_frame,
)
from tests.helpers.library import ROOT, library_sources
from .helpers.kafka_versions import KAFKA, KAFKA4, SENDS, _problems


# The calls that pick a request version, by file: ``version_for(...)`` and ``.request`` /
# ``.send`` without a version (which pick the highest common one). A new one means a new
# request or a new code path: add what it sends to SENDS, then count it here.
PICKS = {
    "kafka_sink/producer_ids.py": 1,
    "kafka_sink/sending.py": 1,
    "protocol/client/admin.py": 1,
    "protocol/client/cluster.py": 2,
    "protocol/client/connection.py": 1,
    "protocol/client/delegation_tokens.py": 1,
    "protocol/client/group_offsets.py": 3,
    "protocol/client/record_requests.py": 1,
    "protocol/client/sasl_signin.py": 2,
    "protocol/client/transactions.py": 4,
}


def _ranges(unstable: bool) -> dict[int, tuple[int, int]]:
    """A Kafka 4.x broker's ApiVersions answer (``unstable``: with
    ``unstable.api.versions.enable``): key -> (min, max)."""
    return {
        row["key"]: (
            row["advertised_min"],
            row["valid"][1] - (row["latest_unstable"] and not unstable),
        )
        for row in KAFKA4.values()
    }


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


@pytest.mark.parametrize("api,cap,in_txn,where", SENDS, ids=[f"{s[0].name}-{s[1]}" for s in SENDS])
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
            keys = [
                {"api_key": k, "min_version": lo, "max_version": hi}
                for k, (lo, hi) in sorted(_ranges(self.unstable).items())
            ]
            body = {"error_code": 0, "api_keys": keys, "throttle_time_ms": 0}
        elif api is METADATA:
            body = metadata_answer(self.port, "kafka4", [("t", [0])])
        elif api is FIND_COORDINATOR:
            found = {
                "node_id": NODE_ID,
                "host": "127.0.0.1",
                "port": self.port,
                "error_code": 0,
                "error_message": None,
            }
            body = {
                "throttle_time_ms": 0,
                **found,
                "coordinators": [{"key": req.body()["coordinator_keys"][0], **found}],
            }
        elif api is TXN_OFFSET_COMMIT:
            body = {
                "throttle_time_ms": 0,
                "topics": [
                    {
                        "name": t["name"],
                        "partitions": [
                            {"partition_index": p["partition_index"], "error_code": 0}
                            for p in t["partitions"]
                        ],
                    }
                    for t in req.body()["topics"]
                ],
            }
        else:
            return None
        return response_frame(api, req.version, req.correlation_id, body)


@pytest.mark.parametrize("unstable", [False, True], ids=["default", "unstable-enabled"])
def test_against_kafka_4_api_versions_the_client_picks_kafka_4_versions(unstable):
    """Over a connection to a broker answering ApiVersions as 4.x does (Produce advertised
    from v0), each code path picks a version 4.x accepts, also when the broker lists its
    unstable versions."""
    with (
        Kafka4Broker(unstable=unstable) as broker,
        KafkaClient(bootstrap_servers=broker.bootstrap) as client,
    ):
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
        elif (
            name in ("request", "send")
            and len(node.args) == 2
            and not any(k.arg in ("version", "body", "headers") for k in node.keywords)
        ):
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
        "and count it in PICKS"
    )
