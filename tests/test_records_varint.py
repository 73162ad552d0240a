"""Vectorised varints and record walking against the scalar reference (protocol.primitives)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.primitives import read_varint, read_varlong, write_varint, write_varlong
from protocol.records import batch as B
from protocol.records import vectorized as V

from .helpers.record_builders import encode_varints

int32s = st.integers(-(1 << 31), (1 << 31) - 1)
int64s = st.integers(-(1 << 63), (1 << 63) - 1)


def _padded(raw: bytes) -> np.ndarray:
    return np.frombuffer(raw + bytes(V.PAD), dtype=np.uint8)


@settings(max_examples=300, deadline=None)
@given(st.lists(int32s | st.integers(-300, 300), min_size=1, max_size=200))
def test_decode_varints_matches_scalar(values):
    out = bytearray()
    starts = []
    for v in values:
        starts.append(len(out))
        write_varint(out, v)
    a = _padded(bytes(out))
    decoded, after = V.decode_varints(a, np.array(starts, dtype=np.int64), 5)
    expected, ends = [], []
    for s in starts:
        v, e = read_varint(bytes(out), s)
        expected.append(v)
        ends.append(e)
    assert decoded.tolist() == expected == values
    assert after.tolist() == ends


@settings(max_examples=300, deadline=None)
@given(st.lists(int64s | st.integers(-70000, 70000), min_size=1, max_size=200))
def test_decode_varlongs_matches_scalar(values):
    out = bytearray()
    starts = []
    for v in values:
        starts.append(len(out))
        write_varlong(out, v)
    decoded, after = V.decode_varints(_padded(bytes(out)), np.array(starts, np.int64), 10)
    assert decoded.tolist() == [read_varlong(bytes(out), s)[0] for s in starts] == values
    assert after.tolist() == [read_varlong(bytes(out), s)[1] for s in starts]


@settings(max_examples=300, deadline=None)
@given(st.lists(int64s | st.integers(-70000, 70000), max_size=200))
def test_encode_varints_matches_scalar(values):
    raw, sizes = encode_varints(np.array(values, dtype=np.int64))
    expected = bytearray()
    for v in values:
        write_varlong(expected, v)
    assert raw == bytes(expected)
    assert sizes.tolist() == [len(_one(v)) for v in values]


def _one(v):
    out = bytearray()
    write_varlong(out, v)
    return out


@given(st.lists(int64s, max_size=100))
def test_zigzag_round_trip(values):
    arr = np.array(values, dtype=np.int64)
    u = V.zigzag_encode(arr)
    assert [int(x) for x in u] == [((v << 1) ^ (v >> 63)) & ((1 << 64) - 1) for v in values]
    assert V.zigzag_decode(u).tolist() == values


def test_varint_too_long_or_overflowing():
    a = _padded(b"\x80\x80\x80\x80\x80\x01" + b"\xff\xff\xff\xff\x7f")
    with pytest.raises(V.VarintError, match="longer than 5") as info:
        V.decode_varints(a, np.array([0], np.int64), 5)
    assert info.value.index == 0
    with pytest.raises(V.VarintError, match="overflows 32"):
        V.decode_varints(a, np.array([1, 6], np.int64), 5)  # 6: five bytes, 35 bits
    eleven = _padded(b"\xff" * 10 + b"\x01")
    with pytest.raises(V.VarintError):
        V.decode_varints(eleven, np.array([0], np.int64), 10)
    ok = _padded(b"\xff" * 9 + b"\x01")  # -2**63 .. largest 10-byte varlong
    assert V.decode_varints(ok, np.array([0], np.int64), 10)[0].tolist() == [-(1 << 63)]


def test_varint_sizes():
    u = np.array([0, 127, 128, 16383, 16384, (1 << 63), (1 << 64) - 1], dtype=np.uint64)
    assert V.varint_sizes(u).tolist() == [1, 1, 2, 2, 3, 10, 10]


def _records_section(lengths_of_values, key=b"k"):
    """Bytes of records (no batch header) whose values have the given lengths."""
    out = bytearray()
    for i, n in enumerate(lengths_of_values):
        B.encode_record(out, i, i * 3, key, b"v" * n)
    return bytes(out)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(0, 20000) | st.integers(90, 110) | st.just(100), min_size=1, max_size=400)
)
def test_find_record_ends_matches_walk(value_lengths):
    data = _records_section(value_lengths)
    padded = data + bytes(V.PAD)
    expected, err = V.walk_records_general(padded, len(value_lengths), len(data))
    assert err is None and expected[-1] == len(data)
    ends = V.find_record_ends(padded, _padded(data), len(value_lengths), len(data))
    assert ends.tolist() == expected
    fast = V.walk_records(padded, len(value_lengths))
    if max(value_lengths) < 8000:  # two-byte length prefixes: the fast walk follows them
        assert fast == expected


def test_find_record_ends_runs_of_one_size():
    lengths = [100] * 3000 + [7] * 10 + [100] * 3000
    data = _records_section(lengths)
    ends = V.find_record_ends(data + bytes(V.PAD), _padded(data), len(lengths), len(data))
    assert ends.tolist() == V.walk_records_general(data, len(lengths), len(data))[0]


def test_walks_stop_at_malformed_lengths():
    data = _records_section([5, 5, 5])
    broken = bytearray(data)
    second = V.walk_records_general(data, 3, len(data))[0][0]
    broken[second] = 0x03  # length -2
    padded = bytes(broken) + bytes(V.PAD)
    assert V.walk_records(padded, 3) is None
    assert V.find_record_ends(padded, _padded(bytes(broken)), 3, len(data)) is None
    ends, err = V.walk_records_general(padded, 3, len(data))
    assert len(ends) == 1 and "length -2" in err
