"""The compiled Avro decode of records of primitives (``kafka_common/avro/compiled.py`` and
``decode_avro`` in ``protocol/records/_fastdecode.c``) against the NumPy decoder on the same
bytes: valid values, truncations, flipped bytes, over-long varints, negative and huge
lengths, null values and values shorter than their header give the same Arrow array and
the same corrupt rows on both paths. Schemas the compiled path does not take stay on the
NumPy path; hostile programs and bounds make the extension answer None, never crash."""

from __future__ import annotations

import io
import json
import math

import fastavro
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_common.avro import Decoder, parse_schema
from kafka_common.avro.compiled import decode as decode_compiled
from protocol.records import accel
from tests.helpers.record_builders import encode_varints

pytestmark = pytest.mark.skipif(not accel.available(), reason="the C extensions are not built")

ENUM = {"type": "enum", "name": "Colour", "symbols": ["RED", "GREEN", "BLUE"]}
FIXED = {"type": "fixed", "name": "Four", "size": 4}
# (schema, a random value for it); fastavro writes the values
FIELD_TYPES = {
    "boolean": lambda r: bool(r.integers(2)),
    "int": lambda r: int(r.choice([0, -1, 1, 63, -64, 300, -(1 << 31), (1 << 31) - 1])),
    "long": lambda r: int(r.choice([0, -1, 1 << 40, -(1 << 63), (1 << 63) - 1, 12345])),
    "float": lambda r: float(r.choice([0.5, -2.25, math.inf, math.nan, 1e30])),
    "double": lambda r: float(r.choice([0.1, -1e300, math.nan, -math.inf, 3.0])),
    "string": lambda r: "é" * int(r.integers(0, 5)) + "x" * int(r.integers(0, 40)),
    "bytes": lambda r: bytes(r.integers(0, 256, int(r.integers(0, 30))).astype(np.uint8)),
    "null": lambda r: None,
    "ts_millis": lambda r: int(r.choice([0, 1_700_000_000_000, -5, (1 << 62)])),
    "ts_micros": lambda r: int(r.choice([0, 1_700_000_000_000_000, -(1 << 63)])),
    "date": lambda r: int(r.integers(-100_000, 100_000)),
    "enum": lambda r: str(r.choice(ENUM["symbols"])),
    "fixed": lambda r: bytes(r.integers(0, 256, 4).astype(np.uint8)),
    "null_string": lambda r: None if r.integers(3) == 0 else "v" * int(r.integers(0, 9)),
    "long_null": lambda r: None if r.integers(3) == 0 else int(r.integers(-(1 << 40), 1 << 40)),
    "int_long": lambda r: int(r.integers(-(1 << 40), 1 << 40)),
    "float_double": lambda r: float(r.normal()),
    "null_enum": lambda r: None if r.integers(2) else "BLUE",
    "null_bool": lambda r: None if r.integers(2) else bool(r.integers(2)),
}
SCHEMA_OF = {
    "ts_millis": {"type": "long", "logicalType": "timestamp-millis"},
    "ts_micros": {"type": "long", "logicalType": "timestamp-micros"},
    "date": {"type": "int", "logicalType": "date"},
    "null_string": ["null", "string"],
    "long_null": ["long", "null"],
    "int_long": ["int", "long"],
    "float_double": ["float", "double"],
    "null_bool": ["null", "boolean"],
}
KINDS = sorted(FIELD_TYPES)


def record(kinds) -> dict:
    """A record of one field per kind (enum and fixed defined once, referred to after)."""
    fields, named = [], set()
    for i, kind in enumerate(kinds):
        t = SCHEMA_OF.get(kind, kind)
        if kind in ("enum", "null_enum", "fixed"):
            full = FIXED if kind == "fixed" else ENUM
            t = full if full["name"] not in named else full["name"]
            named.add(full["name"])
            t = ["null", t] if kind == "null_enum" else t
        fields.append({"name": f"f{i}_{kind}", "type": t})
    return {"type": "record", "name": "Flat", "fields": fields}


BENCH = {
    "type": "record",
    "name": "Reading",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "sensor", "type": "string"},
        {"name": "value", "type": "double"},
        {"name": "ok", "type": "boolean"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
# an evolved pair: a writer field read past (a union), a reader default, promotions,
# a writer union read as a plain type (its null branch fails the row)
OLD = {
    "type": "record",
    "name": "Flat",
    "fields": [
        {"name": "gone", "type": ["null", "string", "double"]},
        {"name": "n", "type": "int"},
        {"name": "x", "type": "float"},
        {"name": "s", "type": "string"},
        {"name": "maybe", "type": ["null", "long"]},
        {"name": "skipped_fixed", "type": FIXED},
        {"name": "plain", "type": "string"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "GONE", "C"]}},
        {"name": "ne", "type": ["null", "E"]},
    ],
}
NEW = {
    "type": "record",
    "name": "Flat",
    "fields": [
        {"name": "n", "type": "long"},
        {"name": "x", "type": "double"},
        {"name": "s", "type": "bytes"},
        {"name": "maybe", "type": "long"},
        {"name": "added", "type": "int", "default": 7},
        {"name": "plain", "type": ["null", "string"]},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["C", "B", "A"]}},
        {"name": "ne", "type": ["E", "null"]},
    ],
}


def varint(v: int) -> bytes:
    return encode_varints(np.array([v], dtype=np.int64))[0]


def datums(schema: dict, rows: int, seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    parsed = fastavro.parse_schema(json.loads(json.dumps(schema)))
    out: list[bytes] = []
    for _ in range(rows):
        value = {}
        for f in schema["fields"]:
            kind = f["name"].split("_", 1)[1] if f["name"].startswith("f") else None
            value[f["name"]] = FIELD_TYPES[kind](rng) if kind in FIELD_TYPES else None
        if schema is BENCH:
            value = {
                "id": int(rng.integers(-(1 << 62), 1 << 62)),
                "sensor": "s" * (len(out) % 9),
                "value": float(rng.normal()),
                "ok": bool(rng.integers(2)),
                "at": int(rng.integers(0, 1 << 50)),
            }
        elif schema is OLD:
            value = {
                "gone": [None, "g", 2.5][len(out) % 3],
                "n": int(rng.integers(-999, 999)),
                "x": float(rng.normal()),
                "s": "abc"[: len(out) % 4],
                "maybe": None if len(out) % 5 == 0 else 9,
                "skipped_fixed": b"wxyz",
                "plain": "p" * (len(out) % 3),
                "e": "ABGC"[len(out) % 7 % 4].replace("G", "GONE"),
                "ne": [None, "A", "GONE"][len(out) % 3],
            }
        b = io.BytesIO()
        fastavro.schemaless_writer(b, parsed, value)
        out.append(b.getvalue())
    return out


OVERLONG = [b"\xff" * 10 + b"\x01", b"\xff\xff\xff\xff\x7f", b"\x80" * 11]


def mutate(datum: bytes, rng) -> bytes | None:
    """A framed value (5-byte header), left as is or broken in one of several ways."""
    how = int(rng.integers(10))
    at = int(rng.integers(0, len(datum) + 1))
    if how == 1:
        datum = datum[: int(rng.integers(0, len(datum) + 1))]
    elif how == 2 and datum:
        i = int(rng.integers(len(datum)))
        datum = datum[:i] + bytes([int(rng.integers(256))]) + datum[i + 1 :]
    elif how == 3:
        datum = datum[:at] + OVERLONG[int(rng.integers(len(OVERLONG)))] + datum[at:]
    elif how == 4:
        datum = datum[:at] + varint(int(rng.choice([-1, -3, -(1 << 40)]))) + datum[at:]
    elif how == 5:
        datum = datum[:at] + varint(int(rng.choice([1 << 31, 1 << 40, 40]))) + datum[at:]
    elif how == 6:
        return None
    elif how == 7:
        return b"\x00" * int(rng.integers(0, 5))  # shorter than the header
    return b"\x00\x00\x00\x00\x01" + datum


def both_paths(decoder: Decoder, values: pa.Array, starts):
    with accel.forced(True):
        compiled = decoder.decode(values, starts)
    with accel.forced(False):
        numpy_path = decoder.decode(values, starts)
    return compiled, numpy_path


def assert_same(got: pa.Array, want: pa.Array):
    """Equal arrays, float columns compared bit for bit (NaN equals NaN)."""
    assert got.type == want.type
    assert got.is_valid().equals(want.is_valid())
    for i, f in enumerate(want.type):
        a, b = got.field(i), want.field(i)
        if pa.types.is_floating(f.type):
            assert a.is_valid().equals(b.is_valid()), f.name
            width = np.uint32 if f.type == pa.float32() else np.uint64
            mask = b.is_valid().to_numpy(zero_copy_only=False)
            x = a.to_numpy(zero_copy_only=False).view(width)[mask]
            y = b.to_numpy(zero_copy_only=False).view(width)[mask]
            assert np.array_equal(x, y), f.name
        else:
            assert a.equals(b), (f.name, a, b)


def check(writer: dict, reader: dict | None, rows: int, seed: int):
    w = parse_schema(json.dumps(writer))
    r = w if reader is None else parse_schema(json.dumps(reader))
    decoder = Decoder(w, r)
    assert decoder.program is not None, "this schema must take the compiled path"
    rng = np.random.default_rng(seed)
    values = pa.array([mutate(d, rng) for d in datums(writer, rows, seed)], pa.binary())
    starts = np.full(rows, 5, dtype=np.int64)
    # the compiled path really ran (and the NumPy one does not answer through it)
    from kafka_common.avro.decoder import _input_buffers

    buf, offsets, valid = _input_buffers(values)
    with accel.forced(True):
        assert decode_compiled(decoder.program, decoder.opts, buf, offsets, valid, starts)
    with accel.forced(False):
        assert decode_compiled(decoder.program, decoder.opts, buf, offsets, valid, starts) is None
    (a, bad_a), (b, bad_b) = both_paths(decoder, values, starts)
    assert np.array_equal(bad_a, bad_b), np.flatnonzero(bad_a != bad_b)
    assert_same(a, b)
    return bad_b, values


@pytest.mark.parametrize("seed", range(3))
def test_bench_schema_agrees_on_hostile_bytes(seed):
    bad, values = check(BENCH, None, 3000, seed)
    assert 0 < bad.sum() < len(values) - values.null_count  # both kinds of row were there


@pytest.mark.parametrize("kind", KINDS)
def test_each_field_type_agrees_on_hostile_bytes(kind):
    """Each type alone and between two others (so a broken value shifts what follows)."""
    check(record([kind]), None, 1500, KINDS.index(kind))
    check(record(["string", kind, "long_null"]), None, 1500, 100 + KINDS.index(kind))


def test_all_field_types_in_one_record():
    bad, values = check(record(KINDS), None, 4000, 42)
    assert bad.any() and not bad.all()


def test_evolved_schemas_agree():
    """Skipped writer fields, a default, int->long, float->double, string->bytes, a writer
    union read as a plain long (its null rows fail), a plain string read as a union, enum
    symbols reordered and one dropped (its rows fail) on both paths."""
    bad, _ = check(OLD, NEW, 3000, 5)
    assert bad.any()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=7), seed=st.integers(0, 999))
def test_random_flat_records_agree(kinds, seed):
    check(record(kinds), None, 200, seed)


@settings(max_examples=100, deadline=None)
@given(blobs=st.lists(st.binary(max_size=40), min_size=1, max_size=30))
def test_random_bytes_agree(blobs):
    """Not even Avro: arbitrary bytes (no header) as values of the all-types record."""
    decoder = Decoder(parse_schema(json.dumps(record(KINDS))))
    (a, bad_a), (b, bad_b) = both_paths(decoder, pa.array(blobs, pa.binary()), None)
    assert np.array_equal(bad_a, bad_b)
    assert_same(a, b)


def one_field(t) -> dict:
    return {"type": "record", "name": "R", "fields": [{"name": "a", "type": t}]}


@pytest.mark.parametrize(
    "schema",
    [
        one_field({"type": "record", "name": "In", "fields": [{"name": "x", "type": "int"}]}),
        one_field({"type": "array", "items": "long"}),
        one_field({"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}),
        one_field(["int", "string"]),
        "long",
    ],
    ids=["nested", "array", "decimal", "union-struct", "not-a-record"],
)
def test_other_schemas_stay_on_the_numpy_path(schema):
    assert Decoder(parse_schema(json.dumps(schema))).program is None


def test_timestamp_millis_overflow_fails_the_row_on_both_paths():
    schema = record(["ts_millis"])
    rows = [varint(v) for v in (1 << 62, -(1 << 62), 5, -(1 << 63), (1 << 63) - 1)]
    decoder = Decoder(parse_schema(json.dumps(schema)))
    (a, bad_a), (b, bad_b) = both_paths(decoder, pa.array(rows, pa.binary()), None)
    assert bad_b.tolist() == [True, True, False, False, True]
    assert np.array_equal(bad_a, bad_b)
    assert_same(a, b)


def test_hostile_programs_and_bounds_answer_none():
    """Programs that are not programs and row bounds outside the data: None, no crash."""
    with accel.forced(True):
        ext = accel.module()
    rng = np.random.default_rng(3)
    data = np.frombuffer(b"\x02\x04abcdefgh" * 4, dtype=np.uint8)
    offsets = np.arange(0, 41, 10, dtype=np.int64)
    for _ in range(3000):
        words = rng.integers(-3, 12, int(rng.integers(0, 24))).astype(np.int32).tobytes()
        bad = np.zeros(4, dtype=np.uint8)
        got = ext.decode_avro(words, data, offsets, None, None, bad)
        assert got is None or len(got) == np.frombuffer(words, np.int32)[0]
    compiled = Decoder(parse_schema(json.dumps(record(["string"])))).program
    assert compiled is not None
    program = compiled.words
    bad = np.zeros(4, dtype=np.uint8)
    for offs, starts in [
        (np.array([0, 10, 20, 30, 41], dtype=np.int64), None),  # past the data
        (np.array([0, 20, 10, 30, 40], dtype=np.int64), None),  # falling
        (np.array([-1, 10, 20, 30, 40], dtype=np.int64), None),
        (offsets, np.array([0, -1, 0, 0], dtype=np.int64)),
        (offsets[:-1], None),  # one row short
    ]:
        assert ext.decode_avro(program, data, offs, starts, None, bad) is None
    got = ext.decode_avro(program, data, offsets, np.array([0, 1 << 62, 0, 0]), None, bad)
    assert got is not None and bad.tolist() == [0, 1, 0, 0]


@pytest.mark.parametrize("shape", ["sliced", "large_binary", "chunked"])
def test_input_shapes_agree(shape):
    """A slice of a column (its offsets not from 0), large_binary and a chunked column."""
    rng = np.random.default_rng(11)
    rows = [mutate(d, rng) for d in datums(BENCH, 400, 11)]
    values: pa.Array | pa.ChunkedArray = pa.array(rows, pa.binary())
    if shape == "sliced":
        values = values.slice(37, 300)
    elif shape == "large_binary":
        values = values.cast(pa.large_binary())
    else:
        values = pa.chunked_array([values.slice(0, 150), values.slice(150)])
    decoder = Decoder(parse_schema(json.dumps(BENCH)))
    (a, bad_a), (b, bad_b) = both_paths(decoder, values, 5)
    assert np.array_equal(bad_a, bad_b) and bad_b.any()
    assert_same(a, b)
