/* core/hostlist.c — SLURM hostlist expressions: expand and compress.
 *
 * Lightning's own parser was a regex shortcut and picked the wrong root host
 * for several real node lists (#5160, #14896), so we implement the grammar
 * SLURM itself accepts (src/common/hostlist.c) and produce the order of
 * `scontrol show hostnames` (SLURM 22.05):
 *
 *   list    := element (sep element)*      sep := ',' or whitespace
 *   element := (literal | group)+          a host name with bracket groups
 *   group   := '[' range (',' range)* ']'
 *   range   := digits | digits '-' digits
 *
 * A range is printed with the width of its first number ("[08-10]" gives 08 09
 * 10, "[8-10]" gives 8 9 10), like SLURM. Several groups in one element give
 * their cartesian product in scontrol's order: the last group varies
 * fastest, then the first, the second, ..., the one before the last
 * (expand_element). tests/hostlist/ holds a table recorded from scontrol and
 * a script that compares with a live one.
 *
 * Where we differ from SLURM 22.05 (docs/cluster-environments.md lists it):
 *  - extension: text after a name's last group is a suffix ("gpu[1-2]-ib"),
 *    which SLURM 22.05 rejects (later releases accept it);
 *  - stricter on malformed input: where SLURM silently drops empty elements
 *    ("a,,b") or accepts "[5-]" as 5, "n]" or "node[1-" as literal names, we
 *    report an error, because a node list that parses "somehow" is exactly
 *    how ranks end up talking to the wrong master; and a host name holds at
 *    most 64 pieces (groups and the text between them).
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/cluster.h"
#include "ddp/err.h"

#define HOSTLIST_DEFAULT_MAX 1000000u
/* 18 digits always fit an unsigned 64-bit value, so no overflow checks are
 * needed past this; longer numbers are not node indices anyway. */
#define HOSTLIST_MAX_DIGITS 18

typedef struct hl_range {
    uint64_t lo, hi;
    int width; /* digits of lo as written: the zero-padding width */
} hl_range_t;

/* A piece of an element: a literal (ranges == NULL) or a bracket group. */
typedef struct hl_seg {
    const char *lit; /* points into the expression */
    size_t litlen;
    hl_range_t *ranges;
    size_t nranges;
    uint64_t count; /* hosts this group contributes (1 for a literal) */
} hl_seg_t;

typedef struct hl_vec {
    char **v;
    size_t n, cap;
} hl_vec_t;

static int hl_error(const char *expr, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int hl_error(const char *expr, const char *fmt, ...)
{
    char why[192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return ddp_err_set(DDP_ECONFIG,
                       "invalid hostlist \"%.200s\": %s; expected e.g. "
                       "node[1-4,7]",
                       expr, why);
}

/* 1-based column of p in expr, as a user counts. */
#define POS(p) ((size_t)((p) - expr) + 1)

static int is_sep(char c)
{
    return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int is_space(char c) { return c != ',' && is_sep(c); }

/* Parses the digits at *p; *p is left after them. */
static int parse_number(const char *expr, const char **p, uint64_t *out,
                        int *width)
{
    const char *s = *p;
    uint64_t v = 0;
    int w = 0;
    while (isdigit((unsigned char)*s)) {
        if (++w > HOSTLIST_MAX_DIGITS)
            return hl_error(expr, "number too long at position %zu (at most 18 "
                                  "digits)",
                            POS(*p));
        v = v * 10 + (uint64_t)(*s - '0');
        s++;
    }
    *out = v;
    *width = w;
    *p = s;
    return 0;
}

/* Parses "[...]" starting at *p (which points at '['); fills seg. */
static int parse_group(const char *expr, const char **p, hl_seg_t *seg,
                       uint64_t max)
{
    const char *open = *p, *s = *p + 1;
    size_t cap = 0;
    seg->count = 0;
    for (;;) {
        const char *start = s;
        if (*s == '\0')
            return hl_error(expr, "unbalanced '[' at position %zu",
                            POS(open));
        if (*s == ']' || *s == ',') {
            if (*s == ']' && start == open + 1)
                return hl_error(expr, "empty range \"[]\" at position %zu",
                                POS(open));
            return hl_error(expr, "empty range element at position %zu",
                            POS(s));
        }
        if (!isdigit((unsigned char)*s)) {
            if (*s == '[')
                return hl_error(expr, "nested '[' at position %zu",
                                POS(s));
            return hl_error(expr, "'%c' in a range at position %zu (ranges "
                                  "hold only digits, '-' and ',')",
                            *s, POS(s));
        }
        hl_range_t r;
        int rc = parse_number(expr, &s, &r.lo, &r.width);
        if (rc < 0)
            return rc;
        r.hi = r.lo;
        if (*s == '-') {
            s++;
            int hw;
            if (!isdigit((unsigned char)*s)) {
                if (*s == '\0')
                    return hl_error(expr, "unbalanced '[' at position %zu",
                                    POS(open));
                if (*s == ']' || *s == ',')
                    return hl_error(expr, "range without an end at position "
                                          "%zu",
                                    POS(start));
                return hl_error(expr, "'%c' in a range at position %zu "
                                      "(ranges hold only digits, '-' and ',')",
                                *s, POS(s));
            }
            rc = parse_number(expr, &s, &r.hi, &hw);
            if (rc < 0)
                return rc;
            if (r.hi < r.lo)
                return hl_error(expr, "reversed range at position %zu (start "
                                      "is greater than end)",
                                POS(start));
        }
        if (*s != ',' && *s != ']') {
            if (*s == '\0')
                return hl_error(expr, "unbalanced '[' at position %zu",
                                POS(open));
            if (*s == '[')
                return hl_error(expr, "nested '[' at position %zu",
                                POS(s));
            return hl_error(expr, "'%c' in a range at position %zu (ranges "
                                  "hold only digits, '-' and ',')",
                            *s, POS(s));
        }
        uint64_t span = r.hi - r.lo + 1;
        if (span > max || seg->count + span > max)
            return ddp_err_set(DDP_ELIMIT,
                               "hostlist \"%.200s\" expands to more than %llu "
                               "hosts",
                               expr, (unsigned long long)max);
        seg->count += span;
        if (seg->nranges == cap) {
            size_t ncap = cap ? cap * 2 : 4;
            hl_range_t *nr = realloc(seg->ranges, ncap * sizeof *nr);
            if (!nr)
                return ddp_err_set(-ENOMEM, "out of memory");
            seg->ranges = nr;
            cap = ncap;
        }
        seg->ranges[seg->nranges++] = r;
        if (*s++ == ']')
            break;
    }
    *p = s;
    return 0;
}

static int vec_push(hl_vec_t *v, char *s)
{
    if (v->n == v->cap) {
        size_t ncap = v->cap ? v->cap * 2 : 16;
        char **nv = realloc(v->v, ncap * sizeof *nv);
        if (!nv) {
            free(s);
            return ddp_err_set(-ENOMEM, "out of memory");
        }
        v->v = nv;
        v->cap = ncap;
    }
    v->v[v->n++] = s;
    return 0;
}

/* Where a group's odometer wheel stands: range k of the group, offset off
 * into it. Stepped one host at a time, so no host costs a walk over the
 * group's ranges (a group of 16,000 single numbers took seconds). */
typedef struct hl_pos {
    size_t k;
    uint64_t off;
} hl_pos_t;

/* Advances a wheel; returns 0 when it went past the group's last number
 * (and is back at the first), 1 otherwise. */
static int pos_step(const hl_seg_t *g, hl_pos_t *at)
{
    if (++at->off <= g->ranges[at->k].hi - g->ranges[at->k].lo)
        return 1;
    at->off = 0;
    if (++at->k < g->nranges)
        return 1;
    at->k = 0;
    return 0;
}

/* Emits every host of one element: an odometer over its groups in SLURM's
 * order. scontrol turns the last group fastest, then the first, the second
 * and so on up to the one before the last: a[1-2]b[3-4]c[5-6] gives a1b3c5
 * a1b3c6 a2b3c5 a2b3c6 a1b4c5 ... (recorded from SLURM 22.05,
 * tests/hostlist/scontrol-22.05.txt). With one or two groups that is plain
 * "last fastest". */
static int expand_element(const hl_seg_t *segs, size_t nseg, uint64_t total,
                          hl_vec_t *out)
{
    hl_pos_t at[64] = {{0}}; /* nseg is bounded by the caller */
    size_t turn[64], ngroups = 0; /* segment indices, fastest first */
    for (size_t k = 0; k < nseg; k++)
        if (segs[k].ranges)
            turn[ngroups++] = k;
    if (ngroups > 1) {
        size_t last = turn[ngroups - 1];
        memmove(turn + 1, turn, (ngroups - 1) * sizeof turn[0]);
        turn[0] = last;
    }
    for (uint64_t h = 0; h < total; h++) {
        char buf[1024];
        size_t len = 0;
        for (size_t k = 0; k < nseg; k++) {
            int w = 0;
            if (!segs[k].ranges) {
                w = snprintf(buf + len, sizeof buf - len, "%.*s",
                             (int)segs[k].litlen, segs[k].lit);
            } else {
                const hl_range_t *r = &segs[k].ranges[at[k].k];
                w = snprintf(buf + len, sizeof buf - len, "%0*llu", r->width,
                             (unsigned long long)(r->lo + at[k].off));
            }
            if (w < 0 || (size_t)w >= sizeof buf - len)
                return ddp_err_set(DDP_ECONFIG,
                                   "invalid hostlist: a host name is longer "
                                   "than %zu characters",
                                   sizeof buf - 1);
            len += (size_t)w;
        }
        char *s = strdup(buf);
        if (!s)
            return ddp_err_set(-ENOMEM, "out of memory");
        int rc = vec_push(out, s);
        if (rc < 0)
            return rc;
        for (size_t g = 0; g < ngroups; g++)
            if (pos_step(&segs[turn[g]], &at[turn[g]]))
                break;
    }
    return 0;
}

/* Parses one element starting at *p (not at a separator) and appends its
 * hosts. *p is left at the separator or the end. Its pieces are on the
 * heap: on the stack (5 KiB, zeroed) they were the deepest frame of every
 * SLURM rank's init in the simulator (docs/simulator.md § 1). */
#define HL_MAX_SEGS 64
static int parse_element(const char *expr, const char **p, uint64_t max,
                         hl_vec_t *out)
{
    hl_seg_t *segs = calloc(HL_MAX_SEGS, sizeof *segs);
    if (!segs)
        return ddp_err_set(-ENOMEM, "hostlist \"%.200s\": out of memory for the "
                                    "pieces of a host name (%zu bytes)",
                           expr, HL_MAX_SEGS * sizeof *segs);
    size_t nseg = 0;
    const char *s = *p;
    uint64_t total = 1;
    int rc = 0;
    while (*s && !is_sep(*s)) {
        if (nseg == HL_MAX_SEGS) {
            rc = hl_error(expr, "more than %d pieces (bracket groups and "
                                "the text between them) in one host name at "
                                "position %zu",
                          HL_MAX_SEGS, POS(s));
            goto done;
        }
        hl_seg_t *seg = &segs[nseg];
        if (*s == ']') {
            rc = hl_error(expr, "unbalanced ']' at position %zu",
                          POS(s));
            goto done;
        }
        if (*s == '[') {
            nseg++;
            rc = parse_group(expr, &s, seg, max);
            if (rc < 0)
                goto done;
            if (total > max / seg->count) {
                rc = ddp_err_set(DDP_ELIMIT,
                                 "hostlist \"%.200s\" expands to more than "
                                 "%llu hosts",
                                 expr, (unsigned long long)max);
                goto done;
            }
            total *= seg->count;
        } else {
            seg->lit = s;
            while (*s && !is_sep(*s) && *s != '[' && *s != ']')
                s++;
            seg->litlen = (size_t)(s - seg->lit);
            seg->count = 1;
            nseg++;
        }
    }
    if ((uint64_t)out->n + total > max) {
        rc = ddp_err_set(DDP_ELIMIT,
                         "hostlist \"%.200s\" expands to more than %llu hosts",
                         expr, (unsigned long long)max);
        goto done;
    }
    rc = expand_element(segs, nseg, total, out);
    *p = s;
done:
    for (size_t k = 0; k < nseg; k++)
        free(segs[k].ranges);
    free(segs);
    return rc;
}

int ddp_hostlist_expand(const char *expr, size_t max_hosts, char ***hosts,
                        size_t *n)
{
    if (!hosts || !n)
        return ddp_err_set(-EINVAL, "ddp_hostlist_expand: NULL out");
    *hosts = NULL;
    *n = 0;
    if (!expr)
        expr = "";
    uint64_t max = max_hosts ? (uint64_t)max_hosts : HOSTLIST_DEFAULT_MAX;
    hl_vec_t v = {0};
    const char *s = expr;
    int rc = 0;
    while (is_space(*s))
        s++;
    if (*s == '\0')
        return ddp_err_set(DDP_ECONFIG,
                           "invalid hostlist \"%.200s\": empty expression; "
                           "expected e.g. node[1-4,7]",
                           expr);
    for (;;) {
        /* Here s is at the start of an element (whitespace skipped). */
        if (*s == ',' || *s == '\0') {
            rc = hl_error(expr, "empty host name at position %zu",
                          POS(s));
            break;
        }
        rc = parse_element(expr, &s, max, &v);
        if (rc < 0)
            break;
        while (is_space(*s))
            s++;
        if (*s == '\0')
            break;
        if (*s == ',') {
            s++;
            while (is_space(*s))
                s++;
        }
        /* Else whitespace alone separated two names, as SLURM allows. */
    }
    if (rc < 0) {
        ddp_hostlist_free(v.v, v.n);
        return rc;
    }
    *hosts = v.v;
    *n = v.n;
    return 0;
}

void ddp_hostlist_free(char **hosts, size_t n)
{
    for (size_t i = 0; hosts && i < n; i++)
        free(hosts[i]);
    free(hosts);
}

/* ---- compression ---- */

/* A host split like SLURM's hostname_create: the prefix and the trailing
 * digits. Hosts without trailing digits (or with too many) stand alone. */
typedef struct hl_name {
    const char *host;
    size_t plen;   /* prefix length */
    int numbered;  /* has trailing digits */
    uint64_t num;
    int ndigits;
} hl_name_t;

static void split_name(const char *host, hl_name_t *out)
{
    size_t len = strlen(host), i = len;
    while (i > 0 && isdigit((unsigned char)host[i - 1]))
        i--;
    out->host = host;
    out->plen = i;
    out->ndigits = (int)(len - i);
    out->numbered = out->ndigits > 0 && out->ndigits <= HOSTLIST_MAX_DIGITS;
    out->num = 0;
    if (!out->numbered) {
        out->plen = len;
        out->ndigits = 0;
        return;
    }
    for (size_t k = i; k < len; k++)
        out->num = out->num * 10 + (uint64_t)(host[k] - '0');
}

/* Whether num printed with %0*llu at width reproduces the host's digits. */
static int fits_width(const hl_name_t *h, int width)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%0*llu", width, (unsigned long long)h->num);
    return strcmp(buf, h->host + h->plen) == 0;
}

static int same_prefix(const hl_name_t *a, const hl_name_t *b)
{
    return a->numbered && b->numbered && a->plen == b->plen &&
           memcmp(a->host, b->host, a->plen) == 0;
}

typedef struct hl_buf {
    char *s;
    size_t len, cap;
    int oom;
} hl_buf_t;

static void buf_put(hl_buf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void buf_put(hl_buf_t *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(b->s ? b->s + b->len : NULL,
                          b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (w < 0) {
            b->oom = 1;
            return;
        }
        if (b->s && (size_t)w < b->cap - b->len) {
            b->len += (size_t)w;
            return;
        }
        size_t ncap = (b->cap ? b->cap : 64);
        while (ncap < b->len + (size_t)w + 1)
            ncap *= 2;
        char *ns = realloc(b->s, ncap);
        if (!ns) {
            b->oom = 1;
            return;
        }
        b->s = ns;
        b->cap = ncap;
    }
}

int ddp_hostlist_compress(const char *const *hosts, size_t n, char **out)
{
    if (!out)
        return ddp_err_set(-EINVAL, "ddp_hostlist_compress: NULL out");
    *out = NULL;
    if (n == 0 || !hosts)
        return ddp_err_set(DDP_ECONFIG, "cannot compress an empty host list");
    hl_name_t *nm = calloc(n, sizeof *nm);
    if (!nm)
        return ddp_err_set(-ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *h = hosts[i];
        if (!h || !*h) {
            free(nm);
            return ddp_err_set(DDP_ECONFIG,
                               "cannot compress host %zu: empty host name", i);
        }
        for (const char *c = h; *c; c++) {
            if (is_sep(*c) || *c == '[' || *c == ']') {
                free(nm);
                return ddp_err_set(DDP_ECONFIG,
                                   "cannot compress host \"%.200s\": '%c' "
                                   "cannot appear in a host name of a "
                                   "hostlist",
                                   h, *c == '\n' ? ' ' : *c);
            }
        }
        split_name(h, &nm[i]);
    }

    /* Runs of consecutive numbers (same prefix, same printed width), in the
     * given order, as SLURM's hostlist_push_host builds them; adjacent runs
     * with the same prefix then share one bracket, as its ranged string
     * does. */
    hl_buf_t b = {0};
    size_t i = 0;
    while (i < n) {
        if (i > 0)
            buf_put(&b, ",");
        if (!nm[i].numbered) {
            buf_put(&b, "%s", nm[i].host);
            i++;
            continue;
        }
        /* Collect the runs of this bracket group first: brackets are only
         * needed when there is more than one host in it. */
        size_t g_end = i, nhosts = 0;
        while (g_end < n && (g_end == i || same_prefix(&nm[i], &nm[g_end]))) {
            g_end++;
            nhosts++;
        }
        buf_put(&b, "%.*s", (int)nm[i].plen, nm[i].host);
        if (nhosts > 1)
            buf_put(&b, "[");
        size_t j = i;
        while (j < g_end) {
            int width = nm[j].ndigits;
            size_t k = j + 1;
            while (k < g_end && nm[k].num == nm[k - 1].num + 1 &&
                   fits_width(&nm[k], width))
                k++;
            if (j > i)
                buf_put(&b, ",");
            if (k - j == 1)
                buf_put(&b, "%s", nm[j].host + nm[j].plen);
            else
                buf_put(&b, "%s-%0*llu", nm[j].host + nm[j].plen, width,
                        (unsigned long long)nm[k - 1].num);
            j = k;
        }
        if (nhosts > 1)
            buf_put(&b, "]");
        i = g_end;
    }
    free(nm);
    if (b.oom) {
        free(b.s);
        return ddp_err_set(-ENOMEM, "out of memory");
    }
    *out = b.s;
    return 0;
}
