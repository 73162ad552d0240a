"""The records sections of v2 batches queued for the vectorised pass, and that pass: the
compiled decoder (``accel``) when present, else ``decode_arena`` in numpy; when a record is
malformed, the reference decoder decodes its batch again to name the exact problem."""

from __future__ import annotations

import numpy as np

from ..errors import CorruptRecordError
from . import accel as _accel
from . import batch as _batch
from . import reference_decode as _reference
from .arrow_columns import from_compiled
from .compiled_rows import CompiledRows
from .decode_arena import Bad as _Bad
from .decode_arena import decode_arena as _decode_arena


class Pending:
    """Batches whose records sections wait for the vectorised pass."""

    __slots__ = (
        "sections",
        "size",
        "base_offset",
        "base_timestamp",
        "max_timestamp",
        "log_append",
        "count",
        "last_delta",
    )

    def __init__(self):
        self.sections = []
        self.size = 0
        self.base_offset = []
        self.base_timestamp = []
        self.max_timestamp = []
        self.log_append = []
        self.count = []
        self.last_delta = []

    def add(
        self, section, base_offset, base_timestamp, max_timestamp, log_append, count, last_delta
    ) -> None:
        self.sections.append(section)
        self.size += len(section)
        self.base_offset.append(base_offset)
        self.base_timestamp.append(base_timestamp)
        self.max_timestamp.append(max_timestamp)
        self.log_append.append(log_append)
        self.count.append(count)
        self.last_delta.append(last_delta)


def decode_pending(
    p: Pending, ctx, start_offset, end_offset, include_headers, schema, deferred=False
):
    topic, partition = ctx
    ext = _accel.module()
    if ext is not None:
        out = ext.decode_sections(
            p.sections,
            p.base_offset,
            p.last_delta,
            p.base_timestamp,
            p.max_timestamp,
            p.log_append,
            p.count,
            start_offset,
            end_offset,
            include_headers,
        )
        if out is not None:
            if deferred:
                return CompiledRows(out, topic, partition, schema)
            return from_compiled(out, topic, partition, include_headers, schema)
        # refused: the pure path decodes the same bytes and names the problem
    counts = np.array(p.count, dtype=np.int64)
    batch_of_last = np.cumsum(counts) - 1
    try:
        return _decode_arena(
            p,
            counts,
            batch_of_last,
            topic,
            partition,
            start_offset,
            end_offset,
            include_headers,
            schema,
        )
    except _Bad as bad:
        # find the batch and let the reference decoder name the exact problem
        b = int(np.searchsorted(batch_of_last, bad.index))
        b = min(b, len(p.count) - 1)
        h = _batch.BatchHeader(
            p.base_offset[b],
            0,
            -1,
            2,
            0,
            8 if p.log_append[b] else 0,
            p.last_delta[b],
            p.base_timestamp[b],
            p.max_timestamp[b],
            -1,
            -1,
            -1,
            p.count[b],
        )
        _reference.parse_records(p.sections[b], h, topic=topic, partition=partition)
        raise CorruptRecordError(
            f"malformed record batch: {bad}",
            topic=topic,
            partition=partition,
            offset=p.base_offset[b],
        ) from None
