"""Spatial coordinates that ``plan`` refuses, on stores written by xarray/zarr-python: a NaN in the
anchor's x (before, it passed the plan and failed the run blaming another store), and an anchor
``crs`` whose units contradict the coordinate values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

import gobatch

H = W = 16


def write_grid(root: Path, name: str, x: np.ndarray, y: np.ndarray) -> None:
    time = np.datetime64("2021-03-01T06:00") + np.arange(24) * np.timedelta64(5, "m")
    data = np.zeros((24, H, W), dtype=np.float32)
    xr.Dataset({"data": (("time", "y", "x"), data)}, coords={"time": time, "y": y, "x": x}).to_zarr(
        root / name, zarr_format=2, consolidated=True)


def anchor_config(store: str, **extra: Any) -> dict[str, Any]:
    src = {"name": "sat", "kind": "zarr", "store": store, "variable": "data", "anchor": True,
           "time_resolution_minutes": 5, "interval_start_minutes": -15, "interval_end_minutes": 15,
           "image_size_pixels_height": 4, "image_size_pixels_width": 4, **extra}
    return {"batch": {"size": 2, "seed": 1}, "ring": {"slots": 2}, "source": [src]}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("coords")
    metres_x = 200000.0 + 2000.0 * np.arange(W)
    metres_y = 900000.0 - 2000.0 * np.arange(H)
    nan_x = metres_x.copy()
    nan_x[5] = np.nan
    write_grid(root, "nan_x.zarr", nan_x, metres_y)
    write_grid(root, "metres.zarr", metres_x, metres_y)
    write_grid(root, "degrees.zarr", -5.6 + 0.03 * np.arange(W), 58.2 - 0.03 * np.arange(H))
    return root


def test_nan_in_anchor_x_refused_at_plan(root: Path) -> None:
    with pytest.raises(gobatch.ConfigError) as e:
        gobatch.plan(anchor_config("nan_x.zarr"), data_root=str(root))
    for w in ["source[0].store", "nan_x.zarr/x", "value 5 is NaN"]:
        assert w in str(e.value), str(e.value)


@pytest.mark.parametrize("store, crs, words", [
    ("metres.zarr", "EPSG:4326", ["source[0].crs", '"EPSG:4326" is in degrees', "metres.zarr/x spans [200000, 230000]"]),
    ("degrees.zarr", "EPSG:27700", ["source[0].crs", '"EPSG:27700" is in metres', "degrees.zarr/x", "look like longitudes"]),
])
def test_crs_contradicting_coordinates_refused(root: Path, store: str, crs: str, words: list[str]) -> None:
    with pytest.raises(gobatch.ConfigError) as e:
        gobatch.plan(anchor_config(store, crs=crs), data_root=str(root))
    for w in words:
        assert w in str(e.value), str(e.value)


@pytest.mark.parametrize("store, crs", [("metres.zarr", "EPSG:27700"), ("degrees.zarr", "EPSG:4326"), ("metres.zarr", None)])
def test_consistent_grids_plan(root: Path, store: str, crs: str | None) -> None:
    extra = {} if crs is None else {"crs": crs}
    p = gobatch.plan(anchor_config(store, **extra), data_root=str(root))
    assert p["sources"], p
