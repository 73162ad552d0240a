"""Encoding a value with a schema, for the round-trip tests and the fuzz targets."""

from __future__ import annotations

import uuid
from protocol.schema import F, Message, Struct


JUNK = object()  # what we put in fields a version lacks: the encoder must never look at it


_RANGES = {
    "int8": (-128, 127),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint16": (0, (1 << 16) - 1),
    "uint32": (0, (1 << 32) - 1),
}


_BASES = {
    "int8": 11,
    "int16": 1100,
    "int32": 110000,
    "int64": 11 << 40,
    "uint16": 1200,
    "uint32": 3 << 30,
}


class Filler:
    """Distinct non-default values, so that two swapped fields cannot compare equal."""

    def __init__(self, nulls: bool = False):
        self.n = 0
        self.nulls = nulls  # fill every field that may be null in this version with None

    def scalar(self, t: str, default):
        self.n += 1
        n = self.n
        if t in _RANGES:
            lo, hi = _RANGES[t]
            v = _BASES[t] + n * 7
            while v == default or not lo <= v <= hi:
                v = lo + (v + 1 - lo) % (hi - lo + 1)
            return v
        v = {
            "bool": lambda: not default,
            "float64": lambda: n + 0.25,
            "uuid": lambda: uuid.UUID(int=(n << 64) | (0xC0FFEE + n)),
            "string": lambda: f"v{n}-\u00e9\u4e2d",
            "bytes": lambda: bytes([n % 256, 0, 255]) * 2,
            "records": lambda: b"\x00batch" + bytes([n % 256]),
        }[t]()
        assert v != default
        return v

    def field(self, f: F, version: int, flexible: bool):
        """(value to encode, value expected back) for a field present in ``version``."""
        tagged = f.is_tagged(version, flexible)
        if self.nulls and version in f.nullable:
            return None, (f.default_value() if tagged else None)
        t = f.type
        if isinstance(t, list):
            pairs = [self.struct(t, version, flexible) for _ in range(2)]
            return [a for a, _ in pairs], [b for _, b in pairs]
        if isinstance(t, Struct):
            return self.struct(t.fields, version, flexible)
        if t.startswith("["):
            items = [self.scalar(t[1:-1], None) for _ in range(2)]
            return items, list(items)
        v = self.scalar(t, f.default_value())
        return v, v

    def struct(self, fields: list[F], version: int, flexible: bool):
        value, expected = {}, {}
        for f in fields:
            if version in f.versions:
                value[f.name], expected[f.name] = self.field(f, version, flexible)
            else:
                value[f.name], expected[f.name] = JUNK, f.default_value()
        return value, expected

    def message(self, msg: Message, version: int):
        return self.struct(msg.fields, version, msg.is_flexible(version))


_ENCODED: dict[tuple[int, int, bool], bytes] = {}


def _encoded(msg: Message, version: int, nulls: bool = False) -> bytes:
    key = (id(msg), version, nulls)  # Message is a dataclass, so not hashable
    if key not in _ENCODED:
        value, _ = Filler(nulls).message(msg, version)
        _ENCODED[key] = bytes(msg.encode(version, value))
    return _ENCODED[key]
