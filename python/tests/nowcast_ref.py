"""Independent xarray reference for the nowcast-ref sampler (docs/WORKLOAD.md).

Given the three stores and one example's reported metadata (``t0`` unix seconds, centre
``x``, ``y`` in metres), :meth:`NowcastReference.example` recomputes what the example must
contain, following the workload's steps 1-6 with xarray (``open_zarr`` and xarray's own CF
decoding: time units, ``scale_factor``, ``_FillValue`` masking). It shares no code with the Go
sampler and selects by coordinate values where the workload speaks of coordinates.

It also says which t0 indices and centres are valid (:meth:`valid_t0_indices`,
:attr:`centre_range`), so that tests can check that a sampler never leaves the valid range.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import xarray as xr

HISTORY = 6  # satellite steps before t0
FORECAST = 12  # satellite steps after t0
HALF = 16  # half the satellite crop
NWP_CROP = 8
NWP_STEPS = 4
N_PV = 16
NWP_DELAY = np.timedelta64(60, "m")
HOUR = np.timedelta64(60, "m")


@dataclass
class Example:
    """One example as the workload defines it (unbatched shapes)."""

    satellite: np.ndarray  # float32 [19, 12, 32, 32]
    nwp: np.ndarray  # float32 [4, 10, 8, 8]
    pv: np.ndarray  # float32 [19, 16]
    pv_system: np.ndarray  # int64 [16]
    t0: int  # unix seconds
    x: float
    y: float


def _as_timedelta(step: np.ndarray, units: str | None) -> np.ndarray:
    """NWP ``step`` as timedelta64[m], whether xarray decoded it or left the integers."""
    if np.issubdtype(step.dtype, np.timedelta64):
        return step.astype("timedelta64[m]")
    if units not in ("minutes", "minute", "min"):
        raise ValueError(f"nwp step: unexpected units {units!r}")
    return step.astype(np.int64).astype("timedelta64[m]")


class NowcastReference:
    """The expected content of nowcast-ref examples, computed with xarray.

    ``load=True`` reads the stores into memory first (fast for many examples); otherwise
    every example is read lazily from the Zarr stores. ``sat_channels`` and ``nwp_variables``
    select (by name, in the order given) the channels a configuration asks for; the default is
    every channel in store order, as the workload specifies.
    """

    def __init__(self, data_root: str | Path, load: bool = False, sat_channels: list[str] | None = None,
                 nwp_variables: list[str] | None = None) -> None:
        root = Path(data_root)
        self.sat = xr.open_zarr(root / "satellite.zarr", chunks=None)
        self.nwp = xr.open_zarr(root / "nwp.zarr", chunks=None)
        self.pvds = xr.open_zarr(root / "pv.zarr", chunks=None)
        if load:
            self.sat = self.sat.load()
            self.nwp = self.nwp.load()
            self.pvds = self.pvds.load()
        self.sat_time = self.sat["time"].values.astype("datetime64[m]")
        self.sat_x = self.sat["x"].values
        self.sat_y = self.sat["y"].values
        self.init_time = self.nwp["init_time"].values.astype("datetime64[m]")
        self.step = _as_timedelta(self.nwp["step"].values, self.nwp["step"].attrs.get("units"))
        self.nwp_x = self.nwp["x"].values
        self.nwp_y = self.nwp["y"].values
        self.pv_x = self.pvds["x"].values
        self.pv_y = self.pvds["y"].values
        self.system = self.pvds["system"].values
        self.sat_channels = list(sat_channels) if sat_channels else list(self.sat["channel"].values)
        self.nwp_variables = list(nwp_variables) if nwp_variables else list(self.nwp["variable"].values)

    # ---- validity ------------------------------------------------------------------------

    def valid_t0_indices(self) -> np.ndarray:
        """Satellite time indices i that step 1 allows: i >= 6, i + 12 < len(time), and an
        NWP run with init_time <= t0 - 60 min exists."""
        n = len(self.sat_time)
        i = np.arange(n)
        ok = (i >= HISTORY) & (i + FORECAST < n)
        ok &= self.sat_time - NWP_DELAY >= self.init_time.min()
        return i[ok]

    @property
    def centre_range(self) -> tuple[int, int, int, int]:
        """Valid centre pixel indices: cy in [lo_y, hi_y), cx in [lo_x, hi_x)."""
        return HALF, len(self.sat_y) - HALF, HALF, len(self.sat_x) - HALF

    def unix_seconds(self, i: int) -> int:
        """t0 of satellite time index i as unix seconds."""
        return int(self.sat_time[i].astype("datetime64[s]").astype(np.int64))

    def time_index(self, t0: int) -> int:
        """Satellite time index of unix-seconds ``t0`` (exact match, else ValueError)."""
        t = np.datetime64(int(t0), "s").astype("datetime64[m]")
        hit = np.nonzero(self.sat_time == t)[0]
        if len(hit) != 1 or np.datetime64(int(t0), "s") != t:
            raise ValueError(f"t0 {t0} ({np.datetime64(int(t0), 's')}) is not a satellite time")
        return int(hit[0])

    def pixel_index(self, x: float, y: float) -> tuple[int, int]:
        """(cy, cx) of the pixel whose centre is exactly (x, y), else ValueError."""
        cx = np.nonzero(self.sat_x == x)[0]
        cy = np.nonzero(self.sat_y == y)[0]
        if len(cx) != 1 or len(cy) != 1:
            raise ValueError(f"({x}, {y}) is not a satellite pixel centre")
        return int(cy[0]), int(cx[0])

    # ---- one example ---------------------------------------------------------------------

    def nwp_selection(self, t0: int, x: float, y: float) -> tuple[int, int, int, int]:
        """(run index, first lead step index, y start, x start) of step 4."""
        tm = np.datetime64(int(t0), "s").astype("datetime64[m]")
        cutoff = tm - NWP_DELAY
        older = np.nonzero(self.init_time <= cutoff)[0]
        if len(older) == 0:
            raise ValueError(f"no NWP run at least 60 min older than t0 {tm}")
        run = int(older[np.argmax(self.init_time[older])])
        lead = (cutoff - self.init_time[run]) // HOUR  # floor division of timedeltas
        first = np.nonzero(self.step == lead * HOUR)[0]
        if len(first) != 1:
            raise ValueError(f"NWP run {self.init_time[run]} has no step of {lead} h")

        def start(coords: np.ndarray, c: float) -> int:
            d = np.abs(coords - c)
            nearest = int(np.nonzero(d == d.min())[0][0])  # on a tie the lower index
            return int(np.clip(nearest - NWP_CROP // 2, 0, len(coords) - NWP_CROP))

        return run, int(first[0]), start(self.nwp_y, y), start(self.nwp_x, x)

    def pv_systems(self, x: float, y: float) -> np.ndarray:
        """Indices (along ``system``) of the 16 systems nearest (x, y), ascending id order."""
        d = np.hypot(self.pv_x - x, self.pv_y - y)
        nearest = np.argsort(d, kind="stable")[:N_PV]
        return nearest[np.argsort(self.system[nearest], kind="stable")]

    def example(self, t0: int, x: float, y: float) -> Example:
        """The expected example for reported metadata (t0 unix seconds, centre x, y)."""
        i = self.time_index(t0)
        cy, cx = self.pixel_index(x, y)
        times = self.sat["time"].values[i - HISTORY: i + FORECAST + 1]
        if i < HISTORY or len(times) != HISTORY + FORECAST + 1:
            raise ValueError(f"t0 index {i} leaves no room for the satellite window")

        sat = self.sat["data"].isel(
            time=slice(i - HISTORY, i + FORECAST + 1),
            y=slice(cy - HALF, cy + HALF), x=slice(cx - HALF, cx + HALF),
        ).sel(channel=self.sat_channels).values.astype(np.float32)

        run, s, ys, xs = self.nwp_selection(t0, x, y)
        nwp = self.nwp["UKV"].isel(
            init_time=run, step=slice(s, s + NWP_STEPS),
            y=slice(ys, ys + NWP_CROP), x=slice(xs, xs + NWP_CROP),
        ).sel(variable=self.nwp_variables).values.astype(np.float32)

        idx = self.pv_systems(x, y)
        ids = self.system[idx]
        pv = self.pvds["power"].sel(time=times, system=ids).values.astype(np.float32)
        return Example(satellite=sat, nwp=nwp, pv=pv, pv_system=ids.astype(np.int64),
                       t0=int(t0), x=float(x), y=float(y))

    def example_at(self, i: int, cy: int, cx: int) -> Example:
        """The expected example for satellite time index i and centre pixel (cy, cx)."""
        return self.example(self.unix_seconds(i), float(self.sat_x[cx]), float(self.sat_y[cy]))


TOOLS = Path(__file__).resolve().parents[2] / "tools"


@contextlib.contextmanager
def generated_nowcast(parent: Path, name: str, **kw: Any) -> Iterator[Path]:
    """A nowcast-ref dataset written by tools/gen_nowcast.py into parent/name (keyword
    arguments as gen_nowcast.generate takes them), removed afterwards: the stores are large for
    pytest's kept temporary directories."""
    sys.path.insert(0, str(TOOLS))
    try:
        import gen_nowcast
    finally:
        sys.path.remove(str(TOOLS))
    out = parent / name
    gen_nowcast.generate(out, quiet=True, **kw)
    try:
        yield out
    finally:
        shutil.rmtree(out, ignore_errors=True)
