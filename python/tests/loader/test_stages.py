"""The limiting stage of an epoch (issue 28): ``Loader.stats()["last_epoch"]`` names the stage
that limited it (read, decode, gather, consumer) from the producer's stage counters.

Two runs over the same generated nowcast data, each two epochs: a cache of 16 MB against data
several times larger, drawn at random with evictions, read by a loop that only takes batches
(every batch decodes its chunks again: decode-bound); and the data in the cache, read by a loop
that sleeps 30 ms per batch (the trainer is the limit). ``pass_figures`` itself is checked on
hand-made snapshots.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator

import pytest

import gobatch
from gobatch._stages import STAGES, pass_figures
from nowcast_ref import generated_nowcast
from test_sampler_loader import preset

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with generated_nowcast(tmp_path_factory.mktemp("nowcast"), "stages", days=2, pixels=64, seed=3) as out:
        yield out


def last_epoch(data: Path, cache_mb: int | None, sleep_s: float) -> dict:
    with gobatch.Loader(preset(size=8, order="epochs"), data_root=data, cache_mb=cache_mb) as loader:
        assert loader.stats()["last_epoch"] is None
        for _ in range(2):
            for batch in loader:
                time.sleep(sleep_s)
                del batch
        st = loader.stats()
        assert st["limiting_stage"] in STAGES  # since attach
        epoch = st["last_epoch"]
        assert epoch["batches"] == len(loader) and epoch["seconds"] > 0
        assert all(0.0 <= v <= 1.0 for v in epoch["stage_load"].values()), epoch
        assert st["decode_slots"] >= 1 and st["gather_slots"] >= 1 and st["read_slots"] >= 1
        return epoch


def test_decode_bound_epoch(data: Path) -> None:
    epoch = last_epoch(data, 16, 0.0)
    assert epoch["limiting_stage"] == "decode", epoch
    assert epoch["stage_load"]["consumer"] < 0.5 and max(epoch["decode_amplification"]) > 1, epoch


def test_consumer_bound_epoch(data: Path) -> None:
    epoch = last_epoch(data, None, 0.03)
    assert epoch["limiting_stage"] == "consumer", epoch
    assert epoch["stage_load"]["consumer"] > 0.8 and epoch["stage_load"]["decode"] < 0.2, epoch


def test_pass_figures() -> None:
    start = {"elapsed_s": 10.0, "batches": 100, "consumer_wait_s": 1.0, "read_ns": 0, "decode_ns": 0,
             "gather_ns": 0, "decoded_bytes": [100, 0], "delivered_bytes": [10, 0]}
    end = {"elapsed_s": 20.0, "batches": 300, "consumer_wait_s": 9.0, "read_ns": 2e9, "decode_ns": 16e9,
           "gather_ns": 1e9, "read_slots": 8, "decode_slots": 2, "gather_slots": 2,
           "decoded_bytes": [700, 50], "delivered_bytes": [110, 0]}
    f = pass_figures(start, end)
    assert f["batches"] == 200 and f["seconds"] == 10.0 and f["batches_per_s"] == 20.0
    assert f["stage_load"] == pytest.approx({"read": 2 / 80, "decode": 16 / 20, "gather": 1 / 20, "consumer": 0.2})
    assert f["limiting_stage"] == "decode" and f["decode_amplification"] == [6.0, 0.0]
