"""A tiny scripted TCP peer for hostile-broker tests: it reads request frames and answers
each with whatever bytes the test scripted (or nothing, or a closed socket)."""

from __future__ import annotations

import socket
import struct
import threading
from typing import Callable

Responder = Callable[[bytes], bytes | None]


class FakeBroker:
    """Listens on 127.0.0.1:<free port>. ``responders`` answer the requests in order: each
    gets the request frame (without its size prefix) and returns the raw bytes to send
    back (size prefix included, so tests can lie about it), or None to close. With
    ``hang_up`` the fake closes the connection after its script."""

    def __init__(self, responders: list[Responder], hang_up: bool = False):
        self.responders = list(responders)
        self.hang_up = hang_up
        self.requests: list[bytes] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(5)
        self.port = self._server.getsockname()[1]
        self.closed_by_client = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _serve(self) -> None:
        try:
            conn, _ = self._server.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(5)
            for respond in self.responders:
                frame = _read_frame(conn)
                if frame is None:
                    self.closed_by_client.set()
                    return
                self.requests.append(frame)
                reply = respond(frame)
                if reply is None:
                    return
                try:
                    conn.sendall(reply)
                except OSError:
                    return
            if self.hang_up:
                return
            # After the script, wait to see whether the client hangs up.
            try:
                if conn.recv(1) == b"":
                    self.closed_by_client.set()
            except OSError:
                self.closed_by_client.set()

    def close(self) -> None:
        self._server.close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "FakeBroker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _read_frame(conn: socket.socket) -> bytes | None:
    head = _read_exact(conn, 4)
    if head is None:
        return None
    return _read_exact(conn, struct.unpack(">i", head)[0])


def _read_exact(conn: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        try:
            chunk = conn.recv(n - len(buf))
        except OSError:
            return None
        if not chunk:
            return None
        buf += chunk
    return buf


def correlation_id(request_frame: bytes) -> int:
    return struct.unpack_from(">i", request_frame, 4)[0]


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload
