"""CPU of the sink's write task alone, per million rows: what one Spark task of a warm
``df.write`` costs in its Python worker, minus Spark.

    python tests/bench/bench_write_task.py [--rows 1000000] [--rounds 5] [--bootstrap H:P]
                                           [--pure] [--keys/--no-keys]

Rows of a 10-byte key and a 100-byte value, cut into Arrow batches of 10,000 rows (Spark's
``spark.sql.execution.arrow.maxRecordsPerBatch``), written by ``kafka_sink.writer
.write_task`` with default options to a new 4-partition topic each round, on one Apache
Kafka node started here (``kafka_testbed.KafkaCluster``) or the one ``--bootstrap`` names;
the topic is deleted after its round.
The sink's imports timed, then one warm-up round (the process's first task: its client
pool, connections and producer id; its CPU and wall time printed), and the heap frozen
(``gc.freeze()``, as a warm Spark worker's is), then ``--rounds`` rounds; for each the CPU
seconds of this process (``time.process_time``: the task's work, the broker's
excluded) and the wall time, per million rows, and their medians. ``--pure``: the pure-
Python encoder (``PYKAFKA_PURE_PYTHON=1``). For a profile, run it under py-spy:
``.venv/bin/py-spy record --native -r 200 -o x.svg -- .venv/bin/python tests/bench/...``.
Not collected by pytest.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import sys
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

KEY_SIZE = 10
VALUE_SIZE = 100
STEP = 10_000  # Spark's default spark.sql.execution.arrow.maxRecordsPerBatch


def arrow_batches(n: int, keys: bool):
    import numpy as np
    import pyarrow as pa

    ids = np.arange(n)
    key_arr = pa.array([b"%010d" % i for i in ids], pa.binary())
    value_arr = pa.array([b"%010d" % i + b"x" * (VALUE_SIZE - 10) for i in ids], pa.binary())
    columns = [key_arr, value_arr] if keys else [value_arr]
    names = ["key", "value"] if keys else ["value"]
    return [
        pa.RecordBatch.from_arrays([c.slice(i, STEP) for c in columns], names=names)
        for i in range(0, n, STEP)
    ]


def _usage() -> tuple[float, int]:
    """(system CPU seconds, minor page faults) of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_stime, usage.ru_minflt


def one_round(bootstrap: str, batches, n: int, keys: bool) -> tuple[float, float]:
    from protocol.client.cluster import KafkaClient
    from kafka_sink.options import parse_writer_options
    from kafka_sink.validation import WritePlan
    from kafka_sink.writer import write_task

    topic = f"bench-{uuid.uuid4().hex[:8]}"
    with KafkaClient(bootstrap_servers=bootstrap) as client:
        client.create_topics({topic: 4})
        client.wait_for_topics([topic])
    options = parse_writer_options({"kafka.bootstrap.servers": bootstrap, "topic": topic})
    plan = WritePlan(topic, False, keys, False, False, None)
    wall, cpu, before = time.perf_counter(), time.process_time(), _usage()
    message = write_task(iter(batches), options, plan)
    cpu, wall, after = time.process_time() - cpu, time.perf_counter() - wall, _usage()
    with KafkaClient(bootstrap_servers=bootstrap) as client:
        client.delete_topics([topic])  # a round writes about 130 MB: no disk fills up
    if message.records != n:
        raise RuntimeError(f"write_task wrote {message.records} of {n} records")
    return cpu, wall, after[0] - before[0], after[1] - before[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    parser.add_argument("--pure", action="store_true", help="the pure-Python encoder")
    parser.add_argument("--no-keys", dest="keys", action="store_false", help="null keys")
    args = parser.parse_args(argv)
    if args.pure:
        os.environ["PYKAFKA_PURE_PYTHON"] = "1"
    cluster = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        from kafka_testbed import KafkaCluster

        cluster = KafkaCluster().start()
        bootstrap = cluster.bootstrap
    try:
        batches = arrow_batches(args.rows, args.keys)
        began = time.perf_counter()
        import kafka_sink.task  # noqa: F401
        import kafka_sink.writer  # noqa: F401

        print(f"imports of the sink's task: {time.perf_counter() - began:.3f} s")
        cpu, wall, _, _ = one_round(bootstrap, batches, args.rows, args.keys)  # warm-up
        print(f"first round (this process's first task): cpu {cpu:.3f} s, wall {wall:.3f} s")
        # what a warm Spark worker does after its first task (kafka_common/worker_heap.py):
        # the collector no longer scans what the process keeps (here: the input batches)
        gc.collect()
        gc.freeze()
        per_m = 1e6 / args.rows
        cpus, walls = [], []
        for i in range(args.rounds):
            cpu, wall, system, faults = one_round(bootstrap, batches, args.rows, args.keys)
            cpus.append(cpu * per_m)
            walls.append(wall * per_m)
            print(
                f"round {i + 1}: cpu {cpus[-1]:.3f} s/M rows (system {system * per_m:.3f}, "
                f"{faults * per_m:,.0f} page faults), "
                f"wall {walls[-1]:.3f} s/M rows"
            )
    finally:
        if cluster is not None:
            cluster.stop()
    print(
        f"{args.rows:,} rows ({'keyed' if args.keys else 'unkeyed'}, "
        f"{'pure' if args.pure else 'compiled'}), 4 partitions: median task CPU "
        f"{statistics.median(cpus):.3f} s per million rows, wall {statistics.median(walls):.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
