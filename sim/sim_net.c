/* sim/sim_net.c — the virtual network and the sim sys ops table.
 *
 * Sockets live in one table per simulation; fd numbers are never reused in a
 * run, so a stale reference can never reach a new socket. A connect sends a
 * SYN event to the target node after the link latency; the listener's accept
 * queue (bounded by the backlog) takes it, or a missing listener answers
 * ECONNREFUSED; a dropped SYN (partition, full backlog, dead node) is
 * retransmitted at 1, 2, 4 ... s like Linux until the caller's deadline.
 * Data is delivered as events in FIFO order per direction, after latency +
 * size/bandwidth; under a bandwidth fault a node's segments to other nodes
 * also queue on its uplink, each leaving size*8/rate after the one before.
 * The calls keep the POSIX sys's semantics: short reads, EOF, ECONNRESET,
 * EADDRINUSE, deadlines, -EAGAIN for "try once".
 *
 * Flow control: a stream's bytes sent and not yet read by the peer (in
 * flight or waiting in its receive queue) never exceed the receive window
 * (opts.rcvbuf, 256 KiB by default), so a reader that falls behind blocks
 * its writer, as a full socket buffer does: send() writes what fits and
 * waits (up to its deadline) while nothing fits, and POLLOUT says whether
 * anything fits. A read that empties the window below full wakes the
 * writer at once. Received data stays in the segments the sender queued;
 * recv gives each one back as it is consumed (to a small pool per size
 * class, seg_new), so memory follows what is unread, not what a run ever
 * sent.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/fmt.h"
#include "core/sys_nccl_priv.h"
#include "ddp/nccl_api.h"
#include "sim_priv.h"

enum { SK_LISTEN = 1, SK_STREAM };
enum { ST_CONNECTING = 1, ST_ESTABLISHED, ST_CLOSED };

/* A delivered piece of a stream, waiting to be read. */
typedef struct seg {
    struct seg *next;
    size_t len, off;
    int cls; /* size class (seg_new), or -1: not pooled */
    uint8_t data[];
} seg_t;

/* Segments are recycled. A run sends hundreds of thousands of them, and
 * each is read soon after it was sent: a freed one waits in a LIFO of its
 * power-of-two size class (64 B ... 64 KiB of data, at most SEG_POOL_BYTES
 * of them per class), and the next send of that size takes
 * the one freed last, whose lines are still in the cache. Through malloc,
 * every request of a kilobyte or more made the allocator consolidate the
 * small chunks freed since the last one, walking cold memory: 14 % of the
 * cache misses of a 16,384-rank init. Under ASan a pooled segment's bytes
 * are poisoned, so a read of a freed segment is still reported. */
#define SEG_MIN_SHIFT 6
#define SEG_CLASSES SIM_SEG_CLASSES
#define SEG_POOL_BYTES (256u << 10) /* 4 of the largest class */

#ifdef SIM_ASAN
#include <sanitizer/asan_interface.h>
#define SEG_POISON(g) ASAN_POISON_MEMORY_REGION((g)->data, (size_t)1 << ((g)->cls + SEG_MIN_SHIFT))
#define SEG_UNPOISON(g) ASAN_UNPOISON_MEMORY_REGION((g)->data, (size_t)1 << ((g)->cls + SEG_MIN_SHIFT))
#else
#define SEG_POISON(g) ((void)(g))
#define SEG_UNPOISON(g) ((void)(g))
#endif

static int seg_class(size_t n)
{
    int c = 0;
    while (c < SEG_CLASSES && ((size_t)1 << (c + SEG_MIN_SHIFT)) < n)
        c++;
    return c < SEG_CLASSES ? c : -1;
}

static seg_t *seg_new(ddp_sim_t *sim, size_t n)
{
    int c = seg_class(n);
    seg_t *g;
    if (c >= 0 && sim->seg_pool[c]) {
        g = sim->seg_pool[c];
        sim->seg_pool[c] = g->next;
        sim->seg_pooled[c]--;
        SEG_UNPOISON(g);
    } else {
        g = malloc(sizeof *g + (c >= 0 ? (size_t)1 << (c + SEG_MIN_SHIFT) : n));
        if (!g)
            return NULL;
        g->cls = c;
    }
    g->len = n;
    g->off = 0;
    return g;
}

static void seg_free(ddp_sim_t *sim, seg_t *g)
{
    int c = g->cls;
    if (c < 0 || sim->seg_pooled[c] >= (int)(SEG_POOL_BYTES >> (c + SEG_MIN_SHIFT))) {
        free(g);
        return;
    }
    SEG_POISON(g);
    g->next = sim->seg_pool[c];
    sim->seg_pool[c] = g;
    sim->seg_pooled[c]++;
}

void ddp__sim_seg_free(ddp_sim_t *sim, void *seg)
{
    if (seg)
        seg_free(sim, seg);
}

static void seg_pool_free(ddp_sim_t *sim)
{
    for (int c = 0; c < SEG_CLASSES; c++) {
        for (seg_t *g = sim->seg_pool[c], *n; g; g = n) {
            SEG_UNPOISON(g);
            n = g->next;
            free(g);
        }
        sim->seg_pool[c] = NULL;
        sim->seg_pooled[c] = 0;
    }
}

typedef struct sock {
    int fd, type, owner, node;
    int closed; /* by its owner */
    ddp_addr_t local, remote;
    ddp_addr_t bind; /* a listener's: what it was bound to (any, or one address) */
    waitq_t waiters;
    /* listener */
    int backlog;
    int *acceptq; /* a FIFO: acceptq[acc_head .. acc_head + nacc) */
    int nacc, acc_cap, acc_head;
    /* stream */
    int state, peer, connect_err, syn_tries;
    seg_t *rx_head, *rx_tail; /* delivered, unread */
    size_t rx_bytes;
    size_t unacked; /* sent and not yet read by the peer (the window) */
    int rx_eof, rx_reset, tx_shut;
    int64_t tx_last; /* arrival time of the last byte sent (FIFO) */
    int64_t sent, reset_after;
    int lnext; /* next listener in the same hash chain */
} sock_t;

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q)
        ddp__sim_oom("realloc", n);
    return q;
}

static sock_t *sock_get(ddp_sim_t *sim, int fd)
{
    return fd >= 0 && fd < sim->nsocks ? sim->socks[fd] : NULL;
}

static void own_add(ddp_sim_t *sim, int task, int fd)
{
    ddp_sim_task_t *t = sim->tasks[task];
    if (t->nfds == t->fds_cap) {
        t->fds_cap = t->fds_cap ? t->fds_cap * 2 : 8;
        t->fds = xrealloc(t->fds, sizeof *t->fds * (size_t)t->fds_cap);
    }
    t->fds[t->nfds++] = fd;
}

static sock_t *sock_new(ddp_sim_t *sim, int type, int owner, int node)
{
    if (sim->nsocks == sim->socks_cap) {
        sim->socks_cap = sim->socks_cap ? sim->socks_cap * 2 : 256;
        sim->socks = xrealloc(sim->socks, sizeof *sim->socks * (size_t)sim->socks_cap);
    }
    sock_t *s = calloc(1, sizeof *s);
    if (!s)
        ddp__sim_oom("a socket", sizeof *s);
    s->fd = sim->nsocks;
    s->type = type;
    s->owner = owner;
    s->node = node;
    s->peer = -1;
    s->reset_after = -1;
    s->lnext = -1;
    sim->socks[sim->nsocks++] = s;
    own_add(sim, owner, s->fd);
    return s;
}

/* The helpers that copy a node's interface table (32 entries, 1.7 KiB) are
 * never inlined: inlined, the table was in the frame of every connect and
 * resolve of a simulated rank, used or not (docs/simulator.md § 1). */

/* 1 when node `from` has an interface (not lo) whose network holds a. */
DDP_NOINLINE static int shares_net(const ddp_sim_t *sim, int from, const ddp_addr_t *a)
{
    ddp_ifaddr_t ifs[32];
    int n = ddp__sim_node_ifs(sim, from, ifs, 32);
    for (int i = 0; i < n; i++)
        if (strcmp(ifs[i].name, "lo") && ddp_addr_in_net(a, &ifs[i].addr, ifs[i].prefix))
            return 1;
    return 0;
}

DDP_NOINLINE static int has_addr(const ddp_sim_t *sim, int node, const ddp_addr_t *a)
{
    ddp_ifaddr_t ifs[32];
    int n = ddp__sim_node_ifs(sim, node, ifs, 32);
    for (int i = 0; i < n; i++) {
        ddp_addr_t x = ifs[i].addr;
        x.port = a->port;
        if (ddp_addr_equal(&x, a))
            return 1;
    }
    return 0;
}

int ddp__sim_route(const ddp_sim_t *sim, int from, const ddp_addr_t *a)
{
    if (ddp_addr_is_loopback(a))
        return -2;
    int n = a->family == 4 ? ddp__sim_node_by_ipv4(sim, a->ip) : -1;
    if (!sim->custom_ifs) /* every node one address on one network */
        return n;
    if (has_addr(sim, from, a))
        return from;
    if (n >= 0 && !sim->nodes[n].eth0_set)
        return shares_net(sim, from, a) ? n : -1;
    for (int j = 0; j < sim->nnodes; j++)
        if (j != from && sim->nodes[j].nifs && has_addr(sim, j, a))
            return shares_net(sim, from, a) ? j : -1;
    return -1;
}

/* 1 when the node has an address of that family besides loopback. */
DDP_NOINLINE static int family_routed(const ddp_sim_t *sim, int node, int family)
{
    ddp_ifaddr_t ifs[32];
    int n = ddp__sim_node_ifs(sim, node, ifs, 32);
    for (int i = 0; i < n; i++)
        if (ifs[i].addr.family == family && strcmp(ifs[i].name, "lo"))
            return 1;
    return 0;
}

/* A listener bound to `bind` takes a connection to dst: "::" takes both
 * families, "0.0.0.0" IPv4 only, an address only itself. */
static int bind_takes(const ddp_addr_t *bind, const ddp_addr_t *dst)
{
    if (ddp_addr_is_any(bind))
        return bind->family == 6 || dst->family == 4;
    int len = bind->family == 4 ? 4 : 16;
    return bind->family == dst->family && !memcmp(bind->ip, dst->ip, (size_t)len);
}

/* The calling task: a sys is shared by a process's threads, as in POSIX. */
static ddp_sim_task_t *me(ddp_sys_t *s)
{
    ddp_sim_task_t *t = ddp__sim_current();
    return t ? t : s->impl;
}

/* Sockets belong to processes: any thread of the owner may use them. */
static int same_proc(ddp_sim_t *sim, int owner, const ddp_sim_task_t *t)
{
    return owner >= 0 && sim->tasks[owner]->proc == t->proc;
}

/* Latency from node a to node b (0 on the same node's loopback... still a
 * small cost so that ordering is by events, not by call order). */
static int64_t link_delay(ddp_sim_t *sim, int a, int b, int64_t *extra_out,
                          int *dropped, int64_t *heal_at)
{
    int64_t lat = a == b ? sim->o.latency_ns / 10 + 1 : sim->o.latency_ns;
    if (sim->o.jitter_ns > 0)
        lat += (int64_t)ddp_rng_below(&sim->rng, (uint64_t)sim->o.jitter_ns);
    int64_t extra = 0;
    *heal_at = 0;
    *dropped = a != b && ddp__sim_link(sim, a, b, &extra, heal_at);
    if (extra_out)
        *extra_out = extra;
    return lat + extra;
}

static void schedule(ddp_sim_t *sim, int64_t t, int type, int a, int b,
                     int64_t x, void *data, size_t len)
{
    sim_event_t ev = {.t = t, .type = type, .a = a, .b = b, .x = x,
                      .data = data, .len = len};
    ddp__sim_push_event(sim, ev);
}

static void hold_segment(ddp_sim_t *sim, int fd, int type, void *data, size_t len)
{
    if (sim->nheld == sim->held_cap) {
        int cap = sim->held_cap ? 2 * sim->held_cap : 16;
        void *n = realloc(sim->held, sizeof *sim->held * (size_t)cap);
        if (!n)
            ddp__sim_oom("held segments", sizeof *sim->held * (size_t)cap);
        sim->held = n;
        sim->held_cap = cap;
    }
    sim->held[sim->nheld++] = (sim_held_t){.fd = fd, .type = type, .data = data, .len = len};
}

static void send_segment(ddp_sim_t *sim, sock_t *s, int type, void *data, size_t len);

void ddp__sim_net_release_held(ddp_sim_t *sim)
{
    int n = sim->nheld;
    if (!n)
        return;
    sim_held_t *h = sim->held;
    sim->held = NULL;
    sim->nheld = sim->held_cap = 0;
    for (int i = 0; i < n; i++) {
        sock_t *s = sock_get(sim, h[i].fd);
        if (s)
            send_segment(sim, s, h[i].type, h[i].data, h[i].len); /* may hold again */
        else
            ddp__sim_seg_free(sim, h[i].data);
    }
    free(h);
}

/* Queues bytes (or FIN/RST when data == NULL) from s to its peer, in order. */
static void send_segment(ddp_sim_t *sim, sock_t *s, int type, void *data,
                         size_t len)
{
    sock_t *p = sock_get(sim, s->peer);
    if (!p) {
        ddp__sim_seg_free(sim, data);
        return;
    }
    int dropped;
    int64_t heal;
    int64_t d = link_delay(sim, s->node, p->node, NULL, &dropped, &heal);
    int64_t t = sim->vt + d + (int64_t)((double)len * 1e9 / sim->o.bandwidth_Bps);
    int64_t sent = sim->vt;
    if (dropped) {
        /* TCP retransmits until the link heals; forever means never; a
         * partition an event ends holds the segment until then. */
        if (heal < 0) {
            hold_segment(sim, s->fd, type, data, len);
            return;
        }
        if (!heal) {
            ddp__sim_seg_free(sim, data);
            return;
        }
        t = heal + d;
        sent = heal;
    }
    if (sim->nbandwidth && s->node != p->node) { /* a limited uplink */
        int64_t left = ddp__sim_uplink(sim, s->node, sent, len);
        if (left + d > t)
            t = left + d;
    }
    if (t < s->tx_last)
        t = s->tx_last;
    s->tx_last = t;
    schedule(sim, t, type, p->fd, s->fd, 0, data, len);
}

static void sock_wake(ddp_sim_t *sim, sock_t *s)
{
    ddp__waitq_wake_all(sim, &s->waiters);
    ddp__sim_epoll_notify(sim, s->fd);
}

/* No answer to a SYN: retransmit later (Linux: 1, 2, 4, ... s). */
static void syn_retransmit(ddp_sim_t *sim, sock_t *c)
{
    int64_t back = DDP_NS_PER_S << (c->syn_tries < 6 ? c->syn_tries : 6);
    c->syn_tries++;
    schedule(sim, sim->vt + back, EV_SYN, c->fd, -1, 1, NULL, 0);
}

static void send_syn(ddp_sim_t *sim, sock_t *c)
{
    int dst = ddp__sim_route(sim, c->node, &c->remote);
    if (dst == -2)
        dst = c->node;
    int dropped;
    int64_t heal;
    int64_t d = link_delay(sim, c->node, dst < 0 ? c->node : dst, NULL,
                           &dropped, &heal);
    if (dst < 0 || dropped || sim->nodes[dst].crashed ||
        (c->syn_tries && ddp__sim_blackholed(sim, c->owner, dst, c->remote.port))) {
        syn_retransmit(sim, c);
        return;
    }
    schedule(sim, sim->vt + d, EV_SYN, c->fd, dst, 0, NULL, 0);
}

/* Listeners by (node, port): a chained hash of fds whose bucket count
 * doubles with the listeners (at most one per bucket on average), from 64.
 * A fixed table of 65,536 buckets cost every simulation 256 KiB to fill,
 * which was a twentieth of a 16-rank explore run. Only one listener holds
 * a (node, port), so the order of a chain is never seen. */
static size_t lbucket(const ddp_sim_t *sim, int node, uint16_t port)
{
    uint64_t k = ((uint64_t)node << 16 | port) * 0x9E3779B97F4A7C15ull;
    return (size_t)(k >> 32) & (sim->ltab_cap - 1);
}

static sock_t *find_listener(ddp_sim_t *sim, int node, uint16_t port)
{
    if (!sim->ltab_cap)
        return NULL;
    for (int fd = sim->ltab[lbucket(sim, node, port)]; fd >= 0;) {
        sock_t *s = sim->socks[fd];
        if (s->node == node && s->local.port == port)
            return s;
        fd = s->lnext;
    }
    return NULL;
}

static void ltab_link(ddp_sim_t *sim, sock_t *l)
{
    size_t b = lbucket(sim, l->node, l->local.port);
    l->lnext = sim->ltab[b];
    sim->ltab[b] = l->fd;
}

static void ltab_grow(ddp_sim_t *sim)
{
    int *old = sim->ltab;
    size_t old_cap = sim->ltab_cap;
    sim->ltab_cap = old_cap ? old_cap * 2 : 64;
    sim->ltab = xrealloc(NULL, sizeof *sim->ltab * sim->ltab_cap);
    for (size_t i = 0; i < sim->ltab_cap; i++)
        sim->ltab[i] = -1;
    for (size_t i = 0; i < old_cap; i++)
        for (int fd = old[i]; fd >= 0;) {
            sock_t *s = sim->socks[fd];
            fd = s->lnext;
            ltab_link(sim, s);
        }
    free(old);
}

static void listener_add(ddp_sim_t *sim, sock_t *l)
{
    if (sim->nlisteners >= sim->ltab_cap)
        ltab_grow(sim);
    sim->nlisteners++;
    ltab_link(sim, l);
}

static void listener_remove(ddp_sim_t *sim, sock_t *l)
{
    int *p = &sim->ltab[lbucket(sim, l->node, l->local.port)];
    while (*p >= 0 && *p != l->fd)
        p = &sim->socks[*p]->lnext;
    if (*p == l->fd) {
        *p = l->lnext;
        sim->nlisteners--;
    }
}

static void on_syn(ddp_sim_t *sim, sim_event_t *ev)
{
    sock_t *c = sock_get(sim, ev->a);
    if (!c || c->closed || c->state != ST_CONNECTING)
        return;
    if (ev->x == 1) { /* a retransmission timer */
        send_syn(sim, c);
        return;
    }
    int dst = ev->b;
    int dropped;
    int64_t heal;
    int64_t d = link_delay(sim, dst, c->node, NULL, &dropped, &heal);
    if (sim->nodes[dst].crashed) {
        syn_retransmit(sim, c);
        return;
    }
    sock_t *l = find_listener(sim, dst, c->remote.port);
    if (l && !bind_takes(&l->bind, &c->remote))
        l = NULL; /* an IPv4-only listener and an IPv6 connect: refused */
    if (!l) {
        if (!dropped)
            schedule(sim, sim->vt + d, EV_SYNACK, c->fd, -1, -ECONNREFUSED, NULL, 0);
        else
            syn_retransmit(sim, c);
        return;
    }
    if (l->nacc >= l->backlog || dropped) {
        syn_retransmit(sim, c); /* a full backlog drops the SYN */
        return;
    }
    sock_t *s = sock_new(sim, SK_STREAM, l->owner, dst);
    s->state = ST_ESTABLISHED;
    s->local = l->local;
    s->local.ip[0] = sim->nodes[dst].addr.ip[0];
    memcpy(s->local.ip, sim->nodes[dst].addr.ip, 4);
    s->local.family = 4;
    s->remote = c->local;
    s->peer = c->fd;
    s->reset_after = ddp__sim_reset_after(sim, c->node, dst, c->remote.port);
    c->reset_after = s->reset_after;
    if (l->acc_head + l->nacc == l->acc_cap) {
        if (l->acc_head > 0 && l->acc_head >= l->acc_cap / 2) { /* slide: amortised O(1) */
            memmove(l->acceptq, l->acceptq + l->acc_head,
                    sizeof *l->acceptq * (size_t)l->nacc);
            l->acc_head = 0;
        } else {
            l->acc_cap = l->acc_cap ? l->acc_cap * 2 : 16;
            l->acceptq = xrealloc(l->acceptq, sizeof *l->acceptq * (size_t)l->acc_cap);
        }
    }
    l->acceptq[l->acc_head + l->nacc++] = s->fd;
    sock_wake(sim, l);
    schedule(sim, sim->vt + d, EV_SYNACK, c->fd, s->fd, 0, NULL, 0);
}

static void on_synack(ddp_sim_t *sim, sim_event_t *ev)
{
    sock_t *c = sock_get(sim, ev->a);
    sock_t *s = sock_get(sim, ev->b);
    if (!c || c->closed || c->state != ST_CONNECTING) {
        if (s && !s->closed) { /* the client gave up: reset the server side */
            s->rx_reset = 1;
            sock_wake(sim, s);
        }
        return;
    }
    if (ev->x) {
        c->state = ST_CLOSED;
        c->connect_err = (int)ev->x;
    } else {
        c->state = ST_ESTABLISHED;
        c->peer = s->fd;
    }
    sock_wake(sim, c);
}

/* Queues a delivered segment (the event's payload, taken over). */
static void rx_queue(ddp_sim_t *sim, sock_t *s, seg_t *g)
{
    sim->rx_held += g->len - g->off;
    if (sim->rx_held > sim->rx_peak)
        sim->rx_peak = sim->rx_held;
    g->next = NULL;
    if (s->rx_tail)
        s->rx_tail->next = g;
    else
        s->rx_head = g;
    s->rx_tail = g;
    s->rx_bytes += g->len - g->off;
}

static void rx_drop(ddp_sim_t *sim, sock_t *s)
{
    sim->rx_held -= s->rx_bytes;
    for (seg_t *g = s->rx_head, *n; g; g = n) {
        n = g->next;
        seg_free(sim, g);
    }
    s->rx_head = s->rx_tail = NULL;
    s->rx_bytes = 0;
}

/* Moves up to n unread bytes into buf, freeing the segments it empties. */
static size_t rx_take(ddp_sim_t *sim, sock_t *s, uint8_t *buf, size_t n)
{
    size_t got = 0;
    while (got < n && s->rx_head) {
        seg_t *g = s->rx_head;
        size_t k = g->len - g->off < n - got ? g->len - g->off : n - got;
        memcpy(buf + got, g->data + g->off, k);
        g->off += k;
        got += k;
        if (g->off == g->len) {
            s->rx_head = g->next;
            if (!s->rx_head)
                s->rx_tail = NULL;
            seg_free(sim, g);
        }
    }
    s->rx_bytes -= got;
    sim->rx_held -= got;
    return got;
}

void ddp__sim_net_event(ddp_sim_t *sim, sim_event_t *ev)
{
    sock_t *s;
    switch (ev->type) {
    case EV_SYN:
        on_syn(sim, ev);
        break;
    case EV_SYNACK:
        on_synack(sim, ev);
        break;
    case EV_DATA:
        s = sock_get(sim, ev->a);
        if (!s || s->closed) {
            /* Data for a closed socket: the kernel answers with a reset. */
            sock_t *from = sock_get(sim, ev->b);
            if (from && !from->closed && s && s->node >= 0 &&
                !sim->nodes[s->node].crashed) {
                from->rx_reset = 1;
                sock_wake(sim, from);
            }
            break;
        }
        rx_queue(sim, s, ev->data);
        ev->data = NULL; /* the socket owns it now */
        sock_wake(sim, s);
        break;
    case EV_FIN:
    case EV_RST:
        s = sock_get(sim, ev->a);
        if (!s || s->closed)
            break;
        if (ev->type == EV_FIN)
            s->rx_eof = 1;
        else
            s->rx_reset = 1;
        sock_wake(sim, s);
        break;
    }
}

static void sock_close(ddp_sim_t *sim, sock_t *s, int graceful)
{
    if (s->closed)
        return;
    s->closed = 1;
    if (s->type == SK_LISTEN) {
        listener_remove(sim, s);
        for (int i = 0; i < s->nacc; i++) { /* never accepted: reset them */
            sock_t *a = sock_get(sim, s->acceptq[s->acc_head + i]);
            if (a) {
                a->closed = 1;
                rx_drop(sim, a);
                if (graceful)
                    send_segment(sim, a, EV_RST, NULL, 0);
            }
        }
        s->nacc = s->acc_head = 0;
        free(s->acceptq);
        s->acceptq = NULL;
        s->acc_cap = 0;
    } else if (s->state == ST_ESTABLISHED && graceful) {
        /* Unread data makes Linux send RST instead of FIN. */
        int unread = s->rx_bytes > 0;
        send_segment(sim, s, unread ? EV_RST : EV_FIN, NULL, 0);
    }
    rx_drop(sim, s); /* nobody reads a closed socket: free what it held */
    sock_wake(sim, s);
    ddp__waitq_free(&s->waiters); /* no task parks on it any more */
}

/* A process's exit (or crash) closes the sockets of all its threads; a
 * thread's own exit closes nothing, as in POSIX. */
void ddp__sim_close_task_socks(ddp_sim_t *sim, int task, int graceful)
{
    int proc = sim->tasks[task]->proc;
    if (proc != task)
        return;
    /* Without threads only the task's own sockets (the common case: O(1)). */
    int from = sim->tasks[task]->nthreads ? 0 : task;
    int to = sim->tasks[task]->nthreads ? sim->ntasks : task + 1;
    for (int j = from; j < to; j++) {
        ddp_sim_task_t *t = sim->tasks[j];
        if (t->proc != proc)
            continue;
        for (int i = 0; i < t->nfds; i++) {
            sock_t *s = sim->socks[t->fds[i]];
            if (s->owner == j && !s->closed) {
                /* A normal exit with a socket still open: the code leaked
                 * it (the OS would close it; the invariant checks this). */
                if (graceful && sim->tasks[task]->out.state == DDP_SIM_TASK_EXITED)
                    sim->tasks[task]->out.leaked_socks++;
                sock_close(sim, s, graceful);
            }
        }
        t->nfds = 0;
    }
}

void ddp__sim_net_free(ddp_sim_t *sim)
{
    for (int i = 0; i < sim->nheld; i++)
        ddp__sim_seg_free(sim, sim->held[i].data);
    free(sim->held);
    sim->held = NULL;
    sim->nheld = 0;
    for (int i = 0; i < sim->nsocks; i++) {
        sock_t *s = sim->socks[i];
        if (!s)
            continue;
        rx_drop(sim, s);
        free(s->acceptq);
        ddp__waitq_free(&s->waiters);
        free(s);
    }
    free(sim->socks);
    free(sim->ltab);
    seg_pool_free(sim);
    ddp__sim_epoll_free(sim);
}

/* ---- the sim sys ops ---- */

/* Every op: a killed task fails at once; a named fault point may fire. */
#define SIM_ENTER(t)                                                           \
    do {                                                                       \
        if (ddp__sim_check_killed(t) || ddp__sim_pause_point(t))               \
            return DDP_ECANCELED;                                              \
    } while (0)

/* A point of ddp/faults.h that fires fails the op as in the POSIX sys,
 * and leaves a trace line. Unarmed, it costs two reads (ddp_fault_fire). */
#define SIM_POINT(t, point)                                                       \
    do {                                                                       \
        int fe_ = ddp_fault_fire(DDP_FP_##point);                                 \
        if (fe_) {                                                             \
            ddp__sim_trace((t)->sim, (t)->id, "fault",                         \
                           "\"point\":\"%s\",\"errno\":\"%s\"",              \
                           ddp_fault_name(DDP_FP_##point), strerrorname_np(-fe_)); \
            return fe_;                                                        \
        }                                                                      \
    } while (0)

static int64_t sm_now(ddp_sys_t *s) { return ddp__sim_task_now(me(s)); }

static int timed_out(ddp_sim_task_t *t, int64_t deadline, int64_t start)
{
    (void)start;
    return deadline != DDP_DEADLINE_NEVER && ddp__sim_task_now(t) >= deadline;
}

static int sm_sleep_until(ddp_sys_t *s, int64_t deadline)
{
    ddp_sim_task_t *t = me(s);
    SIM_ENTER(t);
    if (deadline == DDP_DEADLINE_NEVER)
        return ddp_err_set(-EINVAL, "sleep without a deadline");
    while (ddp__sim_task_now(t) < deadline) {
        int rc = ddp__sim_park(t, deadline, NULL, 0, &(sim_wait_t){.text = "sleep"});
        if (rc)
            return rc;
    }
    return 0;
}

static int lookup_host(ddp_sim_t *sim, const char *host)
{
    int n = ddp__sim_node_by_host(sim, host);
    if (n >= 0)
        return n;
    for (int i = 0; i < sim->naliases; i++)
        if (!strcmp(sim->aliases[i].name, host))
            return sim->aliases[i].node;
    return -1;
}

/* Node n's explicit eth0: its addresses, as DNS would answer (A, AAAA). */
DDP_NOINLINE static int eth0_addrs(const ddp_sim_t *sim, int n, const char *host,
                                   uint16_t port, ddp_addr_t *out, int max)
{
    ddp_ifaddr_t ifs[32];
    int ni = ddp__sim_node_ifs(sim, n, ifs, 32), k = 0;
    for (int i = 0; i < ni && k < max; i++)
        if (!strcmp(ifs[i].name, "eth0")) {
            out[k] = ifs[i].addr;
            out[k++].port = port;
        }
    return k ? k : ddp_err_set(DDP_ENOT_FOUND, "cannot resolve host \"%s\": it has no "
                                               "eth0 address", host);
}

static int sm_resolve(ddp_sys_t *s, const char *host, uint16_t port,
                      ddp_addr_t *out, int max)
{
    ddp_sim_task_t *t = me(s);
    SIM_ENTER(t);
    int fe = ddp__sim_call_fault(t, DDP_FP_SYS_NET_RESOLVE, -1, port);
    if (fe)
        return ddp_err_set(DDP_ENOT_FOUND, "cannot resolve host \"%s\": %s "
                                           "(injected)", host, strerror(fe));
    if (max <= 0)
        return ddp_err_set(-EINVAL, "resolve: no room for addresses");
    int num = ddp_sys_resolve_numeric(s, host, port, &out[0]);
    if (num != 0)
        return num;
    /* the node's own /etc/hosts first, every answer in order */
    int k = 0;
    for (int i = 0; i < t->sim->nhostents && k < max; i++) {
        const sim_hostent_t *h = &t->sim->hostents[i];
        if ((h->node < 0 || h->node == t->out.node) && !strcmp(h->name, host)) {
            out[k] = h->addr;
            out[k++].port = port;
        }
    }
    if (k)
        return k;
    if (!strcmp(host, "localhost")) {
        ddp_addr_parse("127.0.0.1", port, &out[0]);
        return 1;
    }
    int n = lookup_host(t->sim, host);
    if (n < 0)
        return ddp_err_set(DDP_ENOT_FOUND,
                           "cannot resolve host \"%s\": not in the cluster's "
                           "host table",
                           host);
    if (!t->sim->nodes[n].eth0_set) {
        out[0] = t->sim->nodes[n].addr;
        out[0].port = port;
        return 1;
    }
    return eth0_addrs(t->sim, n, host, port, out, max);
}

/* A virtual node's interfaces: lo, eth0 and a scenario's `iface` lines. */
static int sm_ifaddrs(ddp_sys_t *s, ddp_ifaddr_t *out, int max)
{
    ddp_sim_task_t *t = me(s);
    return ddp__sim_node_ifs(t->sim, t->out.node, out, max);
}

static int sm_hostname(ddp_sys_t *s, char *buf, size_t n)
{
    ddp_sim_task_t *t = me(s);
    /* ddp_fmt, not snprintf: printf's frame was the deepest a rank's
     * stack went, a page per rank. */
    ddp_fmt(buf, n, "%s", t->sim->nodes[t->out.node].host);
    return 0;
}

static int local_node_of(ddp_sim_task_t *t, const ddp_addr_t *a, int *ok)
{
    int n = ddp__sim_route(t->sim, t->out.node, a);
    *ok = ddp_addr_is_any(a) || n == -2 || n == t->out.node;
    return t->out.node;
}

static int sm_listen(ddp_sys_t *s, const ddp_addr_t *a, int backlog)
{
    ddp_sim_task_t *t = me(s);
    ddp_sim_t *sim = t->sim;
    char as[DDP_ADDR_STRLEN]; /* for the errors only: a rank listens once */
    SIM_ENTER(t);
    SIM_POINT(t, SYS_NET_LISTEN);
    int ok;
    int node = local_node_of(t, a, &ok);
    if (!ok)
        return ddp_err_set(-EADDRNOTAVAIL, "could not bind %s: not an address "
                                           "of node %s",
                           ddp_addr_format(a, as, sizeof as), sim->nodes[node].host);
    uint16_t port = a->port;
    if (port == 0) {
        /* Like Linux: a random port of 32768..60999 (drawn from the run's
         * PRNG, so deterministic per seed), the next free one on a clash.
         * Two nodes asking for "a free port" do not agree by accident. */
        uint16_t first = (uint16_t)(32768 + ddp_rng_next(&sim->rng) % 28232);
        port = first;
        while (find_listener(sim, node, port)) {
            port = port == 60999 ? 32768 : (uint16_t)(port + 1);
            if (port == first)
                break;
        }
    }
    if (find_listener(sim, node, port)) {
        ddp_err_set(-EADDRINUSE, "could not bind %s: %s",
                    ddp_addr_format(a, as, sizeof as), strerror(EADDRINUSE));
        return ddp_err_addr("%s", as);
    }
    sock_t *l = sock_new(sim, SK_LISTEN, t->id, node);
    l->local = sim->nodes[node].addr;
    l->local.port = port;
    l->bind = *a;
    l->bind.port = port;
    int cap = sim->nodes[node].somaxconn ? sim->nodes[node].somaxconn : sim->o.somaxconn;
    l->backlog = backlog > 0 && backlog < cap ? backlog : cap;
    listener_add(sim, l);
    ddp__sim_trace(sim, t->id, "listen", "\"port\":%u,\"backlog\":%d",
                   (unsigned)port, l->backlog);
    return l->fd;
}

static sock_t *own_sock(ddp_sim_task_t *t, int fd, int type)
{
    sock_t *s = sock_get(t->sim, fd);
    if (!s || s->closed || !same_proc(t->sim, s->owner, t) ||
        (type && s->type != type)) {
        ddp_err_set(-EBADF, "socket %d is not open in task %s", fd, t->name);
        return NULL;
    }
    return s;
}

/* One blocking step of a socket call: give up at the deadline, or park on
 * the socket. 0: woken (re-check); -EAGAIN: a try-once call found nothing;
 * DDP_ETIMEOUT; DDP_ECANCELED. */
static int block_on(ddp_sim_task_t *t, sock_t *s, int64_t deadline,
                    int64_t start, const char *timeout_msg, const sim_wait_t *what)
{
    if (timed_out(t, deadline, start)) {
        if (deadline <= start)
            return -EAGAIN;
        ddp_err_set(DDP_ETIMEOUT, "%s", timeout_msg);
        return ddp_err_waited(ddp__sim_task_now(t) - start);
    }
    waitq_t *q = &s->waiters;
    return ddp__sim_park(t, deadline, &q, 1, what);
}

static const sim_wait_t unwinding = {.text = "a killed thread unwinding"};

static int sm_accept(ddp_sys_t *sy, int fd, ddp_addr_t *peer, int64_t deadline)
{
    ddp_sim_task_t *t = me(sy);
    SIM_ENTER(t);
    SIM_POINT(t, SYS_NET_ACCEPT);
    int64_t start = ddp__sim_task_now(t);
    for (;;) {
        sock_t *l = own_sock(t, fd, SK_LISTEN);
        if (!l)
            return -EBADF;
        if (l->nacc > 0) {
            /* From the head: a memmove of the queue per accept was
             * O(backlog) each, 3,000 instructions per accept at 16,384
             * ranks. */
            int c = l->acceptq[l->acc_head++];
            if (--l->nacc == 0)
                l->acc_head = 0;
            sock_t *s = sock_get(t->sim, c);
            if (s->owner != t->id) {
                s->owner = t->id;
                own_add(t->sim, t->id, c);
            }
            if (peer)
                *peer = s->remote;
            return c;
        }
        sim_wait_t what = {.kind = SIM_WAIT_ACCEPT, .num = l->local.port};
        int rc = block_on(t, l, deadline, start, "no connection arrived in time",
                          &what);
        if (rc)
            return rc;
    }
}

/* A connect to a's local address: the node's first IPv6 address on a
 * network that reaches a (loopback for loopback). */
DDP_NOINLINE static void v6_local(const ddp_sim_t *sim, int node, const ddp_addr_t *a,
                                  ddp_addr_t *local)
{
    ddp_ifaddr_t ifs[32];
    int n = ddp__sim_node_ifs(sim, node, ifs, 32);
    for (int i = n - 1; i >= 0; i--)
        if (ifs[i].addr.family == 6 &&
            (ddp_addr_is_loopback(a) == ddp_addr_is_loopback(&ifs[i].addr)))
            *local = ifs[i].addr;
}

static int sm_connect(ddp_sys_t *sy, const ddp_addr_t *a, int64_t deadline)
{
    ddp_sim_task_t *t = me(sy);
    ddp_sim_t *sim = t->sim;
    char as[DDP_ADDR_STRLEN];
    ddp_addr_format(a, as, sizeof as);
    SIM_ENTER(t);
    if (a->family == 6 && a->ip[0] == 0xfe && (a->ip[1] & 0xc0) == 0x80 && !a->scope) {
        /* as Linux says for a link-local address without its interface */
        ddp_err_set(-EINVAL, "connect to %s failed: %s (a link-local IPv6 address "
                             "needs its interface: fe80::...%%eth0)", as, strerror(EINVAL));
        return ddp_err_addr("%s", as);
    }
    int dst = ddp__sim_route(sim, t->out.node, a);
    if (dst == -2)
        dst = t->out.node;
    if (dst < 0 && !family_routed(sim, t->out.node, a->family)) {
        /* no address of that family but lo: no route at all, at once */
        t->out.retries++;
        ddp_err_set(-ENETUNREACH, "connect to %s failed: %s (node %s has no IPv%d "
                                  "address but loopback)",
                    as, strerror(ENETUNREACH), sim->nodes[t->out.node].host, a->family);
        return ddp_err_addr("%s", as);
    }
    int fe = ddp__sim_call_fault(t, DDP_FP_SYS_NET_CONNECT, dst, a->port);
    int64_t start = ddp__sim_task_now(t);
    ddp__sim_trace(sim, t->id, "connect", "\"to\":\"%s\"", as);
    if (fe && fe != ETIMEDOUT) {
        t->out.retries++;
        ddp_err_set(-fe, "connect to %s failed: %s (injected)", as, strerror(fe));
        return ddp_err_addr("%s", as);
    }
    sock_t *c = sock_new(sim, SK_STREAM, t->id, t->out.node);
    c->state = ST_CONNECTING;
    c->remote = *a;
    c->local = sim->nodes[t->out.node].addr;
    if (a->family == 6)
        v6_local(sim, t->out.node, a, &c->local);
    c->local.port = (uint16_t)(40000 + c->fd % 20000);
    if (fe != ETIMEDOUT)
        send_syn(sim, c);
    else /* a black hole swallows the SYN; TCP retransmits it */
        syn_retransmit(sim, c);
    for (;;) {
        if (c->state == ST_ESTABLISHED) {
            ddp__sim_trace(sim, t->id, "connected_to", "\"to\":\"%s\",\"fd\":%d", as, c->fd);
            return c->fd;
        }
        if (c->state == ST_CLOSED) {
            int e = -c->connect_err;
            c->closed = 1;
            t->out.retries++;
            ddp__sim_trace(sim, t->id, "connect_failed", "\"to\":\"%s\",\"errno\":\"%s\"",
                           as, strerrorname_np(e));
            ddp_err_set(-e, "connect to %s failed: %s", as, strerror(e));
            return ddp_err_addr("%s", as);
        }
        if (timed_out(t, deadline, start)) {
            c->closed = 1;
            t->out.retries++;
            ddp__sim_trace(sim, t->id, "connect_timeout", "\"to\":\"%s\"", as);
            ddp_err_set(DDP_ETIMEOUT, "connect to %s did not complete in time", as);
            ddp_err_addr("%s", as);
            return ddp_err_waited(ddp__sim_task_now(t) - start);
        }
        sim_wait_t what = {.kind = SIM_WAIT_CONNECT, .addr = *a};
        waitq_t *q = &c->waiters;
        int rc = ddp__sim_park(t, deadline, &q, 1, &what);
        if (rc) {
            c->closed = 1;
            return rc;
        }
    }
}

/* What fits in the peer's receive window now. */
static size_t window_room(const ddp_sim_t *sim, const sock_t *s)
{
    return s->unacked < sim->o.rcvbuf ? sim->o.rcvbuf - s->unacked : 0;
}

/* Both sends: the pieces' bytes, in order, as one segment. */
static ssize_t sm_sendv(ddp_sys_t *sy, int fd, const ddp_iov_t *iov, int niov,
                        int64_t deadline)
{
    ddp_sim_task_t *t = me(sy);
    SIM_ENTER(t);
    if (niov < 1 || niov > DDP_IOV_MAX)
        return ddp_err_set(-EINVAL, "sendv: %d pieces (1 to %d)", niov, DDP_IOV_MAX);
    size_t n = 0;
    for (int i = 0; i < niov; i++)
        n += iov[i].len;
    SIM_POINT(t, SYS_NET_SEND);
    int64_t start = ddp__sim_task_now(t);
    sock_t *s;
    for (;;) {
        if (!(s = own_sock(t, fd, SK_STREAM)))
            return -EBADF;
        if (s->rx_reset)
            return ddp_err_set(-ECONNRESET, "send: connection reset by peer");
        if (s->tx_shut || s->state != ST_ESTABLISHED)
            return ddp_err_set(-EPIPE, "send: connection is not open");
        if (n == 0 || window_room(t->sim, s) > 0)
            break;
        sim_wait_t what = {.kind = SIM_WAIT_SEND, .addr = s->remote};
        int rc = block_on(t, s, deadline, start,
                          "the peer's receive window stayed full until the "
                          "deadline (it stopped reading)",
                          &what);
        if (rc)
            return rc;
    }
    if (n == 0)
        return 0;
    /* Reset after N bytes (a fault on this connection). */
    if (s->reset_after >= 0 && s->sent + (int64_t)n > s->reset_after) {
        ddp__sim_trace(t->sim, t->id, "fault", "\"fault\":\"reset\",\"after_bytes\":%lld",
                       (long long)s->reset_after);
        s->rx_reset = 1;
        sock_t *p = sock_get(t->sim, s->peer);
        if (p) {
            p->reset_after = -1;
            send_segment(t->sim, s, EV_RST, NULL, 0);
        }
        s->reset_after = -1;
        return ddp_err_set(-ECONNRESET, "send: connection reset by peer");
    }
    size_t w = n < window_room(t->sim, s) ? n : window_room(t->sim, s);
    if (t->sim->o.short_io && w > 1)
        w = 1 + (size_t)ddp_rng_below(&t->sim->rng, w);
    seg_t *g = seg_new(t->sim, w);
    if (!g)
        return -ENOMEM;
    for (size_t i = 0, at = 0; at < w; i++) {
        size_t k = iov[i].len < w - at ? iov[i].len : w - at;
        if (k)
            memcpy(g->data + at, iov[i].base, k);
        at += k;
    }
    s->sent += (int64_t)w;
    s->unacked += w;
    send_segment(t->sim, s, EV_DATA, g, w);
    return (ssize_t)w;
}

static ssize_t sm_send(ddp_sys_t *sy, int fd, const void *buf, size_t n,
                       int64_t deadline)
{
    ddp_iov_t v = {buf, n};
    return sm_sendv(sy, fd, &v, 1, deadline);
}

static ssize_t sm_recv(ddp_sys_t *sy, int fd, void *buf, size_t n,
                       int64_t deadline)
{
    ddp_sim_task_t *t = me(sy);
    SIM_ENTER(t);
    SIM_POINT(t, SYS_NET_RECV);
    int64_t start = ddp__sim_task_now(t);
    for (;;) {
        sock_t *s = own_sock(t, fd, SK_STREAM);
        if (!s)
            return -EBADF;
        size_t avail = s->rx_bytes;
        if (avail > 0 && n > 0) {
            size_t r = avail < n ? avail : n;
            if (t->sim->o.short_io && r > 1)
                r = 1 + (size_t)ddp_rng_below(&t->sim->rng, r);
            r = rx_take(t->sim, s, buf, r);
            /* The window update: a writer blocked on a full window may go
             * on (woken only then: a wake-up costs a hand-off). */
            sock_t *w = sock_get(t->sim, s->peer);
            if (w && !w->closed) {
                int was_full = window_room(t->sim, w) == 0;
                w->unacked = w->unacked > r ? w->unacked - r : 0;
                if (was_full)
                    sock_wake(t->sim, w);
            }
            return (ssize_t)r;
        }
        if (s->rx_reset)
            return ddp_err_set(-ECONNRESET, "recv: connection reset by peer");
        if (s->rx_eof || n == 0)
            return 0;
        sim_wait_t what = {.kind = SIM_WAIT_RECV, .addr = s->remote};
        int rc = block_on(t, s, deadline, start,
                          "nothing received before the deadline", &what);
        if (rc)
            return rc;
    }
}

static short readiness(ddp_sim_task_t *t, int fd, short want)
{
    sock_t *s = sock_get(t->sim, fd);
    if (!s || s->closed || !same_proc(t->sim, s->owner, t))
        return DDP_POLLERR;
    short r = 0;
    if (s->type == SK_LISTEN) {
        if (s->nacc > 0)
            r |= DDP_POLLIN;
    } else {
        if (s->rx_bytes > 0 || s->rx_eof || s->rx_reset)
            r |= DDP_POLLIN;
        if (s->rx_reset)
            r |= DDP_POLLERR | DDP_POLLHUP;
        else if (s->rx_eof)
            r |= DDP_POLLHUP;
        if (s->state == ST_ESTABLISHED && !s->tx_shut &&
            window_room(t->sim, s) > 0)
            r |= DDP_POLLOUT;
    }
    return (short)(r & (want | DDP_POLLERR | DDP_POLLHUP));
}

short ddp__sim_sock_ready(ddp_sim_task_t *t, int fd, short want)
{
    return readiness(t, fd, want);
}

int ddp__sim_sock_open(ddp_sim_task_t *t, int fd)
{
    sock_t *s = sock_get(t->sim, fd);
    return s && !s->closed && same_proc(t->sim, s->owner, t);
}

static int sm_poll(ddp_sys_t *sy, ddp_pollfd_t *fds, int nfds, int64_t deadline)
{
    ddp_sim_task_t *t = me(sy);
    SIM_ENTER(t);
    SIM_POINT(t, SYS_NET_POLL);
    int64_t start = ddp__sim_task_now(t);
    waitq_t *stackq[8], **qs = stackq; /* few: this frame is under every wait */
    if (nfds > 8)
        qs = malloc(sizeof *qs * (size_t)nfds);
    if (!qs)
        return -ENOMEM;
    int rc;
    for (;;) {
        int ready = 0, nq = 0;
        for (int i = 0; i < nfds; i++) {
            fds[i].revents = fds[i].fd < 0 ? 0 : readiness(t, fds[i].fd, fds[i].events);
            if (fds[i].revents)
                ready++;
            sock_t *s = sock_get(t->sim, fds[i].fd);
            if (s && !s->closed)
                qs[nq++] = &s->waiters;
        }
        if (ready || timed_out(t, deadline, start)) {
            rc = ready;
            break;
        }
        sim_wait_t what = {.kind = SIM_WAIT_POLL, .num = nfds};
        rc = ddp__sim_park(t, deadline, qs, nq, &what);
        if (rc)
            break;
    }
    if (qs != stackq)
        free(qs);
    return rc;
}

static int sm_close(ddp_sys_t *sy, int fd)
{
    ddp_sim_task_t *t = me(sy);
    sock_t *s = sock_get(t->sim, fd);
    if (!s || s->closed || !same_proc(t->sim, s->owner, t))
        return -EBADF;
    sock_close(t->sim, s, 1);
    return 0;
}

static int sm_local_addr(ddp_sys_t *sy, int fd, ddp_addr_t *out)
{
    ddp_sim_task_t *t = me(sy);
    sock_t *s = own_sock(t, fd, 0);
    if (!s)
        return -EBADF;
    *out = s->local;
    return 0;
}

/* The caller's node's net.core.somaxconn, as /proc reads it on that host. */
static int sm_somaxconn(ddp_sys_t *sy)
{
    ddp_sim_task_t *t = me(sy);
    int node = t->out.node >= 0 && t->out.node < t->sim->nnodes ? t->sim->nodes[t->out.node].somaxconn : 0;
    return node > 0 ? node : t->sim->o.somaxconn;
}

static int sm_spawn(ddp_sys_t *sy, const ddp_spawn_t *w, ddp_pid_t *pid)
{
    ddp_sim_task_t *t = me(sy);
    SIM_ENTER(t);
    SIM_POINT(t, SYS_PROC_SPAWN);
    return ddp__sim_spawn_child(t, w, pid);
}

static ddp_sim_task_t *child_of(ddp_sim_task_t *t, ddp_pid_t pid)
{
    long id = (long)pid - 1;
    if (id < 0 || id >= t->sim->ntasks || t->sim->tasks[id]->parent != t->id) {
        ddp_err_set(-ECHILD, "no child process %ld", (long)pid);
        return NULL;
    }
    return t->sim->tasks[id];
}

static int child_done(const ddp_sim_task_t *c)
{
    return c->out.state == DDP_SIM_TASK_EXITED ||
           c->out.state == DDP_SIM_TASK_CRASHED ||
           c->out.state == DDP_SIM_TASK_CANCELED;
}

static int sm_wait(ddp_sys_t *sy, ddp_pid_t pid, int *status, int64_t deadline)
{
    ddp_sim_task_t *t = me(sy);
    SIM_ENTER(t);
    int64_t start = ddp__sim_task_now(t);
    for (;;) {
        ddp_sim_task_t *c = child_of(t, pid);
        if (!c)
            return -ECHILD;
        if (child_done(c)) {
            if (status)
                *status = c->out.state == DDP_SIM_TASK_CRASHED ? 128 + SIGKILL
                                                                : c->exit_status;
            return 0;
        }
        if (timed_out(t, deadline, start)) {
            ddp_err_set(DDP_ETIMEOUT, "process %ld still running at deadline",
                        (long)pid);
            return ddp_err_waited(ddp__sim_task_now(t) - start);
        }
        sim_wait_t what = {.kind = SIM_WAIT_CHILD, .text = c->name};
        waitq_t *q = &c->exitq;
        int rc = ddp__sim_park(t, deadline, &q, 1, &what);
        if (rc)
            return rc;
    }
}

static int sm_kill(ddp_sys_t *sy, ddp_pid_t pid, int sig)
{
    ddp_sim_task_t *t = me(sy);
    SIM_ENTER(t);
    ddp_sim_task_t *c = child_of(t, pid);
    if (!c)
        return -ESRCH;
    if (sig == 0)
        return 0;
    ddp__sim_trace(t->sim, t->id, "kill", "\"task\":\"%s\",\"sig\":%d", c->name, sig);
    ddp__sim_kill_task(t->sim, c, 1);
    ddp__waitq_wake_all(t->sim, &c->exitq);
    return 0;
}

static int sm_thread_start(ddp_sys_t *sy, ddp_thread_fn fn, void *arg,
                           const char *name, ddp_thread_t *out)
{
    ddp_sim_task_t *t = me(sy);
    SIM_ENTER(t);
    SIM_POINT(t, SYS_PROC_THREAD);
    return ddp__sim_thread(t, fn, arg, name, out);
}

/* Threads are tasks with this task as parent: join = wait for the child. */
static int sm_thread_join(ddp_sys_t *sy, ddp_thread_t th, int *rc,
                          int64_t deadline)
{
    ddp_sim_task_t *t = me(sy);
    int st = 0;
    ddp_sim_task_t *c = th >= 1 && th <= t->sim->ntasks ? t->sim->tasks[th - 1] : NULL;
    if (t->killed && c && c->proc == t->proc) {
        /* The process crashed: its threads die with it, and none may
         * outlive the memory this one frees next (the store server's). */
        while (!c->finished)
            ddp__sim_park_unwinding(t, &c->exitq, &unwinding);
        return DDP_ECANCELED;
    }
    int r = sm_wait(sy, (ddp_pid_t)th, &st, deadline);
    if (r != 0 && r != DDP_ETIMEOUT && t->killed && c && c->proc == t->proc) {
        /* Killed while it waited: as above, its thread goes first, so
         * nothing the joiner frees next is still in use. */
        while (!c->finished)
            ddp__sim_park_unwinding(t, &c->exitq, &unwinding);
        return DDP_ECANCELED;
    }
    if (r == 0 && rc)
        *rc = t->sim->tasks[th - 1]->out.rc;
    return r;
}

static int sm_read_file(ddp_sys_t *sy, const char *path, char **data,
                        size_t *len)
{
    ddp_sim_task_t *t = me(sy);
    SIM_ENTER(t);
    SIM_POINT(t, SYS_FS_READ);
    for (int i = 0; i < t->sim->nfiles; i++)
        if (!strcmp(t->sim->files[i].path, path)) {
            if (strlen(t->sim->files[i].content) > DDP_SYS_READ_MAX)
                return ddp_err_set(DDP_ELIMIT, "cannot read \"%s\": more than "
                                               "the %d MiB ddpsim reads from one file",
                                   path, DDP_SYS_READ_MAX >> 20);
            *data = strdup(t->sim->files[i].content);
            if (!*data)
                return -ENOMEM;
            if (len)
                *len = strlen(*data);
            return 0;
        }
    return ddp_err_set(-ENOENT, "cannot open \"%s\": %s", path, strerror(ENOENT));
}

static void sm_destroy(ddp_sys_t *sy) { (void)sy; /* owned by the sim */ }

static int sm_nccl_api(ddp_sys_t *sy, const struct ddp_nccl_api **out)
{
    ddp_sim_task_t *t = me(sy);
    if (t->sim->o.host_nccl)
        return ddp__nccl_api_posix(out);
    if (!(*out = ddp__sim_nccl_api())) {
        ddp_err_set(DDP_ENOT_BUILT, "nccl backend: not built (nccl.h was not found at "
                                    "build time), so neither is the simulated NCCL");
        return ddp_err_hint("install the CUDA toolkit's headers and rebuild, or use the "
                            "tcp backend");
    }
    return 0;
}

const ddp_sys_ops_t ddp__sim_sys_ops = {
    .name = "sim",
    .now = sm_now,
    .sleep_until = sm_sleep_until,
    .resolve = sm_resolve,
    .hostname = sm_hostname,
    .listen = sm_listen,
    .accept = sm_accept,
    .connect = sm_connect,
    .send = sm_send,
    .sendv = sm_sendv,
    .recv = sm_recv,
    .poll = sm_poll,
    .epoll_create = ddp__sim_epoll_create,
    .epoll_ctl = ddp__sim_epoll_ctl,
    .epoll_wait = ddp__sim_epoll_wait,
    .epoll_close = ddp__sim_epoll_close,
    .close = sm_close,
    .local_addr = sm_local_addr,
    .ifaddrs = sm_ifaddrs,
    .somaxconn = sm_somaxconn,
    .spawn = sm_spawn,
    .wait = sm_wait,
    .kill = sm_kill,
    .thread_start = sm_thread_start,
    .thread_join = sm_thread_join,
    .read_file = sm_read_file,
    .destroy = sm_destroy,
    .nccl_api = sm_nccl_api,
};
