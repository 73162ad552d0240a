"""A scripted SASL broker: ApiVersions, SaslHandshake and SaslAuthenticate, then Metadata.

No broker here can authenticate a SCRAM user (Tansu stores no credentials, librdkafka's
mock cluster has no SASL), so this fake is the other end of the SASL tests: it computes
the real server side of RFC 5802 (SCRAM-SHA-256/512: StoredKey and ServerKey from the
user's password, the client proof checked against StoredKey, ServerSignature sent back)
and of RFC 4616 (PLAIN). Like a Kafka broker it serves nothing but ApiVersions,
SaslHandshake and SaslAuthenticate before authentication (anything else closes the
connection). After it, Metadata lists ``topics`` (name -> partition count, led by this
node), ListOffsets answers 0 (earliest) or ``log_end``, and a Fetch closes the
connection: enough for a Spark query to plan and run tasks that fail.

Hooks make it hostile: ``server_first`` and ``server_final`` rewrite the SCRAM messages it
sends (a nonce that does not extend the client's, an iteration count out of bounds, a bad
signature...), ``reply`` replaces the whole answer to a request with raw bytes (frame
sizes, counts and lengths near 2**31), ``auth_error`` fails SaslAuthenticate with a
message of its choice (or made from the client's token), ``session_lifetime_ms`` is the
session lifetime granted with a successful authentication (KIP-368; 0: none). Every request
is recorded (``requests``: API keys), and ``closed_by_client`` is set when the client hangs
up. The socket side is ``tests.helpers.scripted_broker.ScriptedBroker``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import threading
import time
from collections.abc import Callable

from protocol.errors import ProtocolError
from protocol.schemas import (
    API_VERSIONS,
    FETCH,
    LIST_OFFSETS,
    METADATA,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
)

from .scripted_broker import Request, ScriptedBroker, metadata_answer, response_frame

_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class FakeSaslBroker(ScriptedBroker):
    def __init__(
        self,
        users: dict[str, str],
        *,
        mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
        iterations: int = 4096,
        salt: bytes = b"fake-broker-salt",
        server_first: Callable[[str, str], str] | None = None,
        server_final: Callable[[str], str] | None = None,
        reply: Callable[[int, int, bytes], bytes | None] | None = None,
        auth_error: str | Callable[[bytes], str] | None = None,
        topics: dict[str, int] | None = None,
        log_end: int = 10,
        check_token: Callable[[str, dict], dict | None] | None = None,
        session_lifetime_ms: int = 0,
    ) -> None:
        self.users, self.mechanisms = users, mechanisms
        self.iterations, self.salt = iterations, salt
        self.server_first_hook, self.server_final_hook = server_first, server_final
        self.reply_hook, self.auth_error = reply, auth_error
        self.topics, self.log_end = topics or {}, log_end
        self.check_token, self.session_lifetime_ms = check_token, session_lifetime_ms
        self.bearer: list[tuple[str, dict]] = []  # OAUTHBEARER (token, extensions) received
        self.requests: list[int] = []
        self.expired_sessions = 0  # requests that came after their session's end
        self.received: list[bytes] = []  # every SaslAuthenticate token, as sent
        self.authenticated = threading.Event()
        super().__init__(name="fake-sasl")

    # ---- serving ------------------------------------------------------------------------

    def open_session(self) -> _Session:
        return _Session()

    def answer(self, frame: bytes, s: _Session) -> bytes | None:
        req = Request.read(frame)
        self.requests.append(req.api_key)
        if self.reply_hook is not None:
            raw = self.reply_hook(req.api_key, req.correlation_id, frame)
            if raw is not None:
                return raw
        if s.expires_at is not None and time.monotonic() >= s.expires_at:
            self.expired_sessions += 1
            return None  # as Kafka (KIP-368): a session past its lifetime is closed
        api = req.api
        allowed = (API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE)
        if api is None or (not s.authenticated and api not in allowed):
            return None  # as Kafka: nothing but SASL before authentication
        try:
            body = req.body()
        except ProtocolError:
            return None  # a request this script cannot read: the connection is closed
        if api is API_VERSIONS:
            answer = {
                "error_code": 0,
                "throttle_time_ms": 0,
                "api_keys": [
                    {
                        "api_key": a.key,
                        "min_version": a.request.versions.lo,
                        "max_version": min(a.request.versions.hi, hi),
                    }
                    for a, hi in (
                        (API_VERSIONS, 3),
                        (SASL_HANDSHAKE, 1),
                        (SASL_AUTHENTICATE, 2),
                        (METADATA, 12),
                        (LIST_OFFSETS, 7),
                        (FETCH, 12),
                    )
                ],
            }
        elif api is SASL_HANDSHAKE:
            s.mechanism = body["mechanism"]
            ok = s.mechanism in self.mechanisms
            answer = {"error_code": 0 if ok else 33, "mechanisms": list(self.mechanisms)}
        elif api is SASL_AUTHENTICATE:
            token = bytes(body["auth_bytes"])
            self.received.append(token)
            answer = self._authenticate(s, token)
        elif api is METADATA:
            answer = metadata_answer(
                self.port,
                "fake-sasl",
                [(name, range(count)) for name, count in sorted(self.topics.items())],
            )
        elif api is LIST_OFFSETS:
            answer = {
                "throttle_time_ms": 0,
                "topics": [
                    {
                        "name": t["name"],
                        "partitions": [
                            {
                                "partition_index": q["partition_index"],
                                "error_code": 0,
                                "timestamp": -1,
                                "offset": 0 if q["timestamp"] == -2 else self.log_end,
                                "leader_epoch": 0,
                            }
                            for q in t["partitions"]
                        ],
                    }
                    for t in body["topics"]
                ],
            }
        else:
            return None  # Fetch (or anything else): the connection is closed
        return response_frame(api, req.version, req.correlation_id, answer)

    def _authenticate(self, s: _Session, token: bytes) -> dict:
        def fail(message: str) -> dict:
            return {
                "error_code": 58,
                "error_message": message,
                "auth_bytes": b"",
                "session_lifetime_ms": 0,
            }

        def ok(data: bytes) -> dict:
            if self.session_lifetime_ms:
                s.expires_at = time.monotonic() + self.session_lifetime_ms / 1000
            return {
                "error_code": 0,
                "error_message": None,
                "auth_bytes": data,
                "session_lifetime_ms": self.session_lifetime_ms if s.authenticated else 0,
            }

        if self.auth_error is not None:
            return fail(self.auth_error(token) if callable(self.auth_error) else self.auth_error)
        if s.mechanism == "OAUTHBEARER":
            return self._oauthbearer(s, token, ok, fail)
        if s.mechanism == "AWS_MSK_IAM":
            # AWS's broker: a JSON payload, its signature checked by ``check_token``
            # (called with the payload dict), then a JSON answer with a request id.
            try:
                payload = json.loads(token)
            except ValueError:
                return fail("Invalid AWS_MSK_IAM payload")
            self.bearer.append(("", payload))
            problem = self.check_token(payload, {}) if self.check_token else None
            if problem is not None:
                return fail(f"[{problem.get('request-id', 'r-1')}]: {problem['status']}")
            s.authenticated = True
            self.authenticated.set()
            return ok(json.dumps({"version": "2020_10_22", "request-id": "r-1"}).encode())
        if s.mechanism == "PLAIN":
            parts = token.split(b"\0")
            if len(parts) == 3 and self.users.get(parts[1].decode()) == parts[2].decode():
                s.authenticated = True
                self.authenticated.set()
                return ok(b"")
            return fail("Authentication failed: Invalid username or password")
        hash_name = _HASHES[s.mechanism]
        if s.scram is None:  # client-first
            text = token.decode()
            if not text.startswith("n,,"):
                return fail("bad gs2 header")
            s.client_first_bare = text[3:]
            attrs = dict(a.split("=", 1) for a in s.client_first_bare.split(","))
            user = attrs["n"].replace("=2C", ",").replace("=3D", "=")
            s.user, client_nonce = user, attrs["r"]
            s.nonce = client_nonce + "Fk3-server-part"
            message = f"r={s.nonce},s={base64.b64encode(self.salt).decode()},i={self.iterations}"
            if self.server_first_hook is not None:
                message = self.server_first_hook(message, client_nonce)
            s.server_first = message
            s.scram = "first-sent"
            return ok(message.encode())
        # client-final
        text = token.decode()
        without_proof, _, proof_attr = text.rpartition(",")
        password = self.users.get(s.user)
        if password is None:
            final = "e=unknown-user"
        else:
            salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), self.salt, self.iterations)
            client_key = hmac.new(salted, b"Client Key", hash_name).digest()
            stored_key = hashlib.new(hash_name, client_key).digest()
            server_key = hmac.new(salted, b"Server Key", hash_name).digest()
            auth = f"{s.client_first_bare},{s.server_first},{without_proof}".encode()
            signature = hmac.new(stored_key, auth, hash_name).digest()
            proof = base64.b64decode(proof_attr[2:])
            recovered = bytes(a ^ b for a, b in zip(proof, signature))
            if (
                without_proof != f"c=biws,r={s.nonce}"
                or hashlib.new(hash_name, recovered).digest() != stored_key
            ):
                final = "e=invalid-proof"
            else:
                s.authenticated = True
                self.authenticated.set()
                final = (
                    "v=" + base64.b64encode(hmac.new(server_key, auth, hash_name).digest()).decode()
                )
        if self.server_final_hook is not None:
            final = self.server_final_hook(final)
        # Kafka sends a failed exchange's e= inside the payload with error_code 0 too
        return ok(final.encode())

    def _oauthbearer(self, s: _Session, message: bytes, ok, fail) -> dict:
        """Kafka's OAuthBearerSaslServer: the client initial response's grammar, then the
        token check; a refused token gets a JSON status, and the client's ``\x01`` answer
        to it SASL_AUTHENTICATION_FAILED with that status as the message."""
        if s.oauth_error is not None:
            if message == b"\x01":
                return fail(s.oauth_error)
            return fail("Authentication failed: expected %x01 after the error status")
        try:
            text = message.decode("ascii")
        except UnicodeDecodeError:
            return fail("Invalid OAUTHBEARER client first message: not ASCII")
        match = OAUTH_CLIENT_FIRST.fullmatch(text)
        if match is None:
            return fail("Invalid OAUTHBEARER client first message")
        pairs = dict(kv.split("=", 1) for kv in match.group("kvpairs").split("\x01") if kv)
        auth = OAUTH_AUTH.fullmatch(pairs.pop("auth", ""))
        if auth is None or auth.group("scheme").lower() != "bearer":
            return fail("Invalid OAUTHBEARER client first message: bad auth value")
        token = auth.group("token")
        self.bearer.append((token, pairs))
        status = self.check_token(token, pairs) if self.check_token is not None else None
        if status is not None:
            s.oauth_error = json.dumps(status)
            return ok(s.oauth_error.encode())
        s.authenticated = True
        self.authenticated.set()
        return ok(b"")


# Kafka's OAuthBearerClientInitialResponse grammar, written from its patterns.
OAUTH_CLIENT_FIRST = re.compile(
    r"n,(?:a=(?P<authzid>(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+))?,\x01"
    r"(?P<kvpairs>(?:[A-Za-z]+=[\x21-\x7E \t\r\n]+\x01)*)\x01"
)
OAUTH_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)")


class _Session:
    def __init__(self) -> None:
        self.mechanism: str | None = None
        self.authenticated = False
        self.scram: str | None = None
        self.oauth_error: str | None = None
        self.expires_at: float | None = None  # monotonic end of the SASL session
        self.user = self.nonce = self.client_first_bare = self.server_first = ""
