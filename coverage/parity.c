/* coverage/parity.c — the coverage-parity gate (docs/coverage.md).
 *
 * Reads one lcov tracefile per accelerator (plus a zero baseline from
 * `lcov -c -i`, and optionally two tracefiles of the same scenario run in
 * the simulator and as real processes), then:
 *   - prints coverage of the --summary prefixes (plugins/, core/: the CI log);
 *   - prints a matrix functions x accelerators with hit counts for the
 *     --matrix specs (the plugin and the core connection code);
 *   - lists every line and branch of the --gate prefixes (plugins/) that some
 *     accelerators execute and others never do, and checks each against
 *     the allow file (format in coverage/parity.allow);
 *   - prints the second matrix, sim vs real (informational);
 *   - writes the same as an HTML fragment (--html) and the undeclared
 *     differences as tab-separated rows (--diffs) for scripts.
 * Exit status: 0 parity holds, 1 an undeclared difference (or a --require'd
 * function some accelerator never ran), 2 bad input.
 *
 * lcov 1.16's raw captures carry no LF/LH/BRF totals and repeat a header's
 * record once per translation unit, so everything is recomputed here from
 * the DA/FN/FNDA/BRDA records, summing records of the same file.
 * Stand-alone on purpose: it links nothing of libddpsim.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <regex.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lcov_read.h"

#define MAXSET 30 /* accelerators + the two pair runs */
#define MAXSPEC 32

typedef struct {
    int inst;            /* instrumented (a DA record somewhere) */
    int64_t c[MAXSET];   /* hit count per data set */
} line_t;

typedef struct {
    char *name;
    int line;
    int64_t c[MAXSET];
} fn_t;

typedef struct {
    int line, block, branch;
    int64_t c[MAXSET];   /* taken; '-' (never evaluated) counts as 0 */
} br_t;

typedef struct {
    char *path;          /* relative to --root */
    line_t *lines;       /* indexed by line number */
    int nlines;
    fn_t *fns;
    int nfns, capf;
    br_t *brs;
    int nbrs, capb;
    char **src;          /* source text, loaded on demand */
    int nsrc, src_loaded;
} file_t;

enum { D_LINE, D_BRANCH };
typedef struct {
    file_t *f;
    int line, kind, block, branch;
    unsigned hit;        /* mask of accelerator sets that executed it */
    const fn_t *fn;
    int allow;           /* index of the allow entry, -1 none */
    int gated;
} diff_t;

enum { A_RANGE, A_ALL, A_FUNC, A_TEXT };
enum { Q_NONE, Q_ONLY, Q_MISSED };
typedef struct {
    int lineno;          /* in the allow file */
    char *file, *func, *text, *reason, *loc;
    int kind, lo, hi, qual;
    int after;           /* /TEXT/+N: and the N lines after a match */
    unsigned mask;
    int used;
} allow_t;

typedef struct {
    char *path;          /* a file or a directory prefix ("plugins/") */
    regex_t re;
    int has_re;
    char *words;
} spec_t;

static file_t *files;
static int nfiles, capfiles;
static char *setname[MAXSET];
static int nacc;         /* sets 0..nacc-1: accelerators */
static int npair;        /* sets nacc..nacc+npair-1: the pair runs */
static const char *root;
static size_t rootlen;
/* --extra-root DIR: a tree outside the repository whose files count too (a
 * user's plugin library); they keep their absolute paths. */
#define MAXEXTRA 8
static const char *extra_root[MAXEXTRA];
static int nextra;
static allow_t *allows;
static int nallows;
static diff_t *diffs;
static int ndiffs, capdiffs;
static int negative_seen[MAXSET];

static void die(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("parity: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(code);
}

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p)
        die(2, "out of memory");
    return p;
}

static char *xstrdup(const char *s)
{
    char *d = strdup(s);
    if (!d)
        die(2, "out of memory");
    return d;
}

static unsigned all_acc_mask(void)
{
    return nacc >= 32 ? ~0u : (1u << nacc) - 1;
}

/* ---- loading ---------------------------------------------------------- */

static file_t *file_find(const char *rel)
{
    for (int i = 0; i < nfiles; i++)
        if (!strcmp(files[i].path, rel))
            return &files[i];
    return NULL;
}

static file_t *file_get(const char *abs)
{
    const char *rel = NULL;
    if (!strncmp(abs, root, rootlen) && abs[rootlen] == '/')
        rel = abs + rootlen + 1;
    for (int k = 0; !rel && k < nextra; k++) {
        size_t n = strlen(extra_root[k]);
        while (n > 1 && extra_root[k][n - 1] == '/')
            n--;
        if (!strncmp(abs, extra_root[k], n) && abs[n] == '/')
            rel = abs;
    }
    if (!rel)
        return NULL; /* outside the repository: system headers */
    file_t *f = file_find(rel);
    if (f)
        return f;
    if (nfiles == capfiles) {
        capfiles = capfiles ? 2 * capfiles : 64;
        files = xrealloc(files, (size_t)capfiles * sizeof *files);
    }
    f = &files[nfiles++];
    memset(f, 0, sizeof *f);
    f->path = xstrdup(rel);
    return f;
}

static line_t *line_get(file_t *f, int l)
{
    if (l >= f->nlines) {
        int n = l + 64;
        f->lines = xrealloc(f->lines, (size_t)n * sizeof *f->lines);
        memset(f->lines + f->nlines, 0, (size_t)(n - f->nlines) * sizeof *f->lines);
        f->nlines = n;
    }
    return &f->lines[l];
}

static fn_t *fn_get(file_t *f, const char *name)
{
    for (int i = 0; i < f->nfns; i++)
        if (!strcmp(f->fns[i].name, name))
            return &f->fns[i];
    if (f->nfns == f->capf) {
        f->capf = f->capf ? 2 * f->capf : 32;
        f->fns = xrealloc(f->fns, (size_t)f->capf * sizeof *f->fns);
    }
    fn_t *fn = &f->fns[f->nfns++];
    memset(fn, 0, sizeof *fn);
    fn->name = xstrdup(name);
    return fn;
}

static br_t *br_get(file_t *f, int line, int block, int branch)
{
    /* Records arrive in line order: search from the end. */
    for (int i = f->nbrs - 1; i >= 0; i--) {
        br_t *b = &f->brs[i];
        if (b->line == line && b->block == block && b->branch == branch)
            return b;
    }
    if (f->nbrs == f->capb) {
        f->capb = f->capb ? 2 * f->capb : 64;
        f->brs = xrealloc(f->brs, (size_t)f->capb * sizeof *f->brs);
    }
    br_t *b = &f->brs[f->nbrs++];
    memset(b, 0, sizeof *b);
    b->line = line;
    b->block = block;
    b->branch = branch;
    return b;
}

static void add_count(int64_t *slot, int set, long long v)
{
    if (set < 0)
        return; /* the baseline only says what exists */
    if (v < 0) {
        /* Non-atomic counters in threaded code (toolchain-pitfalls.md). */
        negative_seen[set] = 1;
        v = 0;
    }
    *slot += v;
}

/* The tracefile's records into set `set` (-1: the baseline). */
static void *sink_file(void *ctx, const char *path)
{
    (void)ctx;
    return file_get(path);
}

static int64_t *set_slot(int64_t *c, int set)
{
    return &c[set < 0 ? 0 : set];
}

static void sink_da(void *ctx, void *f, int l, long long v)
{
    int set = *(int *)ctx;
    line_t *ln = line_get(f, l);
    ln->inst = 1;
    add_count(set_slot(ln->c, set), set, v);
}

static void sink_fn(void *ctx, void *f, int l, const char *name)
{
    lcov_first_line(&fn_get(f, name)->line, l, ctx);
}

static void sink_fnda(void *ctx, void *f, long long v, const char *name)
{
    int set = *(int *)ctx;
    add_count(set_slot(fn_get(f, name)->c, set), set, v);
}

static void sink_brda(void *ctx, void *f, int l, int b, int br, long long taken)
{
    int set = *(int *)ctx;
    br_t *bp = br_get(f, l, b, br);
    if (taken >= 0)
        add_count(set_slot(bp->c, set), set, taken);
}

static void load_info(const char *path, int set)
{
    static const lcov_sink_t sink = {sink_file, sink_da, sink_fn, sink_fnda, sink_brda};
    int records = lcov_read(path, &sink, &set);
    if (records < 0)
        die(2, "cannot read %s: %s", path, strerror(errno));
    if (!records)
        die(2, "%s holds no coverage records (SF:) — did the capture fail?", path);
}

static int cmp_fn(const void *a, const void *b)
{
    const fn_t *x = a, *y = b;
    return x->line != y->line ? (x->line > y->line) - (x->line < y->line)
                              : strcmp(x->name, y->name);
}

static int cmp_br(const void *a, const void *b)
{
    const br_t *x = a, *y = b;
    if (x->line != y->line)
        return (x->line > y->line) - (x->line < y->line);
    if (x->block != y->block)
        return (x->block > y->block) - (x->block < y->block);
    return (x->branch > y->branch) - (x->branch < y->branch);
}

static int cmp_file(const void *a, const void *b)
{
    return strcmp(((const file_t *)a)->path, ((const file_t *)b)->path);
}

/* The function a line belongs to: the last one starting at or before it
 * (lcov 1.16 records start lines only). */
static const fn_t *fn_of_line(const file_t *f, int l)
{
    const fn_t *best = NULL;
    for (int i = 0; i < f->nfns; i++)
        if (f->fns[i].line <= l)
            best = &f->fns[i];
    return best;
}

static void load_source(file_t *f)
{
    if (f->src_loaded)
        return;
    f->src_loaded = 1;
    char p[4096];
    if (f->path[0] == '/') /* under an --extra-root */
        snprintf(p, sizeof p, "%s", f->path);
    else
        snprintf(p, sizeof p, "%s/%s", root, f->path);
    FILE *in = fopen(p, "r");
    if (!in)
        return;
    char *buf = NULL;
    size_t cap = 0;
    ssize_t n;
    f->src = xrealloc(NULL, sizeof *f->src);
    f->src[0] = xstrdup(""); /* lines count from 1 */
    f->nsrc = 1;
    while ((n = getline(&buf, &cap, in)) >= 0) {
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
            buf[--n] = '\0';
        f->src = xrealloc(f->src, (size_t)(f->nsrc + 1) * sizeof *f->src);
        f->src[f->nsrc++] = xstrdup(buf);
    }
    free(buf);
    fclose(in);
}

static const char *src_line(file_t *f, int l)
{
    load_source(f);
    if (l <= 0 || l >= f->nsrc)
        return "";
    const char *s = f->src[l];
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

/* ---- specs and the allow file ----------------------------------------- */

static int path_matches(const char *spec, const char *path)
{
    size_t n = strlen(spec);
    if (n && spec[n - 1] == '/')
        return !strncmp(path, spec, n);
    return !strcmp(path, spec);
}

static void spec_parse(spec_t *s, const char *arg)
{
    memset(s, 0, sizeof *s);
    s->path = xstrdup(arg);
    char *colon = strchr(s->path, ':');
    if (colon) {
        *colon = '\0';
        s->words = colon + 1;
        int rc = regcomp(&s->re, s->words, REG_EXTENDED | REG_NOSUB);
        if (rc) {
            char msg[256];
            regerror(rc, &s->re, msg, sizeof msg);
            die(2, "bad function pattern \"%s\": %s", s->words, msg);
        }
        s->has_re = 1;
    }
}

static int spec_fn(const spec_t *s, const file_t *f, const fn_t *fn)
{
    return path_matches(s->path, f->path) &&
           (!s->has_re || regexec(&s->re, fn->name, 0, NULL, 0) == 0);
}

static int set_index(const char *name)
{
    for (int i = 0; i < nacc; i++)
        if (!strcmp(setname[i], name))
            return i;
    return -1;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* An allow line's LOCATION: FILE:WHAT, WHAT = N | N-M | * | FUNCTION |
 * /TEXT/[+N], into a; *restp: what follows it. 0, or 1 after saying what
 * was wrong (path:lineno). */
static int allow_loc(const char *path, int lineno, char *s, allow_t *a, char **restp)
{
    /* LOCATION: FILE:WHAT, WHAT = N | N-M | * | FUNCTION | /TEXT/[+N] */
    char *loc = s, *rest;
    char *colon = strchr(loc, ':');
    if (!colon) {
        fprintf(stderr, "%s:%d: expected FILE:LOCATION, got \"%s\"\n", path,
                lineno, s);
        return 1;
    }
    if (colon[1] == '/') {
        char *end = strchr(colon + 2, '/');
        if (!end) {
            fprintf(stderr, "%s:%d: unterminated /TEXT/\n", path, lineno);
            return 1;
        }
        rest = end + 1;
        if (*rest == '+') {
            char *e;
            a->after = (int)strtol(rest + 1, &e, 10);
            if (e == rest + 1 || a->after < 0 || a->after > 50) {
                fprintf(stderr, "%s:%d: expected /TEXT/+N, N 0..50\n", path,
                        lineno);
                return 1;
            }
            rest = e;
        }
        if (*rest && !isspace((unsigned char)*rest)) {
            fprintf(stderr, "%s:%d: expected a space after /TEXT/\n", path,
                    lineno);
            return 1;
        }
    } else {
        rest = loc + strcspn(loc, " \t");
    }
    if (*rest)
        *rest++ = '\0';
    a->loc = xstrdup(loc);
    *colon = '\0';
    a->file = xstrdup(loc);
    char *what = colon + 1;
    int lo, hi;
    char tail;
    if (!strcmp(what, "*")) {
        a->kind = A_ALL;
    } else if (what[0] == '/') {
        a->kind = A_TEXT;
        char *close = strrchr(what, '/');
        *close = '\0';
        a->text = xstrdup(what + 1);
        if (!*a->text) {
            fprintf(stderr, "%s:%d: empty /TEXT/\n", path, lineno);
            return 1;
        }
    } else if (sscanf(what, "%d-%d%c", &lo, &hi, &tail) == 2 && lo > 0 &&
               hi >= lo) {
        a->kind = A_RANGE;
        a->lo = lo;
        a->hi = hi;
    } else if (sscanf(what, "%d%c", &lo, &tail) == 1 && lo > 0) {
        a->kind = A_RANGE;
        a->lo = a->hi = lo;
    } else if (isalpha((unsigned char)what[0]) || what[0] == '_') {
        a->kind = A_FUNC;
        a->func = xstrdup(what);
    } else {
        fprintf(stderr, "%s:%d: bad location \"%s\" (N, N-M, *, a function "
                "name or /TEXT/)\n", path, lineno, what);
        return 1;
    }
    *restp = rest;
    return 0;
}

/* An optional qualifier after the location: only=A,B (reached only by
 * those) or missed=A,B (never reached by those, reached by the rest).
 * What follows it. */
static char *allow_qual(const char *path, int lineno, char *rest, allow_t *a)
{
    if (!strncmp(rest, "only=", 5) || !strncmp(rest, "missed=", 7)) {
        a->qual = rest[0] == 'o' ? Q_ONLY : Q_MISSED;
        char *list = rest + (a->qual == Q_ONLY ? 5 : 7);
        char *end = list + strcspn(list, " \t");
        rest = *end ? end + 1 : end;
        *end = '\0';
        for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
            int i = set_index(tok);
            if (i < 0)
                fprintf(stderr, "%s:%d: warning: accelerator \"%s\" is not "
                        "in this run\n", path, lineno, tok);
            else
                a->mask |= 1u << i;
        }
        rest = trim(rest);
    }
    return rest;
}

/* One entry (s: its trimmed text) into a: 0, or 1 after saying what was
 * wrong. */
static int allow_line(const char *path, int lineno, char *s, allow_t *a)
{
    char *rest;
    memset(a, 0, sizeof *a);
    a->lineno = lineno;
    if (allow_loc(path, lineno, s, a, &rest))
        return 1;
    rest = allow_qual(path, lineno, trim(rest), a);
    if (strlen(rest) < 3) {
        fprintf(stderr, "%s:%d: \"%s\" has no reason: every entry says why "
                "the difference is genuinely accelerator-dependent\n",
                path, lineno, a->loc);
        return 1;
    }
    a->reason = xstrdup(rest);
    file_t *f = file_find(a->file);
    if (!f) {
        fprintf(stderr, "%s:%d: no coverage data for \"%s\" (renamed? "
                "path relative to the repository)\n", path, lineno, a->file);
        return 1;
    }
    if (a->kind == A_FUNC) {
        int found = 0;
        for (int i = 0; i < f->nfns; i++)
            found |= !strcmp(f->fns[i].name, a->func);
        if (!found) {
            fprintf(stderr, "%s:%d: %s has no function \"%s\"\n", path,
                    lineno, a->file, a->func);
            return 1;
        }
    }
    return 0;
}

static void load_allow(const char *path)
{
    FILE *in = fopen(path, "r");
    if (!in)
        die(2, "cannot read the allow file %s: %s", path, strerror(errno));
    char *buf = NULL;
    size_t cap = 0;
    int lineno = 0, bad = 0;
    while (getline(&buf, &cap, in) >= 0) {
        lineno++;
        char *s = trim(buf);
        if (!*s || *s == '#')
            continue;
        allow_t a;
        if (allow_line(path, lineno, s, &a)) {
            bad = 1;
            continue;
        }
        allows = xrealloc(allows, (size_t)(nallows + 1) * sizeof *allows);
        allows[nallows++] = a;
    }
    free(buf);
    fclose(in);
    if (bad)
        die(2, "%s: fix the entries above (format in its header comment)", path);
}

static int allow_matches(const allow_t *a, diff_t *d)
{
    if (strcmp(a->file, d->f->path))
        return 0;
    switch (a->kind) {
    case A_RANGE:
        if (d->line < a->lo || d->line > a->hi)
            return 0;
        break;
    case A_FUNC:
        if (!d->fn || strcmp(d->fn->name, a->func))
            return 0;
        break;
    case A_TEXT: {
        int hit = 0;
        for (int k = 0; k <= a->after && !hit; k++)
            hit = strstr(src_line(d->f, d->line - k), a->text) != NULL;
        if (!hit)
            return 0;
        break;
    }
    default:
        break;
    }
    unsigned missed = all_acc_mask() & ~d->hit;
    if (a->qual == Q_ONLY && (d->hit & ~a->mask))
        return 0;
    if (a->qual == Q_MISSED && (missed & ~a->mask))
        return 0;
    return 1;
}

/* ---- differences ------------------------------------------------------ */

static unsigned hit_mask(const int64_t *c)
{
    unsigned m = 0;
    for (int i = 0; i < nacc; i++)
        if (c[i] > 0)
            m |= 1u << i;
    return m;
}

static void add_diff(file_t *f, int line, int kind, int block, int branch,
                     unsigned hit, int gated)
{
    if (ndiffs == capdiffs) {
        capdiffs = capdiffs ? 2 * capdiffs : 128;
        diffs = xrealloc(diffs, (size_t)capdiffs * sizeof *diffs);
    }
    diff_t *d = &diffs[ndiffs++];
    memset(d, 0, sizeof *d);
    d->f = f;
    d->line = line;
    d->kind = kind;
    d->block = block;
    d->branch = branch;
    d->hit = hit;
    d->fn = fn_of_line(f, line);
    d->allow = -1;
    d->gated = gated;
    if (!gated)
        return;
    for (int i = 0; i < nallows; i++)
        if (allow_matches(&allows[i], d)) {
            d->allow = i;
            allows[i].used++;
            break;
        }
}

/* Every line reached by some accelerators and never by others; branches
 * only where their line is reached by all (else the line says it). */
static void find_diffs(file_t *f, int gated)
{
    unsigned all = all_acc_mask();
    for (int l = 1; l < f->nlines; l++) {
        if (!f->lines[l].inst)
            continue;
        unsigned h = hit_mask(f->lines[l].c);
        if (h && h != all)
            add_diff(f, l, D_LINE, 0, 0, h, gated);
    }
    for (int i = 0; i < f->nbrs; i++) {
        br_t *b = &f->brs[i];
        if (b->line < f->nlines && f->lines[b->line].inst) {
            unsigned lh = hit_mask(f->lines[b->line].c);
            if (lh != all)
                continue;
        }
        unsigned h = hit_mask(b->c);
        if (h && h != all)
            add_diff(f, b->line, D_BRANCH, b->block, b->branch, h, gated);
    }
}

static int cmp_diff(const void *a, const void *b)
{
    const diff_t *x = a, *y = b;
    int c = strcmp(x->f->path, y->f->path);
    if (c)
        return c;
    if (x->line != y->line)
        return (x->line > y->line) - (x->line < y->line);
    if (x->kind != y->kind)
        return x->kind - y->kind;
    if (x->block != y->block)
        return x->block - y->block;
    return x->branch - y->branch;
}

static void mask_names(unsigned m, char *out, size_t n)
{
    size_t off = 0;
    out[0] = '\0';
    for (int i = 0; i < nacc && off < n; i++)
        if (m & (1u << i))
            off += (size_t)snprintf(out + off, n - off, "%s%s", off ? "," : "",
                                    setname[i]);
}

/* A run of differences shown as one: same file, function, accelerators
 * and verdict, in line order. */
typedef struct {
    int first, last; /* indexes into diffs */
    int lo, hi, nl, nb;
} group_t;

static int same_group(const diff_t *a, const diff_t *b)
{
    return a->f == b->f && a->fn == b->fn && a->hit == b->hit &&
           a->allow == b->allow && a->gated == b->gated;
}

static group_t *groups;
static int ngroups;

static void make_groups(void)
{
    qsort(diffs, (size_t)ndiffs, sizeof *diffs, cmp_diff);
    groups = xrealloc(NULL, (size_t)(ndiffs + 1) * sizeof *groups);
    for (int i = 0; i < ndiffs; i++) {
        if (ngroups && same_group(&diffs[groups[ngroups - 1].last], &diffs[i])) {
            group_t *g = &groups[ngroups - 1];
            g->last = i;
            g->hi = diffs[i].line;
        } else {
            group_t *g = &groups[ngroups++];
            memset(g, 0, sizeof *g);
            g->first = g->last = i;
            g->lo = g->hi = diffs[i].line;
        }
        if (diffs[i].kind == D_LINE)
            groups[ngroups - 1].nl++;
        else
            groups[ngroups - 1].nb++;
    }
}

static void group_loc(const group_t *g, char *out, size_t n)
{
    if (g->lo == g->hi)
        snprintf(out, n, "%s:%d", diffs[g->first].f->path, g->lo);
    else
        snprintf(out, n, "%s:%d-%d", diffs[g->first].f->path, g->lo, g->hi);
}

static void group_what(const group_t *g, char *out, size_t n)
{
    const diff_t *d = &diffs[g->first];
    char hit[512], miss[512];
    mask_names(d->hit, hit, sizeof hit);
    mask_names(all_acc_mask() & ~d->hit, miss, sizeof miss);
    char parts[64] = "";
    if (g->nl && g->nb)
        snprintf(parts, sizeof parts, "%d line(s), %d branch(es)", g->nl, g->nb);
    else if (g->nl)
        snprintf(parts, sizeof parts, "%d line(s)", g->nl);
    else
        snprintf(parts, sizeof parts, "%d branch(es)", g->nb);
    snprintf(out, n, "%s in %s: reached by %s; never by %s", parts,
             d->fn ? d->fn->name : "?", hit, miss);
}

/* ---- HTML ------------------------------------------------------------- */

static void html_esc(FILE *o, const char *s)
{
    lcov_xml_esc(o, s);
}

#define TD "<td style=\"padding:1px 6px;border:1px solid #ccc;"

static void html_cell(FILE *o, int64_t v, int missing, int flagged)
{
    /* red: not run here while others run it; orange: run, with a per-line
     * difference inside; green: run; grey: run by nobody. */
    const char *bg = missing ? "#f99" : v > 0 ? (flagged ? "#fc6" : "#cfc")
                                              : "#eee";
    fprintf(o, TD "text-align:right;background:%s\">%" PRId64 "</td>", bg, v);
}

/* --src-html DIR: a page per source file with a count column per
 * accelerator (genhtml's pages show the merged counts only). The links of
 * the fragment go there, as "<basename of DIR>/<path>.html#L<line>". */
static const char *src_dir, *src_link;

static void src_href(FILE *o, const file_t *f, int line)
{
    if (src_dir)
        fprintf(o, "%s/%s.html#L%d", src_link, f->path[0] == '/' ? f->path + 1 : f->path,
                line);
    else
        fprintf(o, "%s.gcov.html#%d", f->path, line);
}

static int mkdirs_for(const char *path)
{
    char d[4096];
    snprintf(d, sizeof d, "%s", path);
    for (char *p = d + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(d, 0755) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return 0;
}

static int line_in_diff(const file_t *f, int l)
{
    for (int i = 0; i < ndiffs; i++)
        if (diffs[i].f == f && diffs[i].line == l)
            return diffs[i].gated ? (diffs[i].allow < 0 ? 2 : 1) : 3;
    return 0;
}

static void write_src_page(file_t *f)
{
    load_source(f);
    if (f->nsrc <= 1)
        return;
    const char *rel = f->path[0] == '/' ? f->path + 1 : f->path;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.html", src_dir, rel);
    FILE *o = NULL;
    if (mkdirs_for(path) != 0 || !(o = fopen(path, "w")))
        die(2, "cannot write %s: %s", path, strerror(errno));
    int depth = 0;
    for (const char *p = rel; *p; p++)
        depth += *p == '/';
    fprintf(o, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>");
    html_esc(o, f->path);
    fprintf(o, ": counts per accelerator</title></head>\n<body style=\"font-family:"
               "sans-serif;font-size:90%%\">\n<h2 style=\"margin:4px 0\">");
    html_esc(o, f->path);
    fprintf(o, "</h2>\n<p>Hit counts per accelerator, one column each. Red: never "
               "run by that accelerator while another runs it. Line number: "
               "orange, a declared difference; red, an undeclared one; grey, a "
               "difference outside the gate. <a href=\"");
    for (int k = 0; k <= depth; k++)
        fputs("../", o);
    fprintf(o, "index.html\">The parity report</a>.</p>\n<table style=\""
               "border-collapse:collapse;font-family:monospace\"><tr>" TD "\">line</td>");
    for (int i = 0; i < nacc; i++)
        fprintf(o, TD "\"><b>%s</b></td>", setname[i]);
    fprintf(o, TD "\">source</td></tr>\n");
    static const char *mark[4] = {"", "#fc6", "#f66", "#ccc"};
    for (int l = 1; l < f->nsrc; l++) {
        int d = line_in_diff(f, l);
        fprintf(o, "<tr id=\"L%d\">" TD "text-align:right%s%s\">%d</td>", l,
                d ? ";background:" : "", mark[d], l);
        int inst = l < f->nlines && f->lines[l].inst;
        unsigned h = inst ? hit_mask(f->lines[l].c) : 0;
        for (int i = 0; i < nacc; i++) {
            if (!inst)
                fprintf(o, TD "\"></td>");
            else
                html_cell(o, f->lines[l].c[i], h && !f->lines[l].c[i], d != 0);
        }
        fprintf(o, TD "white-space:pre\">");
        html_esc(o, f->src[l]);
        fprintf(o, "</td></tr>\n");
    }
    fprintf(o, "</table>\n</body></html>\n");
    if (fclose(o) != 0)
        die(2, "writing %s failed", path);
}

/* The pass of a group: 0 undeclared, 1 declared, 2 outside the gate. */
static int group_pass(const group_t *g)
{
    const diff_t *d = &diffs[g->first];
    return !d->gated ? 2 : d->allow < 0 ? 0 : 1;
}

/* A heading's count: "9 entries (22 lines, 2 branches)" — the entries
 * listed under it, and the lines and branches they hold. */
static void entries_of(int pass, char *out, size_t n)
{
    int ne = 0, nl = 0, nb = 0;
    for (int gi = 0; gi < ngroups; gi++)
        if (group_pass(&groups[gi]) == pass) {
            ne++;
            nl += groups[gi].nl;
            nb += groups[gi].nb;
        }
    snprintf(out, n, "%d entr%s (%d line%s, %d branch%s)", ne, ne == 1 ? "y" : "ies", nl,
             nl == 1 ? "" : "s", nb, nb == 1 ? "" : "es");
}

/* The first table of the page: each entry of the gate (a run of differing
 * lines of one function) x accelerators, the cell saying whether that
 * accelerator reaches it, and the accelerators that never do, by name. */
static void html_diff_matrix(FILE *o, int ndiff)
{
    char head[200], what[1400], loc[1200], miss[512];
    int ne = 0;
    for (int gi = 0; gi < ngroups; gi++)
        ne += group_pass(&groups[gi]) < 2;
    snprintf(head, sizeof head, "%d entr%s, %d line(s)/branch(es)", ne,
             ne == 1 ? "y" : "ies", ndiff);
    fprintf(o, "<h3 style=\"margin:8px 0 2px 0\">Differing lines &times; accelerators "
               "(the gate): %s</h3>\n", head);
    if (!ne) {
        fprintf(o, "<p>None: every accelerator reaches the same lines and branches."
                   "</p>\n");
        return;
    }
    fprintf(o, "<table id=\"parity-matrix\" style=\"border-collapse:collapse\"><tr>"
               TD "\"><b>lines (function)</b></td>" TD "\"><b>verdict</b></td>");
    for (int i = 0; i < nacc; i++)
        fprintf(o, TD "\"><b>%s</b></td>", setname[i]);
    fprintf(o, TD "\"><b>missed by</b></td></tr>\n");
    for (int pass = 0; pass < 2; pass++)
        for (int gi = 0; gi < ngroups; gi++) {
            group_t *g = &groups[gi];
            if (group_pass(g) != pass)
                continue;
            const diff_t *d = &diffs[g->first];
            group_loc(g, loc, sizeof loc);
            group_what(g, what, sizeof what);
            mask_names(all_acc_mask() & ~d->hit, miss, sizeof miss);
            fprintf(o, "<tr>" TD "white-space:nowrap\"><a href=\"");
            src_href(o, d->f, g->lo);
            fprintf(o, "\" title=\"");
            html_esc(o, what);
            fprintf(o, "\">");
            html_esc(o, loc);
            fprintf(o, "</a> (");
            html_esc(o, d->fn ? d->fn->name : "?");
            fprintf(o, ")</td>" TD "%s\">%s</td>",
                    pass ? "" : "color:#c00;font-weight:bold",
                    pass ? "declared" : "UNDECLARED");
            for (int i = 0; i < nacc; i++) {
                int hit = (d->hit >> i) & 1;
                fprintf(o, TD "text-align:center;background:%s\">%s</td>",
                        hit ? "#cfc" : "#f99", hit ? "reached" : "MISSED");
            }
            fprintf(o, TD "\">never by <b>");
            for (const char *c = miss; *c; c++)
                if (*c == ',')
                    fputs(", ", o);
                else
                    fputc(*c, o); /* accelerator names: [a-z0-9_] */
            fprintf(o, "</b></td></tr>\n");
        }
    fprintf(o, "</table>\n");
}

/* ---- summary ---------------------------------------------------------- */

typedef struct {
    long lt, lh, ft, fh, bt, bh;
} cov_t;

static cov_t coverage_of(const char *prefix, unsigned sets)
{
    cov_t c = {0};
    for (int i = 0; i < nfiles; i++) {
        file_t *f = &files[i];
        if (!path_matches(prefix, f->path))
            continue;
        for (int l = 1; l < f->nlines; l++)
            if (f->lines[l].inst) {
                c.lt++;
                c.lh += (hit_mask(f->lines[l].c) & sets) != 0;
            }
        for (int k = 0; k < f->nfns; k++) {
            c.ft++;
            c.fh += (hit_mask(f->fns[k].c) & sets) != 0;
        }
        for (int k = 0; k < f->nbrs; k++) {
            c.bt++;
            c.bh += (hit_mask(f->brs[k].c) & sets) != 0;
        }
    }
    return c;
}

static double pct(long h, long t)
{
    return t ? 100.0 * (double)h / (double)t : 0.0;
}

/* ---- main ------------------------------------------------------------- */

static void usage(FILE *o)
{
    fprintf(o,
        "usage: parity --root DIR [--extra-root DIR]... --baseline FILE [--allow FILE]\n"
        "              [--gate PREFIX]...\n"
        "              [--matrix PATH[:REGEX]]... [--inform PATH[:REGEX]]...\n"
        "              [--summary PREFIX]... [--require FUNCTION]...\n"
        "              [--pair NAME=FILE --pair NAME=FILE] [--pair-matrix PATH[:REGEX]]...\n"
        "              [--html FILE] [--src-html DIR] [--diffs FILE] ACCEL=FILE.info...\n\n"
        "Coverage parity of accelerators over the shared plugin (docs/coverage.md).\n"
        "PATH ending in '/' is a directory prefix; REGEX (POSIX ERE) selects\n"
        "function names. Files under an --extra-root (a plugin library's sources)\n"
        "keep their absolute paths: gate them with --gate DIR/.\n"
        "--src-html DIR: a page per source file with a count column per\n"
        "accelerator; DIR is beside the --html fragment's page (links: NAME/...).\n"
        "Exit: 0 parity holds, 1 undeclared difference, 2 bad input.\n");
}

/* ---- the command line (main's options, read by the steps below) ---- */
static const char *baseline, *allow_path, *html_path, *diffs_path;
static const char *gate[MAXSPEC], *summary[MAXSPEC], *require[MAXSPEC];
static spec_t matrix[MAXSPEC], inform[MAXSPEC], pairm[MAXSPEC];
static int ngate, nsummary, nrequire, nmatrix, ninform, npairm;
static const char *accfile[MAXSET], *pairfile[2];
static char *pairname[2];

/* The options into the globals above: -1 to go on, or main's exit
 * status (--help: 0). Wrong options die with status 2. */
static int parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEEDV()                                                   \
    do {                                                          \
        if (!v)                                                   \
            die(2, "%s needs a value (see --help)", a);           \
        i++;                                                      \
    } while (0)
#define ROOM(n) \
    do { if ((n) >= MAXSPEC) die(2, "too many %s", a); } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--root")) {
            NEEDV(); root = v;
        } else if (!strcmp(a, "--extra-root")) {
            NEEDV();
            if (nextra >= MAXEXTRA || v[0] != '/')
                die(2, "--extra-root: at most %d, each an absolute path", MAXEXTRA);
            extra_root[nextra++] = v;
        } else if (!strcmp(a, "--baseline")) {
            NEEDV(); baseline = v;
        } else if (!strcmp(a, "--allow")) {
            NEEDV(); allow_path = v;
        } else if (!strcmp(a, "--html")) {
            NEEDV(); html_path = v;
        } else if (!strcmp(a, "--diffs")) {
            NEEDV(); diffs_path = v;
        } else if (!strcmp(a, "--src-html")) {
            NEEDV();
            src_dir = v;
            src_link = strrchr(v, '/') ? strrchr(v, '/') + 1 : v;
            if (!*src_link)
                die(2, "--src-html wants a folder name, not \"%s\"", v);
        } else if (!strcmp(a, "--gate")) {
            NEEDV(); ROOM(ngate); gate[ngate++] = v;
        } else if (!strcmp(a, "--summary")) {
            NEEDV(); ROOM(nsummary); summary[nsummary++] = v;
        } else if (!strcmp(a, "--require")) {
            NEEDV(); ROOM(nrequire); require[nrequire++] = v;
        } else if (!strcmp(a, "--matrix")) {
            NEEDV(); ROOM(nmatrix); spec_parse(&matrix[nmatrix++], v);
        } else if (!strcmp(a, "--inform")) {
            NEEDV(); ROOM(ninform); spec_parse(&inform[ninform++], v);
        } else if (!strcmp(a, "--pair-matrix")) {
            NEEDV(); ROOM(npairm); spec_parse(&pairm[npairm++], v);
        } else if (!strcmp(a, "--pair")) {
            NEEDV();
            if (npair == 2)
                die(2, "--pair is given exactly twice (sim, then real)");
            const char *eq = strchr(v, '=');
            if (!eq || eq == v || !eq[1])
                die(2, "--pair wants NAME=FILE, got \"%s\"", v);
            pairname[npair] = xstrdup(v);
            pairname[npair][eq - v] = '\0';
            pairfile[npair++] = eq + 1;
        } else if (a[0] == '-') {
            usage(stderr);
            die(2, "unknown option %s", a);
        } else {
            const char *eq = strchr(a, '=');
            if (!eq || eq == a || !eq[1])
                die(2, "expected ACCEL=FILE.info, got \"%s\"", a);
            if (nacc + 2 >= MAXSET)
                die(2, "at most %d accelerators", MAXSET - 2);
            setname[nacc] = xstrdup(a);
            setname[nacc][eq - a] = '\0';
            accfile[nacc++] = eq + 1;
        }
    }
    if (!root || !baseline || nacc < 1) {
        usage(stderr);
        return 2;
    }
    return -1;
}

/* Reads the tracefiles and the allow list; finds and groups the
 * differences of the gated (and --inform) files. */
static void load_all(void)
{
    if (npair == 1)
        die(2, "--pair is given exactly twice (sim, then real)");
    rootlen = strlen(root);
    while (rootlen > 1 && root[rootlen - 1] == '/')
        rootlen--;
    if (!ngate)
        gate[ngate++] = "plugins/";
    for (int i = 0; i < npair; i++)
        setname[nacc + i] = pairname[i];

    load_info(baseline, -1);
    for (int i = 0; i < nacc; i++)
        load_info(accfile[i], i);
    for (int i = 0; i < npair; i++)
        load_info(pairfile[i], nacc + i);
    qsort(files, (size_t)nfiles, sizeof *files, cmp_file);
    for (int i = 0; i < nfiles; i++) {
        qsort(files[i].fns, (size_t)files[i].nfns, sizeof *files[i].fns, cmp_fn);
        qsort(files[i].brs, (size_t)files[i].nbrs, sizeof *files[i].brs, cmp_br);
    }
    for (int i = 0; i < nacc + npair; i++)
        if (negative_seen[i])
            fprintf(stderr, "parity: warning: negative counts in %s's data "
                    "(counters not atomic: build with -pthread / "
                    "-fprofile-update=atomic); read as 0\n", setname[i]);
    if (allow_path)
        load_allow(allow_path);

    int ngated_files = 0;
    for (int i = 0; i < nfiles; i++) {
        int g = 0, inf = 0;
        for (int k = 0; k < ngate; k++)
            g |= path_matches(gate[k], files[i].path);
        for (int k = 0; k < ninform && !g; k++)
            inf |= path_matches(inform[k].path, files[i].path);
        ngated_files += g;
        if (g || inf)
            find_diffs(&files[i], g);
    }
    if (!ngated_files)
        die(2, "no file under the gated prefixes (%s...) in the baseline",
            gate[0]);
    make_groups();
}

/* --require: a function every accelerator must have executed. reqmsg[r]:
 * why require[r] failed ("" when it held). The number that failed. */
static int check_required(char reqmsg[][1200])
{
    int missing_required = 0;
    for (int r = 0; r < nrequire; r++) {
        const char *want = require[r], *colon = strchr(want, ':');
        int found = 0;
        unsigned hit = 0;
        for (int i = 0; i < nfiles; i++) {
            file_t *f = &files[i];
            if (colon && strncmp(f->path, want, (size_t)(colon - want)))
                continue;
            if (colon && f->path[colon - want])
                continue;
            for (int k = 0; k < f->nfns; k++)
                if (!strcmp(f->fns[k].name, colon ? colon + 1 : want)) {
                    found = 1;
                    hit |= hit_mask(f->fns[k].c);
                }
        }
        reqmsg[r][0] = '\0';
        if (!found)
            die(2, "--require %s: no such function in the coverage data", want);
        if (hit != all_acc_mask()) {
            char miss[512];
            mask_names(all_acc_mask() & ~hit, miss, sizeof miss);
            snprintf(reqmsg[r], sizeof reqmsg[r],
                     "%s never ran %s: its scenario run did not go through the "
                     "shared plugin (read its log under the coverage output)",
                     miss, want);
            missing_required++;
        }
    }
    return missing_required;
}

/* The page's head: the verdict, the counts, the gate, the diff matrix. */
static void html_head(FILE *html, int fail, int undeclared, int declared)
{
    fprintf(html, "<!-- ddpsim coverage parity (coverage/parity.c) -->\n"
            "<div id=\"parity\" style=\"font-family:sans-serif;font-size:90%%;"
            "margin:8px 0 16px 0;padding:6px 10px;border:2px solid %s\">\n",
            fail ? "#c00" : "#393");
    fprintf(html, "<h2 style=\"margin:2px 0\">Coverage parity: %s</h2>\n",
            fail ? "FAIL" : "pass");
    fprintf(html, "<p>%d undeclared and %d declared (coverage/parity.allow) "
            "line/branch difference(s) in ", undeclared, declared);
    for (int k = 0; k < ngate; k++)
        fprintf(html, "%s%s", k ? ", " : "", gate[k]);
    fprintf(html, "; accelerators: ");
    for (int i = 0; i < nacc; i++)
        fprintf(html, "%s%s", i ? ", " : "", setname[i]);
    fprintf(html, ". Full text report: <a href=\"parity.txt\">parity.txt</a>; "
            "how to read it: docs/coverage.md.</p>\n");
    html_diff_matrix(html, undeclared + declared);
}

/* Summary (the CI log reads these): coverage per prefix, the gate per
 * accelerator. */
static void print_summary(FILE *html)
{
    printf("== coverage (all accelerators together; baseline: every compiled "
           "line)\n");
    if (html)
        fprintf(html, "<table style=\"border-collapse:collapse\"><tr>" TD
                "\">prefix</td>" TD "\">lines</td>" TD "\">functions</td>" TD
                "\">branches</td></tr>\n");
    for (int s = 0; s < nsummary; s++) {
        cov_t c = coverage_of(summary[s], all_acc_mask());
        printf("  %-14s lines %5.1f%% (%ld/%ld)  functions %5.1f%% (%ld/%ld)  "
               "branches %5.1f%% (%ld/%ld)\n",
               summary[s], pct(c.lh, c.lt), c.lh, c.lt, pct(c.fh, c.ft), c.fh,
               c.ft, pct(c.bh, c.bt), c.bh, c.bt);
        if (html)
            fprintf(html, "<tr>" TD "\">%s</td>" TD "\">%.1f%% (%ld/%ld)</td>" TD
                    "\">%.1f%% (%ld/%ld)</td>" TD "\">%.1f%% (%ld/%ld)</td></tr>\n",
                    summary[s], pct(c.lh, c.lt), c.lh, c.lt, pct(c.fh, c.ft),
                    c.fh, c.ft, pct(c.bh, c.bt), c.bh, c.bt);
    }
    if (html)
        fprintf(html, "</table>\n");
    for (int k = 0; k < ngate; k++) {
        printf("  %s per accelerator:", gate[k]);
        for (int i = 0; i < nacc; i++) {
            cov_t c = coverage_of(gate[k], 1u << i);
            printf(" %s %.1f%%", setname[i], pct(c.lh, c.lt));
        }
        printf(" (lines)\n");
    }
}

/* Whether one of the n specs names function fn of f. */
static int any_spec_fn(const spec_t *specs, int n, const file_t *f, const fn_t *fn)
{
    int want = 0;
    for (int m = 0; m < n; m++)
        want |= spec_fn(&specs[m], f, fn);
    return want;
}

/* One file's rows of the functions x accelerators matrix (w: the name
 * column's width). */
static void matrix_file(FILE *html, file_t *f, int w)
{
    int header = 0;
    for (int k = 0; k < f->nfns; k++) {
        fn_t *fn = &f->fns[k];
        if (!any_spec_fn(matrix, nmatrix, f, fn))
            continue;
        if (!header) {
            printf("%s\n", f->path);
            if (html)
            {
                fprintf(html, "<tr><td colspan=\"%d\" style=\"padding:4px 0 "
                        "0 0\"><b><a href=\"", nacc + 2);
                src_href(html, f, 1);
                fprintf(html, "\">%s</a></b> (<a href=\"%s.gcov.html\">merged "
                        "counts</a>)</td></tr>\n", f->path, f->path);
            }
            header = 1;
        }
        char flag = ' ';
        for (int d = 0; d < ndiffs; d++)
            if (diffs[d].f == f && diffs[d].fn == fn) {
                char fl = !diffs[d].gated ? '*' : diffs[d].allow < 0 ? '!' : '~';
                if (fl == '!' || flag == ' ' || (fl == '~' && flag == '*'))
                    flag = fl;
            }
        unsigned h = hit_mask(fn->c);
        printf("  %c %-*s", flag, w, fn->name);
        for (int s = 0; s < nacc; s++)
            printf(" %*" PRId64,
                   (int)(strlen(setname[s]) > 7 ? strlen(setname[s]) : 7),
                   fn->c[s]);
        printf("\n");
        if (html) {
            fprintf(html, "<tr>" TD "\"><a href=\"");
            src_href(html, f, fn->line);
            fprintf(html, "\">");
            html_esc(html, fn->name);
            fprintf(html, "</a></td>" TD "\">%c</td>", flag);
            for (int s = 0; s < nacc; s++)
                html_cell(html, fn->c[s],
                          h && h != all_acc_mask() && fn->c[s] == 0,
                          flag != ' ');
            fprintf(html, "</tr>\n");
        }
    }
}

/* The matrix functions x accelerators of the --matrix specs; the name
 * column's width, which the pair matrix uses too. */
static int print_matrix(FILE *html)
{
    int w = 28;
    for (int i = 0; i < nfiles; i++)
        for (int k = 0; k < files[i].nfns; k++)
            for (int m = 0; m < nmatrix; m++)
                if (spec_fn(&matrix[m], &files[i], &files[i].fns[k]) &&
                    (int)strlen(files[i].fns[k].name) + 2 > w)
                    w = (int)strlen(files[i].fns[k].name) + 2;
    printf("\n== functions x accelerators (hit counts; ! undeclared difference, "
           "~ declared,\n   * difference outside the gate, informational)\n");
    printf("%-*s", w + 2, "");
    for (int i = 0; i < nacc; i++)
        printf(" %*s", (int)(strlen(setname[i]) > 7 ? strlen(setname[i]) : 7),
               setname[i]);
    printf("\n");
    if (html) {
        fprintf(html, "<h3 style=\"margin:8px 0 2px 0\">Functions &times; "
                "accelerators (hit counts)</h3>\n<p>Red: never run by that "
                "accelerator while others run it; orange: a function with "
                "a per-line difference; ! undeclared, ~ declared in "
                "parity.allow, * outside the gate (informational).</p>\n"
                "<table style=\"border-collapse:collapse\"><tr>" TD "\">function</td>"
                TD "\"></td>");
        for (int i = 0; i < nacc; i++)
            fprintf(html, TD "\"><b>%s</b></td>", setname[i]);
        fprintf(html, "</tr>\n");
    }
    /* Files in the order of the --matrix specs (the plugin first). */
    int *order = xrealloc(NULL, (size_t)(nfiles + 1) * sizeof *order), norder = 0;
    for (int m = 0; m < nmatrix; m++)
        for (int i = 0; i < nfiles; i++) {
            int seen = 0;
            for (int j = 0; j < norder; j++)
                seen |= order[j] == i;
            if (!seen && path_matches(matrix[m].path, files[i].path))
                order[norder++] = i;
        }
    for (int oi = 0; oi < norder; oi++)
        matrix_file(html, &files[order[oi]], w);
    free(order);
    if (html)
        fprintf(html, "</table>\n");
    return w;
}

/* The differences, undeclared, declared and informational, and the
 * allow lines that match none. */
static void print_diffs(FILE *html, int undeclared, int declared, int informational)
{
    const char *title[3] = {"undeclared differences (the gate fails on these)",
                            "declared differences (coverage/parity.allow)",
                            "differences outside the gate (informational)"};
    for (int pass = 0; pass < 3; pass++) {
        int count = pass == 0 ? undeclared : pass == 1 ? declared : informational;
        char head[200];
        entries_of(pass, head, sizeof head);
        printf("\n== %s: %s\n", title[pass], head);
        if (html && count)
            fprintf(html, "<h3 style=\"margin:8px 0 2px 0\">%s: %s</h3>\n<ul>\n",
                    title[pass], head);
        for (int gi = 0; gi < ngroups; gi++) {
            group_t *g = &groups[gi];
            diff_t *d = &diffs[g->first];
            int p = !d->gated ? 2 : d->allow < 0 ? 0 : 1;
            if (p != pass)
                continue;
            char loc[1200], what[1400];
            group_loc(g, loc, sizeof loc);
            group_what(g, what, sizeof what);
            printf("  %s  %s\n", loc, what);
            printf("      | %s\n", src_line(d->f, g->lo));
            if (pass == 1)
                printf("      allowed by %s:%d (%s): %s\n", allow_path,
                       allows[d->allow].lineno, allows[d->allow].loc,
                       allows[d->allow].reason);
            if (html) {
                fprintf(html, "<li><a href=\"");
                src_href(html, d->f, g->lo);
                fprintf(html, "\">");
                html_esc(html, loc);
                fprintf(html, "</a> ");
                html_esc(html, what);
                fprintf(html, "<br><code>");
                html_esc(html, src_line(d->f, g->lo));
                fprintf(html, "</code>");
                if (pass == 1) {
                    fprintf(html, "<br><i>allowed: ");
                    html_esc(html, allows[d->allow].reason);
                    fprintf(html, "</i>");
                }
                fprintf(html, "</li>\n");
            }
        }
        if (html && count)
            fprintf(html, "</ul>\n");
    }
    for (int i = 0; i < nallows; i++)
        if (!allows[i].used)
            printf("warning: %s:%d (%s) matches no difference: stale? remove it\n",
                   allow_path, allows[i].lineno, allows[i].loc);
}

/* The second matrix: one scenario, simulated vs real processes (--pair
 * twice; w: the name column's width). */
static void print_pairs(FILE *html, int w)
{
    int a = nacc, b = nacc + 1;
    printf("\n== %s vs %s (same scenario; informational): function hit "
           "counts\n", setname[a], setname[b]);
    printf("  %-*s %9s %9s\n", w, "", setname[a], setname[b]);
    if (html)
        fprintf(html, "<h3 style=\"margin:8px 0 2px 0\">%s vs %s "
                "(same scenario, informational)</h3>\n<table style=\""
                "border-collapse:collapse\"><tr>" TD "\">function</td>" TD
                "\"><b>%s</b></td>" TD "\"><b>%s</b></td></tr>\n",
                setname[a], setname[b], setname[a], setname[b]);
    int only[2] = {0, 0};
    for (int i = 0; i < nfiles; i++) {
        file_t *f = &files[i];
        int header = 0;
        for (int k = 0; k < f->nfns; k++) {
            fn_t *fn = &f->fns[k];
            if (!any_spec_fn(pairm, npairm, f, fn))
                continue;
            if (!header) {
                printf("  %s\n", f->path);
                if (html)
                    fprintf(html, "<tr><td colspan=\"3\"><b>%s</b></td></tr>\n",
                            f->path);
                header = 1;
            }
            int differ = (fn->c[a] > 0) != (fn->c[b] > 0);
            if (differ)
                only[fn->c[a] > 0 ? 0 : 1]++;
            printf("  %c %-*s %9" PRId64 " %9" PRId64 "\n", differ ? '*' : ' ',
                   w - 2, fn->name, fn->c[a], fn->c[b]);
            if (html) {
                fprintf(html, "<tr>" TD "\">%s", differ ? "* " : "");
                html_esc(html, fn->name);
                fprintf(html, "</td>");
                html_cell(html, fn->c[a], differ && !fn->c[a], 0);
                html_cell(html, fn->c[b], differ && !fn->c[b], 0);
                fprintf(html, "</tr>\n");
            }
        }
    }
    printf("  (* reached in one run only: %d in %s only, %d in %s only)\n",
           only[0], setname[a], only[1], setname[b]);
    if (html)
        fprintf(html, "</table>\n<p>* reached in one run only: %d in %s "
                "only, %d in %s only.</p>\n",
                only[0], setname[a], only[1], setname[b]);
}

/* --diffs FILE: every difference as a tab-separated line. */
static void write_diffs_file(void)
{
    FILE *o = fopen(diffs_path, "w");
    if (!o)
        die(2, "cannot write %s: %s", diffs_path, strerror(errno));
    fprintf(o, "# file\tline\tkind\tfunction\treached_by\tnever_by\tverdict"
               "\tbranch\n");
    for (int i = 0; i < ndiffs; i++) {
        diff_t *d = &diffs[i];
        char hit[512], miss[512];
        mask_names(d->hit, hit, sizeof hit);
        mask_names(all_acc_mask() & ~d->hit, miss, sizeof miss);
        char br[32] = "-";
        if (d->kind == D_BRANCH)
            snprintf(br, sizeof br, "%d,%d", d->block, d->branch);
        fprintf(o, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", d->f->path, d->line,
                d->kind == D_LINE ? "line" : "branch",
                d->fn ? d->fn->name : "?", hit, miss,
                !d->gated ? "info" : d->allow < 0 ? "undeclared" : "declared",
                br);
    }
    fclose(o);
}

/* What to do about undeclared differences, with the first five as
 * allow lines to fill in. */
static void print_advice(int undeclared)
{
    printf("parity: FAIL: %d line(s)/branch(es) of the shared plugin are "
           "reached by some accelerators and never by others.\n"
           "What to do, for each one listed under \"undeclared differences\" (which\n"
           "scenario reaches it: sh coverage/attribute.sh):\n"
           "  - if an accelerator skips or replaces a step of the shared plugin "
           "(connection\n    code of its own), fix the accelerator: every "
           "accelerator connects through\n    the same path (docs/plugin.md);\n"
           "  - if the scenario suite runs that path for some accelerators "
           "only, make\n    the suite the same for all of them;\n"
           "  - if the difference is genuinely accelerator-dependent, declare "
           "it in\n    %s with the reason, e.g.\n",
           undeclared, allow_path ? allow_path : "coverage/parity.allow");
    int shown = 0;
    for (int gi = 0; gi < ngroups && shown < 5; gi++) {
        diff_t *d = &diffs[groups[gi].first];
        if (!d->gated || d->allow >= 0)
            continue;
        char loc[1200], miss[512];
        group_loc(&groups[gi], loc, sizeof loc);
        mask_names(all_acc_mask() & ~d->hit, miss, sizeof miss);
        printf("      %s missed=%s  <why this is not a parity bug>\n", loc,
               miss);
        shown++;
    }
}

int main(int argc, char **argv)
{
    int rc = parse_args(argc, argv);
    if (rc >= 0)
        return rc;
    load_all();
    int undeclared = 0, declared = 0, informational = 0;
    for (int i = 0; i < ndiffs; i++) {
        if (!diffs[i].gated)
            informational++;
        else if (diffs[i].allow < 0)
            undeclared++;
        else
            declared++;
    }

    char reqmsg[MAXSPEC][1200];
    int missing_required = check_required(reqmsg);

    FILE *html = NULL;
    if (html_path && !(html = fopen(html_path, "w")))
        die(2, "cannot write %s: %s", html_path, strerror(errno));
    int fail = undeclared || missing_required;
    if (html)
        html_head(html, fail, undeclared, declared);
    print_summary(html);
    int w = print_matrix(html);
    print_diffs(html, undeclared, declared, informational);
    if (npair == 2)
        print_pairs(html, w);
    if (diffs_path)
        write_diffs_file();
    if (src_dir)
        for (int i = 0; i < nfiles; i++)
            write_src_page(&files[i]);

    printf("\n");
    for (int r = 0; r < nrequire; r++)
        if (reqmsg[r][0])
            printf("parity: FAIL: %s\n", reqmsg[r]);
    if (html) {
        for (int r = 0; r < nrequire; r++)
            if (reqmsg[r][0]) {
                fprintf(html, "<p style=\"color:#c00\"><b>FAIL</b>: ");
                html_esc(html, reqmsg[r]);
                fprintf(html, "</p>\n");
            }
        fprintf(html, "</div>\n<!-- /ddpsim coverage parity -->\n");
        fclose(html);
    }
    if (undeclared)
        print_advice(undeclared);
    if (fail)
        return 1;
    printf("parity: ok: every accelerator reaches the same lines and branches "
           "of %s%s (%d declared difference(s))\n",
           gate[0], ngate > 1 ? " ..." : "", declared);
    return 0;
}
