"""Spark Connect: the connector used from a Connect client, against a real local server.

One Spark Connect server per test session, started by the fixture with PySpark's own
``sbin/start-connect-server.sh --wait`` from the pyspark package of this venv, and stopped
through its own process group. Its Python workers run a virtualenv of their own
(``workers``): the runtime dependencies of ``.venv-pyfiles`` (linked in through a ``.pth``
line) and, for part of the run, the connector's wheel. The server starts in a temporary
directory with no ``PYTHONPATH``: in local mode its Python workers can import whatever sits
in the server's working directory, so a server started in the checkout would find the
connector there and hide what is tested here.

Two ways of loading the connector are checked, as docs/loading.md's table says:

* **Installed on the server** (the wheel in the workers' env when the server starts):
  ``format("pykafka")`` registers itself (Spark looks ``pyspark_*`` modules up once per
  server), and batch reads, a streaming read with ``Trigger.AvailableNow`` into a memory
  sink and a streaming write all work, the client registering nothing.
* **Only the client's artifacts** (``spark.addArtifacts(zip, pyfile=True)`` and
  ``spark.dataSource.register``, nothing of the connector on the server): batch writes and
  reads work, and so do streaming reads and writes: Spark 4.3 gives a streaming query's
  Python workers no session artifacts (see ``pyspark_pykafka/datasource.py``), and they import
  the connector from the zip its pickled data source, stream reader and stream writer carry
  (``kafka_common/import_path.py``).

The wheel is removed from the workers' env for the second case and put back for the
first, so the tests run in any order; Python worker reuse is off, so no worker keeps a
module imported before the change.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

import pytest

from protocol.client.cluster import KafkaClient

from .helpers.python_envs import build_wheel, can_import_connector, layered_env, pip
from .helpers.envs import clean_env
from .helpers.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.loading]


SERVER_START_TIMEOUT_S = 240
QUERY_TIMEOUT_S = 180
PARTITIONS = 2
ROWS = 40  # a multiple of PARTITIONS


# ---- the server and its Python workers --------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ConnectServer:
    """A Spark Connect server process and the Python env of its workers."""

    def __init__(self, tmp: str, workers_python: str, wheel: str):
        self.tmp = tmp
        self.workers_python = workers_python
        self.wheel = wheel
        self.port = _free_port()
        self.url = f"sc://127.0.0.1:{self.port}"
        self.workdir = os.path.join(tmp, "server-cwd")
        os.makedirs(self.workdir)
        self.log_path = os.path.join(tmp, "server.log")
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        import pyspark

        spark_home = os.path.dirname(os.path.abspath(pyspark.__file__))
        logs = os.path.join(self.tmp, "spark-logs")
        env = clean_env(
            self.workers_python,
            SPARK_HOME=spark_home,
            SPARK_LOG_DIR=logs,
            SPARK_PID_DIR=logs,
            SPARK_IDENT_STRING="pykafka-tests",
        )
        command = [
            os.path.join(spark_home, "sbin", "start-connect-server.sh"),
            "--wait",
            "--master",
            "local[2]",
            "--conf",
            f"spark.connect.grpc.binding.port={self.port}",
            "--conf",
            "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.sql.shuffle.partitions=2",
            "--conf",
            "spark.python.worker.reuse=false",
            "--conf",
            "spark.python.authenticate.socketTimeout=120s",
            "--conf",
            f"spark.local.dir={os.path.join(self.tmp, 'spark-local')}",
        ]
        with open(self.log_path, "wb") as log:
            # A process group of its own: the script's shell, spark-submit's JVM and the
            # Python workers it forks all stop with it.
            self.proc = subprocess.Popen(
                command,
                cwd=self.workdir,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

        def serving() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"the Connect server exited ({self.proc.returncode}):\n" + self.log_tail()
                )
            if "Spark Connect server started" not in self.log_tail(20000):
                return False
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return True
            except OSError:
                return False

        try:
            wait_until(serving, SERVER_START_TIMEOUT_S, "the Connect server serving", 0.5)
        except AssertionError:
            self.stop()
            raise RuntimeError(
                "the Connect server did not start in time:\n" + self.log_tail()
            ) from None

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.proc.pid, 0)
            return True
        except ProcessLookupError:
            return False

    def stop(self) -> None:
        """SIGTERM to the server's process group (its id is the script's pid), then SIGKILL
        to what is left after a minute. The script's shell dies at once; the JVM takes a
        few seconds; the Python daemons (groups of their own) leave when the JVM is gone."""
        if self.proc is None or not self._group_alive():
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while self._group_alive() and time.monotonic() < deadline:
            self.proc.poll()  # reap the shell
            time.sleep(0.2)  # a wait whose timeout is no failure: SIGKILL follows
        if self._group_alive():
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def log_tail(self, size: int = 6000) -> str:
        with open(self.log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            return f.read().decode(errors="replace")

    def install_wheel(self) -> None:
        if not can_import_connector(self.workers_python, self.workdir):
            pip(self.workers_python, "install", "--no-deps", "--no-index", self.wheel)
        assert can_import_connector(self.workers_python, self.workdir)

    def uninstall_wheel(self) -> None:
        if can_import_connector(self.workers_python, self.workdir):
            pip(self.workers_python, "uninstall", "-y", "pyspark-pykafka")
        assert not can_import_connector(self.workers_python, self.workdir)

    def session(self):
        from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

        return RemoteSparkSession.builder.remote(self.url).create()


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory, mock_cluster):
    tmp = str(tmp_path_factory.mktemp("connect"))
    workers_python = layered_env(os.path.join(tmp, "workers"))
    wheel = build_wheel(os.path.join(tmp, "dist"), tmp)
    server = ConnectServer(tmp, workers_python, wheel)
    server.install_wheel()
    server.start()
    try:
        # Spark looks pyspark_* modules up once per server, at the first use of a Python
        # data source: here, with the wheel installed and nothing registered by the client.
        spark = server.session()
        try:
            server.auto_registered_schema = (
                spark.read.format("pykafka")
                .option("kafka.bootstrap.servers", mock_cluster.bootstrap)
                .option("subscribe", "unused")
                .load()
                .schema.simpleString()
            )
        finally:
            spark.stop()
        yield server
    finally:
        server.stop()


@pytest.fixture
def server_with_wheel(connect_server):
    connect_server.install_wheel()
    return connect_server


@pytest.fixture
def server_without_connector(connect_server):
    connect_server.uninstall_wheel()
    return connect_server


# ---- helpers -----------------------------------------------------------------------------


def make_topic(cluster, name: str, partitions: int = PARTITIONS) -> None:
    cluster.create_topic(name, partitions, 1)
    with KafkaClient(bootstrap_servers=cluster.bootstrap) as client:
        client.wait_for_topics([name])


def write_rows(spark, bootstrap: str, topic: str) -> None:
    """``df.write``: ROWS rows, key ``k<i>``, value ``v<i>``, partition ``i % PARTITIONS``."""
    df = spark.range(0, ROWS, 1, 1).selectExpr(  # one task: offsets follow the ids
        "format_string('k%03d', id) AS key",
        "format_string('v%03d', id) AS value",
        f"cast(id % {PARTITIONS} AS int) AS partition",
    )
    (
        df.write.format("pykafka")
        .mode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .save()
    )


def expected_rows(topic: str) -> list[tuple]:
    return sorted(
        (topic, i % PARTITIONS, i // PARTITIONS, f"k{i:03d}", f"v{i:03d}") for i in range(ROWS)
    )


def read_rows(spark, bootstrap: str, topic: str) -> list[tuple]:
    df = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
    )
    return sorted(
        tuple(r)
        for r in df.selectExpr(
            "topic", "partition", "offset", "cast(key AS string)", "cast(value AS string)"
        ).collect()
    )


def stream_into_memory(spark, bootstrap: str, topic: str, name: str):
    return (
        spark.readStream.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr(
            "topic",
            "partition",
            "offset",
            "cast(key AS string) AS key",
            "cast(value AS string) AS value",
        )
        .writeStream.format("memory")
        .queryName(name)
        .trigger(availableNow=True)
        .start()
    )


def wait_for_end(query) -> None:
    assert query.awaitTermination(QUERY_TIMEOUT_S), f"still running after {QUERY_TIMEOUT_S}s"


# ---- installed on the server ---------------------------------------------------------------


@pytest.mark.timeout(900)  # the first test to ask for the server also starts it
def test_installed_on_the_server_registers_itself(connect_server):
    assert connect_server.auto_registered_schema == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>"
    )


@pytest.mark.timeout(900)
def test_installed_on_the_server_batch_and_streaming(
    server_with_wheel, mock_cluster, topic_name, tmp_path
):
    """Nothing registered nor shipped by the client: batch write and read, a streaming
    read into a memory sink, and a streaming write (topic to topic), all AvailableNow."""
    bootstrap = mock_cluster.bootstrap
    source, copy = topic_name, topic_name + "-copy"
    make_topic(mock_cluster, source)
    make_topic(mock_cluster, copy)
    spark = server_with_wheel.session()
    try:
        write_rows(spark, bootstrap, source)
        assert read_rows(spark, bootstrap, source) == expected_rows(source)

        query = stream_into_memory(spark, bootstrap, source, "from_kafka")
        wait_for_end(query)
        assert query.exception() is None
        got = sorted(tuple(r) for r in spark.sql("SELECT * FROM from_kafka").collect())
        assert got == expected_rows(source)

        query = (
            spark.readStream.format("pykafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .load()
            .select("key", "value", "partition")
            .writeStream.format("pykafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", copy)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        wait_for_end(query)
        assert query.exception() is None
        assert read_rows(spark, bootstrap, copy) == expected_rows(copy)
    finally:
        spark.stop()


# ---- only the client's artifacts -----------------------------------------------------------


def _add_connector(spark, pyfiles_zip: str) -> None:
    """What docs/loading.md's "Spark Connect" section tells a client to do."""
    spark.addArtifacts(pyfiles_zip, pyfile=True)
    from pyspark_pykafka import KafkaDataSource

    spark.dataSource.register(KafkaDataSource)


@pytest.mark.timeout(900)
def test_artifacts_only_batch_write_and_read(
    server_without_connector, mock_cluster, topic_name, pyfiles_zip
):
    bootstrap = mock_cluster.bootstrap
    make_topic(mock_cluster, topic_name)
    spark = server_without_connector.session()
    try:
        _add_connector(spark, pyfiles_zip)
        write_rows(spark, bootstrap, topic_name)
        assert read_rows(spark, bootstrap, topic_name) == expected_rows(topic_name)

        # The executors' Python workers import it from this session's artifact, the zip.
        from pyspark.sql.connect.functions import udf
        from pyspark.sql.types import StringType

        def where(_):
            import kafka_sink

            return kafka_sink.__file__

        files = {
            r[0] for r in spark.range(0, 4, 1, 2).select(udf(where, StringType())("id")).collect()
        }
        zip_name = os.path.basename(pyfiles_zip)
        assert files and all(f"{zip_name}{os.sep}kafka_sink" in f for f in files), files
    finally:
        spark.stop()


@pytest.mark.timeout(900)
def test_artifacts_only_streaming_read_and_write(
    server_without_connector, mock_cluster, topic_name, pyfiles_zip, tmp_path
):
    """With nothing of the connector on the server, the workers of a streaming query (which
    Spark gives no session artifacts) import it from the zip its pickled data source, stream
    reader and stream writer carry (kafka_common.import_path): a streaming read into a memory
    sink and a topic-to-topic streaming write, both AvailableNow."""
    bootstrap = mock_cluster.bootstrap
    source, copy = topic_name, topic_name + "-copy"
    make_topic(mock_cluster, source)
    make_topic(mock_cluster, copy)
    spark = server_without_connector.session()
    try:
        _add_connector(spark, pyfiles_zip)
        write_rows(spark, bootstrap, source)

        query = stream_into_memory(spark, bootstrap, source, "from_artifacts")
        wait_for_end(query)
        assert query.exception() is None
        got = sorted(tuple(r) for r in spark.sql("SELECT * FROM from_artifacts").collect())
        assert got == expected_rows(source)

        query = (
            spark.readStream.format("pykafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .load()
            .select("key", "value", "partition")
            .writeStream.format("pykafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", copy)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        wait_for_end(query)
        assert query.exception() is None
        assert read_rows(spark, bootstrap, copy) == expected_rows(copy)
    finally:
        spark.stop()
