"""Micro-benchmark of the record codec on one core: decode (uncompressed, lz4, zstd) and
encode rates for 10-byte keys and 100-byte values, next to kafka-python's record parser and
builder on the same bytes.

    .venv/bin/python tests/bench/bench_codec.py [--records 200000] [--repeat 7]

Not a test (pytest does not collect this file name). Every figure is timed per unit of
work (one Fetch-sized decode call of about 1 MiB, one encoded batch), repeated: the best
time per unit gives the rate one undisturbed core reaches, the median what a busy machine
gave. Both are printed, in records/s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

pa.set_cpu_count(1)
pa.set_io_thread_count(1)

from protocol.records import decode_records  # noqa: E402
from protocol.records.encode_arrow import encode_batch  # noqa: E402

TS = 1_700_000_000_000


def columns(n: int, variable: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    if variable:
        key_len = rng.integers(5, 16, n)
        value_len = rng.integers(50, 151, n)
    else:
        key_len = np.full(n, 10)
        value_len = np.full(n, 100)

    def binary(lengths):
        offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(lengths, out=offsets[1:])
        data = rng.integers(0, 256, int(offsets[-1]), dtype=np.uint8)
        return pa.Array.from_buffers(
            pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
        )

    ts = TS + np.arange(n, dtype=np.int64) // 8  # ~8 records per millisecond
    return binary(key_len), binary(value_len), ts


def fetch_blob(keys, values, ts, per_batch: int, codec: str) -> bytes:
    parts = []
    for start in range(0, len(values), per_batch):
        stop = min(start + per_batch, len(values))
        parts.append(
            encode_batch(
                keys[start:stop],
                values[start:stop],
                timestamps_ms=ts[start:stop],
                base_offset=start,
                compression=codec,
                compression_fallback=False,
            )
        )
    return b"".join(parts)


def timed(fn, repeat: int):
    """Best and median wall time of ``repeat`` calls of ``fn``."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times), statistics.median(times)


def kafka_python_parse(blob: bytes):
    from kafka.record.default_records import DefaultRecordBatch

    pos = 0
    n = 0
    view = memoryview(blob)
    while pos < len(blob):
        size = 12 + int.from_bytes(view[pos + 8 : pos + 12], "big")
        for r in DefaultRecordBatch(bytearray(view[pos : pos + size])):
            r.key, r.value, r.offset, r.timestamp, r.headers  # noqa: B018 (each field decoded)
            n += 1
        pos += size
    return n


def kafka_python_build(keys, values, ts, per_batch: int):
    from kafka.record.default_records import DefaultRecordBatchBuilder

    k = keys.to_pylist()
    v = values.to_pylist()
    t = ts.tolist()
    for start in range(0, len(v), per_batch):
        b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
        for i in range(start, min(start + per_batch, len(v))):
            b.append(i - start, t[i], k[i], v[i], [])
        b.build()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument(
        "--fetch-bytes",
        type=int,
        default=1 << 20,
        help="decode in calls of about this many bytes, like Fetch responses",
    )
    ap.add_argument("--no-kafka-python", action="store_true")
    args = ap.parse_args()
    n = args.records

    try:
        import kafka  # noqa: F401

        have_kp = not args.no_kafka_python
    except ImportError:
        have_kp = False

    print(
        f"{n} records, 10-byte keys, 100-byte values (variable: 5-15 / 50-150), one core; "
        f"records/s at the best (median) time per call, {args.repeat} rounds"
    )
    for variable in (False, True):
        keys, values, ts = columns(n, variable)
        shape = "variable sizes" if variable else "fixed sizes"
        for per_batch in (2000, 130):
            for codec in ("none", "lz4", "zstd"):
                blob = fetch_blob(keys, values, ts, per_batch, codec)
                # split into Fetch-response-sized calls at batch boundaries
                calls, pos = [], 0
                while pos < len(blob):
                    end = pos
                    while end < len(blob) and end - pos < args.fetch_bytes:
                        end += 12 + int.from_bytes(blob[end + 8 : end + 12], "big")
                    calls.append(blob[pos:end])
                    pos = end

                per_call = [
                    decode_records(c, topic="bench", partition=0, start_offset=0)[0].num_rows
                    for c in calls
                ]
                assert sum(per_call) == n
                times = []
                for _ in range(args.repeat):
                    for c, rows in zip(calls, per_call):
                        t = time.perf_counter()
                        decode_records(c, topic="bench", partition=0, start_offset=0)
                        times.append((time.perf_counter() - t) / rows)
                best, med = min(times), statistics.median(times)
                line = (
                    f"decode {codec:5s} {shape:14s} {per_batch:5d}/batch: "
                    f"{1 / best / 1e6:6.2f} M/s ({1 / med / 1e6:5.2f})"
                )
                if have_kp and codec == "none":
                    kp_best, _ = timed(lambda: kafka_python_parse(calls[0]), 3)
                    kp_rate = per_call[0] / kp_best
                    line += f"   kafka-python {kp_rate / 1e6:6.3f} M/s  x{1 / best / kp_rate:5.1f}"
                print(line, flush=True)
        for codec in ("none", "lz4", "zstd"):
            per_batch = 2000
            times = []
            for _ in range(args.repeat):
                for start in range(0, n, per_batch):
                    k, v, t_ = (
                        keys[start : start + per_batch],
                        values[start : start + per_batch],
                        ts[start : start + per_batch],
                    )
                    t = time.perf_counter()
                    encode_batch(
                        k, v, timestamps_ms=t_, compression=codec, compression_fallback=False
                    )
                    times.append((time.perf_counter() - t) / len(v))
            best, med = min(times), statistics.median(times)
            line = (
                f"encode {codec:5s} {shape:14s} {per_batch:5d}/batch: "
                f"{1 / best / 1e6:6.2f} M/s ({1 / med / 1e6:5.2f})"
            )
            if have_kp and codec == "none":
                m = min(n, 20 * per_batch)
                kp_best, _ = timed(
                    lambda: kafka_python_build(keys[:m], values[:m], ts[:m], per_batch), 1
                )
                kp_rate = m / kp_best
                line += f"   kafka-python {kp_rate / 1e6:6.3f} M/s  x{1 / best / kp_rate:5.1f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
