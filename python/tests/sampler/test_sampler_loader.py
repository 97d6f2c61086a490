"""The Go nowcast sampler through the real ``gobatch.Loader`` over presets/nowcast.toml.

The data is generated at test time (tools/gen_nowcast.py, half a day, 256 px) and every check
compares the sampler with the independent xarray reference (nowcast_ref.py) or with itself
under a changed condition (reader count, a second run, a resume, DDP ranks):

- every tensor of sampled examples equals the reference (satellite within float32 rounding of
  the CF decoding, NaN positions equal; everything else exactly);
- t0 and centres cover the valid range and never leave it;
- the stream is the same with 1 and 2 readers and across runs, and differs with another seed;
- ``state_dict`` / ``load_state_dict`` resume at exactly the next batch (and shmloader's
  ``--start K``, the primitive under it, begins at batch K);
- ranks 0 and 1 of ``world_size`` 2 get disjoint shares that together make the
  ``world_size`` 1 stream (and shmloader's ``--rank``/``--world-size`` interleave it);
- the shmloader process stays within its cache budget;
- bad configurations raise ``gobatch.ConfigError`` naming the field.
"""

from __future__ import annotations

import copy
import threading
import time
import tomllib
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import psutil
import pytest

import gobatch
from nowcast_ref import NowcastReference, generated_nowcast

REPO = Path(__file__).resolve().parents[3]
PRESET = REPO / "presets" / "nowcast.toml"
NAMES = ("satellite", "nwp", "pv", "t0", "x", "y", "pv_system")
SHAPES = {"satellite": (32, 19, 12, 32, 32), "nwp": (32, 4, 10, 8, 8), "pv": (32, 19, 16), "t0": (32,),
          "x": (32,), "y": (32,), "pv_system": (32, 16)}
DTYPES = {"satellite": np.float32, "nwp": np.float32, "pv": np.float32, "t0": np.int64,
          "x": np.float64, "y": np.float64, "pv_system": np.int64}

pytestmark = pytest.mark.timeout(120)

Batch = dict[str, np.ndarray]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with generated_nowcast(tmp_path_factory.mktemp("nowcast"), "half-day", days=0.5, pixels=256, seed=11) as out:
        yield out


def preset(**batch: Any) -> dict[str, Any]:
    """presets/nowcast.toml as a dict, with [batch] keys overridden."""
    cfg = tomllib.loads(PRESET.read_text())
    cfg.setdefault("batch", {}).update(batch)
    return cfg


def source(cfg: dict[str, Any], name: str) -> dict[str, Any]:
    for s in cfg["source"]:
        if s.get("name") == name:
            return s
    raise KeyError(f"{PRESET} has no source {name!r}")


@pytest.fixture(scope="module")
def ref(data: Path) -> NowcastReference:
    cfg = preset()
    return NowcastReference(data, sat_channels=source(cfg, "satellite").get("channels"),
                            nwp_variables=source(cfg, "nwp").get("channels"))


def take(n: int, cfg: dict[str, Any] | None = None, data: Path | None = None, **kw: Any) -> list[Batch]:
    """The first n batches of a Loader, copied out of the ring."""
    out: list[Batch] = []
    with gobatch.Loader(cfg if cfg is not None else preset(), framework="numpy", data_root=data, **kw) as loader:
        for batch in loader:
            out.append({k: np.array(v) for k, v in batch.items()})
            if len(out) == n:
                break
    assert len(out) == n
    return out


def same(a: list[Batch], b: list[Batch]) -> bool:
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(np.array_equal(x[k], y[k], equal_nan=x[k].dtype.kind == "f") for k in x)
        for x, y in zip(a, b))


def key(b: Batch) -> bytes:
    """Identity of a batch: its examples' (t0, x, y)."""
    return b["t0"].tobytes() + b["x"].tobytes() + b["y"].tobytes()


def check_examples(ref: NowcastReference, batches: list[Batch]) -> dict[str, int]:
    """Every example of ``batches`` against the reference; returns NaN counts seen."""
    nans = {"satellite": 0, "pv": 0}
    for k, b in enumerate(batches):
        for i in range(b["t0"].shape[0]):
            want = ref.example(int(b["t0"][i]), float(b["x"][i]), float(b["y"][i]))
            where = f"batch {k} example {i} (t0 {int(b['t0'][i])}, x {b['x'][i]}, y {b['y'][i]})"
            sat = b["satellite"][i]
            assert np.array_equal(np.isnan(sat), np.isnan(want.satellite)), f"satellite NaN positions, {where}"
            np.testing.assert_allclose(sat, want.satellite, rtol=1e-6, atol=0, equal_nan=True,
                                       err_msg=f"satellite, {where}")
            assert np.array_equal(b["nwp"][i], want.nwp, equal_nan=True), f"nwp, {where}"
            assert np.array_equal(b["pv"][i], want.pv, equal_nan=True), f"pv, {where}"
            assert np.array_equal(b["pv_system"][i], want.pv_system), f"pv_system, {where}"
            nans["satellite"] += int(np.isnan(sat).sum())
            nans["pv"] += int(np.isnan(b["pv"][i]).sum())
    return nans


# ------------------------------------------------------------------------------------ tests


def test_examples_equal_reference(data: Path, ref: NowcastReference) -> None:
    batches = take(4, data=data)
    for name in NAMES:
        assert batches[0][name].shape == SHAPES[name], name
        assert batches[0][name].dtype == DTYPES[name], name
    nans = check_examples(ref, batches)
    assert nans["satellite"] > 0 and nans["pv"] > 0, f"the check saw no NaN: {nans}"


def test_t0_and_locations_cover_the_valid_range(data: Path, ref: NowcastReference) -> None:
    batches = take(40, data=data)
    t0 = np.concatenate([b["t0"] for b in batches])
    idx = np.array([ref.time_index(int(t)) for t in t0])
    valid = ref.valid_t0_indices()
    n_time = len(ref.sat_time)
    assert np.all(idx >= 6) and np.all(idx + 12 < n_time)
    oldest_run = ref.init_time.min()
    assert np.all(ref.sat_time[idx] - np.timedelta64(60, "m") >= oldest_run), "t0 without an NWP run 60 min older"
    assert set(idx) <= set(valid)
    assert len(set(idx)) >= 0.95 * len(valid), f"{len(set(idx))} of {len(valid)} t0 values drawn"
    assert idx.min() == valid[0] and idx.max() == valid[-1]
    cyx = np.array([ref.pixel_index(float(x), float(y))
                    for b in batches for x, y in zip(b["x"], b["y"])])
    lo_y, hi_y, lo_x, hi_x = ref.centre_range
    assert (lo_y, hi_y, lo_x, hi_x) == (16, 240, 16, 240)
    for axis, lo, hi in ((0, lo_y, hi_y), (1, lo_x, hi_x)):
        c = cyx[:, axis]
        assert c.min() >= lo and c.max() < hi, (c.min(), c.max())
        assert c.min() <= lo + 4 and c.max() >= hi - 5, (c.min(), c.max())


def test_deterministic_across_readers_and_runs(data: Path) -> None:
    one = take(6, data=data, readers=1)
    two = take(6, data=data, readers=2)
    again = take(6, data=data, readers=2)
    assert same(one, two), "readers=1 and readers=2 give different streams"
    assert same(two, again), "two runs give different streams"
    other = take(2, preset(seed=preset()["batch"].get("seed", 0) + 1), data=data)
    assert key(other[0]) != key(one[0]), "another seed gives the same stream"


def test_start_flag_begins_at_batch_k(data: Path) -> None:
    """The resume primitive under state_dict: ``shmloader run --start K``."""
    whole = take(5, data=data)
    assert same(take(2, data=data, extra_args=["--start", "3"]), whole[3:5])


def test_resume_at_the_exact_next_batch(data: Path) -> None:
    cfg = preset()
    with gobatch.Loader(cfg, framework="numpy", data_root=data) as loader:
        it = iter(loader)
        for _ in range(3):
            next(it)
        state = loader.state_dict()
        rest = [{k: np.array(v) for k, v in next(it).items()} for _ in range(3)]
    resumed: list[Batch] = []
    with gobatch.Loader(cfg, framework="numpy", data_root=data) as loader:
        loader.load_state_dict(copy.deepcopy(state))
        for batch in loader:
            resumed.append({k: np.array(v) for k, v in batch.items()})
            if len(resumed) == 3:
                break
    assert same(rest, resumed), "the resumed stream does not continue at the next batch"
    assert not same(take(1, cfg, data=data), resumed[:1])


def test_rank_flags_interleave_the_global_stream(data: Path) -> None:
    """shmloader's --rank/--world-size: rank r of W gets global batches k*W + r."""
    whole = take(6, data=data)
    r0 = take(3, data=data, extra_args=["--rank", "0", "--world-size", "2"])
    r1 = take(3, data=data, extra_args=["--rank", "1", "--world-size", "2"])
    assert same(r0, whole[0::2]) and same(r1, whole[1::2])


def test_ddp_ranks_get_disjoint_shares(data: Path) -> None:
    whole = take(8, data=data)
    r0 = take(4, data=data, rank=0, world_size=2)
    r1 = take(4, data=data, rank=1, world_size=2)
    k0, k1 = {key(b) for b in r0}, {key(b) for b in r1}
    assert len(k0) == 4 and len(k1) == 4
    assert not k0 & k1, "ranks 0 and 1 share batches"
    assert k0 | k1 == {key(b) for b in whole}, "ranks' shares are not the world_size 1 stream"


def _anon_mb(p: psutil.Process) -> tuple[float, float]:
    mi = p.memory_info()
    return (mi.rss - mi.shared) / 1e6, mi.rss / 1e6


def test_cache_budget_is_respected(data: Path, ref: NowcastReference) -> None:
    """A 160 MB cache on data whose satellite takes 227 MB in the cache (int16 as stored; 453 MB
    as float32): locality sampling. Measured: the shmloader's resident memory that is not shared
    (RSS minus psutil's ``shared``, i.e. minus the ring's shared-memory pages and mapped files,
    which are not cache) must stay within the budget plus 100 MB."""
    cache_mb = 160
    cfg = preset()
    source(cfg, "satellite")["cache_mb"] = cache_mb
    peak = [0.0, 0.0]
    stop = threading.Event()
    batches: list[Batch] = []
    with gobatch.Loader(cfg, framework="numpy", data_root=data) as loader:
        proc = psutil.Process(loader.pid)

        def watch() -> None:
            while not stop.is_set():
                try:
                    a, r = _anon_mb(proc)
                except psutil.Error:
                    return
                peak[0], peak[1] = max(peak[0], a), max(peak[1], r)
                stop.wait(0.02)

        th = threading.Thread(target=watch, daemon=True)
        th.start()
        t = time.monotonic()
        n = 0
        for batch in loader:
            if n < 2:
                batches.append({k: np.array(v) for k, v in batch.items()})
            n += 1
            if n == 60 or time.monotonic() - t > 15:
                break
        stop.set()
        th.join()
        time.sleep(0.6)  # the sampler publishes its cache counters every 0.5 s
        st = loader.stats()
    assert n >= 10
    # The cache's own figures reach stats() through the ring (PROTOCOL.md 2.5a).
    assert st["cache_budget_bytes"] == cache_mb << 20
    assert 0 < st["cache_bytes"] <= st["cache_budget_bytes"]
    assert st["cache_misses"] > 0 and st["cache_hits"] > 0 and 0 < st["cache_hit_rate"] < 1
    assert st["cache_evictions"] > 0, "227 MB of data through a 160 MB cache must evict"
    assert st["segments_per_batch"] >= 1, "locality sampling reports its distinct segments per batch"
    print(f"cache_mb {cache_mb}: shmloader private RSS peak {peak[0]:.0f} MB, total RSS peak {peak[1]:.0f} MB, {n} batches")
    assert peak[0] <= cache_mb + 100, f"shmloader private RSS peaked at {peak[0]:.0f} MB (total RSS {peak[1]:.0f} MB)"
    check_examples(ref, batches)


@pytest.mark.parametrize("edit, field", [
    (lambda c: c["batch"].update(size=0), "batch.size"),
    (lambda c: source(c, "satellite").update(store="no-such.zarr"), "no-such.zarr"),
    (lambda c: source(c, "nwp").update(channels=["no_such_variable"]), "no_such_variable"),
    (lambda c: source(c, "pv").update(nearest_k=0), "nearest_k"),
    (lambda c: source(c, "satellite").update(image_size_pixels_height=300), "image_size_pixels_height"),
    (lambda c: source(c, "satellite").update(colour="blue"), "colour"),
])
def test_bad_config_names_the_field(data: Path, edit: Any, field: str) -> None:
    cfg = preset()
    edit(cfg)
    with pytest.raises(gobatch.ConfigError) as e:
        with gobatch.Loader(cfg, framework="numpy", data_root=data) as loader:
            next(iter(loader))
    assert field in str(e.value), str(e.value)
