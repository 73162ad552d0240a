"""Kill a whole driver, or fail a task attempt, at a named point of an exactly-once write
(``tests.helpers.point_patches``, which wraps the sink's own functions: the product has no
hooks). Test code only: the processes a test starts with ``child_env`` get
``worker_hooks/sitecustomize.py`` on their path, which calls ``install`` in every Python
process of that tree (the driver and Spark's Python workers) when one of the variables
below is set.

A driver that leads a session of its own (``start_new_session``) and sets
``PYKAFKA_TEST_KILL_SESSION`` to its pid, with ``PYKAFKA_TEST_KILL_AT=point`` (or
``point:batch_id``) in its environment, is SIGKILLed with its JVM (its process group) and
the calling Python worker (whose group Spark's worker daemon sets apart) when ``point`` is
reached with that batch id in any process of that session. The tests of ``exactlyOnce``
use it to crash a streaming driver at one point and restart it from its checkpoint.
Without both variables, or outside that session, nothing happens.

The other hook fails one task attempt instead of killing a driver, so that Spark retries
it: with ``PYKAFKA_TEST_FAIL_AT=point:partition:attempt[:how]`` (several separated by
commas) ``maybe_fail(point, partition, attempt)`` raises ``InjectedTaskFailure`` in that
attempt of that Spark partition (``how`` = ``raise``, the default), or ends its Python
worker at once with ``os._exit`` (``how`` = ``exit``: a worker that dies without cleaning
up). Point: ``before_task_end``.

On ``local-cluster`` masters a task can take its whole executor down instead: with
``PYKAFKA_TEST_KILL_EXECUTOR_AT=point:batch_id:partition:attempt`` (several separated by
commas) that attempt of that Spark partition of that micro-batch SIGKILLs the executor JVM
it runs under (``tests.helpers.executors.executor_above``) and the Python processes of
that executor, itself last: the task's transaction stays open, as a lost machine leaves
it. Spark's standalone worker then starts a new executor.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from . import point_patches
from .point_patches import POINTS

__all__ = [
    "ENV",
    "SESSION_ENV",
    "FAIL_ENV",
    "EXECUTOR_ENV",
    "POINTS",
    "InjectedTaskFailure",
    "maybe_kill",
    "maybe_fail",
    "maybe_kill_executor",
    "install",
    "child_env",
]

ENV = "PYKAFKA_TEST_KILL_AT"
SESSION_ENV = "PYKAFKA_TEST_KILL_SESSION"
FAIL_ENV = "PYKAFKA_TEST_FAIL_AT"
EXECUTOR_ENV = "PYKAFKA_TEST_KILL_EXECUTOR_AT"
REPO = Path(__file__).resolve().parents[2]
#: The directory of the ``sitecustomize`` that installs these hooks.
HOOKS_DIR = Path(__file__).resolve().parent / "worker_hooks"


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
        raise InjectedTaskFailure(
            f"{FAIL_ENV}: attempt {attempt} of Spark partition {partition_id} fails at {point}"
        )


def maybe_kill_executor(point: str, batch_id: int | None, partition_id: int, attempt: int) -> None:
    here = [point, str(batch_id), str(partition_id), str(attempt)]
    for entry in filter(None, os.environ.get(EXECUTOR_ENV, "").split(",")):
        if entry.strip().split(":") != here:
            continue
        from .executors import executor_above

        jvm = executor_above(os.getpid())
        if jvm is None:
            raise RuntimeError(f"{EXECUTOR_ENV}: no executor JVM above this Python worker")
        own = os.getpgrp()  # the executor's Python daemon and its workers
        spared = {os.getpgid(jvm), os.getsid(0)}  # never the driver's group
        os.kill(jvm, signal.SIGKILL)
        if own not in spared:
            os.killpg(own, signal.SIGKILL)
        os._exit(1)


def _on_point(
    point: str,
    batch_id: int | None = None,
    partition_id: int | None = None,
    attempt: int | None = None,
) -> None:
    maybe_kill(point, batch_id)
    if partition_id is not None and attempt is not None:
        maybe_kill_executor(point, batch_id, partition_id, attempt)
        maybe_fail(point, partition_id, attempt)


def install() -> None:
    """Kill and fail at the points the environment names, in this process."""
    point_patches.install(_on_point)


def child_env(**extra: str) -> dict:
    """The environment of a child driver: this checkout and the hooks' ``sitecustomize``
    first on ``PYTHONPATH`` (the JVM's Python workers inherit it), plus ``extra``."""
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            [str(REPO), str(HOOKS_DIR)] + [p for p in [os.environ.get("PYTHONPATH")] if p]
        ),
    )
    env.update(extra)
    return env
