/* core/store_server.c — a TCPStore-protocol server (PyTorch >= 2.4 libuv
 * server semantics; byte layouts and differences: docs/store-protocol.md).
 *
 * Both protocol generations share one key space. Each connection's
 * generation is told from its first request (opts.protocol auto): VALIDATE
 * with the magic is the current protocol, anything else is served with the
 * legacy table (torch 1.9 - 2.0), WATCH_KEY included. A legacy client opens
 * a second, silent connection for watch callbacks, so in auto and legacy
 * mode a connection that has sent nothing is kept (as torch 1.13's server
 * does); the validate timeout starts at its first byte instead.
 *
 * One event loop over ddp_sys_poll: pfds[0] is the listener, pfds[i + 1]
 * belongs to conns[i]. Every socket call goes through the sys seam with
 * deadline 0 ("try once"), so the same loop runs over real sockets and over
 * the simulator's virtual ones, and no client can block the others:
 *  - input is accumulated per connection and parsed from the start of the
 *    current request each time enough bytes are there (a request may arrive
 *    in any number of pieces, several may arrive in one read);
 *  - a readable connection gets one recv per pass unless that recv filled
 *    the room it was given (a short read means the socket is empty);
 *  - output is queued per connection and written with non-blocking sends
 *    once per pass, after every ready connection was read (so a pass costs
 *    one send per connection that has replies, however many requests it
 *    answered), POLLOUT is asked for only while some is pending;
 *  - a connection with more than SRV_OUT_HIGH bytes of unsent replies is not
 *    read from until it drains (a client that pipelines GETs and never reads
 *    cannot make the server buffer without bound).
 * Any protocol violation (bad first message, oversized length, unknown
 * opcode, over a limit) drops that connection only.
 *
 * Key storage: the shared key table (kvmap.h: hash + insertion order; LIST_KEYS
 * order is deterministic, whatever the hash). An entry holds a key's value,
 * its queue and the waiters blocked on it; a waiter sits on two doubly
 * linked lists (its key's and its connection's) so that waking a key and
 * cancelling a connection's wait are both O(waiters involved). */
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
#include "ddp/log.h"
#include "bytebuf.h"
#include "kvmap.h"
#include "store_priv.h"

/* run() polls in slices this long so a stop() is noticed in bounded time
 * (no self-pipe: every socket goes through the sys seam). */
#define SRV_SLICE_NS (50 * DDP_NS_PER_MS)
/* Bytes read from one connection per step before the next one is served. */
#define SRV_RECV_BUDGET ((size_t)1 << 20)
/* Above this much unsent output a connection's requests are not parsed. */
#define SRV_OUT_HIGH ((size_t)1 << 20)
/* Connections accepted per step (the rest wait in the backlog). */
#define SRV_ACCEPT_BATCH 256
/* Buffers above this are released once empty, so idle clients stay small. */
#define SRV_KEEP_BUF ((size_t)64 << 10)
/* After EMFILE and friends the listener rests this long (else it spins). */
#define SRV_ACCEPT_PAUSE_NS (100 * DDP_NS_PER_MS)
#define SRV_MIN_MAX_REQUEST ((size_t)64 << 20)
#define SRV_MIN_MAX_REPLY ((size_t)256 << 20)
#define SRV_INIT_BUCKETS 1024
/* WATCH_KEY's internal op number (legacy connections only). */
#define OP_WATCH_KEY (DDP_STORE_OP_COUNT + 1)

typedef struct srv_conn conn_t;
typedef struct srv_entry entry_t;

typedef struct waiter {
    conn_t *c;
    entry_t *e;
    struct waiter *kprev, *knext; /* on e's list */
    struct waiter *cprev, *cnext; /* on c's list */
} waiter_t;

typedef struct qitem {
    struct qitem *next;
    size_t len;
    uint8_t data[];
} qitem_t;

struct srv_entry {
    ddp__kv_node_t kv; /* first: key, hash chain, insertion order */
    uint8_t *val;
    size_t vlen, vcap;
    int has_val;
    qitem_t *qhead, *qtail;
    size_t qlen;
    waiter_t *whead, *wtail;
};

struct srv_conn {
    int fd;
    size_t idx; /* in conns[]; pfds[idx + 1] */
    char name[DDP_ADDR_STRLEN];
    int validated; /* its first request completed (VALIDATE, or any legacy
                      request) */
    int gen;       /* 0 until the first request tells: LEGACY or CURRENT */
    int on_uv;     /* on the server's not-yet-validated list */
    int dead;  /* closed; freed at the end of the step */
    int doom;  /* to be dropped at the next safe point */
    int dirty; /* on the server's dirty list */
    int64_t accepted_at;
    conn_t *uprev, *unext; /* not yet validated, in accept order */
    ddp__bb_t in;
    size_t need; /* bytes from in.off needed before parsing again */
    ddp__bb_t out;
    waiter_t *whead, *wtail;
    size_t wait_left; /* keys of the pending WAIT still missing */
    int waiting;
};

typedef struct slice {
    const uint8_t *p;
    size_t n;
} slice_t;

struct ddp_store_server {
    ddp_sys_t *sys;
    ddp_store_server_opts_t o; /* defaults filled in */
    size_t max_request, max_reply;
    int lfd;
    ddp_addr_t addr;
    int64_t accept_paused_until;

    conn_t **conns;
    size_t nconns, cconns;
    ddp_pollfd_t *pfds; /* cconns + 1 */
    conn_t *uv_head, *uv_tail;
    conn_t **dirty;
    size_t ndirty, cdirty;

    struct watch { /* legacy WATCH_KEY registrations */
        conn_t *c;
        uint8_t *key;
        size_t klen;
    } *watches;
    size_t nwatches, cwatches;

    ddp__kvmap_t keys;
    size_t nvals;   /* keys with a value (GETNUMKEYS) */
    size_t nstored; /* entries with a value or a non-empty queue */

    slice_t *scratch;
    size_t cscratch;
    char msg[256]; /* why the current request failed */

    atomic_int stop;
    atomic_size_t st_clients, st_keys;
    atomic_uint_fast64_t st_requests, st_proto, st_unval, st_rejected,
        st_legacy;

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

/* ------------------------------------------------------------------ keys */

static int ent_stored(const entry_t *e) { return e->has_val || e->qlen > 0; }

static entry_t *ent_find(ddp_store_server_t *srv, slice_t k)
{
    return (entry_t *)ddp__kv_find(&srv->keys, k.p, k.n);
}

/* Find or create (NULL only on ENOMEM). */
static entry_t *ent_get(ddp_store_server_t *srv, slice_t k)
{
    return (entry_t *)ddp__kv_get(&srv->keys, k.p, k.n, sizeof(entry_t));
}

/* Frees an entry's value and queue (the map frees the rest). */
static void ent_fini(ddp__kv_node_t *n)
{
    entry_t *e = (entry_t *)n;
    for (qitem_t *q = e->qhead, *next; q; q = next) {
        next = q->next;
        free(q);
    }
    free(e->val);
}

/* An entry lives while it has a value, a queue or waiters. */
static void ent_maybe_free(ddp_store_server_t *srv, entry_t *e)
{
    if (!e || e->has_val || e->qlen || e->whead)
        return;
    ent_fini(&e->kv);
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

static size_t out_pending(const conn_t *c)
{
    return ddp__bb_pending(&c->out);
}

static int out_reserve(conn_t *c, size_t n)
{
    return ddp__bb_reserve(&c->out, n, 256);
}

/* Appends to c's output (the caller reserved room). */
static void out_put(conn_t *c, const void *p, size_t n)
{
    ddp__bb_put(&c->out, p, n);
}

/* A reply for c: reserve, write, mark for flushing. Returns 0 or -ENOMEM
 * (the connection is then doomed: a half-written reply must not be sent). */
static int reply(ddp_store_server_t *srv, conn_t *c, const void *p, size_t n)
{
    if (out_reserve(c, n) != 0) {
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

/* u64 length + bytes. */
static void out_put_bytes(conn_t *c, const void *p, size_t n)
{
    uint64_t len = n;
    out_put(c, &len, 8);
    out_put(c, p, n);
}

/* Puts c at the end of the list of connections not yet validated; its
 * validate timeout runs from now. */
static void uv_link(ddp_store_server_t *srv, conn_t *c)
{
    c->accepted_at = ddp_sys_now(srv->sys);
    c->uprev = srv->uv_tail;
    c->unext = NULL;
    if (srv->uv_tail)
        srv->uv_tail->unext = c;
    else
        srv->uv_head = c;
    srv->uv_tail = c;
    c->on_uv = 1;
}

/* Takes c off the list of connections not yet validated. */
static void uv_unlink(ddp_store_server_t *srv, conn_t *c)
{
    if (!c->on_uv)
        return;
    c->on_uv = 0;
    if (c->uprev)
        c->uprev->unext = c->unext;
    else
        srv->uv_head = c->unext;
    if (c->unext)
        c->unext->uprev = c->uprev;
    else
        srv->uv_tail = c->uprev;
    c->uprev = c->unext = NULL;
}

/* ---------------------------------------------------------------- waits */

static void waiter_unlink(waiter_t *w)
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
}

/* Drop every waiter of c (CANCEL_WAIT, disconnect). */
static void conn_clear_waits(ddp_store_server_t *srv, conn_t *c)
{
    while (c->whead) {
        entry_t *e = c->whead->e;
        waiter_unlink(c->whead);
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
        waiter_unlink(w);
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
 * does: u8 type, key, old value, new value (each u64 length + bytes). */
static void notify_watchers(ddp_store_server_t *srv, slice_t k, int type,
                            slice_t oldv, slice_t newv)
{
    for (size_t i = 0; i < srv->nwatches; i++) {
        struct watch *w = &srv->watches[i];
        if (w->klen != k.n || (k.n && memcmp(w->key, k.p, k.n) != 0) ||
            w->c->dead)
            continue;
        conn_t *c = w->c;
        if (out_reserve(c, 1 + 24 + k.n + oldv.n + newv.n) != 0) {
            c->doom = 1;
            mark_dirty(srv, c);
            continue;
        }
        uint8_t t = (uint8_t)type;
        out_put(c, &t, 1);
        out_put_bytes(c, k.p, k.n);
        out_put_bytes(c, oldv.p, oldv.n);
        out_put_bytes(c, newv.p, newv.n);
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
    return 0;
}

static void watches_drop(ddp_store_server_t *srv, conn_t *c)
{
    for (size_t i = 0; i < srv->nwatches;) {
        if (srv->watches[i].c == c) {
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
    entry_t *e = ent_get(srv, k);
    if (!e)
        return srv_fail(srv, "%s", oom), NULL;
    *had = e->has_val;
    *was = ent_stored(e);
    if (!*was && srv->nstored >= srv->o.max_keys) {
        ent_maybe_free(srv, e);
        return srv_fail(srv, "the store holds %zu keys (max_keys); refusing "
                             "a new %s",
                        srv->nstored, what),
               NULL;
    }
    return e;
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
    uint8_t *old = NULL;
    size_t oldn = 0;
    int watch = srv->nwatches > 0 && watched(srv, k);
    if (watch && had && e->vlen) {
        if (!(old = malloc(e->vlen)))
            return srv_fail(srv, "out of memory for a watched value");
        memcpy(old, e->val, e->vlen);
        oldn = e->vlen;
    }
    /* Overwrite in place when the old buffer fits (a SET loop does not
     * malloc), unless it is much larger than the new value. */
    if (!e->val || e->vcap < v.n || e->vcap > 2 * v.n + 64) {
        uint8_t *nv = malloc(v.n ? v.n : 1);
        if (!nv) {
            free(old);
            ent_maybe_free(srv, e);
            return srv_fail(srv, "out of memory storing a %zu-byte value",
                            v.n);
        }
        free(e->val);
        e->val = nv;
        e->vcap = v.n;
    }
    if (v.n)
        memcpy(e->val, v.p, v.n);
    e->vlen = v.n;
    e->has_val = 1;
    ent_account(srv, e, had, was);
    wake_key(srv, e, 0);
    if (watch) {
        notify_watchers(srv, k, had ? DDP_STORE_KEY_UPDATED
                                    : DDP_STORE_KEY_CREATED,
                        (slice_t){old, oldn}, v);
        free(old);
    }
    return 0;
}

static int store_append(ddp_store_server_t *srv, slice_t k, slice_t v)
{
    entry_t *e = ent_find(srv, k);
    if (!e || !e->has_val)
        return store_set(srv, k, v);
    if (v.n > srv->o.max_value_len - e->vlen)
        return srv_fail(srv, "APPEND would grow the value past %zu bytes "
                             "(max_value_len)",
                        srv->o.max_value_len);
    if (e->vcap - e->vlen < v.n) {
        size_t nc = e->vcap ? e->vcap : 64;
        while (nc - e->vlen < v.n)
            nc *= 2;
        uint8_t *nv = realloc(e->val, nc);
        if (!nv)
            return srv_fail(srv, "out of memory appending %zu bytes", v.n);
        e->val = nv;
        e->vcap = nc;
    }
    if (v.n)
        memcpy(e->val + e->vlen, v.p, v.n);
    e->vlen += v.n;
    if (srv->nwatches > 0 && watched(srv, k))
        /* Legacy watchers know no KEY_APPENDED: an update, old = the
         * value before the append. */
        notify_watchers(srv, k, DDP_STORE_KEY_UPDATED,
                        (slice_t){e->val, e->vlen - v.n},
                        (slice_t){e->val, e->vlen});
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
    if (e && e->has_val && parse_counter(e->val, e->vlen, &cur) != 0)
        return srv_fail(srv, "ADD on key \"%.*s\" whose value (%zu bytes) is "
                             "not a decimal integer",
                        (int)(k.n > 64 ? 64 : k.n), (const char *)k.p,
                        e->vlen);
    if (__builtin_add_overflow(cur, delta, res))
        return srv_fail(srv, "ADD %" PRId64 " to %" PRId64 " on key \"%.*s\" "
                             "overflows int64",
                        delta, cur, (int)(k.n > 64 ? 64 : k.n),
                        (const char *)k.p);
    char txt[24];
    int len = snprintf(txt, sizeof txt, "%" PRId64, *res);
    return store_set(srv, k, (slice_t){(const uint8_t *)txt, (size_t)len});
}

static int slice_eq(const uint8_t *a, size_t an, slice_t b)
{
    return an == b.n && (an == 0 || memcmp(a, b.p, an) == 0);
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

enum { H_OK = 0, H_MORE, H_BAD, H_DROP };

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

/* A u64-length-prefixed reply of n bytes at p to c; out of memory fails
 * the request (H_BAD). */
#define REPLY_BYTES(p, n)                                                      \
    do {                                                                       \
        if (out_reserve(c, 8 + (n)) != 0) {                                    \
            srv_fail(srv, "out of memory");                                    \
            return H_BAD;                                                      \
        }                                                                      \
        out_put_bytes(c, (p), (n));                                            \
        mark_dirty(srv, c);                                                    \
    } while (0)

static int key_present(ddp_store_server_t *srv, slice_t k)
{
    entry_t *e = ent_find(srv, k);
    return e && ent_stored(e);
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
        total += 8 + (e && e->has_val ? e->vlen : 0);
        if (total > srv->max_reply)
            return srv_fail(srv, "MULTI_GET reply larger than %zu bytes",
                            srv->max_reply),
                   H_BAD;
    }
    REPLY_FAULT();
    if (out_reserve(c, total) != 0)
        return srv_fail(srv, "out of memory for a %zu-byte reply", total),
               H_BAD;
    for (size_t i = 0; i < n; i++) {
        entry_t *e = ent_find(srv, ks[i]);
        /* A missing key reads as empty bytes (libuv server's get()). */
        if (e && e->has_val)
            out_put_bytes(c, e->val, e->vlen);
        else
            out_put_bytes(c, NULL, 0);
    }
    mark_dirty(srv, c);
    return H_OK;
}

static int op_list_keys(ddp_store_server_t *srv, conn_t *c)
{
    size_t total = 8;
    for (ddp__kv_node_t *kn = srv->keys.ohead; kn; kn = kn->onext)
        if (((entry_t *)kn)->has_val)
            total += 8 + kn->klen;
    if (total > srv->max_reply)
        return srv_fail(srv, "LIST_KEYS reply larger than %zu bytes",
                        srv->max_reply),
               H_BAD;
    REPLY_FAULT();
    if (out_reserve(c, total) != 0)
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
    qitem_t *q = malloc(sizeof *q + v.n);
    if (!q) {
        ent_maybe_free(srv, e);
        return srv_fail(srv, "out of memory queueing %zu bytes", v.n);
    }
    q->next = NULL;
    q->len = v.n;
    if (v.n)
        memcpy(q->data, v.p, v.n);
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
    if (out_reserve(c, 8 + (q ? 8 + q->len : 0)) != 0)
        return srv_fail(srv, "out of memory for a queue reply"), H_BAD;
    out_put(c, &len, 8);
    if (q) {
        out_put_bytes(c, q->data, q->len);
        int had = e->has_val, was = ent_stored(e);
        e->qhead = q->next;
        if (!e->qhead)
            e->qtail = NULL;
        e->qlen--;
        free(q);
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

/* Parse one request at the start of c->in's pending bytes and run it.
 * H_OK consumed it. */
static int handle_one(ddp_store_server_t *srv, conn_t *c)
{
    rd_t r = {.p = c->in.data + c->in.off,
              .n = ddp__bb_pending(&c->in),
              .max = srv->max_request,
              .msg = srv->msg,
              .msgn = sizeof srv->msg};
    if (!c->gen) {
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
    slice_t k = {0}, v = {0}, v2 = {0}, *ks = NULL;
    size_t n = 0;
    int64_t i64 = 0;
    uint32_t u32 = 0;
    switch (op) {
    case DDP_STORE_OP_VALIDATE:
        if (c->validated)
            rd_bad(&r, "VALIDATE sent twice"); /* libuv: "invalid command" */
        u32 = rd_u32(&r);
        break;
    case DDP_STORE_OP_SET:
    case DDP_STORE_OP_APPEND:
    case DDP_STORE_OP_QUEUE_PUSH:
        k = rd_str(&r, srv->o.max_key_len, "key");
        v = rd_str(&r, srv->o.max_value_len, "value");
        break;
    case DDP_STORE_OP_COMPARE_SET:
        k = rd_str(&r, srv->o.max_key_len, "key");
        v = rd_str(&r, srv->o.max_value_len, "expected value");
        v2 = rd_str(&r, srv->o.max_value_len, "desired value");
        break;
    case DDP_STORE_OP_GET:
    case DDP_STORE_OP_DELETE_KEY:
    case DDP_STORE_OP_QUEUE_POP:
    case DDP_STORE_OP_QUEUE_LEN:
    case OP_WATCH_KEY:
        k = rd_str(&r, srv->o.max_key_len, "key");
        break;
    case DDP_STORE_OP_ADD:
        k = rd_str(&r, srv->o.max_key_len, "key");
        i64 = (int64_t)rd_u64(&r);
        break;
    case DDP_STORE_OP_CHECK:
    case DDP_STORE_OP_WAIT:
    case DDP_STORE_OP_MULTI_GET:
        n = rd_count(&r, srv->o.max_keys, op_name(op));
        ks = rd_keys(srv, &r, n, 1);
        break;
    case DDP_STORE_OP_MULTI_SET:
        n = rd_count(&r, srv->o.max_keys, "MULTI_SET");
        ks = rd_keys(srv, &r, n, 2);
        break;
    case DDP_STORE_OP_PING:
        u32 = rd_u32(&r);
        break;
    case DDP_STORE_OP_GETNUMKEYS:
    case DDP_STORE_OP_CANCEL_WAIT:
    case DDP_STORE_OP_LIST_KEYS:
        break;
    default:
        if (r.st == RD_OK)
            rd_bad(&r, "unknown opcode %d", op);
    }
    if (r.st == RD_MORE) {
        c->need = r.need;
        return H_MORE;
    }
    if (r.st == RD_BAD)
        return H_BAD;

    int rc = H_OK;
    switch (op) {
    case DDP_STORE_OP_VALIDATE:
        if (u32 != DDP_STORE_MAGIC)
            return srv_fail(srv, "VALIDATE magic 0x%08" PRIx32 " is not "
                                 "0x%08X: not a TCPStore client",
                            u32, DDP_STORE_MAGIC),
                   H_BAD;
        if (ddp_fault_hit(DDP_FP_STORE_SERVER_VALIDATE))
            return srv_fail(srv, "fault point store/server/validate fired"),
                   H_DROP;
        c->validated = 1;
        uv_unlink(srv, c); /* no timeout for this one */
        break;
    case OP_WATCH_KEY:
        if (watch_add(srv, c, k) != 0)
            return H_BAD;
        REPLY_FAULT();
        NOMEM_IF(reply_u8(srv, c, DDP_STORE_KEY_CALLBACK_REGISTERED));
        break;
    case DDP_STORE_OP_SET:
        if (store_set(srv, k, v) != 0)
            return H_BAD;
        break;
    case DDP_STORE_OP_APPEND:
        if (store_append(srv, k, v) != 0)
            return H_BAD;
        break;
    case DDP_STORE_OP_COMPARE_SET: {
        entry_t *e = ent_find(srv, k);
        if (!e || !e->has_val) {
            if (v.n == 0) { /* missing + empty expected: create */
                if (store_set(srv, k, v2) != 0)
                    return H_BAD;
                e = ent_find(srv, k);
            } else {
                /* libuv replies `expected` and leaves the key missing. */
                REPLY_FAULT();
                REPLY_BYTES(v.p, v.n);
                break;
            }
        } else if (slice_eq(e->val, e->vlen, v)) {
            if (store_set(srv, k, v2) != 0)
                return H_BAD;
            e = ent_find(srv, k);
        }
        REPLY_FAULT();
        REPLY_BYTES(e->val, e->vlen);
        break;
    }
    case DDP_STORE_OP_GET: {
        entry_t *e = ent_find(srv, k);
        size_t vl = e && e->has_val ? e->vlen : 0;
        REPLY_FAULT();
        /* Missing key: empty bytes, as the libuv server (the client waits
         * for the key first, so this is only reached by raw users). */
        REPLY_BYTES(vl ? e->val : NULL, vl);
        break;
    }
    case DDP_STORE_OP_ADD: {
        int64_t res = 0;
        if (store_add(srv, k, i64, &res) != 0)
            return H_BAD;
        REPLY_FAULT();
        NOMEM_IF(reply_i64(srv, c, res));
        break;
    }
    case DDP_STORE_OP_CHECK: {
        int ready = 1;
        for (size_t i = 0; i < n && ready; i++)
            ready = key_present(srv, ks[i]);
        REPLY_FAULT();
        NOMEM_IF(reply_u8(srv, c,
                          ready ? DDP_STORE_READY : DDP_STORE_NOT_READY));
        break;
    }
    case DDP_STORE_OP_WAIT:
        rc = op_wait(srv, c, ks, n);
        break;
    case DDP_STORE_OP_GETNUMKEYS:
        REPLY_FAULT();
        NOMEM_IF(reply_i64(srv, c, (int64_t)srv->nvals));
        break;
    case DDP_STORE_OP_DELETE_KEY: {
        entry_t *e = ent_find(srv, k);
        int64_t del = e && e->has_val;
        if (del && srv->nwatches > 0)
            notify_watchers(srv, k, DDP_STORE_KEY_DELETED,
                            (slice_t){e->val, e->vlen}, (slice_t){NULL, 0});
        if (del) {
            int was = ent_stored(e);
            free(e->val);
            e->val = NULL;
            e->vlen = e->vcap = 0;
            e->has_val = 0;
            ent_account(srv, e, 1, was);
            ent_maybe_free(srv, e);
        }
        REPLY_FAULT();
        NOMEM_IF(reply_i64(srv, c, del));
        break;
    }
    case DDP_STORE_OP_MULTI_GET:
        rc = op_multi_get(srv, c, ks, n);
        break;
    case DDP_STORE_OP_MULTI_SET:
        for (size_t i = 0; i < n; i++)
            if (store_set(srv, ks[2 * i], ks[2 * i + 1]) != 0)
                return H_BAD;
        break;
    case DDP_STORE_OP_CANCEL_WAIT:
        conn_clear_waits(srv, c);
        REPLY_FAULT();
        NOMEM_IF(reply_u8(srv, c, DDP_STORE_WAIT_CANCELED));
        break;
    case DDP_STORE_OP_PING:
        REPLY_FAULT();
        NOMEM_IF(reply(srv, c, &u32, 4));
        break;
    case DDP_STORE_OP_QUEUE_PUSH:
        if (op_queue_push(srv, k, v) != 0)
            return H_BAD;
        break;
    case DDP_STORE_OP_QUEUE_POP:
        rc = op_queue_pop(srv, c, k);
        break;
    case DDP_STORE_OP_QUEUE_LEN: {
        entry_t *e = ent_find(srv, k);
        REPLY_FAULT();
        NOMEM_IF(reply_i64(srv, c, e ? (int64_t)e->qlen : 0));
        break;
    }
    case DDP_STORE_OP_LIST_KEYS:
        rc = op_list_keys(srv, c);
        break;
    }
    if (rc == H_OK) {
        ddp__bb_consume(&c->in, r.off);
        if (!c->validated) { /* a legacy client's first request */
            c->validated = 1;
            uv_unlink(srv, c);
        }
    }
    return rc;
}

/* --------------------------------------------------------- connections */

static void conn_kill(ddp_store_server_t *srv, conn_t *c)
{
    if (c->dead)
        return;
    c->dead = 1;
    conn_clear_waits(srv, c);
    watches_drop(srv, c);
    uv_unlink(srv, c);
    ddp_sys_close(srv->sys, c->fd);
    c->fd = -1;
}

/* A protocol violation: log, count, drop this client only. */
static void conn_violation(ddp_store_server_t *srv, conn_t *c)
{
    ddp_warn("store server: dropping client %s: %s", c->name, srv->msg);
    ST_ADD(srv, st_proto, 1);
    conn_kill(srv, c);
}

static void conn_process(ddp_store_server_t *srv, conn_t *c)
{
    while (!c->dead && !c->doom) {
        size_t avail = ddp__bb_pending(&c->in);
        if (avail == 0 || avail < c->need ||
            out_pending(c) >= SRV_OUT_HIGH)
            break;
        int h = handle_one(srv, c);
        if (h == H_MORE)
            break;
        if (h == H_BAD) {
            conn_violation(srv, c);
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
    }
    if (!c->dead)
        ddp__bb_trim(&c->in, SRV_KEEP_BUF);
}

/* Try-once sends until the kernel takes no more. */
static void conn_flush(ddp_store_server_t *srv, conn_t *c)
{
    while (!c->dead && out_pending(c) > 0) {
        if (ddp_fault_hit(DDP_FP_STORE_SERVER_SEND)) {
            ddp_info("store server: dropping client %s: fault point "
                     "store/server/send fired",
                     c->name);
            conn_kill(srv, c);
            return;
        }
        ssize_t w = ddp_sys_send(srv->sys, c->fd, c->out.data + c->out.off,
                                 out_pending(c), 0);
        if (w == -EAGAIN || w == DDP_ETIMEOUT)
            return;
        if (w <= 0) {
            ddp_debug("store server: client %s gone while sending (%s)",
                      c->name, ddp_strerror(w ? (int)w : DDP_EPEER_LOST));
            conn_kill(srv, c);
            return;
        }
        ddp__bb_consume(&c->out, (size_t)w);
    }
    if (!c->dead)
        ddp__bb_trim(&c->out, SRV_KEEP_BUF);
}

/* Flush, and resume parsing requests held back while output was high. */
static void conn_pump(ddp_store_server_t *srv, conn_t *c)
{
    for (int round = 0; round < 64 && !c->dead; round++) {
        if (c->doom) {
            ddp_warn("store server: dropping client %s: out of memory "
                     "queueing a reply",
                     c->name);
            conn_kill(srv, c);
            return;
        }
        conn_flush(srv, c);
        size_t avail = ddp__bb_pending(&c->in);
        if (c->dead || out_pending(c) >= SRV_OUT_HIGH || avail == 0 ||
            avail < c->need)
            return;
        conn_process(srv, c);
    }
}

static void conn_read(ddp_store_server_t *srv, conn_t *c)
{
    size_t budget = SRV_RECV_BUDGET;
    int eof = 0;
    while (!c->dead && budget > 0 && out_pending(c) < SRV_OUT_HIGH) {
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
        if (want < 4096)
            want = 4096;
        if (want > SRV_RECV_BUDGET) /* grow as bytes arrive, not on a claim */
            want = SRV_RECV_BUDGET;
        if (ddp__bb_reserve(&c->in, want, 4096) != 0) {
            srv_fail(srv, "out of memory buffering a request");
            conn_violation(srv, c);
            return;
        }
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
        if (!c->validated && !c->on_uv)
            uv_link(srv, c); /* auto/legacy: the timeout starts now */
        conn_process(srv, c);
        /* A short read emptied the socket: asking again would only cost a
         * syscall that answers EAGAIN (poll reports anything newer). */
        if ((size_t)got < room)
            break;
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

static void conn_free(conn_t *c)
{
    ddp__bb_free(&c->in);
    ddp__bb_free(&c->out);
    free(c);
}

static short conn_events(const conn_t *c)
{
    short ev = 0;
    if (out_pending(c) < SRV_OUT_HIGH)
        ev |= DDP_POLLIN;
    if (out_pending(c) > 0)
        ev |= DDP_POLLOUT;
    return ev;
}

static void conn_on_events(ddp_store_server_t *srv, conn_t *c, short rev)
{
    if (rev & DDP_POLLOUT)
        conn_flush(srv, c);
    if (c->dead)
        return;
    if (rev & (DDP_POLLIN | DDP_POLLHUP | DDP_POLLERR)) {
        if (out_pending(c) < SRV_OUT_HIGH) {
            conn_read(srv, c);
        } else if (rev & (DDP_POLLHUP | DDP_POLLERR)) {
            ddp_debug("store server: client %s hung up with %zu reply bytes "
                      "unsent",
                      c->name, out_pending(c));
            conn_kill(srv, c);
            return;
        }
    }
    /* Replies wait for flush_dirty(), after every ready connection was
     * read: all requests of a pass are taken in before any client is woken
     * by its reply (one send per connection per pass either way). */
    if (!c->dead && !c->dirty)
        conn_pump(srv, c);
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
    ddp_pollfd_t *p = realloc(srv->pfds, (nc + 1) * sizeof *p);
    if (!p)
        return -ENOMEM;
    srv->pfds = p;
    srv->cconns = nc;
    return 0;
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
            if (fd == -EMFILE || fd == -ENFILE || fd == -ENOBUFS ||
                fd == -ENOMEM) {
                ddp_warn("store server: cannot accept more clients (%s); "
                         "%zu connected; raise the open-file limit "
                         "(ulimit -n)",
                         ddp_strerror(fd), srv->nconns);
                srv->accept_paused_until =
                    ddp_sys_deadline_in(srv->sys, SRV_ACCEPT_PAUSE_NS);
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
        if (srv->nconns >= srv->o.max_clients) {
            ddp_warn("store server: refusing client %s: %zu clients connected "
                     "(max_clients)",
                     name, srv->nconns);
            ST_ADD(srv, st_rejected, 1);
            ddp_sys_close(srv->sys, fd);
            continue;
        }
        conn_t *c = grow_conns(srv) == 0 ? calloc(1, sizeof *c) : NULL;
        if (!c) {
            ddp_warn("store server: out of memory accepting %s", name);
            ddp_sys_close(srv->sys, fd);
            return;
        }
        c->fd = fd;
        memcpy(c->name, name, sizeof name);
        /* Current only: silence is a stuck or foreign client. Otherwise it
         * may be a legacy client's callback socket, silent by design. */
        if (srv->o.protocol == DDP_STORE_PROTO_CURRENT)
            uv_link(srv, c);
        c->idx = srv->nconns;
        srv->conns[srv->nconns++] = c;
        srv->pfds[c->idx + 1] =
            (ddp_pollfd_t){.fd = fd, .events = DDP_POLLIN, .revents = 0};
        ddp_debug("store server: client %s connected", name);
    }
}

static void expire_unvalidated(ddp_store_server_t *srv)
{
    int64_t now = ddp_sys_now(srv->sys);
    while (srv->uv_head &&
           now - srv->uv_head->accepted_at >= srv->o.validate_timeout_ns) {
        conn_t *c = srv->uv_head;
        ddp_warn("store server: dropping client %s: no %s within %.1f s of "
                 "%s (not a TCPStore client, or a stuck one)",
                 c->name,
                 srv->o.protocol == DDP_STORE_PROTO_CURRENT
                     ? "VALIDATE"
                     : "complete first request",
                 (double)srv->o.validate_timeout_ns / 1e9,
                 srv->o.protocol == DDP_STORE_PROTO_CURRENT
                     ? "connecting"
                     : "its first byte");
        ST_ADD(srv, st_unval, 1);
        conn_kill(srv, c); /* unlinks it from the list */
    }
}

/* Free dead connections, rebuild the poll set for the next step. */
static void compact(ddp_store_server_t *srv)
{
    for (size_t i = 0; i < srv->nconns;) {
        conn_t *c = srv->conns[i];
        if (c->doom && !c->dead) {
            ddp_warn("store server: dropping client %s: out of memory "
                     "queueing a reply",
                     c->name);
            conn_kill(srv, c);
        }
        if (c->dead) {
            conn_free(c);
            srv->conns[i] = srv->conns[--srv->nconns];
            if (i < srv->nconns)
                srv->conns[i]->idx = i;
            continue;
        }
        srv->pfds[i + 1] = (ddp_pollfd_t){
            .fd = c->fd, .events = conn_events(c), .revents = 0};
        i++;
    }
    srv->pfds[0] = (ddp_pollfd_t){.fd = srv->lfd, .events = DDP_POLLIN};
    ST_SET(srv, st_clients, srv->nconns);
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
    for (size_t i = 0; i < srv->ndirty; i++)
        srv->dirty[i]->dirty = 0;
    srv->ndirty = 0;
}

/* ------------------------------------------------------------- public */

int ddp_store_server_step(ddp_store_server_t *srv, int64_t deadline)
{
    int64_t now = ddp_sys_now(srv->sys);
    int64_t pd = deadline;
    if (srv->uv_head) {
        int64_t exp = srv->uv_head->accepted_at + srv->o.validate_timeout_ns;
        if (exp < pd)
            pd = exp;
    }
    int paused = srv->accept_paused_until > now;
    if (paused && srv->accept_paused_until < pd)
        pd = srv->accept_paused_until;
    srv->pfds[0].events = paused ? 0 : DDP_POLLIN;
    srv->pfds[0].revents = 0;

    int rc = ddp_sys_poll(srv->sys, srv->pfds, (int)srv->nconns + 1, pd);
    if (rc < 0) {
        if (rc != -EINTR && rc != -EAGAIN)
            return ddp_err_wrap("store server on port %u: poll failed",
                                (unsigned)srv->addr.port);
        rc = 0;
    }
    if (rc > 0) {
        size_t n = srv->nconns; /* accepted below: polled next step */
        for (size_t i = 0; i < n; i++) {
            short rev = srv->pfds[i + 1].revents;
            if (rev && !srv->conns[i]->dead)
                conn_on_events(srv, srv->conns[i], rev);
        }
        if (srv->pfds[0].revents & DDP_POLLIN)
            accept_some(srv);
    }
    flush_dirty(srv);
    expire_unvalidated(srv);
    compact(srv);
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

int ddp_store_server_new(ddp_sys_t *sys, const ddp_store_server_opts_t *opts,
                         ddp_store_server_t **out)
{
    *out = NULL;
    ddp_store_server_opts_t o = {0};
    if (opts)
        o = *opts;
    if (!o.max_clients)
        o.max_clients = 65536;
    if (!o.max_keys)
        o.max_keys = DDP_STORE_MAX_KEYS;
    if (!o.max_key_len)
        o.max_key_len = DDP_STORE_MAX_KEY;
    if (!o.max_value_len)
        o.max_value_len = DDP_STORE_MAX_VALUE;
    if (o.validate_timeout_ns <= 0)
        o.validate_timeout_ns = 30 * DDP_NS_PER_S;
    int backlog = o.backlog > 0 ? o.backlog : ddp_sys_somaxconn(sys);
    if (backlog <= 0)
        backlog = 4096;

    ddp_store_server_t *srv = calloc(1, sizeof *srv);
    if (!srv)
        return ddp_err_set(-ENOMEM, "out of memory creating the store server");
    srv->sys = sys;
    srv->o = o;
    srv->lfd = -1;
    srv->max_request = SRV_MIN_MAX_REQUEST;
    if (o.max_value_len < (SIZE_MAX - (1u << 20)) / 4 &&
        4 * o.max_value_len + (1u << 20) > srv->max_request)
        srv->max_request = 4 * o.max_value_len + (1u << 20);
    srv->max_reply = SRV_MIN_MAX_REPLY;
    if (srv->max_request > srv->max_reply)
        srv->max_reply = srv->max_request;
    atomic_init(&srv->stop, 0);
    atomic_init(&srv->st_clients, 0);
    atomic_init(&srv->st_keys, 0);
    atomic_init(&srv->st_requests, 0);
    atomic_init(&srv->st_proto, 0);
    atomic_init(&srv->st_unval, 0);
    atomic_init(&srv->st_rejected, 0);
    atomic_init(&srv->st_legacy, 0);
    if (ddp__kv_init(&srv->keys, SRV_INIT_BUCKETS) != 0 ||
        grow_conns(srv) != 0) {
        ddp_store_server_free(srv);
        return ddp_err_set(-ENOMEM, "out of memory creating the store server");
    }

    char what[DDP_ADDR_STRLEN] = "";
    int fd;
    ddp_addr_t a;
    if (!o.host || !*o.host) {
        /* Like the libuv server: "::" (dual stack), then 0.0.0.0 when IPv6
         * is unavailable. A taken port is not retried on IPv4: the answer
         * would be the same, or worse an IPv4-only listener. */
        ddp_addr_parse("::", o.port, &a);
        fd = listen_on(srv, &a, backlog, what, sizeof what);
        if (fd < 0 && fd != -EADDRINUSE) {
            ddp_info("store server: cannot listen on %s (%s); trying 0.0.0.0",
                     what, ddp_strerror(fd));
            ddp_addr_parse("0.0.0.0", o.port, &a);
            fd = listen_on(srv, &a, backlog, what, sizeof what);
        }
    } else {
        ddp_addr_t as[8];
        int na = ddp_sys_resolve(sys, o.host, o.port, as, 8);
        if (na < 0) {
            ddp_store_server_free(srv);
            return ddp_err_wrap("store server cannot listen on host \"%s\"",
                                o.host);
        }
        fd = -EADDRNOTAVAIL;
        for (int i = 0; i < na; i++) {
            fd = listen_on(srv, &as[i], backlog, what, sizeof what);
            if (fd >= 0 || fd == -EADDRINUSE)
                break;
        }
    }
    if (fd < 0) {
        ddp_store_server_free(srv);
        if (fd == -EADDRINUSE) {
            ddp_err_set(fd, "the store server cannot listen on %s: the port "
                            "is already in use",
                        what);
            ddp_err_addr("%s", what);
            return ddp_err_hint("another job or an old master is using port "
                                "%u; pick another MASTER_PORT (or stop the "
                                "old job)",
                                (unsigned)o.port);
        }
        ddp_err_wrap("store server cannot listen on %s", what);
        return ddp_err_addr("%s", what);
    }
    srv->lfd = fd;
    int rc = ddp_sys_local_addr(sys, fd, &srv->addr);
    if (rc < 0) {
        ddp_store_server_free(srv);
        return rc;
    }
    compact(srv);
    char bound[DDP_ADDR_STRLEN];
    ddp_info("store server listening on %s (backlog %d)",
             ddp_addr_format(&srv->addr, bound, sizeof bound), backlog);
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
    out->clients = atomic_load_explicit(&s->st_clients, memory_order_relaxed);
    out->keys = atomic_load_explicit(&s->st_keys, memory_order_relaxed);
    out->requests =
        atomic_load_explicit(&s->st_requests, memory_order_relaxed);
    out->protocol_errors =
        atomic_load_explicit(&s->st_proto, memory_order_relaxed);
    out->unvalidated_dropped =
        atomic_load_explicit(&s->st_unval, memory_order_relaxed);
    out->rejected_clients =
        atomic_load_explicit(&s->st_rejected, memory_order_relaxed);
    out->legacy_connections =
        atomic_load_explicit(&s->st_legacy, memory_order_relaxed);
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
    for (size_t i = 0; i < srv->nconns; i++) {
        conn_kill(srv, srv->conns[i]);
        conn_free(srv->conns[i]);
    }
    ddp__kv_free(&srv->keys, ent_fini);
    if (srv->lfd >= 0)
        ddp_sys_close(srv->sys, srv->lfd);
    free(srv->conns);
    free(srv->pfds);
    free(srv->dirty);
    free(srv->scratch);
    for (size_t i = 0; i < srv->nwatches; i++)
        free(srv->watches[i].key);
    free(srv->watches);
    free(srv);
}
