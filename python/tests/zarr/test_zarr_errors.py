"""Bad input to ``shmloader read`` / ``inspect``: clear errors, the right exit code, no panic.

Damaged data (a corrupt or truncated chunk, an unknown codec, malformed metadata) must
exit 1 with a message naming the store or array, the chunk key and the codec; a bad
command line must exit 2. No case may print a Go panic trace (checked by ``run``) or
leave a partial output file behind.
"""

from __future__ import annotations

import json
import pathlib

import numcodecs
import numpy as np
import ocf_blosc2
import pytest
from zarr.codecs import BloscCodec, BytesCodec, Crc32cCodec, GzipCodec, ZstdCodec

from zarr_fixtures import run, shmloader, smooth_int16, write_array

__all__ = ["shmloader"]

SHAPE, CHUNKS = (40, 30), (16, 16)


def _codec_cases() -> dict[str, tuple[int, dict, str]]:
    cases: dict[str, tuple[int, dict, str]] = {
        "v2-blosc-lz4": (2, {"compressors": numcodecs.Blosc("lz4", 5, 1)}, "blosc"),
        "v2-blosc-zstd": (2, {"compressors": numcodecs.Blosc("zstd", 5, 2)}, "blosc"),
        "v2-zstd": (2, {"compressors": numcodecs.Zstd(3)}, "zstd"),
        "v2-zlib": (2, {"compressors": numcodecs.Zlib(5)}, "zlib"),
        "v2-gzip": (2, {"compressors": numcodecs.GZip(5)}, "gzip"),
        "v2-lz4": (2, {"compressors": numcodecs.LZ4()}, "lz4"),
        "v2-bz2": (2, {"compressors": numcodecs.BZ2(5)}, "bz2"),
        "v3-blosc": (3, {"compressors": [BloscCodec(cname="lz4", shuffle="shuffle")]}, "blosc"),
        "v3-zstd": (3, {"compressors": [ZstdCodec(level=3)]}, "zstd"),
        "v3-gzip": (3, {"compressors": [GzipCodec(level=5)]}, "gzip"),
    }
    cases["v2-blosc2"] = (2, {"compressors": ocf_blosc2.Blosc2(cname="zstd", clevel=5)}, "blosc2")
    return cases


CODEC_CASES = _codec_cases()


def _key(zarr_format: int) -> str:
    """The store key of chunk (1, 0), as the message should name it."""
    return "1.0" if zarr_format == 2 else "c/1/0"


def _make(tmp_path: pathlib.Path, zarr_format: int, kw: dict) -> pathlib.Path:
    return write_array(tmp_path, "arr", smooth_int16(SHAPE, seed=50), chunks=CHUNKS, zarr_format=zarr_format, **kw)


def _expect_failure(
    tmp_path: pathlib.Path, args: list[str], *needles: str, code: int = 1
) -> str:
    out = tmp_path / "out.npy"
    proc = run(*args, "--out", out) if args and args[0] == "read" else run(*args)
    assert proc.returncode == code, f"exit {proc.returncode}, want {code}; stderr:\n{proc.stderr}"
    for n in needles:
        assert n in proc.stderr, f"{n!r} not in stderr:\n{proc.stderr}"
    assert proc.stderr.strip(), "no error message"
    assert len(proc.stderr.strip().splitlines()) <= 5, f"error message too long:\n{proc.stderr}"
    assert not out.exists(), "a partial output file was left behind"
    return proc.stderr


@pytest.mark.parametrize("case", list(CODEC_CASES))
def test_corrupt_chunk(shmloader: str, tmp_path: pathlib.Path, case: str) -> None:
    zarr_format, kw, codec = CODEC_CASES[case]
    path = _make(tmp_path, zarr_format, kw)
    chunk = path / _key(zarr_format)
    n = chunk.stat().st_size
    chunk.write_bytes(np.random.default_rng(51).integers(0, 256, size=n, dtype=np.uint8).tobytes())
    _expect_failure(tmp_path, ["read", str(path)], _key(zarr_format), codec, "arr")


@pytest.mark.parametrize("case", list(CODEC_CASES))
def test_truncated_chunk(shmloader: str, tmp_path: pathlib.Path, case: str) -> None:
    zarr_format, kw, codec = CODEC_CASES[case]
    path = _make(tmp_path, zarr_format, kw)
    chunk = path / _key(zarr_format)
    raw = chunk.read_bytes()
    chunk.write_bytes(raw[: len(raw) // 2])
    _expect_failure(tmp_path, ["read", str(path)], _key(zarr_format), codec, "arr")


CHECKSUMS = {
    "v3-crc32c": (3, {"serializer": BytesCodec(), "compressors": [Crc32cCodec()]}, "crc32c"),
    "v2-crc32-filter": (2, {"filters": [numcodecs.CRC32()], "compressors": None}, "crc32"),
    "v2-adler32-compressor": (2, {"compressors": numcodecs.Adler32()}, "adler32"),
}


@pytest.mark.parametrize("case", list(CHECKSUMS))
def test_checksum_mismatch(shmloader: str, tmp_path: pathlib.Path, case: str) -> None:
    zarr_format, kw, codec = CHECKSUMS[case]
    path = _make(tmp_path, zarr_format, kw)
    chunk = path / _key(zarr_format)
    raw = bytearray(chunk.read_bytes())
    raw[10] ^= 0x40  # one bit in the data: only the checksum can notice
    chunk.write_bytes(bytes(raw))
    _expect_failure(tmp_path, ["read", str(path)], _key(zarr_format), codec)


@pytest.mark.parametrize("where", ["index", "truncated"])
def test_corrupt_shard(shmloader: str, tmp_path: pathlib.Path, where: str) -> None:
    path = write_array(
        tmp_path, "arr", smooth_int16((32, 32), seed=52), chunks=(4, 4), shards=(16, 16), zarr_format=3
    )
    shard = path / "c/1/0"
    raw = bytearray(shard.read_bytes())
    if where == "index":  # the index (at the end) is protected by crc32c
        raw[-20] ^= 0x01
    else:
        raw = raw[: len(raw) - 30]
    shard.write_bytes(bytes(raw))
    if where == "index":
        _expect_failure(tmp_path, ["read", str(path)], "c/1/0", "crc32c", "shard")
    else:
        _expect_failure(tmp_path, ["read", str(path)], "c/1/0", "shard")


def _edit_meta(path: pathlib.Path, zarr_format: int, edit) -> None:
    doc = path / (".zarray" if zarr_format == 2 else "zarr.json")
    meta = json.loads(doc.read_text())
    edit(meta)
    doc.write_text(json.dumps(meta))


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_unknown_codec(shmloader: str, tmp_path: pathlib.Path, zarr_format: int) -> None:
    path = _make(tmp_path, zarr_format, {})

    def edit(meta: dict) -> None:
        if zarr_format == 2:
            meta["compressor"] = {"id": "nosuchcodec", "level": 1}
        else:
            meta["codecs"][-1] = {"name": "nosuchcodec", "configuration": {}}

    _edit_meta(path, zarr_format, edit)
    _expect_failure(tmp_path, ["read", str(path)], "nosuchcodec", "arr")
    _expect_failure(tmp_path, ["inspect", str(path)], "nosuchcodec")


MALFORMED = {
    "not-json": lambda text: text[: len(text) // 2],
    "empty": lambda text: "",
    "shape-string": lambda text: text.replace('"shape": [', '"shape": "x", "_": ['),
    "bad-dtype": lambda text: text.replace('"<i2"', '"<x2"').replace('"int16"', '"int17"'),
    "negative-shape": lambda text: text.replace('"shape": [\n    40', '"shape": [\n    -40'),
    "rank-mismatch": lambda text: text.replace('"chunks": [\n    16,\n    16\n  ]', '"chunks": [16]').replace(
        '"chunk_shape": [\n        16,\n        16\n      ]', '"chunk_shape": [16]'
    ),
    "zero-chunk": lambda text: text.replace('"chunks": [\n    16,', '"chunks": [\n    0,').replace(
        '"chunk_shape": [\n        16,', '"chunk_shape": [\n        0,'
    ),
}


@pytest.mark.parametrize("kind", list(MALFORMED))
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_malformed_metadata(shmloader: str, tmp_path: pathlib.Path, zarr_format: int, kind: str) -> None:
    path = _make(tmp_path, zarr_format, {})
    doc = path / (".zarray" if zarr_format == 2 else "zarr.json")
    text = doc.read_text()
    new = MALFORMED[kind](text)
    assert new != text, "the edit did not change the metadata"
    doc.write_text(new)
    _expect_failure(tmp_path, ["read", str(path)], "arr", doc.name)


def test_missing_array(shmloader: str, tmp_path: pathlib.Path) -> None:
    path = _make(tmp_path, 2, {})
    _expect_failure(tmp_path, ["read", str(path / "nope")], "nope")
    _expect_failure(tmp_path, ["read", str(tmp_path / "no-such-store")], "no-such-store")
    _expect_failure(tmp_path, ["inspect", str(tmp_path / "no-such-store")], "no-such-store")


def test_read_group_is_refused(shmloader: str, tmp_path: pathlib.Path) -> None:
    import zarr

    zarr.open_group(str(tmp_path / "g"), mode="w", zarr_format=2).create_group("sub")
    _expect_failure(tmp_path, ["read", str(tmp_path / "g" / "sub")], "sub", "group")


BAD_COMMAND_LINES = {
    "no-args": ["read"],
    "no-out": ["read", "{arr}"],
    "unknown-flag": ["read", "{arr}", "--out", "{out}", "--bogus"],
    "two-arrays": ["read", "{arr}", "{arr}", "--out", "{out}"],
    "box-syntax": ["read", "{arr}", "--out", "{out}", "--box", "1:2:3,:"],
    "box-letters": ["read", "{arr}", "--out", "{out}", "--box", "a:b,:"],
    "box-rank": ["read", "{arr}", "--out", "{out}", "--box", "0:5"],
    "box-bounds": ["read", "{arr}", "--out", "{out}", "--box", "0:41,:"],
    "box-reversed": ["read", "{arr}", "--out", "{out}", "--box", "9:3,:"],
    "inspect-no-args": ["inspect"],
    "inspect-unknown-flag": ["inspect", "--bogus", "{arr}"],
}


@pytest.mark.parametrize("name", list(BAD_COMMAND_LINES))
def test_bad_command_line(shmloader: str, tmp_path: pathlib.Path, name: str) -> None:
    path = _make(tmp_path, 2, {})
    out = tmp_path / "out.npy"
    args = [a.format(arr=path, out=out) for a in BAD_COMMAND_LINES[name]]
    proc = run(*args)
    assert proc.returncode == 2, f"exit {proc.returncode}, want 2; stderr:\n{proc.stderr}"
    assert proc.stderr.strip()
    assert not out.exists()
    if name.startswith("box-"):
        assert "box" in proc.stderr


@pytest.mark.parametrize(
    "zarr_format",
    [2, 3],
)
def test_inspect_reports_bad_array_and_the_rest(shmloader: str, tmp_path: pathlib.Path, zarr_format: int) -> None:
    """One array with broken metadata: inspect still describes the others, names the bad one, exits 1."""
    import zarr

    g = zarr.open_group(str(tmp_path / "s.zarr"), mode="w", zarr_format=zarr_format)
    g.create_array("good", shape=(4,), chunks=(2,), dtype="u1")[:] = 3
    g.create_array("bad", shape=(4,), chunks=(2,), dtype="u1")[:] = 3
    (tmp_path / "s.zarr" / "bad" / (".zarray" if zarr_format == 2 else "zarr.json")).write_text('{"shape": [')
    proc = run("inspect", "--json", tmp_path / "s.zarr")
    assert proc.returncode == 1, proc.stderr
    nodes = {n["path"]: n for n in json.loads(proc.stdout)["nodes"]}
    assert nodes["good"]["shape"] == [4] and "error" not in nodes["good"]
    assert "bad" in nodes["bad"]["error"]
    assert "bad" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
