"""Leases: a ring slot is lent to the Batch made of it until the last view of that batch is gone.

A ring keeps one lease book for its framework: :class:`ArrayLeases` (numpy: the slot's arrays'
reference counts show a live view) or :class:`TensorLeases` (torch: the slot's storage use count
shows a live view). Both answer the
same calls, made by :class:`gobatch.Ring` with its lock held: ``lend`` a slot to a new Batch,
``ended`` (the slot to give back with the C call that takes the next batch), ``end`` a lease
(``Batch.release``), ``revoke`` one (``Ring.release``), ``settle`` (give back every slot whose
lease ended) and ``close``."""

from __future__ import annotations

import mmap
import sys
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Tuple, Union

import numpy as np

from . import _clib as _lib
from .errors import LoaderError

__all__ = ["Batch", "TensorSpec", "ArrayLeases", "TensorLeases", "Leases", "leases_for"]

_ndarray = np.ndarray
_refcount = sys.getrefcount


class _Lender(Protocol):
    """What a Batch gives its slot back to: the ring (gobatch.Ring) that lent it."""

    def _end_lease(self, slot: int, token: Any) -> None: ...


@dataclass(frozen=True)
class TensorSpec:
    """One tensor of every batch: its name, full shape (dimension 0 is the batch) and dtype."""

    name: str
    shape: Tuple[int, ...]
    dtype: np.dtype
    offset: int
    nbytes: int


class Batch(dict):  # type: ignore[type-arg]
    """One batch: a dict ``{tensor name: array or tensor}`` of views into one ring slot.

    The slot is lent to the batch: it goes back to the producers when the last view of the
    batch is gone (this dict's arrays or tensors and every view derived from them; the dict
    itself holds them), or at :meth:`release`, or when a ``with batch:`` block ends. Until then
    the batch is its own: nothing else reads or writes its slot, and its arrays and tensors are
    writable (in-place normalisation changes this batch only). After :meth:`release` the batch
    is empty, and arrays of it that are still referenced may be overwritten by later batches:
    copy what you keep beyond it."""

    __slots__ = ("_lease",)

    _lease: Optional[Tuple["weakref.ref[_Lender]", int, Any]]  # (ring, slot, lease token) until released

    def release(self) -> None:
        """Hand the slot back to the producers now and empty the batch (idempotent)."""
        lease, self._lease = self._lease, None
        dict.clear(self)  # first: views gone with it need no new storage (torch)
        if lease is not None:
            ring = lease[0]()
            if ring is not None:
                ring._end_lease(lease[1], lease[2])

    @property
    def released(self) -> bool:
        """True once :meth:`release` ran (the batch is then empty)."""
        return self._lease is None

    def __enter__(self) -> "Batch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __missing__(self, key: str) -> Any:
        if self._lease is None:
            raise LoaderError(f"the batch was released, so its tensors are gone (read {key!r} before "
                              "release() or the end of the with block, or copy it)")
        raise KeyError(key)

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))  # pickled as a plain dict (of copies)

    def __repr__(self) -> str:
        state = "released" if self._lease is None else f"slot {self._lease[1]}"
        return f"<gobatch.Batch ({state}) {list(dict.keys(self))}>"


class _SlotMemory(np.ndarray):
    """The arrays that hold a slot's memory for the ring, made once at attach over the mapping
    (_slot_memory). Never handed out."""


def _slot_memory(mm: mmap.mmap, dtype: np.dtype, offset: int, shape: Tuple[int, ...]) -> _SlotMemory:
    """A _SlotMemory array of ``shape`` at ``offset`` of the mapping. ``numpy.frombuffer``
    holds a buffer export of the mapping for as long as the array or any view of it lives, so
    that close() cannot unmap memory that a kept batch points into. It is viewed as _SlotMemory
    twice, so that the result's own base is a _SlotMemory too: a plain-ndarray view of the
    result then stops collapsing its base at the result (see ArrayLeases._new_arrays)."""
    flat = np.frombuffer(mm, dtype=dtype, count=int(np.prod(shape)), offset=offset)
    return flat.reshape(shape).view(_SlotMemory).view(_SlotMemory)


def _max_refs(arrays: List[np.ndarray]) -> int:
    """The largest reference count among a slot's arrays, as read here: ArrayLeases._idle_refs
    is this for arrays that nothing but the ring holds, so a larger count means a view of the
    slot's batch is alive."""
    most = 0
    for a in arrays:
        n = _refcount(a)
        if n > most:
            most = n
    return most


class _Book:
    """What both lease books share: per slot the lease token of the batch lent there (None when
    not lent), and the C call that gives a slot back while the ring is open."""

    def __init__(self, ring: "weakref.ref[_Lender]", ptr: int, slots: int) -> None:
        self.tokens: List[Any] = [None] * slots
        #: how a batch's flat tensors are presented (the ring's batch description, PROTOCOL.md
        #: 2.9: _view.BatchView.view); None: flat. It must keep the slot's own arrays or tensors (no
        #: copy), so that the batch's references are what the lease counts.
        self.layout: Optional[Callable[[Mapping[str, Any]], Dict[str, Any]]] = None
        self._ring = ring
        self._ptr: Optional[int] = ptr
        self._release = _lib.lib().gb_release

    def _give(self, slot: int) -> None:
        if self._ptr is not None:
            self._release(self._ptr, slot)

    def held(self) -> int:
        """Slots lent to batches."""
        return sum(token is not None for token in self.tokens)

    def close(self) -> None:
        """The ring is closed: nothing is given back any more. Lent batches keep their views; a
        release() of one gives nothing back."""
        self._ptr = None
        self.tokens[:] = [None] * len(self.tokens)


class ArrayLeases(_Book):
    """numpy: per slot its arrays (made once, reused by every batch of the slot), the tensors'
    names, the slots lent, and the reference count of an array nothing but the slot holds."""

    def __init__(self, ring: "weakref.ref[_Lender]", ptr: int, mm: mmap.mmap, payload: List[int],
                 specs: List[TensorSpec]) -> None:
        super().__init__(ring, ptr, len(payload))
        self._names = tuple(t.name for t in specs)
        self._memories = [[_slot_memory(mm, t.dtype, base + t.offset, t.shape) for t in specs] for base in payload]
        self._arrays: List[List[np.ndarray]] = []
        self._items: List[Dict[str, np.ndarray]] = []  # per slot: its arrays by name (a batch's contents)
        self._arrays = [self._new_arrays(s) for s in range(len(payload))]
        self._items = [dict(zip(self._names, arrays)) for arrays in self._arrays]
        self._lent: List[int] = []
        self._count = 0  # lease tokens: one int per batch lent
        self._idle_refs = _max_refs(self._arrays[0])

    def _new_arrays(self, slot: int) -> List[np.ndarray]:
        """The arrays that batches lent from ``slot`` hand out, one per tensor, made once and
        reused by every batch of the slot (renewed only when a lease ends while they are still
        referenced, _forget_lent).

        NumPy collapses a new view's ``base`` to the first array up the chain that owns its data,
        has a base that is not an array, or has a base of another type than the view. Each
        tensor's memory is held by a _SlotMemory array over the mapping (_slot_memory, made at
        attach); these arrays are plain-ndarray views of it, so every view derived from one of
        them (a slice, reshape, ``view``, ``np.asarray``, a memoryview or torch.from_numpy of it)
        holds a reference to it: the slot's batch is alive exactly as long as some array of the
        slot has more references than the ring's own (_max_refs), which CPython's reference
        counts show at no cost until the next next() reads them."""
        arrays = [m.view(_ndarray) for m in self._memories[slot]]
        if slot < len(self._items):
            self._items[slot] = dict(zip(self._names, arrays))
        return arrays

    def lend(self, slot: int) -> Batch:
        """Lends ``slot`` to a new Batch of its arrays."""
        self._count += 1
        token = self.tokens[slot] = self._count
        self._lent.append(slot)
        items = self._items[slot]
        batch = Batch(items if self.layout is None else self.layout(items))
        batch._lease = (self._ring, slot, token)
        return batch

    def ended(self) -> int:
        """Ends the lease of every lent slot whose arrays nothing but the ring references any
        more, and gives all of them back but one, which it returns for the C call that takes the
        next batch (-1 when none ended). The counts are read by _max_refs, the function that
        measured _idle_refs, so that both count the same references whatever the interpreter
        adds for a call."""
        lent = self._lent
        if not lent:
            return -1
        keep, more, idle, arrays = -1, None, self._idle_refs, self._arrays
        for slot in lent:
            if _max_refs(arrays[slot]) > idle:
                continue
            if keep < 0:
                keep = slot
            elif more is None:
                more = [slot]
            else:
                more.append(slot)
        if keep < 0:
            return -1
        self.tokens[keep] = None
        lent.remove(keep)
        for slot in more or ():
            self.tokens[slot] = None
            lent.remove(slot)
            self._give(slot)
        return keep

    def _forget_lent(self, slot: int) -> None:
        """A lease ended by release(): the slot is no longer lent, and if views of its batch are
        still referenced the slot gets new arrays, so that they do not count as views of its
        next batch."""
        if slot in self._lent:
            self._lent.remove(slot)
            if _max_refs(self._arrays[slot]) > self._idle_refs:
                self._arrays[slot] = self._new_arrays(slot)

    def revoke(self, slot: int) -> None:
        """Gives ``slot`` back now, its batch referenced or not (Ring.release)."""
        if self.tokens[slot] is not None:
            self.tokens[slot] = None
            self._forget_lent(slot)
            self._give(slot)

    def end(self, slot: int, token: Any) -> None:
        """Batch.release(): gives the slot back now, and every other slot whose lease ended as
        this batch let go of its views."""
        if self.tokens[slot] is token:
            self.revoke(slot)
        self.settle()

    def settle(self) -> None:
        """Gives back every lent slot whose lease ended."""
        slot = self.ended()
        if slot >= 0:
            self._give(slot)

    def close(self) -> None:
        super().close()
        self._memories, self._arrays, self._items, self._lent = [], [], [], []


class _TorchSlot:
    """torch: one slot's storage (one for all its tensors, so that one use count shows every
    view of any of them) and per tensor a tensor over it. Batches get ``detach()`` copies of the
    tensors."""

    def __init__(self, mm: mmap.mmap, base: int, specs: List[TensorSpec]) -> None:
        import torch  # imported only when asked for

        raw = _slot_memory(mm, np.dtype(np.uint8), base, (max(t.offset + t.nbytes for t in specs),))
        self._args = (mm, base, specs)
        self.storage = torch.from_numpy(raw.view(_ndarray)).untyped_storage()
        self.tensors: List[Tuple[str, Any]] = []
        for t in specs:
            dtype = torch.from_numpy(np.empty(0, dtype=t.dtype)).dtype
            strides, step = [], 1
            for n in reversed(t.shape):
                strides.append(step)
                step *= n
            view = torch.empty(0, dtype=dtype).set_(self.storage, t.offset // t.dtype.itemsize, t.shape,
                                                    tuple(reversed(strides)))
            self.tensors.append((t.name, view))
        self._use_count = torch._C._storage_Use_Count
        self._cdata = self.storage._cdata  # the storage's address, valid while self.storage lives
        self._own_uses = self._use_count(self._cdata)

    def unused(self) -> bool:
        """True when nothing but this slot uses the storage: no tensor, view or array of a
        batch lent from it is left."""
        return self._use_count(self._cdata) == self._own_uses

    def renewed(self) -> "_TorchSlot":
        """The same memory with a new storage and tensors."""
        return _TorchSlot(*self._args)


class TensorLeases(_Book):
    """torch: per slot the slot's storage and tensors (_TorchSlot), and the slots lent. A lease
    ends when the storage's use count is back to the slot's own (every tensor, view or
    ``.numpy()`` array of the batch holds the storage). A batch's tensors are its own while it
    holds the slot: in-place writes change only that slot's memory, which the producers
    overwrite with a later batch only after the lease ended."""

    def __init__(self, ring: "weakref.ref[_Lender]", ptr: int, mm: mmap.mmap, payload: List[int],
                 specs: List[TensorSpec]) -> None:
        super().__init__(ring, ptr, len(payload))
        self._slots = [_TorchSlot(mm, base, specs) for base in payload]
        self._lent: List[int] = []

    def lend(self, slot: int) -> Batch:
        """Lends ``slot`` to a new Batch: per tensor a ``detach()`` of the slot's own tensor,
        which shares its storage."""
        token = self.tokens[slot] = object()
        self._lent.append(slot)
        items = {name: t.detach() for name, t in self._slots[slot].tensors}
        batch = Batch(items if self.layout is None else self.layout(items))
        batch._lease = (self._ring, slot, token)
        return batch

    def ended(self) -> int:
        """Ends the lease of every lent slot whose storage no view uses any more, and gives all
        of them back but one, which it returns for the C call that takes the next batch (-1 when
        none ended)."""
        lent = self._lent
        if not lent:
            return -1
        keep = -1
        for slot in [s for s in lent if self._slots[s].unused()]:
            self.tokens[slot] = None
            lent.remove(slot)
            if keep < 0:
                keep = slot
            else:
                self._give(slot)
        return keep

    def revoke(self, slot: int) -> None:
        """Gives ``slot`` back now, its batch referenced or not (Ring.release). Tensors of the
        batch still referenced stay on the slot's old storage object, so the slot gets a new one:
        they do not count as views of its next batch."""
        if self.tokens[slot] is not None:
            self.tokens[slot] = None
            self._lent.remove(slot)
            ts = self._slots[slot]
            if not ts.unused():
                self._slots[slot] = ts.renewed()
            self._give(slot)

    def end(self, slot: int, token: Any) -> None:
        """Batch.release(): gives the slot back now."""
        if self.tokens[slot] is token:
            self.revoke(slot)

    def settle(self) -> None:
        """Gives back every lent slot whose lease ended."""
        slot = self.ended()
        if slot >= 0:
            self._give(slot)

    def close(self) -> None:
        super().close()
        self._slots, self._lent = [], []


Leases = Union[ArrayLeases, TensorLeases]


def leases_for(framework: str, ring: "weakref.ref[_Lender]", ptr: int, mm: mmap.mmap, payload: List[int],
               specs: List[TensorSpec]) -> Leases:
    """The lease book of a ring attached for ``framework`` ("numpy" or "torch"); ``payload``
    holds each slot's offset in the mapping."""
    if framework == "torch":
        return TensorLeases(ring, ptr, mm, payload, specs)
    return ArrayLeases(ring, ptr, mm, payload, specs)
