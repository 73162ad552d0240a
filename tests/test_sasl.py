"""Tests of the sans-IO SASL mechanisms (PLAIN, SCRAM-SHA-256/512) and the JAAS parser."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import AuthenticationError, ConfigError, ProtocolError
from protocol.sasl import (
    DEFAULT_MAX_ITERATIONS,
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    SUPPORTED_MECHANISMS,
    PlainMechanism,
    ScramMechanism,
    escape_saslname,
    mechanism_for,
    parse_jaas_config,
)
from .helpers.secrets import (
    RFC_NONCE,
    RFC_PASSWORD,
    RFC_PROOF,
    RFC_SALT,
    RFC_USER,
    _RFC_SALTED,
    assert_no_secret,
)

RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = f"r={RFC_SERVER_NONCE},s={RFC_SALT},i=4096".encode()
RFC_CLIENT_FINAL = f"c=biws,r={RFC_SERVER_NONCE},p={RFC_PROOF}".encode()
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_mechanism(**kwargs) -> ScramMechanism:
    return ScramMechanism("SCRAM-SHA-256", RFC_USER, RFC_PASSWORD, nonce=RFC_NONCE, **kwargs)


def after_client_first(**kwargs) -> ScramMechanism:
    mech = rfc_mechanism(**kwargs)
    assert mech.client_first() == RFC_CLIENT_FIRST
    return mech


def after_client_final() -> ScramMechanism:
    mech = after_client_first()
    assert mech.client_final(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    return mech


# -- a tiny SCRAM server, written from RFC 5802 independently of the client ---------------


def _hi(hash_name: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    """RFC 5802 Hi(): U1 = HMAC(p, salt + INT(1)), Ui = HMAC(p, U(i-1)), XOR of all U."""
    u = hmac.new(password, salt + b"\x00\x00\x00\x01", hash_name).digest()
    out = int.from_bytes(u, "big")
    for _ in range(iterations - 1):
        u = hmac.new(password, u, hash_name).digest()
        out ^= int.from_bytes(u, "big")
    return out.to_bytes(len(u), "big")


class ScramServer:
    """Server side of one exchange: holds StoredKey/ServerKey only, like a broker."""

    def __init__(
        self,
        hash_name: str,
        username: str,
        password: str,
        *,
        salt: bytes = b"server-salt-1234",
        iterations: int = 4096,
    ) -> None:
        salted = _hi(hash_name, password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", hash_name).digest()
        self.hash_name, self.username = hash_name, username
        self.stored_key = hashlib.new(hash_name, client_key).digest()
        self.server_key = hmac.new(salted, b"Server Key", hash_name).digest()
        self.salt, self.iterations = salt, iterations
        self.authenticated = False

    def server_first(self, client_first: bytes) -> bytes:
        text = client_first.decode()
        assert text.startswith("n,,"), text
        self.client_first_bare = text[3:]
        user_attr, nonce_attr = self.client_first_bare.split(",")
        assert user_attr.startswith("n=") and nonce_attr.startswith("r=")
        user = user_attr[2:].replace("=2C", ",").replace("=3D", "=")
        assert user == self.username
        self.nonce = nonce_attr[2:] + "srv-NONCE_xyz"
        self.server_first_msg = (
            f"r={self.nonce},s={base64.b64encode(self.salt).decode()},i={self.iterations}"
        )
        return self.server_first_msg.encode()

    def server_final(self, client_final: bytes) -> bytes:
        without_proof, _, proof_attr = client_final.decode().rpartition(",")
        assert without_proof == f"c=biws,r={self.nonce}"
        assert proof_attr.startswith("p=")
        proof = base64.b64decode(proof_attr[2:])
        auth = f"{self.client_first_bare},{self.server_first_msg},{without_proof}".encode()
        signature = hmac.new(self.stored_key, auth, self.hash_name).digest()
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if hashlib.new(self.hash_name, client_key).digest() != self.stored_key:
            return b"e=invalid-proof"
        self.authenticated = True
        server_signature = hmac.new(self.server_key, auth, self.hash_name).digest()
        return b"v=" + base64.b64encode(server_signature)


# -- RFC 7677 vector and round trips ------------------------------------------------------


def test_rfc7677_example_exchange():
    mech = rfc_mechanism()
    assert mech.name == "SCRAM-SHA-256"
    assert mech.client_first() == RFC_CLIENT_FIRST
    assert mech.client_final(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    assert not mech.done
    mech.verify_server_final(RFC_SERVER_FINAL)
    assert mech.done
    assert_no_secret(mech)


def test_password_forgotten_after_client_final():
    mech = after_client_final()
    for value in vars(mech).values():
        assert value != RFC_PASSWORD.encode() and value != _RFC_SALTED
    assert_no_secret(mech)


@pytest.mark.parametrize("name", ["SCRAM-SHA-512", "SCRAM-SHA-256"])
@pytest.mark.parametrize("username", ["alice", "we=ird,name", "ünïcødé"])
def test_round_trip_against_independent_server(name, username):
    hash_name = name.split("-", 1)[1].replace("-", "").lower()
    server = ScramServer(hash_name, username, "correct horse ✓")
    mech = ScramMechanism(name, username, "correct horse ✓")
    final = mech.client_final(server.server_first(mech.client_first()))
    mech.verify_server_final(server.server_final(final))
    assert server.authenticated and mech.done


def test_generic_interface_drives_scram():
    server = ScramServer("sha512", "bob", "pw")
    mech = mechanism_for("SCRAM-SHA-512", "bob", "pw")
    reply = mech.respond(server.server_first(mech.initial_response()))
    assert reply is not None
    assert mech.respond(server.server_final(reply)) is None
    assert mech.done and server.authenticated


def test_wrong_password_is_rejected_by_server_and_reported():
    server = ScramServer("sha512", "bob", "right password")
    mech = ScramMechanism("SCRAM-SHA-512", "bob", "wrong password")
    final = mech.client_final(server.server_first(mech.client_first()))
    with pytest.raises(AuthenticationError, match="invalid-proof") as info:
        mech.verify_server_final(server.server_final(final))
    assert not server.authenticated and not mech.done
    assert_no_secret(info.value, mech, secrets=["wrong password", "right password"])


def test_impostor_server_signature_is_rejected():
    """A server that does not know the password cannot forge v=."""
    mech = ScramMechanism("SCRAM-SHA-512", "bob", "s3cret!")
    impostor = ScramServer("sha512", "bob", "guess")
    final = mech.client_final(impostor.server_first(mech.client_first()))
    forged = b"v=" + base64.b64encode(b"\x00" * 64)
    with pytest.raises(AuthenticationError, match="signature does not match") as info:
        mech.verify_server_final(forged)
    assert_no_secret(info.value, mech, secrets=["s3cret!"])
    assert final  # the impostor never learns more than a proof


def test_random_nonce_is_fresh_and_printable():
    first_a = ScramMechanism("SCRAM-SHA-256", "u", "p").client_first()
    first_b = ScramMechanism("SCRAM-SHA-256", "u", "p").client_first()
    assert first_a != first_b
    nonce = first_a.decode().split(",r=")[1]
    assert len(nonce) >= 24 and all(0x21 <= ord(c) <= 0x7E and c != "," for c in nonce)


# -- server-first rejections --------------------------------------------------------------

_S, _N = RFC_SALT, RFC_SERVER_NONCE

SERVER_FIRST_REJECTIONS = [
    # (server-first message, expected error, text expected in the message)
    (f"r=someoneElsesNonce123,s={_S},i=4096", AuthenticationError, "nonce"),
    (f"r=XrOprNGfwEbeRWgbNEkqO123,s={_S},i=4096", AuthenticationError, "nonce"),
    (f"r={RFC_NONCE},s={_S},i=4096", AuthenticationError, "nonce"),  # not longer
    (f"r={RFC_NONCE}abc\x7f,s={_S},i=4096", AuthenticationError, "nonce"),
    (f"r={_N},s={_S},i=1", AuthenticationError, "1 iterations"),
    (f"r={_N},s={_S},i=4095", AuthenticationError, "4095 iterations"),
    (f"r={_N},s={_S},i={10**9}", AuthenticationError, "1000000000 iterations"),
    (f"r={_N},s={_S},i={10**40}", AuthenticationError, "iteration count"),
    (f"r={_N},s={_S},i=0", AuthenticationError, "iteration count"),
    (f"r={_N},s={_S},i=-4096", AuthenticationError, "iteration count"),
    (f"r={_N},s={_S},i=+4096", AuthenticationError, "iteration count"),
    (f"r={_N},s={_S},i= 4096", AuthenticationError, "iteration count"),
    (f"r={_N},s={_S},i=4_096", AuthenticationError, "iteration count"),
    (f"r={_N},s={_S},i=٤٠٩٦", AuthenticationError, "iteration count"),  # Arabic digits
    (f"r={_N},s=W22ZaJ0SNY7soEsUEjb6gQ=,i=4096", AuthenticationError, "base64"),
    (f"r={_N},s=not*base64!,i=4096", AuthenticationError, "base64"),
    (f"r={_N},s=W22Z aJ0S,i=4096", AuthenticationError, "base64"),
    (f"r={_N},s=sälz,i=4096", AuthenticationError, "base64"),
    (f"r={_N},s=====,i=4096", AuthenticationError, "base64"),
    (f"m=ext,r={_N},s={_S},i=4096", AuthenticationError, "mandatory extension"),
    (f"r={_N},s={_S}", AuthenticationError, "exactly the attributes"),  # missing i
    (f"r={_N},i=4096", AuthenticationError, "exactly the attributes"),  # missing s
    (f"s={_S},i=4096", AuthenticationError, "exactly the attributes"),  # missing r
    (f"r={_N},s={_S},i=4096,x=extra", AuthenticationError, "exactly the attributes"),
    (f"r={_N},r={_N},s={_S},i=4096", AuthenticationError, "exactly the attributes"),
    (f"s={_S},r={_N},i=4096", AuthenticationError, "exactly the attributes"),
    ("e=unknown-user", AuthenticationError, "unknown-user"),
    (f"r={_N},s=,i=4096", ProtocolError, "malformed"),
    (f"r={_N},s={_S},i=4096,", ProtocolError, "malformed"),
    (f"r={_N};s={_S};i=4096", AuthenticationError, "exactly the attributes"),
    (f"r={_N},s={_S},i=4096\0", ProtocolError, "NUL"),
    (f"r={_N},s={_S},1=4096", ProtocolError, "malformed"),
    (f"r={_N},s={_S},\u212a=4096", ProtocolError, "malformed"),  # Kelvin sign lowercases to k
    ("", ProtocolError, "empty"),
    ("hello world", ProtocolError, "malformed"),
    (",,,", ProtocolError, "malformed"),
    ("r=" + "a" * 5000, ProtocolError, "too long"),
]


@pytest.mark.parametrize("server_first,error,text", SERVER_FIRST_REJECTIONS)
def test_server_first_rejections(server_first, error, text):
    mech = after_client_first()
    with pytest.raises(error, match=text) as info:
        mech.client_final(server_first.encode())
    assert_no_secret(info.value, mech)
    # After a failure the object is spent.
    with pytest.raises(ConfigError):
        mech.client_final(RFC_SERVER_FIRST)


@pytest.mark.parametrize("garbage", [b"\xff\xfe\xfd", b"\x80r=abc", b"r=\xc3(,s=x,i=1"])
def test_server_first_not_utf8(garbage):
    with pytest.raises(ProtocolError, match="UTF-8"):
        after_client_first().client_final(garbage)


def test_iteration_bounds_are_configurable():
    low = f"r={_N},s={_S},i=10".encode()
    mech = after_client_first(min_iterations=10, max_iterations=10)
    assert mech.client_final(low).startswith(b"c=biws,r=")
    with pytest.raises(AuthenticationError, match=r"\[4097, 100000\]"):
        after_client_first(min_iterations=4097).client_final(RFC_SERVER_FIRST)
    assert DEFAULT_MAX_ITERATIONS == 100_000


# -- server-final rejections --------------------------------------------------------------

_GOOD_SIG = RFC_SERVER_FINAL[2:].decode()
_FLIPPED = base64.b64encode(
    bytes([base64.b64decode(_GOOD_SIG)[0] ^ 1]) + base64.b64decode(_GOOD_SIG)[1:]
).decode()

SERVER_FINAL_REJECTIONS = [
    (f"v={_FLIPPED}", AuthenticationError, "signature does not match"),
    (f"v={_GOOD_SIG[:-4]}", AuthenticationError, "signature does not match"),  # truncated
    ("v=" + base64.b64encode(b"\0" * 32).decode(), AuthenticationError, "does not match"),
    ("v=!!notbase64!!", AuthenticationError, "not valid base64"),
    (f"v={_GOOD_SIG[:-1]}", AuthenticationError, "not valid base64"),
    ("e=invalid-proof", AuthenticationError, "rejected the authentication: 'invalid-proof'"),
    ("e=other-error,x=1", AuthenticationError, "other-error"),
    ("e=" + "z" * 1000, AuthenticationError, r"z\.\.\.'"),
    (f"v={_GOOD_SIG},x=extra", AuthenticationError, "exactly one attribute"),
    (f"x={_GOOD_SIG}", AuthenticationError, "exactly one attribute"),
    (f"r={_N}", AuthenticationError, "exactly one attribute"),
    ("v=", ProtocolError, "malformed"),
    ("", ProtocolError, "empty"),
    ("\x00\x01\x02", ProtocolError, "NUL"),
    ("v", ProtocolError, "malformed"),
]


@pytest.mark.parametrize("server_final,error,text", SERVER_FINAL_REJECTIONS)
def test_server_final_rejections(server_final, error, text):
    mech = after_client_final()
    with pytest.raises(error, match=text) as info:
        mech.verify_server_final(server_final.encode())
    assert not mech.done
    assert_no_secret(info.value, mech)
    with pytest.raises(ConfigError):
        mech.verify_server_final(RFC_SERVER_FINAL)


def test_long_server_error_is_truncated():
    with pytest.raises(AuthenticationError) as info:
        after_client_final().verify_server_final(b"e=" + b"z" * 1000)
    assert len(str(info.value)) < 300


# -- misuse -------------------------------------------------------------------------------


def test_steps_out_of_order_are_config_errors():
    mech = rfc_mechanism()
    with pytest.raises(ConfigError, match="out of order"):
        mech.client_final(RFC_SERVER_FIRST)
    with pytest.raises(ConfigError, match="out of order"):
        mech.verify_server_final(RFC_SERVER_FINAL)
    mech.client_first()
    with pytest.raises(ConfigError, match="out of order"):
        mech.client_first()
    with pytest.raises(ConfigError, match="must be bytes"):
        mech.client_final(RFC_SERVER_FIRST.decode())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs,text",
    [
        ({"mechanism": "SCRAM-SHA-1"}, "SCRAM-SHA-256, SCRAM-SHA-512"),
        ({"username": ""}, "username"),
        ({"username": "a\0b"}, "NUL"),
        ({"password": ""}, "empty"),
        ({"password": 1234}, "str or bytes"),
        ({"nonce": "has,comma"}, "nonce"),
        ({"nonce": ""}, "nonce"),
        ({"nonce": "späce"}, "nonce"),
        ({"min_iterations": 0}, "min_iterations"),
        ({"max_iterations": 1.5}, "max_iterations"),
        ({"min_iterations": 10, "max_iterations": 5}, "exceeds"),
    ],
)
def test_scram_constructor_rejects_bad_options(kwargs, text):
    args = {"mechanism": "SCRAM-SHA-256", "username": "u", "password": "pencil", **kwargs}
    with pytest.raises(ConfigError, match=text) as info:
        ScramMechanism(args.pop("mechanism"), args.pop("username"), args.pop("password"), **args)
    assert_no_secret(info.value)


def test_saslname_escaping():
    assert escape_saslname("plain") == "plain"
    assert escape_saslname("a=b,c") == "a=3Db=2Cc"
    assert escape_saslname("=,=") == "=3D=2C=3D"
    mech = ScramMechanism("SCRAM-SHA-256", "us=er,x", "p", nonce="abc")
    assert mech.client_first() == b"n,,n=us=3Der=2Cx,r=abc"


@given(st.text(min_size=1).filter(lambda s: "\0" not in s))
def test_saslname_escaping_round_trips(username):
    first = ScramMechanism("SCRAM-SHA-256", username, "p", nonce="n").client_first().decode()
    assert first.startswith("n,,n=") and first.endswith(",r=n")
    escaped = first[len("n,,n=") : -len(",r=n")]
    assert "," not in escaped
    assert escaped.replace("=2C", ",").replace("=3D", "=") == username


def test_repr_hides_password():
    for mech in (
        rfc_mechanism(),
        PlainMechanism("user", "pencil"),
        mechanism_for("SCRAM-SHA-512", "user", b"pencil"),
    ):
        assert "pencil" not in repr(mech) and "pencil" not in str(mech)
        assert "user" in repr(mech)


# -- PLAIN --------------------------------------------------------------------------------


def test_plain_bytes_and_completion():
    mech = PlainMechanism("alice", "pa ss✓")
    assert mech.name == "PLAIN" and not mech.done
    assert mech.initial_response() == b"\0alice\0pa ss\xe2\x9c\x93"
    assert mech.respond(b"") is None and mech.done
    assert "pa ss" not in repr(mech)


def test_plain_misuse_and_unexpected_challenge():
    mech = PlainMechanism("alice", b"secret")
    with pytest.raises(ConfigError):
        mech.respond(b"")
    mech.initial_response()
    with pytest.raises(ConfigError):
        mech.initial_response()
    with pytest.raises(ProtocolError, match="unexpected 3-byte challenge"):
        mech.respond(b"abc")
    assert not mech.done


@pytest.mark.parametrize(
    "username,password,text",
    [
        ("", "pw-secret", "username"),
        ("a\0b", "pw-secret", "NUL"),
        ("alice", "pw\0secret", "NUL"),
        ("alice", "", "empty"),
        ("alice", None, "str or bytes"),
    ],
)
def test_plain_rejects_bad_credentials(username, password, text):
    with pytest.raises(ConfigError, match=text) as info:
        PlainMechanism(username, password)
    assert_no_secret(info.value, secrets=["pw-secret", "secret"])


# -- mechanism_for ------------------------------------------------------------------------


def test_mechanism_for_known_names():
    assert isinstance(mechanism_for("PLAIN", "u", "p"), PlainMechanism)
    scram = mechanism_for(" scram-sha-256 ", "u", "p")
    assert isinstance(scram, ScramMechanism) and scram.name == "SCRAM-SHA-256"
    assert mechanism_for("SCRAM-SHA-512", "u", "p").name == "SCRAM-SHA-512"
    assert SUPPORTED_MECHANISMS == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@pytest.mark.parametrize("name", ["GSSAPI", "OAUTHBEARER", "SCRAM-SHA-1", "", None])
def test_mechanism_for_unknown_name(name):
    with pytest.raises(ConfigError, match="PLAIN, SCRAM-SHA-256, SCRAM-SHA-512") as info:
        mechanism_for(name, "u", "topsecret")  # type: ignore[arg-type]
    assert_no_secret(info.value, secrets=["topsecret"])


# -- JAAS ---------------------------------------------------------------------------------


def test_jaas_plain():
    text = f'{PLAIN_LOGIN_MODULE} required username="alice" password="alice-secret";'
    assert parse_jaas_config(text) == ("alice", "alice-secret", PLAIN_LOGIN_MODULE)


def test_jaas_scram_with_whitespace_other_options_and_bare_words():
    text = (
        f"\n  {SCRAM_LOGIN_MODULE}\n    REQUIRED\n    username=bob\n"
        '    tokenauth="false"\n    password = "p;a=s s"  ;  \n'
    )
    assert parse_jaas_config(text) == ("bob", "p;a=s s", SCRAM_LOGIN_MODULE)


def test_jaas_escaped_quotes_and_backslashes():
    text = (
        f'{PLAIN_LOGIN_MODULE} required username="a\\"b" '
        'password="say \\"hi\\" \\\\ back\\\\slash";'
    )
    assert parse_jaas_config(text) == ('a"b', 'say "hi" \\ back\\slash', PLAIN_LOGIN_MODULE)


def test_jaas_single_quotes_as_confluent_writes_them():
    """Java's JaasConfig takes '...' as well as "..." (Confluent's examples use '...')."""
    text = f"{PLAIN_LOGIN_MODULE} required username='alice' password='it\\'s \"x\"';"
    assert parse_jaas_config(text) == ("alice", 'it\'s "x"', PLAIN_LOGIN_MODULE)


@given(st.text(min_size=1))
def test_jaas_quoted_password_round_trips(password):
    quoted = password.replace("\\", "\\\\").replace('"', '\\"')
    text = f'{SCRAM_LOGIN_MODULE} optional username="u" password="{quoted}";'
    assert parse_jaas_config(text) == ("u", password, SCRAM_LOGIN_MODULE)


JAAS_SECRET = "hunter2-Secret"

BAD_JAAS = [
    ("", "empty"),
    ("   ", "empty"),
    (f'{PLAIN_LOGIN_MODULE} required username="u" password="{JAAS_SECRET}"', "';'"),
    (f'{PLAIN_LOGIN_MODULE} username="u" password="{JAAS_SECRET}";', "control flag"),
    (f'{PLAIN_LOGIN_MODULE} mandatory username="u" password="{JAAS_SECRET}";', "control flag"),
    (f'{PLAIN_LOGIN_MODULE} required username="u";', "password option is missing"),
    (f'{PLAIN_LOGIN_MODULE} required password="{JAAS_SECRET}";', "username option"),
    (f'{PLAIN_LOGIN_MODULE} required username="" password="{JAAS_SECRET}";', "username"),
    (f'{PLAIN_LOGIN_MODULE} required username="u" password="{JAAS_SECRET};', "unterminated"),
    (f'{PLAIN_LOGIN_MODULE} required username="u" password={JAAS_SECRET} x;', "'='"),
    (f'{PLAIN_LOGIN_MODULE} required username="u" password=hun ter2-Secret;', "'='"),
    (
        f'{PLAIN_LOGIN_MODULE} required username="u" password="{JAAS_SECRET}" '
        f'password="{JAAS_SECRET}";',
        "twice",
    ),
    (
        f'{PLAIN_LOGIN_MODULE} required username="u" password="{JAAS_SECRET}"; '
        f'{PLAIN_LOGIN_MODULE} required username="v" password="w";',
        "one login module",
    ),
    (f'{PLAIN_LOGIN_MODULE} required username="u" password=;', "option value"),
    (f'"quoted.Module" required username="u" password="{JAAS_SECRET}";', "class name"),
    (f'{PLAIN_LOGIN_MODULE} required username="u" ="{JAAS_SECRET}";', "option name"),
]


@pytest.mark.parametrize("text,message", BAD_JAAS)
def test_jaas_bad_input(text, message):
    with pytest.raises(ConfigError, match=message) as info:
        parse_jaas_config(text)
    assert "kafka.sasl.jaas.config" in str(info.value)
    assert_no_secret(info.value, secrets=[JAAS_SECRET, "hunter2", "ter2-Secret"])


def test_jaas_rejects_non_string():
    with pytest.raises(ConfigError, match="must be a string"):
        parse_jaas_config(None)  # type: ignore[arg-type]


@given(st.text())
def test_jaas_garbage_only_raises_config_error(text):
    try:
        parse_jaas_config(text)
    except ConfigError:
        pass


# -- fuzzing the server messages ----------------------------------------------------------

_TYPED = (AuthenticationError, ProtocolError)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_garbage_server_first_only_raises_typed_errors(data):
    mech = after_client_first()
    try:
        mech.client_final(data)
    except _TYPED as exc:
        assert_no_secret(exc)


_attr_value = st.text(st.characters(blacklist_characters=",", codec="utf-8"), max_size=20)
_attribute = st.builds("{}={}".format, st.sampled_from("rsimevpxR"), _attr_value)


@settings(max_examples=300, deadline=None)
@given(st.lists(_attribute, min_size=1, max_size=5))
def test_attribute_shaped_server_first_only_raises_typed_errors(attributes):
    mech = after_client_first(max_iterations=5000)
    try:
        mech.client_final(",".join(attributes).encode())
    except _TYPED as exc:
        assert_no_secret(exc)


@settings(max_examples=200, deadline=None)
@given(suffix=_attr_value, salt=_attr_value, iterations=_attr_value)
def test_plausible_server_first_only_raises_typed_errors(suffix, salt, iterations):
    """Close to valid, so the deeper checks (nonce, salt, count) are exercised."""
    mech = after_client_first(max_iterations=5000)
    message = f"r={RFC_NONCE}{suffix},s={salt},i={iterations}"
    try:
        reply = mech.client_final(message.encode())
    except _TYPED as exc:
        assert_no_secret(exc)
    else:
        assert reply.startswith(f"c=biws,r={RFC_NONCE}{suffix},p=".encode())


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=200),
        st.lists(_attribute, min_size=1, max_size=3).map(lambda a: ",".join(a).encode()),
    )
)
def test_garbage_server_final_only_raises_typed_errors(data):
    mech = after_client_final()
    with pytest.raises(_TYPED) as info:
        mech.verify_server_final(data)
    assert_no_secret(info.value)
