/* sim/sim_trace.c — the trace: one JSON object per line, virtual time first.
 * Only virtual quantities reach it (no wall time, no pointers), so the same
 * seed gives the same bytes; a running FNV-1a hash summarises them. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"
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

static void vtrace(ddp_sim_t *sim, int task, const char *kind, const char *fmt,
                   va_list ap)
{
    char line[1024];
    const char *tname = task >= 0 ? sim->tasks[task]->name : "sim";
    int off = snprintf(line, sizeof line, "{\"t\":%lld,\"task\":\"%s\",\"kind\":\"%s\"",
                       (long long)(sim->vt - VT0), tname, kind);
    if (fmt && *fmt && off < (int)sizeof line - 2) {
        line[off++] = ',';
        int w = vsnprintf(line + off, sizeof line - (size_t)off, fmt, ap);
        off = w < 0 ? off : off + w;
    }
    if (off > (int)sizeof line - 3)
        off = (int)sizeof line - 3;
    line[off++] = '}';
    line[off++] = '\n';
    emit(sim, line, (size_t)off);
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
