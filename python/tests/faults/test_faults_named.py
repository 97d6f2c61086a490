"""Named rings that cannot be squatted, followed or truncated under the trainer (docs/PROTOCOL.md
1 and 1.1), and the Loader's sealed memfd.

Each refusal is checked against what the file really is (made here with os.symlink, os.mkdir,
os.mkfifo, chown to another uid), and every truncation trial runs the consumer in a process of its
own, so that a SIGBUS would show as its exit status instead of killing the test: the assertion is
a clean exit with RingTruncatedError. GOBATCH_FAULT_REPS repeats each trial (``make faults``,
which runs each trial in its own mount namespace with a private /dev/shm); the `shm` fixture's
private directory must be empty after each."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

import gobatch
from fakering import FakeRing
from faultharness import REPS, record, shm  # noqa: F401  (shm is a fixture)
from gobatch import GobatchError, RingError, RingPermissionError, RingTruncatedError, UnsafeRingError
from synthetic import PY, check_batch, config, python_env, run_shmloader, wait_for, write_config

pytestmark = pytest.mark.timeout(300)

def _other_uid(path: Path) -> int:
    """Gives path to a uid that is not ours (root only), or skips."""
    other = os.geteuid() + 4242
    try:
        os.lchown(path, other, -1)
    except PermissionError:
        pytest.skip("chown to another uid needs root")
    return other


def _named_fake(shm: Path, name: str) -> FakeRing:
    """A ready named ring (one tensor) made the way shmloader makes one: O_EXCL, 0600."""
    fd = os.open(shm / f"gobatch-{name}", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    return FakeRing(fd, {"a": ((2, 3), "float32")}, slots=2, named=True)


def _refused(cls: type, path: Path, want: str, **kw: Any) -> float:
    """attach() of path's name raises cls naming path and want; returns how long it took."""
    name = path.name[len("gobatch-"):]
    t0 = time.monotonic()
    with pytest.raises(cls) as ei:
        gobatch.attach(name, timeout=5, **kw)
    took = time.monotonic() - t0
    e = ei.value
    assert isinstance(e, GobatchError) and isinstance(e, RingError)
    assert e.path == str(path) and want in e.reason, (e.path, e.reason)
    assert str(path) in str(e) and want in str(e), str(e)
    assert took < 1.0, f"the refusal of {path} took {took:.2f} s: it waited"
    return took


def test_attach_refuses_symlink_directory_fifo(shm):
    """A symlink to a real ring of ours is not followed; a directory and a FIFO of the name are
    refused with the reason (not IsADirectoryError, not a blocked open)."""
    real = _named_fake(shm, "real")
    try:
        for rep in range(REPS):
            for kind, make, want in (
                ("symlink", lambda p: os.symlink(shm / "gobatch-real", p), "symbolic link"),
                ("directory", lambda p: os.mkdir(p), "is a directory"),
                ("fifo", lambda p: os.mkfifo(p, 0o600), "is a FIFO"),
            ):
                p = shm / f"gobatch-{kind}-{rep}"
                make(p)
                try:
                    record(f"named: {kind} refused", _refused(UnsafeRingError, p, want), "refused")
                finally:
                    (os.rmdir if kind == "directory" else os.unlink)(p)
        with gobatch.attach("real", timeout=5) as r:  # the ring itself is fine
            assert r.slots == 2
    finally:
        os.close(real.fd)
        os.unlink(shm / "gobatch-real")


def test_attach_refuses_other_uid_and_writable_rings(shm):
    """The issue's case: a 0666 ring owned by another uid. Refused; so is one of ours that anyone
    can write; another user's 0600 ring is refused unless allow_uid names that uid, and then
    read."""
    for rep in range(REPS):
        fake = _named_fake(shm, f"theirs{rep}")
        p = shm / f"gobatch-theirs{rep}"
        try:
            os.chmod(p, 0o666)
            record("named: own 0666 ring refused", _refused(UnsafeRingError, p, "writable by group/other"), "refused")
            other = _other_uid(p)
            record("named: other-uid 0666 ring refused", _refused(UnsafeRingError, p, "owned by uid"), "refused")
            _refused(UnsafeRingError, p, "writable by group/other", allow_uid=other)
            os.chmod(p, 0o600)
            _refused(UnsafeRingError, p, f"owned by uid {other}")
            with gobatch.attach(f"theirs{rep}", timeout=5, allow_uid=other) as r:
                fake.publish(0, 1.0)
                b = next(r)
                assert b["a"].shape == (2, 3) and (b["a"] == 1.0).all()
        finally:
            os.close(fake.fd)
            os.unlink(p)
    with pytest.raises(ValueError, match="allow_uid"):
        gobatch.attach("theirs", allow_uid=-1)


def test_attach_says_permission_denied(ring_name):
    """Another user cannot open our 0600 ring: RingPermissionError that says so, at once, with
    the file's owner and mode."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run a consumer as another user")
    d = Path(tempfile.mkdtemp(prefix="gobatch-perm-"))  # a directory the other user may enter
    try:
        os.chmod(d, 0o755)
        fake = _named_fake(d, ring_name)
        os.close(fake.fd)
        script = ("import sys, time, gobatch\nt0 = time.monotonic()\ntry:\n    gobatch.attach(sys.argv[1], timeout=5)\n"
                  "except gobatch.RingPermissionError as e:\n"
                  "    print(type(e).__name__, '|', e.reason, '|', e, '|', time.monotonic() - t0)\n")
        env = dict(python_env(), GOBATCH_SHM_DIR=str(d))
        for _ in range(REPS):
            out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", PY, "-c", script,
                                  ring_name], capture_output=True, text=True, timeout=30, env=env)
            assert out.stdout.startswith("RingPermissionError | permission denied"), (out.stdout, out.stderr)
            assert "belongs to uid 0, mode 0600; you are uid 65534" in out.stdout, out.stdout
            took = float(out.stdout.rsplit("|", 1)[1])  # the attach call alone, not the interpreter's start
            assert took < 1.0, f"the refusal took {took:.2f} s: it waited"
            record("named: permission denied (other user)", took, "refused")
    finally:
        shutil.rmtree(d)


def _squat_run(tmp_path: Path, name: str) -> subprocess.CompletedProcess:
    cfg = write_config(tmp_path / f"c-{name}.json", config({"a": ((4,), "int64")}, size=2, batches=2, slots=2))
    return subprocess.run([gobatch.shmloader_path(), "run", "--config", str(cfg), "--ring", name],
                          capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)


def test_squatted_name_is_never_written_or_read(tmp_path, shm):
    """A squatter pre-creates the name: as a symlink to a file of ours, or as its own 0666 file.
    shmloader refuses to create the ring (never writing through the symlink or into the
    squatter's file), and a consumer refuses the squatter's file."""
    victim = tmp_path / "victim"
    for rep in range(REPS):
        victim.write_bytes(b"precious")
        link = shm / f"gobatch-link{rep}"
        os.symlink(victim, link)
        t0 = time.monotonic()
        out = _squat_run(tmp_path, f"link{rep}")
        assert out.returncode == 1 and "exists" in out.stderr and "symbolic link" in out.stderr, out.stderr
        assert victim.read_bytes() == b"precious" and os.path.islink(link)
        record("named: squat by symlink refused (creator)", time.monotonic() - t0, "refused")
        _refused(UnsafeRingError, link, "symbolic link")
        os.unlink(link)

        squat = shm / f"gobatch-squat{rep}"
        squat.write_bytes(b"\0" * 65536)
        os.chmod(squat, 0o666)
        other = _other_uid(squat)
        t0 = time.monotonic()
        out = _squat_run(tmp_path, f"squat{rep}")
        assert out.returncode == 1 and f"a file of uid {other} holds the name" in out.stderr, out.stderr
        assert squat.read_bytes() == b"\0" * 65536, "the creator wrote into the squatter's file"
        record("named: squat by other uid refused (creator)", time.monotonic() - t0, "refused")
        took = _refused(UnsafeRingError, squat, "owned by uid")
        record("named: squat by other uid refused (consumer)", took, "refused")
        os.unlink(squat)


TRUNCATE = r"""
import json, os, sys, threading, time
import numpy as np
import gobatch
from synthetic import check_batch
name, mode, cfg_path = sys.argv[1:4]
cfg = json.load(open(cfg_path))
path = os.path.join(os.environ.get("GOBATCH_SHM_DIR") or "/dev/shm", "gobatch-" + name)
ring = gobatch.attach(name, timeout=10)
it = iter(ring)
for k in range(3):
    check_batch(next(it), cfg, k)
held = next(it)
check_batch(held, cfg, 3)
size = os.stat(path).st_size
cut = {"zero": 0, "half": size // 2, "header": 4096, "waiting": 0}[mode]
t0 = time.monotonic()
if mode == "waiting":  # cut while next() waits for a batch the slow producer has not made
    threading.Timer(0.2, os.truncate, (path, cut)).start()
    t0 += 0.2
else:
    os.truncate(path, cut)
held_sum = float(sum(np.asarray(v, dtype=np.float64).sum() for v in held.values()))  # cut pages: zeros
errors = []
for _ in range(2):
    try:
        next(it)
        errors.append(None)
    except gobatch.RingTruncatedError as e:
        errors.append(e)
latency = time.monotonic() - t0
ring.close()
print(json.dumps({"error": str(errors[0]), "sticky": errors[0] is not None and errors[1] is errors[0],
                  "held_sum": held_sum, "latency": latency, "left": os.path.exists(path)}))
"""


@pytest.mark.parametrize("mode", ["zero", "half", "header", "waiting"])
def test_truncating_a_named_ring_raises_instead_of_sigbus(tmp_path, shm, ring_name, mode):
    """A same-user truncation of a live named segment (to nothing, to half, to the first page,
    and while next() waits) ends in RingTruncatedError, sticky, never in SIGBUS; the cut name is
    removed. The batch held at the cut reads zeros where its pages were cut."""
    delay = 300 if mode == "waiting" else 0
    cfg = config({"a": ((64, 64), "float32")}, size=4, batches=0, slots=4, delay_ms=delay)
    cfg_path = write_config(tmp_path / "c.json", cfg)
    for rep in range(REPS):
        name = f"{ring_name}-{rep}"
        prod = run_shmloader(["run", "--config", str(cfg_path), "--ring", name, "--readers", "1"],
                             stderr=subprocess.PIPE)
        try:
            wait_for(lambda: (shm / f"gobatch-{name}").exists() or prod.poll() is not None, 10, "ring file")
            out = subprocess.run([PY, "-c", TRUNCATE, name, mode, str(cfg_path)], capture_output=True, text=True,
                                 timeout=60, env=python_env())
            assert out.returncode == 0, f"consumer exit {out.returncode} (SIGBUS is {-signal.SIGBUS}): {out.stderr}"
            res = json.loads(out.stdout.strip().splitlines()[-1])
            assert "truncated" in res["error"] and res["sticky"], res
            assert not res["left"], "the cut ring's name is still there"
            if mode == "zero":
                assert res["held_sum"] == 0.0, res
            assert res["latency"] < 1.0, res
            record(f"named: truncate ({mode}), 0 SIGBUS", res["latency"])
        finally:
            if prod.poll() is None:
                prod.kill()
            prod.wait(timeout=10)
            prod.stderr.close()


def _memfd_of(pid: int) -> int:
    """Opens the memfd ring that process pid holds (through /proc, as a same-user process can)."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/memfd:gobatch"):
            return os.open(f"/proc/{pid}/fd/{fd}", os.O_RDWR)
    raise AssertionError(f"pid {pid} holds no gobatch memfd")


def test_loader_memfd_is_sealed(tmp_path):
    """The Loader's ring has F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL: a same-user truncation (to
    nothing, to one page, larger) of the very file fails with EPERM, and the stream goes on,
    every batch checked."""
    cfg = config({"a": ((16,), "int32")}, size=4, batches=0, slots=4)
    want = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
    with gobatch.Loader(cfg, readers=1) as loader:
        it = iter(loader)
        for k in range(2):
            check_batch(next(it), cfg, k)
        for rep in range(REPS):
            fd = _memfd_of(loader._proc.pid)
            try:
                seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
                assert seals & want == want, f"seals {seals:#x}, want {want:#x}"
                t0 = time.monotonic()
                for size in (0, 4096, os.fstat(fd).st_size * 2):
                    with pytest.raises(PermissionError) as ei:
                        os.ftruncate(fd, size)
                    assert ei.value.errno == errno.EPERM
                with pytest.raises(PermissionError):
                    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE)
                record("memfd: truncation refused by the seals", time.monotonic() - t0, "refused")
            finally:
                os.close(fd)
            for k in range(2 + 2 * rep, 4 + 2 * rep):
                check_batch(next(it), cfg, k)


def test_unsealed_memfd_is_refused(memfd):
    """A memfd ring without the seals (here one made by hand) is refused where seals are
    required, as the Loader requires them of its child's ring."""
    FakeRing(memfd, {"a": ((2,), "int64")}, slots=2)
    with pytest.raises(RingTruncatedError, match="not sealed against shrinking and growing"):
        gobatch.Ring(memfd, sealed=True, timeout=2)
    with gobatch.Ring(memfd, timeout=2) as r:  # a caller that does not ask for seals gets the ring
        assert r.slots == 2


def _shmloader(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([gobatch.shmloader_path(), *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_stat_and_join_follow_the_same_rules(tmp_path, shm, ring_name):
    """The Go side: `stat` and `run --join` refuse a symlink and another user's ring (stat takes
    --allow-uid), and a `stat` watching a ring that is truncated says so and exits 1 instead of
    dying of SIGBUS."""
    cfg = config({"a": ((64, 64), "float32")}, size=4, batches=0, slots=2)
    cfg_path = write_config(tmp_path / "c.json", cfg)
    for rep in range(REPS):
        name = f"{ring_name}-{rep}"
        path = shm / f"gobatch-{name}"
        prod = run_shmloader(["run", "--config", str(cfg_path), "--ring", name, "--readers", "1"],
                             stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: path.exists() or prod.poll() is not None, 10, "ring file")
            link = shm / f"gobatch-{name}-link"
            os.symlink(path, link)
            for args in (["stat", "--once", link.name[8:]],
                         ["run", "--config", str(cfg_path), "--ring", link.name[8:], "--join"]):
                out = _shmloader(*args)
                assert out.returncode == 1 and "symbolic link" in out.stderr and str(link) in out.stderr, out.stderr
            os.unlink(link)
            other = _other_uid(path)
            out = _shmloader("stat", "--once", name)
            assert out.returncode == 1 and f"owned by uid {other}" in out.stderr, out.stderr
            out = _shmloader("run", "--config", str(cfg_path), "--ring", name, "--join")
            assert out.returncode == 1 and f"owned by uid {other}" in out.stderr, out.stderr
            out = _shmloader("stat", "--once", "--allow-uid", str(other), name)
            assert out.returncode == 0 and "slots" in out.stdout, (out.stdout, out.stderr)
            os.lchown(path, os.geteuid(), -1)

            stat = run_shmloader(["stat", "--interval", "20ms", "--json", name], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
            time.sleep(0.3)
            assert stat.poll() is None, stat.stderr.read()
            os.truncate(path, 0)
            t0 = time.monotonic()
            _, err = stat.communicate(timeout=10)
            took = time.monotonic() - t0
            assert stat.returncode == 1 and "was truncated" in err, (stat.returncode, err)
            assert took < 1.0, took
            record("named: stat of a truncated ring, 0 SIGBUS", took)
        finally:
            if prod.poll() is None:
                prod.kill()
            prod.wait(timeout=10)
            if path.exists():
                os.unlink(path)  # the cut ring's producer died of SIGBUS, as PROTOCOL.md 1.1 says


def test_ring_refuses_a_non_regular_descriptor():
    """Ring(fd) on a pipe: refused as such by gb_open, before anything is mapped."""
    r, w = os.pipe()
    try:
        with pytest.raises(RingError, match="the descriptor is a FIFO, not a regular file or memfd"):
            gobatch.Ring(r, timeout=1)
    finally:
        os.close(r)
        os.close(w)
