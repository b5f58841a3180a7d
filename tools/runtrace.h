/* tools/runtrace.h — a simulator's JSON-lines trace read back (the format
 * sim/sim_trace.c writes: {"t":NS,"task":"NAME","id":N,"kind":"KIND",...}):
 * its tasks (node, rank, thread, launcher) and its lines, for the
 * artifact folder's per-rank logs (tools/artifacts.c) and `ddpsim report`
 * (tools/cmd_report.c). */
#ifndef DDP_TOOLS_RUNTRACE_H
#define DDP_TOOLS_RUNTRACE_H

#include <stddef.h>

typedef struct rt_line {
    long long t;      /* virtual ns */
    int task;         /* the task's id; -1: the simulation's own line */
    char kind[24];
    const char *rest; /* the other fields, in the trace's text */
    size_t rest_len;
} rt_line_t;

typedef struct rt_task {
    char name[64];
    int seen, node, rank, thread, launcher;
    int lane; /* a rank's main task (not a thread, nor a second task
                 claiming a rank already seen on its node): a rank lane */
} rt_task_t;

typedef struct rt_trace {
    rt_line_t *lines;
    int nlines;
    rt_task_t *tasks; /* by id */
    int ntasks;
    char (*host)[64]; /* by node index */
    int nhosts;
    long long end;    /* the last line's time */
} rt_trace_t;

/* Reads text (kept alive by the caller while *out is used) into *out.
 * Lines that do not parse are left out. 0, or -12 (out of memory). */
int rt_parse(const char *text, rt_trace_t *out);
void rt_free(rt_trace_t *tr);
/* An integer field of a line ("key":N); def when it has none. */
long long rt_int(const rt_line_t *l, const char *key, long long def);
/* A string field, JSON escapes undone, into buf ("" when it has none). */
const char *rt_str(const rt_line_t *l, const char *key, char *buf, size_t n);

#endif
