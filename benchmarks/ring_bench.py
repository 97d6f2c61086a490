"""Ring benchmarks on synthetic batches: gobatch against what a user would pick instead.

Measured in one run, on the same synthetic batches (docs/ARCHITECTURE.md's synthetic contract):

- per-batch overhead of iterating gobatch (tiny batches, the producer always ahead);
- MB/s of ~30 MB batches through gobatch, as a ratio to a numpy copy of the same bytes
  (the roofline: moving a batch cannot be cheaper than touching its bytes once);
- the same batches through a PyTorch DataLoader (num_workers 0, 1, 2) and through
  multiprocessing.Pipe with pickle.

Every consumer receives the batch and reads one element of each example, so no method can
win by not delivering; gobatch's views are checked against the contract on a sample of batches.

Usage: python benchmarks/ring_bench.py [--quick] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import sys
import time
from typing import Any, Callable, Iterable

import numpy as np

import gobatch

SHAPE = (19, 12, 32, 32)  # one nowcast-ref satellite example (docs/WORKLOAD.md)
BATCH = 32
MB = 1e6


def example_value(e: int) -> float:
    return float(e % (1 << 24))


def synthetic_config(shape: tuple[int, ...], size: int, dtype: str = "float32",
                     batches: int = 0, slots: int = 4) -> dict[str, Any]:
    return {
        "batch": {"size": size, "seed": 0, "batches": batches},
        "ring": {"slots": slots},
        "source": [{"name": "x", "kind": "synthetic", "shape": list(shape), "dtype": dtype}],
    }


def timed(it: Iterable[Any], n: int, warmup: int, touch: Callable[[Any], None]) -> tuple[float, float, float]:
    """Iterates `warmup` then `n` items; returns (seconds for the n items, time to first item,
    CPU seconds the trainer process itself (all its threads) spent on the n items)."""
    t0 = time.perf_counter()
    first = None
    count = 0
    start = cpu = None
    for item in it:
        if first is None:
            first = time.perf_counter() - t0
        touch(item)
        count += 1
        if count == warmup:
            start, cpu = time.perf_counter(), time.process_time()
        if count == warmup + n:
            break
    assert start is not None and cpu is not None and count == warmup + n, "stream ended early"
    return time.perf_counter() - start, first or 0.0, time.process_time() - cpu


# ---------------------------------------------------------------- gobatch

def bench_gobatch_overhead(n: int) -> dict[str, Any]:
    cfg = synthetic_config((1,), 1, "uint8", slots=64)
    with gobatch.Loader(cfg, readers=1) as loader:
        secs, _, _ = timed(loader, n, warmup=1000, touch=lambda b: None)
        st = loader.stats()
    return {"name": "gobatch per-batch overhead (1-byte batches)", "batches": n,
            "us_per_batch": secs / n * 1e6, "consumer_wait_s": st.get("consumer_wait_s")}


def bench_gobatch_big(n: int, readers: int, framework: str = "numpy") -> dict[str, Any]:
    cfg = synthetic_config(SHAPE, BATCH, slots=4)
    checked = 0

    def touch(b: dict[str, Any]) -> None:
        nonlocal checked
        x = b["x"]
        x[:, 0, 0, 0, 0].sum()  # one element of each example
        if checked < 3:  # the contract, on the first batches (untimed cost is tiny)
            col = np.asarray(x[:, 0, 0, 0, 0])
            base = int(col[0])
            assert np.array_equal(col, (np.arange(BATCH) + base) % (1 << 24)), "wrong values"
            checked += 1

    with gobatch.Loader(cfg, readers=readers, framework=framework) as loader:
        secs, first, cpu = timed(loader, n, warmup=5, touch=touch)
        st = loader.stats()
    nbytes = BATCH * int(np.prod(SHAPE)) * 4
    return {"name": f"gobatch {framework} readers={readers}", "batches": n,
            "batches_per_s": n / secs, "MB_per_s": n * nbytes / secs / MB,
            "first_batch_s": first, "trainer_cpu_ms": cpu / n * 1e3,
            "consumer_wait_s": st.get("consumer_wait_s"),
            "producer_wait_s": st.get("producer_wait_s")}


# ---------------------------------------------------------------- roofline

def bench_memcpy(n: int) -> dict[str, Any]:
    src = np.ones((BATCH,) + SHAPE, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    t = time.perf_counter()
    for _ in range(n):
        np.copyto(dst, src)
    secs = time.perf_counter() - t
    return {"name": "numpy copy of one batch (roofline)", "batches": n,
            "batches_per_s": n / secs, "MB_per_s": n * src.nbytes / secs / MB}


# ---------------------------------------------------------------- DataLoader

class SyntheticDataset:
    """Map-style dataset: example e is filled with e mod 2^24 (the synthetic contract)."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, e: int) -> Any:
        import torch
        return torch.full(SHAPE, example_value(e), dtype=torch.float32)


def bench_dataloader(n: int, workers: int) -> dict[str, Any]:
    import torch
    from torch.utils.data import DataLoader

    ds = SyntheticDataset((n + 10) * BATCH)
    dl = DataLoader(ds, batch_size=BATCH, num_workers=workers, shuffle=False,
                    persistent_workers=False, prefetch_factor=4 if workers else None)
    secs, first, cpu = timed(iter(dl), n, warmup=3, touch=lambda b: b[:, 0, 0, 0, 0].sum())
    nbytes = BATCH * int(np.prod(SHAPE)) * 4
    del torch
    return {"name": f"DataLoader num_workers={workers}", "batches": n,
            "batches_per_s": n / secs, "MB_per_s": n * nbytes / secs / MB,
            "first_batch_s": first, "trainer_cpu_ms": cpu / n * 1e3}


# ---------------------------------------------------------------- Pipe + pickle

def _pipe_producer(conn: Any, n: int) -> None:
    for k in range(n):
        batch = np.stack([np.full(SHAPE, example_value(k * BATCH + i), dtype=np.float32)
                          for i in range(BATCH)])
        conn.send(batch)
    conn.close()


def bench_pipe(n: int) -> dict[str, Any]:
    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_pipe_producer, args=(send, n + 3), daemon=True)
    p.start()
    send.close()

    def items() -> Iterable[Any]:
        while True:
            try:
                yield recv.recv()
            except EOFError:
                return

    secs, first, cpu = timed(items(), n, warmup=3, touch=lambda b: b[:, 0, 0, 0, 0].sum())
    p.join(timeout=10)
    nbytes = BATCH * int(np.prod(SHAPE)) * 4
    return {"name": "multiprocessing.Pipe + pickle", "batches": n,
            "batches_per_s": n / secs, "MB_per_s": n * nbytes / secs / MB,
            "first_batch_s": first, "trainer_cpu_ms": cpu / n * 1e3}


def markdown(rows: list[dict[str, Any]], roof: float, best_baseline: float) -> str:
    out = ["| method | batches/s | MB/s | x roofline | x best baseline | trainer CPU ms/batch | first batch s |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "MB_per_s" not in r:
            continue
        out.append("| {} | {:.1f} | {:.0f} | {:.2f} | {:.1f} | {} | {} |".format(
            r["name"], r["batches_per_s"], r["MB_per_s"], r["MB_per_s"] / roof,
            r["MB_per_s"] / best_baseline,
            "" if r.get("trainer_cpu_ms") is None else f"{r['trainer_cpu_ms']:.2f}",
            "" if r.get("first_batch_s") is None else f"{r['first_batch_s']:.3f}"))
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer batches (a smoke run)")
    ap.add_argument("--json", help="write the results as JSON here")
    args = ap.parse_args()
    n_big = 40 if args.quick else 300
    n_base = 10 if args.quick else 60
    n_tiny = 20000 if args.quick else 200000

    rows: list[dict[str, Any]] = []
    rows.append(bench_memcpy(n_big))
    for readers in (1, 2):
        rows.append(bench_gobatch_big(n_big, readers))
    rows.append(bench_gobatch_big(n_big, 2, framework="torch"))
    baselines = [bench_dataloader(n_base, w) for w in (0, 1, 2)] + [bench_pipe(n_base)]
    rows += baselines
    over = bench_gobatch_overhead(n_tiny)

    roof = rows[0]["MB_per_s"]
    best = max(b["MB_per_s"] for b in baselines)
    best_go = max(r["MB_per_s"] for r in rows if r["name"].startswith("gobatch"))
    print(f"# ring_bench ({platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()})")
    print(f"batch: {BATCH} x {SHAPE} float32 = {BATCH * np.prod(SHAPE) * 4 / MB:.1f} MB\n")
    print(markdown(rows, roof, best))
    print(f"\nper-batch overhead of iterating gobatch: {over['us_per_batch']:.2f} us "
          f"({over['batches']} one-byte batches)")
    print(f"gobatch best / roofline: {best_go / roof:.2f}; gobatch best / best baseline: {best_go / best:.1f}x")
    print("trainer CPU ms/batch: CPU time of the consuming (training) process itself per batch; "
          "DataLoader workers=0 builds batches in the trainer, gobatch's producers run in shmloader.")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "overhead": over, "roofline_MB_per_s": roof}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
