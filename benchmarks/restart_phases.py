"""Where the time of a Loader child's restart goes (issue 21: restart within 1 s under load).

A Loader reads nowcast-ref batches (Zarr sources, tools/gen_nowcast.py) while its shmloader
child is killed with SIGKILL at a random moment, again and again; each kill is the first
restart of its window (restart_window_s is short and the kills are spaced out), so each is the
restart a training job sees. Per kill it records, on one monotonic clock:

    kill -> detected          the Supervisor is called (the consumer found the death)
    detected -> spawn         the wait before the restart (restart_backoff_s)
    spawn                     fork + exec (subprocess.Popen returns once the exec succeeded)
    exec -> Go init           loading the binary and its shared libraries, the Go runtime
                              (the remainder: total minus every other phase)
    Go init -> sources        opening the Zarr sources (shmloader's "sources ready" since_exec)
    sources -> joined         joining the ring ("started")
    joined -> batch filled    the first batch the new child fills (its first "fill")
    total                     kill -> the consumer holds the first batch the new child made

The Go phases come from the child's own debug log (JSON, since_exec: from its package
initialisation). Two builds are compared under the same load by running this script
alternately for each, a few kills at a time, with --python (the gobatch package's directory
of one build) and --binary, every row added to one --json file under --label; --report FILE
prints the distributions. --burn N adds N busy-looping processes.

    for i in 1 2 3 4 5; do for b in before after; do
        .venv/bin/python benchmarks/restart_phases.py --data /tmp/nowcast --kills 10 \
            --python $b/python --binary $b/bin/shmloader --framework torch --label $b --json rows.json
    done; done
    .venv/bin/python benchmarks/restart_phases.py --report rows.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import signal
import statistics
import sys
import threading
import time
import tomllib
from pathlib import Path
from typing import Any, Dict, List, Optional

REPO = Path(__file__).resolve().parents[1]
_python = sys.argv[sys.argv.index("--python") + 1] if "--python" in sys.argv else str(REPO / "python")
sys.path.insert(0, _python)

import gobatch  # noqa: E402
from gobatch import _supervise  # noqa: E402

PHASES = ["kill -> detected", "detected -> spawn", "spawn", "exec -> Go init", "Go init -> sources",
          "sources -> joined", "joined -> batch filled", "total"]


def _burn() -> None:
    while True:
        pass


class Timed:
    """Records, per restart, when the Supervisor was called, when it spawned, when the spawn
    returned and the new pid."""

    def __init__(self) -> None:
        self.events: List[Dict[str, float]] = []
        orig = _supervise.Supervisor.restart

        def restart(sup: Any, pid: int, code: Optional[int], cause: Optional[str] = None) -> int:
            ev: Dict[str, float] = {"seen": time.monotonic()}
            spawn = sup._spawn
            if not getattr(spawn, "_timed", False):
                def timed() -> int:
                    ev_now = self.events[-1]
                    ev_now["spawn"] = time.monotonic()
                    new = spawn()
                    ev_now["spawned"] = time.monotonic()
                    return new
                timed._timed = True  # type: ignore[attr-defined]
                sup._spawn = timed
            self.events.append(ev)
            new_pid = orig(sup, pid, code, cause)
            ev["pid"] = new_pid
            return new_pid

        _supervise.Supervisor.restart = restart  # type: ignore[method-assign]


def _go_log(loader: gobatch.Loader) -> Dict[int, Dict[str, float]]:
    """Per pid: since_exec (s) of "sources ready", "started" and the end of its first fill."""
    f = loader._stderr
    assert f is not None
    f.flush()
    f.seek(0)
    out: Dict[int, Dict[str, float]] = {}
    for line in f.read().decode("utf-8", "replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        pid, msg = rec.get("pid"), rec.get("message")
        d = out.setdefault(pid, {})
        if msg == "sources ready":
            d.setdefault("sources", rec["since_exec"] / 1e3)
        elif msg == "started":
            d.setdefault("joined", rec["since_exec"] / 1e3)
        elif msg == "fill":
            d.setdefault("filled", rec["since_exec"] / 1e3)
    return out


def run(binary: str, cfg: Dict[str, Any], data: Path, framework: str, kills: int, rng: random.Random,
        timed: Timed) -> List[Dict[str, float]]:
    """One Loader, ``kills`` kills; the phases of each restart (ms)."""
    got: List[float] = []
    stop = threading.Event()
    err: List[BaseException] = []
    with gobatch.Loader(cfg, framework=framework, data_root=data, shmloader=binary, restarts=2,
                        restart_window_s=0.5, extra_args=["--log-level", "debug", "--log-format", "json"]) as L:

        def consume() -> None:
            try:
                for _ in L:
                    got.append(time.monotonic())
                    if stop.is_set():
                        return
            except BaseException as e:  # noqa: BLE001
                err.append(e)

        t = threading.Thread(target=consume, daemon=True)
        t.start()
        while len(got) < 3 and not err:
            time.sleep(0.01)
        first = len(timed.events)
        kill_times: List[float] = []
        for _ in range(kills):
            time.sleep(rng.uniform(0.0, 0.3))
            pid = L.pid
            assert pid is not None
            kill_times.append(time.monotonic())
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while (len(timed.events) - first < len(kill_times) or "pid" not in timed.events[-1]
                   or sum(1 for x in got if x > timed.events[-1]["spawned"]) < 3) and not err:
                if time.monotonic() > deadline:
                    raise RuntimeError("no recovery within 30 s")
                time.sleep(0.005)
            time.sleep(0.6)  # past restart_window_s: the next kill is a first restart again
        stop.set()
        t.join(30)
        if err:
            raise err[0]
        logs = _go_log(L)
    rows = []
    for t_kill, ev in zip(kill_times, timed.events[first:]):
        g = logs.get(int(ev["pid"]), {})
        t_first = min(x for x in got if x > ev["spawned"])
        row = {"kill -> detected": ev["seen"] - t_kill, "detected -> spawn": ev["spawn"] - ev["seen"],
               "spawn": ev["spawned"] - ev["spawn"], "total": t_first - t_kill}
        if {"sources", "joined", "filled"} <= g.keys():
            row["Go init -> sources"] = g["sources"]
            row["sources -> joined"] = g["joined"] - g["sources"]
            row["joined -> batch filled"] = g["filled"] - g["joined"]
            row["exec -> Go init"] = (t_first - ev["spawned"]) - g["filled"]
        rows.append({k: 1000 * v for k, v in row.items()})
    return rows


def summary(rows: List[Dict[str, float]]) -> str:
    lines = [f"  {'phase':<24} {'median':>8} {'p90':>8} {'max':>8}  (ms, {len(rows)} restarts)"]
    for p in PHASES:
        xs = sorted(r[p] for r in rows if p in r)
        if not xs:
            continue
        p90 = xs[min(len(xs) - 1, int(round(0.9 * (len(xs) - 1))))]
        lines.append(f"  {p:<24} {statistics.median(xs):8.1f} {p90:8.1f} {xs[-1]:8.1f}")
    over = sum(1 for r in rows if r["total"] > 1000)
    loads = [r["load"] for r in rows if "load" in r]
    lines.append(f"  over 1 s: {over} of {len(rows)}" + (f"; load {min(loads):.1f} .. {max(loads):.1f}" if loads else ""))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--report", type=Path, help="print the distributions of a --json file, and exit")
    ap.add_argument("--data", type=Path, help="nowcast-ref data (generated there if missing)")
    ap.add_argument("--python", help="the directory holding the gobatch package to measure")
    ap.add_argument("--binary", help="shmloader binary")
    ap.add_argument("--kills", type=int, default=10, help="kills (one Loader)")
    ap.add_argument("--framework", default="numpy", choices=["numpy", "torch"])
    ap.add_argument("--burn", type=int, default=0, help="busy-looping processes alongside")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--label", default="run")
    ap.add_argument("--json", type=Path, help="add every row here, under --label")
    a = ap.parse_args()
    if a.report is not None:
        rows = json.loads(a.report.read_text())
        for label, r in rows.items():
            print(f"{label}:")
            print(summary(r))
        return
    if a.data is None or a.binary is None:
        ap.error("--data and --binary are required")
    if not (a.data / "satellite.zarr").exists():
        sys.path.insert(0, str(REPO / "tools"))
        import gen_nowcast
        gen_nowcast.generate(a.data, quiet=True, days=0.5, pixels=256, seed=11)
    cfg = tomllib.loads((REPO / "presets" / "nowcast.toml").read_text())
    timed = Timed()
    rng = random.Random(a.seed)
    burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(a.burn)]
    for p in burners:
        p.start()
    try:
        got = run(a.binary, cfg, a.data, a.framework, a.kills, rng, timed)
    finally:
        for p in burners:
            p.terminate()
    load = os.getloadavg()[0]
    for r in got:
        r["load"] = load
    print(f"{a.label} ({a.framework}, burn {a.burn}, load {load:.1f}):")
    print(summary(got))
    if a.json:
        rows = json.loads(a.json.read_text()) if a.json.exists() else {}
        rows.setdefault(a.label, []).extend(got)
        a.json.write_text(json.dumps(rows))


if __name__ == "__main__":
    main()
