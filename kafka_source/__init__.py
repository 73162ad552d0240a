"""The Kafka reader of pyspark-pykafka: ``spark.read/readStream.format("pykafka")``."""

from .datasource import KafkaDataSource

__all__ = ["KafkaDataSource"]
