"""Spark 4 registers Python data sources found in top-level ``pyspark_*`` modules that
expose ``DefaultSource``: this module makes ``format("pykafka")`` work after install."""

from kafka_source import KafkaDataSource as DefaultSource

__all__ = ["DefaultSource"]
