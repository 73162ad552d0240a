"""Message sets of magic 0 and 1, with a reference encoder written here from the old guide."""

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import CorruptRecordError
from protocol.records import compression as C
from protocol.records import decode_records
from protocol.records import legacy as L
from protocol.records.batch import CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP_TYPE, Record
from .helpers.golden_legacy import GOLDEN_V0, GOLDEN_V1, TS, message, wrapper


# ---- reference encoder ---------------------------------------------------------------------


def rows(batch):
    return [(r["offset"], r["key"], r["value"], r["timestampType"]) for r in batch.to_pylist()]


# ---- tests ---------------------------------------------------------------------------------


def test_golden_v1_and_v0():
    assert message(7, None, b"abc", magic=1, timestamp=TS) == GOLDEN_V1
    assert message(8, b"k", b"hi", magic=0) == GOLDEN_V0
    assert L.decode_entry(GOLDEN_V1, 0) == ([Record(7, TS, None, b"abc", (), CREATE_TIME)], 7)
    assert L.decode_entry(GOLDEN_V0, 0) == ([Record(8, -1, b"k", b"hi", (), NO_TIMESTAMP_TYPE)], 8)
    batch, nxt = decode_records(GOLDEN_V1 + GOLDEN_V0, topic="old", partition=0, start_offset=0)
    out = batch.to_pylist()
    assert [(r["offset"], r["key"], r["value"], r["timestampType"]) for r in out] == [
        (7, None, b"abc", 0),
        (8, b"k", b"hi", -1),
    ]
    # magic 0 has no timestamp: -1 ms, as the Java consumer reports it
    assert batch.column("timestamp").cast("int64").to_pylist() == [TS * 1000, -1000]
    assert nxt == 9


@pytest.mark.parametrize("codec", [C.GZIP, C.SNAPPY, C.LZ4])
@pytest.mark.parametrize("magic", [0, 1])
def test_compressed_wrapper(codec, magic):
    inner = [(100 + i, TS + i, b"k%d" % i, b"value %d" % i) for i in range(5)]
    raw = wrapper(inner, magic=magic, codec=codec)
    recs, last = L.decode_entry(raw, 0)
    assert last == 104
    assert [(r.offset, r.key, r.value) for r in recs] == [(o, k, v) for o, _, k, v in inner]
    if magic == 1:
        assert [r.timestamp for r in recs] == [t for _, t, _, _ in inner]
        assert {r.timestamp_type for r in recs} == {CREATE_TIME}
    else:
        assert {r.timestamp_type for r in recs} == {NO_TIMESTAMP_TYPE}


def test_v1_wrapper_log_append_time_applies_wrapper_timestamp():
    inner = [(10, TS, None, b"a"), (11, TS + 1, None, b"b")]
    raw = wrapper(inner, magic=1, codec=C.GZIP, timestamp=TS + 500, log_append=True)
    recs, _ = L.decode_entry(raw, 0)
    assert [(r.timestamp, r.timestamp_type) for r in recs] == [(TS + 500, LOG_APPEND_TIME)] * 2


def test_v1_relative_offsets_follow_the_wrapper_offset():
    # after compaction the wrapper offset can be past the last inner message's
    inner = [(0, TS, None, b"a"), (1, TS, None, b"b")]
    raw = wrapper(inner, magic=1, codec=C.GZIP, wrapper_offset=50)
    recs, last = L.decode_entry(raw, 0)
    assert [r.offset for r in recs] == [49, 50] and last == 50


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda: message(1, None, b"x", magic=1, timestamp=TS, crc=1), "CRC"),
        (lambda: message(1, None, b"x", magic=1, timestamp=TS, attributes=5), "codec"),
        (lambda: message(1, None, None, magic=1, timestamp=TS, attributes=C.GZIP), "null"),
        (
            lambda: message(
                1,
                None,
                C.compress("gzip", wrapper([(0, TS, None, b"x")], magic=1, codec=C.GZIP)),
                magic=1,
                timestamp=TS,
                attributes=C.GZIP,
            ),
            "nested",
        ),
        (
            lambda: message(
                1, None, C.compress("gzip", b"\x00" * 7), magic=1, timestamp=TS, attributes=C.GZIP
            ),
            "inside a message",
        ),
    ],
)
def test_corrupt_messages(bad, match):
    raw = bad()
    with pytest.raises(CorruptRecordError, match=match):
        decode_records(raw, topic="t", partition=0, start_offset=0)


@pytest.mark.parametrize(
    "pos, value, match",
    [
        (18, 1000, "key length"),  # keyLength past the message
        (18, -2, "key length"),
        (23, 5, "value length"),  # valueLength past the message
        (23, 1, "after its value"),  # a message longer than its fields
        (8, 13, "minimum"),  # messageSize below the smallest message
    ],
)
def test_length_fields_are_checked(pos, value, match):
    raw = bytearray(GOLDEN_V0)
    struct.pack_into(">i", raw, pos, value)
    struct.pack_into(">I", raw, 12, zlib.crc32(bytes(raw[16:])))
    with pytest.raises(CorruptRecordError, match=match):
        decode_records(
            bytes(raw[: 12 + max(13, struct.unpack_from(">i", raw, 8)[0])]),
            topic="t",
            partition=0,
            start_offset=0,
        )


def test_truncated_trailing_message_is_ignored():
    data = GOLDEN_V1 + GOLDEN_V0
    for cut in range(len(GOLDEN_V1), len(data)):
        batch, nxt = decode_records(data[:cut], topic="t", partition=0, start_offset=0)
        assert batch.column("offset").to_pylist() == [7] and nxt == 8


message_st = st.tuples(
    st.none() | st.binary(max_size=30), st.none() | st.binary(max_size=200), st.integers(0, 1 << 42)
)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.lists(message_st, min_size=1, max_size=6), min_size=1, max_size=6),
    st.sampled_from([0, 1]),
    st.sampled_from([0, C.GZIP, C.SNAPPY, C.LZ4]),
    st.integers(0, 1 << 40),
)
def test_round_trip_through_decode_records(groups, magic, codec, first):
    data, expected, offset = b"", [], first
    for group in groups:
        recs = []
        for key, value, ts in group:
            recs.append((offset, ts if magic else -1, key, value))
            offset += 1
        if codec:
            data += wrapper(recs, magic=magic, codec=codec)
        else:
            data += b"".join(message(o, k, v, magic=magic, timestamp=t) for o, t, k, v in recs)
        expected += recs
    batch, nxt = decode_records(data, topic="t", partition=0, start_offset=first)
    got = batch.to_pylist()
    assert [(r["offset"], r["key"], r["value"]) for r in got] == [
        (o, k, v) for o, _, k, v in expected
    ]
    assert [r["timestampType"] for r in got] == [0 if magic else -1] * len(expected)
    assert batch.column("timestamp").cast("int64").to_pylist() == [
        t * 1000 for _, t, _, _ in expected
    ]
    assert nxt == offset
