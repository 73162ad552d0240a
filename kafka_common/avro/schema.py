"""Avro schemas parsed from their JSON form into a small tree of nodes (``AvroSchema``).

Named types (records, enums, fixed) are entered in a table by full name as they are met, so
a later reference to a name, a recursive record and a registry reference (a schema parsed
first and handed in ``named``) all point at the same node. Logical types the Avro spec
calls invalid (a decimal whose precision does not fit its fixed size, a scale above the
precision, a logical type on the wrong underlying type) are dropped, as the Avro libraries
do, and the node reads as its underlying type.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
NAMED = ("record", "error", "enum", "fixed")

# logical type -> the underlying types it may annotate (others are dropped, as Avro does)
_LOGICAL_ON = {
    "decimal": ("bytes", "fixed"),
    "uuid": ("string", "fixed"),
    "date": ("int",),
    "time-millis": ("int",),
    "time-micros": ("long",),
    "timestamp-millis": ("long",),
    "timestamp-micros": ("long",),
    "timestamp-nanos": ("long",),
    "local-timestamp-millis": ("long",),
    "local-timestamp-micros": ("long",),
    "local-timestamp-nanos": ("long",),
    "duration": ("fixed",),
}


class AvroSchemaError(ValueError):
    """A schema that is not valid Avro, with the path to the offending part."""


@dataclass(eq=False)
class AvroSchema:
    """One node of a parsed schema. ``type`` is a primitive name or record/enum/fixed/
    array/map/union; the other attributes apply to the types that have them."""

    type: str
    logical: str | None = None
    precision: int = 0
    scale: int = 0
    name: str | None = None  # full name of a named type
    aliases: tuple = ()  # full names
    fields: list = field(default_factory=list)  # records: list of AvroField
    symbols: tuple = ()  # enums
    enum_default: str | None = None
    size: int = 0  # fixed
    items: AvroSchema | None = None  # arrays
    values: AvroSchema | None = None  # maps
    branches: list = field(default_factory=list)  # unions
    props: dict = field(default_factory=dict)

    @property
    def simple_name(self) -> str:
        """The unqualified name of a named type, else the type's name (as Avro's getName)."""
        if self.name is not None:
            return self.name.rsplit(".", 1)[-1]
        return self.type

    @property
    def element(self) -> AvroSchema:
        """An array's item schema or a map's value schema."""
        element = self.items if self.type == "array" else self.values
        if element is None:
            raise AvroSchemaError(f"{self!r} is neither an array nor a map")
        return element

    def __repr__(self) -> str:
        return f"AvroSchema({self.name or self.type})"


@dataclass(eq=False)
class AvroField:
    name: str
    type: AvroSchema
    default: Any = None
    has_default: bool = False
    aliases: tuple = ()


def _full_name(name: str, namespace: str | None) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


def _decimal_fits(precision: int, size: int) -> bool:
    """Whether a fixed of ``size`` bytes holds every unscaled value of ``precision`` digits."""
    return precision <= math.floor(math.log10(2) * (8 * size - 1))


class _Parser:
    def __init__(self, names: dict[str, AvroSchema]):
        self.names = names

    def parse(self, obj, namespace: str | None, path: str) -> AvroSchema:
        if isinstance(obj, str):
            return self._parse_name(obj, namespace, path)
        if isinstance(obj, list):
            return self._parse_union(obj, namespace, path)
        if not isinstance(obj, dict) or "type" not in obj:
            raise AvroSchemaError(f"not an Avro schema at {path}: {obj!r:.80}")
        t = obj["type"]
        if isinstance(t, (dict, list)) or (
            isinstance(t, str)
            and t not in PRIMITIVES
            and t not in NAMED
            and t not in ("array", "map")
        ):
            # {"type": {...}} or {"type": "SomeName"}: a wrapper around another schema
            return self.parse(t, namespace, path)
        props = {k: v for k, v in obj.items() if k not in _SCHEMA_KEYS}
        if t in PRIMITIVES:
            node = AvroSchema(t, props=props)
            self._logical(node, obj)
            return node
        # as before the table: any other non-string type is read as a fixed
        return _TYPE_PARSERS.get(t, _Parser._parse_fixed)(self, t, obj, props, namespace, path)

    def _parse_name(self, obj: str, namespace: str | None, path: str) -> AvroSchema:
        """A primitive type's name or a named type defined before."""
        if obj in PRIMITIVES:
            return AvroSchema(obj)
        for candidate in (_full_name(obj, namespace), obj):
            if candidate in self.names:
                return self.names[candidate]
        raise AvroSchemaError(f"unknown type name {obj!r} at {path}")

    def _parse_union(self, obj: list, namespace: str | None, path: str) -> AvroSchema:
        branches = [self.parse(b, namespace, f"{path}[{i}]") for i, b in enumerate(obj)]
        seen = set()
        for b in branches:
            if b.type == "union":
                raise AvroSchemaError(f"a union directly inside a union at {path}")
            key = b.name if b.name is not None else b.type
            if key in seen:
                raise AvroSchemaError(f"union at {path} holds {key!r} twice")
            seen.add(key)
        return AvroSchema("union", branches=branches)

    def _parse_array(self, t, obj, props, namespace, path) -> AvroSchema:
        if "items" not in obj:
            raise AvroSchemaError(f"array without items at {path}")
        return AvroSchema(
            "array", items=self.parse(obj["items"], namespace, path + ".items"), props=props
        )

    def _parse_map(self, t, obj, props, namespace, path) -> AvroSchema:
        if "values" not in obj:
            raise AvroSchemaError(f"map without values at {path}")
        return AvroSchema(
            "map", values=self.parse(obj["values"], namespace, path + ".values"), props=props
        )

    def _define(self, t: str, obj: dict, props: dict, namespace, path: str):
        """A named type's node, registered under its full name; with its namespace."""
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            raise AvroSchemaError(f"{t} without a name at {path}")
        ns = obj.get("namespace", namespace if "." not in name else None)
        if "." in name:
            ns = name.rsplit(".", 1)[0]
        full = _full_name(name, ns)
        aliases = tuple(_full_name(a, ns) for a in obj.get("aliases", ()) or ())
        node = AvroSchema("record" if t == "error" else t, name=full, aliases=aliases, props=props)
        if full in self.names:
            raise AvroSchemaError(f"type {full!r} defined twice (at {path})")
        self.names[full] = node
        return node, ns

    def _parse_record(self, t, obj, props, namespace, path) -> AvroSchema:
        node, ns = self._define(t, obj, props, namespace, path)
        full = node.name
        where = f"{path}<{full}>"
        fields = obj.get("fields")
        if not isinstance(fields, list):
            raise AvroSchemaError(f"record {full!r} without a fields list")
        seen = set()
        for i, f in enumerate(fields):
            if not isinstance(f, dict) or not isinstance(f.get("name"), str) or "type" not in f:
                raise AvroSchemaError(f"field {i} of record {full!r} needs a name and a type")
            if f["name"] in seen:
                raise AvroSchemaError(f"record {full!r} has field {f['name']!r} twice")
            seen.add(f["name"])
            ftype = self.parse(f["type"], ns, f"{where}.{f['name']}")
            node.fields.append(
                AvroField(
                    f["name"],
                    ftype,
                    f.get("default"),
                    "default" in f,
                    tuple(f.get("aliases", ()) or ()),
                )
            )
        return node

    def _parse_enum(self, t, obj, props, namespace, path) -> AvroSchema:
        node, _ = self._define(t, obj, props, namespace, path)
        full = node.name
        symbols = obj.get("symbols")
        if (
            not isinstance(symbols, list)
            or not all(isinstance(s, str) for s in symbols)
            or len(set(symbols)) != len(symbols)
        ):
            raise AvroSchemaError(f"enum {full!r} needs a list of distinct symbols")
        node.symbols = tuple(symbols)
        default = obj.get("default")
        if default is not None and default not in node.symbols:
            raise AvroSchemaError(f"enum {full!r} default {default!r} is not a symbol")
        node.enum_default = default
        return node

    def _parse_fixed(self, t, obj, props, namespace, path) -> AvroSchema:
        node, _ = self._define(t, obj, props, namespace, path)
        size = obj.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise AvroSchemaError(f"fixed {node.name!r} needs a non-negative integer size")
        node.size = size
        self._logical(node, obj)
        return node

    @staticmethod
    def _logical(node: AvroSchema, obj: dict) -> None:
        lt = obj.get("logicalType")
        if not isinstance(lt, str) or node.type not in _LOGICAL_ON.get(lt, ()):
            return
        if lt == "decimal":
            p, s = obj.get("precision"), obj.get("scale", 0)
            if not isinstance(p, int) or not isinstance(s, int) or p <= 0 or s < 0 or s > p:
                return
            if node.type == "fixed" and not _decimal_fits(p, node.size):
                return
            node.precision, node.scale = p, s
        if lt == "uuid" and node.type == "fixed" and node.size != 16:
            return
        if lt == "duration" and node.size != 12:
            return
        node.logical = lt


#: The parser of each complex type, by its "type".
_TYPE_PARSERS = {
    "array": _Parser._parse_array,
    "map": _Parser._parse_map,
    "record": _Parser._parse_record,
    "error": _Parser._parse_record,
    "enum": _Parser._parse_enum,
    "fixed": _Parser._parse_fixed,
}
#: The keys of a schema object that are not its own properties (``props``).
_SCHEMA_KEYS = frozenset(
    (
        "type",
        "name",
        "namespace",
        "fields",
        "symbols",
        "items",
        "values",
        "size",
        "aliases",
        "doc",
        "default",
        "logicalType",
        "precision",
        "scale",
    )
)


def parse_schema(text_or_obj, named=None) -> AvroSchema:
    """Parse an Avro schema from its JSON text (or the decoded JSON value).

    ``named``: the schemas this one refers to by name (a registry's references), as an
    iterable of texts/JSON values/``AvroSchema`` or a mapping whose values are those; they
    are parsed first, in order, and their named types become visible to this schema.
    """
    names: dict[str, AvroSchema] = {}
    parser = _Parser(names)
    if named:
        refs = named.values() if isinstance(named, dict) else named
        for ref in refs:
            if isinstance(ref, AvroSchema):
                _collect_names(ref, names)
            else:
                parser.parse(_load(ref), None, "<reference>")
    return parser.parse(_load(text_or_obj), None, "<schema>")


def _load(text_or_obj):
    if isinstance(text_or_obj, (bytes, bytearray)):
        text_or_obj = text_or_obj.decode()
    if isinstance(text_or_obj, str):
        s = text_or_obj.strip()
        if s in PRIMITIVES:
            return s
        try:
            return json.loads(s)
        except json.JSONDecodeError as e:
            raise AvroSchemaError(f"the Avro schema is not valid JSON: {e}") from None
    return text_or_obj


def _collect_names(node: AvroSchema, names: dict, seen=None) -> None:
    seen = set() if seen is None else seen
    if id(node) in seen:
        return
    seen.add(id(node))
    if node.name is not None:
        names.setdefault(node.name, node)
    for child in _children(node):
        _collect_names(child, names, seen)


def _children(node: AvroSchema):
    if node.type == "record":
        return [f.type for f in node.fields]
    if node.type == "array":
        return [node.items]
    if node.type == "map":
        return [node.values]
    if node.type == "union":
        return list(node.branches)
    return []
