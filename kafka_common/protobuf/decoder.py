"""Protobuf payloads into an Arrow column of ``spark_types.arrow_type``'s type.

Each row is parsed by the protobuf runtime (its C++ parser when installed) and turned into
Python values, then into one Arrow array: not columnar like the Avro decoder, but what
Spark's ``from_protobuf`` returns. Fields left at their default in proto3 (no presence)
are null unless ``emit.default.values`` is true, as in Spark.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa

from .spark_types import ProtoOptions, arrow_type, repeated

__all__ = ["Decoder"]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


class Decoder:
    def __init__(self, descriptor, options: dict | None = None):
        from google.protobuf import message_factory
        self.descriptor = descriptor
        self.opts = ProtoOptions(options)
        self.type = arrow_type(descriptor, options)
        self.cls = message_factory.GetMessageClass(descriptor)

    def decode(self, values: pa.Array, starts) -> tuple[pa.Array, np.ndarray]:
        rows = []
        errors = np.zeros(len(values), dtype=bool)
        for i, (raw, start) in enumerate(zip(values.to_pylist(), starts)):
            if raw is None:
                rows.append(None)
                continue
            try:
                msg = self.cls.FromString(raw[int(start):])
                rows.append(self._message(msg, self.type))
            except Exception:
                errors[i] = True
                rows.append(None)
        return pa.array(rows, self.type), errors

    def _message(self, msg, atype: pa.StructType) -> dict:
        from google.protobuf.descriptor import FieldDescriptor as F
        out = {}
        desc = msg.DESCRIPTOR
        names = {atype.field(i).name: atype.field(i).type for i in range(atype.num_fields)}
        present = {f.name for f, _ in msg.ListFields()}
        for f in desc.fields:
            if f.name not in names:
                continue
            t = names[f.name]
            value = getattr(msg, f.name)
            if repeated(f):
                if f.message_type is not None and f.message_type.GetOptions().map_entry:
                    vf = f.message_type.fields_by_name["value"]
                    out[f.name] = [(k, self._value(vf, v, t.item_type))
                                   for k, v in value.items()]
                else:
                    out[f.name] = [self._value(f, v, t.value_type) for v in value]
                continue
            if f.name not in present and not (self.opts.emit_defaults
                                              and f.type != F.TYPE_MESSAGE):
                out[f.name] = None
                continue
            out[f.name] = self._value(f, value, t)
        return out

    def _value(self, f, value, t):
        from google.protobuf.descriptor import FieldDescriptor as F
        if f.type == F.TYPE_MESSAGE:
            name = f.message_type.full_name
            if name == "google.protobuf.Timestamp":
                return _EPOCH + dt.timedelta(seconds=value.seconds,
                                             microseconds=value.nanos // 1000)
            if name == "google.protobuf.Duration":
                return dt.timedelta(seconds=value.seconds, microseconds=value.nanos // 1000)
            return self._message(value, t)
        if f.type == F.TYPE_ENUM and not self.opts.enums_as_ints:
            v = f.enum_type.values_by_number.get(value)
            return v.name if v is not None else str(value)
        return value
