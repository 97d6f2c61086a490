#!/usr/bin/env python3
"""A simulated archive: the metadata of years of 5-minute steps, and only a few real chunks.

Writes into OUT two Zarr v2 stores, as an operational archive lays them out:

- ``satellite.zarr``: ``data (time, channel, y, x)`` int16, ``steps`` 5-minute steps, chunks of
  12 steps x all channels x the whole grid; its ``time``, ``y`` and ``x`` coordinates are
  written in full;
- ``pv.zarr``: ``generation (time, location_id)`` float32 with ``longitude`` and ``latitude``
  for each of ``sites`` sites, chunks of 288 steps x all sites.

Only the chunks of the first ``real_chunks`` time chunks of each array are written; every other
chunk is absent and reads as the array's fill value (the sampler's ``missing_chunks = "fill"``).
So a year of metadata (10^5 steps x 300 sites) costs a few MB on disk, and planning or opening
the archive costs what it would on the real one.

Usage::

    python tools/gen_archive.py OUT [--steps 105120] [--sites 300]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

EPOCH = "minutes since 2020-01-01"
SAT_CHUNK_STEPS, PV_CHUNK_STEPS = 12, 288
CHANNELS = ["IR_108", "VIS006"]


def _lazy_zeros(shape: tuple[int, ...], chunks: tuple[int, ...], dtype: str):  # type: ignore[no-untyped-def]
    import dask.array as da

    return da.zeros(shape, chunks=chunks, dtype=dtype)


def generate(out: Path, steps: int = 105120, sites: int = 300, pixels: int = 64, real_chunks: int = 4,
             seed: int = 0) -> dict[str, int]:
    """Write the two stores into ``out`` (replacing them) and return their sizes."""
    import xarray as xr
    import zarr

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    time = np.datetime64("2020-01-01T00:00") + np.arange(steps) * np.timedelta64(5, "m")
    step = 2000.0  # metres
    x = (np.arange(pixels) - pixels / 2 + 0.5) * step
    y = (np.arange(pixels)[::-1] - pixels / 2 + 0.5) * step
    sat_chunks = (SAT_CHUNK_STEPS, len(CHANNELS), pixels, pixels)
    sat = xr.Dataset(
        {"data": (("time", "channel", "y", "x"), _lazy_zeros((steps, len(CHANNELS), pixels, pixels), sat_chunks, "int16"))},
        coords={"time": time, "channel": CHANNELS, "y": y, "x": x})
    sat["data"].attrs["_FillValue"] = -1
    sat.to_zarr(out / "satellite.zarr", mode="w", zarr_format=2, consolidated=True, compute=False,
                encoding={"time": {"units": EPOCH, "dtype": "int64"}, "data": {"chunks": sat_chunks}})
    # The sites: anywhere inside the grid, in metres of the same projection as x and y.
    half = 8
    cx = rng.integers(half, pixels - half, size=sites)
    cy = rng.integers(half, pixels - half, size=sites)
    pv = xr.Dataset(
        {"generation": (("time", "location_id"), _lazy_zeros((steps, sites), (PV_CHUNK_STEPS, sites), "float32"))},
        coords={"time": time, "location_id": np.arange(1000, 1000 + sites, dtype=np.int64),
                "x": ("location_id", x[cx]), "y": ("location_id", y[cy])})
    pv.to_zarr(out / "pv.zarr", mode="w", zarr_format=2, consolidated=True, compute=False,
               encoding={"time": {"units": EPOCH, "dtype": "int64"},
                         "generation": {"chunks": (PV_CHUNK_STEPS, sites)}})
    # A few real chunks at the start of each array; the rest stay absent (the fill value).
    a = zarr.open_array(str(out / "satellite.zarr" / "data"), mode="r+")
    n = min(steps, real_chunks * SAT_CHUNK_STEPS)
    a[:n] = rng.integers(0, 1000, size=(n, len(CHANNELS), pixels, pixels), dtype=np.int16)
    g = zarr.open_array(str(out / "pv.zarr" / "generation"), mode="r+")
    n = min(steps, real_chunks * PV_CHUNK_STEPS)
    g[:n] = rng.uniform(0, 5, size=(n, sites)).astype(np.float32)
    return {"steps": steps, "sites": sites,
            "bytes_on_disk": sum(p.stat().st_size for p in out.rglob("*") if p.is_file())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--steps", type=int, default=105120, help="5-minute steps (105120: one year)")
    ap.add_argument("--sites", type=int, default=300)
    ap.add_argument("--pixels", type=int, default=64)
    ap.add_argument("--real-chunks", type=int, default=4, help="time chunks of real data at the start")
    args = ap.parse_args()
    print(generate(args.out, args.steps, args.sites, args.pixels, args.real_chunks))


if __name__ == "__main__":
    main()
