"""The processes of a child driver that runs on ``local-cluster[N,cores,memory]``: Spark's
standalone master and workers run as threads of the driver's JVM, and each worker starts
its executor as a JVM of its own (``CoarseGrainedExecutorBackend``), a child of the
driver's JVM, in the driver's session; every executor has Python workers of its own.

Linux only (``/proc``). Test code: finds an executor JVM by the process tree of one test's
driver, never by name across the machine.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from .waiting import wait_until

__all__ = ["EXECUTOR_CLASS", "session_pids", "executor_above", "kill_session"]

EXECUTOR_CLASS = b"org.apache.spark.executor.CoarseGrainedExecutorBackend"
PROC = Path("/proc")


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, session id) of ``pid``; None once it is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "
    return int(fields[1]), int(fields[3])  # ppid, session


def _cmdline(pid: int) -> list[bytes]:
    try:
        return (PROC / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def session_pids(session: int) -> list[int]:
    """The live processes of the session that ``session`` leads (zombies included)."""
    pids = []
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and stat[1] == session:
                pids.append(int(entry.name))
    return pids


def executor_above(pid: int) -> int | None:
    """The executor JVM that ``pid`` (one of its Python workers) descends from, if any."""
    while pid > 1:
        if EXECUTOR_CLASS in _cmdline(pid):
            return pid
        stat = _stat(pid)
        if stat is None:
            return None
        pid = stat[0]
    return None


def kill_session(session: int, timeout: float = 30) -> None:
    """SIGKILL every process left in the session ``session`` leads (the driver, its JVM,
    the executor JVMs and their Python workers, whatever process group they are in), and
    wait until they are gone."""

    def left() -> list[int]:
        pids = [p for p in session_pids(session) if p != os.getpid()]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids

    def gone() -> bool:
        # Zombies of the session stay until their parent reaps them: count the living.
        return all(_state(pid) in (None, "Z") for pid in left())

    wait_until(gone, timeout, lambda: f"processes of session {session}: {left()}")


def _state(pid: int) -> str | None:
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()[0]
