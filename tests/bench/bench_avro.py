"""Micro-benchmark of the Avro codec on one core: Confluent-framed values (5-byte header, then
the datum) decoded into Arrow by ``kafka_common.avro.Decoder``, next to the route users take
without it (fastavro per datum, then the same Arrow column from the Python values), and the
Encoder next to fastavro writing the same rows.

    .venv/bin/python tests/bench/bench_avro.py [--records 100000] [--repeat 5] [--only flat,...]

Cases: ``flat`` (a record of 5 primitives: long, string, double, int, boolean), ``nested``
(a record in a record in a record, with a nullable field), ``evolved`` (the flat record
written by an older schema: a reader field from its default, a promoted int -> long),
``arrays`` (an array of 10 longs and a map of 5 strings per record), ``logical``
(timestamp-micros, date, decimal, uuid, enum). Not a test (pytest does not collect this
file name). Every figure is the best of ``--repeat`` timed calls over the whole batch, in
records per CPU second of the one thread that does the work (numpy and Arrow are kept to
one thread), and the ratio ours / fastavro.
"""

from __future__ import annotations

import argparse
import datetime
import decimal
import io
import json
import os
import time
import uuid

os.environ.setdefault("OMP_NUM_THREADS", "1")

import fastavro  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

pa.set_cpu_count(1)
pa.set_io_thread_count(1)

from kafka_common.avro import Decoder, Encoder, arrow_type, parse_schema  # noqa: E402

FLAT = {
    "type": "record",
    "name": "Flat",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "score", "type": "double"},
        {"name": "count", "type": "int"},
        {"name": "ok", "type": "boolean"},
    ],
}
FLAT_OLD = {
    "type": "record",
    "name": "Flat",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "id", "type": "int"},
        {"name": "score", "type": "double"},
        {"name": "ok", "type": "boolean"},
        {"name": "gone", "type": "string"},
    ],
}
FLAT_READER = {
    "type": "record",
    "name": "Flat",
    "fields": FLAT["fields"][:3]
    + [{"name": "count", "type": "int", "default": 7}, FLAT["fields"][4]],
}
NESTED = {
    "type": "record",
    "name": "Outer",
    "fields": [
        {"name": "id", "type": "long"},
        {
            "name": "user",
            "type": {
                "type": "record",
                "name": "User",
                "fields": [
                    {"name": "name", "type": "string"},
                    {"name": "email", "type": ["null", "string"]},
                    {
                        "name": "geo",
                        "type": {
                            "type": "record",
                            "name": "Geo",
                            "fields": [
                                {"name": "lat", "type": "double"},
                                {"name": "lon", "type": "double"},
                            ],
                        },
                    },
                ],
            },
        },
        {"name": "score", "type": "float"},
    ],
}
ARRAYS = {
    "type": "record",
    "name": "Arrays",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "xs", "type": {"type": "array", "items": "long"}},
        {"name": "attrs", "type": {"type": "map", "values": "string"}},
    ],
}
LOGICAL = {
    "type": "record",
    "name": "Logical",
    "fields": [
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {
            "name": "price",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2},
        },
        {"name": "key", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "state", "type": {"type": "enum", "name": "S", "symbols": ["A", "B", "C"]}},
    ],
}

EPOCH = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)


def rows(case: str, n: int):
    rng = np.random.default_rng(1)
    ids = rng.integers(-(2**40), 2**40, n).tolist()
    if case in ("flat", "evolved"):
        names = [f"user-{i % 997}" for i in range(n)]
        out = [
            {"id": ids[i], "name": names[i], "score": i * 0.25, "count": i % 5000, "ok": i % 3 == 0}
            for i in range(n)
        ]
        if case == "evolved":
            for r in out:
                r["id"] = r["id"] % (2**31)
                r["gone"] = "x"
        return out
    if case == "nested":
        return [
            {
                "id": ids[i],
                "user": {
                    "name": f"n{i % 101}",
                    "email": None if i % 4 == 0 else f"e{i}@x.org",
                    "geo": {"lat": i * 1e-3, "lon": -i * 1e-3},
                },
                "score": float(i % 100),
            }
            for i in range(n)
        ]
    if case == "arrays":
        return [
            {
                "id": ids[i],
                "xs": list(range(i % 7, i % 7 + 10)),
                "attrs": {f"k{j}": f"v{i % 50}" for j in range(5)},
            }
            for i in range(n)
        ]
    return [
        {
            "at": EPOCH + datetime.timedelta(microseconds=i * 997),
            "day": datetime.date(2024, 1, 1) + datetime.timedelta(days=i % 400),
            "price": decimal.Decimal(i % 100000) / 100,
            "key": str(uuid.UUID(int=i)),
            "state": "ABC"[i % 3],
        }
        for i in range(n)
    ]


CASES = {
    "flat": (FLAT, FLAT),
    "nested": (NESTED, NESTED),
    "evolved": (FLAT_OLD, FLAT_READER),
    "arrays": (ARRAYS, ARRAYS),
    "logical": (LOGICAL, LOGICAL),
}


def framed(schema, values):
    parsed = fastavro.parse_schema(schema)
    out = []
    for v in values:
        b = io.BytesIO()
        b.write(b"\x00\x00\x00\x00\x01")
        fastavro.schemaless_writer(b, parsed, v)
        out.append(b.getvalue())
    return pa.array(out, pa.binary())


def best(fn, repeat: int) -> float:
    """The least CPU time of ``repeat`` calls (the thread's own: on a busy machine the
    wall time counts the waits for a core too)."""
    times = []
    for _ in range(repeat):
        t = time.thread_time()
        fn()
        times.append(time.thread_time() - t)
    return min(times)


def fastavro_route(writer, reader, atype):
    """What a UDF does: fastavro per datum (header skipped), then the Arrow column."""
    pw, pr = fastavro.parse_schema(writer), fastavro.parse_schema(reader)
    same = writer is reader

    def run(values):
        out = []
        for v in values.to_pylist():
            b = io.BytesIO(v)
            b.seek(5)
            out.append(fastavro.schemaless_reader(b, pw, None if same else pr))
        return pa.array(out, type=atype) if atype is not None else out

    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", default=",".join(CASES))
    args = ap.parse_args()
    n = args.records
    print(
        f"{'case':<9} {'ours decode':>14} {'fastavro+Arrow':>15} {'ratio':>7}   "
        f"{'ours encode':>12} {'fastavro write':>15} {'ratio':>7}"
    )
    for case in args.only.split(","):
        writer, reader = CASES[case]
        data = rows(case, n)
        values = framed(writer, data)
        w = parse_schema(json.dumps(writer))
        r = parse_schema(json.dumps(reader))
        dec = Decoder(w, r)
        starts = np.full(n, 5, dtype=np.int64)
        arr, errors = dec.decode(values, starts)
        assert not errors.any()
        t_ours = best(lambda: dec.decode(values, starts), args.repeat)
        atype = arrow_type(r)
        # the peer on a tenth of the rows (it is slow), scaled per record
        sample = values.slice(0, max(1, n // 10))
        peer = fastavro_route(writer, reader, None if case in ("arrays", "logical") else atype)
        t_peer = best(lambda: peer(sample), max(1, args.repeat // 2)) * n / len(sample)
        enc = Encoder(r)
        t_enc = best(lambda: enc.encode(arr), args.repeat)
        pr = fastavro.parse_schema(reader)
        plain = arr.slice(0, len(sample)).to_pylist()
        if case == "arrays":
            for row in plain:
                row["attrs"] = dict(row["attrs"])

        def fa_write():
            for v in plain:
                b = io.BytesIO()
                fastavro.schemaless_writer(b, pr, v)

        t_fw = best(fa_write, max(1, args.repeat // 2)) * n / len(sample)
        print(
            f"{case:<9} {n / t_ours / 1e6:>11.2f} M/s {n / t_peer / 1e6:>11.3f} M/s "
            f"{t_peer / t_ours:>6.1f}x   {n / t_enc / 1e6:>9.2f} M/s {n / t_fw / 1e6:>11.3f} M/s "
            f"{t_fw / t_enc:>6.1f}x",
            flush=True,
        )


if __name__ == "__main__":
    main()
