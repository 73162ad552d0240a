"""kafka_common.worker_heap: a Spark worker's second task freezes the heap once, so the
daemon's collection after each task scans only what was made since (each case in a child
process: freezing is process-wide)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _child(body: str) -> str:
    code = textwrap.dedent("""
        import gc
        from pyspark import TaskContext
        from kafka_common import worker_heap
        def in_task():
            TaskContext._setTaskContext(TaskContext._getOrCreate())
        """) + textwrap.dedent(body)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_second_task_freezes_the_heap_once():
    out = _child("""
        in_task()
        first = worker_heap.settle_worker_heap()
        after_first = gc.get_freeze_count()
        second = worker_heap.settle_worker_heap()
        frozen = gc.get_freeze_count()
        junk = [[] for _ in range(1000)]  # made after the freeze: collectable
        third = worker_heap.settle_worker_heap()
        print(first, after_first, second, frozen > 0, third, gc.get_freeze_count() == frozen)
        """)
    assert out == "False 0 True True False True"


@pytest.mark.parametrize("setup", ["", "in_task(); gc.disable()"])
def test_outside_a_spark_task_or_with_the_collector_off_nothing_is_frozen(setup):
    out = _child(f"""
        {setup}
        print([worker_heap.settle_worker_heap() for _ in range(3)], gc.get_freeze_count())
        """)
    assert out == "[False, False, False] 0"
