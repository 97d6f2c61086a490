"""The synthetic source contract of docs/ARCHITECTURE.md, and helpers to run shmloader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

PYTHON_DIR = Path(__file__).resolve().parents[1]


def config(
    sources: Dict[str, tuple],
    *,
    size: int = 4,
    batches: int = 0,
    slots: int = 4,
    seed: int = 0,
    delay_ms: int = 0,
) -> Dict[str, Any]:
    """A config dict with synthetic sources: name -> (example shape, dtype)."""
    return {
        "batch": {"size": size, "seed": seed, "batches": batches},
        "ring": {"slots": slots},
        "source": [
            {"name": n, "kind": "synthetic", "shape": list(shape), "dtype": dt, "delay_ms": delay_ms}
            for n, (shape, dt) in sources.items()
        ],
    }


def expected(example_shape: Sequence[int], dtype: str, k: int, size: int) -> np.ndarray:
    """Batch k of a synthetic source: row i holds e = k*size + i, every element e mod 2^24,
    cast to dtype (NumPy's cast, so uint8 wraps)."""
    return expected_run(example_shape, dtype, k, 1, size)[0]


def expected_run(example_shape: Sequence[int], dtype: str, k: int, n: int, size: int) -> np.ndarray:
    """Batches k .. k+n-1 of a synthetic source stacked on a new leading axis (see expected)."""
    e = (k * size + np.arange(n * size, dtype=np.int64)) % (1 << 24)
    col = e.reshape((n, size) + (1,) * len(example_shape)).astype(dtype)
    return np.broadcast_to(col, (n, size) + tuple(example_shape))


def check_batch(batch: Dict[str, Any], cfg: Dict[str, Any], k: int) -> None:
    """Asserts every value of every tensor of batch k (NumPy arrays or torch tensors)."""
    size = cfg["batch"]["size"]
    names = [s["name"] for s in cfg["source"]]
    assert list(batch) == names, (list(batch), names)
    for s in cfg["source"]:
        got = batch[s["name"]]
        if not isinstance(got, np.ndarray):
            got = got.numpy()
        want = expected(s["shape"], s["dtype"], k, size)
        assert got.dtype == want.dtype, (s["name"], got.dtype, want.dtype)
        assert got.shape == want.shape, (s["name"], got.shape, want.shape)
        if not np.array_equal(got, want):
            bad = np.argwhere(got != want)[0]
            raise AssertionError(f"batch {k} tensor {s['name']} at {tuple(bad)}: {got[tuple(bad)]} != {want[tuple(bad)]}")


def mapping_of(address: int) -> Optional[str]:
    """The /proc/self/maps line whose range contains address."""
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if lo <= address < hi:
                return line.rstrip()
    return None


def write_config(path: Path, cfg: Dict[str, Any]) -> Path:
    path.write_text(json.dumps(cfg))
    return path


def run_shmloader(args: List[str], **kw: Any) -> subprocess.Popen:
    import gobatch

    return subprocess.Popen([gobatch.shmloader_path(), *args], stdin=subprocess.DEVNULL, **kw)


def wait_for(pred, timeout: float, what: str, step: float = 0.01) -> float:
    """Polls pred() until true; returns the seconds it took. Fails after timeout."""
    t0 = time.monotonic()
    while not pred():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(step)
    return time.monotonic() - t0


def process_gone(pid: int) -> bool:
    """True if pid has exited (no such process, or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def python_env() -> Dict[str, str]:
    """Environment for a consumer subprocess that imports gobatch from this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PYTHON_DIR) + os.pathsep + str(PYTHON_DIR / "tests") + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    return env


PY = sys.executable
