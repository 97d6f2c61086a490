"""The native parts of an installed gobatch, and the environment its ``shmloader`` child needs.

A package built from a checkout (``pip install ./python``) holds ``_bin/shmloader``, linked
against the machine's PROJ, and ``_lib/libgobatch.so``. A wheel built by ``make wheel`` holds
the same two plus ``_data/proj`` (the ``proj.db`` and ``proj.ini`` of the PROJ the binary was
built with); ``auditwheel repair`` has copied PROJ's shared library and the libraries it needs
into ``gobatch.libs`` next to the package and pointed the binary's RPATH there. PROJ finds its
database through ``PROJ_DATA``, which :func:`child_env` sets for the packaged binary only: the
trainer's own environment is left alone, so another PROJ in the same process (pyproj, GDAL)
keeps its own data.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Mapping, Optional

PACKAGE = Path(__file__).resolve().parent
PROJ_DATA_ENV = "PROJ_DATA"


def packaged_shmloader() -> Path:
    """Where the package's own shmloader binary is (it may be missing in a bare checkout)."""
    return PACKAGE / "_bin" / "shmloader"


def bundled_proj_data() -> Optional[Path]:
    """The PROJ data directory inside the package (a wheel's), or None when PROJ is the system's."""
    d = PACKAGE / "_data" / "proj"
    return d if (d / "proj.db").is_file() else None


def bundled_libs() -> List[Path]:
    """The shared libraries auditwheel grafted into ``gobatch.libs`` (empty when built from source)."""
    d = PACKAGE.parent / "gobatch.libs"
    return sorted(p for p in d.iterdir() if ".so" in p.name) if d.is_dir() else []


def proj_data_for(binary: str) -> Optional[Path]:
    """The bundled PROJ data directory when ``binary`` is the package's own shmloader (the one
    linked against the bundled PROJ), else None (another binary uses its own PROJ's data)."""
    data = bundled_proj_data()
    if data is None:
        return None
    try:
        return data if os.path.samefile(binary, packaged_shmloader()) else None
    except OSError:
        return None


def child_env(binary: str, env: Optional[Mapping[str, str]]) -> Optional[Mapping[str, str]]:
    """The environment to start ``binary`` with, given the one asked for (None: this process's).

    Unchanged unless ``binary`` is the package's own and the package bundles PROJ data; then a
    copy whose ``PROJ_DATA`` starts with the bundled directory (the database matching the
    bundled library), followed by any directories the caller had there (grids of their own)."""
    data = proj_data_for(binary)
    if data is None:
        return env
    out = dict(os.environ if env is None else env)
    theirs = out.get(PROJ_DATA_ENV) or out.get("PROJ_LIB")  # PROJ's older name
    out[PROJ_DATA_ENV] = str(data) + (os.pathsep + theirs if theirs else "")
    return out
