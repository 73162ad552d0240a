"""The sink's write task and idempotent producer against real brokers, without Spark.

Records are written by ``write_task`` from Arrow batches and read back by confluent-kafka
(librdkafka) and by kafka-python. The raw batches are fetched back and their headers
checked (producer id, epoch, consecutive sequences).

Brokers, and what each can prove:

- Apache Kafka (the session's ``kafka``) checks the sequences of idempotent producers (a
  gap is OUT_OF_ORDER_SEQUENCE_NUMBER, a resend DUPLICATE_SEQUENCE_NUMBER), but cannot
  inject errors: faults there are injected on the client side (a lost answer, a dropped
  connection, a request that never reached it) while five requests are in flight, and
  order is asserted with five in flight.
- librdkafka's mock cluster injects broker errors, moves leaders and takes brokers down,
  but does not check the sequences of a producer without a transactional id (its log
  append skips the check), so a later pipelined batch that succeeds after an earlier one
  failed is appended out of order, where Kafka would reject it. Order is therefore
  asserted on the mock with one request in flight per connection; with five, the tests
  assert that nothing is lost or duplicated. Where a producer's first batch on a
  partition fails, the mock takes a later one as Kafka does for a producer it knows
  nothing of there (any sequence is a first one): that case is shown on the mock.
"""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

from kafka.partitioner.default import murmur2 as referee_murmur2
from kafka_sink.options import parse_writer_options
from kafka_sink.batch_state import next_sequence, restamp
from kafka_sink.producer import ProduceError, TaskProducer
from kafka_sink.writer import write_task
from protocol.client.cluster import KafkaClient
from protocol.errors import KafkaConnectionError
from protocol.records import batch as rb
from protocol.records import checksum

from .helpers.txn_referee import log_of
from .helpers.sink import (
    assert_exactly_once_in_order,
    batches,
    consume,
    make_topic,
    options,
    plan_for,
    raw_batches,
    rows,
)


# ---- helpers -------------------------------------------------------------------------------


def write(broker, topic, data, **extra):
    data = list(data)
    opts = options(broker, topic, **extra)
    return write_task(iter(data), opts, plan_for(data[0], topic))


def consume_kafka_python(
    bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 30
) -> dict[int, list]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        group_id=None,
        consumer_timeout_ms=1000,
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: dict[int, list] = {p: [] for p in range(partitions)}
        got = 0
        deadline = time.monotonic() + timeout
        while got < expected and time.monotonic() < deadline:
            for tp, messages in consumer.poll(timeout_ms=500).items():
                for m in messages:
                    out[tp.partition].append((m.key, m.value, list(m.headers or []), m.timestamp))
                    got += 1
        return out
    finally:
        consumer.close()


# ---- round trips on Apache Kafka --------------------------------------------------------------


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_round_trip_every_codec_read_by_both_clients(kafka, topic_name, codec):
    make_topic(kafka, topic_name, 3)
    total = 3000
    data = batches(total, 700, headers=True, timestamps=True)
    message = write(kafka, topic_name, data, **{"compression.type": codec})
    assert message.records == total and message.bytes > 0
    assert sum(r for r, _ in message.partitions.values()) == total

    expected = {}
    for i in range(total):
        key = b"k%08d" % i
        part = (referee_murmur2(key) & 0x7FFFFFFF) % 3
        hdrs = [("h", b"%d" % i), ("n", None)] if i % 3 else []
        expected.setdefault(part, []).append(
            (key, b"v%08d" % i, hdrs, 1_700_000_000_000 + i)
        )  # micros truncated to ms
    got = consume(kafka.bootstrap, topic_name, 3, total)
    assert {p: v for p, v in got.items() if v} == expected
    from kafka import codec as kafka_python_codecs

    if codec == "snappy" and not kafka_python_codecs.has_snappy():
        return  # kafka-python reads snappy only with python-snappy, not installed here
    got_kp = consume_kafka_python(kafka.bootstrap, topic_name, 3, total)
    assert {p: v for p, v in got_kp.items() if v} == expected


def test_batches_carry_a_producer_id_and_consecutive_sequences(kafka, topic_name):
    make_topic(kafka, topic_name, 2)
    total = 6000
    message = write(
        kafka,
        topic_name,
        batches(total, 1000, keys=False, partitions=lambda i: i % 2),
        **{"batch.size": 8000},
    )
    assert len(message.producer_ids) == 1
    pid = message.producer_ids[0]
    for partition in range(2):
        headers = raw_batches(kafka.bootstrap, topic_name, partition)
        assert len(headers) > 3  # batch.size split the rows
        assert sum(h.record_count for h in headers) == total // 2
        sequence = 0
        for h in headers:
            assert (h.producer_id, h.producer_epoch) == (pid, 0)
            assert h.base_sequence == sequence
            assert h.batch_length + 12 <= 8000
            sequence = next_sequence(sequence, h.record_count)


def test_partition_column_then_key_then_sticky(kafka, topic_name):
    make_topic(kafka, topic_name, 4)
    n = 400
    keys = [None if i % 4 == 0 else b"key-%d" % i for i in range(n)]
    parts = [2 if i % 5 == 0 else None for i in range(n)]
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(keys, pa.binary()),
            pa.array([b"v%08d" % i for i in range(n)]),
            pa.array(parts, pa.int32()),
        ],
        names=["key", "value", "partition"],
    )
    write(kafka, topic_name, [batch])
    got = consume(kafka.bootstrap, topic_name, 4, n)
    where = {int(v[1:9]): p for p, recs in got.items() for _, v, _, _ in recs}
    assert len(where) == n
    unkeyed = set()
    for i in range(n):
        if parts[i] is not None:
            assert where[i] == 2
        elif keys[i] is not None:
            assert where[i] == (referee_murmur2(keys[i]) & 0x7FFFFFFF) % 4
        else:
            unkeyed.add(where[i])
    assert len(unkeyed) == 1  # a small run of unkeyed rows sticks to one partition


def test_topic_column_spreads_rows_over_topics_in_order(kafka, topic_name):
    a, b = topic_name + "-a", topic_name + "-b"
    make_topic(kafka, a, 1)
    make_topic(kafka, b, 1)
    n = 1000
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([a if i % 3 else b for i in range(n)]),
            pa.array([b"v%08d" % i for i in range(n)]),
        ],
        names=["topic", "value"],
    )
    message = write(kafka, None, [batch, batch.slice(0, 10)])
    assert message.per_topic() == {
        a: (672, message.per_topic()[a][1]),
        b: (338, message.per_topic()[b][1]),
    }
    got_a = [int(v[1:9]) for _, v, _, _ in consume(kafka.bootstrap, a, 1, 672)[0]]
    assert got_a == [i for i in range(n) if i % 3] + [i for i in range(10) if i % 3]


def test_string_key_and_value_and_double_timestamps(kafka, topic_name):
    make_topic(kafka, topic_name, 1)
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(["é-key", None]),
            pa.array(["välue", None]),
            pa.array([1_700_000_000.1239, None], pa.float64()),
        ],
        names=["key", "value", "timestamp"],
    )
    before = int(time.time() * 1000)
    write(kafka, topic_name, [batch])
    got = consume(kafka.bootstrap, topic_name, 1, 2)[0]
    assert got[0][:3] == ("é-key".encode(), "välue".encode(), [])
    assert got[0][3] == 1_700_000_000_123
    assert got[1][0] is None and got[1][1] is None and got[1][3] >= before


def test_lost_answers_and_broken_connections_are_resent_once(kafka, topic_name, monkeypatch):
    """Five requests in flight; the answers of some are lost (the broker wrote them) and
    the connection is dropped: Kafka recognises the resends as duplicates, and every
    record is there once, in order."""
    make_topic(kafka, topic_name, 2)
    from protocol.client.connection import BrokerConnection

    real_receive = BrokerConnection.receive
    calls = {"n": 0}

    def flaky_receive(self, cid, timeout_ms=None):
        response = real_receive(self, cid, timeout_ms)
        calls["n"] += 1
        if calls["n"] in (3, 9, 10, 17) and "responses" in response:
            self.close()  # the broker wrote the batches; we never hear it
            raise KafkaConnectionError("injected: connection lost after the answer")
        return response

    monkeypatch.setattr(BrokerConnection, "receive", flaky_receive)
    total = 20_000
    message = write(
        kafka, topic_name, batches(total, 2000), **{"batch.size": 4000, "buffer.memory": 50_000}
    )
    monkeypatch.setattr(BrokerConnection, "receive", real_receive)
    assert calls["n"] > 17
    assert message.records == total
    assert_exactly_once_in_order(consume(kafka.bootstrap, topic_name, 2, total), total)


def test_a_request_lost_before_the_broker_saw_it(kafka, topic_name, monkeypatch):
    """A Produce request vanishes while later ones reach the broker: Kafka answers the later
    ones OUT_OF_ORDER_SEQUENCE_NUMBER, and the producer resends all in order."""
    make_topic(kafka, topic_name, 1)
    from protocol.client.connection import BrokerConnection

    real_send = BrokerConnection.send
    state = {"n": 0, "dropped": None}

    def lossy_send(self, api, body, version=None, expect_response=True, *args, **kwargs):
        if api.key == 0:
            state["n"] += 1
            if state["n"] == 4:
                # pretend the frame went out: a correlation id the broker never answers
                cid, _ = self._framing.request(api, version, body, expect_response)
                state["dropped"] = cid
                return cid
        return real_send(self, api, body, version, expect_response, *args, **kwargs)

    monkeypatch.setattr(BrokerConnection, "send", lossy_send)
    total = 20_000
    message = write(
        kafka,
        topic_name,
        batches(total, 2000),
        **{
            "batch.size": 4000,
            "buffer.memory": 50_000,
            "request.timeout.ms": 1500,
            "delivery.timeout.ms": 30000,
        },
    )
    monkeypatch.setattr(BrokerConnection, "send", real_send)
    assert state["dropped"] is not None
    assert message.records == total
    assert_exactly_once_in_order(consume(kafka.bootstrap, topic_name, 1, total), total)


def test_acks_one_and_zero_without_idempotence(kafka, topic_name):
    make_topic(kafka, topic_name, 1)
    write(kafka, topic_name, batches(500, 250), acks=1, **{"enable.idempotence": "false"})
    write(
        kafka,
        topic_name,
        batches(500, 250, keys=False)[::1],
        acks=0,
        **{"enable.idempotence": "false"},
    )
    got = consume(kafka.bootstrap, topic_name, 1, 1000)[0]
    assert len(got) == 1000
    for h in raw_batches(kafka.bootstrap, topic_name, 0):
        assert h.producer_id == -1 and h.base_sequence == -1


# ---- faults on the mock cluster -------------------------------------------------------------


@pytest.mark.parametrize("in_flight", [1, 5])
@pytest.mark.parametrize("errors", [[6, 6, 6], [7, 7], [20, 20, 20], [6, 7, 20, 19, 7]])
def test_injected_produce_errors(mock_cluster, topic_name, errors, in_flight):
    make_topic(mock_cluster, topic_name, 3)
    mock_cluster.push_request_errors(0, errors)
    total = 12_000
    message = write(
        mock_cluster,
        topic_name,
        batches(total, 3000),
        **{
            "batch.size": 6000,
            "buffer.memory": 40_000,
            "max.in.flight.requests.per.connection": in_flight,
        },
    )
    mock_cluster.clear_request_errors(0)
    assert message.records == total
    got = consume(mock_cluster.bootstrap, topic_name, 3, total)
    assert_exactly_once_in_order(got, total, ordered=in_flight == 1)


def _leader_of(broker, topic, partition):
    with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        return client.refresh_metadata([topic]).topics[topic].partitions[partition].leader


def test_leader_moves_mid_write(mock_cluster, topic_name):
    make_topic(mock_cluster, topic_name, 2)
    total = 30_000
    data = batches(total, 1000)

    def stream():
        for i, batch in enumerate(data):
            if i in (8, 20):
                for p in range(2):
                    leader = _leader_of(mock_cluster, topic_name, p)
                    mock_cluster.partition_set_leader(topic_name, p, leader % 3 + 1)
            yield batch

    opts = options(
        mock_cluster,
        topic_name,
        **{"batch.size": 8000, "buffer.memory": 30_000, "max.in.flight.requests.per.connection": 1},
    )
    message = write_task(stream(), opts, plan_for(data[0], topic_name))
    assert message.records == total
    got = consume(mock_cluster.bootstrap, topic_name, 2, total)
    assert_exactly_once_in_order(got, total)


def test_broker_down_and_up_mid_write(mock_cluster, topic_name):
    make_topic(mock_cluster, topic_name, 3)
    total = 30_000
    data = batches(total, 1000)
    down = _leader_of(mock_cluster, topic_name, 0)
    timers = []

    def stream():
        for i, batch in enumerate(data):
            if i == 10:
                mock_cluster.broker_set_down(down)
                timer = threading.Timer(1.0, mock_cluster.broker_set_up, (down,))
                timer.start()
                timers.append(timer)
            yield batch

    opts = options(
        mock_cluster,
        topic_name,
        **{"batch.size": 8000, "buffer.memory": 30_000, "max.in.flight.requests.per.connection": 1},
    )
    try:
        message = write_task(stream(), opts, plan_for(data[0], topic_name))
    finally:
        for timer in timers:
            timer.join()
        mock_cluster.broker_set_up(down)
    assert message.records == total
    got = consume(mock_cluster.bootstrap, topic_name, 3, total)
    assert_exactly_once_in_order(got, total)


@pytest.mark.parametrize("code", [59, 45])
def test_lost_producer_state_starts_a_new_producer_id(mock_cluster, topic_name, code):
    make_topic(mock_cluster, topic_name, 1)
    mock_cluster.push_request_errors(0, [code])
    total = 5000
    message = write(
        mock_cluster,
        topic_name,
        batches(total, 1000),
        **{"batch.size": 4000, "max.in.flight.requests.per.connection": 1},
    )
    assert len(message.producer_ids) == 2
    got = consume(mock_cluster.bootstrap, topic_name, 1, total)
    assert_exactly_once_in_order(got, total)
    headers = raw_batches(mock_cluster.bootstrap, topic_name, 0)
    new_id = [h for h in headers if h.producer_id == message.producer_ids[1]]
    assert new_id and new_id[0].base_sequence == 0


def _log_values(bootstrap: str, topic: str) -> list[bytes]:
    """The data records of partition 0 in log order (markers left out)."""
    return [
        r.value
        for _, header, records in log_of(bootstrap, topic, 1)
        if not header.attributes & 0x20
        for r in records
    ]


def test_a_first_batch_that_failed_is_not_overtaken(mock_cluster, topic_name):
    """The producer's first Produce to a partition fails (NOT_LEADER_OR_FOLLOWER, as while
    a new topic's leader starts on Kafka) while more batches of it are ready: nothing
    goes behind the first one until the broker acknowledged it, because a broker that
    knows no state of the producer there takes any sequence as the first (the mock, and
    Kafka: found there as a transactional task failing with OUT_OF_ORDER_SEQUENCE_NUMBER
    on fresh topics). Every record lands once, in order."""
    make_topic(mock_cluster, topic_name, 1)
    mock_cluster.push_request_errors(0, [6])
    try:
        message = write(
            mock_cluster, topic_name, [rows(20)], **{"batch.size": 100, "buffer.memory": 100}
        )
    finally:
        mock_cluster.clear_request_errors(0)
    assert message.records == 20
    assert _log_values(mock_cluster.bootstrap, topic_name) == [b"v%08d" % i for i in range(20)]


def test_an_out_of_order_answer_behind_a_failed_batch_is_resent_in_a_transaction(
    mock_cluster, topic_name
):
    """A transactional task's second Produce fails (NOT_LEADER_OR_FOLLOWER) with more of
    its batches in flight: those are answered OUT_OF_ORDER_SEQUENCE_NUMBER (the mock
    checks a transactional producer's sequences as Kafka does). That is the echo of the
    failed batch, not a lost sequence: they are resent from the oldest, as Kafka's Java
    producer does, and the task succeeds with every record once, in order."""
    from kafka_sink.transactions import commit_transactions

    make_topic(mock_cluster, topic_name, 1)
    opts = parse_writer_options(
        {
            "kafka.bootstrap.servers": mock_cluster.bootstrap,
            "topic": topic_name,
            "kafka.retry.backoff.ms": "20",
            "kafka.batch.size": "100",
            "kafka.buffer.memory": "100",
            "exactlyOnce": "true",
        }
    )
    prefix = f"eos-{topic_name[-6:]}"
    mock_cluster.push_request_errors(0, [0, 6])  # the first Produce passes, the next fails
    try:
        message = write_task(
            iter([rows(20)]), opts, plan_for(rows(1), topic_name), prefix=prefix, task=(0, 0, None)
        )
    finally:
        mock_cluster.clear_request_errors(0)
    assert message.records == 20
    with KafkaClient(bootstrap_servers=mock_cluster.bootstrap) as client:
        assert commit_transactions(client, opts, prefix, [message], None)["committed"] == 1
    assert _log_values(mock_cluster.bootstrap, topic_name) == [b"v%08d" % i for i in range(20)]


@pytest.mark.parametrize(
    "code,words",
    [(90, "fenced"), (47, "fenced"), (10, "MESSAGE_TOO_LARGE"), (29, "TOPIC_AUTHORIZATION_FAILED")],
)
def test_fatal_errors_fail_the_task_naming_the_partition(mock_cluster, topic_name, code, words):
    make_topic(mock_cluster, topic_name, 1)
    mock_cluster.push_request_errors(0, [code])
    try:
        with pytest.raises(ProduceError) as info:
            write(mock_cluster, topic_name, batches(100, 100))
    finally:
        mock_cluster.clear_request_errors(0)
    text = str(info.value)
    assert words in text and f"topic {topic_name!r} partition 0" in text


def test_delivery_timeout_names_partition_and_last_error(mock_cluster, topic_name):
    make_topic(mock_cluster, topic_name, 1)
    mock_cluster.push_request_errors(0, [7] * 500)
    started = time.monotonic()
    try:
        with pytest.raises(ProduceError) as info:
            write(
                mock_cluster,
                topic_name,
                batches(100, 100),
                **{"request.timeout.ms": 500, "linger.ms": 0, "delivery.timeout.ms": 1500},
            )
    finally:
        mock_cluster.clear_request_errors(0)
    assert time.monotonic() - started < 10
    text = str(info.value)
    assert f"topic {topic_name!r} partition 0 timed out" in text
    assert "kafka.delivery.timeout.ms" in text and "REQUEST_TIMED_OUT" in text


def test_one_init_producer_id_per_task_and_pipelined_produce(mock_cluster, topic_name):
    make_topic(mock_cluster, topic_name, 3)
    mock_cluster.start_request_tracking()
    try:
        write(mock_cluster, topic_name, batches(9000, 3000), **{"batch.size": 3000})
        requests = mock_cluster.get_requests()
    finally:
        mock_cluster.stop_request_tracking()
    # none when the task goes on with the identity an earlier write left in the pool
    assert sum(r.api_key == 22 for r in requests) <= 1
    assert sum(r.api_key == 0 for r in requests) >= 10


# ---- small units ---------------------------------------------------------------------------


def test_sequence_wraps_at_int32_max():
    assert next_sequence(0, 5) == 5
    assert next_sequence(2**31 - 3, 3) == 0
    assert next_sequence(2**31 - 1, 3) == 2


def test_restamp_rewrites_ids_and_crc():
    data = rb.build_batch(
        [(0, 1000, b"k", b"v"), (1, 1001, None, b"w")],
        producer_id=7,
        producer_epoch=1,
        base_sequence=40,
    )
    again = restamp(data, 99, 0, 0)
    h = rb.parse_header(again)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (99, 0, 0)
    assert h.crc == checksum.crc32c(memoryview(again)[rb.ATTRIBUTES_OFFSET :])
    assert again[rb.RECORDS_OFFSET :] == data[rb.RECORDS_OFFSET :]


def test_producer_without_records_sends_nothing(mock_cluster, topic_name):
    make_topic(mock_cluster, topic_name, 1)
    opts = options(mock_cluster, topic_name)
    with TaskProducer(opts) as producer:
        producer.flush()
        assert producer.producer_ids == [] and not producer.pending
    message = write_task(iter([rows(0)]), opts, plan_for(rows(1), topic_name))
    assert message.records == 0 and message.producer_ids == ()


def test_delivery_timeout_starts_when_sending_starts(mock_cluster, topic_name):
    """Batches held back while a task checks its input do not age meanwhile."""
    make_topic(mock_cluster, topic_name, 1)
    opts = options(
        mock_cluster,
        topic_name,
        **{
            "request.timeout.ms": 300,
            "linger.ms": 0,
            "delivery.timeout.ms": 400,
            "batch.size": 200,
        },
    )
    slow = iter([rows(10), rows(10, 10)])

    def stream():
        yield next(slow)
        time.sleep(0.6)  # longer than delivery.timeout.ms, before anything is sent
        yield next(slow)

    message = write_task(stream(), opts, plan_for(rows(1), topic_name))
    assert message.records == 20
