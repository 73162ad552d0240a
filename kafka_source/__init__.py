"""The Kafka reader of pyspark-pykafka: ``spark.read/readStream.format("pykafka")``.

The data source, which hands out this package's readers and ``kafka_sink``'s writers, is
``pyspark_pykafka.KafkaDataSource``: the reader imports nothing of the writer."""

from .shadowing import check_own_modules

check_own_modules(__spec__)  # a user's protocol.py must not pass for ours (issue 32)
