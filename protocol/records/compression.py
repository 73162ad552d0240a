"""Compression codecs of Kafka record batches: a registry ``codec id -> (compress, decompress)``.

Ids are the values of the low three attribute bits of a batch (v2) or message (v0/v1):
0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd (zstd exists only in v2 batches).

Every decompressor takes ``max_size`` and never produces more than that many bytes: a
batch that would inflate beyond it (a decompression bomb, or plain corruption) raises
``CorruptRecordError`` while memory use stays near ``max_size``. Malformed compressed
data raises ``CorruptRecordError`` as well, whatever the library's own exception type.

The optional libraries (``lz4``, ``zstandard``, ``cramjam``) are imported on first use;
when one is missing, ``MissingCodecError`` names the codec, the topic-partition being read
or written and the pip package that provides it.

Snappy comes in two shapes: the "xerial" framing the Java client writes (an 8-byte magic
``\\x82SNAPPY\\x00``, two int32 versions, then chunks of int32 length + raw snappy block)
and a single raw snappy block (librdkafka and others). Decompression accepts both;
compression writes the xerial framing, which every consumer reads.
"""

from __future__ import annotations

import importlib
import struct
import zlib
from typing import NamedTuple
from collections.abc import Callable

from ..errors import ConfigError, CorruptRecordError, MissingCodecError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4

#: The default cap on the decompressed size of one batch (or one legacy wrapper message).
DEFAULT_MAX_DECOMPRESSED = 256 * 1024 * 1024

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")  # magic, version, compatible version
_XERIAL_BLOCK = 32 * 1024  # the chunk size the Java client's snappy stream uses
_INT32 = struct.Struct(">i")


class Codec(NamedTuple):
    id: int
    name: str
    pip: str | None  # the package providing it, None for the standard library
    compress: Callable[..., bytes]
    decompress: Callable[..., bytes]


def _where(topic, partition) -> str:
    if topic is None:
        return ""
    return f" (reading or writing topic {topic!r}" + (
        f", partition {partition})" if partition is not None else ")"
    )


_MODULES: dict[str, object] = {}


def _import(codec: str, module: str, pip: str, topic, partition):
    found = _MODULES.get(module)
    if found is not None:
        return found
    try:
        found = importlib.import_module(module)
    except ImportError as e:
        raise MissingCodecError(
            f"{codec} compression needs the {pip!r} package, which is not installed: "
            f"pip install {pip}{_where(topic, partition)}"
        ) from e
    _MODULES[module] = found
    return found


def _bomb(codec: str, max_size: int, topic, partition, offset):
    return CorruptRecordError(
        f"{codec} data decompresses to more than {max_size} bytes (the max_decompressed cap)",
        topic=topic,
        partition=partition,
        offset=offset,
    )


def _corrupt(codec: str, err: object, topic, partition, offset):
    return CorruptRecordError(
        f"invalid {codec} data: {err}", topic=topic, partition=partition, offset=offset
    )


# ---- none ----------------------------------------------------------------------------------


def _none_compress(data, *, level=None, topic=None, partition=None) -> bytes:
    return bytes(data)


def _none_decompress(
    data, *, max_size=DEFAULT_MAX_DECOMPRESSED, topic=None, partition=None, offset=None
) -> bytes:
    if len(data) > max_size:
        raise _bomb("uncompressed", max_size, topic, partition, offset)
    return bytes(data)


# ---- gzip ----------------------------------------------------------------------------------


def _gzip_compress(data, *, level=None, topic=None, partition=None) -> bytes:
    c = zlib.compressobj(6 if level is None else level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


def _gzip_decompress(
    data, *, max_size=DEFAULT_MAX_DECOMPRESSED, topic=None, partition=None, offset=None
) -> bytes:
    out = bytearray()
    rest = memoryview(data)
    try:
        while True:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out += d.decompress(rest, max_size + 1 - len(out))
            if len(out) > max_size:
                raise _bomb("gzip", max_size, topic, partition, offset)
            if not d.eof:
                if d.unconsumed_tail:  # stopped only by the cap; cannot happen below it
                    raise _bomb("gzip", max_size, topic, partition, offset)
                raise _corrupt("gzip", "truncated stream", topic, partition, offset)
            rest = memoryview(d.unused_data)
            if not rest or rest[:2] != b"\x1f\x8b":  # more gzip members may follow
                return bytes(out)
    except zlib.error as e:
        raise _corrupt("gzip", e, topic, partition, offset) from None


# ---- snappy --------------------------------------------------------------------------------


def _snappy_compress(data, *, level=None, topic=None, partition=None) -> bytes:
    cramjam = _import("snappy", "cramjam", "cramjam", topic, partition)
    view = memoryview(data)
    parts = [_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1)]
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _raw_snappy_length(block) -> int:
    """The uncompressed length a raw snappy block declares (its unsigned varint preamble)."""
    value = shift = 0
    for i in range(min(5, len(block))):
        b = block[i]
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value
        shift += 7
    raise ValueError("bad length preamble")


def _snappy_decompress(
    data, *, max_size=DEFAULT_MAX_DECOMPRESSED, topic=None, partition=None, offset=None
) -> bytes:
    cramjam = _import("snappy", "cramjam", "cramjam", topic, partition)
    view = memoryview(data)
    try:
        if view[:8] == XERIAL_MAGIC and len(view) >= _XERIAL_HEADER.size:
            blocks = []
            pos = _XERIAL_HEADER.size
            while pos < len(view):
                if pos + 4 > len(view):
                    raise ValueError("truncated xerial chunk length")
                (size,) = _INT32.unpack_from(view, pos)
                pos += 4
                if size < 0 or pos + size > len(view):
                    raise ValueError(f"xerial chunk of {size} bytes overruns the data")
                blocks.append(view[pos : pos + size])
                pos += size
        else:
            blocks = [view]
        total = 0
        for block in blocks:
            total += _raw_snappy_length(block)
            if total > max_size:
                raise _bomb("snappy", max_size, topic, partition, offset)
        return b"".join(bytes(cramjam.snappy.decompress_raw(block)) for block in blocks)
    except CorruptRecordError:
        raise
    except Exception as e:  # cramjam.DecompressionError, ValueError
        raise _corrupt("snappy", e, topic, partition, offset) from None


# ---- lz4 (frame format) --------------------------------------------------------------------


def _lz4_compress(data, *, level=None, topic=None, partition=None) -> bytes:
    lz4_frame = _import("lz4", "lz4.frame", "lz4", topic, partition)
    return lz4_frame.compress(
        data,
        compression_level=level or 0,
        content_checksum=False,
        block_linked=False,
        store_size=False,
    )


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32, needed only to repair the LZ4 frame header checksum of Kafka 0.8-0.9 data."""
    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while pos + 16 <= n:
            for i in range(4):
                (word,) = struct.unpack_from("<I", data, pos)
                v[i] = (_rotl((v[i] + word * _P2) & _M32, 13) * _P1) & _M32
                pos += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        (word,) = struct.unpack_from("<I", data, pos)
        h = (_rotl((h + word * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        h = (_rotl((h + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


def fix_legacy_lz4_header(data) -> bytes:
    """Rewrite the header checksum byte of an LZ4 frame written by Kafka before 0.10.

    Those versions hashed the frame magic together with the descriptor (KAFKA-3160), so a
    conforming decoder rejects the header. The data itself is fine.
    """
    data = bytes(data)
    if len(data) < 7:
        return data
    flg = data[4]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)  # FLG BD [size] [dict id]
    if len(data) <= end:
        return data
    hc = (xxh32(data[4:end]) >> 8) & 0xFF
    return data[:end] + bytes([hc]) + data[end + 1 :]


def _lz4_frame_decode(lz4_frame, data, max_size, topic, partition, offset) -> bytes:
    d = lz4_frame.LZ4FrameDecompressor()
    # ask for a bounded amount at a time: python-lz4 allocates max_length bytes up front
    step = min(max_size + 1, max(1 << 16, 8 * len(data)))
    parts = [d.decompress(data, max_length=step)]
    total = len(parts[0])
    while not d.eof and total <= max_size:
        if d.needs_input:
            raise _corrupt("lz4", "truncated frame", topic, partition, offset)
        step = min(max_size + 1 - total, max(step, total))
        more = d.decompress(b"", max_length=step)
        if not more and not d.eof:  # no progress: never loop on it
            raise _corrupt("lz4", "truncated frame", topic, partition, offset)
        parts.append(more)
        total += len(more)
    if total > max_size:
        raise _bomb("lz4", max_size, topic, partition, offset)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _lz4_decompress(
    data,
    *,
    max_size=DEFAULT_MAX_DECOMPRESSED,
    topic=None,
    partition=None,
    offset=None,
    legacy_header: bool = False,
) -> bytes:
    lz4_frame = _import("lz4", "lz4.frame", "lz4", topic, partition)
    first_error: Exception | None = None
    for attempt in range(2):
        # Kafka before 0.10 (magic 0) wrote a wrong header checksum: try the repaired header
        # first for those, and second for anyone else
        repair = legacy_header != (attempt == 1)
        try:
            return _lz4_frame_decode(
                lz4_frame,
                fix_legacy_lz4_header(data) if repair else data,
                max_size,
                topic,
                partition,
                offset,
            )
        except CorruptRecordError:
            raise
        except RuntimeError as e:  # lz4.frame reports every malformed input as RuntimeError
            first_error = first_error or e
    raise _corrupt("lz4", first_error, topic, partition, offset)


# ---- zstd ----------------------------------------------------------------------------------


def _zstd_compress(data, *, level=None, topic=None, partition=None) -> bytes:
    zstandard = _import("zstd", "zstandard", "zstandard", topic, partition)
    return zstandard.ZstdCompressor(level=3 if level is None else level).compress(data)


def _zstd_decompress(
    data, *, max_size=DEFAULT_MAX_DECOMPRESSED, topic=None, partition=None, offset=None
) -> bytes:
    zstandard = _import("zstd", "zstandard", "zstandard", topic, partition)
    try:
        declared = zstandard.frame_content_size(data)
    except zstandard.ZstdError as e:
        raise _corrupt("zstd", e, topic, partition, offset) from None
    if declared > max_size:  # -1 when the frame does not declare its size
        raise _bomb("zstd", max_size, topic, partition, offset)
    if declared >= 0:  # one frame of known size: a single exact allocation
        try:
            return zstandard.ZstdDecompressor().decompress(data, allow_extra_data=False)
        except zstandard.ZstdError:
            pass  # more frames follow, or it is corrupt: the careful path below tells
    # A decompressobj returns everything a piece of input encodes, so input is fed in slices
    # small enough that one slice cannot expand far past the cap (a zstd block yields at
    # most 128 KiB from a few bytes, so a ratio of 2**15 bounds every slice), and the
    # output is checked after each. Unlike the stream reader, it reports a truncated frame.
    out = bytearray()
    view = memoryview(data)
    try:
        while True:
            d = zstandard.ZstdDecompressor().decompressobj()
            pos = 0
            while pos < len(view) and not d.eof:
                step = min(1 << 16, max(64, (max_size - len(out)) >> 15))
                out += d.decompress(view[pos : pos + step])
                pos += step
                if len(out) > max_size:
                    raise _bomb("zstd", max_size, topic, partition, offset)
            if not d.eof:
                raise _corrupt("zstd", "truncated frame", topic, partition, offset)
            view = memoryview(d.unused_data + bytes(view[pos:]))
            if not view:
                return bytes(out)
    except zstandard.ZstdError as e:
        raise _corrupt("zstd", e, topic, partition, offset) from None


CODECS: dict[int, Codec] = {
    NONE: Codec(NONE, "none", None, _none_compress, _none_decompress),
    GZIP: Codec(GZIP, "gzip", None, _gzip_compress, _gzip_decompress),
    SNAPPY: Codec(SNAPPY, "snappy", "cramjam", _snappy_compress, _snappy_decompress),
    LZ4: Codec(LZ4, "lz4", "lz4", _lz4_compress, _lz4_decompress),
    ZSTD: Codec(ZSTD, "zstd", "zstandard", _zstd_compress, _zstd_decompress),
}
_BY_NAME = {c.name: c.id for c in CODECS.values()}
_BY_NAME["uncompressed"] = NONE


def codec_id(codec: str | int | None) -> int:
    """The id of a codec given by name (``"lz4"``, as in ``compression.type``) or id."""
    if codec is None:
        return NONE
    if isinstance(codec, int) and not isinstance(codec, bool):
        if codec in CODECS:
            return codec
    elif isinstance(codec, str) and codec.lower() in _BY_NAME:
        return _BY_NAME[codec.lower()]
    raise ConfigError(
        f"unknown compression codec {codec!r}; expected one of {', '.join(sorted(_BY_NAME))}"
    )


def compress(
    codec: str | int,
    data,
    *,
    level: int | None = None,
    topic: str | None = None,
    partition: int | None = None,
) -> bytes:
    """Compress ``data`` with a codec given by name or id."""
    return CODECS[codec_id(codec)].compress(data, level=level, topic=topic, partition=partition)


def decompress(
    codec: int,
    data,
    *,
    max_size: int = DEFAULT_MAX_DECOMPRESSED,
    topic: str | None = None,
    partition: int | None = None,
    offset: int | None = None,
) -> bytes:
    """Decompress ``data``; an unknown codec id or bad data raises ``CorruptRecordError``."""
    c = CODECS.get(codec)
    if c is None:
        raise CorruptRecordError(
            f"unknown compression codec id {codec}", topic=topic, partition=partition, offset=offset
        )
    return c.decompress(data, max_size=max_size, topic=topic, partition=partition, offset=offset)
