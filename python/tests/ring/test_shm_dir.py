"""gobatch.attach finds named rings where shmloader puts them: $GOBATCH_SHM_DIR, else /dev/shm."""

from __future__ import annotations

import os
import subprocess

import pytest

import gobatch
from gobatch import RingError
from gobatch._named import shm_dir
from fakering import FakeRing
from synthetic import check_batch, config, run_shmloader, wait_for, write_config

pytestmark = pytest.mark.timeout(60)


def test_shm_dir_default_and_override(monkeypatch, tmp_path):
    monkeypatch.delenv("GOBATCH_SHM_DIR", raising=False)
    assert shm_dir() == "/dev/shm"
    monkeypatch.setenv("GOBATCH_SHM_DIR", "")  # empty means unset, as in shmloader
    assert shm_dir() == "/dev/shm"
    monkeypatch.setenv("GOBATCH_SHM_DIR", str(tmp_path))
    assert shm_dir() == str(tmp_path)


def test_attach_reads_the_ring_in_gobatch_shm_dir(monkeypatch, tmp_path, ring_name):
    path = tmp_path / f"gobatch-{ring_name}"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        fr = FakeRing(fd, {"x": ((2, 3), "float32")}, slots=2, total_batches=1, named=True)
        fr.publish(0, 7.0)
        monkeypatch.delenv("GOBATCH_SHM_DIR", raising=False)
        with pytest.raises(RingError, match=f"/dev/shm/gobatch-{ring_name} does not exist"):
            gobatch.attach(ring_name, timeout=1)
        monkeypatch.setenv("GOBATCH_SHM_DIR", str(tmp_path))
        with gobatch.attach(ring_name, timeout=5) as ring:
            assert (next(ring)["x"] == 7.0).all()
            with pytest.raises(StopIteration):
                next(ring)
        fr.close()
    finally:
        os.close(fd)


def test_attach_and_shmloader_agree_on_gobatch_shm_dir(monkeypatch, tmp_path, ring_name):
    """A standalone `shmloader run --ring` under GOBATCH_SHM_DIR is found by attach under it."""
    shm = tmp_path / "shm"
    shm.mkdir()
    monkeypatch.setenv("GOBATCH_SHM_DIR", str(shm))
    cfg = config({"a": ((4,), "int64")}, size=2, batches=5, slots=2)
    path = write_config(tmp_path / "c.json", cfg)
    proc = run_shmloader(["run", "--config", str(path), "--ring", ring_name], stderr=subprocess.PIPE)
    try:
        wait_for(lambda: (shm / f"gobatch-{ring_name}").exists() or proc.poll() is not None, 10, "ring file")
        assert not os.path.exists(f"/dev/shm/gobatch-{ring_name}")
        with gobatch.attach(ring_name) as ring:
            for k in range(5):
                check_batch(next(ring), cfg, k)
        assert proc.wait(timeout=10) == 0, proc.stderr.read().decode()
        assert not (shm / f"gobatch-{ring_name}").exists()  # the creator unlinked it
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
