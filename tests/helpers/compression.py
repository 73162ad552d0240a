"""Damaging compressed payloads, for the compression tests and the fuzz targets."""

from __future__ import annotations

from protocol.records import compression as C


def _break_lz4_header(frame: bytes) -> bytes:
    """Recreate the header checksum Kafka < 0.10 wrote: xxh32 over magic + descriptor."""
    flg = frame[4]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    hc = (C.xxh32(frame[0:end]) >> 8) & 0xFF
    return frame[:end] + bytes([hc]) + frame[end + 1 :]
