#!/usr/bin/env python3
"""Print a digest of every batch a shmloader build produces, one line per batch.

Two builds that sample the same way (same preset, data, seed and cache_mb; for locality
sampling also the same ``segment_steps`` and ``resident_segments``, which a build otherwise
derives from the cache's bytes) must print the same lines: a change that must keep batches bit for bit (the cache's stored width, say) is
checked by running this with the old build's binary and the new one's and comparing::

    python tools/batch_digests.py --shmloader /work/main/bin/shmloader --data-root DIR > old.txt
    python tools/batch_digests.py --shmloader bin/shmloader --data-root DIR > new.txt
    cmp old.txt new.txt

Each line is the batch's index, then ``name=sha256`` of each tensor's bytes in the batch's
order. Needs PYTHONPATH and GOBATCH_LIB as the tests do.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tomllib
from pathlib import Path
from typing import Any

import numpy as np

import gobatch


def config(preset: Path, batches: int, cache_mb: int | None, sampling: str | None, anchor: list[str]) -> dict[str, Any]:
    """The preset with a bounded stream and, when given, the anchor's cache_mb, sampling and
    other keys (``KEY=VALUE``, the value in TOML)."""
    cfg: dict[str, Any] = tomllib.loads(preset.read_text())
    cfg.setdefault("batch", {})["batches"] = batches
    anchors = [s for s in cfg.get("source", []) if s.get("anchor")]
    if not anchors:
        raise SystemExit(f"{preset}: no anchor source")
    if cache_mb is not None:
        anchors[0]["cache_mb"] = cache_mb
    if sampling is not None:
        anchors[0]["sampling"] = sampling
    for kv in anchor:
        key, _, value = kv.partition("=")
        anchors[0][key] = tomllib.loads(f"v = {value}")["v"]
    return cfg


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shmloader", required=True, help="the shmloader binary to run")
    ap.add_argument("--data-root", required=True, help="the directory holding the preset's stores")
    ap.add_argument("--preset", default=str(Path(__file__).resolve().parent.parent / "presets" / "nowcast.toml"))
    ap.add_argument("--batches", type=int, default=64)
    ap.add_argument("--readers", type=int, default=2)
    ap.add_argument("--cache-mb", type=int, help="the anchor's cache_mb (default: the preset's)")
    ap.add_argument("--sampling", help="the anchor's sampling (default: the preset's)")
    ap.add_argument("--anchor", action="append", default=[], metavar="KEY=VALUE",
                    help="another key of the anchor source (TOML value), e.g. segment_steps=24; repeatable")
    args = ap.parse_args()
    cfg = config(Path(args.preset), args.batches, args.cache_mb, args.sampling, args.anchor)
    with gobatch.Loader(cfg, data_root=args.data_root, readers=args.readers, shmloader=args.shmloader) as loader:
        for i, batch in enumerate(loader):
            with batch:
                parts = [f"{name}={hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest()[:16]}"
                         for name, v in batch.items()]
            print(i, " ".join(parts), flush=True)
            if i + 1 == args.batches:
                break
    return 0


if __name__ == "__main__":
    sys.exit(main())
