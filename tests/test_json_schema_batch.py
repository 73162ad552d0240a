"""The JSON decoder's pure path, whole batch at a time (``json_schema.batch``: one parse of
all payloads, a column at a time) against the same path row by row: the same array, the
same bad rows and reasons for every batch, and the batches it must not take declined."""

from __future__ import annotations

import decimal
import json
import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from kafka_common.json_schema import decoder as decoder_module
from kafka_common.json_schema.batch import StructColumns, parse_all
from kafka_common.json_schema.decoder import Decoder

TYPE = pa.struct(
    [
        ("id", pa.int64()),
        ("sensor", pa.string()),
        ("value", pa.float64()),
        ("ok", pa.bool_()),
        ("n32", pa.int32()),
        ("inner", pa.struct([("x", pa.int64()), ("s", pa.string())])),
        ("tags", pa.list_(pa.string())),
    ]
)
HEADER = struct.pack(">bI", 0, 0x4E614E2C)  # an id whose bytes spell "NaN,"


def framed(payloads: list[bytes], header: bytes = HEADER):
    return pa.array([header + p for p in payloads], pa.binary()), [len(header)] * len(payloads)


def batch_and_rows(payloads: list[bytes], atype: pa.DataType = TYPE, header: bytes = HEADER):
    """(whether the batch lane took it, its decode, the row-by-row decode)."""
    values, starts = framed(payloads, header)
    lane = Decoder(atype, compiled=False)
    docs = parse_all(values, starts, lane.loads_all)
    taken = docs is not None and StructColumns(atype).build(docs) is not None
    rows = Decoder(atype, compiled=False)
    rows.columns = None  # row by row only
    return taken, lane.decode(values, starts), rows.decode(values, starts)


def same(a, b):
    assert a[0].equals(b[0]), (a[0].to_pylist(), b[0].to_pylist())
    assert a[1].tolist() == b[1].tolist() and a[2] == b[2]


def test_a_clean_batch_is_parsed_once_and_reads_as_row_by_row():
    payloads = [
        json.dumps(
            {
                "id": i - 5,
                "sensor": None if i == 3 else f'sensor-{i}\\u00e9 "q" ,], [',
                "value": [i / 7, i, None, "Infinity", "-INF"][i % 5],
                "ok": bool(i & 1),
                "inner": None if i % 3 else {"x": i, "s": 5, "other": [1, {"y": 2}]},
                "tags": ["a", 1, {"b": [True]}] if i % 2 else None,
                "extra": {"z": 1},
            }
        ).encode()
        for i in range(50)
    ] + [b"{}", b' {"value": Infinity, "id": -0} ', b'{"inner": {}, "ID": 3, "\\u0069d": 7}']
    taken, lane, rows = batch_and_rows(payloads)
    assert taken
    same(lane, rows)
    assert not lane[1].any()
    assert lane[0].to_pylist()[51]["value"] == float("inf")


@pytest.mark.parametrize(
    "payloads",
    [
        # not whole JSON on their own, yet joined they would make as many rows
        [b'{"inner": [{}', b"{}]}", b"{},{}"],
        [b'{"tags": ["a"', b'"b"]}', b'{"id": 1}, {"id": 2}'],
        [b'{"tags": ["a"', b'"b"]}', b"{}, {}, {}"],  # 2n - 1 elements, a sentinel in a list
        [b'{"sensor": "a', b'b"}', b"{}, {}"],
        [b"{", b"}"],
        [b"{}", b""],
    ],
)
def test_payloads_that_are_not_whole_on_their_own_are_left_to_the_rows(payloads):
    taken, lane, rows = batch_and_rows(payloads)
    assert not taken
    same(lane, rows)
    assert lane[1].tolist() == [p != b"{}" for p in payloads]  # bad on their own


@pytest.mark.parametrize(
    "odd",
    [
        b'{"sensor": "NaN"}',  # the sentinel's text in a payload
        b'{"value": NaN}',
        b"null",
        b"[1]",
        b"5",
        b'"text"',
        b'{"id": 1.0}',
        b'{"id": true}',
        b'{"id": 9223372036854775808}',
        b'{"n32": 2147483648}',
        b'{"value": true}',
        b'{"value": "1.5"}',
        b'{"ok": 1}',
        b'{"inner": 5}',
        b'{"tags": "a"}',
        b'{"sensor": "\\ud800"}',
        '{"sensor": "é"}'.encode(),
        b'{"id": 1,}',
    ],
)
def test_a_batch_with_an_odd_row_is_left_to_the_rows_with_the_same_answer(odd):
    payloads = [b'{"id": 1, "sensor": "a"}', odd, b'{"id": 2}']
    taken, lane, rows = batch_and_rows(payloads)
    assert not taken
    values, starts = framed(payloads)
    answer = Decoder(TYPE, compiled=False).decode(values, starts)
    if odd == b'{"value": NaN}':  # NaN != NaN for Arrow's equals
        assert answer[0].to_pylist()[1]["value"] != answer[0].to_pylist()[1]["value"]
        return
    same(answer, rows)


def test_what_the_columns_take_unchanged_and_what_they_convert():
    payloads = [
        b'{"id": -7, "value": 3, "sensor": 1.0E20, "tags": [1e-5]}',
        b'{"id": 7, "value": 2.5, "sensor": [true, null], "n32": -2147483648}',
    ]
    taken, lane, rows = batch_and_rows(payloads)
    assert taken
    same(lane, rows)
    got = lane[0].to_pylist()
    assert got[0]["value"] == 3.0 and got[0]["sensor"] == "1.0E20"
    assert got[0]["tags"] == ["1.0E-5"] and got[1]["sensor"] == "[true,null]"


def test_decimals_and_plain_json_without_a_header():
    atype = pa.struct([("d", pa.decimal128(5, 2)), ("f", pa.float64())])
    payloads = [b'{"d": 1.005, "f": 0.1}', b'{"d": "2.5", "f": 1}']
    taken, lane, rows = batch_and_rows(payloads, atype)
    assert taken
    same(lane, rows)
    assert lane[0].to_pylist()[0] == {"d": decimal.Decimal("1.01"), "f": 0.1}
    taken, lane, rows = batch_and_rows(payloads, atype, header=b"")  # no header: rows
    assert not taken
    same(lane, rows)


def test_null_values_and_other_roots_go_row_by_row():
    values = pa.array([HEADER + b"{}", None], pa.binary())
    lane = Decoder(TYPE, compiled=False)
    assert parse_all(values, [5, 0], lane.loads_all) is None
    array, errors, _ = lane.decode(values, [5, 0])
    assert array.to_pylist() == [dict.fromkeys(TYPE.names), None] and not errors.any()
    assert Decoder(pa.list_(pa.int64()), compiled=False).columns is None


_ASCII = st.text(st.characters(min_codepoint=1, max_codepoint=0x7F), max_size=12)
_ANY = st.none() | st.booleans() | st.integers(-(2**64), 2**64) | st.floats() | _ASCII
_DOC = st.fixed_dictionaries(
    {},
    optional={
        "id": _ANY,
        "sensor": _ANY | st.lists(st.integers(), max_size=2),
        "value": _ANY,
        "ok": st.none() | st.booleans() | st.integers(0, 1),
        "n32": st.none() | st.integers(-(2**32), 2**32),
        "inner": st.none() | st.fixed_dictionaries({}, optional={"x": _ANY, "s": _ANY}),
        "tags": st.none() | st.lists(_ANY, max_size=3),
    },
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_DOC | st.sampled_from([None, 1, [], "x"]), min_size=1, max_size=8))
def test_whatever_the_batch_reads_the_rows_read_the_same(docs):
    payloads = [json.dumps(d).encode() for d in docs]
    taken, lane, rows = batch_and_rows(payloads)
    if any(p != p for p in _floats(docs)):
        return  # NaN: equal, but not for Arrow's equals
    same(lane, rows)
    if taken:
        assert not rows[1].any()


def _floats(value):
    if isinstance(value, float):
        yield value
    elif isinstance(value, dict):
        for x in value.values():
            yield from _floats(x)
    elif isinstance(value, list):
        for x in value:
            yield from _floats(x)


def test_a_batch_of_many_chunks_names_its_bad_rows_where_they_are():
    n = decoder_module._CHUNK * 2 + 10
    bad = {decoder_module._CHUNK + 3, decoder_module._CHUNK * 2 + 9}  # not the first chunk
    payloads = [b'{"id": 1.5}' if i in bad else b'{"id": %d}' % i for i in range(n)]
    values, starts = framed(payloads)
    values = pa.concat_arrays([framed([b"{}"])[0], values]).slice(1)  # not at offset 0
    taken, lane, rows = batch_and_rows(payloads)
    got = Decoder(TYPE, compiled=False).decode(values, starts)
    same(got, rows)
    assert sorted(got[2]) == sorted(bad) and np.flatnonzero(got[1]).tolist() == sorted(bad)
    assert got[0].to_pylist()[n - 2]["id"] == n - 2
