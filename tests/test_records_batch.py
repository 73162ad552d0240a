"""Record batch v2: golden bytes written by hand from the layout, the reference codec, CRC-32C."""

import importlib
import os
import struct
import subprocess
import sys
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import CorruptRecordError
from protocol.records import batch as B
from protocol.records import checksum
from protocol.records import reference_decode as R
from .helpers.golden_batches import GOLDEN_V2, TS
from .helpers.record_builders import build_control_batch


GOLDEN_RECORDS = [
    B.Record(16, TS, b"k", b"v1", ()),
    B.Record(17, TS + 5, None, b"vv", (("h", b"x"),)),
]


def test_header_layout_constants():
    assert B.BATCH_HEADER_SIZE == 61 == B.HEADER_STRUCT.size
    offsets = [
        B.BASE_OFFSET_OFFSET,
        B.BATCH_LENGTH_OFFSET,
        B.PARTITION_LEADER_EPOCH_OFFSET,
        B.MAGIC_OFFSET,
        B.CRC_OFFSET,
        B.ATTRIBUTES_OFFSET,
        B.LAST_OFFSET_DELTA_OFFSET,
        B.BASE_TIMESTAMP_OFFSET,
        B.MAX_TIMESTAMP_OFFSET,
        B.PRODUCER_ID_OFFSET,
        B.PRODUCER_EPOCH_OFFSET,
        B.BASE_SEQUENCE_OFFSET,
        B.RECORD_COUNT_OFFSET,
        B.RECORDS_OFFSET,
    ]
    sizes = [8, 4, 4, 1, 4, 2, 4, 8, 8, 8, 2, 4, 4]
    assert [b - a for a, b in zip(offsets, offsets[1:])] == sizes
    assert (
        B.COMPRESSION_MASK,
        B.TIMESTAMP_TYPE_MASK,
        B.TRANSACTIONAL_MASK,
        B.CONTROL_MASK,
        B.DELETE_HORIZON_MASK,
    ) == (0x07, 0x08, 0x10, 0x20, 0x40)


def test_golden_crc_is_crc32c_of_attributes_to_end():
    assert checksum.crc32c(GOLDEN_V2[21:]) == 0x411909E5
    assert checksum.crc32c_python(GOLDEN_V2[21:]) == 0x411909E5


def test_crc32c_known_vector():
    assert checksum.crc32c(b"123456789") == 0xE3069283
    assert checksum.crc32c_python(b"123456789") == 0xE3069283
    assert checksum.crc32c_python(b"6789", checksum.crc32c_python(b"12345")) == 0xE3069283


def test_decode_golden():
    h, records = R.decode_batch(GOLDEN_V2)
    assert h.base_offset == 16 and h.batch_length == 72 and h.record_count == 2
    assert h.last_offset_delta == 1 and h.size == len(GOLDEN_V2)
    assert h.compression == 0 and h.timestamp_type == B.CREATE_TIME
    assert h.attributes == 0 and h.producer_id == -1
    assert records == GOLDEN_RECORDS


def test_encode_golden():
    assert B.build_batch(GOLDEN_RECORDS, partition_leader_epoch=0) == GOLDEN_V2


def test_attribute_bits():
    raw = B.build_batch(
        [B.Record(0, TS, None, b"x")],
        timestamp_type=B.LOG_APPEND_TIME,
        transactional=True,
        control=True,
        delete_horizon=True,
        producer_id=7,
        producer_epoch=1,
        compression="gzip",
    )
    h = B.parse_header(raw)
    assert h.attributes == 0x01 | 0x08 | 0x10 | 0x20 | 0x40
    assert h.compression == 1 and h.timestamp_type == 1 and h.producer_id == 7


def test_log_append_time_uses_max_timestamp():
    raw = B.build_batch(
        [B.Record(0, TS, None, b"a"), B.Record(1, TS + 9, None, b"b")],
        timestamp_type=B.LOG_APPEND_TIME,
        max_timestamp=TS + 100,
    )
    _, recs = R.decode_batch(raw)
    assert [r.timestamp for r in recs] == [TS + 100, TS + 100]
    assert {r.timestamp_type for r in recs} == {B.LOG_APPEND_TIME}


def test_control_record_helpers():
    raw = build_control_batch(B.ABORT, offset=5, producer_id=9, coordinator_epoch=3)
    h, recs = R.decode_batch(raw)
    assert h.attributes == B.CONTROL_MASK | B.TRANSACTIONAL_MASK and h.producer_id == 9
    assert B.control_type(recs[0].key) == B.ABORT
    assert recs[0].value == struct.pack(">hi", 0, 3)
    assert B.control_type(b"\x00") is None


def test_iter_batches_stops_at_truncation():
    two = GOLDEN_V2 + B.build_batch([B.Record(18, TS, b"a", b"b")])
    assert [(p, o, m) for p, o, _, m in B.iter_batches(two)] == [
        (0, 16, 2),
        (len(GOLDEN_V2), 18, 2),
    ]
    assert len(list(B.iter_batches(two[:-1]))) == 1


@pytest.mark.parametrize("tail", [b"", b"\x02"])  # the length's bytes there or cut short
def test_iter_batches_rejects_a_length_below_the_magic_byte(tail):
    raw = GOLDEN_V2 + struct.pack(">qi", 18, 3) + tail
    with pytest.raises(CorruptRecordError, match="length 3 is too small.*'t', partition 2"):
        list(B.iter_batches(raw, "t", 2))


@pytest.mark.parametrize(
    "pos, value, message",
    [
        (B.MAGIC_OFFSET, b"\x03", "magic"),
        (B.CRC_OFFSET, b"\x00\x00\x00\x00", "CRC"),
        (B.RECORD_COUNT_OFFSET, struct.pack(">i", -1), "negative"),
        (B.RECORD_COUNT_OFFSET, struct.pack(">i", 1000), "1000 records"),
        (B.ATTRIBUTES_OFFSET, b"\x00\x07", "codec"),
        (B.LAST_OFFSET_DELTA_OFFSET, struct.pack(">i", 0), "last offset delta"),
        (B.BATCH_LENGTH_OFFSET, struct.pack(">i", 10), "length"),
    ],
)
def test_reference_decoder_rejects_bad_header(pos, value, message):
    raw = bytearray(GOLDEN_V2)
    raw[pos : pos + len(value)] = value
    if pos not in (B.CRC_OFFSET, B.BATCH_LENGTH_OFFSET, B.MAGIC_OFFSET):
        struct.pack_into(">I", raw, B.CRC_OFFSET, checksum.crc32c(bytes(raw[21:])))
    with pytest.raises(CorruptRecordError, match=message):
        R.decode_batch(bytes(raw))


def test_fallback_crc_warns_once(monkeypatch):
    monkeypatch.setattr(checksum, "_crc32c_native", None)
    monkeypatch.setattr(checksum, "_warned_slow_crc", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert checksum.crc32c(b"123456789") == 0xE3069283
        assert checksum.crc32c(GOLDEN_V2[21:]) == 0x411909E5
    assert len([w for w in caught if "crc32c" in str(w.message)]) == 1
    h, recs = R.decode_batch(GOLDEN_V2)
    assert recs == GOLDEN_RECORDS


def test_crc32c_package_is_imported_on_first_use():
    """Importing the records code does not import the crc32c package (its import scans
    sys.path, slow in Spark's processes); the first CRC does."""
    code = (
        "import sys, protocol.records, protocol.records.batch, protocol.records.checksum as c; "
        "assert 'crc32c' not in sys.modules; c.crc32c(b'123456789'); "
        "assert 'crc32c' in sys.modules; print('ok')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )
    assert out.stdout.strip() == "ok", out.stderr


def test_module_imports_without_crc32c_package(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "crc32c":
            raise ImportError("no crc32c")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    try:
        mod = importlib.reload(checksum)
        with pytest.warns(RuntimeWarning, match="crc32c"):
            assert mod.crc32c(b"123456789") == 0xE3069283
        assert mod._crc32c_native is None
    finally:
        monkeypatch.setattr(builtins, "__import__", real_import)
        importlib.reload(checksum)


headers_st = st.lists(
    st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3
).map(tuple)
record_st = st.tuples(
    st.none() | st.binary(max_size=40),
    st.none() | st.binary(max_size=300),
    headers_st,
    st.integers(-(1 << 40), 1 << 40),
    st.integers(1, 3),
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(record_st, min_size=1, max_size=20),
    st.integers(0, 1 << 50),
    st.sampled_from(["none", "gzip", "snappy", "lz4", "zstd"]),
)
def test_reference_round_trip(rows, base_offset, codec):
    records, offset = [], base_offset
    for key, value, headers, ts_delta, gap in rows:
        records.append(B.Record(offset, TS + ts_delta, key, value, headers))
        offset += gap
    raw = B.build_batch(records, compression=codec)
    h, decoded = R.decode_batch(raw)
    assert decoded == records
    assert h.base_offset + h.last_offset_delta == records[-1].offset
