"""A task's small batches joined into a few large ones before Spark gets them.

Spark's Python worker pays about as much per Arrow batch it sends as the reader pays to
decode a range of a few records; a task that reads many small ranges hands Spark its rows
joined (``joined``), and the records the decoder left as its buffers (``CompiledRows``)
become Arrow arrays here, once for all of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    import pyarrow as pa

    from protocol.records.compiled_rows import CompiledRows

# Batches of a task's small ranges are joined up to these sizes before Spark gets them:
# Spark's Python worker pays about as much per Arrow batch it sends as we pay to decode a
# range of a few records (a micro-batch over thousands of partitions has a record or two in
# each). Spark's own Arrow batches hold up to 10,000 rows (maxRecordsPerBatch).
JOINED_ROWS = 10_000
JOINED_BYTES = 4 * 1024 * 1024


def joined(batches: Iterable[pa.RecordBatch | CompiledRows]) -> Iterator[pa.RecordBatch]:
    """``batches`` in order, consecutive small ones joined into one of at most
    ``JOINED_ROWS`` rows and about ``JOINED_BYTES``; a large one passes as it is. Records
    still as the decoder's buffers (``CompiledRows``) become Arrow arrays here: those
    joined, once for all of them.

    A batch's size is the size of its buffers (``get_total_buffer_size``): ``nbytes``
    costs about 50 times more, as much as the join itself saves on a batch of a record
    or two. A batch that slices a larger buffer counts it whole, so it is joined less."""
    from protocol.records.compiled_rows import built  # executor side, as decoding

    held: list[pa.RecordBatch | CompiledRows] = []
    held_schema = None
    rows = size = 0
    for batch in batches:
        n, nbytes = batch.num_rows, batch.get_total_buffer_size()
        if held and (
            n + rows > JOINED_ROWS
            or nbytes + size > JOINED_BYTES
            or not batch.schema.equals(held_schema)
        ):
            yield join(held)
            held, rows, size = [], 0, 0
        if n >= JOINED_ROWS or nbytes >= JOINED_BYTES:
            yield built(batch)
            continue
        if not held:
            held_schema = batch.schema
        held.append(batch)
        rows, size = rows + n, size + nbytes
    if held:
        yield join(held)


def join(held: list[pa.RecordBatch | CompiledRows]) -> pa.RecordBatch:
    import pyarrow as pa

    from protocol.records.compiled_rows import CompiledRows, built

    if len(held) == 1:
        return built(held[0])
    if all(isinstance(b, CompiledRows) for b in held):
        return CompiledRows.join(cast(list[CompiledRows], held))
    batches = [built(b) for b in held]
    if hasattr(pa, "concat_batches"):  # pyarrow 19 and later
        return pa.concat_batches(batches)
    # pyarrow 15 to 18 (PySpark 4.2 and 4.3 allow 18): a table of them, one chunk a column
    # (it holds at most JOINED_BYTES), which is one batch.
    table = pa.Table.from_batches(batches).combine_chunks()
    return table.to_batches()[0] if table.num_rows else batches[0].slice(0, 0)
