/* libgobatch: consume and leases: acquire the next batch, release held ones in any order, the
 * liveness checks of a wait (sections 3.3 - 3.5), and close. */
#include "gb_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---- consuming (sections 3.3 - 3.5) ---- */

/* The consumer is done with a held batch: count it read (section 2.4) and forget the hold. */
static void count_read(gb_ring *r, uint32_t slot) {
    atomic_fetch_add_explicit(a64(r, GB_H_BATCHES_READ), 1, memory_order_relaxed);
    atomic_fetch_add_explicit(a64(r, GB_H_BYTES_READ), r->g.slot_bytes, memory_order_relaxed);
    r->held_lap[slot] = 0;
    r->held_count--;
}

/* Batch j's tag in its position's grant (section 3.1). */
static inline uint32_t tag_of(const gb_ring *r, uint64_t j) {
    return (uint32_t)((j / r->g.slot_count) & GB_GRANT_TAG_MASK);
}

/* The grant of batch j: its slot and lap, or false while it has none (section 3.1). */
static inline bool grant_of(const gb_ring *r, uint64_t j, uint32_t *slot, uint32_t *lap) {
    uint64_t g = atomic_load_explicit(a64(r, GB_SLOT_BASE + (size_t)(j % r->g.slot_count) * GB_SLOT_STRIDE + GB_S_GRANT),
                                      memory_order_seq_cst);
    if (((uint32_t)g >> GB_GRANT_SLOT_BITS) != tag_of(r, j)) return false;
    *slot = (uint32_t)g & GB_GRANT_SLOT_MASK;
    *lap = (uint32_t)(g >> 32) & GB_LAP_MASK;
    return true;
}

/* Whether the producers are well ahead (section 3.3 step 4): the batch half a ring past the next
 * one to acquire has its slot and is READY already. Two loads. */
static bool well_ahead(const gb_ring *r) {
    uint32_t n = r->g.slot_count, slot, lap;
    uint64_t k = r->j + n / 2;
    if (n < 2 || (r->g.total_batches != 0 && k >= r->g.total_batches) || !grant_of(r, k, &slot, &lap)) return false;
    return atomic_load_explicit(slot_word(r, slot, GB_S_STATE), memory_order_seq_cst) == SLOT_WORD(lap, GB_SLOT_READY);
}

/* Wakes the producers waiting on every position whose wake was deferred, if they still wait. */
static void wake_flush(gb_ring *r) {
    for (uint32_t i = 0; i < r->wake_count; i++) {
        uint32_t pos = r->wake_pending[i];
        r->wake_deferred[pos] = false;
        if (atomic_load_explicit(slot_word(r, pos, GB_S_GRANT_WAITERS), memory_order_seq_cst) != 0)
            futex_wake_all(slot_word(r, pos, GB_S_GRANT));
    }
    r->wake_count = 0;
}

/* Section 3.3 step 4 for one held slot, in any order: FREE on the next lap, then grant it to
 * batch k = j + slot_count - held (this release's number is j - held, section 3.1) and wake
 * the producers waiting for that grant, or, while the ring is well ahead, leave the wake to
 * wake_flush (the next call that finds the ring no longer well ahead, or that is about to wait):
 * the producers then wake once for half a ring of grants instead of once per slot. */
static void release_slot(gb_ring *r, uint32_t slot) {
    uint32_t lap = r->held_lap[slot] - 1;
    uint64_t k = r->j + r->g.slot_count - r->held_count;
    uint32_t pos = (uint32_t)(k % r->g.slot_count);
    count_read(r, slot);
    atomic_store_explicit(slot_word(r, slot, GB_S_STATE), SLOT_WORD(lap + 1, GB_SLOT_FREE), memory_order_seq_cst);
    _Atomic uint64_t *g = a64(r, GB_SLOT_BASE + (size_t)pos * GB_SLOT_STRIDE + GB_S_GRANT);
    atomic_store_explicit(g, GRANT_WORD(slot, tag_of(r, k), lap + 1), memory_order_seq_cst);
    if (atomic_load_explicit(slot_word(r, pos, GB_S_GRANT_WAITERS), memory_order_seq_cst) != 0) {
        if (!well_ahead(r))
            futex_wake_all(slot_word(r, pos, GB_S_GRANT));
        else if (!r->wake_deferred[pos]) {
            r->wake_deferred[pos] = true;
            r->wake_pending[r->wake_count++] = pos;
        }
    }
    failpoint("consumer-released");
}

/* 3.5 step 1: a published error record fails the wait. GB_OK when there is none. */
static int error_check(gb_ring *r) {
    if (atomic_load_explicit(a32(r, GB_H_ERROR_STATE), memory_order_seq_cst) == GB_ERROR_SET) {
        uint32_t len = ld32(r, GB_H_ERROR_LEN);
        uint32_t who = ld32(r, GB_H_ERROR_PRODUCER);
        if (len > GB_MAX_ERROR_TEXT) len = GB_MAX_ERROR_TEXT;
        char text[GB_MAX_ERROR_TEXT + 1];
        memcpy(text, r->base + GB_H_ERROR_TEXT, len);
        text[len] = 0;
        if (who >= 1 && who <= GB_MAX_PRODUCERS)
            return fail(r, GB_EPRODUCER, "producer pid %u failed: %s",
                        ld32(r, ENTRY_FIELD(who - 1, GB_R_PID)), text);
        return fail(r, GB_EPRODUCER, "a producer failed: %s", text);
    }
    return GB_OK;
}

/* 3.5 step 2: a registered producer that died. With live producers left it is theirs to take
 * over (section 3.7): an error only once it is still not RECLAIMED takeover_grace after this
 * consumer first saw it dead. With none left it is an error at once, and the consumer's position
 * stays where it is (a supervisor may start a joining producer and call gb_next again).
 * GB_OK when there is nothing to report; *any_live says whether an entry is ACTIVE or CLAIMING
 * and alive. */
static int death_scan(gb_ring *r, bool *any_live) {
    *any_live = false;
    uint32_t dead_pid[GB_MAX_PRODUCERS] = {0};
    uint64_t dead_word[GB_MAX_PRODUCERS] = {0};
    for (uint32_t e = 0; e < GB_MAX_PRODUCERS; e++) {
        size_t off = ENTRY_FIELD(e, 0);
        /* The entry word: state, generation (reuses, section 2.6) and pid. */
        uint64_t word = atomic_load_explicit(a64(r, off + GB_R_STATE), memory_order_seq_cst);
        uint32_t st = (uint32_t)word & ((1u << GB_ENTRY_STATE_BITS) - 1u), pid = (uint32_t)(word >> 32);
        if (st != GB_ENTRY_ACTIVE && st != GB_ENTRY_CLAIMING) continue;
        /* A CLAIMING entry carries its pid (one CAS with the state, section 2.6) but maybe not yet
         * its start time: judge it by the pid alone. pid 0 is a pre-version writer mid-way. */
        if (st == GB_ENTRY_CLAIMING && pid == 0) {
            *any_live = true;
            continue;
        }
        uint64_t start = atomic_load_explicit(a64(r, off + GB_R_STARTTIME), memory_order_seq_cst);
        bool gone = st == GB_ENTRY_CLAIMING ? pid_gone(pid) : !gb_process_alive(pid, start);
        if (!gone)
            *any_live = true;
        else if (atomic_load_explicit(a64(r, off + GB_R_STATE), memory_order_seq_cst) == word) {
            dead_pid[e] = pid; /* unchanged: not DONE or RECLAIMED in between */
            dead_word[e] = word;
        }
    }
    int64_t now = now_ns();
    for (uint32_t e = 0; e < GB_MAX_PRODUCERS; e++) {
        if (dead_pid[e] == 0) {
            r->dead_since[e] = 0;
            continue;
        }
        if (!*any_live) return fail(r, GB_EDEAD, "producer pid %u died", dead_pid[e]);
        if (r->dead_since[e] == 0 || r->dead_word[e] != dead_word[e]) {
            r->dead_since[e] = now;
            r->dead_word[e] = dead_word[e];
        }
        else if (now - r->dead_since[e] >= (int64_t)GB_TAKEOVER_GRACE_NS)
            return fail(r, GB_EDEAD, "producer pid %u died and no live producer took over its batches within %u ms",
                        dead_pid[e], (unsigned)(GB_TAKEOVER_GRACE_NS / 1000000u));
    }
    return GB_OK;
}

/* The checks of 3.5 (consumer), run on every wake-up or timeout of a wait. GB_OK to keep waiting. */
static int liveness_checks(gb_ring *r) {
    int rc = error_check(r);
    if (rc != GB_OK) return rc;
    bool any_live;
    rc = death_scan(r, &any_live);
    if (rc != GB_OK) return rc;
    if (!any_live) {
        /* 3.5 step 3: a producer may have published its error and then stored FAILED after the
         * error check above; the caller re-loads the slot state. */
        rc = error_check(r);
        if (rc != GB_OK) return rc;
        return fail(r, GB_ETRUNC, "all producers finished before batch %llu",
                    (unsigned long long)(r->g.start_batch + r->j));
    }
    atomic_fetch_add_explicit(a64(r, GB_H_CONSUMER_HEARTBEAT), 1, memory_order_relaxed);
    return GB_OK;
}

static int bad_slot_state(gb_ring *r, uint32_t slot, uint32_t v, uint32_t lap) {
    static const char *st[] = GB_SLOT_NAMES;
    return fail(r, GB_EPROTO, "protocol error: slot %u is %s(lap %u) while the consumer waits for batch %llu (READY(lap %u))",
                slot, st[v & GB_SLOT_STATE_MASK], v >> GB_SLOT_STATE_BITS, (unsigned long long)(r->g.start_batch + r->j), lap);
}

/* The calls that consume: only the registering process, on a ring not closed. A child made by
 * fork(2) sees fork_generation changed (pthread_atfork) and is then held to its pid, so the
 * registering process makes no system call here. (A child made by a raw clone without the
 * atfork handlers, vfork or posix_spawn, runs no Python before exec.) */
static int check_owner(gb_ring *r) {
    if (!r || !r->registered) return GB_ECLOSED;
    if (r->fork_gen != atomic_load_explicit(&fork_generation, memory_order_relaxed) && getpid() != r->owner_pid)
        return fail(r, GB_EFOREIGN, "this ring belongs to pid %d; a forked child cannot use it", (int)r->owner_pid);
    return GB_OK;
}

static int release_one(gb_ring *r, uint32_t slot) {
    if (slot >= r->g.slot_count || r->held_lap[slot] == 0)
        return fail(r, GB_ENOTHELD, "slot %u is not held by this consumer", slot);
    release_slot(r, slot);
    return GB_OK;
}

static int acquire_next(gb_ring *r, int budget_ms) {
    if (r->wake_count != 0 && !well_ahead(r)) wake_flush(r);
    int lost = segment_lost(r);
    if (lost != GB_OK) return lost;
    if (r->g.total_batches != 0 && r->j >= r->g.total_batches) return GB_END;

    /* Every slot holds a batch this consumer has not released: the next batch has no slot and
     * no producer can give it one, so a wait would never end (section 3.3 step 5). */
    if (r->held_count >= r->g.slot_count)
        return fail(r, GB_EHELD, "the next batch (%llu) has no slot: all %u slots hold batches this consumer has not released",
                    (unsigned long long)(r->g.start_batch + r->j), r->g.slot_count);
    uint32_t slot, lap;
    if (!grant_of(r, r->j, &slot, &lap))
        return fail(r, GB_EPROTO, "protocol error: position %u has no grant for batch %llu while the consumer holds %u of %u slots",
                    (uint32_t)(r->j % r->g.slot_count), (unsigned long long)(r->g.start_batch + r->j), r->held_count,
                    r->g.slot_count);
    uint32_t want = SLOT_WORD(lap, GB_SLOT_READY);
    uint32_t free_now = SLOT_WORD(lap, GB_SLOT_FREE), writing = SLOT_WORD(lap, GB_SLOT_WRITING);
    _Atomic uint32_t *w = slot_word(r, slot, GB_S_STATE);
    _Atomic uint32_t *waiters = slot_word(r, slot, GB_S_WAITERS);

    uint32_t v = atomic_load_explicit(w, memory_order_seq_cst);
    if (v != want) {
        wake_flush(r); /* before any wait: a deferred wake may be what the batch needs */
        int64_t t0 = now_ns();
        int64_t deadline = t0 + (int64_t)(budget_ms > 0 ? budget_ms : 0) * 1000000ll;
        int rc = GB_TIMEOUT;
        for (;;) {
            if (v != free_now && v != writing) {
                rc = bad_slot_state(r, slot, v, lap);
                break;
            }
            int64_t left = deadline - now_ns();
            bool interrupted = false;
            atomic_fetch_add_explicit(waiters, 1, memory_order_seq_cst);
            v = atomic_load_explicit(w, memory_order_seq_cst);
            if (v != want && left > 0) interrupted = futex_wait(w, v, left < GB_WAIT_SLICE_NS ? left : GB_WAIT_SLICE_NS);
            atomic_fetch_sub_explicit(waiters, 1, memory_order_seq_cst);
            v = atomic_load_explicit(w, memory_order_seq_cst);
            if (v == want) {
                rc = GB_OK;
                break;
            }
            rc = liveness_checks(r);
            if (rc != GB_OK) {
                /* A batch published before the failure is delivered first (3.5 step 1). */
                v = atomic_load_explicit(w, memory_order_seq_cst);
                if (v == want) rc = GB_OK;
                break;
            }
            if (interrupted || now_ns() >= deadline) {
                rc = fail(r, GB_TIMEOUT, "%s waiting for batch %llu", interrupted ? "interrupted by a signal" : "timed out",
                          (unsigned long long)(r->g.start_batch + r->j));
                break;
            }
        }
        atomic_fetch_add_explicit(a64(r, GB_H_CONSUMER_WAIT_NS), (uint64_t)(now_ns() - t0), memory_order_relaxed);
        if (rc != GB_OK) { /* a truncation zeroes the words the checks read: name the cause */
            lost = rc == GB_TIMEOUT ? GB_OK : segment_lost(r);
            return lost != GB_OK ? lost : rc;
        }
    } else {
        /* The batch is ready without a wait, so no wait ran the checks: scan the registry at
         * least every wait slice all the same, so that a dead producer is reported while its
         * siblings keep ahead (3.5). One clock read per batch otherwise. */
        int64_t now = now_ns();
        if (now >= r->next_scan_ns) {
            bool any_live;
            int rc = death_scan(r, &any_live);
            if (rc != GB_OK) return rc; /* scanned again next call: the death stays reported */
            r->next_scan_ns = now + GB_WAIT_SLICE_NS;
        }
    }
    /* v == READY(lap), loaded seq_cst (an acquire): the payload and seq are visible. */
    atomic_store_explicit(w, SLOT_WORD(lap, GB_SLOT_READING), memory_order_seq_cst);
    failpoint("consumer-reading");
    r->held_lap[slot] = lap + 1;
    r->held_count++;
    uint64_t expect = r->g.start_batch + r->j;
    r->j++;
    uint64_t seq = atomic_load_explicit(a64(r, GB_SLOT_BASE + (size_t)slot * GB_SLOT_STRIDE + GB_S_SEQ),
                                        memory_order_relaxed);
    if (r->named) { /* cut while this call waited or touched the slot: not delivered */
        lost = segment_lost(r);
        if (lost != GB_OK) return lost;
    }
    if (seq != expect)
        return fail(r, GB_EPROTO, "protocol error: slot %u holds batch %llu, expected batch %llu", slot,
                    (unsigned long long)seq, (unsigned long long)expect);
    return (int)slot;
}

int gb_next(gb_ring *r, int budget_ms) {
    int rc = check_owner(r);
    return rc != GB_OK ? rc : acquire_next(r, budget_ms);
}

int gb_release(gb_ring *r, uint32_t slot) {
    int rc = check_owner(r);
    return rc != GB_OK ? rc : release_one(r, slot);
}

int gb_release_next(gb_ring *r, int release, int budget_ms) {
    int rc = check_owner(r);
    if (rc == GB_OK && release >= 0) rc = release_one(r, (uint32_t)release);
    return rc != GB_OK ? rc : acquire_next(r, budget_ms);
}

uint32_t gb_held(const gb_ring *r) { return r && r->registered ? r->held_count : 0; }

void gb_discard(gb_ring *r) {
    if (!r) return;
    guard_drop(&r->guard[0]); /* before the unmap: the range may be reused at once */
    guard_drop(&r->guard[1]);
    if (r->base) munmap(r->base, r->map_len);
    if (r->fd >= 0) close(r->fd);
    free(r);
}

void gb_close(gb_ring *r) {
    if (!r) return;
    if (r->registered && getpid() == r->owner_pid) {
        /* Slots still held stay READING: their batches may still be referenced (a kept tensor
         * never changes), and the producers stop at CLOSED, so none is written again. */
        for (uint32_t s = 0; s < r->g.slot_count; s++)
            if (r->held_lap[s] != 0) count_read(r, s);
        atomic_store_explicit(a64(r, GB_H_CONSUMER_STATE), CLAIM_WORD(GB_CONSUMER_CLOSED, r->owner_pid), memory_order_seq_cst);
        /* Every sleeper counted itself in waiters before it slept (section 3.4), and the store of
         * CLOSED precedes these loads (seq_cst): a word nobody waits on needs no system call.
         * Producers sleep on slot words and on positions' grant words. */
        r->wake_count = 0;
        for (uint32_t s = 0; s < r->g.slot_count; s++) {
            if (atomic_load_explicit(slot_word(r, s, GB_S_WAITERS), memory_order_seq_cst) != 0)
                futex_wake_all(slot_word(r, s, GB_S_STATE));
            if (atomic_load_explicit(slot_word(r, s, GB_S_GRANT_WAITERS), memory_order_seq_cst) != 0)
                futex_wake_all(slot_word(r, s, GB_S_GRANT));
        }
    }
    gb_discard(r);
}
