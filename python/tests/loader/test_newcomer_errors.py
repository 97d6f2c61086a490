"""The errors a new user meets first: each names the cause and what to do about it.

Each case is a configuration mistake written the way a newcomer makes it, against stores written
here with xarray; ``gobatch.plan`` (the same opening as a Loader's) must raise ``ConfigError``
naming the configuration key and the real cause, not a message from deep inside a reader.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import gobatch

N = 64  # grid pixels a side


def _grid(path: Path, times: pd.DatetimeIndex, **extra: Any) -> None:
    """A (time, channel, y, x) float32 store with 2 km pixels, plus extra variables."""
    rng = np.random.default_rng(0)
    coords = {"time": times, "channel": ["a", "b"], "x": np.arange(N) * 2000.0, "y": np.arange(N) * 2000.0}
    data = {"data": (("time", "channel", "y", "x"), rng.random((len(times), 2, N, N), dtype=np.float32))}
    data.update(extra)
    xr.Dataset(data, coords=coords).to_zarr(path, mode="w", zarr_format=2, consolidated=True)


def _config(store: str, variable: str = "data", resolution: int = 5) -> dict[str, Any]:
    return {
        "batch": {"size": 4},
        "source": [{
            "name": "sat", "kind": "zarr", "store": store, "variable": variable, "anchor": True,
            "channels": ["a", "b"], "time_resolution_minutes": resolution,
            "interval_start_minutes": -30, "interval_end_minutes": 30,
            "image_size_pixels_height": 16, "image_size_pixels_width": 16,
        }],
    }


def _refused(cfg: dict[str, Any], root: Path) -> str:
    with pytest.raises(gobatch.ConfigError) as e:
        gobatch.plan(cfg, data_root=str(root))
    msg = str(e.value)
    assert "panic" not in msg and "goroutine" not in msg, msg
    return msg


def test_store_that_is_a_plain_file(tmp_path: Path) -> None:
    (tmp_path / "sat.zarr").write_text("not a store\n")
    msg = _refused(_config("sat.zarr"), tmp_path)
    assert "source[0].store" in msg and "not a Zarr store" in msg, msg
    assert "not a valid zip file" not in msg, msg


def test_wrong_variable_lists_the_arrays(tmp_path: Path) -> None:
    _grid(tmp_path / "sat.zarr", pd.date_range("2021-01-01", periods=40, freq="5min"))
    msg = _refused(_config("sat.zarr", variable="dta"), tmp_path)
    assert "source[0].variable" in msg and "dta" in msg, msg
    listed = msg.split("the arrays in")[1]
    for name in ("channel", "data", "time", "x", "y"):
        assert name in listed, msg


@pytest.mark.parametrize("dtype,name", [(np.complex64, "complex64"), ("<U2", "<U2"), ("bool", "bool")])
def test_unsupported_dtype_named_as_numpy_does(tmp_path: Path, dtype: Any, name: str) -> None:
    times = pd.date_range("2021-01-01", periods=40, freq="5min")
    bad = np.zeros((len(times), 2, N, N), dtype=dtype)
    _grid(tmp_path / "sat.zarr", times, bad=(("time", "channel", "y", "x"), bad))
    assert str(np.dtype(dtype)) == name  # the spelling numpy prints
    msg = _refused(_config("sat.zarr", variable="bad"), tmp_path)
    assert f"data type {name} is not supported" in msg, msg
    assert "?" not in msg.split("data type")[1].split()[0], msg


def test_wrong_time_resolution_names_the_gaps_with_counts(tmp_path: Path) -> None:
    # One stray 5-minute step makes the store's smallest step 5 min, but its steps are 15 min
    # apart: at time_resolution_minutes = 5 almost every t0 lacks steps of its window.
    times = pd.date_range("2021-01-01 00:05", periods=120, freq="15min").insert(0, pd.Timestamp("2021-01-01"))
    _grid(tmp_path / "sat.zarr", times)
    msg = _refused(_config("sat.zarr", resolution=5), tmp_path)
    # The cause that rejects most t0s comes first, with its count, then the window-edge ones.
    gaps = msg.index("because the time coordinate has a gap")
    edge = msg.index("because the window leaves the time coordinate")
    assert gaps < edge, msg
    counted = int(msg[:gaps].rsplit(None, 1)[-1])
    # A t0 is rejected for a gap when the first step of its window that the store lacks lies
    # inside the coordinate's range (else it leaves the coordinate).
    t = times.values
    have = set(t.tolist())
    window = np.arange(-30, 31, 5) * np.timedelta64(1, "m")
    first_missing = [next(s for s in t0 + window if s.tolist() not in have) for t0 in t]
    assert counted == sum(t[0] <= s <= t[-1] for s in first_missing), msg
    assert "15 min apart; the window's are 5 min apart" in msg, msg


def test_plan_counts_rejections_by_cause(tmp_path: Path) -> None:
    times = pd.date_range("2021-01-01 00:05", periods=120, freq="15min").insert(0, pd.Timestamp("2021-01-01"))
    _grid(tmp_path / "sat.zarr", times)
    ok = _config("sat.zarr", resolution=15)
    rep = gobatch.plan(ok, data_root=str(tmp_path))
    (sat,) = [r for r in rep["t0_rejections"] if r["name"] == "sat"]
    assert sum(c["count"] for c in sat["causes"]) == sat["count"] > 0
    assert [c["count"] for c in sat["causes"]] == sorted((c["count"] for c in sat["causes"]), reverse=True)
