"""Fault trials: the trainer killed with kill -9 at a random point of its iteration (issue 9:
"100/100 trainer kills with nothing left"; docs/PROTOCOL.md 3.5, producers case 1).

The trainer is a Python process that iterates a ring and checks each batch: its Loader's own
memfd ring (the child must exit within 1 s: its watchdog sees the consumer's death, or its
parent's), or a named ring made by a ``shmloader run`` (the producer must exit with status 3
within 1 s and unlink the ring's name). Either way nothing may be left: no process, no file in
the trial's ring directory (the ``shm`` fixture checks it is empty). GOBATCH_FAULT_REPS repeats
each trial (``make faults``); each prints a FAULT line with the worst time from the kill to the
producer's exit."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time

import pytest

from faultharness import REPS, record, shm  # noqa: F401  (shm is a fixture)
from synthetic import PY, config, process_gone, python_env, run_shmloader, wait_for, write_config

pytestmark = pytest.mark.timeout(600)

EXIT_WITHIN_S = 1.0

# The trainer: iterates (checking each batch's index in its data), prints the producer's pid
# and then one line per 10 batches, until it is killed.
TRAINER = """
import sys, gobatch
from synthetic import check_batch, config
cfg = config({"x": ((64,), "float32")}, size=2, slots=4, delay_ms=1)
ring = gobatch.Loader(cfg) if sys.argv[1] == "loader" else gobatch.attach(sys.argv[2])
print(ring.pid if sys.argv[1] == "loader" else "attached", flush=True)
for k, batch in enumerate(ring):
    check_batch(batch, cfg, k)
    if k % 10 == 0:
        print(k, flush=True)
"""


def _kill_trainer_at_random(trainer: subprocess.Popen, rng: random.Random) -> float:
    """Waits for the trainer's first batches, kills it at a random point after them, and
    returns the time of the kill."""
    assert trainer.stdout is not None
    assert trainer.stdout.readline().strip() == b"0", "the trainer read no batch"
    time.sleep(rng.uniform(0.0, 0.2))
    trainer.kill()
    t = time.monotonic()
    trainer.wait()
    return t


def test_loader_trainer_killed_child_exits(shm):
    """The trainer owns a Loader (memfd ring, supervised child): its child exits within 1 s."""
    rng = random.Random(9)
    for _ in range(REPS):
        trainer = subprocess.Popen([PY, "-c", TRAINER, "loader"], stdout=subprocess.PIPE, env=python_env())
        try:
            assert trainer.stdout is not None
            child = int(trainer.stdout.readline())
            t = _kill_trainer_at_random(trainer, rng)
            took = wait_for(lambda: process_gone(child), 5, f"shmloader pid {child} to exit", step=0.001)
            gone = time.monotonic() - t
        finally:
            if trainer.poll() is None:
                trainer.kill()
                trainer.wait()
        assert gone < EXIT_WITHIN_S, f"the child outlived the trainer by {gone:.3f} s (waited {took:.3f} s)"
        record("trainer (Loader, memfd) killed at random: child exits", gone, "nothing left")


def test_attached_trainer_killed_producer_exits_and_unlinks(shm, tmp_path, ring_name):
    """The trainer attached to a named ring: its producer exits 3 within 1 s and unlinks the name."""
    rng = random.Random(10)
    cfg = config({"x": ((64,), "float32")}, size=2, slots=4, delay_ms=1)
    path = write_config(tmp_path / "c.json", cfg)
    for rep in range(REPS):
        name = f"{ring_name}-{rep}"
        prod = run_shmloader(["run", "--config", str(path), "--ring", name], stderr=subprocess.PIPE)
        trainer = None
        try:
            wait_for(lambda: (shm / f"gobatch-{name}").exists() or prod.poll() is not None, 10, "ring file")
            trainer = subprocess.Popen([PY, "-c", TRAINER, "attach", name], stdout=subprocess.PIPE, env=python_env())
            assert trainer.stdout is not None
            assert trainer.stdout.readline().strip() == b"attached"
            t = _kill_trainer_at_random(trainer, rng)
            code = prod.wait(timeout=5)
            gone = time.monotonic() - t
            assert code == 3, (code, prod.stderr.read().decode() if prod.stderr else "")
            assert not (shm / f"gobatch-{name}").exists(), "the producer left the ring's name behind"
        finally:
            for p in (prod, trainer):
                if p is not None and p.poll() is None:
                    p.kill()
                    p.wait()
        assert gone < EXIT_WITHIN_S, f"the producer outlived the trainer by {gone:.3f} s"
        record("trainer (attached) killed at random: producer exits 3", gone, "nothing left")
