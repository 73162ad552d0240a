"""CPU seconds per million Confluent-framed Avro values of the bench's registry schema
(tests/bench/avro_cases.py RECORD), decoded by kafka_common.avro.Decoder on the compiled
path and on the NumPy path, interleaved in one process. Not a test (pytest does not
collect this file name).

    .venv/bin/python tests/bench/bench_avro_ab.py [--records 1000000] [--rounds 5]
"""

import argparse
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

pa.set_cpu_count(1)

from kafka_common.avro import Decoder, Encoder, parse_schema  # noqa: E402
from protocol.records import accel  # noqa: E402
from tests.bench.avro_cases import ARROW, RECORD  # noqa: E402
import json  # noqa: E402


def framed(n: int) -> pa.Array:
    rng = np.random.default_rng(7)
    ids = np.arange(n, dtype=np.int64) * 7919
    sensors = pa.array([f"sensor-{i % 1000:04d}" for i in range(n)])
    values = rng.normal(20, 5, n)
    at = np.int64(1_700_000_000_000_000) + np.arange(n, dtype=np.int64) * 1000
    table = pa.StructArray.from_arrays(
        [
            pa.array(ids),
            sensors,
            pa.array(values),
            pa.array(rng.random(n) < 0.5),
            pa.array(at, type=ARROW.field("at").type),
        ],
        fields=list(ARROW),
    )
    datums = Encoder(parse_schema(json.dumps(RECORD))).encode(table)
    header = b"\x00\x00\x00\x00\x01"
    return pa.array([header + d for d in datums.to_pylist()], pa.binary())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    values = framed(args.records)
    dec = Decoder(parse_schema(json.dumps(RECORD)))
    assert dec.program is not None
    starts = np.full(len(values), 5, dtype=np.int64)
    times = {"compiled": [], "numpy": []}
    for _ in range(args.rounds):
        for name, use in (("compiled", True), ("numpy", False)):
            with accel.forced(use):
                t = time.process_time()
                arr, bad = dec.decode(values, starts)
                times[name].append(time.process_time() - t)
            assert not bad.any() and len(arr) == len(values)
    with accel.forced(True):
        a = dec.decode(values, starts)[0]
    with accel.forced(False):
        b = dec.decode(values, starts)[0]
    assert a.equals(b)
    per_m = 1e6 / len(values)
    for name, ts in times.items():
        print(
            f"{name:8s} best {min(ts) * per_m:.3f} s, median {sorted(ts)[len(ts) // 2] * per_m:.3f}"
            f" s of CPU per million values ({len(values):,} values, {args.rounds} rounds)"
        )


if __name__ == "__main__":
    main()
