"""The compiled record decoder and encoder out of the ``--py-files`` zip.

Python cannot load a shared object from inside a zip. ``scripts/build_pyfiles_zip.py`` puts
``_fastdecode`` and ``_fastencode`` in ``protocol/records/_compiled/`` with a ``manifest.json``
(file name, SHA-256, cache tag, ``EXT_SUFFIX``, platform of each). When this package comes
from such a zip and the installed extensions failed to import, ``load`` (from ``accel.py``):

1. reads the manifest from the zip (through the zip importer's ``get_data``);
2. takes the extensions only when their suffix is one of this interpreter's
   ``importlib.machinery.EXTENSION_SUFFIXES`` and their cache tag is its own;
3. extracts each to ``<cache>/<its SHA-256>/<its file name>``, where ``<cache>`` is
   ``$PYKAFKA_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/pyspark-pykafka`` or
   ``~/.cache/pyspark-pykafka``, or ``<tempdir>/pyspark-pykafka-<uid>`` when those cannot be
   created; each directory is created with mode 0o700 and refused when it is not a
   directory of its own (a symlink), not owned by this uid, or writable by group or others;
   a file is written under a temporary name in its directory and ``os.replace``d into
   place, so the Spark workers that start at once and race each see a whole file;
4. checks the SHA-256 of the file in the cache against the manifest right before loading
   it (a file already there with another hash is written again, never loaded), and loads
   it with ``ExtensionFileLoader`` under its real name (``protocol.records._fastdecode``).

Anything else (no manifest, another Python, a hash that does not match, a cache that
cannot be written or is not private, an import error) answers None after one
``logging`` debug line saying why, and the pure-Python path runs: ``load`` never raises.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import sys
import tempfile

log = logging.getLogger("pykafka.protocol.records")

COMPILED_DIR = "_compiled"
MANIFEST_NAME = "manifest.json"
NAMES = ("_fastdecode", "_fastencode")


class _Refused(Exception):
    """Why the zip's extensions are not used (the debug line's text)."""


def load(package: str, module_file: str | None, loader) -> dict | None:
    """``{name: module}`` of ``NAMES`` loaded from the zip that ``package`` (e.g.
    ``"protocol.records"``, whose module ``module_file`` was loaded by ``loader``) was
    imported from, or None (and one debug line) when they cannot be used."""
    try:
        return _load(package, module_file, loader)
    except _Refused as exc:
        log.debug("pyspark-pykafka: pure-Python record decoder and encoder: %s", exc)
    except Exception as exc:  # noqa: BLE001 - never fail an import over an optimisation
        log.debug(
            "pyspark-pykafka: pure-Python record decoder and encoder: loading the "
            "zip's compiled extensions failed: %s: %s",
            type(exc).__name__,
            exc,
        )
    return None


def _load(package: str, module_file: str | None, loader) -> dict:
    archive, inner, read = _zip_of(module_file, loader)
    try:
        manifest = json.loads(read(f"{inner}/{COMPILED_DIR}/{MANIFEST_NAME}"))
    except (OSError, KeyError):
        raise _Refused(
            f"the zip {archive} has no {inner}/{COMPILED_DIR}/{MANIFEST_NAME} "
            "(built without a C compiler, or with --pure)"
        ) from None
    entries = _check_manifest(manifest, package)
    root = _cache_root()
    paths = {}
    for name in NAMES:
        entry = entries[name]
        directory = _private_dir(os.path.join(root, entry["sha256"]))
        paths[name] = _extract(
            directory, entry, lambda e=entry: read(f"{inner}/{COMPILED_DIR}/{e['file']}")
        )
    return _import(package, paths)


def _zip_of(module_file: str | None, loader):
    """``(archive, directory of the module inside it, read(name inside the archive))``."""
    import zipimport

    if not module_file or not os.path.isabs(module_file):
        raise _Refused("the extensions are not built and this package was not imported from a zip")
    if isinstance(loader, zipimport.zipimporter):
        archive = loader.archive

        def read(name: str) -> bytes:
            return loader.get_data(os.path.join(archive, *name.split("/")))
    else:  # another loader of a file inside a zip
        archive = os.path.dirname(module_file)
        while not os.path.isfile(archive):
            parent = os.path.dirname(archive)
            if parent == archive:
                raise _Refused(
                    "the extensions are not built and this package was not imported from a zip"
                )
            archive = parent
        import zipfile

        if not zipfile.is_zipfile(archive):
            raise _Refused(f"{archive}, which this package was imported from, is not a zip")

        def read(name: str) -> bytes:
            with zipfile.ZipFile(archive) as zf:
                return zf.read(name)

    if not module_file.startswith(archive + os.sep):
        raise _Refused(f"{module_file} is not inside {archive}")
    inner = os.path.dirname(module_file[len(archive) + 1 :]).replace(os.sep, "/")
    return archive, inner, read


def _check_manifest(manifest, package: str) -> dict:
    """The manifest's entry for each of ``NAMES``, once they are known to suit this
    Python."""
    from importlib.machinery import EXTENSION_SUFFIXES

    try:
        entries = {name: manifest["extensions"][name] for name in NAMES}
    except (KeyError, TypeError):
        raise _Refused(f"the zip's manifest does not list {', '.join(NAMES)}") from None
    tag = sys.implementation.cache_tag
    for name, entry in entries.items():
        if not isinstance(entry, dict):
            raise _Refused(f"the zip's manifest entry for {name} is not an object")
        file, suffix, sha = entry.get("file"), entry.get("ext_suffix"), entry.get("sha256")
        if entry.get("module") != f"{package}.{name}":
            raise _Refused(
                f"the zip's manifest names {entry.get('module')!r}, not {package}.{name}"
            )
        if suffix not in EXTENSION_SUFFIXES or entry.get("cache_tag") != tag:
            raise _Refused(
                f"the zip's extensions were built for {entry.get('cache_tag')} "
                f"({suffix}, {entry.get('platform')}); this Python is {tag} "
                f"({', '.join(EXTENSION_SUFFIXES)})"
            )
        if (
            not isinstance(file, str)
            or file != os.path.basename(file)
            or not file.startswith(name + ".")
            or not file.endswith(suffix)
        ):
            raise _Refused(f"the zip's manifest names the file {file!r} for {name}")
        if not isinstance(sha, str) or len(sha) != 64 or sha.strip("0123456789abcdef"):
            raise _Refused(f"the zip's manifest gives {name} no SHA-256")
    return entries


def _cache_root() -> str:
    """The private directory the extensions are extracted under (created)."""
    explicit = os.environ.get("PYKAFKA_CACHE_DIR")
    if explicit:
        candidates = [os.path.abspath(explicit)]
    else:
        base = os.environ.get("XDG_CACHE_HOME", "")
        if not os.path.isabs(base):
            home = os.path.expanduser("~")
            base = os.path.join(home, ".cache") if os.path.isabs(home) else ""
        uid = getattr(os, "getuid", lambda: None)()
        candidates = [os.path.join(base, "pyspark-pykafka")] if base else []
        candidates.append(
            os.path.join(
                tempfile.gettempdir(), "pyspark-pykafka" + ("" if uid is None else f"-{uid}")
            )
        )
    errors = []
    for path in candidates:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            return _private_dir(path)
        except OSError as exc:  # cannot be created here (read-only home): the next one
            errors.append(f"{path}: {exc.strerror or exc}")
    raise _Refused("no cache directory can be created (" + "; ".join(errors) + ")")


def _private_dir(path: str) -> str:
    """``path``, created with mode 0o700 if missing; refused unless it is a directory
    (not a symlink) owned by this uid and not writable by group or others."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise _Refused(f"the cache directory {path} is not a directory (a symlink?)")
    uid = getattr(os, "getuid", lambda: None)()
    if uid is not None:
        if st.st_uid != uid:
            raise _Refused(
                f"the cache directory {path} is owned by uid {st.st_uid}, not "
                f"by this process's uid {uid}"
            )
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise _Refused(
                f"the cache directory {path} is writable by group or others "
                f"(mode {stat.S_IMODE(st.st_mode):o})"
            )
    return path


def _sha256_of(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def _extract(directory: str, entry: dict, read) -> str:
    """The path of ``entry``'s file in ``directory``, written from ``read()`` unless a file
    with the manifest's SHA-256 is there already; its hash checked once more."""
    target = os.path.join(directory, entry["file"])
    if _sha256_of(target) == entry["sha256"]:
        return target
    data = read()
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise _Refused(f"the zip's {entry['file']} does not match the SHA-256 of its manifest")
    fd, tmp = tempfile.mkstemp(prefix=f".{entry['file']}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o700)
        os.replace(tmp, target)  # atomic: a racing worker sees the old file or this one
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    if _sha256_of(target) != entry["sha256"]:  # replaced meanwhile by other bytes
        raise _Refused(f"{target} does not match the SHA-256 of the zip's manifest")
    return target


def _import(package: str, paths: dict) -> dict:
    """Each ``{name: path}`` loaded as the extension module ``package.name``."""
    from importlib.machinery import ExtensionFileLoader
    from importlib.util import module_from_spec, spec_from_file_location

    modules = {}
    try:
        for name, path in paths.items():
            fullname = f"{package}.{name}"
            spec = spec_from_file_location(
                fullname, path, loader=ExtensionFileLoader(fullname, path)
            )
            module = module_from_spec(spec)  # type: ignore[arg-type]  # a path: a spec
            sys.modules[fullname] = module
            modules[name] = module
            spec.loader.exec_module(module)  # type: ignore[union-attr]  # the loader given
    except BaseException:
        for name in modules:
            sys.modules.pop(f"{package}.{name}", None)
        raise
    parent = sys.modules.get(package)
    for name, module in modules.items():
        if parent is not None:
            setattr(parent, name, module)
    return modules
