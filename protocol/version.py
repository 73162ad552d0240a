"""The version of pyspark-pykafka and the top-level names it installs, written here and
nowhere else: the package metadata (``pyproject.toml``: ``[tool.setuptools.dynamic]``;
``setup.py``: packages and modules), the ``--py-files`` zip (``scripts/build_pyfiles_zip.py``:
its name and content), the wheels' build (``scripts/build_wheels.py``), the zip finder of
``kafka_common.import_path`` and the client software version sent to brokers
(``protocol.client.connection``) all read it. Standard library only, no imports: the build scripts
run this file by path, without importing the package. (``kafka_source.shadowing`` keeps a
copy of ``INSTALLED_NAMES``: it checks that ``protocol`` is ours before importing it;
tests/test_package.py checks the copy.)"""

__version__ = "0.1.0"

#: The packages the connector runs on: what the ``--py-files`` zip carries (the entry
#: point ``pyspark_pykafka``, the one Spark looks up as ``pyspark_*``, first).
RUNTIME_PACKAGES = ("pyspark_pykafka", "protocol", "kafka_common", "kafka_source", "kafka_sink")
#: Every top-level package the distribution installs: the runtime's and the test bed.
PACKAGES = RUNTIME_PACKAGES + ("kafka_testbed",)
#: The top-level modules it installs (none: each top-level name is a package).
MODULES: tuple[str, ...] = ()
#: The top-level import names the connector's code is under at run time.
RUNTIME_NAMES = MODULES + RUNTIME_PACKAGES
#: Every top-level import name the distribution installs.
INSTALLED_NAMES = MODULES + PACKAGES
