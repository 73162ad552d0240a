"""Figures of the fault, fuzz and timeout tests, and the page they make: tests/RELIABILITY.md.

The tests call ``record(name, ...)`` with what they measured (faults injected, records
checked, lost, duplicated, seconds); the figures go to a JSON file in the temp directory
(``$PYKAFKA_RELIABILITY_JSON`` to choose another), one entry per test, the last run's
winning. ``python tests/helpers/reliability_report.py [--json FILE]`` renders that file as
``tests/RELIABILITY.md``. ``make soak``, ``make soak-hour`` and ``make fuzz`` record into a
file of their own and, after their runs, merge it into the figures the page is made from
(``tests/reliability-figures.json``, kept with the page: a run replaces its own tests'
entries and keeps the others') and render the page; ``make test`` only records, into the
default file.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import sys
import tempfile

DEFAULT_JSON = os.path.join(tempfile.gettempdir(), "pyspark-pykafka-reliability.json")
TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(TESTS, "RELIABILITY.md")
#: Every test's last figures, the page's source: runs merge theirs in (``main``).
FIGURES = os.path.join(TESTS, "reliability-figures.json")

#: Sections of the page, in order, and the tests' name prefixes that belong to them.
SECTIONS = [
    ("faults", "Faults injected into real brokers"),
    ("kafka_faults", "Apache Kafka, brokers dying"),
    ("hostile", "Hostile brokers"),
    ("timeouts", "Timeouts against a peer that stops answering"),
    ("fuzz", "Fuzzing the decoders"),
    ("security", "Secrets"),
]
COLUMNS = ["faults", "records", "lost", "duplicated", "seconds"]

#: What the tests below found, each fixed in its own commit (see git log).
FINDINGS = [
    "`read_range`: a Fetch response without the partition asked for (a bit flipped in its "
    "topic or partition) escaped as a `KeyError`; now fetched again.",
    "`KafkaClient.refresh_metadata`: a reused connection closed by a broker that went down "
    "failed the refresh (and a streaming query's `latestOffset`); now another broker is "
    "asked.",
    "Driver planning: a connection cut during partition discovery failed `spark.read` at "
    "once; metadata is now retried like the offset lookups (`fetchOffset.numRetries`).",
    "`read_range`: waits were bounded by `request.timeout.ms`, not `pollTimeoutMs` (a "
    "silent broker took 60 s against a 3 s poll timeout); the Fetch sent ahead could raise "
    "out of the loop when its connection had just broken; Spark's own time on a batch "
    "counted against the poll timeout.",
    "SASL: a broker echoing the PLAIN password in its error message got it into our "
    "exception; now redacted. SCRAM refusals now name the user and the broker.",
    "`decode_records`: a header-count varint overflowing 32 bits escaped as `VarintError` "
    "(found by atheris).",
    "Sink: a delivery timeout of a batch that never left said `last error: none`; it now "
    "names the failed metadata refresh.",
    "Streaming sink: the driver checked the topic (and transactions) again at every "
    "micro-batch's commit, and a connection cut during the transactions check failed the "
    "query (found by the stream soak); the check now passes once per "
    "`kafka.metadata.max.age.ms` and retries a broken connection.",
    "`read_range` (found by the Apache Kafka fault tests): a Fetch that its leader left "
    "unanswered (a SIGSTOPped broker) was retried without a word on the executor, so a "
    "stalled task showed only as a slow batch; now a warning names the broker and how "
    "long the Fetch was waited for, and another the stall's length when reading resumes.",
    "Stream soak's referee (not the connector): it counted values, and the source log "
    "holds a few values twice, because librdkafka's mock cluster appends an idempotent "
    "producer's re-sent batch again (it checks sequences only for transactional "
    "producers) when a broker outage loses the answer; every repeated value was at two "
    "source offsets, each written to the target once. The soak now carries each source "
    "record's offset into the target and counts offsets.",
]


def json_path() -> str:
    return os.environ.get("PYKAFKA_RELIABILITY_JSON") or DEFAULT_JSON


def soak() -> bool:
    """Whether this is a soak run (``PYKAFKA_SOAK=1``, ``make soak``): full-size counts."""
    return os.environ.get("PYKAFKA_SOAK", "") not in ("", "0")


def load(path: str | None = None) -> dict:
    try:
        with open(path or json_path()) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def record(
    name: str,
    *,
    section: str,
    what: str,
    faults: int | None = None,
    records: int | None = None,
    lost: int | None = None,
    duplicated: int | None = None,
    seconds: float | None = None,
    mode: str | None = None,
    **details,
) -> None:
    """Store one test's figures (replacing the previous run's). ``mode`` names the run
    (default: "soak" under ``PYKAFKA_SOAK=1``, else "default")."""
    path = json_path()
    entries = load(path)
    series = details.pop("series", None)
    entries[name] = {
        "section": section,
        "what": what,
        "faults": faults,
        "records": records,
        "lost": lost,
        "duplicated": duplicated,
        "seconds": None if seconds is None else round(seconds, 2),
        "details": details,
        "soak": soak(),
        "mode": mode or ("soak" if soak() else "default"),
        "at": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    if series:
        entries[name]["series"] = series
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(entries, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def _cell(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


#: Series a test samples over its run (``record(..., series={column: [values]})``, with a
#: ``t_s`` column of seconds), drawn one panel each into a picture beside the page.
SERIES_PANELS = [
    ("workers_rss_mb", "Python workers' RSS (MB, summed)"),
    ("jvm_rss_mb", "Spark's JVM RSS (MB)"),
    ("fds", "open descriptors (workers + JVM)"),
    ("connections", "broker connections"),
    ("producer_ids", "producer ids"),
]


def draw_series(name: str, series: dict, directory: str) -> str | None:
    """The series of one test as a PNG in ``directory`` (matplotlib, the dev extra's);
    returns its file name, or None without matplotlib or samples."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [v / 60 for v in series.get("t_s") or []]
    panels = [
        (k, title) for k, title in SERIES_PANELS if any(v is not None for v in series.get(k) or [])
    ]
    if not t or not panels:
        return None
    fig, axes = plt.subplots(len(panels), 1, figsize=(6.4, 1.6 * len(panels)), sharex=True)
    for ax, (key, title) in zip(axes if len(panels) > 1 else [axes], panels):
        ax.plot(t, series[key], ".-", markersize=3)
        ax.set_title(title, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
    (axes[-1] if len(panels) > 1 else axes).set_xlabel("minutes", fontsize=8)
    fig.tight_layout()
    file = "reliability-" + "".join(c if c.isalnum() else "-" for c in name) + ".png"
    fig.savefig(os.path.join(directory, file), dpi=90)
    plt.close(fig)
    return file


def _series_lines(name: str, series: dict, directory: str) -> list[str]:
    """The picture and a table of the samples, one row every five minutes or so."""
    file = draw_series(name, series, directory)
    out = [f"![{name}]({file})", ""] if file else []
    t = series.get("t_s") or []
    if not t:
        return out
    columns = [c for c in series if c != "t_s"]
    step = max(1, len(t) // 12)
    rows = list(range(0, len(t), step)) + ([len(t) - 1] if (len(t) - 1) % step else [])
    out += [
        f"`{name}`, sampled:",
        "",
        "| minutes | " + " | ".join(columns) + " |",
        "|---:|" + "---:|" * len(columns),
    ]
    for i in rows:
        out.append(
            f"| {t[i] / 60:.1f} | " + " | ".join(_cell(series[c][i]) for c in columns) + " |"
        )
    return out + [""]


def render(entries: dict, directory: str | None = None) -> str:
    lines = [
        "# Reliability figures",
        "",
        "Written by `tests/helpers/reliability_report.py` from the figures the last run of the "
        "reliability tests recorded (`make soak` runs them at full size and renders this "
        "page; `make fuzz` adds the long fuzzing runs). Every test asserts its own "
        "expectations; this page only reports what was measured. *faults*: faults "
        "injected (cut connections, dropped answers, broker errors, flipped bytes, hostile "
        "answers, fuzz inputs); *records*: records (or inputs) checked; *lost* / "
        "*duplicated*: records missing or seen twice at the end; *seconds*: the test's "
        "wall time.",
        "",
        f"Machine: {platform.system()} {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}.",
        "",
    ]
    lines += ["## Bugs these tests found (fixed)", ""] + [f"- {f}" for f in FINDINGS] + [""]
    known = {key for key, _ in SECTIONS}
    for key, title in SECTIONS + [("other", "Other")]:
        rows = sorted(
            (n, e)
            for n, e in entries.items()
            if e.get("section") == key or (key == "other" and e.get("section") not in known)
        )
        if not rows:
            continue
        lines += [
            f"## {title}",
            "",
            "| test | what | " + " | ".join(COLUMNS) + " | run |",
            "|---|---|" + "---:|" * len(COLUMNS) + "---|",
        ]
        for name, e in rows:
            run = f"{e.get('mode', 'soak' if e.get('soak') else 'default')}, {e.get('at', '?')}"
            lines.append(
                f"| `{name}` | {e.get('what', '')} | "
                + " | ".join(_cell(e.get(c)) for c in COLUMNS)
                + f" | {run} |"
            )
        details = [(n, e["details"]) for n, e in rows if e.get("details")]
        if details:
            lines.append("")
            for name, d in details:
                text = ", ".join(f"{k}={_cell(v)}" for k, v in sorted(d.items()))
                lines.append(f"- `{name}`: {text}")
        lines.append("")
        for name, e in rows:
            if e.get("series"):
                lines += _series_lines(name, e["series"], directory or os.path.dirname(DEFAULT_OUT))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=json_path(), help="figures recorded by the tests")
    parser.add_argument(
        "--figures", default=FIGURES, help="the figures the page is made from, which the run's join"
    )
    parser.add_argument("--out", default=DEFAULT_OUT, help="the page to write")
    args = parser.parse_args(argv)
    run = load(args.json)
    if not run:
        print(f"no figures in {args.json}: run the reliability tests first", file=sys.stderr)
        return 1
    entries = {**load(args.figures), **run}
    with open(args.figures, "w") as f:
        json.dump(entries, f, indent=1, sort_keys=True)
        f.write("\n")
    with open(args.out, "w") as f:
        f.write(render(entries, os.path.dirname(os.path.abspath(args.out))))
    print(f"wrote {args.out} ({len(run)} tests of this run, {len(entries)} in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
