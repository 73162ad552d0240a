"""Library code logs through ``pykafka.*`` loggers and never prints: checked on the source
(what the logs may hold is checked in ``tests/test_security.py``)."""

from __future__ import annotations

import ast
import os
from .helpers.library import ROOT, library_sources


def test_library_code_never_prints():
    offenders = []
    for path in library_sources():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "print"
            ):
                offenders.append(f"{os.path.relpath(path, ROOT)}:{node.lineno}")
    assert offenders == []


def test_library_loggers_are_named_pykafka():
    """Every ``logging.getLogger(...)`` names a ``pykafka``-prefixed logger, and nothing
    logs through the root logger (``logging.info(...)`` and friends)."""
    names, root_calls = [], []
    for path in library_sources():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "logging"
            ):
                continue
            where = f"{os.path.relpath(path, ROOT)}:{node.lineno}"
            if node.func.attr == "getLogger":
                arg = node.args[0] if node.args else None
                names.append((where, arg.value if isinstance(arg, ast.Constant) else None))
            elif node.func.attr in (
                "debug",
                "info",
                "warning",
                "error",
                "exception",
                "critical",
                "log",
            ):
                root_calls.append(where)
    assert names, "no loggers found"
    assert [
        n
        for n in names
        if not (isinstance(n[1], str) and (n[1] == "pykafka" or n[1].startswith("pykafka.")))
    ] == []
    assert root_calls == []
