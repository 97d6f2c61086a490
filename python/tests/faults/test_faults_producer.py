"""Fault trials: exactly-once delivery through producer crashes (docs/PROTOCOL.md 3.7).

A producer process is killed (kill -9 at a random moment, or by itself at an exact protocol
state through GOBATCH_FAILPOINT) while the trainer iterates. Every batch of the bounded stream
must then arrive exactly once, in order, every element equal to the synthetic source's contract
(tests/synthetic.py, independent of the producer's code), and the stream must carry on within
1 s. Trials: the Loader's own child (restarted by the Loader and joined to the same ring), one
of several ``--join`` producers of a standalone ring (taken over by the survivors), and a
deterministic crash (the same batch every time), which must end in an error naming the batch.
Each trial is bounded in time and runs in a private GOBATCH_SHM_DIR that must be empty after
it. GOBATCH_FAULT_REPS repeats each trial (``make faults``); each prints a FAULT line with its
count, the worst time from the death to the replacement producer (restart or takeover) and the
longest wait for a batch after the death."""

from __future__ import annotations

import os
import random
import signal
import stat
import subprocess
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

import gobatch
from gobatch import GobatchWarning, LoaderError
from faultharness import REPS, registry as _registry, shm  # noqa: F401  (shm is a fixture)
from synthetic import check_batch, config, wait_for, write_config

pytestmark = pytest.mark.timeout(600)

RECOVER_S = 1.0  # the longest wait for a batch after a death
BATCHES = 1000
_tally: Dict[str, List[Tuple[float, float]]] = {}


def _cfg(batches: int = BATCHES) -> Dict[str, Any]:
    return config({"a": ((3, 5), "float32"), "b": ((2,), "int64"), "c": ((7,), "uint8")},
                  size=4, batches=batches, slots=4, delay_ms=1)


def _record(name: str, replaced: float, gap: float, verdict: str = "exactly once, in order") -> None:
    _tally.setdefault(name, []).append((replaced, gap))
    got = _tally[name]
    if len(got) == REPS:
        print(f"\nFAULT {name:<50} {len(got)}/{REPS} {verdict}; worst death -> replacement "
              f"{1000 * max(r for r, _ in got):.0f} ms, worst wait for a batch {1000 * max(g for _, g in got):.0f} ms")


class Reader:
    """Iterates a ring to its end, holding batch k to the contract, timing each delivery; with
    ``keep``, batch ``keep`` stays referenced to the end (a stale batch holding its slot) and must
    be unchanged then."""

    def __init__(self, ring: gobatch.Ring, cfg: Dict[str, Any], keep: Optional[int] = None) -> None:
        self.ring, self.cfg, self.keep = ring, cfg, keep
        self.times: List[float] = []

    def read_all(self, deadline_s: float = 60.0) -> None:
        end = time.monotonic() + deadline_s
        k = 0
        kept = None
        for batch in self.ring:
            check_batch(batch, self.cfg, k)  # in order and unchanged: batch k is the k-th delivered
            if k == self.keep:
                kept = batch
            self.times.append(time.monotonic())
            k += 1
            assert time.monotonic() < end, f"stream not read within {deadline_s} s (at batch {k})"
        assert k == self.cfg["batch"]["batches"], f"{k} batches delivered, want {self.cfg['batch']['batches']}"
        if self.keep is not None:
            check_batch(kept, self.cfg, self.keep)  # its slot was never given to another batch

    def gap_after(self, t: float) -> float:
        """The longest wait for a batch from time t on (from t to the next delivery included)."""
        later = [x for x in self.times if x >= t]
        if not later:
            return 0.0
        return max([later[0] - t] + [b - a for a, b in zip(later, later[1:])])


def _first_child_wrapper(tmp_path: Path, failpoint: str) -> Tuple[str, Dict[str, str]]:
    """A shmloader wrapper that arms the failpoint in the first child only (the Loader restarts
    with the same environment), and the environment for it."""
    script = tmp_path / "shmloader-first-fails"
    script.write_text('#!/bin/sh\nif mkdir "$FAULT_MARK" 2>/dev/null; then export GOBATCH_FAILPOINT="$FAULT_FP"; fi\n'
                      'exec "$FAULT_REAL" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ, FAULT_MARK=str(tmp_path / "armed"), FAULT_FP=failpoint, FAULT_REAL=gobatch.shmloader_path())
    return str(script), env


def _loader_trial(loader: gobatch.Loader, cfg: Dict[str, Any], kill_after: Optional[float],
                  keep: Optional[int] = None) -> Tuple[float, float]:
    """Reads the whole stream while the child dies (killed after kill_after seconds, or by its
    failpoint); returns (death -> replacement child started, longest wait for a batch after it)."""
    first = loader.pid
    assert first is not None
    killed: List[float] = []
    died: List[float] = []

    def watch() -> None:  # the death: the last time the child was seen alive before its pid left /proc,
        # became a zombie or was replaced (an upper bound on the waits measured from it)
        if kill_after is not None:
            time.sleep(kill_after)
            os.kill(first, signal.SIGKILL)
            killed.append(time.monotonic())
        alive = time.monotonic()
        while not loader.closed:
            if loader.pid != first:  # restarted before this loop saw the death: it died after `alive`
                died.append(alive)
                return
            now = time.monotonic()
            try:
                with open(f"/proc/{first}/stat") as f:
                    gone = f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
            except (FileNotFoundError, ProcessLookupError):  # reaped (between the open and the read)
                gone = True
            if gone:
                died.append(alive)
                return
            alive = now
            time.sleep(0.0005)

    reader = Reader(loader, cfg, keep)
    t = threading.Thread(target=watch, daemon=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t.start()
        reader.read_all()
        t.join(10)
    t_death = (killed or died)[0] if (killed or died) else None
    assert t_death is not None, "the child never died"
    restarts = [w for w in caught if issubclass(w.category, GobatchWarning) and "restarted it as pid" in str(w.message)]
    assert len(restarts) == 1, [str(w.message) for w in caught]
    assert f"shmloader pid {first} was killed by SIGKILL" in str(restarts[0].message)
    assert restarts[0].filename == __file__  # the trainer's line (Reader.read_all's next()), not gobatch's
    assert loader.pid != first
    sup = loader._supervisor
    assert sup is not None and sup.restart_count == 1
    assert loader.stats()["restarts"] == 1
    assert loader._label == f"shmloader pid {loader.pid}"  # errors from now on name the running child
    replaced = max(sup.recovery_s[0] + (died[0] - t_death if died else 0.0), 0.0)
    return replaced, reader.gap_after(t_death)


def test_loader_child_killed_at_random_points(shm):
    """kill -9 of the Loader's child at a random moment of the iteration."""
    cfg = _cfg()
    rng = random.Random(20261201)
    for _ in range(REPS):
        with gobatch.Loader(cfg, readers=2) as loader:
            replaced, gap = _loader_trial(loader, cfg, kill_after=rng.uniform(0.0, 0.15))
        assert gap < RECOVER_S, f"waited {gap:.3f} s for a batch after the kill"
        _record("Loader child killed at a random point", replaced, gap)


@pytest.mark.parametrize("failpoint", ["slot-claimed:5", "slot-granted:5", "slot-writing:5", "slot-filled:5", "slot-ready:5",
                                       "slot-filled:60"])
def test_loader_child_dies_at_each_state(shm, tmp_path, failpoint):
    """The Loader's child kills itself at an exact producer state: the restarted child takes the
    claim over (a half-written slot is rewritten whole)."""
    cfg = _cfg()
    for rep in range(REPS):
        (tmp_path / f"r{rep}").mkdir()
        wrapper, env = _first_child_wrapper(tmp_path / f"r{rep}", failpoint)
        with gobatch.Loader(cfg, readers=2, shmloader=wrapper, env=env) as loader:
            replaced, gap = _loader_trial(loader, cfg, kill_after=None)
        assert gap < RECOVER_S, f"waited {gap:.3f} s for a batch after the death"
        _record(f"Loader child dies at {failpoint}", replaced, gap)


@pytest.mark.parametrize("readers", [1, 2])
def test_deterministic_crash_ends_with_the_batch(shm, readers):
    """A child that dies at the same batch every time (GOBATCH_FAILPOINT=slot-filled@37 in each
    restarted child too) is restarted once; the second death on batch 37 ends the stream with a
    LoaderError naming it, and the error is sticky. With one reader each death holds batch 37
    alone; with two it may hold 36 too, and the supervisor narrows the batches held at each death
    down (a third death), or names both once the restarts are spent."""
    cfg = _cfg()
    worst: List[float] = []
    for _ in range(REPS):
        env = dict(os.environ, GOBATCH_FAILPOINT="slot-filled@37")
        with gobatch.Loader(cfg, readers=readers, env=env) as loader:
            first = loader.pid
            k = 0
            t0 = time.monotonic()
            with pytest.warns(GobatchWarning, match=r"shmloader pid \d+ was killed by SIGKILL"):  # each restart
                with pytest.raises(LoaderError, match=r"while producing (stream batch 37|one of [^:]*stream batch 37\b[^:]*?), "
                                   r"which its predecessor pid \d+ died holding too: a deterministic failure") as ei:
                    for batch in loader:
                        check_batch(batch, cfg, k)
                        k += 1
            took = time.monotonic() - t0
            # With two readers batch 36 may be in flight at every death too: then it never comes.
            assert k == 37 or readers > 1 and k == 36, f"{k} batches delivered before the error, want 37"
            if readers == 1:
                assert f"stream batch 37, which its predecessor pid {first} died" in str(ei.value)
            assert ei.value.exit_code == -signal.SIGKILL
            with pytest.raises(LoaderError, match="deterministic failure"):
                next(loader)  # sticky
        assert took < 10, took
        worst.append(took)
    print(f"\nFAULT {f'deterministic crash at stream batch 37, {readers} readers':<50} {len(worst)}/{REPS} ended in the error naming "
          f"batch 37; worst time from the start to the error {1000 * max(worst):.0f} ms")


def test_restarts_spent_ends_the_stream(shm):
    """restarts=1: a second kill -9 within the window (after the restarted child has produced
    what it took over) ends the stream with an error that says so (the restart budget), instead
    of restarting for ever."""
    cfg = _cfg(batches=2000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GobatchWarning)
        with gobatch.Loader(cfg, readers=2, restarts=1) as loader:
            next(loader)
            os.kill(loader.pid, signal.SIGKILL)
            first = loader.pid
            wait_for(lambda: (next(loader) is not None) and loader.pid != first, 10, "the restart")
            for _ in range(20):  # past what the first child held: the next death is not on its batches
                next(loader)
            os.kill(loader.pid, signal.SIGKILL)
            with pytest.raises(LoaderError, match=r"restarted 1 times within 600 s \(restarts=1\), so it is not restarted again"):
                for _ in range(10_000):
                    next(loader)


def test_loader_restarts_past_the_registry(shm):
    """More restarts than the ring has registry entries (32): the Loader's child is killed 40
    times, each time after its predecessor's batches are delivered, and restarted each time (a
    high restarts=, a long window, no backoff); from the 32nd restart on, the new child reuses a
    dead one's RECLAIMED entry (PROTOCOL.md 2.6), and every batch still arrives once, in order,
    unchanged."""
    kills, every = 40, 40
    cfg = _cfg(batches=kills * every + 100)
    killed: List[int] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gobatch.Loader(cfg, readers=2, restarts=kills, restart_window_s=3600, restart_backoff_s=0) as loader:
            k = 0
            for batch in loader:
                check_batch(batch, cfg, k)
                k += 1
                if k % every == every // 2 and len(killed) < kills:
                    assert loader.pid not in killed, f"batch {k}: the child killed last was not replaced"
                    killed.append(loader.pid)
                    os.kill(loader.pid, signal.SIGKILL)
            assert k == cfg["batch"]["batches"], k
            sup = loader._supervisor
            assert sup is not None and sup.restart_count == kills, sup and sup.restart_count
            generations = _generations(loader)
    assert len(killed) == kills
    restarts = [str(w.message) for w in caught if issubclass(w.category, GobatchWarning) and "restarted it as pid" in str(w.message)]
    assert len(restarts) == kills, restarts[-3:]
    assert max(generations) >= 1, f"no registry entry was reused: generations {generations}"


def _generations(ring: gobatch.Ring) -> List[int]:
    """Each registry entry's generation (PROTOCOL.md 2.6)."""
    import struct

    from gobatch import _protocol as proto

    f = proto.REGISTRY_FIELDS["generation"]
    return [struct.unpack_from(f[1], ring._mm, proto.REGISTRY_BASE + e * proto.REGISTRY_STRIDE + f[0])[0]
            for e in range(proto.MAX_PRODUCERS)]


# ---- a standalone ring with several --join producers ----


@pytest.mark.parametrize("failpoint", ["slot-claimed:40", "slot-granted:40", "slot-writing:40", "slot-ready:40"])
def test_loader_child_dies_while_a_stale_batch_holds_a_slot(shm, tmp_path, failpoint):
    """Issue 20 under faults: the trainer keeps batch 19 to the end (a warm-up loop's leftover),
    so the stream runs on three of the four slots; the child dies at an exact state, the
    restarted one takes its claims over, every batch arrives once and in order, and the kept
    batch never changes (its slot is never granted again)."""
    cfg = _cfg()
    for rep in range(REPS):
        (tmp_path / f"r{rep}").mkdir()
        wrapper, env = _first_child_wrapper(tmp_path / f"r{rep}", failpoint)
        with gobatch.Loader(cfg, readers=2, shmloader=wrapper, env=env) as loader:
            replaced, gap = _loader_trial(loader, cfg, kill_after=None, keep=19)
        assert gap < RECOVER_S, f"waited {gap:.3f} s for a batch after the death"
        _record(f"Loader child dies at {failpoint}, a stale batch kept", replaced, gap)


def _start(args: List[str], env: Optional[Dict[str, str]] = None) -> subprocess.Popen:
    return subprocess.Popen([gobatch.shmloader_path(), *args], stdin=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env)


@pytest.mark.parametrize("failpoint", ["", "slot-claimed:6", "slot-granted:6", "slot-writing:6", "slot-filled:6", "slot-ready:6"])
def test_joined_producer_dies_survivors_take_over(shm, tmp_path, ring_name, failpoint):
    """One of three producer processes of a named ring (the creator and two --join) dies (kill
    -9 at a random moment, or at an exact state); the survivors take its claims over and the
    consumer, attached with gobatch.attach, reads the whole stream once, in order, unchanged."""
    cfg = _cfg()
    rng = random.Random(7)
    for rep in range(REPS):
        name = f"{ring_name}-{rep}"
        path = write_config(tmp_path / f"c-{name}.json", cfg)
        run = ["run", "--config", str(path), "--ring", name, "--readers", "1"]
        procs = [_start(run)]
        try:
            wait_for(lambda: (shm / f"gobatch-{name}").exists() or procs[0].poll() is not None, 10, "ring file")
            with gobatch.attach(name, timeout=10) as ring:
                victim_env = dict(os.environ, GOBATCH_FAILPOINT=failpoint) if failpoint else None
                victim = _start(run + ["--join"], victim_env)
                procs += [victim, _start(run + ["--join"])]
                died: List[float] = []
                reclaimed: List[float] = []

                def kill_or_watch() -> None:
                    if not failpoint:  # a random moment after it registered (before, it holds nothing)
                        wait_for(lambda: victim.pid in dict(_registry(ring)) or victim.poll() is not None, 10, "the join")
                        time.sleep(rng.uniform(0.0, 0.1))
                        victim.kill()
                    victim.wait()
                    died.append(time.monotonic())
                    end = time.monotonic() + 5
                    while time.monotonic() < end and not ring.closed:  # the survivors' takeover (3.7)
                        if dict(_registry(ring)).get(victim.pid) == "RECLAIMED":
                            reclaimed.append(time.monotonic())
                            return
                        time.sleep(0.0005)

                t = threading.Thread(target=kill_or_watch, daemon=True)
                t.start()
                reader = Reader(ring, cfg)
                reader.read_all()
                t.join(10)
                assert died and reclaimed, "the victim never died, or its entry was never RECLAIMED"
                assert victim.returncode == -signal.SIGKILL, (victim.returncode, victim.stderr.read().decode())
                gap = reader.gap_after(died[0])
                # The survivors marked its entry RECLAIMED (PROTOCOL.md 3.7): read the registry.
                states = {pid: st for pid, st in _registry(ring)}
                assert states.get(victim.pid) == "RECLAIMED", states
            for p in procs:
                if p is not victim:
                    assert p.wait(timeout=10) == 0, p.stderr.read().decode()
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        assert gap < RECOVER_S, f"waited {gap:.3f} s for a batch after the death"
        _record(f"--join producer dies at {failpoint or 'a random point'}", reclaimed[0] - died[0], gap)
