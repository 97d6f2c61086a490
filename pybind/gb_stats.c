/* libgobatch: the ring's counters (sections 2.3, 2.4), the job's named counters (2.5a, 2.8),
 * error text and the ABI check. */
#include "gb_internal.h"

#include <string.h>

/* ---- introspection ---- */

int gb_stats(gb_ring *r, gb_stats_t *out) {
    if (!r || !r->ready) return GB_ECLOSED;
    memset(out, 0, sizeof *out);
    out->batches_written = ld64(r, GB_H_BATCHES_WRITTEN);
    out->bytes_written = ld64(r, GB_H_BYTES_WRITTEN);
    out->producer_wait_ns = ld64(r, GB_H_PRODUCER_WAIT_NS);
    out->producer_busy_ns = ld64(r, GB_H_PRODUCER_BUSY_NS);
    out->batches_read = ld64(r, GB_H_BATCHES_READ);
    out->consumer_wait_ns = ld64(r, GB_H_CONSUMER_WAIT_NS);
    out->bytes_read = ld64(r, GB_H_BYTES_READ);
    out->consumer_heartbeat = ld64(r, GB_H_CONSUMER_HEARTBEAT);
    out->next_index = r->g.start_batch + r->j;
    for (uint32_t e = 0; e < GB_MAX_PRODUCERS; e++) {
        uint32_t st = atomic_load_explicit(a32(r, ENTRY_FIELD(e, GB_R_STATE)), memory_order_seq_cst) &
                      ((1u << GB_ENTRY_STATE_BITS) - 1u); /* its low u16: the generation above */
        if (st != GB_ENTRY_FREE) out->producers_total++;
        if (st == GB_ENTRY_ACTIVE || st == GB_ENTRY_CLAIMING) out->producers_active++;
    }
    return GB_OK;
}

/* ---- the job's counter table (sections 2.5a, 2.8) ---- */

static uint16_t ld16(const gb_ring *r, size_t off) { return *(const uint16_t *)(const void *)(r->base + off); }

/* Section 3.6 step 4 for the counter table, after the acquire load of READY (the creator
 * wrote it before): every descriptor below counter_count has a name, a known kind and scope,
 * the width of its scope, and the values after the previous descriptor's, inside the array.
 * Copies the table into r (its values are read by gb_counter_get). */
int check_counters(gb_ring *r) {
#define BAD(...) fail(r, GB_EPROTO, "corrupt gobatch ring: " __VA_ARGS__)
    uint32_t n = ld32(r, GB_H_COUNTER_COUNT);
    if (n > GB_MAX_COUNTERS) return BAD("counter_count %u (must be 0 .. %u)", n, GB_MAX_COUNTERS);
    uint32_t next = 0;
    for (uint32_t k = 0; k < n; k++) {
        const unsigned char *d = r->base + COUNTER_FIELD(k, GB_C_NAME);
        gb_counter *c = &r->counters[k];
        memset(c, 0, sizeof *c);
        int rc = check_name(r, d, GB_COUNTER_NAME_BYTES, "counter", k, c->name);
        if (rc != GB_OK) return rc;
        for (uint32_t u = 0; u < k; u++)
            if (strcmp(r->counters[u].name, c->name) == 0) return BAD("counter %u: name '%s' repeats counter %u", k, c->name, u);
        c->kind = ld16(r, COUNTER_FIELD(k, GB_C_KIND));
        c->scope = ld16(r, COUNTER_FIELD(k, GB_C_SCOPE));
        c->width = ld16(r, COUNTER_FIELD(k, GB_C_WIDTH));
        uint32_t first = ld16(r, COUNTER_FIELD(k, GB_C_FIRST));
        if (c->kind != GB_COUNTER_KIND_COUNTER && c->kind != GB_COUNTER_KIND_GAUGE)
            return BAD("counter '%s': kind %u (must be %u or %u)", c->name, c->kind, GB_COUNTER_KIND_COUNTER,
                       GB_COUNTER_KIND_GAUGE);
        if (c->scope != GB_SCOPE_JOB && c->scope != GB_SCOPE_SOURCE)
            return BAD("counter '%s': scope %u (must be %u or %u)", c->name, c->scope, GB_SCOPE_JOB, GB_SCOPE_SOURCE);
        if (c->width != (c->scope == GB_SCOPE_JOB ? 1u : GB_MAX_COUNTER_SOURCES))
            return BAD("counter '%s': width %u for scope %u", c->name, c->width, c->scope);
        if (first != next || first + c->width > GB_MAX_COUNTER_VALUES)
            return BAD("counter '%s': values %u .. %u (must start at %u and end within %u)", c->name, first,
                       first + c->width - 1, next, GB_MAX_COUNTER_VALUES);
        r->counter_first[k] = first;
        next = first + c->width;
    }
    r->g.counter_count = n;
    return GB_OK;
#undef BAD
}

int gb_counter_get(const gb_ring *r, uint32_t index, gb_counter *out) {
    if (!r || !r->ready || index >= r->g.counter_count) return GB_ECLOSED;
    *out = r->counters[index];
    for (uint32_t v = 0; v < out->width; v++)
        out->values[v] = ld64(r, GB_COUNTER_VALUES_BASE + 8u * (r->counter_first[index] + v));
    return GB_OK;
}

const char *gb_error(const gb_ring *r) { return r ? r->err : "no ring"; }

uintptr_t gb_base(const gb_ring *r) { return r ? (uintptr_t)r->base : 0; }

uint32_t gb_abi(uint32_t which) {
    switch (which) {
    case 0: return GB_LAYOUT_VERSION;
    case 1: return (uint32_t)sizeof(gb_geometry);
    case 2: return (uint32_t)sizeof(gb_tensor);
    case 3: return (uint32_t)sizeof(gb_stats_t);
    case 4: return (uint32_t)sizeof(gb_counter);
    default: return 0;
    }
}
