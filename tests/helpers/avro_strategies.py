"""Hypothesis strategies for the Avro tests: random Avro schemas (JSON), and for a schema,
random datums as fastavro writes them together with the value Spark's ``from_avro`` gives
for them (as ``pyarrow``'s ``to_pylist`` shows it), so a decoder's output can be compared
with no decoder in between.

Unions are kept unambiguous for the writer (fastavro picks a union branch from the Python
value): named branches are written as ``(name, value)``, and a union never holds two
branches one value could fit (int and long, float and double next to other branches,
bytes and fixed, string and enum, a record and a map, logical types beside other types).
"""

from __future__ import annotations

import datetime
import decimal
import itertools

from hypothesis import strategies as st

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
EPOCH_NAIVE = datetime.datetime(1970, 1, 1)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
FLOAT32 = st.floats(width=32, allow_nan=False)
FLOAT64 = st.floats(allow_nan=False)
# microseconds from 0001-01-01 to 9999-12-31, the span Python's datetime holds
MICROS = st.integers(-62135596800 * 10**6, 253402300799 * 10**6)

PLAIN = ["boolean", "int", "long", "float", "double", "bytes", "string"]
LOGICAL = [
    {"type": "int", "logicalType": "date"},
    {"type": "long", "logicalType": "timestamp-millis"},
    {"type": "long", "logicalType": "timestamp-micros"},
    {"type": "long", "logicalType": "local-timestamp-millis"},
    {"type": "long", "logicalType": "local-timestamp-micros"},
    {"type": "int", "logicalType": "time-millis"},
    {"type": "long", "logicalType": "time-micros"},
    {"type": "string", "logicalType": "uuid"},
    {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
    {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 10},
]
FIELD_NAMES = st.sampled_from(["a", "b", "c", "id", "name", "value", "x_1", "Y"])


@st.composite
def schemas(draw, depth: int = 3):
    """A random Avro schema (JSON value) whose named types have unique names."""
    counter = itertools.count()
    return _schema(draw, depth, counter, top=True)


def _name(counter, kind):
    return f"{kind}{next(counter)}"


def _schema(draw, depth, counter, top=False):
    kinds = ["plain"] * 6 + ["logical"] * 2 + ["enum", "fixed", "decimal_fixed"]
    if depth > 0:
        kinds += ["record"] * 3 + ["array", "map", "union", "union"]
    kind = "record" if top else draw(st.sampled_from(kinds))
    if kind == "plain":
        return draw(st.sampled_from(PLAIN))
    if kind == "logical":
        return dict(draw(st.sampled_from(LOGICAL)))
    if kind == "enum":
        symbols = draw(
            st.lists(
                st.sampled_from(["A", "B", "C", "D", "E_1"]), min_size=1, max_size=5, unique=True
            )
        )
        return {"type": "enum", "name": _name(counter, "E"), "namespace": "ns", "symbols": symbols}
    if kind == "fixed":
        return {
            "type": "fixed",
            "name": _name(counter, "F"),
            "namespace": "ns",
            "size": draw(st.integers(0, 20)),
        }
    if kind == "decimal_fixed":
        size = draw(st.integers(1, 16))
        precision = draw(st.integers(1, max(1, min(38, int(2.408 * size - 0.302)))))
        return {
            "type": "fixed",
            "name": _name(counter, "D"),
            "namespace": "ns",
            "size": size,
            "logicalType": "decimal",
            "precision": precision,
            "scale": draw(st.integers(0, precision)),
        }
    if kind == "record":
        names = draw(st.lists(FIELD_NAMES, max_size=5, unique=True))
        return {
            "type": "record",
            "name": _name(counter, "R"),
            "namespace": "ns",
            "fields": [{"name": n, "type": _schema(draw, depth - 1, counter)} for n in names],
        }
    if kind == "array":
        return {"type": "array", "items": _schema(draw, depth - 1, counter)}
    if kind == "map":
        return {"type": "map", "values": _schema(draw, depth - 1, counter)}
    return _union(draw, depth, counter)


def _union(draw, depth, counter):
    if draw(st.booleans()):  # the common [null, T], in either order
        t = _schema(draw, depth - 1, counter)
        while isinstance(t, list):
            t = _schema(draw, depth - 1, counter)
        return ["null", t] if draw(st.booleans()) else [t, "null"]
    pool = draw(
        st.lists(
            st.sampled_from(["null"] + PLAIN + ["record", "enum", "fixed", "array", "map"]),
            min_size=1,
            max_size=5,
            unique=True,
        )
    )
    if "int" in pool and "long" in pool and len([p for p in pool if p != "null"]) > 2:
        pool.remove("int")
    if "float" in pool and "double" in pool and len([p for p in pool if p != "null"]) > 2:
        pool.remove("float")
    if {"int", "long"} & set(pool):  # fastavro writes an int to a float branch too
        pool = [p for p in pool if p not in ("float", "double")]
    # (fastavro takes bytes for an array: they are a sequence)
    for a, b in (("bytes", "fixed"), ("string", "enum"), ("map", "record"), ("bytes", "array")):
        if a in pool and b in pool:
            pool.remove(b)
    branches = []
    for p in pool:
        if p in ("record", "enum", "fixed", "array", "map"):
            t = _schema(draw, depth - 1, counter) if p in ("array", "map") else None
            if p == "record":
                t = {
                    "type": "record",
                    "name": _name(counter, "R"),
                    "namespace": "ns",
                    "fields": [{"name": "f", "type": _schema(draw, 0, counter)}],
                }
            elif p == "enum":
                t = {
                    "type": "enum",
                    "name": _name(counter, "E"),
                    "namespace": "ns",
                    "symbols": ["X", "Y"],
                }
            elif p == "fixed":
                t = {"type": "fixed", "name": _name(counter, "F"), "namespace": "ns", "size": 3}
            elif p == "array":
                t = {"type": "array", "items": _plain_item(draw)}
            else:
                t = {"type": "map", "values": _plain_item(draw)}
            branches.append(t)
        else:
            branches.append(p)
    return branches


def _plain_item(draw):
    return draw(st.sampled_from(PLAIN))


# ---- data --------------------------------------------------------------------------------


def _type_of(s):
    if isinstance(s, str):
        return s
    if isinstance(s, list):
        return "union"
    return s["type"]


def _member_names(branches, stable=False):
    non_null = [b for b in branches if _type_of(b) != "null"]
    if not stable:
        return [f"member{i}" for i in range(len(non_null))]
    return [
        f"member_{b['name'] if isinstance(b, dict) and 'name' in b else _type_of(b)}"
        for b in non_null
    ]


@st.composite
def datum(draw, s, named=None):
    """(value for fastavro, value as from_avro shows it) for schema ``s`` (JSON)."""
    return _datum(draw, s, {} if named is None else named)


def _datum(draw, s, named):
    if isinstance(s, str) and s in named:
        return _datum(draw, named[s], named)
    if isinstance(s, list):
        return _union_datum(draw, s, named)
    if isinstance(s, dict) and "name" in s:
        named[s["name"]] = s
        if "namespace" in s:
            named[f"{s['namespace']}.{s['name']}"] = s
    t = _type_of(s)
    lt = s.get("logicalType") if isinstance(s, dict) else None
    if t == "null":
        return None, None
    if t == "boolean":
        v = draw(st.booleans())
        return v, v
    if lt == "date":
        d = draw(st.dates())
        return d, d
    if lt in (
        "timestamp-millis",
        "timestamp-micros",
        "local-timestamp-millis",
        "local-timestamp-micros",
    ):
        us = draw(MICROS)
        if lt.endswith("millis"):
            us -= us % 1000
        base = EPOCH if lt.startswith("timestamp") else EPOCH_NAIVE
        v = base + datetime.timedelta(microseconds=us)
        return v, v
    if lt == "time-millis":
        v = draw(st.integers(0, 86400 * 1000 - 1))
        return v, v
    if lt == "time-micros":
        v = draw(st.integers(0, 86400 * 10**6 - 1))
        return v, v
    if lt == "uuid":
        v = str(draw(st.uuids()))
        return v, v
    if lt == "decimal":
        p, sc = s["precision"], s.get("scale", 0)
        unscaled = draw(st.integers(-(10**p) + 1, 10**p - 1))
        v = decimal.Decimal(unscaled).scaleb(-sc, context=decimal.Context(prec=80))
        return v, v
    if t == "int":
        v = draw(INT32)
        return v, v
    if t == "long":
        v = draw(INT64)
        return v, v
    if t == "float":
        v = draw(FLOAT32)
        return v, v
    if t == "double":
        v = draw(FLOAT64)
        return v, v
    if t == "bytes":
        v = draw(st.binary(max_size=20))
        return v, v
    if t == "string":
        v = draw(st.text(max_size=12))
        return v, v
    if t == "fixed":
        v = draw(st.binary(min_size=s["size"], max_size=s["size"]))
        return v, v
    if t == "enum":
        v = draw(st.sampled_from(s["symbols"]))
        return v, v
    if t == "array":
        pairs = [_datum(draw, s["items"], named) for _ in range(draw(st.integers(0, 4)))]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    if t == "map":
        keys = draw(st.lists(st.text(max_size=5), max_size=4, unique=True))
        pairs = [_datum(draw, s["values"], named) for _ in keys]
        return ({k: p[0] for k, p in zip(keys, pairs)}, [(k, p[1]) for k, p in zip(keys, pairs)])
    if t == "record":
        w, e = {}, {}
        for f in s["fields"]:
            w[f["name"]], e[f["name"]] = _datum(draw, f["type"], named)
        return w, e
    raise AssertionError(f"no data for {s!r}")


def _union_datum(draw, branches, named):
    i = draw(st.integers(0, len(branches) - 1))
    b = branches[i]
    non_null = [x for x in branches if _type_of(x) != "null"]
    kinds = sorted(_type_of(x) for x in non_null)
    if kinds == ["double", "float"]:  # fastavro may write either: keep float's precision
        v = draw(FLOAT32)
        return v, v
    w, e = _datum(draw, b, named)
    if _type_of(b) == "null":
        return None, None
    if isinstance(b, dict) and "name" in b:
        w = (f"{b['namespace']}.{b['name']}" if "namespace" in b else b["name"], w)
    if len(non_null) == 1 or kinds in (["int", "long"], ["double", "float"]):
        return w, e
    names = _member_names(branches)
    j = non_null.index(b)
    return w, {n: (e if k == j else None) for k, n in enumerate(names)}
