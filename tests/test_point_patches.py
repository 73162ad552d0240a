"""The named points of ``tests.helpers.point_patches`` (where the Spark tests kill a driver
or fail a task) are reached from outside the product, at the places they name: each task's
end before it returns, the driver's commit before any transaction ends, between two
tasks' commits (the first committed, the next not yet), and after the last commit."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

from .helpers.kill_points import child_env
from .helpers.transactions import create
from .helpers.point_patches_child import BATCH, PARTITIONS

REPO = Path(__file__).resolve().parent.parent


def test_points_are_reached_where_they_say(kafka, topic_name):
    create(kafka, topic_name, PARTITIONS)
    prefix = f"points-{uuid.uuid4().hex[:8]}"
    child = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.helpers.point_patches_child",
            kafka.bootstrap,
            topic_name,
            prefix,
        ],
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        timeout=300,
    )
    assert child.returncode == 0, child.stderr.decode()[-3000:]
    result = json.loads(child.stdout.decode().splitlines()[-1])
    assert result["counts"][0]["committed"] == PARTITIONS
    assert result["counts"][1]["committed"] == 2
    stream = [[point, where, markers] for point, where, markers in result["seen"][:7]]
    ends = [
        ["before_task_end", {"batch_id": BATCH, "partition_id": p, "attempt": 0}, None]
        for p in range(PARTITIONS)
    ]
    assert stream == ends + [
        ["before_driver_commit", {"batch_id": BATCH}, [-1, -1, -1]],
        ["between_commits", {"batch_id": BATCH}, [BATCH, -1, -1]],
        ["between_commits", {"batch_id": BATCH}, [BATCH, BATCH, -1]],
        ["after_commit", {"batch_id": BATCH}, [BATCH, BATCH, BATCH]],
    ]
    batch_write = [(point, where) for point, where, _ in result["seen"][7:]]
    assert batch_write == [
        ("before_task_end", {"batch_id": None, "partition_id": 0, "attempt": 0}),
        ("before_task_end", {"batch_id": None, "partition_id": 1, "attempt": 0}),
        ("before_driver_commit", {"batch_id": None}),
        ("between_commits", {"batch_id": None}),
        ("after_commit", {"batch_id": None}),
    ]
