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


def test_a_metadata_answer_repeated_byte_for_byte_is_the_last_one_decoded():
    """The client framing decodes a Metadata answer the same as the last one (its
    throttle time aside) into the same object, with the new throttle time; an answer that
    differs is decoded anew."""
    from protocol.framing import ClientFraming
    from protocol.schemas import METADATA

    framing = ClientFraming()
    answers = []
    for throttle, leader in [(0, 1), (7, 1), (0, 2)]:
        cid, _ = framing.request(METADATA, 12, {"topics": None})
        ((got_cid, body),) = framing.receive_data(_metadata_answer(cid, throttle, leader))
        assert got_cid == cid
        answers.append(body)
    first, repeated, changed = answers
    assert repeated is first and repeated["throttle_time_ms"] == 7
    assert changed is not first
    assert changed["topics"][0]["partitions"][0]["leader_id"] == 2


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


def test_a_list_offsets_request_equal_to_the_last_one_is_not_encoded_again(monkeypatch):
    """ListOffsets for the latest offsets of every partition goes out every micro-batch as
    it was: the framing encodes it once and frames the same bytes again (with the new
    correlation id); a body that differs is encoded anew, and every frame is the one a
    fresh encoding makes."""
    from protocol.framing import ClientFraming, encode_request
    from protocol.schemas import LIST_OFFSETS

    encoded = []
    encode = LIST_OFFSETS.request.encode
    monkeypatch.setattr(
        LIST_OFFSETS.request,
        "encode",
        lambda version, body, out: encoded.append(version) or encode(version, body, out),
    )
    framing = ClientFraming()
    bodies = [_list_offsets_body(-1), _list_offsets_body(-1), _list_offsets_body(-2)]
    bodies.append(bodies[2])
    frames = [framing.request(LIST_OFFSETS, 7, body) for body in bodies]
    assert len(encoded) == 2  # the first body, and the one asking for -2
    framing.request(LIST_OFFSETS, 6, bodies[3])  # another version: encoded anew
    assert len(encoded) == 3
    for (cid, frame), body in zip(frames, bodies):
        assert bytes(frame) == bytes(encode_request(LIST_OFFSETS, 7, cid, "pyspark-pykafka", body))
    assert [cid for cid, _ in frames] == [0, 1, 2, 3]
    assert frames[0][1][12:] == frames[1][1][12:]  # past size, key, version, id
