#!/usr/bin/env python3
"""gobatch on an ocf-data-sampler YAML against ocf-data-sampler's PVNetDataset (issue 18, Figures).

The same stores and the same YAML (python/tests/ocf_stores.py: a geostationary satellite, a
UKV NWP with an accumulated channel and NWP dropout, generation for ``--sites`` sites, the sun,
the datetime features and a t0 embedding), in one run:

- ``gobatch``: ``gobatch.Loader(yaml, batch_size=B, order="epochs", framework="torch")``, the
  one-line switch of examples/pvnet_train.py, epoch after epoch;
- ``ocf wN``: ``PVNetDataset(yaml)`` through the DataLoader PVNet trains with
  (``pvnet.datamodule.PVNetDataModule.train_dataloader``: shuffle, drop_last, PVNet's collate
  function, ``spawn`` workers), ``N`` = 0 and 2 workers, epoch after epoch. The workers are
  persistent (PVNetDataModule's ``persistent_workers=True``): this run's epochs are a few
  batches long, and restarting the workers for each would measure their start, which a real
  epoch's length hides.

Nine cases: the data in gobatch's cache (its default budget, 1024 MB); a cache of a fifth and
of a tenth of the satellite (``cache_mb``, at least gobatch's minimum of 16 MB; issue 28's
regime is the satellite at least 10x the cache); the generation with an hour of NaN at each
site, so that ocf-data-sampler is in its per-location mode (each site its own t0s), at a
tenth, with ``order="epochs"`` and in stream order (every other case: epochs); the satellite
cut along time into 7 stores, the YAML listing them as OCF's real data paths list a store per
year (in cache); the YAML without its satellite, as OCF's NWP-only models are configured (in
cache); and concurrent samples, every site for one t0 (``gobatch.Loader(yaml,
concurrent=True)`` against ``PVNetConcurrentDataset`` through a DataLoader with
``batch_size=None``, as pvnet-summation's StreamedDataModule loads it; a batch is then one
t0's sites), in cache and at a tenth of the satellite. ocf-data-sampler has no cache of its
own; it reads the same files in every case, which stay in the page cache. For each loader:
batches/s over the timed part, the first batch (loader made and the first batch received; the
files are in the page cache and torch is imported: warm), and the peak RSS summed over the
trainer and all its child processes (shmloader, DataLoader workers). The table gives
gobatch's batches/s over the best ocf loader's.

Usage::

    python benchmarks/ocf_bench.py [--quick] [--hours 24] [--pixels 256] [--sites 24] [--batch-size 32]
        [--only SUBSTRING]   # the cases whose name holds it
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from baselines import MB, REPO, Result, measure  # noqa: E402

sys.path.insert(0, str(REPO / "python" / "tests"))
from ocf_stores import split_store, write_pvnet_stores  # noqa: E402


class Endless:
    """Batches of ``epoch()`` after ``epoch()`` (a DataLoader or a Loader ends with its epoch;
    a training run goes on to the next one); ``close`` closes the Loader, if any."""

    def __init__(self, epoch: Callable[[], Any], loader: Any = None) -> None:
        self._epoch, self._loader = epoch, loader

    def __iter__(self) -> Iterator[Any]:
        for _ in itertools.count():
            yield from self._epoch()

    def close(self) -> None:
        if self._loader is not None:
            self._loader.close()


def gobatch_loader(config: str, batch_size: int, cache_mb: int | None, concurrent: bool = False,
                   order: str = "epochs") -> Endless:
    import gobatch

    size = None if concurrent else batch_size
    loader = gobatch.Loader(config, batch_size=size, order=order, framework="torch", cache_mb=cache_mb,
                            concurrent=concurrent)
    return Endless(lambda: loader, loader)


def ocf_loader(config: str, batch_size: int, workers: int, concurrent: bool = False) -> Endless:
    from ocf_data_sampler.torch_datasets.pvnet_dataset import PVNetConcurrentDataset, PVNetDataset
    from pvnet.datamodule import PVNetDataModule

    if concurrent:  # pvnet-summation's StreamedDataModule: batch_size None, its samples as they are
        import torch

        dl = torch.utils.data.DataLoader(PVNetConcurrentDataset(config), batch_size=None, shuffle=True,
                                         num_workers=workers, persistent_workers=workers > 0,
                                         multiprocessing_context="spawn" if workers else None)
        return Endless(lambda: dl)

    dm = PVNetDataModule(config, train_periods=[(None, None)], val_periods=[(None, None)], batch_size=batch_size,
                         num_workers=workers, persistent_workers=workers > 0)
    dm.train_dataset = PVNetDataset(config)  # what dm.setup("fit") builds for training
    loader = dm.train_dataloader()  # one DataLoader for every epoch, as Lightning holds it
    return Endless(lambda: loader)


def variants(root: Path, config: str) -> tuple[str, str, str]:
    """The YAML with the satellite read from 7 stores cut along time, the YAML without a
    satellite, and the YAML over a generation with an hour of NaN at each site (ocf's
    per-location mode: each site its own t0s); returns their paths."""
    import numpy as np
    import xarray as xr
    import yaml

    gen = xr.open_zarr(root / "gen.zarr").load()
    mw = gen["generation_mw"].values.copy()
    for k in range(mw.shape[1]):  # a site's hour of NaN, each at its own time
        at = 4 + (k * 7) % max(mw.shape[0] - 8, 1)
        mw[at:at + 2, k] = np.nan
    gen["generation_mw"].values = mw
    gen.to_zarr(root / "gen_gaps.zarr", mode="w", zarr_format=2, consolidated=True)

    n = xr.open_zarr(root / "sat.zarr").sizes["time"]
    parts = split_store(root, "sat.zarr", "time", [n * k // 7 for k in range(1, 7)], {"variable": 1, "time": 1})
    doc = yaml.safe_load(Path(config).read_text())
    doc["input_data"]["satellite"]["zarr_path"] = parts
    (root / "sat7.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    del doc["input_data"]["satellite"]
    (root / "nosat.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    doc = yaml.safe_load(Path(config).read_text())
    doc["input_data"]["generation"]["zarr_path"] = "gen_gaps.zarr"
    (root / "perloc.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(root / "sat7.yaml"), str(root / "nosat.yaml"), str(root / "perloc.yaml")


def row(r: Result, best: float | None) -> str:
    ratio = f"{r.batches_per_s / best:6.1f}x" if best else "      "
    return (f"  {r.name:<32} {r.batches_per_s:9.2f} {ratio} {r.first_batch_s:9.2f} {r.peak_rss / MB:9.0f} "
            f"{r.batches:6d} {r.seconds:6.1f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small stores, short runs")
    ap.add_argument("--hours", type=float, default=24.0, help="hours of data in every store")
    ap.add_argument("--pixels", type=int, default=256, help="satellite width and height in pixels")
    ap.add_argument("--sites", type=int, default=24, help="generation sites (locations)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=20.0, help="timed part of each ocf loader")
    ap.add_argument("--gobatch-seconds", type=float, default=8.0, help="timed part of each gobatch run")
    ap.add_argument("--data", help="directory for the stores (default: a temporary one)")
    ap.add_argument("--only", default="", help="run only the cases whose name holds this")
    args = ap.parse_args()
    if args.quick:
        args.hours, args.pixels, args.sites, args.seconds, args.gobatch_seconds = 12.0, 256, 12, 8.0, 4.0

    with tempfile.TemporaryDirectory(prefix="ocf-bench-") as tmp:
        root = Path(args.data) if args.data else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        config = str(write_pvnet_stores(root, hours=args.hours, satellite_pixels=(args.pixels, args.pixels),
                                        n_sites=args.sites))
        sat_mb = 2 * int(args.hours * 12) * args.pixels ** 2 * 4 / MB
        small_cache = max(int(sat_mb / 5), 16)
        tenth_cache = max(int(sat_mb / 10), 16)
        os.chdir(root)  # the YAML's zarr_paths are relative, as ocf-data-sampler resolves them
        from ocf_data_sampler.torch_datasets.pvnet_dataset import PVNetDataset

        pairs = len(PVNetDataset(config))
        print(f"stores: {args.hours:g} h, satellite {args.pixels}x{args.pixels} px x 2 channels at 5 min "
              f"({sat_mb:.0f} MB float32), {args.sites} sites; {pairs} (t0, location) pairs in ocf-data-sampler, "
              f"batch size {args.batch_size}; written in {time.perf_counter() - t:.0f} s")
        print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")

        sat7, nosat, perloc = variants(root, config)
        cases = {"in cache": (config, None, False),
                 f"satellite {sat_mb / small_cache:.1f}x the cache (cache_mb {small_cache})": (config, small_cache, False),
                 f"satellite {sat_mb / tenth_cache:.1f}x the cache (cache_mb {tenth_cache})": (config, tenth_cache, False),
                 f"per-location, satellite {sat_mb / tenth_cache:.1f}x the cache (cache_mb {tenth_cache})": (perloc, tenth_cache, False),
                 f"per-location, stream order, satellite {sat_mb / tenth_cache:.1f}x the cache (cache_mb {tenth_cache})": (perloc, tenth_cache, False),
                 "satellite in 7 stores (in cache)": (sat7, None, False),
                 "no satellite (in cache)": (nosat, None, False),
                 f"concurrent: a batch is one t0's {args.sites} sites (in cache)": (config, None, True),
                 f"concurrent, satellite {sat_mb / tenth_cache:.1f}x the cache (cache_mb {tenth_cache})": (config, tenth_cache, True)}
        cases = {k: v for k, v in cases.items() if args.only in k}
        results: dict[str, list[Result]] = {case: [] for case in cases}
        for case, (yaml_path, cache_mb, conc) in cases.items():
            out = results[case]
            order = "stream" if "stream order" in case else "epochs"
            out.append(measure("gobatch", lambda: gobatch_loader(yaml_path, args.batch_size, cache_mb, conc, order),
                               max_batches=100000, max_seconds=args.gobatch_seconds, close=lambda l: l.close()))
            print(f"{case}:{row(out[-1], None)}", flush=True)
            dataset = "PVNetConcurrentDataset" if conc else "PVNetDataset"
            for workers in (0, 2):
                out.append(measure(f"ocf w{workers} ({dataset})", lambda: ocf_loader(yaml_path, args.batch_size, workers, conc),
                                   max_batches=100000, max_seconds=args.seconds, warmup=1))
                print(f"{case}:{row(out[-1], None)}", flush=True)

        print(f"\n  {'loader':<32} {'batch/s':>9} {'vs ocf':>7} {'first s':>9} {'RSS MB':>9} {'n':>6} {'s':>6}")
        for case, out in results.items():
            best = max(r.batches_per_s for r in out if r.name.startswith("ocf"))
            print(f"{case}:")
            for r in out:
                print(row(r, best if r.name == "gobatch" else None))
        print(f"\nload average at end: {os.getloadavg()[0]:.1f}. RSS: peak of the sum over the trainer process and "
              "all its children (shmloader, DataLoader workers); the ring's shared memory is counted in each "
              "process that maps it.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
