/* libgobatch's own declarations, shared by its source files and exported by none of them: the
 * ring handle, the protocol's word accessors, and the helpers more than one file uses. The
 * library's API is gobatch.h; its files, by job:
 *   gb_proc.c     failpoints, the fork watch, error text, process liveness (section 3.5)
 *   gb_named.c    named segments: the opening rules and the SIGBUS guard (PROTOCOL.md 1.1)
 *   gb_open.c     open and geometry: attach, validate, register as the consumer (section 3.6)
 *   gb_consume.c  consume and leases: acquire, release, the liveness checks of a wait, close
 *   gb_check.c    the header's tables checked at attach: names, the counter table, the description
 *   gb_stats.c    the counters, the job's named counters, the ABI check
 *
 * Memory ordering follows PROTOCOL.md section 4: state words, waiters, consumer_state and
 * error_state are accessed seq_cst; statistics counters and heartbeats relaxed. Payload, seq and
 * geometry are read after an acquire (seq_cst) load of the word that publishes them. */
#ifndef GB_INTERNAL_H
#define GB_INTERNAL_H

#define _GNU_SOURCE
#include "gobatch.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "32-bit atomics must be lock-free");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free");
_Static_assert(sizeof(void *) == GB_WORD_BYTES, "gobatch needs a 64-bit build (word_bytes)");

/* ---- layout: every protocol number comes from gobatch_protocol.h, which `go generate ./ring`
 * writes from package ring (held to docs/PROTOCOL.md by ring's tests); none is written here. */
#define SLOT_WORD(lap, st) ((((lap) & GB_LAP_MASK) << GB_SLOT_STATE_BITS) | (uint32_t)(st))
/* A position's grant (section 3.1): slot s on slot lap L for a batch of tag t. */
#define GRANT_WORD(s, t, L) ((uint64_t)((L) & GB_LAP_MASK) << 32 | (uint64_t)((t) & GB_GRANT_TAG_MASK) << GB_GRANT_SLOT_BITS | (uint64_t)(s))
#define TENSOR_FIELD(t, field) (GB_TENSOR_BASE + GB_TENSOR_STRIDE * (t) + (field))
#define ENTRY_FIELD(e, field) (GB_REGISTRY_BASE + GB_REGISTRY_STRIDE * (e) + (field))
#define COUNTER_FIELD(k, field) (GB_COUNTER_BASE + GB_COUNTER_STRIDE * (k) + (field))
/* consumer_state and consumer_pid are the halves of the u64 at GB_H_CONSUMER_STATE (section
 * 2.4): a claim and its pid are published by one CAS. */
#define CLAIM_WORD(st, pid) ((uint64_t)(st) | (uint64_t)(uint32_t)(pid) << 32)

struct gb_ring {
    unsigned char *base; /* control mapping: header and slot headers, read-write */
    size_t map_len;
    int fd;              /* dup of the caller's fd until the ring is ready (named: kept), else -1 */
    bool named;          /* creator_flags bit 0: a file that can be truncated (PROTOCOL.md 1.1) */
    bool lost;           /* the named segment was found truncated: every gb_next fails */
    int guard[2];        /* SIGBUS guard entries of the control and payload mappings, or -1 */
    bool ready;          /* steps 2-4 passed */
    bool registered;     /* step 5 done, not closed */
    pid_t owner_pid;     /* the process that registered */
    uint64_t fork_gen;   /* fork_generation when it registered: a change means this may be a child */
    uint64_t j;          /* relative sequence of the next batch to acquire */
    int64_t next_scan_ns; /* when gb_next next scans the registry although its batch is ready */
    uint32_t held_count; /* slots in READING, handed out and not yet released */
    /* Per slot: lap + 1 of the batch this consumer holds there (READING), 0 when none. Slots
     * are released in any order (PROTOCOL.md 3.3 step 4). */
    uint32_t held_lap[GB_MAX_SLOTS];
    /* Positions granted a slot with a producer waiting whose wake is deferred (PROTOCOL.md 3.3
     * step 4: the ring is well ahead, so the producers are woken once for a burst of grants),
     * and how many: wake_flush wakes them. */
    uint32_t wake_pending[GB_MAX_SLOTS];
    uint32_t wake_count;
    bool wake_deferred[GB_MAX_SLOTS];
    /* When this consumer first saw each registry entry dead while live producers were left to
     * take its claims over (0: not seen dead; section 3.5 step 2, takeover_grace). */
    int64_t dead_since[GB_MAX_PRODUCERS];
    uint64_t dead_word[GB_MAX_PRODUCERS]; /* the entry word seen dead then: a reused entry that dies again starts anew */
    gb_geometry g;
    gb_tensor tensors[GB_MAX_TENSORS];
    gb_counter counters[GB_MAX_COUNTERS]; /* the validated counter table; values unused here */
    uint32_t counter_first[GB_MAX_COUNTERS]; /* index of each counter's first value (section 2.8) */
    char err[1600];
};

/* ---- word access and waiting (inline: the per-batch path uses them) ---- */

static inline _Atomic uint32_t *a32(const gb_ring *r, size_t off) {
    return (_Atomic uint32_t *)(void *)(r->base + off);
}
static inline _Atomic uint64_t *a64(const gb_ring *r, size_t off) {
    return (_Atomic uint64_t *)(void *)(r->base + off);
}
static inline uint32_t ld32(const gb_ring *r, size_t off) {
    return atomic_load_explicit(a32(r, off), memory_order_relaxed);
}
static inline uint64_t ld64(const gb_ring *r, size_t off) {
    return atomic_load_explicit(a64(r, off), memory_order_relaxed);
}

/* A header word copied into a field of a struct of the API (gb_geometry, gb_stats_t): its
 * offset in the header, the field's offset in the struct, and whether it is a u64 (else u32).
 * The geometry and the statistics are read through tables of these (load_words). */
typedef struct { size_t off, field; bool u64; } word_field;
#define WORD64(hdr, type, name) {hdr, offsetof(type, name), true}
#define WORD32(hdr, type, name) {hdr, offsetof(type, name), false}
static inline void load_words(const gb_ring *r, const word_field *w, size_t n, void *out) {
    for (size_t i = 0; i < n; i++) {
        unsigned char *f = (unsigned char *)out + w[i].field;
        if (w[i].u64)
            *(uint64_t *)(void *)f = ld64(r, w[i].off);
        else
            *(uint32_t *)(void *)f = ld32(r, w[i].off);
    }
}

static inline _Atomic uint32_t *slot_word(const gb_ring *r, uint32_t slot, size_t off) {
    return a32(r, GB_SLOT_BASE + (size_t)slot * GB_SLOT_STRIDE + off);
}

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* FUTEX_WAIT on a word of a shared file mapping (no FUTEX_PRIVATE_FLAG), relative timeout.
 * Returns true if a signal interrupted the wait (EINTR): the caller then returns to Python at
 * once so that its signal handlers (Ctrl-C) run without waiting for the budget to end.
 * On 0, EAGAIN and ETIMEDOUT the caller re-checks its condition. */
static inline bool futex_wait(_Atomic uint32_t *w, uint32_t val, int64_t timeout_ns) {
    if (timeout_ns <= 0) return false;
    struct timespec ts = {.tv_sec = timeout_ns / 1000000000ll, .tv_nsec = timeout_ns % 1000000000ll};
    return syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, val, &ts, NULL, 0) != 0 && errno == EINTR;
}

static inline void futex_wake_all(_Atomic uint32_t *w) {
    (void)syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* ---- helpers of more than one file (hidden: not part of the library's ABI) ---- */

#pragma GCC visibility push(hidden)

/* gb_proc.c */
extern _Atomic uint64_t fork_generation; /* bumped in the child of every fork() */
void failpoint(const char *name);
int fail(gb_ring *r, int code, const char *fmt, ...); /* formats r->err, returns code */
int read_proc_stat(uint32_t pid, char *state, uint64_t *starttime);
bool pid_gone(uint32_t pid);

/* gb_check.c: a NUL-padded name field of `bytes` bytes (section 2.7, 2.8) holds 1 .. bytes-1
 * name characters; copied to out (NUL-terminated), or GB_EPROTO naming what[index]. */
int check_name(gb_ring *r, const unsigned char *field, size_t bytes, const char *what, uint32_t index, char *out);
int check_counters(gb_ring *r);    /* section 3.6 step 4 for the counter table (2.8) */
int check_description(gb_ring *r); /* section 3.6 step 4 for the batch description (2.9) */

/* gb_named.c */
const char *file_kind(mode_t m);
int guard_add(uintptr_t addr, size_t len, int prot);
void guard_drop(int *idx);
int segment_lost(gb_ring *r);

#pragma GCC visibility pop

#endif
