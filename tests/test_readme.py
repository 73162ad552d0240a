"""README.md and the docs pages (docs/*.md, the MkDocs site of `make docs`) say what the code
does: the option tables of docs/options.md list exactly the options the reader and the
writer accept, the commands they name exist, their file names carry the project's version,
the repository files they name exist, and docker-compose.yml serves the address the README
tells users to use. The README stays short and maps every page; every page is in
mkdocs.yml's nav (the build itself, strict, runs in `make docs`, not here)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from kafka_sink.option_table import writer_option_names
from kafka_source.option_table import reader_option_names

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read(name: str) -> str:
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        return f.read()


README = read("README.md")
DOCS = os.path.join(ROOT, "docs")
PAGES = {
    name: read(os.path.join("docs", name))
    for name in sorted(os.listdir(DOCS))
    if name.endswith(".md")
}
OPTIONS_PAGE = PAGES["options.md"]
#: the README and every docs page, for checks that hold wherever the text sits
ALL_TEXT = "\n".join([README, *PAGES.values()])
README_MAX_LINES = 300


def table_options(marker: str) -> list[str]:
    """The first-column option names of the table between the ``marker`` comments."""
    match = re.search(
        rf"<!-- BEGIN {marker}\b[^>]*-->\n(.*?)<!-- END {marker} -->", OPTIONS_PAGE, re.S
    )
    assert match, f"docs/options.md has no {marker} block"
    names = []
    for line in match.group(1).splitlines():
        cell = re.match(r"\|\s*`([^`]+)`\s*\|", line)
        if cell:
            names.append(cell.group(1))
    return names


@pytest.mark.parametrize(
    "marker, names",
    [
        ("reader-options", reader_option_names),
        ("writer-options", writer_option_names),
    ],
)
def test_option_tables_list_exactly_the_accepted_options(marker, names):
    listed = table_options(marker)
    assert len(listed) == len(set(listed)), "an option is listed twice"
    assert listed == list(names())


def test_option_tables_are_the_generated_ones():
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "render_option_tables.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def test_performance_section_quotes_the_bench_results():
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "render_bench_summary.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def test_a_full_bench_run_keeps_the_blocks_of_sections_it_did_not_run():
    sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
    try:
        import result_blocks as blocks
    finally:
        sys.path.pop(0)
    old = blocks.splice(
        blocks.splice("main, old\n\n## Peer settings\nx\n", "jvm", ["jvm, old"], "day 1"),
        "racks",
        ["racks, old"],
        "day 1",
    )
    new = blocks.splice("main, new\n\n## Peer settings\nx\n", "jvm", ["jvm, new"], "day 2")
    kept = blocks.carry_over(old, new)
    assert "main, new" in kept and "jvm, new" in kept and "jvm, old" not in kept
    assert "Racks (kafka.client.rack) section run day 1.\n\nracks, old" in kept
    assert kept.index(blocks.end("racks")) < kept.index("## Peer settings")
    assert blocks.carry_over(old, kept) == kept


def test_bench_summary_takes_the_main_data_set_rows_and_the_goals():
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    try:
        from render_bench_summary import summary
    finally:
        sys.path.pop(0)
    results = "\n".join(
        [
            "Run 2026-01-01 with `make bench`.",
            "",
            "Machine: cores 2.",
            "",
            "| Case | Data | Records/s | Spread | MB/s | x best peer | of wire |",
            "|---|---|---:|---:|---:|---:|---:|",
            "| wire | 100B | 2 M | 1% | 1 |  |  |",
            "| wire | 1KB | 1 M | 1% | 1 |  |  |",
            "",
            "Goals (from the issue; reported, not asserted):",
            "",
            "- decode: **met**",
            "  - for scale",
            "",
            "after",
        ]
    )
    text = summary(results)
    assert "| wire | 100B |" in text and "1KB" not in text
    assert "- decode: **met**\n  - for scale\n" in text and "after" not in text
    assert text.startswith("Run 2026-01-01 with `make bench`. Machine: cores 2.")
    assert "Streaming" not in text  # no streaming block in these results


def test_bench_summary_quotes_the_streaming_block():
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    try:
        from render_bench_summary import summary
    finally:
        sys.path.pop(0)
    results = "\n".join(
        [
            "Run 2026-01-01 with `make bench`.",
            "",
            "Machine: cores 2.",
            "",
            "| Case | Data | Records/s | Spread | MB/s | x best peer | of wire |",
            "|---|---|---:|---:|---:|---:|---:|",
            "| wire | 100B | 2 M | 1% | 1 |  |  |",
            "",
            "Streaming section run 2026-01-02 10:00 (x).",
            "",
            "Streaming: ...",
            "",
            "| Source | Micro-batches/s | Latency p50 ms |",
            "|---|---:|---:|",
            "| readStream pykafka | 2.00 | 300 |",
            "",
            "| Source | latestOffset |",
            "| pykafka | 3 |",
            "",
            "Streaming goals (reported, not asserted):",
            "",
            "- latency p50: **met** (1.1x)",
            "- connections: **not met** (8.0)",
            "",
            "after",
        ]
    )
    text = summary(results)
    assert "run 2026-01-02 10:00 (x)." in text
    assert "| readStream pykafka | 2.00 | 300 |" in text and "latestOffset" not in text
    assert text.endswith("- latency p50: **met** (1.1x)\n- connections: **not met** (8.0)\n")


def makefile_targets() -> set[str]:
    return set(re.findall(r"^([A-Za-z][\w.-]*)\s*:(?!=)", read("Makefile"), re.M))


def test_quick_start_commands_are_makefile_targets():
    quick_start = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^make (\w+)", quick_start, re.M)
    assert {"demo", "test"} <= set(commands)
    assert set(commands) <= makefile_targets()


def test_every_make_command_in_the_readme_and_the_docs_exists():
    mentioned = set(re.findall(r"\bmake ([\w-]+)", ALL_TEXT))
    assert mentioned and mentioned <= makefile_targets(), mentioned - makefile_targets()


def test_file_names_carry_the_project_version():
    from protocol.version import __version__ as version

    named = re.findall(r"pyspark_pykafka-(\d[\w.]*?)(?:-py3|-cp\d|\.zip)", ALL_TEXT)
    assert named and set(named) == {version}


def test_every_example_is_in_the_readme():
    examples = sorted(
        name
        for name in os.listdir(os.path.join(ROOT, "examples"))
        if name.endswith(".py") and not name.startswith("_") and name != "demo.py"
    )  # `make demo`
    assert examples
    for name in examples:
        assert f"(examples/{name})" in README, name


def test_docker_compose_serves_localhost_9092_as_the_readme_says():
    import yaml

    compose = yaml.safe_load(read("docker-compose.yml"))
    ((name, kafka),) = compose["services"].items()
    # KAFKA_IMAGE picks another (.github/workflows/kafka.yml's matrix); the default is 4.x
    assert re.fullmatch(r"\$\{KAFKA_IMAGE:-apache/kafka:4\.[\w.-]+\}", kafka["image"])
    assert "9092:9092" in [str(p) for p in kafka["ports"]]
    env = kafka["environment"]
    assert env["KAFKA_ADVERTISED_LISTENERS"] == "PLAINTEXT://localhost:9092"
    assert "broker" in env["KAFKA_PROCESS_ROLES"] and "controller" in env["KAFKA_PROCESS_ROLES"]
    assert "PLAINTEXT://:9092" in env["KAFKA_LISTENERS"].split(",")
    assert "docker compose up -d" in README
    assert "make demo BOOTSTRAP=localhost:9092" in README


# ---- the docs site ---------------------------------------------------------------------------


def nav_pages(entries) -> list[str]:
    """The page files of a MkDocs nav (a list of "Title: page.md" maps, sections nested)."""
    pages = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


def test_every_docs_page_is_in_the_nav_and_every_nav_entry_exists():
    import yaml

    config = yaml.safe_load(read("mkdocs.yml"))
    assert config["strict"] is True and config["docs_dir"] == "docs"
    # warnings (hence failures, strict) for a page left out of the nav and a broken anchor
    assert config["validation"]["omitted_files"] == "warn"
    assert config["validation"]["anchors"] == "warn"
    listed = nav_pages(config["nav"])
    assert len(listed) == len(set(listed)), "a page is in the nav twice"
    assert set(listed) == set(PAGES), (set(PAGES) - set(listed), set(listed) - set(PAGES))


def test_the_readme_stays_short_and_links_every_docs_page():
    assert len(README.splitlines()) <= README_MAX_LINES
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)(?:#[\w-]+)?\)", README))
    assert linked == set(PAGES), set(PAGES) - linked


def test_make_docs_builds_the_site_strictly_and_ci_runs_it_after_the_tests():
    makefile = read("Makefile")
    assert re.search(r"^docs: \$\(STAMP\)\n\t\$\(PY\) -m mkdocs build --strict ", makefile, re.M)
    assert re.search(r"^\.PHONY:.*\bdocs\b", makefile, re.M)
    steps = re.findall(r"^(?:step )?make ([\w-]+)$", read(".ci/run"), re.M)
    assert steps[:2] == ["test", "docs"], steps


def test_ci_runs_make_lint_after_the_docs():
    makefile = read("Makefile")
    assert re.search(r"^lint: \$\(STAMP\)\n\t\$\(VENV\)/bin/ruff check \.\n", makefile, re.M)
    for step in ("ruff format --check .", "-m mypy"):
        assert step in makefile.split("\nlint: ", 1)[1].split("\n\n", 1)[0], step
    steps = re.findall(r"^(?:step )?make ([\w-]+)$", read(".ci/run"), re.M)
    assert steps.index("lint") == steps.index("docs") + 1, steps


def test_mypy_checks_every_package_the_connector_runs_on():
    """``make lint``'s mypy checks the runtime packages protocol/version.py names (all
    five), so a module of the reader or the writer cannot drift out of the check."""
    import subprocess
    import tomllib

    from protocol.version import RUNTIME_PACKAGES

    assert len(RUNTIME_PACKAGES) == 5
    run = subprocess.run(
        ["make", "-n", "lint"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    mypy = [line for line in run.stdout.splitlines() if " -m mypy " in line]
    assert len(mypy) == 1 and "RUNTIME_PACKAGES" in mypy[0], run.stdout
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        assert "files" not in tomllib.load(f)["tool"]["mypy"]  # nothing else decides


def test_ruff_and_mypy_are_pinned_in_the_dev_extra():
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        dev = tomllib.load(f)["project"]["optional-dependencies"]["dev"]
    assert [d for d in dev if d.startswith(("ruff", "mypy"))] == ["ruff==0.17.5", "mypy==2.4.1"]


def test_mkdocs_is_pinned_in_the_dev_extra():
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        dev = tomllib.load(f)["project"]["optional-dependencies"]["dev"]
    assert [d for d in dev if d.startswith("mkdocs")] == ["mkdocs==1.6.1"]


def test_docs_pages_link_no_file_outside_the_docs():
    """A link from a page to a repository file (``../tests/x.py``, ``examples/y.py``) is
    broken on the site, which holds docs/ alone: such files are named as code paths. The
    pictures a page shows are in docs/images/ (the bench's curves)."""
    for name, text in PAGES.items():
        for target in re.findall(r"\]\(([^)#\s]+)", text):
            if target.startswith("images/"):
                assert re.fullmatch(r"images/[\w-]+\.png", target), (name, target)
                assert os.path.isfile(os.path.join(ROOT, "docs", target)), (name, target)
            else:
                assert re.fullmatch(r"[\w-]+\.md", target), (name, target)


REPO_PATH = re.compile(
    r"`((?:tests|scripts|examples|kafka_source|kafka_sink|kafka_common|"
    r"kafka_testbed|protocol|docs|\.github)/[\w./-]*)`"
)


def test_every_repository_path_the_readme_and_the_docs_name_exists():
    named = set(REPO_PATH.findall(ALL_TEXT)) | set(re.findall(r"\]\((examples/[\w.]+)\)", README))
    assert len(named) > 40
    missing = sorted(p for p in named if not os.path.exists(os.path.join(ROOT, p)))
    assert not missing, missing


# ---- make demo: the runtime set alone ----------------------------------------------------------


def test_make_demo_installs_the_spark_and_testbed_extras_alone_with_pip_s_progress():
    makefile = read("Makefile")
    assert re.search(r"^DEMO_VENV := \.venv-demo$", makefile, re.M)
    assert re.search(
        r"^demo: \$\(DEMO_STAMP\)\n(\t.*\n)*\t\$\(DEMO_PY\) examples/demo\.py ", makefile, re.M
    )
    install = re.search(r"^\$\(DEMO_STAMP\): pyproject\.toml.*\n((?:\t.*\n)+)", makefile, re.M)[1]
    assert "$(DEMO_PY) -m pip install -e '.[spark,testbed]'\n" in install
    assert " -q" not in install and "dev" not in install  # pip's progress shows
    assert install.endswith("\ttouch $(DEMO_STAMP)\n")


def _import_names_of(extras: list[str]) -> set[str]:
    """The top-level import names of this package's requirements with ``extras`` and of
    everything they require, as installed here."""
    from importlib import metadata

    from packaging.requirements import Requirement

    by_dist: dict[str, set[str]] = {}
    for name, dists in metadata.packages_distributions().items():
        for dist in dists:
            by_dist.setdefault(dist.lower().replace("_", "-"), set()).add(name)
    names: set[str] = set()
    todo = [("pyspark-pykafka", tuple(extras))]
    seen = set()
    while todo:
        dist, wanted = todo.pop()
        if dist in seen:
            continue
        seen.add(dist)
        names |= by_dist.get(dist, set())
        for text in metadata.requires(dist) or []:
            req = Requirement(text)
            if req.marker is None or any(
                req.marker.evaluate({"extra": e}) for e in wanted or ("",)
            ):
                todo.append((req.name.lower().replace("_", "-"), tuple(req.extras)))
    return names


DEMO_IMPORTS_ONLY = """
import importlib.abc, runpy, sys
absent = set(sys.argv[1].split(","))
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] in absent:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Absent())
sys.argv = sys.argv[2:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
finally:  # what the demo's Spark part has its Python workers import
    import pyspark.sql, pyspark_pykafka, kafka_source.batch_reader, kafka_source.stream_reader
    import kafka_sink.writer
"""


def test_the_demo_needs_nothing_beyond_the_extras_make_demo_installs():
    """``examples/demo.py`` (its protocol part, on its embedded broker) and the connector's
    modules its Spark part runs, in a process where of the installed distributions only
    those of ``.[spark,testbed]`` (and what they require) can be imported: the rest of the
    dev set is absent."""
    from importlib import metadata

    from kafka_source.shadowing import INSTALLED_NAMES

    allowed = _import_names_of(["spark", "testbed"]) | set(INSTALLED_NAMES)
    assert {"pyspark", "py4j", "pyarrow", "confluent_kafka"} <= allowed
    absent = set(metadata.packages_distributions()) - allowed
    assert {"pytest", "yaml", "pandas", "hypothesis", "kafka", "aiokafka"} <= absent
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            DEMO_IMPORTS_ONLY,
            ",".join(sorted(absent)),
            os.path.join(ROOT, "examples", "demo.py"),
            "--no-spark",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "embedded librdkafka mock cluster" in done.stdout and "done." in done.stdout
