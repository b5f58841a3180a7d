/* core/err.c — error codes, names and the thread-local error context.
 *
 * The identity (rank, world, phase), the error context and the buffers
 * ddp_err_message and ddp_err_name return live in one ddp_ident_state_t.
 * Each thread has its own; a user-space scheduler that runs many tasks on
 * one thread (the simulator's contexts, docs/simulator.md § 1) gives each
 * task one and makes it current on every switch (ddp_ident_state_use). */
#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/fmt.h"

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

/* The error context (1.7 KiB) and ddp_err_message's buffer (2 KiB) are
 * allocated when first written, not kept in the state: a simulated rank
 * that never fails (most of them) has a state of ~110 bytes instead of 3.8
 * KiB (docs/benchmarks.md § 1). Until then the context reads as a fresh
 * one. */
struct ddp_ident_state {
    int rank, world;
    char phase[48];
    char unknown[32];   /* ddp_err_name of an unknown code */
    ddp_errctx_t *ctx;  /* NULL until written (reads: fresh_ctx) */
    char *message;      /* ddp_err_message, DDP_ERR_MSG_MAX; NULL until then */
};

#define CTX_FRESH {.rank = -1, .peer = -1, .waited_ns = -1}
static const ddp_errctx_t fresh_ctx = CTX_FRESH;

static _Thread_local ddp_ident_state_t own_state = {.rank = -1, .world = -1};
static _Thread_local ddp_ident_state_t *cur_state; /* NULL: own_state */
/* own_state's context and message; a state's when its own could not be
 * allocated (shared then by this thread's states that ran out). */
static _Thread_local ddp_errctx_t own_ctx = CTX_FRESH, spill_ctx = CTX_FRESH;
static _Thread_local char own_message[DDP_ERR_MSG_MAX];

static ddp_ident_state_t *st(void)
{
    ddp_ident_state_t *s = cur_state;
    return s ? s : &own_state;
}

/* s's context to read: a fresh one until something wrote it. */
static const ddp_errctx_t *ctx_r(const ddp_ident_state_t *s)
{
    return s->ctx ? s->ctx : &fresh_ctx;
}

/* s's context to write, allocated (fresh) on the first write. */
static ddp_errctx_t *ctx_w(ddp_ident_state_t *s)
{
    if (!s->ctx) {
        ddp_errctx_t *c = s == &own_state ? &own_ctx : malloc(sizeof *c);
        if (c && c != &own_ctx)
            *c = fresh_ctx;
        s->ctx = c ? c : &spill_ctx;
    }
    return s->ctx;
}

size_t ddp_ident_state_size(void) { return sizeof(ddp_ident_state_t); }

/* A fresh state's fields that are not zero, and no other byte. */
void ddp_ident_state_init_zeroed(ddp_ident_state_t *s)
{
    s->rank = -1;
    s->world = -1;
}

void ddp_ident_state_init(ddp_ident_state_t *s)
{
    memset(s, 0, sizeof *s);
    ddp_ident_state_init_zeroed(s);
}

void ddp_ident_state_fini(ddp_ident_state_t *s)
{
    if (s->ctx != &own_ctx && s->ctx != &spill_ctx)
        free(s->ctx);
    s->ctx = NULL;
    free(s->message);
    s->message = NULL;
}

ddp_ident_state_t *ddp_ident_state_use(ddp_ident_state_t *s)
{
    ddp_ident_state_t *was = cur_state;
    cur_state = s;
    return was;
}

const char *ddp_err_name(int code)
{
    char *unknown = st()->unknown;
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
    snprintf(unknown, sizeof st()->unknown, "E?%d", code);
    return unknown;
}

ddp_errctx_t *ddp_err_ctx(void) { return ctx_w(st()); }

void ddp_ident_set_rank(int rank) { st()->rank = rank; }
int ddp_ident_rank(void) { return st()->rank; }
void ddp_ident_set_world(int world) { st()->world = world; }
int ddp_ident_world(void) { return st()->world; }
void ddp_ident_set_phase(const char *phase)
{
    /* A copy, not a printf: every rank changes phase several times. */
    char *dst = st()->phase;
    size_t n = phase ? strnlen(phase, sizeof st()->phase - 1) : 0;
    /* Setting the phase a rank is already in is no change: no fault point,
     * no trace line (the dispatcher names a member's phase and the shared
     * default names it again). */
    if (strncmp(dst, phase ? phase : "", n) == 0 && dst[n] == '\0')
        return;
    memcpy(dst, phase ? phase : "", n);
    dst[n] = '\0';
    /* Phase changes are a fault point, so a fault can strike a rank as it
     * enters a phase ("crash rank 3 during barrier"); see fault-points.md. */
    (void)ddp_fault_hit(DDP_FP_DDP_PHASE_ENTER);
}
const char *ddp_ident_phase(void) { return st()->phase; }

/* A whole context's line fits DDP_ERR_MSG_MAX: its fields, the words
 * around them and a code's name and description (ddp_err_format). */
_Static_assert(sizeof(((ddp_errctx_t *)0)->what) + sizeof(((ddp_errctx_t *)0)->hint) +
                       sizeof(((ddp_errctx_t *)0)->phase) + sizeof(((ddp_errctx_t *)0)->addr) +
                       300 <=
                   DDP_ERR_MSG_MAX,
               "DDP_ERR_MSG_MAX holds a whole error context");

/* vsnprintf's count n into buf: where it was cut, "..." says so. */
static void mark_cut(char *buf, size_t size, int n)
{
    if (n >= 0 && (size_t)n >= size && size > 4)
        memcpy(buf + size - 4, "...", 4);
}

int ddp_err_set(int code, const char *fmt, ...)
{
    ddp_ident_state_t *s = st();
    /* Format first: an argument may point into the old context. */
    char what[sizeof fresh_ctx.what];
    va_list ap;
    va_start(ap, fmt);
    mark_cut(what, sizeof what, vsnprintf(what, sizeof what, fmt, ap));
    va_end(ap);
    ddp_errctx_t *c = ctx_w(s);
    memset(c, 0, sizeof *c);
    c->code = code;
    c->rank = s->rank;
    c->peer = -1;
    c->waited_ns = -1;
    snprintf(c->phase, sizeof c->phase, "%s", s->phase);
    memcpy(c->what, what, sizeof what);
    ddp_utf8_escape(c->what, sizeof c->what); /* names from files, keys */
    return code;
}

int ddp_err_wrap(const char *fmt, ...)
{
    ddp_errctx_t *c = ctx_w(st());
    char pre[256], old[sizeof c->what];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, c->what, sizeof old);
    mark_cut(c->what, sizeof c->what, snprintf(c->what, sizeof c->what, "%s: %s", pre, old));
    ddp_utf8_escape(c->what, sizeof c->what);
    return c->code;
}

int ddp_err_addr(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ddp_errctx_t *c = ctx_w(st());
    vsnprintf(c->addr, sizeof c->addr, fmt, ap);
    va_end(ap);
    return c->code;
}

int ddp_err_hint(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ddp_errctx_t *c = ctx_w(st());
    mark_cut(c->hint, sizeof c->hint, vsnprintf(c->hint, sizeof c->hint, fmt, ap));
    va_end(ap);
    return c->code;
}

int ddp_err_waited(int64_t waited_ns)
{
    ddp_errctx_t *c = ctx_w(st());
    c->waited_ns = waited_ns;
    return c->code;
}

int ddp_err_peer(int peer)
{
    ddp_errctx_t *c = ctx_w(st());
    c->peer = peer;
    return c->code;
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
    ddp_ident_state_t *s = st();
    if (s != &own_state && !s->message)
        s->message = malloc(DDP_ERR_MSG_MAX);
    /* Without memory for its own, the thread's buffer: valid until the
     * next call on this thread rather than on this state. */
    char *buf = s->message ? s->message : own_message;
    return ddp_err_format(ctx_r(s), buf, DDP_ERR_MSG_MAX);
}

/* ---- keeping the context across calls (ddp_err_save) ---- */
struct ddp_errsave {
    ddp_errctx_t ctx;
};

/* What a save returns when its copy could not be made. */
static ddp_errsave_t lost_save;

/* 1 when the context shows nothing: a fresh state's. */
static int ctx_empty(const ddp_errctx_t *c)
{
    return c->code == 0 && c->rank == -1 && c->peer == -1 && c->waited_ns == -1 &&
           !c->phase[0] && !c->addr[0] && !c->what[0] && !c->hint[0];
}

/* Back to a fresh state's context: a few cache lines, not 1.7 KiB. */
static void ctx_clear(ddp_errctx_t *c)
{
    c->code = 0;
    c->rank = -1;
    c->peer = -1;
    c->waited_ns = -1;
    c->phase[0] = c->addr[0] = c->what[0] = c->hint[0] = '\0';
}

ddp_errsave_t *ddp_err_save(void)
{
    const ddp_errctx_t *c = ctx_r(st());
    if (ctx_empty(c))
        return NULL;
    ddp_errsave_t *s = malloc(sizeof *s);
    if (!s)
        return &lost_save;
    s->ctx = *c;
    return s;
}

void ddp_err_restore(ddp_errsave_t *saved)
{
    if (saved == &lost_save) {
        ddp_err_set(-ENOMEM, "the error context could not be kept across a call: "
                             "no memory for its %zu-byte copy, so the error it held is lost",
                    sizeof *saved);
        ddp_err_hint("give the process more memory (ulimit -v, or fewer simulated ranks)");
        return;
    }
    if (!saved) {
        if (st()->ctx) /* none yet: it reads as fresh already */
            ctx_clear(st()->ctx);
        return;
    }
    *ctx_w(st()) = saved->ctx;
    free(saved);
}

void ddp_err_forget(ddp_errsave_t *saved)
{
    if (saved != &lost_save)
        free(saved);
}
