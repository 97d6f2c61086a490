"""ocf-data-sampler's batch layout for a ``rules = "ocf"`` job (docs/OCF.md).

The ring holds flat tensors; ocf-data-sampler's ``stack_np_samples_into_batch`` nests the NWP
per provider and renames the satellite. :class:`OCFLayout` builds that nesting over the
slot's own arrays (or tensors): nothing is copied, so a nested dict of them holds the batch's
lease exactly as the flat batch does (the lease books count references to the same arrays).

What is a satellite, an NWP of which provider, and the channel names come from Go (``shmloader
plan --ocf-layout``, from the configuration's translation): Python never reads the YAML.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from . import _native
from ._child import Command
from .errors import ConfigError, LoaderError

__all__ = ["OCFLayout", "LayoutQuery"]

#: ring tensor suffix -> key inside ``nwp[provider]``
_NWP_PARTS = (("_init_time_utc", "nwp_init_time_utc"), ("_step", "nwp_step"),
              ("_target_time_utc", "nwp_target_time_utc"))


class OCFLayout:
    """The nesting of one ``rules = "ocf"`` configuration's batches.

    ``view(flat)`` maps a flat batch ``{ring tensor name: array}`` to ocf-data-sampler's batch:
    the anchor's tensor (``satellite``) becomes ``satellite_actual``; each NWP provider key
    ``k`` becomes ``nwp[k] = {"nwp": flat[k], "nwp_channel_names": <U array,
    "nwp_init_time_utc": flat[k + "_init_time_utc"], "nwp_step": ..., "nwp_target_time_utc":
    ...}`` (the time tensors when the batch has them); ``t0_idx`` is a Python int; every other
    tensor stays a top-level key under its ring name."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self.satellite: str = str(doc["satellite"])
        self.t0_idx: Optional[int] = None if doc.get("t0_idx") is None else int(doc["t0_idx"])
        self.nwp: List[Tuple[str, np.ndarray]] = [
            (str(n["key"]), np.array([str(c) for c in n["channel_names"]], dtype=np.str_))
            for n in doc.get("nwp") or ()]

    def view(self, flat: Mapping[str, Any]) -> Dict[str, Any]:
        """The nested batch over ``flat``'s own arrays (no copy)."""
        out: Dict[str, Any] = {}
        taken = set()
        nwp: Dict[str, Dict[str, Any]] = {}
        for key, names in self.nwp:
            if key not in flat:
                continue
            entry: Dict[str, Any] = {"nwp": flat[key], "nwp_channel_names": names}
            taken.add(key)
            for suffix, name in _NWP_PARTS:
                if key + suffix in flat:
                    entry[name] = flat[key + suffix]
                    taken.add(key + suffix)
            nwp[key] = entry
        for name, value in flat.items():
            if name in taken:
                continue
            out["satellite_actual" if name == self.satellite else name] = value
        if nwp:
            out["nwp"] = nwp
        if self.t0_idx is not None:
            out["t0_idx"] = self.t0_idx
        return out


def _may_be_ocf(command: Command) -> bool:
    """Whether the configuration can set rules = "ocf": an ocf-data-sampler YAML file (its
    translation sets it), or a document that mentions ``rules`` at all (the default is
    gobatch's own rules). Saves the extra exec for every other configuration."""
    if command.config != "-" and command.config.lower().endswith((".yaml", ".yml")):
        return True
    try:
        return b"rules" in command.config_bytes()
    except OSError:
        return False


class LayoutQuery:
    """``shmloader plan --ocf-layout`` for a configuration, started at once so that it runs
    while the Loader starts its producer (it reads the configuration and opens no store):
    :meth:`result` is the layout when the configuration sets rules = "ocf", else None. A
    configuration that cannot set it starts nothing."""

    def __init__(self, command: Command, timeout: float = 60.0) -> None:
        self._timeout = timeout
        self._input = command.config_json
        self._proc: "Optional[subprocess.Popen[bytes]]" = None
        if not _may_be_ocf(command):
            return
        argv = [command.binary, "plan", "--ocf-layout", "--config", command.config, *command.batch]
        if command.data_root is not None:
            argv += ["--data-root", command.data_root]
        self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE if self._input is not None else subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      env=_native.child_env(command.binary, command.env))

    def result(self) -> Optional[OCFLayout]:
        """Waits for the answer; raises ConfigError for a configuration shmloader refuses."""
        p = self._proc
        if p is None:
            return None
        try:
            out, err_b = p.communicate(self._input, timeout=self._timeout)
        except subprocess.TimeoutExpired:
            self.close()
            raise LoaderError(f"shmloader plan --ocf-layout did not finish within {self._timeout:g} s") from None
        self._proc = None
        err = err_b.decode(errors="replace").strip()
        if p.returncode == 2:
            raise ConfigError(err or "shmloader refused the configuration", stderr=err)
        if p.returncode != 0:
            raise LoaderError(f"shmloader plan --ocf-layout failed: {err}", stderr=err, exit_code=p.returncode)
        doc = json.loads(out)["ocf"]
        return None if doc is None else OCFLayout(doc)

    def close(self) -> None:
        """Stops the query if it still runs (the Loader failed to start)."""
        p, self._proc = self._proc, None
        if p is not None:
            p.kill()
            p.communicate()
