"""Arrow rows (Spark's types) into Protobuf messages, as ``to_protobuf`` writes them.

Each row becomes a dict in protobuf's JSON mapping (timestamps as RFC 3339 strings,
bytes as base64, enums by name, maps as objects also when empty, decimals as their exact
digits in a string, which protobuf parses into a string, double or integer field, NaN and
infinities as the strings the mapping expects: ``kafka_common.arrow_json``) that
``json_format.ParseDict`` fills the message with, then serialized: per row in Python,
like the Protobuf decoder. ``path`` is the message's Confluent message-index path (the
writer puts it after the schema id).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal

import pyarrow as pa

from ..arrow_json import decimal_text, key_text, non_finite_text, rows
from .compile import message_descriptor

__all__ = ["Encoder"]


class Encoder:
    def __init__(self, text: str, references: tuple = (), message_name: str | None = None):
        from google.protobuf import message_factory

        self.descriptor = message_descriptor(text, tuple(references), message_name)
        self.cls = message_factory.GetMessageClass(self.descriptor)
        self.path = _path_of(self.descriptor)

    def encode(self, array: pa.Array) -> pa.Array:
        from google.protobuf import json_format

        out: list[bytes | None] = []
        for row in rows(array):
            if row is None:
                out.append(None)
                continue
            msg = self.cls()
            json_format.ParseDict(_json(row), msg)
            out.append(msg.SerializeToString())
        return pa.array(out, pa.binary())


def _path_of(descriptor) -> tuple[int, ...]:
    path = []
    node = descriptor
    while node.containing_type is not None:
        parent = node.containing_type
        path.append(list(parent.nested_types).index(node))
        node = parent
    path.append(list(node.file.message_types_by_name.values()).index(node))
    return tuple(reversed(path))


def _json(v):
    if isinstance(v, dict):  # a struct or a map
        return {key_text(k): _json(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_json(x) for x in v]
    if isinstance(v, float):
        return non_finite_text(v) or v
    if isinstance(v, decimal.Decimal):
        return decimal_text(v)
    if isinstance(v, dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=dt.timezone.utc)
        return v.astimezone(dt.timezone.utc).isoformat().replace("+00:00", "Z")
    if isinstance(v, dt.timedelta):
        return f"{v.total_seconds():.6f}s"
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    return v
