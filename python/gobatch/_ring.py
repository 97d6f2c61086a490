"""The consumer side of one ring: attach, validate, register, iterate zero-copy batches."""

from __future__ import annotations

import atexit
import ctypes
import fcntl
import gc
import logging
import math
import mmap
import os
import re
import struct
import sys
import threading
import time
import warnings
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Type

import numpy as np

from . import _clib as _lib
from . import _protocol as _proto
from .errors import (
    GobatchError,
    GobatchWarning,
    LoaderError,
    RingError,
    RingPermissionError,
    RingTruncatedError,
    SlotsHeldError,
    StreamEndedError,
    UnsafeRingError,
)

__all__ = ["Batch", "Ring", "TensorSpec", "attach", "SHM_DIR", "shm_dir"]

SHM_DIR = _proto.DEFAULT_SHM_DIR
_SHM_DIR_ENV = "GOBATCH_SHM_DIR"  # moves named rings, as it does for shmloader
_NAME_RE = re.compile(rf"^[{_proto.SEGMENT_NAME_CHARS}]{{1,{_proto.SEGMENT_NAME_MAX}}}$")
_POLL_MS = 100  # the longest a C call blocks: Python handles Ctrl-C at least this often
STALL_WARNING_S = 30.0  # default stall_warning_s: a next() waiting this long warns, and again each period
_log = logging.getLogger("gobatch")

# PROTOCOL.md 2.7 dtype codes -> little-endian NumPy dtypes (the protocol's byte order).
_DTYPES: Dict[int, np.dtype] = {code: np.dtype(name).newbyteorder("<") for code, (name, _) in _proto.DTYPES.items()}

_ndarray = np.ndarray
_refcount = sys.getrefcount


class _SlotMemory(np.ndarray):
    """The arrays that hold a slot's memory for the ring, made once at attach over the mapping
    (Ring._lender). Never handed out."""


class Batch(dict):  # type: ignore[type-arg]
    """One batch: a dict ``{tensor name: array or tensor}`` of views into one ring slot.

    The slot is lent to the batch: it goes back to the producers when the last view of the
    batch is gone (this dict's arrays or tensors and every view derived from them; the dict
    itself holds them), or at :meth:`release`, or when a ``with batch:`` block ends. Until then
    its values never change. After :meth:`release` the batch is empty, and arrays of it that
    are still referenced may be overwritten by later batches: copy what you keep beyond it."""

    __slots__ = ("_lease",)

    _lease: Optional[Tuple["weakref.ref[Ring]", int, Any]]  # (ring, slot, lease token) until released

    def release(self) -> None:
        """Hand the slot back to the producers now and empty the batch (idempotent). Raises
        :class:`LoaderError` when a tensor of the batch was written in place (torch)."""
        lease, self._lease = self._lease, None
        dict.clear(self)  # first: views gone with it need no new storage (torch)
        if lease is not None:
            ring = lease[0]()
            if ring is not None:
                ring._end_lease(lease[1], lease[2])

    @property
    def released(self) -> bool:
        """True once :meth:`release` ran (the batch is then empty)."""
        return self._lease is None

    def __enter__(self) -> "Batch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __missing__(self, key: str) -> Any:
        if self._lease is None:
            raise LoaderError(f"the batch was released, so its tensors are gone (read {key!r} before "
                              "release() or the end of the with block, or copy it)")
        raise KeyError(key)

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))  # pickled as a plain dict (of copies)

    def __repr__(self) -> str:
        state = "released" if self._lease is None else f"slot {self._lease[1]}"
        return f"<gobatch.Batch ({state}) {list(dict.keys(self))}>"


@dataclass(frozen=True)
class TensorSpec:
    """One tensor of every batch: its name, full shape (dimension 0 is the batch) and dtype."""

    name: str
    shape: Tuple[int, ...]
    dtype: np.dtype
    offset: int
    nbytes: int


# Every ring opened by this process, so that a fork child can mark them foreign.
_open_rings: "weakref.WeakSet[Ring]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for r in list(_open_rings):
        r._foreign = True


os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _close_at_exit() -> None:
    for r in list(_open_rings):
        if not r._foreign:
            try:
                r.close()
            except Exception:  # interpreter shutdown: nothing useful to report
                pass


class Ring:
    """A gobatch ring, attached as its one consumer. Use :func:`attach` or :class:`gobatch.Loader`.

    Iterating yields one :class:`Batch` per step, in stream order: a dict ``{tensor name:
    array}`` of read-only NumPy arrays (``framework="numpy"``) or torch tensors
    (``framework="torch"``), views into the batch's shared slot. The slot is lent to the batch
    until its last view is gone (given back by the next ``next()``), or :meth:`Batch.release`,
    or a ``with batch:`` block ends, so a kept tensor never changes. When the next batch's slot
    is still lent, ``next()`` raises :class:`SlotsHeldError` instead of waiting: copy what you
    keep (``tensor.clone()``, ``arr.copy()``, a ``.to(device)`` copy) or raise ``[ring] slots``.
    The usual ``for batch in loader:`` holds two slots during a step (it drops the previous
    batch when it rebinds ``batch``).

    A failure of the stream (a producer's error or death, a protocol error) is sticky: that
    ``next()`` and every later one raise the same exception, never a later batch in its place.
    A ``next()`` that waits ``stall_warning_s`` seconds (:func:`attach` and
    :class:`gobatch.Loader` take it; 30 s by default) issues a :class:`gobatch.GobatchWarning`
    and a ``gobatch`` log record naming each producer process's state (running, stopped, a
    zombie, gone), again every ``stall_warning_s`` while it waits; the wait itself goes on.

    A ring is not meant to be iterated from several threads at once; :meth:`close` may be called
    from any thread, and batches may be dropped or released in any thread.
    """

    _foreign = False
    _ptr: Optional[int] = None
    _mm: Optional[mmap.mmap] = None
    _shm_path: Optional[str] = None
    _label = "ring"
    _framework = "numpy"
    _torch = False
    _stall_warning_s = STALL_WARNING_S  # set by attach() and Loader (see _stall_seconds)

    def __init__(
        self,
        fd: int,
        *,
        framework: str = "numpy",
        label: str = "ring",
        timeout: float = 30.0,
        shm_path: Optional[str] = None,
        sealed: bool = False,
        _tick: Optional[Callable[[], None]] = None,
    ) -> None:
        """Attach to the segment open as ``fd`` (borrowed: the caller closes it afterwards).

        ``timeout`` bounds the wait for the ring to become READY; ``_tick`` is called about every
        100 ms while waiting (Loader uses it to watch its child). With ``sealed`` the segment
        must be a memfd sealed against shrinking and growing (PROTOCOL.md 1), else
        :class:`RingTruncatedError`."""
        _check_framework(framework)
        self._foreign = False
        self._ptr: Optional[int] = None
        self._mm: Optional[mmap.mmap] = None
        self._label = label
        self._framework = framework
        self._shm_path = shm_path
        self._lock = threading.Lock()
        self._failure: Optional[BaseException] = None
        self._delivered = 0  # batches handed out so far
        self._tick = _tick
        self._creator_alive: Callable[[], bool] = lambda: True
        # Leases: per slot the lease token of the batch lent there (None when not lent).
        # numpy (_new_arrays): per slot its arrays, the tensors' names, the slots lent, and the
        # reference count of an array nothing but the slot holds; torch: per slot the function
        # that lends it, its storage and tensors (_TorchSlot), and per lent slot the tensors'
        # versions at lending; an in-place write found when a lease ended.
        self._selfref = weakref.ref(self)
        self._lenders: List[Callable[[], Batch]] = []
        self._names: Tuple[str, ...] = ()
        self._memories: List[List[_SlotMemory]] = []
        self._arrays: List[List[np.ndarray]] = []
        self._items: List[Dict[str, np.ndarray]] = []  # per slot: its arrays by name (a batch's contents)
        self._lent: List[int] = []
        self._idle_refs = 0
        self._leases: List[Any] = []
        self._torch_slots: List[_TorchSlot] = []
        self._versions: Dict[int, List[int]] = {}
        self._write_error: Optional[LoaderError] = None
        L = _lib.lib()
        self._next = L.gb_release_next
        self._release = L.gb_release
        err = ctypes.create_string_buffer(1024)
        ptr = L.gb_open(fd, err, len(err))
        if not ptr:
            raise RingError(f"{label}: {err.value.decode('utf-8', 'replace')}")
        self._ptr = ptr
        registered = False
        try:
            self._wait_ready(timeout, fd)
            if sealed:
                _check_sealed(fd, label)
            if L.gb_register(ptr) != _lib.OK:
                raise RingError(f"{label}: {_lib.error_text(ptr)}")
            registered = True
            self._load_geometry()
            self._map_payload(fd)
        except BaseException:
            # Not yet handed to the caller: detach (if registered) so the producers stop.
            (L.gb_close if registered else L.gb_discard)(ptr)
            self._ptr = None
            raise
        st = os.fstat(fd)
        self._file_id = (st.st_dev, st.st_ino)
        self._t_attach = time.monotonic()
        _open_rings.add(self)

    # ---- set-up ----

    def _wait_ready(self, timeout: float, fd: int) -> None:
        L = _lib.lib()
        deadline = time.monotonic() + timeout
        while True:
            rc = L.gb_wait_ready(self._ptr, _POLL_MS)
            if rc == _lib.OK:
                return
            if rc == _lib.ECREATOR and self._shm_path:
                _unlink_if_same(self._shm_path, fd)  # PROTOCOL.md 1: its creator is dead
            if rc != _lib.TIMEOUT:
                raise RingError(f"{self._label}: {_lib.error_text(self._ptr)}")
            if self._tick is not None:
                self._tick()
            if time.monotonic() >= deadline:
                raise RingError(f"{self._label}: not ready after {timeout:g} s ({_lib.error_text(self._ptr)})")

    def _load_geometry(self) -> None:
        L = _lib.lib()
        g = _lib.Geometry()
        L.gb_geometry_get(self._ptr, ctypes.byref(g))
        self._geom = g
        specs = []
        for i in range(g.tensor_count):
            t = _lib.Tensor()
            L.gb_tensor_get(self._ptr, i, ctypes.byref(t))
            specs.append(
                TensorSpec(
                    name=t.name.decode("ascii"),
                    shape=tuple(int(t.shape[k]) for k in range(t.ndim)),
                    dtype=_DTYPES[t.dtype],
                    offset=int(t.offset),
                    nbytes=int(t.nbytes),
                )
            )
        self._specs = specs
        pid, start = int(g.creator_pid), int(g.creator_starttime)
        self._creator_alive = lambda: _lib.process_alive(pid, start)

    def _map_payload(self, fd: int) -> None:
        g = self._geom
        torch_mode = self._framework == "torch"
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if torch_mode else 0)
        try:
            self._mm = mmap.mmap(fd, g.segment_bytes, flags=mmap.MAP_SHARED, prot=prot)
        except OSError as e:
            raise RingError(f"{self._label}: mmap of {g.segment_bytes} bytes failed: {e}") from e
        # A named ring's file can be truncated under us (PROTOCOL.md 1.1): the library's SIGBUS
        # guard turns a touch of a cut page into zeros and a RingTruncatedError at next().
        addr = np.frombuffer(self._mm, dtype=np.uint8, count=1).ctypes.data
        _lib.lib().gb_guard_payload(self._ptr, addr, g.segment_bytes, int(torch_mode))
        n = int(g.slot_count)
        self._torch = torch_mode
        self._leases = [None] * n
        if torch_mode:
            self._torch_slots = [_TorchSlot(self._mm, g.payload_offset + s * g.slot_stride, self._specs)
                                 for s in range(n)]
            self._lenders = [self._torch_lender(s) for s in range(n)]
        else:
            self._names = tuple(t.name for t in self._specs)
            self._memories = [[_slot_memory(self._mm, t.dtype, g.payload_offset + s * g.slot_stride + t.offset, t.shape)
                               for t in self._specs] for s in range(n)]
            self._arrays = [self._new_arrays(s) for s in range(n)]
            self._items = [dict(zip(self._names, arrays)) for arrays in self._arrays]
            self._idle_refs = _max_refs(self._arrays[0])

    def _new_arrays(self, slot: int) -> List[np.ndarray]:
        """numpy: the arrays that batches lent from ``slot`` hand out, one per tensor, made once
        and reused by every batch of the slot (renewed only when a lease ends while they are
        still referenced, _forget_lent).

        NumPy collapses a new view's ``base`` to the first array up the chain that owns its data,
        has a base that is not an array, or has a base of another type than the view. Each
        tensor's memory is held by a _SlotMemory array over the mapping (_slot_memory, made at
        attach); these arrays are plain-ndarray views of it, so every view derived from one of
        them (a slice, reshape, ``view``, ``np.asarray``, a memoryview or torch.from_numpy of it)
        holds a reference to it: the slot's batch is alive exactly as long as some array of the
        slot has more references than the ring's own (_max_refs), which CPython's reference
        counts show at no cost until the next next() reads them."""
        arrays = [m.view(_ndarray) for m in self._memories[slot]]
        if slot < len(self._items):
            self._items[slot] = dict(zip(self._names, arrays))
        return arrays

    def _lend_arrays(self, slot: int) -> Batch:
        """numpy (the lock is held): lends ``slot`` to a new Batch of its arrays."""
        token = self._leases[slot] = self._delivered
        self._lent.append(slot)
        batch = Batch(self._items[slot])
        batch._lease = (self._selfref, slot, token)
        return batch

    def _collect_ended(self) -> int:
        """numpy (the lock is held): ends the lease of every lent slot whose arrays nothing but
        the ring references any more, and gives all of them back but one, which it returns for
        the C call that takes the next batch (-1 when none ended). The counts are read by
        _max_refs, the function that measured _idle_refs, so that both count the same
        references whatever the interpreter adds for a call."""
        keep, more, idle, arrays, lent = -1, None, self._idle_refs, self._arrays, self._lent
        for slot in lent:
            if _max_refs(arrays[slot]) > idle:
                continue
            if keep < 0:
                keep = slot
            elif more is None:
                more = [slot]
            else:
                more.append(slot)
        if keep < 0:
            return -1
        self._leases[keep] = None
        lent.remove(keep)
        for slot in more or ():
            self._leases[slot] = None
            lent.remove(slot)
            if self._ptr is not None:
                self._release(self._ptr, slot)
        return keep

    def _forget_lent(self, slot: int) -> None:
        """numpy, a lease ended by release() (the lock is held): the slot is no longer lent, and
        if views of its batch are still referenced the slot gets new arrays, so that they do not
        count as views of its next batch."""
        if slot in self._lent:
            self._lent.remove(slot)
            if _max_refs(self._arrays[slot]) > self._idle_refs:
                self._arrays[slot] = self._new_arrays(slot)

    def _torch_lender(self, slot: int) -> Callable[[], Batch]:
        """torch: the function that lends ``slot`` to a new Batch (the lock is held): per tensor
        a ``detach()`` of the slot's own tensor, which shares its storage and version counter.
        The lease ends when the storage's use count is back to the slot's own (_poll_torch, at
        each next(): every tensor, view or ``.numpy()`` array of the batch holds the storage),
        and the version counters show an in-place write through any of them."""
        ts, leases, versions, selfref = self._torch_slots, self._leases, self._versions, self._selfref

        def lend_torch() -> Batch:
            tensors = ts[slot].tensors
            token = leases[slot] = object()
            batch = Batch({name: t.detach() for name, t in tensors})
            batch._lease = (selfref, slot, token)
            versions[slot] = [t._version for _, t in tensors]
            return batch

        return lend_torch

    # ---- properties ----

    @property
    def framework(self) -> str:
        """``"numpy"`` or ``"torch"``."""
        return self._framework

    @property
    def specs(self) -> Dict[str, TensorSpec]:
        """The tensors of every batch, in table order."""
        return {t.name: t for t in self._specs}

    @property
    def slots(self) -> int:
        """Batches in flight (the ring's slot count)."""
        return int(self._geom.slot_count)

    @property
    def batch_size(self) -> int:
        """Examples per batch, as the producer declared it."""
        return int(self._geom.batch_size)

    @property
    def start_batch(self) -> int:
        """Stream index of the ring's first batch."""
        return int(self._geom.start_batch)

    @property
    def next_batch(self) -> int:
        """Stream index of the batch the next request returns (``start_batch`` + batches
        handed out so far)."""
        return int(self._geom.start_batch) + self._delivered

    @property
    def total_batches(self) -> Optional[int]:
        """Batches in the ring's stream, ``None`` when unbounded."""
        n = int(self._geom.total_batches)
        return n or None

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran (or attaching failed)."""
        return self._ptr is None

    def __len__(self) -> int:
        n = int(self._geom.total_batches)
        if n == 0:
            raise TypeError(f"{self._label} streams without end (batch.batches = 0): it has no len()")
        return n

    # ---- iteration ----

    def __iter__(self) -> Iterator[Batch]:
        """The ring itself: each ``for`` continues where the last one stopped. A bounded stream
        that has been read to its end raises :class:`StreamEndedError` instead of silently
        yielding nothing."""
        if self._read_to_end():
            raise StreamEndedError(self._ended_message())
        return self

    def _read_to_end(self) -> bool:
        """True when every batch of a bounded stream has been handed out."""
        total = int(self._geom.total_batches) if self._ptr is not None else 0
        return total != 0 and self._delivered >= total

    def _ended_message(self) -> str:
        n = int(self._geom.total_batches)
        return (f"{self._label}: its stream (batches {self.start_batch} .. {self.start_batch + n - 1}) "
                "has been read to the end, so iterating it again would yield nothing; start a new "
                "producer (shmloader run) and attach to it to read more")

    def __next__(self) -> Batch:
        if self._foreign:
            raise self._foreign_error()
        if self._failure is not None:
            # Sticky: the stream is broken at this batch; asking the C side again would step
            # past it (every later index off by one). A fresh traceback for each raise.
            raise self._failure.with_traceback(None)
        if self._write_error is not None:
            self._settle_leases()  # raises it
        with self._lock:
            ptr = self._ptr
            if ptr is None:
                raise self._closed_error()
            # One C call gives back the slot of a batch dropped since the last call (the usual
            # loop drops one per step) and takes the next.
            if not self._torch:
                rel = self._collect_ended() if self._lent else -1
            elif self._versions:
                rel = self._poll_torch(keep_one=True)
                if self._write_error is not None:  # a lent batch was written in place: revoked
                    if rel >= 0:
                        self._release(ptr, rel)
                    self._raise_write_error()
            else:
                rel = -1
            rc: int = self._next(ptr, rel, _POLL_MS)
            if rc >= 0:
                self._delivered += 1
                if self._torch:
                    return self._lenders[rc]()
                # _lend_arrays, inlined
                token = self._leases[rc] = self._delivered
                self._lent.append(rc)
                batch = Batch(self._items[rc])
                batch._lease = (self._selfref, rc, token)
                return batch
        return self._next_slow(rc)

    def _next_slow(self, rc: int) -> Batch:
        t0 = time.monotonic()
        warn_at = t0 + self._stall_warning_s
        while True:
            if rc == _lib.END:
                raise StopIteration
            if rc == _lib.EHELD:
                self._free_next_slot()  # raises SlotsHeldError, or the slot is free: ask again
            elif rc != _lib.TIMEOUT and not self._recover(rc):
                raise self._fail(rc)
            if self._tick is not None:
                self._tick()
            now = time.monotonic()
            if now >= warn_at:  # never a silent wait: say what the producers are doing, wait on
                self._warn_stall(now - t0)
                warn_at = now + self._stall_warning_s
            with self._lock:
                ptr = self._ptr
                if ptr is None:
                    raise self._closed_error()
                # a batch dropped while this call waits (another thread) goes back now
                rc = int(self._next(ptr, self._collect_ended() if self._lent else -1, _POLL_MS))
                if rc >= 0:
                    self._delivered += 1
                    return self._lenders[rc]() if self._torch else self._lend_arrays(rc)

    def _fail(self, rc: int) -> BaseException:
        if self._failure is not None:
            return self._failure
        if rc == _lib.ECLOSED:
            return self._closed_error()
        text = _lib.error_text(self._ptr) if self._ptr else ""
        if rc == _lib.EFOREIGN:
            return self._foreign_error()
        if rc == _lib.ELOST and self._shm_path:
            _unlink_if_same(self._shm_path, self._file_id)  # a cut ring cannot go on: leave nothing
        cls = RingTruncatedError if rc == _lib.ELOST else RingError if rc == _lib.EPROTO else LoaderError
        if rc == _lib.EDEAD:
            text += self._death_note()
        exc = self._producer_failure(cls, f"{self._label}: {text}")
        self._failure = exc
        return exc

    def _recover(self, rc: int) -> bool:
        """Whether a failure code from the C side is recovered from (the wait goes on) rather
        than raised. A plain ring recovers from nothing; Loader restarts a dead child."""
        return False

    def _death_note(self) -> str:
        """What follows a producer's death, for its error message (Loader: a node loader's)."""
        return ""

    def _producer_failure(self, cls: Type[LoaderError], message: str) -> BaseException:
        """Builds the exception for a producer-side failure (Loader adds its child's stderr)."""
        return cls(message)

    # ---- stalls ----

    def _warn_stall(self, waited: float) -> None:
        """A GobatchWarning and a log line: how long next() has waited, and each producer's state."""
        msg = (f"{self._label}: no batch for {waited:.1f} s (waiting for stream batch {self.next_batch}, "
               f"stall_warning_s={self._stall_warning_s:g}); {'; '.join(self._producer_states())}; "
               "still waiting")
        _log.warning(msg)
        warnings.warn(msg, GobatchWarning, stacklevel=4)  # at the caller's next() / for

    def _producer_states(self) -> List[str]:
        """One phrase per live producer of the registry (PROTOCOL.md 2.6): its pid and process state."""
        out = []
        for pid, start, batches in self._live_producers():
            out.append(f"producer pid {pid} {process_state(pid, start)}, {batches} batches written")
        return out or ["no live producer is registered"]

    def _live_producers(self) -> List[Tuple[int, int, int]]:
        """(pid, start time, batches written) of each CLAIMING or ACTIVE registry entry."""
        mm = self._mm
        if mm is None:
            return []
        f = _proto.REGISTRY_FIELDS
        live = []
        for e in range(_proto.MAX_PRODUCERS):
            base = _proto.REGISTRY_BASE + e * _proto.REGISTRY_STRIDE
            (state,) = struct.unpack_from(f["state"][1], mm, base + f["state"][0])
            if state not in (_proto.ENTRY_CLAIMING, _proto.ENTRY_ACTIVE):
                continue
            (pid,) = struct.unpack_from(f["pid"][1], mm, base + f["pid"][0])
            (start,) = struct.unpack_from(f["starttime"][1], mm, base + f["starttime"][0])
            (batches,) = struct.unpack_from(f["batches"][1], mm, base + f["batches"][0])
            if pid:
                live.append((int(pid), int(start), int(batches)))
        return live

    # ---- leases ----

    def _end_lease(self, slot: int, token: Any) -> None:
        """Batch.release(): gives the slot back now, then raises an in-place write found."""
        if self._foreign:
            raise self._foreign_error()
        with self._lock:
            if self._leases[slot] is token:
                self._leases[slot] = None
                self._note_writes(slot)
                self._forget_lent(slot)
                if self._ptr is not None:
                    self._release(self._ptr, slot)
            self._release_ended()  # numpy: others may have ended as this batch let go of its views
        self._raise_write_error()

    def _note_writes(self, slot: int, clean: bool = False) -> None:
        """torch, a lease ending: keeps the error for a tensor of the slot's batch written in
        place while lent (raised by the next next(), release() or close()). A batch released
        while referenced leaves tensors on the slot's storage: the slot gets a new one, so that
        they do not count as views of its next batch. ``clean``: the caller found the batch
        unwritten and its storage unused just now."""
        versions = self._versions.pop(slot, None)
        if versions is None or clean:
            return
        if self._write_error is None:
            self._write_error = self._written(slot, versions)
        ts = self._torch_slots[slot]
        if not ts.unused():
            self._torch_slots[slot] = ts.renewed()

    def _written(self, slot: int, versions: List[int]) -> Optional[LoaderError]:
        for (name, t), version in zip(self._torch_slots[slot].tensors, versions):
            if t._version != version:
                return LoaderError(
                    f"{self._label}: tensor {name!r} was modified in place while it was lent out; "
                    "batches are read-only views of shared memory (clone() a tensor before changing it)"
                )
        return None

    def _release_ended(self) -> None:
        """numpy (the lock is held): gives back every lent slot whose lease ended."""
        if self._lent:
            slot = self._collect_ended()
            if slot >= 0 and self._ptr is not None:
                self._release(self._ptr, slot)

    def _settle_leases(self) -> None:
        """Gives back slots whose lease ended (numpy: _collect_ended; torch: _poll_torch) and
        raises an in-place write found."""
        with self._lock:
            self._release_ended()
            if self._versions:
                self._poll_torch()
        self._raise_write_error()

    def _poll_torch(self, keep_one: bool = False) -> int:
        """torch (the lock is held): gives back each lent slot whose storage no view uses any
        more, and revokes a lent batch written in place (its slot goes back although the batch
        is referenced, since it no longer holds the producers' data and keeping it would stall
        the stream), keeping the write's error. With ``keep_one`` the first such slot is not
        given back but returned, for the C call that takes the next batch (-1: none)."""
        keep = -1
        for slot, versions in list(self._versions.items()):
            written = self._written(slot, versions)
            if written is None and not self._torch_slots[slot].unused():
                continue
            self._leases[slot] = None  # a revoked batch's token no longer matches: no second release
            self._note_writes(slot, clean=written is None)
            if keep_one and keep < 0:
                keep = slot
            elif self._ptr is not None:
                self._release(self._ptr, slot)
        return keep

    def _raise_write_error(self) -> None:
        err, self._write_error = self._write_error, None
        if err is not None:
            raise err

    def _free_next_slot(self) -> None:
        """gb_next found the next batch's slot still lent. Views caught in reference cycles are
        freed by a collection; if the slot is still lent after that, SlotsHeldError."""
        slot = self._delivered % int(self._geom.slot_count)
        if self._leases[slot] is not None:
            gc.collect()
        self._settle_leases()
        if self._leases[slot] is None:
            return
        held = sum(token is not None for token in self._leases)
        n = int(self._geom.slot_count)
        raise SlotsHeldError(
            f"{self._label}: {held} of {n} slots hold batches that are still referenced, and the next batch "
            f"({self.next_batch}) needs slot {slot}, which holds batch {self.next_batch - n}. A batch is never "
            "overwritten while a view of it (the batch, an array or tensor of it, or one derived from them) "
            "is alive, so gobatch cannot wait for it: drop batches when done (del, batch.release() or "
            f"`with batch:`), copy what you keep (tensor.clone(), array.copy()), or raise [ring] slots (now {n}; "
            "the usual `for batch in loader:` holds 2 while it fetches the next)",
            held=held, slots=n)

    def release(self) -> None:
        """Hand the slot of the batch handed out last back to the producers now, even if the
        batch is still referenced (its arrays may then be overwritten), and the slots of
        batches already gone. Prefer ``batch.release()`` or ``with batch:``."""
        if self._foreign:
            raise self._foreign_error()
        with self._lock:
            if self._delivered and self._ptr is not None:
                slot = (self._delivered - 1) % int(self._geom.slot_count)
                if self._leases[slot] is not None:
                    self._leases[slot] = None
                    self._note_writes(slot)
                    self._forget_lent(slot)
                    self._release(self._ptr, slot)
        self._settle_leases()

    # ---- statistics ----

    def stats(self) -> Dict[str, Any]:
        """Counters of the ring: batches and bytes read, time the consumer waited for batches and
        the producers for free slots, rates since attach; the sampler's cache counters, and per
        source (lists indexed by the source's position in the configuration) ``chunks_decoded``,
        ``chunks_missing`` (chunks not stored, read as the fill value) and
        ``missing_chunk_fraction``."""
        if self._foreign:
            raise self._foreign_error()
        s = _lib.Stats()
        with self._lock:
            if self._ptr is None:
                raise self._closed_error()
            _lib.lib().gb_stats(self._ptr, ctypes.byref(s))
        elapsed = max(time.monotonic() - self._t_attach, 1e-9)
        delivered, nbytes = self._delivered, self._delivered * int(self._geom.slot_bytes)
        return {
            # Batches handed to the trainer (the held one included) and their bytes; the ring's
            # own batches_read counter counts slots given back.
            "batches": delivered,
            "bytes": nbytes,
            "consumer_wait_s": s.consumer_wait_ns / 1e9,
            "producer_wait_s": s.producer_wait_ns / 1e9,
            "producer_busy_s": s.producer_busy_ns / 1e9,
            "batches_written": int(s.batches_written),
            "bytes_written": int(s.bytes_written),
            "elapsed_s": elapsed,
            "batches_per_s": delivered / elapsed,
            "bytes_per_s": nbytes / elapsed,
            "next_index": int(s.next_index),
            "producers_active": int(s.producers_active),
            "producers": int(s.producers_total),
            "slots": int(self._geom.slot_count),
            # The job's own figures (PROTOCOL.md 2.5a): the sampler's decoded-chunk cache and,
            # with locality sampling, the distinct time segments per batch. 0 without them.
            "cache_hits": int(s.cache_hits),
            "cache_misses": int(s.cache_misses),
            "cache_evictions": int(s.cache_evictions),
            "cache_hit_rate": s.cache_hits / lookups if (lookups := s.cache_hits + s.cache_misses) else 0.0,
            "cache_bytes": int(s.cache_bytes),
            "cache_budget_bytes": int(s.cache_budget),
            "segments_per_batch": s.segments_sum / s.segments_batches if s.segments_batches else 0.0,
            # Per source (entry i: the configuration's source i, up to the last source that
            # decoded a chunk): chunks decoded, those not stored (read as the fill value), and
            # their fraction. A store cut short shows here instead of as silent NaN.
            **_chunk_counts(s),
        }

    # ---- closing ----

    def close(self) -> None:
        """Give back the slots of batches that are gone, detach (producers see CLOSED and stop)
        and unmap.

        Batches and arrays still referenced stay readable and unchanged (their memory stays
        mapped until they are freed; their slots are never written again). Idempotent."""
        if self._foreign:
            raise self._foreign_error()
        written: Optional[LoaderError] = None
        if self._ptr is not None:
            try:
                self._settle_leases()
            except LoaderError as e:
                written = e
        try:
            self._close_ring()
        finally:
            self._after_close()
        if written is not None:
            raise written

    def _after_close(self) -> None:
        """Called by close() after the ring is closed (Loader stops its child here)."""

    def _close_ring(self) -> None:
        if self._ptr is None:
            return
        with self._lock:
            ptr, self._ptr = self._ptr, None
            if ptr is None:
                return
            creator_gone = not self._creator_alive()
            _lib.lib().gb_close(ptr)
        _open_rings.discard(self)
        self._lenders, self._versions, self._torch_slots = [], {}, []
        self._memories, self._arrays, self._items, self._lent = [], [], [], []
        self._leases[:] = [None] * len(self._leases)  # lent batches keep their views; a release() of one gives nothing back
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:
                pass  # the caller still holds arrays: the mapping lives until they are freed
            self._mm = None
        if self._shm_path and creator_gone:
            _unlink_if_same(self._shm_path, self._file_id)  # PROTOCOL.md 3.6: an orphaned name

    def __reduce__(self) -> Any:
        raise TypeError(
            f"{self._label} cannot be pickled or sent to another process: a ring has one consumer; "
            "create the Loader (or attach) in the process that iterates it"
        )

    def __enter__(self) -> "Ring":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if self._foreign:
            return  # a fork child never touches the parent's ring
        try:
            self._close_ring()
            self._after_close()
        except Exception:
            pass

    def _closed_error(self) -> LoaderError:
        return LoaderError(f"{self._label} is closed")

    def _foreign_error(self) -> LoaderError:
        return LoaderError(
            f"{self._label} belongs to the process that opened it; this forked child cannot use it "
            "(create a Loader in the child, or iterate only in the parent)"
        )

    def __repr__(self) -> str:
        state = "closed" if self._ptr is None else f"{self._geom.slot_count} slots"
        return f"<gobatch {self._label} {self._framework} {state}>"


def _max_refs(arrays: List[np.ndarray]) -> int:
    """The largest reference count among a slot's arrays, as read here: Ring._idle_refs is this
    for arrays that nothing but the ring holds, so a larger count means a view of the slot's
    batch is alive."""
    most = 0
    for a in arrays:
        n = _refcount(a)
        if n > most:
            most = n
    return most


def _slot_memory(mm: mmap.mmap, dtype: np.dtype, offset: int, shape: Tuple[int, ...]) -> _SlotMemory:
    """A _SlotMemory array of ``shape`` at ``offset`` of the mapping. ``numpy.frombuffer``
    holds a buffer export of the mapping for as long as the array or any view of it lives, so
    that close() cannot unmap memory that a kept batch points into. It is viewed as _SlotMemory
    twice, so that the result's own base is a _SlotMemory too: a plain-ndarray view of the
    result then stops collapsing its base at the result (see Ring._lender)."""
    flat = np.frombuffer(mm, dtype=dtype, count=int(np.prod(shape)), offset=offset)
    return flat.reshape(shape).view(_SlotMemory).view(_SlotMemory)


class _TorchSlot:
    """torch: one slot's storage (one for all its tensors, so that one use count shows every
    view of any of them) and per tensor a tensor of its own over it (its own version counter,
    named in the in-place write error). Batches get ``detach()`` copies of the tensors."""

    def __init__(self, mm: mmap.mmap, base: int, specs: List[TensorSpec]) -> None:
        import torch  # imported only when asked for

        raw = _slot_memory(mm, np.dtype(np.uint8), base, (max(t.offset + t.nbytes for t in specs),))
        self._args = (mm, base, specs)
        self.storage = torch.from_numpy(raw.view(_ndarray)).untyped_storage()
        self.tensors: List[Tuple[str, Any]] = []
        for t in specs:
            dtype = torch.from_numpy(np.empty(0, dtype=t.dtype)).dtype
            strides, step = [], 1
            for n in reversed(t.shape):
                strides.append(step)
                step *= n
            view = torch.empty(0, dtype=dtype).set_(self.storage, t.offset // t.dtype.itemsize, t.shape,
                                                    tuple(reversed(strides)))
            self.tensors.append((t.name, view))
        self._use_count = torch._C._storage_Use_Count
        self._cdata = self.storage._cdata  # the storage's address, valid while self.storage lives
        self._own_uses = self._use_count(self._cdata)

    def unused(self) -> bool:
        """True when nothing but this slot uses the storage: no tensor, view or array of a
        batch lent from it is left."""
        return self._use_count(self._cdata) == self._own_uses

    def renewed(self) -> "_TorchSlot":
        """The same memory with a new storage and tensors."""
        return _TorchSlot(*self._args)


def _check_framework(framework: str) -> None:
    """Refuses an unknown framework, and "torch" when torch cannot be imported, before any
    process is started or ring attached."""
    if framework not in ("numpy", "torch"):
        raise ValueError(f"framework must be 'numpy' or 'torch', not {framework!r}")
    if framework == "torch":
        try:
            import torch  # noqa: F401  (imported only when asked for)
        except ImportError as e:
            raise GobatchError(f"framework='torch' needs PyTorch, which cannot be imported: {e}") from e


def _unlink_if_same(path: str, fd_or_id: "int | Tuple[int, int]") -> None:
    """Removes path if it still names the same file (fd, or (st_dev, st_ino)), not a newer
    ring of that name nor a symlink put in its place."""
    try:
        st = os.lstat(path)
        if isinstance(fd_or_id, int):
            mine = os.fstat(fd_or_id)
            fd_or_id = (mine.st_dev, mine.st_ino)
        if (st.st_dev, st.st_ino) == fd_or_id:
            os.unlink(path)
    except FileNotFoundError:
        pass


def shm_dir() -> str:
    """The directory of named rings: ``$GOBATCH_SHM_DIR`` when set (as for ``shmloader``), else
    :data:`SHM_DIR` (``/dev/shm``)."""
    return os.environ.get(_SHM_DIR_ENV) or SHM_DIR


def attach(name: str, *, framework: str = "numpy", timeout: float = 10.0,
           stall_warning_s: float = STALL_WARNING_S, allow_uid: Optional[int] = None) -> Ring:
    """Attach as the consumer of the named ring ``/dev/shm/gobatch-NAME`` that a standalone
    ``shmloader run --ring NAME`` created (in ``$GOBATCH_SHM_DIR`` instead of ``/dev/shm`` when
    that is set, as shmloader does). Waits at most ``timeout`` seconds for it to be READY.

    The file is opened without following a symbolic link and checked before it is mapped
    (docs/PROTOCOL.md 1.1): :class:`UnsafeRingError` for a symlink, a directory, FIFO or other
    non-regular file, a file owned by another uid (unless ``allow_uid`` names that uid, which
    also accepts its group's write permission) or one writable by group/other;
    :class:`RingPermissionError` when it may not be opened. Both name the path and the reason.
    A truncation of the file while it is read raises :class:`RingTruncatedError` at ``next()``
    instead of killing the process with SIGBUS.

    Raises :class:`RingError` when there is no such ring, it is not a compatible gobatch ring, or
    it already has a consumer. A ``next()`` that waits ``stall_warning_s`` seconds for a batch
    issues a :class:`GobatchWarning` (and a ``gobatch`` log record) naming each producer's
    state, again every ``stall_warning_s`` while it waits; the wait goes on."""
    stall_warning_s = _stall_seconds(stall_warning_s)
    if not _NAME_RE.match(name):
        raise ValueError(
            f"invalid ring name {name!r}: 1 to {_proto.SEGMENT_NAME_MAX} characters of [{_proto.SEGMENT_NAME_CHARS}]"
        )
    if allow_uid is not None and (isinstance(allow_uid, bool) or not isinstance(allow_uid, int) or allow_uid < 0):
        raise ValueError(f"allow_uid must be a uid (an int >= 0) or None, not {allow_uid!r}")
    path = os.path.join(shm_dir(), _proto.SEGMENT_PREFIX + name)
    label = f"ring {name!r}"
    deadline = time.monotonic() + timeout
    while True:
        fd = _open_named(path, name, label, -1 if allow_uid is None else allow_uid)
        try:
            # A creator reserves the full size before it writes anything; an empty file is one
            # that is being created right now.
            if os.fstat(fd).st_size == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
                continue
            ring = Ring(fd, framework=framework, label=label, timeout=max(deadline - time.monotonic(), 0.0),
                        shm_path=path)
            ring._stall_warning_s = stall_warning_s
            return ring
        finally:
            os.close(fd)


def _open_named(path: str, name: str, label: str, allow_uid: int) -> int:
    """Opens a named ring's file by the rules of PROTOCOL.md 1.1 (libgobatch's gb_open_named)."""
    err = ctypes.create_string_buffer(1024)
    rc = int(_lib.lib().gb_open_named(os.fsencode(path), allow_uid, err, len(err)))
    if rc >= 0:
        return rc
    text = err.value.decode("utf-8", "replace")
    reason = text.split(" refused: ", 1)[-1]
    if rc == _lib.ENOENT:
        raise RingError(f"no gobatch ring named {name!r}: {path} does not exist "
                        f"(start one with `shmloader run --ring {name}`)")
    if rc == _lib.EACCES:
        raise RingPermissionError(f"{label}: {text}", path=path, reason=reason)
    if rc == _lib.EREFUSED:
        raise UnsafeRingError(f"{label}: {text}", path=path, reason=reason)
    raise RingError(f"{label}: {text}")


def _check_sealed(fd: int, label: str) -> None:
    """A memfd ring must be sealed against shrinking and growing (PROTOCOL.md 1): its
    ``shmloader`` seals it before it writes the header, so a READY ring without the seals was
    made by something else, and a truncation would kill the trainer with SIGBUS."""
    want = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError as e:
        raise RingTruncatedError(
            f"{label}: the ring's memfd cannot report its seals ({e}): not a sealed memfd"
        ) from None
    if seals & want != want:
        raise RingTruncatedError(
            f"{label}: the ring's memfd is not sealed against shrinking and growing (seals {seals:#x}, "
            f"need F_SEAL_SHRINK|F_SEAL_GROW {want:#x}): a truncation could kill this process with SIGBUS"
        )


def _chunk_counts(s: "_lib.Stats") -> Dict[str, List[Any]]:
    """The per-source chunk counters of a gb_stats_t (PROTOCOL.md 2.5a) as lists."""
    decoded = [int(v) for v in s.chunks_decoded]
    missing = [int(v) for v in s.chunks_missing]
    n = max((i + 1 for i, v in enumerate(decoded) if v), default=0)
    return {
        "chunks_decoded": decoded[:n],
        "chunks_missing": missing[:n],
        "missing_chunk_fraction": [m / d if d else 0.0 for d, m in zip(decoded[:n], missing[:n])],
    }


def _stall_seconds(value: float) -> float:
    """Checks a ``stall_warning_s`` argument: a positive, finite number of seconds."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < math.inf):
        raise ValueError(f"stall_warning_s must be a positive finite number of seconds, not {value!r}")
    return float(value)


_PROC_STATES = {
    "R": "running",
    "S": "running (sleeping, state S)",
    "I": "running (idle, state I)",
    "D": "running, in an uninterruptible wait (state D: a read blocked in the kernel, e.g. a hung mount)",
    "T": "stopped (state T: SIGSTOP or a job-control stop; SIGCONT resumes it)",
    "t": "stopped by a debugger (state t)",
    "Z": "a zombie (it exited and its parent has not reaped it)",
    "X": "dead (state X)",
}


def _stat_fields(path: str) -> List[str]:
    """The fields of a /proc stat file after the command name (field 3, the state, first)."""
    with open(path, "rb") as f:
        data = f.read().decode("ascii", "replace")
    return data[data.rindex(")") + 2 :].split()


def process_state(pid: int, starttime: int = 0) -> str:
    """What /proc/<pid>/stat says of a process: running, stopped, a zombie or gone. With its
    ``starttime`` (field 22), a pid that now names another process is reported gone. A running
    process with threads in an uninterruptible wait (a reader blocked in the kernel) says so:
    the main thread of a Go process sleeps while its readers work."""
    try:
        fields = _stat_fields(f"/proc/{pid}/stat")
        state, start = fields[0], int(fields[19])
    except (OSError, ValueError, IndexError):
        return "gone (no such process)"
    if starttime and start != starttime:
        return "gone (its pid now names another process)"
    if state in ("R", "S", "I", "D"):
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            tasks = []
        blocked = 0
        for tid in tasks:
            try:
                blocked += _stat_fields(f"/proc/{pid}/task/{tid}/stat")[0] == "D"
            except (OSError, ValueError, IndexError):
                pass  # a thread that just exited
        if blocked:
            return (f"running, {blocked} of {len(tasks)} threads in an uninterruptible wait (state D: a read "
                    "blocked in the kernel, e.g. a hung mount)")
    return _PROC_STATES.get(state, f"in state {state}")
