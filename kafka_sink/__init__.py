"""The pykafka sink: ``df.write`` and ``writeStream`` to Kafka with an idempotent producer.

Spark reaches it through ``pyspark_pykafka.KafkaDataSource`` (format ``"pykafka"``), whose
``writer()`` and ``streamWriter()`` return the writers of ``kafka_sink.writer``. The
modules, one concern each: ``options`` (the writer's options), ``validation`` (schema and
data checks), ``columns`` (Arrow batches read into record columns), ``partitioner``
(murmur2 and sticky partitioning), ``batching`` (rows to encoded record batches),
``producer`` (the idempotent, pipelined producer of one task), ``writer`` (Spark's side).
"""

from .option_table import WRITER_OPTIONS, writer_option_names
from .options import WriterOptions, parse_writer_options

__all__ = ["WRITER_OPTIONS", "WriterOptions", "parse_writer_options", "writer_option_names"]
