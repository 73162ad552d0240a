"""Long fuzzing runs over every decoder (``make fuzz``).

With atheris installed (the ``fuzz`` extra, ``pip install -e '.[fuzz]'``, which ``make
fuzz`` installs when atheris is missing), each target of ``tests/fuzz/targets.py`` runs
coverage-guided for ``--seconds`` in its own process, starting from the targets' seeds,
with the protocol package instrumented. Each input goes through ``check_bounded``: an
exception other than the typed ones, more than a second or more than 8 MB allocated is a
crash; libFuzzer writes the input under
``--workdir``/artifacts (the corpus, kept between runs, under ``--workdir``/corpus).
Without atheris, the hypothesis fuzzers of ``tests/test_fuzz_decoders.py`` run with
``PYKAFKA_FUZZ_EXAMPLES`` (``--scale``) times their example counts.

Figures go to ``tests.helpers.reliability_report`` (``fuzz-atheris/<target>``).

    python tests/fuzz/run.py [--seconds 120] [--targets frames,records] [--engine auto]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _child(name: str, seconds: int, corpus: str, artifacts: str, stats_path: str) -> None:
    """Runs inside the per-target process: never returns (libFuzzer exits)."""
    sys.path.insert(0, ROOT)
    import atheris

    with atheris.instrument_imports(include=["protocol"]):
        import protocol.framing  # noqa: F401  (instrumented before the targets import it)
        import protocol.primitives  # noqa: F401
        import protocol.records  # noqa: F401
        import protocol.sasl  # noqa: F401
        import protocol.schema  # noqa: F401
    from tests.fuzz.targets import TARGETS, check_bounded

    target = TARGETS[name]
    os.makedirs(corpus, exist_ok=True)
    for i, seed in enumerate(target.seeds()):
        with open(os.path.join(corpus, f"seed-{i:04d}"), "wb") as f:
            f.write(seed)
    for seed in target.seeds():  # warm up: first use imports the codec libraries
        try:
            target.run(seed)
        except target.allowed:
            pass
    stats: dict = {}
    started = time.monotonic()
    last_dump = [0.0]

    def dump() -> None:
        stats["seconds"] = time.monotonic() - started
        with open(stats_path, "w") as f:
            json.dump(stats, f)

    def one_input(data: bytes) -> None:
        check_bounded(target, data, stats)
        now = time.monotonic()
        if now - last_dump[0] > 2:
            last_dump[0] = now
            dump()

    atheris.Setup(
        [
            sys.argv[0],
            f"-max_total_time={seconds}",
            "-timeout=10",
            "-rss_limit_mb=2048",
            "-max_len=65536",
            f"-artifact_prefix={artifacts}/",
            "-print_final_stats=1",
            corpus,
        ],
        one_input,
    )
    try:
        atheris.Fuzz()
    finally:
        dump()


def run_atheris(names: list[str], seconds: int, workdir: str) -> int:
    from tests.fuzz.targets import TARGETS
    from tests.helpers.reliability_report import record

    failures = 0
    for name in names:
        corpus = os.path.join(workdir, "corpus", name)
        artifacts = os.path.join(workdir, "artifacts", name)
        shutil.rmtree(artifacts, ignore_errors=True)  # crashes of this run only
        os.makedirs(artifacts, exist_ok=True)
        stats_path = os.path.join(workdir, f"{name}.json")
        print(f"== {name}: {seconds} s of atheris (corpus {corpus})", flush=True)
        started = time.monotonic()
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                name,
                "--seconds",
                str(seconds),
                "--corpus",
                corpus,
                "--artifacts",
                artifacts,
                "--stats",
                stats_path,
            ],
            cwd=ROOT,
        )
        elapsed = time.monotonic() - started
        try:
            with open(stats_path) as f:
                stats = json.load(f)
        except (OSError, ValueError):
            stats = {}
        crashes = sorted(os.listdir(artifacts))
        if proc.returncode or crashes:
            failures += 1
            print(f"!! {name}: exit code {proc.returncode}, artifacts: {crashes}", flush=True)
        errors = {k: v for k, v in stats.items() if k.startswith("error_")}
        record(
            f"fuzz-atheris/{name}",
            section="fuzz",
            what=f"{TARGETS[name].what} (atheris, coverage-guided, {seconds} s)",
            mode="make fuzz",
            faults=stats.get("inputs"),
            seconds=elapsed,
            max_cpu_ms=round(stats.get("max_ms", 0.0), 1),
            max_wall_ms=round(stats.get("max_wall_ms", 0.0), 1),
            max_peak_kb=stats.get("max_peak_kb"),
            decoded=stats.get("decoded", 0),
            crashes=len(crashes),
            corpus=len(os.listdir(corpus)),
            **errors,
        )
    return 1 if failures else 0


def run_hypothesis(names: list[str], scale: int) -> int:
    env = dict(os.environ, PYKAFKA_FUZZ_EXAMPLES=str(scale))
    selector = " or ".join(["seeds", "chunking"] + [f"test_{n}" for n in names])
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_fuzz_decoders.py",
            "-k",
            selector,
        ],
        cwd=ROOT,
        env=env,
    ).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=120, help="per target (atheris)")
    parser.add_argument("--targets", default="", help="comma-separated (default: all)")
    parser.add_argument("--engine", choices=["auto", "atheris", "hypothesis"], default="auto")
    parser.add_argument(
        "--scale", type=int, default=50, help="example-count multiplier (hypothesis engine)"
    )
    parser.add_argument(
        "--workdir", default=os.path.join(tempfile.gettempdir(), "pyspark-pykafka-fuzz")
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--corpus", help=argparse.SUPPRESS)
    parser.add_argument("--artifacts", help=argparse.SUPPRESS)
    parser.add_argument("--stats", help=argparse.SUPPRESS)
    args, _ = parser.parse_known_args(argv)
    if args.child:
        _child(args.child, args.seconds, args.corpus, args.artifacts, args.stats)
        return 0
    sys.path.insert(0, ROOT)
    from tests.fuzz.targets import TARGETS

    names = [n for n in args.targets.split(",") if n] or sorted(TARGETS)
    engine = args.engine
    if engine == "auto":
        try:
            import atheris  # noqa: F401

            engine = "atheris"
        except ImportError:
            print(
                "atheris is not installed: running the hypothesis fuzzers instead "
                f"({args.scale}x their example counts)",
                flush=True,
            )
            engine = "hypothesis"
    if engine == "atheris":
        return run_atheris(names, args.seconds, args.workdir)
    return run_hypothesis(names, args.scale)


if __name__ == "__main__":
    sys.exit(main())
