#!/usr/bin/env python3
"""Channel-last against canonical order: the same nowcast-ref data, two satellite layouts, one run.

The satellite store of nowcast-ref (docs/WORKLOAD.md) is ``data (time, channel, y, x)``; archived
satellite data is often ``(time, y, x, channel)``. This benchmark writes a copy of the satellite
store in channel-last order (same values, chunks following their axes, same codec and
attributes; the NWP and PV stores are shared) and measures ``gobatch.Loader`` over
presets/nowcast.toml on both, alternating the layouts round by round:

- steady batches/s: batches after the first ``--warm`` ones (the cache holds every chunk by
  then; it holds them in canonical order either way, so the gather is the same);
- first batches: seconds from opening the loader to its ``--warm``-th batch, where every chunk
  is decoded (and, channel last, transposed once).

The ratio is channel last over canonical (issue 8 asks for at least 0.8 in steady state).
Medians over ``--rounds`` rounds.

Usage::

    python benchmarks/layout_bench.py --quick
    python benchmarks/layout_bench.py --days 1 --data data/nowcast-d1
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from baselines import REPO, ensure_dataset  # noqa: E402

PRESET = REPO / "presets" / "nowcast.toml"


def channel_last_copy(src: Path, dst: Path) -> None:
    """dst: src's stores, with satellite.zarr/data rewritten as (time, y, x, channel)."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("nwp.zarr", "pv.zarr"):
        link = dst / name
        if not link.exists():
            link.symlink_to((src / name).resolve())
    out = dst / "satellite.zarr"
    if (out / ".zmetadata").exists():
        return
    g = zarr.open_group(str(src / "satellite.zarr"), mode="r")
    o = zarr.open_group(str(out), mode="w", zarr_format=2)
    for name, a in g.arrays():
        attrs = dict(a.attrs)
        values = a[...]
        chunks = a.chunks
        if name == "data":
            order = [0, 2, 3, 1]
            values = np.ascontiguousarray(values.transpose(order))
            chunks = tuple(a.chunks[i] for i in order)
            attrs["_ARRAY_DIMENSIONS"] = [attrs["_ARRAY_DIMENSIONS"][i] for i in order]
        b = o.create_array(name, shape=values.shape, dtype=a.dtype, chunks=chunks,
                           compressors=a.compressors or None, filters=a.filters or None, fill_value=a.fill_value)
        b[...] = values
        b.attrs.update(attrs)
    zarr.consolidate_metadata(str(out))


def config(cache_mb: int) -> dict[str, Any]:
    cfg = tomllib.loads(PRESET.read_text())
    for s in cfg["source"]:
        if s.get("anchor"):
            s["cache_mb"] = cache_mb
            s["sampling"] = "random"
    return cfg


def run(root: Path, args: argparse.Namespace) -> tuple[float, float, int]:
    """(seconds to the warm-th batch, steady batches/s, cache misses while steady) of one
    loader over root."""
    import gobatch

    t = time.perf_counter()
    n = 0
    with gobatch.Loader(config(args.cache_mb), framework="numpy", data_root=str(root), readers=args.readers) as loader:
        for _ in loader:
            n += 1
            if n == args.warm:
                first = time.perf_counter() - t
                misses = loader.stats().get("cache_misses", 0)
                t = time.perf_counter()
            elif n == args.warm + args.batches:
                break
        steady = args.batches / (time.perf_counter() - t)
        misses = loader.stats().get("cache_misses", 0) - misses
    return first, steady, misses


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=float, default=1.0)
    ap.add_argument("--data", type=Path, help="nowcast-ref directory (default data/nowcast-d<days>)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warm", type=int, default=10)
    ap.add_argument("--batches", type=int, default=60)
    ap.add_argument("--readers", type=int, default=2)
    ap.add_argument("--cache-mb", type=int, default=2048)
    ap.add_argument("--quick", action="store_true", help="half a day, 2 rounds of 30 batches")
    args = ap.parse_args(argv)
    if args.quick:
        args.days, args.rounds, args.batches = 0.5, 2, 30
    data = args.data or REPO / "data" / f"nowcast-d{args.days:g}"
    ensure_dataset(data, days=args.days, quiet=True)
    last = data.parent / (data.name + "-channel-last")
    channel_last_copy(data, last)

    roots = {"canonical (time, channel, y, x)": data, "channel last (time, y, x, channel)": last}
    res: dict[str, list[tuple[float, float, int]]] = {k: [] for k in roots}
    for r in range(args.rounds):
        names = list(roots) if r % 2 == 0 else list(roots)[::-1]
        for name in names:
            res[name].append(run(roots[name], args))
    print(f"nowcast-ref, {args.days:g} days, {args.readers} readers, cache_mb {args.cache_mb}, "
          f"{args.rounds} rounds of {args.warm} + {args.batches} batches (medians), cpus {os.cpu_count()}")
    print(f"{'satellite layout':<38} {'first batches s':>15} {'steady batches/s':>17} {'steady misses':>14}")
    med = {}
    for name, rs in res.items():
        med[name] = (statistics.median(f for f, _, _ in rs), statistics.median(s for _, s, _ in rs))
        print(f"{name:<38} {med[name][0]:>15.2f} {med[name][1]:>17.2f} {max(m for _, _, m in rs):>14}")
    (c_first, c_steady), (l_first, l_steady) = med.values()
    print(f"channel last / canonical: steady {l_steady / c_steady:.2f}x, first batches {c_first / l_first:.2f}x (speed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
