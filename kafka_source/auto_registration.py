"""Whether Spark's automatic registration should see the connector (``pyspark_pykafka.py``).

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
the session's Python files, as the README says for ``--py-files``.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import PathFinder

LOOKUP_WORKER = "pyspark.sql.worker.lookup_data_sources"


def _in_spark_lookup() -> bool:
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == LOOKUP_WORKER or LOOKUP_WORKER in sys.modules


def only_in_lookup_working_directory(module: str) -> str | None:
    """The working directory of Spark's data source lookup when ``module`` is importable
    there and nowhere else on ``sys.path``; None anywhere else (outside the lookup too)."""
    if not _in_spark_lookup():
        return None
    cwd = os.path.realpath(os.getcwd())
    elsewhere = [p for p in sys.path if os.path.realpath(p or os.curdir) != cwd]
    if PathFinder.find_spec(module, elsewhere) is not None:
        return None
    return cwd
