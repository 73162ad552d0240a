"""Virtualenvs of their own for the tests of other engines, other PySpark versions and
other Pythons (``make test-sail``, ``make test-versions``, ``make test-pythons``): one per
set of requirements, built on first use in ``tests.helpers.envs.ENVS_DIR`` (outside the
checkout: a fresh clone reuses them), reused while its requirements stay the same, held by
one test session at a time, and given the connector's wheel afresh at each test session
(so it tests the code as it is).

PySpark comes from PyPI as an sdist of about 400 MB that pip builds into a wheel: the first
build of a version takes a few minutes, later ones reuse pip's cache of built wheels.
"""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import sys
import time

from .python_envs import build_wheel, pip
from .envs import ENVS_DIR, RUNTIME_DEPENDENCIES, clean_env, hold

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def own_env(
    name: str,
    requirements: list[str],
    base: str = sys.executable,
    no_compile: tuple[str, ...] = (),
    resolution: str | None = None,
) -> str:
    """``.venv-<name>/bin/python`` with ``requirements`` and the connector's runtime
    dependencies installed (not the connector), made by the Python ``base`` (this one by
    default). ``no_compile``: requirements installed without byte-compiling them (PySpark:
    a Python worker compiles the few modules it imports). ``resolution`` (``lowest-direct``
    or ``lowest``): installed by uv with that resolution instead of by pip, the runtime
    dependencies from wheels only (as on a node without a C compiler); uv compiles
    nothing. Prints how long a (re)build took."""
    path = os.path.join(ENVS_DIR, f"venv-{name}")
    hold(path)
    python = os.path.join(path, "bin", "python")
    stamp = os.path.join(path, ".requirements")
    wanted = "\n".join([*requirements, *RUNTIME_DEPENDENCIES])
    if resolution:
        wanted += f"\n--resolution {resolution}"
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(stamp) as f:
                if f.read() == wanted and os.path.exists(python):
                    return python
        except FileNotFoundError:
            pass
        began = time.monotonic()
        subprocess.run([base, "-m", "venv", "--clear", path], check=True)
        if resolution:
            _uv_install(python, [*requirements, *RUNTIME_DEPENDENCIES], resolution)
        else:
            _pip_install(python, wanted, no_compile)
        with open(stamp, "w") as f:
            f.write(wanted)
        print(f"\n{path}: built in {time.monotonic() - began:.0f} s", file=sys.stderr)
    return python


def _pip_install(python: str, wanted: str, no_compile: tuple[str, ...]) -> None:
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    compiled = [r for r in wanted.split("\n") if r not in no_compile]
    subprocess.run([*pip, *compiled], check=True)
    if no_compile:
        subprocess.run([*pip, "--no-compile", *no_compile], check=True)


def _uv_install(python: str, requirements: list[str], resolution: str) -> None:
    """uv's resolution ``resolution`` of ``requirements`` into ``python``'s env (uv is in
    the dev extra, pinned); the runtime dependencies from wheels only."""
    names = (re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0] for r in RUNTIME_DEPENDENCIES)
    wheels_only = ",".join(dict.fromkeys(names))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "uv",
            "pip",
            "install",
            "-q",
            "--python",
            python,
            "--resolution",
            resolution,
            "--only-binary",
            wheels_only,
            *requirements,
        ],
        check=True,
    )


def prune_uv_cache() -> None:
    """Drops what uv's cache holds and no env uses. uv keeps a new build of an sdist it
    fetched again (PySpark's: 0.5-1.4 GB each) beside the old ones, so without this every
    run of ``make test-minimums`` grows the cache by a few GB. Call it when no uv runs."""
    subprocess.run([sys.executable, "-m", "uv", "cache", "prune", "-q"], check=True)


def install_connector(python: str, tmp: str) -> None:
    """The connector's wheel, built now from a copy of the sources, into ``python``'s env."""
    wheel = build_wheel(os.path.join(tmp, "dist"), tmp)
    pip(python, "install", "--no-deps", "--force-reinstall", wheel)


def write_job(cwd: str, script: str) -> str:
    path = os.path.join(cwd, "job.py")
    with open(path, "w") as f:
        f.write(script)
    return path


def run_job(python: str, command: list[str], cwd: str, timeout: float, **env: str) -> dict:
    """Run ``command`` (a job by ``python``, or ``spark-submit`` of its env) in ``cwd``,
    outside the checkout; return the JSON the job prints after ``REPORT``."""
    import json

    done = subprocess.run(
        command,
        cwd=cwd,
        env=clean_env(python, **env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    reports = [line for line in done.stdout.splitlines() if line.startswith("REPORT ")]
    assert done.returncode == 0 and reports, (
        f"exit {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-8000:]}"
    )
    return json.loads(reports[-1][len("REPORT ") :])
