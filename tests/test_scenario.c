/* tests/test_scenario.c — scenario files: every malformed input gives its
 * documented file:line:col error (library and `ddpsim run`, exit 2); the
 * bundled library round-trips through ddp_scenario_write and meets every
 * expectation for every accelerator; verdicts can fail; runs repeat. */
#include <dirent.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ddp/accel.h"
#include "ddp/cluster.h"
#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/plan.h"
#include "ddp/plugin.h"
#include "ddp/scenario.h"
#include "ddp/store.h"
#include "ddp/sys.h"
#include "test.h"
#include "../harness/scenario_priv.h"
#include "../sim/sim_priv.h"
#include "../tools/cmds.h"

#define BAD_DIR "tests/scenarios/bad"
#define GOOD_DIR "scenarios"

/* Sorted *.scn paths of dir. */
static int list_scn(const char *dir, char ***out)
{
    DIR *d = opendir(dir);
    int n = 0;
    *out = NULL;
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".scn"))
            continue;
        *out = realloc(*out, sizeof **out * (size_t)(n + 1));
        if (asprintf(&(*out)[n], "%s/%s", dir, e->d_name) < 0)
            break;
        n++;
    }
    closedir(d);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp((*out)[j - 1], (*out)[j]) > 0; j--) {
            char *t = (*out)[j];
            (*out)[j] = (*out)[j - 1];
            (*out)[j - 1] = t;
        }
    return n;
}

static void free_list(char **l, int n)
{
    for (int i = 0; i < n; i++)
        free(l[i]);
    free(l);
}

/* "# error: 3:7: expected ..." -> the full expected message prefix. */
static int expected_error(const char *path, char *out, size_t n)
{
    FILE *f = fopen(path, "r");
    char line[600] = "";
    if (!f)
        return -1;
    char *ok = fgets(line, sizeof line, f);
    fclose(f);
    if (!ok || strncmp(line, "# error: ", 9))
        return -1;
    line[strcspn(line, "\n")] = '\0';
    const char *e = line + 9;
    if (!strncmp(e, "tests/", 6))
        snprintf(out, n, "%s", e); /* an error inside an included file */
    else
        snprintf(out, n, "%s:%s", path, e);
    return 0;
}

static void test_bad_inputs_library(void)
{
    char **files;
    int n = list_scn(BAD_DIR, &files);
    CU_ASSERT_TRUE(n >= 20);
    for (int i = 0; i < n; i++) {
        char want[700], err[1024] = "";
        CU_ASSERT_EQUAL_FATAL(expected_error(files[i], want, sizeof want), 0);
        ddp_scenario_t *s = NULL;
        int rc = ddp_scenario_load(files[i], &s, err, sizeof err);
        int good = rc == DDP_ECONFIG && s == NULL && !strncmp(err, want, strlen(want));
        if (!good)
            printf("\n  %s\n    want: %s\n    got:  %s (rc %d)\n", files[i], want, err, rc);
        CU_ASSERT_TRUE(good);
        ddp_scenario_free(s);
    }
    free_list(files, n);
}

static int run_cmd(const char *args, char *out, size_t n)
{
    return ddp_test_ddpsim(args, 1, out, n);
}

static void test_bad_inputs_cli(void)
{
    char bin[400];
    if (!ddp_test_need_ddpsim(bin, sizeof bin))
        return;
    char **files;
    int n = list_scn(BAD_DIR, &files);
    for (int i = 0; i < n; i++) {
        char want[700], out[4096], args[600];
        expected_error(files[i], want, sizeof want);
        snprintf(args, sizeof args, "run %s", files[i]);
        int st = run_cmd(args, out, sizeof out);
        int good = st == 2 && strstr(out, want) != NULL;
        if (!good)
            printf("\n  ddpsim %s: exit %d\n    want: %s\n    got:  %s\n", args, st, want, out);
        CU_ASSERT_TRUE(good);
    }
    free_list(files, n);
}

/* Scenario files are read bounded, regular files only: a device, a FIFO
 * (no writer: must not block) or a directory is a sentence naming it. */
static void test_bounded_loads(void)
{
    char fifo[] = "build/test-scenario-fifo";
    unlink(fifo);
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
    static const struct {
        const char *path, *why;
    } rows[] = {
        {"/dev/zero", "cannot read \"/dev/zero\": it is a character device"},
        {"build/test-scenario-fifo", "it is a FIFO (named pipe)"},
        {"scenarios", "cannot read \"scenarios\": it is a directory"},
        {"scenarios/nothere.scn", "cannot open \"scenarios/nothere.scn\": No such file"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char err[1024] = "";
        ddp_scenario_t *s = (ddp_scenario_t *)1;
        alarm(20);
        int rc = ddp_scenario_load(rows[i].path, &s, err, sizeof err);
        alarm(0);
        CU_ASSERT_EQUAL(rc, DDP_ECONFIG);
        CU_ASSERT_PTR_NULL(s);
        if (!strstr(err, rows[i].why))
            printf("\n  %s: %s\n", rows[i].path, err);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, rows[i].why));
    }
    unlink(fifo);
}

static ddp_scenario_t *parse(const char *text);

static char *write_mem(const ddp_scenario_t *s) { return ddp_scenario_text(s); }

/* parse -> write -> parse gives s back: the same scenario (every field),
 * and writing that gives the same text again. 1 if so (else printed). */
static int round_trips(const ddp_scenario_t *a, const char *what)
{
    char err[1024], why[256];
    ddp_scenario_t *b = NULL;
    char *t1 = write_mem(a);
    int rc = ddp_scenario_parse(t1, "rewritten", NULL, &b, err, sizeof err);
    int ok = rc == 0 && ddp_scenario_equal(a, b, why, sizeof why);
    char *t2 = ok ? write_mem(b) : NULL;
    ok = ok && !strcmp(t1, t2);
    if (!ok)
        printf("\n  %s does not round-trip: %s\n%s", what, rc ? err : why, t1);
    free(t1);
    free(t2);
    ddp_scenario_free(b);
    return ok;
}

/* The corpus (the bundled library and tests/scenarios/roundtrip, whose
 * files hold what is hard to write back) round-trips; a rewritten bundled
 * scenario runs the same (same trace hash). */
static void test_round_trip(void)
{
    static const char *const dirs[] = {GOOD_DIR, "tests/scenarios/roundtrip"};
    int total = 0;
    for (size_t d = 0; d < 2; d++) {
        char **files;
        int n = list_scn(dirs[d], &files);
        CU_ASSERT_TRUE(n >= (d == 0 ? 30 : 6));
        for (int i = 0; i < n; i++, total++) {
            char err[1024];
            ddp_scenario_t *a = NULL, *b = NULL;
            int rc = ddp_scenario_load(files[i], &a, err, sizeof err);
            if (rc)
                printf("\n  %s: %s\n", files[i], err);
            CU_ASSERT_EQUAL_FATAL(rc, 0);
            CU_ASSERT_TRUE(round_trips(a, files[i]));
            char *t1 = write_mem(a);
            if (d == 0 && !strstr(files[i], "scale") &&
                ddp_scenario_parse(t1, "rewritten", NULL, &b, err, sizeof err) == 0) {
                const char *acc = a->naccels ? a->accels[0] : "ddp_hpc";
                ddp_scn_result_t ra, rb;
                CU_ASSERT_EQUAL(ddp_scenario_run(a, acc, NULL, &ra), 0);
                CU_ASSERT_EQUAL(ddp_scenario_run(b, acc, NULL, &rb), 0);
                CU_ASSERT_EQUAL(ra.trace_hash, rb.trace_hash);
                CU_ASSERT_EQUAL(ra.pass, rb.pass);
            }
            free(t1);
            ddp_scenario_free(a);
            ddp_scenario_free(b);
        }
        free_list(files, n);
    }
    CU_ASSERT_TRUE(total >= 36);
}

/* What the writer used to lose, one case each (issue 15): quoted tags and
 * master_addr, a tag holding carriage returns (found by fuzz_scenario),
 * delay=0ms, a pause's end, an env variable named node, a hosts list longer
 * than a line, a probability's digits. */
static void test_writer_cases(void)
{
    static const char *const cases[] = {
        "scenario \"x\"\ntags \"two words\" plain\nexpect ok\n",
        "scenario \"x\"\ntags plain \"\r\rcr\"\nexpect ok\n", /* a blank outside quotes */
        "scenario \"x\"\nmaster_addr \"a host\"\nexpect ok\n",
        "scenario \"x\"\nfault delay delay=0ms\nexpect ok\n",
        "scenario \"x\"\nfault pause ranks=1 start=2s end=3s\nexpect ok\n",
        "scenario \"x\"\nenv node=all node=3\nexpect ok\n",
        "scenario \"x\"\nhosts \"gpu[1-1000]-ib\"\nexpect ok\n",
        "scenario \"x\"\nfault refuse p=0.1234567891\nexpect ok\n",
        "scenario \"\"\nexpect ok\n",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ddp_scenario_t *s = parse(cases[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        CU_ASSERT_TRUE(round_trips(s, cases[i]));
        ddp_scenario_free(s);
    }
    /* Long lists: several hosts lines, each within a word and full (one
     * more host would not fit), hosts in order: 1000 short names, and 4096
     * names of about 470 characters that need a line each. */
    char long_names[600]; /* 460 characters, then the number, then "-ib" */
    memset(long_names, 'h', 460);
    snprintf(long_names + 460, sizeof long_names - 460, "[0000-4095]-ib");
    const struct { const char *expr; int nhosts, min_lines; } longs[] = {
        {"gpu[1-1000]-ib", 1000, 11},
        {long_names, 4096, 4096},
    };
    for (size_t c = 0; c < sizeof longs / sizeof longs[0]; c++) {
        char text[1024];
        snprintf(text, sizeof text, "scenario \"x\"\nhosts \"%s\"\nexpect ok\n", longs[c].expr);
        ddp_scenario_t *s = parse(text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        CU_ASSERT_EQUAL(s->nhosts, longs[c].nhosts);
        char *t = write_mem(s);
        int lines = 0, at = 0, full = 1;
        for (char *l = strstr(t, "\nhosts \""); l; l = strstr(l + 1, "\nhosts \"")) {
            lines++;
            size_t len = strcspn(l + 1, "\n");
            CU_ASSERT_TRUE(len < 520);
            char expr[600], **h = NULL, *more = NULL;
            size_t n = 0;
            snprintf(expr, sizeof expr, "%.*s", (int)(len - 8), l + 8); /* between the quotes */
            CU_ASSERT_EQUAL_FATAL(ddp_hostlist_expand(expr, 4096, &h, &n), 0);
            for (size_t i = 0; i < n; i++)
                CU_ASSERT_STRING_EQUAL(h[i], s->hosts[at + (int)i]);
            at += (int)n;
            if (at < s->nhosts) { /* the line plus the next host: too long for a word */
                CU_ASSERT_EQUAL(ddp_hostlist_compress((const char *const *)s->hosts + at - n,
                                                      n + 1, &more), 0);
                full &= more && strlen(more) >= 512; /* TOKEN_MAX */
            }
            free(more);
            ddp_hostlist_free(h, n);
        }
        CU_ASSERT_TRUE(full);
        CU_ASSERT_EQUAL(at, s->nhosts);
        CU_ASSERT_TRUE(lines >= longs[c].min_lines);
        free(t);
        ddp_scenario_free(s);
    }
}

/* ---- generated scenarios ---- */

typedef struct gen {
    uint64_t x;
    char *buf;
    size_t len, cap;
} gen_t;

static uint64_t gen_next(gen_t *g)
{
    g->x ^= g->x << 13, g->x ^= g->x >> 7, g->x ^= g->x << 17;
    return g->x;
}
static int gen_below(gen_t *g, int n) { return (int)(gen_next(g) % (uint64_t)n); }
static const char *gen_pick(gen_t *g, const char *const *v, int n) { return v[gen_below(g, n)]; }

static void gen_put(gen_t *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void gen_put(gen_t *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (g->len + (size_t)w + 1 > g->cap) {
        g->cap = (g->len + (size_t)w + 1) * 2;
        g->buf = realloc(g->buf, g->cap);
    }
    va_start(ap, fmt);
    vsnprintf(g->buf + g->len, g->cap - g->len, fmt, ap);
    va_end(ap);
    g->len += (size_t)w;
}

static const char *gen_duration(gen_t *g, char *b, size_t n)
{
    static const char *const units[] = {"ns", "us", "ms", "s", "m", "h"};
    if (gen_below(g, 4) == 0)
        snprintf(b, n, "%d.%d%s", gen_below(g, 100), gen_below(g, 1000), gen_pick(g, units, 3) );
    else
        snprintf(b, n, "%d%s", gen_below(g, 5) ? gen_below(g, 90) : gen_below(g, 1 << 30),
                 gen_pick(g, units, 6));
    return b;
}

/* A word, sometimes needing quotes: blanks, '#', '"', '\\', '='. */
static const char *gen_text(gen_t *g, char *b, size_t n)
{
    static const char alpha[] = "abz09_-. #\"\\=";
    int len = gen_below(g, 10);
    size_t k = 0;
    b[k++] = '"';
    for (int i = 0; i < len && k + 3 < n; i++) {
        char c = alpha[gen_below(g, gen_below(g, 3) ? 9 : (int)sizeof alpha - 1)];
        if (c == '"' || c == '\\')
            b[k++] = '\\';
        b[k++] = c;
    }
    b[k++] = '"';
    b[k] = '\0';
    return b;
}

/* One random scenario text: mostly valid statements in a random order. */
static void gen_scenario(gen_t *g)
{
    char a[64], b[64];
    static const char *const kinds[] = {"refuse", "reset", "blackhole", "delay",
                                        "partition", "crash", "pause", "resolve",
                                        "bandwidth"};
    static const char *const accels[] = {"ddp", "ddp_spawn", "ddp_cpu", "ddp2", "ddp_hpc",
                                         "ddp_cpu_hpc"};
    static const char *const launchers[] = {"auto", "per-node", "slurm", "torchrun", "mpi", "lsf"};
    static const char *const hostlists[] = {"n[1-3]", "a,b,c", "gpu[01-02]-ib", "x[1-700]y",
                                            "r[1-2]n[1-2]", "h[1-4000]"};
    static const char *const phases[] = {"barrier", "wait for workers", "configure_ddp",
                                         "teardown", "store connect"};
    int nodes = 1 + gen_below(g, 4);
    g->len = 0;
    gen_put(g, "scenario %s\n", gen_text(g, a, sizeof a));
    if (gen_below(g, 3) == 0)
        gen_put(g, "hosts \"%s\"\n", gen_pick(g, hostlists, 6));
    else
        gen_put(g, "nodes %d\n", nodes);
    int n = gen_below(g, 14);
    for (int i = 0; i < n; i++) {
        switch (gen_below(g, 16)) {
        case 0: gen_put(g, "tags %s word\n", gen_text(g, a, sizeof a)); break;
        case 1: gen_put(g, "devices %d\n", 1 + gen_below(g, 4)); break;
        case 2: gen_put(g, "accelerators %s %s\n", gen_pick(g, accels, 6), gen_pick(g, accels, 6)); break;
        case 3: gen_put(g, "launcher %s\ntasks_per_node %d\n", gen_pick(g, launchers, 6), 1 + gen_below(g, 3)); break;
        case 4: gen_put(g, "timeout %s\nstore_timeout %s\n", gen_duration(g, a, sizeof a), gen_duration(g, b, sizeof b)); break;
        case 5: gen_put(g, "master_addr %s\n", gen_below(g, 3) ? gen_text(g, a, sizeof a) : "none"); break;
        case 6: gen_put(g, "port %d\nport_taken\n", 1 + gen_below(g, 65535)); break;
        case 7: gen_put(g, "env %s%s=%s\n", gen_below(g, 2) ? "node=all " : "node=0 ",
                        gen_below(g, 2) ? "node" : "K_1", gen_text(g, a, sizeof a)); break;
        case 8: gen_put(g, "unset %snode\n", gen_below(g, 2) ? "node=0 " : ""); break;
        case 9: gen_put(g, "seed %llu\nlatency %s\n", (unsigned long long)gen_next(g), gen_duration(g, a, sizeof a)); break;
        default: {
            const char *k = gen_pick(g, kinds, 9);
            gen_put(g, "fault %s", k);
            if (!strcmp(k, "bandwidth")) { /* it takes node=, start=, end=, rate= only */
                static const char *const units[] = {"bit", "kbit", "mbit", "gbit",
                                                    "bps", "kbps", "mbps", "gbps"};
                int u = gen_below(g, 8);
                gen_put(g, " rate=%d%s", 1 + gen_below(g, u % 4 == 3 || u == 7 ? 1 : 999),
                        units[u]);
                if (gen_below(g, 2))
                    gen_put(g, " node=%d", gen_below(g, nodes));
                if (gen_below(g, 2))
                    gen_put(g, " start=%dms end=%ds", gen_below(g, 500), 1 + gen_below(g, 100));
                gen_put(g, "\n");
                break;
            }
            if (!strcmp(k, "partition"))
                gen_put(g, " nodes=%d", gen_below(g, nodes));
            if (!strcmp(k, "delay"))
                gen_put(g, " delay=%s", gen_below(g, 3) ? gen_duration(g, a, sizeof a) : "0ms");
            if (!strcmp(k, "crash") || !strcmp(k, "pause") || gen_below(g, 3) == 0)
                gen_put(g, " ranks=%d", gen_below(g, 4));
            if (!strcmp(k, "crash") && gen_below(g, 2))
                gen_put(g, " phase=\"%s\"", gen_pick(g, phases, 5));
            if (gen_below(g, 2))
                gen_put(g, " start=%dms", gen_below(g, 500));
            if (!strcmp(k, "pause") || gen_below(g, 3) == 0)
                gen_put(g, " end=%ds", 1 + gen_below(g, 100));
            if (gen_below(g, 3) == 0)
                gen_put(g, " p=0.%d count=%d", 1 + gen_below(g, 99999), 1 + gen_below(g, 5));
            if (gen_below(g, 4) == 0)
                gen_put(g, " peer=%d port=%d", gen_below(g, nodes), 29500 + gen_below(g, 3));
            gen_put(g, "\n");
        }
        }
    }
    static const char *const expects[] = {"expect ok\n", "expect invariants\n",
                                          "expect fail ranks=others error=timeout\n",
                                          "expect crashed ranks=1 within=90s\n"};
    for (int i = 0, ne = 1 + gen_below(g, 2); i < ne; i++)
        gen_put(g, "%s", gen_pick(g, expects, 4));
    if (gen_below(g, 4) == 0)
        gen_put(g, "expect fail mentions=%s match=some\n", gen_text(g, a, sizeof a));
}

/* 3000 generated scenarios: every one the parser accepts round-trips. */
static void test_round_trip_generated(void)
{
    gen_t g = {.x = 0x9e3779b97f4a7c15ull};
    int accepted = 0, bad = 0;
    for (int i = 0; i < 3000; i++) {
        gen_scenario(&g);
        char err[1024];
        ddp_scenario_t *s = NULL;
        if (ddp_scenario_parse(g.buf, "generated.scn", NULL, &s, err, sizeof err) != 0)
            continue;
        accepted++;
        if (!round_trips(s, g.buf) && bad++ > 3) {
            ddp_scenario_free(s);
            break;
        }
        ddp_scenario_free(s);
    }
    free(g.buf);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_TRUE(accepted >= 1500); /* the generator mostly writes valid ones */
    printf("(%d of 3000 accepted) ", accepted);
}

/* Runs every bundled scenario for every accelerator it lists, checking
 * that each meets its expectations and invariants; the number of runs.
 * Files whose name holds `skip` (NULL: none) are left out; sanitizer builds
 * skip the 512-rank scenario to stay within the test budget. */
static int run_bundled_library(const char *skip)
{
    char **files;
    int n = list_scn(GOOD_DIR, &files), runs = 0;
    for (int i = 0; i < n; i++) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
        if (strstr(files[i], "scale-"))
            continue;
#endif
        if (skip && strstr(files[i], skip))
            continue;
        char err[1024];
        ddp_scenario_t *s = NULL;
        CU_ASSERT_EQUAL_FATAL(ddp_scenario_load(files[i], &s, err, sizeof err), 0);
        static const char *const accels[] = {"ddp", "ddp_spawn", "ddp_cpu",
                                             "ddp2", "ddp_hpc", "ddp_cpu_hpc"};
        for (int a = 0; a < 6; a++) {
            if (!ddp_scenario_has_accel(s, accels[a]))
                continue;
            ddp_scn_result_t r;
            CU_ASSERT_EQUAL(ddp_scenario_run(s, accels[a], NULL, &r), 0);
            if (!r.pass)
                printf("\n  %s x %s: %s\n", files[i], accels[a], r.why);
            CU_ASSERT_TRUE(r.pass);
            runs++;
        }
        ddp_scenario_free(s);
    }
    free_list(files, n);
    return runs;
}

/* The bundled library meets every expectation and invariant for every
 * accelerator it lists (what `make run` shows as a table). */
static void test_bundled_library(void)
{
    CU_ASSERT_TRUE(run_bundled_library(NULL) >= 100);
}

/* The stack margin check: the deepest stack any task of the bundled
 * library writes (error paths, elastic agents, plugins, every accelerator)
 * leaves the simulator's default stack at least 1.5x (sim/sim.c,
 * MIN_STACK). A frame that grows past it must shrink, or the default grow
 * with it (docs/simulator.md § 1). */
static void test_stack_margin(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    printf("\n  skipped: sanitizer builds give tasks 512 KiB stacks and frames of their own\n");
    return;
#endif
    ddp_sim_t *sim = ddp_sim_new(NULL);
    size_t stack = ddp__sim_stack_size(sim);
    ddp_sim_free(sim);
    ddp__stacks_measure(1);
    int runs = run_bundled_library("scale-512x64"); /* scale-64x8's paths, 64x the ranks */
    ddp__stacks_measure(0);
    size_t deepest = ddp__stacks_deepest();
    printf("\n  %d runs: the deepest task stack %zu bytes of %zu (%.2fx)\n", runs, deepest,
           stack, deepest ? (double)stack / (double)deepest : 0.0);
    CU_ASSERT_TRUE(runs >= 100);
    CU_ASSERT_TRUE(deepest > 1024); /* it measured something */
    CU_ASSERT_TRUE(deepest * 3 / 2 <= stack);
}

/* NODE_RANK=0 on both nodes: node 1's rank 0 is a second rank 0. Its
 * MASTER_ADDR names node 0, not its own host, but the fix is not "set
 * MASTER_ADDR to node1": the run's first error names the duplicate. */
static void test_second_rank0_is_duplicate(void)
{
    char err[1024];
    ddp_scenario_t *s = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_scenario_load("scenarios/node-rank-misdetected.scn", &s, err,
                                            sizeof err), 0);
    ddp_scn_result_t r;
    CU_ASSERT_EQUAL(ddp_scenario_run(s, "ddp", NULL, &r), 0);
    if (!strstr(r.first_error, "second rank 0"))
        printf("\n  first error: %s\n", r.first_error);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.first_error, "is a second rank 0: ranks are duplicated"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.first_error, "NODE_RANK is the same on every node"));
    CU_ASSERT_PTR_NULL(strstr(r.first_error, "set MASTER_ADDR"));
    ddp_scenario_free(s);
}

/* torchrun --rdzv_endpoint=10.0.0.1:29400, node 0's own address: its agent
 * hosts the c10d store as torch 1.13's does (_matches_machine_hostname),
 * and not by comparing the endpoint with its host name only. The same for
 * localhost on one node. */
static void test_endpoint_address_hosts_store(void)
{
    static const char *const endpoints[][2] = {{"10.0.0.1:29400", "2"}, {"localhost", "1"},
                                               {"127.0.0.1:29400", "1"}};
    for (size_t i = 0; i < sizeof endpoints / sizeof endpoints[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, "scenario \"endpoint\"\nnodes %s\ndevices 1\n"
                                    "launcher torchrun-elastic\nenv PET_MONITOR_INTERVAL=1\n"
                                    "env PET_RDZV_ENDPOINT=%s\nexpect ok restarts=0\n"
                                    "expect ok ranks=agents\n", endpoints[i][1], endpoints[i][0]);
        ddp_scenario_t *s = parse(text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        ddp_scn_result_t r;
        CU_ASSERT_EQUAL(ddp_scenario_run(s, "ddp_hpc", NULL, &r), 0);
        if (!r.pass)
            printf("\n  endpoint %s: %s\n", endpoints[i][0], r.why);
        CU_ASSERT_TRUE(r.pass);
        ddp_scenario_free(s);
    }
}

static ddp_scenario_t *parse(const char *text)
{
    return ddp_test_scenario(text);
}

/* A wrong expectation is reported, with its line: the judge is not vacuous. */
static void test_wrong_expectations_fail(void)
{
    static const char *const cases[][2] = {
        {"scenario \"x\"\nport_taken\nexpect ok\n", "line 3: expected rank 0 to connect"},
        {"scenario \"x\"\nexpect fail\n", "expected rank"},
        {"scenario \"x\"\nfault crash ranks=1 phase=\"barrier\"\nexpect fail ranks=0\n"
         "expect crashed ranks=2\n", "line 4: expected rank 2 to be crashed"},
        {"scenario \"x\"\nmaster_late 20s\nexpect ok within=10s\n", "to end within 10.000 s"},
        {"scenario \"x\"\nport_taken\nexpect fail ranks=0 error=timeout\n",
         "expected rank 0 to fail with error=timeout, got addrinuse"},
        {"scenario \"x\"\nport_taken\nexpect fail ranks=0 error=timeout|peer_lost\n",
         "expected rank 0 to fail with error=timeout|peer_lost, got addrinuse"},
        {"scenario \"x\"\nport_taken\nexpect fail ranks=0 mentions=\"meteor\"\n",
         "to mention \"meteor\""},
        {"scenario \"x\"\nexpect ok ranks=7\n", "expected rank 7, but no process had that rank"},
        {"scenario \"x\"\ntrain 20s\nexpect ok within=10s\n", "to end within 10.000 s"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ddp_scenario_t *s = parse(cases[i][0]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        ddp_scn_result_t r;
        CU_ASSERT_EQUAL(ddp_scenario_run(s, "ddp_hpc", NULL, &r), 0);
        CU_ASSERT_FALSE(r.pass);
        CU_ASSERT_FALSE(r.expect_ok);
        if (!strstr(r.why, cases[i][1]))
            printf("\n  case %zu: want \"%s\" in: %s\n", i, cases[i][1], r.why);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.why, cases[i][1]));
        ddp_scenario_free(s);
    }
}

/* The elastic agent (launcher torchrun-elastic, harness/elastic.c): each
 * case's expect lines say what its agents and workers must do. */
static void test_elastic(void)
{
#define EL "scenario \"x\"\nnodes 2\ndevices 2\nlauncher torchrun-elastic\n" \
           "env PET_MONITOR_INTERVAL=1\n"
    static const struct {
        const char *text, *why; /* why: NULL when it must pass */
    } cases[] = {
        {EL "env PET_NNODES=0\nexpect fail ranks=agents error=config mentions=\"PET_NNODES\"\n", NULL},
        {EL "env PET_NNODES=3:2\nexpect fail ranks=agents error=config mentions=\"MIN:MAX\"\n", NULL},
        {EL "env PET_NPROC_PER_NODE=0\nexpect fail ranks=agents error=config "
            "mentions=\"PET_NPROC_PER_NODE\"\n", NULL},
        {EL "env PET_MAX_RESTARTS=-1\nexpect fail ranks=agents error=config "
            "mentions=\"PET_MAX_RESTARTS\"\n", NULL},
        {EL "env PET_MONITOR_INTERVAL=soon\nexpect fail ranks=agents error=config "
            "mentions=\"PET_MONITOR_INTERVAL\"\n", NULL},
        {EL "env PET_RDZV_ENDPOINT=node0:99999\nexpect fail ranks=agents error=config "
            "mentions=\"PET_RDZV_ENDPOINT\"\n", NULL},
        {EL "env PET_RDZV_CONF=join_timeout=x\nexpect fail ranks=agents error=config "
            "mentions=\"PET_RDZV_CONF\"\n", NULL},
        /* restarts run out: the worker dies twice, one restart allowed */
        {EL "env PET_MAX_RESTARTS=1\nfault crash ranks=1 phase=barrier count=2\n"
            "expect fail ranks=agents match=some error=peer_lost mentions=\"1 of 1 restart\"\n", NULL},
        /* a third node never comes: the round times out */
        {EL "env PET_NNODES=3 PET_RDZV_CONF=join_timeout=20\n"
            "expect fail ranks=agents match=some error=timeout mentions=\"round 0 not complete after 20 s\"\n", NULL},
        /* what the ranks did is their last group's start */
        {EL "env PET_MAX_RESTARTS=1\nfault crash ranks=1 phase=barrier count=1\n"
            "expect ok restarts=0\n",
         "to end in its worker group's restart 0, it ended in restart 1"},
        /* torch 1.13 waits at the exit barrier (300 s) on failure too: the
         * agent out of restarts closes the rendezvous only after it, so the
         * other's restart finds it closed more than 200 s in */
        {EL "env node=1 PET_MAX_RESTARTS=3\nfault crash ranks=1 phase=barrier count=1\n"
            "expect fail ranks=agents error=peer_lost|closed within=200s\n",
         "within 200.000 s"},
        /* every worker of the second start is judged: one of them failing
         * fails the run although an earlier attempt of its rank passed */
        {EL "env PET_MAX_RESTARTS=1\nfault crash ranks=1 phase=barrier count=2\nexpect ok\n",
         "to connect, but it crashed"},
    };
#undef EL
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ddp_scenario_t *s = parse(cases[i].text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        ddp_scn_result_t r;
        CU_ASSERT_EQUAL(ddp_scenario_run(s, "ddp", NULL, &r), 0);
        int ok = cases[i].why ? !r.pass && strstr(r.why, cases[i].why) != NULL : r.pass;
        if (!ok)
            printf("\n  case %zu: pass %d, why: %s\n", i, r.pass, r.why);
        CU_ASSERT_TRUE(ok);
        ddp_scenario_free(s);
    }
}

/* A crash with node= and ranks= kills those ranks of that node only (rank 3
 * is on node 1: spared); node= alone is the whole node. */
static void test_crash_node_and_ranks(void)
{
    static const char *const texts[] = {
        "scenario \"x\"\nnodes 2\ndevices 2\ntimeout 10s\n"
        "fault crash node=0 ranks=1,3 start=enter:barrier@1\n"
        "expect crashed ranks=1\nexpect fail ranks=0,2,3\n",
        "scenario \"x\"\nnodes 2\ndevices 2\ntimeout 10s\nfault crash node=0 mode=kill "
        "start=enter:barrier@1\nexpect crashed ranks=0-1\nexpect fail ranks=2-3\n",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        ddp_scenario_t *s = parse(texts[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        ddp_scn_result_t r;
        CU_ASSERT_EQUAL(ddp_scenario_run(s, "ddp_hpc", NULL, &r), 0);
        if (!r.pass)
            printf("\n  case %zu: %s\n", i, r.why);
        CU_ASSERT_TRUE(r.pass);
        ddp_scenario_free(s);
    }
}

/* error=A|B holds when the class is any one of them, in any place. */
static void test_error_alternatives(void)
{
    static const char *const lines[] = {"timeout|addrinuse", "addrinuse|peer_lost",
                                        "peer_lost|config|addrinuse", "ADDRINUSE"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        char text[200];
        snprintf(text, sizeof text, "scenario \"x\"\nport_taken\nexpect fail ranks=0 error=%s\n",
                 lines[i]);
        ddp_scenario_t *s = parse(text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        ddp_scn_result_t r;
        CU_ASSERT_EQUAL(ddp_scenario_run(s, "ddp", NULL, &r), 0);
        if (!r.pass)
            printf("\n  error=%s: %s\n", lines[i], r.why);
        CU_ASSERT_TRUE(r.pass);
        ddp_scenario_free(s);
    }
}

/* `train D`: every rank trains D after connecting, with every accelerator;
 * training longer than the group timeout still ends cleanly, D later. */
static void test_train(void)
{
    ddp_scenario_t *s = parse("scenario \"x\"\ntimeout 10s\ntrain 25s\nexpect ok\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(s->train_ns, 25 * DDP_NS_PER_S);
    for (size_t i = 0; i < ddp_accel_count(); i++) {
        ddp_scn_result_t r;
        const char *acc = ddp_accel_at(i)->name;
        CU_ASSERT_EQUAL(ddp_scenario_run(s, acc, NULL, &r), 0);
        if (!r.pass)
            printf("\n  %s: %s\n", acc, r.why);
        CU_ASSERT_TRUE(r.pass);
        CU_ASSERT_TRUE(r.virtual_ns >= 25 * DDP_NS_PER_S);
    }
    ddp_scenario_free(s);
}

/* A plugin that leaks a socket after connecting (a raw connection to the
 * store it never closes): the leaked-socket invariant catches it although
 * every expectation holds. */
static int leaky_init(const ddp_plugin_t *self, ddp_ctx_t *ctx, ddp_cluster_t *env,
                      int rank, int world)
{
    int rc = ddp_plugin_default_init_ddp_connection(self, ctx, env, rank, world);
    if (rc == 0 && rank == 1)
        ddp_test_leak_store_connection(ctx, env);
    return rc;
}

/* Registers plugin p and runs "plugin P / expect ok" under ddp_hpc: every
 * expectation holds, and the judge's invariants break naming `why`. */
static void check_planted_caught(const ddp_plugin_t *p, const char *why)
{
    CU_ASSERT_EQUAL(ddp_plugin_register(p), 0);
    char text[160];
    snprintf(text, sizeof text, "scenario \"planted\"\nplugin %s\nexpect ok\n", p->name);
    ddp_scenario_t *s = parse(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    ddp_scn_result_t r;
    CU_ASSERT_EQUAL(ddp_scenario_run(s, "ddp_hpc", NULL, &r), 0);
    CU_ASSERT_TRUE(r.expect_ok);
    CU_ASSERT_FALSE(r.invariants_ok);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.why, why));
    if (!strstr(r.why, why))
        printf("\n  %s: why: %s\n", p->name, r.why);
    ddp_scenario_free(s);
}

static void test_leak_invariant(void)
{
    static const ddp_plugin_t leaky = {.name = "test-leaky", .init_ddp_connection = leaky_init};
    check_planted_caught(&leaky, "socket(s) still open");
}

/* Four healthy outcomes: ranks 0..3 of 4 on two nodes, connected at 1 s,
 * ended at 2 s. */
static void healthy_outcomes(ddp_sim_outcome_t o[4])
{
    static const char *const names[] = {"rank0", "rank1", "rank2", "rank3"};
    memset(o, 0, 4 * sizeof *o);
    for (int i = 0; i < 4; i++) {
        o[i].message = ""; /* none: never NULL */
        o[i].name = names[i];
        o[i].node = i / 2;
        o[i].rank = i;
        o[i].world = 4;
        o[i].state = DDP_SIM_TASK_EXITED;
        o[i].connect_ns = DDP_NS_PER_S;
        o[i].end_ns = 2 * DDP_NS_PER_S;
    }
}

/* The report's rows are formatted without printf (harness/scenario_run.c,
 * report_row): the bytes are printf's, times at and around a half
 * microsecond (where printf's rounding decides), across a second and past
 * 10^6 s included, with names and fields longer than their columns. */
static void test_report_rows_printf_bytes(void)
{
    static const int64_t times[] = {0, 1, 499, 500, 501, 1500, 2500, 999999499, 999999500,
                                    999999501, 1000000000, 12345678901, 4000000000500LL,
                                    999999999999999LL, 1000000000000000LL, 1000000000000500LL};
    ddp_scenario_t *s = parse("scenario \"rows\"\nexpect invariants\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    static char report[8192];
    int bad = 0, n = (int)(sizeof times / sizeof times[0]);
    for (int t = 0; t < n; t++) {
        ddp_sim_outcome_t o[4];
        healthy_outcomes(o);
        o[1].name = "a-task-name-longer-than-twelve";
        o[2].node = 123456;
        for (int i = 0; i < 4; i++) { /* rank3 never connected: FAIL */
            o[i].end_ns = times[t] + i;
            o[i].connect_ns = i == 3 ? -1 : times[(t + i) % n];
        }
        ddp_scn_result_t r;
        memset(&r, 0, sizeof r);
        ddp__scenario_judge(s, o, 4, 4, DDP_SIM_DONE, NULL, report, sizeof report, &r);
        for (int i = 0; i < 4; i++) {
            char cn[32] = "-", who[24], row[512];
            if (o[i].connect_ns >= 0)
                snprintf(cn, sizeof cn, "%.6f s", (double)o[i].connect_ns / 1e9);
            snprintf(who, sizeof who, "rank %d", o[i].rank);
            snprintf(row, sizeof row, "  %-12s %-9s node %-4d %-8s connected %-12s ended "
                     "%.6f s  %s%s\n", o[i].name, who, o[i].node, i == 3 ? "FAIL" : "ok", cn,
                     (double)o[i].end_ns / 1e9, "", "");
            if (!strstr(report, row)) {
                if (!bad++)
                    printf("\n  no row \"%s\" in:\n%s", row, report);
            }
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    ddp_scenario_free(s);
}

/* The judge's invariants (DESIGN §5), judged as both runners judge
 * (ddp__scenario_judge: the simulated and the real one): four healthy
 * outcomes pass, and each invariant broken alone is named. */
static void test_judge_invariants(void)
{
    ddp_scenario_t *s = parse("scenario \"judge\"\nexpect invariants\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    const int64_t late = s->master_late_ns + s->timeout_ns + s->train_ns + 3600 * DDP_NS_PER_S;
    static const struct {
        const char *what, *why; /* why: NULL when the invariants hold */
    } cases[] = {
        {"healthy", NULL},
        {"rank 3 also calls itself rank 1", "invariant: two connected processes both have rank 1"},
        {"rank 2 believes in 5 ranks", "invariant: connected ranks disagree on the world size (4 vs 5)"},
        {"rank 3 calls itself rank 4 of 4", "invariant: a connected process has rank 4 outside 0..3"},
        {"rank 1 fails saying only \"timed out\"", "invariant: rank 1 failed without naming a cause (\"timed out\", DDP_ETIMEOUT)"},
        {"rank 1 fails naming its cause", NULL},
        {"rank 2 is still running", "invariant: task rank2 never finished"},
        {"rank 0 ends an hour past its deadline", "past its deadline"},
        {"rank 0 is killed an hour past its deadline", NULL},
        {"rank 1 leaves two sockets open", "exited with 2 socket(s) still open (leaked)"},
        {"every task waits", "invariant: deadlock"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ddp_sim_outcome_t o[4];
        healthy_outcomes(o);
        ddp_sim_result_t res = DDP_SIM_DONE;
        switch (c) {
        case 1: o[3].rank = 1; break;
        case 2: o[2].world = 5; break;
        case 3: o[3].rank = 4; break;
        case 4:
        case 5:
            o[1].rc = 1;
            o[1].code = DDP_ETIMEOUT;
            o[1].connect_ns = -1;
            o[1].message = c == 4 ? "timed out"
                                  : "store connect to 10.0.0.1:29500: timed out after 30 s";
            break;
        case 6: o[2].state = DDP_SIM_TASK_RUNNING; break;
        case 7: o[0].end_ns = late; break;
        case 8:
            o[0].end_ns = late;
            o[0].state = DDP_SIM_TASK_CRASHED;
            break;
        case 9: o[1].leaked_socks = 2; break;
        case 10: res = DDP_SIM_DEADLOCK; break;
        }
        ddp_scn_result_t r;
        memset(&r, 0, sizeof r);
        ddp__scenario_judge(s, o, 4, 4, res, "deadlock: 4 task(s) wait\n", NULL, 0, &r);
        int ok = cases[c].why ? !r.invariants_ok && strstr(r.why, cases[c].why) != NULL
                              : r.invariants_ok == 1;
        if (!ok)
            printf("\n  %s: invariants %s, why \"%s\"\n", cases[c].what,
                   r.invariants_ok ? "held" : "broken", r.why);
        CU_ASSERT_TRUE(ok);
        CU_ASSERT_EQUAL(r.pass, r.invariants_ok);
    }
    ddp_scenario_free(s);
}

/* second_job: two jobs' ranks share numbers, and each job is judged on
 * its own: the invariants per job, an expect line on its job= only. */
static void test_judge_two_jobs(void)
{
    ddp_scenario_t *s = parse("scenario \"jobs\"\nsecond_job start=5s\nexpect ok\n"
                              "expect fail job=2 error=config\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    for (int c = 0; c < 4; c++) {
        ddp_sim_outcome_t o[8];
        healthy_outcomes(o);
        healthy_outcomes(o + 4);
        for (int i = 4; i < 8; i++) {
            o[i].job = 1;
            o[i].rc = 1;
            o[i].code = DDP_ECONFIG;
            o[i].connect_ns = -1;
            /* started 5 s late: a deadline 5 s later than job 1's */
            o[i].end_ns = s->timeout_ns + 5 * DDP_NS_PER_S;
            o[i].message = "worker_count 5 for world_size 4: "
                           "another job's ranks joined this store";
        }
        const char *want = NULL; /* NULL: passes */
        if (c == 1) { /* job 2 fine: its expect line fails */
            healthy_outcomes(o + 4);
            for (int i = 4; i < 8; i++)
                o[i].job = 1;
            want = "line 4";
        } else if (c == 2) { /* job 1's rank fails: the job=1 line fails */
            o[2] = o[6];
            o[2].job = 0;
            want = "line 3";
        } else if (c == 3) { /* two of job 2 claim rank 1: its invariant */
            healthy_outcomes(o + 4);
            for (int i = 4; i < 8; i++)
                o[i].job = 1;
            o[7].rank = 1;
            want = "job 2: invariant: two connected processes both have rank 1";
        }
        ddp_scn_result_t r;
        memset(&r, 0, sizeof r);
        ddp__scenario_judge(s, o, 8, 4, DDP_SIM_DONE, "", NULL, 0, &r);
        int ok = want ? !r.pass && strstr(r.why, want) != NULL : r.pass == 1;
        if (!ok)
            printf("\n  case %d: pass %d, why \"%s\"\n", c, r.pass, r.why);
        CU_ASSERT_TRUE(ok);
    }
    ddp_scenario_free(s);
}

/* Root cause first (harness/root_cause.c, docs/errors.md): the summary
 * shows the most causal error of any rank, not the lowest failing rank's.
 * Each row fails some ranks of 4 with the given codes (0: that rank is
 * fine); want is the rank whose message the summary must show. */
static void test_root_cause_first(void)
{
    static const struct {
        const char *what;
        int code[4];
        int want;
    } cases[] = {
        {"config beats rank 0's timeout", {DDP_ETIMEOUT, 0, DDP_ECONFIG, DDP_ETIMEOUT}, 2},
        {"not_found beats timeouts", {DDP_ETIMEOUT, DDP_ETIMEOUT, DDP_ETIMEOUT, DDP_ENOT_FOUND}, 3},
        {"addrinuse beats a refused connect", {0, -ECONNREFUSED, -EADDRINUSE, 0}, 2},
        {"an unreachable address beats peer_lost", {DDP_EPEER_LOST, -EHOSTUNREACH, 0, 0}, 1},
        {"peer_lost beats a timeout", {DDP_ETIMEOUT, DDP_ETIMEOUT, DDP_EPEER_LOST, 0}, 2},
        {"config beats not_found", {0, DDP_ENOT_FOUND, DDP_ECONFIG, 0}, 2},
        {"any other error beats a refused connect", {-ECONNREFUSED, DDP_EPROTOCOL, 0, 0}, 1},
        {"equals: the lowest rank", {0, DDP_ECONFIG, DDP_ECONFIG, 0}, 1},
        {"timeouts alone: the lowest rank", {0, DDP_ETIMEOUT, DDP_ETIMEOUT, DDP_ETIMEOUT}, 1},
    };
    ddp_scenario_t *s = parse("scenario \"judge\"\nexpect invariants\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ddp_sim_outcome_t o[4];
        healthy_outcomes(o);
        /* Each order of the outcomes, so the pick cannot lean on it. */
        for (int rot = 0; rot < 4; rot++) {
            ddp_sim_outcome_t in[4];
            char msg[4][96];
            for (int i = 0; i < 4; i++) {
                ddp_sim_outcome_t *x = &in[(i + rot) % 4];
                *x = o[i];
                if (!cases[c].code[i])
                    continue;
                x->rc = 1;
                x->code = cases[c].code[i];
                x->connect_ns = -1;
                snprintf(msg[i], sizeof msg[i], "rank %d failed with %s, naming its cause", i,
                         ddp_err_name(cases[c].code[i]));
                x->message = msg[i];
            }
            ddp_scn_result_t r;
            memset(&r, 0, sizeof r);
            ddp__scenario_judge(s, in, 4, 4, DDP_SIM_DONE, NULL, NULL, 0, &r);
            char want[64];
            snprintf(want, sizeof want, "rank %d failed", cases[c].want);
            int ok = strstr(r.first_error, want) != NULL &&
                     r.first_code == cases[c].code[cases[c].want];
            if (!ok)
                printf("\n  %s (rotation %d): summary shows \"%s\"\n", cases[c].what, rot,
                       r.first_error);
            CU_ASSERT_TRUE(ok);
            /* The summary's classes: the root cause's first, with its count. */
            int wc = cases[c].code[cases[c].want], count = 0;
            for (int i = 0; i < 4; i++)
                count += cases[c].code[i] == wc;
            char cls[64];
            snprintf(cls, sizeof cls, "%s %d", ddp_scn_error_class(wc), count);
            if (strncmp(r.classes, cls, strlen(cls)))
                printf("\n  %s (rotation %d): classes \"%s\", want \"%s...\"\n", cases[c].what,
                       rot, r.classes, cls);
            CU_ASSERT_EQUAL(strncmp(r.classes, cls, strlen(cls)), 0);
        }
    }
    /* The table itself: strictly killed < config < not_found < addrinuse
     * < unreachable < other < refused < peer_lost < timeout < a launcher. */
    static const int order[] = {DDP_EKILLED,    DDP_ECONFIG,   DDP_ENOT_FOUND,
                                -EADDRINUSE,    -EHOSTUNREACH, DDP_EPROTOCOL,
                                -ECONNREFUSED,  DDP_EPEER_LOST, DDP_ETIMEOUT};
    for (size_t i = 1; i < sizeof order / sizeof order[0]; i++)
        CU_ASSERT_TRUE(ddp__scn_cause_tier(order[i - 1]) < ddp__scn_cause_tier(order[i]));
    CU_ASSERT_TRUE(ddp__scn_cause_tier(DDP_ETIMEOUT) < DDP_SCN_LAUNCHER_TIER);
    ddp_scenario_free(s);
}

/* Judges outcomes o (n of them) in order and reversed; 1 when each time
 * the first error holds want (printed when not) with code. */
static int first_error_is(const ddp_scenario_t *s, const ddp_sim_outcome_t *o, int n,
                          const char *want, int code, const char *classes)
{
    int ok = 1;
    for (int rev = 0; rev < 2; rev++) {
        ddp_sim_outcome_t in[5];
        for (int i = 0; i < n; i++)
            in[i] = o[rev ? n - 1 - i : i];
        ddp_scn_result_t r;
        memset(&r, 0, sizeof r);
        ddp__scenario_judge(s, in, n, 4, DDP_SIM_DONE, NULL, NULL, 0, &r);
        if (!strstr(r.first_error, want) || r.first_code != code ||
            strncmp(r.classes, classes, strlen(classes))) {
            printf("\n  first error \"%s\" (%s; classes %s), want \"%s\" (%s; %s...)\n",
                   r.first_error, ddp_err_name(r.first_code), r.classes, want,
                   ddp_err_name(code), classes);
            ok = 0;
        }
    }
    return ok;
}

static void fail_with(ddp_sim_outcome_t *x, int code, const char *msg)
{
    x->rc = 1;
    x->code = code;
    x->connect_ns = -1;
    x->message = msg;
}

/* Root cause first, issue 41: the rank a crash fault killed is named
 * before its victims' lost peers and timeouts (with the fault's line and
 * the rank's phase), and a launcher's "2 of 2 worker process(es) failed"
 * never hides a worker's own error. A rank killed with no crash fault in
 * the scenario (its launcher killed it) is not named. */
static void test_root_cause_killed_and_launcher(void)
{
    ddp_scenario_t *s = parse("scenario \"judge\"\nfault crash ranks=2 phase=\"barrier\"\n"
                              "expect invariants\n");
    ddp_scenario_t *nofault = parse("scenario \"judge\"\nexpect invariants\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(nofault);
    ddp_sim_outcome_t o[5];
    healthy_outcomes(o);
    fail_with(&o[0], DDP_ETIMEOUT, "rank 0 timed out waiting for rank 2");
    fail_with(&o[1], DDP_EPEER_LOST, "rank 1 lost its peer rank 2");
    o[2].state = DDP_SIM_TASK_CRASHED;
    o[2].message = "crashed by a fault";
    snprintf(o[2].phase, sizeof o[2].phase, "barrier");
    CU_ASSERT_TRUE(first_error_is(s, o, 4,
                                  "rank 2, barrier: killed on node 1 by the fault on line 2 "
                                  "(crash); the other ranks' errors",
                                  DDP_EKILLED, "killed 1, peer_lost 1, timeout 1"));
    CU_ASSERT_TRUE(first_error_is(nofault, o, 4, "rank 1 lost its peer", DDP_EPEER_LOST,
                                  "peer_lost 1, timeout 1"));
    /* ddp_spawn: the workers time out, their launcher sums them up */
    healthy_outcomes(o);
    fail_with(&o[1], DDP_ETIMEOUT, "rank 1 timed out: its own first error");
    fail_with(&o[3], DDP_ETIMEOUT, "rank 3 timed out");
    o[4] = o[0];
    o[4].name = "launcher";
    o[4].rank = o[4].world = -1;
    o[4].spawned = 2;
    fail_with(&o[4], DDP_EPEER_LOST, "2 of 2 worker process(es) failed");
    CU_ASSERT_TRUE(first_error_is(nofault, o, 5, "rank 1 timed out: its own first error",
                                  DDP_ETIMEOUT, "timeout 2, peer_lost 1"));
    ddp_scenario_free(s);
    ddp_scenario_free(nofault);
}

/* A rank a pause, stall or late fault held back is the root cause of the
 * others' symptoms (a timeout, a lost peer): named first with the fault's
 * line, the victim's message kept whole after it. Not when the fault
 * acted on nothing, when the held rank's own error is first, when the
 * first error is a cause itself (config), nor for a crash (killed). */
static int held_first_is(const char *faultline, long long hit, int code, int first_rank,
                         const char *want, int want_rank)
{
    char text[512];
    snprintf(text, sizeof text, "scenario \"held\"\nnodes 2\ndevices 2\n%s\nexpect invariants\n",
             faultline);
    ddp_scenario_t *s = parse(text);
    ddp_plan_t *plan = NULL;
    if (!s || ddp_scenario_plan(s, "ddp", 1, &plan) != 0) {
        ddp_scenario_free(s);
        return 0;
    }
    static ddp_scn_result_t r;
    memset(&r, 0, sizeof r);
    r.first_code = code;
    r.first_rank = first_rank;
    snprintf(r.first_error, sizeof r.first_error, "rank %d, barrier: the victim's words",
             first_rank);
    long long hits[1] = {hit};
    ddp__scn_held_first(plan, hits, &r);
    int ok = r.first_rank == want_rank && strstr(r.first_error, want) == r.first_error;
    if (!ok)
        printf("\n  %s: rank %d, \"%s\"; expected rank %d, \"%s...\"\n", faultline,
               r.first_rank, r.first_error, want_rank, want);
    ddp_plan_free(plan);
    ddp_scenario_free(s);
    return ok;
}

static void test_root_cause_held_back(void)
{
    const char *victim = "rank 0, barrier: the victim's words";
    CU_ASSERT_TRUE(held_first_is("fault pause ranks=3 start=0s end=100s", 1, DDP_ETIMEOUT, 0,
                                 "rank 3: held back by the fault on line 4 (pause); the other "
                                 "ranks' errors follow from it, the first: rank 0, barrier: "
                                 "the victim's words", 3));
    CU_ASSERT_TRUE(held_first_is("fault stall ranks=1,3 phase=\"barrier\" end=60s", 2,
                                 DDP_EPEER_LOST, 0, "rank 1, barrier: held back by the fault "
                                 "on line 4 (stall)", 1));
    CU_ASSERT_TRUE(held_first_is("fault late node=1 by=40s", 1, -ECONNREFUSED, 0,
                                 "rank 2 (node 1's ranks): held back by the fault on line 4 "
                                 "(late)", 2));
    /* the fault acted on nothing; the held rank's own error; a cause */
    CU_ASSERT_TRUE(held_first_is("fault pause ranks=3 start=0s end=100s", 0, DDP_ETIMEOUT, 0,
                                 victim, 0));
    CU_ASSERT_TRUE(held_first_is("fault pause ranks=0 start=0s end=100s", 1, DDP_ETIMEOUT, 0,
                                 victim, 0));
    CU_ASSERT_TRUE(held_first_is("fault pause ranks=3 start=0s end=100s", 1, DDP_ECONFIG, 0,
                                 victim, 0));
    CU_ASSERT_TRUE(held_first_is("fault crash ranks=3 phase=\"barrier\"", 1, DDP_ETIMEOUT, 0,
                                 victim, 0));
}

/* The judge's expectations on outcomes made to the measure of each:
 * every rank of the world must connect for `expect ok` (not only those
 * that ran), `match=some` needs a process that matches (not one that
 * could), and `expect fail` needs a failure (an exit 0 without connecting
 * is not one). Each with a control that holds. */
static void test_judge_expectations(void)
{
    static const struct {
        const char *text, *what, *why; /* why: NULL when it holds */
        int n;                         /* outcomes: ranks 0..n-1 of 4 */
        int fails;                     /* this rank failed (-1: none) */
        int exits_zero;                /* this rank exited 0, unconnected */
        int hangs;                     /* this rank hung: killed at the deadline
                                          plus grace (only error=hung accepts it) */
    } cases[] = {
        {"expect ok\n", "4 of 4 connect", NULL, 4, -1, -1, -1},
        {"expect ok\n", "3 of 4 ran, all connected", "expected all 4 ranks to connect, 3 did", 3, -1, -1, -1},
        {"expect fail match=some\n", "one of 4 fails", NULL, 4, 2, -1, -1},
        {"expect fail match=some\n", "none fails", "expected some process to match (match=some), none did", 4, -1, -1, -1},
        {"expect fail ranks=1\n", "rank 1 fails", NULL, 4, 1, -1, -1},
        {"expect fail ranks=1\n", "rank 1 exits 0 unconnected", "expected rank 1 to fail, but it exited 0 without connecting", 4, -1, 1, -1},
        {"expect fail ranks=1\nexpect ok ranks=0,2,3\n", "rank 1 hung, any class", "rank 1 hung", 4, -1, -1, 1},
        {"expect fail ranks=1 error=timeout\nexpect ok ranks=0,2,3\n", "rank 1 hung, timeout", "rank 1 hung", 4, -1, -1, 1},
        {"expect invariants\n", "rank 1 hung, invariants only", "rank 1 hung", 4, -1, -1, 1},
        {"expect fail ranks=1 error=timeout|hung\nexpect ok ranks=0,2,3\n", "rank 1 hung, named", NULL, 4, -1, -1, 1},
        {"expect fail ranks=1 error=hung\nexpect ok ranks=0,2,3\n", "rank 1 hung, named alone", NULL, 4, -1, -1, 1},
    };
    CU_ASSERT_STRING_EQUAL(ddp_scn_error_class(DDP_EHUNG), "hung");
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char text[256];
        snprintf(text, sizeof text, "scenario \"judge\"\n%s", cases[c].text);
        ddp_scenario_t *s = parse(text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        ddp_sim_outcome_t o[4];
        healthy_outcomes(o);
        for (int i = 0; i < 4; i++) {
            if (i == cases[c].fails) {
                o[i].rc = 1;
                o[i].code = DDP_ETIMEOUT;
                o[i].connect_ns = -1;
                o[i].message = "store connect to 10.0.0.1:29500: timed out after 30 s";
            }
            if (i == cases[c].exits_zero)
                o[i].connect_ns = -1;
            if (i == cases[c].hangs) {
                o[i].rc = o[i].code = DDP_EHUNG;
                o[i].connect_ns = -1;
                o[i].message = "hung: still running at the scenario's deadline plus 30 s of "
                               "grace: killed";
            }
        }
        ddp_scn_result_t r;
        memset(&r, 0, sizeof r);
        ddp__scenario_judge(s, o, cases[c].n, 4, DDP_SIM_DONE, NULL, NULL, 0, &r);
        int ok = cases[c].why ? !r.expect_ok && strstr(r.why, cases[c].why) != NULL
                              : r.expect_ok == 1;
        if (!ok)
            printf("\n  %s: %s: expectations %s, why \"%s\"\n", cases[c].text, cases[c].what,
                   r.expect_ok ? "held" : "failed", r.why);
        CU_ASSERT_TRUE(ok);
        ddp_scenario_free(s);
    }
}

/* End to end: a custom connection that misreports its rank (rank 3 says
 * it is rank 1 once connected) passes `expect ok`, every rank connected,
 * and the judge names the duplicate. */
static int misrank_init(const ddp_plugin_t *self, ddp_ctx_t *ctx, ddp_cluster_t *env,
                        int rank, int world)
{
    int rc = ddp_plugin_default_init_ddp_connection(self, ctx, env, rank, world);
    if (rc == 0 && rank == 3) {
        ddp_ident_set_rank(1);
        ddp_ident_set_phase("connected");
    }
    return rc;
}

static void test_misreported_rank(void)
{
    static const ddp_plugin_t misrank = {.name = "test-misrank", .init_ddp_connection = misrank_init};
    check_planted_caught(&misrank, "both have rank 1");
}

/* `ddpsim run SCENARIO --accelerator ddp_hpc --junit FILE`, in-process
 * (where plugin, registered here, is known), on a scenario of the given
 * text: its exit status, its stdout and stderr into out, the JUnit XML
 * into xml. */
static int run_with_junit(const ddp_plugin_t *plugin, const char *scenario, char *out,
                          size_t nout, char *xml, size_t nxml)
{
    if (!ddp_plugin_find(plugin->name) && ddp_plugin_register(plugin) != 0)
        return -1;
    char dir[] = "/tmp/ddp-junit-XXXXXX";
    xml[0] = '\0';
    if (!mkdtemp(dir))
        return -1;
    char scn[600], junit[600], args[1400];
    snprintf(scn, sizeof scn, "%s/s.scn", dir);
    snprintf(junit, sizeof junit, "%s/j.xml", dir);
    FILE *f = fopen(scn, "w");
    if (f) {
        fputs(scenario, f);
        fclose(f);
    }
    snprintf(args, sizeof args, "run %s --accelerator ddp_hpc --junit %s", scn, junit);
    int rc = ddp_test_cmd_inproc(ddp_cmd_run, args, out, nout);
    f = fopen(junit, "r");
    if (f) {
        size_t len = fread(xml, 1, nxml - 1, f);
        xml[len] = '\0';
        fclose(f);
    }
    remove(scn);
    remove(junit);
    rmdir(dir);
    return rc;
}

/* What CI reads of a run whose expectations held and whose invariants
 * broke (the leaky plugin): the exit status 1, the counts line, and a
 * JUnit <failure> with the invariant. */
static void test_junit_invariant_failure(void)
{
    static const ddp_plugin_t leaky = {.name = "test-leaky-junit",
                                       .init_ddp_connection = leaky_init};
    static char out[1 << 15], xml[1 << 15];
    CU_ASSERT_EQUAL(run_with_junit(&leaky, "scenario \"leak\"\nplugin test-leaky-junit\nexpect ok\n",
                                   out, sizeof out, xml, sizeof xml), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "0 ok, 1 failed"));
    CU_ASSERT_PTR_NOT_NULL(strstr(xml, "tests=\"1\" failures=\"1\""));
    const char *fail = strstr(xml, "<failure message=\"");
    CU_ASSERT_PTR_NOT_NULL(fail);
    CU_ASSERT_TRUE(fail && strstr(fail, "socket(s) still open"));
}

/* A plugin whose error message holds what XML must not carry raw: a
 * quote, markup, an ampersand and a terminal colour escape. */
static int noisy_init(const ddp_plugin_t *self, ddp_ctx_t *ctx, ddp_cluster_t *env,
                      int rank, int world)
{
    (void)self, (void)ctx, (void)env, (void)rank, (void)world;
    return ddp_err_set(DDP_ECONFIG, "bad \"value\" <x/> & a \x1b[31mcolour\x1b[0m escape");
}

/* The JUnit file stays XML whatever a message holds: quotes, '<' and '&'
 * escaped, control bytes (but newline and tab) dropped, so that the
 * failure's message attribute ends where it should and CI can read the
 * file. */
static void test_junit_escapes_messages(void)
{
    static const ddp_plugin_t noisy = {.name = "test-noisy-junit",
                                       .init_ddp_connection = noisy_init};
    static char out[1 << 15], xml[1 << 15];
    CU_ASSERT_EQUAL(run_with_junit(&noisy, "scenario \"noisy\"\nplugin test-noisy-junit\nexpect ok\n",
                                   out, sizeof out, xml, sizeof xml), 1);
    int bad_bytes = 0;
    for (const unsigned char *c = (const unsigned char *)xml; *c; c++)
        bad_bytes += *c < 0x20 && *c != '\n' && *c != '\t';
    CU_ASSERT_EQUAL(bad_bytes, 0);
    const char *msg = strstr(xml, "<failure message=\"");
    CU_ASSERT_PTR_NOT_NULL_FATAL(msg);
    msg += strlen("<failure message=\"");
    const char *end = strchr(msg, '"'); /* the attribute's end: then the tag's */
    CU_ASSERT_TRUE_FATAL(end && end[1] == '>');
    char attr[2048];
    snprintf(attr, sizeof attr, "%.*s", (int)(end - msg), msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(attr, "bad &quot;value&quot; &lt;x/&gt; &amp; a [31mcolour"));
    CU_ASSERT_PTR_NULL(strstr(xml, "\"value\""));
}

/* A user plugin with phases of its own: after the default connection it
 * enters "handshake", then "warm up", as a custom init would. */
static int phased_init(const ddp_plugin_t *self, ddp_ctx_t *ctx, ddp_cluster_t *env,
                       int rank, int world)
{
    int rc = ddp_plugin_default_init_ddp_connection(self, ctx, env, rank, world);
    if (rc == 0) {
        ddp_ident_set_phase("handshake");
        ddp_ident_set_phase("warm up");
    }
    return rc;
}
static const char *const phased_phases[] = {"handshake", "warm up", NULL};
static const ddp_plugin_t phased = {.name = "test-phased", .init_ddp_connection = phased_init,
                                    .phases = phased_phases};
static const char *const long_phases[] = {
    "a phase whose name is longer than the forty-seven characters kept", NULL};
static const ddp_plugin_t long_named = {.name = "test-long-phase", .phases = long_phases};

/* Each text bad[i][0] is refused with bad[i][1] in its error. */
static void expect_parse_errors(const char *const bad[][2], size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char err[1024] = "";
        ddp_scenario_t *b = NULL;
        CU_ASSERT_EQUAL(ddp_scenario_parse(bad[i][0], "inline.scn", NULL, &b, err, sizeof err),
                        DDP_ECONFIG);
        if (!strstr(err, bad[i][1]))
            printf("\n  case %zu: want \"%s\" in: %s\n", i, bad[i][1], err);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, bad[i][1]));
        ddp_scenario_free(b);
    }
}

/* Issue 44: a million simulated ranks are 16,384 nodes of 64; the node
 * count was capped at 4,096 (262,144 ranks). */
static void test_nodes_up_to_16384(void)
{
    ddp_scenario_t *s = parse("scenario \"x\"\nnodes 16384\ndevices 64\nexpect ok\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(s->nodes, 16384);
    ddp_scenario_free(s);
    static const char *const bad[][2] = {
        {"scenario \"x\"\nnodes 16385\nexpect ok\n", "inline.scn:2:7"},
        {"scenario \"x\"\nnodes 16385\nexpect ok\n", "a node count"},
    };
    expect_parse_errors(bad, sizeof bad / sizeof bad[0]);
}

/* The parser accepts a plugin's declared phases (before or after its plugin
 * line) and only for the plugin the scenario runs; a crash aimed at one
 * fires when the plugin enters it, under every accelerator. */
static void test_plugin_phases(void)
{
    CU_ASSERT_EQUAL(ddp_plugin_register(&phased), 0);
    CU_ASSERT_EQUAL(ddp_plugin_register(&long_named), 0);
    static const char *const ok[] = {
        "scenario \"x\"\nplugin test-phased\nfault crash ranks=1 phase=\"handshake\"\n"
        "expect crashed ranks=1\nexpect invariants\n",
        "scenario \"x\"\nfault crash ranks=1 phase=\"handshake\"\nplugin test-phased\n"
        "expect crashed ranks=1\nexpect invariants\n",
    };
    for (size_t i = 0; i < 2; i++) {
        ddp_scenario_t *s = parse(ok[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        CU_ASSERT_STRING_EQUAL(s->faults[0].phase, "handshake");
        CU_ASSERT_TRUE(round_trips(s, ok[i]));
        for (size_t a = 0; i == 0 && a < ddp_accel_count(); a++) {
            const char *acc = ddp_accel_at(a)->name;
            ddp_scn_result_t r;
            CU_ASSERT_EQUAL(ddp_scenario_run(s, acc, NULL, &r), 0);
            if (!r.pass || r.crashed != 1)
                printf("\n  %s: crashed %d: %s\n", acc, r.crashed, r.why);
            CU_ASSERT_TRUE(r.pass);
            CU_ASSERT_EQUAL(r.crashed, 1);
        }
        ddp_scenario_free(s);
    }
    /* Without the fault the plugin connects cleanly: the crash is the fault's. */
    ddp_scenario_t *s = parse("scenario \"x\"\nplugin test-phased\nexpect ok\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    ddp_scn_result_t r;
    CU_ASSERT_EQUAL(ddp_scenario_run(s, "ddp_hpc", NULL, &r), 0);
    CU_ASSERT_TRUE(r.pass);
    ddp_scenario_free(s);
    static const char *const bad[][2] = {
        {"scenario \"x\"\nfault crash ranks=1 phase=\"handshake\"\nexpect invariants\n",
         "inline.scn:2:27: expected a phase the scenario's plugin \"default\" enters, got "
         "\"handshake\", a phase of plugin \"test-phased\" (add `plugin test-phased`"},
        {"scenario \"x\"\nfault crash ranks=1 phase=\"handshake\"\nplugin subgroups\n"
         "expect invariants\n",
         "inline.scn:2:27: expected a phase the scenario's plugin \"subgroups\" enters"},
        {"scenario \"x\"\nplugin subgroups\nfault crash ranks=1 phase=\"handshake\"\n"
         "expect invariants\n",
         "inline.scn:3:27: expected a phase (\"init_ddp_connection\""},
        {"scenario \"x\"\nplugin test-phased\nfault crash ranks=1 phase=\"lunch\"\n"
         "expect invariants\n",
         "\"teardown\"; or one plugin \"test-phased\" declares: \"handshake\", \"warm up\"), "
         "got \"lunch\""},
        {"scenario \"x\"\nfault crash ranks=1 phase=\"lunch\"\nexpect invariants\n",
         "; or one a registered plugin declares), got \"lunch\""},
        {"scenario \"x\"\nplugin test-long-phase\nfault crash ranks=0 phase=\"a phase whose "
         "name is longer than the forty-seven characters kept\"\nexpect invariants\n",
         "expected a phase name of at most 47 characters"},
    };
    expect_parse_errors(bad, sizeof bad / sizeof bad[0]);
}

/* within= from=join (issue 31): a bound counted from each rank's first
 * store contact, so a program's start-up does not count; from the start
 * where a rank never made one; always so for a foreign program. Parse errors at their column; the line
 * round-trips; the simulator records when each rank's store client
 * connected. */
static void test_within_from_join(void)
{
    static const char *const bad[][2] = {
        {"scenario \"x\"\nexpect ok within=5s from=start\n",
         "inline.scn:2:26: expected from=join"},
        {"scenario \"x\"\nexpect ok from=join\n",
         "inline.scn:2:11: expected within= with from=join"},
    };
    expect_parse_errors(bad, sizeof bad / sizeof bad[0]);
    ddp_scenario_t *s = parse("scenario \"j\"\nexpect ok within=1500ms from=join\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(s->expect[0].from_join, 1);
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    CU_ASSERT_EQUAL(ddp_scenario_write(s, m), 0);
    fclose(m);
    CU_ASSERT_PTR_NOT_NULL(text ? strstr(text, "within=1500ms from=join") : NULL);
    free(text);
    /* ended at 2 s: 1.5 s from a contact at 1 s holds; from none (0) it does not */
    for (int joined = 0; joined < 2; joined++) {
        ddp_sim_outcome_t o[4];
        healthy_outcomes(o);
        for (int i = 0; i < 4; i++)
            o[i].join_ns = joined ? DDP_NS_PER_S : 0;
        ddp_scn_result_t r;
        memset(&r, 0, sizeof r);
        ddp__scenario_judge(s, o, 4, 4, DDP_SIM_DONE, NULL, NULL, 0, &r);
        CU_ASSERT_EQUAL(r.expect_ok, joined);
        if (!joined)
            CU_ASSERT_PTR_NOT_NULL(strstr(r.why, "to end within 1.500 s, it ended at 2.000 s"));
    }
    ddp_scenario_free(s);
    /* A foreign program's outcome: within= counts from its first store
     * contact without from=join, and mentions= (ddpsim's words) do not
     * apply; ddpsim's own process is held to both. */
    s = parse("scenario \"f\"\nexpect fail error=timeout mentions=\"never joined\" "
              "within=1500ms\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    for (int foreign = 0; foreign < 2; foreign++) {
        ddp_sim_outcome_t o[4];
        healthy_outcomes(o);
        for (int i = 0; i < 4; i++) {
            o[i].rc = 1;
            o[i].code = DDP_ETIMEOUT;
            o[i].connect_ns = -1;
            o[i].join_ns = DDP_NS_PER_S;
            o[i].foreign = foreign;
            o[i].message = "RuntimeError: Socket Timeout";
        }
        ddp_scn_result_t r;
        memset(&r, 0, sizeof r);
        ddp__scenario_judge(s, o, 4, 4, DDP_SIM_DONE, NULL, NULL, 0, &r);
        CU_ASSERT_EQUAL(r.expect_ok, foreign);
        if (r.expect_ok != foreign)
            printf("\n  foreign %d: %s\n", foreign, r.why);
    }
    ddp_scenario_free(s);
    /* the simulator: every rank's store client connected after the master's
     * late start, so the bound holds from there and not from 0 */
    s = parse("scenario \"late\"\nmaster_late 20s\nexpect ok within=10s from=join\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    ddp_scn_result_t r;
    CU_ASSERT_EQUAL(ddp_scenario_run(s, "ddp", NULL, &r), 0);
    if (!r.pass)
        printf("\n  master_late, from=join: %s\n", r.why);
    CU_ASSERT_TRUE(r.pass);
    ddp_scenario_free(s);
}

/* crash node=N (issue 31): silent by default, as a power loss: its
 * sockets close without a word and its peers wait for their deadline
 * (timeout); mode=kill: its processes die and their sockets close, so the
 * peers read EOF at their next step (peer_lost). mode= belongs to a node's
 * crash alone, at its column; the line round-trips. */
static void test_crash_node_modes(void)
{
    static const char *const bad[][2] = {
        {"scenario \"x\"\nfault crash ranks=1 mode=kill\nexpect invariants\n",
         "inline.scn:2:21: expected mode= only on a node's crash"},
        {"scenario \"x\"\nfault pause node=1 end=1s mode=kill\nexpect invariants\n",
         "inline.scn:2:27: expected mode= only on a node's crash"},
        {"scenario \"x\"\nfault crash node=1 mode=loud\nexpect invariants\n",
         "inline.scn:2:25: expected mode=silent"},
    };
    expect_parse_errors(bad, sizeof bad / sizeof bad[0]);
    for (int kill = 0; kill < 2; kill++) {
        /* silent (said explicitly): rank 0 waits for its deadline; kill:
         * it reads its ring predecessor's EOF */
        char text[400];
        snprintf(text, sizeof text,
                 "scenario \"node 1 dies after init\"\ntimeout 20s\ntrain 2s\n"
                 "fault crash node=1 start=barrier+100ms mode=%s\nexpect crashed ranks=2-3\n"
                 "expect fail ranks=0 error=%s\n",
                 kill ? "kill" : "silent", kill ? "peer_lost" : "timeout");
        ddp_scenario_t *s = parse(text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        CU_ASSERT_EQUAL(s->faults[0].kill_mode, kill);
        char *out = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&out, &len);
        CU_ASSERT_EQUAL(ddp_scenario_write(s, m), 0);
        fclose(m);
        CU_ASSERT_EQUAL(out && strstr(out, "mode=kill") != NULL, kill);
        free(out);
        ddp_scn_result_t r;
        CU_ASSERT_EQUAL(ddp_scenario_run(s, "ddp_hpc", NULL, &r), 0);
        if (!r.pass)
            printf("\n  mode %s: %s\n", kill ? "kill" : "silent", r.why);
        CU_ASSERT_TRUE(r.pass);
        ddp_scenario_free(s);
    }
}

/* Same seed, same trace; another seed, another schedule. */
static void test_determinism(void)
{
    ddp_scenario_t *s = parse("scenario \"d\"\nnodes 3\ndevices 2\nfault reset port=29500 "
                              "count=2\nfault delay delay=3ms\nexpect invariants\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    ddp_scn_result_t a, b, c;
    ddp_scn_run_opts_t o = {.seed = 11};
    CU_ASSERT_EQUAL(ddp_scenario_run(s, "ddp", &o, &a), 0);
    CU_ASSERT_EQUAL(ddp_scenario_run(s, "ddp", &o, &b), 0);
    o.seed = 12;
    CU_ASSERT_EQUAL(ddp_scenario_run(s, "ddp", &o, &c), 0);
    CU_ASSERT_EQUAL(a.trace_hash, b.trace_hash);
    CU_ASSERT_NOT_EQUAL(a.trace_hash, c.trace_hash);
    ddp_scenario_free(s);
}

static void test_cli(void)
{
    char bin[400];
    if (!ddp_test_need_ddpsim(bin, sizeof bin))
        return;
    char out[16384];
    CU_ASSERT_EQUAL(run_cmd("run scenarios/clean-start.scn scenarios/port-taken.scn "
                            "--junit build/test-scenarios.xml --no-progress",
                            out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "12 run(s) of 2 scenario file(s): 12 ok, 0 failed"));
    FILE *f = fopen("build/test-scenarios.xml", "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    size_t len = fread(out, 1, sizeof out - 1, f);
    out[len] = '\0';
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "<testsuite name=\"scenarios\" tests=\"12\" failures=\"0\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "classname=\"scenarios/clean-start\" "
                                       "name=\"clean-start[ddp]\""));
    /* A failing expectation: exit 1, the row and why. */
    f = fopen("build/test-wrong.scn", "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("scenario \"wrong\"\nport_taken\nexpect ok\n", f);
    fclose(f);
    CU_ASSERT_EQUAL(run_cmd("run build/test-wrong.scn --accelerator ddp2", out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "FAIL"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "why: line 3: expected rank 0 to connect"));
    /* replay prints the hash, identical twice. */
    char out2[16384];
    CU_ASSERT_EQUAL(run_cmd("replay scenarios/crash-joining.scn --seed 5 --accelerator ddp",
                            out, sizeof out), 0);
    CU_ASSERT_EQUAL(run_cmd("replay scenarios/crash-joining.scn --seed 5 --accelerator ddp",
                            out2, sizeof out2), 0);
    /* Same rows and hash; only the closing wall time may differ. */
    char *h1 = strstr(out, "trace hash "), *h2 = strstr(out2, "trace hash ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(h1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h2);
    CU_ASSERT_EQUAL(strncmp(out, out2, (size_t)(h1 - out) + 27), 0);
    CU_ASSERT_EQUAL(run_cmd("list faults", out, sizeof out), 0);
    /* one line per row of DDP_FAULT_KINDS: its name and executors */
    char want[2048] = "", ex[160];
    for (int k = 0; k < DDP_FAULT_KIND_COUNT; k++) {
        const ddp_fault_kind_info_t *ki = ddp_fault_kind_info((ddp_fault_kind_t)k);
        size_t at = strlen(want);
        snprintf(want + at, sizeof want - at, "%-10s %s\n", ki->name,
                 ddp_fault_exec_names(ki->exec, ex, sizeof ex));
    }
    CU_ASSERT_STRING_EQUAL(out, want);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nlate       sim, runner\nstall      sim, inproc\n"));
    CU_ASSERT_EQUAL(run_cmd("list nonsense", out, sizeof out), 2);
    CU_ASSERT_EQUAL(run_cmd("run --help", out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage: ddpsim run FILE..."));
    CU_ASSERT_EQUAL(run_cmd("run scenarios/clean-start.scn --jobs 0", out, sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--jobs"));
    CU_ASSERT_EQUAL(run_cmd("run scenarios/clean-start.scn scenarios/master-late.scn --jobs 2",
                            out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "12 ok, 0 failed"));
}

DDP_SUITE("scenario", NULL, NULL,
          {"report rows: printf's bytes without printf", test_report_rows_printf_bytes},
          {"malformed files: file:line:col errors (library)", test_bad_inputs_library},
          {"malformed files: ddpsim run exits 2 with the error", test_bad_inputs_cli},
          {"scenario files: bounded reads of regular files only", test_bounded_loads},
          {"a second rank 0 is named a duplicate, not a wrong address",
           test_second_rank0_is_duplicate},
          {"an elastic endpoint of this host's address hosts the store",
           test_endpoint_address_hosts_store},
          {"corpus round-trips: parse -> write -> parse", test_round_trip},
          {"writer: what it used to lose", test_writer_cases},
          {"generated scenarios round-trip", test_round_trip_generated},
          {"bundled scenarios x accelerators meet their expectations", test_bundled_library},
          {"stack margin: the deepest task stack of the bundled library is at most 2/3 of "
           "the default", test_stack_margin},
          {"wrong expectations are reported with their line", test_wrong_expectations_fail},
          {"error=A|B: any one of the classes holds", test_error_alternatives},
          {"train D: every rank trains D, then ends cleanly", test_train},
          {"leaked socket invariant", test_leak_invariant},
          {"the judge: every invariant, broken one at a time", test_judge_invariants},
          {"the judge: two jobs, each judged on its own", test_judge_two_jobs},
          {"torchrun-elastic: agents, restarts, bad PET_* variables, timeouts", test_elastic},
          {"crash node= ranks=: those ranks of the node; node= alone: the node",
           test_crash_node_and_ranks},
          {"the judge: ok means the world, some means one, fail means a failure, hung only when named", test_judge_expectations},
          {"within= from=join counts from each rank's first store contact", test_within_from_join},
          {"crash node= is silent, mode=kill closes the node's sockets", test_crash_node_modes},
          {"the judge: the summary shows the root cause first", test_root_cause_first},
          {"the judge: a rank a fault killed first, a launcher's aggregate last",
           test_root_cause_killed_and_launcher},
          {"the judge: a rank a pause, stall or late fault held back is the root cause",
           test_root_cause_held_back},
          {"a misreported rank: expectations hold, the judge names it", test_misreported_rank},
          {"JUnit: a run whose invariants broke is a failure (in-process)",
           test_junit_invariant_failure},
          {"JUnit: messages escaped, control bytes dropped (in-process)",
           test_junit_escapes_messages},
          {"plugin-declared phases: parsed, validated, faulted", test_plugin_phases},
          {"nodes: up to 16,384 (a million ranks at 64 a node)", test_nodes_up_to_16384},
          {"same seed same trace, other seed other trace", test_determinism},
          {"ddpsim run / replay / list", test_cli})
