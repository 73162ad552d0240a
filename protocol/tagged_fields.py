"""The tagged-field section that ends every struct in a flexible version: each known tag
decoded from its own bounded slice, unknown tags kept (under ``UNKNOWN_TAGS``) and written
back, tags required in ascending order, only non-default values emitted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

from . import primitives as p
from .errors import ProtocolError

UNKNOWN_TAGS = "_unknown_tagged_fields"

# A tagged field's name, reader, writer and default.
Entry: TypeAlias = tuple[
    str, Callable[[p.Buffer, int], tuple[Any, int]], Callable[[bytearray, Any], None], Any
]


def read_tagged_section(
    buf: p.Buffer, pos: int, tagged: dict[int, Entry], d: dict[str, Any]
) -> int:
    count, pos = p.read_unsigned_varint(buf, pos)
    if count > len(buf) - pos:
        raise ProtocolError(f"tagged field count {count} exceeds the bytes left")
    last = -1
    for _ in range(count):
        tag, pos = p.read_unsigned_varint(buf, pos)
        size, pos = p.read_unsigned_varint(buf, pos)
        if tag <= last:
            raise ProtocolError(f"tagged fields out of order: tag {tag} after {last}")
        last = tag
        if size > len(buf) - pos:
            raise ProtocolError(f"tagged field {tag} size {size} exceeds the bytes left")
        end = pos + size
        entry = tagged.get(tag)
        if entry is None:
            d.setdefault(UNKNOWN_TAGS, {})[tag] = bytes(buf[pos:end])
        else:
            value, used = entry[1](
                buf[pos:end] if isinstance(buf, memoryview) else memoryview(buf)[pos:end], 0
            )
            if used != size:
                raise ProtocolError(
                    f"tagged field {tag} ({entry[0]}) has {size - used} unread bytes"
                )
            d[entry[0]] = value
        pos = end
    return pos


def write_tagged_section(
    out: bytearray,
    d: dict[str, Any],
    tags_in_order: list[tuple[int, Entry]],
) -> None:
    items: list[tuple[int, bytes | bytearray]] = []
    for tag, (name, _, wr, default) in tags_in_order:
        v = d.get(name, default)
        if v is None or v == default:
            continue
        body = bytearray()
        wr(body, v)
        items.append((tag, body))
    unknown = d.get(UNKNOWN_TAGS)
    if unknown:
        items.extend((tag, raw) for tag, raw in unknown.items() if tag not in dict(items))
        items.sort(key=lambda item: item[0])
    p.write_unsigned_varint(out, len(items))
    for tag, raw in items:
        p.write_unsigned_varint(out, tag)
        p.write_unsigned_varint(out, len(raw))
        out += raw
