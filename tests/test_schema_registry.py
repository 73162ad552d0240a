"""Schema Registry reading without Spark: the registry client against the test registry
(tests/helpers/schema_registry_server.py, standing in for Confluent's), the framing parser on
what confluent-kafka's serializers write, and ``read_range`` decoding a topic's values
written by confluent-kafka's ``AvroSerializer`` (referee: its ``AvroDeserializer``)."""

from __future__ import annotations

import json
import logging
import warnings

import confluent_kafka
import pytest

from kafka_common.option_map import OptionMap
from kafka_common.schema_registry import (
    RegistryAuthError,
    RegistryClient,
    RegistryError,
    registry_settings,
)
from kafka_source.fetcher import read_range
from kafka_source.offset_specs import OffsetRange
from kafka_source.options import parse_reader_options
from kafka_common.value_formats.decoding import ValueDecodeError
from kafka_common.value_formats import resolve_formats
from protocol.errors import ConfigError

from .helpers.broker_setup import create_topic
from .helpers.schema_registry_server import RegistryServer

warnings.filterwarnings("ignore", module="authlib.*")
from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402
from .helpers.schema_registry import V1, V2, produce  # noqa: E402


def client_for(url, **extra):
    return RegistryClient(registry_settings(OptionMap({"schema.registry.url": url, **extra})))


# ---- the client ---------------------------------------------------------------------------


def test_client_retries_5xx_within_the_timeout_then_fails_and_401_fails_at_once():
    server = RegistryServer(user_info="alice:s3cr3t pass").start()
    try:
        server.register("s-value", {"schema": json.dumps(V1)})
        good = client_for(
            server.url + "," + server.url,
            **{"schema.registry.basic.auth.user.info": "alice:s3cr3t pass"},
        )
        server.fail_next(3, 503)
        assert good.version("s-value", 1).id == 1
        assert len(server.calls("/subjects")) == 4  # 3 failures, then the answer
        server.reset_calls()
        good.version("s-value", 1)
        assert server.calls() == []  # cached: versions never change

        server.fail_next(10_000, 500)
        slow = client_for(
            server.url,
            **{
                "schema.registry.basic.auth.user.info": "alice:s3cr3t pass",
                "schema.registry.timeout.ms": "400",
            },
        )
        with pytest.raises(RegistryError, match="schema.registry.timeout.ms=400") as err:
            slow.schema_by_id(1)
        assert "HTTP 500" in str(err.value)
        server.failures.clear()

        server.reset_calls()
        bad = client_for(server.url, **{"schema.registry.basic.auth.user.info": "alice:wrong"})
        with pytest.raises(RegistryAuthError, match="HTTP 401") as err:
            bad.schema_by_id(1)
        assert len(server.calls()) == 1  # no retry on 401
        for text in (str(err.value), repr(bad), repr(bad.settings), repr(good.settings)):
            assert "s3cr3t" not in text and "wrong" not in text
    finally:
        server.stop()


def test_registry_down_fails_within_the_timeout():
    client = client_for("http://127.0.0.1:9", **{"schema.registry.timeout.ms": "300"})
    with pytest.raises(RegistryError, match="did not answer schema id 3 within"):
        client.schema_by_id(3)


def test_settings_checks_name_the_option():
    with pytest.raises(ConfigError, match="schema.registry.url"):
        registry_settings(OptionMap({"schema.registry.url": "ftp://x"}))
    with pytest.raises(ConfigError, match="without schema.registry.url"):
        registry_settings(OptionMap({"schema.registry.timeout.ms": "5"}))
    with pytest.raises(ConfigError, match="user:password"):
        registry_settings(
            OptionMap(
                {
                    "schema.registry.url": "http://r",
                    "schema.registry.basic.auth.user.info": "nocolon",
                }
            )
        )


# ---- reading a topic ----------------------------------------------------------------------


def read_all(bootstrap, topic, end, start=0, **options):
    opts = parse_reader_options(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, **options}
    )
    import dataclasses

    opts = dataclasses.replace(opts, formats=resolve_formats(opts.formats))
    import pyarrow as pa

    batches = list(read_range(opts, OffsetRange(topic, 0, start, end)))
    return pa.Table.from_batches(batches).to_pylist()


def test_a_topic_s_history_reads_as_one_dataframe_of_the_latest_schema(
    mock_cluster, registry, topic_name
):
    create_topic(mock_cluster, topic_name, 1)
    url = registry.url
    old = [{"id": i, "name": f"n{i}", "score": i * 10} for i in range(3)]
    new = [
        {
            "id": 10 + i,
            "score": 2**40 + i,
            "tier": "PRO",
            "tags": ["a", "b"][:i],
            "email": None if i else "x@y",
        }
        for i in range(3)
    ]
    written = produce(mock_cluster.bootstrap, topic_name, url, V1, old)
    written += produce(mock_cluster.bootstrap, topic_name, url, V2, [None])  # tombstone
    written += produce(mock_cluster.bootstrap, topic_name, url, V2, new)
    written += produce(mock_cluster.bootstrap, topic_name, url, V2, new[:1], header_ids=True)
    assert written[-1][0][:1] != b"\x00" and written[-1][1][0][0] == "__value_schema_id"
    rows = read_all(
        mock_cluster.bootstrap,
        topic_name,
        len(written),
        valueFormat="avro",
        **{"schema.registry.url": url},
    )
    assert list(rows[0]) == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "valueSchemaId",
    ]
    # Referee: confluent-kafka's AvroDeserializer, with V2 as its reader schema.
    sr = SchemaRegistryClient({"url": url})
    from confluent_kafka.schema_registry import Schema

    de = AvroDeserializer(sr, Schema(json.dumps(V2), "AVRO"))
    for row, (value, headers) in zip(rows, written):
        ctx = SerializationContext(topic_name, MessageField.VALUE, headers)
        want = de(value, ctx) if value is not None else None
        if want is not None:
            want["tags"] = list(want["tags"])
        assert row["value"] == want
    assert [r["valueSchemaId"] for r in rows] == [1, 1, 1, None, 2, 2, 2, 2]
    assert rows[0]["value"] == {"id": 0, "score": 0, "tier": "FREE", "tags": [], "email": None}

    # An older reader version: fields V2 removed come back from V1's writers only.
    rows = read_all(
        mock_cluster.bootstrap,
        topic_name,
        3,
        valueFormat="avro",
        valueSchemaVersion="1",
        **{"schema.registry.url": url},
    )
    assert [r["value"] for r in rows] == old


def test_errors_name_topic_partition_offset_and_schema_id(mock_cluster, registry, topic_name):
    create_topic(mock_cluster, topic_name, 1)
    url = registry.url
    good = produce(
        mock_cluster.bootstrap, topic_name, url, V1, [{"id": 1, "name": "a", "score": 1}]
    )
    p = confluent_kafka.Producer({"bootstrap.servers": mock_cluster.bootstrap})
    corrupt = good[0][0][:5] + b"\xff\xff\xff"  # id 1, payload cut short
    for value in (corrupt, b"\x00\x00\x00\x03\xe7\x02", b"plain text"):
        p.produce(topic_name, value=value, partition=0)
    assert p.flush(10) == 0
    options = {"valueFormat": "avro", "schema.registry.url": url}
    with pytest.raises(ValueDecodeError) as err:
        read_all(mock_cluster.bootstrap, topic_name, 4, **options)
    message = str(err.value)
    assert f"topic {topic_name!r} partition 0 offset 1, schema id 1" in message
    assert "PERMISSIVE" in message and "2 more" in message
    with pytest.raises(ValueDecodeError, match="offset 2, schema id 999.*unknown schema id"):
        read_all(mock_cluster.bootstrap, topic_name, 4, start=2, **options)

    rows = read_all(mock_cluster.bootstrap, topic_name, 4, mode="PERMISSIVE", **options)
    assert [r["value"] for r in rows] == [{"id": 1, "name": "a", "score": 1}, None, None, None]
    assert [r["valueCorruptRecord"] for r in rows] == [
        None,
        corrupt,
        b"\x00\x00\x00\x03\xe7\x02",
        b"plain text",
    ]
    assert [r["valueSchemaId"] for r in rows] == [1, 1, 999, None]

    # A registry that is down when an executor meets an id: the task fails, no nulls.
    registry.register(f"{topic_name}-other", {"schema": json.dumps(V2)})  # id 2
    p.produce(topic_name, value=b"\x00\x00\x00\x00\x02\x02", partition=0)
    assert p.flush(10) == 0
    registry.fail_next(10_000, 503)
    with pytest.raises(RegistryError, match="did not answer schema id 2"):
        opts = parse_reader_options(
            {
                "kafka.bootstrap.servers": mock_cluster.bootstrap,
                "subscribe": topic_name,
                "mode": "PERMISSIVE",
                "schema.registry.timeout.ms": "300",
                **options,
            }
        )
        registry.failures.clear()
        import dataclasses

        opts = dataclasses.replace(opts, formats=resolve_formats(opts.formats))
        registry.fail_next(10_000, 503)
        list(read_range(opts, OffsetRange(topic_name, 0, 4, 5)))
    registry.failures.clear()


def test_planning_errors(mock_cluster, registry, topic_name):
    base = {"kafka.bootstrap.servers": "h:1", "schema.registry.url": registry.url}
    with pytest.raises(ConfigError, match="valueSubject is required"):
        parse_reader_options({**base, "subscribe": "a,b", "valueFormat": "avro"})
    with pytest.raises(ConfigError, match="valueFormat must be one of"):
        parse_reader_options({**base, "subscribe": "a", "valueFormat": "xml"})
    with pytest.raises(ConfigError, match="mode must be FAILFAST, PERMISSIVE or DROPMALFORMED"):
        parse_reader_options({**base, "subscribe": "a", "valueFormat": "avro", "mode": "LENIENT"})
    with pytest.raises(ConfigError, match="schema.registry.url is required"):
        parse_reader_options(
            {"kafka.bootstrap.servers": "h:1", "subscribe": "a", "valueFormat": "avro"}
        )
    opts = parse_reader_options({**base, "subscribe": topic_name, "valueFormat": "avro"})
    with pytest.raises(ConfigError, match=f"subject '{topic_name}-value' is not in"):
        resolve_formats(opts.formats)
    registry.register(
        f"{topic_name}-value",
        {"schema": 'syntax = "proto3"; message M {}', "schemaType": "PROTOBUF"},
    )
    with pytest.raises(ConfigError, match="is a PROTOBUF schema, not AVRO"):
        resolve_formats(opts.formats)


def test_key_format_and_an_inline_reader_schema_without_a_registry_subject(
    mock_cluster, registry, topic_name
):
    from confluent_kafka.schema_registry import Schema

    create_topic(mock_cluster, topic_name, 1)
    sr = SchemaRegistryClient({"url": registry.url})
    key_ser = AvroSerializer(sr, '"string"')
    value_ser = AvroSerializer(sr, json.dumps(V1))
    p = confluent_kafka.Producer({"bootstrap.servers": mock_cluster.bootstrap})
    for i in range(3):
        p.produce(
            topic_name,
            partition=0,
            key=key_ser(f"k{i}", SerializationContext(topic_name, MessageField.KEY)),
            value=value_ser(
                {"id": i, "name": "n", "score": i},
                SerializationContext(topic_name, MessageField.VALUE),
            ),
        )
    assert p.flush(10) == 0
    # The reader schema given inline: V1 with one field dropped and one added.
    reader = {**V1, "fields": [V1["fields"][0], {"name": "note", "type": "string", "default": "-"}]}
    rows = read_all(
        mock_cluster.bootstrap,
        topic_name,
        3,
        keyFormat="avro",
        valueFormat="avro",
        valueSchema=json.dumps(reader),
        **{"schema.registry.url": registry.url},
    )
    assert [(r["key"], r["value"], r["keySchemaId"], r["valueSchemaId"]) for r in rows] == [
        (f"k{i}", {"id": i, "note": "-"}, 1, 2) for i in range(3)
    ]
    de = AvroDeserializer(sr, Schema(json.dumps(reader), "AVRO"))
    assert de(
        value_ser(
            {"id": 5, "name": "n", "score": 1}, SerializationContext(topic_name, MessageField.VALUE)
        ),
        SerializationContext(topic_name, MessageField.VALUE),
    ) == {"id": 5, "note": "-"}


def test_bearer_token_is_sent_and_never_shown():
    server = RegistryServer(bearer_token="tok-123").start()
    try:
        server.register("s-value", {"schema": json.dumps(V1)})
        good = client_for(server.url, **{"schema.registry.bearer.auth.token": "tok-123"})
        assert good.schema_by_id(1).schema_type == "AVRO"
        bad = client_for(server.url, **{"schema.registry.bearer.auth.token": "tok-999"})
        with pytest.raises(RegistryAuthError) as err:
            bad.versions("s-value")
        assert "tok-" not in str(err.value) + repr(bad.settings) + repr(good.settings)
    finally:
        server.stop()


@pytest.mark.parametrize(
    "option, secret",
    [
        ("schema.registry.basic.auth.user.info", "alice: s3cr3t-pass "),
        ("schema.registry.bearer.auth.token", "tok-s3cr3t-123"),
    ],
)
def test_a_registry_echoing_the_credentials_never_gets_them_into_errors_or_logs(
    option, secret, caplog
):
    """Issue 39: the registry's secret options (option_map.SECRET_OPTIONS) stay out of every
    error and log line, also when a registry, or a proxy before it, echoes the
    Authorization header and what it decodes to in its answers: a 503 (logged while the
    client waits) then a 401 (the error)."""
    import base64
    import http.server
    import threading

    class Echo(http.server.BaseHTTPRequestHandler):
        answers = iter([503, 401])

        def do_GET(self):
            header = self.headers.get("Authorization", "")
            decoded = header.split(" ", 1)[-1]
            if header.startswith("Basic "):
                decoded = base64.b64decode(decoded).decode()
            body = json.dumps(
                {
                    "error_code": 40101,
                    "message": f"refused {header!r} for "
                    f"{decoded!r}, password {decoded.partition(':')[2]!r}",
                }
            )
            self.send_response(next(self.answers, 401))
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    caplog.set_level(logging.DEBUG, logger="pykafka")
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(RegistryAuthError, match="HTTP 401") as err:
            client_for(url, **{option: secret}).versions("s-value")
    finally:
        server.shutdown()
        server.server_close()
    said = str(err.value) + "\n" + caplog.text
    assert "HTTP 503" in caplog.text and "refused" in said  # the echoes were read
    forms = [secret, secret.partition(":")[2], base64.b64encode(secret.encode()).decode()]
    for form in filter(str.strip, forms):
        assert form not in said, (form, said)
    assert "s3cr3t" not in said


def test_https_registry_with_the_ssl_options(tmp_path):
    import ssl

    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    cert.configure_cert(context)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    server = RegistryServer(ssl_context=context).start()
    try:
        server.register("s-value", {"schema": json.dumps(V1)})
        good = client_for(
            server.url,
            **{
                "schema.registry.ssl.ca.location": str(ca_file),
                "schema.registry.timeout.ms": "3000",
            },
        )
        assert good.version("s-value").id == 1
        untrusted = client_for(server.url, **{"schema.registry.timeout.ms": "3000"})
        with pytest.raises(RegistryError, match="TLS certificate not trusted"):
            untrusted.versions("s-value")
        with pytest.raises(ConfigError, match="schema.registry.ssl.ca.location"):
            client_for(
                server.url, **{"schema.registry.ssl.ca.location": str(tmp_path / "missing.pem")}
            ).versions("s-value")
    finally:
        server.stop()


def test_an_inline_schema_without_a_registry_reads_every_id_with_it(
    mock_cluster, registry, topic_name
):
    create_topic(mock_cluster, topic_name, 1)
    written = produce(
        mock_cluster.bootstrap, topic_name, registry.url, V1, [{"id": 1, "name": "x", "score": 2}]
    )
    registry.reset_calls()
    rows = read_all(
        mock_cluster.bootstrap, topic_name, 1, valueFormat="avro", valueSchema=json.dumps(V1)
    )
    assert rows[0]["value"] == {"id": 1, "name": "x", "score": 2}
    assert rows[0]["valueSchemaId"] == int.from_bytes(written[0][0][1:5], "big")
    assert registry.calls() == []
