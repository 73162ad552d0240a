"""What the format options become: frozen, picklable values the driver fills in from the
registry and ships to the executors.

- the reader's ``Formats`` (a ``ColumnFormat`` per decoded column, the mode, the registry
  settings and Spark's conversion options);
- the writer's ``SinkFormat``, one per encoded column.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafka_common.schema_registry import SCHEMA_TYPE, RegistrySettings

__all__ = ["ColumnFormat", "Formats", "SinkFormat"]


@dataclass(frozen=True)
class ColumnFormat:
    """How one column (value or key) is decoded."""

    column: str  # "value" or "key"
    format: str  # avro, protobuf, json
    subject: str
    version: str = "latest"
    inline_schema: str | None = None
    message_name: str | None = None
    # Filled by registry_lookups.resolve_formats:
    reader_schema: str | None = None
    reader_id: int | None = None
    reader_references: tuple = ()  # ((name, text), ...) of the reader's references
    writers: tuple = ()  # ((id, schema_type, text, references), ...)
    guids: tuple = ()  # ((guid, id), ...) of the writers

    @property
    def schema_type(self) -> str:
        return SCHEMA_TYPE[self.format]

    def option(self, suffix: str) -> str:
        return f"{self.column}{suffix}"


@dataclass(frozen=True)
class Formats:
    """The reader's decoded columns and how they are decoded."""

    value: ColumnFormat | None = None
    key: ColumnFormat | None = None
    permissive: bool = False
    registry: RegistrySettings | None = None
    conversion: tuple[tuple[str, str], ...] = field(default=())
    writers_resolved: bool = False  # set by resolve_formats(with_writers=True)
    drop_malformed: bool = False  # mode DROPMALFORMED: rows that cannot be decoded left out
    dead_letter_topic: str | None = None  # deadLetterTopic: where those rows are copied to

    @property
    def tolerant(self) -> bool:
        """A row that cannot be decoded does not fail the query."""
        return self.permissive or self.drop_malformed

    @property
    def columns(self) -> tuple[ColumnFormat, ...]:
        return tuple(c for c in (self.key, self.value) if c is not None)

    @property
    def resolved(self) -> bool:
        return all(c.reader_schema is not None for c in self.columns)


@dataclass(frozen=True)
class SinkFormat:
    """How the writer encodes one column (value or key)."""

    column: str  # "value" or "key"
    format: str  # avro, protobuf, json
    subject: str
    inline_schema: str | None
    auto_register: bool
    registry: RegistrySettings
    message_name: str | None = None
    version: str = "latest"  # {column}SchemaVersion: the subject's version written with
    schema_id: int | None = None  # filled by registry_lookups.resolve_sink_formats
    schema: str | None = None
    references: tuple = ()  # ((name, text), ...) of the schema's references

    @property
    def schema_type(self) -> str:
        return SCHEMA_TYPE[self.format]
