"""Fault trial: no torn batch in a long stream under repeated producer kills (issue 9: "0 torn
batches in 10^6 under producer kills"; docs/PROTOCOL.md 3.7).

A named ring is fed by a pool of producer processes (the creator, then ``shmloader run --join``
joiners started as others die). While the trainer reads the whole bounded stream, a killer
kill -9s a random producer at random points of it, and some joiners are armed to kill
themselves at an exact protocol state (GOBATCH_FAILPOINT, a random count); each dead producer is
replaced by a new joiner so that the stream goes on, and the dead ones' registry entries are
reused (2.6). Every element of every delivered batch is held to the synthetic source's contract
(tests/synthetic.py, written independently of the producer): batch k delivered k-th, each once,
in order. The trial is bounded in time; GOBATCH_FAULT_STREAM sets the stream's length (``make
faults`` runs 10^6 batches, CI's short form fewer, a plain pytest run 20,000)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pytest

import gobatch
from faultharness import registry, shm  # noqa: F401  (shm is a fixture)
from synthetic import config, expected_run, wait_for, write_config

BATCHES = int(os.environ.get("GOBATCH_FAULT_STREAM", "20000") or 20000)
DEATHS_PER_BATCH = 1 / 4000  # about 250 deaths in 10^6 batches, at least 5
POOL = 3  # producer processes kept running
SLOTS = 8  # the ring's slots: how far the producers can be ahead of the consumer
CHUNK = 4096  # batches copied aside, then checked at once
# The failpoints a joiner may be armed with (PROTOCOL.md appendix A): every state a producer
# holds a batch in, and the two of a takeover (it dies while taking over an earlier death).
POINTS = ["slot-claimed", "slot-writing", "slot-filled", "slot-ready", "producer-active:1", "slot-reclaimed:1",
          "producer-reclaimed:1"]
RECOVER_S = 1.0

pytestmark = pytest.mark.timeout(1500)


def _cfg() -> Dict[str, Any]:
    return config({"a": ((3,), "float32"), "b": ((2,), "int64"), "c": ((5,), "uint8")}, size=2,
                  batches=BATCHES, slots=SLOTS)


class Checker:
    """Copies each delivered batch aside and checks CHUNK of them at once against the contract:
    the k-th delivered batch must be batch k, every element of it."""

    def __init__(self, cfg: Dict[str, Any]) -> None:
        self.cfg, self.size = cfg, cfg["batch"]["size"]
        self.sources = [(s["name"], tuple(s["shape"]), s["dtype"]) for s in cfg["source"]]
        self.buf = {n: np.empty((CHUNK, self.size) + shape, dtype=dt) for n, shape, dt in self.sources}
        self.k = 0  # batches delivered (and copied)
        self.checked = 0

    def add(self, batch: Dict[str, Any]) -> None:
        assert list(batch) == [n for n, _, _ in self.sources], list(batch)
        row = self.k % CHUNK
        for n, _, _ in self.sources:
            self.buf[n][row] = batch[n]
        self.k += 1
        if self.k % CHUNK == 0:
            self.check()

    def check(self) -> None:
        n = self.k - self.checked
        for name, shape, dt in self.sources:
            got, want = self.buf[name][:n], expected_run(shape, dt, self.checked, n, self.size)
            if not np.array_equal(got, want):
                bad = tuple(np.argwhere(got != want)[0])
                raise AssertionError(f"torn or misplaced batch {self.checked + bad[0]}: tensor {name} at {bad[1:]}: "
                                     f"{got[bad]} != {want[bad]}")
        self.checked = self.k


class Pool:
    """The producer processes of ring name: keeps POOL of them alive (a new --join for each
    death), kills one at random points of the stream, and times each death's takeover."""

    def __init__(self, name: str, path: Path, logs: Path, rng: random.Random) -> None:
        self.run = [gobatch.shmloader_path(), "run", "--config", str(path), "--ring", name, "--readers", "1"]
        self.logs, self.rng = logs, rng
        self.procs: List[Tuple[subprocess.Popen, str]] = []  # (process, failpoint armed or "")
        self.deaths: List[Tuple[int, str, float]] = []  # (pid, cause, time waitpid saw it)
        self.takeover_s: List[float] = []  # death seen -> its entry RECLAIMED (or reused)
        self.kills = 0

    def start(self, join: bool, failpoint: str = "") -> subprocess.Popen:
        env = dict(os.environ)
        env.pop("GOBATCH_FAILPOINT", None)
        if failpoint:
            env["GOBATCH_FAILPOINT"] = failpoint
        log = open(self.logs / f"p{len(self.procs)}.log", "wb")
        p = subprocess.Popen(self.run + (["--join"] if join else []), stdin=subprocess.DEVNULL, stdout=log,
                             stderr=log, env=env)
        log.close()
        self.procs.append((p, failpoint))
        return p

    def live(self) -> List[Tuple[subprocess.Popen, str]]:
        return [(p, fp) for p, fp in self.procs if p.poll() is None]

    def reap(self, dead_pending: Dict[int, float], consumed: int) -> None:
        """Records each producer that died since the last call; none may exit otherwise, except
        with status 0 once every batch is claimed: the consumer (consumed batches so far) is then
        within the ring's slots of the end, as producers are never more than that ahead."""
        seen = {pid for pid, _, _ in self.deaths}
        for n, (p, fp) in enumerate(self.procs):
            if p.pid in seen or p.poll() is None:
                continue
            if p.returncode == 0 and consumed >= BATCHES - 2 * SLOTS:
                continue
            assert p.returncode == -signal.SIGKILL, (
                f"producer pid {p.pid} (failpoint {fp or 'none'}) exited {p.returncode}: "
                f"{(self.logs / f'p{n}.log').read_text()[-2000:]}")
            now = time.monotonic()
            self.deaths.append((p.pid, fp or "kill -9", now))
            dead_pending[p.pid] = now

    def refill(self) -> None:
        """Starts joiners until POOL run; at most one of them armed with a failpoint at a time, so
        that a kill and a failpoint together still leave a producer."""
        live = self.live()
        armed = any(fp for _, fp in live)
        for _ in range(POOL - len(live)):
            fp = ""
            if not armed and self.rng.random() < 0.5:
                point = self.rng.choice(POINTS)
                fp = point if ":" in point else f"{point}:{self.rng.randint(1, 400)}"
                armed = True
            self.start(join=True, failpoint=fp)

    def kill_one(self, states: Dict[int, str]) -> None:
        """kill -9 of a random registered producer, when POOL of them are registered (so that
        with an armed one dying at the same time a producer is left)."""
        live = [p for p, _ in self.live() if states.get(p.pid) == "ACTIVE"]
        if len(live) < POOL:
            return
        self.rng.choice(live).kill()
        self.kills += 1


def test_long_stream_under_producer_kills(shm, tmp_path, ring_name):
    cfg = _cfg()
    rng = random.Random(20261202)
    path = write_config(tmp_path / "stream.json", cfg)
    logs = tmp_path / "logs"
    logs.mkdir()
    pool = Pool(ring_name, path, logs, rng)
    creator = pool.start(join=False)
    deaths_wanted = max(5, int(BATCHES * DEATHS_PER_BATCH))
    marks = sorted(rng.randrange(BATCHES // 50, BATCHES * 9 // 10) for _ in range(deaths_wanted))
    checker = Checker(cfg)
    times = np.zeros(BATCHES, dtype=np.float64)
    failure: List[BaseException] = []
    done = threading.Event()
    t0 = time.monotonic()
    try:
        wait_for(lambda: (shm / f"gobatch-{ring_name}").exists() or creator.poll() is not None, 10, "ring file")
        with gobatch.attach(ring_name, timeout=10) as ring:

            def supervise() -> None:
                """Replaces the dead, kills at the marks, times each takeover (registry)."""
                pending: Dict[int, float] = {}
                try:
                    while not done.is_set():
                        regs = registry(ring)
                        states = dict(regs)
                        now = time.monotonic()
                        for pid, seen in list(pending.items()):
                            if states.get(pid, "RECLAIMED") == "RECLAIMED":  # marked, or its entry reused
                                pool.takeover_s.append(now - seen)
                                del pending[pid]
                            elif states.get(pid) in ("DONE", "FAILED"):
                                del pending[pid]
                        pool.reap(pending, checker.k)
                        if checker.k < BATCHES * 95 // 100:  # near the end, joiners would find the stream done
                            pool.refill()
                            if marks and checker.k >= marks[0]:
                                marks.pop(0)
                                pool.kill_one(states)
                        time.sleep(0.001)
                except BaseException as e:  # noqa: BLE001  (reported by the main thread)
                    failure.append(e)

            sup = threading.Thread(target=supervise, daemon=True)
            sup.start()
            deadline = t0 + 1200
            for batch in ring:
                times[checker.k] = time.monotonic()
                checker.add(batch)
                del batch
                if failure or time.monotonic() > deadline:
                    break
            done.set()
            sup.join(10)
            if failure:
                raise failure[0]
            assert time.monotonic() <= deadline, f"stream not read within 1200 s (at batch {checker.k})"
            checker.check()
            assert checker.k == BATCHES, f"{checker.k} batches delivered, want {BATCHES}"
        creator.wait(timeout=20)
        assert creator.returncode in (0, -signal.SIGKILL), (creator.pid, creator.returncode)
        for n, (p, fp) in enumerate(pool.procs):
            p.wait(timeout=20)
            if p.returncode == 1 and p is not creator and "no ring" in (logs / f"p{n}.log").read_text():
                # A joiner started before 95 % of the stream whose exec took until after the
                # whole stream was read and the creator, done, had removed the ring (seen at
                # load 11 on 2 cores): harmless, since every batch was checked above.
                continue
            assert p.returncode in (0, -signal.SIGKILL), (p.pid, fp, p.returncode)
    finally:
        done.set()
        for p, _ in pool.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    took = time.monotonic() - t0
    deaths = pool.deaths
    assert len(deaths) >= deaths_wanted // 2, f"only {len(deaths)} producer deaths, want about {deaths_wanted}"
    gaps = [_gap_after(times, t) for _, _, t in deaths]
    worst_gap = max(gaps)
    worst_takeover = max(pool.takeover_s, default=0.0)
    armed = sum(1 for _, cause, _ in deaths if cause != "kill -9")
    print(f"\nFAULT {f'{BATCHES} batches, producers killed repeatedly':<50} {BATCHES}/{BATCHES} exactly once, in order, "
          f"0 torn; {len(deaths)} deaths ({len(deaths) - armed} kill -9, {armed} at failpoints), "
          f"{len(pool.procs)} producer processes in all; worst death -> RECLAIMED {1000 * worst_takeover:.0f} ms, "
          f"worst wait for a batch {1000 * worst_gap:.0f} ms; {took:.0f} s")
    assert worst_gap < RECOVER_S, f"waited {worst_gap:.3f} s for a batch after a death"


def _gap_after(times: np.ndarray, t: float) -> float:
    """The longest wait for a batch from t until 100 ms after the next delivery."""
    i = int(np.searchsorted(times, t))
    if i >= len(times):
        return 0.0
    later = times[i:i + 256]
    return float(max(later[0] - t, np.max(np.diff(later), initial=0.0)))
