"""A test hook: kill the whole driver at a named point of an exactly-once write.

``PYKAFKA_TEST_KILL_AT=point`` (or ``point:batch_id``) in the environment of a driver that
runs in a process group of its own makes ``maybe_kill(point, batch_id)`` SIGKILL that
group (the driver's Python, its JVM and their Python workers) when reached: the tests of
``exactlyOnce`` use it to crash a streaming driver at exactly one point and restart it from
its checkpoint. Points: ``before_task_end`` (in a task, after its rows are written, before
it returns), ``before_driver_commit``, ``between_commits`` (after the first transaction is
committed), ``after_commit`` (after the last, before Spark records the batch). Without the
variable nothing happens.
"""

from __future__ import annotations

import os
import signal

__all__ = ["ENV", "POINTS", "maybe_kill"]

ENV = "PYKAFKA_TEST_KILL_AT"
POINTS = ("before_task_end", "before_driver_commit", "between_commits", "after_commit")


def maybe_kill(point: str, batch_id: int | None = None) -> None:
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    name, _, batch = wanted.partition(":")
    if name != point or (batch and str(batch_id) != batch):
        return
    if os.getpgrp() != os.getsid(0):
        return  # not a process group that leads its own session: never kill a shell's job
    os.killpg(os.getpgrp(), signal.SIGKILL)
