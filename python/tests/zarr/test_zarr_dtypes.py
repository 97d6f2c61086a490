"""Data types, fill values, layouts and boxes of ``shmloader read``, for Zarr v2 and v3.

Every case is written with zarr-python, read with ``shmloader read`` and compared with
zarr-python's read of the same region: same dtype (big-endian becomes little-endian),
same shape, exact values for integers, bitwise values for floats (NaN at the same places).
"""

from __future__ import annotations

import pathlib
import warnings

import numcodecs
import numpy as np
import pytest
import zarr

from zarr_fixtures import (
    assert_same,
    load_npy,
    parse_box,
    read,
    run,
    sample,
    shmloader,
    smooth_int16,
    write_array,
    zarr_read,
)

__all__ = ["shmloader"]

# zarr-python warns that some v3 data types (strings, datetimes) have no spec yet.
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

FORMATS = [2, 3]

NUMERIC_DTYPES = [
    "bool",
    "i1", "i2", "i4", "i8",
    "u1", "u2", "u4", "u8",
    "f2", "f4", "f8",
    ">i2", ">i8", ">u4", ">f4", ">f8",
    "c8", "c16",
    "M8[ns]", "M8[s]", "M8[ms]", "m8[ns]", "m8[h]",
]  # fmt: skip


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
@pytest.mark.parametrize("zarr_format", FORMATS)
def test_dtype(shmloader: str, tmp_path: pathlib.Path, zarr_format: int, dtype: str) -> None:
    data = sample(dtype, (23, 17), seed=20)
    path = write_array(tmp_path, "a", data, chunks=(10, 8), zarr_format=zarr_format)
    got = read(path, tmp_path)
    want = zarr_read(path)
    assert got.dtype.byteorder in "<|=", f"dtype {got.dtype.str} is not little-endian"
    assert_same(got, want)
    # the descr must be exactly numpy's little-endian spelling, e.g. '<M8[ns]', '|b1', '<f2'
    with open(tmp_path / "out.npy", "rb") as f:
        header = f.read(128).decode("latin1")
    assert f"'descr': '{np.dtype(dtype).newbyteorder('<').str}'" in header


@pytest.mark.parametrize("dtype", ["<U1", "<U7", ">U3", "S1", "S6"])
@pytest.mark.parametrize("zarr_format", FORMATS)
def test_fixed_strings(shmloader: str, tmp_path: pathlib.Path, zarr_format: int, dtype: str) -> None:
    data = sample(dtype, (11,), seed=21)
    path = write_array(tmp_path, "a", data, chunks=(4,), zarr_format=zarr_format)
    assert_same(read(path, tmp_path), zarr_read(path))


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_vlen_strings(shmloader: str, tmp_path: pathlib.Path, zarr_format: int) -> None:
    """Variable-length strings come back as fixed '<U<max>' (or are refused, clearly)."""
    data = sample("O", (13,), seed=22)
    path = write_array(tmp_path, "a", data, chunks=(5,), zarr_format=zarr_format, write=(slice(0, 9),))
    proc = run("read", path, "--out", tmp_path / "out.npy")
    if proc.returncode != 0:
        assert proc.returncode == 1
        assert "string" in proc.stderr.lower() and str(path) in proc.stderr, proc.stderr
        return  # refused with a message that names the array and says why: allowed
    got = load_npy(tmp_path / "out.npy")
    want = np.array(zarr_read(path).tolist(), dtype=str)
    assert got.dtype == np.dtype(f"<U{max(len(s) for s in want.tolist())}")
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_vlen_bytes(shmloader: str, tmp_path: pathlib.Path, zarr_format: int) -> None:
    """Variable-length bytes (vlen-bytes) come back as fixed '|S<max>'."""
    from zarr.core.dtype import VariableLengthBytes

    data = np.array([b"", b"a", b"\xffz", b"pv-data", b"\x00b"] * 3, dtype=object)
    path = write_array(
        tmp_path, "a", data, chunks=(4,), zarr_format=zarr_format, dtype=VariableLengthBytes(), write=(slice(0, 11),)
    )
    got = read(path, tmp_path)
    want = zarr_read(path).tolist()
    assert got.dtype == np.dtype(f"|S{max(len(v) for v in want)}")
    np.testing.assert_array_equal(got, np.array(want, dtype=got.dtype))


# --- fill values and missing chunks ---------------------------------------------------

FILLS = [
    ("f4", np.nan),
    ("f8", np.inf),
    ("f2", -np.inf),
    ("f8", -0.0),
    ("f4", 1.5e-3),
    ("i2", -1),
    ("u8", 2**64 - 1),
    ("i8", -(2**63)),
    ("bool", True),
    ("M8[ns]", np.datetime64("NaT", "ns")),
    ("f4", None),  # v2 writes null: zarr-python then reads zeros
]


@pytest.mark.parametrize("dtype,fill", FILLS, ids=[f"{d}-{f}" for d, f in FILLS])
@pytest.mark.parametrize("zarr_format", FORMATS)
def test_fill_value_missing_chunks(
    shmloader: str, tmp_path: pathlib.Path, zarr_format: int, dtype: str, fill: object
) -> None:
    data = sample(dtype, (30, 20), seed=23)
    path = write_array(
        tmp_path,
        "a",
        data,
        chunks=(8, 6),
        zarr_format=zarr_format,
        fill_value=fill,
        write=(slice(3, 14), slice(0, 7)),  # most chunks are never written
    )
    if zarr_format == 2 and fill is None:
        assert '"fill_value": null' in (path / ".zarray").read_text()
    want = zarr_read(path)
    assert_same(read(path, tmp_path), want)


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_empty_array_all_fill(shmloader: str, tmp_path: pathlib.Path, zarr_format: int) -> None:
    """An array with no chunk objects at all reads as its fill value everywhere."""
    arr = zarr.create_array(
        str(tmp_path / "a"), shape=(9, 10), chunks=(4, 4), dtype="f8", fill_value=np.inf, zarr_format=zarr_format
    )
    assert arr.nchunks_initialized == 0
    assert_same(read(tmp_path / "a", tmp_path), np.full((9, 10), np.inf))


def test_fill_value_raw_bits_v3(shmloader: str, tmp_path: pathlib.Path) -> None:
    """A v3 float fill value may be given as a hex bit pattern (a NaN with a payload here)."""
    path = write_array(tmp_path, "a", sample("f4", (6, 6)), chunks=(3, 3), zarr_format=3, write=(slice(0, 3), slice(0, 3)))
    meta = (path / "zarr.json").read_text().replace('"fill_value": 0.0', '"fill_value": "0x3fc00000"')
    (path / "zarr.json").write_text(meta)
    assert_same(read(path, tmp_path), zarr_read(path))
    assert read(path, tmp_path)[5, 5] == np.float32(1.5)


# --- layouts --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["i4", "f8", ">u2"])
def test_v2_fortran_order(shmloader: str, tmp_path: pathlib.Path, dtype: str) -> None:
    data = sample(dtype, (9, 10, 11), seed=24)
    path = write_array(tmp_path, "a", data, chunks=(4, 5, 6), zarr_format=2, order="F", compressors=numcodecs.Zlib(1))
    assert '"order": "F"' in (path / ".zarray").read_text()
    assert_same(read(path, tmp_path), zarr_read(path))


@pytest.mark.parametrize(
    "zarr_format,key_encoding",
    [
        (2, None),  # "." separator, the v2 default
        (2, "/"),  # dimension_separator "/"
        (3, {"name": "default", "separator": "/"}),
        (3, {"name": "default", "separator": "."}),
        (3, {"name": "v2", "separator": "."}),
        (3, {"name": "v2", "separator": "/"}),
    ],
    ids=["v2-dot", "v2-slash", "v3-default-slash", "v3-default-dot", "v3-v2-dot", "v3-v2-slash"],
)
def test_chunk_keys(shmloader: str, tmp_path: pathlib.Path, zarr_format: int, key_encoding: object) -> None:
    data = smooth_int16((20, 30, 7), seed=25)
    kw: dict[str, object] = {}
    if key_encoding is not None:
        kw["chunk_key_encoding"] = {"name": "v2", "separator": key_encoding} if zarr_format == 2 else key_encoding
    path = write_array(tmp_path, "a", data, chunks=(6, 7, 3), zarr_format=zarr_format, **kw)
    files = {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()}
    sep = key_encoding if isinstance(key_encoding, str) else (key_encoding or {}).get("separator", ".")
    prefix = "c" + sep if isinstance(key_encoding, dict) and key_encoding["name"] == "default" else ""
    assert f"{prefix}1{sep}2{sep}0" in files, sorted(files)[:5]
    assert_same(read(path, tmp_path), zarr_read(path))


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_zero_dimensional(shmloader: str, tmp_path: pathlib.Path, zarr_format: int) -> None:
    data = np.array(3.25, dtype="f8")
    path = write_array(tmp_path, "a", data, chunks=(), zarr_format=zarr_format)
    got = read(path, tmp_path)
    assert got.shape == ()
    assert_same(got, zarr_read(path))


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_chunk_larger_than_array(shmloader: str, tmp_path: pathlib.Path, zarr_format: int) -> None:
    data = sample("u2", (5, 3), seed=26)
    path = write_array(tmp_path, "a", data, chunks=(64, 64), zarr_format=zarr_format)
    assert_same(read(path, tmp_path), zarr_read(path))


# --- boxes ------------------------------------------------------------------------------

BOXES = [
    "0:10,:,5:7",
    ":,:,:",
    "19:20,29:,39:",
    "3:4,5:6,7:8",
    ":5,10:,:",
    "6:14,8:16,9:18",  # exactly one chunk
    "5:15,7:17,8:19",  # one element more than a chunk on each side
    "0:20,0:30,0:40",
    "4:4,:,:",  # empty: a (0, 30, 40) array
]


@pytest.mark.parametrize("box", BOXES)
@pytest.mark.parametrize("zarr_format", FORMATS)
def test_box(shmloader: str, tmp_path: pathlib.Path, zarr_format: int, box: str) -> None:
    shape = (20, 30, 40)
    data = sample("f4", shape, seed=27)
    path = write_array(
        tmp_path, "a", data, chunks=(6, 8, 9), zarr_format=zarr_format, fill_value=np.nan,
        write=(slice(0, 20), slice(0, 24), slice(0, 40)),  # the chunks beyond y=24 stay missing
    )  # fmt: skip
    region = parse_box(box, shape)
    assert_same(read(path, tmp_path, box=box), zarr_read(path, region))


@pytest.mark.parametrize("order", ["C", "F"])
def test_box_fortran_v2(shmloader: str, tmp_path: pathlib.Path, order: str) -> None:
    data = sample("i8", (15, 16), seed=28)
    path = write_array(tmp_path, "a", data, chunks=(4, 7), zarr_format=2, order=order)
    assert_same(read(path, tmp_path, box="3:13,6:"), zarr_read(path, (slice(3, 13), slice(6, None))))


def test_many_dims(shmloader: str, tmp_path: pathlib.Path) -> None:
    """5-D like OCF's UKV (variable, init_time, step, y, x), box across several chunk edges."""
    data = (smooth_int16((2, 3, 10, 22, 18), seed=29).astype("f4") / 100).astype("f2")
    path = write_array(tmp_path, "a", data, chunks=(1, 1, 10, 8, 8), zarr_format=2)
    box = "1:2,0:3,2:9,5:21,3:17"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = zarr_read(path, parse_box(box, data.shape))
    assert_same(read(path, tmp_path, box=box), want)
