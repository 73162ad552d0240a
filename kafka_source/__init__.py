"""The Kafka reader of pyspark-pykafka: ``spark.read/readStream.format("pykafka")``."""

from .shadowing import check_own_modules

check_own_modules(__spec__)  # a user's protocol.py must not pass for ours (issue 32)

from .datasource import KafkaDataSource  # noqa: E402

__all__ = ["KafkaDataSource"]
