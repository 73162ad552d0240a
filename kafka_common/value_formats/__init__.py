"""The value formats (``valueFormat``/``keyFormat``: avro, protobuf, json) of both sides.

- ``option_table``: every format option once, with a reader and a writer column;
- ``parsing``: the one parser of those options (``parse_reader_formats``,
  ``parse_writer_formats``) into the frozen values of ``specs`` (``Formats``,
  ``SinkFormat``);
- ``registry_lookups``: the driver's look-ups of the subjects' schemas (``resolve_formats``,
  ``resolve_sink_formats``);
- ``codecs`` and ``decoding``: framed values -> typed Arrow columns (executors);
- ``encoding``: typed Arrow columns -> framed values (executors).

The format libraries stay beside this package: ``kafka_common.avro``, ``protobuf``,
``json_schema`` (each with one type-mapping module for both directions) and
``schema_registry``. This package imports no pyarrow itself; ``codecs``, ``decoding`` and
``encoding`` do, and are imported by their full names where they are needed.
"""

from .option_table import (
    CONVERSION_OPTIONS,
    FORMAT_OPTIONS,
    reader_format_options,
    writer_format_options,
    writer_refuses,
)
from .parsing import parse_reader_formats, parse_writer_formats
from .registry_lookups import resolve_formats, resolve_sink_formats
from .specs import ColumnFormat, Formats, SinkFormat

__all__ = [
    "CONVERSION_OPTIONS",
    "FORMAT_OPTIONS",
    "reader_format_options",
    "writer_format_options",
    "writer_refuses",
    "parse_reader_formats",
    "parse_writer_formats",
    "resolve_formats",
    "resolve_sink_formats",
    "ColumnFormat",
    "Formats",
    "SinkFormat",
]
