"""Kafka protocol primitive types: one read and one write function per type.

Readers have the shape ``read_x(buf, pos) -> (value, new_pos)`` over ``bytes`` or
``memoryview``; writers append to a ``bytearray``: ``write_x(out, value)``. Every length or
count is checked against the bytes left *before* anything is allocated, so a hostile
2 GB length prefix is a ``ProtocolError``, never a MemoryError or an IndexError.
"""

from __future__ import annotations

import struct
import uuid as _uuid
from collections.abc import Callable
from typing import Any, TypeAlias

from .errors import ProtocolError

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT16 = struct.Struct(">H")
_UINT32 = struct.Struct(">I")
_FLOAT64 = struct.Struct(">d")

ZERO_UUID = _uuid.UUID(int=0)

# What the readers read from: a response's bytes or a view into them.
Buffer: TypeAlias = "bytes | bytearray | memoryview"


def _need(buf: Buffer, pos: int, size: int, what: str) -> None:
    if size < 0 or pos + size > len(buf):
        raise ProtocolError(
            f"truncated {what}: need {size} bytes at position {pos}, {len(buf) - pos} left"
        )


def _fixed(
    st: struct.Struct, what: str
) -> tuple[Callable[[Buffer, int], tuple[Any, int]], Callable[[bytearray, Any], None]]:
    size = st.size
    unpack_from = st.unpack_from
    pack = st.pack

    def read(buf: Buffer, pos: int) -> tuple[Any, int]:
        if pos + size > len(buf):
            raise ProtocolError(
                f"truncated {what}: need {size} bytes at position {pos}, {len(buf) - pos} left"
            )
        return unpack_from(buf, pos)[0], pos + size

    def write(out: bytearray, value: Any) -> None:
        try:
            out += pack(value)
        except struct.error as e:
            raise ValueError(f"{what} out of range: {value!r}") from e

    return read, write


read_int8, write_int8 = _fixed(_INT8, "int8")
read_int16, write_int16 = _fixed(_INT16, "int16")
read_int32, write_int32 = _fixed(_INT32, "int32")
read_int64, write_int64 = _fixed(_INT64, "int64")
read_uint16, write_uint16 = _fixed(_UINT16, "uint16")
read_uint32, write_uint32 = _fixed(_UINT32, "uint32")
read_float64, write_float64 = _fixed(_FLOAT64, "float64")


def read_boolean(buf: Buffer, pos: int) -> tuple[bool, int]:
    _need(buf, pos, 1, "boolean")
    return buf[pos] != 0, pos + 1


def write_boolean(out: bytearray, value: bool) -> None:
    out.append(1 if value else 0)


def read_uuid(buf: Buffer, pos: int) -> tuple[_uuid.UUID, int]:
    _need(buf, pos, 16, "uuid")
    return _uuid.UUID(bytes=bytes(buf[pos : pos + 16])), pos + 16


def write_uuid(out: bytearray, value: _uuid.UUID | None) -> None:
    out += (value or ZERO_UUID).bytes


# ---- variable-length integers -------------------------------------------------------------


def read_unsigned_varint(buf: Buffer, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """Unsigned LEB128; ``max_bytes`` is 5 for 32-bit values and 10 for 64-bit values."""
    bits = 32 if max_bytes <= 5 else 64
    result = 0
    shift = 0
    end = len(buf)
    for _ in range(max_bytes):
        if pos >= end:
            raise ProtocolError(f"truncated varint at position {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            if result >> bits:
                raise ProtocolError(f"varint overflows {bits} bits at position {pos}")
            return result, pos
        shift += 7
    raise ProtocolError(f"varint longer than {max_bytes} bytes at position {pos - max_bytes}")


def write_unsigned_varint(out: bytearray, value: int) -> None:
    if value < 0:
        raise ValueError(f"unsigned varint cannot be negative: {value}")
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def zigzag_encode(value: int, bits: int = 64) -> int:
    return (value << 1) ^ (value >> (bits - 1))


def zigzag_decode(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    raw, pos = read_unsigned_varint(buf, pos, 5)
    return zigzag_decode(raw), pos


def write_varint(out: bytearray, value: int) -> None:
    if not -(1 << 31) <= value < (1 << 31):
        raise ValueError(f"varint out of range: {value}")
    write_unsigned_varint(out, zigzag_encode(value, 32))


def read_varlong(buf: Buffer, pos: int) -> tuple[int, int]:
    raw, pos = read_unsigned_varint(buf, pos, 10)
    return zigzag_decode(raw), pos


def write_varlong(out: bytearray, value: int) -> None:
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"varlong out of range: {value}")
    write_unsigned_varint(out, zigzag_encode(value, 64))


# ---- strings and bytes --------------------------------------------------------------------
# Classic forms carry an int16 (strings) or int32 (bytes) length, -1 for null; compact forms
# an unsigned varint of length + 1, 0 for null. A string is at most 0x7FFF bytes in either form
# (Kafka rejects longer compact strings too).

MAX_STRING_BYTES = 0x7FFF


def _slice(buf: Buffer, pos: int, length: int, what: str) -> tuple[Buffer, int]:
    if length > len(buf) - pos:
        raise ProtocolError(
            f"{what} length {length} exceeds the {len(buf) - pos} bytes left at position {pos}"
        )
    return buf[pos : pos + length], pos + length


def _decode_utf8(raw: Buffer, what: str) -> str:
    try:
        return bytes(raw).decode("utf-8")
    except UnicodeDecodeError as e:
        raise ProtocolError(f"{what} is not valid UTF-8") from e


def read_string(buf: Buffer, pos: int, nullable: bool = False) -> tuple[str | None, int]:
    length, pos = read_int16(buf, pos)
    if length < 0:
        if nullable and length == -1:
            return None, pos
        raise ProtocolError(f"negative string length {length}")
    raw, pos = _slice(buf, pos, length, "string")
    return _decode_utf8(raw, "string"), pos


def write_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += _INT16.pack(-1)
        return
    data = value.encode("utf-8")
    if len(data) > MAX_STRING_BYTES:
        raise ValueError(f"string too long for int16 length: {len(data)} bytes")
    out += _INT16.pack(len(data))
    out += data


def read_compact_string(buf: Buffer, pos: int, nullable: bool = False) -> tuple[str | None, int]:
    n, pos = read_unsigned_varint(buf, pos)
    if n == 0:
        if nullable:
            return None, pos
        raise ProtocolError("null compact string where a value is required")
    if n - 1 > MAX_STRING_BYTES:
        raise ProtocolError(f"compact string length {n - 1} exceeds {MAX_STRING_BYTES}")
    raw, pos = _slice(buf, pos, n - 1, "compact string")
    return _decode_utf8(raw, "compact string"), pos


def write_compact_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out.append(0)
        return
    data = value.encode("utf-8")
    if len(data) > MAX_STRING_BYTES:
        raise ValueError(f"string too long: {len(data)} bytes, at most {MAX_STRING_BYTES}")
    write_unsigned_varint(out, len(data) + 1)
    out += data


def read_bytes(buf: Buffer, pos: int, nullable: bool = False) -> tuple[Buffer | None, int]:
    """INT32-length bytes; returns a zero-copy slice of ``buf`` (a memoryview if buf is one)."""
    length, pos = read_int32(buf, pos)
    if length < 0:
        if nullable and length == -1:
            return None, pos
        raise ProtocolError(f"negative bytes length {length}")
    return _slice(buf, pos, length, "bytes")


def write_bytes(out: bytearray, value: Buffer | None) -> None:
    if value is None:
        out += _INT32.pack(-1)
        return
    out += _INT32.pack(len(value))
    out += value


def read_compact_bytes(buf: Buffer, pos: int, nullable: bool = False) -> tuple[Buffer | None, int]:
    n, pos = read_unsigned_varint(buf, pos)
    if n == 0:
        if nullable:
            return None, pos
        raise ProtocolError("null compact bytes where a value is required")
    return _slice(buf, pos, n - 1, "compact bytes")


def write_compact_bytes(out: bytearray, value: Buffer | None) -> None:
    if value is None:
        out.append(0)
        return
    write_unsigned_varint(out, len(value) + 1)
    out += value


#: A records section at least this long is kept aside by a frame that keeps sections aside
#: (``framing.encode_request``) and sent from where it is, not copied into the frame.
RECORDS_ASIDE_MIN = 64 * 1024


def write_records(out: bytearray, value: Buffer | None, compact: bool = False) -> None:
    """A records section (nullable bytes); its length prefix only, with the section noted in
    ``out.aside`` (position, section), when ``out`` keeps large sections aside."""
    aside = getattr(out, "aside", None)
    if aside is None or value is None or len(value) < RECORDS_ASIDE_MIN:
        (write_compact_bytes if compact else write_bytes)(out, value)
        return
    if compact:
        write_unsigned_varint(out, len(value) + 1)
    else:
        out += _INT32.pack(len(value))
    aside.append((len(out), value))


def write_compact_records(out: bytearray, value: Buffer | None) -> None:
    write_records(out, value, compact=True)


# ---- array counts -------------------------------------------------------------------------


def read_array_count(
    buf: Buffer, pos: int, compact: bool, nullable: bool = False
) -> tuple[int | None, int]:
    """An array's element count; None for a null array. Each element takes at least one
    byte, so a count above the bytes left is rejected before any list is built."""
    if compact:
        n, pos = read_unsigned_varint(buf, pos)
        count = n - 1
    else:
        count, pos = read_int32(buf, pos)
    if count < 0:
        if nullable and count == -1:
            return None, pos
        raise ProtocolError(f"negative array count {count}")
    if count > len(buf) - pos:
        raise ProtocolError(
            f"array count {count} exceeds the {len(buf) - pos} bytes left at position {pos}"
        )
    return count, pos


def write_array_count(out: bytearray, count: int | None, compact: bool) -> None:
    if compact:
        write_unsigned_varint(out, 0 if count is None else count + 1)
    else:
        out += _INT32.pack(-1 if count is None else count)
