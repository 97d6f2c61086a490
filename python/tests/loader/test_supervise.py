"""The restart's timing rules (issue 21: restart within 1 s): the first restart of a window is
immediate and only later ones wait restart_backoff_s, doubled; a DeathWatch wakes the ring's
consumer the moment the producer process dies, and is re-armed for each restarted child."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import types
from typing import Any, List, Optional

import pytest

import gobatch
from gobatch import _own, _registry, _supervise
from gobatch._child import shmloader_path
from gobatch._supervise import DeathWatch, Supervisor
from faultharness import shm  # noqa: F401  (a fixture)
from synthetic import check_batch, config, wait_for

pytestmark = pytest.mark.timeout(60)


def _supervisor(backoff_s: float, spawned: List[float]) -> Supervisor:
    def spawn() -> int:
        spawned.append(time.monotonic())
        return 4242

    return Supervisor(restarts=3, window_s=600.0, backoff_s=backoff_s, start_timeout=5.0, slots=4, spawn=spawn,
                      mm=lambda: None, batch_name=str)


def test_first_restart_is_immediate_later_ones_back_off() -> None:
    spawned: List[float] = []
    sup = _supervisor(0.3, spawned)
    with pytest.warns(gobatch.GobatchWarning, match="restart 1 of 3"):
        t = time.monotonic()
        assert sup.restart(101, -signal.SIGKILL) == 4242
    assert spawned[0] - t < 0.25  # no backoff before the first restart of a window
    with pytest.warns(gobatch.GobatchWarning, match="restart 2 of 3"):
        t = time.monotonic()
        sup.restart(102, -signal.SIGKILL)
    assert spawned[1] - t >= 0.3  # restart_backoff_s before the second
    with pytest.warns(gobatch.GobatchWarning, match="restart 3 of 3"):
        t = time.monotonic()
        sup.restart(103, -signal.SIGKILL)
    assert spawned[2] - t >= 0.6  # doubled for the third


def test_death_watch_wakes_on_death_until_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    if _supervise._SYS_FUTEX is None:
        pytest.skip("no futex call number for this machine")
    woken: List[int] = []
    monkeypatch.setattr(_supervise, "_futex_wake", woken.append)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        watch = DeathWatch.for_ring(proc.pid, 1 << 20, 3)
        assert watch is not None
        time.sleep(0.1)
        assert woken == [] and watch.died_at is None  # alive: no wake
        t_kill = time.monotonic()
        proc.kill()
        wait_for(lambda: len(woken) >= 6, 5, "two rounds of wakes")
        slot = gobatch._protocol.SLOT_BASE + (1 << 20)
        assert set(woken) == {slot + i * gobatch._protocol.SLOT_STRIDE for i in range(3)}
        assert watch.died_at is not None and watch.died_at - t_kill < 2.0
        watch.stop()
        n = len(woken)
        time.sleep(0.05)
        assert len(woken) == n  # stopped: no more wakes
    finally:
        proc.kill()
        proc.wait()


def test_restarted_child_is_watched(shm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Loader's child killed while the consumer waits: the watch of that child wakes the
    consumer, the child is restarted once, the new one is watched in turn, and the stream goes
    on exactly once and in order."""
    if _supervise._SYS_FUTEX is None:
        pytest.skip("no futex call number for this machine")
    woken: List[int] = []
    real = _supervise._futex_wake

    def wake(address: int) -> None:
        woken.append(address)
        real(address)

    monkeypatch.setattr(_supervise, "_futex_wake", wake)
    cfg = config({"a": ((3,), "float32")}, size=2, slots=4, delay_ms=100)
    with gobatch.Loader(cfg) as L:
        it = iter(L)
        for k in range(3):
            check_batch(next(it), cfg, k)
        first = L.pid
        assert first is not None and L._producer._watch.pid == first
        os.kill(first, signal.SIGKILL)
        with pytest.warns(gobatch.GobatchWarning, match=rf"shmloader pid {first} was killed by SIGKILL"):
            for k in range(3, 12):
                check_batch(next(it), cfg, k)
        assert woken, "the consumer was not woken for the death"
        assert L.pid not in (None, first) and L._producer._watch.pid == L.pid
        assert L._supervisor is not None and L._supervisor.restart_count == 1


def test_restarts_before_the_ring_count_against_its_budget() -> None:
    """A node loader restarted while a rank asked for its ring (``previous``) spends the budget
    of the ring's supervisor too."""
    spawned: List[float] = []
    opening = Supervisor(restarts=1, window_s=600.0, backoff_s=0.0, start_timeout=5.0, slots=0,
                         spawn=lambda: 7, mm=lambda: None, batch_name=str, then="which is asked for the ring again")
    with pytest.warns(gobatch.GobatchWarning, match=r"restarted it as pid 7 \(restart 1 of 1 within 600 s\), "
                      "which is asked for the ring again"):
        opening.restart(101, -signal.SIGKILL)
    ring = Supervisor(restarts=1, window_s=600.0, backoff_s=0.0, start_timeout=5.0, slots=4,
                      spawn=lambda: 8, mm=lambda: None, batch_name=str, previous=opening)
    assert ring.restart_count == 1
    with pytest.raises(gobatch.LoaderError, match=r"restarted 1 times within 600 s \(restarts=1\)"):
        ring.restart(7, -signal.SIGKILL)


def test_a_death_reported_just_before_the_restarted_child_registers_is_waited_out(
        shm: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """The ring can find no live producer a moment before the restarted child registers, and the
    Loader read the registry a moment after (seen once under make faults: "producer pid N died"
    with the new child alive). That report is the predecessor's: it is waited out and the stream
    goes on. Here each child starts 0.3 s late (so the ring reports the death before the new
    one registers) and the registry runs ahead of the ring once, right after the restart."""
    slow = tmp_path / "slow-shmloader"
    slow.write_text(f"#!/bin/sh\nsleep 0.3\nexec {shmloader_path()} \"$@\"\n")
    slow.chmod(0o755)
    monkeypatch.setenv("GOBATCH_SHMLOADER", str(slow))
    real_live, real_restart = _registry.live, _own.OwnChild._restart
    ahead: List[Optional[int]] = [None]

    def live(mm: Any) -> List[Any]:
        got = real_live(mm)
        pid, ahead[0] = ahead[0], None
        return got if pid is None else [*got, types.SimpleNamespace(pid=pid, starttime=0, batches=0)]

    def restart(self: Any) -> None:
        real_restart(self)
        ahead[0] = self.child.proc.pid

    monkeypatch.setattr(_registry, "live", live)
    monkeypatch.setattr(_own.OwnChild, "_restart", restart)
    cfg = config({"a": ((3,), "float32")}, size=2, slots=4, delay_ms=20)
    with gobatch.Loader(cfg, restarts=1) as L:
        it = iter(L)
        check_batch(next(it), cfg, 0)
        first = L.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        with pytest.warns(gobatch.GobatchWarning, match=rf"shmloader pid {first} was killed by SIGKILL"):
            for k in range(1, 30):
                check_batch(next(it), cfg, k)
        assert L.pid not in (None, first) and L._supervisor is not None and L._supervisor.restart_count == 1


def test_a_registered_child_is_excused_once() -> None:
    """After the restarted child has registered, one more death report is waited out (the ring
    asked again), not more: the ring's takeover grace decides then."""
    sup = _supervisor(0.0, [])
    assert not sup.excuses(False)  # no restart yet
    with pytest.warns(gobatch.GobatchWarning):
        sup.restart(101, -signal.SIGKILL)
    assert sup.excuses(False) and sup.excuses(False)  # starting, not registered: always
    assert sup.excuses(True) and not sup.excuses(True)  # registered: once
    with pytest.warns(gobatch.GobatchWarning):
        sup.restart(102, -signal.SIGKILL)
    assert sup.excuses(True)  # a new restart: once more
