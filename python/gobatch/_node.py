"""The node loader from a rank's side: one ``shmloader serve`` per node feeds every local rank.

Under torchrun with several ranks on a node (``LOCAL_WORLD_SIZE > 1``), or when asked
(``gobatch.Loader(node=True)`` or ``node="NAME"``), a Loader does not start a
``shmloader run`` of its own: it connects to the node loader over an abstract Unix socket
(SOCK_SEQPACKET; the name vanishes with the last process holding it, so nothing is left in
/dev/shm or on disk), asks for its rank's ring and receives the ring's memfd (SCM_RIGHTS).

The first Loader on the node starts the node loader, race-free: a Loader that finds nobody
listening binds the socket name (the kernel lets exactly one bind succeed), listens, and starts
``shmloader serve --listen-fd``, which inherits the bound socket; the others connect to it
(their connections wait in its backlog while it opens the stores). A node loader started by
hand (``shmloader serve --socket NAME``) is used when the Loader is given that name
(``node="NAME"`` or ``GOBATCH_NODE=NAME``). The connection stays open for the Loader's life
(epochs and resumes ask for a new ring on it); the node loader exits when every local rank
has come and gone. The rule that maps a node's local ranks to global ranks lives in the node
loader (``sampler.NodeStreams``); a Loader only says which global rank it is (torchrun's
``RANK``) and passes ``GROUP_RANK`` and ``LOCAL_WORLD_SIZE`` to the node loader it starts.
"""

from __future__ import annotations

import errno
import hashlib
import json
import mmap
import os
import socket
import time
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Type, Union

from . import _clib as _lib
from ._child import Child, Command
from ._ranks import env_int
from ._ring import Ring, producer_states
from .errors import ConfigError, LoaderError, RingError

__all__ = ["NodeSpec", "NodeSession", "NodeRings", "node_spec", "UNSUPERVISED"]

_MAX_REPLY = 65536
_POLL_S = 0.1  # how often a wait checks the child and the deadline


# Said with every rank's error when the node loader dies: unlike a Loader's own child, it is
# not restarted (one process feeds every local rank; a restart would have to rejoin each one).
UNSUPERVISED = ("the node loader (shmloader serve) is not supervised: it is not restarted when it dies, and "
                "every local rank's stream ends with it; start the job again (resuming from a checkpoint with start=)")


class NodeSpec(NamedTuple):
    """Which node loader a rank uses, and which rank it is."""

    socket: str  # abstract socket name (without the leading NUL)
    rank: int  # global rank
    world_size: int
    local_world_size: int
    node_rank: Optional[int]  # GROUP_RANK; None: the node loader finds it from the rank
    by_hand: bool  # the name was given: attach only, never start one


def _default_socket(world_size: int, node_rank: Optional[int], env: Mapping[str, str]) -> str:
    """A socket name every local rank of one torchrun job derives alike, and no other job on the
    machine does: the rendezvous (run id, master address and port), the restart count (a
    restarted group never meets the previous group's node loader), the node and the user."""
    parts = [str(os.getuid()), env.get("GOBATCH_SHM_DIR", ""), str(world_size), str(node_rank)]
    parts += [env.get(k, "") for k in ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT")]
    return "gobatch-node-" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def node_spec(
    node: Union[None, bool, str],
    *,
    rank: int,
    world_size: int,
    local_world_size: Optional[int],
    node_rank: Optional[int],
) -> Optional[NodeSpec]:
    """The node loader a Loader uses, or None for a loader of its own. ``node``: None (use one
    when ``LOCAL_WORLD_SIZE > 1`` or ``GOBATCH_NODE`` names one), False (never), True (always),
    or the name of a node loader started by hand. ``local_world_size`` and ``node_rank``
    default to torchrun's ``LOCAL_WORLD_SIZE`` and ``GROUP_RANK``."""
    env = os.environ
    if node is False:
        return None
    if node is not None and not isinstance(node, (bool, str)):
        raise ValueError(f"node must be None, a bool or a node loader's socket name, not {node!r}")
    by_hand = isinstance(node, str) or (node is None and bool(env.get("GOBATCH_NODE")))
    local = local_world_size if local_world_size is not None else env_int("LOCAL_WORLD_SIZE", 0) or None
    if node is None and not by_hand and (local is None or local <= 1):
        return None
    local = local if local is not None else 1
    group = node_rank if node_rank is not None else env_int("GROUP_RANK", -1)
    if group == -1:
        group = None  # the node loader this rank starts serves its node (sampler.NodeOf)
    if isinstance(local, bool) or not isinstance(local, int) or local < 1 or world_size % local:
        raise ValueError(f"local_world_size must be a positive int dividing world_size={world_size}, not {local!r}")
    if group is not None and (isinstance(group, bool) or not isinstance(group, int) or group < 0):
        raise ValueError(f"node_rank must be an int >= 0, not {group!r}")
    if isinstance(node, str):
        name = node
    elif node is None and by_hand:
        name = env["GOBATCH_NODE"]
    else:
        name = _default_socket(world_size, group, env)
    return NodeSpec(name, rank, world_size, local, group, by_hand)


class _Gone(Exception):
    """The node loader closed the connection before it replied."""


class NodeSession:
    """A rank's connection to its node loader (starting it when this rank is the first)."""

    def __init__(self, spec: NodeSpec, command: Command, *, start_timeout: float) -> None:
        """Connects to the node loader of ``spec``, or starts it with ``command`` (``shmloader
        serve`` with the command's options, and the rank flags and the socket)."""
        self.spec = spec
        self._command = command
        self._sha = hashlib.sha256(command.config_bytes()).hexdigest()
        self._timeout = start_timeout
        self._sock: Optional[socket.socket] = None
        self.child: Optional[Child] = None  # the node loader, when this rank started it
        self.server_pid: Optional[int] = None
        self._sock = self._rendezvous(time.monotonic() + start_timeout)

    # ---- finding or starting the node loader ----

    @property
    def _addr(self) -> str:
        return "\0" + self.spec.socket

    def _rendezvous(self, deadline: float) -> socket.socket:
        """A connection to the node loader: connect to a listening one, else become the
        starter by binding the name (the kernel lets one bind win), else retry."""
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
            try:
                s.connect(self._addr)
                return s
            except (ConnectionRefusedError, FileNotFoundError):
                s.close()
            if self.spec.by_hand:
                if time.monotonic() >= deadline:
                    raise LoaderError(f"no node loader listens on socket {self.spec.socket!r} (start it with "
                                      f"`shmloader serve --socket {self.spec.socket} ...`, or leave node unset)")
            else:
                listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
                try:
                    listener.bind(self._addr)
                except OSError as e:
                    listener.close()
                    if e.errno != errno.EADDRINUSE:
                        raise LoaderError(f"node loader socket {self.spec.socket!r}: {e}") from None
                else:
                    try:
                        listener.listen(256)
                        self._start_server(listener)
                    finally:
                        listener.close()  # the child holds it now
                    continue  # connect to it
            if time.monotonic() >= deadline:
                raise LoaderError(f"could not reach the node loader on socket {self.spec.socket!r} "
                                  f"within {self._timeout:g} s")
            time.sleep(0.01)

    def _start_server(self, listener: socket.socket) -> None:
        """Starts ``shmloader serve`` on the bound socket, with no parent-death tie: it serves the
        other ranks after this one is gone (and exits once they all are)."""
        spec, cmd = self.spec, self._command
        node = ["--node-rank", str(spec.node_rank)] if spec.node_rank is not None else ["--of-rank", str(spec.rank)]
        args = [cmd.binary, "serve", *cmd.options(), "--listen-fd", str(listener.fileno()),
                "--local-world-size", str(spec.local_world_size), *node,
                "--world-size", str(spec.world_size), "--linger", f"{max(self._timeout, 1.0):g}s"]
        self.child = Child("node loader", "shmloader serve refused its configuration (exit status 2)",
                           prefix="gobatch-serve-")
        self.child.start(args, pass_fds=(listener.fileno(),), config_json=cmd.config_json, env=cmd.env)

    # ---- rings ----

    @property
    def label(self) -> str:
        pid = self.server_pid
        if pid is None and self.child is not None:
            pid = self.child.pid  # this rank started it, and it has not replied yet
        return f"node loader pid {'?' if pid is None else pid} (socket {self.spec.socket}), rank {self.spec.rank}"

    def open_ring(self, *, start: Optional[int], epoch: Optional[int], timeout: float) -> int:
        """Asks for this rank's ring (from stream batch ``start``, of ``epoch``) and returns its
        memfd, checked to be this rank's; the caller closes it."""
        sock = self._sock
        if sock is None:
            raise LoaderError(f"{self.label}: the connection is closed")
        req = {"rank": self.spec.rank, "world_size": self.spec.world_size, "start": start, "epoch": epoch,
               "config_sha256": self._sha, "pid": os.getpid()}
        deadline = time.monotonic() + timeout
        try:
            msg, fds = self._ask(sock, req, deadline)
        except _Gone:
            if self.child is not None or self.spec.by_hand or self.server_pid is not None:
                raise LoaderError(f"{self.label}: the node loader closed the connection before it replied",
                                  stderr=self.stderr_tail()) from None
            # The node loader another rank started failed at start-up: start one here, whose
            # error (a configuration error, say) this rank then reports itself.
            sock.close()
            self._sock = sock = self._rendezvous(deadline)
            try:
                msg, fds = self._ask(sock, req, deadline)
            except _Gone:
                raise LoaderError(f"{self.label}: the node loader closed the connection before it replied",
                                  stderr=self.stderr_tail()) from None
        try:
            reply = json.loads(msg)
        except ValueError:
            for fd in fds:
                os.close(fd)
            raise RingError(f"{self.label}: not a node loader reply: {msg[:200]!r}") from None
        self.server_pid = reply.get("server_pid", self.server_pid)
        if reply.get("error"):
            for fd in fds:
                os.close(fd)
            cls = ConfigError if reply.get("usage") else LoaderError
            raise cls(f"{self.label}: {reply['error']}", stderr=self.stderr_tail())
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise RingError(f"{self.label}: the reply carried {len(fds)} descriptors, expected the ring's one")
        self._check_ring(fds[0], reply)
        return fds[0]

    def _ask(self, sock: socket.socket, req: Dict[str, Any], deadline: float) -> "tuple[bytes, List[int]]":
        """Sends one request and waits (up to the deadline, checking the child this rank
        started) for its reply; raises _Gone when the connection ends first."""
        data = json.dumps(req).encode()
        try:
            sent = sock.send(data)
        except OSError as e:
            if e.errno in (errno.ECONNRESET, errno.EPIPE, errno.ENOTCONN):
                raise _Gone() from None
            raise LoaderError(f"{self.label}: {e}") from None
        if sent != len(data):
            raise LoaderError(f"{self.label}: request cut short ({sent} of {len(data)} bytes)")
        while True:
            sock.settimeout(_POLL_S)
            try:
                msg, fds, _, _ = socket.recv_fds(sock, _MAX_REPLY, 1)
            except socket.timeout:
                self.check()
                if time.monotonic() >= deadline:
                    raise LoaderError(f"{self.label}: no ring within {self._timeout:g} s", stderr=self.stderr_tail())
                continue
            except OSError as e:
                msg, fds = b"", []
                if e.errno != errno.ECONNRESET:
                    raise LoaderError(f"{self.label}: {e}") from None
            finally:
                sock.settimeout(None)
            if msg:
                return msg, fds
            self.check()  # the starter sees its child's own error first
            raise _Gone()

    def _check_ring(self, fd: int, reply: Dict[str, Any]) -> None:
        """The ring must be this rank's: the reply says so, and so does the memfd's name, which
        the node loader gave it from the rank when it made it."""
        rank, name = reply.get("rank"), reply.get("memfd")
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            link = ""
        if rank != self.spec.rank or not name or not link.startswith(f"/memfd:{name} "):
            os.close(fd)
            raise RingError(f"{self.label}: got a ring for rank {rank!r} ({link or 'unknown memfd'}, "
                            f"named {name!r}); refusing it: this is rank {self.spec.rank}")

    # ---- the child ----

    def check(self) -> None:
        """Raises if the node loader this rank started has failed (about every 100 ms of a wait)."""
        child = self.child
        code = child.poll() if child is not None else None
        if child is None or code is None or code == 0:
            return
        raise child.exit_error(code, f"; {UNSUPERVISED}")

    def stderr_tail(self) -> str:
        """The end of the node loader's stderr, when this rank started it."""
        return self.child.tail() if self.child is not None else ""

    @property
    def closed(self) -> bool:
        return self._sock is None

    def close(self) -> None:
        """Ends this rank's session (close the ring first: the node loader counts a session
        that ends with its ring open as the rank's death). The node loader itself exits once
        every local rank has left; a child this rank started is reaped if it already has."""
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()
        if self.child is not None and self.child.poll() is not None:
            self.child.close()


class NodeRings:
    """A Loader's producer strategy in node mode: each ring (an epoch, a resume) is asked of the
    node loader over one session that outlives them; the ring's Producers calls watch the node
    loader this rank started, and say with a producer's death that it is not supervised."""

    #: Epochs one ring carries: one (the node loader's cache outlives its rings, so a new ring
    #: per epoch costs a request, not a cold cache).
    ring_epochs = 1

    def __init__(self, spec: NodeSpec, command: Command, *, start_timeout: float) -> None:
        self._spec = spec
        self._command = command
        self._start_timeout = start_timeout
        self.session: Optional[NodeSession] = None

    @property
    def pid(self) -> Optional[int]:
        return self.session.server_pid if self.session is not None else None

    exit_code = None  # the node loader is not this Loader's child

    def open(self, *, start: Optional[int], epoch: Optional[int], framework: str, stall_warning_s: float,
             check: Optional[Callable[[Ring], None]] = None) -> Ring:
        """This rank's ring from the node's ``shmloader serve`` (started here when this is the
        node's first Loader); ``check`` vets it before it is returned. A failure ends the
        session."""
        if self.session is None or self.session.closed:
            self.session = NodeSession(self._spec, self._command, start_timeout=self._start_timeout)
        session = self.session
        deadline = time.monotonic() + self._start_timeout
        ring: Optional[Ring] = None
        try:
            fd = session.open_ring(start=start, epoch=epoch, timeout=self._start_timeout)
            try:
                ring = Ring(fd, framework=framework, label=session.label, timeout=max(deadline - time.monotonic(), 0.1),
                            sealed=True, stall_warning_s=stall_warning_s, _producers=self)
            finally:
                os.close(fd)
            if check is not None:
                check(ring)
            return ring
        except BaseException:
            if ring is not None:
                ring._close_ring()
            session.close()
            raise

    def stop(self) -> None:
        """After a ring's close: the session stays for the next ring."""

    def close(self) -> None:
        """After the last ring's close: the node loader sees a clean exit."""
        if self.session is not None:
            self.session.close()

    # ---- the ring's calls (_ring.Producers) ----

    def tick(self) -> None:
        if self.session is not None:
            self.session.check()

    def recover(self, rc: int) -> bool:
        return False

    def failure(self, rc: int, cls: Type[LoaderError], message: str) -> BaseException:
        if rc == _lib.EDEAD:
            message += f"; {UNSUPERVISED}"
        return cls(message)

    def states(self, mm: Optional[mmap.mmap]) -> List[str]:
        return producer_states(mm)
