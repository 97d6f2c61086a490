"""``shmloader read --cf`` on datasets written by xarray with CF encoding.

xarray packs the float data (``scale_factor``, ``add_offset``, ``_FillValue``) and encodes
the time coordinate as integers with ``units = "minutes since ..."``. ``read --cf`` must
give what ``xarray.open_zarr`` decodes: float32 data (xarray's values cast to float32,
compared within 1e-6 relative, NaN at exactly the same places) and datetime64[ns] times
(exactly equal).
"""

from __future__ import annotations

import pathlib
import warnings

import numcodecs
import numpy as np
import pandas as pd
import pytest
import xarray as xr

from zarr_fixtures import assert_same, read, shmloader, smooth_int16, write_array, zarr_read

__all__ = ["shmloader"]

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

FORMATS = [2, 3]


def _dataset(seed: int = 0) -> xr.Dataset:
    rng = np.random.default_rng(seed)
    shape = (12, 20, 24)
    sat = smooth_int16(shape, seed=seed).astype("f8") * 0.001 + 0.25
    sat[rng.random(shape) < 0.01] = np.nan  # fill-valued pixels
    pv = rng.gamma(2.0, 1.5, size=(12, 30)).astype("f4")
    pv[rng.random(pv.shape) < 0.05] = np.nan
    albedo = rng.uniform(0, 1, size=shape[1:])
    albedo[0, :4] = np.nan
    return xr.Dataset(
        {
            "data": (("time", "y", "x"), sat),
            "power": (("time", "system"), pv),
            "albedo": (("y", "x"), albedo),
        },
        coords={
            "time": pd.date_range("2021-01-01 00:00", periods=shape[0], freq="5min"),
            "x": np.arange(shape[2]) * 2000.0,
            "y": np.arange(shape[1])[::-1] * 2000.0,
            "system": np.arange(30, dtype="i8") + 100,
            "step": ("step", (np.arange(16) * 60).astype("m8[m]").astype("m8[ns]")),
        },
        attrs={"title": "cf test"},
    )


def _write(tmp_path: pathlib.Path, zarr_format: int) -> tuple[pathlib.Path, xr.Dataset]:
    ds = _dataset()
    from zarr.codecs import BloscCodec

    comp = numcodecs.Blosc("lz4", 5, 1) if zarr_format == 2 else BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")
    enc = {
        "data": {
            "dtype": "int16",
            "scale_factor": 0.001,
            "add_offset": 0.25,
            "_FillValue": -1,
            "chunks": (6, 8, 12),
            "compressors": comp,
        },
        "albedo": {"dtype": "uint8", "scale_factor": 1 / 250, "add_offset": 0.0, "_FillValue": 255},
        "power": {"chunks": (6, 30)},
        "time": {"units": "minutes since 2021-01-01 00:00:00", "dtype": "int64"},
        "step": {"units": "minutes", "dtype": "int64"},
    }
    path = tmp_path / "cf.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(path, zarr_format=zarr_format, encoding=enc, consolidated=True)
        decoded = xr.open_zarr(path).load()
    return path, decoded


def _assert_close_f32(got: np.ndarray, want: np.ndarray) -> None:
    want32 = np.asarray(want).astype("f4")
    assert got.dtype == np.dtype("<f4"), got.dtype
    assert got.shape == want32.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want32), err_msg="NaN positions differ")
    np.testing.assert_allclose(got, want32, rtol=1e-6, atol=0, equal_nan=True)


@pytest.mark.parametrize("var", ["data", "power", "albedo"])
@pytest.mark.parametrize("zarr_format", FORMATS)
def test_cf_matches_xarray(shmloader: str, tmp_path: pathlib.Path, zarr_format: int, var: str) -> None:
    path, decoded = _write(tmp_path, zarr_format)
    got = read(path / var, tmp_path, cf=True)
    _assert_close_f32(got, decoded[var].values)
    if var == "data":
        assert np.isnan(got).sum() > 10  # _FillValue pixels really were masked


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_cf_box(shmloader: str, tmp_path: pathlib.Path, zarr_format: int) -> None:
    path, decoded = _write(tmp_path, zarr_format)
    got = read(path / "data", tmp_path, cf=True, box="3:9,5:,:7")
    _assert_close_f32(got, decoded["data"].values[3:9, 5:, :7])


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_cf_raw_without_flag(shmloader: str, tmp_path: pathlib.Path, zarr_format: int) -> None:
    """Without --cf the stored int16 values come back unchanged, fill value included."""
    path, _ = _write(tmp_path, zarr_format)
    got = read(path / "data", tmp_path)
    want = zarr_read(path / "data")
    assert want.dtype == np.int16 and (want == -1).any()
    assert_same(got, want)


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_cf_time(shmloader: str, tmp_path: pathlib.Path, zarr_format: int) -> None:
    """A CF time coordinate ("minutes since ...") decodes to datetime64[ns] like xarray's."""
    path, decoded = _write(tmp_path, zarr_format)
    raw = read(path / "time", tmp_path, name="raw.npy")
    assert raw.dtype == np.dtype("<i8")
    np.testing.assert_array_equal(raw, np.arange(12) * 5)
    got = read(path / "time", tmp_path, cf=True)
    want = decoded["time"].values.astype("M8[ns]")
    assert got.dtype == np.dtype("<M8[ns]"), got.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_cf_duration(shmloader: str, tmp_path: pathlib.Path, zarr_format: int) -> None:
    """A coordinate with a bare CF time unit ("minutes") decodes to timedelta64[ns] like xarray's."""
    path, decoded = _write(tmp_path, zarr_format)
    assert_same(read(path / "step", tmp_path, name="raw.npy"), np.arange(16, dtype="i8") * 60)
    got = read(path / "step", tmp_path, cf=True)
    assert got.dtype == np.dtype("<m8[ns]"), got.dtype
    np.testing.assert_array_equal(got, decoded["step"].values.astype("m8[ns]"))


@pytest.mark.parametrize("unit", ["s", "ms", "ns"])
@pytest.mark.parametrize("zarr_format", FORMATS)
def test_cf_datetime64(shmloader: str, tmp_path: pathlib.Path, zarr_format: int, unit: str) -> None:
    """--cf turns a stored datetime64 of any unit into datetime64[ns], NaT kept."""
    data = (np.datetime64("2021-01-01T00:00:00", unit) + np.arange(20) * np.timedelta64(90, "s")).astype(f"M8[{unit}]")
    data[3] = np.datetime64("NaT")
    path = write_array(tmp_path, "t", data, chunks=(8,), zarr_format=zarr_format, write=(slice(0, 16),))
    want = zarr_read(path).astype("M8[ns]")
    assert_same(read(path, tmp_path, name="raw.npy"), zarr_read(path))
    got = read(path, tmp_path, cf=True, box="2:")
    assert got.dtype == np.dtype("<M8[ns]")
    np.testing.assert_array_equal(got.view("i8"), want[2:].view("i8"))


@pytest.mark.parametrize("fill", [None, 7])
@pytest.mark.parametrize("zarr_format", FORMATS)
def test_cf_plain_ints(shmloader: str, tmp_path: pathlib.Path, zarr_format: int, fill: int | None) -> None:
    """--cf on an int array with no CF attributes: float32 values, masked as xarray masks them.

    xarray treats a v2 array's zarr ``fill_value`` as ``_FillValue``; for v3 it does not.
    """
    data = np.arange(-50, 50, dtype="i4").reshape(10, 10)
    dims = {"attributes": {"_ARRAY_DIMENSIONS": ["y", "x"]}} if zarr_format == 2 else {"dimension_names": ["y", "x"]}
    kw = {} if fill is None else {"fill_value": fill}
    import zarr

    zarr.open_group(str(tmp_path / "g"), mode="w", zarr_format=zarr_format)
    path = write_array(tmp_path / "g", "a", data, chunks=(4, 4), zarr_format=zarr_format, **dims, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = xr.open_zarr(tmp_path / "g", consolidated=False)["a"].values
    got = read(path, tmp_path, cf=True)
    assert np.isnan(want).any() == (zarr_format == 2)
    _assert_close_f32(got, want)


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_cf_unsigned_and_missing_value(shmloader: str, tmp_path: pathlib.Path, zarr_format: int) -> None:
    """_Unsigned, missing_value and scale without offset, set by hand, decoded as xarray does."""
    import zarr

    def dims(names: list[str]) -> dict:
        if zarr_format == 2:
            return {"attributes": {"_ARRAY_DIMENSIONS": names}}
        return {"dimension_names": names}

    g = tmp_path / "g"
    zarr.open_group(str(g), mode="w", zarr_format=zarr_format)
    raw_u = np.arange(-128, 128, dtype="i1").reshape(16, 16)
    # fill_value = _FillValue: xarray reads a v2 array's _FillValue from fill_value alone.
    u = write_array(g, "u", raw_u, chunks=(8, 8), zarr_format=zarr_format, fill_value=-1, **dims(["y", "x"]))
    zarr.open_array(str(u), mode="r+").attrs.update({"_Unsigned": "true", "scale_factor": 0.5, "_FillValue": -1})
    raw_m = (np.arange(256, dtype="i2").reshape(16, 16) % 100) - 5
    m = write_array(g, "m", raw_m, chunks=(8, 8), zarr_format=zarr_format, fill_value=-5, **dims(["y", "x"]))
    zarr.open_array(str(m), mode="r+").attrs.update({"missing_value": 94, "_FillValue": -5, "add_offset": 10.0})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = xr.open_zarr(g, consolidated=False)
        want_u, want_m = ds["u"].values, ds["m"].values
    assert np.isnan(want_u).sum() == 1 and np.nanmax(want_u) == 127.0  # 255 masked, 254 * 0.5
    assert np.isnan(want_m).sum() > 4
    _assert_close_f32(read(u, tmp_path, cf=True), want_u)
    _assert_close_f32(read(m, tmp_path, cf=True, name="m.npy"), want_m)
