"""Confluent's wire framing parsed column-wise (``read_frames``) and written column-wise
(the sink's ``framed``), on hand-built values: every branch the serializers' output in
the other registry tests does not reach (GUIDs in the value, message-index paths, ids in
headers with indexes, short and unknown frames, sliced columns)."""

from __future__ import annotations

import uuid

import pyarrow as pa

from kafka_common.schema_registry.framing import (
    BAD,
    NULL,
    OK,
    frame,
    message_index_bytes,
    read_frames,
)
from kafka_common.value_formats.encoding import framed

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def test_magic_0_and_1_short_and_unknown_frames():
    guid = uuid.uuid4()
    values = pa.array(
        [
            frame(7) + b"ab",
            None,
            b"",
            b"\x00\x00\x01",
            b"\x05xx",
            b"\x01" + guid.bytes + b"p",
            frame(2**32 - 1),
        ]
    )
    f = read_frames(values)
    assert f.status.tolist() == [OK, NULL, BAD, BAD, BAD, OK, OK]
    assert f.ids.tolist() == [7, -1, -1, -1, -1, -1, 2**32 - 1]
    assert f.starts.tolist()[:1] == [5] and f.starts[5] == 17
    assert f.guids == {5: str(guid)}
    assert "empty" in f.reasons[2] and "3 bytes" in f.reasons[3] and "magic byte 5" in f.reasons[4]


def test_protobuf_message_indexes_and_ids_in_headers():
    values = pa.array(
        [frame(3, (0,)) + b"A", frame(3, (1, 2)) + b"B", b"plain", frame(4) + b"\xff", None]
    )
    header_id = b"\x00" + (9).to_bytes(4, "big") + message_index_bytes((2,))
    headers = pa.array(
        [
            None,
            [],
            [{"key": "other", "value": b"x"}, {"key": "__value_schema_id", "value": header_id}],
            None,
            [{"key": "__value_schema_id", "value": header_id}],
        ],
        HEADERS,
    )
    f = read_frames(values, protobuf=True, headers=headers)
    assert f.status.tolist() == [OK, OK, OK, BAD, NULL]
    assert f.ids.tolist()[:3] == [3, 3, 9]
    assert f.starts.tolist()[:3] == [6, 8, 0]  # the header's value is unframed
    assert f.indexes == {1: (1, 2), 2: (2,)}
    assert "message index" in f.reasons[3]
    # The same on a slice (Arrow offsets not starting at 0).
    g = read_frames(values.slice(1, 3), protobuf=True, headers=headers.slice(1, 3))
    # a bad index still names its id and g.indexes == {0: (1, 2), 1: (2,)}
    assert g.ids.tolist() == [3, 9, 4]


def test_sink_framing_keeps_nulls_and_handles_slices():
    payloads = pa.array([b"a", None, b"", b"bcd"], pa.binary())
    assert framed(payloads, b"HDR").to_pylist() == [b"HDRa", None, b"HDR", b"HDRbcd"]
    assert framed(payloads.slice(1), b"\x00").to_pylist() == [None, b"\x00", b"\x00bcd"]
    assert message_index_bytes((0,)) == b"\x00"
    assert message_index_bytes((1, 2)) == bytes([4, 2, 4])  # zigzag count, then indexes
