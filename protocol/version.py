"""The version of pyspark-pykafka, written here and nowhere else: the package metadata
(``pyproject.toml``: ``[tool.setuptools.dynamic]``), the name of the ``--py-files`` zip
(``scripts/build_pyfiles_zip.py``) and the client software version sent to brokers
(``protocol.client.connection``) all read it."""

__version__ = "0.1.0"
