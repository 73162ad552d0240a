"""Every check made before a record is sent, with Spark's and Kafka's messages.

Two stages:

- ``check_save_mode`` and ``check_schema`` run on the driver in ``writer()``, from the
  DataFrame's schema alone: a missing ``value`` column, no topic (neither the ``topic``
  option nor a ``topic`` column), a column of the wrong type. The messages are those of
  Spark's ``KafkaWriter`` (which Spark wraps in an AnalysisException).
- ``check_rows`` runs in each task on every Arrow batch, before any of the batch's rows is
  handed to the producer: a null topic (with the number of such rows), an unknown topic, a
  partition outside the topic's range, a negative timestamp, a null header key, a record
  larger than ``kafka.max.request.size`` (with ``deadLetterTopic``, the task sends such a
  record there instead: ``task``). Each message names the column or option, the
  topic and partition, and the first offending row of the batch.

All of them raise ``ConfigError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping
from typing import TYPE_CHECKING

from protocol.errors import ConfigError

if TYPE_CHECKING:  # numpy is the task's: the planner checks the schema only
    import numpy as np

__all__ = [
    "WritePlan",
    "check_save_mode",
    "check_schema",
    "check_rows",
    "too_large_message",
    "TOPIC",
    "KEY",
    "VALUE",
    "HEADERS",
    "PARTITION",
    "TIMESTAMP",
    "HEADERS_CATALOG_STRING",
    "BATCH_OVERHEAD",
]

TOPIC, KEY, VALUE, HEADERS, PARTITION, TIMESTAMP = (
    "topic",
    "key",
    "value",
    "headers",
    "partition",
    "timestamp",
)
HEADERS_CATALOG_STRING = "array<struct<key:string,value:binary>>"
#: Bytes of a batch v2 header: Java counts them in a record's serialized size bound.
BATCH_OVERHEAD = 61


@dataclass(frozen=True, slots=True)
class WritePlan:
    """Which columns a write uses and how to read them; decided once on the driver."""

    topic_option: str | None  # the topic option wins over a topic column, as in Spark
    topic_column: bool
    key_column: bool
    headers_column: bool
    partition_column: bool
    timestamp_kind: str | None  # "timestamp", "double" or None


#: What to write instead of a refused save mode: the one mode both Spark and Kafka take.
SAVE_MODE_HINT = (
    'Write with .mode("append"): records are only ever appended to a topic, '
    "and Spark refuses its default save mode (ErrorIfExists) for Python data "
    "sources, so append must be named."
)


def check_save_mode(overwrite: bool, mode: str = "Overwrite") -> None:
    """Kafka only appends. Spark's Kafka sink also takes ErrorIfExists (its default) as
    append, and says so; Spark refuses that mode to a Python data source before asking it,
    so the one mode to name is append, and the message says exactly that."""
    if overwrite:
        raise ConfigError(f"Save mode {mode} not allowed for Kafka. {SAVE_MODE_HINT}")


def _unsupported(name: str, data_type, desired: str) -> ConfigError:
    return ConfigError(
        f"{name} attribute unsupported type {data_type.simpleString()}. "
        f"{name} must be a(n) {desired}"
    )


def _is_headers_type(data_type) -> bool:
    from pyspark.sql.types import ArrayType, BinaryType, StringType, StructType

    if not isinstance(data_type, ArrayType):
        return False
    element = data_type.elementType
    if not isinstance(element, StructType) or len(element.fields) != 2:
        return False
    key, value = element.fields
    return (
        key.name.lower() == "key"
        and isinstance(key.dataType, StringType)
        and value.name.lower() == "value"
        and isinstance(value.dataType, BinaryType)
    )


def check_schema(schema, topic_option: str | None, formatted=()) -> WritePlan:
    """Spark's ``KafkaWriter.validateQuery`` (plus its timestamp rule) on a ``StructType``.
    Column names are matched exactly, as Spark does. The columns in ``formatted`` (key,
    value under keyFormat/valueFormat) may be of any type: they are encoded first."""
    from pyspark.sql.types import BinaryType, DoubleType, IntegerType, StringType, TimestampType

    fields = {f.name: f.dataType for f in schema.fields}

    topic_column = False
    if topic_option is None:
        if TOPIC not in fields:
            raise ConfigError(
                "topic option required when no 'topic' attribute is present. "
                "Use the topic option for setting a topic."
            )
        if not isinstance(fields[TOPIC], StringType):
            raise _unsupported(TOPIC, fields[TOPIC], "string")
        topic_column = True
    if (
        KEY in fields
        and KEY not in formatted
        and not isinstance(fields[KEY], (StringType, BinaryType))
    ):
        raise _unsupported(KEY, fields[KEY], "string or binary")
    if VALUE not in fields:
        raise ConfigError("Required attribute 'value' not found")
    if VALUE not in formatted and not isinstance(fields[VALUE], (StringType, BinaryType)):
        raise _unsupported(VALUE, fields[VALUE], "string or binary")
    if HEADERS in fields and not _is_headers_type(fields[HEADERS]):
        raise _unsupported(HEADERS, fields[HEADERS], HEADERS_CATALOG_STRING)
    if PARTITION in fields and not isinstance(fields[PARTITION], IntegerType):
        raise _unsupported(PARTITION, fields[PARTITION], "int")
    timestamp_kind = None
    if TIMESTAMP in fields:
        data_type = fields[TIMESTAMP]
        if isinstance(data_type, TimestampType):
            timestamp_kind = "timestamp"
        elif isinstance(data_type, DoubleType):
            timestamp_kind = "double"
        else:
            raise _unsupported(TIMESTAMP, data_type, "double or timestamp")
    return WritePlan(
        topic_option=topic_option,
        topic_column=topic_column,
        key_column=KEY in fields,
        headers_column=HEADERS in fields,
        partition_column=PARTITION in fields,
        timestamp_kind=timestamp_kind,
    )


def _first(mask: np.ndarray) -> int:
    return int(mask.nonzero()[0][0])


def check_rows(
    rows,
    partition_counts: Mapping[str, int],
    max_request_size: int,
    lookup_ms: int = 0,
    *,
    dead_letters: bool = False,
) -> np.ndarray | None:
    """The data-dependent checks on one prepared Arrow batch (``columns.Rows``), in this
    order: null topics, unknown topics, partitions out of range, negative timestamps, null
    header keys, records too large. ``partition_counts`` has every topic that exists (the
    lookup took ``lookup_ms``). With ``dead_letters`` (``deadLetterTopic``) records too
    large are not an error: returns the mask of them (None when there are none)."""
    if rows.null_topics:
        raise ConfigError(
            f"null topic present in the data ({rows.null_topics} of {rows.n} rows in this "
            f"batch). Use the topic option for setting a default topic."
        )
    missing = [topic for topic in rows.topics if topic not in partition_counts]
    if missing:
        raise ConfigError(
            f"the records' topic(s) {', '.join(repr(t) for t in missing)} do not exist in "
            f"the cluster (Topic {missing[0]} not present in metadata after {lookup_ms} ms; "
            f"topics are not created by the writer: create it first)"
        )
    if rows.partition is not None:
        for t, topic in enumerate(rows.topics):
            count = partition_counts[topic]
            mine = rows.partition_valid & (rows.topic_codes == t)
            bad = mine & ((rows.partition < 0) | (rows.partition >= count))
            if bad.any():
                i = _first(bad)
                raise ConfigError(
                    f"partition column: Invalid partition given with record: "
                    f"{int(rows.partition[i])} is not in the range [0...{count}) of topic "
                    f"{topic!r}, which has {count} partitions ({int(bad.sum())} such rows in "
                    f"this batch, the first at row {i})"
                )
    if rows.timestamp_ms is not None:
        negative = rows.timestamp_valid & (rows.timestamp_ms < 0)
        if negative.any():
            i = _first(negative)
            raise ConfigError(
                f"timestamp column: Invalid timestamp: "
                f"{int(rows.timestamp_ms[i])}. Timestamp should always be "
                f"non-negative or null. (row {i} of this batch)"
            )
    if rows.null_header_keys:
        raise ConfigError(
            f"headers column: Null header keys are not permitted "
            f"({rows.null_header_keys} null keys in this batch)"
        )
    if rows.null_header_entries:
        raise ConfigError(
            f"headers column: a header entry is null "
            f"({rows.null_header_entries} in this batch); every entry needs "
            f"a key"
        )
    serialized = rows.sizes + BATCH_OVERHEAD
    too_large = serialized > max_request_size
    if not too_large.any():
        return None
    if dead_letters:
        return too_large
    i = _first(too_large)
    raise ConfigError(too_large_message(rows, i, max_request_size, int(too_large.sum())))


def too_large_message(rows, i: int, max_request_size: int, count: int | None = None) -> str:
    """Java's RecordTooLargeException message for row ``i``, naming the option."""
    serialized = int(rows.sizes[i]) + BATCH_OVERHEAD
    more = "" if count is None else f"; {count} such rows in this batch"
    return (
        f"The message is {serialized} bytes when serialized which is larger than "
        f"{max_request_size}, which is the value of the max.request.size configuration "
        f"(kafka.max.request.size). Topic {rows.topic_of(i)!r}, row {i} of this batch{more}."
    )
