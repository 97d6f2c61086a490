"""The nowcast-ref generator (tools/gen_nowcast.py) and the xarray reference (nowcast_ref.py).

These need no Go: they check that the generated stores have exactly the layout of docs/WORKLOAD.md,
and that the reference agrees with a second, plain-numpy derivation of the example read from
the raw Zarr arrays (no xarray, no CF decoding by a library), so that the sampler tests compare
the Go sampler against something that is itself checked.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest
import xarray as xr
import zarr

from nowcast_ref import NowcastReference

REPO = Path(__file__).resolve().parents[3]
GEN = REPO / "tools" / "gen_nowcast.py"
EPOCH_S = 1609459200  # 2021-01-01T00:00:00Z

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("nowcast") / "d"
    r = subprocess.run([sys.executable, str(GEN), "--out", str(out), "--days", "0.5", "--seed", "3"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "satellite.zarr" in r.stdout  # the summary table
    yield out
    shutil.rmtree(out, ignore_errors=True)  # 120 MB: do not leave it in pytest's kept temp dirs


def meta(root: Path, store: str, array: str) -> tuple[dict, dict]:
    """.zarray and .zattrs of an array, from the consolidated metadata."""
    m = json.loads((root / store / ".zmetadata").read_text())["metadata"]
    return m[f"{array}/.zarray"], m.get(f"{array}/.zattrs", {})


def test_satellite_layout(data: Path) -> None:
    za, attrs = meta(data, "satellite.zarr", "data")
    assert za["zarr_format"] == 2
    assert za["dtype"] == "<i2" and za["shape"] == [144, 12, 256, 256]
    assert za["chunks"] == [12, 12, 128, 128] and za["fill_value"] == -1
    assert za["compressor"] == {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}
    assert attrs["_ARRAY_DIMENSIONS"] == ["time", "channel", "y", "x"]
    assert attrs["scale_factor"] == 0.001 and attrs["add_offset"] == 0 and attrs["_FillValue"] == -1
    t, tattrs = meta(data, "satellite.zarr", "time")
    assert t["dtype"] == "<i8" and tattrs["units"] == "minutes since 2021-01-01 00:00:00"
    g = zarr.open_group(str(data / "satellite.zarr"), mode="r")
    assert np.array_equal(g["time"][:], np.arange(144) * 5)
    x, y = g["x"][:], g["y"][:]
    assert x.dtype == np.float64 and np.all(np.diff(x) == 2000.0)
    assert np.all(np.diff(y) == -2000.0)  # y descending
    assert len(g["channel"][:]) == 12
    raw = g["data"][:24]
    assert (raw == -1).sum() > 0, "a few fill-valued pixels"
    assert (raw == -1).mean() < 1e-3
    ratio = raw[:12].nbytes / sum(f.stat().st_size for f in (data / "satellite.zarr" / "data").glob("0.*"))
    assert 1.5 <= ratio <= 3.0 * 1.2, ratio


def test_nwp_and_pv_layout(data: Path) -> None:
    za, attrs = meta(data, "nwp.zarr", "UKV")
    assert za["dtype"] == "<f4" and za["shape"] == [4, 16, 10, 64, 64]
    assert za["chunks"] == [1, 16, 10, 32, 32]
    assert za["compressor"]["id"] == "zstd" and za["compressor"]["level"] == 3
    assert attrs["_ARRAY_DIMENSIONS"] == ["init_time", "step", "variable", "y", "x"]
    g = zarr.open_group(str(data / "nwp.zarr"), mode="r")
    assert np.array_equal(g["init_time"][:], np.arange(4) * 180)
    assert np.array_equal(g["step"][:], np.arange(16) * 60)
    assert g["step"].attrs["units"] == "minutes"
    assert np.all(np.diff(g["x"][:]) == 8000.0) and np.all(np.diff(g["y"][:]) == -8000.0)
    assert not np.isnan(g["UKV"][:]).any()

    za, attrs = meta(data, "pv.zarr", "power")
    assert za["dtype"] == "<f4" and za["shape"] == [144, 500] and za["chunks"] == [288, 500]
    assert za["compressor"] == {"id": "zlib", "level": 5} and za["fill_value"] == "NaN"
    assert attrs["_ARRAY_DIMENSIONS"] == ["time", "system"] and attrs["units"] == "kW"
    p = zarr.open_group(str(data / "pv.zarr"), mode="r")
    ids = p["system"][:]
    assert ids.dtype == np.int64 and np.all(np.diff(ids) > 0)
    sx = zarr.open_group(str(data / "satellite.zarr"), mode="r")["x"][:]
    assert sx.min() <= p["x"][:].min() and p["x"][:].max() <= sx.max()
    nan = np.isnan(p["power"][:])
    assert 0 < nan.mean() < 0.05


def test_generate_is_deterministic_and_idempotent(tmp_path: Path) -> None:
    sys.path.insert(0, str(GEN.parent))
    try:
        import gen_nowcast
    finally:
        sys.path.remove(str(GEN.parent))
    a = gen_nowcast.generate(tmp_path / "a", days=0.1, pixels=64, systems=20, seed=1, quiet=True)
    b = gen_nowcast.generate(tmp_path / "b", days=0.1, pixels=64, systems=20, seed=1, quiet=True)
    for store, arr in [("satellite.zarr", "data"), ("nwp.zarr", "UKV"), ("pv.zarr", "power")]:
        x = zarr.open_array(str(tmp_path / "a" / store / arr), mode="r")[...]
        y = zarr.open_array(str(tmp_path / "b" / store / arr), mode="r")[...]
        assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f")
    assert a["params"] == b["params"]
    stamp = (tmp_path / "a" / "nowcast.json").stat().st_mtime_ns
    gen_nowcast.generate(tmp_path / "a", days=0.1, pixels=64, systems=20, seed=1, quiet=True)
    assert (tmp_path / "a" / "nowcast.json").stat().st_mtime_ns == stamp  # reused, not rewritten
    with pytest.raises(ValueError, match="--pixels"):
        gen_nowcast.generate(tmp_path / "c", pixels=30)


def plain_example(root: Path, i: int, cy: int, cx: int) -> dict[str, np.ndarray]:
    """The example of docs/WORKLOAD.md steps 3-6 from raw Zarr arrays and index arithmetic only."""
    sat = zarr.open_group(str(root / "satellite.zarr"), mode="r")
    nwp = zarr.open_group(str(root / "nwp.zarr"), mode="r")
    pv = zarr.open_group(str(root / "pv.zarr"), mode="r")
    raw = sat["data"][i - 6: i + 13, :, cy - 16: cy + 16, cx - 16: cx + 16]
    satellite = np.where(raw == -1, np.nan, raw.astype(np.float64) * 0.001).astype(np.float32)
    t0_min = int(sat["time"][i])
    init = nwp["init_time"][:]
    run = int(np.max(np.nonzero(init <= t0_min - 60)[0]))
    s = (t0_min - 60 - int(init[run])) // 60
    x, y = float(sat["x"][cx]), float(sat["y"][cy])
    nx, ny = nwp["x"][:], nwp["y"][:]
    # the NWP grid starts at the satellite's first pixel centre with 4x the spacing, so the
    # nearest index is round(c / 4) with ties (c = 4n + 2) going to the lower index n
    def near(c: int) -> int:
        q, r = divmod(c, 4)
        return q + (1 if r > 2 else 0)
    ys = min(max(near(cy) - 4, 0), len(ny) - 8)
    xs = min(max(near(cx) - 4, 0), len(nx) - 8)
    nwp_ex = nwp["UKV"][run, s: s + 4, :, ys: ys + 8, xs: xs + 8]
    d2 = (pv["x"][:] - x) ** 2 + (pv["y"][:] - y) ** 2
    chosen = np.sort(np.argsort(d2, kind="stable")[:16])  # ids ascend with the index
    pv_ex = pv["power"][i - 6: i + 13][:, chosen]
    return {"satellite": satellite, "nwp": nwp_ex, "pv": pv_ex, "pv_system": pv["system"][:][chosen],
            "t0": EPOCH_S + 60 * t0_min, "x": x, "y": y}


def test_reference_matches_plain_numpy(data: Path) -> None:
    ref = NowcastReference(data)
    rng = np.random.default_rng(0)
    valid = ref.valid_t0_indices()
    lo_y, hi_y, lo_x, hi_x = ref.centre_range
    cases = [(int(valid[0]), lo_y, lo_x), (int(valid[-1]), hi_y - 1, hi_x - 1), (40, 18, 22), (70, 130, 239)]
    cases += [(int(rng.choice(valid)), int(rng.integers(lo_y, hi_y)), int(rng.integers(lo_x, hi_x)))
              for _ in range(8)]
    saw_nan = False
    for i, cy, cx in cases:
        got = ref.example_at(i, cy, cx)
        want = plain_example(data, i, cy, cx)
        assert got.t0 == want["t0"] and got.x == want["x"] and got.y == want["y"]
        for name in ("satellite", "nwp", "pv", "pv_system"):
            g, w = getattr(got, name), want[name]
            assert g.shape == w.shape and g.dtype == w.dtype, name
            assert np.array_equal(g, w, equal_nan=g.dtype.kind == "f"), (name, i, cy, cx)
        saw_nan |= bool(np.isnan(got.pv).any())
    assert got.satellite.shape == (19, 12, 32, 32) and got.nwp.shape == (4, 10, 8, 8)
    assert got.pv.shape == (19, 16) and got.pv_system.shape == (16,)
    assert saw_nan


def test_reference_rules(data: Path) -> None:
    ref = NowcastReference(data)
    valid = ref.valid_t0_indices()
    # 144 steps; i >= 6 and i + 12 < 144; the first run (00:00) is >= 60 min old from i = 12
    assert valid[0] == 12 and valid[-1] == 131 and len(valid) == 120
    assert ref.centre_range == (16, 240, 16, 240)
    # a tie: satellite column 18 lies half-way between NWP columns 4 and 5 -> 4 -> start 0
    _, _, _, xs = ref.nwp_selection(ref.unix_seconds(20), float(ref.sat_x[18]), float(ref.sat_y[100]))
    assert xs == 0
    _, _, _, xs = ref.nwp_selection(ref.unix_seconds(20), float(ref.sat_x[19]), float(ref.sat_y[100]))
    assert xs == 1
    # run and lead: t0 = 05:00 -> cutoff 04:00 -> run 03:00, lead 1 h
    run, s, _, _ = ref.nwp_selection(EPOCH_S + 5 * 3600, float(ref.sat_x[100]), float(ref.sat_y[100]))
    assert (run, s) == (1, 1)
    with pytest.raises(ValueError, match="not a satellite time"):
        ref.example(EPOCH_S + 1, float(ref.sat_x[100]), float(ref.sat_y[100]))
    with pytest.raises(ValueError, match="pixel centre"):
        ref.example(ref.unix_seconds(20), 1.5, float(ref.sat_y[100]))


def test_xarray_decodes_cf(data: Path) -> None:
    ds = xr.open_zarr(data / "satellite.zarr", chunks=None)
    assert ds["time"].dtype.kind == "M" and str(ds["time"].values[0])[:19] == "2021-01-01T00:00:00"
    v = ds["data"].isel(time=slice(0, 24)).values
    raw = zarr.open_array(str(data / "satellite.zarr" / "data"), mode="r")[:24]
    assert np.array_equal(np.isnan(v), raw == -1)
