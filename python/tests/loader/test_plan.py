"""``gobatch.plan`` / ``shmloader plan``: the dry run of a configuration, checked against the
stores read with xarray and against the independent nowcast reference (nowcast_ref.py)."""

from __future__ import annotations

import copy
import math
import tomllib
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest
import xarray as xr

import gobatch
from nowcast_ref import NowcastReference, generated_nowcast

REPO = Path(__file__).resolve().parents[3]
PRESET = REPO / "presets" / "nowcast.toml"

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with generated_nowcast(tmp_path_factory.mktemp("plan"), "half-day", days=0.5, pixels=64, seed=3) as out:
        yield out


def preset() -> dict:
    return tomllib.loads(PRESET.read_text())


def test_plan_matches_the_stores(data: Path) -> None:
    rep = gobatch.plan(PRESET, data_root=str(data))
    cfg = preset()
    assert [s["name"] for s in rep["sources"]] == [s["name"] for s in cfg["source"]]
    for got, want in zip(rep["sources"], cfg["source"]):
        da = xr.open_zarr(data / want["store"], chunks=None)[want["variable"]]
        assert got["dims"] == list(da.dims)
        assert got["shape"] == list(da.shape)
        steps = (want["interval_end_minutes"] - want["interval_start_minutes"]) // want["time_resolution_minutes"] + 1
        assert got["window_steps"] == steps
        if want.get("role", "grid") in ("grid", "nwp"):
            ds = xr.open_zarr(data / want["store"], chunks=None)
            for ax in ("y", "x"):
                c = ds[ax].values
                assert got["coordinate_order"][ax] == ("ascending" if c[-1] > c[0] else "descending")
            assert "y=y x=x" in got["axes"]
    ref = NowcastReference(data)
    assert rep["t0_candidates"] == len(ref.valid_t0_indices())
    assert rep["anchor_times"] == len(ref.sat_time)
    lo_y, hi_y, lo_x, hi_x = ref.centre_range
    assert rep["centres"] == (hi_y - lo_y) * (hi_x - lo_x)
    # Every tensor's bytes, and the batch's, from the shapes the workload fixes.
    size = cfg["batch"]["size"]
    names = [t["name"] for t in rep["tensors"]]
    assert names == ["satellite", "nwp", "pv", "t0", "x", "y", "pv_system"]
    for t in rep["tensors"]:
        assert t["bytes"] == int(np.prod(t["shape"])) * np.dtype(t["dtype"]).itemsize
    assert rep["tensors"][0]["shape"] == [size, 19, 12, 32, 32]
    assert [t["dtype"] for t in rep["tensors"]] == ["float32"] * 3 + ["int64", "float64", "float64", "int64"]
    assert rep["batch_bytes"] == sum(t["bytes"] for t in rep["tensors"])
    assert rep["ring_slots"] == cfg["ring"]["slots"]
    assert rep["segment_bytes"] >= rep["ring_slots"] * rep["batch_bytes"]
    # The decoded size is every data array as the cache holds it: in its stored type when that
    # is narrower than float32 (the int16 satellite), else float32; 64 px and a quarter day fit
    # any cache.
    decoded = 0
    for want in cfg["source"]:
        da = xr.open_zarr(data / want["store"], chunks=None)[want["variable"]]
        grid = [math.ceil(n / c) for n, c in zip(da.shape, da.encoding["chunks"])]
        width = min(np.dtype(da.encoding["dtype"]).itemsize, 4)
        decoded += int(np.prod(grid)) * int(np.prod(da.encoding["chunks"])) * width
    assert rep["decoded_bytes"] == decoded
    assert rep["mode"] == "random" and rep["order"] == "stream"
    assert rep["cache_bytes"] == cfg["source"][0]["cache_mb"] << 20


def test_plan_of_a_dict_and_its_errors(data: Path) -> None:
    cfg = preset()
    for s in cfg["source"]:
        s["store"] = str(data / s["store"])
    cfg["batch"]["order"] = "epochs"
    rep = gobatch.plan(cfg, cache_mb=512)
    assert rep["order"] == "epochs" and rep["cache_bytes"] == 512 << 20
    samples = rep["t0_candidates"]  # no site anchoring: one location per t0
    assert rep["samples"] == samples
    assert rep["epoch_batches"] == samples // cfg["batch"]["size"]
    two = gobatch.plan(cfg, rank=1, world_size=2)
    assert two["epoch_batches"] == samples // (2 * cfg["batch"]["size"])

    bad = copy.deepcopy(cfg)
    bad["source"][0]["store"] = str(data / "missing.zarr")
    with pytest.raises(gobatch.ConfigError, match=r"source\[0\]\.store"):
        gobatch.plan(bad)
    nan = copy.deepcopy(cfg)
    nan["source"][0]["normalise_mean"] = [float("nan")] * 12
    with pytest.raises(gobatch.ConfigError, match=r"source\[0\]\.normalise_mean\[0\]"):
        gobatch.plan(nan)
    with pytest.raises(gobatch.ConfigError, match="--world-size"):
        gobatch.plan(cfg, rank=2, world_size=2)
