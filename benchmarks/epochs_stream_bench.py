#!/usr/bin/env python3
"""Epochs against the stream at the same cache (issue 19), nowcast-ref larger than the cache.

presets/nowcast.toml over ``--days`` of nowcast-ref (8: 3.6 GB of int16 satellite chunks
decoded) with the anchor's ``cache_mb`` at each of ``--cache-mb`` (512 and 1024: the data about
7x and 3.5x the cache), ``readers`` 2, batch 32, two orders alternated in one run:

- ``stream``: the endless stream; with ``sampling = "auto"`` and data larger than the cache,
  locality sampling (a resident set of time segments that rotates) -- the baseline;
- ``epochs``: ``order = "epochs"``, a whole epoch (every t0 candidate once) in the block
  shuffle.

Each measurement is a fresh process: a ``gobatch.Loader`` takes as many batches as one epoch
holds (the stream the same count), each given back untouched. batches/s is over the batches
after the first (the first batch's seconds, from the Loader's construction, are shown apart);
chunk misses per batch are the producer's cache misses over the batches it produced; segments
per batch are ``stats()``'s; Spearman(position, t0) is computed here from the batches' own
``t0`` tensors (example position in the run against t0), beside the plan's expectation.
``load`` is the 1-minute load average at the end of each measurement.

Usage::

    python benchmarks/epochs_stream_bench.py [--days 8] [--cache-mb 512,1024] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from baselines import REPO, ensure_dataset, shown  # noqa: E402

TRAINER = r"""
import json, os, sys, time
import numpy as np
import gobatch
cfg, root, readers, n = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
t = time.perf_counter()
t0s = []
with gobatch.Loader(cfg, data_root=root, readers=readers) as loader:
    it = iter(loader)
    for k in range(n):
        b = next(it)
        if k == 0:
            first = time.perf_counter() - t
            t1 = time.perf_counter()
        t0s.append(np.array(b["t0"]).tolist())
        del b
    secs = time.perf_counter() - t1
    time.sleep(1.2)  # the job counters are published at least once a second
    st = loader.stats()
print(json.dumps({"first_s": first, "seconds": secs, "batches": n, "t0": t0s, "load": os.getloadavg()[0],
                  "cache_misses": st.get("cache_misses", 0), "produced": st.get("segments_batches", 0),
                  "segments_per_batch": st.get("segments_per_batch", 0.0)}))
"""


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (average ranks for ties)."""
    def ranks(v: np.ndarray) -> np.ndarray:
        order = np.argsort(v, kind="stable")
        r = np.empty(len(v), np.float64)
        r[order] = np.arange(len(v))
        _, inv, counts = np.unique(v, return_inverse=True, return_counts=True)
        sums = np.bincount(inv, weights=r)
        return (sums / counts)[inv]
    return float(np.corrcoef(ranks(x), ranks(y))[0, 1])


def config(order: str, cache_mb: int, segment_steps: int = 0) -> dict[str, Any]:
    import tomllib

    cfg = tomllib.loads((REPO / "presets" / "nowcast.toml").read_text())
    cfg["batch"].update(order=order, seed=0)
    cfg["batch"].pop("batches", None)
    anchor = next(s for s in cfg["source"] if s.get("anchor"))
    anchor.update(cache_mb=cache_mb)
    if segment_steps:
        anchor.update(segment_steps=segment_steps)
    return cfg


def measure(cfg: dict[str, Any], root: Path, readers: int, n: int) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"),
               GOBATCH_SHMLOADER=os.environ.get("GOBATCH_SHMLOADER", str(REPO / "bin" / "shmloader")),
               GOBATCH_LIB=os.environ.get("GOBATCH_LIB", str(REPO / "build" / "libgobatch.so")))
    done = subprocess.run([sys.executable, "-c", TRAINER, json.dumps(cfg), str(root), str(readers), str(n)],
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"Loader failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=REPO / "data" / "nowcast-large")
    ap.add_argument("--days", type=float, default=8.0)
    ap.add_argument("--cache-mb", default="512,1024")
    ap.add_argument("--readers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--segment-steps", type=int, default=0,
                    help="also measure epochs with this anchor segment_steps (the block shuffle's segment length)")
    ap.add_argument("--quick", action="store_true", help="1 day at cache_mb 128, one round")
    args = ap.parse_args()
    if args.quick:
        args.data, args.days, args.cache_mb, args.rounds = REPO / "data" / "nowcast-d1", 1.0, "128", 1
    ensure_dataset(args.data, days=args.days, quiet=True)
    import gobatch

    caches = [int(c) for c in args.cache_mb.split(",")]
    print(f"epochs_stream_bench: nowcast-ref {args.days:g} days in {shown(args.data)}; presets/nowcast.toml, "
          f"readers {args.readers}; {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.1f}", flush=True)
    rows = []
    for cache in caches:
        plan = gobatch.plan(config("epochs", cache), data_root=str(args.data))
        n = int(plan["epoch_batches"])
        mix = plan.get("mixing") or {}
        print(f"  cache_mb {cache}: decoded {plan['decoded_bytes'] / 2**30:.2f} GiB "
              f"({plan['decoded_bytes'] / plan['cache_bytes']:.1f}x the cache); epoch {n} batches; plan: "
              f"{mix.get('segments')} segments of {mix.get('segment_steps')} steps, {mix.get('resident_segments')} "
              f"per group, {mix.get('segments_per_batch', 0):.1f} segments per batch, Spearman "
              f"{mix.get('spearman_position_t0', 0):.3f}; {plan['sampling_why']}", flush=True)
        for r in range(args.rounds):
            orders = ["stream", "epochs"] if r % 2 == 0 else ["epochs", "stream"]
            if args.segment_steps:
                orders.append(f"epochs, segment_steps {args.segment_steps}")
            got = {}
            for order in orders:
                steps = args.segment_steps if "segment_steps" in order else 0
                m = measure(config(order.split(",")[0], cache, steps), args.data, args.readers, n)
                t0 = np.asarray(m["t0"], np.int64).ravel()
                m["rho"] = spearman(np.arange(len(t0)), t0)
                m["bps"] = (m["batches"] - 1) / m["seconds"]
                got[order] = m
                print(f"    round {r}, {order}: {m['bps']:.2f} batches/s, first batch {m['first_s']:.2f} s, "
                      f"{m['cache_misses'] / max(m['produced'], 1):.2f} misses/batch, "
                      f"{m['segments_per_batch']:.1f} segments/batch, Spearman {m['rho']:.3f}, "
                      f"load {m['load']:.1f}", flush=True)
            for order in sorted(got, key=lambda o: (o != "stream", o)):
                m = got[order]
                rows.append((cache, r, order, m, m["bps"] / got["stream"]["bps"]))
    print()
    print("| cache_mb | round | order | batches | batches/s | x stream | first batch s | chunk misses/batch | "
          "segments/batch | Spearman(position, t0) | load |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for cache, r, order, m, x in rows:
        print(f"| {cache} | {r} | {order} | {m['batches']} | {m['bps']:.2f} | {x:.2f} | {m['first_s']:.2f} | "
              f"{m['cache_misses'] / max(m['produced'], 1):.2f} | {m['segments_per_batch']:.1f} | {m['rho']:.3f} | "
              f"{m['load']:.1f} |")
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
