"""Spark's DDL type strings (``"id INT, name STRING, tags ARRAY<STRING>"``) as Arrow types,
without a JVM.

Spark parses DDL in its JVM (``DataType.fromDDL``); the planner of a Python data source and
its executors have no JVM to ask, so this module reads the subset that describes data:
a column list (``name [:] TYPE [NOT NULL] [COMMENT '...']``, comma separated, names plain
or in backquotes) or a single type, with the types ``BOOLEAN``, ``TINYINT``/``BYTE``,
``SMALLINT``/``SHORT``, ``INT``/``INTEGER``, ``BIGINT``/``LONG``, ``FLOAT``/``REAL``,
``DOUBLE``, ``DECIMAL``/``DEC``/``NUMERIC`` ``[(p[, s])]`` (default (10, 0)), ``STRING``,
``VARCHAR(n)``/``CHAR(n)`` (read as string, as Spark reads them), ``BINARY``, ``DATE``,
``TIMESTAMP``/``TIMESTAMP_LTZ``, ``TIMESTAMP_NTZ``, ``ARRAY<T>``, ``MAP<K, V>`` and
``STRUCT<name[:] T, ...>``, case-insensitive. The Arrow types are the ones PySpark maps
Spark's types to (``timestamp`` -> ``timestamp[us, UTC]``, ``timestamp_ntz`` ->
``timestamp[us]``), so ``from_arrow_type`` gives back Spark's type. Nullability and
comments are read and dropped: ``from_json`` makes every field nullable.
"""

from __future__ import annotations

import re
from typing import cast

import pyarrow as pa

from protocol.errors import ConfigError

__all__ = ["DDLError", "parse_ddl"]


class DDLError(ConfigError):
    """A DDL string this parser (Spark's DDL subset) does not accept."""


_TOKEN = re.compile(
    r"""\s*(?:
    (?P<quoted>`(?:[^`]|``)*`)
  | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<number>\d+)
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>[<>(),:])
)""",
    re.VERBOSE,
)

_SIMPLE = {
    "boolean": pa.bool_(),
    "tinyint": pa.int8(),
    "byte": pa.int8(),
    "smallint": pa.int16(),
    "short": pa.int16(),
    "int": pa.int32(),
    "integer": pa.int32(),
    "bigint": pa.int64(),
    "long": pa.int64(),
    "float": pa.float32(),
    "real": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ltz": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}
_REFUSED = {"interval", "void", "variant", "object", "calendarinterval", "time"}


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                if text[pos:].strip() == "":
                    break
                raise self.error(f"unexpected character {text[pos]!r}", pos)
            kind = cast(str, m.lastgroup)  # every alternative of _TOKEN is a named group
            self.tokens.append((kind, m.group(kind), m.start(kind)))
            pos = m.end()
        self.i = 0

    def error(self, what: str, pos: int | None = None) -> DDLError:
        if pos is None:
            pos = self.tokens[self.i][2] if self.i < len(self.tokens) else len(self.text)
        near = self.text[pos : pos + 20] or "the end"
        return DDLError(f"{what} at position {pos} (near {near!r})")

    def peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, value: str | None = None, kind: str | None = None) -> str:
        tok = self.peek()
        if (
            tok is None
            or (value is not None and tok[1].lower() != value)
            or (kind is not None and tok[0] != kind)
        ):
            want = repr(value) if value else kind
            raise self.error(f"expected {want}")
        self.i += 1
        return tok[1]

    def accept(self, value: str) -> bool:
        tok = self.peek()
        if tok is not None and tok[0] in ("punct", "word") and tok[1].lower() == value:
            self.i += 1
            return True
        return False

    def at_end(self) -> bool:
        return self.i >= len(self.tokens)

    # ---- grammar -------------------------------------------------------------------

    def name(self) -> str:
        tok = self.peek()
        if tok is None or tok[0] not in ("word", "quoted", "number"):
            raise self.error("expected a field name")
        self.i += 1
        return tok[1][1:-1].replace("``", "`") if tok[0] == "quoted" else tok[1]

    def number(self) -> int:
        return int(self.take(kind="number"))

    def data_type(self) -> pa.DataType:
        tok = self.peek()
        if tok is None or tok[0] != "word":
            raise self.error("expected a type")
        word = tok[1].lower()
        self.i += 1
        if word in _SIMPLE:
            return _SIMPLE[word]
        if word in ("decimal", "dec", "numeric"):
            precision, scale = 10, 0
            if self.accept("("):
                precision = self.number()
                if self.accept(","):
                    scale = self.number()
                self.take(")")
            if not 1 <= precision <= 38 or scale > precision:
                raise self.error(
                    f"decimal({precision}, {scale}): Spark's decimals have a "
                    "precision of 1 to 38 and a scale not above it",
                    tok[2],
                )
            return pa.decimal128(precision, scale)
        if word in ("varchar", "char", "character"):
            self.take("(")
            self.number()
            self.take(")")
            return pa.string()
        if word == "array":
            self.take("<")
            item = self.data_type()
            self.take(">")
            return pa.list_(item)
        if word == "map":
            self.take("<")
            key = self.data_type()
            self.take(",")
            value = self.data_type()
            self.take(">")
            return pa.map_(key, value)
        if word == "struct":
            self.take("<")
            fields = [] if self.accept(">") else self.fields(closing=">")
            if fields:
                self.take(">")
            return pa.struct(fields)
        if word in _REFUSED:
            raise self.error(f"type {tok[1].upper()} is not supported here", tok[2])
        raise self.error(f"unknown type {tok[1]!r}", tok[2])

    def fields(self, closing: str | None = None) -> list[pa.Field]:
        out, seen = [], set()
        while True:
            at = cast("tuple[str, str, int]", self.peek())  # self.name() refuses the end
            name = self.name()
            self.accept(":")
            t = self.data_type()
            if self.accept("not"):
                self.take("null")
            if self.accept("comment"):
                self.take(kind="string")
                while (nxt := self.peek()) is not None and nxt[0] == "string":
                    self.i += 1  # adjacent literals: one string, as in Spark SQL
            if name in seen:
                raise self.error(f"field {name!r} appears twice", at[2])
            seen.add(name)
            out.append(pa.field(name, t))
            if not self.accept(","):
                break
        tok = self.peek()
        if tok is not None and (closing is None or tok[1] != closing):
            raise self.error("expected ',' or the end of the field list")
        return out


def parse_ddl(text: str) -> pa.DataType:
    """The Arrow type of a Spark DDL string: a column list is a struct; ``ARRAY<..>``,
    ``MAP<..>``, ``STRUCT<..>`` or a simple type stand alone. Raises ``DDLError``."""
    if not text or not text.strip():
        raise DDLError("an empty DDL string")
    single = _Parser(text)
    try:
        t = single.data_type()
        if single.at_end():
            return t
    except DDLError:
        pass
    columns = _Parser(text)
    return pa.struct(columns.fields())
