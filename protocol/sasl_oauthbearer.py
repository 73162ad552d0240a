"""SASL/OAUTHBEARER (RFC 7628) as Kafka speaks it, as a sans-IO state machine.

The client sends one message, the client initial response, in exactly the grammar Kafka's
``OAuthBearerClientInitialResponse`` parses::

    n,,\\x01auth=Bearer <token>[\\x01<key>=<value>]*\\x01\\x01

with token characters ``[-_.a-zA-Z0-9]``, extension keys ``[A-Za-z]+`` (``auth`` is not
allowed as one) and values ``[\\x21-\\x7E \\t\\r\\n]+``. Everything is checked before a byte
is sent, and no error message ever holds the token.

A broker that accepts the token answers with empty bytes. One that refuses it sends a
challenge holding a JSON status (``{"status":"invalid_token", ...}``); the client must answer
it with a lone ``\\x01`` and the broker then fails the exchange with
SASL_AUTHENTICATION_FAILED. ``respond`` follows that flow and keeps the broker's status
(``server_status``) so the connection can show it in its error.

Where the token comes from is not this module's business: the connection asks the
``mechanism_factory`` of its ``ClientConfig`` for a fresh mechanism (and so a fresh token)
for every authentication; ``kafka_common.oauth`` builds those factories.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .config import redact
from .errors import AuthenticationError, ConfigError, ProtocolError
from .sasl import Mechanism

__all__ = [
    "OAuthBearerMechanism",
    "client_initial_response",
    "SEPARATOR",
    "check_token",
    "check_extensions",
]

SEPARATOR = "\x01"
_TOKEN_RE = re.compile(r"[-_.a-zA-Z0-9]+", re.ASCII)
_KEY_RE = re.compile(r"[A-Za-z]+", re.ASCII)
_VALUE_RE = re.compile(r"[\x21-\x7E \t\r\n]+", re.ASCII)
_MAX_CHALLENGE = 8192  # bytes; Kafka's JSON status is well under 200
_MAX_STATUS_TEXT = 300  # characters of the broker's status quoted in an error


def check_token(token: object, what: str = "OAUTHBEARER token") -> str:
    """The token as a str if it fits Kafka's grammar; ConfigError (never quoting it) if not."""
    if not isinstance(token, str):
        raise ConfigError(f"{what} must be a string, not {type(token).__name__}")
    if not token:
        raise ConfigError(f"{what} is empty")
    if not _TOKEN_RE.fullmatch(token):
        bad = sorted({ch for ch in token if not _TOKEN_RE.fullmatch(ch)})
        shown = ", ".join(repr(ch) for ch in bad[:5])
        raise ConfigError(
            f"{what} ({len(token)} characters) holds characters Kafka does not "
            f"accept in a bearer token ({shown}); only [-_.a-zA-Z0-9] may appear"
        )
    return token


def check_extensions(extensions: object, what: str = "SASL extension") -> dict[str, str]:
    """The extensions as a ``dict[str, str]`` if each key and value fits Kafka's grammar."""
    if extensions is None:
        return {}
    if not isinstance(extensions, dict):
        raise ConfigError(f"{what}s must be a dict of str to str, not {type(extensions).__name__}")
    checked: dict[str, str] = {}
    for key, value in extensions.items():
        if not isinstance(key, str) or not _KEY_RE.fullmatch(key):
            raise ConfigError(
                f"{what} name {key!r} is not allowed: names are letters [A-Za-z]+ only"
            )
        if key == "auth":
            raise ConfigError(f"{what} name 'auth' is reserved for the token itself")
        if not isinstance(value, str) or not _VALUE_RE.fullmatch(value):
            raise ConfigError(
                f"{what} {key!r}: the value must be a non-empty string of "
                "visible ASCII, space, tab, CR or LF"
            )
        checked[key] = value
    return checked


def client_initial_response(token: str, extensions: dict[str, str] | None = None) -> bytes:
    """``n,,\\x01auth=Bearer <token>[\\x01k=v]*\\x01\\x01``, both parts checked first."""
    token = check_token(token)
    pairs = "".join(f"{SEPARATOR}{k}={v}" for k, v in check_extensions(extensions).items())
    return f"n,,{SEPARATOR}auth=Bearer {token}{pairs}{SEPARATOR}{SEPARATOR}".encode("ascii")


class OAuthBearerMechanism(Mechanism):
    """The client side of one OAUTHBEARER exchange with one token.

    ``hint`` names the options to look at when the broker refuses the token; it goes into
    the connection's error message. The token is forgotten once sent.
    """

    name = "OAUTHBEARER"

    def __init__(
        self, token: str, extensions: dict[str, str] | None = None, *, hint: str = ""
    ) -> None:
        self._message: bytes | None = client_initial_response(token, extensions)
        self._token: str | None = token  # kept only to redact a broker's echo of it
        self.extension_names = tuple(check_extensions(extensions))
        self.hint = hint
        self.server_status: dict[str, Any] | None = None
        self._state = "initial"

    def __repr__(self) -> str:
        return (
            f"OAuthBearerMechanism(extensions={list(self.extension_names)!r}, "
            f"state={self._state!r})"
        )

    @property
    def failed(self) -> bool:
        """True once the broker refused the token (its status is ``server_status``)."""
        return self._state == "refused"

    def initial_response(self) -> bytes:
        if self._state != "initial" or self._message is None:
            raise ConfigError("OAUTHBEARER: initial_response() may be called only once")
        message, self._message = self._message, None
        self._state = "sent"
        return message

    def respond(self, challenge: bytes) -> bytes | None:
        """Empty bytes: accepted (None). A JSON status: refused; answer ``\\x01`` so the
        broker ends the exchange with SASL_AUTHENTICATION_FAILED."""
        if self._state == "refused":
            raise AuthenticationError(
                "OAUTHBEARER: the broker refused the token but did not "
                f"end the exchange; {self.failure_text()}"
            )
        if self._state != "sent":
            raise ConfigError(f"OAUTHBEARER: respond() called in state {self._state!r}")
        challenge = bytes(challenge)
        if not challenge:
            self._state = "done"
            self._token = None
            return None
        self._state = "refused"
        self.server_status = _parse_status(challenge)
        return SEPARATOR.encode("ascii")

    def redact(self, text: str) -> str:
        """``text`` with the token (should a broker echo it) replaced by ``******``."""
        return redact(text, self._token)

    def failure_text(self) -> str:
        """The broker's status and the options to look at, for an error message."""
        parts = []
        if self.server_status is not None:
            shown = json.dumps(self.server_status, sort_keys=True)
            if len(shown) > _MAX_STATUS_TEXT:
                shown = shown[:_MAX_STATUS_TEXT] + "..."
            parts.append(f"broker status {shown}")
        if self.hint:
            parts.append(f"check {self.hint}")
        return "; ".join(parts)


def _parse_status(challenge: bytes) -> dict[str, Any]:
    """The broker's JSON error status (RFC 7628 section 3.2.2); ProtocolError if the bytes
    are not a JSON object of strings."""
    if len(challenge) > _MAX_CHALLENGE:
        raise ProtocolError(
            f"OAUTHBEARER: the broker's challenge is too long ({len(challenge)} bytes)"
        )
    try:
        status = json.loads(challenge.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ProtocolError("OAUTHBEARER: the broker's challenge is not a JSON status") from None
    if not isinstance(status, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in status.items()
    ):
        raise ProtocolError("OAUTHBEARER: the broker's challenge is not a JSON object of strings")
    return status
