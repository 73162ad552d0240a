"""Kafka records: batches v2, legacy message sets, compression, and the Arrow codec.

- ``decode_records``: the RECORDS bytes of one partition of a Fetch response -> a
  ``pyarrow.RecordBatch`` with the columns of Spark's Kafka source, and the next offset.
- ``encode_batch``: Arrow columns -> the bytes of one record batch v2 for a Produce request;
  ``split_for_batch_size`` cuts rows into batches under a size limit.
- ``batch``/``legacy``/``compression``: the formats themselves, with a per-record reference
  codec the vectorised one is tested against.
"""

import importlib
from typing import Any

# Imported on first use (PEP 562): a writer's process never loads the decoder (nor the
# pyarrow.compute it needs), a planner neither codec; each such import costs a fresh Python
# process tens of milliseconds on the first write of a session.
_LAZY = {
    "DEFAULT_MAX_DECOMPRESSED": "compression",
    "codec_id": "compression",
    "SCHEMA": "decode_arrow",
    "SCHEMA_WITH_HEADERS": "decode_arrow",
    "decode_records": "decode_arrow",
    "spark_schema": "decode_arrow",
    "encode_batch": "encode_arrow",
    "record_sizes": "encode_arrow",
    "split_for_batch_size": "encode_arrow",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
