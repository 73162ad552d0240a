"""Blocks of results.md that one section of the bench rewrites on its own.

``run.py --only streaming`` (or ``--only avro``, ``--only jvm``, ``--only pyfiles``,
``--only scale``, ``--only racks``, or several) runs just those sections and replaces only
their blocks in the last full run's results.md; a full run writes them too.
Each block sits between ``begin(name)`` and ``end(name)`` and opens with the line
``<Title> section run <when>.``, which scripts/render_bench_summary.py quotes. A run that
includes the main sections rewrites the file and carries over, as they were, the blocks of
the sections it did not run (``carry_over``).
"""

from __future__ import annotations

#: The sections whose results live in a block of their own.
SECTIONS = ("streaming", "avro", "jvm", "pyfiles", "scale", "racks", "formats")
#: How a block's opening line names its section (else the name, capitalized).
TITLES = {
    "jvm": "JVM",
    "pyfiles": "Pyfiles (--py-files)",
    "scale": "Scale (beside the JVM connector)",
    "racks": "Racks (kafka.client.rack)",
    "formats": "Formats (the JSON value decoder, one core)",
}


def begin(name: str) -> str:
    return f"<!-- BEGIN {name}: tests/bench/run.py --only {name} rewrites this block -->"


def end(name: str) -> str:
    return f"<!-- END {name} -->"


def splice(results_md: str, name: str, block: list[str], when: str) -> str:
    """``results_md`` with the ``name`` block replaced by ``block`` (or added before the
    peer settings when it has none), dated ``when``."""
    title = TITLES.get(name, name.capitalize())
    text = "\n".join([begin(name), f"{title} section run {when}.", "", *block, end(name)])
    return _put(results_md, name, text)


def carry_over(old_md: str, new_md: str) -> str:
    """``new_md`` with each block it lacks and ``old_md`` has, copied as it was (its own
    date with it)."""
    for name in SECTIONS:
        if begin(name) in old_md and end(name) in old_md and begin(name) not in new_md:
            text = begin(name) + old_md.split(begin(name), 1)[1].split(end(name), 1)[0]
            new_md = _put(new_md, name, text + end(name))
    return new_md


def _put(results_md: str, name: str, text: str) -> str:
    """``results_md`` with the ``name`` block's whole ``text`` in place of the old one, or
    before the peer settings."""
    if begin(name) in results_md and end(name) in results_md:
        head, rest = results_md.split(begin(name), 1)
        return head + text + rest.split(end(name), 1)[1]
    marker = "\n## Peer settings"
    if marker in results_md:
        head, rest = results_md.split(marker, 1)
        return head.rstrip("\n") + "\n\n" + text + "\n" + marker + rest
    return results_md.rstrip("\n") + "\n\n" + text + "\n"
