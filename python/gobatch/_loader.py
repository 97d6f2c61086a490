"""gobatch.Loader: start a ``shmloader`` child on a memfd ring and iterate its batches."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Type, Union

from . import _native, _node
from . import _clib as _lib
from ._batch_options import TimeLike, batch_flags
from ._config import ConfigLike, json_config, stdin_pipe
from ._ring import STALL_WARNING_S, Batch, Ring, _check_framework, _stall_seconds, process_state
from ._supervise import RESTART_BACKOFF_S, RESTART_WINDOW_S, RESTARTS, Supervisor
from .errors import ConfigError, LoaderError, RingError, StreamEndedError

__all__ = ["Loader", "shmloader_path", "ORDER_STREAM", "ORDER_EPOCHS"]

EXIT_USAGE = 2  # shmloader: bad command line or configuration (cmd/shmloader/main.go)
EXIT_CONSUMER_DIED = 3

ORDER_STREAM = "stream"  # [batch] order (config/config.go): the default, independent draws
ORDER_EPOCHS = "epochs"  # a seeded permutation of the sample space per epoch


def shmloader_path(explicit: Optional[str] = None) -> str:
    """The shmloader binary to run: ``explicit``, else ``$GOBATCH_SHMLOADER``, else the copy
    built into the package (``gobatch/_bin/shmloader``), else ``shmloader`` on ``PATH``."""
    for candidate in (explicit, os.environ.get("GOBATCH_SHMLOADER")):
        if candidate:
            if not os.access(candidate, os.X_OK):
                raise LoaderError(f"shmloader binary {candidate!r} does not exist or is not executable")
            return str(candidate)
    packaged = Path(__file__).resolve().parent / "_bin" / "shmloader"
    if os.access(packaged, os.X_OK):
        return str(packaged)
    found = shutil.which("shmloader")
    if found:
        return found
    raise LoaderError(
        f"no shmloader binary: not at {packaged} (install with `pip install ./python`), "
        "not in $GOBATCH_SHMLOADER, not on PATH"
    )


def _tail(f: Optional[IO[bytes]], limit: int = 4000) -> str:
    if f is None:
        return ""
    try:
        f.flush()
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - limit))
        data = f.read()
    except (OSError, ValueError):
        return ""
    text = data.decode("utf-8", "replace")
    if size > limit:
        text = "..." + text[text.find("\n") + 1 :] if "\n" in text else "..." + text
    return text


_STATE_VERSION = 1


def _dataloader_worker() -> Optional[Tuple[int, int]]:
    """(worker id, number of workers) inside a torch DataLoader worker process, else None. Only
    a process that has imported torch.utils.data can be one: nothing is imported here."""
    data = sys.modules.get("torch.utils.data")
    info = getattr(data, "get_worker_info", lambda: None)() if data is not None else None
    if info is None:
        return None
    return int(info.id), int(info.num_workers)


def _how_exited(code: Optional[int]) -> str:
    """A child's exit status in words: "exited with status 1", "was killed by SIGKILL"."""
    if code is not None and code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name}={value!r} is not an integer") from None


class _Identity(NamedTuple):
    """What a saved position belongs to, read from the configuration."""

    seed: Optional[int]  # [batch] seed (None when it cannot be read here)
    digest: str  # sha256 of the configuration's content
    order: str  # [batch] order: ORDER_STREAM or ORDER_EPOCHS


_HEADER_RE = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]")  # [table] or [[array]]
_ORDER_RE = re.compile(r"""^\s*order\s*=\s*["']([^"']*)["']""")


def _toml_order(text: str) -> Optional[str]:
    """[batch] order of a TOML file, read line by line: for Pythons without tomllib (< 3.11)."""
    table = ""
    for line in text.splitlines():
        header = _HEADER_RE.match(line)
        if header:
            table = header.group(2) if header.group(1) == "[" else ""
        elif table == "batch" and (m := _ORDER_RE.match(line)):
            return m.group(1)
    return None


def _config_identity(config: "ConfigLike") -> _Identity:
    """The seed, digest and batch order of a configuration (a dict, or a TOML or JSON file)."""
    seed: Any = None
    order: Any = None
    if isinstance(config, Mapping):
        text = json.dumps(config, sort_keys=True, default=str).encode()
        batch = config.get("batch")
        if isinstance(batch, Mapping):
            seed, order = batch.get("seed", 0), batch.get("order")
    else:
        path = os.fspath(config)
        try:
            with open(path, "rb") as f:
                text = f.read()
        except FileNotFoundError:
            raise ConfigError(f"config file {path!r} does not exist") from None
        except OSError as e:
            raise ConfigError(f"config file {path!r}: {e.strerror}") from None
        try:
            if path.endswith(".json"):
                parsed = json.loads(text)
            else:
                try:
                    import tomllib
                except ImportError:  # Python < 3.11: the order is what the loader must know
                    order = _toml_order(text.decode(errors="replace"))
                    raise
                parsed = tomllib.loads(text.decode())
            batch = parsed.get("batch", {})
            seed, order = batch.get("seed", 0), batch.get("order")
        except Exception:  # shmloader reports a bad file with its line; the digest still works
            pass
    return _Identity(seed if isinstance(seed, int) else None, hashlib.sha256(text).hexdigest(),
                     order if isinstance(order, str) else ORDER_STREAM)


class Loader(Ring):
    """Batches from a ``shmloader`` child process, over a private shared-memory ring.

    ``config`` is a TOML file (docs/ARCHITECTURE.md) or a dict of the same shape. A dict is
    checked here (NaN, infinities, keys that are not strings and other values JSON cannot carry
    are refused with :class:`ConfigError` naming the key path, before any process starts) and
    written as JSON to the child's stdin (``--config -``): no file is written, so nothing is
    left behind whenever either process dies, and the child's errors name the dict's line and
    key path (``<config dict>:7: source[0].dtype: ...``). The loader creates an anonymous
    memfd, starts ``shmloader run --config FILE --memfd FD`` with it, waits (at most
    ``start_timeout`` seconds) for the ring to be ready, and attaches as its consumer. Iterate it
    for batches (see :class:`gobatch.Ring`); use it as a context manager or call :meth:`close`.

    The lifetimes are tied both ways: the child exits when this process dies or closes the
    loader, and a child that fails makes the next batch request raise :class:`LoaderError` with
    the child's message and stderr tail; that error is sticky (every later request raises it
    too). A child killed by a signal (kill -9, the OOM killer, a crash) is restarted instead, at
    most ``restarts`` times within ``restart_window_s`` seconds, after ``restart_backoff_s``
    doubled for each recent restart: the new child joins the same ring (``shmloader run --join
    --memfd FD``), takes over the batches the dead one held and carries on at the ring's
    position, so iteration sees every batch once, in order, unchanged (each batch is a pure
    function of its index; docs/PROTOCOL.md 3.7). Each restart is reported as a
    :class:`GobatchWarning` and a ``gobatch`` log record naming the cause and the batches the dead
    child held. A child that dies again holding a batch its predecessor died holding is a
    deterministic failure: the stream ends with a :class:`LoaderError` naming that batch, as it
    does once the restarts are spent. A configuration the child refuses raises :class:`ConfigError`
    naming the field. A request that waits ``stall_warning_s`` seconds warns
    (:class:`GobatchWarning`, and the ``gobatch`` logger) with the child's state: running,
    stopped, a zombie, or its exit status once it has exited.

    Inside a torch ``DataLoader`` worker process the loader takes that worker's disjoint share
    of the stream, as a rank does: worker ``w`` of ``W`` on rank ``r`` of ``n`` is rank
    ``r * W + w`` of ``n * W`` (:attr:`rank` and :attr:`world_size` report those), so the
    workers' batches, taken in turn as the DataLoader does, are the stream without duplicates.

    Args:
        config: TOML path, an ocf-data-sampler YAML path (docs/OCF.md), or a dict with
            ``batch``, ``ring`` and ``source`` entries.
        batch_size, order, seed, t0_start, t0_end, cache_mb: replace the file's ``[batch]``
            values and the cache budget (``--batch-size`` ...); a YAML file needs batch_size.
        framework: ``"numpy"`` (read-only arrays) or ``"torch"`` (tensors sharing that memory).
        data_root: directory relative store paths of the config are resolved against
            (``--data-root``).
        readers: reader goroutines of the child (``--readers``).
        start: stream index of the first batch (``--start``, to resume a stream). With
            ``order = "epochs"`` it must lie in ``epoch``.
        epoch: ``[batch] order = "epochs"`` only: the epoch the first ``for`` runs (default 0).
        shmloader: the binary to run (default: see :func:`shmloader_path`).
        start_timeout: seconds to wait for the ring to become ready.
        close_timeout: seconds :meth:`close` waits for the child to exit before it signals it.
        rank: data-parallel rank (default: torchrun's ``RANK``, else 0). Rank ``r`` of
            ``world_size`` receives global batches ``k * world_size + r``: disjoint shares of one
            deterministic stream.
        world_size: number of data-parallel ranks (default: torchrun's ``WORLD_SIZE``, else 1).
        stall_warning_s: seconds a batch request may wait before it warns (and again each
            such period while it waits); the wait goes on.
        node: the node loader (one ``shmloader serve`` feeding every local rank from one
            cache): None uses it when torchrun's ``LOCAL_WORLD_SIZE`` is above 1 (or
            ``GOBATCH_NODE`` names one), True always, False never; a string is the socket name
            of a node loader started by hand (``shmloader serve --socket NAME``). The node
            loader is not supervised: ``restarts`` applies to a Loader's own child only, and a
            node loader that dies ends every local rank's stream with a :class:`LoaderError`
            that says so.
        local_world_size: ranks on this node, for the node loader (default: torchrun's
            ``LOCAL_WORLD_SIZE``).
        node_rank: this node's rank (default: torchrun's ``GROUP_RANK``, else rank //
            local_world_size).
        restarts: restarts of a child killed by a signal allowed within ``restart_window_s``
            (default 2; 0 turns supervision off: the death ends the stream).
        restart_window_s: the window, in seconds, that ``restarts`` counts in (default 600).
        restart_backoff_s: seconds before the first restart of a window, doubled for each
            further one (default 0.05).
        extra_args: further ``shmloader run`` arguments, passed through.
        env: environment of the child (default: this process's).

    :meth:`state_dict` and :meth:`load_state_dict` save and restore the stream position (the
    stream is a pure function of the configuration and its seed), so a resumed loader continues
    at exactly the next batch.

    Epochs (``[batch] order = "epochs"``): each ``for batch in loader`` runs one epoch, a seeded
    permutation of the whole sample space (every sample once, the last incomplete batch per
    rank dropped), and ``len(loader)`` is this rank's batches per epoch. The first ``for`` runs
    epoch ``epoch`` (0), each later one the next epoch, unless :meth:`set_epoch` or
    :meth:`load_state_dict` placed the loader since: then it runs from there (a resumed epoch
    from its saved batch). A ``for`` left early (``break``) skips the rest of its epoch. Ranks
    see disjoint samples of every epoch, the same number of batches each, as with
    ``DistributedSampler(drop_last=True)``. Each epoch is one ``shmloader`` child (it re-opens
    the stores, and its cache starts empty).

    A bounded stream (``[batch] batches = N``) is read once: iterating it again after its end
    raises :class:`StreamEndedError` (never an empty loop).

    Node loader (``node``): the first Loader of a node starts ``shmloader serve`` and every
    local rank, that one included, gets its own ring from it (its stream exactly as above, from
    one shared cache); see ``gobatch._node``. A rank that dies is handled as the
    configuration's ``[node] on_rank_death`` says: ``"stop"`` (default) makes every other
    rank's next batch raise :class:`LoaderError` naming it, ``"continue"`` serves the others on.
    Epochs, :meth:`state_dict` and :meth:`load_state_dict` work per rank as above.
    """

    _proc: Optional["subprocess.Popen[bytes]"] = None
    _stderr: Optional[IO[bytes]] = None
    _close_timeout = 5.0
    _order = ORDER_STREAM
    _epoch = 0
    _epoch_batches = 0
    _positioned_at = 0  # epochs: the stream batch the loader was last placed at
    _began = False  # epochs: a ``for`` has begun at that place
    _session: Optional[_node.NodeSession] = None  # node mode: this rank's connection to the node loader
    _keep_session = False  # set while an epoch or a resume replaces the ring

    def __init__(
        self,
        config: ConfigLike,
        *,
        framework: str = "numpy",
        data_root: Optional[Union[str, "os.PathLike[str]"]] = None,
        readers: Optional[int] = None,
        start: Optional[int] = None,
        epoch: Optional[int] = None,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        shmloader: Optional[str] = None,
        start_timeout: float = 60.0,
        close_timeout: float = 5.0,
        stall_warning_s: float = STALL_WARNING_S,
        restarts: int = RESTARTS,
        restart_window_s: float = RESTART_WINDOW_S,
        restart_backoff_s: float = RESTART_BACKOFF_S,
        extra_args: Sequence[str] = (),
        env: Optional[Mapping[str, str]] = None,
        node: Union[None, bool, str] = None,
        local_world_size: Optional[int] = None,
        node_rank: Optional[int] = None,
        batch_size: Optional[int] = None, order: Optional[str] = None, seed: Optional[int] = None,
        t0_start: Optional[TimeLike] = None, t0_end: Optional[TimeLike] = None, cache_mb: Optional[int] = None,
    ) -> None:
        _check_framework(framework)
        options = dict(batch_size=batch_size, order=order, seed=seed, t0_start=t0_start, t0_end=t0_end, cache_mb=cache_mb)
        flags = batch_flags(**options)
        if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < 0:
            raise ValueError(f"restarts must be an int >= 0, not {restarts!r}")
        for arg, value in (("restart_window_s", restart_window_s), ("restart_backoff_s", restart_backoff_s)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
                raise ValueError(f"{arg} must be a finite number of seconds >= 0, not {value!r}")
        self._stall_warning_s = _stall_seconds(stall_warning_s)
        config_json = json_config(config) if isinstance(config, Mapping) else None
        if readers is not None and (not isinstance(readers, int) or readers < 1):
            raise ValueError(f"readers must be a positive int, not {readers!r}")
        if start is not None and (not isinstance(start, int) or start < 0):
            raise ValueError(f"start must be an int >= 0, not {start!r}")
        rank = _env_int("RANK", 0) if rank is None else rank
        world_size = _env_int("WORLD_SIZE", 1) if world_size is None else world_size
        if not isinstance(world_size, int) or world_size < 1:
            raise ValueError(f"world_size must be a positive int, not {world_size!r}")
        if not isinstance(rank, int) or not 0 <= rank < world_size:
            raise ValueError(f"rank must be an int in [0, world_size={world_size}), not {rank!r}")
        self._restart_args: Dict[str, Any] = dict(
            config=config, framework=framework, data_root=data_root, readers=readers,
            rank=rank, world_size=world_size, shmloader=shmloader, start_timeout=start_timeout,
            close_timeout=close_timeout, stall_warning_s=stall_warning_s, restarts=restarts,
            restart_window_s=restart_window_s, restart_backoff_s=restart_backoff_s, extra_args=tuple(extra_args), env=env,
            node=node, local_world_size=local_world_size, node_rank=node_rank, **options)
        worker = _dataloader_worker()
        if worker is not None:  # a DataLoader worker: its share of this rank's share
            worker_id, workers = worker
            rank, world_size = rank * workers + worker_id, world_size * workers
        self._rank, self._world_size = rank, world_size
        self._close_timeout = close_timeout
        self._identity = _config_identity(config)._replace(**{k: v for k, v in (("seed", seed), ("order", order)) if v is not None})
        self._order = self._identity.order
        if epoch is not None:
            if self._order != ORDER_EPOCHS:
                raise ValueError(f"epoch={epoch!r} needs [batch] order = {ORDER_EPOCHS!r}; this "
                                 f"configuration's order is {self._order!r}")
            if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
                raise ValueError(f"epoch must be an int >= 0, not {epoch!r}")
        self._epoch = epoch or 0
        self._epoch_batches = 0  # this rank's batches per epoch, known once the ring is attached
        binary = shmloader_path(shmloader)
        config_path = "-" if config_json is not None else self._config_file(config)
        spec = None if worker is not None else _node.node_spec(
            node, rank=rank, world_size=world_size, local_world_size=local_world_size, node_rank=node_rank)
        if spec is not None:
            serve_args = ["--config", config_path] + (["--readers", str(readers)] if readers is not None else [])
            serve_args += (["--data-root", os.fspath(data_root)] if data_root is not None else []) + flags + list(extra_args)
            self._attach_node(spec, binary, serve_args, config_json, framework=framework, start=start,
                              start_timeout=start_timeout, env=env)
            return
        # Sealable: the child seals its size (PROTOCOL.md 1), and Ring checks the seals.
        fd = os.memfd_create("gobatch", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            args: List[str] = []
            if readers is not None:
                args += ["--readers", str(readers)]
            if start is not None:
                args += ["--start", str(int(start))]
            if self._order == ORDER_EPOCHS:
                args += ["--epoch", str(self._epoch)]  # one epoch per child: its ring ends there
            if data_root is not None:
                args += ["--data-root", os.fspath(data_root)]
            if world_size != 1:
                args += ["--rank", str(rank), "--world-size", str(world_size)]
            args += flags + list(extra_args)
            self._child = (binary, config_path, args, config_json, dict(env) if env is not None else None)
            self._stderr = tempfile.TemporaryFile(prefix="gobatch-shmloader-")
            self._spawn_child(fd, join=False)
            assert self._proc is not None
            label = f"shmloader pid {self._proc.pid}"
            deadline = time.monotonic() + start_timeout
            while os.fstat(fd).st_size == 0:  # the child fallocates before it writes anything
                self._check_child()
                if time.monotonic() >= deadline:
                    raise LoaderError(f"{label} did not create its ring within {start_timeout:g} s",
                                      stderr=_tail(self._stderr))
                time.sleep(0.005)
            super().__init__(
                fd,
                framework=framework,
                label=label,
                timeout=max(deadline - time.monotonic(), 0.1),
                sealed=True,
                _tick=self._check_child,
            )
            self._tick = self._watch_child
            if self._order == ORDER_EPOCHS:
                self._learn_epoch()
            if restarts > 0:
                self._supervise(fd, restarts, float(restart_window_s), float(restart_backoff_s), start_timeout)
        except BaseException as e:
            self._stop_child(graceful=False)
            self._cleanup_files()
            code = self._proc.returncode if self._proc is not None else None
            if code == EXIT_USAGE and not isinstance(e, ConfigError):
                raise self._config_error() from None
            raise
        finally:
            os.close(fd)

    # ---- the child ----

    def _attach_node(self, spec: _node.NodeSpec, binary: str, serve_args: List[str], config_json: Optional[bytes], *,
                     framework: str, start: Optional[int], start_timeout: float,
                     env: Optional[Mapping[str, str]]) -> None:
        """Node mode: this rank's ring from the node's ``shmloader serve`` (started here when
        this is the node's first Loader). The session outlives an epoch's or a resume's ring."""
        if self._session is None or self._session.closed:
            data = config_json if config_json is not None else Path(serve_args[1]).read_bytes()
            self._session = _node.NodeSession(
                spec, serve_args=serve_args, config_sha256=hashlib.sha256(data).hexdigest(), binary=binary,
                config_stdin=(lambda: stdin_pipe(config_json)) if config_json is not None else None,
                start_timeout=start_timeout, env=env)
        session = self._session
        deadline = time.monotonic() + start_timeout
        try:
            fd = session.open_ring(start=start, epoch=self._epoch if self._order == ORDER_EPOCHS else None,
                                   timeout=start_timeout)
            try:
                super().__init__(fd, framework=framework, label=session.label,
                                 timeout=max(deadline - time.monotonic(), 0.1), sealed=True, _tick=session.check)
            finally:
                os.close(fd)
            if self._order == ORDER_EPOCHS:
                self._learn_epoch()
        except BaseException:
            self._close_ring()
            session.close()
            raise

    @property
    def pid(self) -> Optional[int]:
        """The shmloader child's pid (None after a failed start); in node mode the node
        loader's."""
        if self._session is not None:
            return self._session.server_pid
        return self._proc.pid if self._proc is not None else None

    @staticmethod
    def _config_file(config: ConfigLike) -> str:
        path = os.fspath(config)  # type: ignore[arg-type]  (a dict goes to stdin instead)
        if not os.path.isfile(path):
            raise ConfigError(f"config file {path!r} does not exist")
        return os.path.abspath(path)

    def _config_error(self) -> ConfigError:
        tail = _tail(self._stderr)
        return ConfigError(tail.strip() or "shmloader refused its configuration (exit status 2)", stderr=tail)

    def _check_child(self) -> None:
        """While starting: raises if the child has exited (called about every 100 ms)."""
        proc = self._proc
        if proc is None or proc.poll() is None:
            return
        raise self._exit_error(proc.returncode, "before its ring was ready")

    def _watch_child(self) -> None:
        """While iterating (about every 100 ms of waiting): reaps the child, restarts it if it
        was killed (supervised), and raises if it failed. A child that exited 0 has finished
        producing; the ring's own checks decide whether batches are missing."""
        proc = self._proc
        if proc is None or proc.poll() is None or proc.returncode == 0:
            return
        if self._supervisor is not None and self._failure is None and self._supervisor.restartable(proc.returncode):
            self._restart_child()
            return
        if self._failure is None:
            self._failure = self._exit_error(proc.returncode, "")
        raise self._failure

    def _exit_error(self, code: Optional[int], when: str) -> Union[LoaderError, ConfigError]:
        if code == EXIT_USAGE:
            return self._config_error()
        pid = self._proc.pid if self._proc is not None else "?"
        msg = f"shmloader pid {pid} {_how_exited(code)}" + (f" {when}" if when else "")
        return LoaderError(msg, stderr=_tail(self._stderr), exit_code=code)

    def _death_note(self) -> str:
        return f"; {_node.UNSUPERVISED}" if self._session is not None else ""

    def _producer_failure(self, cls: Type[LoaderError], message: str) -> BaseException:
        proc = self._proc
        code = None
        if proc is not None:
            try:
                code = proc.wait(timeout=0.2)  # a failing child exits right after reporting
            except subprocess.TimeoutExpired:
                code = None
        if code is not None and code != 0:
            message += f" ({self._exit_error(code, '').message})"
        return cls(message, stderr=_tail(self._stderr), exit_code=code)

    # ---- supervision (_supervise.py) ----

    _supervisor: Optional[Supervisor] = None
    _ring_fd = -1  # the memfd, kept to hand to a restarted child

    def _supervise(self, fd: int, restarts: int, window_s: float, backoff_s: float, start_timeout: float) -> None:
        self._ring_fd = os.dup(fd)
        start, world, rank = self.start_batch, self._world_size, self._rank

        def batch_name(j: int) -> str:
            k = start + j
            return f"stream batch {k}" + (f" (global batch {k * world + rank})" if world > 1 else "")

        self._supervisor = Supervisor(
            restarts=restarts, window_s=window_s, backoff_s=backoff_s, start_timeout=start_timeout,
            slots=self.slots, spawn=self._spawn_joiner, mm=lambda: self._mm, batch_name=batch_name)

    def _spawn_joiner(self) -> int:
        """Starts a child that joins this loader's ring (PROTOCOL.md 3.7.4) and returns its pid."""
        return self._spawn_child(self._ring_fd, join=True)

    def _spawn_child(self, fd: int, *, join: bool) -> int:
        """Starts ``shmloader run`` on the memfd ring fd (creating it, or joining it) with the
        command line in self._child, the config document on its stdin; returns its pid."""
        binary, config_path, args, config_json, env = self._child
        stdin = stdin_pipe(config_json) if config_json is not None else subprocess.DEVNULL
        try:
            self._proc = subprocess.Popen(
                [binary, "run", "--config", config_path, "--memfd", str(fd)] + (["--join"] if join else []) + args,
                pass_fds=(fd,), stdin=stdin, stdout=subprocess.DEVNULL, stderr=self._stderr, env=_native.child_env(binary, env),
                # Its own session: a terminal's Ctrl-C reaches the trainer only, which then
                # closes the loader; the child still dies with us (PDEATHSIG, 3.5 watchdog).
                start_new_session=True)
        finally:
            if stdin != subprocess.DEVNULL:
                os.close(stdin)  # the child has its copy
        return self._proc.pid

    def _restart_child(self) -> None:
        proc, sup = self._proc, self._supervisor
        assert proc is not None and sup is not None and proc.returncode is not None
        try:
            sup.restart(proc.pid, proc.returncode)
        except LoaderError as e:
            self._failure = LoaderError(f"{self._label}: {e.message}", stderr=_tail(self._stderr), exit_code=e.exit_code)
            raise self._failure from None

    def _recover(self, rc: int) -> bool:
        """A producer death the C side reports (GB_EDEAD) while supervised: restart a child that
        was killed, and wait out the start-up of a restarted one that has not registered yet."""
        proc, sup = self._proc, self._supervisor
        if rc != _lib.EDEAD or sup is None or proc is None or self._failure is not None:
            return False
        code = proc.poll()
        if code is None:
            if sup.starting() and not any(p[0] == proc.pid for p in self._live_producers()):
                time.sleep(0.005)
                return True
            try:  # a killed child's threads may still be exiting (its main thread a zombie already)
                code = proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                return False
        if not sup.restartable(code):
            return False
        self._restart_child()
        return True

    def _stop_child(self, graceful: bool = True) -> None:
        """Waits for the child to exit (graceful: it stops on seeing consumer_state CLOSED),
        signalling it after ``close_timeout`` seconds; reaps it."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        try:
            if not graceful:
                proc.kill()
                proc.wait()
                return
            try:
                proc.wait(timeout=self._close_timeout)
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(timeout=2.0)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        except BaseException:
            # Interrupted while waiting: do not leave the child behind.
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            raise

    def _cleanup_files(self) -> None:
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def _producer_states(self) -> List[str]:
        """For the stall warning: the ring's producers, the child named as such, and its exit
        status once it has exited (reaped by the wait's checks, so no longer in /proc)."""
        proc = self._proc
        if proc is None:
            return super()._producer_states()
        mine = f"shmloader pid {proc.pid} (this loader's child)"
        code = proc.poll()
        if code is not None:
            return [f"{mine} {_how_exited(code)}"]
        live = [p for p in self._live_producers() if p[0] == proc.pid]
        if not live:
            return [f"{mine} {process_state(proc.pid)}, not registered in the ring"]
        _, start, batches = live[0]
        return [f"{mine} {process_state(proc.pid, start)}, {batches} batches written"]

    # ---- position ----

    @property
    def rank(self) -> int:
        """This loader's data-parallel rank."""
        return self._rank

    @property
    def world_size(self) -> int:
        """The number of data-parallel ranks."""
        return self._world_size

    def state_dict(self) -> Dict[str, Any]:
        """The stream position, to resume at exactly the next batch: a small dict of
        ``next_batch`` (this rank's stream index of the batch the next request would return),
        ``seed``, ``rank``, ``world_size`` and a digest of the configuration; with epochs also
        ``order``, ``epoch`` (the epoch ``next_batch`` lies in: the next one once an epoch is
        complete) and ``epoch_batches``."""
        state: Dict[str, Any] = {
            "version": _STATE_VERSION,
            "next_batch": self.next_batch,
            "seed": self._identity.seed,
            "config_sha256": self._identity.digest,
            "rank": self._rank,
            "world_size": self._world_size,
        }
        if self._order == ORDER_EPOCHS:
            state.update(order=ORDER_EPOCHS, epoch=self.next_batch // self._epoch_batches,
                         epoch_batches=self._epoch_batches)
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue the stream at ``state["next_batch"]`` (from :meth:`state_dict` of a loader
        with the same configuration, rank and world size): the child is restarted there, and
        the next batch requested is exactly that batch. With epochs, the next ``for`` runs the
        rest of the saved epoch, from that batch."""
        try:
            version, nxt = state["version"], state["next_batch"]
            seed, digest = state["seed"], state["config_sha256"]
            rank, world = state["rank"], state["world_size"]
        except (KeyError, TypeError) as e:
            raise ValueError(f"not a gobatch.Loader state_dict: missing {e}") from None
        if version != _STATE_VERSION:
            raise ValueError(f"state_dict version {version!r}, this gobatch reads {_STATE_VERSION}")
        if not isinstance(nxt, int) or nxt < 0:
            raise ValueError(f"state_dict next_batch must be an int >= 0, not {nxt!r}")
        order = state.get("order", ORDER_STREAM)
        mismatches = [f"{k} {a!r} != {b!r}" for k, a, b in (
            ("seed", seed, self._identity.seed), ("config_sha256", digest, self._identity.digest),
            ("rank", rank, self._rank), ("world_size", world, self._world_size),
            ("order", order, self._order)) if a != b]
        if self._order == ORDER_EPOCHS and not mismatches and state.get("epoch_batches") != self._epoch_batches:
            mismatches.append(f"epoch_batches {state.get('epoch_batches')!r} != {self._epoch_batches!r} "
                              "(the same configuration over other data)")
        if mismatches:
            raise ValueError("state_dict is from another stream: " + ", ".join(mismatches))
        epoch = nxt // self._epoch_batches if self._order == ORDER_EPOCHS else None
        self._restart(start=nxt, epoch=epoch)

    # ---- epochs ----

    def _restart(self, *, start: Optional[int], epoch: Optional[int]) -> None:
        """Stops the child and starts a new one at stream batch ``start`` (of ``epoch``); in node
        mode, closes the ring and asks the node loader for the new one."""
        self._keep_session = True
        try:
            self.close()
        finally:
            self._keep_session = False
        Loader.__init__(self, start=start, epoch=epoch, **self._restart_args)

    def _learn_epoch(self) -> None:
        """Reads this rank's batches per epoch off the ring: ``shmloader run --epoch E`` ends
        the ring's stream at the end of epoch E, stream index (E + 1) * batches per epoch."""
        end = self.start_batch + (self.total_batches or 0)
        n, rest = divmod(end, self._epoch + 1)
        if rest or n == 0 or not self._epoch * n <= self.start_batch < end:
            raise RingError(f"{self._label}: asked for epoch {self._epoch}, got stream batches "
                            f"{self.start_batch} .. {end - 1}, which are not one epoch (is the shmloader "
                            "binary older than this gobatch?)")
        self._epoch_batches = n
        self._positioned_at = self.start_batch  # a new child: the next ``for`` runs from here
        self._began = False

    @property
    def order(self) -> str:
        """The configuration's ``[batch] order``: ``"stream"`` (independent draws) or
        ``"epochs"``."""
        return self._order

    @property
    def epoch(self) -> int:
        """The epoch the running ``for`` iterates, or the next ``for`` will (``order =
        "epochs"``; 0 otherwise)."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Make the next ``for`` run epoch ``epoch`` from its first batch, as
        ``DistributedSampler.set_epoch`` does (call it before each epoch, or let each ``for``
        take the next epoch). Setting the epoch the loader is already placed at and has not
        begun (a fresh loader, or one :meth:`load_state_dict` resumed inside that epoch) keeps
        that place. Raises ``ValueError`` unless ``[batch] order = "epochs"``."""
        if self._order != ORDER_EPOCHS:
            raise ValueError(f"set_epoch({epoch!r}): {self._label} streams without epochs ([batch] order = "
                             f"{self._order!r}); set [batch] order = {ORDER_EPOCHS!r} to iterate epochs")
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"epoch must be an int >= 0, not {epoch!r}")
        self._check_open()
        if epoch == self._epoch and self._unbegun():
            return
        self._restart(start=None, epoch=epoch)

    def _check_open(self) -> None:
        """A closed (or foreign) loader is not restarted for another epoch."""
        if self._foreign:
            raise self._foreign_error()
        if self.closed:
            raise self._closed_error()

    def _unbegun(self) -> bool:
        """No ``for`` or ``next`` has taken a batch since the loader was placed."""
        return not self._began and self.next_batch == self._positioned_at

    def __len__(self) -> int:
        """With epochs: this rank's batches per epoch. Otherwise the ring's (bounded) stream
        length; ``TypeError`` for an unbounded stream."""
        if self._order == ORDER_EPOCHS:
            return self._epoch_batches
        return super().__len__()

    def __iter__(self) -> Iterator[Batch]:
        """With epochs: the next epoch (see the class doc); the loader itself is the iterator.
        Otherwise as :class:`gobatch.Ring`: raises :class:`StreamEndedError` on a bounded
        stream read to its end."""
        if self._order != ORDER_EPOCHS:
            return super().__iter__()
        self._check_open()
        if not self._unbegun():
            self._restart(start=None, epoch=self._epoch + 1)
        self._began = True
        return self

    def _ended_message(self) -> str:
        total = self.start_batch + int(self._geom.total_batches)
        return (f"{self._label}: its stream of {total} batches ([batch] batches = {total}) has been read "
                "to the end, so iterating it again would yield nothing; create a new Loader (or call "
                "load_state_dict() with an earlier state) to read it again, or set [batch] order = "
                f"{ORDER_EPOCHS!r} (leaving batches unset) to iterate epochs")

    @property
    def exit_code(self) -> Optional[int]:
        """The child's exit status once it has exited, else None."""
        return self._proc.poll() if self._proc is not None else None

    def close(self) -> None:
        """Detach from the ring, stop the child (it exits on its own on seeing the consumer
        close; it is signalled after ``close_timeout`` seconds) and reap it. Idempotent."""
        super().close()

    def _after_close(self) -> None:
        try:
            self._stop_child()
        finally:
            self._cleanup_files()
            if self._session is not None and not self._keep_session:
                self._session.close()  # after the ring's close: the node loader sees a clean exit
            if self._ring_fd >= 0:
                os.close(self._ring_fd)
                self._ring_fd = -1

    def __enter__(self) -> "Loader":
        return self
