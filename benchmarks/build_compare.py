#!/usr/bin/env python3
"""This build against another, in the same run on the same data, alternated.

A refactor must keep the figures: this runs gobatch's own Loader, built from this checkout and
from another (``--old DIR``: a checkout of an earlier commit with ``bin/shmloader`` and
``build/libgobatch.so`` built, e.g. ``git worktree add /tmp/old <commit> && make -C /tmp/old
go-build clib``), on the same stores, round after round with the order of the two builds
alternated, each run in a fresh process (the other build's Python package, C library and
shmloader through PYTHONPATH, GOBATCH_LIB and GOBATCH_SHMLOADER). Cases:

- ``ocf in cache``, ``ocf 1/5 cache``: an ocf-data-sampler YAML (python/tests/ocf_stores.py's
  PVNet stores), ``order="epochs"``, torch tensors, the cache holding everything and a fifth
  of the satellite (as benchmarks/ocf_bench.py);
- ``nowcast``: the reference workload's preset (presets/nowcast.toml on tools/gen_nowcast.py's
  files, as benchmarks/nowcast_bench.py), torch tensors.

It prints batches/s per run and, per case, the median of new / old over the rounds.

Usage::

    python benchmarks/build_compare.py --old DIR [--rounds 3] [--seconds 6] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from baselines import MB, REPO, ensure_dataset, measure  # noqa: E402

CASES = ("ocf in cache", "ocf 1/5 cache", "nowcast")


def child(case: str, data: Path, seconds: float) -> None:
    """One run of one case in this process, with whichever gobatch the environment gives."""
    import gobatch

    if case == "nowcast":
        from nowcast_bench import PRESET, gobatch_config

        cfg = gobatch_config(PRESET, None, 0)

        def make() -> object:
            return gobatch.Loader(cfg, data_root=str(data / "nowcast"), framework="torch")
    else:
        os.chdir(data / "ocf")  # the YAML's zarr_paths are relative, as ocf-data-sampler resolves them
        spec = json.loads((data / "ocf" / "bench.json").read_text())
        cache_mb = None if case == "ocf in cache" else spec["small_cache_mb"]

        def make() -> object:
            return gobatch.Loader(spec["config"], batch_size=spec["batch_size"], order="epochs",
                                  framework="torch", cache_mb=cache_mb)

    class Endless:  # epoch after epoch, as a training run goes on
        def __init__(self) -> None:
            self.loader = make()

        def __iter__(self):  # type: ignore[no-untyped-def]
            while True:
                yield from self.loader

    r = measure(case, Endless, max_batches=100000, max_seconds=seconds, close=lambda e: e.loader.close())
    print(json.dumps({"batches_per_s": r.batches_per_s, "first_batch_s": r.first_batch_s, "gobatch": gobatch.__file__}))


def prepare(data: Path, quick: bool, batch_size: int) -> None:
    """The stores both builds read: the PVNet stores with their YAML, the nowcast files."""
    sys.path.insert(0, str(REPO / "python" / "tests"))
    from ocf_stores import write_pvnet_stores

    hours, pixels, sites = (12.0, 256, 12) if quick else (24.0, 256, 24)
    ocf = data / "ocf"
    ocf.mkdir(parents=True, exist_ok=True)
    config = str(write_pvnet_stores(ocf, hours=hours, satellite_pixels=(pixels, pixels), n_sites=sites))
    sat_mb = 2 * int(hours * 12) * pixels ** 2 * 4 / MB
    (ocf / "bench.json").write_text(json.dumps({"config": config, "batch_size": batch_size,
                                                "small_cache_mb": max(int(sat_mb / 5), 16)}))
    ensure_dataset(data / "nowcast", days=0.5 if quick else 2.0, quiet=True)


def run(build: str, old: Path, case: str, data: Path, seconds: float) -> dict:
    env = dict(os.environ)
    if build == "old":
        env.update(PYTHONPATH=str(old / "python"), GOBATCH_LIB=str(old / "build" / "libgobatch.so"),
                   GOBATCH_SHMLOADER=str(old / "bin" / "shmloader"))
    out = subprocess.run([sys.executable, __file__, "--child", case, "--data", str(data), "--seconds", str(seconds)],
                         env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"{build} {case} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", help="a checkout of the other build, with bin/shmloader and build/libgobatch.so")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=6.0, help="timed part of each run")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--quick", action="store_true", help="smaller stores")
    ap.add_argument("--data", help="directory for the stores (default: a temporary one)")
    ap.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, Path(args.data), args.seconds)
        return 0
    if not args.old:
        ap.error("--old DIR is required")
    old = Path(args.old).resolve()
    for f in ("bin/shmloader", "build/libgobatch.so", "python/gobatch/__init__.py"):
        if not (old / f).exists():
            ap.error(f"--old {old}: no {f} (build it: make -C {old} go-build clib)")
    commit = subprocess.run(["git", "-C", str(old), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    here = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="build-compare-") as tmp:
        data = Path(args.data) if args.data else Path(tmp)
        prepare(data, args.quick, args.batch_size)
        print(f"old {commit} ({old}), new {here}; load average at start {os.getloadavg()[0]:.1f}", flush=True)
        figures: dict[str, dict[str, list[float]]] = {c: {"old": [], "new": []} for c in CASES}
        for k in range(args.rounds):
            order = ("old", "new") if k % 2 == 0 else ("new", "old")
            for case in CASES:
                for build in order:
                    r = run(build, old, case, data, args.seconds)
                    figures[case][build].append(r["batches_per_s"])
                    print(f"round {k} {case:<14} {build}: {r['batches_per_s']:8.1f} batches/s, "
                          f"first batch {r['first_batch_s']:.2f} s", flush=True)
        print(f"\n{'case':<14} {'old batches/s':>22} {'new batches/s':>22} {'new/old (median of rounds)':>28}")
        for case, f in figures.items():
            ratios = [n / o for n, o in zip(f["new"], f["old"]) if o > 0]
            print(f"{case:<14} {' '.join(f'{v:6.1f}' for v in f['old']):>22} {' '.join(f'{v:6.1f}' for v in f['new']):>22} "
                  f"{statistics.median(ratios):>28.3f}")
        print(f"load average at end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
