"""FrameBuffer: frames cut from a byte stream however it arrives, by ``feed`` or received in
place (``receive_buffer`` + ``received``, what the connection does with ``recv_into``)."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import ProtocolError
from protocol.framing import FrameBuffer


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def receive(buffer: FrameBuffer, data: bytes, step: int) -> list[bytes]:
    """Deliver ``data`` the way a socket does: at most ``step`` bytes per receive, into the
    room the buffer lends."""
    out = []
    pos = 0
    while pos < len(data):
        room = buffer.receive_buffer()
        assert room.nbytes > 0
        n = min(step, room.nbytes, len(data) - pos)
        room[:n] = data[pos : pos + n]
        pos += n
        out += [bytes(f) for f in buffer.received(n)]
    return out


payloads = st.lists(
    st.one_of(st.binary(max_size=300), st.integers(0, 300_000).map(lambda n: bytes([n % 251]) * n)),
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(payloads, st.integers(1, 400_000), st.booleans())
def test_frames_come_out_whole_and_in_order_however_the_bytes_arrive(items, step, by_feed):
    buffer = FrameBuffer(max_frame_size=1 << 20, scratch_size=4096, direct_size=1024)
    stream = b"".join(frame(p) for p in items)
    if by_feed:
        got = []
        for i in range(0, len(stream), step):
            got += [bytes(f) for f in buffer.feed(stream[i : i + step])]
    else:
        got = receive(buffer, stream, step)
    assert got == items
    assert not buffer.pending


def test_a_large_frame_is_received_into_its_own_buffer_of_its_size():
    buffer = FrameBuffer(scratch_size=4096, direct_size=1024)
    payload = bytes(range(256)) * 40  # 10,240 bytes: larger than the scratch buffer
    data = frame(payload) + frame(b"next")
    assert receive(buffer, data[:100], 100) == []
    room = buffer.receive_buffer()
    assert room.nbytes == len(payload) - 96  # exactly the rest of the frame, no more
    assert receive(buffer, data[100:], 1 << 20) == [payload, b"next"]


def test_many_small_frames_arrive_in_one_receive():
    buffer = FrameBuffer(scratch_size=4096, direct_size=1024)
    items = [b"a" * i for i in range(40)]
    assert receive(buffer, b"".join(frame(p) for p in items), 4096) == items


def test_a_frame_over_the_limit_is_refused_before_anything_is_allocated():
    buffer = FrameBuffer(max_frame_size=1000, scratch_size=4096, direct_size=1024)
    with pytest.raises(ProtocolError, match="exceeds the maximum response size 1000"):
        receive(buffer, struct.pack(">i", 1001), 4)
    with pytest.raises(ProtocolError, match="negative frame size"):
        FrameBuffer().feed(struct.pack(">i", -5))


@pytest.mark.parametrize(
    "record,kind",
    [
        (b"\x15\x03\x03\x00\x02\x02\x28", "alert"),  # TLS 1.2 alert: fatal, handshake_failure
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc", "handshake"),  # a ServerHello's start
    ],
)
def test_a_tls_record_where_a_frame_should_be_is_named(record, kind):
    """A TLS listener answering a plaintext client: its record header, read as a size, is
    over 350 MB; the error says it is TLS and which option to set, not the size."""
    with pytest.raises(
        ProtocolError,
        match=f"answered with a TLS {kind} record, not a Kafka "
        "frame: .* set kafka.security.protocol to SSL",
    ):
        FrameBuffer().feed(record)
    # bytes of the same size that are no TLS record keep the size's words
    with pytest.raises(ProtocolError, match="frame size 352583680 exceeds"):
        FrameBuffer().feed(b"\x15\x04\x00\x00")


def test_the_scratch_buffer_must_hold_a_frame_below_the_direct_size():
    with pytest.raises(ValueError):
        FrameBuffer(scratch_size=1024, direct_size=1024)


def _metadata_answer(correlation_id: int, throttle_ms: int, leader: int) -> bytes:
    from protocol.schemas import METADATA

    body = {
        "throttle_time_ms": throttle_ms,
        "brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}],
        "cluster_id": "c",
        "controller_id": 1,
        "topics": [
            {
                "error_code": 0,
                "name": "t",
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": 0,
                        "leader_id": leader,
                        "leader_epoch": 0,
                        "replica_nodes": [leader],
                        "isr_nodes": [leader],
                        "offline_replicas": [],
                    }
                ],
            }
        ],
    }
    out = bytearray(struct.pack(">i", correlation_id) + b"\x00")  # flexible header: no tags
    METADATA.response.encode(12, body, out)
    return frame(bytes(out))


def test_an_answer_asked_raw_is_its_body_s_bytes_for_the_caller_to_decode():
    """The framing knows no API by number: a caller that keeps answers (the client's
    Metadata snapshot) asks for the body's bytes and decodes them itself, to the same value
    the framing's own decode gives; answers not asked raw are decoded as before."""
    from protocol.framing import ClientFraming, decode_response_body
    from protocol.schemas import METADATA

    framing = ClientFraming()
    raw_cid, _ = framing.request(METADATA, 12, {"topics": None}, raw_answer=True)
    cid, _ = framing.request(METADATA, 12, {"topics": None})
    ((got_raw, raw),) = framing.receive_data(_metadata_answer(raw_cid, 7, 1))
    ((got, decoded),) = framing.receive_data(_metadata_answer(cid, 7, 1))
    assert (got_raw, got) == (raw_cid, cid) and isinstance(raw, bytes)
    assert decode_response_body(METADATA, 12, raw) == decoded
    assert decoded["throttle_time_ms"] == 7
    assert decoded["topics"][0]["partitions"][0]["leader_id"] == 1


def _list_offsets_body(timestamp):
    return {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {
                        "partition_index": p,
                        "current_leader_epoch": -1,
                        "timestamp": timestamp,
                        "max_num_offsets": 1,
                    }
                    for p in range(3)
                ],
            }
        ],
    }


def test_a_body_encoded_once_is_framed_as_a_fresh_encoding_would_be():
    """A caller that sends the same request often (ListOffsets every micro-batch) encodes
    its body once (``encode_body``) and hands the bytes over: each frame, with its own
    correlation id, is the one a fresh encoding of the fields makes."""
    from protocol.framing import ClientFraming, encode_body, encode_request
    from protocol.schemas import LIST_OFFSETS

    framing = ClientFraming()
    body = _list_offsets_body(-1)
    encoded = encode_body(LIST_OFFSETS, 7, body)
    frames = [framing.request(LIST_OFFSETS, 7, encoded) for _ in range(2)]
    frames.append(framing.request(LIST_OFFSETS, 7, body))
    for cid, frame in frames:
        assert bytes(frame) == bytes(encode_request(LIST_OFFSETS, 7, cid, "pyspark-pykafka", body))
    assert [cid for cid, _ in frames] == [0, 1, 2]


@pytest.mark.parametrize("version", [3, 8, 9, 11])  # classic and compact records
def test_a_produce_frame_sends_its_large_records_sections_from_where_they_are(version):
    """A records section of at least RECORDS_ASIDE_MIN bytes is a piece of the frame of its
    own (the same object, not a copy); the pieces joined are the frame encoded whole."""
    from protocol.framing import ClientFraming, encode_request_header
    from protocol.primitives import RECORDS_ASIDE_MIN
    from protocol.schemas import PRODUCE

    large, small = bytes(range(256)) * (RECORDS_ASIDE_MIN // 256), b"x" * 100
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30_000,
        "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": large}]},
            {"name": "u", "partition_data": [{"index": 1, "records": small}]},
            {"name": "v", "partition_data": [{"index": 2, "records": large + b"y"}]},
        ],
    }
    cid, frame = ClientFraming(client_id="c").request(PRODUCE, version, body)
    assert isinstance(frame, tuple) and any(piece is large for piece in frame)
    whole = bytearray()
    encode_request_header(whole, PRODUCE, version, cid, "c")
    PRODUCE.request.encode(version, body, whole)
    assert b"".join(frame) == struct.pack(">i", len(whole)) + whole
    # without a large section the frame is one buffer, as before
    body["topic_data"] = body["topic_data"][1:2]
    _, frame = ClientFraming(client_id="c").request(PRODUCE, version, body)
    assert isinstance(frame, bytearray)
