/* libgobatch: failpoints, the fork watch, error text and process liveness (section 3.5). */
#include "gb_internal.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---- */

/* Failpoints (PROTOCOL.md appendix A): GOBATCH_FAILPOINT=name[:count[:kill|stop]], read once
 * when the library is loaded, makes the process SIGKILL (or SIGSTOP) itself the count-th time
 * it passes the point called name. Unset, a failpoint is a call that loads a NULL pointer. */
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
_Atomic uint64_t fork_generation;

static void after_fork_in_child(void) { atomic_fetch_add(&fork_generation, 1); }

__attribute__((constructor)) static void fork_watch_init(void) { pthread_atfork(NULL, NULL, after_fork_in_child); }

void failpoint(const char *name) {
    if (!fp.name || strcmp(fp.name, name) != 0) return;
    if (atomic_fetch_add(&fp.hits, 1) + 1 == fp.count) raise(fp.sig); /* to this thread (tgkill): a stop reaches it before it runs on */
}

int fail(gb_ring *r, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    return code;
}

/* ---- liveness (section 3.5) ---- */

/* Reads /proc/<pid>/stat: its state (field 3) and starttime (field 22). 1 on success, -1 when
 * the process is gone (ENOENT or ESRCH), 0 when the file could not be read or parsed for another
 * reason (EMFILE, ...), which says nothing about the process (section 3.5). */
int read_proc_stat(uint32_t pid, char *state, uint64_t *starttime) {
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

/* Gone (ENOENT/ESRCH) or a zombie, judged by the pid alone: a CLAIMING claim or registry entry
 * whose starttime may not be written yet (section 3.5). */
bool pid_gone(uint32_t pid) {
    char state;
    uint64_t t;
    int rc = read_proc_stat(pid, &state, &t);
    return rc < 0 || (rc > 0 && (state == 'Z' || state == 'X'));
}
