#!/usr/bin/env python3
"""Several jobs on one node, one decode (issue 28): N training jobs at once on the OCF-shaped
stores of mixing_bench.py (python/tests/ocf_stores.py scaled up: a 2-channel 256x256 satellite at
5 minutes, a UKV NWP, 24 sites; satellite 10x the cache), each in its own process with its own
``gobatch.Loader`` over the ocf-data-sampler YAML (batch size 32, ``order="epochs"``), in one
run:

- ``alone``: each job its own loader (``share=None``: a ``shmloader run`` per job, each
  decoding for itself), as gobatch ran several jobs before ``share``;
- ``shared``: every job's loader from the sharing node loader (``share=NAME``: one process, one
  decoded-chunk cache of the same ``cache_mb``, each job's stream its own).

A job is a model: ``--step-ms`` of sleep per batch stands for its training step (a GPU step
leaves the CPU to the loader); 0 reads as fast as the loader delivers. The jobs differ in their
model; by default they share the seed (their block shuffles then visit the time segments in the
same order, so that one decode serves them all while they keep pace); ``--seeds`` gives each its
own, whose orders then share little when the data exceed the cache.

For N = 1, 2, 4 jobs each reading ``--epochs`` epochs: each job's batches/s, its ratio to one job
alone (N = 1, ``alone``), and the chunk bytes every job decoded in all (``decoded_bytes`` summed
over the jobs) against one job alone's. Rounds alternate the arrangements (``--rounds``); the
table shows medians.

Usage::

    python benchmarks/share_bench.py [--hours 48] [--epochs 2] [--step-ms 0 10] [--rounds 2] [--seeds]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from baselines import MB, REPO  # noqa: E402

sys.path.insert(0, str(REPO / "python" / "tests"))
from ocf_stores import write_pvnet_stores  # noqa: E402

BATCH = 32

JOB = r"""
import json, sys, time
import gobatch
config, cache, share, seed, epochs, step = sys.argv[1], int(sys.argv[2]), sys.argv[3] or None, int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
with gobatch.Loader(config, batch_size=%d, order="epochs", seed=seed, cache_mb=cache, share=share, framework="numpy",
                    start_timeout=300) as L:
    n, t = 0, time.perf_counter()
    for e in range(epochs):
        for batch in L:
            n += 1
            del batch
            if step:
                time.sleep(step)
    seconds = time.perf_counter() - t
    last = None
    for _ in range(20):  # the counters are published every 500 ms: wait until they settle
        time.sleep(0.6)
        now = L.stats()["decoded_bytes"]
        if now == last:
            break
        last = now
print(json.dumps({"batches": n, "seconds": seconds, "decoded_bytes": sum(last), "by_source": last}), flush=True)
""" % BATCH


def run_jobs(config: str, n: int, cache_mb: int, share: str | None, seeds: list[int], epochs: int, step_ms: float) -> list[dict]:
    """n jobs started at once; their results."""
    procs = [subprocess.Popen([sys.executable, "-c", JOB, config, str(cache_mb), share or "", str(seeds[i]), str(epochs),
                               str(step_ms / 1000)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(n)]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=1800)
        if p.returncode != 0:
            raise SystemExit(f"a job failed ({p.returncode}): {stderr[-3000:]}")
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hours", type=float, default=48.0)
    ap.add_argument("--pixels", type=int, default=256)
    ap.add_argument("--sites", type=int, default=24)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--jobs", type=int, nargs="*", default=[1, 2, 4])
    ap.add_argument("--step-ms", type=float, nargs="*", default=[0.0, 10.0], help="each job's training step per batch")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seeds", action="store_true", help="each job its own seed")
    args = ap.parse_args()
    os.environ["GOBATCH_SHARE_LINGER_S"] = "1"  # each arrangement starts with a cold sharing node loader
    with tempfile.TemporaryDirectory(prefix="share-bench-") as tmp:
        root = Path(tmp)
        config = str(write_pvnet_stores(root, hours=args.hours, satellite_pixels=(args.pixels, args.pixels),
                                        n_sites=args.sites))
        os.chdir(root)  # the YAML's zarr_paths are relative
        sat_mb = 2 * int(args.hours * 12) * args.pixels ** 2 * 4 / MB
        cache = max(int(sat_mb / 10), 16)
        print(f"stores: {args.hours:g} h, satellite {args.pixels}x{args.pixels} px x 2 channels at 5 min "
              f"({sat_mb:.0f} MB float32), {args.sites} sites, batch size {BATCH}; cache_mb {cache} "
              f"({sat_mb / cache:.1f}x under the satellite); {args.epochs} epochs per job; seeds "
              f"{'one per job' if args.seeds else 'shared'}; load average {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)",
              flush=True)
        arrangements = [(n, mode) for n in args.jobs for mode in ("alone", "shared")]
        results: dict[tuple, list[list[dict]]] = {}
        for r in range(args.rounds):
            for step in args.step_ms:
                for n, mode in arrangements:
                    seeds = [7 + (i if args.seeds else 0) for i in range(n)]
                    share = f"bench-{uuid.uuid4().hex[:8]}" if mode == "shared" else None
                    jobs = run_jobs(config, n, cache, share, seeds, args.epochs, step)
                    results.setdefault((step, n, mode), []).append(jobs)
                    rate = [j["batches"] / j["seconds"] for j in jobs]
                    print(f"  round {r + 1}, step {step:g} ms, {n} job(s) {mode}: batches/s {' '.join(f'{x:.1f}' for x in rate)}; "
                          f"decoded {sum(j['decoded_bytes'] for j in jobs) / MB:.0f} MB (by source {[round(sum(j['by_source'][s] for j in jobs) / MB) for s in range(len(jobs[0]['by_source']))]})", flush=True)
        print(f"\n  {'step ms':>7} {'jobs':>4} {'loader':<7} {'batch/s per job':>16} {'vs 1 alone':>10} "
              f"{'decoded MB':>10} {'vs 1 alone':>10}")
        for step in args.step_ms:
            base = results[(step, 1, "alone")]
            base_rate = statistics.median(j["batches"] / j["seconds"] for jobs in base for j in jobs)
            base_dec = statistics.median(sum(j["decoded_bytes"] for j in jobs) for jobs in base)
            for n, mode in arrangements:
                rounds = results[(step, n, mode)]
                rate = statistics.median(j["batches"] / j["seconds"] for jobs in rounds for j in jobs)
                worst = min(j["batches"] / j["seconds"] for jobs in rounds for j in jobs)
                dec = statistics.median(sum(j["decoded_bytes"] for j in jobs) for jobs in rounds)
                print(f"  {step:7g} {n:4d} {mode:<7} {rate:9.1f} (min {worst:5.1f}) {rate / base_rate:9.2f}x "
                      f"{dec / MB:10.0f} {dec / base_dec:9.2f}x")
        print(f"\nload average at end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
