"""A ``.proto`` text (as a Schema Registry holds it) compiled into message descriptors.

``protoc`` comes from the ``grpcio-tools`` wheel (``pip install pyspark-pykafka[protobuf]``):
the text and its references are written to a private temporary directory under their
reference names, compiled to a ``FileDescriptorSet`` with their imports, and loaded into
a fresh descriptor pool. Results are cached per (text, references) in the process.

Reference names come from the registry's answer: they are data. Each must be a relative
name (``kafka_common.trust.safe_relative_path``: no ``..``, no absolute path, no drive
letter) and is written under ``refs/`` of the private folder (where protoc finds it by the
same name the schema imports), the schema itself under ``main/``; a name that would lead
anywhere else is refused before anything is written. Only protobuf's own
``google/protobuf/*.proto`` files are looked up among the installed modules.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile

from protocol.errors import ConfigError, MissingCodecError

from ..bounded_cache import BoundedCache
from ..trust import safe_relative_path

__all__ = ["message_descriptor", "ProtoCompileError"]

_cache: BoundedCache[str, object] = BoundedCache(128)  # compiled .proto files, by text


class ProtoCompileError(ConfigError):
    """A .proto text that protoc refuses."""


def _serialized(text: str):
    """The ``FileDescriptorProto`` when ``text`` is one in base64 (how confluent-kafka's
    Python serializer registers a schema), else None."""
    import base64
    import binascii

    if "{" in text or ";" in text:
        return None
    from google.protobuf import descriptor_pb2

    try:
        return descriptor_pb2.FileDescriptorProto.FromString(
            base64.b64decode(text.strip(), validate=True)
        )
    except (binascii.Error, ValueError, Exception):
        return None


_WELL_KNOWN = re.compile(r"google/protobuf/[a-z_]+(/[a-z_]+)*\.proto")


def _well_known(name: str):
    """The descriptor proto of one of protobuf's own files (google/protobuf/*.proto)."""
    import importlib
    from google.protobuf import descriptor_pb2, descriptor_pool

    if not _WELL_KNOWN.fullmatch(name):
        raise ConfigError(
            f"the .proto schema imports {name[:200]!r}, which is neither among "
            "its registry references nor one of protobuf's own files"
        )
    module = name.replace("/", ".")[: -len(".proto")] + "_pb2"
    try:
        importlib.import_module(module)
        found = descriptor_pool.Default().FindFileByName(name)
    except (ImportError, KeyError):
        raise ConfigError(
            f"the .proto schema imports {name!r}, which is neither among its "
            "registry references nor one of protobuf's own files"
        ) from None
    proto = descriptor_pb2.FileDescriptorProto()
    found.CopyToProto(proto)
    return proto


def _from_serialized(main, references: tuple):
    from google.protobuf import descriptor_pool

    refs = dict(references)
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(proto, depth=0):
        if proto.name in added or depth > 32:
            return
        for dep in proto.dependency:
            if dep in refs:
                ref = _serialized(refs[dep])
                if ref is None:
                    raise ConfigError(
                        f"reference {dep!r}: mixing .proto text references "
                        "with a serialized descriptor is not supported"
                    )
                add(ref, depth + 1)
            else:
                add(_well_known(dep), depth + 1)
        pool.Add(proto)
        added.add(proto.name)

    add(main)
    return pool.FindFileByName(main.name)


def _file_descriptor(text: str, references: tuple = ()):
    key = hashlib.sha256(repr((text, references)).encode()).hexdigest()
    found = _cache.get(key)
    if found is not None:
        return found
    serialized = _serialized(text)
    if serialized is not None:
        return _cache.put(key, _from_serialized(serialized, references))
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool
        from grpc_tools import protoc
    except ImportError as exc:
        raise MissingCodecError(
            "valueFormat/keyFormat=protobuf needs protobuf and grpcio-tools (its protoc): "
            "pip install 'pyspark-pykafka[protobuf]'"
        ) from exc
    import importlib.resources

    include = str(importlib.resources.files("grpc_tools") / "_proto")
    names = [
        safe_relative_path(name, "a Protobuf schema reference name") for name, _ in references
    ]  # all checked before anything is written
    with tempfile.TemporaryDirectory(prefix="pykafka-proto-") as tmp:
        refs, main_dir = os.path.join(tmp, "refs"), os.path.join(tmp, "main")
        os.mkdir(refs)
        os.mkdir(main_dir)
        for name, (_, ref_text) in zip(names, references):
            path = _inside(refs, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(ref_text)
        main = "__schema__.proto"
        with open(os.path.join(main_dir, main), "w", encoding="utf-8") as f:
            f.write(text)
        out = os.path.join(tmp, "set.pb")
        code = protoc.main(
            [
                "protoc",
                f"-I{main_dir}",
                f"-I{refs}",
                f"-I{include}",
                "--include_imports",
                f"--descriptor_set_out={out}",
                main,
            ]
        )
        if code != 0 or not os.path.exists(out):
            raise ProtoCompileError(
                f"protoc could not compile the .proto schema (exit "
                f"{code}); its first line: {text.strip()[:80]!r}"
            )
        with open(out, "rb") as f:
            fds = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for proto in fds.file:
        pool.Add(proto)
    return _cache.put(key, pool.FindFileByName(main))


def _inside(root: str, name: str) -> str:
    """``root``/``name``, checked once more to resolve inside ``root``."""
    path = os.path.realpath(os.path.join(root, *name.split("/")))
    if not path.startswith(os.path.realpath(root) + os.sep):
        raise ConfigError(
            f"a Protobuf schema reference name: {name[:200]!r} leads outside "
            "the folder it is compiled in"
        )
    return path


def message_descriptor(
    text: str, references: tuple = (), name: str | None = None, path: tuple[int, ...] | None = None
):
    """The message ``name`` (full or simple name) of the schema, or the one at the
    Confluent message-index ``path``, or the first message."""
    fd = _file_descriptor(text, tuple(references))
    if name:
        full = name if "." in name or not fd.package else f"{fd.package}.{name}"
        try:
            return fd.pool.FindMessageTypeByName(full)
        except KeyError:
            pass
        for m in fd.message_types_by_name.values():
            if m.name == name or m.full_name == name:
                return m
        known = ", ".join(fd.message_types_by_name) or "none"
        raise ConfigError(f"message {name!r} is not in the .proto schema (messages: {known})")
    messages = list(fd.message_types_by_name.values())
    if not messages:
        raise ConfigError("the .proto schema defines no message")
    path = tuple(path or (0,))
    nodes = messages
    node = None
    for depth, i in enumerate(path):
        if not 0 <= i < len(nodes):
            raise ConfigError(
                f"message index {list(path)}: there is no message {i} at "
                f"depth {depth} of the .proto schema"
            )
        node = nodes[i]
        nodes = list(node.nested_types)
    return node
