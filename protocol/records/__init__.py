"""Kafka records: batches v2, legacy message sets, compression, and the Arrow codec.

- ``decode_records``: the RECORDS bytes of one partition of a Fetch response -> a
  ``pyarrow.RecordBatch`` with the columns of Spark's Kafka source, and the next offset.
- ``encode_batch``: Arrow columns -> the bytes of one record batch v2 for a Produce request;
  ``split_for_batch_size`` cuts rows into batches under a size limit.
- ``batch``/``legacy``/``compression``: the formats themselves, with a per-record reference
  codec the vectorised one is tested against.
"""

from .compression import DEFAULT_MAX_DECOMPRESSED, codec_id
from .decode_arrow import SCHEMA, SCHEMA_WITH_HEADERS, decode_records, spark_schema
from .encode_arrow import encode_batch, record_sizes, split_for_batch_size

__all__ = ["DEFAULT_MAX_DECOMPRESSED", "SCHEMA", "SCHEMA_WITH_HEADERS", "codec_id",
           "decode_records", "encode_batch", "record_sizes", "spark_schema",
           "split_for_batch_size"]
