"""kafka_common.worker_heap: a Spark worker's first task arranges for the heap to be
frozen once, after the task, so the daemon's collection after each task scans only what
was made since, and no task's own objects are frozen (each case in a child process:
freezing is process-wide)."""

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
        import weakref
        from pyspark import TaskContext
        from kafka_common import worker_heap
        def in_task():
            TaskContext._setTaskContext(TaskContext._getOrCreate())
        def task_over():  # what Spark's worker does before the daemon's gc.collect()
            TaskContext._setTaskContext(None)
        class Node:
            pass
        def cycle():
            node = Node()
            node.me = node
            return node, weakref.ref(node)
        """) + textwrap.dedent(body)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_heap_is_frozen_once_after_the_first_task():
    out = _child("""
        in_task()
        first = worker_heap.settle_worker_heap()
        gc.collect()  # a collection inside the task freezes nothing
        in_first = gc.get_freeze_count()
        task_over()
        gc.collect()  # the daemon's, after the task
        frozen = gc.get_freeze_count()
        in_task()
        second = worker_heap.settle_worker_heap()
        junk = [[] for _ in range(1000)]  # made after the freeze: collectable
        task_over()
        gc.collect()
        print(first, in_first, frozen > 0, second, gc.get_freeze_count() == frozen)
        """)
    assert out == "True 0 True False True"


def test_cycles_a_task_makes_are_collected_after_it():
    """No task's own objects (those it holds when it settles the heap, and those it makes
    after) are frozen with the worker's: their cycles are collected after the task."""
    out = _child("""
        for task in range(2):
            in_task()
            held, held_ref = cycle()  # the task's own, alive when it settles
            worker_heap.settle_worker_heap()
            made, made_ref = cycle()  # made after settling
            del held, made
            task_over()
            gc.collect()  # the daemon's, after the task
            print(gc.get_freeze_count() > 0, held_ref() is None, made_ref() is None)
        """)
    assert out.splitlines() == ["True True True", "True True True"]


@pytest.mark.parametrize("setup", ["", "in_task(); gc.disable()"])
def test_outside_a_spark_task_or_with_the_collector_off_nothing_is_frozen(setup):
    out = _child(f"""
        {setup}
        print([worker_heap.settle_worker_heap() for _ in range(3)], end=" ")
        gc.collect()
        print(gc.get_freeze_count())
        """)
    assert out == "[False, False, False] 0"
