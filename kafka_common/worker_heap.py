"""``settle_worker_heap()``: keep Spark's collection after every task of a Python worker
cheap, by taking what the worker keeps for good out of the collector's way.

Spark's Python daemon reuses a worker for task after task (``spark.python.worker.reuse``,
on by default) and runs a full cyclic garbage collection (``gc.collect()``) after each.
That collection scans every container object alive in the process: pyarrow's, numpy's,
pyspark's and our own modules, functions and classes, the connection pool. It takes 10-20
ms of CPU per task on an idle machine and was seen at 90 ms on average, 320 ms at worst, on
a busy one, during which the worker cannot start its next task (one of the things a slow
micro-batch of a stream has waited for), and the writer's tasks paid it four times a write.

A worker's second task of ours (and only then) freezes the objects alive at that moment
(``gc.freeze()``): the daemon has just collected, so what is alive is what the worker
keeps (modules, classes, caches, pooled clients), and the later collections scan only what
was made since. Once per process: an object alive then that later becomes cyclic garbage
is never collected, so what can leak is bounded by that one moment's heap, not by the
hours a stream runs. A worker that runs one task (no reuse) never freezes; nor does a
process that is not running a Spark task (a test calling the writer itself) or whose
collector is off (``gc.disable()``).
"""

from __future__ import annotations

import gc
import sys

__all__ = ["settle_worker_heap"]

_state = {"tasks": 0, "frozen": False}


def settle_worker_heap() -> bool:
    """Call at the start of each task; True when this call froze the heap."""
    if _state["frozen"] or not _in_spark_task():
        return False
    _state["tasks"] += 1
    if _state["tasks"] < 2 or not gc.isenabled():
        return False
    gc.freeze()
    _state["frozen"] = True
    return True


def _in_spark_task() -> bool:
    """Whether a Spark task runs in this process (asked of pyspark only when something
    imported it: this wing imports no Spark)."""
    pyspark = sys.modules.get("pyspark")
    return pyspark is not None and pyspark.TaskContext.get() is not None
