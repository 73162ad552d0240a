"""The ``pykafka`` data source: Spark's Kafka connector, in Python. It stands above the
reader (``kafka_source``) and the writer (``kafka_sink``) and hands out both, so neither
package imports the other.

Registered automatically as ``pyspark_pykafka.DefaultSource`` when the package is
installed (or on the executors' Python path); otherwise register it by hand with
``spark.dataSource.register(KafkaDataSource)``. The options are listed in
``kafka_source.option_table``, ``kafka_sink.options`` and docs/options.md.

Where Spark's Python workers cannot import the connector (docs/loading.md), the failures
Spark would report as a bare ``No module named 'kafka_source'`` say what to install:

- Spark plans a streaming read in a process that does not see the session's Python files
  (``--py-files``, ``addPyFile``, Spark Connect's ``addArtifacts``): the data source
  pickles itself with a loader that travels by value (:func:`_restore_data_source`) and
  explains this when the import fails.
- Over Spark Connect, a streaming query's tasks get no session artifacts either, so
  :meth:`KafkaDataSource.streamWriter` refuses to plan a streaming write when the
  connector came only from this session's artifacts.

When the connector came from a zip, the data source, the stream reader and the stream
writer carry the zip in their pickles and put it on the worker's import path first
(:mod:`kafka_common.import_path`).
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

from pyspark.sql.datasource import DataSource

from kafka_common.import_path import connector_zip, with_import_path
from kafka_common.user_errors import user_errors
from protocol.errors import ConfigError

from kafka_source.spark_schema import as_struct_type, kafka_schema


_INSTALL_HINT = (
    "Install it where Spark runs its Python workers: pip install the pyspark-pykafka wheel "
    "('make dist' builds it) on the Spark driver or Spark Connect server and on every "
    "executor, next to its dependencies."
)


def _restore_data_source(module_name: str, qualname: str, state: dict):
    """Rebuild a pickled :class:`KafkaDataSource` in one of Spark's Python workers.

    This function is pickled by value (its ``__module__`` names no importable module, so
    cloudpickle, which Spark uses, ships its code), so it runs even in a worker that cannot
    import the connector, and then says why instead of a bare ``No module named ...``."""
    import importlib
    import sys as _sys

    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        spec = getattr(_sys.modules.get("__main__"), "__spec__", None)
        where = f"Spark's Python worker {spec.name}" if spec else "This Python process"
        raise ModuleNotFoundError(
            f"{where} cannot import pyspark-pykafka ({exc}). Spark "
            "does not give the Python files added to a session (Spark Connect's "
            "spark.addArtifacts(..., pyfile=True), SparkContext.addPyFile, spark-submit "
            "--py-files) to the worker that plans a streaming read "
            "(pyspark.sql.streaming.python_streaming_source_runner); batch reads and "
            "writes do get them. " + _INSTALL_HINT + " With spark-submit in client mode, "
            "putting the zip on the PYTHONPATH that spark-submit starts with also works.",
            name=exc.name,
        ) from exc
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    source = obj.__new__(obj)
    source.__dict__.update(state)
    return source


# No importable module by this name: cloudpickle pickles the function by value.
_restore_data_source.__module__ = "pyspark_pykafka_unpickle"

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _session_artifacts_only() -> str | None:
    """The session artifact directory this connector was imported from, when that is the
    only place this Python process can import it from; else None.

    Spark's Python workers learn their Spark files directory in
    ``worker_util.setup_spark_files``; for a Spark Connect session it is the session's own
    directory, ``<root>/<session uuid>``, and its Python files are put on ``sys.path``."""
    try:
        from pyspark.core.files import SparkFiles
    except ImportError:  # pyspark-client only: not one of Spark's workers
        return None
    root = SparkFiles._root_directory if SparkFiles._is_running_on_worker else None
    if not root or not _UUID.fullmatch(os.path.basename(os.path.normpath(root))):
        return None
    root = os.path.normpath(root) + os.sep
    here = os.path.normpath(os.path.abspath(__file__))
    if not here.startswith(root):
        return None
    from importlib.machinery import PathFinder

    elsewhere = [
        p
        for p in sys.path
        if not os.path.normpath(os.path.abspath(p or os.curdir)).startswith(root)
    ]
    if PathFinder.find_spec("kafka_sink", elsewhere) is not None:
        return None  # installed as well: a streaming query's tasks find it
    return root.rstrip(os.sep)


def _include_headers(options) -> bool:
    value = {k.lower(): v for k, v in options.items()}.get("includeheaders", "false")
    return str(value).strip().lower() == "true"


@user_errors
class KafkaDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "pykafka"

    def __reduce__(self):
        cls = type(self)
        return with_import_path(
            (_restore_data_source, (cls.__module__, cls.__qualname__, dict(self.__dict__)))
        )

    def schema(self):
        # Spark calls this at load() (not for writes, and not when the user gives a schema):
        # raise option errors there, as Spark's connector does (only those of batch and
        # streaming reads alike: Spark does not say here which one this is).
        from kafka_source.options import check_reader_options, reader_formats

        check_reader_options(self.options)
        formats = reader_formats(self.options)
        if formats is not None:
            # valueFormat/keyFormat: the reader schema is fetched from the registry now, so
            # that the DataFrame's schema is fixed for the query.
            from kafka_common.value_formats import resolve_formats

            from kafka_source.spark_schema import formatted_schema

            return formatted_schema(
                _include_headers(self.options), resolve_formats(formats, with_writers=False)
            )
        # A StructType, not DDL: Sail reads a DDL `timestamp` as timestamp_ntz.
        return kafka_schema(_include_headers(self.options))

    def _resolved(self, options, schema):
        """``options`` with the formats' schemas fetched, after checking that ``schema``
        (what Spark was told at load()) is still what they give."""
        if options.formats is None:
            expected = kafka_schema(options.include_headers)
        else:
            import dataclasses

            from kafka_common.value_formats import resolve_formats

            from kafka_source.spark_schema import formatted_schema

            options = dataclasses.replace(options, formats=resolve_formats(options.formats))
            expected = formatted_schema(options.include_headers, options.formats)
        if as_struct_type(schema) != expected:
            raise ConfigError(
                "Kafka source has a fixed schema and cannot be set with a custom one "
                f"(pykafka's schema is: {expected.simpleString()}); with valueFormat/"
                "keyFormat, a reader schema that changed in the registry since the query "
                "was defined needs the DataFrame defined again"
            )
        return options

    def reader(self, schema):
        from kafka_source.batch_reader import (
            KafkaBatchReader,
            KafkaPushdownBatchReader,
            check_dead_letter_topic_exists,
            pushdown_enabled,
        )
        from kafka_source.options import parse_reader_options

        options = self._resolved(parse_reader_options(self.options), schema)
        check_dead_letter_topic_exists(options)
        cls = KafkaPushdownBatchReader if pushdown_enabled() else KafkaBatchReader
        return cls(options)

    def streamReader(self, schema):
        from kafka_source.batch_reader import check_dead_letter_topic_exists
        from kafka_source.options import parse_reader_options
        from kafka_source.admission import check_pyspark_supports
        from kafka_source.stream_reader import KafkaStreamReader

        options = self._resolved(parse_reader_options(self.options, for_streaming=True), schema)
        check_pyspark_supports(options)
        check_dead_letter_topic_exists(options)
        return KafkaStreamReader(options)

    def writer(self, schema, overwrite: bool):
        from kafka_sink.writer import create_writer

        return create_writer(self.options, as_struct_type(schema), overwrite)

    def streamWriter(self, schema, overwrite: bool):
        artifacts = _session_artifacts_only()
        if artifacts is not None and connector_zip() is None:
            raise RuntimeError(
                "Streaming writes with pyspark-pykafka need it installed on the Spark "
                "Connect server: this session has it only from its Python artifacts "
                f"(spark.addArtifacts, in {artifacts}), which Spark gives to batch queries "
                "but not to the tasks of a streaming query. "
                + _INSTALL_HINT
                + " Batch reads and writes work with addArtifacts alone."
            )
        from kafka_sink.writer import create_stream_writer

        return create_stream_writer(self.options, as_struct_type(schema), overwrite)
