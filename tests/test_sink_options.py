"""The writer's options: names, defaults and every misuse message."""

from __future__ import annotations

import logging
import pickle

import pytest

from kafka_sink import option_table as sink_options
from kafka_common import option_map
from kafka_sink.option_table import WRITER_OPTIONS, writer_option_names
from kafka_sink.options import parse_writer_options
from protocol.errors import ConfigError

BOOT = {"kafka.bootstrap.servers": "localhost:9092"}


def parse(**extra):
    return parse_writer_options({**BOOT, **extra})


def test_defaults():
    o = parse_writer_options(BOOT)
    assert o.bootstrap_servers == ["localhost:9092"]
    assert o.topic is None and o.include_headers is False
    assert o.acks == -1 and o.enable_idempotence is True
    assert o.compression_type == "none"
    assert o.batch_size == 1_048_576 and o.max_request_size == 1_048_576
    assert o.linger_ms == 5 and o.max_in_flight == 5
    assert o.delivery_timeout_ms == 120_000 and o.request_timeout_ms == 30_000
    assert o.client_config.request_timeout_ms == 30_000
    assert o.client_config.client_id == "pyspark-pykafka"
    assert o.buffer_memory == 33_554_432 and o.max_block_ms == 60_000
    assert o.check_before_send_bytes == 4_194_304
    assert o.batch_limit == 1_048_576
    assert pickle.loads(pickle.dumps(o)) == o


def test_names_are_case_insensitive_and_values_trimmed():
    o = parse_writer_options(
        {
            "KAFKA.BOOTSTRAP.SERVERS": " a:1 , b:2 ",
            "Topic": " t ",
            "kafka.ACKS": "ALL",
            "kafka.Compression.Type": "ZSTD",
            "kafka.client.id": "me",
            "includeheaders": "TRUE",
        }
    )
    assert o.bootstrap_servers == ["a:1", "b:2"]
    assert o.topic == "t" and o.acks == -1 and o.compression_type == "zstd"
    assert o.client_config.client_id == "me" and o.include_headers


def test_option_list_is_exported():
    names = writer_option_names()
    for name in (
        "kafka.bootstrap.servers",
        "topic",
        "includeHeaders",
        "kafka.acks",
        "kafka.enable.idempotence",
        "kafka.compression.type",
        "kafka.batch.size",
        "kafka.linger.ms",
        "kafka.max.request.size",
        "kafka.max.in.flight.requests.per.connection",
        "kafka.delivery.timeout.ms",
        "kafka.request.timeout.ms",
        "kafka.client.id",
        "kafka.security.protocol",
        "kafka.sasl.jaas.config",
        "kafka.ssl.cafile",
    ):
        assert name in names
    assert len(names) == len(set(names)) == len(WRITER_OPTIONS)
    assert all(o.meaning for o in WRITER_OPTIONS)
    table = sink_options.options_table_markdown().splitlines()
    assert len(table) == len(names) + 2 and "`kafka.acks`" in table[5]


@pytest.mark.parametrize("acks,value", [("all", -1), ("-1", -1), ("1", 1), ("0", 0)])
def test_acks_values(acks, value):
    assert parse(**{"kafka.acks": acks, "kafka.enable.idempotence": "false"}).acks == value


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_codecs(codec):
    assert parse(**{"kafka.compression.type": codec}).compression_type == codec


@pytest.mark.parametrize(
    "options,message",
    [
        ({}, "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer"),
        ({"kafka.bootstrap.servers": " , "}, "Option 'kafka.bootstrap.servers' must be specified"),
        (
            {"kafka.bootstrap.servers": "nohost"},
            "kafka.bootstrap.servers: 'nohost' is not host:port",
        ),
        ({**BOOT, "topic": " "}, "topic: the topic option is empty"),
        (
            {**BOOT, "kafka.acks": "2"},
            "kafka.acks: Invalid value 2 for configuration acks: String must be one of: "
            "all, -1, 0, 1",
        ),
        (
            {**BOOT, "kafka.acks": "1"},
            "Must set acks to all in order to use the idempotent producer",
        ),
        (
            {**BOOT, "kafka.acks": "0", "kafka.enable.idempotence": "true"},
            "needs kafka.enable.idempotence=false",
        ),
        (
            {**BOOT, "kafka.enable.idempotence": "yes"},
            "kafka.enable.idempotence must be true or false",
        ),
        (
            {**BOOT, "kafka.compression.type": "brotli"},
            "kafka.compression.type: Invalid value brotli for configuration compression.type: "
            "String must be one of: none, gzip, snappy, lz4, zstd",
        ),
        (
            {**BOOT, "kafka.max.in.flight.requests.per.connection": "6"},
            "Must set max.in.flight.requests.per.connection to at most 5 to use the idempotent "
            "producer",
        ),
        (
            {**BOOT, "kafka.max.in.flight.requests.per.connection": "0"},
            "kafka.max.in.flight.requests.per.connection must be positive",
        ),
        (
            {**BOOT, "kafka.retries": "0"},
            "Must set retries to non-zero when using the idempotent producer",
        ),
        (
            {**BOOT, "kafka.delivery.timeout.ms": "1000"},
            "delivery.timeout.ms should be equal to or larger than linger.ms + request.timeout.ms",
        ),
        ({**BOOT, "kafka.batch.size": "big"}, "kafka.batch.size: expected an integer, got 'big'"),
        ({**BOOT, "kafka.batch.size": "-1"}, "kafka.batch.size must be at least 0"),
        ({**BOOT, "kafka.max.request.size": "0"}, "kafka.max.request.size must be positive"),
        ({**BOOT, "kafka.linger.ms": "-5"}, "kafka.linger.ms must be at least 0"),
        ({**BOOT, "checkBeforeSendBytes": "-1"}, "checkBeforeSendBytes must be at least 0"),
        (
            {**BOOT, "kafka.request.timeout.ms": "abc"},
            "kafka.request.timeout.ms: expected an integer",
        ),
        ({**BOOT, "kafka.client.id": ""}, "kafka.client.id must not be empty"),
        (
            {**BOOT, "kafka.key.serializer": "x"},
            "Kafka option 'key.serializer' is not supported as keys are serialized with "
            "ByteArraySerializer.",
        ),
        (
            {**BOOT, "kafka.value.serializer": "x"},
            "Kafka option 'value.serializer' is not supported as value are serialized with "
            "ByteArraySerializer.",
        ),
        (
            {**BOOT, "kafka.transactional.id": "x"},
            "Kafka option 'transactional.id' is not supported",
        ),
        (
            {**BOOT, "kafka.security.protocol": "SASL_PLAINTEXT"},
            "kafka.security.protocol SASL_PLAINTEXT needs credentials",
        ),
        (
            {**BOOT, "kafka.security.protocol": "TLS"},
            "kafka.security.protocol: unknown value 'TLS'",
        ),
        (
            {
                **BOOT,
                "kafka.security.protocol": "SASL_SSL",
                "kafka.sasl.mechanism": "GSSAPI",
                "kafka.sasl.username": "u",
                "kafka.sasl.password": "p",
            },
            "kafka.sasl.mechanism GSSAPI needs kafka.sasl.jaas.config",
        ),
    ],
)
def test_misuse_messages(options, message):
    with pytest.raises(ConfigError) as info:
        parse_writer_options(options)
    assert message in str(info.value)


def test_acks_one_and_zero_without_idempotence():
    o = parse(
        **{
            "kafka.acks": "1",
            "kafka.enable.idempotence": "false",
            "kafka.max.in.flight.requests.per.connection": "10",
            "kafka.retries": "0",
        }
    )
    assert o.acks == 1 and not o.enable_idempotence and o.max_in_flight == 10
    assert o.retries == 0


def test_batch_limit_is_capped_by_max_request_size():
    o = parse(**{"kafka.batch.size": "4000000", "kafka.max.request.size": "100000"})
    assert o.batch_limit == 100_000
    assert parse(**{"kafka.batch.size": "0"}).batch_limit == 1


def test_security_options_are_shared_with_the_reader():
    from kafka_source.options import parse_reader_options

    security = {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="alice" password="s3cret";'
        ),
        "kafka.ssl.endpoint.identification.algorithm": "",
    }
    w = parse(**security).client_config
    r = parse_reader_options({**BOOT, **security, "subscribe": "t"}).client_config
    for name in (
        "security_protocol",
        "sasl_mechanism",
        "sasl_username",
        "sasl_password",
        "ssl_cafile",
        "ssl_certfile",
        "ssl_keyfile",
        "ssl_check_hostname",
    ):
        assert getattr(w, name) == getattr(r, name), name
    assert w.sasl_username == "alice" and w.sasl_password.reveal() == "s3cret"
    assert "s3cret" not in repr(parse(**security))


def test_unknown_kafka_options_warn_once(caplog, monkeypatch):
    monkeypatch.setattr(option_map, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="pykafka.sink"):
        o = parse(**{"kafka.metadata.max.age.ms": "5", "kafka.foo.bar": "1"})
        parse(**{"kafka.metadata.max.age.ms": "5"})
    assert o.ignored_kafka_options == ("kafka.foo.bar", "kafka.metadata.max.age.ms")
    warnings = [r.getMessage() for r in caplog.records if r.name == "pykafka.sink"]
    assert sum("kafka.metadata.max.age.ms" in w for w in warnings) == 1
    assert any("kafka.foo.bar" in w for w in warnings)


def test_shared_options_pass_silently_reader_options_are_refused_and_typos_are_errors(
    caplog, monkeypatch
):
    monkeypatch.setattr(option_map, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="pykafka.sink"):
        parse(**{"checkpointLocation": "/x", "kafka.group.id": "g"})
    assert not [r for r in caplog.records if r.name == "pykafka.sink"]
    with pytest.raises(
        ConfigError,
        match="^options 'subscribe', 'startingOffsets' are reader options; the writer "
        "does not use them$",
    ):
        parse(**{"subscribe": "t", "startingOffsets": "earliest"})
    with pytest.raises(
        ConfigError,
        match="Option 'topik' is not an option of the "
        "pyspark-pykafka writer. Did you mean 'topic'?",
    ):
        parse(**{"topik": "x"})


def test_partitioner_class_names_the_java_partitioners_or_points_to_the_partition_column():
    assert parse().partitioner == "default"
    for name, rule in [
        ("org.apache.kafka.clients.producer.internals.DefaultPartitioner", "default"),
        ("BuiltInPartitioner", "default"),
        ("org.apache.kafka.clients.producer.UniformStickyPartitioner", "uniform_sticky"),
        ("org.apache.kafka.clients.producer.RoundRobinPartitioner", "round_robin"),
        ("roundrobinpartitioner", "round_robin"),
    ]:
        assert parse(**{"kafka.partitioner.class": name}).partitioner == rule, name
    with pytest.raises(
        ConfigError,
        match=r"kafka.partitioner.class: com.acme.Geo is not "
        r"supported.*'partition' column",
    ):
        parse(**{"kafka.partitioner.class": "com.acme.Geo"})


def test_exactly_once_options():
    o = parse(exactlyOnce="true", transactionalIdPrefix="orders-eos")
    assert (o.exactly_once, o.transactional_id_prefix, o.transaction_timeout_ms) == (
        True,
        "orders-eos",
        60000,
    )
    assert parse(**{"kafka.transaction.timeout.ms": "900000"}).transaction_timeout_ms == 900000
    assert parse().exactly_once is False
    with pytest.raises(ConfigError, match="exactlyOnce: transactions need the idempotent"):
        parse(exactlyOnce="true", **{"kafka.enable.idempotence": "false", "kafka.acks": "1"})
    with pytest.raises(ConfigError, match="transactionalIdPrefix"):
        parse(exactlyOnce="true", transactionalIdPrefix="")
    with pytest.raises(ConfigError, match="kafka.transaction.timeout.ms"):
        parse(**{"kafka.transaction.timeout.ms": "0"})
    with pytest.raises(ConfigError, match="exactlyOnce=true"):
        parse(**{"kafka.transactional.id": "x"})


def test_check_before_send_is_bounded_by_the_buffer():
    """Nothing can be held back beyond kafka.buffer.memory, the most a task may hold."""
    assert (
        parse_writer_options({**BOOT, "kafka.buffer.memory": "1000"}).check_before_send_bytes
        == 1000
    )
    assert parse_writer_options({**BOOT, "checkBeforeSendBytes": "0"}).check_before_send_bytes == 0
    assert (
        parse_writer_options({**BOOT, "CHECKBEFORESENDBYTES": "64"}).check_before_send_bytes == 64
    )
