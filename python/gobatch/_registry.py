"""The ring's producer registry (PROTOCOL.md 2.6), read from the consumer's mapping: the one
place in Python that decodes its entries (the stall warning's producer states, the Loader's
check that its child registered, the supervisor's claims of a dead child)."""

from __future__ import annotations

import struct
from typing import List, NamedTuple, Optional, Sequence

from . import _protocol as _proto

__all__ = ["Producer", "live"]


class Producer(NamedTuple):
    """One CLAIMING or ACTIVE registry entry."""

    entry: int  # its index in the registry
    generation: int  # bumped on each reuse of the entry
    pid: int
    starttime: int  # field 22 of /proc/<pid>/stat, 0 while CLAIMING
    batches: int  # batches it has written


def live(mm: Optional[Sequence[int]]) -> List[Producer]:
    """Every CLAIMING or ACTIVE entry that names a process, in entry order ([] without a mapping)."""
    if mm is None:
        return []
    f = _proto.REGISTRY_FIELDS
    out = []
    for e in range(_proto.MAX_PRODUCERS):
        base = _proto.REGISTRY_BASE + e * _proto.REGISTRY_STRIDE
        (state,) = struct.unpack_from(f["state"][1], mm, base + f["state"][0])
        if state not in (_proto.ENTRY_CLAIMING, _proto.ENTRY_ACTIVE):
            continue
        (pid,) = struct.unpack_from(f["pid"][1], mm, base + f["pid"][0])
        if not pid:
            continue
        (gen,) = struct.unpack_from(f["generation"][1], mm, base + f["generation"][0])
        (start,) = struct.unpack_from(f["starttime"][1], mm, base + f["starttime"][0])
        (batches,) = struct.unpack_from(f["batches"][1], mm, base + f["batches"][0])
        out.append(Producer(e, int(gen), int(pid), int(start), int(batches)))
    return out
