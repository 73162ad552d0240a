"""The benchmark cases that need no Spark: the wire limit, the decoders and pykafka's
one-process read (the peers' reads and writes are in peers.py). Each returns the seconds it
took (and checks the record count, so a fast wrong answer cannot pass for a fast right one)."""

from __future__ import annotations

import os
import time


# Fetch sizes of the reader's defaults (kafka.max.partition.fetch.bytes, fetch.max.bytes):
# the wire limit is measured with what the reader asks for.
PARTITION_MAX_BYTES = 1024 * 1024
FETCH_MAX_BYTES = 50 * 1024 * 1024


def _scan(records) -> tuple[int, int | None]:
    """Complete batch bytes in ``records`` and the offset after its last complete batch."""
    view = memoryview(records)
    size_total = len(records)
    pos, last = 0, None
    while pos + 61 <= size_total:
        size = 12 + int.from_bytes(view[pos + 8 : pos + 12], "big")
        if pos + size > size_total:
            break
        last = (
            int.from_bytes(view[pos : pos + 8], "big")
            + int.from_bytes(view[pos + 23 : pos + 27], "big")
            + 1
        )
        pos += size
    return pos, last


def _fetch_partition(
    client, topic: str, partition: int, start: int, end: int, keep: list | None = None
) -> tuple[int, int]:
    """Fetch ``[start, end)`` of one partition, the next Fetch sent as soon as a response
    is in (pipelined as the reader does). Returns (batch bytes, fetch responses)."""
    tp = (topic, partition)
    offset, total, responses = start, 0, 0
    pending = client.start_fetch(
        {tp: offset}, partition_max_bytes=PARTITION_MAX_BYTES, max_bytes=FETCH_MAX_BYTES
    )
    while pending is not None:
        response = pending.result()[tp]
        if response["error_code"]:
            raise RuntimeError(f"fetch {topic}-{partition} at {offset}: {response}")
        records = response["records"] or b""
        used, after = _scan(records)
        pending = None
        if after is not None and after > offset:
            if keep is not None:
                keep.append((partition, offset, records))
            offset = after
        if offset < end:
            pending = client.start_fetch(
                {tp: offset}, partition_max_bytes=PARTITION_MAX_BYTES, max_bytes=FETCH_MAX_BYTES
            )
        total += used
        responses += 1
    return total, responses


def wire_task(bootstrap: str, topic: str, partition: int, end: int) -> tuple[int, int]:
    """One partition's raw bytes, no decoding (runs in a pool process)."""
    from protocol.client.cluster import KafkaClient

    with KafkaClient(bootstrap_servers=bootstrap) as client:
        return _fetch_partition(client, topic, partition, 0, end)


def warm_task(_=None) -> int:
    """Start a pool process and import the client (kept out of the timed runs)."""
    import protocol.client.cluster  # noqa: F401

    time.sleep(0.2)
    return os.getpid()


def wire(pool, bootstrap: str, ds) -> float:
    """The topic's bytes over ``pool``'s processes (as many as Spark's cores), one task
    per partition like Spark's reader."""
    start = time.perf_counter()
    futures = [pool.submit(wire_task, bootstrap, ds.topic, p, end) for p, end in ds.ends.items()]
    total = sum(f.result()[0] for f in futures)
    elapsed = time.perf_counter() - start
    if total != ds.wire_bytes:
        raise RuntimeError(f"wire: fetched {total} bytes of {ds.topic}, {ds.wire_bytes} stored")
    return elapsed


def fetch_responses(bootstrap: str, ds) -> list:
    """The Fetch responses' RECORDS bytes of the whole topic: the decoders' input."""
    from protocol.client.cluster import KafkaClient

    keep: list = []
    with KafkaClient(bootstrap_servers=bootstrap) as client:
        for p, end in ds.ends.items():
            _fetch_partition(client, ds.topic, p, 0, end, keep)
    return keep


def decode_ours(ds, responses, include_headers: bool = True) -> float:
    from protocol.records import decode_records

    topic = ds.topic
    start = time.perf_counter()
    rows = 0
    for partition, offset, records in responses:
        batch, _ = decode_records(
            records,
            topic=topic,
            partition=partition,
            start_offset=offset,
            include_headers=include_headers,
        )
        rows += batch.num_rows
    elapsed = time.perf_counter() - start
    if rows != ds.records:
        raise RuntimeError(f"decode: {rows} rows, {ds.records} expected")
    return elapsed


def kafka_python_sample(responses, ds, max_records: int) -> tuple[list, int]:
    """The first responses holding about ``max_records`` records (kafka-python is slow)."""
    sample, rows = [], 0
    per_partition = max_records // len(ds.ends) + 1
    counts: dict = {}
    for partition, offset, records in responses:
        if counts.get(partition, 0) >= per_partition:
            continue
        _, after = _scan(records)
        counts[partition] = counts.get(partition, 0) + after - offset
        sample.append((partition, offset, records))
        rows += after - offset
    return sample, rows


def decode_kafka_python(ds, sample, sample_rows: int, include_headers: bool = True) -> float:
    """kafka-python's parser over the same Fetch bytes: MemoryRecords -> record objects ->
    Python lists -> the same Arrow columns, one RecordBatch per Fetch response."""
    from kafka.record import MemoryRecords

    from peers import arrow_batch

    topic = ds.topic
    start = time.perf_counter()
    rows = 0
    for partition, _, records in sample:
        rs = []
        memory = MemoryRecords(records)
        while memory.has_next():
            rs.extend(memory.next_batch())
        out = arrow_batch(
            topic,
            [r.key for r in rs],
            [r.value for r in rs],
            [partition] * len(rs),
            [r.offset for r in rs],
            [r.timestamp for r in rs],
            [r.timestamp_type for r in rs],
            [r.headers for r in rs] if include_headers else None,
        )
        rows += out.num_rows
    elapsed = time.perf_counter() - start
    if rows != sample_rows:
        raise RuntimeError(f"kafka-python: {rows} rows, {sample_rows} expected")
    return elapsed


def read_one_process(bootstrap: str, ds, include_headers: bool = True) -> float:
    """pykafka's executor code (``read_range``: pipelined Fetch + decode) over every
    partition in turn, in this process: the like-for-like of the peers' consumer loops."""
    from kafka_source.fetcher import read_range
    from kafka_source.options import parse_reader_options
    from kafka_source.planning import OffsetRange

    options = parse_reader_options(
        {
            "kafka.bootstrap.servers": bootstrap,
            "subscribe": ds.topic,
            "includeHeaders": str(include_headers).lower(),
        }
    )
    start = time.perf_counter()
    rows = 0
    for p, end in ds.ends.items():
        for batch in read_range(options, OffsetRange(ds.topic, p, 0, end)):
            rows += batch.num_rows
    elapsed = time.perf_counter() - start
    if rows != ds.records:
        raise RuntimeError(f"read_range: {rows} rows, {ds.records} expected")
    return elapsed


def count_records(bootstrap: str, topic: str) -> int:
    """Records in ``topic``, counted from the batch headers of a full Fetch (Tansu's
    ListOffsets "latest" is unreliable; its Fetch high watermark is right)."""
    from protocol.client.cluster import KafkaClient

    total = 0
    with KafkaClient(bootstrap_servers=bootstrap) as client:
        for p in client.partitions_for(topic):
            tp, offset = (topic, p), 0
            while True:
                response = client.fetch({tp: offset}, partition_max_bytes=16 << 20)[tp]
                records = response["records"] or b""
                view, pos = memoryview(records), 0
                _, after = _scan(records)
                while after is not None and pos + 61 <= len(records):
                    size = 12 + int.from_bytes(view[pos + 8 : pos + 12], "big")
                    if pos + size > len(records):
                        break
                    # control batches (commit markers) hold no records
                    if not view[pos + 22] & 0x20:
                        total += int.from_bytes(view[pos + 57 : pos + 61], "big")
                    pos += size
                if after is None or after >= response["high_watermark"]:
                    break
                offset = after
    return total


# ---- scale: planning -------------------------------------------------------------------------


def wide_topic(bootstrap: str, topic: str, partitions: int, records_each: int = 1) -> dict:
    """A topic of ``partitions`` partitions with ``records_each`` records in each (one small
    batch per partition, written one partition after another). Returns partition -> end."""
    from bench_data import columns
    from protocol.client.cluster import KafkaClient
    from protocol.records import encode_batch

    with KafkaClient(bootstrap_servers=bootstrap) as client:
        client.create_topics({topic: partitions})
        client.wait_for_topics([topic])
        keys, values, headers, ts = columns(0, records_each, 100)
        blob = encode_batch(keys, values, headers=headers, timestamps_ms=ts)
        for p in range(partitions):
            response = client.produce(topic, p, blob, acks=1)
            if response["error_code"]:
                raise RuntimeError(f"produce to {topic}-{p} failed: {response}")
        found = client.partitions_for(topic)
    if len(found) != partitions:
        raise RuntimeError(
            f"{topic}: {len(found)} partitions in the metadata, {partitions} created"
        )
    return {p: records_each for p in range(partitions)}


def plan_batch(bootstrap: str, topic: str, partitions: int) -> float:
    """Seconds the batch reader's planning takes in this process (what Spark's Python
    planner runs on the driver: a new connection, the topic's metadata, ListOffsets
    earliest and latest, the ranges); checks it planned every partition."""
    from kafka_source.batch_reader import KafkaBatchReader
    from kafka_source.options import parse_reader_options

    options = parse_reader_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic})
    start = time.perf_counter()
    parts = KafkaBatchReader(options).partitions()
    elapsed = time.perf_counter() - start
    if len({r.topic_partition for p in parts for r in p.ranges}) != partitions:
        raise RuntimeError(
            f"planning {topic}: {len(parts)} input partitions, {partitions} expected"
        )
    return elapsed


def plan_micro_batch(bootstrap: str, topic: str, partitions: int) -> float:
    """Seconds a stream spends planning one micro-batch in this process, after its start
    is known (what Spark's streaming planner worker runs per trigger: latestOffset, which
    looks up metadata and the latest offsets, then partitions); checks it planned every
    partition (small partitions share an input partition, as in ``plan_batch``)."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from kafka_source.options import parse_reader_options
    from kafka_source.stream_reader import KafkaStreamReader

    options = parse_reader_options(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "startingOffsets": "earliest"},
        for_streaming=True,
    )
    reader = KafkaStreamReader(options)
    try:
        start_offsets = reader.initialOffset()
        reader.latestOffset(start_offsets, ReadAllAvailable())  # batch 0 (empty) and the client
        start = time.perf_counter()
        end = reader.latestOffset(start_offsets, ReadAllAvailable())
        parts = reader.partitions(start_offsets, end)
        elapsed = time.perf_counter() - start
    finally:
        reader.stop()
    if len({r.topic_partition for p in parts for r in p.ranges}) != partitions:
        raise RuntimeError(
            f"micro-batch of {topic}: {len(parts)} input partitions, not every one of the "
            f"{partitions} partitions planned"
        )
    return elapsed
