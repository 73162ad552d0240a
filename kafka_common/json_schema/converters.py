"""Parsed JSON values into what an Arrow column of a Spark type takes, as Spark's
``from_json`` converts them (``converter(type)``: one function per type, built once).

The conversion follows Spark's ``JacksonParser`` (and is checked against ``from_json``
in tests/test_schema_registry_spark.py): a missing field, or a JSON ``null`` inside the
row, is null; fields not in the type are ignored; integers take JSON integers in range
only (``1.0``, ``1e3`` or ``"1"`` do not fit; ``tinyint`` takes 128..255 as -128..-1, as
Jackson does); ``float``/``double`` take any number (out of range: infinity) and the
strings ``NaN``, ``Infinity``, ``+Infinity``, ``-Infinity``, ``+INF`` and ``-INF``;
``decimal(p, s)`` takes numbers and numeric strings, rounded half-up to ``s`` digits, and
refuses more than ``p`` digits; ``string`` takes a string as is and any other value as
its compact JSON text (numbers as Java prints a double: ``1.0E20``); ``binary`` takes
base64 text; ``date`` takes ``yyyy-[m]m-[d]d`` (optionally followed by a time);
``timestamp`` takes ISO-8601 text or Spark's looser forms (one-digit fields, a zone name)
-- read as UTC when it has no zone: the executors do not know the session time zone --
or a whole number of seconds since the epoch; ``timestamp_ntz`` takes such text without
a zone; arrays take arrays, structs and maps (string keys) take objects. A payload that
is not JSON, a root that is ``null`` or not an object (for a struct), or a value that
does not fit makes the row corrupt, with a reason naming the field: under FAILFAST the
query fails, under PERMISSIVE the row is null.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
import json
import re

import pyarrow as pa

from kafka_common.java_double import java_double

__all__ = ["JSONMismatch", "converter"]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EPOCH_NAIVE = dt.datetime(1970, 1, 1)
_SPECIAL = {
    "NaN": float("nan"),
    "Infinity": float("inf"),
    "+Infinity": float("inf"),
    "+INF": float("inf"),
    "-Infinity": float("-inf"),
    "-INF": float("-inf"),
}


class JSONMismatch(ValueError):
    """A JSON value that does not fit the column's type."""


def _kind(v) -> str:
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float, decimal.Decimal)):
        return f"the number {v}"
    if isinstance(v, str):
        return f"the string {v[:40]!r}"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


def _fail(where: str, want: str, v):
    raise JSONMismatch(f"{where or 'the value'}: expected {want}, got {_kind(v)}")


def _text(v) -> str:
    """A JSON value as the text Spark puts in a string field (Jackson's compact output)."""
    kind = type(v)
    if kind is str:
        return json.dumps(v, ensure_ascii=False)
    if kind is bool or v is None:
        return "true" if v is True else "false" if v is False else "null"
    if kind is int:
        return str(v)
    if kind is float or kind is decimal.Decimal:
        return java_double(v)
    if kind is list:
        return "[" + ",".join(_text(x) for x in v) + "]"
    return (
        "{"
        + ",".join(json.dumps(k, ensure_ascii=False) + ":" + _text(x) for k, x in v.items())
        + "}"
    )


_DATE = re.compile(r"\s*([+-]?\d{4,})(?:-(\d{1,2})(?:-(\d{1,2})(?:[T ].*)?)?)?\s*$", re.S)
_TIMESTAMP = re.compile(
    r"\s*(\d{4})-(\d{1,2})-(\d{1,2})(?:[T ](\d{1,2}):(\d{1,2})(?::(\d{1,2})"
    r"(?:\.(\d*))?)?)?\s*(Z|UTC|GMT|[+-]\d{1,2}(?::?\d{2})?|[A-Za-z]+/[A-Za-z_/+-]+)?\s*$"
)


def _micros(d: dt.datetime, base: dt.datetime) -> int:
    delta = d - base
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _parse_datetime(s: str, where: str) -> dt.datetime:
    """ISO-8601 text, or the looser forms Spark's ``stringToTimestamp`` takes (one-digit
    fields, a space before the zone, a zone name)."""
    try:
        return dt.datetime.fromisoformat(s.strip())
    except ValueError:
        pass
    m = _TIMESTAMP.match(s)
    try:
        if m is None:
            raise ValueError
        y, mo, d, h, mi, sec, frac, zone = m.groups()
        tz: dt.tzinfo | None = None
        if zone in ("Z", "UTC", "GMT"):
            tz = dt.timezone.utc
        elif zone and zone[0] in "+-":
            digits = zone[1:].replace(":", "")
            hours, minutes = (digits, "0") if len(digits) <= 2 else (digits[:-2], digits[-2:])
            offset = dt.timedelta(hours=int(hours), minutes=int(minutes))
            tz = dt.timezone(-offset if zone[0] == "-" else offset)
        elif zone:
            import zoneinfo

            tz = zoneinfo.ZoneInfo(zone)
        return dt.datetime(
            int(y),
            int(mo),
            int(d),
            int(h or 0),
            int(mi or 0),
            int(sec or 0),
            int((frac or "0")[:6].ljust(6, "0")),
            tzinfo=tz,
        )
    except (ValueError, KeyError, LookupError):
        raise JSONMismatch(f"{where or 'the value'}: {s[:40]!r} is not a timestamp") from None


def _struct(t: pa.StructType, where: str):
    # (name, the Python type that passes as is, converter): a string, a boolean or a
    # double field skips the converter's call for the JSON type it takes unchanged.
    fields = [
        (
            t.field(i).name,
            _as_is(t.field(i).type),
            converter(t.field(i).type, _join(where, t.field(i).name)),
        )
        for i in range(t.num_fields)
    ]

    def struct(v):
        if type(v) is not dict:
            _fail(where, "an object", v)
        get = v.get
        out = {}
        for name, same, conv in fields:
            x = get(name)
            out[name] = x if x is None or type(x) is same else conv(x)
        return out

    return struct


def _map(t: pa.MapType, where: str):
    conv = converter(t.item_type, f"{where}[]")

    def mapping(v):
        if type(v) is not dict:
            _fail(where, "an object", v)
        return [(k, None if x is None else conv(x)) for k, x in v.items()]

    return mapping


def _list(t: pa.ListType, where: str):
    conv = converter(t.value_type, f"{where}[]")

    def array(v):
        if type(v) is not list:
            _fail(where, "an array", v)
        return [None if x is None else conv(x) for x in v]

    return array


def _integer(t: pa.DataType, where: str):
    bits = t.bit_width
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    name = {8: "tinyint", 16: "smallint", 32: "int", 64: "bigint"}[bits]
    if bits == 8:
        high = 255  # Jackson's getByteValue takes 128..255 as -128..-1 (Spark too)

    def integer(v):
        if type(v) is not int:
            _fail(where, f"an integer ({name})", v)
        if not low <= v <= high:
            raise JSONMismatch(f"{where or 'the value'}: {v} is out of range for {name}")
        return v - 256 if v > 127 and bits == 8 else v

    return integer


def _floating(t: pa.DataType, where: str):
    def floating(v):
        kind = type(v)
        if kind is float or kind is int or kind is decimal.Decimal:
            return float(v)
        if kind is str and v in _SPECIAL:
            return _SPECIAL[v]
        _fail(where, "a number", v)

    return floating


def _decimal(t: pa.Decimal128Type, where: str):
    precision, scale = t.precision, t.scale
    quantum = decimal.Decimal(1).scaleb(-scale)

    def dec(v):
        if type(v) is bool or not isinstance(v, (int, float, decimal.Decimal, str)):
            _fail(where, f"a number (decimal({precision}, {scale}))", v)
        try:
            d = decimal.Decimal(
                v.strip() if isinstance(v, str) else repr(v) if isinstance(v, float) else v
            )
            d = d.quantize(
                quantum, rounding=decimal.ROUND_HALF_UP, context=decimal.Context(prec=80)
            )
        except (decimal.InvalidOperation, ValueError):
            _fail(where, f"a number (decimal({precision}, {scale}))", v)
        if not d.is_finite() or len(d.as_tuple().digits) > precision and d != 0:
            raise JSONMismatch(
                f"{where or 'the value'}: {v} does not fit decimal({precision}, {scale})"
            )
        return d

    return dec


def _boolean(t: pa.DataType, where: str):
    def boolean(v):
        if type(v) is not bool:
            _fail(where, "a boolean", v)
        return v

    return boolean


def _string(t: pa.DataType, where: str):
    def string(v):
        return v if type(v) is str else _text(v)

    return string


def _binary(t: pa.DataType, where: str):
    def binary(v):
        if type(v) is not str:
            _fail(where, "a base64 string", v)
        try:
            return base64.b64decode(v, validate=True)
        except (binascii.Error, ValueError):
            raise JSONMismatch(f"{where or 'the value'}: {v[:40]!r} is not base64") from None

    return binary


def _date(t: pa.DataType, where: str):
    def date(v):
        if type(v) is not str:
            _fail(where, "a date string (yyyy-MM-dd)", v)
        m = _DATE.match(v)
        try:
            if m is None:
                raise ValueError
            return dt.date(int(m.group(1)), int(m.group(2) or 1), int(m.group(3) or 1))
        except ValueError:
            raise JSONMismatch(
                f"{where or 'the value'}: {v[:40]!r} is not a date (yyyy-MM-dd)"
            ) from None

    return date


def _timestamp(t: pa.DataType, where: str):
    def timestamp(v):
        kind = type(v)
        if kind is int:
            return v * 1_000_000
        if kind is not str:
            _fail(where, "a timestamp string or a number of seconds", v)
        d = _parse_datetime(v, where)
        if d.tzinfo is None:
            d = d.replace(tzinfo=dt.timezone.utc)
        return _micros(d, _EPOCH)

    return timestamp


def _timestamp_ntz(t: pa.DataType, where: str):
    def timestamp_ntz(v):
        if type(v) is not str:
            _fail(where, "a timestamp string without a time zone", v)
        d = _parse_datetime(v, where)
        if d.tzinfo is not None:
            raise JSONMismatch(
                f"{where or 'the value'}: {v[:40]!r} has a time zone "
                "offset, which timestamp_ntz does not take"
            )
        return _micros(d, _EPOCH_NAIVE)

    return timestamp_ntz


def _null(t: pa.DataType, where: str):
    def null(v):
        _fail(where, "null", v)

    return null


#: (is the type one of these, the converter's maker), tried in order.
_MAKERS = (
    (pa.types.is_struct, _struct),
    (pa.types.is_map, _map),
    (pa.types.is_list, _list),
    (pa.types.is_integer, _integer),
    (pa.types.is_floating, _floating),
    (pa.types.is_decimal, _decimal),
    (pa.types.is_boolean, _boolean),
    (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t), _string),
    (lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t), _binary),
    (pa.types.is_date, _date),
    (lambda t: pa.types.is_timestamp(t) and t.tz is not None, _timestamp),
    (pa.types.is_timestamp, _timestamp_ntz),
    (pa.types.is_null, _null),
)


def converter(t: pa.DataType, where: str = ""):
    """A function turning a (non-null) parsed JSON value into what ``pa.array(.., t)``
    takes; raises ``JSONMismatch`` naming ``where`` (the field path)."""
    for matches, make in _MAKERS:
        if matches(t):
            return make(t, where)
    raise TypeError(f"no JSON conversion to {t}")


def _as_is(t: pa.DataType):
    """The Python type of parsed JSON that a field of ``t`` keeps unchanged, if any."""
    if pa.types.is_string(t):
        return str
    if pa.types.is_boolean(t):
        return bool
    if pa.types.is_float64(t):
        return float
    return _NONE


class _NONE:
    """No parsed JSON value has this type."""


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name
