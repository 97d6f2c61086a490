"""Supervision of a Loader's shmloader child: a child killed by a signal is restarted as a
producer that joins the same ring (``shmloader run --join --memfd FD``), which takes over the
batches the dead one held (docs/PROTOCOL.md 3.7), so the trainer sees every batch once, in
order; a child that dies again holding the same batch is a deterministic failure and ends the
stream with an error naming that batch.

A :class:`DeathWatch` wakes the ring's consumer the moment its producer process dies (a pidfd),
so the death is found at once rather than at the consumer's next liveness check (every 100 ms
of waiting)."""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import select
import signal
import struct
import threading
import time
from collections import deque
from typing import Callable, Deque, List, Optional, Sequence, Set, Tuple

from . import _protocol as _proto
from . import _caller, _registry
from .errors import LoaderError

__all__ = ["Supervisor", "DeathWatch", "RESTARTS", "RESTART_WINDOW_S", "RESTART_BACKOFF_S", "held_batches"]

RESTARTS = 2  # default restarts= : child restarts allowed within restart_window_s
RESTART_WINDOW_S = 600.0  # default restart_window_s
# default restart_backoff_s: the wait before the second restart of a window, doubled for each
# further one; the first restart of a window is immediate (a single death is not a crash loop)
RESTART_BACKOFF_S = 0.05

_log = logging.getLogger("gobatch")


def _entry_of(mm: Sequence[int], pid: int) -> Optional[Tuple[int, int]]:
    """The registry index and generation of the ACTIVE or CLAIMING entry of process ``pid``
    (PROTOCOL.md 2.6)."""
    for p in _registry.live(mm):
        if p.pid == pid:
            return p.entry, p.generation
    return None


def _published(mm: Sequence[int], slots: int, j: int) -> bool:
    """Whether batch ``j`` (relative), claimed at its position, is published (PROTOCOL.md 3.1):
    its position's grant names a later batch, or names ``j`` and ``j``'s slot is past FREE and
    WRITING on the granted lap."""
    f = _proto.SLOT_FIELDS
    (grant,) = struct.unpack_from(f["grant"][1], mm, _proto.SLOT_BASE + (j % slots) * _proto.SLOT_STRIDE + f["grant"][0])
    tag = (grant & 0xFFFFFFFF) >> _proto.GRANT_SLOT_BITS
    if tag == ((j + slots) // slots) & _proto.GRANT_TAG_MASK:
        return True
    if tag != (j // slots) & _proto.GRANT_TAG_MASK:
        return False  # no slot yet
    slot, lap = grant & _proto.GRANT_SLOT_MASK, (grant >> 32) & _proto.LAP_MASK
    (word,) = struct.unpack_from(f["state"][1], mm, _proto.SLOT_BASE + slot * _proto.SLOT_STRIDE + f["state"][0])
    return word not in (lap << _proto.SLOT_STATE_BITS | _proto.SLOT_FREE, lap << _proto.SLOT_STATE_BITS | _proto.SLOT_WRITING)


def held_batches(mm: Sequence[int], slots: int, pid: int) -> List[int]:
    """The relative batches that the (dead) producer process ``pid`` holds: the positions' batch
    claims that name its registry entry, of its generation, and are not published (PROTOCOL.md
    3.2, 3.7)."""
    found = _entry_of(mm, pid)
    if found is None:
        return []
    entry, gen = found
    bits = _proto.CLAIM_ENTRY_BITS
    want = (gen & ((1 << bits) - 1)) << bits | (entry + 1)
    f = _proto.SLOT_FIELDS
    held = []
    for i in range(slots):
        (claim,) = struct.unpack_from(f["claim"][1], mm, _proto.SLOT_BASE + i * _proto.SLOT_STRIDE + f["claim"][0])
        holder = claim & ((1 << _proto.CLAIM_HOLDER_BITS) - 1)
        if claim and holder == want:
            j = (claim >> _proto.CLAIM_HOLDER_BITS) - 1
            if not _published(mm, slots, j):
                held.append(j)
    return sorted(held)


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


class Supervisor:
    """Decides about a dead child and restarts it. ``spawn()`` starts a joining child and
    returns its pid; ``mm()`` is the ring's mapping (None once closed); ``batch_name(j)`` words
    relative batch ``j`` for messages (its stream index, and global index with ranks);
    ``previous`` is the supervisor of the same producer before this ring, whose restarts count
    against this one's budget; ``then`` says in the warning what the restarted one does."""

    def __init__(
        self,
        *,
        restarts: int,
        window_s: float,
        backoff_s: float,
        start_timeout: float,
        slots: int,
        spawn: Callable[[], int],
        mm: Callable[[], Optional[Sequence[int]]],
        batch_name: Callable[[int], str],
        previous: Optional["Supervisor"] = None,
        then: str = "which takes its batches over",
    ) -> None:
        self._restarts = restarts
        self._window_s = window_s
        self._backoff_s = backoff_s
        self._start_timeout = start_timeout
        self.slots = slots
        self._spawn = spawn
        self._mm = mm
        self._batch_name = batch_name
        self._then = then  # what the restarted one does, for the warning
        self._times: Deque[float] = deque()  # monotonic times of recent restarts
        self._last_held: Set[int] = set()  # batches the previous dead child held
        self._last_pid: Optional[int] = None
        self._started_at: Optional[float] = None  # when the running child was restarted
        self._rechecked = False  # a death report was excused once after the child registered
        self.restart_count = 0  # restarts over the loader's life
        self.recovery_s: List[float] = []  # death seen -> replacement started, per restart
        if previous is not None:  # the same process's restarts so far (before its ring was open) count
            self._times = deque(previous._times)
            self.restart_count = previous.restart_count
            self.recovery_s = list(previous.recovery_s)

    @staticmethod
    def restartable(code: Optional[int]) -> bool:
        """A child killed by a signal (kill -9, the OOM killer, a crash) is restarted. One that
        exited with a status reported its own error (configuration, data) and is not."""
        return code is not None and code < 0

    def starting(self) -> bool:
        """Whether a restarted child may still be starting up (within ``start_timeout`` of its
        start)."""
        return self._started_at is not None and time.monotonic() - self._started_at < self._start_timeout

    def excuses(self, registered: bool) -> bool:
        """Whether a producer death the ring reports while the restarted child is alive is its
        predecessor's, to be waited out (the ring asked again): while the child starts up and has
        not ``registered`` in the ring, and once more after it has, since the ring's check may
        predate the registration (it found no live producer a moment before the child
        registered). From then on the ring's takeover grace (PROTOCOL.md 3.5) decides."""
        if not self.starting():
            return False
        if not registered:
            return True
        first, self._rechecked = not self._rechecked, True
        return first

    def restart(self, pid: int, code: Optional[int], cause: Optional[str] = None) -> int:
        """Handles the death of child ``pid`` (exit ``code`` < 0; None when it is not this
        process's child, and ``cause`` then words the death): raises :class:`LoaderError` for a
        deterministic failure or a spent budget, else starts a joining child after the backoff
        and returns its pid."""
        t_seen = time.monotonic()
        mm = self._mm()
        held = set(held_batches(mm, self.slots, pid)) if mm is not None else set()
        if cause is None:
            cause = f"shmloader pid {pid} was killed by {_signal_name(code or 0)}"
        holding = (", holding " + ", ".join(self._batch_name(j) for j in sorted(held))) if held else ", holding no batch"
        while self._times and t_seen - self._times[0] > self._window_s:
            self._times.popleft()
        spent = len(self._times) >= self._restarts
        # Held at this death and the one before: the batch it dies on, if it dies on one. With
        # several writers a death holds several batches; another restart narrows them down.
        again = sorted(held & self._last_held)
        if again and (len(again) == 1 or spent):
            what = self._batch_name(again[0]) if len(again) == 1 else \
                "one of " + ", ".join(self._batch_name(j) for j in again)
            raise LoaderError(
                f"{cause} while producing {what}, which its predecessor pid {self._last_pid} died holding "
                "too: a deterministic failure, so it is not restarted again (reproduce it with `shmloader "
                "run` at that batch: --start, or gobatch.plan)", exit_code=code)
        if spent:
            raise LoaderError(
                f"{cause}{holding}; it has been restarted {len(self._times)} times within "
                f"{self._window_s:g} s (restarts={self._restarts}), so it is not restarted again", exit_code=code)
        delay = self._backoff_s * (2 ** (len(self._times) - 1)) if self._times else 0.0
        if delay > 0:
            time.sleep(delay)
        new_pid = self._spawn()
        self._times.append(time.monotonic())
        self._started_at, self._rechecked = time.monotonic(), False
        self._last_held, self._last_pid = set(again) if again else held, pid
        self.restart_count += 1
        self.recovery_s.append(time.monotonic() - t_seen)
        msg = (f"{cause}{holding}; restarted it as pid {new_pid} (restart {len(self._times)} of "
               f"{self._restarts} within {self._window_s:g} s), {self._then}")
        _log.warning(msg)
        _caller.warn(msg)  # at the trainer's line whose next() found the death
        return new_pid


# futex(2)'s system call number, for the wake (glibc has no wrapper); elsewhere no DeathWatch
# wakes, and the consumer's own checks find the death.
_SYS_FUTEX = {"x86_64": 202, "aarch64": 98}.get(platform.machine())
_FUTEX_WAKE = 1
_libc: Optional[ctypes.CDLL] = None


def _futex_wake(address: int) -> None:
    """Wakes every waiter on the 32-bit word at ``address`` (a shared futex: any process's
    mapping of the ring). A word no longer mapped gives EFAULT, and one mapped anew a spurious
    wake, which every futex waiter tolerates: both harmless."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    _libc.syscall(ctypes.c_long(_SYS_FUTEX), ctypes.c_void_p(address), ctypes.c_int(_FUTEX_WAKE),
                  ctypes.c_int(0x7FFFFFFF), None, None, ctypes.c_int(0))


class DeathWatch:
    """Watches producer process ``pid`` (a pidfd, on a thread of its own) and, once it has
    exited, wakes the ring's consumer, whose wait then runs its liveness checks (PROTOCOL.md
    3.5) and reports the death (GB_EDEAD) to the supervisor at once. ``words`` are the
    addresses of the ring's slot state words, which the consumer waits on. The wake is repeated
    every WAKE_EVERY_S until :meth:`stop` (the restart, or the ring's close), for up to
    WAKE_FOR_S: a consumer busy at the death finds it as soon as it waits again."""

    WAKE_EVERY_S = 0.002
    WAKE_FOR_S = 5.0

    def __init__(self, pid: int, words: Sequence[int]) -> None:
        self.pid = pid
        self.died_at: Optional[float] = None  # monotonic time the death was seen
        self._words = list(words)
        self._owner = os.getpid()  # a forked child's copy must not stop the parent's watch
        self._stop_r, self._stop_w = os.pipe()
        try:
            self._pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            self._pidfd = -1  # already gone (and reaped)
        except OSError:
            self._pidfd = -2  # no pidfd here (Linux < 5.3): the consumer's checks find the death
        self._thread = threading.Thread(target=self._run, name=f"gobatch-deathwatch-{pid}", daemon=True)
        self._thread.start()

    @classmethod
    def for_ring(cls, pid: int, base: int, slots: int) -> Optional["DeathWatch"]:
        """A watch of ``pid`` for the ring whose control mapping is at ``base`` (``gb_base``)
        with ``slots`` slots; None where this machine has no futex call for it."""
        if _SYS_FUTEX is None or not base:
            return None
        off = _proto.SLOT_FIELDS["state"][0]
        return cls(pid, [base + _proto.SLOT_BASE + i * _proto.SLOT_STRIDE + off for i in range(slots)])

    def _run(self) -> None:
        if self._pidfd == -2:
            return
        if self._pidfd >= 0:
            ready, _, _ = select.select([self._pidfd, self._stop_r], [], [])
            if self._stop_r in ready:
                return
        self.died_at = time.monotonic()
        until = self.died_at + self.WAKE_FOR_S
        while True:
            for w in self._words:
                _futex_wake(w)
            ready, _, _ = select.select([self._stop_r], [], [], self.WAKE_EVERY_S)
            if ready or time.monotonic() >= until:
                return

    def stop(self) -> None:
        """Ends the watch (and its wakes) and waits for its thread."""
        if self._stop_w < 0 or os.getpid() != self._owner:
            return
        os.write(self._stop_w, b"x")
        if self._thread is not threading.current_thread():
            self._thread.join()
        for fd in (self._stop_r, self._stop_w, self._pidfd):
            if fd >= 0:
                os.close(fd)
        self._stop_r = self._stop_w = self._pidfd = -1
