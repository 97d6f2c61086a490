"""Data larger than the cache, and crops as large as the grid, through real ``gobatch.Loader`` /
``shmloader`` processes on Zarr stores written here with xarray.

- a crop as large as the whole anchor grid (even and odd sizes): every example is the whole
  field of its window, equal to xarray's;
- ``sampling = "auto"`` with a cache too small even for locality sampling runs (random draws
  with evictions) and says why in the start-up log and the plan, with the ``cache_mb`` that
  would change it; explicit ``sampling = "locality"`` keeps its refusal;
- a simulated archive (tools/gen_archive.py: a year of 5-minute steps x 300 sites, metadata and
  a few real chunks, the rest absent) is planned in epochs of every (t0, site) pair with counts
  from xarray's view of the stores, the mixing in range and the plan's peak memory under the
  issue's 200 MB, and its first batch equals xarray's (real chunks and fill values).
  Timings are the benchmark's (benchmarks/archive_bench.py), not asserted here.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
import xarray as xr

import gobatch

pytestmark = pytest.mark.timeout(180)

TOOLS = Path(__file__).resolve().parents[3] / "tools"

EPOCH = "minutes since 2021-01-01"
N_TIME = 48
CHANNELS = ["a", "b"]


def write_field(root: Path, name: str, h: int, w: int, chunk: tuple[int, int, int, int], n_time: int = N_TIME) -> None:
    rng = np.random.default_rng(h * 1000 + w)
    time = np.datetime64("2021-03-01T06:00") + np.arange(n_time) * np.timedelta64(5, "m")
    data = rng.integers(0, 1000, size=(n_time, len(CHANNELS), h, w), dtype=np.int16)
    ds = xr.Dataset({"data": (("time", "channel", "y", "x"), data)},
                    coords={"time": time, "channel": CHANNELS,
                            "y": np.arange(h, dtype=np.float64) * 1000.0, "x": np.arange(w, dtype=np.float64) * 1000.0})
    ds.to_zarr(root / name, zarr_format=2, consolidated=True,
               encoding={"time": {"units": EPOCH, "dtype": "int64"}, "data": {"chunks": chunk}})


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("archive")
    write_field(root, "even.zarr", 24, 36, (8, 2, 24, 36))
    write_field(root, "odd.zarr", 23, 35, (8, 1, 12, 20))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def config(store: str, h: int, w: int, **sat: Any) -> dict[str, Any]:
    return {
        "batch": {"size": 4, "seed": 11},
        "ring": {"slots": 2},
        "source": [dict({
            "name": "satellite", "kind": "zarr", "store": store, "variable": "data", "anchor": True,
            "time_resolution_minutes": 5, "interval_start_minutes": -10, "interval_end_minutes": 10,
            "image_size_pixels_height": h, "image_size_pixels_width": w, "channels": CHANNELS}, **sat)],
    }


def take(cfg: dict[str, Any], root: Path, n: int, **kw: Any) -> tuple[list[dict[str, np.ndarray]], str]:
    """The first n batches, and shmloader's log (-v)."""
    out: list[dict[str, np.ndarray]] = []
    with gobatch.Loader(cfg, framework="numpy", data_root=root, extra_args=("-v",), **kw) as loader:
        for batch in loader:
            out.append({k: np.array(v) for k, v in batch.items()})
            if len(out) == n:
                break
        log = loader._stderr
        assert log is not None
        log.seek(0)
        text = log.read().decode(errors="replace")
    assert len(out) == n
    return out, text


def ready_line(log: str) -> dict[str, Any]:
    for line in log.splitlines():
        if '"sources ready"' in line:
            return dict(json.loads(line))
    raise AssertionError(f"no 'sources ready' line in shmloader's log:\n{log}")


@pytest.mark.parametrize("store,h,w", [("even.zarr", 24, 36), ("odd.zarr", 23, 35)])
def test_crop_of_the_whole_grid_equals_xarray(root: Path, store: str, h: int, w: int) -> None:
    batches, _ = take(config(store, h, w), root, 3)
    ds = xr.open_zarr(root / store)
    times = ds["time"].values.astype("datetime64[s]").astype(np.int64)
    for b in batches:
        assert b["satellite"].shape == (4, 5, len(CHANNELS), h, w)
        for e, t0 in enumerate(b["t0"]):
            i = int(np.nonzero(times == t0)[0][0])
            want = ds["data"].isel(time=slice(i - 2, i + 3)).sel(channel=CHANNELS).values.astype(np.float32)
            np.testing.assert_array_equal(b["satellite"][e], want)
            assert b["x"][e] == ds["x"].values[w // 2] and b["y"][e] == ds["y"].values[h // 2]


def test_auto_with_a_tiny_cache_runs_and_says_why(root: Path) -> None:
    big = "big.zarr"
    if not (root / big).exists():  # 200 steps of 2 x 256 x 256 int16: 52 MB decoded
        write_field(root, big, 256, 256, (4, 2, 256, 256), n_time=200)
    cfg = config(big, 32, 32, cache_mb=16, segment_steps=96)  # a segment needs about 28 MB
    batches, log = take(cfg, root, 6)
    ready = ready_line(log)
    assert ready["mode"] == "random", ready
    why = ready["sampling_why"]
    assert why.startswith("auto chose random with evictions: cache_mb 16 holds"), why
    assert "would allow locality sampling" in why and "would hold everything" in why, why
    plan = gobatch.plan(cfg, data_root=str(root))
    assert plan["mode"] == "random" and plan["sampling_why"] == why
    assert plan["traffic"]["misses_per_batch"] > 0 and plan["traffic"]["chunks_per_batch"] > 0, plan["traffic"]
    # The examples are the store's, by xarray.
    ds = xr.open_zarr(root / big)
    times = ds["time"].values.astype("datetime64[s]").astype(np.int64)
    for b in batches[:2]:
        for e, t0 in enumerate(b["t0"]):
            i = int(np.nonzero(times == t0)[0][0])
            cy = int(np.nonzero(ds["y"].values == b["y"][e])[0][0])
            cx = int(np.nonzero(ds["x"].values == b["x"][e])[0][0])
            want = ds["data"].isel(time=slice(i - 2, i + 3), y=slice(cy - 16, cy + 16),
                                   x=slice(cx - 16, cx + 16)).values.astype(np.float32)
            np.testing.assert_array_equal(b["satellite"][e], want)
    # Asked for by name, locality with that cache is refused, naming the key.
    with pytest.raises(gobatch.ConfigError, match=r"source\[0\]\.cache_mb.*too small for locality sampling"):
        take(config(big, 32, 32, cache_mb=16, segment_steps=96, sampling="locality"), root, 1)
    # The segments are set by keyword too (segment_steps=, --segment-steps), and the refusal
    # names both settings as each interface spells them; segments of 12 steps fit the cache.
    with pytest.raises(gobatch.ConfigError, match=r"expected cache_mb \(cache_mb=, --cache-mb, the anchor source's cache_mb\) "
                       r">= \d+ or a smaller segment_steps \(segment_steps=, --segment-steps, "):
        gobatch.plan(config(big, 32, 32, cache_mb=16, sampling="locality"), data_root=str(root), segment_steps=96)
    small = gobatch.plan(config(big, 32, 32, cache_mb=16, segment_steps=96, sampling="locality"), data_root=str(root),
                         segment_steps=12)
    assert small["mode"] == "locality" and small["mixing"]["segment_steps"] == 12, small["mixing"]


# ------------------------------------------------------------------ a simulated archive

YEAR, SITES = 105120, 300  # 5-minute steps in 365 days


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    sys.path.insert(0, str(TOOLS))
    try:
        import gen_archive
    finally:
        sys.path.remove(str(TOOLS))
    out = tmp_path_factory.mktemp("archive-sim")
    gen_archive.generate(out, steps=YEAR, sites=SITES, real_chunks=2)
    yield out
    shutil.rmtree(out, ignore_errors=True)


def archive_config() -> dict[str, Any]:
    return {
        "batch": {"size": 32, "seed": 0, "order": "epochs"},
        "ring": {"slots": 2},
        "source": [
            {"name": "satellite", "kind": "zarr", "store": "satellite.zarr", "variable": "data", "anchor": True,
             "locations": "pv", "time_resolution_minutes": 5, "interval_start_minutes": -30,
             "interval_end_minutes": 0, "image_size_pixels_height": 16, "image_size_pixels_width": 16,
             "channels": ["IR_108", "VIS006"], "cache_mb": 256},
            {"name": "pv", "kind": "zarr", "store": "pv.zarr", "variable": "generation", "role": "points",
             "nearest_k": 4, "time_resolution_minutes": 5, "interval_start_minutes": -30,
             "interval_end_minutes": 30},
        ],
    }


def test_a_year_of_an_archive_plans_in_segments(archive: Path) -> None:
    sat, pv = xr.open_zarr(archive / "satellite.zarr"), xr.open_zarr(archive / "pv.zarr")
    assert sat.sizes["time"] == YEAR and pv.sizes["location_id"] == SITES
    cmd = [gobatch.shmloader_path(), "plan", "--config", "-", "--json",
           "--data-root", str(archive)]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate(json.dumps(archive_config()).encode(), timeout=120)
    assert p.returncode == 0, err.decode(errors="replace")
    plan = json.loads(out)
    # t0 needs 30 minutes before it (both sources) and 30 after (pv) inside the time axis.
    times = sat["time"].values
    lo, hi = times[0] + np.timedelta64(30, "m"), times[-1] - np.timedelta64(30, "m")
    candidates = int(np.count_nonzero((times >= lo) & (times <= hi)))
    assert plan["t0_candidates"] == candidates == YEAR - 12, plan["t0_candidates"]
    assert plan["locations"] == SITES
    assert plan["samples"] == candidates * SITES
    assert plan["epoch_batches"] == candidates * SITES // 32
    # Decoded bytes: the satellite at its stored width (int16) and the pv floats, by xarray.
    assert plan["decoded_bytes"] == sat["data"].encoding["dtype"].itemsize * sat["data"].size + pv["generation"].nbytes
    assert plan["mode"] == "locality" and plan["decoded_bytes"] > 6 * plan["cache_bytes"]
    mix = plan["mixing"]
    steps = mix["segment_steps"]
    assert mix["segments"] == -(-candidates // steps), mix  # every candidate in one segment of the block shuffle
    assert 1 < mix["resident_segments"] < mix["segments"], mix
    assert mix["segments_per_batch"] > 2 and abs(mix["spearman_position_t0"]) < 0.2, mix


# Runs argv[1:] and prints its exit code and peak RSS (KiB) on stderr. Linux counts in a
# process's ru_maxrss the memory it had before its exec, so the command is forked from this small
# interpreter (started with -S -I), not from pytest's large one: the figure is an upper bound on
# the command's own peak, off by at most this interpreter's few MB.
PEAK_RSS = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss, file=sys.stderr)
"""


def test_a_year_of_an_archive_plan_memory(archive: Path) -> None:
    """The plan keeps no per-sample tables: its whole process stays under the issue's 200 MB for
    3 x 10^7 (t0, site) samples."""
    cmd = [sys.executable, "-S", "-I", "-c", PEAK_RSS, gobatch.shmloader_path(), "plan",
           "--config", "-", "--json", "--data-root", str(archive)]
    done = subprocess.run(cmd, input=json.dumps(archive_config()).encode(), stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, timeout=120)
    err = done.stderr.decode(errors="replace")
    code, peak_kib = (int(v) for v in err.strip().splitlines()[-1].split())
    assert code == 0, err
    assert peak_kib < 200 * 1024, f"shmloader plan peak RSS {peak_kib} KiB"


def test_a_year_of_an_archive_first_batch_equals_xarray(archive: Path) -> None:
    batches, log = take(archive_config(), archive, 1)
    b = batches[0]
    assert ready_line(log)["mode"] == "locality"
    sat = xr.open_zarr(archive / "satellite.zarr")
    times = sat["time"].values.astype("datetime64[s]").astype(np.int64)
    for e, t0 in enumerate(b["t0"]):
        i = int(np.nonzero(times == t0)[0][0])
        cy = int(np.nonzero(sat["y"].values == b["y"][e])[0][0])
        cx = int(np.nonzero(sat["x"].values == b["x"][e])[0][0])
        want = sat["data"].isel(time=slice(i - 6, i + 1), y=slice(cy - 8, cy + 8),
                                x=slice(cx - 8, cx + 8)).values.astype(np.float32)
        np.testing.assert_array_equal(b["satellite"][e], want)
