"""Build ``dist/pyspark_pykafka-<version>.zip`` for ``spark-submit --py-files``.

    python scripts/build_pyfiles_zip.py [--out-dir dist]

The zip holds the library and nothing else: ``pyspark_pykafka.py`` (Spark's automatic
registration hook) and the packages ``protocol``, ``kafka_common``, ``kafka_source`` and
``kafka_sink``, as source files at the root of the archive, so Python's zip importer finds
them once the zip is on ``sys.path`` (which is what ``--py-files`` does, on the driver and every executor).
Tests and the embedded test brokers (``kafka_testbed``) are left out.

Beside every ``pkg/mod.py`` sits its byte-code, ``pkg/mod.pyc``, for the Python that runs
this script. The zip importer writes no byte-code caches, so without it every new Python
process Spark starts compiles each module of ours it imports (~0.3 s for
``kafka_sink.writer``); build the zip with the executors' Python version. zipimport tries
``mod.pyc`` first and skips one whose magic number is another version's, compiling
``mod.py``. They are PEP 552 unchecked-hash files (a timestamp one would be compared with
the fixed entry date below), compiled under their path inside the zip, which tracebacks
show with the source lines the zip importer serves.

The archive is reproducible: entries are sorted and carry a fixed timestamp, and the byte-code
depends on the sources and the building Python's version alone, so the same sources built by the
same Python version always give the same bytes. The version is read from ``protocol/version.py``.
The third-party dependencies (pyarrow, numpy, crc32c, lz4, zstandard, cramjam) are not
in the zip: they have compiled parts and must be installed on every node.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import marshal
import os
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULES = ("pyspark_pykafka.py",)
PACKAGES = ("protocol", "kafka_common", "kafka_source", "kafka_sink")
# 1980-01-01, the earliest time a zip entry can carry: same input, same archive.
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)
# PEP 552 flags of a .pyc: bit 0 "validated by a hash of the source, not its mtime", bit 1
# (left unset) "check that hash on import": unchecked, the zip's .py and .pyc come together.
_UNCHECKED_HASH_PYC = 0b01


def project_version(root: str = ROOT) -> str:
    """``__version__`` of ``protocol/version.py``, the one place the version is written
    (read without importing the package, which needs its dependencies)."""
    path = os.path.join(root, "protocol", "version.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and getattr(node.targets[0], "id", None) == "__version__"):
            return ast.literal_eval(node.value)
    raise SystemExit(f"no __version__ in {path}")


def library_files(root: str = ROOT) -> list[str]:
    """The paths (relative to ``root``, with ``/``) of every file that goes in the zip."""
    files = [m for m in MODULES if os.path.isfile(os.path.join(root, m))]
    for package in PACKAGES:
        if not os.path.isfile(os.path.join(root, package, "__init__.py")):
            raise SystemExit(f"{package}/__init__.py is missing: not a package checkout?")
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, package)):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            if "__init__.py" not in filenames:  # not a package: nothing importable
                dirnames[:] = []
                continue
            for name in filenames:
                if name.endswith(".py"):
                    rel = os.path.relpath(os.path.join(dirpath, name), root)
                    files.append(rel.replace(os.sep, "/"))
    return sorted(files)


def byte_code(rel: str, source: bytes) -> bytes:
    """The ``.pyc`` of ``source`` (the zip's ``rel``) that zipimport loads beside it: this
    Python's magic number, unchecked-hash flags, the source's hash and the marshalled code.

    Compiled as zipimport compiles a source (``dont_inherit``), without optimization whatever
    flags run this script, and named ``rel``: the archive's own path is not known here."""
    code = compile(source, rel, "exec", dont_inherit=True, optimize=0)
    return (importlib.util.MAGIC_NUMBER + _UNCHECKED_HASH_PYC.to_bytes(4, "little")
            + importlib.util.source_hash(source) + marshal.dumps(code))


def archive_entries(root: str = ROOT) -> list[tuple[str, bytes]]:
    """``(name, bytes)`` of every entry of the zip, sorted by name: each source file and,
    right after it, its byte-code."""
    entries = []
    for rel in library_files(root):
        with open(os.path.join(root, rel), "rb") as f:
            source = f.read()
        entries += [(rel, source), (rel + "c", byte_code(rel, source))]
    return sorted(entries)


def build(out_dir: str, root: str = ROOT) -> str:
    """Write the zip into ``out_dir`` and return its path."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"pyspark_pykafka-{project_version(root)}.zip")
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in archive_entries(root):
            info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    os.replace(tmp, path)
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default=os.path.join(ROOT, "dist"))
    args = parser.parse_args(argv)
    path = build(args.out_dir)
    with zipfile.ZipFile(path) as zf:
        count = len(zf.namelist())
    print(f"{os.path.relpath(path)}: {count} files", file=sys.stderr)
    print(path)


if __name__ == "__main__":
    main()
