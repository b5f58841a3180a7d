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

typedef struct {
    char *key;
    char *value;
} entry_t;

struct ddp_env {
    entry_t *e;
    size_t n, cap;
};

ddp_env_t *ddp_env_new(void) { return calloc(1, sizeof(ddp_env_t)); }

void ddp_env_free(ddp_env_t *env)
{
    if (!env)
        return;
    for (size_t i = 0; i < env->n; i++) {
        free(env->e[i].key);
        free(env->e[i].value);
    }
    free(env->e);
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

int ddp_env_set(ddp_env_t *env, const char *key, const char *value)
{
    if (!key || !*key || strchr(key, '=') || !value)
        return ddp_err_set(-EINVAL, "invalid environment variable name \"%s\"",
                           key ? key : "(null)");
    char *v = strdup(value);
    if (!v)
        return -ENOMEM;
    long i = find(env, key);
    if (i >= 0) {
        free(env->e[i].value);
        env->e[i].value = v;
        return 0;
    }
    char *k = strdup(key);
    if (!k) {
        free(v);
        return -ENOMEM;
    }
    if (env->n == env->cap) {
        size_t nc = env->cap ? env->cap * 2 : 16;
        entry_t *ne = realloc(env->e, nc * sizeof *ne);
        if (!ne) {
            free(k);
            free(v);
            return -ENOMEM;
        }
        env->e = ne;
        env->cap = nc;
    }
    size_t at = (size_t)(-i - 1);
    memmove(env->e + at + 1, env->e + at, (env->n - at) * sizeof *env->e);
    env->e[at].key = k;
    env->e[at].value = v;
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
    free(env->e[i].key);
    free(env->e[i].value);
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

ddp_env_t *ddp_env_clone(const ddp_env_t *src)
{
    ddp_env_t *env = ddp_env_new();
    if (!env || !src)
        return env;
    for (size_t i = 0; i < src->n; i++) {
        if (ddp_env_set(env, src->e[i].key, src->e[i].value) != 0) {
            ddp_env_free(env);
            return NULL;
        }
    }
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
