"""Supervision of a Loader's shmloader child: a child killed by a signal is restarted as a
producer that joins the same ring (``shmloader run --join --memfd FD``), which takes over the
batches the dead one held (docs/PROTOCOL.md 3.7), so the trainer sees every batch once, in
order; a child that dies again holding the same batch is a deterministic failure and ends the
stream with an error naming that batch."""

from __future__ import annotations

import logging
import signal
import struct
import time
from collections import deque
from typing import Callable, Deque, List, Optional, Sequence, Set, Tuple

from . import _protocol as _proto
from . import _caller, _registry
from .errors import LoaderError

__all__ = ["Supervisor", "RESTARTS", "RESTART_WINDOW_S", "RESTART_BACKOFF_S", "held_batches"]

RESTARTS = 2  # default restarts= : child restarts allowed within restart_window_s
RESTART_WINDOW_S = 600.0  # default restart_window_s
RESTART_BACKOFF_S = 0.05  # default restart_backoff_s: the wait before a restart, doubled per recent restart

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
    relative batch ``j`` for messages (its stream index, and global index with ranks)."""

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
    ) -> None:
        self._restarts = restarts
        self._window_s = window_s
        self._backoff_s = backoff_s
        self._start_timeout = start_timeout
        self._slots = slots
        self._spawn = spawn
        self._mm = mm
        self._batch_name = batch_name
        self._times: Deque[float] = deque()  # monotonic times of recent restarts
        self._last_held: Set[int] = set()  # batches the previous dead child held
        self._last_pid: Optional[int] = None
        self._started_at: Optional[float] = None  # when the running child was restarted
        self.restart_count = 0  # restarts over the loader's life
        self.recovery_s: List[float] = []  # death seen -> replacement started, per restart

    @staticmethod
    def restartable(code: Optional[int]) -> bool:
        """A child killed by a signal (kill -9, the OOM killer, a crash) is restarted. One that
        exited with a status reported its own error (configuration, data) and is not."""
        return code is not None and code < 0

    def starting(self) -> bool:
        """Whether a restarted child may still be starting up (not yet registered in the ring):
        the consumer's "producer died" for its predecessor is then expected, and waited out."""
        return self._started_at is not None and time.monotonic() - self._started_at < self._start_timeout

    def registered(self) -> None:
        """The running child is registered: its predecessor's death no longer excuses an error."""
        self._started_at = None

    def restart(self, pid: int, code: Optional[int], cause: Optional[str] = None) -> int:
        """Handles the death of child ``pid`` (exit ``code`` < 0; None when it is not this
        process's child, and ``cause`` then words the death): raises :class:`LoaderError` for a
        deterministic failure or a spent budget, else starts a joining child after the backoff
        and returns its pid."""
        t_seen = time.monotonic()
        mm = self._mm()
        held = set(held_batches(mm, self._slots, pid)) if mm is not None else set()
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
        delay = self._backoff_s * (2 ** len(self._times))
        if delay > 0:
            time.sleep(delay)
        new_pid = self._spawn()
        self._times.append(time.monotonic())
        self._started_at = time.monotonic()
        self._last_held, self._last_pid = set(again) if again else held, pid
        self.restart_count += 1
        self.recovery_s.append(time.monotonic() - t_seen)
        msg = (f"{cause}{holding}; restarted it as pid {new_pid} (restart {len(self._times)} of "
               f"{self._restarts} within {self._window_s:g} s), which takes its batches over")
        _log.warning(msg)
        _caller.warn(msg)  # at the trainer's line whose next() found the death
        return new_pid
