"""The offset, timestamp and partition JSON of the reader's options.

``startingOffsets``/``endingOffsets`` (``{"topicA":{"0":23,"1":-1}}``),
``startingOffsetsByTimestamp``/``endingOffsetsByTimestamp`` (a timestamp per partition) and
``assign`` (``{"topicA":[0,1]}``), parsed into sorted tuples of the ``offset_specs`` types.
Errors name the option and show an example, as Spark's ``JsonUtils`` does.

As lenient as Spark's parser (json4s) where that leniency is harmless: a number written
with a fraction of zero (``5.0``) is the integer it spells, a partition key may carry a
``+`` sign, ``assign`` may name a topic with no partitions (``{"t":[]}``, or ``null``) and
may be empty (``{}``: nothing to read). Spark's parser also turns ``5.7`` into 5 and a
``null`` offset into 0; those are refused here, naming the partition, since they are
almost surely mistakes.
"""

from __future__ import annotations

import json
import re

from kafka_common.option_map import INT32_MAX, INT64_MAX
from protocol.errors import ConfigError

from .offset_specs import EARLIEST, SpecificOffsets, SpecificTimestamps, TopicPartition, format_tp

__all__ = ["parse_offsets_json", "parse_timestamps_json", "parse_assign"]


def _json_object(option: str, text: str, example: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise ConfigError(f"{option}: Expected e.g. {example}, got {text}")
    return value


def _int_value(value: object) -> int | None:
    """A JSON integer, or a JSON number with no fraction (``5.0``, as Spark reads it), in
    the range of a Java long; else None (bools, strings, null, ``5.5``)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and -INT64_MAX - 1 <= value <= INT64_MAX:
        return value
    return None


def _partition_number(option: str, topic: str, key: object, text: str, example: str) -> int:
    number = None
    if isinstance(key, str) and re.fullmatch(r"\+?[0-9]+", key.strip()):
        number = int(key)
    elif _int_value(key) is not None:
        number = _int_value(key)
    if number is None or not 0 <= number <= INT32_MAX:
        raise ConfigError(
            f"{option}: partition {key!r} of topic {topic!r} is not a "
            f"partition number. Expected e.g. {example}, got {text}"
        )
    return number


def _parse_partition_values(
    option: str, text: str, example: str, what: str, valid: str
) -> tuple[tuple[TopicPartition, int], ...]:
    """``{"topic": {"0": value, ...}, ...}`` into sorted ``((topic, p), value)`` pairs;
    a value below -2 (earliest) is refused, naming what to use (``valid``)."""
    data = _json_object(option, text, example)
    pairs: dict[TopicPartition, int] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise ConfigError(f"{option}: Expected e.g. {example}, got {text}")
        for key, value in parts.items():
            partition = _partition_number(option, topic, key, text, example)
            number = _int_value(value)
            if number is None:
                raise ConfigError(
                    f"{option}: the {what} of {topic}-{partition} must be an "
                    f"integer, got {json.dumps(value)}. Expected e.g. {example}"
                )
            pairs[(topic, partition)] = number
    result = tuple(sorted(pairs.items()))
    for tp, number in result:
        if number < EARLIEST:
            raise ConfigError(
                f"{option}: {what} {number} for {format_tp(tp)} is not valid; use {valid}"
            )
    return result


_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
_TIMESTAMPS_EXAMPLE = (
    '{"topicA": {"0": 123456789, "1": 123456789}, "topicB": {"0": 123456789, "1": 123456789}}'
)
_ASSIGN_EXAMPLE = '{"topicA":[0,1],"topicB":[0,1]}'


def parse_offsets_json(option: str, text: str) -> SpecificOffsets:
    valid = "an offset >= 0, -2 for earliest or -1 for latest"
    offsets = _parse_partition_values(option, text, _OFFSETS_EXAMPLE, "offset", valid)
    return SpecificOffsets(offsets, option)


def parse_timestamps_json(option: str, text: str, strategy: str) -> SpecificTimestamps:
    """Timestamps (ms) per partition. As in Spark, whose admin client passes them to
    ListOffsets as they are, -1 stands for the latest offset and -2 for the earliest."""
    valid = "milliseconds since the epoch (>= 0), -1 for latest or -2 for earliest"
    timestamps = _parse_partition_values(option, text, _TIMESTAMPS_EXAMPLE, "timestamp", valid)
    return SpecificTimestamps(timestamps, strategy, option)


def parse_assign(text: str) -> tuple[TopicPartition, ...]:
    """The partitions of ``assign``, sorted; possibly none (``{}``, ``{"t":[]}``), as
    Spark accepts them: such a query reads nothing."""
    if not text.strip().startswith("{"):
        raise ConfigError(
            f"No topicpartitions to assign as specified value for option 'assign' is '{text}'"
        )
    data = _json_object("assign", text, _ASSIGN_EXAMPLE)
    found: dict[TopicPartition, None] = {}
    for topic, parts in data.items():
        if parts is None:
            continue
        if not isinstance(parts, list):
            raise ConfigError(f"assign: Expected e.g. {_ASSIGN_EXAMPLE}, got {text}")
        for part in parts:
            if isinstance(part, str):  # Spark's parser takes no quoted numbers here
                raise ConfigError(
                    f"assign: partition {part!r} of topic {topic!r} is not a "
                    f"partition number. Expected e.g. {_ASSIGN_EXAMPLE}, got "
                    f"{text}"
                )
            found[(topic, _partition_number("assign", topic, part, text, _ASSIGN_EXAMPLE))] = None
    return tuple(sorted(found))
