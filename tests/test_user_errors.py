"""A connector error reaches the user as its message and at most three frames of the
connector's code (``kafka_common.user_errors``); the full traceback stays in the DEBUG log.
It used to come wrapped in 13 to 39 lines of ``retry.py``, ``with_retries``,
``_any_connection``..., the one useful sentence last. A bug's exception keeps every frame.

The errors are real: a connection refused (nothing listens on port 1), a topic missing on
librdkafka's mock cluster, and one Spark query."""

from __future__ import annotations

import logging
import re
import traceback

import pytest
from pyspark.sql.datasource import DataSourceReader

from kafka_common.user_errors import MAX_FRAMES, user_errors
from kafka_sink.writer import KafkaArrowWriter, KafkaStreamArrowWriter
from kafka_source.batch_reader import KafkaBatchReader, KafkaPushdownBatchReader
from kafka_source.options import parse_reader_options
from kafka_source.stream_reader import KafkaStreamReader
from protocol.errors import ConfigError, KafkaConnectionError
from pyspark_pykafka import KafkaDataSource

from .helpers.broker_setup import create_topic

NOWHERE = "127.0.0.1:1"  # nothing listens on port 1: connections are refused at once
OUR_FRAME = re.compile(
    r'File "[^"]*[/\\](?:kafka_source|kafka_sink|kafka_common|protocol|pyspark_pykafka)[/\\]'
)
REFUSED = f"could not connect to any of the bootstrap servers {NOWHERE}"


def _options(bootstrap: str, topic: str = "t") -> dict:
    return {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "fetchOffset.retryIntervalMs": "10",
    }


def _our_frames(text: str) -> list[str]:
    return OUR_FRAME.findall(text)


def test_an_unreachable_bootstrap_shows_its_message_and_three_frames(caplog):
    reader = KafkaBatchReader(parse_reader_options(_options(NOWHERE)))
    with caplog.at_level(logging.DEBUG, logger="pykafka.errors"):
        with pytest.raises(KafkaConnectionError) as info:
            reader.partitions()
    shown = "".join(traceback.format_exception(info.value))
    assert 0 < len(_our_frames(shown)) <= MAX_FRAMES, shown
    last = shown.rstrip().splitlines()[-1]
    assert last.startswith(f"protocol.errors.KafkaConnectionError: {REFUSED}")
    assert "in partitions" in shown  # the method Spark called
    assert "in _any_connection" in shown  # and where it was raised
    assert "The above exception" not in shown  # its cause's message is already in it

    # the full traceback, at DEBUG
    logged = [r for r in caplog.records if r.name == "pykafka.errors"]
    assert len(logged) == 1 and logged[0].levelno == logging.DEBUG
    full = caplog.text
    assert len(_our_frames(full)) > 2 * MAX_FRAMES, full
    assert "with_retries" in full and "retry.py" in full


def test_a_missing_topic_on_a_real_broker_shows_three_frames(mock_cluster, topic_name):
    create_topic(mock_cluster, f"{topic_name}-other", 1)  # the cluster answers, ours is absent
    reader = KafkaBatchReader(parse_reader_options(_options(mock_cluster.bootstrap, topic_name)))
    with pytest.raises(ConfigError) as info:
        reader.partitions()
    shown = "".join(traceback.format_exception(info.value))
    assert 0 < len(_our_frames(shown)) <= MAX_FRAMES, shown
    assert f"subscribe: topic(s) '{topic_name}' do not exist in the cluster" in shown


def test_an_option_error_at_load_shows_three_frames():
    source = KafkaDataSource({"kafka.bootstrap.servers": NOWHERE, "subscibe": "t"})
    with pytest.raises(ConfigError, match="Did you mean 'subscribe'") as info:
        source.schema()
    shown = "".join(traceback.format_exception(info.value))
    assert 0 < len(_our_frames(shown)) <= MAX_FRAMES, shown


def _deep(n: int, error: Exception):
    if n == 0:
        raise error
    return _deep(n - 1, error)


@user_errors
class _Reader(DataSourceReader):
    """A reader whose errors are raised ten calls deep."""

    def __init__(self, error: Exception):
        self.error = error

    def partitions(self):
        return _deep(10, self.error)

    def read(self, partition):
        yield 1
        _deep(10, self.error)


@pytest.mark.parametrize("method", ["partitions", "read"])
def test_a_bug_keeps_every_frame_and_an_error_of_ours_is_trimmed(method):
    def call(error):
        with pytest.raises(type(error)) as info:
            result = getattr(_Reader(error), method)(*(() if method == "partitions" else (0,)))
            list(result)
        return traceback.extract_tb(info.value.__traceback__)

    bug = call(IndexError("list index out of range"))
    assert sum(f.name == "_deep" for f in bug) == 11  # untouched
    ours = call(ConfigError("topic: bad"))
    assert [f.name for f in ours][-3:] == [
        "generator" if method == "read" else "method",
        method,
        "_deep",
    ]


def test_a_cause_keeps_its_message_and_loses_its_frames():
    def raise_with_cause():
        try:
            _deep(5, OSError("the disk is full"))
        except OSError as e:
            raise ConfigError("checkpoint: cannot write") from e

    @user_errors
    class Reader(DataSourceReader):
        def partitions(self):
            raise_with_cause()

        def read(self, partition):
            yield from ()

    with pytest.raises(ConfigError) as info:
        Reader().partitions()
    shown = "".join(traceback.format_exception(info.value))
    assert "OSError: the disk is full" in shown
    assert "_deep" not in shown and "raise_with_cause" in shown


@pytest.mark.parametrize(
    "cls",
    [
        KafkaDataSource,
        KafkaBatchReader,
        KafkaPushdownBatchReader,
        KafkaStreamReader,
        KafkaArrowWriter,
        KafkaStreamArrowWriter,
    ],
)
def test_every_method_spark_calls_is_an_entry_point(cls):
    from kafka_common.user_errors import _spark_methods

    ours = [
        name
        for name in _spark_methods(cls)
        if getattr(cls, name).__module__.split(".")[0] != "pyspark"
    ]
    assert ours
    assert [n for n in ours if not getattr(getattr(cls, n), "__pykafka_user_errors__", 0)] == []


@pytest.mark.spark
def test_spark_shows_the_message_and_three_frames_of_ours(spark):
    """What Spark reports from its Python planning worker (a read of a wrong bootstrap
    address): the message and at most three frames of the connector's files."""
    reader = spark.read.format("pykafka")
    for key, value in _options(NOWHERE).items():
        reader = reader.option(key, value)
    with pytest.raises(Exception) as info:
        reader.load().collect()
    message = str(info.value)
    assert REFUSED in message
    assert 0 < len(_our_frames(message)) <= MAX_FRAMES, message
