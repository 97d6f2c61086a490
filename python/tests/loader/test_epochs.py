"""Epochs (``[batch] order = "epochs"``) and finished bounded streams, through real
``gobatch.Loader`` / ``shmloader`` processes.

The nowcast-ref data is generated at test time (tools/gen_nowcast.py, half a day, 128 px). A
sample of an epoch is a t0 candidate; the candidates come from the independent xarray
reference (``NowcastReference.valid_t0_indices``), not from the sampler, and examples are
identified from each batch's own ``t0``/``x``/``y`` tensors. Checked:

- ``len(loader)`` is floor(candidates / (batch size * world size));
- two epochs in a row: every candidate at most once per epoch, exactly ``len * size * world``
  of them (drop-last below one batch per rank), a different order in each epoch, examples
  equal to the reference;
- ``set_epoch`` and ``loader.epoch``; a ``for`` left early is continued by the next one;
- ``state_dict``/``load_state_dict`` mid-epoch continue exactly as an uninterrupted run;
- 2 ranks (with 1 and 2 readers) are disjoint and together complete;
- an epoch over data 5x the cache (the block shuffle): every candidate once per epoch, 1 and 2
  ranks, resumed mid-epoch equal to uninterrupted, two epochs differ, examples equal to the
  reference, and the mixing (segments per batch, Spearman(position, t0)) as planned;
- a finished bounded stream raises ``StreamEndedError`` when iterated again (Loader and
  attach), and epoch misuse is refused clearly;
- the iterator contract (NumPy and torch): ``next(iter(loader))`` then ``for``, ``it =
  iter(loader); next(it); for b in it``, a warm-up ``islice`` then the loop all continue the
  current epoch; an exhausted iterator stays exhausted; the same patterns on a synthetic stream;
- one child serves every epoch (same pid, no chunk decoded again in later epochs), a jump
  starts a new one, a resume at an epoch's end continues, and a child killed near an epoch's
  end is restarted into the same epochs.
"""

from __future__ import annotations

import copy
import os
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

import gobatch
from nowcast_ref import NowcastReference, generated_nowcast
from synthetic import config as synthetic_config
from synthetic import run_shmloader, wait_for, write_config
from test_sampler_loader import check_examples, preset, source

REPO = Path(__file__).resolve().parents[3]
SIZE = 8

pytestmark = pytest.mark.timeout(180)

Batch = dict[str, np.ndarray]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with generated_nowcast(tmp_path_factory.mktemp("nowcast"), "epochs", days=0.5, pixels=128, seed=5) as out:
        yield out


@pytest.fixture(scope="module")
def ref(data: Path) -> NowcastReference:
    cfg = preset()
    return NowcastReference(data, sat_channels=source(cfg, "satellite").get("channels"),
                            nwp_variables=source(cfg, "nwp").get("channels"))


@pytest.fixture(scope="module")
def candidates(ref: NowcastReference) -> set[int]:
    """The t0 candidates (unix seconds) by the reference."""
    t = ref.sat_time[ref.valid_t0_indices()].astype("datetime64[s]").astype(np.int64)
    return {int(v) for v in t}


def epochs_cfg(**batch: Any) -> dict[str, Any]:
    return preset(size=SIZE, order="epochs", **batch)


def copied(batch: Any) -> Batch:
    # A torch tensor through .numpy(): np.array(tensor) warns under NumPy 2 (no copy keyword).
    return {k: np.array(v.numpy() if hasattr(v, "numpy") else v) for k, v in batch.items()}


def run_epoch(loader: gobatch.Loader, stop: int | None = None) -> list[Batch]:
    """One ``for`` over the loader (all of it, or its first ``stop`` batches)."""
    out: list[Batch] = []
    for batch in loader:
        out.append(copied(batch))
        if stop is not None and len(out) == stop:
            break
    return out


def samples(batches: list[Batch]) -> list[tuple[int, float, float]]:
    return [(int(t), float(x), float(y)) for b in batches for t, x, y in zip(b["t0"], b["x"], b["y"])]


def same(a: list[Batch], b: list[Batch]) -> bool:
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(np.array_equal(x[k], y[k], equal_nan=x[k].dtype.kind == "f") for k in x)
        for x, y in zip(a, b))


def check_once(t0s: list[int], candidates: set[int], per_rank: int, world: int, what: str) -> None:
    """Every t0 of an epoch is a candidate, none twice, and all but the drop-last tail."""
    assert set(t0s) <= candidates, f"{what}: t0 outside the candidates"
    assert len(t0s) == len(set(t0s)), f"{what}: a sample twice in one epoch"
    assert len(t0s) == per_rank * SIZE * world, (what, len(t0s), per_rank)
    assert len(candidates) - len(t0s) < SIZE * world, f"{what}: more than the last incomplete batch dropped"


def test_len_two_epochs_every_sample_once(data: Path, ref: NowcastReference, candidates: set[int]) -> None:
    with gobatch.Loader(epochs_cfg(), data_root=data) as loader:
        n = len(loader)
        assert loader.order == "epochs" and n == len(candidates) // SIZE and n >= 10, (n, len(candidates))
        assert loader.epoch == 0
        first = run_epoch(loader)
        assert loader.epoch == 0
        second = run_epoch(loader)
        assert loader.epoch == 1 and len(loader) == n
    assert len(first) == len(second) == n
    for e, epoch in enumerate((first, second)):
        check_once([s[0] for s in samples(epoch)], candidates, n, 1, f"epoch {e}")
    assert [s[0] for s in samples(first)] != [s[0] for s in samples(second)], "two epochs in the same order"
    moved = {s[0]: s[1:] for s in samples(first)}
    again = {s[0]: s[1:] for s in samples(second)}
    assert sum(moved[t] != again[t] for t in moved.keys() & again.keys()) > len(moved) // 2, \
        "a t0 keeps its centre from epoch to epoch"
    check_examples(ref, first[:2] + second[-1:])


def test_set_epoch_and_break(data: Path) -> None:
    with gobatch.Loader(epochs_cfg(), data_root=data, readers=2) as loader:
        whole = [run_epoch(loader) for _ in range(3)]
    with gobatch.Loader(epochs_cfg(), data_root=data, readers=1) as loader:
        loader.set_epoch(1)
        assert loader.epoch == 1
        assert same(run_epoch(loader), whole[1])
        loader.set_epoch(1)  # again from its start, as DistributedSampler repeats an epoch
        assert same(run_epoch(loader), whole[1])
        assert same(run_epoch(loader), whole[2]) and loader.epoch == 2
        loader.set_epoch(0)
        assert same(run_epoch(loader, stop=3), whole[0][:3])
        # A for left early: the next one goes on with the same epoch, then the next one.
        assert same(run_epoch(loader), whole[0][3:]) and loader.epoch == 0
        assert same(run_epoch(loader), whole[1]) and loader.epoch == 1
    with gobatch.Loader(epochs_cfg(), data_root=data, epoch=2) as loader:
        assert loader.epoch == 2 and same(run_epoch(loader), whole[2])


def test_state_dict_resumes_mid_epoch(data: Path) -> None:
    cfg = epochs_cfg()
    with gobatch.Loader(cfg, data_root=data) as loader:
        n = len(loader)
        whole = [run_epoch(loader) for _ in range(3)]
    with gobatch.Loader(cfg, data_root=data) as loader:
        run_epoch(loader)
        it = iter(loader)
        for _ in range(4):
            next(it)
        state = loader.state_dict()
    assert state["next_batch"] == n + 4 and state["epoch"] == 1 and state["epoch_batches"] == n
    with gobatch.Loader(cfg, data_root=data) as loader:
        run_epoch(loader, stop=2)  # somewhere else
        loader.load_state_dict(copy.deepcopy(state))
        assert loader.epoch == 1
        loader.set_epoch(1)  # the usual loop calls it: it keeps the resumed place
        rest = run_epoch(loader)
        assert same(rest, whole[1][4:]), "the resumed epoch is not the rest of the uninterrupted one"
        assert same(run_epoch(loader), whole[2]) and loader.epoch == 2
        end = loader.state_dict()
    assert end["next_batch"] == 3 * n and end["epoch"] == 3
    with gobatch.Loader(cfg, data_root=data) as loader:
        with pytest.raises(ValueError, match="order 'stream' != 'epochs'"):
            loader.load_state_dict({**state, "order": "stream"})
        with pytest.raises(ValueError, match="epoch_batches"):
            loader.load_state_dict({**state, "epoch_batches": n + 1})


@pytest.mark.parametrize("readers", [1, 2])
def test_two_ranks_disjoint_and_complete(data: Path, candidates: set[int], readers: int) -> None:
    per_rank: list[list[list[Batch]]] = []
    for rank in range(2):
        with gobatch.Loader(epochs_cfg(), data_root=data, rank=rank, world_size=2, readers=readers) as loader:
            assert len(loader) == len(candidates) // (2 * SIZE)
            per_rank.append([run_epoch(loader) for _ in range(2)])
    for e in range(2):
        t0 = [[s[0] for s in samples(per_rank[r][e])] for r in range(2)]
        assert not set(t0[0]) & set(t0[1]), f"epoch {e}: ranks 0 and 1 share samples"
        check_once(t0[0] + t0[1], candidates, len(per_rank[0][e]), 2, f"epoch {e}, 2 ranks, {readers} readers")
    if readers == 2:  # the same shares as with one reader
        with gobatch.Loader(epochs_cfg(), data_root=data, rank=1, world_size=2, readers=1) as loader:
            assert same(run_epoch(loader), per_rank[1][0])


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_drop_last_false_keeps_every_sample(data: Path, ref: NowcastReference, candidates: set[int],
                                            framework: str) -> None:
    """``drop_last=False`` (one rank): every candidate once per epoch, the last batch smaller
    (the padding the producer completed it with cut off), two epochs in a row; two ranks get
    the same number of full batches, the padding being the epoch's first samples again."""
    size = 7  # the candidates do not fill whole batches of 7
    assert len(candidates) % size and len(candidates) % (2 * size), "fixture: whole batches"
    cfg = preset(size=size, order="epochs")
    with gobatch.Loader(cfg, data_root=data, drop_last=False, framework=framework) as loader:
        n = len(loader)
        assert n == -(-len(candidates) // size)
        epochs = [run_epoch(loader) for _ in range(2)]
    for e, epoch in enumerate(epochs):
        t0s = [s[0] for s in samples(epoch)]
        assert len(epoch) == n and sorted(t0s) == sorted(candidates), f"epoch {e}: not every candidate once"
        assert {len(b["t0"]) for b in epoch[:-1]} == {size} and len(epoch[-1]["t0"]) == len(candidates) % size
        assert all(len(v) == len(epoch[-1]["t0"]) for v in epoch[-1].values()), "a tensor of the last batch not cut"
    check_examples(ref, epochs[0][-1:])
    per_rank = []
    for rank in range(2):
        with gobatch.Loader(cfg, data_root=data, drop_last=False, rank=rank, world_size=2) as loader:
            assert len(loader) == -(-len(candidates) // (2 * size))
            per_rank.append(run_epoch(loader))
    # global batch k*2 + r is rank r's batch k: the places in order, then the padding
    places = [s[0] for k in range(len(per_rank[0])) for r in range(2) for s in samples(per_rank[r][k:k + 1])]
    N = len(candidates)
    assert len(places) > N and sorted(places[:N]) == sorted(candidates)
    assert places[N:] == places[:len(places) - N], "the padding is not the epoch's first samples"


def test_epoch_misuse_is_refused(data: Path) -> None:
    with pytest.raises(gobatch.ConfigError, match="batch.batches"):
        gobatch.Loader(epochs_cfg(batches=5), data_root=data)
    with pytest.raises(gobatch.ConfigError, match="--start 0 is not in --epoch 1"):
        gobatch.Loader(epochs_cfg(), data_root=data, start=0, epoch=1)
    with pytest.raises(ValueError, match="needs \\[batch\\] order = 'epochs'"):
        gobatch.Loader(preset(), data_root=data, epoch=1)
    with gobatch.Loader(preset(), data_root=data) as loader:
        with pytest.raises(ValueError, match="streams without epochs"):
            loader.set_epoch(1)
    loader = gobatch.Loader(epochs_cfg(), data_root=data)
    loader.close()
    with pytest.raises(gobatch.LoaderError, match="is closed"):
        loader.set_epoch(1)
    with pytest.raises(gobatch.LoaderError, match="is closed"):
        iter(loader)


def test_standalone_ring_streams_epoch_after_epoch(data: Path, tmp_path: Path, ring_name: str) -> None:
    """Without --epoch (a named ring), an epochs stream runs epoch after epoch in one process:
    the same batches as the Loader's epochs, one per child."""
    cfg = epochs_cfg()
    with gobatch.Loader(cfg, data_root=data) as loader:
        n = len(loader)
        whole = run_epoch(loader) + run_epoch(loader)
    path = write_config(tmp_path / "epochs.json", cfg)
    proc = run_shmloader(["run", "--config", str(path), "--data-root", str(data), "--ring", ring_name],
                         stderr=subprocess.PIPE)
    try:
        wait_for(lambda: os.path.exists(f"/dev/shm/gobatch-{ring_name}") or proc.poll() is not None, 30, "ring file")
        with gobatch.attach(ring_name, timeout=30) as ring:
            assert ring.total_batches is None
            got = [copied(b) for _, b in zip(range(2 * n), ring)]
        assert same(got, whole)
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=30)


def test_finished_bounded_stream_raises_when_iterated_again(tmp_path: Path, ring_name: str) -> None:
    cfg = synthetic_config({"x": ((3,), "int64")}, size=2, batches=3)
    with gobatch.Loader(cfg) as loader:
        assert [int(b["x"][0, 0]) for b in loader] == [0, 2, 4]
        with pytest.raises(gobatch.StreamEndedError, match="order = 'epochs'") as e:
            for _ in loader:
                raise AssertionError("a finished stream yielded a batch")
        assert "create a new Loader" in str(e.value)
        with pytest.raises(StopIteration):
            next(loader)  # the iterator protocol itself stays: exhausted
        # load_state_dict to an earlier place makes it readable again.
        loader.load_state_dict({**loader.state_dict(), "next_batch": 1})
        assert [int(b["x"][0, 0]) for b in loader] == [2, 4]
    # Read to the last batch without seeing the end: iterating again still raises.
    with gobatch.Loader(cfg) as loader:
        it = iter(loader)
        for _ in range(3):
            next(it)
        with pytest.raises(gobatch.StreamEndedError):
            iter(loader)
    # A ring attached by name, from a standalone shmloader.
    path = write_config(tmp_path / "c.json", cfg)
    proc = run_shmloader(["run", "--config", str(path), "--ring", ring_name], stderr=subprocess.PIPE)
    try:
        wait_for(lambda: os.path.exists(f"/dev/shm/gobatch-{ring_name}") or proc.poll() is not None,
                 10, "ring file")
        with gobatch.attach(ring_name, timeout=30) as ring:
            assert len(list(ring)) == 3
            with pytest.raises(gobatch.StreamEndedError, match="start a new producer"):
                list(ring)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_toml_order_without_tomllib() -> None:
    """The line reader Pythons before 3.11 use for [batch] order agrees with tomllib."""
    import tomllib

    from gobatch._config import _toml_order

    cases = [
        '[batch]\nsize = 4\norder = "epochs"\n',
        "[ batch ] # the batch\nseed = 1\n  order = 'stream'\n[ring]\nslots = 2\n",
        '[batch]\nsize = 4\n[[source]]\norder = "epochs"\n',
        '[ring]\norder = "epochs"\n[batch]\nsize = 1\n',
        (REPO / "presets" / "nowcast.toml").read_text(),
    ]
    for text in cases:
        assert _toml_order(text) == tomllib.loads(text).get("batch", {}).get("order"), text


def spearman(values: list[int]) -> float:
    """Rank correlation of position and value (ties share their mean rank)."""
    v = np.asarray(values, dtype=np.float64)
    order = np.argsort(v, kind="stable")
    ranks = np.empty(len(v))
    ranks[order] = np.arange(len(v), dtype=np.float64)
    for u in np.unique(v):  # ties: the mean rank
        at = v == u
        ranks[at] = ranks[at].mean()
    return float(np.corrcoef(np.arange(len(v), dtype=np.float64), ranks)[0, 1])


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Six days, 64 px (chunks of 12 steps x 128 px decoded whole): over 10x a cache of 48 MB."""
    with generated_nowcast(tmp_path_factory.mktemp("nowcast"), "epochs-big", days=6, pixels=64, seed=6) as out:
        yield out


def test_epochs_larger_than_the_cache(big: Path) -> None:
    data = big
    cfg0 = preset()
    ref = NowcastReference(data, sat_channels=source(cfg0, "satellite").get("channels"),
                           nwp_variables=source(cfg0, "nwp").get("channels"))
    candidates = {int(v) for v in ref.sat_time[ref.valid_t0_indices()].astype("datetime64[s]").astype(np.int64)}
    cfg = epochs_cfg()
    # A group of 4 segments of one time chunk (the automatic group is what the cache holds
    # twice: 1 here, where a time chunk of the whole field is 4.7 MB decoded).
    source(cfg, "satellite").update(cache_mb=48, segment_steps=12, resident_segments=4)
    plan = gobatch.plan(cfg, data_root=str(data))
    assert plan["decoded_bytes"] >= 5 * plan["cache_bytes"], (plan["decoded_bytes"], plan["cache_bytes"])
    assert "block shuffle" in plan["sampling_why"], plan["sampling_why"]
    mixing = plan["mixing"]
    with gobatch.Loader(cfg, data_root=data) as loader:
        n = len(loader)
        assert n == len(candidates) // SIZE
        first, second = run_epoch(loader), run_epoch(loader)
        stats = loader.stats()
    for e, epoch in enumerate((first, second)):
        check_once([s[0] for s in samples(epoch)], candidates, n, 1, f"epoch {e} over 5x the cache")
    assert [s[0] for s in samples(first)] != [s[0] for s in samples(second)], "two epochs in the same order"
    check_examples(ref, first[:2] + second[-1:])
    rho = spearman([s[0] for s in samples(first)])
    assert abs(rho) < 0.2 and abs(mixing["spearman_position_t0"]) < 0.2, (rho, mixing)
    assert stats["segments_per_batch"] >= 2 and stats["segments_per_batch"] >= mixing["segments_per_batch"] - 0.5, \
        (stats["segments_per_batch"], mixing)
    # Resumed after 4 batches of epoch 1: the rest of the uninterrupted epoch.
    with gobatch.Loader(cfg, data_root=data) as loader:
        run_epoch(loader)
        it = iter(loader)
        for _ in range(4):
            next(it)
        state = loader.state_dict()
    with gobatch.Loader(cfg, data_root=data) as loader:
        loader.load_state_dict(copy.deepcopy(state))
        loader.set_epoch(1)
        assert same(run_epoch(loader), second[4:]), "the resumed epoch is not the rest of the uninterrupted one"
    # 2 ranks: disjoint, together complete.
    t0: list[list[int]] = []
    for rank in range(2):
        with gobatch.Loader(cfg, data_root=data, rank=rank, world_size=2) as loader:
            t0.append([s[0] for s in samples(run_epoch(loader))])
            per = len(loader)
    assert not set(t0[0]) & set(t0[1]), "ranks 0 and 1 share samples"
    check_once(t0[0] + t0[1], candidates, per, 2, "2 ranks over 5x the cache")


# ---- the iterator contract (issue 20) and one child across epochs (issue 19) ----

FRAMEWORKS = ["numpy", "torch"]
COUNTERS_S = 1.3  # the job counters are published at least once a second (PROTOCOL.md 2.5a)


@pytest.fixture(scope="module")
def whole(data: Path) -> list[list[Batch]]:
    """Epochs 0 and 1, each from a fresh loader placed there (one ``for`` each)."""
    out = []
    for e in range(2):
        with gobatch.Loader(epochs_cfg(), data_root=data, epoch=e) as loader:
            out.append(run_epoch(loader))
    return out


def framework_of(batch: Any) -> str:
    return "numpy" if isinstance(batch["t0"], np.ndarray) else "torch"


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_next_then_for_is_the_same_epoch(data: Path, whole: list[list[Batch]], framework: str) -> None:
    if framework == "torch":
        pytest.importorskip("torch")
    with gobatch.Loader(epochs_cfg(), data_root=data, framework=framework) as loader:
        first = next(iter(loader))  # a look at the shapes
        assert framework_of(first) == framework
        head = [copied(first)]
        del first
        rest = run_epoch(loader)
        assert same(head + rest, whole[0]), "next(iter(loader)) then for is not epoch 0"
        assert loader.epoch == 0
        assert same(run_epoch(loader), whole[1]) and loader.epoch == 1


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_iterator_continues_its_epoch(data: Path, whole: list[list[Batch]], framework: str) -> None:
    if framework == "torch":
        pytest.importorskip("torch")
    with gobatch.Loader(epochs_cfg(), data_root=data, framework=framework) as loader:
        it = iter(loader)
        assert iter(it) is it
        got = [copied(next(it))]
        for b in it:
            got.append(copied(b))
        del b  # the leftover holds a slot (leases: another part of issue 20)
        assert same(got, whole[0]), "it = iter(loader); next(it); for b in it: is not epoch 0"
        assert list(it) == [], "an exhausted iterator yields again"
        second = iter(loader)  # epoch 0 is exhausted: the next epoch
        assert loader.epoch == 1 and list(it) == [], "the old epoch's iterator runs the new epoch"
        assert same([copied(b) for b in second], whole[1])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_warm_up_then_training_loop(data: Path, whole: list[list[Batch]], framework: str) -> None:
    from itertools import islice
    if framework == "torch":
        pytest.importorskip("torch")
    with gobatch.Loader(epochs_cfg(), data_root=data, framework=framework) as loader:
        it = iter(loader)
        for _ in islice(it, 3):
            pass
        del _  # the leftover holds a slot (leases: another part of issue 20)
        got = run_epoch(loader, stop=2)  # the training loop, left early
        got += [copied(b) for b in it]  # and the rest of the epoch through the first iterator
        assert same(got, whole[0][3:]), "a warm-up then the loop is not the rest of epoch 0"
        assert same(run_epoch(loader), whole[1])


def test_one_child_serves_every_epoch(data: Path, ref: NowcastReference, candidates: set[int],
                                      whole: list[list[Batch]]) -> None:
    with gobatch.Loader(epochs_cfg(), data_root=data) as loader:
        n, pid = len(loader), loader.pid
        first = run_epoch(loader)
        time.sleep(COUNTERS_S)
        misses = loader.stats()["cache_misses"]
        assert misses > 0
        loader.set_epoch(1)  # the usual loop's call: the next epoch goes on in the same ring
        second = run_epoch(loader)
        third = run_epoch(loader)  # no set_epoch: the next one as well
        assert loader.pid == pid and loader.epoch == 2, "a new child for the next epoch"
        time.sleep(COUNTERS_S)
        assert loader.stats()["cache_misses"] == misses, "epochs 1 and 2 decoded again what the cache held"
        state = loader.state_dict()
        assert state["next_batch"] == 3 * n and state["epoch"] == 3
        loader.set_epoch(1)  # a jump back: a new ring there
        assert loader.pid != pid and same(run_epoch(loader), whole[1])
    assert same(first, whole[0]) and same(second, whole[1])
    for e, epoch in enumerate((first, second, third)):
        check_once([s[0] for s in samples(epoch)], candidates, n, 1, f"epoch {e} of one child")
    assert [s[0] for s in samples(second)] != [s[0] for s in samples(third)]
    check_examples(ref, third[-2:])
    with gobatch.Loader(epochs_cfg(), data_root=data) as loader:  # resumed at an epoch's end
        loader.load_state_dict(state)
        assert loader.epoch == 3 and same(run_epoch(loader, stop=2), run_epoch_of(data, 3, stop=2))


def run_epoch_of(data: Path, epoch: int, stop: int | None = None) -> list[Batch]:
    with gobatch.Loader(epochs_cfg(), data_root=data, epoch=epoch) as loader:
        return run_epoch(loader, stop=stop)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_stream_iterators_continue(framework: str) -> None:
    """The same patterns on a stream of the synthetic source (no epochs): every iterator goes on
    where the last stopped, values as the synthetic contract says."""
    from itertools import islice

    from synthetic import check_batch
    if framework == "torch":
        pytest.importorskip("torch")
    cfg = synthetic_config({"x": ((3,), "int32")}, size=2, batches=12)
    with gobatch.Loader(cfg, framework=framework) as loader:
        k = 0
        check_batch(next(iter(loader)), cfg, k)
        k += 1
        it = iter(loader)
        for b in islice(it, 2):
            check_batch(b, cfg, k)
            k += 1
        del b
        for b in loader:
            check_batch(b, cfg, k)
            k += 1
            if k == 7:
                break
        for b in it:
            check_batch(b, cfg, k)
            k += 1
        assert k == 12


def test_child_killed_across_an_epoch_boundary(data: Path, whole: list[list[Batch]]) -> None:
    """The supervised restart of a killed child joins the ring with the same epochs: the
    batches after it are the uninterrupted epochs', across the boundary."""
    import signal

    with gobatch.Loader(epochs_cfg(), data_root=data, restart_backoff_s=0.0) as loader:
        n = len(loader)
        got = run_epoch(loader, stop=n - 2)
        first = loader.pid
        os.kill(first, signal.SIGKILL)
        with pytest.warns(gobatch.GobatchWarning, match="restart"):
            got += run_epoch(loader)
            got += run_epoch(loader)
        assert loader.pid != first and loader.epoch == 1
    assert same(got, whole[0] + whole[1])
