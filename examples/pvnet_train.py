"""Train PVNet's own multimodal model from gobatch batches through Lightning.

An Open Climate Fix training run feeds PVNet (``pip install pvnet``, 5.3) from
ocf-data-sampler's ``PVNetDataset`` through a torch DataLoader with PVNet's collate function.
With gobatch the same ocf-data-sampler YAML gives the same batches, and the DataLoader line is
the only change (docs/OCF.md, "Switching")::

    # before
    loader = DataLoader(PVNetDataset(config), batch_size=32, shuffle=True, drop_last=True,
                        collate_fn=pvnet.datamodule.collate_fn, num_workers=2)
    # after
    loader = gobatch.Loader(config, batch_size=32, order="epochs", framework="torch")

    trainer.fit(PVNetLightningModule(model, optimizer), train_dataloaders=loader)

Validation too: PVNet validates on a fixed, seeded order of every sample of its validation
period and its LightningModule indexes the validation loader's dataset to plot forecasts
(``trainer.val_dataloaders.dataset[i]``). ``gobatch.ValidationSet`` is that set (``len``,
``[i]``, and its batches through ``.loader()``), read once and kept, so that later validations
decode nothing::

    # before (pvnet.datamodule.PVNetDataModule)
    val = DataLoader(Subset(PVNetDataset(config, time_periods=val_periods), shuffled), batch_size=32,
                     collate_fn=collate_fn)
    # after
    val = gobatch.ValidationSet(config, batch_size=32, time_periods=val_periods).loader()

    trainer.fit(module, train_dataloaders=loader, val_dataloaders=val)

No ocf-data-sampler dataset is in the loop (``--loader ocf`` runs the same on PVNetDataset).

The model is PVNet's ``LateFusionModel`` built by hydra from a model configuration in PVNet's
own format (``configs.example/model/late_fusion.yaml`` in PVNet's repository): a
``DefaultPVNet`` 3D-convolution encoder for the satellite and one for each NWP, the location
embedding, the sun, the datetime features, the t0 embedding and the generation history, into a
``ResFCNet`` that predicts quantiles of the generation over the forecast window. Its sizes are
read off the ocf YAML (channels, square crops, windows), so the YAML alone decides the shapes.

Usage (from the directory the YAML's relative ``zarr_path``s are relative to, as ocf-data-sampler
resolves them)::

    python examples/pvnet_train.py pvnet_config.yaml --steps 20 --batch-size 32
    python examples/pvnet_train.py pvnet_config.yaml --train-period 2024-01-01/2024-06-30 \
        --val-period 2024-07-01/2024-07-31 --val-every 10 --val-batches 8
    python examples/pvnet_train.py pvnet_config.yaml --loader ocf   # the same run on PVNetDataset

Requires ``pvnet`` 5.3 (which brings ocf-data-sampler and Lightning) next to gobatch; neither is a
dependency of gobatch itself.
"""

from __future__ import annotations

import argparse
from typing import Any, Iterable, List, Optional, Tuple, Union

import hydra
import numpy as np
import lightning.pytorch as pl
import torch
import xarray as xr
from ocf_data_sampler.config import Configuration, load_yaml_configuration
from pvnet.optimizers import AdamW
from pvnet.training.lightning_module import PVNetLightningModule

import gobatch

QUANTILES = [0.1, 0.5, 0.9]


def _encoder(image: tuple[int, int], channels: int, where: str) -> dict[str, Any]:
    """A DefaultPVNet encoder (partial: LateFusionModel adds the sequence length) for a crop."""
    width, height = image
    if width != height:
        raise ValueError(f"{where}: PVNet's encoders take square crops, got width {width} and height {height}")
    return {
        "_target_": "pvnet.models.late_fusion.encoders.encoders3d.DefaultPVNet",
        "_partial_": True,
        "in_channels": channels,
        "image_size_pixels": width,
        "out_features": 32,
        "number_of_conv3d_layers": 2,
        "conv3d_channels": 8,
        "fc_features": 32,
    }


def model_config(config: Configuration, location_ids: Iterable[int]) -> dict[str, Any]:
    """PVNet's model configuration (hydra, as in PVNet's configs) sized for ``config``: the
    generation window gives the history and forecast (the sun's window must be the same), the
    satellite and each NWP their sequence, channels and crop."""
    data = config.input_data
    gen, sat = data.generation, data.satellite
    if gen is None or sat is None:
        raise ValueError("this example's model takes generation and satellite: both must be in input_data")
    sun = data.solar_position
    if sun is None or (sun.interval_start_minutes, sun.interval_end_minutes, sun.time_resolution_minutes) != (
            gen.interval_start_minutes, gen.interval_end_minutes, gen.time_resolution_minutes):
        raise ValueError("input_data.solar_position: PVNet takes the sun over the generation window")
    nwps = data.nwp or {}
    embeddings = data.t0_embedding.embeddings if data.t0_embedding is not None else []
    return {
        "_target_": "pvnet.models.LateFusionModel",
        "output_quantiles": QUANTILES,
        "sat_encoder": _encoder((sat.image_size_pixels_width, sat.image_size_pixels_height), len(sat.channels),
                                "input_data.satellite"),
        "sat_history_minutes": -sat.interval_start_minutes,
        "min_sat_delay_minutes": -sat.interval_end_minutes,
        "sat_interval_minutes": sat.time_resolution_minutes,
        "nwp_encoders_dict": {
            key: _encoder((n.image_size_pixels_width, n.image_size_pixels_height), len(n.channels),
                          f"input_data.nwp.{key}") for key, n in nwps.items()} or None,
        "nwp_history_minutes": {key: -n.interval_start_minutes for key, n in nwps.items()},
        "nwp_forecast_minutes": {key: n.interval_end_minutes for key, n in nwps.items()},
        "nwp_interval_minutes": {key: n.time_resolution_minutes for key, n in nwps.items()},
        "output_network": {
            "_target_": "pvnet.models.late_fusion.linear_networks.networks.ResFCNet",
            "_partial_": True,
            "fc_hidden_features": 64,
            "n_res_blocks": 2,
        },
        "location_id_mapping": {int(i): k for k, i in enumerate(location_ids)},
        "embedding_dim": 4,
        "include_sun": True,
        "include_time": True,
        "include_generation_history": True,
        "t0_embedding_dim": sum(2 if kind == "cyclic" else 1 for _, kind in embeddings),
        "history_minutes": -gen.interval_start_minutes,
        "forecast_minutes": gen.interval_end_minutes,
        "interval_minutes": gen.time_resolution_minutes,
    }


def location_ids(config: Configuration) -> list[int]:
    """The generation store's location ids as ocf-data-sampler uses them (0, a national total,
    dropped when there are other locations)."""
    with xr.open_zarr(config.input_data.generation.zarr_path) as gen:
        ids = [int(i) for i in gen["location_id"].values]
    return [i for i in ids if i != 0] if len(ids) > 1 else ids


def pvnet_module(config_path: str, seed: int = 0, lr: float = 1e-3) -> PVNetLightningModule:
    """PVNet's Lightning module around its LateFusionModel for the YAML at ``config_path``; the
    weights are drawn from ``seed`` (the same seed gives the same model)."""
    config = load_yaml_configuration(config_path)
    pl.seed_everything(seed, verbose=False)
    model = hydra.utils.instantiate(model_config(config, location_ids(config)))
    return PVNetLightningModule(model, AdamW(lr=lr))


Periods = Optional[List[Tuple[Optional[str], Optional[str]]]]


def gobatch_loader(config_path: str, batch_size: int, seed: int = 0, periods: Periods = None) -> gobatch.Loader:
    """The switch: gobatch's batches on the ocf YAML, every (t0, location) pair once per epoch,
    as torch tensors in ocf-data-sampler's batch layout."""
    return gobatch.Loader(config_path, batch_size=batch_size, order="epochs", seed=seed, framework="torch",
                          time_periods=periods)


def gobatch_validation(config_path: str, batch_size: int, seed: int = 0, periods: Periods = None) -> gobatch.ValidationSet:
    """PVNet's validation set (every pair of the validation periods, in a seeded order), as
    gobatch keeps it: ``.loader()`` is the trainer's val_dataloaders."""
    return gobatch.ValidationSet(config_path, batch_size=batch_size, seed=seed, time_periods=periods)


def ocf_loader(config_path: str, batch_size: int, workers: int = 0, periods: Periods = None) -> torch.utils.data.DataLoader:
    """What it replaces: PVNetDataset through a DataLoader with PVNet's settings
    (pvnet.datamodule.PVNetDataModule.train_dataloader)."""
    from ocf_data_sampler.torch_datasets.pvnet_dataset import PVNetDataset
    from pvnet.datamodule import collate_fn

    return torch.utils.data.DataLoader(
        PVNetDataset(config_path, time_periods=periods), batch_size=batch_size, shuffle=True, drop_last=True,
        collate_fn=collate_fn, num_workers=workers, multiprocessing_context="spawn" if workers else None)


def ocf_validation(config_path: str, batch_size: int, seed: int = 0, periods: Periods = None) -> torch.utils.data.DataLoader:
    """PVNet's own validation loader (pvnet.datamodule.PVNetDataModule.val_dataloader)."""
    from ocf_data_sampler.torch_datasets.pvnet_dataset import PVNetDataset
    from pvnet.datamodule import collate_fn

    dataset = PVNetDataset(config_path, time_periods=periods)
    order = np.random.default_rng(seed=seed).permutation(len(dataset))
    return torch.utils.data.DataLoader(torch.utils.data.Subset(dataset, order), batch_size=batch_size, shuffle=False,
                                       drop_last=False, collate_fn=collate_fn)


class Steps(pl.Callback):
    """Keeps each training step's loss, a copy of the first batch (to check it against
    another loader's), and the validation loss of each validation."""

    def __init__(self) -> None:
        self.losses: list[float] = []
        self.first_batch: dict[str, Any] | None = None
        self.val_losses: list[float] = []

    def on_validation_epoch_end(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        if not trainer.sanity_checking and "quantile_loss/val" in trainer.callback_metrics:
            self.val_losses.append(float(trainer.callback_metrics["quantile_loss/val"]))

    def on_train_batch_start(self, trainer: pl.Trainer, module: pl.LightningModule, batch: Any, batch_idx: int) -> None:
        if self.first_batch is None:
            self.first_batch = _copy(batch)

    def on_train_batch_end(self, trainer: pl.Trainer, module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        self.losses.append(float(outputs["loss"]))


def _copy(batch: Any) -> Any:
    """A deep copy of a (nested) batch; a gobatch batch's tensors are views of a ring slot that
    is reused once the batch is released."""
    if isinstance(batch, dict):
        return {k: _copy(v) for k, v in batch.items()}
    return batch.clone() if isinstance(batch, torch.Tensor) else batch


def train(module: PVNetLightningModule, loader: Iterable[Any], steps: int, val: Optional[Iterable[Any]] = None,
          val_every: int = 0, val_batches: Union[int, float] = 1.0) -> Steps:
    """``steps`` optimiser steps of ``module`` on ``loader``'s batches with a Lightning Trainer;
    with ``val``, a validation of its first ``val_batches`` batches every ``val_every`` steps
    (PVNet's validation: its metrics, and its plots of ``val.dataset[i]``)."""
    steps_cb = Steps()
    trainer = pl.Trainer(max_steps=steps, accelerator="auto", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                         callbacks=[steps_cb], limit_val_batches=val_batches if val is not None else 0,
                         val_check_interval=val_every or None, check_val_every_n_epoch=None if val_every else 1)
    trainer.fit(module, train_dataloaders=loader, val_dataloaders=val)
    return steps_cb


def period(text: str) -> Tuple[Optional[str], Optional[str]]:
    """``START/END`` (ISO 8601, either side empty for an open end), as PVNet's periods."""
    start, sep, end = text.partition("/")
    if not sep:
        raise argparse.ArgumentTypeError(f"{text!r}: want START/END")
    return (start or None, end or None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", help="ocf-data-sampler YAML (relative zarr_paths resolve against the working directory)")
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--loader", choices=["gobatch", "ocf"], default="gobatch")
    ap.add_argument("--workers", type=int, default=0, help="DataLoader workers for --loader ocf")
    ap.add_argument("--train-period", type=period, action="append", help="START/END of training t0s (repeatable)")
    ap.add_argument("--val-period", type=period, action="append", help="START/END of validation t0s (repeatable); "
                    "with it, a validation every --val-every steps")
    ap.add_argument("--val-every", type=int, default=0, help="steps between validations (default: once per epoch)")
    ap.add_argument("--val-batches", type=int, default=0, help="validation batches per validation (default: all)")
    args = ap.parse_args()

    module = pvnet_module(args.config, args.seed)
    val_batches = args.val_batches or 1.0
    if args.loader == "gobatch":
        with gobatch_loader(args.config, args.batch_size, args.seed, args.train_period) as loader:
            if args.val_period:
                with gobatch_validation(args.config, args.batch_size, args.seed, args.val_period) as val:
                    done = train(module, loader, args.steps, val.loader(), args.val_every, val_batches)
            else:
                done = train(module, loader, args.steps)
    else:
        val_loader = ocf_validation(args.config, args.batch_size, args.seed, args.val_period) if args.val_period else None
        done = train(module, ocf_loader(args.config, args.batch_size, args.workers, args.train_period), args.steps,
                     val_loader, args.val_every, val_batches)
    for k, loss in enumerate(done.losses):
        print(f"step {k}: quantile loss {loss:.6f}")
    for k, loss in enumerate(done.val_losses):
        print(f"validation {k}: quantile loss {loss:.6f}")


if __name__ == "__main__":
    main()
