"""The ``pykafka`` data source: Spark's Kafka connector, in Python.

Registered automatically as ``pyspark_pykafka.DefaultSource`` when the package is
installed (or on the executors' Python path); otherwise register it by hand with
``spark.dataSource.register(KafkaDataSource)``. The options are documented in
``kafka_source.options`` and the README.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource

from protocol.errors import ConfigError

from .spark_schema import kafka_schema, kafka_schema_ddl


def _include_headers(options) -> bool:
    value = {k.lower(): v for k, v in options.items()}.get("includeheaders", "false")
    return str(value).strip().lower() == "true"


class KafkaDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "pykafka"

    def schema(self) -> str:
        return kafka_schema_ddl(_include_headers(self.options))

    def _check_schema(self, schema) -> None:
        if schema != kafka_schema(_include_headers(self.options)):
            raise ConfigError(
                "Kafka source has a fixed schema and cannot be set with a custom one "
                f"(pykafka's schema is: {self.schema()})")

    def reader(self, schema):
        from .batch_reader import KafkaBatchReader, KafkaPushdownBatchReader, pushdown_enabled
        from .options import parse_reader_options
        self._check_schema(schema)
        cls = KafkaPushdownBatchReader if pushdown_enabled() else KafkaBatchReader
        return cls(parse_reader_options(self.options))

    def streamReader(self, schema):
        from .options import parse_reader_options
        from .stream_reader import KafkaStreamReader
        self._check_schema(schema)
        return KafkaStreamReader(parse_reader_options(self.options, for_streaming=True))

    def writer(self, schema, overwrite: bool):
        from kafka_sink.writer import create_writer
        return create_writer(self.options, schema, overwrite)

    def streamWriter(self, schema, overwrite: bool):
        from kafka_sink.writer import create_stream_writer
        return create_stream_writer(self.options, schema, overwrite)
