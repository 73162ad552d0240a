"""encode_batch, encode_rows and split_for_batch_size: round trips through both decoders,
inputs, sizes. Every test runs on the pure-Python path and on the compiled encoder and
decoder (tests/helpers/decoder_paths.py)."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import ConfigError
from protocol.records import batch as B
from protocol.records import reference_decode as R
from protocol.records import decode_records
from protocol.records.encode_arrow import (
    encode_batch,
    encode_rows,
    record_base_sizes,
    record_sizes,
    sizes_in_batch,
    split_for_batch_size,
)
from protocol.records.row_source import RowSource
from protocol.records.vectorized import varint_sizes, zigzag_encode

from .helpers.decoder_paths import decoder_path  # noqa: F401 (autouse: both paths)

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
TS = 1_700_000_000_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def headers_array(rows):
    return pa.array(
        [None if h is None else [{"key": k, "value": v} for k, v in h] for h in rows], HEADERS
    )


row_st = st.tuples(
    st.none() | st.binary(max_size=30),
    st.none() | st.binary(max_size=300) | st.binary(min_size=8000, max_size=9000),
    st.none()
    | st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=3),
    st.integers(-(1 << 40), 1 << 40),
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(row_st, min_size=1, max_size=40),
    st.sampled_from(CODECS),
    st.integers(0, 1 << 50),
    st.booleans(),
    st.booleans(),
)
def test_round_trip(rows, codec, base_offset, with_headers, with_keys):
    keys = pa.array([r[0] for r in rows], pa.binary()) if with_keys else None
    values = pa.array([r[1] for r in rows], pa.binary())
    hdrs = headers_array([r[2] for r in rows]) if with_headers else None
    ts = np.array([TS + r[3] for r in rows], dtype=np.int64)
    raw = encode_batch(
        keys,
        values,
        headers=hdrs,
        timestamps_ms=ts,
        base_offset=base_offset,
        compression=codec,
        compression_fallback=False,
        producer_id=5,
        producer_epoch=1,
        base_sequence=10,
    )
    h, recs = R.decode_batch(raw)
    assert h.compression == CODECS.index(codec)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (5, 1, 10)
    assert h.record_count == len(rows) and h.last_offset_delta == len(rows) - 1
    assert h.base_timestamp == ts[0] and h.max_timestamp == ts.max()
    expect_headers = [tuple(r[2] or ()) if with_headers else () for r in rows]
    assert recs == [
        B.Record(base_offset + i, int(ts[i]), r[0] if with_keys else None, r[1], expect_headers[i])
        for i, r in enumerate(rows)
    ]
    batch, nxt = decode_records(raw, topic="t", partition=0, start_offset=0, include_headers=True)
    assert nxt == base_offset + len(rows)
    assert batch.column("value").equals(values)
    assert batch.column("key").to_pylist() == [r[0] if with_keys else None for r in rows]
    got_headers = [
        tuple((x["key"], x["value"]) for x in h) if h else ()
        for h in batch.column("headers").to_pylist()
    ]
    assert got_headers == expect_headers


small_row_st = st.tuples(
    st.none() | st.binary(max_size=10),
    st.none() | st.binary(max_size=200),
    st.none()
    | st.lists(st.tuples(st.text(max_size=3), st.none() | st.binary(max_size=3)), max_size=2),
    st.integers(-(1 << 40), 1 << 40),
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(small_row_st, min_size=1, max_size=20),
    st.lists(small_row_st, min_size=1, max_size=20),
    st.randoms(use_true_random=False),
    st.booleans(),
)
def test_rows_by_index_from_several_sources(rows_a, rows_b, rnd, with_headers):
    """encode_rows: rows picked by index (any order, repeats allowed) from two Arrow
    batches, one with headers and keys and one maybe without, become one batch equal to
    encode_batch of the same rows gathered beforehand."""

    def source(rows, keys, headers):
        return (
            pa.array([r[0] for r in rows], pa.binary()) if keys else None,
            pa.array([r[1] for r in rows], pa.binary()),
            headers_array([r[2] for r in rows]) if headers else None,
        )

    a = source(rows_a, True, with_headers)
    b = source(rows_b, False, False)
    pick_a = np.array([rnd.randrange(len(rows_a)) for _ in range(rnd.randint(1, 20))])
    pick_b = np.arange(rnd.randrange(len(rows_b)), len(rows_b))  # a contiguous run
    ts = np.array(
        [TS + rows_a[i][3] for i in pick_a] + [TS + rows_b[i][3] for i in pick_b], dtype=np.int64
    )
    got = encode_rows(
        [(RowSource(*a), pick_a), (RowSource(*b), pick_b)],
        timestamps_ms=ts,
        producer_id=9,
        base_sequence=4,
    )
    keys = [rows_a[i][0] for i in pick_a] + [None] * len(pick_b)
    values = [rows_a[i][1] for i in pick_a] + [rows_b[i][1] for i in pick_b]
    hdrs = ([rows_a[i][2] for i in pick_a] + [None] * len(pick_b)) if with_headers else None
    expect = encode_batch(
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        headers=None if hdrs is None else headers_array(hdrs),
        timestamps_ms=ts,
        producer_id=9,
        base_sequence=4,
    )
    assert got == expect
    _, recs = R.decode_batch(got)
    assert [(r.key, r.value) for r in recs] == list(zip(keys, values))


def test_codec_attribute_and_fallback():
    values = pa.array([bytes(range(256))] * 3)
    for i, codec in enumerate(CODECS):
        raw = encode_batch(None, pa.array([b"a" * 500] * 10), compression=codec)
        assert B.parse_header(raw).compression == i
    # random bytes do not shrink: written uncompressed unless told otherwise
    rnd = pa.array([np.random.default_rng(1).bytes(300)])
    assert B.parse_header(encode_batch(None, rnd, compression="lz4")).compression == 0
    assert (
        B.parse_header(
            encode_batch(None, rnd, compression="lz4", compression_fallback=False)
        ).compression
        == 3
    )
    assert B.parse_header(encode_batch(None, values, compression="gzip")).compression == 1


def test_transactional_flag_and_batch_fields():
    raw = encode_batch(
        None,
        pa.array([b"x"]),
        transactional=True,
        producer_id=9,
        producer_epoch=2,
        base_sequence=0,
        partition_leader_epoch=4,
        timestamps_ms=123,
    )
    h = B.parse_header(raw)
    assert h.attributes == B.TRANSACTIONAL_MASK and h.partition_leader_epoch == 4
    assert h.base_timestamp == h.max_timestamp == 123 and h.magic == 2


@pytest.mark.parametrize(
    "make, text",
    [
        (lambda v: pa.array(v, pa.string()), True),
        (lambda v: pa.array(v, pa.large_binary()), False),
        (lambda v: pa.array(v, pa.large_string()), True),
        # (pyarrow 15, the lowest we claim, has no view types: a plain binary array there)
        (lambda v: pa.array(v, getattr(pa, "binary_view", pa.binary)()), False),
        (
            lambda v: pa.chunked_array(
                [pa.array(v[:2], pa.binary()), pa.array(v[2:], pa.binary())]
            ),
            False,
        ),
        (lambda v: list(v), False),
        (lambda v: pa.array(["pad"] + list(v), pa.string()).slice(1), True),
    ],
)
def test_input_kinds(make, text):
    texts = ["a", "", "ccc", None]
    raw_values = [None if t is None else t.encode() for t in texts]
    arg = make(texts if text else raw_values)
    _, recs = R.decode_batch(encode_batch(arg, arg, timestamps_ms=TS))
    assert [r.value for r in recs] == raw_values == [r.key for r in recs]


def test_timestamp_inputs():
    v = pa.array([b"a", b"b"])
    ts_arr = pa.array([TS * 1000, None], pa.timestamp("us", tz="UTC"))
    _, recs = R.decode_batch(encode_batch(None, v, timestamps_ms=ts_arr))
    assert recs[0].timestamp == TS and recs[1].timestamp > TS  # null: now
    _, recs = R.decode_batch(encode_batch(None, v, timestamps_ms=pa.array([1, 2], pa.int64())))
    assert [r.timestamp for r in recs] == [1, 2]
    _, recs = R.decode_batch(encode_batch(None, v, timestamps_ms=[5, 3]))
    assert [r.timestamp for r in recs] == [5, 3]
    _, recs = R.decode_batch(encode_batch(None, v))
    assert recs[0].timestamp == recs[1].timestamp > TS


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: encode_batch(None, pa.array([], pa.binary())), "empty"),
        (lambda: encode_batch(pa.array([b"a"]), pa.array([b"a", b"b"])), "rows"),
        (lambda: encode_batch(None, pa.array([1, 2])), "binary or string"),
        (lambda: encode_batch(None, pa.array([b"a"]), timestamps_ms=np.array([1.5])), "integers"),
        (lambda: encode_batch(None, pa.array([b"a"]), timestamps_ms=[1, 2]), "shape"),
        (lambda: encode_batch(None, pa.array([b"a"]), compression="brotli"), "codec"),
        (lambda: encode_batch(None, pa.array([b"a"]), headers=pa.array([[1]])), "headers"),
        (
            lambda: encode_batch(
                None, pa.array([b"a"]), headers=pa.array([[{"key": None, "value": b"x"}]], HEADERS)
            ),
            "null",
        ),
        (lambda: encode_batch(None, pa.array([b"a"]), headers=[[("k", b"v")]]), "headers"),
    ],
)
def test_bad_inputs(call, match):
    with pytest.raises(ConfigError, match=match):
        call()


def test_header_rows_null_empty_and_present():
    hdrs = headers_array([None, [], [("k", None)], [("a", b"1"), ("b", b"")]])
    raw = encode_batch(None, pa.array([b"0", b"1", b"2", b"3"]), headers=hdrs, timestamps_ms=TS)
    _, recs = R.decode_batch(raw)
    assert [r.headers for r in recs] == [(), (), (("k", None),), (("a", b"1"), ("b", b""))]
    empty_only = headers_array([None, []])
    _, recs = R.decode_batch(encode_batch(None, pa.array([b"x", b"y"]), headers=empty_only))
    assert [r.headers for r in recs] == [(), ()]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 5000), min_size=1, max_size=300), st.integers(200, 40000), st.booleans()
)
def test_split_for_batch_size(value_sizes, max_bytes, with_headers):
    values = pa.array([b"v" * s for s in value_sizes])
    keys = pa.array([b"key-%d" % i for i in range(len(value_sizes))])
    hdrs = (
        headers_array([[("h", b"x" * (i % 7))] for i in range(len(value_sizes))])
        if with_headers
        else None
    )
    ts = TS + np.arange(len(value_sizes), dtype=np.int64) * 1000
    ranges = split_for_batch_size(
        keys, values, headers=hdrs, timestamps_ms=ts, max_batch_bytes=max_bytes
    )
    # the sink's path: sizes kept from when the rows were read give the same cut
    assert (
        split_for_batch_size(
            None,
            None,
            timestamps_ms=ts,
            max_batch_bytes=max_bytes,
            base_sizes=record_base_sizes(keys, values, headers=hdrs),
        )
        == ranges
    )
    assert ranges[0][0] == 0 and ranges[-1][1] == len(value_sizes)
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    bounds = record_sizes(keys, values, headers=hdrs, timestamps_ms=ts)
    for start, stop in ranges:
        raw = encode_batch(
            keys[start:stop],
            values[start:stop],
            headers=None if hdrs is None else hdrs[start:stop],
            timestamps_ms=ts[start:stop],
        )
        assert len(raw) <= max_bytes or stop - start == 1
        assert len(raw) <= int(bounds[start:stop].sum()) + 61
        if stop < len(value_sizes):  # greedy: one more row would not have fitted
            assert int(bounds[start : stop + 1].sum()) + 61 > max_bytes


def test_split_max_records_and_errors():
    values = pa.array([b"x"] * 10)
    assert split_for_batch_size(None, values, max_batch_bytes=10000, max_records=4) == [
        (0, 4),
        (4, 8),
        (8, 10),
    ]
    assert split_for_batch_size(None, pa.array([b"x" * 500, b"y"]), max_batch_bytes=100) == [
        (0, 1),
        (1, 2),
    ]
    with pytest.raises(ConfigError):
        split_for_batch_size(None, values, max_batch_bytes=61)
    with pytest.raises(ConfigError):
        split_for_batch_size(None, values, max_batch_bytes=1000, max_records=0)
    assert split_for_batch_size(None, pa.array([], pa.binary()), max_batch_bytes=100) == []


def test_record_sizes_are_exact_for_one_batch_without_spread():
    values = pa.array([b"v" * 100] * 50)
    keys = pa.array([b"k" * 10] * 50)
    raw = encode_batch(keys, values, timestamps_ms=TS)
    sizes = record_sizes(keys, values, timestamps_ms=TS)
    # offset deltas are bounded by the largest (49: one byte); so the bound is exact here
    assert int(sizes.sum()) + 61 == len(raw)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(1, (1 << 40) - 1), max_size=30),
    st.integers(0, 1 << 45),
    st.integers(0, 1 << 31),
)
def test_sizes_in_batch_adds_the_deltas_and_the_length_prefix(base, ts_span, n):
    """Each record's bound: its base size, the varints of the largest timestamp and offset
    deltas, and the varint of the resulting body length, counted as varint_sizes counts."""
    base_sizes = np.array(base, dtype=np.int64)
    deltas = varint_sizes(zigzag_encode(np.array([ts_span, max(n - 1, 0)], dtype=np.int64)))
    body = base_sizes + int(deltas.sum())
    expect = body + varint_sizes(zigzag_encode(body))
    assert sizes_in_batch(base_sizes, ts_span, n).tolist() == expect.tolist()
