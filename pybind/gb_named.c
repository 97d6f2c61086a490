/* libgobatch: named segments, the opening rules and the SIGBUS guard (PROTOCOL.md 1.1). */
#include "gb_internal.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

/* ---- named segments: the opening rules and the SIGBUS guard (PROTOCOL.md 1.1) ---- */

const char *file_kind(mode_t m) {
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
int guard_add(uintptr_t addr, size_t len, int prot) {
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

void guard_drop(int *idx) {
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
int segment_lost(gb_ring *r) {
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
