/* core/sys_epoll.c — the readiness-set wrappers of ddp/sys.h.
 *
 * A sys with epoll ops (POSIX, the simulator) is called directly. One
 * without them (a test's or a user's fake sys) gets the same contract
 * emulated over its poll op: each set keeps its poll array between waits
 * (registration changes it, a wait does not rebuild it), and a wait polls
 * the whole array, O(registered), starting its report after the last
 * socket the previous wait reported so that none starves. Emulated handles
 * index one process-wide table (a mutex guards the table; a set itself is
 * used by one thread at a time, as the contract says). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/sys.h"

typedef struct emu_set {
    ddp_pollfd_t *pfds;
    uint64_t *data;
    int n, cap;
    int next; /* where the next wait starts reporting */
} emu_set_t;

static pthread_mutex_t emu_mu = PTHREAD_MUTEX_INITIALIZER;
static emu_set_t **emu_sets;
static int emu_nsets;

static int native(const ddp_sys_t *s) { return s->ops->epoll_create != NULL; }

static emu_set_t *emu_get(int ep)
{
    pthread_mutex_lock(&emu_mu);
    emu_set_t *e = ep >= 0 && ep < emu_nsets ? emu_sets[ep] : NULL;
    pthread_mutex_unlock(&emu_mu);
    if (!e)
        ddp_err_set(-EBADF, "readiness set %d does not exist", ep);
    return e;
}

static int emu_create(void)
{
    emu_set_t *e = calloc(1, sizeof *e);
    if (!e)
        return ddp_err_set(-ENOMEM, "out of memory for a readiness set");
    pthread_mutex_lock(&emu_mu);
    int slot = 0;
    while (slot < emu_nsets && emu_sets[slot])
        slot++;
    if (slot == emu_nsets) {
        emu_set_t **t = realloc(emu_sets, sizeof *t * (size_t)(emu_nsets + 8));
        if (!t) {
            pthread_mutex_unlock(&emu_mu);
            free(e);
            return ddp_err_set(-ENOMEM, "out of memory for a readiness set");
        }
        memset(t + emu_nsets, 0, sizeof *t * 8);
        emu_sets = t;
        emu_nsets += 8;
    }
    emu_sets[slot] = e;
    pthread_mutex_unlock(&emu_mu);
    return slot;
}

static int emu_find(const emu_set_t *e, int fd)
{
    for (int i = 0; i < e->n; i++)
        if (e->pfds[i].fd == fd)
            return i;
    return -1;
}

static int emu_ctl(int ep, int op, int fd, short events, uint64_t data)
{
    emu_set_t *e = emu_get(ep);
    if (!e)
        return -EBADF;
    int i = emu_find(e, fd);
    events &= DDP_POLLIN | DDP_POLLOUT;
    if (op == DDP_EPOLL_ADD) {
        if (fd < 0)
            return ddp_err_set(-EBADF, "epoll_ctl: socket %d", fd);
        if (i >= 0)
            return ddp_err_set(-EEXIST, "socket %d is already in set %d", fd,
                               ep);
        if (e->n == e->cap) {
            int nc = e->cap ? e->cap * 2 : 16;
            ddp_pollfd_t *p = realloc(e->pfds, sizeof *p * (size_t)nc);
            if (p)
                e->pfds = p;
            uint64_t *d = p ? realloc(e->data, sizeof *d * (size_t)nc) : NULL;
            if (!d)
                return ddp_err_set(-ENOMEM, "out of memory for a readiness "
                                            "set");
            e->data = d;
            e->cap = nc;
        }
        e->pfds[e->n] = (ddp_pollfd_t){.fd = fd, .events = events};
        e->data[e->n++] = data;
        return 0;
    }
    if (op != DDP_EPOLL_MOD && op != DDP_EPOLL_DEL)
        return ddp_err_set(-EINVAL, "epoll_ctl: unknown operation %d", op);
    if (i < 0)
        return ddp_err_set(-ENOENT, "socket %d is not in set %d", fd, ep);
    if (op == DDP_EPOLL_MOD) {
        e->pfds[i].events = events;
        e->data[i] = data;
        return 0;
    }
    e->n--;
    e->pfds[i] = e->pfds[e->n];
    e->data[i] = e->data[e->n];
    return 0;
}

static int emu_wait(ddp_sys_t *s, int ep, ddp_epoll_event_t *out, int max,
                    int64_t deadline)
{
    emu_set_t *e = emu_get(ep);
    if (!e)
        return -EBADF;
    if (max <= 0)
        return ddp_err_set(-EINVAL, "epoll_wait: no room for events");
    int rc = s->ops->poll(s, e->pfds, e->n, deadline);
    if (rc <= 0)
        return rc;
    int got = 0, start = e->next < e->n ? e->next : 0;
    for (int k = 0; k < e->n && got < max; k++) {
        int i = (start + k) % e->n;
        if (!e->pfds[i].revents)
            continue;
        out[got++] = (ddp_epoll_event_t){.data = e->data[i],
                                         .events = e->pfds[i].revents};
        e->next = i + 1;
    }
    return got;
}

static int emu_close(int ep)
{
    emu_set_t *e = emu_get(ep);
    if (!e)
        return -EBADF;
    pthread_mutex_lock(&emu_mu);
    emu_sets[ep] = NULL;
    pthread_mutex_unlock(&emu_mu);
    free(e->pfds);
    free(e->data);
    free(e);
    return 0;
}

int ddp_sys_epoll_create(ddp_sys_t *s)
{
    return native(s) ? s->ops->epoll_create(s) : emu_create();
}

int ddp_sys_epoll_ctl(ddp_sys_t *s, int ep, int op, int fd, short events,
                      uint64_t data)
{
    return native(s) ? s->ops->epoll_ctl(s, ep, op, fd, events, data)
                     : emu_ctl(ep, op, fd, events, data);
}

int ddp_sys_epoll_wait(ddp_sys_t *s, int ep, ddp_epoll_event_t *out, int max,
                       int64_t deadline)
{
    return native(s) ? s->ops->epoll_wait(s, ep, out, max, deadline)
                     : emu_wait(s, ep, out, max, deadline);
}

int ddp_sys_epoll_close(ddp_sys_t *s, int ep)
{
    return native(s) ? s->ops->epoll_close(s, ep) : emu_close(ep);
}
