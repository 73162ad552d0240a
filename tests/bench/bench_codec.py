"""Micro-benchmark of the record codec on one core: decode (uncompressed, lz4, zstd) and
encode rates for 10-byte keys and 100-byte values, next to kafka-python's record parser and
builder on the same bytes.

    .venv/bin/python tests/bench/bench_codec.py [--records 200000] [--repeat 7]

Not a test (pytest does not collect this file name). Prints records/s: the best of the
repeats and the median, since a shared machine makes single runs noisy.
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
        return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets),
                                                      pa.py_buffer(data)])

    ts = TS + np.arange(n, dtype=np.int64) // 8  # ~8 records per millisecond
    return binary(key_len), binary(value_len), ts


def fetch_blob(keys, values, ts, per_batch: int, codec: str) -> bytes:
    parts = []
    for start in range(0, len(values), per_batch):
        stop = min(start + per_batch, len(values))
        parts.append(encode_batch(keys[start:stop], values[start:stop],
                                  timestamps_ms=ts[start:stop], base_offset=start,
                                  compression=codec, compression_fallback=False))
    return b"".join(parts)


def timed(fn, repeat: int):
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
        size = 12 + int.from_bytes(view[pos + 8:pos + 12], "big")
        for r in DefaultRecordBatch(bytearray(view[pos:pos + size])):
            r.key, r.value, r.offset, r.timestamp, r.headers
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
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--fetch-bytes", type=int, default=1 << 20,
                    help="decode in calls of about this many bytes, like Fetch responses")
    ap.add_argument("--no-kafka-python", action="store_true")
    args = ap.parse_args()
    n = args.records

    try:
        import kafka  # noqa: F401
        have_kp = not args.no_kafka_python
    except ImportError:
        have_kp = False

    print(f"{n} records, 10-byte keys, 100-byte values (variable: 5-15 / 50-150), "
          f"one core; records/s best (median) of {args.repeat}")
    for variable in (False, True):
        keys, values, ts = columns(n, variable)
        shape = "variable sizes" if variable else "fixed sizes"
        for per_batch in (2000, 130):
            for codec in ("none", "lz4", "zstd"):
                blob = fetch_blob(keys, values, ts, per_batch, codec)
                # split into Fetch-response-sized calls at batch boundaries
                calls, pos, start = [], 0, 0
                while pos < len(blob):
                    end = pos
                    while end < len(blob) and end - pos < args.fetch_bytes:
                        end += 12 + int.from_bytes(blob[end + 8:end + 12], "big")
                    calls.append(blob[pos:end])
                    pos = end

                def run():
                    got = 0
                    for c in calls:
                        got += decode_records(c, topic="bench", partition=0,
                                              start_offset=0)[0].num_rows
                    assert got == n

                best, med = timed(run, args.repeat)
                line = (f"decode {codec:5s} {shape:14s} {per_batch:5d}/batch: "
                        f"{n / best / 1e6:6.2f} M/s ({n / med / 1e6:5.2f})")
                if have_kp and codec == "none":
                    kp_best, _ = timed(lambda: kafka_python_parse(blob), 1)
                    line += f"   kafka-python {n / kp_best / 1e6:6.3f} M/s  x{kp_best / best:5.1f}"
                print(line, flush=True)
        for codec in ("none", "lz4", "zstd"):
            per_batch = 2000

            def enc():
                for start in range(0, n, per_batch):
                    encode_batch(keys[start:start + per_batch], values[start:start + per_batch],
                                 timestamps_ms=ts[start:start + per_batch], compression=codec,
                                 compression_fallback=False)

            best, med = timed(enc, args.repeat)
            line = (f"encode {codec:5s} {shape:14s} {per_batch:5d}/batch: "
                    f"{n / best / 1e6:6.2f} M/s ({n / med / 1e6:5.2f})")
            if have_kp and codec == "none":
                kp_best, _ = timed(lambda: kafka_python_build(keys, values, ts, per_batch), 1)
                line += f"   kafka-python {n / kp_best / 1e6:6.3f} M/s  x{kp_best / best:5.1f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
