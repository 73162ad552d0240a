"""The Encoder: Arrow columns with Spark's types written as Avro datums, read back by
fastavro (and the bytes compared with fastavro's own where the encoding is unique)."""

import datetime
import decimal
import io
import json

import fastavro
import pyarrow as pa
import pytest

from kafka_common.avro import parse_schema
from kafka_common.avro.encoder import AvroEncodeError, Encoder

UTC = datetime.timezone.utc

SCHEMA = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "qty", "type": "int"},
        {"name": "ok", "type": "boolean"},
        {
            "name": "price",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2},
        },
        {
            "name": "cents",
            "type": {
                "type": "fixed",
                "name": "C",
                "size": 6,
                "logicalType": "decimal",
                "precision": 12,
                "scale": 2,
            },
        },
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {
            "name": "local",
            "type": ["null", {"type": "long", "logicalType": "local-timestamp-micros"}],
        },
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": ["null", "double"]}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {
            "name": "pick",
            "type": [
                "null",
                "int",
                "string",
                {"type": "record", "name": "Pt", "fields": [{"name": "x", "type": "float"}]},
            ],
        },
        {"name": "raw", "type": {"type": "fixed", "name": "Raw", "size": 2}},
    ],
}

ROWS = [
    {
        "id": 1,
        "qty": -3,
        "ok": True,
        "price": decimal.Decimal("-128.00"),
        "cents": decimal.Decimal("0.01"),
        "at": datetime.datetime(2024, 1, 2, 3, 4, 5, 678000, UTC),
        "local": datetime.datetime(1999, 12, 31, 23, 59, 59, 999999),
        "day": datetime.date(1969, 12, 31),
        "state": "PAID",
        "tags": ["a", "bé"],
        "attrs": [("x", 1.5), ("y", None)],
        "note": None,
        "pick": {"member0": None, "member1": "s", "member2": None},
        "raw": b"\x00\xff",
    },
    {
        "id": -(2**63),
        "qty": 2**31 - 1,
        "ok": False,
        "price": decimal.Decimal("9999999999.99"),
        "cents": decimal.Decimal("-9999999999.99"),
        "at": datetime.datetime(1, 1, 1, tzinfo=UTC),
        "local": None,
        "day": datetime.date(9999, 12, 31),
        "state": "NEW",
        "tags": [],
        "attrs": [],
        "note": "n",
        "pick": {"member0": None, "member1": None, "member2": {"x": 0.5}},
        "raw": b"ab",
    },
    {
        "id": 0,
        "qty": 0,
        "ok": True,
        "price": decimal.Decimal("0"),
        "cents": decimal.Decimal("0"),
        "at": datetime.datetime(1970, 1, 1, tzinfo=UTC),
        "local": None,
        "day": datetime.date(1970, 1, 1),
        "state": "NEW",
        "tags": [""] * 3,
        "attrs": [("", None)],
        "note": "",
        "pick": None,
        "raw": b"zz",
    },
]

ARROW = pa.struct(
    [
        ("id", pa.int64()),
        ("qty", pa.int32()),
        ("ok", pa.bool_()),
        ("price", pa.decimal128(12, 2)),
        ("cents", pa.decimal128(12, 2)),
        ("at", pa.timestamp("us", "UTC")),
        ("local", pa.timestamp("us")),
        ("day", pa.date32()),
        ("state", pa.string()),
        ("tags", pa.list_(pa.string())),
        ("attrs", pa.map_(pa.string(), pa.float64())),
        ("note", pa.string()),
        (
            "pick",
            pa.struct(
                [
                    ("member0", pa.int32()),
                    ("member1", pa.string()),
                    ("member2", pa.struct([("x", pa.float32())])),
                ]
            ),
        ),
        ("raw", pa.binary()),
    ]
)


def fastavro_reads(schema, blobs):
    parsed = fastavro.parse_schema(schema)
    return [None if b is None else fastavro.schemaless_reader(io.BytesIO(b), parsed) for b in blobs]


def test_every_type_reads_back_in_fastavro():
    arr = pa.array(ROWS + [None], type=ARROW)
    blobs = Encoder(parse_schema(json.dumps(SCHEMA))).encode(arr)
    assert blobs.type == pa.binary() and blobs.null_count == 1
    back = fastavro_reads(SCHEMA, blobs.to_pylist())
    assert back[3] is None
    first = back[0]
    assert first["price"] == decimal.Decimal("-128.00")
    assert first["cents"] == decimal.Decimal("0.01")
    assert first["at"] == ROWS[0]["at"] and first["local"] == ROWS[0]["local"]
    assert first["day"] == ROWS[0]["day"] and first["state"] == "PAID"
    assert first["attrs"] == {"x": 1.5, "y": None} and first["pick"] == "s"
    assert back[1]["pick"] == {"x": 0.5} and back[1]["id"] == -(2**63)
    assert back[1]["at"] == ROWS[1]["at"] and back[2]["pick"] is None
    assert back[2]["tags"] == ["", "", ""] and back[1]["raw"] == b"ab"
    # where the encoding is unique, the bytes are fastavro's own
    simple = {
        "type": "record",
        "name": "S",
        "fields": [
            f for f in SCHEMA["fields"] if f["name"] in ("id", "qty", "tags", "note", "state")
        ],
    }
    sub = pa.array([{k: r[k] for k in ("id", "qty", "tags", "note", "state")} for r in ROWS])
    ours = Encoder(parse_schema(json.dumps(simple))).encode(sub).to_pylist()
    parsed = fastavro.parse_schema(simple)
    for row, b in zip(sub.to_pylist(), ours):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, row)
        assert b == buf.getvalue()


def test_primitive_values_and_nulls_as_tombstones():
    blobs = Encoder(parse_schema('"string"')).encode(pa.array(["a", None, "ccc"]))
    assert blobs.to_pylist() == [b"\x02a", None, b"\x06ccc"]
    blobs = Encoder(parse_schema('["null", "long"]')).encode(pa.array([7, None]))
    assert blobs.to_pylist() == [b"\x02\x0e", b"\x00"]  # a null in a union is a value


@pytest.mark.parametrize(
    "schema,values,words",
    [
        (
            {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]},
            pa.array([{"a": None}], pa.struct([("a", pa.int32())])),
            "R.a: a null value",
        ),
        ({"type": "enum", "name": "E", "symbols": ["A"]}, pa.array(["B"]), "not a symbol"),
        ({"type": "fixed", "name": "F", "size": 3}, pa.array([b"ab"]), "fixed F of 3"),
        (
            {"type": "record", "name": "R", "fields": [{"name": "b", "type": "int"}]},
            pa.array([{"a": 1}]),
            "no field 'b'",
        ),
        ("int", pa.array([2**40]), "int range"),
        (
            {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]},
            pa.array([{"a": 1, "typo": 2}]),
            "'typo' is not in the record R",
        ),
        (
            {"type": "fixed", "name": "D", "size": 1, "logicalType": "decimal", "precision": 2},
            pa.array([decimal.Decimal("-99"), decimal.Decimal("99")], pa.decimal128(2, 0)),
            None,
        ),
    ],
)
def test_values_the_schema_cannot_hold_raise_naming_the_field(schema, values, words):
    enc = Encoder(parse_schema(json.dumps(schema)))
    if words is None:  # fits: -99 and 99 take one byte
        assert fastavro_reads(schema, enc.encode(values).to_pylist()) == values.to_pylist()
        return
    with pytest.raises(AvroEncodeError, match=words):
        enc.encode(values)
