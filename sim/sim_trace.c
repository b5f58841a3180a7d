/* sim/sim_trace.c — the trace: one JSON object per line, virtual time first.
 * Only virtual quantities reach it (no wall time, no pointers), so the same
 * seed gives the same bytes; a running FNV-1a hash summarises them. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/fmt.h"
#include "sim_priv.h"

static void emit(ddp_sim_t *sim, const char *line, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        sim->trace_hash ^= (uint8_t)line[i];
        sim->trace_hash *= 0x100000001b3ull;
    }
    sim->trace_lines++;
    if (sim->o.trace)
        fwrite(line, 1, n, sim->o.trace);
    if (sim->o.keep_trace) {
        if (sim->trace_len + n + 1 > sim->trace_cap) {
            size_t nc = sim->trace_cap ? sim->trace_cap * 2 : 65536;
            while (nc < sim->trace_len + n + 1)
                nc *= 2;
            char *nt = realloc(sim->trace, nc);
            if (!nt)
                abort();
            sim->trace = nt;
            sim->trace_cap = nc;
        }
        memcpy(sim->trace + sim->trace_len, line, n);
        sim->trace_len += n;
        sim->trace[sim->trace_len] = '\0';
    }
}

/* The line into line[0..cap): its length; *cut when it did not fit (then
 * it is its first cap - 3 bytes and "}\n"). */
static int format_line(ddp_sim_t *sim, int task, const char *kind, const char *fmt,
                       va_list ap, char *line, int cap, int *cut)
{
    /* Every event is a line: ddp_fmt, not printf (ddp/fmt.h). */
    int off = ddp_fmt(line, (size_t)cap, "{\"t\":%lld,\"task\":\"%s\",\"kind\":\"%s\"",
                       (long long)(sim->vt - VT0),
                       task >= 0 ? sim->tasks[task]->name : "sim", kind);
    if (fmt && *fmt && off < cap - 2) {
        line[off++] = ',';
        int n = ddp_vfmt(line + off, (size_t)(cap - off), fmt, ap);
        off = n < 0 ? off : off + n;
    }
    *cut = off > cap - 3;
    if (*cut)
        off = cap - 3;
    line[off++] = '}';
    line[off++] = '\n';
    return off;
}

/* Lines are cut at 1,024 bytes. Most are short: the simulation's own
 * line buffer first, and the full size from the heap when it did not fit.
 * One buffer for the whole run (one task runs at a time, and a line is
 * emitted before vtrace returns), not one on the stack of the task that
 * traces: that was a fresh stretch of a rank's stack, in the deepest frame
 * of its wait, and a cache miss per line written (a tenth of a
 * 16,384-rank init's write misses). */
static void vtrace(ddp_sim_t *sim, int task, const char *kind, const char *fmt,
                   va_list ap)
{
    enum { SMALL = sizeof sim->trace_line, MAX = 1024 };
    char *small = sim->trace_line;
    va_list again;
    va_copy(again, ap);
    int cut;
    int n = format_line(sim, task, kind, fmt, ap, small, SMALL, &cut);
    if (!cut) {
        emit(sim, small, (size_t)n);
    } else {
        char *line = malloc(MAX);
        if (!line)
            abort();
        n = format_line(sim, task, kind, fmt, again, line, MAX, &cut);
        emit(sim, line, (size_t)n);
        free(line);
    }
    va_end(again);
}

void ddp__sim_trace(ddp_sim_t *sim, int task, const char *kind,
                    const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vtrace(sim, task, kind, fmt, ap);
    va_end(ap);
}

void ddp_sim_trace_event(ddp_sys_t *sys, const char *kind, const char *fmt, ...)
{
    ddp_sim_t *sim = ddp_sim_of(sys);
    if (!sim)
        return;
    va_list ap;
    va_start(ap, fmt);
    vtrace(sim, ddp_sim_task_of(sys), kind, fmt, ap);
    va_end(ap);
}

/* JSON string escape into out (always NUL-terminated). */
static void json_escape(const char *in, char *out, size_t n)
{
    size_t o = 0;
    for (; *in && o + 7 < n; in++) {
        unsigned char c = (unsigned char)*in;
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20) {
            o += (size_t)snprintf(out + o, n - o, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = '\0';
}

void ddp__sim_log_sink(void *arg, ddp_log_level_t level, const char *line)
{
    ddp_sim_t *sim = arg;
    ddp_sim_task_t *t = ddp__sim_current();
    char esc[900];
    json_escape(line, esc, sizeof esc);
    ddp__sim_trace(sim, t && t->sim == sim ? t->id : -1, "log",
                   "\"level\":%d,\"msg\":\"%s\"", (int)level, esc);
}

/* ---- exports of a JSON-lines trace ---- */

typedef struct {
    long long t;
    char task[64], kind[32];
    const char *rest; /* the remaining fields, without the closing brace */
    size_t rest_len;
} trace_line_t;

static int parse_line(const char *line, size_t len, trace_line_t *out)
{
    int pos = 0;
    if (sscanf(line, "{\"t\":%lld,\"task\":\"%63[^\"]\",\"kind\":\"%31[^\"]\"%n",
               &out->t, out->task, out->kind, &pos) != 3 || pos <= 0)
        return -1;
    out->rest = line + pos;
    out->rest_len = len > (size_t)pos + 1 ? len - (size_t)pos - 1 : 0;
    if (out->rest_len && out->rest[0] == ',') {
        out->rest++;
        out->rest_len--;
    }
    return 0;
}

/* Calls fn for each parsable line of the trace. */
static void each_line(const char *trace, void (*fn)(void *, const trace_line_t *),
                      void *arg)
{
    for (const char *p = trace; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        trace_line_t tl;
        if (parse_line(p, len, &tl) == 0)
            fn(arg, &tl);
        p = nl ? nl + 1 : p + len;
    }
}

typedef struct {
    FILE *out;
    int first;
    /* open phase per task name, for duration events */
    struct {
        char task[64], phase[64];
        long long since;
    } open[4096];
    int nopen;
} chrome_t;

static void chrome_emit(chrome_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void chrome_emit(chrome_t *c, const char *fmt, ...)
{
    va_list ap;
    fputs(c->first ? "\n" : ",\n", c->out);
    c->first = 0;
    va_start(ap, fmt);
    vfprintf(c->out, fmt, ap);
    va_end(ap);
}

static void chrome_close_phase(chrome_t *c, int i, long long t)
{
    chrome_emit(c, "{\"name\":\"%s\",\"cat\":\"phase\",\"ph\":\"X\",\"ts\":%.3f,"
                   "\"dur\":%.3f,\"pid\":1,\"tid\":\"%s\"}",
                c->open[i].phase, (double)c->open[i].since / 1e3,
                (double)(t - c->open[i].since) / 1e3, c->open[i].task);
}

static void chrome_line(void *arg, const trace_line_t *l)
{
    chrome_t *c = arg;
    int i;
    for (i = 0; i < c->nopen && strcmp(c->open[i].task, l->task); i++)
        ;
    int is_phase = !strcmp(l->kind, "phase");
    if (i < c->nopen && (is_phase || !strcmp(l->kind, "exit"))) {
        chrome_close_phase(c, i, l->t);
        c->open[i] = c->open[--c->nopen];
    }
    if (is_phase && c->nopen < (int)(sizeof c->open / sizeof c->open[0])) {
        const char *ph = strstr(l->rest, "\"phase\":\"");
        char name[64] = "?";
        if (ph)
            sscanf(ph + 9, "%63[^\"]", name);
        snprintf(c->open[c->nopen].task, sizeof c->open[0].task, "%s", l->task);
        snprintf(c->open[c->nopen].phase, sizeof c->open[0].phase, "%s", name);
        c->open[c->nopen].since = l->t;
        c->nopen++;
        return;
    }
    /* Everything else is an instant event carrying its fields as args. */
    chrome_emit(c, "{\"name\":\"%s\",\"cat\":\"event\",\"ph\":\"i\",\"s\":\"t\","
                   "\"ts\":%.3f,\"pid\":1,\"tid\":\"%s\",\"args\":{%.*s}}",
                l->kind, (double)l->t / 1e3, l->task, (int)l->rest_len, l->rest);
}

int ddp_sim_export_chrome(const char *trace, FILE *out)
{
    chrome_t *c = calloc(1, sizeof *c);
    if (!c)
        return ddp_err_set(-12, "out of memory");
    c->out = out;
    c->first = 1;
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", out);
    each_line(trace, chrome_line, c);
    long long end = 0;
    const char *last = trace ? strrchr(trace, '{') : NULL;
    if (last)
        sscanf(last, "{\"t\":%lld", &end);
    for (int i = 0; i < c->nopen; i++)
        chrome_close_phase(c, i, end);
    fputs("\n]}\n", out);
    free(c);
    return ferror(out) ? ddp_err_set(-5, "error writing the Chrome trace") : 0;
}

static void timeline_line(void *arg, const trace_line_t *l)
{
    fprintf(arg, "%14.6f s  %-16s %-14s %.*s\n", (double)l->t / 1e9, l->task,
            l->kind, (int)l->rest_len, l->rest);
}

int ddp_sim_export_timeline(const char *trace, FILE *out)
{
    each_line(trace, timeline_line, out);
    return ferror(out) ? ddp_err_set(-5, "error writing the timeline") : 0;
}
