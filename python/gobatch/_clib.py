"""ctypes binding of libgobatch.so (pybind/gobatch.h): the C11 consumer half of the protocol.

The library is a plain ``CDLL``, so every call releases the GIL while it runs (a blocking wait
does not stall other Python threads). It is loaded once, on first use.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Optional

from ._protocol import COUNTER_NAME_BYTES, LAYOUT_VERSION, MAX_COUNTER_SOURCES, MAX_DIMS, TENSOR_NAME_BYTES
from .errors import GobatchError

# Return codes of gobatch.h (tests/ring/test_protocol_sync.py holds them to the header's enum).
OK = 0
TIMEOUT = -1
END = -2
EPRODUCER = -3
EDEAD = -4
ETRUNC = -5
EPROTO = -6
EFOREIGN = -7
ECLOSED = -8
ESYS = -9
EBUSY = -10
ECREATOR = -11
ELOST = -12
EREFUSED = -13
EACCES = -14
ENOENT = -15
EHELD = -16
ENOTHELD = -17

_u32 = ctypes.c_uint32
_u64 = ctypes.c_uint64


class Geometry(ctypes.Structure):
    """gb_geometry: the validated geometry of a ring (PROTOCOL.md 2.1)."""

    _fields_ = [
        ("segment_bytes", _u64),
        ("slot_stride", _u64),
        ("slot_bytes", _u64),
        ("payload_offset", _u64),
        ("start_batch", _u64),
        ("total_batches", _u64),
        ("nonce", _u64),
        ("creator_starttime", _u64),
        ("file_bytes", _u64),
        ("slot_count", _u32),
        ("tensor_count", _u32),
        ("batch_size", _u32),
        ("payload_align", _u32),
        ("creator_pid", _u32),
        ("creator_flags", _u32),
        ("counter_count", _u32),
        ("description_len", _u32),
    ]


class Tensor(ctypes.Structure):
    """gb_tensor: one validated tensor descriptor (PROTOCOL.md 2.7)."""

    _fields_ = [
        ("name", ctypes.c_char * TENSOR_NAME_BYTES),
        ("dtype", _u32),
        ("ndim", _u32),
        ("shape", _u64 * MAX_DIMS),
        ("offset", _u64),
        ("nbytes", _u64),
    ]


class Stats(ctypes.Structure):
    """gb_stats_t: the ring's counters (PROTOCOL.md 2.3, 2.4)."""

    _fields_ = [
        ("batches_written", _u64),
        ("bytes_written", _u64),
        ("producer_wait_ns", _u64),
        ("producer_busy_ns", _u64),
        ("batches_read", _u64),
        ("consumer_wait_ns", _u64),
        ("bytes_read", _u64),
        ("consumer_heartbeat", _u64),
        ("next_index", _u64),
        ("producers_active", _u32),
        ("producers_total", _u32),
    ]


class Counter(ctypes.Structure):
    """gb_counter: one named counter of the job (PROTOCOL.md 2.5a, 2.8) and its values."""

    _fields_ = [
        ("name", ctypes.c_char * COUNTER_NAME_BYTES),
        ("kind", _u32),
        ("scope", _u32),
        ("width", _u32),
        ("values", _u64 * MAX_COUNTER_SOURCES),
    ]


_lib: ctypes.CDLL | None = None


def library_path() -> Path:
    """Where libgobatch.so is loaded from: ``$GOBATCH_LIB`` if set, else the package's ``_lib``."""
    env = os.environ.get("GOBATCH_LIB")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent / "_lib" / "libgobatch.so"


def lib() -> ctypes.CDLL:
    """The loaded library, with argument and result types declared."""
    global _lib
    if _lib is not None:
        return _lib
    path = library_path()
    if not path.is_file():
        raise GobatchError(
            f"libgobatch.so not found at {path}: install the package with `pip install ./python` "
            "from a gobatch checkout (it builds the library), or set GOBATCH_LIB to a built copy"
        )
    try:
        L = ctypes.CDLL(str(path))
    except OSError as e:
        raise GobatchError(f"cannot load {path}: {e}") from e
    vp, ci, cu32 = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32
    L.gb_open.argtypes = [ci, ctypes.c_char_p, ctypes.c_size_t]
    L.gb_open.restype = vp
    L.gb_open_named.argtypes = [ctypes.c_char_p, ci, ctypes.c_char_p, ctypes.c_size_t]
    L.gb_open_named.restype = ci
    L.gb_guard_payload.argtypes = [vp, ctypes.c_size_t, ctypes.c_size_t, ci]
    L.gb_guard_payload.restype = ci
    for name in ("gb_wait_ready", "gb_next"):
        getattr(L, name).argtypes = [vp, ci]
        getattr(L, name).restype = ci
    L.gb_release.argtypes = [vp, cu32]
    L.gb_release.restype = ci
    L.gb_release_next.argtypes = [vp, ci, ci]
    L.gb_release_next.restype = ci
    L.gb_held.argtypes = [vp]
    L.gb_held.restype = cu32
    for name in ("gb_register", "gb_creator_alive"):
        getattr(L, name).argtypes = [vp]
        getattr(L, name).restype = ci
    for name in ("gb_close", "gb_discard"):
        getattr(L, name).argtypes = [vp]
        getattr(L, name).restype = None
    L.gb_geometry_get.argtypes = [vp, ctypes.POINTER(Geometry)]
    L.gb_geometry_get.restype = ci
    L.gb_tensor_get.argtypes = [vp, cu32, ctypes.POINTER(Tensor)]
    L.gb_tensor_get.restype = ci
    L.gb_stats.argtypes = [vp, ctypes.POINTER(Stats)]
    L.gb_stats.restype = ci
    L.gb_counter_get.argtypes = [vp, cu32, ctypes.POINTER(Counter)]
    L.gb_counter_get.restype = ci
    L.gb_description_get.argtypes = [vp, ctypes.c_char_p, ctypes.c_size_t]
    L.gb_description_get.restype = ci
    L.gb_error.argtypes = [vp]
    L.gb_error.restype = ctypes.c_char_p
    L.gb_base.argtypes = [vp]
    L.gb_base.restype = ctypes.c_size_t
    L.gb_process_alive.argtypes = [cu32, ctypes.c_uint64]
    L.gb_process_alive.restype = ci
    L.gb_process_starttime.argtypes = [cu32]
    L.gb_process_starttime.restype = ctypes.c_uint64
    L.gb_abi.argtypes = [cu32]
    L.gb_abi.restype = cu32
    want = (LAYOUT_VERSION, ctypes.sizeof(Geometry), ctypes.sizeof(Tensor), ctypes.sizeof(Stats), ctypes.sizeof(Counter))
    got = tuple(L.gb_abi(i) for i in range(len(want)))
    if got != want:
        raise GobatchError(f"{path} does not match this gobatch package (abi {got}, expected {want}); reinstall it")
    _lib = L
    return L


def description(ptr: int, n: int) -> bytes:
    """The batch description of a ready ring (PROTOCOL.md 2.9): its ``n`` bytes
    (``Geometry.description_len``), checked as UTF-8 by the library at attach."""
    if n == 0:
        return b""
    buf = ctypes.create_string_buffer(n)
    got = lib().gb_description_get(ptr, buf, n)
    return buf.raw[:got] if got >= 0 else b""


def error_text(ptr: Optional[int]) -> str:
    """The message of the last failed call on a ring."""
    if not ptr:
        return ""
    raw = lib().gb_error(ptr)
    return raw.decode("utf-8", "replace") if raw else ""


def process_alive(pid: int, starttime: int) -> bool:
    """PROTOCOL.md 3.5: the process exists, is not a zombie, and has that start time."""
    return bool(lib().gb_process_alive(pid, starttime))


def process_starttime(pid: int) -> int:
    """Field 22 of /proc/<pid>/stat, 0 if there is no such process."""
    return int(lib().gb_process_starttime(pid))
