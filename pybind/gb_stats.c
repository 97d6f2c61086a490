/* libgobatch: the ring's counters (sections 2.3, 2.4, 2.5a), error text and the ABI check. */
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
    out->cache_hits = ld64(r, GB_H_CACHE_HITS);
    out->cache_misses = ld64(r, GB_H_CACHE_MISSES);
    out->cache_evictions = ld64(r, GB_H_CACHE_EVICTIONS);
    out->cache_bytes = ld64(r, GB_H_CACHE_BYTES);
    out->cache_budget = ld64(r, GB_H_CACHE_BUDGET);
    out->segments_sum = ld64(r, GB_H_SEGMENTS_SUM);
    out->segments_batches = ld64(r, GB_H_SEGMENTS_BATCHES);
    for (uint32_t i = 0; i < GB_MAX_TENSORS; i++) {
        out->chunks_decoded[i] = ld64(r, GB_H_CHUNKS_DECODED + 8u * i);
        out->chunks_missing[i] = ld64(r, GB_H_CHUNKS_MISSING + 8u * i);
    }
    for (uint32_t e = 0; e < GB_MAX_PRODUCERS; e++) {
        uint32_t st = atomic_load_explicit(a32(r, ENTRY_FIELD(e, GB_R_STATE)), memory_order_seq_cst) &
                      ((1u << GB_ENTRY_STATE_BITS) - 1u); /* its low u16: the generation above */
        if (st != GB_ENTRY_FREE) out->producers_total++;
        if (st == GB_ENTRY_ACTIVE || st == GB_ENTRY_CLAIMING) out->producers_active++;
    }
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
    default: return 0;
    }
}
