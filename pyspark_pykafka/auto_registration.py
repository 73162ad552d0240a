"""Whether Spark's automatic registration should see the connector (the ``pyspark_pykafka``
package).

Spark 4 looks for ``pyspark_*`` modules once per driver (or Spark Connect server) in a
Python worker it starts as ``python -m pyspark.sql.worker.lookup_data_sources``, and ``-m``
puts that process's working directory, the driver's, first on ``sys.path``. A data source
found there is registered with no Python files of the session (Spark's
``DataSourceManager`` builds it with ``PythonUtils.createPythonFunction``, no includes), so
its tasks reach executors whose Python sees neither the driver's working directory nor the
``--py-files``, and fail while cloudpickle loads them: ``No module named 'kafka_sink'``.
That is what ``spark-submit --py-files dist/pyspark_pykafka-<version>.zip job.py`` run
from a checkout did, and a job that registers the source only when Spark did not.

So the connector offers itself to that lookup only when it is importable from the rest of
``sys.path`` (installed, an editable install, the zip on ``PYTHONPATH``), never from the
lookup's working directory alone; the job then registers ``KafkaDataSource`` itself, with
the session's Python files, as docs/loading.md says for ``--py-files``.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import PathFinder

LOOKUP_WORKER = "pyspark.sql.worker.lookup_data_sources"


def _in_spark_lookup() -> bool:
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == LOOKUP_WORKER or LOOKUP_WORKER in sys.modules


def _beyond_working_directory(cwd: str) -> list[str]:
    """``sys.path`` without what stands for the working directory alone: the entry
    ``python -m`` puts first, and relative entries. An absolute entry naming the same
    directory further on stays: it was put there by a ``.pth`` file (``pip install -e .``
    of a checkout, run from that checkout) or by ``PYTHONPATH``, which the executors'
    Pythons get as well."""
    path = list(sys.path)
    if path and os.path.realpath(path[0] or os.curdir) == cwd:
        path = path[1:]
    return [p for p in path if p and os.path.isabs(p)]


def only_in_lookup_working_directory(module: str) -> str | None:
    """The working directory of Spark's data source lookup when ``module`` is importable
    there and nowhere else on ``sys.path``; None anywhere else (outside the lookup too)."""
    if not _in_spark_lookup():
        return None
    cwd = os.path.realpath(os.getcwd())
    if PathFinder.find_spec(module, _beyond_working_directory(cwd)) is not None:
        return None
    return cwd


def not_registered_warning(cwd: str) -> str:
    """What the lookup prints when it does not register the connector: why, and the three
    ways out, each to type as it stands."""
    return (
        "pyspark-pykafka: not registering format('pykafka') by itself: Spark's data source "
        f"lookup finds it only in the driver's working directory ({cwd}), which Spark's "
        "executors do not see. Either install it (in a checkout: pip install -e .), or run "
        "the job from another directory with the connector on PYTHONPATH (the zip 'make "
        "dist' builds), or register it in the job: from pyspark_pykafka import "
        "KafkaDataSource; spark.dataSource.register(KafkaDataSource)"
    )
