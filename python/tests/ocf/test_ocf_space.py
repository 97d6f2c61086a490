"""gobatch's sample space from an ocf-data-sampler YAML is PVNetDataset's (issue 18, item 3):
the valid (t0, location_id) pairs ocf-data-sampler 1.0.24 finds (contiguous periods of the
satellite, the NWP and the generation, t0s on the generation grid, complete or per-location
mode, location 0 dropped, time_periods), visited once per epoch with ``order="epochs"``, split
between ranks, drawn from in stream order, and ``len(loader)`` as ``len(PVNetDataset) //
batch_size`` per rank.

The reference is ocf-data-sampler itself, run in a child process (as in test_ocf_values.py):
its ``valid_t0_times`` x locations (complete mode) or ``valid_t0_and_location_ids``
(per-location mode), and ``len``. The stores are written here with xarray: a satellite with a
one-hour gap, a UKV NWP with 3-hourly runs and one run missing, half-hourly generation at five
sites with ids 0 to 4.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyproj
import pytest
import xarray as xr

from geostationary import GEOS, grid_area
import ocf_configs as cfg
from ocf_reference import run_ocf

pytestmark = pytest.mark.timeout(600)

T0 = np.datetime64("2024-03-01T00:00")
H = np.timedelta64(1, "h")
M = np.timedelta64(1, "m")

ACCUM, NWP_DROPOUT = "accum", "nwp dropout"


def space_config(gen: str, nwp_variant: str = "") -> str:
    """The sample space tests' configuration over generation store ``gen``; the UKV with an
    accumulated channel (ACCUM) or NWP dropout (NWP_DROPOUT)."""
    channels, constants, extra = ["t"], cfg.norm(t=(280.0, 10.0)), {}
    if nwp_variant == ACCUM:
        channels, constants, extra = ["t", "tp"], cfg.norm(t=(280.0, 10.0), diff_tp=(0.0, 1.0)), {"accum_channels": ["tp"]}
    elif nwp_variant == NWP_DROPOUT:
        extra = {"dropout_timedeltas_minutes": [-180], "dropout_fraction": 1.0}
    return cfg.config(
        "space", "the sample space of PVNetDataset",
        generation=cfg.generation(zarr_path=gen),
        nwp={"ukv": cfg.nwp("ukv", channels, constants, height=4, width=4, **extra)},
        satellite=cfg.satellite(["IR_016"], cfg.norm(IR_016=(1.0, 2.0)), height=4, width=4))

SITES_LON = np.array([-1.5, -1.9, -1.2, -1.6, -1.4])
SITES_LAT = np.array([52.6, 52.4, 52.9, 52.6, 52.75])


def write_stores(root: Path) -> None:
    """The satellite (5 minutes, 30 h, with gaps, an hour a chunk), the UKV (runs every 3 h, steps 0-8 h, the
    12:00 and 15:00 runs missing: the 09:00 run goes stale first) and two generation stores: one with NaN gaps at site 3 and
    a NaN at site 0 (per-location mode), one with a NaN at site 0 only (complete mode: ocf
    drops location 0 before it looks for NaN)."""
    rng = np.random.default_rng(3)
    gx, gy = pyproj.Transformer.from_crs("EPSG:4326", GEOS, always_xy=True).transform(-1.5, 52.6)
    x = gx + 3000.0 * (80 - np.arange(160))  # 33 MB: twice the smallest cache_mb (16)
    y = gy + 3000.0 * (np.arange(160) - 80)
    times = T0 + np.arange(30 * 12) * np.timedelta64(5, "m")
    gaps = [(T0 + 10 * H, T0 + 11 * H), (T0 + 20 * H, T0 + 21 * H), (T0 + 21 * H + 35 * M, T0 + 22 * H + 30 * M)]
    for a, b in gaps:  # the last two leave 21:00 .. 21:30, seven images: one window, too short for ocf
        times = times[(times < a) | (times >= b)]
    sat = xr.Dataset(
        {"data": (("variable", "time", "y_geostationary", "x_geostationary"),
                  rng.normal(size=(1, len(times), len(y), len(x))).astype(np.float32), {"area": grid_area(x, y)})},
        coords={"variable": ["IR_016"], "time": times, "y_geostationary": y, "x_geostationary": x})
    sat.to_zarr(root / "sat.zarr", zarr_format=2, consolidated=True, encoding={"data": {"chunks": (1, 12, 160, 160)}})

    xo, yo = np.arange(380000.0, 520000.0, 4000.0), np.arange(360000.0, 240000.0, -4000.0)
    init = T0 - 3 * H + np.arange(11) * 3 * H
    init = init[(init != T0 + 12 * H) & (init != T0 + 15 * H)]
    step = np.arange(9) * H
    xr.Dataset({"UKV": (("init_time", "step", "variable", "x", "y"),
                        rng.normal(280, 5, (len(init), len(step), 2, len(xo), len(yo))).astype(np.float32))},
               coords={"init_time": init, "step": step, "variable": ["t", "tp"], "x": xo, "y": yo},
               ).to_zarr(root / "ukv.zarr", zarr_format=2, consolidated=True)

    gtimes = T0 - 2 * H + np.arange(68) * np.timedelta64(30, "m")
    for name, gaps, first in [("gen_gaps.zarr", True, 0), ("gen_full.zarr", False, 0), ("gen_sites.zarr", False, 1)]:
        mw = rng.uniform(0, 5, (len(gtimes), 5)).astype(np.float32)
        mw[10, 0] = np.nan  # location 0: dropped, so its NaN decides nothing
        if gaps:
            mw[(gtimes >= T0 + 5 * H) & (gtimes < T0 + 6 * H), 3] = np.nan
            mw[gtimes == T0 + 20 * H, 3] = np.nan
            mw[gtimes == T0 + 25 * H, 1] = np.nan
        keep = slice(first, None)  # gen_sites.zarr: no location 0
        xr.Dataset(
            {"generation_mw": (("time_utc", "location_id"), mw[:, keep]),
             "capacity_mwp": (("time_utc", "location_id"), np.full((len(gtimes), 5), 10.0, np.float32)[:, keep])},
            coords={"time_utc": gtimes, "location_id": np.arange(5)[keep],
                    "longitude": ("location_id", SITES_LON[keep]), "latitude": ("location_id", SITES_LAT[keep])},
        ).to_zarr(root / name, zarr_format=2, consolidated=True,  # chunks with edges: gobatch reads them one by one
                  encoding={"generation_mw": {"chunks": (16, 2)}, "capacity_mwp": {"chunks": (16, 2)}})


_REF_SCRIPT = """
import json, sys
try:
    import pandas as pd
    from ocf_data_sampler.torch_datasets.pvnet_dataset import PVNetDataset
except ImportError as e:
    print(json.dumps({"missing": str(e)})); sys.exit(0)
periods = json.loads(sys.argv[2])
ds = PVNetDataset(sys.argv[1], time_periods=[tuple(p) for p in periods] if periods else None)
if ds.complete_generation:
    pairs = [(int(t.timestamp()), loc.id) for loc in ds.locations for t in ds.valid_t0_times]
else:
    pairs = [(int(pd.Timestamp(t).timestamp()), int(l)) for t, l in ds.valid_t0_and_location_ids.itertuples(index=False)]
# __getitem__'s pair order, read back through the dataset itself for a few indices
print(json.dumps({"complete": bool(ds.complete_generation), "len": len(ds), "pairs": pairs}))
"""


def ocf_space(root: Path, config: str, periods: list[tuple[str, str]] | None = None) -> dict:
    """PVNetDataset's mode, len and pairs (t0 in unix seconds, location_id) in index order."""
    out = run_ocf(_REF_SCRIPT, [config, json.dumps(periods or [])], root, timeout=300)
    assert out["len"] == len(out["pairs"])
    return out


CONFIGS = {
    "per_location": ("gen_gaps.zarr", ""),
    "complete": ("gen_full.zarr", ""),
    "nwp_dropout": ("gen_full.zarr", NWP_DROPOUT),
    # an accumulated channel loses the last step: ocf's default staleness is an hour shorter
    "accum": ("gen_full.zarr", ACCUM),
    # without location 0 in the store: every site pairs with every t0 (with it, the other sites
    # do: locality sampling and the block shuffle serve both when the data exceed the cache)
    "complete_sites": ("gen_sites.zarr", ""),
}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    r = tmp_path_factory.mktemp("ocfspace")
    write_stores(r)
    for name, (gen, drop) in CONFIGS.items():
        (r / f"{name}.yaml").write_text(space_config(gen, drop))
    return r


@pytest.fixture(scope="module")
def refs(root: Path) -> dict[str, dict]:
    return {name: ocf_space(root, f"{name}.yaml") for name in CONFIGS}


SIZE = 8


def epoch_pairs(root: Path, config: str, monkeypatch: pytest.MonkeyPatch, **kw) -> tuple[int, list[tuple[int, int]]]:
    """len(loader) and every (t0, location_id) of one epoch."""
    import gobatch

    monkeypatch.chdir(root)
    pairs = []
    with gobatch.Loader(config, batch_size=SIZE, order="epochs", seed=5, framework="numpy", **kw) as loader:
        n = len(loader)
        for batch in loader:
            pairs += zip(np.asarray(batch["t0"]).tolist(), np.asarray(batch["location_id"]).tolist())
    return n, pairs


@pytest.mark.parametrize("name", list(CONFIGS))
def test_modes_are_the_ones_the_fixtures_mean(refs: dict[str, dict], name: str) -> None:
    """The fixtures exercise what they are meant to: per-location mode with NaN gaps, complete
    mode although location 0 has a NaN, location 0 never a location, NWP dropout breaking the
    periods (fewer t0s than without it)."""
    ref = refs[name]
    assert ref["complete"] == (name != "per_location")
    if name == "complete_sites":
        assert len(ref["pairs"]) == len(refs["complete"]["pairs"])
    assert all(loc != 0 for _, loc in ref["pairs"])
    if name in ("nwp_dropout", "accum"):
        assert 0 < len(ref["pairs"]) < len(refs["complete"]["pairs"])


@pytest.mark.parametrize("name", list(CONFIGS))
def test_one_epoch_visits_ocf_pairs_once(root: Path, refs: dict[str, dict], monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    ref = refs[name]
    want = {tuple(p) for p in ref["pairs"]}
    n, got = epoch_pairs(root, f"{name}.yaml", monkeypatch)
    assert n == ref["len"] // SIZE, (n, ref["len"])
    assert len(got) == n * SIZE and len(set(got)) == len(got), "a pair delivered twice in one epoch"
    assert set(got) <= want, sorted(set(got) - want)[:5]
    assert len(want) - len(got) < SIZE  # only the drop-last remainder is left out


@pytest.mark.parametrize("name", ["per_location", "complete", "complete_sites"])
def test_two_ranks_disjoint_with_ocf_len(root: Path, refs: dict[str, dict], monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """With DistributedSampler(drop_last) and a drop-last DataLoader a rank has
    (len(PVNetDataset) // 2) // batch_size batches; gobatch's two ranks have as many, share no
    pair and together cover ocf's pairs but for fewer than one batch per rank."""
    ref = refs[name]
    want = {tuple(p) for p in ref["pairs"]}
    per_rank = [epoch_pairs(root, f"{name}.yaml", monkeypatch, rank=r, world_size=2) for r in range(2)]
    for n, got in per_rank:
        assert n == (ref["len"] // 2) // SIZE, (n, ref["len"])
        assert len(got) == n * SIZE
    a, b = set(per_rank[0][1]), set(per_rank[1][1])
    assert not a & b, "ranks share pairs"
    assert len(a | b) == len(per_rank[0][1]) + len(per_rank[1][1])
    assert (a | b) <= want and len(want) - len(a | b) < 2 * SIZE


@pytest.mark.parametrize("order", ["epochs", "stream"])
@pytest.mark.parametrize("name", ["complete_sites", "complete"])
def test_data_larger_than_the_cache_keeps_ocf_pairs(root: Path, refs: dict[str, dict], monkeypatch: pytest.MonkeyPatch,
                                                   order: str, name: str) -> None:
    """With a cache smaller than the data, epochs use the block shuffle and the stream locality
    sampling over ocf's pairs, with location 0 in the store too (ocf leaves it out: the pairs
    are the t0s times the other sites): an epoch still visits each pair once, the stream draws
    only pairs."""
    import gobatch

    monkeypatch.chdir(root)
    rep = gobatch.plan(f"{name}.yaml", batch_size=SIZE, order=order, cache_mb=16)
    assert ("block shuffle" if order == "epochs" else "locality") in rep["sampling_why"], rep["sampling_why"]
    want = {tuple(p) for p in refs[name]["pairs"]}
    if order == "epochs":
        n, got = epoch_pairs(root, f"{name}.yaml", monkeypatch, cache_mb=16)
        assert n == len(want) // SIZE and len(got) == n * SIZE and len(set(got)) == len(got)
    else:
        got = []
        with gobatch.Loader(f"{name}.yaml", batch_size=SIZE, seed=2, cache_mb=16, framework="numpy") as loader:
            for k, batch in enumerate(loader):
                got += zip(np.asarray(batch["t0"]).tolist(), np.asarray(batch["location_id"]).tolist())
                if k == 29:
                    break
    assert set(got) <= want, sorted(set(got) - want)[:5]


def test_per_location_pairs_in_time_segments(root: Path, refs: dict[str, dict], monkeypatch: pytest.MonkeyPatch) -> None:
    """Per-location mode (each location its own t0s) with the data twice the cache: the epochs'
    block shuffle walks ocf's pairs in time segments, and the stream draws them from its
    resident segments (locality sampling). Each epoch visits each of ocf's pairs once and
    decodes each of the satellite's chunks about once (25 to 29 of its 28 here; at random, the
    build before decoded 152 for the 152 pairs of an epoch); the stream draws only ocf's pairs;
    the rows of both are ocf-data-sampler's samples."""
    import gobatch
    from test_ocf_concurrent import _copy
    from test_ocf_layout import assert_batches_are_ocf_samples

    monkeypatch.chdir(root)
    why = gobatch.plan("per_location.yaml", batch_size=SIZE, order="epochs", cache_mb=16)["sampling_why"]
    assert "block shuffle" in why, why
    why = gobatch.plan("per_location.yaml", batch_size=SIZE, cache_mb=16)["sampling_why"]
    assert "chose locality" in why, why
    meta = json.loads((root / "sat.zarr" / "data" / ".zarray").read_text())
    sat_chunks = -(-meta["shape"][1] // meta["chunks"][1])
    want = {tuple(p) for p in refs["per_location"]["pairs"]}

    def pairs_of(batch) -> list[tuple[int, int]]:
        return list(zip(np.asarray(batch["t0"]).tolist(), np.asarray(batch["location_id"]).tolist()))

    first: list[dict] = []
    decoded = 0
    with gobatch.Loader("per_location.yaml", batch_size=SIZE, order="epochs", seed=5, cache_mb=16, framework="numpy") as loader:
        sat = [s["name"] for s in gobatch.plan("per_location.yaml", batch_size=SIZE, order="epochs", cache_mb=16)["sources"]].index("satellite")
        for epoch in range(2):
            got = []
            for batch in loader:
                got += pairs_of(batch)
                if len(first) < 2:
                    first.append(_copy(dict(batch)))
            assert len(got) == len(loader) * SIZE == len(set(got)), f"epoch {epoch}: a pair twice"
            assert set(got) <= want and len(want) - len(got) < SIZE, sorted(set(got) ^ want)[:5]
            now = loader.stats()["chunks_decoded"][sat]  # with what the ring filled ahead
            assert now - decoded <= 1.5 * sat_chunks, f"epoch {epoch} decoded {now - decoded} of the satellite's {sat_chunks} chunks"
            decoded = now
    got = []
    with gobatch.Loader("per_location.yaml", batch_size=SIZE, seed=5, cache_mb=16, framework="numpy") as loader:
        for k, batch in enumerate(loader):
            got += pairs_of(batch)
            if k < 2:
                first.append(_copy(dict(batch)))
            if k == 39:
                break
    assert set(got) <= want, sorted(set(got) - want)[:5]
    assert_batches_are_ocf_samples(root, first, "per_location.yaml", nwps=("ukv",), edge=None)


def test_concurrent_epochs_walk_time_segments(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Concurrent batches (every location at one t0, as PVNetConcurrentDataset) with the data
    twice the cache: the epochs walk the t0s in the block shuffle's time segments, so the
    windows of consecutive batches share their chunks. Each of ocf-data-sampler's t0s once an
    epoch, each of the satellite's chunks decoded about once (26 to 28 of its 28; a
    permutation of the t0s, the build before, decoded 43 to 45: these t0s are every 30 minutes,
    their windows half an hour, so nearby windows share one chunk of an hour), the first
    batches equal to its samples."""
    import gobatch
    from test_ocf_concurrent import _CONCURRENT_SCRIPT, _copy, check_same
    from test_ocf_layout import decode

    monkeypatch.chdir(root)
    config = "complete_sites.yaml"
    why = gobatch.plan(config, concurrent=True, order="epochs", cache_mb=16)["sampling_why"]
    assert "block shuffle" in why, why
    meta = json.loads((root / "sat.zarr" / "data" / ".zarray").read_text())
    sat_chunks = -(-meta["shape"][1] // meta["chunks"][1])
    sat = [s["name"] for s in gobatch.plan(config, concurrent=True, cache_mb=16)["sources"]].index("satellite")
    with gobatch.Loader(config, concurrent=True, order="epochs", seed=5, cache_mb=16, framework="numpy") as loader:
        batches = [_copy(dict(batch)) for batch in loader]
        decoded = loader.stats()["chunks_decoded"][sat]  # with what the ring filled ahead
    t0s = [float(b["t0"][0]) for b in batches]
    ref = run_ocf(_CONCURRENT_SCRIPT, [config], root, t0s[:3])
    assert ref["opened"] and not ref["failed"], ref
    assert len(batches) == ref["len"] and sorted(t0s) == sorted(ref["t0s"]), (len(batches), ref["len"])
    assert decoded <= 1.5 * sat_chunks, f"an epoch decoded {decoded} of the satellite's {sat_chunks} chunks"
    for b, sample, t0 in zip(batches[:3], ref["samples"], t0s):
        check_same(b, decode({"dict": sample}), f"t0 {t0}")


def test_plan_says_the_mixing_trade_and_resident_segments_sets_it(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Epochs larger than the cache: the plan says how many t0s a batch of the block shuffle
    mixes against a uniform shuffle, and names the setting that trades decoding again for more;
    resident_segments= sets the group."""
    import gobatch

    monkeypatch.chdir(root)
    rep = gobatch.plan("complete.yaml", batch_size=SIZE, order="epochs", cache_mb=16)
    why = rep["sampling_why"]
    assert "a batch mixes about" in why and "where a uniform shuffle of the epoch mixes" in why, why
    assert "resident_segments (resident_segments=, --resident-segments" in why, why
    more = gobatch.plan("complete.yaml", batch_size=SIZE, order="epochs", cache_mb=16, resident_segments=7)
    assert "7 per group" in more["sampling_why"], more["sampling_why"]


def test_stream_draws_only_valid_pairs(root: Path, refs: dict[str, dict], monkeypatch: pytest.MonkeyPatch) -> None:
    import gobatch

    want = {tuple(p) for p in refs["per_location"]["pairs"]}
    monkeypatch.chdir(root)
    got = []
    with gobatch.Loader("per_location.yaml", batch_size=SIZE, seed=9, framework="numpy") as loader:
        for k, batch in enumerate(loader):
            got += zip(np.asarray(batch["t0"]).tolist(), np.asarray(batch["location_id"]).tolist())
            if k == 39:
                break
    assert set(got) <= want, sorted(set(got) - want)[:5]
    locs = {loc for _, loc in got}
    assert locs == {loc for _, loc in want}, locs  # 320 draws reach every location


def test_t0_range_restricts_like_time_periods(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    start, end = "2024-03-01T04:00", "2024-03-01T15:30"
    ref = ocf_space(root, "per_location.yaml", [(start, end)])
    want = {tuple(p) for p in ref["pairs"]}
    n, got = epoch_pairs(root, "per_location.yaml", monkeypatch, t0_start=start, t0_end=end)
    assert n == ref["len"] // SIZE
    assert len(set(got)) == len(got) and set(got) <= want and len(want) - len(got) < SIZE


def test_time_periods_as_ocf(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two training periods (PVNet's example trains on two date ranges): the plan counts
    exactly ocf-data-sampler's pairs with the same time_periods, and an epoch visits only
    them. (ocf-data-sampler 1.0.24 fails on an open end, None, in per-location mode: its
    get_time_periods_mask indexes a Series with -1; gobatch takes one.)"""
    import gobatch

    periods = [("2024-03-01T02:00", "2024-03-01T06:30"), ("2024-03-01T12:00", "2024-03-02T00:00")]
    ref = ocf_space(root, "per_location.yaml", periods)
    want = {tuple(p) for p in ref["pairs"]}
    whole = ocf_space(root, "per_location.yaml")
    assert 0 < len(want) < whole["len"]
    monkeypatch.chdir(root)
    assert gobatch.plan("per_location.yaml", batch_size=SIZE, time_periods=periods)["sample_space"]["pairs"] == ref["len"]
    with pytest.raises(ValueError, match=r"is not a \(start, end\) pair"):
        gobatch.plan("per_location.yaml", batch_size=SIZE, time_periods=[("2024-03-01",)])
    n, got = epoch_pairs(root, "per_location.yaml", monkeypatch, time_periods=periods)
    assert n == ref["len"] // SIZE
    assert len(set(got)) == len(got) and set(got) <= want and len(want) - len(got) < SIZE


@pytest.mark.parametrize("name", ["per_location", "complete", "complete_sites"])
def test_plan_reports_the_sample_space(root: Path, refs: dict[str, dict], monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    import gobatch

    monkeypatch.chdir(root)
    rep = gobatch.plan(f"{name}.yaml", batch_size=SIZE)
    space = rep["sample_space"]
    assert space["rules"] == "ocf" and space["pairs"] == refs[name]["len"]
    assert space["mode"] == ("complete" if refs[name]["complete"] else "per-location")
    assert space["periods"] >= 2  # the satellite gap and the missing run cut the time axis
    assert space["locations"] == len({loc for _, loc in refs[name]["pairs"]}) == 4  # not location 0


def batch_pairs(batch) -> list[tuple[int, int]]:
    return list(zip(np.asarray(batch["t0"]).tolist(), np.asarray(batch["location_id"]).tolist()))


def test_epochs_differ_and_resume_exactly(root: Path, refs: dict[str, dict], monkeypatch: pytest.MonkeyPatch) -> None:
    """Per-location pairs (drawn one by one): each epoch is a fresh order of the same pairs,
    and load_state_dict mid-epoch continues with exactly the rest of the uninterrupted epoch."""
    import gobatch

    monkeypatch.chdir(root)
    want = {tuple(p) for p in refs["per_location"]["pairs"]}
    kw = dict(batch_size=SIZE, order="epochs", seed=11, framework="numpy")
    with gobatch.Loader("per_location.yaml", **kw) as loader:
        whole = [[batch_pairs(b) for b in loader] for _ in range(2)]
    assert whole[0] != whole[1]
    for e in whole:
        flat = [p for b in e for p in b]
        assert len(set(flat)) == len(flat) and set(flat) <= want and len(want) - len(flat) < SIZE
    with gobatch.Loader("per_location.yaml", **kw) as loader:
        it = iter(loader)
        for _ in range(5):
            next(it)
        state = loader.state_dict()
    with gobatch.Loader("per_location.yaml", **kw) as loader:
        loader.load_state_dict(state)
        rest = [batch_pairs(b) for b in loader]
    assert rest == whole[0][5:]


def test_no_pair_is_refused_naming_the_periods(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A t0 range inside the satellite's gap leaves no pair: refused, naming each source's
    periods and the range."""
    import gobatch
    from gobatch.errors import ConfigError

    monkeypatch.chdir(root)
    with pytest.raises(ConfigError, match=r"no valid \(t0, location\) pair") as e:
        gobatch.plan("complete.yaml", batch_size=SIZE, t0_start="2024-03-01T10:10", t0_end="2024-03-01T10:50")
    msg = str(e.value)
    assert "satellite" in msg and "ukv" in msg and "generation" in msg and "t0_start .. t0_end" in msg, msg
