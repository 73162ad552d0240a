"""Shipping with ``spark-submit --py-files``: a real submit on a two-executor cluster,
the way the README tells users to.

``spark-submit --master "local-cluster[2,1,1024]"`` starts a standalone master, one worker
and two executor JVMs on this machine, each executor with its own Python workers. The job
and every Python process of the run use ``.venv-pyfiles/bin/python``: a virtualenv (built
here once, then reused) that holds pyspark and the connector's runtime dependencies but
*not* the connector, so on the executors ``kafka_source`` and friends can only come from
the zip that ``--py-files`` ships. As in the README, the zip is the one ``make dist``
builds (``scripts/build_pyfiles_zip.py``) and ``spark-submit`` runs from the checkout,
with no ``PYTHONPATH``.

The job writes a topic of Apache Kafka (the session's ``kafka``) with the sink and reads
it back with a batch read, up to the latest offsets.

Spark's automatic registration (``format("pykafka")`` without ``spark.dataSource.register``)
looks ``pyspark_*`` modules up once per driver JVM, in a Python worker it starts as
``python -m pyspark.sql.worker.lookup_data_sources``: its ``sys.path`` is the driver's
working directory (put there by ``-m``), pyspark's own path and the ``PYTHONPATH`` the JVM
was started with; the ``--py-files`` are not on it. Run from the checkout, that lookup sees
the checkout's ``pyspark_pykafka``; Spark registered it with none of the session's
Python files, and the executors, which see neither the checkout nor the zip then, failed
the first write with ``No module named 'kafka_sink'`` while loading the task. The connector
now offers itself to the lookup only from the Python path proper
(``pyspark_pykafka.auto_registration``), so the job below, which registers the source only
when Spark did not, registers it itself, with the zip. With the zip on ``PYTHONPATH`` as
well the lookup finds it there (``tests/test_load_paths.py``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import zipfile

import pytest

from .helpers.broker_setup import create_topic
from .helpers.envs import clean_env, pyfiles_python
from .helpers.library import ROOT

pytestmark = pytest.mark.spark

PARTITIONS = 3
ROWS = 3000  # a multiple of PARTITIONS

JOB = textwrap.dedent('''
    """Submitted by tests/test_ship.py: write a topic with the sink, read it back."""
    import json
    import os
    import sys

    from pyspark.sql import SparkSession

    bootstrap, topic = sys.argv[1], sys.argv[2]
    rows, partitions = int(sys.argv[3]), int(sys.argv[4])
    spark = SparkSession.builder.appName("pykafka-ship-test").getOrCreate()
    report = {"master": spark.sparkContext.master}

    # Automatic registration first: the lookup happens once, at the first data source call.
    try:
        (spark.read.format("pykafka").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic).load().schema)
        report["auto_registered"] = True
    except Exception as exc:
        report["auto_registered"] = False
        report["auto_error"] = " ".join(str(exc).split())[:1000]

    # As a job that works either way does: register when Spark did not, with the class
    # imported from the --py-files zip.
    import pyspark_pykafka
    if not report["auto_registered"]:
        spark.dataSource.register(pyspark_pykafka.DefaultSource)
    report["driver_imports"] = [pyspark_pykafka.__file__, sys.modules["kafka_source"].__file__]

    df = spark.range(0, rows, 1, 4).selectExpr(
        "format_string('k%05d', id) AS key",
        "format_string('v%05d', id) AS value",
        f"cast(id % {partitions} AS int) AS partition")
    (df.write.format("pykafka").mode("append")
       .option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
       .option("kafka.compression.type", "zstd")
       .save())

    back = (spark.read.format("pykafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).load())
    report["rows"] = [list(r) for r in back.selectExpr(
        "cast(key AS string)", "cast(value AS string)", "partition", "offset").collect()]

    def where(_):
        import kafka_sink
        yield os.getppid(), kafka_sink.__file__, sys.executable
    probes = spark.sparkContext.parallelize(range(8), 8).mapPartitions(where).collect()
    report["executor_imports"] = sorted({file for _, file, _ in probes})
    report["executor_pythons"] = sorted({exe for _, _, exe in probes})
    report["executors"] = spark.sparkContext._jsc.sc().getExecutorIds().size()
    print("REPORT " + json.dumps(report), flush=True)
    spark.stop()
''')


def _project_version() -> str:
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    try:
        from build_pyfiles_zip import project_version
    finally:
        sys.path.pop(0)
    return project_version()


def test_zip_holds_the_library_and_nothing_else(pyfiles_zip):
    with zipfile.ZipFile(pyfiles_zip) as zf:
        names = zf.namelist()
    assert os.path.basename(pyfiles_zip) == f"pyspark_pykafka-{_project_version()}.zip"
    for package in (
        "pyspark_pykafka",
        "protocol",
        "protocol/records",
        "protocol/schemas",
        "kafka_common",
        "kafka_source",
        "kafka_sink",
    ):
        assert f"{package}/__init__.py" in names
    tops = {name.split("/")[0] for name in names}
    assert tops == {"pyspark_pykafka", "protocol", "kafka_common", "kafka_source", "kafka_sink"}
    # besides the modules, only the compiled record decoder and encoder and their manifest
    # (tests/test_pyfiles_compiled.py)
    compiled = [name for name in names if name.startswith("protocol/records/_compiled/")]
    assert all(
        name.endswith((".py", ".pyc")) and "__pycache__" not in name
        for name in names
        if name not in compiled
    )
    assert all(name.endswith((".so", ".pyd", "/manifest.json")) for name in compiled), compiled


def test_every_source_has_its_byte_code_beside_it(pyfiles_zip):
    """``pkg/mod.pyc`` next to each ``pkg/mod.py`` (where zipimport looks), and nothing
    else: this Python's magic number, PEP 552 flags "hash-based, unchecked" and the hash
    of the very source beside it."""
    with zipfile.ZipFile(pyfiles_zip) as zf:
        entries = {name: zf.read(name) for name in zf.namelist()}
    sources = sorted(name for name in entries if name.endswith(".py"))
    assert sorted(name for name in entries if name.endswith(".pyc")) == [
        name + "c" for name in sources
    ]
    for name in sources:
        pyc = entries[name + "c"]
        assert pyc[:4] == importlib.util.MAGIC_NUMBER, name
        assert int.from_bytes(pyc[4:8], "little") == 0b01, name
        assert pyc[8:16] == importlib.util.source_hash(entries[name]), name


def test_the_zip_is_reproducible(pyfiles_zip, tmp_path):
    """Two more builds, in interpreters with other string hash seeds (the order of a
    frozenset constant in marshalled code would follow it): the same bytes."""
    builds = []
    for seed in ("1", "2"):
        out = tmp_path / seed
        done = subprocess.run(
            [
                sys.executable,
                os.path.join(ROOT, "scripts", "build_pyfiles_zip.py"),
                "--out-dir",
                str(out),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
            check=True,
        )
        with open(done.stdout.strip(), "rb") as f:
            builds.append(f.read())
    with open(pyfiles_zip, "rb") as f:
        assert builds == [f.read()] * 2


# Run in a child Python whose only way to the connector is the zip (argv[1]): what the
# modules' specs, code objects and tracebacks say about where their code came from.
IMPORT_PROBE = textwrap.dedent("""
    import importlib.util, json, sys, traceback
    assert importlib.util.find_spec("kafka_sink") is None  # not installed here
    executed = set()  # co_filename of each module body run: importers exec() it
    sys.addaudithook(lambda event, args: executed.add(args[0].co_filename)
                     if event == "exec" and args[0].co_name == "<module>" else None)
    sys.path.insert(0, sys.argv[1])
    import kafka_sink.writer, pyspark_pykafka.datasource
    from kafka_source.options import parse_duration_ms
    report = {"executed": sorted(executed)}
    for name in ("kafka_sink", "kafka_sink.writer", "kafka_sink.options", "kafka_source",
                 "pyspark_pykafka.datasource"):
        module = sys.modules[name]
        report[name] = {
            "loader": type(module.__loader__).__module__ + "." + type(module.__loader__).__name__,
            "archive": module.__loader__.archive, "origin": module.__spec__.origin,
            "file": module.__file__, "cached": module.__cached__}
    try:
        parse_duration_ms("soon")
    except Exception as exc:
        last = traceback.extract_tb(exc.__traceback__)[-1]
        report["traceback"] = [last.filename, last.lineno, last.line]
        report["formatted"] = traceback.format_exc()
    print(json.dumps(report))
""")


def import_probe(zip_path: str, *flags: str) -> dict:
    """What ``IMPORT_PROBE`` reports, run isolated (``-I``: no ``PYTHONPATH``, no working
    directory on ``sys.path``) by the Python of the ``--py-files`` runs."""
    python = pyfiles_python()
    done = subprocess.run(
        [python, "-I", *flags, "-c", IMPORT_PROBE, zip_path],
        cwd=os.path.dirname(zip_path),
        capture_output=True,
        text=True,
        env=clean_env(python),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)


def copy_of_zip(zip_path: str, out: str, change) -> str:
    """A copy of the zip at ``out`` with each entry's bytes as ``change(name, data)``
    returns them (None: left out)."""
    with zipfile.ZipFile(zip_path) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = change(info.filename, src.read(info))
            if data is not None:
                dst.writestr(info, data)
    return out


def assert_from_byte_code(report: dict, zip_path: str, name: str, path: str) -> None:
    """``name`` ran the zip's ``path + "c"``: zipimport's spec names the .pyc as origin,
    ``__file__`` and ``__cached__``, and the module body run carries the name the builder
    compiled it with, the bare path inside the zip (zipimport compiling the source names it
    ``<zip>/path``)."""
    module = report[name]
    assert module["loader"] == "zipimport.zipimporter" and module["archive"] == zip_path
    pyc = os.path.join(zip_path, path + "c")
    assert (module["origin"], module["file"], module["cached"]) == (pyc, pyc, pyc), name
    assert path in report["executed"], name
    assert os.path.join(zip_path, path) not in report["executed"], name


def test_modules_run_the_zip_s_byte_code_with_source_lines_in_tracebacks(pyfiles_zip):
    for flags in ((), ("--check-hash-based-pycs", "always")):  # also: the hashes match
        report = import_probe(pyfiles_zip, *flags)
        for name, path in (
            ("kafka_sink", "kafka_sink/__init__.py"),
            ("kafka_sink.writer", "kafka_sink/writer.py"),
            ("kafka_sink.options", "kafka_sink/options.py"),
            ("kafka_source", "kafka_source/__init__.py"),
            ("pyspark_pykafka.datasource", "pyspark_pykafka/datasource.py"),
        ):
            assert_from_byte_code(report, pyfiles_zip, name, path)
    # The traceback names the file inside the zip and shows its source line (linecache
    # asks the module's loader, the zip importer, for the source).
    filename, lineno, line = report["traceback"]
    with zipfile.ZipFile(pyfiles_zip) as zf:
        source = zf.read("kafka_source/options.py").decode().splitlines()
    assert filename == "kafka_source/options.py"
    assert line == source[lineno - 1].strip() == "raise ConfigError("
    assert (
        f'File "kafka_source/options.py", line {lineno}, in parse_duration_ms\n'
        "    raise ConfigError(\n"
    ) in report["formatted"]


def test_byte_code_whose_source_is_gone_still_imports(pyfiles_zip, tmp_path):
    """The proof that the .pyc is what runs: a copy of the zip without the sources of
    the modules imported (their .pyc kept) imports them all the same."""
    gone = {"kafka_sink/writer.py", "pyspark_pykafka/datasource.py", "kafka_source/__init__.py"}
    copy = copy_of_zip(
        pyfiles_zip,
        str(tmp_path / "no-sources.zip"),
        lambda name, data: None if name in gone else data,
    )
    report = import_probe(copy)
    for name, path in (
        ("kafka_sink.writer", "kafka_sink/writer.py"),
        ("kafka_source", "kafka_source/__init__.py"),
        ("pyspark_pykafka.datasource", "pyspark_pykafka/datasource.py"),
    ):
        assert_from_byte_code(report, copy, name, path)


def test_another_python_version_compiles_the_sources(pyfiles_zip, tmp_path):
    """A .pyc of another Python version (another magic number, as a zip built by it would
    carry) is skipped by zipimport (``_unmarshal_code`` raises "bad magic number", which
    ``_get_module_code`` takes as "try the next suffix"), which then compiles the ``.py``
    beside it: for a module and for a package's ``__init__``; the others still run
    their byte-code."""
    own = importlib.util.MAGIC_NUMBER
    foreign = (int.from_bytes(own[:2], "little") + 1).to_bytes(2, "little") + own[2:]
    stale = {"kafka_sink/writer.pyc", "kafka_source/__init__.pyc"}
    copy = copy_of_zip(
        pyfiles_zip,
        str(tmp_path / "foreign.zip"),
        lambda name, data: foreign + data[4:] if name in stale else data,
    )
    report = import_probe(copy)
    for name, path in (
        ("kafka_sink.writer", "kafka_sink/writer.py"),
        ("kafka_source", "kafka_source/__init__.py"),
    ):
        module = report[name]
        source = os.path.join(copy, path)
        assert module["loader"] == "zipimport.zipimporter" and module["archive"] == copy
        assert (module["origin"], module["file"]) == (source, source), name
        assert source in report["executed"], name  # compiled here, from the source
        assert path not in report["executed"], name
    assert_from_byte_code(report, copy, "kafka_sink.options", "kafka_sink/options.py")
    assert_from_byte_code(
        report, copy, "pyspark_pykafka.datasource", "pyspark_pykafka/datasource.py"
    )


def test_the_zip_alone_serves_spark_s_registration_lookup(pyfiles_zip, tmp_path):
    """What ``pyspark.sql.worker.lookup_data_sources`` does, in an interpreter whose only
    way to the connector is the zip on ``PYTHONPATH``: the zip importer lists
    ``pyspark_pykafka`` and its ``DefaultSource`` is the pykafka source."""
    python = pyfiles_python()
    lookup = textwrap.dedent("""
        from importlib import import_module
        from pkgutil import iter_modules
        found = {}
        for info in iter_modules():
            if info.name.startswith("pyspark_"):
                module = import_module(info.name)
                found[info.name] = (module.DefaultSource.name(), module.__file__)
        print(found)
    """)
    done = subprocess.run(
        [python, "-c", lookup],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=clean_env(python, PYTHONPATH=pyfiles_zip),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == repr(
        {
            "pyspark_pykafka": (  # run from its byte-code
                "pykafka",
                os.path.join(pyfiles_zip, "pyspark_pykafka", "__init__.pyc"),
            )
        }
    )


def test_the_lookup_does_not_register_the_connector_from_its_working_directory_alone(
    pyfiles_zip, tmp_path
):
    """Spark's own lookup code (``pyspark.sql.worker.lookup_data_sources._main``), run with
    the working directory first on ``sys.path`` as ``python -m`` has it, in a directory
    holding the unpacked zip: no ``pykafka`` from there alone; with the zip on
    ``PYTHONPATH`` as well, ``pykafka`` (served from the zip)."""
    python = pyfiles_python()
    with zipfile.ZipFile(pyfiles_zip) as zf:
        zf.extractall(tmp_path)
    lookup = textwrap.dedent("""
        import io, os, sys
        sys.path.insert(0, os.getcwd())
        from pyspark.serializers import read_int
        from pyspark.sql.worker import lookup_data_sources
        out = io.BytesIO()
        lookup_data_sources._main(None, out)
        out.seek(0)
        names = []
        for _ in range(read_int(out)):
            names.append(out.read(read_int(out)).decode())
            out.read(read_int(out))  # the pickled class
        print(names)
    """)
    alone = subprocess.run(
        [python, "-c", lookup], cwd=tmp_path, capture_output=True, text=True, env=clean_env(python)
    )
    assert alone.returncode == 0, alone.stderr
    assert alone.stdout.strip() == "[]"
    assert (
        "not registering format('pykafka') by itself: Spark's data source lookup finds it "
        f"only in the driver's working directory ({os.path.realpath(tmp_path)})" in alone.stderr
    )
    with_zip = subprocess.run(
        [python, "-c", lookup],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=clean_env(python, PYTHONPATH=pyfiles_zip),
    )
    assert with_zip.returncode == 0, with_zip.stderr
    assert with_zip.stdout.strip() == "['pykafka']"
    assert "not registering" not in with_zip.stderr


@pytest.mark.timeout(900)  # the first run also builds .venv-pyfiles; JVMs start slowly
def test_spark_submit_py_files_on_a_two_executor_cluster(kafka, topic_name, pyfiles_zip, tmp_path):
    python = pyfiles_python()
    # The interpreter of the run cannot import the connector by itself.
    probe = subprocess.run(
        [python, "-c", "import kafka_source"],
        cwd=tmp_path,
        env=clean_env(python),
        capture_output=True,
        text=True,
    )
    assert probe.returncode != 0 and "No module named 'kafka_source'" in probe.stderr

    create_topic(kafka, topic_name, PARTITIONS)
    job = tmp_path / "job.py"
    job.write_text(JOB)
    command = [
        os.path.join(os.path.dirname(python), "spark-submit"),
        "--master",
        "local-cluster[2,1,1024]",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.ui.showConsoleProgress=false",
        "--conf",
        "spark.sql.shuffle.partitions=2",
        "--conf",
        "spark.python.authenticate.socketTimeout=120s",  # slow machines
        "--py-files",
        pyfiles_zip,
        str(job),
        kafka.bootstrap,
        topic_name,
        str(ROWS),
        str(PARTITIONS),
    ]
    # As the README says: from the checkout, with no PYTHONPATH. The checkout's own
    # pyspark_pykafka is then in the working directory of Spark's registration lookup.
    assert os.path.isfile(os.path.join(ROOT, "pyspark_pykafka", "__init__.py"))
    done = subprocess.run(
        command, cwd=ROOT, env=clean_env(python), capture_output=True, text=True, timeout=600
    )
    reports = [line for line in done.stdout.splitlines() if line.startswith("REPORT ")]
    assert done.returncode == 0 and reports, (done.stdout[-3000:], done.stderr[-6000:])
    report = json.loads(reports[-1][len("REPORT ") :])

    assert report["master"] == "local-cluster[2,1,1024]"
    assert report["executors"] == 2
    # Spark's lookup saw the checkout only through its working directory: no registration
    # that the executors could not serve, and a line on the driver's stderr saying why.
    assert report["auto_registered"] is False
    assert "[DATA_SOURCE_NOT_FOUND]" in report["auto_error"], report["auto_error"]
    assert (
        "not registering format('pykafka') by itself: Spark's data source lookup finds "
        f"it only in the driver's working directory ({os.path.realpath(ROOT)})" in done.stderr
    )
    zip_name = os.path.basename(pyfiles_zip)
    for path in report["driver_imports"] + report["executor_imports"]:
        assert f"{zip_name}{os.sep}" in path, path  # imported from the shipped zip
    assert report["executor_pythons"] == [python]

    rows = report["rows"]
    assert len(rows) == ROWS
    by_id = {
        int(key[1:]): (key, value, partition, offset) for key, value, partition, offset in rows
    }
    assert sorted(by_id) == list(range(ROWS))
    for i, (key, value, partition, _offset) in by_id.items():
        assert (key, value, partition) == (f"k{i:05d}", f"v{i:05d}", i % PARTITIONS)
    for p in range(PARTITIONS):
        offsets = sorted(offset for _, _, partition, offset in rows if partition == p)
        assert offsets == list(range(ROWS // PARTITIONS))
