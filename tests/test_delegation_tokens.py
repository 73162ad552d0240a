"""Delegation tokens: Kafka's token APIs, the SCRAM ``tokenauth`` sign-in, renewal and the
refusals, on Apache Kafka (marker ``security``: ``make test-security``), with quick checks
of the sign-in message and of what a token config holds in ``make test``.

The broker tests share one SASL cluster whose tokens expire 6 s after their issue or last
renewal (``delegation.token.expiry.time.ms``), live at most 20 s
(``delegation.token.max.lifetime.ms``) and are purged every second, so renewal, expiry and
replacement are seen within seconds; its SASL sessions end after ``REAUTH_MS`` unless the
client signs in again, so a client holding an expired token loses its connections; one
test starts a cluster without ``delegation.token.secret.key``.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import io
import pickle
import time

import pytest

from kafka_testbed import KafkaCluster, SASL_USERS
from protocol.client.cluster import KafkaClient
from protocol.client.delegation_tokens import (
    DelegationToken,
    TokenKeeper,
    create_token,
    describe_tokens,
    expire_token,
    renew_token,
    token_config,
)
from protocol.config import ClientConfig
from protocol.errors import AuthenticationError, BrokerError, ConfigError, KafkaConnectionError
from protocol.sasl import ScramMechanism, mechanism_for
from protocol.schemas import METADATA

from .helpers.secrets import assert_no_secret
from .helpers.token_stream_child import stream_tokens as _stream_tokens
from .helpers.waiting import wait_until

security = pytest.mark.security

USER = "alice"
EXPIRY_MS = 6000
MAX_LIFETIME_MS = 20_000
REAUTH_MS = 4000
TOKEN_BROKER_CONFIG = {
    "delegation.token.secret.key": "testbed-token-secret",
    "delegation.token.expiry.time.ms": str(EXPIRY_MS),
    "delegation.token.max.lifetime.ms": str(MAX_LIFETIME_MS),
    "delegation.token.expiry.check.interval.ms": "1000",
}
METADATA_BODY = {
    "topics": [],
    "allow_auto_topic_creation": False,
    "include_cluster_authorized_operations": False,
    "include_topic_authorized_operations": False,
}
HMAC = base64.b64encode(b"\x01" * 64).decode()


def _token(token_id: str = "tok-1", **times: int) -> DelegationToken:
    return DelegationToken(
        token_id, HMAC, "User:alice", **{"issue_ms": 0, "expiry_ms": 0, "max_ms": 0, **times}
    )


# ---- quick: no broker -------------------------------------------------------------------


def test_the_token_sign_in_carries_the_tokenauth_extension():
    first = ScramMechanism("SCRAM-SHA-512", "tok-1", HMAC, nonce="abc", token_auth=True)
    assert first.client_first() == b"n,,n=tok-1,r=abc,tokenauth=true"
    plain = ScramMechanism("SCRAM-SHA-512", "alice", "pw", nonce="abc")
    assert plain.client_first() == b"n,,n=alice,r=abc"
    with pytest.raises(ConfigError, match="SCRAM, not 'PLAIN'"):
        mechanism_for("PLAIN", "tok-1", HMAC, token_auth=True)


def test_the_token_proof_covers_the_extension():
    """The extension is part of the AuthMessage the proof signs (RFC 5802), so a broker
    that checks the proof also knows the client asked for a token sign-in."""
    server_first = b"r=abcSERVER,s=" + base64.b64encode(b"salt") + b",i=4096"
    proofs = [
        ScramMechanism("SCRAM-SHA-256", "tok-1", HMAC, nonce="abc", token_auth=flag)
        for flag in (True, False)
    ]
    for mech in proofs:
        mech.client_first()
    assert proofs[0].client_final(server_first) != proofs[1].client_final(server_first)


def test_a_token_config_holds_the_token_and_none_of_the_drivers_credentials():
    driver = ClientConfig(
        bootstrap_servers=["b:9092"],
        security_protocol="SASL_SSL",
        sasl_mechanism="PLAIN",
        sasl_username="alice",
        sasl_password="alice-secret",
    )
    tasks = token_config(driver, _token(), "SCRAM-SHA-256")
    assert (tasks.sasl_mechanism, tasks.sasl_username, tasks.sasl_token_auth) == (
        "SCRAM-SHA-256",
        "tok-1",
        True,
    )
    assert tasks.sasl_password.reveal() == HMAC and tasks.security_protocol == "SASL_SSL"
    pickled = pickle.dumps(tasks)
    assert b"alice-secret" not in pickled and b"alice" not in pickled
    assert_no_secret(tasks, _token(), secrets=[HMAC])
    with pytest.raises(ConfigError, match="delegationToken.mechanism: unsupported 'PLAIN'"):
        token_config(driver, _token(), "PLAIN")


def test_the_drivers_config_signs_in_itself_and_pickles_as_the_token(monkeypatch):
    """Parsed with delegationToken.enabled, the options keep the driver's sign-in (its
    clients and a stream's commits use it and create no token); whatever Spark pickles for
    the tasks, however deeply it holds the config, carries the token instead."""
    from kafka_common.delegation_token_options import DriverTokenConfig, with_delegation_token
    from kafka_common.option_map import OptionMap

    calls: list[str] = []
    monkeypatch.setattr(TokenKeeper, "current", lambda self: calls.append("token") or _token())
    driver = ClientConfig(
        bootstrap_servers=["b:9092"],
        security_protocol="SASL_SSL",
        sasl_username="alice",
        sasl_password="alice-secret",
    )
    opts = OptionMap(
        {"delegationToken.enabled": "true", "delegationToken.mechanism": "scram-sha-256"}
    )
    parsed = with_delegation_token(opts, driver)
    assert isinstance(parsed, DriverTokenConfig) and calls == []  # parsing makes no token
    assert parsed.sasl_username == "alice" and not parsed.sasl_token_auth
    pickled = pickle.dumps({"options": [parsed]})
    tasks = pickle.loads(pickled)["options"][0]
    assert calls == ["token"] and type(tasks) is ClientConfig
    assert (tasks.sasl_mechanism, tasks.sasl_username, tasks.sasl_token_auth) == (
        "SCRAM-SHA-256",
        "tok-1",
        True,
    )
    assert b"alice" not in pickled and tasks.sasl_password.reveal() == HMAC
    assert_no_secret(parsed, secrets=["alice-secret"])


class _Client:
    """Stands for a KafkaClient in the keeper's decisions (which call it makes when)."""

    def __init__(self, calls):
        self.calls = calls

    def close(self):
        pass


def _fake_broker(monkeypatch, now: list[float], calls: list[str]) -> list[DelegationToken]:
    """The token calls as a broker would answer them at ``now``; returns the tokens it
    holds (what DescribeDelegationToken lists)."""
    import protocol.client.delegation_tokens as dt

    held: list[DelegationToken] = []

    def create(client, max_lifetime_ms):
        calls.append("create")
        t = int(now[0] * 1000)
        held.append(
            _token(f"tok-{len(held) + 1}", issue_ms=t, expiry_ms=t + 10_000, max_ms=t + 100_000)
        )
        return dataclasses.replace(held[-1])

    def renew(client, token):
        calls.append("renew")
        return int(now[0] * 1000) + 10_000

    def describe(client, owners=None):
        calls.append("describe")
        return [dataclasses.replace(t) for t in held if owners is None or t.owner in owners]

    monkeypatch.setattr(dt, "create_token", create)
    monkeypatch.setattr(dt, "renew_token", renew)
    monkeypatch.setattr(dt, "describe_tokens", describe)
    monkeypatch.setattr(dt, "wait_known", lambda client, token: None)
    return held


def test_the_keeper_renews_at_three_quarters_and_replaces_near_the_maximum(monkeypatch):
    calls: list[str] = []
    now = [0.0]
    _fake_broker(monkeypatch, now, calls)
    keeper = TokenKeeper(lambda: _Client(calls), clock=lambda: now[0])
    first = keeper.current()
    now[0] = 7.4  # before 75% of 10 s
    assert keeper.current() is first and calls == ["create"]
    now[0] = 7.6
    assert keeper.current() is first and calls == ["create", "renew"]
    assert first.expiry_ms == 17_600
    now[0] = 76.0  # past 75% of the maximum lifetime: none to reuse, a new token
    second = keeper.current()
    assert second.token_id == "tok-2" and calls[-2:] == ["describe", "create"]


def test_a_keeper_in_another_process_reuses_the_owners_live_token(monkeypatch):
    """A fresh process's keeper (Spark's planner or a Python worker that was not reused)
    finds the driver's token and renews it when due, instead of creating one."""
    calls: list[str] = []
    now = [0.0]
    held = _fake_broker(monkeypatch, now, calls)
    TokenKeeper(lambda: _Client(calls), owner="User:alice", clock=lambda: now[0]).current()
    assert calls == ["describe", "create"]
    now[0] = 5.0
    calls.clear()
    other = TokenKeeper(lambda: _Client(calls), owner="User:alice", clock=lambda: now[0])
    assert other.current().token_id == "tok-1" and calls == ["describe"]
    now[0] = 8.0  # 75% of its life: the finder renews it
    calls.clear()
    third = TokenKeeper(lambda: _Client(calls), owner="User:alice", clock=lambda: now[0])
    assert third.current().expiry_ms == 18_000 and calls == ["describe", "renew"]
    calls.clear()
    bob = TokenKeeper(lambda: _Client(calls), owner="User:bob", clock=lambda: now[0])
    assert bob.current().token_id == "tok-2" and calls == ["describe", "create"]
    held.append(_token("late", issue_ms=0, expiry_ms=200_000, max_ms=100_000))
    now[0] = 95.0  # tok-1 near its maximum; "late" too: neither reused
    calls.clear()
    assert other.current().token_id == "tok-4" and calls == ["describe", "create"]


def _keeper_renewing_later(monkeypatch):
    """``(calls, now, later, keeper)``: a keeper on ``_fake_broker`` whose background
    renewals are queued in ``later`` as ``(delay_s, action)`` for the test to run."""
    calls: list[str] = []
    now = [0.0]
    _fake_broker(monkeypatch, now, calls)
    later: list[tuple[float, object]] = []
    keeper = TokenKeeper(
        lambda: _Client(calls),
        clock=lambda: now[0],
        schedule=lambda delay, action: later.append((delay, action)),
    )
    return calls, now, later, keeper


def test_a_token_handed_out_is_renewed_in_the_background_until_its_maximum(monkeypatch):
    """A micro-batch's tasks hold their token while the driver calls nothing: the keeper
    renews it when due on its own, and stops once no renewal extends it."""
    calls, now, later, keeper = _keeper_renewing_later(monkeypatch)
    token = keeper.current()
    keeper.current()
    assert calls == ["create"] and [d for d, _ in later] == [7.5]  # one schedule per token
    while later and len(calls) < 20:
        delay, action = later.pop()
        now[0] += delay
        action()  # type: ignore[operator]
        if later:
            assert calls[-1] == "renew" and token.expiry_ms == int(now[0] * 1000) + 10_000
    assert token.expiry_ms >= token.max_ms and later == [] and calls.count("renew") == 12


def test_a_background_renewal_the_cluster_fails_tries_again_while_the_token_lives(monkeypatch):
    """A lost connection at a background renewal is tried again ``RELOGIN_RETRY_S`` later
    (at most halfway to the token's expiry), not given up; an error no retry cures stops them."""
    import protocol.client.delegation_tokens as dt
    from protocol.errors import BrokerError, KafkaConnectionError
    from protocol.retry import RELOGIN_RETRY_S

    calls, now, later, keeper = _keeper_renewing_later(monkeypatch)
    token = keeper.current()
    failures = [KafkaConnectionError("broker 1: connection lost")]

    def renew(client, token):
        calls.append("renew")
        if failures:
            raise failures.pop()
        return int(now[0] * 1000) + 100_000

    monkeypatch.setattr(dt, "renew_token", renew)
    delay, action = later.pop()
    now[0] += delay  # 7.5 s: due, and the connection is lost
    action()  # type: ignore[operator]
    assert [d for d, _ in later] == [min(RELOGIN_RETRY_S, (10.0 - 7.5) / 2)]
    delay, action = later.pop()
    now[0] += delay
    action()  # type: ignore[operator]
    assert calls == ["create", "renew", "renew"] and token.expiry_ms == 108_750
    assert len(later) == 1  # the next renewal, when due
    failures.append(BrokerError.for_code(65, "RenewDelegationToken"))  # not retriable
    delay, action = later.pop()
    now[0] += delay
    action()  # type: ignore[operator]
    assert later == []


def test_the_token_to_reuse_is_the_owners_longest_lived_one_not_near_its_end():
    from protocol.client.delegation_tokens import reusable_token

    alice = [
        _token("old", issue_ms=0, expiry_ms=50_000, max_ms=100_000),
        _token("new", issue_ms=40_000, expiry_ms=50_000, max_ms=140_000),
        _token("expired", issue_ms=45_000, expiry_ms=49_000, max_ms=145_000),
    ]
    bobs = dataclasses.replace(alice[1], token_id="bobs", owner="User:bob", max_ms=200_000)
    assert reusable_token([*alice, bobs], "User:alice", 49_500).token_id == "new"
    assert reusable_token([*alice, bobs], "User:alice", 50_000) is None  # all expired
    assert reusable_token(alice[:1], "User:alice", 75_000) is None  # past 75% of its max
    assert reusable_token([], "User:alice", 0) is None


# ---- Apache Kafka -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def token_kafka():
    with KafkaCluster(sasl=True, broker_config=TOKEN_BROKER_CONFIG, reauth_ms=REAUTH_MS) as cluster:
        yield cluster


def _config(cluster, **sasl) -> ClientConfig:
    settings = {
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": USER,
        "sasl_password": SASL_USERS[USER],
        **sasl,
    }
    return ClientConfig(
        bootstrap_servers=[cluster.listener("SASL")],
        security_protocol="SASL_PLAINTEXT",
        request_timeout_ms=10_000,
        **settings,
    )


def _wait_known(driver, token: DelegationToken) -> None:
    """Until the broker knows ``token``: the controller writes it to the metadata log, the
    broker learns it a moment later."""
    wait_until(
        lambda: token.token_id in {t.token_id for t in describe_tokens(driver)},
        10,
        f"token {token.token_id} described",
    )


def _signs_in(config: ClientConfig) -> bool:
    with KafkaClient(config) as client:
        client._any_connection().request(METADATA, METADATA_BODY)
    return True


@security
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_token_signs_in_as_its_owner_and_is_seen_as_a_token(token_kafka, mechanism):
    with KafkaClient(_config(token_kafka, sasl_mechanism="PLAIN")) as driver:
        token = create_token(driver)
        assert token.owner == f"User:{USER}" and token.expiry_ms > token.issue_ms
        _wait_known(driver, token)
    tasks = token_config(_config(token_kafka), token, mechanism)
    assert _signs_in(tasks)
    # The broker took it as a token sign-in: such a principal may not ask for tokens.
    with KafkaClient(tasks) as client:
        started = time.monotonic()
        with pytest.raises(BrokerError, match="DELEGATION_TOKEN_REQUEST_NOT_ALLOWED") as err:
            create_token(client)
        assert time.monotonic() - started < 8  # not retried until the 10 s timeout
    assert_no_secret(err.value, tasks, token, secrets=[token.hmac.reveal(), SASL_USERS[USER]])
    forged = token_config(_config(token_kafka), _token(token_id=token.token_id), mechanism)
    with pytest.raises(AuthenticationError):
        _signs_in(forged)


@security
def test_a_renewed_token_outlives_its_first_expiry_and_an_unrenewed_one_does_not(token_kafka):
    keeper = TokenKeeper(lambda: KafkaClient(_config(token_kafka)))
    kept = keeper.current()
    first_expiry = kept.expiry_ms
    with KafkaClient(_config(token_kafka)) as driver:
        left = create_token(driver)
        _wait_known(driver, left)
    wait_until(lambda: time.time() * 1000 > kept.issue_ms + 0.8 * EXPIRY_MS, 10, "80% of life")
    assert keeper.current() is kept and kept.expiry_ms > first_expiry
    wait_until(lambda: time.time() * 1000 > first_expiry + 500, 10, "the first expiry")
    assert _signs_in(token_config(_config(token_kafka), kept))

    def refused() -> bool:
        try:
            _signs_in(token_config(_config(token_kafka), left))
        except (AuthenticationError, KafkaConnectionError):
            # A token past its expiry but not yet purged: Kafka closes the connection.
            return True
        return False

    wait_until(refused, 15, "the unrenewed token refused")
    with KafkaClient(_config(token_kafka)) as driver:
        with pytest.raises(BrokerError, match="DELEGATION_TOKEN_(EXPIRED|NOT_FOUND)"):
            renew_token(driver, left)


@security
def test_an_expired_token_is_refused_and_named(token_kafka):
    with KafkaClient(_config(token_kafka)) as driver:
        token = create_token(driver)
        _wait_known(driver, token)
        expire_token(driver, token)
        started = time.monotonic()
        with pytest.raises(
            BrokerError, match=r"DELEGATION_TOKEN_(EXPIRED|NOT_FOUND).*" + token.token_id
        ) as err:
            renew_token(driver, token)
        assert time.monotonic() - started < 8
    assert_no_secret(err.value, secrets=[token.hmac.reveal()])
    with pytest.raises(
        AuthenticationError, match=f"token '{token.token_id}'.*delegation.token.max.lifetime.ms"
    ):
        _signs_in(token_config(_config(token_kafka), token))


@security
def test_tokens_are_refused_over_plaintext(token_kafka):
    config = ClientConfig(bootstrap_servers=[token_kafka.listener("PLAINTEXT")])
    with KafkaClient(config) as client:
        with pytest.raises(BrokerError, match="DELEGATION_TOKEN_REQUEST_NOT_ALLOWED.*PLAINTEXT"):
            create_token(client)


@security
def test_a_cluster_without_a_token_secret_says_so():
    with KafkaCluster(sasl=True) as cluster:
        with KafkaClient(_config(cluster)) as client:
            started = time.monotonic()
            with pytest.raises(
                BrokerError,
                match="DELEGATION_TOKEN_AUTH_DISABLED.*delegation.token.secret.key",
            ):
                create_token(client)
            assert time.monotonic() - started < 8


@security
def test_the_connectors_tasks_get_the_token_and_not_the_password(token_kafka):
    """Parsed on the driver with delegationToken.enabled, the reader's and the writer's
    options (what Spark pickles to the tasks) sign in with a token: a write through the
    writer's task and a read with the reader's config, and no password in their pickles."""
    import pyarrow as pa

    from kafka_sink.options import parse_writer_options
    from kafka_sink.validation import WritePlan
    from kafka_sink.writer import write_task
    from kafka_source.options import parse_reader_options
    from tests.helpers.signin_cluster import round_trip

    options = {
        "kafka.bootstrap.servers": token_kafka.listener("SASL"),
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.username": USER,
        "kafka.sasl.password": SASL_USERS[USER],
        "delegationToken.enabled": "true",
    }
    with KafkaClient(_config(token_kafka)) as driver:
        before = {t.token_id for t in describe_tokens(driver)}
    parsed = [
        parse_reader_options({**options, "subscribe": "dt-read"}),
        parse_writer_options({**options, "topic": "dt-write"}),
    ]
    with KafkaClient(_config(token_kafka)) as driver:
        assert {t.token_id for t in describe_tokens(driver)} == before  # parsing creates none
    reader, writer = (pickle.loads(pickle.dumps(p)) for p in parsed)
    for tasks, pickled in zip((reader, writer), map(pickle.dumps, parsed)):
        config = tasks.client_config
        assert config.sasl_token_auth and config.sasl_mechanism == "SCRAM-SHA-512"
        assert SASL_USERS[USER].encode() not in pickled
        assert config.sasl_password.reveal().encode() not in pickled.replace(
            config.sasl_password.reveal().encode(), b"", 1
        )
    # One token for both: the second process-wide keeper use found it.
    assert reader.client_config.sasl_username == writer.client_config.sasl_username
    with KafkaClient(_config(token_kafka)) as driver:
        _wait_known(driver, DelegationToken(reader.client_config.sasl_username, HMAC, "", 0, 0, 0))
    with KafkaClient(reader.client_config) as client:
        assert round_trip(client, "dt-read", [b"a", b"b"]) == [b"a", b"b"]
        client.create_topics({"dt-write": 1})
    plan = WritePlan(
        topic_option="dt-write",
        topic_column=False,
        key_column=False,
        headers_column=False,
        partition_column=False,
        timestamp_kind=None,
    )
    batch = pa.RecordBatch.from_arrays([pa.array([b"x", b"y"], pa.binary())], names=["value"])
    message = write_task(iter([batch]), writer, plan)
    assert message.partitions[("dt-write", 0)][0] == 2
    with pytest.raises(ConfigError, match="delegationToken.enabled.*SASL_PLAINTEXT or SASL_SSL"):
        parse_reader_options(
            {
                "kafka.bootstrap.servers": token_kafka.listener("PLAINTEXT"),
                "subscribe": "x",
                "delegationToken.enabled": "true",
            }
        )


def test_a_micro_batchs_partitions_carry_the_token_and_never_show_it():
    from kafka_source.batch_reader import KafkaInputPartition, KafkaRangesPartition
    from kafka_source.offset_specs import OffsetRange

    tasks = token_config(ClientConfig(bootstrap_servers=["b:9092"]), _token())
    one = KafkaInputPartition(OffsetRange("t", 0, 0, 5), config=tasks)
    several = KafkaRangesPartition([OffsetRange("t", 0, 0, 5)] * 2, config=tasks)
    for partition in (one, several):
        assert pickle.loads(pickle.dumps(partition)).config.sasl_password.reveal() == HMAC
        assert_no_secret(partition, partition.value, partition.config, secrets=[HMAC])
    assert KafkaInputPartition(OffsetRange("t", 0, 0, 5)).config is None


def _renewed_and_replaced(seen: dict[str, DelegationToken]) -> DelegationToken | None:
    """A token renewed past its first expiry and followed by one issued near its maximum
    lifetime."""
    for token in seen.values():
        if token.expiry_ms > token.issue_ms + EXPIRY_MS and any(
            other.issue_ms >= token.issue_ms + (token.max_ms - token.issue_ms) * 0.7
            for other in seen.values()
        ):
            return token
    return None


@security
def test_a_stream_reads_past_its_tokens_expiry_and_maximum_lifetime(token_kafka, spark):
    """A readStream's micro-batches get the planner's current token: the first one renewed
    past its first expiry, then a new one near its maximum lifetime, which the tasks read
    with past the first one's end (every SASL session signs in again within REAUTH_MS,
    so a task still holding the first token would fail). Every record arrives once, and
    no HMAC shows in the plan or the progress."""
    from tests.helpers.streaming import produce

    topic = "dt-stream"
    with KafkaClient(_config(token_kafka)) as driver:
        driver.create_topics({topic: 2})
    since_ms = time.time() * 1000 - 1000
    reader = spark.readStream.format("pykafka")
    for key, value in {
        "kafka.bootstrap.servers": token_kafka.listener("SASL"),
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.username": USER,
        "kafka.sasl.password": SASL_USERS[USER],
        "delegationToken.enabled": "true",
        "subscribe": topic,
        "startingOffsets": "earliest",
    }.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .selectExpr("CAST(value AS STRING) AS value")
        .writeStream.format("memory")
        .queryName("dt_stream")
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    sent: list[str] = []
    seen: dict[str, DelegationToken] = {}
    try:

        def past_the_first_tokens_end() -> bool:
            if query.exception() is not None:
                raise AssertionError(f"the stream failed: {query.exception()}")
            wave = [f"w{len(sent)}-{i}" for i in range(4)]
            produce(token_kafka.listener("PLAINTEXT"), topic, {len(sent) % 2: wave})
            sent.extend(wave)
            with KafkaClient(_config(token_kafka)) as driver:
                _stream_tokens(driver, since_ms, seen)
            renewed = _renewed_and_replaced(seen)
            return renewed is not None and time.time() * 1000 > renewed.max_ms + REAUTH_MS + 1500

        wait_until(past_the_first_tokens_end, 55, "a second token and the first one's end", 0.5)

        def rows() -> list[str]:
            if query.exception() is not None:
                raise AssertionError(f"the stream failed: {query.exception()}")
            return sorted(r.value for r in spark.table("dt_stream").collect())

        wait_until(lambda: rows() == sorted(sent), 30, lambda: f"{len(rows())} of {len(sent)}")
        elapsed_ms = time.time() * 1000 - since_ms
        # Not one per parse of the options or per micro-batch: one per maximum lifetime.
        assert len(seen) <= _token_bound(elapsed_ms), f"{len(seen)} tokens in {elapsed_ms} ms"
        plan = io.StringIO()
        with contextlib.redirect_stdout(plan):
            query.explain(extended=True)
        shown = plan.getvalue() + str(query.recentProgress)
        assert "dt-stream" in shown
    finally:
        query.stop()
    assert_no_secret(shown, secrets=[t.hmac.reveal() for t in seen.values()])


def _token_bound(elapsed_ms: float) -> int:
    """The most tokens a stream may create in ``elapsed_ms``: its first, one per
    replacement at 75% of a maximum lifetime, and a few more for processes racing."""
    return 4 + int(elapsed_ms // (MAX_LIFETIME_MS * 0.75))


def _check_the_write_stream(cluster, topic: str, result: dict) -> None:
    """The stream ran past its first token's end, renewed and replaced it, created at most
    one token per maximum lifetime (not one per micro-batch or commit: a few more when
    processes race), and wrote every row once."""
    from tests.helpers.sink import consume

    assert result["error"] is None, result["error"]
    tokens = result["tokens"]
    made = (
        f"{len(tokens)} tokens for {result['batches']} micro-batches in "
        f"{result['elapsed_ms']:.0f} ms"
    )
    print(made)
    assert len(tokens) <= _token_bound(result["elapsed_ms"]), made
    assert any(expiry > issue + EXPIRY_MS for issue, expiry, _ in tokens.values()), made
    assert len(tokens) >= 2, f"the first token was not replaced: {made}"
    got = consume(cluster.listener("PLAINTEXT"), topic, 1, result["committed"])
    values = sorted(int(v) for _, v, _, _ in got[0])
    assert len(values) >= result["committed"] > 0 and values == list(range(len(values))), (
        f"{len(values)} records read, {len(set(values))} distinct, {result['committed']} committed"
    )


def _write_spec(cluster, topic: str, checkpoint) -> dict:
    with KafkaClient(_config(cluster)) as driver:
        driver.create_topics({topic: 1})
    return {
        "sasl": cluster.listener("SASL"),
        "plain": cluster.listener("PLAINTEXT"),
        "topic": topic,
        "checkpoint": str(checkpoint),
        "user": USER,
        "password": SASL_USERS[USER],
        "reauth_ms": REAUTH_MS,
    }


@security
def test_a_stream_writes_past_its_tokens_expiry_and_maximum_lifetime(token_kafka, spark, tmp_path):
    """A writeStream's micro-batches get the current token: renewed past its first expiry,
    replaced near its maximum lifetime, and the tasks write with the new one past the
    first one's end (every SASL session signs in again within REAUTH_MS). No HMAC shows
    in the plan or the progress."""
    from tests.helpers.token_stream_child import write_past_the_first_token

    spec = _write_spec(token_kafka, "dt-write-stream", tmp_path / "checkpoint")
    _check_the_write_stream(token_kafka, spec["topic"], write_past_the_first_token(spark, spec))


@security
def test_a_stream_in_fresh_python_workers_shares_one_token(token_kafka, tmp_path):
    """With spark.python.worker.reuse=false every planning of a micro-batch and every
    commit runs in a new Python process, which keeps no token: the planner finds the
    driver's live token with DescribeDelegationToken instead of creating one, and the
    commits sign in with the driver's credentials and create none."""
    import json
    import subprocess
    import sys

    spec = _write_spec(token_kafka, "dt-write-fresh", tmp_path / "checkpoint")
    child = subprocess.run(
        [sys.executable, "-m", "tests.helpers.token_stream_child", json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    result = json.loads(child.stdout.strip().splitlines()[-1])
    _check_the_write_stream(token_kafka, spec["topic"], result)
