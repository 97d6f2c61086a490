"""gobatch.Loader: start a ``shmloader`` child on a memfd ring and iterate its batches."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO, Any, Dict, Mapping, Optional, Sequence, Tuple, Type, Union

from ._ring import Ring, _check_framework
from .errors import ConfigError, LoaderError

__all__ = ["Loader", "shmloader_path"]

EXIT_USAGE = 2  # shmloader: bad command line or configuration (cmd/shmloader/main.go)
EXIT_CONSUMER_DIED = 3

ConfigLike = Union[str, "os.PathLike[str]", Mapping[str, Any]]


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


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name}={value!r} is not an integer") from None


def _config_identity(config: "ConfigLike") -> Tuple[Optional[int], str]:
    """(seed, sha256 of the configuration's content): what a saved position belongs to."""
    if isinstance(config, Mapping):
        text = json.dumps(config, sort_keys=True, default=str).encode()
        batch = config.get("batch")
        seed = batch.get("seed", 0) if isinstance(batch, Mapping) else None
    else:
        path = os.fspath(config)
        try:
            with open(path, "rb") as f:
                text = f.read()
        except FileNotFoundError:
            raise ConfigError(f"config file {path!r} does not exist") from None
        except OSError as e:
            raise ConfigError(f"config file {path!r}: {e.strerror}") from None
        seed = None
        try:
            if path.endswith(".json"):
                parsed = json.loads(text)
            else:
                import tomllib
                parsed = tomllib.loads(text.decode())
            seed = parsed.get("batch", {}).get("seed", 0)
        except Exception:  # shmloader reports a bad file with its line; the digest still works
            pass
    return (seed if isinstance(seed, int) else None), hashlib.sha256(text).hexdigest()


class Loader(Ring):
    """Batches from a ``shmloader`` child process, over a private shared-memory ring.

    ``config`` is a TOML file (docs/ARCHITECTURE.md) or a dict of the same shape (written to a
    temporary JSON file for the child). The loader creates an anonymous memfd, starts
    ``shmloader run --config FILE --memfd FD`` with it, waits (at most ``start_timeout`` seconds)
    for the ring to be ready, and attaches as its consumer. Iterate it for batches (see
    :class:`gobatch.Ring`); use it as a context manager or call :meth:`close`.

    The lifetimes are tied both ways: the child exits when this process dies or closes the
    loader, and a child that dies or fails makes the next batch request raise
    :class:`LoaderError` with the child's message and stderr tail. A configuration the child
    refuses raises :class:`ConfigError` naming the field.

    Args:
        config: TOML path, or a dict with ``batch``, ``ring`` and ``source`` entries.
        framework: ``"numpy"`` (read-only arrays) or ``"torch"`` (tensors sharing that memory).
        data_root: directory relative store paths of the config are resolved against
            (``--data-root``).
        readers: reader goroutines of the child (``--readers``).
        start: stream index of the first batch (``--start``, to resume a stream).
        shmloader: the binary to run (default: see :func:`shmloader_path`).
        start_timeout: seconds to wait for the ring to become ready.
        close_timeout: seconds :meth:`close` waits for the child to exit before it signals it.
        rank: data-parallel rank (default: torchrun's ``RANK``, else 0). Rank ``r`` of
            ``world_size`` receives global batches ``k * world_size + r``: disjoint shares of one
            deterministic stream.
        world_size: number of data-parallel ranks (default: torchrun's ``WORLD_SIZE``, else 1).
        extra_args: further ``shmloader run`` arguments, passed through.
        env: environment of the child (default: this process's).

    :meth:`state_dict` and :meth:`load_state_dict` save and restore the stream position (the
    stream is a pure function of the configuration and its seed), so a resumed loader continues
    at exactly the next batch.
    """

    _proc: Optional["subprocess.Popen[bytes]"] = None
    _stderr: Optional[IO[bytes]] = None
    _tmp_config: Optional[str] = None
    _close_timeout = 5.0

    def __init__(
        self,
        config: ConfigLike,
        *,
        framework: str = "numpy",
        data_root: Optional[Union[str, "os.PathLike[str]"]] = None,
        readers: Optional[int] = None,
        start: Optional[int] = None,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        shmloader: Optional[str] = None,
        start_timeout: float = 60.0,
        close_timeout: float = 5.0,
        extra_args: Sequence[str] = (),
        env: Optional[Mapping[str, str]] = None,
    ) -> None:
        _check_framework(framework)
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
        self._rank, self._world_size = rank, world_size
        self._close_timeout = close_timeout
        self._identity = _config_identity(config)
        self._restart_args: Dict[str, Any] = dict(
            config=config, framework=framework, data_root=data_root, readers=readers,
            rank=rank, world_size=world_size, shmloader=shmloader, start_timeout=start_timeout,
            close_timeout=close_timeout, extra_args=tuple(extra_args), env=env)
        binary = shmloader_path(shmloader)
        config_path = self._config_file(config)
        fd = os.memfd_create("gobatch", os.MFD_CLOEXEC)
        try:
            args = [binary, "run", "--config", config_path, "--memfd", str(fd)]
            if readers is not None:
                args += ["--readers", str(readers)]
            if start is not None:
                args += ["--start", str(int(start))]
            if data_root is not None:
                args += ["--data-root", os.fspath(data_root)]
            if world_size != 1:
                args += ["--rank", str(rank), "--world-size", str(world_size)]
            args += list(extra_args)
            self._stderr = tempfile.TemporaryFile(prefix="gobatch-shmloader-")
            self._proc = subprocess.Popen(
                args,
                pass_fds=(fd,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._stderr,
                env=dict(env) if env is not None else None,
                # Its own session: a terminal's Ctrl-C reaches the trainer only, which then
                # closes the loader; the child still dies with us (PDEATHSIG, 3.5 watchdog).
                start_new_session=True,
            )
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
                _tick=self._check_child,
            )
            self._tick = self._watch_child
            self._remove_tmp_config()  # read by now (the child parses it before creating the ring)
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

    @property
    def pid(self) -> Optional[int]:
        """The shmloader child's pid (None after a failed start)."""
        return self._proc.pid if self._proc is not None else None

    def _config_file(self, config: ConfigLike) -> str:
        if isinstance(config, Mapping):
            try:
                text = json.dumps(config, indent=2) + "\n"  # one key a line: errors name a useful line
            except (TypeError, ValueError) as e:
                raise ConfigError(f"the config dict cannot be written as JSON: {e}") from e
            fd, path = tempfile.mkstemp(prefix="gobatch-config-", suffix=".json")
            with os.fdopen(fd, "w") as f:
                f.write(text)
            self._tmp_config = path
            return path
        path = os.fspath(config)
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
        """While iterating (about every 100 ms of waiting): reaps the child, and raises if it
        failed. A child that exited 0 has finished producing; the ring's own checks decide
        whether batches are missing."""
        proc = self._proc
        if proc is None or proc.poll() is None or proc.returncode == 0:
            return
        if self._failure is None:
            self._failure = self._exit_error(proc.returncode, "")
        raise self._failure

    def _exit_error(self, code: Optional[int], when: str) -> Union[LoaderError, ConfigError]:
        if code == EXIT_USAGE:
            return self._config_error()
        pid = self._proc.pid if self._proc is not None else "?"
        if code is not None and code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with status {code}"
        msg = f"shmloader pid {pid} {how}" + (f" {when}" if when else "")
        return LoaderError(msg, stderr=_tail(self._stderr), exit_code=code)

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
        self._remove_tmp_config()

    def _remove_tmp_config(self) -> None:
        if self._tmp_config is not None:
            try:
                os.unlink(self._tmp_config)
            except FileNotFoundError:
                pass
            self._tmp_config = None

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
        ``seed``, ``rank``, ``world_size`` and a digest of the configuration."""
        return {
            "version": _STATE_VERSION,
            "next_batch": self.next_batch,
            "seed": self._identity[0],
            "config_sha256": self._identity[1],
            "rank": self._rank,
            "world_size": self._world_size,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue the stream at ``state["next_batch"]`` (from :meth:`state_dict` of a loader
        with the same configuration, rank and world size): the child is restarted there, and
        the next batch requested is exactly that batch."""
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
        mismatches = [f"{k} {a!r} != {b!r}" for k, a, b in (
            ("seed", seed, self._identity[0]), ("config_sha256", digest, self._identity[1]),
            ("rank", rank, self._rank), ("world_size", world, self._world_size)) if a != b]
        if mismatches:
            raise ValueError("state_dict is from another stream: " + ", ".join(mismatches))
        self.close()
        Loader.__init__(self, start=nxt, **self._restart_args)

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

    def __enter__(self) -> "Loader":
        return self
