"""decode_records: the vectorised Fetch decoder, against the reference codec and hand-made
batches: schema, cut-offs, truncation, corruption, transactions, legacy mixing."""

import os
import random
import struct

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.errors import ConfigError, CorruptRecordError, ProtocolError
from protocol.records import batch as B
from protocol.records import checksum
from protocol.records import reference_decode as R
from protocol.records import decode_arrow as D
from protocol.records import decode_records, spark_schema

from .helpers.golden_batches import GOLDEN_V2, TS
from .helpers.decoder_paths import decoder_path  # noqa: F401 (autouse: both decoders)
from .helpers.golden_legacy import GOLDEN_V0, GOLDEN_V1, wrapper
from .helpers.record_builders import build_control_batch

TOPIC, PART = "events", 3


def decode(data, start=0, **kw):
    kw.setdefault("topic", TOPIC)
    kw.setdefault("partition", PART)
    return decode_records(data, start_offset=start, **kw)


def rows(batch):
    """(offset, key, value, timestamp ms, timestampType, headers) per row."""
    col = {
        name: batch.column(name).to_pylist() for name in batch.schema.names if name != "timestamp"
    }
    ts = batch.column("timestamp").cast(pa.int64()).to_pylist()
    out = []
    for i in range(batch.num_rows):
        h = None
        if "headers" in col:
            h = col["headers"][i]
            h = tuple((x["key"], x["value"]) for x in h) if h else ()
        out.append(
            (
                col["offset"][i],
                col["key"][i],
                col["value"][i],
                ts[i] // 1000,
                col["timestampType"][i],
                h,
            )
        )
    return out


def expected_rows(records, headers=True):
    return [
        (
            r.offset,
            r.key,
            r.value,
            r.timestamp,
            r.timestamp_type,
            tuple(r.headers) if headers else None,
        )
        for r in records
    ]


def make_batch(offsets, *, value_size=20, headers=False, seed=0, **kw):
    rnd = random.Random(seed)
    recs = [
        B.Record(
            o,
            TS + rnd.randrange(-1000, 1000),
            None if rnd.random() < 0.2 else rnd.randbytes(rnd.randrange(0, 12)),
            None if rnd.random() < 0.1 else rnd.randbytes(value_size),
            ((f"h{o}", None if o % 2 else b"v"),) if headers else (),
        )
        for o in offsets
    ]
    return B.build_batch(recs, **kw), recs


# ---- shape ---------------------------------------------------------------------------------


def test_golden_batch_rows_and_schema():
    batch, nxt = decode(GOLDEN_V2, include_headers=True)
    assert batch.schema == spark_schema(True)
    assert batch.schema.names == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    assert rows(batch) == [
        (16, b"k", b"v1", TS, 0, ()),
        (17, None, b"vv", TS + 5, 0, (("h", b"x"),)),
    ]
    assert batch.column("topic").to_pylist() == [TOPIC] * 2
    assert batch.column("partition").to_pylist() == [PART] * 2
    assert batch.column("headers").to_pylist()[0] is None  # Spark: null when no headers
    assert nxt == 18


def test_schema_types():
    s = spark_schema(False)
    assert [f.type for f in s] == [
        pa.binary(),
        pa.binary(),
        pa.string(),
        pa.int32(),
        pa.int64(),
        D.TIMESTAMP_TYPE,
        pa.int32(),
    ]
    assert D.TIMESTAMP_TYPE.unit == "us"
    assert spark_schema(True).field("headers").type.value_type == pa.struct(
        [("key", pa.string()), ("value", pa.binary())]
    )


def test_without_headers_column():
    batch, _ = decode(GOLDEN_V2)
    assert batch.schema == spark_schema(False)
    assert batch.num_rows == 2


@pytest.mark.parametrize("data", [b"", None, bytearray(), memoryview(b"")])
def test_empty_input(data):
    batch, nxt = decode(data, start=42, include_headers=True)
    assert batch.num_rows == 0 and batch.schema == spark_schema(True) and nxt == 42


def test_accepts_memoryview_and_bytearray():
    for data in (bytearray(GOLDEN_V2), memoryview(GOLDEN_V2), memoryview(b"xx" + GOLDEN_V2)[2:]):
        batch, nxt = decode(data)
        assert batch.num_rows == 2 and nxt == 18


def test_bad_arguments():
    with pytest.raises(ConfigError):
        decode(GOLDEN_V2, topic=b"t")
    with pytest.raises(ConfigError):
        decode(GOLDEN_V2, max_decompressed=0)


# ---- offsets -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "start, end, expect",
    [
        (0, None, list(range(100, 110)) + list(range(110, 115))),
        (103, None, list(range(103, 115))),
        (103, 112, list(range(103, 112))),
        (110, 111, [110]),
        (109, 110, [109]),
        (200, None, []),
    ],
)
def test_start_and_end_cut_mid_batch(start, end, expect):
    b1, _ = make_batch(range(100, 110))
    b2, _ = make_batch(range(110, 115), compression="lz4")
    batch, nxt = decode(b1 + b2, start=start, end_offset=end)
    assert batch.column("offset").to_pylist() == expect
    assert nxt == max(start, 115 if end is None else min(115, end))


def test_batches_at_or_after_end_offset_are_not_consumed():
    b1, _ = make_batch(range(0, 5))
    b2, _ = make_batch(range(5, 10))
    batch, nxt = decode(b1 + b2, end_offset=5)
    assert batch.column("offset").to_pylist() == [0, 1, 2, 3, 4] and nxt == 5


def test_compacted_gaps_and_next_offset():
    raw, recs = make_batch([10, 12, 13, 19], last_offset_delta=12)  # last offset 22
    batch, nxt = decode(raw)
    assert batch.column("offset").to_pylist() == [10, 12, 13, 19] and nxt == 23


def test_empty_batch_advances_next_offset():
    empty = B.build_batch([], base_offset=50, last_offset_delta=4)
    batch, nxt = decode(empty, start=50)
    assert batch.num_rows == 0 and nxt == 55


def test_batch_entirely_before_start_is_skipped_but_counted():
    b1, _ = make_batch(range(0, 5))
    b2, _ = make_batch(range(5, 8))
    batch, nxt = decode(b1 + b2, start=6)
    assert batch.column("offset").to_pylist() == [6, 7] and nxt == 8


def test_log_append_time():
    raw = B.build_batch(
        [B.Record(0, TS, None, b"a"), B.Record(1, TS + 7, None, b"b")],
        timestamp_type=B.LOG_APPEND_TIME,
        max_timestamp=TS + 99,
    )
    batch, _ = decode(raw)
    assert [(r[3], r[4]) for r in rows(batch)] == [(TS + 99, 1), (TS + 99, 1)]


def test_negative_timestamp_deltas_and_ancient_timestamps():
    recs = [B.Record(0, 5, None, b"a"), B.Record(1, -3, None, b"b"), B.Record(2, 0, b"", b"")]
    batch, _ = decode(B.build_batch(recs))
    assert rows(batch) == expected_rows(recs, headers=False)


# ---- headers -------------------------------------------------------------------------------


def test_headers_with_null_values_and_many_headers():
    recs = [
        B.Record(0, TS, None, b"a", ()),
        B.Record(1, TS, None, b"b", (("a", None), ("b", b""), ("", b"x"))),
        B.Record(2, TS, b"k", None, tuple((f"k{i}", b"%d" % i) for i in range(40))),
    ]
    batch, _ = decode(B.build_batch(recs), include_headers=True)
    assert rows(batch) == expected_rows(recs)
    assert batch.column("headers").to_pylist()[0] is None


def test_invalid_utf8_header_key_is_replaced():
    out = bytearray()
    B.encode_record(out, 0, 0, None, b"v", [(b"\xff\xfe", b"x")])
    raw = B.build_batch([])  # patch a record section into an empty batch
    h = B.parse_header(raw)
    body = bytes(out)
    hdr = bytearray(raw[:61])
    struct.pack_into(">i", hdr, 8, 49 + len(body))
    struct.pack_into(">i", hdr, 57, 1)
    struct.pack_into(">i", hdr, 23, 0)
    data = bytes(hdr) + body
    data = data[:17] + struct.pack(">I", checksum.crc32c(data[21:])) + data[21:]
    batch, _ = decode(data, include_headers=True)
    assert batch.column("headers").to_pylist() == [[{"key": "\ufffd\ufffd", "value": b"x"}]]
    assert h.record_count == 0


# ---- transactions --------------------------------------------------------------------------


def txn_batch(offsets, pid, **kw):
    recs = [B.Record(o, TS, None, b"p%d-%d" % (pid, o)) for o in offsets]
    return B.build_batch(
        recs, transactional=True, producer_id=pid, producer_epoch=0, base_sequence=0, **kw
    )


def marker(kind, offset, pid):
    return build_control_batch(kind, offset=offset, producer_id=pid)


def test_read_committed_drops_aborted_transactions():
    data = (
        txn_batch([0, 1], pid=1)  # pid 1: aborted at 4
        + txn_batch([2, 3], pid=2)  # pid 2: committed at 5
        + marker(B.ABORT, 4, pid=1)
        + marker(B.COMMIT, 5, pid=2)
        + txn_batch([6, 7], pid=1)  # pid 1 again: a new transaction, committed at 8
        + marker(B.COMMIT, 8, pid=1)
        + make_batch([9, 10])[0]
    )  # not transactional
    aborted = [(1, 0)]
    batch, nxt = decode(data, read_committed=True, aborted_transactions=aborted)
    assert batch.column("offset").to_pylist() == [2, 3, 6, 7, 9, 10]
    assert nxt == 11
    batch, nxt = decode(data)  # read_uncommitted: everything but the markers
    assert batch.column("offset").to_pylist() == [0, 1, 2, 3, 6, 7, 9, 10]
    assert nxt == 11


def test_read_committed_aborted_list_order_does_not_matter():
    data = (
        txn_batch([0], pid=7)
        + txn_batch([1], pid=8)
        + marker(B.ABORT, 2, pid=8)
        + marker(B.ABORT, 3, pid=7)
    )
    batch, nxt = decode(data, read_committed=True, aborted_transactions=[(8, 1), (7, 0)])
    assert batch.num_rows == 0 and nxt == 4


def test_aborted_transaction_starting_later_does_not_drop_earlier_batches():
    data = txn_batch([0, 1], pid=3) + marker(B.COMMIT, 2, pid=3) + txn_batch([3], pid=3)
    batch, _ = decode(data, read_committed=True, aborted_transactions=[(3, 3)])
    assert batch.column("offset").to_pylist() == [0, 1]


def test_control_batches_are_skipped_and_advance_next_offset():
    data = marker(B.COMMIT, 0, pid=1) + marker(B.ABORT, 1, pid=2)
    for committed in (False, True):
        batch, nxt = decode(data, read_committed=committed)
        assert batch.num_rows == 0 and nxt == 2


def test_control_record_with_short_key_is_corrupt_under_read_committed():
    bad = B.build_batch(
        [B.Record(0, TS, b"\x00", b"")], control=True, transactional=True, producer_id=1
    )
    assert decode(bad)[0].num_rows == 0  # read_uncommitted never looks inside
    with pytest.raises(CorruptRecordError, match="control record"):
        decode(bad, read_committed=True)


# ---- truncation and corruption -------------------------------------------------------------


def two_batches(codec="gzip"):
    b1, r1 = make_batch(range(0, 6), headers=True, seed=1)
    b2, r2 = make_batch(range(6, 9), headers=True, seed=2, compression=codec)
    return b1, r1, b2, r2


def test_every_truncation_point():
    b1, r1, b2, r2 = two_batches()
    data = b1 + b2
    for cut in range(len(data) + 1):
        try:
            batch, nxt = decode(data[:cut], include_headers=True)
        except CorruptRecordError:
            continue  # e.g. a cut inside a batch-length field leaving a tiny length
        got = rows(batch)
        if cut < len(b1):
            assert got == [] and nxt == 0
        elif cut < len(data):
            assert got == expected_rows(r1) and nxt == 6
        else:
            assert got == expected_rows(r1 + r2) and nxt == 9


@pytest.mark.parametrize(
    "field, pos, value, match",
    [
        ("batch length", B.BATCH_LENGTH_OFFSET, struct.pack(">i", 3), "too small"),
        ("batch length", B.BATCH_LENGTH_OFFSET, struct.pack(">i", 40), "smaller than its header"),
        ("magic", B.MAGIC_OFFSET, b"\x07", "magic"),
        ("crc", B.CRC_OFFSET, b"\xde\xad\xbe\xef", "CRC"),
        ("attributes", B.ATTRIBUTES_OFFSET, b"\x00\x06", "codec"),
        ("record count", B.RECORD_COUNT_OFFSET, struct.pack(">i", -5), "negative"),
        ("record count", B.RECORD_COUNT_OFFSET, struct.pack(">i", 3), "holds 3 records"),
        ("record count", B.RECORD_COUNT_OFFSET, struct.pack(">i", 1), "bytes after"),
        ("record count", B.RECORD_COUNT_OFFSET, struct.pack(">i", 1 << 30), "records"),
        ("last offset delta", B.LAST_OFFSET_DELTA_OFFSET, struct.pack(">i", -1), "last offset"),
    ],
)
def test_corrupt_header_fields(field, pos, value, match):
    raw = bytearray(GOLDEN_V2)
    raw[pos : pos + len(value)] = value
    if field not in ("crc", "magic", "batch length"):
        struct.pack_into(">I", raw, B.CRC_OFFSET, checksum.crc32c(bytes(raw[21:])))
    with pytest.raises(CorruptRecordError, match=match) as info:
        decode(bytes(raw))
    assert info.value.topic == TOPIC and info.value.partition == PART


def test_verify_crc_false_skips_only_the_crc():
    v2 = bytearray(GOLDEN_V2)
    v2[B.CRC_OFFSET : B.CRC_OFFSET + 4] = b"\x00\x00\x00\x00"
    legacy = bytearray(GOLDEN_V0)
    legacy[12:16] = b"\x00\x00\x00\x00"
    marker = bytearray(build_control_batch(B.ABORT, offset=18, producer_id=1))
    marker[B.CRC_OFFSET] ^= 0xFF
    data = bytes(legacy) + bytes(v2) + bytes(marker)
    for kw in ({}, {"read_committed": True}):
        with pytest.raises(CorruptRecordError, match="CRC"):
            decode(data, **kw)
        batch, nxt = decode(data, verify_crc=False, **kw)
        assert batch.column("offset").to_pylist() == [8, 16, 17] and nxt == 19
    v2[B.RECORD_COUNT_OFFSET + 3] = 9  # the other checks stay
    with pytest.raises(CorruptRecordError, match="9 records"):
        decode(bytes(v2), verify_crc=False)


def _resign(raw: bytearray) -> bytes:
    struct.pack_into(">I", raw, B.CRC_OFFSET, checksum.crc32c(bytes(raw[21:])))
    return bytes(raw)


@pytest.mark.parametrize(
    "pos, value, match",
    [
        (61, 0x7E, "fill|does not fit|length"),  # record 0 length 63: runs past the batch
        (61, 0x03, "length"),  # record 0 length -2
        (61, 0x10, "fit|fields|length"),  # record 0 length 8: one byte short
        (64, 0x04, "offset delta"),  # record 0 offset delta 2 > last offset delta 1
        (74, 0x00, "offset delta|increasing"),  # record 1 offset delta 0: not increasing
        (65, 0x7E, "key length|fit"),  # record 0 key length 63
        (65, 0x05, "key length|fit"),  # record 0 key length -3
        (67, 0x7E, "value length|fit"),  # record 0 value length 63
        (79, 0x7E, "header count|fit"),  # record 1 header count 63
        (79, 0x00, "end|fields|bytes"),  # record 1 header count 0: header bytes left over
        (80, 0x7E, "header key|fit"),  # record 1 header key length 63
        (82, 0x05, "header value|fit"),  # record 1 header value length -3
    ],
)
def test_corrupt_record_fields(pos, value, match):
    raw = bytearray(GOLDEN_V2)
    raw[pos] = value
    with pytest.raises(CorruptRecordError, match=match) as info:
        decode(_resign(raw), include_headers=True)
    assert info.value.offset in (16, 17)  # the batch, or the record when known


def test_corrupt_varints():
    raw = bytearray(GOLDEN_V2)
    raw[63] = 0xFF  # record 0 timestamp delta: continuation into the next bytes
    with pytest.raises(CorruptRecordError):
        decode(_resign(raw))


def test_record_count_impossible_for_compressed_size():
    raw = bytearray(B.build_batch([B.Record(0, TS, None, b"x" * 10)], compression="zstd"))
    struct.pack_into(">i", raw, B.RECORD_COUNT_OFFSET, 5)
    struct.pack_into(">i", raw, B.LAST_OFFSET_DELTA_OFFSET, 4)
    with pytest.raises(CorruptRecordError, match="claims 5 records"):
        decode(_resign(raw))


def test_decompression_bomb_through_decode():
    recs = [B.Record(i, TS, None, bytes(10000)) for i in range(200)]  # 2 MB of zeros
    raw = B.build_batch(recs, compression="zstd")
    assert len(raw) < 10000
    with pytest.raises(CorruptRecordError, match="more than"):
        decode(raw, max_decompressed=1 << 20)
    assert decode(raw, max_decompressed=4 << 20)[0].num_rows == 200


def test_uncompressed_batch_over_the_cap():
    raw, _ = make_batch(range(100), value_size=1000)
    with pytest.raises(CorruptRecordError):
        decode(raw, max_decompressed=50_000)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_byte_flips_never_escape(data):
    codec = data.draw(st.sampled_from(["none", "gzip", "snappy", "lz4", "zstd"]))
    b1, r1, b2, r2 = two_batches(codec)
    raw = bytearray(b1 + b2)
    flips = data.draw(
        st.lists(
            st.tuples(st.integers(0, len(raw) - 1), st.integers(1, 255)), min_size=1, max_size=4
        )
    )
    resign = data.draw(st.booleans())
    for pos, x in flips:
        raw[pos] ^= x
    if resign:  # get past the CRC to reach the record parser
        p = 0
        while p + 12 <= len(raw):
            length = struct.unpack_from(">i", raw, p + 8)[0]
            if length < 9 or p + 12 + length > len(raw):
                break
            struct.pack_into(
                ">I", raw, p + 17, checksum.crc32c(bytes(raw[p + 21 : p + 12 + length]))
            )
            p += 12 + length
    try:
        batch, nxt = decode(bytes(raw), include_headers=True, max_decompressed=1 << 20)
    except ProtocolError:
        return
    assert isinstance(nxt, int)
    assert batch.schema == spark_schema(True)
    batch.validate(full=True)


def test_byte_flips_with_valid_crc_are_detected_or_harmless():
    """Every single-byte change of a CRC-valid batch: an error, or rows decoded exactly as
    the reference decoder reads the same bytes."""
    b1, _, _, _ = two_batches()
    for pos in range(21, len(b1)):
        for x in (1, 0x80, 0xFF):
            raw = bytearray(b1)
            raw[pos] ^= x
            raw = _resign(raw)
            try:
                ref = R.decode_batch(raw)[1]
            except (ProtocolError, UnicodeDecodeError):
                ref = None
            try:
                batch, _ = decode(raw, include_headers=True)
            except ProtocolError:
                continue
            if ref is not None:
                assert rows(batch) == [r for r in expected_rows(ref) if r[0] >= 0], (pos, x)


# ---- volume and shapes ---------------------------------------------------------------------


def test_many_batches_cross_the_arena_target():
    data, expect, off = [], [], 0
    for i in range(40):
        n = 300 + i
        raw, recs = make_batch(
            range(off, off + n), value_size=200, seed=i, compression=["none", "lz4", "zstd"][i % 3]
        )
        data.append(raw)
        expect += recs
        off += n
    blob = b"".join(data)
    assert len(blob) > 2 * D._ARENA_TARGET
    batch, nxt = decode(blob, include_headers=True)
    assert rows(batch) == expected_rows(expect)
    assert nxt == off


def test_big_records_and_mixed_sizes():
    sizes = [0, 5, 100, 9000, 70000, 3, 100, 100, 100, 200000, 1]
    recs = [
        B.Record(i, TS + i, os.urandom(i % 13) if i % 4 else None, os.urandom(s))
        for i, s in enumerate(sizes)
    ]
    batch, _ = decode(B.build_batch(recs))
    assert rows(batch) == expected_rows(recs, headers=False)


def test_uniform_records_runs():
    recs = [B.Record(i, TS + i // 10, b"k" * 10, bytes([i % 256]) * 100) for i in range(5000)]
    batch, _ = decode(B.build_batch(recs[:2500]) + B.build_batch(recs[2500:]))
    assert rows(batch) == expected_rows(recs, headers=False)


def test_legacy_and_v2_mixed_in_order():
    v2a = B.build_batch([B.Record(9, TS, None, b"v2")])
    legacy = wrapper([(10, TS, None, b"old"), (11, TS, b"k", b"old2")], magic=1, codec=2)
    v2b = B.build_batch([B.Record(12, TS, None, b"new")], compression="snappy")
    data = GOLDEN_V1 + GOLDEN_V0 + v2a + legacy + v2b
    batch, nxt = decode(data, start=8, include_headers=True)
    assert batch.column("offset").to_pylist() == [8, 9, 10, 11, 12]
    assert batch.column("value").to_pylist() == [b"hi", b"v2", b"old", b"old2", b"new"]
    assert batch.column("timestampType").to_pylist() == [-1, 0, 0, 0, 0]
    assert nxt == 13
    batch, nxt = decode(data, start=0, end_offset=11)
    assert batch.column("offset").to_pylist() == [7, 8, 9, 10] and nxt == 11


record_st = st.tuples(
    st.none() | st.binary(max_size=20),
    st.none() | st.binary(max_size=400),
    st.lists(st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=6)), max_size=3).map(
        tuple
    ),
    st.integers(-(1 << 35), 1 << 35),
    st.integers(1, 3),
)


@settings(max_examples=120, deadline=None)
@given(
    st.lists(st.lists(record_st, min_size=0, max_size=12), min_size=1, max_size=5),
    st.sampled_from(["none", "gzip", "snappy", "lz4", "zstd"]),
    st.integers(0, 1 << 45),
    st.booleans(),
    st.data(),
)
def test_matches_reference_decoder(groups, codec, first, log_append, data):
    blob, expect, offset, next_expected = b"", [], first, first
    for group in groups:
        recs = []
        for key, value, headers, ts, gap in group:
            recs.append(B.Record(offset, TS + ts, key, value, headers))
            offset += gap
        if not recs:
            blob += B.build_batch([], base_offset=offset, last_offset_delta=0)
            offset += 1
            next_expected = offset
            continue
        raw = B.build_batch(
            recs,
            compression=codec,
            timestamp_type=B.LOG_APPEND_TIME if log_append else B.CREATE_TIME,
        )
        blob += raw
        expect += R.decode_batch(raw)[1]
        next_expected = recs[-1].offset + 1
    start = data.draw(st.integers(first, offset))
    end = data.draw(st.none() | st.integers(start, offset + 1))
    batch, nxt = decode(blob, start=start, end_offset=end, include_headers=True)
    want = [r for r in expect if r.offset >= start and (end is None or r.offset < end)]
    assert rows(batch) == expected_rows(want)
    batch.validate(full=True)
    if end is None:
        assert nxt == max(start, next_expected)
    else:
        assert start <= nxt <= max(start, end)
