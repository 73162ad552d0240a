"""SASL GSSAPI (Kerberos V5, RFC 4752) for Kafka, as a sans-IO state machine.

The exchange, as Kafka's Java client speaks it: GSS-API context tokens go back and forth
in SaslAuthenticate until the security context is established (the client's last token
may be empty); then the server sends 4 bytes wrapped in the context: the security layers
it offers and its largest buffer. The client unwraps them and answers, wrapped, with layer
1 (no security layer: Kafka protects nothing with SASL), its largest buffer and an empty
authorization identity; the server's empty answer ends the exchange.

``GssapiMechanism`` drives that over a *security context*: any object with ``step(token)``
(the next token, or ``None``), ``complete``, ``wrap(data)`` and ``unwrap(data)``, the
calls of the ``gssapi`` package's ``SecurityContext``. Those calls are the only IO (they
may ask the KDC for a service ticket); ``kafka_common.kerberos`` builds the context from
the user's Kerberos credentials and turns the library's errors into ``AuthenticationError``
naming the principal and the cause.
"""

from __future__ import annotations

import struct
from typing import Protocol

from .errors import AuthenticationError, ConfigError, ProtocolError
from .sasl import Mechanism

__all__ = ["GssapiMechanism", "SecurityContext", "KRB5_LOGIN_MODULE", "LAYER_NONE"]

#: The JAAS login module of GSSAPI (the JDK's Kerberos login module).
KRB5_LOGIN_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
#: RFC 4752's security layer bit "no security layer".
LAYER_NONE = 1
#: The largest buffer the client says it can receive (as Java's GssKrb5Client: 64 KiB).
_MAX_BUFFER = 65536
_LAYER = struct.Struct(">I")  # one octet of layers, three of the max buffer size


class SecurityContext(Protocol):
    """The calls of a GSS-API initiator context (``gssapi.SecurityContext``)."""

    @property
    def complete(self) -> bool: ...

    def step(self, token: bytes | None = None) -> bytes | None: ...

    def wrap(self, data: bytes, encrypt: bool) -> object: ...

    def unwrap(self, data: bytes) -> object: ...


class GssapiMechanism(Mechanism):
    """One GSSAPI exchange over ``context`` for ``principal`` (used in messages only)."""

    name = "GSSAPI"

    def __init__(self, context: SecurityContext, principal: str = "") -> None:
        self._context = context
        self.principal = principal
        self._state = "initial"

    def __repr__(self) -> str:
        return f"GssapiMechanism(principal={self.principal!r}, state={self._state!r})"

    def initial_response(self) -> bytes:
        """The first context token (an AP-REQ carrying the service ticket)."""
        if self._state != "initial":
            raise ConfigError("GSSAPI: initial_response() may be called only once")
        self._state = "context"
        return self._step(None)

    def respond(self, challenge: bytes) -> bytes | None:
        if self._state == "context":
            if not self._context.complete:
                return self._step(challenge)
            self._state = "layer"
        if self._state == "layer":
            answer = self._negotiate_layer(challenge)
            self._state = "sent-layer"
            return answer
        if self._state == "sent-layer":
            if challenge:
                self._state = "failed"
                raise ProtocolError(
                    f"GSSAPI: the server sent {len(challenge)} unexpected bytes after the "
                    "security layer negotiation"
                )
            self._state = "done"
            return None
        raise ConfigError(f"GSSAPI: respond() called out of order (state {self._state!r})")

    def _step(self, token: bytes | None) -> bytes:
        out = self._context.step(token)
        if self._context.complete:
            # the next server message is the security layer offer (RFC 4752 3.1)
            self._state = "layer"
        return bytes(out or b"")

    def _negotiate_layer(self, challenge: bytes) -> bytes:
        """Unwrap the server's offer; answer, wrapped: no security layer, our max buffer,
        no authorization identity."""
        offer = _message(self._context.unwrap(bytes(challenge)))
        if len(offer) != 4:
            self._state = "failed"
            raise ProtocolError(
                f"GSSAPI: the server's security layer offer is {len(offer)} bytes, not 4"
            )
        if not offer[0] & LAYER_NONE:
            self._state = "failed"
            raise AuthenticationError(
                "GSSAPI: the server requires a SASL security layer (integrity or "
                "confidentiality), which Kafka clients do not use"
            )
        answer = _LAYER.pack((LAYER_NONE << 24) | _MAX_BUFFER)
        return _message(self._context.wrap(answer, False))


def _message(result: object) -> bytes:
    """The bytes of a wrap/unwrap result (``gssapi`` returns an object with ``message``)."""
    return bytes(getattr(result, "message", result))  # type: ignore[call-overload]
