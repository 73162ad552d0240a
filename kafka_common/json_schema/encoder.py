"""JSON text of Arrow values, as confluent-kafka's JSONSerializer writes it: the payloads
of the writer's ``valueFormat=json`` (``Encoder().encode(array)`` -> binary array)."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json

import pyarrow as pa

from kafka_common.arrow_json import decimal_text, key_text, non_finite_text, rows

from .spark_types import holds_decimals

__all__ = ["Encoder"]


class Encoder:
    """Each row as JSON text (UTF-8), as confluent-kafka's JSONSerializer writes it:
    dates and timestamps as ISO 8601 strings, binary as base64, maps as objects (also when
    empty), decimals with every digit as JSON numbers, NaN and infinities as the strings
    Spark's ``to_json`` writes (``kafka_common.arrow_json``)."""

    def encode(self, array: pa.Array) -> pa.Array:
        exact = holds_decimals(array.type)
        return pa.array(
            [None if row is None else _json_bytes(row, exact) for row in rows(array)], pa.binary()
        )


def _json_bytes(row, exact: bool) -> bytes:
    """``row`` as JSON text: by ``json.dumps`` (C) when it can write the row exactly (no
    decimal in the type, no NaN or infinity in the row), else by ``_json_text``."""
    if not exact:
        try:
            return json.dumps(
                row, separators=(",", ":"), allow_nan=False, default=_json_scalar
            ).encode()
        except (ValueError, TypeError):
            pass  # a NaN or an infinity, or a map key json.dumps does not take
    return _json_text(row).encode()


def _json_scalar(v):
    """The JSON value of a date, timestamp or binary value (``json.dumps``'s default)."""
    if isinstance(v, (dt.date, dt.datetime)):
        return v.isoformat()
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    raise TypeError(f"valueFormat=json cannot write a {type(v).__name__} value ({v!r})")


def _json_text(v) -> str:
    """``v`` (a row of ``arrow_json.rows``) as compact JSON text, decimals with every digit
    (``json.dumps`` writes them only through ``float``) and NaN and the infinities quoted."""
    if v is None:
        return "null"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return int.__repr__(v)
    if isinstance(v, float):
        special = non_finite_text(v)
        return float.__repr__(v) if special is None else f'"{special}"'
    if isinstance(v, dict):
        return (
            "{"
            + ",".join(json.dumps(key_text(k)) + ":" + _json_text(x) for k, x in v.items())
            + "}"
        )
    if isinstance(v, list):
        return "[" + ",".join(_json_text(x) for x in v) + "]"
    if isinstance(v, decimal.Decimal):
        return decimal_text(v)
    return json.dumps(_json_scalar(v))
