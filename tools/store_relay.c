/* tools/store_relay.c — relay processes for a store server with more clients
 * than one process may hold open files (`ddpsim store serve --relays K`):
 * process management, not the connection stack, so it lives with the
 * command, and the server gets it through its sys hook
 * (ddp_store_server_opts_t.sys_hook = ddp_store_relays_hook).
 *
 * A process holds one descriptor per client connection, and a host caps
 * how many a process may hold (ulimit -n; raising the hard limit takes
 * CAP_SYS_RESOURCE). The server's event loop (core/store_server.c) is
 * left as it is: it runs over the sys made here, whose listener and client
 * sockets are virtual. K relay processes, forked when the server listens, share the
 * real listening socket; each accepts clients until it runs out of
 * descriptors (the others take the rest) and relays their bytes to the
 * server's process over one loopback TCP link of its own, as frames
 *
 *     u8 type, 3 zero bytes, u32 connection id (the relay's), u32 length,
 *     then length bytes:
 *   HELLO  relay -> server, first: u64 token (random, handed over in the
 *          fork, so no other process can pose as a relay), u32 relay index
 *   OPEN   relay -> server: a client connected; its address (ddp_addr_t)
 *   DATA   both ways: bytes of the connection's stream
 *   CLOSE  both ways: the client is gone (relay), or the server closed it
 *   ACK    both ways: u32 bytes of DATA the receiver has consumed
 *
 * Flow control: each direction of each connection has a window of
 * RELAY_WINDOW bytes of DATA not yet acknowledged, as a socket has a
 * buffer. The server's send takes no more than its window leaves (a short
 * write; -EAGAIN when it is full, and the socket is not writable until an
 * ACK), so its own output queue, memory budget and idle timeout work as
 * over a socket; a relay stops reading a client whose bytes the server has
 * not taken. Neither side's buffers grow past the windows.
 *
 * Ids: the server sends CLOSE once, when it closes the socket; a relay
 * frees an id when it has had the server's CLOSE, and never reuses it
 * before (a CLOSE it sends first, for a client gone, travels ahead of any
 * later OPEN on the same link), so an id names one connection at a time on
 * both sides.
 *
 * A relay exits when its link ends (the server closed it, or died: the
 * relays are started with die_with_parent); a relay that dies takes its
 * clients with it (the server reads EOF on each), and the server reaps it
 * (killing it first when only the link broke). The server's table of a
 * link's connections is a map of those open: an id's value costs nothing. Every call goes through
 * the sys seam: the relays run over their own POSIX sys, the server side
 * over the sys it was given. */
#include "store_relay.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/host.h"
#include "ddp/log.h"
#include "ddp/sys.h"
#include "core/bytebuf.h"
#include "core/kvmap.h"
#include "core/store_priv.h"

#define RELAY_WINDOW ((size_t)256 << 10)
#define RELAY_FRAME_MAX ((size_t)64 << 10) /* DATA bytes per frame */
#define RELAY_HDR 12
#define RELAY_VFD_BASE (1 << 24)           /* virtual sockets from here */
#define RELAY_LFD (RELAY_VFD_BASE - 1)     /* the virtual listener */
#define RELAY_START_NS (10 * DDP_NS_PER_S) /* relays connecting back */
#define RELAY_STOP_NS (5 * DDP_NS_PER_S)   /* relays exiting at the end */
#define RELAY_ACCEPT_PAUSE_NS (100 * DDP_NS_PER_MS) /* after EMFILE */
#define RELAY_BUF_FIRST ((size_t)64 << 10)
#define RELAY_MAX_ID (1u << 24) /* ids past it are refused (a broken link) */

enum { FR_HELLO = 1, FR_OPEN, FR_DATA, FR_CLOSE, FR_ACK };

/* ------------------------------------------------------------ frames */

static int emit(ddp__bb_t *out, int type, uint32_t id, const void *p, size_t n)
{
    if (ddp__bb_reserve(out, RELAY_HDR + n, RELAY_BUF_FIRST) != 0)
        return ddp_err_set(-ENOMEM, "store relay: out of memory for a frame");
    uint8_t h[RELAY_HDR] = {(uint8_t)type};
    uint32_t len = (uint32_t)n;
    memcpy(h + 4, &id, 4);
    memcpy(h + 8, &len, 4);
    ddp__bb_put(out, h, RELAY_HDR);
    if (n)
        ddp__bb_put(out, p, n);
    return 0;
}

static int emit_u32(ddp__bb_t *out, int type, uint32_t id, uint32_t v)
{
    return emit(out, type, id, &v, sizeof v);
}

/* DATA in frames of at most RELAY_FRAME_MAX bytes. */
static int emit_data(ddp__bb_t *out, uint32_t id, const uint8_t *p, size_t n)
{
    for (size_t o = 0; o < n; o += RELAY_FRAME_MAX) {
        size_t k = n - o < RELAY_FRAME_MAX ? n - o : RELAY_FRAME_MAX;
        if (emit(out, FR_DATA, id, p + o, k) != 0)
            return -ENOMEM;
    }
    return 0;
}

/* The next whole frame in `in`: 1 (type, id, payload set; consumed), 0 when
 * it is not all there, -EPROTO when the header is not one of ours. */
static int next_frame(ddp__bb_t *in, int *type, uint32_t *id,
                      const uint8_t **p, uint32_t *n)
{
    size_t have = ddp__bb_pending(in);
    if (have < RELAY_HDR)
        return 0;
    const uint8_t *h = in->data + in->off;
    memcpy(id, h + 4, 4);
    memcpy(n, h + 8, 4);
    *type = h[0];
    if (*type < FR_HELLO || *type > FR_ACK || h[1] || h[2] || h[3] ||
        *n > RELAY_FRAME_MAX)
        return -EPROTO;
    if (have < RELAY_HDR + (size_t)*n)
        return 0;
    *p = h + RELAY_HDR;
    ddp__bb_consume(in, RELAY_HDR + (size_t)*n);
    return 1;
}

/* Sends what `out` holds without waiting: 0 (all sent, or the socket is
 * full), or the send's negative code. Emptied, a buffer larger than keep
 * is released (a client's, kept at 0: 65,536 idle clients hold nothing). */
static int flush_out(ddp_sys_t *sys, int fd, ddp__bb_t *out, size_t keep)
{
    while (ddp__bb_pending(out) > 0) {
        ssize_t w = ddp_sys_send(sys, fd, out->data + out->off,
                                 ddp__bb_pending(out), 0);
        if (w == -EAGAIN || w == DDP_ETIMEOUT)
            return 0;
        if (w <= 0)
            return w ? (int)w : -EPIPE;
        ddp__bb_consume(out, (size_t)w);
    }
    ddp__bb_trim(out, keep);
    return 0;
}

/* Reads what the socket holds into `in`: 1 some (or none yet), 0 EOF, or
 * the recv's negative code. */
static int fill_in(ddp_sys_t *sys, int fd, ddp__bb_t *in)
{
    for (int k = 0; k < 64; k++) {
        if (ddp__bb_reserve(in, RELAY_BUF_FIRST, RELAY_BUF_FIRST) != 0)
            return -ENOMEM;
        ssize_t r = ddp_sys_recv(sys, fd, in->data + in->len,
                                 in->cap - in->len, 0);
        if (r == -EAGAIN || r == DDP_ETIMEOUT)
            return 1;
        if (r <= 0)
            return (int)r;
        in->len += (size_t)r;
        if ((size_t)r < RELAY_BUF_FIRST)
            return 1;
    }
    return 1;
}

/* A table of items by id with a stack of the free ids (ids are reused;
 * the table doubles when none is free): a relay's clients, the server
 * side's virtual sockets. */
typedef struct pool {
    void **item;
    uint32_t *free;
    uint32_t cap, nfree;
} pool_t;

/* An id for item, until pool_put: 0, or -ENOMEM. */
static int pool_take(pool_t *p, void *item, uint32_t *id)
{
    if (!p->nfree) {
        uint32_t cap = p->cap ? 2 * p->cap : 1024;
        void **t = realloc(p->item, sizeof *t * cap);
        if (!t)
            return -ENOMEM;
        p->item = t;
        uint32_t *fr = realloc(p->free, sizeof *fr * cap);
        if (!fr)
            return -ENOMEM;
        p->free = fr;
        memset(t + p->cap, 0, sizeof *t * (cap - p->cap));
        for (uint32_t i = cap; i > p->cap; i--)
            p->free[p->nfree++] = i - 1;
        p->cap = cap;
    }
    *id = p->free[--p->nfree];
    p->item[*id] = item;
    return 0;
}

static void pool_put(pool_t *p, uint32_t id)
{
    p->item[id] = NULL;
    p->free[p->nfree++] = id;
}

static void *pool_get(const pool_t *p, uint32_t id)
{
    return id < p->cap ? p->item[id] : NULL;
}

static void pool_free(pool_t *p)
{
    free(p->item);
    free(p->free);
}

/* ----------------------------------------------- the relay process */

typedef struct relay_arg {
    int lfd, ifd;   /* the shared listener; the server's link listener */
    uint16_t port;  /* the link listener's port on 127.0.0.1 */
    uint64_t token;
    uint32_t index;
} relay_arg_t;

typedef struct fconn {
    int fd;              /* -1 once the client is gone */
    short ev;            /* interest registered */
    size_t inflight;     /* DATA to the server not yet acknowledged */
    ddp__bb_t out;       /* DATA from the server not yet written */
} fconn_t;

typedef struct front {
    ddp_sys_t *sys;
    int ep, lfd, link;
    ddp__bb_t lin, lout;
    pool_t conns;        /* fconn_t by id */
    int64_t paused_until; /* listener resting after EMFILE; 0: armed */
} front_t;

enum { CK_LISTENER = 0, CK_LINK = 1, CK_FIRST = 2 };

static fconn_t *fc(const front_t *f, uint32_t id)
{
    return pool_get(&f->conns, id);
}

/* Reads while the window has room, writes while bytes wait. */
static void fc_rearm(front_t *f, uint32_t id)
{
    fconn_t *c = fc(f, id);
    short ev = (short)((c->inflight < RELAY_WINDOW ? DDP_POLLIN : 0) |
                       (ddp__bb_pending(&c->out) ? DDP_POLLOUT : 0));
    if (c->fd >= 0 && c->ev != ev &&
        ddp_sys_epoll_ctl(f->sys, f->ep, DDP_EPOLL_MOD, c->fd, ev,
                          CK_FIRST + (uint64_t)id) == 0)
        c->ev = ev;
}

/* The client is gone (EOF, error): its socket closes, the server hears
 * CLOSE; the id stays taken until the server's CLOSE comes. */
static void fc_gone(front_t *f, uint32_t id)
{
    fconn_t *c = fc(f, id);
    if (c->fd < 0)
        return;
    ddp_sys_epoll_ctl(f->sys, f->ep, DDP_EPOLL_DEL, c->fd, 0, 0);
    ddp_sys_close(f->sys, c->fd);
    c->fd = -1;
    ddp__bb_free(&c->out);
    emit(&f->lout, FR_CLOSE, id, NULL, 0);
}

static void fc_free(front_t *f, uint32_t id)
{
    fconn_t *c = fc(f, id);
    if (c->fd >= 0) {
        ddp_sys_epoll_ctl(f->sys, f->ep, DDP_EPOLL_DEL, c->fd, 0, 0);
        ddp_sys_close(f->sys, c->fd);
    }
    ddp__bb_free(&c->out);
    free(c);
    pool_put(&f->conns, id);
}

static void fc_write(front_t *f, uint32_t id)
{
    fconn_t *c = fc(f, id);
    size_t before = ddp__bb_pending(&c->out);
    int rc = c->fd >= 0 ? flush_out(f->sys, c->fd, &c->out, 0) : 0;
    size_t done = before - ddp__bb_pending(&c->out);
    if (done && c->fd >= 0)
        emit_u32(&f->lout, FR_ACK, id, (uint32_t)done);
    if (rc < 0) {
        fc_gone(f, id);
        return;
    }
    fc_rearm(f, id);
}

static void fc_read(front_t *f, uint32_t id)
{
    fconn_t *c = fc(f, id);
    uint8_t buf[RELAY_FRAME_MAX];
    while (c->fd >= 0 && c->inflight < RELAY_WINDOW) {
        size_t room = RELAY_WINDOW - c->inflight;
        ssize_t r = ddp_sys_recv(f->sys, c->fd, buf,
                                 room < sizeof buf ? room : sizeof buf, 0);
        if (r == -EAGAIN || r == DDP_ETIMEOUT)
            break;
        if (r <= 0) {
            fc_gone(f, id);
            return;
        }
        emit_data(&f->lout, id, buf, (size_t)r);
        c->inflight += (size_t)r;
        if ((size_t)r < sizeof buf)
            break;
    }
    fc_rearm(f, id);
}

static int fc_new(front_t *f, int fd, const ddp_addr_t *peer)
{
    fconn_t *c = calloc(1, sizeof *c);
    uint32_t id;
    if (!c || pool_take(&f->conns, c, &id) != 0) {
        free(c);
        return -ENOMEM;
    }
    if (ddp_sys_epoll_ctl(f->sys, f->ep, DDP_EPOLL_ADD, fd, DDP_POLLIN,
                          CK_FIRST + (uint64_t)id) != 0) {
        pool_put(&f->conns, id);
        free(c);
        return -EBADF;
    }
    c->fd = fd;
    c->ev = DDP_POLLIN;
    return emit(&f->lout, FR_OPEN, id, peer, sizeof *peer);
}

static void front_accept(front_t *f)
{
    for (int k = 0; k < 64; k++) {
        ddp_addr_t peer;
        memset(&peer, 0, sizeof peer);
        int fd = ddp_sys_accept(f->sys, f->lfd, &peer, 0);
        if (fd == -EAGAIN || fd == DDP_ETIMEOUT)
            return;
        if (fd < 0) {
            if (ddp__store_accept_exhausted(fd)) {
                /* Full: the other relays take the next clients. */
                f->paused_until =
                    ddp_sys_deadline_in(f->sys, RELAY_ACCEPT_PAUSE_NS);
                ddp_sys_epoll_ctl(f->sys, f->ep, DDP_EPOLL_MOD, f->lfd, 0,
                                  CK_LISTENER);
            }
            return;
        }
        if (fc_new(f, fd, &peer) != 0) {
            ddp_sys_close(f->sys, fd);
            return;
        }
    }
}

/* The server's frames: 0, or -EPROTO (the link is not to be trusted). */
static int front_frames(front_t *f)
{
    int type, rc;
    uint32_t id, n;
    const uint8_t *p;
    while ((rc = next_frame(&f->lin, &type, &id, &p, &n)) > 0) {
        fconn_t *c = fc(f, id);
        if (!c)
            return -EPROTO;
        if (type == FR_DATA) {
            if (c->fd < 0)
                continue; /* the client is gone; the server hears it */
            if (ddp__bb_reserve(&c->out, n, 4096) != 0)
                return -ENOMEM;
            ddp__bb_put(&c->out, p, n);
            fc_write(f, id);
        } else if (type == FR_ACK && n == 4) {
            uint32_t k;
            memcpy(&k, p, 4);
            c->inflight = k > c->inflight ? 0 : c->inflight - k;
            if (c->fd >= 0)
                fc_read(f, id); /* bytes the window held back */
        } else if (type == FR_CLOSE) {
            if (c->fd >= 0) /* the server closed it: answer, then free */
                emit(&f->lout, FR_CLOSE, id, NULL, 0);
            fc_free(f, id);
        } else {
            return -EPROTO;
        }
    }
    return rc;
}

static int relay_main(ddp_sys_t *sys, void *arg)
{
    const relay_arg_t *a = arg;
    front_t f = {.sys = sys, .lfd = a->lfd, .link = -1, .ep = -1};
    int rc = 1;
    ddp_sys_close(sys, a->ifd);
    ddp_addr_t la;
    ddp_addr_parse("127.0.0.1", a->port, &la);
    f.link = ddp_sys_connect(sys, &la, ddp_sys_deadline_in(sys, RELAY_START_NS));
    if (f.link < 0) {
        ddp_error("store relay %u: cannot reach the server: %s", a->index,
                  ddp_err_message());
        return 1;
    }
    uint8_t hello[12];
    memcpy(hello, &a->token, 8);
    memcpy(hello + 8, &a->index, 4);
    if (emit(&f.lout, FR_HELLO, 0, hello, sizeof hello) != 0 ||
        (f.ep = ddp_sys_epoll_create(sys)) < 0 ||
        ddp_sys_epoll_ctl(sys, f.ep, DDP_EPOLL_ADD, f.lfd, DDP_POLLIN,
                          CK_LISTENER) != 0 ||
        ddp_sys_epoll_ctl(sys, f.ep, DDP_EPOLL_ADD, f.link, DDP_POLLIN,
                          CK_LINK) != 0)
        goto out;
    ddp_epoll_event_t ev[256];
    short lev = DDP_POLLIN;
    for (;;) {
        if (flush_out(sys, f.link, &f.lout, RELAY_BUF_FIRST) < 0)
            break;
        short want = (short)(DDP_POLLIN | (ddp__bb_pending(&f.lout) ? DDP_POLLOUT : 0));
        if (want != lev &&
            ddp_sys_epoll_ctl(sys, f.ep, DDP_EPOLL_MOD, f.link, want, CK_LINK) == 0)
            lev = want;
        int64_t now = ddp_sys_now(sys);
        if (f.paused_until && now >= f.paused_until) {
            f.paused_until = 0;
            ddp_sys_epoll_ctl(sys, f.ep, DDP_EPOLL_MOD, f.lfd, DDP_POLLIN,
                              CK_LISTENER);
        }
        int n = ddp_sys_epoll_wait(sys, f.ep, ev, 256,
                                   f.paused_until ? f.paused_until
                                                  : now + DDP_NS_PER_S);
        if (n < 0 && n != -EINTR)
            break;
        int link_in = 0, listener = 0;
        for (int i = 0; i < n; i++) {
            uint64_t ck = ev[i].data;
            if (ck == CK_LISTENER) {
                listener = 1;
            } else if (ck == CK_LINK) {
                link_in = 1;
            } else {
                uint32_t id = (uint32_t)(ck - CK_FIRST);
                if (!fc(&f, id) || fc(&f, id)->fd < 0)
                    continue;
                if (ev[i].events & DDP_POLLOUT)
                    fc_write(&f, id);
                if (fc(&f, id)->fd >= 0 &&
                    (ev[i].events & (DDP_POLLIN | DDP_POLLHUP | DDP_POLLERR)))
                    fc_read(&f, id);
            }
        }
        if (link_in) {
            int r = fill_in(sys, f.link, &f.lin);
            int fr = r >= 0 ? front_frames(&f) : 0;
            if (r == 0 || r == -ECONNRESET) {
                /* The server is done (a reset: it closed the link with
                 * frames of ours unread, as it does when it stops). */
                rc = 0;
                break;
            }
            if (r < 0 || fr < 0) {
                ddp_error("store relay %u: the link to the server broke (%s)",
                          a->index, ddp_strerror(r < 0 ? r : fr));
                break;
            }
        }
        if (listener)
            front_accept(&f);
    }
out:
    for (uint32_t i = 0; i < f.conns.cap; i++)
        if (fc(&f, i))
            fc_free(&f, i);
    pool_free(&f.conns);
    ddp__bb_free(&f.lin);
    ddp__bb_free(&f.lout);
    if (f.ep >= 0)
        ddp_sys_epoll_close(sys, f.ep);
    ddp_sys_close(sys, f.link);
    ddp_sys_close(sys, f.lfd);
    return rc;
}

/* ------------------------------------------ the server's side: a sys */

typedef struct vconn {
    uint32_t id, slot;     /* the relay's id; vfd = RELAY_VFD_BASE + slot */
    int link;
    ddp_addr_t peer;
    ddp__bb_t in;          /* DATA from the relay not yet read */
    size_t unacked;        /* DATA to the relay not yet acknowledged */
    int got_close, closed; /* relay said CLOSE; the server closed it */
    int ep;                /* its set, -1: none */
    short events;
    uint64_t data;
    int ready;             /* on its set's ready list */
    struct vconn *rprev, *rnext, *qnext;
} vconn_t;

/* A link's connection by the relay's id: a map of what is open, so an id
 * costs one entry whatever its value. */
typedef struct idref {
    ddp__kv_node_t node; /* key: the u32 id */
    vconn_t *c;
} idref_t;

typedef struct link {
    int fd;
    ddp_pid_t pid;       /* the relay process (0: reaped, or none) */
    ddp__bb_t in, out;
    ddp__kvmap_t byid;   /* idref_t by id */
} link_t;

typedef struct vset {
    int used;
    vconn_t *head, *tail;   /* ready list: to check at the next wait */
    short lev;              /* the listener's interest, -1: not in */
    uint64_t ldata;
} vset_t;

typedef struct relay_sys {
    ddp_sys_t pub;          /* first: the sys handed to the server */
    ddp_sys_t *base;
    int nlinks, listening;
    link_t *links;
    relay_arg_t *args;
    ddp_addr_t laddr;
    pool_t vcs;             /* vconn_t by slot */
    vconn_t *qhead, *qtail; /* connected, not accepted yet */
    vset_t *sets;
    int nsets;
} relay_sys_t;

static relay_sys_t *R(ddp_sys_t *s) { return (relay_sys_t *)s; }

static int virt(int fd) { return fd >= RELAY_LFD; }

static vconn_t *vc_get(relay_sys_t *r, int fd)
{
    vconn_t *c = fd >= RELAY_VFD_BASE
                     ? pool_get(&r->vcs, (uint32_t)(fd - RELAY_VFD_BASE))
                     : NULL;
    if (!c || c->closed) {
        ddp_err_set(-EBADF, "socket %d is not open", fd);
        return NULL;
    }
    return c;
}

static void ready_del(relay_sys_t *r, vconn_t *c)
{
    if (!c->ready)
        return;
    vset_t *s = &r->sets[c->ep];
    if (c->rprev)
        c->rprev->rnext = c->rnext;
    else
        s->head = c->rnext;
    if (c->rnext)
        c->rnext->rprev = c->rprev;
    else
        s->tail = c->rprev;
    c->rprev = c->rnext = NULL;
    c->ready = 0;
}

/* Something changed on c: its set checks it at the next wait. */
static void ready_add(relay_sys_t *r, vconn_t *c)
{
    if (c->ready || c->ep < 0)
        return;
    vset_t *s = &r->sets[c->ep];
    c->rprev = s->tail;
    c->rnext = NULL;
    if (s->tail)
        s->tail->rnext = c;
    else
        s->head = c;
    s->tail = c;
    c->ready = 1;
}

static idref_t *link_ref(const link_t *l, uint32_t id)
{
    return l->byid.buckets ? (idref_t *)ddp__kv_find(&l->byid, &id, sizeof id) : NULL;
}

static vconn_t *link_conn(const link_t *l, uint32_t id)
{
    idref_t *e = link_ref(l, id);
    return e ? e->c : NULL;
}

static void vc_free(relay_sys_t *r, vconn_t *c)
{
    ready_del(r, c);
    link_t *l = &r->links[c->link];
    idref_t *e = link_ref(l, c->id);
    if (e && e->c == c)
        ddp__kv_remove(&l->byid, &e->node);
    pool_put(&r->vcs, c->slot);
    ddp__bb_free(&c->in);
    free(c);
}

/* The process of a link that is lost, once it has exited (never waits):
 * a dead relay is no zombie until the server ends. */
static void reap(relay_sys_t *r, link_t *l)
{
    if (l->pid > 0 && ddp_sys_wait(r->base, l->pid, NULL, 0) == 0)
        l->pid = 0;
}

/* A relay is gone: each of its clients reads EOF. */
static void link_lost(relay_sys_t *r, int i, const char *why)
{
    link_t *l = &r->links[i];
    if (l->fd < 0)
        return;
    size_t n = 0;
    for (ddp__kv_node_t *e = l->byid.ohead, *next; e; e = next) {
        next = e->onext; /* vc_free may remove e */
        vconn_t *c = ((idref_t *)e)->c;
        n++;
        c->got_close = 1;
        if (c->closed)
            vc_free(r, c);
        else
            ready_add(r, c);
    }
    ddp_warn("store relay %d: %s; its %zu clients are disconnected", i, why,
             n);
    ddp_sys_close(r->base, l->fd);
    l->fd = -1;
    ddp__bb_free(&l->in);
    ddp__bb_free(&l->out);
    if (l->pid > 0) /* no use without its link (if it still runs) */
        ddp_sys_kill(r->base, l->pid, SIGKILL);
    reap(r, l);
}

static int link_take(relay_sys_t *r, int i, uint32_t id, const ddp_addr_t *peer)
{
    link_t *l = &r->links[i];
    if (id >= RELAY_MAX_ID)
        return -EPROTO; /* a relay's ids index its own table: never this */
    if (!l->byid.buckets && ddp__kv_init(&l->byid, 1024) != 0)
        return -ENOMEM;
    if (link_ref(l, id))
        return -EPROTO; /* an id the relay has not had back */
    vconn_t *c = calloc(1, sizeof *c);
    idref_t *e = NULL;
    if (!c || pool_take(&r->vcs, c, &c->slot) != 0) {
        free(c);
        return -ENOMEM;
    }
    if (!(e = (idref_t *)ddp__kv_get(&l->byid, &id, sizeof id, sizeof *e))) {
        pool_put(&r->vcs, c->slot);
        free(c);
        return -ENOMEM;
    }
    e->c = c;
    c->id = id;
    c->link = i;
    c->ep = -1;
    c->peer = *peer;
    if (r->qtail)
        r->qtail->qnext = c;
    else
        r->qhead = c;
    r->qtail = c;
    return 0;
}

static int link_frames(relay_sys_t *r, int i)
{
    link_t *l = &r->links[i];
    int type, rc;
    uint32_t id, n;
    const uint8_t *p;
    while ((rc = next_frame(&l->in, &type, &id, &p, &n)) > 0) {
        if (type == FR_OPEN) {
            ddp_addr_t peer;
            if (n != sizeof peer)
                return -EPROTO;
            memcpy(&peer, p, sizeof peer);
            if ((rc = link_take(r, i, id, &peer)) != 0)
                return rc;
            continue;
        }
        vconn_t *c = link_conn(l, id);
        if (!c)
            return -EPROTO;
        if (type == FR_DATA) {
            if (c->closed)
                continue; /* the server closed it; the relay hears it */
            if (ddp__bb_pending(&c->in) + n > RELAY_WINDOW ||
                ddp__bb_reserve(&c->in, n, 4096) != 0)
                return -EPROTO; /* past its window */
            ddp__bb_put(&c->in, p, n);
        } else if (type == FR_ACK && n == 4) {
            uint32_t k;
            memcpy(&k, p, 4);
            c->unacked = k > c->unacked ? 0 : c->unacked - k;
        } else if (type == FR_CLOSE) {
            c->got_close = 1;
            if (c->closed) { /* the answer to the server's CLOSE */
                vc_free(r, c);
                continue;
            }
        } else {
            return -EPROTO;
        }
        ready_add(r, c);
    }
    return rc;
}

/* Moves bytes on every link: sends what is queued, reads what arrived and
 * takes its frames, waiting for either until deadline when nothing moves
 * (deadline 0: no wait). */
static int pump(relay_sys_t *r, int64_t deadline)
{
    ddp_pollfd_t pf[DDP_STORE_MAX_RELAYS];
    int idx[DDP_STORE_MAX_RELAYS], n = 0;
    for (int i = 0; i < r->nlinks; i++) {
        link_t *l = &r->links[i];
        if (l->fd < 0) {
            reap(r, l); /* a lost relay that had not exited yet */
            continue;
        }
        if (flush_out(r->base, l->fd, &l->out, RELAY_BUF_FIRST) < 0) {
            link_lost(r, i, "its link broke while sending");
            continue;
        }
        pf[n] = (ddp_pollfd_t){.fd = l->fd, .events = (short)(DDP_POLLIN |
                               (ddp__bb_pending(&l->out) ? DDP_POLLOUT : 0))};
        idx[n++] = i;
    }
    if (!n)
        return deadline > 0 ? ddp_sys_sleep_until(r->base, deadline) : 0;
    int k = ddp_sys_poll(r->base, pf, n, deadline);
    if (k <= 0)
        return k == -EINTR ? 0 : k;
    for (int j = 0; j < n; j++) {
        int i = idx[j];
        link_t *l = &r->links[i];
        if (!pf[j].revents || l->fd < 0)
            continue;
        if ((pf[j].revents & DDP_POLLOUT) && flush_out(r->base, l->fd, &l->out, RELAY_BUF_FIRST) < 0) {
            link_lost(r, i, "its link broke while sending");
            continue;
        }
        if (pf[j].revents & (DDP_POLLIN | DDP_POLLHUP | DDP_POLLERR)) {
            int rc = fill_in(r->base, l->fd, &l->in);
            int fr = rc >= 0 ? link_frames(r, i) : 0;
            if (rc == 0 || rc < 0 || fr < 0)
                link_lost(r, i, rc == 0 ? "it exited" : "its link broke");
        }
    }
    return 0;
}

/* Deadline rules of the sys calls: -EAGAIN when it had passed at the
 * start, DDP_ETIMEOUT when it passed while waiting, else 1: wait more. */
static int wait_more(relay_sys_t *r, int64_t start, int64_t deadline)
{
    int64_t now = ddp_sys_now(r->base);
    if (deadline <= start)
        return -EAGAIN;
    if (now >= deadline) {
        ddp_err_set(DDP_ETIMEOUT, "nothing arrived from the store relays in time");
        return ddp_err_waited(now - start);
    }
    int rc = pump(r, deadline);
    return rc < 0 ? rc : 1;
}

static int rs_accept(ddp_sys_t *s, int fd, ddp_addr_t *peer, int64_t deadline)
{
    relay_sys_t *r = R(s);
    if (!virt(fd))
        return ddp_sys_accept(r->base, fd, peer, deadline);
    if (fd != RELAY_LFD || !r->listening)
        return ddp_err_set(-EINVAL, "socket %d is not listening", fd);
    int64_t start = ddp_sys_now(r->base);
    pump(r, 0);
    for (;;) {
        vconn_t *c = r->qhead;
        if (c) {
            r->qhead = c->qnext;
            if (!r->qhead)
                r->qtail = NULL;
            c->qnext = NULL;
            if (peer)
                *peer = c->peer;
            return RELAY_VFD_BASE + (int)c->slot;
        }
        int rc = wait_more(r, start, deadline);
        if (rc <= 0)
            return rc;
    }
}

static ssize_t rs_recv(ddp_sys_t *s, int fd, void *buf, size_t n,
                       int64_t deadline)
{
    relay_sys_t *r = R(s);
    if (!virt(fd))
        return ddp_sys_recv(r->base, fd, buf, n, deadline);
    vconn_t *c = vc_get(r, fd);
    if (!c)
        return -EBADF;
    int64_t start = ddp_sys_now(r->base);
    for (;;) {
        size_t have = ddp__bb_pending(&c->in);
        if (have && n) {
            size_t k = have < n ? have : n;
            memcpy(buf, c->in.data + c->in.off, k);
            ddp__bb_consume(&c->in, k);
            if (!ddp__bb_pending(&c->in))
                ddp__bb_trim(&c->in, 0); /* idle clients hold nothing */
            if (!c->got_close &&
                emit_u32(&r->links[c->link].out, FR_ACK, c->id, (uint32_t)k) != 0)
                return -ENOMEM;
            return (ssize_t)k;
        }
        if (c->got_close)
            return 0;
        int rc = wait_more(r, start, deadline);
        if (rc <= 0)
            return rc;
    }
}

static ssize_t rs_send(ddp_sys_t *s, int fd, const void *buf, size_t n,
                       int64_t deadline)
{
    relay_sys_t *r = R(s);
    if (!virt(fd))
        return ddp_sys_send(r->base, fd, buf, n, deadline);
    vconn_t *c = vc_get(r, fd);
    if (!c)
        return -EBADF;
    int64_t start = ddp_sys_now(r->base);
    for (;;) {
        if (c->got_close) {
            char a[DDP_ADDR_STRLEN];
            return ddp_err_set(-EPIPE, "the client %s is gone",
                               ddp_addr_format(&c->peer, a, sizeof a));
        }
        if (c->unacked < RELAY_WINDOW) {
            size_t k = RELAY_WINDOW - c->unacked;
            if (k > n)
                k = n;
            link_t *l = &r->links[c->link];
            if (emit_data(&l->out, c->id, buf, k) != 0)
                return -ENOMEM;
            c->unacked += k;
            if (flush_out(r->base, l->fd, &l->out, RELAY_BUF_FIRST) < 0)
                link_lost(r, c->link, "its link broke while sending");
            return (ssize_t)k;
        }
        int rc = wait_more(r, start, deadline);
        if (rc <= 0)
            return rc;
    }
}

static int rs_close(ddp_sys_t *s, int fd)
{
    relay_sys_t *r = R(s);
    if (!virt(fd))
        return ddp_sys_close(r->base, fd);
    if (fd == RELAY_LFD) {
        r->listening = 0;
        for (int i = 0; i < r->nsets; i++)
            r->sets[i].lev = -1;
        return 0;
    }
    vconn_t *c = vc_get(r, fd);
    if (!c)
        return -EBADF;
    ready_del(r, c);
    c->ep = -1;
    c->closed = 1;
    ddp__bb_free(&c->in);
    link_t *l = &r->links[c->link];
    if (c->got_close) {
        if (l->fd >= 0) /* the relay waits for this before reusing the id */
            emit(&l->out, FR_CLOSE, c->id, NULL, 0);
        vc_free(r, c);
    } else {
        emit(&l->out, FR_CLOSE, c->id, NULL, 0);
    }
    return 0;
}

static int rs_local_addr(ddp_sys_t *s, int fd, ddp_addr_t *out)
{
    relay_sys_t *r = R(s);
    if (!virt(fd))
        return ddp_sys_local_addr(r->base, fd, out);
    if (fd != RELAY_LFD && !vc_get(r, fd))
        return -EBADF;
    *out = r->laddr; /* a client's connection ends at the listener's port */
    return 0;
}

static int rs_epoll_create(ddp_sys_t *s)
{
    relay_sys_t *r = R(s);
    int i = 0;
    while (i < r->nsets && r->sets[i].used)
        i++;
    if (i == r->nsets) {
        vset_t *t = realloc(r->sets, sizeof *t * (size_t)(r->nsets + 4));
        if (!t)
            return ddp_err_set(-ENOMEM, "out of memory for a readiness set");
        r->sets = t;
        r->nsets += 4;
        memset(r->sets + i, 0, sizeof *t * 4);
    }
    r->sets[i] = (vset_t){.used = 1, .lev = -1};
    return i;
}

static vset_t *set_get(relay_sys_t *r, int ep)
{
    if (ep >= 0 && ep < r->nsets && r->sets[ep].used)
        return &r->sets[ep];
    ddp_err_set(-EBADF, "readiness set %d does not exist", ep);
    return NULL;
}

static int rs_epoll_ctl(ddp_sys_t *s, int ep, int op, int fd, short events,
                        uint64_t data)
{
    relay_sys_t *r = R(s);
    vset_t *set = set_get(r, ep);
    if (!set)
        return -EBADF;
    if (fd == RELAY_LFD && r->listening) {
        if ((op == DDP_EPOLL_ADD) != (set->lev < 0))
            return op == DDP_EPOLL_ADD
                       ? ddp_err_set(-EEXIST, "the listener is in the set")
                       : ddp_err_set(-ENOENT, "the listener is not in the set");
        set->lev = op == DDP_EPOLL_DEL ? -1 : events;
        set->ldata = data;
        return 0;
    }
    vconn_t *c = virt(fd) ? vc_get(r, fd) : NULL;
    if (!c)
        return ddp_err_set(-EBADF, "socket %d is not one of the store "
                                   "relays' connections", fd);
    if (op == DDP_EPOLL_ADD) {
        if (c->ep >= 0)
            return ddp_err_set(-EEXIST, "socket %d is in a set already", fd);
        c->ep = ep;
    } else if (c->ep != ep) {
        return ddp_err_set(-ENOENT, "socket %d is not in set %d", fd, ep);
    } else if (op == DDP_EPOLL_DEL) {
        ready_del(r, c);
        c->ep = -1;
        return 0;
    }
    c->events = events;
    c->data = data;
    ready_add(r, c);
    return 0;
}

/* What c's state meets of its interest (level-triggered). */
static short vc_revents(const vconn_t *c)
{
    short rev = 0;
    if (ddp__bb_pending(&c->in) || c->got_close)
        rev |= DDP_POLLIN;
    if (!c->got_close && c->unacked < RELAY_WINDOW)
        rev |= DDP_POLLOUT;
    if (c->got_close)
        rev |= DDP_POLLOUT; /* a send now fails at once, as after a reset */
    return (short)(rev & c->events);
}

static int collect(relay_sys_t *r, vset_t *set, ddp_epoll_event_t *out, int max)
{
    int n = 0;
    if (set->lev > 0 && (set->lev & DDP_POLLIN) && r->qhead && n < max)
        out[n++] = (ddp_epoll_event_t){.data = set->ldata, .events = DDP_POLLIN};
    /* One look at each socket on the list: a ready one is reported and
     * goes to the back (reported again next time while it stays ready,
     * after the others), one that is not leaves the list. */
    vconn_t *end = set->tail;
    while (set->head && n < max) {
        vconn_t *c = set->head;
        short rev = vc_revents(c);
        ready_del(r, c);
        if (rev) {
            out[n++] = (ddp_epoll_event_t){.data = c->data, .events = rev};
            ready_add(r, c);
        }
        if (c == end)
            break;
    }
    return n;
}

static int rs_epoll_wait(ddp_sys_t *s, int ep, ddp_epoll_event_t *out, int max,
                         int64_t deadline)
{
    relay_sys_t *r = R(s);
    vset_t *set = set_get(r, ep);
    if (!set)
        return -EBADF;
    int rc = pump(r, 0);
    if (rc < 0)
        return rc;
    for (;;) {
        int n = collect(r, set, out, max);
        if (n > 0 || ddp_sys_now(r->base) >= deadline)
            return n;
        if ((rc = pump(r, deadline)) < 0)
            return rc;
    }
}

static int rs_epoll_close(ddp_sys_t *s, int ep)
{
    relay_sys_t *r = R(s);
    vset_t *set = set_get(r, ep);
    if (!set)
        return -EBADF;
    for (uint32_t i = 0; i < r->vcs.cap; i++) {
        vconn_t *c = pool_get(&r->vcs, i);
        if (c && c->ep == ep) {
            ready_del(r, c);
            c->ep = -1;
        }
    }
    set->used = 0;
    return 0;
}

/* Forks the relays (each inherits the listener) and takes their links. */
static int start_relays(relay_sys_t *r, int lfd)
{
    ddp_sys_t *b = r->base;
    ddp_addr_t la;
    ddp_addr_parse("127.0.0.1", 0, &la);
    int ifd = ddp_sys_listen(b, &la, r->nlinks);
    if (ifd < 0)
        return ddp_err_wrap("store relays: no loopback listener for their links");
    ddp_addr_t ia;
    int rc = ddp_sys_local_addr(b, ifd, &ia);
    uint64_t token = ddp_sys_random_u64();
    int started = 0;
    for (int i = 0; rc == 0 && i < r->nlinks; i++, started++) {
        r->args[i] = (relay_arg_t){.lfd = lfd, .ifd = ifd, .port = ia.port,
                                   .token = token, .index = (uint32_t)i};
        ddp_spawn_t sp = {.entry = relay_main, .arg = &r->args[i],
                          .name = "store relay", .die_with_parent = 1};
        rc = ddp_sys_spawn(b, &sp, &r->links[i].pid);
        if (rc)
            ddp_err_wrap("store relay %d did not start", i);
    }
    /* Each relay says HELLO with the token; anything else is turned away. */
    int64_t deadline = ddp_sys_deadline_in(b, RELAY_START_NS);
    for (int got = 0; rc == 0 && got < r->nlinks;) {
        int fd = ddp_sys_accept(b, ifd, NULL, deadline);
        if (fd < 0) {
            rc = ddp_err_wrap("store relays: %d of %d connected back", got,
                              r->nlinks);
            break;
        }
        uint8_t h[RELAY_HDR + 12];
        uint64_t tok = 0;
        uint32_t idx = UINT32_MAX;
        if (ddp_sys_recv_all(b, fd, h, sizeof h, deadline) == 0 &&
            h[0] == FR_HELLO) {
            memcpy(&tok, h + RELAY_HDR, 8);
            memcpy(&idx, h + RELAY_HDR + 8, 4);
        }
        if (tok != token || idx >= (uint32_t)r->nlinks || r->links[idx].fd >= 0) {
            ddp_sys_close(b, fd);
            continue;
        }
        r->links[idx].fd = fd;
        got++;
    }
    ddp_sys_close(b, ifd);
    if (rc == 0)
        return 0;
    for (int i = 0; i < started; i++)
        ddp_sys_kill(b, r->links[i].pid, SIGKILL);
    for (int i = 0; i < started; i++)
        ddp_sys_wait(b, r->links[i].pid, NULL, ddp_sys_deadline_in(b, RELAY_STOP_NS));
    for (int i = 0; i < r->nlinks; i++) {
        if (r->links[i].fd >= 0)
            ddp_sys_close(b, r->links[i].fd);
        r->links[i] = (link_t){.fd = -1, .pid = 0};
    }
    return rc;
}

static int rs_listen(ddp_sys_t *s, const ddp_addr_t *a, int backlog)
{
    relay_sys_t *r = R(s);
    if (r->listening)
        return ddp_err_set(-EBUSY, "the store relays serve one listener");
    int lfd = ddp_sys_listen(r->base, a, backlog);
    if (lfd < 0)
        return lfd;
    int rc = ddp_sys_local_addr(r->base, lfd, &r->laddr);
    if (rc == 0)
        rc = start_relays(r, lfd);
    /* The relays hold it now: this process does not accept on it. */
    ddp_sys_close(r->base, lfd);
    if (rc < 0)
        return rc;
    r->listening = 1;
    ddp_info("store server: %d relay processes hold the clients' connections",
             r->nlinks);
    return RELAY_LFD;
}

static void rs_destroy(ddp_sys_t *s)
{
    relay_sys_t *r = R(s);
    ddp_sys_t *b = r->base;
    for (int i = 0; i < r->nlinks; i++) { /* a relay exits at its link's end */
        link_t *l = &r->links[i];
        if (l->fd >= 0) {
            flush_out(b, l->fd, &l->out, RELAY_BUF_FIRST);
            ddp_sys_close(b, l->fd);
            l->fd = -1;
        }
    }
    int64_t deadline = ddp_sys_deadline_in(b, RELAY_STOP_NS);
    for (int i = 0; i < r->nlinks; i++) {
        link_t *l = &r->links[i];
        if (l->pid > 0 && ddp_sys_wait(b, l->pid, NULL, deadline) != 0) {
            ddp_sys_kill(b, l->pid, SIGKILL);
            ddp_sys_wait(b, l->pid, NULL, ddp_sys_deadline_in(b, RELAY_STOP_NS));
        }
        ddp__bb_free(&l->in);
        ddp__bb_free(&l->out);
        ddp__kv_free(&l->byid, NULL);
    }
    for (uint32_t i = 0; i < r->vcs.cap; i++) {
        vconn_t *c = pool_get(&r->vcs, i);
        if (c) {
            ddp__bb_free(&c->in);
            free(c);
        }
    }
    pool_free(&r->vcs);
    free(r->sets);
    free(r->links);
    free(r->args);
    ddp_env_free(s->env);
    free(r);
}

/* The rest is the base sys's. */
static int64_t rs_now(ddp_sys_t *s) { return ddp_sys_now(R(s)->base); }
static int rs_sleep_until(ddp_sys_t *s, int64_t d)
{
    return ddp_sys_sleep_until(R(s)->base, d);
}
static int rs_resolve(ddp_sys_t *s, const char *h, uint16_t p, ddp_addr_t *o, int m)
{
    return ddp_sys_resolve(R(s)->base, h, p, o, m);
}
static int rs_hostname(ddp_sys_t *s, char *b, size_t n)
{
    return ddp_sys_hostname(R(s)->base, b, n);
}
static int rs_connect(ddp_sys_t *s, const ddp_addr_t *a, int64_t d)
{
    return ddp_sys_connect(R(s)->base, a, d);
}
static int rs_poll(ddp_sys_t *s, ddp_pollfd_t *f, int n, int64_t d)
{
    for (int i = 0; i < n; i++)
        if (virt(f[i].fd))
            return ddp_err_set(-EINVAL, "poll over the store relays' sockets: "
                                        "use a readiness set");
    return ddp_sys_poll(R(s)->base, f, n, d);
}
static int rs_somaxconn(ddp_sys_t *s) { return ddp_sys_somaxconn(R(s)->base); }
static int rs_spawn(ddp_sys_t *s, const ddp_spawn_t *w, ddp_pid_t *p)
{
    return ddp_sys_spawn(R(s)->base, w, p);
}
static int rs_wait(ddp_sys_t *s, ddp_pid_t p, int *st, int64_t d)
{
    return ddp_sys_wait(R(s)->base, p, st, d);
}
static int rs_kill(ddp_sys_t *s, ddp_pid_t p, int sig)
{
    return ddp_sys_kill(R(s)->base, p, sig);
}
static int rs_thread_start(ddp_sys_t *s, ddp_thread_fn fn, void *arg,
                           const char *name, ddp_thread_t *out)
{
    return ddp_sys_thread_start(R(s)->base, fn, arg, name, out);
}
static int rs_thread_join(ddp_sys_t *s, ddp_thread_t t, int *rc, int64_t d)
{
    return ddp_sys_thread_join(R(s)->base, t, rc, d);
}
static int rs_read_file(ddp_sys_t *s, const char *p, char **d, size_t *n)
{
    return ddp_sys_read_file(R(s)->base, p, d, n);
}

static const ddp_sys_ops_t relay_ops = {
    .name = "store-relay",
    .now = rs_now,
    .sleep_until = rs_sleep_until,
    .resolve = rs_resolve,
    .hostname = rs_hostname,
    .listen = rs_listen,
    .accept = rs_accept,
    .connect = rs_connect,
    .send = rs_send,
    .recv = rs_recv,
    .poll = rs_poll,
    .epoll_create = rs_epoll_create,
    .epoll_ctl = rs_epoll_ctl,
    .epoll_wait = rs_epoll_wait,
    .epoll_close = rs_epoll_close,
    .close = rs_close,
    .local_addr = rs_local_addr,
    .somaxconn = rs_somaxconn,
    .spawn = rs_spawn,
    .wait = rs_wait,
    .kill = rs_kill,
    .thread_start = rs_thread_start,
    .thread_join = rs_thread_join,
    .read_file = rs_read_file,
    .destroy = rs_destroy,
};

long ddp_store_relay_pid(ddp_sys_t *relay, int i)
{
    if (!relay || relay->ops != &relay_ops)
        return -1;
    relay_sys_t *r = R(relay);
    return i >= 0 && i < r->nlinks && r->links[i].pid > 0 ? (long)r->links[i].pid
                                                           : -1;
}

int ddp_store_relays_hook(ddp_sys_t *base, void *arg, ddp_sys_t **out)
{
    int relays = arg ? *(const int *)arg : 0;
    *out = NULL;
    if (relays < 1 || relays > DDP_STORE_MAX_RELAYS)
        return ddp_err_set(DDP_ECONFIG, "store relays: %d; give 1 to %d",
                           relays, DDP_STORE_MAX_RELAYS);
    relay_sys_t *r = calloc(1, sizeof *r);
    if (!r || !(r->links = calloc((size_t)relays, sizeof *r->links)) ||
        !(r->args = calloc((size_t)relays, sizeof *r->args)) ||
        !(r->pub.env = ddp_env_clone(ddp_sys_env(base)))) {
        if (r) {
            free(r->links);
            free(r->args);
        }
        free(r);
        return ddp_err_set(-ENOMEM, "out of memory for the store relays");
    }
    r->pub.ops = &relay_ops;
    r->pub.impl = r;
    r->base = base;
    r->nlinks = relays;
    for (int i = 0; i < relays; i++)
        r->links[i].fd = -1;
    *out = &r->pub;
    return 0;
}
