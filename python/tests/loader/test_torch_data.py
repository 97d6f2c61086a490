"""gobatch in PyTorch's own data components (issue 20): ``torch.utils.data.DataLoader(loader,
batch_size=None)`` over a Loader, and the GPU helpers' CPU fallback. Batches are checked value
by value against synthetic.expected, an independent formula of the batch index."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, IterableDataset  # noqa: E402

import gobatch  # noqa: E402
from synthetic import check_batch, config  # noqa: E402

pytestmark = pytest.mark.timeout(120)

SOURCES = {"x": ((3, 5), "float32"), "y": ((2,), "int64")}


@pytest.mark.parametrize("framework", ["numpy", "torch"])
@pytest.mark.parametrize("pin_memory", [False, True])
def test_dataloader_yields_the_loaders_batches_in_order(framework, pin_memory):
    cfg = config(SOURCES, size=4, batches=11, slots=3)
    with gobatch.Loader(cfg, framework=framework) as loader:
        assert isinstance(loader, IterableDataset) and isinstance(loader, gobatch.Loader)
        dl = DataLoader(loader, batch_size=None, num_workers=0, pin_memory=pin_memory)
        assert len(dl) == len(loader) == 11
        k = 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # pin_memory without an accelerator
            for batch in dl:
                assert set(batch) == set(SOURCES)
                assert all(isinstance(t, torch.Tensor) for t in batch.values())
                check_batch(batch, cfg, k)
                batch["x"].sub_(1.0).div_(2.0)  # in-place normalisation, as training scripts do
                k += 1
        assert k == 11


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    pytest.importorskip("xarray")
    from nowcast_ref import generated_nowcast

    with generated_nowcast(tmp_path_factory.mktemp("nowcast"), "torchdata", days=0.5, pixels=128, seed=5) as out:
        yield out


@pytest.fixture(scope="module")
def t0s(data):
    """The t0 candidates (unix seconds) by the independent reference, sorted."""
    from nowcast_ref import NowcastReference
    from test_sampler_loader import preset, source

    cfg = preset()
    ref = NowcastReference(data, sat_channels=source(cfg, "satellite").get("channels"),
                           nwp_variables=source(cfg, "nwp").get("channels"))
    return sorted(int(v) for v in ref.sat_time[ref.valid_t0_indices()].astype("datetime64[s]").astype(np.int64))


def iso(t: int) -> str:
    return str(np.datetime64(t, "s")) + "Z"


def epochs_cfg():
    from test_epochs import epochs_cfg as cfg  # the nowcast preset with order = "epochs"

    return cfg()


def test_dataloader_over_epochs_runs_each_epoch(data, t0s):
    """With epochs each iteration of the DataLoader is one epoch of len(loader) batches, every
    candidate at most once, a new permutation each epoch."""
    with gobatch.Loader(epochs_cfg(), data_root=str(data), framework="torch") as loader:
        n = len(loader)
        dl = DataLoader(loader, batch_size=None)
        assert len(dl) == n > 0
        seen = []
        for _ in range(2):
            epoch = [t for b in dl for t in b["t0"].tolist()]
            assert len(epoch) == n * loader.batch_size and len(set(epoch)) == len(epoch)
            assert set(epoch) <= set(t0s)
            seen.append(epoch)
        assert seen[0] != seen[1]


def test_lightning_fit_validate_and_resume(data, t0s, tmp_path):
    """A tiny model trained with GobatchDataModule: training batches from the training t0 range,
    validation from its own; a fit resumed from a mid-epoch checkpoint receives exactly the
    batches the uninterrupted fit received after that step."""
    pl = pytest.importorskip("lightning.pytorch")
    from gobatch.lightning import GobatchDataModule

    mid = len(t0s) // 2
    train_end, val_start = iso(t0s[mid - 1]), iso(t0s[mid])

    class Tiny(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(1, 1)
            self.train_t0 = []
            self.val_t0 = []

        def training_step(self, batch, idx):
            self.train_t0.append(batch["t0"].tolist())
            x = torch.nan_to_num(batch["satellite"].float()).flatten(1).mean(1, keepdim=True)
            x.sub_(x.mean())  # in place, on a batch tensor's result
            return self.lin(x).pow(2).mean()

        def validation_step(self, batch, idx):
            self.val_t0.append(batch["t0"].tolist())

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    def fit(max_epochs, ckpt_path=None, callbacks=()):
        dm = GobatchDataModule(epochs_cfg(), data_root=str(data), t0_end=train_end, val_t0_start=val_start)
        model = Tiny()
        trainer = pl.Trainer(max_epochs=max_epochs, accelerator="cpu", logger=False, enable_progress_bar=False,
                             enable_model_summary=False, num_sanity_val_steps=0, callbacks=list(callbacks),
                             enable_checkpointing=bool(callbacks), default_root_dir=str(tmp_path))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Lightning's advice on workers and mid-epoch resumes
            trainer.fit(model, datamodule=dm, ckpt_path=ckpt_path)
        return model

    ckpt = pl.callbacks.ModelCheckpoint(dirpath=str(tmp_path / "ck"), every_n_train_steps=2, save_top_k=-1)
    full = fit(2, callbacks=[ckpt])
    per_epoch = len(full.train_t0) // 2
    assert per_epoch >= 3
    flat = [t for b in full.train_t0 for t in b]
    assert max(flat) <= t0s[mid - 1]  # the training range only
    assert set(flat[:len(flat) // 2]) != set() and full.train_t0[:per_epoch] != full.train_t0[per_epoch:]
    val = [t for b in full.val_t0 for t in b]
    assert val and min(val) >= t0s[mid]  # the validation range only
    assert full.val_t0[:len(full.val_t0) // 2] == full.val_t0[len(full.val_t0) // 2:]  # the same each time
    resumed = fit(2, ckpt_path=str(tmp_path / "ck" / "epoch=0-step=2.ckpt"))
    assert resumed.train_t0 == full.train_t0[2:]


def test_numpy_users_do_not_import_torch():
    """A numpy-only script never pays torch's import: a Loader made before torch is imported
    is a plain Loader."""
    import subprocess
    import sys

    code = ("import sys, gobatch; from synthetic import config; "
            "l = gobatch.Loader(config({'y': ((2,), 'int64')}, batches=2)); next(l); l.close(); "
            "print('torch' in sys.modules, type(l).__mro__[1].__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=str(__import__("pathlib").Path(__file__).parents[1]))  # the helper modules
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "object"]


# ---- GPU: pinned rings and copies that hold their slot ----


def test_pin_memory_without_cuda_warns_at_the_users_line_and_changes_nothing():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: see test_pin_memory_and_cuda_batches_on_a_gpu")
    cfg = config(SOURCES, size=4, batches=6, slots=3)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        loader = gobatch.Loader(cfg, framework="torch", pin_memory=True)
    with loader:
        warned = [w for w in got if issubclass(w.category, gobatch.GobatchWarning)]
        assert len(warned) == 1 and "pin_memory=True does nothing here: no CUDA device" in str(warned[0].message)
        assert warned[0].filename == __file__
        assert not loader.pinned
        for k, batch in enumerate(loader):
            check_batch(batch, cfg, k)


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_cuda_batches_on_the_cpu_yields_the_batches_in_order(framework):
    cfg = config(SOURCES, size=4, batches=9, slots=2)
    with gobatch.Loader(cfg, framework=framework) as loader:
        k = 0
        for batch in gobatch.cuda_batches(loader, "cpu"):
            assert all(isinstance(t, torch.Tensor) for t in batch.values())
            check_batch(batch, cfg, k)
            k += 1
        assert k == 9


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_pin_memory_and_cuda_batches_on_a_gpu():
    cfg = config(SOURCES, size=4, batches=40, slots=4)
    with gobatch.Loader(cfg, framework="torch", pin_memory=True) as loader:
        assert loader.pinned
        k = 0
        for batch in gobatch.cuda_batches(loader, "cuda"):
            assert all(t.is_cuda for t in batch.values())
            check_batch({n: t.cpu() for n, t in batch.items()}, cfg, k)
            k += 1
        assert k == 40
