"""What every fault trial file (tests/faults/test_faults_*.py) shares: the repetition count, the FAULT
line of a finished trial, and the trial's ring directory.

``make faults`` runs each trial through tools/faultns.py, in a mount namespace of its own with
a private tmpfs on /dev/shm (GOBATCH_PRIVATE_SHM=/dev/shm); there the `shm` fixture is /dev/shm
itself, elsewhere a private GOBATCH_SHM_DIR. Either way it must be empty after the trial."""

from __future__ import annotations

import os
from pathlib import Path
import struct
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from gobatch import _protocol as proto

REPS = max(int(os.environ.get("GOBATCH_FAULT_REPS", "1") or 1), 1)
_tally: Dict[str, List[float]] = {}


def record(name: str, latency: float, verdict: str = "detected") -> None:
    """Counts one repetition of trial name; after the last one prints its FAULT line with the
    worst latency."""
    _tally.setdefault(name, []).append(latency)
    got = _tally[name]
    if len(got) == REPS:
        print(f"\nFAULT {name:<48} {len(got)}/{REPS} {verdict}, worst {1000 * max(got):.0f} ms")


@pytest.fixture
def shm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The trial's ring directory, with no failpoint armed; asserted empty afterwards."""
    if os.environ.get("GOBATCH_PRIVATE_SHM") == "/dev/shm":
        d = Path("/dev/shm")
        assert list(d.iterdir()) == [], "the trial's private /dev/shm is not empty"
        monkeypatch.delenv("GOBATCH_SHM_DIR", raising=False)
    else:
        d = tmp_path / "shm"
        d.mkdir()
        monkeypatch.setenv("GOBATCH_SHM_DIR", str(d))
    monkeypatch.delenv("GOBATCH_FAILPOINT", raising=False)
    yield d
    assert list(d.iterdir()) == [], f"left behind: {list(d.iterdir())}"


def registry(ring: Any) -> List[Tuple[int, str]]:
    """(pid, state name) of every registry entry of an attached gobatch.Ring that is not FREE,
    in entry order (PROTOCOL.md 2.6), read from the ring's mapping."""
    mm = ring._mm
    assert mm is not None
    f = proto.REGISTRY_FIELDS
    names = {getattr(proto, n): n[len("ENTRY_"):] for n in dir(proto) if n.startswith("ENTRY_") and isinstance(getattr(proto, n), int)}
    out = []
    for e in range(proto.MAX_PRODUCERS):
        base = proto.REGISTRY_BASE + e * proto.REGISTRY_STRIDE
        (st,) = struct.unpack_from(f["state"][1], mm, base + f["state"][0])
        (pid,) = struct.unpack_from(f["pid"][1], mm, base + f["pid"][0])
        if st != proto.ENTRY_FREE:
            out.append((int(pid), names.get(int(st), str(st))))
    return out
