"""An OCF-shaped archive for issue 28's benchmarks: the PVNet example configuration's sources
with the types, chunking and compression of OCF's public stores (../shared/notes/real-data.md,
ocf-runs.md), written with xarray, and the ocf-data-sampler YAML over them.

- satellite: ``data (variable, time, y_geostationary, x_geostationary)`` int16, the 11 SEVIRI
  channels at 5 minutes, 298 x 616 pixels of 3 km (the UK RSS crop's size), chunks (1 channel,
  7 times, 149 y, 308 x) as the public stores chunk them, Blosc zstd with byte shuffle, and the
  pyresample ``area``; one store per half of the time range (``sat-0.zarr``, ``sat-1.zarr``), as
  OCF's data paths list a store per year;
- UKV: ``UKV (init_time, step, variable, y, x)`` float32, 17 channels on 2 km OSGB pixels
  (352 x 274), runs every 3 hours, hourly steps 0..9 h, a chunk per run and step;
- ECMWF: ``ECMWF (init_time, step, variable, latitude, longitude)`` float32, 17 channels on a
  0.1 degree grid over the UK (120 x 140), runs every 6 hours, hourly steps 0..12 h;
- generation: ``generation_mw`` and ``capacity_mwp (time_utc, location_id)`` at 30 minutes for
  ``sites`` sites in the middle of England, with their longitude and latitude.

Values are smooth moving fields with noise (quantised for the satellite, as SEVIRI's 10-bit
counts), so that they compress about as real fields do rather than as random numbers; each
time chunk is written as it is made (xarray region writes), so the writer's memory stays small.
The YAML (``pvnet_archive.yaml``): satellite 24 x 24 pixels -30..0 minutes, UKV and ECMWF
24 x 24 and 12 x 12 pixels -60..120 minutes at 60 (one run covers the window, by a certain NWP
dropout, so that ocf-data-sampler can collate its own samples), generation and the sun -60..120
minutes at 30, a t0 embedding.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Dict, List

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python" / "tests"))
import ocf_configs as cfg  # noqa: E402
from geostationary import GEOS, grid_area  # noqa: E402
from ocf_configs import T0  # noqa: E402

SAT_CHANNELS = ["IR_016", "IR_039", "IR_087", "IR_097", "IR_108", "IR_120", "IR_134", "VIS006", "VIS008",
                "WV_062", "WV_073"]
UKV_CHANNELS = ["cdcb", "lcc", "mcc", "hcc", "sde", "hcct", "dswrf", "dlwrf", "h", "t", "r", "dpt", "vis", "si10",
                "wdir10", "prmsl", "prate"]
ECMWF_CHANNELS = ["dlwrf", "dswrf", "hcc", "lcc", "mcc", "prate", "sd", "t2m", "tcc", "u10", "u100", "u200", "v10",
                  "v100", "v200", "duvrs", "lcc_low"]
SAT_SHAPE = (298, 616)  # (y, x)
SAT_CHUNKS = (1, 7, 149, 308)  # (variable, time, y, x)


def _compressor() -> object:
    from numcodecs import Blosc

    return Blosc(cname="zstd", clevel=5, shuffle=Blosc.SHUFFLE)


def _field(rng: np.random.Generator, t: np.ndarray, nchan: int, ny: int, nx: int, noise: float) -> np.ndarray:
    """(channel, time, y, x) float32: waves that move with time, per channel, plus noise."""
    yy = np.arange(ny, dtype=np.float32)[:, None] / ny
    xx = np.arange(nx, dtype=np.float32)[None, :] / nx
    out = np.empty((nchan, len(t), ny, nx), np.float32)
    for c in range(nchan):
        for k, tt in enumerate(t.astype(np.float32)):
            out[c, k] = (np.sin(2 * np.pi * (2 * xx + tt / 90 + c / 7)) * np.cos(2 * np.pi * (3 * yy - tt / 150))
                         + 0.5 * np.sin(2 * np.pi * (5 * (xx + yy) + tt / 40 + c / 3)))
    out += rng.normal(0, noise, out.shape).astype(np.float32)
    return out


def _write_blocks(path: Path, name: str, dims: tuple, coords: dict, shape: tuple, chunks: tuple, dtype: str,
                  lead: str, step: int, block: Callable[[int, int], np.ndarray], attrs: dict | None = None) -> None:
    """A store of one variable, written ``step`` entries of dimension ``lead`` at a time."""
    import dask.array as da
    import xarray as xr

    template = xr.Dataset({name: (dims, da.zeros(shape, chunks=chunks, dtype=dtype), attrs or {})}, coords=coords)
    template.to_zarr(path, compute=False, zarr_format=2, consolidated=True,
                     encoding={name: {"chunks": chunks, "compressors": (_compressor(),)}})
    n = shape[dims.index(lead)]
    for a in range(0, n, step):
        b = min(a + step, n)
        values = block(a, b)
        xr.Dataset({name: (dims, values)}).to_zarr(path, region={d: slice(a, b) if d == lead else slice(None) for d in dims})


def write_satellite(root: Path, days: float, seed: int = 31) -> List[str]:
    """The satellite in two stores (halves of the time range); returns their names."""
    import pyproj

    rng = np.random.default_rng(seed)
    gx, gy = pyproj.Transformer.from_crs("EPSG:4326", GEOS, always_xy=True).transform(-1.5, 54.0)
    ny, nx = SAT_SHAPE
    x = gx + 3000.0 * (nx // 2 - np.arange(nx))  # descending, as SEVIRI archives are
    y = gy + 3000.0 * (np.arange(ny) - ny // 2)
    steps = int(days * 288)
    steps -= steps % (2 * SAT_CHUNKS[1])
    times = T0 - np.timedelta64(60, "m") + np.arange(steps) * np.timedelta64(5, "m")
    names = []
    for half in range(2):
        part = times[half * steps // 2:(half + 1) * steps // 2]
        offset = half * steps // 2

        def block(a: int, b: int) -> np.ndarray:
            f = _field(rng, np.arange(offset + a, offset + b), len(SAT_CHANNELS), ny, nx, 0.04)
            return np.clip(np.rint(400 + 250 * f), 0, 1023).astype(np.int16)

        name = f"sat-{half}.zarr"
        _write_blocks(root / name, "data", ("variable", "time", "y_geostationary", "x_geostationary"),
                      {"variable": SAT_CHANNELS, "time": part, "y_geostationary": y, "x_geostationary": x},
                      (len(SAT_CHANNELS), len(part), ny, nx), SAT_CHUNKS, "int16", "time", SAT_CHUNKS[1], block,
                      {"area": grid_area(x[::-1], y[::-1])})
        names.append(name)
    return names


def write_nwp(root: Path, name: str, days: float, channels: List[str], every_h: int, steps: int,
              dims: tuple, coords_yx: Dict[str, np.ndarray], seed: int) -> None:
    """An NWP store: runs every ``every_h`` hours from 12 hours before the data start, hourly
    steps 0 .. steps-1, a chunk per run and step."""
    rng = np.random.default_rng(seed)
    (yname, ys), (xname, xs) = coords_yx.items()
    runs = int((days * 24 + 24) // every_h)
    init = T0 - np.timedelta64(12, "h") + np.arange(runs) * np.timedelta64(every_h, "h")
    step = np.arange(steps) * np.timedelta64(1, "h")

    def block(a: int, b: int) -> np.ndarray:
        out = np.empty((b - a, steps, len(channels), len(ys), len(xs)), np.float32)
        for r in range(a, b):
            f = _field(rng, np.arange(steps) * 12 + r * every_h * 12, len(channels), len(ys), len(xs), 0.02)
            out[r - a] = (280 + 10 * f).transpose(1, 0, 2, 3)
        return out

    _write_blocks(root / f"{name}.zarr", name.upper(), dims,
                  {"init_time": init, "step": step, "variable": channels, yname: ys, xname: xs},
                  (runs, steps, len(channels), len(ys), len(xs)), (1, 1, len(channels), len(ys), len(xs)), "float32",
                  "init_time", 1, block)


def sites(n: int) -> "tuple[np.ndarray, np.ndarray]":
    rng = np.random.default_rng(23)
    return rng.uniform(-2.5, -0.5, n), rng.uniform(52.0, 53.5, n)


def write_generation(root: Path, days: float, n_sites: int, seed: int = 24) -> None:
    import xarray as xr

    rng = np.random.default_rng(seed)
    gtimes = T0 - np.timedelta64(3, "h") + np.arange(int((days * 24 + 6) * 2)) * np.timedelta64(30, "m")
    lon, lat = sites(n_sites)
    xr.Dataset(
        {"generation_mw": (("time_utc", "location_id"), rng.uniform(0, 5, (len(gtimes), n_sites)).astype(np.float32)),
         "capacity_mwp": (("time_utc", "location_id"), rng.uniform(8, 12, (len(gtimes), n_sites)).astype(np.float32))},
        coords={"time_utc": gtimes, "location_id": np.arange(1, n_sites + 1),
                "longitude": ("location_id", lon), "latitude": ("location_id", lat)},
    ).to_zarr(root / "gen.zarr", zarr_format=2, consolidated=True)


def write_archive(root: Path, days: float = 1.0, n_sites: int = 24) -> Path:
    """Every store of the archive in ``root`` and its YAML; returns the YAML's path (relative
    zarr_paths: run from ``root``, as ocf-data-sampler resolves them)."""
    root.mkdir(parents=True, exist_ok=True)
    sat = write_satellite(root, days)
    write_nwp(root, "ukv", days, UKV_CHANNELS, 3, 10, ("init_time", "step", "variable", "y", "x"),
              {"y": np.arange(700000.0, -4000.0, -2000.0)[:352], "x": np.arange(100000.0, 648000.0, 2000.0)}, 32)
    write_nwp(root, "ecmwf", days, ECMWF_CHANNELS, 6, 13, ("init_time", "step", "variable", "latitude", "longitude"),
              {"latitude": 61.0 - 0.1 * np.arange(120), "longitude": -11.0 + 0.1 * np.arange(140)}, 33)
    write_generation(root, days, n_sites)
    path = root / "pvnet_archive.yaml"
    path.write_text(yaml_text(sat))
    return path


def yaml_text(sat_stores: List[str]) -> str:
    unit = (280.0, 10.0)
    return cfg.config(
        "pvnet-archive", "PVNet's example sources at OCF's sizes (benchmarks/ocf_archive.py)",
        generation=cfg.generation(),
        nwp={"ukv": cfg.nwp("ukv", UKV_CHANNELS, cfg.norm(**{c: unit for c in UKV_CHANNELS}), height=24, width=24,
                            dropout_timedeltas_minutes=[-180], dropout_fraction=1.0),
             "ecmwf": cfg.nwp("ecmwf", ECMWF_CHANNELS, cfg.norm(**{c: unit for c in ECMWF_CHANNELS}), height=12, width=12,
                              dropout_timedeltas_minutes=[-360], dropout_fraction=1.0)},
        satellite=cfg.satellite(SAT_CHANNELS, cfg.norm(**{c: (400.0, 180.0) for c in SAT_CHANNELS}), height=24, width=24,
                                zarr_path=sat_stores),
        solar_position=cfg.window(30, -60, 120),
        t0_embedding=[("24h", "cyclic"), ("1y", "cyclic")],
    )


def satellite_bytes(root: Path) -> int:
    """The satellite's decoded size."""
    import xarray as xr

    return sum(xr.open_zarr(root / f"sat-{h}.zarr")["data"].nbytes for h in range(2))


if __name__ == "__main__":
    import argparse
    import time

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", type=Path)
    ap.add_argument("--days", type=float, default=1.0)
    ap.add_argument("--sites", type=int, default=24)
    a = ap.parse_args()
    t = time.perf_counter()
    print(write_archive(a.root, a.days, a.sites), f"{time.perf_counter() - t:.0f} s")
