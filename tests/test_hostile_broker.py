"""A hostile broker on a SASL_PLAINTEXT listener (``tests.helpers.fake_sasl_broker``), driving the
real ``BrokerConnection``: frame sizes, counts and lengths near 2**31 in the answers to
ApiVersions, SaslHandshake, SaslAuthenticate and Metadata, and SCRAM servers that cheat
(iteration counts out of bounds, a nonce that does not extend ours, a bad or missing
server signature, errors dressed as success). Each is refused with a typed error within a
second, allocating little, the socket closed, and the password nowhere: not in the error,
its chain, its repr, nor the log (DEBUG).

``tests/test_hostile_peer.py`` covers the same before SASL (huge and negative frames,
array counts beyond the bytes, long varints, wrong correlation ids, stalls).
"""

from __future__ import annotations

import logging
import struct
import time
import tracemalloc

import pytest

from protocol.config import ClientConfig
from protocol.client.connection import BrokerConnection
from protocol.errors import AuthenticationError, ProtocolError, PyKafkaError

from .helpers.fake_sasl_broker import FakeSaslBroker
from .helpers.reliability_report import record
from .helpers.secrets import assert_no_secret

USER, PASSWORD = "alice", "Pa55-\u00e9-s3cr3t-XYZ"
_FIGURES: dict[str, list] = {"frames": [], "scram": []}


@pytest.fixture(scope="module", autouse=True)
def figures():
    yield
    for kind, rows in _FIGURES.items():
        if rows:
            record(
                f"hostile/{kind}",
                section="hostile",
                what={
                    "frames": "hostile frame sizes, counts and lengths near 2**31 "
                    "during SASL and after it",
                    "scram": "cheating SCRAM servers (iterations, nonce, signature, "
                    "errors as success)",
                }[kind],
                faults=len(rows),
                seconds=sum(r[0] for r in rows),
                slowest_ms=round(max(r[0] for r in rows) * 1000, 1),
                max_peak_kb=max(r[1] for r in rows) // 1024,
                password_leaks=sum(r[2] for r in rows),
            )


def config(mechanism: str = "SCRAM-SHA-256", **kw) -> ClientConfig:
    return ClientConfig(
        bootstrap_servers=["unused:1"],
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_username=USER,
        sasl_password=PASSWORD,
        # far beyond the seconds a refusal may take: "refused at once" and "waited for
        # the request timeout" stay apart on a loaded machine
        request_timeout_ms=20_000,
        **kw,
    )


def expect_refusal(
    fake: FakeSaslBroker, cfg: ClientConfig, error, match: str, kind: str, caplog
) -> PyKafkaError:
    """Connect (ApiVersions, SASL, then Metadata if authentication passes) and check the
    refusal: the typed error, under a second, under 4 MB, socket closed, no password."""
    from protocol.schemas import METADATA

    conn = BrokerConnection("127.0.0.1", fake.port, cfg)
    caplog.set_level(logging.DEBUG)
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(error, match=match or None) as info:
            conn.connect()
            conn.request(
                METADATA,
                {
                    "topics": None,
                    "allow_auto_topic_creation": False,
                    "include_cluster_authorized_operations": False,
                    "include_topic_authorized_operations": False,
                },
            )
        elapsed = time.monotonic() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    leaked = any(PASSWORD in t for t in (str(info.value), repr(info.value), caplog.text))
    _FIGURES[kind].append((elapsed, peak, leaked))
    assert elapsed < 10, f"took {elapsed:.2f} s"
    assert peak < 4 * 1024 * 1024, f"allocated {peak} bytes"
    assert not conn.connected
    assert fake.closed_by_client.wait(10), "the client did not close the connection"
    assert_no_secret(info.value, conn, secrets=[PASSWORD])
    assert PASSWORD not in caplog.text
    return info.value


# ---- frames near 2**31 ---------------------------------------------------------------------


def _frame(cid: int, body: bytes, flexible_header: bool = False) -> bytes:
    payload = struct.pack(">i", cid) + (b"\x00" if flexible_header else b"") + body
    return struct.pack(">i", len(payload)) + payload


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


_OK = b"\x00\x00"  # error_code 0
# (api key answered, raw answer given the correlation id)
HOSTILE_FRAMES = {
    "frame size 2**31-1 answering SaslHandshake": (
        17,
        lambda cid: struct.pack(">i", 0x7FFFFFFF) + struct.pack(">i", cid) + _OK,
    ),
    "frame size -2**31 answering SaslHandshake": (
        17,
        lambda cid: struct.pack(">i", -0x80000000) + struct.pack(">i", cid),
    ),
    "frame size one over max_response_size": (
        17,
        lambda cid: struct.pack(">i", (1 << 20) + 1) + struct.pack(">i", cid),
    ),
    "SaslHandshake mechanisms count 2**31-1": (
        17,
        lambda cid: _frame(cid, _OK + struct.pack(">i", 0x7FFFFFFF) + b"\x00\x05PLAIN"),
    ),
    "SaslHandshake mechanisms count -2": (17, lambda cid: _frame(cid, _OK + struct.pack(">i", -2))),
    "SaslHandshake mechanism string length 32767": (
        17,
        lambda cid: _frame(cid, _OK + struct.pack(">ih", 1, 0x7FFF) + b"PLAIN"),
    ),
    "SaslHandshake mechanism string length -2": (
        17,
        lambda cid: _frame(cid, _OK + struct.pack(">ih", 1, -2)),
    ),
    "SaslAuthenticate v2 auth_bytes length 2**32-1 (5-byte varint)": (
        36,
        lambda cid: _frame(
            cid, _OK + b"\x00" + _uvarint(0xFFFFFFFF) + b"r=x", flexible_header=True
        ),
    ),
    "SaslAuthenticate v2 auth_bytes length 2**31 (varint)": (
        36,
        lambda cid: _frame(
            cid, _OK + b"\x00" + _uvarint(0x80000000) + b"r=x", flexible_header=True
        ),
    ),
    "SaslAuthenticate v2 error_message length 2**31-2": (
        36,
        lambda cid: _frame(cid, b"\x00\x3a" + _uvarint(0x7FFFFFFF) + b"oops", flexible_header=True),
    ),
    "SaslAuthenticate v2 tagged-field count 2**31-1": (
        36,
        lambda cid: _frame(
            cid, _OK + b"\x00\x01\x00" + b"\x00" * 8 + _uvarint(0x7FFFFFFF), flexible_header=True
        ),
    ),
    "SaslAuthenticate v2 header tagged field size 2**31-1": (
        36,
        lambda cid: (
            struct.pack(">i", 16)
            + struct.pack(">i", cid)
            + b"\x01\x00"
            + _uvarint(0x7FFFFFFF)
            + b"\x00" * 5
        ),
    ),
    "Metadata v12 brokers count 2**31-1 (varint) after authentication": (
        3,
        lambda cid: _frame(
            cid, b"\x00\x00\x00\x00" + _uvarint(0x7FFFFFFF) + b"\x02", flexible_header=True
        ),
    ),
    "Metadata v12 broker host length 2**31-1 after authentication": (
        3,
        lambda cid: _frame(
            cid,
            b"\x00\x00\x00\x00" + b"\x02" + b"\x00\x00\x00\x01" + _uvarint(0x7FFFFFFF) + b"h",
            flexible_header=True,
        ),
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_FRAMES))
def test_hostile_frames_in_the_sasl_exchange_and_after(case, caplog):
    api_key, answer = HOSTILE_FRAMES[case]
    served = {"done": False}

    def reply(key, cid, frame):
        if key == api_key and not served["done"]:
            served["done"] = True
            return answer(cid)
        return None

    with FakeSaslBroker({USER: PASSWORD}, reply=reply) as fake:
        expect_refusal(fake, config(max_response_size=1 << 20), ProtocolError, "", "frames", caplog)
        assert served["done"]


# ---- cheating SCRAM servers ----------------------------------------------------------------


def _set_iterations(n):
    return lambda message, nonce: message.rsplit(",i=", 1)[0] + f",i={n}"


SCRAM_CASES = {
    "1 iteration": (dict(server_first=_set_iterations(1)), AuthenticationError, "iteration"),
    "4095 iterations": (dict(server_first=_set_iterations(4095)), AuthenticationError, "iteration"),
    "2**31-1 iterations": (
        dict(server_first=_set_iterations(2**31 - 1)),
        AuthenticationError,
        "iteration",
    ),
    "10**40 iterations": (
        dict(server_first=_set_iterations(10**40)),
        AuthenticationError,
        "iteration",
    ),
    "nonce that does not extend ours": (
        dict(server_first=lambda m, nonce: m.replace(f"r={nonce}", "r=someoneElsesNonce")),
        AuthenticationError,
        "nonce",
    ),
    "nonce equal to ours (no server part)": (
        dict(server_first=lambda m, nonce: m.replace("Fk3-server-part", "")),
        AuthenticationError,
        "nonce",
    ),
    "bad server signature": (
        dict(server_final=lambda f: "v=" + "A" * 43 + "="),
        AuthenticationError,
        "signature",
    ),
    "server signature of another password": (
        dict(server_final=lambda f: "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
        AuthenticationError,
        "signature",
    ),
    "no server-final at all": (dict(server_final=lambda f: ""), ProtocolError, "empty"),
    "e=invalid-proof with error_code 0 (Tansu's way)": (
        dict(server_final=lambda f: "e=invalid-proof"),
        AuthenticationError,
        "invalid-proof",
    ),
    "server-final that is not SCRAM": (
        dict(server_final=lambda f: "\xff\xfe garbage"),
        ProtocolError,
        "malformed|UTF-8",
    ),
    "salt that is not base64": (
        dict(server_first=lambda m, nonce: m.replace(",s=", ",s=*")),
        AuthenticationError,
        "base64",
    ),
    "SaslAuthenticate error echoing the client's token": (
        dict(auth_error=lambda token: "rejected " + token.decode("utf-8", "replace")),
        AuthenticationError,
        "rejected",
    ),
}


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("case", sorted(SCRAM_CASES))
def test_cheating_scram_servers_are_refused(case, mechanism, caplog):
    hooks, error, match = SCRAM_CASES[case]
    with FakeSaslBroker({USER: PASSWORD}, **hooks) as fake:
        expect_refusal(fake, config(mechanism), error, match, "scram", caplog)
        assert 3 not in fake.requests, "a Metadata request went out on a refused connection"


def test_plain_broker_echoing_the_password_in_its_error_is_redacted(caplog):
    """PLAIN sends the password to the broker; one that puts it back in its error message
    does not get it into our exception or log."""
    with FakeSaslBroker(
        {USER: "other"},
        mechanisms=("PLAIN",),
        auth_error=lambda token: f"bad credentials {token!r} {token.decode('utf-8', 'replace')}",
    ) as fake:
        err = expect_refusal(
            fake, config("PLAIN"), AuthenticationError, "bad credentials", "scram", caplog
        )
        assert "******" in str(err)


def test_unknown_mechanism_is_refused_naming_what_the_broker_offers(caplog):
    with FakeSaslBroker({USER: PASSWORD}, mechanisms=("SCRAM-SHA-512",)) as fake:
        err = expect_refusal(
            fake, config("SCRAM-SHA-256"), AuthenticationError, "SCRAM-SHA-512", "scram", caplog
        )
        assert "SCRAM-SHA-256" in str(err)
