"""Extract the BNF of the Kafka protocol guide into tests/data/guide_bnf.json.

Usage: python scripts/extract_guide_bnf.py PATH/TO/kafka-protocol-guide.txt [--keys 0,1,3]

For every API we implement (the keys of ``protocol.schemas.ALL_APIS`` unless ``--keys`` is
given) and every request and response version the guide lists, the field tree is written as::

    {"Fetch": {"key": 1,
               "request": {"12": {"header": 2, "flexible": true,
                                  "fields": [[name, TYPE, children_or_null], ...]}},
               "response": {...}}}

TYPE is the guide's type name (``INT32``, ``COMPACT_NULLABLE_STRING``, ``COMPACT_RECORDS``...).
An array is ``ARRAY`` or ``COMPACT_ARRAY`` (compact in flexible versions, i.e. versions whose
top-level field list ends with ``_tagged_fields``); its third item is the element's field list
for an array of structs, or the element TYPE for an array of a primitive. A nested single
struct is ``STRUCT`` with its field list. The guide's BNF does not show whether an array may be
null, nor the tagged fields: neither is in the file (``Message.describe`` leaves them out too).
A version the guide marks "This version of the request is unstable." gets ``"unstable": true``.

The JSON is the project's own data: tests/test_schema_drift.py compares the schemas with it and
never reads the guide itself.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "guide_bnf.json"

API_LINE = re.compile(r"^(\w+) API \(Key: (\d+)\):\s*$")
MSG_LINE = re.compile(r"^(?:Requests:)?(\w+) (Request|Response) \(Version: (\d+)\) =>(.*)$")
HEADER_LINE = re.compile(r"^(Request|Response) header version: (\d+)\s*$")
DEF_LINE = re.compile(r"^( +)(\w+) =>(.*)$")
TYPE_TOKEN = re.compile(r"^[A-Z][A-Z0-9_]*$")
TAGS = "_tagged_fields"


class GuideFormatError(ValueError):
    pass


def _resolve(tokens: list[str], defs: dict, flexible: bool, where: str) -> list:
    """Turn a field list (``a [b] _tagged_fields``) into ``[[name, TYPE, children], ...]``."""
    fields = []
    for tok in tokens:
        if tok == TAGS:
            continue
        is_array = tok.startswith("[") and tok.endswith("]")
        name = tok[1:-1] if is_array else tok
        if name not in defs:
            raise GuideFormatError(f"{where}: no definition for field {name!r}")
        rhs, sub = defs[name]
        primitive = len(rhs) == 1 and TYPE_TOKEN.match(rhs[0])
        if primitive:
            inner = rhs[0]
            if is_array:
                fields.append([name, "COMPACT_ARRAY" if flexible else "ARRAY", inner])
            else:
                fields.append([name, inner, None])
        else:
            children = _resolve(rhs, sub, flexible, f"{where}.{name}")
            kind = ("COMPACT_ARRAY" if flexible else "ARRAY") if is_array else "STRUCT"
            fields.append([name, kind, children])
    return fields


def _parse_inline(rest: str, where: str) -> tuple[list[str], dict]:
    """The guide writes short BNFs on one line: ``a [b] a => INT8 b => STRING``."""
    tokens = rest.split()
    i = 0
    while i < len(tokens) and not (i + 1 < len(tokens) and tokens[i + 1] == "=>"):
        i += 1
    top, defs = tokens[:i], {}
    rest_tokens = tokens[i:]
    if len(rest_tokens) % 3:
        raise GuideFormatError(f"{where}: cannot split inline definitions {rest!r}")
    for j in range(0, len(rest_tokens), 3):
        name, arrow, typ = rest_tokens[j : j + 3]
        if arrow != "=>" or not TYPE_TOKEN.match(typ):
            raise GuideFormatError(f"{where}: unexpected inline definition {name} {arrow} {typ}")
        defs[name] = ([typ], {})
    return top, defs


def _parse_block(lines: list[str], where: str) -> dict:
    """Indented ``name => ...`` lines, two spaces a level, into nested definitions."""
    root: dict = {}
    stack = [(0, root)]  # (level, defs dict that lines at level+1 go into)
    for line in lines:
        m = DEF_LINE.match(line)
        if not m:
            raise GuideFormatError(f"{where}: unexpected line {line!r}")
        indent = len(m[1])
        if indent % 2:
            raise GuideFormatError(f"{where}: odd indentation in {line!r}")
        level = indent // 2
        while stack and stack[-1][0] >= level:
            stack.pop()
        if not stack or stack[-1][0] != level - 1:
            raise GuideFormatError(f"{where}: indentation jumps in {line!r}")
        sub: dict = {}
        name = m[2]
        if name in stack[-1][1]:
            raise GuideFormatError(f"{where}: field {name!r} defined twice at one level")
        stack[-1][1][name] = (m[3].split(), sub)
        stack.append((level, sub))
    return root


def extract(guide_text: str, keys: set[int]) -> dict:
    lines = guide_text.splitlines()
    out: dict = {}
    api_name = None
    api_key = None
    i = 0
    while i < len(lines):
        line = lines[i]
        m = API_LINE.match(line)
        if m:
            api_name, api_key = m[1], int(m[2])
            i += 1
            continue
        m = MSG_LINE.match(line)
        if not (m and api_key in keys):
            i += 1
            continue
        name, kind, version, rest = m[1], m[2].lower(), m[3], m[4]
        where = f"{name} {kind} v{version}"
        if name != api_name:
            raise GuideFormatError(f"{where}: found under the {api_name} API section")
        block = []
        i += 1
        while i < len(lines) and lines[i].startswith(" "):
            block.append(lines[i].rstrip())
            i += 1
        unstable = (
            i < len(lines)
            and lines[i].startswith("This version of the")
            and "is unstable" in lines[i]
        )
        if unstable:
            i += 1
        if i >= len(lines):
            raise GuideFormatError(f"{where}: no header version line")
        h = HEADER_LINE.match(lines[i])
        if not h or h[1].lower() != kind:
            raise GuideFormatError(f"{where}: expected the {kind} header version, got {lines[i]!r}")
        if block:
            top, defs = rest.split(), _parse_block(block, where)
        else:
            top, defs = _parse_inline(rest, where)
        flexible = TAGS in top
        entry = out.setdefault(name, {"key": api_key, "request": {}, "response": {}})
        if version in entry[kind]:
            raise GuideFormatError(f"{where}: listed twice")
        body = {"header": int(h[2]), "flexible": flexible}
        if unstable:
            body["unstable"] = True
        body["fields"] = _resolve(top, defs, flexible, where)
        entry[kind][version] = body
        i += 1
    missing = keys - {v["key"] for v in out.values()}
    if missing:
        raise GuideFormatError(f"API keys not found in the guide: {sorted(missing)}")
    return out


def dump(data: dict) -> str:
    """Compact but diff-friendly: one line per message version."""
    parts = ["{"]
    apis = sorted(data.items(), key=lambda kv: kv[1]["key"])
    for ai, (name, entry) in enumerate(apis):
        parts.append(f' {json.dumps(name)}: {{"key": {entry["key"]},')
        for ki, kind in enumerate(("request", "response")):
            parts.append(f'  "{kind}": {{')
            versions = sorted(entry[kind].items(), key=lambda kv: int(kv[0]))
            for vi, (v, body) in enumerate(versions):
                comma = "," if vi < len(versions) - 1 else ""
                parts.append(
                    f"   {json.dumps(v)}: {json.dumps(body, separators=(',', ':'))}{comma}"
                )
            parts.append("  }" + ("," if ki == 0 else ""))
        parts.append(" }" + ("," if ai < len(apis) - 1 else ""))
    parts.append("}")
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("guide")
    ap.add_argument("--keys", help="comma-separated API keys (default: the schema registry)")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    if args.keys:
        keys = {int(k) for k in args.keys.split(",")}
    else:
        sys.path.insert(0, str(ROOT))
        from protocol.schemas import ALL_APIS

        keys = {api.key for api in ALL_APIS}
    data = extract(Path(args.guide).read_text(encoding="utf-8"), keys)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dump(data), encoding="utf-8")
    n = sum(len(e["request"]) + len(e["response"]) for e in data.values())
    print(f"wrote {n} message versions of {len(data)} APIs to {out}")


if __name__ == "__main__":
    main()
