"""Leases by reference (issue 9): a slot goes back to the producers only when the last view of
its batch is gone (given back by the next next()), at Batch.release() or at the end of
``with batch:``; kept tensors never change; a ring whose next slot is still lent raises
SlotsHeldError instead of waiting. Slot states are read straight from the segment (FakeRing)."""

from __future__ import annotations

import gc
import itertools
import multiprocessing
import re
import sys
import threading
import time
import warnings

import numpy as np
import pytest

import gobatch
from gobatch import LoaderError, SlotsHeldError
from gobatch._ring import Ring
from fakering import FakeRing
from synthetic import check_batch, config

pytestmark = pytest.mark.timeout(60)

SPEC = {"x": ((4, 3), "float32"), "y": ((4,), "int64")}
ONE = {"y": ((4,), "int64")}
READING = 3


def free(lap: int) -> int:
    return lap << 2  # FREE(lap)


def value(b) -> int:
    return int(b["y"][0])


def published(memfd: int, n: int, *, slots: int, spec=SPEC) -> FakeRing:
    """A FakeRing of ``slots`` slots with batches 0 .. n-1 published."""
    fr = FakeRing(memfd, spec, slots=slots)
    for j in range(n):
        fr.publish(j)
    return fr


def publish_when_free(fr: FakeRing, j: int) -> threading.Thread:
    """Publishes batch j from a thread as soon as the consumer has granted it a slot (a slot
    dropped by the consumer goes back, and to a later batch, during its next request, which
    then waits for the batch; PROTOCOL.md 3.1)."""

    def run() -> None:
        deadline = time.monotonic() + 20
        while fr.grant(j) is None and time.monotonic() < deadline:
            time.sleep(0.005)
        fr.publish(j)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def stream_past_held_slot(fr: FakeRing, r: Ring, j: int, kept: list) -> int:
    """Of a 2-slot ring whose slot 0 is held by views of batch 0 (``kept``, non-empty): batch j
    and the next go to slot 1, the stream goes on; holding batch j as well holds every slot, so
    the next request raises SlotsHeldError naming both. Returns the next batch to ask for."""
    for k in (j, j + 1):
        b = None  # dropped before the request: the usual loop's batch of the step before
        publish_when_free(fr, k)
        b = next(r)
        assert value(b) == k and fr.grant(k)[0] == 1  # the free slot, not batch k's old slot k % 2
    with pytest.raises(SlotsHeldError, match=rf"all 2 slots .*\(batch 0 \(slot 0, taken at .*\), batch {j + 1} "
                       rf"\(slot 1, taken at .*\)\), so the next batch \({j + 2}\) has no slot"):
        next(r)
    assert fr.slot_state(0) == READING
    assert all((np.asarray(v) == 0).all() for v in kept)  # the kept views never changed
    del b
    return j + 2


@pytest.fixture(params=["numpy", "torch"])
def framework(request) -> str:
    if request.param == "torch":
        pytest.importorskip("torch")
    return request.param


# ---- Loader: kept batches, the usual loops ----


def test_list_of_8_batches_is_8_distinct_correct_batches(framework):
    cfg = config({"a": ((3,), "int64"), "b": ((2,), "float32")}, size=2, batches=8, slots=8)
    with gobatch.Loader(cfg, framework=framework) as loader:
        kept = list(loader)
        assert len(kept) == 8
        for k, b in enumerate(kept):
            check_batch(b, cfg, k)  # none was overwritten while kept


def test_warmup_islice_then_for_streams_on(framework):
    """Issue 20: a warm-up ``for _ in islice(it, 20): pass`` and then ``for b in it:`` leave
    ``_`` holding batch 19's slot; the next batches go to the other slots (PROTOCOL.md 3.1), so
    the loop reads all 200 that follow, and the leftover never changes."""
    cfg = config({"a": ((3,), "int64"), "b": ((2,), "float32")}, size=2, batches=220)  # default 4 slots
    with gobatch.Loader(cfg, framework=framework) as loader:
        it = iter(loader)
        for _ in itertools.islice(it, 20):
            pass
        k = 20
        for b in it:
            check_batch(b, cfg, k)
            k += 1
        assert k == 220
        check_batch(_, cfg, 19)


def test_keeping_all_slots_but_one_still_streams(framework):
    """N - 1 of N slots held by kept batches: the stream goes on through the last one (a loop
    that drops each batch before it asks for the next), and with N - 2 kept the usual ``for``
    (two slots per step) goes on too; the kept batches never change."""
    cfg = config({"a": ((3,), "int64")}, size=2, batches=100, slots=4)
    with gobatch.Loader(cfg, framework=framework) as loader:
        it = iter(loader)
        kept = [next(it) for _ in range(3)]
        for k in range(3, 50):
            b = next(it)
            check_batch(b, cfg, k)
            del b
        kept.pop()  # batch 2 goes back: two free slots, enough for the usual loop
        for k, b in enumerate(it, start=50):
            check_batch(b, cfg, k)
        assert k == 99
        for k, b in enumerate(kept):
            check_batch(b, cfg, k)


def test_every_slot_held_raises_naming_the_holders_then_goes_on(framework):
    """Only when every slot is held does next() raise SlotsHeldError, at once, naming each held
    batch and the line that took it; nothing is consumed, and a release lets it go on."""
    cfg = config({"a": ((3,), "int64")}, size=2, batches=20, slots=3)
    with gobatch.Loader(cfg, framework=framework) as loader:
        it = iter(loader)
        line = sys._getframe().f_lineno + 1
        first = next(it)
        for _ in range(4):  # batches 1 .. 4 through the two other slots
            next(it)
        b5 = next(it)
        b6 = next(it)
        with pytest.raises(SlotsHeldError) as ei:  # at once: a wait for a slot that cannot come free would not end
            next(it)
        msg = str(ei.value)
        assert ei.value.held == 3 and ei.value.slots == 3
        for j, at in ((0, line), (5, line + 3), (6, line + 4)):
            assert re.search(rf"batch {j} \(slot \d, taken at test_leases.py:{at}\)", msg), msg
        assert "all 3 slots hold batches that are still referenced" in msg and "next batch (7) has no slot" in msg
        del b5
        check_batch(next(it), cfg, 7)  # nothing was consumed
        check_batch(first, cfg, 0)
        check_batch(b6, cfg, 6)


def test_list_with_fewer_slots_raises_slots_held_error_then_goes_on(framework):
    cfg = config({"a": ((3,), "int64"), "b": ((2,), "float32")}, size=2, batches=8, slots=4)
    with gobatch.Loader(cfg, framework=framework) as loader:
        kept = []
        with pytest.raises(SlotsHeldError, match=r"all 4 slots hold batches that are still referenced \(batch 0 "
                           r"\(slot 0, taken at test_leases.py:\d+\), batch 1 .*batch 3 .*\), so the next batch \(4\) has "
                           r"no slot.*clone\(\).*raise the ring's slots \(now 4: gobatch.Loader\(..., slots=N\), "
                           r"shmloader --slots N, or \[ring\] slots = N in a TOML file; the usual") as ei:
            for b in loader:
                kept.append(b)
        assert ei.value.held == 4 and ei.value.slots == 4
        assert isinstance(ei.value, LoaderError)
        assert len(kept) == 4
        for k, b in enumerate(kept):
            check_batch(b, cfg, k)
        del b
        kept.pop(0)  # batch 0 gone: the stream goes on, nothing was skipped
        check_batch(next(loader), cfg, 4)
        for k, b in enumerate(kept, start=1):
            check_batch(b, cfg, k)


def test_slots_keyword_replaces_the_files_slots(framework):
    """The knob SlotsHeldError names exists as the Loader's keyword: slots=6 over a file's 4
    gives a ring of 6 slots, which lends 6 batches at once."""
    cfg = config({"a": ((3,), "int64")}, size=2, batches=8, slots=4)
    with gobatch.Loader(cfg, framework=framework, slots=6) as loader:
        assert loader.slots == 6
        kept = list(itertools.islice(loader, 6))
        for k, b in enumerate(kept):
            check_batch(b, cfg, k)
    with pytest.raises(gobatch.ConfigError, match=r"slots"):
        gobatch.Loader(cfg, framework=framework, slots=1)


def test_usual_loops_run_with_the_default_slots(framework):
    """``for batch in loader`` drops the previous batch one step late, and trainer loops that
    keep ``batch`` (or a view of it) across the next request hold one more: none of them
    raises SlotsHeldError with the default [ring] slots, nor with 2 slots."""
    for slots in (None, 2):
        cfg = config({"x": ((3,), "float32")}, size=2, batches=60)
        if slots is None:
            del cfg["ring"]  # shmloader's default
        else:
            cfg["ring"]["slots"] = slots
        with gobatch.Loader(cfg, framework=framework) as loader:
            assert loader.slots == (slots or 4)
            prev = None
            for k, batch in enumerate(loader):  # the usual loop, keeping the previous batch too
                check_batch(batch, cfg, k)
                if prev is not None:
                    check_batch(prev, cfg, k - 1)
                prev = batch
                if k == 19:
                    break
            del prev
            batch = next(loader)  # a hand-written loop: batch and a view of it outlive the request
            for k in range(21, 40):
                x = batch["x"]
                nxt = next(loader)
                check_batch(nxt, cfg, k)
                assert float(x[0, 0]) == float((k - 1) * 2)  # unchanged while the next was fetched
                batch = nxt


# ---- Ring on a FakeRing: exact slot states ----


def test_dropped_batch_goes_back_with_the_next_request(memfd):
    fr = published(memfd, 2, slots=2)
    with Ring(memfd, label="fake") as r:
        b = next(r)
        assert isinstance(b, gobatch.Batch) and not b.released
        assert fr.slot_state(0) == READING
        del b
        assert fr.slot_state(0) == READING  # queued: nothing calls the C side from a finaliser
        assert value(next(r)) == 1
        assert fr.slot_state(0) == free(1)  # given back in the call that took batch 1
        assert fr.get("batches_read") == 1


@pytest.mark.parametrize("spec", [SPEC, ONE], ids=["several tensors", "one tensor"])
def test_derived_views_hold_the_slot_until_they_are_gone(memfd, spec):
    fr = published(memfd, 2, slots=2, spec=spec)
    with Ring(memfd, label="fake") as r:
        y = next(r)["y"]
        views = [y[1:], y.reshape(2, 2).T, y.view(np.uint8), np.asarray(y)[::2], y.view(np.ndarray)]
        del y  # the batch and its own array are gone; only derived views are left
        next(r)  # batch 1, dropped
        assert fr.slot_state(0) == READING
        j = 2
        while views:
            j = stream_past_held_slot(fr, r, j, views)
            views.pop()
        publish_when_free(fr, j)
        assert value(next(r)) == j
        assert fr.get("batches_read") == j  # every view gone: slot 0 went back with batch j - 1's


def test_memoryviews_and_torch_tensors_of_an_array_hold_the_slot(memfd):
    fr = published(memfd, 2, slots=2, spec=ONE)
    with Ring(memfd, label="fake") as r:
        y = next(r)["y"]
        keep = [memoryview(y), np.asarray(memoryview(y))]
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "not writable": read-only on purpose
                keep.append(torch.from_numpy(y))
        del y
        next(r)  # batch 1, dropped
        j = 2
        while keep:
            j = stream_past_held_slot(fr, r, j, keep)
            keep.pop()
        publish_when_free(fr, j)
        assert value(next(r)) == j
        assert fr.get("batches_read") == j


def test_views_kept_past_release_do_not_hold_the_next_batch_of_the_slot(memfd):
    fr = published(memfd, 1, slots=1, spec=ONE)
    with Ring(memfd, label="fake") as r:
        b0 = next(r)
        kept = b0["y"][1:]  # outlives the lease (release() warns that it may be overwritten)
        b0.release()
        assert fr.slot_state(0) == free(1)
        fr.publish(1)
        b1 = next(r)
        assert value(b1) == 1 and kept.base is not b1["y"]  # the slot's next batch has new arrays
        del b1
        publish_when_free(fr, 2)
        assert value(next(r)) == 2  # batch 1's lease ended although `kept` is still alive
        assert fr.slot_state(0) == (2 << 2) | READING


def test_views_in_a_reference_cycle_are_collected_before_refusing(memfd):
    fr = published(memfd, 2, slots=2)
    gc.disable()
    try:
        with Ring(memfd, label="fake") as r:
            cycle: list = []
            cycle.append(cycle)
            cycle.append(next(r)["x"])
            del cycle
            next(r)
            publish_when_free(fr, 2)
            assert value(next(r)) == 2  # collected, not refused
    finally:
        gc.enable()


def test_release_and_with_and_out_of_order(memfd):
    fr = published(memfd, 3, slots=3)
    with Ring(memfd, label="fake") as r:
        b0, b1, b2 = next(r), next(r), next(r)
        assert [fr.slot_state(s) for s in range(3)] == [READING] * 3
        b1.release()  # out of order, and at once
        assert fr.slot_state(1) == free(1) and fr.slot_state(0) == READING
        assert b1.released and len(b1) == 0
        with pytest.raises(LoaderError, match="the batch was released"):
            b1["x"]
        b1.release()  # idempotent
        with b2:
            assert value(b2) == 2
        assert fr.slot_state(2) == free(1) and b2.released
        assert value(b0) == 0
        # batch 0 still held: batches 3 and 4 go to the slots released first, 1 and 2 (PROTOCOL.md 3.1)
        assert fr.grant(3) == (1, 1) and fr.grant(4) == (2, 1)
        fr.publish(3)
        assert value(next(r)) == 3 and fr.slot_state(0) == READING and value(b0) == 0
        del b0
        fr.publish(4)
        publish_when_free(fr, 5)
        assert [value(next(r)) for _ in range(2)] == [4, 5]
        assert r.stats()["batches"] == 6


def test_release_of_a_batch_whose_slot_was_lent_again_releases_nothing(memfd):
    fr = published(memfd, 1, slots=1)
    with Ring(memfd, label="fake") as r:
        b0 = next(r)
        r.release()  # the ring's release(): the last batch goes back although referenced
        assert fr.slot_state(0) == free(1)
        fr.publish(1)
        b1 = next(r)
        b0.release()  # its lease ended already: batch 1's slot stays lent
        assert fr.slot_state(0) == (1 << 2) | READING and value(b1) == 1


def test_close_keeps_lent_batches_intact(memfd):
    fr = published(memfd, 2, slots=2)
    r = Ring(memfd, label="fake")
    b = next(r)
    next(r)  # dropped
    r.close()
    assert fr.slot_state(0) == READING  # not handed back: the producers could overwrite it
    assert fr.slot_state(1) == free(1)  # the dropped one went back at close
    assert fr.get("batches_read") == 2 and value(b) == 0
    del b


def test_batch_dropped_in_another_thread_while_next_waits(memfd):
    fr = published(memfd, 1, slots=2)
    with Ring(memfd, label="fake") as r:
        box = [next(r)]
        threading.Timer(0.1, box.clear).start()  # the last reference goes in the timer's thread
        threading.Timer(0.4, fr.publish, args=(1,)).start()
        assert value(next(r)) == 1
        assert fr.slot_state(0) == free(1)  # given back by the waiting call, 100 ms slices
        fr.publish(2)
        assert value(next(r)) == 2
        assert fr.slot_state(0) == (1 << 2) | READING


# ---- torch ----


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_batches_are_writable_and_writes_stay_in_their_batch(memfd, framework):
    """Issue 20: in-place normalisation of a held batch (numpy or torch) is allowed; it changes
    that batch only, the slot stays lent while the batch is referenced, and a kept view never
    shows a later batch."""
    if framework == "torch":
        pytest.importorskip("torch")
    fr = published(memfd, 2, slots=2)
    with Ring(memfd, framework=framework, label="fake") as r:
        line = sys._getframe().f_lineno + 1
        b = next(r)
        if framework == "torch":
            b["x"][1:].sub_(1).div_(2)  # through a view
            b["y"].mul_(3)
        else:
            b["x"][1:] -= 1
            b["x"][1:] /= 2
            b["y"] *= 3
            assert all(a.flags.writeable for a in b.values())
        assert value(b) == 0 and float(b["x"][1, 0]) == -0.5 and float(b["x"][0, 0]) == 0
        b1 = next(r)
        assert value(b1) == 1 and float(b1["x"][1, 0]) == 1  # the other slot: untouched
        with pytest.raises(SlotsHeldError, match="next batch .2. has no slot") as ei:
            next(r)  # the written batch is still held: its slot is not reused
        # the message names the batches held and the lines that took them
        assert (f"all 2 slots hold batches that are still referenced (batch 0 (slot 0, taken at "
                f"test_leases.py:{line}), batch 1 (slot 1, taken at test_leases.py:{line + 10}))") in str(ei.value)
        assert fr.slot_state(0) == READING
        kept = b["y"]
        b.release()  # the slot goes back; the kept view's memory may be written later
        del b1
        publish_when_free(fr, 2)
        b2 = next(r)
        assert value(b2) == 2 and float(b2["x"][1, 0]) == 2  # the producer's data, not the write
        del kept
        publish_when_free(fr, 3)
        b3 = next(r)
        assert value(b3) == 3


def test_torch_views_and_numpy_arrays_of_them_hold_the_slot(memfd):
    pytest.importorskip("torch")
    fr = published(memfd, 2, slots=2)
    with Ring(memfd, framework="torch", label="fake") as r:
        v = next(r)["y"].view(2, 2)
        n = v.numpy()[1:]
        del v
        assert value(next(r)) == 1
        assert fr.slot_state(0) == READING
        j = stream_past_held_slot(fr, r, 2, [n])
        assert int(n[0, 0]) == 0
        del n
        publish_when_free(fr, j)
        assert value(next(r)) == j
        assert fr.get("batches_read") == j


# ---- fork ----


def _child(batch, q):
    try:
        del batch
        gc.collect()
        q.put("ok")
    except BaseException as e:
        q.put(repr(e))


def test_forked_child_dropping_a_batch_gives_nothing_back(memfd, framework):
    fr = published(memfd, 1, slots=2)
    with Ring(memfd, framework=framework, label="fake") as r:
        b = next(r)
        ctx = multiprocessing.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=_child, args=(b, q))
        p.start()
        assert q.get(timeout=20) == "ok"
        p.join(20)
        assert p.exitcode == 0
        assert fr.slot_state(0) == READING and value(b) == 0
        del b
        fr.publish(1)
        assert value(next(r)) == 1
        assert fr.slot_state(0) == free(1)  # the parent's drop gave it back
