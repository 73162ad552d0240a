"""Every API, every version, request and response: encode -> decode round trips of fully
populated messages, strict framing, truncation, hostile bytes, tagged fields, golden vectors."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from protocol.errors import ProtocolError
from protocol.tagged_fields import UNKNOWN_TAGS
from protocol.schemas import (
    ALL_APIS,
    API_VERSIONS,
    CREATE_TOPICS,
    FETCH,
    LIST_OFFSETS,
    LIST_TRANSACTIONS,
    METADATA,
    PRODUCE,
    SASL_AUTHENTICATE,
)
from .helpers.schema_roundtrip import Filler, JUNK, _encoded

KINDS = ("request", "response")


# ---- a generator that fills every field of a version with a non-default value -------------


def _cases(kinds=KINDS):
    for api in ALL_APIS:
        for kind in kinds:
            for v in getattr(api, kind).versions:
                yield pytest.param(getattr(api, kind), v, id=f"{api.name}-{kind}-v{v}")


CASES = list(_cases())


# ---- round trips --------------------------------------------------------------------------


@pytest.mark.parametrize("msg,version", CASES)
@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
def test_round_trip(msg, version, nulls):
    value, expected = Filler(nulls).message(msg, version)
    data = bytes(msg.encode(version, value))
    decoded, end = msg.decode(version, data)
    assert end == len(data)
    assert decoded == expected
    assert bytes(msg.encode(version, decoded)) == data  # stable: decode -> encode is identity
    assert msg.decode(version, memoryview(data))[0] == expected
    assert msg.decode(version, b"\xab\xcd" + data, 2)[0] == expected


def test_the_filler_reaches_tagged_fields_and_nested_arrays():
    value, expected = Filler().message(FETCH.response, 16)
    assert value["node_endpoints"][1]["rack"] is not None
    part = value["responses"][1]["partitions"][1]
    assert part["diverging_epoch"]["epoch"] != -1 and part["snapshot_id"]["end_offset"] != -1
    assert part["aborted_transactions"][1]["first_offset"] > 0
    assert part["records"] and value["responses"][1]["topic"] is JUNK  # not in v16
    assert expected["responses"][1]["topic"] == ""
    decoded, _ = FETCH.response.decode(16, bytes(FETCH.response.encode(16, value)))
    assert decoded["responses"][1]["partitions"][1]["current_leader"] == part["current_leader"]


@pytest.mark.parametrize("msg,version", CASES)
def test_a_trailing_byte_is_rejected(msg, version):
    data = _encoded(msg, version)
    with pytest.raises(ProtocolError):
        msg.decode(version, data + b"\x00")
    with pytest.raises(ProtocolError):
        msg.decode(version, data + b"\x00", exact=True)
    assert msg.decode(version, data + b"\x00", exact=False)[1] == len(data)


@pytest.mark.parametrize("msg,version", CASES)
def test_every_truncation_is_a_protocol_error(msg, version):
    for nulls in (False, True):
        data = _encoded(msg, version, nulls)
        for cut in range(len(data)):
            with pytest.raises(ProtocolError):
                msg.decode(version, data[:cut], exact=False)


# ---- hostile bytes ------------------------------------------------------------------------


def _decode_or_protocol_error(msg, version, data):
    try:
        msg.decode(version, data)
    except ProtocolError:
        pass


@pytest.mark.parametrize("api", ALL_APIS, ids=lambda a: a.name)
@settings(max_examples=100, deadline=500, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_bytes_give_only_protocol_errors(api, data):
    msg = api.response
    version = data.draw(st.sampled_from(list(msg.versions)), label="version")
    raw = data.draw(st.binary(max_size=300), label="bytes")
    _decode_or_protocol_error(msg, version, raw)


@pytest.mark.parametrize("api", ALL_APIS, ids=lambda a: a.name)
@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=60, deadline=500, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_corrupted_encodings_give_only_protocol_errors(api, kind, data):
    """Random bytes rarely get past the first array count; damaged real messages do."""
    msg = getattr(api, kind)
    version = data.draw(st.sampled_from(list(msg.versions)), label="version")
    raw = bytearray(_encoded(msg, version, data.draw(st.booleans(), label="nulls")))
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        if not raw:
            break
        i = data.draw(st.integers(0, len(raw) - 1), label="at")
        action = data.draw(st.sampled_from(["set", "insert", "delete"]), label="edit")
        if action == "set":
            raw[i] = data.draw(st.integers(0, 255), label="byte")
        elif action == "insert":
            raw[i:i] = data.draw(st.binary(min_size=1, max_size=5), label="inserted")
        else:
            del raw[i : i + data.draw(st.integers(1, 5), label="deleted")]
    _decode_or_protocol_error(msg, version, bytes(raw))


# ---- tagged fields ------------------------------------------------------------------------


def test_unknown_tagged_fields_survive_decode_and_encode():
    msg, v = FETCH.response, 16
    value, _ = Filler().message(msg, v)
    value[UNKNOWN_TAGS] = {7: b"top-level", 3: b""}
    value["responses"][1]["partitions"][0][UNKNOWN_TAGS] = {9: b"\x01\x02"}
    data = bytes(msg.encode(v, value))
    decoded, _ = msg.decode(v, data)
    assert decoded[UNKNOWN_TAGS] == {3: b"", 7: b"top-level"}
    assert decoded["responses"][1]["partitions"][0][UNKNOWN_TAGS] == {9: b"\x01\x02"}
    assert UNKNOWN_TAGS not in decoded["responses"][0]
    assert bytes(msg.encode(v, decoded)) == data


def test_an_array_of_fixed_width_structs_is_read_by_rows_and_its_tags_kept():
    """A ListOffsets answer's partitions have only fixed-width fields: they are unpacked
    row by row, except where an element carries tagged fields (read the general way, its
    tags kept) or the bytes run short (a ProtocolError, as everywhere)."""
    msg, v = LIST_OFFSETS.response, 8
    parts = [
        {
            "partition_index": i,
            "error_code": 0,
            "timestamp": -1,
            "offset": 10 * i,
            "leader_epoch": 3,
        }
        for i in range(5)
    ]
    value = {"throttle_time_ms": 0, "topics": [{"name": "t", "partitions": parts}]}
    data = bytes(msg.encode(v, value))
    decoded, _ = msg.decode(v, data)
    assert decoded["topics"][0]["partitions"] == parts
    tagged = [dict(p) for p in parts]
    tagged[2][UNKNOWN_TAGS] = {4: b"\x09"}
    value["topics"][0]["partitions"] = tagged
    data = bytes(msg.encode(v, value))
    decoded, _ = msg.decode(v, data)
    assert decoded["topics"][0]["partitions"] == tagged
    with pytest.raises(ProtocolError):
        msg.decode(v, data[:-6])
    # v1 has no leader_epoch: every row has the field's default, each row its own dict
    old = [
        {k: p[k] for k in ("partition_index", "error_code", "timestamp", "offset")} for p in parts
    ]
    data = bytes(msg.encode(1, {"topics": [{"name": "t", "partitions": old}]}))
    rows = msg.decode(1, data)[0]["topics"][0]["partitions"]
    assert rows == [{**p, "leader_epoch": -1} for p in old]
    rows[0]["offset"] = 99
    assert rows[1]["offset"] == 10


def test_unknown_tagged_fields_from_the_wire_are_kept_byte_for_byte():
    data = b"".join(
        [
            b"\x03ab",  # auth_bytes: compact bytes, length 2 + 1
            b"\x02",  # two tagged fields
            b"\x01\x02xy",  # tag 1, 2 bytes
            b"\x05\x00",  # tag 5, empty
        ]
    )
    decoded, end = SASL_AUTHENTICATE.request.decode(2, data)
    assert end == len(data)
    assert decoded == {"auth_bytes": b"ab", UNKNOWN_TAGS: {1: b"xy", 5: b""}}
    assert bytes(SASL_AUTHENTICATE.request.encode(2, decoded)) == data


@pytest.mark.parametrize(
    "tags",
    [
        b"\x02\x05\x00\x01\x02xy",  # tag 5 then tag 1: out of order
        b"\x02\x01\x00\x01\x00",  # tag 1 twice
    ],
)
def test_tagged_fields_out_of_order_or_repeated_are_rejected(tags):
    with pytest.raises(ProtocolError, match="order"):
        SASL_AUTHENTICATE.request.decode(2, b"\x03ab" + tags)


@pytest.mark.parametrize(
    "tags",
    [
        b"\x01\x00\x03\x00\x05\x00",  # a known int16 tag carrying 3 bytes
        b"\x01\x00\x01\x00",  # ... or 1 byte
        b"\x01\x00\x09\x00\x05",  # a size beyond the bytes left
        b"\x05\x00\x00",  # more tagged fields announced than there are
    ],
)
def test_malformed_tagged_fields_are_rejected(tags):
    body = b"".join(
        [
            b"\x00\x00\x00\x00",  # throttle_time_ms
            b"\x02",  # topics: one
            b"\x02t",  # name "t"
            b"\x00\x00",  # error_code
            b"\x00",  # error_message: null
            b"\xff\xff\xff\xff",  # num_partitions -1
            b"\xff\xff",  # replication_factor -1
            b"\x00",  # configs: null
        ]
    )
    ok, _ = CREATE_TOPICS.response.decode(5, body + b"\x01\x00\x02\x00\x05" + b"\x00")
    assert ok["topics"][0]["topic_config_error_code"] == 5
    with pytest.raises(ProtocolError):
        CREATE_TOPICS.response.decode(5, body + tags + b"\x00")


def test_tagged_fields_are_written_in_tag_order_and_defaults_left_out():
    msg = FETCH.response
    part = {
        "partition_index": 0,
        "error_code": 0,
        "high_watermark": 0,
        "records": None,
        "snapshot_id": {"end_offset": 1, "epoch": 2},
        "diverging_epoch": {"epoch": 3, "end_offset": 4},
    }
    data = bytes(msg.encode(12, {"responses": [{"topic": "t", "partitions": [part]}]}))
    decoded, _ = msg.decode(12, data)
    p0 = decoded["responses"][0]["partitions"][0]
    assert p0["snapshot_id"] == {"end_offset": 1, "epoch": 2}
    assert p0["diverging_epoch"] == {"epoch": 3, "end_offset": 4}
    assert p0["current_leader"] is None
    assert data.index(b"\x02\x00\x0d") < data.index(b"\x02\x0d")  # tag 0 first, then tag 2


# ---- golden vectors, written by hand from the guide ---------------------------------------


def test_golden_api_versions_request_v3():
    golden = b"".join(
        [
            b"\x08pykafka",  # client_software_name: compact string, length 7 + 1
            b"\x060.1.0",  # client_software_version: compact string, length 5 + 1
            b"\x00",  # tagged fields: none
        ]
    )
    value = {"client_software_name": "pykafka", "client_software_version": "0.1.0"}
    assert bytes(API_VERSIONS.request.encode(3, value)) == golden
    assert API_VERSIONS.request.decode(3, golden)[0] == value
    assert bytes(API_VERSIONS.request.encode(2, value)) == b""  # v0-2 have no fields


def test_golden_metadata_request_v12():
    topic_id = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    golden = b"".join(
        [
            b"\x02",  # topics: compact array, 1 + 1
            bytes.fromhex("00112233445566778899aabbccddeeff"),  # topics[0].topic_id
            b"\x07events",  # topics[0].name: compact nullable, 6 + 1
            b"\x00",  # topics[0] tagged fields: none
            b"\x01",  # allow_auto_topic_creation: true
            b"\x00",  # include_topic_authorized_operations: false
            b"\x00",  # tagged fields: none
        ]
    )
    value = {
        "topics": [{"topic_id": topic_id, "name": "events"}],
        "allow_auto_topic_creation": True,
        "include_topic_authorized_operations": False,
    }
    assert bytes(METADATA.request.encode(12, value)) == golden
    decoded, _ = METADATA.request.decode(12, golden)
    assert decoded["topics"] == value["topics"]
    assert decoded["include_cluster_authorized_operations"] is False  # not in v12: default
    every_topic = b"\x00\x01\x00\x00"  # topics null, auto-create, no ops, no tags
    assert bytes(METADATA.request.encode(12, {"topics": None})) == every_topic
    assert METADATA.request.decode(12, every_topic)[0]["topics"] is None


def test_golden_metadata_request_v0_and_v4():
    v0 = b"".join(
        [
            b"\x00\x00\x00\x01",  # topics: int32 count 1
            b"\x00\x06events",  # topics[0].name: int16 length 6
        ]
    )
    assert bytes(METADATA.request.encode(0, {"topics": [{"name": "events"}]})) == v0
    v4 = b"".join(
        [
            b"\xff\xff\xff\xff",  # topics: null (every topic)
            b"\x00",  # allow_auto_topic_creation: false
        ]
    )
    value = {"topics": None, "allow_auto_topic_creation": False}
    assert bytes(METADATA.request.encode(4, value)) == v4


def test_golden_produce_request_v3():
    golden = b"".join(
        [
            b"\xff\xff",  # transactional_id: null
            b"\xff\xff",  # acks: -1
            b"\x00\x00\x75\x30",  # timeout_ms: 30000
            b"\x00\x00\x00\x01",  # topic_data: 1 topic
            b"\x00\x01t",  # name "t"
            b"\x00\x00\x00\x01",  # partition_data: 1 partition
            b"\x00\x00\x00\x02",  # index 2
            b"\x00\x00\x00\x03abc",  # records: int32 length 3
        ]
    )
    value = {"topic_data": [{"name": "t", "partition_data": [{"index": 2, "records": b"abc"}]}]}
    assert bytes(PRODUCE.request.encode(3, value)) == golden
    decoded, _ = PRODUCE.request.decode(3, golden)
    assert decoded["acks"] == -1 and decoded["transactional_id"] is None
    assert bytes(decoded["topic_data"][0]["partition_data"][0]["records"]) == b"abc"


def test_golden_fetch_response_v12_with_a_tagged_struct():
    golden = b"".join(
        [
            b"\x00\x00\x00\x00",  # throttle_time_ms
            b"\x00\x00",  # error_code
            b"\x00\x00\x00\x07",  # session_id 7
            b"\x02",  # responses: 1
            b"\x02t",  # topic "t"
            b"\x02",  # partitions: 1
            b"\x00\x00\x00\x00",  # partition_index 0
            b"\x00\x00",  # error_code
            b"\x00\x00\x00\x00\x00\x00\x00\x0a",  # high_watermark 10
            b"\x00\x00\x00\x00\x00\x00\x00\x0a",  # last_stable_offset 10
            b"\x00\x00\x00\x00\x00\x00\x00\x00",  # log_start_offset 0
            b"\x00",  # aborted_transactions: null
            b"\xff\xff\xff\xff",  # preferred_read_replica -1
            b"\x00",  # records: null
            b"\x01",  # partition tagged fields: one
            b"\x00\x0d",  # tag 0 (diverging_epoch), 13 bytes
            b"\x00\x00\x00\x05",  # diverging_epoch.epoch 5
            b"\x00\x00\x00\x00\x00\x00\x00\x08",  # diverging_epoch.end_offset 8
            b"\x00",  # diverging_epoch tagged fields: none
            b"\x00",  # topic tagged fields: none
            b"\x00",  # tagged fields: none
        ]
    )
    decoded, _ = FETCH.response.decode(12, golden)
    part = decoded["responses"][0]["partitions"][0]
    assert part["diverging_epoch"] == {"epoch": 5, "end_offset": 8}
    assert part["high_watermark"] == 10 and part["log_start_offset"] == 0
    assert part["current_leader"] is None and part["snapshot_id"] is None
    assert part["aborted_transactions"] is None and part["records"] is None
    assert decoded["node_endpoints"] == []  # a v16+ field: its default
    assert bytes(FETCH.response.encode(12, decoded)) == golden


def test_golden_list_transactions_request_v0_to_v2():
    value = {
        "state_filters": ["Ongoing"],
        "producer_id_filters": [],
        "duration_filter": -1,
        "transactional_id_pattern": "^p-[0-9]$",
    }
    filters = b"".join(
        [
            b"\x02",  # state_filters: compact array, 1 + 1
            b"\x08Ongoing",  # state_filters[0]: compact string, 7 + 1
            b"\x01",  # producer_id_filters: compact array, empty
        ]
    )
    duration = b"\xff" * 8  # duration_filter -1 (v1+)
    pattern = b"\x0a^p-[0-9]$"  # transactional_id_pattern: compact nullable, 9 + 1 (v2)
    v0, v1, v2 = (
        filters + b"\x00",
        filters + duration + b"\x00",
        filters + duration + pattern + b"\x00",
    )  # each ends with no tagged fields
    assert bytes(LIST_TRANSACTIONS.request.encode(0, value)) == v0
    assert bytes(LIST_TRANSACTIONS.request.encode(1, value)) == v1
    assert bytes(LIST_TRANSACTIONS.request.encode(2, value)) == v2
    assert LIST_TRANSACTIONS.request.decode(2, v2)[0] == value
    assert LIST_TRANSACTIONS.request.decode(0, v0)[0]["duration_filter"] == -1  # default
    null_pattern = {**value, "transactional_id_pattern": None}
    assert (
        bytes(LIST_TRANSACTIONS.request.encode(2, null_pattern)) == filters + duration + b"\x00\x00"
    )  # null: compact length 0
    assert LIST_TRANSACTIONS.request_header_version(0) == 2
    assert LIST_TRANSACTIONS.response_header_version(0) == 1


def test_golden_list_transactions_response_v1():
    golden = b"".join(
        [
            b"\x00\x00\x00\x00",  # throttle_time_ms
            b"\x00\x00",  # error_code
            b"\x01",  # unknown_state_filters: empty
            b"\x02",  # transaction_states: 1
            b"\x06p-0-0",  # transactional_id: compact string, 5 + 1
            b"\x00\x00\x00\x00\x00\x00\x03\xe8",  # producer_id 1000
            b"\x08Ongoing",  # transaction_state
            b"\x00",  # transaction_states[0] tagged fields: none
            b"\x00",  # tagged fields: none
        ]
    )
    decoded, _ = LIST_TRANSACTIONS.response.decode(1, golden)
    assert decoded["transaction_states"] == [
        {"transactional_id": "p-0-0", "producer_id": 1000, "transaction_state": "Ongoing"}
    ]
    assert decoded["unknown_state_filters"] == [] and decoded["error_code"] == 0
    assert bytes(LIST_TRANSACTIONS.response.encode(1, decoded)) == golden


def test_fetch_request_defaults_are_kafkas():
    value = {"topics": [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 5}]}]}
    decoded, _ = FETCH.request.decode(12, bytes(FETCH.request.encode(12, value)))
    assert decoded["replica_id"] == -1 and decoded["session_epoch"] == -1
    assert decoded["max_bytes"] == 0x7FFFFFFF and decoded["cluster_id"] is None
    part = decoded["topics"][0]["partitions"][0]
    assert part["current_leader_epoch"] == -1
    assert part["last_fetched_epoch"] == -1
    assert part["log_start_offset"] == -1
    assert part["high_watermark"] == (1 << 63) - 1  # not in v12: its default
