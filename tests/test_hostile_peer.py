"""A broker that lies: every bad frame gives a typed ProtocolError quickly, allocates nothing
large, and the client closes the connection."""

import struct
import time
import tracemalloc

import pytest

from protocol.config import ClientConfig
from protocol.client.connection import BrokerConnection
from protocol.errors import KafkaConnectionError, KafkaTimeoutError, ProtocolError
from protocol.schemas.api_versions import API_VERSIONS
from tests.helpers.fake_broker import FakeBroker, correlation_id, frame


def api_versions_ok(request: bytes) -> bytes:
    """A valid ApiVersions v3 answer offering ApiVersions 0-3 and Metadata 0-12."""
    body = API_VERSIONS.response.encode(
        3,
        {
            "error_code": 0,
            "throttle_time_ms": 0,
            "api_keys": [
                {"api_key": 18, "min_version": 0, "max_version": 3},
                {"api_key": 3, "min_version": 0, "max_version": 12},
            ],
        },
    )
    return frame(struct.pack(">i", correlation_id(request)) + bytes(body))


def header(request: bytes) -> bytes:
    return struct.pack(">i", correlation_id(request))  # response header v0


HOSTILE = {
    # A frame claiming 2 GiB: refused from its size prefix, before any buffering.
    "frame length 0x7FFFFFFF": lambda req: struct.pack(">i", 0x7FFFFFFF) + b"\0" * 16,
    "negative frame length": lambda req: struct.pack(">i", -5) + b"\0" * 16,
    # error_code 0, then an api_keys compact-array count of 2^28 with 3 bytes left.
    "array count larger than the bytes left": lambda req: frame(
        header(req) + b"\x00\x00" + b"\x80\x80\x80\x80\x01" + b"\x00\x00\x00"
    ),
    # error_code 0, then an 11-byte varint as the array count.
    "11-byte varint": lambda req: frame(header(req) + b"\x00\x00" + b"\xff" * 10 + b"\x01"),
    "wrong correlation id": lambda req: frame(
        struct.pack(">i", correlation_id(req) + 7) + b"\x00\x00\x01\x00\x00\x00\x00\x00"
    ),
    "truncated body": lambda req: frame(header(req) + b"\x00"),
}


#: Far beyond the few seconds within which a hostile answer must be refused, so that
#: "refused at once" and "waited for the request timeout" stay apart on a loaded machine.
REQUEST_TIMEOUT_MS = 20_000
QUICKLY_S = 10


def config(**kw) -> ClientConfig:
    return ClientConfig(bootstrap_servers=["unused:1"], request_timeout_ms=REQUEST_TIMEOUT_MS, **kw)


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_frames_give_a_typed_error_quickly(case):
    with FakeBroker([HOSTILE[case]]) as fake:
        conn = BrokerConnection("127.0.0.1", fake.port, config())
        tracemalloc.start()
        started = time.monotonic()
        try:
            with pytest.raises(ProtocolError):
                conn.connect()
            elapsed = time.monotonic() - started
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert elapsed < QUICKLY_S
        assert peak < 4 * 1024 * 1024, f"allocated {peak} bytes"
        assert not conn.connected
        assert fake.closed_by_client.wait(10), "the client did not close the connection"


def test_frame_cut_short_then_closed_is_a_connection_error():
    with FakeBroker([lambda req: struct.pack(">i", 100) + b"\0" * 10], hang_up=True) as fake:
        conn = BrokerConnection("127.0.0.1", fake.port, config())
        with pytest.raises(KafkaConnectionError):
            conn.connect()
        assert not conn.connected


def test_silent_peer_times_out_within_the_request_timeout():
    def stall(req):
        time.sleep(3)  # the silent peer under test
        return b""

    with FakeBroker([stall]) as fake:
        conn = BrokerConnection(
            "127.0.0.1", fake.port, ClientConfig(bootstrap_servers=["x:1"], request_timeout_ms=300)
        )
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError):
            conn.connect()
        assert time.monotonic() - started < 2.5  # the 300 ms timeout, not the 3 s stall
        assert not conn.connected


def test_trailing_bytes_after_a_response_are_tolerated_as_kafka_clients_do():
    with FakeBroker([lambda req: frame(api_versions_ok(req)[4:] + b"junk")]) as fake:
        conn = BrokerConnection("127.0.0.1", fake.port, config()).connect()
        assert conn.api_versions[3] == (0, 12)
        conn.close()


def test_valid_negotiation_records_the_broker_ranges():
    with FakeBroker([api_versions_ok]) as fake:
        conn = BrokerConnection("127.0.0.1", fake.port, config()).connect()
        assert conn.api_versions[3] == (0, 12)
        assert conn.version_for(API_VERSIONS) == 3
        conn.close()


def test_unsupported_apiversions_version_falls_back_to_the_broker_range():
    def v0_answer(req):  # UNSUPPORTED_VERSION in v0 form, offering ApiVersions 0-2 only
        body = API_VERSIONS.response.encode(
            0, {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}]}
        )
        return frame(header(req) + bytes(body))

    def v2_answer(req):
        assert struct.unpack_from(">h", req, 2)[0] == 2  # the retry uses version 2
        body = API_VERSIONS.response.encode(
            2,
            {
                "error_code": 0,
                "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}],
                "throttle_time_ms": 0,
            },
        )
        return frame(header(req) + bytes(body))

    with FakeBroker([v0_answer, v2_answer]) as fake:
        conn = BrokerConnection("127.0.0.1", fake.port, config()).connect()
        assert conn.api_versions == {18: (0, 2)}
        conn.close()
