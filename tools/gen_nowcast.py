#!/usr/bin/env python3
"""Generate the nowcast-ref dataset of docs/WORKLOAD.md (three Zarr v2 stores).

Writes ``satellite.zarr``, ``nwp.zarr`` and ``pv.zarr`` under ``--out`` with zarr-python
(Zarr format 2, consolidated metadata), with exactly the layout of the reference workload:

* ``satellite.zarr/data``: int16 ``(time, channel, y, x)``, chunks ``(12, 12, 128, 128)``,
  Blosc(lz4, clevel 5, byte shuffle), ``scale_factor`` 0.001, ``add_offset`` 0,
  ``_FillValue`` -1; 5-minute ``time`` steps (int64 minutes since 2021-01-01 00:00:00),
  2000 m ``x``/``y`` spacing, ``y`` descending, 12 ``channel`` names.
* ``nwp.zarr/UKV``: float32 ``(init_time, step, variable, y, x)``, chunks
  ``(1, 16, 10, 32, 32)``, Zstd(level 3); runs every 180 minutes, 16 hourly steps,
  10 variables, 8000 m spacing, ``y`` descending.
* ``pv.zarr/power``: float32 kW ``(time, system)``, chunks ``(288, 500)``, Zlib(level 5),
  NaN fill value and NaN gaps; ``system`` int64 ids (ascending), ``x``/``y`` positions.

Content: spatially and temporally smooth fields plus a little noise, a few fill-valued
satellite pixels and NaN PV readings. The satellite and NWP grids share their first pixel
centre and NWP spacing is exactly four satellite pixels, so satellite columns ``4n + 2`` lie
exactly half-way between two NWP columns: the tie rule of the NWP crop is exercised.

A file ``nowcast.json`` with the parameters and sizes is written last; its presence means the
dataset is complete. Usage::

    python tools/gen_nowcast.py --out data/nowcast-small            # 1 day, 256 px
    python tools/gen_nowcast.py --out data/nowcast-large --days 12
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numcodecs
import numpy as np
import zarr

EPOCH_UNITS = "minutes since 2021-01-01 00:00:00"
EPOCH_UNIX_S = 1609459200  # 2021-01-01T00:00:00Z
SAT_STEP_MIN = 5
STEPS_PER_DAY = 24 * 60 // SAT_STEP_MIN  # 288
NWP_INIT_EVERY_MIN = 180
NWP_STEPS = 16
NWP_STEP_MIN = 60
SAT_DX = 2000.0
NWP_DX = 8000.0
X0 = 200_000.0  # x of the first satellite (and NWP) column centre
Y0 = 900_000.0  # y of the first satellite (and NWP) row centre; y descends from here
SCALE_FACTOR = 0.001
FILL_RAW = -1
GEN_VERSION = 2  # bumped when the content changes, so that reused data dirs are regenerated

CHANNELS = [
    "HRV", "IR_016", "IR_039", "IR_087", "IR_097", "IR_108",
    "IR_120", "IR_134", "VIS006", "VIS008", "WV_062", "WV_073",
]
NWP_VARIABLES = ["dlwrf", "dswrf", "hcc", "lcc", "mcc", "prate", "r", "sde", "si10", "t"]
# per NWP variable: (base, amplitude) of the decoded values
NWP_RANGES = [(300.0, 40.0), (150.0, 120.0), (0.5, 0.4), (0.5, 0.4), (0.5, 0.4),
              (0.0002, 0.0002), (80.0, 15.0), (0.01, 0.01), (5.0, 3.0), (280.0, 8.0)]


@dataclass
class Params:
    """What the generator was asked for; stored in ``nowcast.json``."""

    days: float
    pixels: int
    systems: int
    seed: int

    @property
    def n_time(self) -> int:
        return max(1, int(round(self.days * STEPS_PER_DAY)))

    @property
    def nwp_pixels(self) -> int:
        return self.pixels // 4

    @property
    def n_init(self) -> int:
        # every run whose init_time is not after the last satellite time
        return (self.n_time - 1) * SAT_STEP_MIN // NWP_INIT_EVERY_MIN + 1


def _interp_matrix(n_out: int, n_in: int) -> np.ndarray:
    """Linear interpolation weights (n_out, n_in) from a coarse grid onto a fine one."""
    pos = np.linspace(0.0, n_in - 1.0, n_out)
    lo = np.minimum(np.floor(pos).astype(np.int64), n_in - 2)
    frac = pos - lo
    m = np.zeros((n_out, n_in), dtype=np.float64)
    m[np.arange(n_out), lo] = 1.0 - frac
    m[np.arange(n_out), lo + 1] = frac
    return m


def _smooth_basis(rng: np.random.Generator, k: int, n: int, coarse: int = 6) -> np.ndarray:
    """k smooth 2-D fields of n x n (values about in [-1, 1]), flattened to (k, n*n)."""
    r = _interp_matrix(n, coarse)
    g = rng.standard_normal((k, coarse, coarse))
    fields = np.einsum("ya,kab,xb->kyx", r, g, r)
    fields /= np.abs(fields).max(axis=(1, 2), keepdims=True) + 1e-12
    return fields.reshape(k, n * n).astype(np.float32)


def _smooth_series(rng: np.random.Generator, n: int, shape: tuple[int, ...], every: int) -> np.ndarray:
    """Smooth random series of length n (axis 0) for each index of ``shape``: values on
    knots every ``every`` steps, linearly interpolated, about in [-1, 1]."""
    knots = n // every + 2
    g = rng.uniform(-1.0, 1.0, (knots,) + shape)
    pos = np.arange(n) / every
    lo = np.minimum(np.floor(pos).astype(np.int64), knots - 2)
    frac = (pos - lo).reshape((n,) + (1,) * len(shape))
    return g[lo] * (1.0 - frac) + g[lo + 1] * frac


def _coord(group: zarr.Group, name: str, values: np.ndarray, attrs: dict, dims: list[str]) -> None:
    arr = group.create_array(
        name, shape=values.shape, chunks=values.shape, dtype=values.dtype,
        compressors=None, filters=None, fill_value=None,
        attributes={"_ARRAY_DIMENSIONS": dims, **attrs},
    )
    arr[...] = values


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _log(quiet: bool, msg: str) -> None:
    if not quiet:
        print(msg, flush=True)


def sat_coords(pixels: int) -> tuple[np.ndarray, np.ndarray]:
    """Satellite x (ascending) and y (descending) pixel-centre coordinates in metres."""
    j = np.arange(pixels, dtype=np.float64)
    return X0 + SAT_DX * j, Y0 - SAT_DX * j


def nwp_coords(n: int) -> tuple[np.ndarray, np.ndarray]:
    """NWP x (ascending) and y (descending) grid coordinates in metres."""
    k = np.arange(n, dtype=np.float64)
    return X0 + NWP_DX * k, Y0 - NWP_DX * k


def write_satellite(out: Path, p: Params, rng: np.random.Generator, quiet: bool) -> None:
    T, C, P = p.n_time, len(CHANNELS), p.pixels
    g = zarr.open_group(str(out / "satellite.zarr"), mode="w", zarr_format=2)
    data = g.create_array(
        "data", shape=(T, C, P, P), chunks=(12, 12, 128, 128), dtype="int16",
        compressors=numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE),
        filters=None, fill_value=FILL_RAW,
        attributes={
            "_ARRAY_DIMENSIONS": ["time", "channel", "y", "x"],
            "scale_factor": SCALE_FACTOR, "add_offset": 0.0, "_FillValue": FILL_RAW,
            "long_name": "brightness (synthetic)", "units": "1",
        },
    )
    x, y = sat_coords(P)
    _coord(g, "time", np.arange(T, dtype=np.int64) * SAT_STEP_MIN,
           {"units": EPOCH_UNITS, "calendar": "proleptic_gregorian"}, ["time"])
    _coord(g, "x", x, {"units": "m", "standard_name": "projection_x_coordinate"}, ["x"])
    _coord(g, "y", y, {"units": "m", "standard_name": "projection_y_coordinate"}, ["y"])
    _coord(g, "channel", np.array(CHANNELS, dtype="<U6"), {}, ["channel"])

    K = 12
    basis = _smooth_basis(rng, K, P)  # (K, P*P)
    # per (time, channel, k) weights, smooth in time (knots every 2 hours), plus a channel mean
    weights = _smooth_series(rng, T, (C, K), every=24).astype(np.float32) / math.sqrt(K)
    mean = rng.uniform(-0.3, 0.3, C).astype(np.float32)
    noise = rng.integers(-4, 5, size=(1 << 23) + C * P * P, dtype=np.int16)

    slab = 48  # four time chunks: sixteen chunks per write, encoded concurrently by zarr
    fill_frac = 1e-5
    n_fill = 0
    for t0 in range(0, T, slab):
        t1 = min(T, t0 + slab)
        nt = t1 - t0
        w = weights[t0:t1].reshape(nt * C, K)
        field = (w @ basis).reshape(nt, C, P * P)
        field += mean[None, :, None]
        raw = np.clip(450.0 + 350.0 * field, 0.0, 1000.0).astype(np.int16)
        offs = rng.integers(0, 1 << 23, nt)
        for i in range(nt):
            raw[i] += noise[offs[i]: offs[i] + C * P * P].reshape(C, P * P)
        np.clip(raw, 0, 1000, out=raw)
        flat = raw.reshape(-1)
        k = max(1, int(round(flat.size * fill_frac)))
        flat[rng.integers(0, flat.size, k)] = FILL_RAW
        n_fill += k
        data[t0:t1] = raw.reshape(nt, C, P, P)
        _log(quiet, f"  satellite: time {t1}/{T}")
    zarr.consolidate_metadata(str(out / "satellite.zarr"))
    _log(quiet, f"  satellite: {n_fill} fill-valued pixels")


def write_nwp(out: Path, p: Params, rng: np.random.Generator, quiet: bool) -> None:
    N, S, V, Q = p.n_init, NWP_STEPS, len(NWP_VARIABLES), p.nwp_pixels
    g = zarr.open_group(str(out / "nwp.zarr"), mode="w", zarr_format=2)
    ukv = g.create_array(
        "UKV", shape=(N, S, V, Q, Q), chunks=(1, S, V, 32, 32), dtype="float32",
        compressors=numcodecs.Zstd(level=3), filters=None, fill_value=float("nan"),
        attributes={"_ARRAY_DIMENSIONS": ["init_time", "step", "variable", "y", "x"],
                    "long_name": "UKV forecast (synthetic)"},
    )
    x, y = nwp_coords(Q)
    _coord(g, "init_time", np.arange(N, dtype=np.int64) * NWP_INIT_EVERY_MIN,
           {"units": EPOCH_UNITS, "calendar": "proleptic_gregorian"}, ["init_time"])
    _coord(g, "step", np.arange(S, dtype=np.int64) * NWP_STEP_MIN, {"units": "minutes"}, ["step"])
    _coord(g, "x", x, {"units": "m", "standard_name": "projection_x_coordinate"}, ["x"])
    _coord(g, "y", y, {"units": "m", "standard_name": "projection_y_coordinate"}, ["y"])
    _coord(g, "variable", np.array(NWP_VARIABLES, dtype="<U5"), {}, ["variable"])

    K = 8
    basis = _smooth_basis(rng, K, Q, coarse=5)  # (K, Q*Q)
    # weights smooth in valid time (hourly knots every 3 h), plus a per-run perturbation
    hours = (N - 1) * NWP_INIT_EVERY_MIN // 60 + S
    valid = _smooth_series(rng, hours, (V, K), every=3).astype(np.float32) / math.sqrt(K)
    base = np.array([b for b, _ in NWP_RANGES], dtype=np.float32)
    amp = np.array([a for _, a in NWP_RANGES], dtype=np.float32)
    slab = 8
    for n0 in range(0, N, slab):
        n1 = min(N, n0 + slab)
        vals = np.empty((n1 - n0, S, V, Q * Q), dtype=np.float32)
        for n in range(n0, n1):
            h = n * NWP_INIT_EVERY_MIN // 60
            w = valid[h: h + S] + 0.05 * rng.standard_normal((S, V, K)).astype(np.float32)
            vals[n - n0] = np.einsum("svk,kp->svp", w, basis)
        vals = base[None, None, :, None] + amp[None, None, :, None] * vals
        vals += (0.002 * amp[None, None, :, None]) * rng.standard_normal(vals.shape).astype(np.float32)
        # quantise to 1/4096 of each variable's amplitude (power of two steps): realistic
        # packing precision, and zstd finds the zeroed low mantissa bits
        q = (2.0 ** np.floor(np.log2(amp / 4096.0))).astype(np.float32)[None, None, :, None]
        vals = (np.round(vals / q) * q).astype(np.float32)
        ukv[n0:n1] = vals.reshape(n1 - n0, S, V, Q, Q)
        _log(quiet, f"  nwp: init_time {n1}/{N}")
    zarr.consolidate_metadata(str(out / "nwp.zarr"))


def write_pv(out: Path, p: Params, rng: np.random.Generator, quiet: bool) -> None:
    T, S, P = p.n_time, p.systems, p.pixels
    g = zarr.open_group(str(out / "pv.zarr"), mode="w", zarr_format=2)
    power = g.create_array(
        "power", shape=(T, S), chunks=(STEPS_PER_DAY, 500), dtype="float32",
        compressors=numcodecs.Zlib(level=5), filters=None, fill_value=float("nan"),
        attributes={"_ARRAY_DIMENSIONS": ["time", "system"], "units": "kW",
                    "coordinates": "x y", "long_name": "PV power (synthetic)"},
    )
    sx, sy = sat_coords(P)
    ids = np.sort(rng.choice(np.arange(1000, 1000 + 200 * S), size=S, replace=False)).astype(np.int64)
    px = rng.uniform(sx[0], sx[-1], S)
    py = rng.uniform(sy[-1], sy[0], S)
    _coord(g, "time", np.arange(T, dtype=np.int64) * SAT_STEP_MIN,
           {"units": EPOCH_UNITS, "calendar": "proleptic_gregorian"}, ["time"])
    _coord(g, "system", ids, {"long_name": "PV system id"}, ["system"])
    _coord(g, "x", px, {"units": "m", "standard_name": "projection_x_coordinate"}, ["system"])
    _coord(g, "y", py, {"units": "m", "standard_name": "projection_y_coordinate"}, ["system"])

    minutes = np.arange(T) * SAT_STEP_MIN
    hour = (minutes % (24 * 60)) / 60.0
    sun = np.clip(np.sin(np.pi * (hour - 6.0) / 12.0), 0.0, None)  # 06:00 .. 18:00
    capacity = rng.uniform(1.0, 5.0, S)
    cloud = 0.5 + 0.5 * _smooth_series(rng, T, (S,), every=12)  # 0..1, hourly knots
    kw = capacity[None, :] * sun[:, None] * (1.0 - 0.8 * cloud)
    kw += 0.01 * rng.standard_normal(kw.shape) * (sun[:, None] > 0)
    kw += np.abs(0.003 * rng.standard_normal(kw.shape))  # inverter standby / sensor offset
    kw = np.clip(kw, 0.0, None)
    kw = (np.round(kw * 1024.0) / 1024.0).astype(np.float32)
    # NaN readings (0.5 %) and gaps (about 40 a day, 30 min to 4 h long)
    kw.reshape(-1)[rng.random(kw.size) < 0.005] = np.nan
    n_gaps = max(1, int(round(40 * T / STEPS_PER_DAY)))
    for _ in range(n_gaps):
        s = rng.integers(0, S)
        a = rng.integers(0, T)
        kw[a: a + rng.integers(6, 49), s] = np.nan
    power[...] = kw
    zarr.consolidate_metadata(str(out / "pv.zarr"))
    _log(quiet, f"  pv: {T} x {S}, {np.isnan(kw).mean() * 100:.2f} % NaN")


def generate(out: str | os.PathLike, days: float = 1.0, pixels: int = 256, systems: int = 500,
             seed: int = 0, quiet: bool = False, force: bool = False) -> dict:
    """Write the three stores under ``out`` and return the summary written to nowcast.json.

    If ``out/nowcast.json`` exists with the same parameters, nothing is written (unless
    ``force``) and the existing summary is returned.
    """
    if pixels < 64 or pixels % 4:
        raise ValueError(f"--pixels must be a multiple of 4 and at least 64, got {pixels}")
    if days <= 0:
        raise ValueError(f"--days must be positive, got {days}")
    if systems < 16:
        raise ValueError(f"--systems must be at least 16, got {systems}")
    p = Params(days=float(days), pixels=int(pixels), systems=int(systems), seed=int(seed))
    if p.n_time < 25:
        raise ValueError(f"--days {days} gives {p.n_time} time steps; at least 25 are needed")
    outp = Path(out)
    marker = outp / "nowcast.json"
    if marker.exists() and not force:
        old = json.loads(marker.read_text())
        if old.get("params") == asdict(p) and old.get("version") == GEN_VERSION:
            _log(quiet, f"{outp}: already generated with these parameters")
            return old
    for name in ("satellite.zarr", "nwp.zarr", "pv.zarr", "nowcast.json"):
        q = outp / name
        if q.is_dir():
            shutil.rmtree(q)
        elif q.exists():
            q.unlink()
    outp.mkdir(parents=True, exist_ok=True)

    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    _log(quiet, f"generating nowcast-ref into {outp}: {p.n_time} time steps ({days:g} days), "
                f"{pixels} px, {p.n_init} NWP runs, {systems} PV systems, seed {seed}")
    write_satellite(outp, p, np.random.default_rng(rng.integers(1 << 63)), quiet)
    write_nwp(outp, p, np.random.default_rng(rng.integers(1 << 63)), quiet)
    write_pv(outp, p, np.random.default_rng(rng.integers(1 << 63)), quiet)
    elapsed = time.perf_counter() - start

    decoded = {  # bytes of each main array, raw (as stored) and as float32 for the trainer
        "satellite.zarr": (p.n_time * len(CHANNELS) * pixels * pixels * 2,
                           p.n_time * len(CHANNELS) * pixels * pixels * 4),
        "nwp.zarr": ((n := p.n_init * NWP_STEPS * len(NWP_VARIABLES) * p.nwp_pixels ** 2) * 4, n * 4),
        "pv.zarr": (p.n_time * systems * 4, p.n_time * systems * 4),
    }
    stores = {}
    for name, (raw, f32) in decoded.items():
        disk = _dir_bytes(outp / name)
        stores[name] = {"raw_bytes": raw, "float32_bytes": f32, "disk_bytes": disk,
                        "ratio": round(raw / max(disk, 1), 3)}
    summary = {"version": GEN_VERSION, "params": asdict(p), "n_time": p.n_time, "n_init": p.n_init,
               "seconds": round(elapsed, 2), "stores": stores}
    marker.write_text(json.dumps(summary, indent=1) + "\n")
    if not quiet:
        print(f"done in {elapsed:.1f} s")
        print(f"  {'store':<16}{'raw MB':>10}{'float32 MB':>12}{'disk MB':>10}{'ratio':>8}")
        for name, s in stores.items():
            print(f"  {name:<16}{s['raw_bytes'] / 1e6:>10.1f}{s['float32_bytes'] / 1e6:>12.1f}"
                  f"{s['disk_bytes'] / 1e6:>10.1f}{s['ratio']:>8.2f}")
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory for satellite.zarr, nwp.zarr, pv.zarr")
    ap.add_argument("--days", type=float, default=1.0, help="days of data (288 steps a day; default 1)")
    ap.add_argument("--pixels", type=int, default=256, help="satellite grid size (default 256)")
    ap.add_argument("--systems", type=int, default=500, help="PV systems (default 500)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--force", action="store_true", help="rewrite even if already generated")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    try:
        generate(a.out, days=a.days, pixels=a.pixels, systems=a.systems, seed=a.seed,
                 quiet=a.quiet, force=a.force)
    except ValueError as e:
        print(f"gen_nowcast: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
