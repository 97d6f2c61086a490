"""Shared fixtures for gobatch's Python tests (real processes, real /dev/shm)."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Iterator

import pytest

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))  # test helper modules (fakering, ...)


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
