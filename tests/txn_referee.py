"""Referees for exactly-once tests: what a read_committed reader should see.

Neither broker the tests run on filters aborted records as Kafka does (found by experiment,
see tests/test_sink_transactions.py): Tansu answers Fetch with the right LastStableOffset
but never sends AbortedTransactions, so librdkafka's read_committed consumer (and ours)
shows aborted records; librdkafka's mock keeps the LastStableOffset at the high
watermark even under an open transaction, sends no AbortedTransactions either, never
aborts a transaction on InitProducerId, accepts old epochs and keeps no transactional
offsets. So the referees here are:

- ``committed_values``: Kafka's own rule applied to the log (read uncommitted, record by
  record): a transactional record counts once its producer's COMMIT marker follows it,
  never when an ABORT marker does, and not while its transaction is open;
- ``librdkafka_read_committed``: confluent-kafka's consumer with
  ``isolation.level=read_committed``, which on Tansu shows what a Kafka broker would
  whenever the log holds no aborted transaction;
- ``open_transactions``: the transactions the log leaves open (no marker after them),
  empty when nothing is;
- ``stable_offsets_behind``: the partitions whose last stable offset has not reached the
  high watermark, which read_committed readers wait behind.
"""

from __future__ import annotations

import time

import confluent_kafka

from protocol.cluster import KafkaClient
from protocol.records.batch import (ABORT, COMMIT, control_type, iter_batches, parse_header,
                                    parse_records)


def log_of(bootstrap: str, topic: str, partitions: int, from_earliest: bool = False):
    """Every batch of the topic: [(partition, header, records)] in log order (from offset
    0, or with ``from_earliest`` from the log start offset: a log that dropped its start)."""
    out = []
    with KafkaClient(bootstrap_servers=bootstrap) as client:
        for p in range(partitions):
            end = client.latest_offsets([(topic, p)])[(topic, p)]
            offset = client.earliest_offsets([(topic, p)])[(topic, p)] if from_earliest else 0
            while offset < end:
                part = client.fetch({(topic, p): offset})[(topic, p)]
                data = bytes(part["records"] or b"")
                moved = False
                for pos, base, size, _ in iter_batches(data):
                    h = parse_header(data, pos)
                    if h.base_offset + h.last_offset_delta < offset:
                        continue
                    out.append((p, h, parse_records(data[pos + 61:pos + size], h)))
                    offset = h.base_offset + h.last_offset_delta + 1
                    moved = True
                if not moved:
                    break
    return out


def committed_values(bootstrap: str, topic: str, partitions: int) -> list[str]:
    """The values a Kafka broker shows read_committed readers, by Kafka's rule."""
    visible, open_txn = [], {}
    for p, h, records in log_of(bootstrap, topic, partitions):
        if h.attributes & 0x20:  # control batch
            kind = control_type(records[0].key)
            pending = open_txn.pop((p, h.producer_id), [])
            if kind == COMMIT:
                visible.extend(pending)
            else:
                assert kind == ABORT
            continue
        values = [r.value.decode() for r in records]
        if h.attributes & 0x10:
            open_txn.setdefault((p, h.producer_id), []).extend(values)
        else:
            visible.extend(values)
    return visible


def aborted_values(bootstrap: str, topic: str, partitions: int) -> list[str]:
    """Values of transactions that ended with an ABORT marker."""
    aborted, open_txn = [], {}
    for p, h, records in log_of(bootstrap, topic, partitions):
        if h.attributes & 0x20:
            pending = open_txn.pop((p, h.producer_id), [])
            if control_type(records[0].key) == ABORT:
                aborted.extend(pending)
        elif h.attributes & 0x10:
            open_txn.setdefault((p, h.producer_id), []).extend(
                r.value.decode() for r in records)
    return aborted


def open_transactions(bootstrap: str, topic: str, partitions: int) -> list[str]:
    """The transactions the log leaves open, by Kafka's rule: a producer's transactional
    batches on a partition with no COMMIT or ABORT marker of that producer after them.
    Each is described (partition, producer, epoch, first offset, records), so a failing
    assertion names what was left open; empty when nothing is. Judged from the log, not
    from the broker's last stable offset: Tansu's bookkeeping can keep an ended
    transaction open for good (``stable_offsets_behind``)."""
    opened: dict[tuple[int, int], list] = {}
    for p, h, records in log_of(bootstrap, topic, partitions):
        if h.attributes & 0x20:
            opened.pop((p, h.producer_id), None)
        elif h.attributes & 0x10:
            entry = opened.setdefault((p, h.producer_id), [h.producer_epoch, h.base_offset, 0])
            entry[2] += len(records)
    return [f"partition {p}: producer {pid} epoch {epoch} from offset {first} "
            f"({count} records, no marker after them)"
            for (p, pid), (epoch, first, count) in sorted(opened.items())]


def nothing_left_open(bootstrap: str, topic: str, partitions: int) -> bool:
    """No transaction is left open on the topic (see ``open_transactions``)."""
    return not open_transactions(bootstrap, topic, partitions)


def stable_offsets_behind(bootstrap: str, topic: str, partitions: int,
                          wait_s: float = 10.0) -> list[str]:
    """The partitions whose last stable offset (a read_committed Fetch's answer) is still
    below the high watermark after polling for up to ``wait_s`` seconds; empty once every
    partition's reaches it. Kafka writes the markers after EndTxn is answered, so a
    read_committed reader may see a transaction open for a moment after its commit;
    read_committed readers are compared only once this is empty. Tansu can keep it
    non-empty for good while the log shows every transaction ended: two InitProducerIds
    that abort overlapping transactions at the same moment (a restarted stream's tasks do)
    leave an ended transaction in its bookkeeping, and every later transaction on those
    partitions then stays "open" there, with ListOffsets(read_committed) answering 0
    (9 runs of 100 of ``python -m tests.tansu_lso_race``; see ``kafka_testbed.tansu``)."""
    deadline = time.monotonic() + wait_s
    with KafkaClient(bootstrap_servers=bootstrap) as client:
        while True:
            behind = []
            for p in range(partitions):
                part = client.fetch({(topic, p): 0}, isolation_level=1)[(topic, p)]
                lso, hwm = part["last_stable_offset"], part["high_watermark"]
                if lso != hwm:
                    behind.append(f"partition {p}: last stable offset {lso}, "
                                  f"high watermark {hwm}")
            if not behind or time.monotonic() > deadline:
                return behind
            time.sleep(0.2)


def librdkafka_read_committed(bootstrap: str, topic: str, partitions: int,
                              idle_s: float = 3.0) -> list[str]:
    """Values confluent-kafka's read_committed consumer returns, from the start, until
    it has been idle for ``idle_s`` seconds (a polling end, not a timed assertion)."""
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "referee",
                                  "isolation.level": "read_committed",
                                  "enable.auto.commit": False})
    try:
        c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        got, idle_until = [], time.monotonic() + idle_s
        while time.monotonic() < idle_until:
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            got.append(m.value().decode())
            idle_until = time.monotonic() + idle_s
        return got
    finally:
        c.close()
