"""Protobuf payloads into an Arrow column of ``spark_types.arrow_type``'s type.

A flat message (scalar fields only: ``vectorized``'s docstring says exactly which) is
decoded column by column with NumPy, all rows at once, by ``vectorized.FlatDecoder``; it
hands the rows it does not settle itself (malformed, unusual) to the row path below, so
both give the same arrays and the same corrupt rows. The choice is made once per message.

Any other message is parsed row by row by the protobuf runtime (its upb/C++ parser when
installed) and turned into Python values, then into one Arrow array, what Spark's
``from_protobuf`` returns. Fields left at their default in proto3 (no presence) are null
unless ``emit.default.values`` is true, as in Spark; an empty repeated field is an empty
array. uint32 (without ``upcast.unsigned.ints``) and uint64 values come as the int and
long of their bits, as Spark gives them; a string that is not UTF-8 makes a corrupt row.

The conversion is compiled once per message type into a plan: a template row (null, or
the default with ``emit.default.values``; ``[]`` for repeated fields) and a converter per
field. A row is the template's copy with the fields ``ListFields`` reports (the ones set,
in C) converted in: a message with few fields set costs little.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from kafka_common.gc_pause import gc_paused

from .spark_types import ProtoOptions, arrow_type, repeated
from .vectorized import flat_decoder, unsigned_bits

__all__ = ["Decoder"]


def _scalar(f, opts: ProtoOptions):
    """The converter of one (non-repeated) value of field ``f``, or None for as-is."""
    from google.protobuf.descriptor import FieldDescriptor as F

    if f.type == F.TYPE_ENUM and not opts.enums_as_ints:
        names = {v.number: v.name for v in f.enum_type.values}
        return lambda v: names.get(v) or str(v)
    if f.type == F.TYPE_STRING and not _proto3(f.file):
        return _text
    return unsigned_bits(f, opts)


def _text(v):
    """A string field's value: the runtime does not check proto2 strings, and hands the
    bytes over when they are not UTF-8 (a corrupt row here, as a proto3 one is)."""
    return v if type(v) is str else v.decode("utf-8")


def _proto3(file) -> bool:
    """Whether a .proto file is proto3 (whose strings the runtime checks)."""
    from google.protobuf import descriptor_pb2

    return descriptor_pb2.FileDescriptorProto.FromString(file.serialized_pb).syntax == "proto3"


def _element(f, t: pa.DataType, opts: ProtoOptions, plans: dict):
    """The converter of one value of field ``f`` (of Arrow type ``t``), or None."""
    from google.protobuf.descriptor import FieldDescriptor as F

    if f.type != F.TYPE_MESSAGE:
        return _scalar(f, opts)
    name = f.message_type.full_name
    if name in ("google.protobuf.Timestamp", "google.protobuf.Duration"):
        # Microseconds (what Arrow's timestamp[us] and duration[us] hold)
        return lambda m: m.seconds * 1_000_000 + m.nanos // 1000
    return _plan(f.message_type, t, opts, plans)


def _plan(desc, atype: pa.StructType, opts: ProtoOptions, plans: dict):
    """The converter of a message of ``desc`` into a dict of ``atype``'s fields."""
    key = (desc.full_name, atype)
    if key in plans:
        return plans[key]
    template: dict = {}
    fields: dict = {}

    def convert(msg):
        out = template.copy()
        for fd, value in msg.ListFields():
            entry = fields.get(fd)
            if entry is not None:
                name, conv = entry
                out[name] = value if conv is None else conv(value)
        return out

    plans[key] = convert  # before the fields: a recursive message refers to itself
    types = {atype.field(i).name: atype.field(i).type for i in range(atype.num_fields)}
    from google.protobuf.descriptor import FieldDescriptor as F

    for f in desc.fields:
        t = types.get(f.name)
        if t is None:
            continue  # cut by recursive.fields.max.depth
        if repeated(f) and f.message_type is not None and f.message_type.GetOptions().map_entry:
            vc = _element(f.message_type.fields_by_name["value"], t.item_type, opts, plans)
            conv = (
                lambda c: (
                    (lambda v: list(v.items()))
                    if c is None
                    else (lambda v: [(k, c(x)) for k, x in v.items()])
                )
            )(vc)
            template[f.name] = []
        elif repeated(f):
            ec = _element(f, t.value_type, opts, plans)
            conv = list if ec is None else (lambda c: lambda v: [c(x) for x in v])(ec)
            template[f.name] = []
        else:
            conv = _element(f, t, opts, plans)
            if opts.emit_defaults and f.type != F.TYPE_MESSAGE:
                template[f.name] = conv(f.default_value) if conv else f.default_value
            else:
                template[f.name] = None
        fields[f] = (f.name, conv)
    return convert


class Decoder:
    def __init__(self, descriptor, options: dict | None = None):
        from google.protobuf import message_factory

        self.descriptor = descriptor
        self.opts = ProtoOptions(options)
        self.type = arrow_type(descriptor, options)
        self.cls = message_factory.GetMessageClass(descriptor)
        self.convert = _plan(descriptor, self.type, self.opts, {})
        # a flat message (scalar fields only) decodes column by column (None: row by row)
        self.flat = flat_decoder(descriptor, self.type, self.opts)

    def decode(self, values: pa.Array, starts) -> tuple[pa.Array, np.ndarray]:
        if self.flat is not None:
            return self.flat.decode(values, starts, self.decode_rows)
        return self.decode_rows(values, starts)

    def decode_rows(self, values: pa.Array, starts) -> tuple[pa.Array, np.ndarray]:
        """``decode`` row by row through the protobuf runtime, whatever the message."""
        with gc_paused():
            return self._decode(values, starts)

    def _decode(self, values: pa.Array, starts) -> tuple[pa.Array, np.ndarray]:
        rows: list[object] = []
        errors = np.zeros(len(values), dtype=bool)
        parse, convert = self.cls.FromString, self.convert
        for i, (raw, start) in enumerate(
            zip(values.to_pylist(), starts.tolist() if hasattr(starts, "tolist") else starts)
        ):
            if raw is None:
                rows.append(None)
                continue
            try:
                rows.append(convert(parse(raw[start:] if start else raw)))
            except Exception:
                errors[i] = True
                rows.append(None)
        return pa.array(rows, self.type), errors
