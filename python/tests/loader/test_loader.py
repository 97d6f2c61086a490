"""gobatch.Loader and gobatch.attach against real shmloader processes with synthetic sources."""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import subprocess
import textwrap
import time

import numpy as np
import pytest

import gobatch
from gobatch import ConfigError, LoaderError, RingError
from synthetic import (
    PY,
    check_batch,
    config,
    mapping_of,
    process_gone,
    python_env,
    run_shmloader,
    wait_for,
    write_config,
)

pytestmark = pytest.mark.timeout(90)

SOURCES = {
    "x": ((3, 5), "float32"),
    "y": ((2,), "int64"),
    "z": ((7,), "uint8"),
    "w": ((), "float64"),
    "i": ((2, 2, 2), "int32"),
}


def data_range(ring: gobatch.Ring) -> tuple[int, int]:
    """Address range of the ring's payload mapping."""
    base = np.frombuffer(ring._mm, dtype=np.uint8).__array_interface__["data"][0]
    return base, base + len(ring._mm)


def slot_address(ring: gobatch.Ring, slot: int, name: str) -> int:
    g = ring._geom
    return data_range(ring)[0] + g.payload_offset + slot * g.slot_stride + ring.specs[name].offset


# ---- numpy ----


def test_loader_numpy_every_value_zero_copy_writable():
    cfg = config(SOURCES, size=6, batches=23, slots=3)
    with gobatch.Loader(cfg) as loader:
        assert len(loader) == 23 and loader.slots == 3 and loader.batch_size == 6
        assert {n: s.shape for n, s in loader.specs.items()} == {
            "x": (6, 3, 5), "y": (6, 2), "z": (6, 7), "w": (6,), "i": (6, 2, 2, 2)}
        lo, hi = data_range(loader)
        line = mapping_of(lo)
        assert line is not None and "memfd:gobatch" in line, line
        k = 0
        for batch in loader:
            check_batch(batch, cfg, k)
            for name, arr in batch.items():
                addr = arr.__array_interface__["data"][0]
                assert lo <= addr and addr + arr.nbytes <= hi  # inside the shared mapping: no copy
                assert addr == slot_address(loader, k % 3, name)
                assert arr.flags.writeable
            before = batch["x"].copy()
            batch["x"] -= 1.0  # in place, as a normalisation does: this batch only (the
            np.testing.assert_array_equal(batch["x"], before - 1.0)  # next ones are checked whole)
            k += 1
        assert k == 23
        with pytest.raises(StopIteration):
            next(loader)
        s = loader.stats()
        assert s["batches"] == 23
        assert s["bytes"] == 23 * loader._geom.slot_bytes
        for key in ("consumer_wait_s", "producer_wait_s", "batches_per_s", "bytes_per_s"):
            assert s[key] >= 0
        pid = loader.pid
    assert process_gone(pid)
    assert loader.exit_code == 0


def test_loader_large_batches_use_2mib_alignment():
    cfg = config({"big": ((512, 1024), "float32"), "small": ((3,), "int64")}, size=2, batches=6, slots=2)
    with gobatch.Loader(cfg, framework="torch") as loader:
        g = loader._geom
        assert g.payload_align == 2097152 and g.payload_offset % 2097152 == 0 and g.slot_stride % 2097152 == 0
        for k, batch in enumerate(loader):
            check_batch(batch, cfg, k)
        assert k == 5


def test_loader_several_readers_many_laps():
    """Several writer goroutines publish out of order; the consumer sees stream order."""
    cfg = config({"a": ((5,), "int32"), "b": ((2, 2), "float64")}, size=3, batches=300, slots=3)
    with gobatch.Loader(cfg, readers=3) as loader:
        n = 0
        for k, batch in enumerate(loader):
            check_batch(batch, cfg, k)
            n += 1
        assert n == 300 and loader.stats()["batches"] == 300


def test_second_producer_process_joins_named_ring(tmp_path, ring_name):
    cfg = config({"a": ((4,), "int64")}, size=2, batches=120, slots=4, delay_ms=5)
    path = write_config(tmp_path / "c.json", cfg)
    first = run_shmloader(["run", "--config", str(path), "--ring", ring_name, "--readers", "1"], stderr=subprocess.PIPE)
    second = None
    try:
        wait_for(lambda: os.path.exists(f"/dev/shm/gobatch-{ring_name}"), 10, "ring file")
        with gobatch.attach(ring_name) as ring:
            check_batch(next(ring), cfg, 0)
            second = run_shmloader(["run", "--config", str(path), "--ring", ring_name, "--join", "--readers", "1"],
                                   stderr=subprocess.PIPE)
            producers = 1
            for k in range(1, 120):
                check_batch(next(ring), cfg, k)
                producers = max(producers, ring.stats()["producers"])
            with pytest.raises(StopIteration):
                next(ring)
            assert producers == 2
        assert first.wait(timeout=5) == 0, first.stderr.read().decode()
        assert second.wait(timeout=5) == 0, second.stderr.read().decode()
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


def test_loader_toml_config_and_unbounded_len(tmp_path):
    toml = tmp_path / "ring.toml"
    toml.write_text(textwrap.dedent("""
        [batch]
        size = 3
        batches = 0

        [ring]
        slots = 2

        [[source]]
        name = "a"
        kind = "synthetic"
        shape = [4]
        dtype = "int32"
    """))
    cfg = config({"a": ((4,), "int32")}, size=3)
    with gobatch.Loader(str(toml)) as loader:
        with pytest.raises(TypeError, match="no len"):
            len(loader)
        for k in range(50):
            check_batch(next(loader), cfg, k)
        pid = loader.pid
    wait_for(lambda: process_gone(pid), 2, "shmloader exit after close")


def test_loader_start_resumes_the_stream():
    cfg = config({"a": ((2,), "int64"), "b": ((3,), "float32")}, size=4, slots=2)
    with gobatch.Loader(cfg, start=1000) as loader:
        assert loader.start_batch == 1000
        for k in range(1000, 1010):
            check_batch(next(loader), cfg, k)
        assert loader.stats()["next_index"] == 1010


def test_config_error_names_the_field():
    cfg = config({"x": ((3,), "float33")})
    with pytest.raises(ConfigError, match=r"source\[0\]\.dtype"):
        gobatch.Loader(cfg)
    with pytest.raises(ConfigError, match="does not exist"):
        gobatch.Loader("/nonexistent/gobatch.toml")
    bad = config({"x": ((3,), "float32")})
    bad["batch"]["size"] = 0
    with pytest.raises(ConfigError, match=r"batch\.size"):
        gobatch.Loader(bad)


def test_bad_arguments_refused_before_start():
    cfg = config({"x": ((1,), "float32")})
    with pytest.raises(ValueError, match="framework"):
        gobatch.Loader(cfg, framework="jax")
    with pytest.raises(ValueError, match="readers"):
        gobatch.Loader(cfg, readers=0)


def test_shmloader_override(monkeypatch, tmp_path):
    monkeypatch.setenv("GOBATCH_SHMLOADER", str(tmp_path / "missing"))
    with pytest.raises(LoaderError, match="missing"):
        gobatch.Loader(config({"x": ((1,), "float32")}))


def test_dropped_loader_stops_its_child():
    loader = gobatch.Loader(config({"x": ((4,), "float32")}, size=2, slots=2))
    next(loader)
    pid = loader.pid
    del loader
    gc.collect()
    assert process_gone(pid)


def test_loader_made_on_a_thread_that_exits_keeps_working():
    """PR_SET_PDEATHSIG fires when the thread that started the child exits; the child must
    outlive that thread (shmloader checks getppid on that signal)."""
    import threading

    cfg = config({"x": ((4,), "int32")}, size=2, slots=2)
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("loader", gobatch.Loader(cfg)))
    t.start()
    t.join()
    with box.pop("loader") as loader:
        time.sleep(0.3)
        for k in range(20):
            check_batch(next(loader), cfg, k)
        assert loader.exit_code is None


def test_close_from_another_thread_while_waiting():
    import threading

    loader = gobatch.Loader(config({"x": ((4,), "float32")}, size=2, slots=2, delay_ms=60000))
    pid = loader.pid
    threading.Timer(0.3, loader.close).start()
    with pytest.raises(LoaderError, match="closed"):  # the batch would take 60 s: the close ends the wait
        next(loader)
    wait_for(lambda: process_gone(pid), 30, "shmloader exit")


# ---- torch ----


def test_loader_torch_zero_copy_and_in_place_writes():
    torch = pytest.importorskip("torch")
    cfg = config(SOURCES, size=4, batches=9, slots=2)
    with gobatch.Loader(cfg, framework="torch") as loader:
        lo, hi = data_range(loader)
        for k in range(4):
            batch = next(loader)
            assert all(isinstance(t, torch.Tensor) for t in batch.values())
            check_batch(batch, cfg, k)
            for name, t in batch.items():
                assert t.data_ptr() == slot_address(loader, k % 2, name)
                assert lo <= t.data_ptr() < hi
                assert t.data_ptr() == t.numpy().__array_interface__["data"][0]
        assert batch["x"].dtype == torch.float32 and batch["z"].dtype == torch.uint8
        before = {name: t.clone() for name, t in batch.items()}
        batch["y"].add_(1)  # in-place writes into shared memory: this batch only
        batch["x"].sub_(0.5).div_(2.0)
        assert torch.equal(batch["y"], before["y"] + 1)
        assert torch.equal(batch["x"], (before["x"] - 0.5) / 2.0)
        del batch, t  # the loop's t is a tensor of batch 3 too
        for k in range(4, 9):  # the written slot's next batch is the producer's, unchanged
            check_batch(next(loader), cfg, k)
        with pytest.raises(StopIteration):
            next(loader)


# ---- attach to a standalone named ring ----


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_attach_named_ring(tmp_path, ring_name, framework):
    cfg = config({"x": ((2, 3), "float32"), "n": ((1,), "int64")}, size=5, batches=12, slots=3)
    path = write_config(tmp_path / "c.json", cfg)
    proc = run_shmloader(["run", "--config", str(path), "--ring", ring_name], stderr=subprocess.PIPE)
    try:
        wait_for(lambda: os.path.exists(f"/dev/shm/gobatch-{ring_name}") or proc.poll() is not None, 10, "ring file")
        with gobatch.attach(ring_name, framework=framework) as ring:
            with pytest.raises(RingError, match="already has a consumer"):
                gobatch.attach(ring_name)
            n = 0
            for k, batch in enumerate(ring):
                check_batch(batch, cfg, k)
                n += 1
            assert n == 12
        assert proc.wait(timeout=5) == 0, proc.stderr.read().decode()
        assert not os.path.exists(f"/dev/shm/gobatch-{ring_name}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---- lifetimes ----


def test_shmloader_killed_raises_loader_error_quickly():
    cfg = config({"x": ((8,), "float32")}, size=2, slots=2, delay_ms=20)
    with gobatch.Loader(cfg, restarts=0) as loader:  # unsupervised: the death ends the stream
        next(loader)
        os.kill(loader.pid, signal.SIGKILL)
        with pytest.raises(LoaderError) as ei:  # how soon: tests/faults/test_faults_producer.py
            for _ in range(10_000):
                next(loader)
        msg = str(ei.value)
        assert "died" in msg or "SIGKILL" in msg, msg
        assert ei.value.exit_code == -signal.SIGKILL
        with pytest.raises(LoaderError):
            next(loader)  # stays failed
    assert loader.closed


CONSUMER = """
import sys, time, gobatch
from synthetic import config
mode = sys.argv[1]
if mode == "loader":
    ring = gobatch.Loader(config({"x": ((64,), "float32")}, size=2, slots=2))
    print(ring.pid, flush=True)
else:
    ring = gobatch.attach(sys.argv[2])
    print("attached", flush=True)
next(ring)
print("holding", flush=True)
time.sleep(60)
"""


def test_trainer_killed_stops_memfd_shmloader():
    p = subprocess.Popen([PY, "-c", CONSUMER, "loader"], stdout=subprocess.PIPE, env=python_env())
    try:
        pid = int(p.stdout.readline())
        assert p.stdout.readline().strip() == b"holding"
        assert not process_gone(pid)
        p.kill()
        p.wait()
        wait_for(lambda: process_gone(pid), 30, f"shmloader pid {pid} to exit")  # how soon: test_faults_trainer.py
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_trainer_killed_stops_named_shmloader_and_unlinks(tmp_path, ring_name):
    path = write_config(tmp_path / "c.json", config({"x": ((64,), "float32")}, size=2, slots=2))
    prod = run_shmloader(["run", "--config", str(path), "--ring", ring_name])
    cons = None
    try:
        wait_for(lambda: os.path.exists(f"/dev/shm/gobatch-{ring_name}"), 10, "ring file")
        cons = subprocess.Popen([PY, "-c", CONSUMER, "attach", ring_name], stdout=subprocess.PIPE, env=python_env())
        assert cons.stdout.readline().strip() == b"attached"
        assert cons.stdout.readline().strip() == b"holding"
        cons.kill()
        cons.wait()
        code = prod.wait(timeout=30)  # how soon: test_faults_trainer.py
        assert code == 3  # the consumer died
        assert not os.path.exists(f"/dev/shm/gobatch-{ring_name}")
    finally:
        for p in (prod, cons):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


def _fork_child(loader, q):
    try:
        try:
            next(loader)
            q.put("no error")
            return
        except LoaderError as e:
            first = str(e)
        try:
            loader.stats()
            q.put("stats worked")
            return
        except LoaderError:
            pass
        del loader
        gc.collect()  # the child's GC must not release, unregister or stop anything
        q.put("ok: " + first)
    except BaseException as e:  # report anything else
        q.put(f"unexpected {e!r}")


def test_fork_child_gets_loader_error_parent_continues():
    cfg = config({"x": ((4,), "int64")}, size=2, batches=40, slots=3)
    with gobatch.Loader(cfg) as loader:
        for k in range(5):
            check_batch(next(loader), cfg, k)
        ctx = multiprocessing.get_context("fork")
        q = ctx.Queue()
        child = ctx.Process(target=_fork_child, args=(loader, q))
        child.start()
        msg = q.get(timeout=20)
        child.join(20)
        assert msg.startswith("ok: ") and "forked child" in msg, msg
        assert child.exitcode == 0
        assert loader.exit_code is None  # the shmloader still runs
        for k in range(5, 40):
            check_batch(next(loader), cfg, k)
        assert loader.stats()["batches"] == 40  # delivered, the held last one included (issue 9)


def test_loader_cannot_be_pickled():
    import pickle

    with gobatch.Loader(config({"x": ((1,), "float32")}, size=1, slots=2)) as loader:
        with pytest.raises(TypeError, match="cannot be pickled"):
            pickle.dumps(loader)


INTERRUPTED = """
import time, gobatch
from synthetic import config
loader = gobatch.Loader(config({"x": ((4,), "float32")}, size=2, slots=2, delay_ms=60000))
print(loader.pid, flush=True)
try:
    next(loader)
    print("no interrupt", flush=True)
except KeyboardInterrupt:
    print("interrupted", time.monotonic(), flush=True)
    loader.close()
    print("closed", loader.exit_code, flush=True)
"""


def test_sigint_during_wait_is_a_clean_keyboard_interrupt():
    p = subprocess.Popen([PY, "-c", INTERRUPTED], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=python_env())
    try:
        pid = int(p.stdout.readline())
        time.sleep(0.5)  # blocked in the wait for the first batch
        t0 = time.monotonic()  # CLOCK_MONOTONIC: one clock for both processes
        p.send_signal(signal.SIGINT)
        word, t_caught = p.stdout.readline().split()
        assert word == b"interrupted"
        latency = float(t_caught) - t0
        # The wait returns to Python every 100 ms: the interrupt is raised there, not when the
        # batch comes (it never does: the producer waits 60 s).
        print(f"KeyboardInterrupt raised {latency * 1000:.0f} ms after SIGINT")
        line = p.stdout.readline().split()
        assert line[0] == b"closed" and line[1] != b"None", line
        assert p.wait(timeout=10) == 0, p.stderr.read().decode()
        assert process_gone(pid)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
