#!/usr/bin/env python3
"""End-to-end nowcast-ref benchmark: gobatch against PyTorch DataLoader + xarray, one run.

On the same generated files (tools/gen_nowcast.py) and in the same run it measures:

- gobatch (``gobatch.Loader`` over presets/nowcast.toml, torch tensors, readers 1 and 2);
- a PyTorch ``DataLoader`` (batch_size 32, num_workers 0, 1, 2) over a ``Dataset`` that
  samples the same example with xarray (benchmarks/baselines.py), (a) lazily from the Zarr
  stores, (b) after loading everything into RAM;
- the roofline: ``np.copyto`` of one batch's bytes (30.3 MB).

For each: batches/s and MB/s (consumer taking batches as fast as it can), time to the first
batch (from constructing the loader, so opening and loading count), peak RSS and PSS summed
over every process involved (trainer, workers or shmloader), CPU seconds per batch (all those
processes), and the data-stall fraction of a consumer that simulates a GPU-bound training step
of ``--step-ms`` after each batch (time waited for data / wall time).

Then the larger-than-cache case: the same workload on ``--large-days`` of data (decoded several
times gobatch's ``cache_mb`` of 1024), gobatch against the lazy baseline (the RAM baseline
cannot hold it by definition).

Every measurement is bounded: ``--batches`` batches or ``--seconds`` seconds, whichever first.
Writes benchmarks/out/nowcast_bench.{md,json,png} and prints the table.

Usage::

    python benchmarks/nowcast_bench.py --quick          # about 2 minutes, no large case
    python benchmarks/nowcast_bench.py                  # the full run (about 10 minutes)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import subprocess
import sys
import textwrap
import time
import tomllib
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from baselines import MB, REPO, Result, ensure_dataset, make_dataloader, measure, memcpy_MBps, shown  # noqa: E402

OUT = REPO / "benchmarks" / "out"
PRESET = REPO / "presets" / "nowcast.toml"


def gobatch_config(preset: Path, cache_mb: int | None, seed: int) -> dict[str, Any]:
    """The preset as a dict, with an unbounded stream, ``seed`` and the cache budget set
    (every ``cache_mb`` key of the preset, else the anchor source's)."""
    cfg = tomllib.loads(preset.read_text())
    cfg.setdefault("batch", {})
    cfg["batch"]["batches"] = 0
    cfg["batch"]["seed"] = seed
    if cache_mb is not None:
        found = False

        def walk(t: Any) -> None:
            nonlocal found
            if isinstance(t, dict):
                for k, v in t.items():
                    if k == "cache_mb":
                        t[k] = cache_mb
                        found = True
                    else:
                        walk(v)
            elif isinstance(t, list):
                for v in t:
                    walk(v)

        walk(cfg)
        if not found:  # the budget belongs to the anchor source (sampler/spec.go)
            anchors = [s for s in cfg.get("source", []) if s.get("anchor")]
            if not anchors:
                raise KeyError(f"{preset} has no cache_mb key and no anchor source to set it on")
            anchors[0]["cache_mb"] = cache_mb
    return cfg


def gobatch_result(name: str, root: Path, readers: int, args: argparse.Namespace,
                   cache_mb: int | None = None) -> Result:
    try:
        import gobatch
    except ImportError as e:
        return Result(name=name, note=f"not measured: import gobatch failed ({e})")
    try:
        cfg = gobatch_config(Path(args.preset), cache_mb, args.seed)
    except (OSError, KeyError, tomllib.TOMLDecodeError) as e:
        return Result(name=name, note=f"not measured: preset: {e}")
    stats: dict[str, Any] = {}

    def make() -> Any:
        return gobatch.Loader(cfg, framework="torch", data_root=str(root), readers=readers)

    def close(loader: Any) -> None:
        try:
            stats.update(loader.stats())
        finally:
            loader.close()

    try:
        r = measure(name, make, args.batches, args.seconds, step_ms=args.step_ms,
                    stall_batches=args.stall_batches, close=close)
    except Exception as e:  # the sampler may not have landed yet: say so in the table
        return Result(name=name, note=f"not measured: {type(e).__name__}: {e}"[:300])
    hits = stats.get("cache_hit_rate")
    if hits is not None:
        r.note = f"cache hit rate {hits:.2f}"
    return r


def baseline_result(name: str, root: Path, mode: str, workers: int, args: argparse.Namespace) -> Result:
    try:
        return measure(name, lambda: make_dataloader(root, mode, workers, seed=args.seed),
                       args.baseline_batches, args.seconds, step_ms=args.step_ms,
                       stall_batches=min(args.stall_batches, args.baseline_batches))
    except Exception as e:
        return Result(name=name, note=f"failed: {type(e).__name__}: {e}"[:300])


def fmt(v: float, spec: str) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def table(rows: list[Result], roof: float) -> str:
    out = ["| method | batches/s | MB/s | x roofline | first batch s | peak RSS MB | peak PSS MB "
           "| CPU s/batch | stall | batches | load | note |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        if not r.batches:
            out.append(f"| {r.name} | | | | | | | | | | | {r.note} |")
            continue
        out.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            r.name, fmt(r.batches_per_s, ".2f"), fmt(r.MB_per_s, ".0f"), fmt(r.MB_per_s / roof, ".3f"),
            fmt(r.first_batch_s, ".2f"), fmt(r.peak_rss / MB, ".0f"), fmt(r.peak_pss / MB, ".0f"),
            fmt(r.cpu_s_per_batch, ".3f"), fmt(r.stall, ".2f"), r.batches, fmt(r.loadavg, ".1f"), r.note))
    return "\n".join(out)


def plot(cases: dict[str, list[Result]], roof_bps: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(cases), figsize=(6.5 * len(cases), 4.2), squeeze=False)
    for ax, (title, rows) in zip(axes[0], cases.items()):
        rows = [r for r in rows if r.batches]
        names = [r.name for r in rows]
        vals = [r.batches_per_s for r in rows]
        colors = ["tab:green" if n.startswith("gobatch") else "tab:gray" for n in names]
        ax.barh(names, vals, color=colors)
        ax.axvline(roof_bps, color="tab:red", linestyle="--", label=f"memcpy roofline {roof_bps:.0f}/s")
        ax.set_xscale("log")
        ax.set_xlabel("batches/s (log scale, 32 examples, 30.3 MB each)")
        ax.set_title("\n".join(textwrap.wrap(title, 60)), fontsize=10)
        ax.invert_yaxis()
        for y, v in enumerate(vals):
            ax.text(v, y, f" {v:.1f}", va="center", fontsize=8)
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def measure_one(spec: dict[str, Any], args: argparse.Namespace) -> Result:
    """One measurement in this process (the ``--one`` child)."""
    root = Path(spec["root"])
    if spec["kind"] == "gobatch":
        return gobatch_result(spec["name"], root, spec["readers"], args, spec.get("cache_mb"))
    return baseline_result(spec["name"], root, spec["mode"], spec["workers"], args)


def run_isolated(spec: dict[str, Any], args: argparse.Namespace) -> Result:
    """One measurement in a fresh Python process, so that no method inherits another's memory,
    threads or imports (the trainer's RSS is its own), and a crash costs one row only."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--one", json.dumps(spec),
           "--preset", args.preset, "--batches", str(args.batches), "--baseline-batches",
           str(args.baseline_batches), "--seconds", str(args.seconds), "--step-ms", str(args.step_ms),
           "--stall-batches", str(args.stall_batches), "--seed", str(args.seed)]
    limit = 3 * args.seconds + 240  # two bounded phases, set-up (the RAM load), teardown
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return Result(name=spec["name"], note=f"not measured: over {limit:.0f} s")
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        tail = (p.stderr.strip().splitlines() or ["?"])[-1]
        return Result(name=spec["name"], note=f"failed (exit {p.returncode}): {tail}"[:300])
    d = json.loads(lines[-1])
    known = {f.name for f in dataclasses.fields(Result)}
    return Result(**{k: v for k, v in d.items() if k in known})


def run_case(title: str, root: Path, args: argparse.Namespace, modes: list[str], workers: list[int],
             readers: list[int], cache_mb: int | None) -> list[Result]:
    specs: list[dict[str, Any]] = []
    for r in readers:
        specs.append({"kind": "gobatch", "name": f"gobatch readers={r}", "root": str(root), "readers": r,
                      "cache_mb": cache_mb})
    for mode in modes:
        for w in workers:
            specs.append({"kind": "baseline", "name": f"DataLoader xarray {mode} workers={w}",
                          "root": str(root), "mode": mode, "workers": w})
    rows: list[Result] = []
    for spec in specs:
        print(f"  [{title}] {spec['name']} ...", flush=True)
        rows.append(run_isolated(spec, args))
        r = rows[-1]
        print(f"    {r.batches_per_s:.2f} batches/s, first batch {r.first_batch_s:.2f} s {r.note}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--quick", action="store_true", help="short measurements, no large case")
    ap.add_argument("--data", default=str(REPO / "data" / "nowcast-small"), help="small dataset dir")
    ap.add_argument("--days", type=float, default=1.0, help="days of the small dataset")
    ap.add_argument("--large", dest="large", action="store_true", default=None, help="run the large case")
    ap.add_argument("--no-large", dest="large", action="store_false")
    ap.add_argument("--large-data", default=str(REPO / "data" / "nowcast-large"))
    ap.add_argument("--large-days", type=float, default=8.0,
                    help="days of the large dataset (8: 3.6 GB int16, 7.2 GB float32 decoded)")
    ap.add_argument("--cache-mb", type=int, default=1024, help="gobatch cache budget, large case")
    ap.add_argument("--preset", default=str(PRESET))
    ap.add_argument("--batches", type=int, help="max batches per gobatch measurement")
    ap.add_argument("--baseline-batches", type=int, help="max batches per baseline measurement")
    ap.add_argument("--seconds", type=float, help="max seconds per measurement phase")
    ap.add_argument("--step-ms", type=float, default=20.0, help="simulated training step for the stall figure")
    ap.add_argument("--stall-batches", type=int, help="batches of the stall phase")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: one measurement, JSON on stdout
    args = ap.parse_args(argv)
    q = args.quick
    args.batches = args.batches or (40 if q else 400)
    args.baseline_batches = args.baseline_batches or (20 if q else 200)
    args.seconds = args.seconds or (4.0 if q else 20.0)
    args.stall_batches = args.stall_batches or (10 if q else 60)
    if args.large is None:
        args.large = not q
    if args.one:
        print(json.dumps(measure_one(json.loads(args.one), args).as_dict(), default=str))
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    print(f"nowcast_bench: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
          f"{' (quick)' if q else ''}", flush=True)
    load0 = os.getloadavg()[0]
    small = ensure_dataset(Path(args.data), args.days)
    batch_bytes = 30_255_872  # docs/WORKLOAD.md: one batch, all tensors (checked against the loaders)
    roof = memcpy_MBps(batch_bytes)
    print(f"  roofline: np.copyto of {batch_bytes / MB:.1f} MB: {roof:.0f} MB/s "
          f"({roof * MB / batch_bytes:.0f} batches/s)", flush=True)

    cases: dict[str, list[Result]] = {}
    workers = [0, 1, 2]
    title = f"small: {small['params']['days']:g} days, data fits in RAM"
    cases[title] = run_case(title, Path(args.data), args, ["lazy", "ram"], workers, [1, 2], None)
    large = None
    if args.large:
        large = ensure_dataset(Path(args.large_data), args.large_days)
        sat = large["stores"]["satellite.zarr"]
        title = (f"larger than cache: {large['params']['days']:g} days, satellite {sat['raw_bytes'] / 1e9:.1f} GB "
                 f"int16 / {sat['float32_bytes'] / 1e9:.1f} GB float32, cache_mb {args.cache_mb}")
        cases[title] = run_case(title, Path(args.large_data), args, ["lazy"], [2], [2], args.cache_mb)

    for rows in cases.values():
        for r in rows:
            if r.batches and r.batch_bytes != batch_bytes:
                r.note = (r.note + f"; batch is {r.batch_bytes} bytes, not {batch_bytes}").lstrip("; ")

    lines = [f"# nowcast-ref end-to-end benchmark", "",
             f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}{' (--quick)' if q else ''}.",
             f"Batch: 32 examples, {batch_bytes / MB:.1f} MB. Roofline (np.copyto of one batch): "
             f"{roof:.0f} MB/s. Each phase: at most {args.batches} (gobatch) / {args.baseline_batches} "
             f"(baseline) batches or {args.seconds:g} s. Stall: consumer sleeps {args.step_ms:g} ms per "
             f"batch (a GPU-bound step), up to {args.stall_batches} batches.",
             "Memory: peak of the summed RSS (shared pages counted in every process) and of the summed "
             "PSS (shared pages split) over the trainer and its child processes. CPU s/batch: user + "
             "system time of all those processes in the throughput phase. Each row runs in a fresh "
             "Python process. load: the machine's 1-minute load average when the row finished (the "
             "machine is shared; figures from a loaded machine are lower).",
             f"Load average at the start of the run: {load0:.1f}.", ""]
    for n, (title, rows) in enumerate(cases.items()):
        lines += [f"## {title}", "", table(rows, roof), ""]
        if n == 1:
            lines += ["The preset's `sampling = \"auto\"` makes gobatch use locality sampling here (the "
                      "decoded data is larger than the cache): each batch draws its examples from a resident "
                      "set of time segments that rotates every `rotate_every_batches` batches, while the "
                      "baseline draws every example uniformly from all t0.", ""]
        go = [r for r in rows if r.name.startswith("gobatch") and r.batches]
        base = [r for r in rows if not r.name.startswith("gobatch") and r.batches]
        if go and base:
            bg = max(go, key=lambda r: r.batches_per_s)
            bb = max(base, key=lambda r: r.batches_per_s)
            lines += [f"Best gobatch ({bg.name}) / best baseline ({bb.name}): "
                      f"{bg.batches_per_s / bb.batches_per_s:.2f}x batches/s; gobatch MB/s is "
                      f"{bg.MB_per_s / roof:.3f} of the memcpy roofline.", ""]
    md = "\n".join(lines)
    (out / "nowcast_bench.md").write_text(md + "\n")
    (out / "nowcast_bench.json").write_text(json.dumps(
        {"roofline_MB_per_s": roof, "batch_bytes": batch_bytes, "args": vars(args),
         "datasets": {"small": small, "large": large},
         "cases": {t: [r.as_dict() for r in rows] for t, rows in cases.items()}}, indent=1, default=str) + "\n")
    plot(cases, roof * MB / batch_bytes, out / "nowcast_bench.png")
    print()
    print(md)
    print(f"wrote {shown(out / 'nowcast_bench.md')}, .json, .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
