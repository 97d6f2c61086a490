"""PVNet 5.3's own multimodal model trains from gobatch batches on an ocf-data-sampler YAML
(issue 18, item 4): examples/pvnet_train.py runs a few Lightning steps from
``gobatch.Loader(yaml, batch_size=4, order="epochs", framework="torch")``, and its first-step
loss equals the loss of the same model, with the same weights, on ocf-data-sampler 1.0.24's
samples for the same (t0, location_id) pairs, collated by PVNet's own collate function
(``stack_np_samples_into_batch`` then ``batch_to_tensor``).

The reference samples come from ``PVNetDataset(yaml).get_sample(t0, location_id)`` in a child
process (pyaml_env changes PyYAML's SafeLoader for the whole process), as test_ocf_values.py
does. The stores are written with xarray in ocf-data-sampler's layouts (ocf_stores.py).
"""

from __future__ import annotations

import importlib.util
import math
import pickle
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from ocf_stores import write_pvnet_stores

pytestmark = pytest.mark.timeout(600)

pytest.importorskip("pvnet", reason="pvnet 5.3 is not installed (python/requirements-dev.txt)")
torch = pytest.importorskip("torch")

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "pvnet_train.py"
BATCH = 4

_REF_SCRIPT = """
import pickle, sys
import pandas as pd
from ocf_data_sampler.torch_datasets.pvnet_dataset import PVNetDataset
ds = PVNetDataset(sys.argv[1])
pairs = pickle.loads(sys.stdin.buffer.read())
samples = [ds.get_sample(pd.Timestamp(t0, unit="s"), loc) for t0, loc in pairs]
with open(sys.argv[2], "wb") as f:
    pickle.dump(samples, f)
"""


def example() -> ModuleType:
    """examples/pvnet_train.py as a module."""
    spec = importlib.util.spec_from_file_location("pvnet_train", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    r = tmp_path_factory.mktemp("pvnet")
    write_pvnet_stores(r)
    return r


def pairs_of(batch: dict[str, Any]) -> list[tuple[int, int]]:
    """The (t0 in Unix seconds, location_id) of each row of a batch."""
    t0 = batch["t0"].double() if isinstance(batch["t0"], torch.Tensor) else torch.as_tensor(batch["t0"])
    return [(int(round(float(t))), int(loc)) for t, loc in zip(t0, batch["location_id"])]


def ocf_samples(root: Path, pairs: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """ocf-data-sampler's samples for ``pairs``."""
    out = root / "ocf_samples.pkl"
    r = subprocess.run([sys.executable, "-c", _REF_SCRIPT, "pvnet_config.yaml", str(out)], cwd=root,
                       input=pickle.dumps(pairs), capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    with open(out, "rb") as f:
        samples = pickle.load(f)
    assert [(int(s["t0"]), s["location_id"]) for s in samples] == pairs
    return samples


def ocf_loader(samples: list[dict[str, Any]]) -> Any:
    """The samples as one batch through a DataLoader with PVNet's collate function."""
    from pvnet.datamodule import collate_fn

    return torch.utils.data.DataLoader(samples, batch_size=len(samples), shuffle=False, collate_fn=collate_fn)


def model_inputs(batch: dict[str, Any]) -> dict[str, Any]:
    """The tensors PVNet's LateFusionModel and Lightning module read (pvnet 5.3
    late_fusion.py forward, lightning_module.py training_step), by path; None where missing."""
    paths = ["satellite_actual", "generation", "location_id", "solar_azimuth", "solar_elevation",
             "date_sin", "date_cos", "time_sin", "time_cos", "t0_embedding", "nwp/ukv/nwp"]
    out = {}
    for path in paths:
        v: Any = batch
        for part in path.split("/"):
            v = v.get(part) if isinstance(v, dict) else None
        out[path] = v
    return out


def differences(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """Each tensor PVNet reads that gobatch's batch lacks, shapes differently or holds other
    values than ocf-data-sampler's (beyond float32 rounding of ocf's float64)."""
    out = []
    for path, exp in model_inputs(want).items():
        assert exp is not None, f"ocf-data-sampler's batch has no {path}"
        g = model_inputs(got)[path]
        if g is None:
            out.append(f"{path}: missing (ocf: {tuple(exp.shape)} {exp.dtype})")
            continue
        if tuple(g.shape) != tuple(exp.shape):
            out.append(f"{path}: shape {tuple(g.shape)}, ocf {tuple(exp.shape)}")
            continue
        e = exp.numpy()
        e = e.astype(np.float32) if e.dtype == np.float64 else e
        a = g.numpy()
        if not np.allclose(a, e, rtol=2e-7, atol=2e-7):
            bad = ~np.isclose(a, e, rtol=2e-7, atol=2e-7)
            out.append(f"{path}: {int(bad.sum())} of {bad.size} values differ, largest by "
                       f"{float(np.max(np.abs(a.astype(np.float64) - e.astype(np.float64))[bad])):.3g}")
    return out


def first_gobatch_batch(ex: ModuleType) -> dict[str, Any]:
    with ex.gobatch_loader("pvnet_config.yaml", BATCH, seed=0) as loader:
        return ex._copy(next(iter(loader)))


def test_batch_holds_what_pvnet_reads_as_ocf(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every tensor PVNet's model and training step read is in gobatch's batch at ocf's path,
    with ocf's shape and values, for the batch's own (t0, location_id) pairs."""
    monkeypatch.chdir(root)
    ex = example()
    got = first_gobatch_batch(ex)
    pairs = pairs_of(got)
    assert len(pairs) == BATCH
    want = next(iter(ocf_loader(ocf_samples(root, pairs))))
    diff = differences(got, want)
    assert not diff, "gobatch's batch differs from ocf-data-sampler's in:\n  " + "\n  ".join(diff)


def test_first_step_loss_equals_ocf(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A few Lightning steps from gobatch batches; the first step's loss equals the same
    model's, with the same initial weights, on ocf-data-sampler's batch of the same pairs."""
    monkeypatch.chdir(root)
    ex = example()
    module = ex.pvnet_module("pvnet_config.yaml", seed=0)
    initial = {k: v.clone() for k, v in module.state_dict().items()}
    with ex.gobatch_loader("pvnet_config.yaml", BATCH, seed=0) as loader:
        steps = ex.train(module, loader, steps=3)
    assert len(steps.losses) == 3 and all(math.isfinite(v) for v in steps.losses), steps.losses
    trained = module.state_dict()
    assert any(not torch.equal(initial[k], trained[k]) for k in initial), "the steps changed no weight"

    samples = ocf_samples(root, pairs_of(steps.first_batch))
    reference = ex.pvnet_module("pvnet_config.yaml", seed=0)
    for k, v in reference.state_dict().items():
        assert torch.equal(v, initial[k]), f"the reference model's {k} differs from the trained model's start"
    ocf_steps = ex.train(reference, ocf_loader(samples), steps=1)
    assert steps.losses[0] == pytest.approx(ocf_steps.losses[0], rel=1e-5, abs=1e-7), (
        f"first-step loss on gobatch's batch {steps.losses[0]!r}, on ocf-data-sampler's {ocf_steps.losses[0]!r}")


def validate(module: Any, loader: Any) -> float:
    """PVNet's validation (its LightningModule's hooks, which index ``loader.dataset``) of
    ``module`` over ``loader``: the quantile loss, weighted by batch size over the whole set."""
    import lightning.pytorch as pl

    trainer = pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)
    return float(trainer.validate(module, dataloaders=loader, verbose=False)[0]["quantile_loss/val"])


def test_validation_equals_ocf(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PVNet validated on gobatch's validation set (every pair once, PVNet's hooks indexing it to
    plot) gives the validation loss it gives on PVNetDataset's validation loader (PVNet's
    datamodule's), the same model; a second validation decodes nothing and gives it again."""
    monkeypatch.chdir(root)
    ex = example()
    module = ex.pvnet_module("pvnet_config.yaml", seed=0)
    with ex.gobatch_validation("pvnet_config.yaml", BATCH, seed=0) as val:
        loader = val.loader()
        got = validate(module, loader)
        assert not val.decoding, "the whole set was read, yet its child still runs"
        assert validate(module, loader) == got
        n = len(val)
    ocf = ex.ocf_validation("pvnet_config.yaml", BATCH, seed=0)
    assert len(ocf.dataset) == n, (len(ocf.dataset), n)
    want = validate(module, ocf)
    assert got == pytest.approx(want, rel=1e-5, abs=1e-7), (got, want)


def test_trains_and_validates_without_ocf_datasets(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/pvnet_train.py's run with validation on gobatch alone: training steps and
    validations every 2 steps of the validation set's first 2 batches, all finite; the set is
    read only as far as PVNet indexes it (its plots' first 32 samples)."""
    monkeypatch.chdir(root)
    ex = example()
    module = ex.pvnet_module("pvnet_config.yaml", seed=0)
    with ex.gobatch_loader("pvnet_config.yaml", BATCH, seed=0) as loader, \
            ex.gobatch_validation("pvnet_config.yaml", BATCH, seed=1) as val:
        done = ex.train(module, loader, 4, val.loader(), val_every=2, val_batches=2)
        # PVNet's hooks plot its first 32 samples; nothing past them is read
        assert val.batches_kept == -(-32 // BATCH) < val.batches, (val.batches_kept, val.batches)
    assert len(done.losses) == 4 and len(done.val_losses) == 2, (done.losses, done.val_losses)
    assert all(math.isfinite(v) for v in done.losses + done.val_losses)
