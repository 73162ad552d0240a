"""Avro schema resolution: how data written with one schema reads with another.

``resolve(writer, reader)`` walks both schemas by the rules of the Avro specification and
returns a ``Resolution`` tree that says, for every part of the reader schema, what the
writer put in the bytes: record fields matched by name or alias (writer fields the reader
lacks are skipped, reader fields the writer lacks take their default), promotions (int to
long, float, double; long to float, double; float to double; string and bytes both ways),
enum symbols matched by name (an unknown symbol takes the reader's default, or fails the
row), unions (a writer branch reads as the first reader branch that matches it: same type
and name, then same unqualified name, then a promotion). A pair that can never read raises
``AvroResolutionError`` naming the place; a writer union branch that cannot read is only an
error for the rows that use it (as in Avro's own readers).

Records, enums and fixed match whatever their names at the top and inside records, as
Apache Avro's Java reader does; names only choose between union branches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .schema import AvroSchema

PROMOTIONS = {
    "int": ("long", "float", "double"),
    "long": ("float", "double"),
    "float": ("double",),
    "string": ("bytes",),
    "bytes": ("string",),
}


class AvroResolutionError(ValueError):
    """The writer's schema cannot be read with the reader's."""


@dataclass(eq=False)
class Resolution:
    """One node: ``kind`` is one of ``primitive`` (writer.type read as reader.type),
    ``fixed``, ``enum`` (``enum_map``: writer symbol index -> reader symbol index, -1
    for none), ``record`` (``steps``: per writer field, in writer order, the reader field
    index it fills (None: skipped) and the child resolution; ``defaults``: reader field
    indices the writer lacks), ``array``/``map`` (``child``), ``writer_union`` (``branches``:
    per writer branch, a Resolution or an error message), ``reader_union`` (``branch``: the
    reader branch index chosen, ``child``), ``skip`` (writer data nobody reads)."""

    kind: str
    writer: AvroSchema
    reader: AvroSchema | None
    child: Resolution | None = None
    steps: list = field(default_factory=list)
    defaults: list = field(default_factory=list)
    enum_map: list = field(default_factory=list)
    branches: list = field(default_factory=list)
    branch: int = -1

    @property
    def read_as(self) -> AvroSchema:
        """The reader's schema, which every kind but ``skip`` has."""
        if self.reader is None:
            raise AvroResolutionError(f"{self!r} has no reader schema")
        return self.reader

    @property
    def inner(self) -> Resolution:
        """The child of an ``array``, ``map`` or ``reader_union`` node."""
        if self.child is None:
            raise AvroResolutionError(f"{self!r} has no child")
        return self.child

    def __repr__(self) -> str:
        return f"Resolution({self.kind}: {self.writer!r} -> {self.reader!r})"


def _names_match(w: AvroSchema, r: AvroSchema) -> bool:
    return (
        w.simple_name == r.simple_name
        or w.name in r.aliases
        or any(a.rsplit(".", 1)[-1] == w.simple_name for a in r.aliases)
    )


def _same_kind(w: AvroSchema, r: AvroSchema) -> bool:
    if w.type != r.type:
        return False
    if w.type == "fixed":
        return w.size == r.size
    return True


def _best_branch(w: AvroSchema, reader_branches) -> int:
    """Index of the reader union branch the writer type ``w`` reads as, or -1."""
    for i, b in enumerate(reader_branches):  # same type, same full name
        if _same_kind(w, b) and (w.name is None or w.name == b.name or w.name in b.aliases):
            return i
    for i, b in enumerate(reader_branches):  # same type, same unqualified name
        if _same_kind(w, b) and w.name is not None and _names_match(w, b):
            return i
    for i, b in enumerate(reader_branches):  # a promotion
        if b.type in PROMOTIONS.get(w.type, ()):
            return i
    return -1


class _Resolver:
    def __init__(self):
        self.memo: dict = {}

    def resolve(self, w: AvroSchema, r: AvroSchema, path: str) -> Resolution:
        key = (id(w), id(r))
        if key in self.memo:
            return self.memo[key]
        if w.type == "union":
            node = Resolution("writer_union", w, r)
            self.memo[key] = node
            errors = []
            for i, b in enumerate(w.branches):
                try:
                    node.branches.append(self.resolve(b, r, f"{path}<branch {i}>"))
                except AvroResolutionError as e:
                    node.branches.append(str(e))
                    errors.append(str(e))
            if len(errors) == len(w.branches):
                raise AvroResolutionError(errors[0])
            return node
        if r.type == "union":
            i = _best_branch(w, r.branches)
            if i < 0:
                raise AvroResolutionError(
                    f"at {path}: the writer's {w.name or w.type} matches no branch of the "
                    f"reader's union [{', '.join(b.name or b.type for b in r.branches)}]"
                )
            node = Resolution("reader_union", w, r, branch=i)
            self.memo[key] = node
            b = r.branches[i]
            node.child = self.resolve(w, b, f"{path}<{b.name or b.type}>")
            return node
        if w.type == r.type:
            if w.type == "record":
                return self._record(w, r, path, key)
            if w.type == "enum":
                node = Resolution("enum", w, r)
                index = {s: j for j, s in enumerate(r.symbols)}
                default = index.get(r.enum_default, -1) if r.enum_default is not None else -1
                node.enum_map = [index.get(s, default) for s in w.symbols]
                self.memo[key] = node
                return node
            if w.type == "fixed":
                if w.size != r.size:
                    raise AvroResolutionError(
                        f"at {path}: the writer's fixed {w.name} has "
                        f"{w.size} bytes, the reader's {r.name} {r.size}"
                    )
                return self._leaf("fixed", w, r, key)
            if w.type == "array":
                node = Resolution("array", w, r)
                self.memo[key] = node
                node.child = self.resolve(w.element, r.element, path + "[]")
                return node
            if w.type == "map":
                node = Resolution("map", w, r)
                self.memo[key] = node
                node.child = self.resolve(w.element, r.element, path + "{}")
                return node
            return self._leaf("primitive", w, r, key)
        if r.type in PROMOTIONS.get(w.type, ()):
            return self._leaf("primitive", w, r, key)
        raise AvroResolutionError(
            f"at {path}: the writer's {w.name or w.type} cannot be read "
            f"as the reader's {r.name or r.type}"
        )

    def _leaf(self, kind, w, r, key):
        node = Resolution(kind, w, r)
        self.memo[key] = node
        return node

    def _record(self, w: AvroSchema, r: AvroSchema, path: str, key) -> Resolution:
        node = Resolution("record", w, r)
        self.memo[key] = node
        by_name: dict[str, int] = {}
        for j, rf in enumerate(r.fields):
            by_name.setdefault(rf.name, j)
        for j, rf in enumerate(r.fields):
            for a in rf.aliases:
                by_name.setdefault(a, j)
        used = set()
        for wf in w.fields:
            j = by_name.get(wf.name, -1)
            if j < 0 or j in used:
                node.steps.append((None, skip(wf.type)))
                continue
            used.add(j)
            node.steps.append(
                (j, self.resolve(wf.type, r.fields[j].type, f"{path}.{r.fields[j].name}"))
            )
        for j, rf in enumerate(r.fields):
            if j in used:
                continue
            if not rf.has_default:
                raise AvroResolutionError(
                    f"at {path}: the reader's field {rf.name!r} of record {r.name} is not in "
                    f"the writer's record {w.name} and has no default"
                )
            node.defaults.append(j)
        return node


def skip(w: AvroSchema) -> Resolution:
    """A node that reads ``w``'s data and throws it away."""
    return Resolution("skip", w, None)


def resolve(writer_schema: AvroSchema, reader_schema: AvroSchema) -> Resolution:
    """Resolve ``writer_schema`` against ``reader_schema``; raises ``AvroResolutionError``."""
    return _Resolver().resolve(writer_schema, reader_schema, reader_schema.name or "value")
