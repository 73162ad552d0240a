"""The columns of one Arrow batch as the record encoder reads them: keys, values and
headers checked and made binary once (``RowSource``), their byte lengths, the rows'
timestamps, and the sizes of every record's varint fields, computed for all rows at once
with numpy."""

from __future__ import annotations

import time
from typing import Any, cast

import numpy as np
import pyarrow as pa

from ..errors import ConfigError
from . import accel
from .vectorized import varint_sizes, zigzag_encode


# ---- inputs --------------------------------------------------------------------------------


def binary_array(arr, what: str, n: int | None = None) -> pa.Array:
    """``arr`` as a pa.binary() array (zero-copy for binary and string)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    elif not isinstance(arr, pa.Array):
        arr = pa.array(arr, pa.binary())
    if not pa.types.is_binary(arr.type):
        try:
            arr = arr.cast(pa.binary())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise ConfigError(f"{what} must be binary or string, not {arr.type}") from e
    if n is not None and len(arr) != n:
        raise ConfigError(f"{what} has {len(arr)} rows, expected {n}")
    return arr


def byte_lengths(arr: pa.Array) -> np.ndarray:
    """Byte length of each element, -1 for null (int64)."""
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=arr.offset + n + 1)
    lengths = np.diff(offsets[arr.offset :]).astype(np.int64)
    if arr.null_count:
        valid = arr.is_valid().to_numpy(zero_copy_only=False)
        lengths[~valid] = -1
    return lengths


def timestamps_array(timestamps_ms, n: int) -> np.ndarray:
    if timestamps_ms is None:
        return np.full(n, int(time.time() * 1000), dtype=np.int64)
    if isinstance(timestamps_ms, (int, np.integer)) and not isinstance(timestamps_ms, bool):
        return np.full(n, int(timestamps_ms), dtype=np.int64)
    if isinstance(timestamps_ms, pa.ChunkedArray):
        timestamps_ms = timestamps_ms.combine_chunks()
    if isinstance(timestamps_ms, pa.Array):
        arr = timestamps_ms
        if pa.types.is_timestamp(arr.type):
            arr = arr.cast(pa.timestamp("ms"), safe=False).cast(pa.int64())
        elif not pa.types.is_integer(arr.type):
            raise ConfigError(f"timestamps must be integers (ms) or timestamps, not {arr.type}")
        if arr.null_count:
            arr = arr.fill_null(int(time.time() * 1000))
        ts = arr.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    else:
        ts = np.asarray(timestamps_ms)
        if ts.dtype.kind not in "iu":
            raise ConfigError(f"timestamps_ms must hold integers, not {ts.dtype}")
        ts = ts.astype(np.int64, copy=False)
    if ts.shape != (n,):
        raise ConfigError(f"timestamps_ms has shape {ts.shape}, expected ({n},)")
    return ts


class FlatHeaders:
    """Flattened headers: per record count, per header key and value arrays and lengths."""

    def __init__(self, headers, n: int):
        if isinstance(headers, pa.ChunkedArray):
            headers = headers.combine_chunks()
        if not isinstance(headers, pa.Array):
            raise ConfigError("headers must be a pyarrow list<struct<key, value>> array")
        if len(headers) != n:
            raise ConfigError(f"headers has {len(headers)} rows, expected {n}")
        if not (
            pa.types.is_list(headers.type) or pa.types.is_large_list(headers.type)
        ) or not pa.types.is_struct(headers.type.value_type):
            raise ConfigError(f"headers must be list<struct<key, value>>, not {headers.type}")
        import pyarrow.compute as pc  # headers only: its import costs a fresh worker 0.1-0.3 s

        counts = pc.list_value_length(headers).fill_null(0)
        self.count = counts.to_numpy(zero_copy_only=False).astype(np.int64)
        flat = pc.list_flatten(headers)
        if flat.null_count:
            raise ConfigError("a header entry is null")
        fields = [f.name for f in flat.type]
        if "key" not in fields or "value" not in fields:
            raise ConfigError("header structs need 'key' and 'value' fields")
        self.keys = binary_array(pc.struct_field(flat, "key"), "header keys")
        if self.keys.null_count:
            raise ConfigError("header keys cannot be null")
        self.values = binary_array(pc.struct_field(flat, "value"), "header values")
        self.key_len = byte_lengths(self.keys)
        self.value_len = byte_lengths(self.values)
        self.total = len(flat)


# ---- sizes ---------------------------------------------------------------------------------


def record_body_sizes(key_len, value_len, ts_delta_bound, offset_delta, hdr):
    """Per record: (body length, sizes of the small varints) as int64 arrays."""
    s_t = varint_sizes(zigzag_encode(ts_delta_bound))
    s_o = varint_sizes(zigzag_encode(offset_delta))
    s_k = varint_sizes(zigzag_encode(key_len))
    s_v = varint_sizes(zigzag_encode(value_len))
    n = key_len.size
    if hdr is None:
        s_h = np.ones(n, dtype=np.int64)
        header_bytes: np.ndarray | int = 0
    else:
        s_h = varint_sizes(zigzag_encode(hdr.count))
        per = (
            varint_sizes(zigzag_encode(hdr.key_len))
            + hdr.key_len
            + varint_sizes(zigzag_encode(hdr.value_len))
            + np.maximum(hdr.value_len, 0)
        )
        owner = np.repeat(np.arange(n), hdr.count)
        header_bytes = (
            np.bincount(owner, weights=per, minlength=n).astype(np.int64) if hdr.total else 0
        )
    body = (
        1
        + s_t
        + s_o
        + s_k
        + np.maximum(key_len, 0)
        + s_v
        + np.maximum(value_len, 0)
        + s_h
        + header_bytes
    )
    return body, s_t, s_o, s_k, s_v, s_h


# ---- the rows of one Arrow batch -----------------------------------------------------------

_UNSET = object()


class RowSource:
    """The columns of one Arrow batch as the encoder reads them, prepared once: any rows of
    it, picked by index and in any order, are then encoded (``encode_rows``) without
    re-ordering or copying its columns first. ``keys`` / ``values`` / ``headers`` as
    ``encode_batch`` takes them."""

    def __init__(self, keys, values, headers=None):
        values = binary_array(values, "values")
        n = len(values)
        keys = None if keys is None else binary_array(keys, "keys", n)
        self.n = n
        self.keys = keys
        self.values = values
        self.headers = headers
        self._hdr = _UNSET
        self.key_len = np.full(n, -1, dtype=np.int64) if keys is None else byte_lengths(keys)
        self.value_len = byte_lengths(values)
        self._buffers = None

    @property
    def hdr(self) -> FlatHeaders | None:
        """The flattened headers (None when no row has one); checked on first use."""
        if self._hdr is _UNSET:
            hdr = None if self.headers is None else FlatHeaders(self.headers, self.n)
            self._hdr = None if hdr is None or hdr.total == 0 else hdr
        return cast("FlatHeaders | None", self._hdr)

    def take(self, order: np.ndarray) -> RowSource:
        """A source of this one's rows in ``order``, its columns copied in that order."""
        index = pa.array(order, pa.int64())
        out = RowSource.__new__(RowSource)
        out.n = len(order)
        out.keys = None if self.keys is None else self.keys.take(index)
        out.values = self.values.take(index)
        out.headers = None if self.headers is None else self.headers.take(index)
        out._hdr = _UNSET
        out.key_len = self.key_len[order]
        out.value_len = self.value_len[order]
        out._buffers = None
        return out

    def base_sizes(self) -> np.ndarray:
        """``record_base_sizes`` of every row."""
        ext = accel.encoder()
        if ext is not None:
            b = self.buffers()
            return np.frombuffer(
                ext.base_sizes(b[1], b[4], b[6], b[7], b[9], b[12]), dtype=np.int64
            )
        zero = np.zeros(self.n, dtype=np.int64)
        body, s_t, s_o, *_ = record_body_sizes(self.key_len, self.value_len, zero, zero, self.hdr)
        return body - s_t - s_o

    def columns(self, rows: np.ndarray | None):
        """(keys, values, headers) of ``rows`` (None: all), in that order (the pure path)."""
        if rows is None:
            return self.keys, self.values, self.headers
        n = len(rows)
        if n and int(rows[-1]) - int(rows[0]) == n - 1 and (np.diff(rows) == 1).all():
            first = int(rows[0])  # a contiguous run: slices, no copies

            def pick(arr):
                return None if arr is None else arr.slice(first, n)
        else:
            index = pa.array(rows, pa.int64())

            def pick(arr):
                return None if arr is None else arr.take(index)

        return pick(self.keys), pick(self.values), pick(self.headers)

    def buffers(self) -> tuple:
        """The arguments of the compiled encoder that describe this source (computed once)."""
        if self._buffers is None:
            key = (
                (None, None, None)
                if self.keys is None
                else (_starts(self.keys), self.key_len, _data(self.keys))
            )
            value = (_starts(self.values), self.value_len, _data(self.values))
            hdr: tuple[Any, ...]
            if self.hdr is None:
                hdr = (None,) * 8
            else:
                h = self.hdr
                first = np.zeros(self.n, dtype=np.int64)
                np.cumsum(h.count[:-1], out=first[1:])
                hdr = (
                    first,
                    np.ascontiguousarray(h.count, dtype=np.int64),
                    _starts(h.keys),
                    h.key_len,
                    _data(h.keys),
                    _starts(h.values),
                    h.value_len,
                    _data(h.values),
                )
            self._buffers = (*key, *value, *hdr)
        return self._buffers


def _starts(arr: pa.Array) -> np.ndarray:
    """Byte position of each element in the array's data buffer (int64)."""
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=arr.offset + len(arr) + 1)
    return offsets[arr.offset : arr.offset + len(arr)].astype(np.int64)


def _data(arr: pa.Array):
    data = arr.buffers()[2]
    return b"" if data is None else data
