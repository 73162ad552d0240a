"""Python environments for the tests that run Spark's Python workers without the checkout:
an env with only the runtime dependencies, the connector's wheel, a copy of the sources.

``.venv-pyfiles`` (built by :func:`tests.test_ship.pyfiles_python`) holds pyspark and the
runtime dependencies. :func:`layered_env` makes a further virtualenv that reaches those
through a ``.pth`` line, so a test can install the wheel, or the checkout in editable
mode, into it without touching ``.venv-pyfiles``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from .envs import clean_env, pyfiles_python

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
try:
    from build_wheels import SOURCES  # what a build of the project reads
finally:
    sys.path.pop(0)


def site_packages(python: str) -> str:
    return subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def layered_env(path: str) -> str:
    """A virtualenv (no pip of its own) whose site-packages reach ``.venv-pyfiles``' through
    a ``.pth`` line: pyspark and the runtime dependencies, no connector. Returns its python."""
    base = pyfiles_python()
    subprocess.run([base, "-m", "venv", "--without-pip", path], check=True)
    python = os.path.join(path, "bin", "python")
    with open(os.path.join(site_packages(python), "_dependencies.pth"), "w") as f:
        f.write(site_packages(base) + "\n")
    return python


def copy_sources(dst: str) -> str:
    """A copy of what a build of the project needs, so builds and editable installs write
    their metadata there and not into the checkout."""
    os.makedirs(dst)
    for name in SOURCES:
        src = os.path.join(ROOT, name)
        if os.path.isdir(src):
            shutil.copytree(
                src,
                os.path.join(dst, name),  # no build products
                ignore=shutil.ignore_patterns("__pycache__", "*.so"),
            )
        else:
            shutil.copy(src, dst)
    return dst


def pip(python: str, *args: str) -> None:
    """This venv's pip, acting on the environment of ``python``."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            python,
            *args,
            "-q",
            "--disable-pip-version-check",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def build_wheel(out_dir: str, tmp: str) -> str:
    """``pip wheel`` of a copy of the sources; returns the wheel's path."""
    src = copy_sources(os.path.join(tmp, "wheel-src"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--disable-pip-version-check",
            "-w",
            out_dir,
            src,
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    wheels = [n for n in os.listdir(out_dir) if n.endswith(".whl")]
    assert len(wheels) == 1, wheels
    return os.path.join(out_dir, wheels[0])


def can_import_connector(python: str, cwd: str) -> bool:
    return (
        subprocess.run(
            [python, "-c", "import kafka_source"],
            cwd=cwd,
            env=clean_env(python),
            capture_output=True,
        ).returncode
        == 0
    )
