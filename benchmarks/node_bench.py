#!/usr/bin/env python3
"""The node loader against per-rank loaders: N local ranks on nowcast-ref, one run.

N trainer processes (ranks 0 .. N-1 of world size N, as torchrun starts them on one node) each
open a ``gobatch.Loader`` over presets/nowcast.toml and take batches as fast as they can. Two
ways, measured in the same run on the same data, for each N in ``--ranks``:

- per-rank loaders (``node=False``): every rank starts its own ``shmloader run``, with its own
  decoded-chunk cache (the preset's ``cache_mb``) and its own readers;
- the node loader (``node=True``): the first rank starts one ``shmloader serve`` that feeds
  every rank's ring from one cache;

and the baseline: one rank (world size 1), one ``shmloader run``. Every loader process runs
one reader per core, so N per-rank loaders run N times the node loader's readers; the node
loader is also measured with as many (GOMAXPROCS ``N x cores``, which sets its readers too),
since on a shared machine a process's share of the CPU grows with its runnable threads. Cases alternate round by round;
the table gives medians.

Measured over the loader processes (the shmloader processes, not the trainers): the peak of
their summed RSS, and of their summed RSS less shared-memory pages (the rings: every rank has
its own slots whichever way, and its trainer maps them too) — the cache and heap; their CPU
seconds per batch delivered (all ranks); batches/s per rank (mean over ranks) after
``--warm`` batches each; chunk misses of the decoded-chunk caches (per-rank loaders: summed
over the ranks' caches; the node loader: its one cache, which every rank's stats show). The
issue's target: the node loader's RSS with N ranks at most 1.2x the one rank's.

Usage::

    python benchmarks/node_bench.py --quick                     # half a day, 2 ranks
    python benchmarks/node_bench.py --days 1 --data data/nowcast-d1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from baselines import REPO, ensure_dataset  # noqa: E402

PRESET = REPO / "presets" / "nowcast.toml"

# One rank: open its Loader, take the warm-up batches, say "ready", wait for "go", take the
# measured batches, report, wait for "exit" (so the loader processes are measured alive).
RANK = r"""
import json, sys, time
import gobatch
cfg, data, rank, world, node, warm, batches, readers = json.loads(sys.argv[1])
loader = gobatch.Loader(cfg, data_root=data, rank=rank, world_size=world, node=node,
                        local_world_size=world if node else None, readers=readers)
it = iter(loader)
for _ in range(warm):
    next(it)
print("ready", flush=True)
sys.stdin.readline()
t = time.perf_counter()
for _ in range(batches):
    next(it)
seconds = time.perf_counter() - t
time.sleep(0.7)  # the cache counters reach the ring every 500 ms
print(json.dumps({"seconds": seconds, "misses": loader.stats()["cache_misses"]}), flush=True)
sys.stdin.readline()
loader.close()
"""


def config(seed: int) -> dict[str, Any]:
    cfg = tomllib.loads(PRESET.read_text())
    cfg["batch"]["seed"] = seed
    return cfg


class LoaderMonitor:
    """Samples the shmloader processes under the trainers: summed RSS, RSS less shared pages,
    and CPU seconds."""

    def __init__(self, trainers: list[subprocess.Popen]) -> None:
        self.trainers = [psutil.Process(p.pid) for p in trainers]
        self.peak_rss = self.peak_anon = 0
        self.cpu: dict[int, float] = {}

    def loaders(self) -> list[psutil.Process]:
        found = {}
        for t in self.trainers:
            try:
                for c in t.children(recursive=True):
                    if c.name() == "shmloader":
                        found[c.pid] = c
            except psutil.Error:
                pass
        return list(found.values())

    def sample(self) -> None:
        rss = anon = 0
        for p in self.loaders():
            try:
                with p.oneshot():
                    m = p.memory_info()
                    ct = p.cpu_times()
            except psutil.Error:
                continue
            rss += m.rss
            anon += m.rss - m.shared
            self.cpu[p.pid] = ct.user + ct.system
        self.peak_rss, self.peak_anon = max(self.peak_rss, rss), max(self.peak_anon, anon)

    def cpu_seconds(self) -> float:
        return sum(self.cpu.values())


def run_case(data: Path, world: int, node: bool, threads: int | None, args: argparse.Namespace) -> dict[str, Any]:
    """One case: world trainer processes, measured from their first "ready" to their reports.
    threads, when given, is the loader processes' GOMAXPROCS (and so their readers)."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TORCHELASTIC_RUN_ID=f"node-bench-{os.getpid()}-{world}-{int(node)}-{threads}")
    if threads:
        env["GOMAXPROCS"] = str(threads)
    procs = [subprocess.Popen([sys.executable, "-c", RANK, json.dumps(
        [config(args.seed), str(data), r, world, node, args.warm, args.batches, None])],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env) for r in range(world)]
    try:
        mon = LoaderMonitor(procs)
        for p in procs:
            line = p.stdout.readline() if p.stdout else ""
            if line.strip() != "ready":
                raise RuntimeError(f"a rank did not get ready: {line!r}")
            mon.sample()
        mon.sample()
        cpu0 = mon.cpu_seconds()
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        stop = threading.Event()
        sampler = threading.Thread(target=lambda: [mon.sample() for _ in iter(lambda: stop.wait(0.2), True)])
        sampler.start()
        try:
            reports = [json.loads((p.stdout.readline() if p.stdout else "") or "null") for p in procs]
        finally:
            stop.set()
            sampler.join()
        if None in reports:
            raise RuntimeError(f"a rank exited without its report: {[p.poll() for p in procs]}")
        mon.sample()
        cpu_all = mon.cpu_seconds()  # since the loaders started: their decoding included
        cpu = cpu_all - cpu0
        loaders = len(mon.cpu)
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("exit\n")
            p.stdin.flush()
        for p in procs:
            p.wait(timeout=60)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    misses = max(r["misses"] for r in reports) if node else sum(r["misses"] for r in reports)
    total = args.batches * world
    return {"ranks": world, "node": node, "loaders": loaders, "rss": mon.peak_rss, "anon": mon.peak_anon,
            "cpu_per_batch": cpu / total, "cpu_all_per_batch": cpu_all / ((args.warm + args.batches) * world), "batches_per_s": sum(args.batches / r["seconds"] for r in reports) / world,
            "misses": misses}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=float, default=1.0)
    ap.add_argument("--data", type=Path, help="nowcast-ref directory (default data/nowcast-d<days>)")
    ap.add_argument("--ranks", default="2,4", help="local rank counts, comma-separated")
    ap.add_argument("--warm", type=int, default=4, help="batches each rank takes before the measurement")
    ap.add_argument("--batches", type=int, default=20, help="batches each rank takes measured")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=3, help="rounds of every case, in alternated order (medians)")
    ap.add_argument("--quick", action="store_true", help="half a day, 2 ranks, 10 batches, 1 round")
    args = ap.parse_args(argv)
    if args.quick:
        args.days, args.ranks, args.batches, args.rounds = 0.5, "2", 10, 1
    data = args.data or REPO / "data" / f"nowcast-d{args.days:g}"
    ensure_dataset(data, days=args.days, quiet=True)
    ranks = [int(n) for n in args.ranks.split(",")]

    cores = os.cpu_count() or 1
    cases: list[tuple[str, int, bool, int | None]] = [("one rank (baseline)", 1, False, None)]
    for n in ranks:
        cases += [(f"{n} ranks, per-rank loaders", n, False, None), (f"{n} ranks, node loader", n, True, None),
                  (f"{n} ranks, node, {n * cores} threads", n, True, n * cores)]
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, *_ in cases}
    load = os.getloadavg()[0]
    for r in range(args.rounds):  # alternated order: the machine's load drifts
        for name, n, node, threads in cases if r % 2 == 0 else cases[::-1]:
            runs[name].append(run_case(data, n, node, threads, args))
    rows = [(name, {k: statistics.median(x[k] for x in rs) for k in rs[0]}) for name, rs in runs.items()]
    one = rows[0][1]
    mib = 1 << 20
    print(f"nowcast-ref, {args.days:g} days, presets/nowcast.toml (cache_mb 4096, batch 32), "
          f"{args.warm} + {args.batches} batches per rank, medians of {args.rounds} rounds, cpus {os.cpu_count()}, "
          f"load average {load:.1f} at start, {os.getloadavg()[0]:.1f} at end")
    print(f"{'case':<30} {'loaders':>7} {'RSS MiB':>8} {'x one':>6} {'RSS-shm MiB':>11} {'x one':>6} "
          f"{'CPU s/batch':>11} {'with start':>10} {'batches/s/rank':>14} {'chunk misses':>12}")
    for name, r in rows:
        print(f"{name:<30} {r['loaders']:>7.0f} {r['rss'] / mib:>8.0f} {r['rss'] / one['rss']:>6.2f} "
              f"{r['anon'] / mib:>11.0f} {r['anon'] / one['anon']:>6.2f} {r['cpu_per_batch']:>11.3f} "
              f"{r['cpu_all_per_batch']:>10.3f} "
              f"{r['batches_per_s']:>14.2f} {r['misses']:>12.0f}")
    print("CPU s/batch: the loader processes' CPU seconds per batch delivered (all ranks) while "
          "measured; with start: from their start (opening, decoding every chunk) to the end, per "
          "batch delivered warm-up included")
    print("RSS: peak of the loader processes' summed RSS; RSS-shm: the same less shared-memory "
          "pages (the rings, one per rank either way); chunk misses: per-rank loaders summed over "
          "their caches, the node loader its one cache; threads: GOMAXPROCS and readers, one per core "
          f"in every loader process unless stated (N per-rank loaders run N x {cores}); target: node loader RSS <= 1.2x one rank's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
