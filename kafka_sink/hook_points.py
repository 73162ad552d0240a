"""Named points of an exactly-once write where a test may step in; inert otherwise.

``reached(point, **where)`` calls, in order, the callables ``register`` was given; nothing
registers one but a test's own module (tests/helpers/kill_points.py, which crashes a driver
or fails a task attempt there). Points: ``before_task_end`` (in a task, after its rows are
written, before it returns; ``batch_id``, ``partition_id``, ``attempt``),
``before_driver_commit``, ``between_commits`` (after the first transaction is committed)
and ``after_commit`` (after the last, before Spark records the batch; these three with
``batch_id``).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["POINTS", "register", "reached"]

POINTS = ("before_task_end", "before_driver_commit", "between_commits", "after_commit")

_HOOKS: list[Callable[..., None]] = []


def register(hook: Callable[..., None]) -> None:
    """Call ``hook(point, **where)`` at every point reached in this process."""
    _HOOKS.append(hook)


def reached(point: str, **where) -> None:
    for hook in _HOOKS:
        hook(point, **where)
