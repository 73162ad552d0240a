"""Sans-IO framing: size-prefixed frames, request/response headers, correlation ids.

``ClientFraming`` is the protocol state machine of one connection, without a socket:
``request()`` turns a message into bytes to send and remembers what it expects back;
``receive_data()`` takes whatever bytes arrived and returns the responses that are now
complete, decoded, in the order they were sent (Kafka answers in order on one connection,
so several requests may be in flight: pipelining). Anything out of order or malformed
raises ``ProtocolError`` and the connection must be closed.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass

from . import primitives as p
from .errors import ProtocolError
from .schema import Api

_SIZE = struct.Struct(">i")
DEFAULT_MAX_RESPONSE_SIZE = 128 * 1024 * 1024


def encode_request_header(out: bytearray, api: Api, version: int, correlation_id: int,
                          client_id: str | None) -> None:
    """Request header v1 (key, version, correlation id, client id) or v2 (+ tagged fields)."""
    p.write_int16(out, api.key)
    p.write_int16(out, version)
    p.write_int32(out, correlation_id)
    p.write_string(out, client_id)  # always the classic nullable string, even in v2
    if api.request_header_version(version) >= 2:
        out.append(0)  # no tagged fields


def encode_request(api: Api, version: int, correlation_id: int, client_id: str | None,
                   body: dict) -> bytes:
    """A whole frame: int32 size, header, body."""
    out = bytearray(b"\0\0\0\0")
    encode_request_header(out, api, version, correlation_id, client_id)
    api.request.encode(version, body, out)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def decode_response_header(api: Api, version: int, frame) -> tuple[int, int]:
    """Returns ``(correlation_id, body_start)``."""
    correlation_id, pos = p.read_int32(frame, 0)
    if api.response_header_version(version) >= 1:
        count, pos = p.read_unsigned_varint(frame, pos)
        for _ in range(count):  # header tagged fields: none are defined; skip them
            _, pos = p.read_unsigned_varint(frame, pos)
            size, pos = p.read_unsigned_varint(frame, pos)
            if size > len(frame) - pos:
                raise ProtocolError("response header tagged field overruns the frame")
            pos += size
    return correlation_id, pos


class FrameBuffer:
    """Cuts a byte stream into size-prefixed frames, checking each size before buffering."""

    def __init__(self, max_frame_size: int = DEFAULT_MAX_RESPONSE_SIZE):
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._need: int | None = None

    def feed(self, data: bytes) -> list[memoryview]:
        self._buf += data
        frames = []
        while True:
            if self._need is None:
                if len(self._buf) < 4:
                    break
                size = _SIZE.unpack_from(self._buf, 0)[0]
                if size < 0:
                    raise ProtocolError(f"negative frame size {size}")
                if size > self.max_frame_size:
                    raise ProtocolError(
                        f"frame size {size} exceeds the maximum response size "
                        f"{self.max_frame_size}")
                self._need = size
            if len(self._buf) < 4 + self._need:
                break
            frame = bytes(self._buf[4:4 + self._need])
            del self._buf[:4 + self._need]
            self._need = None
            frames.append(memoryview(frame))
        return frames

    def bytes_wanted(self) -> int:
        """How many more bytes complete the current frame (at least 1)."""
        if self._need is None:
            return max(1, 4 - len(self._buf))
        return max(1, 4 + self._need - len(self._buf))

    @property
    def pending(self) -> bool:
        return bool(self._buf)


@dataclass
class InFlight:
    api: Api
    version: int
    correlation_id: int


class ClientFraming:
    """The client side of one Kafka connection, as a sans-IO state machine."""

    def __init__(self, client_id: str | None = "pyspark-pykafka",
                 max_response_size: int = DEFAULT_MAX_RESPONSE_SIZE):
        self.client_id = client_id
        self._frames = FrameBuffer(max_response_size)
        self._in_flight: deque[InFlight] = deque()
        self._next_id = 0

    def request(self, api: Api, version: int, body: dict,
                expect_response: bool = True) -> tuple[int, bytes]:
        correlation_id = self._next_id
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        frame = encode_request(api, version, correlation_id, self.client_id, body)
        if expect_response:
            self._in_flight.append(InFlight(api, version, correlation_id))
        return correlation_id, frame

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def bytes_wanted(self) -> int:
        return self._frames.bytes_wanted()

    def receive_data(self, data: bytes) -> list[tuple[int, dict]]:
        """Feed received bytes; returns ``[(correlation_id, response_body), ...]``."""
        out = []
        for frame in self._frames.feed(data):
            if not self._in_flight:
                raise ProtocolError("received a response with no request in flight")
            expected = self._in_flight.popleft()
            correlation_id, pos = decode_response_header(expected.api, expected.version, frame)
            if correlation_id != expected.correlation_id:
                raise ProtocolError(
                    f"correlation id mismatch: expected {expected.correlation_id} for "
                    f"{expected.api.name}, got {correlation_id}")
            body = decode_response_body(expected.api, expected.version, frame[pos:])
            out.append((correlation_id, body))
        return out


def decode_response_body(api: Api, version: int, body) -> dict:
    if api.key == 18 and version > 0 and len(body) >= 2:
        # A broker that does not know our ApiVersions version answers in v0 with
        # UNSUPPORTED_VERSION (35) and its own version ranges.
        error_code, _ = p.read_int16(body, 0)
        if error_code == 35:
            try:
                value, _ = api.response.decode(0, body, exact=False)
            except ProtocolError:
                # Some brokers (librdkafka's mock) garble this fallback body; the error
                # code alone is enough: the client retries with version 0.
                value = {"error_code": 35, "api_keys": []}
            return value
    # Trailing bytes are tolerated, as Kafka's own clients do: librdkafka's mock cluster,
    # for one, ends some Metadata responses with a stray byte.
    value, _ = api.response.decode(version, body, exact=False)
    return value
