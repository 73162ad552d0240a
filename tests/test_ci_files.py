"""The files of the CI that cannot run here: .github/workflows/*.yml (GitHub Actions) and
docker-compose.yml (the Kafka they start). Each is checked against the schema
check-jsonschema ships for it (no network), and the two are checked to be in step: the
workflow runs ``make test-kafka`` against the Kafka images of docker-compose.yml at the
address it advertises, with transactions working on one broker."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
COMPOSE = REPO / "docker-compose.yml"


def _check(schema: str, *paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema",
                           schema, *map(str, paths)], capture_output=True, text=True,
                          timeout=120)


def test_the_workflows_follow_github_s_schema():
    assert WORKFLOWS
    run = _check("vendor.github-workflows", *WORKFLOWS)
    assert run.returncode == 0, run.stdout + run.stderr


def test_docker_compose_follows_the_compose_spec():
    run = _check("vendor.compose-spec", COMPOSE)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_schema_check_rejects_a_broken_workflow(tmp_path):
    """The check is not vacuous: a misspelt key and a step without ``run``/``uses`` fail."""
    bad = yaml.safe_load((REPO / ".github" / "workflows" / "kafka.yml").read_text())
    job = next(iter(bad["jobs"].values()))
    job["runs_on"] = job.pop("runs-on")
    path = tmp_path / "bad.yml"
    path.write_text(yaml.safe_dump(bad))
    assert _check("vendor.github-workflows", path).returncode != 0


def _kafka_workflow() -> dict:
    return yaml.safe_load((REPO / ".github" / "workflows" / "kafka.yml").read_text())


def _compose_kafka() -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"]["kafka"]


def test_the_workflow_runs_the_selection_on_compose_s_kafka_4_and_3():
    job = _kafka_workflow()["jobs"]["test-kafka"]
    images = job["strategy"]["matrix"]["image"]
    default = re.fullmatch(r"\$\{KAFKA_IMAGE:-(.+)\}", _compose_kafka()["image"])
    assert default, "docker-compose.yml takes its image from KAFKA_IMAGE"
    assert default[1] in images and default[1].startswith("apache/kafka:4.")
    assert any(i.startswith("apache/kafka:3.") for i in images)
    assert job["env"]["KAFKA_IMAGE"] == "${{ matrix.image }}"
    runs = [s.get("run", "") for s in job["steps"]]
    assert "docker compose up -d" in runs and "make install" in runs
    assert any("--wait" in r for r in runs)
    assert runs.index("make test-kafka") > max(i for i, r in enumerate(runs) if "--wait" in r)
    advertised = _compose_kafka()["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    assert advertised == f"PLAINTEXT://{job['env']['PYKAFKA_TEST_BOOTSTRAP']}"
    assert "9092:9092" in _compose_kafka()["ports"]
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^test-kafka:.*\n\t.*-m kafka", makefile, re.M)


@pytest.mark.parametrize("setting", [
    "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
    "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "KAFKA_MIN_INSYNC_REPLICAS"])
def test_compose_s_single_broker_can_run_transactions(setting):
    env = _compose_kafka()["environment"]
    assert env[setting] == 1
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft, one node
