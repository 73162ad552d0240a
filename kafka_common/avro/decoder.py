"""Many Avro datums at once into one Arrow array: a record-parallel NumPy decoder.

``Decoder(writer, reader, options).decode(values, starts)`` reads every row's datum
(beginning ``starts[i]`` bytes into value ``i``, e.g. past Confluent's 5-byte header) into an
Arrow array of ``arrow_type(reader, options)`` -- what Spark's ``from_avro`` gives -- and a
bool array saying which rows were corrupt (those come back null; the caller chooses between
failing and Spark's PERMISSIVE null). Null values give null rows and no error.

How: no Python object per record. The rows are decoded together, one schema node at a time:
a vector holds every row's position in the shared value buffer, each node reads its value
at all positions with NumPy (``kernels``) and advances them. A union splits the rows by
branch and reads each branch for its rows only; an array or map reads one item for every
row that still has items per round, so a round costs a few NumPy calls whatever the row
count. The resolution of the writer's schema against the reader's (``resolution``) is
compiled in: skipped fields are read past, defaults are filled in, promotions are casts.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .arrays import assemble, binary_array, decimal_array, from_buffers, nulls_where, width_ordered
from .compiled import compile_program
from .compiled import decode as decode_compiled
from .defaults import default_array
from .kernels import (
    Cursor,
    gather_slices,
    padded,
    read_blobs,
    read_fixed_width,
    read_lengths,
    read_varint,
)
from .resolution import Resolution, resolve
from .schema import AvroField, AvroSchema
from .skipping import MAX_NESTING, Node, Skip, fixed_width, min_size, walk_blocks
from .spark_types import MappingOptions, arrow_field_of, member_names, union_shape

__all__ = ["Decoder", "compile_node"]

_I64_MAX = np.iinfo(np.int64).max


class _Primitive(Node):
    def __init__(self, writer: AvroSchema, reader: AvroSchema, atype: pa.DataType):
        self.w, self.r, self.atype = writer, reader, atype

    def read(self, cur, pos, end, row):
        wt, atype = self.w.type, self.atype
        n = pos.size
        if wt == "null":
            return pa.nulls(n, atype), pos
        if wt in ("int", "long"):
            v, pos = read_varint(cur, pos, end, row, 5 if wt == "int" else 10)
            return self._number(cur, v, row), pos
        if wt == "boolean":
            m, pos = read_fixed_width(cur, pos, end, row, 1)
            return pa.array(m == 1, type=pa.bool_()), pos
        if wt in ("float", "double"):
            width = 4 if wt == "float" else 8
            m, pos = read_fixed_width(cur, pos, end, row, width)
            if width == 8:
                v = m.view("<f8")
            else:
                v = m.astype(np.uint32).view("<f4")
                if atype == pa.float64():
                    v = v.astype(np.float64)
            return from_buffers(atype, np.ascontiguousarray(v)), pos
        if wt == "fixed":
            size = self.w.size
            starts = pos
            pos = pos + size
            over = pos > end
            if over.any():
                cur.fail(row, pos, end, over)
                starts = np.where(over, pos - size, starts)
            lengths = np.full(n, size, dtype=np.int64)
        else:  # bytes, string
            lengths, starts = read_lengths(cur, pos, end, row)
            pos = starts + lengths
        if pa.types.is_decimal(atype):
            return decimal_array(cur, starts, lengths, row, atype), pos
        data, offsets = gather_slices(cur.a, starts, lengths)
        return binary_array(atype, data, offsets), pos

    def _number(self, cur, v, row):
        atype = self.atype
        if atype == pa.int64():
            return from_buffers(atype, v)
        if atype == pa.int32() or atype == pa.date32():
            return from_buffers(atype, v.astype(np.int32))
        if pa.types.is_floating(atype):
            return from_buffers(atype, v.astype(atype.to_pandas_dtype()))
        if pa.types.is_timestamp(atype):
            if (self.r.logical or "").endswith("millis"):
                over = np.abs(v) > _I64_MAX // 1000
                if over.any():  # Spark's millisToMicros fails on overflow
                    cur.bad[row[over]] = True
                    v = np.where(over, 0, v)
                v = v * 1000
            return from_buffers(atype, v)
        raise TypeError(f"cannot read Avro {self.w.type} as {atype}")


class _Enum(Node):
    def __init__(self, res: Resolution):
        self.map = np.asarray(res.enum_map + [-1], dtype=np.int64)  # last: out of range
        self.nw = len(res.enum_map)
        self.symbols = pa.array(list(res.read_as.symbols), type=pa.string())

    def read(self, cur, pos, end, row):
        v, pos = read_varint(cur, pos, end, row, 5)
        v = np.where((v < 0) | (v >= self.nw), self.nw, v)
        r = self.map[v]
        wrong = r < 0
        if wrong.any():
            cur.bad[row[wrong]] = True
            r = np.where(wrong, 0, r)
        if not len(self.symbols):
            return pa.nulls(pos.size, pa.string()), pos
        return self.symbols.take(pa.array(r)), pos


class _Repeated(Node):
    """Arrays and maps: one walk over the blocks finds every item's start (reading past
    the items), then the items are decoded in one go, already in list order."""

    def __init__(self, res: Resolution, atype, opts):
        self.res, self.atype, self.opts = res, atype, opts
        self.is_map = res.kind == "map"
        item = res.writer.element
        self.min_item = min_size(item) + self.is_map
        self.width = None if self.is_map else fixed_width(item)
        self.skipper = Skip(
            AvroSchema(
                "record", fields=[AvroField("key", AvroSchema("string")), AvroField("value", item)]
            )
            if self.is_map
            else item
        )
        self._child: Node | None = None

    def child(self) -> Node:
        if self._child is None:
            t = self.atype.item_type if self.is_map else self.atype.value_type
            self._child = compile_node(self.res.inner, t, self.opts)
        return self._child

    def read(self, cur, pos, end, row):
        pos, count, found = walk_blocks(
            cur, pos, end, row, self.min_item, self.skipper, self.width, record=True
        )
        offsets = np.zeros(pos.size + 1, dtype=np.int64)
        np.cumsum(count, out=offsets[1:])
        total = int(offsets[-1])
        if total > np.iinfo(np.int32).max:
            raise OverflowError("more than 2**31 array items in one batch")
        if len(found) == 1 and found[0][0].size == total and width_ordered(found[0], offsets):
            slot, starts = found[0][0], found[0][2]
        else:
            starts = np.empty(total, dtype=np.int64)
            slot = np.empty(total, dtype=np.int64)
            for sl, index, ps in found:
                dest = offsets[sl] + index
                starts[dest] = ps
                slot[dest] = sl
        item_end, item_row = end[slot], row[slot]
        if self.is_map:
            data, koff, starts = read_blobs(cur, starts, item_end, item_row)
            keys = binary_array(pa.string(), data, koff)
        values, _ = self.child().read(cur, starts, item_end, item_row)
        off32 = pa.array(offsets.astype(np.int32))
        if self.is_map:
            return pa.MapArray.from_arrays(off32, keys, values, type=self.atype), pos
        return pa.ListArray.from_arrays(off32, values, type=self.atype), pos


class _Record(Node):
    def __init__(self, res: Resolution, atype: pa.StructType, opts):
        self.res, self.atype, self.opts = res, atype, opts
        self._steps: list[tuple[int, Node]] | None = None

    def steps(self) -> list[tuple[int, Node]]:
        if self._steps is None:
            steps: list[tuple[int, Node]] = []
            r = self.res.read_as
            for j, child in self.res.steps:
                i = -1 if j is None else self.atype.get_field_index(r.fields[j].name)
                if i < 0:  # not read, or dropped by recursiveFieldMaxDepth
                    steps.append((-1, Skip(child.writer)))
                else:
                    steps.append((i, compile_node(child, self.atype.field(i).type, self.opts)))
            self._steps = steps
        return self._steps

    def read(self, cur, pos, end, row):
        n = pos.size
        if cur.depth >= MAX_NESTING:  # only a recursive schema nests this deep
            cur.bad[row] = True
            return pa.nulls(n, self.atype), end.copy()
        arrays = [None] * self.atype.num_fields
        cur.depth += 1
        try:
            for i, node in self.steps():
                if isinstance(node, Skip):  # exactly the steps of index -1
                    pos = node.skip(cur, pos, end, row)
                else:
                    arrays[i], pos = node.read(cur, pos, end, row)
        finally:
            cur.depth -= 1
        r = self.res.read_as
        for j in self.res.defaults:
            f = r.fields[j]
            i = self.atype.get_field_index(f.name)
            if i >= 0:
                arrays[i] = default_array(f.type, f.default, self.atype.field(i).type, self.opts, n)
        fields = [self.atype.field(i) for i in range(self.atype.num_fields)]
        if not fields:
            return pa.Array.from_buffers(self.atype, n, [None], children=[]), pos
        return pa.StructArray.from_arrays(arrays, fields=fields), pos


class _WriterUnion(Node):
    def __init__(self, res: Resolution, atype, opts):
        self.res, self.atype, self.opts = res, atype, opts
        self._branches: list[Node | None] | None = None

    def branches(self) -> list[Node | None]:
        if self._branches is None:
            self._branches = [
                None if isinstance(b, str) else compile_node(b, self.atype, self.opts)
                for b in self.res.branches
            ]
        return self._branches

    def read(self, cur, pos, end, row):
        k, pos = read_varint(cur, pos, end, row, 5)
        out = pos.copy()
        parts = []
        branches = self.branches()
        wrong = (k < 0) | (k >= len(branches))
        for i, node in enumerate(branches):
            sel = np.flatnonzero(k == i)
            if not sel.size:
                continue
            if node is None:  # a branch the reader cannot read: those rows are bad
                wrong[sel] = True
                continue
            arr, out[sel] = node.read(cur, pos[sel], end[sel], row[sel])
            parts.append((sel, arr))
        cur.fail(row, out, end, wrong)
        return assemble(pos.size, parts, self.atype), out


class _ReaderUnion(Node):
    """A writer value read into one branch of the reader's union, shown as Spark shows
    the union (a nullable value, a widened number or a struct of members)."""

    def __init__(self, res: Resolution, atype, opts):
        self.res, self.atype, self.opts = res, atype, opts
        self._child: Node | None = None
        r = res.read_as
        self.kind, branches, _ = union_shape(r)
        chosen = r.branches[res.branch]
        self.null = chosen.type == "null"
        self.member = -1
        if self.kind == "struct" and not self.null:
            name = member_names(branches, opts)[branches.index(chosen)]
            self.member = atype.get_field_index(name)

    def child(self) -> Node:
        if self._child is None:
            if self.kind == "struct":
                t = self.atype.field(self.member).type if self.member >= 0 else None
            else:
                t = self.atype
            self._child = (
                Skip(self.res.writer) if t is None else compile_node(self.res.inner, t, self.opts)
            )
        return self._child

    def read(self, cur, pos, end, row):
        n = pos.size
        if self.null:
            return pa.nulls(n, self.atype), pos
        node = self.child()
        if isinstance(node, Skip):  # the member was dropped by recursiveFieldMaxDepth
            return self._struct(n, None), node.skip(cur, pos, end, row)
        arr, pos = node.read(cur, pos, end, row)
        if self.kind != "struct":
            return arr, pos
        return self._struct(n, arr), pos

    def _struct(self, n, arr):
        fields = [self.atype.field(i) for i in range(self.atype.num_fields)]
        children = [arr if i == self.member else pa.nulls(n, f.type) for i, f in enumerate(fields)]
        return pa.StructArray.from_arrays(children, fields=fields)


def compile_node(res: Resolution, atype: pa.DataType, opts: MappingOptions) -> Node:
    kind = res.kind
    if kind == "primitive" or kind == "fixed":
        return _Primitive(res.writer, res.read_as, atype)
    if kind == "enum":
        return _Enum(res)
    if kind == "record":
        return _Record(res, atype, opts)
    if kind in ("array", "map"):
        return _Repeated(res, atype, opts)
    if kind == "writer_union":
        return _WriterUnion(res, atype, opts)
    if kind == "reader_union":
        return _ReaderUnion(res, atype, opts)
    if kind == "skip":
        return Skip(res.writer)
    raise ValueError(f"unknown resolution {kind}")


def _input_buffers(data):
    """(value bytes, row starts, row ends, null mask) of a binary column or a
    ``(buffer, offsets)`` pair."""
    if isinstance(data, pa.ChunkedArray):
        data = data.combine_chunks() if data.num_chunks != 1 else data.chunk(0)
    if isinstance(data, pa.Array):
        if pa.types.is_large_binary(data.type) or pa.types.is_large_string(data.type):
            odt = np.int64
        elif pa.types.is_binary(data.type) or pa.types.is_string(data.type):
            odt = np.int32
        else:
            raise TypeError(f"Avro values must be a binary column, not {data.type}")
        n = len(data)
        bufs = data.buffers()
        offsets = (
            np.frombuffer(bufs[1], dtype=odt)[data.offset : data.offset + n + 1]
            if bufs[1] is not None
            else np.zeros(n + 1, dtype=odt)
        )
        valid = (
            np.ones(n, dtype=bool)
            if data.null_count == 0
            else data.is_valid().to_numpy(zero_copy_only=False)
        )
        raw = bufs[2] if bufs[2] is not None else b""
        offsets = offsets.astype(np.int64)
        lo = int(offsets[0]) if n else 0
        hi = int(offsets[-1]) if n else 0
        return np.frombuffer(raw, dtype=np.uint8)[lo:hi], offsets - lo, valid
    buffer, offsets = data
    offsets = np.asarray(offsets, dtype=np.int64)
    n = offsets.size - 1
    lo, hi = int(offsets[0]), int(offsets[-1])
    return (np.frombuffer(buffer, dtype=np.uint8)[lo:hi], offsets - lo, np.ones(n, dtype=bool))


class Decoder:
    """Decodes Avro datums written with ``writer_schema`` as ``reader_schema`` (resolved
    once, here) into ``arrow_type(reader_schema, options)``."""

    def __init__(
        self,
        writer_schema: AvroSchema,
        reader_schema: AvroSchema | None = None,
        options: dict | None = None,
    ):
        reader_schema = writer_schema if reader_schema is None else reader_schema
        self.opts = MappingOptions(options)
        got = arrow_field_of(reader_schema, self.opts)
        self.arrow_type = got[0]
        self.resolution = resolve(writer_schema, reader_schema)
        self.root = compile_node(self.resolution, self.arrow_type, self.opts)
        # a record of primitives also reads in one compiled call (None: NumPy only)
        self.program = compile_program(self.resolution, self.arrow_type, self.opts)

    def decode(self, data, starts: np.ndarray | None = None):
        """Returns ``(array, errors)``: one value per row (null for null input and for
        corrupt rows) and a bool array, True for each corrupt row."""
        buf, offsets, valid = _input_buffers(data)
        if self.program is not None:
            got = decode_compiled(self.program, self.opts, buf, offsets, valid, starts)
            if got is not None:
                return got
        n = offsets.size - 1
        begin = offsets[:-1].copy()
        end = offsets[1:]
        if starts is not None:
            begin += np.asarray(starts, dtype=np.int64)
        a = padded(buf)
        cur = Cursor(a, n)
        short = valid & (begin > end)  # the header is longer than the value
        cur.bad[short] = True
        rows = np.flatnonzero(valid & ~short)
        if rows.size == n:
            arr, _ = self.root.read(cur, begin, end.copy(), rows)
        else:
            part, _ = self.root.read(cur, begin[rows], end[rows].copy(), rows)
            arr = assemble(n, [(rows, part)], self.arrow_type)
        errors = cur.bad
        arr = nulls_where(arr, errors)
        return arr, errors
