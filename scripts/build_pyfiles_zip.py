"""Build ``dist/pyspark_pykafka-<version>.zip`` for ``spark-submit --py-files``.

    python scripts/build_pyfiles_zip.py [--out-dir dist] [--pure]

The zip holds the library and nothing else: ``pyspark_pykafka`` (the data source and
Spark's automatic registration hook) and the packages ``protocol``, ``kafka_common``,
``kafka_source`` and
``kafka_sink``, as source files at the root of the archive, so Python's zip importer finds
them once the zip is on ``sys.path`` (which is what ``--py-files`` does, on the driver and
every executor).
Tests and the embedded test brokers (``kafka_testbed``) are left out.

Beside every ``pkg/mod.py`` sits its byte-code, ``pkg/mod.pyc``, for the Python that runs
this script. The zip importer writes no byte-code caches, so without it every new Python
process Spark starts compiles each module of ours it imports (~0.3 s for
``kafka_sink.writer``); build the zip with the executors' Python version. zipimport tries
``mod.pyc`` first and skips one whose magic number is another version's, compiling
``mod.py``. They are PEP 552 unchecked-hash files (a timestamp one would be compared with
the fixed entry date below), compiled under their path inside the zip, which tracebacks
show with the source lines the zip importer serves.

The zip also carries the two optional C extensions of ``protocol/records`` (the record
decoder ``_fastdecode`` and encoder ``_fastencode``), compiled here for the Python that runs
this script as ``setup.py`` compiles them (setuptools' ``build_ext``, ``-O2``; plus ``-g0``:
no debug information, which would also record the checkout's path), in
``protocol/records/_compiled/`` under their ``EXT_SUFFIX`` names, with
``protocol/records/_compiled/manifest.json`` giving for each its file name, SHA-256, the
building Python's ``sys.implementation.cache_tag`` and ``EXT_SUFFIX``, and the platform.
Python cannot load a shared object from a zip: ``protocol/records/accel.py`` (through
``zip_extensions.py``) extracts them to a private cache directory and loads them when the
running Python's extension suffixes take them, and otherwise runs the pure-Python path, as
everywhere without them. Without a C compiler (or Python's headers, or setuptools) this
script warns and builds the zip without them; ``--pure`` leaves them out on purpose.

The archive is reproducible: entries are sorted and carry a fixed timestamp, and the byte-code
depends on the sources and the building Python's version alone, so the same sources built by the
same Python version always give the same bytes; the compiled extensions depend on the building
compiler (and its version and the building Python's compile flags) too, so the same sources,
Python and compiler give the same zip. The version is read from ``protocol/version.py``.
The third-party dependencies (pyarrow, numpy, crc32c, lz4, zstandard, cramjam) are not
in the zip: they have compiled parts and must be installed on every node.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.util
import json
import marshal
import os
import runpy
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# protocol/version.py, run by path: the package itself needs its dependencies.
_NAMES = runpy.run_path(os.path.join(ROOT, "protocol", "version.py"))
# The files and packages the zip carries (protocol/version.py names them).
MODULES = tuple(f"{m}.py" for m in _NAMES["MODULES"])
PACKAGES = _NAMES["RUNTIME_PACKAGES"]
# 1980-01-01, the earliest time a zip entry can carry: same input, same archive.
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)
# PEP 552 flags of a .pyc: bit 0 "validated by a hash of the source, not its mtime", bit 1
# (left unset) "check that hash on import": unchecked, the zip's .py and .pyc come together.
_UNCHECKED_HASH_PYC = 0b01
# The optional C extensions (setup.py's ext_modules), and where the zip carries them.
EXTENSIONS = ("_fastdecode", "_fastencode")
EXTENSION_PACKAGE = "protocol.records"
COMPILED_DIR = "protocol/records/_compiled"
MANIFEST = COMPILED_DIR + "/manifest.json"
# Run by this Python, in the checkout: setup.py's Extension definitions (optional=False:
# here a failure must be seen), built by setuptools' build_ext into argv[1].
_BUILD_EXT = textwrap.dedent("""
    import os, sys
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext
    out, names, package = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
    flags = ["-O2"] + (["-g0"] if os.name != "nt" else [])
    modules = [Extension(f"{package}.{name}", [f"{package.replace('.', '/')}/{name}.c"],
                         extra_compile_args=flags) for name in names]
    dist = Distribution({"name": "pyspark-pykafka-pyfiles", "script_name": "setup.py",
                         "ext_modules": modules})
    command = build_ext(dist)
    command.build_lib = os.path.join(out, "lib")
    command.build_temp = os.path.join(out, "temp")
    command.ensure_finalized()
    command.run()
    for module, path in zip(modules, command.get_outputs()):
        print(module.name.rsplit(".", 1)[1], path)
""")


def project_version(root: str = ROOT) -> str:
    """``__version__`` of ``protocol/version.py``, the one place the version is written
    (read without importing the package, which needs its dependencies)."""
    path = os.path.join(root, "protocol", "version.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and getattr(node.targets[0], "id", None) == "__version__"
        ):
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
    return (
        importlib.util.MAGIC_NUMBER
        + _UNCHECKED_HASH_PYC.to_bytes(4, "little")
        + importlib.util.source_hash(source)
        + marshal.dumps(code)
    )


def compile_extensions(root: str, build_dir: str) -> dict[str, str] | None:
    """Compile ``EXTENSIONS`` for this Python into ``build_dir``: ``{name: path of the
    shared object}``, or None after a warning on stderr when they do not build (no C
    compiler, no Python headers, no setuptools). Run in a child Python in ``root``, so the
    sources are named relative to it and the compiler's chatter stays out of this
    script's output."""
    done = subprocess.run(
        [sys.executable, "-c", _BUILD_EXT, build_dir, ",".join(EXTENSIONS), EXTENSION_PACKAGE],
        cwd=root,
        capture_output=True,
        text=True,
    )
    built = dict(
        line.split(" ", 1)
        for line in done.stdout.splitlines()
        if line.split(" ", 1)[0] in EXTENSIONS
    )
    if (
        done.returncode != 0
        or sorted(built) != sorted(EXTENSIONS)
        or not all(os.path.isfile(p) for p in built.values())
    ):
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        print(
            f"warning: the C extensions {', '.join(EXTENSIONS)} did not compile ({why}); "
            "the zip is pure Python (the slower record decoder and encoder)",
            file=sys.stderr,
        )
        return None
    return built


def compiled_entries(built: dict[str, str]) -> list[tuple[str, bytes]]:
    """The zip's entries for the compiled extensions ``built``: each shared object under
    ``COMPILED_DIR`` by its own file name, and the manifest that says what they are."""
    entries, manifest = [], {}
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for name, path in sorted(built.items()):
        with open(path, "rb") as f:
            data = f.read()
        file_name = os.path.basename(path)
        entries.append((f"{COMPILED_DIR}/{file_name}", data))
        manifest[name] = {
            "module": f"{EXTENSION_PACKAGE}.{name}",
            "file": file_name,
            "sha256": hashlib.sha256(data).hexdigest(),
            "cache_tag": sys.implementation.cache_tag,
            "ext_suffix": suffix,
            "platform": sysconfig.get_platform(),
        }
    text = json.dumps({"format": 1, "extensions": manifest}, indent=2, sort_keys=True) + "\n"
    entries.append((MANIFEST, text.encode()))
    return entries


def archive_entries(root: str = ROOT, compiled: bool = True) -> list[tuple[str, bytes]]:
    """``(name, bytes)`` of every entry of the zip, sorted by name: each source file and,
    right after it, its byte-code; with ``compiled``, the C extensions and their manifest
    (when they compile)."""
    entries = []
    for rel in library_files(root):
        with open(os.path.join(root, rel), "rb") as f:
            source = f.read()
        entries += [(rel, source), (rel + "c", byte_code(rel, source))]
    if compiled:
        with tempfile.TemporaryDirectory(prefix="pyspark-pykafka-build-ext-") as build_dir:
            built = compile_extensions(root, build_dir)
            if built is not None:
                entries += compiled_entries(built)
    return sorted(entries)


def build(out_dir: str, root: str = ROOT, compiled: bool = True) -> str:
    """Write the zip into ``out_dir`` and return its path (``compiled=False``: without
    the C extensions)."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"pyspark_pykafka-{project_version(root)}.zip")
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in archive_entries(root, compiled):
            info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    os.replace(tmp, path)
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default=os.path.join(ROOT, "dist"))
    parser.add_argument(
        "--pure", action="store_true", help="leave the compiled record decoder and encoder out"
    )
    args = parser.parse_args(argv)
    path = build(args.out_dir, compiled=not args.pure)
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
    compiled = (
        "with the compiled extensions for " + sys.implementation.cache_tag
        if MANIFEST in names
        else "pure Python"
    )
    print(f"{os.path.relpath(path)}: {len(names)} files, {compiled}", file=sys.stderr)
    print(path)


if __name__ == "__main__":
    main()
