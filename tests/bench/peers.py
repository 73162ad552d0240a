"""The peers of ``make bench``: the Python Kafka clients a user would pick instead of this
connector (confluent-kafka, kafka-python, aiokafka), each configured the way its own
documentation and a user who measured would configure it for throughput.

Every setting sits next to the reason for it (``Setting.why``); ``run.py`` prints them in
results.md ("Peer settings"), and ``tune_peers.py`` measures the candidates that were tried
(its last run: ``peer_tuning.md``). Settings a peer leaves at its default are not listed
unless the default was tried against other values.

Every read builds the columns of ``spark.read.format("pykafka")`` (``protocol.records``'
``SCHEMA``: key, value, topic, partition, offset, timestamp in microseconds, timestampType;
with ``headers=True`` also the ``headers`` list of (key, value) structs), in Arrow record
batches of about ``CHUNK`` rows, each peer its fastest way: one list comprehension per column
over a polled batch of messages, header lists handed to Arrow as the (key, value) tuples the
client already returns. Every write sends the same rows (keys, values and, with headers, one
header per row, as the client's produce call takes them, built before the clock starts),
idempotent with acks=all like the sink's defaults, and waits until every record is
acknowledged. Each function returns its seconds and checks its record count.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from protocol.records.decode_arrow import HEADERS_TYPE, SCHEMA, SCHEMA_WITH_HEADERS

CHUNK = 100_000  # rows per Arrow record batch (and per poll where the client takes a count)


@dataclass(frozen=True)
class Setting:
    name: str
    value: object
    why: str
    call: bool = False  # how the client is called (a loop's batch size), not its config


def config(settings: list[Setting], overrides: dict | None = None) -> dict:
    """The client's configuration (the settings that are not ``call``), with ``overrides``
    by exact name applied (a value of ``DEFAULT`` drops the setting): the tuning runs use
    these."""
    out = {s.name: s.value for s in settings if not s.call}
    for name, value in (overrides or {}).items():
        if any(s.name == name and s.call for s in settings):
            continue
        if value is DEFAULT:
            out.pop(name, None)
        else:
            out[name] = value
    return out


def call_setting(settings: list[Setting], name: str, overrides: dict | None = None):
    """A ``call`` setting's value, or its override."""
    if overrides and name in overrides:
        return overrides[name]
    return next(s.value for s in settings if s.name == name and s.call)


DEFAULT = object()  # an override that leaves a setting at the client's default


# ---- confluent-kafka ----------------------------------------------------------------------

CONFLUENT_CONSUMER = [
    Setting(
        "group.id",
        "bench-confluent",
        "required by the Python Consumer; no group is joined (partitions are assigned)",
    ),
    Setting(
        "enable.auto.commit", False, "a bench reads ranges, nothing to commit; no commit traffic"
    ),
    Setting("enable.auto.offset.store", False, "likewise: no offset store per message"),
    Setting("auto.offset.reset", "earliest", "read from the start"),
    Setting(
        "fetch.queue.backoff.ms",
        0,
        "default 1000: librdkafka stops prefetching for "
        "1 s whenever its queue holds queued.min.messages; 0 keeps fetching",
    ),
    Setting(
        "queued.min.messages",
        1_000_000,
        "default 100000: a deeper prefetch queue per "
        "partition, so the fetcher thread is not idle while Python drains it",
    ),
    Setting(
        "fetch.wait.max.ms",
        100,
        "default 500: how long the broker may hold an "
        "empty Fetch; shorter never hurts a topic with data and ends the tail faster",
    ),
    Setting(
        "num_messages",
        CHUNK,
        "Consumer.consume(num_messages=..., timeout=1.0): one "
        "call returns up to this many messages (the Python API's batch call); 1M slower, "
        "10k no clear difference. Left at their defaults after trying, no clear "
        "difference: max.partition.fetch.bytes (1 MB; 4 and 8 MB), fetch.max.bytes "
        "(50 MB; 100 MB), queued.max.messages.kbytes (64 MB; 1 GB), fetch.min.bytes "
        "(1; 1 MB)",
        call=True,
    ),
]

CONFLUENT_PRODUCER = [
    Setting("enable.idempotence", True, "as the sink's default"),
    Setting("acks", "all", "as the sink's default (idempotence requires it)"),
    Setting(
        "queue.buffering.max.messages",
        1_000_000,
        "default 100000: produce() never "
        "waits for room (BufferError) during the run. Left at their defaults after "
        "trying: linger.ms (5; 20 and 50 no faster), batch.num.messages (10000; 100000 "
        "no faster), batch.size (1 MB; 64 KB slightly slower)",
    ),
    Setting(
        "queue.buffering.max.kbytes",
        1_048_576,
        "default 1 GB already (the cap); named so the pair is explicit",
    ),
    Setting(
        "callback",
        "none",
        "produce(topic, value, key[, headers=]) without "
        "a per-message on_delivery callback; errors would surface in flush()",
        call=True,
    ),
    Setting(
        "poll_every",
        10_000,
        "poll(0) once per this many produce() calls "
        "(serves delivery reports without a call per message); every 1 and 1000 tried",
        call=True,
    ),
]


def confluent_read(bootstrap: str, ds, headers: bool, overrides: dict | None = None) -> float:
    """A confluent-kafka Consumer over every partition of ``ds`` (assigned, from offset 0)
    -> Arrow record batches."""
    import confluent_kafka

    conf = config(CONFLUENT_CONSUMER, overrides)
    num = call_setting(CONFLUENT_CONSUMER, "num_messages", overrides)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, **conf})
    topic, total = ds.topic, ds.records
    try:
        start = time.perf_counter()
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in ds.ends])
        consume = consumer.consume
        rows, pending = 0, []
        while rows < total:
            messages = consume(min(num, total - rows), 1.0)
            if not messages:
                continue
            pending += messages
            rows += len(messages)
            if len(pending) >= CHUNK or rows >= total:
                if any(m.error() for m in pending):
                    raise RuntimeError(
                        "confluent-kafka: " + str(next(m.error() for m in pending if m.error()))
                    )
                _confluent_batch(topic, pending, headers)
                pending = []
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    if rows != total:
        raise RuntimeError(f"confluent-kafka: {rows} rows, {total} expected")
    return elapsed


def _confluent_batch(topic: str, ms: list, headers: bool) -> pa.RecordBatch:
    stamps = [m.timestamp() for m in ms]  # (type, ms)
    columns = [
        [m.key() for m in ms],
        [m.value() for m in ms],
        [m.partition() for m in ms],
        [m.offset() for m in ms],
        [t[1] for t in stamps],
        [t[0] for t in stamps],
    ]
    hs = [m.headers() for m in ms] if headers else None
    # librdkafka's timestamp types: 1 create time, 2 log append time (Kafka's 0 and 1)
    return arrow_batch(topic, *columns, hs, type_offset=-1)


# ---- kafka-python -------------------------------------------------------------------------

KAFKA_PYTHON_CONSUMER = [
    Setting("group_id", None, "no group: partitions are assigned, nothing committed"),
    Setting("enable_auto_commit", False, "no commits"),
    Setting("auto_offset_reset", "earliest", "read from the start"),
    Setting("fetch_max_bytes", 52_428_800, "default (50 MB)"),
    Setting(
        "max_partition_fetch_bytes",
        4_194_304,
        "default 1 MB: bigger Fetch responses per partition; 1, 4, 8 MB tried",
    ),
    Setting("fetch_max_wait_ms", 100, "default 500, as for librdkafka above"),
    Setting(
        "max_poll_records",
        CHUNK,
        "default 500: poll() returns up to this many "
        "records, so the Python loop around it runs rarely; 500, 10k, 100k tried",
    ),
    Setting("check_crcs", True, "default, as the other clients"),
]

KAFKA_PYTHON_PRODUCER = [
    Setting("enable_idempotence", True, "as the sink's default"),
    Setting("acks", "all", "as the sink's default"),
    Setting("linger_ms", 20, "default 0: fuller batches; 0, 5, 20 tried"),
    Setting(
        "batch_size",
        262_144,
        "default 16384 bytes per partition batch; 16 KB, "
        "256 KB, 1 MB tried (kafka-python 3 has no buffer_memory to raise)",
    ),
    Setting("futures", "dropped", "send() without callbacks; flush() waits", call=True),
]


def kafka_python_read(bootstrap: str, ds, headers: bool, overrides: dict | None = None) -> float:
    """A kafka-python KafkaConsumer (assigned partitions from offset 0 to ``ds.ends``,
    each paused at its end) -> Arrow."""
    from kafka import KafkaConsumer, TopicPartition

    conf = config(KAFKA_PYTHON_CONSUMER, overrides)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, **conf)
    try:
        start = time.perf_counter()
        tps = [TopicPartition(ds.topic, p) for p in ds.ends]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        state = _PollState(ds, headers)
        while state.remaining:
            state.add(consumer.poll(timeout_ms=1000), consumer.pause)
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    state.check("kafka-python")
    return elapsed


class _PollState:
    """Polled ``{tp: [records]}`` dicts (kafka-python's and aiokafka's shape) -> Arrow
    batches of about CHUNK rows, each partition cut and paused at its end offset."""

    def __init__(self, ds, headers: bool):
        self.topic, self.headers, self.total = ds.topic, headers, ds.records
        self.remaining = dict(ds.ends)
        self.rows = self.size = 0
        self.pending: list[tuple[int, list]] = []

    def add(self, polled: dict, pause) -> None:
        for tp, records in polled.items():
            end = self.remaining.get(tp.partition)
            if end is None or not records:
                continue
            if records[-1].offset >= end - 1:  # offsets are contiguous in these topics
                records = records[: end - records[0].offset]
                del self.remaining[tp.partition]
                pause(tp)
            self.pending.append((tp.partition, records))
            self.size += len(records)
            self.rows += len(records)
        if self.size >= CHUNK or (self.size and not self.remaining):
            _records_batch(self.topic, self.pending, self.headers)
            self.pending, self.size = [], 0

    def check(self, name: str) -> None:
        if self.rows != self.total:
            raise RuntimeError(f"{name}: {self.rows} rows, {self.total} expected")


def _records_batch(topic: str, pending: list, headers: bool) -> pa.RecordBatch:
    rs = [r for _, records in pending for r in records]
    partitions = np.repeat(
        np.array([p for p, _ in pending], dtype=np.int32), [len(records) for _, records in pending]
    )
    hs = [r.headers for r in rs] if headers else None
    return arrow_batch(
        topic,
        [r.key for r in rs],
        [r.value for r in rs],
        partitions,
        [r.offset for r in rs],
        [r.timestamp for r in rs],
        [r.timestamp_type for r in rs],
        hs,
    )


def kafka_python_write(
    bootstrap: str, topic: str, rows, codec: str, headers: bool, overrides: dict | None = None
) -> float:
    from kafka import KafkaProducer

    keys, values, hs = rows
    conf = config(KAFKA_PYTHON_PRODUCER, overrides)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec, **conf
    )
    try:
        send = producer.send
        start = time.perf_counter()
        if headers:
            for key, value, h in zip(keys, values, hs):
                send(topic, value, key, h)
        else:
            for key, value in zip(keys, values):
                send(topic, value, key)
        producer.flush(300)
        elapsed = time.perf_counter() - start
    finally:
        producer.close()
    return elapsed


# ---- aiokafka -----------------------------------------------------------------------------

AIOKAFKA_CONSUMER = [
    Setting("group_id", None, "no group: partitions are assigned"),
    Setting("enable_auto_commit", False, "no commits"),
    Setting("auto_offset_reset", "earliest", "read from the start"),
    Setting("fetch_max_bytes", 52_428_800, "default (50 MB)"),
    Setting(
        "max_partition_fetch_bytes",
        4_194_304,
        "default 1 MB: bigger Fetch responses; 1, 4, 8 MB tried, no clear difference",
    ),
    Setting("fetch_max_wait_ms", 100, "default 500, as above"),
    Setting(
        "max_poll_records",
        CHUNK,
        "getmany(max_records=...) cap, one Arrow batch's "
        "worth; the default (unlimited: each call returns what is prefetched) tried, "
        "no clear difference",
    ),
    Setting("check_crcs", True, "default"),
]

AIOKAFKA_PRODUCER = [
    Setting(
        "enable_idempotence",
        False,
        "the default; the sink is idempotent, but Tansu "
        "answers aiokafka's InitProducerId (v0) with UNKNOWN_SERVER_ERROR, so this peer "
        "writes without producer ids and sequence numbers (slightly less work)",
    ),
    Setting("acks", "all", "as the sink's default"),
    Setting(
        "max_batch_size",
        262_144,
        "default 16384: the bytes of each batch "
        "create_batch() builds (and send() fills); 16 KB, 256 KB, 1 MB tried",
    ),
    Setting(
        "api",
        "batch",
        "aiokafka's batch API (create_batch / send_batch, one "
        "builder per partition, the key's partition from aiokafka's DefaultPartitioner, "
        "every batch's delivery future awaited at the end): ~3x send() per record, "
        "which was tried with linger_ms 0 (default), 5 and 20 (await send() only queues "
        "the record and returns its delivery future)",
        call=True,
    ),
]


def aiokafka_read(bootstrap: str, ds, headers: bool, overrides: dict | None = None) -> float:
    """An aiokafka AIOKafkaConsumer (assigned partitions from offset 0 to ``ds.ends``,
    each paused at its end) -> Arrow."""
    return asyncio.run(_aiokafka_read(bootstrap, ds, headers, overrides))


async def _aiokafka_read(bootstrap: str, ds, headers: bool, overrides: dict) -> float:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    conf = config(AIOKAFKA_CONSUMER, overrides)
    max_records = conf.pop("max_poll_records")
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, **conf)
    await consumer.start()
    try:
        start = time.perf_counter()
        tps = [TopicPartition(ds.topic, p) for p in ds.ends]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        state = _PollState(ds, headers)
        while state.remaining:
            state.add(
                await consumer.getmany(timeout_ms=1000, max_records=max_records), consumer.pause
            )
        elapsed = time.perf_counter() - start
    finally:
        await consumer.stop()
    state.check("aiokafka")
    return elapsed


def aiokafka_write(
    bootstrap: str, topic: str, rows, codec: str, headers: bool, overrides: dict | None = None
) -> float:
    return asyncio.run(_aiokafka_write(bootstrap, topic, rows, codec, headers, overrides))


async def _aiokafka_write(bootstrap, topic, rows, codec, headers, overrides) -> float:
    from aiokafka import AIOKafkaProducer

    keys, values, hs = rows
    conf = config(AIOKAFKA_PRODUCER, overrides)
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec, **conf
    )
    await producer.start()
    try:
        if call_setting(AIOKAFKA_PRODUCER, "api", overrides) == "batch":
            return await _aiokafka_send_batches(
                producer, topic, keys, values, hs if headers else None
            )
        send = producer.send
        start = time.perf_counter()
        futures = []
        add = futures.append
        if headers:
            for key, value, h in zip(keys, values, hs):
                add(await send(topic, value, key, headers=h))
        else:
            for key, value in zip(keys, values):
                add(await send(topic, value, key))
        await producer.flush()
        for f in futures:
            f.result()  # raises the first failed delivery
        elapsed = time.perf_counter() - start
    finally:
        await producer.stop()
    return elapsed


async def _aiokafka_send_batches(producer, topic: str, keys, values, hs) -> float:
    """aiokafka's batch API: rows appended to one BatchBuilder per partition (the key's
    partition by aiokafka's own murmur2 partitioner), each full batch handed to
    send_batch()."""
    from aiokafka.partitioner import DefaultPartitioner

    partitioner = DefaultPartitioner()
    start = time.perf_counter()
    parts = sorted(await producer.partitions_for(topic))
    builders = {p: producer.create_batch() for p in parts}
    futures = []
    none: list = []
    rows = zip(keys, values, hs) if hs is not None else ((k, v, none) for k, v in zip(keys, values))
    for key, value, h in rows:
        p = partitioner(key, parts, parts)
        builder = builders[p]
        if builder.append(key=key, value=value, timestamp=None, headers=h) is None:
            builder.close()
            futures.append(await producer.send_batch(builder, topic, partition=p))
            builder = builders[p] = producer.create_batch()
            builder.append(key=key, value=value, timestamp=None, headers=h)
    for p, builder in builders.items():
        if builder.record_count():
            builder.close()
            futures.append(await producer.send_batch(builder, topic, partition=p))
    for f in futures:
        await f
    return time.perf_counter() - start


# ---- confluent-kafka producer -------------------------------------------------------------


def confluent_write(
    bootstrap: str, topic: str, rows, codec: str, headers: bool, overrides: dict | None = None
) -> float:
    """A confluent-kafka Producer loop over rows built beforehand, then ``flush``."""
    import confluent_kafka

    keys, values, hs = rows
    conf = config(CONFLUENT_PRODUCER, overrides)
    every = call_setting(CONFLUENT_PRODUCER, "poll_every", overrides)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "compression.type": codec, **conf}
    )
    produce, poll = producer.produce, producer.poll
    start = time.perf_counter()
    n = 0
    if headers:
        for key, value, h in zip(keys, values, hs):
            while True:
                try:
                    produce(topic, value, key, headers=h)
                    break
                except BufferError:  # queue full: serve delivery reports, then retry
                    poll(0.05)
            n += 1
            if n == every:
                poll(0)
                n = 0
    else:
        for key, value in zip(keys, values):
            while True:
                try:
                    produce(topic, value, key)
                    break
                except BufferError:
                    poll(0.05)
            n += 1
            if n == every:
                poll(0)
                n = 0
    remaining = producer.flush(300)
    elapsed = time.perf_counter() - start
    if remaining:
        raise RuntimeError(f"confluent-kafka left {remaining} records undelivered")
    return elapsed


def write_rows(table: pa.Table):
    """Python lists of the rows the producer loops send (built before the clock starts):
    keys, values, and each row's headers as a list of (key, value) tuples."""
    keys = table.column("key").to_pylist()
    values = table.column("value").to_pylist()
    headers = [[(h["key"], h["value"]) for h in hs] for hs in table.column("headers").to_pylist()]
    return keys, values, headers


# ---- the Arrow batch every reader builds --------------------------------------------------


def arrow_batch(
    topic: str,
    keys,
    values,
    partitions,
    offsets,
    stamps_ms,
    stamp_types,
    headers,
    type_offset: int = 0,
) -> pa.RecordBatch:
    """The columns of the pykafka reader (``SCHEMA`` or ``SCHEMA_WITH_HEADERS``) from Python
    lists (partitions may be a numpy array)."""
    n = len(offsets)
    micros = np.asarray(stamps_ms, dtype=np.int64) * 1000
    types = np.asarray(stamp_types, dtype=np.int32)
    if type_offset:
        types += type_offset
    arrays = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.array(partitions, pa.int32()),
        pa.array(offsets, pa.int64()),
        pa.array(micros, pa.timestamp("us", tz="UTC")),
        pa.array(types, pa.int32()),
    ]
    if headers is None:
        return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)
    arrays.append(pa.array(headers, HEADERS_TYPE))
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA_WITH_HEADERS)


READERS = {
    "confluent-kafka": confluent_read,
    "kafka-python": kafka_python_read,
    "aiokafka": aiokafka_read,
}
WRITERS = {
    "confluent-kafka": confluent_write,
    "kafka-python": kafka_python_write,
    "aiokafka": aiokafka_write,
}
SETTINGS = {
    "confluent-kafka": (CONFLUENT_CONSUMER, CONFLUENT_PRODUCER),
    "kafka-python": (KAFKA_PYTHON_CONSUMER, KAFKA_PYTHON_PRODUCER),
    "aiokafka": (AIOKAFKA_CONSUMER, AIOKAFKA_PRODUCER),
}
