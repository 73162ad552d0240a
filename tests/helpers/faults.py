"""Helpers of the fault tests: numbered records and reader options over the fault proxy."""

from __future__ import annotations

import confluent_kafka
from kafka_source.options import parse_reader_options


def reader_options(bootstrap: str, **extra):
    base = {"kafka.bootstrap.servers": bootstrap, "subscribe": "unused"}
    base.update({k: str(v) for k, v in extra.items()})
    return parse_reader_options(base)


def produce_numbered(
    bootstrap: str, topic: str, total: int, partitions: int, batch: int = 10_000
) -> None:
    """Records ``i`` (key ``k<i>``, a value of varying length, a header on every 7th) to
    partition ``i % partitions``, in order, in record batches of at most ``batch``."""
    p = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.num.messages": batch,
            "enable.idempotence": True,
        }
    )
    for i in range(total):
        value = b"v%09d-" % i + b"x" * (i % 37)
        headers = [("h", b"%d" % i)] if i % 7 == 0 else None
        while True:
            try:
                p.produce(
                    topic, key=b"k%d" % i, value=value, partition=i % partitions, headers=headers
                )
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0
