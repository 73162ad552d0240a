"""The library's import graph has layers: each module imports only downward.

Checked on the source (every ``import``, also those inside functions): no two library
modules import each other, directly or through others, and the packages keep their order
``protocol`` < ``kafka_common`` < ``kafka_sink`` / ``kafka_source`` < ``pyspark_pykafka``,
with the sink and the source independent of each other: the data source
(``pyspark_pykafka.datasource``), above both, hands out the readers and the writers.
"""

from __future__ import annotations

import ast
import os

from tests.helpers.library import ROOT, library_sources

# The packages each package may import (besides itself).
ALLOWED = {
    "protocol": set(),
    "kafka_common": {"protocol"},
    "kafka_sink": {"protocol", "kafka_common"},
    "kafka_source": {"protocol", "kafka_common"},
    "pyspark_pykafka": {"protocol", "kafka_common", "kafka_source", "kafka_sink"},
}


def _module_name(path: str) -> str:
    rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
    return rel[: -len(".__init__")] if rel.endswith(".__init__") else rel


def _imports(path: str, module: str) -> set[str]:
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    is_package = path.endswith("__init__.py")
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            found.add(target)
            # ``from . import x`` / ``from .pkg import mod``: x may itself be a module.
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def _graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in library_sources()}
    graph = {}
    for module, path in paths.items():
        graph[module] = {m for m in _imports(path, module) if m in paths and m != module}
    return graph


def test_packages_import_only_the_layers_below_them():
    offenders = []
    for module, targets in _graph().items():
        package = module.split(".")[0]
        for target in targets:
            other = target.split(".")[0]
            if other == package or other in ALLOWED[package]:
                continue
            offenders.append(f"{module} imports {target}")
    assert not offenders, offenders


def test_no_import_cycles_between_library_modules():
    graph = _graph()
    # A package's __init__ re-exports its modules; an edge into a package from inside it
    # is not a layering question, so leave package-to-own-module edges out.
    edges = {
        m: {t for t in ts if not (m == t.split(".")[0] or t == m.rsplit(".", 1)[0])}
        for m, ts in graph.items()
    }
    state: dict[str, int] = {}
    cycles = []

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [])
    assert not cycles, cycles


def test_the_reader_s_value_types_import_no_other_reader_module():
    graph = _graph()
    assert not {t for t in graph["kafka_source.offset_specs"] if t.startswith("kafka_source")}
    assert "kafka_source.planning" not in graph["kafka_source.options"]
    assert "kafka_source.planning" not in graph["kafka_source.pushdown"]


def test_the_planner_side_of_the_source_loads_no_decoder():
    """Spark starts a fresh Python process to plan each streaming query (and plans batch
    reads in one): the source's planning modules import neither the record decoders nor
    pyarrow or the crc32c package (whose import scans sys.path); only a task's read does."""
    import subprocess
    import sys

    code = (
        "import sys, kafka_source.stream_reader, kafka_source.batch_reader; "
        "print(sorted(m for m in ('protocol.records', 'pyarrow', 'crc32c') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stderr


# The sans-IO half of ``protocol`` (everything outside ``protocol/client/``): no socket, no
# thread, no clock, and nothing of the client. The clocks: a record written without a
# timestamp gets the time it is encoded at, as Kafka's producer stamps it; and the one
# retry policy counts and waits out its backoffs, shared by the Kafka client and the HTTP
# clients (Schema Registry, token endpoints), so it imports neither.
_IO_MODULES = {"socket", "select", "selectors", "ssl", "threading", "time", "asyncio"}
_CLOCK_ALLOWED = {"protocol.records.row_source": {"time"}, "protocol.retry": {"time"}}


def test_the_protocol_core_is_sans_io():
    paths = {_module_name(p): p for p in library_sources()}
    offenders = []
    for module, path in sorted(paths.items()):
        if not module.startswith("protocol.") or module.startswith("protocol.client"):
            continue
        for target in _imports(path, module):
            top = target.split(".")[0]
            if target.startswith("protocol.client"):
                offenders.append(f"{module} imports {target}")
            elif top in _IO_MODULES and top not in _CLOCK_ALLOWED.get(module, ()):
                offenders.append(f"{module} imports {top}")
    assert not offenders, offenders
    assert "protocol.client.connection" in paths  # the client half is where it should be


def test_only_the_connection_module_touches_sockets():
    paths = {_module_name(p): p for p in library_sources()}
    users = sorted(
        module
        for module, path in paths.items()
        if {t.split(".")[0] for t in _imports(path, module)} & {"socket", "select", "selectors"}
    )
    assert users == ["protocol.client.connection"], users


# ---- docs/architecture.md and the tree agree -----------------------------------------------

_WINGS = (
    "pyspark_pykafka",
    "kafka_source",
    "kafka_sink",
    "kafka_common",
    "kafka_common/value_formats",
    "protocol",
    "protocol/client",
)


def test_the_architecture_page_names_every_module_of_every_wing_and_no_other():
    import re

    with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as f:
        page = f.read()
    named = set(re.findall(r"\b([a-z_]+\.py)\b", page))
    missing = []
    present = set()
    for wing in _WINGS:
        folder = os.path.join(ROOT, wing)
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if name.endswith(".py") and name != "__init__.py":
                present.add(name)
                if name not in named:
                    missing.append(f"{wing}/{name}")
            elif os.path.isfile(os.path.join(path, "__init__.py")):
                if f"{name}/" not in page:
                    missing.append(f"{wing}/{name}/")
    assert not missing, f"modules docs/architecture.md does not place: {missing}"
    everywhere = {
        n
        for top in (
            "pyspark_pykafka",
            "kafka_source",
            "kafka_sink",
            "kafka_common",
            "protocol",
            "kafka_testbed",
            "tests",
            "scripts",
        )
        for _, _, files in os.walk(os.path.join(ROOT, top))
        for n in files
        if n.endswith(".py")
    }
    assert not named - everywhere, f"the page names modules that do not exist: {named - everywhere}"


def test_tests_import_helpers_and_never_another_test_module():
    """The tests' top level holds test modules only (with conftest.py); what they share
    lives in ``tests/helpers/`` (fixtures in conftest.py), so no test module or helper
    imports a test module."""
    tests_dir = os.path.join(ROOT, "tests")
    top = sorted(f for f in os.listdir(tests_dir) if f.endswith(".py"))
    assert [f for f in top if not f.startswith("test_")] == ["__init__.py", "conftest.py"]
    offenders = []
    for folder, _, files in os.walk(tests_dir):
        for name in (f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            for imported in _imports(path, _module_name(path)):
                if imported.rsplit(".", 1)[-1].startswith("test_"):
                    offenders.append(f"{os.path.relpath(path, ROOT)} imports {imported}")
    assert offenders == []
