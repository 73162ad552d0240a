"""Measure the candidate settings of each peer (peers.py) side by side, to keep the best:

    .venv/bin/python tests/bench/tune_peers.py [--records 1000000] [--write-records 300000]
        [--rounds 3] [--only read,write] [--peers confluent-kafka,kafka-python,aiokafka]
        [--output tests/bench/peer_tuning.md | --no-output] [--note TEXT]

It starts a Tansu broker, produces the main data set of ``make bench`` (100-byte values,
one header, 4 partitions, uncompressed) with ``--records`` records, then runs every
candidate of every peer once per round (rounds interleave the candidates so a busy machine
slows them alike): reads of the whole topic into Arrow without the headers column (Spark's
default read), writes of the first ``--write-records`` rows without headers, uncompressed.
A candidate is a set of overrides of the peer's settings in peers.py (``DEFAULT``: the
client's own default); "peers.py" is the settings as they stand. The table gives the
median records/s and each candidate's median ratio to "peers.py" within a round.
Not a test: pytest does not collect it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for path in (ROOT, HERE):
    if path not in sys.path:
        sys.path.insert(0, path)

import peers  # noqa: E402
from bench_data import DataSet, produce  # noqa: E402
from peers import DEFAULT  # noqa: E402

MB = 1024 * 1024

# (label, overrides of peers.py's settings); the first of each list is peers.py as it is
READ_CANDIDATES = {
    "confluent-kafka": [
        ("peers.py", {}),
        (
            "librdkafka defaults, consume(10000)",
            {
                "fetch.queue.backoff.ms": DEFAULT,
                "queued.min.messages": DEFAULT,
                "fetch.wait.max.ms": DEFAULT,
                "num_messages": 10_000,
            },
        ),
        ("max.partition.fetch.bytes=4MB", {"max.partition.fetch.bytes": 4 * MB}),
        (
            "max.partition.fetch.bytes=8MB, fetch.max.bytes=100MB",
            {"max.partition.fetch.bytes": 8 * MB, "fetch.max.bytes": 100 * MB},
        ),
        ("queued.max.messages.kbytes=1GB", {"queued.max.messages.kbytes": 1 << 20}),
        ("fetch.min.bytes=1MB", {"fetch.min.bytes": MB}),
        ("consume(num_messages=10000)", {"num_messages": 10_000}),
        ("consume(num_messages=1000000)", {"num_messages": 1_000_000}),
    ],
    "kafka-python": [
        ("peers.py", {}),
        (
            "kafka-python defaults",
            {
                "max_partition_fetch_bytes": DEFAULT,
                "fetch_max_wait_ms": DEFAULT,
                "max_poll_records": DEFAULT,
            },
        ),
        ("max_poll_records=10000", {"max_poll_records": 10_000}),
        ("max_partition_fetch_bytes=1MB (default)", {"max_partition_fetch_bytes": DEFAULT}),
        ("max_partition_fetch_bytes=8MB", {"max_partition_fetch_bytes": 8 * MB}),
    ],
    "aiokafka": [
        ("peers.py", {}),
        (
            "aiokafka defaults (getmany() of all prefetched)",
            {
                "max_partition_fetch_bytes": DEFAULT,
                "fetch_max_wait_ms": DEFAULT,
                "max_poll_records": None,
            },
        ),
        ("max_poll_records unlimited", {"max_poll_records": None}),
        ("max_partition_fetch_bytes=1MB (default)", {"max_partition_fetch_bytes": DEFAULT}),
        ("max_partition_fetch_bytes=8MB", {"max_partition_fetch_bytes": 8 * MB}),
    ],
}

WRITE_CANDIDATES = {
    "confluent-kafka": [
        ("peers.py", {}),
        (
            "librdkafka defaults, poll(0) per message",
            {
                "queue.buffering.max.messages": DEFAULT,
                "queue.buffering.max.kbytes": DEFAULT,
                "poll_every": 1,
            },
        ),
        ("poll(0) every 1000", {"poll_every": 1000}),
        ("linger.ms=20", {"linger.ms": 20}),
        ("linger.ms=50", {"linger.ms": 50}),
        ("batch.num.messages=100000", {"batch.num.messages": 100_000}),
        ("batch.size=65536", {"batch.size": 65536}),
    ],
    "kafka-python": [
        ("peers.py", {}),
        ("kafka-python defaults", {"linger_ms": DEFAULT, "batch_size": DEFAULT}),
        ("batch_size=1MB", {"batch_size": MB}),
        ("linger_ms=5", {"linger_ms": 5}),
    ],
    "aiokafka": [
        ("peers.py", {}),
        ("send() per record, aiokafka defaults", {"api": "send", "max_batch_size": DEFAULT}),
        ("send() per record, linger_ms=5", {"api": "send", "linger_ms": 5}),
        ("send() per record, linger_ms=20", {"api": "send", "linger_ms": 20}),
        ("batch API, max_batch_size=16KB (default)", {"max_batch_size": DEFAULT}),
        ("batch API, max_batch_size=1MB", {"max_batch_size": MB}),
    ],
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--write-records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="read,write")
    parser.add_argument("--peers", default=",".join(peers.READERS))
    parser.add_argument("--output", default=os.path.join(HERE, "peer_tuning.md"))
    parser.add_argument("--no-output", action="store_true")
    parser.add_argument("--note", default="", help="a paragraph for the report")
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    names = args.peers.split(",")
    started = time.monotonic()
    load_start = "%.2f %.2f %.2f" % os.getloadavg()

    from kafka_testbed import TansuBroker

    broker = TansuBroker()
    broker.start()
    results: dict[tuple[str, str, str], list[float]] = {}
    try:
        ds = DataSet("100B", args.records, 100, "none", 4, topic="tune-100b")
        produce(broker.bootstrap, ds)
        rows = None
        if "write" in only:
            from run import cases_read_table

            head = ds.head(args.write_records)
            rows = peers.write_rows(cases_read_table(broker.bootstrap, head))
            write_n = head.records
        for name in names:  # imports, first connections: outside the rounds
            if "read" in only:
                peers.READERS[name](broker.bootstrap, ds.head(ds.partitions * 1000), False)
            if "write" in only:
                from spark_cases import new_topic

                peers.WRITERS[name](
                    broker.bootstrap,
                    new_topic(broker.bootstrap, ds.partitions),
                    tuple(c[:1000] for c in rows),
                    "none",
                    False,
                )
        for r in range(args.rounds):
            for name in names:
                if "read" in only:
                    for label, overrides in READ_CANDIDATES[name]:
                        s = peers.READERS[name](broker.bootstrap, ds, False, overrides)
                        results.setdefault(("read", name, label), []).append(ds.records / s)
                        print(
                            f"round {r + 1} read  {name:<16} {label:<70} {ds.records / s:10,.0f}/s",
                            flush=True,
                        )
                if "write" in only:
                    from spark_cases import new_topic

                    for label, overrides in WRITE_CANDIDATES[name]:
                        topic = new_topic(broker.bootstrap, ds.partitions)
                        s = peers.WRITERS[name](
                            broker.bootstrap, topic, rows, "none", False, overrides
                        )
                        results.setdefault(("write", name, label), []).append(write_n / s)
                        print(
                            f"round {r + 1} write {name:<16} {label:<70} {write_n / s:10,.0f}/s",
                            flush=True,
                        )
    finally:
        broker.stop()

    lines = render(
        results,
        args,
        (time.monotonic() - started) / 60,
        load_start,
        "%.2f %.2f %.2f" % os.getloadavg(),
    )
    report = "\n".join(lines) + "\n"
    print(report)
    if not args.no_output:
        with open(args.output, "w") as f:
            f.write(report)
    return 0


def render(results: dict, args, minutes: float, load_start: str, load_end: str) -> list[str]:
    lines = [
        "# Peer settings tried",
        "",
        f"Run {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')} with "
        f"`tests/bench/tune_peers.py --records {args.records} --write-records "
        f"{args.write_records} --rounds {args.rounds}`, {minutes:.1f} min; load "
        f"{load_start} at start, {load_end} at end (2 shared cores). Reads: the whole "
        "topic into Arrow without the headers column; writes: rows without headers, "
        'uncompressed, acks=all. "vs peers.py" is the median of the ratios to the '
        "settings of peers.py within each round; the last column gives each round's "
        "figure (thousand records/s), so the noise is in view.",
    ]
    if args.note:
        lines += ["", args.note]
    lines += [
        "",
        "| Case | Peer | Candidate | Records/s | vs peers.py | Rounds, k/s |",
        "|---|---|---|---:|---:|---|",
    ]
    for (case, name, label), rates in results.items():
        base = results[(case, name, "peers.py")]
        ratio = statistics.median(a / b for a, b in zip(rates, base))
        each = ", ".join(f"{r / 1e3:.0f}" for r in rates)
        lines.append(
            f"| {case} | {name} | {label} | {statistics.median(rates):,.0f} | "
            f"{ratio:.2f}x | {each} |"
        )
    return lines


if __name__ == "__main__":
    sys.exit(main())
