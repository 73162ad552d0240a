"""tests/RELIABILITY.md is made from tests/reliability-figures.json, and a run's figures
join those of the others (``make soak-hour`` used to leave only its own on the page)."""

from __future__ import annotations

import json
import os

from tests.helpers import reliability_report


def _without_machine(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("Machine: "))


def test_the_page_is_rendered_from_the_committed_figures(tmp_path):
    entries = reliability_report.load(reliability_report.FIGURES)
    assert entries, "tests/reliability-figures.json is empty"
    rendered = reliability_report.render(entries, str(tmp_path))
    with open(reliability_report.DEFAULT_OUT) as f:
        assert _without_machine(f.read()) == _without_machine(rendered)


def test_a_run_replaces_its_own_entries_and_keeps_the_others(tmp_path):
    figures, run, page = tmp_path / "figures.json", tmp_path / "run.json", tmp_path / "page.md"
    old = {"section": "faults", "what": "old", "records": 1, "mode": "soak", "at": "then"}
    figures.write_text(json.dumps({"faults/a": old, "faults/b": {**old, "what": "kept"}}))
    run.write_text(
        json.dumps(
            {
                "faults/a": {**old, "what": "new", "records": 2},
                "hour/c": {**old, "section": "other", "what": "added"},
            }
        )
    )
    assert (
        reliability_report.main(["--json", str(run), "--figures", str(figures), "--out", str(page)])
        == 0
    )
    merged = json.loads(figures.read_text())
    assert {n: e["what"] for n, e in merged.items()} == {
        "faults/a": "new",
        "faults/b": "kept",
        "hour/c": "added",
    }
    text = page.read_text()
    assert "| `faults/a` | new |" in text and "| `faults/b` | kept |" in text
    assert "## Other" in text and os.path.basename(str(page)) == "page.md"
