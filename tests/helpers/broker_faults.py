"""Faults on an Apache Kafka cluster of three nodes, for tests/test_kafka_faults.py.

After Kafka's own system tests (``replication_test``, ``transactions_test``) and Jepsen's
faults: a node is SIGKILLed and started again on its log directory, or SIGSTOPped (its
sockets stay open, nothing answers) until the controller has fenced it, then continued,
one node at a time, and the cluster is
healed (every node running, every replica back in sync) before the next fault, so that
``min.insync.replicas=2`` always holds for ``acks=all``.

- ``Clusters``: one 3-node ``KafkaCluster`` at a time per (version, transaction.version),
  for a test module that kills nodes (the session's shared clusters must not be touched);
- ``heal``: continue paused nodes, restart killed ones, wait until every partition of every
  topic (the transaction and offset logs too) has all its replicas in sync;
- ``FaultInjector``: a thread that kills or pauses the nodes in turn every few seconds,
  never two at once, and records each fault;
- ``coordinators_list`` (``unfinished``) and ``hanging_transactions``: Kafka's own view
  of open transactions (``kafka-transactions.sh list`` and ``find-hanging``), next to the
  log referee ``txn_referee.open_transactions``;
- ``broker_not_controlling``: a node that is not the quorum's active controller.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass

from kafka_testbed import KafkaCluster
from protocol.client.cluster import KafkaClient
from protocol.errors import PyKafkaError
from protocol.client.group_offsets import TRANSACTION_KEY

TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"
#: Coordinator states of a transaction that is not over (kafka-transactions.sh list).
UNFINISHED_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")
#: broker.session.timeout.ms of the testbed: a silent node loses its partitions after it.
SESSION_TIMEOUT_S = 6.0


class Clusters:
    """One 3-node cluster at a time: ``get(version, transaction_version)`` stops the one
    running when another kind is asked for, and heals the one it hands out."""

    def __init__(self):
        self.kind: tuple | None = None
        self.cluster: KafkaCluster | None = None

    def get(self, version: str, transaction_version: int | None) -> KafkaCluster:
        kind = (version, transaction_version)
        if kind != self.kind:
            self.stop()
            self.cluster = KafkaCluster(
                version, nodes=3, transaction_version=transaction_version
            ).start()
            self.kind = kind
        heal(self.cluster)
        return self.cluster

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
        self.cluster, self.kind = None, None


def paused(cluster: KafkaCluster, node: int) -> bool:
    """Whether ``node``'s JVM is stopped (SIGSTOP): its state in /proc is 'T'."""
    if not cluster.running(node):
        return False
    try:
        with open(f"/proc/{cluster.pid(node)}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("T", "t")
    except OSError:
        return False


def heal(cluster: KafkaCluster, timeout_s: float = 240) -> None:
    """Every node running and answering, every replica of every partition in sync."""
    for node in sorted(cluster.nodes):
        if paused(cluster, node):
            cluster.resume(node)
        elif not cluster.running(node):
            cluster.restart(node)
    wait_in_sync(cluster, timeout_s)


def wait_in_sync(cluster: KafkaCluster, timeout_s: float = 240) -> float:
    """Wait until the metadata lists every node and each partition of every topic has a
    leader and all its replicas in its ISR; returns the seconds waited."""
    started = time.monotonic()
    last = "no answer"
    while time.monotonic() - started < timeout_s:
        try:
            with KafkaClient(
                bootstrap_servers=cluster.bootstrap,
                request_timeout_ms=5000,
                connect_timeout_ms=2000,
            ) as client:
                meta = client.refresh_metadata(None)
            behind = [
                f"{t}-{p.partition} isr {p.isr} of {p.replicas}"
                for t, info in meta.topics.items()
                for p in info.partitions.values()
                if p.leader < 0 or set(p.replicas) - set(p.isr)
            ]
            if set(meta.brokers) >= set(cluster.nodes) and not behind:
                return time.monotonic() - started
            last = f"brokers {sorted(meta.brokers)}; behind: {behind[:5]}"
        except PyKafkaError as e:
            last = str(e)
        time.sleep(0.25)  # a wait helper's poll; its failure says what was still behind
    raise AssertionError(f"the cluster did not heal in {timeout_s:.0f} s: {last}")


def leaders(cluster: KafkaCluster, asking=None) -> dict[tuple[str, int], int]:
    """The leader of every partition of every topic (internal ones too), asked of the
    nodes ``asking`` (every node by default)."""
    with KafkaClient(
        bootstrap_servers=cluster.listener("PLAINTEXT", asking), request_timeout_ms=5000
    ) as client:
        meta = client.refresh_metadata(None)
    return {
        (t, p.partition): p.leader
        for t, info in meta.topics.items()
        for p in info.partitions.values()
    }


def leader_of(cluster: KafkaCluster, topic: str, partition: int) -> int:
    with KafkaClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=5000) as client:
        return client.refresh_metadata([topic]).topics[topic].partitions[partition].leader


def wait_leader_moved(
    cluster: KafkaCluster, topic: str, partition: int, old: int, timeout_s: float = 60
) -> int:
    """The new leader of ``partition`` once the controller moved it off ``old``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            leader = leader_of(cluster, topic, partition)
            if leader >= 0 and leader != old:
                return leader
        except PyKafkaError:
            pass
        time.sleep(0.2)  # a wait helper's poll
    raise AssertionError(f"{topic}-{partition}: still led by node {old} after {timeout_s} s")


def active_controller(cluster: KafkaCluster) -> int:
    """The node leading the KRaft quorum (``kafka-metadata-quorum.sh describe --status``).
    A paused broker is fenced after ``SESSION_TIMEOUT_S`` by the active controller; when
    the paused node is that controller, the quorum first elects another, which then
    starts counting."""
    run = cluster.tool(
        "org.apache.kafka.tools.MetadataQuorumCommand",
        "--bootstrap-server",
        cluster.bootstrap,
        "describe",
        "--status",
    )
    for line in run.stdout.splitlines():
        if line.startswith("LeaderId:"):
            return int(line.split(":", 1)[1])
    raise AssertionError(f"no LeaderId in: {run.stdout!r}")


def broker_not_controlling(cluster: KafkaCluster) -> int:
    """A node that is not the active controller: pausing it stops a broker only."""
    controller = active_controller(cluster)
    return max(n for n in cluster.nodes if n != controller)


def coordinator_of(cluster: KafkaCluster, transactional_id: str) -> int:
    """The node coordinating ``transactional_id`` (FindCoordinator)."""
    with KafkaClient(bootstrap_servers=cluster.bootstrap) as client:
        return client.coordinator(transactional_id, TRANSACTION_KEY).node_id


@dataclass
class Fault:
    kind: str  # "SIGKILL" or "SIGSTOP"
    node: int
    at: float  # time.time() when the signal was sent
    held_s: float  # how long the node was down or stopped
    healed_s: float  # from the signal until every replica was in sync again
    leaders_moved: int  # partitions (internal ones too) led elsewhere: after a SIGKILL
    # once healed, during a SIGSTOP once fenced


class FaultInjector(threading.Thread):
    """Kills or pauses one node at a time, in turn, every ``every_s`` seconds (a random
    pause in that range after the cluster healed from the last fault), at most ``count``
    faults or until ``stop()``. A killed node is down ``kill_hold_s`` before it is started
    again; a paused one stays stopped until the controller fenced it (its partitions led
    elsewhere), then ``stop_hold_s`` more. ``kinds`` cycles over "SIGKILL" and
    "SIGSTOP"; ``nodes`` (a callable giving the first node) picks where the turn starts.
    An error in the thread is kept in ``error`` for the test to raise."""

    def __init__(
        self,
        cluster: KafkaCluster,
        *,
        count: int,
        every_s=(10.0, 15.0),
        first_after_s: float | None = None,
        kinds=("SIGKILL", "SIGSTOP"),
        kill_hold_s: float = 3.0,
        stop_hold_s: float = 5.0,
        first_node=None,
        seed: int = 29,
    ):
        super().__init__(name="kafka-fault-injector", daemon=True)
        self.cluster, self.count, self.every_s = cluster, count, every_s
        self.first_after_s = first_after_s
        self.kinds, self.kill_hold_s, self.stop_hold_s = kinds, kill_hold_s, stop_hold_s
        self.first_node = first_node
        self.rng = random.Random(seed)
        self.faults: list[Fault] = []
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def stop(self) -> None:
        """No new fault; the one under way finishes (the cluster heals) first."""
        self._halt.set()

    def run(self) -> None:
        try:
            nodes = sorted(self.cluster.nodes)
            start = self.first_node() if self.first_node else nodes[0]
            order = nodes[nodes.index(start) :] + nodes[: nodes.index(start)]
            wait = (
                self.first_after_s
                if self.first_after_s is not None
                else self.rng.uniform(*self.every_s)
            )
            for i in range(self.count):
                if self._halt.wait(wait):
                    return
                self.faults.append(
                    self.inject(self.kinds[i % len(self.kinds)], order[i % len(order)])
                )
                wait = self.rng.uniform(*self.every_s)
        except BaseException as e:  # raised by the test (check)
            self.error = e
        finally:
            try:
                heal(self.cluster)
            except BaseException as e:
                self.error = self.error or e

    def inject(self, kind: str, node: int) -> Fault:
        before = leaders(self.cluster)
        at, started = time.time(), time.monotonic()
        if kind == "SIGKILL":
            self.cluster.kill(node)
            time.sleep(self.kill_hold_s)  # the node down this long: the fault injected
            held = time.monotonic() - started
            self.cluster.restart(node)
            wait_in_sync(self.cluster)
            after = leaders(self.cluster)
            moved = sum(1 for tp, n in before.items() if tp in after and after[tp] != n)
        else:
            self.cluster.pause(node)
            # counted while it is paused: once it is back, Kafka may hand it its
            # preferred leaderships again before the cluster is seen healed
            moved = self._wait_fenced(node, before)
            time.sleep(self.stop_hold_s)  # the node paused this long: the fault injected
            held = time.monotonic() - started
            self.cluster.resume(node)
            wait_in_sync(self.cluster)
        healed = round(time.monotonic() - started, 1)
        return Fault(kind, node, at, round(held, 1), healed, moved)

    def _wait_fenced(self, node: int, before: dict, timeout_s: float = 90) -> int:
        """How many partitions ``node`` led, once the other nodes lead them all: the active
        controller fenced it (``broker.session.timeout.ms`` after its last heartbeat; when
        ``node`` is the active controller, after the quorum elected another). Under load
        that can take longer than any fixed hold, so the hold starts from here."""
        others = [n for n in sorted(self.cluster.nodes) if n != node]
        led = [tp for tp, n in before.items() if n == node]
        deadline = time.monotonic() + timeout_s
        now = {}
        while time.monotonic() < deadline:
            try:
                now = leaders(self.cluster, others)
                if all(now.get(tp, node) not in (node, -1) for tp in led):
                    return len(led)
            except PyKafkaError:
                pass
            time.sleep(0.5)  # a wait helper's poll; its failure names the partitions
        raise AssertionError(
            f"node {node} SIGSTOPped {timeout_s:.0f} s and still leading "
            f"{[tp for tp in led if now.get(tp, node) in (node, -1)][:5]}"
        )

    def check(self) -> None:
        if self.error is not None:
            raise AssertionError(f"the fault injector failed: {self.error!r}") from self.error

    def summary(self) -> list[str]:
        return [
            f"{f.kind} node {f.node} at {time.strftime('%H:%M:%S', time.localtime(f.at))}"
            f" ({f.held_s} s, healed after {f.healed_s} s, {f.leaders_moved} partitions "
            f"led elsewhere)"
            for f in self.faults
        ]


def _table_rows(text: str) -> list[list[str]]:
    """The rows of a kafka-transactions.sh table (tab-separated, header first)."""
    lines = [line for line in text.splitlines() if line.strip()]
    return [[cell.strip() for cell in line.split("\t") if cell.strip()] for line in lines[1:]]


def coordinators_list(cluster: KafkaCluster, prefix: str) -> list[list[str]]:
    """``kafka-transactions.sh list``: (transactional id, coordinator, producer id, state)
    of every id starting with ``prefix``."""
    run = cluster.tool(TRANSACTIONS_COMMAND, "--bootstrap-server", cluster.bootstrap, "list")
    assert "TransactionalId" in run.stdout, f"unexpected output: {run.stdout!r}"
    return [r for r in _table_rows(run.stdout) if r and r[0].startswith(prefix)]


def unfinished(listed: list[list[str]]) -> list[str]:
    """The transactions of a ``coordinators_list`` that are not over (Ongoing,
    PrepareCommit, PrepareAbort, PrepareEpochFence)."""
    return [" ".join(r) for r in listed if r[-1] in UNFINISHED_STATES]


def hanging_transactions(cluster: KafkaCluster) -> dict[int, list[str]]:
    """``kafka-transactions.sh find-hanging --broker-id N --max-transaction-timeout 0`` for
    each node, run side by side: every partition replica there with a transaction open
    (by its producer state) that its coordinator does not know of. With the timeout 0 any
    open transaction is a candidate, not only those older than 15 minutes."""
    found: dict[int, list[str]] = {}
    errors: list[BaseException] = []

    def one(node: int) -> None:
        try:
            run = cluster.tool(
                TRANSACTIONS_COMMAND,
                "--bootstrap-server",
                cluster.bootstrap,
                "find-hanging",
                "--broker-id",
                str(node),
                "--max-transaction-timeout",
                "0",
            )
            assert "Topic" in run.stdout, f"unexpected output: {run.stdout!r}"
            found[node] = [" ".join(r) for r in _table_rows(run.stdout)]
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=one, args=(n,)) for n in sorted(cluster.nodes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    if errors:
        raise errors[0]
    return found


def create_topic(
    cluster: KafkaCluster,
    name: str,
    partitions: int,
    *,
    leader: int | None = None,
    configs: dict[str, str] | None = None,
) -> None:
    """``name`` with three replicas per partition; with ``leader``, that node is the first
    replica (the preferred leader) of every partition, so one node leads them all."""
    from protocol.errors import BrokerError
    from protocol.schemas import CREATE_TOPICS

    nodes = sorted(cluster.nodes)
    assignments = []
    if leader is not None:
        others = [n for n in nodes if n != leader]
        assignments = [
            {
                "partition_index": p,
                "broker_ids": [leader] + (others if p % 2 == 0 else others[::-1]),
            }
            for p in range(partitions)
        ]
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": -1 if assignments else partitions,
                "replication_factor": -1 if assignments else len(nodes),
                "assignments": assignments,
                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
            }
        ],
        "timeout_ms": 30_000,
        "validate_only": False,
    }
    with KafkaClient(bootstrap_servers=cluster.bootstrap) as client:
        response = client.connection(nodes[0]).request(CREATE_TOPICS, body)
        for t in response["topics"]:
            if t["error_code"]:
                raise BrokerError.for_code(t["error_code"], t.get("error_message"), topic=name)
        client.wait_for_topics([name])
