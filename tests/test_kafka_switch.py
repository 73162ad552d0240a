"""The switch of the broker-facing selection (tests/test_kafka_broker.py, ``make
test-kafka``): ``PYKAFKA_TEST_BOOTSTRAP`` points it at a Kafka the tests did not start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _run_selection(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYKAFKA_TEST_BOOTSTRAP": bootstrap}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-s",
            "-p",
            "no:cacheprovider",
            "-m",
            "kafka",
            "tests/test_kafka_broker.py",
            *args,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_the_switch_points_the_selection_at_a_broker(kafka):
    """``PYKAFKA_TEST_BOOTSTRAP`` sends the selection to the broker it names (this
    session's Apache Kafka stands in for an external one: the child session starts no
    broker of its own), and names a broker that is not there in the failure."""
    run = _run_selection(kafka.bootstrap, "-k", "produced_record_comes_back")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"selection broker: ExternalKafka({kafka.bootstrap})" in run.stdout
    assert "1 passed" in run.stdout
    run = _run_selection("127.0.0.1:1", "-k", "produced_record_comes_back")
    assert run.returncode != 0
    assert "PYKAFKA_TEST_BOOTSTRAP=127.0.0.1:1: no Kafka answers there" in run.stdout
