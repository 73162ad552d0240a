"""Signing in on a broker connection with SASL: ``SaslSignIn`` is a part of
``BrokerConnection`` (a mixin built on its round trips). PLAIN and SCRAM-SHA-256/512 are
driven here; OAUTHBEARER, AWS_MSK_IAM and GSSAPI through a fresh mechanism from
``ClientConfig.sasl_mechanism_factory`` each time (so a fresh token). A session the broker
granted for a limited time (KIP-368) is renewed on the same connection once
``SESSION_RENEW_AT`` of it has passed. A refusal names the mechanism, the user and the
broker, and never quotes the password."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, cast

from ..config import redact
from ..errors import AuthenticationError, ProtocolError

__all__ = ["SaslSignIn", "SESSION_RENEW_AT"]

log = logging.getLogger("pykafka.protocol.connection")

#: Why a broker refuses a delegation token it issued.
_TOKEN_HINT = (
    " (a delegation token is refused once it expired, delegation.token.expiry.time.ms "
    "after its last renewal, and past its maximum lifetime, delegation.token.max.lifetime.ms "
    "on the brokers, which no renewal extends)"
)

#: The share of a SASL session's lifetime after which the connection is renewed (Kafka's
#: Java client re-authenticates between 85 % and 95 % of it).
SESSION_RENEW_AT = 0.85


class SaslSignIn:
    """SASL sign-in and re-authentication; mixed into ``BrokerConnection``."""

    if TYPE_CHECKING:  # what BrokerConnection (connection.py) brings
        config: Any
        host: str
        port: int
        session_lifetime_ms: int | None
        _renew_at: float | None
        _session_end: float | None
        _roundtrip: Any
        version_for: Any
        close: Any

    def _authenticate(self, deadline: float | None = None) -> None:
        """Sign in; no exchange waits past ``deadline`` (a ``time.monotonic()``)."""
        from ..sasl import ScramMechanism, mechanism_for
        from ..schemas import SASL_AUTHENTICATE, SASL_HANDSHAKE

        c = self.config
        if c.sasl_mechanism_factory is None and (
            c.sasl_username is None or c.sasl_password is None
        ):
            raise AuthenticationError(
                f"SASL {c.sasl_mechanism}: kafka.sasl.username and kafka.sasl.password "
                "(or kafka.sasl.jaas.config) are required"
            )
        handshake = self._roundtrip(
            SASL_HANDSHAKE,
            self.version_for(SASL_HANDSHAKE),
            {"mechanism": c.sasl_mechanism},
            deadline,
        )
        if handshake["error_code"]:
            raise AuthenticationError(
                f"broker {self.host}:{self.port} refused SASL mechanism {c.sasl_mechanism}; "
                f"it offers {handshake.get('mechanisms')}"
            )
        version = self.version_for(SASL_AUTHENTICATE)
        if c.sasl_mechanism_factory is not None:
            self._authenticate_with(c.sasl_mechanism_factory(self.host), version, deadline)
            return
        username, password = c.sasl_username, c.sasl_password
        assert username is not None and password is not None  # checked above
        mech = mechanism_for(
            c.sasl_mechanism, username, password.reveal(), token_auth=c.sasl_token_auth
        )

        def step(token: bytes) -> bytes:
            r = self._roundtrip(SASL_AUTHENTICATE, version, {"auth_bytes": token}, deadline)
            if r["error_code"]:
                # The broker's text is quoted, but never the password: PLAIN hands it to
                # the broker, which could send it back.
                text = redact(r.get("error_message") or "", password.reveal())
                who = "delegation token" if c.sasl_token_auth else "user"
                raise AuthenticationError(
                    f"SASL {c.sasl_mechanism} authentication of {who} {c.sasl_username!r} "
                    f"failed at {self.host}:{self.port}: {text}".rstrip()
                    + (_TOKEN_HINT if c.sasl_token_auth else "")
                )
            self._note_session_lifetime(r)
            return bytes(r.get("auth_bytes") or b"")

        if c.sasl_mechanism == "PLAIN":
            step(mech.initial_response())
        else:  # the config admits only SCRAM besides PLAIN here
            scram = cast(ScramMechanism, mech)
            server_first = step(scram.client_first())
            server_final = step(self._sasl_verdict(scram.client_final, server_first))
            self._sasl_verdict(scram.verify_server_final, server_final)
        log.debug("authenticated to %s:%s with SASL %s", self.host, self.port, c.sasl_mechanism)

    def _authenticate_with(self, mech, version: int, deadline: float | None) -> None:
        """Drive a mechanism from ``ClientConfig.sasl_mechanism_factory`` (OAUTHBEARER,
        AWS_MSK_IAM): a fresh one, so a fresh token or signature, for every authentication.
        A refusal shows the broker's text and status and the options to look at."""
        from ..schemas import SASL_AUTHENTICATE

        where = f"SASL {mech.name} authentication at {self.host}:{self.port} failed"
        redact = getattr(mech, "redact", lambda text: text)
        message = mech.initial_response()
        while True:
            r = self._roundtrip(SASL_AUTHENTICATE, version, {"auth_bytes": message}, deadline)
            if r["error_code"]:
                detail = getattr(mech, "failure_text", lambda: "")()
                text = redact(r.get("error_message") or "")
                if _same_status(text, getattr(mech, "server_status", None)):
                    text = ""  # Kafka's OAUTHBEARER text is the status the detail shows
                head = f"{where}: {text}".rstrip() if text else where
                raise AuthenticationError("; ".join(part for part in (head, detail) if part))
            try:
                message = mech.respond(bytes(r.get("auth_bytes") or b""))
            except (AuthenticationError, ProtocolError) as e:
                raise type(e)(f"{where}: {e}") from e
            if message is None:
                break
        self._note_session_lifetime(r)
        log.debug("authenticated to %s:%s with SASL %s", self.host, self.port, mech.name)

    def _reauthenticate(self, deadline: float | None = None) -> None:
        """KIP-368: sign in again on this connection before the broker's session ends.

        Not by reconnecting: a connection with requests in flight (a producer keeps up to
        five) cannot be dropped without losing their answers, and the broker closes it at
        the first request after the session's end. The answers of requests sent before
        come ahead of the SaslHandshake's and are kept for their callers (``receive``).
        A refusal closes the connection (the broker closes it too) and is raised."""
        log.debug(
            "%s: SASL session of %s ms near its end: re-authenticating",
            self,
            self.session_lifetime_ms,
        )
        self._renew_at = None  # the SASL requests below go through send() too
        try:
            self._authenticate(deadline)
        except BaseException:
            self.close()
            raise

    def _note_session_lifetime(self, response: dict) -> None:
        """Keep the session lifetime a SaslAuthenticate answer grants (v1+; 0: no limit)."""
        lifetime = response.get("session_lifetime_ms") or 0
        if lifetime > 0:
            self.session_lifetime_ms = lifetime
            now = time.monotonic()
            self._renew_at = now + lifetime * SESSION_RENEW_AT / 1000
            self._session_end = now + lifetime / 1000

    def _sasl_verdict(self, call, message: bytes):
        """A SCRAM step on the server's message; its refusal names the user and broker."""
        try:
            return call(message)
        except (AuthenticationError, ProtocolError) as e:
            c = self.config
            raise type(e)(
                f"SASL {c.sasl_mechanism} authentication of user "
                f"{c.sasl_username!r} at {self.host}:{self.port} failed: {e}"
            ) from e


def _same_status(text: str, status: dict | None) -> bool:
    """Whether a broker's error text is the JSON status it sent before (OAUTHBEARER)."""
    if not status or not text.startswith("{"):
        return False
    import json

    try:
        return json.loads(text) == status
    except ValueError:
        return False
