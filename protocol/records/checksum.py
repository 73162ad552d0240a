"""CRC-32C (Castagnoli), the checksum of record batches v2: the ``crc32c`` package's C code
when installed (imported on first use), else a pure-Python table (slow, with a warning)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import cast

from ..primitives import Buffer

_NOT_LOADED = object()
#: The ``crc32c`` package's function (None without the package), imported on first use: the
#: package looks its own version up when imported (``importlib.metadata`` scans every
#: ``sys.path`` entry, and Spark's processes have ``pyspark.zip`` there: about 0.3 s), a cost
#: that processes which never check a CRC (Spark's planner processes) need not pay.
_crc32c_native: object = _NOT_LOADED


def _load_native_crc32c() -> Callable[[Buffer, int], int] | None:
    global _crc32c_native
    try:
        from crc32c import crc32c as native
    except ImportError:  # exercised by a test that hides the package
        native = None  # type: ignore[assignment]  # None: no package
    _crc32c_native = native
    return native


_CRC32C_TABLE: list[int] | None = None
_warned_slow_crc = False


def _crc32c_table() -> list[int]:
    global _CRC32C_TABLE
    if _CRC32C_TABLE is None:
        table = []
        for n in range(256):
            c = n
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            table.append(c)
        _CRC32C_TABLE = table
    return _CRC32C_TABLE


def crc32c_python(data: Buffer, value: int = 0) -> int:
    """CRC-32C (Castagnoli) in pure Python: slow, used only without the ``crc32c`` package."""
    table = _crc32c_table()
    crc = value ^ 0xFFFFFFFF
    for b in bytes(data):
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def crc32c(data: Buffer, value: int = 0) -> int:
    """CRC-32C of ``data`` (continuing from ``value``), as record batches v2 use."""
    native = _crc32c_native
    if native is _NOT_LOADED:
        native = _load_native_crc32c()
    if native is not None:
        return cast("Callable[[Buffer, int], int]", native)(data, value)
    global _warned_slow_crc
    if not _warned_slow_crc:
        _warned_slow_crc = True
        warnings.warn(
            "the 'crc32c' package is not installed: checking record batch CRCs in "
            "pure Python, which is very slow (pip install crc32c)",
            RuntimeWarning,
            stacklevel=2,
        )
    return crc32c_python(data, value)
