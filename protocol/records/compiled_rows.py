"""Records the compiled decoder (accel.py) decoded, kept as its buffers until they become
Arrow columns: alone (``batch()``), or several partitions' together (``join``).

A micro-batch over thousands of partitions has a record or two in each, and a task reads
hundreds of such ranges. Each range's records made into a batch of its own cost about as
much as decoding them (seven Arrow arrays, each a few calls); joined first as buffers, the
task's ranges make one set of arrays. Only records without their headers column are kept
this way (the headers' nested list is built per range, ``arrow_columns.from_compiled``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .arrow_columns import TIMESTAMP_TYPE, from_compiled, repeated_offsets

__all__ = ["CompiledRows", "built"]


class CompiledRows:
    """One partition's records as the compiled decoder's buffers (no headers column)."""

    __slots__ = ("out", "topic", "partition", "schema")

    def __init__(self, out: tuple, topic: str, partition: int, schema: pa.Schema):
        self.out, self.topic, self.partition, self.schema = out, topic, partition, schema

    @property
    def num_rows(self) -> int:
        return int(self.out[0])

    def get_total_buffer_size(self) -> int:
        """About the size of the batch it makes (its keys, values and fixed columns)."""
        n, _, _, kd, _, _, vd = self.out[:7]
        return len(kd) + len(vd) + n * 40

    def batch(self) -> pa.RecordBatch:
        return from_compiled(self.out, self.topic, self.partition, False, self.schema)

    @staticmethod
    def join(parts: list[CompiledRows]) -> pa.RecordBatch:
        """One batch of ``parts``' rows in order, built once (their schemas are equal)."""
        counts = np.array([p.num_rows for p in parts], dtype=np.int64)
        n = int(counts.sum())
        outs = [p.out for p in parts]
        topics = [p.topic.encode("utf-8") for p in parts]
        cols = [
            _binary([(o[0], o[1], o[2], o[3]) for o in outs], pa.binary(), n),
            _binary([(o[0], o[4], o[5], o[6]) for o in outs], pa.binary(), n),
            _binary(
                [
                    (c, repeated_offsets(len(t), c), None, t * c)
                    for t, c in zip(topics, counts.tolist())
                ],
                pa.string(),
                n,
            ),
            pa.array(np.repeat(np.array([p.partition for p in parts], np.int32), counts)),
            _fixed([o[7] for o in outs], pa.int64(), n),
            _fixed([o[8] for o in outs], TIMESTAMP_TYPE, n),
            _fixed([o[9] for o in outs], pa.int32(), n),
        ]
        return pa.RecordBatch.from_arrays(cols, schema=parts[0].schema)


def built(batch: pa.RecordBatch | CompiledRows) -> pa.RecordBatch:
    """``batch`` as an Arrow batch."""
    return batch.batch() if isinstance(batch, CompiledRows) else batch


def _binary(pieces: list, arrow_type: pa.DataType, n: int) -> pa.Array:
    """One binary (or string) array of pieces ``(rows, offsets, validity, data)``: each
    piece's int32 offsets (``rows + 1``, from 0) moved past the data before it, its
    validity bitmap (None: all valid) unpacked and packed again with the others'."""
    offsets = np.empty(n + 1, dtype=np.int32)
    validity = None if all(v is None for _, _, v, _ in pieces) else np.ones(n, dtype=np.bool_)
    data = []
    at, base = 0, 0
    for rows, raw_offsets, valid, raw_data in pieces:
        own = np.frombuffer(raw_offsets, dtype=np.int32, count=rows + 1)
        first, last = int(own[0]), int(own[rows])
        offsets[at : at + rows] = own[:rows] + (base - first)
        if valid is not None and validity is not None:
            bits = np.frombuffer(valid, dtype=np.uint8)
            validity[at : at + rows] = np.unpackbits(bits, count=rows, bitorder="little")
        data.append(memoryview(raw_data)[first:last])
        at, base = at + rows, base + last - first
    offsets[n] = base
    buffers = [pa.py_buffer(offsets), pa.py_buffer(b"".join(data))]
    if validity is None:
        return pa.Array.from_buffers(arrow_type, n, [None, *buffers])
    bitmap = pa.py_buffer(np.packbits(validity, bitorder="little"))
    nulls = n - int(validity.sum())
    return pa.Array.from_buffers(arrow_type, n, [bitmap, *buffers], null_count=nulls)


def _fixed(buffers: list, arrow_type: pa.DataType, n: int) -> pa.Array:
    # the compiled decoder's fixed-width buffers hold exactly its rows (no spare room)
    return pa.Array.from_buffers(arrow_type, n, [None, pa.py_buffer(b"".join(buffers))])
