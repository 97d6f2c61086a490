"""Build of the gobatch package: compiles libgobatch.so (../pybind, with make and the C
compiler) and the shmloader binary (../cmd/shmloader, with go) into gobatch/_lib and gobatch/_bin
before the package files are collected. Needs a gobatch checkout and the local toolchains."""

import os
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PKG = HERE / "gobatch"
# The native parts' package directories must exist when setuptools reads the configuration.
for d in ("_lib", "_bin"):
    (PKG / d).mkdir(exist_ok=True)


def run(cmd, cwd):
    print("gobatch build:", " ".join(str(c) for c in cmd), flush=True)
    try:
        subprocess.run(cmd, cwd=cwd, check=True)
    except FileNotFoundError as e:
        raise SystemExit(f"gobatch build: {cmd[0]} not found ({e}); install it") from None
    except subprocess.CalledProcessError as e:
        raise SystemExit(f"gobatch build: {' '.join(map(str, cmd))} failed with status {e.returncode}") from None


class BuildNative(build_py):
    """Builds the native parts into the source package, then copies the package as usual."""

    def run(self):
        pkg = PKG
        if not (ROOT / "pybind" / "Makefile").is_file() or not (ROOT / "cmd" / "shmloader").is_dir():
            raise SystemExit(f"gobatch build: {ROOT} is not a gobatch checkout (pybind/ and cmd/shmloader/ missing)")
        run([os.environ.get("MAKE", "make"), "-C", str(ROOT / "pybind"), f"OUT={pkg / '_lib'}"], ROOT)
        go = os.environ.get("GO") or shutil.which("go") or "go"
        run([go, "build", "-o", str(pkg / "_bin" / "shmloader"), "./cmd/shmloader"], ROOT)
        super().run()


class BinaryDistribution(Distribution):
    """The wheel holds a native library and binary: tag it for this platform."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildNative}, distclass=BinaryDistribution)
