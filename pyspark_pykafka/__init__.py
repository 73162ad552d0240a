"""The connector's entry point. Spark 4 registers Python data sources found in top-level
``pyspark_*`` modules that expose ``DefaultSource``: this package makes ``format("pykafka")``
work after install.

Not when Spark's lookup finds it only in the driver's working directory (a checkout, or
the zip unpacked there): Spark would register it without the session's Python files and
its tasks would fail on the executors (``pyspark_pykafka.auto_registration`` says why). There
it offers no ``DefaultSource`` and says so; the job registers ``KafkaDataSource`` itself.

Imported on the driver, it checks that the Python Spark starts its workers with can import
it, and warns once naming ``PYSPARK_PYTHON`` when not (``pyspark_pykafka.worker_python``).

It also offers the lag helper (``kafka_source.lag``): the offsets a stream is behind the
latest, from its progress reports, as Spark's JVM Kafka source reports them."""

import logging

from kafka_source.lag import KafkaLagListener, offsets_behind_latest, with_lag_metrics

from .auto_registration import not_registered_warning, only_in_lookup_working_directory
from .datasource import KafkaDataSource
from .worker_python import check_worker_python

__all__ = [
    "DefaultSource",
    "KafkaDataSource",
    "KafkaLagListener",
    "offsets_behind_latest",
    "with_lag_metrics",
]

_cwd = only_in_lookup_working_directory(__name__)
if _cwd is None:
    DefaultSource = KafkaDataSource
    check_worker_python()
else:
    # Spark's lookup worker has no logging set up: a warning reaches its stderr (Python's
    # last-resort handler), which Spark copies to the driver's.
    logging.getLogger("pykafka.registration").warning(not_registered_warning(_cwd))
    __all__ = [name for name in __all__ if name != "DefaultSource"]
