#!/usr/bin/env python3
"""Epoch orders in OCF's regime (issue 28): decode amplification against mixing, with the
satellite at least 10x the cache.

OCF-shaped stores (python/tests/ocf_stores.py: a two-channel geostationary satellite at 5
minutes, one chunk per time step and channel, a UKV NWP, ``--sites`` sites at 30 minutes) and
its ocf-data-sampler YAML, read by ``gobatch.Loader(yaml, batch_size=32, order="epochs")`` for
one whole epoch per variant, in one run:

- ``in cache``: the cache holds everything (the whole epoch permuted at once): its decode
  amplification is the decode-once limit (every chunk decoded once for the epoch);
- ``block shuffle``: cache_mb a tenth of the satellite, segments chosen automatically;
- ``segment_steps N``: the same cache, segments of N satellite steps;
- ``resident_segments N``: the same cache, groups of N segments, more than two fit: the knob
  the plan names for more mixing at the cost of decoding chunks again.

The decode-once loop is ``shmloader read ARRAY --cf`` over every array the epoch reads (the
satellite, the UKV, the generation and the capacity: each chunk decoded once, on every core,
into one array; the fastest of 3 for each, summed): an epoch cannot be faster than decoding
each of its chunks once, so "vs loop" is batches/s over the epoch's batches in the loop's
time. For each: batches/s, that ratio, the satellite's decode amplification over the
epoch (``last_epoch``), the limiting stage, the distinct t0s per batch against a uniform shuffle of the same epoch's
samples (numpy's permutation of the epoch's own (t0, site) pairs, cut into batches: the mixing
the issue asks for within 0.8x of), and Spearman(position, t0) over the epoch.

Usage::

    python benchmarks/mixing_bench.py [--hours 48] [--sites 24] [--segment-steps 6 24] [--resident 16 64]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from baselines import MB, REPO, read_seconds  # noqa: E402

sys.path.insert(0, str(REPO / "python" / "tests"))
from ocf_stores import write_pvnet_stores  # noqa: E402

BATCH = 32


def spearman(values: np.ndarray) -> float:
    """Rank correlation of position and value (ties share their mean rank)."""
    v = values.astype(np.float64)
    order = np.argsort(v, kind="stable")
    ranks = np.empty(len(v))
    ranks[order] = np.arange(len(v), dtype=np.float64)
    for u in np.unique(v):
        at = v == u
        ranks[at] = ranks[at].mean()
    return float(np.corrcoef(np.arange(len(v), dtype=np.float64), ranks)[0, 1])


def distinct_per_batch(t0s: np.ndarray) -> float:
    n = len(t0s) // BATCH
    return float(np.mean([len(np.unique(t0s[k * BATCH:(k + 1) * BATCH])) for k in range(n)]))


# Every array an epoch of PVNET_CONFIG reads: its chunks are what the epoch must decode.
EPOCH_ARRAYS = ("sat.zarr/data", "ukv.zarr/UKV", "gen.zarr/generation_mw", "gen.zarr/capacity_mwp")


def one_epoch(config: str, cache_mb: int | None, segment_steps: int | None, resident: int | None = None) -> dict:
    import gobatch

    t0s = []
    with gobatch.Loader(config, batch_size=BATCH, order="epochs", cache_mb=cache_mb, segment_steps=segment_steps,
                        resident_segments=resident, framework="numpy") as loader:
        t = time.perf_counter()
        for batch in loader:
            t0s.append(np.asarray(batch["t0"]).copy())
            del batch
        seconds = time.perf_counter() - t
        st = loader.stats()
    epoch = st["last_epoch"]
    t0 = np.concatenate(t0s)
    uniform = np.random.default_rng(0).permutation(t0)
    return {"batches": len(t0s), "batches_per_s": len(t0s) / seconds, "amplification": epoch["decode_amplification"][0],
            "limiting": epoch["limiting_stage"], "distinct": distinct_per_batch(t0),
            "uniform": distinct_per_batch(uniform), "spearman": spearman(t0)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hours", type=float, default=48.0)
    ap.add_argument("--pixels", type=int, default=256)
    ap.add_argument("--sites", type=int, default=24)
    ap.add_argument("--segment-steps", type=int, nargs="*", default=[6, 24])
    ap.add_argument("--resident", type=int, nargs="*", default=[16, 64], help="resident_segments variants")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="mixing-bench-") as tmp:
        root = Path(tmp)
        config = str(write_pvnet_stores(root, hours=args.hours, satellite_pixels=(args.pixels, args.pixels),
                                        n_sites=args.sites))
        os.chdir(root)  # the YAML's zarr_paths are relative
        sat_mb = 2 * int(args.hours * 12) * args.pixels ** 2 * 4 / MB
        small = max(int(sat_mb / 10), 16)
        print(f"stores: {args.hours:g} h, satellite {args.pixels}x{args.pixels} px x 2 channels at 5 min "
              f"({sat_mb:.0f} MB float32), {args.sites} sites, batch size {BATCH}; small cache {small} MB "
              f"({sat_mb / small:.1f}x under the satellite); load average {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")
        parts = {a: read_seconds(root / a, cf=True) for a in EPOCH_ARRAYS}
        loop = sum(parts.values())
        print(f"decode-once loop: every chunk of the epoch's arrays decoded once in {loop:.3f} s ("
              + ", ".join(f"{a} {t:.3f} s" for a, t in parts.items()) + ")")
        variants = [("in cache (decode-once limit)", None, None, None), ("block shuffle (automatic)", small, None, None)]
        variants += [(f"segment_steps {s}", small, s, None) for s in args.segment_steps]
        variants += [(f"resident_segments {g}", small, None, g) for g in args.resident]
        print(f"\n  {'order':<30} {'batch/s':>8} {'vs loop':>8} {'sat ampl':>9} {'limit':>9} {'t0s/batch':>10} {'shuffle':>8} "
              f"{'ratio':>6} {'spearman':>9}")
        for name, cache_mb, steps, resident in variants:
            r = one_epoch(config, cache_mb, steps, resident)
            limit = r["batches"] / loop
            print(f"  {name:<30} {r['batches_per_s']:8.1f} {r['batches_per_s'] / limit:8.2f} {r['amplification']:9.2f} {r['limiting']:>9} "
                  f"{r['distinct']:10.1f} {r['uniform']:8.1f} {r['distinct'] / r['uniform']:6.2f} {r['spearman']:9.3f}",
                  flush=True)
        print(f"\nload average at end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
