"""Environments for the tests that run the connector outside the checkout: a clean
environment for child Pythons, the --py-files virtualenv (``venv-pyfiles``), and where the
tests' own virtualenvs live (``ENVS_DIR``)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys


#: The tests' own virtualenvs (``venv-<name>``): outside the checkout, so that a fresh clone
#: reuses what an earlier run built for the same requirements (``PYKAFKA_TEST_ENVS`` moves
#: them). A test session holds each env it uses (``hold``) until it ends.
ENVS_DIR = os.environ.get("PYKAFKA_TEST_ENVS") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pyspark-pykafka", "envs"
)
PYFILES_VENV = os.path.join(ENVS_DIR, "venv-pyfiles")
_HELD: dict[str, object] = {}


def hold(path: str) -> None:
    """Keep the env at ``path`` from the other test sessions (of this checkout or another)
    until this process ends: a session installs the connector it tests into some envs, so
    two sessions must not share one at once. The second waits for the first to end."""
    if path not in _HELD:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        held = open(path + ".in-use", "w")  # noqa: SIM115 -- open until the process ends
        fcntl.flock(held, fcntl.LOCK_EX)
        _HELD[path] = held


# pyproject.toml's dependencies (tests/test_minimums.py checks they agree).
RUNTIME_DEPENDENCIES = (
    'pyarrow>=15; python_version < "3.13"',
    'pyarrow>=18; python_version >= "3.13"',
    'numpy>=1.26; python_version < "3.13"',
    'numpy>=2.1; python_version >= "3.13"',
    "crc32c>=2.5",
    "lz4>=4.4.4",
    "zstandard>=0.23",
    "cramjam>=2.8.4",
)


def _pyspark_version() -> str:
    import pyspark

    return pyspark.__version__


def pyfiles_python() -> str:
    """``.venv-pyfiles/bin/python``: pyspark and the runtime dependencies, not the connector.

    Built on first use (about half a minute with pip's cache), rebuilt when the list of
    requirements changes; a lock keeps two test processes from building it at once."""
    requirements = [f"pyspark=={_pyspark_version()}", *RUNTIME_DEPENDENCIES]
    python = os.path.join(PYFILES_VENV, "bin", "python")
    stamp = os.path.join(PYFILES_VENV, ".requirements")
    wanted = "\n".join(requirements)
    hold(PYFILES_VENV)
    with open(PYFILES_VENV + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(stamp) as f:
                if f.read() == wanted and os.path.exists(python):
                    return python
        except FileNotFoundError:
            pass
        subprocess.run([sys.executable, "-m", "venv", "--clear", PYFILES_VENV], check=True)
        subprocess.run(
            [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *requirements],
            check=True,
        )
        with open(stamp, "w") as f:
            f.write(wanted)
    return python


def clean_env(python: str, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "SPARK_HOME", "VIRTUAL_ENV", "PYTHONHOME")
        and not k.startswith(("PYSPARK_", "PYTEST_"))
    }
    env.update(
        PYSPARK_PYTHON=python,
        PYSPARK_DRIVER_PYTHON=python,
        PATH=os.path.dirname(python) + os.pathsep + env.get("PATH", ""),
        SPARK_LOCAL_IP="127.0.0.1",
        **extra,
    )
    return env
