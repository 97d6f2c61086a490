"""Sources stored as 1- and 2-byte numbers through ``gobatch.Loader``: the cache holds their
chunks in the stored type and the gather converts them (CF scale and offset, _FillValue masks,
normalisation, the NaN policy).

Each case writes a satellite grid and a points source of one stored dtype with zarr-python's
attributes for scale_factor, add_offset and _FillValue (some raw values equal to the fill),
channel first or channel last (the cache transposes in the stored width), samples batches and
compares every example with test_layouts' xarray reference: xarray decodes the store, the
reference normalises and applies the NaN policy in numpy. The reference shares no code with
the sampler.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr
import zarr

from test_layouts import MIN, T0, Src, check_layout, write

pytestmark = pytest.mark.timeout(120)

# dtype: (raw low, raw high, fill, scale_factor, add_offset)
STORED: dict[str, tuple[float, float, float, float, float]] = {
    "i1": (-127, 127, -128, 0.5, 3.0),
    "u1": (0, 254, 255, 0.25, -10.0),
    "i2": (-3000, 3000, -32768, 0.001, 0.0),
    "u2": (0, 60000, 65535, 0.01, -5.0),
    "f2": (-500, 500, -999, 0.5, 1.0),
}


def raw(dtype: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Values over the dtype's range, about 3 % of them the fill value (and for float16 some
    NaN and fractional values)."""
    lo, hi, fill, _, _ = STORED[dtype]
    if dtype == "f2":
        v = (rng.uniform(lo, hi, size=shape) * 4).round() / 4  # quarters: exact in float16
        v[rng.random(shape) < 0.02] = np.nan
    else:
        v = rng.integers(lo, hi + 1, size=shape)
    v[rng.random(shape) < 0.03] = fill
    return v.astype(dtype)


def set_cf(path: Path, var: str, dtype: str) -> None:
    """Adds scale_factor and add_offset to var (xarray wrote the raw values and the fill) and
    consolidates the metadata again."""
    _, _, _, scale, offset = STORED[dtype]
    a = zarr.open_array(store=str(path / var), mode="r+")
    a.attrs.update({"scale_factor": scale, "add_offset": offset})
    zarr.consolidate_metadata(str(path))


def stores(root: Path, dtype: str, channel_last: bool, rng: np.random.Generator) -> None:
    T, H, W, C, n = 72, 24, 20, 3, 9
    fill = STORED[dtype][2]
    x, y = 100_000.0 + 1000.0 * np.arange(W), 900_000.0 - 1000.0 * np.arange(H)
    times = T0 + np.arange(T) * 5 * MIN
    dims = ("time", "y", "x", "channel") if channel_last else ("time", "channel", "y", "x")
    shape = tuple({"time": T, "channel": C, "y": H, "x": W}[d] for d in dims)
    chunks = tuple({"time": 12, "channel": C, "y": 12, "x": 10}[d] for d in dims)
    sat = xr.Dataset({"data": (dims, raw(dtype, shape, rng))},
                     coords={"time": times, "channel": ["a", "b", "c"], "y": y, "x": x})
    write(sat, root / "sat.zarr", {"data": {"chunks": chunks, "_FillValue": fill}})
    set_cf(root / "sat.zarr", "data", dtype)
    pv = xr.Dataset({"power": (("time", "system"), raw(dtype, (T, n), rng))},
                    coords={"time": times, "system": np.arange(n, dtype=np.int64) + 40,
                            "x": ("system", rng.uniform(x[0], x[-1], n)), "y": ("system", rng.uniform(y[-1], y[0], n))})
    write(pv, root / "pv.zarr", {"power": {"chunks": (24, 4), "_FillValue": fill}})
    set_cf(root / "pv.zarr", "power", dtype)


def sources(extra_sat: dict[str, Any], extra_pv: dict[str, Any]) -> list[Src]:
    return [
        Src({"name": "satellite", "store": "sat.zarr", "variable": "data", "time_resolution_minutes": 5,
             "interval_start_minutes": -15, "interval_end_minutes": 30, "image_size_pixels_height": 8,
             "image_size_pixels_width": 6, "channels": ["c", "a"], **extra_sat},
            {"time": "time", "channel": "channel", "y": "y", "x": "x"}),
        Src({"name": "pv", "store": "pv.zarr", "variable": "power", "role": "points", "nearest_k": 4,
             "time_resolution_minutes": 5, "interval_start_minutes": -15, "interval_end_minutes": 15, **extra_pv},
            {"time": "time", "id": "system"}),
    ]


@pytest.mark.parametrize("channel_last", [False, True], ids=["channel-first", "channel-last"])
@pytest.mark.parametrize("dtype", list(STORED))
def test_stored_dtype_cf(tmp_path: Path, dtype: str, channel_last: bool) -> None:
    stores(tmp_path, dtype, channel_last, np.random.default_rng(len(dtype) + 7 * channel_last))
    srcs = sources({}, {})
    assert check_layout(tmp_path, srcs) == 16
    # The fixture is what the docstring says: stored dtype, CF attributes, masked values.
    da = xr.open_zarr(tmp_path / "sat.zarr", chunks=None, mask_and_scale=False)["data"]
    assert da.dtype == np.dtype(dtype) and da.attrs["scale_factor"] == STORED[dtype][3]
    assert np.isnan(srcs[0].da.values).any() and np.isnan(srcs[1].da.values).any()


@pytest.mark.parametrize("dtype", list(STORED))
def test_stored_dtype_normalised_nan_to_zero(tmp_path: Path, dtype: str) -> None:
    stores(tmp_path, dtype, dtype in ("i1", "u2"), np.random.default_rng(3 + len(dtype)))
    norm = {"normalise_mean": [1.5, -2.25], "normalise_std": [0.3, 7.0], "nan_policy": "zero"}
    srcs = sources(norm, {"normalise_mean": [0.7], "normalise_std": [2.5], "nan_policy": "zero"})
    assert check_layout(tmp_path, srcs) == 16
