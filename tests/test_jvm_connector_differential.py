"""Spark's own JVM Kafka connector as the referee (issue 30): the same queries on the same
Apache Kafka through ``format("kafka")`` and ``format("pykafka")``, compared row for row
(topic, partition, offset, key, value, timestamp, timestampType, headers) and schema for
schema.

Maven serves the JVM connector up to Spark 4.2.0, so the comparison runs under PySpark 4.2.0
in a virtualenv of its own (``.venv-pyspark-4.2.0``, built on first use: 3-4 min). One
child driver (``tests/jvm_referee_child.py``: one SparkSession, ``local[2]``, the
connector's jars from ``kafka_testbed.maven_jars.spark_kafka_jars`` in ``spark.jars``, ours
imported from the checkout) runs every scenario of this module through both connectors;
the module's fixture prepares the topics on the session's Apache Kafka (librdkafka writes
them), runs the child once, and each test judges one scenario.

Where the two differ by design, the test pins the difference README's "How it differs
from Spark's Kafka connector" documents.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_testbed.maven_jars import spark_kafka_jars

from .broker_setup import create_topic
from .own_envs import own_env
from .test_ship import clean_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHILD = os.path.join(ROOT, "tests", "jvm_referee_child.py")
SPARK_VERSION = "4.2.0"  # the newest Spark whose Kafka connector Maven serves
CHILD_TIMEOUT_S = 900
CHILD_THREADS = 2  # scenarios the child runs at a time

# A first run builds .venv-pyspark-4.2.0 (pip builds PySpark's sdist) inside the fixture.
pytestmark = [pytest.mark.spark, pytest.mark.jvm_referee, pytest.mark.timeout(1800)]

# ---- the topics ----------------------------------------------------------------------------
# Record i of partition p of the "basic" topic (3 partitions, 6 records each): key k<p><i>
# (null for i=1), value v<p><i> (null for i=2), headers on i=3 (a repeated key, a null
# value) and i=4 (an empty value), timestamp T0 + i s + p*10 ms.
BASIC_PARTITIONS, BASIC_RECORDS = 3, 6
CODECS = ("gzip", "snappy", "lz4", "zstd")
CODEC_RECORDS = 12
DELETED_RECORDS, DELETED_BEFORE = 10, 4


def basic_timestamp(t0: int, partition: int, i: int) -> int:
    return t0 + i * 1000 + partition * 10


def basic_headers(i: int):
    if i == 3:
        return [("h1", b"a"), ("h2", None), ("h1", b"b")]
    if i == 4:
        return [("e", b"")]
    return None


def produce_basic(bootstrap: str, topic: str, t0: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for p in range(BASIC_PARTITIONS):
        for i in range(BASIC_RECORDS):
            producer.produce(topic, partition=p, key=None if i == 1 else f"k{p}{i}",
                             value=None if i == 2 else f"v{p}{i}",
                             headers=basic_headers(i),
                             timestamp=basic_timestamp(t0, p, i))
    assert producer.flush(30) == 0


def produce_codecs(bootstrap: str, topic: str) -> None:
    """Partition i written by a producer compressing with CODECS[i], in two batches."""
    for p, codec in enumerate(CODECS):
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                             "linger.ms": 50})
        for half in range(2):
            for i in range(CODEC_RECORDS // 2):
                n = half * CODEC_RECORDS // 2 + i
                producer.produce(topic, partition=p, key=f"{codec}-{n}",
                                 value=f"{codec} value {n} " * 8,
                                 headers=[("codec", codec.encode())])
            assert producer.flush(30) == 0


def produce_transactions(bootstrap: str, topic: str, transactional_id: str) -> None:
    """Committed c0-c2, aborted a0-a2 (flushed first, so the broker holds them), committed
    c3-c4: with the transaction markers, offsets 0-10."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    for values, commit in ((["c0", "c1", "c2"], True), (["a0", "a1", "a2"], False),
                           (["c3", "c4"], True)):
        producer.begin_transaction()
        for v in values:
            producer.produce(topic, partition=0, key=v, value=v)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)


def produce_and_delete(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(DELETED_RECORDS):
        producer.produce(topic, partition=0, key=f"d{i}", value=f"d{i}")
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, DELETED_BEFORE)]).values():
        assert future.result(30).low_watermark == DELETED_BEFORE


def produce_log_append_time(bootstrap: str, topic: str) -> None:
    """A topic whose broker stamps each record (timestampType 1)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, 1, 1, config={"message.timestamp.type": "LogAppendTime"})
    admin.create_topics([new])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        producer.produce(topic, key=f"l{i}", value=f"l{i}", timestamp=1000 + i)
    assert producer.flush(30) == 0


# ---- the scenarios -------------------------------------------------------------------------
# Placeholders <B> <B2> <C> <X> <D> <L> <P> (the topics and the run's prefix) and <T0>,
# <T0+n> are replaced by the fixture; <T> in write scenarios by the child, per sink.

def ts_json(**by_partition: str) -> str:
    """``{"<B>":{"0":<T0+1000>,...}}``: the placeholders stand for numbers, unquoted."""
    return '{"<B>":{' + ",".join(f'"{p}":{v}' for p, v in by_partition.items()) + "}}"


# Read scenarios both connectors must answer alike, with the number of rows expected.
READS = {
    "default-earliest-to-latest": ({"subscribe": "<B>"}, 18),
    "json-minus-two-and-minus-one": ({"subscribe": "<B>",
                                      "startingOffsets": '{"<B>":{"0":-2,"1":2,"2":-2}}',
                                      "endingOffsets": '{"<B>":{"0":3,"1":-1,"2":5}}'},
                                     3 + 4 + 5),
    "json-specific-offsets-assign": ({"assign": '{"<B>":[0,1,2]}',
                                      "startingOffsets": '{"<B>":{"0":1,"1":4,"2":6}}'},
                                     5 + 2 + 0),
    # a pattern matches anywhere in a topic's name in both (Spark: Regex.findFirstIn)
    "subscribe-pattern-matches-anywhere": ({"subscribePattern": "<P>-basic"}, 18 + 2),
    "assign-two-partitions": ({"assign": '{"<B>":[0,2]}'}, 12),
    "include-headers": ({"subscribe": "<B>", "includeHeaders": "true"}, 18),
    "starting-timestamp": ({"subscribe": "<B>", "startingTimestamp": "<T0+2500>"}, 9),
    "ending-timestamp": ({"subscribe": "<B>", "endingTimestamp": "<T0+2005>"}, 3 + 2 + 2),
    "offsets-by-timestamp": ({"subscribe": "<B>",
                              "startingOffsetsByTimestamp": ts_json(
                                  **{"0": "<T0+1000>", "1": "-2", "2": "<T0+4015>"}),
                              "endingOffsetsByTimestamp": ts_json(
                                  **{"0": "<T0+4000>", "1": "<T0+99000>", "2": "-1"})},
                             3 + 6 + 2),
    "by-timestamp-strategy-latest": ({"subscribe": "<B>",
                                      "startingOffsetsByTimestamp": ts_json(
                                          **{"0": "<T0+99000>", "1": "<T0>", "2": "<T0+5000>"}),
                                      "startingOffsetsByTimestampStrategy": "latest"},
                                     0 + 6 + 1),
    "read-committed": ({"subscribe": "<X>", "kafka.isolation.level": "read_committed"}, 5),
    "read-uncommitted": ({"subscribe": "<X>", "kafka.isolation.level": "read_uncommitted"},
                         8),
    "compression-codecs": ({"subscribe": "<C>", "includeHeaders": "true"},
                           len(CODECS) * CODEC_RECORDS),
    "log-append-time": ({"subscribe": "<L>"}, 3),
    "deleted-records-earliest": ({"subscribe": "<D>"}, DELETED_RECORDS - DELETED_BEFORE),
    "deleted-records-fail-on-data-loss-false": ({"subscribe": "<D>",
                                                 "startingOffsets": '{"<D>":{"0":0}}',
                                                 "failOnDataLoss": "false"},
                                                DELETED_RECORDS - DELETED_BEFORE),
}

# Reads whose Spark partitions are compared too.
SPLITS = {
    "min-partitions": ({"subscribe": "<B>", "minPartitions": "6"}, 18),
    "max-records-per-partition-explicit-offsets": (
        {"subscribe": "<B>", "maxRecordsPerPartition": "2",
         "startingOffsets": '{"<B>":{"0":0,"1":0,"2":0}}',
         "endingOffsets": '{"<B>":{"0":6,"1":6,"2":6}}'}, 18),
}
# Documented difference: Spark 4.2 decides whether maxRecordsPerPartition splits a batch
# before it resolves earliest/latest (an unresolved range "has" one record), so it splits
# only ranges given as offsets; ours splits every range. (scenario, Spark's, ours)
MAX_RECORDS_EARLIEST_LATEST = ("max-records-per-partition-earliest-to-latest",
                               {"subscribe": "<B>", "maxRecordsPerPartition": "2"}, 3, 9)

# Streams (Trigger.AvailableNow into a memory table): rows and input rows per micro-batch.
STREAMS = {
    "stream-max-offsets-per-trigger": ({"subscribe": "<B>", "startingOffsets": "earliest",
                                        "maxOffsetsPerTrigger": "6"}, 18),
    "stream-read-committed": ({"subscribe": "<X>", "startingOffsets": "earliest",
                               "kafka.isolation.level": "read_committed"}, 5),
}

# Mistakes both connectors refuse: (options, what our message must name, what Spark's
# message says, to show it failed for the same mistake).
MISUSE = {
    "no-bootstrap-servers": ({"subscribe": "<B>"}, "kafka.bootstrap.servers",
                             "'kafka.bootstrap.servers' must be specified"),
    "subscribe-and-assign": ({"subscribe": "<B>", "assign": '{"<B>":[0]}'}, "assign",
                             "only one of the following options"),
    "no-subscription": ({}, "subscribe", "one of the following options must be specified"),
    "bad-starting-offsets-json": ({"subscribe": "<B>", "startingOffsets": '{"<B>":{"0":'},
                                  "startingOffsets", "expected e.g."),
    "batch-starting-at-latest": ({"subscribe": "<B>", "startingOffsets": "latest"},
                                 "startingOffsets", "can't be latest for batch"),
    "batch-ending-at-earliest": ({"subscribe": "<B>", "endingOffsets": "earliest"},
                                 "endingOffsets", "can't be earliest for batch"),
    "batch-json-start-minus-one": ({"subscribe": "<B>",
                                    "startingOffsets": '{"<B>":{"0":-1,"1":-2,"2":-2}}'},
                                   "startingOffsets", "can't be latest for batch"),
    "json-missing-a-partition": ({"subscribe": "<B>", "startingOffsets": '{"<B>":{"0":0}}'},
                                 "startingOffsets", "don't match what are assigned"),
    "by-timestamp-strategy-error": ({"subscribe": "<B>",
                                     "startingOffsetsByTimestamp": ts_json(
                                         **{"0": "<T0+99000>", "1": "<T0>", "2": "<T0>"})},
                                    "startingOffsetsByTimestamp", "no offset matched"),
    # Spark's says UnknownTopicOrPartitionException; ours names the option and the topic
    "subscribe-unknown-topic": ({"subscribe": "<P>-unknown"}, "subscribe",
                                "unknowntopicorpartition"),
    "assign-unknown-topic": ({"assign": '{"<P>-unknown":[0]}'}, "assign",
                             "unknowntopicorpartition"),
    "starting-offsets-of-an-unknown-topic": ({"assign": '{"<B>":[0]}',
                                              "startingOffsets": '{"<P>-unknown":{"0":0}}'},
                                             "startingOffsets", "don't match what are assigned"),
    "deleted-records-fail-on-data-loss": ({"subscribe": "<D>",
                                           "startingOffsets": '{"<D>":{"0":0}}'},
                                          "failOnDataLoss", "some data may have been lost"),
}

# Writes: the same rows through both sinks into topics of their own (<T> per sink), read
# back by Spark's connector. (sql, options, {topic suffix: partitions})
KEYED_ROWS = """
SELECT concat('key-', id) AS key, concat('value-', id) AS value,
       CASE id % 3
         WHEN 0 THEN array(named_struct('key', 'h', 'value', CAST(concat('x', id) AS BINARY)),
                           named_struct('key', 'n', 'value', CAST(NULL AS BINARY)))
         WHEN 1 THEN NULL
         ELSE slice(array(named_struct('key', 'h', 'value', CAST('' AS BINARY))), 1, 0)
       END AS headers
FROM range(0, 40, 1, 1)"""
WRITES = {
    "write-keys-partitioned-by-murmur2": (KEYED_ROWS, {"topic": "<T>"}, {"": 3}),
    "write-null-keys-and-values": (
        "SELECT CASE WHEN id % 2 = 0 THEN NULL ELSE CAST(id AS STRING) END AS key, "
        "CASE WHEN id % 3 = 0 THEN NULL ELSE CAST(concat('v', id) AS BINARY) END AS value "
        "FROM range(0, 12, 1, 1)", {"topic": "<T>"}, {"": 1}),
    "write-topic-option-over-topic-column": (
        "SELECT '<T>-col' AS topic, CAST(id AS STRING) AS key, 'v' AS value "
        "FROM range(0, 6, 1, 1)", {"topic": "<T>-opt"}, {"-opt": 1, "-col": 1}),
    "write-topic-column": (
        "SELECT CASE WHEN id % 2 = 0 THEN '<T>-a' ELSE '<T>-b' END AS topic, "
        "CAST(id AS STRING) AS key, concat('v', id) AS value FROM range(0, 8, 1, 1)",
        {}, {"-a": 1, "-b": 1}),
    # a null partition falls back to the partitioner (murmur2 of the key)
    "write-explicit-partition": (
        "SELECT CAST(id AS STRING) AS key, 'v' AS value, "
        "CASE WHEN id % 3 = 0 THEN NULL ELSE CAST(id % 2 AS INT) END AS partition "
        "FROM range(0, 12, 1, 1)", {"topic": "<T>"}, {"": 3}),
}
# A timestamp column: ours writes it as the record's timestamp; Spark 4.2's sink has no
# timestamp column (it ignores it: the producer stamps the time of sending).
WRITE_TIMESTAMPS = (
    "SELECT CAST(id AS STRING) AS key, 'v' AS value, "
    "timestamp_millis(<T0> + id * 1000) AS timestamp FROM range(0, 4, 1, 1)",
    {"topic": "<T>"}, {"": 1})

# Write mistakes both sinks refuse: (sql, options, mode, what our message must name, what
# Spark's message says).
WRITE_MISUSE = {
    "write-overwrite-mode": ("SELECT 'v' AS value", {"topic": "<T>"}, "overwrite",
                             "overwrite", "save mode overwrite not allowed"),
    "write-no-value-column": ("SELECT 'k' AS key", {"topic": "<T>"}, "append", "value",
                              "required attribute 'value' not found"),
    "write-no-topic": ("SELECT 'v' AS value", {}, "append", "topic",
                       "topic option required"),
    "write-int-key": ("SELECT 1 AS key, 'v' AS value", {"topic": "<T>"}, "append", "key",
                      "key attribute unsupported type"),
}


def read_scenarios() -> list[dict]:
    out = [{"name": n, "kind": "read", "options": o} for n, (o, _) in READS.items()]
    out += [{"name": n, "kind": "read", "options": o, "partitions": True}
            for n, (o, _) in SPLITS.items()]
    out.append({"name": MAX_RECORDS_EARLIEST_LATEST[0], "kind": "read",
                "options": MAX_RECORDS_EARLIEST_LATEST[1], "partitions": True})
    out += [{"name": n, "kind": "read", "options": o, "stream": True}
            for n, (o, _) in STREAMS.items()]
    out += [{"name": n, "kind": "read", "options": o,
             "no_bootstrap": n == "no-bootstrap-servers"} for n, (o, _, _) in MISUSE.items()]
    return out


def sink_topic(prefix: str, name: str, fmt: str) -> str:
    return f"{prefix}-{name}-{'jvm' if fmt == 'kafka' else 'py'}"


def write_scenarios(prefix: str) -> list[dict]:
    out = []
    specs = {**{n: (sql, o, t, "append") for n, (sql, o, t) in WRITES.items()},
             "write-timestamp-column": (*WRITE_TIMESTAMPS, "append"),
             **{n: (sql, o, {"": 1}, mode)
                for n, (sql, o, mode, _, _) in WRITE_MISUSE.items()}}
    for name, (sql, options, topics, mode) in specs.items():
        out.append({"name": name, "kind": "write", "sql": sql, "options": options,
                    "mode": mode, "read_back": [f"<T>{suffix}" for suffix in topics],
                    "topics": topics,
                    "subst": {fmt: {"T": sink_topic(prefix, name, fmt)}
                              for fmt in ("kafka", "pykafka")}})
    return out


def resolve(value, names: dict[str, str]):
    """``<name>`` placeholders of the fixture's names replaced, recursively."""
    if isinstance(value, str):
        for name, replacement in names.items():
            value = value.replace(f"<{name}>", replacement)
        return value
    if isinstance(value, list):
        return [resolve(v, names) for v in value]
    if isinstance(value, dict):
        return {resolve(k, names): resolve(v, names) for k, v in value.items()}
    return value


def placeholders(prefix: str, t0: int) -> dict[str, str]:
    names = {"B": f"{prefix}-basic", "B2": f"{prefix}-basic2", "C": f"{prefix}-codecs",
             "L": f"{prefix}-log-append-time",
             "X": f"{prefix}-txn", "D": f"{prefix}-deleted", "P": prefix, "T0": str(t0)}
    for delta in (1000, 2005, 2500, 4000, 4015, 5000, 99000):
        names[f"T0+{delta}"] = str(t0 + delta)
    return names


# ---- the run -------------------------------------------------------------------------------

def prepare_topics(kafka, names: dict[str, str], t0: int) -> None:
    create_topic(kafka, names["B"], BASIC_PARTITIONS)
    create_topic(kafka, names["B2"], 1)
    create_topic(kafka, names["C"], len(CODECS))
    create_topic(kafka, names["X"], 1)
    create_topic(kafka, names["D"], 1)
    produce_basic(kafka.bootstrap, names["B"], t0)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for i in range(2):
        producer.produce(names["B2"], key=f"b{i}", value=f"b{i}", timestamp=t0 + i)
    assert producer.flush(30) == 0
    produce_codecs(kafka.bootstrap, names["C"])
    produce_transactions(kafka.bootstrap, names["X"], f"{names['P']}-txn")
    produce_and_delete(kafka.bootstrap, names["D"])
    produce_log_append_time(kafka.bootstrap, names["L"])


def run_child(python: str, spec: dict, workdir: str) -> dict:
    spec_path = os.path.join(workdir, "spec.json")
    results_path = os.path.join(workdir, "results.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    done = subprocess.run([python, CHILD, spec_path, results_path], cwd=workdir,
                          env=clean_env(python, PYTHONPATH=ROOT, TZ="UTC"),
                          capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    assert done.returncode == 0 and os.path.exists(results_path), (
        f"exit {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-8000:]}")
    with open(results_path) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def referee(kafka, tmp_path_factory):
    """Every scenario's results through both connectors: {name: {"kafka": .., "pykafka": ..}},
    plus the names the placeholders stood for ("_names") and the run's timings."""
    began = time.monotonic()
    python = own_env(f"pyspark-{SPARK_VERSION}", [f"pyspark=={SPARK_VERSION}"])
    jars = [str(p) for p in spark_kafka_jars(SPARK_VERSION)]
    env_s = time.monotonic() - began
    prefix = f"jvmref-{uuid.uuid4().hex[:8]}"
    t0 = (int(time.time()) - 3600) * 1000  # an hour ago: inside the broker's retention
    names = placeholders(prefix, t0)
    prepare_topics(kafka, names, t0)
    writes = write_scenarios(prefix)
    for scenario in writes:
        for fmt in ("kafka", "pykafka"):
            for suffix, partitions in scenario["topics"].items():
                create_topic(kafka, sink_topic(prefix, scenario["name"], fmt) + suffix,
                             partitions)
    scenarios = resolve(read_scenarios(), names) + resolve(writes, names)
    prepared = time.monotonic()
    results = run_child(python, {"bootstrap": kafka.bootstrap, "jars": jars,
                                 "scenarios": scenarios, "threads": CHILD_THREADS},
                        str(tmp_path_factory.mktemp("ref")))
    keep = os.environ.get("PYKAFKA_JVM_REFEREE_RESULTS")
    if keep:  # every scenario's rows and errors, for a look by hand
        with open(keep, "w") as f:
            json.dump(results, f, indent=1)
    results["_names"] = names
    results["_timings"] = {"env_and_jars_s": round(env_s, 1),
                           "topics_s": round(prepared - began - env_s, 1),
                           "child_s": round(time.monotonic() - prepared, 1)}
    print(f"\njvm referee timings: {results['_timings']}, "
          f"session {results['_session_seconds']} s, child CPU {results['_cpu_seconds']} s")
    return results


# ---- judging -------------------------------------------------------------------------------

def ok(result: dict) -> dict:
    assert "error" not in result, json.dumps(result["error"], indent=1)[:6000]
    return result


def by_position(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: (r["topic"], r["partition"], r["offset"]))


def same_reads(referee, name: str) -> tuple[dict, dict]:
    jvm, ours = ok(referee[name]["kafka"]), ok(referee[name]["pykafka"])
    assert ours["schema"] == jvm["schema"]
    assert by_position(ours["rows"]) == by_position(jvm["rows"])
    return jvm, ours


@pytest.mark.parametrize("name", sorted(READS))
def test_batch_reads_agree(referee, name):
    jvm, _ = same_reads(referee, name)
    assert len(jvm["rows"]) == READS[name][1]


def test_headers_rows_hold_null_and_repeated_header_values(referee):
    """The referee's own answer for includeHeaders, so an agreement on nothing cannot pass."""
    jvm, _ = same_reads(referee, "include-headers")
    headers = {(r["partition"], r["offset"]): r["headers"] for r in jvm["rows"]}
    assert headers[(0, 3)] == [{"key": "h1", "value": b"a".hex()},
                               {"key": "h2", "value": None},
                               {"key": "h1", "value": b"b".hex()}]
    assert headers[(1, 4)] == [{"key": "e", "value": ""}]
    assert headers[(2, 0)] is None


def test_log_append_time_is_timestamp_type_1(referee):
    jvm, _ = same_reads(referee, "log-append-time")
    assert {r["timestampType"] for r in jvm["rows"]} == {1}
    assert all(r["timestamp"] > 1_000_000_000_000_000 for r in jvm["rows"])  # not 1000 + i


def test_aborted_records_are_read_uncommitted_only(referee):
    committed = {bytes.fromhex(r["value"]).decode()
                 for r in same_reads(referee, "read-committed")[1]["rows"]}
    uncommitted = {bytes.fromhex(r["value"]).decode()
                   for r in same_reads(referee, "read-uncommitted")[1]["rows"]}
    assert committed == {"c0", "c1", "c2", "c3", "c4"}
    assert uncommitted == committed | {"a0", "a1", "a2"}


@pytest.mark.parametrize("name", sorted(SPLITS))
def test_split_reads_agree_with_the_same_spark_partitions(referee, name):
    jvm, ours = same_reads(referee, name)
    assert len(jvm["rows"]) == SPLITS[name][1]
    assert ours["partitions"] == jvm["partitions"]


def test_max_records_per_partition_splits_earliest_to_latest_here_only(referee):
    name, _, jvm_partitions, our_partitions = MAX_RECORDS_EARLIEST_LATEST
    jvm, ours = ok(referee[name]["kafka"]), ok(referee[name]["pykafka"])
    assert by_position(ours["rows"]) == by_position(jvm["rows"]) and len(jvm["rows"]) == 18
    assert (jvm["partitions"], ours["partitions"]) == (jvm_partitions, our_partitions)


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_streams_agree_batch_for_batch(referee, name):
    jvm, ours = same_reads(referee, name)
    assert len(jvm["rows"]) == STREAMS[name][1]
    assert [n for n in ours["batches"] if n] == [n for n in jvm["batches"] if n]


def failed_alike(referee, name: str, ours_names: str, spark_says: str) -> None:
    """Both refused; Spark's message shows the mistake, ours names the option (or column)."""
    jvm, ours = referee[name]["kafka"], referee[name]["pykafka"]
    assert "error" in jvm, f"Spark's connector accepted {name}: {jvm}"
    assert "error" in ours, f"ours accepted {name}: {ours}"
    both = f"ours: {ours['error']['message'][:3000]}\nSpark's: {jvm['error']['message'][:3000]}"
    assert spark_says in jvm["error"]["message"].lower(), both
    assert ours_names.lower() in ours["error"]["message"].lower(), both


@pytest.mark.parametrize("name", sorted(MISUSE))
def test_mistakes_fail_both_and_ours_names_the_option(referee, name):
    failed_alike(referee, name, *MISUSE[name][1:])


def read_back(referee, name: str, fmt: str) -> dict[str, list[dict]]:
    """What the sink ``fmt`` wrote, read by Spark's connector, with its topic names put
    back to their placeholders (so the two sinks' topics compare)."""
    topic = sink_topic(referee["_names"]["P"], name, fmt)
    out = {}
    for t, rows in ok(referee[name][fmt])["read_back"].items():
        out[t.replace(topic, "<T>")] = by_position(
            [{**r, "topic": r["topic"].replace(topic, "<T>")} for r in rows])
    return out


def without_timestamps(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "timestamp"} for r in rows]


@pytest.mark.parametrize("name", sorted(WRITES))
def test_writes_land_alike(referee, name):
    """Same partitions, offsets, keys, values and headers; the timestamps are each
    producer's clock at sending (CreateTime): both of this run."""
    jvm, ours = read_back(referee, name, "kafka"), read_back(referee, name, "pykafka")
    assert sorted(ours) == sorted(jvm)
    for topic in jvm:
        assert without_timestamps(ours[topic]) == without_timestamps(jvm[topic]), topic
    assert sum(len(rows) for rows in jvm.values()) > 0
    run_began_us = (int(referee["_names"]["T0"]) + 3600_000) * 1000 - 60_000_000
    for sink in (jvm, ours):
        assert {r["timestampType"] for rows in sink.values() for r in rows} == {0}
        assert all(r["timestamp"] > run_began_us for rows in sink.values() for r in rows)


def test_write_partitions_by_murmur2_of_the_key(referee):
    """Both sinks agree above; this pins what they agree on: Kafka's murmur2 of the key."""
    import pyarrow as pa

    from kafka_sink.partitioner import key_partitions
    rows = read_back(referee, "write-keys-partitioned-by-murmur2", "kafka")["<T>"]
    keys = pa.array([bytes.fromhex(r["key"]) for r in rows], pa.binary())
    assert [r["partition"] for r in rows] == key_partitions(keys, 3).tolist()
    assert {r["partition"] for r in rows} == {0, 1, 2}


def test_topic_option_wins_over_the_topic_column(referee):
    for fmt in ("kafka", "pykafka"):
        topics = read_back(referee, "write-topic-option-over-topic-column", fmt)
        assert len(topics["<T>-opt"]) == 6 and topics["<T>-col"] == [], fmt


def test_timestamp_column_is_written_by_ours_and_ignored_by_spark_4_2(referee):
    """Documented difference: Spark 4.2's sink has no timestamp column (the producer stamps
    the time of sending); ours writes the column's value as the record's CreateTime."""
    t0 = int(referee["_names"]["T0"])
    jvm = read_back(referee, "write-timestamp-column", "kafka")["<T>"]
    ours = read_back(referee, "write-timestamp-column", "pykafka")["<T>"]
    assert [r["timestamp"] for r in ours] == [(t0 + i * 1000) * 1000 for i in range(4)]
    assert all(r["timestamp"] > (t0 + 1800_000) * 1000 for r in jvm)  # sent just now
    assert without_timestamps(ours) == without_timestamps(jvm)


@pytest.mark.parametrize("name", sorted(WRITE_MISUSE))
def test_write_mistakes_fail_both(referee, name):
    failed_alike(referee, name, *WRITE_MISUSE[name][3:])


def test_jars_are_the_connector_and_what_it_needs_beyond_pyspark(referee):
    """Five jars, no more, and they load: the reads above ran on the connector, and the
    child decoded an Avro record with spark-avro's from_avro."""
    assert referee["_avro"] == {"ok": [1, "a"]}
    names = sorted(p.name for p in spark_kafka_jars(SPARK_VERSION))
    assert names == ["commons-pool2-2.13.1.jar", "kafka-clients-3.9.2.jar",
                     f"spark-avro_2.13-{SPARK_VERSION}.jar",
                     f"spark-sql-kafka-0-10_2.13-{SPARK_VERSION}.jar",
                     f"spark-token-provider-kafka-0-10_2.13-{SPARK_VERSION}.jar"]
