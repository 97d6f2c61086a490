"""The ``gobatch`` command (also ``python -m gobatch``).

    gobatch --version          versions of the package, shmloader, the C library and PROJ
    gobatch doctor             those, and checks of this machine: one line and verdict each
    gobatch shmloader ARGS...  runs the package's shmloader (with the PROJ data it needs)
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from . import _doctor, _native


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["shmloader"]:  # everything after it is shmloader's, --help included
        return run_shmloader(argv[1:])
    parser = argparse.ArgumentParser(prog="gobatch", description="gobatch: versions, machine checks, the packaged shmloader")
    parser.add_argument("--version", action="store_true", help="print the versions of every part and exit")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("doctor", help="print versions and check this machine (exit status 1 when a check fails)")
    sub.add_parser("shmloader", help="run the package's shmloader with the arguments that follow")
    args = parser.parse_args(argv)
    if args.version:
        print("\n".join(_doctor.versions()))
        return 0
    if args.command == "doctor":
        return _doctor.report(sys.stdout)
    parser.print_help()
    return 2


def run_shmloader(args: List[str]) -> int:
    from ._child import shmloader_path

    binary = shmloader_path()
    env = _native.child_env(binary, None)
    os.execve(binary, [binary, *args], dict(os.environ if env is None else env))


if __name__ == "__main__":
    sys.exit(main())
