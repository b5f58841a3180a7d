/* core/err.c — error codes, names and the thread-local error context. */
#include "ddp/err.h"
#include "ddp/faults.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ddp_strerror(int code)
{
    switch (code) {
    case 0:
        return "success";
#define DDP__ERR_DESC(name, value, desc)                                       \
    case value:                                                                \
        return desc;
        DDP_ERR_LIST(DDP__ERR_DESC)
#undef DDP__ERR_DESC
    default:
        break;
    }
    if (code < 0 && code > -4096)
        return strerrordesc_np(-code) ? strerrordesc_np(-code) : "unknown error";
    return "unknown error";
}

const char *ddp_err_name(int code)
{
    static _Thread_local char unknown[32];
    switch (code) {
    case 0:
        return "OK";
#define DDP__ERR_NAME(name, value, desc)                                       \
    case value:                                                                \
        return "DDP_E" #name;
        DDP_ERR_LIST(DDP__ERR_NAME)
#undef DDP__ERR_NAME
    default:
        break;
    }
    if (code < 0 && code > -4096) {
        const char *n = strerrorname_np(-code);
        if (n)
            return n;
    }
    snprintf(unknown, sizeof unknown, "E?%d", code);
    return unknown;
}

static _Thread_local ddp_errctx_t tls_ctx = {.rank = -1, .peer = -1,
                                              .waited_ns = -1};
static _Thread_local int tls_rank = -1;
static _Thread_local char tls_phase[48];

ddp_errctx_t *ddp_err_ctx(void) { return &tls_ctx; }

void ddp_ident_set_rank(int rank) { tls_rank = rank; }
int ddp_ident_rank(void) { return tls_rank; }
static _Thread_local int tls_world = -1;
void ddp_ident_set_world(int world) { tls_world = world; }
int ddp_ident_world(void) { return tls_world; }
void ddp_ident_set_phase(const char *phase)
{
    snprintf(tls_phase, sizeof tls_phase, "%s", phase ? phase : "");
    /* Phase changes are a fault point, so a fault can strike a rank as it
     * enters a phase ("crash rank 3 during barrier"); see fault-points.md. */
    (void)ddp_fault_hit(DDP_FP_DDP_PHASE_ENTER);
}
const char *ddp_ident_phase(void) { return tls_phase; }

int ddp_err_set(int code, const char *fmt, ...)
{
    ddp_errctx_t *c = &tls_ctx;
    /* Format first: an argument may point into the old context. */
    char what[sizeof c->what];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    memset(c, 0, sizeof *c);
    c->code = code;
    c->rank = tls_rank;
    c->peer = -1;
    c->waited_ns = -1;
    snprintf(c->phase, sizeof c->phase, "%s", tls_phase);
    memcpy(c->what, what, sizeof what);
    return code;
}

int ddp_err_wrap(const char *fmt, ...)
{
    ddp_errctx_t *c = &tls_ctx;
    char pre[256], old[sizeof c->what];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, c->what, sizeof old);
    snprintf(c->what, sizeof c->what, "%s: %s", pre, old);
    return c->code;
}

int ddp_err_addr(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tls_ctx.addr, sizeof tls_ctx.addr, fmt, ap);
    va_end(ap);
    return tls_ctx.code;
}

int ddp_err_hint(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tls_ctx.hint, sizeof tls_ctx.hint, fmt, ap);
    va_end(ap);
    return tls_ctx.code;
}

int ddp_err_waited(int64_t waited_ns)
{
    tls_ctx.waited_ns = waited_ns;
    return tls_ctx.code;
}

int ddp_err_peer(int peer)
{
    tls_ctx.peer = peer;
    return tls_ctx.code;
}

/* 1 if the sentence already gives a duration: " after " and a number of
 * seconds ("after 30.0 s", "after 60.0 seconds"); "failed after 21
 * attempt(s)" is a count, not a duration. */
static int says_how_long(const char *what)
{
    for (const char *a = strstr(what, " after "); a; a = strstr(a + 1, " after ")) {
        char *end;
        const char *num = a + strlen(" after ");
        if (*num < '0' || *num > '9')
            continue;
        (void)strtod(num, &end);
        if (end[0] == ' ' && end[1] == 's')
            return 1;
    }
    return 0;
}

char *ddp_err_format(const ddp_errctx_t *c, char *buf, size_t n)
{
    size_t off = 0;
#define PUT(...)                                                               \
    do {                                                                       \
        if (off < n) {                                                         \
            int w_ = snprintf(buf + off, n - off, __VA_ARGS__);                \
            if (w_ > 0)                                                        \
                off += (size_t)w_;                                             \
        }                                                                      \
    } while (0)
    if (n == 0)
        return buf;
    buf[0] = '\0';
    if (c->rank >= 0)
        PUT("rank %d", c->rank);
    if (c->phase[0])
        PUT("%s%s", off ? ", " : "", c->phase);
    if (off)
        PUT(": ");
    PUT("%s", c->what[0] ? c->what : ddp_strerror(c->code));
    if (c->peer >= 0 && !strstr(c->what, "peer"))
        PUT(" (peer rank %d)", c->peer);
    if (c->addr[0] && !strstr(c->what, c->addr))
        PUT(" [%s]", c->addr);
    /* Sentences that already say how long ("Timed out after 30.0 s") do
     * not get the figure twice. */
    if (c->waited_ns >= 0 && !says_how_long(c->what))
        PUT(" after %.1f s", (double)c->waited_ns / 1e9);
    if (c->code)
        PUT(" (%s: %s)", ddp_err_name(c->code), ddp_strerror(c->code));
    if (c->hint[0])
        PUT("; hint: %s", c->hint);
#undef PUT
    return buf;
}

const char *ddp_err_message(void)
{
    static _Thread_local char buf[1024];
    return ddp_err_format(&tls_ctx, buf, sizeof buf);
}
