#!/usr/bin/env python3
"""Later epochs of a per-rank Loader (issue 19): this build against another, in one run.

A per-rank ``gobatch.Loader`` with ``[batch] order = "epochs"`` over data that fits the
cache. The build before issue 19's "one producer across epochs" started a new ``shmloader``
child for every epoch, its cache empty, so every epoch decoded the whole data again; this
build's child serves every epoch from one cache. For each build (its Python package, its
``shmloader`` and its ``libgobatch.so``) a fresh process takes ``--epochs`` whole epochs as
fast as it can (each batch given back untouched) and reports each epoch's batches/s and GB/s
(batch bytes delivered over the epoch's wall time, from its ``set_epoch`` call, where the
build before starts the epoch's child, to its last batch) and, after the last epoch, the chunk
misses (decodes) of the last ring's producer since it started and its resident cache bytes. The builds alternate for
``--rounds`` rounds; the table shows each round.

Usage::

    python benchmarks/epochs_bench.py --baseline-commit main [--days 2] [--pixels 256] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from baselines import REPO, ensure_dataset  # noqa: E402

# One process per (build, round): the Loader of that build, two or more epochs, figures as JSON.
TRAINER = r"""
import json, sys, time
import gobatch
cfg, root, epochs, readers = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
out = []
with gobatch.Loader(cfg, data_root=root, readers=readers) as loader:
    n = len(loader)
    for e in range(epochs):
        t0 = time.perf_counter()
        loader.set_epoch(e)  # the usual loop's call (the build before issue 19 starts a child here)
        nbytes = 0
        for batch in loader:
            nbytes += sum(int(a.nbytes) for a in batch.values())
            del batch
        out.append({"epoch": e, "batches": n, "seconds": time.perf_counter() - t0, "bytes": nbytes,
                    "pid": loader.pid})
    time.sleep(1.2)  # the job counters are published at least once a second
    st = loader.stats()
    out[-1].update(cache_misses=st.get("cache_misses"), cache_bytes=st.get("cache_bytes"))
print(json.dumps(out))
"""


def build_tree(commit: str, tmp: Path) -> Path:
    """The tree of ``commit`` (git archive of this repository) built in tmp: its bin/shmloader
    and build/libgobatch.so."""
    src = tmp / f"baseline-{commit}"
    src.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    subprocess.run(["go", "build", "-o", "bin/shmloader", "./cmd/shmloader"], cwd=src, check=True)
    subprocess.run(["make", "-s", "-C", "pybind", f"OUT={src / 'build'}"], cwd=src, check=True)
    return src


def epochs_config(cache_mb: int, size: int) -> dict[str, Any]:
    import tomllib

    cfg = tomllib.loads((REPO / "presets" / "nowcast.toml").read_text())
    cfg["batch"].update(order="epochs", seed=0, size=size)
    cfg["batch"].pop("batches", None)
    anchor = next(s for s in cfg["source"] if s.get("anchor"))
    anchor.update(cache_mb=cache_mb)
    return cfg


def measure(tree: Path, cfg: dict[str, Any], root: Path, epochs: int, readers: int) -> list[dict[str, Any]]:
    env = dict(os.environ, PYTHONPATH=str(tree / "python"), GOBATCH_SHMLOADER=str(tree / "bin" / "shmloader"),
               GOBATCH_LIB=str(tree / "build" / "libgobatch.so"))
    done = subprocess.run([sys.executable, "-c", TRAINER, json.dumps(cfg), str(root), str(epochs), str(readers)],
                          env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline-commit", default="main", help="the build to compare with (default main)")
    ap.add_argument("--data", type=Path, default=REPO / "data" / "epochs-bench")
    ap.add_argument("--days", type=float, default=2.0)
    ap.add_argument("--pixels", type=int, default=256)
    ap.add_argument("--cache-mb", type=int, default=4096, help="the anchor's cache (the data must fit)")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--readers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    ensure_dataset(args.data, days=args.days, pixels=args.pixels, quiet=True)
    cfg = epochs_config(args.cache_mb, args.batch_size)
    with tempfile.TemporaryDirectory(prefix="epochs-bench-") as tmp:
        builds = [("this build", REPO), (args.baseline_commit, build_tree(args.baseline_commit, Path(tmp)))]
        print(f"data: nowcast-ref {args.days:g} days, {args.pixels} px; anchor cache_mb {args.cache_mb}; "
              f"readers {args.readers}; batch size {cfg['batch']['size']}; load {os.getloadavg()[0]:.1f}")
        print("| round | build | epoch | batches | s | batches/s | GB/s | chunk misses of the last ring | cache MB | child pid |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in range(args.rounds):
            for name, tree in builds if r % 2 == 0 else builds[::-1]:
                for ep in measure(tree, cfg, args.data, args.epochs, args.readers):
                    bps = ep["batches"] / ep["seconds"]
                    misses, cached = ep.get("cache_misses", ""), ep.get("cache_bytes")
                    cached = f"{cached / 2**20:.0f}" if cached is not None else ""
                    print(f"| {r} | {name} | {ep['epoch']} | {ep['batches']} | {ep['seconds']:.2f} | {bps:.1f} | "
                          f"{ep['bytes'] / ep['seconds'] / 1e9:.2f} | {misses} | {cached} | {ep['pid']} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
