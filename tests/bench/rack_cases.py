"""The bench's racks section: what reading from the nearest replica (``kafka.client.rack``)
saves in bytes that cross from one rack (zone) to another.

Apache Kafka, three nodes in three racks with Kafka's rack-aware replica selector
(``KafkaCluster(nodes=3, racks=..., request_log=True)``); a topic of 6 partitions,
replication factor 3, ``--racks-records`` records of 1 KB (about 50 MB at ``--scale 1``),
its leaders spread over the three nodes. Once every follower holds every record (each
replica's own high watermark, asked of it), the reader's task code (``read_range``: the
pipelined Fetch and the decoding a Spark task runs, every partition in turn, in this
process) reads the whole topic, in each of ``--racks-rounds`` rounds once without
``kafka.client.rack`` and once with the rack of node 1 (the reader's rack), in alternating
order, each run a client of its own (its own ``kafka.client.id``).

The bytes are the brokers' own count: each node's request log (``kafka.request.logger``
at DEBUG) writes every Fetch answer with the size of each partition's records
(``recordsSizeInBytes``); the section sums them per node for the run's client id. Nothing
here is asserted but the record count.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid

from bench_data import DataSet, produce

RACKS = ("rack-1", "rack-2", "rack-3")
READER_NODE = 1  # the reader runs in this node's rack
PARTITIONS = 6
VALUE_SIZE = 1000
FETCH_API_KEY = 1
_COMPLETED = "Completed request:"


def run_racks(args, log) -> list[str]:
    """Start the cluster, fill the topic, time the reads; results.md's racks block."""
    from kafka_testbed import KafkaCluster

    records = max(PARTITIONS * 2, int(args.racks_records * args.scale))
    ds = DataSet("1KB", records, VALUE_SIZE, "none", PARTITIONS, topic="bench-racks")
    kafka = KafkaCluster(nodes=3, racks=list(RACKS), request_log=True)
    t = time.perf_counter()
    kafka.start()
    try:
        log(f"racks: Apache Kafka {kafka.version}, 3 nodes in 3 racks, {_elapsed(t)}")
        t = time.perf_counter()
        produce(kafka.bootstrap, ds, replication_factor=3)
        log(f"racks: produced {ds.describe()} in {_elapsed(t)}")
        t = time.perf_counter()
        _wait_followers_caught_up(kafka, ds)
        log(f"racks: every follower caught up in {_elapsed(t)}")
        leaders = _leaders(kafka, ds)
        runs: dict[str, list[dict]] = {"leaders": [], "rack": []}
        for round_ in range(args.racks_rounds):
            order = ("leaders", "rack") if round_ % 2 == 0 else ("rack", "leaders")
            for case in order:
                run = _read(kafka, ds, RACKS[READER_NODE - 1] if case == "rack" else None)
                runs[case].append(run)
                log(
                    f"  racks {case:<8} {run['seconds']:7.2f} s  "
                    f"{ds.records / run['seconds']:12,.0f} records/s  MB by node "
                    + ", ".join(f"{n}: {b / 1e6:.1f}" for n, b in sorted(run["bytes"].items()))
                )
        return render(ds, kafka.version, leaders, runs)
    finally:
        kafka.stop()


def _elapsed(t: float) -> str:
    return f"{time.perf_counter() - t:.1f} s"


def _leaders(kafka, ds: DataSet) -> dict[int, list[int]]:
    """The partitions each node leads."""
    from protocol.client.cluster import KafkaClient

    led: dict[int, list[int]] = {node: [] for node in kafka.nodes}
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        for p in range(ds.partitions):
            led[client.leader_for(ds.topic, p)].append(p)
    return led


def _wait_followers_caught_up(kafka, ds: DataSet, timeout_s: float = 120) -> None:
    """Until each replica's own high watermark (its answer to a Fetch sent to it, at the
    last offset) covers every record: a follower learns the leader's a round later."""
    from protocol.client.cluster import KafkaClient

    with KafkaClient(bootstrap_servers=kafka.bootstrap, client_rack="probe") as client:
        replicas = client.read_replicas
        assert replicas is not None
        deadline = time.monotonic() + timeout_s
        for node in kafka.nodes:
            for p, end in ds.ends.items():
                tp = (ds.topic, p)
                while True:
                    replicas.learn(tp, {"preferred_read_replica": node})  # ask that node
                    answer = client.fetch({tp: end - 1}, max_wait_ms=0)[tp]
                    if answer["error_code"] == 0 and answer["high_watermark"] == end:
                        break
                    if time.monotonic() > deadline:
                        raise RuntimeError(
                            f"node {node} has not copied {ds.topic}-{p} up to {end} in "
                            f"{timeout_s:.0f} s: {answer['error_code']}, "
                            f"high watermark {answer['high_watermark']}"
                        )
                    time.sleep(0.1)


def _read(kafka, ds: DataSet, rack: str | None) -> dict:
    """One read of the whole topic by the reader's task code, with ``rack`` or without:
    its seconds, and the bytes and Fetch requests each node answered it with."""
    from kafka_source.fetcher import read_range
    from kafka_source.options import parse_reader_options
    from kafka_source.planning import OffsetRange

    client_id = f"bench-racks-{uuid.uuid4().hex[:8]}"
    given = {
        "kafka.bootstrap.servers": kafka.bootstrap,
        "subscribe": ds.topic,
        "kafka.client.id": client_id,
    }
    if rack is not None:
        given["kafka.client.rack"] = rack
    options = parse_reader_options(given)
    start = time.perf_counter()
    rows = 0
    for p, end in ds.ends.items():
        for batch in read_range(options, OffsetRange(ds.topic, p, 0, end)):
            rows += batch.num_rows
    seconds = time.perf_counter() - start
    if rows != ds.records:
        raise RuntimeError(f"read_range: {rows} rows, {ds.records} expected")
    served, fetches = _wait_logged(kafka, client_id, ds.wire_bytes)
    return {"seconds": seconds, "bytes": served, "fetches": fetches}


def _wait_logged(kafka, client_id: str, least: int, timeout_s: float = 30):
    """Each node's Fetch bytes and requests for ``client_id``, once the logs hold at least
    ``least`` bytes (a broker writes a request's line after its answer is sent)."""
    deadline = time.monotonic() + timeout_s
    while True:
        served, fetches = {}, {}
        for node in kafka.nodes:
            served[node], fetches[node] = fetch_bytes(
                kafka.nodes[node].request_log_file.read_text(errors="replace"), client_id
            )
        if sum(served.values()) >= least:
            return served, fetches
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the brokers logged {sum(served.values()):,} Fetch bytes for {client_id} "
                f"in {timeout_s:.0f} s, at least {least:,} expected"
            )
        time.sleep(0.2)


def fetch_bytes(request_log: str, client_id: str) -> tuple[int, int]:
    """The record bytes of the Fetch answers ``client_id`` got in a broker's request log
    (``kafka.request.logger`` at DEBUG: a JSON line per answered request), and how many
    Fetch requests those were."""
    total = requests = 0
    for line in request_log.splitlines():
        at = line.find(_COMPLETED)
        if at < 0 or f'"clientId":{json.dumps(client_id)}' not in line:
            continue
        entry = json.loads(line[at + len(_COMPLETED) :])
        header = entry["requestHeader"]
        if header["requestApiKey"] != FETCH_API_KEY or header["clientId"] != client_id:
            continue
        requests += 1
        for topic in entry.get("response", {}).get("responses", []):
            for part in topic["partitions"]:
                total += part.get("recordsSizeInBytes", 0)
    return total, requests


def render(ds: DataSet, version: str, leaders: dict[int, list[int]], runs: dict) -> list[str]:
    """results.md's racks block: a row per case, medians of the rounds."""
    nodes = sorted(leaders)
    led = "; ".join(
        f"node {n} ({RACKS[n - 1]}) leads {', '.join(f'p{p}' for p in leaders[n]) or 'none'}"
        for n in nodes
    )
    rounds = len(runs["rack"])
    out = [
        "## Reading from the nearest replica (kafka.client.rack)",
        "",
        f"Apache Kafka {version}, 3 nodes in racks {', '.join(RACKS)} (broker.rack, "
        "replica.selector.class=RackAwareReplicaSelector), all on this machine; topic of "
        f"{ds.partitions} partitions, replication factor 3, {ds.records:,} records of "
        f"{ds.value_size} B ({ds.wire_bytes / 1e6:.1f} MB stored); {led}. Each run reads "
        "the whole topic with the reader's task code (`read_range`, every partition in turn, "
        "one process, default fetch sizes) once every follower holds every record; "
        f"{rounds} rounds, each without and with `kafka.client.rack={RACKS[READER_NODE - 1]}` "
        f"(node {READER_NODE}'s rack). Bytes: the record bytes of the Fetch answers each "
        "broker logged for the run's client id (its request log, `recordsSizeInBytes`), "
        "medians of the rounds. The brokers share this machine's loopback: records/s shows "
        "what the redirect costs (one more Fetch per partition), not what a slower link "
        "between zones would.",
        "",
        "| Case | Records/s | Spread | MB/s | "
        + " | ".join(f"MB from node {n} ({RACKS[n - 1]})" for n in nodes)
        + " | Cross-rack MB | Cross-rack share | Fetches by node "
        + " / ".join(str(n) for n in nodes)
        + " |",
        "|---|---:|---:|---:|" + "---:|" * len(nodes) + "---:|---:|---:|",
    ]
    for case, title in (("leaders", "no client.rack (leaders)"), ("rack", "client.rack")):
        out.append(_row(title, ds, runs[case], nodes))
    saved = _median([_cross(r) for r in runs["leaders"]]) - _median(
        [_cross(r) for r in runs["rack"]]
    )
    out += [
        "",
        f"A reader in {RACKS[READER_NODE - 1]} moved {saved / 1e6:.1f} MB fewer across racks "
        f"per read of this {ds.wire_bytes / 1e6:.1f} MB topic with kafka.client.rack "
        "(its leaders' first Fetch of each partition answers with the replica to read from, "
        "and no records).",
    ]
    return out


def _row(title: str, ds: DataSet, runs: list[dict], nodes: list[int]) -> str:
    rates = [ds.records / r["seconds"] for r in runs]
    mb_s = [ds.wire_bytes / 1e6 / r["seconds"] for r in runs]
    rate = statistics.median(rates)
    total = _median([sum(r["bytes"].values()) for r in runs])
    cross = _median([_cross(r) for r in runs])
    cells = [
        title,
        f"{rate:,.0f}",
        f"{(max(rates) - min(rates)) / rate:.0%}",
        f"{statistics.median(mb_s):.1f}",
        *(f"{_median([r['bytes'][n] for r in runs]) / 1e6:.1f}" for n in nodes),
        f"{cross / 1e6:.1f}",
        f"{cross / total:.0%}" if total else "-",
        " / ".join(str(int(_median([r["fetches"][n] for r in runs]))) for n in nodes),
    ]
    return "| " + " | ".join(cells) + " |"


def _cross(run: dict) -> int:
    return sum(b for node, b in run["bytes"].items() if node != READER_NODE)


def _median(values: list) -> float:
    return statistics.median(values)
