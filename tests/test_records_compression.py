"""Compression registry: round trips, both snappy framings, caps, missing libraries."""

import struct
import time

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import ConfigError, CorruptRecordError, MissingCodecError
from protocol.records import compression as C
from .helpers.compression import _break_lz4_header

CODECS = [C.NONE, C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD]


@settings(max_examples=60, deadline=None)
@given(
    st.binary(max_size=100_000) | st.binary(max_size=50).map(lambda b: b * 2000),
    st.sampled_from(CODECS),
)
def test_round_trip(data, codec):
    packed = C.compress(codec, data)
    assert C.decompress(codec, packed) == data


def test_codec_ids_and_names():
    assert [C.codec_id(n) for n in ("none", "gzip", "snappy", "lz4", "zstd")] == CODECS
    assert C.codec_id("LZ4") == 3 and C.codec_id(None) == 0 and C.codec_id(4) == 4
    assert C.codec_id("uncompressed") == 0
    for bad in ("brotli", 5, 9, True, 2.0):
        with pytest.raises(ConfigError):
            C.codec_id(bad)
    assert C.CODECS[3].name == "lz4"


def test_unknown_codec_id_is_corrupt():
    with pytest.raises(CorruptRecordError, match="codec id 5"):
        C.decompress(5, b"abc", topic="t", partition=0, offset=1)


def test_snappy_writes_xerial_framing():
    data = bytes(range(256)) * 300  # > one 32 KiB xerial block
    packed = C.compress("snappy", data)
    magic, version, compat = struct.unpack_from(">8sii", packed)
    assert (magic, version, compat) == (C.XERIAL_MAGIC, 1, 1)
    pos, blocks = 16, []
    while pos < len(packed):
        (size,) = struct.unpack_from(">i", packed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + size])))
        pos += 4 + size
    assert len(blocks) == 3 and b"".join(blocks) == data


def test_snappy_reads_raw_blocks():
    data = b"librdkafka writes raw snappy " * 50
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert C.decompress(C.SNAPPY, raw) == data


def test_gzip_reads_concatenated_members():
    data = C.compress("gzip", b"abc") + C.compress("gzip", b"def")
    assert C.decompress(C.GZIP, data) == b"abcdef"


def test_zstd_reads_concatenated_frames():
    data = C.compress("zstd", b"abc") + C.compress("zstd", b"def")
    assert C.decompress(C.ZSTD, data) == b"abcdef"


@pytest.mark.parametrize("codec", [C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD])
def test_decompression_bomb_is_capped(codec):
    bomb = C.compress(codec, bytes(64 << 20))  # 64 MiB of zeros in a few KiB
    assert len(bomb) < 4 << 20
    start = time.perf_counter()
    with pytest.raises(CorruptRecordError, match="more than 1048576 bytes"):
        C.decompress(codec, bomb, max_size=1 << 20, topic="t", partition=2, offset=9)
    assert time.perf_counter() - start < 5


def test_zstd_bomb_without_declared_size_is_capped():
    import zstandard

    bomb = zstandard.ZstdCompressor(write_content_size=False).compress(bytes(64 << 20))
    with pytest.raises(CorruptRecordError, match="more than"):
        C.decompress(C.ZSTD, bomb, max_size=1 << 20)


def test_cap_is_inclusive():
    data = bytes(1000)
    for codec in CODECS:
        assert C.decompress(codec, C.compress(codec, data), max_size=1000) == data
        with pytest.raises(CorruptRecordError):
            C.decompress(codec, C.compress(codec, data), max_size=999)


@pytest.mark.parametrize("codec", [C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD])
def test_garbage_and_truncation_are_corrupt(codec):
    packed = C.compress(codec, b"some record bytes " * 100)
    for bad in (b"", b"\x00" * 10, packed[: len(packed) // 2], packed[:-3], bytes(range(256))):
        try:
            out = C.decompress(codec, bad, topic="t", partition=1)
        except CorruptRecordError as e:
            assert e.topic == "t" and e.partition == 1
        else:  # some truncations still decode (e.g. a complete snappy chunk)
            assert len(out) <= len(b"some record bytes " * 100)


@pytest.mark.parametrize(
    "codec, module, pip",
    [
        (C.SNAPPY, "cramjam", "cramjam"),
        (C.LZ4, "lz4.frame", "lz4"),
        (C.ZSTD, "zstandard", "zstandard"),
    ],
)
def test_missing_library_names_codec_partition_and_package(monkeypatch, codec, module, pip):
    real_import = C.importlib.import_module

    def fake_import(name, *args, **kwargs):
        if name == module:
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(C, "_MODULES", {})
    monkeypatch.setattr(C.importlib, "import_module", fake_import)
    for call in (
        lambda: C.decompress(codec, b"x", topic="orders", partition=4),
        lambda: C.compress(codec, b"x", topic="orders", partition=4),
    ):
        with pytest.raises(MissingCodecError) as info:
            call()
        text = str(info.value)
        assert C.CODECS[codec].name in text and "'orders'" in text and "partition 4" in text
        assert f"pip install {pip}" in text


def test_xxh32_known_values():
    assert C.xxh32(b"") == 0x02CC5D05
    assert C.xxh32(b"a") == 0x550D7456
    assert C.xxh32(b"abc") == 0x32D153FF
    assert C.xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


def test_legacy_lz4_header_checksum_is_repaired():
    data = b"written by kafka 0.8 " * 40
    good = C.compress("lz4", data)
    broken = _break_lz4_header(good)
    assert broken != good
    assert C.fix_legacy_lz4_header(broken) == good
    assert C.decompress(C.LZ4, broken) == data
    assert C.CODECS[C.LZ4].decompress(broken, legacy_header=True) == data
    assert C.CODECS[C.LZ4].decompress(good, legacy_header=True) == data
