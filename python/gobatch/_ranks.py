"""Where a Loader sits among the data-parallel ranks: its arguments, else torchrun's environment
(``RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``), and inside a torch DataLoader
worker that worker's share of its rank's share."""

from __future__ import annotations

import os
import sys
from typing import NamedTuple, Optional, Tuple

__all__ = ["Placement", "env_int", "placement"]


def env_int(name: str, default: int) -> int:
    """The integer in environment variable ``name``, or ``default`` when unset or empty."""
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name}={value!r} is not an integer") from None


def _dataloader_worker() -> Optional[Tuple[int, int]]:
    """(worker id, number of workers) inside a torch DataLoader worker process, else None. Only
    a process that has imported torch.utils.data can be one: nothing is imported here."""
    data = sys.modules.get("torch.utils.data")
    info = getattr(data, "get_worker_info", lambda: None)() if data is not None else None
    if info is None:
        return None
    return int(info.id), int(info.num_workers)


class Placement(NamedTuple):
    rank: int  # this loader's rank of world_size (a DataLoader worker's, inside one)
    world_size: int
    in_worker: bool  # inside a torch DataLoader worker process


def placement(rank: Optional[int], world_size: Optional[int]) -> Placement:
    """The rank and world size of a Loader given ``rank`` and ``world_size`` (None: torchrun's
    ``RANK`` and ``WORLD_SIZE``, else 0 of 1), checked. Worker ``w`` of ``W`` on rank ``r`` of
    ``n`` is rank ``r * W + w`` of ``n * W``."""
    rank = env_int("RANK", 0) if rank is None else rank
    world_size = env_int("WORLD_SIZE", 1) if world_size is None else world_size
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a positive int, not {world_size!r}")
    if not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(f"rank must be an int in [0, world_size={world_size}), not {rank!r}")
    worker = _dataloader_worker()
    if worker is None:
        return Placement(rank, world_size, False)
    worker_id, workers = worker
    return Placement(rank * workers + worker_id, world_size * workers, True)
