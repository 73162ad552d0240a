"""The library's source files, for the tests that read them (layering, logging, retries,
bounded caches, versions)."""

from __future__ import annotations

import os

from protocol.version import MODULES, RUNTIME_PACKAGES

#: The checkout's root.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIBRARY = RUNTIME_PACKAGES + tuple(f"{m}.py" for m in MODULES)


def library_sources():
    for entry in LIBRARY:
        path = os.path.join(ROOT, entry)
        if os.path.isfile(path):
            yield path
            continue
        for dirpath, _, filenames in os.walk(path):
            for name in sorted(filenames):
                if name.endswith(".py"):
                    yield os.path.join(dirpath, name)
