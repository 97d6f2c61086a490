"""The node loader (``shmloader serve``) through real ``gobatch.Loader`` processes and threads.

Several local ranks share one node loader (``node=True``; under torchrun ``LOCAL_WORLD_SIZE >
1`` chooses it). Checked against references that share no code with the loader: a per-rank
Loader of its own (``node=False``) for the same rank and world size, the independent xarray
reference (nowcast_ref.py) for examples, and the synthetic contract at the global index
``k * world_size + rank`` written out here:

- 2 and 4 local ranks: each rank's batches equal its per-rank Loader's, value for value; no
  two ranks get the same example; the examples equal the reference; one cache for the node
  (every rank's stats show the node's chunk misses, fewer than the per-rank loaders' sum);
- a rank killed with ``kill -9``: with ``on_rank_death = "continue"`` the others read their
  whole streams, correct; with ``"stop"`` each gets a LoaderError naming the dead rank;
- resume (``state_dict``/``load_state_dict``) and ``set_epoch`` per rank, on the same node
  loader;
- refusals (another configuration, a rank of another node) name the fault; a node loader
  started by hand is attached by name;
- the node loader exits after its last rank, and nothing is left in the (private) shm dir.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import numpy as np
import pytest

import gobatch
from nowcast_ref import NowcastReference, generated_nowcast
from synthetic import PY, check_batch, process_gone, python_env, run_shmloader, wait_for, write_config
from synthetic import config as synthetic_config
from test_epochs import ref  # noqa: F401  (the reference over this module's data)
from test_sampler_loader import check_examples, key, preset, same

pytestmark = pytest.mark.timeout(180)

Batch = Dict[str, np.ndarray]
SIZE = 8


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with generated_nowcast(tmp_path_factory.mktemp("nowcast"), "node", days=0.5, pixels=128, seed=7) as out:
        yield out


@pytest.fixture(autouse=True)
def job(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A torchrun-like job id of the test's own (so its node loader's socket is its own), no
    torchrun variables from outside, and a private shm dir that must be empty afterwards."""
    run_id = f"test-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", run_id)
    for name in ("LOCAL_WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", "RANK", "WORLD_SIZE", "GOBATCH_NODE"):
        monkeypatch.delenv(name, raising=False)
    shm = tempfile.mkdtemp(dir="/dev/shm", prefix="gobatch-test-node-")
    monkeypatch.setenv("GOBATCH_SHM_DIR", shm)
    yield run_id
    left = os.listdir(shm)
    os.rmdir(shm) if not left else None
    assert not left, f"left in {shm}: {left}"


def copied(batch: Any) -> Batch:
    return {k: np.array(v) for k, v in batch.items()}


def in_threads(fn: Callable[[int], Any], ranks: List[int]) -> Dict[int, Any]:
    """fn(rank) for every rank at once, each in a thread (a rank's Loader is its own); the
    first exception is raised here."""
    out: Dict[int, Any] = {}
    errors: List[BaseException] = []

    def run(r: int) -> None:
        try:
            out[r] = fn(r)
        except BaseException as e:  # noqa: BLE001 (re-raised below)
            errors.append(e)

    threads = [threading.Thread(target=run, args=(r,)) for r in ranks]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=150)
    if errors:
        raise errors[0]
    assert len(out) == len(ranks), f"ranks {sorted(out)} of {ranks} finished"
    return out


def wait_gone(pid: int) -> None:
    wait_for(lambda: process_gone(pid), 10, f"node loader pid {pid} to exit")


def settled_misses(loader: gobatch.Loader) -> int:
    """The cache misses a loader's ring shows once the counters stop moving (they are
    published every 500 ms)."""
    last = [-1]

    def still() -> bool:
        now = loader.stats()["cache_misses"]
        same_as_before, last[0] = now == last[0] and now > 0, now
        return same_as_before

    wait_for(still, 10, "the cache counters to settle", step=0.6)
    return last[0]


# ---------------------------------------------------------------------------- node vs per rank


@pytest.mark.parametrize("local", [2, 4])
def test_ranks_equal_per_rank_loaders(data: Path, ref: NowcastReference, local: int) -> None:
    cfg = preset(size=SIZE, batches=3)
    barrier = threading.Barrier(local)

    def node_rank(r: int) -> Any:
        with gobatch.Loader(cfg, data_root=data, rank=r, world_size=local, node=True, local_world_size=local) as L:
            got = [copied(b) for b in L]
            barrier.wait(timeout=60)  # every rank's stream is filled: the counters only settle now
            misses = settled_misses(L)  # the counters have been published
            return got, misses, L.pid, L.stats()["cache_budget_bytes"]

    node = in_threads(node_rank, list(range(local)))
    pids = {pid for _, _, pid, _ in node.values()}
    assert len(pids) == 1 and None not in pids, f"one node loader for every rank: {pids}"
    wait_gone(pids.pop())

    alone_misses = []
    for r in range(local):
        with gobatch.Loader(cfg, data_root=data, rank=r, world_size=local, node=False) as L:
            alone = [copied(b) for b in L]
            alone_misses.append(settled_misses(L))
        assert same(node[r][0], alone), f"rank {r}: the node loader's batches differ from its own loader's"
    keys = [key(b) for r in range(local) for b in node[r][0]]
    assert len(set(keys)) == len(keys) == 3 * local, "two ranks got the same batch"
    check_examples(ref, node[local - 1][0][:1])
    # One cache: every rank's ring shows the node's misses; they are those of one decoding of
    # what all ranks needed, at least any one rank's and fewer than all per-rank caches'.
    misses = {m for _, m, _, _ in node.values()}
    assert len(misses) == 1, f"the ranks' rings show different node counters: {misses}"
    m = misses.pop()
    assert max(alone_misses) <= m < sum(alone_misses), f"node {m} misses, per-rank loaders {alone_misses}"
    # One budget: the node's cache has the configured cache_mb, not N times it.
    want = next(s["cache_mb"] for s in cfg["source"] if s.get("anchor")) << 20
    assert {b for *_, b in node.values()} == {want}, f"cache budgets {[b for *_, b in node.values()]}, want {want}"


# ---------------------------------------------------------------------------------- rank death

DYING_RANK = """
import json, sys, time
import gobatch
cfg, rank, world = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
loader = gobatch.Loader(cfg, rank=rank, world_size=world, node=True, local_world_size=world)
next(iter(loader))
print("read", loader.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("policy", ["continue", "stop"])
def test_rank_death(policy: str) -> None:
    world, batches = 3, 40
    cfg = synthetic_config({"x": ((5,), "int64")}, size=2, batches=batches, delay_ms=2)
    cfg["node"] = {"on_rank_death": policy}
    # Rank 1 starts the node loader, takes one batch and is killed: the node loader lives on.
    dying = subprocess.Popen([PY, "-c", DYING_RANK, json.dumps(cfg), "1", str(world)], env=python_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = dying.stdout.readline() if dying.stdout else ""
        assert line.startswith("read "), f"rank 1: {line!r} {dying.stderr.read() if dying.stderr else ''}"
        server = int(line.split()[1])
        loaders = {r: gobatch.Loader(cfg, rank=r, world_size=world, node=True, local_world_size=world) for r in (0, 2)}
        assert {L.pid for L in loaders.values()} == {server}
        for r, L in loaders.items():
            check_batch(next(iter(L)), cfg, 0 * world + r)
        dying.send_signal(signal.SIGKILL)
        dying.wait(timeout=10)
        for r, L in loaders.items():
            k = 1
            if policy == "continue":
                for b in L:
                    check_batch(b, cfg, k * world + r)
                    k += 1
                assert k == batches, f"rank {r} read {k} of its {batches} batches after rank 1 died"
            else:
                with pytest.raises(gobatch.LoaderError, match=rf"rank 1 \(pid {dying.pid}\) died.*on_rank_death = \"stop\""):
                    for b in L:
                        check_batch(b, cfg, k * world + r)
                        k += 1
                assert k < batches, f"rank {r} read its whole stream although rank 1 died"
            L.close()
        wait_gone(server)
    finally:
        if dying.poll() is None:
            dying.kill()
            dying.wait()


# ------------------------------------------------------------------------------ resume, epochs


def test_resume_and_epochs_per_rank(data: Path) -> None:
    cfg = preset(size=SIZE, order="epochs")
    ranks = {r: gobatch.Loader(cfg, data_root=data, rank=r, world_size=2, node=True, local_world_size=2) for r in (0, 1)}
    try:
        server = ranks[0].pid
        L = ranks[1]
        it = iter(L)
        [next(it) for _ in range(2)]
        state = L.state_dict()
        after = [copied(next(it)) for _ in range(2)]
        L.load_state_dict(state)
        it = iter(L)
        assert same([copied(next(it)) for _ in range(2)], after), "resumed rank 1 is not where it was"
        L.set_epoch(1)
        epoch1 = [copied(b) for _, b in zip(range(2), L)]
        assert L.pid == server, "an epoch or a resume started another node loader"
        rank0 = [copied(b) for _, b in zip(range(2), ranks[0])]
    finally:
        for R in ranks.values():
            R.close()
    wait_gone(server)
    with gobatch.Loader(cfg, data_root=data, rank=1, world_size=2, node=False, epoch=1) as alone:
        assert len(alone) == len(L)
        assert same(epoch1, [copied(b) for _, b in zip(range(2), alone)]), "rank 1's epoch 1 differs"
    with gobatch.Loader(cfg, data_root=data, rank=0, world_size=2, node=False) as alone:
        assert same(rank0, [copied(b) for _, b in zip(range(2), alone)]), "rank 0's epoch 0 differs"


# ------------------------------------------------------------------------ refusals, by hand


def test_refusals_name_the_fault() -> None:
    cfg = synthetic_config({"x": ((3,), "int64")}, size=2)
    with gobatch.Loader(cfg, rank=0, world_size=4, node=True, local_world_size=2, node_rank=0) as first:
        other = synthetic_config({"x": ((4,), "int64")}, size=2)
        with pytest.raises(gobatch.ConfigError, match="rank 1's configuration is not the node loader's"):
            gobatch.Loader(other, rank=1, world_size=4, node=True, local_world_size=2, node_rank=0)
        # The same file with other batch options would make another stream: refused, not
        # silently served the node loader's.
        with pytest.raises(gobatch.ConfigError, match=r"rank 1's batch options \[--seed 7\] are not the node loader's \[\]"):
            gobatch.Loader(cfg, rank=1, world_size=4, node=True, local_world_size=2, node_rank=0, seed=7)
        with pytest.raises(gobatch.ConfigError, match=r'rank 1.s data root "elsewhere" is not the node loader.s ""'):
            gobatch.Loader(cfg, rank=1, world_size=4, node=True, local_world_size=2, node_rank=0, data_root="elsewhere")
        with pytest.raises(gobatch.ConfigError, match=r"rank 2 is not on this node: .* serves ranks 0 \.\. 1 of 4"):
            gobatch.Loader(cfg, rank=2, world_size=4, node=True, local_world_size=2, node_rank=0)
        with pytest.raises(gobatch.LoaderError, match="rank 0 is already served to pid"):
            gobatch.Loader(cfg, rank=0, world_size=4, node=True, local_world_size=2, node_rank=0)
        check_batch(next(iter(first)), cfg, 0)
        with gobatch.Loader(cfg, rank=1, world_size=4, node=True, local_world_size=2, node_rank=0) as second:
            check_batch(next(iter(second)), cfg, 1)
        server = first.pid
    wait_gone(server)  # both local ranks came and went (the refused ones never joined)
    with pytest.raises(gobatch.LoaderError, match="no node loader listens on socket 'gobatch-test-absent'"):
        gobatch.Loader(cfg, node="gobatch-test-absent", start_timeout=0.3)


def test_started_by_hand(tmp_path: Path, job: str) -> None:
    cfg = synthetic_config({"x": ((3,), "int64")}, size=2, batches=5)
    path = write_config(tmp_path / "c.json", cfg)
    name = f"gobatch-test-{job}"
    serve = run_shmloader(["serve", "--config", str(path), "--socket", name, "--local-world-size", "2"],
                          stderr=subprocess.PIPE)
    try:
        def rank(r: int) -> List[int]:
            with gobatch.Loader(path, rank=r, world_size=2, node=name) as L:
                assert L.pid == serve.pid
                got = []
                for k, b in enumerate(L):
                    check_batch(b, cfg, k * 2 + r)
                    got.append(k * 2 + r)
                return got

        got = in_threads(rank, [0, 1])
        assert sorted(got[0] + got[1]) == list(range(10))
        assert serve.wait(timeout=10) == 0, serve.stderr.read() if serve.stderr else ""
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with pytest.raises(ConnectionRefusedError):
        s.connect("\0" + name)  # the socket's name went with the process
    s.close()


def test_node_loader_death_says_it_is_not_supervised(tmp_path: Path, job: str) -> None:
    """kill -9 of a node loader started by hand: the rank's next() raises a LoaderError that
    names the dead process and says that the node loader is not restarted (unlike a Loader's
    own child) and what to do."""
    cfg = synthetic_config({"x": ((3,), "int64")}, size=2, batches=0, delay_ms=20)
    path = write_config(tmp_path / "c.json", cfg)
    name = f"gobatch-test-{job}"
    serve = run_shmloader(["serve", "--config", str(path), "--socket", name, "--local-world-size", "1"],
                          stderr=subprocess.PIPE)
    try:
        with gobatch.Loader(path, rank=0, world_size=1, node=name) as L:
            check_batch(next(iter(L)), cfg, 0)
            serve.kill()
            serve.wait()
            with pytest.raises(gobatch.LoaderError, match=rf"pid {serve.pid} died; the node loader \(shmloader serve\) "
                               r"is not supervised: it is not restarted when it dies"):
                for _ in range(1000):
                    next(L)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
