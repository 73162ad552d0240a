"""Every request the connector sends, at the version it picks, answered by Apache Kafka.

tests/test_kafka_versions.py checks the versions the client may pick against Kafka 4.x's
message definitions, offline. Here the client's own code paths (``KafkaClient``'s
methods, the idempotent and the transactional producer, the driver's commit) run against
real brokers while every response is logged with the version its request went out at
(``WireLog``). Each request must go out at the highest version both sides speak, or at
the cap its code path puts on it (``expected_version``), and be answered without error.

A version whose new fields the code cannot fill, negotiated because nothing caps it,
fails here: Kafka 4.4 offers OffsetCommit and OffsetFetch v10, which name topics by id
only; sent from topic names they are refused with UNKNOWN_TOPIC_ID
(``test_the_capped_group_versions_are_refused_when_filled_from_names`` keeps the proof).
Other versions of that kind on Kafka 4.4 (TxnOffsetCommit v6: topic ids only, KIP-1319;
ListOffsets v11; ApiVersions v5) lie beyond this client's schemas, so ``version_for``
never picks them.

The brokers: the newest Kafka (transaction.version 2), the newest formatted with
transaction.version 1 (the protocol this client speaks in its transactions), and the
oldest pinned Kafka (3.9), which has no transaction version 2; sign-in (SaslHandshake,
SaslAuthenticate) on the newest's SASL listener.
"""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from kafka_sink.options import parse_writer_options
from kafka_sink.transactions import commit_transactions
from kafka_sink.validation import WritePlan
from kafka_sink.writer import write_task
from kafka_testbed import NEWEST_KAFKA, OLDEST_KAFKA, SASL_USERS
from protocol import framing
from protocol.client import transactions
from protocol.client.cluster import (
    MAX_FETCH_VERSION_BY_NAME,
    MAX_PRODUCE_VERSION_BY_NAME,
    KafkaClient,
)
from protocol.client.group_offsets import MAX_OFFSET_COMMIT_VERSION, MAX_OFFSET_FETCH_VERSION
from protocol.primitives import ZERO_UUID
from protocol.records.encode_arrow import encode_batch
from protocol.schemas import ALL_APIS, BY_NAME, FETCH, OFFSET_COMMIT, OFFSET_FETCH, PRODUCE

from .helpers.kafka_versions import KAFKA4, SENDS, _problems

#: The caps the code paths put on versions (None: the highest both sides speak).
CAPS = {
    "ApiVersions": 3,  # the first request on a connection, before any range is known
    "OffsetCommit": MAX_OFFSET_COMMIT_VERSION,  # v10 names topics by id only
    "OffsetFetch": MAX_OFFSET_FETCH_VERSION,  # v10 names topics by id only
    "InitProducerId": transactions.MAX_INIT_PRODUCER_ID_VERSION,  # v6: KIP-939, unstable
    "AddPartitionsToTxn": transactions.MAX_ADD_PARTITIONS_VERSION,  # v4+: brokers only
    "TxnOffsetCommit": transactions.MAX_TXN_OFFSET_COMMIT_VERSION,  # v5: transaction v2
    "EndTxn": transactions.MAX_END_TXN_VERSION,  # v5: transaction version 2
}
#: Produce inside a transaction of the first protocol stops at v11 (v12: version 2).
TXN_CAPS = {**CAPS, "Produce": transactions.MAX_TXN_PRODUCE_VERSION}

#: The clusters, by id: (version, transaction_version); None is the version's default.
CLUSTERS = {
    "newest": (NEWEST_KAFKA, None),
    "newest-tv1": (NEWEST_KAFKA, 1),
    "oldest": (OLDEST_KAFKA, None),
}


#: Each test that takes ``versioned_kafka`` runs on each of ``CLUSTERS``, one cluster at a
#: time (module scope: pytest groups the tests by cluster).
on_each_cluster = pytest.mark.parametrize(
    "versioned_kafka", list(CLUSTERS.values()), ids=list(CLUSTERS), indirect=True, scope="module"
)


class WireLog:
    """Every response the client decodes while installed: ``(api name, version,
    body)``, the version being the one its request went out at."""

    def __init__(self, monkeypatch):
        self.exchanges: list[tuple[str, int, dict]] = []
        decode = framing.decode_response_body

        def logged(api, version, body):
            answer = decode(api, version, body)
            self.exchanges.append((api.name, version, answer))
            return answer

        monkeypatch.setattr(framing, "decode_response_body", logged)

    def clear(self) -> None:
        self.exchanges.clear()

    def versions(self) -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        for name, version, _ in self.exchanges:
            out.setdefault(name, set()).add(version)
        return out

    def last(self, name: str) -> dict:
        return [body for n, _, body in self.exchanges if n == name][-1]


def errors_in(body) -> list[str]:
    """Every non-zero ``error_code`` (or ``*_error_code``) anywhere in a response."""
    found = []
    if isinstance(body, dict):
        for key, value in body.items():
            if (key == "error_code" or key.endswith("_error_code")) and value:
                found.append(f"{key}={value}")
            else:
                found += errors_in(value)
    elif isinstance(body, list):
        for item in body:
            found += errors_in(item)
    return found


def broker_ranges(bootstrap: str, **config) -> dict[str, tuple[int, int]]:
    """What the broker's ApiVersions answer advertises, by API name."""
    with KafkaClient(bootstrap_servers=bootstrap, **config) as client:
        conn = client.connection(min(client.metadata().brokers))
        return {
            api.name: conn.api_versions[api.key] for api in ALL_APIS if api.key in conn.api_versions
        }


def expected_version(name: str, broker: dict[str, tuple[int, int]], caps: dict) -> int:
    """The highest version both sides speak, under the code path's cap."""
    ours = BY_NAME[name].request.versions.hi
    cap = caps.get(name)
    return min(ours, broker[name][1], *([cap] if cap is not None else []))


def check_exchanges(wire: WireLog, broker: dict, caps: dict, apis: set[str]) -> None:
    """Each of ``apis`` went out, only at its expected version, and its last answer
    (earlier ones may be retriable errors: a coordinator still loading) is error-free."""
    versions = wire.versions()
    assert apis <= set(versions), f"not sent: {sorted(apis - set(versions))}"
    for name in sorted(apis):
        assert versions[name] == {expected_version(name, broker, caps)}, name
        assert errors_in(wire.last(name)) == [], f"{name}: {wire.last(name)}"


def _write_options(versioned_kafka, topic: str, **extra):
    return parse_writer_options(
        {"kafka.bootstrap.servers": versioned_kafka.bootstrap, "topic": topic, **extra}
    )


def _rows(n: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array([b"k%d" % i for i in range(n)]), pa.array([b"v%d" % i for i in range(n)])],
        names=["key", "value"],
    )


KEY_VALUE_PLAN = dict(
    topic_column=False,
    key_column=True,
    headers_column=False,
    partition_column=False,
    timestamp_kind=None,
)


@on_each_cluster
def test_admin_reading_and_group_requests(versioned_kafka, monkeypatch):
    """CreateTopics, Metadata, Produce (topic ids known), ListOffsets, Fetch (ids known),
    FindCoordinator, OffsetCommit, OffsetFetch, DeleteRecords and DeleteTopics through
    KafkaClient's methods, each at its expected version and answered without error."""
    broker = broker_ranges(versioned_kafka.bootstrap)
    wire = WireLog(monkeypatch)
    topic, group = f"pv-{uuid.uuid4().hex[:10]}", f"pv-group-{uuid.uuid4().hex[:6]}"
    tp = (topic, 0)
    with KafkaClient(
        bootstrap_servers=versioned_kafka.bootstrap, request_timeout_ms=15_000
    ) as client:
        client.create_topics({topic: 1})
        answer = client.produce(topic, 0, encode_batch(pa.array([b"k"]), pa.array([b"v"])))
        assert answer["error_code"] == 0 and answer["base_offset"] == 0
        assert client.latest_offsets([tp]) == {tp: 1}
        assert bytes(client.fetch({tp: 0})[tp]["records"])
        client.commit_offsets(group, {tp: 1})
        assert client.committed_offsets(group, [tp]) == {tp: 1}
        assert client.delete_records({tp: 1}) == {tp: 1}
        client.delete_topics([topic])
    check_exchanges(
        wire,
        broker,
        CAPS,
        {
            "ApiVersions",
            "Metadata",
            "CreateTopics",
            "Produce",
            "ListOffsets",
            "Fetch",
            "FindCoordinator",
            "OffsetCommit",
            "OffsetFetch",
            "DeleteRecords",
            "DeleteTopics",
        },
    )


@on_each_cluster
def test_requests_by_topic_name(versioned_kafka):
    """Produce and Fetch name topics by id from v13: for a topic whose id is unknown the
    client stops at MAX_*_VERSION_BY_NAME, which the broker takes with names."""
    topic = f"pv-{uuid.uuid4().hex[:10]}"
    with KafkaClient(bootstrap_servers=versioned_kafka.bootstrap) as client:
        client.create_topics({topic: 1})
        conn = client.connection(client.leader_for(topic, 0))
        version = conn.version_for(PRODUCE, MAX_PRODUCE_VERSION_BY_NAME)
        assert version == min(MAX_PRODUCE_VERSION_BY_NAME, conn.api_versions[PRODUCE.key][1])
        produced = conn.request(
            PRODUCE,
            {
                "transactional_id": None,
                "acks": -1,
                "timeout_ms": 30_000,
                "topic_data": [
                    {
                        "name": topic,
                        "topic_id": ZERO_UUID,
                        "partition_data": [
                            {
                                "index": 0,
                                "records": encode_batch(pa.array([b"k"]), pa.array([b"v"])),
                            }
                        ],
                    }
                ],
            },
            version,
        )
        assert errors_in(produced) == []
        version = conn.version_for(FETCH, MAX_FETCH_VERSION_BY_NAME)
        assert version == MAX_FETCH_VERSION_BY_NAME
        fetched = conn.request(
            FETCH,
            {
                "replica_id": -1,
                "max_wait_ms": 100,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": topic,
                        "topic_id": ZERO_UUID,
                        "partitions": [
                            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            },
            version,
        )
        assert errors_in(fetched) == []
        assert fetched["responses"][0]["partitions"][0]["high_watermark"] == 1
        client.delete_topics([topic])


@on_each_cluster
def test_idempotent_producer_requests(versioned_kafka, monkeypatch):
    """The idempotent producer of a write task: InitProducerId (capped) and Produce."""
    broker = broker_ranges(versioned_kafka.bootstrap)
    topic = f"pv-{uuid.uuid4().hex[:10]}"
    with KafkaClient(bootstrap_servers=versioned_kafka.bootstrap) as client:
        client.create_topics({topic: 1})
    wire = WireLog(monkeypatch)
    with KafkaClient(bootstrap_servers=versioned_kafka.bootstrap) as client:
        message = write_task(
            iter([_rows(5)]),
            _write_options(versioned_kafka, topic),
            WritePlan(topic_option=topic, **KEY_VALUE_PLAN),
            client=client,
        )
    assert message.records == 5
    check_exchanges(wire, broker, CAPS, {"InitProducerId", "Produce"})


@on_each_cluster
def test_exactly_once_requests(versioned_kafka, monkeypatch):
    """A micro-batch written with exactlyOnce and committed by the driver: InitProducerId,
    AddPartitionsToTxn, transactional Produce, OffsetFetch (require_stable),
    AddOffsetsToTxn, TxnOffsetCommit and EndTxn, each at the version of the first
    transaction protocol, answered without error (also on transaction.version 2, where
    the broker would take the second protocol's versions, and on 3.9); and the
    ListTransactions that looks for leftovers to fence, at the highest common version."""
    broker = broker_ranges(versioned_kafka.bootstrap)
    topic, prefix = f"pv-{uuid.uuid4().hex[:10]}", f"pv-{uuid.uuid4().hex[:8]}"
    with KafkaClient(bootstrap_servers=versioned_kafka.bootstrap) as client:
        client.create_topics({topic: 1})
    options = _write_options(versioned_kafka, topic, exactlyOnce="true")
    wire = WireLog(monkeypatch)
    with KafkaClient(bootstrap_servers=versioned_kafka.bootstrap) as client:
        message = write_task(
            iter([_rows(5)]),
            options,
            WritePlan(topic_option=topic, **KEY_VALUE_PLAN),
            client=client,
            prefix=prefix,
            task=(0, 0, 3),
        )
        assert commit_transactions(client, options, prefix, [message], 3)["committed"] == 1
    check_exchanges(
        wire,
        broker,
        TXN_CAPS,
        {
            "FindCoordinator",
            "InitProducerId",
            "AddPartitionsToTxn",
            "Produce",
            "OffsetFetch",
            "AddOffsetsToTxn",
            "TxnOffsetCommit",
            "EndTxn",
            "ListTransactions",
        },
    )


def test_sign_in_requests(signin_kafka, monkeypatch):
    """SaslHandshake and SaslAuthenticate (SCRAM-SHA-512) on the newest Kafka's SASL
    listener (the sign-in tests' cluster), then Metadata over the signed-in connection."""
    sasl = signin_kafka
    user, password = next(iter(SASL_USERS.items()))
    config = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": user,
        "sasl_password": password,
    }
    broker = broker_ranges(sasl.listener("SASL"), **config)
    wire = WireLog(monkeypatch)
    with KafkaClient(bootstrap_servers=sasl.listener("SASL"), **config) as client:
        assert client.metadata().brokers
    check_exchanges(
        wire, broker, CAPS, {"ApiVersions", "SaslHandshake", "SaslAuthenticate", "Metadata"}
    )


@pytest.mark.parametrize("api", [OFFSET_COMMIT, OFFSET_FETCH], ids=lambda a: a.name)
def test_the_capped_group_versions_are_refused_when_filled_from_names(kafka, api):
    """Why OffsetCommit and OffsetFetch stop at v9: Kafka 4.4 offers v10, and v10 built
    from a topic name (the id left zero) is refused with UNKNOWN_TOPIC_ID (100), while
    the capped version of the same request is taken."""
    topic, group = f"pv-{uuid.uuid4().hex[:10]}", f"pv-group-{uuid.uuid4().hex[:6]}"
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        client.create_topics({topic: 1})
        client.commit_offsets(group, {(topic, 0): 1})
        conn = client.coordinator(group)
        top = conn.version_for(api)
        cap = CAPS[api.name]
        assert top > cap  # the broker offers more than the code sends
        entry = {"name": topic, "topic_id": ZERO_UUID}
        if api is OFFSET_COMMIT:
            body = {
                "group_id": group,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "group_instance_id": None,
                "topics": [
                    {
                        **entry,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "committed_offset": 1,
                                "committed_metadata": None,
                            }
                        ],
                    }
                ],
            }
        else:
            body = {
                "groups": [{"group_id": group, "topics": [{**entry, "partition_indexes": [0]}]}],
                "require_stable": False,
            }
        assert "error_code=100" in errors_in(conn.request(api, body, top))
        assert errors_in(conn.request(api, body, cap)) == []
        client.delete_topics([topic])


@on_each_cluster
def test_every_version_the_client_picks_is_one_the_broker_accepts(versioned_kafka):
    """Each request of tests/test_kafka_versions.py's SENDS, at the version the client
    picks against this broker's ApiVersions, is inside the range the broker advertised;
    against Kafka 4.x (Fetch from v4: KIP-896) it is also one Kafka 4.x's message
    definitions accept there (not a removed version, not TxnOffsetCommit v5 in a
    transaction), and Produce is advertised from v0 (KAFKA-18659)."""
    with KafkaClient(bootstrap_servers=versioned_kafka.bootstrap) as client:
        conn = client.connection(min(client.metadata().brokers))
        kafka4 = conn.api_versions[FETCH.key][0] >= 4
        assert kafka4 == (versioned_kafka.major >= 4)
        for api, cap, in_txn, where in SENDS:
            version = conn.version_for(api, cap)
            lo, hi = conn.api_versions[api.key]
            assert lo <= version <= hi, where
            if kafka4:
                assert not _problems(api, range(version, version + 1), in_txn), where
        if kafka4:
            assert conn.api_versions[PRODUCE.key][0] == KAFKA4["Produce"]["advertised_min"]
