"""A small declarative schema language for Kafka messages, and its compiler.

Each API is written once, covering every version, in the style of Kafka's own JSON message
definitions::

    Message(versions="0-4", flexible="3+", fields=[
        F("error_code", "int16"),
        F("api_keys", [F("api_key", "int16"), F("min_version", "int16"),
                       F("max_version", "int16")]),
        F("throttle_time_ms", "int32", "1+"),
        F("finalized_features_epoch", "int64", "3+", tag=1, default=-1),
    ])

A field's type is a primitive name (``int8 int16 int32 int64 uint16 uint32 float64 bool
uuid string bytes records``), ``"[T]"`` for an array of a primitive, a list of fields for an
array of structs, or ``Struct([...])`` for a single nested struct. ``versions`` says in which
versions the field exists, ``nullable`` in which it may be null, ``tag`` (with ``tagged``,
default: every flexible version) makes it a tagged field. In flexible versions strings, bytes
and arrays use their compact forms and every struct ends with a tagged-field section.

Messages are plain dicts keyed by field name. Decoding fills the fields a version lacks with
their defaults, so one dict shape serves every version; encoding skips them. Decoders and
encoders are compiled once per (message, version) and cached.
"""

from __future__ import annotations

from dataclasses import dataclass, field as dc_field
from collections.abc import Callable, Iterator
from typing import Any, TypeAlias, cast

from . import primitives as p
from . import schema_fast_reads as fast
from . import tagged_fields as tags
from .errors import ProtocolError
from .tagged_fields import UNKNOWN_TAGS

_MISSING = object()

# A reader returns (value, next position); a writer appends a value's bytes.
Reader: TypeAlias = Callable[[p.Buffer, int], tuple[Any, int]]
Writer: TypeAlias = Callable[[bytearray, Any], None]
Codec: TypeAlias = tuple[Reader, Writer]
# A compiled message or struct version: its decoder and encoder.
StructCodec: TypeAlias = tuple[
    Callable[[p.Buffer, int], tuple[dict[str, Any], int]],
    Callable[[bytearray, dict[str, Any]], None],
]


# ---- version ranges -----------------------------------------------------------------------


@dataclass(frozen=True)
class Versions:
    """An inclusive range of versions; ``hi`` None means open-ended ("3+")."""

    lo: int
    hi: int | None

    @classmethod
    def parse(cls, spec: str | Versions | None) -> Versions:
        if isinstance(spec, Versions):
            return spec
        if spec is None or spec == "none":
            return cls(1, 0)  # empty
        spec = spec.strip()
        if spec.endswith("+"):
            return cls(int(spec[:-1]), None)
        if "-" in spec:
            lo, hi = spec.split("-")
            return cls(int(lo), int(hi))
        return cls(int(spec), int(spec))

    def __contains__(self, version: int) -> bool:
        return version >= self.lo and (self.hi is None or version <= self.hi)

    def __iter__(self) -> Iterator[int]:
        if self.hi is None:
            raise ValueError("cannot iterate an open-ended version range")
        return iter(range(self.lo, self.hi + 1))


# ---- the declarative part -----------------------------------------------------------------


@dataclass
class Struct:
    fields: list[F]


@dataclass
class F:
    """One field of a message or struct."""

    name: str
    type: Any
    versions: str | Versions = "0+"
    nullable: str | Versions | None = None
    tag: int | None = None
    tagged: str | Versions | None = None
    default: Any = _MISSING
    about: str = ""

    def __post_init__(self) -> None:
        self.versions = Versions.parse(self.versions)
        self.nullable = Versions.parse(self.nullable)
        self.tagged = Versions.parse(self.tagged) if self.tagged is not None else None

    def is_tagged(self, version: int, flexible: bool) -> bool:
        if self.tag is None or not flexible:
            return False
        return self.tagged is None or version in self.tagged

    def default_value(self) -> Any:
        if self.default is not _MISSING:
            return self.default
        nullable = _parsed(self.nullable)
        nullable_somewhere = nullable.hi is None or nullable.lo <= nullable.hi
        return None if nullable_somewhere else _type_default(self.type)


def _parsed(versions: str | Versions | None) -> Versions:
    """A range ``__post_init__`` has parsed (the fields are typed as they are given)."""
    return cast(Versions, versions)


def _type_default(t: Any) -> Any:
    if isinstance(t, list) or (isinstance(t, str) and t.startswith("[")):
        return []
    if isinstance(t, Struct):
        return None
    return {
        "bool": False,
        "uuid": p.ZERO_UUID,
        "string": "",
        "bytes": b"",
        "records": None,
        "float64": 0.0,
    }.get(t, 0)


@dataclass
class Message:
    """A request or response body: its version range, flexible versions and fields."""

    versions: str | Versions
    fields: list[F]
    flexible: str | Versions | None = None
    _compiled: dict[int, StructCodec] = dc_field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.versions = Versions.parse(self.versions)
        self.flexible = Versions.parse(self.flexible)

    def is_flexible(self, version: int) -> bool:
        return version in _parsed(self.flexible)

    def _codec(self, version: int) -> StructCodec:
        codec = self._compiled.get(version)
        if codec is None:
            if version not in _parsed(self.versions):
                raise ValueError(f"version {version} outside {self.versions}")
            codec = _compile_struct(self.fields, version, self.is_flexible(version))
            self._compiled[version] = codec
        return codec

    def encode(
        self, version: int, value: dict[str, Any], out: bytearray | None = None
    ) -> bytearray:
        out = bytearray() if out is None else out
        self._codec(version)[1](out, value)
        return out

    def decode(
        self, version: int, buf: p.Buffer, pos: int = 0, *, exact: bool = True
    ) -> tuple[dict[str, Any], int]:
        """Decode a body; returns ``(dict, end_pos)``. ``exact`` rejects trailing bytes."""
        try:
            value, end = self._codec(version)[0](buf, pos)
        except ProtocolError:
            raise
        except (IndexError, ValueError, OverflowError) as e:  # defensive: never leak these
            raise ProtocolError(f"malformed message: {e}") from e
        if exact and end != len(buf):
            raise ProtocolError(f"{len(buf) - end} unexpected trailing bytes after the message")
        return value, end

    def describe(self, version: int) -> list[tuple[str, str, Any]]:
        """The non-tagged field tree of a version, with the guide's type names:
        ``[(name, TYPE, children_or_None), ...]``; an array is ``ARRAY`` / ``COMPACT_ARRAY``
        (nullable or not: the guide cannot tell) with its element fields, or its element TYPE
        for an array of a primitive. Used by the drift test."""
        return _describe(self.fields, version, self.is_flexible(version))


@dataclass
class Api:
    key: int
    name: str
    request: Message
    response: Message

    @property
    def versions(self) -> Versions:
        return _parsed(self.request.versions)

    def request_header_version(self, version: int) -> int:
        return 2 if self.request.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        if self.key == 18:  # ApiVersions responses always use header v0 (KIP-511)
            return 0
        return 1 if self.response.is_flexible(version) else 0


def api(
    key: int,
    name: str,
    versions: str,
    *,
    request: list[F],
    response: list[F],
    flexible: str | None = None,
) -> Api:
    """An ``Api`` whose request and response share one version range and flexible versions,
    as every Kafka API's do."""
    return Api(
        key, name, Message(versions, request, flexible), Message(versions, response, flexible)
    )


def topics(*partition_fields: F) -> F:
    """The usual ``topics`` array: each topic's ``name`` and its ``partitions``, one struct of
    ``partition_fields`` per partition."""
    return F("topics", [F("name", "string"), F("partitions", list(partition_fields))])


# ---- the compiler -------------------------------------------------------------------------

_FIXED = {
    "int8": (p.read_int8, p.write_int8, "INT8"),
    "int16": (p.read_int16, p.write_int16, "INT16"),
    "int32": (p.read_int32, p.write_int32, "INT32"),
    "int64": (p.read_int64, p.write_int64, "INT64"),
    "uint16": (p.read_uint16, p.write_uint16, "UINT16"),
    "uint32": (p.read_uint32, p.write_uint32, "UINT32"),
    "float64": (p.read_float64, p.write_float64, "FLOAT64"),
    "bool": (p.read_boolean, p.write_boolean, "BOOLEAN"),
    "uuid": (p.read_uuid, p.write_uuid, "UUID"),
}


def _guide_name(t: str, compact: bool, nullable: bool) -> str:
    base = {"string": "STRING", "bytes": "BYTES", "records": "RECORDS"}[t]
    if t == "records":
        return ("COMPACT_" if compact else "") + "RECORDS"
    return ("COMPACT_" if compact else "") + ("NULLABLE_" if nullable else "") + base


def _primitive_codec(t: str, compact: bool, nullable: bool) -> Codec:
    if t in _FIXED:
        return _FIXED[t][0], cast(Writer, _FIXED[t][1])
    if t == "string":
        read_s = p.read_compact_string if compact else p.read_string
        write_s = p.write_compact_string if compact else p.write_string

        def read_str(buf: p.Buffer, pos: int) -> tuple[str | None, int]:
            return read_s(buf, pos, nullable)

        def write_str(out: bytearray, v: str | None) -> None:
            if v is None and not nullable:
                raise ValueError("null value for a non-nullable string")
            write_s(out, v)

        return read_str, write_str
    if t in ("bytes", "records"):
        rd = p.read_compact_bytes if compact else p.read_bytes
        wr = p.write_compact_bytes if compact else p.write_bytes
        if t == "records":  # a large section may stay aside in a frame (p.write_records)
            wr = p.write_compact_records if compact else p.write_records
        copy = t == "bytes"
        nullable = nullable or t == "records"

        def read_b(buf: p.Buffer, pos: int) -> tuple[p.Buffer | None, int]:
            v, pos = rd(buf, pos, nullable)
            return (bytes(v) if copy and v is not None else v), pos

        def write_b(out: bytearray, v: p.Buffer | None) -> None:
            if v is None and not nullable:
                raise ValueError("null value for non-nullable bytes")
            wr(out, v)

        return read_b, write_b
    raise TypeError(f"unknown primitive type {t!r}")


def _field_codec(f: F, version: int, flexible: bool) -> Codec:
    """Reader and writer for one field's value (not its tag framing)."""
    t = f.type
    nullable = version in _parsed(f.nullable)
    if isinstance(t, Struct):
        rd, wr = _compile_struct(t.fields, version, flexible)
        if not nullable:
            return rd, wr

        # nullable structs carry a leading int8: -1 null, 1 present
        def read_opt(buf: p.Buffer, pos: int) -> tuple[Any, int]:
            marker, pos = p.read_int8(buf, pos)
            if marker < 0:
                return None, pos
            return rd(buf, pos)

        def write_opt(out: bytearray, v: Any) -> None:
            if v is None:
                out.append(0xFF)
            else:
                out.append(1)
                wr(out, v)

        return read_opt, write_opt
    if isinstance(t, list) or (isinstance(t, str) and t.startswith("[")):
        if isinstance(t, list):
            erd, ewr = _compile_struct(t, version, flexible)
        else:
            erd, ewr = _primitive_codec(t[1:-1], flexible, False)
        rd, wr = _array_codec(erd, ewr, flexible, nullable)
        if isinstance(t, str) and t[1:-1] in fast.FORMATS:
            rd = fast.fixed_array_reader(fast.FORMATS[t[1:-1]], flexible, nullable)
        elif erd in fast.FIXED_ROWS:
            rd = fast.fixed_rows_reader(fast.FIXED_ROWS[erd], flexible, nullable, rd)
        return rd, wr
    return _primitive_codec(t, flexible, nullable)


def _array_codec(erd: Reader, ewr: Writer, compact: bool, nullable: bool) -> Codec:
    read_count = p.read_array_count
    write_count = p.write_array_count

    def read_array(buf: p.Buffer, pos: int) -> tuple[list[Any] | None, int]:
        first = buf[pos] if compact and pos < len(buf) else 0
        if 0 < first < 0x80 and first - 1 <= len(buf) - pos - 1:  # one-byte compact count
            n, pos = first - 1, pos + 1
        else:
            count, pos = read_count(buf, pos, compact, nullable)
            if count is None:
                return None, pos
            n = count
        items: list[Any] = []
        append = items.append
        for _ in range(n):
            item, pos = erd(buf, pos)
            append(item)
        return items, pos

    def write_array(out: bytearray, items: list[Any] | None) -> None:
        if items is None:
            if not nullable:
                raise ValueError("null value for a non-nullable array")
            write_count(out, None, compact)
            return
        write_count(out, len(items), compact)
        for item in items:
            ewr(out, item)

    return read_array, write_array


def _compile_struct(fields: list[F], version: int, flexible: bool) -> StructCodec:
    plain: list[tuple[str, Reader, Writer, Any]] = []
    tagged: dict[int, tuple[str, Reader, Writer, Any]] = {}
    absent: list[tuple[str, Any]] = []
    for f in fields:
        if version not in _parsed(f.versions):
            absent.append((f.name, f.default_value()))
            continue
        rd, wr = _field_codec(f, version, flexible)
        default = f.default_value()
        if (
            default is None
            and version not in _parsed(f.nullable)
            and not isinstance(f.type, Struct)
        ):
            default = _type_default(f.type)  # null default only where null can be written
        entry = (f.name, rd, wr, default)
        if f.is_tagged(version, flexible):
            tagged[cast(int, f.tag)] = entry
            absent.append((f.name, f.default_value()))  # a tagged field may be left out
        else:
            plain.append(entry)
    plain_read = _plain_reads(fields, plain, version)
    plain_write = [(name, wr, default) for name, _, wr, default in plain]
    tags_in_order = sorted(tagged.items())
    defaults = [(name, default) for name, default in absent if type(default) is not list]
    list_defaults = [(name, default) for name, default in absent if type(default) is list]

    def decode(buf: p.Buffer, pos: int) -> tuple[dict[str, Any], int]:
        d: dict[str, Any] = dict(defaults)
        for name, default in list_defaults:
            d[name] = list(default)
        for names, read in plain_read:
            if names.__class__ is str:
                d[names], pos = read(buf, pos)
            else:
                values, pos = read(buf, pos)
                d.update(zip(names, values))
        if flexible:
            if pos < len(buf) and buf[pos] == 0:  # no tagged field: the usual case
                pos += 1
            else:
                pos = tags.read_tagged_section(buf, pos, tagged, d)
        return d, pos

    if len(plain_read) == 1 and not isinstance(plain_read[0][0], str) and not list_defaults:
        # every field fixed-width: an array of these is read row by row at C speed
        names = cast(tuple[str, ...], plain_read[0][0])
        types = {f.name: f.type for f in fields if version in _parsed(f.versions)}
        fmt = "".join(fast.FORMATS[cast(str, types[n])] for n in names)
        fast.FIXED_ROWS[decode] = (names, fmt, dict(defaults), flexible)

    def encode(out: bytearray, d: dict[str, Any]) -> None:
        get = d.get
        for name, wr, default in plain_write:
            v = get(name, _MISSING)
            wr(out, default if v is _MISSING else v)
        if flexible:
            if tags_in_order or UNKNOWN_TAGS in d:
                tags.write_tagged_section(out, d, tags_in_order)
            else:
                out.append(0)  # no tagged field

    return decode, encode


def _plain_reads(
    fields: list[F], plain: list[tuple[str, Reader, Writer, Any]], version: int
) -> list[tuple[Any, Reader]]:
    """The readers of a struct's untagged fields in order, ``(name, reader)``, where runs
    of fixed-width fields become one ``(names, reader)`` that unpacks them at once."""
    types = {f.name: f.type for f in fields if version in _parsed(f.versions)}
    out: list[tuple[Any, Reader]] = []
    run: list[str] = []

    def close_run() -> None:
        if len(run) == 1:
            name = run[0]
            out.append((name, next(rd for n, rd, _, _ in plain if n == name)))
        elif run:
            fmt = "".join(fast.FORMATS[cast(str, types[n])] for n in run)
            out.append((tuple(run), fast.fused_reader(list(run), fmt)))
        run.clear()

    for name, rd, _, _ in plain:
        t = types[name]
        if isinstance(t, str) and t in fast.FORMATS:
            run.append(name)
            continue
        close_run()
        out.append((name, rd))
    close_run()
    return out


def _describe(fields: list[F], version: int, flexible: bool) -> list[tuple[str, str, Any]]:
    rows: list[tuple[str, str, Any]] = []
    for f in fields:
        if version not in _parsed(f.versions) or f.is_tagged(version, flexible):
            continue
        nullable = version in _parsed(f.nullable)
        t = f.type
        # The guide's BNF cannot show whether an array may be null, so an array is ARRAY or
        # COMPACT_ARRAY whatever its nullability (which the round-trip tests cover instead).
        array = "COMPACT_ARRAY" if flexible else "ARRAY"
        if isinstance(t, list):
            rows.append((f.name, array, _describe(t, version, flexible)))
        elif isinstance(t, Struct):
            rows.append((f.name, "STRUCT", _describe(t.fields, version, flexible)))
        elif t.startswith("["):
            kind = array
            inner = t[1:-1]
            rows.append(
                (
                    f.name,
                    kind,
                    _FIXED[inner][2] if inner in _FIXED else _guide_name(inner, flexible, False),
                )
            )
        elif t in _FIXED:
            rows.append((f.name, _FIXED[t][2], None))
        else:
            rows.append((f.name, _guide_name(t, flexible, nullable), None))
    return rows
