/* ddp/log.h — leveled logging with a per-rank prefix.
 *
 * Quiet by default (warnings and errors only). The level comes from the
 * rank's environment map (DDP_LOG=error|warn|info|debug|trace), never from
 * getenv. Each line carries the thread's identity: "[ddp rank 3] message".
 * Output goes to a sink (stderr by default); the simulator installs its own so
 * log lines land in the trace, ordered by virtual time.
 */
#ifndef DDP_LOG_H
#define DDP_LOG_H

#include "ddp/export.h"

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ddp_env;

typedef enum ddp_log_level {
    DDP_LOG_OFF = -1, /* DDP_LOG=off: nothing */
    DDP_LOG_ERROR = 0,
    DDP_LOG_WARN = 1,
    DDP_LOG_INFO = 2,
    DDP_LOG_DEBUG = 3,
    DDP_LOG_TRACE = 4,
} ddp_log_level_t;

/* A sink receives a finished line (no trailing newline). */
typedef void (*ddp_log_sink_fn)(void *arg, ddp_log_level_t level,
                                const char *line);

DDP_API void ddp_log_set_level(ddp_log_level_t level);
DDP_API ddp_log_level_t ddp_log_level(void);
/* Parse "debug" etc.; returns 0 or DDP_ECONFIG (with an error naming DDP_LOG). */
DDP_API int ddp_log_parse_level(const char *text, ddp_log_level_t *out);
/* Apply DDP_LOG from an environment map (unset: keep the current level). */
DDP_API int ddp_log_init_from_env(const struct ddp_env *env);
/* Replace the sink (NULL restores stderr). Process-global. */
DDP_API void ddp_log_set_sink(ddp_log_sink_fn fn, void *arg);

DDP_API int ddp_log_enabled(ddp_log_level_t level);
DDP_API void ddp_log(ddp_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
DDP_API void ddp_vlog(ddp_log_level_t level, const char *fmt, va_list ap);

#define DDP_LOG_AT(lvl, ...)                                                   \
    do {                                                                       \
        if (ddp_log_enabled(lvl))                                              \
            ddp_log(lvl, __VA_ARGS__);                                         \
    } while (0)
#define ddp_error(...) DDP_LOG_AT(DDP_LOG_ERROR, __VA_ARGS__)
#define ddp_warn(...) DDP_LOG_AT(DDP_LOG_WARN, __VA_ARGS__)
#define ddp_info(...) DDP_LOG_AT(DDP_LOG_INFO, __VA_ARGS__)
#define ddp_debug(...) DDP_LOG_AT(DDP_LOG_DEBUG, __VA_ARGS__)
#define ddp_trace(...) DDP_LOG_AT(DDP_LOG_TRACE, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
#endif
