"""The vectorised decoder of flat Protobuf messages (``kafka_common.protobuf.vectorized``)
against the row path (the protobuf runtime's own parser, ``Decoder.decode_rows``): the
same Arrow arrays and the same corrupt rows for messages the runtime serialized, payloads
written byte by byte (repeated occurrences, wrong wire types, unknown fields, long
varints) and thousands of seeded mutations and truncations of them."""

from __future__ import annotations

import random
import struct

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("grpc_tools")

from google.protobuf import message_factory  # noqa: E402

from kafka_common.protobuf import Decoder, message_descriptor, vectorized  # noqa: E402
from protocol.primitives import write_unsigned_varint  # noqa: E402

FLAT = """syntax = "proto3";
package vt;
import "google/protobuf/timestamp.proto";
enum Color { RED = 0; GREEN = 1; BLUE = 5; }
message Flat {
  int32 i32 = 1; int64 i64 = 2; uint32 u32 = 3; uint64 u64 = 4; sint32 s32 = 5;
  sint64 s64 = 6; fixed32 f32 = 7; fixed64 f64 = 8; sfixed32 sf32 = 9; sfixed64 sf64 = 10;
  bool flag = 11; float fl = 12; double db = 13; string text = 14; bytes blob = 15;
  Color color = 16;
  optional int32 o_i32 = 17; optional string o_text = 18; optional Color o_color = 19;
  optional double o_db = 20; optional bool o_flag = 21;
  oneof pick { int64 p_i64 = 22; string p_text = 23; bytes p_blob = 24; Color p_color = 25; }
  sint32 gap = 1000;
}
message Far { int32 a = 1; string b = 70000; sint64 c = 536870911; }
message Nested { int32 a = 1; Flat inner = 2; }
message Listed { int32 a = 1; repeated int32 many = 2; }
message Mapped { map<string, int32> m = 1; }
message Stamped { int32 a = 1; google.protobuf.Timestamp at = 2; }
message Unsigned { uint32 u = 1; fixed32 f = 2; Color c = 3; string s = 4; }
"""
LEGACY = """syntax = "proto2";
package vt2;
enum Level { LOW = 1; HIGH = 2; }
message Legacy {
  optional string name = 1 [default = "anon"]; optional Level level = 2 [default = HIGH];
  required int32 id = 3; optional uint32 u = 4 [default = 4000000000];
  optional sint32 s = 5 [default = -3]; optional bytes raw = 6;
  optional float f = 7 [default = 1.5]; optional fixed64 big = 8;
}
"""
OPTIONS = [
    {},
    {"emit.default.values": "true"},
    {"enums.as.ints": "true"},
    {"emit.default.values": "true", "enums.as.ints": "true"},
]


def _desc(text: str, name: str):
    return message_descriptor(text, (), name)


def _cls(text: str, name: str):
    return message_factory.GetMessageClass(_desc(text, name))


def _varint(v: int) -> bytes:
    """``v`` as protobuf writes it: an unsigned varint of its 64 bits."""
    out = bytearray()
    write_unsigned_varint(out, v & ((1 << 64) - 1))
    return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _len(number: int, data: bytes) -> bytes:
    return _key(number, 2) + _varint(len(data)) + data


EDGE = {
    "i32": [0, 1, -1, 2**31 - 1, -(2**31)],
    "i64": [0, -1, 2**63 - 1, -(2**63)],
    "u32": [0, 1, 2**31, 2**32 - 1],
    "u64": [0, 2**63, 2**64 - 1],
    "s32": [0, -1, 1, 2**31 - 1, -(2**31)],
    "s64": [0, -1, 2**63 - 1, -(2**63)],
    "f32": [0, 2**32 - 1],
    "f64": [0, 2**64 - 1],
    "sf32": [0, -(2**31)],
    "sf64": [0, -(2**63)],
    "flag": [False, True],
    "fl": [0.0, -0.0, 1.5, float("inf"), float("nan"), 1e-45],
    "db": [0.0, -0.0, -2.25, float("-inf"), float("nan"), 5e-324],
    "text": ["", "a", "é", "\U0001f600", "x" * 300],
    "blob": [b"", b"\x00", b"\xff\xfe" * 40],
    "color": [0, 1, 5, 9, -3],
    "o_i32": [0, 7],
    "o_text": ["", "opt"],
    "o_color": [0, 5, 42],
    "o_db": [0.0, -0.0, 3.5],
    "o_flag": [False, True],
    "p_i64": [0, -5],
    "p_text": ["", "pick"],
    "p_blob": [b"", b"\x01"],
    "p_color": [0, 1, 77],
    "gap": [0, -1000],
}


def _flat_messages(rng: random.Random, count: int) -> list[bytes]:
    """Flat messages the runtime serializes, each field set with a chance of one in two
    to one of its edge values."""
    Flat = _cls(FLAT, "Flat")
    out = [Flat().SerializeToString()]
    for _ in range(count):
        m = Flat()
        for name, values in EDGE.items():
            if rng.random() < 0.5:
                setattr(m, name, rng.choice(values))
        out.append(m.SerializeToString())
    return out


def _handmade() -> list[bytes]:
    """Payloads the runtime would not write but reads: each a rule the decoders share."""
    i32, text, color = _key(1, 0), 14, 16
    return [
        i32 + _varint(5) + i32 + _varint(6),  # the last occurrence wins
        i32 + _varint(5) + _key(1, 5) + b"\x01\x02\x03\x04",  # a wrong wire type: unknown
        _key(1, 2) + b"\x01\x07",  # a length-delimited int32: unknown, not packed
        _key(17, 0) + b"\x07" + _key(17, 1) + b"\x00" * 8,  # the same on a 2-byte tag
        i32 + _varint(2**32 + 5),  # an int32 of more than 32 bits: truncated
        i32 + _varint(2**32),  # truncated to 0: no value (implicit presence)
        _key(5, 0) + b"\xff\xff\xff\xff\x1f",  # a sint32 of 33 bits
        _key(11, 0) + _varint(2**40),  # a bool of any non-zero varint is true
        _key(2, 0) + b"\xff" * 9 + b"\x7f",  # a 10-byte varint: the bits past 64 dropped
        _key(2, 0) + b"\xff" * 10 + b"\x01",  # 11 bytes: corrupt
        _key(1, 0) + b"\x80\x80\x80\x00",  # a varint longer than it needs
        b"\x88\x00\x05",  # a tag longer than it needs
        b"\x88\x80\x80\x80\x00\x05",  # a tag of 5 bytes
        b"\x88\x80\x80\x80\x80\x00\x05",  # a tag of 6 bytes: corrupt
        b"\xf8\xff\xff\xff\x1f\x05",  # a tag over 32 bits: corrupt
        b"\x00\x01",  # field number 0: corrupt
        b"\x0e\x01",  # wire type 6: corrupt
        _key(99, 0) + _varint(1) + _len(98, b"zz") + _key(97, 1) + b"\x00" * 8 + i32 + b"\x03",
        _key(31, 3) + i32 + b"\x01" + _key(31, 4) + i32 + b"\x03",  # an unknown group
        _key(31, 4),  # a stray end of group: corrupt
        _key(1, 3) + i32 + b"\x01" + _key(1, 4) + i32 + b"\x04",  # a group on int32's number
        _len(text, "é".encode()) + _len(text, b"ok"),  # a string twice
        _len(text, b"\xff") + _len(text, b"ok"),  # a bad string replaced: still corrupt
        _len(text, b"\xed\xa0\x80"),  # a surrogate: not UTF-8
        _len(text, b"\xc0\x80"),  # an overlong encoding: not UTF-8
        _len(text, b"\xf4\x90\x80\x80"),  # past U+10FFFF: not UTF-8
        _len(text, b"\xf0\x9f\x98\x80"),  # a 4-byte character
        _len(text, b"abc")[:-1],  # a length past the end: corrupt
        _len(text, b"") + _key(color, 0) + _varint(2**32 + 1),  # an enum of 33 bits
        _key(22, 0) + b"\x05" + _len(23, b"x"),  # a oneof member replaced by another
        _len(23, b"\xff") + _key(22, 0) + b"\x05",  # a bad string of a replaced member
        _len(23, b"x") + _key(22, 0) + b"\x00",  # the last member set wins, even at zero
        _key(17, 0) + b"\x00" + _key(21, 0) + b"\x00",  # explicit presence at zero
        _key(12, 5) + struct.pack("<f", -0.0),  # -0.0 is a value
        _key(1000, 0) + _varint(3),  # a field past the first numbers
        b"",
    ]


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        op = rng.random()
        if not b or op < 0.25:
            b.insert(rng.randint(0, len(b)), rng.randrange(256))
        elif op < 0.5:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif op < 0.7:
            b[rng.randrange(len(b))] = rng.choice([0x00, 0x7F, 0x80, 0xFF, 0x0B, 0x0C])
        elif op < 0.85:
            del b[rng.randrange(len(b))]
        else:
            b = b[: rng.randrange(len(b) + 1)]
    return bytes(b)


def _bits_equal(x: pa.Array, y: pa.Array) -> bool:
    """Equal values and nulls, floats by their bits (NaN payloads aside)."""
    if not x.is_valid().equals(y.is_valid()):
        return False
    if pa.types.is_floating(x.type):
        a, b = (np.asarray(v.fill_null(0)) for v in (x, y))
        same = (a.view(f"u{a.itemsize}") == b.view(f"u{b.itemsize}")) | (np.isnan(a) & np.isnan(b))
        return bool(same.all())
    return x.to_pylist() == y.to_pylist()


def _same(dec: Decoder, values: pa.Array, starts) -> int:
    """Decodes with both paths, asserts they agree; returns the rows the vectorised path
    handed to the row path."""
    handed = []

    def rows(v, s):
        handed.append(len(v))
        return dec.decode_rows(v, s)

    got, errors = dec.flat.decode(values, starts, rows)
    want, want_errors = dec.decode_rows(values, starts)
    assert got.type == want.type
    assert errors.tolist() == want_errors.tolist()
    assert got.is_valid().equals(want.is_valid())
    for field, x, y in zip(want.type, got.flatten(), want.flatten()):
        assert _bits_equal(x, y), (field.name, x, y)
    return sum(handed)


@pytest.fixture
def every_row_vectorised(monkeypatch):
    """The vectorised path keeps its rows however few (rather than handing them over)."""
    monkeypatch.setattr(vectorized, "SMALL", 0)


@pytest.mark.parametrize("options", OPTIONS)
def test_runtime_messages_decode_alike_and_stay_vectorised(options, every_row_vectorised):
    dec = Decoder(_desc(FLAT, "Flat"), options)
    assert dec.flat is not None
    payloads = _flat_messages(random.Random(1), 400)
    values = pa.array([b"\x00" * 6 + p for p in payloads] + [None], pa.binary())
    starts = np.full(len(values), 6, np.int32)
    assert _same(dec, values, starts) == 0  # none left to the row path


@pytest.mark.parametrize("options", OPTIONS)
def test_handmade_payloads_decode_alike(options, every_row_vectorised):
    dec = Decoder(_desc(FLAT, "Flat"), options)
    cases = _handmade()
    values = pa.array(cases, pa.binary())
    handed = _same(dec, values, np.zeros(len(cases), np.int32))
    _, errors = dec.decode(values, np.zeros(len(cases), np.int32))
    assert 6 <= errors.sum() < handed < len(cases) // 2  # the rest decoded by NumPy


@pytest.mark.parametrize("options", OPTIONS)
def test_mutated_payloads_decode_alike(options, every_row_vectorised):
    rng = random.Random(7)
    dec = Decoder(_desc(FLAT, "Flat"), options)
    base = _flat_messages(rng, 100) + _handmade()
    corrupt = settled = 0
    for _ in range(6):
        batch = [_mutate(rng, rng.choice(base)) for _ in range(500)]
        values = pa.array(batch, pa.binary())
        settled += len(batch) - _same(dec, values, np.zeros(len(batch), np.int32))
        corrupt += int(dec.decode(values, np.zeros(len(batch), np.int32))[1].sum())
    assert 300 < corrupt < 2700  # the mutations made both kinds of rows
    assert settled > 600  # and NumPy decoded a good share of them


def test_proto2_defaults_closed_enums_and_unchecked_strings(every_row_vectorised):
    Legacy = _cls(LEGACY, "Legacy")
    rng = random.Random(3)
    payloads = [Legacy(id=1).SerializeToString(), b""]  # required id missing: no error
    for i in range(300):
        m = Legacy(id=i)
        if rng.random() < 0.5:
            m.name = rng.choice(["", "n", "é"])
        if rng.random() < 0.5:
            m.level = rng.choice([1, 2])
        if rng.random() < 0.5:
            m.u = rng.choice([0, 2**31, 2**32 - 1])
        if rng.random() < 0.5:
            m.f = rng.choice([0.0, -1.0])
        if rng.random() < 0.5:
            m.big = rng.choice([0, 2**64 - 1])
        payloads.append(m.SerializeToString())
    payloads += [
        _key(2, 0) + b"\x07",  # an unknown number of a closed enum: an unknown field
        _key(2, 0) + b"\x01" + _key(2, 0) + b"\x09",  # ... which keeps the earlier value
        _len(1, b"\xff\xfe"),  # proto2 strings are not checked by the runtime
    ]
    payloads += [_mutate(rng, rng.choice(payloads)) for _ in range(1000)]
    values = pa.array(payloads, pa.binary())
    for options in OPTIONS:
        dec = Decoder(_desc(LEGACY, "Legacy"), options)
        assert dec.flat is not None
        _same(dec, values, np.zeros(len(payloads), np.int32))


def test_far_field_numbers_and_framing(every_row_vectorised):
    """Field numbers up to the largest (a search instead of a table), Confluent framing
    skipped by ``starts``, a header longer than its value (an empty message), nulls."""
    Far = _cls(FLAT, "Far")
    rng = random.Random(5)
    payloads = [
        b"\x00\x00\x00\x00\x01\x00" + Far(a=i, b=str(i) * (i % 3), c=-i).SerializeToString()
        for i in range(200)
    ]
    payloads += [None, b"\x00\x01"]
    payloads += [_mutate(rng, p) for p in payloads[:200] for _ in range(3)]
    values = pa.array(payloads, pa.binary())
    dec = Decoder(_desc(FLAT, "Far"))
    _same(dec, values, np.full(len(payloads), 6, np.int32))
    _same(dec, values.cast(pa.large_binary()), np.full(len(payloads), 6, np.int64))
    _same(dec, values.slice(7, 300), np.full(300, 6, np.int32))


def test_few_rows_go_to_the_row_path_and_come_back_in_place():
    dec = Decoder(_desc(FLAT, "Flat"))
    payloads = _flat_messages(random.Random(2), 100)
    values = pa.array(payloads, pa.binary())
    # every row has several fields: after the rounds of the shortest rows, the longest
    # continue, fewer than SMALL of them at the end
    assert 0 < _same(dec, values, np.zeros(len(payloads), np.int32)) < len(payloads)
    assert _same(dec, values.slice(1, 5), np.zeros(5, np.int32)) == 5  # all have fields


def test_unsigned_values_come_as_spark_s_int_and_long_of_their_bits():
    """uint32 beyond int's range (without the upcast) and uint64 beyond long's: the bits
    as an int and a long, as Spark's from_protobuf gives them, by both paths."""
    Flat = _cls(FLAT, "Flat")
    m = Flat(u32=2**32 - 1, u64=2**64 - 1, f32=2**31, f64=2**63)
    values = pa.array([m.SerializeToString()] * 20, pa.binary())
    dec = Decoder(_desc(FLAT, "Flat"))
    for decode in (dec.decode, dec.decode_rows):
        array, errors = decode(values, np.zeros(20, np.int32))
        row = array.to_pylist()[0]
        assert not errors.any()
        assert (row["u32"], row["u64"], row["f32"], row["f64"]) == (-1, -1, -(2**31), -(2**63))
    array, _ = Decoder(_desc(FLAT, "Flat"), {"upcast.unsigned.ints": "true"}).decode(
        values, np.zeros(20, np.int32)
    )
    assert array.to_pylist()[0]["u32"] == 2**32 - 1


def test_upcast_unsigned_ints_without_uint64_stays_vectorised(every_row_vectorised):
    Unsigned = _cls(FLAT, "Unsigned")
    rng = random.Random(11)
    payloads = [
        Unsigned(
            u=rng.choice([0, 2**31, 2**32 - 1]), f=rng.choice([0, 2**32 - 1]), c=i % 7
        ).SerializeToString()
        for i in range(200)
    ]
    payloads += [_mutate(rng, p) for p in payloads for _ in range(2)]
    values = pa.array(payloads, pa.binary())
    for options in (
        {"upcast.unsigned.ints": "true"},
        {"upcast.unsigned.ints": "true", **OPTIONS[1]},
    ):
        dec = Decoder(_desc(FLAT, "Unsigned"), options)
        assert dec.flat is not None and dec.type.field("u").type == pa.int64()
        _same(dec, values, np.zeros(len(payloads), np.int32))


def test_a_proto2_string_that_is_not_utf8_is_a_corrupt_row():
    values = pa.array([_len(1, b"\xff\xfe"), _len(1, b"ok")] * 10, pa.binary())
    dec = Decoder(_desc(LEGACY, "Legacy"))
    for decode in (dec.decode, dec.decode_rows):
        array, errors = decode(values, np.zeros(20, np.int32))
        assert errors.tolist() == [True, False] * 10
        assert array.to_pylist()[:2] == [
            None,
            {**dict.fromkeys(f.name for f in array.type), "name": "ok"},
        ]


@pytest.mark.parametrize(
    "message,options",
    [
        ("Nested", {}),
        ("Listed", {}),
        ("Mapped", {}),
        ("Stamped", {}),
        ("Flat", {"upcast.unsigned.ints": "true"}),  # uint64 as decimal(20, 0)
    ],
)
def test_other_messages_take_the_row_path(message, options):
    dec = Decoder(_desc(FLAT, message), options)
    assert dec.flat is None
    cls = message_factory.GetMessageClass(dec.descriptor)
    values = pa.array([cls().SerializeToString(), b"\x08\x01"] * 10, pa.binary())
    array, errors = dec.decode(values, np.zeros(20, np.int32))
    want, want_errors = dec.decode_rows(values, np.zeros(20, np.int32))
    assert array.equals(want) and errors.tolist() == want_errors.tolist()
