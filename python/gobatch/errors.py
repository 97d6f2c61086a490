"""Exception and warning classes of gobatch. Every error gobatch raises derives from
:class:`GobatchError`; every warning it issues is a :class:`GobatchWarning`."""

from __future__ import annotations

__all__ = [
    "GobatchError", "LoaderError", "ConfigError", "RingError", "RingFileError", "RingPermissionError",
    "UnsafeRingError", "RingTruncatedError", "SlotsHeldError", "StreamEndedError", "GobatchWarning",
]


class GobatchError(Exception):
    """Base class of every gobatch error."""


class LoaderError(GobatchError):
    """The producer side failed: a ``shmloader`` process died, exited or reported an error, or
    the loader was used where it cannot be (closed, or in a forked child).

    ``message`` is the producer's own text where it gave one; ``stderr`` the tail of the
    ``shmloader`` child's standard error (``Loader`` only, else empty); ``exit_code`` the child's
    exit status (negative: killed by that signal), or ``None``.
    """

    def __init__(self, message: str, *, stderr: str = "", exit_code: int | None = None) -> None:
        text = message
        if stderr.strip():
            text = f"{message}\n--- shmloader stderr (last lines) ---\n{stderr.rstrip()}"
        super().__init__(text)
        self.message = message
        self.stderr = stderr
        self.exit_code = exit_code


class RingError(LoaderError):
    """A ring segment was refused (not a gobatch ring, an incompatible layout, corrupt geometry,
    already in use by another consumer) or broke the protocol while being read."""


class RingFileError(RingError):
    """A named ring's file was refused before anything was mapped (docs/PROTOCOL.md 1.1).
    ``path`` is the file, ``reason`` what is wrong with it."""

    def __init__(self, message: str, *, path: str, reason: str) -> None:
        super().__init__(message)
        self.path = path
        self.reason = reason


class RingPermissionError(RingFileError):
    """The ring's file may not be opened by this user: permission denied. The message names the
    file's owner and mode."""


class UnsafeRingError(RingFileError):
    """The name holds something that is not this user's ring file: a symbolic link (never
    followed), a directory, FIFO or other non-regular file, a file owned by another uid (accept
    one with ``attach(name, allow_uid=UID)``), or one writable by group/other."""


class RingTruncatedError(RingError):
    """The ring's segment can be, or was, cut short under its mapping: a named ring's file was
    truncated while it was read (its batches are lost; the error is sticky), or a Loader's memfd
    ring was not sealed against shrinking and growing by its ``shmloader``."""


class SlotsHeldError(LoaderError):
    """The next batch cannot be delivered because every ring slot still holds an earlier batch
    that is referenced (the batch, or an array or tensor of it, or a view of one). Nothing was
    consumed: drop batches you are done with (``del``, ``batch.release()``, ``with batch:``),
    copy what you keep (``clone()``, ``copy()``), or raise the ring's slots (the Loader's
    ``slots=`` keyword, shmloader's ``--slots``, a TOML file's ``[ring] slots``), then call
    ``next()`` again. ``held`` is the number of slots held, ``slots`` the ring's slot count."""

    def __init__(self, message: str, *, held: int, slots: int) -> None:
        super().__init__(message)
        self.held = held
        self.slots = slots


class ConfigError(GobatchError):
    """``shmloader`` refused its configuration or command line (exit status 2). The message is
    shmloader's own and names the field at fault."""

    def __init__(self, message: str, *, stderr: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.stderr = stderr


class StreamEndedError(GobatchError):
    """A bounded stream that has been read to its end was iterated again. A finished stream
    has nothing more to give; the message says how to read on (a new loader, an earlier
    ``load_state_dict``, or ``[batch] order = "epochs"``, whose loaders iterate one epoch per
    ``for``)."""


class GobatchWarning(UserWarning):
    """Something the trainer should know about while the stream goes on: a ``next()`` that has
    waited ``stall_warning_s`` seconds for its batch (repeated every ``stall_warning_s`` while
    the wait lasts), naming the state of each producer process (running, stopped, a zombie,
    gone; for a :class:`Loader`'s child its exit status). Filter it with the ``warnings``
    module (``warnings.simplefilter("error", gobatch.GobatchWarning)`` turns it into an
    exception that ends the wait)."""
