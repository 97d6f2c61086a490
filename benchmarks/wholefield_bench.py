#!/usr/bin/env python3
"""Whole-field, decode-bound batches (issue 19): gobatch against a loop that only decodes.

Reanalysis-style training reads whole global fields: here ``--steps`` hourly steps of 8 fields
of 361 x 720 float32, zstd-compressed, stored twice, with 8 fields per chunk
(1, 8, 361, 720) and with 1 field per chunk (1, 1, 361, 720). A ``gobatch.Loader`` with
``order = "epochs"`` delivers batches of 32 whole examples (one step, all 8 fields, the whole
grid: 266 MB a batch) and the trainer gives each batch back untouched. Its cache holds the
whole store, so the first epoch decodes every chunk once and later epochs decode nothing.

Baselines, in the same run on the same chunks, alternated with gobatch round by round:

- ``shmloader read --bench``: the same Go Zarr reader decoding every chunk of the array into
  one array on every core (GOMAXPROCS goroutines), nothing else (the best of two reads after a
  first): the decode-only loop the issue's target (delivered MB/s >= 0.8x) is set against;
- numcodecs (C libzstd) decompressing every chunk into one reused buffer in one process per
  core: decoding and nothing else (no memory touched for the first time, no copy).

MB/s is decoded (delivered) bytes per wall second; ``load`` is the 1-minute load average when
the measurement ended.

Usage::

    python benchmarks/wholefield_bench.py [--steps 192] [--rounds 1] [--epochs 3] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from baselines import REPO, shown  # noqa: E402

H, W, FIELDS, BATCH = 361, 720, 8, 32
NAMES = [f"f{i}" for i in range(FIELDS)]
LAYOUTS = {"8 fields per chunk": FIELDS, "1 field per chunk": 1}


def write_store(path: Path, steps: int, fields_per_chunk: int) -> None:
    """A store of smooth fields plus noise quantised to 1/64 (zstd compresses it about as it
    does reanalysis data), written by xarray/zarr with the zstd codec."""
    import numcodecs
    import xarray as xr

    marker = path / ".complete"
    if marker.exists() and marker.read_text() == f"{steps} {fields_per_chunk}":
        return
    rng = np.random.default_rng(7)
    lat = np.linspace(-90, 90, H, dtype=np.float32)[:, None]
    lon = np.linspace(0, 359.5, W, dtype=np.float32)[None, :]
    base = np.stack([np.cos(np.radians(lat)) * (20 + 5 * f) + np.sin(np.radians(lon * (f + 1))) * 3
                     for f in range(FIELDS)])
    data = np.empty((steps, FIELDS, H, W), np.float32)
    for t in range(steps):
        noise = rng.normal(0, 1, size=(FIELDS, H, W)).astype(np.float32)
        data[t] = np.round((base + np.float32(t % 24) * 0.1 + noise) * 64) / 64
    time_ = np.datetime64("2020-01-01T00:00") + np.arange(steps) * np.timedelta64(1, "h")
    ds = xr.Dataset({"data": (("time", "channel", "y", "x"), data)},
                    coords={"time": time_, "channel": NAMES, "y": lat[:, 0].astype(np.float64),
                            "x": lon[0].astype(np.float64)})
    ds.to_zarr(path, mode="w", zarr_format=2, consolidated=True,
               encoding={"time": {"units": "hours since 2020-01-01", "dtype": "int64"},
                         "data": {"chunks": (1, fields_per_chunk, H, W),
                                  "compressors": (numcodecs.Zstd(level=3),)}})
    marker.write_text(f"{steps} {fields_per_chunk}")


def config(store: str, cache_mb: int) -> dict[str, Any]:
    # Batches of whole examples are large: prefetching a batch's chunks needs a cache of at least
    # two batches (sampler/prefetch.go), so the smaller cache below stays above that.
    return {
        "batch": {"size": BATCH, "seed": 3, "order": "epochs"},
        "ring": {"slots": 3},
        "source": [{"name": "field", "kind": "zarr", "store": store, "variable": "data", "anchor": True,
                    "time_resolution_minutes": 60, "interval_start_minutes": 0, "interval_end_minutes": 0,
                    "image_size_pixels_height": H, "image_size_pixels_width": W, "channels": NAMES,
                    "cache_mb": cache_mb}],
    }


# One process per measurement: a Loader over `epochs` whole epochs, each batch given back.
TRAINER = r"""
import json, os, sys, time, resource
import gobatch
cfg, root, epochs, readers = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
out = []
def child_cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
t_open = time.perf_counter()
with gobatch.Loader(cfg, data_root=root, readers=readers, framework="numpy") as loader:
    n = len(loader)
    for e in range(epochs):
        loader.set_epoch(e)
        t0 = time.perf_counter() if e else t_open
        nbytes = first = 0
        cpu0 = child_cpu(loader.pid) if e else 0.0  # epoch 0: from the child's start
        for batch in loader:
            nbytes += sum(int(a.nbytes) for k, a in batch.items() if k == "field")
            if not first:
                first = time.perf_counter() - t0
            del batch
        out.append({"epoch": e, "batches": n, "seconds": time.perf_counter() - t0, "bytes": nbytes,
                    "first_batch_s": first, "load": os.getloadavg()[0], "cpu_s": child_cpu(loader.pid) - cpu0})
    time.sleep(1.2)  # the job counters are published at least once a second
    st = loader.stats()
    out[-1].update(cache_misses=st.get("cache_misses"), cache_bytes=st.get("cache_bytes"))
print(json.dumps(out))
"""


def run_gobatch(store: Path, cache_mb: int, epochs: int, readers: int) -> list[dict[str, Any]]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"),
               GOBATCH_SHMLOADER=os.environ.get("GOBATCH_SHMLOADER", str(REPO / "bin" / "shmloader")),
               GOBATCH_LIB=os.environ.get("GOBATCH_LIB", str(REPO / "build" / "libgobatch.so")))
    cfg = config(store.name, cache_mb)
    done = subprocess.run([sys.executable, "-c", TRAINER, json.dumps(cfg), str(store.parent), str(epochs),
                           str(readers)], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"gobatch run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_go_decode(store: Path, reads: int) -> dict[str, Any]:
    """`shmloader read --bench`: every chunk of the array decoded on every core, `reads` times."""
    shm = os.environ.get("GOBATCH_SHMLOADER", str(REPO / "bin" / "shmloader"))
    done = subprocess.run([shm, "read", f"{store}/data", "--out", "/dev/null", "--bench", str(reads)],
                          capture_output=True, text=True, check=True)
    line = next(ln for ln in done.stderr.splitlines() if ln.startswith("{") and '"reads"' in ln)
    res = json.loads(line)
    best = min(res["seconds"])
    return {"MBps": res["decoded_bytes"] / best / 1e6, "seconds": best,
            "cpu_s": res["cpu_seconds"][res["seconds"].index(best)], "load": os.getloadavg()[0]}


def _decode_keys(args: tuple[str, list[str], int]) -> int:
    import numcodecs

    root, keys, chunk_bytes = args
    z, n = numcodecs.Zstd(), 0
    out = np.empty(chunk_bytes, np.uint8)  # one buffer, reused: nothing but the decode
    for k in keys:
        z.decode((Path(root) / k).read_bytes(), out=out)
        n += chunk_bytes
    return n


def run_c_decode(store: Path, procs: int) -> dict[str, Any]:
    """numcodecs' Zstd (C libzstd) decompressing every chunk file into one reused buffer, one
    process per core: the plain decode loop, with no memory touched for the first time."""
    arr = store / "data"
    keys = sorted(p.name for p in arr.iterdir() if not p.name.startswith("."))
    meta = json.loads((arr / ".zarray").read_text())
    chunk_bytes = int(np.prod(meta["chunks"])) * np.dtype(meta["dtype"]).itemsize
    parts = [(str(arr), keys[i::procs], chunk_bytes) for i in range(procs)]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with ProcessPoolExecutor(procs) as pool:
        warm = sum(pool.map(_decode_keys, [(str(arr), keys[:procs], chunk_bytes)] * procs))  # the pool, the files
        t = time.perf_counter()
        n = sum(pool.map(_decode_keys, parts))
        secs = time.perf_counter() - t
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)  # the workers, reaped: their CPU, warm-up included
    cpu = ru.ru_utime + ru.ru_stime - ru0.ru_utime - ru0.ru_stime
    return {"MBps": n / secs / 1e6, "seconds": secs, "load": os.getloadavg()[0], "cpu_s_per_gb": cpu / ((n + warm) / 1e9)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=REPO / "data" / "wholefield")
    ap.add_argument("--steps", type=int, default=192, help="hourly steps per store (an epoch is steps // 32 batches)")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1, help="rounds of every measurement (each about 7 minutes on 2 loaded cores)")
    ap.add_argument("--readers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--quick", action="store_true", help="64 steps, 1 round")
    args = ap.parse_args()
    if args.quick:
        args.steps, args.rounds = 64, 1
    args.data.mkdir(parents=True, exist_ok=True)
    decoded_mb = args.steps * FIELDS * H * W * 4 / 2**20
    cache_mb = int(decoded_mb * 1.5) + 64
    stores = {}
    for name, fpc in LAYOUTS.items():
        stores[name] = args.data / f"fields{fpc}.zarr"
        write_store(stores[name], args.steps, fpc)
    cpus = os.cpu_count() or 1
    half_mb = int(decoded_mb / 2)
    print(f"wholefield_bench: {args.steps} steps x {FIELDS} fields x {H} x {W} float32 (zstd level 3), "
          f"{decoded_mb:.0f} MiB decoded per store in {shown(args.data)}; batch {BATCH} "
          f"({BATCH * FIELDS * H * W * 4 / 1e6:.0f} MB); cache_mb {cache_mb} (all) or {half_mb} (half); "
          f"readers {args.readers}; {cpus} CPUs; load {os.getloadavg()[0]:.1f}", flush=True)
    rows: list[tuple[str, int, str, float, float, str, str, str]] = []

    def add(layout: str, r: int, method: str, mbps: float, go: dict[str, Any], cpu_per_gb: float | None,
            note: str) -> None:
        cpu = f"{cpu_per_gb:.2f}" if cpu_per_gb is not None else ""
        eff = f"{go['cpu_s'] / go['gb'] / cpu_per_gb:.2f}" if cpu_per_gb else ""
        rows.append((layout, r, method, mbps, mbps / go["MBps"], cpu, eff, note))
        print(f"  {layout}, round {r}: {method}: {mbps:.0f} MB/s ({mbps / go['MBps']:.2f}x), CPU s/GB {cpu or '-'} "
              f"(efficiency {eff or '-'}); {note}", flush=True)

    for r in range(args.rounds):
        for name, store in stores.items():
            go = run_go_decode(store, 2)
            go["gb"] = go["MBps"] * go["seconds"] / 1e3
            add(name, r, "decode only: Go reader (shmloader read), all cores", go["MBps"], go, go["cpu_s"] / go["gb"],
                f"load {go['load']:.1f}")
            c = run_c_decode(store, cpus)
            add(name, r, f"decode only: numcodecs C zstd into a reused buffer, {cpus} processes", c["MBps"], go,
                c["cpu_s_per_gb"], f"load {c['load']:.1f}")
            for cache_name, mb, epochs in (("cache holds all", cache_mb, args.epochs), ("cache holds half", half_mb, 2)):
                for ep in run_gobatch(store, mb, epochs, args.readers):
                    gb = ep["bytes"] / 1e9
                    note = f"{ep['batches']} batches in {ep['seconds']:.2f} s"
                    if ep["epoch"] == 0:
                        note += f", first batch {ep['first_batch_s']:.2f} s from opening"
                        rest = ep["seconds"] - ep["first_batch_s"]
                        if ep["batches"] > 2 and rest > 0.2 * ep["seconds"]:  # else the rest was ready at once
                            steady = ep["bytes"] * (1 - 1 / ep["batches"]) / rest / 1e6
                            note += f"; after it {steady:.0f} MB/s ({steady / go['MBps']:.2f}x)"
                    if ep.get("cache_misses") is not None:
                        note += f"; chunk misses after all epochs {ep['cache_misses']}"
                    add(name, r, f"gobatch, {cache_name}, epoch {ep['epoch']}", ep["bytes"] / ep["seconds"] / 1e6, go,
                        ep["cpu_s"] / gb, note + f"; load {ep['load']:.1f}")
    print()
    print("MB/s: bytes decoded (baselines) or delivered in whole batches (gobatch, epoch 0 timed from the Loader's "
          "construction) per wall second. CPU s/GB: the decoding process's (shmloader's) user+system CPU per GB; "
          "efficiency: the Go decode loop's CPU s/GB over this row's (1.00: as little CPU per byte as decoding alone).")
    print()
    print("| layout | round | method | MB/s | x Go decode-only | CPU s/GB | CPU efficiency | note |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    for row in rows:
        print(f"| {row[0]} | {row[1]} | {row[2]} | {row[3]:.0f} | {row[4]:.2f} | {row[5]} | {row[6]} | {row[7]} |")
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
