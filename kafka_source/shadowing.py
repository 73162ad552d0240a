"""Whether the connector's sibling packages are its own, not a user's file of the same name.

pyspark-pykafka installs the top-level import names ``pyspark_pykafka``, ``kafka_source``,
``kafka_sink``, ``kafka_common``, ``protocol`` and ``kafka_testbed``. Two of them are
generic: a ``protocol.py`` (or ``kafka_common.py``) beside a job comes first on the job's
``sys.path`` and shadows ours, and the connector then broke with a confusing
``No module named 'protocol.errors'; 'protocol' is not a package``. ``check_own_modules``
runs when ``kafka_source`` is first imported (by ``format("pykafka")``, on the driver and in
every Python worker), imports nothing of the connector, and names the file that shadows.

Renaming the packages would break every job that imports them; detecting is enough.
"""

from __future__ import annotations

import importlib.util
import os
import sys

__all__ = ["INSTALLED_NAMES", "check_own_modules", "ShadowedModuleError"]

#: The top-level import names the package installs: a copy of ``protocol.version``'s, as
#: this module imports nothing of the connector (tests/test_package.py compares the two).
INSTALLED_NAMES = (
    "pyspark_pykafka",
    "kafka_source",
    "kafka_sink",
    "kafka_common",
    "protocol",
    "kafka_testbed",
)
#: The packages ``kafka_source`` imports, checked before it imports them.
_SIBLINGS = ("protocol", "kafka_common", "kafka_sink")


class ShadowedModuleError(ImportError):
    """A module of the user's has the name of one of the connector's packages."""


def _where(spec) -> str | None:
    """The file a spec loads from, or None when it has no place on disk (a namespace
    package, the connector's in-memory zip finder)."""
    origin = getattr(spec, "origin", None)
    if not origin or not getattr(spec, "has_location", False):
        return None
    return origin


def _root_of(spec) -> str | None:
    """The directory (or zip) holding a package's directory, or a module's file."""
    where = _where(spec)
    if where is None:
        return None
    holder = os.path.dirname(where)
    if spec.submodule_search_locations is not None:  # a package: <root>/<name>/__init__.py
        holder = os.path.dirname(holder)
    return os.path.realpath(holder)


def _found(name: str):
    module = sys.modules.get(name)
    if module is not None:
        return getattr(module, "__spec__", None)
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def check_own_modules(own_spec) -> None:
    """Raise ``ShadowedModuleError`` when ``protocol``, ``kafka_common`` or ``kafka_sink``
    would come from somewhere other than where ``own_spec`` (``kafka_source``'s) came from:
    a file of the user's with that name, earlier on ``sys.path``."""
    ours = _root_of(own_spec)
    if ours is None:  # loaded from memory (a zip's bytes): its finder serves every package
        return
    for name in _SIBLINGS:
        spec = _found(name)
        where = _where(spec)
        if spec is None or where is None:
            continue
        if _root_of(spec) == ours:
            continue
        raise ShadowedModuleError(
            f"pyspark-pykafka cannot use its '{name}' package: '{name}' is imported from "
            f"{where}, which is not part of pyspark-pykafka (installed in {ours}) and comes "
            f"first on sys.path. Rename that file (pyspark-pykafka installs the top-level "
            f"names {', '.join(INSTALLED_NAMES)}), or move it off the job's path.",
            name=name,
            path=where,
        )
