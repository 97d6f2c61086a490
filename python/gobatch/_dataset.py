"""A Loader as a PyTorch data component: ``torch.utils.data.DataLoader(loader, batch_size=None)``.

PyTorch's DataLoader takes a dataset as a stream only when it is an instance of
``torch.utils.data.IterableDataset`` (any other object is indexed). Importing torch costs seconds,
which numpy users of gobatch should not pay, so :class:`gobatch.Loader` is made an instance of a
subclass of both (named ``Loader`` too) only when torch is already imported when the Loader is
made, or the Loader is asked for torch tensors (``framework="torch"``, which imports it anyway).
A script that uses a DataLoader has imported torch by then."""

from __future__ import annotations

import sys
from typing import Any, Dict, Optional, Type

__all__ = ["loader_class"]

_classes: Dict[type, type] = {}


def loader_class(base: type, framework: Optional[str]) -> type:
    """``base`` (gobatch.Loader), or its IterableDataset subclass when torch is in use."""
    if framework != "torch" and "torch" not in sys.modules:
        return base
    cls = _classes.get(base)
    if cls is None:
        cls = _classes[base] = _iterable_dataset(base)
    return cls


def _iterable_dataset(base: type) -> Type[Any]:
    from torch.utils.data import IterableDataset

    # The Loader's own __iter__, __len__ and __reduce__ come first in the MRO.
    cls = type(base.__name__, (base, IterableDataset), {"__doc__": base.__doc__, "__module__": base.__module__})
    cls.__qualname__ = base.__qualname__
    return cls
