/* sim/sim_epoll.c — readiness sets (ddp_sys_epoll_*, the contract is in
 * ddp/sys.h) for simulated sockets.
 *
 * A set keeps its registrations and a ready list of candidates. Every
 * change of a socket's state already wakes that socket's waiters
 * (sim_net.c's sock_wake); it also calls ddp__sim_epoll_notify, which puts
 * each registration of that socket on its set's ready list and wakes the
 * task waiting on the set. A wait walks only the ready list: a candidate
 * whose socket is ready is reported and moved to the back (level-
 * triggered: it stays a candidate while it is ready; the next wait starts
 * with the ones this one did not get to), one that is not is taken off the
 * list, one whose socket was closed is dropped from the set. So a wait
 * costs O(candidates), however many sockets the set holds, and the order
 * follows the events, which is deterministic per seed. Sets belong to the
 * process that made them and live until the simulation is freed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/fmt.h"
#include "sim_priv.h"

typedef struct ep_set ep_set_t;

typedef struct reg {
    int fd;
    short events;
    uint64_t data;
    ep_set_t *set;
    struct reg *fnext;         /* the socket's next registration */
    struct reg *rnext, **rpprev; /* on the set's ready list (rpprev: the
                                    pointer that points at this one) */
    int ready;                 /* on it */
} reg_t;

struct ep_set {
    int id, proc, open;
    waitq_t waiters;
    reg_t *rhead, **rtailp; /* rtailp: the last rnext, or &rhead */
    int nready;
};

struct sim_epoll {
    ep_set_t **sets;
    int nsets, cap;
    reg_t **byfd; /* socket fd -> its registrations */
    int nbyfd;
};

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (!p)
        ddp__sim_oom("calloc", n * size);
    return p;
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q)
        ddp__sim_oom("realloc", n);
    return q;
}

static ddp_sim_task_t *me(ddp_sys_t *s)
{
    ddp_sim_task_t *t = ddp__sim_current();
    return t ? t : s->impl;
}

static struct sim_epoll *state(ddp_sim_t *sim)
{
    if (!sim->epoll)
        sim->epoll = xcalloc(1, sizeof *sim->epoll);
    return sim->epoll;
}

/* The set ep of t's process, or NULL with the error set. */
static ep_set_t *set_of(ddp_sim_task_t *t, int ep)
{
    struct sim_epoll *E = state(t->sim);
    ep_set_t *s = ep >= 0 && ep < E->nsets ? E->sets[ep] : NULL;
    if (!s || !s->open || s->proc != t->proc) {
        ddp_err_set(-EBADF, "readiness set %d is not open in task %s", ep,
                    t->name);
        return NULL;
    }
    return s;
}

static void ready_unlink(reg_t *r)
{
    ep_set_t *s = r->set;
    if (!r->ready)
        return;
    if (r->rnext)
        r->rnext->rpprev = r->rpprev;
    else
        s->rtailp = r->rpprev;
    *r->rpprev = r->rnext;
    r->ready = 0;
    s->nready--;
}

static void ready_append(reg_t *r)
{
    ep_set_t *s = r->set;
    if (r->ready)
        return;
    r->rnext = NULL;
    r->rpprev = s->rtailp;
    *s->rtailp = r;
    s->rtailp = &r->rnext;
    r->ready = 1;
    s->nready++;
}

static reg_t *reg_find(struct sim_epoll *E, const ep_set_t *s, int fd)
{
    reg_t *r = fd >= 0 && fd < E->nbyfd ? E->byfd[fd] : NULL;
    while (r && r->set != s)
        r = r->fnext;
    return r;
}

static void reg_drop(struct sim_epoll *E, reg_t *r)
{
    ready_unlink(r);
    reg_t **p = &E->byfd[r->fd];
    while (*p != r)
        p = &(*p)->fnext;
    *p = r->fnext;
    free(r);
}

/* Every registration of set s (closing it: rare, so a walk of the
 * socket table is fine). */
static void set_clear(struct sim_epoll *E, const ep_set_t *s)
{
    for (int fd = 0; fd < E->nbyfd; fd++)
        for (reg_t *r = E->byfd[fd], *next; r; r = next) {
            next = r->fnext;
            if (r->set == s)
                reg_drop(E, r);
        }
}

/* Killed or paused: every sim call checks this first (as sim_net.c). */
static int enter(ddp_sim_task_t *t)
{
    return ddp__sim_check_killed(t) || ddp__sim_pause_point(t);
}

int ddp__sim_epoll_create(ddp_sys_t *sys)
{
    ddp_sim_task_t *t = me(sys);
    if (enter(t))
        return DDP_ECANCELED;
    struct sim_epoll *E = state(t->sim);
    if (E->nsets == E->cap) {
        E->cap = E->cap ? E->cap * 2 : 8;
        E->sets = xrealloc(E->sets, sizeof *E->sets * (size_t)E->cap);
    }
    ep_set_t *s = xcalloc(1, sizeof *s);
    s->id = E->nsets;
    s->proc = t->proc;
    s->open = 1;
    s->rtailp = &s->rhead;
    E->sets[E->nsets++] = s;
    return s->id;
}

int ddp__sim_epoll_ctl(ddp_sys_t *sys, int ep, int op, int fd, short events,
                       uint64_t data)
{
    ddp_sim_task_t *t = me(sys);
    if (enter(t))
        return DDP_ECANCELED;
    struct sim_epoll *E = state(t->sim);
    ep_set_t *s = set_of(t, ep);
    if (!s)
        return -EBADF;
    reg_t *r = reg_find(E, s, fd);
    events &= DDP_POLLIN | DDP_POLLOUT;
    switch (op) {
    case DDP_EPOLL_ADD:
        if (!ddp__sim_sock_open(t, fd))
            return ddp_err_set(-EBADF, "socket %d is not open in task %s", fd,
                               t->name);
        if (r)
            return ddp_err_set(-EEXIST, "socket %d is already in set %d", fd,
                               ep);
        if (fd >= E->nbyfd) {
            int n = E->nbyfd ? E->nbyfd : 256;
            while (n <= fd)
                n *= 2;
            E->byfd = xrealloc(E->byfd, sizeof *E->byfd * (size_t)n);
            memset(E->byfd + E->nbyfd, 0,
                   sizeof *E->byfd * (size_t)(n - E->nbyfd));
            E->nbyfd = n;
        }
        r = xcalloc(1, sizeof *r);
        r->fd = fd;
        r->set = s;
        r->fnext = E->byfd[fd];
        E->byfd[fd] = r;
        break;
    case DDP_EPOLL_MOD:
    case DDP_EPOLL_DEL:
        if (!r)
            return ddp_err_set(-ENOENT, "socket %d is not in set %d", fd, ep);
        if (op == DDP_EPOLL_DEL) {
            reg_drop(E, r);
            return 0;
        }
        break;
    default:
        return ddp_err_set(-EINVAL, "epoll_ctl: unknown operation %d", op);
    }
    r->events = events;
    r->data = data;
    ready_append(r); /* the next wait looks at it (as epoll_ctl does) */
    return 0;
}

void ddp__sim_epoll_notify(ddp_sim_t *sim, int fd)
{
    struct sim_epoll *E = sim->epoll;
    if (!E || fd < 0 || fd >= E->nbyfd)
        return;
    for (reg_t *r = E->byfd[fd]; r; r = r->fnext) {
        ready_append(r);
        ddp__waitq_wake_all(sim, &r->set->waiters);
    }
}

int ddp__sim_epoll_wait(ddp_sys_t *sys, int ep, ddp_epoll_event_t *out,
                        int max, int64_t deadline)
{
    ddp_sim_task_t *t = me(sys);
    if (enter(t))
        return DDP_ECANCELED;
    int fe = ddp_fault_fire(DDP_FP_SYS_NET_EPOLL); /* armed points only */
    if (fe) {
        ddp__sim_trace(t->sim, t->id, "fault",
                       "\"point\":\"%s\",\"errno\":\"%s\"",
                       ddp_fault_name(DDP_FP_SYS_NET_EPOLL), strerrorname_np(-fe));
        return fe;
    }
    if (max <= 0)
        return ddp_err_set(-EINVAL, "epoll_wait: no room for events");
    struct sim_epoll *E = state(t->sim);
    for (;;) {
        ep_set_t *s = set_of(t, ep);
        if (!s)
            return -EBADF;
        int got = 0, n = s->nready;
        reg_t *r = s->rhead;
        for (int k = 0; k < n && got < max && r; k++) {
            reg_t *next = r->rnext;
            if (!ddp__sim_sock_open(t, r->fd)) {
                reg_drop(E, r); /* closed: out of the set */
            } else {
                short ev = ddp__sim_sock_ready(t, r->fd, r->events);
                ready_unlink(r);
                if (ev) {
                    out[got++] = (ddp_epoll_event_t){.data = r->data,
                                                     .events = ev};
                    ready_append(r); /* level-triggered: still a candidate */
                }
            }
            r = next;
        }
        if (got)
            return got;
        if (deadline != DDP_DEADLINE_NEVER &&
            ddp__sim_task_now(t) >= deadline)
            return 0;
        sim_wait_t what = {.kind = SIM_WAIT_EPOLL, .num = ep};
        waitq_t *q = &s->waiters;
        int rc = ddp__sim_park(t, deadline, &q, 1, &what);
        if (rc)
            return rc;
    }
}

int ddp__sim_epoll_close(ddp_sys_t *sys, int ep)
{
    ddp_sim_task_t *t = me(sys);
    struct sim_epoll *E = state(t->sim);
    ep_set_t *s = set_of(t, ep);
    if (!s)
        return -EBADF;
    set_clear(E, s);
    s->open = 0;
    return 0;
}

void ddp__sim_epoll_free(ddp_sim_t *sim)
{
    struct sim_epoll *E = sim->epoll;
    if (!E)
        return;
    for (int i = 0; i < E->nsets; i++) {
        set_clear(E, E->sets[i]);
        ddp__waitq_free(&E->sets[i]->waiters);
        free(E->sets[i]);
    }
    free(E->sets);
    free(E->byfd);
    free(E);
    sim->epoll = NULL;
}
