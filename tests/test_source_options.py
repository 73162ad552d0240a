"""The reader's options: defaults, parsing, precedence, and every misuse named by option."""

import logging
import pickle
import re

import pytest

from kafka_source.option_table import READER_OPTIONS, options_table_markdown, reader_option_names
from kafka_source.options import (
    ReaderOptions,
    parse_bytes,
    parse_duration_ms,
    parse_reader_options,
    check_reader_options,
)
from kafka_common import option_map
from kafka_source.offset_specs import (
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    SpecificOffsets,
    SpecificTimestamps,
    Subscription,
)
from protocol.config import Secret
from protocol.errors import ConfigError

BASE = {"kafka.bootstrap.servers": "broker1:9092,broker2:9092", "subscribe": "events"}
PASSWORD = "hunter2-s3cret"
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="alice" password="{PASSWORD}";'
)
SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    f'username="alice" password="{PASSWORD}";'
)


@pytest.fixture(autouse=True)
def fresh_warnings():
    """Warnings are logged once per process; forget them between tests."""
    option_map._warned.clear()
    yield
    option_map._warned.clear()


def parse(extra=None, *, streaming=False, base=BASE, drop=()):
    opts = {k: v for k, v in base.items() if k not in drop}
    opts.update(extra or {})
    return parse_reader_options(opts, for_streaming=streaming)


def fails(extra, option, *, streaming=False, base=BASE, drop=()):
    """Parsing fails with a ConfigError whose message names ``option``."""
    with pytest.raises(ConfigError) as info:
        parse(extra, streaming=streaming, base=base, drop=drop)
    assert option in str(info.value), str(info.value)
    return str(info.value)


# ---- defaults ---------------------------------------------------------------------------


def test_batch_defaults():
    o = parse()
    assert o.subscription == Subscription("subscribe", topics=("events",))
    assert o.starting_offsets == EarliestOffsets("startingOffsets")
    assert o.ending_offsets == LatestOffsets("endingOffsets")
    assert o.for_streaming is False
    assert o.fail_on_data_loss is True
    assert o.min_partitions is None and o.max_records_per_partition is None
    assert o.include_headers is False
    assert o.poll_timeout_ms == 120_000
    assert o.fetch_offset_num_retries == 3
    assert o.fetch_offset_retry_interval_ms == 1000
    assert o.isolation_level == "read_uncommitted" and o.isolation_level_code == 0
    assert o.group_id is None
    assert (
        o.fetch_max_bytes,
        o.max_partition_fetch_bytes,
        o.fetch_max_wait_ms,
        o.fetch_min_bytes,
    ) == (52_428_800, 1_048_576, 500, 1)
    assert o.max_offsets_per_trigger is None and o.min_offsets_per_trigger is None
    assert o.max_trigger_delay_ms == 15 * 60 * 1000
    assert o.max_bytes_per_trigger is None and o.commit_offsets_to_group is None
    c = o.client_config
    assert c.bootstrap_servers == ["broker1:9092", "broker2:9092"]
    assert o.bootstrap_servers == ["broker1:9092", "broker2:9092"]
    assert c.security_protocol == "PLAINTEXT" and c.client_id == "pyspark-pykafka"
    assert c.request_timeout_ms == 30_000


def test_streaming_defaults_start_at_latest_and_have_no_end():
    o = parse(streaming=True)
    assert o.starting_offsets == LatestOffsets("startingOffsets")
    assert o.ending_offsets is None and o.for_streaming is True


def test_options_are_case_insensitive_and_frozen_and_picklable():
    o = parse(
        {
            "STARTINGOFFSETS": "earliest",
            "MinPartitions": "4",
            "KAFKA.ISOLATION.LEVEL": "READ_COMMITTED",
        }
    )
    assert o.min_partitions == 4 and o.isolation_level_code == 1
    with pytest.raises(AttributeError):
        o.min_partitions = 5
    assert pickle.loads(pickle.dumps(o)) == o


def test_same_option_twice_in_different_case_is_an_error():
    with pytest.raises(ConfigError, match="minPartitions"):
        parse_reader_options({**BASE, "minPartitions": "2", "minpartitions": "3"})


# ---- subscription -----------------------------------------------------------------------


def test_subscribe_list_is_trimmed_and_deduplicated():
    o = parse({"subscribe": " a, b ,,a ,c"})
    assert o.subscription.topics == ("a", "b", "c")


def test_subscribe_pattern_is_a_python_regex():
    o = parse({"subscribePattern": r"^orders\.(eu|us)$"}, drop=("subscribe",))
    assert o.subscription.kind == "subscribePattern"
    assert o.subscription.regex.search("orders.eu")


def test_assign_json():
    o = parse({"assign": '{"b":[1,0,1],"a":[2]}'}, drop=("subscribe",))
    assert o.subscription == Subscription("assign", partitions=(("a", 2), ("b", 0), ("b", 1)))


def test_no_strategy():
    message = fails({}, "subscribe", drop=("subscribe",))
    assert "One of the following options must be specified for Kafka source" in message


def test_two_strategies():
    message = fails({"assign": '{"a":[0]}'}, "assign")
    assert "Only one of the following options can be specified" in message


@pytest.mark.parametrize(
    "extra, option",
    [
        ({"subscribe": " , "}, "subscribe"),
        ({"subscribePattern": "  "}, "subscribePattern"),
        ({"subscribePattern": "orders.(eu"}, "subscribePattern"),
        ({"assign": "a:0"}, "assign"),
        ({"assign": "{not json"}, "assign"),
        ({"assign": '{"a":0}'}, "assign"),
        ({"assign": '{"a":["x"]}'}, "assign"),
        ({"assign": '{"a":["1"]}'}, "assign"),
        ({"assign": '{"a":[1.5]}'}, "assign"),
        ({"assign": '{"a":[true]}'}, "assign"),
        ({"assign": '{"a":[-1]}'}, "assign"),
        ({"assign": '{"a":{"0":1}}'}, "assign"),
    ],
)
def test_bad_strategy_values(extra, option):
    drop = ("subscribe",) if option != "subscribe" else ()
    fails(extra, option, drop=drop)


def test_bad_pattern_message_says_python_regex():
    message = fails({"subscribePattern": "a(b"}, "subscribePattern", drop=("subscribe",))
    assert "regular expression" in message


# ---- bootstrap servers ------------------------------------------------------------------


def test_bootstrap_servers_required():
    message = fails({}, "kafka.bootstrap.servers", drop=("kafka.bootstrap.servers",))
    assert "must be specified for configuring Kafka consumer" in message


@pytest.mark.parametrize("value", ["", " , ", "nohostport", "host:port"])
def test_bad_bootstrap_servers(value):
    fails({"kafka.bootstrap.servers": value}, "kafka.bootstrap.servers")


# ---- starting / ending offsets ----------------------------------------------------------


def test_offsets_keywords_and_json():
    o = parse({"startingOffsets": " Earliest ", "endingOffsets": "LATEST"})
    assert isinstance(o.starting_offsets, EarliestOffsets)
    assert isinstance(o.ending_offsets, LatestOffsets)
    o = parse(
        {"startingOffsets": '{"t":{"0":23,"1":-2}}', "endingOffsets": '{"t":{"0":50,"1":-1}}'}
    )
    assert o.starting_offsets == SpecificOffsets(
        ((("t", 0), 23), (("t", 1), -2)), "startingOffsets"
    )
    assert o.ending_offsets.as_dict == {("t", 0): 50, ("t", 1): -1}
    assert o.ending_offsets.option == "endingOffsets"


def test_streaming_may_start_at_latest_and_use_minus_one():
    assert isinstance(
        parse({"startingOffsets": "latest"}, streaming=True).starting_offsets, LatestOffsets
    )
    o = parse({"startingOffsets": '{"t":{"0":-1}}'}, streaming=True)
    assert o.starting_offsets.as_dict == {("t", 0): -1}


def test_batch_cannot_start_at_latest():
    message = fails({"startingOffsets": "latest"}, "startingOffsets")
    assert "starting offset can't be latest for batch queries on Kafka" in message


def test_batch_cannot_start_at_minus_one_in_json():
    message = fails({"startingOffsets": '{"t":{"0":5,"1":-1}}'}, "startingOffsets")
    assert "t-1" in message and "can't be latest for batch queries" in message


def test_batch_cannot_end_at_earliest():
    message = fails({"endingOffsets": "earliest"}, "endingOffsets")
    assert "ending offset can't be earliest for batch queries on Kafka" in message


def test_batch_cannot_end_at_minus_two_in_json():
    message = fails({"endingOffsets": '{"t":{"0":-2}}'}, "endingOffsets")
    assert "t-0" in message and "can't be earliest" in message


@pytest.mark.parametrize("option", ["endingOffsets", "endingOffsetsByTimestamp"])
def test_streaming_rejects_ending_options(option):
    message = fails({option: '{"t":{"0":1}}'}, option, streaming=True)
    assert "not valid in streaming queries" in message


def test_streaming_ignores_ending_timestamp_with_a_warning(caplog):
    """Spark's validateStreamOptions checks endingOffsets and endingOffsetsByTimestamp
    only, so a stream given endingTimestamp runs without an end (issue 17 item 9)."""
    caplog.set_level(logging.WARNING, logger="pykafka.source")
    o = parse({"endingTimestamp": "1700000000000"}, streaming=True)
    assert o.ending_offsets is None and isinstance(o.starting_offsets, LatestOffsets)
    assert "endingTimestamp option ignored in streaming queries" in caplog.text


@pytest.mark.parametrize("option", ["startingOffsets", "endingOffsets"])
@pytest.mark.parametrize(
    "value",
    [
        "{bad",
        "[1,2]",
        '{"t":[0]}',
        '{"t":{"x":1}}',
        '{"t":{"0":"12"}}',
        '{"t":{"0":1.5}}',
        '{"t":{"0":-3}}',
        "someday",
    ],
)
def test_bad_offsets_json(option, value):
    message = fails({option: value}, option)
    if value == "{bad":
        assert "Expected e.g." in message


def test_unresolved_start_after_end_is_an_error():
    message = fails(
        {"startingOffsets": '{"t":{"0":10}}', "endingOffsets": '{"t":{"0":5}}'}, "startingOffsets"
    )
    assert (
        "The specified start offset 10 is greater than the end offset 5 for topic t "
        "partition 0" in message
    )


def test_sentinels_are_not_compared_before_resolution():
    o = parse({"startingOffsets": '{"t":{"0":10}}', "endingOffsets": '{"t":{"0":-1}}'})
    assert o.ending_offsets.as_dict == {("t", 0): -1}


def test_start_and_end_json_must_name_the_same_partitions():
    message = fails(
        {"startingOffsets": '{"t":{"0":1}}', "endingOffsets": '{"t":{"0":5,"1":5}}'},
        "endingOffsets",
    )
    assert "should have the same topic-partitions" in message


# ---- timestamps and precedence ----------------------------------------------------------


def test_global_timestamp_and_strategy():
    o = parse(
        {
            "startingTimestamp": "1700000000000",
            "endingTimestamp": "1800000000000",
            "startingOffsetsByTimestampStrategy": "LATEST",
        }
    )
    assert o.starting_offsets == GlobalTimestamp(1700000000000, "latest", "startingTimestamp")
    assert o.ending_offsets == GlobalTimestamp(1800000000000, "latest", "endingTimestamp")


def test_timestamps_json():
    o = parse({"startingOffsetsByTimestamp": '{"t":{"0":1700000000000,"1":1}}'})
    assert o.starting_offsets == SpecificTimestamps(
        ((("t", 0), 1700000000000), (("t", 1), 1)), "error", "startingOffsetsByTimestamp"
    )


def test_precedence_global_timestamp_then_json_then_offsets(caplog):
    caplog.set_level(logging.WARNING, logger="pykafka.source")
    o = parse(
        {
            "startingTimestamp": "5",
            "startingOffsetsByTimestamp": '{"t":{"0":1}}',
            "startingOffsets": "earliest",
            "endingOffsetsByTimestamp": '{"t":{"0":9}}',
            "endingOffsets": "latest",
        }
    )
    assert o.starting_offsets == GlobalTimestamp(5, "error", "startingTimestamp")
    assert isinstance(o.ending_offsets, SpecificTimestamps)
    text = caplog.text
    assert "startingOffsetsByTimestamp is ignored" in text
    assert "startingOffsets is ignored" in text and "endingOffsets is ignored" in text


def test_lower_precedence_options_are_not_parsed():
    o = parse({"startingTimestamp": "5", "startingOffsets": "not json at all"})
    assert isinstance(o.starting_offsets, GlobalTimestamp)


@pytest.mark.parametrize("option", ["startingTimestamp", "endingTimestamp"])
@pytest.mark.parametrize("value", ["soon", "1.5", "-3", "", "99999999999999999999"])
def test_bad_global_timestamp(option, value):
    message = fails({option: value}, option)
    if value == "soon":
        assert "Expected a single long value, got soon" in message


@pytest.mark.parametrize("option", ["startingOffsetsByTimestamp", "endingOffsetsByTimestamp"])
@pytest.mark.parametrize("value", ["{", '{"t":{"0":-5}}', '{"t":{"0":"x"}}', '{"t":5}'])
def test_bad_timestamps_json(option, value):
    fails({option: value}, option)


def test_bad_timestamp_strategy():
    fails({"startingOffsetsByTimestampStrategy": "earliest"}, "startingOffsetsByTimestampStrategy")


def test_timestamp_start_after_end():
    message = fails(
        {
            "startingOffsetsByTimestamp": '{"t":{"0":10}}',
            "endingOffsetsByTimestamp": '{"t":{"0":5}}',
        },
        "startingOffsetsByTimestamp",
    )
    assert "start timestamp 10 is greater than the end timestamp 5" in message
    fails({"startingTimestamp": "10", "endingTimestamp": "5"}, "startingTimestamp")


# ---- scalar options ---------------------------------------------------------------------


def test_scalar_options_parse():
    o = parse(
        {
            "failOnDataLoss": "FALSE",
            "includeHeaders": "true",
            "minPartitions": "8",
            "maxRecordsPerPartition": "1000",
            "kafkaConsumer.pollTimeoutMs": "5000",
            "fetchOffset.numRetries": "5",
            "fetchOffset.retryIntervalMs": "0",
            "kafka.isolation.level": "read_committed",
            "kafka.client.id": "me",
            "kafka.request.timeout.ms": "1000",
            "kafka.fetch.max.bytes": "1000",
            "kafka.max.partition.fetch.bytes": "100",
            "kafka.fetch.max.wait.ms": "0",
            "kafka.fetch.min.bytes": "0",
        }
    )
    assert o.fail_on_data_loss is False and o.include_headers is True
    assert (o.min_partitions, o.max_records_per_partition) == (8, 1000)
    assert o.poll_timeout_ms == 5000
    assert (o.fetch_offset_num_retries, o.fetch_offset_retry_interval_ms) == (5, 0)
    assert o.isolation_level == "read_committed" and o.isolation_level_code == 1
    assert o.client_config.client_id == "me" and o.client_config.request_timeout_ms == 1000
    assert (
        o.fetch_max_bytes,
        o.max_partition_fetch_bytes,
        o.fetch_max_wait_ms,
        o.fetch_min_bytes,
    ) == (1000, 100, 0, 0)


def test_min_partitions_must_be_positive():
    assert "minPartitions must be positive" in fails({"minPartitions": "0"}, "minPartitions")


def test_max_records_per_partition_must_be_positive():
    message = fails({"maxRecordsPerPartition": "-1"}, "maxRecordsPerPartition")
    assert "maxRecordsPerPartition must be positive" in message


@pytest.mark.parametrize(
    "option, value",
    [
        ("failOnDataLoss", "yes"),
        ("includeHeaders", "1"),
        ("minPartitions", "two"),
        ("minPartitions", str(2**31)),
        ("maxRecordsPerPartition", "1e6"),
        ("kafkaConsumer.pollTimeoutMs", "0"),
        ("kafkaConsumer.pollTimeoutMs", "soon"),
        ("fetchOffset.numRetries", "0"),
        ("fetchOffset.retryIntervalMs", "-1"),
        ("kafka.isolation.level", "serializable"),
        ("kafka.request.timeout.ms", "0"),
        ("kafka.fetch.max.bytes", "0"),
        ("kafka.fetch.max.bytes", str(2**31)),
        ("kafka.max.partition.fetch.bytes", "-5"),
        ("kafka.fetch.max.wait.ms", "-1"),
        ("kafka.fetch.min.bytes", "x"),
        ("kafka.client.id", " "),
        ("kafka.security.protocol", "TLS"),
    ],
)
def test_bad_scalar_values_name_the_option(option, value):
    fails({option: value}, option)


# ---- streaming-only options -------------------------------------------------------------


def test_streaming_options_parse():
    o = parse(
        {
            "maxOffsetsPerTrigger": "1000",
            "minOffsetsPerTrigger": "10",
            "maxTriggerDelay": "30s",
            "maxBytesPerTrigger": "512m",
            "commitOffsetsToGroup": "lag-watch",
        },
        streaming=True,
    )
    assert (o.max_offsets_per_trigger, o.min_offsets_per_trigger) == (1000, 10)
    assert o.max_trigger_delay_ms == 30_000
    assert o.max_bytes_per_trigger == 512 * 2**20
    assert o.commit_offsets_to_group == "lag-watch"


def test_min_offsets_above_max_offsets():
    message = fails(
        {"maxOffsetsPerTrigger": "10", "minOffsetsPerTrigger": "20"},
        "maxOffsetsPerTrigger",
        streaming=True,
    )
    assert (
        "The value of minOffsetPerTrigger(20) is higher than the "
        "maxOffsetsPerTrigger(10)." in message
    )


@pytest.mark.parametrize(
    "option, value",
    [
        ("maxOffsetsPerTrigger", "0"),
        ("maxOffsetsPerTrigger", "lots"),
        ("minOffsetsPerTrigger", "-3"),
        ("maxTriggerDelay", "15 minutes"),
        ("maxTriggerDelay", "10y"),
        ("maxTriggerDelay", "-5s"),
        ("maxBytesPerTrigger", "0"),
        ("maxBytesPerTrigger", "1.5g"),
        ("maxBytesPerTrigger", "12 parsecs"),
        ("commitOffsetsToGroup", "  "),
    ],
)
def test_bad_streaming_values(option, value):
    fails({option: value}, option, streaming=True)


def test_commit_offsets_to_group_needs_a_group_name():
    message = fails({"commitOffsetsToGroup": ""}, "commitOffsetsToGroup", streaming=True)
    assert "consumer group" in message


def test_streaming_options_are_ignored_in_batch_with_a_warning(caplog):
    caplog.set_level(logging.WARNING, logger="pykafka.source")
    o = parse({"maxOffsetsPerTrigger": "5", "maxTriggerDelay": "1m"})
    assert "maxOffsetsPerTrigger option ignored in batch queries" in caplog.text
    assert "maxTriggerDelay option ignored in batch queries" in caplog.text
    assert o.commit_offsets_to_group is None


def test_durations_and_sizes():
    assert parse_duration_ms("15m") == 900_000
    assert parse_duration_ms("250") == 250
    assert parse_duration_ms(" 2H ") == 7_200_000
    assert parse_duration_ms("1min") == 60_000
    assert parse_duration_ms("1d") == 86_400_000
    assert parse_duration_ms("2500us") == 2
    assert parse_bytes("1024") == 1024
    assert parse_bytes("1k") == parse_bytes("1kb") == 1024
    assert parse_bytes("2g") == 2 * 2**30


# ---- Kafka options Spark rejects, and the ones we do not use ----------------------------


@pytest.mark.parametrize(
    "option, expected",
    [
        ("kafka.auto.offset.reset", "Kafka option 'auto.offset.reset' is not supported"),
        ("kafka.key.deserializer", "Kafka option 'key.deserializer' is not supported as keys"),
        (
            "kafka.value.deserializer",
            "Kafka option 'value.deserializer' is not supported as values",
        ),
        ("kafka.enable.auto.commit", "Kafka option 'enable.auto.commit' is not supported"),
        ("kafka.interceptor.classes", "Kafka option 'interceptor.classes' is not supported"),
    ],
)
def test_kafka_options_spark_rejects(option, expected):
    message = fails({option.upper(): "x"}, option.removeprefix("kafka."))
    assert expected in message


def test_unknown_kafka_option_is_warned_about_once(caplog):
    caplog.set_level(logging.WARNING, logger="pykafka.source")
    secret_value = "do-not-log-me"
    o = parse({"kafka.ssl.keymanager.algorithm": secret_value})
    parse({"kafka.ssl.keymanager.algorithm": secret_value})
    records = [r for r in caplog.records if "kafka.ssl.keymanager.algorithm" in r.getMessage()]
    assert len(records) == 1 and records[0].levelno == logging.WARNING
    assert records[0].name == "pykafka.source"
    assert secret_value not in caplog.text
    assert o.ignored_kafka_options == ("kafka.ssl.keymanager.algorithm",)


def test_a_misspelt_source_option_is_an_error_naming_what_was_typed():
    """Issue 32: a misspelling of a known option fails before anything is read (it used
    to be a warning, and the read went ahead from the default)."""
    with pytest.raises(ConfigError) as info:
        parse({"startingOffset": "earliest"})
    assert str(info.value) == (
        "Option 'startingOffset' is not an option of the "
        "pyspark-pykafka source. Did you mean 'startingOffsets'?"
    )


def test_group_id_is_accepted_with_a_note(caplog):
    caplog.set_level(logging.WARNING, logger="pykafka.source")
    o = parse({"kafka.group.id": "g"})
    assert o.group_id == "g" and "kafka.group.id" in caplog.text


# ---- security ---------------------------------------------------------------------------


def test_sasl_with_username_and_password():
    o = parse(
        {
            "kafka.security.protocol": "sasl_plaintext",
            "kafka.sasl.username": "alice",
            "kafka.sasl.password": PASSWORD,
        }
    )
    c = o.client_config
    assert (c.security_protocol, c.sasl_mechanism, c.sasl_username) == (
        "SASL_PLAINTEXT",
        "PLAIN",
        "alice",
    )
    assert isinstance(c.sasl_password, Secret) and c.sasl_password.reveal() == PASSWORD


def test_sasl_with_jaas_config():
    o = parse({"kafka.security.protocol": "SASL_SSL", "kafka.sasl.jaas.config": PLAIN_JAAS})
    assert o.client_config.sasl_username == "alice"
    assert o.client_config.sasl_password.reveal() == PASSWORD
    o = parse(
        {
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-256",
            "kafka.sasl.jaas.config": SCRAM_JAAS,
        }
    )
    assert o.client_config.sasl_mechanism == "SCRAM-SHA-256"


@pytest.mark.parametrize(
    "mechanism, jaas", [(None, PLAIN_JAAS), ("PLAIN", PLAIN_JAAS), ("SCRAM-SHA-512", SCRAM_JAAS)]
)
def test_databricks_kafkashaded_login_modules_are_accepted(mechanism, jaas):
    """Issue 39: Databricks users write the shaded class names; the OAUTHBEARER and MSK
    paths took them, PLAIN and SCRAM refused them (one check now, kafka_common.trust)."""
    options = {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.jaas.config": "kafkashaded." + jaas,
    }
    if mechanism:
        options["kafka.sasl.mechanism"] = mechanism
    c = parse(options).client_config
    assert (c.sasl_mechanism, c.sasl_username) == (mechanism or "PLAIN", "alice")
    assert c.sasl_password.reveal() == PASSWORD
    # the shaded ScramLoginModule, like the plain one, still needs a SCRAM mechanism named
    fails(
        {
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.jaas.config": "kafkashaded." + SCRAM_JAAS,
        },
        "kafka.sasl.mechanism",
    )


@pytest.mark.parametrize(
    "extra, option",
    [
        ({"kafka.sasl.jaas.config": SCRAM_JAAS}, "kafka.sasl.mechanism"),
        (
            {"kafka.sasl.mechanism": "PLAIN", "kafka.sasl.jaas.config": SCRAM_JAAS},
            "kafka.sasl.jaas.config",
        ),
        (
            {"kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.jaas.config": PLAIN_JAAS},
            "kafka.sasl.jaas.config",
        ),
        (
            {"kafka.sasl.jaas.config": PLAIN_JAAS, "kafka.sasl.username": "bob"},
            "kafka.sasl.jaas.config",
        ),
        ({"kafka.sasl.jaas.config": PLAIN_JAAS[:-1]}, "kafka.sasl.jaas.config"),
        (
            {"kafka.sasl.jaas.config": f'Login required password="{PASSWORD}"'},
            "kafka.sasl.jaas.config",
        ),
        ({"kafka.sasl.username": "alice"}, "kafka.sasl.password"),
        ({"kafka.sasl.password": PASSWORD}, "kafka.sasl.username"),
        (
            {
                "kafka.sasl.mechanism": "GSSAPI",
                "kafka.sasl.password": PASSWORD,
                "kafka.sasl.username": "alice",
            },
            "kafka.sasl.mechanism",
        ),
    ],
)
def test_sasl_misuse_names_the_option_and_never_the_password(extra, option):
    message = fails({"kafka.security.protocol": "SASL_SSL", **extra}, option)
    assert PASSWORD not in message


def test_ssl_options():
    o = parse(
        {
            "kafka.security.protocol": "SSL",
            "kafka.ssl.cafile": "/ca.pem",
            "kafka.ssl.certfile": "/c.pem",
            "kafka.ssl.keyfile": "/k.pem",
            "kafka.ssl.key.password": PASSWORD,
            "kafka.ssl.endpoint.identification.algorithm": "",
        }
    )
    c = o.client_config
    assert (c.ssl_cafile, c.ssl_certfile, c.ssl_keyfile) == ("/ca.pem", "/c.pem", "/k.pem")
    assert c.ssl_key_password.reveal() == PASSWORD and c.ssl_check_hostname is False
    assert parse({"kafka.security.protocol": "SSL"}).client_config.ssl_check_hostname is True


@pytest.mark.parametrize(
    "extra, option",
    [
        (
            {"kafka.ssl.endpoint.identification.algorithm": "ldaps"},
            "kafka.ssl.endpoint.identification.algorithm",
        ),
        ({"kafka.ssl.keyfile": "/k.pem"}, "kafka.ssl.keyfile"),
        ({"kafka.ssl.key.password": PASSWORD}, "kafka.ssl.key.password"),
    ],
)
def test_ssl_misuse(extra, option):
    message = fails({"kafka.security.protocol": "SSL", **extra}, option)
    assert PASSWORD not in message


def test_security_options_without_the_protocol_are_warned_about(caplog):
    caplog.set_level(logging.WARNING, logger="pykafka.source")
    o = parse(
        {
            "kafka.sasl.username": "alice",
            "kafka.sasl.password": PASSWORD,
            "kafka.ssl.cafile": "/ca.pem",
        }
    )
    assert o.client_config.sasl_password is None
    assert "kafka.sasl.password" in caplog.text and "kafka.ssl.cafile" in caplog.text
    assert PASSWORD not in caplog.text


def test_password_never_in_repr_str_or_pickle_text(caplog):
    caplog.set_level(logging.DEBUG, logger="pykafka.source")
    o = parse(
        {
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.jaas.config": PLAIN_JAAS,
            "kafka.ssl.certfile": "/c.pem",
            "kafka.ssl.key.password": PASSWORD + "k",
            "kafka.unknown.thing": "x",
        }
    )
    for text in (repr(o), str(o), repr(o.client_config), caplog.text):
        assert PASSWORD not in text
    restored = pickle.loads(pickle.dumps(o))
    assert restored.client_config.sasl_password.reveal() == PASSWORD


# ---- the option table -------------------------------------------------------------------


def test_option_names_are_unique_and_cover_what_the_parser_reads():
    names = reader_option_names()
    assert len(names) == len(set(n.lower() for n in names)) == len(READER_OPTIONS)
    for name in (
        "kafka.bootstrap.servers",
        "subscribe",
        "subscribePattern",
        "assign",
        "startingOffsets",
        "endingOffsets",
        "startingTimestamp",
        "endingTimestamp",
        "startingOffsetsByTimestamp",
        "endingOffsetsByTimestamp",
        "startingOffsetsByTimestampStrategy",
        "failOnDataLoss",
        "minPartitions",
        "maxRecordsPerPartition",
        "includeHeaders",
        "kafkaConsumer.pollTimeoutMs",
        "fetchOffset.numRetries",
        "fetchOffset.retryIntervalMs",
        "kafka.isolation.level",
        "maxOffsetsPerTrigger",
        "minOffsetsPerTrigger",
        "maxTriggerDelay",
        "maxBytesPerTrigger",
        "commitOffsetsToGroup",
        "kafka.security.protocol",
        "kafka.sasl.mechanism",
        "kafka.sasl.username",
        "kafka.sasl.password",
        "kafka.sasl.jaas.config",
        "kafka.ssl.cafile",
        "kafka.ssl.certfile",
        "kafka.ssl.keyfile",
        "kafka.ssl.key.password",
        "kafka.ssl.endpoint.identification.algorithm",
        "kafka.fetch.max.bytes",
        "kafka.max.partition.fetch.bytes",
        "kafka.fetch.max.wait.ms",
        "kafka.fetch.min.bytes",
        "kafka.request.timeout.ms",
        "kafka.client.id",
        "kafka.group.id",
    ):
        assert name in names


def test_every_documented_option_is_accepted_without_warning(caplog):
    caplog.set_level(logging.WARNING, logger="pykafka.source")
    parse({"kafka.request.timeout.ms": "100", "kafka.client.id": "x", "minPartitions": "2"})
    assert caplog.text == ""


def test_markdown_table_lists_every_option():
    table = options_table_markdown()
    for name in reader_option_names():
        assert re.search(rf"\| `{re.escape(name)}` \|", table)


def test_reader_options_type_is_exported():
    assert isinstance(parse(), ReaderOptions)


# ---- as lenient as Spark's JSON, -1/-2 timestamps (issue 17 item 14) --------------------


def test_offsets_json_takes_numbers_without_a_fraction_and_signed_partition_keys():
    """Spark's json4s reads 5.0 as the long 5 and parses keys with Integer.parseInt."""
    o = parse(
        {"startingOffsets": '{"t":{"0":5.0,"+1":-2.0}}', "endingOffsets": '{"t":{"0":7,"1":-1}}'}
    )
    assert o.starting_offsets.as_dict == {("t", 0): 5, ("t", 1): -2}
    assert all(type(v) is int for v in o.starting_offsets.as_dict.values())
    o = parse({"assign": '{"t":[0.0,2]}'}, drop=("subscribe",))
    assert o.subscription.partitions == (("t", 0), ("t", 2))


@pytest.mark.parametrize(
    "value, shown",
    [
        ('{"t":{"0":5.5}}', "5.5"),
        ('{"t":{"0":null}}', "null"),
        ('{"t":{"0":true}}', "true"),
        ('{"t":{"0":1e19}}', "1e+19"),
        ('{"t":{"0":9223372036854775808}}', "9223372036854775808"),
    ],
)
def test_offsets_spark_would_truncate_or_zero_are_refused(value, shown):
    """Where json4s truncates (5.5 -> 5), wraps or unboxes null to 0, a silent wrong
    offset would follow: refused, naming the partition (docs/differences.md)."""
    message = fails({"startingOffsets": value}, "startingOffsets")
    assert "t-0" in message and shown in message


@pytest.mark.parametrize("value", ['{"t":[]}', '{"t":null}', "{}", ' {"t":[],"u":[]} '])
def test_assign_of_no_partitions_reads_nothing_as_in_spark(value, caplog):
    caplog.set_level(logging.WARNING, logger="pykafka.source")
    o = parse({"assign": value}, drop=("subscribe",))
    assert o.subscription == Subscription("assign", partitions=())
    assert "names no partition, so the query reads nothing" in caplog.text


@pytest.mark.parametrize("streaming", [False, True])
def test_minus_one_and_minus_two_timestamps_mean_latest_and_earliest(streaming):
    """Spark passes timestamps to ListOffsets as they are: -1 asks for the latest offset
    and -2 for the earliest (resolved against a broker in test_source_planning)."""
    o = parse({"startingOffsetsByTimestamp": '{"t":{"0":-1,"1":-2}}'}, streaming=streaming)
    assert o.starting_offsets.as_dict == {("t", 0): -1, ("t", 1): -2}
    o = parse({"startingTimestamp": " -2 "}, streaming=streaming)
    assert o.starting_offsets == GlobalTimestamp(-2, "error", "startingTimestamp")
    fails(
        {"startingOffsetsByTimestamp": '{"t":{"0":-3}}'},
        "startingOffsetsByTimestamp",
        streaming=streaming,
    )


def test_start_timestamp_is_not_compared_with_a_latest_end():
    o = parse({"startingTimestamp": "1000", "endingTimestamp": "-1"})
    assert o.ending_offsets == GlobalTimestamp(-1, "error", "endingTimestamp")
    o = parse(
        {
            "startingOffsetsByTimestamp": '{"t":{"0":1000}}',
            "endingOffsetsByTimestamp": '{"t":{"0":-1}}',
        }
    )
    assert o.ending_offsets.as_dict == {("t", 0): -1}


# ---- check_reader_options: what load() raises (issue 17 item 10) -------------------------


@pytest.mark.parametrize(
    "extra, drop, option",
    [
        ({}, ("subscribe",), "subscribe"),
        ({"minPartitions": "0"}, (), "minPartitions"),
        ({"startingOffsets": "{bad"}, (), "startingOffsets"),
        ({"kafka.auto.offset.reset": "earliest"}, (), "auto.offset.reset"),
        ({"includeHeaders": "yes"}, (), "includeHeaders"),
        ({}, ("kafka.bootstrap.servers",), "kafka.bootstrap.servers"),
    ],
)
def test_load_check_raises_what_is_wrong_for_batch_and_stream_alike(extra, drop, option):
    opts = {k: v for k, v in {**BASE, **extra}.items() if k not in drop}
    with pytest.raises(ConfigError) as info:
        check_reader_options(opts)
    assert option in str(info.value)
    assert "(in a batch query)" not in str(info.value)


@pytest.mark.parametrize(
    "extra",
    [{"startingOffsets": "latest"}, {"endingOffsets": "latest"}, {"maxOffsetsPerTrigger": "10"}],
)
def test_load_check_leaves_errors_of_one_kind_of_query_to_the_query(extra, caplog):
    caplog.set_level(logging.DEBUG)
    check_reader_options({**BASE, **extra})
    assert caplog.text == ""  # quiet: the query itself warns, knowing its kind


def test_load_check_names_both_errors_when_each_kind_fails_differently():
    with pytest.raises(ConfigError) as info:
        check_reader_options({**BASE, "startingOffsets": "latest", "endingOffsets": "latest"})
    message = str(info.value)
    assert "can't be latest for batch queries on Kafka (in a batch query)" in message
    assert (
        "endingOffsets: ending offset not valid in streaming queries (in a streaming "
        "query)" in message
    )


def test_load_check_does_not_swallow_later_warnings(caplog):
    caplog.set_level(logging.WARNING, logger="pykafka.source")
    check_reader_options({**BASE, "kafka.some.unknown": "1"})
    parse({"kafka.some.unknown": "1"})
    assert "kafka.some.unknown" in caplog.text
