"""Fault trials: hostile stores, configurations and neighbours (issue 29).

Each case runs GOBATCH_FAULT_REPS times (``make faults``) and prints a FAULT line. The before,
measured on main before issue 29 (the issue's figures): a ``zarr.json`` that is a FIFO or a
symbolic link to /dev/zero hung ``plan`` for ever; a sparse 2 GiB ``.zmetadata`` cost it 4.1 GiB
of memory; a chunk key that is a directory read as a missing chunk (the fill value); eight
YAML merges of a 60,000-key mapping ran past 60 s; another user binding the node loader's
socket name while it restarted ended 20 of 20 jobs; a flood of 1,000 connections from another
user against a node loader under ``nofile 256`` left a new rank without a batch for 30 s.

Stores and configurations: each must end in an error naming the thing at fault (the file, the
chunk key, the YAML line) within TIME_S seconds and RSS_MB of memory (the shmloader process's
peak resident size, from wait4).

Neighbours (as uid 65534 through setpriv with the system's Python, as test_node_peers.py):

- a squatter that reads every ``gobatch-node-*`` name in /proc/net/unix and binds each one
  the moment it is free, while the ranks' node loader is killed with kill -9: every rank still
  reads its whole stream exactly once and in order (test_faults_node's trial), and the
  squatter did take the dead node loader's name (the ranks met at its successor's instead);
- 1,000 connections from another user, held open against a node loader under ``ulimit -n
  256`` while rank 0 reads, and rank 1 starting during the flood: both ranks read their whole
  streams exactly once, in order, and rank 1's first batch comes within FIRST_BATCH_S.
"""

from __future__ import annotations

import json
import os
import random
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest
import xarray as xr

import gobatch
from faultharness import REPS, record, shm  # noqa: F401  (shm is a fixture)
from gobatch._node import node_spec
from synthetic import check_batch, config
from test_faults_node import _trial
from test_node_peers import as_nobody, stop

pytestmark = pytest.mark.timeout(max(600, 20 * REPS))

TIME_S = 10.0
RSS_MB = 400.0
FIRST_BATCH_S = 10.0
_rss: Dict[str, float] = {}  # worst peak RSS of each case's runs, MiB


# ---- stores and configurations ----

def _hwm_mib(pid: int) -> float:
    """The process's peak resident size so far (VmHWM, of its own image since exec), MiB."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _bounded(args: List[str], timeout: float = 60.0) -> Tuple[int, str, float, float]:
    """Runs shmloader with args; returns (exit status, stderr, seconds, peak RSS in MiB, from
    VmHWM read every 2 ms: wait4's ru_maxrss would count this test process's own size, which
    a fork and exec carry into it). A run past timeout is killed and fails the trial: a hang
    is the fault here."""
    t0 = time.monotonic()
    p = subprocess.Popen([gobatch.shmloader_path(), *args], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err: List[bytes] = []
    reader = threading.Thread(target=lambda: err.append(p.stderr.read() if p.stderr else b""), daemon=True)
    reader.start()
    peak = 0.0
    while True:
        peak = max(peak, _hwm_mib(p.pid))  # before the reap: the zombie has no memory left
        pid, status, _ = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - t0 > timeout:
            p.kill()
            os.wait4(p.pid, 0)
            raise AssertionError(f"shmloader {' '.join(args)} still running after {timeout:g} s")
        time.sleep(0.002)
    p.returncode = os.waitstatus_to_exitcode(status)
    reader.join(5)
    return p.returncode, b"".join(err).decode(errors="replace"), time.monotonic() - t0, peak


def _check(name: str, run: Tuple[int, str, float, float], *wants: str) -> None:
    code, err, seconds, rss = run
    assert code != 0, f"{name}: exit status 0"
    assert "panic" not in err and "goroutine " not in err, err[-2000:]
    for want in wants:
        assert want in err, f"{name}: {want!r} not in {err[-2000:]!r}"
    assert seconds < TIME_S, f"{name}: {seconds:.1f} s"
    assert rss < RSS_MB, f"{name}: peak RSS {rss:.0f} MiB"
    _rss[name] = max(_rss.get(name, 0.0), rss)
    record(f"hostile: {name}", seconds, f"refused naming it (worst peak RSS {_rss[name]:.0f} MiB)")


def _write_store(path: Path) -> None:
    """A small satellite-like store (xarray), one chunk per time step."""
    t, h, w = 12, 8, 8
    ds = xr.Dataset({"data": (("time", "y", "x"), np.arange(t * h * w, dtype=np.float32).reshape(t, h, w))},
                    coords={"time": np.datetime64("2021-06-01T00:00", "ns") + np.arange(t) * np.timedelta64(5, "m"),
                            "y": 8000.0 - 1000.0 * np.arange(h), "x": 1000.0 * np.arange(w)})
    ds.to_zarr(path, mode="w", zarr_format=2, consolidated=True, encoding={"data": {"chunks": (1, h, w)}})


def _store_config(root: Path, store: str) -> Path:
    cfg = {"batch": {"size": 2, "seed": 1}, "ring": {"slots": 2},
           "source": [{"name": "satellite", "kind": "zarr", "store": str(root / store), "variable": "data",
                       "anchor": True, "cache_mb": 16, "time_resolution_minutes": 5, "interval_start_minutes": -10,
                       "interval_end_minutes": 0, "image_size_pixels_height": 4, "image_size_pixels_width": 4}]}
    path = root / f"{store}.json"
    path.write_text(json.dumps(cfg))
    return path


def _hostile_metadata(root: Path, how: str) -> Tuple[Path, str]:
    """A store whose metadata document is hostile; returns the store and the file's key."""
    store = root / f"meta-{how}.zarr"
    store.mkdir()
    if how == "sparse-zmetadata":
        (store / ".zgroup").write_text('{"zarr_format": 2}')
        with open(store / ".zmetadata", "wb") as f:
            f.truncate(2 << 30)  # sparse: no disk used
        return store, ".zmetadata"
    if how == "fifo":
        os.mkfifo(store / "zarr.json")
    else:
        os.symlink("/dev/zero", store / "zarr.json")
    return store, "zarr.json"


@pytest.mark.parametrize("how,why", [("fifo", "not a regular file"), ("dev-zero", "not a regular file"),
                                     ("sparse-zmetadata", "more than a metadata document may have")])
def test_hostile_metadata_plan(tmp_path: Path, how: str, why: str) -> None:
    for rep in range(REPS):
        root = tmp_path / str(rep)
        root.mkdir()
        store, key = _hostile_metadata(root, how)
        cfg = _store_config(root, store.name)
        what = {"fifo": "a FIFO", "dev-zero": "a link to /dev/zero", "sparse-zmetadata": "2 GiB (sparse)"}[how]
        _check(f"plan: {key} is {what}", _bounded(["plan", "--config", str(cfg)]), key, why)


@pytest.mark.parametrize("how,why", [("directory", "a directory"), ("sparse-1TiB", "more than a value may have")])
def test_hostile_chunk_run(tmp_path: Path, shm: Path, how: str, why: str) -> None:
    """Every chunk of the variable replaced (the first batch meets one whatever it draws)."""
    for rep in range(REPS):
        root = tmp_path / str(rep)
        root.mkdir()
        store = root / "sat.zarr"
        _write_store(store)
        for chunk in sorted((store / "data").glob("*.0.0")):
            chunk.unlink()
            if how == "directory":
                chunk.mkdir()
            else:
                with open(chunk, "wb") as f:
                    f.truncate(1 << 40)
        cfg = _store_config(root, "sat.zarr")
        run = _bounded(["run", "--config", str(cfg), "--ring", f"hostile-{os.getpid()}-{rep}"])
        what = {"directory": "directories", "sparse-1TiB": "1 TiB files (sparse)"}[how]
        _check(f"run: chunk keys are {what}", run, "key data/", why)
    assert list(shm.iterdir()) == []


def test_yaml_merges_bounded(tmp_path: Path) -> None:
    """Eight merges of a 60,000-key anchor: refused naming the line of a merge past the bound."""
    lines = ["big: &big"] + [f"  k{i}: {i}" for i in range(60000)] + ["input_data:"]
    first = len(lines) + 1
    lines += [f"  m{i}: {{<<: *big}}" for i in range(8)]
    path = tmp_path / "merges.yaml"
    path.write_text("\n".join(lines) + "\n")
    for _ in range(REPS):
        run = _bounded(["plan", "--config", str(path), "--batch-size", "2"])
        code, err, _, _ = run
        assert any(f"merges.yaml:{first + i}" in err for i in range(8)), err[-2000:]
        _check("plan: YAML of 8 merges of 60,000 keys", run, "more than 1048576 values and merged keys")


# ---- neighbours ----

SQUATTER = r"""
import socket, sys, time
seen, held = set(), {}
print("ready", flush=True)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    with open("/proc/net/unix") as f:
        for line in f:
            name = line.split()[-1]
            if name.startswith("@gobatch-node-"):
                seen.add(name[1:])
    for name in seen - held.keys():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            s.bind("\0" + name)
            s.listen(64)
        except OSError:
            s.close()
            continue
        held[name] = s
        print("took", name, flush=True)
    time.sleep(0.001)
"""


def test_squatter_during_restarts(shm, monkeypatch) -> None:
    """kill -9 of the node loader at a random point of 2 ranks' streams, with a squatter of
    another uid binding every node loader name the moment it is free."""
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "placeholder")
    monkeypatch.delenv("GOBATCH_NODE_SECRET", raising=False)
    rng = random.Random(20261206)
    worst_gap = 0.0
    for _ in range(REPS):
        squatter = as_nobody(SQUATTER.replace("sys.argv[1]", "120"))
        try:
            assert squatter.stdout is not None and squatter.stdout.readline() == "ready\n"
            replaced, gap = _trial(2, kill_after=rng.uniform(0.05, 0.3))
            base = node_spec(True, rank=0, world_size=2, local_world_size=2, node_rank=0).socket  # type: ignore[union-attr]
            taken = _taken(squatter, base)
        finally:
            stop(squatter)
        assert base in taken, f"the squatter never held the dead node loader's name {base}: {taken}"
        worst_gap = max(worst_gap, gap)
        record("node loader killed beside a squatter of another uid", replaced,
               f"streams exactly once, in order (worst wait for a batch {1000 * worst_gap:.0f} ms); death -> replacement")


def _taken(squatter: "subprocess.Popen[str]", base: str, wait_s: float = 2.0) -> List[str]:
    """The names the squatter reports it bound, waiting up to wait_s for base among them."""
    taken: List[str] = []
    out = squatter.stdout
    assert out is not None
    os.set_blocking(out.fileno(), False)
    end = time.monotonic() + wait_s
    while base not in taken and time.monotonic() < end:
        line = out.readline()
        if line.startswith("took "):
            taken.append(line.split()[1])
        elif not line:
            time.sleep(0.01)
    return taken


FLOOD = r"""
import json, socket, sys, time
name, n = NAME, COUNT
held, failed = [], 0
for _ in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect("\0" + name)
    except OSError:
        failed += 1
        s.close()
        continue
    held.append(s)
time.sleep(0.5)
refused = 0
for s in held:
    try:
        refused += b"uid 65534" in s.recv(4096, socket.MSG_DONTWAIT)
    except OSError:
        pass
print(json.dumps({"connected": len(held), "failed": failed, "refused": refused}), flush=True)
time.sleep(120)
"""


def _reader(cfg: Dict[str, Any], r: int, shmloader: str, started: threading.Event, out: Dict[int, Any]) -> None:
    try:
        t0 = time.monotonic()
        with gobatch.Loader(cfg, rank=r, world_size=2, node=True, local_world_size=2, node_rank=0,
                            shmloader=shmloader, start_timeout=30) as L:
            got = []
            for k, b in enumerate(L):
                check_batch(b, cfg, k * 2 + r)  # in order, unchanged, none missing or repeated
                if k == 0:
                    out[f"first{r}"] = time.monotonic() - t0
                    started.set()
                got.append(k)
            out[r] = got
    except BaseException as e:  # noqa: BLE001  (reported by the main thread)
        out[f"error{r}"] = e
        started.set()


def test_stranger_flood_while_ranks_read(tmp_path: Path, shm, monkeypatch) -> None:
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "placeholder")
    monkeypatch.delenv("GOBATCH_NODE_SECRET", raising=False)
    wrapper = tmp_path / "shmloader-nofile-256"
    wrapper.write_text(f'#!/bin/sh\nulimit -n 256 || exit 99\nexec "{gobatch.shmloader_path()}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    batches = 400
    for rep in range(REPS):
        monkeypatch.setenv("TORCHELASTIC_RUN_ID", f"flood-{os.getpid()}-{rep}")
        cfg = config({"a": ((3, 5), "float32")}, size=4, batches=batches, slots=4, delay_ms=2)
        name = node_spec(True, rank=0, world_size=2, local_world_size=2, node_rank=0).socket  # type: ignore[union-attr]
        out: Dict[Any, Any] = {}
        first, second = threading.Event(), threading.Event()
        ranks = [threading.Thread(target=_reader, args=(cfg, 0, str(wrapper), first, out), daemon=True)]
        ranks[0].start()
        assert first.wait(30) and "error0" not in out, out
        flood = as_nobody(FLOOD.replace("NAME", repr(name)).replace("COUNT", "1000"))
        try:
            assert flood.stdout is not None
            report = json.loads(flood.stdout.readline() or "{}")  # the connections are open now
            ranks.append(threading.Thread(target=_reader, args=(cfg, 1, str(wrapper), second, out), daemon=True))
            ranks[1].start()
            for t in ranks:
                t.join(120)
        finally:
            stop(flood)
        assert not any(str(k).startswith("error") for k in out), out
        assert out[0] == list(range(batches)) and out[1] == list(range(batches)), "a rank's stream is not exactly once"
        assert report["connected"] == 1000 and report["refused"] == 1000, report
        assert out["first1"] < FIRST_BATCH_S, f"rank 1's first batch after {out['first1']:.1f} s"
        record("1,000 connections of another uid, nofile 256", out["first1"],
               "both ranks exactly once, every connection refused; rank 1's first batch")
