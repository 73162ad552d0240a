"""The ``scale`` section's curves beside Spark's JVM connector (issue 41), in one run: the
child driver of the ``jvm`` section (jvm_child.py, mode ``scale``, PySpark 4.2.0 with the
connector's jars) reads the same topics of one Apache Kafka node through
``format("kafka")`` and ``format("pykafka")``:

- partitions of one topic: 4 -> 100 -> 1,000 -> 10,000, ``PER_PARTITION`` records each
  (100 B values), ``spark.read`` -> noop;
- topics under one ``subscribePattern``: 1 -> 100 -> 1,000 topics of 4 partitions,
  ``PER_PARTITION`` records each;
- value sizes 100 B -> 10 KB -> 1 MB -> 8 MB, the same bytes at every point (bytes/s; the
  topics' ``max.message.bytes`` raised), with each of our Python workers' peak RSS;
- one micro-batch's duration (readStream, default trigger, into noop) under a steady
  ``STREAM_RATE`` records/s over a topic of 4 -> 10,000 partitions (the partitions
  points' topics), beside Spark's floor: its clock source with offsets of as many
  partitions and the same rows, no Kafka; and beside the time Kafka takes to answer the
  Metadata and ListOffsets requests a micro-batch's planning sends (``kafka_answer_s``),
  which no connector can skip.

The JVM connector runs a task per Kafka partition at about half a second each on 2 cores.
Where a point would have more than ``--scale-jvm-tasks`` tasks (minutes), it reads a
sample: ``assign`` of that many partitions (of the first topics, for a pattern), and its
time for the whole is the sample's scaled by partitions / sample, marked "sampled" (its
micro-batches beyond that many partitions are not run). ``--scale-points quick`` runs
reduced points (a few minutes) to check the section; ``full`` is the issue's.

At 10,000 partitions x ``PER_PARTITION`` records (200,000, above
``task_split.ONE_TASK_RECORDS``) ours packs the partitions' small ranges into tasks of up to
1,000 ranges and 20,000 records (``task_split.task_groups``): 10 tasks where Spark's
connector runs 10,000.

The curves are drawn with matplotlib into ``docs/images/scale-*.png`` (a quick run draws
them under ``.cache/`` instead) and the table goes to results.md's ``scale`` block.
Nothing is asserted.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
IMAGES = os.path.join(ROOT, "docs", "images")

PER_PARTITION = 20  # records in every partition of the partitions and pattern points
PATTERN_PARTITIONS = 4  # partitions of each topic under the pattern
STREAM_RATE = 1000  # records/s of the micro-batch points
POINTS = {
    "full": {
        "partitions": [4, 100, 1_000, 10_000],
        "topics": [1, 100, 1_000],
        "sizes": [100, 10_000, 1_000_000, 8_000_000],
        "size_bytes": 256_000_000,
        "streams": [4, 100, 1_000, 10_000],
        "stream_seconds": 60,
        "warmup": 20,
        "read_warmups": 1,
    },
    "quick": {
        "partitions": [4, 100, 1_000],
        "topics": [1, 10],
        "sizes": [100, 1_000_000],
        "size_bytes": 16_000_000,
        "streams": [4, 1_000],
        "stream_seconds": 15,
        "warmup": 10,
        "read_warmups": 0,
    },
}
BROKER_HEAP_MB = 3072  # 10,000 + 4,000 partitions on one node


def _produce(bootstrap: str, topics, partitions: int, per_partition: int, value_size: int) -> None:
    """``per_partition`` records of ``value_size`` random bytes into every partition of
    ``topics`` (a name or a list), by one confluent-kafka producer."""
    import confluent_kafka

    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "acks": "1",
            "message.max.bytes": max(1_000_000, 2 * value_size),
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    value = os.urandom(value_size)
    for topic in [topics] if isinstance(topics, str) else topics:
        for p in range(partitions):
            for _ in range(per_partition):
                while True:
                    try:
                        producer.produce(topic, value=value, partition=p)
                        break
                    except BufferError:
                        producer.poll(0.05)
            producer.poll(0)
    if producer.flush(600) != 0:
        raise RuntimeError(f"{topics}: records left unsent")


def _assign(topics_partitions: list[tuple[str, int]]) -> str:
    out: dict[str, list[int]] = {}
    for topic, partition in topics_partitions:
        out.setdefault(topic, []).append(partition)
    return json.dumps(out)


ANSWER_ROUNDS = 21  # Metadata + ListOffsets round trips timed per stream point (median)
ANSWER_SETTLE_S = 10  # after the topics are filled, before those round trips


def kafka_answer_s(bootstrap: str, topic: str, partitions: int) -> float:
    """The median time Kafka takes to answer the two requests a micro-batch's planning
    sends over ``topic``: Metadata of the topic and ListOffsets (latest) of its
    ``partitions``, sent together on one connection as our planner sends them, at the
    versions our client speaks. Timed from the first byte sent to the last byte of the
    second answer; the frames are encoded before and the answers not decoded, so none of
    our Python work is in it: what the broker and the loopback cost per micro-batch."""
    import socket

    from protocol.client.cluster import KafkaClient, metadata_request
    from protocol.client.leader_requests import list_offsets_request
    from protocol.framing import FrameBuffer, encode_request
    from protocol.schemas import LIST_OFFSETS, METADATA

    tps = [(topic, p) for p in range(partitions)]
    with KafkaClient(bootstrap_servers=bootstrap) as client:
        meta = client.refresh_metadata([topic])
        (leader,) = {meta.topics[topic].partitions[p].leader for _, p in tps}
        conn = client.connection(leader)
        md_version, lo_version = conn.version_for(METADATA), conn.version_for(LIST_OFFSETS)
        host, port = conn.host, conn.port
        lo_body = list_offsets_request(dict.fromkeys(tps, -1), 0)(conn, lo_version, tps)
    frames = bytes(
        encode_request(METADATA, md_version, 1, "bench", metadata_request([topic], md_version))
        + encode_request(LIST_OFFSETS, lo_version, 2, "bench", lo_body)
    )
    times = []
    with socket.create_connection((host, port), timeout=60) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        answers = FrameBuffer()  # cuts the answers' frames, decodes nothing
        for _ in range(ANSWER_ROUNDS + 1):
            t = time.perf_counter()
            sock.sendall(frames)
            got = 0
            while got < 2:
                n = sock.recv_into(answers.receive_buffer())
                if not n:
                    raise ConnectionError("the broker closed the connection")
                got += len(answers.received(n))
            times.append(time.perf_counter() - t)
    return statistics.median(times[1:])  # the first one warms the broker's caches


def make_points(bootstrap: str, points: dict, jvm_tasks: int, rounds: int, log) -> dict:
    """Create and fill every topic (timed), and the child's spec of read and stream
    points."""
    from protocol.client.cluster import KafkaClient

    reads, streams, created = [], [], {}
    warmups = points["read_warmups"]
    run = f"{int(time.time()) % 100000}"
    with KafkaClient(bootstrap_servers=bootstrap) as client:

        def create(topics: dict, configs=None) -> float:
            from tests.helpers.broker_setup import PARTITIONS_PER_STEP, create_wide_topic

            t = time.perf_counter()
            if len(topics) == 1 and max(topics.values()) > PARTITIONS_PER_STEP:
                # KRaft refuses more than 10,000 metadata records in one operation
                ((name, n),) = topics.items()
                create_wide_topic(bootstrap, name, n, configs, timeout_s=600)
            else:
                client.create_topics(topics, configs=configs, timeout_ms=600_000)
                client.wait_for_topics(list(topics), timeout_ms=600_000)
            return time.perf_counter() - t

        for n in points["partitions"]:
            topic = f"scale-p{n}-{run}"
            seconds = create({topic: n})
            t = time.perf_counter()
            _produce(bootstrap, topic, n, PER_PARTITION, 100)
            log(
                f"scale: topic of {n:,} partitions created in {seconds:.1f} s, filled in "
                f"{time.perf_counter() - t:.1f} s"
            )
            created[f"partitions {n}"] = round(seconds, 1)
            point = {
                "case": f"partitions {n}",
                "family": "partitions",
                "x": n,
                "records": n * PER_PARTITION,
                "bytes": n * PER_PARTITION * 100,
                "options": {"subscribe": topic},
                "tasks": n,
                "rounds": rounds,
                "warmups": warmups,
            }
            if n > jvm_tasks:
                point["jvm_options"] = {"assign": _assign([(topic, p) for p in range(jvm_tasks)])}
                point["jvm_share"] = jvm_tasks / n
            reads.append(point)
            if n in points["streams"]:
                stream = {
                    "case": f"micro-batch {n}",
                    "x": n,
                    "topic": topic,
                    "partitions": n,
                    "rate": STREAM_RATE,
                    "seconds": points["stream_seconds"],
                    "warmup": points["warmup"],
                    "jvm": n <= jvm_tasks,
                }
                streams.append(stream)
        for k in points["topics"]:
            prefix = f"scale-t{k}-{run}-"
            names = [f"{prefix}{i:04d}" for i in range(k)]
            seconds = create({name: PATTERN_PARTITIONS for name in names})
            t = time.perf_counter()
            _produce(bootstrap, names, PATTERN_PARTITIONS, PER_PARTITION, 100)
            log(
                f"scale: {k:,} topics of {PATTERN_PARTITIONS} partitions created in "
                f"{seconds:.1f} s, filled in {time.perf_counter() - t:.1f} s"
            )
            created[f"topics {k}"] = round(seconds, 1)
            tasks = k * PATTERN_PARTITIONS
            point = {
                "case": f"topics {k}",
                "family": "topics",
                "x": k,
                "records": tasks * PER_PARTITION,
                "bytes": tasks * PER_PARTITION * 100,
                "options": {"subscribePattern": prefix + ".*"},
                "tasks": tasks,
                "rounds": rounds,
                "warmups": warmups,
            }
            if tasks > jvm_tasks:
                sample = [
                    (name, p)
                    for name in names[: max(1, jvm_tasks // PATTERN_PARTITIONS)]
                    for p in range(PATTERN_PARTITIONS)
                ]
                point["jvm_options"] = {"assign": _assign(sample)}
                point["jvm_share"] = len(sample) / tasks
            reads.append(point)
        for size in points["sizes"]:
            topic = f"scale-v{size}-{run}"
            records = max(PATTERN_PARTITIONS, points["size_bytes"] // size)
            per = -(-records // PATTERN_PARTITIONS)
            create(
                {topic: PATTERN_PARTITIONS},
                configs={"max.message.bytes": str(max(1_048_588, 2 * size))},
            )
            t = time.perf_counter()
            _produce(bootstrap, topic, PATTERN_PARTITIONS, per, size)
            log(
                f"scale: {per * PATTERN_PARTITIONS:,} values of {size:,} B produced in "
                f"{time.perf_counter() - t:.1f} s"
            )
            reads.append(
                {
                    "case": f"value {size}",
                    "family": "sizes",
                    "x": size,
                    "records": per * PATTERN_PARTITIONS,
                    "bytes": per * PATTERN_PARTITIONS * size,
                    "options": {"subscribe": topic},
                    "tasks": PATTERN_PARTITIONS,
                    "rounds": rounds,
                    "warmups": warmups,
                }
            )
    time.sleep(ANSWER_SETTLE_S)
    for stream in streams:  # timed once every topic is made and filled: a quiet broker
        stream["kafka_answer_s"] = kafka_answer_s(bootstrap, stream["topic"], stream["x"])
        log(
            f"scale: Kafka answers a micro-batch's Metadata and ListOffsets of "
            f"{stream['x']:,} partitions in {stream['kafka_answer_s'] * 1000:.1f} ms"
        )
    return {"reads": reads, "streams": streams, "created_s": created}


def run_scale_jvm(args, log) -> list[str]:
    """Everything of this part; returns its results.md lines."""
    import sys

    from jvm_cases import child_python, run_child

    from kafka_testbed import NEWEST_KAFKA, KafkaCluster

    began = time.monotonic()
    points = POINTS[args.scale_points]
    python, jars = child_python()
    workdir = tempfile.mkdtemp(prefix="bench-scale-")
    with KafkaCluster(NEWEST_KAFKA, heap_mb=BROKER_HEAP_MB) as kafka:
        log(f"scale: Apache Kafka {NEWEST_KAFKA} at {kafka.bootstrap} (heap {BROKER_HEAP_MB} MB)")
        spec = make_points(kafka.bootstrap, points, args.scale_jvm_tasks, args.scale_rounds, log)
        spec.update(
            {
                "mode": "scale",
                "bootstrap": kafka.bootstrap,
                "jars": jars,
                "cores": args.cores,
                "broker_pids": [kafka.pid(n) for n in kafka.nodes],
                "producer_python": sys.executable,
                "tag": args.scale_points,
            }
        )
        results = run_child(python, spec, workdir, 4 * 3600)
    results["spec"] = {k: v for k, v in spec.items() if k not in ("jars",)}
    results["points"] = args.scale_points
    results["when"] = time.strftime("%Y-%m-%d")
    os.makedirs(os.path.join(ROOT, ".cache"), exist_ok=True)
    with open(os.path.join(ROOT, ".cache", "bench-scale-results.json"), "w") as f:
        json.dump(results, f, indent=1)
    images = IMAGES if args.scale_points == "full" else os.path.join(ROOT, ".cache", "scale-images")
    drawn = draw(results, images)
    return render(results, args, time.monotonic() - began, drawn)


# ---- figures ---------------------------------------------------------------------------------


def read_figures(results: dict) -> dict[str, list[dict]]:
    """Per family, a row per point: ours and the JVM's seconds (medians; the JVM's scaled up
    from its sample where it read one), bytes, our workers' peak RSS (MB)."""
    families: dict[str, list[dict]] = {}
    for point in results["spec"]["reads"]:
        case = point["case"]
        runs = results.get("cases", {}).get(case, {})
        ours = runs.get("pykafka", {}).get("seconds")
        theirs = runs.get("kafka", {}).get("seconds")
        share = point.get("jvm_share", 1.0)
        peaks = [max(p) for p in results.get("peaks", {}).get(case, []) if p]
        families.setdefault(point["family"], []).append(
            {
                "x": point["x"],
                "records": point["records"],
                "bytes": point["bytes"],
                "tasks": point["tasks"],
                "ours": statistics.median(ours) if ours else None,
                "jvm_measured": statistics.median(theirs) if theirs else None,
                "jvm": statistics.median(theirs) / share if theirs else None,
                "sampled": share < 1.0,
                "sample_tasks": round(point["tasks"] * share),
                "peak_mb": max(peaks) / 1024 if peaks else None,
            }
        )
    return families


def stream_figures(results: dict) -> list[dict]:
    rows = []
    for point in results["spec"]["streams"]:
        got = results.get("streams", {}).get(point["case"], {}).get("results", {})

        def med(fmt):
            d = got.get(fmt, {}).get("durations") or []
            return statistics.median(d) if d else None

        rows.append(
            {
                "x": point["x"],
                "ours": med("pykafka"),
                "jvm": med("kafka"),
                "floor": med("benchfloor"),
                "kafka": point.get("kafka_answer_s"),
                "batches": len(got.get("pykafka", {}).get("durations") or []),
                "rows": statistics.median(got.get("pykafka", {}).get("rows") or [0]),
                "rate": got.get("pykafka", {}).get("rate"),
            }
        )
    return rows


def draw(results: dict, directory: str) -> list[str]:
    """The curves as PNGs in ``directory``, each titled with the run's points and date;
    returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(directory, exist_ok=True)
    families = read_figures(results)
    paths = []
    run = f"\n(--scale-points {results.get('points', '?')}, {results.get('when', '')})"
    titles = {
        "partitions": (
            f"spark.read of one topic -> noop, {PER_PARTITION} records a partition",
            "partitions",
            "seconds",
        ),
        "topics": (
            f"subscribePattern over topics of {PATTERN_PARTITIONS} partitions, "
            f"{PER_PARTITION} records each",
            "topics",
            "seconds",
        ),
        "sizes": (
            "spark.read -> noop by value size, the same bytes at each point",
            "value size (bytes)",
            "MB/s",
        ),
    }
    for family, rows in families.items():
        title, xlabel, ylabel = titles[family]
        fig, ax = plt.subplots(figsize=(6.4, 4))
        xs = [r["x"] for r in rows]
        if family == "sizes":
            ours = [r["bytes"] / r["ours"] / 1e6 if r["ours"] else None for r in rows]
            jvm = [r["bytes"] / r["jvm"] / 1e6 if r["jvm"] else None for r in rows]
        else:
            ours = [r["ours"] for r in rows]
            jvm = [r["jvm"] for r in rows]
        ax.plot(xs, ours, "o-", label="pykafka")
        measured = [(x, y) for x, y, r in zip(xs, jvm, rows) if y and not r["sampled"]]
        sampled = [(x, y) for x, y, r in zip(xs, jvm, rows) if y and r["sampled"]]
        if measured or sampled:
            ax.plot(
                [x for x, _ in measured + sampled],
                [y for _, y in measured + sampled],
                "s-",
                color="tab:red",
                label="Spark's JVM connector",
            )
        if sampled:
            ax.plot(
                [x for x, _ in sampled],
                [y for _, y in sampled],
                "s",
                color="white",
                markeredgecolor="tab:red",
                label="JVM: a sample of its tasks, scaled",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title + run, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        path = os.path.join(directory, f"scale-{family}.png")
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    streams = stream_figures(results)
    if streams:
        fig, ax = plt.subplots(figsize=(6.4, 4))
        ax.plot([r["x"] for r in streams], [r["ours"] for r in streams], "o-", label="pykafka")
        floor = [(r["x"], r["floor"]) for r in streams if r.get("floor")]
        if floor:
            ax.plot(
                [x for x, _ in floor],
                [y for _, y in floor],
                "^--",
                color="tab:gray",
                label="Spark's floor (no Kafka, offsets of as many partitions)",
            )
        least = [
            (r["x"], r["floor"] + r["kafka"])
            for r in streams
            if r.get("floor") and r.get("kafka") is not None
        ]
        if least:
            ax.plot(
                [x for x, _ in least],
                [y for _, y in least],
                "v:",
                color="tab:green",
                label="Spark's floor + Kafka's answers to planning",
            )
        if streams[0]["ours"]:
            ax.axhline(
                1.5 * streams[0]["ours"],
                color="tab:blue",
                linewidth=0.8,
                alpha=0.5,
                label=f"1.5x of pykafka at {streams[0]['x']:,} partitions (issue 41's goal)",
            )
        jvm = [(r["x"], r["jvm"]) for r in streams if r["jvm"]]
        if jvm:
            ax.plot(
                [x for x, _ in jvm],
                [y for _, y in jvm],
                "s-",
                color="tab:red",
                label="Spark's JVM connector",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("partitions of the topic")
        ax.set_ylabel("seconds (median micro-batch with rows)")
        ax.set_title(
            f"readStream at {STREAM_RATE:,} records/s, default trigger -> noop" + run, fontsize=9
        )
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        path = os.path.join(directory, "scale-micro-batch.png")
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


def _s(v) -> str:
    return "-" if v is None else f"{v:.2f} s" if v < 100 else f"{v:,.0f} s"


def render(results: dict, args, elapsed: float, drawn: list[str]) -> list[str]:
    spec = results["spec"]
    lines = [
        f"Spark's JVM connector beside ours at scale: Spark {results.get('spark')} "
        f"`local[{args.cores}]`, one SparkSession holding both connectors, Apache Kafka "
        f"(newest pinned, one node, heap {BROKER_HEAP_MB} MB) on the same {args.cores} cores; "
        f"default options on both; `--scale-points {args.scale_points}`, "
        f"{args.scale_rounds} timed round(s) after "
        f"{POINTS[args.scale_points]['read_warmups']} warm-up(s) per connector (medians); "
        f"{elapsed / 60:.1f} min. The JVM connector runs a task per partition: beyond "
        f"{args.scale_jvm_tasks} tasks it read a sample of that many partitions (`assign`), "
        "and its time for the whole is the sample's scaled by partitions / sample "
        "(marked *sampled*). Topic creation (s): "
        + ", ".join(f"{k} {v}" for k, v in spec.get("created_s", {}).items())
        + ".",
        "",
    ]
    families = read_figures(results)
    heads = {
        "partitions": "Partitions of one topic",
        "topics": "Topics under a pattern",
        "sizes": "Value size",
    }
    for family, rows in families.items():
        lines += [
            f"| {heads[family]} | records | pykafka | JVM connector | ours / JVM "
            "| our workers' peak RSS |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for r in rows:
            if family == "sizes":
                ours = f"{r['bytes'] / r['ours'] / 1e6:,.1f} MB/s" if r["ours"] else "-"
                jvm = f"{r['bytes'] / r['jvm'] / 1e6:,.1f} MB/s" if r["jvm"] else "-"
            else:
                ours, jvm = _s(r["ours"]), _s(r["jvm"])
            if r["sampled"] and r["jvm"]:
                jvm += f" *sampled*: {r['sample_tasks']} tasks in {_s(r['jvm_measured'])}"
            ratio = f"{r['jvm'] / r['ours']:,.1f}x" if r["ours"] and r["jvm"] else "-"
            peak = f"{r['peak_mb']:,.0f} MB" if r["peak_mb"] else "-"
            lines.append(f"| {r['x']:,} | {r['records']:,} | {ours} | {jvm} | {ratio} | {peak} |")
        lines.append("")
    streams = stream_figures(results)
    if streams:
        lines += [
            f"| Micro-batch at {STREAM_RATE:,} records/s, partitions | pykafka "
            "(median with rows) | micro-batches | rows (median) | records/s read "
            "| Spark's floor | Kafka's answers | JVM connector |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        base = streams[0]["ours"]
        floor_base = streams[0].get("floor")
        for r in streams:
            jvm = _s(r["jvm"]) if r["jvm"] else "not run (a task per partition with rows: minutes)"
            growth = (
                f" ({r['ours'] / base:.2f}x of {streams[0]['x']})" if base and r["ours"] else ""
            )
            rate = f"{r['rate']:,.0f}" if r.get("rate") is not None else "-"
            floor = r.get("floor")
            floor_s = (
                f"{_s(floor)} ({floor / floor_base:.2f}x)" if floor and floor_base else _s(floor)
            )
            kafka = f"{r['kafka'] * 1000:.1f} ms" if r.get("kafka") is not None else "-"
            lines.append(
                f"| {r['x']:,} | {_s(r['ours'])}{growth} | {r['batches']} "
                f"| {r['rows']:,.0f} | {rate} | {floor_s} | {kafka} | {jvm} |"
            )
        lines += [
            "",
            "Spark's floor: Spark's clock source (floor_source.py, `offsets=kafka`) with "
            "offsets shaped as ours over as many partitions and the same records a second in "
            "one task, beside the same producer: what Spark itself costs a micro-batch whose "
            "offsets name that many partitions (its offset and commit logs, its progress), "
            "with no Kafka work. Kafka's answers: the time Apache Kafka takes to answer a "
            "micro-batch's Metadata and ListOffsets requests over the topic, sent together, "
            "timed on a bare socket with nothing of ours decoded (`kafka_answer_s`, median "
            f"of {ANSWER_ROUNDS}, the broker without the stream's load).",
        ]
        last = streams[-1]
        if base and last.get("floor") and last.get("kafka") is not None:
            least = last["floor"] + last["kafka"]
            lines += [
                "",
                f"At {last['x']:,} partitions Spark's floor and Kafka's answers alone take "
                f"{least:.3f} s, {least / base:.2f}x of our micro-batch at "
                f"{streams[0]['x']:,} partitions; ours took {last['ours']:.3f} s "
                f"({last['ours'] / base:.2f}x), {last['ours'] - least:.3f} s above that sum.",
            ]
        lines.append("")
    for path in drawn:
        rel = os.path.relpath(path, os.path.join(ROOT, "tests", "bench"))
        lines.append(f"![{os.path.basename(path)}]({rel})")
    return lines
