"""The optional compiled record decoder (protocol/records/_fastdecode.c, switched by
protocol/records/accel.py) against the pure-Python path on the same bytes.

Its contract: decode exactly what the pure path decodes, to equal Arrow batches, and on
anything else answer None so the pure path raises its own error. The decode tests of
test_records_decode.py, test_records_golden.py and the records fuzzers run on both paths
(tests/helpers/decoder_paths.py); here: that it is built and really used, the switches, hostile
lengths (refused, never read past a section), and random sections under a valid CRC.
"""

from __future__ import annotations

import os
import random
import struct
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import CorruptRecordError
from protocol.records import accel, decode_records
from protocol.records import batch as B
from protocol.records import checksum
from protocol.records import decode_pending
from protocol.records.batch import write_varint, write_varlong

TS = 1_700_000_000_000
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_extension_is_built():
    assert accel.available(), (
        "protocol/records/_fastdecode.c did not build: the pure-Python path is in use; "
        "install a C compiler and Python's headers and run `pip install -e .` again"
    )


def test_forced_switches_paths_and_restores():
    assert accel.module() is not None
    with accel.forced(False):
        assert accel.module() is None
        with accel.forced(True):
            assert accel.module() is not None
        assert accel.module() is None
    assert accel.module() is not None


def test_environment_variable_selects_the_pure_path():
    code = "from protocol.records import accel; print(accel.available(), accel.module())"
    for value, expect in (("1", "True None"), ("0", "True <module")):
        out = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**os.environ, "PYKAFKA_PURE_PYTHON": value},
            check=True,
        ).stdout
        assert out.startswith(expect), (value, out)


def _both(data, **kw):
    """(pure outcome, compiled outcome): a batch and next offset, or an error."""
    kw = {"topic": "t", "partition": 2, "start_offset": 0, **kw}
    out = []
    for use in (False, True):
        with accel.forced(use):
            try:
                out.append(decode_records(data, **kw))
            except CorruptRecordError as e:
                out.append((type(e), str(e)))
    return out


def _assert_same(data, **kw):
    pure, compiled = _both(data, **kw)
    if isinstance(pure[0], pa.RecordBatch):
        assert isinstance(compiled[0], pa.RecordBatch), compiled
        compiled[0].validate(full=True)
        assert compiled[0].schema == pure[0].schema
        assert compiled[0].equals(pure[0]), (compiled[0].to_pydict(), pure[0].to_pydict())
        assert compiled[1] == pure[1]
    else:
        assert compiled == pure
    return pure


def _records(n, start=0, seed=0, headers=True):
    rnd = random.Random(seed)
    return [
        B.Record(
            start + i,
            TS + rnd.randrange(-500, 500),
            None if rnd.random() < 0.2 else rnd.randbytes(rnd.randrange(0, 20)),
            None if rnd.random() < 0.1 else rnd.randbytes(rnd.randrange(0, 300)),
            tuple(
                (f"h{j}", None if rnd.random() < 0.3 else rnd.randbytes(j))
                for j in range(rnd.randrange(0, 4))
            )
            if headers
            else (),
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("codec", ["none", "lz4", "zstd"])
@pytest.mark.parametrize("headers", [True, False])
def test_compiled_path_decodes_valid_batches_itself(monkeypatch, codec, headers):
    """Valid input never falls back: the pure arena pass is made to fail, and the compiled
    path's batches equal the pure path's (run before the patch)."""
    data = b"".join(
        B.build_batch(
            _records(40, 40 * k, seed=k, headers=k % 2 == 0),
            compression=codec,
            timestamp_type=B.LOG_APPEND_TIME if k == 2 else 0,
        )
        for k in range(5)
    )
    cases = [
        dict(include_headers=headers),
        dict(start_offset=13, end_offset=170, include_headers=headers),
    ]
    expected = []
    with accel.forced(False):
        for kw in cases:
            expected.append(
                decode_records(data, topic="t", partition=2, **{"start_offset": 0, **kw})
            )

    def no_fallback(*args, **kwargs):
        raise AssertionError("the compiled decoder refused valid input")

    monkeypatch.setattr(decode_pending, "_decode_arena", no_fallback)
    with accel.forced(True):
        for kw, (batch, nxt) in zip(cases, expected):
            got, got_next = decode_records(
                data, topic="t", partition=2, **{"start_offset": 0, **kw}
            )
            got.validate(full=True)
            assert got.equals(batch) and got_next == nxt


def _wrap(
    section: bytes, count: int, last_delta: int | None = None, base_offset=0, base_ts=TS, max_ts=TS
) -> bytes:
    """A v2 batch around a raw records section, with a valid CRC."""
    out = bytearray(B.BATCH_HEADER_SIZE)
    B.HEADER_STRUCT.pack_into(
        out,
        0,
        base_offset,
        B.MIN_BATCH_LENGTH + len(section),
        -1,
        2,
        0,
        0,
        count - 1 if last_delta is None else last_delta,
        base_ts,
        max_ts,
        -1,
        -1,
        -1,
        count,
    )
    out += section
    struct.pack_into(
        ">I", out, B.CRC_OFFSET, checksum.crc32c(memoryview(out)[B.ATTRIBUTES_OFFSET :])
    )
    return bytes(out)


def _record(body: bytes, length: int | None = None) -> bytes:
    out = bytearray()
    write_varint(out, len(body) if length is None else length)
    return bytes(out + body)


def _body(
    ts_delta=0,
    offset_delta=0,
    key=b"k",
    value=b"value",
    headers=(),
    tail=b"",
    key_len=None,
    value_len=None,
    header_count=None,
):
    out = bytearray(b"\0")
    write_varlong(out, ts_delta)
    write_varint(out, offset_delta)
    write_varint(out, len(key) if key_len is None else key_len)
    out += key
    write_varint(out, len(value) if value_len is None else value_len)
    out += value
    write_varint(out, len(headers) if header_count is None else header_count)
    for k, v in headers:
        write_varint(out, len(k))
        out += k
        write_varint(out, -1 if v is None else len(v))
        out += v or b""
    return bytes(out + tail)


BIG = (1 << 31) - 1
HOSTILE = {
    "length prefix 2**31-1": _record(_body(), BIG),
    "length prefix 5 bytes, overflowing": b"\xfe\xff\xff\xff\x7f" + _body(),
    "length prefix 6 bytes": b"\x80\x80\x80\x80\x80\x00" + _body(),
    "length prefix negative": _record(_body(), -20),
    "length prefix below a record's minimum": _record(_body(), 5),
    "key length 2**31-1": _record(_body(key_len=BIG)),
    "key length -2": _record(_body(key_len=-2)),
    "value length 2**31-1": _record(_body(value_len=BIG)),
    "value length past the record": _record(_body(value_len=6)),
    "value length -7": _record(_body(value_len=-7)),
    "header count 2**31-1": _record(_body(header_count=BIG)),
    "header count -1": _record(_body(header_count=-1)),
    "header count one too many": _record(_body(headers=[(b"a", b"b")], header_count=2)),
    "header key length negative": _record(_body(headers=[(b"a", b"b")])[:-4] + b"\x01a\x02b"),
    "header value length -2": _record(_body(headers=[(b"a", b"b")])[:-2] + b"\x03b"),
    "trailing byte after the headers": _record(_body(headers=[(b"a", b"b")], tail=b"x")),
    "trailing byte after the value": _record(_body(tail=b"x")),
    "offset delta negative": _record(_body(offset_delta=-1)),
    "offset delta past the last offset delta": _record(_body(offset_delta=3)),
    "timestamp delta 11-byte varlong": _record(b"\0" + b"\xff" * 10 + b"\x00" + _body()[2:]),
    "timestamp delta overflowing 64 bits": _record(b"\0" + b"\xff" * 9 + b"\x7f" + _body()[2:]),
    "offset delta overflowing 32 bits": _record(b"\0\0\xff\xff\xff\xff\x7f" + _body()[3:]),
    "timestamp out of range": _record(_body(ts_delta=(1 << 62))),
    "truncated record": _record(_body())[:-3],
    "empty section": b"",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_records_are_refused_alike(name):
    section = HOSTILE[name]
    ext = accel.module()
    assert ext.decode_sections([section], [0], [0], [TS], [TS], [0], [1], 0, None, True) is None
    # a section shorter than a record gets padding (not a record) so that the count check
    # before the record checks passes
    data = _wrap(section + bytes(max(0, B.MIN_RECORD_SIZE - len(section))), 1)
    pure = _assert_same(data, include_headers=True)
    assert pure[0] is CorruptRecordError, pure


def test_offset_deltas_must_increase_alike():
    section = _record(_body(offset_delta=1)) + _record(_body(offset_delta=1))
    pure = _assert_same(_wrap(section, 2, last_delta=2), include_headers=True)
    assert pure[0] is CorruptRecordError
    section = _record(_body(offset_delta=0)) + _record(_body(offset_delta=2))
    batch, _ = _assert_same(_wrap(section, 2, last_delta=2), include_headers=True)
    assert batch.num_rows == 2


def test_count_short_of_the_records_is_refused_alike():
    section = b"".join(_record(_body(offset_delta=i)) for i in range(3))
    for count in (2, 4):
        pure = _assert_same(_wrap(section, count, last_delta=3))
        assert pure[0] is CorruptRecordError


def test_non_minimal_varints_are_accepted_alike():
    body = bytearray(b"\0\x80\x00\x80\x80\x00\x82\x00k\x8a\x80\x00value\x80\x00")
    batch, _ = _assert_same(_wrap(_record(bytes(body)), 1), include_headers=True)
    assert batch.column("key").to_pylist() == [b"k"]
    assert batch.column("value").to_pylist() == [b"value"]


def test_log_append_time_and_timestamp_type_alike():
    data = B.build_batch(_records(10), timestamp_type=B.LOG_APPEND_TIME, max_timestamp=TS + 9)
    batch, _ = _assert_same(data, include_headers=True)
    assert set(batch.column("timestampType").to_pylist()) == {1}


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.binary(max_size=40), min_size=1, max_size=4),
    st.integers(1, 8),
    st.integers(0, 4),
    st.booleans(),
)
def test_random_sections_under_a_valid_crc(sections, count, start, headers):
    """Random bytes as records sections (CRC right, so only the record checks decide):
    both paths decode the same rows or raise the same error."""
    data = b"".join(
        _wrap(s + bytes(7 * count), count, last_delta=count + 2, base_offset=10 * i)
        for i, s in enumerate(sections)
    )
    _assert_same(data, start_offset=start, include_headers=headers)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 30), st.booleans())
def test_records_with_one_byte_changed(seed, n, headers):
    """A valid section with one byte set to a random value, under a valid CRC."""
    rnd = random.Random(seed)
    good = B.build_batch(_records(n, seed=seed))
    section = bytearray(good[B.RECORDS_OFFSET :])
    section[rnd.randrange(len(section))] = rnd.randrange(256)
    h = B.parse_header(good)
    data = _wrap(
        bytes(section),
        n,
        last_delta=h.last_offset_delta,
        base_ts=h.base_timestamp,
        max_ts=h.max_timestamp,
    )
    _assert_same(data, include_headers=headers)


def test_direct_calls_with_impossible_counts_are_refused_before_allocating():
    """Counts the bytes cannot hold (a record takes 7 at least) are refused up front,
    whatever the caller passes; mismatched lists are a caller's bug (ValueError)."""
    ext = accel.module()
    section = _record(_body())
    for count in (2, 10**9, (1 << 31) - 1):
        assert (
            ext.decode_sections([section], [0], [count], [TS], [TS], [0], [count], 0, None, True)
            is None
        )
    assert ext.decode_sections([section], [0], [0], [TS], [TS], [0], [-1], 0, None, True) is None
    assert ext.decode_sections([section], [0], [0], [TS], [TS], [0], [1], 0, None, True)[0] == 1
    with pytest.raises(ValueError):
        ext.decode_sections([section], [0, 1], [0], [TS], [TS], [0], [1], 0, None, True)


# ---- the compiled encoder --------------------------------------------------------------

_HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_value_st = st.none() | st.binary(max_size=40) | st.binary(min_size=200, max_size=300)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            _value_st,
            _value_st,
            st.none() | st.lists(st.tuples(st.text(max_size=4), _value_st), max_size=3),
            st.integers(0, 1 << 45),
        ),
        min_size=1,
        max_size=40,
    ),
    st.booleans(),
    st.booleans(),
    st.integers(0, 39),
    st.randoms(use_true_random=False),
)
def test_encoder_writes_the_pure_paths_bytes(rows, keys, headers, cut, rnd):
    """Both encoders, the same rows (a sliced Arrow batch, picked in a random order):
    byte-identical batches."""
    from protocol.records.encode_arrow import encode_rows
    from protocol.records.row_source import RowSource

    k = pa.array([r[0] for r in rows], pa.binary()) if keys else None
    v = pa.array([r[1] for r in rows], pa.binary())
    h = (
        pa.array(
            [None if r[2] is None else [{"key": a, "value": b} for a, b in r[2]] for r in rows],
            _HEADERS,
        )
        if headers
        else None
    )
    cut = min(cut, len(rows) - 1)
    k, v, h = (None if x is None else x.slice(cut) for x in (k, v, h))
    order = list(range(len(v)))
    rnd.shuffle(order)
    ts = np.array([rows[cut + i][3] for i in order], dtype=np.int64)
    out = []
    for use in (False, True):
        with accel.forced(use):
            out.append(
                encode_rows(
                    [(RowSource(k, v, h), np.array(order))],
                    timestamps_ms=ts,
                    producer_id=1,
                    base_sequence=2,
                )
            )
    assert out[0] == out[1]


def test_encoder_refuses_indexes_outside_its_buffers():
    """The compiled encoder checks what its caller hands it: a row index or a length past
    a buffer is a ValueError, never a read outside it."""
    enc = accel._enc
    starts, lens = np.array([0, 3], np.int64), np.array([3, 3], np.int64)
    ts = np.zeros(1, np.int64)
    args = (None,) * 3 + (starts, lens, b"abcdef") + (None,) * 8
    ok = enc.encode_section(np.array([1], np.int64), ts, 0, *args)
    assert ok.endswith(b"\x06def\x00")
    with pytest.raises(ValueError, match="row index"):
        enc.encode_section(np.array([2], np.int64), ts, 0, *args)
    with pytest.raises(ValueError, match="outside its buffer"):
        enc.encode_section(np.array([1], np.int64), ts, 0, *args[:5], b"abcde", *args[6:])


# ---- the compiled encoder's CRC-32C and whole-batch call -----------------------------------

_CRC_EDGES = [0, 1, 2, 7, 8, 9, 15, 16, 17, 767, 768, 769, 1535, 2304, 2311, 8192, 10_007]


@pytest.mark.parametrize("portable", [False, True])
def test_crc32c_matches_the_crc32c_package_at_edge_lengths(portable):
    """Both of the encoder's CRC-32C codes (the CPU instruction where there is one, and the
    tables) give the crc32c package's value: empty input, odd lengths, lengths around the
    8-byte words and the three 256-byte streams of the instruction's code."""
    crc32c = pytest.importorskip("crc32c")
    enc = accel._enc
    rnd = random.Random(5)
    for n in _CRC_EDGES:
        data = bytes(rnd.getrandbits(8) for _ in range(n))
        for start in (0, 1, 0xFFFFFFFF, 0x12345678):
            assert enc.crc32c(data, start, portable) == crc32c.crc32c(data, start), (n, start)
    assert enc.crc32c(b"123456789") == 0xE3069283  # the check value of CRC-32C


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=3000), st.integers(0, 2**32 - 1), st.integers(0, 15))
def test_crc32c_matches_the_crc32c_package(data, start, skip):
    """Any bytes, any starting value, any alignment of the first byte (a memoryview that
    starts ``skip`` bytes into its buffer): the package's CRC, for both codes."""
    crc32c = pytest.importorskip("crc32c")
    enc = accel._enc
    view = memoryview(bytes(skip) + data)[skip:]
    expect = crc32c.crc32c(data, start)
    assert enc.crc32c(view, start) == expect
    assert enc.crc32c(view, start, True) == expect


def test_crc32c_refuses_a_value_wider_than_32_bits():
    with pytest.raises(ValueError, match="32 bits"):
        accel._enc.crc32c(b"x", 1 << 32)
    with pytest.raises(OverflowError):
        accel._enc.crc32c(b"x", -1)


def test_encode_section_computes_the_crc_of_what_it_writes():
    """With a CRC value after ``out``, encode_section answers the new length and the CRC
    continued over exactly the bytes it appended (records past the 8 KiB it hashes at a
    time included)."""
    enc = accel._enc
    values = pa.array([bytes([i % 256]) * (i % 120) for i in range(600)], pa.binary())
    from protocol.records.row_source import RowSource

    src = RowSource(None, values)
    out = bytearray(b"head")
    ts = np.arange(600, dtype=np.int64)
    length, crc = enc.encode_section(None, ts, 0, *src.buffers(), out, 0x1234)
    assert length == len(out) > 8192 + 4
    assert crc == checksum.crc32c(memoryview(out)[4:], 0x1234)
    assert out[4:] == enc.encode_section(None, ts, 0, *src.buffers())


def _sources_st():
    row = st.tuples(
        _value_st,
        _value_st,
        st.none() | st.lists(st.tuples(st.text(max_size=3), _value_st), max_size=2),
    )
    return st.lists(
        st.tuples(st.lists(row, min_size=1, max_size=30), st.booleans(), st.booleans()),
        min_size=1,
        max_size=4,
    )


@settings(max_examples=100, deadline=None)
@given(_sources_st(), st.randoms(use_true_random=False), st.sampled_from(["none", "none", "lz4"]))
def test_encoder_from_several_sources_writes_the_pure_paths_bytes(sources, rnd, codec):
    """A batch of rows picked from several Arrow batches (some parts empty, some all rows,
    some picked by index), compressed or not: the compiled encoder, which writes them in
    one call with the batch's CRC computed as it goes, and the pure path give the same
    bytes."""
    from protocol.records.encode_arrow import encode_rows
    from protocol.records.row_source import RowSource

    parts = []
    for rows, keys, headers in sources:
        k = pa.array([r[0] for r in rows], pa.binary()) if keys else None
        v = pa.array([r[1] for r in rows], pa.binary())
        h = None
        if headers:
            h = pa.array(
                [None if r[2] is None else [{"key": a, "value": b} for a, b in r[2]] for r in rows],
                _HEADERS,
            )
        pick = rnd.choice(["all", "some", "none"])
        if pick == "all":
            index = None
        else:
            count = 0 if pick == "none" else rnd.randint(1, 2 * len(rows))
            index = np.array([rnd.randrange(len(rows)) for _ in range(count)], dtype=np.int64)
        parts.append((RowSource(k, v, h), index))
    total = sum(src.n if rows is None else len(rows) for src, rows in parts)
    if total == 0:
        parts.append((RowSource(None, pa.array([b"x"])), None))
        total = 1
    ts = np.array([TS + rnd.randrange(-1000, 10**6) for _ in range(total)], dtype=np.int64)
    out = []
    for use in (False, True):
        with accel.forced(use):
            out.append(
                encode_rows(
                    parts, timestamps_ms=ts, producer_id=3, base_sequence=9, compression=codec
                )
            )
    assert out[0] == out[1]
    assert (
        checksum.crc32c(memoryview(out[1])[B.ATTRIBUTES_OFFSET :])
        == struct.unpack_from(">I", out[1], B.CRC_OFFSET)[0]
    )


def test_encode_records_checks_its_arguments():
    enc = accel._enc
    starts, lens = np.array([0, 3], np.int64), np.array([3, 3], np.int64)
    part = (None,) * 4 + (starts, lens, b"abcdef") + (None,) * 8
    ts = np.zeros(2, np.int64)
    out, crc = enc.encode_records([part], ts, 61, 0)
    assert len(out) == 61 + 2 * 10 and out.endswith(b"\x06def\x00")
    assert crc == checksum.crc32c(memoryview(out)[61:])
    same, no_crc = enc.encode_records([part], ts, 61, None)
    assert no_crc is None and same[61:] == out[61:]
    with pytest.raises(ValueError, match="too short"):
        enc.encode_records([part, part], ts, 61, 0)
    with pytest.raises(ValueError, match="longer than the rows"):
        enc.encode_records([part], np.zeros(3, np.int64), 61, 0)
    with pytest.raises(TypeError, match="tuple of 15"):
        enc.encode_records([part[:-1]], ts, 61, 0)
    with pytest.raises(ValueError, match="room"):
        enc.encode_records([part], ts, -1, 0)
    with pytest.raises(ValueError, match="outside its buffer"):
        enc.encode_records([part[:6] + (b"abcde",) + part[7:]], ts, 61, 0)
    big = (
        (np.zeros(1, np.int64),)
        + (None,) * 3
        + (
            np.zeros(1, np.int64),
            np.array([1 << 31], np.int64),
            b"",
        )
        + (None,) * 8
    )
    with pytest.raises(ValueError, match="outside its buffer"):
        enc.encode_records([big], np.zeros(1, np.int64), 61, 0)


def test_batches_are_the_bytes_they_always_were():
    """Fixed rows from two sources (keys and nulls, headers, rows picked forwards and
    backwards, transactional or not, one part of all rows): the SHA-256 of the batches both
    paths write, recorded from the encoder before it computed the CRC while writing."""
    import hashlib

    from protocol.records.encode_arrow import encode_rows
    from protocol.records.row_source import RowSource

    n = 3000
    keys = pa.array([None if i % 7 == 0 else b"k%d" % i for i in range(n)], pa.binary())
    values = pa.array(
        [None if i % 11 == 0 else bytes([i % 251]) * (i % 300) for i in range(n)], pa.binary()
    )
    headers = pa.array(
        [
            None if i % 3 else [{"key": f"h{j}", "value": b"x" * j} for j in range(i % 4)]
            for i in range(n)
        ],
        _HEADERS,
    )
    plain = RowSource(keys.slice(5), values.slice(5))
    full = RowSource(None, values, headers)
    pick = np.arange(1, 2900, 3, dtype=np.int64)
    ts = TS + np.arange(2 * len(pick)) * 37
    for use in (False, True):
        with accel.forced(use):
            batches = [
                encode_rows(
                    [(plain, pick), (full, pick[::-1].copy())],
                    timestamps_ms=ts,
                    producer_id=77,
                    producer_epoch=2,
                    base_sequence=1000,
                    transactional=transactional,
                )
                for transactional in (False, True)
            ]
            batches.append(encode_rows([(plain, None)], timestamps_ms=TS, producer_id=-1))
        digest = hashlib.sha256(b"".join(bytes(b) for b in batches)).hexdigest()
        assert digest == "0a1bee05afc33503069e0d1230b3286688cdfbf3e39edfbf7d9aef27cc5eb08a"
