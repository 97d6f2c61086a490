"""Fault trials: the node loader (``shmloader serve``) killed while its ranks read (issue 21).

2 and 4 local ranks (threads of this process, each a ``gobatch.Loader(node=True)``) read their
bounded streams while the node loader is killed with ``kill -9``: at a random moment, or by
itself at an exact producer state (GOBATCH_FAILPOINT, armed in the first node loader only).
Each rank must then find it dead, one of them start a new one (the kernel's bind at the socket
name elects it), and each rank's ring be joined by it: every rank receives every batch of its
stream exactly once, in order, every element equal to the synthetic contract at its global
index ``k * world_size + rank`` (tests/synthetic.py, independent of the producer's code), and
waits at most RECOVER_S for a batch after the death. Each rank warns once (the ``gobatch``
logger, thread-safe) for the restart. GOBATCH_FAULT_REPS repeats each trial (``make faults``);
each prints a FAULT line with its count, the worst time from the death to the replacement
joined, and the longest wait for a batch after the death (over every rank).
"""

from __future__ import annotations

import logging
import os
import random
import signal
import stat
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

import gobatch
from faultharness import REPS, shm  # noqa: F401  (shm is a fixture)
from synthetic import check_batch, config

pytestmark = pytest.mark.timeout(600)

RECOVER_S = 1.0
BATCHES = 300  # per rank
_tally: Dict[str, List[Tuple[float, float]]] = {}


def _cfg() -> Dict[str, Any]:
    return config({"a": ((3, 5), "float32"), "b": ((2,), "int64")}, size=4, batches=0, slots=4, delay_ms=1)


def _record(name: str, replaced: float, gap: float) -> None:
    _tally.setdefault(name, []).append((replaced, gap))
    got = _tally[name]
    if len(got) == REPS:
        print(f"\nFAULT {name:<50} {len(got)}/{REPS} exactly once, in order; worst death -> replacement "
              f"{1000 * max(r for r, _ in got):.0f} ms, worst wait for a batch {1000 * max(g for _, g in got):.0f} ms")


class _Restarts(logging.Handler):
    """Collects the gobatch logger's restart records (one per rank and restart)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: List[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if "restarted it as pid" in msg:
            self.messages.append(msg)


def _wrapper(tmp_path: Path, failpoint: str) -> Tuple[str, Dict[str, str]]:
    """A shmloader wrapper that arms the failpoint in the first node loader only."""
    script = tmp_path / "shmloader-first-fails"
    script.write_text('#!/bin/sh\nif [ "$1" = serve ] && mkdir "$FAULT_MARK" 2>/dev/null; then '
                      'export GOBATCH_FAILPOINT="$FAULT_FP"; fi\nexec "$FAULT_REAL" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ, FAULT_MARK=str(tmp_path / "armed"), FAULT_FP=failpoint, FAULT_REAL=gobatch.shmloader_path())
    return str(script), env


def _trial(world: int, kill_after: Optional[float], shmloader: Optional[str] = None,
           env: Optional[Dict[str, str]] = None) -> Tuple[float, float]:
    """One trial: ``world`` ranks read BATCHES each while the node loader dies; returns (death ->
    every rank's ring joined by the new one, longest wait for a batch after the death)."""
    os.environ["TORCHELASTIC_RUN_ID"] = f"faults-{uuid.uuid4().hex[:12]}"  # a node loader of this trial's own
    cfg = _cfg()
    loaders: Dict[int, gobatch.Loader] = {}
    times: Dict[int, List[float]] = {}
    errors: Dict[int, BaseException] = {}
    recovery: Dict[int, List[float]] = {}
    opened = threading.Barrier(world + 1)
    handler = _Restarts()
    logging.getLogger("gobatch").addHandler(handler)

    def rank(r: int) -> None:
        try:
            with gobatch.Loader(cfg, rank=r, world_size=world, node=True, local_world_size=world, node_rank=0,
                                shmloader=shmloader, env=env, start_timeout=30) as L:
                loaders[r] = L
                opened.wait(30)
                times[r] = []
                for k, b in enumerate(L):
                    check_batch(b, cfg, k * world + r)  # in order, unchanged, none missing or repeated
                    times[r].append(time.monotonic())
                    if k + 1 == BATCHES:
                        break
                sup = L._supervisor
                assert sup is not None
                recovery[r] = list(sup.recovery_s)
        except BaseException as e:  # noqa: BLE001  (reported by the main thread)
            errors[r] = e
            opened.abort()

    threads = [threading.Thread(target=rank, args=(r,), daemon=True) for r in range(world)]
    try:
        for t in threads:
            t.start()
        opened.wait(30)
        first = loaders[0].pid
        assert first is not None and all(L.pid == first for L in loaders.values())
        t_death = _kill_or_wait(first, kill_after)
        for t in threads:
            t.join(120)
        assert not errors, errors
        assert all(not t.is_alive() for t in threads), "a rank did not finish"
    finally:
        logging.getLogger("gobatch").removeHandler(handler)
    for r in range(world):
        assert len(times[r]) == BATCHES, f"rank {r}: {len(times[r])} batches"
    assert len(handler.messages) == world, handler.messages  # each rank restarted once
    assert all(f"node loader pid {first} " in m for m in handler.messages), handler.messages
    assert all(len(recovery[r]) == 1 for r in range(world)), recovery
    replaced = max(recovery[r][0] for r in range(world))
    gap = 0.0
    for r in range(world):
        later = [x for x in times[r] if x >= t_death]
        if later:
            gap = max([gap, later[0] - t_death] + [b - a for a, b in zip(later, later[1:])])
    return replaced, gap


def _kill_or_wait(pid: int, kill_after: Optional[float]) -> float:
    """Kills the node loader after kill_after seconds (or waits for its failpoint to), and
    returns when it died."""
    if kill_after is not None:
        time.sleep(kill_after)
        os.kill(pid, signal.SIGKILL)
        return time.monotonic()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    return time.monotonic()
        except FileNotFoundError:
            return time.monotonic()
        time.sleep(0.0005)
    raise AssertionError("the node loader never died at its failpoint")


@pytest.mark.parametrize("world", [2, 4])
def test_node_loader_killed_at_random_points(shm, monkeypatch, world):
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "placeholder")
    rng = random.Random(20261203 + world)
    for _ in range(REPS):
        replaced, gap = _trial(world, kill_after=rng.uniform(0.0, 0.3))
        assert gap < RECOVER_S, f"waited {gap:.3f} s for a batch after the kill"
        _record(f"node loader killed at a random point, {world} ranks", replaced, gap)


@pytest.mark.parametrize("failpoint", ["slot-claimed:5", "slot-writing:5", "slot-filled:5", "slot-ready:5"])
def test_node_loader_dies_at_each_state(shm, monkeypatch, tmp_path, failpoint):
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "placeholder")
    for rep in range(REPS):
        (tmp_path / f"r{rep}").mkdir()
        wrapper, env = _wrapper(tmp_path / f"r{rep}", failpoint)
        replaced, gap = _trial(2, kill_after=None, shmloader=wrapper, env=env)
        assert gap < RECOVER_S, f"waited {gap:.3f} s for a batch after the death"
        _record(f"node loader dies at {failpoint}, 2 ranks", replaced, gap)


def test_node_loader_killed_between_rings(shm, monkeypatch):
    """Killed while a rank holds no ring (before it resumes from a state_dict): the rank's
    next ring comes from a new node loader, from the batch it resumes at; no restart is
    counted (there was nothing to take over)."""
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", f"faults-{uuid.uuid4().hex[:12]}")
    cfg = _cfg()
    with gobatch.Loader(cfg, rank=1, world_size=2, node=True, local_world_size=2, node_rank=0) as L:
        it = iter(L)
        for k in range(5):
            check_batch(next(it), cfg, 2 * k + 1)
        state = L.state_dict()
        first = L.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not L._producer.session.server_gone():
            time.sleep(0.005)
        L.load_state_dict(state)
        it = iter(L)
        for k in range(5, 25):
            check_batch(next(it), cfg, 2 * k + 1)
        assert L.pid not in (None, first)


def test_node_loader_restart_budget(shm, monkeypatch):
    """The Loader's budget holds for the node loader: with restarts=1 the first kill is
    recovered (a GobatchWarning), the second ends the stream with a LoaderError saying the
    budget is spent, naming the dead node loader."""
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", f"faults-{uuid.uuid4().hex[:12]}")
    cfg = _cfg()
    with gobatch.Loader(cfg, rank=0, world_size=2, node=True, local_world_size=2, node_rank=0, restarts=1) as L:
        it = iter(L)
        first = L.pid
        assert first is not None
        check_batch(next(it), cfg, 0)
        k = 1
        with pytest.warns(gobatch.GobatchWarning, match=rf"the node loader pid {first} \(socket [^)]+\) was killed by "
                          r"SIGKILL.*restarted it as pid \d+ \(restart 1 of 1 within 600 s\)"):
            os.kill(first, signal.SIGKILL)
            for _ in range(20):  # recovered: the stream goes on
                check_batch(next(it), cfg, 2 * k)
                k += 1
        second = L.pid
        assert second not in (None, first)
        os.kill(second, signal.SIGKILL)
        with pytest.raises(gobatch.LoaderError, match=rf"the node loader pid {second} \(socket [^)]+\) was killed by "
                           r"SIGKILL.*restarted 1 times within 600 s \(restarts=1\), so it is not restarted again"):
            for _ in range(1000):
                check_batch(next(it), cfg, 2 * k)
                k += 1
