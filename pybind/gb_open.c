/* libgobatch: open a ring, validate its identity and geometry, register as its consumer
 * (section 3.6), and hand out the geometry. */
#include "gb_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

/* ---- attach (section 3.6) ---- */

gb_ring *gb_open(int fd, char *err, size_t errlen) {
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "fstat of the ring segment failed: %s", strerror(errno));
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "not a gobatch segment: the descriptor is %s, not a regular file or memfd",
                 file_kind(st.st_mode));
        return NULL;
    }
    if (st.st_size < (off_t)GB_HEADER_BYTES) {
        snprintf(err, errlen, "not a gobatch segment: too small (%lld bytes, a ring has at least %u)",
                 (long long)st.st_size, GB_HEADER_BYTES);
        return NULL;
    }
    gb_ring *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    r->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (r->fd < 0) {
        snprintf(err, errlen, "dup of the ring fd failed: %s", strerror(errno));
        free(r);
        return NULL;
    }
    void *p = mmap(NULL, GB_HEADER_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
    if (p == MAP_FAILED) {
        snprintf(err, errlen, "mmap of the ring header failed: %s", strerror(errno));
        close(r->fd);
        free(r);
        return NULL;
    }
    r->base = p;
    r->map_len = GB_HEADER_BYTES;
    r->guard[0] = r->guard[1] = -1;
    r->g.file_bytes = (uint64_t)st.st_size;
    r->owner_pid = getpid();
    return r;
}

/* Step 2. Returns GB_OK or GB_EPROTO with the field and both values named. */
static int check_identity(gb_ring *r) {
    uint64_t magic = ld64(r, GB_H_MAGIC);
    if (magic != GB_MAGIC)
        return fail(r, GB_EPROTO, "not a gobatch segment: magic 0x%016llx, expected 0x%016llx",
                    (unsigned long long)magic, (unsigned long long)GB_MAGIC);
    static const struct { const char *name; size_t off; uint32_t want; } f[] = {
        {"layout_version", GB_H_LAYOUT_VERSION, GB_LAYOUT_VERSION},
        {"header_bytes", GB_H_HEADER_BYTES, GB_HEADER_BYTES},
        {"slot_header_bytes", GB_H_SLOT_HEADER_BYTES, GB_SLOT_HEADER_BYTES},
        {"endian_check", GB_H_ENDIAN_CHECK, GB_ENDIAN_CHECK},
        {"word_bytes", GB_H_WORD_BYTES, GB_WORD_BYTES},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        uint32_t v = ld32(r, f[i].off);
        if (v != f[i].want) {
            if (f[i].off == GB_H_ENDIAN_CHECK)
                return fail(r, GB_EPROTO, "incompatible gobatch ring: endian_check 0x%08x, this build reads 0x%08x",
                            v, f[i].want);
            return fail(r, GB_EPROTO, "incompatible gobatch ring: %s %u, this build reads %u", f[i].name, v,
                        f[i].want);
        }
    }
    return GB_OK;
}

static const uint32_t itemsize[GB_DTYPE_MAX + 1] = GB_DTYPE_ITEMSIZES; /* by dtype code */

static bool mul_ok(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_mul_overflow(a, b, out); }
static bool add_ok(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_add_overflow(a, b, out); }

/* Step 4, after the acquire load of state == READY. Copies the geometry into r->g. */
static int check_geometry(gb_ring *r) {
    gb_geometry *g = &r->g;
    static const word_field words[] = {
        WORD64(GB_H_SEGMENT_BYTES, gb_geometry, segment_bytes), WORD32(GB_H_SLOT_COUNT, gb_geometry, slot_count),
        WORD32(GB_H_TENSOR_COUNT, gb_geometry, tensor_count), WORD64(GB_H_SLOT_STRIDE, gb_geometry, slot_stride),
        WORD64(GB_H_SLOT_BYTES, gb_geometry, slot_bytes), WORD64(GB_H_PAYLOAD_OFFSET, gb_geometry, payload_offset),
        WORD64(GB_H_START_BATCH, gb_geometry, start_batch), WORD64(GB_H_TOTAL_BATCHES, gb_geometry, total_batches),
        WORD32(GB_H_BATCH_SIZE, gb_geometry, batch_size), WORD32(GB_H_PAYLOAD_ALIGN, gb_geometry, payload_align),
        WORD64(GB_H_NONCE, gb_geometry, nonce), WORD32(GB_H_CREATOR_PID, gb_geometry, creator_pid),
        WORD32(GB_H_CREATOR_FLAGS, gb_geometry, creator_flags),
        WORD64(GB_H_CREATOR_STARTTIME, gb_geometry, creator_starttime),
    };
    load_words(r, words, sizeof words / sizeof words[0], g);
    uint64_t sho = ld64(r, GB_H_SLOT_HEADERS_OFFSET);
    struct stat st;
    if (fstat(r->fd, &st) != 0) return fail(r, GB_ESYS, "fstat of the ring segment failed: %s", strerror(errno));
    g->file_bytes = (uint64_t)st.st_size;

#define BAD(...) fail(r, GB_EPROTO, "corrupt gobatch ring: " __VA_ARGS__)
    if (g->slot_count < 1 || g->slot_count > GB_MAX_SLOTS)
        return BAD("slot_count %u (must be 1 .. %u)", g->slot_count, GB_MAX_SLOTS);
    if (g->tensor_count < 1 || g->tensor_count > GB_MAX_TENSORS)
        return BAD("tensor_count %u (must be 1 .. %u)", g->tensor_count, GB_MAX_TENSORS);
    if (g->payload_align != GB_SMALL_ALIGN && g->payload_align != GB_HUGE_ALIGN)
        return BAD("payload_align %u (must be %u or %u)", g->payload_align, GB_SMALL_ALIGN, GB_HUGE_ALIGN);
    if (g->payload_offset % g->payload_align)
        return BAD("payload_offset %llu is not a multiple of payload_align %u",
                   (unsigned long long)g->payload_offset, g->payload_align);
    if (g->slot_stride % g->payload_align)
        return BAD("slot_stride %llu is not a multiple of payload_align %u", (unsigned long long)g->slot_stride,
                   g->payload_align);
    if (sho != GB_HEADER_BYTES)
        return BAD("slot_headers_offset %llu (must be %u)", (unsigned long long)sho, GB_HEADER_BYTES);
    uint64_t headers_end = sho + (uint64_t)g->slot_count * GB_SLOT_HEADER_BYTES;
    if (g->payload_offset < headers_end)
        return BAD("payload_offset %llu is below the end of the slot headers %llu",
                   (unsigned long long)g->payload_offset, (unsigned long long)headers_end);
    if (g->slot_stride < g->slot_bytes)
        return BAD("slot_stride %llu is smaller than slot_bytes %llu", (unsigned long long)g->slot_stride,
                   (unsigned long long)g->slot_bytes);
    uint64_t payload_total, want_segment;
    if (!mul_ok(g->slot_count, g->slot_stride, &payload_total) ||
        !add_ok(g->payload_offset, payload_total, &want_segment) || g->segment_bytes != want_segment)
        return BAD("segment_bytes %llu != payload_offset %llu + slot_count %u x slot_stride %llu",
                   (unsigned long long)g->segment_bytes, (unsigned long long)g->payload_offset, g->slot_count,
                   (unsigned long long)g->slot_stride);
    if (g->file_bytes < g->segment_bytes)
        return BAD("the file has %llu bytes, segment_bytes is %llu", (unsigned long long)g->file_bytes,
                   (unsigned long long)g->segment_bytes);

    for (uint32_t t = 0; t < g->tensor_count; t++) {
        const unsigned char *d = r->base + TENSOR_FIELD(t, 0);
        gb_tensor *x = &r->tensors[t];
        memset(x, 0, sizeof *x);
        int rc = check_name(r, d + GB_T_NAME, GB_TENSOR_NAME_BYTES, "tensor", t, x->name);
        if (rc != GB_OK) return rc;
        for (uint32_t u = 0; u < t; u++)
            if (strcmp(r->tensors[u].name, x->name) == 0)
                return BAD("tensor %u: name '%s' repeats tensor %u", t, x->name, u);
        x->dtype = ld32(r, TENSOR_FIELD(t, GB_T_DTYPE));
        x->ndim = ld32(r, TENSOR_FIELD(t, GB_T_NDIM));
        x->offset = ld64(r, TENSOR_FIELD(t, GB_T_OFFSET));
        x->nbytes = ld64(r, TENSOR_FIELD(t, GB_T_NBYTES));
        if (x->dtype < GB_DTYPE_MIN || x->dtype > GB_DTYPE_MAX)
            return BAD("tensor '%s': dtype code %u (must be %u .. %u)", x->name, x->dtype, GB_DTYPE_MIN, GB_DTYPE_MAX);
        if (x->ndim < 1 || x->ndim > GB_MAX_DIMS)
            return BAD("tensor '%s': ndim %u (must be 1 .. %u)", x->name, x->ndim, GB_MAX_DIMS);
        uint64_t n = itemsize[x->dtype];
        bool ok = true;
        for (uint32_t k = 0; k < GB_MAX_DIMS; k++) {
            x->shape[k] = ld64(r, TENSOR_FIELD(t, GB_T_SHAPE) + sizeof(uint64_t) * k);
            if (k < x->ndim) ok = ok && mul_ok(n, x->shape[k], &n);
        }
        if (!ok || n != x->nbytes)
            return BAD("tensor '%s': nbytes %llu != product(shape) x itemsize", x->name, (unsigned long long)x->nbytes);
        if (x->offset % GB_TENSOR_ALIGN)
            return BAD("tensor '%s': offset %llu is not a multiple of %u", x->name, (unsigned long long)x->offset,
                       GB_TENSOR_ALIGN);
        uint64_t end;
        if (!add_ok(x->offset, x->nbytes, &end) || end > g->slot_bytes)
            return BAD("tensor '%s': offset %llu + nbytes %llu exceeds slot_bytes %llu", x->name,
                       (unsigned long long)x->offset, (unsigned long long)x->nbytes, (unsigned long long)g->slot_bytes);
        for (uint32_t u = 0; u < t; u++) {
            const gb_tensor *y = &r->tensors[u];
            if (x->nbytes && y->nbytes && x->offset < y->offset + y->nbytes && y->offset < end)
                return BAD("tensor '%s' overlaps tensor '%s'", x->name, y->name);
        }
    }
#undef BAD
    return GB_OK;
}

/* Maps the header and every slot header (the control region), replacing the header mapping. */
static int map_control(gb_ring *r) {
    size_t len = GB_HEADER_BYTES + (size_t)r->g.slot_count * GB_SLOT_HEADER_BYTES; /* <= payload_offset <= file size */
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
    if (p == MAP_FAILED) return fail(r, GB_ESYS, "mmap of the ring's slot headers failed: %s", strerror(errno));
    munmap(r->base, r->map_len);
    r->base = p;
    r->map_len = len;
    return GB_OK;
}

int gb_wait_ready(gb_ring *r, int budget_ms) {
    if (!r) return GB_ECLOSED;
    if (r->ready) return GB_OK;
    int64_t deadline = now_ns() + (int64_t)(budget_ms > 0 ? budget_ms : 0) * 1000000ll;
    _Atomic uint32_t *state = a32(r, GB_H_STATE);
    for (;;) {
        uint32_t s = atomic_load_explicit(state, memory_order_seq_cst);
        uint64_t magic = ld64(r, GB_H_MAGIC);
        if (s == GB_RING_READY) {
            int rc = check_identity(r);
            if (rc == GB_OK) rc = check_geometry(r);
            if (rc == GB_OK) rc = check_counters(r);
            if (rc == GB_OK) rc = check_description(r);
            if (rc == GB_OK) rc = map_control(r);
            if (rc != GB_OK) return rc;
            r->named = r->g.creator_flags & GB_CREATOR_NAMED;
            if (r->named) { /* keep the fd: its size is checked while the ring is read (1.1) */
                r->guard[0] = guard_add((uintptr_t)r->base, r->map_len, PROT_READ | PROT_WRITE);
            } else {
                close(r->fd);
                r->fd = -1;
            }
            r->ready = true;
            return GB_OK;
        }
        /* Not READY yet. A zero magic is a header the creator has not written; the creator
         * stores magic last (PROTOCOL.md 3.6), so a non-zero magic means the identity fields
         * are final and can be checked now. */
        if (magic != 0) {
            int rc = check_identity(r);
            if (rc != GB_OK) return rc;
        }
        if (s != GB_RING_INITIALISING)
            return fail(r, GB_EPROTO, "corrupt gobatch ring: state %u (must be 0 INITIALISING or 1 READY)", s);
        if (magic == GB_MAGIC) {
            uint32_t pid = ld32(r, GB_H_CREATOR_PID);
            uint64_t start = ld64(r, GB_H_CREATOR_STARTTIME);
            if (pid != 0 && start != 0 && !gb_process_alive(pid, start) &&
                atomic_load_explicit(state, memory_order_seq_cst) != GB_RING_READY)
                return fail(r, GB_ECREATOR, "the ring's creator (pid %u) died before the ring became ready", pid);
        }
        int64_t left = deadline - now_ns();
        if (left <= 0)
            return fail(r, GB_TIMEOUT, "the ring is not ready yet (state %u%s)", s,
                        magic ? "" : ", header not written");
        if (futex_wait(state, s, left < 20000000ll ? left : 20000000ll))
            return fail(r, GB_TIMEOUT, "interrupted by a signal");
    }
}

/* Section 3.5: a CLAIMING claim is dead when its pid is gone or a zombie (its starttime may
 * be the previous claimer's); an ATTACHED one when (pid, consumer_starttime) is not alive. */
static bool claim_dead(const gb_ring *r, uint32_t st, uint32_t pid) {
    if (st == GB_CONSUMER_ATTACHED) return !gb_process_alive(pid, ld64(r, GB_H_CONSUMER_STARTTIME));
    if (st != GB_CONSUMER_CLAIMING) return false;
    return pid == 0 || pid_gone(pid);
}

/* Section 3.6 step 5: take the claim from NONE, or from a dead CLAIMING claim. */
static int claim_consumer(gb_ring *r, uint32_t self) {
    static const char *names[] = GB_CONSUMER_NAMES;
    _Atomic uint64_t *w = a64(r, GB_H_CONSUMER_STATE);
    for (;;) {
        uint64_t expect = CLAIM_WORD(GB_CONSUMER_NONE, 0);
        if (atomic_compare_exchange_strong_explicit(w, &expect, CLAIM_WORD(GB_CONSUMER_CLAIMING, self),
                                                    memory_order_seq_cst, memory_order_seq_cst))
            return GB_OK;
        uint32_t st = (uint32_t)expect, pid = (uint32_t)(expect >> 32);
        if (st == GB_CONSUMER_NONE) { /* a stale pid half (the state word reset alone) is unclaimed */
            if (atomic_compare_exchange_strong_explicit(w, &expect, CLAIM_WORD(GB_CONSUMER_CLAIMING, self),
                                                        memory_order_seq_cst, memory_order_seq_cst))
                return GB_OK;
            continue;
        }
        if (st == GB_CONSUMER_CLAIMING && claim_dead(r, st, pid)) {
            if (atomic_compare_exchange_strong_explicit(w, &expect, CLAIM_WORD(GB_CONSUMER_CLAIMING, self),
                                                        memory_order_seq_cst, memory_order_seq_cst))
                return GB_OK; /* reclaimed from a consumer that died while claiming */
            continue;
        }
        if (st == GB_CONSUMER_ATTACHED && claim_dead(r, st, pid))
            return fail(r, GB_EBUSY, "the ring's consumer pid %u died after attaching; its producers stop and the ring "
                                     "ends with it (a ring has one consumer in its life)", pid);
        if (st == GB_CONSUMER_CLOSED)
            return fail(r, GB_EBUSY, "the ring's consumer (pid %u) already closed it; a ring has one consumer in its life", pid);
        return fail(r, GB_EBUSY, "the ring already has a consumer, pid %u (consumer_state %s)", pid,
                    st < sizeof names / sizeof names[0] ? names[st] : "?");
    }
}

int gb_register(gb_ring *r) {
    if (!r || !r->ready) return GB_ECLOSED;
    if (r->registered) return GB_OK;
    uint64_t gen = atomic_load(&fork_generation); /* before getpid: a fork in between changes it */
    pid_t self = getpid();
    uint64_t start = gb_process_starttime((uint32_t)self);
    if (start == 0) return fail(r, GB_ESYS, "cannot read /proc/%d/stat for this process's start time", (int)self);
    int rc = claim_consumer(r, (uint32_t)self);
    if (rc != GB_OK) return rc;
    failpoint("consumer-claiming");
    atomic_store_explicit(a64(r, GB_H_CONSUMER_STARTTIME), start, memory_order_seq_cst);
    atomic_store_explicit(a64(r, GB_H_CONSUMER_STATE), CLAIM_WORD(GB_CONSUMER_ATTACHED, self), memory_order_seq_cst);
    failpoint("consumer-attached");
    r->registered = true;
    r->owner_pid = self;
    r->fork_gen = gen;
    r->j = 0;
    r->held_count = 0;
    memset(r->held_lap, 0, sizeof r->held_lap);
    r->wake_count = 0;
    memset(r->wake_deferred, 0, sizeof r->wake_deferred);
    return GB_OK;
}

/* ---- geometry ---- */

int gb_geometry_get(const gb_ring *r, gb_geometry *out) {
    if (!r || !r->ready) return GB_ECLOSED;
    *out = r->g;
    return GB_OK;
}

int gb_tensor_get(const gb_ring *r, uint32_t index, gb_tensor *out) {
    if (!r || !r->ready || index >= r->g.tensor_count) return GB_ECLOSED;
    *out = r->tensors[index];
    return GB_OK;
}
