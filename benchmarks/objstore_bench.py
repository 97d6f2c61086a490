#!/usr/bin/env python3
"""Object storage against local disk: nowcast-ref larger than the cache, one run.

The same files (tools/gen_nowcast.py, ``--days`` of data, decoded several times ``cache_mb``)
are read by ``gobatch.Loader`` over presets/nowcast.toml in four ways, in one run:

- from local disk (the baseline);
- through S3: versitygw (a real S3 server, SigV4) on 127.0.0.1 serving the same directory,
  stores as ``s3://nowcast/...``, with the default settings (each source's reads in flight
  adapted below fetch_depth's default bound, sampler/window.go) and with fetch_depth 2 (one per
  core here: without latency, more reads in flight only cost the server, which shares the cores);
- through S3 behind internal/faultproxy (cmd/faultproxy) adding no delay, which counts the
  requests and the bytes the loader fetched;
- through S3 behind the proxy adding ``--latency-ms`` (30) to every request, with the default
  settings and at several ``fetch_depth`` values (the bound on the chunk reads each source keeps
  in flight).

For each: batches/s, time to the first batch (from constructing the Loader: opening the
stores, reading metadata and coordinates count), CPU seconds per batch (the trainer and its
child processes: shmloader, and here also versitygw and the proxy), and through the proxy the
requests per batch, the bytes fetched per byte delivered and the most requests in flight.
Rounds alternate the methods (``--rounds``); the table shows each method's median round and
the median of its per-round ratios to local disk.

Usage::

    python benchmarks/objstore_bench.py --quick    # 1 day of data, short phases
    python benchmarks/objstore_bench.py            # 8 days (7.2 GB float32 decoded), cache_mb 1024
    python benchmarks/objstore_bench.py --methods local,s3,latency --depths default --rounds 1
                                                   # the issue's figures only: defaults, loopback and 30 ms
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import tomllib
import urllib.request
import contextlib
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from baselines import MB, REPO, Result, ensure_dataset, measure, shown  # noqa: E402

sys.path.insert(0, str(REPO / "python" / "tests"))
import s3_server  # noqa: E402  the test suite's versitygw helper

OUT = REPO / "benchmarks" / "out"
PRESET = REPO / "presets" / "nowcast.toml"
BUCKET = "nowcast"


def config(cache_mb: int, seed: int, fetch_depth: int | None) -> dict[str, Any]:
    """The preset, an unbounded stream, the anchor's cache budget, each source's fetch_depth."""
    cfg = tomllib.loads(PRESET.read_text())
    cfg.setdefault("batch", {}).update(batches=0, seed=seed)
    for s in cfg["source"]:
        if s.get("anchor"):
            s["cache_mb"] = cache_mb
        if fetch_depth is not None:
            s["fetch_depth"] = fetch_depth
    return cfg


@contextmanager
def proxy(target: str, latency_ms: float) -> Iterator[str]:
    """cmd/faultproxy in front of target, adding latency_ms per request; yields its URL."""
    exe = REPO / "bin" / "faultproxy"
    if not exe.exists():
        raise RuntimeError(f"{shown(exe)} is missing: run `make build`")
    p = subprocess.Popen([str(exe), "--target", target, "--delay", f"{latency_ms}ms"], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        line = p.stdout.readline().split()
        if len(line) != 2 or line[0] != "listening":
            raise RuntimeError(f"faultproxy did not start: {line}")
        yield line[1]
    finally:
        p.terminate()
        p.wait()


def proxy_stats(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/.faultproxy/stats", timeout=5) as r:
        return dict(json.load(r))


def run_one(name: str, cfg: dict[str, Any], data_root: str, env: dict[str, str], args: argparse.Namespace,
            proxy_url: str | None = None) -> dict[str, Any]:
    """One measurement: a Loader (stores under data_root, the S3 environment env, through the
    proxy at proxy_url when given, whose counters it reports)."""
    import gobatch

    saved = {k: os.environ.get(k) for k in (*env, *s3_server.ENV_UNSET)}
    os.environ.update(env)
    for k in s3_server.ENV_UNSET:
        os.environ.pop(k, None)
    before = proxy_stats(proxy_url) if proxy_url else None
    stats: dict[str, Any] = {}
    # The proxy's requests in flight over time, sampled every 0.2 s from the Loader's start.
    samples: list[tuple[float, int]] = []
    stop = threading.Event()

    def sample() -> None:
        t0 = time.monotonic()
        while not stop.wait(0.2):
            try:
                samples.append((time.monotonic() - t0, int(proxy_stats(proxy_url)["InFlight"])))
            except (OSError, KeyError, ValueError):
                pass
    sampler = threading.Thread(target=sample, daemon=True) if proxy_url else None
    if sampler is not None:
        sampler.start()

    def close(loader: Any) -> None:
        try:
            stats.update(loader.stats())
        finally:
            loader.close()

    try:
        r = measure(name, lambda: gobatch.Loader(cfg, framework="numpy", data_root=data_root, readers=args.readers),
                    args.batches, args.seconds, close=close)
    finally:
        stop.set()
        if sampler is not None:
            sampler.join()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    out: dict[str, Any] = {"result": r.as_dict(), "cache_hit_rate": stats.get("cache_hit_rate")}
    if proxy_url and before is not None:
        after = proxy_stats(proxy_url)
        delivered = r.batches + 3  # the first batch and two warm-up batches come before the phase
        out.update(requests=after["Requests"] - before["Requests"], bytes=after["Bytes"] - before["Bytes"],
                   max_in_flight=after["MaxInFlight"], delivered_batches=delivered)
        if samples:
            counts = sorted(n for _, n in samples)
            by_second: dict[int, list[int]] = {}
            for t, n in samples:
                by_second.setdefault(int(t), []).append(n)
            out.update(in_flight_median=statistics.median(counts), in_flight_p90=counts[int(0.9 * (len(counts) - 1))],
                       in_flight_by_second=[round(statistics.mean(v), 1) for _, v in sorted(by_second.items())])
    return out


def summarise(rounds: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per method: the round with the median batches/s (its counters), the median of the
    per-round ratios to local disk (the same round's: the machine's load changes between
    rounds), the median first batch, and every round's batches/s."""
    base = [d["result"]["batches_per_s"] for d in rounds["local disk"]]
    out = {}
    for name, rs in rounds.items():
        ranked = sorted(rs, key=lambda d: d["result"]["batches_per_s"])
        row = dict(ranked[len(ranked) // 2])
        row["ratio"] = statistics.median(d["result"]["batches_per_s"] / b for d, b in zip(rs, base))
        row["first"] = statistics.median(d["result"]["first_batch_s"] for d in rs)
        row["rounds"] = " / ".join(f"{d['result']['batches_per_s']:.2f}" for d in rs)
        out[name] = row
    return out


def table(rows: dict[str, dict[str, Any]]) -> str:
    out = ["| method | batches/s | x local disk | first batch s | CPU s/batch | requests/batch | "
           "fetched / delivered bytes | most in flight | in flight over time, median / p90 | cache hit rate | "
           "rounds batches/s |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|"]
    for name, d in rows.items():
        r = d["result"]
        n = d.get("delivered_batches")
        req = f"{d['requests'] / n:.1f}" if n else ""
        ratio = f"{d['bytes'] / (n * r['batch_bytes']):.3f}" if n and r["batch_bytes"] else ""
        hit = d.get("cache_hit_rate")
        over_time = f"{d['in_flight_median']:g} / {d['in_flight_p90']}" if "in_flight_median" in d else ""
        out.append(f"| {name} | {r['batches_per_s']:.2f} | {d['ratio']:.2f} | {d['first']:.2f} | "
                   f"{r['cpu_s_per_batch']:.3f} | {req} | {ratio} | {d.get('max_in_flight', '')} | "
                   f"{over_time} | "
                   f"{'' if hit is None else format(hit, '.2f')} | {d['rounds']} |")
    return "\n".join(out)


def summary(rows: dict[str, dict[str, Any]], s3row: dict[str, Any] | None, slow: dict[str, dict[str, Any]],
            latency_ms: float) -> str:
    """The figures the issue asks for, from the methods that ran."""
    out = []
    if s3row is not None:
        out.append(f"S3 loopback / local disk: {s3row['ratio']:.2f}x batches/s (target >= 0.8x); first batch through "
                   f"S3 {s3row['first']:.2f} s (target <= 1 s).")
    if slow:
        best = max(slow, key=lambda n: slow[n]["ratio"])
        line = (f"With {latency_ms:g} ms per request the best fetch_depth measured is {best.split('fetch_depth ')[1]}: "
                f"{slow[best]['result']['batches_per_s']:.2f} batches/s, {slow[best]['ratio']:.2f}x local disk")
        if s3row is not None:
            line += f", {slow[best]['ratio'] / s3row['ratio']:.2f}x S3 loopback"
        via = rows.get("S3 loopback via proxy, 0 ms")
        if via is not None:
            line += f" and {slow[best]['ratio'] / via['ratio']:.2f}x the same proxy without delay"
        out.append(line + f"; first batch {slow[best]['first']:.2f} s.")
    return " ".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--quick", action="store_true", help="1 day of data, short phases, one round")
    ap.add_argument("--data", help="dataset dir (default data/nowcast-large, or data/nowcast-d1 with --quick)")
    ap.add_argument("--days", type=float, help="days of data (default 8; 1 with --quick)")
    ap.add_argument("--cache-mb", type=int, help="cache budget (default 1024; 256 with --quick, so that 1 day is larger)")
    ap.add_argument("--readers", type=int, default=2)
    ap.add_argument("--latency-ms", type=float, default=30.0)
    ap.add_argument("--depths", default="default,2,8,32",
                    help="fetch_depth values under latency ('default': not set, the adaptive window)")
    ap.add_argument("--methods", default="local,s3,s3-depth2,proxy,latency",
                    help="the methods to run, comma-separated: local (local disk, always run: the baseline), s3 "
                         "(S3 loopback), s3-depth2 (fetch_depth 2), proxy (via the proxy, 0 ms), latency "
                         "(--latency-ms at each of --depths)")
    ap.add_argument("--rounds", type=int, help="rounds alternating the methods (default 3; 1 with --quick)")
    ap.add_argument("--batches", type=int, help="max batches per measurement (default 300)")
    ap.add_argument("--seconds", type=float, help="max seconds per measurement (default 15)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    q = args.quick
    args.days = args.days or (1.0 if q else 8.0)
    args.data = args.data or str(REPO / "data" / ("nowcast-d1" if q else "nowcast-large"))
    args.rounds = args.rounds or (1 if q else 3)
    args.cache_mb = args.cache_mb or (256 if q else 1024)
    args.batches = args.batches or (60 if q else 300)
    args.seconds = args.seconds or (5.0 if q else 15.0)
    depths = [None if d == "default" else int(d) for d in args.depths.split(",")]

    print(f"objstore_bench: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
          f"{' (quick)' if q else ''}", flush=True)
    load0 = os.getloadavg()[0]
    data = Path(args.data)
    info = ensure_dataset(data, args.days)
    sat = info["stores"]["satellite.zarr"]
    rounds: dict[str, list[dict[str, Any]]] = {}
    t_start = time.monotonic()
    with s3_server.serve({BUCKET: data}) as s3:
        # (name, config, data root, through S3, the proxy's delay in ms or None for none), by --methods key
        chosen = set(args.methods.split(",")) | {"local"}
        methods: list[tuple[str, dict[str, Any], str, bool, float | None]] = [m for key, m in [
            ("local", ("local disk", config(args.cache_mb, args.seed, None), str(data), False, None)),
            ("s3", ("S3 loopback", config(args.cache_mb, args.seed, None), f"s3://{BUCKET}", True, None)),
            ("s3-depth2", ("S3 loopback, fetch_depth 2", config(args.cache_mb, args.seed, 2), f"s3://{BUCKET}", True,
                           None)),
            ("proxy", ("S3 loopback via proxy, 0 ms", config(args.cache_mb, args.seed, None), f"s3://{BUCKET}", True,
                       0.0)),
        ] if key in chosen]
        for depth in depths if "latency" in chosen else []:
            methods.append((f"S3 + {args.latency_ms:g} ms/request, fetch_depth {depth or 'default'}",
                            config(args.cache_mb, args.seed, depth), f"s3://{BUCKET}", True, args.latency_ms))
        for k in range(args.rounds):
            for name, cfg, root, remote, delay in methods:
                print(f"  round {k + 1}: {name} ...", flush=True)
                with contextlib.ExitStack() as stack:
                    # A proxy of its own per measurement: its counters (the most in flight) are the run's.
                    purl = stack.enter_context(proxy(s3, delay)) if delay is not None else None
                    env = s3_server.env_for(purl or s3) if remote else {}
                    d = run_one(name, cfg, root, env, args, purl)
                rounds.setdefault(name, []).append(d)
                r = d["result"]
                print(f"    {r['batches_per_s']:.2f} batches/s, first batch {r['first_batch_s']:.2f} s"
                      + (f", {d['requests']} requests for {d['delivered_batches']} batches, at most "
                         f"{d['max_in_flight']} in flight" if purl else "")
                      + (f"; in flight by second from the start (mean of 0.2 s samples): "
                         f"{' '.join(format(v, 'g') for v in d['in_flight_by_second'])}"
                         if d.get("in_flight_by_second") else ""), flush=True)
    rows = summarise(rounds)
    s3row = rows.get("S3 loopback")
    slow = {n: d for n, d in rows.items() if "ms/request" in n}
    lines = ["# Object storage against local disk (nowcast-ref larger than the cache)", "",
             f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}{' (--quick)' if q else ''}; "
             f"load average at the start {load0:.1f}; {time.monotonic() - t_start:.0f} s.",
             f"Data: {info['params']['days']:g} days, satellite {sat['raw_bytes'] / 1e9:.1f} GB int16 / "
             f"{sat['float32_bytes'] / 1e9:.1f} GB float32 decoded; cache_mb {args.cache_mb} (locality sampling); "
             f"readers {args.readers}. S3: versitygw v1.8.0 (posix backend) on 127.0.0.1 serving the same "
             f"directory; the proxy is cmd/faultproxy, a fresh one per measurement (most in flight: the most requests it held at once). Each measurement: at most {args.batches} batches or "
             f"{args.seconds:g} s after the first batch and 2 warm-up batches; {args.rounds} round(s), methods "
             f"alternated, the median round shown. requests/batch and fetched/delivered count everything the "
             f"loader fetched through the proxy from its start (metadata and coordinates included) over the "
             f"batches it delivered; delivered bytes are whole batches ({rows['local disk']['result']['batch_bytes'] / MB:.1f} MB). "
             f"x local disk: the median over the rounds of the ratio to the same round's local disk. CPU s/batch: "
             f"every process of the run (the trainer, shmloader, and versitygw and the proxies, which share the "
             f"same cores here).", "",
             table(rows), "", summary(rows, s3row, slow, args.latency_ms), ""]
    md = "\n".join(lines)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "objstore_bench.md").write_text(md + "\n")
    (out / "objstore_bench.json").write_text(json.dumps({"args": vars(args), "dataset": info, "rounds": rounds},
                                                        indent=1, default=str) + "\n")
    print()
    print(md)
    print(f"wrote {shown(out / 'objstore_bench.md')}, .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
