"""Check an installed wheel of the connector: its compiled record decoder and encoder are
the ones in use, imported from the install, and they write and read the same bytes as
the pure-Python path.

    python scripts/check_wheel.py

Run by the Python the wheel is installed in, from a directory that is not a checkout (so
``protocol`` is the installed one): the release workflow runs it on every wheel it builds
(cibuildwheel's test command on macOS, pyproject.toml; its test-linux-wheels job on
Linux), tests/test_pythons.py on every wheel ``make dist`` builds.
Exits non-zero, saying what is wrong, on any failure; prints a JSON report otherwise.

The write: one record batch of keys (some null), values and headers, encoded by
``encode_batch`` for each codec on both paths, which must give the same bytes. The
read: ``decode_records`` of those bytes on both paths, which must give equal Arrow
batches holding the rows written. While the compiled path runs, the pure path's record
writer and reader are made to fail, so a compiled path that quietly fell back to them
fails the check too.
"""

from __future__ import annotations

import json
import os
import sys
import sysconfig


def main() -> None:
    import numpy as np
    import pyarrow as pa

    import protocol
    from protocol.records import accel, decode_pending, decode_records, encode_arrow, encode_batch

    installed = os.path.realpath(sysconfig.get_paths()["platlib"])
    where = os.path.realpath(protocol.__file__)
    if not where.startswith(installed + os.sep):
        raise SystemExit(
            f"protocol was imported from {where}, not from the install "
            f"({installed}): run this outside a checkout"
        )
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    if accel.origin() != "installed" or not accel.available():
        raise SystemExit(
            f"the compiled decoder and encoder are not in use (origin "
            f"{accel.origin()!r}): the wheel lacks protocol/records/"
            f"_fastdecode{suffix} or _fastencode{suffix}, or they do not load"
        )
    if accel.module() is None or accel.encoder() is None:
        raise SystemExit(
            "the compiled decoder and encoder are installed but turned off "
            "(PYKAFKA_PURE_PYTHON is set)"
        )
    here = os.path.dirname(os.path.realpath(accel.__file__))
    for module in (accel.module(), accel.encoder()):
        path = os.path.realpath(module.__file__)
        if os.path.dirname(path) != here or not path.endswith(suffix):
            raise SystemExit(
                f"{module.__name__} was loaded from {path}, not from {here} "
                f"with this Python's suffix {suffix}"
            )

    n = 500
    keys = pa.array([None if i % 7 == 0 else b"k%d" % i for i in range(n)], pa.binary())
    values = pa.array([b"v" * (i % 50) + b"%d" % i for i in range(n)], pa.binary())
    headers = pa.array(
        [[{"key": "h", "value": b"%d" % i}] if i % 3 else [] for i in range(n)],
        pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
    )
    timestamps = np.arange(n, dtype=np.int64) * 3 + 1_700_000_000_000

    def write_and_read(codec: str) -> tuple[bytes, pa.RecordBatch]:
        blob = encode_batch(
            keys,
            values,
            headers=headers,
            timestamps_ms=timestamps,
            producer_id=7,
            producer_epoch=0,
            base_sequence=0,
            compression=codec,
        )
        batch, next_offset = decode_records(
            blob, topic="t", partition=0, start_offset=0, include_headers=True
        )
        if next_offset != n or batch.num_rows != n:
            raise SystemExit(
                f"{codec}: read {batch.num_rows} rows up to {next_offset} of the {n} written"
            )
        for column, written in (("key", keys), ("value", values)):
            if batch.column(column).to_pylist() != written.to_pylist():
                raise SystemExit(f"{codec}: the {column}s read differ from those written")
        return bytes(blob), batch

    def refuse(*args, **kwargs):
        raise AssertionError("the compiled path fell back to the pure one")

    report = {
        "python": "{}.{}".format(*sys.version_info[:2]),
        "origin": accel.origin(),
        "decoder": accel.module().__file__,
        "encoder": accel.encoder().__file__,
        "codecs": {},
    }
    for codec in ("none", "lz4", "zstd"):
        pure_section, decode_arena = encode_arrow._pure_section, decode_pending._decode_arena
        encode_arrow._pure_section = decode_pending._decode_arena = refuse
        try:
            with accel.forced(True):
                compiled = write_and_read(codec)
        finally:
            encode_arrow._pure_section, decode_pending._decode_arena = pure_section, decode_arena
        with accel.forced(False):
            pure = write_and_read(codec)
        if compiled[0] != pure[0]:
            raise SystemExit(f"{codec}: the compiled encoder wrote other bytes than the pure path")
        if not compiled[1].equals(pure[1]):
            raise SystemExit(f"{codec}: the compiled decoder read another batch than the pure path")
        report["codecs"][codec] = len(pure[0])
    print(json.dumps(report))


if __name__ == "__main__":
    main()
