/* tests/test_check.c — `ddpsim check` (docs/check.md) on the plugins of
 * tests/check_plugins/kvx_plugin.c: one correct (no finding), and one per
 * realistic bug class, each of which check must catch with a shrunk
 * scenario whose replay reproduces it; the printed replay commands run as
 * a user pastes them; explore's no-fault oracle on a plugin that fails
 * fault-free runs, and its costliest run's replay. */
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness/check_priv.h"
#include "ddp/check.h"
#include "ddp/err.h"
#include "ddp/plugin.h"
#include "ddp/scenario.h"

static const ddp_plugin_t *load(const char *lib)
{
    char path[1024];
    const ddp_plugin_t *p = NULL;
    ddp_test_plugin_lib(path, sizeof path, lib);
    if (ddp_plugin_load(NULL, path, &p) != 0)
        printf("\n  cannot load %s: %s\n", path, ddp_err_message());
    return p;
}

/* A check of lib: at most runs runs after the baselines, a small random
 * tail (the aimed runs are the point). */
static int check_runs(const char *lib, const char *out_dir, int runs, ddp_check_report_t *rep)
{
    const ddp_plugin_t *p = load(lib);
    if (!p)
        return -1;
    FILE *sink = fopen("/dev/null", "w");
    /* the first 800 aimed runs (the plugin's own events come first): each
     * bug shows there, and a sanitizer build stays within its time */
    ddp_check_opts_t o = {.plugin = p->name, .seed = 1, .runs = runs, .random_runs = 50,
                          .out_dir = out_dir, .log = sink};
    int rc = ddp_check(&o, rep);
    if (sink)
        fclose(sink);
    return rc;
}

static int check_of(const char *lib, const char *out_dir, ddp_check_report_t *rep)
{
    return check_runs(lib, out_dir, 800, rep);
}

static int has_oracle(const ddp_check_report_t *rep, const char *oracle)
{
    for (int i = 0; i < rep->nfindings; i++)
        if (!strcmp(rep->findings[i].oracle, oracle))
            return 1;
    return 0;
}

static void test_correct_plugin(void)
{
    ddp_check_report_t rep;
    CU_ASSERT_EQUAL_FATAL(check_of("libkvx.so", NULL, &rep), 0);
    CU_ASSERT_EQUAL(rep.baseline_runs, 21);
    CU_ASSERT_EQUAL(rep.baseline_failed, 0);
    CU_ASSERT(rep.aimed_runs > 500);
    CU_ASSERT_EQUAL(rep.nfindings, 0);
    for (int i = 0; i < rep.nfindings; i++)
        printf("\n  unexpected finding [%s]: %s\n", rep.findings[i].oracle,
               rep.findings[i].sentence);
    ddp_check_report_free(&rep);
}

/* --runs N: N runs after the baselines, no more, and the report says the
 * budget ended the sweep. */
static void test_runs_budget(void)
{
    for (int runs = 1; runs <= 5; runs += 4) {
        ddp_check_report_t rep;
        CU_ASSERT_EQUAL_FATAL(check_runs("libkvx.so", NULL, runs, &rep), 0);
        CU_ASSERT_EQUAL(rep.baseline_runs, 21);
        CU_ASSERT_EQUAL(rep.aimed_runs + rep.random_runs, runs);
        CU_ASSERT(rep.budget_hit);
        ddp_check_report_free(&rep);
    }
}

/* The discovery: the plugin's own phases and keys, told from the default's. */
static void test_discovery(void)
{
    ddp_check_report_t rep;
    const ddp_plugin_t *p = load("libkvx.so");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    ddp_check_opts_t o = {.plugin = p->name, .list_only = 1};
    CU_ASSERT_EQUAL_FATAL(ddp_check(&o, &rep), 0);
    int publish = 0, connect_user = 0, addr = 0, pg = 0;
    for (int i = 0; i < rep.disc.nphases; i++) {
        publish |= !strcmp(rep.disc.phases[i].name, "kvx publish") && rep.disc.phases[i].user &&
                   rep.disc.phases[i].classes == 7;
        connect_user |= !strcmp(rep.disc.phases[i].name, "store connect") &&
                        rep.disc.phases[i].user;
    }
    for (int i = 0; i < rep.disc.nkeys; i++) {
        addr |= !strcmp(rep.disc.keys[i].glob, "kvx/addr/*") && rep.disc.keys[i].user &&
                rep.disc.keys[i].ops & 1 && rep.disc.keys[i].ops & 2;
        pg |= !strcmp(rep.disc.keys[i].glob, "default_pg/tcp/addr/*") && !rep.disc.keys[i].user;
    }
    CU_ASSERT(publish);
    CU_ASSERT(!connect_user);
    CU_ASSERT(addr);
    CU_ASSERT(pg);
    CU_ASSERT_EQUAL(rep.aimed_runs, 0);
    ddp_check_report_free(&rep);
}

/* The discovery's rank classes, as `check --list` prints them: rank 0,
 * another rank of node 0, a rank of another node (the classes faults are
 * aimed at). */
static void test_discovery_rank_classes(void)
{
    ddp_check_discovery_t d;
    memset(&d, 0, sizeof d);
    static const struct {
        const char *phase;
        int rank, node;
    } seen[] = {{"p local", 1, 0}, {"p remote", 2, 1}, {"p zero", 0, 0}};
    for (size_t i = 0; i < sizeof seen / sizeof seen[0]; i++) {
        ddp_fault_event_t ev = {.kind = DDP_TRIG_ENTER, .rank = seen[i].rank,
                                .name = seen[i].phase};
        ddp__check_tap(&d, &ev, seen[i].node, 0);
        ev.kind = DDP_TRIG_CONNECT;
        ddp__check_tap(&d, &ev, seen[i].node, 0);
    }
    CU_ASSERT_EQUAL_FATAL(d.nphases, 3);
    CU_ASSERT_EQUAL(d.phases[0].classes, DDP_CHECK_LOCAL);
    CU_ASSERT_EQUAL(d.phases[1].classes, DDP_CHECK_REMOTE);
    CU_ASSERT_EQUAL(d.phases[2].classes, DDP_CHECK_RANK0);
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    ddp_check_print_discovery(&d, out);
    fclose(out);
    char line[80];
    snprintf(line, sizeof line, "%-28s%s\n", "p local", "another rank of node 0");
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, line));
    snprintf(line, sizeof line, "%-28s%s\n", "p remote", "a rank of another node");
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, line));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "rank 0 1, other ranks of node 0 1, other nodes 1"));
    free(buf);
}

/* 1 when a candidate's fault line contains text. */
static int cands_have(const chk_cands_t *c, const char *text)
{
    for (int i = 0; i < c->n; i++)
        for (int k = 0; k < c->v[i].nf; k++)
            if (strstr(c->v[i].faults[k], text))
                return 1;
    return 0;
}

/* check --exec: partitions and refused connects only with --netns (on
 * loopback there is no network between nodes to cut); crashes, pauses
 * and late starts either way. */
static void test_exec_aims_net_faults_with_netns_only(void)
{
    ddp_check_discovery_t d;
    memset(&d, 0, sizeof d);
    snprintf(d.keys[0].glob, sizeof d.keys[0].glob, "job/addr/*");
    d.keys[0].ops = 3;
    d.nkeys = 1;
    for (int netns = 0; netns < 2; netns++) {
        chk_cands_t c = {0};
        CU_ASSERT_EQUAL_FATAL(ddp__check_aim_exec(&d, netns, &c), 0);
        CU_ASSERT(cands_have(&c, "fault crash ranks=2 start=\"set:job/addr/*\""));
        CU_ASSERT(cands_have(&c, "fault pause ranks=0 start=\"wait:job/addr/*\""));
        CU_ASSERT(cands_have(&c, "late ranks=2"));
        CU_ASSERT_EQUAL(cands_have(&c, "fault partition nodes=1"), netns);
        CU_ASSERT_EQUAL(cands_have(&c, "fault refuse node=1"), netns);
        ddp__check_cands_free(&c);
    }
}

/* The aimed runs (docs/check.md): under ddp every fault at the plugin's
 * events, crashes included; under every other accelerator the healing
 * faults only (a crash fails every accelerator alike). */
static void test_other_accelerators_get_healing_faults(void)
{
    static const char *const phases[] = {"p one", NULL};
    static const ddp_plugin_t p = {.name = "aimed", .phases = phases};
    ddp_check_discovery_t d;
    memset(&d, 0, sizeof d);
    snprintf(d.phases[0].name, sizeof d.phases[0].name, "p one");
    d.phases[0].classes = 7;
    d.phases[0].user = 1;
    d.nphases = 1;
    chk_cands_t c = {0};
    CU_ASSERT_EQUAL_FATAL(ddp__check_aim(&d, &p, &c), 0);
    int ddp_crash = 0, spawn_stall = 0, other_lasting = 0;
    for (int i = 0; i < c.n; i++) {
        const char *f = c.v[i].faults[0];
        int lasting = strstr(f, "fault crash") || strstr(f, "fault reset") ||
                      strstr(f, "fault point") || strstr(f, "end=60s") ||
                      (strstr(f, "fault partition") && !strstr(f, "end="));
        if (!strcmp(c.v[i].accel, "ddp"))
            ddp_crash += strstr(f, "fault crash") != NULL;
        else
            other_lasting += lasting, spawn_stall += strstr(f, "fault stall") != NULL;
        if (lasting && strcmp(c.v[i].accel, "ddp"))
            printf("\n  %s: %s\n", c.v[i].accel, f);
    }
    CU_ASSERT(ddp_crash > 0);
    CU_ASSERT(spawn_stall > 0);
    CU_ASSERT_EQUAL(other_lasting, 0);
    ddp__check_cands_free(&c);
}

/* One 2 x 2 ddp run of plugin lib with one fault line, judged by check's
 * oracles: 1 when the oracle is want (else printed). */
static int judged_as(const char *lib, const char *fault, int want)
{
    const ddp_plugin_t *p = load(lib);
    char text[512], err[256];
    if (!p)
        return 0;
    snprintf(text, sizeof text, "scenario \"j\"\nnodes 2\ndevices 2\naccelerators ddp\n"
                                "timeout 30s\nplugin %s\n%s\nexpect invariants\n",
             p->name, fault);
    ddp_scenario_t *s = NULL;
    if (ddp_scenario_parse(text, "j.scn", NULL, &s, err, sizeof err)) {
        printf("\n  %s\n", err);
        return 0;
    }
    ddp_scn_result_t r;
    chk_verdict_t v;
    int o = ddp__check_judge(s, "ddp", 0, NULL, &r, &v);
    if (o != want)
        printf("\n  %s: [%s] %s; want [%s]\n", fault, ddp__check_oracle_name(o), v.sentence,
               ddp__check_oracle_name(want));
    ddp_scenario_free(s);
    return o == want;
}

/* The oracles' rules (docs/check.md) on a plugin that fails every 2-node
 * run (libkvx-rank.so): a fault that never acted leaves the run a
 * fault-free one (no-fault); one refused connect heals (transient), three
 * are neither transient nor a healing fault to compare with the default
 * (no finding); a longer healing window is compared with the default's
 * run, when it acted there too (agreement). */
static void test_oracle_rules(void)
{
    CU_ASSERT(judged_as("libkvx-rank.so", "fault crash ranks=1 start=3600s", CHK_NOFAULT));
    CU_ASSERT(judged_as("libkvx-rank.so", "fault refuse node=1 count=1", CHK_TRANSIENT));
    CU_ASSERT(judged_as("libkvx-rank.so", "fault refuse node=1 count=3", CHK_NONE));
    /* a 12 s pause heals within half the timeout, not a third: compared
     * with the default's run, when it acted there too */
    CU_ASSERT(judged_as("libkvx-rank.so", "fault pause ranks=0 start=0s end=12s", CHK_AGREE));
    CU_ASSERT(judged_as("libkvx-rank.so",
                        "fault pause ranks=0 start=\"enter:kvx group@0\" end=12s", CHK_NONE));
}

static const struct {
    const char *lib, *oracle; /* the oracle that must be among the findings */
    int distinct;             /* at least this many distinct findings */
} bugs[] = {
    {"libkvx-nodeadline.so", "invariant", 1}, /* a wait without a deadline */
    {"libkvx-timeout.so", "invariant", 1},    /* bounded by 1800 s, not the group's */
    {"libkvx-ignore.so", "cause", 1},         /* the publish's store error ignored */
    {"libkvx-nobarrier.so", "baseline", 2},   /* rank 0 cleans up under the others */
    {"libkvx-rank.so", "baseline", 2},        /* the extra group's rank is local */
    {"libkvx-race.so", "baseline", 1},        /* CHECK where it must WAIT */
};

/* A cause finding's scenario expects the failure of the rank its store
 * error was injected into ("fault point ranks=R", "expect fail ranks=R"). */
static int expects_faulted_rank(const char *scn)
{
    const char *f = strstr(scn, "fault point ranks="), *e = strstr(scn, "expect fail ranks=");
    if (!f || !e || atoi(f + 18) != atoi(e + 18)) {
        printf("\n  the cause finding expects another rank's failure:\n%s\n", scn);
        return 0;
    }
    return 1;
}

static void test_bug_classes(void)
{
    for (size_t b = 0; b < sizeof bugs / sizeof bugs[0]; b++) {
        ddp_check_report_t rep;
        CU_ASSERT_EQUAL_FATAL(check_of(bugs[b].lib, NULL, &rep), 0);
        CU_ASSERT(rep.nfindings >= 1);
        CU_ASSERT(has_oracle(&rep, bugs[b].oracle));
        /* every failed baseline counted (these fail several, or none) */
        CU_ASSERT_EQUAL(rep.baseline_failed > 1, !strcmp(bugs[b].oracle, "baseline"));
        /* up to 10 findings by default; the runs that show one bug, one */
        CU_ASSERT(rep.nfindings >= bugs[b].distinct && rep.nfindings <= 3);
        CU_ASSERT(rep.findings_total > rep.nfindings);
        for (int i = 0; i < rep.nfindings; i++) {
            if (!strcmp(rep.findings[i].oracle, "cause"))
                CU_ASSERT(expects_faulted_rank(rep.findings[i].scenario));
            CU_ASSERT_EQUAL(rep.findings[i].replayed, 1);
            CU_ASSERT_PTR_NOT_NULL(rep.findings[i].scenario);
        }
        if (!has_oracle(&rep, bugs[b].oracle))
            printf("\n  %s: no %s finding (%d finding(s))\n", bugs[b].lib, bugs[b].oracle,
                   rep.nfindings);
        ddp_check_report_free(&rep);
    }
}

/* The printed replay command, run as pasted: it fails (exit 1) on the
 * buggy plugin, as the finding did. */
static void test_replay_command(void)
{
    char dir[256], out[8192];
    if (!ddp_test_need_ddpsim(out, sizeof out) || !ddp_test_tmpdir(dir, sizeof dir, "check"))
        return;
    ddp_check_report_t rep;
    CU_ASSERT_EQUAL_FATAL(check_of("libkvx-timeout.so", dir, &rep), 0);
    CU_ASSERT_FATAL(rep.nfindings >= 1);
    const char *cmd = strstr(rep.findings[0].replay, " replay ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(cmd);
    CU_ASSERT_PTR_NOT_NULL(strstr(rep.findings[0].replay, dir));
    int st = ddp_test_ddpsim_io(NULL, cmd + 1, 0, out, sizeof out);
    CU_ASSERT_EQUAL(st, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "past its deadline"));
    ddp_check_report_free(&rep);
    char rm[400];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    CU_ASSERT_EQUAL(system(rm), 0);
}

/* The command: exit 1 with findings, a JUnit file, 2 without --plugin. */
static void test_cmd_check(void)
{
    char dir[256], out[16384], lib[1024], args[2400];
    if (!ddp_test_need_ddpsim(out, sizeof out) || !ddp_test_tmpdir(dir, sizeof dir, "check"))
        return;
    ddp_test_plugin_lib(lib, sizeof lib, "libkvx-race.so");
    snprintf(args, sizeof args, "check --plugin %s --out %s --junit %s/j.xml --no-progress "
                                "--random-runs 10 --report %s/html",
             lib, dir, dir, dir);
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 0, out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "FINDING 1 [baseline]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "replay check: reproduces it"));
    snprintf(args, sizeof args, "%s/j.xml", dir);
    FILE *j = fopen(args, "r");
    CU_ASSERT_PTR_NOT_NULL(j);
    size_t n = j ? fread(out, 1, sizeof out - 1, j) : 0;
    out[n] = '\0';
    if (j)
        fclose(j);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "<failure message="));
    snprintf(args, sizeof args, "%s/html/report/index.html", dir);
    FILE *h = fopen(args, "r");
    CU_ASSERT_PTR_NOT_NULL(h); /* --report: a page per finding and the index */
    if (h)
        fclose(h);
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, "check --no-progress", 1, out, sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--plugin"));
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    CU_ASSERT_EQUAL(system(args), 0);
}

/* explore --plugin of a plugin that fails fault-free multi-node runs: a
 * violation, whose written scenario fails its replay. */
static void test_explore_nofault(void)
{
    const ddp_plugin_t *p = load("libkvx-race.so");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    char *buf = NULL;
    size_t len = 0;
    FILE *log = open_memstream(&buf, &len);
    ddp_explore_opts_t o = {.ranks = 4, .runs = 40, .seed = 1, .plugin = p->name,
                            .log = log};
    ddp_explore_stats_t st;
    CU_ASSERT_EQUAL(ddp_explore(&o, &st), 0);
    fclose(log);
    CU_ASSERT(st.violations >= 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "oracle: no fault acted on anything"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "replay check: identical"));
    CU_ASSERT_PTR_NULL(strstr(buf, "DIFFERS"));
    free(buf);
}

/* The costliest run's printed replay is judged, not vacuous: exit 0 for a
 * sweep without violations. */
static void test_explore_costliest_replay(void)
{
    char dir[256], out[8192], args[600];
    if (!ddp_test_need_ddpsim(out, sizeof out) || !ddp_test_tmpdir(dir, sizeof dir, "costly"))
        return;
    for (int seed = 1; seed <= 3; seed++) {
        snprintf(args, sizeof args, "explore --ranks 8 --runs 40 --seed %d --no-progress "
                                    "--out %s", seed, dir);
        CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 0, out, sizeof out), 0);
        const char *line = strstr(out, "(ddpsim replay ");
        CU_ASSERT_PTR_NOT_NULL_FATAL(line);
        char cmd[600]; /* "replay FILE", without the timeline */
        snprintf(cmd, sizeof cmd, "%.*s", (int)(strcspn(line + 8, ")")), line + 8);
        char *tl = strstr(cmd, " --timeline");
        if (tl)
            *tl = '\0';
        CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, cmd, 0, out, sizeof out), 0);
    }
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    CU_ASSERT_EQUAL(system(args), 0);
}

/* --sanitize: the use-after-free on teardown's failure path of
 * libkvx-uaf.so (built with -fsanitize=address) is a finding whose replay
 * command ends with the same report; the correct plugin gives none. */
static void test_sanitize(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    ddp_test_skip("this ddpsim is itself built with a sanitizer: --sanitize preloads the runtimes into an uninstrumented one");
    return;
#endif
    char dir[256], out[16384], lib[1024], args[2400];
    if (!ddp_test_need_ddpsim(out, sizeof out) || !ddp_test_tmpdir(dir, sizeof dir, "san"))
        return;
    ddp_test_plugin_lib(lib, sizeof lib, "libkvx-uaf.so");
    snprintf(args, sizeof args, "check --sanitize --plugin %s --out %s --no-progress", lib, dir);
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 0, out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "FINDING [sanitizer]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "heap-use-after-free"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "in kvx_teardown"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "replay check: reproduces it"));
    ddp_test_plugin_lib(lib, sizeof lib, "libkvx.so");
    snprintf(args, sizeof args, "check --sanitize --plugin %s --out %s --no-progress "
                                "--random-runs 10", lib, dir);
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 0, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, " 0 finding(s)"));
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    CU_ASSERT_EQUAL(system(args), 0);
}

/* excludes= (what check writes for an ignored store error): a failing
 * rank whose message holds the text fails the expectation. */
static void test_expect_excludes(void)
{
    static const char *const text =
        "scenario \"x\"\nnodes 2\ndevices 1\naccelerators ddp\n"
        "fault crash ranks=1 phase=barrier\nexpect crashed ranks=1\n"
        "expect fail ranks=0 excludes=\"%s\"\n";
    const char *texts[2] = {"is gone (earlier: lost the connection", "rank 0, "};
    for (int k = 0; k < 2; k++) {
        char buf[512], err[256];
        snprintf(buf, sizeof buf, text, texts[k]);
        ddp_scenario_t *s = NULL;
        CU_ASSERT_EQUAL_FATAL(ddp_scenario_parse(buf, "x.scn", NULL, &s, err, sizeof err), 0);
        ddp_scn_result_t r;
        CU_ASSERT_EQUAL(ddp_scenario_run(s, "ddp", NULL, &r), 0);
        CU_ASSERT_EQUAL(r.pass, !k);
        if (k)
            CU_ASSERT_PTR_NOT_NULL(strstr(r.why, "not to contain \"rank 0, \""));
        ddp_scenario_free(s);
    }
}

/* What `check` found in ddpsim itself: rank 0 paused for 15 s between
 * stopping its store server and joining its thread found the join's 10 s
 * gone when it resumed, and freed the server under the thread (a
 * use-after-free that ASan, under make test SANITIZE=address, aborts on).
 * The run must be ok: joined again, then freed, no socket left open. */
static void test_pause_before_server_join(void)
{
    const ddp_plugin_t *p = load("libkvx.so");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    char text[512], err[256];
    snprintf(text, sizeof text,
             "scenario \"x\"\nnodes 1\ndevices 2\naccelerators ddp\ntimeout 30s\n"
             "plugin %s\nfault pause ranks=0 start=\"leave:kvx cleanup@0\" end=15s\n"
             "expect ok\n", p->name);
    ddp_scenario_t *s = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_scenario_parse(text, "x.scn", NULL, &s, err, sizeof err), 0);
    ddp_scn_result_t r;
    CU_ASSERT_EQUAL(ddp_scenario_run(s, "ddp", NULL, &r), 0);
    CU_ASSERT(r.pass);
    CU_ASSERT(r.hits[0] > 0);
    if (!r.pass)
        printf("\n  %s\n", r.why);
    ddp_scenario_free(s);
}

DDP_SUITE("check", NULL, NULL,
          {"a pause before the store server's join: joined, not freed under it",
           test_pause_before_server_join},
          {"expect fail excludes=: the text must not be in the message", test_expect_excludes},
          {"--sanitize: a use-after-free is a finding, replayed", test_sanitize},
          {"a correct plugin: no finding", test_correct_plugin},
          {"--runs N: N runs after the baselines", test_runs_budget},
          {"the oracles' rules: no-fault, transient, agreement",
           test_oracle_rules},
          {"discovery: the plugin's own phases and keys", test_discovery},
          {"discovery: the rank classes, as --list prints them", test_discovery_rank_classes},
          {"aimed runs: other accelerators get the healing faults only",
           test_other_accelerators_get_healing_faults},
          {"check --exec: partitions and refusals with --netns only",
           test_exec_aims_net_faults_with_netns_only},
          {"each realistic bug class: found, shrunk, replayed", test_bug_classes},
          {"a finding's printed replay command fails as the finding did", test_replay_command},
          {"ddpsim check: exit 1, JUnit, exit 2 without --plugin", test_cmd_check},
          {"explore --plugin: a plugin failing clean runs is a violation",
           test_explore_nofault},
          {"explore: the costliest run's replay exits 0", test_explore_costliest_replay});
