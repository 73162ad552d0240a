"""Micro-benchmark of the Protobuf and JSON value decoders on one core: Confluent-framed
values decoded into Arrow by ``kafka_common.protobuf.Decoder`` (and its row path) and
``kafka_common.json_schema.Decoder`` (and its pure path, without Arrow's JSON reader), next
to what a UDF does without them (the protobuf runtime's ``FromString`` then
``json_format.MessageToDict``; ``json.loads``), each building the same Arrow column.

    .venv/bin/python tests/bench/bench_proto_json.py [--records 100000] [--repeat 5]

Cases: ``flat`` (5 fields: long, string, double, int, boolean) and ``nested`` (a message
or object in one, a repeated string and a map). The framing is written here as
confluent-kafka's serializers write it (magic 0, id, and for Protobuf the message index
0); the tests check the decoders against those serializers. Not a test (pytest does not
collect this file name). Figures: the best of ``--repeat`` timed calls, in records per
CPU second of the one thread doing the work, and the ratio ours / the UDF route.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.resources
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

pa.set_cpu_count(1)
pa.set_io_thread_count(1)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from kafka_common import json_schema, protobuf  # noqa: E402
from kafka_common.json_schema.batch import _joined, parse_all  # noqa: E402
from kafka_common.spark_ddl import parse_ddl  # noqa: E402

PROTO = """
syntax = "proto3";
package bench;
message Flat { int64 id = 1; string name = 2; double score = 3; int32 count = 4;
               bool ok = 5; }
message Nested {
  int64 id = 1;
  message User { string name = 1; optional string email = 2; double lat = 3; }
  User user = 2;
  repeated string tags = 3;
  map<string, int64> attrs = 4;
}
"""
DDL = {
    "flat": "id BIGINT, name STRING, score DOUBLE, count INT, ok BOOLEAN",
    "nested": "id BIGINT, user STRUCT<name: STRING, email: STRING, lat: DOUBLE>, "
    "tags ARRAY<STRING>, attrs MAP<STRING, BIGINT>",
}


def docs(case: str, n: int) -> list[dict]:
    if case == "flat":
        return [
            {
                "id": i,
                "name": f"name-{i % 1000}",
                "score": i * 0.5,
                "count": i % 100,
                "ok": bool(i & 1),
            }
            for i in range(n)
        ]
    return [
        {
            "id": i,
            "user": {"name": f"u{i % 100}", "email": f"{i}@e" if i % 3 else None, "lat": i / 7},
            "tags": ["a", "b"][: i % 3],
            "attrs": {"k": i, "j": -i},
        }
        for i in range(n)
    ]


def pb2():
    from grpc_tools import protoc

    tmp = tempfile.mkdtemp(prefix="bench-proto-")
    with open(os.path.join(tmp, "bench_msgs.proto"), "w") as f:
        f.write(PROTO)
    include = str(importlib.resources.files("grpc_tools") / "_proto")
    assert (
        protoc.main(
            ["protoc", f"-I{tmp}", f"-I{include}", f"--python_out={tmp}", "bench_msgs.proto"]
        )
        == 0
    )
    sys.path.insert(0, tmp)
    return importlib.import_module("bench_msgs_pb2")


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.thread_time()
        fn()
        times.append(time.thread_time() - t)
    return min(times)


def json_rates(case: str, n: int, repeat: int) -> dict[str, float]:
    """Records per CPU second of one thread: the JSON decoder's default path (Arrow's JSON
    reader when it takes the batch), its pure path (no Arrow JSON reader: one ``json``
    parse of the batch, or row by row) and ``json.loads`` + ``pa.array`` (a UDF's way)."""
    rows = docs(case, n)
    values = pa.array([b"\x00\x00\x00\x00\x01" + json.dumps(r).encode() for r in rows], pa.binary())
    starts = np.full(n, 5, np.int32)
    atype = parse_ddl(DDL[case])
    fast = json_schema.Decoder(atype)
    pure = json_schema.Decoder(atype, compiled=False)

    def udf():
        return pa.array([json.loads(v[5:]) for v in values.to_pylist()], atype)

    timed = {"default": fast, "pure": pure}
    out = {
        name: n / best(lambda d=d: d.decode(values, starts), repeat) for name, d in timed.items()
    }
    out["udf"] = n / best(udf, repeat)
    # The ceiling of any path through Python's json for flat values (the pure path's
    # profile): the batch's one parse alone, then Arrow's own conversion of the parsed
    # objects (no type checks). Nested values' maps and lists Arrow converts slower than the
    # decoder does: no ceiling there.
    joined = _joined(values, starts) if case == "flat" else None
    parsed = parse_all(values, starts, pure.loads_all) if joined is not None else None
    if joined is not None and parsed is not None:
        parse = best(lambda: pure.loads_all(joined), repeat)
        convert = best(lambda: pa.array(parsed, atype), repeat)
        out["parse"], out["ceiling"] = n / parse, n / (parse + convert)
    return out


def protobuf_values(mod, case: str, n: int):
    """(message class, framed values, starts) of ``case``'s rows as Protobuf."""
    from google.protobuf import json_format

    cls = mod.Flat if case == "flat" else mod.Nested
    framed = []
    for r in docs(case, n):
        m = cls()
        json_format.ParseDict(
            {k: v for k, v in r.items() if v is not None}
            if case == "flat"
            else {**r, "user": {k: v for k, v in r["user"].items() if v is not None}},
            m,
        )
        framed.append(b"\x00\x00\x00\x00\x01\x00" + m.SerializeToString())
    return cls, pa.array(framed, pa.binary()), np.full(n, 6, np.int32)


def protobuf_rates(mod, case: str, n: int, repeat: int) -> dict[str, float]:
    """Records per CPU second of one thread: the Protobuf decoder (column by column for a
    flat message, NumPy only: the same with the compiled extensions turned off), its row
    path (the protobuf runtime's parser a row at a time) and ``FromString`` +
    ``MessageToDict`` (a UDF's way)."""
    from google.protobuf import json_format

    cls, values, starts = protobuf_values(mod, case, n)
    dec = protobuf.Decoder(cls.DESCRIPTOR)

    def udf():
        return [
            json_format.MessageToDict(cls.FromString(v[6:]), preserving_proto_field_name=True)
            for v in values.to_pylist()
        ]

    out = {"default": n / best(lambda: dec.decode(values, starts), repeat)}
    out["rows"] = n / best(lambda: dec.decode_rows(values, starts), repeat)
    out["udf"] = n / best(udf, repeat)
    return out


def run_formats(records: int, repeat: int, log) -> list[str]:
    """The ``formats`` block of results.md: the JSON decoder's pure path beside its
    default (compiled) path, and the Protobuf decoder beside its row path, one core, in
    this process."""
    lines = [
        f"The JSON Schema and Protobuf value decoders on one core, {records:,} "
        f"Confluent-framed values, best of {repeat} (`tests/bench/bench_proto_json.py`): "
        "records per CPU second. The JSON decoder's default path reads a batch with Arrow's "
        "JSON reader when it can, its pure path never does. The Protobuf decoder reads a "
        "flat message (scalar fields only) column by column with NumPy alone, so its pure "
        "path is its default path; other messages row by row through the protobuf runtime.",
        "",
        "The ceiling is what any path through Python's `json` could reach on flat values: "
        "the batch's one parse alone, then `pa.array` of the parsed objects (Arrow's own "
        "conversion, without the checks the decoder needs), timed in the same run.",
        "",
        "| Case | default path | pure path | pure / default | json parse alone | ceiling "
        "| ceiling / default | json.loads + pa.array |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for case in ("flat", "nested"):
        r = json_rates(case, records, repeat)
        log(f"formats: json {case} " + ", ".join(f"{k} {v / 1e6:.3f} M/s" for k, v in r.items()))
        parse, ceiling = r.get("parse"), r.get("ceiling")
        lines.append(
            f"| json {case} | {r['default'] / 1e6:.3f} M/s | {r['pure'] / 1e6:.3f} M/s "
            f"| {r['pure'] / r['default']:.2f} | "
            + (
                f"{parse / 1e6:.3f} M/s | {ceiling / 1e6:.3f} M/s | {ceiling / r['default']:.2f}"
                if parse and ceiling
                else "- | - | -"
            )
            + f" | {r['udf'] / 1e6:.3f} M/s |"
        )
    lines += [
        "",
        "| Case | default path | row by row | default / row by row | FromString + MessageToDict |",
        "|---|---:|---:|---:|---:|",
    ]
    mod = pb2()
    for case in ("flat", "nested"):
        r = protobuf_rates(mod, case, records, repeat)
        log(
            f"formats: protobuf {case} " + ", ".join(f"{k} {v / 1e6:.3f} M/s" for k, v in r.items())
        )
        lines.append(
            f"| protobuf {case} | {r['default'] / 1e6:.3f} M/s | {r['rows'] / 1e6:.3f} M/s "
            f"| {r['default'] / r['rows']:.2f} | {r['udf'] / 1e6:.3f} M/s |"
        )
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    n = args.records

    mod = pb2()
    print(f"{n} records, best of {args.repeat}, records per CPU second of one thread")
    for case in ("flat", "nested"):
        rows = docs(case, n)
        r = protobuf_rates(mod, case, n, args.repeat)
        print(
            f"protobuf {case:7s} ours {r['default'] / 1e6:6.3f} M/s   FromString+MessageToDict "
            f"{r['udf'] / 1e6:6.3f} M/s   ratio {r['default'] / r['udf']:5.2f}x   "
            f"(row by row {r['rows'] / 1e6:6.3f} M/s)"
        )
        # JSON
        jvalues = pa.array(
            [b"\x00\x00\x00\x00\x01" + json.dumps(r).encode() for r in rows], pa.binary()
        )
        jstarts = np.full(n, 5, np.int32)
        atype = parse_ddl(DDL[case])
        jdec = json_schema.Decoder(atype)
        ours = best(lambda: jdec.decode(jvalues, jstarts), args.repeat)
        jpure = json_schema.Decoder(atype, compiled=False)
        pure = best(lambda: jpure.decode(jvalues, jstarts), args.repeat)

        def jsonudf():
            return pa.array([json.loads(v[5:]) for v in jvalues.to_pylist()], atype)

        theirs = best(jsonudf, args.repeat)
        print(
            f"json     {case:7s} ours {n / ours / 1e6:6.3f} M/s   json.loads+pa.array   "
            f"{n / theirs / 1e6:6.3f} M/s   ratio {theirs / ours:5.2f}x   "
            f"(pure path {n / pure / 1e6:6.3f} M/s, pure / default {ours / pure:5.2f})"
        )


if __name__ == "__main__":
    main()
