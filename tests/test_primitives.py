"""Kafka primitive types: round trips, boundaries, and hostile input (always ProtocolError)."""

from __future__ import annotations

import contextlib
import struct
import tracemalloc
import uuid

import pytest
from hypothesis import given, settings, strategies as st

from protocol import primitives as p
from protocol.errors import ProtocolError

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
UINT32_MAX, UINT64_MAX = (1 << 32) - 1, (1 << 64) - 1


# ---- a deliberately naive reference implementation ----------------------------------------


def ref_uvarint(n: int) -> bytes:
    """LEB128 by the book: seven bits a byte, low bits first, high bit = more to come."""
    groups = []
    while True:
        groups.append(n % 128)
        n //= 128
        if n == 0:
            break
    return bytes([g + 128 for g in groups[:-1]] + [groups[-1]])


def ref_read_uvarint(data: bytes) -> tuple[int, int]:
    n = 0
    for i, b in enumerate(data):
        n += (b % 128) * (128**i)
        if b < 128:
            return n, i + 1
    raise AssertionError("unterminated")


def ref_zigzag(n: int) -> int:
    return 2 * n if n >= 0 else -2 * n - 1


def ref_unzigzag(z: int) -> int:
    return z // 2 if z % 2 == 0 else -(z + 1) // 2


def _write(fn, *args) -> bytes:
    out = bytearray()
    fn(out, *args)
    return bytes(out)


# ---- varints ------------------------------------------------------------------------------


@given(st.integers(0, UINT32_MAX))
def test_unsigned_varint_matches_reference(n):
    data = _write(p.write_unsigned_varint, n)
    assert data == ref_uvarint(n)
    assert p.read_unsigned_varint(data, 0) == (n, len(data))
    assert p.read_unsigned_varint(memoryview(b"\xaa" + data), 1) == (n, len(data) + 1)


@given(st.integers(0, UINT64_MAX))
def test_unsigned_varlong_matches_reference(n):
    data = _write(p.write_unsigned_varint, n)
    assert data == ref_uvarint(n)
    assert ref_read_uvarint(data) == (n, len(data))
    assert p.read_unsigned_varint(data, 0, 10) == (n, len(data))


@given(st.integers(INT64_MIN, INT64_MAX))
def test_zigzag_matches_reference(n):
    assert p.zigzag_encode(n) == ref_zigzag(n)
    assert p.zigzag_decode(ref_zigzag(n)) == n
    assert ref_unzigzag(ref_zigzag(n)) == n
    if INT32_MIN <= n <= INT32_MAX:
        assert p.zigzag_encode(n, 32) == ref_zigzag(n)


@given(st.integers(INT32_MIN, INT32_MAX))
def test_varint_matches_reference(n):
    data = _write(p.write_varint, n)
    assert data == ref_uvarint(ref_zigzag(n))
    assert len(data) <= 5
    assert p.read_varint(data, 0) == (n, len(data))


@given(st.integers(INT64_MIN, INT64_MAX))
def test_varlong_matches_reference(n):
    data = _write(p.write_varlong, n)
    assert data == ref_uvarint(ref_zigzag(n))
    assert len(data) <= 10
    assert p.read_varlong(data, 0) == (n, len(data))


@pytest.mark.parametrize(
    "n,encoded",
    [
        (0, "00"),
        (1, "01"),
        (127, "7f"),
        (128, "8001"),
        (300, "ac02"),
        (16383, "ff7f"),
        (16384, "808001"),
        (UINT32_MAX, "ffffffff0f"),
    ],
)
def test_unsigned_varint_known_encodings(n, encoded):
    assert _write(p.write_unsigned_varint, n).hex() == encoded
    assert p.read_unsigned_varint(bytes.fromhex(encoded), 0) == (n, len(encoded) // 2)


@pytest.mark.parametrize(
    "n,encoded",
    [
        (0, "00"),
        (-1, "01"),
        (1, "02"),
        (-64, "7f"),
        (63, "7e"),
        (64, "8001"),
        (INT32_MAX, "feffffff0f"),
        (INT32_MIN, "ffffffff0f"),
    ],
)
def test_varint_known_encodings(n, encoded):
    assert _write(p.write_varint, n).hex() == encoded
    assert p.read_varint(bytes.fromhex(encoded), 0) == (n, len(encoded) // 2)


@pytest.mark.parametrize("n", [INT64_MAX, INT64_MIN, INT32_MAX + 1, INT32_MIN - 1])
def test_varlong_boundaries(n):
    data = _write(p.write_varlong, n)
    assert p.read_varlong(data, 0) == (n, len(data))
    if n in (INT64_MAX, INT64_MIN):
        assert len(data) == 10


def test_varint_writers_reject_out_of_range():
    for bad in (INT32_MAX + 1, INT32_MIN - 1):
        with pytest.raises(ValueError):
            p.write_varint(bytearray(), bad)
    for bad in (INT64_MAX + 1, INT64_MIN - 1):
        with pytest.raises(ValueError):
            p.write_varlong(bytearray(), bad)
    with pytest.raises(ValueError):
        p.write_unsigned_varint(bytearray(), -1)


def test_eleven_byte_varlong_is_rejected():
    data = b"\x80" * 10 + b"\x00"
    with pytest.raises(ProtocolError):
        p.read_varlong(data, 0)
    with pytest.raises(ProtocolError):
        p.read_unsigned_varint(data, 0, 10)


def test_six_byte_unsigned_32_bit_varint_is_rejected():
    data = b"\x80" * 5 + b"\x00"
    with pytest.raises(ProtocolError):
        p.read_unsigned_varint(data, 0)
    with pytest.raises(ProtocolError):
        p.read_varint(data, 0)


@pytest.mark.parametrize(
    "data,max_bytes",
    [
        (b"\xff\xff\xff\xff\x1f", 5),  # 35 bits where 32 fit
        (b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x03", 10),  # 65 bits where 64 fit
    ],
)
def test_varint_overflowing_its_width_is_rejected(data, max_bytes):
    with pytest.raises(ProtocolError):
        p.read_unsigned_varint(data, 0, max_bytes)


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff\xff", b"\x80\x80\x80\x80"])
def test_truncated_varint_is_rejected(data):
    with pytest.raises(ProtocolError):
        p.read_unsigned_varint(data, 0)
    with pytest.raises(ProtocolError):
        p.read_varlong(data, 0)


# ---- fixed-size types ---------------------------------------------------------------------

FIXED = [
    ("int8", -128, 127),
    ("int16", -(1 << 15), (1 << 15) - 1),
    ("int32", INT32_MIN, INT32_MAX),
    ("int64", INT64_MIN, INT64_MAX),
    ("uint16", 0, (1 << 16) - 1),
    ("uint32", 0, UINT32_MAX),
]


@pytest.mark.parametrize("name,lo,hi", FIXED)
def test_fixed_ints_round_trip_at_their_bounds(name, lo, hi):
    read, write = getattr(p, f"read_{name}"), getattr(p, f"write_{name}")
    for n in (lo, hi, 0, 1, lo + 1, hi - 1):
        data = _write(write, n)
        assert read(data, 0) == (n, len(data))
        assert read(memoryview(b"\0" + data), 1) == (n, len(data) + 1)
        with pytest.raises(ProtocolError):
            read(data[:-1], 0)
        with pytest.raises(ProtocolError):
            read(data, 1)
    for bad in (lo - 1, hi + 1):
        with pytest.raises(ValueError):
            write(bytearray(), bad)


@pytest.mark.parametrize("name,lo,hi", FIXED)
@given(data=st.data())
def test_fixed_ints_are_big_endian(name, lo, hi, data):
    n = data.draw(st.integers(lo, hi))
    fmt = {
        "int8": ">b",
        "int16": ">h",
        "int32": ">i",
        "int64": ">q",
        "uint16": ">H",
        "uint32": ">I",
    }[name]
    assert _write(getattr(p, f"write_{name}"), n) == struct.pack(fmt, n)


@given(st.floats(allow_nan=False))
def test_float64_round_trip(x):
    data = _write(p.write_float64, x)
    assert data == struct.pack(">d", x)
    assert p.read_float64(data, 0) == (x, 8)


def test_boolean():
    assert _write(p.write_boolean, True) == b"\x01"
    assert _write(p.write_boolean, False) == b"\x00"
    assert p.read_boolean(b"\x00", 0) == (False, 1)
    assert p.read_boolean(b"\x01", 0) == (True, 1)
    assert p.read_boolean(b"\x02", 0) == (True, 1)  # Kafka treats any non-zero byte as true
    with pytest.raises(ProtocolError):
        p.read_boolean(b"", 0)


def test_uuid():
    u = uuid.UUID("0123456789abcdef0123456789abcdef")
    data = _write(p.write_uuid, u)
    assert data == u.bytes
    assert p.read_uuid(data, 0) == (u, 16)
    assert _write(p.write_uuid, None) == b"\0" * 16
    assert p.read_uuid(b"\0" * 16, 0) == (p.ZERO_UUID, 16)
    with pytest.raises(ProtocolError):
        p.read_uuid(data[:15], 0)


# ---- strings and bytes --------------------------------------------------------------------


@given(st.text(max_size=50))
def test_strings_round_trip(s):
    raw = s.encode("utf-8")
    classic = _write(p.write_string, s)
    assert classic == struct.pack(">h", len(raw)) + raw
    assert p.read_string(classic, 0) == (s, len(classic))
    compact = _write(p.write_compact_string, s)
    assert compact == ref_uvarint(len(raw) + 1) + raw
    assert p.read_compact_string(compact, 0) == (s, len(compact))
    assert p.read_compact_string(memoryview(compact), 0, True) == (s, len(compact))


@given(st.binary(max_size=300))
def test_bytes_round_trip(b):
    classic = _write(p.write_bytes, b)
    assert classic == struct.pack(">i", len(b)) + b
    value, end = p.read_bytes(classic, 0)
    assert (bytes(value), end) == (b, len(classic))
    compact = _write(p.write_compact_bytes, b)
    assert compact == ref_uvarint(len(b) + 1) + b
    value, end = p.read_compact_bytes(memoryview(compact), 0)
    assert (bytes(value), end) == (b, len(compact))


def test_null_strings_and_bytes():
    assert _write(p.write_string, None) == b"\xff\xff"
    assert p.read_string(b"\xff\xff", 0, True) == (None, 2)
    assert _write(p.write_compact_string, None) == b"\x00"
    assert p.read_compact_string(b"\x00", 0, True) == (None, 1)
    assert _write(p.write_bytes, None) == b"\xff\xff\xff\xff"
    assert p.read_bytes(b"\xff\xff\xff\xff", 0, True) == (None, 4)
    assert _write(p.write_compact_bytes, None) == b"\x00"
    assert p.read_compact_bytes(b"\x00", 0, True) == (None, 1)
    # ... but not where a value is required
    for read, data in [
        (p.read_string, b"\xff\xff"),
        (p.read_compact_string, b"\x00"),
        (p.read_bytes, b"\xff\xff\xff\xff"),
        (p.read_compact_bytes, b"\x00"),
    ]:
        with pytest.raises(ProtocolError):
            read(data, 0)


def test_empty_strings_and_bytes():
    assert p.read_string(b"\x00\x00", 0) == ("", 2)
    assert p.read_compact_string(b"\x01", 0) == ("", 1)
    assert p.read_bytes(b"\x00\x00\x00\x00", 0) == (b"", 4)
    assert p.read_compact_bytes(b"\x01", 0) == (b"", 1)


def test_string_length_limit():
    longest = "x" * 0x7FFF
    assert p.read_string(_write(p.write_string, longest), 0)[0] == longest
    assert p.read_compact_string(_write(p.write_compact_string, longest), 0)[0] == longest
    for write in (p.write_string, p.write_compact_string):
        with pytest.raises(ValueError):
            write(bytearray(), "x" * 0x8000)
    with pytest.raises(ValueError):  # the limit is on bytes, not characters
        p.write_string(bytearray(), "é" * 0x4000)
    too_long = ref_uvarint(0x8000 + 1) + b"x" * 0x8000
    with pytest.raises(ProtocolError):
        p.read_compact_string(too_long, 0)


@contextlib.contextmanager
def _peak_allocation():
    """``[bytes]``: the most allocated at once inside the block (tracemalloc), filled in
    on leaving it: what a hostile length would cost, measured without a clock."""
    peak = [0]
    tracemalloc.start()
    try:
        yield peak
    finally:
        peak[0] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()


HOSTILE_LENGTHS = [
    (p.read_string, b"\x7f\xff" + b"abc"),  # 32767 announced, 3 there
    (p.read_string, b"\xff\xfe"),  # -2
    (p.read_string, b"\x80\x00"),  # -32768
    (p.read_bytes, b"\x7f\xff\xff\xff" + b"abc"),  # 2 GB announced
    (p.read_bytes, b"\xff\xff\xff\xfe"),  # -2
    (p.read_bytes, b"\x80\x00\x00\x00"),  # -2**31
    (p.read_compact_string, b"\xff\xff\xff\xff\x0f" + b"abc"),  # 4 GB announced
    (p.read_compact_bytes, b"\xff\xff\xff\xff\x0f" + b"abc"),
    (p.read_compact_bytes, b"\x80\x80\x80\x80\x80\x01"),  # not a 32-bit varint
]


@pytest.mark.parametrize("read,data", HOSTILE_LENGTHS)
@pytest.mark.parametrize("nullable", [False, True])
def test_hostile_lengths_fail_fast(read, data, nullable):
    with _peak_allocation() as peak, pytest.raises(ProtocolError):
        read(data, 0, nullable)
    assert peak[0] < 16 * 1024  # no allocation of the announced size (32 KB and up)


@pytest.mark.parametrize(
    "read,prefix",
    [
        (p.read_string, b"\x00\x02"),
        (p.read_compact_string, b"\x03"),
    ],
)
@pytest.mark.parametrize("bad", [b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80"[:2], b"\x80a"])
def test_invalid_utf8_is_a_protocol_error(read, prefix, bad):
    with pytest.raises(ProtocolError):
        read(prefix + bad, 0)


def test_lone_surrogate_in_a_3_byte_sequence_is_a_protocol_error():
    with pytest.raises(ProtocolError):
        p.read_string(b"\x00\x03\xed\xa0\x80", 0)  # UTF-8 forbids encoded surrogates


# ---- array counts -------------------------------------------------------------------------


def test_array_counts_round_trip():
    for compact in (False, True):
        for n in (0, 1, 5):
            data = _write(p.write_array_count, n, compact) + b"\0" * n
            assert p.read_array_count(data, 0, compact) == (n, len(data) - n)
        data = _write(p.write_array_count, None, compact)
        assert data == (b"\x00" if compact else b"\xff\xff\xff\xff")
        assert p.read_array_count(data, 0, compact, True) == (None, len(data))
        with pytest.raises(ProtocolError):
            p.read_array_count(data, 0, compact, False)


@pytest.mark.parametrize(
    "compact,data",
    [
        (False, b"\x00\x00\x00\x05abcd"),  # 5 elements, 4 bytes left
        (False, b"\x7f\xff\xff\xff"),
        (False, b"\xff\xff\xff\xfe"),  # -2
        (False, b"\x80\x00\x00\x00"),
        (True, b"\x06abcd"),  # 5 elements, 4 bytes left
        (True, b"\xff\xff\xff\xff\x0f"),
    ],
)
@pytest.mark.parametrize("nullable", [False, True])
def test_array_count_beyond_the_bytes_left_is_rejected(compact, data, nullable):
    with _peak_allocation() as peak, pytest.raises(ProtocolError):
        p.read_array_count(data, 0, compact, nullable)
    assert peak[0] < 16 * 1024  # nothing made for the announced count


@given(st.binary(max_size=12), st.integers(0, 12))
@settings(max_examples=300)
def test_readers_raise_only_protocol_errors(data, pos):
    readers = [
        p.read_int8,
        p.read_int16,
        p.read_int32,
        p.read_int64,
        p.read_uint16,
        p.read_uint32,
        p.read_float64,
        p.read_boolean,
        p.read_uuid,
        p.read_unsigned_varint,
        p.read_varint,
        p.read_varlong,
        p.read_string,
        p.read_compact_string,
        p.read_bytes,
        p.read_compact_bytes,
        lambda b, i: p.read_array_count(b, i, True, True),
        lambda b, i: p.read_array_count(b, i, False, True),
    ]
    for read in readers:
        for buf in (data, memoryview(data)):
            try:
                _, end = read(buf, pos)
            except ProtocolError:
                continue
            assert pos < end <= len(data)
