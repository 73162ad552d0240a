"""JSON values as Arrow columns of a Spark type.

- ``spark_types``: ``arrow_type(schema_text)``, the Spark type of a JSON Schema document,
  and ``json_schema_of(spark_type)``, the JSON Schema the writer registers with
  ``auto.register.schemas``;
- ``decoder``: ``Decoder(atype).decode(values, starts)`` -> (array, errors, reasons), each
  payload parsed and converted (``converters``) as Spark's ``from_json`` converts it, a batch
  at a time where it reads the same (``compiled``: Arrow's JSON reader; ``batch``: one
  ``json`` parse, a column at a time);
- ``encoder``: ``Encoder().encode(array)`` -> JSON text, as confluent-kafka's
  JSONSerializer writes it;
- ``inline_type(text, option)``: the type of a reader schema given in ``valueSchema``
  (``keySchema``): a JSON Schema document (a JSON object) or a Spark DDL string
  (``"id INT, name STRING"``, as ``from_json`` takes).
"""

from __future__ import annotations

import json

import pyarrow as pa

from kafka_common.spark_ddl import DDLError, parse_ddl
from protocol.errors import ConfigError

from .decoder import Decoder, JSONMismatch
from .spark_types import arrow_type

__all__ = ["Decoder", "JSONMismatch", "arrow_type", "inline_type", "is_json_schema"]


def is_json_schema(text: str) -> bool:
    """Whether a reader schema text is meant as a JSON Schema document (it starts with
    ``{``, which no DDL string does) rather than a Spark DDL string."""
    return text.lstrip().startswith("{")


def _check_keys(t: pa.DataType, option: str) -> None:
    if pa.types.is_map(t):
        if not pa.types.is_string(t.key_type):
            raise ConfigError(
                f"{option}: a map for JSON needs STRING keys (as from_json "
                f"requires), not {t.key_type}"
            )
        _check_keys(t.item_type, option)
    elif pa.types.is_list(t):
        _check_keys(t.value_type, option)
    elif pa.types.is_struct(t):
        for i in range(t.num_fields):
            _check_keys(t.field(i).type, option)


def inline_type(text: str, option: str) -> pa.DataType:
    """The Arrow type of ``text`` given in ``option`` for valueFormat/keyFormat=json."""
    if is_json_schema(text):
        try:
            root = json.loads(text)
        except ValueError as exc:
            raise ConfigError(
                f"{option} is neither a JSON Schema document nor a Spark DDL string: it "
                f"starts with '{{' as a JSON Schema does, but is not JSON ({exc})"
            ) from None
        if not isinstance(root, dict):
            raise ConfigError(f"{option}: a JSON Schema document must be a JSON object")
        return arrow_type(text)
    try:
        t = parse_ddl(text)
    except DDLError as exc:
        raise ConfigError(
            f"{option} is neither a JSON Schema document (a JSON object, starting with "
            f"'{{') nor a Spark DDL string such as \"id INT, name STRING, tags ARRAY<STRING>\""
            f": as DDL, {exc}"
        ) from None
    if not (pa.types.is_struct(t) or pa.types.is_list(t) or pa.types.is_map(t)):
        raise ConfigError(
            f"{option}: the DDL {text.strip()!r} is a single {t} value; "
            'from_json reads a struct (a column list such as "id INT, name '
            'STRING"), an ARRAY<..> or a MAP<STRING, ..>'
        )
    _check_keys(t, option)
    return t
