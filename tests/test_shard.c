/* tests/test_shard.c — sharded sweeps (issue 14, docs/sweeps.md): the
 * partition rule (disjoint, complete, deterministic), result files (what is
 * written is read back), `ddpsim merge` (refuses what is not one whole
 * sweep; prints what the unsharded command prints: the same table, the same
 * JUnit but for the times, the same exit status), and explore's shards
 * merged into the unsharded run's violations and shrunk reproducers (a
 * planted bug makes violations to merge).
 *
 * The command-line tests run the built command ($DDPSIM, set by `make
 * test`) and skip outside `make test`. */
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ddp/err.h"
#include "ddp/fmt.h"
#include "ddp/host.h"
#include "ddp/plugin.h"
#include "ddp/scenario.h"
#include "ddp/sys.h"

/* ---- the partition rule ---- */

static void test_parse(void)
{
    static const struct {
        const char *text;
        int ok, k, n;
    } c[] = {
        {"1/1", 1, 1, 1},      {"1/4", 1, 1, 4},   {"4/4", 1, 4, 4},
        {"7/100000", 1, 7, 100000}, {"0/4", 0, 0, 0}, {"5/4", 0, 0, 0},
        {"1/0", 0, 0, 0},      {"1/100001", 0, 0, 0}, {"", 0, 0, 0},
        {"1", 0, 0, 0},        {"1/", 0, 0, 0},    {"/4", 0, 0, 0},
        {"1/4x", 0, 0, 0},     {" 1/4", 0, 0, 0},  {"1 /4", 0, 0, 0},
        {"-1/4", 0, 0, 0},     {"+1/4", 0, 0, 0},  {"1/4/2", 0, 0, 0},
        {"99999999999999999999/4", 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        ddp_shard_t s = {-1, -1};
        int rc = ddp_shard_parse(c[i].text, &s);
        CU_ASSERT_EQUAL(rc == 0, c[i].ok);
        if (c[i].ok && (s.k != c[i].k || s.n != c[i].n))
            printf("\n  \"%s\": got %d/%d\n", c[i].text, s.k, s.n);
        if (c[i].ok) {
            CU_ASSERT_EQUAL(s.k, c[i].k);
            CU_ASSERT_EQUAL(s.n, c[i].n);
        } else {
            CU_ASSERT_EQUAL(s.k, -1); /* untouched */
        }
    }
    CU_ASSERT_EQUAL(ddp_shard_parse(NULL, &(ddp_shard_t){0, 0}), -1);
}

/* Every run in exactly one shard, the sizes add up, and which shard holds
 * run i depends on i and N alone (not on the list's length). */
static void test_partition(void)
{
    for (int n = 1; n <= 9; n++) {
        for (long long total = 0; total <= 40; total++) {
            long long sum = 0;
            for (int k = 1; k <= n; k++) {
                ddp_shard_t s = {k, n};
                long long mine = 0;
                for (long long i = 0; i < total; i++)
                    mine += ddp_shard_owns(&s, i);
                CU_ASSERT_EQUAL(ddp_shard_size(&s, total), mine);
                sum += mine;
                /* balanced: sizes differ by at most one */
                CU_ASSERT_TRUE(mine * n >= total - n && mine * n <= total + n);
            }
            CU_ASSERT_EQUAL(sum, total);
            for (long long i = 0; i < total; i++) {
                int holders = 0, holder = 0;
                for (int k = 1; k <= n; k++)
                    if (ddp_shard_owns(&(ddp_shard_t){k, n}, i)) {
                        holders++;
                        holder = k;
                    }
                CU_ASSERT_EQUAL(holders, 1);
                CU_ASSERT_EQUAL(holder, (int)(i % n) + 1);
            }
        }
    }
    ddp_shard_t whole = {0, 0};
    CU_ASSERT_EQUAL(ddp_shard_size(&whole, 17), 17);
    CU_ASSERT_TRUE(ddp_shard_owns(&whole, 0) && ddp_shard_owns(&whole, 16));
    CU_ASSERT_FALSE(ddp_shard_owns(&(ddp_shard_t){2, 3}, -2));
}

/* Every temporary file and folder the suite makes is recorded, and the
 * suite's cleanup removes what a test left: a failed CU_ASSERT_*_FATAL
 * leaves its test before the test's own rm (make mutate's mutants do). */
static char g_tmp[32][32];
static int g_ntmp;

/* path: "/tmp/ddp-shard-XXXXXX", made a file (dir 0) or a folder. 0 done. */
static int shard_tmp(char *path, int dir)
{
    int fd = dir ? -1 : mkstemp(path);
    int ok = dir ? mkdtemp(path) != NULL : fd >= 0;
    if (fd >= 0)
        close(fd);
    if (ok && g_ntmp < (int)(sizeof g_tmp / sizeof g_tmp[0]))
        snprintf(g_tmp[g_ntmp++], sizeof g_tmp[0], "%s", path);
    return ok ? 0 : -1;
}

static int suite_cleanup(void)
{
    for (int i = 0; i < g_ntmp; i++) {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp[i]);
        if (system(cmd) != 0)
            return 1;
    }
    g_ntmp = 0;
    return 0;
}

/* ---- result files ---- */

static void test_file_roundtrip(void)
{
    char path[] = "/tmp/ddp-shard-XXXXXX";
    CU_ASSERT_EQUAL_FATAL(shard_tmp(path, 0), 0);
    static ddp_shard_file_t f, g;
    memset(&f, 0, sizeof f);
    snprintf(f.kind, sizeof f.kind, "run");
    f.shard = (ddp_shard_t){2, 3};
    snprintf(f.sweep, sizeof f.sweep, "run \"x\" \\ y");
    f.total = 5;
    f.runs = 2;
    f.files = 4;
    f.interrupted = 15;
    f.wall_s = 1.25;
    const char *tricky = "a \"quoted\" back\\slash\nnew line\ttab \x01\x1f\x7f é ☃";
    for (int i = 0; i < 2; i++) {
        ddp_shard_row_t *r = ddp_shard_add_row(&f);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        r->index = 1 + 3 * i;
        r->file = i;
        snprintf(r->path, sizeof r->path, "dir/s%d.scn", i);
        snprintf(r->title, sizeof r->title, "%s", tricky);
        snprintf(r->accel, sizeof r->accel, "ddp_cpu");
        snprintf(r->expected, sizeof r->expected, "crash+fail");
        snprintf(r->actual, sizeof r->actual, "-");
        r->r.pass = i;
        r->r.skipped = 1 - i;
        r->rc = -10004;
        snprintf(r->r.why, sizeof r->r.why, "%s", tricky);
        snprintf(r->r.first_error, sizeof r->r.first_error, "err %d", i);
        r->r.first_code = -110;
        r->r.retries = 14;
        r->r.stopped = 7 + i; /* ranks a wall limit stopped */
        r->r.virtual_ns = 62001000123LL;
        r->r.trace_hash = 0xfedcba9876543210ull;
        r->r.wall_s = 0.5;
        snprintf(r->report, sizeof r->report, "  rank 0 ok\n  rank 1 %s\n", tricky);
    }
    CU_ASSERT_EQUAL_FATAL(ddp_shard_write(&f, path), 0);
    CU_ASSERT_EQUAL_FATAL(ddp_shard_read(path, &g), 0);
    CU_ASSERT_STRING_EQUAL(g.kind, "run");
    CU_ASSERT_EQUAL(g.shard.k, 2);
    CU_ASSERT_EQUAL(g.shard.n, 3);
    CU_ASSERT_STRING_EQUAL(g.sweep, f.sweep);
    CU_ASSERT_EQUAL(g.total, 5);
    CU_ASSERT_EQUAL(g.runs, 2);
    CU_ASSERT_EQUAL(g.files, 4);
    CU_ASSERT_EQUAL(g.interrupted, 15);
    CU_ASSERT_DOUBLE_EQUAL(g.wall_s, 1.25, 1e-9);
    CU_ASSERT_EQUAL_FATAL(g.nrows, 2);
    for (int i = 0; i < 2; i++) {
        const ddp_shard_row_t *a = &f.rows[i], *b = &g.rows[i];
        CU_ASSERT_EQUAL(b->index, a->index);
        CU_ASSERT_EQUAL(b->file, a->file);
        CU_ASSERT_STRING_EQUAL(b->path, a->path);
        CU_ASSERT_STRING_EQUAL(b->title, a->title);
        CU_ASSERT_STRING_EQUAL(b->accel, a->accel);
        CU_ASSERT_STRING_EQUAL(b->expected, a->expected);
        CU_ASSERT_STRING_EQUAL(b->actual, a->actual);
        CU_ASSERT_EQUAL(b->r.pass, a->r.pass);
        CU_ASSERT_EQUAL(b->r.skipped, a->r.skipped);
        CU_ASSERT_EQUAL(b->rc, a->rc);
        CU_ASSERT_STRING_EQUAL(b->r.why, a->r.why);
        CU_ASSERT_STRING_EQUAL(b->r.first_error, a->r.first_error);
        CU_ASSERT_EQUAL(b->r.first_code, a->r.first_code);
        CU_ASSERT_EQUAL(b->r.stopped, a->r.stopped);
        CU_ASSERT_EQUAL(b->r.retries, a->r.retries);
        CU_ASSERT_EQUAL(b->r.virtual_ns, a->r.virtual_ns);
        CU_ASSERT_EQUAL(b->r.trace_hash, a->r.trace_hash);
        CU_ASSERT_STRING_EQUAL(b->report, a->report);
    }
    ddp_shard_file_free(&g);
    /* Issue 34: raw bytes that are not UTF-8 (an error echoing a file's
     * bytes) went into the JSON as they were; they are escaped, and the
     * file is valid UTF-8 throughout. */
    snprintf(f.rows[0].r.why, sizeof f.rows[0].r.why, "raw \xff\xfe end \xc3\xa9");
    CU_ASSERT_EQUAL_FATAL(ddp_shard_write(&f, path), 0);
    char *text = NULL;
    size_t tlen = 0;
    CU_ASSERT_EQUAL_FATAL(ddp_sys_read_host_file(path, &text, &tlen), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "raw \\u00ff\\u00fe end \xc3\xa9"));
    for (size_t i = 0, k; i < tlen; i += k ? k : 1) {
        k = ddp_utf8_seq(text + i, tlen - i);
        CU_ASSERT(k > 0);
    }
    free(text);
    CU_ASSERT_EQUAL(ddp_shard_read(path, &g), 0);
    ddp_shard_file_free(&g);
    /* Cut short (a row lost): the row count names it. */
    FILE *w = fopen(path, "r+");
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    char line[65536];
    long keep = 0;
    for (int i = 0; i < 2 && fgets(line, sizeof line, w); i++)
        keep = ftell(w);
    fclose(w);
    CU_ASSERT_EQUAL(truncate(path, keep), 0);
    CU_ASSERT_NOT_EQUAL(ddp_shard_read(path, &g), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "cut short"));
    /* Not a result file at all. */
    w = fopen(path, "w");
    fputs("{\"t\":1,\"task\":\"x\",\"kind\":\"start\"}\n", w);
    fclose(w);
    CU_ASSERT_NOT_EQUAL(ddp_shard_read(path, &g), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), ":1: expected"));
    remove(path);
    f.nrows = 0;
    free(f.rows);
    /* Issue 34: merge read without a cap (`merge /dev/zero` grew to 3 GB)
     * and opened a FIFO (blocked forever). Refused before any byte is read,
     * as every other reader does (ddp_sys_read_file). */
    char dir[64], fifo[96], big[96];
    CU_ASSERT_PTR_NOT_NULL_FATAL(ddp_test_tmpdir(dir, sizeof dir, "merge"));
    ddp_test_in(big, sizeof big, dir, "big");
    CU_ASSERT_EQUAL(mkfifo(ddp_test_in(fifo, sizeof fifo, dir, "fifo"), 0600), 0);
    CU_ASSERT_EQUAL(ddp_shard_read(fifo, &g), DDP_EUNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "a FIFO"));
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), fifo));
    int fd = open(big, O_CREAT | O_WRONLY, 0600); /* sparse: no disk space */
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(ftruncate(fd, (off_t)DDP_SYS_READ_MAX + 1), 0);
    close(fd);
    CU_ASSERT_EQUAL(ddp_shard_read(big, &g), DDP_ELIMIT);
    CU_ASSERT_EQUAL(ddp_shard_read(dir, &g), -EISDIR);
    unlink(fifo);
    unlink(big);
    CU_ASSERT_EQUAL(rmdir(dir), 0);
}

/* ---- ddpsim run --shard and ddpsim merge ---- */


/* Times out of a table or JUnit XML: "(1.2 s)" at a line's end and
 * time="..." attributes become "(T)" and time="T". */
static void mask_times(char *s)
{
    char *o = s;
    for (const char *p = s; *p;) {
        if (!strncmp(p, "time=\"", 6)) {
            const char *q = strchr(p + 6, '"');
            p = q ? q + 1 : p + strlen(p);
            memcpy(o, "time=\"T\"", 8); /* never past p: the value had a digit */
            o += 8;
            continue;
        }
        if (p[0] == '(' && p[1] >= '0' && p[1] <= '9') {
            const char *q = p + 1;
            while ((*q >= '0' && *q <= '9') || *q == '.')
                q++;
            if (!strncmp(q, " s)\n", 4)) {
                memcpy(o, "(T)\n", 4);
                o += 4;
                p = q + 4;
                continue;
            }
        }
        *o++ = *p++;
    }
    *o = '\0';
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 20;
    char *buf = malloc(cap);
    size_t n = buf ? fread(buf, 1, cap - 1, f) : 0;
    fclose(f);
    if (buf)
        buf[n] = '\0';
    return buf;
}

/* Two files equal but for the times. */
static int same_but_times(const char *a, const char *b)
{
    char *x = slurp(a), *y = slurp(b);
    int eq = x && y;
    if (eq) {
        mask_times(x);
        mask_times(y);
        eq = !strcmp(x, y);
        size_t d = 0;
        while (!eq && x[d] == y[d])
            d++;
        while (d > 0 && x[d - 1] != '\n')
            d--;
        if (!eq)
            printf("\n  %s and %s differ (times masked) from\n%.200s\n  against\n%.200s\n",
                   a, b, x + d, y + d);
    }
    free(x);
    free(y);
    return eq;
}

typedef struct sweep {
    char dir[64];
    const char *files; /* the scenario files */
    const char *opts;  /* further options of every run */
} sweep_t;

/* ddpsim run FILES OPTS [--shard K/N] --results DIR/NAME.res --junit
 * DIR/NAME.xml > DIR/NAME.txt; the exit status. */
static int run_part(const sweep_t *w, const char *name, int k, int n)
{
    char args[2048], shard[32] = "", out[256];
    if (n)
        snprintf(shard, sizeof shard, "--shard %d/%d", k, n);
    snprintf(args, sizeof args, "run %s %s %s --no-progress --results %s/%s.res --junit "
             "%s/%s.xml >%s/%s.txt", w->files, w->opts, shard, w->dir, name, w->dir,
             name, w->dir, name);
    return ddp_test_ddpsim_io(NULL, args, 0, out, sizeof out);
}

static int merge_parts(const sweep_t *w, int n)
{
    char args[2048], out[256];
    int off = snprintf(args, sizeof args, "merge%s",
                       strstr(w->opts, "--verbose") ? " --verbose" : "");
    for (int k = n; k >= 1; k--) /* any order */
        off += snprintf(args + off, sizeof args - (size_t)off, " %s/s%d.res", w->dir, k);
    snprintf(args + off, sizeof args - (size_t)off, " --junit %s/merged.xml >%s/merged.txt",
             w->dir, w->dir);
    return ddp_test_ddpsim_io(NULL, args, 0, out, sizeof out);
}

static int sweep_init(sweep_t *w, const char *files, const char *opts)
{
    snprintf(w->dir, sizeof w->dir, "/tmp/ddp-shard-XXXXXX");
    w->files = files;
    w->opts = opts;
    return shard_tmp(w->dir, 1);
}

static void sweep_done(sweep_t *w)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", w->dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

static const char *const k_files = "scenarios/clean-start.scn scenarios/port-taken.scn "
                                   "scenarios/crash-before-barrier.scn "
                                   "scenarios/master-late.scn";

/* The shards' runs are the unsharded list's, each once, by index; a shard
 * run again holds the same runs with the same traces. */
static void test_run_partition(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    sweep_t w;
    CU_ASSERT_EQUAL_FATAL(sweep_init(&w, k_files, "--accelerator all"), 0);
    CU_ASSERT_EQUAL(run_part(&w, "full", 0, 0), 0);
    char path[128];
    static ddp_shard_file_t full, part, again;
    snprintf(path, sizeof path, "%s/full.res", w.dir);
    CU_ASSERT_EQUAL_FATAL(ddp_shard_read(path, &full), 0);
    CU_ASSERT_EQUAL(full.total, full.nrows);
    CU_ASSERT_TRUE(full.nrows >= 12);
    int *seen = calloc((size_t)full.nrows, sizeof *seen);
    const int n = 5;
    for (int k = 1; k <= n; k++) {
        char name[16];
        snprintf(name, sizeof name, "s%d", k);
        CU_ASSERT_EQUAL(run_part(&w, name, k, n), 0);
        snprintf(path, sizeof path, "%s/s%d.res", w.dir, k);
        CU_ASSERT_EQUAL_FATAL(ddp_shard_read(path, &part), 0);
        CU_ASSERT_EQUAL(part.total, full.total);
        CU_ASSERT_STRING_EQUAL(part.sweep, full.sweep);
        CU_ASSERT_EQUAL(part.nrows, ddp_shard_size(&(ddp_shard_t){k, n}, full.total));
        for (int j = 0; j < part.nrows; j++) {
            const ddp_shard_row_t *r = &part.rows[j];
            CU_ASSERT_FATAL(r->index >= 0 && r->index < full.nrows);
            CU_ASSERT_EQUAL(r->index % n, k - 1);
            seen[r->index]++;
            const ddp_shard_row_t *u = &full.rows[r->index];
            CU_ASSERT_EQUAL(u->index, r->index);
            CU_ASSERT_STRING_EQUAL(u->path, r->path);
            CU_ASSERT_STRING_EQUAL(u->accel, r->accel);
            CU_ASSERT_EQUAL(u->r.trace_hash, r->r.trace_hash);
        }
        if (k == 2) { /* deterministic: the same shard again */
            CU_ASSERT_EQUAL(run_part(&w, "again", k, n), 0);
            snprintf(path, sizeof path, "%s/again.res", w.dir);
            CU_ASSERT_EQUAL_FATAL(ddp_shard_read(path, &again), 0);
            CU_ASSERT_EQUAL_FATAL(again.nrows, part.nrows);
            for (int j = 0; j < part.nrows; j++) {
                CU_ASSERT_EQUAL(again.rows[j].index, part.rows[j].index);
                CU_ASSERT_STRING_EQUAL(again.rows[j].path, part.rows[j].path);
                CU_ASSERT_STRING_EQUAL(again.rows[j].accel, part.rows[j].accel);
                CU_ASSERT_EQUAL(again.rows[j].r.trace_hash, part.rows[j].r.trace_hash);
            }
            ddp_shard_file_free(&again);
        }
        ddp_shard_file_free(&part);
    }
    for (int i = 0; i < full.nrows; i++)
        CU_ASSERT_EQUAL(seen[i], 1);
    free(seen);
    ddp_shard_file_free(&full);
    /* More shards than runs: an empty shard is not an error. */
    char out[4096], args[512];
    snprintf(args, sizeof args, "run scenarios/clean-start.scn --accelerator ddp --shard "
             "3/4 --results %s/empty.res --no-progress", w.dir);
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 1, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "shard 3/4 has no run: the list has 1"));
    sweep_done(&w);
}

/* merge of all shards = the unsharded run: table, JUnit, exit status. */
static void check_merge_equal(const char *files, const char *opts, int want_rc, int n)
{
    sweep_t w;
    CU_ASSERT_EQUAL_FATAL(sweep_init(&w, files, opts), 0);
    CU_ASSERT_EQUAL(run_part(&w, "full", 0, 0), want_rc);
    for (int k = 1; k <= n; k++) {
        char name[16];
        snprintf(name, sizeof name, "s%d", k);
        run_part(&w, name, k, n);
    }
    CU_ASSERT_EQUAL(merge_parts(&w, n), want_rc);
    char a[128], b[128];
    snprintf(a, sizeof a, "%s/full.txt", w.dir);
    snprintf(b, sizeof b, "%s/merged.txt", w.dir);
    CU_ASSERT_TRUE(same_but_times(a, b));
    snprintf(a, sizeof a, "%s/full.xml", w.dir);
    snprintf(b, sizeof b, "%s/merged.xml", w.dir);
    CU_ASSERT_TRUE(same_but_times(a, b));
    /* A merge of one unsharded file is that run again. */
    char args[512], out[256];
    snprintf(args, sizeof args, "merge %s/full.res%s >%s/one.txt", w.dir,
             strstr(opts, "--verbose") ? " --verbose" : "", w.dir);
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 0, out, sizeof out), want_rc);
    snprintf(a, sizeof a, "%s/full.txt", w.dir);
    snprintf(b, sizeof b, "%s/one.txt", w.dir);
    CU_ASSERT_TRUE(same_but_times(a, b));
    sweep_done(&w);
}

static void test_merge_run(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    check_merge_equal(k_files, "--accelerator all", 0, 4);
    check_merge_equal(k_files, "--accelerator ddp2 --seed 7 --verbose", 0, 3);
    /* A failing expectation in one shard: exit 1, and the same table. */
    FILE *f = fopen("build/test-shard-wrong.scn", "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("scenario \"wrong on purpose\"\nport_taken\nexpect ok\n", f);
    fclose(f);
    check_merge_equal("scenarios/clean-start.scn build/test-shard-wrong.scn", "", 1, 4);
    remove("build/test-shard-wrong.scn");
    /* Every run skipped (a real run that needs --netns): exit 3. */
    check_merge_equal("scenarios/partition-heals.scn", "--real", 3, 2);
}

/* merge refuses what is not one whole sweep: exit 2, one line naming it. */
static void test_merge_refuses(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    sweep_t w;
    CU_ASSERT_EQUAL_FATAL(sweep_init(&w, k_files, "--accelerator ddp"), 0);
    for (int k = 1; k <= 3; k++) {
        char name[16];
        snprintf(name, sizeof name, "s%d", k);
        CU_ASSERT_EQUAL(run_part(&w, name, k, 3), 0);
    }
    sweep_t other = w;
    other.opts = "--accelerator ddp --seed 5";
    CU_ASSERT_EQUAL(run_part(&other, "o3", 3, 3), 0);
    CU_ASSERT_EQUAL(run_part(&w, "x2", 2, 4), 0);
    static const struct {
        const char *files, *want;
    } c[] = {
        {"s1 s2", "shard 3/3 is missing"},
        {"s1 s2 s3 s2", "shard 2/3 is given twice"},
        {"s1 s2 o3", "is of another sweep"},
        {"s1 x2 s3", "share N"},
        {"s1 s2 nope", "cannot read the result file"},
        {"s1 s2 s3.xml", "expected {\"ddpsim\":\"ddpsim-results\""},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char args[1024], err[4096];
        int off = snprintf(args, sizeof args, "merge");
        char names[64];
        snprintf(names, sizeof names, "%s", c[i].files);
        for (char *t = strtok(names, " "); t; t = strtok(NULL, " "))
            off += snprintf(args + off, sizeof args - (size_t)off, " %s/%s%s", w.dir, t,
                            strchr(t, '.') ? "" : ".res");
        int st = ddp_test_ddpsim_io(NULL, args, 1, err, sizeof err);
        const char *nl = strchr(err, '\n');
        CU_ASSERT_EQUAL(st, 2);
        CU_ASSERT_TRUE(nl && nl[1] == '\0');
        CU_ASSERT_PTR_NOT_NULL(strstr(err, c[i].want));
        if (st != 2 || !strstr(err, c[i].want))
            printf("\n  merge %s: exit %d, stderr: %s", c[i].files, st, err);
    }
    char err[4096], args[512];
    snprintf(args, sizeof args, "merge %s/s1.res %s/s2.res %s/s3.res --out %s/d", w.dir,
             w.dir, w.dir, w.dir);
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 1, err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--out DIR is for explore"));
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, "run scenarios/clean-start.scn --shard 0/3",
                                       1, err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "bad --shard \"0/3\"; expected K/N"));
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, "replay scenarios/clean-start.scn --shard 1/2",
                                       1, err, sizeof err), 2);
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, "explore --runs 4 --shard 2/1", 1, err,
                                       sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "ddpsim explore: bad --shard"));
    sweep_done(&w);
}

/* Replaces the first `from` in the file with `to`; 0 when it was there. */
static int edit_file(const char *path, const char *from, const char *to)
{
    char *t = slurp(path);
    char *at = t ? strstr(t, from) : NULL;
    FILE *f = at ? fopen(path, "w") : NULL;
    if (f) {
        fprintf(f, "%.*s%s%s", (int)(at - t), t, to, at + strlen(from));
        fclose(f);
    }
    free(t);
    return f ? 0 : -1;
}

/* What merge takes from every shard, not from the first one: a signal that
 * stopped any shard (exit 128+N, as the unsharded run stopped by it), the
 * time (the shards' times added up: the sweep's work), and that each
 * shard ran all its runs (an explore shard cut short has no row to miss:
 * its runs count is all that tells). */
static void test_merge_takes_every_shard(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    sweep_t w;
    CU_ASSERT_EQUAL_FATAL(sweep_init(&w, k_files, "--accelerator ddp"), 0);
    static const char *const walls[3] = {"1.200000", "2.300000", "4.100000"};
    char path[3][128];
    for (int k = 1; k <= 3; k++) {
        char name[16], from[64], to[64];
        snprintf(name, sizeof name, "s%d", k);
        CU_ASSERT_EQUAL(run_part(&w, name, k, 3), 0);
        snprintf(path[k - 1], sizeof path[k - 1], "%s/s%d.res", w.dir, k);
        char *t = slurp(path[k - 1]);
        const char *ws = t ? strstr(t, "\"wall_s\":") : NULL;
        CU_ASSERT_PTR_NOT_NULL_FATAL(ws);
        snprintf(from, sizeof from, "%.*s", (int)strcspn(ws, ",}"), ws);
        free(t);
        snprintf(to, sizeof to, "\"wall_s\":%s", walls[k - 1]);
        CU_ASSERT_EQUAL(edit_file(path[k - 1], from, to), 0);
    }
    /* The last shard was stopped by SIGINT (2) after its runs were listed. */
    CU_ASSERT_EQUAL(edit_file(path[2], "\"interrupted\":0", "\"interrupted\":2"), 0);
    char args[1024], err[4096];
    static char out[1 << 16];
    snprintf(args, sizeof args, "merge %s %s %s", path[0], path[1], path[2]);
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 0, out, sizeof out), 128 + 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "(7.6 s)\n")); /* 1.2 + 2.3 + 4.1 */
    if (!strstr(out, "(7.6 s)\n"))
        printf("\n  merged output, expected the time (7.6 s):\n%s", out);
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 1, err, sizeof err), 128 + 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "interrupted by signal 2"));
    /* Simulated shards: the time column is virtual time. Shards of a real
     * sweep (their sweep line says --real): it is wall time, as the
     * unsharded real run's table says. */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, " virtual retries\n"));
    CU_ASSERT_PTR_NULL(strstr(out, "wall: the real time"));
    for (int k = 0; k < 3; k++)
        CU_ASSERT_EQUAL(edit_file(path[k], " --tag ", " --real --tag "), 0);
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 0, out, sizeof out), 128 + 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "    wall retries\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "wall: the real time"));

    /* An explore shard whose file says it ran fewer runs than it has. */
    for (int k = 1; k <= 3; k++) {
        snprintf(args, sizeof args, "explore --runs 6 --shard %d/3 --results %s/e%d.res "
                 "--no-progress >/dev/null", k, w.dir, k);
        CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 0, err, sizeof err), 0);
    }
    snprintf(args, sizeof args, "%s/e2.res", w.dir);
    CU_ASSERT_EQUAL(edit_file(args, "\"runs\":2,", "\"runs\":1,"), 0);
    snprintf(args, sizeof args, "merge %s/e1.res %s/e2.res %s/e3.res", w.dir, w.dir, w.dir);
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 1, err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "covers 1 run(s); shard 2/3 of 6 has 2"));
    sweep_done(&w);
}

/* ---- explore's shards ---- */

/* The planted bug: when its connection fails, a rank other than 0 opens a
 * listening socket and never closes it: the leaked-socket invariant. A
 * clean run never takes that path; a fault that fails such a rank does. */
static int leaky_init(const ddp_plugin_t *self, ddp_ctx_t *ctx, ddp_cluster_t *env,
                      int rank, int world)
{
    int rc = ddp_plugin_default_init_ddp_connection(self, ctx, env, rank, world);
    if (rc == 0 || rank == 0)
        return rc;
    ddp_errctx_t kept = *ddp_err_ctx();
    ddp_addr_t a;
    if (ddp_addr_parse("0.0.0.0", 0, &a) == 0)
        (void)ddp_sys_listen(ctx->sys, &a, 4); /* the bug: never closed */
    *ddp_err_ctx() = kept;
    return rc;
}

static const ddp_plugin_t leaky_plugin = {.name = "planted_leak",
                                          .init_ddp_connection = leaky_init};

/* Drops explore's progress lines and the summary's times. */
static void explore_view(const char *log, char *out, size_t n)
{
    size_t o = 0;
    for (const char *p = log; *p && o + 1 < n;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) + 1 : strlen(p);
        int progress = !strncmp(p, "explore: ", 9) && strstr(p, " runs (") &&
                       strstr(p, " runs (") < p + len;
        /* names the --out of the run that printed it: compared as files */
        progress |= !strncmp(p, "  its scenario as drawn: ", 25);
        if (!progress) {
            const char *in = strstr(p, " violation(s) in ");
            size_t keep = in && in < p + len ? (size_t)(in - p) + 13 : len;
            if (o + keep + 1 >= n)
                break;
            memcpy(out + o, p, keep);
            o += keep;
            if (keep < len)
                out[o++] = '\n';
        }
        p += len;
    }
    out[o] = '\0';
}

static int same_file(const char *a, const char *b)
{
    char *x = slurp(a), *y = slurp(b);
    int eq = x && y && !strcmp(x, y);
    free(x);
    free(y);
    return eq;
}

static void test_merge_explore(void)
{
    static int registered;
    if (!registered++)
        CU_ASSERT_EQUAL_FATAL(ddp_plugin_register(&leaky_plugin), 0);
    char dir[] = "/tmp/ddp-shard-XXXXXX";
    CU_ASSERT_EQUAL_FATAL(shard_tmp(dir, 1), 0);
    /* the unsharded run's --out, merge's --out, the result files */
    char sub[3][128];
    for (int i = 0; i < 3; i++) {
        snprintf(sub[i], sizeof sub[i], "%s/%s", dir, i == 0 ? "full" : i == 1 ? "merged"
                                                                               : "shards");
        CU_ASSERT_EQUAL_FATAL(mkdir(sub[i], 0777), 0);
    }
    const char *full_dir = sub[0], *merged_dir = sub[1], *shard_dir = sub[2];
    /* Seed 3, 24 runs: violations in runs 11, 15 and 21 (shards 3, 1, 1 of 3). */
    ddp_explore_opts_t base = {.ranks = 8, .runs = 24, .seed = 3, .max_faults = 2,
                               .plugin = "planted_leak"};
    /* The unsharded run. */
    char *ubuf = NULL;
    size_t ulen = 0;
    FILE *ulog = open_memstream(&ubuf, &ulen);
    ddp_explore_opts_t o = base;
    o.log = ulog;
    o.out_dir = full_dir;
    ddp_explore_stats_t st;
    CU_ASSERT_EQUAL(ddp_explore(&o, &st), 0);
    fclose(ulog);
    int violations = st.violations;
    CU_ASSERT_TRUE(violations >= 2); /* something to merge, in more than one shard */
    /* Three shards, each to its result file (one --out for all). */
    const int n = 3;
    static ddp_shard_file_t parts[3], m;
    char names[3][160];
    const char *np[3];
    int shards_with_rows = 0;
    for (int k = 1; k <= n; k++) {
        ddp_shard_file_t f = {0};
        char *sbuf = NULL;
        size_t slen = 0;
        FILE *slog = open_memstream(&sbuf, &slen);
        o = base;
        o.log = slog;
        o.out_dir = full_dir; /* the same text as the unsharded run's */
        o.shard = (ddp_shard_t){k, n};
        o.results = &f;
        CU_ASSERT_EQUAL(ddp_explore(&o, &st), 0);
        fclose(slog);
        CU_ASSERT_EQUAL(st.runs, (int)ddp_shard_size(&o.shard, base.runs));
        CU_ASSERT_EQUAL(f.nrows, st.violations);
        shards_with_rows += f.nrows > 0;
        CU_ASSERT_PTR_NOT_NULL(strstr(sbuf, ", shard "));
        free(sbuf);
        snprintf(names[k - 1], sizeof names[k - 1], "%s/s%d.res", shard_dir, k);
        np[k - 1] = names[k - 1];
        CU_ASSERT_EQUAL(ddp_shard_write(&f, names[k - 1]), 0);
        ddp_shard_file_free(&f);
        CU_ASSERT_EQUAL_FATAL(ddp_shard_read(names[k - 1], &parts[k - 1]), 0);
    }
    CU_ASSERT_TRUE(shards_with_rows >= 2);
    CU_ASSERT_EQUAL_FATAL(ddp_shard_merge(parts, n, np, &m), 0);
    CU_ASSERT_EQUAL(m.nrows, violations);
    CU_ASSERT_EQUAL(m.runs, base.runs);
    char *mbuf = NULL;
    size_t mlen = 0;
    FILE *mlog = open_memstream(&mbuf, &mlen);
    CU_ASSERT_EQUAL(ddp_explore_print_merged(&m, mlog, merged_dir), violations);
    fclose(mlog);
    /* The same violations, reports and shrunk scenarios, in the same order;
     * the same reproducer files. */
    static char uview[1 << 20], mview[1 << 20];
    explore_view(ubuf, uview, sizeof uview);
    explore_view(mbuf, mview, sizeof mview);
    CU_ASSERT_STRING_EQUAL(uview, mview);
    if (strcmp(uview, mview))
        printf("\n--- unsharded ---\n%s\n--- merged ---\n%s\n", uview, mview);
    CU_ASSERT_PTR_NOT_NULL(strstr(mview, "VIOLATION in run "));
    CU_ASSERT_PTR_NOT_NULL(strstr(mview, "leaked"));
    CU_ASSERT_PTR_NOT_NULL(strstr(mview, "explore: costliest run: run "));
    char ca[256], cb[256];
    snprintf(ca, sizeof ca, "%s/explore-3-%lld-costliest.scn", full_dir, m.costliest);
    snprintf(cb, sizeof cb, "%s/explore-3-%lld-costliest.scn", merged_dir, m.costliest);
    CU_ASSERT_TRUE(same_file(ca, cb));
    for (int i = 0; i < m.nrows; i++) {
        for (int orig = 0; orig < 2; orig++) {
            char a[256], b[256];
            snprintf(a, sizeof a, "%s/%s%s.scn", full_dir, m.rows[i].name,
                     orig ? "-original" : "");
            snprintf(b, sizeof b, "%s/%s%s.scn", merged_dir, m.rows[i].name,
                     orig ? "-original" : "");
            CU_ASSERT_TRUE(same_file(a, b));
        }
    }
    free(ubuf);
    free(mbuf);
    for (int k = 0; k < n; k++)
        ddp_shard_file_free(&parts[k]);
    ddp_shard_file_free(&m);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

/* An explore shard's file for the costliest tests: shard k/2 of 10 runs. */
static void costly_part(ddp_shard_file_t *f, int k, long long idx, uint64_t most,
                        uint64_t all, const char *accel, const char *scn)
{
    memset(f, 0, sizeof *f);
    snprintf(f->kind, sizeof f->kind, "explore");
    f->shard = (ddp_shard_t){k, 2};
    snprintf(f->sweep, sizeof f->sweep, "explore --runs 10");
    f->total = 10;
    f->runs = 5;
    f->handoffs = all;
    f->costliest = idx;
    f->costliest_handoffs = most;
    snprintf(f->costliest_accel, sizeof f->costliest_accel, "%s", accel);
    f->costliest_scn = strdup(scn);
}

/* The costliest run survives the result file, and the merge picks the
 * sweep's as the unsharded run does: the most hand-offs, then the lowest
 * index, whatever the order of the files. */
static void test_merge_costliest(void)
{
    char path[] = "/tmp/ddp-shard-XXXXXX";
    CU_ASSERT_EQUAL_FATAL(shard_tmp(path, 0), 0);
    static ddp_shard_file_t a, parts[2], m;
    const char *np[2] = {"a", "b"};
    costly_part(&a, 1, 4, 100, 300, "ddp", "scenario \"a\"\nnodes 1\n");
    CU_ASSERT_EQUAL_FATAL(ddp_shard_write(&a, path), 0);
    CU_ASSERT_EQUAL_FATAL(ddp_shard_read(path, &parts[0]), 0);
    CU_ASSERT_EQUAL(parts[0].handoffs, 300);
    CU_ASSERT_EQUAL(parts[0].costliest, 4);
    CU_ASSERT_EQUAL(parts[0].costliest_handoffs, 100);
    CU_ASSERT_STRING_EQUAL(parts[0].costliest_accel, "ddp");
    CU_ASSERT_PTR_NOT_NULL_FATAL(parts[0].costliest_scn);
    CU_ASSERT_STRING_EQUAL(parts[0].costliest_scn, a.costliest_scn);
    ddp_shard_file_free(&parts[0]);
    char *text = slurp(path);
    CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "\"costliest_handoffs\":\"100\""));
    free(text);
    /* A `run` file has none of explore's keys (all zero: left out). */
    static ddp_shard_file_t r;
    memset(&r, 0, sizeof r);
    snprintf(r.kind, sizeof r.kind, "run");
    r.shard = (ddp_shard_t){1, 1};
    CU_ASSERT_EQUAL_FATAL(ddp_shard_write(&r, path), 0);
    text = slurp(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NULL(strstr(text, "costliest"));
    CU_ASSERT_PTR_NULL(strstr(text, "handoffs"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"wall_s\":"));
    free(text);
    unlink(path);
    for (int order = 0; order < 2; order++) {
        for (int tie = 0; tie < 2; tie++) {
            costly_part(&parts[order], 1, 4, 100, 300, "ddp", "A");
            costly_part(&parts[1 - order], 2, 1, tie ? 100 : 99, 250, "ddp2", "B");
            CU_ASSERT_EQUAL_FATAL(ddp_shard_merge(parts, 2, np, &m), 0);
            CU_ASSERT_EQUAL(m.handoffs, 550);
            CU_ASSERT_EQUAL(m.costliest_handoffs, 100);
            CU_ASSERT_EQUAL(m.costliest, tie ? 1 : 4);
            CU_ASSERT_STRING_EQUAL(m.costliest_accel, tie ? "ddp2" : "ddp");
            CU_ASSERT_PTR_NOT_NULL_FATAL(m.costliest_scn);
            CU_ASSERT_STRING_EQUAL(m.costliest_scn, tie ? "B" : "A");
            ddp_shard_file_free(&parts[0]);
            ddp_shard_file_free(&parts[1]);
            ddp_shard_file_free(&m);
        }
    }
    ddp_shard_file_free(&a);
}

/* ddpsim explore's own shards (the shipped code: no violation): the merged
 * summary and exit status are the unsharded run's. */
static void test_merge_explore_cmd(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    char dir[] = "/tmp/ddp-shard-XXXXXX";
    CU_ASSERT_EQUAL_FATAL(shard_tmp(dir, 1), 0);
    static char full[8192], merged[8192], args[1024];
    snprintf(args, sizeof args, "explore --ranks 8 --runs 30 --seed 4 --no-progress");
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 0, full, sizeof full), 0);
    for (int k = 1; k <= 2; k++) {
        char out[4096];
        snprintf(args, sizeof args, "explore --ranks 8 --runs 30 --seed 4 --no-progress "
                 "--shard %d/2 --results %s/s%d.res", k, dir, k);
        CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 0, out, sizeof out), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, "explore: 15 run(s) of 8 rank(s), seed 4, shard "));
    }
    snprintf(args, sizeof args, "merge %s/s2.res %s/s1.res", dir, dir);
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 0, merged, sizeof merged), 0);
    static char a[8192], b[8192];
    explore_view(full, a, sizeof a);
    explore_view(merged, b, sizeof b);
    CU_ASSERT_STRING_EQUAL(a, b);
    CU_ASSERT_PTR_NOT_NULL(strstr(b, "explore: 30 run(s) of 8 rank(s), seed 4: 0 violation(s)"));
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

DDP_SUITE("shard", NULL, suite_cleanup,
          {"K/N: strict parse, 1 <= K <= N", test_parse},
          {"partition: disjoint, complete, balanced, by index alone", test_partition},
          {"result file: written, read back, cut short, not one", test_file_roundtrip},
          {"run --shard: the unsharded list split, deterministic", test_run_partition},
          {"merge of run shards = the unsharded run (table, JUnit, exit)",
           test_merge_run},
          {"merge: missing, twice, other sweep: exit 2, one line", test_merge_refuses},
          {"merge: every shard's signal, time and run count, not the first's",
           test_merge_takes_every_shard},
          {"explore shards merged = unsharded violations and reproducers",
           test_merge_explore},
          {"merge: the costliest run is the sweep's, whatever the order",
           test_merge_costliest},
          {"ddpsim explore --shard + merge: the unsharded summary",
           test_merge_explore_cmd})
