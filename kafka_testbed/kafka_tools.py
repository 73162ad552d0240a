"""Kafka's own tools run against a testbed cluster, and what its nodes logged of requests.

:class:`KafkaTools` is the part of :class:`~kafka_testbed.apache_kafka.KafkaCluster` that
runs a tool class of the cluster's Kafka version in a JVM of its own (``tool``), grants and
revokes ACLs with ``AclCommand`` (``acl``) and reads back the requests a node answered
(``requests``, with ``request_log=True``).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from .broker_config import log_config_args
from .broker_node import java_executable

__all__ = ["KafkaTools"]

# A line of kafka.request.logger: the request's header as JSON
_REQUEST_API_KEY = re.compile(r'"requestApiKey":(\d+)')
_REQUEST_CLIENT_ID = re.compile(r'"clientId":"((?:[^"\\]|\\.)*)"')


class KafkaTools:
    """Mixed into ``KafkaCluster``, whose attributes below it uses."""

    version: str
    nodes: dict

    @property
    def classpath(self) -> str:
        raise NotImplementedError

    @property
    def bootstrap(self) -> str:
        raise NotImplementedError

    def _tool_log_config(self) -> Path:
        raise NotImplementedError

    def requests(self, node_id: int) -> list[tuple[int, str]]:
        """``(api key, client id)`` of each request ``node_id`` answered so far, oldest
        first (``request_log=True``)."""
        path = self.nodes[node_id].request_log_file
        if not path.exists():
            return []
        found = []
        for line in path.read_text(errors="replace").splitlines():
            key = _REQUEST_API_KEY.search(line)
            client = _REQUEST_CLIENT_ID.search(line)
            if key and client:
                found.append((int(key.group(1)), client.group(1)))
        return found

    def tool(
        self,
        main_class: str,
        *args: str,
        timeout: float = 120,
        check: bool = True,
        input: str | None = None,
    ) -> subprocess.CompletedProcess:
        """Run one of Kafka's tools (a class in this version's jars) and return what it
        printed; ``--bootstrap-server`` is the caller's to pass (``self.bootstrap``).
        ``input`` is its standard input (ConsoleProducer reads its records there)."""
        cmd = [
            java_executable(),
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",
            *log_config_args(self.version, self._tool_log_config()),
            "-cp",
            self.classpath,
            main_class,
            *args,
        ]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input)
        if check and run.returncode != 0:
            raise RuntimeError(
                f"{main_class} {' '.join(args)} exited {run.returncode}:\n"
                f"{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
            )
        return run

    def acl(
        self,
        principal: str,
        operations,
        *,
        topics=(),
        groups=(),
        transactional_ids=(),
        cluster: bool = False,
        prefixed: bool = False,
        remove: bool = False,
    ) -> None:
        """Allow (``remove``: no longer allow) ``principal`` (``"User:alice"``) each of
        ``operations`` (``"Read"``, ``"Write"``, ``"Describe"``, ...) on each resource named,
        literal or (``prefixed``) every name starting with it, with Kafka's own
        ``AclCommand`` through the PLAINTEXT listener (the super user of an
        ``authorizer=True`` cluster). One JVM run: give every resource of one pattern type
        at once (each operation must apply to each resource type given)."""
        if isinstance(operations, str):
            operations = [operations]
        args = [
            "--bootstrap-server",
            self.bootstrap,
            "--remove" if remove else "--add",
            "--allow-principal",
            principal,
        ]
        if remove:
            args.append("--force")
        for operation in operations:
            args += ["--operation", operation]
        for flag, names in (
            ("--topic", topics),
            ("--group", groups),
            ("--transactional-id", transactional_ids),
        ):
            for name in [names] if isinstance(names, str) else names:
                args += [flag, name]
        if cluster:
            args.append("--cluster")
        if prefixed:
            args += ["--resource-pattern-type", "prefixed"]
        self.tool(self._acl_command(), *args)

    def _acl_command(self) -> str:
        """``AclCommand``'s class: ``kafka.admin``'s moved to ``org.apache.kafka.tools``
        (Kafka 4.0); the one these jars have."""
        import zipfile

        for jar in self.classpath.split(os.pathsep):
            if Path(jar).name.startswith("kafka-tools-"):
                with zipfile.ZipFile(jar) as z:
                    if "org/apache/kafka/tools/AclCommand.class" in z.namelist():
                        return "org.apache.kafka.tools.AclCommand"
        return "kafka.admin.AclCommand"
