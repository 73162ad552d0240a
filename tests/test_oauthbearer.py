"""SASL/OAUTHBEARER: the client initial response in Kafka's grammar, the failure flow, the
token sources that need no network (unsecured, file, callable), the per-process cache with
Kafka's refresh rules, and re-authentication before a session's end.

The sign-ins run on Apache Kafka (the sign-in cluster, ``tests/helpers/signin_cluster.py``): its
SASL listener's unsecured validator takes the unsigned tokens of these sources and ends
every session after 3 s; its OAUTH listener's JWKS validator refuses them. What the client
sent (token, extensions) is read back from its client initial response (``sent``). The
OIDC issuer and signed tokens are in ``tests/test_oauth_oidc.py`` and
``tests/test_kafka_signin.py``.
"""

from __future__ import annotations

import json
import logging
import os
import random
import sys
import time

import pytest

from kafka_common.oauth.sources import TokenFile
from kafka_common.oauth.tokens import (
    TOKEN_CACHE,
    BearerToken,
    RefreshPolicy,
    TokenCache,
    jwt_claims,
)
from kafka_source.options import parse_reader_options
from protocol.client.cluster import KafkaClient
from protocol.config import Secret
from protocol.client.connection import BrokerConnection
from protocol.errors import AuthenticationError, ConfigError, ProtocolError
from protocol.sasl_oauthbearer import OAuthBearerMechanism, client_initial_response
from protocol.schemas import METADATA

from .helpers.fake_sasl_broker import OAUTH_CLIENT_FIRST
from .helpers.secrets import assert_no_secret
from .helpers.trust_env import allow_callbacks, allow_urls
from .helpers.tokens import jwt
from .helpers.waiting import wait_until

MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"


@pytest.fixture(autouse=True)
def fresh_cache():
    TOKEN_CACHE.clear()
    yield
    TOKEN_CACHE.clear()


def config(bootstrap: str, **options):
    base = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": "t",
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "OAUTHBEARER",
        "kafka.request.timeout.ms": "3000",
    }
    base.update(options)
    return parse_reader_options(base).client_config


# ---- the mechanism ------------------------------------------------------------------------


def test_client_initial_response_is_kafkas_grammar():
    message = client_initial_response(
        "a.b-c_d", {"logicalCluster": "lkc-1", "identityPoolId": "pool-2"}
    )
    assert message == (
        b"n,,\x01auth=Bearer a.b-c_d\x01logicalCluster=lkc-1\x01identityPoolId=pool-2\x01\x01"
    )
    assert OAUTH_CLIENT_FIRST.fullmatch(message.decode())
    assert client_initial_response("t") == b"n,,\x01auth=Bearer t\x01\x01"


@pytest.mark.parametrize("token", ["", "has space", "plus+slash/", "t\x01", "é"])
def test_bad_tokens_are_refused_before_sending_without_quoting_them(token):
    with pytest.raises(ConfigError) as info:
        OAuthBearerMechanism(token)
    if len(token) > 1:
        assert token not in str(info.value)


@pytest.mark.parametrize(
    "extensions, word",
    [
        ({"auth": "x"}, "reserved"),
        ({"bad-key": "x"}, "letters"),
        ({"k1": "x"}, "letters"),
        ({"k": ""}, "value"),
        ({"k": "a\x01b"}, "value"),
        ({"k": 1}, "value"),
    ],
)
def test_bad_extensions_are_refused(extensions, word):
    with pytest.raises(ConfigError, match=word):
        OAuthBearerMechanism("tok", extensions)


def test_failure_flow_answers_ctrl_a_and_keeps_the_status():
    mech = OAuthBearerMechanism("secret.token", hint="kafka.sasl.jaas.config")
    mech.initial_response()
    assert mech.respond(b'{"status":"invalid_token","scope":"kafka"}') == b"\x01"
    assert mech.failed and mech.server_status == {"status": "invalid_token", "scope": "kafka"}
    text = mech.failure_text()
    assert "invalid_token" in text and "kafka.sasl.jaas.config" in text
    assert "secret.token" not in repr(mech) + text
    with pytest.raises(AuthenticationError):
        mech.respond(b"")  # a broker that refused then pretends success


@pytest.mark.parametrize(
    "challenge", [b"\xff", b"not json", b"[1]", b'{"a": 1}', b"{" + b" " * 9000 + b"}"]
)
def test_a_hostile_challenge_is_a_protocol_error(challenge):
    mech = OAuthBearerMechanism("tok")
    mech.initial_response()
    with pytest.raises(ProtocolError):
        mech.respond(challenge)


# ---- end to end on Apache Kafka --------------------------------------------------------------


@pytest.fixture
def sent(monkeypatch) -> list[tuple[str, dict]]:
    """``(token, extensions)`` of every OAUTHBEARER sign-in the client makes from now on,
    read back from the client initial response it sends."""
    record = []
    original = OAuthBearerMechanism.initial_response

    def recording(self):
        message = original(self)
        match = OAUTH_CLIENT_FIRST.fullmatch(message.decode())
        pairs = dict(kv.split("=", 1) for kv in match.group("kvpairs").split("\x01") if kv)
        record.append((pairs.pop("auth").removeprefix("Bearer "), pairs))
        return message

    monkeypatch.setattr(OAuthBearerMechanism, "initial_response", recording)
    return record


def unsecured_jwt(claims: dict) -> str:
    """A token Kafka's unsecured validator takes: ``alg: none``, an empty signature, and
    ``sub`` and ``exp`` (seconds) among ``claims``."""
    return jwt({"iat": int(time.time()), **claims})[: -len("sig")]


def sasl_listener(signin_kafka) -> tuple[str, int]:
    host, port = signin_kafka.listener("SASL").split(":")
    return host, int(port)


def test_unsecured_token_signs_in_with_extensions(signin_kafka, sent):
    """Kafka's default handler: an alg-none JWS from unsecuredLoginStringClaim_sub, which
    Kafka's unsecured validator takes (with the extension, which it accepts unchecked)."""
    jaas = (
        f'{MODULE} required unsecuredLoginStringClaim_sub="alice" '
        'unsecuredLoginNumberClaim_n="7" extension_logicalCluster="lkc-1";'
    )
    with BrokerConnection(
        *sasl_listener(signin_kafka),
        config(signin_kafka.listener("SASL"), **{"kafka.sasl.jaas.config": jaas}),
    ) as conn:
        assert conn.session_lifetime_ms == 3000  # signed in, for the listener's session
    ((token, extensions),) = sent
    assert extensions == {"logicalCluster": "lkc-1"}
    header, claims = (
        json.loads(__import__("base64").urlsafe_b64decode(p + "==")) for p in token.split(".")[:2]
    )
    assert header == {"alg": "none"} and token.endswith(".")
    assert claims["sub"] == "alice" and claims["n"] == 7
    assert 3590 <= claims["exp"] - claims["iat"] <= 3600


def test_refused_token_shows_the_status_and_option_never_the_token(
    signin_kafka, caplog, tmp_path, monkeypatch
):
    """An unsigned token from a file at the OAUTH listener, whose JWKS validator refuses
    it: Kafka's status, the option the token came from, never the token."""
    caplog.set_level(logging.DEBUG)
    token = unsecured_jwt({"sub": "alice", "exp": int(time.time()) + 3600})
    path = tmp_path / "token.jwt"
    path.write_text(token)
    allow_urls(monkeypatch, path.as_uri())
    cfg = config(
        signin_kafka.listener("OAUTH"),
        **{
            "kafka.sasl.jaas.config": f"{MODULE} required;",
            "kafka.sasl.login.callback.handler.class": HANDLER,
            "kafka.sasl.oauthbearer.token.endpoint.url": path.as_uri(),
        },
    )
    with pytest.raises(AuthenticationError) as info:
        KafkaClient(cfg).refresh_metadata()
    message = str(info.value)
    assert '"status": "invalid_token"' in message and "token.endpoint.url" in message
    assert_no_secret(info.value, secrets=[token])
    assert token not in caplog.text


def test_token_file_is_read_again_when_it_changes(signin_kafka, tmp_path, monkeypatch, sent):
    path = tmp_path / "token.jwt"
    allow_urls(monkeypatch, path.as_uri())
    first = unsecured_jwt({"sub": "alice", "exp": int(time.time()) + 3600})
    second = unsecured_jwt({"sub": "bob", "exp": int(time.time()) + 7200})
    path.write_text(first + "\n")
    cfg = config(
        signin_kafka.listener("SASL"),
        **{
            "kafka.sasl.jaas.config": f"{MODULE} required;",
            "kafka.sasl.login.callback.handler.class": "kafkashaded." + HANDLER,
            "kafka.sasl.oauthbearer.token.endpoint.url": path.as_uri(),
        },
    )
    for expected in (first, first, second):
        if expected is second:
            path.write_text(second)
            os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
        with BrokerConnection(*sasl_listener(signin_kafka), cfg) as conn:
            assert conn.session_lifetime_ms == 3000  # Kafka took the token
        assert sent[-1][0] == expected


def token_callback(config_string):
    """A confluent-kafka oauth_cb: (token, expiry, principal, extensions)."""
    token_callback.calls.append(config_string)
    expiry = time.time() + 3600
    return (
        unsecured_jwt({"sub": "cb", "n": len(token_callback.calls), "exp": int(expiry)}),
        expiry,
        "cb",
        {"identityPoolId": "pool-9"},
    )


token_callback.calls = []


def test_python_callable_gives_the_token_and_extensions(signin_kafka, monkeypatch, sent):
    token_callback.calls.clear()
    allow_callbacks(monkeypatch, f"{__name__}:token_callback")
    cfg = config(
        signin_kafka.listener("SASL"),
        **{
            "kafka.sasl.login.callback.handler.class": f"{__name__}:token_callback",
            "kafka.sasl.oauthbearer.config": "scope=kafka",
            "kafka.sasl.jaas.config": f'{MODULE} required extension_logicalCluster="lkc";',
        },
    )
    assert "scope=kafka" not in repr(cfg)
    for _ in range(2):
        with BrokerConnection(*sasl_listener(signin_kafka), cfg) as conn:
            assert conn.session_lifetime_ms == 3000
    assert token_callback.calls == ["scope=kafka"]  # cached in the process
    assert [e for _, e in sent] == [{"logicalCluster": "lkc", "identityPoolId": "pool-9"}] * 2


@pytest.mark.parametrize(
    "options, words",
    [
        ({"kafka.sasl.login.callback.handler.class": "no_such_module_xyz:f"}, "cannot import"),
        ({"kafka.sasl.login.callback.handler.class": "os:no_such_function"}, "has no"),
        ({"kafka.sasl.login.callback.handler.class": "os:getcwd"}, "PYKAFKA_ALLOWED_CALLBACKS"),
        (
            {
                "kafka.sasl.login.callback.handler.class": HANDLER,
                "kafka.sasl.oauthbearer.token.endpoint.url": "https://elsewhere.example/token",
                "kafka.sasl.jaas.config": f'{MODULE} required clientId="c" clientSecret="s";',
            },
            "PYKAFKA_ALLOWED_URLS",
        ),
        ({"kafka.sasl.login.callback.handler.class": "com.example.MyHandler"}, "not implemented"),
        ({"kafka.sasl.login.callback.handler.class": HANDLER}, "token.endpoint.url"),
        (
            {
                "kafka.sasl.login.callback.handler.class": HANDLER,
                "kafka.sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
                "kafka.sasl.jaas.config": f'{MODULE} required clientId="c";',
            },
            "clientSecret",
        ),
        ({"kafka.sasl.jaas.config": f"{MODULE} required;"}, "unsecuredLoginStringClaim_sub"),
        (
            {
                "kafka.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                'required username="u" password="Sup3r-secret";'
            },
            "OAuthBearerLoginModule",
        ),
    ],
)
def test_option_errors_come_before_any_connection(options, words, monkeypatch):
    allow_callbacks(monkeypatch, "no_such_module_xyz:f", "os:no_such_function")
    allow_urls(monkeypatch, "https://idp.example/token")
    with pytest.raises(ConfigError, match=words) as info:
        config("127.0.0.1:1", **options)
    assert "Sup3r-secret" not in str(info.value)


def test_plaintext_warns_and_client_secret_stays_out_of_reprs(caplog, monkeypatch):
    from kafka_common import option_map

    monkeypatch.setattr(option_map, "_warned", set())  # warned once per process
    caplog.set_level(logging.WARNING)
    allow_urls(monkeypatch, "https://idp.example/token")
    cfg = config(
        "127.0.0.1:1",
        **{
            "kafka.sasl.login.callback.handler.class": HANDLER,
            "kafka.sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
            "kafka.sasl.jaas.config": f'{MODULE} required clientId="c" clientSecret="S3cr3t-X" '
            'scope="kafka";',
        },
    )
    assert "S3cr3t-X" not in repr(cfg) and "S3cr3t-X" not in repr(cfg.sasl_mechanism_factory)
    assert "sends the token in the clear" in caplog.text


# ---- the cache and Kafka's refresh rules --------------------------------------------------


class _Counting:
    cache_key = "counting"

    def __init__(self, lifetime: float, clock):
        self.lifetime, self.clock, self.fetched = lifetime, clock, 0

    def changed(self):
        return False

    def describe(self):
        return "counting"

    def fetch(self):
        self.fetched += 1
        now = self.clock()
        return BearerToken(Secret(f"t{self.fetched}"), now + self.lifetime, "p", now)


def test_refresh_at_80_percent_with_jitter_min_period_and_buffer():
    policy, rng = RefreshPolicy(), random.Random(1)
    one_hour = BearerToken(Secret("t"), 3600, "p", 0)
    times = [policy.refresh_at(one_hour, 0, rng) for _ in range(200)]
    assert 0.8 * 3600 <= min(times) and max(times) <= 0.85 * 3600  # buffer leaves these
    ten_min = BearerToken(Secret("t"), 600, "p", 0)
    assert policy.refresh_at(ten_min, 0, rng) == 300  # 300 s buffer before expiry
    two_min = BearerToken(Secret("t"), 120, "p", 0)
    assert policy.refresh_at(two_min, 0, rng) == 60  # never sooner than the min period


def test_cache_reuses_then_refreshes():
    now = [1000.0]
    cache = TokenCache(clock=lambda: now[0], rng=random.Random(0))
    source = _Counting(3600, lambda: now[0])
    assert cache.get(source, RefreshPolicy()).value.reveal() == "t1"
    now[0] += 0.79 * 3600
    assert cache.get(source, RefreshPolicy()).value.reveal() == "t1"
    now[0] += 0.07 * 3600
    assert cache.get(source, RefreshPolicy()).value.reveal() == "t2"


def test_jwt_claims_errors_never_quote_the_token(tmp_path, monkeypatch):
    with pytest.raises(ConfigError) as info:
        jwt_claims("abc.%%%.def", "the token file")
    assert "%%%" not in str(info.value)
    path = tmp_path / "t"
    allow_urls(monkeypatch, path.as_uri())
    for content, words in (
        ("", "empty"),
        (jwt({"sub": "a"}), "exp"),
        (jwt({"exp": 1e10}), "'sub' claim"),
    ):
        path.write_text(content)
        with pytest.raises(ConfigError, match=words):
            TokenFile(str(path)).fetch()


# ---- re-authentication (KIP-368) ----------------------------------------------------------


def test_a_long_lived_connection_signs_in_again_with_a_fresh_token(signin_kafka, monkeypatch, sent):
    """Kafka ends sessions after 3 s: the connection signs in again before the end (on
    the same connection, KIP-368) with a new token from the source, and requests keep
    working: a request after the end would have been met by Kafka closing it."""
    counter = iter(range(1, 100))

    def fresh(_config):
        expiry = time.time() + 3600
        return unsecured_jwt({"sub": "r", "n": next(counter), "exp": int(expiry)}), expiry

    monkeypatch.setattr(sys.modules[__name__], "token_fresh", fresh, raising=False)
    allow_callbacks(monkeypatch, f"{__name__}:token_fresh")
    cfg = config(
        signin_kafka.listener("SASL"),
        **{
            "kafka.sasl.login.callback.handler.class": f"{__name__}:token_fresh",
            "kafka.sasl.login.refresh.min.period.seconds": "0",
            "kafka.sasl.login.refresh.buffer.seconds": "3599",
            "kafka.sasl.jaas.config": f"{MODULE} required;",
        },
    )
    with BrokerConnection(*sasl_listener(signin_kafka), cfg) as conn:
        sock = conn.wait_handle()

        def renewed_twice() -> bool:  # a request at a time, until the third token went out
            response = conn.request(
                METADATA, {"topics": None, "allow_auto_topic_creation": False}, version=1
            )
            assert response["brokers"]
            return len(sent) >= 3

        wait_until(renewed_twice, 20, lambda: f"three tokens sent ({len(sent)})", interval=0.2)
        assert conn.wait_handle() is sock  # never cut: renewed before each end
    tokens = [t for t, _ in sent]
    assert len(tokens) == 3 and len(set(tokens)) == 3


# ---- Google Managed Kafka's token shape ---------------------------------------------------


def test_google_token_shape_fits_kafkas_grammar():
    from kafka_common.oauth.google import token_value

    value = token_value(
        "ya29.a0Af-x_y", 1_800_000_000, "sa@p.iam.gserviceaccount.com", 1_799_996_400
    )
    header, claims, access = value.split(".")

    def decode(part):
        return __import__("base64").urlsafe_b64decode(part + "=" * (-len(part) % 4))

    assert json.loads(decode(header)) == {"typ": "JWT", "alg": "GOOG_OAUTH2_TOKEN"}
    assert json.loads(decode(claims)) == {
        "exp": 1_800_000_000,
        "iat": 1_799_996_400,
        "iss": "Google",
        "scope": "kafka",
        "sub": "sa@p.iam.gserviceaccount.com",
    }
    assert decode(access) == b"ya29.a0Af-x_y"
    OAuthBearerMechanism(value)  # the grammar check passes


def test_google_handler_option(monkeypatch):
    import importlib.util

    handler = "com.google.cloud.hosted.kafka.auth.GcpLoginCallbackHandler"
    options = {
        "kafka.sasl.login.callback.handler.class": handler,
        "kafka.sasl.jaas.config": f"{MODULE} required;",
    }
    if importlib.util.find_spec("google.auth") is None:
        with pytest.raises(ConfigError, match="google-auth"):
            config("127.0.0.1:1", **options)
    else:
        factory = config("127.0.0.1:1", **options).sasl_mechanism_factory
        assert factory.source.name == "kafka_common.oauth.google:token"


def test_readme_managed_kafka_recipes_are_accepted_as_written(monkeypatch):
    """Each recipe of docs/security.md's "Managed Kafka" section gives the mechanism and token
    source it says (Google's needs google-auth, which this project does not install),
    with the operator's PYKAFKA_ALLOWED_URLS its comments give, and is refused without."""
    import importlib.util
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "security.md").read_text()
    section = text[text.index("## Managed Kafka") :]
    allowed = re.findall(r"^#\s+PYKAFKA_ALLOWED_URLS=(.+)$", section, re.M)
    assert len(allowed) == 2  # Confluent's and Event Hubs' token endpoints
    monkeypatch.delenv("PYKAFKA_ALLOWED_URLS", raising=False)
    blocks: dict = {}
    exec(re.findall(r"```python\n(.*?)```", section, re.S)[0], blocks)
    with pytest.raises(ConfigError, match="PYKAFKA_ALLOWED_URLS"):
        parse_reader_options({**blocks["confluent"], "subscribe": "t"})
    allow_urls(monkeypatch, *allowed)
    recipes: dict = {}
    for block in re.findall(r"```python\n(.*?)```", section, re.S):
        exec(block, recipes)
    expected = {
        "confluent": "ClientCredentials",
        "event_hubs": "ClientCredentials",
        "google": "TokenCallback",
        "msk_iam": None,
        "msk_oauth": "MskOAuthSource",
    }
    for name, source in expected.items():
        options = {**recipes[name], "subscribe": "t"}
        if name == "google" and importlib.util.find_spec("google.auth") is None:
            with pytest.raises(ConfigError, match="google-auth"):
                parse_reader_options(options)
            continue
        factory = parse_reader_options(options).client_config.sasl_mechanism_factory
        assert type(getattr(factory, "source", None)).__name__ == (source or "NoneType")
