"""Named points of an exactly-once write, reached by wrapping the sink's own functions from
the test side: the product has no hooks. ``install(hook)`` makes ``hook(point, **where)``
run at each point in this process, in modules imported before or after the call.

Points, and what is wrapped to reach each:

- ``before_task_end`` (``batch_id``, ``partition_id``, ``attempt``): in a task of an
  exactly-once write, after its rows are written and acknowledged, before it returns its
  commit message: entry to ``kafka_sink.task._commit_message`` with a transaction.
- ``before_driver_commit`` (``batch_id``): entry to
  ``kafka_sink.transactions.commit_transactions``, before any transaction is ended.
- ``between_commits`` (``batch_id``): once a task's transaction is committed, before the
  next task's is looked at: entry to the first of ``committed_batch`` or ``_end`` for
  another Spark partition, inside ``commit_transactions``, after an ``_end(commit=True)``.
- ``after_commit`` (``batch_id``): after the last commit, before Spark records the batch:
  entry to ``fence`` inside ``commit_transactions``.

The wrappers replace the functions on their modules right after those modules execute (an
import hook), so that every ``from .transactions import commit_transactions`` binds the
wrapper; the functions ``commit_transactions`` calls are module globals, looked up at each
call.
"""

from __future__ import annotations

import functools
import importlib.abc
import sys
import threading
from collections.abc import Callable

__all__ = ["POINTS", "install"]

POINTS = ("before_task_end", "before_driver_commit", "between_commits", "after_commit")

Hook = Callable[..., None]
_HOOKS: list[Hook] = []
_PATCHED = "__pykafka_test_point__"


class _Commit(threading.local):
    """The driver's commit running in this thread: its batch id, whether a transaction was
    committed yet, and the Spark partitions it has looked at."""

    active = False
    batch_id: int | None = None
    committed = False
    seen: set[int] = set()


_COMMIT = _Commit()


def _reach(point: str, **where) -> None:
    for hook in _HOOKS:
        hook(point, **where)


def _commit_message(original):
    def wrapper(options, producer, txn_info):
        if txn_info is not None:
            _, partition_id, attempt, batch_id = txn_info
            _reach("before_task_end", batch_id=batch_id, partition_id=partition_id, attempt=attempt)
        return original(options, producer, txn_info)

    return wrapper


def _commit_transactions(original):
    def wrapper(client, options, prefix, messages, batch_id):
        outer = (_COMMIT.active, _COMMIT.batch_id, _COMMIT.committed, _COMMIT.seen)
        _COMMIT.active, _COMMIT.batch_id, _COMMIT.committed, _COMMIT.seen = (
            True,
            batch_id,
            False,
            set(),
        )
        try:
            _reach("before_driver_commit", batch_id=batch_id)
            return original(client, options, prefix, messages, batch_id)
        finally:
            _COMMIT.active, _COMMIT.batch_id, _COMMIT.committed, _COMMIT.seen = outer

    return wrapper


def _next_task(partition_id: int) -> None:
    """A step of ``commit_transactions`` for Spark partition ``partition_id``."""
    if not _COMMIT.active or partition_id in _COMMIT.seen:
        return
    _COMMIT.seen.add(partition_id)
    if _COMMIT.committed:
        _reach("between_commits", batch_id=_COMMIT.batch_id)


def _committed_batch(original):
    def wrapper(client, prefix, partition_id, *args, **kwargs):
        _next_task(partition_id)
        return original(client, prefix, partition_id, *args, **kwargs)

    return wrapper


def _end(original):
    def wrapper(client, t, commit, *args, **kwargs):
        _next_task(t.partition_id)
        original(client, t, commit, *args, **kwargs)
        if commit and _COMMIT.active:
            _COMMIT.committed = True

    return wrapper


def _fence(original):
    def wrapper(*args, **kwargs):
        if _COMMIT.active:
            _reach("after_commit", batch_id=_COMMIT.batch_id)
        return original(*args, **kwargs)

    return wrapper


#: module -> {function name: wrapper factory}
_WRAPS: dict[str, dict[str, Callable]] = {
    "kafka_sink.task": {"_commit_message": _commit_message},
    "kafka_sink.transactions": {
        "commit_transactions": _commit_transactions,
        "committed_batch": _committed_batch,
        "_end": _end,
        "fence": _fence,
    },
}


def _patch(module) -> None:
    """Wrap ``module``'s functions, and rebind every module that imported them already."""
    for name, make in _WRAPS[module.__name__].items():
        original = getattr(module, name)
        if getattr(original, _PATCHED, False):
            continue
        wrapper = functools.wraps(original)(make(original))
        setattr(wrapper, _PATCHED, True)
        setattr(module, name, wrapper)
        for other in list(sys.modules.values()):
            if getattr(other, "__name__", "").startswith("kafka_sink"):
                if getattr(other, name, None) is original:
                    setattr(other, name, wrapper)


class _Loader(importlib.abc.Loader):
    """Runs the module as its own loader does, then wraps its functions."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        _patch(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname not in _WRAPS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


def install(hook: Hook) -> None:
    """Call ``hook(point, **where)`` at every point reached in this process."""
    if hook not in _HOOKS:
        _HOOKS.append(hook)
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    for name in _WRAPS:
        if name in sys.modules:
            _patch(sys.modules[name])
