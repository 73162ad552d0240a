"""Library code logs through ``pykafka.*`` loggers and never prints, and a SASL password
given as an option shows up nowhere: not in the parsed options, not in the errors of a
failed connection (a closed port, a broker that drops the connection, one that rejects the
login, a scripted one that answers "authentication failed", Spark's own error), not in log
records captured at DEBUG."""

from __future__ import annotations

import ast
import logging
import os
import pickle
import struct
import traceback

import pytest

from kafka_sink.options import parse_writer_options
from kafka_source.options import parse_reader_options
from protocol.cluster import KafkaClient
from protocol.connection import BrokerConnection
from protocol.errors import AuthenticationError, PyKafkaError
from protocol.schemas import API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE
from tests.fake_broker import FakeBroker, correlation_id, frame

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARY = ("protocol", "kafka_source", "kafka_sink", "pyspark_pykafka.py")
PASSWORD = "Tr0ub4dor-&-3-sesame"
JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        f'username="alice" password="{PASSWORD}";')


def library_sources():
    for entry in LIBRARY:
        path = os.path.join(ROOT, entry)
        if os.path.isfile(path):
            yield path
            continue
        for dirpath, _, filenames in os.walk(path):
            for name in sorted(filenames):
                if name.endswith(".py"):
                    yield os.path.join(dirpath, name)


def test_library_code_never_prints():
    offenders = []
    for path in library_sources():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id == "print"):
                offenders.append(f"{os.path.relpath(path, ROOT)}:{node.lineno}")
    assert offenders == []


def test_library_loggers_are_named_pykafka():
    """Every ``logging.getLogger(...)`` names a ``pykafka``-prefixed logger, and nothing
    logs through the root logger (``logging.info(...)`` and friends)."""
    names, root_calls = [], []
    for path in library_sources():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "logging"):
                continue
            where = f"{os.path.relpath(path, ROOT)}:{node.lineno}"
            if node.func.attr == "getLogger":
                arg = node.args[0] if node.args else None
                names.append((where, arg.value if isinstance(arg, ast.Constant) else None))
            elif node.func.attr in ("debug", "info", "warning", "error", "exception",
                                    "critical", "log"):
                root_calls.append(where)
    assert names, "no loggers found"
    assert [n for n in names if not (isinstance(n[1], str) and
                                     (n[1] == "pykafka" or n[1].startswith("pykafka.")))] == []
    assert root_calls == []


# ---- the password ---------------------------------------------------------------------------

def sasl_options(bootstrap: str, mechanism: str = "SCRAM-SHA-256", **extra) -> dict:
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": "t",
               "kafka.security.protocol": "SASL_PLAINTEXT",
               "kafka.sasl.mechanism": mechanism, "kafka.sasl.username": "alice",
               "kafka.sasl.password": PASSWORD, "kafka.request.timeout.ms": "3000"}
    options.update(extra)
    return options


def everything_said(exc: BaseException) -> str:
    """The message, repr and formatted traceback of ``exc`` and every exception chained."""
    parts, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        parts += [str(exc), repr(exc), *map(repr, exc.args)]
        exc = exc.__cause__ or exc.__context__
    return "\n".join(parts)


@pytest.fixture
def debug_records(caplog):
    """Every log record, of every logger, at DEBUG and above, rendered as a handler would."""
    caplog.set_level(logging.DEBUG)
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")

    def rendered() -> str:
        return "\n".join(formatter.format(r) + repr(r.args) for r in caplog.records)
    return rendered


@pytest.mark.parametrize("jaas", [False, True], ids=["password option", "jaas config"])
def test_parsed_options_never_show_the_password(jaas):
    options = sasl_options("127.0.0.1:9092")
    if jaas:
        del options["kafka.sasl.username"], options["kafka.sasl.password"]
        options["kafka.sasl.jaas.config"] = JAAS
    reader = parse_reader_options(options)
    streaming = parse_reader_options(options, for_streaming=True)
    writer = parse_writer_options({k: v for k, v in options.items() if k != "subscribe"})
    for parsed in (reader, streaming, writer):
        for text in (repr(parsed), str(parsed), repr(parsed.client_config),
                     str(parsed.client_config), f"{parsed!r:}", "%s" % (parsed,)):
            assert PASSWORD not in text
        # ... yet it survives pickling (the executors need it) and reaches the wire.
        clone = pickle.loads(pickle.dumps(parsed))
        assert clone.client_config.sasl_password.reveal() == PASSWORD


def test_bad_options_errors_never_quote_the_password():
    """Misused options fail with messages that name the option, not its secret value."""
    cases = [
        dict(sasl_options("127.0.0.1:9092"), **{"kafka.sasl.jaas.config": JAAS}),  # both
        dict(sasl_options("127.0.0.1:9092"), **{"kafka.sasl.mechanism": "GSSAPI"}),
        {k: v for k, v in sasl_options("127.0.0.1:9092").items()
         if k != "kafka.sasl.username"},
        {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t",
         "kafka.security.protocol": "SASL_PLAINTEXT",
         "kafka.sasl.jaas.config": JAAS[:-2]},  # unterminated
    ]
    for options in cases:
        with pytest.raises(PyKafkaError) as info:
            parse_reader_options(options)
        assert PASSWORD not in everything_said(info.value)


def test_closed_port(debug_records):
    """The driver's offset lookup against a port nobody listens on: retried (and logged
    as a warning each time, with the error), then raised."""
    import socket
    from kafka_source.offset_reader import OffsetReader

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = parse_reader_options(sasl_options(f"127.0.0.1:{port}")).client_config
    with pytest.raises(PyKafkaError) as info:
        with KafkaClient(config) as client:
            OffsetReader(client, num_retries=2, retry_interval_ms=10).latest_offsets([("t", 0)])
    said = everything_said(info.value) + "".join(traceback.format_exception(info.value))
    assert f"127.0.0.1:{port}" in said and PASSWORD not in said
    logged = debug_records()
    assert logged.count("fetching offsets failed") == 2  # the capture is not empty
    assert PASSWORD not in logged


@pytest.fixture(scope="module")
def authenticating_tansu():
    """A real broker that wants SASL and accepts nobody (see kafka_testbed.tansu)."""
    from kafka_testbed import TansuBroker
    with TansuBroker(authentication=True) as broker:
        yield broker


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_a_broker_that_refuses_the_login(authenticating_tansu, mechanism, debug_records):
    """SCRAM runs to the broker's "unknown-user"; PLAIN is not offered and the broker
    drops the connection."""
    options = sasl_options(authenticating_tansu.bootstrap, mechanism)
    for parsed in (parse_reader_options(options), parse_writer_options(options)):
        with pytest.raises(PyKafkaError) as info:
            with KafkaClient(parsed.client_config) as client:
                client.metadata()
        said = everything_said(info.value) + "".join(traceback.format_exception(info.value))
        if mechanism != "PLAIN":
            assert isinstance(info.value, AuthenticationError)
            assert "unknown-user" in said
        assert PASSWORD not in said
    assert PASSWORD not in debug_records()


def _answer(api, version, body):
    def respond(request: bytes) -> bytes:
        payload = bytes(api.response.encode(version, body))
        return frame(struct.pack(">i", correlation_id(request)) + payload)
    return respond


def test_a_scripted_broker_that_fails_the_authentication(debug_records):
    """Handshake accepted, then SaslAuthenticate answers SASL_AUTHENTICATION_FAILED (58)
    with a message: the error carries the broker's message and the user name only."""
    script = [
        _answer(API_VERSIONS, 3, {"error_code": 0, "throttle_time_ms": 0, "api_keys": [
            {"api_key": 18, "min_version": 0, "max_version": 3},
            {"api_key": 17, "min_version": 0, "max_version": 1},
            {"api_key": 36, "min_version": 0, "max_version": 1}]}),
        _answer(SASL_HANDSHAKE, 1, {"error_code": 0, "mechanisms": ["PLAIN"]}),
        _answer(SASL_AUTHENTICATE, 1, {"error_code": 58, "auth_bytes": b"",
                                       "error_message": "Authentication failed: Invalid "
                                                        "username or password"}),
    ]
    with FakeBroker(script) as fake:
        config = parse_reader_options(sasl_options(fake.address, "PLAIN")).client_config
        conn = BrokerConnection("127.0.0.1", fake.port, config)
        with pytest.raises(AuthenticationError) as info:
            conn.connect()
        # The password did go to the broker, inside the PLAIN message ...
        assert PASSWORD.encode() in fake.requests[2]
    # ... and comes back nowhere.
    said = everything_said(info.value) + "".join(traceback.format_exception(info.value))
    assert "Invalid username or password" in said and "'alice'" in said
    assert PASSWORD not in said
    assert PASSWORD not in debug_records()


@pytest.mark.spark
def test_spark_s_error_for_a_refused_login(spark, authenticating_tansu):
    """What the user sees from spark.read (the error crosses Spark's Python worker)."""
    options = sasl_options(authenticating_tansu.bootstrap, "SCRAM-SHA-512",
                           **{"fetchOffset.numRetries": "1"})
    with pytest.raises(Exception) as info:
        spark.read.format("pykafka").options(**options).load().count()
    said = everything_said(info.value)
    assert "unknown-user" in said
    assert PASSWORD not in said
