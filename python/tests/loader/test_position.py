"""Stream position: state_dict/load_state_dict resume and rank/world_size shares (synthetic
sources; the sampler's versions are in test_sampler_loader.py)."""

from __future__ import annotations

import numpy as np
import pytest

import gobatch
from synthetic import config, expected

pytestmark = pytest.mark.timeout(60)

SIZE = 4


def first_rows(loader: gobatch.Loader, n: int) -> list[int]:
    """The stream example index of row 0 of the next n batches (checked against the contract)."""
    out = []
    for _ in range(n):
        x = next(loader)["x"]
        e = int(x[0, 0])
        k = e // SIZE
        np.testing.assert_array_equal(x, expected((3,), "int64", k, SIZE))
        out.append(k)
    return out


def test_state_dict_resumes_at_the_next_batch() -> None:
    cfg = config({"x": ((3,), "int64")}, size=SIZE, seed=11)
    with gobatch.Loader(cfg) as a:
        assert first_rows(a, 7) == list(range(7))
        state = a.state_dict()
        assert state["next_batch"] == 7 and state["seed"] == 11
        rest = first_rows(a, 3)
    with gobatch.Loader(cfg) as b:
        first_rows(b, 2)  # somewhere else in the stream
        b.load_state_dict(state)
        assert first_rows(b, 3) == rest == [7, 8, 9]
        assert b.state_dict()["next_batch"] == 10


def test_load_state_dict_refuses_another_stream() -> None:
    cfg = config({"x": ((3,), "int64")}, size=SIZE, seed=1)
    with gobatch.Loader(cfg) as a:
        state = a.state_dict()
    other = config({"x": ((3,), "int64")}, size=SIZE, seed=2)
    with gobatch.Loader(other) as b:
        with pytest.raises(ValueError, match="seed 1 != 2"):
            b.load_state_dict(state)
        with pytest.raises(ValueError, match="missing"):
            b.load_state_dict({"next_batch": 3})
        assert first_rows(b, 1) == [0]  # still usable after a refused state


def test_ranks_get_disjoint_interleaved_shares() -> None:
    cfg = config({"x": ((3,), "int64")}, size=SIZE)
    seen = []
    for rank in range(3):
        with gobatch.Loader(cfg, rank=rank, world_size=3) as ld:
            got = first_rows(ld, 4)
        assert got == [k * 3 + rank for k in range(4)]
        seen += got
    assert sorted(seen) == list(range(12))


def test_rank_defaults_come_from_torchrun_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with gobatch.Loader(config({"x": ((3,), "int64")}, size=SIZE)) as ld:
        assert (ld.rank, ld.world_size) == (1, 2)
        assert first_rows(ld, 2) == [1, 3]


def test_bad_rank_is_refused() -> None:
    with pytest.raises(ValueError, match="rank"):
        gobatch.Loader(config({"x": ((3,), "int64")}), rank=2, world_size=2)
