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
    writer_passes_over,
)
from kafka_common.value_formats.option_table import PASSED_OVER, Doc
from kafka_sink.options import WRITER_OPTIONS, parse_writer_options
from kafka_source.options import READER_OPTIONS, parse_reader_options
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
    assert set(writer_passes_over()) == {"valueSchemaVersion", "keySchemaVersion", "mode"}
    assert all(r.reader is not None for r in FORMAT_OPTIONS if r.writer == PASSED_OVER)


_SCHEMA_OPTIONS = [
    f"{c}{s}" for c in ("value", "key") for s in ("Subject", "Schema", "MessageName")
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


@pytest.mark.parametrize("option", ["valueSchemaVersion", "keySchemaVersion"])
def test_a_reader_only_schema_option_is_passed_over_by_the_writer(option):
    """The reader refuses it on a binary column; the writer, which never reads a version,
    passes it over (the same options are often given to both sides)."""
    with pytest.raises(ConfigError, match=f"{option} is set but"):
        parse_reader_options({**SERVERS, "subscribe": "t", option: "1"})
    assert parse_writer_options({**SERVERS, "topic": "t", option: "1"}).formats == ()


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
