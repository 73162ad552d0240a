"""The one table of the ``valueFormat``/``keyFormat`` options, with a reader column and a
writer column.

Each row names an option once and says, for each side, its default and meaning (what the
option tables of the reader and the writer show), or that the side does not take it. A
writer refuses the reader's options it has no use for (``READER_ONLY``), naming them, rather
than passing over them in silence. A new option is one new row.
"""

from __future__ import annotations

from typing import NamedTuple

from kafka_common.schema_registry import REGISTRY_OPTIONS

__all__ = [
    "FORMATS",
    "CONVERSION_OPTIONS",
    "Doc",
    "FormatOption",
    "READER_ONLY",
    "FORMAT_OPTIONS",
    "reader_format_options",
    "writer_format_options",
    "writer_refuses",
]

#: valueFormat/keyFormat values, in the order the reader's error lists them.
FORMATS = ("binary", "avro", "protobuf", "json")

#: Spark's from_avro / from_protobuf options, passed through to the codecs as given.
CONVERSION_OPTIONS = (
    "enableStableIdentifiersForUnionType",
    "stableIdentifierPrefixForUnionType",
    "recursiveFieldMaxDepth",
    "datetimeRebaseMode",
    "avroSchemaEvolutionMode",
    "enums.as.ints",
    "emit.default.values",
    "recursive.fields.max.depth",
    "convert.any.fields.to.json",
    "unwrap.primitive.wrapper.types",
    "retain.empty.message.types",
    "upcast.unsigned.ints",
)


class Doc(NamedTuple):
    """One side's default and meaning of an option."""

    default: str
    meaning: str


#: The writer column of a reader option the writer refuses (it has no use for it).
READER_ONLY = "reader only"


class FormatOption(NamedTuple):
    """One option: the reader's and the writer's ``Doc``, ``None`` when that side does not
    take it, or (writer) ``READER_ONLY``."""

    name: str
    reader: Doc | None
    writer: Doc | str | None


def _both(name: str, default: str, meaning: str) -> FormatOption:
    return FormatOption(name, Doc(default, meaning), Doc(default, meaning))


_SAME_FOR_KEY = "The same for the key."

#: Every format option, in the order the reader's table lists them (the writer's table
#: lists its own in this order too).
FORMAT_OPTIONS: tuple[FormatOption, ...] = (
    FormatOption(
        "valueFormat",
        Doc(
            '"binary"',
            "binary (the value as bytes), avro, protobuf or json: decode "
            "Confluent-framed values into a typed value column, as from_avro/from_protobuf "
            "would, plus valueSchemaId.",
        ),
        Doc(
            '"binary"',
            "binary (value is string or binary), avro, protobuf or json: the "
            "value column (a struct, or a primitive for avro and json) is written in "
            "Confluent's wire format (magic byte, schema id, Protobuf message indexes) with "
            "the subject's schema.",
        ),
    ),
    FormatOption(
        "keyFormat",
        Doc('"binary"', "The same for the key (keySchemaId)."),
        Doc('"binary"', "The same for the key column."),
    ),
    *(_both(*option) for option in REGISTRY_OPTIONS),
    FormatOption(
        "valueSubject",
        Doc(
            '"<topic>-value"',
            "Registry subject of the value schemas (TopicNameStrategy by "
            "default); required when several topics, a pattern or an assign of several "
            "topics is read.",
        ),
        Doc(
            '"<topic>-value"',
            "Registry subject the value schema is looked up in or "
            "registered under; required without the topic option.",
        ),
    ),
    FormatOption(
        "keySubject",
        Doc('"<topic>-key"', "Registry subject of the key schemas."),
        Doc('"<topic>-key"', _SAME_FOR_KEY),
    ),
    FormatOption(
        "valueSchemaVersion",
        Doc(
            '"latest"',
            "Version of the subject used as the reader schema, resolved once "
            "when the query is planned (so the DataFrame's schema is fixed); every writer "
            "schema is resolved against it by the format's evolution rules.",
        ),
        Doc(
            '"latest"',
            "Version of the subject whose schema the values are written with (its id goes "
            "in the wire format), where Confluent's serializers pin a registered schema "
            "with use.schema.id; resolved once when the write starts. Not with "
            "valueSchema or auto.register.schemas=true.",
        ),
    ),
    FormatOption(
        "keySchemaVersion", Doc('"latest"', _SAME_FOR_KEY), Doc('"latest"', _SAME_FOR_KEY)
    ),
    FormatOption(
        "valueSchema",
        Doc(
            "none",
            "An explicit reader schema instead of the registry's: Avro schema JSON, "
            '.proto text (with valueMessageName), or for json a Spark DDL string ("id INT, '
            'name STRING, tags ARRAY<STRING>": values converted as from_json converts '
            "them) or a JSON Schema document (a JSON object).",
        ),
        Doc(
            "the subject's latest",
            "The schema to write the values with (Avro JSON, .proto "
            "text, JSON Schema: not a DDL), looked up in the subject or registered with "
            "auto.register.schemas; by default the subject's latest version (or "
            "valueSchemaVersion's), or with "
            "auto.register.schemas (avro, json) the schema derived from the column's type "
            "as Spark's to_avro derives it.",
        ),
    ),
    FormatOption(
        "keySchema", Doc("none", _SAME_FOR_KEY), Doc("the subject's latest", _SAME_FOR_KEY)
    ),
    FormatOption(
        "valueMessageName",
        Doc(
            "first message",
            "Protobuf: the (fully qualified) message of the .proto to read "
            "as the value; a value whose Confluent message index names another message is a "
            "corrupt record.",
        ),
        Doc("first message", "Protobuf: the message of the .proto the value column is written as."),
    ),
    FormatOption(
        "keyMessageName", Doc("first message", _SAME_FOR_KEY), Doc("first message", _SAME_FOR_KEY)
    ),
    FormatOption(
        "mode",
        Doc(
            '"FAILFAST"',
            "FAILFAST fails the query on a corrupt value or an unknown schema "
            "id (naming topic, partition, offset and id); PERMISSIVE gives a null value and "
            "the raw bytes in valueCorruptRecord (keyCorruptRecord); DROPMALFORMED leaves "
            "such records out of the result (the default with deadLetterTopic).",
        ),
        READER_ONLY,
    ),
    FormatOption(
        "deadLetterTopic",
        Doc(
            "none",
            "A topic (it must exist: a missing one fails the query when it is planned) "
            "where each record that cannot be decoded is written "
            "unchanged (key, value, headers, timestamp), with headers naming its topic, "
            "partition and offset and the error (pykafka.error.*), as Kafka Connect's "
            "errors.deadletterqueue.topic.name; mode DROPMALFORMED (the default then) leaves "
            "it out of the result, PERMISSIVE keeps it with a null value. Each task logs how "
            "many records it sent there.",
        ),
        Doc(
            "none",
            "A topic (it must exist: a missing one fails the query when it is planned) "
            "where a record the broker refuses for itself (larger than the topic's "
            "max.message.bytes, no key on a compacted topic, a timestamp out of range: "
            "MESSAGE_TOO_LARGE, INVALID_RECORD, INVALID_TIMESTAMP) or larger than "
            "kafka.max.request.size (RECORD_TOO_LARGE) is written with headers naming its "
            "topic, partition and the error (pykafka.error.*) instead of failing the task; "
            "with exactlyOnce in the same transaction. A record the dead-letter topic "
            "refuses too fails the task, naming both topics. Errors of the connection, the "
            "cluster or authorization still fail the task.",
        ),
    ),
    *(
        FormatOption(
            name,
            Doc(
                "Spark's",
                "Passed to the Avro/Protobuf conversion as from_avro/from_protobuf take it.",
            ),
            None,
        )
        for name in CONVERSION_OPTIONS
    ),
    FormatOption(
        "auto.register.schemas",
        None,
        Doc(
            "false",
            "Register the schema under the subject when it is not there yet "
            "(Confluent's serializer option of the same name).",
        ),
    ),
)


def reader_format_options() -> tuple[tuple[str, str, str], ...]:
    """(name, default, meaning) of each option the reader takes, in table order."""
    return tuple((o.name, *o.reader) for o in FORMAT_OPTIONS if o.reader is not None)


def writer_format_options() -> tuple[tuple[str, str, str], ...]:
    """(name, default, meaning) of each option the writer takes, in table order."""
    return tuple((o.name, *o.writer) for o in FORMAT_OPTIONS if isinstance(o.writer, Doc))


def writer_refuses() -> tuple[str, ...]:
    """The reader's format options the writer refuses, naming them."""
    return tuple(o.name for o in FORMAT_OPTIONS if o.writer == READER_ONLY)
