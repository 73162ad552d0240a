"""Sans-IO framing: size-prefixed frames, request/response headers, correlation ids.

``ClientFraming`` is the protocol state machine of one connection, without a socket:
``request()`` turns a message into bytes to send and remembers what it expects back;
``receive_data()`` takes whatever bytes arrived (or ``receive_buffer()`` lends the room to
receive them into and ``received()`` counts them) and returns the responses that are now
complete, decoded, in the order they were sent (Kafka answers in order on one connection,
so several requests may be in flight: pipelining). Anything out of order or malformed
raises ``ProtocolError`` and the connection must be closed.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass
from typing import Any

from . import primitives as p
from .errors import ProtocolError
from .schema import Api

_SIZE = struct.Struct(">i")
DEFAULT_MAX_RESPONSE_SIZE = 128 * 1024 * 1024
#: A TLS record begins with its content type and version 3.x (RFC 8446, 5.1): as a frame
#: size, the 352 or 369 MB a plaintext client reads when a TLS listener answers it.
_TLS_RECORDS = {0x15: "alert", 0x16: "handshake"}


def _tls_record(head: bytes) -> str | None:
    """The kind of TLS record ``head`` (a frame's 4 size bytes) begins, if it looks like one."""
    kind = _TLS_RECORDS.get(head[0])
    return kind if kind and head[1] == 3 and head[2] <= 4 else None


def encode_request_header(
    out: bytearray, api: Api, version: int, correlation_id: int, client_id: str | None
) -> None:
    """Request header v1 (key, version, correlation id, client id) or v2 (+ tagged fields)."""
    p.write_int16(out, api.key)
    p.write_int16(out, version)
    p.write_int32(out, correlation_id)
    p.write_string(out, client_id)  # always the classic nullable string, even in v2
    if api.request_header_version(version) >= 2:
        out.append(0)  # no tagged fields


class _Frame(bytearray):
    """A request being encoded that keeps its large records sections aside
    (``primitives.write_records``): ``aside`` lists (position, section)."""

    aside: list[tuple[int, p.Buffer]]


#: A frame to send: its bytes, or its pieces in order (a Produce request's records
#: sections sent from where they are, not copied into the frame).
Frame = bytearray | tuple[p.Buffer, ...]


def encode_request(
    api: Api, version: int, correlation_id: int, client_id: str | None, body: dict[str, Any]
) -> Frame:
    """A whole frame: int32 size, header, body; a Produce request's records sections of at
    least ``primitives.RECORDS_ASIDE_MIN`` bytes are pieces of their own, not copied."""
    out = _Frame(b"\0\0\0\0")
    out.aside = []
    encode_request_header(out, api, version, correlation_id, client_id)
    api.request.encode(version, body, out)
    _SIZE.pack_into(out, 0, len(out) - 4 + sum(len(s) for _, s in out.aside))
    if not out.aside:
        return out
    view, at = memoryview(out), 0
    pieces: list[p.Buffer] = []
    for pos, section in out.aside:
        pieces += (view[at:pos], section)
        at = pos
    pieces.append(view[at:])
    return tuple(pieces)


def encode_request_around(
    api: Api, version: int, correlation_id: int, client_id: str | None, body: bytes
) -> bytearray:
    """A whole frame around a body encoded before."""
    out = bytearray(b"\0\0\0\0")
    encode_request_header(out, api, version, correlation_id, client_id)
    out += body
    _SIZE.pack_into(out, 0, len(out) - 4)
    return out


def decode_response_header(api: Api, version: int, frame: p.Buffer) -> tuple[int, int]:
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


def _uninitialised(size: int) -> memoryview:
    """A writable buffer of ``size`` bytes that are not zeroed first (numpy's empty: the
    pages are touched once, by the receive that fills them). numpy is imported here, at
    the first large frame: a driver that only plans or commits a write never needs it."""
    import numpy as np

    return np.empty(size, dtype=np.uint8).data.cast("B")


class FrameBuffer:
    """Cuts a byte stream into size-prefixed frames, checking each size before buffering.

    Bytes arrive either with ``feed(data)`` or, without a copy, by writing into
    ``receive_buffer()`` (``socket.recv_into``) and reporting the count with ``received(n)``.
    Small frames are cut from one reusable scratch buffer; a frame larger than
    ``direct_size`` gets a buffer of its own, exactly its size, that the rest of it is
    received straight into: a Fetch response of many megabytes is copied once, by the
    kernel, instead of once per step of growing and cutting a byte string.
    """

    def __init__(
        self,
        max_frame_size: int = DEFAULT_MAX_RESPONSE_SIZE,
        scratch_size: int = 256 * 1024,
        direct_size: int = 64 * 1024,
    ):
        if direct_size + 4 > scratch_size:
            raise ValueError("direct_size must leave room for a frame in the scratch buffer")
        self.max_frame_size = max_frame_size
        self.direct_size = direct_size
        self._scratch = bytearray(scratch_size)
        self._start = 0  # unconsumed bytes are self._scratch[_start:_end]
        self._end = 0
        self._frame: memoryview | None = None  # a large frame being received in place
        self._filled = 0

    def feed(self, data: p.Buffer) -> list[memoryview]:
        """Take bytes already received; returns the frames now complete."""
        frames: list[memoryview] = []
        view = memoryview(data).cast("B")
        while view.nbytes:
            target = self.receive_buffer()
            n = min(target.nbytes, view.nbytes)
            target[:n] = view[:n]
            view = view[n:]
            frames += self.received(n)
        return frames

    def receive_buffer(self) -> memoryview:
        """Writable room for the next received bytes (never empty)."""
        if self._frame is not None:
            return self._frame[self._filled :]
        buf = self._scratch
        if self._start and len(buf) - self._end < self.direct_size + 4:
            kept = self._end - self._start
            buf[:kept] = buf[self._start : self._end]
            self._start, self._end = 0, kept
        return memoryview(buf)[self._end :]

    def received(self, n: int) -> list[memoryview]:
        """``n`` bytes were written into the last ``receive_buffer()``: the frames now
        complete, each a memoryview of its own bytes."""
        if self._frame is not None:
            self._filled += n
            if self._filled < len(self._frame):
                return []
            frame, self._frame = self._frame, None
            return [frame]
        self._end += n
        return self._cut()

    def _cut(self) -> list[memoryview]:
        frames: list[memoryview] = []
        buf, start, end = self._scratch, self._start, self._end
        while end - start >= 4:
            size = _SIZE.unpack_from(buf, start)[0]
            if size < 0:
                raise ProtocolError(f"negative frame size {size}")
            if size > self.max_frame_size:
                tls = _tls_record(bytes(buf[start : start + 4]))
                if tls:
                    raise ProtocolError(
                        f"the broker answered with a TLS {tls} record, not a Kafka frame: "
                        "its listener wants TLS; set kafka.security.protocol to SSL (or "
                        "SASL_SSL) and give the broker's CA with kafka.ssl.cafile"
                    )
                raise ProtocolError(
                    f"frame size {size} exceeds the maximum response size {self.max_frame_size}"
                )
            have = end - start - 4
            if have >= size:
                frames.append(memoryview(bytes(memoryview(buf)[start + 4 : start + 4 + size])))
                start += 4 + size
            elif size > self.direct_size:
                frame = _uninitialised(size)
                frame[:have] = memoryview(buf)[start + 4 : end]
                self._frame, self._filled = frame, have
                start = end = 0
                break
            else:
                break
        if start == end:
            start = end = 0
        self._start, self._end = start, end
        return frames

    @property
    def pending(self) -> bool:
        return self._frame is not None or self._end > self._start


@dataclass
class InFlight:
    api: Api
    version: int
    correlation_id: int
    raw: bool = False  # the answer's body as bytes, for the caller to decode


class ClientFraming:
    """The client side of one Kafka connection, as a sans-IO state machine."""

    def __init__(
        self,
        client_id: str | None = "pyspark-pykafka",
        max_response_size: int = DEFAULT_MAX_RESPONSE_SIZE,
    ):
        self.client_id = client_id
        self._frames = FrameBuffer(max_response_size)
        self._in_flight: deque[InFlight] = deque()
        self._next_id = 0

    def request(
        self,
        api: Api,
        version: int,
        body: dict[str, Any] | bytes,
        expect_response: bool = True,
        raw_answer: bool = False,
    ) -> tuple[int, Frame]:
        """The frame of a request and its correlation id. ``body``: its fields, or its
        bytes already encoded for ``version`` (a caller that sends the same request often
        keeps them: ``encode_body``). With ``raw_answer`` the answer's body comes back as
        bytes, for the caller to decode (``decode_response_body``) or not."""
        correlation_id = self._next_id
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        frame: Frame
        if isinstance(body, (bytes, bytearray)):
            frame = encode_request_around(api, version, correlation_id, self.client_id, body)
        else:
            frame = encode_request(api, version, correlation_id, self.client_id, body)
        if expect_response:
            self._in_flight.append(InFlight(api, version, correlation_id, raw_answer))
        return correlation_id, frame

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    @property
    def idle(self) -> bool:
        """No request waits for its answer and no byte of one is buffered."""
        return not self._in_flight and not self._frames.pending

    def receive_data(self, data: bytes) -> list[tuple[int, dict[str, Any]]]:
        """Feed received bytes; returns ``[(correlation_id, response_body), ...]``."""
        return self._responses(self._frames.feed(data))

    def receive_buffer(self) -> memoryview:
        """Where to receive the next bytes (``sock.recv_into``), then call ``received``."""
        return self._frames.receive_buffer()

    def received(self, n: int) -> list[tuple[int, dict[str, Any]]]:
        """``n`` bytes arrived in ``receive_buffer()``: the responses now complete."""
        return self._responses(self._frames.received(n))

    def _responses(self, frames: list[memoryview]) -> list[tuple[int, dict[str, Any]]]:
        out = []
        for frame in frames:
            if not self._in_flight:
                raise ProtocolError("received a response with no request in flight")
            expected = self._in_flight.popleft()
            correlation_id, pos = decode_response_header(expected.api, expected.version, frame)
            if correlation_id != expected.correlation_id:
                raise ProtocolError(
                    f"correlation id mismatch: expected {expected.correlation_id} for "
                    f"{expected.api.name}, got {correlation_id}"
                )
            out.append((correlation_id, self._decoded(expected, frame[pos:])))
        return out

    def _decoded(self, expected: InFlight, body: memoryview) -> Any:
        if expected.raw:
            return bytes(body)
        return decode_response_body(expected.api, expected.version, body)


def encode_body(api: Api, version: int, body: dict[str, Any]) -> bytes:
    """A request's body encoded for ``version``, to send as it is (``ClientFraming.request``)."""
    encoded = bytearray()
    api.request.encode(version, body, encoded)
    return bytes(encoded)


def decode_response_body(api: Api, version: int, body: p.Buffer) -> dict[str, Any]:
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
