"""Apache Kafka for tests: KRaft clusters of 1 or 3 nodes run from Maven's jars.

:class:`KafkaCluster` fetches the pinned jars of a Kafka version (:mod:`.maven_jars`),
formats each node's log directory with ``kafka.tools.StorageTool`` (a static quorum naming
every node; SCRAM users and ``transaction.version`` set at format time) and starts one JVM per
node (``kafka.Kafka``, combined broker and controller, small heap) on loopback and free ports::

    with KafkaCluster("4.4.0", nodes=3) as kafka:
        kafka.bootstrap                      # "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
        kafka.kill(2); kafka.restart(2)      # SIGKILL, then start again on its log directory
        kafka.tool("org.apache.kafka.tools.TransactionsCommand", "list")

A node is ready when it logs ``Kafka Server started``; a cluster when every node is and
Metadata lists them all. A node that does not come up fails with the tail of its log.
The listeners and features a cluster can have are described on :class:`KafkaCluster`; its
settings are made in :mod:`.broker_config`, its tools run from :mod:`.kafka_tools`, and a
node's files and process are :mod:`.broker_node`'s.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

from .broker_config import (
    LISTENER_PROTOCOLS,
    SASL_USERS,
    log_config_args,
    server_properties,
    tool_log_config,
    write_log_config,
)
from .broker_node import KafkaStartError, Node, die_with_parent, free_ports, java_executable
from .kafka_tools import KafkaTools
from .maven_jars import NEWEST_KAFKA, kafka_classpath, uses_log4j2
from .port_forward import listen_on

__all__ = ["KafkaCluster"]

_READY_LINE = "Kafka Server started"


class KafkaCluster(KafkaTools):
    """An Apache Kafka KRaft cluster of ``nodes`` combined broker+controller JVMs.

    Listeners of every node (each on a port of its own; ``kafka.listener(name)`` gives a
    bootstrap string):

    * ``PLAINTEXT`` (always; inter-broker traffic uses it too): on a free port, or on ``port``
      (node n on ``port + n - 1``; :class:`~kafka_testbed.port_forward.PortTakenError` naming
      it, before anything starts, when another process holds it);
    * ``SASL`` (``sasl=True``): SASL_PLAINTEXT with PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (the users
      of :data:`SASL_USERS`) and OAUTHBEARER checked by the broker's unsecured validator (any
      ``alg: none`` token with ``sub`` and ``exp``);
    * ``OAUTH`` (``oauth_jwks=path`` or an ``http(s)`` URL, an issuer's JWKS endpoint):
      SASL_PLAINTEXT with OAUTHBEARER checked by the broker's JWKS validator against that JWKS
      (its URL is put on the broker JVM's ``org.apache.kafka.sasl.oauthbearer.allowed.urls``):
      RS256 signature, ``exp``, ``sub``, and the ``iss`` claim when ``oauth_issuer`` is given;
      not the audience (all settings listener-prefixed; checked on 3.9.2, 4.1.2 and 4.4.0);
    * ``SSL`` (``ssl=(cert_chain_pem, key_pem)``): TLS from PEM files, ``ssl_client_ca`` to
      require client certificates signed by that CA;
    * ``SASL_SSL`` (``sasl_ssl=True``, with ``ssl`` and ``sasl``): SASL over TLS with the ``SSL``
      listener's certificate and no client certificate asked: PLAIN, SCRAM-SHA-256 and
      SCRAM-SHA-512 for :data:`SASL_USERS`, and OAUTHBEARER checked by the JWKS validator when
      ``oauth_jwks`` is given (as the ``OAUTH`` listener checks it);
    * further TLS listeners (``ssl_listeners={name: (cert_chain_pem, key_pem)}``, or those pairs
      as a tuple, hashable for ``kafka_clusters``), each with a certificate of its own and no
      client certificate asked: a certificate past its end, one naming another host (Kafka
      starts with either; only clients judge them);
    * ``PROXIED`` (``proxied={node_id: port}``): PLAINTEXT, advertised at ``127.0.0.1:port``
      (a fault proxy's, forwarding to ``kafka.listener("PROXIED")``): clients that bootstrap
      through the proxy reach every broker through it, while the brokers' own traffic
      (replication, transaction markers) stays on ``PLAINTEXT``.

    * ``GSSAPI`` (``kerberos=realm``, a started :class:`~kafka_testbed.kerberos.KerberosRealm`):
      SASL_PLAINTEXT with Kerberos, the broker signing in as the realm's ``kafka/localhost`` from
      its keytab; advertised as ``localhost`` (the host of that service principal).

    ``reauth_ms`` sets ``connections.max.reauth.ms`` on the SASL listeners (KIP-368).

    ``racks=["a", "b", "c"]`` (one a node) sets each node's ``broker.rack`` and the rack-aware
    ``replica.selector.class``: a consumer that names its rack (``client.rack``) is sent to the
    replica in that rack (KIP-392). ``request_log=True`` has each node log every request it
    answers (Kafka's ``kafka.request.logger`` at DEBUG) to a file of its own;
    ``kafka.requests(node_id)`` reads it back as ``(api key, client id)`` pairs.

    ``authorizer=True`` turns on KRaft's ``StandardAuthorizer`` with
    ``allow.everyone.if.no.acl.found=false``: a principal may do only what an ACL allows. The
    super user is ``User:ANONYMOUS``, the principal of every ``PLAINTEXT`` connection: the
    brokers' and controllers' own traffic and the tests' admin (``kafka.bootstrap``, where
    topics and ACLs are made); the users of :data:`SASL_USERS` on the ``SASL`` listener start
    with no permission. ``kafka.acl(...)`` adds ACLs with Kafka's own ``AclCommand``.
    """

    def __init__(
        self,
        version: str = NEWEST_KAFKA,
        nodes: int = 1,
        *,
        transaction_version: int | None = None,
        sasl: bool = False,
        oauth_jwks: str | None = None,
        oauth_issuer: str | None = None,
        ssl: tuple[str, str] | None = None,
        ssl_client_ca: str | None = None,
        sasl_ssl: bool = False,
        ssl_listeners=None,
        reauth_ms: int | None = None,
        authorizer: bool = False,
        heap_mb: int = 512,
        num_partitions: int = 1,
        broker_config: dict[str, str] | None = None,
        proxied: dict[int, int] | None = None,
        start_timeout_s: float = 120.0,
        port: int | None = None,
        kerberos=None,
        racks: list[str] | None = None,
        request_log: bool = False,
    ):
        if nodes < 1:
            raise ValueError("nodes must be >= 1")
        if port is not None and not 0 < port <= 65536 - nodes:
            raise ValueError(f"port must be 1..{65536 - nodes} for {nodes} node(s): {port}")
        self.port = port
        self.version = version
        self.major = int(version.split(".")[0])
        if transaction_version is not None and self.major < 4 and transaction_version > 0:
            raise ValueError(f"Kafka {version} has no transaction.version {transaction_version}")
        self.transaction_version = transaction_version
        if sasl_ssl and not (ssl and sasl):
            raise ValueError("sasl_ssl=True needs ssl (its certificate) and sasl (its users)")
        self.ssl_listeners = {
            name.upper(): files for name, files in dict(ssl_listeners or ()).items()
        }
        taken = set(LISTENER_PROTOCOLS) & set(self.ssl_listeners)
        if taken:
            raise ValueError(f"ssl_listeners: {sorted(taken)} are names of the testbed's own")
        self.sasl, self.oauth_jwks = sasl, oauth_jwks
        self.ssl, self.ssl_client_ca = ssl, ssl_client_ca
        self.sasl_ssl = sasl_ssl
        self.oauth_issuer = oauth_issuer
        self.reauth_ms = reauth_ms
        self.authorizer = authorizer
        self.heap_mb = heap_mb
        self.num_partitions = num_partitions
        self.broker_config = dict(broker_config or {})
        self.start_timeout_s = start_timeout_s
        self.node_count = nodes
        if racks is not None and len(racks) != nodes:
            raise ValueError(f"racks: one rack a node ({nodes}), got {len(racks)}")
        self.racks = list(racks) if racks is not None else None
        self.request_log = request_log
        self.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if self.cluster_id.startswith("-"):
            self.cluster_id = "A" + self.cluster_id[1:]
        self.proxied = dict(proxied or {})
        self.kerberos = kerberos
        self.listeners = (
            ["PLAINTEXT"]
            + (["SASL"] if sasl else [])
            + (["OAUTH"] if oauth_jwks else [])
            + (["SSL"] if ssl else [])
            + (["SASL_SSL"] if sasl_ssl else [])
            + list(self.ssl_listeners)
            + (["PROXIED"] if proxied else [])
            + (["GSSAPI"] if kerberos is not None else [])
        )
        self._dir: Path | None = None
        self.nodes: dict[int, Node] = {}
        self._classpath: str | None = None

    # ---- lifecycle ----------------------------------------------------------------------

    def __enter__(self) -> KafkaCluster:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        nodes = len(self.nodes) or "?"
        return f"KafkaCluster({self.version}, nodes={nodes}, {self.bootstrap_or_none()})"

    @property
    def classpath(self) -> str:
        if self._classpath is None:
            self._classpath = kafka_classpath(self.version)
        return self._classpath

    def start(self) -> KafkaCluster:
        n = self.node_count
        # a fixed port is held from here (a taken one fails before any fetch) until every
        # free port is chosen, so that none of them is it
        held = [
            listen_on(self.port + i, f"Kafka node {i + 1}") for i in range(n if self.port else 0)
        ]
        try:
            classpath = self.classpath  # fetch before any port is chosen
            names = self.listeners + ["CONTROLLER"]
            ports = free_ports(n * len(names))
        finally:
            for sock in held:
                sock.close()
        self._dir = Path(tempfile.mkdtemp(prefix=f"kafka-{self.version}-"))
        for i in range(n):
            node_id = i + 1
            node_ports = {name: ports[i * len(names) + j] for j, name in enumerate(names)}
            if self.port:
                node_ports["PLAINTEXT"] = self.port + i
            directory = self._dir / f"node-{node_id}"
            (directory / "data").mkdir(parents=True)
            self.nodes[node_id] = Node(node_id, node_ports, directory)
        try:
            for node in self.nodes.values():
                self._write_config(node)
                self._format(node, classpath)
            for node in self.nodes.values():
                self._launch(node)
            self._wait_ready(list(self.nodes.values()))
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        self.keep_logs_of_dead_nodes()
        for node in self.nodes.values():  # the data goes with it: no shutdown to wait for
            self._end(node, signal.SIGKILL, wait_s=30)
        if self._dir is not None and os.environ.get("PYKAFKA_KEEP_KAFKA_LOGS") is None:
            shutil.rmtree(self._dir, ignore_errors=True)
        self._dir = None

    # ---- addresses ----------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return self.listener("PLAINTEXT")

    def bootstrap_or_none(self) -> str | None:
        return self.bootstrap if self.nodes else None

    def listener(self, name: str, node_ids=None) -> str:
        """``host:port,...`` of listener ``name`` on ``node_ids`` (every node by default)."""
        ids = node_ids if node_ids is not None else sorted(self.nodes)
        host = "localhost" if name == "GSSAPI" else "127.0.0.1"
        return ",".join(f"{host}:{self.nodes[i].ports[name]}" for i in ids)

    def node_of_port(self, port: int) -> int:
        for node in self.nodes.values():
            if port in node.ports.values():
                return node.node_id
        raise KeyError(port)

    # ---- faults -------------------------------------------------------------------------

    def kill(self, node_id: int) -> None:
        """SIGKILL ``node_id`` and wait for it to be gone."""
        self._end(self.nodes[node_id], signal.SIGKILL, wait_s=30)

    def terminate(self, node_id: int, wait_s: float = 60) -> None:
        """SIGTERM ``node_id`` (a controlled shutdown) and wait for it to exit."""
        self._end(self.nodes[node_id], signal.SIGTERM, wait_s=wait_s)

    def pause(self, node_id: int) -> None:
        """SIGSTOP ``node_id``: its sockets stay open and nothing answers."""
        os.kill(self.nodes[node_id].process.pid, signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        os.kill(self.nodes[node_id].process.pid, signal.SIGCONT)

    def restart(self, node_id: int, wait: bool = True) -> None:
        """Start ``node_id`` again on its log directory (after ``kill`` or ``terminate``)."""
        node = self.nodes[node_id]
        if node.process is not None and node.process.poll() is None:
            raise RuntimeError(f"node {node_id} is still running")
        self._launch(node)
        if wait:
            self._wait_ready([node])

    def running(self, node_id: int) -> bool:
        p = self.nodes[node_id].process
        return p is not None and p.poll() is None

    def pid(self, node_id: int) -> int:
        return self.nodes[node_id].process.pid

    # ---- internals ----------------------------------------------------------------------

    def _write_config(self, node: Node) -> None:
        props = server_properties(self, node)
        node.config_file.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        write_log_config(node, self.version, self.request_log)

    def _tool_log_config(self) -> Path:
        assert self._dir is not None or self.nodes
        return tool_log_config(self._dir or Path(tempfile.gettempdir()), self.version)

    @property
    def jwks_url(self) -> str | None:
        """The JWKS the validators read: ``oauth_jwks`` as given when it is an http(s) URL,
        else as a ``file:`` URL."""
        if not self.oauth_jwks:
            return None
        if self.oauth_jwks.startswith(("http://", "https://")):
            return self.oauth_jwks
        return Path(self.oauth_jwks).resolve().as_uri()

    def _format(self, node: Node, classpath: str) -> None:
        cmd = [
            java_executable(),
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",
            *log_config_args(self.version, self._tool_log_config()),
            "-cp",
            classpath,
            "kafka.tools.StorageTool",
            "format",
            "-t",
            self.cluster_id,
            "-c",
            str(node.config_file),
        ]
        if self.sasl:
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                for user, password in SASL_USERS.items():
                    cmd += ["--add-scram", f"{mechanism}=[name={user},password={password}]"]
        if self.transaction_version is not None and self.major >= 4:
            cmd += ["--feature", f"transaction.version={self.transaction_version}"]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        if run.returncode != 0:
            raise KafkaStartError(
                f"formatting node {node.node_id} of Kafka {self.version} "
                f"failed ({run.returncode}):\n{run.stdout[-3000:]}\n"
                f"{run.stderr[-3000:]}"
            )

    def _launch(self, node: Node) -> None:
        node.ended = False
        log_config = node.directory / (
            "log4j2.properties" if uses_log4j2(self.version) else "log4j.properties"
        )
        jvm = [
            java_executable(),
            f"-Xmx{self.heap_mb}m",
            f"-Xms{min(self.heap_mb, 256)}m",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true",
            *log_config_args(self.version, log_config),
        ]
        if self.oauth_jwks:
            jvm.append(f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={self.jwks_url}")
        if self.kerberos is not None:
            jvm += self.kerberos.jvm_args
        with open(node.log_file, "a") as marker:
            marker.write(f"--- launch {time.strftime('%H:%M:%S')} ---\n")
        stdout = open(node.directory / "stdout.log", "ab")
        node.process = subprocess.Popen(
            [*jvm, "-cp", self.classpath, "kafka.Kafka", str(node.config_file)],
            stdout=stdout,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            # the kernel ties this to the starting *thread*: a node restarted by a fault
            # thread must outlive that thread
            preexec_fn=die_with_parent
            if threading.current_thread() is threading.main_thread()
            else None,
        )
        stdout.close()
        node.log = node.log_file.stat().st_size if node.log_file.exists() else 0

    def _wait_ready(self, nodes: list[Node]) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        pending = list(nodes)
        while pending:
            for node in list(pending):
                if node.process.poll() is not None:
                    node.ended = True  # its log goes into the error: nothing to keep
                    raise KafkaStartError(
                        f"Kafka {self.version} node {node.node_id} exited "
                        f"({node.process.returncode}) while starting:\n{node.log_tail()}\n"
                        f"{(node.directory / 'stdout.log').read_text(errors='replace')[-2000:]}"
                    )
                try:
                    with open(node.log_file, "rb") as f:
                        f.seek(node.log or 0)
                        if _READY_LINE.encode() in f.read():
                            pending.remove(node)
                except FileNotFoundError:
                    pass
            if pending and time.monotonic() > deadline:
                raise KafkaStartError(
                    f"Kafka {self.version} node {pending[0].node_id} not ready after "
                    f"{self.start_timeout_s:.0f} s:\n{pending[0].log_tail()}"
                )
            if pending:
                time.sleep(0.1)
        self._wait_brokers_listed()

    def _wait_brokers_listed(self) -> None:
        """Metadata from every running node lists every running node."""
        from protocol.client.cluster import KafkaClient
        from protocol.errors import PyKafkaError

        want = {i for i in self.nodes if self.running(i)}
        deadline = time.monotonic() + 60
        last = None
        while time.monotonic() < deadline:
            try:
                with KafkaClient(
                    bootstrap_servers=self.listener("PLAINTEXT", sorted(want)),
                    request_timeout_ms=5000,
                    connect_timeout_ms=2000,
                ) as c:
                    listed = set(c.metadata(topics=[]).brokers)
                if want <= listed:
                    return
                last = f"Metadata lists nodes {sorted(listed)}"
            except PyKafkaError as e:
                last = str(e)
            time.sleep(0.2)
        raise KafkaStartError(f"Kafka {self.version}: nodes {sorted(want)} not all listed: {last}")

    def dead_nodes(self) -> list[int]:
        """The nodes whose process ended without the testbed ending it (a crash, an
        OutOfMemoryError: the JVM runs with ExitOnOutOfMemoryError)."""
        return [
            n.node_id
            for n in self.nodes.values()
            if n.process is not None and n.process.poll() is not None and not n.ended
        ]

    def keep_logs_of_dead_nodes(self) -> list[Path]:
        """Copy the server.log and stdout.log of every node that died on its own out of the
        cluster's directory (which ``stop`` deletes) into ``PYKAFKA_DEAD_NODE_LOGS`` (default:
        ``pykafka-dead-kafka-nodes`` in the temporary directory), and warn with where they
        are and the log's tail; returns the folders. Each node's logs are kept once."""
        import warnings

        kept = []
        root = Path(
            os.environ.get("PYKAFKA_DEAD_NODE_LOGS")
            or Path(tempfile.gettempdir()) / "pykafka-dead-kafka-nodes"
        )
        for node_id in self.dead_nodes():
            node = self.nodes[node_id]
            folder = root / f"{time.strftime('%Y%m%d-%H%M%S')}-kafka-{self.version}-node{node_id}"
            folder.mkdir(parents=True, exist_ok=True)
            for name in ("server.log", "stdout.log"):
                if (node.directory / name).exists():
                    shutil.copy(node.directory / name, folder / name)
            node.ended = True  # kept: not again
            kept.append(folder)
            warnings.warn(
                f"Kafka {self.version} node {node_id} died (exit code "
                f"{node.process.returncode if node.process else None}) without the testbed "
                f"ending it; its logs are kept in {folder}:\n{node.log_tail(30)}",
                stacklevel=2,
            )
        return kept

    def _end(self, node: Node, sig: int, wait_s: float) -> None:
        p = node.process
        if p is None or p.poll() is not None:
            return
        node.ended = True
        try:
            os.kill(p.pid, signal.SIGCONT)  # a paused JVM cannot act on SIGTERM
            os.kill(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=30)
