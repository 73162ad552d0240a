"""The base of the tests' scripted brokers (``fake_broker``, ``fake_sasl_broker``): the
socket side, written once.

``ScriptedBroker`` listens on 127.0.0.1 (a free port), accepts connections on a thread and
serves each on a thread of its own: it reads size-prefixed request frames and hands each
to ``answer(frame, session)``, whose bytes go back as they are (size prefix included, so a
script can lie about it); None closes the connection without an answer. ``session`` is
whatever ``open_session()`` made for the connection. ``closed_by_client`` is set when a
client hangs up; ``close()`` (or leaving the ``with`` block) stops accepting and reading.

``Request`` reads a request's header with the project's primitives and decodes its body
with the project's schemas; ``response_frame`` encodes an answer the same way, and
``metadata_answer`` is the Metadata body of a one-broker cluster.
"""

from __future__ import annotations

import socket
import struct
import threading
from dataclasses import dataclass
from collections.abc import Iterable

from protocol import primitives as p
from protocol.schema import Api
from protocol.schemas import BY_KEY

_SIZE = struct.Struct(">i")
NODE_ID = 1  # the one broker of a scripted cluster
UNKNOWN_TOPIC_OR_PARTITION = 3


def frame(payload: bytes) -> bytes:
    """``payload`` with its int32 size prefix."""
    return _SIZE.pack(len(payload)) + payload


def correlation_id(request_frame: bytes) -> int:
    """The correlation id of a request frame (without its size prefix)."""
    return _SIZE.unpack_from(request_frame, 4)[0]


@dataclass(frozen=True)
class Request:
    """A request frame's header v1 part: key, version, correlation id, client id."""

    frame: bytes
    api_key: int
    version: int
    correlation_id: int
    client_id: str | None
    header_end: int  # where the client id ends (header v2 tagged fields follow)

    @classmethod
    def read(cls, request_frame: bytes) -> Request:
        api_key, pos = p.read_int16(request_frame, 0)
        version, pos = p.read_int16(request_frame, pos)
        cid, pos = p.read_int32(request_frame, pos)
        client_id, pos = p.read_string(request_frame, pos, nullable=True)
        return cls(request_frame, api_key, version, cid, client_id, pos)

    @property
    def api(self) -> Api | None:
        return BY_KEY.get(self.api_key)

    def body(self) -> dict:
        """The body, decoded with the API's request schema (header v2 tagged fields
        skipped)."""
        api, pos = self.api, self.header_end
        if api.request_header_version(self.version) >= 2:
            count, pos = p.read_unsigned_varint(self.frame, pos)
            for _ in range(count):
                _, pos = p.read_unsigned_varint(self.frame, pos)
                size, pos = p.read_unsigned_varint(self.frame, pos)
                pos += size
        body, _ = api.request.decode(self.version, self.frame, pos)
        return body


def response_frame(api: Api, version: int, cid: int, body: dict) -> bytes:
    """A whole response frame: size, header (v1 with no tagged fields where the version
    is flexible), body."""
    out = bytearray(b"\0\0\0\0")
    p.write_int32(out, cid)
    if api.response_header_version(version) >= 1:
        out.append(0)  # no header tagged fields
    api.response.encode(version, body, out)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def metadata_answer(
    port: int, cluster_id: str, topics: Iterable[tuple[str, Iterable[int] | None]]
) -> dict:
    """A Metadata response body: node ``NODE_ID`` at 127.0.0.1:``port`` leads every
    partition of ``topics``, in their order (pairs of a name and its partition ids; None
    answers the topic UNKNOWN_TOPIC_OR_PARTITION)."""
    answered = []
    for name, partitions in topics:
        if partitions is None:
            answered.append(
                {"error_code": UNKNOWN_TOPIC_OR_PARTITION, "name": name, "partitions": []}
            )
            continue
        answered.append(
            {
                "error_code": 0,
                "name": name,
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": part,
                        "leader_id": NODE_ID,
                        "leader_epoch": 0,
                        "replica_nodes": [NODE_ID],
                        "isr_nodes": [NODE_ID],
                        "offline_replicas": [],
                    }
                    for part in partitions
                ],
            }
        )
    return {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": NODE_ID, "host": "127.0.0.1", "port": port, "rack": None}],
        "cluster_id": cluster_id,
        "controller_id": NODE_ID,
        "topics": answered,
        "error_code": 0,
    }


class ScriptedBroker:
    """Subclasses give ``answer`` (and ``open_session``, ``hangs_up``) and set their own
    state before calling ``__init__``, which starts serving. ``connections`` bounds how
    many connections are accepted (None: any number)."""

    POLL_S = 0.1  # how often a blocked accept or read looks at the stop flag

    def __init__(self, *, connections: int | None = None, name: str = "scripted-broker"):
        self.closed_by_client = threading.Event()
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(self.POLL_S)
        self.port = self._server.getsockname()[1]
        self._connections = connections
        self._name = name
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accepter = threading.Thread(target=self._accept, daemon=True, name=f"{name}-accept")
        self._accepter.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    bootstrap = address

    # ---- the hooks ----------------------------------------------------------------------

    def open_session(self) -> object:
        """Per-connection state, handed to every ``answer`` on that connection."""
        return None

    def answer(self, request_frame: bytes, session) -> bytes | None:
        """The bytes to send for one request frame (without its size prefix), or None to
        close the connection instead."""
        raise NotImplementedError

    def hangs_up(self, session) -> bool:
        """Whether to close the connection after the answer just sent."""
        return False

    def end_session(self, session) -> None:
        """Called once a connection is over (either side closed it)."""

    # ---- serving ------------------------------------------------------------------------

    def close(self) -> None:
        self._stop.set()
        self._accepter.join(5)
        self._server.close()
        for t in self._threads:
            t.join(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _accept(self) -> None:
        accepted = 0
        while not self._stop.is_set() and (
            self._connections is None or accepted < self._connections
        ):
            try:
                conn, _ = self._server.accept()
            except (TimeoutError, OSError):
                continue
            accepted += 1
            t = threading.Thread(
                target=self._serve, args=(conn,), daemon=True, name=f"{self._name}-conn"
            )
            self._threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        session = self.open_session()
        conn.settimeout(self.POLL_S)
        try:
            with conn:
                self._serve_session(conn, session)
        finally:
            self.end_session(session)

    def _serve_session(self, conn: socket.socket, session) -> None:
        while not self._stop.is_set():
            request_frame = self._read_frame(conn)
            if request_frame is None:
                if not self._stop.is_set():
                    self.closed_by_client.set()
                return
            reply = self.answer(request_frame, session)
            if reply is None:
                return
            try:
                conn.sendall(reply)
            except OSError:
                return
            if self.hangs_up(session):
                return

    def _read_frame(self, conn: socket.socket) -> bytes | None:
        head = self._read_exact(conn, 4)
        if head is None:
            return None
        return self._read_exact(conn, _SIZE.unpack(head)[0])

    def _read_exact(self, conn: socket.socket, n: int) -> bytes | None:
        """``n`` bytes, or None when the peer hangs up, the socket fails or the broker
        stops."""
        buf = b""
        while len(buf) < n:
            try:
                chunk = conn.recv(n - len(buf))
            except TimeoutError:
                if self._stop.is_set():
                    return None
                continue
            except OSError:
                return None
            if not chunk:
                return None
            buf += chunk
        return buf
