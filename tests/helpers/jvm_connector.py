"""Running Spark's own Kafka connector (the JVM one) in a child, for the differential tests."""

from __future__ import annotations

import json
import os
import subprocess
from .envs import clean_env
from .library import ROOT

CHILD = os.path.join(ROOT, "tests", "helpers", "jvm_referee_child.py")


SPARK_VERSION = "4.2.0"  # the newest Spark whose Kafka connector Maven serves
#: What the referee's own env (.venv-pyspark-4.2.0) holds besides the runtime dependencies:
#: that PySpark, and cryptography for the PKCS12 trust store ours reads (the pkcs12 extra).
REFEREE_REQUIREMENTS = [f"pyspark=={SPARK_VERSION}", "cryptography>=42"]


CHILD_TIMEOUT_S = 900


def run_child(python: str, spec: dict, workdir: str) -> dict:
    spec_path = os.path.join(workdir, "spec.json")
    results_path = os.path.join(workdir, "results.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    done = subprocess.run(
        [python, CHILD, spec_path, results_path],
        cwd=workdir,
        env=clean_env(python, PYTHONPATH=ROOT, TZ="UTC"),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    assert done.returncode == 0 and os.path.exists(results_path), (
        f"exit {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-8000:]}"
    )
    with open(results_path) as f:
        return json.load(f)


def ok(result: dict) -> dict:
    assert "error" not in result, json.dumps(result["error"], indent=1)[:6000]
    return result
