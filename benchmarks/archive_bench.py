#!/usr/bin/env python3
"""A simulated archive (issue 19): planning and opening a year of 5-minute steps x 300 sites.

tools/gen_archive.py writes the metadata of a satellite store and a PV store of ``--steps``
5-minute steps (105120: one year) and ``--sites`` sites, with only a few real chunks (the rest
read as the fill value). For a site-anchored configuration (``locations = "pv"``: every
(t0, site) pair is a sample, 3 x 10^7 of them) and a pixel-anchored one, with
``order = "epochs"`` and a cache far smaller than the decoded archive:

- ``shmloader plan``: wall seconds and peak RSS of the process;
- a ``gobatch.Loader``: seconds from its construction to the first batch, and the child's peak
  RSS (VmHWM) then, beside the bytes its chunk cache and its ring hold.

Baseline, in the same run: the same configurations over a store of one day (288 steps), so the
ratios say what the year costs over a day (the issue's targets: start-up <= 2 s and <= 200 MB of
tables). ``load`` is the 1-minute load average when the measurement ended.

Usage::

    python benchmarks/archive_bench.py [--rounds 2] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from baselines import REPO, shown  # noqa: E402
import gen_archive  # noqa: E402

SHMLOADER = os.environ.get("GOBATCH_SHMLOADER", str(REPO / "bin" / "shmloader"))


def config(sites: bool, cache_mb: int = 256) -> dict[str, Any]:
    anchor: dict[str, Any] = {
        "name": "satellite", "kind": "zarr", "store": "satellite.zarr", "variable": "data", "anchor": True,
        "time_resolution_minutes": 5, "interval_start_minutes": -30, "interval_end_minutes": 0,
        "image_size_pixels_height": 16, "image_size_pixels_width": 16, "channels": gen_archive.CHANNELS,
        "cache_mb": cache_mb}
    if sites:
        anchor["locations"] = "pv"
    return {
        "batch": {"size": 32, "seed": 0, "order": "epochs"},
        "ring": {"slots": 2},
        "source": [anchor, {"name": "pv", "kind": "zarr", "store": "pv.zarr", "variable": "generation",
                            "role": "points", "nearest_k": 4, "time_resolution_minutes": 5,
                            "interval_start_minutes": -30, "interval_end_minutes": 30}],
    }


def ensure(root: Path, steps: int, sites: int) -> None:
    marker = root / ".complete"
    want = f"{steps} {sites}"
    if marker.exists() and marker.read_text() == want:
        return
    gen_archive.generate(root, steps=steps, sites=sites)
    marker.write_text(want)


# Runs argv[1:], then prints its wall seconds, exit code and peak RSS (KiB) on stderr. Linux counts
# in a process's ru_maxrss the memory it had before its exec, so the command is forked from this
# small interpreter (python -S -I, about 5 MB), not from the benchmark's: an upper bound on the
# command's own peak, off by at most those few MB.
PEAK_RSS = """
import os, sys, time
t = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(time.perf_counter() - t, os.waitstatus_to_exitcode(status), usage.ru_maxrss, file=sys.stderr)
"""


def run_plan(cfg: dict[str, Any], root: Path) -> dict[str, Any]:
    """`shmloader plan --json`: wall seconds and the process's peak RSS (from wait4)."""
    done = subprocess.run([sys.executable, "-S", "-I", "-c", PEAK_RSS, SHMLOADER, "plan", "--config", "-",
                           "--data-root", str(root), "--json"], input=json.dumps(cfg).encode(), capture_output=True)
    err = done.stderr.decode(errors="replace")
    secs, code, peak_kib = err.strip().splitlines()[-1].split()
    if int(code) != 0:
        raise SystemExit(f"shmloader plan failed:\n{err[-3000:]}")
    plan = json.loads(done.stdout)
    return {"seconds": float(secs), "rss_mb": int(peak_kib) / 1024, "plan": plan, "load": os.getloadavg()[0]}


# One process per measurement: construct a Loader, take the first batch, read the child's figures.
FIRST = r"""
import json, os, sys, time
import gobatch
cfg, root = json.loads(sys.argv[1]), sys.argv[2]
t = time.perf_counter()
with gobatch.Loader(cfg, data_root=root, framework="numpy") as loader:
    batch = next(iter(loader))
    first = time.perf_counter() - t
    n = len(loader)
    hwm = rss = 0
    for line in open(f"/proc/{loader.pid}/status"):
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1]) / 1024
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    time.sleep(1.2)  # the job counters are published at least once a second
    st = loader.stats()
    ring_mb = loader.slots * sum(int(a.nbytes) for a in batch.values()) / 2**20
    del batch
print(json.dumps({"first_batch_s": first, "child_hwm_mb": hwm, "child_rss_mb": rss, "batches_per_epoch": n,
                  "cache_mb": (st.get("cache_bytes") or 0) / 2**20, "ring_mb": ring_mb, "load": os.getloadavg()[0]}))
"""


def run_first(cfg: dict[str, Any], root: Path) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"), GOBATCH_SHMLOADER=SHMLOADER,
               GOBATCH_LIB=os.environ.get("GOBATCH_LIB", str(REPO / "build" / "libgobatch.so")))
    done = subprocess.run([sys.executable, "-c", FIRST, json.dumps(cfg), str(root)], env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"Loader failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=REPO / "data" / "archive-sim")
    ap.add_argument("--steps", type=int, default=105120)
    ap.add_argument("--sites", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="one round")
    args = ap.parse_args()
    if args.quick:
        args.rounds = 1
    stores = {"1 day (288 steps, baseline)": (args.data / "day", 288),
              f"{args.steps} steps": (args.data / "year", args.steps)}
    for root, steps in stores.values():
        ensure(root, steps, args.sites)
    print(f"archive_bench: {args.sites} sites, 64 x 64 px satellite, batch 32, order epochs, cache_mb 256; "
          f"data in {shown(args.data)}; {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.1f}", flush=True)
    rows = []
    for r in range(args.rounds):
        for mode in ("sites", "pixels"):
            base: dict[str, Any] = {}
            for name, (root, steps) in stores.items():
                cfg = config(mode == "sites")
                pl = run_plan(cfg, root)
                fb = run_first(cfg, root)
                p = pl["plan"]
                mix = p.get("mixing") or {}  # none when the data fits the cache (one permutation)
                row = {"round": r, "mode": mode, "store": name, "plan_s": pl["seconds"], "plan_rss_mb": pl["rss_mb"],
                       "first_s": fb["first_batch_s"], "child_hwm_mb": fb["child_hwm_mb"],
                       "cache_mb": fb["cache_mb"], "ring_mb": fb["ring_mb"], "batches": fb["batches_per_epoch"],
                       "samples": p.get("samples"), "segments": mix.get("segments"),
                       "rho": mix.get("spearman_position_t0", float("nan")),
                       "load": max(pl["load"], fb["load"])}
                if not base:
                    base = row
                row["x_plan_s"] = row["plan_s"] / base["plan_s"]
                row["x_first_s"] = row["first_s"] / base["first_s"]
                rows.append(row)
                print(f"  round {r}, {mode}, {name}: plan {row['plan_s']:.2f} s, {row['plan_rss_mb']:.0f} MB RSS; "
                      f"first batch {row['first_s']:.2f} s, loader peak RSS {row['child_hwm_mb']:.0f} MB "
                      f"(cache {row['cache_mb']:.0f} MB, ring {row['ring_mb']:.1f} MB); "
                      f"{row['samples']} samples, {row['segments'] or 'no'} segments, Spearman {row['rho']:.3f}; load {row['load']:.1f}", flush=True)
    print()
    print("| round | anchor | store | plan s | x 1 day | plan peak RSS MB | first batch s | x 1 day | "
          "loader peak RSS MB | of it cache MB | ring MB | samples per epoch | segments | Spearman | load |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for w in rows:
        print(f"| {w['round']} | {w['mode']} | {w['store']} | {w['plan_s']:.2f} | {w['x_plan_s']:.2f} | "
              f"{w['plan_rss_mb']:.0f} | {w['first_s']:.2f} | {w['x_first_s']:.2f} | {w['child_hwm_mb']:.0f} | "
              f"{w['cache_mb']:.0f} | {w['ring_mb']:.1f} | {w['samples']} | {w['segments'] or ''} | {w['rho']:.3f} | "
              f"{w['load']:.1f} |")
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
