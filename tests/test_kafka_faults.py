"""Apache Kafka brokers dying under a query, on a cluster of three nodes (replication
factor 3, ``min.insync.replicas`` 2), after Kafka's own system tests
(``replication_test``, ``transactions_test``) and Jepsen's faults:

1. ``df.write`` with ``acks=all`` and the idempotent producer (both the defaults) while the
   leader of a partition is SIGKILLed and started again, time after time: every row once,
   in order per partition and key, by librdkafka's consumer and by our ``spark.read``;
2. an ``exactlyOnce`` stream from topic to topic while nodes are SIGKILLed or SIGSTOPped
   in turn, and its driver (a child process) is SIGKILLed at kill points and restarted
   from its checkpoint: every source record once in the target under read_committed,
   nothing else, and no transaction left open by the log, by ``kafka-transactions.sh
   list`` and by ``find-hanging`` on every node; on transaction.version 1 and 2 (4.4.0)
   and on 3.9.2;
3. a ``readStream`` while the node leading its partitions is SIGSTOPped: no record lost
   or read twice, the stall bounded by ``kafka.request.timeout.ms`` rather than by the
   pause, a warning naming the silent broker, and no query restart.

The tests kill nodes, so the module runs clusters of its own (``broker_faults.Clusters``)
and heals them (every node running, every replica in sync) between tests. ``make test``
runs small versions (20,000 rows and 2 kills; one broker fault and one driver kill on
4.4.0 with transaction.version 2; an 8 s pause); ``PYKAFKA_SOAK=1`` (``make soak``) the
full ones (200,000 rows and 5 kills; 8 broker faults and two driver kills on each of
4.4.0 tv2, 4.4.0 tv1 and 3.9.2; a 30 s pause). Each records its figures with
``tests.helpers.reliability_report.record`` (section "Apache Kafka, brokers dying" of
tests/RELIABILITY.md).
"""

from __future__ import annotations

import collections
import glob
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import confluent_kafka
import pytest

from kafka_testbed import NEWEST_KAFKA, OLDEST_KAFKA
from protocol.client.cluster import KafkaClient

from .helpers.broker_faults import (
    SESSION_TIMEOUT_S,
    Clusters,
    FaultInjector,
    broker_not_controlling,
    coordinator_of,
    coordinators_list,
    create_topic,
    hanging_transactions,
    heal,
    leader_of,
    unfinished,
    wait_in_sync,
    wait_leader_moved,
)
from .helpers.eos_stream_child import pipeline
from .helpers.kill_points import ENV as KILL_AT
from .helpers.kill_points import child_env
from .helpers.reliability_report import record, soak
from .helpers.soak_forensics import committed_ends
from .helpers.read_committed import our_read_committed
from .helpers.sink import consume
from .helpers.waiting import wait_until
from .helpers.txn_referee import (
    aborted_values,
    committed_values,
    librdkafka_read_committed,
    log_of,
    open_transactions,
    stable_offsets_behind,
)

pytestmark = [pytest.mark.spark, pytest.mark.broker_faults]

SOAK = soak()
MODE = "soak" if SOAK else "small"
REPO = Path(__file__).resolve().parent.parent
SECTION = "kafka_faults"

# 1. df.write while a partition's leader is killed
WRITE_ROWS = 200_000 if SOAK else 20_000
WRITE_KILLS = 5 if SOAK else 2
SEGMENT_S = 8.0  # each slice of the write (one per kill, and the last) flows this long

# 2. the exactly-once stream
STREAM_KINDS = (
    [(NEWEST_KAFKA, 2), (NEWEST_KAFKA, 1), (OLDEST_KAFKA, None)] if SOAK else [(NEWEST_KAFKA, 2)]
)
STREAM_FAULTS = 8 if SOAK else 1
DRIVER_KILLS = ("between_commits", "after_commit") if SOAK else ("between_commits",)
SOURCE_RATE = 150  # records/s into the source topic (3 partitions)
CHILD_TIMEOUT_S = 900  # a loaded machine takes minutes to start a driver and its workers

# 3. a readStream while its partitions' leader is paused
PAUSE_S = 30.0 if SOAK else 8.0
REQUEST_TIMEOUT_MS = 5000  # the source's kafka.request.timeout.ms
STALL_SLACK_S = 15.0  # a loaded 2-core machine: Spark's trigger, the tasks' start


@pytest.fixture(scope="module")
def clusters():
    owned = Clusters()
    try:
        yield owned
    finally:
        owned.stop()


@pytest.fixture
def kafka3(clusters):
    """The newest Kafka, 3 nodes, transaction.version 2, healed before and after."""
    cluster = clusters.get(NEWEST_KAFKA, 2)
    yield cluster
    heal(cluster)


def _kind(version: str, tv: int | None) -> str:
    """``kafka-4.4.0-tv2``; ``kafka-3.9.2`` for a version without transaction.version 2."""
    return f"kafka-{version}" + (f"-tv{tv}" if tv is not None else "")


class SourceProducer:
    """confluent-kafka's idempotent producer (acks=all) writing ``prefix-<n>`` to
    partition ``n % partitions`` at ``rate`` records a second until ``stop()``."""

    def __init__(
        self, bootstrap: str, topic: str, partitions: int, rate: float, prefix: str = "s", **config
    ):
        self.topic, self.partitions, self.rate, self.prefix = topic, partitions, rate, prefix
        self.producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 300_000,
                **config,
            }
        )
        self.acked: list[str] = []
        self.errors: list = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="source-producer", daemon=True)

    def _delivered(self, err, msg) -> None:
        if err:
            self.errors.append(err)
        else:
            self.acked.append(msg.value().decode())

    def _run(self) -> None:
        period = 1 / self.rate
        while not self._stop.is_set():
            n = self.sent
            self.producer.produce(
                self.topic,
                value=f"{self.prefix}-{n}".encode(),
                partition=n % self.partitions,
                on_delivery=self._delivered,
            )
            self.sent += 1
            self.producer.poll(0)
            time.sleep(period)  # paces the source producer: ``rate`` records a second

    def start(self) -> SourceProducer:
        self._thread.start()
        return self

    def halt(self) -> None:
        """Stop producing and let go of the producer (no checks: for a test's cleanup)."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(60)
        self.producer = None  # librdkafka's handle goes before the cluster does

    def stop(self) -> None:
        """Stop producing, deliver what is queued, and check every record was acked."""
        self._stop.set()
        self._thread.join(60)
        left = self.producer.flush(300)
        assert left == 0, f"{left} source records not delivered: {self.errors[:3]}"
        assert self.errors == [], f"source producer errors: {self.errors[:5]}"
        assert len(self.acked) == self.sent


def latest_offsets(cluster, topic: str, partitions: int) -> dict[int, int]:
    with KafkaClient(bootstrap_servers=cluster.bootstrap) as client:
        ends = client.latest_offsets([(topic, p) for p in range(partitions)])
    return {p: o for (_, p), o in ends.items()}


def _wait_for(condition, timeout_s: float, what, *, check=lambda: None) -> float:
    """Seconds until ``condition()`` held; ``check()`` (which may raise) before each try."""
    started = time.monotonic()
    wait_until(lambda: check() or condition(), timeout_s, what, interval=0.2)
    return time.monotonic() - started


# ---- 1. df.write while the leader of a partition is SIGKILLed -----------------------------

#: Spark moves rows between the JVM and Python workers through 64 KB buffers
#: (``spark.buffer.size``) flushed only when full, so a slow trickle of small rows reaches
#: the writer all at once at the end of the task; each value is padded so that a fifth of
#: a second of the paced rows fills a buffer.
FLUSH_BYTES = 65_536


def pad_for(rows_per_second: float) -> int:
    return max(16, -(-FLUSH_BYTES // max(1, int(rows_per_second / 5))))


def paced(gate: str, rows_per_task: int, segments: int, segment_s: float, pad: int):
    """A ``mapInArrow`` function from ids to the rows to write (``partition`` = id % 3,
    ``key`` = ``write_key``, ``value`` = the id in 9 digits and ``pad`` dots) that lets
    each task's rows through in ``segments`` slices, about ``segment_s`` seconds each (ten
    small batches a second): slice k only once the number in the file ``gate`` (faults
    done) is at least k. So each fault meets a write in full flow, and no task ends
    before the last fault."""
    per_slice = -(-rows_per_task // segments)
    chunk = max(1, int(per_slice / (segment_s * 10)))

    def rows(ids):
        import pyarrow as pa

        ids = ids.to_pylist()
        return pa.RecordBatch.from_arrays(
            [
                pa.array([i % 3 for i in ids], pa.int32()),
                pa.array([f"w{i // rows_per_task}-p{i % 3}" for i in ids]),  # write_key
                pa.array([f"{i:09d}" + "." * pad for i in ids]),
            ],
            names=["partition", "key", "value"],
        )

    def pace(batches):
        emitted = 0
        for batch in batches:
            for start in range(0, batch.num_rows, chunk):
                while True:
                    with open(gate) as f:
                        opened = int(f.read().strip() or 0)
                    if emitted < per_slice * (opened + 1):
                        break
                    time.sleep(0.05)  # a task's pacer, in Spark's worker: the gate's poll
                piece = batch.column(0).slice(start, chunk)
                emitted += len(piece)
                yield rows(piece)
                time.sleep(0.1)  # paces the write: the faults meet it in flow

    return pace


def wait_flowing(
    cluster, topic: str, partition: int, written: threading.Event, timeout_s: float = 240
) -> None:
    """Until the end offset of ``partition`` grows (the write is in flow)."""
    ends: list[int] = []

    def grew() -> bool:
        assert not written.is_set(), "the write ended before the faults"
        ends.append(latest_offsets(cluster, topic, partition + 1)[partition])
        return len(ends) > 1 and ends[-1] > ends[-2]

    wait_until(grew, timeout_s, f"{topic}-{partition}: records written", interval=0.3)


def write_key(i: int, half: int) -> str:
    """The key of row ``i``: its task (``w0``/``w1``) and partition; within one key the
    ids are a sequence the log must keep in order."""
    return f"w{i // half}-p{i % 3}"


def judge_write(per_partition: dict[int, list[tuple[str, str]]], total: int) -> dict:
    """Lost, duplicated, foreign, misplaced rows and keys whose ids are out of order, from
    ``{partition: [(key, value), ...]}`` in log order."""
    half = total // 2
    seen: collections.Counter = collections.Counter()
    out_of_order, misplaced = [], []
    for p, records in per_partition.items():
        by_key = collections.defaultdict(list)
        for key, value in records:
            i = int(value[:9])
            seen[i] += 1
            by_key[key].append(i)
            if i % 3 != p or key != write_key(i, half):
                misplaced.append((p, key, i))
        for key, ids in by_key.items():
            if any(b <= a for a, b in zip(ids, ids[1:])):
                out_of_order.append(f"partition {p} key {key}")
    wanted = set(range(total))
    return {
        "lost": len(wanted - set(seen)),
        "duplicated": sum(n - 1 for n in seen.values()),
        "foreign": len(set(seen) - wanted),
        "misplaced": misplaced[:5],
        "out_of_order": out_of_order,
    }


def read_with_spark(spark, bootstrap: str, topic: str) -> dict[int, list[tuple[str, str]]]:
    rows = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
        .selectExpr("partition", "offset", "CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v")
        .collect()
    )
    out: dict[int, list] = collections.defaultdict(list)
    for r in sorted(rows, key=lambda r: (r.partition, r.offset)):
        out[r.partition].append((r.k, r.v))
    return out


@pytest.mark.timeout(1800 if SOAK else 900)
def test_df_write_while_a_partition_leader_is_killed_again_and_again(spark, kafka3, tmp_path):
    """``df.write`` (two tasks, each writing to the three partitions with keys
    ``w<task>-p<partition>``, its ids ascending) with the default ``acks=all`` and
    idempotent producer, while the leader of partition 0 is SIGKILLed, the partition
    moves to another replica, and the node is started again: 5 times (2 in make test).
    Each kill meets the write in full flow (``paced``). Both librdkafka's consumer and our
    ``spark.read`` must see every row exactly once, nothing else, and within each key of
    each partition the ids in ascending order. Every batch in the log carries a producer
    id (the idempotent producer is the default)."""
    cluster = kafka3
    topic = f"kf-write-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, topic, 3)
    gate = tmp_path / "gate"
    gate.write_text("0")
    half = WRITE_ROWS // 2
    pad = pad_for(half / (WRITE_KILLS + 1) / SEGMENT_S)
    df = spark.range(0, WRITE_ROWS, 1, numPartitions=2).mapInArrow(
        paced(str(gate), half, WRITE_KILLS + 1, SEGMENT_S, pad),
        "partition int, key string, value string",
    )
    kills: list[dict] = []
    errors: list[BaseException] = []
    written = threading.Event()

    def kill_leaders() -> None:
        """Kill the leader of partition 0 each time the write is in flow, wait until the
        partition moved, start the node again, wait until every replica is in sync, and
        only then let the write's next slice through."""
        try:
            for k in range(WRITE_KILLS):
                wait_flowing(cluster, topic, 0, written)
                leader = leader_of(cluster, topic, 0)
                killed_at = time.monotonic()
                cluster.kill(leader)
                new_leader = wait_leader_moved(cluster, topic, 0, leader)
                moved_s = time.monotonic() - killed_at
                cluster.restart(leader)
                wait_in_sync(cluster)
                kills.append(
                    {
                        "node": leader,
                        "new_leader": new_leader,
                        "moved_s": moved_s,
                        "healed_s": time.monotonic() - killed_at,
                    }
                )
                gate.write_text(str(k + 1))
        except BaseException as e:
            errors.append(e)
        finally:
            gate.write_text(str(WRITE_KILLS + 1))  # never hold the write back for good

    batch_rows = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "200")  # keep the pace
    killer = threading.Thread(target=kill_leaders, name="leader-killer", daemon=True)
    started = time.monotonic()
    try:
        killer.start()
        # in this thread: a DataFrame written from another thread does not find the
        # data source registered on the session
        # checkBeforeSendBytes=0: send as soon as a batch is full (by default a task holds
        # its first 4 MB back, checked, which is more than a slice of this paced write)
        (
            df.write.format("pykafka")
            .option("kafka.bootstrap.servers", cluster.bootstrap)
            .option("topic", topic)
            .option("checkBeforeSendBytes", "0")
            .mode("append")
            .save()
        )
    finally:
        written.set()
        killer.join(600)
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", batch_rows)
    seconds = time.monotonic() - started
    assert not errors, f"killing the leaders failed: {errors[0]!r}"

    rdkafka = {
        p: [(k.decode(), v.decode()) for k, v, _, _ in recs]
        for p, recs in consume(cluster.bootstrap, topic, 3, WRITE_ROWS, timeout=180).items()
    }
    ours = read_with_spark(spark, cluster.bootstrap, topic)
    by_rdkafka, by_ours = judge_write(rdkafka, WRITE_ROWS), judge_write(ours, WRITE_ROWS)
    batches = [h for _, h, _ in log_of(cluster.bootstrap, topic, 3)]
    without_producer_id = sum(1 for h in batches if h.producer_id < 0)
    record(
        "kafka-faults/df_write_leader_killed",
        section=SECTION,
        mode=MODE,
        what=f"df.write of {WRITE_ROWS:,} rows (acks=all, idempotent: the defaults) while "
        f"the leader of a partition is SIGKILLed and restarted {WRITE_KILLS} times; "
        "read back by librdkafka and spark.read",
        faults=len(kills),
        records=WRITE_ROWS,
        lost=max(by_rdkafka["lost"], by_ours["lost"]),
        duplicated=max(by_rdkafka["duplicated"], by_ours["duplicated"]),
        seconds=seconds,
        kafka=cluster.version,
        transaction_version=2,
        keys_out_of_order=len(by_rdkafka["out_of_order"]) + len(by_ours["out_of_order"]),
        leader_moved_after_s_max=round(max(k["moved_s"] for k in kills), 1),
        healed_after_s_max=round(max(k["healed_s"] for k in kills), 1),
        producer_ids=len({h.producer_id for h in batches}),
        batches_without_producer_id=without_producer_id,
    )
    assert len(kills) == WRITE_KILLS
    for name, verdict in (("librdkafka", by_rdkafka), ("spark.read", by_ours)):
        assert verdict == {
            "lost": 0,
            "duplicated": 0,
            "foreign": 0,
            "misplaced": [],
            "out_of_order": [],
        }, f"{name}: {verdict}"
    assert without_producer_id == 0, "batches written without a producer id"


# ---- 3. a readStream while the leader of its partitions is SIGSTOPped ---------------------


def _batches(out: Path) -> list[dict]:
    found = []
    for path in glob.glob(str(out / "batch-*.json")):
        with open(path) as f:
            found.append(json.load(f))
    return sorted(found, key=lambda b: b["batch"])


#: The stream is live when its last two micro-batches with rows got every record within
#: this many seconds of the broker appending it.
LIVE_LATENCY_S = 5.0


def live_since(batches: list[dict]) -> float | None:
    """When the stream became live (the later of its last two batches with rows, if both
    had every record within ``LIVE_LATENCY_S`` of its append), else None."""
    full = [b for b in batches if b["rows"]][-2:]
    if len(full) < 2 or any(b["at"] - min(r[3] for r in b["rows"]) > LIVE_LATENCY_S for b in full):
        return None
    return full[-1]["at"]


def _warnings_naming(stderr: str, address: str, node: int) -> list[str]:
    return [
        line.strip()
        for line in stderr.splitlines()
        if (address in line or f"broker {node}" in line) and ("ms" in line or " s" in line)
    ]


@pytest.mark.timeout(1200 if SOAK else 900)
def test_read_stream_while_the_leader_of_its_partitions_is_paused(kafka3, tmp_path):
    """A ``readStream`` (a child driver, ``kafka.request.timeout.ms`` 5000) of two
    partitions both led by one node, with a producer writing to them, while that node is
    SIGSTOPped for 30 s (8 s in make test): its sockets stay open and nothing answers;
    the controller moves its partitions after ``broker.session.timeout.ms`` (6 s).
    Every offset reaches the sink once, the query never fails or restarts, and the stall
    (how long after the broker appended a record, LogAppendTime, the sink got it) stays
    within the request timeout's bound, not the pause's (in the soak, rows reach the sink
    while the node is still stopped); the source logs a warning that names the silent
    broker and how long it waited."""
    cluster = kafka3
    leader = broker_not_controlling(cluster)
    address = cluster.listener("PLAINTEXT", [leader])
    topic = f"kf-read-{uuid.uuid4().hex[:8]}"
    create_topic(
        cluster, topic, 2, leader=leader, configs={"message.timestamp.type": "LogAppendTime"}
    )
    assert {leader_of(cluster, topic, p) for p in (0, 1)} == {leader}
    out, stopfile = tmp_path / "out", tmp_path / "stop"
    out.mkdir()
    stderr_path = tmp_path / "child.stderr"
    # Not idempotent, with a request timeout of 5 s: so the producer goes on to the new
    # leader while the old one is stopped (librdkafka's idempotent producer waits for the
    # requests in flight to the stopped leader, the whole pause). A resent record may
    # be appended twice: the referee counts offsets, not values.
    producer = SourceProducer(
        cluster.bootstrap,
        topic,
        2,
        rate=100,
        prefix="r",
        **{"enable.idempotence": False, "request.timeout.ms": 5000},
    ).start()
    started = time.monotonic()
    with open(stderr_path, "wb") as stderr:
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.helpers.kafka_faults_child",
                "read",
                cluster.bootstrap,
                topic,
                str(tmp_path / "ck"),
                str(out),
                str(stopfile),
                str(REQUEST_TIMEOUT_MS),
            ],
            cwd=REPO,
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=stderr,
            start_new_session=True,
        )
    try:

        def alive():
            assert child.poll() is None, f"the child ended: {_tail(stderr_path)}"

        # pause only once the stream is live (caught up with the producer), so the pause
        # meets its fetches and offset lookups, not Spark busy with a backlog
        _wait_for(
            lambda: live_since(_batches(out)) is not None,
            400,
            "the stream never caught up with the producer",
            check=alive,
        )
        live_at = live_since(_batches(out))
        paused_at = time.time()
        cluster.pause(leader)
        try:
            time.sleep(PAUSE_S)  # the pause under test
        finally:
            cluster.resume(leader)
        resumed_at = time.time()
        acked_at_resume = len(producer.acked)
        # records appended after the pause, by whichever node leads now (10 s of them)
        _wait_for(
            lambda: len(producer.acked) >= acked_at_resume + 1000,
            120,
            "records acknowledged after the pause",
            check=alive,
        )
        producer.stop()
        ends = latest_offsets(cluster, topic, 2)
        expected = {(p, o) for p, end in ends.items() for o in range(end)}

        def delivered():
            return {(r[0], r[1]) for b in _batches(out) for r in b["rows"]}

        _wait_for(
            lambda: expected <= delivered(),
            240,
            lambda: f"{len(expected - delivered())} offsets never reached the sink",
            check=alive,
        )
        stopfile.write_text("stop")
        child.wait(120)
        said = child.stdout.read().decode()
    finally:
        producer.halt()
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)
        child.stdout.close()
    seconds = time.monotonic() - started
    stderr_text = stderr_path.read_text(errors="replace")

    batches = _batches(out)
    rows = [(r, b["at"]) for b in batches for r in b["rows"]]
    seen = collections.Counter((r[0], r[1]) for r, _ in rows)
    lost = len(expected - set(seen))
    duplicated = sum(n - 1 for n in seen.values())
    # (seconds from the broker's append to the sink, append time) of every record
    # appended once the stream was live
    latency = [(at - r[3], r[3]) for r, at in rows if r[3] >= live_at]
    stall = max(lag for lag, _ in latency)
    before = sorted(lag for lag, ts in latency if ts < paused_at)
    baseline = before[len(before) // 2] if before else None
    # the stopped leader answers nothing: what reached the sink during the pause came
    # from the node leading the partitions since
    during = [b["at"] for b in batches if b["rows"] and paused_at < b["at"] < resumed_at]
    moved_on = min(during) - paused_at if during else None
    warned = _warnings_naming(stderr_text, address, leader)
    bound = min(PAUSE_S, SESSION_TIMEOUT_S + 2 * REQUEST_TIMEOUT_MS / 1000) + STALL_SLACK_S
    record(
        "kafka-faults/read_stream_leader_paused",
        section=SECTION,
        mode=MODE,
        what=f"readStream of 2 partitions while the node leading both is SIGSTOPped "
        f"{PAUSE_S:.0f} s (kafka.request.timeout.ms={REQUEST_TIMEOUT_MS})",
        faults=1,
        records=len(expected),
        lost=lost,
        duplicated=duplicated,
        seconds=seconds,
        kafka=cluster.version,
        transaction_version=2,
        pause_s=round(resumed_at - paused_at, 1),
        stall_s=round(stall, 1),
        stall_bound_s=round(bound, 1),
        latency_before_the_pause_s=None if baseline is None else round(baseline, 1),
        first_rows_during_the_pause_after_s=None if moved_on is None else round(moved_on, 1),
        micro_batches=len(batches),
        warnings_naming_the_broker=len(warned),
    )
    print(f"warnings naming broker {leader} ({address}):", *warned[:10], sep="\n")
    assert "query ended: None" in said, f"the query failed: {said}\n{_tail(stderr_path)}"
    assert (lost, duplicated) == (0, 0)
    assert set(seen) == expected
    assert {r[4] for r, _ in rows} == {1}, "records without LogAppendTime"
    assert set(producer.acked) <= {r[2] for r, _ in rows}
    assert stall <= bound, f"the stream stalled {stall:.1f} s (bound {bound:.1f} s)"
    if PAUSE_S > SESSION_TIMEOUT_S + 2 * REQUEST_TIMEOUT_MS / 1000:
        # the stream read from the new leader while the old one was still stopped
        assert moved_on is not None, "nothing reached the sink until the broker came back"
    assert warned, (
        f"no warning names the paused broker {leader} ({address}):\n{stderr_text[-3000:]}"
    )


def test_a_fetch_the_silent_leader_leaves_unanswered_is_a_warning_naming_it(kafka3, caplog):
    """``read_range`` (what a Spark task of the source runs) with
    ``kafka.request.timeout.ms`` 3000, its client warm from a first read, while the node
    leading the partition is SIGSTOPped for 8 s: every record is read once and in order,
    and the executor's log says which broker left a Fetch unanswered and for how long it
    waited, then how long the read stalled (a silent leader used to be retried without a
    word: only the driver's offset lookups warned)."""
    import logging

    from kafka_source.fetcher import read_range
    from kafka_source.offset_specs import OffsetRange
    from kafka_source.options import parse_reader_options

    cluster = kafka3
    leader = broker_not_controlling(cluster)
    address = cluster.listener("PLAINTEXT", [leader])
    topic = f"kf-fetch-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, topic, 1, leader=leader)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True}
    )
    for i in range(2000):
        producer.produce(topic, value=b"f-%d" % i, partition=0)
    assert producer.flush(60) == 0
    del producer
    opts = parse_reader_options(
        {
            "kafka.bootstrap.servers": cluster.bootstrap,
            "subscribe": topic,
            "kafka.request.timeout.ms": "3000",
            "kafka.max.partition.fetch.bytes": "4096",
        }
    )

    def values(start: int, end: int) -> list[str]:
        return [
            v.decode()
            for b in read_range(opts, OffsetRange(topic, 0, start, end))
            for v in b.column("value").to_pylist()
        ]

    assert values(0, 1000) == [f"f-{i}" for i in range(1000)]  # the pooled client, warm
    caplog.set_level(logging.WARNING, logger="pykafka.source")
    cluster.pause(leader)
    resume = threading.Timer(8.0, cluster.resume, args=(leader,))
    resume.start()
    try:
        started = time.monotonic()
        rest = values(1000, 2000)
        took = time.monotonic() - started
    finally:
        resume.join()
    assert rest == [f"f-{i}" for i in range(1000, 2000)]
    said = [r.getMessage() for r in caplog.records if r.name == "pykafka.source"]
    print(f"read in {took:.1f} s:", *said, sep="\n")
    unanswered = [m for m in said if "no answer to a Fetch" in m and address in m]
    assert unanswered and re.search(r"within (3[0-9]{3}) ms", unanswered[0]), said
    stalled = [
        float(x)
        for m in said
        for x in re.findall(r"reading again at offset 1000 after ([0-9.]+) s", m)
    ]
    assert stalled and 3.0 <= stalled[0] <= took + 0.5, said


# ---- 2. an exactly-once stream through broker faults and driver kills ---------------------


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no stderr)"


def _last_batch(checkpoint: Path) -> int:
    """The highest micro-batch id in the checkpoint's offset log, -1 before the first."""
    folder = checkpoint / "offsets"
    ids = [int(n) for n in os.listdir(folder) if n.isdigit()] if folder.is_dir() else []
    return max(ids, default=-1)


def _committed_batches(checkpoint: Path) -> int:
    folder = checkpoint / "commits"
    return len([n for n in os.listdir(folder) if n.isdigit()]) if folder.is_dir() else 0


def kill_driver_at(
    cluster, point: str, source: str, target: str, checkpoint: Path, prefix: str, log: Path
) -> int:
    """Run the stream in a child driver that SIGKILLs itself at ``point`` of the micro-batch
    two after the last one in the checkpoint; returns that batch id."""
    batch = _last_batch(checkpoint) + 3 if _last_batch(checkpoint) >= 0 else 2
    with open(log, "wb") as stderr:
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.helpers.kafka_faults_child",
                "eos",
                cluster.bootstrap,
                source,
                target,
                str(checkpoint),
                prefix,
            ],
            cwd=REPO,
            env=child_env(**{KILL_AT: f"{point}:{batch}"}),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        child.wait(CHILD_TIMEOUT_S)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)
    assert child.returncode == -signal.SIGKILL, (
        f"the driver was not killed at {point}:{batch} ({child.returncode}): {_tail(log)}"
    )
    assert not (checkpoint / "commits" / str(batch)).exists()
    return batch


@pytest.mark.timeout(5400 if SOAK else 1500)
@pytest.mark.parametrize("kind", STREAM_KINDS, ids=[_kind(*k) for k in STREAM_KINDS])
def test_exactly_once_stream_through_broker_faults_and_driver_kills(
    spark, clusters, kind, tmp_path
):
    """Topic to topic with ``exactlyOnce`` (3 partitions each, a producer writing into the
    source the whole time) while the nodes are SIGKILLed (down 3 s, then started again) or
    SIGSTOPped (until the controller fenced it, 6 s after its last heartbeat or later when
    the quorum must first elect another controller, then 5 s more) in turn, one at a time,
    every 10-15 s once the cluster healed (8 faults; in make test one SIGSTOP of the
    transaction coordinator), and the driver, a child process, SIGKILLs itself between two
    tasks' commits (and, in the soak, after the last commit of a later micro-batch) and is
    restarted from its checkpoint; the last run is this process's. Afterwards: by Kafka's
    rule on the log every source record is in the target exactly once and nothing else;
    librdkafka's and our read_committed readers show exactly that; no transaction is left
    open by the log, by the coordinators (``kafka-transactions.sh list``) or by any node's
    producer state (``find-hanging``)."""
    version, tv = kind
    cluster = clusters.get(version, tv)
    source, target = f"kf-src-{uuid.uuid4().hex[:8]}", f"kf-dst-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, source, 3)
    create_topic(cluster, target, 3)
    prefix = f"kf-{uuid.uuid4().hex[:8]}"
    checkpoint = tmp_path / "ck"
    injector = FaultInjector(
        cluster,
        count=STREAM_FAULTS,
        kinds=("SIGKILL", "SIGSTOP") if SOAK else ("SIGSTOP",),
        first_after_s=None if SOAK else 1.0,
        first_node=lambda: coordinator_of(cluster, f"{prefix}-0-0"),
    )
    producer = SourceProducer(cluster.bootstrap, source, 3, SOURCE_RATE).start()
    started = time.monotonic()
    killed_batches = []
    query = None
    try:
        if SOAK:
            injector.start()
        for i, point in enumerate(DRIVER_KILLS):
            killed_batches.append(
                kill_driver_at(
                    cluster,
                    point,
                    source,
                    target,
                    checkpoint,
                    prefix,
                    tmp_path / f"child-{i}.stderr",
                )
            )
            injector.check()
        before = _committed_batches(checkpoint)
        query = (
            pipeline(spark, cluster.bootstrap, source, target, str(checkpoint), prefix)
            .trigger(processingTime="1 second")
            .start()
        )

        def running():
            assert query.exception() is None, f"the query failed: {query.exception()}"
            injector.check()

        _wait_for(
            lambda: _committed_batches(checkpoint) > before + 1,
            300,
            "the restarted stream committed nothing",
            check=running,
        )
        if not SOAK:
            injector.start()
        _wait_for(lambda: not injector.is_alive(), 3000, "the faults did not end", check=running)
        injector.check()
        producer.stop()
        ends = latest_offsets(cluster, source, 3)
        _wait_for(
            lambda: all(committed_ends(str(checkpoint)).get(p, 0) >= e for p, e in ends.items()),
            300,
            lambda: f"the stream did not catch up: {committed_ends(str(checkpoint))} of {ends}",
            check=running,
        )
    finally:
        injector.stop()
        if query is not None:
            query.stop()
        producer.halt()
        if injector.ident is not None:
            injector.join(600)
        heal(cluster)
    seconds = time.monotonic() - started

    source_values = [
        r.value.decode() for _, h, recs in log_of(cluster.bootstrap, source, 3) for r in recs
    ]
    expected = collections.Counter(source_values)
    got = collections.Counter(committed_values(cluster.bootstrap, target, 3))
    lost = len(set(expected) - set(got))
    duplicated = sum(n - 1 for n in got.values())
    foreign = sorted(set(got) - set(expected))
    left_open = open_transactions(cluster.bootstrap, target, 3)
    behind = stable_offsets_behind(cluster.bootstrap, target, 3, wait_s=30)
    listed = coordinators_list(cluster, prefix)
    coordinators_open = unfinished(listed)
    hanging = hanging_transactions(cluster)
    by_rdkafka = sorted(librdkafka_read_committed(cluster.bootstrap, target, 3))
    by_ours = sorted(our_read_committed(spark, cluster.bootstrap, target))
    aborted = len(aborted_values(cluster.bootstrap, target, 3))
    kinds = collections.Counter(f.kind for f in injector.faults)
    print(
        f"{_kind(*kind)}: faults",
        *injector.summary(),
        f"driver killed in batches {killed_batches}",
        *(" ".join(r) for r in listed),
        sep="\n",
    )
    record(
        f"kafka-faults/exactly_once_stream_{_kind(*kind)}",
        section=SECTION,
        mode=MODE,
        what=f"exactlyOnce stream topic to topic on Kafka {version} "
        f"({f'transaction.version {tv}' if tv is not None else 'classic transactions'})"
        ": nodes "
        f"SIGKILLed or SIGSTOPped in turn, the driver SIGKILLed "
        f"{len(DRIVER_KILLS)} time(s) ({', '.join(DRIVER_KILLS)}) and restarted",
        faults=len(injector.faults) + len(killed_batches),
        records=sum(expected.values()),
        lost=lost,
        duplicated=duplicated,
        seconds=seconds,
        kafka=version,
        transaction_version=tv if tv is not None else "none (3.x)",
        partition_leaders_moved=sum(f.leaders_moved for f in injector.faults),
        sigkills=kinds["SIGKILL"],
        sigstops=kinds["SIGSTOP"],
        driver_kills=len(killed_batches),
        foreign=len(foreign),
        aborted_records=aborted,
        micro_batches=_committed_batches(checkpoint),
        transactions_left_open=len(left_open)
        + len(coordinators_open)
        + sum(len(v) for v in hanging.values()),
    )
    assert len(injector.faults) == STREAM_FAULTS and len(killed_batches) == len(DRIVER_KILLS)
    assert sum(f.leaders_moved for f in injector.faults) >= 1, (
        f"no fault moved a partition's leader: {injector.summary()}"
    )
    assert max(expected.values()) == 1, "the idempotent source producer wrote a value twice"
    assert (lost, duplicated, foreign) == (0, 0, []), (
        f"{lost} source records missing in the target, {duplicated} repeated, foreign {foreign[:5]}"
    )
    assert left_open == [] and behind == []
    assert coordinators_open == [], coordinators_open
    assert hanging == {n: [] for n in cluster.nodes}, hanging
    assert by_rdkafka == sorted(expected), "librdkafka's read_committed consumer differs"
    assert by_ours == sorted(expected), "our read_committed reader differs"
