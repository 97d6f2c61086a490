#!/usr/bin/env python3
"""OCF's regime in the issue's terms (issue 28): an OCF-shaped archive (benchmarks/ocf_archive.py:
the PVNet example configuration's 11-channel int16 satellite in two stores, 17-channel UKV and
ECMWF, at the public stores' chunking and Blosc zstd) with the satellite 10x the cache, in one
run:

- ``gobatch local``: ``gobatch.Loader(yaml, batch_size=32, order="epochs", cache_mb=<satellite
  / 10>)`` from local disk, ``--epochs`` whole epochs a round;
- ``gobatch S3``: the same through a real S3 server on 127.0.0.1 (versitygw, the test suite's)
  serving the same directory, at gobatch's default settings; rounds alternate local and S3;
- ``ocf wN``: ``PVNetDataset(yaml)`` through PVNet's DataLoader (benchmarks/ocf_bench.py's
  ``ocf_loader``: PVNetDataModule's train_dataloader, N = 0 and 2 workers) for ``--seconds``;
- the decode-once loop: ``shmloader read ARRAY`` over every array an epoch reads (each chunk
  decoded once, on every core, to its stored type: the least work any epoch can do; the
  fastest of 3 each, summed): "vs loop" is batches/s over the epoch's batches in the loop's time.

For gobatch: batches/s (median round), its ratio to the better ocf loader, to the loop, S3's
to local's, each source's decode amplification and the limiting stage of the last epoch
(``Loader.stats()["last_epoch"]``). The archive is written once into ``--data`` (default: a
temporary directory) and reused when it is there.

Usage::

    python benchmarks/ocf_regime_bench.py [--days 3] [--data DIR] [--rounds 2] [--epochs 2] [--seconds 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from baselines import MB, REPO, measure, read_seconds  # noqa: E402
from ocf_archive import satellite_bytes, write_archive  # noqa: E402
from ocf_bench import ocf_loader  # noqa: E402

sys.path.insert(0, str(REPO / "python" / "tests"))
import s3_server  # noqa: E402

BATCH = 32
ARRAYS = ("sat-0.zarr/data", "sat-1.zarr/data", "ukv.zarr/UKV", "ecmwf.zarr/ECMWF", "gen.zarr/generation_mw",
          "gen.zarr/capacity_mwp")


def s3_yaml(config: Path, bucket: str) -> Path:
    """The YAML with every zarr_path in the bucket."""
    doc = yaml.safe_load(config.read_text())

    def moved(p: Any) -> Any:
        return [moved(q) for q in p] if isinstance(p, list) else f"s3://{bucket}/{p}"

    inputs = doc["input_data"]
    for section in [inputs.get("satellite"), inputs.get("generation"), *(inputs.get("nwp") or {}).values()]:
        if section:
            section["zarr_path"] = moved(section["zarr_path"])
    out = config.with_name("pvnet_archive_s3.yaml")
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def gobatch_epochs(config: Path, cache_mb: int, epochs: int, env: dict[str, str]) -> dict[str, Any]:
    """``epochs`` whole epochs of a Loader (the S3 environment env): batches/s over them, and
    the last epoch's figures."""
    import gobatch

    saved = {k: os.environ.get(k) for k in (*env, *s3_server.ENV_UNSET)}
    os.environ.update(env)
    if env:
        for k in s3_server.ENV_UNSET:
            os.environ.pop(k, None)
    try:
        with gobatch.Loader(str(config), batch_size=BATCH, order="epochs", cache_mb=cache_mb, framework="torch",
                            start_timeout=300) as L:
            n, t = 0, time.perf_counter()
            for _ in range(epochs):
                for batch in L:
                    n += 1
                    del batch
            seconds = time.perf_counter() - t
            return {"batches_per_s": n / seconds, "epoch_batches": len(L), "last_epoch": L.stats()["last_epoch"]}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=float, default=3.0)
    ap.add_argument("--sites", type=int, default=24)
    ap.add_argument("--data", type=Path, help="where the archive is written (and reused from)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2, help="whole epochs per gobatch round")
    ap.add_argument("--seconds", type=float, default=30.0, help="timed part of each ocf loader")
    ap.add_argument("--no-ocf", action="store_true", help="leave the ocf loaders out")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ocf-regime-") as tmp:
        root = (args.data or Path(tmp)).resolve()
        config = root / "pvnet_archive.yaml"
        t = time.perf_counter()
        if not config.exists():
            write_archive(root, args.days, args.sites)
            print(f"archive written in {time.perf_counter() - t:.0f} s", flush=True)
        os.chdir(root)  # the YAML's zarr_paths are relative, as ocf-data-sampler resolves them
        sat = satellite_bytes(root)
        cache_mb = max(int(sat / 10 / (1 << 20)), 16)
        print(f"archive: {args.days:g} days, 11-channel satellite {sat / MB:.0f} MB as int16 in 2 stores (zstd), UKV and "
              f"ECMWF 17 channels, {args.sites} sites; cache_mb {cache_mb} ({sat / (cache_mb << 20):.1f}x under the "
              f"satellite); load average {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)", flush=True)
        loop = {a: read_seconds(root / a) for a in ARRAYS}
        print("decode-once loop: " + ", ".join(f"{a} {s:.2f} s" for a, s in loop.items()), flush=True)

        rows: dict[str, list[dict[str, Any]]] = {"local": [], "S3": []}
        with s3_server.serve({"ocf": root}) as url:
            s3cfg = s3_yaml(config, "ocf")
            for r in range(args.rounds):
                for name, cfg_path, env in (("local", config, {}), ("S3", s3cfg, s3_server.env_for(url))):
                    res = gobatch_epochs(cfg_path, cache_mb, args.epochs, env)
                    rows[name].append(res)
                    e = res["last_epoch"]
                    print(f"  round {r + 1}, gobatch {name}: {res['batches_per_s']:.1f} batches/s, amplification "
                          f"{[round(a, 1) for a in e['decode_amplification']]}, limiting {e['limiting_stage']}", flush=True)
        ocf: dict[str, float] = {}
        if not args.no_ocf:
            for workers in (0, 2):
                res = measure(f"ocf w{workers}", lambda: ocf_loader(str(config), BATCH, workers), max_batches=100000,
                              max_seconds=args.seconds, warmup=1)
                ocf[res.name] = res.batches_per_s
                print(f"  {res.name} (PVNetDataset): {res.batches_per_s:.2f} batches/s", flush=True)

        epoch = rows["local"][0]["epoch_batches"]
        limit = epoch / sum(loop.values())
        local = statistics.median(x["batches_per_s"] for x in rows["local"])
        s3 = statistics.median(x["batches_per_s"] for x in rows["S3"])
        ratios = [b["batches_per_s"] / a["batches_per_s"] for a, b in zip(rows["local"], rows["S3"])]
        best = max(ocf.values()) if ocf else float("nan")
        print(f"\n  epoch: {epoch} batches of {BATCH}; the decode-once loop's rate {limit:.1f} batches/s")
        print(f"  {'loader':<16} {'batch/s':>8} {'vs ocf':>7} {'vs loop':>8}  amplification (satellite stores, UKV, ECMWF, ...)")
        for name, rate in (("gobatch local", local), ("gobatch S3", s3)):
            e = rows["local" if name.endswith("local") else "S3"][-1]["last_epoch"]
            print(f"  {name:<16} {rate:8.1f} {rate / best:6.1f}x {rate / limit:7.2f}x  "
                  f"{[round(a, 1) for a in e['decode_amplification']]} ({e['limiting_stage']})")
        for name, rate in ocf.items():
            print(f"  {name + ' (ocf)':<16} {rate:8.2f}")
        print(f"\n  S3 at defaults / local disk: {s3 / local:.2f} (per round: {', '.join(f'{x:.2f}' for x in ratios)})")
        print(f"load average at end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
