"""The Python Spark starts its workers with is checked when the connector is imported on the
driver (``pyspark_pykafka.worker_python``): a job run with a virtualenv's Python without
activating it used to get DATA_SOURCE_NOT_FOUND or ``No module named 'pyspark_pykafka'``
and no word of ``PYSPARK_PYTHON``.

The Pythons are real: a bare virtualenv (no pip, no packages) stands for the ``python3`` a
user's Spark would start, and each job is a child process importing the connector."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kafka_common.bounded_cache import BoundedCache
from pyspark_pykafka import worker_python

JOB = (
    "import sys\n"
    "import pyspark_pykafka\n"
    "sys.stderr.write('imported\\n')\n"
    "from pyspark_pykafka.worker_python import check_worker_python\n"
    "check_worker_python()  # a second registration says nothing more\n"
)
WARNING = "pyspark-pykafka: Spark starts its Python workers with"


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    """A virtualenv with nothing installed: it cannot import the connector."""
    where = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    return str(where / "bin" / "python")


def _job(tmp_path, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-c", JOB],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_worker_python_without_the_connector_is_named_once_with_the_fix(tmp_path, bare_python):
    done = _job(tmp_path, PYSPARK_PYTHON=bare_python)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.count(WARNING) == 1, done.stderr
    assert done.stderr.index(WARNING) < done.stderr.index("imported")  # on import
    assert (
        f"{WARNING} {bare_python} (PYSPARK_PYTHON), which cannot import pyspark_pykafka: "
        "format('pykafka') would fail there (DATA_SOURCE_NOT_FOUND, or No module named "
        f"'pyspark_pykafka'). Set PYSPARK_PYTHON={sys.executable} before the SparkSession "
        "is created"
    ) in done.stderr


def test_python3_on_path_is_spark_s_default_worker_python(tmp_path, bare_python):
    """No PYSPARK_PYTHON: Spark starts ``python3`` from PATH (here the bare one)."""
    path = os.path.dirname(bare_python) + os.pathsep + os.environ.get("PATH", "")
    done = _job(tmp_path, PATH=path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.count(WARNING) == 1, done.stderr
    python3 = os.path.join(os.path.dirname(bare_python), "python3")
    assert f"{WARNING} {python3} (Spark's default, python3 on PATH)" in done.stderr
    assert f"Set PYSPARK_PYTHON={sys.executable} " in done.stderr


def test_a_worker_python_that_has_the_connector_says_nothing(tmp_path):
    done = _job(tmp_path, PYSPARK_PYTHON=sys.executable)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "pyspark-pykafka" not in done.stderr, done.stderr


def test_another_python_that_finds_the_connector_says_nothing(tmp_path, bare_python):
    """A different interpreter is asked (once) and answers that it finds the connector:
    here the bare virtualenv with this checkout on its PYTHONPATH."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(worker_python.__file__)))
    pythonpath = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    done = _job(tmp_path, PYSPARK_PYTHON=bare_python, PYTHONPATH=pythonpath)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "pyspark-pykafka" not in done.stderr, done.stderr


def test_the_worker_python_is_picked_as_spark_picks_it():
    assert worker_python.worker_python({"PYSPARK_PYTHON": "/a/python"}, {}) == (
        "/a/python",
        "PYSPARK_PYTHON",
    )
    conf = {"spark.pyspark.python": "/b/python"}
    assert worker_python.worker_python({"PYSPARK_PYTHON": "/a/python"}, conf)[0] == "/a/python"
    assert worker_python.worker_python({}, conf) == ("/b/python", "spark.pyspark.python")
    assert worker_python.worker_python({}, {})[0] == "python3"


def test_a_worker_python_not_on_path_is_named(tmp_path):
    problem = worker_python.worker_python_problem({"PATH": str(tmp_path)}, {})
    assert problem is not None
    assert problem.startswith(
        f"{WARNING} 'python3' (Spark's default, python3 on PATH), which is not found on PATH. "
        f"Set PYSPARK_PYTHON={sys.executable} "
    )


def test_this_python_is_not_asked_and_a_virtualenv_of_it_is(bare_python, monkeypatch):
    """The same interpreter costs no subprocess; a virtualenv made from the same Python
    (its bin/python a link to the same file) is another interpreter, and is asked."""
    monkeypatch.setattr(worker_python, "_found", BoundedCache(8))
    assert worker_python.worker_python_problem({"PYSPARK_PYTHON": sys.executable}, {}) is None
    assert worker_python._found.keys() == []
    assert not worker_python.same_interpreter(bare_python, sys.executable)
    assert worker_python.worker_python_problem({"PYSPARK_PYTHON": bare_python}, {})
    assert [worker_python._found.get(k) for k in worker_python._found.keys()] == [False]
