"""Bytes only tests build: transaction markers as a broker writes them, zigzag varints in bulk."""

from __future__ import annotations

import struct

import numpy as np

from protocol.records.batch import Record, build_batch
from protocol.records.vectorized import varint_sizes, write_varints, zigzag_encode


def encode_varints(values: np.ndarray) -> tuple[bytes, np.ndarray]:
    """Zigzag varints of int64 ``values``, concatenated; also each one's size."""
    u = zigzag_encode(values)
    size = varint_sizes(u)
    pos = np.zeros(size.size, dtype=np.int64)
    np.cumsum(size[:-1], out=pos[1:])
    out = np.zeros(int(size.sum()), dtype=np.uint8)
    write_varints(out, pos, u, size)
    return out.tobytes(), size


def control_record_key(control_type: int, version: int = 0) -> bytes:
    """The key of a control record: version int16, type int16 (0 abort, 1 commit)."""
    return struct.pack(">hh", version, control_type)


def control_record_value(coordinator_epoch: int = 0, version: int = 0) -> bytes:
    """The value of a transaction marker: version int16, coordinator epoch int32."""
    return struct.pack(">hi", version, coordinator_epoch)


def build_control_batch(
    control_type_: int,
    *,
    offset: int,
    producer_id: int,
    producer_epoch: int = 0,
    timestamp: int = 0,
    coordinator_epoch: int = 0,
) -> bytes:
    """A transaction marker batch as a broker writes it (one control record)."""
    rec = Record(
        offset,
        timestamp,
        control_record_key(control_type_),
        control_record_value(coordinator_epoch),
    )
    return build_batch(
        [rec],
        transactional=True,
        control=True,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
    )
