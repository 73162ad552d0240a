"""The getting-started page (docs/index.md, the docs site's first page) is a job that runs:
its Python blocks, one after the other, against the broker its command line starts
(``python -m kafka_testbed --port ...``), run as a user runs them: from another directory,
with the virtualenv's Python not activated (not on ``PATH``) and no ``PYSPARK_PYTHON``, so
that Spark's workers get this Python from the page's ``PYSPARK_PYTHON`` line alone."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "index.md")
PAGE_BOOTSTRAP = "localhost:9092"


def _page() -> str:
    with open(PAGE, encoding="utf-8") as f:
        return f.read()


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.S | re.M)


def _testbed_command(text: str) -> list[str]:
    (line,) = [
        line
        for block in _blocks(text, "bash")
        for line in block.splitlines()
        if line.startswith("python -m kafka_testbed ")
    ]
    return shlex.split(line)


def _user_env() -> dict[str, str]:
    """This environment as a user's shell has it with the virtualenv not activated."""
    venv_bin = os.path.realpath(os.path.dirname(sys.executable))
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "PYSPARK_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")
    }
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if os.path.realpath(p) != venv_bin
    )
    return env


def test_the_page_s_code_runs_against_the_testbed_it_starts(tmp_path):
    text = _page()
    command = _testbed_command(text)
    assert command[:4] == ["python", "-m", "kafka_testbed", "--port"] and command[4] == "9092"
    code = "\n".join(_blocks(text, "python"))
    assert code.count(PAGE_BOOTSTRAP) == 1  # the one address the job names
    assert 'os.environ["PYSPARK_PYTHON"] = sys.executable' in code

    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    broker = subprocess.Popen(
        [sys.executable, *command[1:4], str(port), *command[5:], "--no-registry"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not (line := broker.stdout.readline()).startswith("Running"):
            assert line, broker.stderr.read()
        job = tmp_path / "first_job.py"
        job.write_text(code.replace(PAGE_BOOTSTRAP, f"localhost:{port}"))
        done = subprocess.run(
            [sys.executable, str(job)],
            cwd=tmp_path,
            env=_user_env(),
            capture_output=True,
            text=True,
            timeout=500,
        )
    finally:
        broker.send_signal(signal.SIGINT)
        try:
            broker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            broker.kill()
            broker.wait()
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-5000:])
    assert "read 10 records from 'events'" in done.stdout
    assert "the stream wrote 10 records to 'events-upper'" in done.stdout
    assert re.search(r'^\|\{"N":\d\}\s*\|$', done.stdout, re.M), done.stdout
