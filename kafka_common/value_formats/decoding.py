"""Decode: the executor side of the reader's ``valueFormat``/``keyFormat``. The binary
value (key) column of a decoded record batch becomes the typed column, plus
``valueSchemaId`` and, under PERMISSIVE, ``valueCorruptRecord``.

Rows are grouped by writer schema id (usually one or two per batch) and each group is
decoded column-wise by the compiled decoder for (id, reader schema); the results are put
back in row order with one ``take``. Writer schemas come with the plan (every version of
the subject, fetched once on the driver); an id outside it is fetched from the registry
once per Python worker (``RegistryClient`` caches by id), never per batch, and an id or
GUID the registry does not have is remembered as missing for a while (bounded), so that
PERMISSIVE data that merely starts with byte 0 does not cost a call per batch.

FAILFAST raises ``ValueDecodeError`` naming topic, partition, offset and schema id at the
first corrupt or unknown row; PERMISSIVE gives such rows a null value and their raw bytes
in ``<column>CorruptRecord``; DROPMALFORMED too, and the reader leaves such rows out
(``decode_formats`` reports them in ``rejects``: ``kafka_source.dead_letters``). A
registry that cannot be reached fails the task whatever the
mode: data is never turned into nulls because the registry is down.
"""

from __future__ import annotations

from typing import Any, NamedTuple, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kafka_common.bounded_cache import BoundedCache
from kafka_common.schema_registry import RegistryAuthError, RegistryClient, RegistryError
from kafka_common.schema_registry.framing import BAD, NULL, OK, read_frames
from protocol.errors import PyKafkaError

from .codecs import decoder_for, reader_type
from .specs import ColumnFormat, Formats

__all__ = ["ValueDecodeError", "Rejects", "decode_formats"]

_clients: BoundedCache[object, RegistryClient] = BoundedCache(16)  # by registry settings


class ValueDecodeError(PyKafkaError):
    """A value (key) could not be decoded under mode FAILFAST."""


class Rejects(NamedTuple):
    """The rows of one batch whose ``column`` could not be decoded: a bool mask, and why
    (by row)."""

    column: str
    rows: np.ndarray
    reasons: dict[int, str]


def _client(formats: Formats) -> RegistryClient | None:
    registry = formats.registry
    if registry is None:
        return None
    return _clients.get_or_make(registry, lambda: RegistryClient(registry))


def reads_plain_json(col: ColumnFormat, formats: Formats) -> bool:
    """JSON with its schema in valueSchema/keySchema and no registry: values may be plain
    JSON text, as ``from_json`` reads them, besides Confluent-framed JSON. Unambiguous:
    a frame starts with byte 0 or 1, JSON text never does."""
    return col.format == "json" and formats.registry is None


#: Added to the error of a value that looks like plain JSON where a frame was expected.
PLAIN_JSON_HINT = (
    "; it looks like plain JSON text, not Confluent's wire format: with "
    "schema.registry.url set, values must carry a schema id. Plain JSON is read with "
    "valueFormat=json and valueSchema (a DDL string or a JSON Schema) without "
    "schema.registry.url, or with from_json(col('value').cast('string'), schema)"
)


def _hint(col: ColumnFormat, reason: str) -> str:
    looks_plain = reason.endswith(("unknown magic byte 123", "unknown magic byte 91"))
    return reason + PLAIN_JSON_HINT if col.format == "json" and looks_plain else reason


def _writer(col: ColumnFormat, formats: Formats, schema_id: int | None, guid: str | None):
    """(id, type, text, refs) of a writer schema, from the plan or the registry."""
    if guid is not None and guid in dict(col.guids):
        schema_id, guid = dict(col.guids)[guid], None
    if guid is None:
        for w in col.writers:
            if w[0] == schema_id:
                return w
        if schema_id == col.reader_id and col.reader_id is not None:
            return (schema_id, col.schema_type, col.reader_schema, col.reader_references)
    client = _client(formats)
    if client is None:
        if col.inline_schema is not None:
            # No registry: every payload was written with the given schema (what
            # from_avro(value, schema) assumes).
            return (
                schema_id if guid is None else -1,
                col.schema_type,
                col.reader_schema,
                col.reader_references,
            )
        raise LookupError("no schema.registry.url to look it up in")
    try:
        found = (
            client.schema_by_guid(guid)
            if guid is not None
            else client.schema_by_id(cast(int, schema_id))
        )  # a key without a guid has an id
    except RegistryAuthError:
        raise
    except RegistryError as exc:
        if exc.status == 404:
            raise LookupError(str(exc)) from None
        raise
    refs = tuple((name, r.text) for name, r in client.referenced(found).items())
    return (found.id if guid is None else -1, found.schema_type, found.text, refs)


def _decode_column(
    col: ColumnFormat,
    formats: Formats,
    conversion: dict,
    values: pa.Array,
    headers,
    where,
    rejects: list | None = None,
) -> tuple[pa.Array, pa.Array, pa.Array]:
    """``values`` decoded: (the typed column, the schema ids, the raw bytes of the rows that
    could not be decoded); FAILFAST raises on the first such row instead. The rows that
    could not be decoded are added to ``rejects`` (a ``Rejects``) when it is given."""
    from kafka_common.schema_registry.framing import KEY_HEADER, VALUE_HEADER

    n = len(values)
    frames = read_frames(
        values,
        protobuf=col.format == "protobuf",
        headers=headers,
        header_name=VALUE_HEADER if col.column == "value" else KEY_HEADER,
        plain=reads_plain_json(col, formats),
    )
    status, ids = frames.status, frames.ids
    corrupt = status == BAD
    reasons = dict(frames.reasons)
    target = reader_type(col, conversion)
    pieces: list[tuple[np.ndarray, pa.Array]] = []
    for key, rows in _rows_by_writer(frames).items():
        piece = _decode_group(
            col,
            formats,
            conversion,
            values,
            frames,
            key,
            np.asarray(rows, dtype=np.int64),
            corrupt,
            reasons,
        )
        if piece is not None:
            rows, array = piece
            pieces.append((rows, array if array.type == target else array.cast(target)))
    if corrupt.any() and not formats.tolerant:
        _fail_fast(col, where, corrupt, ids, reasons)
    if rejects is not None and corrupt.any():
        rejects.append(Rejects(col.column, corrupt, {r: _hint(col, w) for r, w in reasons.items()}))
    if len(pieces) == 1 and len(pieces[0][0]) == n:
        decoded = pieces[0][1]  # every row decoded, in order
    else:
        decoded = _in_row_order(pieces, n, target)
    id_array = pa.array(
        np.where((status != NULL) & (ids >= 0), ids, 0).astype(np.int32),
        mask=(status == NULL) | (ids < 0),
    )
    raw = (
        pc.if_else(pa.array(corrupt), values, pa.nulls(n, values.type))
        if corrupt.any()
        else pa.nulls(n, pa.binary())
    )
    return decoded, id_array, raw


def _rows_by_writer(frames) -> dict[tuple, Any]:
    """The readable rows grouped by (schema id, guid, Protobuf message index): rows with a
    guid or with a message index other than the first message's are rare and looked at
    one by one."""
    status, ids = frames.status, frames.ids
    groups: dict[tuple, Any] = {}  # rows: an index array, or a list for the odd rows
    ok_rows = np.flatnonzero(status == OK)
    odd_rows = set(frames.guids) | set(frames.indexes)
    plain = ok_rows[~np.isin(ok_rows, list(odd_rows))] if odd_rows else ok_rows
    plain_ids = ids[plain]
    if plain_ids.size and plain_ids.min() == plain_ids.max():
        groups[(int(plain_ids[0]), None, (0,))] = plain  # the usual batch: one writer schema
    else:
        for schema_id in np.unique(plain_ids):
            groups[(int(schema_id), None, (0,))] = plain[plain_ids == schema_id]
    for row in sorted(odd_rows):
        if status[row] == OK:
            guid = frames.guids.get(row)
            key = (None if guid is not None else int(ids[row]), guid, frames.indexes.get(row, (0,)))
            groups.setdefault(key, []).append(row)
    return groups


def _decode_group(
    col: ColumnFormat,
    formats: Formats,
    conversion: dict,
    values: pa.Array,
    frames,
    key: tuple,
    rows: np.ndarray,
    corrupt: np.ndarray,
    reasons: dict,
) -> tuple[np.ndarray, pa.Array] | None:
    """The rows of one writer schema decoded: (the rows decoded, their values); the rows
    that could not be are marked in ``corrupt`` with their reason. None: none could."""
    schema_id, guid, path = key
    ids = frames.ids
    label = (
        f"schema guid {guid}"
        if guid is not None
        else f"schema id {schema_id}"
        if schema_id != -1
        else "a plain value (no schema id)"
    )
    try:
        writer = _writer(col, formats, schema_id, guid)
    except LookupError as exc:
        _mark(rows, corrupt, reasons, f"unknown {label} ({exc})")
        return None
    if guid is not None:
        ids[rows] = dict(col.guids).get(guid, writer[0])
    try:
        decoder = decoder_for(col, writer, conversion, path)
    except ValueError as exc:  # the writer schema cannot be resolved to the reader's
        _mark(rows, corrupt, reasons, f"{label} cannot be read as the reader schema: {exc}")
        return None
    whole = len(rows) == len(values)  # the common case: one writer id, no null or bad row
    subset = values if whole else values.take(pa.array(rows))
    starts = frames.starts if whole else frames.starts[rows]
    decoded = decoder.decode(subset, starts)
    array, errors = decoded[0], np.asarray(decoded[1], dtype=bool)
    why = decoded[2] if len(decoded) > 2 else {}
    if not errors.any():
        return rows, array
    for j in np.flatnonzero(errors):
        r = int(rows[j])
        corrupt[r] = True
        reasons[r] = f"corrupt {col.format} payload for {label}" + (
            f": {why[int(j)]}" if int(j) in why else ""
        )
    keep = ~errors
    return rows[keep], array.filter(pa.array(keep))


def _mark(rows: np.ndarray, corrupt: np.ndarray, reasons: dict, reason: str) -> None:
    corrupt[rows] = True
    for r in rows:
        reasons[int(r)] = reason


def _fail_fast(
    col: ColumnFormat, where, corrupt: np.ndarray, ids: np.ndarray, reasons: dict
) -> None:
    """FAILFAST: the first row that could not be decoded, named by topic, partition and
    offset, with how many more there are."""
    row = int(np.flatnonzero(corrupt)[0])
    topic, partition, offsets = where
    schema = f", schema id {int(ids[row])}" if ids[row] >= 0 else ""
    raise ValueDecodeError(
        f"Cannot decode the {col.column} of topic {topic!r} partition {partition} offset "
        f"{int(offsets[row])}{schema} as {col.format} (valueFormat/keyFormat; set "
        f"mode=PERMISSIVE to get null and the raw bytes in {col.column}CorruptRecord "
        f"instead): {_hint(col, reasons.get(row, 'corrupt'))}"
        + (f"; {int(corrupt.sum()) - 1} more such rows in this batch" if corrupt.sum() > 1 else "")
    )


def _in_row_order(pieces, n: int, target: pa.DataType) -> pa.Array:
    """The decoded pieces put back in row order (null where no piece has the row): one
    take over the pieces and a trailing null."""
    parts = [a for _, a in pieces] + [pa.nulls(1, target)]
    combined = pa.concat_arrays(parts) if len(parts) > 1 else parts[0]
    positions = np.full(n, len(combined) - 1, dtype=np.int64)
    at = 0
    for rows, _ in pieces:
        positions[rows] = np.arange(at, at + len(rows))
        at += len(rows)
    return combined.take(pa.array(positions))


def decode_formats(
    batch: pa.RecordBatch,
    formats: Formats,
    *,
    topic: str,
    partition: int,
    keep_headers: bool,
    rejects: list | None = None,
) -> pa.RecordBatch:
    """``batch`` (Kafka's columns, with headers) with the value/key columns decoded and the
    schema id (and corrupt record) columns added; headers dropped unless ``keep_headers``.
    ``rejects``: a list that gets a ``Rejects`` per column with rows that could not be
    decoded (under PERMISSIVE and DROPMALFORMED)."""
    conversion = dict(formats.conversion)
    names = list(batch.schema.names)
    columns = list(batch.columns)
    headers = batch.column(names.index("headers")) if "headers" in names else None
    offsets = np.asarray(batch.column(names.index("offset")))
    extra_names, extra = [], []
    for col in formats.columns:
        i = names.index(col.column)
        decoded, id_array, raw = _decode_column(
            col, formats, conversion, columns[i], headers, (topic, partition, offsets), rejects
        )
        columns[i] = decoded
        extra_names.append(f"{col.column}SchemaId")
        extra.append(id_array)
        if formats.permissive:
            extra_names.append(f"{col.column}CorruptRecord")
            extra.append(raw)
    if headers is not None and not keep_headers:
        j = names.index("headers")
        del names[j], columns[j]
    return pa.RecordBatch.from_arrays(columns + extra, names=names + extra_names)
