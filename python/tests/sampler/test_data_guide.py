"""docs/DATA.md ("Your own data"): every configuration the guide publishes plans and loads.

Each ```toml block of the guide is preceded by an HTML comment ``<!-- fixture: NAME -->`` that
names the stores it reads. For each block this test writes small stores in exactly that layout
(xarray and zarr-python, at test time), writes the block to a file as a reader would, and runs
``gobatch.plan`` on it; for every block but the nowcast-ref preset (whose cache_mb is sized for
the full dataset) it also takes two batches through ``gobatch.Loader`` and checks each tensor's
name, shape and dtype against what the block asks for, worked out here from the block's keys.
The conversion recipes (```python blocks preceded by ``<!-- run: NAME -->``) are run too, on
inputs written here, and what they write is planned with the guide's configuration.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any, Callable

import numcodecs
import numpy as np
import pandas as pd
import pyproj
import pytest
import xarray as xr

import gobatch
from test_layouts import write
from geostationary import GEOS, area

REPO = Path(__file__).resolve().parents[3]
GUIDE = REPO / "docs" / "DATA.md"
PRESET = REPO / "presets" / "nowcast.toml"

pytestmark = pytest.mark.timeout(180)

MIN = np.timedelta64(1, "m")
HOUR = 60 * MIN
DAY0 = np.datetime64("2021-06-01T00:00", "ns")
N_TIME = 288  # one day of 5-minute steps
H, W = 40, 48  # satellite pixels (3 km)
SAT_STEP = 3000.0
CHANNELS = ["IR_016", "IR_039", "IR_108", "VIS006", "VIS008", "WV_062"]
RNG = np.random.default_rng(88)

# The satellite's pyresample area attribute as satpy writes it (only the projection is read).
AREA = area(615, 298, name="msg_seviri_rss_3km")  # the real archive's 3 km grid


def to(src: str, dst: str) -> Callable[..., Any]:
    return pyproj.Transformer.from_crs(src, dst, always_xy=True).transform


# ------------------------------------------------------------------------------ the stores


def geos_grid(step: float, h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    """Geostationary x (descending) and y (ascending) around a point in England, float32."""
    gx, gy = to("EPSG:27700", GEOS)(420000.0, 330000.0)
    x = (gx + step * (w / 2 - np.arange(w))).astype(np.float32)
    y = (gy + step * (np.arange(h) - h / 2)).astype(np.float32)
    return x, y


def osgb_of(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    xx, yy = np.meshgrid(x.astype(np.float64), y.astype(np.float64))
    return to(GEOS, "EPSG:27700")(xx, yy)


def satellite(path: Path) -> None:
    """Layout 1: data (time, y, x, variable) int16, bz2, 5 min, x descending, y ascending float32
    geostationary metres, x_osgb/y_osgb over (y, x), channel names in variable, an area
    attribute and no CF attributes."""
    x, y = geos_grid(SAT_STEP, H, W)
    ox, oy = osgb_of(x, y)
    data = RNG.integers(0, 1023, size=(N_TIME, H, W, len(CHANNELS)), dtype=np.int16)
    ds = xr.Dataset({"data": (("time", "y", "x", "variable"), data, {"area": AREA})},
                    coords={"time": DAY0 + np.arange(N_TIME) * 5 * MIN, "y": y, "x": x, "variable": CHANNELS,
                            "x_osgb": (("y", "x"), ox.astype(np.float32)), "y_osgb": (("y", "x"), oy.astype(np.float32))})
    write(ds, path, {"data": {"compressors": numcodecs.BZ2(level=5), "chunks": (12, H, W, 1)}})


def hrv(path: Path) -> None:
    """Layout 2: data (time, y, x) int16, 1 km, no channel axis, in the satellite's projection."""
    x, y = geos_grid(1000.0, 72, 96)
    data = RNG.integers(0, 1023, size=(N_TIME, len(y), len(x)), dtype=np.int16)
    ds = xr.Dataset({"data": (("time", "y", "x"), data, {"area": AREA})},
                    coords={"time": DAY0 + np.arange(N_TIME) * 5 * MIN, "y": y, "x": x})
    write(ds, path, {"data": {"chunks": (12, 72, 96)}})


def osgb_cover(spacing: int) -> tuple[np.ndarray, np.ndarray]:
    """Int64 BNG metres (x ascending, y descending) covering the satellite grid and a margin."""
    ox, oy = osgb_of(*geos_grid(SAT_STEP, H, W))
    x = np.arange(np.floor(ox.min() / spacing) * spacing - 2 * spacing, ox.max() + 3 * spacing, spacing)
    y = np.arange(np.ceil(oy.max() / spacing) * spacing + 2 * spacing, oy.min() - 3 * spacing, -spacing)
    return x.astype(np.int64), y.astype(np.int64)


UKV_VARS = ["dswrf", "lcc", "mcc", "hcc", "t", "prate"]


def runs() -> tuple[np.ndarray, np.ndarray]:
    """Runs every 3 hours from 21:00 the day before (the 12:00 run missing), 0 .. 9 h steps."""
    init = DAY0 - 3 * HOUR + np.arange(9) * 3 * HOUR
    return np.delete(init, 5), np.arange(10)


def ukv(path: Path) -> None:
    """Layout 3: UKV (variable, init_time, step, y, x) float32, Blosc zstd, step float64 hours."""
    x, y = osgb_cover(4000)
    init, step = runs()
    data = RNG.standard_normal((len(UKV_VARS), len(init), len(step), len(y), len(x))).astype(np.float32)
    ds = xr.Dataset({"UKV": (("variable", "init_time", "step", "y", "x"), data)},
                    coords={"variable": UKV_VARS, "init_time": init,
                            "step": ("step", step.astype(np.float64), {"units": "hours"}), "y": y, "x": x})
    blosc = numcodecs.Blosc(cname="zstd", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)
    write(ds, path, {"UKV": {"compressors": blosc, "chunks": (len(UKV_VARS), 1, 10, len(y), len(x))}})


def sites_lonlat(n: int, margin: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Longitude/latitude of n sites over the satellite grid; the first `margin` near its edge
    (so that a 24-pixel crop does not fit around them)."""
    x, y = geos_grid(SAT_STEP, H, W)
    cy = RNG.integers(12, H - 12, n)
    cx = RNG.integers(12, W - 12, n)
    cy[:margin], cx[:margin] = 2, 3
    gx = x[cx].astype(np.float64) + RNG.uniform(-0.4, 0.4, n) * SAT_STEP
    gy = y[cy].astype(np.float64) + RNG.uniform(-0.4, 0.4, n) * SAT_STEP
    return to(GEOS, "EPSG:4326")(gx, gy)


def gsp(path: Path, positions: bool = True) -> xr.Dataset:
    """Layout 5: generation_mw (datetime_gmt, gsp_id) float64, ids '1'..'21', 30 min, with
    longitude/latitude over gsp_id (merged from a site list, as the guide shows)."""
    n = 21
    t = DAY0 + np.arange(48) * 30 * MIN
    ds = xr.Dataset({"generation_mw": (("datetime_gmt", "gsp_id"), RNG.uniform(0, 300, (len(t), n)))},
                    coords={"datetime_gmt": t, "gsp_id": [str(i) for i in range(1, n + 1)]})
    if positions:
        lon, lat = sites_lonlat(n)
        ds = ds.assign_coords(longitude=("gsp_id", lon), latitude=("gsp_id", lat))
    write(ds, path, {"generation_mw": {"chunks": (48, n)}})
    return ds


def ocf(root: Path) -> None:
    """Layout 4, ocf-data-sampler's: satellite (time_utc, channel, x_geostationary,
    y_geostationary) with the area attribute; UKV (init_time, step, variable, x, y) with step
    timedelta64; ECMWF (init_time, step, variable, latitude, longitude); generation_mw
    (time_utc, location_id) with longitude/latitude over location_id."""
    x, y = geos_grid(SAT_STEP, H, W)
    x = x[::-1].copy()  # ascending here
    times = DAY0 + np.arange(N_TIME) * 5 * MIN
    sat = RNG.uniform(0, 1, size=(N_TIME, len(CHANNELS), W, H)).astype(np.float32)
    xr.Dataset({"data": (("time_utc", "channel", "x_geostationary", "y_geostationary"), sat, {"area": AREA})},
               coords={"time_utc": times, "channel": CHANNELS, "x_geostationary": x, "y_geostationary": y}).pipe(
        write, root / "satellite.zarr", {"data": {"chunks": (12, len(CHANNELS), W, H)}})
    init, step = runs()
    bx, by = osgb_cover(4000)
    nwp = RNG.standard_normal((len(init), len(step), len(UKV_VARS), len(bx), len(by))).astype(np.float32)
    xr.Dataset({"UKV": (("init_time", "step", "variable", "x", "y"), nwp)},
               coords={"init_time": init, "step": step * HOUR, "variable": UKV_VARS, "x": bx, "y": by}).pipe(
        write, root / "ukv.zarr", {"UKV": {"chunks": (1, 10, len(UKV_VARS), len(bx), len(by))}})
    lon = np.round(np.arange(-5.0, 1.0, 0.1), 6)
    lat = np.round(np.arange(55.5, 50.5, -0.1), 6)  # descending
    init6 = DAY0 - 6 * HOUR + np.arange(5) * 6 * HOUR
    ec = RNG.standard_normal((len(init6), 13, 4, len(lat), len(lon))).astype(np.float32)
    xr.Dataset({"ECMWF_UK": (("init_time", "step", "variable", "latitude", "longitude"), ec)},
               coords={"init_time": init6, "step": np.arange(13) * HOUR, "variable": ["t2m", "tcc", "ssrd", "u10"],
                       "latitude": lat, "longitude": lon}).pipe(
        write, root / "ecmwf.zarr", {"ECMWF_UK": {"chunks": (1, 13, 4, len(lat), len(lon))}})
    n = 40
    slon, slat = sites_lonlat(n, margin=3)
    gen = RNG.uniform(0, 5, size=(N_TIME, n))
    gen[RNG.random(gen.shape) < 0.02] = np.nan
    xr.Dataset({"generation_mw": (("time_utc", "location_id"), gen),
                "capacity_mwp": ("location_id", RNG.uniform(5, 10, n))},
               coords={"time_utc": times, "location_id": np.arange(n, dtype=np.int64) * 3 + 1,
                       "longitude": ("location_id", slon), "latitude": ("location_id", slat)}).pipe(
        write, root / "generation.zarr", {"generation_mw": {"chunks": (N_TIME, n)}})


def nowcast(root: Path) -> None:
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import gen_nowcast
    finally:
        sys.path.remove(str(REPO / "tools"))
    gen_nowcast.generate(root, days=0.5, pixels=64, seed=3, quiet=True)


PV_IDS = np.array([2607, 1301, 7771, 5003, 4117, 9020, 3388, 6254, 1879, 8432, 2290, 7015], dtype=np.int64)
PV_NO_POSITION = 3388  # left out of the CSV


def pv_netcdf() -> xr.Dataset:
    """What xr.open_dataset("pv.nc") gives for a PV NetCDF: power_kw (datetime, ss_id) float64
    with HDF5 encodings, and another variable."""
    t = DAY0 + np.arange(N_TIME) * 5 * MIN
    data = RNG.uniform(0, 4, (N_TIME, len(PV_IDS)))
    data[RNG.random(data.shape) < 0.03] = np.nan
    ds = xr.Dataset({"power_kw": (("datetime", "ss_id"), data), "quality": (("datetime", "ss_id"), np.ones(data.shape, np.int8))},
                    coords={"datetime": t, "ss_id": PV_IDS})
    ds["power_kw"].encoding.update(zlib=True, complevel=4, chunksizes=(96, 4), contiguous=False, source="pv.nc")
    return ds


def converted(root: Path) -> None:
    """Layout 1's satellite, and the inputs of the guide's conversion recipes, which are then
    run in root (xr.open_dataset gives pv_netcdf(): no NetCDF engine is installed here)."""
    satellite(root / "satellite.zarr")
    lon, lat = sites_lonlat(len(PV_IDS))
    keep = PV_IDS != PV_NO_POSITION
    order = RNG.permutation(int(keep.sum()))
    pd.DataFrame({"ss_id": PV_IDS[keep][order], "name": [f"site {i}" for i in order],
                  "longitude": lon[keep][order], "latitude": lat[keep][order]}).to_csv(root / "pv_systems.csv", index=False)
    g = gsp(root / "gsp_raw.zarr", positions=False)
    glon, glat = sites_lonlat(g.sizes["gsp_id"])
    pd.DataFrame({"gsp_id": g["gsp_id"].values, "longitude": glon, "latitude": glat}).iloc[::-1].to_csv(
        root / "gsp_locations.csv", index=False)
    recipes = dict(blocks("python", "run", required=False))
    assert set(recipes) == {"pv-netcdf", "gsp-csv"}, sorted(recipes)
    nc = pv_netcdf()
    real_open, cwd = xr.open_dataset, Path.cwd()
    xr.open_dataset = lambda path, *a, **k: nc if path == "pv.nc" else real_open(path, *a, **k)
    try:
        os.chdir(root)
        for name in ("pv-netcdf", "gsp-csv"):
            exec(compile(recipes[name], f"DATA.md:{name}", "exec"), {})
    finally:
        xr.open_dataset = real_open
        os.chdir(cwd)
    pv = xr.open_zarr(root / "pv.zarr", chunks=None)
    assert pv["power_kw"].dims == ("time", "ss_id") and pv["power_kw"].dtype == np.float32
    assert np.isnan(pv["longitude"].sel(ss_id=PV_NO_POSITION)) and np.isfinite(pv["longitude"]).sum() == len(PV_IDS) - 1
    g2 = xr.open_zarr(root / "gsp.zarr", chunks=None)
    assert np.array_equal(g2["longitude"].values, glon) and g2["gsp_id"].values[0] == "1"


FIXTURES: dict[str, Callable[[Path], None]] = {
    "satellite-ukv": lambda r: (satellite(r / "satellite.zarr"), ukv(r / "ukv.zarr")),
    "hrv-satellite": lambda r: (hrv(r / "hrv.zarr"), satellite(r / "satellite.zarr")),
    "satellite-gsp": lambda r: (satellite(r / "satellite.zarr"), gsp(r / "gsp.zarr")),
    "ocf": ocf,
    "nowcast-ref": nowcast,
    "converted": converted,
}


# ------------------------------------------------------------------------------ the guide


def blocks(lang: str, tag: str, required: bool = True) -> list[tuple[str, str]]:
    """(name, text) of the ```lang blocks of the guide that follow a <!-- tag: name --> line;
    with required, every ```lang block must."""
    text = GUIDE.read_text()
    out = []
    for m in re.finditer(r"^```" + lang + r"\n(.*?)^```", text, re.S | re.M):
        before = text[: m.start()].rstrip().splitlines()[-1]
        tm = re.fullmatch(r"<!-- " + tag + r": (\S+) -->", before.strip())
        if not tm and not required:
            continue
        assert tm, f"the ```{lang} block at offset {m.start()} of {GUIDE} has no <!-- {tag}: NAME --> line before it"
        out.append((tm.group(1), m.group(1)))
    return out


TOML = blocks("toml", "fixture")


def expected_tensors(cfg: dict[str, Any]) -> dict[str, tuple[list[int], str]]:
    """Every tensor of a batch, from the configuration's keys alone."""
    b = cfg["batch"]["size"]
    out: dict[str, tuple[list[int], str]] = {}
    ids: dict[str, tuple[list[int], str]] = {}
    site = False
    for s in cfg["source"]:
        steps = (s["interval_end_minutes"] - s["interval_start_minutes"]) // s["time_resolution_minutes"] + 1
        role = s.get("role", "grid")
        if role == "points":
            out[s["name"]] = ([b, steps, s["nearest_k"]], "float32")
            ids[s.get("ids_tensor", s["name"] + "_system")] = ([b, s["nearest_k"]], "int64")
        else:
            c = len(s.get("channels", [None]))
            out[s["name"]] = ([b, steps, c, s["image_size_pixels_height"], s["image_size_pixels_width"]], "float32")
        site = site or bool(s.get("locations"))
    out.update(t0=([b], "int64"), x=([b], "float64"), y=([b], "float64"), **ids)
    if site:
        out["location_id"] = ([b], "int64")
    return out


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """The data root of a fixture, written once per module."""
    base = tmp_path_factory.mktemp("guide")
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            assert name in FIXTURES, f"the guide names fixture {name!r}; known: {sorted(FIXTURES)}"
            made[name] = base / name
            made[name].mkdir()
            FIXTURES[name](made[name])
        return made[name]

    yield get
    shutil.rmtree(base, ignore_errors=True)


def test_the_guide_has_every_layout() -> None:
    names = [n for n, _ in TOML]
    for want in FIXTURES:
        assert want in names, f"no configuration in the guide reads fixture {want}"
    assert len(TOML) >= 8, names


@pytest.mark.parametrize("i", range(len(TOML)), ids=[f"{i}-{n}" for i, (n, _) in enumerate(TOML)])
def test_config_plans_and_loads(i: int, stores: Callable[[str], Path], tmp_path: Path) -> None:
    name, text = TOML[i]
    root = stores(name)
    path = tmp_path / "config.toml"
    path.write_text(text)
    cfg = tomllib.loads(text)
    rep = gobatch.plan(path, data_root=str(root))
    want = expected_tensors(cfg)
    assert {t["name"]: (t["shape"], t["dtype"]) for t in rep["tensors"]} == want
    assert rep["t0_candidates"] > 0
    if cfg["batch"].get("order") == "epochs":
        assert rep["epoch_batches"] > 0
        # The validation split the guide's text gives plans too, with disjoint candidates.
        val = ('t0_start = "2021-06-01T16:00:00Z"', 't0_end = "2021-06-01T23:55:00Z"')
        assert all(f"`{v}`" in GUIDE.read_text() for v in val)
        vtext = re.sub(r"^t0_start = .*$", val[0], re.sub(r"^t0_end = .*$", val[1], text, flags=re.M), flags=re.M)
        (tmp_path / "val.toml").write_text(vtext)
        vrep = gobatch.plan(tmp_path / "val.toml", data_root=str(root))
        assert vrep["epoch_batches"] > 0 and vrep["samples"] + rep["samples"] <= rep["anchor_times"]
    if name == "nowcast-ref":  # the preset as the guide shows it, key for key
        assert cfg == tomllib.loads(PRESET.read_text())
        return
    with gobatch.Loader(path, framework="numpy", data_root=root) as loader:
        if cfg["batch"].get("order") == "epochs":
            assert len(loader) == rep["epoch_batches"]
        n = 0
        for batch in loader:
            got = {k: (list(v.shape), str(v.dtype)) for k, v in batch.items()}
            assert got == want
            b = {k: np.array(v) for k, v in batch.items()}
            assert np.all(np.isfinite(b["x"])) and np.all(np.isfinite(b["y"]))
            check_rules(cfg, root, b)
            if name == "converted":  # the system the CSV lacks has no position: never picked
                assert PV_NO_POSITION not in b["pv_system"]
            n += 1
            if n == 2:
                break
    assert n == 2


def check_rules(cfg: dict[str, Any], root: Path, b: dict[str, np.ndarray]) -> None:
    """What the guide says of the drawn examples, checked on them (the stores read with xarray)."""
    t0 = b["t0"].astype("datetime64[s]")
    lo, hi = cfg["batch"].get("t0_start"), cfg["batch"].get("t0_end")
    if lo is not None:
        assert np.all(t0 >= np.datetime64(lo.rstrip("Z"), "s")) and np.all(t0 <= np.datetime64(hi.rstrip("Z"), "s"))
    for s in cfg["source"]:
        da = xr.open_zarr(root / s["store"], chunks=None)[s["variable"]]
        role = s.get("role", "grid")
        if role == "points" and s["time_resolution_minutes"] == 30:  # only t0s on the hour and half hour
            assert np.all(b["t0"] % 1800 == 0), b["t0"]
        if role == "nwp":  # a run within the staleness limits exists for every t0
            init = da["init_time"].values.astype("datetime64[s]")
            for t in t0:
                ok = init <= t - np.timedelta64(s.get("min_staleness_minutes", 0), "m")
                if s.get("max_staleness_minutes", 0) > 0:
                    ok &= t - init <= np.timedelta64(s["max_staleness_minutes"], "m")
                assert ok.any(), (s["name"], t)
        if s.get("locations"):
            pts = next(p for p in cfg["source"] if p["name"] == s["locations"])
            ids = xr.open_zarr(root / pts["store"], chunks=None)[pts["variable"]]["location_id"].values
            assert set(b["location_id"].tolist()) <= set(ids.tolist())


def test_fixtures_are_the_layouts_the_guide_describes(stores: Callable[[str], Path]) -> None:
    """Guards the fixtures (not the sampler): each store is laid out as the guide says."""
    def da(fixture: str, store: str, var: str) -> xr.DataArray:
        return xr.open_zarr(stores(fixture) / store, chunks=None, decode_timedelta=False)[var]

    sat = da("satellite-ukv", "satellite.zarr", "data")
    assert sat.dims == ("time", "y", "x", "variable") and sat.dtype == np.int16
    assert np.all(np.diff(sat["x"].values) < 0) and np.all(np.diff(sat["y"].values) > 0) and sat["x"].dtype == np.float32
    assert sat["x_osgb"].dims == ("y", "x") and "area" in sat.attrs and sat.encoding["compressors"][0].codec_id == "bz2"
    ukv = da("satellite-ukv", "ukv.zarr", "UKV")
    assert ukv.dims == ("variable", "init_time", "step", "y", "x") and ukv.dtype == np.float32
    assert ukv["step"].dtype == np.float64 and ukv["step"].attrs["units"] == "hours"
    assert ukv["y"].dtype == np.int64 and np.all(np.diff(ukv["y"].values) < 0) and np.all(np.diff(ukv["x"].values) > 0)
    assert np.all(np.diff(ukv["init_time"].values) >= np.timedelta64(3, "h")), "3-hourly runs, one missing"
    assert da("hrv-satellite", "hrv.zarr", "data").dims == ("time", "y", "x")
    g = da("satellite-gsp", "gsp.zarr", "generation_mw")
    assert g.dims == ("datetime_gmt", "gsp_id") and list(g["gsp_id"].values[:3]) == ["1", "2", "3"]
    assert np.all(np.diff(g["datetime_gmt"].values) == np.timedelta64(30, "m")) and g["longitude"].dims == ("gsp_id",)
    assert da("ocf", "satellite.zarr", "data").dims == ("time_utc", "channel", "x_geostationary", "y_geostationary")
    o = xr.open_zarr(stores("ocf") / "ukv.zarr", chunks=None)["UKV"]
    assert o.dims == ("init_time", "step", "variable", "x", "y") and np.issubdtype(o["step"].dtype, np.timedelta64)
    assert da("ocf", "ecmwf.zarr", "ECMWF_UK").dims == ("init_time", "step", "variable", "latitude", "longitude")
    gen = da("ocf", "generation.zarr", "generation_mw")
    assert gen.dims == ("time_utc", "location_id") and gen["longitude"].dims == gen["latitude"].dims == ("location_id",)
