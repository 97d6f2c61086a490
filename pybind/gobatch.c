/* libgobatch: the consumer half of docs/PROTOCOL.md (layout version 1) in C11.
 *
 * Memory ordering follows PROTOCOL.md section 4: state words, waiters, consumer_state and
 * error_state are accessed seq_cst; statistics counters and heartbeats relaxed. Payload, seq and
 * geometry are read after an acquire (seq_cst) load of the word that publishes them. */
#define _GNU_SOURCE
#include "gobatch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "32-bit atomics must be lock-free");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free");
_Static_assert(sizeof(void *) == GB_WORD_BYTES, "gobatch needs a 64-bit build (word_bytes)");

/* ---- layout: every protocol number comes from gobatch_protocol.h, which `go generate ./ring`
 * writes from package ring (held to docs/PROTOCOL.md by ring's tests); none is written here. */
#define SLOT_WORD(lap, st) ((((lap) & GB_LAP_MASK) << GB_SLOT_STATE_BITS) | (uint32_t)(st))
#define TENSOR_FIELD(t, field) (GB_TENSOR_BASE + GB_TENSOR_STRIDE * (t) + (field))
#define ENTRY_FIELD(e, field) (GB_REGISTRY_BASE + GB_REGISTRY_STRIDE * (e) + (field))

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
    /* Slots released with a producer waiting whose wake is deferred (PROTOCOL.md 3.3 step 4:
     * the ring is well ahead, so the producers are woken once for a burst of free slots), and
     * how many: wake_flush wakes them. */
    uint32_t wake_pending[GB_MAX_SLOTS];
    uint32_t wake_count;
    bool wake_deferred[GB_MAX_SLOTS];
    /* When this consumer first saw each registry entry dead while live producers were left to
     * take its claims over (0: not seen dead; section 3.5 step 2, takeover_grace). */
    int64_t dead_since[GB_MAX_PRODUCERS];
    uint64_t dead_word[GB_MAX_PRODUCERS]; /* the entry word seen dead then: a reused entry that dies again starts anew */
    gb_geometry g;
    gb_tensor tensors[GB_MAX_TENSORS];
    char err[1600];
};

/* ---- helpers ---- */

/* Failpoints (PROTOCOL.md appendix A): GOBATCH_FAILPOINT=name[:count[:kill|stop]], read once
 * when the library is loaded, makes the process SIGKILL (or SIGSTOP) itself the count-th time
 * it passes the point called name. Unset, a failpoint is one load of a NULL pointer. */
static struct {
    const char *name; /* NULL: none armed */
    char buf[64];
    long count;
    int sig;
    _Atomic long hits;
} fp;

__attribute__((constructor)) static void failpoint_init(void) {
    const char *e = getenv("GOBATCH_FAILPOINT");
    if (!e || !*e || strlen(e) >= sizeof fp.buf) return;
    strcpy(fp.buf, e);
    fp.count = 1;
    fp.sig = SIGKILL;
    char *c = strchr(fp.buf, ':');
    if (c) {
        *c++ = 0;
        char *a = strchr(c, ':');
        if (a) {
            *a++ = 0;
            if (strcmp(a, "stop") == 0) fp.sig = SIGSTOP;
        }
        long n = strtol(c, NULL, 10);
        if (n > 0) fp.count = n;
    }
    fp.name = fp.buf;
}

/* Bumped in the child of every fork(): check_owner compares it instead of calling getpid (a
 * system call) on every batch, and asks getpid only once it changed. */
static _Atomic uint64_t fork_generation;

static void after_fork_in_child(void) { atomic_fetch_add(&fork_generation, 1); }

__attribute__((constructor)) static void fork_watch_init(void) { pthread_atfork(NULL, NULL, after_fork_in_child); }

static void failpoint(const char *name) {
    if (!fp.name || strcmp(fp.name, name) != 0) return;
    if (atomic_fetch_add(&fp.hits, 1) + 1 == fp.count) raise(fp.sig); /* to this thread (tgkill): a stop reaches it before it runs on */
}

static _Atomic uint32_t *a32(const gb_ring *r, size_t off) {
    return (_Atomic uint32_t *)(void *)(r->base + off);
}
static _Atomic uint64_t *a64(const gb_ring *r, size_t off) {
    return (_Atomic uint64_t *)(void *)(r->base + off);
}
static uint32_t ld32(const gb_ring *r, size_t off) {
    return atomic_load_explicit(a32(r, off), memory_order_relaxed);
}
static uint64_t ld64(const gb_ring *r, size_t off) {
    return atomic_load_explicit(a64(r, off), memory_order_relaxed);
}

static int fail(gb_ring *r, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    return code;
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* FUTEX_WAIT on a word of a shared file mapping (no FUTEX_PRIVATE_FLAG), relative timeout.
 * Returns true if a signal interrupted the wait (EINTR): the caller then returns to Python at
 * once so that its signal handlers (Ctrl-C) run without waiting for the budget to end.
 * On 0, EAGAIN and ETIMEDOUT the caller re-checks its condition. */
static bool futex_wait(_Atomic uint32_t *w, uint32_t val, int64_t timeout_ns) {
    if (timeout_ns <= 0) return false;
    struct timespec ts = {.tv_sec = timeout_ns / 1000000000ll, .tv_nsec = timeout_ns % 1000000000ll};
    return syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, val, &ts, NULL, 0) != 0 && errno == EINTR;
}

static void futex_wake_all(_Atomic uint32_t *w) {
    (void)syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* ---- liveness (section 3.5) ---- */

/* Reads /proc/<pid>/stat: its state (field 3) and starttime (field 22). 1 on success, -1 when
 * the process is gone (ENOENT or ESRCH), 0 when the file could not be read or parsed for another
 * reason (EMFILE, ...), which says nothing about the process (section 3.5). */
static int read_proc_stat(uint32_t pid, char *state, uint64_t *starttime) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%u/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return (errno == ENOENT || errno == ESRCH) ? -1 : 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    int read_errno = errno;
    close(fd);
    if (n < 0) return read_errno == ESRCH ? -1 : 0;
    if (n == 0) return -1; /* the process exited between open and read */
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* comm (field 2) may contain spaces and parentheses */
    if (!p || p[1] != ' ') return 0;
    p += 2;
    *state = *p;
    for (int field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (!p) return 0;
        p++;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    if (end == p || errno) return 0;
    *starttime = v;
    return 1;
}

int gb_process_alive(uint32_t pid, uint64_t starttime) {
    char st;
    uint64_t t;
    if (pid == 0) return 0;
    int rc = read_proc_stat(pid, &st, &t);
    if (rc < 0) return 0;
    if (rc == 0) return 1; /* unknown: only a definite verdict counts as death */
    if (st == 'Z' || st == 'X') return 0;
    return t == starttime;
}

uint64_t gb_process_starttime(uint32_t pid) {
    char st;
    uint64_t t;
    return read_proc_stat(pid, &st, &t) > 0 ? t : 0;
}

int gb_creator_alive(const gb_ring *r) {
    if (!r) return 0;
    return gb_process_alive(r->g.creator_pid, r->g.creator_starttime);
}

/* ---- named segments: the opening rules and the SIGBUS guard (PROTOCOL.md 1.1) ---- */

static const char *file_kind(mode_t m) {
    switch (m & S_IFMT) {
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFSOCK: return "a socket";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFLNK: return "a symbolic link";
    }
    return "not a regular file";
}

/* The owner and mode of path (not followed), for a permission error. */
static void describe_file(const char *path, char *out, size_t len) {
    struct stat st;
    if (lstat(path, &st) == 0)
        snprintf(out, len, "the file belongs to uid %u, mode %#o; you are uid %u", (unsigned)st.st_uid,
                 (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
    else
        snprintf(out, len, "you are uid %u", (unsigned)geteuid());
}

int gb_open_named(const char *path, int allow_uid, char *err, size_t errlen) {
    /* O_NONBLOCK: a FIFO of that name must not block the open; fstat below refuses it. */
    int fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        char who[160];
        struct stat st;
        switch (e) {
        case ENOENT:
            snprintf(err, errlen, "%s does not exist", path);
            return GB_ENOENT;
        case ELOOP:
            snprintf(err, errlen, "%s refused: is a symbolic link (a ring is never opened through one)", path);
            return GB_EREFUSED;
        case EISDIR:
            snprintf(err, errlen, "%s refused: is a directory, not a ring segment", path);
            return GB_EREFUSED;
        case EACCES:
        case EPERM:
            describe_file(path, who, sizeof who);
            snprintf(err, errlen, "%s refused: permission denied (%s)", path, who);
            return GB_EACCES;
        case ENXIO:
        case ENODEV:
        case EOPNOTSUPP:
            snprintf(err, errlen, "%s refused: is %s, not a ring segment (open: %s)", path,
                     lstat(path, &st) == 0 ? file_kind(st.st_mode) : "a special file", strerror(e));
            return GB_EREFUSED;
        }
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(e));
        return GB_ESYS;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "fstat of %s failed: %s", path, strerror(errno));
        close(fd);
        return GB_ESYS;
    }
    bool allowed = allow_uid >= 0 && st.st_uid == (uid_t)allow_uid; /* the owner the caller named */
    int rc = GB_OK;
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s refused: is %s, not a ring segment", path, file_kind(st.st_mode));
        rc = GB_EREFUSED;
    } else if (st.st_uid != geteuid() && !allowed) {
        snprintf(err, errlen,
                 "%s refused: owned by uid %u, not by you (uid %u); accept another user's ring explicitly "
                 "(attach(allow_uid=%u), --allow-uid %u)",
                 path, (unsigned)st.st_uid, (unsigned)geteuid(), (unsigned)st.st_uid, (unsigned)st.st_uid);
        rc = GB_EREFUSED;
    } else if ((st.st_mode & S_IWOTH) || ((st.st_mode & S_IWGRP) && !allowed)) {
        snprintf(err, errlen,
                 "%s refused: writable by group/other (mode %#o): anyone who can write it can cut it short "
                 "under the ring's users",
                 path, (unsigned)(st.st_mode & 07777));
        rc = GB_EREFUSED;
    }
    if (rc != GB_OK) {
        close(fd);
        return rc;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

/* The SIGBUS guard. A truncated tmpfs file makes every touch of a page past its new end raise
 * SIGBUS; for the ranges registered here the handler maps zero-filled anonymous memory over the
 * whole range instead (the faulting access then completes) and marks the entry lost, which the
 * ring's next gb_next reports. Faults elsewhere go to the handler that was installed before
 * ours (or the default action). The handler reads the table with atomics only; entries are
 * taken and given back under a mutex. */
#define GB_GUARDS 128
static struct {
    _Atomic uintptr_t lo, hi; /* [lo, hi), lo == 0: free */
    _Atomic int prot;
    _Atomic int lost;
} guards[GB_GUARDS];
static pthread_mutex_t guard_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction bus_prev;
static bool bus_installed;

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
    uintptr_t a = (uintptr_t)si->si_addr;
    if (si->si_code > 0) { /* a fault, not a kill(2) */
        for (int i = 0; i < GB_GUARDS; i++) {
            uintptr_t lo = atomic_load(&guards[i].lo), hi = atomic_load(&guards[i].hi);
            if (lo == 0 || a < lo || a >= hi) continue;
            void *p = mmap((void *)lo, hi - lo, atomic_load(&guards[i].prot), MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS,
                           -1, 0);
            if (p != MAP_FAILED) {
                atomic_store(&guards[i].lost, 1);
                return;
            }
        }
    }
    if (bus_prev.sa_flags & SA_SIGINFO) {
        bus_prev.sa_sigaction(sig, si, uc);
    } else if (bus_prev.sa_handler != SIG_DFL && bus_prev.sa_handler != SIG_IGN) {
        bus_prev.sa_handler(sig);
    } else {
        /* Not ours: die of it as the process would have without the guard. */
        sigaction(SIGBUS, &bus_prev, NULL);
        raise(sig);
    }
}

/* Registers [addr, addr + len) and returns its entry, or -1 when the table is full or the
 * handler cannot be installed (the range is then unguarded, as before this guard existed). */
static int guard_add(uintptr_t addr, size_t len, int prot) {
    int idx = -1;
    pthread_mutex_lock(&guard_mu);
    if (!bus_installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        bus_installed = sigaction(SIGBUS, &sa, &bus_prev) == 0;
    }
    for (int i = 0; bus_installed && i < GB_GUARDS; i++) {
        if (atomic_load(&guards[i].lo) != 0) continue;
        atomic_store(&guards[i].lost, 0);
        atomic_store(&guards[i].prot, prot);
        atomic_store(&guards[i].hi, addr + len);
        atomic_store(&guards[i].lo, addr);
        idx = i;
        break;
    }
    pthread_mutex_unlock(&guard_mu);
    return idx;
}

static void guard_drop(int *idx) {
    if (*idx < 0) return;
    pthread_mutex_lock(&guard_mu);
    atomic_store(&guards[*idx].lo, 0);
    atomic_store(&guards[*idx].hi, 0);
    pthread_mutex_unlock(&guard_mu);
    *idx = -1;
}

static bool guard_lost(int idx) { return idx >= 0 && atomic_load(&guards[idx].lost); }

int gb_guard_payload(gb_ring *r, uintptr_t addr, size_t len, int writable) {
    if (!r || !r->ready) return GB_ECLOSED;
    if (!r->named || r->guard[1] >= 0) return GB_OK;
    r->guard[1] = guard_add(addr, len, PROT_READ | (writable ? PROT_WRITE : 0));
    return GB_OK;
}

/* A named segment cut short: found by the guard (a touch of a cut page), or by comparing the
 * file's size with segment_bytes (one fstat per call: a batch is never handed out of a file
 * already cut). Sticky. A memfd ring is sealed and never checked. */
static int segment_lost(gb_ring *r) {
    if (!r->named) return GB_OK;
    if (!r->lost && !guard_lost(r->guard[0]) && !guard_lost(r->guard[1])) {
        struct stat st;
        if (fstat(r->fd, &st) != 0 || (uint64_t)st.st_size >= r->g.segment_bytes) return GB_OK;
    }
    r->lost = true;
    struct stat st;
    long long size = fstat(r->fd, &st) == 0 ? (long long)st.st_size : -1;
    return fail(r, GB_ELOST,
                "the ring segment was truncated: the file holds %lld bytes, the ring needs %llu; another process "
                "cut it short under the mapping, and its batches are lost (a Loader's memfd ring is sealed "
                "against this)",
                size, (unsigned long long)r->g.segment_bytes);
}

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
    g->segment_bytes = ld64(r, GB_H_SEGMENT_BYTES);
    g->slot_count = ld32(r, GB_H_SLOT_COUNT);
    g->tensor_count = ld32(r, GB_H_TENSOR_COUNT);
    g->slot_stride = ld64(r, GB_H_SLOT_STRIDE);
    g->slot_bytes = ld64(r, GB_H_SLOT_BYTES);
    g->payload_offset = ld64(r, GB_H_PAYLOAD_OFFSET);
    uint64_t sho = ld64(r, GB_H_SLOT_HEADERS_OFFSET);
    g->start_batch = ld64(r, GB_H_START_BATCH);
    g->total_batches = ld64(r, GB_H_TOTAL_BATCHES);
    g->batch_size = ld32(r, GB_H_BATCH_SIZE);
    g->payload_align = ld32(r, GB_H_PAYLOAD_ALIGN);
    g->nonce = ld64(r, GB_H_NONCE);
    g->creator_pid = ld32(r, GB_H_CREATOR_PID);
    g->creator_flags = ld32(r, GB_H_CREATOR_FLAGS);
    g->creator_starttime = ld64(r, GB_H_CREATOR_STARTTIME);
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
        size_t len = 0;
        while (len < GB_TENSOR_NAME_BYTES && d[GB_T_NAME + len]) len++;
        if (len == 0 || len > GB_MAX_TENSOR_NAME) return BAD("tensor %u: name is %s", t, len ? "not NUL-terminated" : "empty");
        for (size_t k = 0; k < len; k++) {
            unsigned char c = d[GB_T_NAME + k];
            if (!GB_TENSOR_NAME_CHAR(c))
                return BAD("tensor %u: name has byte 0x%02x at %zu (allowed: " GB_TENSOR_NAME_CHARS ")", t, c, k);
        }
        for (size_t k = len; k < GB_TENSOR_NAME_BYTES; k++)
            if (d[GB_T_NAME + k]) return BAD("tensor %u: name padding is not NUL", t);
        memcpy(x->name, d + GB_T_NAME, len);
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

/* Gone (ENOENT/ESRCH) or a zombie, judged by the pid alone: a CLAIMING claim or registry entry
 * whose starttime may not be written yet (section 3.5). */
static bool pid_gone(uint32_t pid) {
    char state;
    uint64_t t;
    int rc = read_proc_stat(pid, &state, &t);
    return rc < 0 || (rc > 0 && (state == 'Z' || state == 'X'));
}

/* consumer_state and consumer_pid are the halves of the u64 at GB_H_CONSUMER_STATE (section
 * 2.4): a claim and its pid are published by one CAS. */
#define CLAIM_WORD(st, pid) ((uint64_t)(st) | (uint64_t)(uint32_t)(pid) << 32)

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

/* ---- consuming (sections 3.3 - 3.5) ---- */

static _Atomic uint32_t *slot_word(const gb_ring *r, uint32_t slot, size_t off) {
    return a32(r, GB_SLOT_BASE + (size_t)slot * GB_SLOT_STRIDE + off);
}

/* The consumer is done with a held batch: count it read (section 2.4) and forget the hold. */
static void count_read(gb_ring *r, uint32_t slot) {
    atomic_fetch_add_explicit(a64(r, GB_H_BATCHES_READ), 1, memory_order_relaxed);
    atomic_fetch_add_explicit(a64(r, GB_H_BYTES_READ), r->g.slot_bytes, memory_order_relaxed);
    r->held_lap[slot] = 0;
    r->held_count--;
}

/* Whether the producers are well ahead (section 3.3 step 4): the batch half a ring past the next
 * one to acquire is READY already. One load of that slot's state word. */
static bool well_ahead(const gb_ring *r) {
    uint32_t n = r->g.slot_count;
    uint64_t k = r->j + n / 2;
    if (n < 2 || (r->g.total_batches != 0 && k >= r->g.total_batches)) return false;
    uint32_t lap = (uint32_t)((k / n) & GB_LAP_MASK);
    return atomic_load_explicit(slot_word(r, (uint32_t)(k % n), GB_S_STATE), memory_order_seq_cst) ==
           SLOT_WORD(lap, GB_SLOT_READY);
}

/* Wakes the producers of every slot whose wake was deferred, if they still wait. */
static void wake_flush(gb_ring *r) {
    for (uint32_t i = 0; i < r->wake_count; i++) {
        uint32_t slot = r->wake_pending[i];
        r->wake_deferred[slot] = false;
        if (atomic_load_explicit(slot_word(r, slot, GB_S_WAITERS), memory_order_seq_cst) != 0)
            futex_wake_all(slot_word(r, slot, GB_S_STATE));
    }
    r->wake_count = 0;
}

/* Section 3.3 step 4 for one held slot, in any order: FREE on the next lap, then wake its
 * waiters, or, while the ring is well ahead, leave the wake to wake_flush (the next call that
 * finds the ring no longer well ahead, or that is about to wait): the producers then wake once
 * for half a ring of free slots instead of once per slot. */
static void release_slot(gb_ring *r, uint32_t slot) {
    uint32_t lap = r->held_lap[slot] - 1;
    count_read(r, slot);
    _Atomic uint32_t *w = slot_word(r, slot, GB_S_STATE);
    atomic_store_explicit(w, SLOT_WORD(lap + 1, GB_SLOT_FREE), memory_order_seq_cst);
    if (atomic_load_explicit(slot_word(r, slot, GB_S_WAITERS), memory_order_seq_cst) != 0) {
        if (!well_ahead(r))
            futex_wake_all(w);
        else if (!r->wake_deferred[slot]) {
            r->wake_deferred[slot] = true;
            r->wake_pending[r->wake_count++] = slot;
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

    uint32_t slot = (uint32_t)(r->j % r->g.slot_count);
    uint32_t lap = (uint32_t)((r->j / r->g.slot_count) & GB_LAP_MASK);
    /* The batch's slot still holds an earlier batch this consumer has not released: no producer
     * can fill it, so a wait would never end (section 3.3 step 1). */
    if (r->held_lap[slot] != 0)
        return fail(r, GB_EHELD, "the next batch (%llu) needs slot %u, which still holds batch %llu (%u of %u slots held)",
                    (unsigned long long)(r->g.start_batch + r->j), slot,
                    (unsigned long long)(r->g.start_batch + r->j - r->g.slot_count), r->held_count, r->g.slot_count);
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
         * CLOSED precedes these loads (seq_cst): a word nobody waits on needs no system call. */
        r->wake_count = 0;
        for (uint32_t s = 0; s < r->g.slot_count; s++)
            if (atomic_load_explicit(slot_word(r, s, GB_S_WAITERS), memory_order_seq_cst) != 0)
                futex_wake_all(slot_word(r, s, GB_S_STATE));
    }
    gb_discard(r);
}

/* ---- introspection ---- */

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
