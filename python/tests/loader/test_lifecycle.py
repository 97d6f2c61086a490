"""Issue 9, the consumer's lifecycle: sticky errors, stall warnings that name the producers'
state, the config dict handed over stdin (checked first, no temporary file), Loaders inside
torch DataLoader workers, stats()["batches"] as the batches delivered."""

from __future__ import annotations

import logging
import math
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import gobatch
from gobatch import ConfigError, GobatchWarning, LoaderError, RingError
from gobatch._config import json_config
from gobatch._ring import process_state
from fakering import FakeRing, starttime
from synthetic import PY, check_batch, config, process_gone, python_env, wait_for

pytestmark = pytest.mark.timeout(90)

SPEC = {"x": ((4, 3), "float32")}


def named_fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, **kw: object) -> FakeRing:
    """A FakeRing in a named segment of a private GOBATCH_SHM_DIR, for gobatch.attach."""
    monkeypatch.setenv("GOBATCH_SHM_DIR", str(tmp_path))
    fd = os.open(tmp_path / f"gobatch-{name}", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        return FakeRing(fd, SPEC, named=True, **kw)  # type: ignore[arg-type]
    finally:
        os.close(fd)  # the FakeRing keeps its mapping


# ---- sticky errors ----


def test_protocol_error_is_sticky_no_batch_is_skipped(tmp_path, monkeypatch):
    """A RingError (a slot holding the wrong batch) is raised again by every later next();
    before issue 9 the next call carried on with batch 2 in place of batch 1."""
    fr = named_fake(tmp_path, monkeypatch, "sticky", slots=4, total_batches=8)
    fr.publish(0)
    fr.publish(1, seq=7)  # batch 1's slot claims to hold batch 7
    fr.publish(2)
    fr.publish(3)
    with gobatch.attach("sticky") as ring:
        assert float(next(ring)["x"][0, 0]) == 0.0
        with pytest.raises(RingError, match="holds batch 7, expected batch 1") as first:
            next(ring)
        for _ in range(3):
            with pytest.raises(RingError) as again:
                next(ring)
            assert again.value is first.value  # the same error, not batch 2 or 3
            assert again.value.__traceback__ is not None
        assert ring.next_batch == 1 and ring.stats()["batches"] == 1  # batch 1 was never delivered
        with pytest.raises(RingError):
            for _ in ring:  # a for over a failed ring fails at once too
                raise AssertionError("a batch after the failure")


def test_producer_death_is_sticky_with_its_exit_status():
    cfg = config({"x": ((8,), "float32")}, size=2, slots=2, delay_ms=20)
    with gobatch.Loader(cfg, restarts=0) as loader:  # unsupervised: the death ends the stream
        check_batch(next(loader), cfg, 0)
        os.kill(loader.pid, signal.SIGKILL)
        with pytest.raises(LoaderError) as first:
            for _ in range(1000):
                next(loader)
        for _ in range(3):  # raised again at once: no wait for a producer that is gone (there is
            with pytest.raises(LoaderError) as again:  # none to wait for: a wait would not end)
                next(loader)
            assert again.value is first.value
        assert first.value.exit_code == -signal.SIGKILL


# ---- stall warnings ----


def publish_after_warnings(got: list, n: int, then, timeout: float = 60.0) -> threading.Thread:
    """Runs then() in a thread once n GobatchWarnings are in got (a warnings.catch_warnings
    record list the test thread fills while it waits for a batch)."""

    def run() -> None:
        wait_for(lambda: sum(issubclass(w.category, GobatchWarning) for w in list(got)) >= n, timeout,
                 f"{n} stall warnings")
        then()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t



def test_stall_warning_names_running_and_stopped_producers_and_repeats(tmp_path, monkeypatch, caplog):
    fr = named_fake(tmp_path, monkeypatch, "stall", slots=2, total_batches=4)
    stopped = subprocess.Popen(["sleep", "60"])
    try:
        os.kill(stopped.pid, signal.SIGSTOP)
        wait_for(lambda: process_state(stopped.pid).startswith("stopped"), 5, "sleep to stop")
        fr.register_producer(1, stopped.pid, starttime(stopped.pid))
        ring = gobatch.attach("stall", stall_warning_s=0.4)
        with caplog.at_level(logging.WARNING, logger="gobatch"), warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            # The batch comes once the wait has warned twice (an event, not a time: on a loaded
            # machine the warnings come later, and the test waits for them).
            publish_after_warnings(got, 2, lambda: fr.publish(0))
            batch = next(ring)  # the wait goes on through the warnings
        assert float(batch["x"][0, 0]) == 0.0
        stalls = [w for w in got if issubclass(w.category, GobatchWarning)]
        assert len(stalls) >= 2, [str(w.message) for w in stalls]
        text = str(stalls[0].message)
        assert re.search(r"no batch for \d+\.\d s \(waiting for stream batch 0, stall_warning_s=0\.4\)", text), text
        assert f"producer pid {os.getpid()} running" in text, text
        assert f"producer pid {stopped.pid} stopped (state T" in text, text
        assert stalls[0].filename == __file__  # pointed at the caller's next()
        records = [r for r in caplog.records if r.name == "gobatch" and r.levelno == logging.WARNING]
        assert [r.getMessage() for r in records] == [str(w.message) for w in stalls]
        ring.close()
    finally:
        stopped.kill()
        stopped.wait()


def test_stall_warning_as_error_ends_the_wait_without_breaking_the_stream(tmp_path, monkeypatch):
    fr = named_fake(tmp_path, monkeypatch, "stall-err", slots=2, total_batches=2)
    with gobatch.attach("stall-err", stall_warning_s=0.2) as ring:
        with warnings.catch_warnings():
            warnings.simplefilter("error", GobatchWarning)
            with pytest.raises(GobatchWarning, match="no batch for"):
                next(ring)
        fr.publish(0)
        fr.publish(1)
        assert [float(b["x"][0, 0]) for b in ring] == [0.0, 1.0]  # not sticky, nothing skipped


def test_loader_stall_warning_stopped_child_then_resumed():
    """SIGSTOP on the Loader's child: the wait warns, naming the child as stopped; after SIGCONT
    the stream goes on at the right batch."""
    cfg = config({"x": ((16,), "int32")}, size=2, slots=2)
    with gobatch.Loader(cfg, stall_warning_s=0.3) as loader:
        check_batch(next(loader), cfg, 0)
        os.kill(loader.pid, signal.SIGSTOP)
        try:
            with warnings.catch_warnings(record=True) as got:
                warnings.simplefilter("always")
                publish_after_warnings(got, 1, lambda: os.kill(loader.pid, signal.SIGCONT))  # resumed once warned
                for k in range(1, 6):  # the ring held up to 2 ready batches when it stopped
                    check_batch(next(loader), cfg, k)
        finally:
            os.kill(loader.pid, signal.SIGCONT)
        texts = [str(w.message) for w in got if issubclass(w.category, GobatchWarning)]
        assert texts, "no stall warning while the child was stopped"
        assert f"shmloader pid {loader.pid} (this loader's child) stopped (state T" in texts[0], texts[0]
        assert loader.stats()["batches"] == 6


def test_loader_stall_warning_running_child_names_its_batches():
    cfg = config({"x": ((4,), "float32")}, size=2, slots=2, delay_ms=1500)
    with gobatch.Loader(cfg, stall_warning_s=0.5) as loader:
        with pytest.warns(GobatchWarning, match=rf"shmloader pid {loader.pid} \(this loader's child\) running"):
            check_batch(next(loader), cfg, 0)


def test_loader_states_an_exited_child_by_its_exit_status():
    cfg = config({"x": ((4,), "float32")}, size=2, slots=2)
    with gobatch.Loader(cfg) as loader:
        os.kill(loader.pid, signal.SIGKILL)
        wait_for(lambda: loader.exit_code is not None, 5, "child reaped")
        assert loader._producer_states() == [f"shmloader pid {loader.pid} (this loader's child) was killed by SIGKILL"]


def test_process_state_words():
    assert process_state(os.getpid()).startswith("running")
    assert process_state(os.getpid(), starttime(os.getpid()) + 1) == "gone (its pid now names another process)"
    p = subprocess.Popen(["true"])
    wait_for(lambda: process_state(p.pid).startswith("a zombie"), 5, "a zombie")
    p.wait()
    assert process_state(p.pid) == "gone (no such process)"


def test_process_state_counts_threads_blocked_in_the_kernel(monkeypatch):
    """A Go producer's main thread sleeps while a reader thread is stuck in D (a hung mount):
    the state names the blocked threads. (D cannot be made on demand here: the task files
    are read through a stand-in that reports one thread of this process in D.)"""
    from gobatch import _ring

    pid = os.getpid()
    helper = threading.Thread(target=time.sleep, args=(2,), daemon=True)
    helper.start()
    tasks = os.listdir(f"/proc/{pid}/task")
    stuck = f"/proc/{pid}/task/{helper.native_id}/stat"
    real = _ring._stat_fields
    monkeypatch.setattr(_ring, "_stat_fields", lambda path: ["D"] + real(path)[1:] if path == stuck else real(path))
    state = process_state(pid)
    assert state == (f"running, 1 of {len(tasks)} threads in an uninterruptible wait (state D: a read blocked "
                     "in the kernel, e.g. a hung mount)"), state


def test_stall_warning_s_is_checked():
    for bad in (0, -1, math.nan, math.inf, "30", True):
        with pytest.raises(ValueError, match="stall_warning_s"):
            gobatch.Loader(config({"x": ((1,), "float32")}), stall_warning_s=bad)
        with pytest.raises(ValueError, match="stall_warning_s"):
            gobatch.attach("no-such-ring", stall_warning_s=bad)


# ---- the config dict: checked here, handed over stdin ----


@pytest.mark.parametrize("where, value, want", [
    ("delay", math.nan, r"<config dict> source\[0\]\.delay_ms: nan cannot be written.*finite number"),
    ("shape", math.inf, r"<config dict> source\[0\]\.shape\[1\]: inf cannot be written"),
    ("key", None, r"<config dict> batch: key 3 is a int; configuration keys are strings"),
    ("object", Path("/data"), r"<config dict> source\[0\]\.store: a pathlib\.PosixPath \(PosixPath\('/data'\)\)"),
    ("numpy", np.int64(4), r"<config dict> batch\.size: a numpy\.int64 \(.*4\)\) cannot be written.*int\(\)"),
])
def test_values_json_cannot_carry_are_refused_before_start(monkeypatch, where, value, want):
    cfg = config({"x": ((2, 3), "float32")})
    if where == "delay":
        cfg["source"][0]["delay_ms"] = value
    elif where == "shape":
        cfg["source"][0]["shape"][1] = value
    elif where == "key":
        cfg["batch"][3] = 1
    elif where == "object":
        cfg["source"][0]["store"] = value
    else:
        cfg["batch"]["size"] = value

    def no_child(*a: object, **k: object) -> None:
        raise AssertionError("a child was started for a config dict that cannot be written")

    monkeypatch.setattr(subprocess, "Popen", no_child)
    monkeypatch.setattr(subprocess, "run", no_child)
    with pytest.raises(ConfigError, match=want):
        gobatch.Loader(cfg)
    with pytest.raises(ConfigError, match=want):
        gobatch.plan(cfg)


def test_a_dict_that_contains_itself_is_refused():
    cfg = config({"x": ((2,), "float32")})
    cfg["source"][0]["more"] = cfg["source"]
    with pytest.raises(ConfigError, match=r"source\[0\]\.more: the value contains itself"):
        json_config(cfg)


def test_child_error_names_the_dict_line_and_key_path():
    cfg = config({"x": ((2,), "float32"), "y": ((3,), "float33")})
    lines = json_config(cfg).decode().splitlines()
    line = 1 + next(i for i, s in enumerate(lines) if '"float33"' in s)
    with pytest.raises(ConfigError, match=rf"<config dict>:{line}: source\[1\]\.dtype: unknown dtype \"float33\""):
        gobatch.Loader(cfg)
    with pytest.raises(ConfigError, match=rf"<config dict>:{line}: source\[1\]\.dtype"):
        gobatch.plan(cfg)


def test_dict_config_reaches_the_child_over_a_pipe_no_file(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where a temporary file would go
    cfg = config({"x": ((3,), "int64")}, size=2, batches=5, slots=2)
    with gobatch.Loader(cfg) as loader:
        assert os.readlink(f"/proc/{loader.pid}/fd/0").startswith("pipe:")
        assert list(tmp_path.iterdir()) == []
        for k, batch in enumerate(loader):
            check_batch(batch, cfg, k)
        assert k == 4


@pytest.mark.parametrize("size", [100, 300_000, 3_000_000])
def test_stdin_pipe_holds_the_whole_document(size):
    """Small and large documents (the largest over pipe-max-size, fed by a thread) arrive whole,
    then end of file."""
    from gobatch._config import stdin_pipe

    doc = bytes(range(256)) * (size // 256 + 1)
    r = stdin_pipe(doc)
    try:
        with os.fdopen(os.dup(r), "rb") as f:
            assert f.read() == doc
    finally:
        os.close(r)


STARTING = """
import sys, gobatch
from synthetic import config
gobatch.Loader(config({"x": ((4,), "float32")}, size=2, slots=2), start_timeout=60)
"""


def test_trainer_killed_during_start_up_leaves_nothing(tmp_path):
    """The trainer dies while its Loader waits for the child's ring: no file remains (before
    issue 9 the temporary gobatch-config-*.json stayed in TMPDIR)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    pidfile = tmp_path / "child.pid"
    slow = tmp_path / "slow-shmloader"
    slow.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 30\n")
    slow.chmod(0o755)
    env = python_env()
    env.update(TMPDIR=str(tmp), GOBATCH_SHMLOADER=str(slow))
    p = subprocess.Popen([PY, "-c", STARTING], env=env)
    try:
        wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), 20, "the child to start")
        child = int(pidfile.read_text())
        time.sleep(0.2)  # the trainer is in Loader.__init__, waiting for the ring
        assert p.poll() is None
        p.kill()
        p.wait()
        assert list(tmp.iterdir()) == []
        assert os.readlink(f"/proc/{child}/fd/0").startswith("pipe:")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if pidfile.exists():
            try:
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass


# ---- DataLoader workers ----


def _worker_dataset(cfg, per_worker: int):
    import torch

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            with gobatch.Loader(cfg) as loader:
                for _, batch in zip(range(per_worker), loader):
                    yield {"x": batch["x"].copy(), "rank": loader.rank, "world": loader.world_size,
                           "pid": os.getpid()}

    return Stream()


def test_dataloader_workers_take_disjoint_shares():
    torch = pytest.importorskip("torch")
    cfg = config({"x": ((2,), "int64")}, size=3, slots=2)
    per_worker = 6
    dl = torch.utils.data.DataLoader(_worker_dataset(cfg, per_worker), batch_size=None, num_workers=2)
    got = list(dl)
    assert len(got) == 2 * per_worker
    assert {(int(b["rank"]), int(b["world"])) for b in got} == {(0, 2), (1, 2)}
    assert len({int(b["pid"]) for b in got}) == 2
    # Taken in turn, as the DataLoader does, the workers' batches are the stream itself.
    for k, b in enumerate(got):
        check_batch({"x": b["x"].numpy()}, cfg, k)


def test_dataloader_workers_share_a_ranks_share():
    torch = pytest.importorskip("torch")
    cfg = config({"x": ((2,), "int64")}, size=3, slots=2)
    per_worker = 4
    seen = {}
    for rank in range(2):
        dl = torch.utils.data.DataLoader(_ranked(cfg, per_worker, rank), batch_size=None, num_workers=2)
        seen[rank] = [int(b["x"][0, 0]) // 3 for b in dl]  # the global batch of each
    # Rank r's workers are ranks 2r and 2r+1 of 4: global batches k*4 + 2r + w.
    assert seen[0] == [0, 1, 4, 5, 8, 9, 12, 13]
    assert seen[1] == [2, 3, 6, 7, 10, 11, 14, 15]


def _ranked(cfg, per_worker, rank):
    import torch

    class Ranked(torch.utils.data.IterableDataset):
        def __iter__(self):
            with gobatch.Loader(cfg, rank=rank, world_size=2) as loader:
                assert (loader.rank, loader.world_size) == (rank * 2 + torch.utils.data.get_worker_info().id, 4)
                for _, batch in zip(range(per_worker), loader):
                    yield {"x": batch["x"].copy()}

    return Ranked()


def test_outside_a_worker_rank_is_unchanged():
    pytest.importorskip("torch")
    with gobatch.Loader(config({"x": ((1,), "float32")}, size=1, slots=2)) as loader:
        assert (loader.rank, loader.world_size) == (0, 1)


# ---- stats ----


def test_stats_batches_counts_the_batches_delivered():
    cfg = config({"x": ((5,), "uint8")}, size=2, batches=4, slots=2)
    with gobatch.Loader(cfg) as loader:
        assert loader.stats()["batches"] == 0
        next(loader)
        s = loader.stats()
        assert s["batches"] == 1 and s["bytes"] == loader._geom.slot_bytes  # the held one counts
        next(loader)
        next(loader)
        assert loader.stats()["batches"] == 3
        loader.release()
        assert loader.stats()["batches"] == 3
        next(loader)
        with pytest.raises(StopIteration):
            next(loader)
        assert loader.stats()["batches"] == 4
