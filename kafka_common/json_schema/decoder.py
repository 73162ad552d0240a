"""JSON payloads into an Arrow column of a Spark type, as Spark's ``from_json`` converts them
(the conversion rules: ``converters``).

Rows are parsed with the standard ``json`` module's scanner (in place in the column's
buffer when it is ASCII; a payload that is not whole JSON on its own is parsed alone, so
its neighbours never complete it) and converted by per-type functions built once per
decoder: row by row in Python, with the cyclic GC held off. A batch of framed objects of
simple types goes through Arrow's C++ JSON reader instead (``compiled``), when it reads
them exactly as this path would; else a batch of framed objects is parsed in one call and
converted a column at a time (``batch``, 2x row by row on flat rows), when that too
reads them exactly as row by row would.
"""

from __future__ import annotations

import decimal
import json

import numpy as np
import pyarrow as pa

from kafka_common.gc_pause import gc_paused

from .batch import StructColumns, parse_all, sentinel_loads
from .compiled import compiles, read_rows
from .converters import JSONMismatch, converter
from .spark_types import holds_decimals

__all__ = ["Decoder", "JSONMismatch"]


_MISSING = object()
#: rows per chunk of the batch lane
_CHUNK = 16384


class Decoder:
    """``decode(values, starts) -> (array, errors, reasons)``: each payload (from its start
    offset) parsed as JSON and converted to ``atype`` as ``from_json`` would."""

    def __init__(self, atype: pa.DataType, compiled: bool = True):
        self.type = atype
        # Arrow's JSON reader for the batches it reads as this path would (``compiled``)
        self.compiled = compiled and compiles(atype)
        self.convert = converter(atype)
        # a whole batch in one parse, a column at a time (``batch``), when that is certain
        self.columns = StructColumns(atype) if pa.types.is_struct(atype) else None
        decoder = (
            json.JSONDecoder(parse_float=decimal.Decimal)
            if holds_decimals(atype)
            else json.JSONDecoder()
        )
        # scan_once is set by JSONDecoder.__init__; typeshed does not declare it
        self.loads, self.scan = decoder.decode, decoder.scan_once  # type: ignore[attr-defined]
        self.loads_all = sentinel_loads(decoder)

    def decode(self, values: pa.Array, starts):
        if self.compiled:
            rows = read_rows(values, starts, self.type)
            if rows is not None:
                return rows, np.zeros(len(values), dtype=bool), {}
        with gc_paused():
            if self.columns is None or len(values) == 0:
                return self._decode(values, starts)
            return self._in_chunks(values, np.asarray(starts))

    def _in_chunks(self, values: pa.Array, starts: np.ndarray):
        """The batch lane (``batch``) a chunk of rows at a time (the parsed rows of one
        chunk stay in the CPU's caches while their columns are built: 1.2x whole batches),
        row by row for a chunk it does not take."""
        arrays: list[pa.Array] = []
        errors: list[np.ndarray] = []
        reasons: dict[int, str] = {}
        for first in range(0, len(values), _CHUNK):
            chunk, heads = values.slice(first, _CHUNK), starts[first : first + _CHUNK]
            docs = parse_all(chunk, heads, self.loads_all)
            array = None if docs is None else self.columns.build(docs)  # type: ignore[union-attr]
            if array is not None:
                arrays.append(array)
                errors.append(np.zeros(len(chunk), dtype=bool))
                continue
            array, bad, why = self._decode(chunk, heads)
            arrays.append(array)
            errors.append(bad)
            reasons.update((first + i, reason) for i, reason in why.items())
        whole = arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)
        return whole, np.concatenate(errors), reasons

    def _payloads(self, values: pa.Array, starts):
        """(text, begins, ends): when every payload is ASCII, the whole value buffer as one
        string and each payload's span in it (parsing in place, without a string per
        row, is 1.6x faster on small values); else (None, ...)."""
        n = len(values)
        bufs = values.buffers()
        if n == 0 or bufs[2] is None or values.type != pa.binary():
            return None, None, None
        offsets = np.frombuffer(bufs[1], dtype=np.int32)[values.offset : values.offset + n + 1]
        base = int(offsets[0])
        whole = bufs[2][base : int(offsets[-1])].to_pybytes()
        if not whole.isascii():
            return None, None, None
        begins = (offsets[:-1] - base + np.asarray(starts, dtype=np.int64)).tolist()
        return whole.decode("ascii"), begins, (offsets[1:] - base).tolist()

    def _decode(self, values: pa.Array, starts):
        rows: list[object] = []
        errors = np.zeros(len(values), dtype=bool)
        reasons: dict[int, str] = {}
        convert, loads, scan = self.convert, self.loads, self.scan
        text, begins, ends = self._payloads(values, starts)
        for i, (raw, start) in enumerate(
            zip(values.to_pylist() if text is None else values.is_null().to_pylist(), starts)
        ):
            if raw is None or raw is True:
                rows.append(None)
                continue
            doc = _MISSING
            if text is not None:
                try:
                    doc, end = scan(text, begins[i])
                    if end != ends[i]:
                        doc = _MISSING  # not the whole payload: parse it alone below
                except (StopIteration, ValueError, RecursionError):
                    pass
                if doc is _MISSING:
                    raw = text[begins[i] : ends[i]].encode("ascii")
                    start = 0
            if doc is _MISSING:
                try:
                    doc = loads(raw[int(start) :].decode("utf-8"))
                except (ValueError, UnicodeDecodeError, RecursionError) as exc:
                    errors[i] = True
                    reasons[i] = f"not JSON: {exc}"
                    rows.append(None)
                    continue
            if doc is None:  # from_json's INVALID_JSON_ROOT_FIELD
                errors[i] = True
                reasons[i] = "the JSON value is null, not a row"
                rows.append(None)
                continue
            try:
                rows.append(convert(doc))
            except JSONMismatch as exc:
                errors[i] = True
                reasons[i] = str(exc)
                rows.append(None)
        try:
            return pa.array(rows, self.type), errors, reasons
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, UnicodeEncodeError):
            good = []
            for i, row in enumerate(rows):
                try:
                    pa.array([row], self.type)
                    good.append(row)
                except (
                    pa.ArrowInvalid,
                    pa.ArrowTypeError,
                    OverflowError,
                    UnicodeEncodeError,
                ) as exc:
                    errors[i] = True
                    reasons[i] = f"does not fit {self.type}: {exc}"
                    good.append(None)
            return pa.array(good, self.type), errors, reasons
