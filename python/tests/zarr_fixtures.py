"""Shared helpers for the Zarr reader tests (``test_zarr_*.py``).

The tests write Zarr stores with zarr-python 3 (both ``zarr_format=2`` and ``3``) into
pytest's ``tmp_path``, read them back with ``shmloader read`` / ``shmloader inspect`` and
compare the result with what zarr-python (or xarray) reads from the same store.

The ``shmloader`` binary is the one named by ``$GOBATCH_SHMLOADER`` or, when that is not
set, one built once per test session with ``go build`` into a temporary directory.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]

# Strings whose presence in stderr means the Go program crashed instead of reporting an error.
PANIC_MARKERS = ("panic:", "goroutine ", "runtime error", "[signal ")


@functools.lru_cache(maxsize=None)
def shmloader_path() -> str:
    """Return the path of the shmloader binary, building it on first use."""
    env = os.environ.get("GOBATCH_SHMLOADER")
    if env:
        if not os.access(env, os.X_OK):
            raise RuntimeError(f"GOBATCH_SHMLOADER={env!r} is not an executable file")
        return env
    out_dir = tempfile.mkdtemp(prefix="gobatch-zarr-test-")
    atexit.register(shutil.rmtree, out_dir, True)
    exe = os.path.join(out_dir, "shmloader")
    proc = subprocess.run(
        ["go", "build", "-o", exe, "./cmd/shmloader"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"go build ./cmd/shmloader failed:\n{proc.stderr}")
    return exe


@pytest.fixture(scope="session")
def shmloader() -> str:
    """Session fixture: the path of the shmloader binary."""
    return shmloader_path()


def run(*args: str | os.PathLike[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``shmloader ARGS...`` and return the completed process (text mode)."""
    proc = subprocess.run(
        [shmloader_path(), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert_no_panic(proc.stderr)
    return proc


def assert_no_panic(stderr: str) -> None:
    """Fail if ``stderr`` looks like a Go panic trace rather than an error message."""
    for marker in PANIC_MARKERS:
        assert marker not in stderr, f"shmloader crashed (found {marker!r}):\n{stderr}"


def read(
    array_path: str | os.PathLike[str],
    out_dir: pathlib.Path,
    box: str | None = None,
    cf: bool = False,
    name: str = "out.npy",
) -> np.ndarray:
    """Run ``shmloader read ARRAY --out OUT.npy [--box BOX] [--cf]`` and load the result.

    Fails the calling test with shmloader's stderr when the command does not succeed.
    """
    out = out_dir / name
    args: list[str] = ["read", str(array_path), "--out", str(out)]
    if box is not None:
        args += ["--box", box]
    if cf:
        args.append("--cf")
    proc = run(*args)
    assert proc.returncode == 0, f"shmloader {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}"
    return load_npy(out)


def load_npy(path: pathlib.Path) -> np.ndarray:
    """Load a .npy file, checking that it is format version 1.0 as the brief requires."""
    with open(path, "rb") as f:
        magic = f.read(8)
    assert magic[:6] == b"\x93NUMPY", f"{path}: not a .npy file"
    assert magic[6:8] == b"\x01\x00", f"{path}: .npy version {magic[6]}.{magic[7]}, want 1.0"
    return np.load(path, allow_pickle=False)


def inspect_json(store: str | os.PathLike[str]) -> dict[str, Any]:
    """Run ``shmloader inspect --json STORE`` and parse its output."""
    proc = run("inspect", "--json", str(store))
    assert proc.returncode == 0, f"shmloader inspect --json {store} exited {proc.returncode}:\n{proc.stderr}"
    return json.loads(proc.stdout)


def native(dtype: np.dtype) -> np.dtype:
    """The little-endian (native on our platforms) form of ``dtype``; byte-free types unchanged."""
    return dtype.newbyteorder("<") if dtype.byteorder == ">" else dtype


def assert_same(actual: np.ndarray, expected: np.ndarray) -> None:
    """Assert that ``actual`` (read by shmloader) equals ``expected`` (read by zarr-python).

    The dtype must be ``expected``'s dtype in little-endian form and the shape must match.
    Integers, booleans, datetimes and strings must be exactly equal. Floats (and complex)
    must have NaN at the same positions and be bitwise equal everywhere else (so -0.0 and
    0.0 differ); only the payload bits of NaNs are not compared.
    """
    want_dtype = native(np.asarray(expected).dtype)
    expected = np.asarray(expected).astype(want_dtype, copy=False)
    assert actual.dtype == want_dtype, f"dtype {actual.dtype.str}, want {want_dtype.str}"
    assert actual.shape == expected.shape, f"shape {actual.shape}, want {expected.shape}"
    kind = want_dtype.kind
    if kind in "fc":
        fl = want_dtype if kind == "f" else np.dtype(f"<f{want_dtype.itemsize // 2}")
        a = actual.view(fl)
        e = expected.view(fl)
        nan_a, nan_e = np.isnan(a), np.isnan(e)
        np.testing.assert_array_equal(nan_a, nan_e, err_msg="NaN positions differ")
        ui = np.dtype(f"<u{fl.itemsize}")
        bits_a = np.where(nan_a, 0, a.view(ui))
        bits_e = np.where(nan_e, 0, e.view(ui))
        if not np.array_equal(bits_a, bits_e):
            bad = np.argwhere(bits_a != bits_e)
            idx = tuple(bad[0])
            raise AssertionError(
                f"{len(bad)} values differ bitwise; first at {idx}: {a[idx]!r} vs {e[idx]!r}"
            )
    elif kind in "mM":
        np.testing.assert_array_equal(actual.view("<i8"), expected.view("<i8"))
    else:
        np.testing.assert_array_equal(actual, expected)


def parse_box(box: str, shape: Sequence[int]) -> tuple[slice, ...]:
    """Turn a ``--box`` string such as ``0:10,:,5:`` into a tuple of slices (test oracle)."""
    parts = box.split(",")
    assert len(parts) == len(shape)
    out = []
    for p in parts:
        lo, _, hi = p.partition(":")
        out.append(slice(int(lo) if lo else None, int(hi) if hi else None))
    return tuple(out)


# ---------------------------------------------------------------------------------------
# Data generators
# ---------------------------------------------------------------------------------------


def smooth_int16(shape: Sequence[int], seed: int = 0, noise: float = 20.0) -> np.ndarray:
    """Satellite-like smooth int16 field plus a little noise (docs/WORKLOAD.md), a few -1 fills."""
    rng = np.random.default_rng(seed)
    grids = np.meshgrid(*[np.linspace(0, 3, n) for n in shape], indexing="ij")
    field = 8000 + 6000 * np.sin(sum(g * (i + 1) for i, g in enumerate(grids)))
    field += rng.normal(0, noise, size=tuple(shape))
    out = np.clip(field, 0, 32000).astype(np.int16)
    flat = out.reshape(-1)
    flat[rng.integers(0, flat.size, size=max(1, flat.size // 1000))] = -1
    return out


def sample(dtype: str | np.dtype, shape: Sequence[int], seed: int = 0) -> np.ndarray:
    """Values of ``dtype`` that exercise the edges of the type.

    Integers span the whole range (including the minimum and maximum); floats mix smooth
    values, NaN, +-Inf, -0.0 and subnormals; datetimes include NaT; strings include
    empty and multi-byte (non-ASCII) values.
    """
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    if dt.kind == "b":
        flat = rng.integers(0, 2, size=n).astype(bool)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        flat = rng.integers(info.min, info.max, size=n, dtype=native(dt), endpoint=True).astype(dt)
        flat[:2] = [info.min, info.max]
    elif dt.kind == "f":
        flat = (np.sin(np.arange(n) / 7.0) * 100).astype(dt)
        specials = [np.nan, np.inf, -np.inf, -0.0, np.finfo(dt).tiny / 4, np.finfo(dt).max]
        pos = rng.choice(n, size=min(n, len(specials)), replace=False)
        flat[pos] = np.array(specials[: len(pos)], dtype=dt)
    elif dt.kind == "c":
        flat = (rng.normal(size=n) + 1j * rng.normal(size=n)).astype(dt)
    elif dt.kind in "mM":
        unit = np.datetime_data(dt)[0]
        base = rng.integers(-(2**40), 2**40, size=n)
        flat = base.astype(f"{dt.kind}8[{unit}]")
        flat[0] = np.array("NaT", dtype=flat.dtype)
    elif dt.kind == "U":
        words = ["", "a", "abc", "ünïcödé", "日本", "x" * dt.itemsize]
        flat = np.array([words[i % len(words)][: dt.itemsize // 4] for i in range(n)], dtype=dt)
    elif dt.kind == "S":
        words = [b"", b"a", b"ab", b"\x00b", b"zzzzzzzz"]
        flat = np.array([words[i % len(words)][: dt.itemsize] for i in range(n)], dtype=dt)
    elif dt.kind == "O":
        words = ["", "pv", "satellite", "nwp", "ünï"]
        flat = np.array([words[i % len(words)] for i in range(n)], dtype=object)
    else:  # pragma: no cover - a test asked for a dtype this helper does not know
        raise ValueError(f"no sample data for dtype {dt}")
    return flat.reshape(shape).astype(dt, copy=False)


def write_array(
    root: pathlib.Path,
    name: str,
    data: np.ndarray,
    *,
    chunks: Sequence[int],
    zarr_format: int,
    write: tuple[slice, ...] | None = None,
    dtype: Any = None,
    **kwargs: Any,
) -> pathlib.Path:
    """Create array ``root/name`` with zarr-python, store ``data`` and return its path.

    ``write`` stores only that region, so the chunks outside it stay missing (fill value).
    ``dtype`` overrides the Zarr data type (default: ``data.dtype``; ``str`` for objects).
    Other keyword arguments go to ``zarr.create_array`` (compressors, filters, fill_value,
    order, serializer, shards, chunk_key_encoding, dimension_names, attributes, ...).
    """
    import zarr

    arr = zarr.create_array(
        store=str(root / name),
        shape=data.shape,
        chunks=tuple(chunks),
        dtype=dtype if dtype is not None else (str if data.dtype.kind == "O" else data.dtype),
        zarr_format=zarr_format,
        **kwargs,
    )
    region = write if write is not None else tuple(slice(None) for _ in data.shape)
    if data.ndim == 0:
        arr[...] = data
    else:
        arr[region] = data[region]
    return root / name


def zarr_read(path: pathlib.Path, region: tuple[slice, ...] | None = None) -> np.ndarray:
    """What zarr-python reads from the array at ``path`` (optionally a region of it)."""
    import zarr

    arr = zarr.open_array(str(path), mode="r")
    return np.asarray(arr[region] if region is not None else arr[...])


def chunk_files(array_dir: pathlib.Path) -> list[pathlib.Path]:
    """The chunk objects stored under an array directory (not the metadata documents)."""
    meta = {".zarray", ".zattrs", ".zgroup", ".zmetadata", "zarr.json"}
    return sorted(p for p in array_dir.rglob("*") if p.is_file() and p.name not in meta)
