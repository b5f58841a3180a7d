/* tools/runtrace.c — a simulator's JSON-lines trace read back
 * (tools/runtrace.h). */
#include "runtrace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int grow(void **arr, int *cap, int want, size_t size)
{
    if (want < *cap)
        return 0;
    int nc = *cap ? *cap : 64;
    while (nc <= want)
        nc *= 2;
    char *p = realloc(*arr, (size_t)nc * size);
    if (!p)
        return -12;
    memset(p + (size_t)*cap * size, 0, (size_t)(nc - *cap) * size);
    *arr = p;
    *cap = nc;
    return 0;
}

long long rt_int(const rt_line_t *l, const char *key, long long def)
{
    char pat[48];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = memmem(l->rest, l->rest_len, pat, strlen(pat));
    long long v;
    return p && sscanf(p + strlen(pat), "%lld", &v) == 1 ? v : def;
}

const char *rt_str(const rt_line_t *l, const char *key, char *buf, size_t n)
{
    char pat[48];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *p = memmem(l->rest, l->rest_len, pat, strlen(pat));
    const char *end = l->rest + l->rest_len;
    size_t k = 0;
    for (p = p ? p + strlen(pat) : NULL; p && p < end && *p != '"' && k + 1 < n; p++) {
        if (*p == '\\' && p + 1 < end) {
            p++;
            if (*p == 'u' && p + 4 < end) { /* control characters only */
                unsigned c = 0;
                if (sscanf(p + 1, "%4x", &c) == 1)
                    buf[k++] = c >= 0x20 && c < 0x7f ? (char)c : ' ';
                p += 4;
                continue;
            }
            buf[k++] = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p;
            continue;
        }
        buf[k++] = *p;
    }
    buf[k] = '\0';
    return buf;
}

/* What task l->task is: its node and host, its rank (often learnt after
 * its start: the last one seen counts), thread, launcher. */
static int scan_task(rt_trace_t *tr, const rt_line_t *l, const char *name)
{
    if (l->task < 0)
        return 0;
    if (grow((void **)&tr->tasks, &tr->ntasks, l->task, sizeof *tr->tasks))
        return -12;
    rt_task_t *t = &tr->tasks[l->task];
    if (!t->seen) {
        t->seen = 1;
        t->rank = -1;
        snprintf(t->name, sizeof t->name, "%s", name);
    }
    if (!strcmp(l->kind, "start")) {
        t->node = (int)rt_int(l, "node_index", 0);
        t->thread = (int)rt_int(l, "thread", 0);
        if (t->node >= 0) {
            if (grow((void **)&tr->host, &tr->nhosts, t->node, sizeof *tr->host))
                return -12;
            rt_str(l, "node", tr->host[t->node], sizeof tr->host[0]);
        }
    } else if (!strcmp(l->kind, "spawn")) {
        t->launcher = 1;
    }
    long long r = rt_int(l, "rank", -1);
    if (r >= 0)
        t->rank = (int)r;
    return 0;
}

int rt_parse(const char *text, rt_trace_t *out)
{
    memset(out, 0, sizeof *out);
    int cap = 0;
    for (const char *p = text; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        rt_line_t l = {0};
        char name[64];
        int pos = 0;
        if (sscanf(p, "{\"t\":%lld,\"task\":\"%63[^\"]\",\"id\":%d,\"kind\":\"%23[^\"]\"%n",
                   &l.t, name, &l.task, l.kind, &pos) == 4 && pos > 0 && (size_t)pos < len) {
            l.rest = p + pos;
            l.rest_len = len - (size_t)pos - 1; /* without the closing brace */
            if (l.rest_len && l.rest[0] == ',') {
                l.rest++;
                l.rest_len--;
            }
            if (grow((void **)&out->lines, &cap, out->nlines, sizeof l) ||
                scan_task(out, &l, name)) {
                rt_free(out);
                return -12;
            }
            out->lines[out->nlines++] = l;
            out->end = l.t;
        }
        p = nl ? nl + 1 : p + len;
    }
    /* Lanes: as the Chrome trace's own tracks (sim/sim_trace.c). */
    for (int i = 0; i < out->ntasks; i++) {
        rt_task_t *t = &out->tasks[i];
        int taken = 0;
        for (int k = 0; k < i && !taken && t->rank >= 0; k++)
            taken = out->tasks[k].lane && out->tasks[k].node == t->node &&
                    out->tasks[k].rank == t->rank;
        t->lane = t->seen && t->rank >= 0 && !t->thread && !taken;
    }
    return 0;
}

void rt_free(rt_trace_t *tr)
{
    free(tr->lines);
    free(tr->tasks);
    free(tr->host);
    memset(tr, 0, sizeof *tr);
}
