/* core/env.c — the per-rank environment map: a sorted array of entries, so
 * lookups are O(log n) and iteration order is deterministic. */
#include "ddp/env.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/fmt.h"

/* An entry's key and value are one block, "KEY\0VALUE\0": its own
 * allocation (own), or a stretch of the map's pool. A clone copies every
 * pair into one pool, so a simulated rank's environment is three blocks
 * (map, entries, pool) rather than two strings per variable: thousands of
 * ranks each clone one, and read it where it lies together. */
typedef struct {
    const char *key;
    const char *value;
    int own;
} entry_t;

struct ddp_env {
    entry_t *e;
    size_t n, cap;
    char *pool;
};

ddp_env_t *ddp_env_new(void) { return calloc(1, sizeof(ddp_env_t)); }

static void entry_free(entry_t *e)
{
    if (e->own)
        free((char *)e->key);
}

void ddp_env_free(ddp_env_t *env)
{
    if (!env)
        return;
    for (size_t i = 0; i < env->n; i++)
        entry_free(&env->e[i]);
    free(env->e);
    free(env->pool);
    free(env);
}

/* Index of key, or -(insertion point) - 1. */
static long find(const ddp_env_t *env, const char *key)
{
    size_t lo = 0, hi = env->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(env->e[mid].key, key);
        if (c == 0)
            return (long)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -(long)lo - 1;
}

const char *ddp_env_get(const ddp_env_t *env, const char *key)
{
    if (!env || !key)
        return NULL;
    long i = find(env, key);
    return i >= 0 ? env->e[i].value : NULL;
}

int ddp_env_has(const ddp_env_t *env, const char *key)
{
    return ddp_env_get(env, key) != NULL;
}

/* key and value copied into dst (kl + vl + 2 bytes); the entry that
 * points there. */
static entry_t pair_at(char *dst, const char *key, size_t kl, const char *value,
                       size_t vl, int own)
{
    memcpy(dst, key, kl + 1);
    memcpy(dst + kl + 1, value, vl + 1);
    return (entry_t){.key = dst, .value = dst + kl + 1, .own = own};
}

static int reserve(ddp_env_t *env, size_t n)
{
    if (n <= env->cap)
        return 0;
    size_t nc = env->cap ? env->cap * 2 : 16;
    while (nc < n)
        nc *= 2;
    entry_t *ne = realloc(env->e, nc * sizeof *ne);
    if (!ne)
        return -ENOMEM;
    env->e = ne;
    env->cap = nc;
    return 0;
}

int ddp_env_set(ddp_env_t *env, const char *key, const char *value)
{
    if (!key || !*key || strchr(key, '=') || !value)
        return ddp_err_set(-EINVAL, "invalid environment variable name \"%s\"",
                           key ? key : "(null)");
    size_t kl = strlen(key), vl = strlen(value);
    char *pair = malloc(kl + vl + 2);
    if (!pair)
        return -ENOMEM;
    entry_t ent = pair_at(pair, key, kl, value, vl, 1);
    long i = find(env, key);
    if (i >= 0) {
        entry_free(&env->e[i]);
        env->e[i] = ent;
        return 0;
    }
    if (reserve(env, env->n + 1)) {
        free(pair);
        return -ENOMEM;
    }
    size_t at = (size_t)(-i - 1);
    memmove(env->e + at + 1, env->e + at, (env->n - at) * sizeof *env->e);
    env->e[at] = ent;
    env->n++;
    return 0;
}

int ddp_env_setf(ddp_env_t *env, const char *key, const char *fmt, ...)
{
    /* A small buffer, and the heap for a longer value: this runs on every
     * simulated rank's own stack, and a 4 KiB array is a page each. */
    char small[128], *buf = small;
    va_list ap;
    va_start(ap, fmt);
    int n = ddp_vfmt(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return ddp_err_set(-EINVAL, "environment variable %s: bad format \"%s\"",
                           key ? key : "(null)", fmt);
    if ((size_t)n >= sizeof small) {
        if (!(buf = malloc((size_t)n + 1)))
            return -ENOMEM;
        va_start(ap, fmt);
        ddp_vfmt(buf, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    int rc = ddp_env_set(env, key, buf);
    if (buf != small)
        free(buf);
    return rc;
}

int ddp_env_unset(ddp_env_t *env, const char *key)
{
    long i = find(env, key);
    if (i < 0)
        return 0;
    entry_free(&env->e[i]);
    memmove(env->e + i, env->e + i + 1,
            (env->n - (size_t)i - 1) * sizeof *env->e);
    env->n--;
    return 0;
}

size_t ddp_env_count(const ddp_env_t *env) { return env ? env->n : 0; }

int ddp_env_foreach(const ddp_env_t *env,
                    int (*fn)(void *arg, const char *key, const char *value),
                    void *arg)
{
    for (size_t i = 0; env && i < env->n; i++) {
        int rc = fn(arg, env->e[i].key, env->e[i].value);
        if (rc)
            return rc;
    }
    return 0;
}

ddp_env_t *ddp_env_from_array(char *const *entries)
{
    ddp_env_t *env = ddp_env_new();
    if (!env)
        return NULL;
    for (size_t i = 0; entries && entries[i]; i++) {
        const char *eq = strchr(entries[i], '=');
        if (!eq || eq == entries[i])
            continue;
        char key[1024];
        size_t kl = (size_t)(eq - entries[i]);
        if (kl >= sizeof key)
            continue;
        memcpy(key, entries[i], kl);
        key[kl] = '\0';
        if (ddp_env_set(env, key, eq + 1) != 0) {
            ddp_env_free(env);
            return NULL;
        }
    }
    return env;
}

/* One pool for every pair, and room for a few more entries: the
 * variables a rank's launch adds (MASTER_ADDR, MASTER_PORT, ...). */
ddp_env_t *ddp_env_clone(const ddp_env_t *src)
{
    ddp_env_t *env = ddp_env_new();
    if (!env || !src || !src->n)
        return env;
    size_t bytes = 0;
    for (size_t i = 0; i < src->n; i++)
        bytes += (size_t)(src->e[i].value - src->e[i].key) + strlen(src->e[i].value) + 1;
    env->pool = malloc(bytes);
    if (!env->pool || reserve(env, src->n + 4)) {
        ddp_env_free(env);
        return NULL;
    }
    char *at = env->pool;
    for (size_t i = 0; i < src->n; i++) {
        size_t kl = (size_t)(src->e[i].value - src->e[i].key) - 1;
        size_t vl = strlen(src->e[i].value);
        env->e[i] = pair_at(at, src->e[i].key, kl, src->e[i].value, vl, 0);
        at += kl + vl + 2;
    }
    env->n = src->n;
    return env;
}

char **ddp_env_to_array(const ddp_env_t *env)
{
    size_t n = ddp_env_count(env);
    char **arr = calloc(n + 1, sizeof *arr);
    if (!arr)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        size_t kl = strlen(env->e[i].key), vl = strlen(env->e[i].value);
        arr[i] = malloc(kl + vl + 2);
        if (!arr[i]) {
            ddp_env_free_array(arr);
            return NULL;
        }
        memcpy(arr[i], env->e[i].key, kl);
        arr[i][kl] = '=';
        memcpy(arr[i] + kl + 1, env->e[i].value, vl + 1);
    }
    return arr;
}

void ddp_env_free_array(char **arr)
{
    for (size_t i = 0; arr && arr[i]; i++)
        free(arr[i]);
    free(arr);
}

/* Python's int(str) for ASCII text (what Lightning's int(os.environ[...])
 * accepts): surrounding whitespace " \t\n\v\f\r", one optional sign right
 * before the digits, decimal digits with single underscores between them. */
static int py_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' ||
           c == '\r';
}

int ddp_env_parse_long(const char *text, long *out)
{
    const char *c = text;
    if (!c)
        return -EINVAL;
    while (py_space(*c))
        c++;
    int neg = *c == '-';
    if (*c == '+' || *c == '-')
        c++;
    if (*c < '0' || *c > '9')
        return -EINVAL;
    /* Accumulated as a negative number: LONG_MIN has no positive twin. */
    long x = 0;
    int range = 0;
    for (;; c++) {
        if (*c == '_' && c[1] >= '0' && c[1] <= '9')
            c++;
        if (*c < '0' || *c > '9')
            break;
        int d = *c - '0';
        if (x < (LONG_MIN + d) / 10)
            range = 1;
        else
            x = x * 10 - d;
    }
    while (py_space(*c))
        c++;
    if (*c)
        return -EINVAL;
    if (range || (!neg && x == LONG_MIN))
        return -ERANGE;
    *out = neg ? x : -x;
    return 0;
}

int ddp_env_get_long(const ddp_env_t *env, const char *key, long min, long max,
                     long *out)
{
    const char *v = ddp_env_get(env, key);
    if (!v)
        return ddp_err_set(DDP_ENOT_FOUND,
                           "%s is not set; expected an integer %ld..%ld", key,
                           min, max);
    long x = 0;
    if (ddp_env_parse_long(v, &x) != 0 || x < min || x > max)
        return ddp_err_set(DDP_ECONFIG,
                           "%s=\"%s\" is not valid; expected an integer "
                           "%ld..%ld",
                           key, v, min, max);
    *out = x;
    return 0;
}
