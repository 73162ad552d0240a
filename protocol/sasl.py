"""SASL client mechanisms for Kafka, as sans-IO state machines.

Nothing here touches a socket: each mechanism turns the server's bytes into the client's
next bytes, and the connection code carries them in SaslAuthenticate requests.

- ``PlainMechanism``: RFC 4616, one message ``\\0username\\0password``.
- ``ScramMechanism``: RFC 5802 with the hashes of RFC 7677 (SCRAM-SHA-256) and
  SCRAM-SHA-512, without channel binding (gs2 header ``n,,``), as Kafka brokers speak it.
- ``mechanism_for``: picks one from the ``sasl.mechanism`` name.
- ``parse_jaas_config``: reads the username and password out of a JVM-style
  ``sasl.jaas.config`` string (``jaas.py``, imported here).

Every mechanism object serves exactly one authentication exchange: it forgets the password
as soon as it no longer needs it, so build a new one per connection. No exception message
and no ``repr`` ever holds the password, the salted password or a proof.

Like the Java client, passwords and usernames are used as UTF-8 without SASLprep
normalisation; the username is escaped as an RFC 5802 ``saslname`` (``=`` -> ``=3D``,
``,`` -> ``=2C``).
"""

from __future__ import annotations

import abc
import base64
import binascii
import hashlib
import hmac
import re
import secrets
import string

from .errors import AuthenticationError, ConfigError, ProtocolError, PyKafkaError
from .jaas import canonical_class, parse_jaas_config, parse_jaas_options

__all__ = [
    "Mechanism",
    "PlainMechanism",
    "ScramMechanism",
    "SUPPORTED_MECHANISMS",
    "DEFAULT_MIN_ITERATIONS",
    "DEFAULT_MAX_ITERATIONS",
    "PLAIN_LOGIN_MODULE",
    "SCRAM_LOGIN_MODULE",
    "mechanism_for",
    "parse_jaas_config",
    "parse_jaas_options",
    "canonical_class",
    "escape_saslname",
]

#: Hash function name (for ``hashlib``) of each SCRAM mechanism.
_SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}

SUPPORTED_MECHANISMS: tuple[str, ...] = ("PLAIN", *_SCRAM_HASHES)

#: RFC 7677 asks for at least 4096 iterations; Kafka's own default is 4096 too.
DEFAULT_MIN_ITERATIONS = 4096
#: Upper bound on the server-chosen iteration count. Kafka brokers refuse to store SCRAM
#: credentials above 16384 iterations, so 100 000 leaves ample room while capping the CPU
#: a hostile or misconfigured server can make us spend (about 0.1 s of PBKDF2-SHA-512).
DEFAULT_MAX_ITERATIONS = 100_000

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"

_GS2_HEADER = "n,,"  # no channel binding, no authorization identity
_MAX_SERVER_MESSAGE = 4096  # bytes; real SCRAM server messages are ~100-200 bytes
_MAX_ERROR_TEXT = 200  # characters of a server's e= text quoted in our message


def _check_credentials(mechanism: str, username: object, password: object) -> bytes:
    """Validate the types of a username and password; return the password as UTF-8 bytes."""
    if not isinstance(username, str) or not username:
        raise ConfigError(f"{mechanism}: the username must be a non-empty string")
    if "\0" in username:
        raise ConfigError(f"{mechanism}: the username must not contain a NUL character")
    if isinstance(password, str):
        secret = password.encode("utf-8")
    elif isinstance(password, (bytes, bytearray)):
        secret = bytes(password)
    else:
        raise ConfigError(
            f"{mechanism}: the password must be str or bytes, not {type(password).__name__}"
        )
    if not secret:
        raise ConfigError(f"{mechanism}: the password is empty")
    return secret


class Mechanism(abc.ABC):
    """One client side of one SASL exchange.

    Drive it generically: send ``initial_response()``, then feed each server message to
    ``respond()`` and send what it returns, until it returns ``None`` (then ``done`` is
    true and the server is authenticated as far as the mechanism can tell).
    """

    #: The SASL mechanism name, as sent in SaslHandshake.
    name: str
    #: Where the exchange is: "initial" before the first message, "done" once it succeeded.
    _state: str

    @property
    def done(self) -> bool:
        """True once the exchange completed successfully."""
        return self._state == "done"

    @abc.abstractmethod
    def initial_response(self) -> bytes:
        """The client's first message."""

    @abc.abstractmethod
    def respond(self, challenge: bytes) -> bytes | None:
        """The reply to a server message, or ``None`` when the exchange is complete."""


class PlainMechanism(Mechanism):
    """SASL PLAIN (RFC 4616): the credentials in the clear, so use it only over TLS."""

    name = "PLAIN"

    def __init__(self, username: str, password: str | bytes) -> None:
        self._password: bytes | None = _check_credentials("PLAIN", username, password)
        if b"\0" in self._password:
            raise ConfigError("PLAIN: the password must not contain a NUL character")
        self.username = username
        self._state = "initial"

    def __repr__(self) -> str:
        return f"PlainMechanism(username={self.username!r}, state={self._state!r})"

    def initial_response(self) -> bytes:
        """``\\0username\\0password`` (no authorization identity); then the password is
        forgotten."""
        if self._state != "initial" or self._password is None:
            raise ConfigError("PLAIN: initial_response() may be called only once")
        message = b"\0" + self.username.encode("utf-8") + b"\0" + self._password
        self._password = None
        self._state = "sent"
        return message

    def respond(self, challenge: bytes) -> bytes | None:
        """Accept the broker's (empty) final answer."""
        if self._state != "sent":
            raise ConfigError("PLAIN: respond() called before initial_response() or twice")
        if challenge:
            self._state = "failed"
            raise ProtocolError(
                f"PLAIN: the server sent an unexpected {len(challenge)}-byte "
                "challenge after the credentials"
            )
        self._state = "done"
        return None


def escape_saslname(username: str) -> str:
    """Escape a username as an RFC 5802 ``saslname``: ``=`` -> ``=3D``, ``,`` -> ``=2C``."""
    return username.replace("=", "=3D").replace(",", "=2C")


def _is_printable_nonce(nonce: str) -> bool:
    """RFC 5802 ``printable``: %x21-2B / %x2D-7E (visible ASCII except ',')."""
    return bool(nonce) and all("\x21" <= ch <= "\x7e" and ch != "," for ch in nonce)


def _parse_attributes(data: bytes, what: str) -> list[tuple[str, str]]:
    """Split a SCRAM message into ``(letter, value)`` pairs; ProtocolError if it is not
    UTF-8 ``a=value,b=value`` text. The server's bytes are never quoted back."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ConfigError(f"{what} must be bytes, not {type(data).__name__}")
    data = bytes(data)
    if not data:
        raise ProtocolError(f"{what} is empty")
    if len(data) > _MAX_SERVER_MESSAGE:
        raise ProtocolError(f"{what} is too long ({len(data)} bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError(f"{what} is not valid UTF-8") from None
    if "\0" in text:
        raise ProtocolError(f"{what} contains a NUL character")
    pairs = []
    for part in text.split(","):
        if len(part) < 3 or part[1] != "=" or part[0] not in string.ascii_letters:
            raise ProtocolError(
                f"{what} is malformed: expected non-empty 'name=value' attributes separated by ','"
            )
        pairs.append((part[0], part[2:]))
    return pairs


def _names(pairs: list[tuple[str, str]]) -> str:
    shown = ",".join(name for name, _ in pairs[:8])
    return shown + (",..." if len(pairs) > 8 else "")


def _server_error(mechanism: str, text: str) -> AuthenticationError:
    if len(text) > _MAX_ERROR_TEXT:
        text = text[:_MAX_ERROR_TEXT] + "..."
    return AuthenticationError(f"{mechanism}: the server rejected the authentication: {text!r}")


def _b64decode(value: str) -> bytes:
    """Strict base64 (alphabet and padding checked); ValueError when invalid."""
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error) as exc:
        raise ValueError("invalid base64") from exc


class ScramMechanism(Mechanism):
    """SCRAM-SHA-256 / SCRAM-SHA-512 client (RFC 5802, RFC 7677), without channel binding.

    The exchange: ``client_first()`` -> server-first -> ``client_final(server_first)`` ->
    server-final -> ``verify_server_final(server_final)``. Only after the last call is the
    server known to hold the credentials. The server-chosen iteration count must lie in
    ``[min_iterations, max_iterations]`` (see ``DEFAULT_MAX_ITERATIONS`` for the bound).

    Parsing is strict: the server-first message must be exactly ``r=...,s=...,i=...`` and
    the server-final exactly ``v=...`` or ``e=...`` (Kafka brokers send no extensions).
    Bytes that are not SCRAM syntax raise ``ProtocolError``; well-formed messages that fail
    a check raise ``AuthenticationError``. Misuse (wrong order, bad options) raises
    ``ConfigError``. After any failure the object is spent.
    """

    def __init__(
        self,
        mechanism: str,
        username: str,
        password: str | bytes,
        *,
        nonce: str | None = None,
        token_auth: bool = False,
        min_iterations: int = DEFAULT_MIN_ITERATIONS,
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
    ) -> None:
        if mechanism not in _SCRAM_HASHES:
            raise ConfigError(
                f"unknown SCRAM mechanism {mechanism!r}; supported: {', '.join(_SCRAM_HASHES)}"
            )
        self._password: bytes | None = _check_credentials(mechanism, username, password)
        for label, value in (
            ("min_iterations", min_iterations),
            ("max_iterations", max_iterations),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{mechanism}: {label} must be a positive integer")
        if min_iterations > max_iterations:
            raise ConfigError(
                f"{mechanism}: min_iterations ({min_iterations}) exceeds "
                f"max_iterations ({max_iterations})"
            )
        if nonce is None:
            nonce = secrets.token_urlsafe(24)  # 32 characters of [A-Za-z0-9_-]
        elif not isinstance(nonce, str) or not _is_printable_nonce(nonce):
            raise ConfigError(f"{mechanism}: the nonce must be non-empty visible ASCII without ','")
        self.mechanism = mechanism
        self.username = username
        self.min_iterations = min_iterations
        self.max_iterations = max_iterations
        self._hash = _SCRAM_HASHES[mechanism]
        self._client_nonce = nonce
        # A delegation token signs in as its id with the extension tokenauth=true (KIP-48).
        extensions = ",tokenauth=true" if token_auth else ""
        self._client_first_bare = f"n={escape_saslname(username)},r={nonce}{extensions}"
        self._server_signature: bytes | None = None
        self._state = "initial"

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.mechanism

    def __repr__(self) -> str:
        return (
            f"ScramMechanism(mechanism={self.mechanism!r}, username={self.username!r}, "
            f"state={self._state!r})"
        )

    # -- the three steps ------------------------------------------------------------------

    def client_first(self) -> bytes:
        """The client-first-message: ``n,,n=<saslname>,r=<client nonce>``."""
        self._expect("initial", "client_first()")
        self._state = "client-first-sent"
        return (_GS2_HEADER + self._client_first_bare).encode("utf-8")

    def client_final(self, server_first: bytes) -> bytes:
        """Check the server-first-message and answer with the client-final-message
        ``c=biws,r=<nonce>,p=<proof>``."""
        self._expect("client-first-sent", "client_final()")
        try:
            message = self._client_final(server_first)
        except PyKafkaError:
            self._fail()
            raise
        self._state = "client-final-sent"
        return message

    def verify_server_final(self, server_final: bytes) -> None:
        """Check the server-final-message: raise unless it is ``v=`` with the signature
        only a server knowing the credentials can compute."""
        self._expect("client-final-sent", "verify_server_final()")
        try:
            self._verify(server_final)
        except PyKafkaError:
            self._fail()
            raise
        self._server_signature = None
        self._state = "done"

    # -- the generic Mechanism interface --------------------------------------------------

    def initial_response(self) -> bytes:
        return self.client_first()

    def respond(self, challenge: bytes) -> bytes | None:
        if self._state == "client-first-sent":
            return self.client_final(challenge)
        self.verify_server_final(challenge)
        return None

    # -- internals ------------------------------------------------------------------------

    def _expect(self, state: str, call: str) -> None:
        if self._state != state:
            raise ConfigError(
                f"{self.mechanism}: {call} called out of order (state {self._state!r})"
            )

    def _fail(self) -> None:
        self._password = None
        self._server_signature = None
        self._state = "failed"

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self._hash).digest()

    def _client_final(self, server_first: bytes) -> bytes:
        mech = self.mechanism
        pairs = _parse_attributes(server_first, f"{mech}: the server-first-message")
        if pairs[0][0] == "e":
            raise _server_error(mech, pairs[0][1])
        if pairs[0][0] == "m":
            raise AuthenticationError(
                f"{mech}: the server requires a mandatory extension "
                "(m=) this client does not support"
            )
        if [name for name, _ in pairs] != ["r", "s", "i"]:
            raise AuthenticationError(
                f"{mech}: the server-first-message must hold exactly "
                f"the attributes r, s, i in that order, not "
                f"{_names(pairs)}"
            )
        (_, nonce), (_, salt_b64), (_, iterations_text) = pairs

        if not nonce.startswith(self._client_nonce) or len(nonce) <= len(self._client_nonce):
            raise AuthenticationError(
                f"{mech}: the server nonce does not extend the client "
                "nonce (possible replay or man-in-the-middle)"
            )
        if not _is_printable_nonce(nonce):
            raise AuthenticationError(
                f"{mech}: the server nonce holds characters outside visible ASCII"
            )
        try:
            salt = _b64decode(salt_b64)
        except ValueError:
            raise AuthenticationError(f"{mech}: the salt is not valid base64") from None
        if not salt:
            raise AuthenticationError(f"{mech}: the salt is empty")
        if not re.fullmatch(r"[1-9][0-9]{0,11}", iterations_text):
            raise AuthenticationError(
                f"{mech}: the iteration count is not a positive decimal integer"
            )
        iterations = int(iterations_text)
        if not self.min_iterations <= iterations <= self.max_iterations:
            raise AuthenticationError(
                f"{mech}: the server asks for {iterations} iterations, "
                f"outside the accepted range [{self.min_iterations}, "
                f"{self.max_iterations}]"
            )

        assert self._password is not None
        salted = hashlib.pbkdf2_hmac(self._hash, self._password, salt, iterations)
        self._password = None
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        channel_binding = base64.b64encode(_GS2_HEADER.encode("ascii")).decode("ascii")
        without_proof = f"c={channel_binding},r={nonce}"
        auth_message = ",".join(
            (self._client_first_bare, bytes(server_first).decode("utf-8"), without_proof)
        ).encode("utf-8")
        client_signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, client_signature))
        self._server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode('ascii')}".encode("ascii")

    def _verify(self, server_final: bytes) -> None:
        mech = self.mechanism
        pairs = _parse_attributes(server_final, f"{mech}: the server-final-message")
        if pairs[0][0] == "e":
            raise _server_error(mech, pairs[0][1])
        if [name for name, _ in pairs] != ["v"]:
            raise AuthenticationError(
                f"{mech}: the server-final-message must hold exactly "
                f"one attribute, v= or e=, not {_names(pairs)}"
            )
        try:
            signature = _b64decode(pairs[0][1])
        except ValueError:
            raise AuthenticationError(f"{mech}: the server signature is not valid base64") from None
        assert self._server_signature is not None
        if not hmac.compare_digest(signature, self._server_signature):
            raise AuthenticationError(
                f"{mech}: the server signature does not match; the "
                "server does not know these credentials"
            )


def mechanism_for(
    name: str, username: str, password: str | bytes, *, token_auth: bool = False
) -> Mechanism:
    """A fresh mechanism for a ``sasl.mechanism`` name (case-insensitive); ``token_auth``:
    sign in with a delegation token (SCRAM only)."""
    key = name.strip().upper() if isinstance(name, str) else None
    if key in _SCRAM_HASHES:
        return ScramMechanism(key, username, password, token_auth=token_auth)
    if token_auth:
        raise ConfigError(f"a delegation token signs in with SCRAM, not {name!r}")
    if key == "PLAIN":
        return PlainMechanism(username, password)
    raise ConfigError(
        f"unsupported SASL mechanism {name!r}; supported: {', '.join(SUPPORTED_MECHANISMS)}"
    )
