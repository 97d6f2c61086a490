"""gobatch's NWP windows and dropout from an ocf-data-sampler YAML equal ocf-data-sampler
1.0.24's (issue 18): per target time the latest init time at or before it (a window may mix
runs), target times ceil'd to the NWP resolution (half-hour t0s shift an hourly window),
accumulated channels differenced before their normalisation, NWP dropout that moves
t0_available, the init time, step and target time of every step, and satellite/generation
dropout that blanks only (t0 + timedelta, t0], with its probabilities.

The reference is ocf-data-sampler itself: ``PVNetDataset(yaml).get_sample(t0, location_id)``
for every row gobatch delivers, in a child process (test_ocf_values.py says why). The NWP stores
are constant in space and depend on init time, step and channel, so a wrong run, step or
difference shows, whatever crop either places; the satellite depends on channel and time only.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import numpy as np
import pyproj
import pytest
import xarray as xr
import yaml

import ocf_configs as cfg
from geostationary import GEOS, grid_area
from ocf_reference import run_ocf

pytestmark = pytest.mark.timeout(600)

DAY = np.datetime64("2024-03-10T00:00")
HOUR = np.timedelta64(1, "h")
# t0s well inside every store, so that each is one of ocf's valid t0s
T0_START, T0_END = "2024-03-10T06:00", "2024-03-11T12:00"
SITES = {"lon": np.array([-1.9, -1.2, -1.6]), "lat": np.array([52.4, 52.9, 52.6])}


def ukv_value(channel: int, init: np.ndarray, step_h: np.ndarray) -> np.ndarray:
    """A UKV value that tells channel, run and step apart (exact in float32); the accumulated
    channel tp (2) grows along the steps as an accumulation does."""
    return channel * 1000.0 + init * 37.0 + step_h * 3.0 + step_h * step_h * 0.5


def ecmwf_value(channel: int, init: np.ndarray, step_h: np.ndarray) -> np.ndarray:
    return channel * 500.0 + init * 11.0 + step_h * 2.0 + step_h * step_h * 0.25


def write_nwp(path: Path, dims: tuple[str, ...], inits: np.ndarray, steps_h: int, channels: list[str],
              value, xs: np.ndarray, ys: np.ndarray, nan_at: tuple | None = None) -> None:
    """An NWP store (init, step, channel, then the two spatial dims as named), constant in space."""
    i = np.arange(len(inits), dtype=np.float64)[:, None, None]
    s = np.arange(steps_h + 1, dtype=np.float64)[None, :, None]
    per = np.concatenate([value(c, i, s) for c in range(len(channels))], axis=2).astype(np.float32)
    if nan_at is not None:
        per[nan_at] = np.nan
    data = np.broadcast_to(per[:, :, :, None, None], per.shape + (len(xs), len(ys)))
    init_dim, step_dim, chan_dim, xdim, ydim = dims
    xr.Dataset({"data": ((init_dim, step_dim, chan_dim, xdim, ydim), data.copy())},
               coords={init_dim: inits, step_dim: np.arange(steps_h + 1) * HOUR, chan_dim: channels, xdim: xs, ydim: ys},
               ).to_zarr(path, zarr_format=2, consolidated=True)


def write_stores(root: Path) -> None:
    """A satellite (values by channel and time), generation at three sites, a UKV in OSGB with
    3-hourly runs of 10 hourly steps and an accumulated channel (NaN at step 4), and an ECMWF on
    longitude/latitude with 6-hourly runs of 12 steps."""
    gx, gy = pyproj.Transformer.from_crs("EPSG:4326", GEOS, always_xy=True).transform(-1.5, 52.6)
    x = gx + 3000.0 * (20 - np.arange(40))  # descending
    y = gy + 3000.0 * (np.arange(40) - 20)
    times = DAY + np.arange(2 * 24 * 12 + 1) * np.timedelta64(5, "m")
    per_time = np.stack([np.arange(len(times)) * 0.5, 100.0 + np.arange(len(times)) * 0.25]).astype(np.float32)
    data = np.broadcast_to(per_time[:, :, None, None], (2, len(times), len(y), len(x)))
    xr.Dataset({"data": (("variable", "time", "y_geostationary", "x_geostationary"), data.copy(), {"area": grid_area(x, y)})},
               coords={"variable": ["IR_016", "VIS006"], "time": times, "y_geostationary": y, "x_geostationary": x},
               ).to_zarr(root / "sat.zarr", zarr_format=2, consolidated=True)

    for res in (30, 60):  # ocf returns every stored time in a window: one store per resolution
        gtimes = DAY + np.arange(2 * 24 * 60 // res + 1) * np.timedelta64(res, "m")
        k = np.arange(len(gtimes), dtype=np.float32)[:, None]
        gen = xr.Dataset(
            {"generation_mw": (("time_utc", "location_id"), (1.0 + (k % 7) * 0.5 + np.arange(3) * 0.125).astype(np.float32)),
             "capacity_mwp": (("time_utc", "location_id"), np.full((len(gtimes), 3), 10.0, np.float32))},
            coords={"time_utc": gtimes, "location_id": np.array([1, 2, 3]),
                    "longitude": ("location_id", SITES["lon"]), "latitude": ("location_id", SITES["lat"])})
        gen.to_zarr(root / f"gen{res}.zarr", zarr_format=2, consolidated=True)

    ukv_inits = DAY + np.arange(16) * 3 * HOUR
    write_nwp(root / "ukv.zarr", ("init_time_utc", "step", "channel", "x_osgb", "y_osgb"), ukv_inits, 10,
              ["t", "dswrf", "tp"], ukv_value, np.arange(380000.0, 500000.0, 4000.0), np.arange(360000.0, 240000.0, -4000.0),
              nan_at=(slice(None), 4, 2))  # tp at step 4 of every run: the differences around it are NaN
    ec_inits = DAY + np.arange(8) * 6 * HOUR
    write_nwp(root / "ecmwf.zarr", ("init_time", "step", "variable", "longitude", "latitude"), ec_inits, 12,
              ["t2m", "ssrd"], ecmwf_value, np.round(np.arange(-4.0, 1.05, 0.1), 2), np.round(np.arange(55.0, 49.95, -0.1), 2))


def config(gen_res: int = 60, ukv: Optional[dict] = None, sat: Optional[dict] = None, gen: Optional[dict] = None) -> str:
    """An ocf-data-sampler configuration with both NWPs (each with an accumulated channel); ukv,
    sat and gen are extra keys of those sections (dropout, max_staleness_minutes)."""
    return cfg.config(
        "nwp", "NWP windows and dropout",
        generation=cfg.generation(zarr_path=f"gen{gen_res}.zarr", res=gen_res, dropout_value=-1.0, **(gen or {})),
        nwp={"ukv": cfg.nwp("ukv", ["t", "dswrf", "tp"],
                            cfg.norm(t=(1000.0, 10.0), dswrf=(2000.0, 50.0, None, 2300.0), diff_tp=(4.0, 2.0)),
                            height=4, width=6, end=180, dropout_value=-9.0, accum_channels=["tp"], **(ukv or {})),
             "ecmwf": cfg.nwp("ecmwf", ["t2m", "ssrd"], cfg.norm(t2m=(0.0, 1.0), diff_ssrd=(1.0, 3.0)),
                              height=4, width=4, start=-120, end=240, accum_channels=["ssrd"])},
        satellite=cfg.satellite(["IR_016", "VIS006"], cfg.norm(IR_016=(0.0, 1.0), VIS006=(0.0, 1.0)),
                                height=8, width=10, dropout_value=-5.0, **(sat or {})))


def dropout(timedeltas: list, fraction: object) -> dict:
    return {"dropout_timedeltas_minutes": timedeltas, "dropout_fraction": fraction}


_REF_SCRIPT = """
import json, sys
import numpy as np
try:
    import pandas as pd
    from ocf_data_sampler.torch_datasets.pvnet_dataset import PVNetDataset
except ImportError as e:
    print(json.dumps({"missing": str(e)})); sys.exit(0)
ds = PVNetDataset(sys.argv[1])
req = json.loads(sys.stdin.read())
np.random.seed(req["seed"])
out = []
for t0, loc in req["pairs"]:
    s = ds.get_sample(pd.Timestamp(t0, unit="s"), loc)
    row = {"t0": s["t0"], "location_id": s["location_id"], "generation": s["generation"].tolist(),
           "satellite": s["satellite_actual"][:, :, 0, 0].tolist()}
    for key, nwp in s["nwp"].items():
        n = nwp["nwp"].shape[0]
        assert np.all(nwp["nwp"] == nwp["nwp"][:, :, :1, :1]), "the NWP store is constant in space"
        row[key] = {"nwp": nwp["nwp"][:, :, 0, 0].tolist(),
                    "init": np.broadcast_to(nwp["nwp_init_time_utc"], (n,)).tolist(),
                    "init_scalar": np.ndim(nwp["nwp_init_time_utc"]) == 0,
                    "step": nwp["nwp_step"].tolist(), "target": nwp["nwp_target_time_utc"].tolist()}
    out.append(row)
print(json.dumps({"samples": out}))
"""


def ocf_samples(root: Path, yaml: str, pairs: list[tuple[int, int]], seed: int = 0) -> list[dict]:
    return run_ocf(_REF_SCRIPT, [yaml], root, {"pairs": pairs, "seed": seed}, timeout=500)["samples"]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    r = tmp_path_factory.mktemp("ocfnwp")
    write_stores(r)
    return r


NWP_FIELDS = ("nwp", "nwp_init_time_utc", "nwp_step", "nwp_target_time_utc")


def nwp_field(batch, key: str, field: str) -> np.ndarray:
    """An NWP tensor of the batch, nested as ocf's (nwp -> key -> nwp_init_time_utc)."""
    return np.asarray(batch["nwp"][key][field])


def gobatch_rows(root: Path, monkeypatch: pytest.MonkeyPatch, yaml: str, batches: int,
                 batch_size: int = 4, seed: int = 3) -> list[dict]:
    """Every row of the first batches of gobatch.Loader on the YAML."""
    import gobatch

    monkeypatch.chdir(root)
    rows = []
    with gobatch.Loader(yaml, batch_size=batch_size, seed=seed, framework="numpy",
                        t0_start=T0_START, t0_end=T0_END) as loader:
        for k, batch in enumerate(loader):
            for e in range(batch_size):
                row = {"t0": int(np.asarray(batch["t0"])[e]), "location_id": int(np.asarray(batch["location_id"])[e]),
                       "generation": np.array(batch["generation"][e]), "satellite": np.array(batch["satellite_actual"][e])}
                for key in ("ukv", "ecmwf"):
                    row[key] = {f: np.array(nwp_field(batch, key, f)[e]) for f in NWP_FIELDS}
                rows.append(row)
            if k + 1 == batches:
                break
    return rows


def compare_nwp(rows: list[dict], ref: list[dict]) -> dict[str, int]:
    """Every NWP value and time of every row equals ocf's; returns how many rows mixed runs."""
    mixed = {"ukv": 0, "ecmwf": 0}
    for row, want in zip(rows, ref):
        pair = (row["t0"], row["location_id"])
        assert want["t0"] == pair[0] and want["location_id"] == pair[1]
        for key in ("ukv", "ecmwf"):
            got, exp = row[key], want[key]
            data = got["nwp"]  # (T, C, spatial, spatial), constant in space
            assert data.dtype == np.float32
            assert np.all(data == data[:, :, :1, :1]), (key, pair)
            np.testing.assert_array_equal(data[:, :, 0, 0], np.asarray(exp["nwp"]).astype(np.float32),
                                          err_msg=f"{key} values at {pair}")
            assert got["nwp_init_time_utc"].dtype == np.float64 and got["nwp_target_time_utc"].dtype == np.float64
            assert got["nwp_step"].dtype == np.int64
            np.testing.assert_array_equal(got["nwp_init_time_utc"], exp["init"], err_msg=f"{key} init at {pair}")
            np.testing.assert_array_equal(got["nwp_step"], exp["step"], err_msg=f"{key} step at {pair}")
            np.testing.assert_array_equal(got["nwp_target_time_utc"], exp["target"], err_msg=f"{key} target at {pair}")
            mixed[key] += not exp["init_scalar"]
    return mixed


def test_nwp_windows_mix_runs_as_ocf(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hourly t0s, no dropout: a t0 on a UKV init hour takes its first target time (an hour
    before) from the run before; every other t0 one run."""
    (root / "plain.yaml").write_text(config())
    rows = gobatch_rows(root, monkeypatch, "plain.yaml", batches=10)
    ref = ocf_samples(root, "plain.yaml", [(r["t0"], r["location_id"]) for r in rows])
    mixed = compare_nwp(rows, ref)
    assert mixed["ukv"] > 0 and mixed["ukv"] < len(rows), mixed
    assert mixed["ecmwf"] > 0, mixed
    # the NaN of tp (step 4) reaches some rows as the dropout_value after the difference
    assert any(np.any(r["ukv"]["nwp"][:, 2] == -9.0) for r in rows), "no NaN fill of a difference in the rows"


def test_nwp_dropout_and_history_dropout_as_ocf(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """NWP dropout of -180 min at fraction 1.0 (t0_available = t0 - 3 h: one run per window),
    satellite dropout -10 and generation dropout -60 at fraction 1.0: only (t0 + td, t0] is
    blanked (the generation's future is kept), deterministic, value for value."""
    text = config(ukv=dropout([-180], 1.0), sat=dropout([-10], 1.0), gen=dropout([-60], 1.0))
    (root / "dropout.yaml").write_text(text)
    rows = gobatch_rows(root, monkeypatch, "dropout.yaml", batches=8)
    ref = ocf_samples(root, "dropout.yaml", [(r["t0"], r["location_id"]) for r in rows])
    mixed = compare_nwp(rows, ref)
    assert mixed["ukv"] == 0, mixed  # one run per window
    for row, want in zip(rows, ref):
        pair = (row["t0"], row["location_id"])
        gen = row["generation"]
        np.testing.assert_array_equal(gen, np.asarray(want["generation"], np.float32), err_msg=f"generation at {pair}")
        # -60 .. 120 at 60 min: t0 (index 1) blanked, the future kept
        assert gen[1] == -1.0 and np.all(gen[2:] != -1.0) and gen[0] != -1.0, gen
        sat = row["satellite"]
        exp = np.asarray(want["satellite"], np.float32)  # (T, C)
        np.testing.assert_array_equal(sat, np.broadcast_to(exp[:, :, None, None], sat.shape), err_msg=f"satellite at {pair}")
        assert np.all(exp[-2:] == -5.0) and not np.any(exp[:-2] == -5.0), exp


def test_half_hour_t0_shifts_the_nwp_window_as_ocf(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Generation every 30 min, hourly NWP: a t0 at hh:30 has its target times ceil'd, from
    hh:00 (-60 min, ceil'd) on, as ocf's."""
    (root / "half.yaml").write_text(config(gen_res=30))
    rows = gobatch_rows(root, monkeypatch, "half.yaml", batches=10)
    half = [r for r in rows if r["t0"] % 3600 == 1800]
    assert half and len(half) < len(rows), [r["t0"] for r in rows]
    ref = ocf_samples(root, "half.yaml", [(r["t0"], r["location_id"]) for r in rows])
    compare_nwp(rows, ref)
    for r in half:
        assert r["ukv"]["nwp_target_time_utc"][0] == (r["t0"] - 1800) * 1e9  # ceil(t0 - 60 min)


def dropout_counts(gen: np.ndarray, fill: float) -> dict[str, int]:
    """How many rows of generation (-60 .. 120 at 30 min: t0 is index 2) have each dropout:
    -30 blanks t0 only, -60 blanks -30 and t0."""
    t0 = gen[:, 2] == fill
    before = gen[:, 1] == fill
    assert not np.any(gen[:, 3:] == fill) and not np.any(gen[:, 0] == fill), "a value outside (t0 + td, t0] was blanked"
    return {"-30": int(np.sum(t0 & ~before)), "-60": int(np.sum(t0 & before)), "none": int(np.sum(~t0 & ~before))}


@pytest.mark.parametrize("fraction,probs", [("[0.2, 0.3]", {"-30": 0.2, "-60": 0.3, "none": 0.5}),
                                            ("0.5", {"-30": 0.25, "-60": 0.25, "none": 0.5})])
def test_history_dropout_distribution(root: Path, monkeypatch: pytest.MonkeyPatch, fraction: str,
                                      probs: dict[str, float]) -> None:
    """A list gives each timedelta its probability, one number splits evenly: the frequencies
    of gobatch's draws over many examples, and of ocf-data-sampler's own over many samples,
    lie within 5 standard deviations of the binomial's mean."""
    text = config(gen_res=30, gen=dropout([-30, -60], yaml.safe_load(fraction)))
    name = f"dist{len(fraction)}.yaml"
    (root / name).write_text(text)
    rows = gobatch_rows(root, monkeypatch, name, batches=40, batch_size=50, seed=11)
    gen = np.stack([r["generation"] for r in rows])
    n = len(gen)
    got = dropout_counts(gen, -1.0)
    ref = ocf_samples(root, name, [(rows[0]["t0"], rows[0]["location_id"])] * 400, seed=5)
    ocf = dropout_counts(np.asarray([s["generation"] for s in ref], np.float32), -1.0)
    for counts, total, who in ((got, n, "gobatch"), (ocf, 400, "ocf-data-sampler")):
        for k, p in probs.items():
            mean, sd = total * p, np.sqrt(total * p * (1 - p))
            assert abs(counts[k] - mean) <= 5 * sd, (who, k, counts, total, p)


_STALE_SCRIPT = """
import sys
try:
    from ocf_data_sampler.torch_datasets.pvnet_dataset import PVNetDataset
except ImportError as e:
    print("missing", e); sys.exit(0)
try:
    PVNetDataset(sys.argv[1])
    print("accepted")
except ValueError as e:
    print("refused", e)
"""


@pytest.mark.parametrize("minutes,refused", [(360, False), (361, True)])
def test_max_staleness_above_the_steps_is_refused_as_ocf(root: Path, monkeypatch: pytest.MonkeyPatch,
                                                         minutes: int, refused: bool) -> None:
    """The UKV's steps allow 10 h - interval_end 3 h - 1 h (accumulated channel) = 360 min of
    staleness; more is refused by ocf-data-sampler's dataset and by gobatch, naming the key."""
    import gobatch

    name = f"stale{minutes}.yaml"
    (root / name).write_text(config(ukv={"max_staleness_minutes": minutes}))
    python = os.environ.get("GOBATCH_OCF_PYTHON", sys.executable)
    r = subprocess.run([python, "-c", _STALE_SCRIPT, name], cwd=root, capture_output=True, text=True, timeout=300)
    if r.stdout.startswith("missing"):
        pytest.skip(r.stdout)
    assert r.stdout.startswith("refused" if refused else "accepted"), r.stdout + r.stderr[-2000:]
    monkeypatch.chdir(root)
    if not refused:
        gobatch.plan(name, batch_size=4)
        return
    with pytest.raises(gobatch.ConfigError, match=rf"{name}:\d+: input_data.nwp.ukv.max_staleness_minutes: 361 is more than the steps allow: at most 360"):
        gobatch.plan(name, batch_size=4)
