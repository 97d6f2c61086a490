"""Which stage limits a pass: the figures of an epoch (or of the stream since attach) from two
``Ring.stats()`` snapshots.

A batch goes through four stages: its chunks are read from the store (``read``), decoded and
converted into the cache (``decode``), copied example by example into the slot (``gather``),
and used by the trainer (``consumer``). The producer publishes how long each producer stage was
busy, summed over everything that ran it at once (PROTOCOL.md 2.5a: ``read_ns``, ``decode_ns``,
``gather_ns``), and how many can run at once (``read_slots``: reads in flight; ``decode_slots``:
cores; ``gather_slots``: readers). A stage's load is its busy time over the time its slots had:
1.0 is a stage that was busy all the time on all its slots. The trainer's load is the share of
the wall time it did not wait for a batch. The limiting stage is the most loaded one: a loader
limited by ``consumer`` is faster than the trainer; by ``decode``, more cores or a smaller
decode amplification would help; by ``read``, more reads in flight or a faster store.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping

__all__ = ["STAGES", "pass_figures"]

#: The stages, in a batch's order.
STAGES = ("read", "decode", "gather", "consumer")


def pass_figures(start: Mapping[str, Any], end: Mapping[str, Any]) -> Dict[str, Any]:
    """The figures between two ``stats()`` snapshots of one ring: ``batches``, ``seconds``,
    ``batches_per_s``, each stage's ``stage_load`` (0 .. 1, see the module doc),
    ``limiting_stage``, and per source ``decode_amplification`` (bytes decoded per byte
    delivered over the pass)."""
    wall = max(float(end["elapsed_s"]) - float(start["elapsed_s"]), 1e-9)

    def delta(key: str) -> float:
        return float(end.get(key, 0)) - float(start.get(key, 0))

    load = {}
    for stage in ("read", "decode", "gather"):
        slots = max(int(end.get(f"{stage}_slots", 0)), 1)
        load[stage] = min(delta(f"{stage}_ns") / 1e9 / (wall * slots), 1.0)
    load["consumer"] = min(max(1.0 - delta("consumer_wait_s") / wall, 0.0), 1.0)
    batches = int(delta("batches"))
    return {
        "batches": batches,
        "seconds": wall,
        "batches_per_s": batches / wall,
        "stage_load": load,
        "limiting_stage": max(STAGES, key=lambda s: load[s]),
        "decode_amplification": _amplification(start, end),
    }


def _amplification(start: Mapping[str, Any], end: Mapping[str, Any]) -> List[float]:
    dec0, dec1 = start.get("decoded_bytes", []), end.get("decoded_bytes", [])
    del0, del1 = start.get("delivered_bytes", []), end.get("delivered_bytes", [])
    out = []
    for i in range(len(dec1)):
        d = dec1[i] - (dec0[i] if i < len(dec0) else 0)
        s = del1[i] - (del0[i] if i < len(del0) else 0) if i < len(del1) else 0
        out.append(d / s if s else 0.0)
    return out
