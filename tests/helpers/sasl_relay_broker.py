"""A SASL front for a real broker: ``tests.helpers.fake_sasl_broker`` signs clients in, Tansu serves
them.

No broker here completes an OAUTHBEARER or AWS_MSK_IAM sign-in, so ``SaslRelayBroker``
answers the SASL exchange itself (checking tokens or signatures with its ``check_token``,
as ``FakeSaslBroker`` does) and relays every later request of a signed-in connection, byte
for byte, to a Tansu broker over a connection of its own. Tansu is started with this
front's port as its advertised listener (``tansu_behind``), so Metadata sends clients back
through the front. ApiVersions is relayed too, with SaslHandshake and SaslAuthenticate
added to Tansu's list should it lack them. Session lifetimes are enforced as in
``FakeSaslBroker`` (a request after the end closes the connection).
"""

from __future__ import annotations

import socket
import struct
from contextlib import contextmanager
from collections.abc import Iterator

from kafka_testbed import TansuBroker
from protocol.schemas import API_VERSIONS, PRODUCE, SASL_AUTHENTICATE, SASL_HANDSHAKE

from .fake_sasl_broker import FakeSaslBroker
from .scripted_broker import Request, response_frame

_SIZE = struct.Struct(">i")


class SaslRelayBroker(FakeSaslBroker):
    def __init__(self, *args, **kwargs) -> None:
        self.upstream_port: int | None = None
        self.relayed: list[int] = []  # API keys relayed to the real broker
        super().__init__({}, *args, **kwargs)

    def open_session(self):
        session = super().open_session()
        session.upstream = None
        return session

    def end_session(self, session) -> None:
        if session.upstream is not None:
            session.upstream.close()

    def answer(self, frame: bytes, s) -> bytes | None:
        req = Request.read(frame)
        if req.api_key == API_VERSIONS.key:
            return self._api_versions(frame, req, s)
        if not s.authenticated or req.api_key in (SASL_HANDSHAKE.key, SASL_AUTHENTICATE.key):
            return super().answer(frame, s)
        if s.expires_at is not None:
            import time

            if time.monotonic() >= s.expires_at:
                self.expired_sessions += 1
                return None
        self.relayed.append(req.api_key)
        expect_response = not (req.api_key == PRODUCE.key and req.body()["acks"] == 0)
        return self._relay(frame, s, expect_response)

    def _relay(self, frame: bytes, s, expect_response: bool = True) -> bytes | None:
        try:
            if s.upstream is None:
                s.upstream = socket.create_connection(("127.0.0.1", self.upstream_port), 10)
            s.upstream.sendall(_SIZE.pack(len(frame)) + frame)
            if not expect_response:
                return b""
            head = self._exact(s.upstream, 4)
            return head + self._exact(s.upstream, _SIZE.unpack(head)[0])
        except OSError:
            return None  # the real broker hung up: so does the front

    @staticmethod
    def _exact(sock: socket.socket, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise OSError("upstream closed")
            buf += chunk
        return buf

    def _api_versions(self, frame: bytes, req: Request, s) -> bytes | None:
        raw = self._relay(frame, s)
        if raw is None:
            return None
        body, _ = API_VERSIONS.response.decode(req.version, raw, 8)  # size, correlation id
        keys = {k["api_key"] for k in body["api_keys"]}
        for api, hi in ((SASL_HANDSHAKE, 1), (SASL_AUTHENTICATE, 2)):
            if api.key not in keys:
                body["api_keys"].append({"api_key": api.key, "min_version": 0, "max_version": hi})
        return response_frame(API_VERSIONS, req.version, req.correlation_id, body)


@contextmanager
def tansu_behind(front: SaslRelayBroker) -> Iterator[TansuBroker]:
    """A Tansu broker advertising ``front``'s port, wired as its upstream."""
    broker = TansuBroker(advertised_port=front.port)
    broker.start()
    front.upstream_port = broker.backend_port
    try:
        yield broker
    finally:
        broker.stop()
