"""An hour of streaming, measured (issue 41): an ``exactlyOnce`` stream topic to topic at
``RATE`` records/s of 1 KB, and beside it a readStream over a topic of ``WIDE`` partitions
(fed a trickle, round robin) into noop, both on one Apache Kafka node, for ``SECONDS``.

Every ``SAMPLE_S`` seconds a sampler notes Spark's Python workers' RSS (summed, and their
number), Spark's JVM's RSS, the open descriptors of both, the connections the broker holds
on its client listener (``/proc/net/tcp``) and the producer ids Kafka's transaction
coordinator lists for the stream's ``transactionalIdPrefix``. At the end the target is read
with read_committed: every value the source producer acknowledged is there exactly once.
Flat, after the warm-up (``WARMUP_S``): the workers' memory grows by less than
``RSS_GROWTH_MB`` (the last sample against the first after the warm-up, both the median of
a few samples), and descriptors, connections and producer ids stay within a small slack of
where they were. The series go to tests/RELIABILITY.md (drawn there as a picture by
``tests.helpers.reliability_report``).

``make soak`` runs it for an hour (marker ``soak_hour``, deselected by default; ``make
soak-hour`` runs it alone); ``PYKAFKA_SOAK_HOUR_SECONDS``, ``_RATE``, ``_WIDE`` and
``_SAMPLE_S`` set the knobs (a few minutes checks it: ``PYKAFKA_SOAK_HOUR_SECONDS=240
PYKAFKA_SOAK_HOUR_SAMPLE_S=10``).
"""

from __future__ import annotations

import os
import statistics
import threading
import time
import uuid

import numpy as np
import pytest

from kafka_testbed import KafkaCluster
from protocol.client.cluster import KafkaClient

from .helpers.broker_setup import create_wide_topic
from .helpers.reliability_report import record
from .helpers.soak_forensics import committed_ends, offset_log
from .helpers.txn_referee import TRANSACTIONS_COMMAND, _table
from .helpers.worker_stats import children, cmdline, forked_workers, open_fds, rss_kb

pytestmark = [pytest.mark.spark, pytest.mark.soak_hour]


def _knob(name: str, default: float) -> float:
    return float(os.environ.get(f"PYKAFKA_SOAK_HOUR_{name}", default))


SECONDS = _knob("SECONDS", 3600)
RATE = int(_knob("RATE", 3000))  # records/s into the source
WIDE = int(_knob("WIDE", 10_000))  # partitions of the topic the second readStream reads
SAMPLE_S = _knob("SAMPLE_S", 30)
WARMUP_S = min(300.0, SECONDS / 4)  # the first workers start, import, fill their pools
VALUE_BYTES = 1000
PARTITIONS = 4  # of the source and of the target
WIDE_RATE = 100  # records/s into the wide topic
HEAP_MB = 2048  # the wide topic's partitions
RSS_GROWTH_MB = 20 if SECONDS >= 1800 else 60  # a short run's workers are still warming up
FD_SLACK, CONNECTION_SLACK, PRODUCER_ID_SLACK = 16, 8, 2
CATCH_UP_S = 300


def _spark_jvm() -> int | None:
    """Spark's JVM: the java process started by this (driver) process."""
    for pid in children().get(os.getpid(), []):
        cmd = cmdline(pid)
        if "java" in cmd.split(" ", 1)[0] and "org.apache.spark" in cmd:
            return pid
    return None


def _connections_on(port: int) -> int:
    """Established TCP connections whose local port is ``port`` (the broker's side)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        count += 1
        except OSError:
            pass
    return count


def _producer_ids(kafka, prefix: str) -> int:
    run = kafka.tool(TRANSACTIONS_COMMAND, "--bootstrap-server", kafka.bootstrap, "list")
    return len(
        {
            row.get("ProducerId")
            for row in _table(run.stdout)
            if row.get("TransactionalId", "").startswith(prefix)
        }
    )


class HourSampler:
    """Every ``SAMPLE_S``: a dict of the figures (see the module docstring)."""

    COLUMNS = (
        "t_s",
        "workers",
        "workers_rss_mb",
        "jvm_rss_mb",
        "fds",
        "connections",
        "producer_ids",
        "micro_batches",
    )

    def __init__(self, kafka, prefix: str, query):
        self.kafka, self.prefix, self.query = kafka, prefix, query
        self.port = kafka.nodes[1].ports["PLAINTEXT"]
        self.samples: list[dict] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._t0 = time.monotonic()

    def take(self) -> dict:
        workers, jvm = forked_workers(), _spark_jvm()
        return {
            "t_s": round(time.monotonic() - self._t0, 1),
            "workers": len(workers),
            "workers_rss_mb": round(sum(rss_kb(p) for p in workers) / 1024, 1),
            "jvm_rss_mb": round(rss_kb(jvm) / 1024, 1) if jvm else None,
            "fds": sum(open_fds(p) for p in workers) + (open_fds(jvm) if jvm else 0),
            "connections": _connections_on(self.port),
            "producer_ids": _producer_ids(self.kafka, self.prefix),
            "micro_batches": (self.query.lastProgress or {}).get("batchId", -1) + 1,
        }

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            try:
                self.samples.append(self.take())
            except Exception as e:  # noqa: BLE001 - reported by the test
                self.errors.append(e)

    def __enter__(self) -> HourSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def settled(self) -> tuple[dict, dict]:
        """The median of the first three samples after the warm-up and of the last three
        (of those with the usual number of workers)."""
        kept = [s for s in self.samples if s["t_s"] >= WARMUP_S]
        assert len(kept) >= 4, f"only {len(kept)} samples after the warm-up"
        # the samples with as many workers as most (a worker Spark starts or retires
        # changes the sum, not what each holds)
        usual = statistics.mode(s["workers"] for s in kept)
        kept = [s for s in kept if s["workers"] == usual]
        assert len(kept) >= 2, f"only {len(kept)} samples with {usual} workers"

        def median(rows):
            return {
                c: statistics.median(r[c] for r in rows)
                for c in self.COLUMNS
                if all(r[c] is not None for r in rows)
            }

        return median(kept[:3]), median(kept[-3:])


def _value(n: int) -> bytes:
    return b"%010d-" % n + b"v" * (VALUE_BYTES - 11)


def _committed_counts(bootstrap: str, topic: str, produced: int) -> np.ndarray:
    """How many times each value number is in ``topic`` for a read_committed reader."""
    import confluent_kafka

    counts = np.zeros(produced, dtype=np.uint8)
    with KafkaClient(bootstrap_servers=bootstrap) as client:
        ends = client.latest_offsets([(topic, p) for p in range(PARTITIONS)])
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"soak-hour-{uuid.uuid4().hex[:6]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    try:
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < 10:  # until nothing came for 10 s
            messages = consumer.consume(10_000, 1.0)
            if messages:
                idle_since = time.monotonic()
            for m in messages:
                if not m.error():
                    counts[int(m.value()[:10])] += 1
        # read to the end (the last offset may be a transaction marker, never delivered)
        positions = consumer.position(
            [confluent_kafka.TopicPartition(topic, p) for p in range(PARTITIONS)]
        )
        short = [
            (p.partition, p.offset, ends[(topic, p.partition)])
            for p in positions
            if ends[(topic, p.partition)] and p.offset < ends[(topic, p.partition)] - 1
        ]
        assert not short, f"the target was not read to the end (partition, at, end): {short}"
    finally:
        consumer.close()
    return counts


@pytest.mark.timeout(SECONDS + 3 * CATCH_UP_S + 1200)
def test_an_exactly_once_stream_for_an_hour_beside_a_wide_topic(spark, tmp_path):
    import confluent_kafka

    run = uuid.uuid4().hex[:8]
    source, target, wide = f"hour-src-{run}", f"hour-dst-{run}", f"hour-wide-{run}"
    prefix = f"hour-{run}"
    with KafkaCluster(heap_mb=HEAP_MB) as kafka:
        began = time.monotonic()
        with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
            client.create_topics({source: PARTITIONS, target: PARTITIONS})
            client.wait_for_topics([source, target])
        create_wide_topic(kafka.bootstrap, wide, WIDE)
        created_s = time.monotonic() - began

        stop = threading.Event()
        produced = {"n": 0}
        acked = bytearray(int(RATE * (SECONDS + 600)) + 1)
        errors: list = []

        def delivered(err, msg) -> None:
            if err:
                errors.append(err)
            else:
                acked[int(msg.value()[:10])] = 1

        def produce() -> None:
            p = confluent_kafka.Producer(
                {"bootstrap.servers": kafka.bootstrap, "linger.ms": 20, "enable.idempotence": True}
            )
            started = time.monotonic()
            while not stop.is_set():
                due = min(int((time.monotonic() - started) * RATE), len(acked) - 1)
                while produced["n"] < due:
                    n = produced["n"]
                    try:
                        p.produce(
                            source, value=_value(n), partition=n % PARTITIONS, on_delivery=delivered
                        )
                    except BufferError:
                        p.poll(0.05)
                        continue
                    produced["n"] += 1
                p.poll(0.01)
            assert p.flush(120) == 0

        def trickle() -> None:
            p = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 50})
            n = 0
            while not stop.wait(1.0):
                for _ in range(WIDE_RATE):
                    p.produce(wide, value=b"w", partition=n % WIDE)
                    n += 1
                p.poll(0)
            p.flush(30)

        checkpoint, wide_checkpoint = str(tmp_path / "ckpt"), str(tmp_path / "ckpt-wide")
        query = (
            spark.readStream.format("pykafka")
            .option("kafka.bootstrap.servers", kafka.bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .load()
            .select("value")
            .writeStream.format("pykafka")
            .option("kafka.bootstrap.servers", kafka.bootstrap)
            .option("topic", target)
            .option("exactlyOnce", "true")
            .option("transactionalIdPrefix", prefix)
            .option("checkpointLocation", checkpoint)
            .start()
        )
        beside = (
            spark.readStream.format("pykafka")
            .option("kafka.bootstrap.servers", kafka.bootstrap)
            .option("subscribe", wide)
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", wide_checkpoint)
            .start()
        )
        threads = [threading.Thread(target=produce), threading.Thread(target=trickle)]
        try:
            for t in threads:
                t.start()
            with HourSampler(kafka, prefix, query) as sampler:
                started = time.monotonic()
                while time.monotonic() - started < SECONDS:
                    assert query.exception() is None, f"the query failed: {query.exception()}"
                    assert beside.exception() is None, (
                        f"the wide readStream failed: {beside.exception()}"
                    )
                    time.sleep(1)  # the hour's length (SECONDS), checked each second
                first, last = sampler.settled()
            stop.set()
            for t in threads:
                t.join(150)
            # (recentProgress keeps the last 100 micro-batches: these are the last ones)
            wide_durations = [
                p["durationMs"].get("triggerExecution", 0) / 1000
                for p in beside.recentProgress
                if p["numInputRows"]
            ]
            beside.stop()
            # what the wide readStream read in all: its last committed end past its start
            wide_rows = sum(committed_ends(wide_checkpoint).values()) - sum(
                offset_log(wide_checkpoint).get(0, {}).values()
            )
            with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
                ends = client.latest_offsets([(source, p) for p in range(PARTITIONS)])
            behind = sum(ends.values()) - sum(committed_ends(checkpoint).values())
            caught_up = time.monotonic()
            while query.exception() is None and time.monotonic() - caught_up < CATCH_UP_S:
                now = committed_ends(checkpoint)
                if all(now.get(p, 0) >= end for (_, p), end in ends.items()):
                    break
                time.sleep(1)  # measures the catch-up: its end is a figure, not a failure
            catch_up_s = time.monotonic() - caught_up
            assert query.exception() is None, f"the query failed: {query.exception()}"
        finally:
            stop.set()
            query.stop()
            beside.stop()
        counts = _committed_counts(kafka.bootstrap, target, produced["n"])
    sent = np.frombuffer(bytes(acked[: produced["n"]]), dtype=np.uint8)
    missing = int(np.count_nonzero((sent == 1) & (counts == 0)))
    twice = int(np.count_nonzero(counts > 1))
    samples = sampler.samples
    record(
        "soak/exactly_once_stream_hour",
        section="faults",
        what=f"readStream -> writeStream exactlyOnce at {RATE:,} x 1 KB records/s, a "
        f"readStream over {WIDE:,} partitions beside it, {SECONDS / 60:.0f} min, "
        f"sampled every {SAMPLE_S:.0f} s",
        records=int(sent.sum()),
        lost=missing,
        duplicated=twice,
        seconds=time.monotonic() - began,
        series={c: [s[c] for s in samples] for c in HourSampler.COLUMNS},
        topic_created_s=round(created_s, 1),
        warmup_s=WARMUP_S,
        workers_rss_mb_after_warmup=first["workers_rss_mb"],
        workers_rss_mb_at_end=last["workers_rss_mb"],
        jvm_rss_mb_after_warmup=first.get("jvm_rss_mb"),
        jvm_rss_mb_at_end=last.get("jvm_rss_mb"),
        fds_after_warmup=first["fds"],
        fds_at_end=last["fds"],
        connections_after_warmup=first["connections"],
        connections_at_end=last["connections"],
        producer_ids_after_warmup=first["producer_ids"],
        producer_ids_at_end=last["producer_ids"],
        offsets_behind_at_stop=behind,
        catch_up_s=round(catch_up_s, 1),
        wide_rows=wide_rows,
        wide_micro_batch_median_s_last_100=round(statistics.median(wide_durations), 2)
        if wide_durations
        else None,
    )
    assert errors == [] and sampler.errors == []
    assert sent.sum() > RATE * SECONDS * 0.9, f"only {int(sent.sum())} records acknowledged"
    assert (missing, twice) == (0, 0), f"{missing} values missing, {twice} more than once"
    assert wide_rows > 0, "the readStream over the wide topic read nothing"
    grew = last["workers_rss_mb"] - first["workers_rss_mb"]
    assert grew < RSS_GROWTH_MB, f"the workers' RSS grew by {grew:.0f} MB after the warm-up"
    assert last["fds"] <= first["fds"] + FD_SLACK
    assert last["connections"] <= first["connections"] + CONNECTION_SLACK
    assert last["producer_ids"] <= first["producer_ids"] + PRODUCER_ID_SLACK
