/* coverage/lcov_read.h — the reader of lcov tracefiles shared by the
 * coverage tools (parity.c, cobertura.c; each one source file, so the
 * reader is static here). It hands each record to the caller's callbacks:
 * SF (file returns the caller's handle for the file, NULL to skip its
 * records), DA, FN, FNDA, BRDA (taken -1: "-", never evaluated). TN, FNF,
 * FNH, LF, LH, BRF, BRH and unreadable lines are ignored: the tools
 * recompute totals. Returns the number of SF records, -1 when the file
 * cannot be read (errno set). And the tools' XML escaping. */
#ifndef DDP_COVERAGE_LCOV_READ_H
#define DDP_COVERAGE_LCOV_READ_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

typedef struct lcov_sink {
    void *(*file)(void *ctx, const char *path);
    void (*da)(void *ctx, void *f, int line, long long count);
    void (*fn)(void *ctx, void *f, int line, const char *name);
    void (*fnda)(void *ctx, void *f, long long count, const char *name);
    void (*brda)(void *ctx, void *f, int line, int block, int branch, long long taken);
} lcov_sink_t;

/* s into o with XML's (and HTML's) five special characters escaped. */
static inline void lcov_xml_esc(FILE *o, const char *s)
{
    for (; *s; s++)
        switch (*s) {
        case '<': fputs("&lt;", o); break;
        case '>': fputs("&gt;", o); break;
        case '&': fputs("&amp;", o); break;
        case '"': fputs("&quot;", o); break;
        default: fputc(*s, o);
        }
}

/* An FN record's line: a function's first line is the least one seen (a
 * header's function, once per translation unit). */
static inline void lcov_first_line(int *slot, int l, void *unused)
{
    (void)unused;
    if (!*slot || l < *slot)
        *slot = l;
}

static int lcov_read(const char *path, const lcov_sink_t *k, void *ctx)
{
    FILE *in = fopen(path, "r");
    if (!in)
        return -1;
    char *buf = NULL;
    size_t cap = 0;
    ssize_t n;
    void *f = NULL;
    int records = 0;
    while ((n = getline(&buf, &cap, in)) >= 0) {
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
            buf[--n] = '\0';
        int l, b, br;
        long long v;
        char name[1024], taken[32];
        if (!strncmp(buf, "SF:", 3)) {
            f = k->file(ctx, buf + 3);
            records++;
        } else if (!strcmp(buf, "end_of_record")) {
            f = NULL;
        } else if (!f) {
            continue;
        } else if (sscanf(buf, "DA:%d,%lld", &l, &v) == 2 && l > 0) {
            k->da(ctx, f, l, v);
        } else if (sscanf(buf, "FN:%d,%1023s", &l, name) == 2) {
            k->fn(ctx, f, l, name);
        } else if (sscanf(buf, "FNDA:%lld,%1023s", &v, name) == 2) {
            k->fnda(ctx, f, v, name);
        } else if (sscanf(buf, "BRDA:%d,%d,%d,%31s", &l, &b, &br, taken) == 4) {
            k->brda(ctx, f, l, b, br, strcmp(taken, "-") ? strtoll(taken, NULL, 10) : -1);
        }
    }
    free(buf);
    int bad = ferror(in);
    fclose(in);
    return bad ? -1 : records;
}

#endif
