"""``shmloader inspect`` (tree, metadata, sizes) and reading arrays inside groups.

The stores are hierarchies written with zarr-python (v2 and v3, with and without
consolidated metadata). ``inspect --json`` is compared with what zarr-python reports for
the same store; the human-readable form is checked for the facts a user looks for.

``inspect --json`` prints one object::

    {"store": str, "zarr_format": int, "consolidated": bool,
     "nodes": [{"path": "" | "a/b", "kind": "group" | "array", "attributes": {...},
                # arrays only:
                "shape": [...], "chunks": [...], "shards": [...] | null, "dims": [...] | null,
                "dtype": "<i2", "order": "C" | "F", "fill_value": <JSON>,
                "codecs": [{"name": str, "configuration": {...}}, ...],
                "decoded_bytes": int, "stored_bytes": int, "ratio": float,
                "chunks_stored": int, "chunks_total": int}, ...]}

``codecs`` is the whole chain in metadata order (v2: the filters, then the compressor).
``stored_bytes`` is the total size of the stored chunk (or shard) objects,
``chunks_stored``/``chunks_total`` count those objects and the slots of the grid.
"""

from __future__ import annotations

import json
import math
import pathlib
import shutil

import numcodecs
import numpy as np
import pytest
import zarr
from zarr.codecs import BloscCodec, ZstdCodec

from zarr_fixtures import assert_same, chunk_files, inspect_json, read, run, shmloader, smooth_int16

__all__ = ["shmloader"]

# zarr-python notes that v3 consolidated metadata is not in the spec yet.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

FORMATS = [2, 3]


def _build(root: pathlib.Path, zarr_format: int, consolidated: bool) -> dict[str, dict]:
    """A small OCF-like hierarchy; returns what each array should report."""
    g = zarr.open_group(str(root), mode="w", zarr_format=zarr_format, attributes={"title": "nowcast test", "version": 3})
    sat = g.create_group("sat", attributes={"source": "synthetic"})
    dims3 = ["time", "y", "x"]
    dims_kw = (
        {"dimension_names": dims3}
        if zarr_format == 3
        else {"attributes": {"_ARRAY_DIMENSIONS": dims3, "scale_factor": 0.001}}
    )
    comp = numcodecs.Blosc("lz4", 5, 1) if zarr_format == 2 else BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")
    data = sat.create_array("data", shape=(10, 40, 50), chunks=(4, 16, 16), dtype="i2", fill_value=-1, compressors=comp, **dims_kw)
    data[:8] = smooth_int16((8, 40, 50), seed=40)  # the chunks of the last time step stay missing
    nwp = g.create_group("nwp").create_group("ukv")
    zc = numcodecs.Zstd(3) if zarr_format == 2 else ZstdCodec(level=3)
    t = nwp.create_array("temp", shape=(6, 9), chunks=(3, 9), dtype="f4", fill_value=float("nan"), compressors=zc)
    t[:] = np.arange(54, dtype="f4").reshape(6, 9)
    tm = g.create_array("time", shape=(10,), chunks=(10,), dtype="i8", attributes={"units": "minutes since 2021-01-01"})
    tm[:] = np.arange(10) * 5
    if zarr_format == 3:
        sh = g.create_array("sharded", shape=(16, 16), chunks=(4, 4), shards=(8, 8), dtype="u1")
        sh[:8, :] = 7  # two of four shards
    if consolidated:
        zarr.consolidate_metadata(str(root))
    return {
        "sat/data": dict(shape=[10, 40, 50], chunks=[4, 16, 16], dtype="<i2", dims=dims3, fill=-1, total=3 * 3 * 4),
        "nwp/ukv/temp": dict(shape=[6, 9], chunks=[3, 9], dtype="<f4", dims=None, fill="NaN", total=2),
        "time": dict(shape=[10], chunks=[10], dtype="<i8", dims=None, fill=0, total=1),
    }


@pytest.mark.parametrize("consolidated", [False, True], ids=["plain", "consolidated"])
@pytest.mark.parametrize("zarr_format", FORMATS)
def test_inspect_json_tree(shmloader: str, tmp_path: pathlib.Path, zarr_format: int, consolidated: bool) -> None:
    root = tmp_path / "s.zarr"
    expect = _build(root, zarr_format, consolidated)
    info = inspect_json(root)
    assert info["zarr_format"] == zarr_format
    assert info["consolidated"] is consolidated
    nodes = {n["path"]: n for n in info["nodes"]}
    want_groups = {"", "sat", "nwp", "nwp/ukv"}
    assert {p for p, n in nodes.items() if n["kind"] == "group"} == want_groups
    want_arrays = set(expect) | ({"sharded"} if zarr_format == 3 else set())
    assert {p for p, n in nodes.items() if n["kind"] == "array"} == want_arrays
    assert nodes[""]["attributes"] == {"title": "nowcast test", "version": 3}
    assert nodes["sat"]["attributes"] == {"source": "synthetic"}

    zg = zarr.open_group(str(root), mode="r")
    for path, want in expect.items():
        n = nodes[path]
        za = zg[path]
        assert n["shape"] == want["shape"] == list(za.shape)
        assert n["chunks"] == want["chunks"] == list(za.chunks)
        assert n["shards"] is None
        assert n["dtype"] == want["dtype"]
        assert n["dims"] == want["dims"]
        assert n["fill_value"] == want["fill"]
        assert n["order"] == "C"
        assert n["decoded_bytes"] == za.nbytes
        files = chunk_files(root / path)
        assert n["stored_bytes"] == sum(f.stat().st_size for f in files)
        assert n["chunks_stored"] == len(files) == za.nchunks_initialized
        assert n["chunks_total"] == want["total"] == za.nchunks
        assert math.isclose(n["ratio"], za.nbytes / n["stored_bytes"], rel_tol=1e-3)
        assert n["attributes"] == dict(za.attrs)
        assert all(isinstance(c, dict) and isinstance(c["name"], str) for c in n["codecs"])

    data = nodes["sat/data"]
    names = [c["name"] for c in data["codecs"]]
    assert "blosc" in names
    blosc = next(c for c in data["codecs"] if c["name"] == "blosc")
    assert blosc["configuration"]["cname"] == "lz4"
    assert data["chunks_stored"] == 2 * 3 * 4  # time chunks 0 and 1 written, chunk 2 (t=8..9) not
    assert "zstd" in [c["name"] for c in nodes["nwp/ukv/temp"]["codecs"]]
    if zarr_format == 2:
        assert data["attributes"]["scale_factor"] == 0.001
    else:
        sh = nodes["sharded"]
        assert sh["shards"] == [8, 8] and sh["chunks"] == [4, 4]
        assert sh["chunks_total"] == 4 and sh["chunks_stored"] == 2
        assert "sharding_indexed" in [c["name"] for c in sh["codecs"]]
        assert sh["decoded_bytes"] == 256


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_inspect_human(shmloader: str, tmp_path: pathlib.Path, zarr_format: int) -> None:
    root = tmp_path / "s.zarr"
    _build(root, zarr_format, consolidated=False)
    proc = run("inspect", root)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for needle in ["sat", "data", "nwp", "ukv", "temp", "time", "int16", "float32", "lz4", "zstd", "nowcast test"]:
        assert needle in out, f"{needle!r} missing from inspect output:\n{out}"
    # dims with sizes, as xarray shows them
    assert "time: 10" in out and "y: 40" in out and "x: 50" in out, out
    assert "24/36" in out.replace(" ", "") or "24 of 36" in out, out  # stored / total chunks
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_inspect_single_array_store(shmloader: str, tmp_path: pathlib.Path, zarr_format: int) -> None:
    a = zarr.create_array(str(tmp_path / "a.zarr"), shape=(5, 7), chunks=(2, 7), dtype=">f8", zarr_format=zarr_format)
    a[:2] = 1.5
    info = inspect_json(tmp_path / "a.zarr")
    (node,) = info["nodes"]
    assert node["path"] == "" and node["kind"] == "array"
    assert node["shape"] == [5, 7] and node["chunks_stored"] == 1 and node["chunks_total"] == 3
    assert node["decoded_bytes"] == 5 * 7 * 8


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_read_nested_arrays(shmloader: str, tmp_path: pathlib.Path, zarr_format: int) -> None:
    root = tmp_path / "s.zarr"
    expect = _build(root, zarr_format, consolidated=False)
    zg = zarr.open_group(str(root), mode="r")
    for i, path in enumerate(expect):
        assert_same(read(root / path, tmp_path, name=f"{i}.npy"), np.asarray(zg[path][...]))


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_consolidated_metadata_is_used(shmloader: str, tmp_path: pathlib.Path, zarr_format: int) -> None:
    """With the per-array metadata deleted, only consolidated metadata can describe the arrays."""
    root = tmp_path / "s.zarr"
    expect = _build(root, zarr_format, consolidated=True)
    zg = zarr.open_consolidated(str(root), mode="r")
    want = {p: np.asarray(zg[p][...]) for p in expect}
    for p in expect:
        for name in (".zarray", ".zattrs", "zarr.json"):
            (root / p / name).unlink(missing_ok=True)
    for g in ("sat", "nwp", "nwp/ukv"):
        for name in (".zgroup", ".zattrs", "zarr.json"):
            (root / g / name).unlink(missing_ok=True)
    info = inspect_json(root)
    assert info["consolidated"] is True
    assert {n["path"] for n in info["nodes"] if n["kind"] == "array"} >= set(expect)
    for i, p in enumerate(expect):
        assert_same(read(root / p, tmp_path, name=f"{i}.npy"), want[p])


def test_v2_consolidated_xarray_layout(shmloader: str, tmp_path: pathlib.Path) -> None:
    """The .zmetadata key format zarr-python writes: '<path>/.zarray' entries."""
    root = tmp_path / "s.zarr"
    _build(root, 2, consolidated=True)
    meta = json.loads((root / ".zmetadata").read_text())
    assert meta["zarr_consolidated_format"] == 1 and "sat/data/.zarray" in meta["metadata"]
    shutil.rmtree(root / "time")  # listed in .zmetadata but gone from the store: chunks missing
    info = inspect_json(root)
    node = next(n for n in info["nodes"] if n["path"] == "time")
    assert node["chunks_stored"] == 0 and node["stored_bytes"] == 0
    assert_same(read(root / "time", tmp_path), np.zeros(10, dtype="i8"))


@pytest.mark.parametrize("zarr_format", FORMATS)
def test_zip_store(shmloader: str, tmp_path: pathlib.Path, zarr_format: int) -> None:
    """A store in a zip archive (zarr-python's ZipStore, as OCF publishes per-timestep files)."""
    path = tmp_path / "t.zarr.zip"
    store = zarr.storage.ZipStore(str(path), mode="w")
    g = zarr.open_group(store, mode="w", zarr_format=zarr_format)
    data = smooth_int16((10, 20, 30), seed=41)
    a = g.create_array("sat/data", shape=data.shape, chunks=(4, 8, 30), dtype="i2", fill_value=-1)
    a[:8] = data[:8]
    zarr.consolidate_metadata(store)
    store.close()
    info = inspect_json(path)
    node = next(n for n in info["nodes"] if n["path"] == "sat/data")
    assert node["shape"] == [10, 20, 30] and node["chunks_stored"] == 2 * 3 and node["chunks_total"] == 3 * 3
    want = np.asarray(zarr.open_array(zarr.storage.ZipStore(str(path), mode="r"), path="sat/data", mode="r")[...])
    assert_same(read(path / "sat" / "data", tmp_path), want)
    assert_same(read(path / "sat" / "data", tmp_path, box="7:10,5:,:", name="b.npy"), want[7:, 5:, :])
