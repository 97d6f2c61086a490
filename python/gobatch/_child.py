"""A ``shmloader`` child process: which binary, how it is started (its own session, the
configuration document on its stdin, its stderr kept in an unnamed file), stopped and reaped,
and how its exit is reported. Both producer strategies of a Loader use it: its own ``shmloader
run`` (``_own``) and the ``shmloader serve`` a rank starts for its node (``_node``)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import IO, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from . import _native
from ._config import stdin_pipe
from .errors import ConfigError, LoaderError

__all__ = ["EXIT_USAGE", "Child", "Command", "how_exited", "shmloader_path", "tail"]

EXIT_USAGE = 2  # shmloader: bad command line or configuration (cmd/shmloader/main.go)
EXIT_CONSUMER_DIED = 3


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


def tail(f: Optional[IO[bytes]], limit: int = 4000) -> str:
    """The last ``limit`` bytes of a child's stderr file, from a line start where it was cut."""
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


def how_exited(code: Optional[int]) -> str:
    """A child's exit status in words: "exited with status 1", "was killed by SIGKILL"."""
    if code is not None and code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


class Command(NamedTuple):
    """What every ``shmloader`` a Loader starts shares: the binary, the configuration (a file,
    or a dict's JSON document on stdin), and the options ``run`` and ``serve`` both take."""

    binary: str
    config: str  # --config: an absolute file path, or "-" (config_json on stdin)
    config_json: Optional[bytes]
    readers: Optional[int]
    data_root: Optional[str]
    extra_args: Tuple[str, ...]
    env: Optional[Dict[str, str]]
    batch: Tuple[str, ...] = ()  # the batch option flags (--batch-size, --order, ...: _batch_options)

    def options(self, *verb_options: str) -> List[str]:
        """The arguments after the verb: ``--config``, the verb's own options, ``--readers``,
        ``--data-root``, the batch options, and the caller's extra arguments last."""
        args = ["--config", self.config, *verb_options]
        if self.readers is not None:
            args += ["--readers", str(self.readers)]
        if self.data_root is not None:
            args += ["--data-root", self.data_root]
        return args + list(self.batch) + list(self.extra_args)

    def config_bytes(self) -> bytes:
        """The configuration document as the child reads it."""
        return self.config_json if self.config_json is not None else Path(self.config).read_bytes()


class Child:
    """One ``shmloader`` process at a time (a restart replaces it), its stderr kept in one
    unnamed temporary file across restarts: nothing on disk to leave behind. ``name`` words it
    in messages ("shmloader", "node loader"); ``refused`` is the message of a configuration it
    refused without saying why."""

    def __init__(self, name: str, refused: str, prefix: str) -> None:
        self.name = name
        self._refused = refused
        self.proc: Optional["subprocess.Popen[bytes]"] = None
        self.stderr: Optional[IO[bytes]] = tempfile.TemporaryFile(prefix=prefix)

    def start(self, argv: Sequence[str], *, pass_fds: Sequence[int], config_json: Optional[bytes],
              env: Optional[Dict[str, str]]) -> int:
        """Starts ``argv`` with the descriptors ``pass_fds`` and the configuration document (if
        any) on its stdin; returns its pid. Its own session: a terminal's Ctrl-C reaches the
        trainer only, which then closes its loader; the child exits on seeing that."""
        stdin = stdin_pipe(config_json) if config_json is not None else subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen(list(argv), pass_fds=tuple(pass_fds), stdin=stdin, stdout=subprocess.DEVNULL,
                                         stderr=self.stderr, env=_native.child_env(argv[0], env),
                                         start_new_session=True)
        finally:
            if stdin != subprocess.DEVNULL:
                os.close(stdin)  # the child has its copy
        return self.proc.pid

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc is not None else None

    def poll(self) -> Optional[int]:
        """Its exit status once it has exited (reaping it), else None (also before a start)."""
        return self.proc.poll() if self.proc is not None else None

    def tail(self) -> str:
        """The end of its stderr."""
        return tail(self.stderr)

    def config_error(self) -> ConfigError:
        """Its configuration was refused (exit status 2): its stderr names the field."""
        text = self.tail()
        return ConfigError(text.strip() or self._refused, stderr=text)

    def exit_error(self, code: Optional[int], after: str = "") -> Union[LoaderError, ConfigError]:
        """The error for its exit with ``code``: its stderr and exit status; ConfigError for a
        refused configuration. ``after`` follows the status in the message."""
        if code == EXIT_USAGE:
            return self.config_error()
        pid = self.pid if self.pid is not None else "?"
        return LoaderError(f"{self.name} pid {pid} {how_exited(code)}{after}", stderr=self.tail(), exit_code=code)

    def stop(self, timeout: float, graceful: bool = True) -> None:
        """Waits ``timeout`` seconds for it to exit (graceful: it stops on its own, on seeing
        consumer_state CLOSED), then signals it; reaps it. Not graceful: kills it at once."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        try:
            if not graceful:
                proc.kill()
                proc.wait()
                return
            try:
                proc.wait(timeout=timeout)
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

    def close(self) -> None:
        """Closes its stderr file (its messages are gone with it)."""
        if self.stderr is not None:
            self.stderr.close()
            self.stderr = None
