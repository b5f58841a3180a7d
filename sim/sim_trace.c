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
    /* The hash in a local: through sim (which the line's bytes may alias,
     * for the compiler) it was stored back after every byte. */
    uint64_t h = sim->trace_hash;
#pragma GCC unroll 4
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)line[i]) * 0x100000001b3ull;
    sim->trace_hash = h;
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
                ddp__sim_oom("the trace", nc);
            sim->trace = nt;
            sim->trace_cap = nc;
        }
        memcpy(sim->trace + sim->trace_len, line, n);
        sim->trace_len += n;
        sim->trace[sim->trace_len] = '\0';
    }
}

static char *put_text(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

static char *put_int(char *p, long long v)
{
    char d[24];
    int n = (int)sizeof d;
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do
        d[--n] = (char)('0' + u % 10);
    while ((u /= 10) > 0);
    if (v < 0)
        d[--n] = '-';
    return put_text(p, d + n, sizeof d - (size_t)n);
}

/* A line's head, {"t":T,"task":"NAME","id":ID,"kind":"KIND", as ddp_fmt
 * writes it, by hand: every event is a line, and parsing the format was
 * half of a line's cost. -1 when it might not fit in cap (ddp_fmt then
 * writes it, cut). */
static int put_head(char *line, int cap, long long t, const char *name, int id,
                    const char *kind)
{
    size_t nl = strlen(name), kl = strlen(kind);
    if (nl + kl + 80 > (size_t)cap) /* 80: the words and two 20-digit numbers */
        return -1;
    char *p = put_text(line, "{\"t\":", 5);
    p = put_int(p, t);
    p = put_text(p, ",\"task\":\"", 9);
    p = put_text(p, name, nl);
    p = put_text(p, "\",\"id\":", 7);
    p = put_int(p, id);
    p = put_text(p, ",\"kind\":\"", 9);
    p = put_text(p, kind, kl);
    *p++ = '"';
    *p = '\0';
    return (int)(p - line);
}

/* The line into line[0..cap): its length; *cut when it did not fit (then
 * it is its first cap - 3 bytes and "}\n"). */
static int format_line(ddp_sim_t *sim, int task, const char *kind, const char *fmt,
                       va_list ap, char *line, int cap, int *cut)
{
    /* Every event is a line: no printf (ddp/fmt.h). The task's id besides
     * its name: names repeat (every node's "ddp_spawn-child0"), and the
     * exports need to tell those tasks apart. */
    long long t = (long long)(sim->vt - VT0);
    const char *name = task >= 0 ? sim->tasks[task]->name : "sim";
    int id = task >= 0 ? task : -1;
    int off = put_head(line, cap, t, name, id, kind);
    if (off < 0)
        off = ddp_fmt(line, (size_t)cap, "{\"t\":%lld,\"task\":\"%s\",\"id\":%d,\"kind\":\"%s\"",
                      t, name, id, kind);
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
            ddp__sim_oom("a trace line", MAX);
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

/* A line cut at 1,024 bytes (vtrace) is 1,022 long without its newline;
 * a line that long may end mid-value, so its fields are not copied as
 * JSON. */
#define CUT_LEN 1022

typedef struct {
    long long t;
    int id; /* the task's id, -1 for the simulation's own lines */
    char task[64], kind[32];
    const char *rest; /* the remaining fields, without the closing brace */
    size_t rest_len;
    const char *line;
    size_t len;
} trace_line_t;

static int parse_line(const char *line, size_t len, trace_line_t *out)
{
    int pos = 0;
    if (sscanf(line, "{\"t\":%lld,\"task\":\"%63[^\"]\",\"id\":%d,\"kind\":\"%31[^\"]\"%n",
               &out->t, out->task, &out->id, out->kind, &pos) != 4 || pos <= 0)
        return -1;
    out->line = line;
    out->len = len;
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

/* An integer field of a line ("key":N); def when it has none. */
static int int_field(const trace_line_t *l, const char *key, int def)
{
    char pat[48];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = memmem(l->rest, l->rest_len, pat, strlen(pat));
    int v;
    return p && sscanf(p + strlen(pat), "%d", &v) == 1 ? v : def;
}

/* A string field of a line into buf ("" when it has none). */
static const char *str_field(const trace_line_t *l, const char *key, char *buf, size_t n)
{
    char pat[48];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *p = memmem(l->rest, l->rest_len, pat, strlen(pat));
    size_t k = 0;
    for (p = p ? p + strlen(pat) : NULL; p && *p && *p != '"' && k + 1 < n; p++)
        buf[k++] = *p;
    buf[k] = '\0';
    return buf;
}

/* Chrome's tracks: pid = node index, tid = rank. Tasks that are not ranks
 * (ddp_spawn's and ddp_cpu's launchers, the store server, a rank's
 * threads; ddp's launcher is rank 0 of its node) and a second task
 * claiming a rank already on its node's track get tids from NONRANK_TID
 * up, above any rank (at most 4,096 nodes x 64 processes), so no two
 * tasks share a track. The simulation's own lines (deadlock, end, a node
 * crash) go to a process of their own. */
#define NONRANK_TID 1000000
#define SIM_PID 1000000

typedef struct ctask {
    char name[64];
    int node, rank, thread, launcher, tid, seen;
    /* the open phase, a complete event once the next one starts */
    int open;
    char phase[64], args[192];
    long long since;
} ctask_t;

typedef struct {
    FILE *out;
    int first, sim_lines;
    ctask_t *t; /* by task id */
    int nt;
    char (*host)[64]; /* by node index */
    int nhost;
    long long end;
} chrome_t;

static int grow(void **arr, int *n, int want, size_t size)
{
    if (want < *n)
        return 0;
    int nn = *n ? *n : 64;
    while (nn <= want)
        nn *= 2;
    char *p = realloc(*arr, (size_t)nn * size);
    if (!p)
        return -1;
    memset(p + (size_t)*n * size, 0, (size_t)(nn - *n) * size);
    *arr = p;
    *n = nn;
    return 0;
}

/* Pass 1: what each task is (node, rank, thread, launcher) and each
 * node's host name. A rank is often learnt after the start (a spawned
 * process reads its environment), so the last one seen counts. */
static void chrome_scan(void *arg, const trace_line_t *l)
{
    chrome_t *c = arg;
    c->end = l->t;
    if (l->id < 0) {
        c->sim_lines++;
        return;
    }
    if (grow((void **)&c->t, &c->nt, l->id, sizeof *c->t) != 0)
        return;
    ctask_t *t = &c->t[l->id];
    if (!t->seen) {
        t->seen = 1;
        t->rank = -1;
        snprintf(t->name, sizeof t->name, "%s", l->task);
    }
    if (!strcmp(l->kind, "start")) {
        t->node = int_field(l, "node_index", 0);
        t->thread = int_field(l, "thread", 0);
        if (t->node >= 0 && grow((void **)&c->host, &c->nhost, t->node, sizeof *c->host) == 0)
            str_field(l, "node", c->host[t->node], sizeof c->host[0]);
    } else if (!strcmp(l->kind, "spawn")) {
        t->launcher = 1;
    }
    int r = int_field(l, "rank", -1);
    if (r >= 0)
        t->rank = r;
}

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

static void chrome_meta(chrome_t *c, const char *what, int pid, int tid, const char *name)
{
    char esc[160];
    json_escape(name, esc, sizeof esc);
    chrome_emit(c, "{\"name\":\"%s\",\"ph\":\"M\",\"ts\":0,\"pid\":%d,\"tid\":%d,"
                   "\"args\":{\"name\":\"%s\"}}", what, pid, tid, esc);
}

/* The tracks and their names, before any event. */
static void chrome_tracks(chrome_t *c)
{
    for (int n = 0; n < c->nhost; n++) {
        if (!c->host[n][0])
            continue;
        char name[96];
        snprintf(name, sizeof name, "node %d (%s)", n, c->host[n]);
        chrome_meta(c, "process_name", n, 0, name);
    }
    if (c->sim_lines)
        chrome_meta(c, "process_name", SIM_PID, 0, "simulator");
    for (int i = 0; i < c->nt; i++) {
        ctask_t *t = &c->t[i];
        if (!t->seen)
            continue;
        int taken = 0;
        for (int k = 0; k < i && !taken && t->rank >= 0; k++)
            taken = c->t[k].seen && c->t[k].node == t->node && c->t[k].tid == t->rank;
        int own = t->rank >= 0 && !t->thread && !taken;
        t->tid = own ? t->rank : NONRANK_TID + i;
        char name[160];
        if (own)
            snprintf(name, sizeof name, "rank %d", t->rank);
        else if (t->launcher)
            snprintf(name, sizeof name, "launcher %s", t->name);
        else if (t->thread && t->rank >= 0)
            snprintf(name, sizeof name, "%s (thread of rank %d)", t->name, t->rank);
        else if (t->rank >= 0)
            snprintf(name, sizeof name, "rank %d (%s, task %d)", t->rank, t->name, i);
        else
            snprintf(name, sizeof name, "%s", t->name);
        chrome_meta(c, "thread_name", t->node, t->tid, name);
        /* Launchers and helpers above the ranks, ranks in rank order. */
        chrome_emit(c, "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"ts\":0,"
                       "\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
                    t->node, t->tid, own ? t->rank : i - NONRANK_TID);
    }
    chrome_meta(c, "thread_name", SIM_PID, 0, "simulator");
}

static void chrome_close_phase(chrome_t *c, ctask_t *t, long long end)
{
    if (!t->open)
        return;
    t->open = 0;
    chrome_emit(c, "{\"name\":\"%s\",\"cat\":\"phase\",\"ph\":\"X\",\"ts\":%.3f,"
                   "\"dur\":%.3f,\"pid\":%d,\"tid\":%d,\"args\":{%s}}",
                t->phase, (double)t->since / 1e3, (double)(end - t->since) / 1e3,
                t->node, t->tid, t->args);
}

/* A line's fields as an args object: as they are, or, for a line that may
 * have been cut, the whole line as one string. */
static void chrome_args(chrome_t *c, const trace_line_t *l)
{
    if (l->len < CUT_LEN) {
        fprintf(c->out, "{%.*s}", (int)l->rest_len, l->rest);
        return;
    }
    char raw[CUT_LEN + 1], esc[4 * CUT_LEN];
    snprintf(raw, sizeof raw, "%.*s", (int)l->len, l->line);
    json_escape(raw, esc, sizeof esc);
    fprintf(c->out, "{\"line\":\"%s\"}", esc);
}

/* Pass 2: the events. Phases become complete ("X") events that last until
 * the task's next phase or its exit; faults are instant events of their
 * own category; everything else is an instant event with its fields. */
static void chrome_line(void *arg, const trace_line_t *l)
{
    chrome_t *c = arg;
    ctask_t *t = l->id >= 0 && l->id < c->nt ? &c->t[l->id] : NULL;
    int is_phase = !strcmp(l->kind, "phase");
    if (t && (is_phase || !strcmp(l->kind, "exit")))
        chrome_close_phase(c, t, l->t);
    if (t && is_phase) {
        str_field(l, "phase", t->phase, sizeof t->phase);
        int fits = l->rest_len < sizeof t->args && l->len < CUT_LEN;
        snprintf(t->args, sizeof t->args, "%.*s", fits ? (int)l->rest_len : 0, l->rest);
        t->since = l->t;
        t->open = 1;
        return;
    }
    char name[96], what[64];
    int fault = !strcmp(l->kind, "fault");
    if (fault)
        snprintf(name, sizeof name, "fault %s", str_field(l, "fault", what, sizeof what));
    else
        snprintf(name, sizeof name, "%s", l->kind);
    /* Scope: the task's track, or the whole trace for the simulation's own. */
    chrome_emit(c, "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"i\",\"s\":\"%s\","
                   "\"ts\":%.3f,\"pid\":%d,\"tid\":%d,\"args\":",
                name, fault ? "fault" : t ? "event" : "sim", t ? "t" : "g",
                (double)l->t / 1e3, t ? t->node : SIM_PID, t ? t->tid : 0);
    chrome_args(c, l);
    fputc('}', c->out);
}

int ddp_sim_export_chrome(const char *trace, FILE *out)
{
    chrome_t *c = calloc(1, sizeof *c);
    if (!c)
        return ddp_err_set(-12, "out of memory");
    c->out = out;
    c->first = 1;
    each_line(trace, chrome_scan, c);
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", out);
    chrome_tracks(c);
    each_line(trace, chrome_line, c);
    for (int i = 0; i < c->nt; i++)
        chrome_close_phase(c, &c->t[i], c->end);
    fputs("\n]}\n", out);
    free(c->t);
    free(c->host);
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
