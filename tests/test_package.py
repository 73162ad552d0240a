"""The package as users get it: ``python -m build`` gives an sdist and a wheel that
``twine check`` accepts, the sdist alone builds the same wheel again, the metadata says
what the project is (an SPDX license, classifiers from the official list, one version),
and neither building nor installing, editable included, prints a warning.

The builds run on a copy of the sources (``tests/helpers/python_envs.py``), so nothing is written
into the checkout, and without build isolation (the ``dev`` extra has the build backend),
which keeps them to seconds; the editable install runs as ``make install`` does, with pip's
own isolated build, into an env layered on ``.venv-pyfiles``.
"""

from __future__ import annotations

import email.parser
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile

import pytest

from protocol.version import __version__

from .helpers.python_envs import copy_sources, layered_env, site_packages
from .helpers.envs import clean_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = f"pyspark_pykafka-{__version__}"
# This machine's pip configuration names index directories that do not exist; pip says so
# on every look-up. That is the machine's, not the package's.
MACHINE_PIP_CONFIG = re.compile(
    r"^WARNING: Location '[^']*' is ignored: it is neither a file "
    r"nor a directory\.$"
)


def warning_lines(output: str) -> list[str]:
    return [
        line
        for line in output.splitlines()
        if re.search(r"\bwarn|deprecat", line, re.I) and not MACHINE_PIP_CONFIG.match(line.strip())
    ]


def run(*command: str, cwd: str | None = None, env: dict | None = None) -> str:
    # PYTHONDONTWRITEBYTECODE (set on some machines) makes setuptools print "warning:
    # byte-compiling is disabled"; users' builds byte-compile.
    env = dict(env or os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    return output


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The sdist and wheel built from the sources, and the wheel built from that sdist
    alone, unpacked in a directory of its own."""
    tmp = str(tmp_path_factory.mktemp("package"))
    src = copy_sources(os.path.join(tmp, "src"))
    shutil.copytree(
        os.path.join(ROOT, "tests"),
        os.path.join(src, "tests"),  # left out
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    direct, again = os.path.join(tmp, "dist"), os.path.join(tmp, "from-sdist")
    output = run(
        sys.executable,
        "-m",
        "build",
        "--no-isolation",
        "--sdist",
        "--wheel",
        "--outdir",
        direct,
        src,
    )
    (sdist,) = (os.path.join(direct, n) for n in os.listdir(direct) if n.endswith(".tar.gz"))
    (wheel,) = (os.path.join(direct, n) for n in os.listdir(direct) if n.endswith(".whl"))
    with tarfile.open(sdist) as tf:
        tf.extractall(os.path.join(tmp, "unpacked"), filter="data")
    output += run(
        sys.executable,
        "-m",
        "build",
        "--no-isolation",
        "--wheel",
        "--outdir",
        again,
        os.path.join(tmp, "unpacked", NAME),
    )
    (rebuilt,) = (os.path.join(again, n) for n in os.listdir(again) if n.endswith(".whl"))
    return {"sdist": sdist, "wheel": wheel, "rebuilt": rebuilt, "output": output, "tmp": tmp}


def wheel_metadata(wheel: str) -> email.message.Message:
    with zipfile.ZipFile(wheel) as zf:
        return email.parser.Parser().parsestr(zf.read(f"{NAME}.dist-info/METADATA").decode())


def test_building_prints_no_warnings(built):
    assert "Successfully built" in built["output"]
    assert warning_lines(built["output"]) == []


def test_twine_check_accepts_the_sdist_and_the_wheel(built):
    output = run(sys.executable, "-m", "twine", "check", "--strict", built["sdist"], built["wheel"])
    assert output.count("PASSED") == 2, output


def test_the_sdist_builds_the_same_wheel(built):
    with zipfile.ZipFile(built["wheel"]) as a, zipfile.ZipFile(built["rebuilt"]) as b:
        names = sorted(a.namelist())
        assert names == sorted(b.namelist())
        for name in names:
            if name.endswith((".py", "METADATA", "WHEEL", "top_level.txt", "LICENSE")):
                assert a.read(name) == b.read(name), name
    assert os.path.basename(built["rebuilt"]) == os.path.basename(built["wheel"])
    tops = {name.split("/")[0] for name in names}
    assert tops == {
        "pyspark_pykafka",
        "protocol",
        "kafka_common",
        "kafka_source",
        "kafka_sink",
        "kafka_testbed",
        f"{NAME}.dist-info",
    }
    assert f"{NAME}.dist-info/licenses/LICENSE" in names
    with tarfile.open(built["sdist"]) as tf:
        files = set(tf.getnames())
    assert {name.split("/")[1] for name in files if name.count("/")} == {
        "pyproject.toml",
        "setup.py",
        "setup.cfg",
        "MANIFEST.in",
        "README.md",
        "LICENSE",
        "PKG-INFO",
        "pyspark_pykafka",
        "pyspark_pykafka.egg-info",
        "protocol",
        "kafka_common",
        "kafka_source",
        "kafka_sink",
        "kafka_testbed",
    }  # no tests/
    for name in (
        "pyproject.toml",
        "setup.py",
        "README.md",
        "LICENSE",
        "protocol/records/_fastdecode.c",
        "protocol/records/_fastencode.c",
        "protocol/version.py",
    ):
        assert f"{NAME}/{name}" in files, name


def test_metadata_says_what_the_project_is(built):
    from trove_classifiers import classifiers as known

    meta = wheel_metadata(built["wheel"])
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    assert "version" not in project and project["dynamic"] == ["version"]
    assert meta["Version"] == __version__
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta.get_all("License-File") == ["LICENSE"]
    assert meta["License"] is None
    classifiers = meta.get_all("Classifier")
    assert classifiers and set(classifiers) <= known, set(classifiers) - known
    assert not [c for c in classifiers if c.startswith("License ::")]  # PEP 639
    assert meta["Requires-Python"] == project["requires-python"]
    assert sorted(meta.get_all("Requires-Dist")[: len(project["dependencies"])]) == sorted(
        project["dependencies"]
    )
    assert set(meta.get_all("Provides-Extra")) == set(project["optional-dependencies"])
    assert meta["Description-Content-Type"] == "text/markdown"


def test_the_version_is_written_once():
    """pyproject.toml, the zip's name and the client software version sent to brokers
    all read protocol/version.py."""
    from protocol.client.connection import CLIENT_SOFTWARE_VERSION

    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    try:
        from build_pyfiles_zip import project_version
    finally:
        sys.path.pop(0)
    assert CLIENT_SOFTWARE_VERSION == project_version() == __version__
    written = []
    for folder in ("protocol", "kafka_common", "kafka_source", "kafka_sink", "scripts"):
        for dirpath, _, filenames in os.walk(os.path.join(ROOT, folder)):
            for name in filenames:
                if name.endswith(".py"):
                    with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                        if f'"{__version__}"' in f.read():
                            written.append(os.path.relpath(os.path.join(dirpath, name), ROOT))
    assert written == [os.path.join("protocol", "version.py")]


def test_the_top_level_names_are_written_once():
    """The packages and modules are named in protocol/version.py; every other place that
    names them all reads it, but for kafka_source.shadowing's copy (it checks that
    ``protocol`` is ours before it imports it), which must match."""
    from kafka_source.shadowing import INSTALLED_NAMES as copy
    from protocol import version

    assert sorted(copy) == sorted(version.INSTALLED_NAMES)
    assert set(version.RUNTIME_NAMES) | {"kafka_testbed"} == set(version.INSTALLED_NAMES)
    quoted = [f'"{n}"' for n in version.INSTALLED_NAMES]
    written = set()
    for name in (
        "setup.py",
        "pyproject.toml",
        "scripts",
        "kafka_common",
        "kafka_source",
        "kafka_sink",
        "pyspark_pykafka",
        "tests/helpers/python_envs.py",
    ):
        path = os.path.join(ROOT, name)
        paths = (
            [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs if f.endswith(".py")]
            if os.path.isdir(path)
            else [path]
        )
        for p in paths:
            with open(p, encoding="utf-8") as f:
                if any(sum(q in line for q in quoted) >= 3 for line in f):
                    written.add(os.path.relpath(p, ROOT))
    assert written == {os.path.join("kafka_source", "shadowing.py")}


@pytest.mark.timeout(900)
def test_installing_prints_no_warnings_and_editable_mode_is_a_plain_path(built, tmp_path):
    """``make install``'s editable install (setuptools' default mode, pip's isolated build)
    and an install of the wheel print no warning; the editable install puts the checkout
    on ``sys.path`` with a plain ``.pth`` line, which Spark's lookup of ``pyspark_*``
    modules (``pkgutil.iter_modules``) sees (tests/test_load_paths.py runs Spark on it)."""
    checkout = copy_sources(str(tmp_path / "checkout"))
    python = layered_env(str(tmp_path / "editable"))
    pip = [sys.executable, "-m", "pip", "--python", python, "--disable-pip-version-check"]
    output = run(*pip, "install", "--no-deps", "-e", checkout)
    assert warning_lines(output) == []
    pth = [n for n in os.listdir(site_packages(python)) if n.startswith("__editable__")]
    assert pth == [f"__editable__.{NAME}.pth"]
    with open(os.path.join(site_packages(python), pth[0])) as f:
        assert f.read().strip() == os.path.realpath(checkout)
    lookup = (
        "import pkgutil; print([(m.name, m.module_finder.path) for m in "
        "pkgutil.iter_modules() if m.name.startswith('pyspark_')])"
    )
    found = run(python, "-c", lookup, cwd=str(tmp_path), env=clean_env(python))
    assert found.strip() == repr([("pyspark_pykafka", os.path.realpath(checkout))])

    python = layered_env(str(tmp_path / "wheel"))
    output = run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        python,
        "--disable-pip-version-check",
        "install",
        "--no-deps",
        "--no-index",
        built["wheel"],
    )
    assert warning_lines(output) == []
    assert (
        run(
            python,
            "-c",
            "import pyspark_pykafka, protocol.version as v; print(v.__version__)",
            cwd=str(tmp_path),
            env=clean_env(python),
        ).strip()
        == __version__
    )
