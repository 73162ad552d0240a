"""Arrow rows (Spark's types) as JSON values: what the sinks start from when they write
JSON text (``valueFormat=json``) or fill a Protobuf message through protobuf's JSON mapping
(``valueFormat=protobuf``). One place decides:

- a map is an object, also when it is empty: Arrow's map type says so (``rows``), not a
  guess from the entries (an empty map used to look like an empty list, ``[]``); its keys
  are text (``key_text``: booleans as ``true``/``false``, as JSON and Spark write them);
- a decimal keeps every digit (``decimal_text``: plain notation, never through ``float``);
- NaN, Infinity and -Infinity are the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``
  (``non_finite_text``): what Spark's ``to_json`` writes (Jackson quotes non-numeric
  numbers), what protobuf's JSON mapping expects, and what this connector's JSON reader
  and Spark's ``from_json`` read back as the number. Bare, they are not JSON.
"""

from __future__ import annotations

import decimal
import math

import pyarrow as pa

__all__ = ["rows", "key_text", "decimal_text", "non_finite_text"]


def rows(array: pa.Array) -> list:
    """The rows of ``array`` as Python values, maps as dicts (structs are dicts too; a key
    given twice keeps its last value). Converted after ``to_pylist`` where the type holds
    maps: pyarrow's own ``maps_as_pydicts`` is several times slower."""
    values = array.to_pylist()
    convert = _maps_as_dicts(array.type)
    return values if convert is None else [None if v is None else convert(v) for v in values]


def _maps_as_dicts(t: pa.DataType):
    """A function turning ``to_pylist``'s value of type ``t`` (maps as lists of pairs)
    into one with dicts, or None when ``t`` holds no map."""
    if pa.types.is_map(t):
        item = _maps_as_dicts(t.item_type)
        if item is None:
            return dict
        return lambda pairs: {k: None if x is None else item(x) for k, x in pairs}
    if pa.types.is_struct(t):
        inner = [(t.field(i).name, _maps_as_dicts(t.field(i).type)) for i in range(t.num_fields)]
        inner = [(name, f) for name, f in inner if f is not None]
        if not inner:
            return None

        def struct(v: dict) -> dict:
            out = dict(v)
            for name, f in inner:
                if out.get(name) is not None:
                    out[name] = f(out[name])
            return out

        return struct
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        item = _maps_as_dicts(t.value_type)
        if item is None:
            return None
        return lambda items: [None if x is None else item(x) for x in items]
    return None


def key_text(key) -> str:
    """A map key as the text of a JSON object's member name."""
    if isinstance(key, bool):
        return "true" if key else "false"
    return key if isinstance(key, str) else str(key)


def decimal_text(value: decimal.Decimal) -> str:
    """Every digit of ``value``, in plain notation (a valid JSON number)."""
    return format(value, "f")


def non_finite_text(value: float) -> str | None:
    """``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` for such a float, else None."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return None
