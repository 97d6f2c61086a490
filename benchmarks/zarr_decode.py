#!/usr/bin/env python3
"""Zarr decode throughput per core: the Go reader against zarr-python and tensorstore.

Writes three arrays (Zarr v2, as the reference workload and OCF store them) into a
temporary directory and reads each whole array back with every reader, one thread each:

* ``int16-blosc-lz4``: satellite-like smooth int16 (docs/WORKLOAD.md), Blosc lz4 clevel 5,
  byte shuffle, chunks (12, 12, 128, 128).
* ``float32-zstd``: NWP-like float32, Zstd level 3, chunks (1, 16, 10, 32, 32).
* ``float16-blosc2``: OCF satellite float16, ocf_blosc2 Blosc2(zstd, clevel 5).

Readers (all in this run, on the same files, page cache warm):

* Go: ``shmloader read ARRAY --out /dev/null --bench N`` with ``GOMAXPROCS=1``; the command
  times its own reads (open excluded, process start-up excluded), so the figure is decode
  plus file reads.
* zarr-python 3 (numcodecs Blosc ``nthreads=1``, zarr ``threading.max_workers=1``).
* tensorstore (``data_copy_concurrency`` and ``file_io_concurrency`` limited to 1). It has
  no Blosc2 codec, so that row reads "n/a".

Throughput is MB (10^6 bytes) of decoded output per second, best of ``--repeat`` reads,
once by CPU time (user+system of every thread of the reader: the honest "per core"
figure, and robust on a shared machine) and once by wall time. Each table gives the
ratio to zarr-python. Values are checked against zarr-python's before anything is timed.

``--baseline-shmloader OTHER`` times a second shmloader binary (an older build, say) in the
same run, so a change is measured against its parent on the same files and the same load.

The Go and Python readers do the same work: read every chunk file, decode it, copy its part
into a freshly allocated output array (``shmloader read --bench`` allocates the result of
every read, as ``zarr.Array[...]`` does; the ``.npy`` write after the timed reads is not
timed, and ``/dev/null`` is its target), no dtype conversion, one thread.

Usage::

    .venv/bin/python benchmarks/zarr_decode.py [--shmloader bin/shmloader] [--baseline-shmloader OLD] [--repeat 5] [--scale 1.0]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]


@dataclass
class Workload:
    name: str
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: str
    make_compressor: Callable[[], object]


def _blosc_lz4() -> object:
    import numcodecs

    return numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)


def _zstd3() -> object:
    import numcodecs

    return numcodecs.Zstd(level=3)


def _blosc2() -> object:
    import ocf_blosc2

    return ocf_blosc2.Blosc2(cname="zstd", clevel=5)


def workloads(scale: float) -> list[Workload]:
    def s(n: int) -> int:
        return max(1, int(round(n * scale)))

    return [
        Workload("int16-blosc-lz4", (s(48), 12, 256, 256), (12, 12, 128, 128), "int16", _blosc_lz4),
        Workload("float32-zstd", (s(32), 16, 10, 64, 64), (1, 16, 10, 32, 32), "float32", _zstd3),
        Workload("float16-blosc2", (s(48), 11, 192, 256), (12, 11, 192, 128), "float16", _blosc2),
    ]


def smooth(shape: tuple[int, ...], dtype: str, seed: int) -> np.ndarray:
    """Spatially and temporally smooth fields plus a little noise (docs/WORKLOAD.md content)."""
    rng = np.random.default_rng(seed)
    out = np.empty(shape, dtype=dtype)
    lead = shape[:-2]
    ny, nx = shape[-2:]
    yy, xx = np.meshgrid(np.linspace(0, 4, ny), np.linspace(0, 4, nx), indexing="ij")
    for i, idx in enumerate(np.ndindex(*lead)):
        phase = 0.05 * i
        field = np.sin(xx + phase) * np.cos(yy - 0.5 * phase) + 0.3 * np.sin(3 * xx * yy / 16 + phase)
        field = field + rng.normal(0, 0.01, size=(ny, nx))
        if dtype == "int16":
            out[idx] = np.clip(8000 + 6000 * field, 0, 32000).astype(np.int16)
        else:
            out[idx] = (280 + 10 * field).astype(dtype)
    if dtype == "int16":
        out.reshape(-1)[rng.integers(0, out.size, size=out.size // 2000)] = -1
    return out


def write(root: pathlib.Path, w: Workload) -> pathlib.Path:
    import zarr

    path = root / f"{w.name}.zarr"
    arr = zarr.create_array(
        str(path), shape=w.shape, chunks=w.chunks, dtype=w.dtype, zarr_format=2, compressors=w.make_compressor()
    )
    data = smooth(w.shape, w.dtype, seed=len(w.name))
    arr[...] = data
    return path


def stored_bytes(path: pathlib.Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))


# --- readers ---------------------------------------------------------------------------


def read_zarr_python(path: pathlib.Path) -> np.ndarray:
    import zarr

    return np.asarray(zarr.open_array(str(path), mode="r")[...])


def tensorstore_reader() -> Callable[[pathlib.Path], np.ndarray] | None:
    try:
        import tensorstore as ts
    except ImportError:
        return None
    ctx = ts.Context({"data_copy_concurrency": {"limit": 1}, "file_io_concurrency": {"limit": 1}})

    def read(path: pathlib.Path) -> np.ndarray:
        spec = {"driver": "zarr", "kvstore": {"driver": "file", "path": str(path)}, "recheck_cached_data": False}
        store = ts.open(spec, read=True, context=ctx, open=True).result()
        return store.read().result()

    return read


def go_read_timed(exe: str, path: pathlib.Path, reads: int) -> tuple[float, float]:
    """Best wall and best CPU seconds per read from ``shmloader read --bench`` (GOMAXPROCS=1)."""
    env = dict(os.environ, GOMAXPROCS="1")
    proc = subprocess.run(
        [exe, "read", str(path), "--out", os.devnull, "--bench", str(reads)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"shmloader read {path} failed ({proc.returncode}):\n{proc.stderr}")
    last = json.loads([ln for ln in proc.stderr.splitlines() if ln.startswith("{")][-1])
    return min(last["seconds"]), min(last["cpu_seconds"])


def go_read_array(exe: str, path: pathlib.Path, tmp: pathlib.Path) -> np.ndarray:
    out = tmp / "check.npy"
    proc = subprocess.run([exe, "read", str(path), "--out", str(out)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"shmloader read {path} failed ({proc.returncode}):\n{proc.stderr}")
    arr = np.load(out)
    out.unlink()
    return arr


def best_of(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Best wall seconds and best CPU seconds (this process, all threads) of ``repeat`` calls."""
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return min(wall), min(cpu)


def same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return bool(np.array_equal(a.view(f"u{a.dtype.itemsize}"), b.view(f"u{b.dtype.itemsize}")))


def build_shmloader(tmp: pathlib.Path) -> str:
    exe = str(tmp / "shmloader")
    subprocess.run(["go", "build", "-o", exe, "./cmd/shmloader"], cwd=REPO, check=True, timeout=600)
    return exe


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shmloader", help="shmloader binary (default: go build into a temp dir)")
    ap.add_argument("--baseline-shmloader", help="a second shmloader binary to time in the same run")
    ap.add_argument("--repeat", type=int, default=5, help="reads per reader; the best is reported")
    ap.add_argument("--scale", type=float, default=1.0, help="scale the leading (time) dimension")
    ap.add_argument("--dir", help="write the arrays here instead of a temp dir (kept)")
    args = ap.parse_args(argv)

    import numcodecs
    import zarr

    numcodecs.blosc.set_nthreads(1)
    zarr.config.set({"threading.max_workers": 1, "async.concurrency": 1})

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="zarr-decode-bench-"))
    root = pathlib.Path(args.dir) if args.dir else tmp
    root.mkdir(parents=True, exist_ok=True)
    try:
        exe = args.shmloader or build_shmloader(tmp)
        ts_read = tensorstore_reader()
        rows = []
        for w in workloads(args.scale):
            path = write(root, w)
            ref = read_zarr_python(path)
            nbytes = ref.nbytes
            got = go_read_array(exe, path, tmp)
            if not same(got, ref):
                raise SystemExit(f"{w.name}: shmloader read differs from zarr-python")
            t_go = go_read_timed(exe, path, args.repeat)
            t_base = go_read_timed(args.baseline_shmloader, path, args.repeat) if args.baseline_shmloader else None
            t_zp = best_of(lambda: read_zarr_python(path), args.repeat)
            t_ts: tuple[float, float] | None = None
            ts_note = "not installed" if ts_read is None else ""
            if ts_read is not None:
                try:
                    arr = ts_read(path)
                    if not same(np.asarray(arr), ref):
                        raise SystemExit(f"{w.name}: tensorstore read differs from zarr-python")
                    t_ts = best_of(lambda: ts_read(path), args.repeat)
                except Exception as e:  # tensorstore has no blosc2 codec
                    if "blosc2" not in str(e).lower():
                        raise
                    ts_note = "n/a (no blosc2 codec)"
            rows.append((w, nbytes, stored_bytes(path), t_go, t_base, t_zp, t_ts, ts_note))
            shutil.rmtree(path) if not args.dir else None

        mb = 1e6
        for which, label in ((1, "CPU seconds (user+system, all threads of the reader)"), (0, "wall seconds")):
            print(f"\nZarr decode, one core each, best of {args.repeat}, by {label}:")
            print("MB/s of decoded output (ratio vs zarr-python)\n")
            base_head = " Go baseline |" if args.baseline_shmloader else ""
            print(f"| array | decoded MB | stored ratio | Go shmloader |{base_head} zarr-python | tensorstore |")
            print("|---|---:|---:|---:|" + ("---:|" if args.baseline_shmloader else "") + "---:|---:|")
            for w, nbytes, stored, t_go, t_base, t_zp, t_ts, ts_note in rows:
                zp = nbytes / mb / t_zp[which]
                go = nbytes / mb / t_go[which]
                base_cell = ""
                if t_base is not None:
                    base = nbytes / mb / t_base[which]
                    base_cell = f" {base:.0f} ({base / zp:.2f}x) |"
                if t_ts is None:
                    ts_cell = ts_note
                else:
                    ts = nbytes / mb / t_ts[which]
                    ts_cell = f"{ts:.0f} ({ts / zp:.2f}x)"
                print(
                    f"| {w.name} {list(w.shape)} chunks {list(w.chunks)} | {nbytes / mb:.0f} | {nbytes / stored:.2f} "
                    f"| {go:.0f} ({go / zp:.2f}x) |{base_cell} {zp:.0f} (1.00x) | {ts_cell} |"
                )
        versions = []
        for dist in ("numpy", "zarr", "numcodecs", "tensorstore", "blosc2", "ocf-blosc2"):
            try:
                versions.append(f"{dist} {importlib.metadata.version(dist)}")
            except importlib.metadata.PackageNotFoundError:
                versions.append(f"{dist} not installed")
        go = subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip()
        print(f"\n{', '.join(versions)}; {go}; {os.cpu_count()} CPUs, {sys.platform}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
