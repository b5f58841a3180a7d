/* harness/shard.c — sharded sweeps: the partition rule, result files and
 * their merge (docs/sweeps.md).
 *
 * A result file is JSON lines: the first object is the header (kind,
 * shard, sweep, counts), each further one a row. Both are written and read
 * through one table of fields per object, so a key is named once. Strings
 * are escaped as JSON wants (\" \\ \n \t, other control bytes \u00XX);
 * other bytes pass through unchanged. The reader takes what the writer
 * writes (objects of strings and numbers, one per line) and ignores keys it
 * does not know, so a newer writer's extra keys do not break it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/fmt.h"
#include "ddp/host.h"
#include "ddp/scenario.h"
#include "ddp/sys.h"

#define SHARD_FORMAT "ddpsim-results"
#define SHARD_VERSION 1

/* ---- the partition ---- */

int ddp_shard_parse(const char *text, ddp_shard_t *out)
{
    long long k = 0, n = 0;
    const char *p = text;
    if (!p || *p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9' && k <= DDP_SHARD_MAX; p++)
        k = k * 10 + (*p - '0');
    if (*p++ != '/' || *p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9' && n <= DDP_SHARD_MAX; p++)
        n = n * 10 + (*p - '0');
    if (*p || k < 1 || n < 1 || k > n || n > DDP_SHARD_MAX)
        return -1;
    out->k = (int)k;
    out->n = (int)n;
    return 0;
}

int ddp_shard_owns(const ddp_shard_t *s, long long i)
{
    if (!s || s->n <= 0)
        return 1;
    return i >= 0 && i % s->n == s->k - 1;
}

long long ddp_shard_size(const ddp_shard_t *s, long long total)
{
    if (!s || s->n <= 0)
        return total;
    return total >= s->k ? (total - s->k) / s->n + 1 : 0;
}

/* ---- fields ---- */

/* F_LL: long long; F_I64: int64_t; F_U64: a uint64_t as a decimal string;
 * F_HEX64: as 16 hex digits (JSON numbers lose such values in most tools). */
typedef enum { F_INT, F_LL, F_I64, F_U64, F_HEX64, F_DBL, F_STR, F_PSTR, F_SHARD } ftype_t;

typedef struct field {
    const char *key;
    ftype_t type;
    size_t off, size; /* F_STR: the array's size */
    int omit_zero;    /* not written while all zero (read back as zero) */
} field_t;

#define FLD(T, key, type, m) {key, type, offsetof(T, m), sizeof(((T *)0)->m), 0}
/* explore's: a `run` file, which has none, leaves them out */
#define FLD0(T, key, type, m) {key, type, offsetof(T, m), sizeof(((T *)0)->m), 1}

static const field_t header_fields[] = {
    FLD(ddp_shard_file_t, "kind", F_STR, kind),
    FLD(ddp_shard_file_t, "shard", F_SHARD, shard),
    FLD(ddp_shard_file_t, "sweep", F_STR, sweep),
    FLD(ddp_shard_file_t, "total", F_LL, total),
    FLD(ddp_shard_file_t, "runs", F_LL, runs),
    FLD(ddp_shard_file_t, "rows", F_INT, nrows),
    FLD(ddp_shard_file_t, "files", F_INT, files),
    FLD(ddp_shard_file_t, "ranks", F_INT, ranks),
    FLD(ddp_shard_file_t, "seed", F_U64, seed),
    FLD(ddp_shard_file_t, "interrupted", F_INT, interrupted),
    FLD(ddp_shard_file_t, "wall_s", F_DBL, wall_s),
    FLD0(ddp_shard_file_t, "handoffs", F_U64, handoffs),
    FLD0(ddp_shard_file_t, "costliest", F_LL, costliest),
    FLD0(ddp_shard_file_t, "costliest_handoffs", F_U64, costliest_handoffs),
    FLD0(ddp_shard_file_t, "costliest_accelerator", F_STR, costliest_accel),
    FLD(ddp_shard_file_t, "costliest_scenario", F_PSTR, costliest_scn),
};

static const field_t run_fields[] = {
    FLD(ddp_shard_row_t, "index", F_LL, index),
    FLD(ddp_shard_row_t, "file", F_INT, file),
    FLD(ddp_shard_row_t, "path", F_STR, path),
    FLD(ddp_shard_row_t, "title", F_STR, title),
    FLD(ddp_shard_row_t, "accelerator", F_STR, accel),
    FLD(ddp_shard_row_t, "expected", F_STR, expected),
    FLD(ddp_shard_row_t, "actual", F_STR, actual),
    FLD(ddp_shard_row_t, "pass", F_INT, r.pass),
    FLD(ddp_shard_row_t, "skipped", F_INT, r.skipped),
    FLD(ddp_shard_row_t, "vacuous", F_INT, r.vacuous),
    FLD(ddp_shard_row_t, "expect_ok", F_INT, r.expect_ok),
    FLD(ddp_shard_row_t, "invariants_ok", F_INT, r.invariants_ok),
    FLD(ddp_shard_row_t, "rc", F_INT, rc),
    FLD(ddp_shard_row_t, "why", F_STR, r.why),
    FLD(ddp_shard_row_t, "first_error", F_STR, r.first_error),
    FLD(ddp_shard_row_t, "first_code", F_INT, r.first_code),
    FLD(ddp_shard_row_t, "classes", F_STR, r.classes),
    FLD(ddp_shard_row_t, "output", F_STR, r.output),
    FLD(ddp_shard_row_t, "ranks", F_INT, r.ranks),
    FLD(ddp_shard_row_t, "ok", F_INT, r.ok),
    FLD(ddp_shard_row_t, "failed", F_INT, r.failed),
    FLD(ddp_shard_row_t, "crashed", F_INT, r.crashed),
    FLD(ddp_shard_row_t, "stopped", F_INT, r.stopped),
    FLD(ddp_shard_row_t, "retries", F_INT, r.retries),
    FLD(ddp_shard_row_t, "virtual_ns", F_I64, r.virtual_ns),
    FLD(ddp_shard_row_t, "trace_hash", F_HEX64, r.trace_hash),
    FLD(ddp_shard_row_t, "wall_s", F_DBL, r.wall_s),
    FLD(ddp_shard_row_t, "report", F_STR, report),
};

static const field_t explore_fields[] = {
    FLD(ddp_shard_row_t, "index", F_LL, index),
    FLD(ddp_shard_row_t, "name", F_STR, name),
    FLD(ddp_shard_row_t, "report", F_PSTR, text),
    FLD(ddp_shard_row_t, "shrunk", F_PSTR, shrunk),
    FLD(ddp_shard_row_t, "original", F_PSTR, original),
};

#define NFIELDS(t) (sizeof t / sizeof t[0])

static const field_t *row_fields(const char *kind, size_t *n)
{
    if (!strcmp(kind, "explore")) {
        *n = NFIELDS(explore_fields);
        return explore_fields;
    }
    *n = NFIELDS(run_fields);
    return run_fields;
}

/* ---- writing ---- */

static void put_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        size_t k = c >= 0x80 ? ddp_utf8_seq(s, strnlen(s, 4)) : 1;
        if (k > 1) { /* valid UTF-8: as it is */
            fwrite(s, 1, k, f);
            s += k - 1;
        } else if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c < 0x20 || c == 0x7f || k == 0) /* k == 0: not UTF-8,
                                                     which JSON must be */
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static int all_zero(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return 0;
    return 1;
}

static void put_object(FILE *f, const field_t *fl, size_t n, const void *obj)
{
    const char *base = obj;
    const char *sep = "";
    fputc('{', f);
    for (size_t i = 0; i < n; i++) {
        const void *p = base + fl[i].off;
        if (fl[i].type == F_PSTR && !*(char *const *)p)
            continue; /* NULL: no key */
        if (fl[i].omit_zero && all_zero(p, fl[i].size))
            continue;
        fprintf(f, "%s\"%s\":", sep, fl[i].key);
        sep = ",";
        switch (fl[i].type) {
        case F_INT: fprintf(f, "%d", *(const int *)p); break;
        case F_LL: fprintf(f, "%lld", *(const long long *)p); break;
        case F_I64: fprintf(f, "%" PRId64, *(const int64_t *)p); break;
        case F_U64: fprintf(f, "\"%" PRIu64 "\"", *(const uint64_t *)p); break;
        case F_HEX64: fprintf(f, "\"%016" PRIx64 "\"", *(const uint64_t *)p); break;
        case F_DBL: fprintf(f, "%.6f", *(const double *)p); break;
        case F_STR: put_str(f, p); break;
        case F_PSTR: put_str(f, *(char *const *)p); break;
        case F_SHARD: {
            const ddp_shard_t *s = p;
            fprintf(f, "\"%d/%d\"", s->n ? s->k : 1, s->n ? s->n : 1);
            break;
        }
        }
    }
    fputs("}\n", f);
}

int ddp_shard_write(const ddp_shard_file_t *f, const char *path)
{
    ddp_out_t *o;
    int rc = ddp_out_open(path, "the result file", &o);
    if (rc)
        return rc;
    FILE *out = ddp_out_file(o);
    fprintf(out, "{\"ddpsim\":\"%s\",\"version\":%d,", SHARD_FORMAT, SHARD_VERSION);
    /* the header's own object, without its opening brace */
    char *hdr = NULL;
    size_t hlen = 0;
    FILE *h = open_memstream(&hdr, &hlen);
    if (!h) {
        ddp_out_abort(o);
        return ddp_err_set(-ENOMEM, "out of memory writing %s", path);
    }
    put_object(h, header_fields, NFIELDS(header_fields), f);
    fclose(h);
    fputs(hdr + 1, out);
    free(hdr);
    size_t nf;
    const field_t *fl = row_fields(f->kind, &nf);
    for (int i = 0; i < f->nrows; i++)
        put_object(out, fl, nf, &f->rows[i]);
    return ddp_out_commit(o);
}

/* ---- reading ---- */

typedef struct reader {
    const char *path;
    int line;
    const char *p;
} reader_t;

static int bad(const reader_t *r, const char *what)
{
    return ddp_err_set(DDP_ECONFIG, "%s:%d: expected %s (is it a file `ddpsim run "
                       "--results` or `ddpsim explore --results` wrote?)",
                       r->path, r->line, what);
}

static void skip_ws(reader_t *r)
{
    while (*r->p == ' ' || *r->p == '\t' || *r->p == '\r')
        r->p++;
}

static void put_utf8(char *out, size_t *o, unsigned cp)
{
    if (cp < 0x80) {
        out[(*o)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*o)++] = (char)(0xc0 | (cp >> 6));
        out[(*o)++] = (char)(0x80 | (cp & 0x3f));
    } else {
        out[(*o)++] = (char)(0xe0 | (cp >> 12));
        out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[(*o)++] = (char)(0x80 | (cp & 0x3f));
    }
}

/* A JSON string at r->p into a malloc'd buffer. */
static char *get_str(reader_t *r)
{
    if (*r->p != '"')
        return NULL;
    const char *end = ++r->p;
    size_t cap = 0;
    for (; *end && *end != '"'; end++, cap++)
        if (*end == '\\' && end[1])
            end++;
    char *out = malloc(cap * 3 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    while (*r->p && *r->p != '"') {
        char c = *r->p++;
        if (c != '\\') {
            out[o++] = c;
            continue;
        }
        c = *r->p++;
        switch (c) {
        case 'n': out[o++] = '\n'; break;
        case 't': out[o++] = '\t'; break;
        case 'r': out[o++] = '\r'; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case '"': case '\\': case '/': out[o++] = c; break;
        case 'u': {
            unsigned cp = 0;
            for (int k = 0; k < 4; k++) {
                char h = *r->p++;
                int v = h >= '0' && h <= '9'   ? h - '0'
                        : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                               : -1;
                if (v < 0) {
                    free(out);
                    return NULL;
                }
                cp = cp * 16 + (unsigned)v;
            }
            put_utf8(out, &o, cp);
            break;
        }
        default:
            free(out);
            return NULL;
        }
    }
    if (*r->p != '"') {
        free(out);
        return NULL;
    }
    r->p++;
    out[o] = '\0';
    return out;
}

static int store(reader_t *r, const field_t *f, void *obj)
{
    char *p = (char *)obj + f->off;
    skip_ws(r);
    if (f->type == F_STR || f->type == F_PSTR || f->type == F_U64 ||
        f->type == F_HEX64 || f->type == F_SHARD) {
        char *s = get_str(r);
        if (!s)
            return bad(r, "a string after the key");
        int rc = 0;
        if (f->type == F_STR) {
            snprintf(p, f->size, "%s", s);
        } else if (f->type == F_PSTR) {
            free(*(char **)p);
            *(char **)p = s;
            s = NULL;
        } else if (f->type == F_U64 || f->type == F_HEX64) {
            char *e;
            errno = 0;
            *(uint64_t *)p = strtoull(s, &e, f->type == F_U64 ? 10 : 16);
            rc = errno || e == s || *e || *s == '-'
                     ? bad(r, f->type == F_U64 ? "a decimal number in quotes"
                                               : "16 hex digits in quotes")
                     : 0;
        } else if (ddp_shard_parse(s, (ddp_shard_t *)p) != 0) {
            rc = bad(r, "a shard \"K/N\"");
        }
        free(s);
        return rc;
    }
    char *e;
    errno = 0;
    if (f->type == F_DBL) {
        *(double *)p = strtod(r->p, &e);
    } else {
        long long v = strtoll(r->p, &e, 10);
        if (f->type == F_INT && (v < -2147483647LL - 1 || v > 2147483647LL))
            errno = ERANGE;
        if (f->type == F_INT)
            *(int *)p = (int)v;
        else if (f->type == F_LL)
            *(long long *)p = v;
        else
            *(int64_t *)p = v;
    }
    if (errno || e == r->p)
        return bad(r, "a number after the key");
    r->p = e;
    return 0;
}

/* Skips a value of a key no table knows (a string or a number). */
static int skip_value(reader_t *r)
{
    skip_ws(r);
    if (*r->p == '"') {
        char *s = get_str(r);
        if (!s)
            return bad(r, "a string");
        free(s);
        return 0;
    }
    const char *s = r->p;
    while (*r->p && *r->p != ',' && *r->p != '}')
        r->p++;
    return r->p > s ? 0 : bad(r, "a value");
}

/* One object of the line at r->p into obj through the table. */
static int get_object(reader_t *r, const field_t *fl, size_t n, void *obj)
{
    skip_ws(r);
    if (*r->p++ != '{')
        return bad(r, "a JSON object");
    skip_ws(r);
    if (*r->p == '}')
        return 0;
    for (;;) {
        skip_ws(r);
        char *key = get_str(r);
        if (!key)
            return bad(r, "a quoted key");
        skip_ws(r);
        if (*r->p++ != ':') {
            free(key);
            return bad(r, "':' after a key");
        }
        size_t i = 0;
        while (i < n && strcmp(fl[i].key, key))
            i++;
        free(key);
        int rc = i < n ? store(r, &fl[i], obj) : skip_value(r);
        if (rc)
            return rc;
        skip_ws(r);
        char c = *r->p++;
        if (c == '}')
            break;
        if (c != ',')
            return bad(r, "',' or '}'");
    }
    skip_ws(r);
    return *r->p == '\0' || *r->p == '\n' ? 0 : bad(r, "the end of the line");
}

int ddp_shard_read(const char *path, ddp_shard_file_t *f)
{
    memset(f, 0, sizeof *f);
    /* Capped, and a FIFO or device refused before any byte is read, as
     * every other reader (`merge /dev/zero` grew without bound; a FIFO
     * blocked). */
    char *text = NULL;
    if (ddp_sys_read_host_file(path, &text, NULL) != 0)
        return ddp_err_wrap("cannot read the result file %s", path);
    reader_t r = {.path = path, .line = 1, .p = text};
    int rc = 0;
    char *nl = strchr(text, '\n');
    if (nl)
        *nl = '\0';
    /* The magic first, so another JSON file gets a plain answer. */
    if (strncmp(text, "{\"ddpsim\":\"" SHARD_FORMAT "\",\"version\":1,",
                strlen("{\"ddpsim\":\"" SHARD_FORMAT "\",\"version\":1,"))) {
        rc = bad(&r, "{\"ddpsim\":\"" SHARD_FORMAT "\",\"version\":1,... on its first line");
        goto out;
    }
    int want_rows = 0;
    if ((rc = get_object(&r, header_fields, NFIELDS(header_fields), f)) != 0)
        goto out;
    if (strcmp(f->kind, "run") && strcmp(f->kind, "explore")) {
        rc = bad(&r, "\"kind\" run or explore");
        goto out;
    }
    want_rows = f->nrows;
    f->nrows = 0;
    size_t nf;
    const field_t *fl = row_fields(f->kind, &nf);
    while (nl) {
        r.p = nl + 1;
        r.line++;
        nl = strchr(r.p, '\n');
        if (nl)
            *nl = '\0';
        if (!*r.p)
            continue;
        ddp_shard_row_t *row = ddp_shard_add_row(f);
        if (!row) {
            rc = ddp_err_set(-ENOMEM, "out of memory reading %s", path);
            goto out;
        }
        if ((rc = get_object(&r, fl, nf, row)) != 0)
            goto out;
    }
    if (f->nrows != want_rows)
        rc = ddp_err_set(DDP_ECONFIG, "%s: the header says %d row(s), the file has %d: "
                         "it was cut short (run that shard again)", path, want_rows,
                         f->nrows);
out:
    free(text);
    if (rc)
        ddp_shard_file_free(f);
    return rc;
}

ddp_shard_row_t *ddp_shard_add_row(ddp_shard_file_t *f)
{
    if (f->nrows == f->cap) {
        int cap = f->cap ? f->cap * 2 : 64;
        ddp_shard_row_t *n = realloc(f->rows, (size_t)cap * sizeof *n);
        if (!n)
            return NULL;
        f->rows = n;
        f->cap = cap;
    }
    ddp_shard_row_t *row = &f->rows[f->nrows++];
    memset(row, 0, sizeof *row);
    return row;
}

void ddp_shard_file_free(ddp_shard_file_t *f)
{
    for (int i = 0; f && i < f->nrows; i++) {
        free(f->rows[i].text);
        free(f->rows[i].shrunk);
        free(f->rows[i].original);
    }
    if (f) {
        free(f->rows);
        f->rows = NULL;
        f->nrows = f->cap = 0;
        free(f->costliest_scn);
        f->costliest_scn = NULL;
    }
}

/* ---- merging ---- */

static int by_index(const void *a, const void *b)
{
    long long x = ((const ddp_shard_row_t *)a)->index;
    long long y = ((const ddp_shard_row_t *)b)->index;
    return (x > y) - (x < y);
}

/* The parts are the shards 1..N of one sweep, each once: 0 or
 * DDP_ECONFIG naming the files. *runs: the runs they cover. */
static int check_shards(const ddp_shard_file_t *parts, int n, const char *const *names,
                        long long *runs_out)
{
    const ddp_shard_file_t *p0 = &parts[0];
    int nsh = p0->shard.n ? p0->shard.n : 1;
    int *seen = calloc((size_t)nsh + 1, sizeof *seen);
    if (!seen)
        return ddp_err_set(-ENOMEM, "out of memory merging");
    int rc = 0;
    long long runs = 0;
    for (int i = 0; i < n && !rc; i++) {
        const ddp_shard_file_t *p = &parts[i];
        int pn = p->shard.n ? p->shard.n : 1, pk = p->shard.n ? p->shard.k : 1;
        if (strcmp(p->kind, p0->kind))
            rc = ddp_err_set(DDP_ECONFIG, "%s is a `ddpsim %s` result and %s one of "
                             "`ddpsim %s`: merge the shards of one sweep",
                             names[i], p->kind, names[0], p0->kind);
        else if (strcmp(p->sweep, p0->sweep) || p->total != p0->total)
            rc = ddp_err_set(DDP_ECONFIG, "%s is of another sweep than %s (%s, %lld "
                             "run(s) against %s, %lld run(s)): every shard must run the "
                             "same command with only --shard K/N changed",
                             names[i], names[0], p->sweep, p->total, p0->sweep, p0->total);
        else if (pn != nsh)
            rc = ddp_err_set(DDP_ECONFIG, "%s is shard %d/%d and %s shard %d/%d: the "
                             "shards of one sweep share N", names[i], pk, pn, names[0],
                             p0->shard.n ? p0->shard.k : 1, nsh);
        else if (seen[pk])
            rc = ddp_err_set(DDP_ECONFIG, "shard %d/%d is given twice (%s and %s)", pk,
                             nsh, names[seen[pk] - 1], names[i]);
        else
            seen[pk] = i + 1;
        runs += p->runs;
    }
    for (int k = 1; k <= nsh && !rc; k++)
        if (!seen[k])
            rc = ddp_err_set(DDP_ECONFIG, "shard %d/%d is missing: pass the result "
                             "file of every shard 1..%d (its job may have failed before "
                             "writing it; run that shard again)", k, nsh, nsh);
    free(seen);
    *runs_out = runs;
    return rc;
}

/* Every row where it belongs; the runs of `ddpsim run` all there. */
static int check_rows(const ddp_shard_file_t *parts, int n, const char *const *names)
{
    int nsh = parts[0].shard.n ? parts[0].shard.n : 1, rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        const ddp_shard_file_t *p = &parts[i];
        for (int j = 0; j < p->nrows && !rc; j++) {
            long long x = p->rows[j].index;
            if (x < 0 || x >= p->total || !ddp_shard_owns(&p->shard, x))
                rc = ddp_err_set(DDP_ECONFIG, "%s holds run %lld, which is not shard "
                                 "%d/%d's (of %lld): the file was edited or mixed up",
                                 names[i], x, p->shard.k, nsh, p->total);
        }
        long long want = ddp_shard_size(&p->shard, p->total);
        if (!rc && p->runs != want)
            rc = ddp_err_set(DDP_ECONFIG, "%s covers %lld run(s); shard %d/%d of %lld "
                             "has %lld: it did not run to the end", names[i], p->runs,
                             p->shard.k, nsh, p->total, want);
        if (!rc && !strcmp(p->kind, "run") && p->nrows != want)
            rc = ddp_err_set(DDP_ECONFIG, "%s has %d run(s) where shard %d/%d has %lld",
                             names[i], p->nrows, p->shard.k, nsh, want);
    }
    return rc;
}

/* Part p's totals and rows into out (its rows and costliest scenario
 * move over). 0 or -ENOMEM. */
static int take_part(ddp_shard_file_t *out, ddp_shard_file_t *p)
{
    if (!out->interrupted)
        out->interrupted = p->interrupted;
    out->wall_s += p->wall_s;
    /* The costliest run of the sweep: as the unsharded run picks it,
     * the first of the most hand-offs. */
    out->handoffs += p->handoffs;
    if (p->costliest_handoffs > out->costliest_handoffs ||
        (p->costliest_handoffs && p->costliest_handoffs == out->costliest_handoffs &&
         p->costliest < out->costliest)) {
        out->costliest_handoffs = p->costliest_handoffs;
        out->costliest = p->costliest;
        memcpy(out->costliest_accel, p->costliest_accel, sizeof out->costliest_accel);
        free(out->costliest_scn);
        out->costliest_scn = p->costliest_scn;
        p->costliest_scn = NULL;
    }
    for (int j = 0; j < p->nrows; j++) {
        ddp_shard_row_t *row = ddp_shard_add_row(out);
        if (!row)
            return -ENOMEM;
        *row = p->rows[j];
        memset(&p->rows[j], 0, sizeof p->rows[j]);
    }
    return 0;
}

int ddp_shard_merge(ddp_shard_file_t *parts, int n, const char *const *names,
                    ddp_shard_file_t *out)
{
    memset(out, 0, sizeof *out);
    if (n < 1)
        return ddp_err_set(DDP_ECONFIG, "no result file to merge");
    const ddp_shard_file_t *p0 = &parts[0];
    long long runs = 0;
    int rc = check_shards(parts, n, names, &runs);
    if (rc == 0)
        rc = check_rows(parts, n, names);
    if (rc)
        return rc;
    snprintf(out->kind, sizeof out->kind, "%s", p0->kind);
    snprintf(out->sweep, sizeof out->sweep, "%s", p0->sweep);
    out->total = p0->total;
    out->runs = runs;
    out->files = p0->files;
    out->ranks = p0->ranks;
    out->seed = p0->seed;
    for (int i = 0; i < n; i++)
        if (take_part(out, &parts[i]) != 0) {
            ddp_shard_file_free(out);
            return ddp_err_set(-ENOMEM, "out of memory merging");
        }
    if (out->nrows > 1)
        qsort(out->rows, (size_t)out->nrows, sizeof *out->rows, by_index);
    return 0;
}
