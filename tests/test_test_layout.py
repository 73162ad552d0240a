"""The tests' own layering: what test modules share lives in tests/helpers (or in the
modules beside them that are not tests: broker set-ups, proxies, stand-in brokers), so no
module under tests/ imports a ``test_*`` module, and each test file can be moved, split or
run alone without breaking another."""

from __future__ import annotations

import ast
import os

TESTS = os.path.dirname(os.path.abspath(__file__))


def _python_files():
    for dirpath, dirnames, filenames in os.walk(TESTS):
        dirnames[:] = [d for d in dirnames if d not in ("__pycache__", "data", "java")]
        for name in filenames:
            if name.endswith(".py"):
                yield os.path.join(dirpath, name)


def _imported_modules(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            yield module
            yield from (f"{module}.{alias.name}" if module else alias.name for alias in node.names)


def test_no_module_imports_a_test_module():
    offenders = []
    for path in _python_files():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for module in _imported_modules(tree):
            if any(part.startswith("test_") for part in module.split(".")):
                offenders.append(f"{os.path.relpath(path, TESTS)} imports {module}")
    assert not offenders, offenders
