/* core/store_server.c — a TCPStore-protocol server (PyTorch >= 2.4 libuv
 * server semantics; byte layouts, limits and differences:
 * docs/store-protocol.md).
 *
 * Both protocol generations share one key space. Each connection's
 * generation is told from its first request (opts.protocol auto): VALIDATE
 * with the magic is the current protocol, anything else is served with the
 * legacy table (torch 1.9 - 2.0), WATCH_KEY included. A legacy client opens
 * a second, silent connection for watch callbacks, so in auto and legacy
 * mode a connection that has sent nothing is kept (as torch 1.13's server
 * does); the validate timeout starts at its first byte instead.
 *
 * The event loop is a readiness set (ddp_sys_epoll_*): the listener and
 * every connection are registered once, with the interest they need
 * (re-registered only when it changes), so a pass costs O(ready
 * connections), not O(connected): idle connections cost nothing. Every
 * socket call goes through the sys seam with deadline 0 ("try once"), so
 * the same loop runs over real sockets and over the simulator's virtual
 * ones, and no client can block the others:
 *  - input is accumulated per connection and parsed from the start of the
 *    current request each time enough bytes are there (a request may arrive
 *    in any number of pieces, several may arrive in one read);
 *  - a readable connection gets one recv per pass unless that recv filled
 *    the room it was given (a short read means the socket is empty);
 *  - output is queued per connection and written with non-blocking sends
 *    once per pass, after every ready connection was read; POLLOUT is asked
 *    for only while some is pending;
 *  - a reply is never built past the connection's window: with more than
 *    SRV_OUT_HIGH bytes of replies unsent, its requests are not parsed
 *    (and it is not read) until it drains. Values are reference-counted
 *    blobs: a reply copies a small value and sends a large one straight
 *    from the stored blob, so a MULTI_GET naming an 8 MiB value 31 times
 *    costs 31 references, not 248 MiB.
 *
 * Memory budget (opts.max_memory): everything held for clients is counted
 * in srv->mem — keys, values, queue elements, waiters, watches (the store
 * part, srv->mem_store) and each connection's buffers, including values a
 * reply still references after the store let go of them. A request that
 * needs more is deferred when the store leaves room for it (the
 * connection is not read until memory frees: srv's deferred list, resumed
 * in order) and refused — that client dropped — when even the store alone
 * leaves none. Below small floors (SRV_IN_FLOOR of request, SRV_OUT_FLOOR
 * of reply to a connection with nothing unsent) a connection is always
 * served, so a normal client's GET is answered whatever the others hold.
 * A validated connection that has a request or replies in flight and
 * makes no progress for opts.idle_timeout_ns is dropped; one with nothing
 * in flight (a WAIT, torch's silent callback socket) never is. Progress is
 * a complete request, a reply sent in full or SRV_PROGRESS_BYTES of one
 * sent; bytes of a request that is not complete are not, so a client
 * trickling one byte a second is dropped one idle timeout after its
 * request began. A legacy connection's first request (not validated yet)
 * is held to it too, from its first byte.
 * Any protocol violation (bad first message, oversized length, unknown
 * opcode, over a limit) drops that connection only. Warnings are rate
 * limited per kind (srv_warn).
 *
 * Key storage: the shared key table (kvmap.h: hash + insertion order;
 * LIST_KEYS order is deterministic, whatever the hash). An entry holds a
 * key's value, its queue and the waiters blocked on it; a waiter sits on
 * two doubly linked lists (its key's and its connection's) so that waking
 * a key and cancelling a connection's wait are both O(waiters involved). */
#include "ddp/store.h"

#include <errno.h>
#include <fiu.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/fmt.h"
#include "ddp/log.h"
#include "bytebuf.h"
#include "kvmap.h"
#include "store_priv.h"

/* run() waits in slices this long so a stop() is noticed in bounded time
 * (no self-pipe: every socket goes through the sys seam). */
#define SRV_SLICE_NS (50 * DDP_NS_PER_MS)
/* Bytes read from one connection per step before the next one is served. */
#define SRV_RECV_BUDGET ((size_t)1 << 20)
/* A connection's window: above this much unsent output its requests are
 * not parsed. */
#define SRV_OUT_HIGH ((size_t)1 << 20)
/* Connections accepted per step (the rest wait in the backlog). */
#define SRV_ACCEPT_BATCH 256
/* Buffers above this are released once empty, so idle clients stay small. */
#define SRV_KEEP_BUF ((size_t)4 << 10)
/* A connection's first read asks for this much room (a rendezvous request
 * fits); each read that fills its room doubles the next one's, up to
 * SRV_RECV_CHUNK_MAX, so a client that pipelines is read in large pieces. */
#define SRV_RECV_FIRST ((size_t)512)
#define SRV_RECV_CHUNK_MAX ((size_t)64 << 10)
/* Request bytes a connection may buffer, and reply bytes it may be sent
 * when nothing else is unsent to it, whatever the memory budget says. */
#define SRV_IN_FLOOR ((size_t)16 << 10)
#define SRV_OUT_FLOOR ((size_t)4 << 10)
/* A value up to this is copied into a reply (one send with its header);
 * a larger one, or one past SRV_INLINE_REQ copied for one request, is sent
 * from the stored blob. */
#define SRV_INLINE_MAX ((size_t)64 << 10)
#define SRV_INLINE_REQ ((size_t)256 << 10)
/* A legacy watcher with more unsent notifications than this is dropped. */
#define SRV_WATCH_OUT_MAX ((size_t)64 << 20)
/* Sending this much counts as progress for the idle timeout. */
#define SRV_PROGRESS_BYTES ((size_t)64 << 10)
/* Events taken per wait (the rest are reported by the next one). */
#define SRV_EVENTS 256
/* One warning per kind per this long; the rest go to debug, counted. */
#define SRV_WARN_GAP_NS (10 * DDP_NS_PER_S)
/* After EMFILE and friends the listener rests this long (else it spins). */
#define SRV_ACCEPT_PAUSE_NS (100 * DDP_NS_PER_MS)
#define SRV_MIN_MAX_REQUEST ((size_t)64 << 20)
#define SRV_MIN_MAX_REPLY ((size_t)256 << 20)
#define SRV_INIT_BUCKETS 1024
/* WATCH_KEY's internal op number (legacy connections only). */
#define OP_WATCH_KEY (DDP_STORE_OP_COUNT + 1)

typedef struct srv_conn conn_t;
typedef struct srv_entry entry_t;

/* A value: shared by the store and the replies that still send it. */
typedef struct blob {
    size_t refs, len, cap;
    uint8_t data[];
} blob_t;

typedef struct waiter {
    conn_t *c;
    entry_t *e;
    struct waiter *kprev, *knext; /* on e's list */
    struct waiter *cprev, *cnext; /* on c's list */
} waiter_t;

typedef struct qitem {
    struct qitem *next;
    blob_t *b;
} qitem_t;

struct srv_entry {
    ddp__kv_node_t kv; /* first: key, hash chain, insertion order */
    blob_t *val;       /* non-NULL exactly when has_val */
    int has_val;
    qitem_t *qhead, *qtail;
    size_t qlen;
    waiter_t *whead, *wtail;
};

/* A reply's reference to a blob: sent after inline byte `pos`. */
typedef struct oref {
    uint64_t pos;
    blob_t *b;
} oref_t;

/* The server's connection lists, ordered by the time they were joined:
 * not yet validated (validate timeout), busy (idle timeout), deferred
 * (waiting for memory, FIFO). */
enum { L_UV, L_BUSY, L_MEM, L_COUNT };

typedef struct tlink {
    conn_t *prev, *next;
    int64_t t;
    int on;
} tlink_t;

struct srv_conn {
    int fd;
    size_t idx; /* in conns[] */
    char name[DDP_ADDR_STRLEN];
    int validated; /* its first request completed (VALIDATE, or any legacy
                      request) */
    int gen;       /* 0 until the first request tells: LEGACY or CURRENT */
    int authed;    /* sent the server's token */
    int dead;      /* closed; freed at the end of the step */
    int doom;      /* to be dropped at the next safe point */
    int dirty;     /* on the server's dirty list */
    int deferred;  /* on L_MEM: not read until memory frees */
    int defer_req; /* ... with a whole request waiting (else: its input) */
    short ev;      /* the interest registered in the readiness set */
    tlink_t lk[L_COUNT];
    size_t defer_need; /* what it waits for */
    conn_t *dnext;     /* on the dead list */
    ddp__bb_t in;
    size_t need; /* bytes from in.off needed before parsing again */
    ddp__bb_t out;    /* inline reply bytes */
    uint64_t out_in, out_sent; /* inline bytes appended / sent, ever */
    oref_t *refs;     /* blobs to send, in order: [rhead, rhead + rn) */
    size_t rhead, rn, rcap, roff; /* roff: bytes of the head blob sent */
    size_t ref_bytes; /* bytes of those blobs still to send */
    size_t req_inline; /* value bytes the current request copied */
    size_t sent_since; /* bytes sent since the last progress */
    size_t charged;    /* what srv->mem counts for this connection */
    waiter_t *whead, *wtail;
    size_t wait_left; /* keys of the pending WAIT still missing */
    int waiting;
    unsigned long long id; /* serial number (on_client) */
    ddp_addr_t peer;
    int passed;            /* its barrier ADD returned the world size */
};

typedef struct slice {
    const uint8_t *p;
    size_t n;
} slice_t;

/* Warning kinds, each rate limited on its own. */
enum { RL_ACCEPT, RL_REFUSE, RL_DROP, RL_TIMEOUT, RL_MEMORY, RL_DENY,
       RL_COUNT };

struct ddp_store_server {
    ddp_sys_t *sys;
    ddp_sys_t *own_sys; /* what opts.sys_hook made: sys is this (owned) */
    long long joined; /* clients that completed their first request */
    unsigned long long accepted; /* connections accepted: their serials */
    ddp_store_server_opts_t o; /* defaults filled in; strings: ours */
    size_t max_request, max_reply;
    int lfd, ep;
    ddp_addr_t addr;
    int64_t accept_paused_until;
    int accept_paused;
    int64_t now; /* of the current step */

    conn_t **conns;
    size_t nconns, cconns;
    struct {
        conn_t *head, *tail;
    } tl[L_COUNT];
    conn_t **dirty;
    size_t ndirty, cdirty;
    conn_t *dead;
    ddp_epoll_event_t evs[SRV_EVENTS];

    struct watch { /* legacy WATCH_KEY registrations */
        conn_t *c;
        uint8_t *key;
        size_t klen;
    } *watches;
    size_t nwatches, cwatches;

    ddp__kvmap_t keys;
    size_t nvals;   /* keys with a value (GETNUMKEYS) */
    size_t nstored; /* entries with a value or a non-empty queue */
    size_t mem, mem_store, mem_peak; /* bytes: all, the store's, the most */

    ddp__store_acl_t acl;
    char *allow, *token; /* copies of the options */
    size_t token_len;
    struct {
        int64_t until;
        uint64_t quiet;
    } rl[RL_COUNT];

    slice_t *scratch;
    size_t cscratch;
    char msg[256]; /* why the current request failed */

    atomic_int stop;
#define SRV_STATS(X) /* (field of ddp_store_server_stats_t, atomic) */       \
    X(clients, st_clients) X(keys, st_keys) X(requests, st_requests)           \
    X(protocol_errors, st_proto) X(unvalidated_dropped, st_unval)              \
    X(rejected_clients, st_rejected) X(legacy_connections, st_legacy)          \
    X(memory, st_mem) X(memory_peak, st_mem_peak)                              \
    X(memory_refused, st_refused) X(deferred, st_deferred)                     \
    X(idle_dropped, st_idle) X(denied, st_denied)
#define SRV_STAT_FIELD(out, f) _Atomic(uint64_t) f;
    SRV_STATS(SRV_STAT_FIELD)
#undef SRV_STAT_FIELD

    pthread_t thread;
    int thread_started;
};

#define ST_ADD(srv, f, n)                                                      \
    atomic_fetch_add_explicit(&(srv)->f, (n), memory_order_relaxed)
#define ST_SET(srv, f, v)                                                      \
    atomic_store_explicit(&(srv)->f, (v), memory_order_relaxed)

/* Opcode names for messages, from the one table in store.h (kept local so
 * the server links without the client half of the store module). */
static const char *op_name(int op)
{
    static const char *const names[] = {
#define DDP__STORE_OP_NAME(name, v) [v] = #name,
        DDP_STORE_OPCODES(DDP__STORE_OP_NAME)
#undef DDP__STORE_OP_NAME
    };
    return op >= 0 && op < DDP_STORE_OP_COUNT ? names[op] : "UNKNOWN";
}

static int srv_fail(ddp_store_server_t *srv, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int srv_fail(ddp_store_server_t *srv, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(srv->msg, sizeof srv->msg, fmt, ap);
    va_end(ap);
    return -1;
}

/* A warning of `kind`: the first in SRV_WARN_GAP_NS is logged, the rest
 * at debug level, and the next logged one says how many there were (a
 * flood of hostile or broken clients must not flood the log). */
static void srv_warn(ddp_store_server_t *srv, int kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void srv_warn(ddp_store_server_t *srv, int kind, const char *fmt, ...)
{
    if (!ddp_log_enabled(DDP_LOG_WARN))
        return;
    char line[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    int64_t now = ddp_sys_now(srv->sys);
    if (srv->rl[kind].until && now < srv->rl[kind].until) {
        srv->rl[kind].quiet++;
        ddp_debug("%s", line);
        return;
    }
    if (srv->rl[kind].quiet)
        ddp_warn("%s (and %" PRIu64 " more like it in the last %.0f s, "
                 "logged at debug level)",
                 line, (uint64_t)srv->rl[kind].quiet,
                 (double)SRV_WARN_GAP_NS / 1e9);
    else
        ddp_warn("%s", line);
    srv->rl[kind].quiet = 0;
    srv->rl[kind].until = now + SRV_WARN_GAP_NS;
}

/* --------------------------------------------------------------- memory */

static void mem_add(ddp_store_server_t *srv, size_t n, int store)
{
    srv->mem += n;
    if (store)
        srv->mem_store += n;
    if (srv->mem > srv->mem_peak) {
        srv->mem_peak = srv->mem;
        ST_SET(srv, st_mem_peak, srv->mem_peak);
    }
    ST_SET(srv, st_mem, srv->mem);
}

static void mem_sub(ddp_store_server_t *srv, size_t n, int store)
{
    srv->mem -= n;
    if (store)
        srv->mem_store -= n;
    ST_SET(srv, st_mem, srv->mem);
}

#define BLOB_COST(cap) (sizeof(blob_t) + (cap))
#define ENT_COST(klen) (sizeof(entry_t) + (klen) + 1)
#define WATCH_COST(klen) (sizeof(struct watch) + (klen))

/* A new value held by the store (counted there), or NULL. */
static blob_t *blob_new(ddp_store_server_t *srv, const void *p, size_t n)
{
    blob_t *b = malloc(sizeof *b + (n ? n : 1));
    if (!b)
        return NULL;
    b->refs = 1;
    b->len = b->cap = n;
    if (n)
        memcpy(b->data, p, n);
    mem_add(srv, BLOB_COST(n), 1);
    return b;
}

static void blob_unref(ddp_store_server_t *srv, blob_t *b)
{
    if (b && --b->refs == 0) {
        mem_sub(srv, BLOB_COST(b->cap), 0);
        free(b);
    }
}

/* The store lets go of b: it stops counting there, and lives on while a
 * reply still sends it. */
static void blob_unstore(ddp_store_server_t *srv, blob_t *b)
{
    if (!b)
        return;
    srv->mem_store -= BLOB_COST(b->cap);
    blob_unref(srv, b);
}

/* The next capacity of a value that grows to n bytes in place (APPEND):
 * doubling, but never past the value limit. */
static size_t grown_cap(const blob_t *b, size_t n, size_t maxv)
{
    size_t nc = b->cap ? b->cap : 64;
    while (nc < n)
        nc = nc > maxv / 2 ? (n > maxv ? n : maxv) : nc * 2;
    return nc;
}

/* The input capacity c needs to take `want` more bytes: doubling (from
 * SRV_RECV_FIRST), but never past what the current request needs once its
 * length is known (an 8 MiB SET takes 8 MiB and a few bytes, not 16 MiB). */
static size_t in_cap_for(const conn_t *c, size_t want)
{
    size_t pending = ddp__bb_pending(&c->in);
    if (c->in.cap - pending >= want)
        return c->in.cap;
    size_t nc = c->in.cap ? c->in.cap : SRV_RECV_FIRST;
    while (nc - pending < want && nc <= SIZE_MAX / 2)
        nc *= 2;
    if (c->need >= pending + want && nc > c->need)
        nc = c->need;
    return nc;
}

/* A connection's buffers changed size: srv->mem follows. */
static void conn_charge(ddp_store_server_t *srv, conn_t *c)
{
    size_t cur = sizeof *c + c->in.cap + c->out.cap + c->rcap * sizeof(oref_t);
    if (cur > c->charged)
        mem_add(srv, cur - c->charged, 0);
    else
        mem_sub(srv, c->charged - cur, 0);
    c->charged = cur;
}

enum { FIT_OK = 0, FIT_DEFER, FIT_REFUSE };

/* Whether `cost` more bytes fit the budget: yes; not now (other
 * connections' buffers hold the rest: defer); never (the store and the
 * `own` bytes of the connection asking leave no room: refuse). */
static int mem_fits(const ddp_store_server_t *srv, size_t cost, size_t own)
{
    size_t max = srv->o.max_memory;
    if (srv->mem <= max && cost <= max - srv->mem)
        return FIT_OK;
    size_t fixed = srv->mem_store + own;
    return fixed > max || cost > max - fixed ? FIT_REFUSE : FIT_DEFER;
}

/* ------------------------------------------------------- connection lists */

static void tl_push(ddp_store_server_t *srv, int l, conn_t *c, int64_t t)
{
    tlink_t *k = &c->lk[l];
    if (k->on)
        return;
    k->on = 1;
    k->t = t;
    k->prev = srv->tl[l].tail;
    k->next = NULL;
    if (srv->tl[l].tail)
        srv->tl[l].tail->lk[l].next = c;
    else
        srv->tl[l].head = c;
    srv->tl[l].tail = c;
}

static void tl_del(ddp_store_server_t *srv, int l, conn_t *c)
{
    tlink_t *k = &c->lk[l];
    if (!k->on)
        return;
    k->on = 0;
    if (k->prev)
        k->prev->lk[l].next = k->next;
    else
        srv->tl[l].head = k->next;
    if (k->next)
        k->next->lk[l].prev = k->prev;
    else
        srv->tl[l].tail = k->prev;
    k->prev = k->next = NULL;
}

/* c made progress: its idle timeout starts over. */
static void conn_progress(ddp_store_server_t *srv, conn_t *c)
{
    c->sent_since = 0;
    if (c->lk[L_BUSY].on) {
        tl_del(srv, L_BUSY, c);
        tl_push(srv, L_BUSY, c, srv->now);
    }
}

/* ------------------------------------------------------------------ keys */

static int ent_stored(const entry_t *e) { return e->has_val || e->qlen > 0; }

static entry_t *ent_find(ddp_store_server_t *srv, slice_t k)
{
    return (entry_t *)ddp__kv_find(&srv->keys, k.p, k.n);
}

/* Find or create (NULL only on ENOMEM); a new entry counts in the store. */
static entry_t *ent_get(ddp_store_server_t *srv, slice_t k)
{
    size_t before = srv->keys.n;
    entry_t *e =
        (entry_t *)ddp__kv_get(&srv->keys, k.p, k.n, sizeof(entry_t));
    if (e && srv->keys.n > before)
        mem_add(srv, ENT_COST(k.n), 1);
    return e;
}

/* Frees an entry's value and queue at teardown (the map frees the rest). */
static void ent_fini(ddp__kv_node_t *n)
{
    entry_t *e = (entry_t *)n;
    for (qitem_t *q = e->qhead, *next; q; q = next) {
        next = q->next;
        free(q->b);
        free(q);
    }
    free(e->val);
}

/* An entry lives while it has a value, a queue or waiters. */
static void ent_maybe_free(ddp_store_server_t *srv, entry_t *e)
{
    if (!e || e->has_val || e->qlen || e->whead)
        return;
    mem_sub(srv, ENT_COST(e->kv.klen), 1);
    ddp__kv_remove(&srv->keys, &e->kv);
}

/* Counters follow an entry's transition; call with its state before. */
static void ent_account(ddp_store_server_t *srv, entry_t *e, int had_val,
                        int was_stored)
{
    srv->nvals += (size_t)e->has_val - (size_t)had_val;
    srv->nstored += (size_t)ent_stored(e) - (size_t)was_stored;
    ST_SET(srv, st_keys, srv->nvals);
}

/* ------------------------------------------------------- output buffers */

static void mark_dirty(ddp_store_server_t *srv, conn_t *c)
{
    if (c->dirty)
        return;
    if (srv->ndirty == srv->cdirty) {
        size_t nc = srv->cdirty ? srv->cdirty * 2 : 64;
        conn_t **d = realloc(srv->dirty, nc * sizeof *d);
        if (!d) {
            /* Without a dirty slot the reply would sit until the next
             * POLLOUT; dooming keeps the state consistent instead. */
            c->doom = 1;
            return;
        }
        srv->dirty = d;
        srv->cdirty = nc;
    }
    srv->dirty[srv->ndirty++] = c;
    c->dirty = 1;
}

/* Reply bytes not yet sent: inline and referenced. */
static size_t out_total(const conn_t *c)
{
    return ddp__bb_pending(&c->out) + c->ref_bytes;
}

static int out_reserve(ddp_store_server_t *srv, conn_t *c, size_t n)
{
    if (ddp__bb_reserve(&c->out, n, 256) != 0)
        return -ENOMEM;
    conn_charge(srv, c);
    return 0;
}

/* Room for n more blob references. */
static int ref_reserve(ddp_store_server_t *srv, conn_t *c, size_t n)
{
    if (c->rhead && c->rhead + c->rn + n > c->rcap) {
        memmove(c->refs, c->refs + c->rhead, c->rn * sizeof *c->refs);
        c->rhead = 0;
    }
    if (c->rn + n <= c->rcap)
        return 0;
    size_t nc = c->rcap ? c->rcap : 8;
    while (nc < c->rn + n)
        nc *= 2;
    oref_t *r = realloc(c->refs, nc * sizeof *r);
    if (!r)
        return -ENOMEM;
    c->refs = r;
    c->rcap = nc;
    conn_charge(srv, c);
    return 0;
}

/* Appends to c's output (the caller reserved room). */
static void out_put(conn_t *c, const void *p, size_t n)
{
    ddp__bb_put(&c->out, p, n);
    c->out_in += n;
}

/* Sends b after the inline bytes queued so far (the caller reserved). */
static void out_ref(conn_t *c, blob_t *b)
{
    b->refs++;
    c->refs[c->rhead + c->rn++] = (oref_t){.pos = c->out_in, .b = b};
    c->ref_bytes += b->len;
}

/* A reply for c: reserve, write, mark for flushing. Returns 0 or -ENOMEM
 * (the connection is then doomed: a half-written reply must not be sent). */
static int reply(ddp_store_server_t *srv, conn_t *c, const void *p, size_t n)
{
    if (out_reserve(srv, c, n) != 0) {
        c->doom = 1;
        mark_dirty(srv, c);
        return -ENOMEM;
    }
    out_put(c, p, n);
    mark_dirty(srv, c);
    return 0;
}

static int reply_u8(ddp_store_server_t *srv, conn_t *c, uint8_t v)
{
    return reply(srv, c, &v, 1);
}

static int reply_i64(ddp_store_server_t *srv, conn_t *c, int64_t v)
{
    return reply(srv, c, &v, 8); /* host byte order, as PyTorch does */
}

/* u64 length + bytes (the caller reserved room). */
static void out_put_bytes(conn_t *c, const void *p, size_t n)
{
    uint64_t len = n;
    out_put(c, &len, 8);
    out_put(c, p, n);
}

/* A value field of a reply (u64 length, then the bytes of b, NULL: empty):
 * copied when small, the request has not copied too much already and the
 * budget allows it; else sent from the blob itself. 0 or -ENOMEM. */
static int put_value(ddp_store_server_t *srv, conn_t *c, blob_t *b)
{
    size_t n = b ? b->len : 0;
    int copy = n == 0 ||
               (n <= SRV_INLINE_MAX && c->req_inline + n <= SRV_INLINE_REQ &&
                (mem_fits(srv, n, 0) == FIT_OK ||
                 out_total(c) + 8 + n <= SRV_OUT_FLOOR));
    if (out_reserve(srv, c, 8 + (copy ? n : 0)) != 0 ||
        (!copy && ref_reserve(srv, c, 1) != 0))
        return -ENOMEM;
    uint64_t len = n;
    out_put(c, &len, 8);
    if (copy) {
        if (n)
            out_put(c, b->data, n);
        c->req_inline += n;
    } else {
        out_ref(c, b);
    }
    mark_dirty(srv, c);
    return 0;
}

/* Puts c at the end of the list of connections not yet validated; its
 * validate timeout runs from now. */
static void uv_link(ddp_store_server_t *srv, conn_t *c)
{
    tl_push(srv, L_UV, c, ddp_sys_now(srv->sys));
}

/* ---------------------------------------------------------------- waits */

static void waiter_unlink(ddp_store_server_t *srv, waiter_t *w)
{
    entry_t *e = w->e;
    conn_t *c = w->c;
    if (w->kprev)
        w->kprev->knext = w->knext;
    else
        e->whead = w->knext;
    if (w->knext)
        w->knext->kprev = w->kprev;
    else
        e->wtail = w->kprev;
    if (w->cprev)
        w->cprev->cnext = w->cnext;
    else
        c->whead = w->cnext;
    if (w->cnext)
        w->cnext->cprev = w->cprev;
    else
        c->wtail = w->cprev;
    free(w);
    mem_sub(srv, sizeof *w, 1);
}

/* Drop every waiter of c (CANCEL_WAIT, disconnect). */
static void conn_clear_waits(ddp_store_server_t *srv, conn_t *c)
{
    while (c->whead) {
        entry_t *e = c->whead->e;
        waiter_unlink(srv, c->whead);
        ent_maybe_free(srv, e);
    }
    c->waiting = 0;
    c->wait_left = 0;
}

/* The key now exists: satisfy its waiters in arrival order. With `one`
 * (QUEUE_PUSH: one new element) stop after the first WAIT completed, so a
 * single push does not wake every blocked popper. */
static void wake_key(ddp_store_server_t *srv, entry_t *e, int one)
{
    while (e->whead) {
        waiter_t *w = e->whead;
        conn_t *c = w->c;
        waiter_unlink(srv, w);
        if (--c->wait_left == 0) {
            c->waiting = 0;
            reply_u8(srv, c, DDP_STORE_STOP_WAITING); /* dooms c on ENOMEM */
            if (one)
                break;
        }
    }
}

/* ------------------------------------------------------ legacy watches */

static int watched(const ddp_store_server_t *srv, slice_t k)
{
    for (size_t i = 0; i < srv->nwatches; i++)
        if (srv->watches[i].klen == k.n &&
            (k.n == 0 || memcmp(srv->watches[i].key, k.p, k.n) == 0))
            return 1;
    return 0;
}

/* Tells every connection watching k what changed, as torch 1.13's server
 * does: u8 type, key, old value, new value (each u64 length + bytes; the
 * values referenced, not copied, when large). A watcher that lets too much
 * pile up unread (SRV_WATCH_OUT_MAX, or past its floor while the budget is
 * full) is dropped. */
static void notify_watchers(ddp_store_server_t *srv, slice_t k, int type,
                            blob_t *oldv, blob_t *newv)
{
    for (size_t i = 0; i < srv->nwatches; i++) {
        struct watch *w = &srv->watches[i];
        if (w->klen != k.n || (k.n && memcmp(w->key, k.p, k.n) != 0) ||
            w->c->dead)
            continue;
        conn_t *c = w->c;
        c->req_inline = 0;
        uint8_t t = (uint8_t)type;
        if (out_reserve(srv, c, 1 + 8 + k.n) != 0) {
            c->doom = 1;
        } else {
            out_put(c, &t, 1);
            out_put_bytes(c, k.p, k.n);
            /* Unread notifications may not outgrow the budget either. */
            if (put_value(srv, c, oldv) != 0 || put_value(srv, c, newv) != 0 ||
                out_total(c) > SRV_WATCH_OUT_MAX ||
                (out_total(c) > SRV_OUT_FLOOR && mem_fits(srv, 0, 0) != FIT_OK))
                c->doom = 1;
        }
        mark_dirty(srv, c);
    }
}

static int watch_add(ddp_store_server_t *srv, conn_t *c, slice_t k)
{
    if (srv->nwatches == srv->cwatches) {
        size_t nc = srv->cwatches ? srv->cwatches * 2 : 8;
        struct watch *w = realloc(srv->watches, nc * sizeof *w);
        if (!w)
            return srv_fail(srv, "out of memory registering a WATCH_KEY");
        srv->watches = w;
        srv->cwatches = nc;
    }
    uint8_t *key = malloc(k.n ? k.n : 1);
    if (!key)
        return srv_fail(srv, "out of memory registering a WATCH_KEY");
    if (k.n)
        memcpy(key, k.p, k.n);
    srv->watches[srv->nwatches++] = (struct watch){c, key, k.n};
    mem_add(srv, WATCH_COST(k.n), 1);
    return 0;
}

static void watches_drop(ddp_store_server_t *srv, conn_t *c)
{
    for (size_t i = 0; i < srv->nwatches;) {
        if (srv->watches[i].c == c) {
            mem_sub(srv, WATCH_COST(srv->watches[i].klen), 1);
            free(srv->watches[i].key);
            srv->watches[i] = srv->watches[--srv->nwatches];
        } else {
            i++;
        }
    }
}

/* ------------------------------------------------------------ store ops */

/* The entry for k, about to be stored into (find or create), with its
 * state before (for ent_account); NULL with srv->msg when out of memory
 * or when k would be one key over max_keys (`what`: "one", "queue"...). */
static entry_t *ent_claim(ddp_store_server_t *srv, slice_t k,
                          const char *oom, const char *what, int *had,
                          int *was)
{
    entry_t *e = ent_find(srv, k);
    /* Only stored keys count: entries that exist for waiters are paid for
     * in the memory budget (else waits on keys nobody sets would fill the
     * table and refuse every real key). */
    if ((!e || !ent_stored(e)) && srv->nstored >= srv->o.max_keys)
        return srv_fail(srv, "the store holds %zu keys (max_keys); refusing "
                             "a new %s",
                        srv->nstored, what),
               NULL;
    if (!e && !(e = ent_get(srv, k)))
        return srv_fail(srv, "%s", oom), NULL;
    *had = e->has_val;
    *was = ent_stored(e);
    return e;
}

/* Whether SET of an n-byte value can reuse b's buffer: b is the store's
 * alone and not much larger (a SET loop does not malloc). */
static int reuse_blob(const blob_t *b, size_t n)
{
    return b && b->refs == 1 && b->cap >= n && b->cap <= 2 * n + 64;
}

/* Make k hold exactly v (created when missing). 0, or -1 with srv->msg. */
static int store_set(ddp_store_server_t *srv, slice_t k, slice_t v)
{
    int had, was;
    entry_t *e = ent_claim(srv, k, "out of memory storing a key", "one",
                           &had, &was);
    if (!e)
        return -1;
    /* A watched key's old value goes out after the overwrite: keep it. */
    blob_t *old = NULL;
    int watch = srv->nwatches > 0 && watched(srv, k);
    if (watch && had)
        (old = e->val)->refs++;
    if (reuse_blob(e->val, v.n)) {
        if (v.n)
            memcpy(e->val->data, v.p, v.n);
        e->val->len = v.n;
    } else {
        blob_t *nb = blob_new(srv, v.p, v.n);
        if (!nb) {
            blob_unref(srv, old);
            ent_maybe_free(srv, e);
            return srv_fail(srv, "out of memory storing a %zu-byte value",
                            v.n);
        }
        blob_unstore(srv, e->val);
        e->val = nb;
    }
    e->has_val = 1;
    ent_account(srv, e, had, was);
    wake_key(srv, e, 0);
    if (watch) {
        notify_watchers(srv, k, had ? DDP_STORE_KEY_UPDATED
                                    : DDP_STORE_KEY_CREATED,
                        old, e->val);
        blob_unref(srv, old);
    }
    return 0;
}

static int store_append(ddp_store_server_t *srv, slice_t k, slice_t v)
{
    entry_t *e = ent_find(srv, k);
    if (!e || !e->has_val)
        return store_set(srv, k, v);
    blob_t *b = e->val;
    if (v.n > srv->o.max_value_len - b->len)
        return srv_fail(srv, "APPEND would grow the value past %zu bytes "
                             "(max_value_len)",
                        srv->o.max_value_len);
    /* Legacy watchers know no KEY_APPENDED: an update, old = the value
     * before the append (kept: the append then goes to a new blob). */
    int watch = srv->nwatches > 0 && watched(srv, k);
    if (watch)
        b->refs++;
    if (b->refs == 1 && b->cap - b->len < v.n) {
        size_t nc = grown_cap(b, b->len + v.n, srv->o.max_value_len);
        blob_t *nb = realloc(b, sizeof *b + nc);
        if (!nb)
            return srv_fail(srv, "out of memory appending %zu bytes", v.n);
        mem_add(srv, nc - nb->cap, 1);
        nb->cap = nc;
        e->val = b = nb;
    } else if (b->refs > 1) {
        blob_t *nb = malloc(sizeof *nb + b->len + v.n + 1);
        if (!nb) {
            if (watch)
                b->refs--;
            return srv_fail(srv, "out of memory appending %zu bytes", v.n);
        }
        nb->refs = 1;
        nb->len = nb->cap = b->len;
        nb->cap += v.n;
        memcpy(nb->data, b->data, b->len);
        mem_add(srv, BLOB_COST(nb->cap), 1);
        blob_unstore(srv, b);
        e->val = nb;
    }
    if (v.n)
        memcpy(e->val->data + e->val->len, v.p, v.n);
    e->val->len += v.n;
    if (watch) {
        notify_watchers(srv, k, DDP_STORE_KEY_UPDATED, b, e->val);
        blob_unref(srv, b);
    }
    return 0;
}

/* std::stoll semantics (what PyTorch applies to a counter): optional
 * leading white space and sign, at least one digit, stop at the first
 * non-digit; no digits or out of range is an error. */
static int parse_counter(const uint8_t *p, size_t n, int64_t *out)
{
    size_t i = 0;
    while (i < n && (p[i] == ' ' || (p[i] >= '\t' && p[i] <= '\r')))
        i++;
    int neg = 0;
    if (i < n && (p[i] == '+' || p[i] == '-'))
        neg = p[i++] == '-';
    if (i >= n || p[i] < '0' || p[i] > '9')
        return -1;
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t acc = 0;
    for (; i < n && p[i] >= '0' && p[i] <= '9'; i++) {
        unsigned d = (unsigned)(p[i] - '0');
        if (acc > (limit - d) / 10)
            return -1;
        acc = acc * 10 + d;
    }
    if (!neg)
        *out = (int64_t)acc;
    else
        *out = acc == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)acc;
    return 0;
}

static int store_add(ddp_store_server_t *srv, slice_t k, int64_t delta,
                     int64_t *res)
{
    entry_t *e = ent_find(srv, k);
    int64_t cur = 0;
    if (e && e->has_val && parse_counter(e->val->data, e->val->len, &cur) != 0)
        return srv_fail(srv, "ADD on key \"%.*s\" whose value (%zu bytes) is "
                             "not a decimal integer",
                        (int)(k.n > 64 ? 64 : k.n), (const char *)k.p,
                        e->val->len);
    if (__builtin_add_overflow(cur, delta, res))
        return srv_fail(srv, "ADD %" PRId64 " to %" PRId64 " on key \"%.*s\" "
                             "overflows int64",
                        delta, cur, (int)(k.n > 64 ? 64 : k.n),
                        (const char *)k.p);
    char txt[24];
    int len = ddp_fmt(txt, sizeof txt, "%" PRId64, *res);
    return store_set(srv, k, (slice_t){(const uint8_t *)txt, (size_t)len});
}

static int blob_eq(const blob_t *b, slice_t s)
{
    return b->len == s.n && (s.n == 0 || memcmp(b->data, s.p, s.n) == 0);
}

/* ------------------------------------------------------------- parsing */

enum { RD_OK = 0, RD_MORE, RD_BAD };

typedef struct rd {
    const uint8_t *p;
    size_t n, off, max;
    size_t need;
    int st;
    char *msg;
    size_t msgn;
} rd_t;

static void rd_bad(rd_t *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void rd_bad(rd_t *r, const char *fmt, ...)
{
    if (r->st != RD_OK)
        return;
    r->st = RD_BAD;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, r->msgn, fmt, ap);
    va_end(ap);
}

static const uint8_t *rd_take(rd_t *r, size_t k)
{
    if (r->st != RD_OK)
        return NULL;
    if (k > r->max - r->off) {
        rd_bad(r, "request larger than %zu bytes", r->max);
        return NULL;
    }
    if (k > r->n - r->off) {
        r->st = RD_MORE;
        r->need = r->off + k;
        return NULL;
    }
    const uint8_t *q = r->p + r->off;
    r->off += k;
    return q;
}

static uint64_t rd_u64(rd_t *r)
{
    uint64_t v = 0;
    const uint8_t *q = rd_take(r, 8);
    if (q)
        memcpy(&v, q, 8);
    return v;
}

static uint32_t rd_u32(rd_t *r)
{
    uint32_t v = 0;
    const uint8_t *q = rd_take(r, 4);
    if (q)
        memcpy(&v, q, 4);
    return v;
}

static slice_t rd_str(rd_t *r, size_t maxlen, const char *what)
{
    slice_t s = {NULL, 0};
    uint64_t len = rd_u64(r);
    if (r->st != RD_OK)
        return s;
    if (len > maxlen) {
        rd_bad(r, "%s length %" PRIu64 " exceeds the limit of %zu bytes", what,
               len, maxlen);
        return s;
    }
    s.n = (size_t)len;
    s.p = rd_take(r, s.n);
    return s;
}

static size_t rd_count(rd_t *r, size_t max, const char *op)
{
    uint64_t n = rd_u64(r);
    if (r->st == RD_OK && n > max)
        rd_bad(r, "%s with %" PRIu64 " keys (max_keys is %zu)", op, n, max);
    return (size_t)n;
}

/* The server's scratch array of slices, at least n long. */
static slice_t *scratch(ddp_store_server_t *srv, size_t n)
{
    if (n <= srv->cscratch)
        return srv->scratch;
    size_t nc = srv->cscratch ? srv->cscratch : 64;
    while (nc < n)
        nc *= 2;
    slice_t *s = realloc(srv->scratch, nc * sizeof *s);
    if (!s)
        return NULL;
    srv->scratch = s;
    srv->cscratch = nc;
    return s;
}

/* n keys into the scratch array (NULL when incomplete/bad/ENOMEM). */
static slice_t *rd_keys(ddp_store_server_t *srv, rd_t *r, size_t n,
                        size_t per)
{
    slice_t *ks = NULL;
    for (size_t i = 0; i < n && r->st == RD_OK; i++) {
        /* Grow as keys arrive: a count alone must not allocate much. */
        if (!(ks = scratch(srv, (i + 1) * per))) {
            rd_bad(r, "out of memory reading %zu keys", n);
            return NULL;
        }
        ks[i * per] = rd_str(r, srv->o.max_key_len, "key");
        if (per == 2)
            ks[i * 2 + 1] = rd_str(r, srv->o.max_value_len, "value");
    }
    return r->st == RD_OK ? (ks ? ks : srv->scratch) : NULL;
}

/* ---------------------------------------------------- request handling */

/* H_DEFER: the request needs memory the budget does not have now (nothing
 * was done; it is parsed again when memory frees). H_LIMIT: it never fits
 * beside the store (the client is dropped). H_DENY: access control. */
enum { H_OK = 0, H_MORE, H_BAD, H_DROP, H_DEFER, H_LIMIT, H_DENY };

/* "store/server/reply": the operation took effect but its reply is lost
 * and the connection dropped (a server dying mid-request). */
#define REPLY_FAULT()                                                          \
    do {                                                                       \
        if (ddp_fault_hit(DDP_FP_STORE_SERVER_REPLY)) {                                  \
            srv_fail(srv, "fault point store/server/reply fired");             \
            return H_DROP;                                                     \
        }                                                                      \
    } while (0)

#define NOMEM_IF(x)                                                            \
    do {                                                                       \
        if ((x) != 0) {                                                        \
            srv_fail(srv, "out of memory queueing a reply");                   \
            return H_BAD;                                                      \
        }                                                                      \
    } while (0)

static int key_present(ddp_store_server_t *srv, slice_t k)
{
    entry_t *e = ent_find(srv, k);
    return e && ent_stored(e);
}

/* What storing an n-byte value under k adds to the store (net of the old
 * value it replaces). */
static size_t set_cost(ddp_store_server_t *srv, slice_t k, size_t n)
{
    entry_t *e = ent_find(srv, k);
    if (!e || !e->has_val)
        return (e ? 0 : ENT_COST(k.n)) + BLOB_COST(n);
    if (reuse_blob(e->val, n))
        return 0;
    size_t old = e->val->refs == 1 ? BLOB_COST(e->val->cap) : 0;
    return BLOB_COST(n) > old ? BLOB_COST(n) - old : 0;
}

/* What a parsed request will add to the store and to c's reply buffers.
 * H_OK, or H_BAD when it would track more than max_keys keys. */
static int req_cost(ddp_store_server_t *srv, int op, slice_t k, slice_t v,
                    slice_t v2, const slice_t *ks, size_t n, size_t *store,
                    size_t *out)
{
    *store = *out = 0;
    switch (op) {
    case DDP_STORE_OP_SET:
        *store = set_cost(srv, k, v.n);
        break;
    case DDP_STORE_OP_APPEND: {
        entry_t *e = ent_find(srv, k);
        if (!e || !e->has_val)
            *store = set_cost(srv, k, v.n);
        else if (e->val->refs > 1 || e->val->cap - e->val->len < v.n)
            *store = BLOB_COST(grown_cap(e->val, e->val->len + v.n,
                                         srv->o.max_value_len)) -
                     (e->val->refs == 1 ? BLOB_COST(e->val->cap) : 0);
        break;
    }
    case DDP_STORE_OP_QUEUE_PUSH:
        *store = (ent_find(srv, k) ? 0 : ENT_COST(k.n)) + sizeof(qitem_t) +
                 BLOB_COST(v.n);
        break;
    case DDP_STORE_OP_COMPARE_SET: {
        entry_t *e = ent_find(srv, k);
        if (e && e->has_val ? blob_eq(e->val, v) : v.n == 0)
            *store = set_cost(srv, k, v2.n);
        *out = 8 + sizeof(oref_t);
        break;
    }
    case DDP_STORE_OP_ADD:
        *store = set_cost(srv, k, 20);
        *out = 8;
        break;
    case DDP_STORE_OP_MULTI_SET:
        for (size_t i = 0; i < n; i++)
            *store += set_cost(srv, ks[2 * i], ks[2 * i + 1].n);
        break;
    case DDP_STORE_OP_WAIT: {
        size_t missing = 0;
        for (size_t i = 0; i < n; i++) {
            if (key_present(srv, ks[i]))
                continue;
            missing++;
            *store += sizeof(waiter_t) +
                      (ent_find(srv, ks[i]) ? 0 : ENT_COST(ks[i].n));
        }
        /* One connection has one WAIT at a time: its share is bounded
         * here, and all shares together by the memory budget. */
        if (missing > srv->o.max_wait_keys)
            return srv_fail(srv, "WAIT on %zu keys nobody has set; a "
                                 "connection may wait for at most %zu "
                                 "(max_wait_keys)",
                            missing, srv->o.max_wait_keys),
                   H_BAD;
        *out = 1;
        break;
    }
    case OP_WATCH_KEY:
        *store = WATCH_COST(k.n);
        *out = 1;
        break;
    case DDP_STORE_OP_GET:
    case DDP_STORE_OP_QUEUE_POP:
        *out = 16 + sizeof(oref_t);
        break;
    case DDP_STORE_OP_MULTI_GET:
        *out = n * (8 + sizeof(oref_t));
        break;
    case DDP_STORE_OP_LIST_KEYS:
        *out = 8;
        for (ddp__kv_node_t *kn = srv->keys.ohead; kn; kn = kn->onext)
            if (((entry_t *)kn)->has_val)
                *out += 8 + kn->klen;
        break;
    default:
        *out = 8;
    }
    return H_OK;
}

/* What c's request buffer gives back once the request being parsed is
 * done, with rest bytes (pipelined ones) after it: all of it when nothing
 * follows; when a little does and the buffer is a large request's, all but
 * the SRV_KEEP_BUF the rest moves to (in_release). Over TCP a client's next
 * request is often read with the large one. */
static size_t in_freed(const conn_t *c, size_t rest)
{
    if (rest == 0)
        return c->in.cap > SRV_KEEP_BUF ? c->in.cap : 0;
    return rest <= SRV_KEEP_BUF && c->in.cap > SRV_RECV_BUDGET ? c->in.cap - SRV_KEEP_BUF
                                                                 : 0;
}

/* After requests: the buffer is released as in_freed promised. */
static void in_release(conn_t *c)
{
    ddp__bb_trim(&c->in, SRV_KEEP_BUF);
    /* Also when the rest begins another large request: it grows again as
     * its bytes arrive, within the budget. */
    if (c->in.cap > SRV_RECV_BUDGET)
        ddp__bb_shrink(&c->in, SRV_KEEP_BUF); /* on ENOMEM it stays: charged */
}

/* Whether c's request (costs from req_cost) may run now: H_OK, H_DEFER
 * (c->defer_need set) or H_LIMIT (srv->msg set). A small reply to a
 * connection with nothing unsent never waits, so every client's GET is
 * answered whatever the others hold. */
static int budget(ddp_store_server_t *srv, conn_t *c, int op, size_t store,
                  size_t out, size_t freed)
{
    /* freed: the request buffer, released once this request is done (it
     * is all the buffer holds): a value copied from it into the store is
     * counted once, so a 32 MiB MULTI_SET fits a 64 MiB budget. */
    size_t cost = store;
    if (out_total(c) > 0 || out > SRV_OUT_FLOOR)
        cost += out;
    if (cost == 0)
        return H_OK;
    int fit = mem_fits(srv, cost, c->charged);
    size_t need = cost;
    /* Only where the request would never fit otherwise: elsewhere the
     * buffer is soon filled by the next request, and a value the store
     * lets go of may live on in replies. */
    if (fit == FIT_REFUSE && freed > 0) {
        need = cost > freed ? cost - freed : 0;
        fit = mem_fits(srv, need,
                       c->charged - (freed < c->charged ? freed : c->charged));
    }
    switch (fit) {
    case FIT_OK:
        return H_OK;
    case FIT_DEFER:
        c->defer_need = need;
        return H_DEFER;
    default:
        return srv_fail(srv, "%s needs %zu bytes beside the %zu its request "
                             "holds, and the store already holds %zu of its "
                             "%zu-byte memory budget (max_memory)",
                        op == OP_WATCH_KEY ? "WATCH_KEY" : op_name(op), cost,
                        c->charged, srv->mem_store, srv->o.max_memory),
               H_LIMIT;
    }
}

static int op_wait(ddp_store_server_t *srv, conn_t *c, slice_t *ks, size_t n)
{
    size_t missing = 0;
    for (size_t i = 0; i < n; i++)
        missing += !key_present(srv, ks[i]);
    /* A legacy client whose WAIT timed out cannot cancel it and sends its
     * next WAIT on the same connection; torch 1.13's server answers that
     * one. So do we: at once when its keys exist, else it replaces the
     * abandoned wait. */
    if (c->waiting && c->gen == DDP_STORE_PROTO_LEGACY && missing)
        conn_clear_waits(srv, c);
    else if (c->waiting && c->gen != DDP_STORE_PROTO_LEGACY)
        return srv_fail(srv, "WAIT sent while another WAIT is pending"), H_BAD;
    if (missing == 0) {
        REPLY_FAULT();
        NOMEM_IF(reply_u8(srv, c, DDP_STORE_STOP_WAITING));
        return H_OK;
    }
    c->waiting = 1;
    c->wait_left = 0;
    for (size_t i = 0; i < n; i++) {
        if (key_present(srv, ks[i]))
            continue;
        entry_t *e = ent_get(srv, ks[i]);
        waiter_t *w = e ? calloc(1, sizeof *w) : NULL;
        if (!w) {
            ent_maybe_free(srv, e);
            conn_clear_waits(srv, c);
            srv_fail(srv, "out of memory registering a WAIT");
            return H_BAD;
        }
        mem_add(srv, sizeof *w, 1);
        w->c = c;
        w->e = e;
        w->kprev = e->wtail;
        if (e->wtail)
            e->wtail->knext = w;
        else
            e->whead = w;
        e->wtail = w;
        w->cprev = c->wtail;
        if (c->wtail)
            c->wtail->cnext = w;
        else
            c->whead = w;
        c->wtail = w;
        c->wait_left++;
    }
    return H_OK;
}

static int op_multi_get(ddp_store_server_t *srv, conn_t *c, slice_t *ks,
                        size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        entry_t *e = ent_find(srv, ks[i]);
        total += 8 + (e && e->has_val ? e->val->len : 0);
        if (total > srv->max_reply)
            return srv_fail(srv, "MULTI_GET reply larger than %zu bytes",
                            srv->max_reply),
                   H_BAD;
    }
    REPLY_FAULT();
    /* Room for every header and reference first: no half-built reply. */
    if (out_reserve(srv, c, 8 * n) != 0 || ref_reserve(srv, c, n) != 0)
        return srv_fail(srv, "out of memory for a %zu-key reply", n), H_BAD;
    for (size_t i = 0; i < n; i++) {
        /* A missing key reads as empty bytes (libuv server's get()). */
        entry_t *e = ent_find(srv, ks[i]);
        if (put_value(srv, c, e && e->has_val ? e->val : NULL) != 0)
            return srv_fail(srv, "out of memory for a %zu-key reply", n),
                   H_BAD;
    }
    mark_dirty(srv, c);
    return H_OK;
}

static int op_list_keys(ddp_store_server_t *srv, conn_t *c, size_t total)
{
    if (total > srv->max_reply)
        return srv_fail(srv, "LIST_KEYS reply larger than %zu bytes",
                        srv->max_reply),
               H_BAD;
    REPLY_FAULT();
    if (out_reserve(srv, c, total) != 0)
        return srv_fail(srv, "out of memory for a %zu-byte reply", total),
               H_BAD;
    int64_t n = (int64_t)srv->nvals;
    out_put(c, &n, 8);
    for (ddp__kv_node_t *kn = srv->keys.ohead; kn; kn = kn->onext)
        if (((entry_t *)kn)->has_val)
            out_put_bytes(c, kn->key, kn->klen);
    mark_dirty(srv, c);
    return H_OK;
}

static int op_queue_push(ddp_store_server_t *srv, slice_t k, slice_t v)
{
    int had, was;
    entry_t *e = ent_claim(srv, k, "out of memory for a queue", "queue",
                           &had, &was);
    if (!e)
        return -1;
    if (e->qlen >= srv->o.max_keys)
        return srv_fail(srv, "queue \"%.*s\" already holds %zu elements",
                        (int)(k.n > 64 ? 64 : k.n), (const char *)k.p,
                        e->qlen);
    qitem_t *q = malloc(sizeof *q);
    blob_t *b = q ? blob_new(srv, v.p, v.n) : NULL;
    if (!b) {
        free(q);
        ent_maybe_free(srv, e);
        return srv_fail(srv, "out of memory queueing %zu bytes", v.n);
    }
    mem_add(srv, sizeof *q, 1);
    q->next = NULL;
    q->b = b;
    if (e->qtail)
        e->qtail->next = q;
    else
        e->qhead = q;
    e->qtail = q;
    e->qlen++;
    ent_account(srv, e, had, was);
    wake_key(srv, e, 1);
    return 0;
}

static int op_queue_pop(ddp_store_server_t *srv, conn_t *c, slice_t k)
{
    entry_t *e = ent_find(srv, k);
    int64_t len = e ? (int64_t)e->qlen : 0;
    qitem_t *q = len ? e->qhead : NULL;
    REPLY_FAULT();
    /* i64 length before the pop, then the element when there was one. */
    if (out_reserve(srv, c, 8) != 0)
        return srv_fail(srv, "out of memory for a queue reply"), H_BAD;
    out_put(c, &len, 8);
    if (q) {
        if (put_value(srv, c, q->b) != 0)
            return srv_fail(srv, "out of memory for a queue reply"), H_BAD;
        int had = e->has_val, was = ent_stored(e);
        e->qhead = q->next;
        if (!e->qhead)
            e->qtail = NULL;
        e->qlen--;
        blob_unstore(srv, q->b);
        free(q);
        mem_sub(srv, sizeof *q, 1);
        ent_account(srv, e, had, was);
        ent_maybe_free(srv, e);
    }
    mark_dirty(srv, c);
    return H_OK;
}

/* The generation of a connection from its first request (r holds the
 * pending bytes): LEGACY, CURRENT, or H_MORE / H_BAD as a negative. */
static int detect_gen(ddp_store_server_t *srv, conn_t *c, const rd_t *r)
{
    int mode = srv->o.protocol, first = r->p[0];
    if (mode == DDP_STORE_PROTO_LEGACY)
        return DDP_STORE_PROTO_LEGACY;
    if (first == DDP_STORE_OP_VALIDATE) {
        if (mode == DDP_STORE_PROTO_CURRENT)
            return DDP_STORE_PROTO_CURRENT;
        /* Legacy SET is opcode 0 too; its next 4 bytes are the low half
         * of a key length, never the magic (keys are at most 8 KiB). */
        if (r->n < 5) {
            c->need = 5;
            return -H_MORE;
        }
        uint32_t magic;
        memcpy(&magic, r->p + 1, 4);
        return magic == DDP_STORE_MAGIC ? DDP_STORE_PROTO_CURRENT
                                        : DDP_STORE_PROTO_LEGACY;
    }
    if (mode == DDP_STORE_PROTO_CURRENT)
        return srv_fail(srv, "first message has opcode %d (%s), not "
                             "VALIDATE: not a TCPStore client of the current "
                             "protocol (a PyTorch 1.9 - 2.0 client speaks the "
                             "legacy one: serve with protocol auto)",
                        first, op_name(first)),
               -H_BAD;
    return DDP_STORE_PROTO_LEGACY;
}

/* A legacy opcode as the op it stands for (the layouts are the same). In
 * auto mode a legacy connection may also use the current table's codes
 * from APPEND up, which no legacy table defines: our own client's legacy
 * mode does, against a server that turned its VALIDATE down. */
static int legacy_op(const ddp_store_server_t *srv, int lop)
{
    if (lop == DDP_STORE_LOP_WATCH_KEY)
        return OP_WATCH_KEY;
    int op = ddp__store_op_from_legacy(lop);
    if (op >= 0)
        return op;
    if (srv->o.protocol == DDP_STORE_PROTO_AUTO &&
        lop >= DDP_STORE_OP_APPEND && lop < DDP_STORE_OP_COUNT)
        return lop;
    return -1;
}

/* The token frame a server with a token requires first (ddpsim's AUTH
 * extension, store.h). H_OK consumed it; H_MORE; H_DENY with srv->msg. */
static int handle_auth(ddp_store_server_t *srv, conn_t *c, rd_t *r)
{
    const uint8_t *opb = rd_take(r, 1);
    if (opb && *opb != DDP_STORE_OP_AUTH)
        return srv_fail(srv, "sent opcode %d (%s) before a token: this server "
                             "requires ddpsim's token (store serve --token), "
                             "so PyTorch's TCPStore clients cannot use it",
                        *opb, op_name(*opb)),
               H_DENY;
    uint32_t magic = rd_u32(r);
    slice_t tok = rd_str(r, DDP_STORE_MAX_TOKEN, "token");
    if (r->st == RD_MORE) {
        c->need = r->need;
        return H_MORE;
    }
    if (r->st == RD_BAD)
        return H_DENY;
    if (magic != DDP_STORE_AUTH_MAGIC)
        return srv_fail(srv, "AUTH magic 0x%08" PRIx32 " is not 0x%08X",
                        magic, DDP_STORE_AUTH_MAGIC),
               H_DENY;
    if (!ddp__store_token_eq(tok.p, tok.n, (const uint8_t *)srv->token,
                             srv->token_len))
        return srv_fail(srv, "wrong token (%zu bytes)", tok.n), H_DENY;
    if (reply_u8(srv, c, DDP_STORE_AUTH_OK) != 0)
        return srv_fail(srv, "out of memory queueing a reply"), H_BAD;
    c->authed = 1;
    ddp__bb_consume(&c->in, r->off);
    return H_OK;
}

/* Parse one request at the start of c->in's pending bytes and run it.
 * H_OK consumed it. */
/* The job's store events, for a fault executor that observes them
 * (ddp_fault_notify: a fault's window may open on a key set or waited on,
 * the N-th client joined, the store barrier, a mark). */
static void observe(ddp_trigger_kind_t kind, slice_t k, long long value)
{
    char key[256];
    size_t n = k.n < sizeof key - 1 ? k.n : sizeof key - 1;
    if (n)
        memcpy(key, k.p, n);
    key[n] = '\0';
    ddp_fault_event_t ev = {.kind = kind, .rank = -1, .name = key, .value = value};
    ddp_fault_notify(&ev);
}

/* A client's progress, to the host that asked (opts.on_client). */
static void note_client(ddp_store_server_t *srv, const conn_t *c, ddp_store_client_phase_t ph)
{
    if (!srv->o.on_client || !c->id)
        return;
    ddp_store_client_note_t note = {.id = c->id, .phase = ph, .peer = &c->peer};
    srv->o.on_client(srv->o.on_client_arg, &note);
}

static void observe_request(ddp_store_server_t *srv, int op, slice_t k, slice_t *ks,
                            size_t n, long long added)
{
    switch (op) {
    case DDP_STORE_OP_SET:
    case DDP_STORE_OP_APPEND:
    case DDP_STORE_OP_COMPARE_SET:
        observe(DDP_TRIG_SET, k, -1);
        break;
    case DDP_STORE_OP_ADD:
        observe(DDP_TRIG_SET, k, added);
        break;
    case DDP_STORE_OP_MULTI_SET:
        for (size_t i = 0; i < n; i++)
            observe(DDP_TRIG_SET, ks[2 * i], -1);
        break;
    case DDP_STORE_OP_WAIT:
    case DDP_STORE_OP_GET:
        for (size_t i = 0; i < (op == DDP_STORE_OP_GET ? 1 : n); i++)
            observe(DDP_TRIG_WAIT, op == DDP_STORE_OP_GET ? k : ks[i], -1);
        break;
    default:
        break;
    }
    (void)srv;
}

/* One request's opcode and decoded arguments. */
typedef struct req {
    int op;
    slice_t k, v, v2, *ks; /* key, value(s); ks: n keys (MULTI_SET: n pairs) */
    size_t n;
    int64_t i64;
    uint32_t u32;
    int64_t res; /* ADD's result */
} req_t;

/* A request's arguments after its opcode, into q (r->st: RD_MORE when
 * they are not all here yet, RD_BAD when they are wrong). */
static void read_args(ddp_store_server_t *srv, const conn_t *c, rd_t *r, req_t *q)
{
    switch (q->op) {
    case DDP_STORE_OP_VALIDATE:
        if (c->validated)
            rd_bad(r, "VALIDATE sent twice"); /* libuv: "invalid command" */
        q->u32 = rd_u32(r);
        break;
    case DDP_STORE_OP_SET:
    case DDP_STORE_OP_APPEND:
    case DDP_STORE_OP_QUEUE_PUSH:
        q->k = rd_str(r, srv->o.max_key_len, "key");
        q->v = rd_str(r, srv->o.max_value_len, "value");
        break;
    case DDP_STORE_OP_COMPARE_SET:
        q->k = rd_str(r, srv->o.max_key_len, "key");
        q->v = rd_str(r, srv->o.max_value_len, "expected value");
        q->v2 = rd_str(r, srv->o.max_value_len, "desired value");
        break;
    case DDP_STORE_OP_GET:
    case DDP_STORE_OP_DELETE_KEY:
    case DDP_STORE_OP_QUEUE_POP:
    case DDP_STORE_OP_QUEUE_LEN:
    case OP_WATCH_KEY:
        q->k = rd_str(r, srv->o.max_key_len, "key");
        break;
    case DDP_STORE_OP_ADD:
        q->k = rd_str(r, srv->o.max_key_len, "key");
        q->i64 = (int64_t)rd_u64(r);
        break;
    case DDP_STORE_OP_CHECK:
    case DDP_STORE_OP_WAIT:
    case DDP_STORE_OP_MULTI_GET:
        q->n = rd_count(r, srv->o.max_keys, op_name(q->op));
        q->ks = rd_keys(srv, r, q->n, 1);
        break;
    case DDP_STORE_OP_MULTI_SET:
        q->n = rd_count(r, srv->o.max_keys, "MULTI_SET");
        q->ks = rd_keys(srv, r, q->n, 2);
        break;
    case DDP_STORE_OP_PING:
        q->u32 = rd_u32(r);
        break;
    case DDP_STORE_OP_GETNUMKEYS:
    case DDP_STORE_OP_CANCEL_WAIT:
    case DDP_STORE_OP_LIST_KEYS:
        break;
    default:
        if (r->st == RD_OK)
            rd_bad(r, "unknown opcode %d", q->op);
    }
}

/* VALIDATE: the magic number, then the connection is a client. */
static int exec_validate(ddp_store_server_t *srv, conn_t *c, const req_t *q)
{
    if (q->u32 != DDP_STORE_MAGIC)
        return srv_fail(srv, "VALIDATE magic 0x%08" PRIx32 " is not "
                             "0x%08X: not a TCPStore client",
                        q->u32, DDP_STORE_MAGIC),
               H_BAD;
    if (ddp_fault_hit(DDP_FP_STORE_SERVER_VALIDATE))
        return srv_fail(srv, "fault point store/server/validate fired"),
               H_DROP;
    c->validated = 1;
    tl_del(srv, L_UV, c); /* no timeout for this one */
    return H_OK;
}

/* COMPARE_SET: set when the value is the expected one (a missing key
 * and an empty expected value create it); reply the value now held. */
static int exec_compare_set(ddp_store_server_t *srv, conn_t *c, const req_t *q)
{
    entry_t *e = ent_find(srv, q->k);
    if (!e || !e->has_val) {
        if (q->v.n == 0) { /* missing + empty expected: create */
            if (store_set(srv, q->k, q->v2) != 0)
                return H_BAD;
            e = ent_find(srv, q->k);
        } else {
            /* libuv replies `expected` and leaves the key missing. */
            REPLY_FAULT();
            if (out_reserve(srv, c, 8 + q->v.n) != 0)
                return srv_fail(srv, "out of memory"), H_BAD;
            out_put_bytes(c, q->v.p, q->v.n);
            mark_dirty(srv, c);
            return H_OK;
        }
    } else if (blob_eq(e->val, q->v)) {
        if (store_set(srv, q->k, q->v2) != 0)
            return H_BAD;
        e = ent_find(srv, q->k);
    }
    REPLY_FAULT();
    NOMEM_IF(put_value(srv, c, e->val));
    return H_OK;
}

/* DELETE_KEY: watchers told, the value unstored; reply whether there
 * was one. */
static int exec_delete(ddp_store_server_t *srv, conn_t *c, const req_t *q)
{
    entry_t *e = ent_find(srv, q->k);
    int64_t del = e && e->has_val;
    if (del && srv->nwatches > 0)
        notify_watchers(srv, q->k, DDP_STORE_KEY_DELETED, e->val, NULL);
    if (del) {
        int was = ent_stored(e);
        blob_unstore(srv, e->val);
        e->val = NULL;
        e->has_val = 0;
        ent_account(srv, e, 1, was);
        ent_maybe_free(srv, e);
    }
    REPLY_FAULT();
    NOMEM_IF(reply_i64(srv, c, del));
    return H_OK;
}

/* Carries out a decoded request within its budget (out_cost: LIST_KEYS'
 * reply). H_OK, or what handle_one returns. */
static int exec_request(ddp_store_server_t *srv, conn_t *c, req_t *q, size_t out_cost)
{
    switch (q->op) {
    case DDP_STORE_OP_VALIDATE:
        return exec_validate(srv, c, q);
    case OP_WATCH_KEY:
        if (watch_add(srv, c, q->k) != 0)
            return H_BAD;
        REPLY_FAULT();
        NOMEM_IF(reply_u8(srv, c, DDP_STORE_KEY_CALLBACK_REGISTERED));
        break;
    case DDP_STORE_OP_SET:
        if (store_set(srv, q->k, q->v) != 0)
            return H_BAD;
        break;
    case DDP_STORE_OP_APPEND:
        if (store_append(srv, q->k, q->v) != 0)
            return H_BAD;
        break;
    case DDP_STORE_OP_COMPARE_SET:
        return exec_compare_set(srv, c, q);
    case DDP_STORE_OP_GET: {
        /* Missing key: empty bytes, as the libuv server (the client waits
         * for the key first, so this is only reached by raw users). */
        entry_t *e = ent_find(srv, q->k);
        REPLY_FAULT();
        NOMEM_IF(put_value(srv, c, e && e->has_val ? e->val : NULL));
        break;
    }
    case DDP_STORE_OP_ADD: {
        q->res = 0;
        if (store_add(srv, q->k, q->i64, &q->res) != 0)
            return H_BAD;
        REPLY_FAULT();
        NOMEM_IF(reply_i64(srv, c, q->res));
        break;
    }
    case DDP_STORE_OP_CHECK: {
        int ready = 1;
        for (size_t i = 0; i < q->n && ready; i++)
            ready = key_present(srv, q->ks[i]);
        REPLY_FAULT();
        NOMEM_IF(reply_u8(srv, c,
                          ready ? DDP_STORE_READY : DDP_STORE_NOT_READY));
        break;
    }
    case DDP_STORE_OP_WAIT:
        return op_wait(srv, c, q->ks, q->n);
        break;
    case DDP_STORE_OP_GETNUMKEYS:
        REPLY_FAULT();
        NOMEM_IF(reply_i64(srv, c, (int64_t)srv->nvals));
        break;
    case DDP_STORE_OP_DELETE_KEY:
        return exec_delete(srv, c, q);
    case DDP_STORE_OP_MULTI_GET:
        return op_multi_get(srv, c, q->ks, q->n);
        break;
    case DDP_STORE_OP_MULTI_SET:
        for (size_t i = 0; i < q->n; i++)
            if (store_set(srv, q->ks[2 * i], q->ks[2 * i + 1]) != 0)
                return H_BAD;
        break;
    case DDP_STORE_OP_CANCEL_WAIT:
        conn_clear_waits(srv, c);
        REPLY_FAULT();
        NOMEM_IF(reply_u8(srv, c, DDP_STORE_WAIT_CANCELED));
        break;
    case DDP_STORE_OP_PING:
        REPLY_FAULT();
        NOMEM_IF(reply(srv, c, &q->u32, 4));
        break;
    case DDP_STORE_OP_QUEUE_PUSH:
        if (op_queue_push(srv, q->k, q->v) != 0)
            return H_BAD;
        break;
    case DDP_STORE_OP_QUEUE_POP:
        return op_queue_pop(srv, c, q->k);
        break;
    case DDP_STORE_OP_QUEUE_LEN: {
        entry_t *e = ent_find(srv, q->k);
        REPLY_FAULT();
        NOMEM_IF(reply_i64(srv, c, e ? (int64_t)e->qlen : 0));
        break;
    }
    case DDP_STORE_OP_LIST_KEYS:
        return op_list_keys(srv, c, out_cost);
        break;
    }
    return H_OK;
}

/* After a request took effect: its bytes consumed, the client joined
 * (its first request), a passed store barrier noted, observers told. */
static void after_request(ddp_store_server_t *srv, conn_t *c, const req_t *q, size_t used)
{
    ddp__bb_consume(&c->in, used);
    int joined = !c->validated || q->op == DDP_STORE_OP_VALIDATE;
    if (!c->validated) { /* a legacy client's first request */
        c->validated = 1;
        tl_del(srv, L_UV, c);
    }
    srv->joined += joined;
    if (joined)
        note_client(srv, c, DDP_STORE_CLIENT_JOINED);
    if (q->op == DDP_STORE_OP_ADD && !c->passed && srv->o.world > 0 &&
        q->res >= srv->o.world && q->k.n >= 23 &&
        memmem(q->k.p, q->k.n, "store_based_barrier_key", 23)) {
        c->passed = 1;
        note_client(srv, c, DDP_STORE_CLIENT_BARRIER);
    }
    if (ddp_fault_observed()) {
        if (joined) {
            ddp_fault_event_t ev = {.kind = DDP_TRIG_JOINED, .rank = -1, .value = srv->joined};
            ddp_fault_notify(&ev);
        }
        observe_request(srv, q->op, q->k, q->ks, q->n, (long long)q->res);
    }
}

static int handle_one(ddp_store_server_t *srv, conn_t *c)
{
    rd_t r = {.p = c->in.data + c->in.off,
              .n = ddp__bb_pending(&c->in),
              .max = srv->max_request,
              .msg = srv->msg,
              .msgn = sizeof srv->msg};
    if (srv->token && !c->authed)
        return handle_auth(srv, c, &r);
    if (!c->gen) {
        if (r.p[0] == DDP_STORE_OP_AUTH && !srv->token)
            return srv_fail(srv, "sent a token (ddpsim's AUTH frame), but "
                                 "this server has none: start it with "
                                 "--token, or connect without one"),
                   H_DENY;
        int g = detect_gen(srv, c, &r);
        if (g < 0)
            return -g;
        c->gen = g;
        if (g == DDP_STORE_PROTO_LEGACY) {
            ST_ADD(srv, st_legacy, 1);
            ddp_debug("store server: client %s speaks the legacy protocol",
                      c->name);
        }
    }
    const uint8_t *opb = rd_take(&r, 1);
    int op = opb ? *opb : -1, wire = op;
    if (c->gen == DDP_STORE_PROTO_LEGACY && op >= 0) {
        op = legacy_op(srv, op);
        if (op < 0)
            return srv_fail(srv, "unknown legacy opcode %d", wire), H_BAD;
    }
    if (!c->validated && c->gen == DDP_STORE_PROTO_CURRENT &&
        op != DDP_STORE_OP_VALIDATE)
        return srv_fail(srv, "first message has opcode %d (%s), not "
                             "VALIDATE: not a TCPStore client",
                        op, op_name(op)),
               H_BAD;
    req_t q = {.op = op};
    read_args(srv, c, &r, &q);
    if (r.st == RD_MORE) {
        c->need = r.need;
        return H_MORE;
    }
    if (r.st == RD_BAD)
        return H_BAD;

    /* The memory budget, before anything takes effect. */
    size_t store_cost, out_cost;
    int rc = req_cost(srv, op, q.k, q.v, q.v2, q.ks, q.n, &store_cost, &out_cost);
    if (rc == H_OK)
        rc = budget(srv, c, op, store_cost, out_cost, in_freed(c, r.n - r.off));
    if (rc != H_OK)
        return rc;

    rc = exec_request(srv, c, &q, out_cost);
    if (rc == H_OK)
        after_request(srv, c, &q, r.off);
    return rc;
}

/* --------------------------------------------------------- connections */

static void conn_kill(ddp_store_server_t *srv, conn_t *c)
{
    if (c->dead)
        return;
    c->dead = 1;
    note_client(srv, c, DDP_STORE_CLIENT_LEFT);
    conn_clear_waits(srv, c);
    watches_drop(srv, c);
    for (int l = 0; l < L_COUNT; l++)
        tl_del(srv, l, c);
    ddp_sys_epoll_ctl(srv->sys, srv->ep, DDP_EPOLL_DEL, c->fd, 0, 0);
    ddp_sys_close(srv->sys, c->fd);
    c->fd = -1;
    c->dnext = srv->dead;
    srv->dead = c;
}

/* A protocol violation: log, count, drop this client only. */
static void conn_violation(ddp_store_server_t *srv, conn_t *c)
{
    srv_warn(srv, RL_DROP, "store server: dropping client %s: %s", c->name,
             srv->msg);
    ST_ADD(srv, st_proto, 1);
    conn_kill(srv, c);
}

/* c waits for memory: it is not read until the budget has room for
 * c->defer_need (resume_deferred); req: for a whole request (else for
 * more of its input). */
static void conn_defer(ddp_store_server_t *srv, conn_t *c, int req)
{
    if (c->deferred)
        return;
    c->deferred = 1;
    c->defer_req = req;
    if (req)
        tl_del(srv, L_BUSY, c);
    tl_push(srv, L_MEM, c, srv->now);
    ST_ADD(srv, st_deferred, 1);
    srv_warn(srv, RL_MEMORY,
             "store server: memory budget reached (%zu of %zu bytes held, "
             "%zu by the store): not reading from client %s until %zu bytes "
             "free; stalled clients are dropped after %.0f s "
             "(idle_timeout), or raise max_memory",
             srv->mem, srv->o.max_memory, srv->mem_store, c->name,
             c->defer_need, (double)srv->o.idle_timeout_ns / 1e9);
}

static void conn_process(ddp_store_server_t *srv, conn_t *c)
{
    while (!c->dead && !c->doom && !c->deferred) {
        size_t avail = ddp__bb_pending(&c->in);
        if (avail == 0 || avail < c->need || out_total(c) >= SRV_OUT_HIGH)
            break;
        c->req_inline = 0;
        int h = handle_one(srv, c);
        if (h == H_MORE)
            break;
        if (h == H_DEFER) {
            conn_defer(srv, c, 1);
            break;
        }
        if (h == H_BAD) {
            conn_violation(srv, c);
            return;
        }
        if (h == H_LIMIT || h == H_DENY) {
            srv_warn(srv, h == H_LIMIT ? RL_MEMORY : RL_DENY,
                     "store server: dropping client %s: %s", c->name,
                     srv->msg);
            ST_ADD(srv, st_refused, h == H_LIMIT);
            ST_ADD(srv, st_denied, h == H_DENY);
            conn_kill(srv, c);
            return;
        }
        if (h == H_DROP) {
            ddp_info("store server: dropping client %s: %s", c->name,
                     srv->msg);
            conn_kill(srv, c);
            return;
        }
        c->need = 0;
        ST_ADD(srv, st_requests, 1);
        conn_progress(srv, c);
    }
    if (!c->dead) {
        in_release(c);
        conn_charge(srv, c);
    }
}

/* Try-once sends until the kernel takes no more: inline bytes, and each
 * referenced blob at its place among them. */
static void conn_flush(ddp_store_server_t *srv, conn_t *c)
{
    int sent = 0; /* this call sent bytes: a flush with nothing to send is
                     no progress (else every read of a trickling client,
                     which is flushed after it, would restart its clock) */
    while (!c->dead && out_total(c) > 0) {
        if (ddp_fault_hit(DDP_FP_STORE_SERVER_SEND)) {
            ddp_info("store server: dropping client %s: fault point "
                     "store/server/send fired",
                     c->name);
            conn_kill(srv, c);
            return;
        }
        oref_t *head = c->rn ? &c->refs[c->rhead] : NULL;
        const uint8_t *p;
        size_t n;
        if (head && head->pos == c->out_sent) {
            p = head->b->data + c->roff;
            n = head->b->len - c->roff;
        } else {
            p = c->out.data + c->out.off;
            n = ddp__bb_pending(&c->out);
            if (head && n > head->pos - c->out_sent)
                n = (size_t)(head->pos - c->out_sent);
        }
        ssize_t w = ddp_sys_send(srv->sys, c->fd, p, n, 0);
        if (w == -EAGAIN || w == DDP_ETIMEOUT)
            break;
        if (w <= 0) {
            ddp_debug("store server: client %s gone while sending (%s)",
                      c->name, ddp_strerror(w ? (int)w : DDP_EPEER_LOST));
            conn_kill(srv, c);
            return;
        }
        c->sent_since += (size_t)w;
        sent = 1;
        if (head && head->pos == c->out_sent) {
            c->roff += (size_t)w;
            c->ref_bytes -= (size_t)w;
            if (c->roff == head->b->len) {
                blob_unref(srv, head->b);
                c->roff = 0;
                c->rhead = --c->rn ? c->rhead + 1 : 0;
            }
        } else {
            ddp__bb_consume(&c->out, (size_t)w);
            c->out_sent += (uint64_t)w;
        }
    }
    if (sent && (out_total(c) == 0 || c->sent_since >= SRV_PROGRESS_BYTES))
        conn_progress(srv, c);
    if (out_total(c) == 0) {
        ddp__bb_trim(&c->out, SRV_KEEP_BUF);
        conn_charge(srv, c);
    }
}

/* Flush, and resume parsing requests held back while output was high. */
static void conn_pump(ddp_store_server_t *srv, conn_t *c)
{
    for (int round = 0; round < 64 && !c->dead; round++) {
        if (c->doom) {
            srv_warn(srv, RL_DROP,
                     "store server: dropping client %s: out of memory "
                     "queueing a reply, or %zu reply bytes unread",
                     c->name, out_total(c));
            conn_kill(srv, c);
            return;
        }
        conn_flush(srv, c);
        size_t avail = ddp__bb_pending(&c->in);
        if (c->dead || c->deferred || out_total(c) >= SRV_OUT_HIGH ||
            avail == 0 || avail < c->need)
            return;
        conn_process(srv, c);
    }
}

/* The interest c needs now, its busy state: registered when changed. */
static void conn_settle(ddp_store_server_t *srv, conn_t *c)
{
    if (c->dead)
        return;
    size_t unsent = out_total(c);
    short want = 0;
    if (!c->deferred && unsent < SRV_OUT_HIGH)
        want |= DDP_POLLIN;
    if (unsent > 0)
        want |= DDP_POLLOUT;
    if (want != c->ev) {
        int rc = ddp_sys_epoll_ctl(srv->sys, srv->ep, DDP_EPOLL_MOD, c->fd,
                                   want, (uint64_t)(uintptr_t)c);
        if (rc != 0) {
            srv_warn(srv, RL_DROP, "store server: dropping client %s: %s",
                     c->name, ddp_err_message());
            conn_kill(srv, c);
            return;
        }
        c->ev = want;
    }
    /* A whole request waiting for memory waits for the others: not its
     * own stall. (One deferred mid-request is still mid-request.) A first
     * request begun counts too: a legacy client's (no VALIDATE before it)
     * is held to the idle timeout, not only to the validate timeout. */
    int begun = c->validated || ddp__bb_pending(&c->in) > 0;
    int busy = begun && !(c->deferred && c->defer_req) &&
               (ddp__bb_pending(&c->in) > 0 || unsent > 0);
    if (busy)
        tl_push(srv, L_BUSY, c, srv->now);
    else
        tl_del(srv, L_BUSY, c);
}

static void conn_read(ddp_store_server_t *srv, conn_t *c)
{
    size_t budget = SRV_RECV_BUDGET, chunk = SRV_RECV_FIRST;
    int eof = 0;
    while (!c->dead && !c->deferred && budget > 0 &&
           out_total(c) < SRV_OUT_HIGH) {
        if (ddp_fault_hit(DDP_FP_STORE_SERVER_RECV)) {
            ddp_info("store server: dropping client %s: fault point "
                     "store/server/recv fired",
                     c->name);
            conn_kill(srv, c);
            return;
        }
        size_t avail = ddp__bb_pending(&c->in);
        /* A large request is known to need this much: make room at once. */
        size_t want = c->need > avail ? c->need - avail : 0;
        if (want < chunk)
            want = chunk;
        if (want > SRV_RECV_BUDGET) /* grow as bytes arrive, not on a claim */
            want = SRV_RECV_BUDGET;
        size_t cap = in_cap_for(c, want);
        if (cap > c->in.cap && cap > SRV_IN_FLOOR) {
            int fit = mem_fits(srv, cap - c->in.cap, c->charged);
            /* Doubling would pass the budget: grow by what this read needs
             * only, so a request near the budget still fits (a 32 MiB one
             * would otherwise ask for a 64 MiB buffer). */
            size_t tight = avail + want;
            if (fit != FIT_OK && tight < cap && tight > c->in.cap) {
                int f2 = mem_fits(srv, tight - c->in.cap, c->charged);
                if (f2 < fit) {
                    fit = f2;
                    cap = tight;
                }
            }
            if (fit == FIT_REFUSE) {
                srv_warn(srv, RL_MEMORY,
                         "store server: dropping client %s: its request "
                         "needs %zu more bytes of buffer beside the %zu it "
                         "holds, and the store already holds %zu of its "
                         "%zu-byte memory budget (max_memory)",
                         c->name, cap - c->in.cap, c->charged,
                         srv->mem_store, srv->o.max_memory);
                ST_ADD(srv, st_refused, 1);
                conn_kill(srv, c);
                return;
            }
            if (fit == FIT_DEFER) {
                c->defer_need = cap - c->in.cap;
                conn_defer(srv, c, 0);
                break;
            }
        }
        if (ddp__bb_grow(&c->in, cap) != 0) {
            srv_fail(srv, "out of memory buffering a request");
            conn_violation(srv, c);
            return;
        }
        conn_charge(srv, c);
        size_t room = c->in.cap - c->in.len;
        if (room > budget)
            room = budget;
        ssize_t got =
            ddp_sys_recv(srv->sys, c->fd, c->in.data + c->in.len, room, 0);
        if (got == -EAGAIN || got == DDP_ETIMEOUT)
            break;
        if (got == 0) {
            eof = 1;
            break;
        }
        if (got < 0) {
            ddp_debug("store server: client %s: recv failed (%s)", c->name,
                      ddp_strerror((int)got));
            conn_kill(srv, c);
            return;
        }
        c->in.len += (size_t)got;
        budget -= (size_t)got;
        if (!c->validated && !c->lk[L_UV].on)
            uv_link(srv, c); /* auto/legacy: the timeout starts now */
        conn_process(srv, c);
        /* A short read emptied the socket: asking again would only cost a
         * syscall that answers EAGAIN (the readiness set reports anything
         * newer). */
        if ((size_t)got < room)
            break;
        if (chunk < SRV_RECV_CHUNK_MAX) /* more is waiting: read more at once */
            chunk *= 2;
    }
    if (eof && !c->dead) {
        /* Requests before the EOF took effect; a partial one is discarded
         * (a client killed mid-send is not a protocol violation). */
        if (ddp__bb_pending(&c->in) > 0)
            ddp_debug("store server: client %s closed with %zu bytes of an "
                      "incomplete request",
                      c->name, ddp__bb_pending(&c->in));
        conn_flush(srv, c);
        conn_kill(srv, c);
    }
}

static void conn_free(ddp_store_server_t *srv, conn_t *c)
{
    for (size_t i = 0; i < c->rn; i++)
        blob_unref(srv, c->refs[c->rhead + i].b);
    ddp__bb_free(&c->in);
    ddp__bb_free(&c->out);
    free(c->refs);
    mem_sub(srv, c->charged, 0);
    free(c);
}

static void conn_on_events(ddp_store_server_t *srv, conn_t *c, short rev)
{
    if (rev & DDP_POLLOUT)
        conn_flush(srv, c);
    if (c->dead)
        return;
    if (rev & (DDP_POLLIN | DDP_POLLHUP | DDP_POLLERR)) {
        if (!c->deferred && out_total(c) < SRV_OUT_HIGH) {
            conn_read(srv, c);
        } else if (rev & (DDP_POLLHUP | DDP_POLLERR)) {
            ddp_debug("store server: client %s hung up with %zu reply bytes "
                      "unsent",
                      c->name, out_total(c));
            conn_kill(srv, c);
            return;
        }
    }
    /* Replies wait for flush_dirty(), after every ready connection was
     * read: all requests of a pass are taken in before any client is woken
     * by its reply (one send per connection per pass either way). */
    if (!c->dead)
        mark_dirty(srv, c);
}

static int grow_conns(ddp_store_server_t *srv)
{
    if (srv->nconns < srv->cconns)
        return 0;
    size_t nc = srv->cconns ? srv->cconns * 2 : 64;
    conn_t **cs = realloc(srv->conns, nc * sizeof *cs);
    if (!cs)
        return -ENOMEM;
    srv->conns = cs;
    srv->cconns = nc;
    return 0;
}

/* The listener's interest: on, or off while accepting rests (EMFILE). */
static void listener_arm(ddp_store_server_t *srv, int on)
{
    if (ddp_sys_epoll_ctl(srv->sys, srv->ep, DDP_EPOLL_MOD, srv->lfd,
                          on ? DDP_POLLIN : 0, 0) == 0)
        srv->accept_paused = !on;
}

static void accept_some(ddp_store_server_t *srv)
{
    for (int k = 0; k < SRV_ACCEPT_BATCH; k++) {
        ddp_addr_t peer;
        memset(&peer, 0, sizeof peer);
        int fd = ddp_sys_accept(srv->sys, srv->lfd, &peer, 0);
        if (fd == -EAGAIN || fd == DDP_ETIMEOUT)
            return;
        if (fd < 0) {
            if (ddp__store_accept_exhausted(fd)) {
                srv_warn(srv, RL_ACCEPT,
                         "store server: cannot accept more clients (%s); "
                         "%zu connected; raise the open-file limit "
                         "(ulimit -n)",
                         ddp_strerror(fd), srv->nconns);
                srv->accept_paused_until =
                    ddp_sys_deadline_in(srv->sys, SRV_ACCEPT_PAUSE_NS);
                listener_arm(srv, 0);
            } else {
                ddp_debug("store server: accept failed (%s)",
                          ddp_strerror(fd));
            }
            return;
        }
        char name[DDP_ADDR_STRLEN];
        ddp_addr_format(&peer, name, sizeof name);
        if (ddp_fault_hit(DDP_FP_STORE_SERVER_ACCEPT)) {
            ddp_info("store server: fault point store/server/accept fired: "
                     "closing %s",
                     name);
            ddp_sys_close(srv->sys, fd);
            continue;
        }
        char why[160] = "";
        int kind = RL_DENY;
        if (!ddp__store_acl_allows(&srv->acl, &peer)) {
            snprintf(why, sizeof why, "not in the allow list (%s)",
                     srv->allow);
            ST_ADD(srv, st_denied, 1);
        } else if (srv->nconns >= srv->o.max_clients) {
            snprintf(why, sizeof why, "%zu clients connected (max_clients)",
                     srv->nconns);
            kind = RL_REFUSE;
            ST_ADD(srv, st_rejected, 1);
        }
        if (why[0]) {
            srv_warn(srv, kind, "store server: refusing client %s: %s", name,
                     why);
            ddp_sys_close(srv->sys, fd);
            continue;
        }
        conn_t *c = grow_conns(srv) == 0 ? calloc(1, sizeof *c) : NULL;
        if (!c || ddp_sys_epoll_ctl(srv->sys, srv->ep, DDP_EPOLL_ADD, fd,
                                    DDP_POLLIN, (uint64_t)(uintptr_t)c) != 0) {
            srv_warn(srv, RL_ACCEPT, "store server: cannot take client %s: %s",
                     name, c ? ddp_err_message() : "out of memory");
            free(c);
            ddp_sys_close(srv->sys, fd);
            return;
        }
        c->fd = fd;
        c->ev = DDP_POLLIN;
        memcpy(c->name, name, sizeof name);
        c->peer = peer;
        c->id = ++srv->accepted;
        note_client(srv, c, DDP_STORE_CLIENT_CONNECTED);
        conn_charge(srv, c);
        /* Current only (or with a token): silence is a stuck or foreign
         * client. Otherwise it may be a legacy client's callback socket,
         * silent by design. */
        if (srv->o.protocol == DDP_STORE_PROTO_CURRENT || srv->token)
            uv_link(srv, c);
        c->idx = srv->nconns;
        srv->conns[srv->nconns++] = c;
        ST_SET(srv, st_clients, srv->nconns);
        ddp_debug("store server: client %s connected", name);
    }
}

/* Drops connections whose time on list l ran out (oldest first). */
static void expire(ddp_store_server_t *srv, int l, int64_t timeout)
{
    while (srv->tl[l].head &&
           srv->now - srv->tl[l].head->lk[l].t >= timeout) {
        conn_t *c = srv->tl[l].head;
        if (l == L_UV) {
            int strict = srv->o.protocol == DDP_STORE_PROTO_CURRENT ||
                         srv->token;
            srv_warn(srv, RL_TIMEOUT,
                     "store server: dropping client %s: no %s within %.1f s "
                     "of %s (not a TCPStore client, or a stuck one)",
                     c->name, strict ? "VALIDATE" : "complete first request",
                     (double)timeout / 1e9,
                     strict ? "connecting" : "its first byte");
            ST_ADD(srv, st_unval, 1);
        } else {
            srv_warn(srv, RL_TIMEOUT,
                     "store server: dropping client %s: no progress for "
                     "%.1f s with %zu request and %zu reply bytes in flight "
                     "(idle_timeout: a stalled or hostile client)",
                     c->name, (double)timeout / 1e9,
                     ddp__bb_pending(&c->in), out_total(c));
            ST_ADD(srv, st_idle, 1);
        }
        conn_kill(srv, c); /* unlinks it from the list */
    }
}

/* Deferred connections in order, while the budget has room for what each
 * waits for. When the first does not fit and nothing else is in flight
 * (only waiting requests hold the memory: they would wait for each other
 * forever), it is dropped to let the others go on. */
static void resume_deferred(ddp_store_server_t *srv)
{
    for (size_t n = 0; srv->tl[L_MEM].head && n < srv->nconns; n++) {
        conn_t *c = srv->tl[L_MEM].head;
        if (mem_fits(srv, c->defer_need, 0) != FIT_OK) {
            if (srv->tl[L_BUSY].head || srv->dead)
                break;
            srv_warn(srv, RL_MEMORY,
                     "store server: dropping client %s: it needs %zu bytes "
                     "and the rest of the %zu-byte memory budget is held by "
                     "requests waiting like it (raise max_memory)",
                     c->name, c->defer_need, srv->o.max_memory);
            ST_ADD(srv, st_refused, 1);
            conn_kill(srv, c);
            break; /* its memory is free after this step's reap */
        }
        tl_del(srv, L_MEM, c);
        c->deferred = 0;
        mark_dirty(srv, c);
        conn_process(srv, c);
    }
}

static void flush_dirty(ddp_store_server_t *srv)
{
    /* pump may dirty other connections (a reply wakes no one, but keep the
     * loop index-based so appends during the walk are served too). */
    for (size_t i = 0; i < srv->ndirty; i++) {
        conn_t *c = srv->dirty[i];
        c->dirty = 0;
        if (!c->dead)
            conn_pump(srv, c);
    }
    for (size_t i = 0; i < srv->ndirty; i++) {
        conn_t *c = srv->dirty[i];
        c->dirty = 0;
        conn_settle(srv, c);
    }
    srv->ndirty = 0;
}

/* Frees the connections killed in this step. */
static void reap(ddp_store_server_t *srv)
{
    while (srv->dead) {
        conn_t *c = srv->dead;
        srv->dead = c->dnext;
        srv->conns[c->idx] = srv->conns[--srv->nconns];
        srv->conns[c->idx]->idx = c->idx;
        conn_free(srv, c);
    }
    ST_SET(srv, st_clients, srv->nconns);
}

/* ------------------------------------------------------------- public */

static int64_t earlier(int64_t a, int64_t b) { return a < b ? a : b; }

int ddp_store_server_step(ddp_store_server_t *srv, int64_t deadline)
{
    srv->now = ddp_sys_now(srv->sys);
    if (srv->accept_paused && srv->now >= srv->accept_paused_until)
        listener_arm(srv, 1);
    int64_t pd = deadline;
    if (srv->tl[L_UV].head)
        pd = earlier(pd, srv->tl[L_UV].head->lk[L_UV].t +
                             srv->o.validate_timeout_ns);
    if (srv->tl[L_BUSY].head)
        pd = earlier(pd, srv->tl[L_BUSY].head->lk[L_BUSY].t +
                             srv->o.idle_timeout_ns);
    if (srv->accept_paused)
        pd = earlier(pd, srv->accept_paused_until);

    int n = ddp_sys_epoll_wait(srv->sys, srv->ep, srv->evs, SRV_EVENTS, pd);
    if (n < 0) {
        if (n != -EINTR && n != -EAGAIN)
            return ddp_err_wrap("store server on port %u: waiting for "
                                "events failed",
                                (unsigned)srv->addr.port);
        n = 0;
    }
    srv->now = ddp_sys_now(srv->sys);
    int listener = 0;
    for (int i = 0; i < n; i++) {
        conn_t *c = (conn_t *)(uintptr_t)srv->evs[i].data;
        if (!c)
            listener = 1;
        else if (!c->dead)
            conn_on_events(srv, c, srv->evs[i].events);
    }
    if (listener) /* accepted ones are served from the next step */
        accept_some(srv);
    flush_dirty(srv);
    expire(srv, L_UV, srv->o.validate_timeout_ns);
    expire(srv, L_BUSY, srv->o.idle_timeout_ns);
    reap(srv); /* (the dirty list is empty here) their memory is free now */
    resume_deferred(srv);
    flush_dirty(srv);
    reap(srv);
    return 0;
}

int ddp_store_server_run(ddp_store_server_t *srv, int64_t deadline)
{
    while (!atomic_load_explicit(&srv->stop, memory_order_acquire)) {
        int64_t now = ddp_sys_now(srv->sys);
        if (now >= deadline)
            return 0;
        int64_t d = deadline - now > SRV_SLICE_NS ? now + SRV_SLICE_NS
                                                  : deadline;
        int rc = ddp_store_server_step(srv, d);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int ddp_store_server_preset(ddp_store_server_t *srv, const char *key,
                            const void *val, size_t n)
{
    /* As a client's SET would store it: "/" + key (TCPStore's keyPrefix_). */
    size_t kn = key ? strlen(key) + 1 : 0;
    if (!srv || kn < 2 || kn > srv->o.max_key_len ||
        n > srv->o.max_value_len || (n && !val))
        return ddp_err_set(-EINVAL, "store server preset: a key of 1..%zu "
                                    "bytes and a value of at most %zu bytes",
                           srv ? srv->o.max_key_len - 1 : 0,
                           srv ? srv->o.max_value_len : 0);
    char *wire = malloc(kn);
    if (!wire)
        return ddp_err_set(-ENOMEM, "out of memory");
    wire[0] = '/';
    memcpy(wire + 1, key, kn - 1);
    int rc = store_set(srv, (slice_t){(const uint8_t *)wire, kn},
                       (slice_t){val, n});
    free(wire);
    if (rc != 0)
        return ddp_err_set(-ENOMEM, "store server preset of \"%s\": %s", key,
                           srv->msg);
    return 0;
}

void ddp_store_server_stop(ddp_store_server_t *srv)
{
    /* A lock-free atomic store: async-signal-safe. */
    atomic_store_explicit(&srv->stop, 1, memory_order_release);
}

static int listen_on(ddp_store_server_t *srv, const ddp_addr_t *a, int backlog,
                     char *what, size_t wn)
{
    ddp_addr_format(a, what, wn);
    return ddp_sys_listen(srv->sys, a, backlog);
}

/* o's limits a caller left 0 (a job's store scales with the job), and
 * its token checked: 0 or DDP_ECONFIG. */
static int opts_defaults(ddp_store_server_opts_t *o)
{
    /* A rank of ddpsim's plugin holds two connections and stores four
     * keys (torch's TCPStore has no limits). */
    size_t world = o->world > 0 ? (size_t)o->world : 0;
    if (!o->max_clients)
        o->max_clients = 4 * world > 65536 ? 4 * world : 65536;
    if (!o->max_keys)
        o->max_keys = 8 * world > DDP_STORE_MAX_KEYS ? 8 * world : DDP_STORE_MAX_KEYS;
    if (!o->max_key_len)
        o->max_key_len = DDP_STORE_MAX_KEY;
    /* torch 1.13's waitHandler takes any number of keys (a 64-bit count):
     * a WAIT may name max_keys keys, and the memory budget bounds them. */
    if (!o->max_wait_keys)
        o->max_wait_keys = o->max_keys;
    if (!o->max_value_len)
        o->max_value_len = DDP_STORE_MAX_VALUE;
    if (o->validate_timeout_ns <= 0)
        o->validate_timeout_ns = 30 * DDP_NS_PER_S;
    if (!o->max_memory)
        o->max_memory = DDP_STORE_DEFAULT_MAX_MEMORY;
    if (o->idle_timeout_ns <= 0)
        o->idle_timeout_ns = DDP_STORE_DEFAULT_IDLE_TIMEOUT_S * DDP_NS_PER_S;
    if (o->token && strlen(o->token) > DDP_STORE_MAX_TOKEN)
        return ddp_err_set(DDP_ECONFIG, "store server: the token has %zu "
                                        "bytes; at most %d",
                           strlen(o->token), DDP_STORE_MAX_TOKEN);
    if (o->token && !*o->token)
        return ddp_err_set(DDP_ECONFIG, "store server: the token is empty; "
                                        "give one, or none for a "
                                        "TCPStore-compatible server");
    return 0;
}

/* The listener: on host (every address it resolves to, in turn), or
 * NULL/"" on "::" then 0.0.0.0. A socket, or a negative code (*unresolved
 * set when host did not resolve); what: the address tried last. */
static int listen_where(ddp_store_server_t *srv, const char *host, uint16_t port, int backlog,
                        char *what, size_t whatn, int *unresolved)
{
    int fd;
    ddp_addr_t a;
    if (!host || !*host) {
        /* Like the libuv server: "::" (dual stack), then 0.0.0.0 when IPv6
         * is unavailable. A taken port is not retried on IPv4: the answer
         * would be the same, or worse an IPv4-only listener. */
        ddp_addr_parse("::", port, &a);
        fd = listen_on(srv, &a, backlog, what, whatn);
        if (fd < 0 && fd != -EADDRINUSE) {
            ddp_info("store server: cannot listen on %s (%s); trying 0.0.0.0",
                     what, ddp_strerror(fd));
            ddp_addr_parse("0.0.0.0", port, &a);
            fd = listen_on(srv, &a, backlog, what, whatn);
        }
    } else {
        ddp_addr_t as[8];
        int na = ddp_sys_resolve(srv->sys, host, port, as, 8);
        if (na < 0) {
            *unresolved = 1;
            return na;
        }
        fd = -EADDRNOTAVAIL;
        for (int i = 0; i < na; i++) {
            fd = listen_on(srv, &as[i], backlog, what, whatn);
            if (fd >= 0 || fd == -EADDRINUSE)
                break;
        }
    }
    return fd;
}

/* The error of a listener that could not be made (fd, from listen_where). */
static int listen_failed(int fd, int unresolved, const char *host, const char *what,
                         uint16_t port)
{
    if (unresolved)
        return ddp_err_wrap("store server cannot listen on host \"%s\"", host);
    if (fd == -EADDRINUSE) {
        ddp_err_set(fd, "the store server cannot listen on %s: the port "
                        "is already in use",
                    what);
        ddp_err_addr("%s", what);
        return ddp_err_hint("another job or an old master is using port "
                            "%u; pick another MASTER_PORT (or stop the "
                            "old job)",
                            (unsigned)port);
    }
    ddp_err_wrap("store server cannot listen on %s", what);
    return ddp_err_addr("%s", what);
}

/* The store server's one line at start: where, and its limits. */
static void log_listening(const ddp_store_server_t *srv, int backlog)
{
    char bound[DDP_ADDR_STRLEN];
    char over[64] = "";
    if (srv->own_sys)
        snprintf(over, sizeof over, ", over the %s sys", srv->own_sys->ops->name);
    ddp_info("store server listening on %s (backlog %d, memory budget %zu "
             "MiB, up to %zu clients and %zu keys%s%s%s%s)",
             ddp_addr_format(&srv->addr, bound, sizeof bound), backlog,
             srv->o.max_memory >> 20, srv->o.max_clients, srv->o.max_keys,
             srv->allow ? ", allow " : "",
             srv->allow ? srv->allow : "", srv->token ? ", token" : "", over);
}

/* Each client costs the server an open file: before its sys hook (relay
 * processes, say, which inherit the limit) the server raises its soft
 * open-file limit to the hard one and says the before and after: once per
 * process, as a raise happens once unless something lowered the limit
 * since; a limit already at the hard one, or a failure, is said once (a
 * sys without host limits, the simulator's, has nothing to raise). */
static void raise_fd_limit(ddp_sys_t *sys)
{
    static atomic_int said;
    long before, after;
    ddp_errctx_t keep = *ddp_err_ctx(); /* the caller's, whatever this does */
    int rc = ddp_sys_fd_limit_raise(sys, &before, &after);
    if (rc && rc != DDP_EUNSUPPORTED && !atomic_exchange(&said, 1))
        ddp_warn("store server: %s; the open-file limit stays %ld", ddp_err_message(), after);
    *ddp_err_ctx() = keep;
    if (!rc && before != after) /* once, unless something lowered it since */
        ddp_info("store server: open-file limit %ld raised to the hard limit %ld", before, after);
    else if (!rc && !atomic_exchange(&said, 1))
        ddp_info("store server: open-file limit %ld, the hard limit already", before);
}

int ddp_store_server_new(ddp_sys_t *sys, const ddp_store_server_opts_t *opts,
                         ddp_store_server_t **out)
{
    *out = NULL;
    ddp_store_server_opts_t o = {0};
    if (opts)
        o = *opts;
    int rc0 = opts_defaults(&o);
    if (rc0)
        return rc0;
    int backlog = o.backlog > 0 ? o.backlog : ddp_sys_somaxconn(sys);
    if (backlog <= 0)
        backlog = 4096;

    ddp_store_server_t *srv = calloc(1, sizeof *srv);
    if (!srv)
        return ddp_err_set(-ENOMEM, "out of memory creating the store server");
    srv->sys = sys;
    srv->lfd = srv->ep = -1;
    raise_fd_limit(sys);
    if (o.sys_hook) {
        if ((rc0 = o.sys_hook(sys, o.sys_hook_arg, &srv->own_sys)) != 0) {
            free(srv);
            return rc0;
        }
        srv->sys = sys = srv->own_sys;
    }
    srv->max_request = SRV_MIN_MAX_REQUEST;
    if (o.max_value_len < (SIZE_MAX - (1u << 20)) / 4 &&
        4 * o.max_value_len + (1u << 20) > srv->max_request)
        srv->max_request = 4 * o.max_value_len + (1u << 20);
    srv->max_reply = SRV_MIN_MAX_REPLY;
    if (srv->max_request > srv->max_reply)
        srv->max_reply = srv->max_request;
    atomic_init(&srv->stop, 0);
#define SRV_STAT_INIT(out, f) atomic_init(&srv->f, 0);
    SRV_STATS(SRV_STAT_INIT)
#undef SRV_STAT_INIT
    int rc = ddp__store_acl_parse(o.allow, &srv->acl);
    if (rc != 0) {
        ddp_store_server_free(srv);
        return rc;
    }
    srv->allow = o.allow ? strdup(o.allow) : NULL;
    srv->token = o.token ? strdup(o.token) : NULL;
    srv->token_len = o.token ? strlen(o.token) : 0;
    o.allow = srv->allow;
    o.token = srv->token;
    o.host = NULL; /* not kept */
    srv->o = o;
    if ((opts && opts->allow && !srv->allow) ||
        (opts && opts->token && !srv->token) ||
        ddp__kv_init(&srv->keys, SRV_INIT_BUCKETS) != 0 ||
        grow_conns(srv) != 0) {
        ddp_store_server_free(srv);
        return ddp_err_set(-ENOMEM, "out of memory creating the store server");
    }
    if ((srv->ep = ddp_sys_epoll_create(sys)) < 0) {
        rc = srv->ep;
        ddp_store_server_free(srv);
        return ddp_err_wrap("the store server cannot make its readiness set");
    }

    char what[DDP_ADDR_STRLEN] = "";
    int unresolved = 0;
    int fd = listen_where(srv, opts ? opts->host : NULL, o.port, backlog, what, sizeof what,
                          &unresolved);
    if (fd < 0) {
        ddp_store_server_free(srv);
        return listen_failed(fd, unresolved, opts ? opts->host : NULL, what, o.port);
    }
    srv->lfd = fd;
    rc = ddp_sys_local_addr(sys, fd, &srv->addr);
    if (rc == 0 &&
        (rc = ddp_sys_epoll_ctl(sys, srv->ep, DDP_EPOLL_ADD, fd, DDP_POLLIN,
                                0)) != 0)
        ddp_err_wrap("the store server cannot watch its listener");
    if (rc < 0) {
        ddp_store_server_free(srv);
        return rc;
    }
    log_listening(srv, backlog);
    *out = srv;
    return 0;
}

ddp_addr_t ddp_store_server_addr(const ddp_store_server_t *srv)
{
    return srv->addr;
}

void ddp_store_server_stats(const ddp_store_server_t *srv,
                            ddp_store_server_stats_t *out)
{
    ddp_store_server_t *s = (ddp_store_server_t *)srv; /* atomics: loads */
    memset(out, 0, sizeof *out);
#define SRV_STAT_LOAD(field, f)                                                \
    out->field = atomic_load_explicit(&s->f, memory_order_relaxed);
    SRV_STATS(SRV_STAT_LOAD)
#undef SRV_STAT_LOAD
}

static void *server_thread(void *arg)
{
    ddp_store_server_t *srv = arg;
    ddp_ident_set_phase("store server");
    int rc = ddp_store_server_run(srv, DDP_DEADLINE_NEVER);
    if (rc < 0)
        ddp_error("store server on port %u stopped: %s",
                  (unsigned)srv->addr.port, ddp_err_message());
    return NULL;
}

int ddp_store_server_start_thread(ddp_store_server_t *srv)
{
    if (srv->thread_started)
        return ddp_err_set(-EBUSY, "the store server thread already runs");
    atomic_store_explicit(&srv->stop, 0, memory_order_relaxed);
    int rc = pthread_create(&srv->thread, NULL, server_thread, srv);
    if (rc != 0)
        return ddp_err_set(-rc, "cannot start the store server thread: %s",
                           strerror(rc));
    srv->thread_started = 1;
    return 0;
}

void ddp_store_server_join_thread(ddp_store_server_t *srv)
{
    if (!srv->thread_started)
        return;
    ddp_store_server_stop(srv);
    pthread_join(srv->thread, NULL);
    srv->thread_started = 0;
    /* A later run() or start_thread() runs again. */
    atomic_store_explicit(&srv->stop, 0, memory_order_relaxed);
}

void ddp_store_server_free(ddp_store_server_t *srv)
{
    if (!srv)
        return;
    ddp_store_server_join_thread(srv);
    for (size_t i = 0; i < srv->nconns; i++)
        conn_kill(srv, srv->conns[i]);
    reap(srv);
    ddp__kv_free(&srv->keys, ent_fini);
    if (srv->lfd >= 0) {
        if (srv->ep >= 0)
            ddp_sys_epoll_ctl(srv->sys, srv->ep, DDP_EPOLL_DEL, srv->lfd, 0,
                              0);
        ddp_sys_close(srv->sys, srv->lfd);
    }
    if (srv->ep >= 0)
        ddp_sys_epoll_close(srv->sys, srv->ep);
    free(srv->conns);
    free(srv->dirty);
    free(srv->scratch);
    for (size_t i = 0; i < srv->nwatches; i++)
        free(srv->watches[i].key);
    free(srv->watches);
    ddp__store_acl_free(&srv->acl);
    free(srv->allow);
    free(srv->token);
    ddp_sys_free(srv->own_sys); /* last: relay processes, say, exit */
    free(srv);
}
