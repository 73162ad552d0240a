"""The files of the CI that cannot run here: .github/workflows/*.yml (GitHub Actions),
docker-compose.yml (the Kafka they start) and pyproject.toml's ``[tool.cibuildwheel]``
(the release's wheels). Each is checked against the schema check-jsonschema ships for it,
or cibuildwheel ships for its table (no network), and they are checked to be in step: the
Kafka workflow runs ``make test-kafka`` against the Kafka images of docker-compose.yml at
the address it advertises, with transactions working on one broker; the release workflow
builds with the cibuildwheel of the ``dev`` extra on Linux x86_64 and aarch64 and on macOS,
checks every wheel with scripts/check_wheel.py, and publishes with trusted publishing."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
COMPOSE = REPO / "docker-compose.yml"


def _check(schema: str, *paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _pyproject() -> dict:
    with open(REPO / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def test_the_workflows_follow_github_s_schema():
    assert WORKFLOWS
    run = _check("vendor.github-workflows", *WORKFLOWS)
    assert run.returncode == 0, run.stdout + run.stderr


def test_docker_compose_follows_the_compose_spec():
    run = _check("vendor.compose-spec", COMPOSE)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_schema_check_rejects_a_broken_workflow(tmp_path):
    """The check is not vacuous: a misspelt key and a step without ``run``/``uses`` fail."""
    bad = yaml.safe_load((REPO / ".github" / "workflows" / "kafka.yml").read_text())
    job = next(iter(bad["jobs"].values()))
    job["runs_on"] = job.pop("runs-on")
    path = tmp_path / "bad.yml"
    path.write_text(yaml.safe_dump(bad))
    assert _check("vendor.github-workflows", path).returncode != 0


def _kafka_workflow() -> dict:
    return yaml.safe_load((REPO / ".github" / "workflows" / "kafka.yml").read_text())


def _compose_kafka() -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"]["kafka"]


def test_the_workflow_runs_the_selection_on_compose_s_kafka_4_and_3():
    job = _kafka_workflow()["jobs"]["test-kafka"]
    images = job["strategy"]["matrix"]["image"]
    default = re.fullmatch(r"\$\{KAFKA_IMAGE:-(.+)\}", _compose_kafka()["image"])
    assert default, "docker-compose.yml takes its image from KAFKA_IMAGE"
    assert default[1] in images and default[1].startswith("apache/kafka:4.")
    assert any(i.startswith("apache/kafka:3.") for i in images)
    assert job["env"]["KAFKA_IMAGE"] == "${{ matrix.image }}"
    runs = [s.get("run", "") for s in job["steps"]]
    assert "docker compose up -d" in runs and "make install" in runs
    assert any("--wait" in r for r in runs)
    assert runs.index("make test-kafka") > max(i for i, r in enumerate(runs) if "--wait" in r)
    advertised = _compose_kafka()["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    assert advertised == f"PLAINTEXT://{job['env']['PYKAFKA_TEST_BOOTSTRAP']}"
    assert "9092:9092" in _compose_kafka()["ports"]
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^test-kafka:.*\n\t.*-m kafka", makefile, re.M)


@pytest.mark.parametrize(
    "setting",
    [
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR",
        "KAFKA_MIN_INSYNC_REPLICAS",
    ],
)
def test_compose_s_single_broker_can_run_transactions(setting):
    env = _compose_kafka()["environment"]
    assert env[setting] == 1
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft, one node


# The release: .github/workflows/release.yml and [tool.cibuildwheel]

sys.path.insert(0, str(REPO / "scripts"))
try:
    from build_wheels import PYTHONS
finally:
    sys.path.pop(0)


def _release() -> dict:
    return yaml.safe_load((REPO / ".github" / "workflows" / "release.yml").read_text())


def _check_cibuildwheel_table(table: dict, tmp_path: Path) -> subprocess.CompletedProcess:
    """``table`` against the schema of ``[tool.cibuildwheel]`` the installed cibuildwheel
    ships (the one the release runs: the versions are checked to match below)."""
    schema = Path(
        metadata.distribution("cibuildwheel").locate_file(
            "cibuildwheel/resources/cibuildwheel.schema.json"
        )
    )
    assert schema.is_file()
    path = tmp_path / "cibuildwheel.json"
    path.write_text(json.dumps(table))
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--schemafile", str(schema), str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_cibuildwheel_table_follows_cibuildwheel_s_schema(tmp_path):
    table = _pyproject()["tool"]["cibuildwheel"]
    run = _check_cibuildwheel_table(table, tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    bad = {**table, "test_command": table["test-command"]}  # a misspelt key is refused
    assert _check_cibuildwheel_table(bad, tmp_path).returncode != 0


def _identifiers(platform: str, archs: str) -> list[str]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cibuildwheel",
            "--print-build-identifiers",
            "--platform",
            platform,
            "--archs",
            archs,
            str(REPO),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.split()


def test_cibuildwheel_builds_each_python_on_linux_and_macos():
    tags = [f"cp{v.replace('.', '')}" for v in PYTHONS]
    assert _identifiers("linux", "x86_64,aarch64") == [
        f"{t}-manylinux_{arch}" for arch in ("x86_64", "aarch64") for t in tags
    ]
    assert _identifiers("macos", "x86_64,arm64") == [
        f"{t}-macosx_{arch}" for t in tags for arch in ("x86_64", "arm64")
    ]
    table = _pyproject()["tool"]["cibuildwheel"]
    assert table["linux"]["manylinux-x86_64-image"] == "manylinux2014"
    assert table["linux"]["manylinux-aarch64-image"] == "manylinux2014"
    assert table["environment"]["PYKAFKA_REQUIRE_EXTENSIONS"] == "1"
    assert table["test-command"] == "python {project}/scripts/check_wheel.py"


def test_the_release_builds_on_linux_and_macos_with_the_dev_extra_s_cibuildwheel():
    jobs = _release()["jobs"]
    runners = jobs["wheels"]["strategy"]["matrix"]["runner"]
    assert runners == ["ubuntu-24.04", "ubuntu-24.04-arm", "macos-15-intel", "macos-15"]
    (cibuildwheel,) = [
        s["uses"]
        for s in jobs["wheels"]["steps"]
        if s.get("uses", "").startswith("pypa/cibuildwheel@")
    ]
    assert cibuildwheel == f"pypa/cibuildwheel@v{metadata.version('cibuildwheel')}"
    assert (
        f"cibuildwheel=={metadata.version('cibuildwheel')}"
        in _pyproject()["project"]["optional-dependencies"]["dev"]
    )
    assert any("python -m build --sdist" in s.get("run", "") for s in jobs["sdist"]["steps"])
    # The Linux wheels, which cibuildwheel does not test, are checked on the runners.
    test = jobs["test-linux-wheels"]
    assert test["needs"] == "wheels"
    assert test["strategy"]["matrix"]["runner"] == runners[:2]
    assert test["strategy"]["matrix"]["python"] == list(PYTHONS)
    runs = [s.get("run", "") for s in test["steps"]]
    assert any("--only-binary :all:" in r for r in runs)
    assert 'python "${GITHUB_WORKSPACE}/scripts/check_wheel.py"' in runs


def test_the_release_publishes_only_tags_with_trusted_publishing():
    release = _release()
    assert release[True]["push"] == {"tags": ["v*"]}  # YAML 1.1 reads the key on as true
    assert release["permissions"] == {"contents": "read"}
    publish = release["jobs"]["publish"]
    assert sorted(publish["needs"]) == ["sdist", "test-linux-wheels", "wheels"]
    assert publish["if"] == "startsWith(github.ref, 'refs/tags/v')"
    assert publish["permissions"] == {"id-token": "write"}
    (step,) = [s for s in publish["steps"] if "gh-action-pypi-publish" in s.get("uses", "")]
    assert "with" not in step  # no password, no token: the OIDC token is the credential
    assert _tag_check()["if"] == "startsWith(github.ref, 'refs/tags/')"


def _tag_check() -> dict:
    (step,) = [
        s for s in _release()["jobs"]["sdist"]["steps"] if "GITHUB_REF_NAME" in s.get("run", "")
    ]
    return step


@pytest.mark.parametrize(
    "heading, tag, passes",
    [
        ("## 0.3.0 (2027-01-15)", "v0.3.0", True),
        ("## 0.3.0 (unreleased)", "v0.3.0", False),  # not dated: not cut yet
        ("## 0.3.0 (2027-01-15)", "v0.3.1", False),  # the tag is not protocol/version.py's
        ("## 0.2.9 (2027-01-15)", "v0.3.0", False),  # no section for the version
    ],
)
def test_the_release_checks_the_tag_and_the_changelog(heading, tag, passes, tmp_path):
    """The sdist job's first check, run as GitHub runs a step (bash -e), on a checkout
    whose protocol/version.py says 0.3.0."""
    (tmp_path / "protocol").mkdir()
    (tmp_path / "protocol" / "version.py").write_text('"""v"""\n\n__version__ = "0.3.0"\n')
    (tmp_path / "CHANGELOG.md").write_text(f"# Changelog\n\n{heading}\n\n- a change\n")
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-e", "-c", _tag_check()["run"]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "GITHUB_REF_NAME": tag},
    )
    assert (done.returncode == 0) == passes, done.stdout + done.stderr


def test_the_changelog_has_a_section_per_version_newest_first():
    from protocol.version import __version__

    text = (REPO / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## (.*)$", text, re.M)
    parsed = [
        re.fullmatch(r"(\d+)\.(\d+)\.(\d+) \((unreleased|\d{4}-\d{2}-\d{2})\)", h) for h in headings
    ]
    assert headings and all(parsed), headings
    versions = [tuple(int(part) for part in m.groups()[:3]) for m in parsed]
    assert versions == sorted(set(versions), reverse=True), versions
    # the newest is the version being made (or the last one cut); only it may be unreleased
    assert ".".join(map(str, versions[0])) == __version__
    assert all(m[4] != "unreleased" for m in parsed[1:])
    assert (REPO / "docs" / "changelog.md").resolve() == REPO / "CHANGELOG.md"  # on the site
