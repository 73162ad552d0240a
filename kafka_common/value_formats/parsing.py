"""The one parser of the format options, for both directions.

``parse_reader_formats`` and ``parse_writer_formats`` run the same steps per column
(``_parse_column``); where the sides differ, ``_Side`` says how (the words of an error, the
options a binary column refuses, which checks apply). The order of the checks is each
side's, so that the first error named stays the one named before the two were joined.
"""

from __future__ import annotations

from typing import NamedTuple

from kafka_common.dead_letter import OPTION as DEAD_LETTER_OPTION
from kafka_common.option_map import OptionMap
from kafka_common.schema_registry import (
    SCHEMA_OPTION_SUFFIXES,
    RegistrySettings,
    check_binary_column,
    registry_settings,
)
from protocol.errors import ConfigError

from .option_table import CONVERSION_OPTIONS, FORMAT_OPTIONS, FORMATS, Doc
from .specs import ColumnFormat, Formats, SinkFormat

__all__ = ["parse_reader_formats", "parse_writer_formats"]


class _Side(NamedTuple):
    reader: bool
    bad_format: str  # "{column}Format must be ..." after the option name
    no_subject: str  # why the default subject cannot be made
    no_registry: str  # what follows "schema.registry.url is required with X=f"
    binary_refuses: tuple[str, ...]  # suffixes of the options a binary column refuses


def _refused_when_binary(reader: bool) -> tuple[str, ...]:
    """The schema options (by suffix) the side takes: set on a binary column, an error."""
    taken = {o.name for o in FORMAT_OPTIONS if isinstance(o.reader if reader else o.writer, Doc)}
    return tuple(s for s in SCHEMA_OPTION_SUFFIXES if f"value{s}" in taken)


_READER = _Side(
    True,
    f"must be one of {', '.join(FORMATS)}",
    "when more than one topic (or a pattern) is read: the default subject <topic>-{column} "
    "needs a single topic",
    " (or give the reader schema in {column}Schema)",
    _refused_when_binary(True),
)
_WRITER = _Side(
    False,
    "must be binary, avro, protobuf or json",
    "when no topic option is given (the default subject <topic>-{column} needs the topic option)",
    "",
    _refused_when_binary(False),
)


def _format(opts: OptionMap, column: str, side: _Side) -> str:
    fmt = (opts.get(f"{column}Format") or "binary").lower()
    if fmt not in FORMATS:
        raise ConfigError(f"{column}Format {side.bad_format}, got {opts.get(f'{column}Format')!r}")
    return fmt


def _require_registry(settings, column: str, fmt: str, side: _Side) -> None:
    if settings is None:
        raise ConfigError(
            f"schema.registry.url is required with {column}Format={fmt}"
            + side.no_registry.format(column=column)
        )


def _subject(
    opts: OptionMap, column: str, fmt: str, side: _Side, topics: tuple[str, ...] | None
) -> str:
    subject = opts.get(f"{column}Subject")
    if subject is not None:
        return subject
    if topics is None or len(topics) != 1:
        raise ConfigError(
            f"{column}Subject is required with {column}Format={fmt} "
            + side.no_subject.format(column=column)
        )
    return f"{topics[0]}-{column}"


def _version(opts: OptionMap, column: str, inline: str | None) -> str:
    """``{column}SchemaVersion``: latest or a version number (not with ``{column}Schema``)."""
    version = (opts.get(f"{column}SchemaVersion") or "latest").lower()
    if version != "latest" and not (version.isdigit() and int(version) > 0):
        raise ConfigError(
            f"{column}SchemaVersion must be latest or a version number "
            f"(1, 2, ...), got {opts.get(f'{column}SchemaVersion')!r}"
        )
    if inline is not None and opts.has(f"{column}SchemaVersion"):
        raise ConfigError(f"{column}Schema and {column}SchemaVersion cannot both be set")
    return version


def _check_writer_json_schema(column: str, fmt: str, inline: str | None) -> None:
    """A writer's inline JSON schema must be a JSON Schema document, not a DDL."""
    if fmt != "json" or inline is None:
        return
    from kafka_common.json_schema import is_json_schema  # imports pyarrow: only for json

    if not is_json_schema(inline):
        raise ConfigError(
            f"{column}Schema with {column}Format=json must be a JSON Schema document (a "
            "JSON object) when writing: a Spark DDL string describes what the reader "
            f"converts to, and the registry keeps JSON Schemas; leave {column}Schema out "
            "and set auto.register.schemas=true to register the one the "
            f"{column} column's type gives"
        )


class _Column(NamedTuple):
    column: str
    format: str
    subject: str
    inline: str | None
    version: str


def _parse_column(
    opts: OptionMap, column: str, side: _Side, settings, topics: tuple[str, ...] | None
) -> _Column | None:
    """One column's options checked, or None when it stays binary."""
    fmt = _format(opts, column, side)
    if fmt == "binary":
        check_binary_column(opts, column, side.binary_refuses)
        return None
    if not side.reader:
        _require_registry(settings, column, fmt, side)
    subject = _subject(opts, column, fmt, side, topics)
    inline = opts.get(f"{column}Schema")
    if side.reader:
        version = _version(opts, column, inline)
        if inline is None:
            _require_registry(settings, column, fmt, side)
    else:
        _check_writer_json_schema(column, fmt, inline)
        version = _version(opts, column, inline)
        if version != "latest" and opts.boolean("auto.register.schemas", False):
            raise ConfigError(
                f"{column}SchemaVersion={version} writes with a version the registry already "
                "has: it cannot be used with auto.register.schemas=true"
            )
    return _Column(column, fmt, subject, inline, version)


def parse_reader_formats(opts: OptionMap, topics: tuple[str, ...] | None) -> Formats | None:
    """The reader's checked format options, or None when both columns stay binary.
    ``topics``: the topics read when they are named (subscribe, assign), else None."""
    settings = registry_settings(opts)
    columns = {}
    for column in ("value", "key"):
        c = _parse_column(opts, column, _READER, settings, topics)
        if c is not None:
            columns[column] = ColumnFormat(
                column, c.format, c.subject, c.version, c.inline, opts.get(f"{column}MessageName")
            )
    if not columns:
        for name in ("mode", DEAD_LETTER_OPTION):
            if opts.has(name):
                raise ConfigError(
                    f"{name} applies to valueFormat/keyFormat avro, protobuf or json; both "
                    "are binary"
                )
        return None
    mode, dead_letter_topic = _reader_mode(opts)
    conversion = tuple((name, opts.get(name, "")) for name in CONVERSION_OPTIONS if opts.has(name))
    return Formats(
        columns.get("value"),
        columns.get("key"),
        mode == "PERMISSIVE",
        settings,
        conversion,
        drop_malformed=mode == "DROPMALFORMED",
        dead_letter_topic=dead_letter_topic,
    )


def _reader_mode(opts: OptionMap) -> tuple[str, str | None]:
    """(mode, dead-letter topic or None). With a dead-letter topic the mode is
    DROPMALFORMED unless PERMISSIVE is asked for; FAILFAST would never use the topic."""
    dead_letter_topic = opts.get(DEAD_LETTER_OPTION)
    if dead_letter_topic is not None and not dead_letter_topic.strip():
        raise ConfigError(f"{DEAD_LETTER_OPTION} must name a topic, got an empty string")
    default = "DROPMALFORMED" if dead_letter_topic else "FAILFAST"
    mode = (opts.get("mode") or default).upper()
    if mode not in ("FAILFAST", "PERMISSIVE", "DROPMALFORMED"):
        raise ConfigError(
            f"mode must be FAILFAST, PERMISSIVE or DROPMALFORMED, got {opts.get('mode')!r}"
        )
    if dead_letter_topic and mode == "FAILFAST":
        raise ConfigError(
            f"{DEAD_LETTER_OPTION}={dead_letter_topic!r} cannot be used with mode=FAILFAST, "
            "which fails the query at the first record that cannot be decoded: use "
            "mode=DROPMALFORMED (the default with a dead-letter topic: such records are "
            "left out of the result) or PERMISSIVE (kept with a null value)"
        )
    return mode, dead_letter_topic


def parse_writer_formats(opts: OptionMap, topic: str | None) -> tuple[SinkFormat, ...]:
    """The writer's checked format options: a ``SinkFormat`` per column not binary."""
    settings: RegistrySettings | None = registry_settings(opts)
    out = []
    for column in ("value", "key"):
        c = _parse_column(opts, column, _WRITER, settings, (topic,) if topic is not None else None)
        if c is not None:
            assert settings is not None  # _parse_column requires it for the writer
            out.append(
                SinkFormat(
                    column,
                    c.format,
                    c.subject,
                    c.inline,
                    opts.boolean("auto.register.schemas", False),
                    settings,
                    opts.get(f"{column}MessageName"),
                    c.version,
                )
            )
    return tuple(out)
