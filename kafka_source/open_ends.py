"""Ends of offset ranges looked up when a task runs (``OpenEnd``), all of a task's at once.

A batch DataFrame's partitions are planned once and every action runs on that plan; a range
planned to the latest offset (or to a timestamp) has its end looked up by the task that
reads it, so that a second action sees the records that came since.
"""

from __future__ import annotations

from typing import NamedTuple

from protocol.client import pool
from protocol.client.cluster import LATEST_TIMESTAMP, KafkaClient

from .offset_specs import OffsetRange


class OpenEnd(NamedTuple):
    """A range whose end is looked up when the task runs, not when the read was planned:
    the partition's latest offset, or with ``timestamp`` the first offset at or after that
    time (the latest when there is none), never beyond ``cap`` (a pushed-down offset bound)
    and never below the planned end. Spark plans a batch DataFrame's partitions once and
    runs every action on that plan; this is how a second action sees new records."""

    timestamp: int | None = None
    cap: int | None = None


def resolve_open_end(client: KafkaClient, options, rng: OffsetRange, open_end: OpenEnd) -> int:
    return _resolve_open_ends(client, options, [(rng, open_end)])[0]


def _resolve_open_ends(
    client: KafkaClient, options, pairs: list[tuple[OffsetRange, OpenEnd]]
) -> list[int]:
    """The end of each ``(range, open end)``, all looked up together: one ListOffsets
    request per leader for the lot (and one more per leader for the timestamps that no
    record has reached yet), however many ranges a task reads. A partition is asked once
    (Kafka refuses a partition twice in one ListOffsets request)."""
    level = options.isolation_level_code
    wanted = {}
    for rng, open_end in pairs:
        wanted[(rng.topic, rng.partition)] = (
            LATEST_TIMESTAMP if open_end.timestamp is None else open_end.timestamp
        )
    found = {tp: o for tp, (o, _) in client.list_offsets(wanted, level).items()}
    # no record at or after the timestamp: the end is the latest offset
    beyond = [tp for tp, o in found.items() if o < 0]
    if beyond:
        found.update(client.latest_offsets(beyond, level))
    ends = []
    for rng, open_end in pairs:
        end = max(rng.end, found[(rng.topic, rng.partition)])
        ends.append(end if open_end.cap is None else min(end, max(rng.end, open_end.cap)))
    return ends


def resolve_open_ends(options, ranges, open_ends) -> list[OffsetRange]:
    """``ranges`` with every open end (``open_ends``, aligned with them; None where the
    end is fixed) looked up now, in one round of ListOffsets (``_resolve_open_ends``):
    what a task that reads several ranges does first, so that its requests grow with the
    brokers it reads from, not with its ranges."""
    pairs = [(r, e) for r, e in zip(ranges, open_ends) if e is not None]
    if not pairs:
        return list(ranges)
    with pool.borrow(options.client_config) as lease:
        ends = iter(_resolve_open_ends(lease.client, options, pairs))
    return [r if e is None else r._replace(end=next(ends)) for r, e in zip(ranges, open_ends)]
