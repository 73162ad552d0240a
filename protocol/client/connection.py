"""One TCP (optionally TLS) connection to one broker: the only module that touches sockets.

On connect it negotiates API versions through ApiVersions and, for SASL listeners, signs
in (``sasl_signin``). ``request()`` sends and waits; ``send()`` and ``receive()`` let
several requests be in flight at once (answered in order). Every wait is bounded by the
request timeout; any protocol error or timeout closes the connection, so a broken peer can
never leave a half-read stream behind. A call given a ``deadline`` (a ``time.monotonic()``
moment) waits no longer than until then either (``bounded_ms``): the caller's own limit,
passed with each call, never stored on the connection.

For reuse (``protocol.client.pool`` keeps connections warm across tasks):
``close_unless_reusable()`` tells whether an idle connection can serve another request
(the peer has not closed it, nothing unexpected arrived on it, its SASL session is not
about to end), closing it when not. A SASL session the broker granted for a limited time
is renewed on the same connection before its end, checked before every request, with
requests in flight (their answers come first and are kept for their callers); an idle
connection whose session already ended is replaced by a new one instead.
"""

from __future__ import annotations

import logging
import socket
import time
from typing import Any

from ..config import ClientConfig
from ..errors import (
    AuthenticationError,
    KafkaConnectionError,
    KafkaTimeoutError,
    ProtocolError,
    UnsupportedVersionError,
    BrokerError,
)
from ..framing import ClientFraming
from .sasl_signin import SaslSignIn
from ..schema import Api
from ..version import __version__

log = logging.getLogger("pykafka.protocol.connection")

CLIENT_SOFTWARE_NAME = "pyspark-pykafka"
CLIENT_SOFTWARE_VERSION = __version__
#: Words of the TLS alerts (OpenSSL's reason names) with which a broker refuses the
#: client's certificate: BAD_CERTIFICATE, CERTIFICATE_REQUIRED, CERTIFICATE_UNKNOWN /
#: _EXPIRED / _REVOKED, UNSUPPORTED_CERTIFICATE, UNKNOWN_CA, ACCESS_DENIED.
_CERTIFICATE_ALERTS = ("CERTIFICATE", "UNKNOWN_CA", "ACCESS_DENIED")
#: OpenSSL's verify codes (X509_V_ERR_*) for a certificate naming another host or IP
#: address, and for one that expired or is not yet valid.
_HOST_MISMATCH = (62, 64)
_EXPIRED = (9, 10)


def bounded_ms(timeout_ms: int, deadline: float | None) -> int:
    """``timeout_ms`` cut to what is left until ``deadline`` (a ``time.monotonic()``
    moment; None: no cut), at least 1 ms."""
    if deadline is None:
        return timeout_ms
    return min(timeout_ms, max(1, int((deadline - time.monotonic()) * 1000)))


class BrokerConnection(SaslSignIn):
    """A connection to ``host:port``. Not thread-safe: one user at a time."""

    def __init__(self, host: str, port: int, config: ClientConfig, node_id: int | None = None):
        self.host, self.port, self.node_id = host, port, node_id
        self.config = config
        self._sock: socket.socket | None = None
        self._framing = ClientFraming(config.client_id, config.max_response_size)
        self._ready: dict[int, dict] = {}
        self._unwanted: set[int] = set()  # correlation ids whose answers are dropped
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.session_lifetime_ms: int | None = None  # granted by the broker (KIP-368)
        self._renew_at: float | None = None  # monotonic time to renew the SASL session
        self._session_end: float | None = None  # monotonic time the SASL session ends

    def __repr__(self) -> str:
        return f"BrokerConnection({self.host}:{self.port}, node={self.node_id})"

    @property
    def connected(self) -> bool:
        return self._sock is not None

    # ---- lifecycle ------------------------------------------------------------------------

    def connect(self, deadline: float | None = None) -> BrokerConnection:
        """Open the connection, negotiate versions and sign in, each step within its
        timeout and, with ``deadline``, not past it."""
        if self._sock is not None:
            return self
        timeout = bounded_ms(self.config.connect_timeout_ms, deadline) / 1000
        try:
            sock = socket.create_connection((self.host, self.port), timeout=timeout)
        except OSError as e:
            raise KafkaConnectionError(
                f"cannot connect to broker {self.host}:{self.port}: {e}"
            ) from e
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            if self.config.uses_tls:
                sock = self._wrap_tls(sock)
            sock.settimeout(bounded_ms(self.config.request_timeout_ms, deadline) / 1000)
            self._sock = sock
            try:
                self._negotiate_versions(deadline)
            except KafkaConnectionError as e:
                refusal = self._tls_refusal(e)
                if refusal is None:
                    raise
                raise refusal from e
            except ProtocolError as e:  # the first answer is not Kafka's: say from whom
                raise ProtocolError(f"{self.host}:{self.port}: {e}") from e
            if self.config.uses_sasl:
                self._authenticate(deadline)
        except BaseException:
            self.close()
            try:
                sock.close()
            except OSError:
                pass
            raise
        return self

    def _wrap_tls(self, sock: socket.socket) -> socket.socket:
        import ssl
        from .tls import build_ssl_context

        c = self.config
        context = build_ssl_context(
            cafile=c.ssl_cafile,
            certfile=c.ssl_certfile,
            keyfile=c.ssl_keyfile,
            key_password=c.ssl_key_password.reveal() if c.ssl_key_password else None,
            check_hostname=c.ssl_check_hostname,
            verify=c.ssl_verify,
            java=c.ssl_java,
        )
        try:
            return context.wrap_socket(sock, server_hostname=self.host)
        except ssl.SSLCertVerificationError as e:
            raise AuthenticationError(
                f"TLS handshake with {self.host}:{self.port} failed: {e}{self._verify_hint(e)}"
            ) from e
        except ssl.SSLError as e:
            hint = (
                "; the broker closed the connection in the handshake, as a listener "
                "without TLS does: check that kafka.security.protocol (SSL, SASL_SSL) is "
                "the listener's"
                if isinstance(e, ssl.SSLEOFError)
                else ""
            )
            raise AuthenticationError(
                f"TLS handshake with {self.host}:{self.port} failed: {e}{hint}"
            ) from e
        except OSError as e:
            raise KafkaConnectionError(
                f"TLS handshake with {self.host}:{self.port} failed: {e}"
            ) from e

    def _verify_hint(self, error) -> str:
        """What to do about the broker's certificate, by OpenSSL's verify code."""
        code, c = getattr(error, "verify_code", None), self.config
        if code in _HOST_MISMATCH:
            return (
                f" (the broker's certificate does not name {self.host!r}, the host it "
                "was reached at: use a name the certificate holds, or set "
                "kafka.ssl.endpoint.identification.algorithm to an empty string to skip "
                "the host-name check; the chain is still verified)"
            )
        if code in _EXPIRED:
            return (
                " (the broker's certificate, or one of its chain, is outside its "
                "validity period: it must be renewed on the broker)"
            )
        java = c.ssl_java
        if java is not None and java.has_trust_store:
            option = (
                "kafka.ssl.truststore.certificates"
                if java.truststore_certificates is not None
                else f"kafka.ssl.truststore.location {java.truststore_location!r}"
            )
            return f" (the broker's certificate is not signed by a CA of {option})"
        if not c.ssl_cafile:
            return (
                " (no CA file given, so only the system's CAs are trusted: give the "
                "broker's CA with kafka.ssl.truststore.location (JKS, PKCS12 or PEM) or "
                "in PEM with kafka.ssl.cafile)"
            )
        return (
            f" (the broker's certificate is not signed by a CA of kafka.ssl.cafile "
            f"{c.ssl_cafile!r})"
        )

    def _tls_refusal(self, error: KafkaConnectionError) -> AuthenticationError | None:
        """A TLS alert instead of the first answer, as an AuthenticationError (no retry
        helps). With TLS 1.3 the broker checks the client's certificate after the client's
        side of the handshake is done, so a missing or untrusted client certificate shows
        up here (Kafka 4.4: SSLV3_ALERT_BAD_CERTIFICATE for none, _CERTIFICATE_UNKNOWN for
        an untrusted one), not in the handshake."""
        import ssl

        cause = error.__cause__
        reason = str(getattr(cause, "reason", None) or "")
        if (
            not isinstance(cause, ssl.SSLError)
            or "ALERT" not in reason
            or not any(word in reason for word in _CERTIFICATE_ALERTS)
        ):
            return None
        return AuthenticationError(
            f"TLS with {self.host}:{self.port}: the broker ended the connection with "
            f"{cause.reason}; a broker that requires client certificates (mutual TLS) "
            "refuses a missing, untrusted or expired one: check kafka.ssl.certfile and "
            "kafka.ssl.keyfile"
        )

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass
        self._framing = ClientFraming(self.config.client_id, self.config.max_response_size)
        self._ready.clear()
        self._unwanted.clear()
        self.session_lifetime_ms = self._renew_at = self._session_end = None

    # ---- reuse ----------------------------------------------------------------------------

    @property
    def idle(self) -> bool:
        """Open, and no request waits for an answer (nor an answer to be claimed)."""
        return self._sock is not None and self._framing.idle and not self._ready

    @property
    def session_ending(self) -> bool:
        """The SASL session the broker granted is close to its end (see the module doc)."""
        return self._renew_at is not None and time.monotonic() >= self._renew_at

    def close_unless_reusable(self) -> bool:
        """Whether this connection, left idle, can serve the next request; if not, it is
        closed (a later ``send`` opens a new one). Not when: closed; a request is still
        unanswered (its answer would desync the next user); the SASL session is ending;
        the peer closed it (EOF, a reset); or bytes nobody asked for arrived. Never blocks."""
        sock = self._sock
        if sock is None:
            return False
        if not self.idle or self.session_ending:
            self.close()
            return False
        import select

        try:
            readable, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            self.close()
            return False
        pending = getattr(sock, "pending", None)
        if not readable and not (pending is not None and pending()):
            return True
        # Something to read on an idle connection: the peer's FIN or reset, garbage, or
        # (TLS 1.3) a session ticket, which the TLS layer takes in without handing us data.
        timeout = sock.gettimeout()
        try:
            sock.settimeout(0)
            data = sock.recv(1)
        except OSError as e:
            if isinstance(e, BlockingIOError) or type(e).__name__ == "SSLWantReadError":
                sock.settimeout(timeout)
                return True
            data = b""
        log.debug(
            "%s: %s while idle; dropping it",
            self,
            "closed by the peer" if not data else "unexpected bytes",
        )
        self.close()
        return False

    def __enter__(self) -> BrokerConnection:
        return self.connect()

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- versions -------------------------------------------------------------------------

    def _negotiate_versions(self, deadline: float | None) -> None:
        from ..schemas.api_versions import API_VERSIONS

        version = min(3, API_VERSIONS.versions.hi or 3)
        body = {
            "client_software_name": CLIENT_SOFTWARE_NAME,
            "client_software_version": CLIENT_SOFTWARE_VERSION,
        }
        response = self._roundtrip(API_VERSIONS, version, body, deadline)
        if response["error_code"] == 35 and version > 0:
            # Retry within the range the broker named for ApiVersions (0 if it named none).
            theirs = {k["api_key"]: k["max_version"] for k in response["api_keys"]}
            version = min(version, theirs.get(18, 0))
            response = self._roundtrip(API_VERSIONS, version, body, deadline)
        if response["error_code"]:
            raise BrokerError.for_code(response["error_code"], "ApiVersions failed")
        self.api_versions = {
            k["api_key"]: (k["min_version"], k["max_version"]) for k in response["api_keys"]
        }

    def version_for(self, api: Api, max_version: int | None = None) -> int:
        """The highest version of ``api`` both sides speak."""
        ours = api.versions
        theirs = self.api_versions.get(api.key)
        if theirs is None:
            raise UnsupportedVersionError(
                f"broker {self.host}:{self.port} does not support {api.name} (key {api.key})"
            )
        hi = min(ours.hi, theirs[1]) if ours.hi is not None else theirs[1]
        if max_version is not None:
            hi = min(hi, max_version)
        lo = max(ours.lo, theirs[0])
        if hi < lo:
            raise UnsupportedVersionError(
                f"{api.name}: broker {self.host}:{self.port} speaks versions "
                f"{theirs[0]}-{theirs[1]}, this client {ours.lo}-{ours.hi}"
            )
        return hi

    # ---- requests -------------------------------------------------------------------------

    def send(
        self,
        api: Api,
        body: dict | bytes,
        version: int | None = None,
        expect_response: bool = True,
        raw_answer: bool = False,
        deadline: float | None = None,
    ) -> int:
        """Send a request without waiting; returns its correlation id for ``receive``.
        ``body`` and ``raw_answer``: as ``ClientFraming.request`` takes them; ``deadline``
        bounds the connecting or signing in again that may come first."""
        if self._sock is not None and self.session_ending:
            end = self._session_end  # set whenever session_ending is
            if self.idle and end is not None and time.monotonic() >= end:
                # Ended while idle: a new connection is as cheap as it is sure (a broker
                # takes a late SaslHandshake, a stricter server may close on it).
                log.debug("%s: SASL session ended while idle: reconnecting", self)
                self.close()
            else:
                self._reauthenticate(deadline)
        if self._sock is None:
            self.connect(deadline)
        sock = self._sock
        assert sock is not None  # connect() opens it or raises
        if version is None:
            version = self.version_for(api)
        correlation_id, frame = self._framing.request(
            api, version, body, expect_response, raw_answer
        )
        try:
            for piece in (frame,) if isinstance(frame, bytearray) else frame:
                sock.sendall(piece)
        except TimeoutError as e:
            self.close()
            raise KafkaTimeoutError(
                f"sending {api.name} to {self.host}:{self.port} timed out"
            ) from e
        except OSError as e:
            self.close()
            raise KafkaConnectionError(
                f"connection to {self.host}:{self.port} broke while sending {api.name}: {e}"
            ) from e
        return correlation_id

    def wait_ms(self, timeout_ms: int | None, deadline: float | None) -> int | None:
        """What ``receive`` may wait: ``timeout_ms`` (None: ``request.timeout.ms``) cut to
        what is left until ``deadline``; without a deadline, ``timeout_ms`` as it is."""
        if deadline is None:
            return timeout_ms
        return bounded_ms(
            self.config.request_timeout_ms if timeout_ms is None else timeout_ms, deadline
        )

    def receive(self, correlation_id: int, timeout_ms: int | None = None) -> dict:
        """Wait for the response to ``correlation_id`` (earlier ones are kept for later)."""
        timeout = timeout_ms if timeout_ms is not None else self.config.request_timeout_ms
        deadline = time.monotonic() + timeout / 1000
        while correlation_id not in self._ready:
            if self._sock is None:
                raise KafkaConnectionError(f"connection to {self.host}:{self.port} is closed")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.close()
                raise KafkaTimeoutError(
                    f"no response from {self.host}:{self.port} within {timeout} ms"
                )
            try:
                self._sock.settimeout(remaining)
                received = self._sock.recv_into(self._framing.receive_buffer())
            except TimeoutError as e:
                self.close()
                raise KafkaTimeoutError(
                    f"no response from {self.host}:{self.port} within {timeout} ms"
                ) from e
            except OSError as e:
                self.close()
                raise KafkaConnectionError(
                    f"connection to {self.host}:{self.port} broke: {e}"
                ) from e
            if not received:
                self.close()
                raise KafkaConnectionError(f"broker {self.host}:{self.port} closed the connection")
            try:
                for cid, response in self._framing.received(received):
                    if cid in self._unwanted:
                        self._unwanted.discard(cid)
                    else:
                        self._ready[cid] = response
            except ProtocolError:
                self.close()
                raise
        return self._ready.pop(correlation_id)

    def forget(self, correlation_id: int) -> None:
        """Nobody will ask for the answer to ``correlation_id``: it is dropped now if it was
        read already, else when it arrives, never held for the connection's life."""
        if self._ready.pop(correlation_id, None) is None:
            self._unwanted.add(correlation_id)

    def has_response(self, correlation_id: int) -> bool:
        """Whether the response to ``correlation_id`` was already read (with another)."""
        return correlation_id in self._ready

    def wait_handle(self) -> socket.socket | None:
        """The socket to ``select()`` on while waiting for responses from several brokers;
        None when the connection is closed or TLS already holds decrypted bytes (then
        ``receive`` will not block on the socket)."""
        sock = self._sock
        if sock is None:
            return None
        pending = getattr(sock, "pending", None)
        if pending is not None and pending():
            return None
        return sock

    def request(
        self,
        api: Api,
        body: dict | bytes,
        version: int | None = None,
        timeout_ms: int | None = None,
        raw_answer: bool = False,
        deadline: float | None = None,
    ) -> Any:
        """Send and wait for the answer: at most ``timeout_ms`` (default
        ``request.timeout.ms``), and nothing of it past ``deadline`` (a ``time.monotonic()``)."""
        cid = self.send(api, body, version, raw_answer=raw_answer, deadline=deadline)
        return self.receive(cid, self.wait_ms(timeout_ms, deadline))

    def _roundtrip(self, api: Api, version: int, body: dict, deadline: float | None) -> dict:
        cid = self.send(api, body, version, deadline=deadline)
        return self.receive(cid, self.wait_ms(None, deadline))


def wait_readable(conns: list[BrokerConnection], timeout_s: float) -> list[BrokerConnection]:
    """Wait at most ``timeout_s`` for any of ``conns`` to have bytes to read; returns those
    that do (the producer's wait on the brokers it has requests at). A connection that
    needs no wait (closed, or TLS already holds decrypted bytes: ``wait_handle``) is
    returned at once; when the wait itself fails, every connection is returned, for its
    ``receive`` to find out."""
    import select

    ready = [c for c in conns if c.wait_handle() is None]
    if ready:
        return ready
    by_socket = {h: c for c in conns if (h := c.wait_handle()) is not None}
    try:
        readable, _, _ = select.select(list(by_socket), [], [], max(0.0, timeout_s))
    except (OSError, ValueError):
        return list(conns)
    return [by_socket[s] for s in readable]
