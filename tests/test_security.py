"""SASL end to end, and the password kept out of everything a user or an operator sees.

End to end here means the real client (``KafkaClient`` built from the source's and the
sink's options) against Apache Kafka's SASL listener (``signin_kafka``,
``tests/helpers/signin_cluster.py``): signing in with each mechanism, through a JAAS line and the
sink's options, and Kafka refusing a password, the reader's and the writer's, and through
``spark.read`` (more sign-ins on Kafka are in ``tests/test_kafka_signin.py`` and
``tests/test_kafka_tls.py``).

Passwords never appear in: exception messages and their chains (of bad options, a closed
port, Apache Kafka refusing the login), reprs of the option and client objects, the DEBUG
log, ``df.explain("extended")``, Spark's driver and executor output, the exceptions of
failed batch reads, writes and streaming queries, and the Spark event log (checked in a
subprocess with a SparkSession of its own, since the event log must be enabled before the
session starts). That last check runs on ``tests.helpers.fake_sasl_broker``, which signs the user
in and then closes the connection at every Fetch and Produce: reads and writes that fail
inside Spark's tasks with the password in their options, which no real broker does on
demand.

What was found about Spark 4.3: neither plan strings (``explain``: ``BatchScan pykafka[...]
(Python)``) nor any event of the event log (SQL execution start with the physical plan
description, jobs, tasks, streaming progress) show a Python data source's options, so
``spark.redaction.regex`` (default ``(?i)secret|password|token|access[.]?key``, applied to
Spark's and Hadoop's configuration in the environment event) and
``spark.sql.redaction.options.regex`` (applied to the options JVM sources print) have
nothing to redact. What does reach the event log and the driver's exceptions is the
connector's own error text, Python tracebacks included: that is why no error of ours may
hold a password. The password does travel, by design, inside the pickled reader and
writer that Spark sends to its Python workers (``ClientConfig`` keeps it as a ``Secret``
that pickles with its value, so executors can authenticate).
"""

from __future__ import annotations

import glob
import logging
import os
import pickle
import subprocess
import sys
import time
import traceback

import pytest

from kafka_sink.options import parse_writer_options
from kafka_source.options import parse_reader_options
from kafka_testbed import SASL_USERS
from protocol.client.cluster import KafkaClient
from protocol.client.connection import BrokerConnection
from protocol.errors import AuthenticationError, PyKafkaError

from .helpers.fake_sasl_broker import FakeSaslBroker
from .helpers.reliability_report import record
from .helpers.secrets import assert_no_secret

USER = "alice"
#: alice's password on Apache Kafka (``signin_kafka``); PASSWORD is refused there.
KAFKA_PASSWORD = SASL_USERS[USER]
PASSWORD = "Corr3ct-h0rse-\u00e9-password"
WRONG = "Wr0ng-batt3ry-staple-password"
JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    f'username="{USER}" password="{PASSWORD}";'
)


def reader_config(bootstrap: str, mechanism: str, password: str = PASSWORD, **extra):
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": "t",
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": mechanism,
        "kafka.sasl.username": USER,
        "kafka.sasl.password": password,
        "kafka.request.timeout.ms": "3000",
    }
    options.update(extra)
    return parse_reader_options(options).client_config


# ---- end to end, on Apache Kafka --------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_authenticates_and_reads_metadata(signin_kafka, mechanism, caplog):
    """The right password: Kafka's SASL listener signs the user in (and grants the 3 s
    session it is configured for), Metadata is answered; the DEBUG log never holds the
    password."""
    caplog.set_level(logging.DEBUG)
    config = reader_config(signin_kafka.listener("SASL"), mechanism, KAFKA_PASSWORD)
    with KafkaClient(config) as client:
        brokers = client.refresh_metadata([]).brokers
        assert brokers and client.connection(next(iter(brokers))).session_lifetime_ms == 3000
    assert "authenticated to" in caplog.text and KAFKA_PASSWORD not in caplog.text


def test_jaas_config_and_the_sink_options_authenticate_too(signin_kafka, topic_name):
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{USER}" password="{KAFKA_PASSWORD}";'
    )
    bootstrap = signin_kafka.listener("SASL")
    reader = parse_reader_options(
        {
            "kafka.bootstrap.servers": bootstrap,
            "subscribe": topic_name,
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "SCRAM-SHA-256",
            "kafka.sasl.jaas.config": jaas,
        }
    ).client_config
    writer = parse_writer_options(
        {
            "kafka.bootstrap.servers": bootstrap,
            "topic": topic_name,
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.username": USER,
            "kafka.sasl.password": KAFKA_PASSWORD,
        }
    ).client_config
    with KafkaClient(writer) as client:
        client.create_topics({topic_name: 2})
    for config in (reader, writer):
        with KafkaClient(config) as client:
            assert client.partitions_for(topic_name) == [0, 1]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_wrong_password_is_refused_without_naming_either_password(signin_kafka, mechanism, caplog):
    caplog.set_level(logging.DEBUG)
    started = time.monotonic()
    with pytest.raises(AuthenticationError) as info:
        KafkaClient(
            reader_config(signin_kafka.listener("SASL"), mechanism, WRONG)
        ).refresh_metadata()
    assert time.monotonic() - started < 10  # refused at once, not retried
    assert repr(USER) in str(info.value)
    assert_no_secret(info.value, secrets=[KAFKA_PASSWORD, WRONG])
    assert KAFKA_PASSWORD not in caplog.text and WRONG not in caplog.text


def test_reprs_and_messages_never_hold_a_password():
    reader = parse_reader_options(
        {
            "kafka.bootstrap.servers": "127.0.0.1:1",
            "subscribe": "t",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.username": USER,
            "kafka.sasl.password": PASSWORD,
            "kafka.ssl.certfile": "/c.pem",
            "kafka.ssl.keyfile": "/k.pem",
            "kafka.ssl.key.password": WRONG,
        }
    )
    writer = parse_writer_options(
        {
            "kafka.bootstrap.servers": "127.0.0.1:1",
            "topic": "t",
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "SCRAM-SHA-256",
            "kafka.sasl.username": USER,
            "kafka.sasl.password": PASSWORD,
        }
    )
    config = reader.client_config
    objects = [
        reader,
        writer,
        config,
        writer.client_config,
        config.sasl_password,
        config.ssl_key_password,
        KafkaClient(config),
        BrokerConnection("127.0.0.1", 1, config),
    ]
    for obj in objects:
        for text in (repr(obj), str(obj), f"{obj}", format(obj, "")):
            assert PASSWORD not in text and WRONG not in text, text


# ---- Spark: explain, errors, logs, event log ------------------------------------------------


@pytest.mark.spark
def test_spark_never_shows_the_password(tmp_path):
    """In a subprocess with its own SparkSession and ``spark.eventLog.enabled``: explain,
    a failing batch read (tasks fail on the executors), a read refused at planning (wrong
    password, and through kafka.sasl.jaas.config), a failing write and a failing
    streaming query, all with the password in their options. Neither password is in the
    subprocess's stdout (explain, the exceptions), its stderr (Spark's log at INFO and
    pykafka's at DEBUG, executor output included) or any event log file."""
    event_dir = tmp_path / "events"
    event_dir.mkdir()
    started = time.monotonic()
    with FakeSaslBroker({USER: PASSWORD}, topics={"t": 2}) as fake:
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join(
                [
                    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    os.environ.get("PYTHONPATH", ""),
                ]
            ),
        )
        proc = subprocess.run(
            [
                sys.executable,
                os.path.join(os.path.dirname(__file__), "helpers", "secret_leak_check.py"),
                fake.bootstrap,
                USER,
                PASSWORD,
                WRONG,
                str(event_dir),
            ],
            capture_output=True,
            text=True,
            timeout=420,
            env=env,
        )
    out, err = proc.stdout, proc.stderr
    assert proc.returncode == 0, err[-3000:]
    cases = [line for line in out.splitlines() if line.startswith("== ") and "(" in line]
    assert len(cases) == 5, out[-3000:]
    assert all(" no error" not in c for c in cases), cases  # every case failed, as meant
    assert "BatchScan pykafka" in out  # explain ran
    assert "AuthenticationError" in out and "KafkaTimeoutError" in out

    events = []
    for path in glob.glob(str(event_dir / "**" / "*"), recursive=True):
        if os.path.isdir(path):
            continue
        with open(path, "rb") as f:
            raw = f.read()
        if path.endswith(".zstd"):  # Spark 4 compresses event logs with zstd by default
            import zstandard

            raw = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True).read()
        events.append(raw.decode("utf-8", "replace"))
    event_log = "\n".join(events)
    assert "SparkListenerSQLExecutionStart" in event_log
    assert "AuthenticationError" in event_log  # our errors do reach it
    leaks = {
        where: [pw for pw in (PASSWORD, WRONG) if pw in text]
        for where, text in (("stdout", out), ("stderr", err), ("event log", event_log))
    }
    record(
        "security/spark_password_nowhere",
        section="security",
        what="a SASL password in the options of failing reads, writes and a streaming "
        "query: explain, errors, logs, event log",
        faults=len(cases),
        seconds=time.monotonic() - started,
        leaks=sum(len(v) for v in leaks.values()),
        event_log_kb=len(event_log) // 1024,
        stderr_kb=len(err) // 1024,
    )
    assert leaks == {"stdout": [], "stderr": [], "event log": []}


# ---- options, failed logins and refused ones: errors and logs ------------------------


def sasl_options(bootstrap: str, mechanism: str = "SCRAM-SHA-256", **extra) -> dict:
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": "t",
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": mechanism,
        "kafka.sasl.username": USER,
        "kafka.sasl.password": PASSWORD,
        "kafka.request.timeout.ms": "3000",
    }
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
        for text in (
            repr(parsed),
            str(parsed),
            repr(parsed.client_config),
            str(parsed.client_config),
            f"{parsed!r:}",
            "%s" % (parsed,),  # noqa: UP031
        ):
            assert PASSWORD not in text
        # ... yet it survives pickling (the executors need it) and reaches the wire.
        clone = pickle.loads(pickle.dumps(parsed))
        assert clone.client_config.sasl_password.reveal() == PASSWORD


def test_bad_options_errors_never_quote_the_password():
    """Misused options fail with messages that name the option, not its secret value."""
    cases = [
        dict(sasl_options("127.0.0.1:9092"), **{"kafka.sasl.jaas.config": JAAS}),  # both
        dict(sasl_options("127.0.0.1:9092"), **{"kafka.sasl.mechanism": "GSSAPI"}),
        {k: v for k, v in sasl_options("127.0.0.1:9092").items() if k != "kafka.sasl.username"},
        {
            "kafka.bootstrap.servers": "127.0.0.1:9092",
            "subscribe": "t",
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.jaas.config": JAAS[:-2],
        },  # unterminated
    ]
    for options in cases:
        with pytest.raises(PyKafkaError) as info:
            parse_reader_options(options)
        assert PASSWORD not in everything_said(info.value)


def test_closed_port(debug_records):
    """The driver's offset lookup against a port nobody listens on: tried numRetries=3
    times as Spark's connector does (a warning, with the error, for each of the two failures
    retried), then raised."""
    import socket
    from kafka_source.offset_reader import OffsetReader

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = parse_reader_options(sasl_options(f"127.0.0.1:{port}")).client_config
    with pytest.raises(PyKafkaError) as info:
        with KafkaClient(config) as client:
            OffsetReader(client, num_retries=3, retry_interval_ms=10).latest_offsets([("t", 0)])
    said = everything_said(info.value) + "".join(traceback.format_exception(info.value))
    assert f"127.0.0.1:{port}" in said and PASSWORD not in said
    logged = debug_records()
    assert logged.count("fetching offsets failed") == 2  # the capture is not empty
    assert PASSWORD not in logged


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_apache_kafka_refusing_the_login(signin_kafka, mechanism, debug_records):
    """A password Kafka does not take, through the reader's and the writer's options: the
    error is Kafka's own words with the user's name, the password is nowhere (error, its
    chain, its traceback, the DEBUG log), and it comes at once (Kafka's SASL listener
    delays no refusal)."""
    options = sasl_options(signin_kafka.listener("SASL"), mechanism)
    words = (
        "Invalid username or password"
        if mechanism == "PLAIN"
        else f"invalid credentials with SASL mechanism {mechanism}"
    )
    writer_options = {k: v for k, v in options.items() if k != "subscribe"}
    for parsed in (parse_reader_options(options), parse_writer_options(writer_options)):
        started = time.monotonic()
        with pytest.raises(AuthenticationError) as info:
            with KafkaClient(parsed.client_config) as client:
                client.metadata()
        assert time.monotonic() - started < 10  # refused at once, not retried
        said = everything_said(info.value) + "".join(traceback.format_exception(info.value))
        assert words in said and repr(USER) in said
        assert PASSWORD not in said
    assert PASSWORD not in debug_records()


@pytest.mark.spark
def test_spark_s_error_for_a_refused_login(spark, signin_kafka):
    """What the user sees from spark.read when Apache Kafka refuses the password (the error
    crosses Spark's Python worker)."""
    options = sasl_options(
        signin_kafka.listener("SASL"), "SCRAM-SHA-512", **{"fetchOffset.numRetries": "1"}
    )
    with pytest.raises(Exception) as info:
        spark.read.format("pykafka").options(**options).load().count()
    said = everything_said(info.value)
    assert (
        "SASL SCRAM-SHA-512 authentication of user 'alice' failed" in said
        and "invalid credentials" in said
    )
    assert PASSWORD not in said
