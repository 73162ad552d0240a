"""Schema resolution: data written with one schema read with another, by
``kafka_common.avro`` and, as referees, by fastavro and Apache ``avro`` given the same
writer and reader schemas (their values turned into what Spark's ``from_avro`` shows)."""

import decimal
import io
import json

import avro.io
import avro.schema
import fastavro
import numpy as np
import pyarrow as pa
import pytest

from kafka_common.avro import AvroResolutionError, Decoder, arrow_type, parse_schema, resolve


def rec(name, *fields, **extra):
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def fld(name, type_, **extra):
    return {"name": name, "type": type_, **extra}


def write(schema, values):
    parsed = fastavro.parse_schema(schema)
    out = []
    for v in values:
        b = io.BytesIO()
        fastavro.schemaless_writer(b, parsed, v)
        out.append(b.getvalue())
    return out


def ours(writer, reader, payloads, options=None):
    d = Decoder(parse_schema(json.dumps(writer)), parse_schema(json.dumps(reader)), options)
    arr, errors = d.decode(pa.array(payloads, pa.binary()))
    return arr.to_pylist(), errors


def referee(judge, writer, reader, payloads):
    """fastavro's or Apache avro's reading of the payloads."""
    if judge == "fastavro":
        fw, fr = fastavro.parse_schema(writer), fastavro.parse_schema(reader)
        return [fastavro.schemaless_reader(io.BytesIO(p), fw, fr) for p in payloads]
    aw = avro.schema.parse(json.dumps(writer))
    ar = avro.schema.parse(json.dumps(reader))
    reader_ = avro.io.DatumReader(aw, ar)
    return [reader_.read(avro.io.BinaryDecoder(io.BytesIO(p))) for p in payloads]


def _maps_as_pairs(v, t):
    """Our map values come back as lists of pairs: the referees' dicts to match."""
    if pa.types.is_map(t):
        return None if v is None else [(k, _maps_as_pairs(x, t.item_type)) for k, x in v.items()]
    if pa.types.is_struct(t):
        return (
            None
            if v is None
            else {
                t.field(i).name: _maps_as_pairs(v[t.field(i).name], t.field(i).type)
                for i in range(t.num_fields)
            }
        )
    if pa.types.is_list(t):
        return None if v is None else [_maps_as_pairs(x, t.value_type) for x in v]
    return v


def check(writer, reader, values, judges=("fastavro", "avro"), fix=lambda v: v):
    """We and the ``judges`` read the same (after ``fix`` on theirs); returns our rows.

    Where a referee is left out, it departs from the Avro specification (and from Java's
    reader, which Spark runs): fastavro returns a bytes field's default as the JSON string,
    Apache ``avro`` for Python as its UTF-8 (not code points 0-255 as bytes), and it lacks
    the string/bytes promotions and enum defaults. Both
    widen int/long to a Python float (a double) where Java rounds to a float: ``fix``."""
    payloads = write(writer, values)
    got, errors = ours(writer, reader, payloads)
    assert not errors.any()
    t = arrow_type(parse_schema(json.dumps(reader)))
    for judge in judges:
        theirs = referee(judge, writer, reader, payloads)
        assert got == [fix(_maps_as_pairs(v, t)) for v in theirs], judge
    return got


W1 = rec("User", fld("id", "int"), fld("name", "string"), fld("score", "float"))


def test_fields_added_with_defaults_removed_and_reordered():
    reader = rec(
        "User",
        fld("score", "double"),  # promoted float -> double, moved first
        fld("id", "long"),  # promoted int -> long
        fld("email", ["null", "string"], default=None),
        fld("level", "int", default=3),
        fld("tags", {"type": "array", "items": "string"}, default=["a", "b"]),
        fld("attrs", {"type": "map", "values": "long"}, default={"k": 1}),
        fld("kind", {"type": "enum", "name": "Kind", "symbols": ["X", "Y"]}, default="Y"),
        fld("blob", "bytes", default="\u0001ab"),
        fld(
            "inner",
            rec("Inner", fld("a", "int"), fld("b", "string", default="z")),
            default={"a": 7, "b": "z"},
        ),
    )
    got = check(
        W1,
        reader,
        [{"id": 1, "name": "ann", "score": 1.5}, {"id": -2, "name": "", "score": -0.25}],
        judges=("avro",),
    )
    assert got[0] == {
        "score": 1.5,
        "id": 1,
        "email": None,
        "level": 3,
        "tags": ["a", "b"],
        "attrs": [("k", 1)],
        "kind": "Y",
        "blob": b"\x01ab",
        "inner": {"a": 7, "b": "z"},
    }


def _as_float32(row):
    return {"v": float(np.float32(row["v"]))}


def test_bytes_and_fixed_defaults_are_code_points_0_to_255():
    # the specification: "Unicode code points 0-255 are mapped to unsigned 8-bit byte values"
    w = rec("R", fld("a", "int"))
    r = rec(
        "R",
        fld("a", "int"),
        fld("b", "bytes", default="\u00ff\u0000A"),
        fld("f", {"type": "fixed", "name": "F", "size": 2}, default="\u00e9\u0080"),
        fld(
            "d",
            {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2},
            default="\u00ff\u0038",
        ),
    )
    got, errors = ours(w, r, write(w, [{"a": 1}]))
    assert got == [{"a": 1, "b": b"\xff\x00A", "f": b"\xe9\x80", "d": decimal.Decimal("-2.00")}]


@pytest.mark.parametrize(
    "wtype,rtype,value,expected,judges",
    [
        ("int", "long", -5, -5, ("fastavro", "avro")),
        ("int", "float", 16777217, 16777216.0, ("fastavro", "avro")),
        ("int", "double", 2**31 - 1, 2**31 - 1.0, ("fastavro", "avro")),
        ("long", "float", 2**40 + 1, float(np.float32(2**40 + 1)), ("fastavro", "avro")),
        ("long", "double", -(2**53), -(2.0**53), ("fastavro", "avro")),
        ("float", "double", 0.1, float(np.float32(0.1)), ("fastavro", "avro")),
        ("string", "bytes", "héllo", "héllo".encode(), ("fastavro",)),
        ("bytes", "string", b"abc", "abc", ("fastavro",)),
    ],
)
def test_promotions(wtype, rtype, value, expected, judges):
    got = check(
        rec("R", fld("v", wtype)),
        rec("R", fld("v", rtype)),
        [{"v": value}],
        judges=judges,
        fix=_as_float32 if rtype == "float" else (lambda v: v),
    )
    assert got == [{"v": expected}]


def test_enum_symbols_by_name_and_reader_default():
    w = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE", "PINK"]}
    r = {"type": "enum", "name": "Color", "symbols": ["BLUE", "RED", "OTHER"], "default": "OTHER"}
    got = check(w, r, ["RED", "BLUE", "PINK", "GREEN"], judges=("fastavro",))
    assert got == ["RED", "BLUE", "OTHER", "OTHER"]


def test_enum_symbol_without_reader_default_fails_that_row_only():
    w = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}
    r = {"type": "enum", "name": "Color", "symbols": ["RED"]}
    got, errors = ours(w, r, write(w, ["RED", "GREEN", "RED"]))
    assert got == ["RED", None, "RED"]
    assert errors.tolist() == [False, True, False]
    with pytest.raises(Exception):  # noqa: B017 (both referees refuse the row too)
        fastavro.schemaless_reader(
            io.BytesIO(write(w, ["GREEN"])[0]), fastavro.parse_schema(w), fastavro.parse_schema(r)
        )


def test_unions_both_ways():
    # a plain writer type read into the reader's union
    check("int", ["null", "long"], [1, -1])
    # writer [null, int] read as [null, long, string]: nulls stay, ints widen
    got, errors = ours(
        ["null", "int"], ["string", "null", "long"], write(["null", "int"], [None, 3])
    )
    assert got == [None, {"member0": None, "member1": 3}]
    assert not errors.any()
    # writer union read as one type: rows of a branch the reader lacks fail alone
    got, errors = ours(
        ["null", "int", "string"], "long", write(["null", "int", "string"], [5, None, "x", 6])
    )
    assert got == [5, None, None, 6]
    assert errors.tolist() == [False, True, True, False]
    # branches reordered, records matched by name in the union
    a = rec("A", fld("x", "int"))
    b = rec("B", fld("y", "string"))
    w = ["null", a, b]
    r = [b, "null", rec("A", fld("x", "long"), fld("z", "int", default=0))]
    got, errors = ours(w, r, write(w, [("A", {"x": 1}), None, ("B", {"y": "q"})]))
    assert not errors.any()
    assert got == [
        {"member0": None, "member1": {"x": 1, "z": 0}},
        None,
        {"member0": {"y": "q"}, "member1": None},
    ]


def test_field_aliases_and_named_type_aliases():
    w = rec("Old", fld("n", "int"), fld("gone", {"type": "array", "items": "long"}))
    r = rec("New", fld("number", "long", aliases=["n"]), aliases=["Old"])
    # Apache avro for Python has no aliases
    assert check(w, r, [{"n": 4, "gone": [1, 2, 3]}], judges=("fastavro",)) == [{"number": 4}]


def test_removed_fields_of_every_kind_are_skipped():
    w = rec(
        "R",
        fld("a", rec("X", fld("p", "string"), fld("q", ["null", "double"]))),
        fld("b", {"type": "map", "values": {"type": "array", "items": "string"}}),
        fld("c", {"type": "fixed", "name": "F", "size": 3}),
        fld("d", ["null", "boolean", "bytes"]),
        fld("e", {"type": "enum", "name": "E", "symbols": ["A", "B"]}),
        fld("keep", "string"),
    )
    r = rec("R", fld("keep", "string"))
    rows = [
        {
            "a": {"p": "pp", "q": 2.5},
            "b": {"k": ["v", "w"], "j": []},
            "c": b"xyz",
            "d": b"by",
            "e": "B",
            "keep": "yes",
        },
        {"a": {"p": "", "q": None}, "b": {}, "c": b"123", "d": None, "e": "A", "keep": "too"},
    ]
    assert check(w, r, rows) == [{"keep": "yes"}, {"keep": "too"}]


def test_nested_record_evolves_inside_array_and_map():
    wi = rec("Item", fld("sku", "string"), fld("qty", "int"))
    ri = rec("Item", fld("qty", "long"), fld("price", "double", default=0.5))
    w = rec(
        "Order",
        fld("items", {"type": "array", "items": wi}),
        fld("by", {"type": "map", "values": "Item"}),
    )
    r = rec(
        "Order",
        fld("items", {"type": "array", "items": ri}),
        fld("by", {"type": "map", "values": "Item"}),
    )
    got = check(
        w,
        r,
        [
            {
                "items": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": 3}],
                "by": {"x": {"sku": "c", "qty": 1}},
            },
            {"items": [], "by": {}},
        ],
    )
    assert got[0]["items"] == [{"qty": 2, "price": 0.5}, {"qty": 3, "price": 0.5}]


@pytest.mark.parametrize(
    "writer,reader,words",
    [
        ("int", "string", "cannot be read"),
        ("long", "int", "cannot be read"),
        (rec("R", fld("a", "int")), rec("R", fld("b", "int")), "'b'"),
        (
            {"type": "fixed", "name": "F", "size": 4},
            {"type": "fixed", "name": "F", "size": 5},
            "4 bytes",
        ),
        (["null", "string"], "int", "cannot be read"),
        ("double", ["null", "int", "long"], "matches no branch"),
    ],
)
def test_incompatible_pairs_fail_with_a_clear_error(writer, reader, words):
    with pytest.raises(AvroResolutionError, match=words):
        resolve(parse_schema(json.dumps(writer)), parse_schema(json.dumps(reader)))
