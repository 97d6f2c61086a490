"""Who may talk to the node loader, and what cannot starve it (issue 21).

Both ends check each other before a ring changes hands (the Go package nodewire): the
peer's uid by the kernel's SO_PEERCRED, and the node's secret by an HMAC challenge-response.
Other users run through ``setpriv`` to uid 65534 (the tests run as root; skipped otherwise),
with the system's Python (only the standard library), so that nothing of theirs is gobatch's:

- another uid asking a node loader for a ring is refused, and the job is unaffected;
- another uid squatting the job's socket name: the rank refuses it at once, naming the socket
  and the uid;
- a node loader of the same user without the job's secret (started by hand on the job's name):
  refused at once; with ``GOBATCH_NODE_SECRET`` set, the job uses a name derived from it;
- a flood of the job's own uid (the node loader under ``ulimit -n 256``) gets its per-uid share
  of handshake places and no more, and a connection that never says hello does not keep the
  node loader alive after its ranks have left;
- a node loader of another user is used only when both sides allow it (``serve --allow-uid``,
  the rank's ``GOBATCH_NODE_UID``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Iterator, List

import pytest

import gobatch
from gobatch._node import node_spec
from synthetic import check_batch, process_gone, run_shmloader, wait_for, write_config
from synthetic import config as synthetic_config

pytestmark = pytest.mark.timeout(60)

SYSTEM_PY = "/usr/bin/python3"


@pytest.fixture(autouse=True)
def job(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A torchrun-like job of the test's own, no secret or torchrun variables from outside, and
    a private shm dir that must be empty afterwards."""
    run_id = f"test-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", run_id)
    for name in ("LOCAL_WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", "RANK", "WORLD_SIZE", "GOBATCH_NODE",
                 "GOBATCH_NODE_SECRET"):
        monkeypatch.delenv(name, raising=False)
    shm = tempfile.mkdtemp(dir="/dev/shm", prefix="gobatch-test-peers-")
    monkeypatch.setenv("GOBATCH_SHM_DIR", shm)
    yield run_id
    left = os.listdir(shm)
    os.rmdir(shm) if not left else None
    assert not left, f"left in {shm}: {left}"


def as_nobody(script: str) -> "subprocess.Popen[str]":
    """Runs a standard-library Python script as uid/gid 65534."""
    if os.geteuid() != 0 or not shutil.which("setpriv") or not os.access(SYSTEM_PY, os.X_OK):
        pytest.skip("needs root, setpriv and /usr/bin/python3 to run as another user")
    return subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", SYSTEM_PY, "-c", script],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/")


def read_stream(path: Path, cfg: dict, name: str, rank: int = 0, world: int = 1) -> List[int]:
    """A rank of the node loader on ``name``: every batch checked against the synthetic contract."""
    got = []
    with gobatch.Loader(path, rank=rank, world_size=world, node=name, start_timeout=20) as L:
        for k, b in enumerate(L):
            check_batch(b, cfg, k * world + rank)
            got.append(k * world + rank)
    return got


def serve_by_hand(path: Path, name: str, stderr: object = subprocess.PIPE, prefix: str = "",
                  log_level: str = "") -> "subprocess.Popen[bytes]":
    args = [gobatch.shmloader_path(), "serve", "--config", str(path), "--socket", name, "--local-world-size", "1"]
    args += ["--log-level", log_level] if log_level else []
    if prefix:
        return subprocess.Popen(["bash", "-c", f'{prefix}; exec "$@"', "serve", *args], stdin=subprocess.DEVNULL,
                                stderr=stderr)  # type: ignore[arg-type]
    return run_shmloader(args[1:], stderr=stderr)  # type: ignore[arg-type]


def stop(p: "subprocess.Popen") -> None:
    if p.poll() is None:
        p.kill()
    p.wait()


FOREIGN_RANK = r"""
import json, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect("\0" + sys.argv[1])
s.settimeout(10)
s.send(json.dumps({"hello": "00" * 32}).encode())
print("welcome", s.recv(65536).decode(), flush=True)
try:
    s.send(json.dumps({"rank": 0, "world_size": 1, "config_sha256": sys.argv[2], "auth": ""}).encode())
    msg, fds, _, _ = socket.recv_fds(s, 65536, 1)
    print("reply", msg.decode(), len(fds), flush=True)
except OSError as e:
    print("reply", "closed", type(e).__name__, flush=True)
"""


def test_foreign_uid_is_refused_a_ring(tmp_path: Path, job: str) -> None:
    """Another user's request for a ring gets an error naming its uid, no descriptor, and the
    job's rank then reads its whole stream."""
    cfg = synthetic_config({"x": ((3,), "int64")}, size=2, batches=6)
    path = write_config(tmp_path / "c.json", cfg)
    import hashlib

    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    name = f"gobatch-test-{job}"
    serve = serve_by_hand(path, name)
    try:
        wait_for(lambda: _listening(name), 10, "the node loader to listen")
        foreign = as_nobody(FOREIGN_RANK.replace("sys.argv[1]", repr(name)).replace("sys.argv[2]", repr(sha)))
        out, err = foreign.communicate(timeout=20)
        lines = dict(line.split(" ", 1) for line in out.splitlines())
        assert "welcome" in lines, (out, err)
        welcome = json.loads(lines["welcome"])
        assert "runs as uid 65534" in welcome["error"] and "serves uid 0 only" in welcome["error"], (out, err)
        assert "memfd" not in lines.get("reply", "") and not lines.get("reply", "").endswith(" 1"), out
        assert read_stream(path, cfg, name) == list(range(6))
        assert serve.wait(timeout=10) == 0
    finally:
        stop(serve)
    assert b"connection refused" in serve.stderr.read()  # type: ignore[union-attr]


def _listening(name: str) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect("\0" + name)
        return True
    except OSError:
        return False
    finally:
        s.close()


SQUATTER = r"""
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind("\0" + NAME)
s.listen(16)
print("ready", flush=True)
time.sleep(60)
"""


def test_foreign_uid_squatter_is_refused_at_once() -> None:
    """Another user listens first on the job's derived socket name (and never answers): the
    rank raises a LoaderError naming the socket and uid 65534 at once, not after its start
    timeout."""
    cfg = synthetic_config({"x": ((3,), "int64")}, size=2)
    name = node_spec(True, rank=0, world_size=2, local_world_size=2, node_rank=0).socket  # type: ignore[union-attr]
    squatter = as_nobody(SQUATTER.replace("NAME", repr(name)))
    try:
        assert squatter.stdout is not None and squatter.stdout.readline() == "ready\n"
        with pytest.raises(gobatch.LoaderError, match=rf"socket '{name}': the process listening there \(pid \d+\) "
                           r"runs as uid 65534, not this rank's uid 0"):  # at once: the start timeout outlasts the test's
            gobatch.Loader(cfg, rank=0, world_size=2, node=True, local_world_size=2, node_rank=0, start_timeout=600)
    finally:
        stop(squatter)


def test_same_uid_node_loader_without_the_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A node loader of the same user but not of this job (started by hand on the job's derived
    name, without its secret) fails the rank's check of its proof at once. With
    GOBATCH_NODE_SECRET in the job's environment the name is derived from it too: the job runs
    beside that squatter, each rank correct."""
    cfg = synthetic_config({"x": ((3,), "int64")}, size=2, batches=4)
    path = write_config(tmp_path / "c.json", cfg)
    name = node_spec(True, rank=0, world_size=2, local_world_size=2, node_rank=0).socket  # type: ignore[union-attr]
    squatter = run_shmloader(["serve", "--config", str(path), "--socket", name, "--local-world-size", "2",
                              "--world-size", "2"], stderr=subprocess.PIPE)
    try:
        wait_for(lambda: _listening(name), 10, "the squatter to listen")
        with pytest.raises(gobatch.LoaderError, match=rf"socket '{name}': the process listening there "
                           rf"\(pid {squatter.pid}, uid 0\) does not prove this job's secret"):  # at once, as above
            gobatch.Loader(path, rank=0, world_size=2, node=True, local_world_size=2, node_rank=0, start_timeout=600)

        monkeypatch.setenv("GOBATCH_NODE_SECRET", uuid.uuid4().hex)
        other = node_spec(True, rank=0, world_size=2, local_world_size=2, node_rank=0).socket  # type: ignore[union-attr]
        assert other != name
        got = {}

        def rank(r: int) -> None:
            with gobatch.Loader(path, rank=r, world_size=2, node=True, local_world_size=2, node_rank=0) as L:
                got[r] = []
                for k, b in enumerate(L):
                    check_batch(b, cfg, k * 2 + r)
                    got[r].append(k * 2 + r)

        threads = [threading.Thread(target=rank, args=(r,)) for r in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert sorted(got[0] + got[1]) == list(range(8))
        assert squatter.poll() is None  # it never saw a rank's request
    finally:
        stop(squatter)


def test_connection_flood_and_a_silent_connection(tmp_path: Path, job: str) -> None:
    """80 connections of the job's own uid held open against a node loader under ``ulimit -n
    256``: it gives them at most its per-uid share of handshake places (the rest are answered
    with the limit and closed) and never runs out of descriptors; once they are closed its rank
    reads the whole stream, and a connection that never says hello, open while the rank reads,
    does not keep it alive: it exits 0 after the rank left with that connection still in its
    handshake (its log shows no handshake that ran out of time). (Another user's flood, 1000 connections while ranks read:
    test_faults_hostile.py.)"""
    cfg = synthetic_config({"x": ((3,), "int64")}, size=2, batches=6)
    path = write_config(tmp_path / "c.json", cfg)
    name = f"gobatch-test-{job}"
    log = tmp_path / "serve.log"
    with open(log, "wb") as f:
        serve = serve_by_hand(path, name, stderr=f, prefix="ulimit -n 256", log_level="debug")
    flood: List[socket.socket] = []
    try:
        wait_for(lambda: _listening(name), 10, "the node loader to listen")
        refused = 0
        for _ in range(80):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.connect("\0" + name)
            flood.append(s)
        time.sleep(0.5)  # the refusals are sent at once; the places wait 5 s for a hello
        for s in flood:
            try:
                msg = s.recv(4096, socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue  # holds a place: the node loader waits for its hello
            assert b"connections of uid 0 are already in their handshake" in msg, msg
            refused += 1
        assert 0 < refused < 80, refused
        for s in flood:
            s.close()
        flood = []
        silent = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        silent.connect("\0" + name)
        flood.append(silent)
        assert read_stream(path, cfg, name) == list(range(6))
        assert serve.wait(timeout=30) == 0
    finally:
        for s in flood:
            s.close()
        stop(serve)
    text = log.read_bytes()
    assert b"too many open files" not in text, text[-2000:]
    assert b"connection refused" in text, text[-2000:]
    # It exited with the silent connection open: no handshake of it ran out of time first.
    assert b"i/o timeout" not in text, text[-2000:]
    assert process_gone(serve.pid)


def test_allowed_uid_both_ways(job: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A node loader started by hand as another user serves this user's rank only when both
    sides say so: ``serve --allow-uid 0`` and the rank's GOBATCH_NODE_UID=65534; without the
    latter the rank refuses it."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run as another user")
    cfg = synthetic_config({"x": ((3,), "int64")}, size=2, batches=5)
    fd, conf = tempfile.mkstemp(prefix="gobatch-test-peers-", suffix=".json", dir="/tmp")  # readable by uid 65534
    os.close(fd)
    path = write_config(Path(conf), cfg)
    os.chmod(path, 0o644)
    name = f"gobatch-test-{job}"
    serve = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", gobatch.shmloader_path(),
                              "serve", "--config", str(path), "--socket", name, "--local-world-size", "1",
                              "--allow-uid", "0"], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd="/")
    try:
        wait_for(lambda: _listening(name) or serve.poll() is not None, 10, "the node loader to listen")
        assert serve.poll() is None, serve.stderr.read() if serve.stderr else ""
        with pytest.raises(gobatch.LoaderError, match=r"runs as uid 65534, not this rank's uid 0.*GOBATCH_NODE_UID=65534"):
            gobatch.Loader(path, node=name)
        monkeypatch.setenv("GOBATCH_NODE_UID", "65534")
        with gobatch.Loader(path, node=name) as L:
            got = [k for k, b in enumerate(L) if check_batch(b, cfg, k) is None]
        assert got == list(range(5))
        assert serve.wait(timeout=10) == 0
    finally:
        stop(serve)
        os.unlink(path)
