"""Spark 4 registers Python data sources found in top-level ``pyspark_*`` modules that
expose ``DefaultSource``: this module makes ``format("pykafka")`` work after install.

It also offers the lag helper (``kafka_source.lag``): the offsets a stream is behind the
latest, from its progress reports, as Spark's JVM Kafka source reports them."""

from kafka_source import KafkaDataSource as DefaultSource
from kafka_source.lag import KafkaLagListener, offsets_behind_latest, with_lag_metrics

__all__ = ["DefaultSource", "KafkaLagListener", "offsets_behind_latest", "with_lag_metrics"]
