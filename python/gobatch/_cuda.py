"""Batches onto a GPU: the ring's mapping as page-locked memory, and copies that hold their
batch's slot until the copy is done.

A ring's payload is shared memory the kernel may page, so ``tensor.to("cuda")`` of a batch is
a synchronous copy through a staging buffer. :func:`pin` registers the whole mapping with CUDA
(``cudaHostRegister``, through torch), after which ``.to(device, non_blocking=True)`` is an
asynchronous DMA straight from the slot. The copy reads the slot after ``to()`` returns, so the
batch must keep its slot until the copy's stream event completes: :func:`cuda_batches` does
that. Without CUDA, :func:`pin` warns and does nothing."""

from __future__ import annotations

from collections import deque
from typing import Any, Deque, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from . import _caller

__all__ = ["pin", "unpin", "cuda_batches"]

_REGISTER_PORTABLE = 1  # cudaHostRegisterPortable: pinned for every CUDA context


def _cuda() -> Any:
    """torch, when it is installed and sees a CUDA device; else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def pin(addr: int, size: int, label: str) -> Optional[Tuple[int, int]]:
    """Registers ``size`` bytes at ``addr`` (a ring's mapping) as page-locked memory; returns
    what :func:`unpin` takes, or None with a GobatchWarning when CUDA is not available or
    refuses (the ring then stays pageable: copies work, synchronously)."""
    torch = _cuda()
    if torch is None:
        _caller.warn(f"{label}: pin_memory=True does nothing here: no CUDA device (torch.cuda.is_available() "
                     "is False), so the ring stays pageable memory")
        return None
    rc = int(torch.cuda.cudart().cudaHostRegister(addr, size, _REGISTER_PORTABLE))
    if rc != 0:
        _caller.warn(f"{label}: pin_memory=True: cudaHostRegister of the ring's {size} bytes failed (CUDA error "
                     f"{rc}; the locked-memory limit, ulimit -l, may be too low), so the ring stays pageable")
        return None
    return addr, size


def unpin(pinned: Tuple[int, int]) -> None:
    """Unregisters a mapping :func:`pin` registered, once copies in flight from it are done."""
    import torch

    torch.cuda.synchronize()
    torch.cuda.cudart().cudaHostUnregister(pinned[0])


def _to(v: Any, device: Any, non_blocking: bool, made: List[Any]) -> Any:
    """``v`` on ``device``: arrays and tensors as tensors there (appended to ``made``), dicts
    (an ocf batch's ``nwp``) item by item, and what is no numeric array (a Python int such as
    ``t0_idx``, a string array such as ``nwp_channel_names``) as it is."""
    import numpy as np
    import torch

    if isinstance(v, dict):
        return {k: _to(x, device, non_blocking, made) for k, x in v.items()}
    if isinstance(v, torch.Tensor) or isinstance(v, np.ndarray) and v.dtype.kind in "biufc":
        t = torch.as_tensor(v).to(device, non_blocking=non_blocking)
        made.append(t)
        return t
    return v


def cuda_batches(batches: Iterable[Dict[str, Any]], device: Union[str, Any] = "cuda", *,
                 non_blocking: bool = True) -> Iterator[Dict[str, Any]]:
    """Yields each batch of ``batches`` (a :class:`gobatch.Loader`, numpy or torch) copied to
    ``device``, as a dict of tensors there (nested as the batch is: an ocf-data-sampler
    layout's ``nwp`` dict stays a dict, its channel names and ``t0_idx`` stay as they are).

    On a CUDA device each copy runs on a copy stream of its own (``non_blocking``: an
    asynchronous DMA when the Loader has ``pin_memory=True``), so that the copy of the next
    batch overlaps the trainer's work on this one; the current stream waits for the copy
    before it uses the tensors. The source batch keeps its slot until the copy's event has
    completed, then is released: at most two source batches are held (the one being copied
    and the one being fetched). On the CPU (``device="cpu"``) batches are yielded as
    tensors without a copy (views of the slot, held as usual)."""
    import torch

    device = torch.device(device)
    if device.type != "cuda":
        for batch in batches:
            yield _to(dict(batch), device, False, [])
        return
    copy_stream = torch.cuda.Stream(device)
    pending: Deque[Tuple[Any, Any]] = deque()  # (event, source batch) of copies maybe in flight
    for batch in batches:
        with torch.cuda.stream(copy_stream):
            made: List[Any] = []
            out = _to(dict(batch), device, non_blocking, made)
            done = torch.cuda.Event()
            done.record(copy_stream)
        current = torch.cuda.current_stream(device)
        current.wait_event(done)  # the trainer's work on these tensors follows their copy
        for t in made:
            t.record_stream(current)  # allocated on copy_stream, used on the current one
        pending.append((done, batch))
        del batch
        while len(pending) > 1 or (pending and pending[0][0].query()):
            event, source = pending.popleft()
            event.synchronize()  # the slot is read until the copy is done
            if hasattr(source, "release"):
                source.release()
            del source
        del made
        yield out
        del out
    while pending:
        event, source = pending.popleft()
        event.synchronize()
        if hasattr(source, "release"):
            source.release()
