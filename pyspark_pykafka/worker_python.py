"""Whether the Python that Spark starts its workers with can import the connector.

Spark runs every part of a Python data source (its lookup, ``schema()``, the planning of a
read or a write, the tasks) in Python workers it starts itself, not in the Python that runs
the job. A job run with a virtualenv's Python without activating it starts Spark's workers
with ``python3`` from ``PATH``, which does not have the connector: Spark then says
``DATA_SOURCE_NOT_FOUND`` or ``No module named 'pyspark_pykafka'`` after forty lines of
Java, and nothing about ``PYSPARK_PYTHON``.

So when the connector is imported on the driver (to register it, or by auto-registration's
users who import anything of it), :func:`check_worker_python` finds the Python Spark's
workers would start, as Spark picks it: ``PYSPARK_PYTHON``, else the ``spark.pyspark.python``
setting of a running SparkContext, else ``python3`` on ``PATH``. When that is not this
Python and cannot find the connector, it says so once, as a warning naming
``PYSPARK_PYTHON`` and the Python to set it to. When it is this Python (the usual case) it
costs a ``PATH`` look-up; otherwise one short subprocess, once per interpreter path.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys

from kafka_common.bounded_cache import BoundedCache

log = logging.getLogger("pykafka.registration")

#: How long the worker Python may take to answer (a cold start on a loaded machine).
CHECK_TIMEOUT_S = 10.0
#: Finds the connector without importing it (an import would need PySpark, which Spark
#: puts on its workers' path itself) and not in the working directory, which ``-c`` puts
#: first on the path and Spark's executors do not see: exit status 0 when found, 3 when not.
_PROBE = (
    "import importlib.util, sys; sys.path[:1] = [p for p in sys.path[:1] if p]; "
    "sys.exit(0 if importlib.util.find_spec('pyspark_pykafka') else 3)"
)

#: Interpreter path -> whether it finds the connector (a time-out is not kept: asked again).
_found: BoundedCache[str, bool] = BoundedCache(8)
_warned = False


def worker_python(environ=None, conf=None) -> tuple[str, str]:
    """The Python Spark's workers start (as named) and where that came from."""
    environ = os.environ if environ is None else environ
    if environ.get("PYSPARK_PYTHON"):
        return environ["PYSPARK_PYTHON"], "PYSPARK_PYTHON"
    if conf is None:
        conf = _running_spark_conf()
    if conf.get("spark.pyspark.python"):
        return conf["spark.pyspark.python"], "spark.pyspark.python"
    return "python3", "Spark's default, python3 on PATH"


def _running_spark_conf() -> dict[str, str]:
    """``spark.pyspark.python`` of the SparkContext running in this process, if any."""
    context = sys.modules.get("pyspark.core.context")
    sc = getattr(getattr(context, "SparkContext", None), "_active_spark_context", None)
    if sc is None:
        return {}
    try:
        value = sc.getConf().get("spark.pyspark.python")
    except Exception:  # a context being stopped: nothing to learn from it
        return {}
    return {"spark.pyspark.python": value} if value else {}


def _in_spark_worker() -> bool:
    """A Python Spark started (its daemon, its workers, the data source lookup): that is
    the worker Python itself."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = getattr(spec, "name", None) or ""
    return name.startswith("pyspark.") or any(
        m.startswith("pyspark.sql.worker.") or m in ("pyspark.worker", "pyspark.daemon")
        for m in list(sys.modules)
    )


def same_interpreter(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` start the same Python with the same packages. Not merely the
    same file: a virtualenv's ``bin/python`` is a link to the Python it was made from, and
    finds other packages (its ``pyvenv.cfg`` beside it decides)."""
    try:
        return os.path.samefile(a, b) and os.path.samefile(
            os.path.dirname(os.path.abspath(a)), os.path.dirname(os.path.abspath(b))
        )
    except OSError:
        return False


def finds_connector(python: str) -> bool | None:
    """Whether ``python`` finds the connector on its path (None when it did not answer in
    ``CHECK_TIMEOUT_S``). Asked once per interpreter path in this process."""
    known = _found.get(python)
    if known is not None:
        return known
    try:
        done = subprocess.run(
            [python, "-c", _PROBE],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=CHECK_TIMEOUT_S,
        )
        answer = done.returncode == 0
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.debug("could not ask %s whether it finds pyspark_pykafka: %s", python, exc)
        return None
    return _found.put(python, answer)


def worker_python_problem(environ=None, conf=None) -> str | None:
    """What is wrong with the Python Spark's workers would start, or None."""
    environ = os.environ if environ is None else environ
    named, source = worker_python(environ, conf)
    path = shutil.which(named, path=environ.get("PATH"))
    if path is not None and same_interpreter(path, sys.executable):
        return None
    fix = (
        f"Set PYSPARK_PYTHON={sys.executable} before the SparkSession is created "
        f"(export it in the shell, or os.environ['PYSPARK_PYTHON'] = {sys.executable!r} "
        "in the job), or install pyspark-pykafka into that Python."
    )
    if path is None:
        return (
            f"pyspark-pykafka: Spark starts its Python workers with {named!r} ({source}), "
            f"which is not found on PATH. {fix}"
        )
    if finds_connector(path) is not False:
        return None
    return (
        f"pyspark-pykafka: Spark starts its Python workers with {path} ({source}), which "
        "cannot import pyspark_pykafka: format('pykafka') would fail there "
        "(DATA_SOURCE_NOT_FOUND, or No module named 'pyspark_pykafka'). " + fix
    )


def check_worker_python() -> None:
    """Warn once per process when Spark's worker Python cannot import the connector (see
    the module docstring). Does nothing inside Spark's own Python workers, and when the
    connector comes from a zip (``--py-files``), which Spark ships to its workers."""
    global _warned
    if _warned or _in_spark_worker():
        return
    from kafka_common.import_path import connector_zip

    if connector_zip() is not None:
        return
    problem = worker_python_problem()
    if problem is not None and not _warned:
        _warned = True
        log.warning(problem)
