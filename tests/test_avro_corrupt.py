"""Corrupt and hostile Avro payloads: every bad row is flagged in ``errors`` (and comes back
null), the good rows around it decode as usual, and nothing raises, hangs or allocates by
what the bytes claim (a length, an item count) rather than by the bytes there are."""

import io
import json
import time

import fastavro
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_common.avro import Decoder, parse_schema
from kafka_common.avro.skipping import ZERO_WIDTH_ITEMS_LIMIT
from tests.helpers.record_builders import encode_varints
from tests.helpers.avro_strategies import datum, schemas


def varint(v: int) -> bytes:
    return encode_varints(np.array([v], dtype=np.int64))[0]


def decode(schema, payloads, reader=None):
    w = parse_schema(json.dumps(schema))
    r = w if reader is None else parse_schema(json.dumps(reader))
    arr, errors = Decoder(w, r).decode(pa.array(payloads, pa.binary()))
    assert len(arr) == len(payloads)
    return arr.to_pylist(), errors.tolist()


def good(schema, value) -> bytes:
    b = io.BytesIO()
    fastavro.schemaless_writer(b, fastavro.parse_schema(schema), value)
    return b.getvalue()


REC = {
    "type": "record",
    "name": "R",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "s", "type": "string"},
        {"name": "xs", "type": {"type": "array", "items": "int"}},
        {"name": "u", "type": ["null", "double", "string"]},
    ],
}


@pytest.mark.parametrize(
    "payload,why",
    [
        (varint(1) + varint(1 << 40) + b"abc", "string length beyond the bytes"),
        (varint(1) + varint(-3) + b"abc", "negative string length"),
        (varint(1) + varint(0) + varint(1 << 60), "array count beyond the bytes"),
        (varint(1) + varint(0) + varint(-(1 << 62)) + varint(4) + b"\x02\x02", "negative count"),
        (varint(1) + varint(0) + varint(0) + varint(7), "union branch out of range"),
        (varint(1) + varint(0) + varint(0) + varint(-1), "negative union branch"),
        (varint(1) + varint(0) + varint(0) + varint(1) + b"\x00\x00", "double cut short"),
        (b"\xff" * 11, "varint of eleven bytes"),
        (varint(1) + varint(0) + varint(1) + b"\xff\xff\xff\xff\x7f", "int beyond 32 bits"),
        (b"", "empty payload"),
    ],
)
def test_each_corruption_fails_its_row_only(payload, why):
    ok = good(REC, {"id": 5, "s": "ok", "xs": [1, 2], "u": "t"})
    rows, errors = decode(REC, [ok, payload, ok, None])
    assert errors == [False, True, False, False], why
    assert rows[1] is None and rows[3] is None
    assert (
        rows[0]
        == rows[2]
        == {"id": 5, "s": "ok", "xs": [1, 2], "u": {"member0": None, "member1": "t"}}
    )


def test_claimed_sizes_cost_nothing():
    # a billion nulls in one array, a map of 2**62 entries, a 2**61-byte block to jump
    nulls = {"type": "array", "items": "null"}
    rows, errors = decode(nulls, [varint(10**9) + varint(0), varint(3) + varint(0)])
    assert errors == [True, False] and rows[1] == [None, None, None]
    assert ZERO_WIDTH_ITEMS_LIMIT <= 1 << 20
    m = {"type": "map", "values": "boolean"}
    t0 = time.perf_counter()
    rows, errors = decode(m, [varint(1 << 62) + b"\x02k\x01"])
    assert errors == [True]
    skip = {
        "type": "record",
        "name": "S",
        "fields": [
            {"name": "gone", "type": {"type": "array", "items": "long"}},
            {"name": "a", "type": "int"},
        ],
    }
    keep = {"type": "record", "name": "S", "fields": [{"name": "a", "type": "int"}]}
    rows, errors = decode(
        skip,
        [
            varint(-2) + varint(1 << 61) + b"\x02\x04\x00\x06",
            varint(-2) + varint(2) + b"\x02\x04" + varint(0) + b"\x06",
        ],
        reader=keep,
    )
    assert errors == [True, False] and rows[1] == {"a": 3}
    assert time.perf_counter() - t0 < 5


def test_decimal_beyond_its_precision_and_timestamp_overflow_fail_the_row():
    dec = {"type": "bytes", "logicalType": "decimal", "precision": 3, "scale": 0}
    rows, errors = decode(
        dec,
        [
            varint(2) + (999).to_bytes(2, "big"),
            varint(2) + (1000).to_bytes(2, "big"),
            varint(2) + (-999).to_bytes(2, "big", signed=True),
            varint(20) + (5).to_bytes(20, "big"),
            varint(20) + (1 << 150).to_bytes(20, "big"),
        ],
    )
    assert errors == [False, True, False, False, True]
    assert [str(r) for r in rows[:4]] == ["999", "None", "-999", "5"]
    ts = {"type": "long", "logicalType": "timestamp-millis"}
    rows, errors = decode(ts, [varint(1 << 60), varint(1000)])
    assert errors == [True, False]


def test_header_longer_than_the_value_is_an_error():
    w = parse_schema('"int"')
    arr, errors = Decoder(w).decode(
        pa.array([b"\x00\x00", b"\x00\x00\x00\x00\x01\x02"]), np.array([5, 5])
    )
    assert errors.tolist() == [True, False] and arr.to_pylist() == [None, 1]


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_truncated_and_mangled_payloads_never_raise(data):
    schema = data.draw(schemas(depth=2))
    rows = data.draw(st.lists(datum(schema), min_size=1, max_size=4))
    parsed = fastavro.parse_schema(json.loads(json.dumps(schema)))
    payloads = []
    for w, _ in rows:
        b = io.BytesIO()
        fastavro.schemaless_writer(b, parsed, w)
        payloads.append(b.getvalue())
    cut = [p[: data.draw(st.integers(0, len(p) - 1))] for p in payloads if p]
    mangled = []
    for p in payloads:
        if p:
            b = bytearray(p)
            i = data.draw(st.integers(0, len(b) - 1))
            b[i] = data.draw(st.integers(0, 255))
            mangled.append(bytes(b))
    noise = data.draw(st.lists(st.binary(max_size=40), max_size=4))
    ours = parse_schema(json.dumps(schema))
    arr, errors = Decoder(ours).decode(pa.array(payloads + cut + mangled + noise, pa.binary()))
    n = len(payloads)
    assert not errors[:n].any()
    # every byte of a datum is needed: a datum cut short is always an error
    assert errors[n : n + len(cut)].all()
    assert arr.is_null().to_numpy(zero_copy_only=False)[np.flatnonzero(errors)].all()


def _cursor(blob: bytes):
    from kafka_common.avro.kernels import Cursor
    from protocol.records.vectorized import PAD

    a = np.zeros(len(blob) + PAD, np.uint8)
    a[: len(blob)] = np.frombuffer(blob, np.uint8)
    return Cursor(a, 1)


@pytest.mark.parametrize("scale", [100, 2**13, 2**20, 2**40, 2**62])
def test_varint_kernel_agrees_with_the_project_decoder(scale):
    from kafka_common.avro.kernels import Cursor, read_varint
    from protocol.records.vectorized import PAD, decode_varints

    rng = np.random.default_rng(scale)
    v = np.concatenate(
        [rng.integers(-scale, scale, 5000), [2**63 - 1, -(2**63), 0, -1, 2**55, -(2**56)]]
    )
    blob, sizes = encode_varints(v)
    a = np.zeros(len(blob) + PAD, np.uint8)
    a[: len(blob)] = np.frombuffer(blob, np.uint8)
    pos = np.zeros(v.size, np.int64)
    pos[1:] = np.cumsum(sizes)[:-1]
    cur = Cursor(a, v.size)
    values, new = read_varint(cur, pos, np.full(v.size, len(blob)), np.arange(v.size))
    assert (values == v).all() and (new == pos + sizes).all() and not cur.bad.any()
    assert (decode_varints(a, pos, 10)[0] == values).all()


@pytest.mark.parametrize(
    "blob,max_bytes,bad",
    [
        (b"\xff" * 10 + b"\x01", 10, True),  # eleven bytes
        (b"\xff" * 9 + b"\x02", 10, True),  # beyond 64 bits
        (b"\x80" * 9 + b"\x01", 10, False),  # 2**63 zigzagged: fine
        (b"\xfe\xff\xff\xff\x0f", 5, False),  # the largest int
        (b"\x80\x80\x80\x80\x10", 5, True),  # beyond 32 bits
        (b"\x80\x80\x80\x80\x80\x01", 5, True),  # six bytes for an int
        (b"\x80", 10, True),  # cut short
    ],
)
def test_varint_kernel_flags_bad_varints(blob, max_bytes, bad):
    from kafka_common.avro.kernels import read_varint

    cur = _cursor(blob)
    read_varint(cur, np.zeros(1, np.int64), np.array([len(blob)]), np.zeros(1, np.int64), max_bytes)
    assert cur.bad[0] == bad


@pytest.mark.parametrize(
    "lengths",
    [
        [7] * 50,  # one width: the 2-D gather
        [8, 9, 12, 10, 7, 12, 9, 8] * 20 + [12],  # 8 to 32 bytes, similar: fixed windows
        [0, 300, 2, 0, 45, 1] * 10 + [0, 3],  # long, short or scattered: per byte
    ],
)
def test_gather_slices_lays_the_slices_end_to_end(lengths):
    # the last slice ends exactly at the data's end: the windows read into the PAD only
    from kafka_common.avro.kernels import gather_slices, padded

    rng = np.random.default_rng(len(lengths))
    lengths = np.asarray(lengths, np.int64)
    gaps = rng.integers(0, 5, lengths.size)
    starts = np.cumsum(gaps) + np.concatenate([[0], np.cumsum(lengths)[:-1]])
    size = int(starts[-1] + lengths[-1])
    data = rng.integers(0, 256, size, dtype=np.uint8)
    got, offsets = gather_slices(padded(data), starts, lengths)
    want = b"".join(data[s : s + n].tobytes() for s, n in zip(starts, lengths))
    assert got.tobytes() == want
    assert offsets.tolist() == [0, *np.cumsum(lengths).tolist()]


def test_data_nested_deeper_than_the_limit_fails_its_row_not_the_stack():
    from kafka_common.avro.skipping import MAX_NESTING

    linked = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}],
    }
    w = parse_schema(json.dumps(linked))

    def chain(depth):  # v=1, next=<node> ... then v=1, next=null
        return b"\x02\x02" * (depth - 1) + b"\x02\x00"

    rows = [chain(MAX_NESTING // 2), chain(100_000), chain(3)]
    for depth, third in (
        ("3", {"v": 1, "next": {"v": 1, "next": {"v": 1}}}),
        ("12", {"v": 1, "next": {"v": 1, "next": {"v": 1, "next": None}}}),
    ):
        arr, errors = Decoder(w, w, {"recursiveFieldMaxDepth": depth}).decode(
            pa.array(rows, pa.binary())
        )
        assert errors.tolist() == [False, True, False]
        assert arr.to_pylist()[2] == third
