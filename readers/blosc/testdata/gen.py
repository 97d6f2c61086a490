#!/usr/bin/env python3
"""Generate the Blosc test fixtures for readers/blosc.

Run from the repository root:

    .venv/bin/python readers/blosc/testdata/gen.py

It writes readers/blosc/testdata/blosc1.json.gz and blosc2.json.gz. Each holds a list of
cases: the compressed bytes (base64), the expected decoded bytes (zlib + base64,
with their SHA-256) and the parameters that produced them. Blosc1 chunks come from
numcodecs (its vendored c-blosc), Blosc2 chunks from python-blosc2, including the
exact call ocf_blosc2.Blosc2.encode makes. Every case is checked here with the
C decoder before it is written, so the fixture holds what c-blosc itself decodes.
Cases with "error" set are inputs the Go decoder must refuse; the value is a
substring the error message must contain.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import pathlib
import zlib

import blosc2
import numcodecs
import numpy as np
import ocf_blosc2
from numcodecs import blosc

HERE = pathlib.Path(__file__).resolve().parent
RNG_SEED = 20261201


class Data(bytes):
    """Bytes that remember how pattern() made them (kind, nbytes, typesize, seed)."""

    gen: tuple


def pattern(kind: str, nbytes: int, typesize: int, seed: int) -> Data:
    d = Data(_pattern(kind, nbytes, typesize, seed))
    d.gen = (kind, nbytes, typesize, seed)
    return d


def _pattern(kind: str, nbytes: int, typesize: int, seed: int) -> bytes:
    """Test data of nbytes bytes, element-structured by typesize.

    "ramp" is reproduced bit for bit by rampPattern in the Go tests, so those cases
    need not store their expected bytes: element i is v = 30000 + triangle(i) +
    noise(i), written little-endian over typesize bytes (byte j holds bits
    8*(j%8).. of v, XORed with 17*(j//8) & 0xFF); the data is cut to nbytes.
    """
    if kind == "zeros":
        return bytes(nbytes)
    if kind == "random":
        return np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8).tobytes()
    if kind == "const":
        return (bytes([7, 1, 250, 3, 9, 0, 4, 2]) * (nbytes // 8 + 1))[:nbytes]
    if kind == "ramp":
        n = nbytes // typesize + 1
        i = np.arange(n, dtype=np.uint64)
        t = i % np.uint64(400)
        tri = np.where(t < 200, t, np.uint64(400) - t)
        h = ((i + np.uint64(seed)) * np.uint64(2654435761)) & np.uint64(0xFFFFFFFF)
        v = np.uint64(30000) + tri + ((h >> np.uint64(28)) & np.uint64(3))
        out = np.empty((n, typesize), dtype=np.uint8)
        for j in range(typesize):
            b = ((v >> np.uint64(8 * (j % 8))) & np.uint64(0xFF)).astype(np.uint8)
            out[:, j] = b ^ np.uint8((17 * (j // 8)) & 0xFF)
        return out.tobytes()[:nbytes]
    raise ValueError(kind)


REPRODUCIBLE = ("ramp", "zeros", "const")


def case(name: str, fmt: str, compressed: bytes, expected: bytes | None, params: dict,
         error: str | None = None) -> dict:
    """One fixture; data made by pattern() of a reproducible kind is stored as its recipe."""
    gen = getattr(expected, "gen", None)
    c = {"name": name, "format": fmt, "params": params, "compressed": base64.b64encode(compressed).decode()}
    if expected is not None:
        c["expected_len"] = len(expected)
        c["expected_sha256"] = hashlib.sha256(expected).hexdigest()
        if gen is not None and gen[0] in REPRODUCIBLE:
            c["pattern"] = {"kind": gen[0], "nbytes": gen[1], "typesize": gen[2], "seed": gen[3]}
        else:
            c["expected_zlib"] = base64.b64encode(zlib.compress(expected, 9)).decode()
    if error is not None:
        c["error"] = error
    return c


def blosc1_cases() -> list[dict]:
    cases = []
    seed = RNG_SEED

    def add(name, data, cname, clevel, shuffle, typesize, blocksize=0):
        comp = blosc.compress(data, cname.encode(), clevel, shuffle, blocksize, typesize=typesize)
        if data:  # numcodecs refuses to decompress an empty chunk; c-blosc returns 0 bytes
            back = blosc.decompress(comp)
            assert bytes(back) == data, name
        else:
            assert int.from_bytes(comp[4:8], "little") == 0
        p = {"cname": cname, "clevel": clevel, "shuffle": shuffle, "typesize": typesize,
             "blocksize": blocksize, "nbytes": len(data), "header": comp[:16].hex()}
        cases.append(case(name, "blosc1", comp, data, p))

    codecs = ["blosclz", "lz4", "lz4hc", "zlib", "zstd"]
    typesizes = [1, 2, 3, 4, 7, 8, 16, 17, 33, 255]
    # Every codec x shuffle x typesize; several blocks (2048 bytes) plus a leftover
    # block, sizes not a multiple of the typesize, so split and unsplit blocks,
    # leftovers and the bitshuffle tail are all exercised.
    for cname in codecs:
        for shuffle in (0, 1, 2):
            for ts in typesizes:
                seed += 1
                nbytes = 9000 + ts // 2
                add(f"{cname}-s{shuffle}-ts{ts}", pattern("ramp", nbytes, ts, seed), cname, 5, shuffle, ts, 2048)
    # Default (automatic) block size, larger chunks, several clevels.
    for cname in codecs:
        for clevel in (1, 5, 9):
            for ts, nb in ((2, 300_002), (4, 262_144 + 12), (8, 100_000)):
                if clevel != 5 and cname not in ("blosclz", "lz4"):
                    continue
                seed += 1
                add(f"{cname}-c{clevel}-ts{ts}-auto", pattern("ramp", nb, ts, seed), cname, clevel, 1, ts)
        seed += 1
        add(f"{cname}-bitshuffle-ts2-auto", pattern("ramp", 200_000, 2, seed), cname, 5, 2, 2)
        add(f"{cname}-autoshuffle-ts1", pattern("ramp", 50_001, 1, seed), cname, 5, -1, 1)
        add(f"{cname}-autoshuffle-ts4", pattern("ramp", 50_000, 4, seed), cname, 5, -1, 4)
    # Incompressible data: streams stored raw inside a compressed chunk, or a
    # whole memcpyed chunk.
    for cname in codecs:
        for shuffle in (0, 1, 2):
            seed += 1
            add(f"{cname}-random-s{shuffle}", pattern("random", 5000, 4, seed), cname, 5, shuffle, 4, 1024)
        seed += 1
        add(f"{cname}-zeros", pattern("zeros", 100_000, 4, seed), cname, 5, 1, 4)
        add(f"{cname}-const", pattern("const", 70_001, 8, seed), cname, 9, 1, 8, 4096)
    # Repeats far apart: BloscLZ's 16-bit far-distance matches (distance > 8191),
    # and long matches with length extension bytes.
    for dist in (9000, 30000, 60000):
        seed += 1
        seg = pattern("random", dist, 1, seed)
        data = seg + seg[: 70_000 - dist] if dist < 70_000 else seg
        for cname in ("blosclz", "lz4"):
            add(f"{cname}-far-{dist}", data, cname, 9, 0, 1, 65536)
    # clevel 0: memcpyed chunks.
    for shuffle in (0, 1, 2):
        seed += 1
        add(f"memcpy-s{shuffle}", pattern("ramp", 3001, 4, seed), "lz4", 0, shuffle, 4)
    # Tiny and empty inputs.
    for cname in codecs:
        for nb in (0, 1, 2, 7, 15, 16, 17, 31, 127, 128, 129):
            for ts in (1, 4, 16):
                seed += 1
                add(f"{cname}-tiny-{nb}-ts{ts}", pattern("ramp", nb, ts, seed), cname, 5, 1, ts)
    # Bitshuffle with element counts that are not a multiple of 8 per block.
    for ts in (1, 2, 3, 4, 5, 8, 12):
        for nelem in (7, 8, 9, 63, 100, 1001, 4099):
            seed += 1
            add(f"bitshuffle-ts{ts}-n{nelem}", pattern("ramp", ts * nelem, ts, seed), "lz4", 5, 2, ts, 1024)
    # The numcodecs codec class as zarr calls it (typesize from the dtype).
    for cname in codecs:
        for dt in ("<i2", "<f4", "<f2", "<f8", "|u1"):
            seed += 1
            raw = pattern("ramp", 48_000, np.dtype(dt).itemsize, seed)
            arr = np.frombuffer(raw, dtype=dt)
            comp = numcodecs.Blosc(cname=cname, clevel=5, shuffle=numcodecs.Blosc.SHUFFLE).encode(arr)
            assert bytes(numcodecs.Blosc().decode(comp)) == raw
            cases.append(case(f"numcodecs-{cname}-{dt[1:]}", "blosc1", comp, raw,
                              {"cname": cname, "dtype": dt, "header": bytes(comp[:16]).hex()}))
    return cases


def blosc2_cases() -> list[dict]:
    cases = []
    seed = RNG_SEED + 100_000

    def add(name, data, params, comp=None, **kw):
        if comp is None:
            comp = blosc2.compress2(data, **kw)
        try:
            back = blosc2.decompress2(comp)
        except ValueError:
            # c-blosc2 cannot read back what it wrote for this combination; skip it.
            print(f"skipped {name}: c-blosc2 fails to decompress its own output")
            return
        if "TRUNC_PREC" not in name:
            if bytes(back) != data:
                print(f"skipped {name}: c-blosc2 does not round-trip this combination")
                return
            back = data
        p = dict(params)
        p["header"] = comp[:32].hex()
        cases.append(case(name, "blosc2", comp, bytes(back), p))

    # Exactly what ocf_blosc2.Blosc2 writes (blosc2.compress, typesize 8, shuffle).
    for cname in ("zstd", "blosc2"):
        for clevel in (0, 1, 5, 9):
            for dt, n in (("<f2", 8_000), ("<f4", 4_000), ("<i2", 8_000), ("<f8", 1_000), ("|u1", 8_000)):
                seed += 1
                raw = pattern("ramp", n * np.dtype(dt).itemsize, np.dtype(dt).itemsize, seed)
                arr = np.frombuffer(raw, dtype=dt)
                comp = ocf_blosc2.Blosc2(cname=cname, clevel=clevel).encode(arr)
                assert bytes(ocf_blosc2.Blosc2().decode(comp)) == raw
                add(f"ocf-{cname}-c{clevel}-{dt[1:]}", raw, {"ocf": cname, "clevel": clevel, "dtype": dt}, comp=comp)
    # A large smooth float16 chunk as the public satellite data has (several blocks).
    seed += 1
    raw = pattern("ramp", 1_200_000, 2, seed)
    comp = ocf_blosc2.Blosc2(cname="zstd", clevel=5).encode(np.frombuffer(raw, dtype="<f2"))
    add("ocf-zstd-c5-f2-large", raw, {"ocf": "zstd"}, comp=comp)
    # All-zero chunk: blosc2 writes a special zeros chunk.
    raw = bytes(80_000)
    add("ocf-zstd-zeros", raw, {"ocf": "zstd"}, comp=ocf_blosc2.Blosc2("zstd", 5).encode(np.zeros(10_000, "<f8")))
    raw = np.full(20_000, np.nan, dtype="<f4").tobytes()
    add("b2-nan-f4-runs", raw, {}, comp=blosc2.compress(raw, typesize=4))

    F = blosc2.Filter
    C = blosc2.Codec
    codecs = [C.BLOSCLZ, C.LZ4, C.LZ4HC, C.ZLIB, C.ZSTD]
    filter_sets = {
        "none": ([F.NOFILTER], [0]),
        "shuffle": ([F.SHUFFLE], [0]),
        "bitshuffle": ([F.BITSHUFFLE], [0]),
        "delta-shuffle": ([F.DELTA, F.SHUFFLE], [0, 0]),
        "delta-bitshuffle": ([F.DELTA, F.BITSHUFFLE], [0, 0]),
        "delta": ([F.DELTA], [0]),
        "TRUNC_PREC-shuffle": ([F.TRUNC_PREC, F.SHUFFLE], [10, 0]),
        "shuffle-bitshuffle": ([F.SHUFFLE, F.BITSHUFFLE], [0, 0]),
        "shuffle-ts2override": ([F.SHUFFLE], [2]),  # filters_meta overrides the shuffle element size
        "delta-TRUNC_PREC-bitshuffle": ([F.DELTA, F.TRUNC_PREC, F.BITSHUFFLE], [0, 12, 0]),
    }
    for codec in codecs:
        for fname, (filters, meta) in filter_sets.items():
            # The full filter x typesize matrix for the codecs OCF uses (and our own
            # BloscLZ decoder); the others get the common cases.
            full = codec in (C.BLOSCLZ, C.ZSTD)
            if not full and fname not in ("shuffle", "bitshuffle", "none"):
                continue
            for ts in ((1, 2, 4, 8, 3, 16, 255) if full else (1, 2, 4)):
                if "TRUNC_PREC" in fname and ts not in (4, 8):
                    continue
                for split in (blosc2.SplitMode.ALWAYS_SPLIT, blosc2.SplitMode.NEVER_SPLIT):
                    seed += 1
                    # Delta leaves a partial trailing element unfiltered and c-blosc2
                    # then returns garbage there, so delta cases use whole elements.
                    nb = 5000 + ts // 2 if not ("delta" in fname or "TRUNC" in fname) else ts * (5000 // ts)
                    if "TRUNC_PREC" in fname:
                        vals = np.frombuffer(pattern("ramp", nb, ts, seed), dtype=f"<u{ts}")
                        raw = (vals.astype(np.float64) / 7.0).astype(f"<f{ts}").tobytes()
                    else:
                        raw = pattern("ramp", nb, ts, seed)
                    add(f"{codec.name.lower()}-{fname}-ts{ts}-{split.name.lower()}", raw,
                        {"codec": codec.name, "filters": fname, "typesize": ts, "split": split.name},
                        typesize=ts, codec=codec, clevel=5, filters=list(filters), filters_meta=list(meta),
                        splitmode=split, blocksize=1024 - 1024 % ts)
        seed += 1
        raw = pattern("ramp", 400_000, 4, seed)
        add(f"{codec.name.lower()}-auto-ts4", raw, {"codec": codec.name}, typesize=4, codec=codec, clevel=5)
        raw = pattern("random", 6000, 4, seed)
        add(f"{codec.name.lower()}-random-ts4", raw, {"codec": codec.name}, typesize=4, codec=codec, clevel=5,
            blocksize=1024)
        for nb in (0, 1, 7, 8, 9, 31, 32, 33, 100):
            seed += 1
            raw = pattern("ramp", nb, 4, seed)
            comp = blosc2.compress(raw, typesize=4, codec=codec, clevel=5, _ignore_multiple_size=True)
            add(f"{codec.name.lower()}-tiny-{nb}", raw, {"codec": codec.name}, comp=comp)
    # Bitshuffle (Blosc2 rule: the n - n%8 leading elements) for awkward counts.
    for ts in (1, 2, 3, 4, 8):
        for nelem in (7, 9, 63, 100, 1001):
            seed += 1
            raw = pattern("ramp", ts * nelem, ts, seed)
            add(f"b2-bitshuffle-ts{ts}-n{nelem}", raw, {"typesize": ts}, typesize=ts, codec=C.LZ4, clevel=5,
                filters=[F.BITSHUFFLE], filters_meta=[0], blocksize=512)
    # Runs of one byte value and zero runs inside blocks (negative/zero stream sizes).
    seed += 1
    raw = (bytes([5]) * 4096 + bytes(4096) + pattern("ramp", 4096, 4, seed)) * 2
    add("b2-runs", raw, {}, typesize=4, codec=C.ZSTD, clevel=5, blocksize=4096)
    # memcpyed (clevel 0) with a size that is not a multiple of typesize.
    raw = pattern("ramp", 1003, 4, seed)
    add("b2-memcpy-odd", raw, {}, comp=blosc2.compress(raw, typesize=4, clevel=0, _ignore_multiple_size=True))

    # Special chunks (all zeros / NaN / one value / uninitialised), from a super-chunk.
    def special(name, ts, nitems, sv, value=None, expected=None):
        s = blosc2.SChunk(chunksize=ts * nitems, cparams={"typesize": ts})
        s.fill_special(nitems, sv, value=value)
        comp = s.get_chunk(0)
        back = blosc2.decompress2(comp)
        if expected is not None:
            assert bytes(back) == expected, name
        # Uninitialised chunks decode to whatever memory held: store only the length.
        stored = bytes(back) if expected is not None else bytes(len(back))
        c = case(name, "blosc2", comp, stored, {"special": sv.name, "header": comp[:32].hex()})
        if expected is None:
            c["content_undefined"] = True  # c-blosc2 leaves uninitialised chunks as they are
        cases.append(c)

    special("special-zero-ts4", 4, 1000, blosc2.SpecialValue.ZERO, expected=bytes(4000))
    special("special-nan-f4", 4, 1000, blosc2.SpecialValue.NAN, expected=np.full(1000, np.nan, "<f4").tobytes())
    special("special-nan-f8", 8, 500, blosc2.SpecialValue.NAN, expected=np.full(500, np.nan, "<f8").tobytes())
    special("special-value-f4", 4, 1000, blosc2.SpecialValue.VALUE, value=np.float32(2.5),
            expected=np.full(1000, 2.5, "<f4").tobytes())
    special("special-value-i2", 2, 777, blosc2.SpecialValue.VALUE, value=np.int16(-3),
            expected=np.full(777, -3, "<i2").tobytes())
    special("special-uninit-ts4", 4, 1000, blosc2.SpecialValue.UNINIT, expected=None)

    # Inputs that must be refused with a clear error.
    raw = pattern("ramp", 9000, 4, seed)
    comp = blosc2.compress2(raw, typesize=4, codec=C.ZSTD, clevel=5, filters=[F.BYTEDELTA], filters_meta=[4])
    cases.append(case("err-bytedelta", "blosc2", comp, None, {}, error="filter 35"))
    frame = blosc2.SChunk(chunksize=8000, data=np.frombuffer(raw, dtype="<f4"), cparams={"typesize": 4}).to_cframe()
    cases.append(case("err-cframe", "blosc2", frame, None, {}, error="frame"))
    return cases


def main() -> None:
    blosc.set_nthreads(1)
    blosc2.set_nthreads(1)
    for fname, cases in (("blosc1.json.gz", blosc1_cases()), ("blosc2.json.gz", blosc2_cases())):
        path = HERE / fname
        path.write_bytes(gzip.compress((json.dumps({"generator": "readers/blosc/testdata/gen.py",
                                    "numcodecs": numcodecs.__version__, "python-blosc2": blosc2.__version__,
                                    "c-blosc2": blosc2.blosclib_version, "cases": cases}, indent=0) + "\n").encode(), 9, mtime=0))
        print(f"{path}: {len(cases)} cases, {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
