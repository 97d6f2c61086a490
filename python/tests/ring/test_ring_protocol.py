"""The C consumer (libgobatch) against rings written by tests/fakering.py: the protocol's edge
cases that a healthy shmloader never produces (corrupt headers, dead or lying producers)."""

from __future__ import annotations

import os
import subprocess
import threading
import time

import numpy as np
import pytest

import gobatch
from gobatch import LoaderError, RingError
from gobatch._ring import Ring
from fakering import FakeRing, starttime
from synthetic import wait_for

pytestmark = pytest.mark.timeout(60)

SPEC = {"x": ((4, 3), "float32"), "y": ((4,), "int64")}


def dead_process() -> tuple[int, int]:
    """(pid, starttime) of a process that has exited and been reaped."""
    p = subprocess.Popen(["sleep", "5"])
    st = starttime(p.pid)
    p.kill()
    p.wait()
    return p.pid, st


def producer_thread(fr: FakeRing, n: int, delay: float = 0.0) -> threading.Thread:
    def run() -> None:
        for j in range(n):
            deadline = time.monotonic() + 10
            while fr.slot_state(j % fr.slots) != (j // fr.slots) << 2:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.0005)
            if delay:
                time.sleep(delay)
            fr.publish(j)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_stream_order_values_and_laps(memfd):
    fr = FakeRing(memfd, SPEC, slots=3, total_batches=11, start_batch=100, batch_size=4)
    with Ring(memfd, label="fake") as r:
        assert len(r) == 11 and r.slots == 3 and r.batch_size == 4 and r.start_batch == 100
        assert list(r.specs) == ["x", "y"]
        t = producer_thread(fr, 11)
        seen = []
        for b in r:
            j = len(seen)
            assert set(b) == {"x", "y"}
            assert b["x"].shape == (4, 3) and b["x"].dtype == np.float32
            assert b["y"].shape == (4,) and b["y"].dtype == np.int64
            assert (b["x"] == j).all() and (b["y"] == j).all()
            seen.append(j)
        t.join()
        assert seen == list(range(11))
        with pytest.raises(StopIteration):
            next(r)
        s = r.stats()
        assert s["batches"] == 11 and s["bytes"] == 11 * fr.slot_bytes and s["next_index"] == 111
    assert fr.get("consumer_state") == 3  # CLOSED
    assert fr.get("batches_read") == 11


def test_out_of_order_publish_is_read_in_stream_order(memfd):
    fr = FakeRing(memfd, SPEC, slots=4, total_batches=4)
    for j in (3, 1, 2):
        fr.publish(j)
    with Ring(memfd, label="fake") as r:
        it = iter(r)
        got = []
        t = threading.Timer(0.2, fr.publish, args=(0,))
        t.start()
        for b in it:
            got.append(int(b["y"][0]))
        assert got == [0, 1, 2, 3]


def test_release_frees_slot_on_next_lap_and_close_releases(memfd):
    fr = FakeRing(memfd, SPEC, slots=2)
    fr.publish(0)
    fr.publish(1)
    r = Ring(memfd, label="fake")
    next(r)
    assert fr.slot_state(0) == (0 << 2) | 3  # READING(0)
    next(r)
    assert fr.slot_state(0) == (1 << 2) | 0  # FREE(1)
    assert fr.slot_state(1) == (0 << 2) | 3
    r.close()
    assert fr.slot_state(1) == (1 << 2) | 0
    assert fr.get("batches_read") == 2 and fr.get("consumer_state") == 3
    r.close()  # idempotent
    with pytest.raises(LoaderError, match="closed"):
        next(r)


def _wchan(tid: int) -> str:
    try:
        with open(f"/proc/self/task/{tid}/wchan") as f:
            return f.read()
    except OSError:
        return ""


def test_consumer_sleeps_on_the_futex_the_publish_wakes(memfd):
    """A blocked consumer sleeps in FUTEX_WAIT (the kernel's wait channel says so), where the
    publish's FUTEX_WAKE ends its wait, rather than polling; it then takes the batch. How soon
    is measured by benchmarks/ring_bench.py, not asserted here."""
    fr = FakeRing(memfd, SPEC, slots=2)
    with Ring(memfd, label="fake") as r:
        for j in range(10):
            got: list = []
            tid: list = []

            def take() -> None:
                tid.append(threading.get_native_id())
                got.append(next(r))

            th = threading.Thread(target=take)
            th.start()
            wait_for(lambda: bool(tid) and "futex" in _wchan(tid[0]), 30, "the consumer to sleep on the futex")
            assert not got
            fr.publish(j)
            th.join(60)
            assert not th.is_alive() and int(got[0]["y"][0]) == j
        assert r.stats()["consumer_wait_s"] > 0


def test_heartbeat_advances_while_waiting(memfd):
    fr = FakeRing(memfd, SPEC, slots=2)
    with Ring(memfd, label="fake") as r:
        threading.Timer(0.6, fr.publish, args=(0,)).start()
        next(r)
        assert fr.get("consumer_heartbeat") >= 2  # one per <= 100 ms wait slice


def test_error_record_is_raised_after_ready_batches(memfd):
    fr = FakeRing(memfd, SPEC, slots=4)
    fr.publish(0)
    fr.set_error("zarr chunk satellite.zarr/data/0.0.0.0: crc mismatch")
    with Ring(memfd, label="fake") as r:
        b = next(r)  # published before the failure: delivered first
        assert int(b["y"][0]) == 0
        with pytest.raises(LoaderError, match="crc mismatch") as ei:  # no producer: a wait would not end
            next(r)
        assert not isinstance(ei.value, RingError)
        with pytest.raises(LoaderError, match="crc mismatch"):
            next(r)  # stays failed


def test_dead_producer_is_detected(memfd):
    fr = FakeRing(memfd, SPEC, slots=4)
    pid, st = dead_process()
    fr.register_producer(0, pid, st)
    with Ring(memfd, label="fake") as r:
        with pytest.raises(LoaderError, match=f"producer pid {pid} died"):  # how soon: make faults
            next(r)


def test_reused_pid_counts_as_dead(memfd):
    """A registry entry whose pid is alive but has another start time is a dead producer."""
    fr = FakeRing(memfd, SPEC, slots=4)
    fr.register_producer(0, os.getpid(), starttime(os.getpid()) + 1)
    with Ring(memfd, label="fake") as r:
        with pytest.raises(LoaderError, match="died"):
            next(r)


def test_zombie_producer_counts_as_dead(memfd):
    fr = FakeRing(memfd, SPEC, slots=4)
    p = subprocess.Popen(["true"])
    st = starttime(p.pid)
    deadline = time.monotonic() + 5
    while open(f"/proc/{p.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    fr.register_producer(0, p.pid, st)
    try:
        with Ring(memfd, label="fake") as r:
            with pytest.raises(LoaderError, match="died"):
                next(r)
    finally:
        p.wait()


def test_truncated_stream(memfd):
    fr = FakeRing(memfd, SPEC, slots=4, total_batches=10)
    fr.publish(0)
    fr.producer_state(0, 3)  # DONE
    with Ring(memfd, label="fake") as r:
        next(r)
        with pytest.raises(LoaderError, match="all producers finished before batch 1"):
            next(r)


def test_seq_mismatch_is_a_protocol_error(memfd):
    fr = FakeRing(memfd, SPEC, slots=4, start_batch=5)
    fr.publish(0, seq=6)
    with Ring(memfd, label="fake") as r:
        with pytest.raises(RingError, match="holds batch 6, expected batch 5"):
            next(r)


def test_wrong_lap_is_a_protocol_error(memfd):
    fr = FakeRing(memfd, SPEC, slots=4)
    base = gobatch._protocol.SLOT_BASE
    fr.mm[base : base + 4] = ((5 << 2) | 2).to_bytes(4, "little")  # READY(lap 5) where lap 0 is due
    with Ring(memfd, label="fake") as r:
        with pytest.raises(RingError, match=r"slot 0 is READY\(lap 5\)"):
            next(r)


def test_second_consumer_refused(memfd):
    FakeRing(memfd, SPEC)
    with Ring(memfd, label="fake"):
        with pytest.raises(RingError, match=f"already has a consumer, pid {os.getpid()}"):
            Ring(memfd, label="fake")


def test_dead_attached_consumer_refused_naming_it(memfd):
    """A consumer that died ATTACHED ends its ring (its producers stop, PROTOCOL.md 3.5): the next
    attach is refused at once, naming the dead pid, rather than taking the ring over (the dead
    consumer's held slots and position cannot be known)."""
    fr = FakeRing(memfd, SPEC)
    pid, st = dead_process()
    fr.set(consumer_state=2, consumer_pid=pid, consumer_starttime=st)
    with pytest.raises(RingError, match=f"the ring's consumer pid {pid} died after attaching"):
        Ring(memfd, label="fake", timeout=600)  # refused at once: a wait would outlast the test's timeout


def test_not_ready_times_out(memfd):
    FakeRing(memfd, SPEC, ready=False)
    with pytest.raises(RingError, match="not ready"):
        Ring(memfd, label="fake", timeout=0.3)


def test_creator_died_during_creation(memfd):
    fr = FakeRing(memfd, SPEC, ready=False)
    pid, st = dead_process()
    fr.set(creator_pid=pid, creator_starttime=st)
    with pytest.raises(RingError, match=f"creator \\(pid {pid}\\) died"):
        Ring(memfd, label="fake", timeout=5)


def test_header_written_late_is_waited_for(memfd):
    """A creator has reserved the file but not written the header yet (magic still 0)."""
    os.posix_fallocate(memfd, 0, 1 << 20)
    result = {}

    def consume() -> None:
        try:
            with Ring(memfd, label="fake", timeout=5) as r:
                result["batch"] = int(next(r)["y"][0])
        except Exception as e:  # reported below
            result["error"] = e

    th = threading.Thread(target=consume)
    th.start()
    time.sleep(0.2)
    fr = FakeRing(memfd, SPEC, ready=False)
    time.sleep(0.1)
    fr.make_ready()
    fr.publish(0)
    th.join(10)
    assert result == {"batch": 0}


# ---- the batch description (PROTOCOL.md 2.9) ----


def test_description_nests_each_batch_over_the_slot(memfd):
    """A ring whose description has a view hands out nested batches whose arrays are the
    slot's own (the flat batch's), with the constants added, and says its order and epochs."""
    desc = (b'{"order":"epochs","epoch_batches":5,"samples":20,"view":[{"key":["nest","a"],"tensor":"x"},'
            b'{"key":["nest","names"],"strings":["p","q"]},{"key":["renamed"],"tensor":"y"},{"key":["k"],"int":-2}],'
            b'"warnings":["one","two"]}')
    fr = FakeRing(memfd, SPEC, total_batches=2, batch_size=4, description=desc)
    with Ring(memfd, label="fake") as r:
        d = r.description
        assert (d.order, d.epoch_batches, d.samples, d.warnings) == ("epochs", 5, 20, ("one", "two"))
        fr.publish(0)
        b = next(r)
        assert list(b) == ["renamed", "nest", "k"]
        assert b["k"] == -2 and list(b["nest"]["names"]) == ["p", "q"]
        assert b["nest"]["a"].shape == (4, 3) and (b["nest"]["a"] == 0).all() and (b["renamed"] == 0).all()
        # zero-copy: the nested array is the ring's mapping of a slot, as the flat batch's is
        base = np.frombuffer(r._mm, dtype=np.uint8, count=1).ctypes.data + fr.payload_offset
        assert b["nest"]["a"].ctypes.data in {base + k * fr.stride for k in range(fr.slots)}


def test_no_description_is_flat(memfd):
    fr = FakeRing(memfd, SPEC, total_batches=1)
    with Ring(memfd, label="fake") as r:
        assert r.description.order is None and not r.description.view
        fr.publish(0)
        assert list(next(r)) == ["x", "y"]


@pytest.mark.parametrize("desc,message", [
    (b"[1]", "description: a JSON list, not an object"),
    (b"{", "description: not JSON"),
    (b'{"order":"sideways"}', "order: 'sideways', not 'stream' or 'epochs'"),
    (b'{"epoch_batches":-1}', "epoch_batches: -1, not an integer >= 0"),
    (b'{"view":[{"key":["a"],"tensor":"nope"}]}', "view[0].tensor: 'nope' is not a tensor of the ring"),
    (b'{"view":[{"key":[],"tensor":"x"}]}', "view[0].key: [], not an array of 1 to 8 non-empty strings"),
    (b'{"view":[{"key":["a"],"tensor":"x"},{"key":["a","b"],"int":1}]}', "view[1].key: ['a', 'b'] is, holds or lies under the key ['a']"),
    (b'{"view":[{"key":["a"]}]}', "view[0]: has none of tensor, strings, int"),
    (b'{"warnings":[1]}', "warnings: not an array of strings"),
    (b"\xff\xfe", "description: byte 0 is not UTF-8"),
])
def test_bad_description_refused(memfd, desc, message):
    FakeRing(memfd, SPEC, description=desc)
    with pytest.raises(RingError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")):
        Ring(memfd, label="fake", timeout=1)


# ---- refusing bad segments before any offset from them is used ----

BAD_HEADERS = [
    ({"magic": 0x4141414141414141}, "not a gobatch segment: magic 0x4141414141414141"),
    # Layout 1: the fixed job counters of builds before the counter table (PROTOCOL.md 2.5a).
    ({"layout_version": 1}, "incompatible gobatch ring: layout_version 1, this build reads 4"),
    ({"layout_version": 2}, "incompatible gobatch ring: layout_version 2, this build reads 4"),
    # Layout 3: a header of 16384 bytes, without the batch description (PROTOCOL.md 2.9).
    ({"layout_version": 3}, "incompatible gobatch ring: layout_version 3, this build reads 4"),
    ({"header_bytes": 16384}, "header_bytes 16384, this build reads 32768"),
    ({"description_len": 16385}, "description_len 16385 (must be 0 .. 16384)"),
    ({"slot_header_bytes": 64}, "slot_header_bytes 64, this build reads 128"),
    ({"endian_check": 0x04030201}, "endian_check 0x04030201, this build reads 0x01020304"),
    ({"word_bytes": 4}, "word_bytes 4, this build reads 8"),
    ({"slot_count": 0}, "slot_count 0"),
    ({"slot_count": 5000}, "slot_count 5000"),
    ({"tensor_count": 0}, "tensor_count 0"),
    ({"tensor_count": 33}, "tensor_count 33"),
    ({"payload_align": 512}, "payload_align 512"),
    ({"payload_offset": 12288 + 64}, "payload_offset 12352 is not a multiple"),
    ({"payload_offset": 0}, "payload_offset 0 is below the end of the slot headers"),
    ({"slot_stride": 4096 * 3}, "segment_bytes"),
    ({"slot_stride": 1 << 62, "payload_offset": 1 << 62}, "segment_bytes"),
    ({"slot_bytes": 8192}, "slot_stride 4096 is smaller than slot_bytes 8192"),
    ({"segment_bytes": 1 << 40}, "segment_bytes"),
    ({"slot_headers_offset": 4096}, "slot_headers_offset 4096"),
    ({"state": 7}, "state 7"),
]


@pytest.mark.parametrize("fields,message", BAD_HEADERS, ids=[next(iter(f)) + str(i) for i, (f, _) in enumerate(BAD_HEADERS)])
def test_bad_header_refused(memfd, fields, message):
    fr = FakeRing(memfd, SPEC)
    fr.set(**fields)
    with pytest.raises(RingError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Ring(memfd, label="fake", timeout=1)
    assert fr.get("consumer_state") == 0  # refused before registering


BAD_TENSORS = [
    (1, {"dtype": 13}, "tensor 'y': dtype code 13"),
    (1, {"dtype": 0}, "dtype code 0"),
    (0, {"ndim": 0}, "tensor 'x': ndim 0"),
    (0, {"ndim": 9}, "ndim 9"),
    (0, {"nbytes": 47}, "tensor 'x': nbytes 47 != product"),
    (0, {"shape1": 1 << 62}, "nbytes 48 != product"),
    (1, {"offset": 65}, "offset 65 is not a multiple of 64"),
    (1, {"offset": 4096}, "exceeds slot_bytes"),
    (1, {"offset": 0}, "overlaps tensor 'x'"),
    (1, {"name": b"x"}, "repeats tensor 0"),
    (1, {"name": b"bad-name"}, "name has byte 0x2d"),
    (1, {"name": b""}, "name is empty"),
    (1, {"name": b"a" * 32}, "not NUL-terminated"),
    (1, {"name": b"ab\0c"}, "padding is not NUL"),
]


# ---- the job's named counters (PROTOCOL.md 2.5a, 2.8) ----

P = gobatch._protocol
COUNTERS = [("widgets_made", P.COUNTER_KIND_COUNTER, P.SCOPE_JOB), ("queue_depth", P.COUNTER_KIND_GAUGE, P.SCOPE_JOB),
            ("bolts_per_source", P.COUNTER_KIND_COUNTER, P.SCOPE_SOURCE), ("chunks_decoded", P.COUNTER_KIND_COUNTER, P.SCOPE_SOURCE)]


def test_stats_show_counters_by_the_names_in_the_ring(memfd):
    """stats() shows whatever counters the ring's table names (a writer that is not gobatch's Go
    producer, with names the consumer has never seen): a number per job counter, a list per
    per-source counter, all lists as long as the last source any of them counted for."""
    fr = FakeRing(memfd, SPEC, counters=COUNTERS)
    fr.add_counter("widgets_made", 7)
    fr.add_counter("widgets_made", 5)
    fr.add_counter("queue_depth", 3)
    fr.add_counter("bolts_per_source", 9, source=2)
    fr.add_counter("chunks_decoded", 4, source=0)
    with Ring(memfd, label="fake") as r:
        s = r.stats()
        assert (s["widgets_made"], s["queue_depth"]) == (12, 3)
        assert s["bolts_per_source"] == [0, 0, 9] and s["chunks_decoded"] == [4, 0, 0]
        assert s["missing_chunk_fraction"] == []  # no chunks_missing counter in this table
        fr.add_counter("widgets_made", 1)
        assert r.stats()["widgets_made"] == 13
        assert s["batches"] == 0 and s["cache_hit_rate"] == 0.0  # a ratio without its counters is 0


def test_stats_without_counters(memfd):
    FakeRing(memfd, SPEC)
    with Ring(memfd, label="fake") as r:
        s = r.stats()
        assert s["cache_hit_rate"] == 0.0 and s["segments_per_batch"] == 0.0 and "cache_hits" not in s


BAD_COUNTERS = [
    (None, {"counter_count": P.MAX_COUNTERS + 1}, "counter_count 65 (must be 0 .. 64)"),
    (0, {"kind": 3}, "counter 'widgets_made': kind 3"),
    (1, {"scope": 2}, "counter 'queue_depth': scope 2"),
    (0, {"width": 2}, "counter 'widgets_made': width 2 for scope 0"),
    (2, {"width": P.MAX_COUNTER_SOURCES + 1}, "counter 'bolts_per_source': width 33"),
    (1, {"first": 0}, "counter 'queue_depth': values 0 .. 0 (must start at 1"),
    (3, {"first": P.MAX_COUNTER_VALUES - 8}, "must start at 34 and end within 768"),
    (1, {"name": b"widgets_made"}, "repeats counter 0"),
    (1, {"name": b"queue-depth"}, "name has byte 0x2d"),
    (1, {"name": b""}, "name is empty"),
    (1, {"name": b"q" * 24}, "not NUL-terminated"),
    (1, {"name": b"ab\0c"}, "padding is not NUL"),
]


BAD_ENTRIES = [("tensor", *bad) for bad in BAD_TENSORS] + [("counter", *bad) for bad in BAD_COUNTERS]


@pytest.mark.parametrize("table,k,fields,message", BAD_ENTRIES,
                         ids=[f"{table}-{next(iter(f))}{i}" for i, (table, _, f, _) in enumerate(BAD_ENTRIES)])
def test_bad_table_entry_refused(memfd, table, k, fields, message):
    """A corrupt tensor descriptor (2.7) or counter descriptor (2.8), or counter_count, refuses
    the attach before the consumer registers."""
    fr = FakeRing(memfd, SPEC, counters=COUNTERS)
    if k is None:
        fr.set(**fields)
    else:
        (fr.set_tensor if table == "tensor" else fr.set_counter)(k, **fields)
    with pytest.raises(RingError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Ring(memfd, label="fake", timeout=1)
    assert fr.get("consumer_state") == 0


def test_file_shorter_than_segment_refused(memfd):
    fr = FakeRing(memfd, SPEC)
    os.ftruncate(memfd, fr.segment_bytes - 4096)
    with pytest.raises(RingError, match=f"the file has {fr.segment_bytes - 4096} bytes, segment_bytes is {fr.segment_bytes}"):
        Ring(memfd, label="fake", timeout=1)


def test_tiny_file_refused(memfd):
    os.write(memfd, b"GOBATCH1" + b"\0" * 92)
    with pytest.raises(RingError, match="not a gobatch segment: too small \\(100 bytes"):
        Ring(memfd, label="fake")


def test_attach_refuses_crafted_file_in_dev_shm(ring_name):
    path = f"/dev/shm/gobatch-{ring_name}"
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        fr = FakeRing(fd, SPEC, named=True)
        fr.set(layout_version=7)
        fr.close()
    finally:
        os.close(fd)
    with pytest.raises(RingError, match=f"ring '{ring_name}': incompatible gobatch ring: layout_version 7"):
        gobatch.attach(ring_name)
    with open(path, "r+b") as f:  # garbage of the right size
        f.write(os.urandom(8192))
    with pytest.raises(RingError, match="not a gobatch segment: magic"):
        gobatch.attach(ring_name)


def test_attach_missing_and_invalid_names(ring_name):
    with pytest.raises(RingError, match=f"no gobatch ring named '{ring_name}'"):
        gobatch.attach(ring_name)
    with pytest.raises(ValueError, match="invalid ring name"):
        gobatch.attach("../etc/passwd")


def test_named_ring_of_dead_creator_is_unlinked_on_close(ring_name):
    path = f"/dev/shm/gobatch-{ring_name}"
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    fr = FakeRing(fd, SPEC, named=True)
    os.close(fd)
    fr.publish(0)
    r = gobatch.attach(ring_name)
    next(r)
    r.close()
    assert os.path.exists(path)  # the creator (this process) is alive
    r = None
    pid, st = dead_process()
    fr.set(creator_pid=pid, creator_starttime=st, consumer_state=0)
    r = gobatch.attach(ring_name)
    r.close()
    assert not os.path.exists(path)


def test_named_ring_whose_creator_died_during_creation_is_removed(ring_name):
    path = f"/dev/shm/gobatch-{ring_name}"
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    fr = FakeRing(fd, SPEC, named=True, ready=False)
    os.close(fd)
    pid, st = dead_process()
    fr.set(creator_pid=pid, creator_starttime=st)
    with pytest.raises(RingError, match="died before the ring became ready"):
        gobatch.attach(ring_name)
    assert not os.path.exists(path)
