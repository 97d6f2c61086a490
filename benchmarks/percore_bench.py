#!/usr/bin/env python3
"""Per-core efficiency (issue 11): the issue's figures, side by side in one run on the same data.

Every figure is measured for this build's ``shmloader`` and, with ``--baseline-shmloader
PATH``, for another build (the tree before issue 11, say) in the same run, runs of the two
alternated. The trainer is the same for both and takes batches as fast as it can, in two
forms (TRAINERS): "copies" touches every byte of each batch once (a copy into preallocated
arrays), so that the cost of the loader's slot writes to the trainer's first reads is part of
the figure; "takes" gives each batch back untouched, so that the loader has this machine's
cores to itself (on a node the trainers' copies run on their own cores or a GPU's DMA
engines; with 2 CPUs here the copy takes most of one that the loader would scale into). (a),
(b) and (d) are measured under both. Parts:

(a) in cache (``--data``, 4 days of nowcast-ref by default, cache_mb 4096, sampling
    "random"): batches/s over the batches/s of a NumPy baseline that writes one batch's bytes
    (np.copyto from one of four source buffers, as a loader writes a slot) and touches them as
    the trainer does, and the loader's CPU seconds per batch;
(b) larger than the cache (``--large-data``, 8 days, cache_mb 1024, sampling "locality" with
    segment_steps, resident_segments and rotate_every_batches set explicitly, so that both
    builds draw the same examples): batches/s, this build over the baseline, the measured
    segments per batch and chunk misses per batch;
(c) decoded cache bytes: a bounded stream of ``--cache-batches`` batches of (a)'s data,
    every batch taken, then the cache's resident bytes and chunks (Loader.stats()), this build
    over the baseline;
(d) readers 1 and 2, in cache and larger than the cache: batches/s and CPU s per batch, and
    the ratio readers=2 / readers=1;
(e) cold first batch: the data's pages dropped from the page cache (POSIX_FADV_DONTNEED on
    every file, checked with mincore), then ``shmloader run --ring`` started and the first
    batch taken and touched by the trainer; the time from the process start, the loader's CPU
    seconds by then, and the loader's own start-up log (debug level): sources open, ring
    ready, first batch's chunks decoded, first batch filled.

Machine load (1-minute load average) is printed beside every figure: the machine may be shared.

Usage::

    python benchmarks/percore_bench.py --quick [--baseline-commit C | --baseline-shmloader OLD]  # < 2 minutes
    python benchmarks/percore_bench.py [--baseline-commit C | --baseline-shmloader OLD]          # < 20 minutes

``--baseline-commit C`` builds the baseline itself (git archive C, go build ./cmd/shmloader in
a temporary directory); ``make bench`` and ``run_all.py --only percore`` measure against the
tree before issue 11 (0d579d4) that way. ``--parts`` runs some of a, b, c, e.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import mmap
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from baselines import MB, REPO, ensure_dataset, shown  # noqa: E402

PRESET = REPO / "presets" / "nowcast.toml"

# Locality sampling of (b), set explicitly so that every build draws the same examples
# whatever its cache would choose: the values today's build picks for 8 days at cache_mb 1024.
LOCALITY = {"segment_steps": 48, "resident_segments": 3, "rotate_every_batches": 8}

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def preset_config(cache_mb: int, sampling: str, seed: int = 0, batches: int = 0) -> dict[str, Any]:
    """The shipped preset with the anchor's cache budget and sampling mode set (and, for
    locality sampling, its segments: LOCALITY)."""
    cfg = tomllib.loads(PRESET.read_text())
    cfg["batch"].update(batches=batches, seed=seed)
    anchor = next(s for s in cfg["source"] if s.get("anchor"))
    anchor.update(cache_mb=cache_mb, sampling=sampling)
    if sampling == "locality":
        anchor.update(LOCALITY)
    return cfg


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process pid so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Touch:
    """The trainer's first touch of a batch: every tensor copied into a preallocated array."""

    name = "copies"

    def __init__(self) -> None:
        self.dst: dict[str, np.ndarray] = {}

    def __call__(self, batch: Any) -> int:
        n = 0
        for k, v in batch.items():
            a = np.asarray(v)
            d = self.dst.get(k)
            if d is None or d.shape != a.shape or d.dtype != a.dtype:
                d = self.dst[k] = np.empty_like(a)
            np.copyto(d, a)
            n += a.nbytes
        if hasattr(batch, "release"):
            batch.release()
        return n


class Take:
    """A trainer that takes each batch and gives it back untouched: the loader alone, with every
    core but the consumer's few microseconds a batch (on a node, the trainers' copies run on
    their own cores or on a GPU's DMA engines, not on the loader's)."""

    name = "takes"

    def __call__(self, batch: Any) -> int:
        n = sum(np.asarray(v).nbytes for v in batch.values())
        if hasattr(batch, "release"):
            batch.release()
        return n


TRAINERS: dict[str, Callable[[], Any]] = {"copies": Touch, "takes": Take}


def copy_baseline(nbytes: int, seconds: float) -> float:
    """Batches/s of NumPy doing a loader's and a trainer's memory work for one batch: np.copyto
    of ``nbytes`` from one of four sources (out of the last-level cache, as ring slots are)
    into a slot buffer, then the trainer's touch (a copy of the slot into its own array)."""
    n = nbytes // 4
    srcs = [np.full(n, float(k), dtype=np.float32) for k in range(4)]
    slot, dst = np.empty_like(srcs[0]), np.empty_like(srcs[0])
    np.copyto(slot, srcs[0])
    np.copyto(dst, slot)
    times = []
    t_end = time.perf_counter() + seconds
    k = 0
    while time.perf_counter() < t_end or len(times) < 8:
        t = time.perf_counter()
        np.copyto(slot, srcs[k % 4])
        np.copyto(dst, slot)
        times.append(time.perf_counter() - t)
        k += 1
    return 1.0 / float(np.median(times))


@dataclass
class Run:
    """One loader measured over a stretch of its stream."""

    build: str
    readers: int
    trainer: str = "copies"
    batches: int = 0
    seconds: float = 0.0
    cpu_s: float = 0.0  # the loader's
    batch_bytes: int = 0
    misses_per_batch: float = float("nan")
    segments_per_batch: float = 0.0
    load: str = ""
    error: str = ""
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def bps(self) -> float:
        return self.batches / self.seconds if self.seconds else float("nan")

    @property
    def cpu_per_batch(self) -> float:
        return self.cpu_s / self.batches if self.batches else float("nan")


def published_stats(loader: Any) -> dict[str, Any]:
    """The loader's stats once the producer has published its latest counters (every 0.5 s)."""
    time.sleep(0.6)
    return dict(loader.stats())


def measure(build: str, binary: str, cfg: dict[str, Any], root: Path, readers: int, warmup: int,
            seconds: float, max_batches: int, trainer: str = "copies") -> Run:
    """``warmup`` batches, then batches as fast as the trainer takes them for ``seconds``
    (at most ``max_batches``), each handed to the trainer (TRAINERS: copied, or only taken)."""
    import gobatch

    r = Run(build=build, readers=readers, trainer=trainer)
    touch = TRAINERS[trainer]()
    try:
        loader = gobatch.Loader(cfg, data_root=str(root), readers=readers, shmloader=binary)
    except Exception as e:  # a build that refuses the configuration: say so in the table
        r.error = f"{type(e).__name__}: {e}"[:200]
        return r
    try:
        it: Iterator[Any] = iter(loader)
        for _ in range(warmup):
            r.batch_bytes = touch(next(it))
        before = published_stats(loader)
        cpu0 = cpu_seconds(loader.pid)
        t0 = time.perf_counter()
        while r.batches < max_batches and time.perf_counter() - t0 < seconds:
            touch(next(it))
            r.batches += 1
        r.seconds = time.perf_counter() - t0
        r.cpu_s = cpu_seconds(loader.pid) - cpu0
        r.load = load()
        after = published_stats(loader)
        written = after["batches_written"] - before["batches_written"]
        if written > 0:
            r.misses_per_batch = (after["cache_misses"] - before["cache_misses"]) / written
        r.segments_per_batch = after["segments_per_batch"]
        r.stats = after
    finally:
        loader.close()
    return r


def alternate(builds: list[tuple[str, str]], rounds: int, one: Callable[[str, str], Run]) -> dict[str, list[Run]]:
    """``rounds`` runs of every build, alternated (so that a change in the machine's load
    falls on both)."""
    out: dict[str, list[Run]] = {name: [] for name, _ in builds}
    for i in range(rounds):
        order = builds if i % 2 == 0 else builds[::-1]
        for name, binary in order:
            run = one(name, binary)
            out[name].append(run)
            print(f"    {name}: readers {run.readers}, trainer {run.trainer}: {run.bps:.2f} batches/s, {run.cpu_per_batch * 1e3:.1f} CPU ms/batch, "
                  f"{run.misses_per_batch:.2f} misses/batch, segments/batch {run.segments_per_batch:.2f} ({run.load})"
                  + (f" {run.error}" if run.error else ""), flush=True)
    return out


def best(runs: list[Run]) -> Run:
    """The run with the median batches/s (the middle one of an odd count, the lower middle of
    an even count)."""
    ok = sorted((r for r in runs if not r.error), key=lambda r: r.bps)
    return ok[(len(ok) - 1) // 2] if ok else runs[0]


def fmt(v: float, spec: str = ".2f") -> str:
    return "-" if v != v else format(v, spec)


def ratio(a: float, b: float) -> str:
    return fmt(a / b) if b and a == a and b == b else "-"


# ---------------------------------------------------------------- (c) decoded cache bytes


def cache_bytes(build: str, binary: str, root: Path, batches: int) -> dict[str, Any]:
    """Resident cache bytes and chunks after every batch of a bounded stream is taken."""
    import gobatch

    cfg = preset_config(4096, "random", batches=batches)
    touch = Touch()
    loader = gobatch.Loader(cfg, data_root=str(root), readers=2, shmloader=binary)
    try:
        for b in loader:
            touch(b)
        st = published_stats(loader)
    finally:
        loader.close()
    chunks = st["cache_misses"] - st["cache_evictions"]
    return {"build": build, "bytes": st["cache_bytes"], "chunks": chunks,
            "per_chunk": st["cache_bytes"] / chunks if chunks else float("nan")}


# ---------------------------------------------------------------- (e) cold first batch


def data_files(root: Path) -> Iterator[Path]:
    for dirpath, _, names in os.walk(root):
        for n in names:
            yield Path(dirpath) / n


def evict(root: Path) -> tuple[int, int]:
    """Drops root's files from the page cache (clean pages: POSIX_FADV_DONTNEED) and returns
    (pages still resident, pages), counted with mincore."""
    for p in data_files(root):
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    resident = total = 0
    for p in data_files(root):
        size = p.stat().st_size
        if size == 0:
            continue
        pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        with open(p, "rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY) as m:
            vec = (ctypes.c_ubyte * pages)()
            base = ctypes.c_char.from_buffer(m)
            try:
                if _libc.mincore(ctypes.addressof(base), size, vec) != 0:
                    raise OSError(ctypes.get_errno(), f"mincore {p}")
            finally:
                del base
            resident += sum(v & 1 for v in vec)
            total += pages
    return resident, total


@dataclass
class Cold:
    build: str
    first_s: float = float("nan")  # process start to the first batch touched by the trainer
    cpu_s: float = float("nan")  # the loader's CPU by then
    resident: str = ""  # the data's pages in the page cache before the start
    steps: dict[str, float] = field(default_factory=dict)  # the loader's log: since exec, ms
    load: str = ""
    error: str = ""


# The loader's start-up log messages (debug level) and the names they get in the table.
STEPS = {"sources ready": "open", "started": "ring", "warm": "chunks", "fill": "filled"}


def cold_first_batch(build: str, binary: str, root: Path, readers: int, tmp: Path) -> Cold:
    import gobatch

    c = Cold(build=build)
    res, pages = evict(root)
    c.resident = f"{res}/{pages}"
    cfg_path = tmp / "cold.json"
    cfg_path.write_text(json.dumps(preset_config(4096, "random")))
    log_path = tmp / f"cold-{build}.log"
    name = f"percore{os.getpid()}"
    touch = Touch()
    with open(log_path, "wb") as log:
        t0 = time.perf_counter()
        p = subprocess.Popen([binary, "run", "--config", str(cfg_path), "--ring", name, "--readers", str(readers),
                              "--data-root", str(root), "--log-level", "debug", "--log-format", "json"],
                             stdout=subprocess.DEVNULL, stderr=log)
        try:
            ring = None
            while ring is None:  # the ring's file appears once the loader has created it
                try:
                    ring = gobatch.attach(name, timeout=30)
                except gobatch.RingError:
                    if p.poll() is not None or time.perf_counter() - t0 > 30:
                        raise
                    time.sleep(0.002)
            touch(next(iter(ring)))
            c.first_s = time.perf_counter() - t0
            c.cpu_s = cpu_seconds(p.pid)
            c.load = load()
            ring.close()
            p.wait(timeout=10)
        except Exception as e:
            c.error = f"{type(e).__name__}: {e}"[:200]
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    for line in log_path.read_text().splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        step = STEPS.get(d.get("message", ""))
        if step and step not in c.steps and (step != "fill" or d.get("batch") == 0):
            c.steps[step] = float(d.get("since_exec", float("nan")))
    return c


# ---------------------------------------------------------------- the report


def table(head: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def build_baseline(commit: str, tmp: Path) -> str:
    """Builds cmd/shmloader of ``commit`` (git archive of this repository) in tmp."""
    src = tmp / f"baseline-{commit}"
    src.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    out = tmp / f"shmloader-{commit}"
    subprocess.run(["go", "build", "-o", str(out), "./cmd/shmloader"], cwd=src, check=True)
    return str(out)


def run_parts(args: argparse.Namespace, builds: list[tuple[str, str]], data: Path, large: Path) -> None:
    quick, parts = args.quick, args.parts
    seconds = args.seconds or (3.0 if quick else 8.0)
    rounds = args.rounds or (1 if quick else 3)
    cache_batches = args.cache_batches or (12 if quick else 40)
    names = [n for n, _ in builds]
    print(f"percore_bench: {'quick' if quick else 'full'}; builds: "
          + ", ".join(n if n.startswith("baseline ") else f"{n} {shown(b)}" for n, b in builds)
          + f"; data {shown(data)} (in cache), {shown(large)} (larger than cache); {seconds:.0f} s per run, "
          f"{rounds} round(s) per build; {os.cpu_count()} CPUs, {load()}", flush=True)
    rows: list[list[str]] = []
    figs: list[list[str]] = []

    def add_rows(part: str, sampling: str, runs: dict[tuple[str, int], dict[str, list[Run]]]) -> None:
        for trainer in TRAINERS:
            for readers in (1, 2):
                for n in names:
                    r = best(runs[trainer, readers][n])
                    ok = [x.bps for x in runs[trainer, readers][n] if not x.error]
                    spread = f"{min(ok):.2f}-{max(ok):.2f}" if ok else "-"
                    rows.append([part, trainer, n, str(readers), sampling, fmt(r.segments_per_batch), fmt(r.bps), spread,
                                 fmt(r.cpu_per_batch * 1e3, ".1f"), fmt(r.misses_per_batch), r.load or r.error])
        for trainer in TRAINERS:
            figs.append([f"{part}, trainer {trainer}: readers 2 over readers 1, batches/s (issue: >= 1.8)"]
                        + [ratio(best(runs[trainer, 2][n]).bps, best(runs[trainer, 1][n]).bps) for n in names])

    def both(cfg: dict[str, Any], root: Path, warm: int) -> dict[tuple[str, int], dict[str, list[Run]]]:
        """Every build at readers 2 and 1, under each trainer."""
        return {(trainer, readers): alternate(builds, rounds, lambda n, b: measure(n, b, cfg, root, readers, warm, seconds, 100000, trainer))
                for trainer in TRAINERS for readers in (2, 1)}

    if "a" in parts:
        print("\n(a, d) in cache: cache_mb 4096, sampling random", flush=True)
        warm = 30 if quick else 60  # batches until the random-mode cache holds every chunk
        in_cache = both(preset_config(4096, "random"), data, warm)
        nbytes = best(in_cache["copies", 2][names[0]]).batch_bytes or 30255872
        base_bps = copy_baseline(nbytes, min(seconds, 3.0))
        print(f"    NumPy copy + touch of one batch ({nbytes / MB:.1f} MB): {base_bps:.2f} batches/s ({load()})", flush=True)
        add_rows("in cache", "random", in_cache)
        figs.append(["in cache, readers 2, trainer copies: batches/s over NumPy copy + touch of one batch (issue: >= 0.55)"]
                    + [ratio(best(in_cache["copies", 2][n]).bps, base_bps) for n in names])
        for trainer in TRAINERS:
            figs.append([f"in cache, readers 2, trainer {trainer}: loader CPU ms per batch"]
                        + [fmt(best(in_cache[trainer, 2][n]).cpu_per_batch * 1e3, ".1f") for n in names])
        figs.append([f"(NumPy copy + touch of one {nbytes / MB:.1f} MB batch: batches/s)", fmt(base_bps)] + [""] * (len(names) - 1))

    if "b" in parts:
        print("\n(b, d) larger than the cache: cache_mb 1024, sampling locality, "
              + ", ".join(f"{k} {v}" for k, v in LOCALITY.items()), flush=True)
        larger = both(preset_config(1024, "locality"), large, 8)
        add_rows("larger than cache", "locality", larger)
        if len(names) == 2:
            for trainer in TRAINERS:
                figs.append([f"larger than cache, readers 2, trainer {trainer}: batches/s over the baseline's (issue: >= 2)",
                             ratio(best(larger[trainer, 2][names[0]]).bps, best(larger[trainer, 2][names[1]]).bps), "1"])

    if "c" in parts:
        print(f"\n(c) decoded cache bytes: the first {cache_batches} batches of {shown(data)}, cache_mb 4096, sampling random", flush=True)
        cached: dict[str, dict[str, Any]] = {}
        for n, b in builds:
            try:
                cached[n] = cache_bytes(n, b, data, cache_batches)
            except Exception as e:
                print(f"    {n}: {type(e).__name__}: {e}"[:300], flush=True)
                continue
            cb = cached[n]
            print(f"    {n}: {cb['bytes'] / MB:.0f} MB in {cb['chunks']} chunks ({cb['per_chunk'] / MB:.2f} MB per chunk)", flush=True)
        figs.append(["decoded cache MB (resident, every chunk of the batches)"] + [fmt(cached[n]["bytes"] / MB, ".0f") if n in cached else "-" for n in names])
        if len(cached) == 2:
            figs.append(["decoded cache bytes over the baseline's (issue: <= 0.55)",
                         ratio(cached[names[0]]["bytes"], cached[names[1]]["bytes"]), "1"])

    if "e" in parts:
        print("\n(e) cold first batch: page cache dropped, readers 2, cache_mb 4096, sampling random", flush=True)
        colds: dict[str, list[Cold]] = {n: [] for n in names}
        with tempfile.TemporaryDirectory(prefix="gobatch-percore-") as tmpdir:
            os.environ["GOBATCH_SHM_DIR"] = tmpdir  # the named rings of (e), for shmloader and attach
            for i in range(rounds):
                for n, b in builds if i % 2 == 0 else builds[::-1]:
                    c = cold_first_batch(n, b, data, 2, Path(tmpdir))
                    colds[n].append(c)
                    steps = ", ".join(f"{k} {v:.0f}" for k, v in c.steps.items())
                    print(f"    {n}: first batch {c.first_s:.3f} s, loader CPU {c.cpu_s:.2f} s, data pages resident at "
                          f"the start {c.resident}; loader log since exec, ms: {steps} ({c.load})"
                          + (f" {c.error}" if c.error else ""), flush=True)
        for n in names:
            ok = [c for c in colds[n] if not c.error]
            colds[n] = sorted(ok, key=lambda c: c.first_s)
        figs.append(["cold first batch, s (median; issue: <= 0.7)"]
                    + [fmt(statistics.median([c.first_s for c in colds[n]]), ".3f") if colds[n] else "-" for n in names])
        figs.append(["cold first batch: loader CPU s by then (median run)"]
                    + [fmt(colds[n][(len(colds[n]) - 1) // 2].cpu_s) if colds[n] else "-" for n in names])
        for step in STEPS.values():
            figs.append([f"cold first batch: loader's '{step}' since exec, ms (median run)"]
                        + [fmt(colds[n][(len(colds[n]) - 1) // 2].steps.get(step, float("nan")), ".0f") if colds[n] else "-"
                           for n in names])

    print(f"\n## Results ({load()} at the end)\n")
    print(f"Batches/s: the median of {rounds} run(s) of {seconds:.0f} s per build, builds alternated. Trainer "
          "'copies': every batch copied into the trainer's own arrays (on this machine that copy shares the loader's "
          "cores); 'takes': each batch taken and given back untouched (the loader alone, as on a node whose trainers "
          "copy on their own cores). Sampling and segments per batch beside every figure.\n")
    if rows:
        print(table(["data", "trainer", "build", "readers", "sampling", "segments/batch", "batches/s", "range of the runs",
                     "loader CPU ms/batch", "misses/batch", "load"], rows))
        print()
    print(table(["figure"] + names, figs))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="short runs (under 2 minutes): 1 day in cache, 4 days larger than the cache")
    ap.add_argument("--shmloader", default=os.environ.get("GOBATCH_SHMLOADER", str(REPO / "bin" / "shmloader")),
                    help="this build's shmloader (default: $GOBATCH_SHMLOADER, else bin/shmloader)")
    base = ap.add_mutually_exclusive_group()
    base.add_argument("--baseline-shmloader", help="another build's shmloader, measured beside it in the same run")
    base.add_argument("--baseline-commit", help="build the baseline's shmloader from this commit of the repository (git archive)")
    ap.add_argument("--data", help="nowcast-ref data for (a), (c), (e) (default: data/nowcast-d4, generated when missing; --quick: data/nowcast-d1)")
    ap.add_argument("--large-data", help="data larger than cache_mb 1024 for (b) (default: data/nowcast-large, 8 days; --quick: data/nowcast-d4)")
    ap.add_argument("--seconds", type=float, help="seconds per measured run (default 8; --quick 3)")
    ap.add_argument("--rounds", type=int, help="runs per build and part, builds alternated (default 3; --quick 1)")
    ap.add_argument("--parts", default="abce", help="the parts to run, of abce (default all; (d) comes with (a) and (b))")
    ap.add_argument("--cache-batches", type=int, help="batches of the bounded stream of (c) (default 40; --quick 12)")
    args = ap.parse_args()
    if set(args.parts) - set("abce"):
        ap.error(f"--parts {args.parts!r}: expected letters of abce")
    data = Path(args.data or REPO / ("data/nowcast-d1" if args.quick else "data/nowcast-d4"))
    large = Path(args.large_data or REPO / ("data/nowcast-d4" if args.quick else "data/nowcast-large"))
    if args.data is None:
        ensure_dataset(data, days=1 if args.quick else 4, quiet=True)
    if args.large_data is None and "b" in args.parts:
        ensure_dataset(large, days=4 if args.quick else 8, quiet=True)
    with tempfile.TemporaryDirectory(prefix="gobatch-percore-build-") as tmp:
        builds = [("this", args.shmloader)]
        if args.baseline_commit:
            print(f"building the baseline shmloader of {args.baseline_commit}", flush=True)
            builds.append((f"baseline {args.baseline_commit}", build_baseline(args.baseline_commit, Path(tmp))))
        elif args.baseline_shmloader:
            builds.append(("baseline", args.baseline_shmloader))
        for n, b in builds:
            if not os.access(b, os.X_OK):
                ap.error(f"{n}: shmloader {b!r} is not an executable file")
        run_parts(args, builds, data, large)
    return 0


if __name__ == "__main__":
    sys.exit(main())
