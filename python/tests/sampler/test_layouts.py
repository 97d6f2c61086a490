"""Real-data layouts (issue 8) through ``gobatch.Loader``: dimensions by name, any order.

Each test writes small stores with xarray in one archive layout at test time, samples batches
with the Go sampler and compares every tensor of every example with a reference computed here
with xarray alone: the store's DataArray transposed to the role's canonical order, selected by
the batch's t0 and centre (x, y) values, the other sources by the nearest coordinate, crops
taken with ``isel`` in the store's own order along each axis. The reference shares no code with
the sampler.

Layouts (the numbering of issue 8):

1. satellite ``data (time, y, x, variable)`` int16, bz2, 5 min, x descending, y ascending
   float32 metres, no CF attributes (with ``x_osgb``/``y_osgb`` over ``(y, x)``, unused here);
2. ``data (time, y, x)``: no channel axis;
3. UKV ``UKV (variable, init_time, step, y, x)`` float32, Blosc zstd, runs every 3 h, y
   descending and x ascending int64 metres (step timedelta64);
4. ocf-data-sampler: satellite ``(time_utc, channel, x_geostationary, y_geostationary)``, NWP
   ``(init_time, step, variable, x, y)``, ``generation_mw (time_utc, location_id)`` with
   positions over ``location_id``;
5. ``generation_mw (datetime_gmt, gsp_id)``, ids '1'..'21', 30 min (positions added);

and a ``dims`` table for names no spelling covers. Layout 6 (nowcast-ref) is
test_sampler_loader.py. The error tests check that unmappable layouts are refused naming the
store, the array, the dimensions and the accepted names.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest
import xarray as xr

import gobatch

pytestmark = pytest.mark.timeout(120)

T0 = np.datetime64("2021-06-01T00:00", "ns")
MIN = np.timedelta64(1, "m")
RNG = np.random.default_rng(8)


# ------------------------------------------------------------------------------ the stores


def write(ds: xr.Dataset, path: Path, encoding: dict[str, Any], zarr_format: int = 2) -> None:
    ds.to_zarr(path, mode="w", zarr_format=zarr_format, consolidated=True, encoding=encoding)


def satellite_layout1(path: Path, T: int = 96, H: int = 40, W: int = 48) -> None:
    """(time, y, x, variable) int16, bz2, x descending and y ascending float32, no CF attributes."""
    x = (27_000.0 - 3000.0 * np.arange(W)).astype(np.float32)
    y = (5_000_000.0 + 3000.0 * np.arange(H)).astype(np.float32)
    data = RNG.integers(1, 1000, size=(T, H, W, 3), dtype=np.int16)
    ds = xr.Dataset(
        {"data": (("time", "y", "x", "variable"), data)},
        coords={"time": T0 + np.arange(T) * 5 * MIN, "y": y, "x": x,
                "variable": ["IR_016", "VIS006", "WV_062"],
                "x_osgb": (("y", "x"), (np.add.outer(y, x) / 7).astype(np.float32)),
                "y_osgb": (("y", "x"), (np.subtract.outer(y, x) / 9).astype(np.float32))})
    write(ds, path, {"data": {"compressors": numcodecs.BZ2(level=5), "chunks": (7, 20, 24, 1)}})


def ukv_layout3(path: Path) -> None:
    """UKV (variable, init_time, step, y, x) float32, Blosc zstd, 3-hourly runs, y descending and
    x ascending int64 metres, step timedelta64."""
    x = np.arange(-120_000, 40_001, 6000, dtype=np.int64)
    y = np.arange(5_130_000, 4_987_999, -6000, dtype=np.int64)
    inits = T0 - 3 * 60 * MIN + np.arange(4) * 3 * 60 * MIN
    steps = np.arange(11) * 60 * MIN
    data = RNG.standard_normal((3, len(inits), len(steps), len(y), len(x))).astype(np.float32)
    ds = xr.Dataset({"UKV": (("variable", "init_time", "step", "y", "x"), data)},
                    coords={"variable": ["dswrf", "lcc", "t"], "init_time": inits, "step": steps, "y": y, "x": x})
    blosc = numcodecs.Blosc(cname="zstd", clevel=3, shuffle=numcodecs.Blosc.SHUFFLE)
    write(ds, path, {"UKV": {"compressors": blosc, "chunks": (3, 1, 11, 12, 14)}})


def gsp_layout5(path: Path, T: int = 16, ids: str = "<U") -> None:
    """generation_mw (datetime_gmt, gsp_id) float64, ids '1'..'21' (fixed-width unicode, or
    variable-length strings with ids="object"), 30-minute steps, with x, y positions over
    gsp_id in the satellite's coordinates."""
    n = 21
    data = RNG.uniform(0, 50, size=(T, n))
    data[RNG.random(data.shape) < 0.05] = np.nan
    ds = xr.Dataset({"generation_mw": (("datetime_gmt", "gsp_id"), data)},
                    coords={"datetime_gmt": T0 - 60 * MIN + np.arange(T) * 30 * MIN,
                            "gsp_id": np.array([str(i) for i in range(1, n + 1)], dtype=object if ids == "object" else None),
                            "x": ("gsp_id", RNG.uniform(-110_000, 20_000, n)),
                            "y": ("gsp_id", RNG.uniform(5_005_000, 5_110_000, n))})
    write(ds, path, {"generation_mw": {"chunks": (8, 21)}})


def hrv_layout2(path: Path, T: int = 60, H: int = 36, W: int = 30, zarr_format: int = 2) -> None:
    """(time, y, x) int16: no channel axis; y descending, x ascending."""
    data = RNG.integers(0, 4000, size=(T, H, W), dtype=np.int16)
    ds = xr.Dataset({"data": (("time", "y", "x"), data)},
                    coords={"time": T0 + np.arange(T) * 5 * MIN,
                            "y": 900_000.0 - 1000.0 * np.arange(H), "x": 100_000.0 + 1000.0 * np.arange(W)})
    write(ds, path, {"data": {"chunks": (10, 18, 15)}}, zarr_format)


def pv_site_first(path: Path, T: int = 60, n: int = 12, zarr_format: int = 2) -> None:
    """power (site_id, time) float32: the id axis first, integer ids not in ascending order."""
    data = RNG.uniform(0, 5, size=(n, T)).astype(np.float32)
    data[RNG.random(data.shape) < 0.05] = np.nan
    ds = xr.Dataset({"power": (("site_id", "time"), data)},
                    coords={"site_id": RNG.permutation(np.arange(100, 100 + n)).astype(np.int64),
                            "time": T0 + np.arange(T) * 5 * MIN,
                            "x": ("site_id", RNG.uniform(100_000, 129_000, n)),
                            "y": ("site_id", RNG.uniform(865_000, 900_000, n))})
    write(ds, path, {"power": {"chunks": (5, 24)}}, zarr_format)


def ocf_layout4(root: Path) -> None:
    """ocf-data-sampler's layout: satellite (time_utc, channel, x_geostationary, y_geostationary)
    float32 with NaN, y descending; NWP (init_time, step, variable, x, y) with step
    timedelta64; generation_mw (time_utc, location_id) with positions over location_id."""
    T, H, W = 72, 30, 34
    xg = -50_000.0 + 3000.0 * np.arange(W)
    yg = 5_200_000.0 - 3000.0 * np.arange(H)
    sat = RNG.uniform(0, 1, size=(T, 2, W, H)).astype(np.float32)
    sat[RNG.random(sat.shape) < 0.01] = np.nan
    times = T0 + np.arange(T) * 5 * MIN
    xr.Dataset({"data": (("time_utc", "channel", "x_geostationary", "y_geostationary"), sat)},
               coords={"time_utc": times, "channel": ["IR_108", "VIS008"],
                       "x_geostationary": xg, "y_geostationary": yg}).pipe(
        write, root / "sat.zarr", {"data": {"chunks": (12, 2, 17, 15)}})
    xn = -60_000.0 + 10_000.0 * np.arange(13)
    yn = 5_230_000.0 - 10_000.0 * np.arange(12)
    inits = T0 - 3 * 60 * MIN + np.arange(3) * 3 * 60 * MIN
    steps = np.arange(12) * 60 * MIN
    nwp = RNG.standard_normal((len(inits), len(steps), 4, len(xn), len(yn))).astype(np.float32)
    xr.Dataset({"ecmwf": (("init_time", "step", "variable", "x", "y"), nwp)},
               coords={"init_time": inits, "step": steps, "variable": ["t2m", "u10", "v10", "tcc"], "x": xn, "y": yn}).pipe(
        write, root / "nwp.zarr", {"ecmwf": {"chunks": (1, 12, 4, 7, 6)}})
    n = 9
    gen = RNG.uniform(0, 10, size=(T, n))
    xr.Dataset({"generation_mw": (("time_utc", "location_id"), gen)},
               coords={"time_utc": times, "location_id": np.arange(n, dtype=np.int64) * 7 + 3,
                       "x_geostationary": ("location_id", RNG.uniform(-40_000, 40_000, n)),
                       "y_geostationary": ("location_id", RNG.uniform(5_120_000, 5_190_000, n)),
                       "longitude": ("location_id", RNG.uniform(-3, 1, n)),
                       "latitude": ("location_id", RNG.uniform(50, 55, n))}).pipe(
        write, root / "gen.zarr", {"generation_mw": {"chunks": (24, n)}})


# ---------------------------------------------------------------------- the xarray reference


@dataclass
class Src:
    """One source as the reference sees it: its config table and the canonical axis names."""

    cfg: dict[str, Any]
    dims: dict[str, str]  # canonical axis -> store dimension
    positions: tuple[str, str] = ("x", "y")  # points: the x and y coordinates over the ids
    da: xr.DataArray = field(init=False)

    def open(self, root: Path) -> None:
        self.da = xr.open_zarr(root / self.cfg["store"], chunks=None)[self.cfg["variable"]].load()

    @property
    def name(self) -> str:
        return self.cfg["name"]

    def window(self, t0: np.datetime64) -> np.ndarray:
        c = self.cfg
        offsets = np.arange(c["interval_start_minutes"], c["interval_end_minutes"] + 1, c["time_resolution_minutes"])
        return t0 + offsets * MIN

    def canonical(self, axes: list[str]) -> xr.DataArray:
        """The DataArray with its dimensions in canonical order (a channel of size 1 added when
        the store has none)."""
        da = self.da
        if "channel" in axes and "channel" not in self.dims:
            da = da.expand_dims("channel_added", axis=0)
            names = [self.dims.get(a, "channel_added") for a in axes]
        else:
            names = [self.dims[a] for a in axes]
        return da.transpose(*names)

    def channels(self, da: xr.DataArray) -> xr.DataArray:
        if "channel" in self.dims:
            return da.sel({self.dims["channel"]: self.cfg["channels"]})
        return da


def crop_start(coord: np.ndarray, centre: float, n: int) -> int:
    d = np.abs(coord.astype(np.float64) - centre)
    nearest = int(np.nonzero(d == d.min())[0][0])  # a tie goes to the lower index
    return int(np.clip(nearest - n // 2, 0, len(coord) - n))


def expected(srcs: list[Src], t0s: int, x: float, y: float) -> dict[str, np.ndarray]:
    """Every data tensor of one example, and the ids of each points source."""
    t0 = np.datetime64(int(t0s), "s").astype("datetime64[ns]")
    anchor = srcs[0]
    ax, ay = anchor.da[anchor.dims["x"]].values, anchor.da[anchor.dims["y"]].values
    cx = np.nonzero(ax.astype(np.float64) == x)[0]
    cy = np.nonzero(ay.astype(np.float64) == y)[0]
    assert len(cx) == 1 and len(cy) == 1, f"centre ({x}, {y}) is not an anchor pixel"
    out: dict[str, np.ndarray] = {}
    for s in srcs:
        c, role = s.cfg, s.cfg.get("role", "grid")
        if role == "grid":
            da = s.channels(s.canonical(["time", "channel", "y", "x"]).sel({s.dims["time"]: s.window(t0)}))
            h, w = c["image_size_pixels_height"], c["image_size_pixels_width"]
            if s is anchor:
                y0, x0 = int(cy[0]) - h // 2, int(cx[0]) - w // 2
            else:
                y0 = crop_start(s.da[s.dims["y"]].values, y, h)
                x0 = crop_start(s.da[s.dims["x"]].values, x, w)
            da = da.isel({s.dims["y"]: slice(y0, y0 + h), s.dims["x"]: slice(x0, x0 + w)})
            out[s.name] = da.values.astype(np.float32)
        elif role == "nwp":
            inits = s.da[s.dims["init_time"]].values
            run = int(np.nonzero(inits <= t0 - c.get("min_staleness_minutes", 0) * MIN)[0].max())
            res = c["time_resolution_minutes"] * MIN
            lead = (t0 + c["interval_start_minutes"] * MIN - inits[run]) // res * res
            n = (c["interval_end_minutes"] - c["interval_start_minutes"]) // c["time_resolution_minutes"] + 1
            da = s.canonical(["init_time", "step", "channel", "y", "x"]).isel({s.dims["init_time"]: run})
            da = s.channels(da.sel({s.dims["step"]: lead + np.arange(n) * res}))
            h, w = c["image_size_pixels_height"], c["image_size_pixels_width"]
            y0 = crop_start(s.da[s.dims["y"]].values, y, h)
            x0 = crop_start(s.da[s.dims["x"]].values, x, w)
            out[s.name] = da.isel({s.dims["y"]: slice(y0, y0 + h), s.dims["x"]: slice(x0, x0 + w)}).values.astype(np.float32)
        else:
            idn = s.dims["id"]
            ids = s.da[idn].values
            px, py = s.da[s.positions[0]].values, s.da[s.positions[1]].values
            near = np.argsort(np.hypot(px - x, py - y), kind="stable")[: c["nearest_k"]]
            as_int = ids.astype(np.int64) if ids.dtype.kind in "iu" else np.array([int(v) for v in ids])
            near = near[np.argsort(as_int[near], kind="stable")]
            da = s.canonical(["time", "id"]).sel({s.dims["time"]: s.window(t0)}).isel({idn: near})
            out[s.name] = da.values.astype(np.float32)
            out[c.get("ids_tensor", s.name + "_system")] = as_int[near]
        out[s.name] = normalised(c, out[s.name], per_channel=role != "points")
    return out


def normalised(c: dict[str, Any], v: np.ndarray, per_channel: bool) -> np.ndarray:
    """The config's normalisation ((v - mean) / std in float64 from the float32 value: per
    selected channel, axis 1 of a grid or NWP example, or mean[0] and std[0] for points), then
    its NaN policy ("zero": NaN becomes 0)."""
    if "normalise_mean" in c:
        m, sd = np.array(c["normalise_mean"], np.float64), np.array(c["normalise_std"], np.float64)
        if per_channel:
            m, sd = m[:, None, None], sd[:, None, None]
        else:
            m, sd = m[0], sd[0]
        v = ((v.astype(np.float64) - m) / sd).astype(np.float32)
    if c.get("nan_policy") == "zero":
        v = np.where(np.isnan(v), np.float32(0), v)
    return v


def config(srcs: list[Src], size: int = 8, seed: int = 5) -> dict[str, Any]:
    cfg = {"batch": {"size": size, "seed": seed}, "ring": {"slots": 2}, "source": []}
    for i, s in enumerate(srcs):
        t = {"kind": "zarr", **copy.deepcopy(s.cfg)}
        if i == 0:
            t.update(anchor=True, cache_mb=64)
        cfg["source"].append(t)
    return cfg


def check_layout(root: Path, srcs: list[Src], batches: int = 2) -> int:
    """Samples batches and compares every tensor of every example with the reference; returns
    the number of examples checked."""
    for s in srcs:
        s.open(root)
    n = 0
    with gobatch.Loader(config(srcs), framework="numpy", data_root=root) as loader:
        for k, batch in enumerate(loader):
            b = {name: np.array(v) for name, v in batch.items()}
            for i in range(b["t0"].shape[0]):
                want = expected(srcs, int(b["t0"][i]), float(b["x"][i]), float(b["y"][i]))
                where = f"batch {k} example {i} (t0 {np.datetime64(int(b['t0'][i]), 's')}, x {b['x'][i]}, y {b['y'][i]})"
                for name, v in want.items():
                    got = b[name][i]
                    assert got.shape == v.shape, f"{name} shape {got.shape}, want {v.shape}, {where}"
                    assert got.dtype == v.dtype, f"{name} dtype {got.dtype}, want {v.dtype}, {where}"
                    assert np.array_equal(got, v, equal_nan=v.dtype.kind == "f"), f"{name}, {where}"
                n += 1
            if k + 1 == batches:
                break
    return n


# ---------------------------------------------------------------------------------- layouts


def sat1_src(**kw: Any) -> Src:
    return Src({"name": "satellite", "store": "sat.zarr", "variable": "data", "time_resolution_minutes": 5,
                "interval_start_minutes": -15, "interval_end_minutes": 30, "image_size_pixels_height": 8,
                "image_size_pixels_width": 6, "channels": ["WV_062", "IR_016"], **kw},
               {"time": "time", "channel": "variable", "y": "y", "x": "x"})


@pytest.mark.parametrize("ids", ["<U", "object"])
def test_layouts_1_3_5_satellite_ukv_gsp(tmp_path: Path, ids: str) -> None:
    satellite_layout1(tmp_path / "sat.zarr")
    ukv_layout3(tmp_path / "ukv.zarr")
    gsp_layout5(tmp_path / "gsp.zarr", ids=ids)
    srcs = [
        sat1_src(),
        Src({"name": "nwp", "store": "ukv.zarr", "variable": "UKV", "role": "nwp", "min_staleness_minutes": 60,
             "time_resolution_minutes": 60, "interval_start_minutes": -60, "interval_end_minutes": 120,
             "image_size_pixels_height": 4, "image_size_pixels_width": 5, "channels": ["t", "dswrf"]},
            {"init_time": "init_time", "step": "step", "channel": "variable", "y": "y", "x": "x"}),
        Src({"name": "gsp", "store": "gsp.zarr", "variable": "generation_mw", "role": "points", "nearest_k": 5,
             "time_resolution_minutes": 30, "interval_start_minutes": -30, "interval_end_minutes": 60},
            {"time": "datetime_gmt", "id": "gsp_id"}),
    ]
    assert check_layout(tmp_path, srcs) == 16
    # The layout is what the docstring says (guards the fixture, not the sampler).
    da = srcs[0].da
    assert da.dims == ("time", "y", "x", "variable") and da.dtype == np.int16
    assert np.all(np.diff(da["x"].values) < 0) and np.all(np.diff(da["y"].values) > 0)
    assert srcs[1].da.dims == ("variable", "init_time", "step", "y", "x") and srcs[1].da["y"].dtype == np.int64
    assert srcs[2].da["gsp_id"].values[0] == "1"


@pytest.mark.filterwarnings("ignore:Consolidated metadata is currently not part")
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_layout_2_no_channel_axis_and_points_id_first(tmp_path: Path, zarr_format: int) -> None:
    """Zarr v2 (_ARRAY_DIMENSIONS) and v3 (dimension_names)."""
    hrv_layout2(tmp_path / "hrv.zarr", zarr_format=zarr_format)
    pv_site_first(tmp_path / "pv.zarr", zarr_format=zarr_format)
    srcs = [
        Src({"name": "hrv", "store": "hrv.zarr", "variable": "data", "time_resolution_minutes": 5,
             "interval_start_minutes": -20, "interval_end_minutes": 10, "image_size_pixels_height": 10,
             "image_size_pixels_width": 12}, {"time": "time", "y": "y", "x": "x"}),
        Src({"name": "pv", "store": "pv.zarr", "variable": "power", "role": "points", "nearest_k": 4,
             "time_resolution_minutes": 5, "interval_start_minutes": -20, "interval_end_minutes": 10},
            {"time": "time", "id": "site_id"}),
    ]
    assert check_layout(tmp_path, srcs) == 16


def test_layout_4_ocf_data_sampler(tmp_path: Path) -> None:
    ocf_layout4(tmp_path)
    srcs = [
        Src({"name": "sat", "store": "sat.zarr", "variable": "data", "time_resolution_minutes": 5,
             "interval_start_minutes": -10, "interval_end_minutes": 15, "image_size_pixels_height": 8,
             "image_size_pixels_width": 10, "channels": ["VIS008", "IR_108"]},
            {"time": "time_utc", "channel": "channel", "y": "y_geostationary", "x": "x_geostationary"}),
        Src({"name": "ecmwf", "store": "nwp.zarr", "variable": "ecmwf", "role": "nwp", "min_staleness_minutes": 30,
             "time_resolution_minutes": 60, "interval_start_minutes": 0, "interval_end_minutes": 180,
             "image_size_pixels_height": 4, "image_size_pixels_width": 4, "channels": ["tcc", "t2m", "u10"]},
            {"init_time": "init_time", "step": "step", "channel": "variable", "y": "y", "x": "x"}),
        Src({"name": "gen", "store": "gen.zarr", "variable": "generation_mw", "role": "points", "nearest_k": 3,
             "time_resolution_minutes": 15, "interval_start_minutes": -30, "interval_end_minutes": 30},
            {"time": "time_utc", "id": "location_id"}, positions=("x_geostationary", "y_geostationary")),
    ]
    assert check_layout(tmp_path, srcs) == 16


def test_dims_table_maps_other_names(tmp_path: Path) -> None:
    hrv_layout2(tmp_path / "src.zarr")
    ds = xr.open_zarr(tmp_path / "src.zarr", chunks=None).load()
    ds = ds.rename({"y": "northing", "x": "easting", "time": "valid"}).transpose("valid", "easting", "northing")
    write(ds, tmp_path / "grid.zarr", {"data": {"chunks": (10, 15, 18)}})
    srcs = [Src({"name": "grid", "store": "grid.zarr", "variable": "data", "time_resolution_minutes": 5,
                 "interval_start_minutes": 0, "interval_end_minutes": 10, "image_size_pixels_height": 6,
                 "image_size_pixels_width": 4, "dims": {"y": "northing", "x": "easting", "time": "valid"}},
                {"time": "valid", "y": "northing", "x": "easting"})]
    assert check_layout(tmp_path, srcs) == 16


# ----------------------------------------------------------------------------------- errors


def refused(root: Path, srcs: list[Src]) -> str:
    with pytest.raises(gobatch.ConfigError) as e:
        with gobatch.Loader(config(srcs), framework="numpy", data_root=root) as loader:
            next(iter(loader))
    return str(e.value)


def test_unmappable_dims_are_refused(tmp_path: Path) -> None:
    hrv_layout2(tmp_path / "src.zarr")
    ds = xr.open_zarr(tmp_path / "src.zarr", chunks=None).load().rename({"y": "row", "x": "col"})
    write(ds, tmp_path / "bad.zarr", {})
    msg = refused(tmp_path, [Src({"name": "g", "store": "bad.zarr", "variable": "data", "time_resolution_minutes": 5,
                                  "interval_start_minutes": 0, "interval_end_minutes": 5, "image_size_pixels_height": 4,
                                  "image_size_pixels_width": 4}, {})])
    for want in ("source[0].variable", "bad.zarr/data", "(time, row, col)", "y: y, y_geostationary, y_osgb, latitude, lat",
                 "x: x, x_geostationary, x_osgb, longitude, lon", "dims = {"):
        assert want in msg, msg


def test_bad_dims_key_is_refused(tmp_path: Path) -> None:
    satellite_layout1(tmp_path / "sat.zarr", T=24)
    msg = refused(tmp_path, [sat1_src(dims={"northing": "y"})])
    assert "source[0].dims.northing" in msg and "unknown key" in msg and "channel" in msg, msg
    msg = refused(tmp_path, [sat1_src(dims={"y": "northing"})])
    assert "source[0].dims" in msg and 'dims.y = "northing" is not a dimension' in msg and "(time, y, x, variable)" in msg, msg


def test_non_decimal_string_ids_are_refused(tmp_path: Path) -> None:
    satellite_layout1(tmp_path / "sat.zarr", T=48)
    gsp_layout5(tmp_path / "gsp.zarr")
    ds = xr.open_zarr(tmp_path / "gsp.zarr", chunks=None).load()
    ds = ds.assign_coords(gsp_id=[f"GSP{i}" for i in range(1, 22)])
    write(ds, tmp_path / "named.zarr", {})
    pts = Src({"name": "gsp", "store": "named.zarr", "variable": "generation_mw", "role": "points", "nearest_k": 3,
               "time_resolution_minutes": 30, "interval_start_minutes": 0, "interval_end_minutes": 30}, {})
    msg = refused(tmp_path, [sat1_src(), pts])
    assert "source[1].store" in msg and "named.zarr/gsp_id" in msg and '"GSP1", not a decimal integer' in msg, msg


def test_nearest_k_without_positions_is_refused(tmp_path: Path) -> None:
    satellite_layout1(tmp_path / "sat.zarr", T=48)
    gsp_layout5(tmp_path / "gsp.zarr")
    gsp = xr.open_zarr(tmp_path / "gsp.zarr", chunks=None).load()
    ds = xr.Dataset({"generation_mw": (gsp["generation_mw"].dims, gsp["generation_mw"].values)},
                    coords={"datetime_gmt": gsp["datetime_gmt"].values, "gsp_id": gsp["gsp_id"].values})
    write(ds, tmp_path / "nopos.zarr", {})
    pts = Src({"name": "gsp", "store": "nopos.zarr", "variable": "generation_mw", "role": "points", "nearest_k": 3,
               "time_resolution_minutes": 30, "interval_start_minutes": 0, "interval_end_minutes": 30}, {})
    msg = refused(tmp_path, [sat1_src(), pts])
    assert "source[1].nearest_k" in msg and "nopos.zarr/generation_mw has no positions" in msg and '"gsp_id"' in msg, msg
    # Positions only in longitude/latitude meet an anchor in metres only through a projection,
    # which needs the anchor's crs (test_sampler_align.py covers the aligned case).
    ds = ds.assign_coords(longitude=("gsp_id", np.linspace(-3, 1, 21)), latitude=("gsp_id", np.linspace(50, 55, 21)))
    write(ds, tmp_path / "lonlat.zarr", {})
    pts.cfg["store"] = "lonlat.zarr"
    msg = refused(tmp_path, [sat1_src(), pts])
    assert "source[1].store" in msg and "EPSG:4326" in msg and "the anchor (source[0]) has no crs" in msg, msg
