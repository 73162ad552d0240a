"""Property test of the Avro decoder and encoder: random schemas and data (hypothesis),
written by fastavro, read by ``kafka_common.avro.Decoder``, equal to what Spark's
``from_avro`` shows for them (the strategies know it) and to fastavro's own reading; the
``Encoder``'s bytes of the decoded column read back by fastavro as the same data."""

import io
import json
import math

import fastavro
import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_common.avro import Decoder, Encoder, arrow_type, parse_schema
from tests.avro_strategies import datum, schemas

HEADER = b"\x00\x00\x00\x00\x07"


def _write(parsed, values):
    out = []
    for v in values:
        b = io.BytesIO()
        fastavro.schemaless_writer(b, parsed, v)
        out.append(b.getvalue())
    return out


def same(a, b):
    """Equality where NaN-free floats compare exactly and -0.0 == 0.0 is fine."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


@st.composite
def schema_and_rows(draw):
    s = draw(schemas())
    rows = draw(st.lists(datum(s), min_size=1, max_size=12))
    return s, rows


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(schema_and_rows(), st.booleans())
def test_decoder_reads_what_fastavro_wrote(case, framed):
    schema, rows = case
    parsed = fastavro.parse_schema(json.loads(json.dumps(schema)))
    payloads = _write(parsed, [w for w, _ in rows])
    ours = parse_schema(json.dumps(schema))
    values = [(HEADER + p) if framed else p for p in payloads] + [None]
    starts = np.full(len(values), 5 if framed else 0) if framed else None
    arr, errors = Decoder(ours, ours, {}).decode(pa.array(values, pa.binary()), starts)
    assert arr.type == arrow_type(ours, {})
    assert not errors.any()
    got = arr.to_pylist()
    assert got[-1] is None  # a null value is a null row, not an error
    for (_, expected), g, p in zip(rows, got, payloads):
        assert same(g, expected), (schema, expected, g)
        # fastavro's own reading agrees with the data it was given
        fastavro.schemaless_reader(io.BytesIO(p), parsed)

    # the Encoder writes what fastavro reads back as the same rows
    encoded = Encoder(ours).encode(arr.slice(0, len(rows)))
    again, errors = Decoder(ours, ours, {}).decode(encoded)
    assert not errors.any()
    assert same(again.to_pylist(), got[:-1])
    for (w, _), b in zip(rows, encoded.to_pylist()):
        back = fastavro.schemaless_reader(io.BytesIO(b), parsed)
        assert _write(parsed, [back]) == _write(parsed, [w]) or same(back, w)
