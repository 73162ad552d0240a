"""The product carries no test hooks: tests inject their faults from outside (a proxy, a
fake connection, a fake clock, or ``tests.helpers.point_patches`` wrapping the sink's own
functions), never through points or variables the product checks for them."""

from __future__ import annotations

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("protocol", "kafka_common", "kafka_source", "kafka_sink", "pyspark_pykafka")
#: What only a test hook would name.
MARKS = ("hook_points", "PYKAFKA_TEST_", "kill_points", "point_patches", "tests.helpers")
SOURCES = (".py", ".pyx", ".c", ".h")


def _product_files():
    for package in PACKAGES:
        for directory, dirs, files in os.walk(os.path.join(ROOT, package)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                if name.endswith(SOURCES):
                    yield os.path.join(directory, name)


def _mentions(path: str) -> list[str]:
    with open(path, encoding="utf-8", errors="replace") as f:
        return [
            f"{os.path.relpath(path, ROOT)}:{number}: {line.strip()}"
            for number, line in enumerate(f, 1)
            if any(mark in line for mark in MARKS)
        ]


def test_product_modules_mention_no_test_hook():
    files = list(_product_files())
    assert len(files) > 50  # the packages were found
    found = [hit for path in files for hit in _mentions(path)]
    assert found == [], "test hooks in product code:\n" + "\n".join(found)


def test_the_guard_sees_a_hook(tmp_path):
    """``_mentions`` flags the lines a hook leaves (so the guard above can fail)."""
    module = tmp_path / "module.py"
    module.write_text("import os\nfrom .hook_points import reached\nos.environ['PYKAFKA_TEST_X']\n")
    assert [hit.split(": ", 1)[1] for hit in _mentions(str(module))] == [
        "from .hook_points import reached",
        "os.environ['PYKAFKA_TEST_X']",
    ]
