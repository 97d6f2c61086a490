"""`make bench`: runs every gobatch benchmark in one go and writes benchmarks/README.md.

Each benchmark measures its own baseline in the same run on the same data (the machine is
shared and noisy: compare ratios, not absolute times). The README gets, for every part, the
exact command and its output, plus the machine it ran on.

Usage: python benchmarks/run_all.py [--quick] [--only NAME[,NAME]] [--no-readme]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable

# name -> (title, full command, quick command, what it compares)
PARTS: dict[str, tuple[str, list[str], list[str], str]] = {
    "ring-go": (
        "Ring handoff latency and throughput (Go, across processes)",
        ["go", "run", "./benchmarks/go"],
        ["go", "run", "./benchmarks/go", "-quick"],
        "consumer in one process, producer in another over a memfd ring; latency baseline: a bare "
        "futex handoff in a shared page; throughput roofline: the same memcpy without the ring.",
    ),
    "ring-python": (
        "Synthetic 30 MB batches into Python (gobatch vs DataLoader vs Pipe+pickle)",
        [PY, "benchmarks/ring_bench.py"],
        [PY, "benchmarks/ring_bench.py", "--quick"],
        "the same synthetic batches through gobatch.Loader, a PyTorch DataLoader (num_workers 0, 1, 2) "
        "and multiprocessing.Pipe with pickle; roofline: a numpy copy of one batch.",
    ),
    "blosc": (
        "Blosc / Blosc2 chunk decoding, pure Go vs c-blosc (one core each)",
        [PY, "benchmarks/blosc/bench.py"],
        [PY, "benchmarks/blosc/bench.py", "--samples", "3", "--rounds", "1"],
        "readers/blosc against the C library that numcodecs / blosc2 ship, on the same chunks.",
    ),
    "zarr": (
        "Zarr decode throughput per core (Go reader vs zarr-python vs tensorstore)",
        [PY, "benchmarks/zarr_decode.py"],
        [PY, "benchmarks/zarr_decode.py", "--repeat", "2", "--scale", "0.5"],
        "the same arrays read whole by `shmloader read`'s reader, zarr-python (numcodecs, one "
        "Blosc thread) and tensorstore.",
    ),
    "nowcast": (
        "End to end: nowcast-ref (docs/WORKLOAD.md), gobatch vs DataLoader + xarray",
        [PY, "benchmarks/nowcast_bench.py", "--days", "4", "--data", "data/nowcast-d4"],
        [PY, "benchmarks/nowcast_bench.py", "--quick"],
        "gobatch.Loader over presets/nowcast.toml against a DataLoader over an xarray Dataset "
        "sampling the same example (lazy and in RAM; num_workers 0, 1, 2), same files, same run.",
    ),
    "layout": (
        "Channel-last satellite store against canonical order (same data, gobatch only)",
        [PY, "benchmarks/layout_bench.py", "--days", "1", "--data", "data/nowcast-d1"],
        [PY, "benchmarks/layout_bench.py", "--quick"],
        "gobatch.Loader over presets/nowcast.toml on nowcast-ref and on a copy whose satellite "
        "array is (time, y, x, channel), layouts alternated round by round; the cache holds "
        "canonical chunks either way (issue 8 asks for at least 0.8x in steady state).",
    ),
    "node": (
        "Node loader against per-rank loaders (2 and 4 local ranks on nowcast-ref)",
        [PY, "benchmarks/node_bench.py", "--days", "1", "--data", "data/nowcast-d1"],
        [PY, "benchmarks/node_bench.py", "--quick"],
        "N trainer processes (ranks of world size N on one node) over presets/nowcast.toml: each "
        "with its own `shmloader run` (per-rank loaders) against one `shmloader serve` for all "
        "(the node loader), and one rank alone as the baseline; loader processes' RSS, CPU s per "
        "batch, batches/s per rank, chunk misses (issue 10 asks for the node loader's RSS at "
        "most 1.2x one rank's).",
    ),
    "epochs": (
        "Later epochs of a per-rank Loader (issue 19): one child across epochs against one per epoch",
        [PY, "benchmarks/epochs_bench.py", "--baseline-commit", "19cc3da", "--days", "2"],
        [PY, "benchmarks/epochs_bench.py", "--baseline-commit", "19cc3da", "--days", "1", "--rounds", "1"],
        "a per-rank gobatch.Loader over presets/nowcast.toml with order = \"epochs\" and the data in "
        "the cache, two epochs in one process: this build (one child, its cache kept) against the "
        "one built from 19cc3da (main before it: a new child, an empty cache, for every epoch), "
        "builds alternated round by round; batches/s and GB/s of each epoch.",
    ),
    "epochs-stream": (
        "Epochs against the stream at the same cache (issue 19), nowcast-ref 8 days",
        [PY, "benchmarks/epochs_stream_bench.py", "--days", "8", "--data", "data/nowcast-large", "--segment-steps", "48"],
        [PY, "benchmarks/epochs_stream_bench.py", "--quick"],
        "presets/nowcast.toml at cache_mb 512 and 1024 (the data about 7x and 3.5x the cache), readers 2: "
        "a whole epoch (order = \"epochs\", the block shuffle) against as many batches of the stream's "
        "locality sampling, orders alternated, and an epoch with 48-step segments; batches/s, chunk misses and segments per batch, "
        "Spearman(position, t0) from the batches' t0 (issue 19 asks for >= 0.8x and |rho| < 0.2).",
    ),
    "wholefield": (
        "Whole-field decode-bound batches (issue 19): gobatch against a loop that only decodes",
        [PY, "benchmarks/wholefield_bench.py"],
        [PY, "benchmarks/wholefield_bench.py", "--quick"],
        "361 x 720 float32 fields, zstd, 8 fields per chunk and 1 field per chunk, batches of 32 whole "
        "examples with order = \"epochs\": delivered MB/s and CPU per GB of each epoch against "
        "`shmloader read --bench` decoding the same chunks on every core (and numcodecs' C zstd), "
        "alternated in one run (issue 19 asks for >= 0.8x).",
    ),
    "archive": (
        "A simulated archive (issue 19): a year of 5-minute steps x 300 sites, planned and opened",
        [PY, "benchmarks/archive_bench.py"],
        [PY, "benchmarks/archive_bench.py", "--quick"],
        "tools/gen_archive.py's metadata-only stores (a few real chunks, the rest the fill value): "
        "`shmloader plan` seconds and peak RSS, a Loader's first batch and its child's peak RSS, "
        "site- and pixel-anchored epochs, against the same over one day (issue 19 asks for "
        "start-up <= 2 s and <= 200 MB of tables).",
    ),
    "objstore": (
        "Object storage against local disk (nowcast-ref larger than the cache)",
        [PY, "benchmarks/objstore_bench.py", "--days", "8", "--data", "data/nowcast-large"],
        [PY, "benchmarks/objstore_bench.py", "--quick"],
        "gobatch.Loader over presets/nowcast.toml with cache_mb 1024 on 8 days of nowcast-ref, from "
        "local disk and through a real S3 server on loopback (versitygw), directly (fetch_depth 8 "
        "and 2) and behind "
        "cmd/faultproxy with 0 and 30 ms per request at several fetch_depth values, methods "
        "alternated in one run (issue 10 asks for >= 0.8x local disk and a first batch <= 1 s).",
    ),
    "ocf": (
        "ocf-data-sampler's PVNetDataset against gobatch on the same YAML (issue 18)",
        [PY, "benchmarks/ocf_bench.py"],
        [PY, "benchmarks/ocf_bench.py", "--quick"],
        "gobatch.Loader on an ocf-data-sampler YAML (order \"epochs\", torch tensors) against "
        "PVNetDataset through PVNet's own DataLoader settings (PVNetDataModule.train_dataloader, "
        "num_workers 0 and 2, its collate function) on the same stores (python/tests/ocf_stores.py), "
        "same run: batches/s, first batch (warm), peak RSS of all processes; in gobatch's cache, "
        "with the satellite 5x cache_mb, the satellite in 7 stores, without a satellite, and "
        "concurrent samples against PVNetConcurrentDataset. A PVNetDataset DataLoader worker can abort as it exits, after "
        "its figures are taken ('terminate called without an active exception', from a C++ library "
        "ocf-data-sampler loads); the trace that follows is that.",
    ),
    "multistore": (
        "Several zarr_paths per source against one store each: time to the first batch (issue 27)",
        [PY, "benchmarks/multistore_bench.py", "--reps", "7"],
        [PY, "benchmarks/multistore_bench.py", "--reps", "2"],
        "an ocf-data-sampler YAML whose satellite is 7 stores, UKV 5 and ECMWF 4 (cut along time from "
        "python/tests/ocf/test_ocf_layout.py's stores) against the same YAML over the uncut stores: "
        "gobatch.Loader to its first batch in a new process, alternated, local disk (issue 27 asks for "
        "within 1 s of one store's).",
    ),
    "mixing": (
        "Epoch orders in OCF's regime: decode amplification against mixing (issue 28)",
        [PY, "benchmarks/mixing_bench.py"],
        [PY, "benchmarks/mixing_bench.py", "--hours", "24", "--resident", "16"],
        "one epoch of an ocf-data-sampler YAML with the satellite 10x the cache per order (the cache "
        "holding everything: the decode-once limit; the block shuffle; segment_steps and "
        "resident_segments variants): batches/s, the satellite's decode amplification, the limiting "
        "stage, distinct t0s per batch against a uniform shuffle's, Spearman(position, t0).",
    ),
    "ocfregime": (
        "OCF's regime on an OCF-shaped archive: the satellite 10x the cache, local disk and S3 (issue 28)",
        [PY, "benchmarks/ocf_regime_bench.py", "--data", "data/ocf-archive"],
        [PY, "benchmarks/ocf_regime_bench.py", "--days", "1", "--rounds", "1", "--epochs", "1", "--seconds", "10"],
        "benchmarks/ocf_archive.py's archive (3 days: the 11-channel int16 satellite in two stores at the "
        "public chunking, 17-channel UKV and ECMWF, Blosc zstd, 24 sites) with cache_mb a tenth of the "
        "satellite: gobatch's epochs from local disk and through a real S3 server on loopback at default "
        "settings, alternated, against PVNetDataset through PVNet's DataLoader and the decode-once loop "
        "(issue 28 asks for >= 30x PVNetDataset, >= 0.8x the loop, S3 >= 0.8x local).",
    ),
    "share": (
        "Several jobs on a node, one decode (issue 28)",
        [PY, "benchmarks/share_bench.py", "--hours", "240", "--rounds", "1", "--epochs", "1"],
        [PY, "benchmarks/share_bench.py", "--hours", "48", "--rounds", "1", "--epochs", "1", "--jobs", "1", "2"],
        "N = 1, 2, 4 jobs at once, each its own process and Loader on the OCF-shaped stores of mixing_bench "
        "(240 h: the satellite 10x the cache), each with its own loader against all from the sharing node "
        "loader (share=), a training step of 0 and 10 ms per batch: each job's batches/s against one job "
        "alone, and the bytes all jobs decoded against one alone's (issue 28 asks for 4 jobs decoding "
        "<= 1.1x one's bytes, each >= 0.9x its solo speed).",
    ),
    "percore": (
        "Per-core efficiency (issue 11): against the tree before it, in cache, larger than the cache, cache bytes, readers, cold first batch",
        [PY, "benchmarks/percore_bench.py", "--baseline-commit", "0d579d4"],
        [PY, "benchmarks/percore_bench.py", "--quick", "--baseline-commit", "0d579d4"],
        "this build's shmloader against the one built from 0d579d4 (main before issue 11), runs "
        "alternated, the trainer copying every batch into its own arrays: (a) in cache (4 days, "
        "cache_mb 4096, random) over a NumPy copy + touch of one batch, CPU per batch; (b) 8 days at "
        "cache_mb 1024, locality sampling with its segments set explicitly; (c) decoded cache bytes; "
        "(d) readers 1 and 2; (e) the first batch with the data's pages dropped from the page cache.",
    ),
}


def machine() -> str:
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    go = subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip()
    load = os.getloadavg()
    return (f"{platform.machine()}, {os.cpu_count()} CPUs ({cpu}), {mem:.0f} GiB RAM, "
            f"Linux {platform.release()}, Python {platform.python_version()}, {go}; "
            f"load average at start {load[0]:.1f}")


def previous_sections(readme: str) -> dict[str, str]:
    """The sections of an earlier README by part title. A section runs from its "## TITLE"
    heading to the next part's: the parts' own output may hold "##" headings of its own."""
    starts = []
    for title, *_ in PARTS.values():
        i = readme.find(f"\n## {title}")
        if i >= 0:
            starts.append((i, title))
    starts.sort()
    out = {}
    for k, (i, title) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(readme)
        out[title] = readme[i + 1:end]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="short runs of every part")
    ap.add_argument("--only", help="comma-separated parts: " + ", ".join(PARTS))
    ap.add_argument("--no-readme", action="store_true", help="print only; leave benchmarks/README.md")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(PARTS)
    for n in names:
        if n not in PARTS:
            ap.error(f"unknown part {n!r}; parts: {', '.join(PARTS)}")

    env = dict(os.environ, PYTHONUNBUFFERED="1")
    mach = machine()
    sections = []
    failed = []
    for n in names:
        title, full, quick, what = PARTS[n]
        cmd = quick if args.quick else full
        shown = " ".join("python" if c == PY else c for c in cmd)
        print(f"\n=== {title}\n$ {shown}", flush=True)
        t = time.monotonic()
        p = subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        secs = time.monotonic() - t
        print(p.stdout, flush=True)
        # The README is committed: a path inside the repository is written relative to it, and
        # the interpreter's own install (a traceback through the standard library) as <python>.
        output = p.stdout.replace(f"{REPO}{os.sep}", "").replace(str(REPO), ".")
        output = output.replace(sys.base_prefix, "<python>")
        status = "" if p.returncode == 0 else f" (FAILED: exit status {p.returncode})"
        if p.returncode != 0:
            failed.append(n)
        sections.append(f"## {title}{status}\n\n{what}\n\n```sh\n{shown}\n```\n\n"
                        f"Output ({secs:.0f} s, {dt.datetime.now().strftime('%Y-%m-%d %H:%M')}):\n\n"
                        f"{output.strip()}\n")
        if n == "nowcast" and (REPO / "benchmarks/out/nowcast_bench.png").exists():
            sections[-1] += "\n(plot: benchmarks/out/nowcast_bench.png, copied to benchmarks/nowcast_bench.png)\n"
            try:
                (REPO / "benchmarks/nowcast_bench.png").write_bytes(
                    (REPO / "benchmarks/out/nowcast_bench.png").read_bytes())
                sections[-1] += "\n![nowcast-ref throughput](nowcast_bench.png)\n"
            except OSError:
                pass

    if not args.no_readme:
        head = (
            "# gobatch benchmarks\n\n"
            "Written by `make bench` (`python benchmarks/run_all.py`"
            + (" --quick" if args.quick else "") + f") on {dt.date.today().isoformat()}.\n\n"
            f"Machine: {mach}.\n\n"
            "Every figure below comes with a baseline measured in the same run on the same data; "
            "this machine is shared and noisy, so read the ratios, not the absolute times.\n"
        )
        readme = REPO / "benchmarks/README.md"
        if args.only and readme.exists():
            # Keep the other parts' sections from the last run; replace those run now.
            old = readme.read_text()
            kept = previous_sections(old)
            fresh = {sec.split("\n", 1)[0][3:].split(" (FAILED")[0]: sec for sec in sections}
            sections = [fresh.get(t) or kept[t] for t, *_ in PARTS.values() if t in fresh or t in kept]
            # One note per rerun part: an earlier note about only these parts is replaced.
            # Hand-written sections between the notes and the first part's section stay as
            # they are (comparisons measured outside make bench, say).
            first = min((old.find(f"\n## {t}") for t in kept if old.find(f"\n## {t}") >= 0), default=len(old))
            preamble, _, handwritten = old[:first].partition("\n## ")
            notes = [p for p in preamble.rstrip().split("\n\n")
                     if not (p.startswith("The parts ") and set(p[len("The parts "):].split(" were rerun")[0].split(", ")) <= set(names))]
            head = "\n\n".join(notes) + (
                f"\n\nThe parts {', '.join(names)} were rerun on {dt.date.today().isoformat()} "
                f"(machine at that time: {mach}).\n")
            if handwritten:
                head += "\n## " + handwritten.rstrip() + "\n"
        readme.write_text(head + "\n" + "\n".join(s.rstrip() + "\n" for s in sections))
        print("wrote benchmarks/README.md")
    if failed:
        print("failed parts: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
