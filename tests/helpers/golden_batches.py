"""Golden v2 record batches (bytes Kafka's Java client wrote)."""

from __future__ import annotations


TS = 1_700_000_000_000  # 0x0000018BCFE56800


# Two records: offset 16 key b"k" value b"v1"; offset 17 key null value b"vv" at TS + 5
# with one header ("h", b"x").
GOLDEN_V2 = bytes.fromhex(
    "0000000000000010"  # baseOffset 16
    "00000048"  # batchLength 72 = 49 header bytes after this field + 23 record bytes
    "00000000"  # partitionLeaderEpoch 0
    "02"  # magic 2
    "411909e5"  # crc: CRC-32C of every byte from attributes to the end
    "0000"  # attributes: no codec, CreateTime, not transactional, not control
    "00000001"  # lastOffsetDelta 1
    "0000018bcfe56800"  # baseTimestamp TS
    "0000018bcfe56805"  # maxTimestamp TS + 5
    "ffffffffffffffff"  # producerId -1
    "ffff"  # producerEpoch -1
    "ffffffff"  # baseSequence -1
    "00000002"  # recordCount 2
    "12"  # record 0: length 9 (zigzag 18)
    "00"  # attributes
    "00"  # timestampDelta 0
    "00"  # offsetDelta 0
    "02"  # keyLength 1
    "6b"  # key "k"
    "04"  # valueLength 2
    "7631"  # value "v1"
    "00"  # headerCount 0
    "18"  # record 1: length 12 (zigzag 24)
    "00"  # attributes
    "0a"  # timestampDelta 5
    "02"  # offsetDelta 1
    "01"  # keyLength -1: null key
    "04"  # valueLength 2
    "7676"  # value "vv"
    "02"  # headerCount 1
    "02"  # header keyLength 1
    "68"  # header key "h"
    "02"  # header valueLength 1
    "78"  # header value "x"
)
