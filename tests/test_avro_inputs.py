"""The shapes of input the Decoder and Encoder take: empty, sliced and chunked columns,
large_binary, a ``(buffer, offsets)`` pair, null rows, Confluent-framed rows with starts."""

import json

import numpy as np
import pyarrow as pa

from kafka_common.avro import Decoder, Encoder, arrow_type, parse_schema

SCHEMA = parse_schema(
    json.dumps(
        {
            "type": "record",
            "name": "R",
            "fields": [
                {"name": "a", "type": "long"},
                {"name": "b", "type": {"type": "array", "items": "string"}},
                {"name": "m", "type": {"type": "map", "values": "int"}},
            ],
        }
    )
)
T = arrow_type(SCHEMA)
ROWS = [{"a": i * 1000003, "b": ["x"] * i, "m": [("k", i)]} for i in range(6)]
BLOBS = Encoder(SCHEMA).encode(pa.array(ROWS, T))


def test_empty_columns():
    arr, errors = Decoder(SCHEMA).decode(pa.array([], pa.binary()))
    assert len(arr) == 0 and arr.type == T and errors.shape == (0,)
    assert len(Encoder(SCHEMA).encode(pa.array([], T))) == 0


def test_sliced_chunked_large_and_raw_buffers_read_alike():
    d = Decoder(SCHEMA)
    offsets = np.frombuffer(BLOBS.buffers()[1], np.int32)
    for values, expected in [
        (BLOBS.slice(2, 3), ROWS[2:5]),
        (pa.chunked_array([BLOBS.slice(0, 2), BLOBS.slice(2)]), ROWS),
        (BLOBS.cast(pa.large_binary()), ROWS),
        ((BLOBS.buffers()[2], offsets), ROWS),
    ]:
        arr, errors = d.decode(values)
        assert arr.to_pylist() == expected and not errors.any()
    # a sliced column written: the bytes of those rows only
    sliced = Encoder(SCHEMA).encode(pa.array(ROWS, T).slice(3, 2))
    assert sliced.to_pylist() == BLOBS.slice(3, 2).to_pylist()


def test_null_rows_and_framed_rows():
    d = Decoder(SCHEMA)
    framed = pa.array([None, b"\x00\x00\x00\x00\x01" + BLOBS[1].as_py(), None])
    arr, errors = d.decode(framed, np.array([5, 5, 5]))
    assert arr.to_pylist() == [None, ROWS[1], None] and not errors.any()
