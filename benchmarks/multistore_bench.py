#!/usr/bin/env python3
"""Several zarr_paths per source against one store each: time to the first batch (issue 27).

Writes the stores of python/tests/ocf/test_ocf_layout.py scaled up (a two-channel geostationary
satellite at 5 minutes, a UKV and an ECMWF NWP, five sites), then cuts the satellite into 7
stores along time, the UKV into 5 and the ECMWF into 4 along init_time (as OCF's real
data paths list a store per year). For each ocf-data-sampler YAML, one store per source and
the lists, it measures the time from ``gobatch.Loader(yaml, batch_size=4)`` to its first batch
in a new Python process, alternating the two --reps times; prints the medians and their ratio
(lists / single). The stores are read from local disk (the page cache, after a first run).

Usage: python benchmarks/multistore_bench.py [--reps 7] [--dir DIR]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "python" / "tests"
sys.path[:0] = [str(TESTS), str(TESTS / "ocf"), str(REPO / "python")]

FIRST = r'''
import sys, time
t = time.perf_counter()
import gobatch
with gobatch.Loader(sys.argv[1], batch_size=4, framework="numpy") as loader:
    next(iter(loader))
print(time.perf_counter() - t)
'''


def write(root: Path) -> Dict[str, str]:
    """The stores and the two configurations; returns their file names."""
    import test_ocf_layout as layout

    layout.write_stores(root)
    sat = layout.split_store(root, "sat.zarr", "time", [8, 17, 26, 35, 44, 52], {"variable": 1, "time": 6})
    ukv = layout.split_store(root, "ukv.zarr", "init_time", [1, 2, 3, 4], {"init_time": 1})
    ecmwf = layout.split_store(root, "ecmwf.zarr", "init_time", [1, 2, 4], {"init_time": 1})
    (root / "single.yaml").write_text(layout.layout_config())
    several = layout.layout_config(sat_paths=sat, ukv_paths=ukv).replace("zarr_path: ecmwf.zarr", f"zarr_path: [{', '.join(ecmwf)}]")
    assert "ecmwf-3.zarr" in several
    (root / "several.yaml").write_text(several)
    return {"single": "single.yaml", "several": "several.yaml"}


def first_batch(root: Path, config: str) -> float:
    out = subprocess.run([sys.executable, "-c", FIRST, config], cwd=root, capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(REPO / "python"), "PATH": "/usr/bin:/bin"})
    if out.returncode != 0:
        raise SystemExit(f"{config}: {out.stderr[-2000:]}")
    return float(out.stdout.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--dir", type=Path, default=None)
    a = ap.parse_args()
    root = a.dir or Path(tempfile.mkdtemp(prefix="gobatch-multistore-"))
    configs = write(root)
    first_batch(root, configs["single"]), first_batch(root, configs["several"])  # page cache, imports
    times: Dict[str, List[float]] = {k: [] for k in configs}
    for _ in range(a.reps):
        for k, c in configs.items():
            times[k].append(first_batch(root, c))
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in times.items():
        print(f"{k:8} first batch median {med[k] * 1000:.0f} ms (min {min(v) * 1000:.0f}, max {max(v) * 1000:.0f}; {a.reps} runs)")
    print(f"several stores (7 + 5 + 4) / one each: {med['several'] / med['single']:.2f}, "
          f"{(med['several'] - med['single']) * 1000:+.0f} ms")


if __name__ == "__main__":
    main()
