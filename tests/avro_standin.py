"""A thin fastavro-based stand-in for ``kafka_common.avro`` (the columnar Avro codec built
on another branch), used by the registry tests only until that package is present:
``install()`` puts it in ``sys.modules`` when ``kafka_common.avro`` cannot be imported.
It is never shipped. It covers the type mapping the registry tests use (records,
primitives, nullable unions, enums, arrays, maps, dates, timestamps)."""

from __future__ import annotations

import io
import json
import sys
import types

import numpy as np
import pyarrow as pa


def parse_schema(text_or_obj, named=None):
    import fastavro
    obj = json.loads(text_or_obj) if isinstance(text_or_obj, str) else text_or_obj
    return fastavro.parse_schema(obj, named_schemas=named if named is not None else {})


def arrow_type(schema, options=None) -> pa.DataType:
    return _arrow(schema)[0]


def _arrow(s):
    if isinstance(s, str):
        return {"null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(),
                "long": pa.int64(), "float": pa.float32(), "double": pa.float64(),
                "bytes": pa.binary(), "string": pa.string()}[s], True
    if isinstance(s, list):
        rest = [b for b in s if b != "null"]
        assert len(rest) == 1, "stand-in: only [null, X] unions"
        return _arrow(rest[0])[0], True
    logical = s.get("logicalType")
    if logical == "date":
        return pa.date32(), True
    if logical in ("timestamp-millis", "timestamp-micros"):
        return pa.timestamp("us", tz="UTC"), True
    kind = s["type"]
    if kind == "record":
        return pa.struct([pa.field(f["name"], _arrow(f["type"])[0]) for f in s["fields"]]), True
    if kind == "enum":
        return pa.string(), True
    if kind == "array":
        return pa.list_(_arrow(s["items"])[0]), True
    if kind == "map":
        return pa.map_(pa.string(), _arrow(s["values"])[0]), True
    if kind == "fixed":
        return pa.binary(), True
    return _arrow(kind)


class Decoder:
    def __init__(self, writer_schema, reader_schema, options=None):
        self.writer, self.reader = writer_schema, reader_schema
        self.type = arrow_type(reader_schema)

    def decode(self, binary_array, starts):
        import fastavro
        rows, errors = [], np.zeros(len(binary_array), bool)
        for i, (value, start) in enumerate(zip(binary_array.to_pylist(), starts)):
            if value is None:
                rows.append(None)
                continue
            try:
                buf = io.BytesIO(value[int(start):])
                row = fastavro.schemaless_reader(buf, self.writer, self.reader)
                if buf.tell() != len(value) - int(start):
                    raise ValueError("trailing bytes")
                rows.append(_maps(row))
            except Exception:
                errors[i] = True
                rows.append(None)
        return pa.array(rows, self.type), errors


def _maps(v):
    if isinstance(v, dict):
        return {k: _maps(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_maps(x) for x in v]
    return v


class Encoder:
    def __init__(self, schema):
        self.schema = schema

    def encode(self, array: pa.Array) -> pa.BinaryArray:
        import fastavro
        out = []
        for row in array.to_pylist():
            if row is None:
                out.append(None)
                continue
            if isinstance(row, list):  # map as a list of pairs
                row = dict(row)
            buf = io.BytesIO()
            fastavro.schemaless_writer(buf, self.schema, row)
            out.append(buf.getvalue())
        return pa.array(out, pa.binary())


def install() -> bool:
    """Use the stand-in when the real package is missing; True when it was installed."""
    try:
        import kafka_common.avro as real
        if hasattr(real, "Decoder"):
            return False
    except ImportError:
        pass
    module = types.ModuleType("kafka_common.avro")
    for name in ("parse_schema", "arrow_type", "Decoder", "Encoder"):
        setattr(module, name, globals()[name])
    sys.modules["kafka_common.avro"] = module
    import kafka_common
    kafka_common.avro = module
    return True
