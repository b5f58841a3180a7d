/* core/log.c — leveled logging with the thread's rank as prefix. */
#include "ddp/log.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ddp/env.h"
#include "ddp/err.h"

static atomic_int g_level = DDP_LOG_WARN;
static ddp_log_sink_fn g_sink;
static void *g_sink_arg;

void ddp_log_set_level(ddp_log_level_t level) { atomic_store(&g_level, level); }
ddp_log_level_t ddp_log_level(void)
{
    return (ddp_log_level_t)atomic_load(&g_level);
}

static const char *const level_names[] = {"error", "warn", "info", "debug",
                                          "trace"};

int ddp_log_parse_level(const char *text, ddp_log_level_t *out)
{
    for (int i = 0; i < (int)(sizeof level_names / sizeof level_names[0]); i++) {
        if (text && strcasecmp(text, level_names[i]) == 0) {
            *out = (ddp_log_level_t)i;
            return 0;
        }
    }
    if (text && strcasecmp(text, "warning") == 0) {
        *out = DDP_LOG_WARN;
        return 0;
    }
    if (text && strcasecmp(text, "off") == 0) {
        *out = DDP_LOG_OFF;
        return 0;
    }
    return ddp_err_set(DDP_ECONFIG,
                       "DDP_LOG=\"%s\" is not a log level; expected one of "
                       "off, error, warn, info, debug, trace",
                       text ? text : "");
}

int ddp_log_init_from_env(const ddp_env_t *env)
{
    const char *v = ddp_env_get(env, "DDP_LOG");
    ddp_log_level_t lvl;
    if (!v || !*v)
        return 0;
    int rc = ddp_log_parse_level(v, &lvl);
    if (rc == 0)
        ddp_log_set_level(lvl);
    return rc;
}

void ddp_log_set_sink(ddp_log_sink_fn fn, void *arg)
{
    g_sink = fn;
    g_sink_arg = arg;
}

int ddp_log_enabled(ddp_log_level_t level)
{
    return (int)level <= atomic_load(&g_level);
}

void ddp_vlog(ddp_log_level_t level, const char *fmt, va_list ap)
{
    char line[1200];
    int off;
    int rank = ddp_ident_rank();
    if (rank >= 0)
        off = snprintf(line, sizeof line, "[ddp rank %d] %s: ", rank,
                       level_names[level]);
    else
        off = snprintf(line, sizeof line, "[ddp] %s: ", level_names[level]);
    if (off < 0)
        off = 0;
    vsnprintf(line + off, sizeof line - (size_t)off, fmt, ap);
    if (g_sink) {
        g_sink(g_sink_arg, level, line);
        return;
    }
    /* One fprintf per line keeps lines whole when ranks are threads. */
    fprintf(stderr, "%s\n", line);
}

void ddp_log(ddp_log_level_t level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ddp_vlog(level, fmt, ap);
    va_end(ap);
}
