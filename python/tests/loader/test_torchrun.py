"""A simulated two-node torchrun job with the node loader, on this machine.

``python -m torch.distributed.run --nnodes=2 --nproc_per_node=2 --node_rank=0|1
--master_addr=127.0.0.1 --master_port=P`` is launched twice (static rendezvous over
loopback): torchrun sets each rank's RANK, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK and
WORLD_SIZE, and every rank's plain ``gobatch.Loader(config)`` takes its node's node loader
(LOCAL_WORLD_SIZE = 2). Each rank writes what it read to a file. Checked:

- two node loaders (one per node, shared by its two ranks), four rings (one per rank, each
  checked by the Loader to be its rank's);
- the four ranks' shares are disjoint, and together they are exactly the first batches of one
  world-size-1 Loader's stream (global batch k*4 + r is rank r's batch k): complete;
- the batches are identical to a single-node run (``--nproc_per_node=4``) for the same global
  ranks;
- the node loaders exit with their ranks, and nothing is left in the private shm dir.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterator, List

import numpy as np
import pytest

import gobatch
from nowcast_ref import generated_nowcast
from synthetic import process_gone, python_env, wait_for
from test_sampler_loader import preset

pytest.importorskip("torch.distributed.run")

pytestmark = pytest.mark.timeout(300)

BATCHES, SIZE = 3, 4

RANK_SCRIPT = """
import json, os, sys
import numpy as np
import gobatch
cfg, data, out = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
with gobatch.Loader(cfg, data_root=data) as loader:
    batches = [{k: np.asarray(v).tolist() for k, v in b.items() if k in ("t0", "x", "y")} |
               {"satellite_sum": float(np.nansum(b["satellite"], dtype=np.float64))} for b in loader]
    info = {"rank": loader.rank, "world_size": loader.world_size, "pid": loader.pid,
            "group_rank": int(os.environ["GROUP_RANK"]), "batches": batches}
with open(os.path.join(out, f"rank{info['rank']}.json"), "w") as f:
    json.dump(info, f)
"""


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with generated_nowcast(tmp_path_factory.mktemp("nowcast"), "torchrun", days=0.5, pixels=128, seed=3) as out:
        yield out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun(script: Path, cfg: Dict[str, Any], data: Path, out: Path, shm: str, *, nnodes: int, nproc: int) -> None:
    """Runs the job: one torchrun per node, all at once; each must succeed within 150 s."""
    out.mkdir()
    port = free_port()
    env = python_env() | {"GOBATCH_SHM_DIR": shm, "OMP_NUM_THREADS": "1"}
    procs = []
    for node in range(nnodes):
        args = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nnodes}", f"--nproc_per_node={nproc}",
                f"--node_rank={node}", "--master_addr=127.0.0.1", f"--master_port={port}",
                str(script), json.dumps(cfg), str(data), str(out)]
        procs.append(subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    try:
        for node, p in enumerate(procs):
            text, _ = p.communicate(timeout=150)
            assert p.returncode == 0, f"torchrun node {node} exited {p.returncode}:\n{text[-4000:]}"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def read_ranks(out: Path, world: int) -> List[Dict[str, Any]]:
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(world)]
    for r, info in enumerate(ranks):
        assert info["rank"] == r and info["world_size"] == world
        assert len(info["batches"]) == BATCHES, f"rank {r} read {len(info['batches'])} batches"
    return ranks


def test_two_nodes_equal_one_node_and_one_stream(data: Path, tmp_path: Path) -> None:
    cfg = preset(size=SIZE, batches=BATCHES)
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    shm = tempfile.mkdtemp(dir="/dev/shm", prefix="gobatch-test-torchrun-")
    try:
        torchrun(script, cfg, data, tmp_path / "two", shm, nnodes=2, nproc=2)
        two = read_ranks(tmp_path / "two", 4)
        torchrun(script, cfg, data, tmp_path / "one", shm, nnodes=1, nproc=4)
        one = read_ranks(tmp_path / "one", 4)
        assert os.listdir(shm) == [], f"left in {shm}: {os.listdir(shm)}"
    finally:
        if not os.listdir(shm):
            os.rmdir(shm)

    # Two node loaders for two nodes (each shared by its ranks), one for the single node.
    by_node = {}
    for info in two:
        assert info["group_rank"] == info["rank"] // 2
        by_node.setdefault(info["group_rank"], set()).add(info["pid"])
    assert all(len(p) == 1 for p in by_node.values()) and len(set().union(*by_node.values())) == 2, by_node
    assert len({info["pid"] for info in one}) == 1
    for pid in {info["pid"] for info in two + one}:
        wait_for(lambda: process_gone(pid), 10, f"node loader pid {pid} to exit")

    for r in range(4):
        assert two[r]["batches"] == one[r]["batches"], f"rank {r}: two nodes and one node differ"

    # Disjoint and complete: the ranks' batches interleaved are one world-size-1 stream.
    with gobatch.Loader(cfg | {"batch": cfg["batch"] | {"batches": BATCHES * 4}}, data_root=data, node=False) as alone:
        stream = [b for b in ({"t0": np.asarray(b["t0"]).tolist(), "x": np.asarray(b["x"]).tolist(),
                               "y": np.asarray(b["y"]).tolist(),
                               "satellite_sum": float(np.nansum(b["satellite"], dtype=np.float64))} for b in alone)]
    for g, want in enumerate(stream):
        assert two[g % 4]["batches"][g // 4] == want, f"global batch {g} (rank {g % 4}, batch {g // 4})"
