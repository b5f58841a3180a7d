/* ddp/env.h — a per-rank environment map.
 *
 * Every rank (a real process or a simulated thread) reads its environment from
 * one of these, never from getenv. For real processes the POSIX sys builds it
 * from environ; the simulator gives each rank its own. Keys are kept sorted so
 * that iteration (and every trace that prints an environment) is deterministic.
 */
#ifndef DDP_ENV_H
#define DDP_ENV_H

#include "ddp/export.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ddp_env ddp_env_t;

DDP_API ddp_env_t *ddp_env_new(void);
/* Build from a NULL-terminated "KEY=VALUE" array (entries without '=' skipped). */
DDP_API ddp_env_t *ddp_env_from_array(char *const *entries);
DDP_API ddp_env_t *ddp_env_clone(const ddp_env_t *env);
DDP_API void ddp_env_free(ddp_env_t *env);

/* NULL when unset. The pointer stays valid until the key is set/unset again. */
DDP_API const char *ddp_env_get(const ddp_env_t *env, const char *key);
DDP_API int ddp_env_has(const ddp_env_t *env, const char *key);
/* Copies key and value. Returns 0 or -ENOMEM / -EINVAL (empty key or '=' in key). */
DDP_API int ddp_env_set(ddp_env_t *env, const char *key, const char *value);
DDP_API int ddp_env_setf(ddp_env_t *env, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* 0 whether or not it was set. */
DDP_API int ddp_env_unset(ddp_env_t *env, const char *key);
DDP_API size_t ddp_env_count(const ddp_env_t *env);
/* Calls fn for each entry in key order; a non-zero return stops and is returned. */
DDP_API int ddp_env_foreach(const ddp_env_t *env,
                    int (*fn)(void *arg, const char *key, const char *value),
                    void *arg);
/* A NULL-terminated "KEY=VALUE" array (for execve); free with ddp_env_free_array. */
DDP_API char **ddp_env_to_array(const ddp_env_t *env);
DDP_API void ddp_env_free_array(char **arr);

/* Typed reads that produce an error naming the variable, its value and the
 * valid form. Return 0 (value stored), DDP_ENOT_FOUND (unset; out untouched,
 * error context set), or DDP_ECONFIG (bad value). */
DDP_API int ddp_env_get_long(const ddp_env_t *env, const char *key, long min, long max,
                     long *out);
/* The one rule for integer values (docs/cluster-environments.md), Python's
 * int(text) as Lightning applies it to os.environ: surrounding ASCII
 * whitespace, one optional + or - right before the digits, decimal digits
 * with single underscores between two digits ("1_000"), nothing else.
 * Non-ASCII text is rejected (Python would also take Unicode spaces and
 * digits). 0 (stored), -EINVAL (not an integer) or -ERANGE (an integer that
 * does not fit a long); no error context is set. */
DDP_API int ddp_env_parse_long(const char *text, long *out);

#ifdef __cplusplus
}
#endif
#endif
