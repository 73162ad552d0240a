"""The writer's driver-side check that the topic exists (and, with exactlyOnce, that the
brokers have transactions), against the session's Apache Kafka behind a fault proxy that
counts and cuts connections (``proxied_kafka``: clients that bootstrap through the proxy
reach the broker only through it): the tests judge the client's connections and Metadata
requests, which the proxy counts.

Spark's Python runner makes the streaming writer again at every micro-batch's commit, so
the check ran once per micro-batch: a new connection and a Metadata request each time,
and a connection cut during it failed the query (found by tests/test_soak_stream.py). It
now passes once per ``kafka.metadata.max.age.ms`` per process and configuration, and a
broken connection is retried up to ``kafka.max.block.ms``.
"""

from __future__ import annotations

import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from kafka_sink import writer
from kafka_sink.writer import create_stream_writer
from protocol.client import pool
from protocol.errors import ConfigError

from .helpers.broker_setup import create_topic
from .helpers.topic_check import METADATA

SCHEMA = StructType([StructField("value", BinaryType())])


@pytest.fixture(autouse=True)
def forget_checks():
    writer._CHECKED.clear()
    yield
    writer._CHECKED.clear()


def _checks() -> int:
    """Clients the checks took from this process's pool (``protocol.client.pool``)."""
    stats = pool.default_pool().stats
    return stats["created"] + stats["reused"]


def test_a_passed_check_is_not_repeated_for_each_micro_batch(proxy, proxied, topic_name):
    proxy, kafka = proxied
    create_topic(kafka, topic_name, 2)
    create_topic(kafka, topic_name + "-2", 1)
    opts = {"kafka.bootstrap.servers": proxy.bootstrap, "topic": topic_name}
    create_stream_writer(opts, SCHEMA, False)
    accepted, checks = proxy.stats["connections"], _checks()
    for _ in range(5):  # the commits of five micro-batches
        create_stream_writer(opts, SCHEMA, False)
    assert proxy.stats["connections"] == accepted and _checks() == checks
    # another topic is checked again (on the pooled client's connections) ...
    create_stream_writer({**opts, "topic": topic_name + "-2"}, SCHEMA, False)
    assert _checks() == checks + 1
    # ... and so are other connection settings (another client, so new connections)
    accepted = proxy.stats["connections"]
    create_stream_writer({**opts, "kafka.client.id": "other"}, SCHEMA, False)
    assert _checks() == checks + 2 and proxy.stats["connections"] > accepted
    # a missing topic is never remembered as checked
    with pytest.raises(ConfigError, match="not present in metadata"):
        create_stream_writer(
            {**opts, "topic": topic_name + "-missing", "kafka.max.block.ms": "300"}, SCHEMA, False
        )
    with pytest.raises(ConfigError, match="not present in metadata"):
        create_stream_writer(
            {**opts, "topic": topic_name + "-missing", "kafka.max.block.ms": "300"}, SCHEMA, False
        )


@pytest.mark.parametrize(
    "extra", [{}, {"exactlyOnce": "true", "transactionalIdPrefix": "topic-check"}]
)
def test_a_connection_cut_during_the_check_is_retried(proxy, proxied, topic_name, extra):
    """With exactlyOnce the first Metadata request is the transactions check's, which
    failed the soak's query at a micro-batch's commit before."""
    proxy, kafka = proxied
    create_topic(kafka, topic_name, 1)
    proxy.drop_after_request(METADATA, count=2)  # two answers replaced by a cut
    create_stream_writer(
        {"kafka.bootstrap.servers": proxy.bootstrap, "topic": topic_name, **extra}, SCHEMA, False
    )
    assert proxy.pending_drops(METADATA) == 0


def test_the_retries_end_at_max_block_ms(proxy, proxied, topic_name):
    from protocol.errors import KafkaConnectionError, KafkaTimeoutError

    proxy, kafka = proxied
    create_topic(kafka, topic_name, 1)
    proxy.drop_after_request(METADATA, count=1000)
    with pytest.raises((KafkaConnectionError, KafkaTimeoutError)):
        create_stream_writer(
            {
                "kafka.bootstrap.servers": proxy.bootstrap,
                "topic": topic_name,
                "kafka.max.block.ms": "500",
            },
            SCHEMA,
            False,
        )
    assert len(writer._CHECKED) == 0


def test_a_recheck_logs_its_retries_until_a_time_not_of_a_count(proxy, proxied, topic_name, caplog):
    """A check that passed before is retried up to ``kafka.max.block.ms`` with no count of
    its own: its warnings say until when, not "attempt 1 of 9223372036854775807"."""
    import logging
    import re
    import time

    proxy, kafka = proxied
    create_topic(kafka, topic_name, 1)
    opts = {"kafka.bootstrap.servers": proxy.bootstrap, "topic": topic_name}
    create_stream_writer(opts, SCHEMA, False)
    (key,) = writer._CHECKED.keys()
    writer._CHECKED.put(key, time.monotonic() - 3600)  # passed once, long ago
    proxy.drop_after_request(METADATA, count=2)  # one attempt fails (two cuts)
    with caplog.at_level(logging.WARNING, logger="pykafka.sink"):
        create_stream_writer(opts, SCHEMA, False)
    retries = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    assert retries, caplog.text
    assert all(re.search(r"\(attempt \d+, until \d\d:\d\d:\d\d\)", m) for m in retries), retries
    assert " of 9223372036854775807" not in caplog.text
