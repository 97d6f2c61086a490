"""The user's line: the first frame outside the gobatch package (the trainer's ``next()``,
``for`` or ``DataLoader`` loop), however deep inside gobatch the question is asked. Warnings
point at it (Python 3.12's ``skip_file_prefixes`` would do the same; this works on 3.11 too),
and each batch handed out records it for :class:`SlotsHeldError`."""

from __future__ import annotations

import sys
import warnings
from typing import Tuple

from .errors import GobatchWarning

__all__ = ["warn", "site"]

_getframe = sys._getframe


def _ours(name: str) -> bool:
    return name == "gobatch" or name.startswith("gobatch.")


def warn(message: str) -> None:
    """Issues ``message`` as a :class:`GobatchWarning` attributed to the first caller outside
    gobatch."""
    frame, level = _getframe(1), 2  # level 2: warn's caller
    while frame.f_back is not None and _ours(frame.f_globals.get("__name__", "")):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, GobatchWarning, stacklevel=level)


def site() -> Tuple[str, int]:
    """``(file, line)`` of the first caller outside gobatch. Only the two are kept, never the
    frame, which would keep the caller's locals (and the batches they name) alive."""
    frame = _getframe(2)
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith("gobatch."):
        frame = frame.f_back
    return frame.f_code.co_filename, frame.f_lineno
