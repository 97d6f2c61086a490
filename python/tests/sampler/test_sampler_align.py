"""Grids in different projections and site-anchored examples, through the real ``gobatch.Loader``.

The fixtures are written at test time with xarray, as real archives are laid out (in the
sampler's canonical axis order):

- a geostationary-like satellite anchor: ``data (time, channel, y, x)`` int16, ``x`` float32
  descending and ``y`` ascending in metres of a geostationary projection (its pyresample
  ``area`` attribute, YAML, is the only place the projection is written), 2-D ``x_osgb``,
  ``y_osgb`` over ``(y, x)`` on the British National Grid;
- a UKV-like NWP on the British National Grid (int64 metres, ``y`` descending), placed through
  ``anchor_coords = ["x_osgb", "y_osgb"]``;
- a longitude/latitude NWP (``latitude`` descending), placed through ``crs = "EPSG:4326"``;
- PV sites with ``longitude``/``latitude`` positions, some near the grid's edge or outside it.

The reference is computed here with xarray and pyproj and nothing of the sampler: each site's
pixel is pyproj's (site to geostationary metres, nearest coordinate per axis, ties to the lower
index), each NWP crop starts at the nearest coordinate to the centre's position in its own
coordinates (x_osgb/y_osgb as stored, or pyproj's longitude/latitude of the centre), and the
PV systems are the nearest by geodesic distance (``pyproj.Geod`` on WGS84) from the centre's
longitude/latitude. Every tensor of every example is compared exactly (the stored values are
float32 or int16 without CF packing). A second points store puts systems on a 0.1-degree grid,
where the nearest in degrees and the nearest on the ground differ, and checks the ranking against
both pyproj's geodesic and British National Grid (EPSG:27700) distances.
"""

from __future__ import annotations

import copy
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyproj
import pytest
import xarray as xr

import gobatch
from geostationary import GEOS, area

pytestmark = pytest.mark.timeout(120)

EPOCH = "minutes since 2021-01-01 00:00:00"
H, W = 40, 56  # satellite grid
SAT_STEP = 3000.0  # geostationary metres between pixels
SAT_CHANNELS = ["IR_016", "IR_108", "VIS006"]
N_TIME = 144  # 12 hours of 5-minute steps
HALF = 4  # half the satellite crop
UKV_CROP, LL_CROP, K = 6, 4, 4
T_HIST = 3  # satellite / PV steps before and after t0
NWP_DELAY = np.timedelta64(60, "m")
HOUR = np.timedelta64(60, "m")

Batch = dict[str, np.ndarray]


def geos_to(crs: str) -> Any:
    return pyproj.Transformer.from_crs(GEOS, crs, always_xy=True)


def nearest(coords: np.ndarray, v: float) -> int:
    d = np.abs(coords.astype(np.float64) - v)
    return int(np.nonzero(d == d.min())[0][0])  # a tie keeps the lower index


CLAMPED = [0]  # crops the reference clamped into their grid (the tests check some were)


def crop_start(coords: np.ndarray, v: float, n: int) -> int:
    s = nearest(coords, v) - n // 2
    if not 0 <= s <= len(coords) - n:
        CLAMPED[0] += 1
    return int(np.clip(s, 0, len(coords) - n))


GEOD = pyproj.Geod(ellps="WGS84")


def geodesic(pts: xr.Dataset, lon: float, lat: float) -> np.ndarray:
    """Metres from (lon, lat) to each system of pts on the WGS84 ellipsoid (inf without a position)."""
    plon, plat = pts["longitude"].values, pts["latitude"].values
    d = np.full(len(plon), np.inf)
    ok = np.isfinite(plon) & np.isfinite(plat)
    d[ok] = GEOD.inv(np.full(ok.sum(), lon), np.full(ok.sum(), lat), plon[ok], plat[ok])[2]
    return d


def nearest_systems(d: np.ndarray, k: int, tie_m: float = 0.01) -> np.ndarray | None:
    """The k systems with the least distance d (store indices, ascending); None when the k-th
    and the next are within tie_m metres (the ranking is then a matter of rounding)."""
    order = np.argsort(d, kind="stable")
    if len(d) > k and abs(d[order[k]] - d[order[k - 1]]) < tie_m:
        return None
    return np.sort(order[:k])


# ------------------------------------------------------------------------------ fixtures


@dataclass
class Stores:
    root: Path
    site_lon: np.ndarray
    site_lat: np.ndarray
    site_id: np.ndarray


def write_satellite(root: Path, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    # The grid's centre: a point in England, in geostationary metres.
    gx, gy = pyproj.Transformer.from_crs("EPSG:27700", GEOS, always_xy=True).transform(420000.0, 330000.0)
    x = (gx + SAT_STEP * (W / 2 - np.arange(W))).astype(np.float32)  # descending
    y = (gy + SAT_STEP * (np.arange(H) - H / 2)).astype(np.float32)  # ascending
    xx, yy = np.meshgrid(x.astype(np.float64), y.astype(np.float64))
    ox, oy = geos_to("EPSG:27700").transform(xx, yy)
    time = np.datetime64("2021-03-01T06:00") + np.arange(N_TIME) * np.timedelta64(5, "m")
    data = rng.integers(0, 1000, size=(N_TIME, len(SAT_CHANNELS), H, W), dtype=np.int16)
    ds = xr.Dataset(
        {"data": (("time", "channel", "y", "x"), data, {"area": area(W, H)})},
        coords={"time": time, "channel": SAT_CHANNELS, "y": y, "x": x,
                "x_osgb": (("y", "x"), ox), "y_osgb": (("y", "x"), oy),
                "bad_osgb": (("ys", "xs"), np.zeros((5, 5)))})
    ds.to_zarr(root / "sat.zarr", zarr_format=2, consolidated=True,
               encoding={"time": {"units": EPOCH, "dtype": "int64"}, "data": {"chunks": (12, 3, 20, 28)}})
    return ox, oy


def nwp_times() -> tuple[np.ndarray, np.ndarray]:
    init = np.datetime64("2021-03-01T03:00") + np.arange(6) * np.timedelta64(180, "m")
    step = np.arange(9, dtype=np.int64) * 60  # minutes
    return init, step


def write_ukv(root: Path, rng: np.random.Generator, ox: np.ndarray, oy: np.ndarray) -> None:
    # 2 km, starting 40 km inside the satellite's western edge so that some crops clamp.
    x = np.arange(np.floor(ox.min() / 2000) * 2000 + 40000, ox.max() + 6000, 2000).astype(np.int64)
    y = np.arange(np.ceil(oy.max() / 2000) * 2000 + 4000, oy.min() - 6000, -2000).astype(np.int64)
    init, step = nwp_times()
    data = rng.standard_normal((len(init), len(step), 2, len(y), len(x))).astype(np.float32)
    ds = xr.Dataset({"UKV": (("init_time", "step", "variable", "y", "x"), data)},
                    coords={"init_time": init, "step": ("step", step, {"units": "minutes"}),
                            "variable": ["dswrf", "t"], "y": y, "x": x})
    ds.to_zarr(root / "ukv.zarr", zarr_format=2, consolidated=True,
               encoding={"init_time": {"units": EPOCH, "dtype": "int64"},
                         "UKV": {"chunks": (1, 9, 2, 32, 32)}})


def write_latlon(root: Path, rng: np.random.Generator) -> None:
    lon = np.round(np.arange(-6.0, 3.0, 0.1), 6)
    lat = np.round(np.arange(56.5, 49.5, -0.1), 6)  # descending
    init, step = nwp_times()
    data = rng.standard_normal((len(init), len(step), 3, len(lat), len(lon))).astype(np.float32)
    ds = xr.Dataset({"ECMWF": (("init_time", "step", "variable", "latitude", "longitude"), data)},
                    coords={"init_time": init, "step": ("step", step, {"units": "minutes"}),
                            "variable": ["t2m", "ssrd", "tcc"], "latitude": lat, "longitude": lon})
    ds.to_zarr(root / "ecmwf.zarr", zarr_format=2, consolidated=True,
               encoding={"init_time": {"units": EPOCH, "dtype": "int64"}})


def site_positions(rng: np.random.Generator, sat_x: np.ndarray, sat_y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Longitude/latitude of the sites: most inside, some on the edge rows and columns (their
    crops do not fit), some far outside, one without a position."""
    to_ll = geos_to("EPSG:4326")
    gx, gy = [], []
    for _ in range(30):  # anywhere a crop fits, off the pixel centres
        cy, cx = rng.integers(HALF, H - HALF), rng.integers(HALF, W - HALF)
        gx.append(sat_x[cx] + rng.uniform(-0.4, 0.4) * SAT_STEP)
        gy.append(sat_y[cy] + rng.uniform(-0.4, 0.4) * SAT_STEP)
    for cy, cx in [(1, 20), (H - 2, 30), (20, 2), (15, W - 1), (0, 0)]:  # the crop does not fit
        gx.append(float(sat_x[cx]) + 300.0)
        gy.append(float(sat_y[cy]) - 300.0)
    lon, lat = to_ll.transform(np.array(gx), np.array(gy))
    lon = np.concatenate([lon, [-20.0, 5.5, np.nan]])  # outside the grid, and no position
    lat = np.concatenate([lat, [50.0, 59.0, np.nan]])
    return lon, lat


def write_pv(root: Path, rng: np.random.Generator, lon: np.ndarray, lat: np.ndarray, positions: bool = True,
             name: str = "pv.zarr") -> np.ndarray:
    n = len(lon)
    ids = np.sort(rng.choice(np.arange(1000, 9000), size=n, replace=False)).astype(np.int64)
    order = rng.permutation(n)  # ids ascending is not store order
    ids = ids[order]
    time = np.datetime64("2021-03-01T06:00") + np.arange(N_TIME) * np.timedelta64(5, "m")
    data = rng.uniform(0, 5, size=(N_TIME, n)).astype(np.float32)
    data[rng.random(data.shape) < 0.05] = np.nan
    coords: dict[str, Any] = {"time": time, "location_id": ids}
    if positions:
        coords.update(longitude=("location_id", lon), latitude=("location_id", lat))
    ds = xr.Dataset({"generation": (("time", "location_id"), data)}, coords=coords)
    ds.to_zarr(root / name, zarr_format=2, consolidated=True,
               encoding={"time": {"units": EPOCH, "dtype": "int64"}})
    return ids


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stores]:
    root = tmp_path_factory.mktemp("align")
    rng = np.random.default_rng(8)
    ox, oy = write_satellite(root, rng)
    write_ukv(root, rng, ox, oy)
    write_latlon(root, rng)
    sat = xr.open_zarr(root / "sat.zarr", chunks=None)
    lon, lat = site_positions(rng, sat["x"].values, sat["y"].values)
    ids = write_pv(root, rng, lon, lat)
    write_pv(root, rng, lon, lat, positions=False, name="pv_nopos.zarr")
    glon, glat = np.meshgrid(np.round(np.arange(-4.0, 1.0, 0.1), 6), np.round(np.arange(51.0, 55.0, 0.1), 6))
    write_pv(root, rng, glon.ravel(), glat.ravel(), name="pv_grid.zarr")
    yield Stores(root, lon, lat, ids)
    shutil.rmtree(root, ignore_errors=True)


def config(locations: bool = True, anchor_crs: str | None = None) -> dict[str, Any]:
    sat: dict[str, Any] = {
        "name": "satellite", "kind": "zarr", "store": "sat.zarr", "variable": "data", "anchor": True,
        "time_resolution_minutes": 5, "interval_start_minutes": -15, "interval_end_minutes": 15,
        "image_size_pixels_height": 2 * HALF, "image_size_pixels_width": 2 * HALF,
        "channels": ["VIS006", "IR_108"], "cache_mb": 64}
    if locations:
        sat["locations"] = "pv"
    if anchor_crs is not None:
        sat["crs"] = anchor_crs
    nwp = {"kind": "zarr", "role": "nwp", "min_staleness_minutes": 60, "time_resolution_minutes": 60,
           "interval_start_minutes": -60, "interval_end_minutes": 60}
    return {
        "batch": {"size": 16, "seed": 3},
        "ring": {"slots": 2},
        "source": [
            sat,
            dict(nwp, name="ukv", store="ukv.zarr", variable="UKV", anchor_coords=["x_osgb", "y_osgb"],
                 image_size_pixels_height=UKV_CROP, image_size_pixels_width=UKV_CROP, channels=["t", "dswrf"]),
            dict(nwp, name="ecmwf", store="ecmwf.zarr", variable="ECMWF", crs="EPSG:4326",
                 image_size_pixels_height=LL_CROP, image_size_pixels_width=LL_CROP, channels=["tcc", "t2m"]),
            {"name": "pv", "kind": "zarr", "store": "pv.zarr", "variable": "generation", "role": "points",
             "nearest_k": K, "time_resolution_minutes": 5, "interval_start_minutes": -15,
             "interval_end_minutes": 15},
        ],
    }


# ----------------------------------------------------------------------------- reference


class Reference:
    """What the examples must hold, from xarray and pyproj."""

    def __init__(self, s: Stores) -> None:
        self.sat = xr.open_zarr(s.root / "sat.zarr", chunks=None)
        self.ukv = xr.open_zarr(s.root / "ukv.zarr", chunks=None, decode_timedelta=False)
        self.ll = xr.open_zarr(s.root / "ecmwf.zarr", chunks=None, decode_timedelta=False)
        self.pv = xr.open_zarr(s.root / "pv.zarr", chunks=None)
        self.x = self.sat["x"].values
        self.y = self.sat["y"].values
        self.time = self.sat["time"].values.astype("datetime64[m]")
        self.stores = s

    def site_pixels(self) -> dict[int, tuple[int, int]]:
        """The kept sites: id -> (cy, cx), pyproj's nearest pixel where the crop fits."""
        s = self.stores
        gx, gy = pyproj.Transformer.from_crs("EPSG:4326", GEOS, always_xy=True).transform(s.site_lon, s.site_lat)
        half_x = abs(float(self.x[1]) - float(self.x[0])) / 2
        half_y = abs(float(self.y[1]) - float(self.y[0])) / 2
        kept = {}
        for i, sid in enumerate(s.site_id):
            if not (np.isfinite(gx[i]) and np.isfinite(gy[i])):
                continue
            if not (self.x.min() - half_x <= gx[i] <= self.x.max() + half_x and
                    self.y.min() - half_y <= gy[i] <= self.y.max() + half_y):
                continue
            cy, cx = nearest(self.y, gy[i]), nearest(self.x, gx[i])
            if HALF <= cy < H - HALF and HALF <= cx < W - HALF:
                kept[int(sid)] = (cy, cx)
        return kept

    def pixel(self, x: float, y: float) -> tuple[int, int]:
        cx, cy = np.nonzero(self.x == np.float32(x))[0], np.nonzero(self.y == np.float32(y))[0]
        assert len(cx) == 1 and len(cy) == 1 and float(self.x[cx[0]]) == x and float(self.y[cy[0]]) == y, (x, y)
        return int(cy[0]), int(cx[0])

    def nwp(self, ds: xr.Dataset, var: str, chans: list[str], t0: np.datetime64, ydim: str, xdim: str,
            py: float, px: float, n: int) -> np.ndarray:
        init = ds["init_time"].values.astype("datetime64[m]")
        step = ds["step"].values.astype(np.int64).astype("timedelta64[m]")
        cutoff = t0 - NWP_DELAY
        run = int(np.nonzero(init <= cutoff)[0].max())
        lead = (cutoff - init[run]) // HOUR
        s0 = int(np.nonzero(step == lead * HOUR)[0][0])
        ys, xs = crop_start(ds[ydim].values, py, n), crop_start(ds[xdim].values, px, n)
        return ds[var].isel({"init_time": run, "step": slice(s0, s0 + 3), ydim: slice(ys, ys + n),
                             xdim: slice(xs, xs + n)}).sel(variable=chans).values.astype(np.float32)

    def check(self, b: Batch, i: int, where: str) -> tuple[int, int]:
        """Example i of batch b against the reference; returns its centre pixel."""
        t0 = np.datetime64(int(b["t0"][i]), "s").astype("datetime64[m]")
        ti = int(np.nonzero(self.time == t0)[0][0])
        cy, cx = self.pixel(float(b["x"][i]), float(b["y"][i]))
        assert T_HIST <= ti < N_TIME - T_HIST, where
        assert HALF <= cy < H - HALF and HALF <= cx < W - HALF, where
        sat = self.sat["data"].isel(time=slice(ti - T_HIST, ti + T_HIST + 1), y=slice(cy - HALF, cy + HALF),
                                    x=slice(cx - HALF, cx + HALF)).sel(channel=["VIS006", "IR_108"])
        assert np.array_equal(b["satellite"][i], sat.values.astype(np.float32)), f"satellite, {where}"

        ox, oy = float(self.sat["x_osgb"].values[cy, cx]), float(self.sat["y_osgb"].values[cy, cx])
        want = self.nwp(self.ukv, "UKV", ["t", "dswrf"], t0, "y", "x", oy, ox, UKV_CROP)
        assert np.array_equal(b["ukv"][i], want), f"ukv, {where}"

        lon, lat = geos_to("EPSG:4326").transform(float(self.x[cx]), float(self.y[cy]))
        want = self.nwp(self.ll, "ECMWF", ["tcc", "t2m"], t0, "latitude", "longitude", lat, lon, LL_CROP)
        assert np.array_equal(b["ecmwf"][i], want), f"ecmwf, {where}"

        near = nearest_systems(geodesic(self.pv, lon, lat), K)
        assert near is not None, f"two systems at the k-th distance, {where}"
        ids = self.pv["location_id"].values
        near = near[np.argsort(ids[near], kind="stable")]
        assert np.array_equal(b["pv_system"][i], ids[near]), f"pv_system, {where}"
        pv = self.pv["generation"].isel(time=slice(ti - T_HIST, ti + T_HIST + 1), location_id=near)
        assert np.array_equal(b["pv"][i], pv.values.astype(np.float32), equal_nan=True), f"pv, {where}"
        return cy, cx


@pytest.fixture(scope="module")
def ref(stores: Stores) -> Reference:
    return Reference(stores)


def take(cfg: dict[str, Any], root: Path, n: int, **kw: Any) -> tuple[list[Batch], str]:
    """The first n batches, and shmloader's log (-v)."""
    out: list[Batch] = []
    with gobatch.Loader(cfg, framework="numpy", data_root=root, extra_args=("-v",), **kw) as loader:
        for batch in loader:
            out.append({k: np.array(v) for k, v in batch.items()})
            if len(out) == n:
                break
        log = loader._stderr
        assert log is not None
        log.seek(0)
        text = log.read().decode(errors="replace")
    assert len(out) == n
    return out, text


def ready_line(log: str) -> dict[str, Any]:
    for line in log.splitlines():
        if '"sources ready"' in line:
            return dict(json.loads(line))
    raise AssertionError(f"no 'sources ready' line in shmloader's log:\n{log}")


# --------------------------------------------------------------------------------- tests


def test_site_anchored_examples_equal_reference(stores: Stores, ref: Reference) -> None:
    kept = ref.site_pixels()
    n_sites = len(stores.site_id)
    assert 20 <= len(kept) < n_sites - 5, "the fixture keeps most sites and drops some"
    batches, log = take(config(), stores.root, 6)
    seen: set[int] = set()
    for k, b in enumerate(batches):
        assert b["location_id"].shape == (16,) and b["location_id"].dtype == np.int64
        for i in range(16):
            sid = int(b["location_id"][i])
            where = f"batch {k} example {i} (location {sid}, t0 {int(b['t0'][i])})"
            assert sid in kept, f"location {sid} is not a site whose crop fits, {where}"
            cy, cx = ref.check(b, i, where)
            assert (cy, cx) == kept[sid], f"centre {(cy, cx)} is not pyproj's nearest pixel {kept[sid]}, {where}"
            seen.add(sid)
    assert len(seen) >= 20, f"{len(seen)} of {len(kept)} sites drawn in 96 examples"
    line = ready_line(log)
    assert line["locations"] == len(kept), line
    assert line["locations_dropped"] == n_sites - len(kept), line


def test_site_stream_is_the_same_with_other_readers(stores: Stores) -> None:
    a, _ = take(config(), stores.root, 3, readers=1)
    b, _ = take(config(), stores.root, 3, readers=2)
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for key in x:
            assert np.array_equal(x[key], y[key], equal_nan=x[key].dtype.kind == "f"), key


@pytest.mark.parametrize("anchor_crs", [None, GEOS.replace(" +type=crs", "")],
                         ids=["area-attribute", "crs-proj-string"])
def test_random_pixels_are_aligned_across_projections(stores: Stores, ref: Reference, anchor_crs: str | None) -> None:
    batches, log = take(config(locations=False, anchor_crs=anchor_crs), stores.root, 4)
    assert "location_id" not in batches[0]
    CLAMPED[0] = 0
    columns = set()
    for k, b in enumerate(batches):
        for i in range(16):
            cy, cx = ref.check(b, i, f"batch {k} example {i}")
            columns.add(cx)
    assert len(columns) > 10, "centres drawn over the grid"
    assert CLAMPED[0] > 0, "no crop was clamped into its grid: the fixture misses the edge"
    assert "locations" not in ready_line(log)


def test_nearest_k_in_lon_lat_ranks_by_distance_on_the_ground(stores: Stores, ref: Reference) -> None:
    """Systems on a 0.1-degree grid (about 6.7 km east-west, 11.1 km north-south at 53N): the k
    nearest are pyproj's geodesic nearest, and its British National Grid nearest, not the
    nearest in degrees."""
    cfg = copy.deepcopy(config(locations=False))
    k = 6
    cfg["source"][3].update(store="pv_grid.zarr", nearest_k=k)
    batches, _ = take(cfg, stores.root, 4)
    grid = xr.open_zarr(stores.root / "pv_grid.zarr", chunks=None)
    ids = grid["location_id"].values
    plon, plat = grid["longitude"].values, grid["latitude"].values
    to_osgb = pyproj.Transformer.from_crs("EPSG:4326", "EPSG:27700", always_xy=True)
    px, py = to_osgb.transform(plon, plat)
    checked = by_degrees_differs = 0
    for n, b in enumerate(batches):
        for i in range(len(b["t0"])):
            where = f"batch {n} example {i}"
            lon, lat = geos_to("EPSG:4326").transform(float(b["x"][i]), float(b["y"][i]))
            near = nearest_systems(geodesic(grid, lon, lat), k)
            cx, cy = to_osgb.transform(lon, lat)
            d_osgb = np.hypot(px - cx, py - cy)
            near_osgb = nearest_systems(d_osgb, k, tie_m=float(np.sort(d_osgb)[k]) * 1e-3)
            if near is None or near_osgb is None:
                continue  # the k-th and the next are as far: either may be chosen
            assert np.array_equal(near, near_osgb), f"pyproj's geodesic and OSGB rankings differ, {where}"
            want = ids[near][np.argsort(ids[near], kind="stable")]
            assert np.array_equal(b["pv_system"][i], want), \
                f"pv_system {b['pv_system'][i]}, the geodesic nearest are {want}, {where}"
            t0 = np.datetime64(int(b["t0"][i]), "s").astype("datetime64[m]")
            ti = int(np.nonzero(ref.time == t0)[0][0])
            pos = {int(v): j for j, v in enumerate(ids)}
            cols = [pos[int(v)] for v in want]
            pv = grid["generation"].isel(time=slice(ti - T_HIST, ti + T_HIST + 1), location_id=cols)
            assert np.array_equal(b["pv"][i], pv.values.astype(np.float32), equal_nan=True), f"pv, {where}"
            checked += 1
            by_deg = np.sort(np.argsort(np.hypot(plon - lon, plat - lat), kind="stable")[:k])
            by_degrees_differs += not np.array_equal(by_deg, near)
    assert checked >= 56, f"only {checked} of 64 examples without a tie at the k-th system"
    assert by_degrees_differs >= checked // 4, \
        f"the nearest in degrees differ in only {by_degrees_differs} of {checked} examples: the test does not tell them apart"


BAD = [
    (lambda c: c["source"][1].update(anchor_coords=["x_osgb", "no_such"]), ["source[1].anchor_coords", "no_such"]),
    (lambda c: c["source"][1].update(anchor_coords=["bad_osgb", "y_osgb"]),
     ["source[1].anchor_coords", "bad_osgb", "does not match the anchor's grid"]),
    (lambda c: c["source"][1].update(anchor_coords=["x_osgb"]), ["source[1].anchor_coords", "two arrays"]),
    (lambda c: c["source"][2].update(crs="EPSG:999999"), ["source[2].crs", "EPSG:999999", "unknown coordinate"]),
    (lambda c: c["source"][0].update(crs="+proj=nonsense"), ["source[0].crs", "nonsense"]),
    (lambda c: c["source"][0].update(locations="ukv"), ["source[0].locations", "ukv", "points source"]),
    (lambda c: c["source"][0].update(locations="no_such"), ["source[0].locations", "no_such", "pv"]),
    (lambda c: c["source"][3].update(store="pv_nopos.zarr"), ["source[3].nearest_k", "no positions"]),
    (lambda c: c["source"][3].update(locations="pv"), ["locations"]),
]


@pytest.mark.parametrize("edit, words", BAD)
def test_bad_alignment_config_names_the_key(stores: Stores, edit: Any, words: list[str]) -> None:
    cfg = copy.deepcopy(config())
    edit(cfg)
    with pytest.raises(gobatch.ConfigError) as e:
        with gobatch.Loader(cfg, framework="numpy", data_root=stores.root) as loader:
            next(iter(loader))
    for w in words:
        assert w in str(e.value), str(e.value)
