/* core/store_memory.c — the in-process store, with the semantics of our
 * TCPStore server (docs/store-protocol.md) so code tested against it
 * behaves the same over TCP:
 *  - a key "exists" for CHECK/WAIT/get when it has a value or a non-empty
 *    queue; queues are not counted by num_keys nor listed by list_keys;
 *  - ADD parses the value as std::stoll does and stores decimal ASCII;
 *  - COMPARE_SET on a missing key with non-empty `expected` stores nothing
 *    and answers `expected`;
 *  - list_keys is in insertion order, so traces are deterministic.
 *
 * Blocking ops (get, wait, multi_get, queue_pop) re-check under the lock and
 * sleep 1 ms on the sys clock between checks, rather than waiting on a
 * condition variable: in the simulator only the sys clock may move time,
 * and a thread blocked in pthread_cond_timedwait would be invisible to the
 * scheduler. The lock is never held across a sys call. */
#include "ddp/store.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"
#include "kvmap.h"
#include "store_priv.h"

#define POLL_NS DDP_NS_PER_MS
#define INIT_BUCKETS 64

typedef struct qitem {
    struct qitem *next;
    ddp_buf_t v;
} qitem_t;

typedef struct entry {
    ddp__kv_node_t kv; /* first: key, bucket chain, creation order */
    int has_val;
    ddp_buf_t val;
    qitem_t *qhead, *qtail;
    size_t qlen;
} entry_t;

typedef struct mem {
    ddp_store_t st; /* first */
    pthread_mutex_t mu;
    ddp__kvmap_t keys;
    size_t nvals;
} mem_t;

static mem_t *M(ddp_store_t *st) { return (mem_t *)st; }

static entry_t *find(mem_t *m, const char *key)
{
    return (entry_t *)ddp__kv_find(&m->keys, key, strlen(key));
}

/* The entry for key, created when missing (NULL: out of memory). */
static entry_t *get_entry(mem_t *m, const char *key)
{
    return (entry_t *)ddp__kv_get(&m->keys, key, strlen(key),
                                  sizeof(entry_t));
}

/* Frees e once it holds neither a value nor queued elements. */
static void maybe_drop(mem_t *m, entry_t *e)
{
    if (!e || e->has_val || e->qlen)
        return;
    ddp__kv_remove(&m->keys, &e->kv);
}

static int exists(mem_t *m, const char *key)
{
    entry_t *e = find(m, key);
    return e && (e->has_val || e->qlen);
}

/* A malloc'd copy with a spare NUL, like the tcp client's replies. */
static int copy_buf(ddp_buf_t *out, const void *p, size_t n)
{
    uint8_t *d = malloc(n + 1);
    if (!d)
        return ddp_err_set(-ENOMEM, "memory store: out of memory for %zu "
                                    "bytes",
                           n);
    if (n)
        memcpy(d, p, n);
    d[n] = '\0';
    out->data = d;
    out->len = n;
    return 0;
}

/* Replace e's value (under the lock). */
static int set_val(mem_t *m, entry_t *e, const void *p, size_t n)
{
    ddp_buf_t nv;
    int rc = copy_buf(&nv, p, n);
    if (rc)
        return rc;
    if (e->has_val)
        free(e->val.data);
    else
        m->nvals++;
    e->val = nv;
    e->has_val = 1;
    return 0;
}

/* Every op body runs between these two: unlock returns its argument so an
 * op reads `lock(m); return unlock(m, do_x(...));`. */
static void lock(mem_t *m) { pthread_mutex_lock(&m->mu); }
static int unlock(mem_t *m, int rc)
{
    pthread_mutex_unlock(&m->mu);
    return rc;
}

/* ---------------------------------------------------------- blocking */

/* A condition re-checked under the lock: 1 done, 0 not yet, < 0 error. */
typedef int (*ready_fn)(mem_t *m, void *arg);

/* For the timeout's message: is key set (under the lock)? */
static int key_set(void *arg, const char *key)
{
    return exists(arg, key);
}

/* Re-checks ready() until it is done or the deadline passes. On timeout
 * the error names the keys still missing. */
static int block_until(mem_t *m, ready_fn ready, void *arg,
                       const char *const *keys, size_t nkeys,
                       int64_t deadline)
{
    ddp_sys_t *sys = m->st.sys;
    int64_t start = ddp_sys_now(sys);
    for (;;) {
        lock(m);
        int r = unlock(m, ready(m, arg));
        if (r != 0)
            return r < 0 ? r : 0;
        int64_t now = ddp_sys_now(sys);
        if (now >= deadline) {
            char ks[320];
            lock(m);
            ddp__store_fmt_missing(keys, nkeys, key_set, m, ks, sizeof ks);
            unlock(m, 0);
            ddp_err_set(DDP_ETIMEOUT, "Timed out after %.1f s waiting for "
                                      "keys %s in the memory store",
                        ddp__store_secs(start, now), ks);
            return ddp_err_waited(now - start);
        }
        int64_t wake = deadline - now > POLL_NS ? now + POLL_NS : deadline;
        int rc = ddp_sys_sleep_until(sys, wake);
        if (rc)
            return rc;
    }
}

typedef struct keys_arg {
    const char *const *keys;
    size_t n;
    ddp_buf_t *out; /* multi_get / get: values, filled once all exist */
} keys_arg_t;

static int all_exist(mem_t *m, void *arg)
{
    keys_arg_t *a = arg;
    for (size_t i = 0; i < a->n; i++)
        if (!exists(m, a->keys[i]))
            return 0;
    if (!a->out)
        return 1;
    for (size_t i = 0; i < a->n; i++) {
        entry_t *e = find(m, a->keys[i]);
        /* Present only as a queue: the value reads as empty (as GET). */
        int rc = e->has_val ? copy_buf(&a->out[i], e->val.data, e->val.len)
                            : copy_buf(&a->out[i], "", 0);
        if (rc) {
            for (size_t j = 0; j < i; j++)
                ddp_buf_free(&a->out[j]);
            return rc;
        }
    }
    return 1;
}

static int pop_ready(mem_t *m, void *arg)
{
    keys_arg_t *a = arg;
    entry_t *e = find(m, a->keys[0]);
    if (!e || !e->qlen)
        return 0;
    qitem_t *q = e->qhead;
    e->qhead = q->next;
    if (!e->qhead)
        e->qtail = NULL;
    e->qlen--;
    *a->out = q->v;
    free(q);
    maybe_drop(m, e);
    return 1;
}

/* --------------------------------------------------------------- ops */

static int do_set(mem_t *m, const char *key, const void *val, size_t n)
{
    entry_t *e = get_entry(m, key);
    if (!e)
        return ddp_err_set(-ENOMEM, "memory store: out of memory");
    int rc = set_val(m, e, val, n);
    maybe_drop(m, e);
    return rc;
}

static int m_set(ddp_store_t *st, const char *key, const void *val, size_t n,
                 int64_t deadline)
{
    (void)deadline;
    mem_t *m = M(st);
    lock(m);
    return unlock(m, do_set(m, key, val, n));
}

static int do_compare_set(mem_t *m, const char *key, const void *expected,
                          size_t en, const void *desired, size_t dn,
                          ddp_buf_t *out)
{
    entry_t *e = find(m, key);
    if (!e || !e->has_val) {
        if (en != 0) /* the libuv server answers `expected`, stores nothing */
            return copy_buf(out, expected, en);
        int rc = do_set(m, key, desired, dn);
        return rc ? rc : copy_buf(out, desired, dn);
    }
    if (e->val.len == en &&
        (en == 0 || memcmp(e->val.data, expected, en) == 0)) {
        int rc = set_val(m, e, desired, dn);
        if (rc)
            return rc;
    }
    return copy_buf(out, e->val.data, e->val.len);
}

static int m_compare_set(ddp_store_t *st, const char *key,
                         const void *expected, size_t en, const void *desired,
                         size_t dn, ddp_buf_t *out, int64_t deadline)
{
    (void)deadline;
    mem_t *m = M(st);
    lock(m);
    return unlock(m, do_compare_set(m, key, expected, en, desired, dn, out));
}

static int m_get(ddp_store_t *st, const char *key, ddp_buf_t *out,
                 int64_t deadline)
{
    keys_arg_t a = {&key, 1, out};
    return block_until(M(st), all_exist, &a, &key, 1, deadline);
}

/* Parses like std::stoll: leading white space, sign, digits up to the
 * first non-digit; at least one digit. */
static int parse_counter(const ddp_buf_t *v, int64_t *out)
{
    char tmp[32];
    size_t n = v->len < sizeof tmp - 1 ? v->len : sizeof tmp - 1;
    memcpy(tmp, v->data, n);
    tmp[n] = '\0';
    const char *p = tmp;
    while (*p == ' ' || (*p >= '\t' && *p <= '\r'))
        p++;
    int neg = *p == '-';
    if (*p == '-' || *p == '+')
        p++;
    if (*p < '0' || *p > '9')
        return -EINVAL;
    int64_t x = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        int d = *p - '0';
        if (neg ? x < (INT64_MIN + d) / 10 : x > (INT64_MAX - d) / 10)
            return -ERANGE;
        x = x * 10 + (neg ? -d : d);
    }
    *out = x;
    return 0;
}

static int do_add(mem_t *m, const char *key, int64_t delta, int64_t *out)
{
    entry_t *e = get_entry(m, key);
    if (!e)
        return ddp_err_set(-ENOMEM, "memory store: out of memory");
    int64_t cur = 0;
    if (e->has_val) {
        int rc = parse_counter(&e->val, &cur);
        if (rc)
            return ddp_err_set(rc, "memory store: key \"%.64s\" holds "
                                   "\"%.*s\", not a decimal counter",
                               key, (int)(e->val.len > 32 ? 32 : e->val.len),
                               (const char *)e->val.data);
    }
    if ((delta > 0 && cur > INT64_MAX - delta) ||
        (delta < 0 && cur < INT64_MIN - delta)) {
        maybe_drop(m, e);
        return ddp_err_set(-ERANGE, "memory store: ADD %" PRId64 " to %" PRId64
                                    " on \"%.64s\" overflows",
                           delta, cur, key);
    }
    char s[24];
    int n = snprintf(s, sizeof s, "%" PRId64, cur + delta);
    int rc = set_val(m, e, s, (size_t)n);
    if (rc == 0)
        *out = cur + delta;
    maybe_drop(m, e);
    return rc;
}

static int m_add(ddp_store_t *st, const char *key, int64_t delta, int64_t *out,
                 int64_t deadline)
{
    (void)deadline;
    mem_t *m = M(st);
    lock(m);
    return unlock(m, do_add(m, key, delta, out));
}

static int m_check(ddp_store_t *st, const char *const *keys, size_t n,
                   int64_t deadline)
{
    (void)deadline;
    mem_t *m = M(st);
    keys_arg_t a = {keys, n, NULL};
    lock(m);
    return unlock(m, all_exist(m, &a));
}

static int m_wait(ddp_store_t *st, const char *const *keys, size_t n,
                  int64_t deadline)
{
    keys_arg_t a = {keys, n, NULL};
    return block_until(M(st), all_exist, &a, keys, n, deadline);
}

static int m_num_keys(ddp_store_t *st, int64_t *out, int64_t deadline)
{
    (void)deadline;
    mem_t *m = M(st);
    pthread_mutex_lock(&m->mu);
    *out = (int64_t)m->nvals;
    pthread_mutex_unlock(&m->mu);
    return 0;
}

static int do_delete(mem_t *m, const char *key)
{
    entry_t *e = find(m, key);
    if (!e || !e->has_val)
        return 0;
    free(e->val.data);
    e->val = (ddp_buf_t){NULL, 0};
    e->has_val = 0;
    m->nvals--;
    maybe_drop(m, e);
    return 1;
}

static int m_delete_key(ddp_store_t *st, const char *key, int64_t deadline)
{
    (void)deadline;
    mem_t *m = M(st);
    lock(m);
    return unlock(m, do_delete(m, key));
}

static int do_append(mem_t *m, const char *key, const void *val, size_t n)
{
    entry_t *e = find(m, key);
    if (!e || !e->has_val)
        return do_set(m, key, val, n);
    uint8_t *d = realloc(e->val.data, e->val.len + n + 1);
    if (!d)
        return ddp_err_set(-ENOMEM, "memory store: out of memory");
    if (n)
        memcpy(d + e->val.len, val, n);
    e->val.len += n;
    d[e->val.len] = '\0';
    e->val.data = d;
    return 0;
}

static int m_append(ddp_store_t *st, const char *key, const void *val,
                    size_t n, int64_t deadline)
{
    (void)deadline;
    mem_t *m = M(st);
    lock(m);
    return unlock(m, do_append(m, key, val, n));
}

static int m_multi_get(ddp_store_t *st, const char *const *keys, size_t n,
                       ddp_buf_t *out, int64_t deadline)
{
    keys_arg_t a = {keys, n, out};
    return block_until(M(st), all_exist, &a, keys, n, deadline);
}

static int do_multi_set(mem_t *m, const char *const *keys,
                        const ddp_buf_t *vals, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int rc = do_set(m, keys[i], vals[i].data, vals[i].len);
        if (rc)
            return rc;
    }
    return 0;
}

static int m_multi_set(ddp_store_t *st, const char *const *keys,
                       const ddp_buf_t *vals, size_t n, int64_t deadline)
{
    (void)deadline;
    mem_t *m = M(st);
    lock(m);
    return unlock(m, do_multi_set(m, keys, vals, n));
}

static int do_push(mem_t *m, const char *key, const void *val, size_t n)
{
    qitem_t *q = calloc(1, sizeof *q);
    entry_t *e = q ? get_entry(m, key) : NULL;
    if (!e || copy_buf(&q->v, val, n) != 0) {
        free(q);
        maybe_drop(m, e);
        return ddp_err_set(-ENOMEM, "memory store: out of memory");
    }
    if (e->qtail)
        e->qtail->next = q;
    else
        e->qhead = q;
    e->qtail = q;
    e->qlen++;
    return 0;
}

static int m_queue_push(ddp_store_t *st, const char *key, const void *val,
                        size_t n, int64_t deadline)
{
    (void)deadline;
    mem_t *m = M(st);
    lock(m);
    return unlock(m, do_push(m, key, val, n));
}

static int m_queue_pop(ddp_store_t *st, const char *key, ddp_buf_t *out,
                       int64_t deadline)
{
    keys_arg_t a = {&key, 1, out};
    return block_until(M(st), pop_ready, &a, &key, 1, deadline);
}

static int m_queue_len(ddp_store_t *st, const char *key, int64_t *out,
                       int64_t deadline)
{
    (void)deadline;
    mem_t *m = M(st);
    pthread_mutex_lock(&m->mu);
    entry_t *e = find(m, key);
    *out = e ? (int64_t)e->qlen : 0;
    pthread_mutex_unlock(&m->mu);
    return 0;
}

static int do_list(mem_t *m, char ***keys, size_t *n)
{
    char **out = calloc(m->nvals + 1, sizeof *out);
    if (!out)
        return ddp_err_set(-ENOMEM, "memory store: out of memory");
    size_t k = 0;
    for (ddp__kv_node_t *kn = m->keys.ohead; kn; kn = kn->onext) {
        entry_t *e = (entry_t *)kn;
        if (!e->has_val)
            continue;
        if (!(out[k] = strdup(e->kv.key))) {
            ddp_store_free_keys(out, k);
            return ddp_err_set(-ENOMEM, "memory store: out of memory");
        }
        k++;
    }
    *keys = out;
    *n = k;
    return 0;
}

static int m_list_keys(ddp_store_t *st, char ***keys, size_t *n,
                       int64_t deadline)
{
    (void)deadline;
    mem_t *m = M(st);
    lock(m);
    return unlock(m, do_list(m, keys, n));
}

static int m_ping(ddp_store_t *st, int64_t deadline)
{
    (void)st;
    (void)deadline;
    return 0;
}

/* Frees an entry's value and queue (the map frees the rest). */
static void ent_fini(ddp__kv_node_t *n)
{
    entry_t *e = (entry_t *)n;
    for (qitem_t *q = e->qhead, *qn; q; q = qn) {
        qn = q->next;
        free(q->v.data);
        free(q);
    }
    free(e->val.data);
}

static void m_free(ddp_store_t *st)
{
    mem_t *m = M(st);
    ddp__kv_free(&m->keys, ent_fini);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static const ddp_store_ops_t memory_ops = {
    .name = "memory",
    .set = m_set,
    .compare_set = m_compare_set,
    .get = m_get,
    .add = m_add,
    .check = m_check,
    .wait = m_wait,
    .num_keys = m_num_keys,
    .delete_key = m_delete_key,
    .append = m_append,
    .multi_get = m_multi_get,
    .multi_set = m_multi_set,
    .queue_push = m_queue_push,
    .queue_pop = m_queue_pop,
    .queue_len = m_queue_len,
    .list_keys = m_list_keys,
    .ping = m_ping,
    .free = m_free,
};

ddp_store_t *ddp_store_memory_new(ddp_sys_t *sys)
{
    if (!sys) {
        ddp_err_set(-EINVAL, "memory store needs a sys (its clock)");
        return NULL;
    }
    mem_t *m = calloc(1, sizeof *m);
    if (!m || ddp__kv_init(&m->keys, INIT_BUCKETS) != 0) {
        free(m);
        ddp_err_set(-ENOMEM, "out of memory for a memory store");
        return NULL;
    }
    pthread_mutex_init(&m->mu, NULL);
    m->st.ops = &memory_ops;
    m->st.sys = sys;
    m->st.impl = m;
    return &m->st;
}
