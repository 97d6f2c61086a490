#!/usr/bin/env python3
"""Write the Zarr fixtures the Go tests in readers/zarr read.

Run from the repository root:

    .venv/bin/python readers/zarr/testdata/gen.py

It rewrites readers/zarr/testdata/{v2,v3,cf2,cf3}.zarr and manifest.json and the
expected/ directory. Every array is written by zarr-python (or xarray, for the CF
stores); the expected values are what zarr-python (or xarray) reads back, saved as
raw little-endian C-order bytes, so the Go tests compare against the reference
implementation and not against numbers typed by hand.
"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import xarray as xr
import zarr
from ocf_blosc2 import Blosc2
from zarr.codecs import (
    BloscCodec,
    BytesCodec,
    Crc32cCodec,
    GzipCodec,
    ShardingCodec,
    TransposeCodec,
    ZstdCodec,
)

HERE = Path(__file__).resolve().parent
EXPECTED = HERE / "expected"

numcodecs.register_codec(Blosc2)

manifest: dict[str, Any] = {"zarr": zarr.__version__, "numcodecs": numcodecs.__version__, "arrays": []}


def record(store: Path, path: str, extra: dict[str, Any] | None = None) -> None:
    """Read an array back with zarr-python and record its values for the Go test."""
    arr = zarr.open_array(store=str(store), path=path, mode="r")
    data = arr[...]
    entry: dict[str, Any] = {
        "store": store.name,
        "path": path,
        "shape": list(arr.shape),
        "dtype": str(data.dtype),
        "zarr_format": arr.metadata.zarr_format,
    }
    flat = data.reshape(-1)
    if data.dtype.kind == "S" or (data.dtype.kind == "O" and any(isinstance(v, bytes) for v in flat)):
        entry["bytes_hex"] = [bytes(v).hex() for v in flat]
    elif data.dtype.kind in "OUT":
        entry["strings"] = [str(v) for v in flat]
    elif data.dtype.kind in "Mm":
        entry["int64"] = [int(v) for v in data.reshape(-1).view("<i8")]
    else:
        name = f"{store.name}_{path.replace('/', '_')}.bin"
        le = data.astype(data.dtype.newbyteorder("<"), copy=False)
        (EXPECTED / name).write_bytes(np.ascontiguousarray(le).tobytes())
        entry["data"] = name
        entry["native"] = le.dtype.str
    if extra:
        entry.update(extra)
    manifest["arrays"].append(entry)


def fresh(name: str) -> Path:
    p = HERE / name
    if p.exists():
        shutil.rmtree(p)
    return p


def ramp(shape: tuple[int, ...], dtype: str, start: int = 0) -> np.ndarray:
    n = int(np.prod(shape))
    return (np.arange(start, start + n) % 251).astype(dtype).reshape(shape)


def v2_store() -> None:
    p = fresh("v2.zarr")
    root = zarr.open_group(str(p), mode="w", zarr_format=2)
    root.attrs["title"] = "gobatch v2 fixtures"
    rng = np.random.default_rng(42)

    def mk(name: str, data: np.ndarray, chunks: tuple[int, ...], **kw: Any) -> None:
        a = root.create_array(name, shape=data.shape, dtype=data.dtype, chunks=chunks, **kw)
        a[...] = data
        record(p, name)

    # int16, blosc lz4 byte shuffle (the zarr-python 2 default), edge chunks and a
    # missing chunk (all fill_value, so zarr-python does not write it).
    d = rng.integers(-3000, 3000, size=(20, 30)).astype("<i2")
    d[0:8, 0:7] = -1
    mk("i2_blosc_lz4", d, (8, 7), compressors=numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE), fill_value=-1)
    # float32 zstd, nested keys, NaN fill and a missing chunk.
    d = rng.standard_normal((9, 10, 11)).astype("<f4")
    d[4:8, 0:4, 0:5] = np.nan
    mk(
        "f4_zstd_nested",
        d,
        (4, 4, 5),
        compressors=numcodecs.Zstd(level=3),
        fill_value=np.nan,
        chunk_key_encoding={"name": "v2", "separator": "/"},
    )
    mk("f8_zlib_F", rng.standard_normal((7, 6)), (3, 4), compressors=numcodecs.Zlib(1), order="F")
    mk("i4_F_3d", ramp((5, 6, 7), "<i4"), (2, 4, 3), compressors=None, order="F")
    mk("u1_gzip", ramp((50,), "|u1"), (16,), compressors=numcodecs.GZip(5))
    mk("i8_bz2", rng.integers(-(2**40), 2**40, size=(13,)).astype("<i8"), (5,), compressors=numcodecs.BZ2(1))
    mk("u4_lz4", ramp((40, 3), "<u4"), (16, 3), compressors=numcodecs.LZ4())
    mk("be_i4_raw", ramp((11,), ">i4") - 100, (4,), compressors=None)
    mk("be_f8_zlib", rng.standard_normal((6,)).astype(">f8"), (4,), compressors=numcodecs.Zlib(3))
    mk(
        "f2_blosc_zstd_bitshuffle",
        rng.standard_normal((16, 16)).astype("<f2"),
        (8, 16),
        compressors=numcodecs.Blosc("zstd", 5, numcodecs.Blosc.BITSHUFFLE),
    )
    mk("bool", rng.integers(0, 2, size=(17,)).astype(bool), (8,), compressors=numcodecs.Zstd())
    mk("i1", ramp((10,), "|i1") - 5, (3,), compressors=numcodecs.Zstd())
    mk("u2", ramp((10,), "<u2"), (4,), compressors=numcodecs.Zstd())
    mk("u8", ramp((10,), "<u8") * 2**40, (4,), compressors=numcodecs.Zstd())
    mk("delta_i4", (np.arange(30) * 7 - 50).astype("<i4"), (8,), filters=[numcodecs.Delta(dtype="<i4", astype="<i2")], compressors=numcodecs.Zstd())
    mk(
        "fso_f8",
        np.linspace(10, 20, 25),
        (10,),
        filters=[numcodecs.FixedScaleOffset(offset=10, scale=100, dtype="<f8", astype="<u2")],
        compressors=numcodecs.Zlib(1),
    )
    # numcodecs checksums as filters and as the compressor.
    mk("crc32_filter", ramp((20,), "<i4"), (8,), filters=[numcodecs.CRC32()], compressors=numcodecs.Zstd(1))
    mk("adler32_end", ramp((20,), "<u2"), (8,), filters=[numcodecs.Delta(dtype="<u2"), numcodecs.Adler32(location="end")], compressors=numcodecs.Zlib(1))
    mk("crc32c_compressor", ramp((20,), "<f8"), (8,), compressors=numcodecs.CRC32C())
    # ocf-blosc2, both of its cnames.
    mk("blosc2_zstd_f4", rng.standard_normal((12, 10)).astype("<f4"), (5, 10), compressors=Blosc2("zstd", 5))
    mk("blosc2_blosclz_f2", rng.standard_normal((12, 10)).astype("<f2"), (8, 5), compressors=Blosc2("blosc2", 5))
    # fill value spellings, read on an array with only missing chunks.
    for name, fv, dt in [("fill_nan", np.nan, "<f4"), ("fill_inf", np.inf, "<f8"), ("fill_ninf", -np.inf, "<f4"), ("fill_int", 7, "<i2")]:
        root.create_array(name, shape=(5,), dtype=dt, chunks=(2,), fill_value=fv, compressors=numcodecs.Zstd())
        record(p, name)
    # fill_value null: zarr-python 3 reads missing chunks as zeros / empty strings.
    a = root.create_array("fill_null", shape=(5,), dtype="<f4", chunks=(2,), fill_value=None, compressors=None)
    a[0:2] = np.array([1.5, -2.0], dtype="<f4")
    record(p, "fill_null")
    root.create_array("str_fill_null", shape=(3,), dtype=str, chunks=(2,), fill_value=None)
    record(p, "str_fill_null")
    # Strings and times (coordinates).
    mk("str_U6", np.array(["a", "bb", "ccc", "déjà", "", "zzzzzz", "x"], dtype="<U6"), (3,), compressors=numcodecs.Zstd())
    mk("str_S4", np.array([b"ab", b"cdef", b"", b"g"], dtype="|S4"), (3,), compressors=None)
    a = root.create_array("str_vlen", shape=(5,), dtype=str, chunks=(2,))
    a[...] = np.array(["alpha", "", "γάμμα", "delta", "e"], dtype=object)
    record(p, "str_vlen")
    a = root.create_array("str_vlen_F", shape=(3, 4), dtype=str, chunks=(2, 3), order="F")
    a[...] = np.array([["a", "bb", "c", "dd"], ["eee", "f", "", "g"], ["h", "ii", "jjj", "k"]], dtype=object)
    record(p, "str_vlen_F")
    from zarr.core.dtype import VariableLengthBytes

    a = root.create_array("bytes_vlen", shape=(4,), dtype=VariableLengthBytes(), chunks=(3,))
    a[0:3] = np.array([b"ab", b"", b"\xff\x00x"], dtype=object)
    record(p, "bytes_vlen")
    mk("dt_ns", np.array(["2021-01-01T00:00", "2021-06-01T12:30", "NaT", "1969-12-31T23:59:59.5"], dtype="<M8[ns]"), (3,), compressors=numcodecs.Zstd())
    mk("td_s", np.array([0, 60, -3600, 86400], dtype="<m8[s]"), (4,), compressors=None)
    # Nested group.
    sub = root.create_group("sub")
    b = sub.create_array("inner", shape=(4, 4), dtype="<i4", chunks=(2, 2), compressors=numcodecs.Zlib(1))
    b[...] = ramp((4, 4), "<i4")
    record(p, "sub/inner")
    # 0-d and empty arrays.
    a = root.create_array("zero_d", shape=(), dtype="<f8", compressors=numcodecs.Zstd())
    a[...] = 3.25
    record(p, "zero_d")
    root.create_array("empty", shape=(0, 5), dtype="<i4", chunks=(2, 2))
    record(p, "empty")
    # More filters: shuffle, quantize, bitround, astype.
    mk("shuffle_f4", rng.standard_normal((20,)).astype("<f4"), (8,), filters=[numcodecs.Shuffle(elementsize=4)], compressors=numcodecs.Zlib(1))
    mk("quantize_f8", rng.standard_normal((20,)), (8,), filters=[numcodecs.Quantize(digits=3, dtype="<f8", astype="<f4")], compressors=None)
    mk("bitround_f4", rng.standard_normal((20,)).astype("<f4"), (8,), filters=[numcodecs.BitRound(keepbits=6)], compressors=numcodecs.Zstd())
    mk("astype_f8", np.arange(20, dtype="<f8") * 0.5, (8,), filters=[numcodecs.AsType(encode_dtype="<f4", decode_dtype="<f8")], compressors=None)
    # Strings: big-endian unicode; bytes with a non-empty fill and a missing chunk.
    mk("str_BU3", np.array(["ab", "xyz", "", "q"], dtype=">U3"), (3,), compressors=None)
    a = root.create_array("str_S3_fill", shape=(5,), dtype="|S3", chunks=(2,), fill_value=b"ab", compressors=None)
    a[0:2] = np.array([b"x", b"yz"], dtype="|S3")
    record(p, "str_S3_fill")
    # A legacy "nested" array: "/" keys and no dimension_separator in .zarray (as
    # zarr-python 2.x NestedDirectoryStore wrote). Recorded before the key is removed.
    mk("legacy_nested", ramp((5, 6), "<i2"), (2, 4), compressors=numcodecs.Zlib(1), chunk_key_encoding={"name": "v2", "separator": "/"})
    za = p / "legacy_nested" / ".zarray"
    meta = json.loads(za.read_text())
    del meta["dimension_separator"]
    za.write_text(json.dumps(meta, indent=4))
    zarr.consolidate_metadata(str(p), zarr_format=2)
    # zarr-python fills in dimension_separator "." when it consolidates; take it out
    # again (zarr-python 3 would then read that array as all fill values; the
    # expected values are the ones written).
    zm = p / ".zmetadata"
    cons = json.loads(zm.read_text())
    del cons["metadata"]["legacy_nested/.zarray"]["dimension_separator"]
    zm.write_text(json.dumps(cons, indent=4))


def v3_store() -> None:
    p = fresh("v3.zarr")
    root = zarr.open_group(str(p), mode="w", zarr_format=3)
    root.attrs["title"] = "gobatch v3 fixtures"
    rng = np.random.default_rng(7)

    def mk(name: str, data: np.ndarray, chunks: tuple[int, ...], **kw: Any) -> None:
        a = root.create_array(name, shape=data.shape, dtype=data.dtype, chunks=chunks, **kw)
        a[...] = data
        record(p, name)

    d = rng.standard_normal((10, 12)).astype("float32")
    d[0:5, 0:5] = 0
    mk("f4_default", d, (5, 5), dimension_names=["y", "x"])
    mk("i2_blosc", rng.integers(-999, 999, size=(9, 9)).astype("int16"), (4, 4), compressors=BloscCodec(cname="lz4", clevel=5, shuffle="shuffle"))
    mk("u2_blosc_bitshuffle", ramp((9, 9), "uint16"), (4, 4), compressors=BloscCodec(cname="zstd", clevel=3, shuffle="bitshuffle"))
    mk("f8_gzip_crc", rng.standard_normal((7,)), (3,), compressors=[GzipCodec(level=4), Crc32cCodec()])
    mk("i4_bigendian", ramp((6, 5), "int32") - 50, (4, 2), serializer=BytesCodec(endian="big"), compressors=None)
    mk("i4_transpose", ramp((4, 5, 6), "int32"), (3, 2, 4), filters=[TransposeCodec(order=(2, 0, 1))], compressors=ZstdCodec(level=1))
    mk("v2keys", ramp((6, 6), "uint8"), (4, 4), chunk_key_encoding={"name": "v2", "separator": "."})
    mk("v2keys_slash", ramp((6, 6), "int8") - 100, (4, 4), chunk_key_encoding={"name": "v2", "separator": "/"})
    mk("default_dot", ramp((6, 6), "uint32"), (4, 4), chunk_key_encoding={"name": "default", "separator": "."})
    mk("f2", rng.standard_normal((8,)).astype("float16"), (3,))
    mk("bool", rng.integers(0, 2, size=(9,)).astype(bool), (4,))
    mk("u8", ramp((5,), "uint64") * 2**50, (2,))
    # Sharding: index at the end (default) with crc32c, and at the start; missing inner
    # chunks (all fill) inside a written shard, and a wholly missing shard.
    d = ramp((16, 12), "int16").astype("int16")
    d[0:4, 0:3] = 9
    d[8:16, 6:12] = 9
    mk("sharded_end", d, (4, 3), shards=(8, 6), fill_value=9, compressors=ZstdCodec(level=1))
    a = root.create_array(
        "sharded_start",
        shape=(10, 7),
        dtype="float32",
        chunks=(6, 6),
        serializer=ShardingCodec(
            chunk_shape=(2, 3),
            codecs=[BytesCodec(), GzipCodec(level=1)],
            index_codecs=[BytesCodec(), Crc32cCodec()],
            index_location="start",
        ),
        compressors=None,
        fill_value=float("nan"),
    )
    d = rng.standard_normal((10, 7)).astype("float32")
    d[0:2, 0:3] = np.nan
    a[...] = d
    record(p, "sharded_start")
    # Nested sharding.
    a = root.create_array(
        "sharded_nested",
        shape=(8, 8),
        dtype="uint16",
        chunks=(8, 8),
        serializer=ShardingCodec(
            chunk_shape=(4, 4),
            codecs=[ShardingCodec(chunk_shape=(2, 2), codecs=[BytesCodec(), ZstdCodec()])],
        ),
        compressors=None,
    )
    a[...] = ramp((8, 8), "uint16")
    record(p, "sharded_nested")
    # Fill values.
    for name, fv, dt in [("fill_nan", np.nan, "float32"), ("fill_ninf", -np.inf, "float64"), ("fill_int", -5, "int32")]:
        root.create_array(name, shape=(5,), dtype=dt, chunks=(2,), fill_value=fv)
        record(p, name)
    # Strings and times.
    a = root.create_array("str_vlen", shape=(5,), dtype=str, chunks=(3,))
    a[...] = np.array(["alpha", "", "γάμμα", "delta", "e"], dtype=object)
    record(p, "str_vlen")
    from zarr.core.dtype import VariableLengthBytes

    a = root.create_array("bytes_vlen", shape=(5,), dtype=VariableLengthBytes(), chunks=(2,))
    a[0:4] = np.array([b"", b"\x00\x01", b"zz", b"\xfe"], dtype=object)
    record(p, "bytes_vlen")
    mk("str_U5", np.array(["ab", "cde", "", "fghij"], dtype="<U5"), (3,))
    mk("dt_ms", np.array(["2021-01-01T00:00", "2021-06-01T12:30:00.250", "NaT"], dtype="<M8[ms]"), (2,))
    sub = root.create_group("grp")
    b = sub.create_array("inner", shape=(3, 3), dtype="int64", chunks=(2, 2), dimension_names=["a", "b"])
    b[...] = ramp((3, 3), "int64")
    record(p, "grp/inner")
    # 0-d; a hex fill value (edited in, then read back by zarr-python); numcodecs
    # wrappers; transpose in front of sharding (the whole-shard decode path).
    a = root.create_array("zero_d", shape=(), dtype="int16")
    a[...] = -7
    record(p, "zero_d")
    root.create_array("fill_hex", shape=(5,), dtype="float32", chunks=(2,), fill_value=0.0)
    zj = p / "fill_hex" / "zarr.json"
    meta = json.loads(zj.read_text())
    meta["fill_value"] = "0x3fc00000"
    zj.write_text(json.dumps(meta, indent=2))
    record(p, "fill_hex")
    from zarr.codecs.numcodecs import BZ2 as NBZ2, LZ4 as NLZ4, Zlib as NZlib

    mk("numcodecs_zlib", ramp((9,), "int32"), (4,), compressors=NZlib(level=1))
    mk("numcodecs_lz4", ramp((9,), "int32"), (4,), compressors=NLZ4())
    mk("numcodecs_bz2", ramp((9,), "int32"), (4,), compressors=NBZ2(level=1))
    from zarr.codecs.numcodecs import CRC32 as NCRC32, Adler32 as NAdler32

    mk("numcodecs_crc32", ramp((9,), "int16"), (4,), compressors=[NCRC32(), ZstdCodec()])
    mk("numcodecs_adler32", ramp((9,), "int16"), (4,), compressors=[ZstdCodec(), NAdler32()])
    mk("crc32c_then_zstd", ramp((9,), "float32"), (4,), compressors=[Crc32cCodec(), ZstdCodec()])
    a = root.create_array(
        "transpose_sharded",
        shape=(6, 8),
        dtype="int32",
        chunks=(6, 8),
        filters=[TransposeCodec(order=(1, 0))],
        serializer=ShardingCodec(chunk_shape=(2, 2), codecs=[BytesCodec(), ZstdCodec()]),
        compressors=None,
    )
    a[...] = ramp((6, 8), "int32")
    record(p, "transpose_sharded")
    zarr.consolidate_metadata(str(p), zarr_format=3)


def zip_store() -> None:
    """A v2 hierarchy inside a zip archive, as zarr-python's ZipStore writes it (the
    layout of OCF's per-timestep .zarr.zip files)."""
    p = HERE / "v2.zarr.zip"
    if p.exists():
        p.unlink()
    store = zarr.storage.ZipStore(str(p), mode="w")
    root = zarr.open_group(store, mode="w", zarr_format=2)
    rng = np.random.default_rng(11)
    a = root.create_array("data", shape=(3, 10, 12), dtype="<f4", chunks=(1, 5, 6), compressors=numcodecs.BZ2(5))
    a[...] = rng.standard_normal((3, 10, 12)).astype("<f4")
    b = root.create_array("labels", shape=(3,), dtype="<U4", chunks=(3,), compressors=None)
    b[...] = np.array(["IR", "VIS", "WV"], dtype="<U4")
    zarr.consolidate_metadata(store, zarr_format=2)
    store.close()
    rstore = zarr.storage.ZipStore(str(p), mode="r")
    for path in ("data", "labels"):
        arr = zarr.open_array(store=rstore, path=path, mode="r")
        data = arr[...]
        entry: dict[str, Any] = {"store": p.name, "path": path, "shape": list(arr.shape), "dtype": str(data.dtype), "zarr_format": 2}
        if data.dtype.kind == "U":
            entry["strings"] = [str(v) for v in data.reshape(-1)]
        else:
            name = f"{p.name}_{path}.bin"
            (EXPECTED / name).write_bytes(np.ascontiguousarray(data).tobytes())
            entry["data"], entry["native"] = name, data.dtype.str
        manifest["arrays"].append(entry)
    rstore.close()


def cf_store(fmt: int) -> None:
    """An xarray dataset shaped like OCF data: packed int16 with scale/offset/_FillValue,
    float16 with NaN, CF-encoded times and string channel labels."""
    name = f"cf{fmt}.zarr"
    p = fresh(name)
    times = np.array(["2021-01-01T00:00", "2021-01-01T00:05", "2021-01-01T00:10", "2021-01-01T00:15"], dtype="M8[ns]")
    rng = np.random.default_rng(3)
    temp = rng.uniform(-10, 30, size=(4, 3, 5, 6)).astype("float32")
    temp[1, 2, 3, 4] = np.nan
    sat = rng.uniform(0, 1, size=(4, 3, 5, 6)).astype("float16")
    sat[0, 0, 0, 0] = np.nan
    ds = xr.Dataset(
        {
            "temp": (("time", "channel", "y", "x"), temp),
            "sat": (("time", "channel", "y", "x"), sat),
        },
        coords={
            "time": times,
            "channel": np.array(["IR_016", "VIS006", "WV_062"], dtype="<U6"),
            "y": np.arange(5, dtype="float64") * 3000.0,
            "x": np.arange(6, dtype="int32"),
            "step": ("step", np.array([0, 1, 2], dtype="m8[h]").astype("m8[ns]")),
        },
    )
    enc: dict[str, Any] = {
        "temp": {"dtype": "int16", "scale_factor": 0.01, "add_offset": 10.0, "_FillValue": -32768, "chunks": (2, 3, 5, 3)},
        "sat": {"chunks": (4, 1, 5, 6)},
        "time": {"units": "minutes since 2021-01-01 00:00:00", "dtype": "int64"},
        "step": {"units": "hours", "dtype": "int64"},
    }
    ds.to_zarr(str(p), zarr_format=fmt, consolidated=True, encoding=enc, mode="w")
    back = xr.open_zarr(str(p), consolidated=True)
    for v in ("temp", "sat"):
        record(p, v)
        decoded = back[v].values.astype("float32")
        fname = f"{name}_{v}_cf.bin"
        (EXPECTED / fname).write_bytes(np.ascontiguousarray(decoded).tobytes())
        manifest["arrays"][-1]["cf_data"] = fname
    record(p, "channel")
    for v in ("time", "step"):
        record(p, v)
        vals = back[v].values
        manifest["arrays"][-1]["cf_int64"] = [int(x) for x in vals.view("<i8")]
    record(p, "x")
    record(p, "y")


def bench_store(out: Path) -> None:
    """Write bench.zarr (v2, as zarr-python 2 and xarray wrote OCF data) for the Go
    benchmark, and time zarr-python reading it whole, for a same-machine baseline."""
    import time

    out.mkdir(parents=True, exist_ok=True)
    p = out / "bench.zarr"
    if p.exists():
        shutil.rmtree(p)
    root = zarr.open_group(str(p), mode="w", zarr_format=2)
    rng = np.random.default_rng(0)
    t, c, y, x = 12, 4, 256, 256
    yy, xx = np.meshgrid(np.arange(y), np.arange(x), indexing="ij")
    field = np.empty((t, c, y, x), dtype="float32")
    for i in range(t):
        for j in range(c):
            field[i, j] = 200 * np.sin((xx + 3 * i) / 40.0 + j) * np.cos((yy - 2 * i) / 55.0) + 300
    field += rng.normal(0, 2.0, size=field.shape).astype("float32")
    arrays = {
        "i2_blosc_lz4": (field.astype("<i2"), (4, 1, 256, 256), numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE)),
        "f4_zstd": (field.astype("<f4"), (4, 1, 256, 256), numcodecs.Zstd(level=0)),
        # OCF's public satellite layout: float16 with ocf-blosc2 zstd level 5.
        "f2_blosc2_zstd": (field.astype("<f2"), (4, 4, 128, 128), Blosc2("zstd", 5)),
    }
    for name, (data, chunks, comp) in arrays.items():
        a = root.create_array(name, shape=data.shape, dtype=data.dtype, chunks=chunks, compressors=comp)
        a[...] = data
    for workers in (1, None):
        cfg = {"threading.max_workers": workers} if workers else {}
        with zarr.config.set(cfg):
            for name, (data, _, _) in arrays.items():
                arr = zarr.open_array(str(p), path=name, mode="r")
                best = float("inf")
                for _ in range(5):
                    t0 = time.perf_counter()
                    got = arr[...]
                    best = min(best, time.perf_counter() - t0)
                assert np.array_equal(got, data)
                print(f"zarr-python {zarr.__version__} workers={workers or 'default'} {name}: "
                      f"{data.nbytes / best / 1e6:.0f} MB/s ({best * 1e3:.1f} ms for {data.nbytes / 1e6:.1f} MB)")


def matrix_stores(out: Path, n: int, seed: int) -> None:
    """Write n random arrays (format, shape, chunks, dtype, byte order, order,
    codecs, filters, sharding, fill value, partly written) and what zarr-python reads
    back, for TestZarrPythonMatrix."""
    import warnings

    warnings.simplefilter("ignore")
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    entries = []
    roots = {}
    for fmt in (2, 3):
        p = out / f"matrix{fmt}.zarr"
        if p.exists():
            shutil.rmtree(p)
        roots[fmt] = (p, zarr.open_group(str(p), mode="w", zarr_format=fmt))
    types = ["|b1", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "<f2", "<f4", "<f8"]
    for i in range(n):
        fmt = int(rng.integers(2, 4))
        p, root = roots[fmt]
        nd = int(rng.integers(0, 5))
        shape = tuple(int(rng.integers(0 if rng.random() < 0.05 else 1, 10)) for _ in range(nd))
        chunks = tuple(int(rng.integers(1, s + 3)) for s in shape)
        t = str(rng.choice(types))
        big = t[0] == "<" and rng.random() < 0.3
        dt = np.dtype((">" + t[1:]) if big else t)
        kw: dict[str, Any] = {}
        desc: dict[str, Any] = {"format": fmt}
        nbytes = int(np.prod(chunks)) * dt.itemsize if nd else dt.itemsize
        if fmt == 2:
            kw["order"] = str(rng.choice(["C", "F"]))
            kw["chunk_key_encoding"] = {"name": "v2", "separator": str(rng.choice([".", "/"]))}
            comps = [None, numcodecs.Zlib(1), numcodecs.GZip(1), numcodecs.BZ2(1), numcodecs.LZ4(), numcodecs.Zstd(1),
                     numcodecs.Blosc(str(rng.choice(["lz4", "zstd", "zlib", "blosclz"])), 5, int(rng.integers(0, 3)))]
            if nbytes % 8 == 0:
                comps.append(Blosc2(str(rng.choice(["zstd", "blosc2"])), 5))
            kw["compressors"] = comps[int(rng.integers(0, len(comps)))]
            if dt.kind in "iu" and rng.random() < 0.3:
                kw["filters"] = [numcodecs.Delta(dtype=dt.str)]
            elif dt.itemsize > 1 and rng.random() < 0.2:
                kw["filters"] = [numcodecs.Shuffle(elementsize=dt.itemsize)]
            else:
                kw["filters"] = None
        else:
            dt = np.dtype(t)  # v3 byte order lives in the bytes codec
            serializer = BytesCodec(endian="big" if big else "little")
            filters = []
            if nd > 1 and rng.random() < 0.3:
                filters = [TransposeCodec(order=tuple(int(v) for v in rng.permutation(nd)))]
            comps3 = [[], [ZstdCodec(level=1)], [GzipCodec(level=1)], [Crc32cCodec()], [ZstdCodec(), Crc32cCodec()],
                      [Crc32cCodec(), GzipCodec(level=1)],
                      [BloscCodec(cname=str(rng.choice(["lz4", "zstd", "blosclz"])), clevel=5,
                                  shuffle=str(rng.choice(["noshuffle", "shuffle", "bitshuffle"])))]]
            kw["compressors"] = comps3[int(rng.integers(0, len(comps3)))]
            kw["filters"] = filters
            kw["serializer"] = serializer
            if nd > 0 and not filters and rng.random() < 0.35:
                kw["shards"] = tuple(c * int(rng.integers(1, 4)) for c in chunks)
                kw.pop("serializer")
            kw["chunk_key_encoding"] = {"name": str(rng.choice(["default", "v2"])), "separator": str(rng.choice([".", "/"]))}
        if dt.kind == "f":
            fill = float(rng.choice([0.0, np.nan, -1.5, np.inf]))
        elif dt.kind == "b":
            fill = bool(rng.random() < 0.5)
        else:
            fill = int(rng.integers(0, 100))
        name = f"a{i:03d}"
        try:
            a = root.create_array(name, shape=shape, dtype=dt, chunks=chunks, fill_value=fill, **kw)
        except Exception as e:  # a combination zarr-python refuses
            print(f"skip {name}: {e}")
            continue
        if dt.kind == "f":
            data = (rng.standard_normal(shape) * 100).astype(dt)
        elif dt.kind == "b":
            data = rng.integers(0, 2, size=shape).astype(bool)
        else:
            info = np.iinfo(dt)
            data = rng.integers(info.min, int(info.max) + 1, size=shape, dtype=np.int64 if dt.kind == "i" else np.uint64).astype(dt)
        if nd and rng.random() < 0.5:
            region = tuple(slice(0, int(rng.integers(0, s + 1))) for s in shape)
            a[region] = data[region]
        else:
            a[...] = data
        got = zarr.open_array(str(p), path=name, mode="r")[...]
        le = got.astype(got.dtype.newbyteorder("<"))
        fname = f"m{fmt}_{name}.bin"
        (out / fname).write_bytes(np.ascontiguousarray(le).tobytes())
        entries.append({"store": p.name, "path": name, "shape": list(shape), "dtype": str(dt), "zarr_format": fmt,
                        "data": fname, "native": le.dtype.str, "config": repr(kw)})
    # String arrays: fixed-length unicode and bytes, variable-length.
    for i in range(n // 4):
        fmt = int(rng.integers(2, 4))
        p, root = roots[fmt]
        nd = int(rng.integers(1, 4))
        shape = tuple(int(rng.integers(1, 7)) for _ in range(nd))
        chunks = tuple(int(rng.integers(1, s + 2)) for s in shape)
        kind = str(rng.choice(["<U3", "|S3", "vlen"] if fmt == 2 else ["<U3", "vlen"]))
        words = np.array(["", "a", "bc", "déf", "xyz", "ü"])
        vals = words[rng.integers(0, len(words), size=shape)]
        kw = {}
        if fmt == 2:
            kw["order"] = str(rng.choice(["C", "F"]))
            kw["compressors"] = [None, numcodecs.Zstd(1), numcodecs.Zlib(1)][int(rng.integers(0, 3))]
        name = f"s{i:03d}"
        if kind == "vlen":
            a = root.create_array(name, shape=shape, dtype=str, chunks=chunks, **kw)
            data = vals.astype(object)
        elif kind == "|S3":
            a = root.create_array(name, shape=shape, dtype=kind, chunks=chunks, **kw)
            data = np.char.encode(vals, "utf-8").astype("|S3")
        else:
            a = root.create_array(name, shape=shape, dtype=kind, chunks=chunks, **kw)
            data = vals.astype(kind)
        if rng.random() < 0.5:
            region = tuple(slice(0, int(rng.integers(0, s + 1))) for s in shape)
            a[region] = data[region]
        else:
            a[...] = data
        got = zarr.open_array(str(p), path=name, mode="r")[...]
        e: dict[str, Any] = {"store": p.name, "path": name, "shape": list(shape), "dtype": kind, "zarr_format": fmt, "config": repr(kw)}
        if kind == "|S3":
            e["bytes_hex"] = [bytes(v).hex() for v in got.reshape(-1)]
        else:
            e["strings"] = [str(v) for v in got.reshape(-1)]
        entries.append(e)
    (out / "matrix.json").write_text(json.dumps({"arrays": entries}, indent=1))


def main() -> None:
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--bench":
        bench_store(Path(sys.argv[2]))
        return
    if len(sys.argv) == 5 and sys.argv[1] == "--matrix":
        matrix_stores(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
        return
    if EXPECTED.exists():
        shutil.rmtree(EXPECTED)
    EXPECTED.mkdir()
    v2_store()
    v3_store()
    cf_store(2)
    cf_store(3)
    zip_store()
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
