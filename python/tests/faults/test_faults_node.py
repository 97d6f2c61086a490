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

The node loader dying while ranks ask for their rings (at an exact state of making one): each
rank it did not answer restarts it and asks again.

A rank (a process of its own there) killed while the node loader is down, under either
``on_rank_death``: the other rank restarts it and reads on, and the new node loader exits
within its linger once that rank is done (no hang, nothing left behind).
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import stat
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

import gobatch
from faultharness import REPS, shm  # noqa: F401  (shm is a fixture)
from synthetic import check_batch, config, python_env, wait_for

pytestmark = pytest.mark.timeout(max(600, 15 * REPS))  # a trial takes a few seconds

RECOVER_S = 1.0
# The longer variants run under `make faults` (which sets GOBATCH_FAULT_REPS) only, to keep
# `make test` short.
FAULTS_ONLY = pytest.mark.skipif("GOBATCH_FAULT_REPS" not in os.environ, reason="make faults only")
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
    served: Dict[int, Optional[int]] = {}  # each rank's node loader at its open
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
                served[r] = L.pid  # before the barrier: a failpoint may fire as soon as it is passed
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
        try:
            opened.wait(30)
        except threading.BrokenBarrierError:
            for t in threads:
                t.join(30)
            raise AssertionError(f"a rank failed to open its ring: {errors}") from None
        released = time.monotonic()
        first = served[0]
        assert first is not None and all(pid == first for pid in served.values()), served
        t_death = _kill_or_wait(first, kill_after, released)
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


def _kill_or_wait(pid: int, kill_after: Optional[float], since: float) -> float:
    """Kills the node loader after kill_after seconds, or waits for its failpoint to; returns
    when it died (for a failpoint, the last time it was seen alive, from ``since``, when the
    ranks were let go: an upper bound on every wait measured from it)."""
    if kill_after is not None:
        time.sleep(kill_after)
        os.kill(pid, signal.SIGKILL)
        return time.monotonic()
    alive = since
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        now = time.monotonic()
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    return alive
        except (FileNotFoundError, ProcessLookupError):  # reaped (between the open and the read)
            return alive
        alive = now
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


@pytest.mark.parametrize("world", [2, pytest.param(4, marks=FAULTS_ONLY)])
@pytest.mark.parametrize("state", ["slot-claimed", "slot-writing", "slot-filled", "slot-ready"])
def test_node_loader_dies_at_each_state(shm, monkeypatch, tmp_path, state, world):
    """At the state's (slots * world + 1)-th pass: the rings hold at most slots * world batches
    before any rank reads, so every rank has its ring open by then (a death before that is
    test_node_loader_dies_while_ranks_open's)."""
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "placeholder")
    failpoint = f"{state}:{_cfg()['ring']['slots'] * world + 1}"
    for rep in range(REPS):
        (tmp_path / f"r{rep}").mkdir()
        wrapper, env = _wrapper(tmp_path / f"r{rep}", failpoint)
        replaced, gap = _trial(world, kill_after=None, shmloader=wrapper, env=env)
        assert gap < RECOVER_S, f"waited {gap:.3f} s for a batch after the death"
        _record(f"node loader dies at {failpoint}, {world} ranks", replaced, gap)


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("failpoint", ["producer-registering:2", "producer-active:2"])
def test_node_loader_dies_while_ranks_open(shm, monkeypatch, tmp_path, failpoint, world):
    """The node loader dies making the second rank's ring (before it replied to that rank;
    others may be asking, or not yet connected): each rank whose request it took restarts it
    (within the budget, with the warning) and asks again; every rank reads its whole stream
    exactly once and in order."""
    cfg = _cfg()
    worst = 0.0
    for rep in range(REPS):
        monkeypatch.setenv("TORCHELASTIC_RUN_ID", f"faults-{uuid.uuid4().hex[:12]}")
        (tmp_path / f"r{rep}").mkdir()
        wrapper, env = _wrapper(tmp_path / f"r{rep}", failpoint)
        errors: Dict[int, BaseException] = {}
        handler = _Restarts()
        logging.getLogger("gobatch").addHandler(handler)

        def rank(r: int) -> None:
            try:
                with gobatch.Loader(cfg, rank=r, world_size=world, node=True, local_world_size=world, node_rank=0,
                                    shmloader=wrapper, env=env, start_timeout=30) as L:
                    for k, b in enumerate(L):
                        check_batch(b, cfg, k * world + r)  # in order, unchanged, none missing or repeated
                        if k + 1 == BATCHES // 10:
                            break
                    assert k + 1 == BATCHES // 10
            except BaseException as e:  # noqa: BLE001  (reported by the main thread)
                errors[r] = e

        t0 = time.monotonic()
        threads = [threading.Thread(target=rank, args=(r,), daemon=True) for r in range(world)]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
        finally:
            logging.getLogger("gobatch").removeHandler(handler)
        assert not errors, errors
        assert all(not t.is_alive() for t in threads), "a rank did not finish"
        assert (tmp_path / f"r{rep}" / "armed").exists()  # the first node loader was armed (and died)
        dead = {m.split("node loader pid ")[1].split()[0] for m in handler.messages}
        assert len(dead) <= 1 and len(handler.messages) <= world, handler.messages  # one death, each rank once
        worst = max(worst, time.monotonic() - t0)
    print(f"\nFAULT node loader dies at {failpoint} (opening), {world} ranks {REPS}/{REPS} exactly once, in order; "
          f"slowest trial {1000 * worst:.0f} ms")


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
        assert L.stats()["restarts"] == 1
        os.kill(second, signal.SIGKILL)
        with pytest.raises(gobatch.LoaderError, match=rf"the node loader pid {second} \(socket [^)]+\) was killed by "
                           r"SIGKILL.*restarted 1 times within 600 s \(restarts=1\), so it is not restarted again"):
            for _ in range(1000):
                check_batch(next(it), cfg, 2 * k)
                k += 1


# A rank in a process of its own (to be killed alone): reads its stream, checking each batch
# against the contract, and says so on stdout line by line.
_RANK = r"""
import json, sys
import gobatch
from synthetic import check_batch
cfg, r, world, n = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
try:
    with gobatch.Loader(cfg, rank=r, world_size=world, node=True, local_world_size=world, node_rank=0,
                        start_timeout=3) as L:
        print("serve", L.pid, flush=True)
        for k, b in enumerate(L):
            check_batch(b, cfg, k * world + r)
            print("batch", k, flush=True)
            if k + 1 == n:
                break
    print("done", flush=True)
except gobatch.LoaderError as e:
    print("error", str(e).replace("\n", " "), flush=True)
    sys.exit(1)
"""


class _RankProc:
    """A rank process and the lines it has printed."""

    def __init__(self, cfg: Dict[str, Any], rank: int, world: int, batches: int, env: Dict[str, str]) -> None:
        self.lines: List[str] = []
        self.proc = subprocess.Popen([sys.executable, "-c", _RANK, json.dumps(cfg), str(rank), str(world),
                                      str(batches)], stdout=subprocess.PIPE, text=True, env=env)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def batches(self) -> List[int]:
        return [int(x.split()[1]) for x in list(self.lines) if x.startswith("batch ")]

    def serve_pid(self) -> Optional[int]:
        got = [int(x.split()[1]) for x in list(self.lines) if x.startswith("serve ")]
        return got[0] if got else None

    def finish(self, timeout: float) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(5)
        return code


def _serves_of(env_mark: str) -> List[int]:
    """The live shmloader serve processes whose environment carries this trial's run id."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if (d / "comm").read_text().strip() != "shmloader" or \
                    env_mark.encode() not in (d / "environ").read_bytes():
                continue
            if (d / "stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                out.append(int(d.name))
        except OSError:
            continue
    return out


@pytest.mark.parametrize("on_rank_death", ["stop", pytest.param("continue", marks=FAULTS_ONLY)])
def test_rank_dies_while_node_loader_is_down(shm, on_rank_death):
    """kill -9 of the node loader, then at once of rank 1 (before anything could restart the
    node loader or rejoin it): no process of the new node loader ever hears of rank 1, so under
    either on_rank_death rank 0 restarts it and reads its whole stream, exactly once and in
    order; the new node loader exits within its linger (the ranks' start_timeout) after rank 0
    is done, every process of the job ends, and nothing is left in the ring directory."""
    run_id = f"faults-{uuid.uuid4().hex[:12]}"
    env = dict(python_env(), TORCHELASTIC_RUN_ID=run_id)
    cfg = _cfg()
    cfg["node"] = {"on_rank_death": on_rank_death}
    ranks = [_RankProc(cfg, r, 2, BATCHES, env) for r in range(2)]
    try:
        wait_for(lambda: all(len(p.batches()) >= 10 for p in ranks), 60, "both ranks reading")
        first = ranks[0].serve_pid()
        assert first is not None and first == ranks[1].serve_pid()
        os.kill(first, signal.SIGKILL)
        os.kill(ranks[1].proc.pid, signal.SIGKILL)
        t_death = time.monotonic()
        assert ranks[0].finish(60) == 0, ranks[0].lines[-3:]
        assert ranks[1].finish(10) == -signal.SIGKILL
        assert ranks[0].batches() == list(range(BATCHES))  # exactly once, in order, each one checked
        done = time.monotonic()
        wait_for(lambda: _serves_of(run_id) == [], 3 + 10, "the new node loader's exit")
        print(f"\nrank 0 done {done - t_death:.2f} s after the deaths; the node loader gone "
              f"{time.monotonic() - done:.2f} s later")
    finally:
        for p in ranks:
            if p.proc.poll() is None:
                p.proc.kill()
                p.proc.wait()
        for pid in _serves_of(run_id):
            os.kill(pid, signal.SIGKILL)
