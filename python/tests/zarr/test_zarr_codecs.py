"""Codec coverage of ``shmloader read``: every compressor, filter and v3 codec we support.

Each case writes an array with zarr-python into ``tmp_path``, reads it with
``shmloader read`` and compares the result with zarr-python's read value for value
(exact for integers, bitwise for floats with NaN at the same positions).
"""

from __future__ import annotations

import pathlib
import warnings

import blosc2  # installed with ocf-blosc2 (python/requirements-dev.txt)
import numcodecs
import numpy as np
import ocf_blosc2
import pytest
import zarr
from zarr.codecs import (
    BloscCodec,
    BytesCodec,
    Crc32cCodec,
    GzipCodec,
    ShardingCodec,
    TransposeCodec,
    ZstdCodec,
)

from zarr_fixtures import assert_same, read, run, sample, shmloader, smooth_int16, write_array, zarr_read

__all__ = ["shmloader"]  # the session fixture, imported so pytest finds it

SHAPE = (37, 53)  # not a multiple of the chunk shape: edge chunks on both axes
CHUNKS = (16, 32)


def _data(dtype: str, seed: int = 0) -> np.ndarray:
    if np.dtype(dtype) == np.int16:
        return smooth_int16(SHAPE, seed)
    return sample(dtype, SHAPE, seed)


def _check(path: pathlib.Path, tmp_path: pathlib.Path) -> None:
    assert_same(read(path, tmp_path), zarr_read(path))


# --- v2: Blosc ------------------------------------------------------------------------

BLOSC_CNAMES = ["blosclz", "lz4", "lz4hc", "zlib", "zstd"]
SHUFFLES = [numcodecs.Blosc.NOSHUFFLE, numcodecs.Blosc.SHUFFLE, numcodecs.Blosc.BITSHUFFLE]


@pytest.mark.parametrize("dtype", ["u1", "i2", "f4", "f8"])  # typesizes 1, 2, 4, 8
@pytest.mark.parametrize("shuffle", SHUFFLES, ids=["noshuffle", "byteshuffle", "bitshuffle"])
@pytest.mark.parametrize("cname", BLOSC_CNAMES)
def test_v2_blosc(shmloader: str, tmp_path: pathlib.Path, cname: str, shuffle: int, dtype: str) -> None:
    data = _data(dtype)
    comp = numcodecs.Blosc(cname=cname, clevel=5, shuffle=shuffle)
    path = write_array(tmp_path, "a", data, chunks=CHUNKS, zarr_format=2, compressors=comp)
    _check(path, tmp_path)


@pytest.mark.parametrize(
    "cname,clevel,shuffle,blocksize,dtype",
    [
        ("lz4", 0, 1, 0, "i2"),  # clevel 0: stored uncompressed (memcpyed flag)
        ("lz4", 5, 1, 1024, "i2"),  # many blocks per chunk
        ("zstd", 3, 2, 2048, "f4"),  # many blocks, bitshuffle
        ("blosclz", 9, 1, 0, "i2"),  # large chunk, automatic blocksize (several blocks)
        ("lz4", 5, 1, 0, "i8"),
        ("zstd", 5, 1, 1000, "u4"),  # blocksize not a multiple of the typesize: leftovers
    ],
)
def test_v2_blosc_blocks(
    shmloader: str, tmp_path: pathlib.Path, cname: str, clevel: int, shuffle: int, blocksize: int, dtype: str
) -> None:
    shape, chunks = (300, 301), (256, 256)
    if np.dtype(dtype) == np.int16:
        data = smooth_int16(shape, seed=3)
    else:
        data = sample(dtype, shape, seed=3)
    comp = numcodecs.Blosc(cname=cname, clevel=clevel, shuffle=shuffle, blocksize=blocksize)
    path = write_array(tmp_path, "a", data, chunks=chunks, zarr_format=2, compressors=comp)
    _check(path, tmp_path)


# --- v2: other compressors -------------------------------------------------------------

V2_COMPRESSORS = {
    "none": None,
    "zstd-1": numcodecs.Zstd(level=1),
    "zstd-19-checksum": numcodecs.Zstd(level=19, checksum=True),
    "zlib": numcodecs.Zlib(level=5),
    "gzip": numcodecs.GZip(level=6),
    "lz4": numcodecs.LZ4(acceleration=1),
    "bz2": numcodecs.BZ2(level=5),
    "adler32": numcodecs.Adler32(),  # a checksum as the compressor (zarrs has such fixtures)
}


@pytest.mark.parametrize("dtype", ["i2", "f8"])
@pytest.mark.parametrize("name", list(V2_COMPRESSORS))
def test_v2_compressor(shmloader: str, tmp_path: pathlib.Path, name: str, dtype: str) -> None:
    data = _data(dtype, seed=1)
    path = write_array(tmp_path, "a", data, chunks=CHUNKS, zarr_format=2, compressors=V2_COMPRESSORS[name])
    _check(path, tmp_path)


# --- v2: Blosc2 as OCF writes it (ocf_blosc2) ------------------------------------------


@pytest.mark.parametrize("shape,chunks", [((12, 64, 96), (6, 64, 48)), ((5, 300, 301), (2, 256, 256))])
@pytest.mark.parametrize("dtype", ["f2", "f4"])
@pytest.mark.parametrize("cname", ["zstd", "blosc2"])  # "blosc2" means BloscLZ in ocf_blosc2
def test_v2_blosc2_ocf(
    shmloader: str, tmp_path: pathlib.Path, cname: str, dtype: str, shape: tuple[int, ...], chunks: tuple[int, ...]
) -> None:
    data = (smooth_int16(shape, seed=4).astype(np.float32) / 1000).astype(dtype)
    data.reshape(-1)[::97] = np.nan
    comp = ocf_blosc2.Blosc2(cname=cname, clevel=5)
    path = write_array(
        tmp_path, "a", data, chunks=chunks, zarr_format=2, compressors=comp, fill_value=np.nan
    )
    _check(path, tmp_path)


BLOSC2_VARIANTS = [
    # (codec, filter, typesize): python-blosc2 writes typesize 8 by default whatever the
    # dtype (what ocf_blosc2 does today); other writers use the item size.
    ("ZSTD", "SHUFFLE", 2),
    ("ZSTD", "SHUFFLE", 4),
    ("ZSTD", "BITSHUFFLE", 2),
    ("BLOSCLZ", "SHUFFLE", 8),
    ("BLOSCLZ", "NOFILTER", 2),
    ("LZ4", "SHUFFLE", 2),
    ("LZ4", "BITSHUFFLE", 8),
    ("ZLIB", "SHUFFLE", 2),
]


@pytest.mark.parametrize("codec,filt,typesize", BLOSC2_VARIANTS)
def test_v2_blosc2_variants(shmloader: str, tmp_path: pathlib.Path, codec: str, filt: str, typesize: int) -> None:
    """Blosc2 chunks with other codecs, filters and typesizes than ocf_blosc2's defaults.

    The array is written with ocf_blosc2, then every chunk is recompressed with python-blosc2
    using the variant; zarr-python (python-blosc2) reads the result as the reference.
    """
    data = (smooth_int16((6, 100, 90), seed=12).astype(np.float32) / 1000).astype("f2")
    path = write_array(tmp_path, "a", data, chunks=(3, 64, 64), zarr_format=2, compressors=ocf_blosc2.Blosc2(cname="zstd"))
    for chunk in [p for p in path.iterdir() if not p.name.startswith(".")]:
        raw = blosc2.decompress(chunk.read_bytes())
        chunk.write_bytes(
            blosc2.compress(
                raw,
                typesize=typesize,
                clevel=5,
                codec=getattr(blosc2.Codec, codec),
                filter=getattr(blosc2.Filter, filt),
            )
        )
        assert chunk.read_bytes()[3] == typesize
    _check(path, tmp_path)


# --- v2: filters -------------------------------------------------------------------------

V2_FILTERS = {
    "delta-i4": ("i4", [numcodecs.Delta(dtype="<i4")], numcodecs.Zlib(1)),
    "delta-u2-astype-i8": ("u2", [numcodecs.Delta(dtype="<u2", astype="<i8")], numcodecs.Blosc("lz4")),
    "fixedscaleoffset": (
        "f8",
        [numcodecs.FixedScaleOffset(offset=1000, scale=10, dtype="<f8", astype="<u2")],
        numcodecs.Zstd(3),
    ),
    "fixedscaleoffset-i2": (
        "f4",
        [numcodecs.FixedScaleOffset(offset=-5, scale=100, dtype="<f4", astype="<i2")],
        None,
    ),
    "crc32": ("i4", [numcodecs.CRC32()], numcodecs.Zlib(1)),
    "delta+fixedscaleoffset": (
        "f8",
        [
            numcodecs.FixedScaleOffset(offset=0, scale=1000, dtype="<f8", astype="<i4"),
            numcodecs.Delta(dtype="<i4"),
        ],
        numcodecs.Blosc("zstd", shuffle=2),
    ),
}


@pytest.mark.parametrize("name", list(V2_FILTERS))
def test_v2_filters(shmloader: str, tmp_path: pathlib.Path, name: str) -> None:
    dtype, filters, comp = V2_FILTERS[name]
    rng = np.random.default_rng(5)
    if np.dtype(dtype).kind == "f":
        data = np.cumsum(rng.normal(0, 0.5, size=SHAPE), axis=1).astype(dtype) + 3
    else:
        data = np.cumsum(rng.integers(0, 9, size=SHAPE), axis=1).astype(dtype)
    path = write_array(tmp_path, "a", data, chunks=CHUNKS, zarr_format=2, compressors=comp, filters=filters)
    _check(path, tmp_path)


def test_v2_unsupported_filter(shmloader: str, tmp_path: pathlib.Path) -> None:
    """A filter the reader does not implement must be refused with its id in the message."""
    data = sample("bool", (40,), seed=6)
    path = write_array(
        tmp_path, "a", data, chunks=(16,), zarr_format=2, compressors=None, filters=[numcodecs.PackBits()]
    )
    proc = run("read", path, "--out", tmp_path / "o.npy")
    assert proc.returncode == 1, f"exit {proc.returncode}, want 1 (packbits unsupported):\n{proc.stderr}"
    assert "packbits" in proc.stderr
    assert not (tmp_path / "o.npy").exists() or (tmp_path / "o.npy").stat().st_size == 0


# --- v3 codecs ---------------------------------------------------------------------------

V3_CODECS = {
    "bytes-le": dict(serializer=BytesCodec(endian="little"), compressors=None),
    "bytes-be": dict(serializer=BytesCodec(endian="big"), compressors=None),
    "transpose": dict(filters=[TransposeCodec(order=(1, 0))], compressors=None),
    "transpose-be-zstd": dict(
        filters=[TransposeCodec(order=(1, 0))], serializer=BytesCodec(endian="big"), compressors=[ZstdCodec(level=3)]
    ),
    "blosc-lz4-shuffle": dict(compressors=[BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")]),
    "blosc-zstd-bitshuffle": dict(compressors=[BloscCodec(cname="zstd", clevel=5, shuffle="bitshuffle")]),
    "blosc-blosclz-noshuffle": dict(compressors=[BloscCodec(cname="blosclz", clevel=5, shuffle="noshuffle")]),
    "gzip": dict(compressors=[GzipCodec(level=5)]),
    "zstd": dict(compressors=[ZstdCodec(level=0)]),
    "zstd-checksum": dict(compressors=[ZstdCodec(level=5, checksum=True)]),
    "crc32c": dict(compressors=[Crc32cCodec()]),
    "zstd+crc32c": dict(compressors=[ZstdCodec(level=1), Crc32cCodec()]),
}


@pytest.mark.parametrize("dtype", ["i2", "f8"])
@pytest.mark.parametrize("name", list(V3_CODECS))
def test_v3_codecs(shmloader: str, tmp_path: pathlib.Path, name: str, dtype: str) -> None:
    data = _data(dtype, seed=7)
    path = write_array(tmp_path, "a", data, chunks=CHUNKS, zarr_format=3, **V3_CODECS[name])
    _check(path, tmp_path)


NUMCODECS_V3 = [
    "numcodecs.zlib",
    "numcodecs.bz2",
    "numcodecs.lz4",
    "numcodecs.blosc",
    "numcodecs.crc32",
    "numcodecs.adler32",
    "numcodecs.delta+zstd",
]


def _numcodecs_v3(name: str) -> dict:
    from zarr.codecs import numcodecs as nc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "numcodecs codecs are not in the v3 specification"
        return {
            "numcodecs.zlib": lambda: dict(compressors=[nc.Zlib(level=3)]),
            "numcodecs.bz2": lambda: dict(compressors=[nc.BZ2(level=3)]),
            "numcodecs.lz4": lambda: dict(compressors=[nc.LZ4()]),
            "numcodecs.blosc": lambda: dict(compressors=[nc.Blosc(cname="zstd", clevel=3, shuffle=1)]),
            "numcodecs.crc32": lambda: dict(compressors=[ZstdCodec(level=1), nc.CRC32()]),
            "numcodecs.adler32": lambda: dict(compressors=[nc.Adler32()]),
            "numcodecs.delta+zstd": lambda: dict(filters=[nc.Delta(dtype="<i2")], compressors=[ZstdCodec(level=1)]),
        }[name]()


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")
@pytest.mark.parametrize("name", NUMCODECS_V3)
def test_v3_numcodecs_wrappers(shmloader: str, tmp_path: pathlib.Path, name: str) -> None:
    """zarr-python's numcodecs.* v3 codecs (the v2 compressors and filters inside v3 arrays)."""
    data = smooth_int16(SHAPE, seed=13)
    path = write_array(tmp_path, "a", data, chunks=CHUNKS, zarr_format=3, **_numcodecs_v3(name))
    assert f'"{name.split("+")[0]}"' in (path / "zarr.json").read_text()
    _check(path, tmp_path)


def test_v3_transpose_3d(shmloader: str, tmp_path: pathlib.Path) -> None:
    data = sample("u2", (7, 9, 11), seed=8)
    path = write_array(
        tmp_path, "a", data, chunks=(4, 5, 6), zarr_format=3, filters=[TransposeCodec(order=(2, 0, 1))]
    )
    _check(path, tmp_path)


# --- v3 sharding ---------------------------------------------------------------------------


def _shard(index_location: str, inner: tuple[int, ...], codecs: list) -> ShardingCodec:
    return ShardingCodec(chunk_shape=inner, codecs=codecs, index_location=index_location)


SHARDING = {
    # shard shape, serializer
    "end-default": ((16, 32), None),  # zarr-python's own sharding: index at the end, zstd inside
    "start-gzip": ((16, 32), _shard("start", (8, 16), [BytesCodec(), GzipCodec(level=3)])),
    "end-blosc-be": (
        (16, 32),
        _shard("end", (4, 8), [BytesCodec(endian="big"), BloscCodec(cname="lz4", shuffle="shuffle")]),
    ),
    "start-transpose": (
        (16, 32),
        _shard("start", (8, 8), [TransposeCodec(order=(1, 0)), BytesCodec(), ZstdCodec(level=1)]),
    ),
    "nested": (
        (16, 32),
        _shard("end", (8, 16), [_shard("start", (4, 4), [BytesCodec(), ZstdCodec(level=1), Crc32cCodec()])]),
    ),
}


@pytest.mark.parametrize("name", list(SHARDING))
def test_v3_sharding(shmloader: str, tmp_path: pathlib.Path, name: str) -> None:
    shard_shape, serializer = SHARDING[name]
    data = smooth_int16(SHAPE, seed=9)
    if serializer is None:
        path = write_array(tmp_path, "a", data, chunks=(8, 16), shards=shard_shape, zarr_format=3)
    else:
        path = write_array(
            tmp_path, "a", data, chunks=shard_shape, zarr_format=3, serializer=serializer, compressors=None
        )
    _check(path, tmp_path)


def test_v3_sharding_partial_shards(shmloader: str, tmp_path: pathlib.Path) -> None:
    """Shards with some inner chunks never written (empty index entries) and whole shards missing."""
    data = sample("f4", (40, 40), seed=10)
    serializer = _shard("end", (5, 5), [BytesCodec(), ZstdCodec(level=1)])
    path = write_array(
        tmp_path,
        "a",
        data,
        chunks=(20, 20),
        zarr_format=3,
        serializer=serializer,
        compressors=None,
        fill_value=-7.5,
        write=(slice(3, 12), slice(6, 18)),
    )
    # only part of the first shard was written: three of the four shards are missing
    assert len([p for p in (path / "c").rglob("*") if p.is_file()]) == 1
    got = read(path, tmp_path)
    want = zarr_read(path)
    assert np.count_nonzero(want == np.float32(-7.5)) > 1000
    assert_same(got, want)


def test_v3_sharding_box(shmloader: str, tmp_path: pathlib.Path) -> None:
    data = smooth_int16((64, 64), seed=11)
    path = write_array(tmp_path, "a", data, chunks=(4, 4), shards=(32, 32), zarr_format=3)
    got = read(path, tmp_path, box="30:35,1:63")
    assert_same(got, zarr.open_array(str(path), mode="r")[30:35, 1:63])
