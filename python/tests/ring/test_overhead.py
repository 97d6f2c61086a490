"""Per-batch overhead of the consumer (release + acquire + the batch dict), measured on batches
that are already READY, against a baseline measured in the same run: iterating a Python list of
the same dicts (the floor of any Python-level iterator).

Prints the figures; asserts a bound loose enough for a busy 2-core machine (the target is
<= 10 us per batch). GOBATCH_OVERHEAD_ROUNDS raises the number of rounds."""

from __future__ import annotations

import os
import time

import pytest

from gobatch._ring import Ring
from fakering import FakeRing

pytestmark = pytest.mark.timeout(120)

# The reference workload's seven tensors (docs/WORKLOAD.md), with small shapes.
SPEC = {
    "satellite": ((2, 19, 12, 2, 2), "float32"),
    "nwp": ((2, 4, 10, 2, 2), "float32"),
    "pv": ((2, 19, 16), "float32"),
    "t0": ((2,), "int64"),
    "x": ((2,), "float64"),
    "y": ((2,), "float64"),
    "pv_system": ((2, 16), "int64"),
}
SLOTS = 1024


def one_round(framework: str) -> float:
    """Seconds per batch over SLOTS - 1 READY batches."""
    fd = os.memfd_create("gobatch-bench", os.MFD_CLOEXEC)
    try:
        fr = FakeRing(fd, SPEC, slots=SLOTS)
        for j in range(SLOTS):
            fr.publish(j)
        with Ring(fd, framework=framework, label="bench") as r:
            nxt = r.__next__
            nxt()
            n = SLOTS - 1
            t0 = time.perf_counter()
            for _ in range(n):
                nxt()
            dt = time.perf_counter() - t0
        fr.close()
        return dt / n
    finally:
        os.close(fd)


def baseline() -> float:
    """Seconds per item of iterating a list of 7-entry dicts and copying each dict."""
    d = {k: None for k in SPEC}
    items = [d] * (SLOTS - 1)
    t0 = time.perf_counter()
    for x in items:
        x.copy()
    return (time.perf_counter() - t0) / len(items)


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_per_batch_overhead(framework):
    if framework == "torch":
        pytest.importorskip("torch")
    rounds = int(os.environ.get("GOBATCH_OVERHEAD_ROUNDS", "5"))
    best = min(one_round(framework) for _ in range(rounds))
    base = min(baseline() for _ in range(rounds))
    print(f"\n{framework}: {best * 1e6:.2f} us per batch; list-of-dicts baseline {base * 1e6:.3f} us; ratio {best / base:.1f}x")
    assert best < 50e-6, f"{best * 1e6:.1f} us per batch"
