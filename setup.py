"""The optional compiled record decoder and encoder, and the packages and modules (from
``protocol/version.py``, where they are written once); everything else is declared in
pyproject.toml.

``optional=True``: without a C compiler or Python's headers the build warns and goes on,
and the package runs on its pure-Python path (protocol/records/accel.py). The wheels a
release ships must have them: ``PYKAFKA_REQUIRE_EXTENSIONS=1`` (set by
``scripts/build_wheels.py``, which ``make dist`` runs, and by cibuildwheel's configuration
in pyproject.toml) makes a failed compile fail the build instead.

``-g0``: no debug information, as in the ``--py-files`` zip's build
(scripts/build_pyfiles_zip.py); it would also record the building directory's path."""

import os
import runpy

from setuptools import Extension, find_packages, setup

NAMES = runpy.run_path(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "protocol", "version.py")
)

REQUIRED = os.environ.get("PYKAFKA_REQUIRE_EXTENSIONS", "") not in ("", "0")
FLAGS = ["-O2"] + (["-g0"] if os.name != "nt" else [])

setup(
    packages=find_packages(include=[f"{p}*" for p in NAMES["PACKAGES"]]),
    py_modules=list(NAMES["MODULES"]),
    ext_modules=[
        Extension(
            f"protocol.records.{name}",
            [f"protocol/records/{name}.c"],
            extra_compile_args=FLAGS,
            optional=not REQUIRED,
        )
        for name in ("_fastdecode", "_fastencode")
    ],
)
