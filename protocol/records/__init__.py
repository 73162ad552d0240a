"""Kafka records: batches v2, legacy message sets, compression, and the Arrow codec."""

from .compression import DEFAULT_MAX_DECOMPRESSED, codec_id
from .decode_arrow import SCHEMA, SCHEMA_WITH_HEADERS, decode_records, spark_schema

__all__ = ["DEFAULT_MAX_DECOMPRESSED", "SCHEMA", "SCHEMA_WITH_HEADERS", "codec_id",
           "decode_records", "spark_schema"]
