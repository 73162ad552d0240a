"""The JSON decoder's compiled path (Arrow's JSON reader over a whole batch) against its
pure path (the ``json`` module row by row): the same array for every batch it takes, and
the batches it must leave to the pure path left (None), so that bad rows are still named
one by one."""

from __future__ import annotations

import json
import struct

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from kafka_common.json_schema.compiled import compiles, read_rows
from kafka_common.json_schema.decoder import Decoder

TYPE = pa.struct(
    [
        ("id", pa.int64()),
        ("sensor", pa.string()),
        ("value", pa.float64()),
        ("ok", pa.bool_()),
        ("n32", pa.int32()),
        ("inner", pa.struct([("x", pa.int64()), ("s", pa.string())])),
    ]
)
HEADER = struct.pack(">bI", 0, 0x80FF0A0D)  # an id whose bytes are a newline, \r and non-ASCII


def framed(payloads: list[bytes]) -> tuple[pa.Array, list[int]]:
    return pa.array([HEADER + p for p in payloads], pa.binary()), [len(HEADER)] * len(payloads)


def both(payloads: list[bytes]):
    values, starts = framed(payloads)
    pure = Decoder(TYPE, compiled=False).decode(values, starts)
    return read_rows(values, starts, TYPE), pure


def test_a_clean_batch_takes_the_compiled_path_and_reads_as_the_pure_one():
    payloads = [
        json.dumps(
            {
                "id": i - 5,
                "sensor": f'sensor-{i}\\u00e9 "q"',
                "value": i / 7,
                "ok": bool(i & 1),
                "inner": None if i % 3 else {"x": i, "s": "a\tb", "other": [1, {"y": 2}]},
                "extra": {"z": 1},
            }
        ).encode()
        for i in range(50)
    ] + [b"{}", b'{"value": 5, "id": -0}', b'{"inner": {}, "ID": 3, "\\u0069d": 7}']
    fast, (array, errors, reasons) = both(payloads)
    assert fast is not None
    assert not errors.any() and reasons == {}
    assert fast.equals(array)
    values, starts = framed(payloads)
    decoded, errs, _ = Decoder(TYPE).decode(values, starts)  # the default takes it
    assert decoded.equals(array) and not errs.any()


@pytest.mark.parametrize(
    "odd",
    [
        b"null",  # Arrow's reader crashes on a first value null: never handed one
        b" {}",
        b"{} ",
        b"{}null{}",
        b"{} {}",
        b'{"id": 1}\n',
        b'{"id": 1,\n"ok": true}',
        b'{"id": 1,\r"ok": true}',
        b"[1]",
        b"5",
        b"",
        b'{"sensor": 5}',
        b'{"sensor": true}',
        b'{"id": 1.0}',
        b'{"id": 1e3}',
        b'{"id": 9223372036854775808}',
        b'{"n32": 2147483648}',
        b'{"n32": -2147483649}',
        b'{"ok": 1}',
        b'{"ok": "true"}',
        b'{"id": 1, "id": 2}',
        b'{"inner": {"x": 1, "x": 2}}',
        b'{"inner": 5}',
        b'{"value": 1e400}',
        b'{"sensor": "\\ud800"}',
        '{"sensor": "é"}'.encode(),
        b'{"sensor": "a\xff"}',
        b'{"id": 01}',
        b"{'id': 1}",
        b'{"id": 1,}',
        b'{"id": 1',
    ],
)
def test_a_batch_with_one_odd_payload_is_left_to_the_pure_path(odd):
    payloads = [b'{"id": 1, "sensor": "a"}', odd, b'{"id": 2}']
    fast, (array, errors, _) = both(payloads)
    assert fast is None
    values, starts = framed(payloads)
    decoded, errs, _ = Decoder(TYPE).decode(values, starts)
    assert decoded.equals(array) and (errs == errors).all()


def test_nulls_other_types_and_unframed_values_go_the_pure_way():
    values, starts = framed([b"{}", b"{}"])
    assert read_rows(pa.array([HEADER + b"{}", None], pa.binary()), [5, 0], TYPE) is None
    assert read_rows(values, [0, 0], TYPE) is None  # plain JSON: no header to split on
    assert read_rows(values, [5, 4], TYPE) is None
    assert read_rows(values.cast(pa.large_binary()), starts, TYPE) is None
    assert compiles(TYPE)
    for t in (pa.int8(), pa.timestamp("us", "UTC"), pa.list_(pa.int64()), pa.decimal128(5, 2)):
        assert not compiles(pa.struct([("a", t)]))
    assert not compiles(pa.int64())


_ASCII = st.text(st.characters(min_codepoint=1, max_codepoint=0x7F), max_size=12)
_DOC = st.fixed_dictionaries(
    {},
    optional={
        "id": st.none() | st.integers(-(2**63), 2**63 - 1),
        "sensor": st.none() | _ASCII | st.text(max_size=4),
        "value": st.none()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.integers(-(2**70), 2**70),
        "ok": st.none() | st.booleans(),
        "n32": st.none() | st.integers(-(2**32), 2**32),
        "inner": st.none() | st.fixed_dictionaries({}, optional={"x": st.integers(-9, 9)}),
        "other": st.lists(st.integers(), max_size=2),
    },
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_DOC, min_size=1, max_size=8))
def test_whatever_the_compiled_path_reads_the_pure_path_reads_the_same(docs):
    payloads = [json.dumps(d).encode() for d in docs]  # ensure_ascii: \\u escapes
    fast, (array, errors, _) = both(payloads)
    if fast is not None:
        assert not errors.any()
        assert fast.equals(array), (fast.to_pylist(), array.to_pylist())


def test_a_lone_surrogate_is_a_bad_row_not_a_failed_batch():
    values, starts = framed([b'{"sensor": "\\ud800"}', b'{"sensor": "ok"}'])
    array, errors, reasons = Decoder(TYPE).decode(values, starts)
    assert errors.tolist() == [True, False]
    assert "does not fit" in reasons[0]
    assert array.to_pylist()[1]["sensor"] == "ok" and array.to_pylist()[0] is None
