"""ocf-data-sampler 1.0.24 YAML configurations for the tests, built from sections.

One builder per section of ocf-data-sampler's model (``satellite``, ``nwp``, ``generation``,
``solar_position``, ``t0_embedding``), so that a test states what its configuration has and
what differs from the others, and no test pastes a YAML document of its own. ``config``
writes the document (PyYAML, which ocf-data-sampler reads it with). test_ocf_config.py keeps its
text: its subject is the YAML text itself (lines, scalars, tags).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

import yaml

__all__ = ["config", "generation", "norm", "nwp", "satellite", "window"]

Section = Dict[str, Any]


# The tests' and the benchmarks' reference t0 (stores are written around it): a leap year, so
# that day 60 is 29 February.
T0 = np.datetime64("2024-02-28T08:00")


class _Flow(dict):  # type: ignore[type-arg]
    """A mapping written on one line ({mean: 0.0, std: 1.0}), as people write constants."""


class _Dumper(yaml.SafeDumper):
    """Block mappings, one-line lists and constants: the way OCF's own YAML files look."""


_Dumper.add_representer(_Flow, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v, flow_style=True))
_Dumper.add_representer(list, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))


def window(res: int, start: int, end: int) -> Section:
    """A time window: ``time_resolution_minutes``, ``interval_start_minutes``, ``_end_``."""
    return {"time_resolution_minutes": res, "interval_start_minutes": start, "interval_end_minutes": end}


def norm(**channels: Tuple[float, ...]) -> Section:
    """``normalisation_constants``: each channel's (mean, std) or (mean, std, clip_min,
    clip_max), a clip bound None when absent."""
    out: Section = {}
    for name, c in channels.items():
        entry = _Flow(mean=float(c[0]), std=float(c[1]))
        if len(c) > 2 and c[2] is not None:
            entry["clip_min"] = float(c[2])
        if len(c) > 3 and c[3] is not None:
            entry["clip_max"] = float(c[3])
        out[name] = entry
    return out


def _grid(zarr_path: Union[str, List[str]], w: Section, height: int, width: int, channels: Sequence[str], constants: Section,
          extra: Section) -> Section:
    s: Section = {"zarr_path": zarr_path, **w, "image_size_pixels_height": height, "image_size_pixels_width": width}
    s.update(extra)  # dropout keys, dropout_value, accum_channels, max_staleness_minutes
    s["channels"] = list(channels)
    s["normalisation_constants"] = constants
    return s


def satellite(channels: Sequence[str], constants: Section, *, height: int, width: int,
              zarr_path: Union[str, List[str]] = "sat.zarr",
              res: int = 5, start: int = -30, end: int = 0, **extra: Any) -> Section:
    """The ``satellite`` section (extra: dropout_timedeltas_minutes, dropout_fraction,
    dropout_value)."""
    return _grid(zarr_path, window(res, start, end), height, width, channels, constants, extra)


def nwp(provider: str, channels: Sequence[str], constants: Section, *, height: int, width: int,
        zarr_path: Union[None, str, List[str]] = None, res: int = 60, start: int = -60, end: int = 120, **extra: Any) -> Section:
    """One provider key of the ``nwp`` section (zarr_path default ``<provider>.zarr``; extra:
    accum_channels, dropout keys, dropout_value, max_staleness_minutes)."""
    s = _grid(zarr_path or f"{provider}.zarr", window(res, start, end), height, width, channels, constants, extra)
    return {"provider": provider, **s}


def generation(*, zarr_path: str = "gen.zarr", res: int = 30, start: int = -60, end: int = 120, **extra: Any) -> Section:
    """The ``generation`` section (extra: dropout_value, dropout keys)."""
    return {"zarr_path": zarr_path, **window(res, start, end), **extra}


def config(name: str, description: str = "", *, generation: Optional[Section] = None,
           nwp: Optional[Dict[str, Section]] = None, satellite: Optional[Section] = None,
           solar_position: Optional[Section] = None, t0_embedding: Optional[List[Tuple[str, str]]] = None) -> str:
    """The YAML document of an ocf-data-sampler configuration with these sections."""
    inputs: Section = {}
    if generation is not None:
        inputs["generation"] = generation
    if nwp:
        inputs["nwp"] = nwp
    if satellite is not None:
        inputs["satellite"] = satellite
    if solar_position is not None:
        inputs["solar_position"] = solar_position
    if t0_embedding is not None:
        inputs["t0_embedding"] = {"embeddings": [list(e) for e in t0_embedding]}
    doc = {"general": {"name": name, "description": description or name}, "input_data": inputs}
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=1000)
