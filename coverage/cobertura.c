/* coverage/cobertura.c — an lcov tracefile as Cobertura XML (coverage-04.dtd,
 * coverage/cobertura-04.dtd), for the CI tools that read that format
 * (docs/coverage.md § 3).
 *
 *   cobertura --root DIR -o OUT.xml FILE.info...
 *
 * Records of one source file (a header seen by several translation units,
 * several tracefiles) are summed. A package is a directory, a class a
 * source file; paths under DIR are written relative to it (DIR is the
 * <source>), others stay absolute. Every file of the input is written, so
 * lines-valid / lines-covered equal what `lcov --summary` counts.
 * OUT is refused if it exists and is written through OUT.tmp, renamed
 * into place once complete. The timestamp is SOURCE_DATE_EPOCH when set.
 * Stand-alone, like coverage/parity.c. Exit: 0 written, 2 bad input. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lcov_read.h"

typedef struct {
    int line, block, branch;
    int64_t taken; /* '-' (never evaluated) is 0 */
} br_t;

typedef struct {
    char *name;
    int line;
    int64_t hits;
} fn_t;

typedef struct {
    char *path;   /* as written: relative to --root when under it */
    int64_t *hits; /* per line; -1: not instrumented */
    int nlines;
    fn_t *fns;
    int nfns;
    br_t *brs;
    int nbrs;
} file_t;

static file_t *files;
static int nfiles;
static const char *root;
static size_t rootlen;

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("cobertura: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p)
        die("out of memory");
    return p;
}

static file_t *file_get(const char *abs)
{
    const char *rel = abs;
    if (!strncmp(abs, root, rootlen) && abs[rootlen] == '/')
        rel = abs + rootlen + 1;
    for (int i = 0; i < nfiles; i++)
        if (!strcmp(files[i].path, rel))
            return &files[i];
    files = xrealloc(files, (size_t)(nfiles + 1) * sizeof *files);
    file_t *f = &files[nfiles++];
    memset(f, 0, sizeof *f);
    f->path = strdup(rel);
    if (!f->path)
        die("out of memory");
    return f;
}

static void line_add(file_t *f, int l, int64_t v)
{
    if (l >= f->nlines) {
        int n = l + 64;
        f->hits = xrealloc(f->hits, (size_t)n * sizeof *f->hits);
        for (int k = f->nlines; k < n; k++)
            f->hits[k] = -1;
        f->nlines = n;
    }
    if (f->hits[l] < 0)
        f->hits[l] = 0;
    f->hits[l] += v > 0 ? v : 0;
}

static fn_t *fn_get(file_t *f, const char *name)
{
    for (int i = 0; i < f->nfns; i++)
        if (!strcmp(f->fns[i].name, name))
            return &f->fns[i];
    f->fns = xrealloc(f->fns, (size_t)(f->nfns + 1) * sizeof *f->fns);
    fn_t *fn = &f->fns[f->nfns++];
    memset(fn, 0, sizeof *fn);
    fn->name = strdup(name);
    if (!fn->name)
        die("out of memory");
    return fn;
}

static void br_add(file_t *f, int l, int b, int br, int64_t v)
{
    for (int i = 0; i < f->nbrs; i++)
        if (f->brs[i].line == l && f->brs[i].block == b && f->brs[i].branch == br) {
            f->brs[i].taken += v;
            return;
        }
    f->brs = xrealloc(f->brs, (size_t)(f->nbrs + 1) * sizeof *f->brs);
    f->brs[f->nbrs++] = (br_t){l, b, br, v};
}

static void *sink_file(void *ctx, const char *path)
{
    (void)ctx;
    return file_get(path);
}

static void sink_da(void *ctx, void *f, int l, long long v)
{
    (void)ctx;
    line_add(f, l, v);
}

static void sink_fn(void *ctx, void *f, int l, const char *name)
{
    lcov_first_line(&fn_get(f, name)->line, l, ctx);
}

static void sink_fnda(void *ctx, void *f, long long v, const char *name)
{
    (void)ctx;
    fn_get(f, name)->hits += v > 0 ? v : 0;
}

static void sink_brda(void *ctx, void *f, int l, int b, int br, long long taken)
{
    (void)ctx;
    br_add(f, l, b, br, taken > 0 ? taken : 0);
}

static void load(const char *path)
{
    static const lcov_sink_t sink = {sink_file, sink_da, sink_fn, sink_fnda, sink_brda};
    int records = lcov_read(path, &sink, NULL);
    if (records < 0)
        die("cannot read %s: %s", path, strerror(errno));
    if (!records)
        die("%s holds no coverage records (SF:)", path);
}

typedef struct {
    long lv, lc, bv, bc;
} cnt_t;

static void count_file(const file_t *f, cnt_t *c)
{
    for (int l = 1; l < f->nlines; l++)
        if (f->hits[l] >= 0) {
            c->lv++;
            c->lc += f->hits[l] > 0;
        }
    for (int i = 0; i < f->nbrs; i++) {
        c->bv++;
        c->bc += f->brs[i].taken > 0;
    }
}

static double rate(long h, long t)
{
    return t ? (double)h / (double)t : 1.0;
}

static char *dir_of(const char *path)
{
    const char *s = strrchr(path, '/');
    char *d = strndup(path, s ? (size_t)(s - path) : 1);
    if (!d)
        die("out of memory");
    if (!s)
        d[0] = '.';
    return d;
}

static int cmp_file(const void *a, const void *b)
{
    return strcmp(((const file_t *)a)->path, ((const file_t *)b)->path);
}

/* The <line> of line l: branch data from the BRDA records on it. */
static void line_xml(FILE *o, const file_t *f, int l, const char *ind)
{
    int nb = 0, tb = 0;
    for (int i = 0; i < f->nbrs; i++)
        if (f->brs[i].line == l) {
            nb++;
            tb += f->brs[i].taken > 0;
        }
    fprintf(o, "%s<line number=\"%d\" hits=\"%" PRId64 "\"", ind, l,
            f->hits[l] > 0 ? f->hits[l] : 0);
    if (!nb) {
        fprintf(o, " branch=\"false\"/>\n");
        return;
    }
    int p = (int)(100.0 * tb / nb);
    fprintf(o, " branch=\"true\" condition-coverage=\"%d%% (%d/%d)\">\n"
               "%s  <conditions><condition number=\"0\" type=\"jump\" "
               "coverage=\"%d%%\"/></conditions>\n%s</line>\n",
            p, tb, nb, ind, p, ind);
}

static void write_xml(FILE *o)
{
    cnt_t all = {0};
    for (int i = 0; i < nfiles; i++)
        count_file(&files[i], &all);
    const char *sde = getenv("SOURCE_DATE_EPOCH");
    long long ts = sde && *sde ? strtoll(sde, NULL, 10) : (long long)time(NULL);
    fprintf(o, "<?xml version=\"1.0\" ?>\n"
               "<coverage line-rate=\"%.4f\" branch-rate=\"%.4f\" lines-covered=\"%ld\" "
               "lines-valid=\"%ld\" branches-covered=\"%ld\" branches-valid=\"%ld\" "
               "complexity=\"0\" version=\"ddpsim\" timestamp=\"%lld\">\n"
               "  <sources><source>",
            rate(all.lc, all.lv), rate(all.bc, all.bv), all.lc, all.lv, all.bc, all.bv,
            ts);
    lcov_xml_esc(o, root);
    fprintf(o, "</source></sources>\n  <packages>\n");
    for (int i = 0; i < nfiles;) {
        char *pkg = dir_of(files[i].path);
        int j = i;
        cnt_t pc = {0};
        for (; j < nfiles; j++) {
            char *d = dir_of(files[j].path);
            int same = !strcmp(d, pkg);
            free(d);
            if (!same)
                break;
            count_file(&files[j], &pc);
        }
        fprintf(o, "    <package name=\"");
        lcov_xml_esc(o, pkg);
        fprintf(o, "\" line-rate=\"%.4f\" branch-rate=\"%.4f\" complexity=\"0\">\n"
                   "      <classes>\n", rate(pc.lc, pc.lv), rate(pc.bc, pc.bv));
        for (int k = i; k < j; k++) {
            const file_t *f = &files[k];
            cnt_t fc = {0};
            count_file(f, &fc);
            fprintf(o, "        <class name=\"");
            lcov_xml_esc(o, f->path);
            fprintf(o, "\" filename=\"");
            lcov_xml_esc(o, f->path);
            fprintf(o, "\" line-rate=\"%.4f\" branch-rate=\"%.4f\" complexity=\"0\">\n"
                       "          <methods>\n", rate(fc.lc, fc.lv), rate(fc.bc, fc.bv));
            for (int m = 0; m < f->nfns; m++) {
                const fn_t *fn = &f->fns[m];
                fprintf(o, "            <method name=\"");
                lcov_xml_esc(o, fn->name);
                fprintf(o, "\" signature=\"\" line-rate=\"%d\" branch-rate=\"1\" "
                           "complexity=\"0\"><lines>",
                        fn->hits > 0);
                fprintf(o, "<line number=\"%d\" hits=\"%" PRId64 "\"/></lines></method>\n",
                        fn->line, fn->hits);
            }
            fprintf(o, "          </methods>\n          <lines>\n");
            for (int l = 1; l < f->nlines; l++)
                if (f->hits[l] >= 0)
                    line_xml(o, f, l, "            ");
            fprintf(o, "          </lines>\n        </class>\n");
        }
        fprintf(o, "      </classes>\n    </package>\n");
        free(pkg);
        i = j;
    }
    fprintf(o, "  </packages>\n</coverage>\n");
}

int main(int argc, char **argv)
{
    const char *out = NULL;
    const char **in = xrealloc(NULL, (size_t)argc * sizeof *in);
    int nin = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--root") && i + 1 < argc) {
            root = argv[++i];
        } else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(argv[i], "--help")) {
            printf("usage: cobertura --root DIR -o OUT.xml FILE.info...\n");
            return 0;
        } else if (argv[i][0] == '-') {
            die("unknown option %s (usage: cobertura --root DIR -o OUT.xml FILE.info...)",
                argv[i]);
        } else {
            in[nin++] = argv[i];
        }
    }
    if (!root || !out || !nin)
        die("usage: cobertura --root DIR -o OUT.xml FILE.info...");
    rootlen = strlen(root);
    while (rootlen > 1 && root[rootlen - 1] == '/')
        rootlen--;
    for (int i = 0; i < nin; i++)
        load(in[i]);
    free(in);
    qsort(files, (size_t)nfiles, sizeof *files, cmp_file);
    for (int i = 0; i < nfiles; i++)
        if (!files[i].nlines)
            line_add(&files[i], 0, 0); /* an SF with no DA: no line */

    struct stat st;
    if (stat(out, &st) == 0)
        die("%s exists: not overwritten (remove it first)", out);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0)
        die("cannot create %s: %s", tmp, strerror(errno));
    FILE *o = fdopen(fd, "w");
    if (!o)
        die("fdopen: %s", strerror(errno));
    write_xml(o);
    if (fflush(o) != 0 || ferror(o) || fsync(fd) != 0) {
        fclose(o);
        unlink(tmp);
        die("writing %s failed: %s", tmp, strerror(errno));
    }
    if (fclose(o) != 0 || rename(tmp, out) != 0) {
        unlink(tmp);
        die("writing %s failed: %s", out, strerror(errno));
    }
    return 0;
}
