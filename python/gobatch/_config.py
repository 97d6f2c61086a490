"""A configuration given as a dict: checked and written as the JSON document ``shmloader`` reads
from its stdin (``--config -``), for :class:`gobatch.Loader` and :func:`gobatch.plan` alike.

shmloader names that document ``<config dict>`` in its errors, with the line and the key path
(``<config dict>:7: source[0].dtype: ...``). The dict is written one key a line so that the
line points at the key. What JSON cannot carry is refused here, before any process starts,
naming the key path in the same form (``source[0].shape[1]``)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import re
import threading
from typing import Any, Mapping, NamedTuple, Optional, Tuple, Union

from .errors import ConfigError

__all__ = ["ConfigLike", "CONFIG_DICT_NAME", "ORDER_STREAM", "ORDER_EPOCHS", "Identity", "config_argument",
           "config_identity", "json_config", "stdin_pipe"]

ConfigLike = Union[str, "os.PathLike[str]", Mapping[str, Any]]

CONFIG_DICT_NAME = "<config dict>"  # what shmloader calls a configuration read from stdin

ORDER_STREAM = "stream"  # [batch] order (config/config.go): the default, independent draws
ORDER_EPOCHS = "epochs"  # a seeded permutation of the sample space per epoch

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


def config_argument(config: ConfigLike) -> Tuple[str, Optional[bytes]]:
    """shmloader's ``--config`` for a configuration, and the document for its stdin: ``("-",
    JSON)`` for a dict (checked by :func:`json_config`), ``(absolute path, None)`` for a file,
    which must exist."""
    if isinstance(config, Mapping):
        return "-", json_config(config)
    path = os.fspath(config)
    try:
        with open(path, "rb"):
            pass
    except FileNotFoundError:
        raise ConfigError(f"config file {path!r} does not exist") from None
    except OSError as e:
        raise ConfigError(f"config file {path!r}: {e.strerror}") from None
    return os.path.abspath(path), None


class Identity(NamedTuple):
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


def config_identity(config: ConfigLike) -> Identity:
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
    return Identity(seed if isinstance(seed, int) else None, hashlib.sha256(text).hexdigest(),
                     order if isinstance(order, str) else ORDER_STREAM)
