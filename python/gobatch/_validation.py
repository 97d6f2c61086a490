"""A validation set the PVNet way: a fixed, seeded order of every sample of a period, indexable
(``len``, ``[i]``) and iterable as batches, decoded once.

PVNet validates on ``Subset(PVNetDataset(config, time_periods=val_periods), permutation)``
through a DataLoader without shuffling or drop_last, and its LightningModule indexes
``trainer.val_dataloaders.dataset[i]`` at the start of every validation to plot forecasts. A
stream of batches cannot be indexed, so :class:`ValidationSet` keeps what it delivers: it reads
epoch 0 of the configuration's sample space (``order="epochs"``, ``drop_last=False``: every
sample once, in the seed's order) from one ``shmloader`` child, batch by batch as far as it is
asked for, and writes each batch's rows once into files in a scratch directory (one ``.npy``
per tensor, memory-mapped). Every later read, ``[i]`` or a batch of a later validation epoch,
is read from those files (the page cache), never decoded again; the child exits once the
epoch has been read to its end.

Unlike a :class:`gobatch.Loader`'s batches, a validation batch is not a view of a ring slot:
it is a view of the scratch files, which the set owns until :meth:`ValidationSet.close`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ._batch_options import TimeLike
from ._config import ConfigLike
from ._loader import Loader
from ._view import Key, _put
from .errors import LoaderError

__all__ = ["ValidationSet", "ValidationLoader"]



class ValidationSet:
    """Every sample of ``config`` within ``time_periods`` (or ``t0_start`` .. ``t0_end``), in
    one order fixed by ``seed``: a map-style dataset (``len`` is the number of samples, as
    ``len(PVNetDataset(config, time_periods=...))`` for an ocf-data-sampler YAML; ``[i]`` is
    sample ``i`` as one unbatched nested dict of NumPy arrays, as ``PVNetDataset[i]`` gives
    it), and :meth:`loader` its batches in that order (the last one smaller), for a trainer's
    validation.

    Nothing is decoded twice: the rows delivered are kept in memory-mapped files under
    ``cache_dir`` (default: the system's temporary directory), at most the set's size in
    bytes, removed at :meth:`close` (or when the set is collected). ``[i]`` reads batches up to
    ``i``'s first; a validation run limited to its first batches never reads the rest.

    Args:
        config: as :class:`gobatch.Loader`'s (a TOML path, an ocf-data-sampler YAML path, a
            dict).
        batch_size: samples per batch of :meth:`loader` (and of the reads behind ``[i]``).
        seed: the order of the samples (epoch 0 of ``order="epochs"`` with this seed).
        time_periods, t0_start, t0_end: the validation period(s), as the Loader's.
        framework: ``"numpy"`` or ``"torch"`` (tensors sharing the files' memory) for
            :meth:`loader`'s batches; ``[i]`` is NumPy, as ocf-data-sampler's samples are.
        cache_dir: where the scratch directory is made.
        loader_kwargs: passed to the :class:`gobatch.Loader` that reads the samples
            (``data_root``, ``cache_mb``, ``readers``, ``shmloader``, ...); it always runs one
            rank (every rank of a data-parallel job gets the whole set).
    """

    def __init__(self, config: ConfigLike, *, batch_size: int, seed: int = 0,
                 time_periods: Optional[Sequence[Tuple[Optional[TimeLike], Optional[TimeLike]]]] = None,
                 t0_start: Optional[TimeLike] = None, t0_end: Optional[TimeLike] = None, framework: str = "torch",
                 cache_dir: Optional[Union[str, "os.PathLike[str]"]] = None, **loader_kwargs: Any) -> None:
        for key in ("order", "drop_last", "rank", "world_size", "node", "start", "epoch", "framework"):
            if key in loader_kwargs:
                raise TypeError(f"ValidationSet sets {key} itself; it cannot be given")
        self._framework = framework
        self._loader: Optional[Loader] = Loader(
            config, batch_size=batch_size, seed=seed, order="epochs", drop_last=False, time_periods=time_periods,
            t0_start=t0_start, t0_end=t0_end, framework="numpy", rank=0, world_size=1, node=False, **loader_kwargs)
        self._it: Optional[Iterator[Any]] = iter(self._loader)
        self._size = self._loader.batch_size
        self._batches = len(self._loader)
        self._samples = int(self._loader._ring.description.samples or 0)
        self._constants: Dict[Key, Any] = dict(self._loader._ring.description.view.constants)
        self._dir: Optional[str] = tempfile.mkdtemp(prefix="gobatch-val-", dir=cache_dir)
        self._rows: Dict[Key, np.ndarray] = {}  # leaf path -> (samples, ...) memory-mapped rows
        self._order: List[Key] = []  # the leaves in the batch's order (nesting rebuilt from them)
        self._read = 0  # batches kept so far

    # ---- the map-style dataset ----

    def __len__(self) -> int:
        """The number of samples (every one of the period's, once)."""
        return self._samples

    def __getitem__(self, i: int) -> Dict[str, Any]:
        """Sample ``i`` (negative counts from the end): the nested dict of a batch row, NumPy
        arrays copied out of the files, the description's constants (channel names,
        ``t0_idx``) as they are."""
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"ValidationSet indices are ints, not {type(i).__name__}")
        n = self._samples
        k = int(i) + n if i < 0 else int(i)
        if not 0 <= k < n:
            raise IndexError(f"sample {i} of a validation set of {n}")
        self._read_to(k // self._size + 1)
        return self._nest(lambda rows: np.array(rows[k]))

    # ---- batches ----

    @property
    def batch_size(self) -> int:
        return self._size

    @property
    def batches(self) -> int:
        """Batches of one pass, the last one smaller when the samples do not fill it."""
        return self._batches

    @property
    def batches_kept(self) -> int:
        """Batches read from the child and kept so far (in order from the first)."""
        return self._read

    @property
    def decoding(self) -> bool:
        """Whether the child that reads the samples still runs (False once every batch is kept)."""
        return self._loader is not None

    def loader(self) -> "ValidationLoader":
        """The set's batches in order, re-iterable (each pass the same batches), with
        ``.dataset`` this set, as ``trainer.val_dataloaders`` is for PVNet."""
        return ValidationLoader(self)

    def batch(self, b: int) -> Dict[str, Any]:
        """Batch ``b`` of a pass, as views of the files (tensors with ``framework="torch"``)."""
        if not 0 <= b < self._batches:
            raise IndexError(f"batch {b} of {self._batches}")
        self._read_to(b + 1)
        lo, hi = b * self._size, min((b + 1) * self._size, self._samples)
        if self._framework == "torch":
            import torch
            return self._nest(lambda rows: torch.from_numpy(rows[lo:hi]))
        return self._nest(lambda rows: rows[lo:hi])

    # ---- reading and keeping ----

    def _read_to(self, batches: int) -> None:
        """Keeps the first ``batches`` batches (reads those not yet kept)."""
        while self._read < batches:
            if self._it is None:
                raise LoaderError("the validation set is closed: nothing more can be read from it")
            batch = next(self._it)
            try:
                self._keep(batch)
            finally:
                batch.release()
            self._read += 1
            if self._read == self._batches:  # every sample kept: the child has nothing left to do
                self._stop()

    def _keep(self, batch: Mapping[str, Any]) -> None:
        lo = self._read * self._size
        for key, value in _leaves(batch):
            if key in self._constants:
                continue
            rows = self._rows.get(key)
            if rows is None:
                rows = self._new_rows(key, value)
            rows[lo:lo + len(value)] = value

    def _new_rows(self, key: Key, value: np.ndarray) -> np.ndarray:
        assert self._dir is not None
        path = os.path.join(self._dir, f"{len(self._order)}.npy")
        rows = np.lib.format.open_memmap(path, mode="w+", dtype=value.dtype, shape=(self._samples, *value.shape[1:]))
        self._rows[key] = rows
        self._order.append(key)
        return rows

    def _nest(self, take: Any) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for key in self._order:
            _put(out, key, take(self._rows[key]))
        for key, value in self._constants.items():
            _put(out, key, value)
        return out

    # ---- closing ----

    def _stop(self) -> None:
        loader, self._loader, self._it = self._loader, None, None
        if loader is not None:
            loader.close()

    def close(self) -> None:
        """Stops the child (if it still runs) and removes the files. Arrays taken from the set
        stay readable (their mappings outlive the files' names); nothing more can be read."""
        self._stop()
        self._it = None
        d, self._dir = self._dir, None
        self._rows.clear()
        if d is not None:
            shutil.rmtree(d, ignore_errors=True)

    def __enter__(self) -> "ValidationSet":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"ValidationSet({self._samples} samples, {self._read} of {self._batches} batches kept)"


class ValidationLoader:
    """A :class:`ValidationSet`'s batches, in order, as often as it is iterated; ``len`` is the
    batches of a pass and ``dataset`` the set (PVNet's LightningModule indexes it)."""

    def __init__(self, dataset: ValidationSet) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return self.dataset.batches

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        for b in range(self.dataset.batches):
            yield self.dataset.batch(b)


def _leaves(node: Mapping[str, Any], path: Key = ()) -> Iterator[Tuple[Key, Any]]:
    for key, value in node.items():
        if isinstance(value, Mapping):
            yield from _leaves(value, path + (key,))
        else:
            yield path + (key,), value
