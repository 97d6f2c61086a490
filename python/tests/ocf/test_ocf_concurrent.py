"""Concurrent batches (issue 27): ``gobatch.Loader(yaml, concurrent=True)`` yields
ocf-data-sampler 1.0.24's ``PVNetConcurrentDataset`` samples, every location for one t0
stacked, as pvnet-summation's ``StreamedDataset`` takes them (a DataLoader with
``batch_size=None``).

The reference is ocf-data-sampler itself in a child process: ``PVNetConcurrentDataset(config)``'s
``len`` and t0s (``valid_t0_times``), and ``get_sample(t0)`` of every t0 gobatch delivers,
compared key by key and value for value. test_ocf_layout's stores: a configuration without a
satellite (every site fits both NWPs), and the layout configuration, whose edge site the
satellite cannot crop: ocf-data-sampler's concurrent samples all fail there, gobatch leaves the
site out, and each row still equals ``PVNetDataset``'s sample of its pair.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest

import gobatch
import ocf_configs as cfg
from ocf_reference import run_ocf
from test_ocf_layout import CONFIG, EDGE_ID, SITE_IDS, assert_batches_are_ocf_samples, decode, write_stores

pytestmark = pytest.mark.timeout(300)

_CONCURRENT_SCRIPT = """
import json, sys
import numpy as np
try:
    import pandas as pd
    from ocf_data_sampler.torch_datasets.pvnet_dataset import PVNetConcurrentDataset
except ImportError as e:
    print(json.dumps({"missing": str(e)})); sys.exit(0)
def enc(v):
    if isinstance(v, dict):
        return {"dict": {k: enc(x) for k, x in v.items()}}
    if isinstance(v, (np.ndarray, np.generic)):
        return {"array": np.asarray(v).tolist(), "dtype": np.asarray(v).dtype.str, "shape": list(np.shape(v))}
    if hasattr(v, "to_numpy"):
        return enc(v.to_numpy())
    return {"py": v, "type": type(v).__name__}
t0s = json.loads(sys.stdin.read())
try:
    ds = PVNetConcurrentDataset(sys.argv[1])
except ValueError as e:  # a location's crop leaves a grid: no sample at all
    print(json.dumps({"opened": False, "failed": str(e)})); sys.exit(0)
out, failed = [], ""
for t0 in t0s:
    try:
        out.append(enc(ds.get_sample(pd.Timestamp(t0, unit="s")))["dict"])
    except ValueError as e:
        failed = str(e)
print(json.dumps({"opened": True, "len": len(ds), "t0s": [t.timestamp() for t in ds.valid_t0_times], "samples": out, "failed": failed}))
"""


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    r = tmp_path_factory.mktemp("ocfconc")
    write_stores(r)
    (r / "pvnet.yaml").write_text(CONFIG)
    unit = (0.0, 1.0)
    (r / "nosat.yaml").write_text(cfg.config(
        "nosat", "NWP only", generation=cfg.generation(end=60),
        nwp={"ukv": cfg.nwp("ukv", ["t", "dswrf"], cfg.norm(t=unit, dswrf=unit), height=4, width=6),
             "ecmwf": cfg.nwp("ecmwf", ["t2m"], cfg.norm(t2m=unit), height=6, width=4)}))
    return r


def one_epoch(root: Path, monkeypatch: pytest.MonkeyPatch, config: str) -> List[Dict[str, Any]]:
    """Every batch of epoch 0 of concurrent batches, copied."""
    monkeypatch.chdir(root)
    out = []
    with gobatch.Loader(config, concurrent=True, order="epochs", seed=2) as loader:
        for batch in loader:
            out.append(_copy(dict(batch)))
    return out


def _copy(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _copy(x) for k, x in v.items()}
    return v.copy() if isinstance(v, np.ndarray) else v


def check_same(got: Any, want: Any, at: str) -> None:
    """gobatch's batch against ocf's stacked sample: every key of ocf's at the same path, the
    same shape and values (float32 after rounding where ocf gives float64 data)."""
    if isinstance(want, dict):
        for key in want:
            assert key in got, f"{at}: no {key} (gobatch has {sorted(got)})"
            check_same(got[key], want[key], f"{at}.{key}")
        return
    g, w = np.asarray(got), np.asarray(want)
    if at.endswith("nwp_init_time_utc") and w.ndim == 1:
        # ocf gives one init time per location when one run covers the window; gobatch always
        # gives one per step (docs/OCF.md, "Not yet matched")
        w = np.broadcast_to(w[:, None], g.shape)
    assert g.shape == w.shape, (at, g.shape, w.shape)
    if g.dtype == np.float32 and w.dtype == np.float64:
        w = w.astype(np.float32)
    if g.dtype.kind in "US":
        assert g.tolist() == w.tolist(), at
    else:
        np.testing.assert_array_equal(g, w, err_msg=at)


def test_concurrent_samples_as_ocf(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An epoch of concurrent batches is every t0 of PVNetConcurrentDataset once, each batch its
    sample of that t0: every location in order, every key and value."""
    batches = one_epoch(root, monkeypatch, "nosat.yaml")
    t0s = [float(b["t0"][0]) for b in batches]
    for b in batches:
        assert np.all(b["t0"] == b["t0"][0]) and b["location_id"].tolist() == SITE_IDS
    ref = run_ocf(_CONCURRENT_SCRIPT, ["nosat.yaml"], root, t0s)
    assert ref["opened"] and not ref["failed"], ref["failed"]
    assert len(batches) == ref["len"] and sorted(t0s) == sorted(ref["t0s"]), (t0s, ref["t0s"])
    for b, sample, t0 in zip(batches, ref["samples"], t0s):
        check_same(b, decode({"dict": sample}), f"t0 {t0}")


def test_concurrent_leaves_out_what_ocf_cannot_sample(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The edge site: ocf-data-sampler's PVNetConcurrentDataset cannot even be made (its crop of
    every location's extent leaves the satellite); gobatch's batches hold the other sites, each
    row ocf's PVNetDataset sample of its pair."""
    batches = one_epoch(root, monkeypatch, "pvnet.yaml")
    want_ids = [i for i in SITE_IDS if i != EDGE_ID]
    assert all(b["location_id"].tolist() == want_ids for b in batches)
    ref = run_ocf(_CONCURRENT_SCRIPT, ["pvnet.yaml"], root, [float(batches[0]["t0"][0])])
    assert not ref["opened"] and "not available" in ref["failed"], ref
    assert_batches_are_ocf_samples(root, batches[:3], "pvnet.yaml")
