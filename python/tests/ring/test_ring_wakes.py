"""Release wakes of the C consumer (PROTOCOL.md 3.3 step 4, 3.4): a producer sleeping on the
grant word of the position that a release grants a slot to is woken at once unless the ring is
half a ring ahead, then once the read-ahead falls below half a ring, before the consumer waits, or
at close, never later. The producer is FakeRing.sleep_on in a thread: a real FUTEX_WAIT on the
position's grant word. The first release (of slot 0, batch 0) grants batch SLOTS, position 0."""

from __future__ import annotations

import threading
import time
from typing import List

import pytest

from gobatch._ring import Ring
from fakering import FakeRing

pytestmark = pytest.mark.timeout(60)

SPEC = {"y": ((4,), "int64")}
SLOTS = 8
SLEEP_S = 20.0  # the sleeper's own timeout: a sleep it ends is not a wake


class Sleeper:
    """A thread asleep on one position's grant word; ``result`` is sleep_on's answer once it returned."""

    def __init__(self, fr: FakeRing, slot: int) -> None:
        self.result: List[str] = []
        self.tid = 0
        self.woke_at = 0.0
        self.thread = threading.Thread(target=self._run, args=(fr, slot), daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self._asleep():
            assert time.monotonic() < deadline, "the sleeper did not reach FUTEX_WAIT"
            time.sleep(0.005)

    def _run(self, fr: FakeRing, slot: int) -> None:
        self.tid = threading.get_native_id()
        self.result.append(fr.sleep_on(slot, SLEEP_S, grant=True))
        self.woke_at = time.monotonic()

    def _asleep(self) -> bool:
        if not self.tid:
            return False
        try:
            with open(f"/proc/self/task/{self.tid}/wchan") as f:
                return "futex" in f.read()
        except OSError:
            return False

    def woken_within(self, seconds: float) -> bool:
        """Whether the wake ended the sleep within seconds (for "not yet" checks)."""
        self.thread.join(seconds)
        return self.result == ["woken"]

    def woken(self) -> bool:
        """Whether the sleep was ended by a wake, not by its own timeout (SLEEP_S): an event,
        however long the machine takes to run the woken thread."""
        self.thread.join(SLEEP_S + 30)
        return self.result == ["woken"]


def ring_with(memfd: int, published: int) -> FakeRing:
    fr = FakeRing(memfd, SPEC, slots=SLOTS)
    for j in range(published):
        fr.publish(j)
    return fr


def test_release_wakes_at_once_when_the_ring_is_not_half_ahead(memfd):
    fr = ring_with(memfd, 2)
    with Ring(memfd, label="fake") as r:
        b = next(r)
        sleeper = Sleeper(fr, 0)
        del b
        next(r)  # gives slot 0 back to batch 8: batch 1 + 4 is not READY, so it wakes at once
        assert sleeper.woken(), sleeper.result
        assert fr.grant(SLOTS) == (0, 1)


def test_release_wake_waits_while_half_a_ring_is_ready_and_comes_once_it_is_not(memfd):
    fr = ring_with(memfd, SLOTS)
    with Ring(memfd, label="fake") as r:
        b = next(r)
        sleeper = Sleeper(fr, 0)
        del b
        b = next(r)  # gives slot 0 back while batches 1 .. 7 are READY: the wake is deferred
        assert not sleeper.woken_within(0.3) and sleeper.result == []
        assert fr.slot_state(0) == 1 << 2 and fr.grant(SLOTS) == (0, 1)  # FREE(lap 1), granted, all the same
        b = next(r)  # batch 2: batch 6 READY, still deferred
        b = next(r)  # batch 3: batch 7 READY, still deferred
        assert sleeper.result == []
        b = next(r)  # batch 4: batch 8 (slot 0, lap 1) is not READY: the deferred wake goes out
        assert sleeper.woken(), sleeper.result
        del b


def test_a_deferred_wake_goes_out_at_close(memfd):
    fr = ring_with(memfd, SLOTS)
    r = Ring(memfd, label="fake")
    b = next(r)
    sleeper = Sleeper(fr, 0)
    del b
    b = next(r)
    assert not sleeper.woken_within(0.3)
    r.close()
    assert sleeper.woken(), sleeper.result
    del b


def test_a_deferred_wake_goes_out_before_the_consumer_waits(memfd):
    fr = FakeRing(memfd, SPEC, slots=SLOTS)
    for j in (0, 1, 5, 6, 7):  # published out of order (several writers): 2, 3 and 4 not yet
        fr.publish(j)
    with Ring(memfd, label="fake") as r:
        b = next(r)
        sleeper = Sleeper(fr, 0)
        del b
        b = next(r)  # batch 1; batch 5 is READY: slot 0's wake is deferred
        assert not sleeper.woken_within(0.3)
        published_at: List[float] = []
        timer = threading.Timer(1.0, lambda: (published_at.append(time.monotonic()), fr.publish(2)))
        timer.start()
        b = next(r)  # batch 2 is not READY: the consumer wakes slot 0's sleeper, then waits
        assert int(b["y"][0]) == 2
        assert sleeper.woken_within(0.0) and sleeper.woke_at < published_at[0], (sleeper.result, sleeper.woke_at, published_at)
        timer.join()
        del b
