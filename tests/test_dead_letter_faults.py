"""``deadLetterTopic`` under kills (marker ``broker_faults``, ``make test-faults``): an
``exactlyOnce`` stream whose records include some the target topic refuses (larger than
its ``max.message.bytes``) writes them to the dead-letter topic in the same transactions
as the others. It runs on ``local-cluster[2,1,1024]`` (a standalone master, two workers,
two executor JVMs). In each of its two runs one task SIGKILLs its executor JVM (and that
executor's Python workers) after writing its rows, its transaction open, and Spark's
standalone worker starts a new executor; in every micro-batch one task's Python worker
dies at once (``os._exit``) and Spark runs the task again; the first run's driver is
SIGKILLed (with its JVM and executors) between two tasks' commits of a micro-batch, and the
second run restarts it from its checkpoint and runs to the end. By Kafka's rule on the log
(read_committed), and to librdkafka's read_committed consumer, every source record is in
exactly one of the target and the dead-letter topic, once. No process of either run
outlives it, nor the executors' work directory.

The same kills, with the reader's dead letters instead (``exactlyOnce`` on the reader
too): records the reader cannot decode are copied to the dead-letter topic in the
reader's transactions, the others decoded and written to the target; again every source
record is in exactly one of the two, once.
"""

from __future__ import annotations

import collections
import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import confluent_kafka
import pytest

from kafka_common.dead_letter import CLASS_HEADER, TOPIC_HEADER
from protocol.client.cluster import KafkaClient

from .helpers.dead_letter_kill_child import PER_TRIGGER
from .helpers.executors import kill_session
from .helpers.kill_points import ENV as KILL_AT
from .helpers.kill_points import EXECUTOR_ENV, FAIL_ENV, child_env
from .helpers.txn_referee import (
    committed_values,
    librdkafka_read_committed,
    open_transactions,
    stable_offsets_behind,
)

pytestmark = [pytest.mark.broker_faults, pytest.mark.spark]

REPO = Path(__file__).resolve().parent.parent
PARTITIONS = 3
RECORDS = 300  # 5 micro-batches of PER_TRIGGER
KILLED_BATCH = 2  # the first run's driver dies in it
EXECUTOR_KILLS = (1, 3)  # a micro-batch of each run whose task 0 kills its executor
CHILD_TIMEOUT_S = 600  # a loaded 2-core machine takes a while to start a driver


def _value(i: int) -> str:
    """Every tenth record is larger than the target's max.message.bytes (3000)."""
    return f"{i:05d}" + ("x" * 4000 if i % 10 == 3 else "")


def _seed(bootstrap: str, source: str) -> None:
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(RECORDS):
        p.produce(source, key=f"k{i}", value=_value(i), partition=i % PARTITIONS)
    assert p.flush(120) == 0, "the source was not seeded"  # a loaded broker is slow to start


def _run_child(args: list[str], env: dict, log: Path) -> int:
    """The child's exit status, once it and every process of its session are gone; the
    executors' work directory it named is removed."""
    with open(log, "wb") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.dead_letter_kill_child", *args],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        return child.wait(CHILD_TIMEOUT_S)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)
        kill_session(child.pid)  # executor JVMs and Python workers left by a killed driver
        _remove_work_dir(log)


def _remove_work_dir(log: Path) -> None:
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("WORK_DIR "):
            work = Path(line[len("WORK_DIR ") :])
            shutil.rmtree(work, ignore_errors=True)
            try:
                work.parent.rmdir()  # Spark's "work" under SPARK_HOME, if nothing else is in it
            except OSError:
                pass


def _executors(log: str) -> list[str]:
    """The executor ids up at the end of a run (``EXECUTORS`` of the child)."""
    lines = [line for line in log.splitlines() if line.startswith("EXECUTORS")]
    assert lines, log[-3000:]
    return lines[-1].split()[1:]


def _text(value: str | bytes | None) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _dead_letter_context(bootstrap: str, dlt: str) -> set[tuple[str, str]]:
    """(source topic, error class) of every dead-letter record, read_committed."""
    c = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "dlt-referee",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        with KafkaClient(bootstrap_servers=bootstrap) as client:
            count = len(client.topic(dlt).partitions)
        c.assign([confluent_kafka.TopicPartition(dlt, p, 0) for p in range(count)])
        seen = set()
        for m in c.consume(10_000, 5):
            if not m.error():
                h = dict(m.headers() or [])
                seen.add((_text(h[TOPIC_HEADER]), _text(h[CLASS_HEADER])))
        return seen
    finally:
        c.close()


def _kill_and_restart(tmp_path, args: list[str]) -> None:
    """The two runs of the child: the first's driver killed in micro-batch
    ``KILLED_BATCH``, the second restarted from the checkpoint to the end; in both, one
    executor killed and a Python worker ended per micro-batch."""
    checkpoint = Path(args[4])
    kills = {
        FAIL_ENV: "before_task_end:1:0:exit",  # each micro-batch's task 1, once
        EXECUTOR_ENV: ",".join(f"before_task_end:{batch}:0:0" for batch in EXECUTOR_KILLS),
    }

    killed = _run_child(
        args, child_env(**kills, **{KILL_AT: f"between_commits:{KILLED_BATCH}"}), tmp_path / "1"
    )
    first = (tmp_path / "1").read_text(errors="replace")
    assert killed == -signal.SIGKILL, f"the driver was not killed ({killed}): {first[-3000:]}"
    assert not (checkpoint / "commits" / str(KILLED_BATCH)).exists()
    assert (checkpoint / "commits" / str(KILLED_BATCH - 1)).exists()
    assert "Python worker exited unexpectedly" in first, first[-3000:]
    assert "Lost executor" in first, first[-3000:]  # the first run's executor kill

    restarted = _run_child(args, child_env(**kills), tmp_path / "2")
    second = (tmp_path / "2").read_text(errors="replace")
    assert restarted == 0, second[-3000:]
    assert (checkpoint / "commits" / str(RECORDS // PER_TRIGGER - 1)).exists()
    assert "Lost executor" in second, second[-3000:]
    up = _executors(second)  # executors 0 and 1 at start, one killed: its successor is up
    assert len(up) == 2 and set(up) - {"0", "1"}, f"no new executor: {up}"


@pytest.mark.timeout(900)
def test_dead_letters_stay_exactly_once_through_driver_and_executor_kills(kafka, tmp_path):
    tag = uuid.uuid4().hex[:8]
    source, target, dlt = f"dlf-src-{tag}", f"dlf-dst-{tag}", f"dlf-dlt-{tag}"
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        client.create_topics({source: PARTITIONS})
        client.create_topics({target: PARTITIONS}, configs={"max.message.bytes": "3000"})
        client.create_topics({dlt: 2}, configs={"max.message.bytes": "100000"})
    _seed(kafka.bootstrap, source)
    prefix = f"dlf-{tag}"
    _kill_and_restart(
        tmp_path, [kafka.bootstrap, source, target, dlt, str(tmp_path / "ck"), prefix]
    )

    assert stable_offsets_behind(kafka.bootstrap, target, PARTITIONS, wait_s=30) == []
    assert stable_offsets_behind(kafka.bootstrap, dlt, 2, wait_s=30) == []
    assert open_transactions(kafka.bootstrap, target, PARTITIONS) == []
    assert open_transactions(kafka.bootstrap, dlt, 2) == []
    large = sorted(_value(i) for i in range(RECORDS) if len(_value(i)) > 3000)
    small = sorted(_value(i) for i in range(RECORDS) if len(_value(i)) <= 3000)
    in_target = collections.Counter(committed_values(kafka.bootstrap, target, PARTITIONS))
    in_dlt = collections.Counter(committed_values(kafka.bootstrap, dlt, 2))
    assert sorted(in_target.elements()) == small, "the target differs (lost or repeated)"
    assert sorted(in_dlt.elements()) == large, "the dead-letter topic differs"
    assert not set(in_target) & set(in_dlt)
    assert sorted(librdkafka_read_committed(kafka.bootstrap, target, PARTITIONS)) == small
    assert sorted(librdkafka_read_committed(kafka.bootstrap, dlt, 2)) == large
    assert _dead_letter_context(kafka.bootstrap, dlt) == {(target, "MESSAGE_TOO_LARGE")}


def _reader_value(i: int) -> bytes:
    """Every tenth record cannot be decoded (text, not Avro in Confluent's framing)."""
    if i % 10 == 3:
        return f"{i:05d}-undecodable".encode()
    text = f"{i:05d}".encode()
    return b"\x00\x00\x00\x00\x01" + bytes([len(text) << 1]) + text  # schema id 1, {v}


@pytest.mark.timeout(900)
def test_reader_dead_letters_stay_exactly_once_through_driver_and_executor_kills(kafka, tmp_path):
    """The reader's dead-letter copies (``exactlyOnce`` on the reader) through the same
    kills: every source record is in the target (decoded) or in the dead-letter topic
    (unchanged), once, read_committed."""
    tag = uuid.uuid4().hex[:8]
    source, target, dlt = f"dlr-src-{tag}", f"dlr-dst-{tag}", f"dlr-dlt-{tag}"
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        client.create_topics({source: PARTITIONS})
        client.create_topics({target: PARTITIONS})
        client.create_topics({dlt: 2})
    p = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap, "enable.idempotence": True})
    for i in range(RECORDS):
        p.produce(source, key=f"k{i}", value=_reader_value(i), partition=i % PARTITIONS)
    assert p.flush(120) == 0, "the source was not seeded"
    args = [kafka.bootstrap, source, target, dlt, str(tmp_path / "ck"), f"dlr-{tag}", "reader"]
    _kill_and_restart(tmp_path, args)

    assert stable_offsets_behind(kafka.bootstrap, target, PARTITIONS, wait_s=30) == []
    assert stable_offsets_behind(kafka.bootstrap, dlt, 2, wait_s=30) == []
    assert open_transactions(kafka.bootstrap, target, PARTITIONS) == []
    assert open_transactions(kafka.bootstrap, dlt, 2) == []
    bad = sorted(_reader_value(i).decode() for i in range(RECORDS) if i % 10 == 3)
    good = sorted(f"{i:05d}" for i in range(RECORDS) if i % 10 != 3)
    in_target = collections.Counter(committed_values(kafka.bootstrap, target, PARTITIONS))
    in_dlt = collections.Counter(committed_values(kafka.bootstrap, dlt, 2))
    assert sorted(in_target.elements()) == good, "the target differs (lost or repeated)"
    assert sorted(in_dlt.elements()) == bad, "the dead-letter topic differs (lost or repeated)"
    assert sorted(librdkafka_read_committed(kafka.bootstrap, target, PARTITIONS)) == good
    assert sorted(librdkafka_read_committed(kafka.bootstrap, dlt, 2)) == bad
    assert _dead_letter_context(kafka.bootstrap, dlt) == {(source, "ValueDecodeError")}
