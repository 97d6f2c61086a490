"""A configuration given as a dict: checked and written as the JSON document ``shmloader`` reads
from its stdin (``--config -``), for :class:`gobatch.Loader` and :func:`gobatch.plan` alike.

shmloader names that document ``<config dict>`` in its errors, with the line and the key path
(``<config dict>:7: source[0].dtype: ...``). The dict is written one key a line so that the
line points at the key. What JSON cannot carry is refused here, before any process starts,
naming the key path in the same form (``source[0].shape[1]``)."""

from __future__ import annotations

import fcntl
import json
import math
import os
import threading
from typing import Any, Mapping, Union

from .errors import ConfigError

__all__ = ["ConfigLike", "CONFIG_DICT_NAME", "json_config", "stdin_pipe"]

ConfigLike = Union[str, "os.PathLike[str]", Mapping[str, Any]]

CONFIG_DICT_NAME = "<config dict>"  # what shmloader calls a configuration read from stdin

_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)  # Linux fcntl(2)


def _check(value: Any, where: str, path_ids: "set[int]") -> None:
    """Raises ConfigError for the first value JSON cannot carry, naming its key path."""
    at = where or "the config dict"
    if isinstance(value, (str, bool, int)) or value is None:
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError(f"{CONFIG_DICT_NAME} {at}: {value!r} cannot be written to the configuration "
                              "(JSON has no NaN or infinity); expected a finite number")
        return
    if isinstance(value, (Mapping, list, tuple)):
        if id(value) in path_ids:
            raise ConfigError(f"{CONFIG_DICT_NAME} {at}: the value contains itself; a configuration is a tree")
        path_ids.add(id(value))
        if isinstance(value, Mapping):
            for k, x in value.items():
                if not isinstance(k, str):
                    raise ConfigError(f"{CONFIG_DICT_NAME} {at}: key {k!r} is a {type(k).__name__}; "
                                      "configuration keys are strings")
                _check(x, f"{where}.{k}" if where else k, path_ids)
        else:
            for i, x in enumerate(value):
                _check(x, f"{where}[{i}]", path_ids)
        path_ids.discard(id(value))
        return
    kind = f"{type(value).__module__}.{type(value).__qualname__}".removeprefix("builtins.")
    raise ConfigError(f"{CONFIG_DICT_NAME} {at}: a {kind} ({_short(value)}) cannot be written to the "
                      "configuration; expected a string, number, boolean, list or dict "
                      "(convert NumPy scalars with int() or float(), paths with str())")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def json_config(config: Mapping[str, Any]) -> bytes:
    """The dict as the JSON document shmloader reads from stdin, one key a line (so that an
    error's line number points at the key). Raises :class:`ConfigError` naming the key path of
    anything JSON cannot carry: NaN, infinities, keys that are not strings, other objects."""
    if not isinstance(config, Mapping):
        raise ConfigError(f"a configuration is a dict or a file path, not a {type(config).__name__}")
    _check(config, "", set())
    return (json.dumps(config, indent=2, allow_nan=False) + "\n").encode()


def stdin_pipe(data: bytes) -> int:
    """The read end of a pipe that holds ``data`` and then ends, for a child's stdin: nothing
    on disk to leave behind, whenever either process dies. The pipe is grown to hold all of it
    where the kernel allows (``/proc/sys/fs/pipe-max-size``), so the write is done before the
    child starts; a larger document is written by a daemon thread as the child reads it. The
    caller closes the returned descriptor once the child has it."""
    r, w = os.pipe2(os.O_CLOEXEC)
    try:
        if len(data) > 65536:
            try:
                fcntl.fcntl(w, _F_SETPIPE_SZ, len(data))
            except OSError:
                pass  # over pipe-max-size: the thread below feeds it
        os.set_blocking(w, False)
        done = 0
        try:
            while done < len(data):
                done += os.write(w, data[done:])
        except BlockingIOError:
            pass
        if done == len(data):
            os.close(w)
            return r
        os.set_blocking(w, True)
        threading.Thread(target=_feed, args=(w, data[done:]), name="gobatch-config-feed", daemon=True).start()
        return r
    except BaseException:
        os.close(r)
        try:
            os.close(w)
        except OSError:
            pass
        raise


def _feed(w: int, rest: bytes) -> None:
    """Writes the rest of a large configuration as the child reads it; a child that exits first
    (a broken pipe) reports its own failure."""
    try:
        while rest:
            rest = rest[os.write(w, rest):]
    except OSError:
        pass
    finally:
        os.close(w)
