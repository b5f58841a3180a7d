/* core/store_prefix.c — PrefixStore: every key becomes prefix + "/" + key
 * on the base store (not owned), as c10d::PrefixStore does, so process
 * groups and subsystems share one store without colliding.
 *
 * num_keys is the base store's count (PyTorch's PrefixStore does not
 * filter it either); list_keys keeps only this prefix's keys, stripped.
 * Error messages come from the base store and so name the full keys. */
#include "ddp/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"

typedef struct pfx {
    ddp_store_t st; /* first */
    ddp_store_t *base;
    char *prefix; /* with the "/" */
    size_t plen;
} pfx_t;

static pfx_t *P(ddp_store_t *st) { return (pfx_t *)st; }

/* Keys shorter than this are joined on the stack (most of them). */
#define SHORT_KEY 256

typedef struct joined {
    char buf[SHORT_KEY];
    char *s;
} joined_t;

static const char *join(pfx_t *p, const char *key, joined_t *j)
{
    size_t kl = strlen(key);
    j->s = p->plen + kl < SHORT_KEY ? j->buf : malloc(p->plen + kl + 1);
    if (!j->s) {
        ddp_err_set(-ENOMEM, "prefix store: out of memory");
        return NULL;
    }
    memcpy(j->s, p->prefix, p->plen);
    memcpy(j->s + p->plen, key, kl + 1);
    return j->s;
}

static void unjoin(joined_t *j)
{
    if (j->s != j->buf)
        free(j->s);
}

/* An array of joined keys (freed with free_all). */
static char **join_all(pfx_t *p, const char *const *keys, size_t n)
{
    char **out = calloc(n ? n : 1, sizeof *out);
    for (size_t i = 0; out && i < n; i++) {
        size_t kl = strlen(keys[i]);
        if (!(out[i] = malloc(p->plen + kl + 1))) {
            ddp_store_free_keys(out, i);
            out = NULL;
            break;
        }
        memcpy(out[i], p->prefix, p->plen);
        memcpy(out[i] + p->plen, keys[i], kl + 1);
    }
    if (!out)
        ddp_err_set(-ENOMEM, "prefix store: out of memory for %zu keys", n);
    return out;
}

/* The single-key ops differ only in the call made with the joined key. */
#define WITH_KEY(st, key, call)                                                \
    do {                                                                       \
        joined_t j_;                                                           \
        const char *k_ = join(P(st), key, &j_);                                \
        if (!k_)                                                               \
            return -ENOMEM;                                                    \
        int rc_ = (call);                                                      \
        unjoin(&j_);                                                           \
        return rc_;                                                            \
    } while (0)

#define WITH_KEYS(st, keys, n, call)                                           \
    do {                                                                       \
        char **ks_ = join_all(P(st), keys, n);                                 \
        if (!ks_)                                                              \
            return -ENOMEM;                                                    \
        int rc_ = (call);                                                      \
        ddp_store_free_keys(ks_, n);                                           \
        return rc_;                                                            \
    } while (0)

#define KS ((const char *const *)ks_)

static int p_set(ddp_store_t *st, const char *key, const void *val, size_t n,
                 int64_t dl)
{
    WITH_KEY(st, key, ddp_store_set(P(st)->base, k_, val, n, dl));
}

static int p_compare_set(ddp_store_t *st, const char *key,
                         const void *expected, size_t en, const void *desired,
                         size_t dn, ddp_buf_t *out, int64_t dl)
{
    WITH_KEY(st, key,
             ddp_store_compare_set(P(st)->base, k_, expected, en, desired, dn,
                                   out, dl));
}

static int p_get(ddp_store_t *st, const char *key, ddp_buf_t *out, int64_t dl)
{
    WITH_KEY(st, key, ddp_store_get(P(st)->base, k_, out, dl));
}

static int p_add(ddp_store_t *st, const char *key, int64_t delta, int64_t *out,
                 int64_t dl)
{
    WITH_KEY(st, key, ddp_store_add(P(st)->base, k_, delta, out, dl));
}

static int p_check(ddp_store_t *st, const char *const *keys, size_t n,
                   int64_t dl)
{
    WITH_KEYS(st, keys, n, ddp_store_check(P(st)->base, KS, n, dl));
}

static int p_wait(ddp_store_t *st, const char *const *keys, size_t n,
                  int64_t dl)
{
    WITH_KEYS(st, keys, n, ddp_store_wait(P(st)->base, KS, n, dl));
}

static int p_num_keys(ddp_store_t *st, int64_t *out, int64_t dl)
{
    return ddp_store_num_keys(P(st)->base, out, dl);
}

static int p_delete_key(ddp_store_t *st, const char *key, int64_t dl)
{
    WITH_KEY(st, key, ddp_store_delete_key(P(st)->base, k_, dl));
}

static int p_append(ddp_store_t *st, const char *key, const void *val,
                    size_t n, int64_t dl)
{
    WITH_KEY(st, key, ddp_store_append(P(st)->base, k_, val, n, dl));
}

static int p_multi_get(ddp_store_t *st, const char *const *keys, size_t n,
                       ddp_buf_t *out, int64_t dl)
{
    WITH_KEYS(st, keys, n, ddp_store_multi_get(P(st)->base, KS, n, out, dl));
}

static int p_multi_set(ddp_store_t *st, const char *const *keys,
                       const ddp_buf_t *vals, size_t n, int64_t dl)
{
    WITH_KEYS(st, keys, n, ddp_store_multi_set(P(st)->base, KS, vals, n, dl));
}

static int p_queue_push(ddp_store_t *st, const char *key, const void *val,
                        size_t n, int64_t dl)
{
    WITH_KEY(st, key, ddp_store_queue_push(P(st)->base, k_, val, n, dl));
}

static int p_queue_pop(ddp_store_t *st, const char *key, ddp_buf_t *out,
                       int64_t dl)
{
    WITH_KEY(st, key, ddp_store_queue_pop(P(st)->base, k_, out, dl));
}

static int p_queue_len(ddp_store_t *st, const char *key, int64_t *out,
                       int64_t dl)
{
    WITH_KEY(st, key, ddp_store_queue_len(P(st)->base, k_, out, dl));
}

static int p_list_keys(ddp_store_t *st, char ***keys, size_t *n, int64_t dl)
{
    pfx_t *p = P(st);
    char **all = NULL;
    size_t na = 0, k = 0;
    int rc = ddp_store_list_keys(p->base, &all, &na, dl);
    if (rc)
        return rc;
    /* Filter in place: keep ours, stripped of the prefix. */
    for (size_t i = 0; i < na; i++) {
        if (strncmp(all[i], p->prefix, p->plen) == 0) {
            memmove(all[i], all[i] + p->plen, strlen(all[i]) - p->plen + 1);
            all[k++] = all[i];
        } else {
            free(all[i]);
        }
    }
    *keys = all;
    *n = k;
    return 0;
}

static int p_ping(ddp_store_t *st, int64_t dl)
{
    return ddp_store_ping(P(st)->base, dl);
}

static void p_free(ddp_store_t *st)
{
    free(P(st)->prefix);
    free(st);
}

static const ddp_store_ops_t prefix_ops = {
    .name = "prefix",
    .set = p_set,
    .compare_set = p_compare_set,
    .get = p_get,
    .add = p_add,
    .check = p_check,
    .wait = p_wait,
    .num_keys = p_num_keys,
    .delete_key = p_delete_key,
    .append = p_append,
    .multi_get = p_multi_get,
    .multi_set = p_multi_set,
    .queue_push = p_queue_push,
    .queue_pop = p_queue_pop,
    .queue_len = p_queue_len,
    .list_keys = p_list_keys,
    .ping = p_ping,
    .free = p_free,
};

ddp_store_t *ddp_store_prefix_new(ddp_store_t *base, const char *prefix)
{
    if (!base || !prefix) {
        ddp_err_set(-EINVAL, "prefix store needs a base store and a prefix");
        return NULL;
    }
    pfx_t *p = calloc(1, sizeof *p);
    size_t pl = strlen(prefix);
    if (!p || !(p->prefix = malloc(pl + 2))) {
        free(p);
        ddp_err_set(-ENOMEM, "out of memory for a prefix store");
        return NULL;
    }
    memcpy(p->prefix, prefix, pl);
    memcpy(p->prefix + pl, "/", 2);
    p->plen = pl + 1;
    p->base = base;
    p->st.ops = &prefix_ops;
    p->st.sys = base->sys;
    p->st.impl = p;
    return &p->st;
}
