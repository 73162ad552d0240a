"""The driver's registry look-ups of the format options, once per planned read or write.

Reader (``resolve_formats``): the reader schema (``valueSchemaVersion``, default latest, or
the inline ``valueSchema``) and every version of the subject (the writer schemas the
topic's history most likely holds); a subject whose schemas are of another type
(PROTOBUF under ``valueFormat=avro``) is refused. ``DataSource.schema()`` fetches the
reader schemas only; the writers are fetched once, when the read is planned. The
executors then ask the registry only for ids they have not seen (``decoding``).

Writer (``resolve_sink_formats``): the schema id, found once per write: with
``auto.register.schemas=true`` the schema (``valueSchema``, or the one Spark's ``to_avro``
derives from the column's type) is registered under ``valueSubject``; otherwise
``valueSchema`` is looked up under the subject, or the subject's version
``valueSchemaVersion`` (default latest) is used.
The executors only encode: they never call the registry.
"""

from __future__ import annotations

import json
from dataclasses import replace

from kafka_common.schema_registry import RegistryClient, RegistryError
from kafka_common.schema_registry.client import SUBJECT_NOT_FOUND
from protocol.errors import ConfigError

from .specs import ColumnFormat, Formats, SinkFormat

__all__ = ["resolve_formats", "resolve_sink_formats"]


# ---- the reader -------------------------------------------------------------------------


def _resolve_column(
    c: ColumnFormat, client: RegistryClient | None, with_writers: bool
) -> ColumnFormat:
    writers, guids, latest = [], [], None
    if client is not None and with_writers:
        writers, guids, latest = _writer_schemas(c, client)
    if c.inline_schema is not None:
        return replace(c, reader_schema=c.inline_schema, writers=tuple(writers), guids=tuple(guids))
    assert client is not None  # parsing requires a registry without an inline schema
    reader = (
        latest
        if c.version == "latest" and latest is not None
        else client.version(c.subject, c.version)
    )
    if reader.schema_type != c.schema_type:
        raise ConfigError(
            f"{c.column}Format={c.format}: subject {c.subject!r} version "
            f"{reader.version} (schema id {reader.id}) is a "
            f"{reader.schema_type} schema, not {c.schema_type}"
        )
    refs = tuple((name, r.text) for name, r in client.referenced(reader).items())
    return replace(
        c,
        reader_schema=reader.text,
        reader_id=reader.id,
        reader_references=refs,
        writers=tuple(writers),
        guids=tuple(guids),
    )


def _subject_versions(c: ColumnFormat, client: RegistryClient) -> list:
    """The subject's versions; none for a subject the registry lacks when the reader
    schema is given inline."""
    try:
        return client.versions(c.subject)
    except RegistryError as exc:
        if exc.error_code == SUBJECT_NOT_FOUND and c.inline_schema is not None:
            return []
        if exc.error_code == SUBJECT_NOT_FOUND:
            raise ConfigError(
                f"{c.column}Format={c.format}: subject {c.subject!r} is not "
                f"in the Schema Registry (set {c.column}Subject, or give "
                f"{c.column}Schema)"
            ) from None
        raise


def _writer_schemas(c: ColumnFormat, client: RegistryClient):
    """(writers, guids, the latest version's schema or None): every version of the
    subject, each fetched once (the latest is the default reader schema too)."""
    writers, guids, latest = [], [], None
    for v in _subject_versions(c, client):
        s = client.version(c.subject, v)
        if s.schema_type != c.schema_type:
            raise ConfigError(
                f"{c.column}Format={c.format}: subject {c.subject!r} version {v} (schema "
                f"id {s.id}) is a {s.schema_type} schema, not {c.schema_type}"
            )
        refs = tuple((name, r.text) for name, r in client.referenced(s).items())
        writers.append((s.id, s.schema_type, s.text, refs))
        if s.guid:
            guids.append((s.guid, s.id))
        if latest is None or (s.version or 0) > (latest.version or 0):  # versions answer one
            latest = s
    return writers, guids, latest


def resolve_formats(formats: Formats | None, *, with_writers: bool = True) -> Formats | None:
    """``formats`` with the reader schemas fetched from the registry and, ``with_writers``,
    every version of each subject as the writer schemas the tasks take along (on the
    driver, once per planning, with one client). ``with_writers=False`` is for
    ``DataSource.schema()``, which needs the reader schemas only: the writers are fetched
    once, when the read is planned."""
    if formats is None or (formats.resolved and (formats.writers_resolved or not with_writers)):
        return formats
    client = RegistryClient(formats.registry) if formats.registry is not None else None

    def resolve(c: ColumnFormat | None) -> ColumnFormat | None:
        return _resolve_column(c, client, with_writers) if c is not None else None

    return replace(
        formats,
        value=resolve(formats.value),
        key=resolve(formats.key),
        writers_resolved=with_writers,
    )


# ---- the writer -------------------------------------------------------------------------


def _derived_schema(f: SinkFormat, column) -> str:
    """The schema auto.register.schemas registers when none is given: the column's type
    mapped as Spark's to_avro maps it (avro) or as a JSON Schema (json)."""
    if f.format == "avro":
        from kafka_common.avro.spark_types import avro_schema_of

        return json.dumps(avro_schema_of(column.dataType, column.nullable))
    if f.format == "json":
        from kafka_common.json_schema.spark_types import json_schema_of

        return json.dumps(json_schema_of(column.dataType))
    raise ConfigError(
        f"{f.column}Format=protobuf with auto.register.schemas needs the .proto in {f.column}Schema"
    )


def _registered(f: SinkFormat, client: RegistryClient) -> SinkFormat:
    """``f`` with its subject's schema of version ``f.version`` (``{column}SchemaVersion``,
    default latest)."""
    try:
        found = client.version(f.subject, f.version)
    except RegistryError as exc:
        if exc.status != 404 or f.version == "latest":
            raise
        raise ConfigError(
            f"{f.column}SchemaVersion={f.version}: subject {f.subject!r} has no version "
            f"{f.version} in the Schema Registry ({exc})"
        ) from None
    if found.schema_type != f.schema_type:
        which = "the latest schema" if f.version == "latest" else f"version {f.version}"
        raise ConfigError(
            f"{f.column}Subject {f.subject!r}: {which} "
            f"(id {found.id}) is {found.schema_type}, not "
            f"{f.schema_type}"
        )
    refs = tuple((n, r.text) for n, r in client.referenced(found).items())
    return replace(f, schema_id=found.id, schema=found.text, references=refs)


def _resolve_sink_format(f: SinkFormat, client: RegistryClient, fields: dict) -> SinkFormat:
    if f.column not in fields:
        raise ConfigError(f"{f.column}Format={f.format}: there is no {f.column} column")
    text = f.inline_schema
    if text is None and f.auto_register:
        text = _derived_schema(f, fields[f.column])
    try:
        if text is None:
            return _registered(f, client)
        if f.auto_register:
            schema_id = client.register(f.subject, text, f.schema_type)
        else:
            schema_id = client.lookup(f.subject, text, f.schema_type).id
    except RegistryError as exc:
        if exc.status == 404:
            raise ConfigError(
                f"{f.column}Format={f.format}: {exc}; register the schema under "
                f"{f.subject!r} or set auto.register.schemas=true"
            ) from None
        raise
    return replace(f, schema_id=schema_id, schema=text)


def resolve_sink_formats(formats: tuple[SinkFormat, ...], schema) -> tuple[SinkFormat, ...]:
    """``formats`` with their schema ids, from the registry (on the driver); ``schema``:
    the DataFrame's (Spark's ``StructType``)."""
    if not formats:
        return formats
    client = RegistryClient(formats[0].registry)
    fields = {f.name: f for f in schema.fields}
    return tuple(_resolve_sink_format(f, client, fields) for f in formats)
