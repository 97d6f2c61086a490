"""Shared helpers for the nowcast-ref benchmarks and the demo.

- :class:`XarrayNowcastDataset`: the PyTorch baseline. A map-style ``Dataset`` that samples
  the nowcast-ref example (docs/WORKLOAD.md steps 1-6) with xarray, as an OCF-style user would
  write it, either lazily from the Zarr stores (``open_zarr``) or from data loaded into RAM
  first (``.load()``). Example ``k`` is a pure function of ``(seed, k)``.
- :class:`ProcessMonitor`: samples the RSS/PSS and CPU times of the trainer and all of its
  child processes (DataLoader workers, shmloader) in a background thread.
- :func:`memcpy_MBps`: the roofline, a numpy copy of the same bytes as one batch.
- :func:`measure`: drives any iterable of batches, bounded by a batch count and a time limit,
  and reports batches/s, MB/s, time to first batch, data-stall fraction, CPU s per batch and
  peak memory.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import psutil

HISTORY, FORECAST, HALF, NWP_CROP, NWP_STEPS, N_PV = 6, 12, 16, 8, 4, 16
MB = 1e6
REPO = Path(__file__).resolve().parents[1]


def shown(path: str | os.PathLike[str]) -> str:
    """``path`` as logs and benchmarks/README.md print it: relative to the repository when it
    lies inside it, so that no machine's directory ends up in the committed results."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(REPO))
    except ValueError:
        return str(p)


def ensure_dataset(out: Path, days: float, pixels: int = 256, seed: int = 0, quiet: bool = False) -> dict:
    """Generate the nowcast-ref stores into ``out`` unless they are already there."""
    import sys

    tools = str(REPO / "tools")
    if tools not in sys.path:
        sys.path.insert(0, tools)
    import gen_nowcast

    # The generator names the directory in its messages; relative to the working directory
    # (the repository under `make bench`) it is the same directory without a machine's path.
    out = Path(out)
    if out.is_absolute() and out.is_relative_to(Path.cwd()):
        out = out.relative_to(Path.cwd())
    return gen_nowcast.generate(out, days=days, pixels=pixels, seed=seed, quiet=quiet)


# ------------------------------------------------------------------------------ the baseline


class XarrayNowcastDataset:
    """nowcast-ref examples sampled with xarray, for a PyTorch ``DataLoader``.

    ``mode="lazy"`` opens the stores with ``xarray.open_zarr`` (no dask) in each process on
    first use, so every example reads and decodes the Zarr chunks it touches. ``mode="ram"``
    calls ``.load()`` on the three datasets at construction (satellite decoded to float32, which
    halves xarray's float64 and is what a careful user would do); DataLoader workers then share
    the loaded pages copy-on-write through fork.

    Returns dicts of numpy arrays with the workload's names and shapes; ``default_collate``
    stacks them into tensors.
    """

    def __init__(self, data_root: str | os.PathLike, mode: str = "lazy", length: int = 1 << 30,
                 seed: int = 0) -> None:
        if mode not in ("lazy", "ram"):
            raise ValueError(f"mode must be 'lazy' or 'ram', got {mode!r}")
        self.root = Path(data_root)
        self.mode = mode
        self.length = length
        self.seed = seed
        self._ds: tuple[Any, Any, Any] | None = None
        self._pid = -1
        if mode == "ram":
            self._open()

    # xarray objects are not sent to workers: each worker opens the stores itself
    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        if self.mode == "lazy":
            state["_ds"] = None
        return state

    def _open(self) -> None:
        import xarray as xr

        sat = xr.open_zarr(self.root / "satellite.zarr", chunks=None)
        nwp = xr.open_zarr(self.root / "nwp.zarr", chunks=None)
        pv = xr.open_zarr(self.root / "pv.zarr", chunks=None)
        if self.mode == "ram":
            sat = sat.load()
            sat["data"] = sat["data"].astype(np.float32)
            nwp, pv = nwp.load(), pv.load()
        self._ds = (sat, nwp, pv)
        self._pid = os.getpid()
        t = sat["time"].values.astype("datetime64[m]")
        init = nwp["init_time"].values.astype("datetime64[m]")
        i = np.arange(len(t))
        ok = (i >= HISTORY) & (i + FORECAST < len(t)) & (t - np.timedelta64(60, "m") >= init.min())
        self.valid = i[ok]
        self.times = t
        self.init = init
        self.sat_x, self.sat_y = sat["x"].values, sat["y"].values
        self.nwp_x, self.nwp_y = nwp["x"].values, nwp["y"].values
        self.pv_x, self.pv_y = pv["x"].values, pv["y"].values
        self.system = pv["system"].values

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, k: int) -> dict[str, np.ndarray]:
        if self._ds is None:
            self._open()
        sat, nwp, pv = self._ds  # type: ignore[misc]
        rng = np.random.default_rng((self.seed, int(k)))
        i = int(self.valid[rng.integers(len(self.valid))])
        cy, cx = (int(v) for v in rng.integers(HALF, len(self.sat_y) - HALF, 2))
        x, y = float(self.sat_x[cx]), float(self.sat_y[cy])
        tsl = slice(i - HISTORY, i + FORECAST + 1)
        satellite = sat["data"].isel(time=tsl, y=slice(cy - HALF, cy + HALF),
                                     x=slice(cx - HALF, cx + HALF)).values.astype(np.float32)
        cutoff = self.times[i] - np.timedelta64(60, "m")
        run = int(np.searchsorted(self.init, cutoff, side="right") - 1)
        s = int((cutoff - self.init[run]) // np.timedelta64(60, "m"))

        def start(c: np.ndarray, v: float) -> int:
            return int(np.clip(int(np.argmin(np.abs(c - v))) - NWP_CROP // 2, 0, len(c) - NWP_CROP))

        ys, xs = start(self.nwp_y, y), start(self.nwp_x, x)
        nwp_ex = nwp["UKV"].isel(init_time=run, step=slice(s, s + NWP_STEPS), y=slice(ys, ys + NWP_CROP),
                                 x=slice(xs, xs + NWP_CROP)).values.astype(np.float32)
        near = np.sort(np.argsort(np.hypot(self.pv_x - x, self.pv_y - y), kind="stable")[:N_PV])
        pv_ex = pv["power"].isel(time=tsl, system=near).values.astype(np.float32)
        t0 = int(self.times[i].astype("datetime64[s]").astype(np.int64))
        return {"satellite": satellite, "nwp": nwp_ex, "pv": pv_ex, "t0": np.int64(t0),
                "x": np.float64(x), "y": np.float64(y), "pv_system": self.system[near].astype(np.int64)}


def make_dataloader(data_root: str | os.PathLike, mode: str, workers: int, batch_size: int = 32,
                    seed: int = 0, prefetch_factor: int = 2) -> Any:
    """A ``torch.utils.data.DataLoader`` over :class:`XarrayNowcastDataset`."""
    from torch.utils.data import DataLoader

    ds = XarrayNowcastDataset(data_root, mode=mode, seed=seed)
    kw: dict[str, Any] = {"prefetch_factor": prefetch_factor} if workers else {}
    return DataLoader(ds, batch_size=batch_size, shuffle=False, num_workers=workers,
                      persistent_workers=False, **kw)


# ------------------------------------------------------------------------------ measuring


def _pss(p: psutil.Process) -> int:
    try:
        return p.memory_full_info().pss
    except (psutil.Error, AttributeError):
        return 0


class ProcessMonitor:
    """Samples the trainer process and all its descendants every ``interval`` seconds.

    Tracks the peak of the summed RSS (shared pages counted once per process), the peak of the
    summed PSS (shared pages split between the processes that map them: the honest total),
    and the CPU seconds (user + system) each process used while the monitor ran.
    """

    def __init__(self, interval: float = 0.1, pss_every: int = 5) -> None:
        self.interval = interval
        self.pss_every = pss_every
        self.root = psutil.Process()
        self.peak_rss = 0
        self.peak_pss = 0
        self._cpu_first: dict[int, float] = {}
        self._cpu_last: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._names: dict[int, str] = {}

    def _procs(self) -> list[psutil.Process]:
        try:
            return [self.root] + self.root.children(recursive=True)
        except psutil.Error:
            return [self.root]

    def sample(self, with_pss: bool = False) -> None:
        rss = pss = 0
        for p in self._procs():
            try:
                with p.oneshot():
                    rss += p.memory_info().rss
                    ct = p.cpu_times()
                    cpu = ct.user + ct.system
                    if p.pid not in self._names:
                        self._names[p.pid] = p.name()
            except psutil.Error:
                continue
            if with_pss:
                pss += _pss(p)
            self._cpu_first.setdefault(p.pid, cpu)
            self._cpu_last[p.pid] = cpu
        self.peak_rss = max(self.peak_rss, rss)
        if with_pss:
            self.peak_pss = max(self.peak_pss, pss)

    def _run(self) -> None:
        n = 0
        while not self._stop.wait(self.interval):
            n += 1
            self.sample(with_pss=n % self.pss_every == 0)

    def __enter__(self) -> "ProcessMonitor":
        # a child that starts later counts from zero CPU, the trainer from now
        self.sample(with_pss=True)
        self._thread = threading.Thread(target=self._run, name="gobatch-bench-monitor", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()
        self.sample(with_pss=True)

    def cpu_seconds(self) -> float:
        """CPU seconds used by every process seen, since it was first seen (children that
        appeared during the run count from their start)."""
        total = 0.0
        for pid, last in self._cpu_last.items():
            first = self._cpu_first[pid] if pid == self.root.pid else 0.0
            total += last - first
        return total

    def names(self) -> list[str]:
        return sorted(set(self._names.values()))


def read_seconds(array: str | os.PathLike[str], cf: bool = False, reads: int = 3) -> float:
    """The decode-once loop of one array: the fastest of ``reads`` whole reads by ``shmloader
    read --bench`` (every chunk decoded once, on every core; with ``cf`` CF-decoded to
    float32, else to the stored type)."""
    import json
    import subprocess

    args = [str(REPO / "bin" / "shmloader"), "read", str(array), "--out", os.devnull, "--bench", str(reads)]
    r = subprocess.run(args + (["--cf"] if cf else []), capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise SystemExit(r.stderr[-2000:])
    seconds = []
    for line in r.stderr.splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("seconds"), list):
            seconds += [float(v) for v in doc["seconds"]]
    if not seconds:
        raise SystemExit(f"no timings in shmloader read's output: {r.stderr[-500:]}")
    return min(seconds)


def memcpy_MBps(nbytes: int, repeat: int = 24, sources: int = 4) -> float:
    """The roofline: MB/s of ``np.copyto`` of ``nbytes`` (one batch), the median of ``repeat``
    copies that rotate over ``sources`` distinct source buffers (as a consumer rotates over
    ring slots), so that the copy is not served from the last-level cache."""
    srcs = [np.full(nbytes // 4, float(k), dtype=np.float32) for k in range(sources)]
    dst = np.empty_like(srcs[0])
    np.copyto(dst, srcs[0])
    times = []
    for k in range(repeat):
        t = time.perf_counter()
        np.copyto(dst, srcs[k % sources])
        times.append(time.perf_counter() - t)
    return nbytes / float(np.median(times)) / MB


def _tensors(batch: dict[str, Any]) -> Iterator[Any]:
    """Every numeric array or tensor of a batch, nested dicts included (ocf-data-sampler's
    ``nwp`` -> provider -> ...); Python scalars and string arrays (channel names) are skipped."""
    for v in batch.values():
        if isinstance(v, dict):
            yield from _tensors(v)
        elif hasattr(v, "element_size") or (isinstance(v, np.ndarray) and v.dtype.kind in "biuf"):
            yield v


def batch_nbytes(batch: dict[str, Any]) -> int:
    total = 0
    for v in _tensors(batch):
        total += int(v.nbytes) if hasattr(v, "nbytes") else int(v.numel() * v.element_size())
    return total


def touch(batch: dict[str, Any]) -> float:
    """Read one element of every example of every tensor (the consumer receives the batch)."""
    s = 0.0
    for v in _tensors(batch):
        a = v.numpy() if hasattr(v, "numpy") else v
        if a.ndim:
            s += float(np.asarray(a).reshape(a.shape[0], -1)[:, 0].astype(np.float64).sum())
    return s


@dataclass
class Result:
    """One measurement; all times in seconds, memory in bytes."""

    name: str
    batches: int = 0
    seconds: float = 0.0
    first_batch_s: float = float("nan")
    setup_s: float = 0.0
    batch_bytes: int = 0
    wait_s: float = 0.0
    cpu_s: float = 0.0
    peak_rss: int = 0
    peak_pss: int = 0
    step_ms: float = 0.0
    stall_wait_s: float = 0.0
    stall_seconds: float = 0.0
    stall_batches: int = 0
    processes: list[str] = field(default_factory=list)
    loadavg: float = float("nan")  # the machine's 1-minute load average at the end
    note: str = ""

    @property
    def batches_per_s(self) -> float:
        return self.batches / self.seconds if self.seconds else float("nan")

    @property
    def MB_per_s(self) -> float:
        return self.batches * self.batch_bytes / self.seconds / MB if self.seconds else float("nan")

    @property
    def cpu_s_per_batch(self) -> float:
        return self.cpu_s / self.batches if self.batches else float("nan")

    @property
    def stall(self) -> float:
        """Fraction of wall time a consumer with a simulated step of ``step_ms`` waited."""
        return self.stall_wait_s / self.stall_seconds if self.stall_seconds else float("nan")

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d.update(batches_per_s=self.batches_per_s, MB_per_s=self.MB_per_s,
                 cpu_s_per_batch=self.cpu_s_per_batch, stall=self.stall)
        return d


def measure(name: str, make: Callable[[], Iterable[dict[str, Any]]], max_batches: int, max_seconds: float,
            step_ms: float = 0.0, stall_batches: int = 0, close: Callable[[Any], None] | None = None,
            warmup: int = 2) -> Result:
    """Measure one loader.

    ``make()`` builds the loader (its time counts toward the first batch; torch is imported
    before the clock starts, as a trainer has it loaded already). Then, after
    ``warmup`` batches, up to ``max_batches`` batches or ``max_seconds`` are drawn as fast as
    the consumer can take them (throughput: batches/s, MB/s, CPU s per batch); then, if
    ``step_ms``, up to ``stall_batches`` more batches (bounded by ``max_seconds`` too) with a
    simulated training step (``time.sleep``: a GPU-bound step leaves the host CPU to the
    loader) after each, to measure the data-stall fraction: time waited / wall time.
    """
    r = Result(name=name, step_ms=step_ms)
    import torch  # noqa: F401  a trainer has torch loaded already: its import is not loader time
    with ProcessMonitor() as mon:
        t_start = time.perf_counter()
        loader = make()
        r.setup_s = time.perf_counter() - t_start
        it: Iterator[dict[str, Any]] = iter(loader)
        try:
            batch = next(it)
            r.first_batch_s = time.perf_counter() - t_start
            r.batch_bytes = batch_nbytes(batch)
            touch(batch)
            for _ in range(warmup):
                touch(next(it))
            mon.sample()
            cpu0 = mon.cpu_seconds()
            t0 = time.perf_counter()
            wait = 0.0
            n = 0
            while n < max_batches and time.perf_counter() - t0 < max_seconds:
                a = time.perf_counter()
                batch = next(it)
                wait += time.perf_counter() - a
                touch(batch)
                n += 1
            r.seconds = time.perf_counter() - t0
            r.batches, r.wait_s = n, wait
            mon.sample()
            r.cpu_s = mon.cpu_seconds() - cpu0
            if step_ms and stall_batches:
                t1 = time.perf_counter()
                wait = 0.0
                m = 0
                while m < stall_batches and time.perf_counter() - t1 < max_seconds:
                    a = time.perf_counter()
                    batch = next(it)
                    wait += time.perf_counter() - a
                    touch(batch)
                    time.sleep(step_ms / 1000.0)
                    m += 1
                r.stall_seconds = time.perf_counter() - t1
                r.stall_wait_s, r.stall_batches = wait, m
            del batch
        finally:
            mon.sample(with_pss=True)
            r.peak_rss, r.peak_pss = mon.peak_rss, mon.peak_pss
            r.processes = mon.names()
            r.loadavg = os.getloadavg()[0]
            del it
            if close is not None:
                close(loader)
            del loader
    return r
