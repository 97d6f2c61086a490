/* libgobatch: the ring's counters (sections 2.3, 2.4), the job's named counters (2.5a, 2.8; the
 * table is checked at attach, gb_check.c), error text and the ABI check. */
#include "gb_internal.h"

#include <string.h>

/* ---- introspection ---- */

int gb_stats(gb_ring *r, gb_stats_t *out) {
    if (!r || !r->ready) return GB_ECLOSED;
    memset(out, 0, sizeof *out);
    static const word_field words[] = {
        WORD64(GB_H_BATCHES_WRITTEN, gb_stats_t, batches_written), WORD64(GB_H_BYTES_WRITTEN, gb_stats_t, bytes_written),
        WORD64(GB_H_PRODUCER_WAIT_NS, gb_stats_t, producer_wait_ns),
        WORD64(GB_H_PRODUCER_BUSY_NS, gb_stats_t, producer_busy_ns), WORD64(GB_H_BATCHES_READ, gb_stats_t, batches_read),
        WORD64(GB_H_CONSUMER_WAIT_NS, gb_stats_t, consumer_wait_ns), WORD64(GB_H_BYTES_READ, gb_stats_t, bytes_read),
        WORD64(GB_H_CONSUMER_HEARTBEAT, gb_stats_t, consumer_heartbeat),
    };
    load_words(r, words, sizeof words / sizeof words[0], out);
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
