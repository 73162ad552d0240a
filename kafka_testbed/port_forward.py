"""A TCP port on 127.0.0.1 that forwards each connection to another address, byte for byte.

librdkafka's mock cluster listens on ports the kernel picks; :class:`MockCluster` given a
``port`` listens there with a :class:`PortForward` to the mock broker and has the broker
advertise the forwarded port, so every client connection goes through it.

Plain threads and ``select``: one accept thread, and one thread per connection that owns
both of its sockets. Threads poll a stop flag, so :meth:`PortForward.close` returns within
a fraction of a second.
"""

from __future__ import annotations

import errno
import select
import socket
import threading

__all__ = ["PortForward", "PortTakenError", "Relay", "listen_on"]

_POLL_S = 0.1


class PortTakenError(OSError):
    """The port asked for is in use by another process."""


def listen_on(port: int, what: str) -> socket.socket:
    """A socket listening on ``127.0.0.1:port``; :class:`PortTakenError` naming the port
    and ``what`` wanted it when another process holds it."""
    try:
        return socket.create_server(("127.0.0.1", port), backlog=64)
    except OSError as e:
        if e.errno != errno.EADDRINUSE:
            raise
        taken = PortTakenError(
            f"port {port} (127.0.0.1:{port}) is already in use, so {what} cannot listen "
            "there: stop what holds it, or choose another port"
        )
        taken.errno = e.errno
        raise taken from e


class Relay:
    """Accepts connections on ``listen_sock`` and serves each with ``_serve(conn)`` on a
    thread of its own that owns the connection's sockets; :meth:`close` stops them all.
    Subclasses say how a connection reaches ``target``."""

    def __init__(self, listen_sock: socket.socket, target: tuple[str, int], name: str) -> None:
        self._sock = listen_sock
        self._sock.settimeout(_POLL_S)
        self.target = target
        self._name = name
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: set[threading.Thread] = set()
        self._acceptor = threading.Thread(
            target=self._accept_loop, name=f"{name}-accept", daemon=True
        )
        self._acceptor.start()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            t = threading.Thread(
                target=self._serve, args=(conn,), name=f"{self._name}-conn", daemon=True
            )
            with self._lock:
                self._threads = {x for x in self._threads if x.is_alive()}
                self._threads.add(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Stop listening and close every connection served. Idempotent."""
        self._stop.set()
        self._acceptor.join(5)
        self._sock.close()
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            t.join(6)


class PortForward(Relay):
    """Listens on ``127.0.0.1:port`` and pipes each connection to ``target``."""

    def __init__(self, port: int, target: tuple[str, int], what: str = "the broker") -> None:
        self.port = port
        super().__init__(listen_on(port, what), target, f"kafka_testbed-forward-{port}")

    def _serve(self, conn: socket.socket) -> None:
        backend: socket.socket | None = None
        try:
            backend = socket.create_connection(self.target, timeout=5)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            backend.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while not self._stop.is_set():
                readable, _, _ = select.select([conn, backend], [], [], _POLL_S)
                for src in readable:
                    data = src.recv(1 << 16)
                    if not data:
                        return
                    (backend if src is conn else conn).sendall(data)
        except OSError:
            pass  # the broker is down, or either side closed or reset: drop the connection
        finally:
            for s in (backend, conn):
                if s is not None:
                    s.close()
