"""The node loader from a rank's side: one ``shmloader serve`` per node feeds every local rank.

Under torchrun with several ranks on a node (``LOCAL_WORLD_SIZE > 1``), or when asked
(``gobatch.Loader(node=True)`` or ``node="NAME"``), a Loader does not start a
``shmloader run`` of its own: it connects to the node loader over an abstract Unix socket
(SOCK_SEQPACKET; the name vanishes with the last process holding it, so nothing is left in
/dev/shm or on disk), asks for its rank's ring and receives the ring's memfd (SCM_RIGHTS).

The first Loader on the node starts the node loader, race-free: a Loader that finds nobody
listening binds the socket name (the kernel lets exactly one bind succeed), listens, and starts
``shmloader serve --listen-fd``, which inherits the bound socket; the others connect to it
(their connections wait in its backlog while it opens the stores). Before asking for a ring,
a rank checks that the listener runs as its user and proves the node's secret, and proves it
in turn (``_hello``; the Go package nodewire). A node loader started by
hand (``shmloader serve --socket NAME``) is used when the Loader is given that name
(``node="NAME"`` or ``GOBATCH_NODE=NAME``). The connection stays open for the Loader's life
(epochs and resumes ask for a new ring on it); the node loader exits when every local rank
has come and gone; when it is killed, the ranks restart it and each hands it its ring to join
(``NodeRings``), meeting at the socket name it drew for its successor (its welcome's
``next``: random, told only to this uid's peers, so another user cannot hold it). The rule
that maps a node's local ranks to global ranks lives in the node loader
(``sampler.NodeStreams``); a Loader only says which global rank it is (torchrun's
``RANK``) and passes ``GROUP_RANK`` and ``LOCAL_WORLD_SIZE`` to the node loader it starts.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import mmap
import os
import re
import signal
import socket
import struct
import subprocess
import time
import weakref
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Type, Union

from . import _clib as _lib
from . import _registry
from ._child import Child, Command
from ._own import Restarts
from ._ranks import env_int
from ._ring import Ring, process_state, producer_states
from ._supervise import DeathWatch, Supervisor
from .errors import ConfigError, LoaderError, RingError

__all__ = ["NodeSpec", "NodeSession", "NodeRings", "node_spec", "share_spec", "UNSUPERVISED"]

_MAX_REPLY = 65536
_POLL_S = 0.1  # how often a wait checks the child and the deadline


# Said with every rank's error when the node loader dies: unlike a Loader's own child, it is
# not restarted (one process feeds every local rank; a restart would have to rejoin each one).
UNSUPERVISED = ("the node loader (shmloader serve) is not supervised: it is not restarted when it dies (one started "
                "by hand, or restarts=0), and every local rank's stream ends with it; start the job again (resuming "
                "from a checkpoint with start=)")


# The node's secret (the Go package nodewire): in every rank's environment when the
# launcher sets it, and in the node loader's, which the starting rank gives it.
SECRET_ENV = "GOBATCH_NODE_SECRET"
# A node loader started by hand as another user (``serve --allow-uid``) is accepted by a rank
# whose environment names that uid here.
UID_ENV = "GOBATCH_NODE_UID"
_NONCE_BYTES = 32
# A successor's socket name as a node loader draws it (nodewire.NextName).
_NEXT_NAME = re.compile(r"gobatch-node-[0-9a-f]{32}")


def _job_parts(env: Mapping[str, str]) -> List[str]:
    """What tells one torchrun job on this machine from another: the rendezvous (run id, master
    address and port) and the restart count (a restarted group never meets the previous
    group's node loader)."""
    return [env.get(k, "") for k in ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT")]


def _node_secret(spec: "NodeSpec", env: Mapping[str, str]) -> bytes:
    """The secret a rank and its node loader prove to each other. ``GOBATCH_NODE_SECRET`` when
    the job's environment has it (the launcher's random value: nobody else can derive it, and
    it also goes into the default socket name, which no one can then guess and squat); else,
    for a node loader started by a rank, one derived from the job's torchrun environment (as
    private as that environment: /proc/PID/environ is readable by the same user only, and
    ``torchrun --standalone``'s run id is a random uuid); else (a node loader started by hand
    without one) empty. Other users are kept out by the kernel's credentials whatever it is."""
    if spec.share_job is not None:
        # Every job of this user meets the sharing node loader, so the secret cannot be one
        # job's: the kernel's credentials (this user only, both ways) are its gate.
        return hashlib.sha256("\0".join(["gobatch-share-secret", str(os.getuid()), spec.socket]).encode()).hexdigest().encode()
    given = env.get(SECRET_ENV)
    if given:
        return given.encode()
    if spec.by_hand:
        return b""
    parts = ["gobatch-node-secret", str(os.getuid()), spec.socket, *_job_parts(env)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest().encode()


def _proof(key: bytes, role: bytes, rank_nonce: bytes, serve_nonce: bytes) -> bytes:
    return hmac.new(key, role + rank_nonce + serve_nonce, hashlib.sha256).digest()


def peer_cred(sock: socket.socket) -> "tuple[int, int, int]":
    """(pid, uid, gid) of the socket's peer, as the kernel recorded them (SO_PEERCRED)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    return pid, uid, gid


class NodeSpec(NamedTuple):
    """Which node loader a rank uses, and which rank it is."""

    socket: str  # abstract socket name (without the leading NUL)
    rank: int  # global rank
    world_size: int
    local_world_size: int
    node_rank: Optional[int]  # GROUP_RANK; None: the node loader finds it from the rank
    by_hand: bool  # the name was given: attach only, never start one
    share_job: Optional[str] = None  # a sharing node loader's (serve --share): the job this rank is of


# A sharing node loader keeps its cache this long after its last job left, so that the next run
# on the node finds it warm; GOBATCH_SHARE_LINGER_S replaces it (seconds).
SHARE_LINGER_S = 60.0
SHARE_LINGER_ENV = "GOBATCH_SHARE_LINGER_S"


def share_spec(share: Union[bool, str], *, rank: int, world_size: int) -> NodeSpec:
    """The sharing node loader a Loader uses (``share=True``, or a name: several can run), and
    the job it is of: the ranks of one torchrun job derive the same job (its rendezvous), any
    other Loader draws one of its own. The socket's name is derived from the user and the name,
    so every job of this user on the machine finds it; another user's process listening there
    is refused (``_hello``), and the node loader admits this user's peers only."""
    if share is True:
        name = "default"
    elif isinstance(share, str) and share and share.isprintable() and len(share) <= 64:
        name = share
    else:
        raise ValueError(f"share must be True or a name (1 to 64 printable characters), not {share!r}")
    env = os.environ
    parts = ["gobatch-share", str(os.getuid()), env.get("GOBATCH_SHM_DIR", ""), name]
    socket_name = "gobatch-share-" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
    if world_size > 1:
        job = hashlib.sha256("\0".join(["job", *_job_parts(env), str(world_size)]).encode()).hexdigest()
    else:
        job = os.urandom(16).hex()
    return NodeSpec(socket_name, rank, world_size, 1, None, False, job)


def _default_socket(world_size: int, node_rank: Optional[int], env: Mapping[str, str]) -> str:
    """A socket name every local rank of one torchrun job derives alike, and no other job on the
    machine does: the job (``_job_parts``), the node and the user, and the node's secret when
    the launcher set one."""
    parts = [str(os.getuid()), env.get("GOBATCH_SHM_DIR", ""), str(world_size), str(node_rank)]
    parts += _job_parts(env)
    if env.get(SECRET_ENV):
        parts.append(env[SECRET_ENV])  # a name nobody without the secret can compute
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


# Connections a rank that started no node loader sees closed unanswered before it gives up: the
# listener of a killed node loader lives until its process is torn down.
_GONE_RETRIES = 5


class _Gone(Exception):
    """The node loader closed the connection before it replied."""


class _Busy(Exception):
    """The node loader had no handshake place for this connection (a flood of this uid's
    connections): it said so, and to try again."""


class _GoneError(LoaderError):
    """The Loader's error for _Gone: the node loader may have died (NodeRings.open asks)."""


def _last_words(sock: socket.socket) -> "tuple[bytes, List[int]]":
    """What the node loader said before it closed the connection (a refusal), or nothing. A
    close with this rank's message unread resets the connection: the reset is reported once
    (the error that brought the caller here), and the reply queued before it can still be read."""
    try:
        msg, fds, _, _ = socket.recv_fds(sock, _MAX_REPLY, 1, socket.MSG_DONTWAIT)
    except OSError:
        return b"", []
    return msg, fds


class NodeSession:
    """A rank's connection to its node loader (starting it when this rank is the first)."""

    def __init__(self, spec: NodeSpec, command: Command, *, start_timeout: float, connect: bool = True,
                 at: Optional[str] = None) -> None:
        """Connects to the node loader of ``spec``, or starts it with ``command`` (``shmloader
        serve`` with the command's options, and the rank flags and the socket); with
        ``connect`` False, :meth:`connect` does. ``at``: the socket name to meet it at instead
        of the spec's (a restart's: the name the dead node loader gave for its successor)."""
        self.spec = spec
        self.socket = at or spec.socket
        #: The name the node loader reached gave for its successor's socket (its welcome's
        #: ``next``): random and told only to peers of this uid, so that another user, who can
        #: read every abstract socket name in /proc/net/unix, cannot hold it while it restarts.
        self.next_socket: Optional[str] = None
        self._command = command
        self._sha = hashlib.sha256(command.config_bytes()).hexdigest()
        # With the file, these make the rank's stream: the node loader refuses a rank whose
        # differ from its own (it would otherwise serve its own stream to a rank asking for another).
        self._options: Dict[str, Any] = {"batch": list(command.batch), "data_root": command.data_root or ""}
        if spec.share_job is not None:
            if command.config == "-":
                raise ConfigError("share: a sharing node loader opens each job's configuration file itself; "
                                  "give the Loader a file (TOML or ocf-data-sampler YAML), not a dict")
            self._options["share"] = {"job": spec.share_job, "config": os.path.abspath(command.config),
                                      "cwd": os.getcwd()}
        self._timeout = start_timeout
        self._sock: Optional[socket.socket] = None
        self.child: Optional[Child] = None  # the node loader, when this rank started it
        self.server_pid: Optional[int] = None
        self._secret = _node_secret(spec, os.environ)
        self._auth = ""  # this connection's proof for its first request
        if connect:
            self.connect()

    def connect(self) -> None:
        """Reaches the node loader (starting it when no one listens)."""
        self._sock = self._rendezvous(time.monotonic() + self._timeout)

    # ---- finding or starting the node loader ----

    @property
    def _addr(self) -> str:
        return "\0" + self.socket

    def _rendezvous(self, deadline: float) -> socket.socket:
        """A checked connection to the node loader (``_hello``): connect to a listening one, else
        become the starter by binding the name (the kernel lets one bind win), else retry. A
        node loader another rank started that fails at start-up closes the connection without
        a word: this rank then starts one itself and reports its error. One that was killed
        may still take connections while it is torn down: a few tries more. One that has no
        handshake place for this connection (this uid's connections flood it) says so: tries
        again until the deadline."""
        retries = _GONE_RETRIES
        while True:
            s = self._connect(deadline)
            try:
                self._hello(s, deadline)
                return s
            except _Busy as e:
                s.close()
                if time.monotonic() >= deadline:
                    raise LoaderError(f"node loader socket {self.socket!r}: {e}", stderr=self.stderr_tail()) from None
                time.sleep(0.02)
            except _Gone:
                s.close()
                if self.child is not None or self.spec.by_hand or retries == 0:
                    raise _GoneError(f"{self.label}: the node loader closed the connection before it replied",
                                      stderr=self.stderr_tail()) from None
                retries -= 1
                time.sleep(0.01)
            except BaseException:
                s.close()
                raise

    def _connect(self, deadline: float) -> socket.socket:
        """A connection to whatever listens on the name, starting the node loader when nobody does."""
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
            try:
                s.connect(self._addr)
                return s
            except (ConnectionRefusedError, FileNotFoundError):
                s.close()
            if self.spec.by_hand:
                if time.monotonic() >= deadline:
                    raise LoaderError(f"no node loader listens on socket {self.socket!r} (start it with "
                                      f"`shmloader serve --socket {self.socket} ...`, or leave node unset)")
            else:
                listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
                try:
                    listener.bind(self._addr)
                except OSError as e:
                    listener.close()
                    if e.errno != errno.EADDRINUSE:
                        raise LoaderError(f"node loader socket {self.socket!r}: {e}") from None
                else:
                    try:
                        listener.listen(256)
                        self._start_server(listener)
                    finally:
                        listener.close()  # the child holds it now
                    continue  # connect to it
            if time.monotonic() >= deadline:
                raise LoaderError(f"could not reach the node loader on socket {self.socket!r} "
                                  f"within {self._timeout:g} s")
            time.sleep(0.01)

    def _hello(self, sock: socket.socket, deadline: float) -> None:
        """Checks the listener both ways before anything else crosses: it runs as this user
        (SO_PEERCRED; another user's process is refused at once), and it proves the node's
        secret (an HMAC over both sides' nonces: the Go package nodewire); this rank's
        proof goes with its first request."""
        pid, uid, _ = peer_cred(sock)
        where = f"node loader socket {self.socket!r}"
        if uid != os.getuid() and str(uid) != os.environ.get(UID_ENV, "").strip():
            raise LoaderError(f"{where}: the process listening there (pid {pid}) runs as uid {uid}, not this "
                              f"rank's uid {os.getuid()}: another user holds the name; refusing it (set "
                              f"{SECRET_ENV} to a random value in the job's environment: the name is then derived from it; "
                              f"{UID_ENV}={uid} accepts a node loader of that user)")
        mine = os.urandom(_NONCE_BYTES)
        msg, fds = self._exchange(sock, json.dumps({"hello": mine.hex()}).encode(), deadline)
        for fd in fds:
            os.close(fd)
        try:
            welcome = json.loads(msg)
            theirs = bytes.fromhex(welcome.get("nonce") or "")
            proof = bytes.fromhex(welcome.get("proof") or "")
        except (ValueError, AttributeError, TypeError):
            raise LoaderError(f"{where}: the process listening there (pid {pid}, uid {uid}) is not a node loader: "
                              f"it answered {msg[:120]!r}") from None
        if welcome.get("error"):
            if welcome.get("busy"):
                raise _Busy(welcome["error"])
            raise LoaderError(f"{where}: {welcome['error']}", stderr=self.stderr_tail())
        if len(theirs) != _NONCE_BYTES or not hmac.compare_digest(proof, _proof(self._secret, b"serve", mine, theirs)):
            raise LoaderError(f"{where}: the process listening there (pid {welcome.get('server_pid', pid)}, uid {uid}) "
                              f"does not prove this job's secret: a squatter, or another job's node loader; refusing it")
        self.server_pid = welcome.get("server_pid", self.server_pid)
        self._auth = _proof(self._secret, b"rank", mine, theirs).hex()
        nxt = welcome.get("next")
        if isinstance(nxt, str) and _NEXT_NAME.fullmatch(nxt):
            self.next_socket = nxt

    def _start_server(self, listener: socket.socket) -> None:
        """Starts ``shmloader serve`` on the bound socket, with no parent-death tie: it serves the
        other ranks after this one is gone (and exits once they all are)."""
        spec, cmd = self.spec, self._command
        if spec.share_job is not None:
            # Every job brings its own configuration and options; the cache's budget is this
            # job's cache_mb (the default's when it gives none), and it outlives the jobs.
            cache = list(cmd.batch[cmd.batch.index("--cache-mb"):][:2]) if "--cache-mb" in cmd.batch else []
            readers = ["--readers", str(cmd.readers)] if cmd.readers is not None else []
            try:
                linger = float(os.environ.get(SHARE_LINGER_ENV, SHARE_LINGER_S))
            except ValueError:
                raise ConfigError(f"{SHARE_LINGER_ENV}={os.environ[SHARE_LINGER_ENV]!r}: expected seconds") from None
            args = [cmd.binary, "serve", "--share", "--listen-fd", str(listener.fileno()), *cache, *readers,
                    "--linger", f"{max(linger, 0.001):g}s", *cmd.extra_args]
        else:
            node = ["--node-rank", str(spec.node_rank)] if spec.node_rank is not None else ["--of-rank", str(spec.rank)]
            args = [cmd.binary, "serve", *cmd.options(), "--listen-fd", str(listener.fileno()),
                    "--local-world-size", str(spec.local_world_size), *node,
                    "--world-size", str(spec.world_size), "--linger", f"{max(self._timeout, 1.0):g}s"]
        env = dict(os.environ if cmd.env is None else cmd.env)
        env[SECRET_ENV] = self._secret.decode()
        self.child = Child("node loader", "shmloader serve refused its configuration (exit status 2)",
                           prefix="gobatch-serve-")
        self.child.start(args, pass_fds=(listener.fileno(),), config_json=cmd.config_json, env=env)

    # ---- rings ----

    @property
    def label(self) -> str:
        pid = self.server_pid
        if pid is None and self.child is not None:
            pid = self.child.pid  # this rank started it, and it has not replied yet
        return f"node loader pid {'?' if pid is None else pid} (socket {self.socket}), rank {self.spec.rank}"

    def open_ring(self, *, start: Optional[int], epoch: Optional[int], timeout: float) -> int:
        """Asks for this rank's ring (from stream batch ``start``, of ``epoch``) and returns its
        memfd, checked to be this rank's; the caller closes it."""
        sock = self._sock
        if sock is None:
            raise LoaderError(f"{self.label}: the connection is closed")
        req = {"rank": self.spec.rank, "world_size": self.spec.world_size, "start": start, "epoch": epoch,
               "config_sha256": self._sha, "pid": os.getpid(), "auth": self._auth, **self._options}
        try:
            msg, fds = self._exchange(sock, json.dumps(req).encode(), time.monotonic() + timeout)
        except _Gone:
            raise _GoneError(f"{self.label}: the node loader closed the connection before it replied",
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

    def _exchange(self, sock: socket.socket, data: bytes, deadline: float,
                  fds: Sequence[int] = ()) -> "tuple[bytes, List[int]]":
        """Sends one message (with ``fds``) and waits (up to the deadline, checking the child
        this rank started) for its reply; raises _Gone when the connection ends first."""
        try:
            sent = socket.send_fds(sock, [data], list(fds)) if fds else sock.send(data)
        except OSError as e:
            if e.errno in (errno.ECONNRESET, errno.EPIPE, errno.ENOTCONN):
                msg, fds = _last_words(sock)
                if msg:
                    return msg, fds
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
                if e.errno != errno.ECONNRESET:
                    raise LoaderError(f"{self.label}: {e}") from None
                msg, fds = _last_words(sock)
            finally:
                sock.settimeout(None)
            if msg:
                return msg, fds
            self.check()  # the starter sees its child's own error first
            raise _Gone()

    def join_ring(self, fd: int, *, epoch: Optional[int], timeout: float) -> None:
        """Hands this rank's ring (its memfd ``fd``), whose node loader died, to this one, which
        joins it as its producer: it takes over the batches the dead one held and carries on at
        the ring's position (docs/PROTOCOL.md 3.7)."""
        sock = self._sock
        if sock is None:
            raise LoaderError(f"{self.label}: the connection is closed")
        req = {"rank": self.spec.rank, "world_size": self.spec.world_size, "start": None, "epoch": epoch,
               "config_sha256": self._sha, "pid": os.getpid(), "auth": self._auth, "join": True, **self._options}
        try:
            msg, fds = self._exchange(sock, json.dumps(req).encode(), time.monotonic() + timeout, fds=(fd,))
        except _Gone:
            raise _GoneError(f"{self.label}: the node loader closed the connection before it replied",
                              stderr=self.stderr_tail()) from None
        for extra in fds:
            os.close(extra)
        try:
            reply = json.loads(msg)
        except ValueError:
            raise RingError(f"{self.label}: not a node loader reply: {msg[:200]!r}") from None
        self.server_pid = reply.get("server_pid", self.server_pid)
        if reply.get("error"):
            cls = ConfigError if reply.get("usage") else LoaderError
            raise cls(f"{self.label}: joining the ring: {reply['error']}", stderr=self.stderr_tail())

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

    def check(self, supervised: bool = False) -> None:
        """Raises if the node loader this rank started has failed (about every 100 ms of a
        wait); ``supervised``: a restart was possible, and not for this failure."""
        child = self.child
        code = child.poll() if child is not None else None
        if child is None or code is None or code == 0:
            return
        raise child.exit_error(code, "" if supervised else f"; {UNSUPERVISED}")

    def server_gone(self) -> bool:
        """Whether the node loader this session reached has exited."""
        pid = self.server_pid
        return pid is not None and process_state(pid).startswith(("gone", "a zombie", "dead"))

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
    node loader over one session that outlives them. The node loader is supervised as a
    Loader's own child is (``_supervise.Supervisor``, the same ``restarts`` budget, backoff and
    warnings): when it dies while a ring is read, each rank finds it dead (its child's exit
    status for the rank that started it; the ring's dead producer for the others), meets the
    others again at the socket name the dead one drew for its successor, where the kernel's
    bind elects the rank that starts the new one, and hands it its ring to join
    (``NodeSession.join_ring``): the new node loader takes over the batches the dead one held
    and carries on at the ring's position, so each rank's stream goes on exactly once and in
    order. A node loader started by hand, or ``restarts=0``, is not restarted."""

    #: Epochs one ring carries: one (the node loader's cache outlives its rings, so a new ring
    #: per epoch costs a request, not a cold cache).
    ring_epochs = 1

    def __init__(self, spec: NodeSpec, command: Command, *, start_timeout: float,
                 restarts: Optional[Restarts] = None) -> None:
        self._spec = spec
        self._command = command
        self._start_timeout = start_timeout
        # Not restarted: one started by hand, and a sharing one (its jobs' rings are each their own).
        supervised = restarts is not None and not spec.by_hand and spec.share_job is None
        self._restarts = restarts if supervised else Restarts(0, 0.0, 0.0)
        self.session: Optional[NodeSession] = None
        self.supervisor: Optional[Supervisor] = None
        self._ring_fd = -1  # the open ring's memfd, kept to hand to a restarted node loader
        self._ring: "Optional[weakref.ref[Ring]]" = None
        self._epoch: Optional[int] = None
        self._watch: Optional[DeathWatch] = None  # wakes the consumer when the node loader dies
        self._base = 0  # the open ring's control mapping (gb_base), for the watch's wakes
        self._restarts_before = 0  # node loaders restarted while earlier rings were open
        self._at: Optional[str] = None  # where the next node loader is met (None: the spec's name)

    @property
    def restart_count(self) -> int:
        """Node loaders this rank restarted after a kill, over the Loader's life (``stats()["restarts"]``)."""
        sup = self.supervisor
        return self._restarts_before + (sup.restart_count if sup is not None else 0)

    @property
    def pid(self) -> Optional[int]:
        return self.session.server_pid if self.session is not None else None

    exit_code = None  # the node loader is not this Loader's child

    def open(self, *, start: Optional[int], epoch: Optional[int], framework: str, stall_warning_s: float,
             check: Optional[Callable[[Ring], None]] = None) -> Ring:
        """This rank's ring from the node's ``shmloader serve`` (started here when this is the
        node's first Loader); ``check`` vets it before it is returned. A node loader that dies
        (supervised) before the ring is open is restarted as it would be later, within the same
        budget, and asked again: no batch was read from the ring it did not hand over. Any
        other failure ends the session."""
        if self.session is not None and self._restarts.restarts > 0 and self.session.server_gone():
            self.session.close()  # it died between rings: nothing to take over, meet the next one
        opening: Optional[Supervisor] = None  # restarts of node loaders that died while the ring was asked for
        while True:
            if self.session is None or self.session.closed:
                self.session = self._new_session(connect=False)
            session = self.session
            try:
                if session.closed:
                    session.connect()
                return self._open_ring(session, start=start, epoch=epoch, framework=framework,
                                       stall_warning_s=stall_warning_s, check=check, previous=opening)
            except BaseException as e:
                child = session.child
                lost = isinstance(e, _GoneError) or (isinstance(e, LoaderError) and child is not None
                                                     and (child.poll() or 0) < 0)
                died = self._died(session) if lost and self._restarts.restarts > 0 else None
                session.close()
                if died is None:
                    raise
            if opening is None:
                r = self._restarts
                opening = Supervisor(restarts=r.restarts, window_s=r.window_s, backoff_s=r.backoff_s,
                                     start_timeout=self._start_timeout, slots=0, spawn=self._meet,
                                     mm=lambda: None, batch_name=str, then="which is asked for the ring again")
            self._restart_with(opening, *died)

    def _open_ring(self, session: NodeSession, *, start: Optional[int], epoch: Optional[int], framework: str,
                   stall_warning_s: float, check: Optional[Callable[[Ring], None]],
                   previous: Optional[Supervisor]) -> Ring:
        deadline = time.monotonic() + self._start_timeout
        ring: Optional[Ring] = None
        try:
            fd = session.open_ring(start=start, epoch=epoch, timeout=self._start_timeout)
            try:
                ring = Ring(fd, framework=framework, label=session.label, timeout=max(deadline - time.monotonic(), 0.1),
                            sealed=True, stall_warning_s=stall_warning_s, _producers=self)
                if check is not None:
                    check(ring)
                if self._restarts.restarts > 0:
                    self._supervise(fd, ring, epoch, previous)
            finally:
                os.close(fd)
            return ring
        except BaseException:
            if ring is not None:
                ring._close_ring()
            raise

    def _new_session(self, connect: bool = True) -> NodeSession:
        """A session at the name where this rank meets its node loader: the spec's, or, once a
        node loader was reached, the name it drew for its successor (every rank it greeted got
        the same one, and no other user has it, so no squatter can hold it during a restart)."""
        old = self.session
        if old is not None and old.next_socket:
            self._at = old.next_socket
        return NodeSession(self._spec, self._command, start_timeout=self._start_timeout, connect=connect, at=self._at)

    def _died(self, session: NodeSession) -> "Optional[tuple[int, Optional[int]]]":
        """(pid, exit status or None when it was not this rank's child) of the session's node
        loader if it was killed (waiting up to a second for a dying one to be gone); None when it
        lives or exited with a status of its own (it said why)."""
        child = session.child
        pid = session.server_pid if session.server_pid is not None else (child.pid if child is not None else None)
        if pid is None:
            return None
        mine = child is not None and child.pid == pid
        deadline = time.monotonic() + 1.0
        while True:
            code = child.poll() if mine and child is not None else None
            if code is not None:
                return (pid, code) if code < 0 else None
            if not mine and process_state(pid).startswith(("gone", "a zombie", "dead")):
                return pid, None
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.005)

    def _meet(self) -> int:
        """The opening Supervisor's spawn: a new session (starting the node loader when this
        rank wins the bind); returns the node loader's pid."""
        self.session = session = self._new_session()
        pid = session.server_pid if session.server_pid is not None else session.child.pid if session.child else None
        assert pid is not None
        return pid

    def _supervise(self, fd: int, ring: Ring, epoch: Optional[int], previous: Optional[Supervisor] = None) -> None:
        self._ring_fd = os.dup(fd)
        self._ring = weakref.ref(ring)
        self._epoch = epoch
        start, world, rank = ring.start_batch, self._spec.world_size, self._spec.rank

        def batch_name(j: int) -> str:
            k = start + j
            return f"stream batch {k}" + (f" (global batch {k * world + rank})" if world > 1 else "")

        r = self._restarts
        self.supervisor = Supervisor(restarts=r.restarts, window_s=r.window_s, backoff_s=r.backoff_s,
                                     start_timeout=self._start_timeout, slots=ring.slots, spawn=self._rejoin,
                                     mm=self._mapping, batch_name=batch_name, previous=previous)
        self._base = int(_lib.lib().gb_base(ring._ptr) or 0)
        self._watch_server()

    def _watch_server(self) -> None:
        """Watches the node loader of the session (its death wakes this rank's consumer)."""
        self._unwatch()
        pid = self.session.server_pid if self.session is not None else None
        if pid is not None and self.supervisor is not None:
            self._watch = DeathWatch.for_ring(pid, self._base, self.supervisor.slots)

    def _unwatch(self) -> None:
        if self._watch is not None:
            self._watch.stop()
            self._watch = None

    def _mapping(self) -> Optional[mmap.mmap]:
        ring = self._ring() if self._ring is not None else None
        return ring._mm if ring is not None else None

    def _rejoin(self) -> int:
        """The Supervisor's spawn: a new session (starting the node loader when this rank wins
        the bind) that joins this rank's ring; returns the node loader's pid."""
        old = self.session
        if old is not None:
            old.close()
        self.session = session = self._new_session()
        session.join_ring(self._ring_fd, epoch=self._epoch, timeout=self._start_timeout)
        assert session.server_pid is not None
        return session.server_pid

    def _restart(self, pid: int, code: Optional[int]) -> None:
        """Restarts the dead node loader ``pid`` (``code``: its exit status when this rank
        started it) through the Supervisor, or raises its error."""
        assert self.supervisor is not None
        self._unwatch()
        self._restart_with(self.supervisor, pid, code)
        self._watch_server()

    def _restart_with(self, sup: Supervisor, pid: int, code: Optional[int]) -> None:
        """Restarts the dead node loader ``pid`` through ``sup`` (the ring's, or the opening's),
        or raises its error naming this rank."""
        session = self.session
        assert session is not None
        how = f"was killed by {signal.Signals(-code).name}" if code is not None and code < 0 else "died"
        cause = f"the node loader pid {pid} (socket {session.socket}) {how}"
        try:
            sup.restart(pid, code, cause=cause)
        except LoaderError as e:
            raise LoaderError(f"rank {self._spec.rank}: {e.message}", stderr=session.stderr_tail(),
                              exit_code=e.exit_code) from None

    def stop(self) -> None:
        """After a ring's close: the session stays for the next ring."""
        self._unwatch()
        self._restarts_before = self.restart_count
        self.supervisor = None
        self._ring = None
        if self._ring_fd >= 0:
            os.close(self._ring_fd)
            self._ring_fd = -1

    def close(self) -> None:
        """After the last ring's close: the node loader sees a clean exit."""
        self.stop()
        if self.session is not None:
            self.session.close()

    # ---- the ring's calls (_ring.Producers) ----

    def tick(self) -> None:
        """Raises when the node loader this rank started has failed; restarts it (supervised)
        when it was killed by a signal."""
        session, sup = self.session, self.supervisor
        if session is None:
            return
        child = session.child
        code = child.poll() if child is not None and sup is not None else None
        if child is not None and code is not None and code < 0 and sup is not None:
            assert child.pid is not None
            self._restart(child.pid, code)
            return
        session.check(supervised=sup is not None)

    def recover(self, rc: int) -> bool:
        """A producer death the C side reports (GB_EDEAD) while supervised: restart a node
        loader that is gone, and wait out the start-up of a restarted one that has not
        registered yet."""
        sup, session = self.supervisor, self.session
        if rc != _lib.EDEAD or sup is None or session is None or session.server_pid is None:
            return False
        pid = session.server_pid
        child = session.child
        code = child.poll() if child is not None else None
        if code is None and sup.excuses(any(p.pid == pid for p in _registry.live(self._mapping()))):
            time.sleep(0.005)
            return True
        if child is not None and code is None:
            try:  # a killed child's threads may still be exiting
                code = child.proc.wait(timeout=1.0) if child.proc is not None else None
            except subprocess.TimeoutExpired:
                return False
        elif child is None:
            deadline = time.monotonic() + 1.0
            while not session.server_gone():
                if time.monotonic() >= deadline:
                    return False  # alive: not a death this can repair
                time.sleep(0.01)
        if code is not None and code >= 0:
            return False  # it exited with a status: it said why
        self._restart(pid, code)
        return True

    def failure(self, rc: int, cls: Type[LoaderError], message: str) -> BaseException:
        if rc == _lib.EDEAD and self.supervisor is None:
            message += f"; {UNSUPERVISED}"
        return cls(message)

    def states(self, mm: Optional[mmap.mmap]) -> List[str]:
        return producer_states(mm)
