"""Timings inside every Python process of a streaming latency run, to tell what the slowest
micro-batches have in common (jvm_child.py's ``latency`` mode puts this folder first on
PYTHONPATH, so every Python process Spark starts for that session imports it).

With ``PYKAFKA_STREAM_TRACE=<file>``, each process appends JSON lines ``[begin, end, pid,
event]`` (epoch seconds) to the file: the process's start (fork or exec; begin = end),
every garbage collection of 1 ms or more (``gc gen<N>``), and, once their modules are
imported, the calls of our streaming source (``latestOffset``, ``partitions``, ``commit``,
a task's ``read`` from its call to its last row, each Fetch round trip of a task) and of
the no-Kafka clock source of floor_source.py (``latestOffset``, ``partitions``, ``read``).
Bench code only; nothing in the product knows of it.
"""

from __future__ import annotations

import functools
import gc
import importlib.abc
import importlib.util
import json
import os
import sys
import time

_FILE = os.environ.get("PYKAFKA_STREAM_TRACE")
_GC_MIN_S = 0.001
_started_pids: set[int] = set()


def _process_start() -> float:
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as f:
        boot = next(int(line.split()[1]) for line in f if line.startswith("btime"))
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def emit(event: str, begin: float, end: float) -> None:
    pid = os.getpid()
    lines = []
    if pid not in _started_pids:  # a forked worker's first event: when it was forked
        _started_pids.add(pid)
        at = round(_process_start(), 3)
        lines.append([at, at, pid, "process started " + " ".join(sys.argv)[-80:]])
    lines.append([round(begin, 4), round(end, 4), pid, event])
    with open(_FILE, "a") as f:
        f.write("".join(json.dumps(line) + "\n" for line in lines))


def _timed(name: str, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t = time.time()
        try:
            return fn(*args, **kwargs)
        finally:
            emit(name, t, time.time())

    return wrapper


def _timed_generator(name: str, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t = time.time()
        try:
            yield from fn(*args, **kwargs)
        finally:
            emit(name, t, time.time())

    return wrapper


_gc_began = [0.0]


def _gc_callback(phase: str, info: dict) -> None:
    if phase == "start":
        _gc_began[0] = time.time()
    elif _gc_began[0]:
        now = time.time()
        if now - _gc_began[0] >= _GC_MIN_S:
            emit(f"gc gen{info.get('generation')}", _gc_began[0], now)
        _gc_began[0] = 0.0


def _patch_stream_reader(module) -> None:
    cls = module.KafkaStreamReader
    for name in ("latestOffset", "partitions", "commit"):
        setattr(cls, name, _timed(name, getattr(cls, name)))
    cls.read = _timed_generator("read", cls.read)


def _patch_fetcher(module) -> None:
    module._RangeReader._answer = _timed("fetch", module._RangeReader._answer)


def _patch_floor(module) -> None:
    cls = module._ClockStreamReader
    for name in ("latestOffset", "partitions"):
        setattr(cls, name, _timed(name, getattr(cls, name)))
    cls.read = _timed_generator("read", cls.read)


PATCHES = {
    "kafka_source.stream_reader": _patch_stream_reader,
    "kafka_source.fetcher": _patch_fetcher,
    "floor_source": _patch_floor,
}


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in PATCHES or name in _busy:
            return None
        _busy.add(name)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            _busy.discard(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def patched_exec(module):
            exec_module(module)
            PATCHES[name](module)

        spec.loader.exec_module = patched_exec
        return spec


_busy: set[str] = set()


if _FILE:
    sys.meta_path.insert(0, _Finder())
    gc.callbacks.append(_gc_callback)
