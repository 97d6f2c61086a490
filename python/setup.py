"""Build of the gobatch package from a checkout: compiles libgobatch.so (../pybind, with make and
the C compiler) and the shmloader binary (../cmd/shmloader, with go and cgo against PROJ) into
gobatch/_lib and gobatch/_bin before the package files are collected.

Where Go, a C compiler or PROJ's development files are missing the build stops at once, naming
them: such a machine installs the prebuilt wheel instead (``make wheel`` on a machine that has
them makes one with everything inside).

``make wheel`` sets GOBATCH_BUNDLE_PROJ_DATA to PROJ's data directory: its proj.db and
proj.ini are then copied into gobatch/_data/proj (the bundled PROJ library finds them through
PROJ_DATA, gobatch/_native.py). Without it no PROJ data is packaged: the system's PROJ is used.
"""

import os
import shutil
import subprocess
from pathlib import Path
from typing import List

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PKG = HERE / "gobatch"
PROJ_FILES = ("proj.db", "proj.ini")  # the data the projections need (no grids: docs/DATA.md's CRSs use none)
WHEEL_HINT = ("install a prebuilt wheel instead (`pip install gobatch-*-py3-none-manylinux_*_x86_64.whl`, "
              "which needs none of them; `make wheel` in a gobatch checkout on a machine that has them builds one)")
# The native parts' package directories must exist when setuptools reads the configuration.
for d in ("_lib", "_bin", "_data/proj"):
    (PKG / d).mkdir(parents=True, exist_ok=True)


def run(cmd, cwd, env=None):
    print("gobatch build:", " ".join(str(c) for c in cmd), flush=True)
    try:
        subprocess.run(cmd, cwd=cwd, check=True, env=env)
    except FileNotFoundError as e:
        raise SystemExit(f"gobatch build: {cmd[0]} not found ({e}); install it, or {WHEEL_HINT}") from None
    except subprocess.CalledProcessError as e:
        raise SystemExit(f"gobatch build: {' '.join(map(str, cmd))} failed with status {e.returncode}") from None


def works(cmd: List[str]) -> bool:
    try:
        return subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    except OSError:
        return False


def missing_tools(go: str, cc: str, make: str) -> List[str]:
    """What of the source build's toolchain this machine lacks, each named as a user would install it."""
    missing = []
    if not works([go, "version"]):
        missing.append(f"Go ({go!r}: Go 1.26 or newer, https://go.dev/dl)")
    if not works([cc, "--version"]):
        missing.append(f"a C compiler ({cc!r}: e.g. Debian's gcc)")
    if not works([make, "--version"]):
        missing.append(f"make ({make!r})")
    if not works(["pkg-config", "--exists", "proj"]):
        missing.append("PROJ's development files (`pkg-config --exists proj` fails: Debian's pkg-config, "
                       "libproj-dev and proj-data)")
    return missing


class BuildNative(build_py):
    """Builds the native parts into the source package, then copies the package as usual."""

    def run(self):
        if not (ROOT / "pybind" / "Makefile").is_file() or not (ROOT / "cmd" / "shmloader").is_dir():
            raise SystemExit(f"gobatch build: {ROOT} is not a gobatch checkout (pybind/ and cmd/shmloader/ "
                             f"missing); {WHEEL_HINT}")
        go = os.environ.get("GO") or "go"
        cc = os.environ.get("CC") or "cc"
        make = os.environ.get("MAKE") or "make"
        missing = missing_tools(go, cc, make)
        if missing:
            raise SystemExit("gobatch build: cannot build from source, this machine lacks " + "; ".join(missing)
                             + f". Install them, or {WHEEL_HINT}.")
        run([make, "-C", str(ROOT / "pybind"), f"OUT={PKG / '_lib'}"], ROOT)
        # -trimpath: no path of the build machine inside the binary; -s -w: no symbol table or
        # DWARF (a third of its size; Go's own stack traces stay).
        ldflags = f"-s -w -X main.version={self.distribution.get_version()}"
        run([go, "build", "-trimpath", "-ldflags", ldflags, "-o", str(PKG / "_bin" / "shmloader"), "./cmd/shmloader"],
            ROOT, env=dict(os.environ, CGO_ENABLED="1"))
        self.stage_proj_data(PKG / "_data" / "proj")
        super().run()
        if not os.environ.get("GOBATCH_BUNDLE_PROJ_DATA"):  # an earlier wheel build's copy
            for name in PROJ_FILES:
                (Path(self.build_lib) / "gobatch" / "_data" / "proj" / name).unlink(missing_ok=True)

    @staticmethod
    def stage_proj_data(dest: Path) -> None:
        """Copies PROJ's data files into the package when bundling, removes them otherwise."""
        for name in PROJ_FILES:
            (dest / name).unlink(missing_ok=True)
        src = os.environ.get("GOBATCH_BUNDLE_PROJ_DATA")
        if not src:
            return
        for name in PROJ_FILES:
            if not (Path(src) / name).is_file():
                raise SystemExit(f"gobatch build: GOBATCH_BUNDLE_PROJ_DATA={src}: no {name} there")
            shutil.copy2(Path(src) / name, dest / name)


class BinaryDistribution(Distribution):
    """The wheel holds a native library and binary: tag it for this platform."""

    def has_ext_modules(self):
        return True


class PlatformWheel(bdist_wheel):
    """py3-none-<platform>: the package runs on any Python 3 (ctypes and a child process, no
    extension module), but only on this platform."""

    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


setup(cmdclass={"build_py": BuildNative, "bdist_wheel": PlatformWheel}, distclass=BinaryDistribution)
