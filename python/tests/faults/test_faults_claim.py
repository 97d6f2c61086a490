"""Fault trials on the consumer side (docs/PROTOCOL.md 3.5.1, appendix A).

A process stops itself at an exact protocol state through GOBATCH_FAILPOINT (the C library
reads it when it is loaded; shmloader's ring package when it starts). Each trial is bounded in
time, asserts detection within 1 s and a clear error, and that nothing is left in the trial's
private GOBATCH_SHM_DIR. GOBATCH_FAULT_REPS repeats each trial (``make faults``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

import gobatch
from gobatch import LoaderError, RingError
from faultharness import REPS, record, shm  # noqa: F401  (shm is a fixture)
from synthetic import PY, check_batch, config, python_env, run_shmloader, wait_for, write_config

pytestmark = pytest.mark.timeout(300)

DETECT_S = 1.0
_record = record


class Child:
    """A process whose death time is recorded by a waiting thread."""

    def __init__(self, args: List[str], env: Dict[str, str]) -> None:
        self.proc = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.died = 0.0
        self._t = threading.Thread(target=self._wait, daemon=True)
        self._t.start()

    def _wait(self) -> None:
        self.proc.wait()
        self.died = time.monotonic()

    def dead_by_failpoint(self, timeout: float = 10) -> float:
        self._t.join(timeout)
        assert not self._t.is_alive(), f"{self.proc.args} did not reach its failpoint in {timeout} s"
        assert self.proc.returncode == -signal.SIGKILL, (self.proc.returncode, self.proc.stderr.read().decode())
        return self.died

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self._t.join(10)


def _producer(tmp_path: Path, shm: Path, name: str, batches: int, extra: Tuple[str, ...] = (), env=None):
    cfg = config({"a": ((4,), "int64")}, size=2, batches=batches, slots=4)
    path = write_config(tmp_path / f"c-{name}.json", cfg)
    proc = run_shmloader(["run", "--config", str(path), "--ring", name, *extra], stderr=subprocess.PIPE, env=env)
    if not extra:
        wait_for(lambda: (shm / f"gobatch-{name}").exists() or proc.poll() is not None, 10, "ring file")
    return cfg, proc


CONSUMER = """
import sys, gobatch
ring = gobatch.attach(sys.argv[1], timeout=10)
for b in ring:
    pass
"""


def _consumer(name: str, failpoint: str) -> Child:
    env = python_env()
    env["GOBATCH_FAILPOINT"] = failpoint
    return Child([PY, "-c", CONSUMER, name], env)


@pytest.mark.parametrize("via_gc", [False, True], ids=["next-attach", "gc"])
def test_consumer_dies_claiming_claim_is_reclaimed(tmp_path, shm, ring_name, via_gc):
    """A consumer killed between CLAIMING and ATTACHED: the next attach() takes the claim over
    (or `shmloader gc` resets it first) and reads the whole stream; the producer ends normally."""
    for rep in range(REPS):
        name = f"{ring_name}-{rep}"
        cfg, proc = _producer(tmp_path, shm, name, batches=12)
        try:
            died = _consumer(name, "consumer-claiming").dead_by_failpoint()
            if via_gc:
                out = subprocess.run([gobatch.shmloader_path(), "gc", "--json"], capture_output=True, text=True, timeout=20)
                assert out.returncode == 0, out.stderr
                verdict = json.loads(out.stdout.splitlines()[0])
                assert not verdict["removed"] and "reclaimed the consumer claim of dead pid" in verdict["reason"], verdict
                assert (shm / f"gobatch-{name}").exists()
            with gobatch.attach(name, timeout=5) as ring:
                lat = time.monotonic() - died
                for k in range(12):
                    check_batch(next(ring), cfg, k)
                with pytest.raises(StopIteration):
                    next(ring)
            assert proc.wait(timeout=10) == 0, proc.stderr.read().decode()
            _record(f"consumer dies CLAIMING, reclaimed by {'gc' if via_gc else 'attach'}", lat)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.parametrize("failpoint", ["consumer-attached", "consumer-reading:3", "consumer-released:3"])
def test_consumer_dies_producer_exits(tmp_path, shm, ring_name, failpoint):
    """A consumer killed ATTACHED, holding a slot READING, or right after a release: the
    producer exits with status 3 within 1 s and unlinks the ring; a new attach is refused."""
    for rep in range(REPS):
        name = f"{ring_name}-{rep}"
        _, proc = _producer(tmp_path, shm, name, batches=0)
        try:
            died = _consumer(name, failpoint).dead_by_failpoint()
            rc = proc.wait(timeout=5)
            lat = time.monotonic() - died
            assert rc == 3, proc.stderr.read().decode()
            assert lat < DETECT_S, f"producer exited {lat:.3f} s after the consumer's death"
            assert not (shm / f"gobatch-{name}").exists()
            _record(f"consumer dies at {failpoint}", lat)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.parametrize("failpoint", ["slot-ready:4", "slot-writing:4", "slot-claimed:4"])
def test_only_producer_dies_consumer_reports_it(tmp_path, shm, ring_name, failpoint):
    """The only producer of a named ring dies (holding a claim, or just after publishing): no live
    producer is left to take its batches over (PROTOCOL.md 3.5 step 2, 3.7), so the Python
    consumer raises LoaderError naming its pid within 1 s, and its close removes the orphaned
    name. (With survivors the batches are taken over instead: test_faults_producer.py.)"""
    for rep in range(REPS):
        name = f"{ring_name}-{rep}"
        cfg = config({"a": ((4,), "int64")}, size=2, batches=0, slots=4)
        path = write_config(tmp_path / f"c-{name}.json", cfg)
        creator = Child([gobatch.shmloader_path(), "run", "--config", str(path), "--ring", name],
                        dict(os.environ, GOBATCH_FAILPOINT=failpoint))
        try:
            wait_for(lambda: (shm / f"gobatch-{name}").exists() or creator.proc.poll() is not None, 10, "ring file")
            with gobatch.attach(name, timeout=5) as ring:
                t_end = time.monotonic() + 10
                with pytest.raises(LoaderError, match=rf"producer pid {creator.proc.pid} died") as ei:
                    while time.monotonic() < t_end:
                        next(ring)
                seen = time.monotonic()
                died = creator.dead_by_failpoint()
                lat = max(seen - died, 0.0)
                assert lat < DETECT_S, f"seen {lat:.3f} s after the death"
                assert not isinstance(ei.value, RingError) or "died" in str(ei.value)
            _record(f"only producer dies at {failpoint}", lat)
        finally:
            creator.kill()


def _stat_producers(name: str) -> list:
    """The producers `shmloader stat --once --json` lists for ring name ([] while it cannot
    read the ring yet)."""
    out = subprocess.run([gobatch.shmloader_path(), "stat", "--once", "--json", "--interval", "20ms", name],
                         capture_output=True, text=True, timeout=20)
    return json.loads(out.stdout.splitlines()[0])["producers"] if out.returncode == 0 and out.stdout else []


def test_stat_shows_a_stopped_producer(tmp_path, shm, ring_name):
    _, proc = _producer(tmp_path, shm, ring_name, batches=0)
    try:
        # The file exists before its header and the producer's entry are written: stopping the
        # producer in between would leave stat nothing to show. Stop it once stat sees it.
        wait_for(lambda: _stat_producers(ring_name), 10, "the ring's header and producer entry")
        os.kill(proc.pid, signal.SIGSTOP)
        wait_for(lambda: open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "T", 5, "stopped")
        out = subprocess.run([gobatch.shmloader_path(), "stat", "--once", "--json", "--interval", "20ms", ring_name],
                             capture_output=True, text=True, timeout=20)
        assert out.returncode == 0, out.stderr
        v = json.loads(out.stdout.splitlines()[0])
        assert v["producers"][0]["pid"] == proc.pid and v["producers"][0]["stopped"] is True, v
        text = subprocess.run([gobatch.shmloader_path(), "stat", "--once", "--interval", "20ms", ring_name],
                              capture_output=True, text=True, timeout=20).stdout
        assert f"pid {proc.pid} (stopped)" in text, text
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        proc.wait(timeout=10)
        if (shm / f"gobatch-{ring_name}").exists():  # terminated before any consumer came
            os.unlink(shm / f"gobatch-{ring_name}")


def test_stat_and_join_say_permission_denied(tmp_path, ring_name):
    """A ring the caller may not open is reported as such at once, not as 'not initialised in
    time' after the attach timeout. Run as another user: as root, through setpriv to nobody;
    otherwise against a file of mode 0000."""
    d = Path(tempfile.mkdtemp(prefix="gobatch-perm-"))
    try:
        os.chmod(d, 0o755)
        (d / f"gobatch-{ring_name}").write_bytes(b"\0" * 8192)
        os.chmod(d / f"gobatch-{ring_name}", 0o600 if os.geteuid() == 0 else 0)
        prefix: List[str] = []
        if os.geteuid() == 0:
            if not shutil.which("setpriv"):
                pytest.skip("root without setpriv: cannot run as another user")
            prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        env = dict(os.environ, GOBATCH_SHM_DIR=str(d))
        env.pop("GOBATCH_FAILPOINT", None)
        cfg = write_config(d / "c.json", config({"a": ((4,), "int64")}, size=2, batches=1, slots=2))
        os.chmod(cfg, 0o644)
        for args in (["stat", "--once", ring_name], ["run", "--config", str(cfg), "--ring", ring_name, "--join"]):
            t0 = time.monotonic()
            out = subprocess.run(prefix + [gobatch.shmloader_path(), *args], capture_output=True, text=True,
                                 timeout=30, env=env)
            assert out.returncode != 0
            assert "permission denied" in out.stderr and "not initialised in time" not in out.stderr, out.stderr
            assert time.monotonic() - t0 < 2.0, "the refusal waited"
    finally:
        shutil.rmtree(d)
