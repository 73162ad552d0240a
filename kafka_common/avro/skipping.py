"""Reading past Avro values at many positions at once: the writer's values nobody reads,
and the walk over an array's or map's blocks that finds where each item starts.

``Node`` is what every compiled part of a resolution is (``read`` decodes the value at
every position); ``Skip`` is the node of a value read past. ``walk_blocks`` is shared by
``Skip`` and the decoder's arrays and maps.
"""

from __future__ import annotations

import numpy as np

from .kernels import Cursor, read_lengths, read_varint
from .schema import AvroField, AvroSchema

__all__ = [
    "MAX_NESTING",
    "ZERO_WIDTH_ITEMS_LIMIT",
    "Node",
    "Skip",
    "fixed_width",
    "min_size",
    "walk_blocks",
]

# an array or map of values that take no bytes (nulls, empty records) may not claim more
# items than this per row: the bytes cannot bound it, the memory must
ZERO_WIDTH_ITEMS_LIMIT = 1 << 16
# records inside records a datum may nest (only a recursive schema lets the data choose the
# depth; each level is a few Python frames): deeper rows are corrupt, not a RecursionError
MAX_NESTING = 64


def min_size(node: AvroSchema, seen=None) -> int:
    """The fewest bytes a value of ``node`` takes (0 for null and empty records)."""
    seen = set() if seen is None else seen
    t = node.type
    if t == "null":
        return 0
    if t == "float":
        return 4
    if t == "double":
        return 8
    if t == "fixed":
        return node.size
    if t == "record":
        if id(node) in seen:
            return 1
        seen = seen | {id(node)}
        return sum(min_size(f.type, seen) for f in node.fields)
    return 1


class Node:
    """A compiled part of a resolution: ``read`` decodes the value at every position."""

    def read(self, cur: Cursor, pos, end, row):  # pragma: no cover - interface
        raise NotImplementedError


class Skip(Node):
    """Reads past a writer value nobody reads."""

    def __init__(self, writer: AvroSchema):
        self.w = writer
        self._children: list[Skip] | None = None

    def children(self) -> list[Skip]:
        if self._children is None:
            w = self.w
            if w.type == "record":
                self._children = [Skip(f.type) for f in w.fields]
            elif w.type == "array":
                self._children = [Skip(w.element)]
            elif w.type == "map":
                self._children = [
                    Skip(
                        AvroSchema(
                            "record",
                            fields=[
                                AvroField("key", AvroSchema("string")),
                                AvroField("value", w.element),
                            ],
                        )
                    )
                ]
            elif w.type == "union":
                self._children = [Skip(b) for b in w.branches]
            else:
                self._children = []
        return self._children

    def read(self, cur, pos, end, row):
        return None, self.skip(cur, pos, end, row)

    def skip(self, cur, pos, end, row):
        t = self.w.type
        if t == "null" or pos.size == 0:
            return pos
        if t in ("int", "long", "enum"):
            return read_varint(cur, pos, end, row)[1]
        if t in ("boolean", "float", "double", "fixed"):
            width = {"boolean": 1, "float": 4, "double": 8}.get(t, self.w.size)
            pos = pos + width
            cur.check_end(pos, end, row)
            return pos
        if t in ("bytes", "string"):
            length, pos = read_lengths(cur, pos, end, row)
            return pos + length
        if t == "record":
            if cur.depth >= MAX_NESTING:
                cur.bad[row] = True
                return end.copy()
            cur.depth += 1
            try:
                for c in self.children():
                    pos = c.skip(cur, pos, end, row)
            finally:
                cur.depth -= 1
            return pos
        if t == "union":
            k, pos = read_varint(cur, pos, end, row, 5)
            out = pos.copy()
            for i, c in enumerate(self.children()):
                sel = np.flatnonzero(k == i)
                if sel.size:
                    out[sel] = c.skip(cur, pos[sel], end[sel], row[sel])
            wrong = (k < 0) | (k >= len(self.children()))
            cur.fail(row, out, end, wrong)
            return out
        # array, map: blocks; a block with its byte size is jumped over
        item = self.w.element
        item_width = fixed_width(item) if t == "array" else None
        return walk_blocks(
            cur, pos, end, row, min_size(item) + (t == "map"), self.children()[0], item_width
        )


def fixed_width(node: AvroSchema, seen=None):
    """The bytes every value of ``node`` takes when that is one number, else None."""
    t = node.type
    if t in ("null", "boolean", "float", "double", "fixed"):
        return min_size(node)
    if t == "record":
        seen = set() if seen is None else seen
        if id(node) in seen:
            return None
        widths = [fixed_width(f.type, seen | {id(node)}) for f in node.fields]
        return None if any(w is None for w in widths) else sum(widths)
    return None


def _block_headers(cur, pos, end, row, todo, count, min_item, record):
    """Read the next block header of the ``todo`` slots: moves ``pos`` past it and returns
    each slot's item count (0 when wrong or jumped) and which blocks were jumped whole."""
    e, r = end[todo], row[todo]
    c, p = read_varint(cur, pos[todo], e, r)
    jumped = np.zeros(todo.size, dtype=bool)
    neg = np.flatnonzero(c < 0)
    if neg.size:  # a negative count is followed by the block's size in bytes
        size, p2 = read_varint(cur, p[neg], e[neg], r[neg])
        p[neg] = p2
        c[neg] = -c[neg]  # -(min int64) stays negative: refused below
        if not record:
            fits = (size >= 0) & (size <= e[neg] - p2)
            cur.fail(r[neg], p2, e[neg], ~fits)
            p[neg] = np.where(fits, p2 + size, p2)
            c[neg] = 0
            jumped[neg] = fits
    room = e - p
    bound = room // min_item if min_item else ZERO_WIDTH_ITEMS_LIMIT - count[todo]
    wrong = (c < 0) | (c > bound)
    if wrong.any():
        cur.fail(r, p, e, wrong)
        c = np.where(wrong, 0, c)
    pos[todo] = p
    return c, jumped


def _pass_fixed_width(pos, count, slots, cs, width, found):
    """Pass ``cs`` items of one ``width`` in each slot at once; with ``found``, add where
    each item starts."""
    ps = pos[slots]
    if found is not None:
        total = int(cs.sum())
        first = np.repeat(np.cumsum(cs) - cs, cs)
        within = np.arange(total, dtype=np.int64) - first
        found.append(
            (
                np.repeat(slots, cs),
                np.repeat(count[slots], cs) + within,
                np.repeat(ps, cs) + within * width,
            )
        )
    pos[slots] = ps + cs * width
    count[slots] += cs


def _skip_in_rounds(cur, pos, end, row, count, slots, cs, skipper, found, record):
    """Pass ``cs`` items in each slot with ``skipper``: slots sorted by count (most first),
    round ``j`` passes item ``j`` of the leading slots that have one."""
    order = np.argsort(-cs, kind="stable")
    slots, cs = slots[order], cs[order]
    ps, es, rs, base = pos[slots], end[slots], row[slots], count[slots]
    desc = -cs
    j, top = 0, int(cs[0])
    while j < top:
        k = int(np.searchsorted(desc, -j, side="left"))  # slots with more than j
        if record:
            found.append((slots[:k], base[:k] + j, ps[:k].copy()))
        ps[:k] = skipper.skip(cur, ps[:k], es[:k], rs[:k])
        j += 1
        bad = cur.bad[rs[:k]]
        if bad.any():  # corrupt rows stop here; the others keep their order
            cs[:k][bad] = j
            order = np.argsort(-cs, kind="stable")
            slots, cs, ps, es, rs, base = (
                slots[order],
                cs[order],
                ps[order],
                es[order],
                rs[order],
                base[order],
            )
            desc = -cs
            top = int(cs[0])
    pos[slots] = ps
    count[slots] += cs


def walk_blocks(cur, pos, end, row, min_item, skipper, width=None, record=False):
    """Walk the blocks of an array or map at every position, reading past the items with
    ``skipper`` (items of one ``width`` are jumped over, as are blocks that carry their
    byte size when ``record`` is False). Returns the positions after the value; with
    ``record``, also each slot's item count and, per group of items found, ``(slots, item
    index, item start)``.

    Per block: every slot's item count is read, the slots are sorted by it (most first),
    and round ``j`` passes item ``j`` of the leading slots that have one (a slice, no
    gather); a slot whose row turns out corrupt stops there."""
    n = pos.size
    pos = pos.copy()
    count = np.zeros(n, dtype=np.int64)
    found: list = []
    todo = np.arange(n)  # slots whose next block header is due
    while todo.size:
        todo = todo[~cur.bad[row[todo]]]
        if not todo.size:
            break
        c, jumped = _block_headers(cur, pos, end, row, todo, count, min_item, record)
        go = c > 0
        slots = todo[go]
        if slots.size and width is not None:  # every item's start is known
            _pass_fixed_width(pos, count, slots, c[go], width, found if record else None)
        elif slots.size:
            _skip_in_rounds(cur, pos, end, row, count, slots, c[go], skipper, found, record)
        todo = todo[go | jumped]
    if not record:
        return pos
    return pos, count, found
