"""A minimal producer of PROTOCOL.md rings written in Python, for tests of the consumer.

It writes the header, registers itself as producer entry 0, and publishes batches with plain
little-endian stores plus a shared FUTEX_WAKE. Plain 4- and 8-byte stores through an mmap are
single aligned moves, which is enough for a test producer on x86-64 and arm64 (the store that
publishes a batch comes after the payload in program order; on arm64 a test relying on that
ordering across threads would need a barrier, which these single-threaded tests do not).

It can also corrupt any field, to test that attaching refuses bad segments."""

from __future__ import annotations

import ctypes
import mmap
import os
import platform
import struct
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

MAGIC = 0x3148435441424F47
HEADER = 8192
SLOT_HDR = 128
DTYPE_CODES = {
    "bool": 1, "int8": 2, "uint8": 3, "int16": 4, "uint16": 5, "int32": 6, "uint32": 7,
    "int64": 8, "uint64": 9, "float16": 10, "float32": 11, "float64": 12,
}
FIELDS = {  # name: (offset, struct format)
    "magic": (0, "<Q"), "layout_version": (8, "<I"), "header_bytes": (12, "<I"),
    "slot_header_bytes": (16, "<I"), "endian_check": (20, "<I"), "state": (24, "<I"),
    "word_bytes": (28, "<I"), "segment_bytes": (32, "<Q"), "slot_count": (40, "<I"),
    "tensor_count": (44, "<I"), "slot_stride": (48, "<Q"), "slot_bytes": (56, "<Q"),
    "payload_offset": (64, "<Q"), "slot_headers_offset": (72, "<Q"), "start_batch": (80, "<Q"),
    "total_batches": (88, "<Q"), "batch_size": (96, "<I"), "payload_align": (100, "<I"),
    "nonce": (104, "<Q"), "creator_pid": (112, "<I"), "creator_flags": (116, "<I"),
    "creator_starttime": (120, "<Q"), "next_claim": (128, "<Q"),
    "batches_written": (192, "<Q"), "bytes_written": (200, "<Q"),
    "consumer_state": (256, "<I"), "consumer_pid": (260, "<I"), "consumer_starttime": (264, "<Q"),
    "batches_read": (272, "<Q"), "consumer_wait_ns": (280, "<Q"), "bytes_read": (288, "<Q"),
    "consumer_heartbeat": (296, "<Q"),
    "error_state": (320, "<I"), "error_len": (324, "<I"), "error_producer": (328, "<I"),
}
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
    ) -> None:
        self.fd = fd
        offset = 0
        self.tensors = []
        for name, (shape, dt) in tensors.items():
            offset = round_up(offset, 64)
            nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize
            self.tensors.append((name, tuple(shape), dt, offset, nbytes))
            offset += nbytes
        self.slot_bytes = offset
        self.align = 2097152 if offset >= 2097152 else 4096
        self.stride = round_up(max(offset, 1), self.align)
        self.payload_offset = round_up(HEADER + slots * SLOT_HDR, self.align)
        self.slots = slots
        self.segment_bytes = self.payload_offset + slots * self.stride
        os.posix_fallocate(fd, 0, self.segment_bytes + extra_bytes)
        self.mm = mmap.mmap(fd, self.segment_bytes + extra_bytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(self.mm))
        pid = os.getpid()
        self.set(
            magic=MAGIC, layout_version=1, header_bytes=HEADER, slot_header_bytes=SLOT_HDR,
            endian_check=0x01020304, word_bytes=8, segment_bytes=self.segment_bytes, slot_count=slots,
            tensor_count=len(self.tensors), slot_stride=self.stride, slot_bytes=self.slot_bytes,
            payload_offset=self.payload_offset, slot_headers_offset=HEADER, start_batch=start_batch,
            total_batches=total_batches, batch_size=batch_size, payload_align=self.align,
            nonce=0x1234, creator_pid=pid, creator_flags=1 if named else 0,
            creator_starttime=starttime(pid),
        )
        for t, (name, shape, dt, off, nbytes) in enumerate(self.tensors):
            d = 4096 + 128 * t
            self.mm[d : d + 32] = name.encode().ljust(32, b"\0")
            struct.pack_into("<II", self.mm, d + 32, DTYPE_CODES[dt], len(shape))
            struct.pack_into("<8Q", self.mm, d + 40, *(list(shape) + [0] * (8 - len(shape))))
            struct.pack_into("<QQ", self.mm, d + 104, off, nbytes)
        self.register_producer(0, pid, starttime(pid))
        self.start_batch = start_batch
        if ready:
            self.make_ready()

    # ---- raw access ----

    def set(self, **fields: int) -> None:
        for name, value in fields.items():
            off, fmt = FIELDS[name]
            struct.pack_into(fmt, self.mm, off, value)

    def get(self, name: str) -> int:
        off, fmt = FIELDS[name]
        return struct.unpack_from(fmt, self.mm, off)[0]

    def set_tensor(self, t: int, **fields: int) -> None:
        d = 4096 + 128 * t
        offs = {"dtype": (32, "<I"), "ndim": (36, "<I"), "offset": (104, "<Q"), "nbytes": (112, "<Q")}
        for name, value in fields.items():
            if name == "name":
                self.mm[d : d + 32] = bytes(value).ljust(32, b"\0")  # type: ignore[arg-type]
            elif name.startswith("shape"):
                struct.pack_into("<Q", self.mm, d + 40 + 8 * int(name[5:]), value)
            else:
                off, fmt = offs[name]
                struct.pack_into(fmt, self.mm, d + off, value)

    def register_producer(self, entry: int, pid: int, start: int, state: int = 2) -> None:
        e = 2048 + 64 * entry
        struct.pack_into("<IIQ", self.mm, e, state, pid, start)

    def producer_state(self, entry: int, state: int) -> None:
        struct.pack_into("<I", self.mm, 2048 + 64 * entry, state)

    def slot_state(self, slot: int) -> int:
        return struct.unpack_from("<I", self.mm, HEADER + SLOT_HDR * slot)[0]

    def _wake(self, off: int) -> None:
        _libc.syscall(SYS_FUTEX, ctypes.c_void_p(self.base + off), 1, 0x7FFFFFFF, None, None, 0)

    def make_ready(self) -> None:
        self.set(state=1)
        self._wake(24)

    # ---- producing ----

    def payload(self, slot: int, name: str) -> np.ndarray:
        for n, shape, dt, off, nbytes in self.tensors:
            if n == name:
                start = self.payload_offset + slot * self.stride + off
                return np.frombuffer(self.mm, dtype=dt, count=nbytes // np.dtype(dt).itemsize, offset=start).reshape(shape)
        raise KeyError(name)

    def publish(self, j: int, value: Optional[float] = None, *, seq: Optional[int] = None) -> None:
        """Writes batch j (every element = value, default j) and makes it READY. The slot must
        be FREE on batch j's lap."""
        slot, lap = j % self.slots, j // self.slots
        st = self.slot_state(slot)
        assert st == (lap << 2), f"slot {slot} is {st:#x}, not FREE(lap {lap})"
        h = HEADER + SLOT_HDR * slot
        struct.pack_into("<I", self.mm, h, (lap << 2) | 1)
        for n, *_ in self.tensors:
            self.payload(slot, n)[...] = j if value is None else value
        struct.pack_into("<QII", self.mm, h + 8, self.start_batch + j if seq is None else seq, 1, 0)
        struct.pack_into("<Q", self.mm, h + 24, self.slot_bytes)
        struct.pack_into("<I", self.mm, h, (lap << 2) | 2)
        if struct.unpack_from("<I", self.mm, h + 4)[0]:
            self._wake(h)

    def set_error(self, text: str, producer: int = 1) -> None:
        raw = text.encode()
        self.mm[384 : 384 + len(raw)] = raw
        self.set(error_len=len(raw), error_producer=producer, error_state=2)
        for s in range(self.slots):
            self._wake(HEADER + SLOT_HDR * s)

    def close(self) -> None:
        del self.base
        self.mm.close()
