#!/usr/bin/env python3
"""The installed wheel against the source build: install time, and time to the first batch.

1. Installs dist/gobatch-*.whl into a fresh venv with pip from local files only (numpy from
   build/wheelhouse: ``make wheel wheelhouse``), --reps times, each into a new venv: the install
   time is pip's wall time (the venv's own creation not counted).
2. Generates a small nowcast-ref dataset (tools/gen_nowcast.py, 0.25 days at 128 px) unless
   it is there, then measures the time from ``gobatch.Loader(presets/nowcast.toml)`` to its
   first batch in a new Python process, alternating between the wheel's venv and the source
   build (this venv's Python with PYTHONPATH=python, bin/shmloader and build/libgobatch.so),
   --reps times each; prints the medians and their ratio.

Usage: python benchmarks/wheel_first_batch.py [--reps 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

FIRST = r'''
import sys, time
t = time.perf_counter()
import gobatch
with gobatch.Loader(sys.argv[1], framework="numpy", data_root=sys.argv[2]) as loader:
    next(iter(loader))
    print(time.perf_counter() - t, gobatch.shmloader_path())
'''


def clean_env() -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOBATCH_", "PYTHONPATH", "VIRTUAL_ENV"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def install(whl: Path, house: Path, venv: Path) -> float:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    t = time.perf_counter()
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-index", "--find-links", str(house), str(whl)],
                   check=True, env=clean_env())
    return time.perf_counter() - t


def first_batch(python: str, env: Dict[str, str], data: Path) -> float:
    out = subprocess.run([python, "-c", FIRST, str(REPO / "presets" / "nowcast.toml"), str(data)], env=env,
                         cwd=tempfile.gettempdir(), capture_output=True, text=True, check=True)
    return float(out.stdout.split()[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    whls = sorted(REPO.glob("dist/gobatch-*.whl"))
    house = REPO / "build" / "wheelhouse"
    if not whls or not list(house.glob("numpy-*.whl")):
        sys.exit("wheel_first_batch: run `make wheel wheelhouse` first")
    whl = whls[-1]
    from baselines import ensure_dataset

    data = REPO / "data" / "nowcast-wheelbench"
    ensure_dataset(data, days=0.25, pixels=128, quiet=True)
    tmp = Path(tempfile.mkdtemp(prefix="gobatch-wheelbench-"))
    try:
        installs: List[float] = [install(whl, house, tmp / f"venv{i}") for i in range(args.reps)]
        wheel_py = str(tmp / "venv0" / "bin" / "python")
        source_env = dict(clean_env(), PYTHONPATH=str(REPO / "python"), GOBATCH_SHMLOADER=str(REPO / "bin" / "shmloader"),
                          GOBATCH_LIB=str(REPO / "build" / "libgobatch.so"))
        wheel_t, source_t = [], []
        for _ in range(args.reps):
            wheel_t.append(first_batch(wheel_py, clean_env(), data))
            source_t.append(first_batch(sys.executable, source_env, data))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res = {"wheel": whl.name, "wheel_mb": round(whl.stat().st_size / 1e6, 2),
           "install_s": [round(x, 2) for x in installs], "install_median_s": round(statistics.median(installs), 2),
           "first_batch_wheel_s": [round(x, 3) for x in wheel_t],
           "first_batch_source_s": [round(x, 3) for x in source_t],
           "first_batch_ratio_wheel_over_source": round(statistics.median(wheel_t) / statistics.median(source_t), 3)}
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
