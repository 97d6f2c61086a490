"""Shared fixtures for gobatch's Python tests (real processes, real /dev/shm)."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Iterator

import pytest

# The tests live in a folder per part of gobatch they test (ring/, loader/, node/, sampler/,
# zarr/, ocf/, faults/); the helper modules they share (synthetic, fakering, ...) here. Test
# modules also borrow each other's fixtures and references across folders (``from
# test_sampler_loader import preset``): every folder is on the path, and the module names stay
# unique across them.
TESTS = Path(__file__).resolve().parent
for _d in [TESTS, *sorted(p for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))]:
    if str(_d) not in sys.path:
        sys.path.insert(0, str(_d))


@pytest.fixture
def ring_name() -> Iterator[str]:
    """A unique ring name; /dev/shm/gobatch-<name> is removed after the test if still there."""
    name = f"test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    yield name
    try:
        os.unlink(f"/dev/shm/gobatch-{name}")
    except FileNotFoundError:
        pass


@pytest.fixture
def memfd() -> Iterator[int]:
    """An empty memfd, closed after the test."""
    fd = os.memfd_create("gobatch-test", os.MFD_CLOEXEC)
    yield fd
    os.close(fd)
