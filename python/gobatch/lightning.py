"""A LightningDataModule over gobatch Loaders (``pip install lightning``; optional: importing
this module is the only thing that needs Lightning).

    from gobatch.lightning import GobatchDataModule
    dm = GobatchDataModule("nowcast.toml", data_root="data", t0_end="2021-06-20",
                           val_t0_start="2021-06-21", val_t0_end="2021-06-30")
    trainer.fit(model, datamodule=dm)          # resume: trainer.fit(..., ckpt_path=...)

The training loader runs the configuration's stream (with ``[batch] order = "epochs"``, one
epoch per Lightning epoch); the validation loader, when ``val_t0_start``/``val_t0_end`` are
given, runs epoch 0 of ``order = "epochs"`` over that t0 range at every validation, so each
validation sees the same batches. The data module's :meth:`~GobatchDataModule.state_dict` is
the training loader's position, which Lightning saves in its checkpoints and gives back on
resume: a resumed fit continues at exactly the batch after the last one the model received
(Lightning fetches one batch ahead; that one is not counted as received)."""

from __future__ import annotations

from typing import Any, Dict, Iterator, Mapping, Optional

try:
    import lightning.pytorch as pl
except ImportError:  # the standalone package
    try:
        import pytorch_lightning as pl  # type: ignore[no-redef]
    except ImportError:
        raise ImportError("gobatch.lightning needs Lightning: pip install lightning") from None

from torch.utils.data import DataLoader, IterableDataset

from ._batch_options import TimeLike
from ._config import ORDER_EPOCHS, ConfigLike
from ._loader import Loader

__all__ = ["GobatchDataModule"]


class _Counted(IterableDataset):  # type: ignore[type-arg]
    """The training Loader as the DataLoader's dataset, counting the batches taken from it that
    the model has not received yet (Lightning's fetcher runs one ahead)."""

    def __init__(self, loader: Loader) -> None:
        self.loader = loader
        self.ahead = 0
        self._it: Optional[Iterator[Any]] = None

    def __iter__(self) -> "_Counted":
        self._it, self.ahead = iter(self.loader), 0
        return self

    def __next__(self) -> Any:
        assert self._it is not None
        batch = next(self._it)
        self.ahead += 1
        return batch

    def __len__(self) -> int:
        return len(self.loader)


class _FirstEpoch(IterableDataset):  # type: ignore[type-arg]
    """The validation Loader: each iteration is its epoch 0 from the start."""

    def __init__(self, loader: Loader) -> None:
        self.loader = loader

    def __iter__(self) -> Iterator[Any]:
        self.loader.set_epoch(0)
        return iter(self.loader)

    def __len__(self) -> int:
        return len(self.loader)


class GobatchDataModule(pl.LightningDataModule):
    """Training and validation :class:`gobatch.Loader` s (``framework="torch"``) behind
    Lightning's DataLoaders (``batch_size=None``: gobatch makes the batches).

    Args:
        config: the configuration, as :class:`gobatch.Loader` takes it.
        val_t0_start, val_t0_end: the validation t0 range (either or both; neither: no
            validation loader).
        pin_memory: the DataLoaders' ``pin_memory``.
        loader_kwargs: further :class:`gobatch.Loader` keywords for both loaders (``data_root``,
            ``batch_size``, ``t0_start``/``t0_end`` of the training loader, ...).
    """

    def __init__(self, config: ConfigLike, *, val_t0_start: Optional[TimeLike] = None,
                 val_t0_end: Optional[TimeLike] = None, pin_memory: bool = False, **loader_kwargs: Any) -> None:
        super().__init__()
        self.config = config
        self.val_range = (val_t0_start, val_t0_end)
        self.pin_memory = pin_memory
        self.loader_kwargs = loader_kwargs
        self.train_loader: Optional[Loader] = None
        self.val_loader: Optional[Loader] = None
        self._train: Optional[_Counted] = None
        self._pending: Optional[Mapping[str, Any]] = None  # a state loaded before setup()

    def setup(self, stage: str) -> None:
        """Starts the loaders (once)."""
        if self.train_loader is None:
            self.train_loader = Loader(self.config, framework="torch", **self.loader_kwargs)
            self._train = _Counted(self.train_loader)
            if self._pending is not None:
                self.train_loader.load_state_dict(self._pending)
                self._pending = None
        if self.val_loader is None and self.val_range != (None, None):
            kw = {k: v for k, v in self.loader_kwargs.items() if k not in ("t0_start", "t0_end", "order", "epoch")}
            self.val_loader = Loader(self.config, framework="torch", order=ORDER_EPOCHS, t0_start=self.val_range[0],
                                     t0_end=self.val_range[1], **kw)

    def train_dataloader(self) -> DataLoader:  # type: ignore[type-arg]
        assert self._train is not None, "setup() first"
        return DataLoader(self._train, batch_size=None, pin_memory=self.pin_memory)

    def val_dataloader(self) -> Any:
        if self.val_loader is None:
            return []
        return DataLoader(_FirstEpoch(self.val_loader), batch_size=None, pin_memory=self.pin_memory)

    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        """A training batch the model receives: no longer one ahead."""
        trainer = getattr(self, "trainer", None)
        if self._train is not None and trainer is not None and trainer.training and self._train.ahead > 0:
            self._train.ahead -= 1
        return batch

    def state_dict(self) -> Dict[str, Any]:
        """The training loader's :meth:`gobatch.Loader.state_dict` at the batch after the last
        one the model received."""
        if self.train_loader is None:
            return dict(self._pending or {})
        state = self.train_loader.state_dict()
        ahead = self._train.ahead if self._train is not None else 0
        if ahead:
            state["next_batch"] -= ahead
            if "epoch" in state:
                state["epoch"] = state["next_batch"] // state["epoch_batches"]
        return state

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Places the training loader at a saved position (now, or at setup())."""
        if self.train_loader is None:
            self._pending = dict(state_dict)
        else:
            self.train_loader.load_state_dict(state_dict)
            if self._train is not None:
                self._train.ahead = 0

    def teardown(self, stage: str) -> None:
        """Closes the loaders."""
        for loader in (self.train_loader, self.val_loader):
            if loader is not None:
                loader.close()
        self.train_loader = self.val_loader = self._train = None


