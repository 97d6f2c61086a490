"""``gobatch --version`` / ``python -m gobatch doctor`` on the checkout's build, and the child
environment of a packaged shmloader (gobatch/_native.py). The installed wheel's doctor runs in
test_wheel.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest

from gobatch import _doctor, _native, _protocol
from synthetic import python_env

pytestmark = pytest.mark.timeout(60)


def run(args, env: Dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gobatch", *args], env=env, capture_output=True, text=True, timeout=60)


def test_doctor_reports_every_part_and_check() -> None:
    p = run(["doctor"], python_env())
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    want_proj = subprocess.run(["pkg-config", "--modversion", "proj"], capture_output=True, text=True).stdout.strip()
    assert want_proj, "pkg-config does not know PROJ"
    for name, pattern in [("gobatch", r"0\.\d+\.\d+"), ("shmloader", rf"ring layout {_protocol.LAYOUT_VERSION}\b"),
                          ("C library", f"ring layout {_protocol.LAYOUT_VERSION},"),
                          ("PROJ", rf"^{re.escape(want_proj)}, system library"), ("shared memory", "GiB free"),
                          ("memfd sealing", "F_SEAL_SEAL works")]:
        got = [line for line in lines if line.startswith(f"ok    {name}: ")]
        assert got and re.search(pattern, got[0].split(": ", 1)[1]), f"{name}: {pattern!r} not in\n{p.stdout}"
    try:
        import torch
    except ImportError:
        assert "ok    torch: not installed" in p.stdout, p.stdout
    else:
        cuda = "CUDA not available" if not torch.cuda.is_available() else f"CUDA {torch.version.cuda}"
        assert f"ok    torch: {torch.__version__}, {cuda}" in p.stdout, p.stdout
    assert lines[-1] == "verdict: ok"


def test_version_lists_the_parts() -> None:
    p = run(["--version"], python_env())
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("gobatch 0.") and [line.split(":")[0] for line in lines[1:]] == [
        "shmloader", "C library", "PROJ"], p.stdout


def test_doctor_fails_naming_a_broken_shmloader(tmp_path: Path) -> None:
    bad = tmp_path / "shmloader"
    bad.write_text("#!/bin/sh\necho 'libproj.so.25: cannot open shared object file' >&2\nexit 127\n")
    bad.chmod(0o755)
    p = run(["doctor"], dict(python_env(), GOBATCH_SHMLOADER=str(bad)))
    assert p.returncode == 1, p.stdout
    assert re.search(r"^FAIL  shmloader: .*status 127: libproj.so.25: cannot open", p.stdout, re.M), p.stdout
    assert re.search(r"^FAIL  PROJ: unknown", p.stdout, re.M), p.stdout
    assert p.stdout.splitlines()[-1] == "verdict: FAIL (shmloader, PROJ)"


def test_small_shm_is_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.statvfs("/")
    small = os.statvfs_result((4096, 4096, 16384, 16000, 16000) + tuple(real)[5:])  # 64 MiB, as Docker's default
    monkeypatch.setattr(os, "statvfs", lambda path: small)
    c = _doctor.check_shm("/dev/shm")
    assert c.verdict == _doctor.WARN and "0.1 GiB" in c.detail and "--shm-size" in c.detail, c


def test_child_env_sets_proj_data_for_the_packaged_binary_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "gobatch"
    (pkg / "_bin").mkdir(parents=True)
    (pkg / "_data" / "proj").mkdir(parents=True)
    binary = pkg / "_bin" / "shmloader"
    binary.write_text("")
    monkeypatch.setattr(_native, "PACKAGE", pkg)
    monkeypatch.delenv("PROJ_DATA", raising=False)
    monkeypatch.delenv("PROJ_LIB", raising=False)
    assert _native.child_env(str(binary), None) is None, "no bundled proj.db: nothing to set"
    (pkg / "_data" / "proj" / "proj.db").write_text("")
    data = str(pkg / "_data" / "proj")
    assert _native.child_env(str(binary), None)["PROJ_DATA"] == data
    assert _native.child_env(str(binary), {"PROJ_DATA": "/mine"}) == {"PROJ_DATA": data + os.pathsep + "/mine"}
    assert _native.child_env(str(binary), {"PROJ_LIB": "/old"})["PROJ_DATA"] == data + os.pathsep + "/old"
    other = {"A": "1"}
    assert _native.child_env(str(tmp_path / "elsewhere"), other) is other, "another binary keeps its own PROJ"
