/* tests/store_diff.c — the store family of the differential check: see
 * tests/store_diff.h. Every sequence has its own key prefix (torch's server
 * is shared by all of them) and 1 to 3 connections to each server, plus a
 * watcher at times; each step sends one request's bytes to both servers,
 * reads the reply on its connection (a request without one is followed by
 * a CHECK of no keys, a barrier), drains every other connection (WAIT
 * wake-ups, WATCH_KEY notifications), and compares what each connection
 * got and whether it was closed. Every read has a deadline. */
#include "store_diff.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/store.h"

extern char **environ;

#define MS ((int64_t)1000000)
#define SD_MAXC 4        /* connections a sequence holds to each server */
#define SD_NKEYS 4       /* keys a sequence's requests name */
#define SD_GRACE (1 * MS)    /* how long an unanswered WAIT is given */
#define SD_LAG (1000 * MS)   /* how long a server may trail the other */
#define SD_REPLY (20000 * MS) /* a reply that is due (a 150,000-key CHECK) */
#define SD_LIMIT_KEY 8192
#define SD_LIMIT_VALUE ((size_t)8 << 20)
#define SD_LIMIT_COUNT ((size_t)128 << 10)

enum { T, D, SIDES }; /* torch, ddpsim */
enum { R_NONE, R_U8, R_I64, R_BYTES, R_WAIT, R_CLOSE };

typedef struct sbuf {
    uint8_t *p;
    size_t n, cap;
} sbuf_t;

typedef struct key {
    sbuf_t name, val;
    int present, global;
} skey_t;

typedef struct req {
    int conn, op, reply;
    int barrier; /* a CHECK of no keys follows it */
    sbuf_t b;
    size_t maxkey, maxval, nkeys;
    int key; /* the pool key a one-key request names, or -1 */
    int64_t delta;
} req_t;

/* What the driver knows of a connection (from torch's replies). */
typedef struct cstate {
    int waits;    /* WAITs sent minus STOP_WAITINGs received */
    int rewait;   /* a WAIT was sent while one was unanswered */
    int watcher;  /* sent WATCH_KEY: nothing else goes on it */
    int cas_woke; /* a COMPARE_SET created a key it waits for */
    unsigned awaited; /* pool keys it waits for */
} cstate_t;

typedef struct seq {
    ddp_sys_t *sys;
    const ddp_addr_t *srv;
    ddp_rng_t *rng;
    int big, nconn;
    int ctl[SIDES];
    int fd[SIDES][SD_MAXC], closed[SIDES][SD_MAXC];
    sbuf_t got[SIDES][SD_MAXC];
    cstate_t cs[SD_MAXC];
    long idx, step;
    skey_t keys[SD_NKEYS];
    char prefix[48];
    int64_t base[SIDES];
    sd_stats_t *st;
} seq_t;

static const char *const named_names[SD_NNAMED] = {
    "GET of a missing key",
    "a key over 8 KiB",
    "a value over 8 MiB",
    "more than 128 Ki keys in a CHECK or WAIT",
    "opcodes 9-17 (newer tables)",
    "ADD past int64",
    "COMPARE_SET creating an awaited key",
    "a WAIT after an unanswered WAIT",
};

const char *sd_named_name(int which)
{
    return which >= 0 && which < SD_NNAMED ? named_names[which] : "?";
}

/* ------------------------------------------------------------ buffers */

static void sb_put(sbuf_t *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n)
            c *= 2;
        uint8_t *q = realloc(b->p, c);
        if (!q) {
            fprintf(stderr, "store_diff: out of memory growing a buffer to %zu bytes\n", c);
            abort();
        }
        b->p = q;
        b->cap = c;
    }
    if (n && p)
        memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void sb_u8(sbuf_t *b, uint8_t v) { sb_put(b, &v, 1); }
static void sb_u64(sbuf_t *b, uint64_t v) { sb_put(b, &v, 8); }
static void sb_bytes(sbuf_t *b, const sbuf_t *v)
{
    sb_u64(b, v->n);
    sb_put(b, v->p, v->n);
}
static void sb_set(sbuf_t *b, const void *p, size_t n)
{
    b->n = 0;
    sb_put(b, p, n);
}
static int sb_eq(const sbuf_t *a, const sbuf_t *b)
{
    return a->n == b->n && (!a->n || memcmp(a->p, b->p, a->n) == 0);
}

/* -------------------------------------------------------- the torch side */

static int torch_read_port(sd_torch_t *t, ddp_sys_t *sys, int out, char *why, size_t n)
{
    char line[128];
    size_t len = 0;
    int64_t dl = ddp_sys_deadline_in(sys, 120000 * MS);
    while (len + 1 < sizeof line) {
        ddp_pollfd_t p = {out, DDP_POLLIN, 0};
        if (ddp_sys_poll(sys, &p, 1, dl) <= 0) {
            snprintf(why, n, "torch's TCPStore helper printed no port within 120 s");
            return -1;
        }
        ssize_t k = read(out, line + len, 1);
        if (k <= 0)
            break;
        if (line[len] == '\n')
            break;
        len++;
    }
    line[len] = '\0';
    unsigned p = 0;
    if (sscanf(line, "port %u", &p) == 1 && p > 0 && p < 65536) {
        t->port = (uint16_t)p;
        return 0;
    }
    int status = 0;
    waitpid((pid_t)t->pid, &status, 0);
    t->pid = 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
        snprintf(why, n, "no torch (sh scripts/deps.sh --torch)");
        return 1;
    }
    snprintf(why, n, "torch's TCPStore helper ended (exit %d) before listening (its "
                     "error is above; a port in use: give another, or 0)",
             WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    return -1;
}

int sd_torch_start(sd_torch_t *t, const char *script, uint16_t port, char *why, size_t n)
{
    int in[2], out[2];
    memset(t, 0, sizeof *t);
    t->in_fd = -1;
    if (pipe(in) != 0 || pipe(out) != 0) {
        snprintf(why, n, "pipe: %s", strerror(errno));
        return -1;
    }
    char ports[8];
    snprintf(ports, sizeof ports, "%u", port);
    char *argv[] = {"sh", "scripts/torch-python", (char *)script, "127.0.0.1", ports, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    pid_t pid;
    int rc = posix_spawnp(&pid, "sh", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    if (rc != 0) {
        close(in[1]);
        close(out[0]);
        snprintf(why, n, "cannot start sh scripts/torch-python: %s", strerror(rc));
        return -1;
    }
    t->pid = pid;
    t->in_fd = in[1];
    ddp_sys_t *sys = ddp_sys_posix_new(ddp_env_new());
    rc = sys ? torch_read_port(t, sys, out[0], why, n) : -1;
    if (sys)
        ddp_sys_free(sys);
    close(out[0]);
    if (rc != 0)
        sd_torch_stop(t);
    return rc;
}

void sd_torch_stop(sd_torch_t *t)
{
    if (t->in_fd >= 0)
        close(t->in_fd);
    t->in_fd = -1;
    if (t->pid <= 0)
        return;
    /* Closing its stdin ends it; one still there after 5 s is killed. */
    ddp_sys_t *sys = ddp_sys_posix_new(ddp_env_new());
    int status;
    if (!sys || ddp_sys_wait(sys, t->pid, &status, ddp_sys_deadline_in(sys, 5000 * MS)) != 0) {
        kill((pid_t)t->pid, SIGKILL);
        waitpid((pid_t)t->pid, NULL, 0);
    }
    if (sys)
        ddp_sys_free(sys);
    t->pid = 0;
}

/* ------------------------------------------------------------ the wire */

/* Reads what conn c of side has (into got) until deadline: 1 read some,
 * 0 nothing by then, -1 closed (EOF or an error). */
static int rd_some(seq_t *s, int side, int c, int64_t deadline)
{
    if (s->closed[side][c])
        return -1;
    uint8_t buf[65536];
    ssize_t k = ddp_sys_recv(s->sys, s->fd[side][c], buf, sizeof buf, deadline);
    if (k > 0) {
        sb_put(&s->got[side][c], buf, (size_t)k);
        return 1;
    }
    if (k == -EAGAIN || k == DDP_ETIMEOUT)
        return 0;
    s->closed[side][c] = 1;
    return -1;
}

/* Everything conn c of side has now, without waiting. */
static void drain(seq_t *s, int side, int c)
{
    while (rd_some(s, side, c, 0) > 0)
        ;
}

/* Reads whatever any connection of side has, waiting until deadline for
 * something: 1 read some (or saw a close), 0 nothing by then. Reading
 * them all keeps torch's server, which sends with blocking writes, from
 * stalling on a connection nobody reads (a watcher told of a large value). */
static int pump(seq_t *s, int side, int64_t deadline)
{
    ddp_pollfd_t p[SD_MAXC];
    int map[SD_MAXC], n = 0;
    for (int c = 0; c < s->nconn; c++)
        if (!s->closed[side][c]) {
            p[n] = (ddp_pollfd_t){s->fd[side][c], DDP_POLLIN, 0};
            map[n++] = c;
        }
    if (!n || ddp_sys_poll(s->sys, p, n, deadline) <= 0)
        return 0;
    for (int i = 0; i < n; i++)
        if (p[i].revents)
            rd_some(s, side, map[i], 0);
    return 1;
}

/* Bytes a reply of kind needs, given what has arrived. */
static size_t need(int kind, const sbuf_t *g)
{
    uint64_t len = 0;
    switch (kind) {
    case R_U8:
        return 1;
    case R_I64:
        return 8;
    case R_BYTES:
        if (g->n < 8)
            return 8;
        memcpy(&len, g->p, 8);
        return len > ((uint64_t)64 << 20) ? g->n : (size_t)(8 + len);
    default:
        return 0;
    }
}

/* The reply of kind on conn c of side and the barrier's, read until
 * complete, closed or the deadline (whichever first). */
static void rd_reply(seq_t *s, int side, int c, int kind, int barrier, int64_t deadline)
{
    while (!s->closed[side][c] &&
           s->got[side][c].n < need(kind, &s->got[side][c]) + (size_t)barrier)
        if (pump(s, side, deadline) <= 0)
            return;
}

static int send_req(seq_t *s, int side, int c, const sbuf_t *b)
{
    if (s->closed[side][c])
        return -1;
    int rc = ddp_sys_send_all(s->sys, s->fd[side][c], b->p, b->n,
                              ddp_sys_deadline_in(s->sys, SD_REPLY));
    if (rc != 0)
        s->closed[side][c] = 1;
    return rc;
}

static int conn_open(seq_t *s, int side, int *fd)
{
    int rc = ddp_sys_connect(s->sys, &s->srv[side], ddp_sys_deadline_in(s->sys, 5000 * MS));
    *fd = rc;
    if (rc < 0)
        snprintf(s->st->first, sizeof s->st->first, "cannot connect to %s's store: error %d",
                 side == T ? "torch" : "ddpsim", rc);
    return rc < 0 ? -1 : 0;
}

/* One request on the control connection, its 8-byte reply into *v. */
static int ctl_i64(seq_t *s, int side, const sbuf_t *b, int64_t *v)
{
    int fd = s->ctl[side];
    uint64_t r;
    int64_t dl = ddp_sys_deadline_in(s->sys, SD_REPLY);
    if (ddp_sys_send_all(s->sys, fd, b->p, b->n, dl) != 0 ||
        ddp_sys_recv_all(s->sys, fd, &r, 8, dl) != 0)
        return -1;
    *v = (int64_t)r;
    return 0;
}

/* (Re)opens side's control connection when it is gone. */
static int ctl_ready(seq_t *s, int side)
{
    if (s->ctl[side] >= 0)
        return 0;
    return conn_open(s, side, &s->ctl[side]);
}

/* ------------------------------------------------------------ generation */

static uint64_t below(seq_t *s, uint64_t n) { return ddp_rng_below(s->rng, n); }

static void rand_bytes(seq_t *s, sbuf_t *b, size_t n)
{
    b->n = 0;
    if (b->cap < n) {
        sb_put(b, NULL, n); /* grows the buffer */
        b->n = 0;
    }
    ddp_rng_fill(s->rng, b->p, n);
    b->n = n;
}

/* Key slot i: mostly short, some binary (NUL bytes), long (up to the 8 KiB
 * limit), the bare prefix (slot 0), the one global empty key (slot 3),
 * over 8 KiB. No two slots name the same key (each but the bare prefix
 * and the global key carries the slot's number): the model keeps one
 * state a key. */
static void gen_key(seq_t *s, int i, skey_t *k)
{
    unsigned r = (unsigned)below(s, 100);
    char tag[16];
    snprintf(tag, sizeof tag, "k%d", i);
    sb_set(&k->name, s->prefix, strlen(s->prefix));
    k->present = k->global = 0;
    k->val.n = 0;
    if (r >= 88 && r < 94 && i == 0)
        return; /* the prefix alone */
    if (r >= 94 && r < 99 && i == SD_NKEYS - 1) {
        k->name.n = 0;
        k->global = 1;
        return;
    }
    sb_put(&k->name, tag, strlen(tag));
    if (r >= 70 && r < 80) {
        sbuf_t bin = {0};
        rand_bytes(s, &bin, 1 + (size_t)below(s, 12));
        sb_put(&k->name, bin.p, bin.n);
        free(bin.p);
    } else if (r >= 80 && r < 88) {
        size_t want = 200 + (size_t)below(s, SD_LIMIT_KEY - 200 + 1);
        while (k->name.n < want)
            sb_u8(&k->name, (uint8_t)('a' + k->name.n % 26));
    } else if (r == 99 && below(s, 4) == 0) {
        size_t want = SD_LIMIT_KEY + 1 + (size_t)below(s, 200);
        while (k->name.n < want)
            sb_u8(&k->name, 'o');
    }
}

static const char *const odd_values[] = {
    "12abc", " 7", "\t-3x", "+5", "-", "abc", "0x1f", "  ", "9223372036854775807",
    "-9223372036854775808", "9223372036854775800", "99999999999999999999", "\n42", "1e3",
};

static void gen_value(seq_t *s, sbuf_t *v)
{
    unsigned r = (unsigned)below(s, 1000);
    char txt[32];
    v->n = 0;
    if (r < 200)
        return;
    if (r < 450) {
        int len = snprintf(txt, sizeof txt, "%d", (int)below(s, 201) - 100);
        sb_put(v, txt, (size_t)len);
    } else if (r < 600) {
        const char *o = odd_values[below(s, sizeof odd_values / sizeof *odd_values)];
        sb_put(v, o, strlen(o));
    } else if (r < 780) {
        size_t n = 1 + (size_t)below(s, 20);
        for (size_t i = 0; i < n; i++)
            sb_u8(v, (uint8_t)(' ' + below(s, 95)));
    } else if (r < 940) {
        rand_bytes(s, v, 1 + (size_t)below(s, 300));
    } else if (r < 960) {
        rand_bytes(s, v, 301 + (size_t)below(s, 4096));
    } else if (r < 996 || !s->big) {
        rand_bytes(s, v, ((size_t)64 << 10) + (size_t)below(s, (size_t)960 << 10));
    } else {
        rand_bytes(s, v, SD_LIMIT_VALUE + below(s, 2)); /* 8 MiB, or one byte more */
    }
}

static int64_t gen_delta(seq_t *s)
{
    unsigned r = (unsigned)below(s, 100);
    if (r < 50)
        return (int64_t)below(s, 21) - 10;
    if (r < 65)
        return 0;
    if (r < 80)
        return (int64_t)(((uint64_t)1 << 62) + below(s, (uint64_t)1 << 62)) * (below(s, 2) ? 1 : -1);
    if (r < 90)
        return below(s, 2) ? INT64_MAX : INT64_MIN;
    return (int64_t)ddp_rng_next(s->rng);
}

/* ------------------------------------------------------------ requests */

static void req_begin(req_t *r, int conn, int op, int reply)
{
    r->conn = conn;
    r->op = op;
    r->reply = reply;
    r->b.n = 0;
    r->maxkey = r->maxval = r->nkeys = 0;
    r->key = -1;
    r->delta = 0;
    r->barrier = reply == R_NONE;
    sb_u8(&r->b, (uint8_t)op);
}
static void req_key(req_t *r, const sbuf_t *k)
{
    sb_bytes(&r->b, k);
    if (k->n > r->maxkey)
        r->maxkey = k->n;
}
static void req_val(req_t *r, const sbuf_t *v)
{
    sb_bytes(&r->b, v);
    if (v->n > r->maxval)
        r->maxval = v->n;
}

/* A pool key; waitable: not the global key, not over the limit. */
static int pick_key(seq_t *s, int waitable)
{
    for (int tries = 0; tries < 16; tries++) {
        int i = (int)below(s, SD_NKEYS);
        const skey_t *k = &s->keys[i];
        if (!waitable || (!k->global && k->name.n <= SD_LIMIT_KEY))
            return i;
    }
    return -1;
}

/* A key the model holds, most of the time (a GET of a missing key makes
 * torch close the connection and ends the sequence). */
static int pick_present(seq_t *s)
{
    int i = pick_key(s, 0);
    for (int j = 0; j < SD_NKEYS && below(s, 100) < 97; j++)
        if (s->keys[(i + j) % SD_NKEYS].present)
            return (i + j) % SD_NKEYS;
    return i;
}

static int any_present(const seq_t *s)
{
    for (int i = 0; i < SD_NKEYS; i++)
        if (s->keys[i].present)
            return 1;
    return 0;
}

/* std::stoll as torch applies it to a counter: 1 and *v, or 0. */
static int counter(const sbuf_t *v, int64_t *out)
{
    size_t i = 0;
    while (i < v->n && (v->p[i] == ' ' || (v->p[i] >= '\t' && v->p[i] <= '\r')))
        i++;
    int neg = i < v->n && v->p[i] == '-';
    i += i < v->n && (v->p[i] == '-' || v->p[i] == '+');
    if (i >= v->n || v->p[i] < '0' || v->p[i] > '9')
        return 0;
    int64_t acc = 0;
    for (; i < v->n && v->p[i] >= '0' && v->p[i] <= '9'; i++)
        if (__builtin_mul_overflow(acc, 10, &acc) ||
            __builtin_add_overflow(acc, neg ? -(v->p[i] - '0') : v->p[i] - '0', &acc))
            return 0;
    *out = acc;
    return 1;
}

/* WAIT (or CHECK) on 1 to 3 pool keys, or on many: one to three pool keys
 * named over and over, or as many keys nobody sets. */
static void gen_keys_req(seq_t *s, req_t *r, int c, int op)
{
    static const size_t many[] = {1024, 16384, 16385, 32768, 32769, 65536, 131072, 131073, 150000};
    /* 128 Ki keys and more: one big request in ten, in the full run only
     * (torch reads a key in two recv calls: half a second each) */
    int huge = s->big && below(s, 10) == 0;
    int big = below(s, 100) < (op == DDP_STORE_LOP_WAIT ? 4 : 1);
    size_t n = big ? many[huge ? 6 + below(s, 3) : below(s, 6)]
                   : (size_t)below(s, op == DDP_STORE_LOP_CHECK ? 5 : 4);
    if (!big && op == DDP_STORE_LOP_WAIT && n == 0)
        n = 1 + (size_t)below(s, 3);
    int fresh = big && below(s, 3) == 0, pool[3];
    int m = 1 + (int)below(s, 3);
    for (int i = 0; i < m; i++)
        if ((pool[i] = pick_key(s, 1)) < 0 || (big && s->keys[pool[i]].name.n > 256))
            fresh = 1; /* many long keys would be a request over 64 MiB */
    req_begin(r, c, op, op == DDP_STORE_LOP_WAIT ? R_WAIT : R_U8);
    sb_u64(&r->b, n);
    r->nkeys = n;
    sbuf_t k = {0};
    for (size_t i = 0; i < n; i++) {
        char tail[24];
        if (fresh) {
            sb_set(&k, s->prefix, strlen(s->prefix));
            sb_put(&k, tail, (size_t)snprintf(tail, sizeof tail, "w%zu", i));
            req_key(r, &k);
        } else {
            req_key(r, &s->keys[pool[big ? i % (size_t)m : (size_t)below(s, (uint64_t)m)]].name);
        }
    }
    free(k.p);
    s->st->waits_big += op == DDP_STORE_LOP_WAIT && n >= 16384;
    if (op == DDP_STORE_LOP_WAIT && !fresh)
        for (int i = 0; i < m; i++)
            s->cs[c].awaited |= 1u << pool[i];
}

/* What COMPARE_SET replies, by torch 1.13's rules. */
static const sbuf_t *cas_result(const skey_t *k, const sbuf_t *expected, const sbuf_t *desired)
{
    if (!k->present)
        return expected->n ? expected : desired;
    return sb_eq(&k->val, expected) ? desired : &k->val;
}

static void gen_one_key(seq_t *s, req_t *r, int c, int op)
{
    int reply = op == DDP_STORE_LOP_SET ? R_NONE
                : op == DDP_STORE_LOP_WATCH_KEY ? R_U8
                : op == DDP_STORE_LOP_GET || op == DDP_STORE_LOP_COMPARE_SET ? R_BYTES
                                                                             : R_I64;
    int i = op == DDP_STORE_LOP_GET ? pick_present(s)
            : op == DDP_STORE_LOP_WATCH_KEY ? pick_key(s, 1) : pick_key(s, 0);
    if (i < 0)
        i = 0;
    req_begin(r, c, op, reply);
    r->key = i;
    req_key(r, &s->keys[i].name);
    sbuf_t v = {0};
    if (op == DDP_STORE_LOP_SET) {
        gen_value(s, &v);
        req_val(r, &v);
    } else if (op == DDP_STORE_LOP_ADD) {
        r->delta = gen_delta(s);
        sb_u64(&r->b, (uint64_t)r->delta);
    } else if (op == DDP_STORE_LOP_COMPARE_SET) {
        unsigned how = (unsigned)below(s, 10);
        if (how < 4)
            sb_set(&v, s->keys[i].val.p, s->keys[i].val.n);
        else if (how >= 7)
            gen_value(s, &v);
        req_val(r, &v);
        sbuf_t want = {0};
        gen_value(s, &want);
        req_val(r, &want);
        r->barrier = cas_result(&s->keys[i], &v, &want)->n == 0;
        free(want.p);
    }
    if (op == DDP_STORE_LOP_GET)
        r->barrier = !s->keys[i].present || !s->keys[i].val.n;
    free(v.p);
}

/* An opcode torch 1.13's table does not have (9 - 255), with a key and a
 * value after it (a current op needs arguments to do anything). */
static void gen_unknown(seq_t *s, req_t *r, int c)
{
    req_begin(r, c, 9 + (int)below(s, 247), R_CLOSE);
    if (below(s, 2))
        r->b.p[0] = (uint8_t)(r->op = 9 + (int)below(s, 9));
    sbuf_t v = {0};
    gen_value(s, &v);
    int i = pick_key(s, 1);
    req_key(r, &s->keys[i < 0 ? 0 : i].name);
    req_val(r, &v);
    free(v.p);
}

/* A live connection for the next request: mostly one that is free (no
 * WAIT unanswered, not a watcher); -1 when none is live. */
static int pick_conn(seq_t *s, int *free_n)
{
    int live[SD_MAXC], freec[SD_MAXC], nl = 0, nf = 0;
    for (int c = 0; c < s->nconn; c++) {
        if (s->closed[T][c] || s->closed[D][c])
            continue;
        live[nl++] = c;
        if (!s->cs[c].waits && !s->cs[c].watcher)
            freec[nf++] = c;
    }
    *free_n = nf;
    if (!nl)
        return -1;
    if (nf && below(s, 10) < 8)
        return freec[below(s, (uint64_t)nf)];
    return live[below(s, (uint64_t)nl)];
}

/* The next request; 0, or -1 when no connection is left. */
static int gen_step(seq_t *s, req_t *r)
{
    int nfree, c = pick_conn(s, &nfree);
    if (c < 0)
        return -1;
    cstate_t *cs = &s->cs[c];
    if (cs->watcher) {
        gen_one_key(s, r, c, DDP_STORE_LOP_WATCH_KEY);
        return 0;
    }
    if (cs->waits) {
        cs->rewait = 1;
        gen_keys_req(s, r, c, DDP_STORE_LOP_WAIT);
        return 0;
    }
    unsigned w = (unsigned)below(s, 93);
    if (w >= 16 && w < 28 && !any_present(s) && below(s, 100) < 97)
        w = 0; /* a GET of a missing key ends the sequence: not too often */
    if (w < 16)
        gen_one_key(s, r, c, DDP_STORE_LOP_SET);
    else if (w < 28)
        gen_one_key(s, r, c, DDP_STORE_LOP_GET);
    else if (w < 40)
        gen_one_key(s, r, c, DDP_STORE_LOP_ADD);
    else if (w < 50)
        gen_keys_req(s, r, c, DDP_STORE_LOP_CHECK);
    else if (w < 64)
        gen_keys_req(s, r, c, DDP_STORE_LOP_WAIT);
    else if (w < 74)
        gen_one_key(s, r, c, DDP_STORE_LOP_COMPARE_SET);
    else if (w < 82)
        gen_one_key(s, r, c, DDP_STORE_LOP_DELETE_KEY);
    else if (w < 88)
        req_begin(r, c, DDP_STORE_LOP_GETNUMKEYS, R_I64);
    else if (w < 92 && nfree > 1)
        gen_one_key(s, r, c, DDP_STORE_LOP_WATCH_KEY), cs->watcher = 1;
    else if (below(s, 2))
        gen_unknown(s, r, c);
    else
        gen_one_key(s, r, c, DDP_STORE_LOP_ADD);
    return 0;
}

/* The model (torch 1.13's rules) after r took effect: which keys exist,
 * with what value. It only steers the generator. */
static void model_apply(seq_t *s, const req_t *r)
{
    if (r->key < 0)
        return;
    skey_t *k = &s->keys[r->key];
    const uint8_t *p = r->b.p + 1 + 8 + k->name.n; /* past op and key */
    uint64_t n1 = 0, n2 = 0;
    int64_t cur = 0;
    char txt[24];
    switch (r->op) {
    case DDP_STORE_LOP_SET:
        memcpy(&n1, p, 8);
        sb_set(&k->val, p + 8, (size_t)n1);
        k->present = 1;
        break;
    case DDP_STORE_LOP_ADD:
        if (k->present && !counter(&k->val, &cur))
            break;
        sb_set(&k->val, txt, (size_t)snprintf(txt, sizeof txt, "%" PRId64,
                                              (int64_t)((uint64_t)cur + (uint64_t)r->delta)));
        k->present = 1;
        break;
    case DDP_STORE_LOP_COMPARE_SET:
        memcpy(&n1, p, 8);
        memcpy(&n2, p + 8 + n1, 8);
        if (k->present ? (k->val.n == n1 && !memcmp(k->val.p, p + 8, n1)) : n1 == 0) {
            for (int c = 0; c < s->nconn && !k->present; c++)
                s->cs[c].cas_woke |= s->cs[c].waits && (s->cs[c].awaited >> r->key & 1);
            sb_set(&k->val, p + 16 + n1, (size_t)n2);
            k->present = 1;
        }
        break;
    case DDP_STORE_LOP_DELETE_KEY:
        k->present = 0;
        break;
    }
}

/* ------------------------------------------------------------ one step */

/* A CHECK of no keys: READY once the requests before it took effect. It
 * follows a request without a reply, and one whose reply the model says
 * is an empty value: torch 1.13 sends a value's length with MSG_MORE and
 * then nothing, which Linux holds back for 200 ms unless another reply
 * follows. (Not after every request: torch's sockets have Nagle on, and a
 * second small reply waits for the client's delayed ACK.) */
static const sbuf_t barrier = {(uint8_t *)"\x04\0\0\0\0\0\0\0\0", 9, 9};

static void step_send(seq_t *s, const req_t *r)
{
    for (int side = 0; side < SIDES; side++) {
        for (int c = 0; c < s->nconn; c++)
            s->got[side][c].n = 0;
        if (r && send_req(s, side, r->conn, &r->b) == 0 && r->barrier)
            send_req(s, side, r->conn, &barrier);
    }
}

/* Side is behind the other on conn c: fewer bytes, or open where the
 * other closed (checked only where a close may come without a reply). */
static int lagging(const seq_t *s, int side, int c, int closes)
{
    if (s->closed[side][c])
        return 0;
    return s->got[!side][c].n > s->got[side][c].n || (closes && s->closed[!side][c]);
}

/* r goes past one of ddpsim's limits (none of torch 1.13's). */
static int over_limit(const req_t *r)
{
    return r->maxkey > SD_LIMIT_KEY || r->maxval > SD_LIMIT_VALUE || r->nkeys > SD_LIMIT_COUNT;
}

/* side surely closes r's connection (r has no reply): torch 1.13 on an
 * opcode its table lacks, ddpsim past a limit or on opcode 18 and up. */
static int closes_on(const req_t *r, int side)
{
    if (r->reply != R_CLOSE)
        return side == D && over_limit(r);
    return side == T || r->op > 17;
}

/* Reads conn c of side until it is closed (or nothing more comes by the
 * deadline): a busy server may close a moment later than the other. */
static void until_closed(seq_t *s, int side, int c, int64_t deadline)
{
    while (rd_some(s, side, c, deadline) > 0)
        ;
}

static int classify(const seq_t *s, const req_t *r, int c);

/* Gives the server that is behind on a connection up to SD_LAG to catch
 * up (a wake-up one server sends a moment later than the other), unless
 * where they stand is already a named difference. */
static void settle(seq_t *s, const req_t *r)
{
    int closes = !r || r->reply == R_WAIT || r->reply == R_CLOSE;
    int64_t dl = ddp_sys_deadline_in(s->sys, SD_LAG);
    for (int c = 0; c < s->nconn; c++)
        for (int side = 0; side < SIDES; side++)
            while (lagging(s, side, c, closes) && classify(s, r, c) < 0 &&
                   pump(s, side, dl) > 0)
                ;
}

/* What each connection got: the reply on r's (a request without one has
 * the barrier's), then whatever every connection has. A WAIT or an
 * unknown opcode is given SD_GRACE; r NULL: the end of a sequence, every
 * waiting connection is given SD_GRACE. */
static void step_read(seq_t *s, const req_t *r)
{
    int64_t due = ddp_sys_deadline_in(s->sys, SD_REPLY);
    int64_t grace = ddp_sys_deadline_in(s->sys, SD_GRACE);
    for (int side = 0; side < SIDES; side++) {
        if (r && r->reply != R_WAIT && r->reply != R_CLOSE)
            rd_reply(s, side, r->conn, r->reply, r->barrier, due);
        else if (r && closes_on(r, side))
            until_closed(s, side, r->conn, due);
        else if (r)
            rd_some(s, side, r->conn, grace);
        for (int c = 0; c < s->nconn; c++) {
            if (!r && s->cs[c].waits && !s->got[side][c].n)
                rd_some(s, side, c, grace);
            drain(s, side, c);
        }
    }
    settle(s, r);
}

static int64_t i64_at(const sbuf_t *b)
{
    int64_t v;
    memcpy(&v, b->p, 8);
    return v;
}

/* The first connection whose bytes or state differ between the servers
 * (GETNUMKEYS compared as the change since the sequence began), or -1. */
static int first_diff(const seq_t *s, const req_t *r)
{
    for (int i = -1; i < s->nconn; i++) {
        int c = i < 0 ? (r ? r->conn : 0) : i; /* r's connection first */
        const sbuf_t *a = &s->got[T][c], *b = &s->got[D][c];
        int same = sb_eq(a, b);
        if (r && c == r->conn && r->op == DDP_STORE_LOP_GETNUMKEYS && a->n == 8 && b->n == 8)
            same = i64_at(a) - s->base[T] == i64_at(b) - s->base[D];
        if (!same || s->closed[T][c] != s->closed[D][c])
            return c;
    }
    return -1;
}

/* An empty value's reply (and the barrier's READY). */
static int is_empty_reply(const sbuf_t *b)
{
    return (b->n == 8 || (b->n == 9 && b->p[8] == DDP_STORE_READY)) && i64_at(b) == 0;
}

/* Which named difference r's step on conn c is, or -1 (unexplained). */
static int classify(const seq_t *s, const req_t *r, int c)
{
    int tc = s->closed[T][c], dc = s->closed[D][c];
    const cstate_t *cs = &s->cs[c];
    if (!cs->watcher && cs->rewait && (!r || c != r->conn || r->op == DDP_STORE_LOP_WAIT))
        return SD_N_REWAIT;
    if (!cs->watcher && cs->cas_woke && s->got[D][c].n > s->got[T][c].n)
        return SD_N_CAS_WAKE;
    if (!r || c != r->conn)
        return -1;
    if (dc && !tc) {
        if (r->maxkey > SD_LIMIT_KEY)
            return SD_N_KEY_LIMIT;
        if (r->maxval > SD_LIMIT_VALUE)
            return SD_N_VALUE_LIMIT;
        if (r->nkeys > SD_LIMIT_COUNT)
            return SD_N_COUNT_LIMIT;
        if (r->op == DDP_STORE_LOP_ADD && s->got[T][c].n == 8)
            return SD_N_ADD_OVERFLOW;
    }
    if (tc && (!dc || s->got[D][c].n) && r->op >= 9 && r->op <= 17)
        return SD_N_OPCODE;
    if (tc && !dc && r->op == DDP_STORE_LOP_GET && is_empty_reply(&s->got[D][c]))
        return SD_N_GET_MISSING;
    return -1;
}

static void describe_side(const seq_t *s, int side, int c, char *buf, size_t n)
{
    const sbuf_t *g = &s->got[side][c];
    size_t off = (size_t)snprintf(buf, n, "%s ", side == T ? "torch" : "ddpsim");
    if (g->n) {
        off += (size_t)snprintf(buf + off, n - off, "sent %zu byte(s) [", g->n);
        for (size_t i = 0; i < g->n && i < 16 && off + 4 < n; i++)
            off += (size_t)snprintf(buf + off, n - off, "%02x", g->p[i]);
        off += (size_t)snprintf(buf + off, n - off, "%s]", g->n > 16 ? "..." : "");
    } else {
        off += (size_t)snprintf(buf + off, n - off, "sent nothing");
    }
    if (off < n)
        snprintf(buf + off, n - off, "%s", s->closed[side][c] ? " and closed" : "");
}

static void record(seq_t *s, const req_t *r, int c, int named)
{
    if (named >= 0) {
        s->st->named[named]++;
        return;
    }
    char a[128], b[128], *m = s->st->first;
    size_t mn = sizeof s->st->first;
    if (s->st->disagreed++ && !s->st->verbose)
        return;
    char more[sizeof s->st->first];
    if (s->st->disagreed > 1)
        m = more, mn = sizeof more;
    describe_side(s, T, c, a, sizeof a);
    describe_side(s, D, c, b, sizeof b);
    if (r)
        snprintf(m, mn,
                 "sequence %ld step %ld: opcode %d on connection %d (longest key %zu, "
                 "value %zu bytes, %zu keys); on connection %d %s, %s",
                 s->idx, s->step, r->op, r->conn, r->maxkey, r->maxval, r->nkeys, c, a, b);
    else
        snprintf(m, mn, "sequence %ld, at its end: on connection %d %s, %s", s->idx, c, a, b);
    if (s->st->verbose)
        fprintf(stderr, "store differential: %s\n", m);
}

/* After a step both servers agreed on: STOP_WAITINGs counted. */
static void after_step(seq_t *s, const req_t *r)
{
    if (r && r->op == DDP_STORE_LOP_WAIT)
        s->cs[r->conn].waits++;
    for (int c = 0; c < s->nconn; c++) {
        cstate_t *cs = &s->cs[c];
        if (cs->watcher || (r && c == r->conn && r->op != DDP_STORE_LOP_WAIT))
            continue;
        cs->waits -= (int)s->got[T][c].n;
        if (cs->waits <= 0)
            cs->waits = 0, cs->awaited = 0, cs->cas_woke = 0;
    }
    if (r) {
        s->st->requests++;
        s->st->closes += s->closed[T][r->conn] && s->closed[D][r->conn];
    }
}

/* One request (NULL: the end) on both servers: 0 when they agree. */
static int step(seq_t *s, const req_t *r)
{
    step_send(s, r);
    if (r)
        model_apply(s, r); /* before reading: it names what a wake-up may be */
    step_read(s, r);
    int c = first_diff(s, r);
    if (c >= 0) {
        record(s, r, c, classify(s, r, c));
        return -1;
    }
    after_step(s, r);
    return 0;
}

/* ------------------------------------------------------------ sequences */

/* Deletes the sequence's large values and the global key (ddpsim is not
 * sent a key over its limit; the other keys stay: GETNUMKEYS is compared
 * as a change), while its connections are still open: torch 1.13 would
 * otherwise send a deleted key's watch notice to a closed socket. */
static void seq_cleanup(seq_t *s)
{
    req_t r = {0};
    for (int side = 0; side < SIDES; side++) {
        for (int i = 0; i < SD_NKEYS && s->ctl[side] >= 0; i++) {
            const skey_t *k = &s->keys[i];
            if ((side == D && k->name.n > SD_LIMIT_KEY) ||
                !(k->global || (k->present && k->val.n > 4096)))
                continue;
            int64_t v;
            req_begin(&r, 0, DDP_STORE_LOP_DELETE_KEY, R_I64);
            req_key(&r, &k->name);
            if (ctl_i64(s, side, &r.b, &v) != 0) {
                ddp_sys_close(s->sys, s->ctl[side]);
                s->ctl[side] = -1;
            }
        }
    }
    free(r.b.p);
}

static void seq_close(seq_t *s)
{
    for (int side = 0; side < SIDES; side++)
        for (int c = 0; c < s->nconn; c++)
            if (s->fd[side][c] >= 0)
                ddp_sys_close(s->sys, s->fd[side][c]);
}

/* The sequence's keys, the count of keys before it, its connections. */
static int seq_open(seq_t *s)
{
    snprintf(s->prefix, sizeof s->prefix, "/sd%ld/", s->idx);
    for (int i = 0; i < SD_NKEYS; i++)
        gen_key(s, i, &s->keys[i]);
    memset(s->cs, 0, sizeof s->cs);
    s->nconn = 1 + (int)below(s, 3) + (below(s, 4) == 0);
    sbuf_t q = {(uint8_t *)"\x06", 1, 1}; /* GETNUMKEYS */
    for (int side = 0; side < SIDES; side++) {
        if (ctl_ready(s, side) != 0 || ctl_i64(s, side, &q, &s->base[side]) != 0)
            return -1;
        for (int c = 0; c < s->nconn; c++) {
            s->closed[side][c] = 0;
            if (conn_open(s, side, &s->fd[side][c]) != 0)
                return -1;
        }
    }
    return 0;
}

static int seq_run(seq_t *s)
{
    memset(s->fd, -1, sizeof s->fd);
    s->nconn = 0;
    if (seq_open(s) != 0) {
        seq_close(s);
        return -1;
    }
    req_t r = {0};
    long steps = 3 + (long)below(s, 9);
    int agreed = 1;
    for (s->step = 0; s->step < steps && agreed; s->step++) {
        if (gen_step(s, &r) != 0)
            break;
        agreed = step(s, &r) == 0;
    }
    agreed = agreed && step(s, NULL) == 0;
    if (agreed)
        for (int c = 0; c < s->nconn; c++)
            s->st->waits_open += s->cs[c].waits;
    s->st->agreed += agreed;
    s->st->sequences++;
    seq_cleanup(s);
    seq_close(s);
    free(r.b.p);
    return 0;
}

int sd_run(ddp_sys_t *sys, const ddp_addr_t srv[2], uint64_t seed, long count, int big,
           sd_stats_t *st)
{
    ddp_rng_t rng;
    ddp_rng_seed(&rng, seed);
    seq_t *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->sys = sys;
    s->srv = srv;
    s->rng = &rng;
    s->big = big;
    s->st = st;
    s->ctl[T] = s->ctl[D] = -1;
    int rc = 0;
    for (long i = 0; i < count && rc == 0; i++) {
        s->idx = (long)(seed & 0xffff) * 1000000 + i;
        rc = seq_run(s);
    }
    for (int side = 0; side < SIDES; side++) {
        if (s->ctl[side] >= 0)
            ddp_sys_close(sys, s->ctl[side]);
        for (int c = 0; c < SD_MAXC; c++)
            free(s->got[side][c].p);
    }
    for (int i = 0; i < SD_NKEYS; i++)
        free(s->keys[i].name.p), free(s->keys[i].val.p);
    free(s);
    return rc;
}
