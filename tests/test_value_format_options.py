"""The value formats' one option table (``kafka_common.value_formats.option_table``) and
its one parser: the reader's and the writer's option tables both come from it, and a
schema option set on a binary column is refused in the same words by both sides, for
every such option the writer takes (issue 40: the two sides had drifted once, issue 39)."""

from __future__ import annotations

import pytest

from kafka_common.value_formats import (
    FORMAT_OPTIONS,
    reader_format_options,
    writer_format_options,
    writer_refuses,
)
from kafka_common.value_formats.option_table import READER_ONLY, Doc
from kafka_sink.option_table import WRITER_OPTIONS
from kafka_sink.options import parse_writer_options
from kafka_source.option_table import READER_OPTIONS
from kafka_source.options import parse_reader_options
from protocol.errors import ConfigError

SERVERS = {"kafka.bootstrap.servers": "127.0.0.1:9092"}
URL = {"schema.registry.url": "http://127.0.0.1:1"}


def test_each_side_lists_the_table_rows_it_takes():
    reader = {o.name: (o.default, o.meaning) for o in READER_OPTIONS}
    writer = {o.name: (o.default, o.meaning) for o in WRITER_OPTIONS}
    for row in FORMAT_OPTIONS:
        assert (reader.get(row.name) == tuple(row.reader)) if row.reader else row.name not in reader
        if isinstance(row.writer, Doc):
            assert writer[row.name] == tuple(row.writer)
        else:
            assert row.name not in writer
    assert [o[0] for o in reader_format_options()] == [
        o.name for o in READER_OPTIONS if o.name in {r.name for r in FORMAT_OPTIONS}
    ]
    assert [o[0] for o in writer_format_options()] == [
        o.name for o in WRITER_OPTIONS if o.name in {r.name for r in FORMAT_OPTIONS}
    ]
    assert set(writer_refuses()) == {"mode"}
    assert all(r.reader is not None for r in FORMAT_OPTIONS if r.writer == READER_ONLY)


_SCHEMA_OPTIONS = [
    f"{c}{s}"
    for c in ("value", "key")
    for s in ("Subject", "Schema", "SchemaVersion", "MessageName")
]


@pytest.mark.parametrize("option", _SCHEMA_OPTIONS)
def test_a_binary_column_refuses_its_schema_options_alike_on_both_sides(option):
    """The writer takes every one of these, so it refuses them on a binary column as the
    reader does (``valueMessageName`` included, which the writer once ignored)."""
    with pytest.raises(ConfigError) as read:
        parse_reader_options({**SERVERS, "subscribe": "t", option: "x"})
    with pytest.raises(ConfigError) as write:
        parse_writer_options({**SERVERS, "topic": "t", option: "x"})
    column = "key" if option.startswith("key") else "value"
    assert (
        str(read.value)
        == str(write.value)
        == (
            f"{option} is set but {column}Format is binary (set {column}Format to avro, "
            "protobuf or json)"
        )
    )


def test_the_writer_checks_a_schema_version_as_the_reader_does():
    """valueSchemaVersion (keySchemaVersion) picks the version a writer encodes with: a
    version number or latest, not with an inline schema, and not with
    auto.register.schemas (a pinned version is one the registry has)."""
    avro = {**SERVERS, **URL, "topic": "t", "valueFormat": "avro"}
    assert [f.version for f in parse_writer_options(avro).formats] == ["latest"]
    pinned = parse_writer_options({**avro, "valueSchemaVersion": "2"}).formats
    assert [(f.column, f.version) for f in pinned] == [("value", "2")]
    for bad, said in (
        ({"valueSchemaVersion": "0"}, "valueSchemaVersion must be latest or a version number"),
        (
            {"valueSchemaVersion": "1", "valueSchema": '"long"'},
            "valueSchema and valueSchemaVersion cannot both be set",
        ),
        (
            {"valueSchemaVersion": "1", "auto.register.schemas": "true"},
            "valueSchemaVersion=1 writes with a version the registry already has: it cannot "
            "be used with auto.register.schemas=true",
        ),
    ):
        with pytest.raises(ConfigError) as write:
            parse_writer_options({**avro, **bad})
        assert str(write.value) == said or str(write.value).startswith(said), str(write.value)


@pytest.mark.parametrize(
    "options, said",
    [
        ({"mode": "PERMISSIVE"}, "option 'mode' is a reader option; the writer does not use it"),
        (
            {"startingOffsets": "earliest", "FAILONDATALOSS": "false", "subscribe": "t"},
            "options 'subscribe', 'startingOffsets', 'FAILONDATALOSS' are reader options; "
            "the writer does not use them",
        ),
        (
            {"maxOffsetsPerTrigger": "10", "fetchOffset.numRetries": "5"},
            "options 'maxOffsetsPerTrigger', 'fetchOffset.numRetries' are reader options; "
            "the writer does not use them",
        ),
    ],
)
def test_the_writer_refuses_the_reader_s_own_options_by_name(options, said):
    """A reader option does nothing to a write: the writer names it instead of passing
    over it in silence (Spark's connector passes over them). What both sides take stays
    accepted: kafka.* (the consumer's too), topic, the formats and the registry options,
    includeHeaders, and Spark's checkpointLocation and path."""
    with pytest.raises(ConfigError) as write:
        parse_writer_options({**SERVERS, "topic": "t", **options})
    assert str(write.value) == said
    shared = {
        **SERVERS,
        **URL,
        "topic": "t",
        "valueFormat": "avro",
        "valueSubject": "s",
        "includeHeaders": "true",
        "kafka.group.id": "g",
        "kafka.isolation.level": "read_committed",
        "checkpointLocation": "/tmp/c",
        "path": "/tmp/p",
    }
    assert parse_writer_options(shared).formats[0].subject == "s"


def test_the_default_subject_and_its_errors_on_each_side():
    reader = parse_reader_options({**SERVERS, **URL, "subscribe": "orders", "valueFormat": "avro"})
    assert reader.formats.value.subject == "orders-value"
    writer = parse_writer_options({**SERVERS, **URL, "topic": "orders", "keyFormat": "avro"})
    assert [(f.column, f.subject) for f in writer.formats] == [("key", "orders-key")]
    with pytest.raises(
        ConfigError, match="valueSubject is required with valueFormat=avro when more than one topic"
    ):
        parse_reader_options({**SERVERS, **URL, "subscribe": "a,b", "valueFormat": "avro"})
    with pytest.raises(
        ConfigError,
        match="valueSubject is required with valueFormat=avro when no topic option is given",
    ):
        parse_writer_options({**SERVERS, **URL, "valueFormat": "avro"})


def test_the_registry_is_required_as_each_side_needs_it():
    with pytest.raises(ConfigError) as read:
        parse_reader_options({**SERVERS, "subscribe": "t", "valueFormat": "avro"})
    assert str(read.value) == (
        "schema.registry.url is required with valueFormat=avro (or "
        "give the reader schema in valueSchema)"
    )
    # an inline reader schema needs no registry to read with ...
    assert parse_reader_options(
        {**SERVERS, "subscribe": "t", "valueFormat": "avro", "valueSchema": '"long"'}
    ).formats.value.inline_schema
    # ... but a writer needs one for the schema id it frames each value with
    with pytest.raises(ConfigError) as write:
        parse_writer_options(
            {**SERVERS, "topic": "t", "valueFormat": "avro", "valueSchema": '"long"'}
        )
    assert str(write.value) == "schema.registry.url is required with valueFormat=avro"


def test_the_format_words_of_each_side():
    with pytest.raises(ConfigError) as read:
        parse_reader_options({**SERVERS, "subscribe": "t", "valueFormat": "xml"})
    assert str(read.value) == ("valueFormat must be one of binary, avro, protobuf, json, got 'xml'")
    with pytest.raises(ConfigError) as write:
        parse_writer_options({**SERVERS, "topic": "t", "keyFormat": "xml"})
    assert str(write.value) == "keyFormat must be binary, avro, protobuf or json, got 'xml'"
