"""Golden v0/v1 message sets (bytes Kafka's Java client wrote) and their wrapper."""

from __future__ import annotations

import struct
import zlib
from protocol.records import compression as C
from protocol.records import legacy as L


TS = 1_700_000_000_000


GOLDEN_V1 = bytes.fromhex(
    "0000000000000007"  # offset 7
    "00000019"  # messageSize 25
    "1cff7dfc"  # crc: CRC-32 of magic .. end
    "01"  # magic 1
    "00"  # attributes: no codec, CreateTime
    "0000018bcfe56800"  # timestamp TS
    "ffffffff"  # keyLength -1: null key
    "00000003"  # valueLength 3
    "616263"  # value "abc"
)


GOLDEN_V0 = bytes.fromhex(
    "0000000000000008"  # offset 8
    "00000011"  # messageSize 17
    "d0a1b23e"  # crc
    "00"  # magic 0
    "00"  # attributes
    "00000001"  # keyLength 1
    "6b"  # key "k"
    "00000002"  # valueLength 2
    "6869"  # value "hi"
)


def _blob(b):
    return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b


def message(offset, key, value, *, magic, timestamp=-1, attributes=0, crc=None):
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    body += _blob(key) + _blob(value)
    msg = struct.pack(">I", zlib.crc32(body) if crc is None else crc) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def broken_lz4(data):
    """LZ4 frame as Kafka 0.8/0.9 wrote it: header checksum over magic + descriptor."""
    frame = C.compress("lz4", data)
    flg = frame[4]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    return frame[:end] + bytes([(C.xxh32(frame[:end]) >> 8) & 0xFF]) + frame[end + 1 :]


def wrapper(records, *, magic, codec, wrapper_offset=None, timestamp=TS, log_append=False):
    """A compressed wrapper message holding ``records`` [(offset, ts, key, value)].

    Magic 1 stores inner offsets relative to the first and the wrapper carries the last
    absolute offset; magic 0 stores absolute offsets everywhere."""
    first = records[0][0]
    inner = b"".join(
        message(o - first if magic == 1 else o, k, v, magic=magic, timestamp=t)
        for o, t, k, v in records
    )
    if codec == C.LZ4 and magic == 0:
        packed = broken_lz4(inner)
    else:
        packed = C.compress(codec, inner)
    attrs = codec | (L.TIMESTAMP_TYPE_MASK if log_append else 0)
    return message(
        records[-1][0] if wrapper_offset is None else wrapper_offset,
        None,
        packed,
        magic=magic,
        timestamp=timestamp,
        attributes=attrs,
    )
