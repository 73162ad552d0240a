"""A stream that runs for a long time through faults, measured (issue 22): topic to topic,
``readStream.format("pykafka")`` -> ``writeStream.format("pykafka")`` with ``exactlyOnce``.

- the source topic is on librdkafka's mock cluster (3 brokers, a private one), where the
  partitions' leaders move and brokers are taken down and brought back up, in turns;
- the target topic is on Apache Kafka (a one-node cluster of its own that advertises a
  fault proxy's port, so clients reach it only through the proxy; Kafka's own marker
  writes go through it too) and the proxy cuts every connection every few seconds;
- a producer writes numbered records into the source the whole time.

At the end every record of the source log is in the target exactly once by Kafka's
read_committed rule (``soak_forensics.target_log``), no transaction is left open; the
Python workers' memory (RSS) and open file descriptors, sampled through the run, stay flat
(the last third of the run against the first third after warm-up).

"Every record of the source log" is counted by source offset, not by value: the stream
writes each source record's (partition, offset) into a ``src`` header, and each offset
below the source's end must be in the target once (the idempotent source producer's
records take every offset, there are no control records). The values are not the
referee because the source log holds a few values twice, each copy at its own offset:
the mock cluster does not deduplicate an idempotent producer's re-sent batches
(``kafka_testbed.mock_cluster``; ``test_testbed.py``), so when a broker goes down before
confluent-kafka's producer hears the answer to a Produce, its resend is appended again
(14 and 10-minute runs found 11 and 9 such values, every one traced to two source offsets
whose target copies came from the two offsets, each once). The
mock cluster keeps only 100,000 batches per partition, so after a long run the source log
cannot be read back from its start; what it still holds must agree with the target
record by record, and every value the source producer acknowledged must be in the
target. Any repeated value is traced to its source and target offsets, producer ids,
epochs, transactions and micro-batches (``soak_forensics.explain``) and printed.

Under ``make test`` the stream runs for ``SHORT_SECONDS``; ``PYKAFKA_SOAK=1`` (``make
soak``) runs it for 30 minutes (``PYKAFKA_SOAK_STREAM_SECONDS`` to choose). The figures go
to tests/RELIABILITY.md through ``tests.helpers.reliability_report.record``.
"""

from __future__ import annotations

import collections
import os
import statistics
import threading
import time
import uuid
from contextlib import contextmanager
from collections.abc import Iterator

import confluent_kafka
import pytest

from kafka_testbed import KafkaCluster, MockCluster
from protocol.client.cluster import KafkaClient

from .helpers.broker_setup import create_topic
from .helpers.fault_proxy import FaultProxy
from .helpers.reliability_report import record, soak
from .helpers.waiting import wait_until
from .helpers.soak_forensics import (
    SRC_HEADER,
    committed_ends,
    explain,
    offset_log,
    source_log,
    target_log,
    visible,
)
from .helpers.txn_referee import (
    kafka_transactions_verdict,
    nothing_left_open,
    stable_offsets_behind,
)
from .helpers.worker_stats import forked_workers, open_fds, rss_kb

pytestmark = pytest.mark.spark

SHORT_SECONDS = 20
SECONDS = float(os.environ.get("PYKAFKA_SOAK_STREAM_SECONDS", 1800 if soak() else SHORT_SECONDS))
WARMUP_S = 8  # first worker starts and imports: not counted in the flatness
FAULT_EVERY_S = 3  # one leader move or broker outage every this many seconds
OUTAGE_S = 2  # how long a broker stays down
CUT_EVERY_MS = 4000  # the proxy cuts every connection to Kafka this often
PRODUCE_PER_S = 200  # records/s into the source (2 partitions)
PARTITIONS = 2
STALL_S = 120  # after the producer stops, wait for the stream while it commits within this
# Flat: the workers' summed RSS may grow from the first third of the run (after warm-up) to
# the last by this factor plus RSS_SLACK_MB, their summed descriptors by FD_SLACK. A short
# run (make test) compares workers still warming up (forked workers' RSS grows as they
# touch the pages they share with Spark's daemon, and as their first tasks import the
# decoders), so it only catches a runaway; the soak compares minutes of steady state.
RSS_GROWTH = 1.10 if soak() else 1.5
RSS_SLACK_MB = 40
FD_SLACK = 16


class Sampler:
    """Every ``interval`` s: (seconds since start, summed RSS MB, summed open fds, workers)
    of Spark's forked Python workers."""

    def __init__(self, interval: float = 1.0):
        self.interval = interval
        self.samples: list[tuple[float, float, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._t0 = time.monotonic()

    def _run(self) -> None:
        while not self._stop.is_set():
            pids = forked_workers()
            if pids:
                self.samples.append(
                    (
                        time.monotonic() - self._t0,
                        sum(rss_kb(p) for p in pids) / 1024,
                        sum(open_fds(p) for p in pids),
                        len(pids),
                    )
                )
            self._stop.wait(self.interval)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def usual_workers(self) -> int:
        return collections.Counter(s[3] for s in self.samples).most_common(1)[0][0]

    def thirds(self, after: float) -> tuple[tuple[float, float], tuple[float, float]]:
        """Median (RSS MB, fds) of the first and the last third of the samples taken
        ``after`` seconds in, with the same number of workers as most samples (a worker
        that Spark starts or retires changes the sums, not the per-worker use)."""
        kept = [s for s in self.samples if s[0] >= after]
        if len(kept) < 3:
            raise AssertionError(f"only {len(kept)} samples of the workers")
        usual = self.usual_workers()
        kept = [s for s in kept if s[3] == usual] or kept
        n = max(1, len(kept) // 3)
        first, last = kept[:n], kept[-n:]
        return (
            (statistics.median(s[1] for s in first), statistics.median(s[2] for s in first)),
            (statistics.median(s[1] for s in last), statistics.median(s[2] for s in last)),
        )


@contextmanager
def kafka_behind_fault_proxy() -> Iterator[tuple[FaultProxy, KafkaCluster]]:
    """``(proxy, kafka)``: a one-node Apache Kafka that advertises the proxy's port, so
    every connection a client makes after its bootstrap goes through the proxy (Kafka's
    connections to itself, for transaction markers, as well). Connections made before the
    proxy has its target are closed, and retried by whoever made them."""
    proxy = FaultProxy()
    kafka = KafkaCluster(
        broker_config={"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"}
    )
    try:
        kafka.start()
        proxy.set_target("127.0.0.1", kafka.nodes[1].ports["PLAINTEXT"])
        yield proxy, kafka
    finally:
        proxy.close()
        kafka.stop()


def _wait_for_rows(query, timeout: float) -> None:
    def rows_through() -> bool:
        assert query.exception() is None, f"the query failed: {query.exception()}"
        return any(p["numInputRows"] for p in query.recentProgress)

    wait_until(rows_through, timeout, "rows through the stream", interval=0.5)


# the stream, plus its start, catching up (while it moves: STALL_S) and the checks
@pytest.mark.timeout(2 * SECONDS + 900)
def test_stream_topic_to_topic_through_moving_leaders_outages_and_cut_connections(spark, tmp_path):
    source, target = f"soak-src-{uuid.uuid4().hex[:8]}", f"soak-dst-{uuid.uuid4().hex[:8]}"
    prefix = f"soak-{uuid.uuid4().hex[:8]}"
    with MockCluster(brokers=3) as mock, kafka_behind_fault_proxy() as (proxy, kafka):
        mock.create_topic(source, PARTITIONS, 3)
        with KafkaClient(bootstrap_servers=mock.bootstrap) as client:
            client.wait_for_topics([source])
        create_topic(kafka, target, PARTITIONS)

        stop = threading.Event()
        produced = {"n": 0}
        producer_errors: list = []
        # What the source holds, by the producer's acknowledgements: the mock cluster keeps
        # only 100,000 batches per partition, so a long run's source log loses its start
        # (reading it back from offset 0 found nothing after 30 minutes).
        acked: collections.Counter = collections.Counter()

        def delivered(err, msg) -> None:
            if err:
                producer_errors.append(err)
            else:
                acked[msg.value().decode()] += 1

        def produce() -> None:
            p = confluent_kafka.Producer(
                {
                    "bootstrap.servers": mock.bootstrap,
                    "linger.ms": 5,
                    "enable.idempotence": True,
                    "message.timeout.ms": 120_000,
                }
            )
            period = PARTITIONS / PRODUCE_PER_S
            while not stop.is_set():
                for part in range(PARTITIONS):
                    p.produce(
                        source, value=b"r-%d" % produced["n"], partition=part, on_delivery=delivered
                    )
                    produced["n"] += 1
                p.poll(0)
                time.sleep(period)  # paces the source producer: PRODUCE_PER_S
            assert p.flush(120) == 0

        faults = collections.Counter()

        def inject() -> None:
            """In turns: move a partition's leader, take a broker down and up again."""
            turn = 0
            while not stop.wait(FAULT_EVERY_S):
                turn += 1
                if turn % 2:
                    part = turn // 2 % PARTITIONS
                    mock.partition_set_leader(source, part, 1 + turn % 3)
                    faults["leader moves"] += 1
                else:
                    broker = 1 + turn // 2 % 3
                    mock.broker_set_down(broker)
                    stop.wait(OUTAGE_S)
                    mock.broker_set_up(broker)
                    faults["broker outages"] += 1

        # keep every micro-batch's offsets in the checkpoint, to trace a duplicate
        retain = spark.conf.get("spark.sql.streaming.minBatchesToRetain")
        spark.conf.set("spark.sql.streaming.minBatchesToRetain", "1000000")
        query = (
            spark.readStream.format("pykafka")
            .option("kafka.bootstrap.servers", mock.bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr(
                "key",
                "value",
                # the source coordinates, to trace any duplicate (soak_forensics)
                f"array(named_struct('key', '{SRC_HEADER}', 'value', cast(concat("
                "partition, ':', offset) as binary))) as headers",
            )
            .writeStream.format("pykafka")
            .option("kafka.bootstrap.servers", proxy.address)
            .option("topic", target)
            .option("exactlyOnce", "true")
            .option("transactionalIdPrefix", prefix)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(processingTime="500 milliseconds")
            .start()
        )
        producer_thread = threading.Thread(target=produce)
        injector = threading.Thread(target=inject)
        threads = [producer_thread, injector]
        started = time.monotonic()
        try:
            producer_thread.start()
            # the faults start once the stream runs (its first micro-batch wrote rows): a
            # busy machine can take tens of seconds to start the workers
            _wait_for_rows(query, 240)
            with Sampler() as sampler:
                injector.start()
                proxy.cut_every(CUT_EVERY_MS)
                faulted = time.monotonic()
                while query.exception() is None and (
                    time.monotonic() - faulted < SECONDS
                    or not (proxy.stats["cuts"] and faults["broker outages"])
                    and time.monotonic() - faulted < SECONDS + 120
                ):
                    time.sleep(1)  # the soak's length: SECONDS under faults, checked each second
                stop.set()
                for t in threads:
                    t.join(150)
                proxy.cut_every(None)
                cuts = proxy.stats["cuts"]
                assert query.exception() is None, f"the query failed: {query.exception()}"
                # The referee is the source log's offsets: an idempotent producer's records
                # take every offset from 0 to the end (no control records), so each source
                # offset below the end must be in the target exactly once (its ``src``
                # header). Not the values: the source producer writes some values twice
                # (see the module docstring).
                with KafkaClient(bootstrap_servers=mock.bootstrap) as client:
                    ends = client.latest_offsets([(source, p) for p in range(PARTITIONS)])
                expected = {(p, o) for (_, p), end in ends.items() for o in range(end)}
                # Catch up: the stream may be behind when the producer stops (the mock
                # cluster answers a Fetch with one record batch per partition, and the
                # source's batches hold a record or two: on a loaded machine the stream
                # reads about as fast as the source grows). Wait while Spark's commit log
                # moves on, until a committed micro-batch reached the source's end.
                checkpoint = str(tmp_path / "ckpt")
                behind = sum(ends.values()) - sum(committed_ends(checkpoint).values())
                stopped = moved = time.monotonic()
                last = committed_ends(checkpoint)
                while query.exception() is None and time.monotonic() - moved < STALL_S:
                    now = committed_ends(checkpoint)
                    if all(now.get(p, 0) >= end for (_, p), end in ends.items()):
                        break
                    if now != last:
                        last, moved = now, time.monotonic()
                    time.sleep(1)  # a wait whose deadline moves with each commit (STALL_S)
                catch_up_s = time.monotonic() - stopped
                # Kafka writes the markers after answering EndTxn: read once they are in
                stable_behind = stable_offsets_behind(kafka.bootstrap, target, PARTITIONS)
                written = target_log(kafka.bootstrap, target, PARTITIONS)
                got = collections.Counter(r.src for r in visible(written))
        finally:
            stop.set()
            query.stop()
            spark.conf.set("spark.sql.streaming.minBatchesToRetain", retain)
        seconds = time.monotonic() - started
        left_open = not nothing_left_open(kafka.bootstrap, target, PARTITIONS)
        kafka_says = kafka_transactions_verdict(kafka, target, prefix)
        held = source_log(mock.bootstrap, source, PARTITIONS)
        # what the source still holds at each offset is what the target got from there
        values = {r.src: r.value for r in visible(written)}
        mismatched = sum(1 for at, rec in held.items() if at in values and values[at] != rec.value)
        # every value the source producer acknowledged got to the target
        unseen_acked = len(set(acked) - {r.value for r in visible(written)})
        # values the source producer wrote at two offsets or more (each copy a record)
        by_value = collections.defaultdict(set)
        for r in visible(written):
            by_value[r.value].add(r.src)
        source_twice = {v for v, at in by_value.items() if len(at) > 1}
        twice = {r.value for r in visible(written) if got[r.src] > 1}
        causes, lines = explain(
            twice | source_twice, written, held, offset_log(str(tmp_path / "ckpt"))
        )
        print(f"source records by the cause of a repeated value: {causes}", *lines, sep="\n")
    lost = len(expected - got.keys())
    duplicated = sum(n - 1 for n in got.values() if n > 1)
    (rss0, fd0), (rss1, fd1) = sampler.thirds(WARMUP_S)
    record(
        "faults/stream_topic_to_topic_soak",
        section="faults",
        what=f"readStream (mock cluster: a leader move or a broker down {OUTAGE_S} s "
        f"every {FAULT_EVERY_S} s) -> writeStream exactlyOnce (Apache Kafka behind a proxy "
        f"cutting every connection every {CUT_EVERY_MS / 1000:.0f} s), "
        f"{SECONDS / 60:.1f} min",
        faults=sum(faults.values()) + cuts,
        records=len(expected),
        lost=lost,
        duplicated=duplicated,
        seconds=seconds,
        leader_moves=faults["leader moves"],
        broker_outages=faults["broker outages"],
        connection_cuts=cuts,
        worker_rss_mb_first_third=round(rss0, 1),
        worker_rss_mb_last_third=round(rss1, 1),
        worker_fds_first_third=fd0,
        worker_fds_last_third=fd1,
        python_workers=sampler.usual_workers(),
        transactions_left_open=int(left_open),
        source_values_appended_twice_by_the_mock=len(source_twice),
        acked_values_missing=unseen_acked,
        values_unlike_the_source_log=mismatched,
        offsets_behind_when_the_producer_stopped=behind,
        catch_up_s=round(catch_up_s, 1),
    )
    assert producer_errors == []
    assert cuts >= 1 and faults["leader moves"] >= 1 and faults["broker outages"] >= 1
    assert (lost, duplicated) == (0, 0), (
        f"{lost} source records (offsets) missing in the target, {duplicated} more than "
        f"once; repeated values by cause: {causes}\n" + "\n".join(lines)
    )
    assert (unseen_acked, mismatched) == (0, 0), (
        f"{unseen_acked} values the source acknowledged are not in the target; "
        f"{mismatched} target records differ from the source record they name"
    )
    assert not left_open and stable_behind == []
    assert kafka_says == [], kafka_says
    assert rss1 <= rss0 * RSS_GROWTH + RSS_SLACK_MB, f"worker RSS grew {rss0:.0f} -> {rss1:.0f} MB"
    assert fd1 <= fd0 + FD_SLACK, f"worker descriptors grew {fd0} -> {fd1}"
