"""The registry formats at their edges (issue 33), without a broker or Spark: Arrow batches
decoded and encoded as the tasks do, against the tests' in-memory registry.

- a null ``__value_schema_id`` header is one corrupt record, handled by ``mode``;
- the JSON and Protobuf sinks write empty maps, decimals, NaN and infinities as valid
  JSON / as protobuf's JSON mapping says, and the writer honours ``keyMessageName``;
- registry failover leaves time for the second URL; unknown ids are remembered as missing
  for a while (bounded); planning fetches each version of a subject once."""

from __future__ import annotations

import decimal
import json
import socket
import time

import pyarrow as pa
import pytest

from kafka_common.option_map import OptionMap
from kafka_common.schema_registry import RegistryClient, RegistryError, registry_settings
from kafka_common.schema_registry.framing import BAD, OK, read_frames
from kafka_source.options import parse_reader_options
from kafka_common.value_formats.decoding import ValueDecodeError, decode_formats
from kafka_common.value_formats import resolve_formats


HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
RECORD = {"type": "record", "name": "R", "fields": [{"name": "n", "type": "long"}]}


def _formats(registry, topic="t", **options):
    opts = parse_reader_options(
        {
            "kafka.bootstrap.servers": "127.0.0.1:1",
            "subscribe": topic,
            "schema.registry.url": registry.url,
            "valueFormat": "avro",
            **options,
        }
    )
    return resolve_formats(opts.formats)


def _batch(values, headers=None, first_offset=40):
    n = len(values)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(values, pa.binary()),
            pa.array(range(first_offset, first_offset + n), pa.int64()),
            pa.array(headers if headers is not None else [None] * n, HEADERS),
        ],
        names=["value", "offset", "headers"],
    )


# ---- a null schema-id header --------------------------------------------------------------


def test_a_null_schema_id_header_is_a_corrupt_record_under_either_mode(registry):
    """Confluent's header carries the id; a null header value (a producer bug, or a tool
    that copies headers) used to raise TypeError in the framing parser and fail the task
    under PERMISSIVE too, naming no record."""
    schema_id = registry.register("t-value", {"schema": json.dumps(RECORD)})["id"]
    good = b"\x00" + schema_id.to_bytes(4, "big") + b"\x02"  # n = 1
    values = [good, b"\x04"]  # n = 2, id in header
    headers = [None, [{"key": "__value_schema_id", "value": None}]]

    frames = read_frames(pa.array(values, pa.binary()), headers=pa.array(headers, HEADERS))
    assert frames.status.tolist() == [OK, BAD]
    assert "__value_schema_id has a null value" in frames.reasons[1]

    permissive = decode_formats(
        _batch(values, headers),
        _formats(registry, mode="PERMISSIVE"),
        topic="t",
        partition=3,
        keep_headers=False,
    )
    assert permissive.column("value").to_pylist() == [{"n": 1}, None]
    assert permissive.column("valueCorruptRecord").to_pylist() == [None, b"\x04"]

    with pytest.raises(
        ValueDecodeError,
        match=r"topic 't' partition 3 offset 41 .*"
        r"__value_schema_id has a null value",
    ):
        decode_formats(
            _batch(values, headers), _formats(registry), topic="t", partition=3, keep_headers=False
        )


# ---- the sinks: maps, decimals, NaN, keyMessageName ---------------------------------------

PROTO = """
syntax = "proto3";
package shop;
message Order {
  map<string, int32> counts = 1;
  string price = 2;
  double ratio = 3;
  double total = 4;
}
message OrderKey { string id = 1; }
"""

ORDER = pa.struct(
    [
        ("counts", pa.map_(pa.string(), pa.int32())),
        ("price", pa.decimal128(38, 18)),
        ("ratio", pa.float64()),
        ("total", pa.decimal128(20, 2)),
    ]
)
PRICE = decimal.Decimal("12345678901234567890.123456789012345678")  # 38 digits


def _spark_order():
    from pyspark.sql.types import (
        DecimalType,
        DoubleType,
        IntegerType,
        MapType,
        StringType,
        StructField,
        StructType,
    )

    return StructType(
        [
            StructField("counts", MapType(StringType(), IntegerType())),
            StructField("price", DecimalType(38, 18)),
            StructField("ratio", DoubleType()),
            StructField("total", DecimalType(20, 2)),
        ]
    )


def _encode(registry, batch, spark_schema, **options):
    from kafka_common.value_formats.encoding import encode_formats
    from kafka_common.value_formats import parse_writer_formats, resolve_sink_formats

    opts = OptionMap({"schema.registry.url": registry.url, **options})
    formats = resolve_sink_formats(parse_writer_formats(opts, "orders"), spark_schema)
    return encode_formats(batch, formats)


def _orders(rows):
    return pa.RecordBatch.from_arrays([pa.array(rows, ORDER)], names=["value"])


ROWS = [
    {"counts": [], "price": PRICE, "ratio": float("nan"), "total": decimal.Decimal("0.10")},
    {
        "counts": [("a", 1)],
        "price": decimal.Decimal("-0.000000000000000001"),
        "ratio": float("inf"),
        "total": decimal.Decimal("99999999999999999.99"),
    },
    {"counts": None, "price": None, "ratio": float("-inf"), "total": None},
]


def test_json_sink_writes_valid_json_exactly(registry):
    """An empty map is ``{}`` (was ``[]``, an array where the schema says object); a
    decimal keeps all its digits (went through float); NaN and the infinities are the
    strings Spark's to_json writes (were bare NaN / Infinity: not JSON)."""
    from pyspark.sql.types import StructField, StructType

    spark_schema = StructType([StructField("value", _spark_order())])
    out = (
        _encode(
            registry,
            _orders(ROWS),
            spark_schema,
            valueFormat="json",
            **{"auto.register.schemas": "true"},
        )
        .column(0)
        .to_pylist()
    )
    texts = [v[5:].decode() for v in out]

    def strict(text):  # Python's json.loads accepts bare NaN; JSON does not
        return json.loads(
            text,
            parse_constant=lambda c: pytest.fail(f"bare {c} in {text}"),
            parse_float=decimal.Decimal,
        )

    docs = [strict(t) for t in texts]
    assert texts[0] == (
        '{"counts":{},"price":12345678901234567890.123456789012345678,"ratio":"NaN","total":0.10}'
    )
    assert docs[0]["price"] == PRICE
    assert docs[1] == {
        "counts": {"a": 1},
        "price": decimal.Decimal("-0.000000000000000001"),
        "ratio": "Infinity",
        "total": decimal.Decimal("99999999999999999.99"),
    }
    assert docs[2] == {"counts": None, "price": None, "ratio": "-Infinity", "total": None}

    # Without decimals in the type, rows go through json.dumps unless they hold a NaN.
    from pyspark.sql.types import DoubleType, IntegerType, MapType, StringType

    plain = StructType(
        [
            StructField(
                "value",
                StructType(
                    [
                        StructField("counts", MapType(StringType(), IntegerType())),
                        StructField("ratio", DoubleType()),
                    ]
                ),
            )
        ]
    )
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(
                [{"counts": [], "ratio": 0.5}, {"counts": [("a", 1)], "ratio": float("nan")}],
                pa.struct([("counts", pa.map_(pa.string(), pa.int32())), ("ratio", pa.float64())]),
            )
        ],
        names=["value"],
    )
    out = (
        _encode(registry, batch, plain, valueFormat="json", **{"auto.register.schemas": "true"})
        .column(0)
        .to_pylist()
    )
    assert [v[5:].decode() for v in out] == [
        '{"counts":{},"ratio":0.5}',
        '{"counts":{"a":1},"ratio":"NaN"}',
    ]


def test_json_sink_output_reads_back_with_the_connector_s_json_reader(registry):
    """What the JSON sink writes, read back with a DDL reader schema: the decimal exact,
    the quoted NaN and infinities as the numbers."""
    import math
    from pyspark.sql.types import StructField, StructType

    spark_schema = StructType([StructField("value", _spark_order())])
    out = (
        _encode(
            registry,
            _orders(ROWS),
            spark_schema,
            valueFormat="json",
            **{"auto.register.schemas": "true"},
        )
        .column(0)
        .to_pylist()
    )
    opts = parse_reader_options(
        {
            "kafka.bootstrap.servers": "127.0.0.1:1",
            "subscribe": "orders",
            "valueFormat": "json",
            "valueSchema": "counts MAP<STRING, INT>, price DECIMAL(38, "
            "18), ratio DOUBLE, total DECIMAL(20, 2)",
        }
    )
    back = decode_formats(
        _batch([v[5:] for v in out]),
        resolve_formats(opts.formats),
        topic="orders",
        partition=0,
        keep_headers=False,
    )
    rows = back.column("value").to_pylist()
    assert [r["price"] for r in rows] == [PRICE, decimal.Decimal("-0.000000000000000001"), None]
    assert rows[0]["counts"] == [] and rows[1]["counts"] == [("a", 1)]
    assert (
        math.isnan(rows[0]["ratio"])
        and rows[1]["ratio"] == float("inf")
        and rows[2]["ratio"] == float("-inf")
    )


def test_protobuf_sink_writes_empty_maps_decimals_and_nan(registry, tmp_path):
    """An empty map used to fail the task (protobuf's ParseDict got ``[]`` for a map), as
    did NaN (ParseDict refuses a bare float NaN); a decimal goes into a string field with
    every digit and into a double field as the nearest double."""
    from google.protobuf import message_factory

    from kafka_common.protobuf import message_descriptor
    from pyspark.sql.types import StructField, StructType

    spark_schema = StructType([StructField("value", _spark_order())])
    out = _encode(
        registry,
        _orders(ROWS),
        spark_schema,
        valueFormat="protobuf",
        valueSchema=PROTO,
        **{"auto.register.schemas": "true"},
    )
    order = message_factory.GetMessageClass(message_descriptor(PROTO, name="shop.Order"))
    msgs = [order.FromString(v[6:]) for v in out.column(0).to_pylist()]
    assert [dict(m.counts) for m in msgs] == [{}, {"a": 1}, {}]
    assert msgs[0].price == "12345678901234567890.123456789012345678"
    assert msgs[1].price == "-0.000000000000000001"
    assert msgs[0].ratio != msgs[0].ratio  # NaN
    assert (msgs[1].ratio, msgs[2].ratio) == (float("inf"), float("-inf"))
    assert (msgs[0].total, msgs[1].total) == (0.1, 99999999999999999.99)


def test_writer_honours_key_message_name(registry):
    """``keyMessageName`` picks the key's message, as ``valueMessageName`` does the
    value's; it used to be passed over, so keys were written as the first message."""
    from google.protobuf import message_factory

    from kafka_common.protobuf import message_descriptor
    from pyspark.sql.types import StringType, StructField, StructType

    spark_schema = StructType([StructField("key", StructType([StructField("id", StringType())]))])
    batch = pa.RecordBatch.from_arrays(
        [pa.array([{"id": "o-1"}], pa.struct([("id", pa.string())]))], names=["key"]
    )
    out = (
        _encode(
            registry,
            batch,
            spark_schema,
            keyFormat="protobuf",
            keySchema=PROTO,
            keyMessageName="shop.OrderKey",
            **{"auto.register.schemas": "true"},
        )
        .column(0)
        .to_pylist()[0]
    )
    schema_id = registry.subjects["orders-key"][-1]
    assert out[:7] == b"\x00" + schema_id.to_bytes(4, "big") + b"\x02\x02"  # index [1]
    key_cls = message_factory.GetMessageClass(message_descriptor(PROTO, name="OrderKey"))
    assert key_cls.FromString(out[7:]).id == "o-1"


# ---- the registry client and planning -----------------------------------------------------


def test_failover_leaves_time_for_the_second_url(registry):
    """A first URL that accepts connections and never answers took the whole
    schema.registry.timeout.ms, so the second (working) URL was never asked."""
    registry.register("s-value", {"schema": json.dumps(RECORD)})
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    dead.listen(8)  # connects, then silence
    try:
        client = RegistryClient(
            registry_settings(
                OptionMap(
                    {
                        "schema.registry.url": f"http://127.0.0.1:{dead.getsockname()[1]},"
                        f"{registry.url}",
                        "schema.registry.timeout.ms": "1600",
                    }
                )
            )
        )
        began = time.monotonic()
        assert client.schema_by_id(1).id == 1
        # ~0.8 s on the dead URL (its share of 1.6 s), then an answer: had the dead URL
        # taken the whole timeout, the call above would have failed
        assert time.monotonic() - began < 10
    finally:
        dead.close()


def test_unknown_ids_cost_one_registry_call_not_one_per_batch(registry):
    """Under PERMISSIVE, values that merely start with byte 0 carry made-up ids; each
    used to cost a registry call in every batch."""
    registry.register("t-value", {"schema": json.dumps(RECORD)})
    formats = _formats(registry, mode="PERMISSIVE")
    bogus = [b"\x00" + (1000 + i).to_bytes(4, "big") + b"xx" for i in range(5)]
    registry.reset_calls()
    for _ in range(3):
        out = decode_formats(_batch(bogus), formats, topic="t", partition=0, keep_headers=False)
        assert out.column("valueCorruptRecord").to_pylist() == bogus
    assert sorted(path for _, path in registry.calls("/schemas/ids/")) == [
        f"/schemas/ids/{1000 + i}" for i in range(5)
    ]


def test_the_missing_schema_cache_expires_and_is_bounded():
    from kafka_common.schema_registry.client import _MissingSchemas

    now = [0.0]
    missing = _MissingSchemas(ttl_s=10, limit=3, clock=lambda: now[0])
    error = RegistryError("schema id 7 not found", status=404, error_code=40403)
    missing.remember(("id", 7), error)
    again = missing.error_for(("id", 7))
    assert again is not error and str(again) == str(error) and again.status == 404
    now[0] = 10.0
    assert missing.error_for(("id", 7)) is None and len(missing) == 0  # expired
    for i in range(5):
        missing.remember(("id", i), error)
    assert len(missing) == 3 and missing.error_for(("id", 0)) is None  # oldest dropped
    assert missing.error_for(("id", 4)) is not None


def test_planning_fetches_each_version_once_and_the_schema_call_none(registry):
    """Spark asks the data source for its schema at load() and for a reader when the
    query is planned: the first fetched every version of the subject as well, and the
    second fetched them all again (and the latest a second time)."""
    from pyspark_pykafka import KafkaDataSource

    for n in range(3):
        registry.register(
            "t-value",
            {
                "schema": json.dumps(
                    {
                        **RECORD,
                        "fields": RECORD["fields"]
                        + [{"name": f"f{i}", "type": "int", "default": 0} for i in range(n)],
                    }
                )
            },
        )
    source = KafkaDataSource(
        {
            "kafka.bootstrap.servers": "127.0.0.1:1",
            "subscribe": "t",
            "valueFormat": "avro",
            "schema.registry.url": registry.url,
        }
    )
    registry.reset_calls()
    schema = source.schema()
    assert registry.calls() == [("GET", "/subjects/t-value/versions/latest")]
    registry.reset_calls()
    reader = source.reader(schema)
    assert sorted(path for _, path in registry.calls()) == [
        "/subjects/t-value/versions",
        "/subjects/t-value/versions/1",
        "/subjects/t-value/versions/2",
        "/subjects/t-value/versions/3",
    ]
    value = reader.options.formats.value
    assert [w[0] for w in value.writers] == [1, 2, 3] and value.reader_id == 3
    assert value.reader_schema == value.writers[-1][2]


def test_rows_turn_every_nested_map_into_a_dict_as_pyarrow_does():
    """``arrow_json.rows`` (the one place the sinks turn maps into objects, by the Arrow
    type, not by looking at the entries) against pyarrow's own ``maps_as_pydicts``."""
    from kafka_common.arrow_json import rows

    t = pa.list_(
        pa.struct(
            [
                (
                    "m",
                    pa.map_(
                        pa.string(), pa.map_(pa.int32(), pa.list_(pa.map_(pa.string(), pa.int8())))
                    ),
                ),
                ("x", pa.int8()),
            ]
        )
    )
    values = [
        [
            {"m": [("a", [(1, [[("z", 1)], [], None]), (2, None)]), ("b", [])], "x": 1},
            {"m": None, "x": 2},
            None,
        ],
        None,
        [],
    ]
    array = pa.array(values, t)
    assert rows(array) == array.to_pylist(maps_as_pydicts="strict")
    assert rows(array)[0][0]["m"]["b"] == {}
    flat = pa.array([{"x": 1}], pa.struct([("x", pa.int8())]))
    assert rows(flat) == [{"x": 1}]
