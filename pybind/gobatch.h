/* libgobatch: the consumer half of the gobatch ring protocol (docs/PROTOCOL.md, layout 1).
 *
 * Loaded by python/gobatch with ctypes. Every function takes plain integers and pointers; no
 * function keeps global state, so a process that forks keeps working (the child is refused by
 * the pid check in gb_next/gb_close, PROTOCOL.md section 5).
 *
 * Typical use:
 *   r = gb_open(fd, err, errlen);            // section 3.6 step 1, maps the header
 *   gb_wait_ready(r, 100) until GB_OK;       // steps 2-4, maps the slot headers
 *   gb_register(r);                          // step 5
 *   loop: slot = gb_next(r, 100);            // acquires the next batch in stream order
 *         ... gb_release(r, slot);           // when the batch is done with; any order
 *   gb_close(r);                             // consumer_state = CLOSED, unmaps, frees
 */
#ifndef GOBATCH_H
#define GOBATCH_H

#include <stddef.h>
#include <stdint.h>

/* The protocol's numbers (GB_LAYOUT_VERSION, GB_MAX_TENSORS, GB_MAX_DIMS, offsets, states,
 * dtype codes), generated from package ring by `go generate ./ring`. */
#include "gobatch_protocol.h"

/* Return codes. gb_next returns a slot index (>= 0) on success. */
enum {
    GB_OK = 0,
    GB_TIMEOUT = -1,   /* the budget ran out; call again */
    GB_END = -2,       /* a bounded stream has been read to its end */
    GB_EPRODUCER = -3, /* a producer reported an error (text in gb_error) */
    GB_EDEAD = -4,     /* a producer died and no live one took its batches over (text in gb_error;
                        * the position is unchanged: gb_next may be called again once a producer
                        * joins, which takes them over, PROTOCOL.md 3.7) */
    GB_ETRUNC = -5,    /* every producer finished before the stream's end */
    GB_EPROTO = -6,    /* segment refused or protocol violated (text in gb_error) */
    GB_EFOREIGN = -7,  /* used from a process other than the one that attached (fork) */
    GB_ECLOSED = -8,   /* not registered / already closed */
    GB_ESYS = -9,      /* a system call failed (text in gb_error) */
    GB_EBUSY = -10,    /* the ring already has a consumer (text in gb_error) */
    GB_ECREATOR = -11, /* the creator died before the ring became READY */
    GB_ELOST = -12,    /* a named segment was truncated under the mapping (PROTOCOL.md 1.1) */
    GB_EREFUSED = -13, /* gb_open_named: not a file to attach (symlink, not regular, owner, mode) */
    GB_EACCES = -14,   /* gb_open_named: permission denied */
    GB_ENOENT = -15,   /* gb_open_named: no such file */
    GB_EHELD = -16,    /* every slot holds a batch this consumer has not released: the next batch has none */
    GB_ENOTHELD = -17, /* gb_release of a slot this consumer does not hold */
};

typedef struct gb_ring gb_ring;

/* Geometry of a validated ring (section 2.1), filled by gb_geometry. */
typedef struct gb_geometry {
    uint64_t segment_bytes;
    uint64_t slot_stride;
    uint64_t slot_bytes;
    uint64_t payload_offset;
    uint64_t start_batch;
    uint64_t total_batches;
    uint64_t nonce;
    uint64_t creator_starttime;
    uint64_t file_bytes;
    uint32_t slot_count;
    uint32_t tensor_count;
    uint32_t batch_size;
    uint32_t payload_align;
    uint32_t creator_pid;
    uint32_t creator_flags;
    uint32_t counter_count; /* entries of the counter table (section 2.5a), for gb_counter_get */
    uint32_t description_len; /* bytes of the batch description (section 2.9), for gb_description_get */
} gb_geometry;

/* One validated tensor descriptor (section 2.7); name is NUL-terminated. */
typedef struct gb_tensor {
    char name[GB_TENSOR_NAME_BYTES];
    uint32_t dtype;
    uint32_t ndim;
    uint64_t shape[GB_MAX_DIMS];
    uint64_t offset;
    uint64_t nbytes;
} gb_tensor;

/* Counters (sections 2.3, 2.4), filled by gb_stats; the job's own are gb_counter_get's. */
typedef struct gb_stats_t {
    uint64_t batches_written;
    uint64_t bytes_written;
    uint64_t producer_wait_ns;
    uint64_t producer_busy_ns;
    uint64_t batches_read;
    uint64_t consumer_wait_ns;
    uint64_t bytes_read;
    uint64_t consumer_heartbeat;
    uint64_t next_index; /* absolute stream index of the next batch gb_next returns */
    uint32_t producers_active;
    uint32_t producers_total;
} gb_stats_t;

/* One named counter of the job (sections 2.5a, 2.8), validated at attach, with its values read
 * now (relaxed): values[0 .. width-1], one for the job (scope GB_SCOPE_JOB) or one per source
 * (GB_SCOPE_SOURCE, values[i] for source[i]). name is NUL-terminated. */
typedef struct gb_counter {
    char name[GB_COUNTER_NAME_BYTES];
    uint32_t kind;  /* GB_COUNTER_KIND_COUNTER or GB_COUNTER_KIND_GAUGE */
    uint32_t scope; /* GB_SCOPE_JOB or GB_SCOPE_SOURCE */
    uint32_t width;
    uint64_t values[GB_MAX_COUNTER_SOURCES];
} gb_counter;

/* PROTOCOL.md 1.1: opens the named segment at path read-write without following a symlink and
 * checks what it opened: a regular file, owned by this process's effective uid or by allow_uid
 * (-1: no other), not writable by others, nor by its group unless its owner was allowed. Returns
 * the descriptor (O_CLOEXEC; the caller closes it) or GB_ENOENT, GB_EACCES ("permission denied",
 * with the file's owner and mode), GB_EREFUSED (the reason) or GB_ESYS, with the path and the
 * reason in err. */
int gb_open_named(const char *path, int allow_uid, char *err, size_t errlen);

/* Section 3.6 step 1: fstat the file (size >= 8192) and map its header read-write.
 * The fd is duplicated; the caller may close its own. Returns NULL with a message in err. */
gb_ring *gb_open(int fd, char *err, size_t errlen);

/* Steps 2-4: identity checks, wait (at most budget_ms) for state READY, geometry checks.
 * GB_OK when the ring is ready and valid; GB_TIMEOUT to call again; GB_EPROTO / GB_ECREATOR /
 * GB_ESYS refuse the segment (gb_error says why). */
int gb_wait_ready(gb_ring *r, int budget_ms);

/* Step 5: become the ring's consumer. GB_OK, GB_EBUSY (another consumer), GB_ESYS. */
int gb_register(gb_ring *r);

/* Waits at most budget_ms for the next batch in stream order and acquires it (READING;
 * sections 3.3-3.5). Releases nothing: the consumer may hold several batches. Returns the slot
 * index or a negative code; GB_EHELD at once when every slot holds a batch this consumer has
 * not released, so that the next batch has no slot (section 3.3 step 5). */
int gb_next(gb_ring *r, int budget_ms);

/* Named rings (PROTOCOL.md 1.1): registers the caller's mapping [addr, addr + len) of the
 * ring's payload (prot: PROT_READ, with PROT_WRITE when writable) with the library's SIGBUS
 * guard, as the control mapping is registered at gb_wait_ready. A touch of a page that a
 * truncation of the file cut off then maps zeros there instead of killing the process, and the
 * next gb_next fails with GB_ELOST. gb_close and gb_discard unregister both, so call them
 * before unmapping addr. A memfd ring (sealed) needs no guard: the call does nothing. */
int gb_guard_payload(gb_ring *r, uintptr_t addr, size_t len, int writable);

/* Releases one held slot (FREE on its next lap, section 3.3 step 4), in any order.
 * GB_OK, GB_ENOTHELD, GB_EFOREIGN (fork child), GB_ECLOSED. Not thread-safe: the caller
 * serialises gb_next, gb_release and gb_close on one ring. */
int gb_release(gb_ring *r, uint32_t slot);

/* gb_release(r, release) when release >= 0 (its error, if any, is returned and nothing is
 * acquired), then gb_next(r, budget_ms): one call per batch for a consumer that gives back one
 * batch as it takes the next. */
int gb_release_next(gb_ring *r, int release, int budget_ms);

/* Number of slots this consumer holds. */
uint32_t gb_held(const gb_ring *r);

/* Stores consumer_state = CLOSED, wakes the slot words, unmaps and frees. Slots still held
 * stay READING (their views may still be read) and count as read; the producers stop.
 * In a process other than the registering one it only unmaps and frees (fork child). */
void gb_close(gb_ring *r);

/* Unmaps and frees without touching the ring (for a forked child or a ring never registered). */
void gb_discard(gb_ring *r);

int gb_geometry_get(const gb_ring *r, gb_geometry *out);
int gb_tensor_get(const gb_ring *r, uint32_t index, gb_tensor *out);
int gb_stats(gb_ring *r, gb_stats_t *out);
/* Counter index (0 .. counter_count-1 of gb_geometry) and its values now. */
int gb_counter_get(const gb_ring *r, uint32_t index, gb_counter *out);
/* Copies the batch description (section 2.9, description_len bytes of UTF-8, not
 * NUL-terminated) into out; returns its length, or GB_ECLOSED when cap is too small. */
int gb_description_get(const gb_ring *r, char *out, size_t cap);
const char *gb_error(const gb_ring *r);

/* Address of the control mapping (header and slot headers), for tests. */
uintptr_t gb_base(const gb_ring *r);

/* Liveness (section 3.5): 1 alive, 0 dead. */
int gb_process_alive(uint32_t pid, uint64_t starttime);
/* Field 22 of /proc/<pid>/stat, 0 if the process does not exist. */
uint64_t gb_process_starttime(uint32_t pid);
/* 1 if the ring's creator is alive. */
int gb_creator_alive(const gb_ring *r);

/* ABI check for the Python side: sizeof of the structs above and the layout version. */
uint32_t gb_abi(uint32_t which);

#endif
