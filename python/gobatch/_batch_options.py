"""gobatch's own batch options given as keywords (``gobatch.Loader`` and ``gobatch.plan``), passed
to shmloader as flags. They replace the configuration file's ``[batch]`` values (``slots`` its
``[ring] slots``, ``cache_mb`` and ``segment_steps`` the anchor source's keys); an
ocf-data-sampler YAML file cannot hold them (ocf-data-sampler refuses unknown keys), so for one
``batch_size`` is required (docs/OCF.md)."""

from __future__ import annotations

import datetime
from typing import List, Optional, Sequence, Tuple, Union

TimeLike = Union[str, datetime.datetime, datetime.date]

ORDERS = ("stream", "epochs")


def _iso(name: str, value: TimeLike) -> str:
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, str) and value:
        return value
    raise ValueError(f"{name} must be an ISO 8601 string or a datetime, not {value!r}")


def batch_flags(
    batch_size: Optional[int] = None,
    order: Optional[str] = None,
    seed: Optional[int] = None,
    t0_start: Optional[TimeLike] = None,
    t0_end: Optional[TimeLike] = None,
    cache_mb: Optional[int] = None,
    slots: Optional[int] = None,
    segment_steps: Optional[int] = None,
    time_periods: Optional[Sequence[Tuple[Optional[TimeLike], Optional[TimeLike]]]] = None,
    drop_last: Optional[bool] = None,
    concurrent: bool = False,
    resident_segments: Optional[int] = None,
) -> List[str]:
    """The shmloader flags for the given options (None: the file's value). Raises ValueError
    for a value of the wrong type or range; shmloader checks the rest, naming the option."""
    flags: List[str] = []
    for name, value, flag, low in (("batch_size", batch_size, "--batch-size", 1), ("seed", seed, "--seed", 0),
                                   ("cache_mb", cache_mb, "--cache-mb", 1), ("slots", slots, "--slots", 1),
                                   ("segment_steps", segment_steps, "--segment-steps", 1),
                                   ("resident_segments", resident_segments, "--resident-segments", 1)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, not {value!r}")
        flags += [flag, str(value)]
    if order is not None:
        if order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}, not {order!r}")
        flags += ["--order", order]
    if not isinstance(concurrent, bool):
        raise ValueError(f"concurrent must be True or False, not {concurrent!r}")
    if concurrent:
        flags.append("--concurrent")
    if drop_last is not None:
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last must be True or False, not {drop_last!r}")
        flags += ["--drop-last", "true" if drop_last else "false"]
    if t0_start is not None:
        flags += ["--t0-start", _iso("t0_start", t0_start)]
    if t0_end is not None:
        flags += ["--t0-end", _iso("t0_end", t0_end)]
    if time_periods is not None:
        if isinstance(time_periods, (str, bytes)) or not time_periods:
            raise ValueError(f"time_periods must be a non-empty list of (start, end) pairs, not {time_periods!r}")
        for p in time_periods:
            if isinstance(p, (str, bytes)) or len(p) != 2:
                raise ValueError(f"time_periods: {p!r} is not a (start, end) pair (None for an open end)")
            s, e = ("" if v is None else _iso("time_periods", v) for v in p)
            flags += ["--time-period", f"{s}/{e}"]
    return flags
