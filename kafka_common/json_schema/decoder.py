"""JSON payloads into an Arrow column of a Spark type, as Spark's ``from_json`` converts them.

The conversion follows Spark's ``JacksonParser``: a missing field, or a JSON ``null``, is
null; fields not in the type are ignored; integers (``tinyint`` to ``bigint``) take JSON
integers in range only (``1.0`` or ``"1"`` do not fit); ``float``/``double`` take any
number and the strings ``NaN``, ``Infinity``, ``+Infinity``, ``-Infinity``, ``INF``,
``+INF``, ``-INF``; ``decimal(p, s)`` takes numbers and numeric strings, rounded half-up
to ``s`` digits, and refuses more than ``p`` digits; ``string`` takes a string as is and
any other value as its JSON text; ``binary`` takes base64 text; ``date`` takes
``yyyy-MM-dd`` (optionally followed by a time); ``timestamp`` takes ISO-8601 text (read
as UTC when it has no offset: the executors do not know the session time zone) or a
number of seconds since the epoch; ``timestamp_ntz`` takes ISO-8601 text without an
offset; arrays take arrays, structs and maps (string keys) take objects. A payload that
is not JSON, or a value that does not fit, makes the row corrupt (with a reason naming
the field): under FAILFAST the query fails, under PERMISSIVE the row is null.

Rows are parsed with the standard ``json`` module and converted by per-type functions
built once per decoder: row by row in Python.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
import json

import numpy as np
import pyarrow as pa

__all__ = ["Decoder", "JSONMismatch"]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EPOCH_NAIVE = dt.datetime(1970, 1, 1)
_SPECIAL = {"NaN": float("nan"), "Infinity": float("inf"), "+Infinity": float("inf"),
            "INF": float("inf"), "+INF": float("inf"), "-Infinity": float("-inf"),
            "-INF": float("-inf")}


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
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False,
                      default=lambda d: float(d) if isinstance(d, decimal.Decimal) else str(d))


def _micros(d: dt.datetime, base: dt.datetime) -> int:
    delta = d - base
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _parse_datetime(s: str, where: str) -> dt.datetime:
    try:
        return dt.datetime.fromisoformat(s.strip())
    except ValueError:
        raise JSONMismatch(f"{where or 'the value'}: {s[:40]!r} is not an ISO-8601 "
                           "timestamp") from None


def converter(t: pa.DataType, where: str = ""):
    """A function turning a (non-null) parsed JSON value into what ``pa.array(.., t)``
    takes; raises ``JSONMismatch`` naming ``where`` (the field path)."""
    if pa.types.is_struct(t):
        fields = [(t.field(i).name, converter(t.field(i).type, _join(where, t.field(i).name)))
                  for i in range(t.num_fields)]

        def struct(v):
            if type(v) is not dict:
                _fail(where, "an object", v)
            get = v.get
            out = {}
            for name, conv in fields:
                x = get(name)
                out[name] = None if x is None else conv(x)
            return out
        return struct
    if pa.types.is_map(t):
        conv = converter(t.item_type, f"{where}[]")

        def mapping(v):
            if type(v) is not dict:
                _fail(where, "an object", v)
            return [(k, None if x is None else conv(x)) for k, x in v.items()]
        return mapping
    if pa.types.is_list(t):
        conv = converter(t.value_type, f"{where}[]")

        def array(v):
            if type(v) is not list:
                _fail(where, "an array", v)
            return [None if x is None else conv(x) for x in v]
        return array
    if pa.types.is_integer(t):
        bits = t.bit_width
        low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        name = {8: "tinyint", 16: "smallint", 32: "int", 64: "bigint"}[bits]

        def integer(v):
            if type(v) is not int:
                _fail(where, f"an integer ({name})", v)
            if not low <= v <= high:
                raise JSONMismatch(f"{where or 'the value'}: {v} is out of range for {name}")
            return v
        return integer
    if pa.types.is_floating(t):
        def floating(v):
            kind = type(v)
            if kind is float or kind is int:
                return float(v)
            if kind is decimal.Decimal:
                return float(v)
            if kind is str and v in _SPECIAL:
                return _SPECIAL[v]
            _fail(where, "a number", v)
        return floating
    if pa.types.is_decimal(t):
        precision, scale = t.precision, t.scale
        quantum = decimal.Decimal(1).scaleb(-scale)

        def dec(v):
            if type(v) is bool or not isinstance(v, (int, float, decimal.Decimal, str)):
                _fail(where, f"a number (decimal({precision}, {scale}))", v)
            try:
                d = decimal.Decimal(v.strip() if isinstance(v, str) else
                                    repr(v) if isinstance(v, float) else v)
                d = d.quantize(quantum, rounding=decimal.ROUND_HALF_UP,
                               context=decimal.Context(prec=80))
            except (decimal.InvalidOperation, ValueError):
                _fail(where, f"a number (decimal({precision}, {scale}))", v)
            if not d.is_finite() or len(d.as_tuple().digits) > precision and d != 0:
                raise JSONMismatch(f"{where or 'the value'}: {v} does not fit "
                                   f"decimal({precision}, {scale})")
            return d
        return dec
    if pa.types.is_boolean(t):
        def boolean(v):
            if type(v) is not bool:
                _fail(where, "a boolean", v)
            return v
        return boolean
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        def string(v):
            return v if type(v) is str else _text(v)
        return string
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        def binary(v):
            if type(v) is not str:
                _fail(where, "a base64 string", v)
            try:
                return base64.b64decode(v, validate=True)
            except (binascii.Error, ValueError):
                raise JSONMismatch(f"{where or 'the value'}: {v[:40]!r} is not base64") \
                    from None
        return binary
    if pa.types.is_date(t):
        def date(v):
            if type(v) is not str:
                _fail(where, "a date string (yyyy-MM-dd)", v)
            s = v.strip()
            try:
                if len(s) > 10 and s[10] in "T ":
                    s = s[:10]
                return dt.date.fromisoformat(s)
            except ValueError:
                raise JSONMismatch(f"{where or 'the value'}: {v[:40]!r} is not a date "
                                   "(yyyy-MM-dd)") from None
        return date
    if pa.types.is_timestamp(t) and t.tz is not None:
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
    if pa.types.is_timestamp(t):
        def timestamp_ntz(v):
            if type(v) is not str:
                _fail(where, "a timestamp string without a time zone", v)
            d = _parse_datetime(v, where)
            if d.tzinfo is not None:
                raise JSONMismatch(f"{where or 'the value'}: {v[:40]!r} has a time zone "
                                   "offset, which timestamp_ntz does not take")
            return _micros(d, _EPOCH_NAIVE)
        return timestamp_ntz
    if pa.types.is_null(t):
        def null(v):
            _fail(where, "null", v)
        return null
    raise TypeError(f"no JSON conversion to {t}")


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _has_decimal(t: pa.DataType) -> bool:
    if pa.types.is_decimal(t):
        return True
    if pa.types.is_struct(t):
        return any(_has_decimal(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _has_decimal(t.item_type)
    if pa.types.is_list(t):
        return _has_decimal(t.value_type)
    return False


class Decoder:
    """``decode(values, starts) -> (array, errors, reasons)``: each payload (from its start
    offset) parsed as JSON and converted to ``atype`` as ``from_json`` would."""

    def __init__(self, atype: pa.DataType):
        self.type = atype
        self.convert = converter(atype)
        self.loads = json.JSONDecoder(parse_float=decimal.Decimal).decode \
            if _has_decimal(atype) else json.JSONDecoder().decode

    def decode(self, values: pa.Array, starts):
        rows, errors, reasons = [], np.zeros(len(values), dtype=bool), {}
        convert, loads = self.convert, self.loads
        for i, (raw, start) in enumerate(zip(values.to_pylist(), starts)):
            if raw is None:
                rows.append(None)
                continue
            try:
                doc = loads(raw[int(start):].decode("utf-8"))
            except (ValueError, UnicodeDecodeError) as exc:
                errors[i] = True
                reasons[i] = f"not JSON: {exc}"
                rows.append(None)
                continue
            try:
                rows.append(None if doc is None else convert(doc))
            except JSONMismatch as exc:
                errors[i] = True
                reasons[i] = str(exc)
                rows.append(None)
        try:
            return pa.array(rows, self.type), errors, reasons
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            good = []
            for i, row in enumerate(rows):
                try:
                    pa.array([row], self.type)
                    good.append(row)
                except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
                    errors[i] = True
                    reasons[i] = f"does not fit {self.type}: {exc}"
                    good.append(None)
            return pa.array(good, self.type), errors, reasons
