/* tests/test_explore.c — `ddpsim explore` (issue #5): deterministic draws,
 * no invariant violation on the shipped code, and a planted bug (a wait
 * without deadline) found, shrunk to at most 2 faults and replayed
 * identically from the written scenario file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/plugin.h"
#include "ddp/scenario.h"
#include "ddp/store.h"
#include "ddp/sys.h"
#include "test.h"
#include "../tools/cmds.h"

static char *scenario_text(const ddp_scenario_t *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(ddp_scenario_write(s, m), 0);
    fclose(m);
    return buf;
}

/* Explores with o into a fresh directory made from the template dir
 * (--out) and returns what it printed (malloc'd). */
static char *explore_out(ddp_explore_opts_t *o, char *dir, ddp_explore_stats_t *st)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    char *buf = NULL;
    size_t len = 0;
    FILE *log = open_memstream(&buf, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(log);
    o->log = log;
    o->out_dir = dir;
    CU_ASSERT_EQUAL(ddp_explore(o, st), 0);
    fclose(log);
    o->log = NULL;
    return buf;
}

/* (1) Run i of seed S is the same scenario every time it is drawn, whatever
 * was drawn before; the written text loads back to the same text. */
static void test_draw_deterministic(void)
{
    ddp_explore_opts_t o = {.ranks = 16, .seed = 42};
    int with_faults = 0, differ = 0, accel_seen[6] = {0};
    static const char *const accels[] = {"ddp", "ddp_spawn", "ddp_cpu",
                                         "ddp2", "ddp_hpc", "ddp_cpu_hpc"};
    char *prev = NULL;
    for (int i = 0; i < 40; i++) {
        char a1[16], a2[16];
        ddp_scenario_t *s1 = ddp_explore_draw(&o, i, a1, sizeof a1);
        ddp_scenario_t *s2 = ddp_explore_draw(&o, i, a2, sizeof a2);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s1);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s2);
        CU_ASSERT_STRING_EQUAL(a1, a2);
        char *t1 = scenario_text(s1), *t2 = scenario_text(s2);
        CU_ASSERT_STRING_EQUAL(t1, t2);
        /* The world is split over 1..4 nodes; ddp2's is the node count. */
        CU_ASSERT(s1->nodes >= 1 && s1->nodes <= 4);
        CU_ASSERT_EQUAL(s1->nodes * s1->devices, 16);
        CU_ASSERT(s1->nfaults >= 0 && s1->nfaults <= 3);
        CU_ASSERT_EQUAL(s1->nexpect, 1);
        CU_ASSERT_EQUAL(s1->expect[0].kind, DDP_EXPECT_INVARIANTS);
        CU_ASSERT(ddp_scenario_has_accel(s1, a1));
        for (int k = 0; k < 6; k++)
            accel_seen[k] |= !strcmp(a1, accels[k]);
        with_faults += s1->nfaults > 0;
        /* The file format round-trips it. */
        ddp_scenario_t *p = NULL;
        char err[512] = "";
        CU_ASSERT_EQUAL(ddp_scenario_parse(t1, "drawn.scn", NULL, &p, err, sizeof err), 0);
        if (err[0])
            fprintf(stderr, "\n%s\n%s", err, t1);
        if (p) {
            char *t3 = scenario_text(p);
            CU_ASSERT_STRING_EQUAL(t1, t3);
            free(t3);
            ddp_scenario_free(p);
        }
        differ += prev && strcmp(prev, t1) != 0;
        free(prev);
        prev = t1;
        free(t2);
        ddp_scenario_free(s1);
        ddp_scenario_free(s2);
    }
    free(prev);
    CU_ASSERT(with_faults >= 20);
    CU_ASSERT_EQUAL(differ, 39);
    for (int k = 0; k < 6; k++)
        CU_ASSERT(accel_seen[k]);
    /* Another seed draws other runs; a fixed accelerator and kind hold. */
    ddp_explore_opts_t o2 = {.ranks = 6, .seed = 43, .accelerator = "ddp2",
                             .kinds = 1u << DDP_FAULT_PARTITION, .max_faults = 5};
    for (int i = 0; i < 20; i++) {
        char a[16];
        ddp_scenario_t *s = ddp_explore_draw(&o2, i, a, sizeof a);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        CU_ASSERT_STRING_EQUAL(a, "ddp2");
        CU_ASSERT(s->nfaults <= 5);
        for (int f = 0; f < s->nfaults; f++) {
            CU_ASSERT_EQUAL(s->faults[f].kind, DDP_FAULT_PARTITION);
            CU_ASSERT(s->faults[f].node_set != 0);
            CU_ASSERT_EQUAL(s->faults[f].node_set >> s->nodes, 0);
        }
        ddp_scenario_free(s);
    }
    /* A late master is a timing fault of its own: drawn in about a tenth
     * of the runs of every kind, never when --faults narrowed the kinds. */
    ddp_explore_opts_t narrowed = {.ranks = 8, .seed = 44, .kinds = 1u << DDP_FAULT_REFUSE};
    ddp_explore_opts_t every = {.ranks = 8, .seed = 44};
    int late_narrowed = 0, late_every = 0;
    for (int i = 0; i < 200; i++) {
        char acc[16];
        ddp_scenario_t *x = ddp_explore_draw(&narrowed, i, acc, sizeof acc);
        ddp_scenario_t *y = ddp_explore_draw(&every, i, acc, sizeof acc);
        CU_ASSERT_PTR_NOT_NULL_FATAL(x);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        late_narrowed += x->master_late_ns > 0;
        late_every += y->master_late_ns > 0;
        ddp_scenario_free(x);
        ddp_scenario_free(y);
    }
    CU_ASSERT_EQUAL(late_narrowed, 0);
    CU_ASSERT(late_every >= 5 && late_every <= 40);
    ddp_explore_opts_t none = {.ranks = 4, .seed = 1, .max_faults = -1};
    char a[16];
    ddp_scenario_t *s = ddp_explore_draw(&none, 3, a, sizeof a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(s->nfaults, 0);
    ddp_scenario_free(s);
}

/* (2) The shipped code: no invariant violation. */
static void test_explore_shipped(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *log = open_memstream(&buf, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(log);
    ddp_explore_opts_t o = {.ranks = 16, .runs = 30, .seed = 1, .log = log};
    ddp_explore_stats_t st;
    CU_ASSERT_EQUAL(ddp_explore(&o, &st), 0);
    fclose(log);
    CU_ASSERT_EQUAL(st.runs, 30);
    CU_ASSERT_EQUAL(st.violations, 0);
    if (st.violations)
        fprintf(stderr, "\n%s", buf);
    /* Quiet lines: one per 10 % of the runs (with rate and ETA: the
     * fields of harness/progress.h), then the summary. */
    const char *q = strstr(buf, "explore: 3/30 runs (10%), ");
    CU_ASSERT_PTR_NOT_NULL(q);
    if (q) {
        const char *eol = strchr(q, '\n');
        const char *rate = strstr(q, " runs/s, ETA "), *v = strstr(q, "; 0 violation(s)");
        CU_ASSERT(rate && eol && rate < eol);
        CU_ASSERT(v && eol && v < eol);
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "explore: 30/30 runs (100%), "));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "explore: 30 run(s) of 16 rank(s), seed 1: 0 "
                                       "violation(s)"));
    free(buf);
}

/* (3) The planted bug: a plugin whose error path has a wait without a
 * deadline. When its default connection fails, a rank other than 0 listens
 * for the master to "call back" and accepts with DDP_DEADLINE_NEVER; no one
 * ever connects. A clean run never takes that path. A fault that makes such
 * a rank fail does: the run ends as a deadlock once everyone else is done,
 * or the rank's launcher kills it past the deadline. (Rank 0 is left out:
 * its store-server thread polls every 50 ms, so a hang there runs to the
 * simulator's 4 h time limit, found too but slowly under the sanitizers.) */
/* The bug: a wait for a "call back" that never comes, without a deadline. */
static void wait_for_call_back(ddp_ctx_t *ctx)
{
    ddp_errctx_t saved = *ddp_err_ctx();
    ddp_addr_t any;
    ddp_addr_parse("0.0.0.0", 0, &any);
    int l = ddp_sys_listen(ctx->sys, &any, 1);
    if (l >= 0) {
        int c = ddp_sys_accept(ctx->sys, l, NULL, DDP_DEADLINE_NEVER); /* the bug */
        if (c >= 0)
            ddp_sys_close(ctx->sys, c);
        ddp_sys_close(ctx->sys, l);
    }
    *ddp_err_ctx() = saved;
}

static int planted_init(const ddp_plugin_t *self, ddp_ctx_t *ctx,
                        ddp_cluster_t *cluster_env, int rank, int world)
{
    int rc = ddp_plugin_default_init_ddp_connection(self, ctx, cluster_env, rank,
                                                    world);
    if (rc && rank != 0)
        wait_for_call_back(ctx);
    return rc;
}

static const ddp_plugin_t planted_plugin = {.name = "planted_hang",
                                            .init_ddp_connection = planted_init};

static int count_faults_in_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += !strncmp(line, "fault ", 6);
    fclose(f);
    return n;
}

static void test_explore_planted(void)
{
    CU_ASSERT_EQUAL_FATAL(ddp_plugin_register(&planted_plugin), 0);
    /* Fault-free, the planted plugin connects and passes. */
    ddp_scenario_t *clean = ddp_scenario_new();
    snprintf(clean->name, sizeof clean->name, "planted, no fault");
    snprintf(clean->plugin, sizeof clean->plugin, "planted_hang");
    clean->expect[0].kind = DDP_EXPECT_INVARIANTS;
    clean->nexpect = 1;
    ddp_scn_result_t cr;
    CU_ASSERT_EQUAL(ddp_scenario_run(clean, "ddp", NULL, &cr), 0);
    CU_ASSERT_EQUAL(cr.invariants_ok, 1);
    CU_ASSERT_EQUAL(cr.ok, 4);
    ddp_scenario_free(clean);

    char dir[] = "/tmp/ddp-explore-XXXXXX";
    /* Seed 6, runs 0..2 of 8 ranks: one of them
     * trips the bug; whichever run does, its files are checked. */
    ddp_explore_opts_t o = {.ranks = 8, .runs = 3, .seed = 6, .plugin = "planted_hang"};
    ddp_explore_stats_t st;
    char *buf = explore_out(&o, dir, &st);
    CU_ASSERT_EQUAL(st.runs, 3);
    CU_ASSERT(st.violations >= 1);
    const char *v = strstr(buf, "VIOLATION in run ");
    CU_ASSERT_PTR_NOT_NULL(v);
    int run = v ? atoi(v + strlen("VIOLATION in run ")) : -1;
    CU_ASSERT(run >= 0 && run < 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "  why: invariant: "));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "replay check: identical"));
    CU_ASSERT_PTR_NULL(strstr(buf, "DIFFERS"));
    if (run < 0 || run >= 3) {
        fprintf(stderr, "\n%s", buf);
        run = 0;
    }
    char path[512], cmd[600];
    snprintf(path, sizeof path, "%s/explore-6-%d.scn", dir, run);
    snprintf(cmd, sizeof cmd, "replay: ddpsim replay %s --seed ", path);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, cmd));

    /* The shrunk file: at most 2 faults; it loads, still violates, and two
     * runs of it give the same trace. */
    char accel[16];
    ddp_scenario_t *drawn = ddp_explore_draw(&o, run, accel, sizeof accel);
    CU_ASSERT_PTR_NOT_NULL_FATAL(drawn);
    int nf = count_faults_in_file(path);
    CU_ASSERT(nf >= 1 && nf <= 2);
    ddp_scenario_t *s = NULL;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(ddp_scenario_load(path, &s, err, sizeof err), 0);
    CU_ASSERT(s->nfaults >= 1 && s->nfaults <= 2);
    CU_ASSERT(s->nfaults <= drawn->nfaults);
    CU_ASSERT(s->nodes * s->devices <= 8);
    CU_ASSERT(ddp_scenario_has_accel(s, accel));
    ddp_scn_result_t r1, r2;
    CU_ASSERT_EQUAL(ddp_scenario_run(s, accel, NULL, &r1), 0);
    CU_ASSERT_EQUAL(ddp_scenario_run(s, accel, NULL, &r2), 0);
    CU_ASSERT_EQUAL(r1.invariants_ok, 0);
    CU_ASSERT_EQUAL(r2.invariants_ok, 0);
    CU_ASSERT_EQUAL(r1.trace_hash, r2.trace_hash);
    CU_ASSERT_NOT_EQUAL(r1.trace_hash, 0);
    /* The shrink keeps the symptom: a deadlock stays a deadlock. */
    const char *why = strstr(buf, "  why: invariant: deadlock");
    if (why && why < strstr(buf, "  shrunk in "))
        CU_ASSERT_PTR_NOT_NULL(strstr(r1.why, "invariant: deadlock"));
    /* ddp_explore_shrink on the shrunk scenario keeps it violating. */
    int steps = -1;
    ddp_scenario_t *again = ddp_explore_shrink(s, accel, &steps);
    CU_ASSERT_PTR_NOT_NULL_FATAL(again);
    CU_ASSERT(steps >= 0);
    CU_ASSERT(again->nfaults <= s->nfaults);
    ddp_scn_result_t r3;
    CU_ASSERT_EQUAL(ddp_scenario_run(again, accel, NULL, &r3), 0);
    CU_ASSERT_EQUAL(r3.invariants_ok, 0);
    ddp_scenario_free(again);
    ddp_scenario_free(s);

    char orig[512];
    snprintf(orig, sizeof orig, "%s/explore-6-%d-original.scn", dir, run);
    CU_ASSERT_EQUAL(count_faults_in_file(orig), drawn->nfaults);
    ddp_scenario_free(drawn);
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/explore-6-%d.scn", dir, i);
        unlink(path);
        snprintf(path, sizeof path, "%s/explore-6-%d-original.scn", dir, i);
        unlink(path);
        snprintf(path, sizeof path, "%s/explore-6-%d-costliest.scn", dir, i);
        unlink(path);
    }
    CU_ASSERT_EQUAL(rmdir(dir), 0);
    free(buf);
}

/* The command: exit 0 / 1 / 2, and bad input names the option. */
static int run_cmd(const char *args, char *out, size_t n)
{
    return ddp_test_ddpsim(args, 1, out, n);
}

/* (4) A shrink keeps the symptom. Two bugs in one plugin: rank 1 leaks a
 * socket when it connects, and waits without a deadline when it cannot.
 * The scenario refuses rank 1's connects (under ddp_hpc no launcher kills
 * the waiting rank: the run ends as a deadlock),
 * with a delay fault that plays no part. Dropping the refuse fault still
 * gives a violation, the leak, but another one: the shrinker must keep the
 * refuse fault and drop the delay. */
static int two_bugs_init(const ddp_plugin_t *self, ddp_ctx_t *ctx,
                         ddp_cluster_t *cluster_env, int rank, int world)
{
    int rc = ddp_plugin_default_init_ddp_connection(self, ctx, cluster_env, rank,
                                                    world);
    if (rank != 1)
        return rc;
    if (rc)
        wait_for_call_back(ctx);
    else
        ddp_test_leak_store_connection(ctx, cluster_env);
    return rc;
}

static void test_shrink_keeps_symptom(void)
{
    static const ddp_plugin_t two_bugs = {.name = "planted_two_bugs",
                                          .init_ddp_connection = two_bugs_init};
    CU_ASSERT_EQUAL_FATAL(ddp_plugin_register(&two_bugs), 0);
    char err[512] = "";
    ddp_scenario_t *s = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_scenario_parse("scenario \"two bugs\"\n"
                                             "plugin planted_two_bugs\n"
                                             "timeout 10s\n"
                                             "fault delay delay=5ms\n"
                                             "fault refuse ranks=1\n"
                                             "expect invariants\n",
                                             "two-bugs.scn", NULL, &s, err, sizeof err),
                          0);
    ddp_scn_result_t r0, r1;
    CU_ASSERT_EQUAL_FATAL(ddp_scenario_run(s, "ddp_hpc", NULL, &r0), 0);
    CU_ASSERT_FALSE(r0.invariants_ok);
    CU_ASSERT_PTR_NULL(strstr(r0.why, "(leaked)"));
    /* Without the refuse fault: the other bug. */
    ddp_scenario_t *clean = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_scenario_parse("scenario \"two bugs, no fault\"\n"
                                             "plugin planted_two_bugs\n"
                                             "timeout 10s\n"
                                             "expect invariants\n",
                                             "two-bugs-clean.scn", NULL, &clean, err,
                                             sizeof err),
                          0);
    CU_ASSERT_EQUAL(ddp_scenario_run(clean, "ddp_hpc", NULL, &r1), 0);
    CU_ASSERT_FALSE(r1.invariants_ok);
    CU_ASSERT_PTR_NOT_NULL(strstr(r1.why, "(leaked)"));
    ddp_scenario_free(clean);

    int steps = -1;
    ddp_scenario_t *shrunk = ddp_explore_shrink(s, "ddp_hpc", &steps);
    CU_ASSERT_PTR_NOT_NULL_FATAL(shrunk);
    CU_ASSERT_EQUAL(shrunk->nfaults, 1);
    CU_ASSERT(shrunk->nfaults < 1 || shrunk->faults[0].kind == DDP_FAULT_REFUSE);
    CU_ASSERT_EQUAL(ddp_scenario_run(shrunk, "ddp_hpc", NULL, &r1), 0);
    CU_ASSERT_FALSE(r1.invariants_ok);
    CU_ASSERT_PTR_NULL(strstr(r1.why, "(leaked)"));
    /* The same invariant: the text up to the first detail agrees. */
    const char *a = strstr(r0.why, "invariant: "), *b = strstr(r1.why, "invariant: ");
    CU_ASSERT_TRUE(a && b && strncmp(a, b, 20) == 0);
    if (!(a && b && strncmp(a, b, 20) == 0))
        printf("\n  original: %s\n  shrunk: %s\n", r0.why, r1.why);
    ddp_scenario_free(shrunk);
    ddp_scenario_free(s);
}

static void test_cmd_explore(void)
{
    char bin[400];
    if (!ddp_test_need_ddpsim(bin, sizeof bin))
        return;
    char out[8192];
    CU_ASSERT_EQUAL(run_cmd("explore --ranks 4 --runs 10 --seed 3 --no-progress", out,
                            sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "explore: 10 run(s) of 4 rank(s), seed 3: 0 "
                                       "violation(s)"));
    CU_ASSERT_EQUAL(run_cmd("explore --help", out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage: ddpsim explore"));
    CU_ASSERT_EQUAL(run_cmd("explore --ranks 0", out, sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--ranks \"0\""));
    CU_ASSERT_EQUAL(run_cmd("explore --faults crash,bogus", out, sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--faults \"crash,bogus\""));
    CU_ASSERT_EQUAL(run_cmd("explore --accelerator nope", out, sizeof out), 2);
    CU_ASSERT_EQUAL(run_cmd("explore --plugin nope", out, sizeof out), 2);
    CU_ASSERT_EQUAL(run_cmd("explore --runs", out, sizeof out), 2);
    CU_ASSERT_EQUAL(run_cmd("explore --bogus", out, sizeof out), 2);
}

/* The command's exit status when it finds something: 1, for the sweep and
 * for its merged result file (the shipped code has no violation for the
 * ddpsim binary to find, so the command runs here, in-process, where the
 * planted plugin is registered). */
static void test_cmd_explore_finds(void)
{
    if (!ddp_plugin_find("planted_hang"))
        CU_ASSERT_EQUAL_FATAL(ddp_plugin_register(&planted_plugin), 0);
    char dir[] = "/tmp/ddp-explore-XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    char args[512], res[600];
    snprintf(res, sizeof res, "%s/r.json", dir);
    snprintf(args, sizeof args,
             "explore --ranks 8 --runs 3 --seed 6 --plugin planted_hang --no-progress "
             "--results %s", res);
    static char out[1 << 16];
    int rc = ddp_test_cmd_inproc(ddp_cmd_explore, args, out, sizeof out);
    CU_ASSERT_EQUAL(rc, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "VIOLATION in run "));
    snprintf(args, sizeof args, "merge %s", res);
    rc = ddp_test_cmd_inproc(ddp_cmd_merge, args, out, sizeof out);
    CU_ASSERT_EQUAL(rc, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "VIOLATION in run "));
    if (rc != 1)
        printf("\n%s", out);
    remove(res);
    rmdir(dir);
}

/* (4) The costliest run: the first of the most hand-offs among the runs,
 * each run alone again here; the summary names it and --out gets its
 * scenario as drawn. Returns how many runs tie at the most. */
static int check_costliest(ddp_explore_opts_t o)
{
    char dir[] = "/tmp/ddp-explore-XXXXXX";
    ddp_explore_stats_t st;
    char *buf = explore_out(&o, dir, &st);
    uint64_t all = 0, most = 0;
    int first = -1, ties = 0;
    char accel[16], first_accel[16] = "", *want = NULL;
    for (int i = 0; i < o.runs; i++) {
        ddp_scenario_t *s = ddp_explore_draw(&o, i, accel, sizeof accel);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        ddp_scn_result_t r;
        CU_ASSERT_EQUAL(ddp_scenario_run(s, accel, NULL, &r), 0);
        CU_ASSERT(r.handoffs > 0);
        all += r.handoffs;
        ties = r.handoffs == most ? ties + 1 : r.handoffs > most ? 1 : ties;
        if (r.handoffs > most) {
            most = r.handoffs;
            first = i;
            snprintf(first_accel, sizeof first_accel, "%s", accel);
            free(want);
            want = scenario_text(s);
        }
        ddp_scenario_free(s);
    }
    CU_ASSERT_EQUAL(st.handoffs, all);
    CU_ASSERT_EQUAL(st.costliest_handoffs, most);
    CU_ASSERT_EQUAL(st.costliest, first);
    char line[256], path[256];
    snprintf(line, sizeof line, "explore: costliest run: run %d (%s), %llu hand-offs; "
                                "the mean run %llu\n",
             first, first_accel, (unsigned long long)most,
             (unsigned long long)(all / (uint64_t)o.runs));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, line));
    snprintf(path, sizeof path, "%s/explore-%llu-%d-costliest.scn", dir,
             (unsigned long long)o.seed, first);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, path));
    FILE *f = fopen(path, "r");
    CU_ASSERT_PTR_NOT_NULL(f);
    if (f) {
        static char got[1 << 16];
        size_t n = fread(got, 1, sizeof got - 1, f);
        got[n] = '\0';
        fclose(f);
        CU_ASSERT_PTR_NOT_NULL_FATAL(want);
        CU_ASSERT_STRING_EQUAL(got, want);
    }
    if (!strstr(buf, line))
        printf("\n  want: %s  log:\n%s", line, buf);
    unlink(path);
    CU_ASSERT_EQUAL(rmdir(dir), 0);
    free(want);
    free(buf);
    return ties;
}

static void test_explore_costliest(void)
{
    check_costliest((ddp_explore_opts_t){.ranks = 4, .runs = 12, .seed = 5});
    /* No fault, one accelerator: runs 3, 5 and 11 (at least) tie at the
     * most, and the first of them is the costliest. */
    int ties = check_costliest((ddp_explore_opts_t){
        .ranks = 2, .runs = 12, .seed = 3, .max_faults = -1, .accelerator = "ddp_cpu"});
    CU_ASSERT(ties >= 2);
}

DDP_SUITE("explore", NULL, NULL,
          {"a run is drawn from seed and index alone", test_draw_deterministic},
          {"the shipped code: 16 ranks, 30 runs, no violation", test_explore_shipped},
          {"a planted wait without deadline: found, shrunk, replayed",
           test_explore_planted},
          {"the costliest run: named, and its scenario written", test_explore_costliest},
          {"a shrink keeps the symptom: another violation is not the same bug",
           test_shrink_keeps_symptom},
          {"ddpsim explore: exit status and bad input", test_cmd_explore},
          {"ddpsim explore and merge exit 1 on a violation (in-process)",
           test_cmd_explore_finds});
