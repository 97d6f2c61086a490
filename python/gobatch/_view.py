"""The batch description a ring carries (PROTOCOL.md 2.9): the stream's order, the batches per
epoch, and how a batch is presented (its nesting, key names and constants).

The producer writes it into the ring's header from the job's rule set; the consumer reads it
here, so it never starts another process or reads the configuration to learn it. Nothing in this
module knows a rule set: a description of an ocf-data-sampler job nests its NWP per provider
because the description says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from .errors import RingError

__all__ = ["Description", "BatchView", "parse_description"]

#: At most this many keys deep (PROTOCOL.md 2.9).
MAX_DEPTH = 8

Key = Tuple[str, ...]
Constant = Union[int, np.ndarray]


@dataclass(frozen=True)
class BatchView:
    """How a flat batch ``{tensor name: array}`` is presented: tensors placed at other keys
    (``tensors``: key path -> tensor name) and constants added (``constants``: key path ->
    value). :meth:`view` builds the nested mapping over the slot's own arrays: nothing is
    copied, so the nested batch holds its lease exactly as the flat one does."""

    tensors: Tuple[Tuple[Key, str], ...] = ()
    constants: Tuple[Tuple[Key, Constant], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.tensors or self.constants)

    def view(self, flat: Mapping[str, Any]) -> Dict[str, Any]:
        """The presented batch: first the tensors at the top level (under their own name or a
        one-element key) in ``flat``'s order, then each nested mapping in the order of its
        first element, then the constants."""
        placed = {name: key for key, name in self.tensors}
        out: Dict[str, Any] = {}
        nested: List[Tuple[Key, Any]] = []
        for name, value in flat.items():
            key = placed.get(name, (name,))
            if len(key) == 1:
                out[key[0]] = value
            else:
                nested.append((key, value))
        for key, value in nested:
            _put(out, key, value)
        for key, const in self.constants:
            _put(out, key, const)
        return out


def _put(out: Dict[str, Any], key: Key, value: Any) -> None:
    node = out
    for part in key[:-1]:
        node = node.setdefault(part, {})
    node[key[-1]] = value


@dataclass(frozen=True)
class Description:
    """A ring's batch description. ``order`` is ``"stream"`` or ``"epochs"`` (None when the
    ring has no description); with epochs ``epoch_batches`` is this rank's batches per epoch
    and ``samples`` the samples an epoch permutes; ``warnings`` are what the producer found a
    user would want to know before the first batch."""

    order: Optional[str] = None
    epoch_batches: Optional[int] = None
    samples: Optional[int] = None
    view: BatchView = field(default_factory=BatchView)
    warnings: Tuple[str, ...] = ()


def parse_description(raw: bytes, tensors: "set[str]", label: str = "ring") -> Description:
    """Parses and checks the description bytes of a ring whose tensors are ``tensors``;
    raises :class:`RingError` naming the member at fault. Empty bytes: no description."""
    if not raw:
        return Description()

    def bad(member: str, why: str) -> RingError:
        return RingError(f"{label}: corrupt batch description (PROTOCOL.md 2.9): {member}: {why}")

    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise bad("description", f"not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise bad("description", f"a JSON {type(doc).__name__}, not an object")
    order = doc.get("order")
    if order is not None and order not in ("stream", "epochs"):
        raise bad("order", f"{order!r}, not 'stream' or 'epochs'")
    counts = {}
    for name in ("epoch_batches", "samples"):
        v = doc.get(name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise bad(name, f"{v!r}, not an integer >= 0")
        counts[name] = v
    warns = doc.get("warnings", [])
    if not isinstance(warns, list) or not all(isinstance(w, str) for w in warns):
        raise bad("warnings", "not an array of strings")
    return Description(order=order, epoch_batches=counts["epoch_batches"], samples=counts["samples"],
                       view=_parse_view(doc.get("view"), tensors, bad), warnings=tuple(warns))


def _parse_view(items: Any, tensors: "set[str]", bad: Any) -> BatchView:
    if items is None:
        return BatchView()
    if not isinstance(items, list):
        raise bad("view", "not an array")
    placed: List[Tuple[Key, str]] = []
    consts: List[Tuple[Key, Constant]] = []
    keys: List[Key] = []
    for i, item in enumerate(items):
        where = f"view[{i}]"
        if not isinstance(item, dict):
            raise bad(where, "not an object")
        key = item.get("key")
        if (not isinstance(key, list) or not 1 <= len(key) <= MAX_DEPTH
                or not all(isinstance(k, str) and k for k in key)):
            raise bad(where + ".key", f"{key!r}, not an array of 1 to {MAX_DEPTH} non-empty strings")
        k = tuple(key)
        for other in keys:
            if k[:len(other)] == other or other[:len(k)] == k:
                raise bad(where + ".key", f"{list(k)} is, holds or lies under the key {list(other)} of another element")
        keys.append(k)
        if "tensor" in item:
            if item["tensor"] not in tensors:
                raise bad(where + ".tensor", f"{item['tensor']!r} is not a tensor of the ring")
            placed.append((k, item["tensor"]))
        elif "strings" in item:
            s = item["strings"]
            if not isinstance(s, list) or not all(isinstance(x, str) for x in s):
                raise bad(where + ".strings", "not an array of strings")
            consts.append((k, np.array(s, dtype=np.str_)))
        elif "int" in item:
            v = item["int"]
            if isinstance(v, bool) or not isinstance(v, int):
                raise bad(where + ".int", f"{v!r}, not an integer")
            consts.append((k, v))
        else:
            raise bad(where, "has none of tensor, strings, int")
    return BatchView(tuple(placed), tuple(consts))
