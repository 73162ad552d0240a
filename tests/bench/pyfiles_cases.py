"""The ``pyfiles`` section of ``make bench`` (issue 38): the connector shipped with
``spark-submit --py-files`` (the zip ``scripts/build_pyfiles_zip.py`` builds, which carries
the compiled record decoder and encoder for the Python that built it) against the same
connector installed, in one run: same Spark, same Python, same data.

Both run ``pyfiles_child.py`` under ``spark-submit --master local[--cores]`` with the
Python of ``tests/test_ship.py`` (``.venv-pyfiles``: PySpark and the connector's
dependencies, not the connector): "installed" with the checkout (and its compiled
extensions) on ``PYTHONPATH``, as an editable install puts it on the path; "zip" with
``--py-files`` and the zip alone, its extensions extracted to a cache directory of this
run. The two alternate twice (installed, zip, installed, zip), each child a fresh
``spark-submit`` with two warm-up reads and writes, then ``--pyfiles-rounds`` timed rounds of a
``spark.read`` (with the headers column) into ``noop`` and a ``df.write`` of the same rows,
cached beforehand, to a new topic. The topic: ``--pyfiles-records`` records (times
``--scale``) of 100 B with one header over ``--partitions`` partitions, on the run's
broker. Ratios are "zip / installed" in records per second (the installed seconds over the
zip's), of the medians of every timed round; the goal (>= 0.9x) is reported, never
asserted. Queries this short (about half a second on 2 cores) move with whatever else the
machine runs, so beside them are the ratio of each path's best round (the least disturbed)
and the Python workers' CPU per record of each path: what the compiled decoder and encoder
change.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CHILD = os.path.join(HERE, "pyfiles_child.py")
GOAL = 0.9  # zip / installed, read and write (issue 38, goal 4)
MODES = ("installed", "zip")
WARMUPS = 2  # untimed reads and writes first in each child (the JIT, the workers' imports)


def _build_zip(out_dir: str) -> str:
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    try:
        from build_pyfiles_zip import build
    finally:
        sys.path.pop(0)
    return build(out_dir)


def run_child(
    python: str, mode: str, zip_path: str, spec: dict, workdir: str, tag: str, cores: int, log
) -> dict:
    from tests.helpers.envs import clean_env

    spec_path = os.path.join(workdir, f"spec-{tag}.json")
    results_path = os.path.join(workdir, f"results-{tag}.json")
    with open(spec_path, "w") as f:
        json.dump({**spec, "mode": mode}, f)
    extra = {"PYKAFKA_CACHE_DIR": os.path.join(workdir, "cache")}
    if mode == "installed":
        extra["PYTHONPATH"] = ROOT
    command = [
        os.path.join(os.path.dirname(python), "spark-submit"),
        "--master",
        f"local[{cores}]",
        "--driver-memory",
        "2g",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.ui.showConsoleProgress=false",
        "--conf",
        f"spark.sql.shuffle.partitions={cores}",
        "--conf",
        "spark.python.authenticate.socketTimeout=120s",
        *(["--py-files", zip_path] if mode == "zip" else []),
        CHILD,
        spec_path,
        results_path,
    ]
    log(f"pyfiles: {tag} ({mode})")
    run_dir = os.path.join(workdir, f"cwd-{tag}")
    os.makedirs(run_dir)
    done = subprocess.run(
        command,
        cwd=run_dir,
        env=clean_env(python, **extra),
        timeout=900,
        stderr=subprocess.PIPE,
        text=True,
    )
    if done.returncode != 0 or not os.path.exists(results_path):
        raise RuntimeError(
            f"the pyfiles bench child ({mode}) ended with {done.returncode}: {done.stderr[-3000:]}"
        )
    with open(results_path) as f:
        return json.load(f)


def run_pyfiles(bootstrap: str, args, log) -> list[str]:
    """Everything of the section; returns its results.md lines."""
    from bench_data import DataSet, produce
    from tests.helpers.envs import pyfiles_python

    python = pyfiles_python()
    workdir = tempfile.mkdtemp(prefix="bench-pyfiles-")
    zip_path = _build_zip(os.path.join(workdir, "dist"))
    with zipfile.ZipFile(zip_path) as zf:
        manifest = "protocol/records/_compiled/manifest.json"
        tag = (
            json.loads(zf.read(manifest))["extensions"]["_fastdecode"]["cache_tag"]
            if manifest in zf.namelist()
            else None
        )
    ds = DataSet(
        "100B",
        max(args.partitions * 2, int(args.pyfiles_records * args.scale)),
        100,
        "none",
        args.partitions,
        topic="bench-pyfiles-100b",
    )
    produce(bootstrap, ds)
    log(f"pyfiles: produced {ds.describe()}")
    spec = {
        "bootstrap": bootstrap,
        "topic": ds.topic,
        "records": ds.records,
        "partitions": ds.partitions,
        "rounds": args.pyfiles_rounds,
        "warmups": WARMUPS,
    }
    runs = [
        run_child(python, mode, zip_path, spec, workdir, f"{i}-{mode}", args.cores, log)
        for i, mode in enumerate(MODES * 2)
    ]
    return render(runs, ds, args, tag, python)


def _median(runs: list[dict], mode: str, case: str) -> float:
    return statistics.median(x for r in runs if r["mode"] == mode for x in r[case])


def ratios(runs: list[dict]) -> dict[str, tuple[float, list[float]]]:
    """Per case: (zip / installed of the medians of every timed round, the same per
    installed-zip pair in the order they ran)."""
    out = {}
    for case in ("read", "write"):
        pooled = _median(runs, "installed", case) / _median(runs, "zip", case)
        pairs = [
            statistics.median(a[case]) / statistics.median(b[case])
            for a, b in zip(runs[0::2], runs[1::2])
        ]
        out[case] = (pooled, pairs)
    return out


def _where(path: str) -> str:
    """A worker's ``protocol.__file__``, shortly: the checkout, or the zip Spark shipped."""
    if path.startswith(ROOT + os.sep):
        return "the checkout (" + os.path.relpath(path, ROOT) + ")"
    head, sep, tail = path.partition(".zip" + os.sep)
    return f"the shipped zip ({os.path.basename(head)}.zip{os.sep}{tail})" if sep else path


def render(runs: list[dict], ds, args, tag: str | None, python: str) -> list[str]:
    per_m = 1e6 / ds.records
    compiled = (
        f"with its compiled record decoder and encoder for {tag}"
        if tag
        else "pure Python: built without the compiled extensions"
    )
    lines = [
        f"The connector shipped with `spark-submit --py-files` (the zip of "
        f"`scripts/build_pyfiles_zip.py`, {compiled}) against the same connector "
        "installed (the checkout and its compiled extensions on `PYTHONPATH`), same "
        f"Python ({os.path.relpath(python, ROOT)}: PySpark and the dependencies, not the "
        f"connector), `spark-submit --master local[{args.cores}]`, {ds.records:,} "
        f"records of {ds.value_size} B with one header over {ds.partitions} partitions. "
        "The two alternate twice (installed, zip, installed, zip), each a fresh "
        f"spark-submit: {WARMUPS} warm-up reads and writes, then {args.pyfiles_rounds} timed "
        "rounds of "
        "a `spark.read` with headers into `noop` and a `df.write` of the same rows "
        "(cached) to a new topic. Medians of every timed round; CPU: Spark's Python "
        "workers.",
        "",
        "| Case | Installed s | Zip s | Installed records/s | Zip records/s | "
        "Zip / installed | Worker CPU s/M installed | Worker CPU s/M zip |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    found = ratios(runs)
    for case, label in (("read", "spark.read -> noop"), ("write", "df.write")):
        inst, zipped = _median(runs, "installed", case), _median(runs, "zip", case)
        cpu = [_median(runs, mode, case + "_cpu") * per_m for mode in MODES]
        pooled, pairs = found[case]
        lines.append(
            f"| {label} | {inst:.2f} | {zipped:.2f} | {ds.records / inst:,.0f} | "
            f"{ds.records / zipped:,.0f} | {pooled:.2f}x "
            f"({', '.join(f'{p:.2f}x' for p in pairs)}) | {cpu[0]:.2f} | "
            f"{cpu[1]:.2f} |"
        )
    lines += [
        "",
        "(Zip / installed: of the medians of all rounds, then of each "
        "installed-zip pair in the order they ran.)",
        "",
    ]
    for mode in MODES:
        mine = [r for r in runs if r["mode"] == mode]
        imports = sorted({_where(path) for r in mine for path in r["worker_imports"]})
        accel = sorted({origin for r in mine for origin in r["worker_accel"]})
        lines.append(
            f"- {mode}: the workers imported `protocol` from "
            f"{', '.join(imports)}; compiled record decoder and "
            f"encoder: {', '.join(accel)} (driver: {mine[0]['driver_accel']})"
        )
    lines += ["", "Goals (reported, not asserted):", ""]
    for case in ("read", "write"):
        pooled, pairs = found[case]
        verdict = "**met**" if pooled >= GOAL else "**not met**"
        cpu = _median(runs, "installed", case + "_cpu") / _median(runs, "zip", case + "_cpu")
        best = min(x for r in runs if r["mode"] == "installed" for x in r[case]) / min(
            x for r in runs if r["mode"] == "zip" for x in r[case]
        )
        lines.append(
            f"- the --py-files path >= {GOAL}x the installed path, {case}: "
            f"{verdict} ({pooled:.2f}x; pairs "
            f"{', '.join(f'{p:.2f}x' for p in pairs)}; best rounds {best:.2f}x; "
            f"Python worker CPU per record, installed / zip: {cpu:.2f}x)"
        )
    return lines
