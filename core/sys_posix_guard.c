/* core/sys_posix_guard.c — a guard process that kills a runner's process
 * groups when the runner is gone, however it went (SIGKILL included).
 *
 * A parent-death signal (PR_SET_PDEATHSIG) reaches only the runner's own
 * children; what they fork (a shell's command, a training job's workers)
 * lives on, reparented to init. The guard is a fork of the runner in a
 * session of its own, holding the read end of a socket pair whose other
 * end only the runner holds. The runner sends each group it starts (and
 * each it has killed and reaped); when that end closes, at the runner's
 * end or death, the guard SIGKILLs every group it still watches and exits.
 * (A child the runner forks without exec closes the runner's end: see
 * ends[].)
 * After fork the guard makes only async-signal-safe calls: the runner may
 * have threads. */
#include "ddp/host.h"
#include "ddp/sys.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ddp/err.h"

#define GUARD_MAX 1024 /* groups watched at once (a run has at most ~70) */
#define GUARDS 16      /* guards of one process at once */

struct ddp_sys_guard {
    pid_t pid;
    int fd; /* the runner's end: closing it fires the guard */
};

/* The runner's ends of its guards. Only the runner may hold one: a child
 * forked without exec (close-on-exec does not act) would keep its guard
 * from ever seeing the runner go, so each fork's child closes them. */
static _Atomic int ends[GUARDS] = {[0 ... GUARDS - 1] = -1};
static pthread_once_t ends_once = PTHREAD_ONCE_INIT;

static void close_ends_in_child(void)
{
    for (int i = 0; i < GUARDS; i++) {
        int fd = atomic_exchange(&ends[i], -1);
        if (fd >= 0)
            close(fd);
    }
}

static void ends_handler(void) { pthread_atfork(NULL, NULL, close_ends_in_child); }

static void ends_set(int fd, int on)
{
    for (int i = 0; i < GUARDS; i++) {
        int want = on ? -1 : fd;
        if (atomic_compare_exchange_strong(&ends[i], &want, on ? fd : -1))
            return;
    }
}

/* Every descriptor but keep (which becomes 3) closed, 0-2 on /dev/null:
 * the guard must hold no socket or pipe of the runner's (a listening port,
 * a test's output pipe) open after the runner closes it. */
static void guard_fds(int keep)
{
    int null = open("/dev/null", O_RDWR);
    for (int i = 0; i < 3 && null >= 0; i++)
        dup2(null, i);
    if (keep != 3 && dup2(keep, 3) < 0)
        _exit(1);
#ifdef SYS_close_range
    if (syscall(SYS_close_range, 4U, ~0U, 0U) == 0)
        return;
#endif
    struct rlimit rl;
    long max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536 ? (long)rl.rlim_cur
                                                                         : 65536;
    for (long i = 4; i < max; i++)
        close((int)i);
}

/* The guard: groups (int32 > 0 watch, < 0 forget) until EOF, then the
 * kill. */
static void guard_main(int fd)
{
    setsid(); /* no terminal's or group's signal meant for the runner */
    guard_fds(fd);
    static pid_t groups[GUARD_MAX];
    int n = 0;
    for (;;) {
        int32_t v;
        ssize_t r = read(3, &v, sizeof v);
        if (r < 0 && errno == EINTR)
            continue;
        if (r != (ssize_t)sizeof v)
            break;
        for (int i = 0; v < 0 && i < n; i++)
            if (groups[i] == -v)
                groups[i--] = groups[--n];
        if (v > 0 && n < GUARD_MAX)
            groups[n++] = v;
    }
    for (int i = 0; i < n; i++)
        kill(-groups[i], SIGKILL);
    _exit(0);
}

int ddp_sys_guard_start(ddp_sys_guard_t **out)
{
    *out = NULL;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return ddp_err_set(-errno, "the run's guard: socketpair: %s", strerror(errno));
    ddp_sys_guard_t *g = calloc(1, sizeof *g);
    pid_t p = g ? fork() : -1;
    if (p == 0) {
        close(sv[0]);
        guard_main(sv[1]);
    }
    int e = errno;
    close(sv[1]);
    if (p < 0) {
        close(sv[0]);
        free(g);
        return ddp_err_set(g ? -e : -ENOMEM, "the run's guard: fork: %s",
                           strerror(g ? e : ENOMEM));
    }
    g->pid = p;
    g->fd = sv[0];
    pthread_once(&ends_once, ends_handler);
    ends_set(g->fd, 1);
    *out = g;
    return 0;
}

void ddp_sys_guard_watch(ddp_sys_guard_t *g, long pgid, int on)
{
    if (!g || pgid <= 0 || pgid > INT32_MAX)
        return;
    int32_t v = on ? (int32_t)pgid : -(int32_t)pgid;
    ssize_t r;
    do
        r = send(g->fd, &v, sizeof v, MSG_NOSIGNAL);
    while (r < 0 && errno == EINTR);
}

void ddp_sys_guard_end(ddp_sys_guard_t *g)
{
    if (!g)
        return;
    ends_set(g->fd, 0);
    close(g->fd);
    /* it kills what is still watched and exits at once: a bound, 5 s */
    for (int i = 0; i < 2500; i++) {
        if (waitpid(g->pid, NULL, WNOHANG) != 0)
            break;
        nanosleep(&(struct timespec){.tv_nsec = 2000000}, NULL);
    }
    free(g);
}
