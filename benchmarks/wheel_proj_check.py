#!/usr/bin/env python3
"""The wheel's bundled PROJ against pyproj: the same transformations, the largest difference.

Extracts dist/gobatch-*.whl (``make wheel``) into a temporary directory, loads its
gobatch.libs/libproj with ctypes (PROJ_DATA: the wheel's gobatch/_data/proj) and transforms
2000 random points over Great Britain with proj_create_crs_to_crs, as the sampler does through
go-proj, for each pair of the CRSs docs/DATA.md names (a geostationary area, EPSG:4326,
EPSG:27700, UTM zone 30N); pyproj transforms the same points. Prints the largest difference in
metres (degrees converted at the point's latitude).

Usage: python benchmarks/wheel_proj_check.py
"""

from __future__ import annotations

import ctypes
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pyproj

REPO = Path(__file__).resolve().parents[1]
GEOS = ("+proj=geos +lon_0=9.5 +h=35785831 +a=6378169 +rf=295.488065897 +units=m +x_0=0 +y_0=0 "
        "+no_defs +type=crs")
PAIRS = [("EPSG:4326", GEOS), ("EPSG:4326", "EPSG:27700"), ("EPSG:4326", "EPSG:32630"), (GEOS, "EPSG:27700"),
         (GEOS, "EPSG:4326"), (GEOS, "EPSG:32630")]


class Coord(ctypes.Structure):
    _fields_ = [("v", ctypes.c_double * 4)]  # PJ_COORD


def load(lib: Path) -> ctypes.CDLL:
    L = ctypes.CDLL(str(lib))
    L.proj_create_crs_to_crs.restype = ctypes.c_void_p
    L.proj_create_crs_to_crs.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p]
    L.proj_normalize_for_visualization.restype = ctypes.c_void_p
    L.proj_normalize_for_visualization.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    L.proj_trans.restype = Coord
    L.proj_trans.argtypes = [ctypes.c_void_p, ctypes.c_int, Coord]
    return L


def main() -> None:
    whls = sorted(REPO.glob("dist/gobatch-*.whl"))
    if not whls:
        sys.exit("wheel_proj_check: run `make wheel` first")
    tmp = Path(tempfile.mkdtemp(prefix="gobatch-projcheck-"))
    try:
        zipfile.ZipFile(whls[-1]).extractall(tmp)
        compare(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def compare(tmp: Path) -> None:
    os.environ["PROJ_DATA"] = str(tmp / "gobatch" / "_data" / "proj")
    lib = next((tmp / "gobatch.libs").glob("libproj-*"))
    L = load(lib)
    rng = np.random.default_rng(0)
    lon, lat = rng.uniform(-8, 2, 2000), rng.uniform(50, 58, 2000)
    on_geos = pyproj.Transformer.from_crs("EPSG:4326", GEOS, always_xy=True).transform(lon, lat)
    print(f"bundled {lib.name} against pyproj {pyproj.__version__} (PROJ {pyproj.proj_version_str}), 2000 points")
    for a, b in PAIRS:
        xs, ys = (lon, lat) if a == "EPSG:4326" else on_geos
        pj = L.proj_normalize_for_visualization(None, L.proj_create_crs_to_crs(None, a.encode(), b.encode(), None))
        if not pj:
            sys.exit(f"bundled PROJ cannot make {a} -> {b}")
        got = np.array([L.proj_trans(pj, 1, Coord((ctypes.c_double * 4)(x, y, 0, 0))).v[:2] for x, y in zip(xs, ys)])
        want = np.column_stack(pyproj.Transformer.from_crs(a, b, always_xy=True).transform(xs, ys))
        d = np.abs(got - want)
        if b == "EPSG:4326":
            d *= np.column_stack([111320 * np.cos(np.radians(lat)), np.full_like(lat, 110540)])
        print(f"{a.split(' ')[0]:>10} -> {b.split(' ')[0]:<11} max |difference| {d.max():.1e} m")


if __name__ == "__main__":
    main()
