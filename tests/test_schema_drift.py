"""The schemas against the protocol guide's BNF, version by version.

tests/data/guide_bnf.json is extracted from the guide by scripts/extract_guide_bnf.py (run it
again when the guide changes); this test reads only that file. For every API we implement it
checks that the versions match both ways, that every request and response version has the
guide's fields (names, order, types including compact / nullable forms, nesting) and the
guide's header versions. The guide shows neither tagged fields nor whether an array may be
null; test_schema_roundtrip.py covers those.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from protocol.schemas import ALL_APIS, BY_KEY, BY_NAME

ROOT = Path(__file__).resolve().parent.parent
GUIDE = json.loads((ROOT / "tests" / "data" / "guide_bnf.json").read_text(encoding="utf-8"))
KINDS = ("request", "response")

# Versions the guide marks "This version of the request is unstable." We implement them (they
# are in the guide's range) but a broker only offers them when told to; this list notices when
# the guide changes its mind.
UNSTABLE = {
    ("OffsetCommit", "request", 10),
    ("OffsetFetch", "request", 10),
    ("InitProducerId", "request", 6),
}


def _cases():
    for name, entry in GUIDE.items():
        for kind in KINDS:
            for v in entry[kind]:
                yield pytest.param(name, kind, int(v), id=f"{name}-{kind}-v{v}")


def _as_lists(rows):
    return [[n, t, _as_lists(c) if isinstance(c, (list, tuple)) else c] for n, t, c in rows]


def _first_difference(ours, guide, path=""):
    """A readable description of where two field trees part."""
    for i in range(max(len(ours), len(guide))):
        a = ours[i] if i < len(ours) else None
        b = guide[i] if i < len(guide) else None
        if a is None:
            return f"{path}: the guide has {b[0]!r} ({b[1]}) at position {i}, we have nothing"
        if b is None:
            return f"{path}: we have {a[0]!r} ({a[1]}) at position {i}, the guide has nothing"
        if a[0] != b[0] or a[1] != b[1]:
            return f"{path}: position {i}: ours {a[0]!r} {a[1]}, guide {b[0]!r} {b[1]}"
        if isinstance(a[2], list) and isinstance(b[2], list):
            sub = _first_difference(a[2], b[2], f"{path}.{a[0]}")
            if sub:
                return sub
        elif a[2] != b[2]:
            return f"{path}.{a[0]}: element ours {a[2]!r}, guide {b[2]!r}"
    return None


def test_registry_and_guide_cover_the_same_apis():
    assert {api.name for api in ALL_APIS} == set(GUIDE)
    for name, entry in GUIDE.items():
        assert BY_NAME[name].key == entry["key"]
        assert BY_KEY[entry["key"]] is BY_NAME[name]
    assert [api.key for api in ALL_APIS] == sorted(BY_KEY)


@pytest.mark.parametrize("name", sorted(GUIDE))
@pytest.mark.parametrize("kind", KINDS)
def test_version_ranges_match(name, kind):
    message = getattr(BY_NAME[name], kind)
    ours = set(message.versions)  # raises for an open-ended range: ours must be closed
    guide = {int(v) for v in GUIDE[name][kind]}
    assert ours == guide, (
        f"{name} {kind}: only ours {sorted(ours - guide)}, only the guide's {sorted(guide - ours)}"
    )


@pytest.mark.parametrize("name,kind,version", list(_cases()))
def test_fields_match_the_guide(name, kind, version):
    message = getattr(BY_NAME[name], kind)
    guide = GUIDE[name][kind][str(version)]
    ours = _as_lists(message.describe(version))
    assert ours == guide["fields"], _first_difference(
        ours, guide["fields"], f"{name} {kind} v{version}"
    )


@pytest.mark.parametrize("name,kind,version", list(_cases()))
def test_header_and_flexible_versions_match(name, kind, version):
    api = BY_NAME[name]
    guide = GUIDE[name][kind][str(version)]
    if kind == "request":
        assert api.request_header_version(version) == guide["header"]
    else:
        assert api.response_header_version(version) == guide["header"]
    assert getattr(api, kind).is_flexible(version) == guide["flexible"]


def test_unstable_versions_are_the_known_ones():
    found = {
        (name, kind, int(v))
        for name, entry in GUIDE.items()
        for kind in KINDS
        for v, body in entry[kind].items()
        if body.get("unstable")
    }
    assert found == UNSTABLE


# ---- the extractor itself, on a made-up excerpt in the guide's layout ---------------------

SAMPLE = """\
Thing API (Key: 7):
Requests:Thing Request (Version: 0) => key [names] key => STRING names => STRING
Request header version: 1
Thing Request (Version: 1) => [items] flag _tagged_fields 
  items => id [parts] _tagged_fields 
    id => COMPACT_STRING
    parts => index [nodes] _tagged_fields 
      index => INT32
      nodes => INT32
  flag => BOOLEAN
This version of the request is unstable.
Request header version: 2
Thing Response (Version: 0) =>
Response header version: 0
Thing Response (Version: 1) => error_code _tagged_fields error_code => INT16
Response header version: 1
Other API (Key: 8):
Requests:Other Request (Version: 0) => x x => INT8
Request header version: 1
"""


def _load_extractor():
    spec = importlib.util.spec_from_file_location(
        "extract_guide_bnf", ROOT / "scripts" / "extract_guide_bnf.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_extractor_reads_both_layouts():
    ext = _load_extractor()
    data = ext.extract(SAMPLE, {7})
    assert set(data) == {"Thing"}
    req = data["Thing"]["request"]
    assert req["0"] == {
        "header": 1,
        "flexible": False,
        "fields": [["key", "STRING", None], ["names", "ARRAY", "STRING"]],
    }
    assert req["1"] == {
        "header": 2,
        "flexible": True,
        "unstable": True,
        "fields": [
            [
                "items",
                "COMPACT_ARRAY",
                [
                    ["id", "COMPACT_STRING", None],
                    [
                        "parts",
                        "COMPACT_ARRAY",
                        [["index", "INT32", None], ["nodes", "COMPACT_ARRAY", "INT32"]],
                    ],
                ],
            ],
            ["flag", "BOOLEAN", None],
        ],
    }
    resp = data["Thing"]["response"]
    assert resp["0"] == {"header": 0, "flexible": False, "fields": []}
    assert resp["1"]["fields"] == [["error_code", "INT16", None]]
    assert json.loads(ext.dump(data)) == data


def test_extractor_rejects_what_it_cannot_read():
    ext = _load_extractor()
    with pytest.raises(ext.GuideFormatError):
        ext.extract(SAMPLE.replace("    id => COMPACT_STRING\n", ""), {7})  # undefined field
    with pytest.raises(ext.GuideFormatError):
        ext.extract(SAMPLE, {7, 99})  # an API the guide lacks
