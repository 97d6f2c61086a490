"""The consumer side of one ring: attach, validate, register, iterate zero-copy batches, close.

Which slot is lent to which :class:`Batch` is kept by the ring's lease book (``_lease``); a
ring found by name is opened by ``_named``. What feeds the ring answers the :class:`Producers`
calls while a ``next()`` waits: a :class:`gobatch.Loader`'s child or node loader (``_own``,
``_node``), or, for a ring attached by name, only the ring's producer registry."""

from __future__ import annotations

import atexit
import ctypes
import fcntl
import gc
import logging
import math
import mmap
import os
import threading
import time
import weakref
from typing import Any, Callable, Dict, Iterator, List, Optional, Protocol, Tuple, Type

import numpy as np

from . import _clib as _lib
from . import _protocol as _proto
from . import _caller, _cuda, _registry
from ._caller import site as _site
from ._lease import Batch, Leases, TensorSpec, leases_for
from ._stages import pass_figures
from ._view import Description, parse_description
from .errors import (
    GobatchError,
    LoaderError,
    RingError,
    RingTruncatedError,
    SlotsHeldError,
    StreamEndedError,
)

__all__ = ["Batch", "Ring", "TensorSpec", "Producers", "producer_states", "process_state", "track"]

_POLL_MS = 100  # the longest a C call blocks: Python handles Ctrl-C at least this often
# SlotsHeldError names the line that took each held batch among a ring's first this many
# batches (the warm-up and first steps, where a kept reference shows first): finding the
# line costs about half a microsecond, which later batches do not pay.
_SITE_BATCHES = 1000
STALL_WARNING_S = 30.0  # default stall_warning_s: a next() waiting this long warns, and again each period
_log = logging.getLogger("gobatch")

# PROTOCOL.md 2.7 dtype codes -> little-endian NumPy dtypes (the protocol's byte order).
_DTYPES: Dict[int, np.dtype] = {code: np.dtype(name).newbyteorder("<") for code, (name, _) in _proto.DTYPES.items()}


class Producers(Protocol):
    """What a ring asks of the side that feeds it (a Loader's strategy: ``_own.OwnChild``,
    ``_node.NodeRings``). An error any call raises ends the stream: it is sticky."""

    def tick(self) -> None:
        """Called about every 100 ms while the ring waits (to become ready, or for a batch):
        raises when the producers have failed."""

    def recover(self, rc: int) -> bool:
        """Whether a failure code of the C side (a producer's death: GB_EDEAD) is recovered from,
        the wait going on (a restarted child), rather than raised."""

    def failure(self, rc: int, cls: Type[LoaderError], message: str) -> BaseException:
        """The exception for a producer-side failure code ``rc``: ``cls(message)`` with what the
        strategy knows (a child's exit status and stderr)."""

    def states(self, mm: Optional[mmap.mmap]) -> List[str]:
        """For the stall warning: one phrase per producer process and its state."""


class _Registered:
    """The producers of a ring attached by name: known only by the ring's registry."""

    def tick(self) -> None:
        pass

    def recover(self, rc: int) -> bool:
        return False

    def failure(self, rc: int, cls: Type[LoaderError], message: str) -> BaseException:
        return cls(message)

    def states(self, mm: Optional[mmap.mmap]) -> List[str]:
        return producer_states(mm)


_REGISTERED = _Registered()

# Every ring and Loader open in this process, so that a fork child can mark them foreign and
# the interpreter's exit closes them.
_open_rings: "weakref.WeakSet[Any]" = weakref.WeakSet()


def track(obj: Any) -> None:
    """Marks ``obj`` (with a ``_foreign`` flag and close()) foreign in a fork child and closes it
    at exit."""
    _open_rings.add(obj)


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
    array}`` of NumPy arrays (``framework="numpy"``) or torch tensors (``framework="torch"``),
    writable views into the batch's shared slot. The slot is lent to the batch
    until its last view is gone (given back by the next ``next()``), or :meth:`Batch.release`,
    or a ``with batch:`` block ends, so a kept tensor never changes. A batch goes to any free
    slot, so kept batches lower the read-ahead and nothing else; when every slot is lent,
    ``next()`` raises :class:`SlotsHeldError` instead of waiting: copy what you
    keep (``tensor.clone()``, ``arr.copy()``, a ``.to(device)`` copy) or raise the ring's slots
    (``Loader(slots=N)``, ``shmloader --slots N``, ``[ring] slots`` in a TOML file).
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
    _pinned: Optional[Tuple[int, int]] = None  # the mapping registered with CUDA (pin_memory)

    def __init__(
        self,
        fd: int,
        *,
        framework: str = "numpy",
        label: str = "ring",
        timeout: float = 30.0,
        shm_path: Optional[str] = None,
        sealed: bool = False,
        stall_warning_s: float = STALL_WARNING_S,
        _producers: Optional[Producers] = None,
    ) -> None:
        """Attach to the segment open as ``fd`` (borrowed: the caller closes it afterwards).

        ``timeout`` bounds the wait for the ring to become READY; ``_producers`` is asked about
        every 100 ms while waiting (Loader uses it to watch its child); a ``next()`` that waits
        ``stall_warning_s`` seconds warns (see the class doc). With ``sealed`` the
        segment must be a memfd sealed against shrinking and growing (PROTOCOL.md 1), else
        :class:`RingTruncatedError`."""
        _check_framework(framework)
        self._foreign = False
        self._ptr: Optional[int] = None
        self._mm: Optional[mmap.mmap] = None
        self._label = label
        self._framework = framework
        self._shm_path = shm_path
        self._stall_warning_s = _stall_seconds(stall_warning_s)
        self._producers: Producers = _producers if _producers is not None else _REGISTERED
        self._lock = threading.Lock()
        self._failure: Optional[BaseException] = None
        self._delivered = 0  # batches handed out so far
        self._creator_alive: Callable[[], bool] = lambda: True
        L = _lib.lib()
        self._next = L.gb_release_next
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
        track(self)

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
            self._producers.tick()
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
        self._description = parse_description(_lib.description(self._ptr, int(g.description_len)),
                                              {t.name for t in specs}, self._label)
        pid, start = int(g.creator_pid), int(g.creator_starttime)
        self._creator_alive = lambda: _lib.process_alive(pid, start)

    def _map_payload(self, fd: int) -> None:
        g = self._geom
        prot = mmap.PROT_READ | mmap.PROT_WRITE  # a lent batch is writable (Batch)
        try:
            self._mm = mmap.mmap(fd, g.segment_bytes, flags=mmap.MAP_SHARED, prot=prot)
        except OSError as e:
            raise RingError(f"{self._label}: mmap of {g.segment_bytes} bytes failed: {e}") from e
        # A named ring's file can be truncated under us (PROTOCOL.md 1.1): the library's SIGBUS
        # guard turns a touch of a cut page into zeros and a RingTruncatedError at next().
        addr = np.frombuffer(self._mm, dtype=np.uint8, count=1).ctypes.data
        _lib.lib().gb_guard_payload(self._ptr, addr, g.segment_bytes, 1)  # 1: the mapping is writable
        payload = [g.payload_offset + s * g.slot_stride for s in range(int(g.slot_count))]
        self._book: Leases = leases_for(self._framework, weakref.ref(self), self._ptr, self._mm, payload,
                                        self._specs)
        if self._description.view:  # batches presented as the description nests them (2.9)
            self._book.layout = self._description.view.view
        # Per slot, for SlotsHeldError and release(): the batch lent there last (its index since
        # attach; a slot is any free one, PROTOCOL.md 3.1), and the user's (file, line) that took
        # it, recorded for the first _SITE_BATCHES batches only.
        self._slot_batch: List[int] = [-1] * int(g.slot_count)
        self._last_slot = -1
        self._handed: List[Tuple[int, Tuple[str, int]]] = [(-1, ("?", 0))] * int(g.slot_count)

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
    def description(self) -> Description:
        """What the ring says of its batches besides their tensors (PROTOCOL.md 2.9): the
        stream's order, the batches per epoch, and how a batch is nested (applied to every
        batch this ring yields)."""
        return self._description

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
        book = self._book
        with self._lock:
            ptr = self._ptr
            if ptr is None:
                raise self._closed_error()
            # One C call gives back the slot of a batch dropped since the last call (the usual
            # loop drops one per step) and takes the next.
            rc: int = self._next(ptr, book.ended(), _POLL_MS)
            if rc >= 0:
                if self._delivered < _SITE_BATCHES:
                    self._handed[rc] = (self._delivered, _site())
                self._slot_batch[rc] = self._delivered
                self._last_slot = rc
                self._delivered += 1
                return book.lend(rc)
        return self._next_slow(rc)

    def _next_slow(self, rc: int) -> Batch:
        t0 = time.monotonic()
        warn_at = t0 + self._stall_warning_s
        producers = self._producers
        while True:
            if rc == _lib.END:
                raise StopIteration
            if rc == _lib.EHELD:
                self._free_next_slot()  # raises SlotsHeldError, or the slot is free: ask again
            elif rc != _lib.TIMEOUT and not self._sticky(producers.recover, rc):
                raise self._fail(rc)
            self._sticky(producers.tick)
            now = time.monotonic()
            if now >= warn_at:  # never a silent wait: say what the producers are doing, wait on
                self._warn_stall(now - t0)
                warn_at = now + self._stall_warning_s
            with self._lock:
                ptr = self._ptr
                if ptr is None:
                    raise self._closed_error()
                # a batch dropped while this call waits (another thread) goes back now
                rc = int(self._next(ptr, self._book.ended(), _POLL_MS))
                if rc >= 0:
                    if self._delivered < _SITE_BATCHES:
                        self._handed[rc] = (self._delivered, _site())
                    self._slot_batch[rc] = self._delivered
                    self._last_slot = rc
                    self._delivered += 1
                    return self._book.lend(rc)

    def _sticky(self, call: Callable[..., Any], *args: Any) -> Any:
        """Asks the producers (Producers.tick or recover); an error they raise ends the stream."""
        try:
            return call(*args)
        except GobatchError as e:
            if self._failure is None:
                self._failure = e
            raise

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
        exc = self._producers.failure(rc, cls, f"{self._label}: {text}")
        self._failure = exc
        return exc

    # ---- stalls ----

    def _warn_stall(self, waited: float) -> None:
        """A GobatchWarning and a log line: how long next() has waited, and each producer's state."""
        msg = (f"{self._label}: no batch for {waited:.1f} s (waiting for stream batch {self.next_batch}, "
               f"stall_warning_s={self._stall_warning_s:g}); {'; '.join(self._producers.states(self._mm))}; "
               "still waiting")
        _log.warning(msg)
        _caller.warn(msg)  # at the caller's next() / for

    def _producer_states(self) -> List[str]:
        """One phrase per producer process and its state (the stall warning's)."""
        return self._producers.states(self._mm)

    # ---- leases (_lease) ----

    def _end_lease(self, slot: int, token: Any) -> None:
        """Batch.release(): gives the slot back now."""
        if self._foreign:
            raise self._foreign_error()
        with self._lock:
            self._book.end(slot, token)

    def _settle_leases(self) -> None:
        """Gives back slots whose lease ended."""
        with self._lock:
            self._book.settle()

    def _free_next_slot(self) -> None:
        """gb_next found every slot lent (PROTOCOL.md 3.3 step 5). Views caught in reference
        cycles are freed by a collection; if every slot is still lent after that,
        SlotsHeldError naming the batches that hold them."""
        n = int(self._geom.slot_count)
        if self._book.held() >= n:
            gc.collect()
        self._settle_leases()
        held = self._book.held()
        if held < n:
            return
        raise SlotsHeldError(
            f"{self._label}: all {n} slots hold batches that are still referenced ({self._holders()}), "
            f"so the next batch ({self.next_batch}) has no slot. A batch is never "
            "overwritten while a view of it (the batch, an array or tensor of it, or one derived from them) "
            "is alive, so gobatch cannot wait for it: drop batches when done (del, batch.release() or "
            f"`with batch:`), copy what you keep (tensor.clone(), array.copy()), or raise the ring's slots (now {n}: "
            "gobatch.Loader(..., slots=N), shmloader --slots N, or [ring] slots = N in a TOML file; "
            "the usual `for batch in loader:` holds 2 while it fetches the next)",
            held=held, slots=n)

    def _holders(self) -> str:
        """The batches that hold slots, and the lines that took them: "batch 20 (slot 0, taken
        at train.py:42), ..."."""
        out = []
        for slot, token in enumerate(self._book.tokens):
            if token is not None:
                j = self._slot_batch[slot]  # the latest batch lent to the slot: the one holding it
                where = ""
                if self._handed[slot][0] == j:
                    path, line = self._handed[slot][1]
                    where = f", taken at {os.path.basename(path)}:{line}"
                out.append(f"batch {self.start_batch + j} (slot {slot}{where})")
        return ", ".join(out)

    def release(self) -> None:
        """Hand the slot of the batch handed out last back to the producers now, even if the
        batch is still referenced (its arrays may then be overwritten), and the slots of
        batches already gone. Prefer ``batch.release()`` or ``with batch:``."""
        if self._foreign:
            raise self._foreign_error()
        with self._lock:
            if self._last_slot >= 0 and self._ptr is not None:
                self._book.revoke(self._last_slot)
        self._settle_leases()

    # ---- GPU ----

    def pin_memory(self) -> bool:
        """Registers the ring's mapping with CUDA as page-locked memory, so that
        ``.to(device, non_blocking=True)`` of a batch is an asynchronous DMA from its slot
        (hold the batch until the copy is done: :func:`gobatch.cuda_batches`). Without CUDA it
        warns (:class:`GobatchWarning`) and does nothing. Returns whether the mapping is pinned;
        it stays so until :meth:`close`."""
        if self._pinned is None and self._mm is not None:
            addr = np.frombuffer(self._mm, dtype=np.uint8, count=1).ctypes.data
            self._pinned = _cuda.pin(addr, len(self._mm), self._label)
        return self._pinned is not None

    # ---- statistics ----

    def stats(self) -> Dict[str, Any]:
        """Counters of the ring: batches and bytes read, time the consumer waited for batches and
        the producers for free slots, rates since attach; and every named counter of the job
        (PROTOCOL.md 2.5a) under its own name: the sampler's cache counters, and per source
        (lists indexed by the source's position in the configuration) ``chunks_decoded``,
        ``chunks_missing`` (chunks not stored, read as the fill value), with the ratios
        ``cache_hit_rate``, ``segments_per_batch`` and ``missing_chunk_fraction``; and since
        attach, each stage's ``stage_load`` (read, decode, gather, consumer; 0 .. 1) and the
        ``limiting_stage``, the most loaded (gobatch._stages)."""
        if self._foreign:
            raise self._foreign_error()
        s = _lib.Stats()
        with self._lock:
            if self._ptr is None:
                raise self._closed_error()
            _lib.lib().gb_stats(self._ptr, ctypes.byref(s))
            counters = _read_counters(self._ptr, int(self._geom.counter_count))
        elapsed = max(time.monotonic() - self._t_attach, 1e-9)
        delivered, nbytes = self._delivered, self._delivered * int(self._geom.slot_bytes)
        out = {
            **_job_figures(counters),  # first: the ring's own figures below keep their names
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
        }
        since = pass_figures({"elapsed_s": 0.0}, out)  # the stages since attach (_stages.py)
        out["stage_load"], out["limiting_stage"] = since["stage_load"], since["limiting_stage"]
        return out

    # ---- closing ----

    def close(self) -> None:
        """Give back the slots of batches that are gone, detach (producers see CLOSED and stop)
        and unmap.

        Batches and arrays still referenced stay readable and unchanged (their memory stays
        mapped until they are freed; their slots are never written again). Idempotent."""
        if self._foreign:
            raise self._foreign_error()
        if self._ptr is not None:
            self._settle_leases()
        self._close_ring()

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
        pinned, self._pinned = self._pinned, None
        if pinned is not None:
            _cuda.unpin(pinned)
        self._book.close()
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


def producer_states(mm: Optional[mmap.mmap]) -> List[str]:
    """One phrase per live producer of the registry (PROTOCOL.md 2.6): its pid and process state."""
    out = [f"producer pid {p.pid} {process_state(p.pid, p.starttime)}, {p.batches} batches written"
           for p in _registry.live(mm)]
    return out or ["no live producer is registered"]


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


def _read_counters(ptr: int, n: int) -> List[_lib.Counter]:
    """The job's n named counters (PROTOCOL.md 2.5a, 2.8) with their values now."""
    out = []
    for k in range(n):
        c = _lib.Counter()
        if _lib.lib().gb_counter_get(ptr, k, ctypes.byref(c)) == _lib.OK:
            out.append(c)
    return out


def _job_figures(counters: List[_lib.Counter]) -> Dict[str, Any]:
    """The job's named counters for Ring.stats(), each under its own name, whatever the producer
    publishes: a number, or for a per-source counter a list (entry i: the configuration's
    source i, up to the last source any per-source counter has counted for). Then the ratios
    of the counters known here, 0 without them: the cache hit rate, the distinct time segments
    per batch (locality sampling), and per source the fraction of decoded chunks that were not
    stored (a store cut short shows here instead of as silent NaN) and the decode amplification
    (bytes decoded per byte of the source's tensor delivered: what a crop out of large chunks
    costs, which the cache brings down)."""
    job = {c.name.decode(): int(c.values[0]) for c in counters if c.scope == _proto.SCOPE_JOB}
    per = {c.name.decode(): [int(v) for v in c.values[: c.width]] for c in counters if c.scope == _proto.SCOPE_SOURCE}
    n = max((i + 1 for values in per.values() for i, v in enumerate(values) if v), default=0)
    out: Dict[str, Any] = {**job, **{name: values[:n] for name, values in per.items()}}
    hits, misses = job.get("cache_hits", 0), job.get("cache_misses", 0)
    out["cache_hit_rate"] = hits / (hits + misses) if hits + misses else 0.0
    segments, batches = job.get("segments_sum", 0), job.get("segments_batches", 0)
    out["segments_per_batch"] = segments / batches if batches else 0.0
    decoded, missing = out.get("chunks_decoded", []), out.get("chunks_missing", [])
    out["missing_chunk_fraction"] = [m / d if d else 0.0 for d, m in zip(decoded, missing)]
    dec_b, del_b = out.get("decoded_bytes", []), out.get("delivered_bytes", [])
    out["decode_amplification"] = [d / s if s else 0.0 for d, s in zip(dec_b, del_b)]
    return out


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
