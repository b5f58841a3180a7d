/* backends/tcp.c — the `tcp` process-group backend.
 *
 * Written only against the sys seam, so the same code runs over real sockets
 * and inside the simulator's virtual network.
 *
 * Bootstrap (NCCL's shape, docs/architecture.md), O(1) work per rank but
 * rank 0's:
 *  1. every rank listens on a free port of the address its hostname resolves
 *     to (DDP_TCP_ADDR in the rank's environment overrides the name) and
 *     publishes "host:port" under "<prefix>/tcp/addr/<rank>";
 *  2. rank 0 gathers every address (multi_get, batches of 128) and gives each
 *     rank its ring neighbours, as NCCL's root does: one short entry per rank
 *     under "<prefix>/tcp/peers/<rank>", "<header> <world> <prev> <prev addr>
 *     <next> <next addr>" (multi_set, batches of 128); each rank reads only
 *     its own entry (WAIT, then GET), never a table of the whole world;
 *  3. every rank connects to its successor and sends a hello (u64 magic,
 *     u32 rank, u32 world, u64 group hash), accepts from its predecessor
 *     (checking the hello; strays are closed and the accept goes on until
 *     the deadline) and replies with its own hello, and reads the
 *     successor's reply. One poll watches the listener and the outgoing
 *     connection together, so a rank whose hello was dropped connects again
 *     while it still waits for its predecessor: no circular wait.
 *
 * Collectives run over the ring only (no connections beyond it):
 *  - every collective starts with a 32-byte header exchanged with both ring
 *    neighbours (kind, sequence number, size, dtype/op/root), so ranks that
 *    call different collectives or sizes fail with DDP_EPROTOCOL naming the
 *    neighbour's call instead of hanging or returning garbage;
 *  - barrier and small allreduce (< TCP_SMALL_BYTES): two passes along the
 *    ring (ring_chain), O(1) messages per rank: 0 -> 1 -> ... -> world-1
 *    folds the buffers in rank order (bit-identical float results on every
 *    rank), world-1 -> 0 -> ... -> world-2 hands the result on. A barrier is
 *    the same with a one-byte token and no fold: nobody leaves before the
 *    last rank entered. 2(world-1) hops of latency, where an allgather of
 *    every buffer took world-1 hops but world-1 steps on every rank;
 *  - broadcast: a pipeline from the root; every rank forwards what it has
 *    received so far, in chunks of TCP_CHUNK bytes;
 *  - allgather: world-1 ring steps of one block each;
 *  - allreduce, >= TCP_SMALL_BYTES: ring reduce-scatter then ring allgather
 *    (2(world-1) steps of bytes/world each).
 * Every ring step sends to the successor while receiving from the
 * predecessor (poll on both, non-blocking partial send/recv), so no rank
 * blocks in a send that waits for a receive on the next rank.
 *
 * Failure: any error inside a collective closes both ring sockets at once.
 * The ring then unravels: each neighbour sees EOF within a hop and fails the
 * same way, so every rank reports DDP_EPEER_LOST promptly instead of waiting
 * for its deadline. A group that failed or was aborted stays unusable.
 *
 * Limitations: abort must come from the thread that runs the group (the
 * deadline bounds every wait); a prefix must not be reused for two groups
 * that live at once in one store (stale addresses would be read), as in
 * PyTorch, whose prefixes carry a group counter.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends_priv.h"
#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/fmt.h"
#include "ddp/log.h"
#include "ddp/pg.h"

#define TCP_MAGIC UINT64_C(0x6464707467727031) /* "ddptgrp1" */
#define TCP_HDR_TAG UINT32_C(0x43504444)       /* "DDPC" */
#define TCP_HELLO_LEN 24
#define TCP_HDR_LEN 32
#define TCP_SMALL_BYTES 4096
#define TCP_CHUNK (64 * 1024)
/* A connection that does not say hello in this time is dropped, so a silent
 * stray in the accept queue delays the real predecessor by at most this. */
#define TCP_HELLO_TIMEOUT_NS (5 * DDP_NS_PER_S)
#define TCP_BACKOFF_INITIAL_NS (50 * DDP_NS_PER_MS)
#define TCP_BACKOFF_MAX_NS (2 * DDP_NS_PER_S)
#define TCP_GATHER_BATCH 128
/* How long a rank that has nothing to send yet in a collective holds its
 * header back (it goes with the first bytes it sends) before sending it
 * alone: ranks that disagree on the call, none of them able to start it,
 * are still told within this, not at their deadline. */
#define TCP_HDR_GRACE_NS DDP_NS_PER_S
#define TCP_PEERS_HEADER "ddp-tcp-peers 1"

typedef enum coll_kind {
    COLL_BARRIER = 1,
    COLL_BROADCAST,
    COLL_ALLREDUCE,
    COLL_ALLGATHER,
    COLL_SPLIT,
} coll_kind_t;

static const char *coll_name(uint32_t k)
{
    static const char *const names[] = {"?",         "barrier",   "broadcast",
                                        "allreduce", "allgather", "split"};
    return k < sizeof names / sizeof names[0] ? names[k] : "?";
}

typedef struct tcp_pg {
    ddp_pg_t base;
    int next_fd, prev_fd; /* ring sockets; -1 when closed */
    int next_rank, prev_rank;
    char next_addr[DDP_ADDR_STRLEN], prev_addr[DDP_ADDR_STRLEN];
    uint64_t hash; /* of the prefix: tells groups apart in the hello */
    uint64_t seq;  /* collectives started */
    int failed;    /* the code that broke the group, or 0 */
    int aborted;
    /* Connect retries to the successor, across reconnects. */
    ddp_rng_t rng;
    int64_t backoff;
    int attempts;
    char *cause; /* another rank's published bootstrap error (NULL: none) */
    /* The collective running now, for errors. */
    const char *what;
    int64_t op_start;
    /* Its header, built by coll_begin, goes to the successor in front of
     * the first bytes this rank sends it, or alone TCP_HDR_GRACE_NS after
     * op_start if this rank is still waiting then, or at the end
     * (hdr_left: its bytes not sent yet); the predecessor's is read ahead
     * of the first bytes received from it (hdr_due). */
    uint8_t hdr_mine[32];
    size_t hdr_left;
    int hdr_due;
} tcp_pg_t;

static tcp_pg_t *T(ddp_pg_t *pg) { return (tcp_pg_t *)pg; }

/* ------------------------------------------------------------ helpers */

static uint64_t fnv1a(const char *s)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * UINT64_C(0x100000001b3);
    return h;
}

/* Wire integers are little-endian whatever the host. */
static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static int64_t now(tcp_pg_t *pg) { return ddp_sys_now(pg->base.sys); }

/* Sets the error context in one go: sentence, peer, address, time waited.
 * Every error of this file that concerns a peer goes through it. */
static int peer_err(int code, int peer, const char *addr, int64_t waited,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int peer_err(int code, int peer, const char *addr, int64_t waited,
                    const char *fmt, ...)
{
    char what[sizeof ddp_err_ctx()->what];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    ddp_err_set(code, "%s", what);
    if (peer >= 0)
        ddp_err_peer(peer);
    if (addr && addr[0])
        ddp_err_addr("%s", addr);
    if (waited >= 0)
        ddp_err_waited(waited);
    return code;
}


static void close_fd(tcp_pg_t *pg, int *fd)
{
    if (*fd >= 0)
        ddp_sys_close(pg->base.sys, *fd);
    *fd = -1;
}

static void close_ring(tcp_pg_t *pg)
{
    close_fd(pg, &pg->next_fd);
    close_fd(pg, &pg->prev_fd);
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* "10.0.0.1:29500" / "[::1]:29500" -> address. */
static int parse_hostport(const char *s, ddp_addr_t *out)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s)
        return DDP_EPROTOCOL;
    char host[DDP_ADDR_STRLEN];
    size_t hl = (size_t)(colon - s);
    if (hl >= sizeof host)
        return DDP_EPROTOCOL;
    if (hl > 2 && s[0] == '[' && s[hl - 1] == ']') /* "[v6]" */
        s++, hl -= 2;
    memcpy(host, s, hl);
    host[hl] = '\0';
    char *end = NULL;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (!end || *end || end == colon + 1 || port == 0 || port > 65535)
        return DDP_EPROTOCOL;
    return ddp_addr_parse(host, (uint16_t)port, out) ? DDP_EPROTOCOL : 0;
}

/* A ring entry's fields after TCP_PEERS_HEADER: "WORLD PREV ADDR NEXT ADDR",
 * as sscanf("%d %d %s %d %s") would count them (the fields read before the
 * first that does not parse; an address longer than its buffer ends the
 * count). Every rank parses one entry; sscanf cost more than the rest of
 * the bootstrap's formatting. */
static int ring_int(const char **p, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(*p, &end, 10);
    if (end == *p || errno || v < INT_MIN || v > INT_MAX)
        return -1;
    *out = (int)v;
    *p = end;
    return 0;
}

static int ring_word(const char **p, char *out, size_t n)
{
    const char *q = *p;
    while (*q == ' ' || *q == '\t')
        q++;
    size_t l = strcspn(q, " \t\n");
    if (l == 0 || l >= n)
        return -1;
    memcpy(out, q, l);
    out[l] = '\0';
    *p = q + l;
    return 0;
}

static int ring_fields(const char *text, int *tw, int *prev, char *pa, size_t pn,
                       int *next, char *na, size_t nn)
{
    size_t hl = strlen(TCP_PEERS_HEADER);
    if (strncmp(text, TCP_PEERS_HEADER, hl))
        return 0;
    const char *p = text + hl;
    int n = 0;
    if (ring_int(&p, tw) == 0 && ++n && ring_int(&p, prev) == 0 && ++n &&
        ring_word(&p, pa, pn) == 0 && ++n && ring_int(&p, next) == 0 && ++n &&
        ring_word(&p, na, nn) == 0)
        ++n;
    return n;
}

/* ------------------------------------------------------------ hello */

static void hello_encode(uint8_t *p, int rank, int world, uint64_t hash)
{
    put_u64(p, TCP_MAGIC);
    put_u32(p + 8, (uint32_t)rank);
    put_u32(p + 12, (uint32_t)world);
    put_u64(p + 16, hash);
}

/* 0 when the hello is from `want_rank` of this group; else a reason. */
static int hello_check(tcp_pg_t *pg, const uint8_t *p, int want_rank,
                       char *why, size_t n)
{
    uint64_t magic = get_u64(p);
    int rank = (int)get_u32(p + 8), world = (int)get_u32(p + 12);
    if (magic != TCP_MAGIC)
        snprintf(why, n, "wrong magic 0x%016llx (not a ddpsim tcp peer)",
                 (unsigned long long)magic);
    else if (get_u64(p + 16) != pg->hash)
        snprintf(why, n, "rank %d of another group (group hash differs)", rank);
    else if (world != pg->base.world)
        snprintf(why, n, "rank %d of a world of %d, this group has %d", rank,
                 world, pg->base.world);
    else if (rank != want_rank)
        snprintf(why, n, "rank %d, expected rank %d", rank, want_rank);
    else
        return 0;
    return DDP_EPROTOCOL;
}

/* ------------------------------------------------------------ bootstrap */

static void tcp_key(const tcp_pg_t *pg, char *buf, size_t n, const char *what,
                    int rank)
{
    if (rank >= 0)
        ddp_fmt(buf, n, "%s/tcp/%s/%d", pg->base.prefix, what, rank);
    else
        ddp_fmt(buf, n, "%s/tcp/%s", pg->base.prefix, what);
}

/* The interfaces ifname (ifvar's value) lists, read as torch reads them
 * (ddp_gloo_ifnames). Not inlined: its table of interfaces (3.3 KiB) stays
 * off the stack of tcp_listen's resolve, the deepest of a simulated rank's
 * init, when no variable is set (as in most runs). */
DDP_NOINLINE static int tcp_iflist(ddp_sys_t *sys, const char *ifvar, const char *ifname,
                                   char *name, size_t n)
{
    ddp_ifaddr_t ifs[64];
    int nifs = ddp_sys_ifaddrs(sys, ifs, 64);
    if (nifs < 0)
        return ddp_err_set(nifs, "tcp bootstrap: %s=\"%s\": this host's interfaces cannot "
                           "be listed here", ifvar, ifname);
    int rc = ddp_gloo_ifnames(ifvar, ifname, ifs, nifs, name, n);
    if (rc >= 0 || !strchr("^=", ifname[0]))
        return rc;
    return ddp_err_hint("\"%c...\" is NCCL's list syntax (NCCL_SOCKET_IFNAME); %s takes "
                        "interface names only: set it to the one that reaches the other "
                        "nodes, e.g. eth0", ifname[0], ifvar);
}

/* GLOO_SOCKET_IFNAME (else TP_SOCKET_IFNAME) read as torch reads it
 * (ddp_gloo_ifnames): the number of interfaces named and the first in
 * name, 0 for none, or DDP_ECONFIG. */
static int tcp_ifnames(ddp_sys_t *sys, char *name, size_t n)
{
    const char *ifvar = "GLOO_SOCKET_IFNAME", *ifname = ddp_env_get(ddp_sys_env(sys), ifvar);
    if (!ifname || !ifname[0])
        ifvar = "TP_SOCKET_IFNAME", ifname = ddp_env_get(ddp_sys_env(sys), ifvar);
    if (!ifname || strlen(ifname) <= 1) /* torch ignores it (ddp_gloo_ifnames) */
        return 0;
    return tcp_iflist(sys, ifvar, ifname, name, n);
}

/* Listens on the address this rank's host name resolves to; *pub is what
 * the others should connect to. */
DDP_NOINLINE static int tcp_listen(tcp_pg_t *pg, ddp_addr_t *pub)
{
    ddp_sys_t *sys = pg->base.sys;
    char name[256];
    const char *over = ddp_env_get(ddp_sys_env(sys), "DDP_TCP_ADDR");
    /* gloo's choice: GLOO_SOCKET_IFNAME as torch reads it (ignored when one
     * character; each item of the list must be an interface with an
     * address; tensorpipe's TP_SOCKET_IFNAME when unset); else the host
     * name's first address */
    ddp_addr_t addrs[8];
    int n = -1, items = 0;
    if (!(over && over[0]) && (items = tcp_ifnames(sys, name, sizeof name)) < 0)
        return items;
    if (items > 0) { /* gloo makes one device per name of a list: the first */
        if (ddp_sys_iface_addr(sys, name, 0, &addrs[0]) != 0)
            return ddp_err_ctx()->code;
        n = 1;
    } else if (over && over[0]) {
        snprintf(name, sizeof name, "%s", over);
    } else if (ddp_sys_hostname(sys, name, sizeof name) != 0) {
        name[0] = '\0';
    }
    if (n < 0)
        n = name[0] ? ddp_sys_resolve(sys, name, 0, addrs, 8) : -1;
    ddp_addr_t any;
    ddp_addr_parse("0.0.0.0", 0, &any);
    int have = 0;
    if (n >= 1) { /* the first answer, as gloo binds it */
        *pub = addrs[0];
        if (pub->family == 6)
            ddp_addr_parse("::", 0, &any);
        have = 1;
    } else if (over && over[0]) {
        char cause[256];
        snprintf(cause, sizeof cause, "%s", ddp_err_ctx()->what);
        return ddp_err_set(DDP_ECONFIG, "tcp bootstrap: DDP_TCP_ADDR=\"%s\" "
                                        "does not resolve: %s",
                           over, cause);
    } else {
        /* Publishing loopback only works when every rank shares this host;
         * say so rather than fail a single-host run. */
        ddp_addr_parse("127.0.0.1", 0, pub);
        ddp_warn("tcp group \"%s\": host name \"%s\" does not resolve; "
                 "publishing 127.0.0.1 (set DDP_TCP_ADDR for multi-host runs)",
                 pg->base.prefix, name);
    }
    int backlog = ddp_sys_somaxconn(sys);
    int fd = have ? ddp_sys_listen(sys, pub, backlog) : -1;
    if (fd < 0) /* the name's address is not ours to bind (NAT, docker) */
        fd = ddp_sys_listen(sys, &any, backlog);
    if (fd < 0) {
        char as[DDP_ADDR_STRLEN];
        ddp_err_wrap("tcp bootstrap: could not listen on %s or 0.0.0.0",
                     ddp_addr_format_host(pub, as, sizeof as));
        return fd;
    }
    ddp_addr_t bound;
    int rc = ddp_sys_local_addr(sys, fd, &bound);
    if (rc) {
        ddp_sys_close(sys, fd);
        return rc;
    }
    pub->port = bound.port;
    return fd;
}

/* A rank whose bootstrap fails before the ring exists says so under the key
 * the others wait on (its address, or every rank's peers entry when rank 0
 * gives up), so they fail at once with the real cause instead of timing out
 * without a hint (pytorch#129367). Best effort, with a short deadline of its
 * own. */
#define TCP_ERROR_MARK "error "

/* What a failing rank passes on: the first failing rank's own words, not a
 * wrapper of them. */
static void error_text(tcp_pg_t *pg, const char *lead, char *msg, size_t n)
{
    snprintf(msg, n, "%s%s%s", lead, TCP_ERROR_MARK,
             pg->cause ? pg->cause : ddp_err_message());
}

DDP_NOINLINE static void publish_error(tcp_pg_t *pg, const char *key)
{
    char msg[768];
    error_text(pg, "", msg, sizeof msg);
    ddp_errsave_t *saved = ddp_err_save(); /* keep this rank's own error */
    ddp_store_set_str(pg->base.store, key, msg,
                      ddp_sys_deadline_in(pg->base.sys, DDP_NS_PER_S));
    ddp_err_restore(saved);
}

/* Names (up to 16 of) the ranks in [base, base+n) whose key is missing. */
static int list_missing(tcp_pg_t *pg, const char *const *kp, int base, int n,
                        char *buf, size_t len)
{
    int64_t dl = ddp_sys_deadline_in(pg->base.sys, 2 * DDP_NS_PER_S);
    int nmiss = 0;
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (ddp_store_check(pg->base.store, &kp[i], 1, dl) != 0)
            continue; /* present, or the store cannot tell: not proven missing */
        if (nmiss++ < 16 && off < len)
            off += (size_t)snprintf(buf + off, len - off, "%s%d",
                                    nmiss > 1 ? ", " : "", base + i);
        else if (nmiss == 17 && off < len)
            off += (size_t)snprintf(buf + off, len - off, ", ...");
    }
    return nmiss;
}

/* Rank 0: every rank's address (and host name: hosts[r], "" when it gave
 * none), in rank order. */
DDP_NOINLINE static int gather_addrs(tcp_pg_t *pg, ddp_addr_t *addrs, char (*hosts)[64],
                                     int64_t deadline)
{
    int world = pg->base.world;
    int64_t start = now(pg);
    /* A batch's keys, their pointers and values on the heap: on the stack
     * (4 KiB) they were under the deepest error path of the bundled
     * library (docs/simulator.md § 1, the stack margin check). */
    struct {
        char keys[TCP_GATHER_BATCH][160];
        const char *kp[TCP_GATHER_BATCH];
        ddp_buf_t vals[TCP_GATHER_BATCH];
    } *b = calloc(1, sizeof *b);
    if (!b)
        return ddp_err_set(-ENOMEM, "tcp bootstrap: out of memory for a batch of %d "
                                    "listen addresses (%zu bytes)",
                           TCP_GATHER_BATCH, sizeof *b);
    char(*keys)[160] = b->keys;
    const char **kp = b->kp;
    ddp_buf_t *vals = b->vals;
    int rc = 0;
    for (int base = 0; rc == 0 && base < world; base += TCP_GATHER_BATCH) {
        int nb = world - base < TCP_GATHER_BATCH ? world - base : TCP_GATHER_BATCH;
        for (int i = 0; i < nb; i++) {
            tcp_key(pg, keys[i], sizeof keys[i], "addr", base + i);
            kp[i] = keys[i];
        }
        memset(vals, 0, sizeof b->vals);
        rc = ddp_store_multi_get(pg->base.store, kp, (size_t)nb, vals, deadline);
        if (rc == DDP_ETIMEOUT) { /* the cause is who never published */
            char missing[160];
            int nmiss = list_missing(pg, kp, base, nb, missing, sizeof missing);
            if (nmiss == 0) { /* everyone had: this rank came too late itself */
                peer_err(rc, -1, NULL, now(pg) - start,
                         "tcp bootstrap: rank 0 reached the gather of the listen "
                         "addresses after its deadline (every rank had published): it "
                         "was held up before it (a stalled or paused main thread)");
                ddp_err_hint("the other ranks timed out waiting for rank 0; look at "
                             "what delayed rank 0 between joining the store and the "
                             "process group");
                break;
            }
            peer_err(rc, -1, NULL, now(pg) - start,
                     "tcp bootstrap: rank 0 timed out gathering the listen "
                     "addresses under \"%s/tcp/addr/\": %d rank(s) of %d never "
                     "published (%s)",
                     pg->base.prefix, nmiss, world, nmiss ? missing : "unknown");
            ddp_err_hint("check that every rank started, with the same prefix "
                         "and world size");
            break;
        }
        if (rc) {
            ddp_err_wrap("tcp bootstrap: rank 0 gathering the listen addresses");
            break;
        }
        for (int i = 0; i < nb && rc == 0; i++) {
            char text[768];
            size_t l = vals[i].len < sizeof text - 1 ? vals[i].len : sizeof text - 1;
            memcpy(text, vals[i].data, l);
            text[l] = '\0';
            if (!strncmp(text, TCP_ERROR_MARK, strlen(TCP_ERROR_MARK))) {
                free(pg->cause);
                pg->cause = strndup(text + strlen(TCP_ERROR_MARK), 511);
                rc = peer_err(DDP_EPEER_LOST, base + i, NULL, now(pg) - start,
                              "tcp bootstrap: rank %d could not join: %s",
                              base + i, text + strlen(TCP_ERROR_MARK));
            } else {
                char *sp = strchr(text, ' '); /* "ADDR:PORT HOSTNAME" */
                if (sp)
                    *sp++ = '\0';
                snprintf(hosts[base + i], 64, "%s", sp ? sp : "");
            }
            if (rc == 0 && parse_hostport(text, &addrs[base + i]) != 0)
                rc = peer_err(DDP_EPROTOCOL, base + i, NULL, -1,
                              "tcp bootstrap: key \"%s\" holds \"%.80s\", not "
                              "a host:port address",
                              keys[i], text);
        }
        for (int i = 0; i < nb; i++)
            ddp_buf_free(&vals[i]);
    }
    free(b);
    return rc;
}

static uint64_t addr_hash(const ddp_addr_t *a)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)a->family;
    for (int i = 0; i < (a->family == 4 ? 4 : 16); i++)
        h = (h ^ a->ip[i]) * 1099511628211ull;
    return h;
}

static int same_ip(const ddp_addr_t *a, const ddp_addr_t *b)
{
    return a->family == b->family && !memcmp(a->ip, b->ip, a->family == 4 ? 4u : 16u);
}

/* Rank 0, before it hands out the ring: an address some rank advertises
 * that the others cannot reach it at. A loopback address (a host name that
 * /etc/hosts maps to 127.0.1.1) while the ranks run on several hosts, or
 * one address advertised from two hosts (each host's own docker bridge,
 * a NAT address): the peers would connect to their own host. */
DDP_NOINLINE static int check_advertised(tcp_pg_t *pg, const ddp_addr_t *addrs,
                                         char (*hosts)[64])
{
    int world = pg->base.world, loop = -1, other = -1;
    for (int r = 0; r < world && loop < 0; r++)
        if (ddp_sys_node_local(pg->base.sys, &addrs[r]) == 1)
            loop = r;
    for (int r = 0; loop >= 0 && r < world && other < 0; r++)
        if (hosts[r][0] && hosts[loop][0] && strcmp(hosts[r], hosts[loop]))
            other = r;
    char as[DDP_ADDR_STRLEN];
    if (loop >= 0 && other >= 0) {
        ddp_err_set(DDP_ECONFIG,
                    "tcp bootstrap: rank %d (host %s) advertises %s, an address that "
                    "only reaches its own host, but the ranks run on several hosts "
                    "(rank %d is on %s): its host name resolves to loopback (Debian's "
                    "/etc/hosts maps it to 127.0.1.1)",
                    loop, hosts[loop], ddp_addr_format_host(&addrs[loop], as, sizeof as),
                    other, hosts[other]);
        return ddp_err_hint("set GLOO_SOCKET_IFNAME to the interface that reaches the "
                            "other nodes (e.g. eth0), or map the host name to its network "
                            "address in /etc/hosts (DDP_TCP_ADDR=ADDR overrides it)");
    }
    size_t cap = 16;
    while (cap < 2 * (size_t)world)
        cap *= 2;
    int *tab = calloc(cap, sizeof *tab), rc = 0;
    if (!tab)
        return ddp_err_set(-ENOMEM, "tcp bootstrap: out of memory");
    for (int r = 0; r < world && rc == 0; r++) {
        size_t i = (size_t)addr_hash(&addrs[r]) & (cap - 1);
        for (; tab[i]; i = (i + 1) & (cap - 1)) {
            int q = tab[i] - 1;
            if (!same_ip(&addrs[q], &addrs[r]))
                continue;
            if (hosts[q][0] && hosts[r][0] && strcmp(hosts[q], hosts[r])) {
                ddp_err_set(DDP_ECONFIG,
                            "tcp bootstrap: ranks %d (host %s) and %d (host %s) both "
                            "advertise %s: an address each host has for itself (a "
                            "docker bridge, a NAT address), so every rank would reach "
                            "its own host there, not the peer",
                            q, hosts[q], r, hosts[r],
                            ddp_addr_format_host(&addrs[r], as, sizeof as));
                rc = ddp_err_hint("set GLOO_SOCKET_IFNAME to the interface that "
                                  "reaches the other nodes (e.g. eth0), or make each "
                                  "host name resolve to that interface's address");
            }
            break;
        }
        if (!tab[i])
            tab[i] = r + 1;
    }
    free(tab);
    return rc;
}

/* Rank 0 tells each rank its ring neighbours, as NCCL's root does: rank r's
 * entry "<header> <world> <prev> <prev addr> <next> <next addr>" under
 * "<prefix>/tcp/peers/<r>", TCP_GATHER_BATCH entries per MULTI_SET. Each
 * rank then reads one short entry, not a table of the whole world. With
 * addrs NULL every entry says why rank 0 gave up instead (errmsg). */
DDP_NOINLINE static int publish_peers(tcp_pg_t *pg, const ddp_addr_t *addrs,
                                      const char *errmsg, int64_t deadline)
{
    int world = pg->base.world;
    enum { VLEN = 2 * DDP_ADDR_STRLEN + 64 };
    char(*keys)[160] = malloc(TCP_GATHER_BATCH * sizeof *keys);
    char(*text)[VLEN] = addrs ? malloc(TCP_GATHER_BATCH * sizeof *text) : NULL;
    const char *kp[TCP_GATHER_BATCH];
    ddp_buf_t vals[TCP_GATHER_BATCH];
    int rc = keys && (text || !addrs) ? 0 : ddp_err_set(-ENOMEM, "tcp bootstrap: "
                                                                 "out of memory");
    /* Entry r names r-1 and r+1: three formatted addresses roll along
     * (fp: r-1's, fc: r's, fn: r+1's), each formatted once, not twice. */
    char f[3][DDP_ADDR_STRLEN], *fp = f[0], *fc = f[1], *fn = f[2];
    if (addrs) {
        ddp_addr_format(&addrs[world - 1], fp, DDP_ADDR_STRLEN);
        ddp_addr_format(&addrs[0], fc, DDP_ADDR_STRLEN);
    }
    for (int base = 0; rc == 0 && base < world; base += TCP_GATHER_BATCH) {
        int nb = world - base < TCP_GATHER_BATCH ? world - base : TCP_GATHER_BATCH;
        for (int i = 0; i < nb; i++) {
            int r = base + i, prev = (r + world - 1) % world, next = (r + 1) % world;
            tcp_key(pg, keys[i], sizeof keys[i], "peers", r);
            kp[i] = keys[i];
            if (!addrs) {
                vals[i] = (ddp_buf_t){.data = (uint8_t *)errmsg, .len = strlen(errmsg)};
                continue;
            }
            ddp_addr_format(&addrs[next], fn, DDP_ADDR_STRLEN);
            int n = ddp_fmt(text[i], VLEN, "%s %d %d %s %d %s", TCP_PEERS_HEADER,
                            world, prev, fp, next, fn);
            vals[i] = (ddp_buf_t){.data = (uint8_t *)text[i], .len = (size_t)n};
            char *t = fp; /* r+1's turn: r is its predecessor */
            fp = fc;
            fc = fn;
            fn = t;
        }
        rc = ddp_store_multi_set(pg->base.store, kp, vals, (size_t)nb, deadline);
        if (rc)
            ddp_err_wrap("tcp bootstrap: rank 0 could not publish the ring "
                         "neighbours under \"%s/tcp/peers/\"",
                         pg->base.prefix);
    }
    free(keys);
    free(text);
    return rc;
}

/* Rank 0 gave up: every rank waiting for its entry learns why. */
DDP_NOINLINE static void publish_peers_error(tcp_pg_t *pg)
{
    char msg[800];
    error_text(pg, TCP_PEERS_HEADER " ", msg, sizeof msg);
    ddp_errsave_t *saved = ddp_err_save();
    publish_peers(pg, NULL, msg, ddp_sys_deadline_in(pg->base.sys, DDP_NS_PER_S));
    ddp_err_restore(saved);
}

/* Reads this rank's entry: its neighbours' ranks and addresses. */
static int read_peers(tcp_pg_t *pg, const char *key, const ddp_buf_t *b,
                      int64_t start, ddp_addr_t *succ);
static int parse_peers(tcp_pg_t *pg, const char *key, const char *text,
                       int64_t start, ddp_addr_t *succ);

DDP_NOINLINE static int fetch_peers(tcp_pg_t *pg, ddp_addr_t *succ, int64_t deadline)
{
    int me = pg->base.rank;
    char key[160];
    tcp_key(pg, key, sizeof key, "peers", me);
    int64_t start = now(pg);
    ddp_buf_t b = {0};
    /* WAIT, then GET: two round trips while rank 0 is still gathering (a
     * GET of a missing key asks CHECK, then WAIT, then GET). */
    const char *k[1] = {key};
    int rc = ddp_store_wait(pg->base.store, k, 1, deadline);
    if (rc == 0)
        rc = ddp_store_get(pg->base.store, key, &b, deadline);
    if (rc) {
        ddp_err_wrap("tcp bootstrap: waiting for this rank's ring neighbours "
                     "\"%s\" from rank 0",
                     key);
        ddp_err_peer(0);
        ddp_err_waited(now(pg) - start);
        ddp_err_hint("rank 0 publishes them once every rank has published its "
                     "address; look for a rank that did not start");
        return rc;
    }
    rc = read_peers(pg, key, &b, start, succ);
    ddp_buf_free(&b);
    return rc;
}

/* Rank 0's ring entry for this rank (fetch_peers), parsed. Its own
 * function: its buffers are not on the stack while the rank waits. */
DDP_NOINLINE static int read_peers(tcp_pg_t *pg, const char *key, const ddp_buf_t *b,
                                   int64_t start, ddp_addr_t *succ)
{
    /* A copy on the heap, not the stack: the entry is parsed in every rank's
     * deepest frame. Up to 1,023 bytes of it. */
    size_t l = b->len < 1023 ? b->len : 1023;
    char *text = malloc(l + 1);
    if (!text)
        return ddp_err_set(-ENOMEM, "tcp bootstrap: out of memory");
    memcpy(text, b->data, l);
    text[l] = '\0';
    int rc = parse_peers(pg, key, text, start, succ);
    free(text);
    return rc;
}

/* An address text into a DDP_ADDR_STRLEN field (cut to fit). */
static void copy_addr(char *dst, const char *src)
{
    size_t n = strnlen(src, DDP_ADDR_STRLEN - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static int parse_peers(tcp_pg_t *pg, const char *key, const char *text,
                       int64_t start, ddp_addr_t *succ)
{
    int world = pg->base.world, me = pg->base.rank;
    const char *errmark = TCP_PEERS_HEADER " " TCP_ERROR_MARK;
    if (!strncmp(text, errmark, strlen(errmark)))
        return peer_err(DDP_EPEER_LOST, 0, NULL, now(pg) - start,
                        "tcp bootstrap: rank 0 gave up on the group because: %s",
                        text + strlen(errmark));
    int tw = -1, prev = -1, next = -1;
    char pa[DDP_ADDR_STRLEN + 8], na[DDP_ADDR_STRLEN + 8];
    ddp_addr_t pred;
    int fields = ring_fields(text, &tw, &prev, pa, sizeof pa, &next, na, sizeof na);
    if (fields >= 1 && tw != world) {
        ddp_err_set(DDP_EPROTOCOL,
                    "tcp bootstrap: rank 0's ring entry \"%s\" is for a world of "
                    "%d, this rank was started with world %d",
                    key, tw, world);
        return ddp_err_hint("every rank needs the same world size, and each "
                            "group instance a fresh prefix");
    }
    if (fields != 5 || prev != (me + world - 1) % world || next != (me + 1) % world ||
        parse_hostport(pa, &pred) || parse_hostport(na, succ))
        return ddp_err_set(DDP_EPROTOCOL, "tcp bootstrap: bad ring entry "
                                          "\"%.120s\" in \"%s\"",
                           text, key);
    pg->prev_rank = prev;
    pg->next_rank = next;
    /* As rank 0 formatted them (ddp_addr_format), checked above. */
    copy_addr(pg->prev_addr, pa);
    copy_addr(pg->next_addr, na);
    return 0;
}

static int connect_retryable(int rc)
{
    switch (rc) {
    case -ECONNREFUSED:
    case -ECONNRESET:
    case -ECONNABORTED:
    case -ETIMEDOUT:
    case -EHOSTUNREACH:
    case -EAGAIN:
    case -EINTR:
    case -EPIPE:
    case -EPROTO:
    case DDP_EPEER_LOST:
        return 1;
    default:
        return 0;
    }
}

/* One attempt: connect to the successor and send the hello. */
static int connect_once(tcp_pg_t *pg, const ddp_addr_t *a, int64_t deadline)
{
    ddp_sys_t *sys = pg->base.sys;
    int rc = ddp_fault_fire(DDP_FP_PG_TCP_CONNECT);
    if (rc)
        return rc;
    int fd = ddp_sys_connect(sys, a, deadline);
    if (fd < 0)
        return fd;
    uint8_t h[TCP_HELLO_LEN];
    hello_encode(h, pg->base.rank, pg->base.world, pg->hash);
    rc = ddp_fault_fire(DDP_FP_PG_TCP_HANDSHAKE);
    if (!rc)
        rc = ddp_sys_send_all(sys, fd, h, sizeof h, deadline);
    if (rc) {
        ddp_sys_close(sys, fd);
        return rc;
    }
    return fd;
}

/* When to try the successor again: the next jittered exponential backoff
 * step, never past the deadline. The jitter comes from a seeded PRNG: runs
 * replay exactly. */
static int64_t backoff_next(tcp_pg_t *pg, int64_t deadline)
{
    int64_t jitter = (int64_t)(ddp_rng_double(&pg->rng) * (double)pg->backoff * 0.5);
    int64_t until = min64(now(pg) + pg->backoff + jitter, deadline);
    pg->backoff = min64(pg->backoff * 3 / 2, TCP_BACKOFF_MAX_NS);
    return until;
}

/* A poll or accept that returned EINTR/EAGAIN: a short pause before the next
 * try, so that a fault point returning it on every call cannot spin a
 * simulated task (whose clock moves only while it waits). The error
 * context is kept (ddp_err_save: off the rank's stack). */
DDP_NOINLINE static void transient_pause(tcp_pg_t *pg, int64_t deadline)
{
    ddp_errsave_t *saved = ddp_err_save();
    ddp_sys_sleep_until(pg->base.sys, min64(now(pg) + DDP_NS_PER_MS, deadline));
    ddp_err_restore(saved);
}

/* The handshake in progress (see handshake()). */
typedef struct hs {
    const ddp_addr_t *succ;
    int64_t start, deadline;
    int64_t retry_at; /* next connect attempt while next_fd < 0 */
    int out_done, in_done;
    int strays;       /* connections the listener rejected */
    char last[200];   /* the last one and why */
    char cause[256];  /* why the last connect attempt failed */
} hs_t;

/* Gives up on the successor: the last attempt's cause, with `code`. */
static int connect_failed(tcp_pg_t *pg, const hs_t *h, int code)
{
    peer_err(code, pg->next_rank, pg->next_addr, now(pg) - h->start,
             "tcp bootstrap: connect to ring successor rank %d at %s failed "
             "after %d attempt(s): %s",
             pg->next_rank, pg->next_addr, pg->attempts, h->cause);
    if (code == -ENETUNREACH) /* no route: no retry will find one */
        return ddp_err_hint("rank %d advertised %s, on a network this host has no "
                            "route to: make the ranks advertise an address every node "
                            "reaches (GLOO_SOCKET_IFNAME=eth0, or DDP_TCP_ADDR)",
                            pg->next_rank, pg->next_addr);
    return ddp_err_hint("check that rank %d is alive and that %s is reachable "
                        "from this host (firewall, DDP_TCP_ADDR)",
                        pg->next_rank, pg->next_addr);
}

/* One connect attempt. 0: connected (hello sent) or retry later (retry_at
 * set); < 0: give up, with the error set. */
static int hs_connect(tcp_pg_t *pg, hs_t *h)
{
    pg->attempts++;
    int fd = connect_once(pg, h->succ, h->deadline);
    if (fd >= 0) {
        pg->next_fd = fd;
        return 0;
    }
    snprintf(h->cause, sizeof h->cause, "%s", ddp_err_ctx()->what);
    int64_t t = now(pg);
    if (!connect_retryable(fd) || t >= h->deadline) {
        int code = fd == -ETIMEDOUT || t >= h->deadline ? DDP_ETIMEOUT : fd;
        return connect_failed(pg, h, code);
    }
    h->retry_at = backoff_next(pg, h->deadline);
    return 0;
}

/* The successor's reply is readable (or its connection ended). 0: checked
 * (out_done), or the connection was dropped and is made again later;
 * < 0: give up. */
DDP_NOINLINE static int hs_reply(tcp_pg_t *pg, hs_t *h)
{
    uint8_t b[TCP_HELLO_LEN];
    char why[160];
    int rc = ddp_sys_recv_all(pg->base.sys, pg->next_fd, b, sizeof b, h->deadline);
    if (rc == 0) {
        if (hello_check(pg, b, pg->next_rank, why, sizeof why) == 0) {
            h->out_done = 1;
            return 0;
        }
        return peer_err(DDP_EPROTOCOL, pg->next_rank, pg->next_addr,
                        now(pg) - h->start,
                        "tcp bootstrap: ring successor rank %d at %s answered "
                        "as %s",
                        pg->next_rank, pg->next_addr, why);
    }
    close_fd(pg, &pg->next_fd);
    if (!connect_retryable(rc) || now(pg) >= h->deadline)
        return peer_err(rc == DDP_ETIMEOUT || now(pg) >= h->deadline ? DDP_ETIMEOUT : rc,
                        pg->next_rank, pg->next_addr, now(pg) - h->start,
                        "tcp bootstrap: ring successor rank %d at %s accepted "
                        "the connection but never completed the handshake (%s)",
                        pg->next_rank, pg->next_addr, ddp_err_name(rc));
    ddp_debug("tcp group \"%s\": successor rank %d dropped the handshake (%s); "
              "reconnecting", pg->base.prefix, pg->next_rank, ddp_err_name(rc));
    h->retry_at = backoff_next(pg, h->deadline);
    return 0;
}

/* The listener is readable: accepts one connection and, when it is the
 * predecessor saying a valid hello, replies (in_done). A stray is closed.
 * < 0 only when accept itself failed for good. */
DDP_NOINLINE static int hs_accept(tcp_pg_t *pg, int lfd, hs_t *h)
{
    ddp_sys_t *sys = pg->base.sys;
    ddp_addr_t peer;
    int fd = ddp_sys_accept(sys, lfd, &peer, now(pg)); /* poll said ready */
    /* A connection aborted before accept is not the predecessor's last
     * word; but even a storm of them must end at the deadline. */
    if (fd == -EINTR || fd == -ECONNABORTED || fd == -EAGAIN || fd == DDP_ETIMEOUT) {
        if (fd != -EAGAIN && fd != DDP_ETIMEOUT)
            transient_pause(pg, h->deadline);
        return 0;
    }
    if (fd < 0) {
        peer_err(fd, pg->prev_rank, pg->prev_addr, now(pg) - h->start,
                 "tcp bootstrap: no valid connection from ring predecessor "
                 "rank %d (%s) arrived (accept failed)",
                 pg->prev_rank, pg->prev_addr);
        return ddp_err_hint("rank %d may have died or may be unable to reach "
                            "this rank's listen address",
                            pg->prev_rank);
    }
    char pa[DDP_ADDR_STRLEN], why[160] = "";
    ddp_addr_format(&peer, pa, sizeof pa);
    uint8_t b[TCP_HELLO_LEN];
    int64_t hello_dl = min64(h->deadline, now(pg) + TCP_HELLO_TIMEOUT_NS);
    int rc = ddp_sys_recv_all(sys, fd, b, sizeof b, hello_dl);
    if (rc)
        snprintf(why, sizeof why, "no hello (%s)", ddp_err_name(rc));
    else if (ddp_fault_fire(DDP_FP_PG_TCP_HANDSHAKE))
        snprintf(why, sizeof why, "fault point %s fired",
                 ddp_fault_name(DDP_FP_PG_TCP_HANDSHAKE));
    else if (hello_check(pg, b, pg->prev_rank, why, sizeof why) == 0) {
        hello_encode(b, pg->base.rank, pg->base.world, pg->hash);
        rc = ddp_sys_send_all(sys, fd, b, sizeof b, h->deadline);
        if (rc == 0) {
            pg->prev_fd = fd;
            h->in_done = 1;
            return 0;
        }
        snprintf(why, sizeof why, "reply failed (%s)", ddp_err_name(rc));
    }
    h->strays++;
    snprintf(h->last, sizeof h->last, "%s: %s", pa, why);
    ddp_debug("tcp group \"%s\": rejected connection from %s", pg->base.prefix,
              h->last);
    ddp_sys_close(sys, fd);
    return 0;
}

/* The deadline passed with the handshake unfinished: says which side. */
DDP_NOINLINE static int hs_timeout(tcp_pg_t *pg, hs_t *h)
{
    int64_t waited = now(pg) - h->start;
    if (!h->out_done && pg->next_fd < 0 && pg->attempts > 0 && h->cause[0])
        return connect_failed(pg, h, DDP_ETIMEOUT);
    if (!h->in_done) {
        char rej[260] = "";
        if (h->strays)
            snprintf(rej, sizeof rej, "; rejected %d stray connection(s), last %s",
                     h->strays, h->last);
        peer_err(DDP_ETIMEOUT, pg->prev_rank, pg->prev_addr, waited,
                 "tcp bootstrap: no valid connection from ring predecessor "
                 "rank %d (%s) arrived%s",
                 pg->prev_rank, pg->prev_addr, rej);
        return ddp_err_hint("rank %d may have died or may be unable to reach "
                            "this rank's listen address",
                            pg->prev_rank);
    }
    return peer_err(DDP_ETIMEOUT, pg->next_rank, pg->next_addr, waited,
                    "tcp bootstrap: ring successor rank %d at %s accepted the "
                    "connection but never completed the handshake (%s)",
                    pg->next_rank, pg->next_addr, ddp_err_name(DDP_ETIMEOUT));
}

/* The ring handshake, both directions at once: connect to the successor and
 * send the hello, then read its reply (a connection it drops is made again
 * after a backoff); accept connections until the predecessor says a valid
 * hello (strays are closed), and reply to it. One poll watches the listener
 * and the outgoing connection together. Waiting in accept alone (as this
 * code did before) is a circular wait: when the successor has rejected this
 * rank's hello, this rank reconnects only after its own accept returns, and
 * if every rank of the ring is in that state, each waits for a predecessor
 * that waits for it, until the deadline (seen 2 times in 108 runs with
 * random faults on pg/tcp/handshake; tests/test_pg_tcp.c replays one). */
DDP_NOINLINE static int handshake(tcp_pg_t *pg, int lfd, const ddp_addr_t *succ,
                                  int64_t start, int64_t deadline)
{
    hs_t h = {.succ = succ, .start = start, .deadline = deadline};
    while (!h.out_done || !h.in_done) {
        int rc = 0;
        if (!h.out_done && pg->next_fd < 0 && now(pg) >= h.retry_at &&
            (rc = hs_connect(pg, &h)) != 0)
            return rc;
        if (now(pg) >= deadline)
            return hs_timeout(pg, &h);
        ddp_pollfd_t p[2];
        int n = 0, il = -1, io = -1;
        if (!h.in_done) {
            il = n;
            p[n++] = (ddp_pollfd_t){.fd = lfd, .events = DDP_POLLIN};
        }
        if (!h.out_done && pg->next_fd >= 0) {
            io = n;
            p[n++] = (ddp_pollfd_t){.fd = pg->next_fd, .events = DDP_POLLIN};
        }
        int64_t wake = !h.out_done && pg->next_fd < 0 ? min64(h.retry_at, deadline)
                                                      : deadline;
        rc = n ? ddp_sys_poll(pg->base.sys, p, n, wake)
               : ddp_sys_sleep_until(pg->base.sys, wake);
        if (rc == -EINTR || rc == -EAGAIN) {
            transient_pause(pg, deadline);
            continue;
        }
        if (rc < 0)
            return rc;
        if (io >= 0 && p[io].revents && (rc = hs_reply(pg, &h)) != 0)
            return rc;
        if (il >= 0 && p[il].revents && (rc = hs_accept(pg, lfd, &h)) != 0)
            return rc;
    }
    return 0;
}

static int bootstrap(tcp_pg_t *pg, int64_t deadline)
{
    int world = pg->base.world, me = pg->base.rank;
    int64_t start = now(pg);
    char akey[160], as[DDP_ADDR_STRLEN] = "";
    tcp_key(pg, akey, sizeof akey, "addr", me);
    ddp_addr_t pub, succ;
    int lfd = tcp_listen(pg, &pub);
    int rc = lfd < 0 ? lfd : 0;
    if (rc == 0) {
        /* "ADDR:PORT HOSTNAME": rank 0 checks the address against the host */
        char val[DDP_ADDR_STRLEN + 80], host[64] = "";
        ddp_addr_format(&pub, as, sizeof as);
        if (ddp_sys_hostname(pg->base.sys, host, sizeof host) != 0 || strchr(host, ' '))
            host[0] = '\0';
        ddp_fmt(val, sizeof val, "%s%s%s", as, host[0] ? " " : "", host);
        rc = ddp_store_set_str(pg->base.store, akey, val, deadline);
        if (rc)
            ddp_err_wrap("tcp bootstrap: could not publish this rank's address "
                         "under \"%s\"",
                         akey);
    } else {
        publish_error(pg, akey);
    }
    if (me == 0) {
        ddp_addr_t *addrs = rc == 0 ? calloc((size_t)world, sizeof *addrs) : NULL;
        char(*hosts)[64] = addrs ? calloc((size_t)world, sizeof *hosts) : NULL;
        if (rc == 0 && !hosts)
            rc = ddp_err_set(-ENOMEM, "tcp bootstrap: out of memory");
        if (rc == 0)
            rc = gather_addrs(pg, addrs, hosts, deadline);
        if (rc == 0)
            rc = check_advertised(pg, addrs, hosts);
        if (rc == 0)
            rc = publish_peers(pg, addrs, NULL, deadline);
        else
            publish_peers_error(pg);
        free(addrs);
        free(hosts);
    }
    if (rc == 0)
        rc = fetch_peers(pg, &succ, deadline);
    if (rc == 0) {
        ddp_debug("tcp group \"%s\": listening on %s, ring %d -> %d -> %d",
                  pg->base.prefix, as, pg->prev_rank, me, pg->next_rank);
        rc = handshake(pg, lfd, &succ, start, deadline);
    }
    if (lfd >= 0) /* the ring is all this group needs */
        ddp_sys_close(pg->base.sys, lfd);
    if (rc)
        close_ring(pg);
    return rc;
}

/* ------------------------------------------------------------ the ring */

/* What is still unsent of this rank's header (hdr_left bytes). */
static const uint8_t *hdr_unsent(const tcp_pg_t *pg)
{
    return pg->hdr_mine + TCP_HDR_LEN - pg->hdr_left;
}

/* Marks the group broken and closes the ring, so both neighbours see EOF
 * at once and fail too instead of waiting for their deadlines. */
static int break_group(tcp_pg_t *pg, int rc)
{
    if (!pg->failed)
        pg->failed = rc;
    if (pg->hdr_left && pg->next_fd >= 0) {
        /* A header still held back goes first (one try, no wait): the
         * successor then names a mismatch of calls itself, not only the
         * EOF behind it. */
        ddp_errsave_t *saved = ddp_err_save();
        (void)ddp_sys_send(pg->base.sys, pg->next_fd, hdr_unsent(pg), pg->hdr_left, 0);
        ddp_err_restore(saved);
    }
    pg->hdr_left = 0;
    close_ring(pg);
    return rc;
}

static int xfer_recv_err(tcp_pg_t *pg, ssize_t r, size_t got, size_t want)
{
    const char *how = r == 0 ? "closed the connection (EOF)"
                             : ddp_err_name((int)r);
    peer_err(r == 0 || r == -ECONNRESET || r == -EPIPE ? DDP_EPEER_LOST : (int)r,
             pg->prev_rank, pg->prev_addr, now(pg) - pg->op_start,
             "tcp %s: ring predecessor rank %d (%s) %s with %zu of %zu bytes "
             "of this step still expected",
             pg->what, pg->prev_rank, pg->prev_addr, how, want - got, want);
    return ddp_err_hint("rank %d (or a rank before it in the ring) exited or "
                        "failed; its own error names the cause",
                        pg->prev_rank);
}

static int xfer_send_err(tcp_pg_t *pg, ssize_t w)
{
    int code = w == 0 || w == -ECONNRESET || w == -EPIPE ? DDP_EPEER_LOST : (int)w;
    peer_err(code, pg->next_rank, pg->next_addr, now(pg) - pg->op_start,
             "tcp %s: sending to ring successor rank %d (%s) failed: %s",
             pg->what, pg->next_rank, pg->next_addr,
             w == 0 ? "connection closed" : ddp_err_name((int)w));
    return ddp_err_hint("rank %d exited or failed; its own error names the "
                        "cause",
                        pg->next_rank);
}

static int xfer_timeout(tcp_pg_t *pg, int recv_pending, size_t got, size_t want)
{
    if (recv_pending) {
        peer_err(DDP_ETIMEOUT, pg->prev_rank, pg->prev_addr,
                 now(pg) - pg->op_start,
                 "tcp %s: timed out waiting for ring predecessor rank %d "
                 "(%s): %zu of %zu bytes of this step received",
                 pg->what, pg->prev_rank, pg->prev_addr, got, want);
        return ddp_err_hint("rank %d (or a rank before it in the ring) is "
                            "stuck, paused, or did not enter this collective",
                            pg->prev_rank);
    }
    peer_err(DDP_ETIMEOUT, pg->next_rank, pg->next_addr, now(pg) - pg->op_start,
             "tcp %s: timed out sending to ring successor rank %d (%s): it "
             "stopped reading",
             pg->what, pg->next_rank, pg->next_addr);
    return ddp_err_hint("rank %d is stuck or did not enter this collective",
                        pg->next_rank);
}

/* One ring step: send slen bytes to the successor while receiving rlen from
 * the predecessor. relay: sbuf == rbuf and only bytes already received are
 * forwarded (the broadcast pipeline). hdr: the predecessor's header of this
 * collective is read (and checked, hdr_check) ahead of the first byte
 * received. This rank's header, when not sent yet, goes in front of the
 * first bytes sent, in the same send, so the successor wakes once for
 * both; a rank that has nothing to send while it waits sends it alone once
 * TCP_HDR_GRACE_NS have passed. */
static int hdr_check(tcp_pg_t *pg, const uint8_t *in);

static int xfer(tcp_pg_t *pg, const void *sbuf, size_t slen, void *rbuf, size_t rlen,
                int relay, int hdr, int64_t deadline)
{
    ddp_sys_t *sys = pg->base.sys;
    const uint8_t *sp = sbuf;
    uint8_t *rp = rbuf, hin[TCP_HDR_LEN];
    size_t soff = 0, roff = 0, hneed = hdr ? TCP_HDR_LEN : 0, hoff = 0;
    while (soff < slen || roff < rlen || hoff < hneed) {
        size_t slimit = relay && roff < slen ? roff : slen;
        /* A header held back with nothing to send it with: alone, once due. */
        int64_t flush_at = pg->op_start + TCP_HDR_GRACE_NS;
        int hold = pg->hdr_left && soff >= slimit;
        int alone = hold && now(pg) >= flush_at;
        ddp_pollfd_t p[2];
        int n = 0, is = -1, ir = -1;
        if (soff < slimit || alone) {
            is = n;
            p[n++] = (ddp_pollfd_t){.fd = pg->next_fd, .events = DDP_POLLOUT};
        }
        if (roff < rlen || hoff < hneed) {
            ir = n;
            p[n++] = (ddp_pollfd_t){.fd = pg->prev_fd, .events = DDP_POLLIN};
        }
        int64_t wake = hold && !alone ? min64(deadline, flush_at) : deadline;
        int rc = ddp_sys_poll(sys, p, n, wake);
        if (rc == -EINTR || rc == -EAGAIN) {
            transient_pause(pg, deadline);
            rc = 0;
        }
        if (rc < 0)
            return rc;
        if (rc == 0) {
            if (now(pg) >= deadline)
                return xfer_timeout(pg, roff < rlen || hoff < hneed, roff, rlen);
            continue;
        }
        if (ir >= 0 && p[ir].revents) {
            int head = hoff < hneed;
            ssize_t r = head ? ddp_sys_recv(sys, pg->prev_fd, hin + hoff, hneed - hoff, 0)
                             : ddp_sys_recv(sys, pg->prev_fd, rp + roff, rlen - roff, 0);
            if (r > 0 && head) {
                hoff += (size_t)r;
                if (hoff == hneed && (rc = hdr_check(pg, hin)) != 0)
                    return rc;
            } else if (r > 0) {
                roff += (size_t)r;
            } else if (r != -EAGAIN && r != -EINTR) {
                return xfer_recv_err(pg, r, roff, rlen);
            }
        }
        if (is >= 0 && p[is].revents) {
            slimit = relay && roff < slen ? roff : slen;
            size_t w = slimit - soff < TCP_CHUNK ? slimit - soff : TCP_CHUNK;
            size_t h = pg->hdr_left;
            ddp_iov_t v[2] = {{hdr_unsent(pg), h}, {sp + soff, w}};
            ssize_t r = h ? ddp_sys_sendv(sys, pg->next_fd, v, w ? 2 : 1, 0)
                          : ddp_sys_send(sys, pg->next_fd, sp + soff, w, 0);
            if (r > 0) {
                size_t took = (size_t)r < h ? (size_t)r : h;
                pg->hdr_left -= took;
                soff += (size_t)r - took;
            } else if (r != -EAGAIN && r != -EINTR) {
                return xfer_send_err(pg, r);
            }
        }
    }
    return 0;
}

/* A step of a collective: the predecessor's header is read ahead of the
 * first bytes this rank receives from it. */
static int ring_xfer(tcp_pg_t *pg, const void *sbuf, size_t slen, void *rbuf,
                     size_t rlen, int relay, int64_t deadline)
{
    int hdr = rlen > 0 && pg->hdr_due;
    if (hdr)
        pg->hdr_due = 0;
    return xfer(pg, sbuf, slen, rbuf, rlen, relay, hdr, deadline);
}

/* Sends what is left of this rank's header now (a rank that sends nothing
 * in this collective, or the end of one). */
static int hdr_flush(tcp_pg_t *pg, int64_t deadline)
{
    if (!pg->hdr_left)
        return 0;
    int rc = ddp_sys_send_all(pg->base.sys, pg->next_fd, hdr_unsent(pg),
                              pg->hdr_left, deadline);
    pg->hdr_left = 0;
    return rc ? xfer_send_err(pg, rc) : 0;
}

typedef struct coll_hdr {
    uint32_t kind;
    uint64_t seq, size;
    uint32_t a, b;
} coll_hdr_t;

static void hdr_encode(uint8_t *p, const coll_hdr_t *h)
{
    put_u32(p, TCP_HDR_TAG);
    put_u32(p + 4, h->kind);
    put_u64(p + 8, h->seq);
    put_u64(p + 16, h->size);
    put_u32(p + 24, h->a);
    put_u32(p + 28, h->b);
}

static void hdr_describe(const coll_hdr_t *h, char *buf, size_t n)
{
    switch (h->kind) {
    case COLL_BROADCAST:
        ddp_fmt(buf, n, "broadcast #%llu (%llu bytes, root %u)",
                (unsigned long long)h->seq, (unsigned long long)h->size, h->a);
        break;
    case COLL_ALLREDUCE:
        ddp_fmt(buf, n, "allreduce #%llu (%llu x %s, %s)",
                (unsigned long long)h->seq, (unsigned long long)h->size,
                ddp_dtype_name((ddp_dtype_t)h->a), ddp_redop_name((ddp_redop_t)h->b));
        break;
    case COLL_ALLGATHER:
        ddp_fmt(buf, n, "allgather #%llu (%llu bytes per rank)",
                (unsigned long long)h->seq, (unsigned long long)h->size);
        break;
    default:
        snprintf(buf, n, "%s #%llu", coll_name(h->kind), (unsigned long long)h->seq);
    }
}

/* Starts a collective: refuses on a dead group, then builds this rank's
 * header (kind, sequence number, size, arguments) for its successor: it
 * leaves with the first bytes this rank sends (ring_xfer). The
 * predecessor's header is read ahead of the first bytes this rank receives
 * from it, or by coll_end when the collective receives nothing from it (a
 * broadcast's root), and must match this rank's: so every rank checks that
 * its neighbour runs the same call before any of that call's data is read,
 * at no round trip or wake-up of its own. Returns 1 when there is nothing
 * to move (world 1). */
static int coll_begin(tcp_pg_t *pg, coll_kind_t kind, uint64_t size, uint32_t a,
                      uint32_t b)
{
    pg->what = coll_name(kind);
    pg->op_start = now(pg);
    if (pg->aborted)
        return ddp_err_set(DDP_ECANCELED, "tcp %s: group \"%s\" was aborted",
                           pg->what, pg->base.prefix);
    if (pg->failed) {
        ddp_err_set(DDP_EPEER_LOST, "tcp %s: group \"%s\" is unusable after "
                                    "an earlier failure (%s)",
                    pg->what, pg->base.prefix, ddp_err_name(pg->failed));
        return ddp_err_hint("destroy the group and create a new one under a "
                            "fresh prefix");
    }
    coll_hdr_t mine = {kind, ++pg->seq, size, a, b};
    if (pg->base.world == 1)
        return 1;
    hdr_encode(pg->hdr_mine, &mine);
    pg->hdr_left = TCP_HDR_LEN;
    pg->hdr_due = 1;
    return 0;
}

/* The predecessor's header of the collective running now, when nothing
 * came from it during the call (coll_end). */
static int hdr_take(tcp_pg_t *pg, int64_t deadline)
{
    pg->hdr_due = 0;
    return xfer(pg, NULL, 0, NULL, 0, 0, 1, deadline);
}

/* The predecessor's header: it must be this rank's own (coll_begin). */
static int hdr_check(tcp_pg_t *pg, const uint8_t *in)
{
    if (get_u32(in) == TCP_HDR_TAG && memcmp(in, pg->hdr_mine, TCP_HDR_LEN) == 0)
        return 0;
    const uint8_t *out = pg->hdr_mine;
    coll_hdr_t mine = {get_u32(out + 4), get_u64(out + 8), get_u64(out + 16),
                       get_u32(out + 24), get_u32(out + 28)};
    coll_hdr_t theirs = {get_u32(in + 4), get_u64(in + 8), get_u64(in + 16),
                         get_u32(in + 24), get_u32(in + 28)};
    char d1[96], d2[96];
    hdr_describe(&mine, d1, sizeof d1);
    hdr_describe(&theirs, d2, sizeof d2);
    peer_err(DDP_EPROTOCOL, pg->prev_rank, pg->prev_addr, -1,
             "tcp %s: ring predecessor rank %d is in %s while this rank "
             "is in %s",
             pg->what, pg->prev_rank,
             get_u32(in) == TCP_HDR_TAG ? d2 : "garbage (no header)", d1);
    return ddp_err_hint("every rank of a group must call the same collectives "
                        "in the same order with the same sizes");
}

/* Ends a collective that succeeded so far: this rank's header, if nothing
 * carried it (a call that moved no bytes), is sent, then a predecessor's
 * header not read yet (nothing came from it) is read and checked. */
static int coll_end(tcp_pg_t *pg, int rc, int64_t deadline)
{
    if (rc == 0)
        rc = hdr_flush(pg, deadline);
    if (rc == 0 && pg->hdr_due)
        rc = hdr_take(pg, deadline);
    pg->hdr_due = 0;
    return rc ? break_group(pg, rc) : 0;
}

/* Block i of n elements split over w blocks (the first n % w one larger). */
typedef struct blocks {
    uint8_t *buf;
    size_t n, esize;
    int w;
} blocks_t;

static size_t blk_off(const blocks_t *b, int i)
{
    size_t base = b->n / (size_t)b->w, rem = b->n % (size_t)b->w;
    size_t ui = (size_t)i;
    return (ui * base + (ui < rem ? ui : rem)) * b->esize;
}
static size_t blk_len(const blocks_t *b, int i)
{
    return blk_off(b, i + 1) - blk_off(b, i);
}
static int mod(int a, int w) { return ((a % w) + w) % w; }

/* world-1 steps: at step s send block own-s, receive block own-s-1; on entry
 * this rank holds block `own` complete, on return all of them. */
static int ring_allgather(tcp_pg_t *pg, const blocks_t *b, int own,
                          int64_t deadline)
{
    int w = pg->base.world;
    for (int s = 0; s < w - 1; s++) {
        int sb = mod(own - s, w), rb = mod(own - s - 1, w);
        int rc = ring_xfer(pg, b->buf + blk_off(b, sb), blk_len(b, sb),
                           b->buf + blk_off(b, rb), blk_len(b, rb), 0, deadline);
        if (rc)
            return rc;
    }
    return 0;
}

/* ------------------------------------------------------------ collectives */

/* Two passes along the ring, O(1) messages per rank: the reduce pass goes
 * 0 -> 1 -> ... -> world-1, each rank folding its own buffer into what it
 * received (combine), so world-1 ends with r0 op r1 op ... in rank order;
 * the result pass goes world-1 -> 0 -> 1 -> ... -> world-2. Every rank ends
 * with the same bytes. Without combine it is a barrier: a rank's result
 * pass arrives only after every rank entered the first. buf holds bytes
 * (count elements of t when combining). */
static int ring_chain(tcp_pg_t *pg, void *buf, size_t bytes, size_t count,
                      ddp_dtype_t t, ddp_redop_t op, int combine,
                      int64_t deadline)
{
    int w = pg->base.world, me = pg->base.rank;
    uint8_t stackbuf[256], *in = stackbuf;
    if (bytes > sizeof stackbuf && !(in = malloc(bytes)))
        return ddp_err_set(-ENOMEM, "tcp %s: out of memory", pg->what);
    int rc = 0;
    if (me > 0) { /* the reduce pass */
        rc = ring_xfer(pg, NULL, 0, in, bytes, 0, deadline);
        if (rc == 0 && combine) {
            ddp_reduce_into(in, buf, count, t, op);
            memcpy(buf, in, bytes);
        }
    }
    if (rc == 0 && me < w - 1)
        rc = ring_xfer(pg, buf, bytes, NULL, 0, 0, deadline);
    if (rc == 0 && me < w - 1) /* the result pass */
        rc = ring_xfer(pg, NULL, 0, buf, bytes, 0, deadline);
    if (rc == 0 && (me == w - 1 || me < w - 2))
        rc = ring_xfer(pg, buf, bytes, NULL, 0, 0, deadline);
    if (in != stackbuf)
        free(in);
    return rc;
}

static int tcp_barrier(ddp_pg_t *g, int64_t deadline)
{
    tcp_pg_t *pg = T(g);
    int rc = coll_begin(pg, COLL_BARRIER, 0, 0, 0);
    if (rc)
        return rc > 0 ? 0 : rc;
    uint8_t token = 1;
    rc = ring_chain(pg, &token, 1, 1, DDP_INT32, DDP_SUM, 0, deadline);
    return coll_end(pg, rc, deadline);
}

static int tcp_broadcast(ddp_pg_t *g, void *buf, size_t bytes, int root,
                         int64_t deadline)
{
    tcp_pg_t *pg = T(g);
    int rc = coll_begin(pg, COLL_BROADCAST, bytes, (uint32_t)root, 0);
    if (rc)
        return rc > 0 ? 0 : rc;
    int d = mod(g->rank - root, g->world);
    if (d == 0)
        rc = ring_xfer(pg, buf, bytes, NULL, 0, 0, deadline);
    else if (d == g->world - 1) { /* it sends nothing: its header goes now */
        rc = hdr_flush(pg, deadline);
        if (rc == 0)
            rc = ring_xfer(pg, NULL, 0, buf, bytes, 0, deadline);
    }
    else
        rc = ring_xfer(pg, buf, bytes, buf, bytes, 1, deadline);
    return coll_end(pg, rc, deadline); /* the root received nothing */
}

static int tcp_allgather(ddp_pg_t *g, const void *in, size_t bytes, void *out,
                         int64_t deadline)
{
    tcp_pg_t *pg = T(g);
    int rc = coll_begin(pg, COLL_ALLGATHER, bytes, 0, 0);
    if (rc < 0)
        return rc;
    uint8_t *o = out;
    /* memmove: an in-place allgather passes in == out + rank * bytes. */
    if (bytes)
        memmove(o + (size_t)g->rank * bytes, in, bytes);
    if (rc > 0)
        return 0;
    blocks_t b = {o, (size_t)g->world * bytes, 1, g->world};
    rc = ring_allgather(pg, &b, g->rank, deadline);
    return coll_end(pg, rc, deadline);
}

/* Large buffers: reduce-scatter (after it rank r owns block r+1 fully
 * reduced), then allgather of the reduced blocks. */
static int allreduce_ring(tcp_pg_t *pg, void *buf, size_t count, ddp_dtype_t t,
                          ddp_redop_t op, int64_t deadline)
{
    int w = pg->base.world, me = pg->base.rank;
    blocks_t b = {buf, count, ddp_dtype_size(t), w};
    uint8_t *tmp = malloc(blk_len(&b, 0) ? blk_len(&b, 0) : 1);
    if (!tmp)
        return ddp_err_set(-ENOMEM, "tcp allreduce: out of memory");
    int rc = 0;
    for (int s = 0; rc == 0 && s < w - 1; s++) {
        int sb = mod(me - s, w), rb = mod(me - s - 1, w);
        rc = ring_xfer(pg, b.buf + blk_off(&b, sb), blk_len(&b, sb), tmp,
                       blk_len(&b, rb), 0, deadline);
        if (rc == 0)
            ddp_reduce_into(b.buf + blk_off(&b, rb), tmp, blk_len(&b, rb) / b.esize,
                            t, op);
    }
    free(tmp);
    if (rc == 0)
        rc = ring_allgather(pg, &b, mod(me + 1, w), deadline);
    return rc;
}

static int tcp_allreduce(ddp_pg_t *g, void *buf, size_t count, ddp_dtype_t t,
                         ddp_redop_t op, int64_t deadline)
{
    tcp_pg_t *pg = T(g);
    int rc = coll_begin(pg, COLL_ALLREDUCE, count, (uint32_t)t, (uint32_t)op);
    if (rc)
        return rc > 0 ? 0 : rc;
    if (count * ddp_dtype_size(t) < TCP_SMALL_BYTES)
        rc = ring_chain(pg, buf, count * ddp_dtype_size(t), count, t, op, 1,
                        deadline);
    else
        rc = allreduce_ring(pg, buf, count, t, op, deadline);
    return coll_end(pg, rc, deadline);
}

static int tcp_init(const ddp_pg_init_t *in, ddp_pg_t **out);

typedef struct member {
    int32_t key;
    int rank;
} member_t;

static int member_cmp(const void *a, const void *b)
{
    const member_t *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

static int tcp_split(ddp_pg_t *g, int color, int key, const char *name,
                     ddp_pg_t **out, int64_t deadline)
{
    tcp_pg_t *pg = T(g);
    *out = NULL;
    int w = g->world;
    int rc = coll_begin(pg, COLL_SPLIT, 0, 0, 0);
    if (rc < 0)
        return rc;
    uint8_t *ck = malloc((size_t)w * 8);
    member_t *m = malloc((size_t)w * sizeof *m);
    if (!ck || !m) {
        free(ck);
        free(m);
        return break_group(pg, ddp_err_set(-ENOMEM, "tcp split: out of memory"));
    }
    put_u32(ck + (size_t)g->rank * 8, (uint32_t)color);
    put_u32(ck + (size_t)g->rank * 8 + 4, (uint32_t)key);
    blocks_t b = {ck, (size_t)w * 8, 1, w};
    if (rc == 0)
        rc = coll_end(pg, ring_allgather(pg, &b, g->rank, deadline), deadline);
    int n = 0, newrank = -1;
    for (int r = 0; rc >= 0 && r < w; r++)
        if ((int)get_u32(ck + (size_t)r * 8) == color)
            m[n++] = (member_t){(int32_t)get_u32(ck + (size_t)r * 8 + 4), r};
    free(ck);
    if (rc < 0 || color == DDP_PG_NO_COLOR) {
        free(m);
        return rc < 0 ? rc : 0;
    }
    qsort(m, (size_t)n, sizeof *m, member_cmp);
    for (int i = 0; i < n; i++)
        if (m[i].rank == g->rank)
            newrank = i;
    free(m);
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s/split/%s/%d", g->prefix, name, color);
    ddp_pg_init_t sub = {.sys = g->sys, .store = g->store, .prefix = prefix,
                         .rank = newrank, .world = n, .deadline = deadline,
                         .device = -1};
    rc = tcp_init(&sub, out);
    if (rc)
        ddp_err_wrap("tcp split of \"%s\" (color %d, key %d)", g->prefix, color,
                     key);
    return rc;
}

static void tcp_abort(ddp_pg_t *g)
{
    tcp_pg_t *pg = T(g);
    pg->aborted = 1;
    close_ring(pg);
}

static void tcp_destroy(ddp_pg_t *g)
{
    if (!g)
        return;
    close_ring(T(g));
    free(T(g)->cause);
    free(g);
}

static int tcp_init(const ddp_pg_init_t *in, ddp_pg_t **out)
{
    *out = NULL;
    int rc = ddp__pg_init_check("tcp", in);
    if (rc)
        return rc;
    tcp_pg_t *pg = calloc(1, sizeof *pg);
    if (!pg)
        return ddp_err_set(-ENOMEM, "tcp group: out of memory");
    ddp__pg_header_init(&pg->base, &ddp__pg_tcp_ops, in);
    pg->next_fd = pg->prev_fd = -1;
    pg->next_rank = pg->prev_rank = in->rank;
    pg->hash = fnv1a(in->prefix);
    ddp_rng_seed(&pg->rng, pg->hash ^ (uint64_t)in->rank * UINT64_C(0x9e3779b97f4a7c15));
    pg->backoff = TCP_BACKOFF_INITIAL_NS;
    pg->what = "bootstrap";
    if (in->world > 1 && (rc = bootstrap(pg, in->deadline)) != 0) {
        tcp_destroy(&pg->base);
        return rc;
    }
    *out = &pg->base;
    return 0;
}

const ddp_pg_ops_t ddp__pg_tcp_ops = {
    .name = "tcp",
    .init = tcp_init,
    .barrier = tcp_barrier,
    .broadcast = tcp_broadcast,
    .allreduce = tcp_allreduce,
    .allgather = tcp_allgather,
    .split = tcp_split,
    .abort = tcp_abort,
    .destroy = tcp_destroy,
};
