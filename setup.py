"""The optional compiled record decoder and encoder; everything else is declared in
pyproject.toml.

``optional=True``: without a C compiler or Python's headers the build warns and goes on,
and the package runs on its pure-Python path (protocol/records/accel.py)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension(f"protocol.records.{name}", [f"protocol/records/{name}.c"],
                             extra_compile_args=["-O2"], optional=True)
                   for name in ("_fastdecode", "_fastencode")])
