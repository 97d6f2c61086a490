"""Time coordinates as real archives store them, through the real ``gobatch.Loader``.

Fixtures are written at test time with xarray (and zarr-python where xarray would re-encode):
a satellite store whose time axis has gaps, NWP runs with one run missing, PV readings with a
gap of their own; times as CF "minutes since" integers, CF "seconds since 1970" floats and
native datetime64[ns] and [s],
NWP steps as float hours (the UKV layout), as native timedelta64 and as xarray's encoded
timedelta. Every sampled tensor is compared with an xarray selection written here (``.sel`` by
the timestamps the example's t0 implies, the nearest NWP coordinate, ``isel`` crops), and the t0
values drawn are checked to be exactly the candidates the rules below allow, computed here:

- satellite and PV: every step t0 - 30 min .. t0 + 60 min (5-minute resolution) present;
- NWP: the newest run with init_time <= t0 - 60 min and t0 - init_time <= 300 min whose leads
  floor((t0 - 60 min - init) / 60 min) h and the next three are all steps, else an older one
  within the same limit;
- and, when given, t0_start <= t0 <= t0_end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr
import zarr

import gobatch

pytestmark = pytest.mark.timeout(120)

MIN = np.timedelta64(60, "s")
EPOCH = np.datetime64("2021-01-01T00:00:00", "s")
SAT_CHANNELS = ["IR", "VIS", "WV"]
NWP_VARS = ["t", "u", "v"]
PICK_SAT = ["WV", "IR"]  # a selection in another order than the store's
PICK_NWP = ["u", "t"]
H = W = 24  # satellite pixels
Q = 8  # NWP points per axis
CROP, NWP_CROP, K = 8, 4, 4
OFFSETS = np.arange(-30, 61, 5) * MIN  # the satellite and PV window
NWP_DELAY, NWP_MAX_STALE, HOUR = 60 * MIN, 300 * MIN, 60 * MIN
SAT_GAPS = [40, 41, 42, 77, 120]  # indices of a regular 5-minute axis that the store lacks
PV_GAPS = [100]
RUNS_H = [0, 3, 9, 12]  # the 06:00 run is missing
STEPS_H = np.arange(16)


def _regular(n: int) -> np.ndarray:
    return EPOCH + np.arange(n) * 5 * MIN


def sat_times() -> np.ndarray:
    return np.delete(_regular(170), SAT_GAPS)


def pv_times() -> np.ndarray:
    return np.delete(_regular(170), PV_GAPS)


def _rewrite_native(store: Path, name: str, values: np.ndarray) -> None:
    """Replace coordinate ``name`` of an xarray-written v2 store by a native datetime64 or
    timedelta64 array (xarray itself would encode it as CF integers)."""
    g = zarr.open_group(store, mode="r+", zarr_format=2)
    dims = g[name].attrs["_ARRAY_DIMENSIONS"]
    del g[name]
    a = g.create_array(name, shape=values.shape, dtype=values.dtype, chunks=values.shape)
    a[:] = values
    a.attrs["_ARRAY_DIMENSIONS"] = dims
    zarr.consolidate_metadata(store, zarr_format=2)


def write_stores(root: Path, time_enc: str, step_enc: str) -> None:
    rng = np.random.default_rng(5)
    st = sat_times()
    sat = rng.integers(0, 1000, size=(len(st), len(SAT_CHANNELS), H, W)).astype(np.float32) / 8
    sat[rng.random(sat.shape) < 0.01] = np.nan
    sat_ds = xr.Dataset(
        {"data": (("time", "channel", "y", "x"), sat)},
        coords={"time": st.astype("M8[ns]"), "channel": SAT_CHANNELS,
                "y": 900000.0 - 2000.0 * np.arange(H), "x": 200000.0 + 2000.0 * np.arange(W)})
    pt = pv_times()
    pv = rng.random((len(pt), 12)).astype(np.float32)
    pv[rng.random(pv.shape) < 0.05] = np.nan
    pv_ds = xr.Dataset(
        {"power": (("time", "system"), pv)},
        coords={"time": pt.astype("M8[ns]"), "system": np.arange(12, dtype=np.int64) * 7 + 3,
                "x": ("system", 200000.0 + rng.random(12) * 2000 * (W - 1)),
                "y": ("system", 900000.0 - rng.random(12) * 2000 * (H - 1))})
    pv_ds["power"].attrs["coordinates"] = "x y"
    inits = EPOCH + np.array(RUNS_H) * HOUR
    nwp = rng.random((len(inits), len(STEPS_H), len(NWP_VARS), Q, Q)).astype(np.float32)
    steps: Any = (STEPS_H * HOUR).astype("m8[ns]")
    nwp_ds = xr.Dataset(
        {"UKV": (("init_time", "step", "variable", "y", "x"), nwp)},
        coords={"init_time": inits.astype("M8[ns]"), "step": steps, "variable": NWP_VARS,
                "y": 900000.0 - 8000.0 * np.arange(Q), "x": 200000.0 + 8000.0 * np.arange(Q)})
    if step_enc == "float_hours":  # UKV: step float64 with units "hours"
        nwp_ds = nwp_ds.assign_coords(step=("step", STEPS_H.astype(np.float64), {"units": "hours"}))
    tenc = {"units": "minutes since 2021-01-01", "dtype": "int64"}
    enc: dict[str, dict[str, Any]] = {}
    if time_enc == "cf_minutes":
        enc = {"time": tenc}
    elif time_enc == "cf_seconds_float":
        enc = {"time": {"units": "seconds since 1970-01-01 00:00:00", "dtype": "float64"}}
    sat_ds.to_zarr(root / "sat.zarr", zarr_format=2, consolidated=True, encoding=enc)
    pv_ds.to_zarr(root / "pv.zarr", zarr_format=2, consolidated=True, encoding={"time": tenc})
    nwp_ds.to_zarr(root / "nwp.zarr", zarr_format=2, consolidated=True,
                   encoding={"init_time": {"units": "hours since 2021-01-01", "dtype": "int64"}})
    if time_enc in ("M8[ns]", "M8[s]"):
        _rewrite_native(root / "sat.zarr", "time", st.astype(time_enc))
        _rewrite_native(root / "nwp.zarr", "init_time", inits.astype(time_enc))
    if step_enc == "native":
        _rewrite_native(root / "nwp.zarr", "step", (STEPS_H * HOUR).astype("m8[ns]"))


def config(**batch: Any) -> dict[str, Any]:
    window = {"time_resolution_minutes": 5, "interval_start_minutes": -30, "interval_end_minutes": 60}
    return {
        "batch": {"size": 16, "seed": 3, **batch},
        "ring": {"slots": 3},
        "source": [
            {"name": "satellite", "kind": "zarr", "store": "sat.zarr", "variable": "data", "anchor": True,
             "image_size_pixels_height": CROP, "image_size_pixels_width": CROP, "channels": PICK_SAT,
             "cache_mb": 64, **window},
            {"name": "nwp", "kind": "zarr", "store": "nwp.zarr", "variable": "UKV", "role": "nwp",
             "min_staleness_minutes": 60, "max_staleness_minutes": 300, "time_resolution_minutes": 60,
             "interval_start_minutes": -60, "interval_end_minutes": 120,
             "image_size_pixels_height": NWP_CROP, "image_size_pixels_width": NWP_CROP, "channels": PICK_NWP},
            {"name": "pv", "kind": "zarr", "store": "pv.zarr", "variable": "power", "role": "points",
             "nearest_k": K, **window},
        ],
    }


class Reference:
    """What the examples must hold, from the stores as xarray reads them."""

    def __init__(self, root: Path) -> None:
        self.sat = xr.open_zarr(root / "sat.zarr", chunks=None).load()
        self.pv = xr.open_zarr(root / "pv.zarr", chunks=None).load()
        self.nwp = xr.open_zarr(root / "nwp.zarr", chunks=None, decode_timedelta=False).load()
        self.sat_time = self.sat["time"].values.astype("M8[s]")
        self.pv_time = set(self.pv["time"].values.astype("M8[s]").tolist())
        self.inits = self.nwp["init_time"].values.astype("M8[s]")
        step = self.nwp["step"]
        if np.issubdtype(step.dtype, np.timedelta64):
            self.leads = step.values.astype("m8[s]")
        else:  # numbers with a CF unit
            unit = {"hours": 3600, "minutes": 60, "seconds": 1}[step.attrs["units"]]
            self.leads = (step.values * unit).astype(np.int64).astype("m8[s]")

    def nwp_choice(self, t0: np.datetime64) -> tuple[int, list[int]] | None:
        """(run index, step indices) by the rule in the module docstring, or None."""
        for run in np.argsort(self.inits)[::-1]:
            init = self.inits[run]
            if init > t0 - NWP_DELAY or t0 - init > NWP_MAX_STALE:
                continue
            lead = (t0 - NWP_DELAY - init) // HOUR * HOUR
            want = [lead + k * HOUR for k in range(4)]
            idx = [np.nonzero(self.leads == w)[0] for w in want]
            if all(len(i) == 1 for i in idx):
                return int(run), [int(i[0]) for i in idx]
        return None

    def allowed(self, lo: np.datetime64 | None = None, hi: np.datetime64 | None = None) -> list[int]:
        """Unix seconds of every valid t0, ascending."""
        sat = set(self.sat_time.tolist())
        out = []
        for t0 in self.sat_time:
            if (lo is not None and t0 < lo) or (hi is not None and t0 > hi):
                continue
            win = (t0 + OFFSETS).tolist()
            if all(t in sat for t in win) and all(t in self.pv_time for t in win) and self.nwp_choice(t0):
                out.append(int(t0.astype(np.int64)))
        return out

    def check(self, b: dict[str, np.ndarray], i: int) -> None:
        t0 = np.datetime64(int(b["t0"][i]), "s")
        x, y = float(b["x"][i]), float(b["y"][i])
        where = f"example {i} (t0 {t0}, x {x}, y {y})"
        times = (t0 + OFFSETS).astype("M8[ns]")
        cy = int(np.nonzero(self.sat["y"].values == y)[0][0])
        cx = int(np.nonzero(self.sat["x"].values == x)[0][0])
        sat = self.sat["data"].sel(time=times, channel=PICK_SAT).isel(
            y=slice(cy - CROP // 2, cy + CROP // 2), x=slice(cx - CROP // 2, cx + CROP // 2)).values
        assert np.array_equal(b["satellite"][i], sat, equal_nan=True), f"satellite, {where}"

        choice = self.nwp_choice(t0)
        assert choice is not None, f"no NWP run for {where}"
        run, steps = choice

        def start(coord: np.ndarray, c: float) -> int:
            d = np.abs(coord - c)
            return int(np.clip(np.nonzero(d == d.min())[0][0] - NWP_CROP // 2, 0, len(coord) - NWP_CROP))

        ys, xs = start(self.nwp["y"].values, y), start(self.nwp["x"].values, x)
        nwp = self.nwp["UKV"].isel(init_time=run, step=steps, y=slice(ys, ys + NWP_CROP),
                                   x=slice(xs, xs + NWP_CROP)).sel(variable=PICK_NWP).values
        assert np.array_equal(b["nwp"][i], nwp), f"nwp, {where}"

        d = np.hypot(self.pv["x"].values - x, self.pv["y"].values - y)
        ids = np.sort(self.pv["system"].values[np.argsort(d, kind="stable")[:K]])
        assert np.array_equal(b["pv_system"][i], ids), f"pv_system, {where}"
        pv = self.pv["power"].sel(time=times, system=ids).values
        assert np.array_equal(b["pv"][i], pv, equal_nan=True), f"pv, {where}"


def take(cfg: dict[str, Any], root: Path, n: int) -> list[dict[str, np.ndarray]]:
    out = []
    with gobatch.Loader(cfg, framework="numpy", data_root=root) as loader:
        for batch in loader:
            out.append({k: np.array(v) for k, v in batch.items()})
            if len(out) == n:
                break
    return out


STEP_DTYPES = {"float_hours": "f", "native": "m", "cf_timedelta": "i"}


@pytest.mark.parametrize("time_enc, step_enc", [
    ("cf_minutes", "float_hours"),
    ("M8[ns]", "native"),
    ("M8[s]", "cf_timedelta"),
    ("cf_seconds_float", "float_hours"),
])
def test_gappy_times_every_encoding(tmp_path: Path, time_enc: str, step_enc: str) -> None:
    write_stores(tmp_path, time_enc, step_enc)
    # The stores hold what the case says (xarray could have re-encoded).
    stored = zarr.open_array(tmp_path / "sat.zarr" / "time")
    want_dtype = {"cf_minutes": np.int64, "cf_seconds_float": np.float64}.get(time_enc, time_enc)
    assert stored.dtype == np.dtype(want_dtype), stored.dtype
    step = zarr.open_array(tmp_path / "nwp.zarr" / "step")
    assert step.dtype.kind == STEP_DTYPES[step_enc], step.dtype
    assert step_enc == "native" or step.attrs["units"] == "hours", dict(step.attrs)

    ref = Reference(tmp_path)
    allowed = ref.allowed()
    # The rules leave holes in the candidates: around the satellite gaps, the PV gap, and
    # where the missing 06:00 run leaves only runs more than 300 min old (08:05 to 09:55).
    regular = [int(t.astype(np.int64)) for t in _regular(170)]
    assert 60 < len(allowed) < len(regular) - 60
    missing_run = EPOCH + 6 * HOUR
    fallback = {t for t in allowed if np.datetime64(t, "s") - NWP_DELAY >= missing_run
                and ref.nwp_choice(np.datetime64(t, "s"))[0] == RUNS_H.index(3)}
    next_to_gap = {t for t in allowed if any(abs(t - regular[g]) <= 65 * 60 for g in SAT_GAPS)}
    assert fallback and next_to_gap

    batches = take(config(), tmp_path, 100)
    drawn = np.concatenate([b["t0"] for b in batches])
    assert set(drawn.tolist()) == set(allowed), (
        f"drawn but not allowed: {sorted(set(drawn.tolist()) - set(allowed))[:5]}, "
        f"allowed but never drawn: {sorted(set(allowed) - set(drawn.tolist()))[:5]}")
    for b in batches:
        for i in range(len(b["t0"])):
            ref.check(b, i)
    assert fallback & set(drawn.tolist()) and next_to_gap & set(drawn.tolist())


def test_plan_reports_each_sources_rejections(tmp_path: Path) -> None:
    """gobatch.plan's t0_rejections: per source, the anchor times whose window it lacks."""
    write_stores(tmp_path, "cf_minutes", "float_hours")
    ref = Reference(tmp_path)
    lo, hi = np.datetime64("2021-01-01T01:00:00", "s"), np.datetime64("2021-01-01T11:00:00", "s")
    rep = gobatch.plan(config(t0_start=str(lo), t0_end=str(hi)), data_root=str(tmp_path))
    sat = set(ref.sat_time.tolist())
    inside = [t for t in ref.sat_time if lo <= t <= hi]
    want = {
        "satellite": sum(not all(w in sat for w in (t + OFFSETS).tolist()) for t in inside),
        "nwp": sum(ref.nwp_choice(t) is None for t in inside),
        "pv": sum(not all(w in ref.pv_time for w in (t + OFFSETS).tolist()) for t in inside),
    }
    got = {r["name"]: r["count"] for r in rep["t0_rejections"] if r["field"] != "batch"}
    assert got == want and all(want.values()), (got, want)
    batch = [r for r in rep["t0_rejections"] if r["field"] == "batch"]
    assert len(batch) == 1 and batch[0]["count"] == len(ref.sat_time) - len(inside)
    assert rep["t0_candidates"] == len(ref.allowed(lo, hi))
    first = {r["name"]: r["first"] for r in rep["t0_rejections"]}
    t0 = next(t for t in inside if not all(w in sat for w in (t + OFFSETS).tolist()))
    lack = next(w for w in t0 + OFFSETS if w.tolist() not in sat)
    before = max(t for t in ref.sat_time if t < lack)
    after = min(t for t in ref.sat_time if t > lack)
    assert first["satellite"].startswith(f"at t0 {str(t0)[:16]}: the time coordinate has no step at t0 + "
        f"{(lack - t0) // MIN} min = {str(lack)[:16]} (a gap: its steps there are {str(before)[:16]} and "
        f"{str(after)[:16]}, {(after - before) // MIN} min apart;"), first
    t0 = next(t for t in inside if ref.nwp_choice(t) is None)
    assert first["nwp"].startswith(f"at t0 {str(t0)[:16]}: "), first


def test_t0_start_end(tmp_path: Path) -> None:
    write_stores(tmp_path, "cf_minutes", "float_hours")
    ref = Reference(tmp_path)
    every = ref.allowed()
    lo = np.datetime64(every[10], "s")
    hi = lo + 5 * HOUR + 2 * MIN  # not on the axis: the last t0 is the time before
    allowed = ref.allowed(lo, hi)
    assert every[10] == allowed[0] and len(every) > len(allowed) > 20
    cfg = config(t0_start=str(lo) + "Z", t0_end=str(hi).replace("T", " "))
    batches = take(cfg, tmp_path, 60)
    drawn = set(np.concatenate([b["t0"] for b in batches]).tolist())
    assert drawn == set(allowed)
    for b in batches[:3]:
        for i in range(len(b["t0"])):
            ref.check(b, i)


@pytest.mark.parametrize("batch, words", [
    ({"t0_start": "2021-02-30"}, ["batch.t0_start", "ISO 8601"]),
    ({"t0_start": "2021-01-01T05:00Z", "t0_end": "2021-01-01T04:00Z"}, ["batch.t0_end", "before t0_start"]),
    ({"t0_start": "2022-01-01"}, ["batch.t0_start", "no anchor time"]),
    # 08:05 .. 08:55: the 03:00 run is too old and the 09:00 run too young; the PV gap at
    # 08:20 is in the windows of all but 08:55; the satellite has every step there.
    ({"t0_start": "2021-01-01T08:05:00Z", "t0_end": "2021-01-01T08:55:00Z"},
     ["no valid t0", "source[1] (nwp) rejects 11", "max_staleness_minutes (300)", "source[2] (pv) rejects 10",
      "(a gap: its steps there are 2021-01-01T08:15 and 2021-01-01T08:25, 10 min apart"]),
])
def test_bad_range_is_refused(tmp_path: Path, batch: dict[str, str], words: list[str]) -> None:
    write_stores(tmp_path, "cf_minutes", "float_hours")
    with pytest.raises(gobatch.ConfigError) as e:
        take(config(**batch), tmp_path, 1)
    for w in words:
        assert w in str(e.value), str(e.value)
    assert "source[0] (satellite) rejects" not in str(e.value)
