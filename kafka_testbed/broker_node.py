"""One node of a testbed Kafka cluster: its folder and files, its free ports, its process,
the Java that runs it, and the error raised when it does not start.

Kept apart from :mod:`kafka_testbed.apache_kafka` (which runs the cluster) so that the
Kerberos KDC (:mod:`kafka_testbed.kerberos`) can use the same port picking and
die-with-the-parent start without importing the cluster.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["KafkaStartError", "Node", "die_with_parent", "free_ports", "java_executable"]


class KafkaStartError(RuntimeError):
    """A node did not start (or formatting failed); the message holds its log's tail."""


def java_executable() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise KafkaStartError("Apache Kafka needs Java 17 or later ('java' is not on PATH)")
    return java


def die_with_parent() -> None:
    """In the child before exec: SIGKILL it when the process that started it dies, so a
    test run killed by hand (or by a timeout) leaves no broker JVM behind (Linux only)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class Node:
    node_id: int
    ports: dict[str, int]
    directory: Path
    process: subprocess.Popen | None = None
    log: object = field(default=None, repr=False)
    ended: bool = False  # the testbed ended the process (kill, terminate, stop)

    @property
    def config_file(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_file(self) -> Path:
        return self.directory / "server.log"

    @property
    def request_log_file(self) -> Path:
        return self.directory / "requests.log"

    def log_tail(self, lines: int = 60) -> str:
        """The log's ERROR and ``Caused by`` lines (the cause of a failed start is often
        far above the end), then its last ``lines`` lines."""
        try:
            text = self.log_file.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        causes = [
            line for line in text[:-lines] if " ERROR " in line or line.startswith("Caused by:")
        ][:20]
        head = ["errors earlier in the log:", *causes, "..."] if causes else []
        return "\n".join(head + text[-lines:])
