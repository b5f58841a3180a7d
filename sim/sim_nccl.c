/* sim/sim_nccl.c — the simulator's NCCL: the library the sim sys hands the
 * nccl backend (ddp_sys_nccl_api), in place of the real libnccl.so.2 and
 * libcudart that the POSIX sys loads. backends/nccl.c runs unchanged on it.
 *
 * What is modelled (docs/simulator.md, "The simulated NCCL"):
 *  - interfaces: the node's, as ddp_sys_ifaddrs lists them (lo, eth0 and
 *    a scenario's iface lines); NCCL_SOCKET_IFNAME picks among them by
 *    NCCL's rules (a comma list of prefixes; leading ^ excludes, leading =
 *    matches exactly; unset: any but lo/docker, else lo) and
 *    NCCL_SOCKET_FAMILY (AF_INET / AF_INET6) filters. Nothing matching:
 *    NCCL's "Bootstrap : no socket interface found", ncclInvalidUsage.
 *  - ncclGetUniqueId: the root listens on that interface and a root thread
 *    gathers the ranks; the id carries its address.
 *  - ncclCommInitRankConfig (non-blocking): an init thread listens for its
 *    ring peer, connects to the root (refused connects retried
 *    NCCL_SOCKET_RETRY_CNT times, NCCL_SOCKET_RETRY_SLEEP_MSEC apart,
 *    growing), sends its rank and address; the root answers each rank with
 *    its ring neighbour's address once all have come; each rank connects
 *    to its next and accepts its previous. ncclCommGetAsyncError reads
 *    ncclInProgress until then.
 *  - collectives (allreduce, broadcast, allgather) over the ring, run by a
 *    thread per call; cudaStreamQuery says cudaErrorNotReady until it ends.
 *  - ncclCommAbort stops the threads (every wait is cut into slices of
 *    SLICE_NS and checks the abort flag) and closes the sockets.
 * All of it runs on the task's own sys: sockets, sleeps and threads are the
 * simulator's, so faults (partition, refuse, crash) act on the bootstrap
 * traffic and every wait is on the virtual clock. No real time, no
 * randomness: a seed gives the same trace.
 *
 * Not modelled: GPUs (device memory is host memory; `gpus N` gives N
 * virtual devices per node), split (ncclCommSplit is absent, as in NCCL
 * < 2.18), NVLink/IB transports, NCCL's own timeouts beyond connect
 * retries. Memory lives until the simulation is freed (ddp_sim_own), so a
 * crashed rank leaks nothing. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/env.h"
#include "ddp/nccl_api.h"
#include "sim_priv.h"

int ddp_sim_has_nccl(void) { return ddp__sim_nccl_api() != NULL; }

#ifndef DDP_HAVE_NCCL_H

const ddp_nccl_api_t *ddp__sim_nccl_api(void) { return NULL; }

#else

#define SLICE_NS (100 * DDP_NS_PER_MS) /* longest wait between abort checks */
#define UID_MAGIC UINT64_C(0x6464707369d3cc1d)
#define HELLO_MAGIC 0x6e63636cU
#define CHUNK 4096

/* ------------------------------------------------------------ context */

static ddp_sim_task_t *cur(void) { return ddp__sim_current(); }
static ddp_sys_t *cur_sys(void) { return &cur()->sys; }

static void *own_calloc(size_t n)
{
    void *p = calloc(1, n);
    if (p)
        ddp_sim_own(cur()->sim, p);
    return p;
}

/* NCCL keeps its last error per process: 512 bytes, allocated at the
 * process's first error (most never have one). Without the memory the
 * error is not kept: ncclGetLastError gives "", as before any error. */
#define NCCL_ERR_MAX 512
static void last_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void last_err(const char *fmt, ...)
{
    ddp_sim_task_t *t = cur();
    ddp_sim_task_t *p = t->sim->tasks[t->proc];
    if (!p->nccl_err && !(p->nccl_err = malloc(NCCL_ERR_MAX)))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->nccl_err, NCCL_ERR_MAX, fmt, ap);
    va_end(ap);
}

static long env_long(const char *key, long dflt)
{
    const char *v = ddp_env_get(ddp_sys_env(cur_sys()), key);
    char *end;
    long x = v && *v ? strtol(v, &end, 10) : dflt;
    return v && *v && *end == '\0' && x >= 0 ? x : dflt;
}

/* The address NCCL's bootstrap uses on this node and its interface's name
 * (ifname: 16 bytes, or NULL), or ncclInvalidUsage with the last error
 * naming the setting and the node's interfaces. */
static ncclResult_t boot_addr(ddp_addr_t *out, char *ifname)
{
    ddp_sys_t *sys = cur_sys();
    ddp_ifaddr_t all[16]; /* the node's interfaces: lo, eth0, iface lines */
    int n = ddp_sys_ifaddrs(sys, all, 16);
    n = n < 0 ? 0 : n;
    const char *spec = ddp_env_get(ddp_sys_env(sys), "NCCL_SOCKET_IFNAME");
    const char *fam = ddp_env_get(ddp_sys_env(sys), "NCCL_SOCKET_FAMILY");
    int got = ddp__nccl_boot_iface(all, n, spec, fam);
    if (got >= 0) {
        *out = all[got].addr;
        out->port = 0;
        if (ifname)
            snprintf(ifname, 16, "%s", all[got].name);
        return ncclSuccess;
    }
    char have[160] = "", host[64];
    ddp_sys_hostname(sys, host, sizeof host);
    for (int i = 0; i < n; i++) {
        char ip[DDP_ADDR_STRLEN];
        size_t l = strlen(have);
        snprintf(have + l, sizeof have - l, "%s%s %s", i ? ", " : "", all[i].name,
                 ddp_addr_format_host(&all[i].addr, ip, sizeof ip));
    }
    last_err("Bootstrap : no socket interface found (NCCL_SOCKET_IFNAME=%s%s%s matches "
             "none of %s's interfaces: %s; name one of them, or ^lo for any but "
             "loopback)",
             spec ? spec : "(unset)", fam ? ", NCCL_SOCKET_FAMILY=" : "", fam ? fam : "",
             host, have);
    return ncclInvalidUsage;
}

/* ------------------------------------------------------------ sockets */

typedef struct hello {
    uint32_t magic;
    int32_t rank, nranks;
    ddp_addr_t addr; /* the sender's ring listener */
    char ifname[16]; /* the interface it is on (NCCL_SOCKET_IFNAME's pick) */
} hello_t;

/* The root's answer to each rank: its ring neighbours once every rank
 * came, or (gone) the rank whose connection to the root closed first. */
typedef struct reply {
    int32_t gone;
    hello_t next, prev; /* gone: next is the rank that went */
} reply_t;

/* "rank 2 at 10.0.1.1:40000 (its interface eth0)" */
static const char *peer_text(const hello_t *h, char *buf, size_t n)
{
    char at[DDP_ADDR_STRLEN];
    snprintf(buf, n, "rank %d at %s (its interface %s)", h->rank,
             ddp_addr_format(&h->addr, at, sizeof at), h->ifname[0] ? h->ifname : "?");
    return buf;
}

/* A wait cut into slices so an abort is seen; 0, or a negative code
 * (DDP_ECANCELED when aborted). */
static int io_all(int *abort_flag, int fd, void *buf, size_t n, int sending)
{
    ddp_sys_t *sys = cur_sys();
    size_t done = 0;
    while (done < n) {
        if (*abort_flag)
            return DDP_ECANCELED;
        int64_t dl = ddp_sys_now(sys) + SLICE_NS;
        ssize_t r = sending ? ddp_sys_send(sys, fd, (char *)buf + done, n - done, dl)
                            : ddp_sys_recv(sys, fd, (char *)buf + done, n - done, dl);
        if (r == DDP_ETIMEOUT || r == -EAGAIN)
            continue;
        if (r == 0)
            return -ECONNRESET; /* EOF: the peer went away */
        if (r < 0)
            return (int)r;
        done += (size_t)r;
    }
    return 0;
}

static int accept_sliced(int *abort_flag, int lfd)
{
    ddp_sys_t *sys = cur_sys();
    for (;;) {
        if (*abort_flag)
            return DDP_ECANCELED;
        int fd = ddp_sys_accept(sys, lfd, NULL, ddp_sys_now(sys) + SLICE_NS);
        if (fd != DDP_ETIMEOUT && fd != -EAGAIN)
            return fd;
    }
}

/* NCCL's socket connect: refused (or a connect slice that timed out)
 * retried with a growing sleep, NCCL_SOCKET_RETRY_CNT times. */
static int connect_retry(int *abort_flag, const ddp_addr_t *to)
{
    ddp_sys_t *sys = cur_sys();
    long tries = env_long("NCCL_SOCKET_RETRY_CNT", 34);
    int64_t nap = env_long("NCCL_SOCKET_RETRY_SLEEP_MSEC", 100) * DDP_NS_PER_MS;
    for (long k = 1;; k++) {
        if (*abort_flag)
            return DDP_ECANCELED;
        int fd = ddp_sys_connect(sys, to, ddp_sys_now(sys) + SLICE_NS);
        if (fd >= 0 || (fd != -ECONNREFUSED && fd != DDP_ETIMEOUT) || k > tries)
            return fd;
        for (int64_t until = ddp_sys_now(sys) + nap * k; ddp_sys_now(sys) < until;) {
            if (*abort_flag)
                return DDP_ECANCELED;
            int64_t s = ddp_sys_now(sys) + SLICE_NS;
            int rc = ddp_sys_sleep_until(sys, s < until ? s : until);
            if (rc)
                return rc;
        }
    }
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        ddp_sys_close(cur_sys(), *fd);
    *fd = -1;
}

/* The port a listener got. Its address stays the interface's: NCCL
 * advertises the interface it chose (lo: 127.0.0.1), whatever the socket
 * reports. */
static uint16_t bound_port(int lfd)
{
    ddp_addr_t a = {0};
    ddp_sys_local_addr(cur_sys(), lfd, &a);
    return a.port;
}

static const char *addr_text(const ddp_addr_t *a, char *buf)
{
    return ddp_addr_format(a, buf, DDP_ADDR_STRLEN);
}

/* ------------------------------------------------------------ the root */

typedef struct root {
    uint32_t id;
    int proc; /* the process that created it (its rank 0's) */
    int lfd;
    int stop;
    int done;
    ddp_thread_t th;
} root_t;

typedef struct uid {
    uint64_t magic;
    uint32_t root_id;
    ddp_addr_t addr;
    char ifname[16]; /* the root's interface */
} sn_uid_t;

_Static_assert(sizeof(sn_uid_t) <= sizeof(ncclUniqueId), "the id must fit");

/* What the root gathered: a socket and a hello per rank that came. */
typedef struct gather {
    int nranks, got, gone; /* gone: the rank whose connection closed (-1) */
    int *fds;
    hello_t *hellos;
} gather_t;

/* The first rank that came whose connection to the root closed since (EOF
 * or reset: its process exited), else -1. A rank sends nothing more until
 * the root answers, so any byte read is its end. */
static int first_gone(const gather_t *g)
{
    ddp_sys_t *sys = cur_sys();
    for (int i = 0; g->fds && i < g->nranks; i++) {
        char byte;
        ssize_t r = g->fds[i] < 0 ? -EAGAIN : ddp_sys_recv(sys, g->fds[i], &byte, 1, ddp_sys_now(sys));
        if (r == 0 || (r < 0 && r != -EAGAIN && r != DDP_ETIMEOUT))
            return i;
    }
    return -1;
}

/* The next rank's connection; between accept slices, a rank that came and
 * went ends the wait (DDP_EPEER_LOST, g->gone): NCCL's root reads EOF
 * there and fails rather than wait for ranks that can no longer form a
 * ring. */
static int root_accept(root_t *r, gather_t *g)
{
    ddp_sys_t *sys = cur_sys();
    for (;;) {
        if (r->stop)
            return DDP_ECANCELED;
        int fd = ddp_sys_accept(sys, r->lfd, NULL, ddp_sys_now(sys) + SLICE_NS);
        if (fd != DDP_ETIMEOUT && fd != -EAGAIN)
            return fd;
        if ((g->gone = first_gone(g)) >= 0)
            return DDP_EPEER_LOST;
    }
}

/* Takes rank h's connection fd into g; 0, or a negative code. */
static int root_take(gather_t *g, int fd, const hello_t *h)
{
    if (g->nranks < 0) {
        g->nranks = h->nranks;
        g->fds = own_calloc(sizeof *g->fds * (size_t)g->nranks);
        g->hellos = own_calloc(sizeof *g->hellos * (size_t)g->nranks);
        for (int i = 0; g->fds && i < g->nranks; i++)
            g->fds[i] = -1;
        if (!g->fds || !g->hellos)
            return -ENOMEM;
    }
    if (h->nranks != g->nranks || h->rank < 0 || h->rank >= g->nranks || g->fds[h->rank] >= 0) {
        last_err("Bootstrap Root : rank %d of %d does not fit the %d ranks seen first "
                 "(two jobs share one unique id?)",
                 h->rank, h->nranks, g->nranks);
        ddp_sys_close(cur_sys(), fd);
        return 0;
    }
    g->fds[h->rank] = fd;
    g->hellos[h->rank] = *h;
    g->got++;
    return 0;
}

/* Each rank that came hears its ring neighbours, or which rank went. */
static void root_answer(root_t *r, const gather_t *g, int rc)
{
    for (int i = 0; i < g->nranks; i++) {
        if (g->fds[i] < 0 || i == g->gone)
            continue;
        reply_t a = {.gone = g->gone >= 0};
        if (g->gone >= 0)
            a.next = g->hellos[g->gone];
        else if (rc == 0)
            a.next = g->hellos[(i + 1) % g->nranks],
            a.prev = g->hellos[(i + g->nranks - 1) % g->nranks];
        else
            continue;
        io_all(&r->stop, g->fds[i], &a, sizeof a, 1);
    }
}

static int root_main(ddp_sys_t *sys, void *arg)
{
    (void)sys;
    root_t *r = arg;
    gather_t g = {.nranks = -1, .gone = -1};
    int rc = 0;
    while (rc == 0 && (g.nranks < 0 || g.got < g.nranks)) {
        int fd = root_accept(r, &g);
        if (fd < 0) {
            rc = fd;
            break;
        }
        hello_t h;
        if (io_all(&r->stop, fd, &h, sizeof h, 0) != 0 || h.magic != HELLO_MAGIC) {
            ddp_sys_close(cur_sys(), fd); /* a stranger or a rank that went: NCCL warns, goes on */
            continue;
        }
        if ((rc = root_take(&g, fd, &h)) != 0)
            ddp_sys_close(cur_sys(), fd);
    }
    if (g.fds)
        root_answer(r, &g, rc);
    for (int i = 0; g.fds && i < g.nranks; i++)
        close_fd(&g.fds[i]);
    close_fd(&r->lfd);
    r->done = 1;
    return 0;
}

/* Roots of this simulation, found again by the id's root_id. */
static root_t *root_find(uint32_t id)
{
    ddp_sim_t *sim = cur()->sim;
    for (int i = 0; i < sim->nnccl_roots; i++)
        if (((root_t *)sim->nccl_roots[i])->id == id)
            return sim->nccl_roots[i];
    return NULL;
}

static void root_stop(root_t *r)
{
    if (!r || r->proc != cur()->proc || !r->th)
        return;
    r->stop = 1;
    ddp_sys_t *sys = cur_sys();
    ddp_sys_thread_join(sys, r->th, NULL, ddp_sys_now(sys) + 10 * DDP_NS_PER_S);
    r->th = 0;
}

static ncclResult_t sn_get_unique_id(ncclUniqueId *out)
{
    if (!out)
        return ncclInvalidArgument;
    ddp_addr_t a;
    char ifname[16];
    ncclResult_t res = boot_addr(&a, ifname);
    if (res != ncclSuccess)
        return res;
    ddp_sys_t *sys = cur_sys();
    ddp_sim_t *sim = cur()->sim;
    root_t *r = own_calloc(sizeof *r);
    void **grown = realloc(sim->nccl_roots, sizeof *grown * (size_t)(sim->nnccl_roots + 1));
    if (!r || !grown)
        return ncclSystemError;
    sim->nccl_roots = grown;
    r->id = (uint32_t)sim->nnccl_roots + 1;
    r->proc = cur()->proc;
    r->lfd = ddp_sys_listen(sys, &a, 16384);
    char at[DDP_ADDR_STRLEN];
    if (r->lfd < 0) {
        last_err("Bootstrap : cannot listen on %s: %s", addr_text(&a, at), strerror(-r->lfd));
        return ncclSystemError;
    }
    a.port = bound_port(r->lfd);
    sim->nccl_roots[sim->nnccl_roots++] = r;
    if (ddp_sys_thread_start(sys, root_main, r, "nccl bootstrap root", &r->th) != 0) {
        close_fd(&r->lfd);
        return ncclSystemError;
    }
    sn_uid_t u = {.magic = UID_MAGIC, .root_id = r->id, .addr = a};
    snprintf(u.ifname, sizeof u.ifname, "%s", ifname);
    memset(out, 0, sizeof *out);
    memcpy(out, &u, sizeof u);
    return ncclSuccess;
}

/* ------------------------------------------------------------ comms */

typedef struct sn_stream sn_stream_t;

typedef struct sn_comm {
    int proc, rank, nranks;
    sn_uid_t uid;
    ncclResult_t state; /* ncclInProgress until the ring is up */
    int abort;
    int lfd, next_fd, prev_fd;
    hello_t me; /* this rank's hello: its ring listener and interface */
    ddp_thread_t init_th;
    sn_stream_t *busy; /* the stream whose collective runs now */
} sn_comm_t;

struct sn_stream {
    ddp_thread_t th;
    int running, ended;
    sn_comm_t *comm;
    /* the collective */
    int kind; /* 0 allreduce, 1 broadcast, 2 allgather */
    const void *src;
    void *dst;
    size_t count;
    ncclDataType_t dt;
    ncclRedOp_t op;
    int root;
};

static ncclResult_t fail_io(sn_comm_t *c, int rc, const char *what)
{
    if (rc == DDP_ECANCELED && c->abort)
        return ncclInvalidUsage; /* aborted: nobody reads it */
    last_err("%s (rank %d of %d): %s", what, c->rank, c->nranks,
             rc < 0 && rc > -4096 ? strerror(-rc) : ddp_strerror(rc));
    return rc == -ENOMEM ? ncclSystemError : ncclRemoteError;
}

/* The cause as NCCL's socket layer words it. */
static const char *io_cause(int rc)
{
    if (rc == -ECONNRESET)
        return "socketProgress: Connection closed by remote peer";
    if (rc == DDP_ETIMEOUT)
        return "Connection timed out";
    return rc < 0 && rc > -4096 ? strerror(-rc) : ddp_strerror(rc);
}

/* A bootstrap step with peer failed: NCCL's words, the peer's rank,
 * address and interface, and this rank's own. */
static ncclResult_t fail_peer(sn_comm_t *c, int rc, const char *what, const hello_t *peer)
{
    if (rc == DDP_ECANCELED && c->abort)
        return ncclInvalidUsage; /* aborted: nobody reads it */
    char p[128], at[DDP_ADDR_STRLEN];
    last_err("Bootstrap : %s %s failed : %s (this is rank %d of %d at %s, interface %s): "
             "remote process exited or there was a network error",
             what, peer_text(peer, p, sizeof p), io_cause(rc), c->rank, c->nranks,
             ddp_addr_format_host(&c->me.addr, at, sizeof at), c->me.ifname);
    return rc == -ENOMEM ? ncclSystemError : ncclRemoteError;
}

/* The root's rank 0, as a peer: the unique id's address and interface. */
static hello_t root_peer(const sn_comm_t *c)
{
    hello_t h = {.rank = 0, .addr = c->uid.addr};
    snprintf(h.ifname, sizeof h.ifname, "%s", c->uid.ifname);
    return h;
}

/* This rank's hello to the root and the root's answer (*a). */
static ncclResult_t boot_root(sn_comm_t *c, reply_t *a)
{
    hello_t root = root_peer(c);
    int fd = connect_retry(&c->abort, &c->uid.addr), rc = 0;
    if (fd < 0)
        return fail_peer(c, fd, "socketStartConnect: Connect to the root,", &root);
    ncclResult_t res = ncclSuccess;
    if ((rc = io_all(&c->abort, fd, &c->me, sizeof c->me, 1)) != 0)
        res = fail_peer(c, rc, "sending this rank's address to the root,", &root);
    else if ((rc = io_all(&c->abort, fd, a, sizeof *a, 0)) != 0)
        res = fail_peer(c, rc, "waiting for the ring from the root,", &root);
    else if (a->gone) {
        char p[128], at[DDP_ADDR_STRLEN];
        last_err("Bootstrap : %s closed its connection to the root before every rank came "
                 "(socketProgress: Connection closed by remote peer %s): remote process "
                 "exited or there was a network error (this is rank %d of %d, interface %s)",
                 peer_text(&a->next, p, sizeof p),
                 ddp_addr_format_host(&a->next.addr, at, sizeof at), c->rank, c->nranks,
                 c->me.ifname);
        res = ncclRemoteError;
    }
    close_fd(&fd);
    return res;
}

/* The ring: connect to the next rank, accept the previous one. */
static ncclResult_t boot_ring(sn_comm_t *c, const reply_t *a)
{
    int rc = 0;
    int32_t me = c->rank, prev = -1;
    if ((c->next_fd = connect_retry(&c->abort, &a->next.addr)) < 0)
        return fail_peer(c, c->next_fd, "socketStartConnect: Connect to the next ring peer,",
                         &a->next);
    if ((rc = io_all(&c->abort, c->next_fd, &me, sizeof me, 1)) != 0)
        return fail_peer(c, rc, "ring hello to the next peer,", &a->next);
    if ((c->prev_fd = accept_sliced(&c->abort, c->lfd)) < 0)
        return fail_peer(c, c->prev_fd, "accepting the previous ring peer,", &a->prev);
    if ((rc = io_all(&c->abort, c->prev_fd, &prev, sizeof prev, 0)) != 0)
        return fail_peer(c, rc, "ring hello from the previous peer,", &a->prev);
    if (prev != a->prev.rank) {
        last_err("Bootstrap : rank %d heard rank %d as its previous ring peer, not rank %d",
                 c->rank, prev, a->prev.rank);
        return ncclInternalError;
    }
    return ncclSuccess;
}

static int init_main(ddp_sys_t *sys, void *arg)
{
    (void)sys;
    sn_comm_t *c = arg;
    char at[DDP_ADDR_STRLEN];
    c->me = (hello_t){.magic = HELLO_MAGIC, .rank = c->rank, .nranks = c->nranks};
    ncclResult_t res = boot_addr(&c->me.addr, c->me.ifname);
    if (res == ncclSuccess && (c->lfd = ddp_sys_listen(cur_sys(), &c->me.addr, 128)) < 0) {
        last_err("Bootstrap : cannot listen on %s: %s", addr_text(&c->me.addr, at),
                 strerror(-c->lfd));
        res = ncclSystemError;
    }
    reply_t a;
    if (res == ncclSuccess) {
        c->me.addr.port = bound_port(c->lfd);
        res = boot_root(c, &a);
    }
    if (res == ncclSuccess)
        res = boot_ring(c, &a);
    close_fd(&c->lfd);
    c->state = res;
    return 0;
}

static ncclResult_t sn_init_rank_config(ncclComm_t *out, int nranks, ncclUniqueId id,
                                        int rank, ncclConfig_t *cfg)
{
    if (!out || nranks < 1 || rank < 0 || rank >= nranks)
        return ncclInvalidArgument;
    *out = NULL;
    sn_uid_t u;
    memcpy(&u, &id, sizeof u);
    if (u.magic != UID_MAGIC) {
        last_err("Bootstrap : the unique id is not one of ncclGetUniqueId's");
        return ncclInvalidArgument;
    }
    if (!cfg || cfg->blocking != 0) {
        /* A blocking init would wait with no deadline: not modelled. */
        last_err("simulated NCCL: only non-blocking init (ncclConfig_t.blocking = 0)");
        return ncclInvalidUsage;
    }
    ddp_addr_t a;
    ncclResult_t res = boot_addr(&a, NULL); /* NCCL's bootstrapNetInit: synchronous */
    if (res != ncclSuccess)
        return res;
    sn_comm_t *c = own_calloc(sizeof *c);
    if (!c)
        return ncclSystemError;
    c->proc = cur()->proc, c->rank = rank, c->nranks = nranks, c->uid = u;
    c->state = ncclInProgress;
    c->lfd = c->next_fd = c->prev_fd = -1;
    if (ddp_sys_thread_start(cur_sys(), init_main, c, "nccl bootstrap", &c->init_th) != 0)
        return ncclSystemError;
    *out = (ncclComm_t)(void *)c;
    return ncclInProgress;
}

static sn_comm_t *C(ncclComm_t comm) { return (sn_comm_t *)(void *)comm; }

static void join(ddp_thread_t *th)
{
    if (*th) {
        ddp_sys_t *sys = cur_sys();
        ddp_sys_thread_join(sys, *th, NULL, ddp_sys_now(sys) + 10 * DDP_NS_PER_S);
        *th = 0;
    }
}

static ncclResult_t sn_get_async_error(ncclComm_t comm, ncclResult_t *st)
{
    if (!comm || !st)
        return ncclInvalidArgument;
    *st = C(comm)->state;
    return ncclSuccess;
}

/* Abort and destroy: stop every thread of the comm, close its sockets. */
static ncclResult_t sn_comm_end(ncclComm_t comm)
{
    sn_comm_t *c = C(comm);
    if (!c)
        return ncclInvalidArgument;
    c->abort = 1;
    join(&c->init_th);
    if (c->busy)
        join(&c->busy->th);
    if (c->rank == 0)
        root_stop(root_find(c->uid.root_id));
    close_fd(&c->lfd);
    close_fd(&c->next_fd);
    close_fd(&c->prev_fd);
    if (c->state == ncclInProgress)
        c->state = ncclInvalidUsage;
    return ncclSuccess;
}

static ncclResult_t sn_comm_finalize(ncclComm_t comm)
{
    return comm ? ncclSuccess : ncclInvalidArgument;
}

static ncclResult_t sn_comm_count(const ncclComm_t comm, int *n)
{
    if (!comm || !n)
        return ncclInvalidArgument;
    *n = C(comm)->nranks;
    return ncclSuccess;
}

static ncclResult_t sn_comm_user_rank(const ncclComm_t comm, int *r)
{
    if (!comm || !r)
        return ncclInvalidArgument;
    *r = C(comm)->rank;
    return ncclSuccess;
}

/* ------------------------------------------------------------ collectives */

static size_t dt_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

/* Sends out[0..n) to the next rank while receiving n bytes from the
 * previous one into in, a chunk at a time (both directions move, so no
 * rank's window fills up). */
static int ring_step(sn_comm_t *c, const uint8_t *out, uint8_t *in, size_t n)
{
    for (size_t o = 0; o < n; o += CHUNK) {
        size_t k = n - o < CHUNK ? n - o : CHUNK;
        int rc = io_all(&c->abort, c->next_fd, (void *)(out + o), k, 1);
        if (rc == 0)
            rc = io_all(&c->abort, c->prev_fd, in + o, k, 0);
        if (rc)
            return rc;
    }
    return 0;
}

static int coll_main(ddp_sys_t *sys, void *arg)
{
    (void)sys;
    sn_stream_t *s = arg;
    sn_comm_t *c = s->comm;
    size_t es = dt_size(s->dt), bytes = s->count * es;
    int n = c->nranks, rc = 0;
    size_t total = s->kind == 2 ? bytes * (size_t)n : bytes;
    uint8_t *cur_buf = malloc(total ? total : 1), *in = malloc(total ? total : 1);
    if (!cur_buf || !in)
        rc = -ENOMEM;
    if (rc == 0 && s->kind == 0) {
        /* Each step passes on what came from the previous rank: after n-1
         * steps every rank has added every other's data once. */
        uint8_t *acc = s->dst;
        memmove(acc, s->src, bytes);
        memcpy(cur_buf, s->src, bytes);
        for (int k = 1; rc == 0 && k < n; k++) {
            rc = ring_step(c, cur_buf, in, bytes);
            if (rc == 0 && ddp_nccl_reduce(acc, in, s->count, s->dt, s->op) != 0)
                rc = -EINVAL;
            memcpy(cur_buf, in, bytes);
        }
    } else if (rc == 0 && s->kind == 1) {
        /* The root's data travels the ring once. */
        int dist = (c->rank - s->root + n) % n;
        if (dist == 0)
            memmove(s->dst, s->src, bytes);
        else
            rc = io_all(&c->abort, c->prev_fd, s->dst, bytes, 0);
        if (rc == 0 && dist != n - 1)
            rc = io_all(&c->abort, c->next_fd, s->dst, bytes, 1);
    } else if (rc == 0) {
        /* Allgather: rank r's block moves one hop per step. */
        uint8_t *dst = s->dst;
        memmove(dst + (size_t)c->rank * bytes, s->src, bytes);
        for (int k = 0; rc == 0 && k < n - 1; k++) {
            int send_blk = (c->rank - k + n) % n, recv_blk = (c->rank - k - 1 + n) % n;
            rc = ring_step(c, dst + (size_t)send_blk * bytes, dst + (size_t)recv_blk * bytes,
                           bytes);
        }
    }
    free(cur_buf);
    free(in);
    if (rc)
        c->state = fail_io(c, rc, "NET/Socket : collective over the ring failed");
    s->ended = 1;
    return 0;
}

static ncclResult_t enqueue(sn_stream_t *s, ncclComm_t comm, int kind, const void *src,
                            void *dst, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                            int root)
{
    sn_comm_t *c = C(comm);
    if (!c || !s || !dt_size(dt) || (kind == 1 && (root < 0 || root >= c->nranks)))
        return ncclInvalidArgument;
    if (c->state != ncclSuccess)
        return ncclInvalidUsage;
    if (s->running || c->busy) {
        last_err("simulated NCCL: one collective at a time per communicator and stream");
        return ncclInvalidUsage;
    }
    *s = (sn_stream_t){.running = 1, .comm = c, .kind = kind, .src = src, .dst = dst,
                       .count = count, .dt = dt, .op = op, .root = root};
    c->busy = s;
    if (ddp_sys_thread_start(cur_sys(), coll_main, s, "nccl collective", &s->th) != 0) {
        s->running = 0, c->busy = NULL;
        return ncclSystemError;
    }
    return ncclSuccess;
}

static ncclResult_t sn_allreduce(const void *src, void *dst, size_t count, ncclDataType_t dt,
                                 ncclRedOp_t op, ncclComm_t comm, cudaStream_t st)
{
    return enqueue((sn_stream_t *)(void *)st, comm, 0, src, dst, count, dt, op, 0);
}

static ncclResult_t sn_broadcast(const void *src, void *dst, size_t count, ncclDataType_t dt,
                                 int root, ncclComm_t comm, cudaStream_t st)
{
    return enqueue((sn_stream_t *)(void *)st, comm, 1, src, dst, count, dt, ncclSum, root);
}

static ncclResult_t sn_allgather(const void *src, void *dst, size_t count, ncclDataType_t dt,
                                 ncclComm_t comm, cudaStream_t st)
{
    return enqueue((sn_stream_t *)(void *)st, comm, 2, src, dst, count, dt, ncclSum, 0);
}

static const char *sn_error_string(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

static const char *sn_last_error(ncclComm_t comm)
{
    (void)comm;
    ddp_sim_task_t *t = cur();
    const char *e = t->sim->tasks[t->proc]->nccl_err;
    return e ? e : "";
}

static ncclResult_t sn_get_version(int *v)
{
    if (!v)
        return ncclInvalidArgument;
    *v = NCCL_VERSION_CODE; /* the nccl.h built against */
    return ncclSuccess;
}

/* ------------------------------------------------------------ CUDA */

static cudaError_t sn_get_device_count(int *n)
{
    if (!n)
        return cudaErrorInvalidValue;
    *n = cur()->sim->o.gpus;
    return *n > 0 ? cudaSuccess : cudaErrorNoDevice;
}

static cudaError_t sn_set_device(int d)
{
    if (d < 0 || d >= cur()->sim->o.gpus)
        return cudaErrorInvalidDevice;
    cur()->cuda_device = d;
    return cudaSuccess;
}

static cudaError_t sn_malloc(void **p, size_t n)
{
    if (!p)
        return cudaErrorInvalidValue;
    *p = own_calloc(n ? n : 1);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

/* Device memory is the simulation's: freed with it. */
static cudaError_t sn_free(void *p)
{
    (void)p;
    return cudaSuccess;
}

static cudaError_t sn_memcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k)
{
    (void)k;
    if (n && (!d || !s))
        return cudaErrorInvalidValue;
    memmove(d, s, n);
    return cudaSuccess;
}

static cudaError_t sn_stream_create(cudaStream_t *s)
{
    if (!s)
        return cudaErrorInvalidValue;
    sn_stream_t *st = own_calloc(sizeof *st);
    *s = (cudaStream_t)(void *)st;
    return st ? cudaSuccess : cudaErrorMemoryAllocation;
}

/* Done once its collective's thread has ended (joined here). */
static cudaError_t sn_stream_query(cudaStream_t st)
{
    sn_stream_t *s = (sn_stream_t *)(void *)st;
    if (!s)
        return cudaErrorInvalidValue;
    if (s->running && !s->ended)
        return cudaErrorNotReady;
    if (s->running) {
        join(&s->th);
        s->running = 0;
        if (s->comm->busy == s)
            s->comm->busy = NULL;
    }
    return cudaSuccess;
}

static cudaError_t sn_stream_destroy(cudaStream_t st)
{
    sn_stream_t *s = (sn_stream_t *)(void *)st;
    if (s && s->running) {
        s->comm->abort = 1;
        join(&s->th);
        s->running = 0;
    }
    return cudaSuccess;
}

static const char *sn_cuda_error_string(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected (simulated: the "
                                   "scenario has no `gpus`)";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorNotReady: return "device not ready";
    default: return "invalid argument";
    }
}

static const ddp_nccl_api_t sim_api = {
    .get_unique_id = sn_get_unique_id,
    .init_rank_config = sn_init_rank_config,
    .get_async_error = sn_get_async_error,
    .comm_abort = sn_comm_end,
    .comm_destroy = sn_comm_end,
    .comm_finalize = sn_comm_finalize,
    .allreduce = sn_allreduce,
    .broadcast = sn_broadcast,
    .allgather = sn_allgather,
    .comm_split = NULL,
    .comm_count = sn_comm_count,
    .comm_user_rank = sn_comm_user_rank,
    .error_string = sn_error_string,
    .last_error = sn_last_error,
    .get_version = sn_get_version,
    .get_device_count = sn_get_device_count,
    .set_device = sn_set_device,
    .cuda_malloc = sn_malloc,
    .cuda_free = sn_free,
    .memcpy = sn_memcpy,
    .stream_create = sn_stream_create,
    .stream_destroy = sn_stream_destroy,
    .stream_query = sn_stream_query,
    .cuda_error_string = sn_cuda_error_string,
    .version = NCCL_VERSION_CODE,
    .cudart_name = "simulated",
};

const ddp_nccl_api_t *ddp__sim_nccl_api(void) { return &sim_api; }

#endif /* DDP_HAVE_NCCL_H */
