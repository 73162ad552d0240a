"""The lowest versions we claim (``make test-minimums``, not part of ``make test``).

Each env (``.venv-minimums-<python>``, made once and kept, :mod:`tests.helpers.own_envs`) holds
the lowest version of every runtime dependency ``pyproject.toml`` allows on that Python,
as uv's lowest resolution installs them (``--resolution lowest-direct``: the
dependencies we name at their lowest, theirs at their newest), beside ``pyspark[sql]``
at the PySpark of ``ENVS``: where that PySpark asks more of a dependency than we do (4.2
and 4.3 need pyarrow 18), its floor wins, as in a user's install. Our dependencies come
from wheels only, so a floor without a wheel for that Python is not built from its
sources but passed over, and ``test_each_env_holds_the_floors`` fails. The connector's
wheel for that Python (``scripts/build_wheels.py``) goes in on top; then, as in
``make test-pythons``, the selection of the suite in a child pytest, and the Spark job of
:mod:`tests.helpers.python_lanes` (batch write and read, a stream, and a read of 50
partitions of one record each with ``includeHeaders`` in one task, whose ranges the reader
joins into one Arrow batch).

The matrix covers every Python we claim and every floor, in four envs:

- 3.10, PySpark 4.1.0 (the oldest we claim): pyarrow 15.0.0, numpy 1.26.0 and the lowest
  of everything else;
- 3.11, PySpark 4.3.0 (which needs 3.11): pyarrow 18.0.0, PySpark 4.3's own floor;
- 3.12, PySpark 4.2.0: pyarrow 18.0.0, PySpark 4.2's own floor;
- 3.13, PySpark 4.1.0: 3.13's floors, pyarrow 18.0.0 and numpy 2.1.0 (the first with
  its wheels).

The envs run ``LANES`` at a time, each lane in turn building the wheel, the env, the
selection and the Spark job.
"""

from __future__ import annotations

import os
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from .helpers import python_lanes
from .helpers.envs import RUNTIME_DEPENDENCIES
from .helpers.library import ROOT
from .helpers.own_envs import own_env, prune_uv_cache
from .helpers.python_envs import pip, site_packages

pytestmark = pytest.mark.minimums

sys.path.insert(0, os.path.join(ROOT, "scripts"))
try:
    import build_wheels
finally:
    sys.path.pop(0)

# Python -> the PySpark of its env (see the docstring for why each).
ENVS = {"3.10": "4.1.0", "3.11": "4.3.0", "3.12": "4.2.0", "3.13": "4.1.0"}
RESOLUTION = "lowest-direct"
LANES = 2


def _dependencies() -> list[str]:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]["dependencies"]


def test_every_python_we_claim_has_an_env_and_the_floors_are_pyproject_s():
    assert sorted(ENVS) == list(build_wheels.PYTHONS)
    # the envs (these and every other own env) install pyproject.toml's dependencies
    assert list(RUNTIME_DEPENDENCIES) == _dependencies()


def floors(python: str, pyspark_requires: list[str]) -> dict[str, Version]:
    """The lowest version of each runtime dependency on ``python``: ours, or PySpark's
    (its ``sql`` extra) where it asks more."""
    wanted: dict[str, Version] = {}
    for text in [*_dependencies(), *pyspark_requires]:
        req = Requirement(text)
        env = {"python_version": python, "extra": "sql"}
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        (floor,) = [Version(s.version) for s in req.specifier if s.operator == ">="]
        name = req.name.lower()
        if name in {Requirement(d).name for d in _dependencies()}:
            wanted[name] = max(wanted.get(name, floor), floor)
    return wanted


def _lane(python: str, bootstrap: str, tmp: str) -> dict:
    """Every part of ``python``'s env, in turn (see :func:`python_lanes.outcome`)."""
    name = f"minimums-{python}"

    def env() -> str:
        wheel = build_wheels.build_wheel(python, os.path.join(tmp, "dist"))
        env_python = own_env(
            name,
            [f"pyspark[sql]=={ENVS[python]}", *python_lanes.TEST_REQUIREMENTS],
            base=build_wheels.find_python(python),
            resolution=RESOLUTION,
        )
        pip(env_python, "install", "--no-deps", "--force-reinstall", wheel)
        return env_python

    made = python_lanes.outcome(name, env)
    if made.exception() is not None:
        return dict.fromkeys(("selection", "spark"), made)
    env_python = made.result()
    for part in ("selection", "spark"):
        os.makedirs(os.path.join(tmp, part))
    return {
        "selection": python_lanes.outcome(
            name, python_lanes.selection, env_python, os.path.join(tmp, "selection")
        ),
        "spark": python_lanes.outcome(
            name,
            lambda: (
                env_python,
                python_lanes.spark_job(env_python, bootstrap, name, os.path.join(tmp, "spark")),
            ),
        ),
    }


@pytest.fixture(scope="module")
def lanes(mock_cluster, tmp_path_factory):
    """``lanes[python]``: a Future of that env's parts, ``LANES`` envs at once."""
    for python in ENVS:
        python_lanes.create_topics(mock_cluster, f"minimums-{python}")
    tmps = {p: str(tmp_path_factory.mktemp(f"minimums-{p}")) for p in ENVS}
    with ThreadPoolExecutor(max_workers=LANES, thread_name_prefix="minimums-lane") as pool:
        yield {p: pool.submit(_lane, p, mock_cluster.bootstrap, tmps[p]) for p in ENVS}
    prune_uv_cache()


@pytest.fixture(scope="module")
def selection_size() -> int:
    return python_lanes.selection_size()


def _part(lanes, python: str, name: str):
    return lanes[python].result()[name].result()


@pytest.mark.timeout(1500)  # waits for its lane: a first run makes the env
@pytest.mark.parametrize("python", ENVS)
def test_each_env_holds_the_floors(python, lanes):
    _, report = _part(lanes, python, "spark")
    assert report["pyspark"] == ENVS[python]
    installed = {name: Version(v) for name, v in report["installed"].items()}
    wanted = floors(python, report["pyspark_requires"])
    assert sorted(wanted) == ["cramjam", "crc32c", "lz4", "numpy", "pyarrow", "zstandard"]
    assert {n: installed.get(n) for n in wanted} == wanted


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("python", ENVS)
def test_the_selection_passes_on_the_floors(python, lanes, selection_size):
    python_lanes.assert_selection_passed(_part(lanes, python, "selection"), selection_size)


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("python", ENVS)
def test_spark_batch_stream_and_many_small_partitions_on_the_floors(python, lanes):
    env_python, report = _part(lanes, python, "spark")
    installed = os.path.join(site_packages(env_python), "kafka_source", "__init__.py")
    assert report["driver"] == [python, installed, "installed"]
    assert report["workers"] == [[python, installed, "installed"]]
    python_lanes.assert_job_report(report)
