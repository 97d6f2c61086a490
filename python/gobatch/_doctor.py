"""``python -m gobatch doctor``: what this installation is made of, and whether this machine suits it.

Each check is one :class:`Check` (a verdict, a name and one line of detail); the report prints one
line per check and :func:`main` exits 1 when any check failed (a warning does not fail).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, TextIO, Union

from . import _native

OK, WARN, FAIL = "ok", "warn", "FAIL"
SHM_MIN_BYTES = 1 << 30  # below this a named ring of one nowcast-ref batch per slot (30 MB) soon runs out


@dataclass
class Check:
    verdict: str  # OK, WARN or FAIL
    name: str
    detail: str

    def line(self) -> str:
        return f"{self.verdict:<4}  {self.name}: {self.detail}"


def package_version() -> str:
    from . import __version__

    return __version__


def shmloader_info() -> Dict[str, Any]:
    """``shmloader version --json`` of the binary a Loader would run, plus its ``path``. Raises
    GobatchError (LoaderError) when there is none, OSError/ValueError when it does not run."""
    from ._child import shmloader_path

    path = shmloader_path()
    out = subprocess.run([path, "version", "--json"], env=_native.child_env(path, None),
                         capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise OSError(f"{path} version --json exited with status {out.returncode}: {out.stderr.strip()[-500:]}")
    info = dict(json.loads(out.stdout))
    info["path"] = path
    return info


def try_shmloader_info() -> Union[Dict[str, Any], Exception]:
    """shmloader_info(), or why it failed (the doctor reports every failure as a line)."""
    try:
        return shmloader_info()
    except Exception as e:  # noqa: BLE001
        return e


def check_shmloader(v: Union[Dict[str, Any], Exception]) -> Check:
    if isinstance(v, Exception):
        return Check(FAIL, "shmloader", str(v))
    cgo = v.get("settings", {}).get("CGO_ENABLED", "?")
    return Check(OK, "shmloader", f"{v['version']} ({v['go_version']}, {v['platform']}, cgo {cgo}, "
                                  f"ring layout {v['layout_version']}) at {v['path']}")


def check_clib() -> Check:
    from . import _clib

    try:
        lib = _clib.lib()  # loading checks the ABI against the Python side
    except Exception as e:  # noqa: BLE001
        return Check(FAIL, "C library", str(e))
    return Check(OK, "C library", f"libgobatch.so, ring layout {lib.gb_abi(0)}, at {_clib.library_path()}")


def proj_data_dirs(env: Optional[Dict[str, str]] = None) -> List[Path]:
    """Where a system PROJ looks for proj.db: PROJ_DATA (or PROJ_LIB), else the usual prefixes."""
    env = dict(os.environ) if env is None else env
    given = env.get("PROJ_DATA") or env.get("PROJ_LIB")
    if given:
        return [Path(p) for p in given.split(os.pathsep) if p]
    return [Path("/usr/share/proj"), Path("/usr/local/share/proj")]


def check_proj(v: Union[Dict[str, Any], Exception]) -> Check:
    """PROJ's version (the headers shmloader was built against) and where its library and data are."""
    if isinstance(v, Exception):
        return Check(FAIL, "PROJ", f"unknown, shmloader does not run: {v}")
    version = v.get("proj_version", "?")
    data = _native.proj_data_for(v["path"])
    if data is not None:
        libs = [p for p in _native.bundled_libs() if p.name.startswith("libproj")]
        where = f"library {libs[0]}" if libs else "library missing from gobatch.libs"
        return Check(OK if libs else FAIL, "PROJ", f"{version}, bundled: {where}, data {data}")
    found = [d for d in proj_data_dirs() if (d / "proj.db").is_file()]
    if not found:
        return Check(WARN, "PROJ", f"{version}, system library; no proj.db in {', '.join(map(str, proj_data_dirs()))}: "
                                   "sources with a crs or area will fail (install proj-data, or the wheel)")
    return Check(OK, "PROJ", f"{version}, system library, data {found[0]}")


def check_shm(path: Optional[str] = None) -> Check:
    from ._named import shm_dir

    path = path or shm_dir()
    try:
        st = os.statvfs(path)
    except OSError as e:
        return Check(WARN, "shared memory", f"{path}: {e} (named rings cannot be made; Loader's memfd rings can)")
    total, free = st.f_frsize * st.f_blocks, st.f_frsize * st.f_bavail
    detail = f"{path} {total / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free"
    if total < SHM_MIN_BYTES:
        return Check(WARN, "shared memory", detail + " (under 1 GiB: named rings may not fit; in Docker raise "
                                                     "--shm-size; Loader's memfd rings are not bounded by it)")
    return Check(OK, "shared memory", detail)


def check_memfd() -> Check:
    """A sealable memfd, as shmloader makes for a Loader's ring (shm/shm.go CreateMemfd)."""
    flags = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
    try:
        fd = os.memfd_create("gobatch-doctor", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    except (AttributeError, OSError) as e:
        return Check(FAIL, "memfd sealing", f"memfd_create: {e}")
    try:
        os.ftruncate(fd, 1 << 20)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, flags)
        got = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError as e:
        return Check(FAIL, "memfd sealing", f"F_ADD_SEALS: {e} (Loader refuses unsealed rings)")
    finally:
        os.close(fd)
    if got & flags != flags:
        return Check(FAIL, "memfd sealing", f"seals {got:#x} lack {flags:#x}")
    return Check(OK, "memfd sealing", "memfd_create with F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL works")


def check_torch() -> Check:
    try:
        import torch
    except ImportError:
        return Check(OK, "torch", "not installed (optional: framework='numpy' works; `pip install torch`)")
    except Exception as e:  # noqa: BLE001 - a broken install
        return Check(WARN, "torch", f"import failed: {e}")
    if torch.cuda.is_available():
        return Check(OK, "torch", f"{torch.__version__}, CUDA {torch.version.cuda}, "
                                  f"{torch.cuda.device_count()} device(s): {torch.cuda.get_device_name(0)}")
    return Check(OK, "torch", f"{torch.__version__}, CUDA not available (CPU tensors only)")


def versions() -> List[str]:
    """The lines of ``gobatch --version``: the package, shmloader, the C library, PROJ."""
    lines = [f"gobatch {package_version()} at {_native.PACKAGE}"]
    info = try_shmloader_info()
    for check in (check_shmloader(info), check_clib(), check_proj(info)):
        lines.append(f"{check.name}: {check.detail}")
    return lines


def checks() -> List[Check]:
    info = try_shmloader_info()
    return [Check(OK, "gobatch", f"{package_version()} at {_native.PACKAGE}"), check_shmloader(info), check_clib(),
            check_proj(info), check_shm(), check_memfd(), check_torch()]


def report(out: TextIO) -> int:
    """Prints one line per check, then a verdict; 1 if any check failed."""
    results = checks()
    for c in results:
        print(c.line(), file=out)
    failed = [c.name for c in results if c.verdict == FAIL]
    print(f"verdict: {'FAIL (' + ', '.join(failed) + ')' if failed else 'ok'}", file=out)
    return 1 if failed else 0


__all__ = ["Check", "checks", "report", "versions"]
