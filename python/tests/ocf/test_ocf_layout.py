"""gobatch's batches from an ocf-data-sampler YAML are laid out as ocf-data-sampler 1.0.24's
``stack_np_samples_into_batch`` of ``PVNetDataset.get_sample`` (issue 18, item 2): the same keys
and nesting (``satellite_actual``, ``nwp -> ukv -> {nwp, nwp_channel_names, ...}``, ``t0_idx``),
shapes and axis order (satellite and NWP ``(T, C, W, H)``, x and y increasing), the crops
placed by ocf's rule around each site in each source's own system (geostationary from the
``area`` attribute, OSGB for UKV, longitude/latitude for ECMWF), the time and coordinate keys as float64, and the site's own
generation series. A site whose crop leaves a grid (ocf-data-sampler's get_sample raises for
it) is left out of the job, and the plan says so.

The reference is ocf-data-sampler itself, run in a child process for every row gobatch
delivers (as in test_ocf_values.py). The stores' values encode (channel, time, y, x), so a
wrong crop, a swapped or unflipped axis shows as a different value; the crops are not square,
so swapped x and y also show as a different shape.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pyproj
import pytest
import xarray as xr

import ocf_configs as cfg
from geostationary import GEOS, grid_area
from test_ocf_values import T0
from ocf_reference import run_ocf
from ocf_stores import split_store

pytestmark = pytest.mark.timeout(300)

B = 4
SITE_IDS = [1, 2, 3, 4, 5]
EDGE_ID = 5  # two pixels from the satellite's northern edge: its 6-row crop does not fit

def layout_config(sat_height: int = 6, sat_paths: Any = "sat.zarr", ukv_paths: Any = "ukv.zarr",
                  gen: Optional[Dict[str, Any]] = None, sat_res: int = 5) -> str:
    """The layout tests' configuration: two NWPs of other crops than the satellite's."""
    unit = (0.0, 1.0)
    return cfg.config(
        "layout", "ocf-data-sampler's batch layout",
        generation=cfg.generation(**(gen or {"end": 60})),
        nwp={"ukv": cfg.nwp("ukv", ["t", "dswrf"], cfg.norm(t=unit, dswrf=unit), height=4, width=6, zarr_path=ukv_paths),
             "ecmwf": cfg.nwp("ecmwf", ["t2m"], cfg.norm(t2m=unit), height=6, width=4)},
        satellite=cfg.satellite(["IR_016", "VIS006"], cfg.norm(IR_016=unit, VIS006=unit), height=sat_height, width=10,
                                zarr_path=sat_paths, res=sat_res))


CONFIG = layout_config()


def write_stores(root: Path) -> Dict[int, Tuple[float, float]]:
    """A SEVIRI-like satellite (y descending, x ascending), a UKV NWP in OSGB (x ascending, y
    descending), an ECMWF NWP in longitude/latitude (latitude descending) and five sites, one of them near the satellite's northern edge. Values are
    integers (exact in float32) that encode every index: satellite 1e6*channel + 1e4*time +
    100*y + x, UKV 1e6*channel + 1000*x + y (the same for every run and step, so that the NWP's
    window rule, which is not compared here, cannot change them). Returns the sites' lon/lat."""
    to_geos = pyproj.Transformer.from_crs("EPSG:4326", GEOS, always_xy=True)
    gx, gy = to_geos.transform(-1.5, 52.6)
    x = gx + 3000.0 * (np.arange(40) - 20)
    y = gy + 3000.0 * (15 - np.arange(30))  # descending, as SEVIRI archives are
    times = T0 - np.timedelta64(60, "m") + np.arange(60) * np.timedelta64(5, "m")
    c, t, yy, xx = np.meshgrid(np.arange(2), np.arange(len(times)), np.arange(len(y)), np.arange(len(x)), indexing="ij")
    sat = (1e6 * c + 1e4 * t + 100 * yy + xx).astype(np.float32)
    xr.Dataset({"data": (("variable", "time", "y_geostationary", "x_geostationary"), sat,
                         {"area": grid_area(x[::-1], y[::-1])})},  # grid_area(): corners from ascending x, y
               coords={"variable": ["IR_016", "VIS006"], "time": times, "y_geostationary": y, "x_geostationary": x},
               ).to_zarr(root / "sat.zarr", zarr_format=2, consolidated=True)

    xo, yo = np.arange(360000.0, 520000.0, 2000.0), np.arange(400000.0, 220000.0, -2000.0)
    init = T0 - np.timedelta64(6, "h") + np.arange(5) * np.timedelta64(3, "h")
    step = np.arange(10) * np.timedelta64(1, "h")
    cc, xi, yi = np.meshgrid(np.arange(2), np.arange(len(xo)), np.arange(len(yo)), indexing="ij")
    per = (1e6 * cc + 1000 * xi + yi).astype(np.float32)  # (channel, x, y)
    data = np.broadcast_to(per[None, None], (len(init), len(step), *per.shape))
    xr.Dataset({"UKV": (("init_time", "step", "variable", "x", "y"), data.copy())},
               coords={"init_time": init, "step": step, "variable": ["t", "dswrf"], "x": xo, "y": yo},
               ).to_zarr(root / "ukv.zarr", zarr_format=2, consolidated=True)

    # ECMWF on longitude/latitude, latitude descending as ECMWF's files are: 1e6 + 1000*lon + lat
    lons, lats = -4.0 + 0.1 * np.arange(50), 54.5 - 0.1 * np.arange(36)
    li, la = np.meshgrid(np.arange(len(lats)), np.arange(len(lons)), indexing="ij")
    per = (1e6 + 1000 * la + li).astype(np.float32)[None]  # (channel, latitude, longitude)
    data = np.broadcast_to(per[None, None], (len(init), len(step), *per.shape))
    xr.Dataset({"ECMWF": (("init_time", "step", "variable", "latitude", "longitude"), data.copy())},
               coords={"init_time": init, "step": step, "variable": ["t2m"], "latitude": lats, "longitude": lons},
               ).to_zarr(root / "ecmwf.zarr", zarr_format=2, consolidated=True)

    from_geos = pyproj.Transformer.from_crs(GEOS, "EPSG:4326", always_xy=True)
    lon = [-1.9, -1.2, -1.6, -1.45]
    lat = [52.4, 52.9, 52.6, 52.75]
    elon, elat = from_geos.transform(gx + 1000.0, y[0] - 1.4 * 3000.0)  # nearest row 1 of 30 (increasing: 28)
    lon.append(elon)
    lat.append(elat)
    rng = np.random.default_rng(7)
    gtimes = T0 - np.timedelta64(2, "h") + np.arange(12) * np.timedelta64(30, "m")
    n = len(SITE_IDS)
    xr.Dataset(
        {"generation_mw": (("time_utc", "location_id"), rng.uniform(0, 5, (len(gtimes), n)).astype(np.float32)),
         "capacity_mwp": (("time_utc", "location_id"), rng.uniform(8, 12, (len(gtimes), n)).astype(np.float32))},
        coords={"time_utc": gtimes, "location_id": np.array(SITE_IDS),
                "longitude": ("location_id", np.array(lon)), "latitude": ("location_id", np.array(lat))},
    ).to_zarr(root / "gen.zarr", zarr_format=2, consolidated=True)
    return {i: (lo, la) for i, lo, la in zip(SITE_IDS, lon, lat)}


_REF_SCRIPT = """
import json, sys
import numpy as np
try:
    import pandas as pd
    from ocf_data_sampler.torch_datasets.pvnet_dataset import PVNetDataset
except ImportError as e:
    print(json.dumps({"missing": str(e)})); sys.exit(0)
ds = PVNetDataset(sys.argv[1])
def enc(v):
    if isinstance(v, dict):
        return {"dict": {k: enc(x) for k, x in v.items()}}
    if isinstance(v, (np.ndarray, np.generic)):
        return {"array": np.asarray(v).tolist(), "dtype": np.asarray(v).dtype.str, "shape": list(np.shape(v))}
    if hasattr(v, "to_numpy"):  # the datetime encodings are pandas Index objects
        return enc(v.to_numpy())
    return {"py": v, "type": type(v).__name__}
req = json.loads(sys.stdin.read())
out = []
for t0, loc in req["pairs"]:
    out.append(enc(ds.get_sample(pd.Timestamp(t0, unit="s"), loc))["dict"])
raised = {}
for loc in req["raises"]:
    try:
        ds.get_sample(pd.Timestamp(req["pairs"][0][0], unit="s"), loc)
        raised[loc] = ""
    except ValueError as e:
        raised[loc] = str(e)
print(json.dumps({"samples": out, "raised": raised}))
"""


def ocf_reference(root: Path, config: str, pairs: List[Tuple[float, int]], raises: List[int]) -> Dict[str, Any]:
    return run_ocf(_REF_SCRIPT, [config], root, {"pairs": pairs, "raises": raises}, timeout=240)


def decode(v: Dict[str, Any]) -> Any:
    if "dict" in v:
        return {k: decode(x) for k, x in v["dict"].items()}
    if "array" in v:
        return np.array(v["array"], dtype=np.dtype(v["dtype"])).reshape(v["shape"])
    return v["py"]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    r = tmp_path_factory.mktemp("ocflayout")
    write_stores(r)
    (r / "pvnet.yaml").write_text(CONFIG)
    return r


def take_batches(root: Path, monkeypatch: pytest.MonkeyPatch, n: int, framework: str = "numpy",
                 config: str = "pvnet.yaml") -> List[Dict[str, Any]]:
    """The first n batches, copied (nested as delivered)."""
    import gobatch

    def copy(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: copy(x) for k, x in v.items()}
        if hasattr(v, "numpy"):
            return v.numpy().copy()
        return v.copy() if isinstance(v, np.ndarray) else v

    monkeypatch.chdir(root)
    out = []
    with gobatch.Loader(config, batch_size=B, seed=5, framework=framework) as loader:
        for k, batch in enumerate(loader):
            out.append(copy(dict(batch)))
            if k + 1 == n:
                break
    return out


#: gobatch's own extra keys (docs/OCF.md)
EXTRA = {"x", "y", "generation_capacity", "generation_system", "generation_capacity_system"}


def test_batches_are_ocf_samples_stacked(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    batches = take_batches(root, monkeypatch, 6)
    assert batches[0]["nwp"]["ukv"]["nwp_channel_names"].tolist() == ["t", "dswrf"]
    assert_batches_are_ocf_samples(root, batches, "pvnet.yaml")


def assert_batches_are_ocf_samples(root: Path, batches: List[Dict[str, Any]], config: str,
                                   nwps: Tuple[str, ...] = ("ukv", "ecmwf"), edge: Optional[int] = EDGE_ID) -> None:
    """Every row of batches equals ocf-data-sampler's get_sample of its (t0, location) under
    config, in keys, nesting, shapes, dtypes and values; nwps are the config's NWP keys; edge is
    a site ocf cannot sample (gobatch must not draw it), if any."""
    rows = [(b, e) for b in batches for e in range(len(b["t0"]))]
    pairs = [(float(b["t0"][e]), int(b["location_id"][e])) for b, e in rows]
    assert len({p[1] for p in pairs}) >= 3 and len({p[0] for p in pairs}) >= 3, pairs  # several sites and t0s
    ref = ocf_reference(root, config, pairs, raises=[edge] if edge is not None else [])
    if edge is not None:
        assert edge not in {p[1] for p in pairs}
        assert "not available" in ref["raised"][str(edge)], ref["raised"]  # ocf cannot sample the edge site

    first = decode({"dict": {k: v for k, v in ref["samples"][0].items()}})
    for b in batches:
        # the keys and the nesting of stack_np_samples_into_batch
        want_top = set(first)
        assert want_top <= set(b), want_top - set(b)
        assert set(b) - want_top <= EXTRA, set(b) - want_top
        assert list(b["nwp"]) == list(first["nwp"]) == list(nwps)
        for key in nwps:
            assert set(b["nwp"][key]) == set(first["nwp"][key]), (key, set(b["nwp"][key]) ^ set(first["nwp"][key]))
        assert b["t0_idx"] == first["t0_idx"] and type(b["t0_idx"]) is int
        for key in nwps:
            names = b["nwp"][key]["nwp_channel_names"]
            assert names.dtype.kind == "U" and names.tolist() == first["nwp"][key]["nwp_channel_names"].tolist()

    for (b, e), sample, pair in zip(rows, ref["samples"], pairs):
        want = decode({"dict": sample})
        at = f"at (t0, location_id) {pair}"
        for key in ["satellite_actual", "generation", "capacity_mwp", "location_id", "t0", "longitude", "latitude",
                    "time_utc", "satellite_time_utc", "satellite_x_geostationary", "satellite_y_geostationary"]:
            if key.startswith("satellite") and "satellite_actual" not in want:
                assert key not in b, key  # a configuration without a satellite
                continue
            got, exp = b[key][e], np.asarray(want[key])
            assert got.shape == exp.shape, (key, got.shape, exp.shape, at)
            if key in ("satellite_actual", "generation", "capacity_mwp"):
                # ocf's satellite is float64; its values are integers here, exact in float32
                assert got.dtype == np.float32, key
                np.testing.assert_array_equal(got, exp.astype(np.float32), err_msg=f"{key} {at}")
            else:
                assert got.dtype == (np.int64 if key == "location_id" else np.float64), (key, got.dtype)
                np.testing.assert_array_equal(got, exp, err_msg=f"{key} {at}")
        for key in nwps:
            got, exp = b["nwp"][key]["nwp"][e], want["nwp"][key]["nwp"]
            assert got.shape == exp.shape, (key, got.shape, exp.shape, at)
            np.testing.assert_array_equal(got, exp.astype(np.float32), err_msg=f"nwp.{key}.nwp {at}")
            for tkey, dtype in (("nwp_init_time_utc", np.float64), ("nwp_step", np.int64), ("nwp_target_time_utc", np.float64)):
                got = b["nwp"][key][tkey][e]
                # ocf gives one init time as a scalar when one run covers the window; gobatch
                # always gives one per step
                exp = np.broadcast_to(np.asarray(want["nwp"][key][tkey]), got.shape)
                assert got.dtype == dtype, (key, tkey, got.dtype)
                np.testing.assert_array_equal(got, exp, err_msg=f"nwp.{key}.{tkey} {at}")
        # the satellite's values show that the crop is ocf's: x and y both increase
        assert "satellite_actual" not in first or np.all(np.diff(b["satellite_x_geostationary"][e]) > 0) and np.all(np.diff(b["satellite_y_geostationary"][e]) > 0)


def test_several_zarr_paths_are_one_store_as_ocf(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A satellite given as three zarr_paths (cut at a chunk boundary and inside a chunk) and a
    UKV as two, each store chunked along time: ocf-data-sampler concatenates them along time
    (satellite: time; NWP: init_time) and gobatch reads them as one store; every row equals
    ocf's sample of the same pair, and the batches are bit for bit those of the uncut stores."""
    sat = split_store(root, "sat.zarr", "time", [24, 43], {"variable": 1, "time": 6})
    ukv = split_store(root, "ukv.zarr", "init_time", [2], {"init_time": 1})
    (root / "several.yaml").write_text(layout_config(sat_paths=sat, ukv_paths=ukv))
    several = take_batches(root, monkeypatch, 6, config="several.yaml")
    assert_batches_are_ocf_samples(root, several, "several.yaml")
    whole = take_batches(root, monkeypatch, 6)

    def same(a: Any, b: Any, at: str) -> None:
        if isinstance(a, dict):
            assert set(a) == set(b), at
            for k in a:
                same(a[k], b[k], f"{at}.{k}")
        elif isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b, err_msg=at)
        else:
            assert a == b, at

    for k, (a, b) in enumerate(zip(several, whole)):
        same(a, b, f"batch {k}")


def test_several_zarr_paths_out_of_order_are_refused(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stores listed out of time order are refused at plan, naming the field and both stores,
    as ocf-data-sampler refuses their concatenation (times not increasing)."""
    import gobatch

    sat = split_store(root, "sat.zarr", "time", [30], {"variable": 1, "time": 6})
    (root / "swapped.yaml").write_text(layout_config(sat_paths=sat[::-1]))
    monkeypatch.chdir(root)
    with pytest.raises(gobatch.ConfigError, match=r"swapped\.yaml:\d+: input_data\.satellite\.zarr_path: .*sat-0\.zarr/time starts at "
                       r".*not after .*where .*sat-1\.zarr/time ends"):
        gobatch.plan("swapped.yaml", batch_size=B)


def test_excluded_site_is_in_the_plan(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The site near the edge is left out, and the plan names it and the source."""
    import gobatch

    monkeypatch.chdir(root)
    rep = gobatch.plan("pvnet.yaml", batch_size=B)
    assert rep["locations"] == len(SITE_IDS) - 1
    excl = rep["excluded_locations"]
    assert [(e["name"], e["location_ids"]) for e in excl] == [("satellite", [EDGE_ID])], excl
    view = {tuple(v["key"]): v for v in rep["view"]}  # the nesting the ring carries (PROTOCOL.md 2.9)
    assert view[("satellite_actual",)]["tensor"] == "satellite" and view[("t0_idx",)]["int"] == 2
    assert view[("nwp", "ukv", "nwp_channel_names")]["strings"] == ["t", "dswrf"]
    assert view[("nwp", "ecmwf", "nwp_channel_names")]["strings"] == ["t2m"]
    assert [v["tensor"] for k, v in view.items() if k[:1] == ("nwp",) and k[-1] == "nwp"] == ["ukv", "ecmwf"]
    shapes = {t["name"]: t["shape"] for t in rep["tensors"]}
    # (B, T, C, W, H)
    assert shapes["satellite"] == [B, 7, 2, 10, 6] and shapes["ukv"] == [B, 4, 2, 6, 4] and shapes["ecmwf"] == [B, 4, 1, 4, 6]


def test_loader_warns_of_left_out_sites_and_a_batch_larger_than_the_pairs(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Loader says, once and at the user's line, which location it leaves out and why, and
    that a batch larger than the sample space repeats examples (the stream draws with
    replacement)."""
    import gobatch

    monkeypatch.chdir(root)
    pairs = gobatch.plan("pvnet.yaml", batch_size=B)["sample_space"]["pairs"]
    with pytest.warns(gobatch.GobatchWarning) as rec:
        line = sys._getframe().f_lineno + 1
        loader = gobatch.Loader("pvnet.yaml", batch_size=pairs + 1)
    loader.close()
    texts = [str(w.message) for w in rec]
    assert all(w.filename == __file__ and w.lineno == line for w in rec), [(w.filename, w.lineno) for w in rec]
    assert any(f"1 of the {len(SITE_IDS)} systems of generation are left out as locations (ids {EDGE_ID})" in t for t in texts), texts
    assert any(f"batch_size {pairs + 1} is more than the {pairs} samples" in t
               and "batch_size (batch_size=, --batch-size, [batch] size) of at most" in t for t in texts), texts


def test_no_site_left_is_refused(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A crop no site can have: the job is refused, naming the source."""
    import gobatch

    monkeypatch.chdir(root)
    (root / "huge.yaml").write_text(layout_config(sat_height=30))
    with pytest.raises(gobatch.ConfigError, match="satellite"):
        gobatch.plan("huge.yaml", batch_size=B)


def test_torch_batches_nest_the_same(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    [nb] = take_batches(root, monkeypatch, 1)
    [tb] = take_batches(root, monkeypatch, 1, framework="torch")
    assert set(tb) == set(nb) and set(tb["nwp"]["ukv"]) == set(nb["nwp"]["ukv"])
    for key in ("satellite_actual", "time_utc", "t0", "longitude"):
        np.testing.assert_array_equal(tb[key], nb[key])
    np.testing.assert_array_equal(tb["nwp"]["ukv"]["nwp"], nb["nwp"]["ukv"]["nwp"])
    assert tb["nwp"]["ukv"]["nwp_channel_names"].dtype.kind == "U" and tb["t0_idx"] == nb["t0_idx"]


def test_nested_view_holds_the_lease(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A view kept from the nested dict holds the slot, as a flat batch's view does; dropping it
    gives the slot back."""
    import gobatch

    monkeypatch.chdir(root)
    with gobatch.Loader("pvnet.yaml", batch_size=B, seed=5) as loader:
        it = iter(loader)
        batch = next(it)
        kept = batch["nwp"]["ukv"]["nwp"][0]
        del batch
        nxt = next(it)
        book = loader._ring._book
        assert book.held() == 2  # the first batch's slot is still lent: `kept` views it
        del kept, nxt
        next(it)
        assert book.held() == 1


def test_cuda_batches_keep_the_nesting(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gobatch.cuda_batches moves the arrays of the nested batch and keeps the rest as it is."""
    torch = pytest.importorskip("torch")
    import gobatch

    [nb] = take_batches(root, monkeypatch, 1)
    with gobatch.Loader("pvnet.yaml", batch_size=B, seed=5) as loader:
        batch = next(gobatch.cuda_batches(loader, "cpu"))
        assert isinstance(batch["satellite_actual"], torch.Tensor) and isinstance(batch["nwp"]["ukv"]["nwp"], torch.Tensor)
        np.testing.assert_array_equal(batch["nwp"]["ecmwf"]["nwp"].numpy(), nb["nwp"]["ecmwf"]["nwp"])
        assert batch["nwp"]["ukv"]["nwp_channel_names"].tolist() == ["t", "dswrf"] and batch["t0_idx"] == 2


def test_t0s_off_the_satellite_grid_as_ocf(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sites every 5 minutes beside a 15-minute satellite (two thirds of the t0s off its grid):
    ocf-data-sampler ceils t0 + interval_start onto each source's own resolution, and so does
    gobatch under its rules; every row equals ocf's sample of the same pair, off-grid t0s
    among them."""
    sat = xr.open_zarr(root / "sat.zarr").load().isel(time=slice(0, None, 3))  # 15-minute steps
    for v in sat.variables.values():
        v.encoding = {}
    sat.to_zarr(root / "sat15.zarr", mode="w", zarr_format=2, consolidated=True)
    gen = xr.open_zarr(root / "gen.zarr").load()
    times = T0 - np.timedelta64(2, "h") + np.arange(72) * np.timedelta64(5, "m")
    rng = np.random.default_rng(11)
    n = gen.sizes["location_id"]
    xr.Dataset(
        {"generation_mw": (("time_utc", "location_id"), rng.uniform(0, 5, (len(times), n)).astype(np.float32)),
         "capacity_mwp": (("time_utc", "location_id"), rng.uniform(8, 12, (len(times), n)).astype(np.float32))},
        coords={"time_utc": times, "location_id": gen["location_id"].values,
                "longitude": ("location_id", gen["longitude"].values), "latitude": ("location_id", gen["latitude"].values)},
    ).to_zarr(root / "gen5.zarr", mode="w", zarr_format=2, consolidated=True)
    (root / "offgrid.yaml").write_text(layout_config(sat_paths="sat15.zarr", sat_res=15,
                                                     gen={"zarr_path": "gen5.zarr", "res": 5, "start": -30, "end": 30}))
    batches = take_batches(root, monkeypatch, 6, config="offgrid.yaml")
    t0s = {float(t) for b in batches for t in b["t0"]}
    assert any(t % 900 for t in t0s) and any(t % 900 == 0 for t in t0s), sorted(t0s)
    assert_batches_are_ocf_samples(root, batches, "offgrid.yaml")


def test_gfs_variables_are_channels_as_ocf(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """GFS's layout, one data array per channel over (init_time_utc, step, latitude,
    longitude), latitude descending: ocf-data-sampler stacks the arrays into channels (its
    open_gfs) and so does gobatch (variables_as_channels, set by provider gfs); the channels
    are taken by name in the configuration's order; every row equals ocf's sample."""
    lons, lats = -4.0 + 0.25 * np.arange(24), 54.5 - 0.25 * np.arange(16)
    init = T0 - np.timedelta64(8, "h") + np.arange(4) * np.timedelta64(6, "h")  # 00, 06, 12, 18 UTC, as GFS runs
    step = np.arange(9) * np.timedelta64(3, "h")
    li, lo = np.meshgrid(np.arange(len(lats)), np.arange(len(lons)), indexing="ij")
    names = ["t", "u10", "v10"]
    data = {}
    for c, name in enumerate(names):
        per = (1e6 * (c + 1) + 1000 * lo + li).astype(np.float32)  # (latitude, longitude)
        data[name] = (("init_time_utc", "step", "latitude", "longitude"),
                      np.broadcast_to(per[None, None], (len(init), len(step), *per.shape)).copy())
    xr.Dataset(data, coords={"init_time_utc": init, "step": step, "latitude": lats, "longitude": lons},
               ).to_zarr(root / "gfs.zarr", mode="w", zarr_format=2, consolidated=True)
    unit = (0.0, 1.0)
    text = cfg.config(
        "gfs", "GFS beside the satellite",
        generation=cfg.generation(end=60),
        nwp={"gfs": cfg.nwp("gfs", ["v10", "t"], cfg.norm(v10=unit, t=unit), height=4, width=6, res=180, start=-180, end=180)},
        satellite=cfg.satellite(["IR_016", "VIS006"], cfg.norm(IR_016=unit, VIS006=unit), height=6, width=10))
    (root / "gfs.yaml").write_text(text)
    batches = take_batches(root, monkeypatch, 4, config="gfs.yaml")
    assert batches[0]["nwp"]["gfs"]["nwp_channel_names"].tolist() == ["v10", "t"]
    assert_batches_are_ocf_samples(root, batches, "gfs.yaml", nwps=("gfs",))


@pytest.mark.parametrize("nwps", [("ukv", "ecmwf"), ("ecmwf",)])
def test_no_satellite_centres_on_the_locations_as_ocf(root: Path, monkeypatch: pytest.MonkeyPatch, nwps: Tuple[str, ...]) -> None:
    """OCF trains models without a satellite (UKV and ECMWF, ECMWF-only): the examples are
    centred on the generation's locations, each NWP cropped around the site in its own grid,
    the t0s those of the NWPs' and the generation's periods; every row equals ocf's sample
    and the site near the satellite's edge, which only the satellite's crop ruled out, is
    sampled."""
    unit = (0.0, 1.0)
    all_nwp = {"ukv": cfg.nwp("ukv", ["t", "dswrf"], cfg.norm(t=unit, dswrf=unit), height=4, width=6),
               "ecmwf": cfg.nwp("ecmwf", ["t2m"], cfg.norm(t2m=unit), height=6, width=4)}
    name = "nosat-" + "-".join(nwps) + ".yaml"
    (root / name).write_text(cfg.config("nosat", "NWP only", generation=cfg.generation(end=60),
                                        nwp={k: all_nwp[k] for k in nwps}))
    batches = take_batches(root, monkeypatch, 8, config=name)
    assert "satellite_actual" not in batches[0] and list(batches[0]["nwp"]) == list(nwps)
    assert EDGE_ID in {int(i) for b in batches for i in b["location_id"]}
    assert_batches_are_ocf_samples(root, batches, name, nwps=nwps, edge=None)


def test_satellite_pixels_off_the_disk_as_ocf(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A geostationary grid wider than the Earth's disk, as both of ocf-data-sampler's test
    fixtures are: its outer pixels have no longitude/latitude (NaN when projected). They are
    pixels no site uses, not a fault of the configuration: gobatch accepts it and every row
    equals ocf's sample."""
    to_geos = pyproj.Transformer.from_crs("EPSG:4326", GEOS, always_xy=True)
    gx, gy = to_geos.transform(-1.5, 52.6)
    x = gx + 150_000.0 * (np.arange(40) - 20)
    y = gy + 150_000.0 * (15 - np.arange(30))  # the top rows beyond the disk's edge
    lon, _ = pyproj.Transformer.from_crs(GEOS, "EPSG:4326", always_xy=True).transform(*np.meshgrid(x, y))
    assert (~np.isfinite(lon)).sum() >= 100, "fixture: pixels off the disk"
    times = T0 - np.timedelta64(60, "m") + np.arange(60) * np.timedelta64(5, "m")
    c, t, yy, xx = np.meshgrid(np.arange(2), np.arange(len(times)), np.arange(len(y)), np.arange(len(x)), indexing="ij")
    xr.Dataset({"data": (("variable", "time", "y_geostationary", "x_geostationary"),
                         (1e6 * c + 1e4 * t + 100 * yy + xx).astype(np.float32), {"area": grid_area(x[::-1], y[::-1])})},
               coords={"variable": ["IR_016", "VIS006"], "time": times, "y_geostationary": y, "x_geostationary": x},
               ).to_zarr(root / "satdisk.zarr", mode="w", zarr_format=2, consolidated=True)
    (root / "disk.yaml").write_text(layout_config(sat_paths="satdisk.zarr"))
    batches = take_batches(root, monkeypatch, 6, config="disk.yaml")
    assert_batches_are_ocf_samples(root, batches, "disk.yaml", edge=None)


def test_nwp_steps_finer_than_the_resolution_as_ocf(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hourly UKV steps under a 3-hour resolution, every window from one run (an NWP dropout of
    3 h, certain): ocf-data-sampler then takes every stored step between the first and the last
    target (7 where the resolution gives 3), and so does gobatch, row for row equal to ocf's
    samples. ocf also accepts t0s whose last target no run reaches (its label slice then cuts
    the window short: 6 steps at 07:30); gobatch leaves them out and the plan counts them. Where
    some window takes several runs (no dropout), the steps stay the resolution's and the Loader
    says why, naming the source."""
    import gobatch

    unit = (0.0, 1.0)

    def finer(name: str, **dropout: Any) -> None:
        (root / name).write_text(cfg.config(
            "finer", "hourly steps, 3-hour resolution", generation=cfg.generation(end=60),
            nwp={"ukv": cfg.nwp("ukv", ["t"], cfg.norm(t=unit), height=4, width=6, res=180, start=-180, end=180, **dropout)}))

    finer("finer.yaml", dropout_timedeltas_minutes=[-180], dropout_fraction=1.0)
    batches = take_batches(root, monkeypatch, 8, config="finer.yaml")
    assert {b["nwp"]["ukv"]["nwp"].shape[1] for b in batches} == {7}
    assert_batches_are_ocf_samples(root, batches, "finer.yaml", nwps=("ukv",), edge=None)
    cut = float(np.datetime64("2024-02-28T07:30", "s").astype(np.int64))
    assert cut not in {float(t) for b in batches for t in b["t0"]}
    rep = gobatch.plan("finer.yaml", batch_size=B)
    ukv = [r for r in rep["t0_rejections"] if r["name"] == "ukv"]
    assert ukv and ukv[0]["count"] > 0, rep["t0_rejections"]
    short = ocf_reference(root, "finer.yaml", [(cut, 1)], raises=[])
    assert decode({"dict": short["samples"][0]})["nwp"]["ukv"]["nwp"].shape[0] == 6

    # an accumulated channel: one more coarse target, differenced along the fine steps, the last
    # fine step dropped, as ocf-data-sampler's diff_nwp_data does
    (root / "finer_accum.yaml").write_text(cfg.config(
        "finer", "hourly steps, 3-hour resolution, accumulated", generation=cfg.generation(end=60),
        nwp={"ukv": cfg.nwp("ukv", ["t", "dswrf"], cfg.norm(t=unit, diff_dswrf=unit), height=4, width=6, res=180,
                            start=-180, end=0, dropout_timedeltas_minutes=[-180], dropout_fraction=1.0,
                            accum_channels=["dswrf"])}))
    batches = take_batches(root, monkeypatch, 6, config="finer_accum.yaml")
    assert {b["nwp"]["ukv"]["nwp"].shape[1] for b in batches} == {6}  # 2 coarse steps: (2 * 3 h) / 1 h
    assert_batches_are_ocf_samples(root, batches, "finer_accum.yaml", nwps=("ukv",), edge=None)

    finer("mixed.yaml")  # without dropout a window before t0 takes the run before
    with pytest.warns(gobatch.GobatchWarning, match="finer than time_resolution_minutes 180"):
        loader = gobatch.Loader("mixed.yaml", batch_size=B, seed=5, framework="numpy")
    with loader:
        assert next(iter(loader))["nwp"]["ukv"]["nwp"].shape[1] == 3


def test_float64_capacity_gives_a_float64_generation_as_ocf(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A generation store whose capacity_mwp is float64 (generation_mw float32, a capacity with
    a zero): ocf-data-sampler's quotient is then float64 (numpy's division), and so is
    gobatch's, value for value with no float32 rounding on the way; capacity_mwp too; a zero
    capacity's infinity is filled as numpy's nan_to_num fills a float64 row with a NaN."""
    gen = xr.open_zarr(root / "gen.zarr").load()
    cap = gen["capacity_mwp"].values.astype(np.float64) * (1 + 1e-9)  # not float32-exact
    mw = gen["generation_mw"].values.copy()
    cap[3, 1], mw[3, 1] = 0.0, 1.0  # +inf for location 2 at one step
    mw[5, 2] = np.nan  # a NaN row for location 3
    ds = gen.assign(capacity_mwp=(gen["capacity_mwp"].dims, cap), generation_mw=(gen["generation_mw"].dims, mw))
    for v in ds.variables.values():
        v.encoding = {}
    ds.to_zarr(root / "gen64.zarr", mode="w", zarr_format=2, consolidated=True)
    (root / "gen64.yaml").write_text(layout_config(gen={"zarr_path": "gen64.zarr", "end": 60}))
    batches = take_batches(root, monkeypatch, 6, config="gen64.yaml")
    assert batches[0]["generation"].dtype == np.float64 and batches[0]["capacity_mwp"].dtype == np.float64
    rows = [(b, e) for b in batches for e in range(B)]
    pairs = [(float(b["t0"][e]), int(b["location_id"][e])) for b, e in rows]
    ref = ocf_reference(root, "gen64.yaml", pairs, raises=[])
    for (b, e), sample, pair in zip(rows, ref["samples"], pairs):
        want = decode({"dict": sample})
        for key in ("generation", "capacity_mwp"):
            exp = np.asarray(want[key])
            assert exp.dtype == np.float64, (key, exp.dtype)
            np.testing.assert_array_equal(b[key][e], exp, err_msg=f"{key} at {pair}")


def test_a_long_nwp_key_as_ocf(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An NWP key too long to name a tensor with its time suffixes (26 characters): its tensors
    take a short name and the batch nests them under the key, as ocf-data-sampler's; every row
    equal to ocf's sample."""
    key = "ukv_with_a_rather_long_key"
    unit = (0.0, 1.0)
    (root / "longkey.yaml").write_text(cfg.config(
        "longkey", "a long NWP key", generation=cfg.generation(end=60),
        nwp={key: cfg.nwp("ukv", ["t", "dswrf"], cfg.norm(t=unit, dswrf=unit), height=4, width=6, zarr_path="ukv.zarr")}))
    batches = take_batches(root, monkeypatch, 4, config="longkey.yaml")
    assert list(batches[0]["nwp"]) == [key]
    assert_batches_are_ocf_samples(root, batches, "longkey.yaml", nwps=(key,), edge=None)
