"""A minimal producer of PROTOCOL.md rings written in Python, for tests of the consumer.

It writes the header, registers itself as producer entry 0, and publishes batches with plain
little-endian stores plus a shared FUTEX_WAKE. Plain 4- and 8-byte stores through an mmap are
single aligned moves, which is enough for a test producer on x86-64 and arm64 (the store that
publishes a batch comes after the payload in program order; on arm64 a test relying on that
ordering across threads would need a barrier, which these single-threaded tests do not).

It can also corrupt any field, to test that attaching refuses bad segments."""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import platform
import struct
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from gobatch import _protocol as P

# Every protocol number comes from the module generated from package ring (go generate ./ring).
DTYPE_CODES = {name: code for code, (name, _) in P.DTYPES.items()}
FIELDS = P.HEADER_FIELDS  # name: (offset, struct format)
SYS_FUTEX = {"x86_64": 202, "aarch64": 98}[platform.machine()]
_libc = ctypes.CDLL(None, use_errno=True)


def starttime(pid: int) -> int:
    """Field 22 of /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        data = f.read()
    return int(data[data.rindex(")") + 2 :].split()[19])


def round_up(n: int, a: int) -> int:
    return (n + a - 1) // a * a


class FakeRing:
    """A ring segment in ``fd`` (a memfd or a /dev/shm file) with one Python producer.

    ``tensors`` maps name -> (per-batch shape, dtype name)."""

    def __init__(
        self,
        fd: int,
        tensors: Dict[str, Tuple[Sequence[int], str]],
        *,
        slots: int = 4,
        total_batches: int = 0,
        start_batch: int = 0,
        batch_size: int = 0,
        ready: bool = True,
        named: bool = False,
        extra_bytes: int = 0,
        counters: Sequence[Tuple[str, int, int]] = (),
        description: bytes = b"",
    ) -> None:
        self.fd = fd
        offset = 0
        self.tensors = []
        for name, (shape, dt) in tensors.items():
            offset = round_up(offset, P.TENSOR_ALIGN)
            nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize
            self.tensors.append((name, tuple(shape), dt, offset, nbytes))
            offset += nbytes
        self.slot_bytes = offset
        self.align = P.HUGE_ALIGN if offset >= P.HUGE_ALIGN else P.SMALL_ALIGN
        self.stride = round_up(max(offset, 1), self.align)
        self.payload_offset = round_up(P.SLOT_BASE + slots * P.SLOT_STRIDE, self.align)
        self.slots = slots
        self.segment_bytes = self.payload_offset + slots * self.stride
        os.posix_fallocate(fd, 0, self.segment_bytes + extra_bytes)
        self.mm = mmap.mmap(fd, self.segment_bytes + extra_bytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(self.mm))
        pid = os.getpid()
        self.set(
            magic=P.MAGIC, layout_version=P.LAYOUT_VERSION, header_bytes=P.HEADER_BYTES,
            slot_header_bytes=P.SLOT_HEADER_BYTES, endian_check=P.ENDIAN_CHECK, word_bytes=P.WORD_BYTES,
            segment_bytes=self.segment_bytes, slot_count=slots,
            tensor_count=len(self.tensors), slot_stride=self.stride, slot_bytes=self.slot_bytes,
            payload_offset=self.payload_offset, slot_headers_offset=P.SLOT_BASE, start_batch=start_batch,
            total_batches=total_batches, batch_size=batch_size, payload_align=self.align,
            nonce=0x1234, creator_pid=pid, creator_flags=P.CREATOR_NAMED if named else 0,
            creator_starttime=starttime(pid),
        )
        for t, (name, shape, dt, off, nbytes) in enumerate(self.tensors):
            self.set_tensor(
                t, name=name.encode(), dtype=DTYPE_CODES[dt], ndim=len(shape), offset=off, nbytes=nbytes,
                **{f"shape{k}": n for k, n in enumerate(shape)},
            )
        self.set_counters(counters)
        self.set(description_len=len(description), description=description)  # PROTOCOL.md 2.9
        for pos in range(slots):  # every position's first batch has the slot of its position (PROTOCOL.md 3.1)
            self._put(self._slot(pos), P.SLOT_FIELDS, "grant", pos)
        self.register_producer(0, pid, starttime(pid))
        self.start_batch = start_batch
        if ready:
            self.make_ready()

    # ---- raw access ----

    def _put(self, base: int, table: Dict[str, Tuple[int, str]], name: str, value: object) -> None:
        off, fmt = table[name]
        struct.pack_into(fmt, self.mm, base + off, value)

    def _get(self, base: int, table: Dict[str, Tuple[int, str]], name: str) -> int:
        off, fmt = table[name]
        return struct.unpack_from(fmt, self.mm, base + off)[0]

    def set(self, **fields: int) -> None:
        for name, value in fields.items():
            self._put(0, FIELDS, name, value)

    def get(self, name: str) -> int:
        return self._get(0, FIELDS, name)

    def set_tensor(self, t: int, **fields: int) -> None:
        """Writes fields of tensor descriptor t; ``name`` takes bytes, ``shapeK`` sets dimension K."""
        d = P.TENSOR_BASE + P.TENSOR_STRIDE * t
        for name, value in fields.items():
            if name == "name":
                self._put(d, P.TENSOR_FIELDS, "name", bytes(value))  # type: ignore[arg-type]  # "32s" NUL-pads
            elif name.startswith("shape"):
                struct.pack_into("<Q", self.mm, d + P.TENSOR_FIELDS["shape"][0] + 8 * int(name[5:]), value)
            else:
                self._put(d, P.TENSOR_FIELDS, name, value)

    def set_counters(self, counters: Sequence[Tuple[str, int, int]]) -> None:
        """Writes the counter table (PROTOCOL.md 2.5a, 2.8): (name, kind, scope) per entry, the
        values one after another from value 0 (a per-source entry has MAX_COUNTER_SOURCES)."""
        self.set(counter_count=len(counters))
        self.counter_first: Dict[str, int] = {}
        first = 0
        for k, (name, kind, scope) in enumerate(counters):
            width = P.MAX_COUNTER_SOURCES if scope == P.SCOPE_SOURCE else 1
            self.set_counter(k, name=name.encode(), kind=kind, scope=scope, width=width, first=first)
            self.counter_first[name] = first
            first += width

    def set_counter(self, k: int, **fields: object) -> None:
        """Writes fields of counter descriptor k (``name`` takes bytes)."""
        for name, value in fields.items():
            self._put(P.COUNTER_BASE + P.COUNTER_STRIDE * k, P.COUNTER_FIELDS, name, value)

    def add_counter(self, name: str, value: int, source: int = 0) -> None:
        """Adds value to counter name (of source ``source`` when it is per source)."""
        off = P.COUNTER_VALUES_BASE + 8 * (self.counter_first[name] + source)
        struct.pack_into("<Q", self.mm, off, struct.unpack_from("<Q", self.mm, off)[0] + value)

    def register_producer(self, entry: int, pid: int, start: int, state: int = P.ENTRY_ACTIVE) -> None:
        e = P.REGISTRY_BASE + P.REGISTRY_STRIDE * entry
        self._put(e, P.REGISTRY_FIELDS, "state", state)
        self._put(e, P.REGISTRY_FIELDS, "pid", pid)
        self._put(e, P.REGISTRY_FIELDS, "starttime", start)

    def producer_state(self, entry: int, state: int) -> None:
        self._put(P.REGISTRY_BASE + P.REGISTRY_STRIDE * entry, P.REGISTRY_FIELDS, "state", state)

    def _slot(self, slot: int) -> int:
        return P.SLOT_BASE + P.SLOT_STRIDE * slot

    def slot_state(self, slot: int) -> int:
        return self._get(self._slot(slot), P.SLOT_FIELDS, "state")

    def _wake(self, off: int) -> None:
        _libc.syscall(SYS_FUTEX, ctypes.c_void_p(self.base + off), 1, 0x7FFFFFFF, None, None, 0)

    def make_ready(self) -> None:
        self.set(state=P.RING_READY)
        self._wake(FIELDS["state"][0])

    # ---- producing ----

    def payload(self, slot: int, name: str) -> np.ndarray:
        for n, shape, dt, off, nbytes in self.tensors:
            if n == name:
                start = self.payload_offset + slot * self.stride + off
                return np.frombuffer(self.mm, dtype=dt, count=nbytes // np.dtype(dt).itemsize, offset=start).reshape(shape)
        raise KeyError(name)

    def grant(self, j: int) -> Optional[Tuple[int, int]]:
        """The slot and slot lap the consumer granted batch j (PROTOCOL.md 3.1), or None while it
        has none."""
        g = self._get(self._slot(j % self.slots), P.SLOT_FIELDS, "grant")
        if (g & 0xFFFFFFFF) >> P.GRANT_SLOT_BITS != (j // self.slots) & P.GRANT_TAG_MASK:
            return None
        return g & P.GRANT_SLOT_MASK, (g >> 32) & P.LAP_MASK

    def publish(self, j: int, value: Optional[float] = None, *, seq: Optional[int] = None) -> None:
        """Writes batch j (every element = value, default j) into the slot the consumer granted
        it and makes it READY. Batch j must have a grant, and its slot be FREE on the granted lap."""
        granted = self.grant(j)
        assert granted is not None, f"batch {j} has no slot granted yet"
        slot, lap = granted

        def word(st: int) -> int:  # PROTOCOL.md 3: (lap << 2) | st
            return ((lap & P.LAP_MASK) << P.SLOT_STATE_BITS) | st

        st = self.slot_state(slot)
        assert st == word(P.SLOT_FREE), f"slot {slot} is {st:#x}, not FREE(lap {lap})"
        h, S = self._slot(slot), P.SLOT_FIELDS
        self._put(h, S, "state", word(P.SLOT_WRITING))
        for n, *_ in self.tensors:
            self.payload(slot, n)[...] = j if value is None else value
        self._put(h, S, "seq", self.start_batch + j if seq is None else seq)
        self._put(h, S, "owner", 1)  # registry entry 0
        self._put(h, S, "flags", 0)
        self._put(h, S, "nbytes", self.slot_bytes)
        self._put(h, S, "state", word(P.SLOT_READY))
        if self._get(h, S, "waiters"):
            self._wake(h + S["state"][0])

    def sleep_on(self, slot: int, timeout_s: float, *, grant: bool = False) -> str:
        """A producer's wait on slot's state word, or with grant=True on position slot's grant
        word (PROTOCOL.md 3.4): counts itself in the word's waiters and sleeps in FUTEX_WAIT
        while the word is unchanged, at most timeout_s. Returns "woken" (a FUTEX_WAKE),
        "timeout", or "changed" (the word changed before the sleep began). Call it from a
        thread; nothing else may change this word's waiters."""
        h, S = self._slot(slot), P.SLOT_FIELDS
        word, waiters = ("grant", "grant_waiters") if grant else ("state", "waiters")
        v = self._get(h, S, word) & 0xFFFFFFFF
        self._put(h, S, waiters, self._get(h, S, waiters) + 1)
        try:
            ts = (ctypes.c_long * 2)(int(timeout_s), int(timeout_s % 1 * 1e9))
            rc = _libc.syscall(SYS_FUTEX, ctypes.c_void_p(self.base + h + S[word][0]), 0, v, ts, None, 0)
            err = ctypes.get_errno()
        finally:
            self._put(h, S, waiters, self._get(h, S, waiters) - 1)
        if rc == 0:
            return "woken"
        return "timeout" if err == errno.ETIMEDOUT else "changed"

    def set_error(self, text: str, producer: int = 1) -> None:
        raw = text.encode()
        off = FIELDS["error_text"][0]
        self.mm[off : off + len(raw)] = raw
        self.set(error_len=len(raw), error_producer=producer, error_state=P.ERROR_SET)
        for s in range(self.slots):
            self._wake(self._slot(s) + P.SLOT_FIELDS["state"][0])

    def close(self) -> None:
        del self.base
        self.mm.close()
