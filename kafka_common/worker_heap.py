"""``settle_worker_heap()``: keep Spark's collection after every task of a Python worker
cheap, by taking what the worker keeps for good out of the collector's way.

Spark's Python daemon reuses a worker for task after task (``spark.python.worker.reuse``,
on by default) and runs a full cyclic garbage collection (``gc.collect()``) after each.
That collection scans every container object alive in the process: pyarrow's, numpy's,
pyspark's and our own modules, functions and classes, the connection pool. It takes 10-20
ms of CPU per task on an idle machine and was seen at 90 ms on average, 320 ms at worst, on
a busy one, during which the worker cannot start its next task (one of the things a slow
micro-batch of a stream has waited for), and the writer's tasks paid it four times a write.

The first task of ours in a worker arranges for the objects alive after it to be frozen
(``gc.freeze()``), and the later collections scan only what was made since. The freeze
happens at the end of the first full collection that runs outside a task (the one the
daemon runs after the task, once the worker has cleared the task's context): that
collection has just freed the task's garbage and no task object is alive any more, so
what is frozen is what the worker keeps (modules, classes, caches, pooled clients), never
a task's own objects, whose cycles stay collectable. Once per process: an object alive
then that later becomes cyclic garbage is never collected, so what can leak is bounded by
that one moment's heap, not by the hours a stream runs. A process that is not running a
Spark task (a test calling the writer itself) never freezes, nor does one whose collector
is off (``gc.disable()``).
"""

from __future__ import annotations

import gc
import sys

__all__ = ["settle_worker_heap"]

_state = {"arranged": False, "frozen": False}


def settle_worker_heap() -> bool:
    """Call at the start of each task; True when this call arranged the freeze (the first
    task of ours in the worker)."""
    if _state["arranged"] or not _in_spark_task() or not gc.isenabled():
        return False
    _state["arranged"] = True
    gc.callbacks.append(_freeze_after_task)
    return True


def _freeze_after_task(phase: str, info: dict) -> None:
    """A ``gc.callbacks`` hook: at the end of a full collection run outside a Spark task,
    freeze what is alive, once."""
    if phase != "stop" or info.get("generation") != 2 or _state["frozen"]:
        return
    if _in_spark_task() or not gc.isenabled():
        return
    gc.freeze()
    _state["frozen"] = True  # the hook stays (removing it mid-callback could skip another)


def _in_spark_task() -> bool:
    """Whether a Spark task runs in this process (asked of pyspark only when something
    imported it: this wing imports no Spark)."""
    pyspark = sys.modules.get("pyspark")
    return pyspark is not None and pyspark.TaskContext.get() is not None
