"""``valueFormat``/``keyFormat`` on the writer: each row framed as Confluent's serializers
frame it (magic byte 0, the 4-byte schema id, then the Avro datum, the Protobuf message
indexes and message, or the JSON text), so that confluent-kafka's deserializers (and this
connector's reader) read back what was written.

On the driver (``resolve_sink_formats``), the schema id is found once per write: with
``auto.register.schemas=true`` the schema (``valueSchema``, or the one Spark's ``to_avro``
derives from the column's type) is registered under ``valueSubject``; otherwise
``valueSchema`` is looked up under the subject, or the subject's latest version is used.
The executors only encode (``encode_column``): they never call the registry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from kafka_common.option_map import OptionMap
from kafka_common.schema_registry import (REGISTRY_OPTIONS, SCHEMA_TYPE, RegistryClient,
                                          RegistryError, RegistrySettings,
                                          check_binary_column, registry_settings)
from protocol.errors import ConfigError

__all__ = ["SINK_FORMAT_OPTIONS", "SINK_READER_ONLY", "SinkFormat", "parse_sink_formats",
           "resolve_sink_formats", "avro_schema_of"]

#: (name, default, meaning) of the writer's format options.
SINK_FORMAT_OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("valueFormat", '"binary"',
     "binary (value is string or binary), avro, protobuf or json: the value column (a "
     "struct, or a primitive for avro and json) is written in Confluent's wire format "
     "(magic byte, schema id, Protobuf message indexes) with the subject's schema."),
    ("keyFormat", '"binary"', "The same for the key column."),
    *REGISTRY_OPTIONS,
    ("valueSubject", '"<topic>-value"',
     "Registry subject the value schema is looked up in or registered under; required "
     "without the topic option."),
    ("keySubject", '"<topic>-key"', "The same for the key."),
    ("valueSchema", "the subject's latest",
     "The schema to write the values with (Avro JSON, .proto text, JSON Schema: not a "
     "DDL), looked up in the subject or registered with auto.register.schemas; by default the "
     "subject's latest version, or with auto.register.schemas (avro, json) the schema "
     "derived from the column's type as Spark's to_avro derives it."),
    ("valueMessageName", "first message",
     "Protobuf: the message of the .proto the value column is written as."),
    ("keySchema", "the subject's latest", "The same for the key."),
    ("keyMessageName", "first message", "The same for the key."),
    ("auto.register.schemas", "false",
     "Register the schema under the subject when it is not there yet (Confluent's "
     "serializer option of the same name)."),
)

#: Reader format options a writer given the same options passes over silently.
SINK_READER_ONLY = ("valueSchemaVersion", "keySchemaVersion", "mode")


@dataclass(frozen=True)
class SinkFormat:
    column: str                  # "value" or "key"
    format: str                  # avro
    subject: str
    inline_schema: str | None
    auto_register: bool
    registry: RegistrySettings
    message_name: str | None = None
    schema_id: int | None = None  # filled by resolve_sink_formats
    schema: str | None = None
    references: tuple = ()        # ((name, text), ...) of the schema's references

    @property
    def schema_type(self) -> str:
        return SCHEMA_TYPE[self.format]


def _is_json_schema(text: str) -> bool:
    from kafka_common.json_schema import is_json_schema  # imports pyarrow: only for json
    return is_json_schema(text)


def parse_sink_formats(opts: OptionMap, topic: str | None) -> tuple[SinkFormat, ...]:
    settings = registry_settings(opts)
    out = []
    for column in ("value", "key"):
        fmt = (opts.get(f"{column}Format") or "binary").lower()
        if fmt == "binary":
            # the reader's check and words; valueSchemaVersion is the reader's only (passed
            # over silently by a writer, SINK_READER_ONLY)
            check_binary_column(opts, column, ("Subject", "Schema", "MessageName"))
            continue
        if fmt not in SCHEMA_TYPE:
            raise ConfigError(f"{column}Format must be binary, avro, protobuf or json, got "
                              f"{opts.get(f'{column}Format')!r}")
        if settings is None:
            raise ConfigError(f"schema.registry.url is required with {column}Format={fmt}")
        subject = opts.get(f"{column}Subject")
        if subject is None:
            if topic is None:
                raise ConfigError(f"{column}Subject is required with {column}Format={fmt} "
                                  "when no topic option is given (the default subject "
                                  f"<topic>-{column} needs the topic option)")
            subject = f"{topic}-{column}"
        inline = opts.get(f"{column}Schema")
        if fmt == "json" and inline is not None and not _is_json_schema(inline):
            raise ConfigError(
                f"{column}Schema with {column}Format=json must be a JSON Schema document (a "
                "JSON object) when writing: a Spark DDL string describes what the reader "
                f"converts to, and the registry keeps JSON Schemas; leave {column}Schema out "
                "and set auto.register.schemas=true to register the one the "
                f"{column} column's type gives")
        out.append(SinkFormat(column, fmt, subject, inline,
                              opts.boolean("auto.register.schemas", False), settings,
                              opts.get(f"{column}MessageName")))
    return tuple(out)


def resolve_sink_formats(formats: tuple[SinkFormat, ...], schema) -> tuple[SinkFormat, ...]:
    """``formats`` with their schema ids, from the registry (on the driver)."""
    if not formats:
        return formats
    client = RegistryClient(formats[0].registry)
    fields = {f.name: f for f in schema.fields}
    out = []
    for f in formats:
        if f.column not in fields:
            raise ConfigError(f"{f.column}Format={f.format}: there is no {f.column} column")
        text = f.inline_schema
        if text is None and f.auto_register:
            column = fields[f.column]
            if f.format == "avro":
                text = json.dumps(avro_schema_of(column.dataType, column.nullable))
            elif f.format == "json":
                text = json.dumps(json_schema_of(column.dataType))
            else:
                raise ConfigError(f"{f.column}Format=protobuf with auto.register.schemas "
                                  f"needs the .proto in {f.column}Schema")
        try:
            if text is None:
                found = client.version(f.subject, "latest")
                if found.schema_type != f.schema_type:
                    raise ConfigError(f"{f.column}Subject {f.subject!r}: the latest schema "
                                      f"(id {found.id}) is {found.schema_type}, not "
                                      f"{f.schema_type}")
                refs = tuple((n, r.text) for n, r in client.referenced(found).items())
                out.append(replace(f, schema_id=found.id, schema=found.text,
                                   references=refs))
                continue
            if f.auto_register:
                schema_id = client.register(f.subject, text, f.schema_type)
            else:
                schema_id = client.lookup(f.subject, text, f.schema_type).id
        except RegistryError as exc:
            if exc.status == 404:
                raise ConfigError(
                    f"{f.column}Format={f.format}: {exc}; register the schema under "
                    f"{f.subject!r} or set auto.register.schemas=true") from None
            raise
        out.append(replace(f, schema_id=schema_id, schema=text))
    return tuple(out)


def avro_schema_of(data_type, nullable: bool, name: str = "topLevelRecord",
                   namespace: str = ""):
    """The Avro schema Spark's ``to_avro`` (``SchemaConverters.toAvroType``) writes a
    column of ``data_type`` with: records named after their fields, nullable types as a
    union of the type and null."""
    from pyspark.sql import types as T
    t = data_type
    if isinstance(t, T.BooleanType):
        avro = "boolean"
    elif isinstance(t, (T.ByteType, T.ShortType, T.IntegerType)):
        avro = "int"
    elif isinstance(t, T.LongType):
        avro = "long"
    elif isinstance(t, T.FloatType):
        avro = "float"
    elif isinstance(t, T.DoubleType):
        avro = "double"
    elif isinstance(t, T.StringType):
        avro = "string"
    elif isinstance(t, T.BinaryType):
        avro = "bytes"
    elif isinstance(t, T.DateType):
        avro = {"type": "int", "logicalType": "date"}
    elif isinstance(t, T.TimestampNTZType):
        avro = {"type": "long", "logicalType": "local-timestamp-micros"}
    elif isinstance(t, T.TimestampType):
        avro = {"type": "long", "logicalType": "timestamp-micros"}
    elif isinstance(t, T.DecimalType):
        size = next(n for n in range(1, 17) if 2 ** (8 * n - 1) > 10 ** t.precision)
        avro = {"type": "fixed", "name": name,
                **({"namespace": namespace} if namespace else {}), "size": size,
                "logicalType": "decimal", "precision": t.precision, "scale": t.scale}
    elif isinstance(t, T.ArrayType):
        avro = {"type": "array", "items": avro_schema_of(t.elementType, t.containsNull, name,
                                                          namespace)}
    elif isinstance(t, T.MapType):
        if not isinstance(t.keyType, T.StringType):
            raise ConfigError(f"Avro maps need string keys, not {t.keyType.simpleString()}")
        avro = {"type": "map", "values": avro_schema_of(t.valueType, t.valueContainsNull,
                                                         name, namespace)}
    elif isinstance(t, T.StructType):
        inner = f"{namespace}.{name}" if namespace else name
        avro = {"type": "record", "name": name,
                **({"namespace": namespace} if namespace else {}),
                "fields": [{"name": f.name, "type": avro_schema_of(f.dataType, f.nullable,
                                                                   f.name, inner)}
                           for f in t.fields]}
    else:
        raise ConfigError(f"no Avro type for Spark's {t.simpleString()}")
    return [avro, "null"] if nullable else avro


def json_schema_of(data_type) -> dict:
    """A JSON Schema (draft-07) of a Spark type, for auto.register.schemas with json."""
    from pyspark.sql import types as T
    t = data_type
    if isinstance(t, T.StructType):
        return {"type": "object", "properties": {f.name: _nullable(json_schema_of(
            f.dataType), f.nullable) for f in t.fields}}
    if isinstance(t, T.ArrayType):
        return {"type": "array", "items": _nullable(json_schema_of(t.elementType),
                                                    t.containsNull)}
    if isinstance(t, T.MapType):
        return {"type": "object", "additionalProperties": _nullable(
            json_schema_of(t.valueType), t.valueContainsNull)}
    if isinstance(t, T.BooleanType):
        return {"type": "boolean"}
    for kind, bits in ((T.ByteType, 8), (T.ShortType, 16), (T.IntegerType, 32)):
        if isinstance(t, kind):
            # the type's range: validators hold values to it, and the reader
            # (kafka_common.json_schema.spark_types) reads the type back from it
            return {"type": "integer", "minimum": -2 ** (bits - 1),
                    "maximum": 2 ** (bits - 1) - 1}
    if isinstance(t, T.LongType):
        return {"type": "integer"}
    if isinstance(t, (T.FloatType, T.DoubleType, T.DecimalType)):
        return {"type": "number"}
    if isinstance(t, (T.DateType, T.TimestampType, T.TimestampNTZType)):
        return {"type": "string", "format": "date" if isinstance(t, T.DateType)
                else "date-time"}
    return {"type": "string"}


def _nullable(schema: dict, nullable: bool) -> dict:
    return {"oneOf": [{"type": "null"}, schema]} if nullable else schema
