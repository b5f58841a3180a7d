/* core/store.c — the store's thin public wrappers and shared helpers.
 *
 * Every wrapper checks its arguments once here, so the implementations can
 * assume sane ones, and turns a missing op into DDP_EUNSUPPORTED instead of a
 * NULL call. */
#include "ddp/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"
#include "store_priv.h"

const char *ddp_store_op_name(int op)
{
    switch (op) {
#define DDP__STORE_OP_NAME(name, v)                                            \
    case v:                                                                    \
        return #name;
        DDP_STORE_OPCODES(DDP__STORE_OP_NAME)
#undef DDP__STORE_OP_NAME
    case DDP_STORE_OP_AUTH:
        return "AUTH";
    default:
        return "UNKNOWN";
    }
}

static const char *const proto_names[] = {
    [DDP_STORE_PROTO_AUTO] = "auto",
    [DDP_STORE_PROTO_LEGACY] = "legacy",
    [DDP_STORE_PROTO_CURRENT] = "current",
};

const char *ddp_store_proto_name(int proto)
{
    return proto >= 0 && proto <= DDP_STORE_PROTO_CURRENT ? proto_names[proto]
                                                          : "unknown";
}

int ddp_store_proto_parse(const char *s, ddp_store_proto_t *out)
{
    for (int p = 0; s && p <= DDP_STORE_PROTO_CURRENT; p++) {
        if (!strcmp(s, proto_names[p])) {
            *out = (ddp_store_proto_t)p;
            return 0;
        }
    }
    return ddp_err_set(-EINVAL, "unknown store protocol \"%s\" (auto, "
                                "legacy or current)",
                       s ? s : "");
}

void ddp_buf_free(ddp_buf_t *b)
{
    if (!b)
        return;
    free(b->data);
    b->data = NULL;
    b->len = 0;
}

void ddp_store_free_keys(char **keys, size_t n)
{
    if (!keys)
        return;
    for (size_t i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
}

void ddp_store_free(ddp_store_t *st)
{
    if (st && st->ops && st->ops->free)
        st->ops->free(st);
}

char *ddp__store_fmt_keys(const char *const *keys, size_t n, char *buf,
                          size_t len)
{
    /* A WAIT on 1,000 keys must not turn into a 10 KiB error line. */
    enum { SHOWN = 4 };
    size_t off = 0;
    if (len == 0)
        return buf;
    buf[0] = '\0';
#define PUT(...)                                                               \
    do {                                                                       \
        if (off < len) {                                                       \
            int w_ = snprintf(buf + off, len - off, __VA_ARGS__);              \
            if (w_ > 0)                                                        \
                off += (size_t)w_;                                             \
        }                                                                      \
    } while (0)
    PUT("[");
    for (size_t i = 0; i < n && i < SHOWN; i++)
        PUT("%s%.64s", i ? ", " : "", keys[i]);
    if (n > SHOWN)
        PUT(", ... (+%zu more)", n - SHOWN);
    PUT("]");
#undef PUT
    return buf;
}

char *ddp__store_fmt_missing(const char *const *keys, size_t n,
                             int (*is_set)(void *arg, const char *key), void *arg,
                             char *buf, size_t len)
{
    const char **miss = n > 1 ? malloc(n * sizeof *miss) : NULL;
    size_t k = 0;
    int rc = miss ? 0 : -1;
    for (size_t i = 0; rc >= 0 && i < n; i++)
        if ((rc = is_set(arg, keys[i])) == 0)
            miss[k++] = keys[i];
    if (rc < 0 || k == 0 || k == n) {
        ddp__store_fmt_keys(keys, n, buf, len);
    } else {
        ddp__store_fmt_keys(miss, k, buf, len);
        size_t off = strlen(buf);
        if (off < len)
            snprintf(buf + off, len - off, " (%zu of the %zu waited on)", k, n);
    }
    free(miss);
    return buf;
}

double ddp__store_secs(int64_t from, int64_t to)
{
    return (double)(to - from) / (double)DDP_NS_PER_S;
}

int ddp__store_parse_memory(const char *text, size_t *out)
{
    size_t n = strlen(text);
    unsigned shift = 0;
    if (n > 0 && strchr("kKmMgG", text[n - 1])) {
        char u = text[n - 1];
        shift = u == 'k' || u == 'K' ? 10 : u == 'm' || u == 'M' ? 20 : 30;
        n--;
    }
    if (n == 0 || n > 19)
        return -1;
    unsigned long long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (text[i] < '0' || text[i] > '9')
            return -1;
        v = v * 10 + (unsigned long long)(text[i] - '0');
    }
    if (v > (SIZE_MAX >> shift) || (v << shift) < DDP__STORE_MIN_MEMORY)
        return -1;
    *out = (size_t)(v << shift);
    return 0;
}

/* ---- wrappers ---- */

/* Fails the call unless st has the op; shared by every wrapper. */
#define STORE_OP(st, op)                                                       \
    do {                                                                       \
        if (!(st) || !(st)->ops)                                               \
            return ddp_err_set(-EINVAL, "store call on a NULL store");         \
        if (!(st)->ops->op)                                                    \
            return ddp_err_set(DDP_EUNSUPPORTED,                               \
                               "the %s store does not support " #op,           \
                               (st)->ops->name);                               \
    } while (0)

#define NEED(cond, what)                                                       \
    do {                                                                       \
        if (!(cond))                                                           \
            return ddp_err_set(-EINVAL, "store: %s", what);                    \
    } while (0)

static int keys_ok(const char *const *keys, size_t n)
{
    if (n && !keys)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!keys[i])
            return 0;
    return 1;
}

int ddp_store_set(ddp_store_t *st, const char *key, const void *val, size_t n,
                  int64_t deadline)
{
    STORE_OP(st, set);
    NEED(key && (val || !n), "set needs a key and a value");
    return st->ops->set(st, key, val, n, deadline);
}

int ddp_store_set_str(ddp_store_t *st, const char *key, const char *val,
                      int64_t deadline)
{
    NEED(val, "set_str needs a value");
    return ddp_store_set(st, key, val, strlen(val), deadline);
}

int ddp_store_compare_set(ddp_store_t *st, const char *key,
                          const void *expected, size_t en, const void *desired,
                          size_t dn, ddp_buf_t *out, int64_t deadline)
{
    STORE_OP(st, compare_set);
    NEED(key && out && (expected || !en) && (desired || !dn),
         "compare_set needs a key, values and an output");
    out->data = NULL;
    out->len = 0;
    return st->ops->compare_set(st, key, expected, en, desired, dn, out,
                                deadline);
}

int ddp_store_get(ddp_store_t *st, const char *key, ddp_buf_t *out,
                  int64_t deadline)
{
    STORE_OP(st, get);
    NEED(key && out, "get needs a key and an output");
    out->data = NULL;
    out->len = 0;
    return st->ops->get(st, key, out, deadline);
}

int ddp_store_add(ddp_store_t *st, const char *key, int64_t delta,
                  int64_t *out, int64_t deadline)
{
    STORE_OP(st, add);
    NEED(key, "add needs a key");
    int64_t dummy;
    return st->ops->add(st, key, delta, out ? out : &dummy, deadline);
}

int ddp_store_check(ddp_store_t *st, const char *const *keys, size_t n,
                    int64_t deadline)
{
    STORE_OP(st, check);
    NEED(keys_ok(keys, n), "check needs keys");
    return st->ops->check(st, keys, n, deadline);
}

int ddp_store_wait(ddp_store_t *st, const char *const *keys, size_t n,
                   int64_t deadline)
{
    STORE_OP(st, wait);
    NEED(keys_ok(keys, n), "wait needs keys");
    return st->ops->wait(st, keys, n, deadline);
}

int ddp_store_num_keys(ddp_store_t *st, int64_t *out, int64_t deadline)
{
    STORE_OP(st, num_keys);
    NEED(out, "num_keys needs an output");
    return st->ops->num_keys(st, out, deadline);
}

int ddp_store_delete_key(ddp_store_t *st, const char *key, int64_t deadline)
{
    STORE_OP(st, delete_key);
    NEED(key, "delete_key needs a key");
    return st->ops->delete_key(st, key, deadline);
}

int ddp_store_append(ddp_store_t *st, const char *key, const void *val,
                     size_t n, int64_t deadline)
{
    STORE_OP(st, append);
    NEED(key && (val || !n), "append needs a key and a value");
    return st->ops->append(st, key, val, n, deadline);
}

int ddp_store_multi_get(ddp_store_t *st, const char *const *keys, size_t n,
                        ddp_buf_t *out, int64_t deadline)
{
    STORE_OP(st, multi_get);
    NEED(keys_ok(keys, n) && (out || !n), "multi_get needs keys and outputs");
    for (size_t i = 0; i < n; i++)
        out[i] = (ddp_buf_t){NULL, 0};
    return st->ops->multi_get(st, keys, n, out, deadline);
}

int ddp_store_multi_set(ddp_store_t *st, const char *const *keys,
                        const ddp_buf_t *vals, size_t n, int64_t deadline)
{
    STORE_OP(st, multi_set);
    NEED(keys_ok(keys, n) && (vals || !n), "multi_set needs keys and values");
    for (size_t i = 0; i < n; i++)
        NEED(vals[i].data || !vals[i].len, "multi_set value without data");
    return st->ops->multi_set(st, keys, vals, n, deadline);
}

int ddp_store_queue_push(ddp_store_t *st, const char *key, const void *val,
                         size_t n, int64_t deadline)
{
    STORE_OP(st, queue_push);
    NEED(key && (val || !n), "queue_push needs a key and a value");
    return st->ops->queue_push(st, key, val, n, deadline);
}

int ddp_store_queue_pop(ddp_store_t *st, const char *key, ddp_buf_t *out,
                        int64_t deadline)
{
    STORE_OP(st, queue_pop);
    NEED(key && out, "queue_pop needs a key and an output");
    out->data = NULL;
    out->len = 0;
    return st->ops->queue_pop(st, key, out, deadline);
}

int ddp_store_queue_len(ddp_store_t *st, const char *key, int64_t *out,
                        int64_t deadline)
{
    STORE_OP(st, queue_len);
    NEED(key && out, "queue_len needs a key and an output");
    return st->ops->queue_len(st, key, out, deadline);
}

int ddp_store_list_keys(ddp_store_t *st, char ***keys, size_t *n,
                        int64_t deadline)
{
    STORE_OP(st, list_keys);
    NEED(keys && n, "list_keys needs outputs");
    *keys = NULL;
    *n = 0;
    return st->ops->list_keys(st, keys, n, deadline);
}

int ddp_store_ping(ddp_store_t *st, int64_t deadline)
{
    STORE_OP(st, ping);
    return st->ops->ping(st, deadline);
}
