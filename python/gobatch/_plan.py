"""``gobatch.plan``: the dry run of a configuration, through ``shmloader plan --json``."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any, Dict, Optional, Sequence, Tuple

from . import _native
from ._batch_options import TimeLike, batch_flags
from ._child import shmloader_path
from ._config import ConfigLike, config_argument
from .errors import ConfigError, LoaderError


def plan(
    config: ConfigLike,
    *,
    data_root: Optional[str] = None,
    rank: int = 0,
    world_size: int = 1,
    cache_mb: Optional[int] = None,
    shmloader: Optional[str] = None,
    timeout: float = 120.0,
    batch_size: Optional[int] = None, order: Optional[str] = None, seed: Optional[int] = None,
    t0_start: Optional[TimeLike] = None, t0_end: Optional[TimeLike] = None, slots: Optional[int] = None,
    segment_steps: Optional[int] = None,
    time_periods: Optional[Sequence[Tuple[Optional[TimeLike], Optional[TimeLike]]]] = None,
    drop_last: Optional[bool] = None, concurrent: bool = False, resident_segments: Optional[int] = None,
) -> Dict[str, Any]:
    """What a configuration would do, without starting a ring or decoding a chunk.

    Opens the stores as :class:`Loader` would (metadata and coordinates only) and returns
    ``shmloader plan --json``'s report as a dict: ``sources`` (each source's store, dims in store
    order, shape and window steps), ``tensors``, ``batch_bytes``, the sampling ``mode``,
    ``t0_candidates``, ``t0_rejections`` (per source: ``field``, ``name``, ``count`` of anchor
    times it rules out as t0 and why the ``first`` was; a ``batch`` entry for the times
    t0_start / t0_end leave out), ``sample_space`` for an ocf-data-sampler YAML (its ``rules``,
    ``mode`` "complete" or "per-location", ``pairs`` of (t0, location), ``locations``, ``periods`` and, in
    complete mode, ``t0s``: these pairs replace the t0 candidates), ``decoded_bytes`` against ``cache_bytes``, the ``order`` (with epochs:
    ``samples`` and ``epoch_batches``), ``ring_slots`` and ``segment_bytes``.

    ``batch_size``, ``order``, ``seed``, ``t0_start``, ``t0_end``, ``time_periods``,
    ``drop_last``, ``concurrent`` replace the file's ``[batch]`` values, ``slots`` its ``[ring] slots`` and ``cache_mb``, ``segment_steps`` the anchor
    source's keys, as for :class:`Loader` (an ocf-data-sampler YAML file needs ``batch_size``).

    Raises :class:`ConfigError` naming the field when the configuration or its stores are
    refused, :class:`LoaderError` when shmloader fails otherwise.
    """
    cmd = [shmloader_path(shmloader), "plan", "--json", "--rank", str(rank), "--world-size", str(world_size)]
    config_path, stdin = config_argument(config)
    cmd += ["--config", config_path]
    if data_root is not None:
        cmd += ["--data-root", os.fspath(data_root)]
    cmd += batch_flags(batch_size, order, seed, t0_start, t0_end, cache_mb, slots, segment_steps, time_periods,
                       drop_last, concurrent, resident_segments)
    try:
        p = subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout, env=_native.child_env(cmd[0], None))
    except subprocess.TimeoutExpired:
        raise LoaderError(f"shmloader plan did not finish within {timeout:g} s") from None
    err = p.stderr.decode(errors="replace").strip()
    if p.returncode == 2:
        raise ConfigError(err or "shmloader refused the configuration", stderr=err)
    if p.returncode != 0:
        raise LoaderError(f"shmloader plan failed: {err}", stderr=err, exit_code=p.returncode)
    report: Dict[str, Any] = json.loads(p.stdout)
    return report
