"""Schema Registry formats of the reader: ``valueFormat``/``keyFormat`` and their options.

Planner side (no pyarrow, no decoder): ``parse_formats`` checks the options into a frozen
``Formats``; ``resolve_formats`` asks the registry (once, on the driver) for the reader
schema (``valueSchemaVersion``, default latest, or the inline ``valueSchema``) and for
every version of the subject (the writer schemas the topic's history most likely holds),
and refuses a subject whose schemas are of another type (PROTOBUF under
``valueFormat=avro``). ``DataSource.schema()`` fetches the reader schemas only; the
writers are fetched once, when the read is planned. The resolved ``Formats`` travels to
the executors inside ``ReaderOptions``; ``kafka_source.value_decoding`` decodes with it
there and asks the registry only for ids it has not seen (once per Python worker).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kafka_common.option_map import OptionMap
from kafka_common.schema_registry import (REGISTRY_OPTIONS, SCHEMA_TYPE, RegistryClient,
                                          RegistryError, RegistrySettings,
                                          check_binary_column, registry_settings)
from protocol.errors import ConfigError

from .offset_specs import Subscription

__all__ = ["FORMAT_OPTIONS", "ColumnFormat", "Formats", "parse_formats", "resolve_formats",
           "CONVERSION_OPTIONS"]

FORMATS = ("binary", "avro", "protobuf", "json")

#: Spark's from_avro / from_protobuf options, passed through to the codecs as given.
CONVERSION_OPTIONS = (
    "enableStableIdentifiersForUnionType", "stableIdentifierPrefixForUnionType",
    "recursiveFieldMaxDepth", "datetimeRebaseMode", "avroSchemaEvolutionMode",
    "enums.as.ints", "emit.default.values", "recursive.fields.max.depth",
    "convert.any.fields.to.json", "unwrap.primitive.wrapper.types",
    "retain.empty.message.types", "upcast.unsigned.ints",
)

#: (name, default, meaning) of the format options, for the reader's option table.
FORMAT_OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("valueFormat", '"binary"',
     "binary (the value as bytes), avro, protobuf or json: decode Confluent-framed values "
     "into a typed value column, as from_avro/from_protobuf would, plus valueSchemaId."),
    ("keyFormat", '"binary"', "The same for the key (keySchemaId)."),
    *REGISTRY_OPTIONS,
    ("valueSubject", '"<topic>-value"',
     "Registry subject of the value schemas (TopicNameStrategy by default); required when "
     "several topics, a pattern or an assign of several topics is read."),
    ("keySubject", '"<topic>-key"', "Registry subject of the key schemas."),
    ("valueSchemaVersion", '"latest"',
     "Version of the subject used as the reader schema, resolved once when the query is "
     "planned (so the DataFrame's schema is fixed); every writer schema is resolved "
     "against it by the format's evolution rules."),
    ("keySchemaVersion", '"latest"', "The same for the key."),
    ("valueSchema", "none",
     "An explicit reader schema instead of the registry's: Avro schema JSON, .proto text "
     "(with valueMessageName), or for json a Spark DDL string (\"id INT, name STRING, tags "
     "ARRAY<STRING>\": values converted as from_json converts them) or a JSON Schema "
     "document (a JSON object)."),
    ("keySchema", "none", "The same for the key."),
    ("valueMessageName", "first message",
     "Protobuf: the (fully qualified) message of the .proto to read as the value; a value "
     "whose Confluent message index names another message is a corrupt record."),
    ("keyMessageName", "first message", "The same for the key."),
    ("mode", '"FAILFAST"',
     "FAILFAST fails the query on a corrupt value or an unknown schema id (naming topic, "
     "partition, offset and id); PERMISSIVE gives a null value and the raw bytes in "
     "valueCorruptRecord (keyCorruptRecord)."),
    *((name, "Spark's", "Passed to the Avro/Protobuf conversion as from_avro/from_protobuf "
       "take it.") for name in CONVERSION_OPTIONS),
)


@dataclass(frozen=True)
class ColumnFormat:
    """How one column (value or key) is decoded."""

    column: str                  # "value" or "key"
    format: str                  # avro, protobuf, json
    subject: str | None
    version: str = "latest"
    inline_schema: str | None = None
    message_name: str | None = None
    # Filled by resolve_formats:
    reader_schema: str | None = None
    reader_id: int | None = None
    reader_references: tuple = ()       # ((name, text), ...) of the reader's references
    writers: tuple = ()                  # ((id, schema_type, text, references), ...)
    guids: tuple = ()                    # ((guid, id), ...) of the writers

    @property
    def schema_type(self) -> str:
        return SCHEMA_TYPE[self.format]

    def option(self, suffix: str) -> str:
        return f"{self.column}{suffix}"


@dataclass(frozen=True)
class Formats:
    value: ColumnFormat | None = None
    key: ColumnFormat | None = None
    permissive: bool = False
    registry: RegistrySettings | None = None
    conversion: tuple[tuple[str, str], ...] = field(default=())
    writers_resolved: bool = False   # set by resolve_formats(with_writers=True)

    @property
    def columns(self) -> tuple[ColumnFormat, ...]:
        return tuple(c for c in (self.key, self.value) if c is not None)

    @property
    def resolved(self) -> bool:
        return all(c.reader_schema is not None for c in self.columns)


def format_option_names() -> tuple[str, ...]:
    return tuple(o[0] for o in FORMAT_OPTIONS)


def _topics(subscription: Subscription) -> tuple[str, ...] | None:
    if subscription.kind == "subscribe":
        return subscription.topics
    if subscription.kind == "assign":
        return tuple(dict.fromkeys(tp[0] for tp in subscription.partitions))
    return None


def parse_formats(opts: OptionMap, subscription: Subscription) -> Formats | None:
    """The checked format options, or None when both columns stay binary."""
    settings = registry_settings(opts)
    columns = {}
    for column in ("value", "key"):
        fmt = (opts.get(f"{column}Format") or "binary").lower()
        if fmt not in FORMATS:
            raise ConfigError(f"{column}Format must be one of {', '.join(FORMATS)}, "
                              f"got {opts.get(f'{column}Format')!r}")
        if fmt == "binary":
            check_binary_column(opts, column)
            continue
        subject = opts.get(f"{column}Subject")
        inline = opts.get(f"{column}Schema")
        if subject is None:
            topics = _topics(subscription)
            if topics is None or len(topics) != 1:
                raise ConfigError(f"{column}Subject is required with {column}Format={fmt} "
                                  "when more than one topic (or a pattern) is read: the "
                                  f"default subject <topic>-{column} needs a single topic")
            subject = f"{topics[0]}-{column}"
        version = (opts.get(f"{column}SchemaVersion") or "latest").lower()
        if version != "latest" and not (version.isdigit() and int(version) > 0):
            raise ConfigError(f"{column}SchemaVersion must be latest or a version number "
                              f"(1, 2, ...), got {opts.get(f'{column}SchemaVersion')!r}")
        if inline is not None and opts.has(f"{column}SchemaVersion"):
            raise ConfigError(f"{column}Schema and {column}SchemaVersion cannot both be set")
        if settings is None and inline is None:
            raise ConfigError(f"schema.registry.url is required with {column}Format={fmt} "
                              f"(or give the reader schema in {column}Schema)")
        columns[column] = ColumnFormat(column, fmt, subject, version, inline,
                                       opts.get(f"{column}MessageName"))
    if not columns:
        if opts.has("mode"):
            raise ConfigError("mode applies to valueFormat/keyFormat avro, protobuf or json; "
                              "both are binary")
        return None
    mode = (opts.get("mode") or "FAILFAST").upper()
    if mode not in ("FAILFAST", "PERMISSIVE"):
        raise ConfigError(f"mode must be FAILFAST or PERMISSIVE, got {opts.get('mode')!r}")
    conversion = tuple((name, opts.get(name)) for name in CONVERSION_OPTIONS if opts.has(name))
    return Formats(columns.get("value"), columns.get("key"), mode == "PERMISSIVE", settings,
                   conversion)


def _resolve_column(c: ColumnFormat, client: RegistryClient | None,
                    with_writers: bool) -> ColumnFormat:
    writers, guids, latest = [], [], None
    if client is not None and with_writers:
        writers, guids, latest = _writer_schemas(c, client)
    if c.inline_schema is not None:
        return replace(c, reader_schema=c.inline_schema, writers=tuple(writers),
                       guids=tuple(guids))
    reader = latest if c.version == "latest" and latest is not None else \
        client.version(c.subject, c.version)
    if reader.schema_type != c.schema_type:
        raise ConfigError(f"{c.column}Format={c.format}: subject {c.subject!r} version "
                          f"{reader.version} (schema id {reader.id}) is a "
                          f"{reader.schema_type} schema, not {c.schema_type}")
    refs = tuple((name, r.text) for name, r in client.referenced(reader).items())
    return replace(c, reader_schema=reader.text, reader_id=reader.id,
                   reader_references=refs, writers=tuple(writers), guids=tuple(guids))


def _writer_schemas(c: ColumnFormat, client: RegistryClient):
    """(writers, guids, the latest version's schema or None): every version of the
    subject, each fetched once (the latest is the default reader schema too)."""
    writers, guids, latest = [], [], None
    try:
        versions = client.versions(c.subject)
    except RegistryError as exc:
        if exc.error_code == 40401 and c.inline_schema is not None:
            versions = []
        elif exc.error_code == 40401:
            raise ConfigError(f"{c.column}Format={c.format}: subject {c.subject!r} is not "
                              f"in the Schema Registry (set {c.column}Subject, or give "
                              f"{c.column}Schema)") from None
        else:
            raise
    for v in versions:
        s = client.version(c.subject, v)
        if s.schema_type != c.schema_type:
            raise ConfigError(
                f"{c.column}Format={c.format}: subject {c.subject!r} version {v} (schema "
                f"id {s.id}) is a {s.schema_type} schema, not {c.schema_type}")
        refs = tuple((name, r.text) for name, r in client.referenced(s).items())
        writers.append((s.id, s.schema_type, s.text, refs))
        if s.guid:
            guids.append((s.guid, s.id))
        if latest is None or s.version > latest.version:
            latest = s
    return writers, guids, latest


def resolve_formats(formats: Formats | None, *, with_writers: bool = True) -> Formats | None:
    """``formats`` with the reader schemas fetched from the registry and, ``with_writers``,
    every version of each subject as the writer schemas the tasks take along (on the
    driver, once per planning, with one client). ``with_writers=False`` is for
    ``DataSource.schema()``, which needs the reader schemas only: the writers are fetched
    once, when the read is planned."""
    if formats is None or (formats.resolved and (formats.writers_resolved
                                                 or not with_writers)):
        return formats
    client = RegistryClient(formats.registry) if formats.registry is not None else None

    def resolve(c: ColumnFormat | None) -> ColumnFormat | None:
        return _resolve_column(c, client, with_writers) if c is not None else None
    return replace(formats, value=resolve(formats.value), key=resolve(formats.key),
                   writers_resolved=with_writers)


def conversion_options(formats: Formats) -> dict[str, str]:
    return dict(formats.conversion)


