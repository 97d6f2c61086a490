"""Several jobs, one decode: the sharing node loader (``gobatch.Loader(share=...)``, ``shmloader
serve --share``; issue 28), through real Loaders in threads and processes.

Checked against references that share no code with the sharing path: each job's own Loader
(``share=None``: a ``shmloader run`` of its own) over the same configuration file, and the
independent xarray reference (nowcast_ref.py) for examples:

- two jobs of different configurations (batch size, seed, the satellite's normalisation) at once:
  each job's batches equal its own Loader's, value for value; one process serves both; between
  them they decode fewer chunks than the two alone (a chunk both read is decoded once);
- two jobs of one seed whose data exceed the cache keep pace through the block shuffle's groups:
  between them they decode about what one decodes alone, each epoch still its own Loader's;
- a job killed with ``kill -9``: the other reads its whole stream, correct, and the sharing node
  loader exits after its linger once no job is left; nothing is left in the (private) shm dir;
- another user's request is refused, naming its uid (run as uid 65534 through ``setpriv``);
- a dict configuration (the node loader reads each job's file) and ``node`` with ``share``
  are refused, naming the fault.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List

import numpy as np
import pytest

import gobatch
from nowcast_ref import NowcastReference, generated_nowcast
from synthetic import PY, process_gone, python_env, wait_for, write_config
from test_node import in_threads
from test_node_peers import FOREIGN_RANK, as_nobody
from test_sampler_loader import check_examples, preset, same, source

pytestmark = pytest.mark.timeout(180)

Batch = Dict[str, np.ndarray]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with generated_nowcast(tmp_path_factory.mktemp("nowcast"), "share", days=0.5, pixels=128, seed=5) as out:
        yield out


@pytest.fixture(scope="module")
def ref(data: Path) -> NowcastReference:
    cfg = preset()
    return NowcastReference(data, sat_channels=source(cfg, "satellite").get("channels"),
                            nwp_variables=source(cfg, "nwp").get("channels"))


@pytest.fixture(autouse=True)
def share(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A sharing node loader of the test's own (its name), lingering 1 s, and a private shm dir
    that must be empty afterwards."""
    for name in ("LOCAL_WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", "RANK", "WORLD_SIZE", "GOBATCH_NODE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GOBATCH_SHARE_LINGER_S", "1")
    shm = tempfile.mkdtemp(dir="/dev/shm", prefix="gobatch-test-share-")
    monkeypatch.setenv("GOBATCH_SHM_DIR", shm)
    yield f"test-{uuid.uuid4().hex[:12]}"
    left = os.listdir(shm)
    os.rmdir(shm) if not left else None
    assert not left, f"left in {shm}: {left}"


def settled_decodes(loader: gobatch.Loader) -> int:
    """The chunks a job decoded itself, once its published counters stop moving."""
    last = [-1]

    def still() -> bool:
        now = sum(loader.stats()["chunks_decoded"])
        done, last[0] = now == last[0], now
        return done

    wait_for(still, 10, "the decode counters to settle", step=0.6)
    return last[0]


def jobs(tmp_path: Path) -> Dict[str, Path]:
    """Two configurations of the same stores: another batch size and seed, and other
    normalisation constants for the satellite."""
    a = preset(size=6, seed=3, batches=8)
    b = preset(size=4, seed=9, batches=8)
    sat = source(b, "satellite")
    n = len(sat.get("channels") or [0])
    sat["normalise_mean"], sat["normalise_std"] = [0.25] * n, [2.0] * n
    return {"a": write_config(tmp_path / "a.json", a), "b": write_config(tmp_path / "b.json", b)}


def read(path: Path, data: Path, **kw: Any) -> "tuple[List[Batch], int, Any]":
    with gobatch.Loader(path, data_root=data, framework="numpy", **kw) as L:
        got = [{k: np.array(v) for k, v in b.items()} for b in L]
        return got, settled_decodes(L), L.pid


def test_jobs_share_one_decode(tmp_path: Path, data: Path, ref: NowcastReference, share: str) -> None:
    paths = jobs(tmp_path)
    shared = in_threads(lambda i: read(paths["ab"[i]], data, share=share), [0, 1])
    pids = {pid for _, _, pid in shared.values()}
    assert len(pids) == 1 and None not in pids, f"one sharing node loader for both jobs: {pids}"
    alone = {i: read(paths["ab"[i]], data) for i in (0, 1)}
    for i in (0, 1):
        assert len(shared[i][0]) == 8, f"job {'ab'[i]} read {len(shared[i][0])} of its 8 batches"
        assert same(shared[i][0], alone[i][0]), f"job {'ab'[i]}: the shared batches differ from its own Loader's"
    check_examples(ref, shared[0][0][:2])
    both, apart = shared[0][1] + shared[1][1], alone[0][1] + alone[1][1]
    assert 0 < both < apart, f"the jobs decoded {both} chunks sharing, {apart} alone"
    wait_for(lambda: process_gone(pids.pop()), 10, "the sharing node loader to exit after its linger")


def test_jobs_share_the_block_shuffle(tmp_path: Path, data: Path, share: str) -> None:
    """The data 1.8x the cache (cache_mb 32): each job's epochs are the block shuffle, and two
    jobs of one seed (other batch sizes and normalisation) keep pace through its groups, so
    that each group's chunks are decoded about once for both; each job's epoch is still its
    own Loader's."""
    paths = jobs(tmp_path)
    for name, size in (("a", 6), ("b", 4)):
        cfg = json.loads(paths[name].read_text())
        cfg["batch"].update(order="epochs", seed=3, size=size)
        cfg["batch"].pop("batches", None)
        write_config(paths[name], cfg)

    for name in "ab":
        why = gobatch.plan(paths[name], data_root=data, cache_mb=32)["sampling_why"]
        assert "block shuffle" in why, why

    def epoch(i: int, start: "threading.Barrier | None" = None, **kw: Any) -> "tuple[List[Batch], int]":
        with gobatch.Loader(paths["ab"[i]], data_root=data, framework="numpy", cache_mb=32, **kw) as L:
            if start is not None:  # a job joins the pace once its Loader is up: read together
                start.wait(timeout=60)
            got = [{k: np.array(v) for k, v in b.items()} for b in L]
            return got, settled_decodes(L)

    start = threading.Barrier(2)
    shared = in_threads(lambda i: epoch(i, start, share=share), [0, 1])
    alone = {i: epoch(i) for i in (0, 1)}
    for i in (0, 1):
        assert len(shared[i][0]) == len(alone[i][0]) > 0
        assert same(shared[i][0], alone[i][0]), f"job {'ab'[i]}: the shared epoch differs from its own Loader's"
    both, one = shared[0][1] + shared[1][1], max(alone[0][1], alone[1][1])
    assert both <= 1.1 * one, f"the jobs decoded {both} chunks sharing an epoch; one alone decodes {one}"


DYING_JOB = """
import sys, time
import gobatch
loader = gobatch.Loader(sys.argv[1], data_root=sys.argv[2], share=sys.argv[3])
next(iter(loader))
print("read", loader.pid, flush=True)
time.sleep(120)
"""


def test_a_job_dies_the_other_goes_on(tmp_path: Path, data: Path, share: str) -> None:
    paths = jobs(tmp_path)
    env = python_env()
    env.update({k: os.environ[k] for k in ("GOBATCH_SHM_DIR", "GOBATCH_SHARE_LINGER_S")})
    dying = subprocess.Popen([PY, "-c", DYING_JOB, str(paths["a"]), str(data), share], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = dying.stdout.readline() if dying.stdout else ""
        assert line.startswith("read "), f"job a: {line!r} {dying.stderr.read() if dying.stderr else ''}"
        server = int(line.split()[1])
        alone, _, _ = read(paths["b"], data)
        with gobatch.Loader(paths["b"], data_root=data, framework="numpy", share=share) as L:
            assert L.pid == server
            it = iter(L)
            got = [{k: np.array(v) for k, v in next(it).items()}]
            dying.send_signal(signal.SIGKILL)
            dying.wait(timeout=10)
            got += [{k: np.array(v) for k, v in b.items()} for b in it]
        assert same(got, alone), "job b's stream changed when job a died"
        wait_for(lambda: process_gone(server), 10, "the sharing node loader to exit after its linger")
    finally:
        if dying.poll() is None:
            dying.kill()
            dying.wait()


def test_another_user_is_refused(tmp_path: Path, data: Path, share: str) -> None:
    paths = jobs(tmp_path)
    with gobatch.Loader(paths["a"], data_root=data, share=share) as L:
        next(iter(L))
        name = gobatch._node.share_spec(share, rank=0, world_size=1).socket
        foreign = as_nobody(FOREIGN_RANK.replace("sys.argv[1]", repr(name)).replace("sys.argv[2]", repr("0" * 64)))
        out, err = foreign.communicate(timeout=20)
        lines = dict(line.split(" ", 1) for line in out.splitlines())
        assert "welcome" in lines, (out, err)
        assert "runs as uid 65534" in json.loads(lines["welcome"])["error"], (out, err)
        assert "memfd" not in lines.get("reply", ""), out
        assert sum(1 for _ in L) == 7, "the job's stream after the refusal"


def test_refusals(share: str) -> None:
    with pytest.raises(gobatch.ConfigError, match="share: a sharing node loader opens each job's configuration file"):
        gobatch.Loader(preset(size=2), share=share)
    with pytest.raises(ValueError, match="at most one of node and share"):
        gobatch.Loader(preset(size=2), share=share, node=True)
    with pytest.raises(ValueError, match="share must be True or a name"):
        gobatch.Loader(preset(size=2), share="")
