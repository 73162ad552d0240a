"""The codecs behind ``valueFormat``/``keyFormat``: reader types (and the DataFrame columns
the formats make), and compiled decoders.

Imported lazily (it pulls in pyarrow and the codecs): on the driver when the DataFrame's
schema is built, on the executors when a task decodes. Each Python worker keeps its
compiled decoders per (format, writer schema id, reader schema, options), so a stream
compiles a writer schema once per worker, not once per micro-batch.
"""

from __future__ import annotations

import pyarrow as pa

from kafka_common.bounded_cache import BoundedCache
from protocol.errors import ConfigError

from .specs import ColumnFormat

__all__ = ["reader_type", "decoder_for", "formatted_columns"]

# compiled decoders and reader types, per (writer schema, reader schema, options)
_decoders: BoundedCache[tuple, object] = BoundedCache(256)
_reader_types: BoundedCache[tuple, pa.DataType] = BoundedCache(256)


def _avro_named(references) -> list:
    """The referenced schemas' texts, dependencies first (as ``referenced`` orders them)."""
    return [text for _, text in references]


def _avro_reader(col: ColumnFormat):
    from kafka_common.avro import parse_schema

    try:
        return parse_schema(col.reader_schema, _avro_named(col.reader_references))
    except ValueError as exc:
        where = (
            f"{col.column}Schema"
            if col.inline_schema is not None
            else f"subject {col.subject!r} schema id {col.reader_id}"
        )
        raise ConfigError(
            f"{col.column}Format=avro: the reader schema ({where}) is not a "
            f"valid Avro schema: {exc}"
        ) from None


def _proto_reader(col: ColumnFormat):
    from kafka_common.protobuf import message_descriptor

    assert col.reader_schema is not None  # filled by registry_lookups.resolve_formats
    return message_descriptor(col.reader_schema, col.reader_references, col.message_name)


def reader_type(col: ColumnFormat, conversion: dict) -> pa.DataType:
    """The Arrow type of the decoded column (Spark's mapping of the reader schema)."""
    key = (
        col.format,
        col.reader_schema,
        col.reader_references,
        col.inline_schema is not None,
        col.message_name,
        tuple(sorted(conversion.items())),
    )
    found = _reader_types.get(key)
    if found is not None:
        return found
    if col.format == "avro":
        from kafka_common.avro import arrow_type as avro_type

        found = avro_type(_avro_reader(col), dict(conversion))
    elif col.format == "protobuf":
        from kafka_common.protobuf import arrow_type as protobuf_type

        found = protobuf_type(_proto_reader(col), dict(conversion))
    elif col.format == "json":
        from kafka_common.json_schema import arrow_type as json_type, inline_type

        assert col.reader_schema is not None  # filled by registry_lookups.resolve_formats
        found = (
            inline_type(col.reader_schema, col.option("Schema"))
            if col.inline_schema is not None
            else json_type(col.reader_schema)
        )
    else:
        raise ConfigError(
            f"{col.column}Format={col.format} is not supported yet by this "
            "build of pyspark-pykafka (avro is)"
        )
    return _reader_types.put(key, found)


def _proto_writer_message(col: ColumnFormat, writer: tuple, path: tuple[int, ...]):
    """The full name of the message the index ``path`` names in the writer schema."""
    from kafka_common.protobuf import message_descriptor

    schema_id, _, text, references = writer
    try:
        message_descriptor(text, references)
    except ConfigError as exc:
        raise ValueError(f"the writer schema (id {schema_id}) cannot be used: {exc}") from None
    try:
        return message_descriptor(text, references, path=path).full_name
    except ConfigError:
        raise ValueError(
            f"its message index {list(path)} names no message of schema id {schema_id}"
        ) from None


def decoder_for(col: ColumnFormat, writer: tuple, conversion: dict, path: tuple[int, ...] = (0,)):
    """A compiled decoder of the payloads written with ``writer`` (id, type, text,
    references) into ``col``'s reader type: ``.decode(binary_array, starts) -> (array,
    errors[, reasons])``. ``path``: Protobuf's message index of the payloads. Raises
    ``ValueError`` when the writer cannot be read as the reader (a Protobuf index naming
    another message than the reader's)."""
    schema_id, schema_type, text, references = writer
    key = (
        col.format,
        schema_id,
        text,
        col.reader_schema,
        col.reader_references,
        col.message_name,
        tuple(path),
        tuple(sorted(conversion.items())),
    )
    found = _decoders.get(key)
    if found is not None:
        return found
    if schema_type != col.schema_type:
        raise ConfigError(
            f"{col.column}Format={col.format}: schema id {schema_id} is a "
            f"{schema_type} schema, not {col.schema_type}"
        )
    if col.format == "avro":
        from kafka_common.avro import Decoder as AvroDecoder, parse_schema

        writer_schema = parse_schema(text, _avro_named(references))
        found = AvroDecoder(writer_schema, _avro_reader(col), dict(conversion))
    elif col.format == "protobuf":
        # The message index names the writer's message; it must be the reader's (by full
        # name): the payload is then read with the reader's message (field numbers carry
        # the evolution), as from_protobuf reads it. Another message is a mismatch, not a
        # guess: its fields would land in the reader's by number.
        from kafka_common.protobuf import Decoder as ProtobufDecoder

        reader = _proto_reader(col)
        written = _proto_writer_message(col, writer, tuple(path))
        if written != reader.full_name:
            raise ValueError(
                f"its message index {list(path)} names message {written}, not the reader's "
                f"{reader.full_name} (set {col.option('MessageName')}={written} to read "
                "those values)"
            )
        found = ProtobufDecoder(reader, dict(conversion))
    elif col.format == "json":
        from kafka_common.json_schema import Decoder as JsonDecoder

        found = JsonDecoder(reader_type(col, conversion))
    else:
        raise ConfigError(f"{col.column}Format={col.format} is not supported yet")
    return _decoders.put(key, found)


def formatted_columns(formats) -> tuple[dict[str, pa.DataType], list[pa.Field]]:
    """What the formats make of the reader's columns: the type of each decoded column (by
    name: the reader schema's), and the columns added after Kafka's own, in order:
    ``<column>SchemaId`` and, under PERMISSIVE, ``<column>CorruptRecord``."""
    conversion = dict(formats.conversion)
    typed = {col.column: reader_type(col, conversion) for col in formats.columns}
    added = []
    for col in formats.columns:
        added.append(pa.field(f"{col.column}SchemaId", pa.int32()))
        if formats.permissive:
            added.append(pa.field(f"{col.column}CorruptRecord", pa.binary()))
    return typed, added
