"""The platform wheel (``make wheel``) on a machine without Go, a C compiler or a system PROJ.

A mount namespace hides them (empty directories bound over Go's root, GCC's and PROJ's data
directories; /dev/null bound over every compiler and PROJ library file); inside it a fresh venv
installs the wheel with pip from local files only (numpy from build/wheelhouse, ``make
wheelhouse``), then runs ``gobatch --version``, ``python -m gobatch doctor``, a Loader on
synthetic sources and a Loader on Zarr stores that needs PROJ (a geostationary anchor placed
from its pyresample ``area`` attribute, PV sites placed from longitude/latitude, a
longitude/latitude NWP, and a British National Grid NWP placed either by stored x_osgb/y_osgb
or by PROJ with ``crs = "EPSG:27700"``). The batches come back in a .npz and are checked here, outside the
namespace, against the synthetic contract and against xarray and pyproj
(test_sampler_align.Reference). The same namespace shows that ``pip install ./python`` from a
checkout stops with a message naming what is missing.

Needs root or unprivileged user namespaces (unshare), the wheel in dist/ and the wheelhouse;
``make test`` makes both first. GOBATCH_WHEEL and GOBATCH_WHEELHOUSE point elsewhere.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import numpy as np
import pytest
import xarray as xr

import synthetic
import test_sampler_align as align

pytestmark = pytest.mark.timeout(180)

REPO = Path(__file__).resolve().parents[3]
N_BATCHES = 3
SYNTH = synthetic.config({"a": ((3, 5), "float32"), "b": ((7,), "int64")}, size=4, batches=N_BATCHES)

# Runs in the fresh venv, inside the namespace: the Loaders, their batches into a .npz, and
# what the shmloader child mapped (its PROJ library must be the wheel's).
INNER = r'''
import ctypes, json, os, sys, time
import numpy as np
import gobatch

spec = json.load(open(sys.argv[1]))
arrays, out = {}, {"gobatch_file": gobatch.__file__}
try:
    ctypes.CDLL("libproj.so.25")
    out["system_proj_loads"] = True
except OSError:
    out["system_proj_loads"] = False

def child_libs():
    kids = []
    for t in os.listdir("/proc/self/task"):
        kids += open(f"/proc/self/task/{t}/children").read().split()
    libs = {}
    for pid in kids:
        try:
            exe, maps = os.readlink(f"/proc/{pid}/exe"), open(f"/proc/{pid}/maps").read()
        except OSError:
            continue
        libs[exe] = sorted({l.split()[-1] for l in maps.splitlines() if ".so" in l.split()[-1]})
    return libs

for name, cfg in spec["runs"].items():
    if name.startswith("zarr"):  # gobatch.plan starts shmloader too: it places the stores through PROJ
        out[name + "_plan_t0_candidates"] = gobatch.plan(cfg, data_root=spec["root"])["t0_candidates"]
    t = time.perf_counter()
    with gobatch.Loader(cfg, framework="numpy", data_root=spec["root"]) as loader:
        for k, batch in enumerate(loader):
            if k == 0:
                out[name + "_first_batch_s"] = time.perf_counter() - t
                out[name + "_child_libs"] = child_libs()
            for key, v in batch.items():
                arrays[f"{name}/{k}/{key}"] = np.array(v)
            if k == spec["n"] - 1:
                break
np.savez(spec["out"], **arrays)
print("RESULT " + json.dumps(out))
'''


def wheel_path() -> Path:
    given = os.environ.get("GOBATCH_WHEEL")
    found = [Path(given)] if given else sorted(REPO.glob("dist/gobatch-*-py3-none-manylinux_*_x86_64.whl"),
                                               key=lambda p: p.stat().st_mtime)
    if not found or not found[-1].is_file():
        pytest.fail(f"no gobatch wheel in {REPO / 'dist'} (GOBATCH_WHEEL unset): run `make wheel`")
    return found[-1]


def wheelhouse() -> Path:
    d = Path(os.environ.get("GOBATCH_WHEELHOUSE") or REPO / "build" / "wheelhouse")
    if not glob.glob(str(d / "numpy-*.whl")):
        pytest.fail(f"no numpy wheel in {d}: run `make wheelhouse` (pip download numpy, once)")
    return d


def hidden() -> Tuple[List[str], List[str]]:
    """Directories and files to hide: Go's root, every C/C++ compiler and GCC's own programs,
    PROJ's libraries, headers, pkg-config file and data."""
    dirs, files = [], []
    go = shutil.which("go")
    if go:
        root = subprocess.run([go, "env", "GOROOT"], capture_output=True, text=True).stdout.strip()
        dirs.append(root or os.path.dirname(os.path.realpath(go)))
    for name in ("cc", "gcc", "c++", "g++", "clang", "clang++", "tcc", "x86_64-linux-gnu-gcc", "pkg-config"):
        path = shutil.which(name)
        if path:
            files.append(os.path.realpath(path))
    dirs += [d for d in ("/usr/lib/gcc", "/usr/libexec/gcc", "/usr/share/proj", "/usr/local/share/proj")
             if os.path.isdir(d)]
    for pattern in ("/usr/lib/x86_64-linux-gnu/libproj.so*", "/usr/lib/x86_64-linux-gnu/pkgconfig/proj.pc",
                    "/usr/local/lib/libproj.so*", "/usr/include/proj.h"):
        files += [os.path.realpath(p) for p in glob.glob(pattern)]
    return sorted(set(dirs)), sorted(set(files))


def in_namespace(script: str, env: Dict[str, str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    """Runs the shell script in a new mount namespace with the toolchain and PROJ hidden."""
    dirs, files = hidden()
    empty = cwd / "empty"
    empty.mkdir(exist_ok=True)
    mounts = [f"mount --bind {shlex.quote(str(empty))} {shlex.quote(d)}" for d in dirs]
    mounts += [f"mount --bind /dev/null {shlex.quote(f)}" for f in files]
    full = "set -e\n" + "\n".join(mounts) + "\nset +e\n" + script
    tries = [["unshare", "--mount", "--propagation", "private"]] if os.geteuid() == 0 else []
    tries.append(["unshare", "--map-root-user", "--mount", "--propagation", "private"])
    why = ""
    for prefix in tries:
        p = subprocess.run(prefix + ["sh", "-c", full], env=env, cwd=cwd, capture_output=True, text=True,
                           timeout=timeout)
        if "unshare failed" not in p.stderr and not (p.returncode != 0 and "unshare:" in p.stderr[:200]):
            return p
        why = p.stderr
    pytest.fail(f"cannot make a mount namespace to hide the toolchain (unshare): {why.strip()}")


def clean_env(tmp: Path) -> Dict[str, str]:
    """This process's environment less everything pointing at the checkout or its venv."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GOBATCH_", "PYTHON", "VIRTUAL_ENV", "PROJ_", "PIP_", "GO"))}
    venv_bin = str(Path(sys.prefix) / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "/usr/bin:/bin").split(os.pathsep) if p != venv_bin)
    env["HOME"] = str(tmp)  # no user pip configuration or cache
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    """Builds the Zarr fixture, then installs and runs the wheel in the namespace once."""
    tmp = tmp_path_factory.mktemp("wheel")
    rng = np.random.default_rng(8)
    ox, oy = align.write_satellite(tmp, rng)
    align.write_ukv(tmp, rng, ox, oy)
    align.write_latlon(tmp, rng)
    sat = xr.open_zarr(tmp / "sat.zarr", chunks=None)
    lon, lat = align.site_positions(rng, sat["x"].values, sat["y"].values)
    ids = align.write_pv(tmp, rng, lon, lat)
    stores = align.Stores(tmp, lon, lat, ids)
    osgb = align.config()  # the UKV placed by PROJ (geostationary to EPSG:27700), not by x_osgb/y_osgb
    del osgb["source"][1]["anchor_coords"]
    osgb["source"][1]["crs"] = "EPSG:27700"
    spec = {"runs": {"synthetic": SYNTH, "zarr": align.config(), "zarr_osgb": osgb}, "root": str(tmp),
            "n": N_BATCHES, "out": str(tmp / "out.npz")}
    (tmp / "spec.json").write_text(json.dumps(spec))
    (tmp / "inner.py").write_text(INNER)
    whl, house = wheel_path(), wheelhouse()
    q = shlex.quote
    py = q(sys.executable)
    script = f"""
for t in go gcc cc; do if command -v $t >/dev/null && $t --version >/dev/null 2>&1; then echo "HIDDEN-FAIL $t runs"; fi; done
{py} -m venv fresh || exit 10
echo "T0 $(date +%s.%N)"
fresh/bin/pip install -q --no-index --find-links {q(str(house))} {q(str(whl))} || exit 11
echo "T1 $(date +%s.%N)"
echo "PIPLIST $(fresh/bin/pip list --format json)"
fresh/bin/gobatch --version; echo "VERSION_RC $?"
fresh/bin/python -m gobatch doctor; echo "DOCTOR_RC $?"
fresh/bin/python inner.py spec.json 2>&1; echo "INNER_RC $?"
{py} -m pip install --no-build-isolation --no-deps --no-index --target src-target {q(str(REPO / 'python'))} 2>&1
echo "SOURCE_RC $?"
"""
    started = time.perf_counter()
    p = in_namespace(script, clean_env(tmp), tmp, timeout=150)
    out = p.stdout + p.stderr
    res: Dict[str, Any] = {"out": out, "stores": stores, "wall_s": time.perf_counter() - started}
    for line in p.stdout.splitlines():
        key, _, rest = line.partition(" ")
        if key in ("T0", "T1"):
            res[key] = float(rest)
        elif key in ("VERSION_RC", "DOCTOR_RC", "INNER_RC", "SOURCE_RC"):
            res[key] = int(rest)
        elif key in ("PIPLIST", "RESULT"):
            res[key] = json.loads(rest)
    assert p.returncode == 0 and "INNER_RC" in res, f"namespace script failed ({p.returncode}):\n{out}"
    res["INSTALL_S"] = res["T1"] - res["T0"]
    res["batches"] = dict(np.load(tmp / "out.npz")) if (tmp / "out.npz").is_file() else {}
    print(f"wheel {whl.name}: {whl.stat().st_size / 1e6:.1f} MB, install {res['INSTALL_S']:.1f} s, "
          f"namespace run {res['wall_s']:.1f} s")
    yield res
    shutil.rmtree(tmp, ignore_errors=True)


def inner(installed: Dict[str, Any]) -> Dict[str, Any]:
    """What the Loaders in the fresh venv reported; fails with their output when they failed."""
    if installed.get("INNER_RC") != 0 or "RESULT" not in installed:
        pytest.fail(f"the Loaders in the fresh venv failed (status {installed.get('INNER_RC')}):\n"
                    f"{installed['out'][-6000:]}")
    return dict(installed["RESULT"])


def test_toolchain_is_hidden(installed: Dict[str, Any]) -> None:
    assert "HIDDEN-FAIL" not in installed["out"], installed["out"]
    assert inner(installed)["system_proj_loads"] is False, "the system libproj still loads in the namespace"


def test_install_pulls_only_numpy_and_compiles_nothing(installed: Dict[str, Any]) -> None:
    names = {p["name"].lower() for p in installed["PIPLIST"]}
    assert names - {"pip", "setuptools"} == {"gobatch", "numpy"}, names
    assert "/fresh/" in inner(installed)["gobatch_file"], installed["RESULT"]  # not the checkout's
    print(f"the wheel installed in {installed['INSTALL_S']:.1f} s")


def test_version_and_doctor(installed: Dict[str, Any]) -> None:
    out = installed["out"]
    assert installed["VERSION_RC"] == 0 and installed["DOCTOR_RC"] == 0, out
    lines = out.splitlines()
    shm = [line for line in lines if line.startswith("shmloader: ")]
    assert shm and "/fresh/" in shm[0] and "cgo 1" in shm[0], shm
    proj = [line for line in lines if line.startswith("ok    PROJ: ")]
    assert proj and "bundled" in proj[0] and "gobatch.libs/libproj" in proj[0] and "_data/proj" in proj[0], out
    for name in ("gobatch", "shmloader", "C library", "memfd sealing", "shared memory", "torch"):
        assert any(re.match(rf"(ok|warn)\s+{name}: ", line) for line in lines), f"no good verdict for {name}:\n{out}"
    assert "verdict: ok" in out


def test_child_runs_on_the_bundled_proj(installed: Dict[str, Any]) -> None:
    for exe, libs in inner(installed)["zarr_child_libs"].items():
        assert "/fresh/" in exe, exe
        projs = [lib for lib in libs if "libproj" in lib]
        assert projs and all("/gobatch.libs/" in lib for lib in projs), libs
        assert not any(lib.startswith("/usr/lib/x86_64-linux-gnu/libproj") for lib in libs), libs
    assert installed["RESULT"]["zarr_child_libs"], "no shmloader child seen"


def test_synthetic_loader_from_the_wheel(installed: Dict[str, Any]) -> None:
    inner(installed)
    b = installed["batches"]
    for k in range(N_BATCHES):
        synthetic.check_batch({n: b[f"synthetic/{k}/{n}"] for n in ("a", "b")}, SYNTH, k)


@pytest.mark.parametrize("run", ["zarr", "zarr_osgb"])
def test_projected_zarr_loader_from_the_wheel(installed: Dict[str, Any], run: str) -> None:
    """Sites (longitude/latitude to the geostationary area), the ECMWF crop (geostationary to
    EPSG:4326) and the UKV crop (x_osgb/y_osgb as stored, or geostationary to EPSG:27700 by the
    bundled PROJ: zarr_osgb) against pyproj's positions and xarray's values."""
    assert inner(installed)[run + "_plan_t0_candidates"] > 0, "gobatch.plan from the wheel"
    stores, b = installed["stores"], installed["batches"]
    ref = align.Reference(stores)
    kept = ref.site_pixels()
    names = {key.split("/")[2] for key in b if key.startswith(f"{run}/0/")}
    assert names, f"no batches of {run}"
    for k in range(N_BATCHES):
        batch = {n: b[f"{run}/{k}/{n}"] for n in names}
        for i in range(len(batch["location_id"])):
            sid = int(batch["location_id"][i])
            where = f"batch {k} example {i} (location {sid})"
            assert sid in kept, where
            assert ref.check(batch, i, where) == kept[sid], where


def test_source_install_names_what_is_missing(installed: Dict[str, Any]) -> None:
    out = installed["out"]
    assert installed["SOURCE_RC"] != 0, out
    assert "cannot build from source, this machine lacks Go" in out, out
    for what in ("a C compiler", "PROJ's development files", "pip install gobatch-", "make wheel"):
        assert what in out, f"{what!r} not in:\n{out}"
