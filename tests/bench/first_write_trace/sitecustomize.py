"""Timestamps of a ``df.write.format("pykafka")`` in every Python process Spark starts for
it (jvm_child.py's ``first-write`` mode puts this folder first on PYTHONPATH, so every
Python process of that session imports this module at start, Spark's workers included).

With ``PYKAFKA_WRITE_TRACE=<file>``, each process appends JSON lines ``[epoch seconds, pid,
process kind, event]`` to the file: when the process began (fork or exec, from
/proc/self/stat), the imports of ``kafka_sink``, ``kafka_sink.writer``,
``kafka_sink.task`` and ``kafka_source`` (begin, end), and the sink's steps
wrapped once imported: ``create_writer`` (the driver's planner: options, schema, the topic
check), a task's ``write``, ``ProducerIds.init_producer_id``, the job's ``commit``. Test
and bench code only; nothing in the product knows of it.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import json
import os
import sys
import time

_FILE = os.environ.get("PYKAFKA_WRITE_TRACE")


def _kind() -> str:
    argv = " ".join(sys.argv)
    for word in ("daemon", "worker", "plan", "commit", "lookup"):
        if word in argv:
            return argv.rsplit(" ", 1)[-1][-60:]
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"


def _started_at() -> float:
    """This process's start (its fork, for a worker forked by Spark's daemon), as epoch."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as f:
        boot = next(int(line.split()[1]) for line in f if line.startswith("btime"))
    return boot + ticks / os.sysconf("SC_CLK_TCK")


_seen_pids: set[int] = set()


def emit(event: str, at: float | None = None) -> None:
    pid = os.getpid()
    lines = []
    if pid not in _seen_pids:  # a forked worker's first event: when it was forked
        _seen_pids.add(pid)
        lines.append([round(_started_at(), 3), pid, _kind(), "process started"])
    lines.append([round(time.time() if at is None else at, 3), pid, _kind(), event])
    with open(_FILE, "a") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")


def _timed(name: str, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        emit(f"{name} begin")
        try:
            return fn(*args, **kwargs)
        finally:
            emit(f"{name} end")

    return wrapper


_waited = [0.0]


def _task_write(fn):
    """A task's write, how long of it the task waited for Spark's rows (the sink's own
    count, ``PartitionBatcher.input_waited``) and the worker's CPU time meanwhile (a task
    that took longer than its CPU and its waits waited for a core)."""
    timed = _timed("task write", fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        _waited[0] = 0.0
        cpu = time.process_time()
        try:
            return timed(*args, **kwargs)
        finally:
            cpu = time.process_time() - cpu
            emit(f"note: waited {_waited[0]:.2f} s for Spark's rows, {cpu:.2f} s of CPU")

    return wrapper


def _patch(writer) -> None:
    writer.create_writer = _timed("create_writer", writer.create_writer)
    writer._check_topic_exists = _timed("topic check", writer._check_topic_exists)
    # @user_errors gives each writer class a wrapped ``write`` of its own: patch those
    for cls in (writer.KafkaArrowWriter, writer.KafkaStreamArrowWriter):
        cls.write = _task_write(cls.write)
    writer.KafkaArrowWriter.commit = _timed("commit", writer.KafkaArrowWriter.commit)


def _patch_task(task) -> None:
    """The task's own modules, patched when a task imports them (the planner and the
    commit processes never do)."""
    from kafka_sink import batching, producer_ids

    input_waited = batching.PartitionBatcher.input_waited

    def counted(self, seconds):
        _waited[0] += seconds
        return input_waited(self, seconds)

    batching.PartitionBatcher.input_waited = counted
    producer_ids.ProducerIds.init_producer_id = _timed(
        "InitProducerId", producer_ids.ProducerIds.init_producer_id
    )


#: the modules whose import is timed: the sink's package (its options, the clients' option
#: parsing), its writer module (Spark's data source API, the checks, the commit) and the
#: task's module (the encoder, the producer)
TIMED = ("kafka_sink", "kafka_sink.writer", "kafka_sink.task", "kafka_source")


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in TIMED or name in _busy:
            return None
        _busy.add(name)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            _busy.discard(name)
        exec_module = spec.loader.exec_module

        def timed_exec(module):
            emit(f"import {name} begin")
            exec_module(module)
            emit(f"import {name} end")
            if name == "kafka_sink.writer":
                _patch(module)
            elif name == "kafka_sink.task":
                _patch_task(module)

        spec.loader.exec_module = timed_exec
        return spec


_busy: set[str] = set()


if _FILE:
    sys.meta_path.insert(0, _Finder())
