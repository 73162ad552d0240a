"""Decode A/B on one core: ``decode_records`` over the same Fetch-sized bytes, the pure
Python path against the optional compiled accelerator (protocol/records/accel.py), in
interleaved rounds so both see the same machine.

    .venv/bin/python tests/bench/bench_decode_ab.py [--records 200000] [--rounds 7]

Not a test (pytest does not collect this file name). The data is the benchmark's
(bench_data.columns: 10-byte keys, JSON-like values, one 24-byte header, ~64 KB batches),
with and without its header, 100-byte and 1 KB values, uncompressed and lz4, cut into
calls of about 1 MiB like Fetch responses. Reports records/s at the best and the median
round (a round decodes every call once) for each path.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pyarrow as pa  # noqa: E402

pa.set_cpu_count(1)
pa.set_io_thread_count(1)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_data  # noqa: E402

from protocol.records import accel, decode_records  # noqa: E402
from protocol.records.encode_arrow import encode_batch  # noqa: E402


def fetch_calls(
    records: int, value_size: int, headers: bool, codec: str, fetch_bytes: int = 1 << 20
) -> list[bytes]:
    keys, values, hdrs, ts = bench_data.columns(0, records, value_size)
    record_bytes = bench_data.KEY_SIZE + value_size + (24 if headers else 0) + 8
    per_batch = max(1, bench_data.BATCH_BYTES // record_bytes)
    calls, current, size = [], [], 0
    for start in range(0, records, per_batch):
        step = min(per_batch, records - start)
        blob = encode_batch(
            keys.slice(start, step),
            values.slice(start, step),
            headers=hdrs.slice(start, step) if headers else None,
            timestamps_ms=ts[start : start + step],
            base_offset=start,
            compression=codec,
            compression_fallback=False,
        )
        if size + len(blob) > fetch_bytes and current:
            calls.append(b"".join(current))
            current, size = [], 0
        current.append(blob)
        size += len(blob)
    if current:
        calls.append(b"".join(current))
    return calls


def one_round(calls, include_headers: bool) -> tuple[float, int]:
    rows = 0
    start = time.perf_counter()
    for c in calls:
        rows += decode_records(
            c, topic="bench", partition=0, start_offset=0, include_headers=include_headers
        )[0].num_rows
    return time.perf_counter() - start, rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--codecs", default="none,lz4")
    ap.add_argument("--sizes", default="100,1000")
    args = ap.parse_args(argv)
    paths = ["pure"] + (["accel"] if accel.available() else [])
    print(
        f"accelerator: {'built' if accel.available() else 'not built'}; "
        f"{args.records} records per case, {args.rounds} interleaved rounds; "
        f"M records/s best (median)"
    )
    for value_size in (int(s) for s in args.sizes.split(",")):
        n = args.records if value_size <= 100 else max(1, args.records // 5)
        for headers in (True, False):
            for codec in args.codecs.split(","):
                calls = fetch_calls(n, value_size, headers, codec)
                times: dict[str, list[float]] = {p: [] for p in paths}
                for _ in range(args.rounds):
                    for p in paths:
                        with accel.forced(p == "accel"):
                            t, rows = one_round(calls, headers)
                        if rows != n:
                            raise RuntimeError(f"{p}: {rows} rows, {n} expected")
                        times[p].append(t)
                line = f"{value_size:5d} B {'1 header ' if headers else 'no header'} {codec:5s}"
                for p in paths:
                    line += (
                        f"  {p} {n / min(times[p]) / 1e6:5.2f} "
                        f"({n / statistics.median(times[p]) / 1e6:5.2f})"
                    )
                if len(paths) == 2:
                    line += f"  x{min(times['pure']) / min(times['accel']):4.1f}"
                print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
