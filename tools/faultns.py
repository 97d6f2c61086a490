#!/usr/bin/env python3
"""Runs gobatch's fault trials one by one, each in a mount namespace of its own with a private
tmpfs on /dev/shm, and each bounded in time (``make faults``).

A trial that kills a process at an exact protocol state, truncates a segment or squats a name can
leave a segment behind when it fails; in its own namespace that leftover dies with the
namespace instead of reaching the host's /dev/shm or the next trial, and a trial that uses the
default /dev/shm (not GOBATCH_SHM_DIR) sees only its own rings. Inside the namespace the
environment has GOBATCH_PRIVATE_SHM=/dev/shm, so a trial may use /dev/shm itself and check it
is empty afterwards.

    faultns.py go PKG REGEX              each top-level Go test of PKG matching REGEX
    faultns.py pytest PYTHON FILE...     each test id collected from the pytest FILEs
    faultns.py run -- CMD ARG...         one command

The namespace is made with unshare(1): ``unshare --mount`` as root (so that trials can chown to
other uids), ``unshare --map-root-user --mount`` otherwise. Where neither works (a container
without the privilege), the trials run without one and the harness says so. Options:
--timeout S per trial (default 300), --shm-size (default 1g). Exit status 1 if any trial failed or
ran out of time. GOBATCH_FAULT_REPS and the rest of the environment pass through.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[1]
# Mounts the private tmpfs over /dev/shm, then runs the trial in place of the shell.
_INNER = 'mount -t tmpfs -o "size=$0,mode=1777" gobatch-trial /dev/shm && GOBATCH_PRIVATE_SHM=/dev/shm exec "$@"'


def namespace_prefix(shm_size: str) -> Tuple[Optional[List[str]], str]:
    """The command prefix that puts a trial in its own mount namespace, or None (and why not)."""
    tries = [["unshare", "--mount", "--propagation", "private"]] if os.geteuid() == 0 else []
    tries.append(["unshare", "--map-root-user", "--mount", "--propagation", "private"])
    why = ""
    for t in tries:
        probe = t + ["sh", "-c", _INNER, shm_size, "true"]
        try:
            out = subprocess.run(probe, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            why = str(e)
            continue
        if out.returncode == 0:
            return t + ["sh", "-c", _INNER, shm_size], ""
        why = out.stderr.strip() or f"exit status {out.returncode}"
    return None, why


def run_trial(name: str, cmd: Sequence[str], prefix: Optional[List[str]], timeout: float, cwd: Path) -> bool:
    """Runs one trial (its output passes through), killing its whole process group after
    timeout seconds. True when it exited 0."""
    full = (prefix or []) + list(cmd)
    t0 = time.monotonic()
    proc = subprocess.Popen(full, cwd=cwd, start_new_session=True)
    try:
        rc = proc.wait(timeout=timeout)
        verdict = "ok" if rc == 0 else f"FAIL (exit status {rc})"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        rc, verdict = -1, f"FAIL (ran past its {timeout:g} s bound; killed)"
    where = "own mount namespace" if prefix else "no namespace"
    print(f"FAULTNS {name}: {verdict} in {time.monotonic() - t0:.1f} s ({where})", flush=True)
    return rc == 0


def go_trials(pkg: str, regex: str, tmp: Path) -> Tuple[List[Tuple[str, List[str]]], Path]:
    """Builds PKG's test binary once (in tmp) and lists its top-level tests matching regex."""
    binary = tmp / "faults.test"
    subprocess.run(["go", "test", "-c", "-o", str(binary), pkg], cwd=ROOT, check=True)
    out = subprocess.run([str(binary), "-test.list", regex], cwd=ROOT / pkg, capture_output=True, text=True,
                         check=True)
    names = [n for n in out.stdout.split() if n.startswith(("Test", "Example", "Fuzz"))]
    trials = [(f"go {pkg} {n}", [str(binary), "-test.run", f"^{n}$", "-test.count=1", "-test.v"]) for n in names]
    return trials, ROOT / pkg


def pytest_trials(python: str, files: Sequence[str]) -> List[Tuple[str, List[str]]]:
    """The test ids pytest collects from files (run from python/)."""
    out = subprocess.run([python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files],
                         cwd=ROOT / "python", capture_output=True, text=True)
    ids = [line.strip() for line in out.stdout.splitlines() if "::" in line]
    if out.returncode != 0 or not ids:
        sys.stdout.write(out.stdout + out.stderr)
        raise SystemExit(f"faultns: pytest collected no trials from {' '.join(files)}")
    return [(f"pytest {i}", [python, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", i]) for i in ids]


def main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timeout", type=float, default=300, help="seconds one trial may run")
    ap.add_argument("--shm-size", default="1g", help="size of each trial's private /dev/shm")
    ap.add_argument("mode", choices=["go", "pytest", "run"])
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    args = [x for x in a.args if x != "--"] if a.mode == "run" else a.args
    prefix, why = namespace_prefix(a.shm_size)
    if prefix is None:
        print(f"FAULTNS no mount namespace ({why}): the trials share this machine's /dev/shm", flush=True)
    cwd = ROOT
    tmp = tempfile.TemporaryDirectory(prefix="gobatch-faults-")  # the Go test binary; removed at exit
    if a.mode == "go":
        if len(args) != 2:
            ap.error("go PKG REGEX")
        trials, cwd = go_trials(args[0], args[1], Path(tmp.name))
    elif a.mode == "pytest":
        if len(args) < 2:
            ap.error("pytest PYTHON FILE...")
        trials, cwd = pytest_trials(args[0], args[1:]), ROOT / "python"
    else:
        if not args:
            ap.error("run -- CMD ARG...")
        trials = [(" ".join(args), args)]
    failed = [n for n, cmd in trials if not run_trial(n, cmd, prefix, a.timeout, cwd)]
    tmp.cleanup()
    print(f"FAULTNS {len(trials) - len(failed)}/{len(trials)} trials passed", flush=True)
    for n in failed:
        print(f"FAULTNS failed: {n}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
