"""gobatch's batches from an ocf-data-sampler YAML carry the values PVNetDataset adds to each
sample (issue 18, item 2, first part): the datetime encodings, the t0 embedding and the solar
position, per (t0, location_id) as ocf-data-sampler 1.0.24 computes them; the generation divided
by its capacity per step and capacity_mwp; the satellite and the NWP normalised with ocf's clip
and their NaNs filled with each source's dropout_value.

The reference is ocf-data-sampler itself: ``PVNetDataset(yaml).get_sample(t0, location_id)``
for every row gobatch delivers (a batch carries t0 and location_id), run in a child process
(pyaml_env changes PyYAML's SafeLoader for the whole process) of this interpreter or of the one
GOBATCH_OCF_PYTHON names; without it the tests skip. The stores are written here with xarray in
ocf-data-sampler's layouts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np
import pyproj
import pytest
import xarray as xr
import ocf_configs as cfg
from geostationary import GEOS, grid_area
from ocf_configs import T0
from ocf_reference import run_ocf

pytestmark = pytest.mark.timeout(300)

def values_config(sat_zarr: str = "sat.zarr", sat_norm: Optional[dict] = None, nwp: Optional[dict] = None,
                  **sat_extra: Any) -> str:
    """The values tests' configuration: generation with its dropout_value, the satellite, the
    sun over a wider window, five t0 embeddings; an NWP section when given."""
    return cfg.config(
        "values", "the values PVNetDataset adds to each sample",
        generation=cfg.generation(dropout_value=0.25), nwp=nwp,
        satellite=cfg.satellite(["IR_016", "VIS006"], sat_norm or cfg.norm(IR_016=(1.0, 2.0), VIS006=(1.0, 2.0)),
                                height=8, width=10, zarr_path=sat_zarr, **sat_extra),
        solar_position=cfg.window(15, -120, 240),
        t0_embedding=[("1h", "cyclic"), ("6h", "linear"), ("24h", "cyclic"), ("1y", "cyclic"), ("2y", "linear")])


CONFIG = values_config()


def write_stores(root: Path) -> None:
    """A satellite over England and three sites with generation and a capacity that changes."""
    rng = np.random.default_rng(18)
    gx, gy = pyproj.Transformer.from_crs("EPSG:4326", GEOS, always_xy=True).transform(-1.5, 52.6)
    x = gx + 3000.0 * (30 - np.arange(60))  # descending, as archives often are
    y = gy + 3000.0 * (np.arange(50) - 25)
    times = T0 - np.timedelta64(60, "m") + np.arange(96) * np.timedelta64(5, "m")
    sat = xr.Dataset(
        {"data": (("variable", "time", "y_geostationary", "x_geostationary"),
                  rng.normal(size=(2, len(times), len(y), len(x))).astype(np.float32), {"area": grid_area(x, y)})},
        coords={"variable": ["IR_016", "VIS006"], "time": times, "y_geostationary": y, "x_geostationary": x})
    sat.to_zarr(root / "sat.zarr", zarr_format=2, consolidated=True)

    lon, lat = np.array([-1.9, -1.2, -1.6]), np.array([52.4, 52.9, 52.6])
    gtimes = T0 - np.timedelta64(3, "h") + np.arange(20) * np.timedelta64(30, "m")
    capacity = rng.uniform(8, 12, (len(gtimes), 3)).astype(np.float32)
    capacity[7::5, 1] = np.nan  # the quotient is NaN there: ocf fills it with dropout_value
    # a zero capacity: generation / 0 is inf; in a row with a NaN (site 1) ocf's nan_to_num makes
    # it the largest float32, in one without (site 2) it stays inf
    capacity[9, 1:] = 0.0
    gen = xr.Dataset(
        {"generation_mw": (("time_utc", "location_id"), rng.uniform(0, 5, (len(gtimes), 3)).astype(np.float32)),
         "capacity_mwp": (("time_utc", "location_id"), capacity)},
        coords={"time_utc": gtimes, "location_id": np.array([1, 2, 3]),
                "longitude": ("location_id", lon), "latitude": ("location_id", lat)})
    gen.to_zarr(root / "gen.zarr", zarr_format=2, consolidated=True)


def write_flat_satellite(root: Path, name: str, dtype: str) -> None:
    """A satellite whose values depend on (channel, time) only: the values are compared here,
    the crops in test_ocf_layout.py. The values cross the clip bounds; float32 has NaN time
    steps."""
    src = xr.open_zarr(root / "sat.zarr")
    nt = src.sizes["time"]
    per_time = np.stack([np.linspace(-40, 460, nt), np.linspace(300, -20, nt)])  # (channel, time)
    if dtype == "float32":
        per_time[0, 5::7] = np.nan
        per_time[1, 3::11] = np.nan
    else:
        per_time = np.round(per_time)
    data = np.broadcast_to(per_time[:, :, None, None], (2, nt, src.sizes["y_geostationary"], src.sizes["x_geostationary"]))
    flat = xr.Dataset({"data": (src["data"].dims, data.astype(dtype), src["data"].attrs)}, coords=src.coords)
    flat.to_zarr(root / name, zarr_format=2, consolidated=True)


_REF_SCRIPT = """
import json, sys
try:
    import pandas as pd
    from ocf_data_sampler.torch_datasets.pvnet_dataset import PVNetDataset
except ImportError as e:
    print(json.dumps({"missing": str(e)})); sys.exit(0)
ds = PVNetDataset(sys.argv[1])
out = []
for t0, loc in json.loads(sys.stdin.read()):
    s = ds.get_sample(pd.Timestamp(t0, unit="s"), loc)
    s["satellite_actual"] = s["satellite_actual"][:, :, 0, 0]  # spatially constant in these tests
    for key, nwp in s.get("nwp", {}).items():
        s["nwp_" + key] = nwp["nwp"]  # (T_n, C, W, H)
    out.append({k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in s.items() if k != "nwp"})
print(json.dumps({"samples": out}))
"""

KEYS = ["date_sin", "date_cos", "time_sin", "time_cos", "t0_embedding", "solar_azimuth", "solar_elevation"]


def ocf_samples(root: Path, config: str, pairs: list[tuple[int, int]]) -> list[dict]:
    return run_ocf(_REF_SCRIPT, [config], root, pairs, timeout=240)["samples"]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    r = tmp_path_factory.mktemp("ocfvalues")
    write_stores(r)
    (r / "pvnet.yaml").write_text(CONFIG)
    return r


def gobatch_rows(root: Path, monkeypatch: pytest.MonkeyPatch, batches: int,
                 config: str = "pvnet.yaml", extra: tuple[str, ...] = ()) -> list[dict[str, np.ndarray]]:
    """Every row of the first batches of gobatch.Loader on the YAML, each key a copy."""
    import gobatch

    monkeypatch.chdir(root)
    rows = []
    with gobatch.Loader(config, batch_size=4, seed=3, framework="numpy") as loader:
        for k, batch in enumerate(loader):
            flat = {key: batch[key] for key in [*KEYS, "t0", "location_id", "satellite_actual", "generation", "capacity_mwp"]}
            flat.update({key: batch["nwp"][key]["nwp"] for key in extra})  # ocf's nesting (test_ocf_layout.py)
            for e in range(4):
                rows.append({key: np.array(v[e]) for key, v in flat.items()})
            if k + 1 == batches:
                break
    return rows


def test_features_equal_ocf_get_sample(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = gobatch_rows(root, monkeypatch, batches=6)
    pairs = [(int(r["t0"]), int(r["location_id"])) for r in rows]
    assert len(set(pairs)) > 5, pairs  # several t0s and sites
    ref = ocf_samples(root, "pvnet.yaml", pairs)
    for row, want, pair in zip(rows, ref, pairs):
        assert want["t0"] == pair[0] and want["location_id"] == pair[1]
        for key in KEYS:
            got, exp = row[key], np.asarray(want[key])
            assert got.dtype == np.float32 and got.shape == exp.shape, (key, got.shape, exp.shape)
            # float32 of ocf's float64 (the t0 embedding is float32 in ocf too)
            np.testing.assert_allclose(got, exp.astype(np.float32), rtol=0, atol=2e-7, err_msg=f"{key} at {pair}")
        # generation / capacity per step (float32 in both), NaN -> dropout_value; the capacity
        # at the window's first step
        np.testing.assert_array_equal(row["generation"], np.asarray(want["generation"], np.float32),
                                      err_msg=f"generation at {pair}")
        assert row["capacity_mwp"].dtype == np.float32, pair
        # a NaN capacity stays NaN here: ocf fills arrays, not this scalar
        np.testing.assert_array_equal(row["capacity_mwp"], np.float32(want["capacity_mwp"]), err_msg=f"capacity_mwp at {pair}")
    filled = [r for r, w in zip(rows, ref) if 0.25 in w["generation"]]
    assert filled, "no NaN capacity in the rows: the fill is untested"
    gens = [np.asarray(w["generation"], np.float32) for w in ref]
    assert any((g == np.finfo(np.float32).max).any() for g in gens), "no infinity in a row with a NaN: untested"
    assert any(np.isinf(g).any() for g in gens), "no infinity in a row without a NaN: untested"


def test_shapes_follow_the_windows(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tensors are (B, T) over each window: generation's for the datetime encodings (7 steps
    -60..120 at 30 minutes), solar_position's for the sun (25 steps -120..240 at 15 minutes);
    the t0 embedding has two values per cyclic period and one per linear one."""
    import gobatch

    monkeypatch.chdir(root)
    rep = gobatch.plan("pvnet.yaml", batch_size=4)
    shapes = {t["name"]: t["shape"] for t in rep["tensors"]}
    assert shapes["date_sin"] == shapes["time_cos"] == [4, 7]
    assert shapes["solar_azimuth"] == shapes["solar_elevation"] == [4, 25]
    assert shapes["t0_embedding"] == [4, 8]


@pytest.mark.parametrize("dtype", ["float32", "int16"])
def test_satellite_clipped_normalised_and_filled_as_ocf(root: Path, monkeypatch: pytest.MonkeyPatch, dtype: str) -> None:
    """(clip(v, clip_min, clip_max) - mean) / std per channel, then NaN -> dropout_value: each
    pixel of gobatch's satellite equals ocf-data-sampler's satellite_actual in float32 (int16
    data goes through gobatch's table converter, float32 through its decoded cache)."""
    name = f"flat_{dtype}"
    write_flat_satellite(root, f"{name}.zarr", dtype)
    text = values_config(f"{name}.zarr", cfg.norm(IR_016=(100.0, 40.0, 0.0, 350.0), VIS006=(50.0, 30.0, None, 200.0)),
                         dropout_value=-1.5)
    assert "clip_min: 0.0" in text and "dropout_value: -1.5" in text
    (root / f"{name}.yaml").write_text(text)
    rows = gobatch_rows(root, monkeypatch, batches=4, config=f"{name}.yaml")
    pairs = [(int(r["t0"]), int(r["location_id"])) for r in rows]
    ref = ocf_samples(root, f"{name}.yaml", pairs)
    seen_clip = seen_nan = False
    for row, want, pair in zip(rows, ref, pairs):
        exp = np.asarray(want["satellite_actual"], dtype=np.float64)  # (T, C) of ocf's float64
        got = row["satellite_actual"]  # (T, C, W, H), spatially constant
        assert got.dtype == np.float32 and got.shape[:2] == exp.shape
        np.testing.assert_array_equal(got, np.broadcast_to(exp.astype(np.float32)[:, :, None, None], got.shape),
                                      err_msg=f"satellite at {pair}")
        seen_clip |= bool(np.any(exp[:, 0] == (350.0 - 100.0) / 40.0) or np.any(exp[:, 0] == -100.0 / 40.0))
        seen_nan |= bool(np.any(exp == -1.5))
    assert seen_clip, "no clipped value in the rows: the test proves nothing"
    assert seen_nan == (dtype == "float32"), "NaN fill seen only with float32's NaNs"


def test_nwp_clipped_normalised_and_filled_as_ocf(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same for a UKV NWP whose channels are constant: one above its clip_max, one below its
    clip_min, one all NaN (its dropout_value). Constant values make the comparison independent of
    the NWP window rule, which differs (docs/OCF.md); the crops are compared in test_ocf_layout.py."""
    xo, yo = np.arange(300000.0, 560000.0, 2000.0), np.arange(420000.0, 200000.0, -2000.0)
    init = T0 - np.timedelta64(6, "h") + np.arange(5) * np.timedelta64(3, "h")
    step = np.arange(10) * np.timedelta64(1, "h")
    per_channel = np.array([400.0, -10.0, np.nan], np.float32)
    data = np.broadcast_to(per_channel[None, None, :, None, None], (len(init), len(step), 3, len(xo), len(yo)))
    xr.Dataset({"UKV": (("init_time", "step", "variable", "x", "y"), data.copy())},
               coords={"init_time": init, "step": step, "variable": ["t", "dswrf", "sr"], "x": xo, "y": yo},
               ).to_zarr(root / "ukvflat.zarr", zarr_format=2, consolidated=True)
    text = values_config(nwp={"ukv": cfg.nwp(
        "ukv", ["t", "dswrf", "sr"], cfg.norm(t=(280.0, 10.0, None, 350.0), dswrf=(100.0, 50.0, 0.0), sr=(1.0, 2.0)),
        height=4, width=6, zarr_path="ukvflat.zarr", dropout_value=-2.5)})
    (root / "nwp.yaml").write_text(text)
    rows = gobatch_rows(root, monkeypatch, batches=2, config="nwp.yaml", extra=("ukv",))
    pairs = [(int(r["t0"]), int(r["location_id"])) for r in rows]
    ref = ocf_samples(root, "nwp.yaml", pairs)
    want = np.array([(350.0 - 280.0) / 10.0, (0.0 - 100.0) / 50.0, -2.5], np.float32)
    for row, sample, pair in zip(rows, ref, pairs):
        exp = np.asarray(sample["nwp_ukv"])  # (T_n, C, W, H) of ocf's float64
        got = row["ukv"]  # (T_n, C, W, H)
        assert got.shape == exp.shape, (got.shape, exp.shape)
        np.testing.assert_array_equal(exp, np.broadcast_to(want[None, :, None, None], exp.shape))  # ocf's own values
        np.testing.assert_array_equal(got, np.broadcast_to(want[None, :, None, None], got.shape), err_msg=f"ukv at {pair}")
