"""Spark's Python workers seen from outside, through /proc (Linux): which processes they
are, their memory (RSS) and open file descriptors. Used by the streaming soak test and by
``make bench`` (tests/bench/spark_cases.py, streaming_cases.py)."""

from __future__ import annotations

import os


def children() -> dict[int, list[int]]:
    """Every process's children, by parent pid."""
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        ppid = parent(int(entry))
        if ppid is not None:
            tree.setdefault(ppid, []).append(int(entry))
    return tree


def parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        return int(stat[stat.rindex(")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def python_workers(root: int | None = None) -> list[int]:
    """Spark's Python workers: processes under ``root`` (this driver by default) whose
    command line runs ``pyspark.daemon`` or a ``pyspark/worker`` (forked workers keep the
    daemon's)."""
    tree = children()
    found, stack = [], list(tree.get(os.getpid() if root is None else root, []))
    while stack:
        pid = stack.pop()
        stack.extend(tree.get(pid, []))
        cmd = cmdline(pid)
        if "pyspark.daemon" in cmd or "pyspark/worker" in cmd or "pyspark.worker" in cmd:
            found.append(pid)
    return found


def forked_workers(root: int | None = None) -> list[int]:
    """The workers that run tasks: those forked by Spark's daemon (whose parent is a
    worker process too), not the daemon itself."""
    pids = set(python_workers(root))
    return [pid for pid in pids if parent(pid) in pids]
