"""The few DER reads the store formats need: one TLV at a time, bounded by the input."""

from __future__ import annotations

from .contents import StoreError

__all__ = ["read_tlv", "decode_oid", "SEQUENCE", "OCTET_STRING", "OID"]

SEQUENCE, OCTET_STRING, OID = 0x30, 0x04, 0x06


def read_tlv(data: bytes, pos: int, what: str) -> tuple[int, bytes, int]:
    """``(tag, value, next_pos)`` of the DER element at ``pos``; a length beyond the
    input is a ``StoreError`` naming ``what`` was being read."""
    if pos + 2 > len(data):
        raise StoreError(f"is not valid (truncated {what})")
    tag, length = data[pos], data[pos + 1]
    pos += 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or pos + count > len(data):
            raise StoreError(f"is not valid (bad length in {what})")
        length = int.from_bytes(data[pos : pos + count], "big")
        pos += count
    if pos + length > len(data):
        raise StoreError(f"is not valid (truncated {what})")
    return tag, data[pos : pos + length], pos + length


def decode_oid(value: bytes) -> str:
    """The dotted form of an OBJECT IDENTIFIER's content bytes."""
    if not value:
        raise StoreError("is not valid (empty object identifier)")
    parts = [min(value[0] // 40, 2)]
    parts.append(value[0] - 40 * parts[0])
    number = 0
    for byte in value[1:]:
        number = (number << 7) | (byte & 0x7F)
        if not byte & 0x80:
            parts.append(number)
            number = 0
    return ".".join(map(str, parts))
