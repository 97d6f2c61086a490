"""Small stores in ocf-data-sampler 1.0.24's layouts, written with xarray, and an ocf YAML over
them that PVNet's LateFusionModel can be sized from (square crops): a geostationary satellite
with its pyresample ``area``, a UKV-like NWP on OSGB with an accumulated channel, and
generation with a capacity per step for three sites. Used by test_pvnet_train.py and by
benchmarks/ocf_bench.py (which scales them up).

Windows of PVNET_CONFIG, relative to t0: generation and the sun -60..120 at 30 minutes (7
steps), satellite -30..0 at 5 minutes (7 steps), UKV -60..120 at 60 minutes (4 steps). With
the defaults below ocf-data-sampler finds 11 t0s (T0 - 30 min .. T0 + 4 h 30 at 30 minutes)
for each of the 3 sites (33 pairs). The NWP dropout of -180 minutes at fraction 1.0 makes one run
cover every window, so ocf-data-sampler can collate its own samples (its collate refuses a mix of
one init time for the window and one per step).
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import numpy as np
import pyproj
import xarray as xr

import ocf_configs as cfg
from geostationary import GEOS, grid_area
from ocf_configs import T0

SITES_LON = np.array([-1.9, -1.2, -1.6])
SITES_LAT = np.array([52.4, 52.9, 52.6])

PVNET_CONFIG = cfg.config(
    "pvnet-train", "PVNet's inputs from small stores written by the tests",
    generation=cfg.generation(),
    nwp={"ukv": cfg.nwp("ukv", ["t", "dswrf", "sr"], cfg.norm(t=(280.0, 10.0), dswrf=(100.0, 50.0, 0.0), diff_sr=(0.0, 2.0)),
                        height=6, width=6, dropout_timedeltas_minutes=[-180], dropout_fraction=1.0, accum_channels=["sr"])},
    satellite=cfg.satellite(["IR_016", "VIS006"], cfg.norm(IR_016=(0.5, 2.0), VIS006=(0.0, 1.5, None, 3.0)), height=8, width=8),
    solar_position=cfg.window(30, -60, 120),
    t0_embedding=[("24h", "cyclic"), ("1y", "cyclic")],
)


def write_satellite(path: Path, hours: float = 8.0, pixels: tuple[int, int] = (60, 50), seed: int = 18) -> None:
    """(variable, time, y_geostationary, x_geostationary) float32 at 5 minutes from T0 - 1 h,
    3 km pixels around the sites, x descending as archives often store it; ``pixels`` is
    (width, height)."""
    rng = np.random.default_rng(seed)
    gx, gy = pyproj.Transformer.from_crs("EPSG:4326", GEOS, always_xy=True).transform(-1.5, 52.6)
    nx, ny = pixels
    x = gx + 3000.0 * (nx // 2 - np.arange(nx))
    y = gy + 3000.0 * (np.arange(ny) - ny // 2)
    times = T0 - np.timedelta64(60, "m") + np.arange(int(hours * 12)) * np.timedelta64(5, "m")
    data = rng.normal(size=(2, len(times), ny, nx)).astype(np.float32)
    sat = xr.Dataset(
        {"data": (("variable", "time", "y_geostationary", "x_geostationary"), data, {"area": grid_area(x, y)})},
        coords={"variable": ["IR_016", "VIS006"], "time": times, "y_geostationary": y, "x_geostationary": x})
    # one chunk per time step and channel: a sample reads a few chunks, as from a real archive
    sat.to_zarr(path, zarr_format=2, consolidated=True,
                encoding={"data": {"chunks": (1, 1, ny, nx)}})


def write_ukv(path: Path, hours: float = 8.0, seed: int = 19) -> None:
    """(init_time, step, variable, x, y) float32 on 2 km OSGB pixels (y descending), runs every
    3 hours from T0 - 6 h (5 runs for 8 hours), steps 0..9 h; ``sr`` is accumulated (increasing
    along the steps)."""
    rng = np.random.default_rng(seed)
    xo, yo = np.arange(300000.0, 560000.0, 2000.0), np.arange(420000.0, 200000.0, -2000.0)
    init = T0 - np.timedelta64(6, "h") + np.arange(int(hours + 7) // 3) * np.timedelta64(3, "h")
    step = np.arange(10) * np.timedelta64(1, "h")
    data = np.empty((len(init), len(step), 3, len(xo), len(yo)), np.float32)
    data[:, :, 0] = rng.normal(280.0, 8.0, (len(init), len(step), len(xo), len(yo)))
    data[:, :, 1] = rng.normal(120.0, 80.0, (len(init), len(step), len(xo), len(yo)))  # some below clip_min 0
    data[:, :, 2] = np.cumsum(rng.uniform(0.0, 3.0, (len(init), len(step), len(xo), len(yo))), axis=1)
    xr.Dataset({"UKV": (("init_time", "step", "variable", "x", "y"), data)},
               coords={"init_time": init, "step": step, "variable": ["t", "dswrf", "sr"], "x": xo, "y": yo},
               ).to_zarr(path, zarr_format=2, consolidated=True,
                         encoding={"UKV": {"chunks": (1, len(step), 3, len(xo), len(yo))}})


def sites(n: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Longitudes and latitudes of ``n`` sites: the three of SITES_LON/SITES_LAT, then more
    drawn (seeded) over the middle of England, all well inside both grids."""
    rng = np.random.default_rng(21)
    extra = max(n - len(SITES_LON), 0)
    lon = np.concatenate([SITES_LON, rng.uniform(-2.5, -0.5, extra)])[:n]
    lat = np.concatenate([SITES_LAT, rng.uniform(52.0, 53.2, extra)])[:n]
    return lon, lat


def write_generation(path: Path, hours: float = 8.0, n_sites: int = 3, seed: int = 20) -> None:
    """generation_mw and capacity_mwp (time_utc, location_id) at 30 minutes from T0 - 3 h (20
    steps for 8 hours) for sites 1..n_sites (no NaN: ocf's complete mode), with
    longitude/latitude per site."""
    rng = np.random.default_rng(seed)
    gtimes = T0 - np.timedelta64(3, "h") + np.arange(int((hours + 2) * 2)) * np.timedelta64(30, "m")
    lon, lat = sites(n_sites)
    capacity = rng.uniform(8, 12, (len(gtimes), n_sites)).astype(np.float32)
    xr.Dataset(
        {"generation_mw": (("time_utc", "location_id"), rng.uniform(0, 5, (len(gtimes), n_sites)).astype(np.float32)),
         "capacity_mwp": (("time_utc", "location_id"), capacity)},
        coords={"time_utc": gtimes, "location_id": np.arange(1, n_sites + 1),
                "longitude": ("location_id", lon), "latitude": ("location_id", lat)},
    ).to_zarr(path, zarr_format=2, consolidated=True)


def write_pvnet_stores(root: Path, hours: float = 8.0, satellite_pixels: tuple[int, int] = (60, 50),
                       n_sites: int = 3) -> Path:
    """sat.zarr, ukv.zarr, gen.zarr over ``hours`` from T0 - 1 h, and pvnet_config.yaml
    (PVNET_CONFIG) in ``root``; returns the YAML's path. Its zarr_paths are relative: run from
    ``root``, as ocf-data-sampler resolves them."""
    write_satellite(root / "sat.zarr", hours, satellite_pixels)
    write_ukv(root / "ukv.zarr", hours)
    write_generation(root / "gen.zarr", hours, n_sites)
    config = root / "pvnet_config.yaml"
    config.write_text(PVNET_CONFIG)
    return config


def split_store(root: Path, name: str, dim: str, cuts: List[int], chunks: Dict[str, int]) -> List[str]:
    """Cuts store name along dim at cuts into stores name-0.zarr, name-1.zarr, ..., each chunked
    by chunks (a dimension left out: one chunk); returns their names, in time order."""
    ds = xr.open_zarr(root / name).load()
    bounds = [0, *cuts, ds.sizes[dim]]
    names = []
    for i, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
        part = ds.isel({dim: slice(lo, hi)})
        for v in part.variables.values():
            v.encoding = {}
        var = next(iter(part.data_vars))
        encoding = {var: {"chunks": tuple(chunks.get(d, part.sizes[d]) for d in part[var].dims)}}
        out = f"{name.removesuffix('.zarr')}-{i}.zarr"
        part.to_zarr(root / out, mode="w", zarr_format=2, consolidated=True, encoding=encoding)
        names.append(out)
    return names
