"""Validation the PVNet way (issue 27): :class:`gobatch.ValidationSet` is every (t0, location)
pair of a validation period once, in a seeded order, indexable and iterable, decoded once.

The reference is ocf-data-sampler 1.0.24 itself (a child process): ``len(PVNetDataset(config,
time_periods=...))`` and its pairs (``valid_t0_and_location_ids``), and ``get_sample`` of every
pair gobatch delivers, value for value (test_ocf_layout's comparison, on its stores).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

import gobatch
from ocf_reference import run_ocf
from test_ocf_layout import CONFIG, EDGE_ID, assert_batches_are_ocf_samples, write_stores

pytestmark = pytest.mark.timeout(300)

_PAIRS_SCRIPT = """
import json, sys
try:
    from ocf_data_sampler.torch_datasets.pvnet_dataset import PVNetDataset
except ImportError as e:
    print(json.dumps({"missing": str(e)})); sys.exit(0)
periods = json.loads(sys.stdin.read())
ds = PVNetDataset(sys.argv[1], time_periods=[tuple(p) for p in periods])
pairs = []
for i in range(len(ds)):  # the pair of every index, as __getitem__ finds it
    if ds.complete_generation:
        n = len(ds.valid_t0_times)
        t0, loc = ds.valid_t0_times[i % n], int(ds.locations[i // n].id)
    else:
        t0, loc = ds.valid_t0_and_location_ids.iloc[i]
    pairs.append([t0.timestamp(), int(loc)])
print(json.dumps({"len": len(ds), "pairs": pairs}))
"""

SIZE = 3


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    r = tmp_path_factory.mktemp("ocfval")
    write_stores(r)
    (r / "pvnet.yaml").write_text(CONFIG)
    return r


def rows(batches: List[Dict[str, Any]]) -> List[Tuple[float, int]]:
    return [(float(t), int(i)) for b in batches for t, i in zip(b["t0"], b["location_id"])]


def same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return np.array_equal(np.asarray(a), np.asarray(b))


def test_every_pair_of_the_period_once_as_ocf(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(root)
    periods = [["2024-02-28T06:30", "2024-02-28T07:30"], ["2024-02-28T08:00", None]]
    ref = run_ocf(_PAIRS_SCRIPT, ["pvnet.yaml"], root, periods)
    with gobatch.ValidationSet("pvnet.yaml", batch_size=SIZE, seed=3, time_periods=periods,
                               framework="numpy") as vs:
        scratch = Path(vs._dir)
        # ocf's pairs, but those of the site whose crop leaves the satellite: ocf's get_sample
        # raises for them (checked below), gobatch leaves the site out
        want = sorted((float(t), int(i)) for t, i in ref["pairs"] if i != EDGE_ID)
        assert ref["len"] == len(ref["pairs"]) > len(want) and len(vs) == len(want) and len(vs) % SIZE, (len(vs), ref["len"])
        first = vs[0]  # before any pass: only the first batch is read
        assert vs.batches_kept == 1 and vs.decoding
        passes = [list(vs.loader()) for _ in range(2)]
        assert not vs.decoding, "the child still runs after every sample was kept"
        assert len(passes[0]) == len(vs.loader()) == -(-len(vs) // SIZE)
        assert len(passes[0][-1]["t0"]) == len(vs) % SIZE
        got = rows(passes[0])
        assert sorted(got) == want, "not ocf's pairs"
        assert len(set(got)) == len(got)
        assert same(passes[0], passes[1]), "a second validation pass differs"
        # [i] is row i of the pass, unbatched; the constants as a batch has them
        k = len(vs) - 1
        last = vs[-1]
        assert same(last, vs[k]) and float(last["t0"]) == got[k][0] and int(last["location_id"]) == got[k][1]
        assert same(first, {**vs[0]}) and first["nwp"]["ukv"]["nwp_channel_names"].tolist() == ["t", "dswrf"]
        assert first["satellite_actual"].shape == passes[0][0]["satellite_actual"].shape[1:]
        with pytest.raises(IndexError):
            vs[len(vs)]
        assert_batches_are_ocf_samples(root, passes[0], "pvnet.yaml")
    assert not scratch.exists(), "the scratch files outlive the set"


def test_pvnet_collates_its_samples(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PVNet's LightningModule plots ``collate_fn([val_dataset[i] for i in idxs])``: the samples
    collate, with PVNet's own collate function, into the set's batch of those rows (tensors)."""
    collate = pytest.importorskip("pvnet.datamodule").collate_fn
    torch = pytest.importorskip("torch")
    monkeypatch.chdir(root)
    with gobatch.ValidationSet("pvnet.yaml", batch_size=SIZE, seed=3, framework="torch") as vs:
        batch = collate([vs[i] for i in range(SIZE)])
        want = vs.batch(0)

        def check(a: Any, b: Any, at: str) -> None:
            if isinstance(a, dict):
                assert a.keys() == b.keys(), at
                for key in a:
                    check(a[key], b[key], f"{at}.{key}")
            elif isinstance(b, torch.Tensor):
                assert isinstance(a, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), at
            else:
                assert np.array_equal(np.asarray(a), np.asarray(b)), at

        check(batch, want, "batch")
