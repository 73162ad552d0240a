"""Extract the request version ranges of Kafka's message definitions into
tests/data/kafka_request_versions.json.

Usage: python scripts/extract_kafka_versions.py PATH [--kafka-version 4.1.0]

PATH is a checkout of Apache Kafka (its ``clients/src/main/resources/common/message``
holds one ``*Request.json`` per API) or that folder itself, or any folder with the same
files (kafka-python's wheel, a dev dependency, carries a copy in
``kafka/protocol/schemas/resources``). The Kafka version comes from the checkout's
``gradle.properties``, else from ``--kafka-version``.

For every request definition (``apiKey``, ``"type": "request"``) it writes::

    {"kafka_version": "4.x", "source": "...",
     "apis": {"Produce": {"key": 0, "valid": [3, 13], "deprecated": null,
                          "latest_unstable": false, "removed": [0, 2],
                          "advertised_min": 0, "client_max": null,
                          "transaction_v1_max": 11}, ...}}

- ``valid``: ``validVersions``; ``deprecated``: ``deprecatedVersions`` (or null);
- ``latest_unstable``: ``latestVersionUnstable`` (a broker advertises the last version only
  with ``unstable.api.versions.enable``);
- ``removed``: the versions a "Version(s) A[-B] ... removed in Apache Kafka 4.0" comment
  names (KIP-896), or null;
- ``advertised_min``: the lowest version a broker lists in ApiVersions when the comment says
  removed versions "have to be included in the api versions response" (Produce, KAFKA-18659:
  the broker still rejects them), else the lower bound of ``valid``;
- ``client_max``: the highest version meant for clients, where a comment says "Versions N and
  below will be exclusively used by clients" (AddPartitionsToTxn: higher ones are the
  brokers'), else null;
- ``transaction_v1_max``: the highest version a client of the first transaction protocol
  (KIP-890 part 1: partitions added with AddPartitionsToTxn) may send inside a transaction,
  where a comment says "If V2 is disabled, the client can't use ... version higher than N
  within a transaction" (Produce, TxnOffsetCommit), or one below the version a comment says
  "enables bumping epoch on every transaction (KIP-890 Part 2)" (EndTxn), else null.

The JSON is the project's own data: tests/test_kafka_versions.py reads it and never the
definitions themselves.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

MESSAGE_DIR = Path("clients/src/main/resources/common/message")
OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "kafka_request_versions.json"

REMOVED = re.compile(r"Versions? (\d+)(?:-(\d+))? (?:was|were) removed in Apache Kafka")
STILL_ADVERTISED = "have to be included in the api versions response"
TXN_V1_MAX = re.compile(
    r"If V2 is disabled, the client can't use \w+ request version "
    r"higher than (\d+) within a transaction"
)
TXN_V2_FROM = re.compile(r"Version (\d+) enables bumping epoch on every transaction")
CLIENT_MAX = re.compile(r"Versions (\d+) and below will be exclusively used by clients")


def _split(text: str) -> tuple[str, str]:
    """(the comments joined into one line, the JSON without them)."""
    comments, body = [], []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("//"):
            comments.append(stripped[2:].strip())
        else:
            body.append(line)
    return " ".join(c for c in comments if c), "\n".join(body)


def _range(spec: str | None) -> list[int] | None:
    if spec is None or spec == "none":
        return None
    lo, _, hi = spec.partition("-")
    return [int(lo), int(hi) if hi else int(lo)]


def extract_one(text: str) -> tuple[str, dict] | None:
    comments, body = _split(text)
    data = json.loads(body)
    if data.get("type") != "request":
        return None
    valid = _range(data["validVersions"])
    removed = None
    m = REMOVED.search(comments)
    if m:
        removed = [int(m[1]), int(m[2] or m[1])]
    advertised_min = valid[0]
    if removed and STILL_ADVERTISED in comments:
        advertised_min = removed[0]
    txn_v1_max = None
    m = TXN_V1_MAX.search(comments)
    if m:
        txn_v1_max = int(m[1])
    m = TXN_V2_FROM.search(comments)
    if m:
        txn_v1_max = int(m[1]) - 1
    m = CLIENT_MAX.search(comments)
    client_max = int(m[1]) if m else None
    name = data["name"].removesuffix("Request")
    return name, {
        "key": data["apiKey"],
        "valid": valid,
        "deprecated": _range(data.get("deprecatedVersions")),
        "latest_unstable": bool(data.get("latestVersionUnstable", False)),
        "removed": removed,
        "advertised_min": advertised_min,
        "client_max": client_max,
        "transaction_v1_max": txn_v1_max,
    }


def extract(folder: Path) -> dict[str, dict]:
    apis = {}
    for path in sorted(folder.glob("*Request.json")):
        found = extract_one(path.read_text(encoding="utf-8"))
        if found:
            apis[found[0]] = found[1]
    return dict(sorted(apis.items(), key=lambda kv: kv[1]["key"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--kafka-version")
    parser.add_argument("--source", help="where the definitions came from (default: PATH)")
    args = parser.parse_args()
    folder = args.path / MESSAGE_DIR if (args.path / MESSAGE_DIR).is_dir() else args.path
    version = args.kafka_version
    gradle = args.path / "gradle.properties"
    if version is None and gradle.is_file():
        m = re.search(r"^version=(\S+)", gradle.read_text(encoding="utf-8"), re.M)
        version = m[1] if m else None
    if version is None:
        parser.error("no gradle.properties under PATH: name the version with --kafka-version")
    apis = extract(folder)
    if not apis:
        parser.error(f"no *Request.json message definitions in {folder}")
    out = {"kafka_version": version, "source": args.source or str(args.path), "apis": apis}
    lines = [
        "{",
        f' "kafka_version": {json.dumps(version)},',
        f' "source": {json.dumps(out["source"])},',
        ' "apis": {',
    ]
    rows = [f"  {json.dumps(name)}: {json.dumps(row)}" for name, row in apis.items()]
    lines.append(",\n".join(rows))
    lines += [" }", "}"]
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    json.loads(OUT.read_text(encoding="utf-8"))
    print(f"wrote {len(apis)} request definitions of Kafka {version} to {OUT}")


if __name__ == "__main__":
    main()
