"""Rooms of a size: no product module over 500 lines, no function over 80, counted as
``wc -l`` counts (every line: code, blank, comment and docstring; a function from its first
decorator to its last line), and no module docstring over 25 lines (what the module is for
and why; its history is in the changelog and the commits). No exceptions."""

from __future__ import annotations

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = (
    "pyspark_pykafka",
    "protocol",
    "kafka_common",
    "kafka_source",
    "kafka_sink",
    "kafka_testbed",
)
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
MAX_DOCSTRING_LINES = 25


def _product_files() -> list[str]:
    files: list[str] = []
    for package in PACKAGES:
        for folder, _, names in os.walk(os.path.join(ROOT, package)):
            files += [
                os.path.relpath(os.path.join(folder, n), ROOT) for n in names if n.endswith(".py")
            ]
    return sorted(f.replace(os.sep, "/") for f in files)


def _read(rel: str) -> str:
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def lines_of(text: str) -> int:
    """What ``wc -l`` says of ``text``: its newlines."""
    return text.count("\n")


def function_lines(tree: ast.AST) -> dict[str, int]:
    """Each function's lines, from its first decorator to its last line (the longest of a
    name defined more than once)."""
    out: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            size = (node.end_lineno or node.lineno) - first + 1
            out[node.name] = max(out.get(node.name, 0), size)
    return out


def docstring_lines(tree: ast.Module) -> int:
    first = tree.body[0] if tree.body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return (first.end_lineno or first.lineno) - first.lineno + 1
    return 0


def test_no_module_is_over_500_lines():
    long = {rel: n for rel in _product_files() if (n := lines_of(_read(rel))) > MAX_MODULE_LINES}
    assert not long, long


def test_no_function_is_over_80_lines():
    long = {
        f"{rel}:{name}": n
        for rel in _product_files()
        for name, n in function_lines(ast.parse(_read(rel))).items()
        if n > MAX_FUNCTION_LINES
    }
    assert not long, long


def test_no_module_docstring_is_over_25_lines():
    long = {
        rel: n
        for rel in _product_files()
        if (n := docstring_lines(ast.parse(_read(rel)))) > MAX_DOCSTRING_LINES
    }
    assert not long, long


def test_the_counts_are_wc_s():
    """The counting itself: a module of 501 newlines is over, blank lines and docstrings
    count, and a decorated function counts from its decorator."""
    assert lines_of("x = 1\n" + "\n" * 500) == 501
    body = "\n".join(["@decorator", "def f():", '    """doc', "", '    """', *["    x = 1"] * 76])
    assert function_lines(ast.parse(body.replace("@decorator\n", "@d\n")))["f"] == 81
    assert docstring_lines(ast.parse('"""a\n' + "b\n" * 25 + '"""\n')) == 27
