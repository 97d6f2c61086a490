"""Attaching to a named ring: ``/dev/shm/gobatch-NAME`` (or ``$GOBATCH_SHM_DIR``) of a standalone
``shmloader run --ring NAME``, opened by the rules of PROTOCOL.md 1.1."""

from __future__ import annotations

import ctypes
import os
import re
import time
from typing import Optional

from . import _clib as _lib
from . import _protocol as _proto
from ._ring import STALL_WARNING_S, Ring, _stall_seconds
from .errors import RingError, RingPermissionError, UnsafeRingError

__all__ = ["attach", "SHM_DIR", "shm_dir"]

SHM_DIR = _proto.DEFAULT_SHM_DIR
_SHM_DIR_ENV = "GOBATCH_SHM_DIR"  # moves named rings, as it does for shmloader
_NAME_RE = re.compile(rf"^[{_proto.SEGMENT_NAME_CHARS}]{{1,{_proto.SEGMENT_NAME_MAX}}}$")


def shm_dir() -> str:
    """The directory of named rings: ``$GOBATCH_SHM_DIR`` when set (as for ``shmloader``), else
    :data:`SHM_DIR` (``/dev/shm``)."""
    return os.environ.get(_SHM_DIR_ENV) or SHM_DIR


def attach(name: str, *, framework: str = "numpy", timeout: float = 10.0,
           stall_warning_s: float = STALL_WARNING_S, allow_uid: Optional[int] = None) -> Ring:
    """Attach as the consumer of the named ring ``/dev/shm/gobatch-NAME`` that a standalone
    ``shmloader run --ring NAME`` created (in ``$GOBATCH_SHM_DIR`` instead of ``/dev/shm`` when
    that is set, as shmloader does). Waits at most ``timeout`` seconds for it to be READY.

    The file is opened without following a symbolic link and checked before it is mapped
    (docs/PROTOCOL.md 1.1): :class:`UnsafeRingError` for a symlink, a directory, FIFO or other
    non-regular file, a file owned by another uid (unless ``allow_uid`` names that uid, which
    also accepts its group's write permission) or one writable by group/other;
    :class:`RingPermissionError` when it may not be opened. Both name the path and the reason.
    A truncation of the file while it is read raises :class:`RingTruncatedError` at ``next()``
    instead of killing the process with SIGBUS.

    Raises :class:`RingError` when there is no such ring, it is not a compatible gobatch ring, or
    it already has a consumer. A ``next()`` that waits ``stall_warning_s`` seconds for a batch
    issues a :class:`GobatchWarning` (and a ``gobatch`` log record) naming each producer's
    state, again every ``stall_warning_s`` while it waits; the wait goes on."""
    stall_warning_s = _stall_seconds(stall_warning_s)
    if not _NAME_RE.match(name):
        raise ValueError(
            f"invalid ring name {name!r}: 1 to {_proto.SEGMENT_NAME_MAX} characters of [{_proto.SEGMENT_NAME_CHARS}]"
        )
    if allow_uid is not None and (isinstance(allow_uid, bool) or not isinstance(allow_uid, int) or allow_uid < 0):
        raise ValueError(f"allow_uid must be a uid (an int >= 0) or None, not {allow_uid!r}")
    path = os.path.join(shm_dir(), _proto.SEGMENT_PREFIX + name)
    label = f"ring {name!r}"
    deadline = time.monotonic() + timeout
    while True:
        fd = _open_named(path, name, label, -1 if allow_uid is None else allow_uid)
        try:
            # A creator reserves the full size before it writes anything; an empty file is one
            # that is being created right now.
            if os.fstat(fd).st_size == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
                continue
            return Ring(fd, framework=framework, label=label, timeout=max(deadline - time.monotonic(), 0.0),
                        shm_path=path, stall_warning_s=stall_warning_s)
        finally:
            os.close(fd)


def _open_named(path: str, name: str, label: str, allow_uid: int) -> int:
    """Opens a named ring's file by the rules of PROTOCOL.md 1.1 (libgobatch's gb_open_named)."""
    err = ctypes.create_string_buffer(1024)
    rc = int(_lib.lib().gb_open_named(os.fsencode(path), allow_uid, err, len(err)))
    if rc >= 0:
        return rc
    text = err.value.decode("utf-8", "replace")
    reason = text.split(" refused: ", 1)[-1]
    if rc == _lib.ENOENT:
        raise RingError(f"no gobatch ring named {name!r}: {path} does not exist "
                        f"(start one with `shmloader run --ring {name}`)")
    if rc == _lib.EACCES:
        raise RingPermissionError(f"{label}: {text}", path=path, reason=reason)
    if rc == _lib.EREFUSED:
        raise UnsafeRingError(f"{label}: {text}", path=path, reason=reason)
    raise RingError(f"{label}: {text}")
