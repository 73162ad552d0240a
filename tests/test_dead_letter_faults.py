"""``deadLetterTopic`` under kills (marker ``broker_faults``, ``make test-faults``): an
``exactlyOnce`` stream whose records include some the target topic refuses (larger than
its ``max.message.bytes``) writes them to the dead-letter topic in the same transactions
as the others. Its driver is SIGKILLed between two tasks' commits of a micro-batch, and in
every micro-batch one task's Python worker dies at once (``os._exit``, as a lost
executor's does) and Spark runs the task again; the query is restarted from its checkpoint
and runs to the end. By Kafka's rule on the log (read_committed), and to librdkafka's
read_committed consumer, every source record is in exactly one of the target and the
dead-letter topic, once.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import confluent_kafka
import pytest

from kafka_common.dead_letter import CLASS_HEADER, TOPIC_HEADER
from protocol.client.cluster import KafkaClient

from .dead_letter_kill_child import PER_TRIGGER
from .helpers.kill_points import ENV as KILL_AT
from .helpers.kill_points import FAIL_ENV, child_env
from .txn_referee import (
    committed_values,
    librdkafka_read_committed,
    open_transactions,
    stable_offsets_behind,
)

pytestmark = [pytest.mark.broker_faults, pytest.mark.spark]

REPO = Path(__file__).resolve().parent.parent
PARTITIONS = 3
RECORDS = 300  # 5 micro-batches of PER_TRIGGER
KILLED_BATCH = 2
CHILD_TIMEOUT_S = 600  # a loaded 2-core machine takes a while to start a driver


def _value(i: int) -> str:
    """Every tenth record is larger than the target's max.message.bytes (3000)."""
    return f"{i:05d}" + ("x" * 4000 if i % 10 == 3 else "")


def _seed(bootstrap: str, source: str) -> None:
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(RECORDS):
        p.produce(source, key=f"k{i}", value=_value(i), partition=i % PARTITIONS)
    assert p.flush(30) == 0


def _run_child(args: list[str], env: dict, log: Path) -> int:
    with open(log, "wb") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.dead_letter_kill_child", *args],
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
                seen.add((h[TOPIC_HEADER].decode(), h[CLASS_HEADER].decode()))
        return seen
    finally:
        c.close()


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
    checkpoint = tmp_path / "ck"
    args = [kafka.bootstrap, source, target, dlt, str(checkpoint), prefix]
    worker_dies = {FAIL_ENV: "before_task_end:1:0:exit"}  # each micro-batch's task 1, once

    killed = _run_child(
        args,
        child_env(**worker_dies, **{KILL_AT: f"between_commits:{KILLED_BATCH}"}),
        tmp_path / "1",
    )
    first = (tmp_path / "1").read_text(errors="replace")
    assert killed == -signal.SIGKILL, f"the driver was not killed ({killed}): {first[-3000:]}"
    assert not (checkpoint / "commits" / str(KILLED_BATCH)).exists()
    assert (checkpoint / "commits" / str(KILLED_BATCH - 1)).exists()
    assert "Python worker exited unexpectedly" in first  # the lost executor's task, again

    restarted = _run_child(args, child_env(**worker_dies), tmp_path / "2")
    second = (tmp_path / "2").read_text(errors="replace")
    assert restarted == 0, second[-3000:]
    assert (checkpoint / "commits" / str(RECORDS // PER_TRIGGER - 1)).exists()

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
