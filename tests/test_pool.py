"""The client pool of a Python worker (``protocol.client.pool``) and the producer identity that
rides with a pooled client, on real brokers, without Spark.

- the session's Apache Kafka behind ``tests.helpers.fault_proxy.FaultProxy`` (``proxied_kafka``:
  the proxy counts the connections it accepts, and cuts them as the broker or the network
  would; clients that bootstrap through it reach the broker only through it);
- librdkafka's mock cluster for leader moves and injected Produce errors;
- the sign-in cluster's SASL listener (``signin_kafka``) for a SASL session lifetime of
  3 s (the test counts the client's sign-ins).

Every test runs on a pool of its own (``fresh_pool`` replaces the process-wide one), so the
order of the tests does not matter.
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import confluent_kafka
import pyarrow as pa
import pytest

from kafka_sink.producer import IDENTITY_STATE_KEY, ProduceError
from kafka_sink.writer import write_task
from kafka_source.fetcher import read_range
from kafka_source.offset_specs import OffsetRange
from kafka_source.options import parse_reader_options
from kafka_testbed import SASL_USERS
from protocol.client import pool
from protocol.config import ClientConfig
from protocol.client.connection import BrokerConnection
from protocol.client.sasl_signin import SESSION_RENEW_AT
from protocol.errors import ConfigError

from .helpers.broker_setup import create_topic
from .helpers.waiting import wait_until
from .helpers.signin_cluster import REAUTH_MS
from .helpers.sink import (
    assert_exactly_once_in_order,
    batches,
    consume,
    make_topic,
    options as writer_options,
    plan_for,
    raw_batches,
)

FETCH, PRODUCE = 1, 0


def idle_clients(p: pool.ClientPool) -> int:
    """How many clients wait idle in ``p``."""
    with p._lock:
        return sum(len(v) for v in p._idle.values())


@pytest.fixture
def fresh_pool(monkeypatch):
    """A pool of this test's own as the process-wide pool."""
    p = pool.ClientPool()
    monkeypatch.setattr(pool, "_default", p)
    yield p
    p.close()


def reader_options(bootstrap: str, **extra):
    base = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": "unused",
        "kafka.retry.backoff.ms": "20",
    }
    base.update({k: str(v) for k, v in extra.items()})
    return parse_reader_options(base)


def produce(bootstrap: str, topic: str, start: int, n: int, partition: int = 0) -> None:
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + n):
        p.produce(topic, value=b"v%08d" % i, partition=partition)
    assert p.flush(10) == 0


def read(opts, topic: str, start: int, end: int, partition: int = 0) -> list[int]:
    table = pa.Table.from_batches(list(read_range(opts, OffsetRange(topic, partition, start, end))))
    return [int(v[1:]) for v in table["value"].to_pylist()] if table.num_rows else []


# ---- the pool itself -----------------------------------------------------------------------


def test_key_is_the_connection_identity_not_the_timeouts():
    base = ClientConfig(
        bootstrap_servers=["h:1"],
        security_protocol="SASL_SSL",
        sasl_username="u",
        sasl_password="hunter2-secret",
    )
    same = ClientConfig(
        bootstrap_servers=["h:1"],
        security_protocol="SASL_SSL",
        sasl_username="u",
        sasl_password="hunter2-secret",
        request_timeout_ms=5,
        connect_timeout_ms=7,
        retry_backoff_ms=1,
        metadata_max_age_ms=9,
        connections_max_idle_ms=11,
    )
    assert pool.pool_key(base) == pool.pool_key(same)
    for other in (
        ClientConfig(
            bootstrap_servers=["h:2"],
            security_protocol="SASL_SSL",
            sasl_username="u",
            sasl_password="hunter2-secret",
        ),
        ClientConfig(
            bootstrap_servers=["h:1"],
            security_protocol="SASL_SSL",
            sasl_username="u",
            sasl_password="other-secret",
        ),
        ClientConfig(
            bootstrap_servers=["h:1"],
            security_protocol="SASL_SSL",
            sasl_username="u",
            sasl_password="hunter2-secret",
            client_id="another",
        ),
        ClientConfig(
            bootstrap_servers=["h:1"],
            security_protocol="SASL_SSL",
            sasl_username="u",
            sasl_password="hunter2-secret",
            ssl_cafile="/ca.pem",
        ),
    ):
        assert pool.pool_key(other) != pool.pool_key(base)
    assert "hunter2" not in repr(pool.pool_key(base)) + str(pool.pool_key(base))


def test_a_token_source_config_keys_the_same_after_pickling(monkeypatch):
    """OAUTHBEARER's token-source factory is a frozen dataclass holding a dict (its
    extensions): each task unpickles its own copy, which must find the pooled clients."""
    import logging
    import pickle

    monkeypatch.setenv("PYKAFKA_ALLOWED_URLS", "https://idp.invalid/token")

    from kafka_common.connection_options import client_config
    from kafka_common.option_map import OptionMap

    opts = OptionMap(
        {
            "kafka.bootstrap.servers": "h:1",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "OAUTHBEARER",
            "kafka.sasl.oauthbearer.token.endpoint.url": "https://idp.invalid/token",
            "kafka.sasl.login.callback.handler.class": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
            ),
            "kafka.sasl.jaas.config": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                'clientId="a" clientSecret="hunter2-secret" extension_logicalCluster="lkc-1";'
            ),
        }
    )
    config = client_config(opts, role="consumer", log=logging.getLogger(__name__))
    key = pool.pool_key(config)
    assert pool.pool_key(pickle.loads(pickle.dumps(config))) == key
    assert "hunter2" not in repr(key) + str(key)
    other = OptionMap(
        {
            **opts.raw,
            "kafka.sasl.jaas.config": opts.raw["kafka.sasl.jaas.config"].replace("lkc-1", "lkc-2"),
        }
    )
    assert (
        pool.pool_key(client_config(other, role="consumer", log=logging.getLogger(__name__))) != key
    )


def test_one_task_per_client_and_the_warm_one_comes_back(mock_cluster, topic_name):
    mock_cluster.create_topic(topic_name, 2, 1)
    p = pool.ClientPool()
    config = ClientConfig(bootstrap_servers=mock_cluster.bootstrap)
    try:
        first = p.checkout(config)
        first.client.partitions_for(topic_name)
        second = p.checkout(
            ClientConfig(bootstrap_servers=mock_cluster.bootstrap, request_timeout_ms=1234)
        )
        assert second.client is not first.client and not second.reused
        assert p.stats["created"] == 2
        second.give_back()
        first.give_back()
        assert idle_clients(p) == 2
        again = p.checkout(
            ClientConfig(bootstrap_servers=mock_cluster.bootstrap, request_timeout_ms=4321)
        )
        assert again.reused and again.client is first.client  # the last given back
        # the task's own timeouts are on the client and on its open connections
        assert again.client.config.request_timeout_ms == 4321
        assert all(c.config.request_timeout_ms == 4321 for c in again.client._open_connections())
        assert again.client.open_connections >= 1  # still warm
        again.give_back()
        again.give_back()  # twice is once
        assert idle_clients(p) == 2
    finally:
        p.close()
    assert idle_clients(p) == 0 and first.client.open_connections == 0


def test_idle_clients_are_evicted_and_zero_turns_pooling_off(mock_cluster, topic_name):
    mock_cluster.create_topic(topic_name, 1, 1)
    p = pool.ClientPool()
    try:
        with p.borrow(
            ClientConfig(bootstrap_servers=mock_cluster.bootstrap, connections_max_idle_ms=150)
        ) as lease:
            lease.client.partitions_for(topic_name)
            client = lease.client
        assert idle_clients(p) == 1 and client.open_connections >= 1
        wait_until(
            lambda: not idle_clients(p),
            5,  # the reaper thread, no checkout needed
            "the idle client evicted",
        )
        assert idle_clients(p) == 0 and p.stats["evicted_idle"] == 1
        assert client.open_connections == 0
        with p.borrow(
            ClientConfig(bootstrap_servers=mock_cluster.bootstrap, connections_max_idle_ms=0)
        ) as lease:
            lease.client.partitions_for(topic_name)
            client = lease.client
        assert idle_clients(p) == 0 and client.open_connections == 0
    finally:
        p.close()


def test_a_give_back_wakes_the_reaper_only_for_an_earlier_expiry(mock_cluster, topic_name):
    # A woken thread competes with the task's for the GIL: the task after task of a
    # micro-batch stream must neither start nor wake the reaper each time.
    mock_cluster.create_topic(topic_name, 1, 1)
    p = pool.ClientPool()
    wakes = []
    notify_all = p._wake.notify_all
    p._wake.notify_all = lambda: (wakes.append(1), notify_all())[1]
    try:
        config = ClientConfig(bootstrap_servers=mock_cluster.bootstrap)
        with p.borrow(config) as lease:
            lease.client.partitions_for(topic_name)
        reaper = p._reaper
        wait_until(lambda: p._wake._waiters, 5, "the reaper waiting")  # type: ignore[attr-defined]
        for _ in range(20):
            with p.borrow(config) as lease:
                lease.client.partitions_for(topic_name)
        assert p._reaper is reaper and reaper.is_alive() and wakes == []
        # given back with a bound that ends before the reaper's next wake-up, the client
        # (the same one: timeouts are no identity) wakes it, and is evicted in time
        with p.borrow(
            ClientConfig(bootstrap_servers=mock_cluster.bootstrap, connections_max_idle_ms=150)
        ) as lease:
            lease.client.partitions_for(topic_name)
        assert wakes == [1]
        wait_until(lambda: p.stats["evicted_idle"], 5, "the woken reaper's eviction")
        assert p.stats["evicted_idle"] == 1 and idle_clients(p) == 0
    finally:
        p.close()
    reaper.join(5)
    assert not reaper.is_alive()  # close() ends it


def test_the_pool_can_be_turned_off_and_sized(monkeypatch, mock_cluster):
    monkeypatch.setenv(pool.ENV_ENABLED, "0")
    monkeypatch.setenv(pool.ENV_MAX_IDLE, "3")
    p = pool._from_env()
    assert not p.enabled and p.max_idle_clients == 3
    config = ClientConfig(bootstrap_servers=mock_cluster.bootstrap)
    with p.borrow(config) as lease:
        lease.client.metadata()
    with p.borrow(config) as again:
        assert not again.reused and again.client is not lease.client
    assert lease.client.open_connections == 0 and idle_clients(p) == 0
    sized = pool.ClientPool(max_idle_clients=1)
    leases = [sized.checkout(config) for _ in range(3)]
    for lease in leases:
        lease.give_back()
    assert idle_clients(sized) == 1 and sized.stats["evicted_full"] == 2
    sized.close()


def test_the_idle_bound_is_an_option_of_both_sides():
    from kafka_sink.options import parse_writer_options

    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    assert parse_reader_options(base).client_config.connections_max_idle_ms == 540_000
    opts = parse_reader_options({**base, "kafka.connections.max.idle.ms": "-1"})
    assert opts.client_config.connections_max_idle_ms == -1
    writer = parse_writer_options(
        {"kafka.bootstrap.servers": "h:1", "topic": "t", "kafka.connections.max.idle.ms": "0"}
    )
    assert writer.client_config.connections_max_idle_ms == 0
    with pytest.raises(ConfigError, match="kafka.connections.max.idle.ms"):
        parse_reader_options({**base, "kafka.connections.max.idle.ms": "-2"})


# ---- reading through the pool --------------------------------------------------------------


def test_reads_reuse_connections_and_survive_cuts_between_them(
    fresh_pool, proxied, proxy, topic_name
):
    _, kafka = proxied
    create_topic(kafka, topic_name, 1)
    opts = reader_options(proxy.address)
    for i in range(11):
        produce(proxy.address, topic_name, 100 * i, 100)
    assert read(opts, topic_name, 0, 100) == list(range(100))  # warm-up
    before = proxy.stats["connections"]
    got = []
    for i in range(1, 11):  # ten more reads, one per "micro-batch"
        got += read(opts, topic_name, 100 * i, 100 * (i + 1))
    assert got == list(range(100, 1100))
    assert proxy.stats["connections"] == before  # not one new connection
    assert fresh_pool.stats["created"] == 1 and fresh_pool.stats["reused"] == 10

    # The broker (here the proxy) closes the idle connections between two reads: they are
    # found closed on checkout and replaced; every record is read once.
    produce(proxy.address, topic_name, 1100, 100)
    proxy.cut_all()
    wait_until(lambda: proxy.connections == 0, 10, "every connection cut")
    replaced = fresh_pool.stats["replaced_connections"]
    assert read(opts, topic_name, 1100, 1200) == list(range(1100, 1200))
    assert fresh_pool.stats["replaced_connections"] > replaced

    # A connection that breaks on its first request after the check: the answer to the
    # first Fetch never comes (the proxy cuts instead); the read goes on on a new one.
    produce(proxy.address, topic_name, 1200, 100)
    proxy.drop_after_request(FETCH, 1)
    assert read(opts, topic_name, 1200, 1300) == list(range(1200, 1300))
    assert proxy.stats["dropped_responses"] == 1


def test_pooled_metadata_follows_a_leader_move(fresh_pool, mock_cluster, topic_name):
    mock_cluster.create_topic(topic_name, 1, 3)
    mock_cluster.partition_set_leader(topic_name, 0, 1)
    opts = reader_options(mock_cluster.bootstrap)
    produce(mock_cluster.bootstrap, topic_name, 0, 200)
    assert read(opts, topic_name, 0, 200) == list(range(200))
    mock_cluster.partition_set_leader(topic_name, 0, 2)
    produce(mock_cluster.bootstrap, topic_name, 200, 200)
    assert read(opts, topic_name, 200, 400) == list(range(200, 400))
    with fresh_pool.borrow(opts.client_config) as lease:
        assert lease.reused and fresh_pool.stats["created"] == 1
        # refreshed by the NOT_LEADER_OR_FOLLOWER answer, not by a new client
        assert lease.client._metadata.topics[topic_name].partitions[0].leader == 2


# ---- writing through the pool --------------------------------------------------------------


def _pids(bootstrap, topic, partitions):
    return [h for p in range(partitions) for h in raw_batches(bootstrap, topic, p)]


def test_successive_write_tasks_keep_one_producer_identity(fresh_pool, proxied, proxy, topic_name):
    _, kafka = proxied
    make_topic(kafka, topic_name, 2)
    opts = writer_options(
        SimpleNamespace(bootstrap=proxy.address), topic_name, **{"batch.size": 4000}
    )
    data = batches(4000, 500, partitions=lambda i: i % 2)
    plan = plan_for(data[0], topic_name)
    messages = [write_task(iter(data[:2]), opts, plan)]  # warm-up
    connections = proxy.stats["connections"]
    for i in range(1, 4):
        messages.append(write_task(iter(data[2 * i : 2 * i + 2]), opts, plan))
    assert proxy.stats["connections"] == connections  # no new connection after warm-up
    assert {m.producer_ids for m in messages} == {messages[0].producer_ids}
    assert len(messages[0].producer_ids) == 1
    for partition in range(2):
        headers = raw_batches(proxy.address, topic_name, partition)
        assert {h.producer_id for h in headers} == set(messages[0].producer_ids)
        sequence = 0  # one producer across the tasks: consecutive sequences
        for h in headers:
            assert h.base_sequence == sequence
            sequence += h.record_count
    assert_exactly_once_in_order(consume(proxy.address, topic_name, 2, 4000), 4000)


def test_lost_producer_state_replaces_the_pooled_identity(fresh_pool, mock_cluster, topic_name):
    make_topic(mock_cluster, topic_name, 1)
    opts = writer_options(mock_cluster, topic_name, **{"max.in.flight.requests.per.connection": 1})
    data = batches(3000, 1000)
    plan = plan_for(data[0], topic_name)
    first = write_task(iter(data[:1]), opts, plan)
    mock_cluster.push_request_errors(PRODUCE, [59])  # UNKNOWN_PRODUCER_ID
    second = write_task(iter(data[1:2]), opts, plan)
    third = write_task(iter(data[2:]), opts, plan)
    (old,) = first.producer_ids
    assert second.producer_ids[0] == old and len(second.producer_ids) == 2
    new = second.producer_ids[1]
    assert new != old and third.producer_ids == (new,)
    assert_exactly_once_in_order(consume(mock_cluster.bootstrap, topic_name, 1, 3000), 3000)
    headers = raw_batches(mock_cluster.bootstrap, topic_name, 0)
    assert [h.base_sequence for h in headers if h.producer_id == new][0] == 0


@pytest.mark.parametrize(
    "errors,extra",
    [
        ([47], {}),  # INVALID_PRODUCER_EPOCH: fenced, the task fails
        (
            [7] * 400,
            {
                "request.timeout.ms": 300,
                "linger.ms": 0,  # batches of unknown fate
                "delivery.timeout.ms": 800,
            },
        ),
    ],
)
def test_a_failed_task_hands_on_no_identity(fresh_pool, mock_cluster, topic_name, errors, extra):
    make_topic(mock_cluster, topic_name, 1)
    opts = writer_options(mock_cluster, topic_name, **extra)
    data = batches(300, 100)
    plan = plan_for(data[0], topic_name)
    first = write_task(iter(data[:1]), opts, plan)
    mock_cluster.push_request_errors(PRODUCE, errors)
    try:
        with pytest.raises(ProduceError):
            write_task(iter(data[1:2]), opts, plan)
    finally:
        mock_cluster.clear_request_errors(PRODUCE)
    with fresh_pool.borrow(opts.client_config) as lease:
        assert IDENTITY_STATE_KEY not in lease.state
    third = write_task(iter(data[2:]), opts, plan)
    assert set(third.producer_ids).isdisjoint(first.producer_ids)
    got = consume(mock_cluster.bootstrap, topic_name, 1, 200)
    values = [int(v[1:9]) for _, v, _, _ in got[0]]
    assert values == list(range(100)) + list(range(200, 300))


def test_a_task_that_writes_nothing_keeps_the_identity(fresh_pool, mock_cluster, topic_name):
    make_topic(mock_cluster, topic_name, 1)
    opts = writer_options(mock_cluster, topic_name)
    data = batches(200, 100)
    plan = plan_for(data[0], topic_name)
    first = write_task(iter(data[:1]), opts, plan)
    empty = write_task(iter([data[0].slice(0, 0)]), opts, plan)
    assert empty.producer_ids == ()
    last = write_task(iter(data[1:]), opts, plan)
    assert last.producer_ids == first.producer_ids


# ---- SASL sessions -------------------------------------------------------------------------


def test_a_sasl_session_is_renewed_before_it_ends(signin_kafka, monkeypatch):
    """Apache Kafka's SASL listener grants 3 s sessions; a pooled client renews its
    connection's session before the end, and a connection left idle in the pool past the
    renewal point is replaced at the next checkout."""
    sign_ins = []
    original = BrokerConnection._authenticate

    def counting(self, *args):
        sign_ins.append(self)
        return original(self, *args)

    monkeypatch.setattr(BrokerConnection, "_authenticate", counting)
    config = ClientConfig(
        bootstrap_servers=[signin_kafka.listener("SASL")],
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_username="alice",
        sasl_password=SASL_USERS["alice"],
    )
    renew_after = REAUTH_MS / 1000 * SESSION_RENEW_AT + 0.05
    p = pool.ClientPool()
    try:
        with p.borrow(config) as lease:
            lease.client.refresh_metadata([])
            conn = lease.client._any_connection()
            assert conn.session_lifetime_ms == REAUTH_MS
            lease.client.refresh_metadata([])  # well within the session: same one
            assert len(sign_ins) == 1
            time.sleep(renew_after)  # the session's age is the behaviour under test
            lease.client.refresh_metadata([])  # renewed before the request
            assert len(sign_ins) == 2
        time.sleep(renew_after)  # idle in the pool that long: the behaviour under test
        with p.borrow(config) as lease:  # idle in the pool past the renewal point
            assert lease.reused and p.stats["replaced_connections"] == 1
            assert lease.client.open_connections == 0
            lease.client.refresh_metadata([])
            assert len(sign_ins) == 3
    finally:
        p.close()


def test_concurrent_checkouts_from_threads_never_share_a_client(mock_cluster):
    p = pool.ClientPool()
    config = ClientConfig(bootstrap_servers=mock_cluster.bootstrap)
    in_use: set[int] = set()
    clash = []
    lock = threading.Lock()

    def task():
        for _ in range(20):
            with p.borrow(config) as lease:
                with lock:
                    if id(lease.client) in in_use:
                        clash.append(lease)
                    in_use.add(id(lease.client))
                time.sleep(0.001)  # a lease held a while, so that the tasks overlap
                with lock:
                    in_use.discard(id(lease.client))

    threads = [threading.Thread(target=task) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    p.close()
    assert not clash and p.stats["created"] <= 4


# ---- one stream, topic to topic, through Spark ---------------------------------------------


@pytest.mark.spark
def test_a_stream_reads_and_writes_through_the_pool(
    spark, fresh_pool, proxied, proxy, topic_name, tmp_path
):
    """readStream -> writeStream on Apache Kafka behind the proxy: once warm, no new broker
    connection per micro-batch, the connections the broker (proxy) closes between two
    micro-batches are replaced, every record arrives once, and the sink's record batches
    carry no more producer ids than there are Python workers."""
    _, kafka = proxied
    source, sink = topic_name + "-in", topic_name + "-out"
    create_topic(kafka, source, 2)
    create_topic(kafka, sink, 2)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": proxy.address, "linger.ms": 5, "enable.idempotence": False}
    )

    def produce_round(r: int) -> None:
        for partition in range(2):
            for i in range(40):
                producer.produce(
                    source, value=b"r%d-p%d-%03d" % (r, partition, i), partition=partition
                )
            producer.produce(source, value=b"r%d-p%d-end" % (r, partition), partition=partition)
        assert producer.flush(10) == 0

    query = (
        spark.readStream.format("pykafka")
        .option("kafka.bootstrap.servers", proxy.address)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("value")
        .writeStream.format("pykafka")
        .option("kafka.bootstrap.servers", proxy.address)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    # Spark hands each micro-batch's read and write to whichever pooled Python workers are
    # idle, so a worker may first serve a read and later a write: each opens its
    # connections for a role the first time it serves it. Warm up until a round opens none.
    new_connections: list[int] = []
    warm_up_rounds = 4

    def run_round() -> int:
        before = proxy.stats["connections"]
        produce_round(len(new_connections))
        query.processAllAvailable()
        new_connections.append(proxy.stats["connections"] - before)
        return new_connections[-1]

    try:
        while run_round() and len(new_connections) < warm_up_rounds:
            pass
        warmed = len(new_connections)
        assert new_connections[-1] == 0, f"every round opens connections: {new_connections}"
        steady = [run_round() for _ in range(2)]
        cuts, open_now = proxy.stats["cuts"], proxy.connections
        proxy.cut_all()  # the broker closes every connection between two micro-batches
        wait_until(lambda: proxy.stats["cuts"] >= cuts + open_now, 10, "every connection cut")
        after_cut = [run_round() for _ in range(3)]
        assert query.exception() is None
        batches_run = sum(1 for p in query.recentProgress if p["numInputRows"])
    finally:
        query.stop()
    rounds = len(new_connections)
    expected = sorted(
        b"r%d-p%d-%s" % (r, p, b"%03d" % i if i < 40 else b"end")
        for r in range(rounds)
        for p in range(2)
        for i in range(41)
    )
    got = consume(proxy.address, sink, 2, len(expected))
    assert sorted(v for rs in got.values() for _, v, _, _ in rs) == expected
    # Once warm, no new connection, but for one that Spark's late start of another Python
    # worker may open.
    assert new_connections[0] > 0 and sum(steady) <= 2, new_connections
    # The cut connections are replaced, and no more of them than the warm-up opened.
    warm_up_total = sum(new_connections[:warmed])
    assert 0 < after_cut[0] and sum(after_cut) <= warm_up_total + 2, (warmed, new_connections)
    # Each task runs its read and its write in two Python workers: with local[2], at most
    # 4 workers, so at most 4 producer ids however many tasks wrote.
    headers = {p: raw_batches(proxy.address, sink, p) for p in range(2)}
    pids = {h.producer_id for hs in headers.values() for h in hs}
    assert batches_run >= rounds and 1 <= len(pids) <= 4 < 2 * batches_run, (batches_run, pids)
    for hs in headers.values():  # a reused id goes on where it stopped, partition by partition
        last: dict[int, int] = {}
        for h in hs:
            assert h.base_sequence == last.get(h.producer_id, 0)
            last[h.producer_id] = h.base_sequence + h.record_count


def test_wait_readable_returns_the_connections_with_bytes_to_read():
    """The producer's wait on several brokers goes through the connection module: it
    returns the connections with something to read, after at most the timeout."""
    import socket
    import time

    from protocol.config import ClientConfig
    from protocol.client.connection import BrokerConnection, wait_readable

    config = ClientConfig(bootstrap_servers="127.0.0.1:1")
    pairs = [socket.socketpair() for _ in range(2)]
    conns = []
    for ours, _ in pairs:
        conn = BrokerConnection("127.0.0.1", 1, config, len(conns))
        conn._sock = ours
        conns.append(conn)
    try:
        began = time.monotonic()
        assert wait_readable(conns, 0.05) == []
        assert time.monotonic() - began >= 0.04
        pairs[1][1].sendall(b"x")
        assert wait_readable(conns, 5) == [conns[1]]
        closed = BrokerConnection("127.0.0.1", 1, config, 9)  # never connected: no wait
        assert wait_readable([conns[0], closed], 5) == [closed]
    finally:
        for a, b in pairs:
            a.close()
            b.close()
