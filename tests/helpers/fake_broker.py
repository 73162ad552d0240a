"""A tiny scripted TCP peer for hostile-broker tests: it reads request frames and answers
each with whatever bytes the test scripted (or nothing, or a closed socket)."""

from __future__ import annotations

from collections.abc import Callable

from .scripted_broker import ScriptedBroker, correlation_id, frame

__all__ = ["FakeBroker", "Responder", "correlation_id", "frame"]

Responder = Callable[[bytes], bytes | None]


class FakeBroker(ScriptedBroker):
    """Listens on 127.0.0.1:<free port> and serves one connection. ``responders`` answer
    the requests in order: each gets the request frame (without its size prefix) and
    returns the raw bytes to send back (size prefix included, so tests can lie about it),
    or None to close. With ``hang_up`` the fake closes the connection after its script;
    without it, a request beyond the script closes it. Every request frame is kept in
    ``requests``."""

    def __init__(self, responders: list[Responder], hang_up: bool = False):
        self.responders = list(responders)
        self.hang_up = hang_up
        self.requests: list[bytes] = []
        super().__init__(connections=1, name="fake-broker")

    def open_session(self) -> list[Responder]:
        return list(self.responders)  # the script still to play

    def answer(self, request_frame: bytes, script: list[Responder]) -> bytes | None:
        if not script:
            return None
        self.requests.append(request_frame)
        return script.pop(0)(request_frame)

    def hangs_up(self, script: list[Responder]) -> bool:
        return self.hang_up and not script
