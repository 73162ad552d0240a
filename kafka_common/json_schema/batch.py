"""The pure path's fast lane: a whole batch of JSON objects parsed in one call of the
standard ``json`` module and converted a column at a time, for batches where that gives
exactly what the row-by-row path (``decoder``) gives. Anything else returns None and the
row-by-row path decodes the batch and names the bad rows.

One parse: the payloads are joined into one JSON array with the constant ``NaN`` between
each two (``[p0,NaN,p1,NaN,p2]``, written over the 5-byte headers in a copy of the value
buffer), read as a sentinel object. A payload that is not whole JSON on its own (``[1``
then ``2]``) would merge with its neighbours. The parse is taken only when there are
``2n - 1`` elements and every odd one is the sentinel. No payload may contain the text
``NaN``, so the sentinels found are exactly the ones put between the payloads, each at the
top level, and the element between two of them is exactly one payload, parsed as it would
be alone (the same decoder's settings, ``parse_float`` included). Values without such a
header (plain JSON), nulls, or any byte that is not ASCII: row by row.

One column at a time: the rows must all be objects; a field whose values are all of the
JSON type its column takes unchanged (a string for a string, an integer for an integer in
range, a float for a double, a boolean for a boolean) goes to Arrow as a list, any other
field through its converter (``converters``).
"""

from __future__ import annotations

import json
from itertools import repeat
from operator import itemgetter

import numpy as np
import pyarrow as pa

from .converters import JSONMismatch, converter

__all__ = ["StructColumns", "parse_all", "sentinel_loads"]

_SENTINEL = object()
_SEPARATOR = np.frombuffer(b",NaN,", dtype=np.uint8)
_NONE = type(None)


def sentinel_loads(decoder: json.JSONDecoder):
    """``decoder``'s ``decode`` with the constant ``NaN`` read as the sentinel (the other
    constants as ``json`` reads them)."""
    constants = {"NaN": _SENTINEL, "Infinity": float("inf"), "-Infinity": float("-inf")}
    twin = json.JSONDecoder(parse_float=decoder.parse_float, parse_constant=constants.__getitem__)
    return twin.decode


def _joined(values: pa.Array, starts) -> str | None:
    """The payloads as one JSON array with a sentinel between each two: the value buffer
    with each header (at least 5 bytes, the same for all) overwritten by ``,NaN,``."""
    n = len(values)
    head = np.asarray(starts, dtype=np.int64)
    skip = int(head[0])
    if skip < len(_SEPARATOR) or (head != skip).any():
        return None
    bufs = values.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int32)[values.offset : values.offset + n + 1]
    base, stop = int(offsets[0]), int(offsets[-1])
    out = np.empty(stop - base + 2, dtype=np.uint8)
    out[0], out[-1] = ord("["), ord("]")
    out[1:-1] = np.frombuffer(bufs[2], dtype=np.uint8)[base:stop]
    begin = offsets[:-1].astype(np.int64) - base + 1
    out[begin[:, None] + np.arange(skip)] = ord(" ")
    out[begin[1:, None] + np.arange(len(_SEPARATOR))] = _SEPARATOR
    try:
        return str(out.data, "ascii")
    except UnicodeDecodeError:  # the row path reads what is not ASCII
        return None


def parse_all(values: pa.Array, starts, loads) -> list | None:
    """The ASCII payloads of ``values`` (each from its start offset) parsed by ``loads``
    (``sentinel_loads``) in one call, or None when that is not certain to be what parsing
    each alone gives (or any fails)."""
    n = len(values)
    if n == 0 or values.null_count or values.type != pa.binary():
        return None
    joined = _joined(values, starts)
    if joined is None or joined.count("NaN") != n - 1:  # a payload's own NaN: the rows decide
        return None
    try:
        docs = loads(joined)
    except (ValueError, RecursionError):
        return None
    if len(docs) != 2 * n - 1 or docs[1::2].count(_SENTINEL) != n - 1:
        return None
    return docs[0::2]


def _check(t: pa.DataType):
    """How a column of ``t`` goes to Arrow as parsed: ``True`` when ``pa.array`` refuses
    every JSON value the converter would change or refuse (a string column, a boolean
    column), the Python types it takes as they are when it must be checked first (it
    would take a boolean as a double, ``1.0`` as an integer), None when never."""
    if pa.types.is_string(t) or pa.types.is_boolean(t):
        return True
    if pa.types.is_float64(t):
        return {float, _NONE}
    if pa.types.is_int64(t) or pa.types.is_int32(t) or pa.types.is_int16(t):
        return {int, _NONE}  # out of range: pa.array refuses, the row path names the row
    return None


_REFUSED = (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, UnicodeEncodeError)


class StructColumns:
    """``build(docs) -> array | None``: parsed rows as a struct array of ``atype``, a column
    at a time; None when a row would be corrupt or anything is not certain."""

    def __init__(self, atype: pa.StructType):
        self.type = atype
        self.fields = [atype.field(i) for i in range(atype.num_fields)]
        self.plan = [
            (f.name, f.type, _check(f.type), converter(f.type, f.name)) for f in self.fields
        ]

    def build(self, docs: list) -> pa.Array | None:
        try:  # a row that is not an object: TypeError (the row path names it)
            columns = [self._column(docs, *step) for step in self.plan]
        except (JSONMismatch, TypeError, *_REFUSED):
            return None
        return pa.StructArray.from_arrays(columns, fields=self.fields)

    @staticmethod
    def _column(docs: list, name: str, ftype: pa.DataType, check, conv) -> pa.Array:
        try:
            column = list(map(itemgetter(name), docs))
        except KeyError:  # a field some rows lack: null there
            column = list(map(dict.get, docs, repeat(name)))
        if check is True:
            try:
                return pa.array(column, ftype)
            except _REFUSED:
                pass
        elif check is not None and check.issuperset(map(type, column)):
            return pa.array(column, ftype)
        return pa.array([None if x is None else conv(x) for x in column], ftype)
