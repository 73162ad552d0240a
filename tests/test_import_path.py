"""The connector's pickles carry its zip when it came from one (kafka_common.import_path).

Two child Pythons stand in for Spark's workers, with this checkout taken off their path: one
imports the connector from the ``--py-files`` zip alone and pickles a data source, a stream
reader and a stream writer with Spark's cloudpickle; the other, where the connector cannot
be imported at all, unpickles them. tests/test_connect.py does the same through a real Spark
Connect server whose workers lack the connector.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap

from tests.helpers.broker_setup import create_topic
from tests.helpers.library import ROOT

sys.path.insert(0, os.path.join(ROOT, "scripts"))
try:
    from build_pyfiles_zip import build as build_pyfiles_zip
finally:
    sys.path.pop(0)

WITHOUT_CHECKOUT = f"""
import os, sys
sys.path[:] = [p for p in sys.path
               if os.path.realpath(p or os.curdir) != os.path.realpath({ROOT!r})]
"""

PICKLER = (
    WITHOUT_CHECKOUT
    + """
sys.path.insert(0, sys.argv[1])
from pyspark import cloudpickle
from pyspark.sql.types import StringType, StructField, StructType
from pyspark_pykafka import KafkaDataSource
from kafka_source.spark_schema import kafka_schema
from kafka_sink.writer import create_stream_writer
import kafka_source
assert kafka_source.__file__.startswith(sys.argv[1]), kafka_source.__file__
bootstrap, topic = sys.argv[3], sys.argv[4]
source = KafkaDataSource({"kafka.bootstrap.servers": bootstrap, "subscribe": topic})
reader = source.streamReader(kafka_schema(False))
writer = create_stream_writer({"kafka.bootstrap.servers": bootstrap, "topic": topic},
                              StructType([StructField("value", StringType())]), False)
for name, obj in [("source", source), ("reader", reader), ("writer", writer)]:
    with open(os.path.join(sys.argv[2], name), "wb") as f:
        f.write(cloudpickle.dumps(obj))
"""
)

UNPICKLER = (
    WITHOUT_CHECKOUT
    + """
import importlib.util, pickle
assert importlib.util.find_spec("kafka_source") is None
loaded = {}
for name in ("source", "reader", "writer"):
    with open(os.path.join(sys.argv[2], name), "rb") as f:
        loaded[name] = pickle.load(f)
finders = [type(f).__name__ for f in sys.meta_path if type(f).__name__ == "PyKafkaZipFinder"]
import kafka_source.stream_reader, kafka_sink.writer
print(type(loaded["source"]).__name__, type(loaded["reader"]).__name__,
      type(loaded["writer"]).__name__, len(finders), kafka_source.__file__,
      sorted(os.listdir(os.getcwd())))
"""
)


def _run(code: str, *args: str, cwd: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr[-4000:]
    return run.stdout


def test_a_worker_without_the_connector_unpickles_what_a_zip_import_pickled(
    tmp_path, kafka, topic_name
):
    create_topic(kafka, topic_name, 1)
    zip_path = build_pyfiles_zip(str(tmp_path / "dist"))
    pickles = tmp_path / "pickles"
    pickles.mkdir()
    empty = tmp_path / "cwd"
    empty.mkdir()
    _run(PICKLER, zip_path, str(pickles), kafka.bootstrap, topic_name, cwd=str(empty))
    for name in ("source", "reader", "writer"):  # the sources ride along, not the byte-code
        data = (pickles / name).read_bytes()
        assert b"kafka_sink/writer.py" in data and b"kafka_sink/writer.pyc" not in data, name
        assert len(data) < os.path.getsize(zip_path) / 2, (name, len(data))
    out = _run(UNPICKLER, zip_path, str(pickles), cwd=str(empty)).split()
    assert out[:4] == ["KafkaDataSource", "KafkaStreamReader", "KafkaStreamArrowWriter", "1"]
    assert out[4] == "<pyspark-pykafka", out  # imported from the zip's bytes, in memory
    assert out[-1] == "[]"  # nothing written where it ran
    assert os.listdir(empty) == []


def test_an_installed_connector_pickles_as_usual():
    """From the checkout (not a zip) nothing is added to the pickles."""
    from pyspark import cloudpickle

    from pyspark_pykafka import KafkaDataSource
    from kafka_source.spark_schema import kafka_schema

    source = KafkaDataSource({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"})
    for obj in (source, source.streamReader(kafka_schema(False))):
        data = cloudpickle.dumps(obj)
        assert b"_put_on_path" not in data and len(data) < 20_000
        assert type(pickle.loads(data)) is type(obj)
