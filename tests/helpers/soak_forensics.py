"""Where a duplicated record of the stream soak came from (tests/test_soak_stream.py).

The soak writes each source record's coordinates into the target record's ``src`` header
(``"partition:offset"`` of the source log). With that, every copy of a value in the
target can be traced:

- two copies with *different* source coordinates: the source log holds the value twice
  (the mock cluster appends an idempotent producer's re-sent batch again, see
  ``kafka_testbed.mock_cluster``); not the stream's doing;
- two copies with the *same* source coordinates: the stream wrote one source record twice,
  in the same transaction (the reader returned it twice in one micro-batch) or in two
  (two micro-batches read it: offset bookkeeping; or the sink committed it twice).

``target_log`` reads the target raw (read_uncommitted) and tells each record's fate by
Kafka's rule (the one ``txn_referee.committed_values`` applies); ``batches_reading`` finds
the micro-batches whose offset ranges (the checkpoint's offset log) hold a source offset.
"""

from __future__ import annotations

import collections
import json
import os
from dataclasses import dataclass

from protocol.records.batch import COMMIT, control_type

from .txn_referee import log_of

SRC_HEADER = "src"


@dataclass(frozen=True)
class TargetRecord:
    partition: int
    offset: int
    producer_id: int
    epoch: int
    transaction: int  # the n-th transaction of this producer id on this partition; -1: none
    fate: str  # "committed", "aborted", "open" or "plain" (not transactional)
    value: str
    src: tuple[int, int] | None  # (source partition, source offset) from the header


def source_of(record) -> tuple[int, int] | None:
    for key, value in record.headers:
        if key == SRC_HEADER and value:
            part, offset = value.decode().split(":")
            return int(part), int(offset)
    return None


def target_log(bootstrap: str, topic: str, partitions: int) -> list[TargetRecord]:
    """Every data record of the target, in log order, with its transaction's fate."""
    out: list[TargetRecord] = []
    pending: dict[tuple[int, int], list] = {}
    count: collections.Counter = collections.Counter()
    for p, h, records in log_of(bootstrap, topic, partitions):
        key = (p, h.producer_id)
        if h.attributes & 0x20:  # control batch: ends the producer's open transaction
            fate = "committed" if control_type(records[0].key) == COMMIT else "aborted"
            for args in pending.pop(key, []):
                out.append(TargetRecord(*args[:5], fate, *args[5:]))
            count[key] += 1
            continue
        for r in records:
            args = (
                p,
                r.offset,
                h.producer_id,
                h.producer_epoch,
                count[key] if h.attributes & 0x10 else -1,
                r.value.decode(),
                source_of(r),
            )
            if h.attributes & 0x10:
                pending.setdefault(key, []).append(args)
            else:
                out.append(TargetRecord(*args[:5], "plain", *args[5:]))
    for args_list in pending.values():
        out.extend(TargetRecord(*a[:5], "open", *a[5:]) for a in args_list)
    out.sort(key=lambda r: (r.partition, r.offset))
    return out


def visible(records: list[TargetRecord]) -> list[TargetRecord]:
    """What a read_committed reader sees by Kafka's rule."""
    return [r for r in records if r.fate in ("committed", "plain")]


@dataclass(frozen=True)
class SourceRecord:
    value: str
    producer_id: int
    epoch: int
    base_sequence: int  # of its batch
    batch: int  # the batch's base offset


def source_log(bootstrap: str, topic: str, partitions: int) -> dict[tuple[int, int], SourceRecord]:
    """(partition, offset) -> the source record there, for what the log still holds (the
    mock cluster keeps 100,000 batches per partition: a long run's log lost its start)."""
    return {
        (p, r.offset): SourceRecord(
            r.value.decode(), h.producer_id, h.producer_epoch, h.base_sequence, h.base_offset
        )
        for p, h, records in log_of(bootstrap, topic, partitions, from_earliest=True)
        for r in records
    }


def offset_log(checkpoint: str) -> dict[int, dict[int, int]]:
    """batch id -> {source partition: end offset} from the checkpoint's offset log."""
    out = {}
    folder = os.path.join(checkpoint, "offsets")
    for name in os.listdir(folder) if os.path.isdir(folder) else ():
        if not name.isdigit():
            continue
        with open(os.path.join(folder, name)) as f:
            lines = f.read().splitlines()
        ends = json.loads(lines[-1])
        (partitions,) = ends.values()
        out[int(name)] = {int(p): int(o) for p, o in partitions.items()}
    return out


def committed_ends(checkpoint: str) -> dict[int, int]:
    """{source partition: end offset} of the last micro-batch in Spark's commit log (its
    sink's transactions are committed), {} before the first."""
    folder = os.path.join(checkpoint, "commits")
    done = [int(n) for n in os.listdir(folder) if n.isdigit()] if os.path.isdir(folder) else []
    for batch in sorted(done, reverse=True):
        path = os.path.join(checkpoint, "offsets", str(batch))
        if os.path.exists(path):
            with open(path) as f:
                (ends,) = json.loads(f.read().splitlines()[-1]).values()
            return {int(p): int(o) for p, o in ends.items()}
    return {}


def batches_reading(ends: dict[int, dict[int, int]], part: int, offset: int) -> list[int]:
    """Batch ids whose range [previous end, end) of ``part`` holds ``offset``."""
    found = []
    for batch in sorted(ends):
        prev = ends.get(batch - 1)
        if prev is None:
            continue
        if prev.get(part, 0) <= offset < ends[batch].get(part, 0):
            found.append(batch)
    return found


def explain(
    values,
    records: list[TargetRecord],
    source: dict[tuple[int, int], SourceRecord],
    ends: dict[int, dict[int, int]],
    limit: int = 40,
) -> tuple[dict, list[str]]:
    """For every value in ``values``: where its copies are in the source log and in the
    target, and which cause that points to. Returns (counts by cause, one line per value,
    at most ``limit``)."""
    by_value: dict[str, list[TargetRecord]] = collections.defaultdict(list)
    for r in records:
        if r.value in values:
            by_value[r.value].append(r)
    in_source: dict[str, list[str]] = collections.defaultdict(list)
    for (p, o), s in source.items():
        if s.value in values:
            in_source[s.value].append(
                f"{p}@{o} pid {s.producer_id} epoch {s.epoch} "
                f"batch {s.batch} base sequence {s.base_sequence}"
            )
    causes: collections.Counter = collections.Counter()
    lines = []
    for value in sorted(values):
        copies = by_value[value]
        seen = [r for r in copies if r.fate in ("committed", "plain")]
        srcs = collections.Counter(r.src for r in seen)
        if len(srcs) == len(seen):
            cause = "the source log holds it at two offsets"
        elif len({(r.partition, r.producer_id, r.transaction) for r in seen}) == 1:
            cause = "one transaction holds one source offset twice"
        else:
            cause = "one source offset committed in two transactions"
        causes[cause] += 1
        if len(lines) < limit:
            where = "; ".join(
                f"target {r.partition}@{r.offset} pid {r.producer_id} epoch {r.epoch} "
                f"txn {r.transaction} {r.fate} src {r.src}"
                + (f" (micro-batch {batches_reading(ends, *r.src)})" if r.src else "")
                for r in copies
            )
            lines.append(
                f"{value}: {cause}; source log: {'; '.join(in_source[value]) or 'gone'}; {where}"
            )
    return dict(causes), lines
