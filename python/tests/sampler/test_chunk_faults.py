"""Chunk faults (issue 9, "no hang, no silence"): a store cut short, a chunk that is a FIFO, a
source whose grid lies away from the anchor's centres.

The stores are written here with xarray and then damaged on disk: chunk files deleted (a copy
that stopped part way), one replaced by a FIFO (a read of it would wait for ever for a writer).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

import gobatch
from gobatch._loader import shmloader_path

pytestmark = pytest.mark.timeout(120)

T0 = np.datetime64("2021-06-01T00:00", "ns")
MIN = np.timedelta64(1, "m")
T, H, W = 24, 16, 16  # one chunk per time step: 24 chunks
KEEP = (0, 5, 11, 17, 23)  # the 5 of 24 chunks left on disk


def write_satellite(path: Path, x0: float = 0.0) -> None:
    x = x0 + 1000.0 * np.arange(W)
    y = 50_000.0 - 1000.0 * np.arange(H)
    data = np.arange(T * H * W, dtype=np.float32).reshape(T, H, W) + 1
    ds = xr.Dataset({"data": (("time", "y", "x"), data)},
                    coords={"time": T0 + np.arange(T) * 5 * MIN, "y": y, "x": x})
    ds.to_zarr(path, mode="w", zarr_format=2, consolidated=True, encoding={"data": {"chunks": (1, H, W)}})


def cut_short(path: Path) -> None:
    """Deletes every chunk of data but those of KEEP."""
    for t in range(T):
        if t not in KEEP:
            (path / "data" / f"{t}.0.0").unlink()


def source(name: str = "satellite", store: str = "sat.zarr", **kw: Any) -> dict[str, Any]:
    return {"name": name, "kind": "zarr", "store": store, "variable": "data", "time_resolution_minutes": 5,
            "interval_start_minutes": -10, "interval_end_minutes": 0, "image_size_pixels_height": 4,
            "image_size_pixels_width": 4, **kw}


def config(*srcs: dict[str, Any]) -> dict[str, Any]:
    first = {**srcs[0], "anchor": True, "cache_mb": 16}
    return {"batch": {"size": 4, "seed": 3}, "ring": {"slots": 2}, "source": [first, *srcs[1:]]}


def test_plan_shows_missing_chunks(tmp_path: Path) -> None:
    write_satellite(tmp_path / "sat.zarr")
    cut_short(tmp_path / "sat.zarr")
    p = gobatch.plan(config(source()), data_root=str(tmp_path))
    s = p["sources"][0]
    assert (s["chunks_stored"], s["chunks_total"]) == (5, 24)
    assert s["missing_chunk_fraction"] == pytest.approx(19 / 24)
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps(config(source())))
    out = subprocess.run([shmloader_path(None), "plan", "--config", str(cfg), "--data-root", str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "chunks 5 of 24 stored, 79.2 % missing: read as the fill value" in out.stdout


def test_plan_complete_store_says_none_missing(tmp_path: Path) -> None:
    write_satellite(tmp_path / "sat.zarr")
    s = gobatch.plan(config(source()), data_root=str(tmp_path))["sources"][0]
    assert (s["chunks_stored"], s["chunks_total"], s["missing_chunk_fraction"]) == (24, 24, 0)


def test_stats_count_missing_chunks(tmp_path: Path) -> None:
    write_satellite(tmp_path / "sat.zarr")
    cut_short(tmp_path / "sat.zarr")
    nan = total = 0
    with gobatch.Loader(config(source()), framework="numpy", data_root=str(tmp_path)) as loader:
        for k, batch in enumerate(loader):
            v = np.asarray(batch["satellite"])
            nan += int(np.isnan(v).sum())
            total += v.size
            if k == 5:
                break
        st = loader.stats()
    assert nan > 0
    assert len(st["chunks_decoded"]) == 1, st
    d, m = st["chunks_decoded"][0], st["chunks_missing"][0]
    assert 0 < m <= d <= T and m <= T - len(KEEP)
    assert st["missing_chunk_fraction"] == [pytest.approx(m / d)]
    # decode amplification: the bytes of the chunks decoded per byte of the tensor delivered
    assert st["decoded_bytes"][0] > 0 and st["delivered_bytes"][0] > 0, st
    assert st["decode_amplification"] == [pytest.approx(st["decoded_bytes"][0] / st["delivered_bytes"][0])]


def test_stats_have_one_entry_per_source_from_the_first_batch(tmp_path: Path) -> None:
    """Issue 20: the producer publishes its counters before the ring's first batch, so stats()
    right after it count that batch's chunk reads: one entry per source, never [] for a while."""
    write_satellite(tmp_path / "sat.zarr")
    write_satellite(tmp_path / "sat2.zarr")
    cfg = config(source(), source(name="other", store="sat2.zarr"))
    with gobatch.Loader(cfg, data_root=str(tmp_path)) as loader:
        next(loader)
        st = loader.stats()  # at once: no wait for the producer's periodic publish
    assert len(st["chunks_decoded"]) == 2 and all(d > 0 for d in st["chunks_decoded"]), st
    assert st["chunks_missing"] == [0, 0]
    assert st["cache_misses"] > 0 and st["restarts"] == 0


def test_missing_chunks_error_names_the_key(tmp_path: Path) -> None:
    write_satellite(tmp_path / "sat.zarr")
    cut_short(tmp_path / "sat.zarr")
    with pytest.raises(gobatch.LoaderError) as e:
        with gobatch.Loader(config(source(missing_chunks="error")), framework="numpy", data_root=str(tmp_path)) as loader:
            for _ in loader:
                pass
    msg = str(e.value)
    for want in ("source[0] (", "sat.zarr", "key data/", "chunk not stored", 'missing_chunks = "error"'):
        assert want in msg, msg


def test_fifo_chunk_is_refused_not_waited_on(tmp_path: Path) -> None:
    write_satellite(tmp_path / "sat.zarr")
    for t in range(T):  # every chunk a FIFO: the first batch meets one whatever it draws
        chunk = tmp_path / "sat.zarr" / "data" / f"{t}.0.0"
        chunk.unlink()
        os.mkfifo(chunk)
    with pytest.raises(gobatch.LoaderError) as e:  # a FIFO read would never end: a hang fails the test's timeout
        with gobatch.Loader(config(source()), framework="numpy", data_root=str(tmp_path)) as loader:
            next(iter(loader))
    msg = str(e.value)
    for want in ("source[0] (", str(tmp_path / "sat.zarr"), "key data/", "a FIFO", "not a regular file"):
        assert want in msg, msg


def test_grid_far_from_the_anchor_is_refused(tmp_path: Path) -> None:
    write_satellite(tmp_path / "sat.zarr")
    write_satellite(tmp_path / "far.zarr", x0=1e7)  # 10,000 km east
    with pytest.raises(gobatch.ConfigError) as e:
        gobatch.plan(config(source(), source(name="far", store="far.zarr")), data_root=str(tmp_path))
    msg = str(e.value)
    assert "source[1].store" in msg and "does not cover the anchor's centres" in msg, msg
    assert "x 1e+07 .. 1.0015e+07" in msg and "(x 2000 .. 13000" in msg, msg
    # Within one pixel of the border: accepted, the crops clamp.
    write_satellite(tmp_path / "near.zarr", x0=3000)
    gobatch.plan(config(source(), source(name="near", store="near.zarr")), data_root=str(tmp_path))
