"""A test hook: kill a whole driver at a named point of an exactly-once write.

A driver that leads a session of its own (``start_new_session``) and sets
``PYKAFKA_TEST_KILL_SESSION`` to its pid, with ``PYKAFKA_TEST_KILL_AT=point`` (or
``point:batch_id``) in its environment, is SIGKILLed with its JVM (its process group) and
the calling Python worker (whose group Spark's worker daemon sets apart) when
``maybe_kill(point, batch_id)`` is reached in any process of that session. The tests of
``exactlyOnce`` use it to crash a streaming driver at one point and restart it from its
checkpoint. Points: ``before_task_end`` (in a task, after its rows are written, before it
returns), ``before_driver_commit``, ``between_commits`` (after the first transaction is
committed), ``after_commit`` (after the last, before Spark records the batch). Without
both variables, or outside that session, nothing happens.

The other hook fails one task attempt instead of killing a driver, so that Spark retries
it: with ``PYKAFKA_TEST_FAIL_AT=point:partition:attempt[:how]`` (several separated by
commas) ``maybe_fail(point, partition, attempt)`` raises ``InjectedTaskFailure`` in that
attempt of that Spark partition (``how`` = ``raise``, the default), or ends its Python
worker at once with ``os._exit`` (``how`` = ``exit``: a worker that dies without cleaning
up, as a lost executor does). Point: ``before_task_end``.
"""

from __future__ import annotations

import os
import signal

__all__ = ["ENV", "SESSION_ENV", "FAIL_ENV", "POINTS", "InjectedTaskFailure", "maybe_kill",
           "maybe_fail"]

ENV = "PYKAFKA_TEST_KILL_AT"
SESSION_ENV = "PYKAFKA_TEST_KILL_SESSION"
FAIL_ENV = "PYKAFKA_TEST_FAIL_AT"
POINTS = ("before_task_end", "before_driver_commit", "between_commits", "after_commit")


class InjectedTaskFailure(RuntimeError):
    """Raised by ``maybe_fail``: a test asked this task attempt to fail."""


def maybe_kill(point: str, batch_id: int | None = None) -> None:
    wanted, session = os.environ.get(ENV), os.environ.get(SESSION_ENV)
    if not wanted or not session:
        return
    name, _, batch = wanted.partition(":")
    if name != point or (batch and str(batch_id) != batch):
        return
    if os.getsid(0) != int(session):
        return  # only inside the session the driver leads
    os.killpg(int(session), signal.SIGKILL)  # the driver's Python and its JVM
    os.killpg(os.getpgrp(), signal.SIGKILL)  # this worker's group


def maybe_fail(point: str, partition_id: int, attempt: int) -> None:
    for entry in filter(None, os.environ.get(FAIL_ENV, "").split(",")):
        name, partition, wanted, *how = entry.strip().split(":")
        if (name, partition, wanted) != (point, str(partition_id), str(attempt)):
            continue
        if how == ["exit"]:
            os._exit(1)
        raise InjectedTaskFailure(f"{FAIL_ENV}: attempt {attempt} of Spark partition "
                                  f"{partition_id} fails at {point}")
