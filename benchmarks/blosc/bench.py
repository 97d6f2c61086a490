#!/usr/bin/env python3
"""Decode throughput of readers/blosc (pure Go) against c-blosc / c-blosc2, one core.

Run from the repository root:

    .venv/bin/python benchmarks/blosc/bench.py [--samples 10] [--inner 20] [--rounds 3] [--keep DIR]

It writes chunks like those of docs/WORKLOAD.md (smooth fields plus a little noise) with numcodecs
(c-blosc 1.x) and ocf_blosc2 (python-blosc2 / c-blosc2) into a temporary
directory, times their single-threaded C decode here (blosc.set_nthreads(1),
blosc2.set_nthreads(1)), then runs the Go benchmark BenchmarkDecodeFiles on the
same bytes with -cpu 1 and prints MB/s of decompressed output for both and the
ratio Go / C. Both run in this one invocation, on the same machine, measured the
same way (best sample of back-to-back decodes), in alternating rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import blosc2
import numcodecs
import numpy as np
import ocf_blosc2
from numcodecs import blosc

ROOT = pathlib.Path(__file__).resolve().parents[2]


def smooth_field(shape: tuple[int, ...], noise: float, seed: int) -> np.ndarray:
    """A field smooth along every axis, in [0, 1], plus Gaussian noise of std `noise`."""
    rng = np.random.default_rng(seed)
    grids = np.meshgrid(*[np.linspace(0, 1, n, dtype=np.float64) for n in shape], indexing="ij")
    f = np.zeros(shape, dtype=np.float64)
    for k in range(4):
        phase = rng.uniform(0, 2 * np.pi, len(shape))
        freq = rng.uniform(0.5, 3.0, len(shape))
        f += np.sin(sum(2 * np.pi * fr * g + ph for fr, g, ph in zip(freq, grids, phase))) / (k + 1)
    f = (f - f.min()) / (f.max() - f.min())
    return f + rng.normal(0, noise, shape)


def make_cases() -> list[tuple[str, str, bytes, bytes]]:
    """(name, format, compressed, raw) for each benchmark chunk."""
    cases = []
    # Satellite chunk of docs/WORKLOAD.md: int16 (12, 12, 128, 128), Blosc lz4 clevel 5 byte shuffle.
    sat = (smooth_field((12, 12, 128, 128), 0.001, 1) * 2000).astype("<i2")  # about 1.5x with lz4
    raw = sat.tobytes()
    cases.append(("int16_lz4_shuffle", "blosc1", numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE).encode(sat), raw))
    cases.append(("int16_blosclz_bitshuffle", "blosc1",
                  numcodecs.Blosc("blosclz", 5, numcodecs.Blosc.BITSHUFFLE).encode(sat), raw))
    # NWP-like float32 (16, 10, 64, 64), Blosc zstd clevel 5 byte shuffle.
    nwp = (smooth_field((16, 10, 64, 64), 0.0005, 2) * 300).astype("<f4")
    cases.append(("float32_zstd_shuffle", "blosc1", numcodecs.Blosc("zstd", 5, numcodecs.Blosc.SHUFFLE).encode(nwp),
                  nwp.tobytes()))
    # Public OCF satellite data: float16, ocf_blosc2 Blosc2(zstd, 5) and its default (blosclz).
    f16 = smooth_field((12, 11, 128, 128), 0.0005, 3).astype("<f2")
    cases.append(("float16_blosc2_zstd", "blosc2", bytes(ocf_blosc2.Blosc2("zstd", 5).encode(f16)), f16.tobytes()))
    cases.append(("float16_blosc2_blosclz", "blosc2", bytes(ocf_blosc2.Blosc2("blosc2", 5).encode(f16)),
                  f16.tobytes()))
    return cases


def time_c(fmt: str, comp: bytes, nbytes: int, samples: int, inner: int) -> float:
    """Single-thread C decode time in seconds per decode: the best of `samples`
    samples, each the mean of `inner` back-to-back decodes (the Go side measures
    the same way: go test -benchtime {inner}x -count {samples})."""
    dst = np.empty(nbytes, dtype=np.uint8)
    dec = blosc.decompress if fmt == "blosc1" else blosc2.decompress
    best = float("inf")
    for _ in range(samples):
        t0 = time.perf_counter()
        for _ in range(inner):
            dec(comp, dst)
        best = min(best, (time.perf_counter() - t0) / inner)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=10, help="timed samples per round (the best is kept)")
    ap.add_argument("--inner", type=int, default=20, help="decodes per sample")
    ap.add_argument("--rounds", type=int, default=3, help="alternating C/Go rounds (the best is kept)")
    ap.add_argument("--keep", type=pathlib.Path, help="write the chunks here and keep them")
    args = ap.parse_args()

    blosc.set_nthreads(1)
    blosc2.set_nthreads(1)
    tmp = None
    if args.keep:
        out = args.keep
        out.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="blosc-bench-")
        out = pathlib.Path(tmp.name)

    cases = make_cases()
    info = {}
    for name, fmt, comp, raw in cases:
        (out / f"{name}.{fmt}").write_bytes(comp)
        (out / f"{name}.raw").write_bytes(raw)
        info[name] = (fmt, len(raw), len(comp), bytes(comp[:16]).hex())

    # The machine is shared, so C and Go are measured in alternating rounds and
    # each keeps its best round: both get the same chances at a quiet moment.
    c_mbs, go_mbs, go_allocs = {}, {}, {}
    env = dict(os.environ, BLOSC_BENCH_DIR=str(out))
    cmd = ["go", "test", "-run", "^$", "-bench", "BenchmarkDecodeFiles", "-cpu", "1", "-benchtime", f"{args.inner}x",
           "-count", str(args.samples), "-benchmem", "./readers/blosc/"]
    for _ in range(args.rounds):
        for name, fmt, comp, raw in cases:
            secs = time_c(fmt, comp, len(raw), args.samples, args.inner)
            c_mbs[name] = max(c_mbs.get(name, 0.0), len(raw) / secs / 1e6)
        res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        if res.returncode != 0:
            sys.exit(f"go benchmark failed:\n{res.stdout}\n{res.stderr}")
        for line in res.stdout.splitlines():
            m = re.match(r"BenchmarkDecodeFiles/(\S+?)(?:-\d+)?\s+\d+\s+[\d.]+ ns/op\s+([\d.]+) MB/s"
                         r"\s+\d+ B/op\s+(\d+) allocs/op", line)
            if m:
                go_mbs[m.group(1)] = max(go_mbs.get(m.group(1), 0.0), float(m.group(2)))
                go_allocs[m.group(1)] = int(m.group(3))

    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"numcodecs {numcodecs.__version__} (c-blosc {blosc.VERSION_STRING}), python-blosc2 {blosc2.__version__} "
          f"(c-blosc2 {blosc2.blosclib_version.split()[0]}); one thread each; MB/s of decompressed output")
    print(f"{'chunk':26} {'fmt':6} {'MB':>6} {'ratio':>6} {'C MB/s':>8} {'Go MB/s':>8} {'Go/C':>6} {'allocs':>6}")
    rows = {}
    for name, (fmt, nraw, ncomp, hdr) in info.items():
        g = go_mbs.get(name, float("nan"))
        print(f"{name:26} {fmt:6} {nraw / 1e6:6.2f} {nraw / ncomp:6.2f} {c_mbs[name]:8.0f} {g:8.0f} "
              f"{g / c_mbs[name]:6.2f} {go_allocs.get(name, -1):6d}")
        rows[name] = {"format": fmt, "raw_bytes": nraw, "compressed_bytes": ncomp, "header": hdr,
                      "c_mb_s": c_mbs[name], "go_mb_s": g}
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
