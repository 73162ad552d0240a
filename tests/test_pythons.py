"""Every CPython the project claims (``make test-pythons``, not part of ``make test``).

For each version of ``scripts/build_wheels.py``'s ``PYTHONS`` (3.10 to 3.13, pyenv's):

- its wheel, built as ``make dist`` builds it (a build environment of that Python, the
  extensions required, ``auditwheel repair``), is tagged ``manylinux_2_17`` and
  ``auditwheel show`` finds no older tag its symbols would allow;
- installed into a fresh virtualenv of that Python with no C compiler reachable (``PATH``
  holds the virtualenv alone, ``CC`` and ``CXX`` fail; the same setting makes a build
  from the sources come out without the extensions, which shows it bites), the compiled
  decoder and encoder load from the install and write and read the same bytes as the
  pure path (``scripts/check_wheel.py``, cibuildwheel's test command too);
- installed into ``.venv-python-<version>`` (that Python, PySpark, the runtime
  dependencies, pytest and hypothesis; made once and kept, :mod:`tests.helpers.own_envs`), a
  selection of the suite passes in a child pytest that imports the connector from the
  install: the protocol round trips of every API and version, the primitives, record
  batches (golden bytes, legacy message sets, varints, compression) and the
  compiled/pure equivalence on both paths;
- a Spark job there (``python job.py``, the connector found by Spark's own lookup of
  ``pyspark_*`` modules) writes a topic of the librdkafka mock cluster, reads it back and
  streams it with ``Trigger.AvailableNow`` and ``maxOffsetsPerTrigger`` to a second topic,
  and reads 50 partitions of one record each with ``includeHeaders`` in one task
  (:mod:`tests.helpers.python_lanes`), its Python workers on that Python with the compiled
  paths in use.

PySpark 4.3 needs Python 3.11 or later: Python 3.10 runs PySpark 4.2 (``PYSPARK``), which
pip's resolver picks there for ``pyspark>=4.1``.

Each version's work (its env, the fresh install, the selection, the Spark job) runs in a
lane of its own, ``LANES`` versions at a time, started once the wheels are built; each
test waits for its version's part and judges it. That keeps the suite within a few
minutes on two cores.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from protocol.version import __version__

from .helpers import python_lanes
from .helpers.own_envs import own_env
from .helpers.python_envs import pip, site_packages
from .helpers.envs import clean_env

pytestmark = pytest.mark.pythons

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
try:
    import build_wheels
finally:
    sys.path.pop(0)

PYTHONS = build_wheels.PYTHONS
# The PySpark of each Python's env: the newest that supports it (4.3 needs 3.11).
PYSPARK = {"3.10": "4.2.1", "3.11": "4.3.0", "3.12": "4.3.0", "3.13": "4.3.0"}
CHECK_WHEEL = os.path.join(ROOT, "scripts", "check_wheel.py")
# Versions worked on at once: the selection is one busy core, a Spark job about two.
LANES = 2


def test_the_versions_agree_with_pyproject():
    """``requires-python``, the classifiers, cibuildwheel's build selector and the envs
    here all name the versions of ``PYTHONS``."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        pyproject = tomllib.load(f)
    project = pyproject["project"]
    assert project["requires-python"] == f">={PYTHONS[0]}"
    claimed = [
        c.rsplit(" :: ", 1)[1]
        for c in project["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    assert claimed == list(PYTHONS)
    build = pyproject["tool"]["cibuildwheel"]["build"]
    assert build.split() == [f"cp{v.replace('.', '')}-*" for v in PYTHONS]
    assert sorted(PYSPARK) == sorted(PYTHONS)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, str]:
    """The wheel of each Python, built as ``make dist`` builds them."""
    out = str(tmp_path_factory.mktemp("dist"))
    return {version: build_wheels.build_wheel(version, out) for version in PYTHONS}


@pytest.mark.parametrize("version", PYTHONS)
def test_the_wheel_is_manylinux_2_17_the_oldest_its_symbols_allow(version, wheels):
    wheel = os.path.basename(wheels[version])
    tag = f"cp{version.replace('.', '')}"
    assert wheel == (
        f"pyspark_pykafka-{__version__}-{tag}-{tag}-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
    )
    done = subprocess.run(
        [sys.executable, "-m", "auditwheel", "show", wheels[version]],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    shown = " ".join(done.stdout.split())
    assert 'consistent with the following platform tag: "manylinux_2_17_x86_64"' in shown
    assert "{'GLIBC_2.14', 'GLIBC_2.2.5'}" in shown or "{'GLIBC_2.2.5', 'GLIBC_2.14'}" in shown


# The work of one version, run in a lane: each part returns what its test judges.


def _env_with_wheel(version: str, wheel: str) -> str:
    """``.venv-python-<version>/bin/python`` (made once and kept) with ``wheel``."""
    python = own_env(
        f"python-{version}",
        [f"pyspark=={PYSPARK[version]}", *python_lanes.TEST_REQUIREMENTS],
        base=build_wheels.find_python(version),
        no_compile=(f"pyspark=={PYSPARK[version]}",),
    )
    pip(python, "install", "--no-deps", "--force-reinstall", wheel)
    return python


def _no_compiler_env(python: str, tmp) -> dict[str, str]:
    """An environment for ``python`` in which no C compiler is reachable."""
    env = clean_env(python)
    env["PATH"] = os.path.dirname(python)
    env["CC"] = env["CXX"] = env["LDSHARED"] = os.path.join(tmp, "no-such-compiler")
    for name in ("PYKAFKA_PURE_PYTHON", "PYKAFKA_REQUIRE_EXTENSIONS"):
        env.pop(name, None)
    for tool in ("cc", "gcc", "clang", "c99", "x86_64-linux-gnu-gcc"):
        assert shutil.which(tool, path=env["PATH"]) is None, tool
    return env


def _fresh_install(version: str, wheel: str, deps: str, tmp: str) -> dict:
    """A fresh virtualenv of ``version``: the wheel installed with no compiler reachable,
    then the runtime dependencies of ``deps``' env reached through a ``.pth`` line (after
    its own site-packages, so its own install of the connector is the one imported), and
    ``scripts/check_wheel.py`` run there; and, as a control, the sources built by that
    Python in the same setting."""
    venv = os.path.join(tmp, "fresh")
    subprocess.run(
        [build_wheels.find_python(version), "-m", "venv", "--without-pip", venv], check=True
    )
    python = os.path.join(venv, "bin", "python")
    env = _no_compiler_env(python, tmp)
    builder = build_wheels.build_env(version)
    control = subprocess.run(
        [
            builder,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "-w",
            os.path.join(tmp, "control"),
            build_wheels.copy_sources(os.path.join(tmp, "src")),
        ],
        env={**env, "PATH": os.path.dirname(builder)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            python,
            "install",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            wheel,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    with open(os.path.join(site_packages(python), "_dependencies.pth"), "w") as f:
        f.write(site_packages(deps) + "\n")
    cwd = os.path.join(tmp, "cwd")
    os.mkdir(cwd)
    check = subprocess.run(
        [python, CHECK_WHEEL], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    return {
        "python": python,
        "control": control,
        "install": install,
        "check": check,
        "control_dir": os.path.join(tmp, "control"),
    }


def _spark_job(version: str, python: str, bootstrap: str, tmp: str) -> tuple[str, dict]:
    """The Spark job of :mod:`tests.helpers.python_lanes` run by ``python``: that Python
    and what the job reported."""
    return python, python_lanes.spark_job(python, bootstrap, f"pythons-{version}", tmp)


def _lane(version: str, wheel: str, bootstrap: str, tmp: str) -> dict[str, Future]:
    """Every part of ``version``'s work, in turn; each part's outcome (its value, or the
    exception it raised) as a resolved Future, so each test re-raises only its own."""

    def outcome(part, *args) -> Future:
        return python_lanes.outcome(version, part, *args)

    env = outcome(_env_with_wheel, version, wheel)
    if env.exception() is not None:
        return dict.fromkeys(("fresh", "selection", "spark"), env)
    python = env.result()
    os.makedirs(os.path.join(tmp, "selection"))
    os.makedirs(os.path.join(tmp, "spark"))
    return {
        "fresh": outcome(_fresh_install, version, wheel, python, tmp),
        "selection": outcome(python_lanes.selection, python, os.path.join(tmp, "selection")),
        "spark": outcome(_spark_job, version, python, bootstrap, os.path.join(tmp, "spark")),
    }


@pytest.fixture(scope="module")
def lanes(wheels, mock_cluster, tmp_path_factory):
    """``lanes[version]``: a Future of that version's parts, ``LANES`` versions at once."""
    for version in PYTHONS:
        python_lanes.create_topics(mock_cluster, f"pythons-{version}")
    tmps = {v: str(tmp_path_factory.mktemp(f"python-{v}")) for v in PYTHONS}
    with ThreadPoolExecutor(max_workers=LANES, thread_name_prefix="python-lane") as pool:
        yield {
            v: pool.submit(_lane, v, wheels[v], mock_cluster.bootstrap, tmps[v]) for v in PYTHONS
        }


def _part(lanes, version: str, name: str):
    """What part ``name`` of ``version``'s lane gave (raising what it raised)."""
    return lanes[version].result()[name].result()


@pytest.mark.timeout(1500)  # waits for its lane: a first run makes the env
@pytest.mark.parametrize("version", PYTHONS)
def test_the_wheel_installs_without_a_compiler_and_its_compiled_paths_match_the_pure_path(
    version, lanes
):
    fresh = _part(lanes, version, "fresh")
    # The setting bites: the sources, built in it by that Python, lack the extensions.
    control = fresh["control"]
    assert control.returncode == 0, control.stderr[-3000:]
    (built,) = os.listdir(fresh["control_dir"])
    with zipfile.ZipFile(os.path.join(fresh["control_dir"], built)) as zf:
        assert not [n for n in zf.namelist() if n.endswith(".so")], zf.namelist()

    install, check = fresh["install"], fresh["check"]
    assert install.returncode == 0, install.stdout + install.stderr
    assert check.returncode == 0, check.stdout + check.stderr
    report = json.loads(check.stdout)
    assert report["python"] == version and report["origin"] == "installed"
    suffix = f".cpython-{version.replace('.', '')}-x86_64-linux-gnu.so"
    for key, name in (("decoder", "_fastdecode"), ("encoder", "_fastencode")):
        assert report[key] == os.path.join(
            site_packages(fresh["python"]), "protocol", "records", name + suffix
        )
    assert sorted(report["codecs"]) == ["lz4", "none", "zstd"]


@pytest.fixture(scope="module")
def selection_size() -> int:
    """How many tests the selection holds here (both record paths: this Python has them)."""
    return python_lanes.selection_size()


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("version", PYTHONS)
def test_the_selection_passes_under_each_python(version, lanes, selection_size):
    python_lanes.assert_selection_passed(_part(lanes, version, "selection"), selection_size)


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("version", PYTHONS)
def test_spark_batch_read_write_and_a_stream_under_each_python(version, lanes):
    python, report = _part(lanes, version, "spark")
    installed = os.path.join(site_packages(python), "kafka_source", "__init__.py")
    assert report["pyspark"] == PYSPARK[version]
    assert report["driver"] == [version, installed, "installed"]
    assert report["workers"] == [[version, installed, "installed"]]
    python_lanes.assert_job_report(report)
