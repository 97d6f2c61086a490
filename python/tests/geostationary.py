"""The geostationary grid the tests' satellite stores use, and the pyresample area definition
that such stores carry in their ``area`` attribute (read by gobatch and by ocf-data-sampler).

One place for both, so that every satellite fixture describes its grid the same way.
"""

from __future__ import annotations

import textwrap
from typing import Optional, Sequence

import numpy as np

# SEVIRI's projection as ocf-data-sampler's test archives give it (x_0 = y_0 = 0 by default).
GEOS = "+proj=geos +lon_0=9.5 +h=35785831 +a=6378169 +rf=295.488065897 +units=m +no_defs +type=crs"


def area(width: int, height: int, extent: Optional[Sequence[float]] = None,
         name: str = "msg_seviri_test") -> str:
    """The area definition (YAML) of a ``width`` x ``height`` geostationary grid; ``extent``
    (x_left, y_bottom, x_right, y_top, metres, pixel edges) when the reader needs it."""
    text = textwrap.dedent(f"""\
        {name}:
          description: a geostationary test area
          projection:
            a: 6378169.0
            h: 35785831.0
            lon_0: 9.5
            no_defs: null
            proj: geos
            rf: 295.488065897
            type: crs
            units: m
            x_0: 0.0
            y_0: 0.0
          shape:
            height: {height}
            width: {width}
        """)
    if extent is not None:
        x0, y0, x1, y1 = extent
        text += textwrap.indent(textwrap.dedent(f"""\
            area_extent:
              lower_left_xy: [{x0}, {y0}]
              upper_right_xy: [{x1}, {y1}]
              units: m
            """), "  ")
    return text


def grid_area(x: np.ndarray, y: np.ndarray, pixel: float = 3000.0) -> str:
    """The area definition of the grid with pixel centres ``x`` (descending) and ``y``
    (ascending), ``pixel`` metres apart."""
    half = pixel / 2
    return area(len(x), len(y), (x[0] + half, y[0] - half, x[-1] - half, y[-1] + half))
