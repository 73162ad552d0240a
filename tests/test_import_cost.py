"""What a write's driver-side processes load. Spark starts a fresh Python process to plan a
``df.write`` (``write_into_data_source``) and another to commit it
(``commit_data_source_write``); on a session's first write every module they import is time
the user waits for. They need the options, the schema checks, the topic check and the commit,
never the task's encoder, producer, numpy or ``pyarrow.compute`` (0.1-0.3 s to import in a
fresh worker), nor the value formats' or the testbed's packages.

The planner and the commit run for real here, in a fresh interpreter each, against a real
broker (librdkafka's mock cluster): ``KafkaDataSource.writer`` with its topic check, the
writer pickled as Spark pickles it, then unpickled and committed in the second process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: modules (and packages: a name covers its submodules) a planner or commit must not load
HEAVY = (
    "numpy",
    "pyarrow.compute",
    "pandas",
    "kafka_sink.task",
    "kafka_sink.producer",
    "kafka_sink.batching",
    "protocol.records",
    "kafka_common.value_formats.encoding",
    "kafka_common.value_formats.decoding",
    "kafka_common.avro",
    "kafka_common.protobuf",
    "kafka_common.json_schema",
    "kafka_testbed",
    "urllib.request",
    "http.client",  # the registry client's, loaded at its first call
    "google.protobuf",
    "fastavro",
    "lz4",
    "zstandard",
    "cramjam",
    "snappy",
    "confluent_kafka",
)

_PRELUDE = """
import json, pickle, sys
import pyspark.sql.worker.{spark_module}  # Spark's own, imported before ours
before = set(sys.modules)
"""

_REPORT = """
heavy = {heavy!r}
loaded = sorted(
    m for m in set(sys.modules) - before
    if any(m == h or m.startswith(h + ".") for h in heavy)
)
print(json.dumps(loaded))
"""

_PLAN = """
from pyspark.sql.types import BinaryType, StructField, StructType
from pyspark_pykafka import KafkaDataSource

schema = StructType([StructField("key", BinaryType()), StructField("value", BinaryType())])
options = {{"kafka.bootstrap.servers": {bootstrap!r}, "topic": {topic!r}}}
writer = KafkaDataSource(options).writer(schema, False)
with open({pickled!r}, "wb") as f:
    pickle.dump(writer, f)
"""

_COMMIT = """
with open({pickled!r}, "rb") as f:
    writer = pickle.load(f)
writer.commit([])
"""


def _loaded(spark_module: str, body: str) -> list[str]:
    code = _PRELUDE.format(spark_module=spark_module) + body + _REPORT.format(heavy=HEAVY)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_sinks_planner_and_commit_load_no_task_modules(mock_cluster, topic_name, tmp_path):
    mock_cluster.create_topic(topic_name, partitions=2)
    pickled = str(tmp_path / "writer.pickle")
    plan = _PLAN.format(bootstrap=mock_cluster.bootstrap, topic=topic_name, pickled=pickled)
    assert _loaded("write_into_data_source", plan) == []
    assert os.path.getsize(pickled) > 0
    assert _loaded("commit_data_source_write", _COMMIT.format(pickled=pickled)) == []
