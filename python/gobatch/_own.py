"""A Loader's own producer: a ``shmloader run`` child on a private memfd ring, one child per ring
(the stream, or with epochs ``ring_epochs`` epochs one after another; a new one for a jump or a
resume), watched while the ring is read and restarted by the Supervisor when it is
killed (``_supervise``)."""

from __future__ import annotations

import mmap
import os
import subprocess
import time
import weakref
from typing import IO, Callable, List, NamedTuple, Optional, Type

from . import _clib as _lib
from . import _registry
from ._child import EXIT_USAGE, Child, Command, how_exited
from ._ring import Ring, process_state, producer_states
from ._supervise import DeathWatch, Supervisor
from .errors import ConfigError, LoaderError

__all__ = ["OwnChild", "Restarts"]


class Restarts(NamedTuple):
    """The supervision of a Loader's child (Loader's restarts=, restart_window_s=,
    restart_backoff_s=); ``restarts`` 0 turns it off."""

    restarts: int
    window_s: float
    backoff_s: float


class OwnChild:
    """Starts ``shmloader run --memfd FD`` for each ring the Loader opens, and answers the ring's
    Producers calls for it (its exit status and stderr in errors, its state in stall warnings,
    its restart after a kill)."""

    #: Epochs one ring carries (``run --epoch E --epochs K``): so many that one child, with its
    #: cache, serves a whole training run; the stream index of the ring's end, (E + K) times the
    #: batches per epoch, stays far below 2^64 for any real epoch length.
    ring_epochs = 1 << 16

    def __init__(self, command: Command, *, rank: int, world_size: int, start_timeout: float,
                 close_timeout: float, restarts: Restarts) -> None:
        self._command = command
        self._rank, self._world_size = rank, world_size
        self._start_timeout = start_timeout
        self._close_timeout = close_timeout
        self._restarts = restarts
        self.child: Optional[Child] = None  # the running ring's child
        self.supervisor: Optional[Supervisor] = None
        self._label = "shmloader"
        self._run_args: List[str] = []
        self._ring_fd = -1  # the memfd, kept to hand to a restarted child
        self._ring: "Optional[weakref.ref[Ring]]" = None
        self._attached = False
        self._watch: Optional[DeathWatch] = None  # wakes the consumer when the running child dies
        self._base = 0  # the ring's control mapping (gb_base), for the watch's wakes
        self.restart_count = 0  # children restarted after a kill, over the Loader's life

    # ---- the Loader's calls ----

    @property
    def pid(self) -> Optional[int]:
        return self.child.pid if self.child is not None else None

    @property
    def exit_code(self) -> Optional[int]:
        return self.child.poll() if self.child is not None else None

    @property
    def stderr(self) -> Optional[IO[bytes]]:
        return self.child.stderr if self.child is not None else None

    def open(self, *, start: Optional[int], epoch: Optional[int], framework: str, stall_warning_s: float,
             check: Optional[Callable[[Ring], None]] = None) -> Ring:
        """Creates a sealable memfd, starts a child on it (from stream batch ``start``; with
        ``epoch``, ``ring_epochs`` epochs from it), waits for the ring and attaches as its consumer; ``check``
        vets the ring before it is returned. A failure stops the child."""
        # Sealable: the child seals its size (PROTOCOL.md 1), and Ring checks the seals.
        fd = os.memfd_create("gobatch", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        self._attached = False
        self.child = child = Child("shmloader", "shmloader refused its configuration (exit status 2)",
                                   prefix="gobatch-shmloader-")
        self.supervisor = None
        ring: Optional[Ring] = None
        try:
            self._run_args = self._args(start, epoch)
            self._spawn(fd, join=False)
            self._label = f"shmloader pid {child.pid}"
            deadline = time.monotonic() + self._start_timeout
            while os.fstat(fd).st_size == 0:  # the child fallocates before it writes anything
                self.tick()
                if time.monotonic() >= deadline:
                    raise LoaderError(f"{self._label} did not create its ring within {self._start_timeout:g} s",
                                      stderr=child.tail())
                time.sleep(0.005)
            ring = Ring(fd, framework=framework, label=self._label, timeout=max(deadline - time.monotonic(), 0.1),
                        sealed=True, stall_warning_s=stall_warning_s, _producers=self)
            self._attached = True
            self._ring = weakref.ref(ring)
            if check is not None:
                check(ring)
            if self._restarts.restarts > 0:
                self._supervise(fd, ring)
            return ring
        except BaseException as e:
            if ring is not None:
                ring._close_ring()
            child.stop(self._close_timeout, graceful=False)
            refused = child.config_error() if child.poll() == EXIT_USAGE and not isinstance(e, ConfigError) else None
            child.close()
            if refused is not None:
                raise refused from None
            raise
        finally:
            os.close(fd)

    def stop(self) -> None:
        """After the ring's close: waits for the child to exit (it stops on seeing the consumer
        close; it is signalled after close_timeout seconds) and reaps it."""
        child = self.child
        self._unwatch()
        try:
            if child is not None:
                child.stop(self._close_timeout)
        finally:
            if child is not None:
                child.close()
            if self._ring_fd >= 0:
                os.close(self._ring_fd)
                self._ring_fd = -1

    close = stop  # one child per ring: nothing outlives it

    # ---- the child ----

    def _args(self, start: Optional[int], epoch: Optional[int]) -> List[str]:
        """``shmloader run``'s options for this ring, after --memfd."""
        args: List[str] = []
        if start is not None:
            args += ["--start", str(int(start))]
        if epoch is not None:
            args += ["--epoch", str(epoch), "--epochs", str(self.ring_epochs)]
        if self._world_size != 1:
            args += ["--rank", str(self._rank), "--world-size", str(self._world_size)]
        return args

    def _spawn(self, fd: int, *, join: bool) -> int:
        """Starts ``shmloader run`` on the memfd ring fd (creating it, or joining it: PROTOCOL.md
        3.7.4) and returns its pid. The child dies with this process (PDEATHSIG, 3.5 watchdog)."""
        assert self.child is not None
        cmd = self._command
        verb = ["--memfd", str(fd)] + (["--join"] if join else []) + self._run_args
        return self.child.start([cmd.binary, "run", *cmd.options(*verb)], pass_fds=(fd,),
                                config_json=cmd.config_json, env=cmd.env)

    def _supervise(self, fd: int, ring: Ring) -> None:
        self._ring_fd = os.dup(fd)
        start, world, rank = ring.start_batch, self._world_size, self._rank

        def batch_name(j: int) -> str:
            k = start + j
            return f"stream batch {k}" + (f" (global batch {k * world + rank})" if world > 1 else "")

        restarts = self._restarts
        self.supervisor = Supervisor(
            restarts=restarts.restarts, window_s=restarts.window_s, backoff_s=restarts.backoff_s,
            start_timeout=self._start_timeout, slots=ring.slots,
            spawn=lambda: self._spawn(self._ring_fd, join=True), mm=self._mapping, batch_name=batch_name)
        self._base = int(_lib.lib().gb_base(ring._ptr) or 0)
        assert self.child is not None and self.child.pid is not None
        self._unwatch()
        self._watch = DeathWatch.for_ring(self.child.pid, self._base, ring.slots)

    def _unwatch(self) -> None:
        if self._watch is not None:
            self._watch.stop()
            self._watch = None

    def _restart(self) -> None:
        child, sup = self.child, self.supervisor
        assert child is not None and child.proc is not None and sup is not None
        proc = child.proc
        assert proc.returncode is not None
        slots = sup.slots
        self._unwatch()
        try:
            pid = sup.restart(proc.pid, proc.returncode)
        except LoaderError as e:
            raise LoaderError(f"{self._label}: {e.message}", stderr=child.tail(), exit_code=e.exit_code) from None
        self._watch = DeathWatch.for_ring(pid, self._base, slots)
        self.restart_count += 1
        # Errors from now on name the running child, not the dead one.
        self._label = f"shmloader pid {pid}"
        ring = self._ring() if self._ring is not None else None
        if ring is not None:
            ring._label = self._label

    def _mapping(self) -> Optional[mmap.mmap]:
        """The running ring's mapping (None once it is closed). The ring is held weakly: it holds
        this object."""
        ring = self._ring() if self._ring is not None else None
        return ring._mm if ring is not None else None

    # ---- the ring's calls (_ring.Producers) ----

    def tick(self) -> None:
        """While starting: raises if the child has exited. While the ring is read: reaps the
        child, restarts it if it was killed (supervised), and raises if it failed. A child that
        exited 0 has finished producing; the ring's own checks decide whether batches are
        missing."""
        child = self.child
        code = child.poll() if child is not None else None
        if child is None or code is None:
            return
        if not self._attached:
            raise child.exit_error(code, " before its ring was ready")
        if code == 0:
            return
        if self.supervisor is not None and self.supervisor.restartable(code):
            self._restart()
            return
        raise child.exit_error(code)

    def recover(self, rc: int) -> bool:
        """A producer death the C side reports (GB_EDEAD) while supervised: restart a child that
        was killed, and wait out the start-up of a restarted one that has not registered yet."""
        proc = self.child.proc if self.child is not None else None
        sup = self.supervisor
        if rc != _lib.EDEAD or sup is None or proc is None:
            return False
        code = proc.poll()
        if code is None:
            if sup.excuses(any(p.pid == proc.pid for p in _registry.live(self._mapping()))):
                time.sleep(0.005)
                return True
            try:  # a killed child's threads may still be exiting (its main thread a zombie already)
                code = proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                return False
        if not sup.restartable(code):
            return False
        self._restart()
        return True

    def failure(self, rc: int, cls: Type[LoaderError], message: str) -> BaseException:
        """The ring's error, with the child's exit status (it exits right after reporting) and
        stderr."""
        child = self.child
        code = None
        if child is not None and child.proc is not None:
            try:
                code = child.proc.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                code = None
        if child is not None and code is not None and code != 0:
            message += f" ({child.exit_error(code).message})"
        return cls(message, stderr=child.tail() if child is not None else "", exit_code=code)

    def states(self, mm: Optional[mmap.mmap]) -> List[str]:
        """For the stall warning: the child named as such, and its exit status once it has
        exited (reaped by the wait's checks, so no longer in /proc)."""
        child = self.child
        if child is None or child.proc is None:
            return producer_states(mm)
        pid = child.proc.pid
        mine = f"shmloader pid {pid} (this loader's child)"
        code = child.poll()
        if code is not None:
            return [f"{mine} {how_exited(code)}"]
        live = [p for p in _registry.live(mm) if p.pid == pid]
        if not live:
            return [f"{mine} {process_state(pid)}, not registered in the ring"]
        return [f"{mine} {process_state(pid, live[0].starttime)}, {live[0].batches} batches written"]
