"""The per-process caches are bounded (issue 33: caches that never shrink): a Python worker
lives as long as its executor, and a cache keyed by schema, option set or credentials grew
with everything a long-lived cluster ever met."""

from __future__ import annotations

import ast
import os
import threading

import pytest

from kafka_common.bounded_cache import BoundedCache
from tests.helpers.library import ROOT, library_sources

# Module-level maps that are tables of a fixed size, not caches: Kafka's error codes, the
# compression modules, the connector's own zip on the import path, the row layouts of the
# schemas' all-fixed-width structs (one per struct and version of our own schemas).
FIXED_SIZE = {
    ("protocol/errors.py", "_BY_CODE"),
    ("protocol/records/compression.py", "_MODULES"),
    ("kafka_common/import_path.py", "_ZIPS"),
    ("protocol/schema_fast_reads.py", "FIXED_ROWS"),
}


def test_the_least_recently_used_entry_goes_first():
    cache: BoundedCache[str, int] = BoundedCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" used: "b" is now the oldest
    cache.put("c", 3)
    assert len(cache) == 2 and cache.get("b") is None
    assert cache.get("a") == 1 and cache.get("c") == 3
    assert cache.get_or_make("d", lambda: 4) == 4 and len(cache) == 2
    with pytest.raises(ValueError):
        BoundedCache(0)


def test_threads_never_push_it_past_its_limit():
    cache: BoundedCache[int, int] = BoundedCache(50)

    def fill(base: int) -> None:
        for i in range(2000):
            cache.get_or_make(base + i, lambda i=i: i)

    threads = [threading.Thread(target=fill, args=(n * 10_000,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache) == 50


def _module_level_empty_maps(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    names = []
    for node in tree.body:
        value = getattr(node, "value", None)
        empty_literal = isinstance(value, ast.Dict) and not value.keys
        empty_call = (
            isinstance(value, ast.Call)
            and not value.args
            and isinstance(value.func, ast.Name)
            and value.func.id in ("dict", "OrderedDict", "defaultdict")
        )
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and (empty_literal or empty_call):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            names.append(ast.unparse(target))
    return names


def test_no_module_keeps_a_map_that_only_grows():
    found = {
        (os.path.relpath(p, ROOT).replace(os.sep, "/"), name)
        for p in library_sources()
        for name in _module_level_empty_maps(p)
    }
    assert found == FIXED_SIZE, found - FIXED_SIZE


def test_the_registry_client_forgets_the_least_used_schemas(monkeypatch):
    import json

    from kafka_common.schema_registry import client as registry_client
    from kafka_common.schema_registry.settings import RegistrySettings
    from kafka_testbed.schema_registry import RegistryServer

    monkeypatch.setattr(registry_client, "SCHEMAS_MAX", 3)
    server = RegistryServer().start()
    try:
        ids = [
            server.register(
                f"s{i}-value",
                {"schema": json.dumps({"type": "record", "name": f"R{i}", "fields": []})},
            )["id"]
            for i in range(6)
        ]
        client = registry_client.RegistryClient(RegistrySettings(urls=(server.url,)))
        for schema_id in ids:
            client.schema_by_id(schema_id)
        server.reset_calls()
        client.schema_by_id(ids[-1])  # among the last three: still known
        assert server.calls() == []
        client.schema_by_id(ids[0])  # the first: forgotten, asked again
        assert len(server.calls("/schemas/ids")) == 1
        assert len(client._by_id) == 3
    finally:
        server.stop()
