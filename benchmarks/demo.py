#!/usr/bin/env python3
"""gobatch demo (``make demo``): train a small PyTorch model on nowcast-ref batches.

1. Generates the small nowcast-ref dataset into ./data/nowcast-small (1 day, 256 px) unless
   it is already there (tools/gen_nowcast.py).
2. Starts gobatch with presets/nowcast.toml (a ``shmloader`` child reading the Zarr stores
   and writing batches into a shared-memory ring).
3. Trains a tiny conv net on the CPU that predicts the PV power of the last forecast step
   (t0 + 60 min) of the 16 nearest systems from the satellite history, the NWP forecast and
   the PV history, and prints progress: loss, batches/s and the fraction of wall time the
   trainer waited for data.

If the nowcast sampler is not available in this build (the preset is missing or refused), the
demo says so and runs the same loop on synthetic batches of the same shapes instead.

Usage: python benchmarks/demo.py [--steps 300] [--seconds 75] [--readers N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch
from torch import nn

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from baselines import ensure_dataset  # noqa: E402

import gobatch  # noqa: E402

HIST = 7  # satellite and PV steps up to and including t0


class TinyNowcaster(nn.Module):
    """Satellite history (7 steps x 12 channels, 32 x 32) + NWP (4 x 10 x 8 x 8) + PV history
    (7 x 16) -> PV power of the 16 systems at t0 + 60 min."""

    def __init__(self) -> None:
        super().__init__()
        self.sat = nn.Sequential(
            nn.Conv2d(HIST * 12, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(2), nn.Flatten(),  # 128
        )
        self.nwp = nn.Sequential(nn.Flatten(), nn.Linear(4 * 10 * 8 * 8, 64), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(128 + 64 + HIST * 16, 128), nn.ReLU(), nn.Linear(128, 16))

    def forward(self, sat: torch.Tensor, nwp: torch.Tensor, pv_hist: torch.Tensor) -> torch.Tensor:
        b = sat.shape[0]
        f = torch.cat([self.sat(sat.reshape(b, HIST * 12, 32, 32)), self.nwp(nwp), pv_hist.reshape(b, -1)], 1)
        return self.head(f)


def preset_loader(data_root: Path, readers: int | None) -> tuple[Any, str]:
    """gobatch over presets/nowcast.toml, or (None, why) if this build cannot run it."""
    preset = REPO / "presets" / "nowcast.toml"
    if not preset.exists():
        return None, f"{preset.relative_to(REPO)} does not exist"
    try:
        loader = gobatch.Loader(preset, framework="torch", data_root=data_root, readers=readers)
    except (gobatch.ConfigError, gobatch.LoaderError) as e:
        return None, str(e).splitlines()[0]
    return loader, ""


def synthetic_loader(readers: int | None) -> Any:
    """gobatch over synthetic sources with the nowcast-ref shapes (the ring's synthetic
    contract: every element of example e equals e mod 2^24)."""
    shapes = {"satellite": [19, 12, 32, 32], "nwp": [4, 10, 8, 8], "pv": [19, 16]}
    cfg = {"batch": {"size": 32, "seed": 0, "batches": 0}, "ring": {"slots": 4},
           "source": [{"name": n, "kind": "synthetic", "shape": s, "dtype": "float32"} for n, s in shapes.items()]}
    return gobatch.Loader(cfg, framework="torch", readers=readers)


def inputs(batch: dict[str, torch.Tensor], synthetic: bool) -> tuple[torch.Tensor, ...]:
    """Model inputs and target from a batch: NaN (missing pixels/readings) -> 0 in the inputs,
    a mask for the target. Synthetic batches are scaled into a sane range."""
    sat, nwp, pv = batch["satellite"], batch["nwp"], batch["pv"]
    if synthetic:
        sat, nwp, pv = (torch.remainder(t, 97.0) / 97.0 for t in (sat, nwp, pv))
    x_sat = torch.nan_to_num(sat[:, :HIST])  # copies out of the slot: the views stay untouched
    x_nwp = torch.nan_to_num(nwp)
    mean = torch.tensor([300, 150, .5, .5, .5, 2e-4, 80, .01, 5, 280], dtype=torch.float32)
    std = torch.tensor([40, 120, .4, .4, .4, 2e-4, 15, .01, 3, 8], dtype=torch.float32)
    if not synthetic:
        x_nwp = (x_nwp - mean[None, None, :, None, None]) / std[None, None, :, None, None]
    x_pv = torch.nan_to_num(pv[:, :HIST])
    target = pv[:, -1]
    mask = ~torch.isnan(target)
    return x_sat, x_nwp, x_pv, torch.nan_to_num(target), mask


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(REPO / "data" / "nowcast-small"))
    ap.add_argument("--steps", type=int, default=500, help="training steps (default 500)")
    ap.add_argument("--seconds", type=float, default=75.0, help="stop after this many seconds of training")
    ap.add_argument("--readers", type=int, default=None, help="shmloader reader goroutines")
    ap.add_argument("--synthetic", action="store_true", help="use synthetic batches even if the preset works")
    ap.add_argument("--every", type=int, default=25, help="progress every N steps")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    torch.set_num_threads(1)  # leave the other core(s) to the Go readers

    t_start = time.perf_counter()
    loader, why = None, "--synthetic"
    if not args.synthetic:
        print("== data: nowcast-ref, small (tools/gen_nowcast.py)", flush=True)
        ensure_dataset(Path(args.data), days=1.0)
        print("== gobatch: presets/nowcast.toml", flush=True)
        loader, why = preset_loader(Path(args.data), args.readers)
    synthetic = loader is None
    if synthetic:
        print(f"== gobatch: the nowcast preset is not available here ({why});\n"
              f"   running on synthetic batches of the same shapes instead", flush=True)
        loader = synthetic_loader(args.readers)
    mode = "synthetic sources" if synthetic else "nowcast preset (Zarr sampler)"

    model = TinyNowcaster()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
    waited = 0.0
    steps = 0
    first_batch_s = float("nan")
    losses: list[float] = []
    with loader:
        it: Iterator[dict[str, torch.Tensor]] = iter(loader)
        t_train = time.perf_counter()
        t_last, w_last, s_last = t_train, 0.0, 0
        while steps < args.steps and time.perf_counter() - t_train < args.seconds:
            a = time.perf_counter()
            batch = next(it)
            waited += time.perf_counter() - a
            if steps == 0:
                first_batch_s = time.perf_counter() - t_start
                print(f"   first batch after {first_batch_s:.2f} s: "
                      + ", ".join(f"{k} {list(v.shape)}" for k, v in batch.items()), flush=True)
            x_sat, x_nwp, x_pv, target, mask = inputs(batch, synthetic)
            pred = model(x_sat, x_nwp, x_pv)
            loss = ((pred - target) ** 2 * mask).sum() / mask.sum().clamp(min=1)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps += 1
            losses.append(loss.detach().item())
            if steps % args.every == 0:
                now = time.perf_counter()
                rate = (steps - s_last) / (now - t_last)
                stall = (waited - w_last) / (now - t_last)
                print(f"   step {steps:4d}  loss {np.mean(losses[-args.every:]):8.4f}  "
                      f"{rate:6.1f} batches/s  waited for data {stall * 100:5.1f} %", flush=True)
                t_last, w_last, s_last = now, waited, steps
        wall = time.perf_counter() - t_train
        stats = loader.stats()
    first = np.mean(losses[: min(25, len(losses))])
    last = np.mean(losses[-min(25, len(losses)):])
    print(f"demo: {mode}: {steps} steps in {wall:.1f} s, {steps / wall:.1f} batches/s "
          f"({steps * 30.3 / wall:.0f} MB/s), trainer waited for data {waited / wall * 100:.1f} % of the time, "
          f"first batch {first_batch_s:.2f} s, loss {first:.4f} -> {last:.4f}"
          + (f", producer busy {stats['producer_busy_s']:.1f} s" if "producer_busy_s" in stats else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
