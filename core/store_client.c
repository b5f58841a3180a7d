/* core/store_client.c — the TCPStore client, in both protocol generations
 * (byte layouts, the version matrix and the retry schedule in
 * docs/store-protocol.md).
 *
 * Generations: "current" (VALIDATE + PING handshake, the PyTorch >= 2.2
 * table) and "legacy" (no handshake, the PyTorch 1.9 - 2.0 table torch 1.13
 * speaks). With protocol auto the client starts current; a server that
 * resets the connection on VALIDATE/PING gets one probe on a fresh
 * connection: legacy CHECK of no keys followed by a PING (a code no legacy
 * table has). A legacy-only server (torch 1.13) answers the CHECK and
 * drops the connection at the PING: the client speaks legacy from then on
 * and logs it once. A server that answers both (ours) or neither (a
 * current PyTorch server waits for more bytes) sends it back to current:
 * that reset was something else (a backlog overflow, a fault). In legacy:
 *  - get is WAIT + GET (a legacy server closes the connection on a GET of
 *    a missing key), multi_get is WAIT + GETs, multi_set is SETs;
 *  - a WAIT past its deadline cannot be cancelled (no CANCEL_WAIT): the
 *    connection is replaced by a fresh one, which drops the wait;
 *  - ping is a GETNUMKEYS round trip;
 *  - APPEND, the queues and LIST_KEYS go out with their current codes,
 *    which ddpsim's server serves on legacy connections and a PyTorch
 *    legacy server rejects by closing the connection (the error says so).
 *
 * What it does the way PyTorch's TCPStore client does, and why:
 *  - every user key goes out as "/" + key (TCPStore's keyPrefix_), so our
 *    ranks and PyTorch's see the same keys on either side's server; LIST_KEYS
 *    keeps only "/"-keys and strips the "/" again;
 *  - get and multi_get are WAIT then GET, so a get blocks until the key
 *    (get first tries CHECK + GET in one round trip; see c_get)
 *    exists instead of reading "" from the server;
 *  - a WAIT that outlives the deadline is cancelled with CANCEL_WAIT and the
 *    reply stream resynchronised (a STOP_WAITING may have crossed the cancel
 *    on the wire; the WAIT_CANCELED follows it), so the connection stays
 *    usable after a timeout;
 *  - connect + VALIDATE + PING are retried together until the connect
 *    deadline with jittered exponential backoff: a listen-backlog overflow at
 *    a few thousand ranks shows up as a reset *after* connect succeeded.
 * Where we go further: every op has a deadline (TCPStore's non-wait ops block
 * without one), and an op that fails half-way closes the connection — its
 * reply stream is no longer in step — so later ops fail at once, naming what
 * broke it, instead of reading someone else's reply.
 *
 * One request is in flight per connection: each op sends its request and
 * reads its whole reply before returning. Replies are read through a small
 * buffer (one recv per reply, not one per field), and the first read after a
 * request waits for readability first instead of trying a recv that would
 * find nothing: a GET of an existing key costs send + poll + recv. A client is used by one thread at a
 * time (a rank owns its client); there is no lock, because in the simulator
 * a thread parked in a sys call while holding a mutex would stall every rank
 * that touches it.
 *
 * libfiu fault points (docs/fault-points.md):
 *   store/client/connect   a connect attempt fails with -failinfo
 *                          (default ECONNREFUSED), then is retried
 *   store/client/validate  the VALIDATE/PING handshake fails with -failinfo
 *                          (default ECONNRESET), then is retried
 *   store/client/wait      a WAIT behaves as if its deadline had passed at
 *                          once (exercises CANCEL_WAIT and its race)
 *   store/client/send      sending a request fails with -failinfo (default
 *                          ECONNRESET): the connection is lost
 *   store/client/recv      reading a reply fails with -failinfo (default
 *                          ECONNRESET): the connection is lost
 */
#include "ddp/store.h"

#include <errno.h>
#include <fiu.h>
#include <inttypes.h>
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
#include "store_priv.h"

#define LEGACY DDP_STORE_PROTO_LEGACY
#define CURRENT DDP_STORE_PROTO_CURRENT

/* After a WAIT timed out, how long the server gets to answer CANCEL_WAIT. */
#define CANCEL_GRACE_NS (5 * DDP_NS_PER_S)
/* Largest single bytes value we accept in a reply (the server's own reply
 * cap): a corrupt length must not become a huge malloc. */
#define MAX_REPLY_BYTES ((uint64_t)256 << 20)
/* Largest LIST_KEYS count we accept. */
#define MAX_LIST_KEYS ((int64_t)16 << 20)
/* How long the legacy probe waits for its answer (a current PyTorch server
 * never answers it: it waits for more bytes). */
#define PROBE_GRACE_NS (2 * DDP_NS_PER_S)
/* Pause between a QUEUE_POP that lost the race and the next WAIT. */
#define POP_RETRY_NS DDP_NS_PER_MS
/* Replies are read through a buffer: one recv takes a whole small reply (or
 * CHECK's and GET's together) instead of one per field. It starts at
 * RX_CHUNK, which holds every reply of a rendezvous, and grows to take a
 * known remainder in one recv, up to RX_BIG (a simulated world has one
 * client per rank: 4 KiB each was a quarter of a rank's memory). */
#define RX_CHUNK ((size_t)512)
#define RX_BIG ((size_t)4096)
/* A remainder at least this large is read straight into its destination. */
#define RX_DIRECT ((size_t)16 << 10)

/* A master's host name, at most (a DNS name has 253 characters). */
#define HOST_MAX 255

typedef struct client {
    ddp_store_t st; /* first: the store handle is the client */
    const char *addr; /* "host:port" / "[v6]:port", for every message:
                         behind host[] in the same allocation */
    uint16_t port;
    int fd;         /* -1 once the connection is lost */
    char *lost;     /* why it was lost, for the ops that come after (NULL:
                       not lost, or no memory to say why) */
    int attempts;
    int want;  /* opts.protocol */
    int proto; /* LEGACY or CURRENT: what this connection speaks */
    ddp_rng_t rng;
    ddp__bb_t req; /* the request being built (off stays 0) */
    ddp__bb_t in;  /* reply bytes read ahead, [off, len) not yet used */
    int fresh;     /* a request went out and nothing was read since */
    int oom;
    int64_t op_start; /* when the request being made began (its timeout) */
    char *token;   /* opts.token (ddpsim's AUTH frame), or NULL */
    int auth_lost; /* a server dropped the connection at the token */
    char *check_key; /* opts.check_key, or NULL */
    int checked;     /* what the connect's CHECK of it found; -1: not asked */
    char host[];     /* then addr (a simulated world has a client per rank:
                        fixed arrays were 876 bytes of each) */
} client_t;

static const ddp_store_ops_t client_ops;

static client_t *C(ddp_store_t *st) { return (client_t *)st; }


/* ------------------------------------------------------ request encoding */

static void put(client_t *c, const void *p, size_t n)
{
    if (c->oom)
        return;
    if (ddp__bb_reserve(&c->req, n, 256) != 0) {
        c->oom = 1;
        return;
    }
    ddp__bb_put(&c->req, p, n);
}

/* Integers go out raw in host order: the protocol is little-endian hosts. */
static void put_u64(client_t *c, uint64_t v) { put(c, &v, 8); }
static void put_u32(client_t *c, uint32_t v) { put(c, &v, 4); }

static void put_bytes(client_t *c, const void *p, size_t n)
{
    put_u64(c, n);
    put(c, p, n);
}

/* A user key: "/" + key, as TCPStore's keyPrefix_. */
static void put_key(client_t *c, const char *key)
{
    size_t n = strlen(key);
    put_u64(c, n + 1);
    put(c, "/", 1);
    put(c, key, n);
}

static void put_raw_key(client_t *c, const char *key)
{
    put_bytes(c, key, strlen(key));
}

static void put_keys(client_t *c, const char *const *keys, size_t n, int raw)
{
    put_u64(c, n);
    for (size_t i = 0; i < n; i++)
        raw ? put_raw_key(c, keys[i]) : put_key(c, keys[i]);
}

/* The wire code of op in the generation c speaks (legacy: the legacy
 * table's, or the current code for the ops it lacks). */
static uint8_t wire_op(const client_t *c, int op)
{
    int w = c->proto == LEGACY ? ddp__store_op_to_legacy(op) : op;
    return (uint8_t)(w < 0 ? op : w);
}

/* Appends one more request's opcode (requests sent in one write). */
static void put_op(client_t *c, int op)
{
    uint8_t b = wire_op(c, op);
    put(c, &b, 1);
}

static void begin(client_t *c, int op)
{
    c->op_start = ddp_sys_now(c->st.sys);
    c->req.len = 0;
    c->oom = 0;
    put_op(c, op);
}

/* ------------------------------------------------------- failure paths */

/* The stream is out of step (or gone): close it and remember why. */
static void poison(client_t *c, const char *why)
{
    if (c->fd >= 0) {
        ddp_sys_close(c->st.sys, c->fd);
        c->fd = -1;
    }
    c->in.off = c->in.len = 0; /* read-ahead of a stream that is gone */
    c->fresh = 0;
    free(c->lost);
    c->lost = strdup(why);
}

/* An I/O failure during op: timeout or lost connection, connection closed. */
static int io_fail(client_t *c, int rc, int op, const char *doing)
{
    char cause[200];
    snprintf(cause, sizeof cause, "%s", ddp_err_ctx()->what);
    if (rc == DDP_ETIMEOUT || rc == -EAGAIN) {
        ddp_err_set(DDP_ETIMEOUT, "timed out %s %s (store at %s)", doing,
                    ddp_store_op_name(op), c->addr);
        ddp_err_waited(ddp_sys_now(c->st.sys) - c->op_start);
        if (c->proto == LEGACY)
            ddp_err_hint("this client speaks the legacy TCPStore protocol "
                         "(PyTorch 1.9 - 2.0), which a current master "
                         "(PyTorch >= 2.2) never answers: use protocol auto "
                         "or current");
    } else {
        ddp_err_set(DDP_EPEER_LOST,
                    "lost the connection to the store at %s while %s %s (%s: "
                    "%s)",
                    c->addr, doing, ddp_store_op_name(op), ddp_err_name(rc),
                    cause[0] ? cause : ddp_strerror(rc));
        if (c->proto == LEGACY && op >= DDP_STORE_OP_APPEND)
            ddp_err_hint("the legacy TCPStore protocol (PyTorch 1.9 - 2.0) "
                         "has no %s: a PyTorch master of that generation "
                         "closes the connection on it (ddpsim's server "
                         "answers it)",
                         ddp_store_op_name(op));
        else if (c->proto == LEGACY)
            ddp_err_hint("is the master (rank 0) still alive? (this client "
                         "speaks the legacy protocol, which a master that "
                         "requires VALIDATE drops: use protocol auto or "
                         "current)");
        else
            ddp_err_hint("is the master (rank 0) still alive?");
    }
    poison(c, ddp_err_ctx()->what);
    return ddp_err_addr("%s", c->addr);
}

static int proto_fail(client_t *c, int op, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int proto_fail(client_t *c, int op, const char *fmt, ...)
{
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    ddp_err_set(DDP_EPROTOCOL,
                "the store at %s sent a bad reply to %s: %s", c->addr,
                ddp_store_op_name(op), what);
    ddp_err_hint(c->proto == LEGACY
                     ? "is a TCPStore-protocol server listening there? (this "
                       "client speaks the legacy protocol of PyTorch 1.9 - "
                       "2.0)"
                     : "is a TCPStore-protocol server listening there? (this "
                       "client speaks the current protocol of PyTorch >= "
                       "2.2; a PyTorch 1.9 - 2.0 master needs protocol "
                       "legacy or auto)");
    poison(c, ddp_err_ctx()->what);
    return ddp_err_addr("%s", c->addr);
}

static int check_alive(client_t *c)
{
    if (c->fd >= 0)
        return 0;
    ddp_err_set(DDP_EPEER_LOST, "the connection to the store at %s is gone "
                                "(earlier: %s)",
                c->addr, c->lost ? c->lost : "out of memory to say why");
    return ddp_err_addr("%s", c->addr);
}

/* ----------------------------------------------------------- transport */

static int send_req(client_t *c, int op, int64_t deadline)
{
    int rc = check_alive(c);
    if (rc)
        return rc;
    if (c->oom)
        return ddp_err_set(-ENOMEM, "out of memory building a %zu-byte %s "
                                    "request",
                           c->req.len, ddp_store_op_name(op));
    if ((rc = ddp_fault_fire(DDP_FP_STORE_CLIENT_SEND)) == 0)
        rc = ddp_sys_send_all(c->st.sys, c->fd, c->req.data, c->req.len,
                              deadline);
    if (rc == 0)
        c->fresh = 1;
    return rc ? io_fail(c, rc, op, "sending") : 0;
}

/* n reply bytes into buf: first what an earlier recv read ahead, then from
 * the socket. Small reads go through c->in, so one recv takes whatever the
 * kernel holds (a whole small reply, or the replies to CHECK and GET sent
 * together); a large remainder is read straight into buf. Only replies to
 * requests already sent can be read ahead (one request in flight), so
 * nothing here outlives the op but the rest of its own replies.
 *
 * The first read after a request waits for readability before it receives:
 * the reply is hardly ever there yet, and a try-once recv that finds nothing
 * is a syscall for nothing (the wait is only a hint: whatever it returns, the
 * recv below runs with the caller's deadline and reports any failure).
 * 0, an error from ddp_sys_recv, or DDP_EPEER_LOST at EOF. */
static int rx(client_t *c, void *buf, size_t n, int64_t deadline)
{
    ddp_sys_t *sys = c->st.sys;
    uint8_t *p = buf;
    while (n > 0) {
        size_t have = ddp__bb_pending(&c->in);
        if (have > 0) {
            size_t k = have < n ? have : n;
            memcpy(p, c->in.data + c->in.off, k);
            ddp__bb_consume(&c->in, k);
            p += k;
            n -= k;
            continue;
        }
        if (c->fresh) {
            c->fresh = 0;
            ddp_pollfd_t pf = {.fd = c->fd, .events = DDP_POLLIN};
            (void)ddp_sys_poll(sys, &pf, 1, deadline);
        }
        uint8_t *dst = p;
        size_t room = n;
        size_t want = n < RX_CHUNK ? RX_CHUNK : n > RX_BIG ? RX_BIG : n;
        if (n < RX_DIRECT && ddp__bb_reserve(&c->in, want, RX_CHUNK) == 0) {
            dst = c->in.data + c->in.len;
            room = c->in.cap - c->in.len;
        }
        ssize_t r = ddp_sys_recv(sys, c->fd, dst, room, deadline);
        if (r < 0)
            return (int)r;
        if (r == 0)
            return ddp_err_set(DDP_EPEER_LOST,
                               "connection closed by peer with %zu bytes "
                               "still expected",
                               n);
        if (dst == p) {
            p += r;
            n -= (size_t)r;
        } else {
            c->in.len += (size_t)r;
        }
    }
    return 0;
}

static int recv_exact(client_t *c, void *buf, size_t n, int op,
                      int64_t deadline)
{
    int rc = check_alive(c);
    if (rc)
        return rc;
    if ((rc = ddp_fault_fire(DDP_FP_STORE_CLIENT_RECV)) == 0)
        rc = rx(c, buf, n, deadline);
    return rc ? io_fail(c, rc, op, "reading the reply to") : 0;
}

static int rd_u8(client_t *c, uint8_t *v, int op, int64_t deadline)
{
    return recv_exact(c, v, 1, op, deadline);
}

static int rd_i64(client_t *c, int64_t *v, int op, int64_t deadline)
{
    return recv_exact(c, v, 8, op, deadline);
}

/* A CHECK's reply: 1 READY, 0 NOT_READY, < 0 a failed read or another
 * code (a protocol failure). */
static int rd_ready(client_t *c, int64_t deadline)
{
    uint8_t r = 0;
    int rc = rd_u8(c, &r, DDP_STORE_OP_CHECK, deadline);
    if (rc)
        return rc;
    if (r != DDP_STORE_READY && r != DDP_STORE_NOT_READY)
        return proto_fail(c, DDP_STORE_OP_CHECK,
                          "reply code %u instead of READY/NOT_READY", r);
    return r == DDP_STORE_READY;
}

static int rd_bytes(client_t *c, ddp_buf_t *out, int op, int64_t deadline)
{
    uint64_t n = 0;
    int rc = recv_exact(c, &n, 8, op, deadline);
    if (rc)
        return rc;
    if (n > MAX_REPLY_BYTES)
        return proto_fail(c, op, "a value of %" PRIu64 " bytes (more than "
                                 "%" PRIu64 ")",
                          n, MAX_REPLY_BYTES);
    /* One spare byte so a value can always be read as a C string. */
    uint8_t *p = malloc((size_t)n + 1);
    if (!p) {
        poison(c, "out of memory for a reply");
        return ddp_err_set(-ENOMEM, "out of memory for a %" PRIu64
                                    "-byte %s reply",
                           n, ddp_store_op_name(op));
    }
    if ((rc = recv_exact(c, p, (size_t)n, op, deadline)) != 0) {
        free(p);
        return rc;
    }
    p[n] = '\0';
    out->data = p;
    out->len = (size_t)n;
    return 0;
}

/* -------------------------------------------------------------- WAIT */

static int c_check(ddp_store_t *st, const char *const *keys, size_t n,
                   int64_t deadline);

/* After a timed-out wait: is key set? One CHECK, on a connection the
 * cancel left in step, within the cancel's grace (counted from the first
 * key asked), so that the error names what is still missing. */
typedef struct probe {
    client_t *c;
    int64_t deadline;
} probe_t;

static int probe_set(void *arg, const char *key)
{
    probe_t *p = arg;
    if (ddp_sys_now(p->c->st.sys) >= p->deadline)
        return -1;
    return c_check(&p->c->st, &key, 1, p->deadline);
}

/* Why a wait ended without STOP_WAITING: the error to return. */
static int wait_timeout(client_t *c, const char *const *keys, size_t n,
                        int64_t start, const char *cancel_err)
{
    char ks[320];
    int64_t ended = ddp_sys_now(c->st.sys);
    probe_t pr = {c, ddp_sys_deadline_in(c->st.sys, CANCEL_GRACE_NS)};
    if (cancel_err)
        ddp__store_fmt_keys(keys, n, ks, sizeof ks); /* out of step: ask nothing */
    else
        ddp__store_fmt_missing(keys, n, probe_set, &pr, ks, sizeof ks);
    ddp_err_set(DDP_ETIMEOUT, "Timed out after %.1f s waiting for keys %s on "
                              "%s%s%s",
                ddp__store_secs(start, ended), ks, c->addr,
                cancel_err ? "; then lost the connection cancelling the "
                             "wait: "
                           : "",
                cancel_err ? cancel_err : "");
    /* legacy asked for: a current master reads legacy frames as junk */
    ddp_err_hint("the rank that sets these keys may have failed, not "
                 "started, or use another MASTER_ADDR/MASTER_PORT%s",
                 c->want == LEGACY ? "; or a current master (PyTorch >= 2.2) "
                                     "ignores the legacy protocol asked for: "
                                     "use protocol auto or current"
                                   : "");
    ddp_err_waited(ended - start);
    return ddp_err_addr("%s", c->addr);
}

static int reopen(client_t *c);

/* CANCEL_WAIT, then read up to the WAIT_CANCELED: 0 resynchronised. */
static int cancel_wait(client_t *c)
{
    int64_t dl = ddp_sys_deadline_in(c->st.sys, CANCEL_GRACE_NS);
    begin(c, DDP_STORE_OP_CANCEL_WAIT);
    int rc = send_req(c, DDP_STORE_OP_CANCEL_WAIT, dl);
    uint8_t r = 0;
    if (rc == 0)
        rc = rd_u8(c, &r, DDP_STORE_OP_CANCEL_WAIT, dl);
    /* The server answered the WAIT before it saw the cancel: drop that
     * STOP_WAITING, the WAIT_CANCELED comes next. */
    if (rc == 0 && r == DDP_STORE_STOP_WAITING)
        rc = rd_u8(c, &r, DDP_STORE_OP_CANCEL_WAIT, dl);
    if (rc == 0 && r != DDP_STORE_WAIT_CANCELED)
        rc = proto_fail(c, DDP_STORE_OP_CANCEL_WAIT,
                        "reply code %u instead of WAIT_CANCELED", r);
    return rc;
}

/* A WAIT whose connection the server closed: a dead master, or a limit
 * of the server's that no reply can name (TCPStore has no error reply). */
static int wait_dropped_hint(size_t n)
{
    return ddp_err_hint("is the master (rank 0) still alive? A ddpsim store also drops a "
                        "WAIT on more keys nobody has set than its max_wait_keys (by default "
                        "its max_keys, %d, or 8 x its world; torch 1.13's has no limit): "
                        "this WAIT named %zu key%s",
                        DDP_STORE_MAX_KEYS, n, n == 1 ? "" : "s");
}

static int do_wait(client_t *c, const char *const *keys, size_t n, int raw,
                   int64_t deadline)
{
    int64_t start = ddp_sys_now(c->st.sys);
    begin(c, DDP_STORE_OP_WAIT);
    put_keys(c, keys, n, raw);
    int rc = send_req(c, DDP_STORE_OP_WAIT, deadline);
    if (rc)
        return rc;
    int r = DDP_ETIMEOUT;
    uint8_t b = 0;
    if (!ddp_fault_hit(DDP_FP_STORE_CLIENT_WAIT)) {
        if ((rc = ddp_fault_fire(DDP_FP_STORE_CLIENT_RECV)) != 0)
            return io_fail(c, rc, DDP_STORE_OP_WAIT, "waiting for");
        /* One byte with the caller's deadline: this is the only read that
         * may legitimately outlive it, and then we cancel. */
        r = rx(c, &b, 1, deadline);
    }
    if (r == 0) {
        if (b != DDP_STORE_STOP_WAITING)
            return proto_fail(c, DDP_STORE_OP_WAIT,
                              "reply code %u instead of STOP_WAITING", b);
        return 0;
    }
    if (r == DDP_EPEER_LOST) {
        ddp_err_set(DDP_EPEER_LOST, "connection closed by the server");
        io_fail(c, DDP_EPEER_LOST, DDP_STORE_OP_WAIT, "waiting for");
        return wait_dropped_hint(n);
    }
    if (r != DDP_ETIMEOUT && r != -EAGAIN)
        return io_fail(c, r, DDP_STORE_OP_WAIT, "waiting for");
    char cerr[200] = "";
    /* Legacy has no CANCEL_WAIT: a fresh connection drops the wait. */
    if ((c->proto == LEGACY ? reopen(c) : cancel_wait(c)) != 0)
        snprintf(cerr, sizeof cerr, "%s", ddp_err_ctx()->what);
    return wait_timeout(c, keys, n, start, cerr[0] ? cerr : NULL);
}

/* ------------------------------------------------------------- the ops */

/* SET, APPEND, QUEUE_PUSH: key + value, no reply. */
static int key_value_req(ddp_store_t *st, int op, const char *key,
                         const void *val, size_t n, int64_t deadline)
{
    client_t *c = C(st);
    begin(c, op);
    put_key(c, key);
    put_bytes(c, val, n);
    return send_req(c, op, deadline);
}

/* GETNUMKEYS, DELETE_KEY, QUEUE_LEN, ADD: optional key (+ delta) -> i64. */
static int i64_req(client_t *c, int op, const char *key, int raw,
                   const int64_t *delta, int64_t *out, int64_t deadline)
{
    begin(c, op);
    if (key)
        raw ? put_raw_key(c, key) : put_key(c, key);
    if (delta)
        put_u64(c, (uint64_t)*delta);
    int rc = send_req(c, op, deadline);
    return rc ? rc : rd_i64(c, out, op, deadline);
}

/* GET, COMPARE_SET: request already built -> bytes. */
static int bytes_req(client_t *c, int op, ddp_buf_t *out, int64_t deadline)
{
    int rc = send_req(c, op, deadline);
    return rc ? rc : rd_bytes(c, out, op, deadline);
}

static int c_set(ddp_store_t *st, const char *key, const void *val, size_t n,
                 int64_t deadline)
{
    return key_value_req(st, DDP_STORE_OP_SET, key, val, n, deadline);
}

static int c_append(ddp_store_t *st, const char *key, const void *val,
                    size_t n, int64_t deadline)
{
    return key_value_req(st, DDP_STORE_OP_APPEND, key, val, n, deadline);
}

static int c_queue_push(ddp_store_t *st, const char *key, const void *val,
                        size_t n, int64_t deadline)
{
    return key_value_req(st, DDP_STORE_OP_QUEUE_PUSH, key, val, n, deadline);
}

static int c_compare_set(ddp_store_t *st, const char *key,
                         const void *expected, size_t en, const void *desired,
                         size_t dn, ddp_buf_t *out, int64_t deadline)
{
    client_t *c = C(st);
    begin(c, DDP_STORE_OP_COMPARE_SET);
    put_key(c, key);
    put_bytes(c, expected, en);
    put_bytes(c, desired, dn);
    return bytes_req(c, DDP_STORE_OP_COMPARE_SET, out, deadline);
}

/* get = WAIT + GET, two round trips (TCPStore's client). When the key
 * already exists one round trip does: CHECK and GET go out in one write —
 * neither blocks on any TCPStore server, so their replies come back in
 * order — and a READY means the GET reply holds the value. NOT_READY: the
 * empty GET reply is dropped and the blocking path follows. */
static int c_get(ddp_store_t *st, const char *key, ddp_buf_t *out,
                 int64_t deadline)
{
    client_t *c = C(st);
    if (c->proto == LEGACY) /* a legacy GET of a missing key kills the link */
        goto wait_then_get;
    begin(c, DDP_STORE_OP_CHECK);
    put_keys(c, &key, 1, 0);
    put_op(c, DDP_STORE_OP_GET);
    put_key(c, key);
    ddp_buf_t v = {0};
    int rc = send_req(c, DDP_STORE_OP_CHECK, deadline);
    if (rc)
        return rc;
    int ready = rd_ready(c, deadline);
    if (ready < 0)
        return ready;
    if ((rc = rd_bytes(c, &v, DDP_STORE_OP_GET, deadline)) != 0)
        return rc;
    if (ready) {
        *out = v;
        return 0;
    }
    ddp_buf_free(&v);
wait_then_get:
    rc = do_wait(c, &key, 1, 0, deadline);
    if (rc)
        return rc;
    begin(c, DDP_STORE_OP_GET);
    put_key(c, key);
    return bytes_req(c, DDP_STORE_OP_GET, out, deadline);
}

static int c_add(ddp_store_t *st, const char *key, int64_t delta, int64_t *out,
                 int64_t deadline)
{
    return i64_req(C(st), DDP_STORE_OP_ADD, key, 0, &delta, out, deadline);
}

int ddp__store_client_add_raw(ddp_store_t *st, const char *key, int64_t delta,
                              int64_t *out, int64_t deadline)
{
    return i64_req(C(st), DDP_STORE_OP_ADD, key, 1, &delta, out, deadline);
}

static int c_check(ddp_store_t *st, const char *const *keys, size_t n,
                   int64_t deadline)
{
    client_t *c = C(st);
    begin(c, DDP_STORE_OP_CHECK);
    put_keys(c, keys, n, 0);
    int rc = send_req(c, DDP_STORE_OP_CHECK, deadline);
    return rc ? rc : rd_ready(c, deadline);
}

static int c_wait(ddp_store_t *st, const char *const *keys, size_t n,
                  int64_t deadline)
{
    return do_wait(C(st), keys, n, 0, deadline);
}

static int c_num_keys(ddp_store_t *st, int64_t *out, int64_t deadline)
{
    return i64_req(C(st), DDP_STORE_OP_GETNUMKEYS, NULL, 0, NULL, out,
                   deadline);
}

static int c_delete_key(ddp_store_t *st, const char *key, int64_t deadline)
{
    int64_t n = 0;
    int rc = i64_req(C(st), DDP_STORE_OP_DELETE_KEY, key, 0, NULL, &n,
                     deadline);
    if (rc)
        return rc;
    if (n != 0 && n != 1)
        return proto_fail(C(st), DDP_STORE_OP_DELETE_KEY,
                          "%" PRId64 " keys deleted", n);
    return (int)n;
}

static int c_multi_get(ddp_store_t *st, const char *const *keys, size_t n,
                       ddp_buf_t *out, int64_t deadline)
{
    client_t *c = C(st);
    int rc = do_wait(c, keys, n, 0, deadline);
    if (rc)
        return rc;
    int op = DDP_STORE_OP_MULTI_GET;
    if (c->proto == LEGACY) { /* no MULTI_GET: the GETs in one write */
        op = DDP_STORE_OP_GET;
        c->req.len = 0;
        c->oom = 0;
        for (size_t i = 0; i < n; i++) {
            put_op(c, op);
            put_key(c, keys[i]);
        }
    } else {
        begin(c, op);
        put_keys(c, keys, n, 0);
    }
    if ((rc = send_req(c, op, deadline)) != 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        if ((rc = rd_bytes(c, &out[i], op, deadline))) {
            for (size_t j = 0; j < i; j++)
                ddp_buf_free(&out[j]);
            return rc;
        }
    }
    return 0;
}

static int c_multi_set(ddp_store_t *st, const char *const *keys,
                       const ddp_buf_t *vals, size_t n, int64_t deadline)
{
    client_t *c = C(st);
    int legacy = c->proto == LEGACY; /* no MULTI_SET: SETs in one write */
    c->req.len = 0;
    c->oom = 0;
    if (!legacy) {
        put_op(c, DDP_STORE_OP_MULTI_SET);
        put_u64(c, n);
    }
    for (size_t i = 0; i < n; i++) {
        if (legacy)
            put_op(c, DDP_STORE_OP_SET);
        put_key(c, keys[i]);
        put_bytes(c, vals[i].data, vals[i].len);
    }
    if (legacy && n == 0)
        return 0;
    return send_req(c, legacy ? DDP_STORE_OP_SET : DDP_STORE_OP_MULTI_SET,
                    deadline);
}

static int c_queue_pop(ddp_store_t *st, const char *key, ddp_buf_t *out,
                       int64_t deadline)
{
    client_t *c = C(st);
    int64_t start = ddp_sys_now(c->st.sys);
    for (;;) {
        /* Blocking pop as TCPStore does it: WAIT for the key, then pop. */
        int rc = do_wait(c, &key, 1, 0, deadline);
        if (rc)
            return rc;
        int64_t len = 0;
        begin(c, DDP_STORE_OP_QUEUE_POP);
        put_key(c, key);
        if ((rc = send_req(c, DDP_STORE_OP_QUEUE_POP, deadline)) != 0 ||
            (rc = rd_i64(c, &len, DDP_STORE_OP_QUEUE_POP, deadline)) != 0)
            return rc;
        if (len < 0)
            return proto_fail(c, DDP_STORE_OP_QUEUE_POP,
                              "queue length %" PRId64, len);
        if (len > 0)
            return rd_bytes(c, out, DDP_STORE_OP_QUEUE_POP, deadline);
        /* Another popper won the element, or the key holds a plain value
         * (WAIT counts it as present): try again until the deadline. */
        int64_t now = ddp_sys_now(c->st.sys);
        if (now >= deadline) {
            ddp_err_set(DDP_ETIMEOUT, "Timed out after %.1f s popping from "
                                      "queue \"%.64s\" on %s: it stayed "
                                      "empty",
                        ddp__store_secs(start, now), key, c->addr);
            ddp_err_waited(now - start);
            return ddp_err_addr("%s", c->addr);
        }
        int64_t wake = now + POP_RETRY_NS;
        if ((rc = ddp_sys_sleep_until(c->st.sys,
                                      wake < deadline ? wake : deadline)))
            return rc;
    }
}

static int c_queue_len(ddp_store_t *st, const char *key, int64_t *out,
                       int64_t deadline)
{
    return i64_req(C(st), DDP_STORE_OP_QUEUE_LEN, key, 0, NULL, out,
                   deadline);
}

static int c_list_keys(ddp_store_t *st, char ***keys, size_t *nkeys,
                       int64_t deadline)
{
    client_t *c = C(st);
    int64_t n = 0;
    int rc = i64_req(c, DDP_STORE_OP_LIST_KEYS, NULL, 0, NULL, &n, deadline);
    if (rc)
        return rc;
    if (n < 0 || n > MAX_LIST_KEYS)
        return proto_fail(c, DDP_STORE_OP_LIST_KEYS, "a count of %" PRId64,
                          n);
    char **out = calloc((size_t)n + 1, sizeof *out);
    if (!out) {
        poison(c, "out of memory for LIST_KEYS");
        return ddp_err_set(-ENOMEM, "out of memory listing %" PRId64 " keys",
                           n);
    }
    size_t kept = 0;
    for (int64_t i = 0; i < n; i++) {
        ddp_buf_t b = {0};
        if ((rc = rd_bytes(c, &b, DDP_STORE_OP_LIST_KEYS, deadline)) != 0) {
            ddp_store_free_keys(out, kept);
            return rc;
        }
        /* Only "/"-keys are user keys (others: "init/" and the like). */
        if (b.len >= 1 && b.data[0] == '/') {
            memmove(b.data, b.data + 1, b.len); /* with the NUL */
            out[kept++] = (char *)b.data;
        } else {
            ddp_buf_free(&b);
        }
    }
    *keys = out;
    *nkeys = kept;
    return 0;
}

/* PING round trip on fd: the request is appended to what c->req holds
 * (with_req: the handshake's VALIDATE and, when c->check_key is set, a
 * CHECK of it after the PING: all in one send, one round trip). */
static int ping_req_with(client_t *c, int with_req, int64_t deadline)
{
    uint32_t nonce = (uint32_t)ddp_rng_next(&c->rng), echo = 0;
    if (with_req)
        put_op(c, DDP_STORE_OP_PING);
    else
        begin(c, DDP_STORE_OP_PING);
    put_u32(c, nonce);
    const char *key = with_req ? c->check_key : NULL;
    if (key) {
        put_op(c, DDP_STORE_OP_CHECK);
        put_keys(c, &key, 1, 0);
    }
    int rc = send_req(c, DDP_STORE_OP_PING, deadline);
    if (rc == 0)
        rc = recv_exact(c, &echo, 4, DDP_STORE_OP_PING, deadline);
    if (rc == 0 && echo != nonce)
        rc = proto_fail(c, DDP_STORE_OP_PING,
                        "nonce 0x%08" PRIx32 " echoed as 0x%08" PRIx32, nonce,
                        echo);
    if (rc == 0 && key) {
        int ready = rd_ready(c, deadline);
        if (ready < 0)
            return ready;
        c->checked = ready;
    }
    return rc;
}

static int ping_req(client_t *c, int64_t deadline)
{
    return ping_req_with(c, 0, deadline);
}

static int c_ping(ddp_store_t *st, int64_t deadline)
{
    client_t *c = C(st);
    int64_t n = 0; /* legacy: no PING; GETNUMKEYS is a round trip too */
    return c->proto == LEGACY
               ? i64_req(c, DDP_STORE_OP_GETNUMKEYS, NULL, 0, NULL, &n,
                         deadline)
               : ping_req(c, deadline);
}

static void c_free(ddp_store_t *st)
{
    client_t *c = C(st);
    if (c->fd >= 0)
        ddp_sys_close(c->st.sys, c->fd);
    ddp__bb_free(&c->req);
    ddp__bb_free(&c->in);
    free(c->token);
    free(c->check_key);
    free(c->lost);
    free(c);
}

static const ddp_store_ops_t client_ops = {
    .name = "tcp",
    .set = c_set,
    .compare_set = c_compare_set,
    .get = c_get,
    .add = c_add,
    .check = c_check,
    .wait = c_wait,
    .num_keys = c_num_keys,
    .delete_key = c_delete_key,
    .append = c_append,
    .multi_get = c_multi_get,
    .multi_set = c_multi_set,
    .queue_push = c_queue_push,
    .queue_pop = c_queue_pop,
    .queue_len = c_queue_len,
    .list_keys = c_list_keys,
    .ping = c_ping,
    .free = c_free,
};

int ddp__store_is_client(const ddp_store_t *st)
{
    return st && st->ops == &client_ops;
}

const char *ddp__store_client_addr(const ddp_store_t *st)
{
    return ddp__store_is_client(st) ? ((const client_t *)st)->addr : "";
}

int ddp_store_client_attempts(const ddp_store_t *st)
{
    return ddp__store_is_client(st) ? ((const client_t *)st)->attempts : 0;
}

int ddp_store_client_checked(const ddp_store_t *st)
{
    return ddp__store_is_client(st) ? ((const client_t *)st)->checked : -1;
}

ddp_store_proto_t ddp_store_client_protocol(const ddp_store_t *st)
{
    return ddp__store_is_client(st)
               ? (ddp_store_proto_t)((const client_t *)st)->proto
               : DDP_STORE_PROTO_AUTO;
}

/* ------------------------------------------------------------- connect */

/* Failures worth another attempt: the master is not up yet, is overloaded
 * (backlog overflow resets), or the network/name service is flaky. */
static int retryable(int rc)
{
    switch (rc) {
    case -ECONNREFUSED:
    case -ECONNRESET:
    case -ECONNABORTED:
    case -EPIPE:
    case -ETIMEDOUT:
    case -EHOSTUNREACH:
    case -ENETUNREACH:
    case -EHOSTDOWN:
    case -ENETDOWN:
    case -EAGAIN:
    case -EINTR:
    case -EADDRNOTAVAIL: /* ephemeral ports briefly exhausted */
    case DDP_ETIMEOUT:
    case DDP_ENOT_FOUND: /* name resolution */
    case DDP_EPEER_LOST:
    case DDP_EPROTOCOL: /* garbage from a half-started or foreign server */
        return 1;
    default:
        return 0;
    }
}

/* ddpsim's AUTH frame (opts.token), the first on a connection: 0 once the
 * server accepted it, or the failure (connection closed). */
static int send_token(client_t *c, int64_t deadline)
{
    uint8_t ok = 0xFF;
    begin(c, DDP_STORE_OP_AUTH);
    put_u32(c, DDP_STORE_AUTH_MAGIC);
    put_bytes(c, c->token, strlen(c->token));
    int rc = send_req(c, DDP_STORE_OP_AUTH, deadline);
    if (rc == 0)
        rc = rd_u8(c, &ok, DDP_STORE_OP_AUTH, deadline);
    if (rc == DDP_EPEER_LOST)
        c->auth_lost = 1;
    if (rc == 0 && ok != DDP_STORE_AUTH_OK)
        rc = proto_fail(c, DDP_STORE_OP_AUTH, "status %u, not %d", ok,
                        DDP_STORE_AUTH_OK);
    return rc;
}

/* Resolve and connect to the first address that accepts (then send the
 * token, when there is one): 0 with c->fd set, or the failure. */
static int open_conn(client_t *c, int64_t deadline)
{
    ddp_sys_t *sys = c->st.sys;
    ddp_addr_t addrs[8];
    int n = ddp_sys_resolve(sys, c->host, c->port, addrs, 8);
    if (n < 0)
        return n;
    int rc = ddp_fault_fire(DDP_FP_STORE_CLIENT_CONNECT);
    int fd = rc;
    /* Every answer in order, as getaddrinfo gave them; an answer that is
     * not the last gets its share of the time left, so a silent IPv6
     * address does not keep the IPv4 one from being tried (pytorch
     * #131691). The error names what each answer did. */
    char tried[400] = "";
    size_t off = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        int64_t t = ddp_sys_now(sys), dl = deadline;
        if (i < n - 1 && deadline > t)
            dl = t + (deadline - t) / (n - i);
        fd = ddp_sys_connect(sys, &addrs[i], dl);
        if (fd >= 0 || !retryable(fd))
            break;
        if (n > 1 && off < sizeof tried) {
            char as[DDP_ADDR_STRLEN];
            off += (size_t)snprintf(tried + off, sizeof tried - off, "%s%s: %s",
                                    off ? "; " : "", ddp_addr_format(&addrs[i], as, sizeof as),
                                    ddp_strerror(fd));
        }
    }
    if (fd < 0 && n > 1 && tried[0] && retryable(fd))
        ddp_err_set(fd, "%s resolves to %d addresses, none took the connection (%s)",
                    c->host, n, tried);
    if (fd < 0)
        return fd;
    c->fd = fd;
    free(c->lost);
    c->lost = NULL;
    c->in.off = c->in.len = 0;
    return c->token ? send_token(c, deadline) : 0;
}

/* A legacy connection after a WAIT timed out: a new one (no handshake),
 * which drops the wait server-side. 0, or the failure (connection gone). */
static int reopen(client_t *c)
{
    if (c->fd >= 0) {
        ddp_sys_close(c->st.sys, c->fd);
        c->fd = -1;
    }
    int rc = open_conn(c, ddp_sys_deadline_in(c->st.sys, CANCEL_GRACE_NS));
    if (rc != 0)
        poison(c, ddp_err_ctx()->what);
    return rc;
}

/* One attempt: connect, then (current) VALIDATE + PING. 0 with c->fd set,
 * or the failure; *hs_lost says the server took the connection and then
 * dropped it during the handshake (what a legacy server does). */
static int attempt(client_t *c, int64_t deadline, int *hs_lost)
{
    *hs_lost = 0;
    c->auth_lost = 0;
    c->checked = -1;
    int rc = open_conn(c, deadline);
    if (rc != 0 || c->proto == LEGACY)
        return rc;
    /* VALIDATE has no reply: it goes with the PING (and the CHECK of
     * opts.check_key) in one send. */
    begin(c, DDP_STORE_OP_VALIDATE);
    put_u32(c, DDP_STORE_MAGIC);
    if ((rc = ddp_fault_fire(DDP_FP_STORE_CLIENT_VALIDATE)) != 0) {
        poison(c, "handshake fault");
        *hs_lost = 1;
        return rc;
    }
    rc = ping_req_with(c, 1, deadline);
    *hs_lost = rc == DDP_EPEER_LOST;
    return rc;
}

enum { PROBE_NONE, PROBE_LEGACY_ONLY, PROBE_BOTH };

/* After a reset on VALIDATE/PING (protocol auto): on a fresh connection, a
 * legacy CHECK of no keys, then a PING. Answers to the CHECK and a drop at
 * the PING: a legacy-only server. Both answered: a server of both
 * generations. Anything else: not a legacy server (a current PyTorch
 * server never answers the CHECK). The probe connection is closed. */
/* The caller's error context is kept (ddp_err_save: off the rank's stack). */
DDP_NOINLINE static int probe_legacy(client_t *c, int64_t deadline)
{
    ddp_errsave_t *saved = ddp_err_save();
    int64_t dl = ddp_sys_deadline_in(c->st.sys, PROBE_GRACE_NS);
    if (dl > deadline)
        dl = deadline;
    int res = PROBE_NONE;
    c->proto = LEGACY;
    uint8_t ready = 0xFF;
    if (open_conn(c, dl) == 0) {
        begin(c, DDP_STORE_OP_CHECK);
        put_u64(c, 0);
        if (send_req(c, DDP_STORE_OP_CHECK, dl) == 0 &&
            rd_u8(c, &ready, DDP_STORE_OP_CHECK, dl) == 0 &&
            ready == DDP_STORE_READY) {
            int rc = ping_req(c, dl);
            res = rc == 0                ? PROBE_BOTH
                  : rc == DDP_EPEER_LOST ? PROBE_LEGACY_ONLY
                                         : PROBE_NONE;
        }
    }
    poison(c, "probe done");
    c->proto = CURRENT;
    ddp_err_restore(saved);
    return res;
}

/* The probe found a legacy-only server: speak legacy from the next attempt
 * on, and say so once per process. */
static void switch_to_legacy(client_t *c)
{
    static atomic_int told;
    c->proto = LEGACY;
    if (atomic_exchange(&told, 1) == 0)
        ddp_info("store: the server at %s dropped the VALIDATE/PING "
                 "handshake and answers the legacy TCPStore protocol "
                 "(PyTorch 1.9 - 2.0, e.g. torch 1.13): speaking legacy",
                 c->addr);
    else
        ddp_debug("store: %s speaks the legacy protocol", c->addr);
}

/* The next backoff delay, PyTorch's ExponentialBackoffWithJitter shape:
 * uniform in cur * [1 - jitter, 1 + jitter], then cur grows by factor up to
 * the cap. */
static int64_t next_backoff(ddp_rng_t *rng, double *cur, double factor,
                            double cap, double jitter)
{
    double lo = *cur * (1.0 - jitter), hi = *cur * (1.0 + jitter);
    double d = lo + (hi - lo) * ddp_rng_double(rng);
    *cur = *cur * factor < cap ? *cur * factor : cap;
    return d < 0 ? 0 : (int64_t)d;
}

/* The client of opts, not connected yet: NULL with *err set when out of
 * memory or the token is wrong. */
static client_t *client_new(ddp_sys_t *sys, const ddp_store_client_opts_t *opts, int *err)
{
    size_t hl = strlen(opts->host), al = hl + sizeof "[]:65535";
    client_t *c = calloc(1, sizeof *c + hl + 1 + al);
    if (!c) {
        *err = ddp_err_set(-ENOMEM, "out of memory for a store client");
        return NULL;
    }
    c->st.ops = &client_ops;
    c->st.sys = sys;
    c->st.impl = c;
    c->fd = -1;
    memcpy(c->host, opts->host, hl + 1);
    c->port = opts->port ? opts->port : DDP_STORE_DEFAULT_PORT;
    ddp_fmt(c->host + hl + 1, al, strchr(c->host, ':') ? "[%s]:%u" : "%s:%u",
            c->host, (unsigned)c->port);
    c->addr = c->host + hl + 1;
    ddp_rng_seed(&c->rng, opts->seed);
    if (opts->token && (strlen(opts->token) > DDP_STORE_MAX_TOKEN ||
                        !*opts->token)) {
        *err = ddp_err_set(DDP_ECONFIG, "store client: the token has %zu "
                                        "bytes; it must have 1 to %d",
                           strlen(opts->token), DDP_STORE_MAX_TOKEN);
        c_free(&c->st);
        return NULL;
    }
    if (opts->token && !(c->token = strdup(opts->token))) {
        *err = ddp_err_set(-ENOMEM, "out of memory for a store client");
        c_free(&c->st);
        return NULL;
    }
    if (opts->check_key && !(c->check_key = strdup(opts->check_key))) {
        *err = ddp_err_set(-ENOMEM, "out of memory for a store client");
        c_free(&c->st);
        return NULL;
    }
    c->want = opts->protocol;
    c->proto = c->want == LEGACY ? LEGACY : CURRENT;

    return c;
}

/* Connects c, retrying with backoff until opts' deadline. 0, or the
 * last attempt's code with last its message; *hs_lost: a handshake was
 * dropped. start: when the first attempt began. */
static int connect_retrying(client_t *c, const ddp_store_client_opts_t *opts, int64_t start,
                            int *hs_lost, char *last, size_t lastn)
{
    ddp_sys_t *sys = c->st.sys;
    double cur = opts->backoff_initial_ns > 0
                     ? (double)opts->backoff_initial_ns
                     : (double)DDP_STORE_BACKOFF_INITIAL_NS;
    double factor =
        opts->backoff_factor > 0 ? opts->backoff_factor : DDP_STORE_BACKOFF_FACTOR;
    double cap = opts->backoff_max_ns > 0 ? (double)opts->backoff_max_ns
                                          : (double)DDP_STORE_BACKOFF_MAX_NS;
    double jitter = opts->jitter > 0 ? opts->jitter : DDP_STORE_BACKOFF_JITTER;
    if (jitter > 1.0)
        jitter = 1.0;
    int64_t deadline = opts->connect_deadline;
    int rc;
    for (;;) {
        c->attempts++;
        rc = attempt(c, deadline, hs_lost);
        if (rc == 0) {
            if (c->attempts > 1)
                ddp_debug("store: connected to %s after %d attempts in %.1f "
                          "s",
                          c->addr, c->attempts,
                          ddp__store_secs(start, ddp_sys_now(sys)));
            if (ddp_fault_observed()) { /* a fault's connect event */
                ddp_fault_event_t ev = {.kind = DDP_TRIG_CONNECT, .rank = ddp_ident_rank(),
                                        .name = c->addr, .value = -1};
                ddp_fault_notify(&ev);
            }
            return 0;
        }
        snprintf(last, lastn, "%s", ddp_err_ctx()->what);
        poison(c, last);
        if (*hs_lost && c->want == DDP_STORE_PROTO_AUTO &&
            probe_legacy(c, deadline) == PROBE_LEGACY_ONLY) {
            switch_to_legacy(c);
            continue; /* at once: the server is up */
        }
        int64_t now = ddp_sys_now(sys);
        if (!retryable(rc) || now >= deadline)
            break;
        int64_t delay = next_backoff(&c->rng, &cur, factor, cap, jitter);
        ddp_debug("store: connect attempt %d to %s failed (%s: %s); retrying "
                  "in %.0f ms",
                  c->attempts, c->addr, ddp_err_name(rc), last,
                  (double)delay / 1e6);
        int64_t wake = delay >= deadline - now ? deadline : now + delay;
        int src = ddp_sys_sleep_until(sys, wake);
        if (src != 0) { /* interrupted, or the simulator killed us */
            rc = src;
            snprintf(last, lastn, "%s", ddp_err_ctx()->what);
            break;
        }
        if (ddp_sys_now(sys) >= deadline)
            break;
    }
    return rc;
}

/* The error of a client that did not connect: the address, the time
 * waited and a hint at the likely cause. */
static void connect_failed(const client_t *c, int rc, int hs_lost, const char *last,
                           int64_t start)
{
    ddp_sys_t *sys = c->st.sys;
    int64_t waited = ddp_sys_now(sys) - start;
    ddp_err_set(rc, "could not connect to the store at %s (%d attempt%s; "
                    "last error: %s)",
                c->addr, c->attempts, c->attempts == 1 ? "" : "s", last);
    ddp_err_addr("%s", c->addr);
    ddp_err_waited(waited);
    if (c->auth_lost)
        ddp_err_hint("the server dropped the connection right after "
                     "ddpsim's token frame: it was started with another "
                     "token, or with none (PyTorch's TCPStore and ddpsim "
                     "store serve without --token drop it); give both the "
                     "same --token");
    else if (hs_lost && c->want == DDP_STORE_PROTO_AUTO)
        ddp_err_hint("the master took the connection and dropped it at "
                     "VALIDATE/PING, and did not answer the legacy probe "
                     "either: overloaded, not a TCPStore, or a ddpsim server "
                     "whose --token or --allow refuses this client");
    else if (hs_lost)
        ddp_err_hint("the master accepted the connection and dropped it "
                     "during the VALIDATE/PING handshake: a PyTorch 1.9 - 2.0 "
                     "master (legacy TCPStore protocol) does that; connect "
                     "with protocol legacy or auto (ddpsim store --protocol)");
    else
        ddp_err_hint("is the master (rank 0) running and reachable? check "
                     "MASTER_ADDR/MASTER_PORT");
}

ddp_store_t *ddp_store_client_connect(ddp_sys_t *sys,
                                      const ddp_store_client_opts_t *opts,
                                      int *err)
{
    int dummy;
    if (!err)
        err = &dummy;
    if (!sys || !opts || !opts->host || !opts->host[0] ||
        strlen(opts->host) > HOST_MAX) {
        *err = ddp_err_set(DDP_ECONFIG, "store client: no master address "
                                        "given (MASTER_ADDR)");
        return NULL;
    }
    client_t *c = client_new(sys, opts, err);
    if (!c)
        return NULL;
    int hs_lost = 0;
    char last[320] = "";
    int64_t start = ddp_sys_now(sys);
    int rc = connect_retrying(c, opts, start, &hs_lost, last, sizeof last);
    if (rc == 0)
        return &c->st;
    connect_failed(c, rc, hs_lost, last, start);
    *err = rc;
    c_free(&c->st);
    return NULL;
}
