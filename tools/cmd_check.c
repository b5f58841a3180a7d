/* tools/cmd_check.c — `ddpsim check`: tests the user's plugin without a
 * scenario of the user's (docs/check.md): baselines, discovery, aimed and
 * random faults, oracles, shrunk replayable findings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmds.h"
#include "ddp/check.h"
#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/host.h"
#include "ddp/plugin.h"
#include "ddp/real.h"
#include "artifacts.h"
#include "opt.h"

static void check_usage(FILE *f)
{
    fprintf(f,
            "usage: ddpsim check --plugin NAME|PATH.so [--budget D] [--runs N] [--seed S]\n"
            "       ddpsim check --exec 'CMD ARGS' [--netns] [--port P] [--cold] [--budget D]\n"
            "                    [--random-runs N] [--max-findings N] [--list] [--out DIR]\n"
            "                    [--junit FILE] [--report DIR] [--shard K/N] [--sanitize]\n"
            "                    [--coverage]\n"
            "                    [--progress | --no-progress]\n\n"
            "Tests your plugin with no scenario of yours. First fault-free baselines on\n"
            "every shape that matters (1 node; 2 nodes under every accelerator, ddp2's one\n"
            "process per node, spawn), three schedules each: each must be ok. From\n"
            "their events it lists what your plugin does (phases entered, store\n"
            "keys set and waited on, per rank class: --list prints it and stops). Then it\n"
            "aims faults at each of those events (crash, stall, pause, partition, delay,\n"
            "refuse, reset, a failing store request, a late start; each for rank 0,\n"
            "another rank of node 0 and a rank of another node; alone and in pairs; the\n"
            "healing ones under every accelerator), then random schedules as explore\n"
            "draws them, and judges every run by oracles that need no expectation of\n"
            "yours:\n"
            "  baseline    a fault-free run must be ok\n"
            "  no-fault    a run in which no fault acted on anything must be ok\n"
            "  invariant   every rank ends by its deadline (a wait without a deadline, or\n"
            "              with the wrong one), no deadlock, no leaked socket, errors name\n"
            "              a cause, ranks agree on the world\n"
            "  transient   a fault that heals within a third of the 30 s timeout is survived\n"
            "  agreement   a fault the default plugin survives, your plugin survives\n"
            "  cause       a rank whose store request failed in your phase reports that\n"
            "              failure (not a later, unrelated one: an ignored error)\n"
            "  sanitizer   with --sanitize: no ASan or UBSan report\n"
            "Each finding is shrunk (fewest faults, smallest cluster, simplest trigger),\n"
            "written as a scenario file into DIR (default ddpsim-check), and its replay\n"
            "command is run once to check that it reproduces the finding.\n\n"
            "  --plugin NAME|PATH.so  the plugin to check (a library: docs/plugin.md)\n"
            "  --exec 'CMD ARGS'  or a program every rank runs (a torch job), in real runs on\n"
            "                     loopback as torchrun starts it, the run hosting its store:\n"
            "                     2 baselines, then crashes, 8 s pauses and late starts aimed\n"
            "                     at the store keys it sets and waits on (default at most 30\n"
            "                     runs in 20 min; no shrinking: each finding is one fault)\n"
            "  --netns            --exec: a network namespace per node (root); adds\n"
            "                     partitions and refused connects\n"
            "  --port P           --exec: its MASTER_PORT (default 31700)\n"
            "  --cold             --exec: every rank a fresh interpreter (by default a\n"
            "                     Python job starts warm: ddpsim run --cold, real-runs.md)\n"
            "  --budget D         stop after D of wall time: 90, 90s, 5m, 1h (default 5m)\n"
            "  --runs N           at most N runs after the baselines (default 3000)\n"
            "  --random-runs N    random schedules after the aimed runs (default 200)\n"
            "  --seed S           the same seed and budget give the same runs (default 1)\n"
            "  --max-findings N   report at most N findings (default 10)\n"
            "  --list             baselines and the discovery only\n"
            "  --coverage         for a plugin library built with --coverage: its coverage\n"
            "                     per accelerator and the parity gate over it, by make\n"
            "                     coverage PLUGIN=LIB of the ddpsim source tree (minutes)\n"
            "  --sanitize         for a plugin library built with -fsanitize=address (and\n"
            "                     undefined): the check runs with the sanitizer runtimes\n"
            "                     preloaded, and a report (use-after-free, overflow, UB) is\n"
            "                     a finding with a replay command that preloads them too\n"
            "  --out DIR          where findings' scenarios go (default ddpsim-check)\n"
            "  --junit FILE       JUnit XML: the baselines, then one test per finding\n"
            "  --report DIR       a run folder per finding (as run --artifacts keeps them)\n"
            "                     and DIR/report/index.html over them (ddpsim report)\n"
            "  --shard K/N        only the aimed and random runs i with i mod N = K-1\n"
            "  --progress, --no-progress   as explore's\n\n"
            "Exit status: 0 no finding, 1 some finding, 2 bad input, 127 --exec's program\n"
            "not found. Manual: docs/check.md.\n");
}

/* --budget: seconds, or a number with s, m or h. */
static int parse_budget(const char *v, void *dst)
{
    char *end;
    double d = strtod(v, &end), mul = 1;
    if (end == v || d <= 0)
        return -1;
    if (*end == 'm')
        mul = 60, end++;
    else if (*end == 'h')
        mul = 3600, end++;
    else if (*end == 's')
        end++;
    if (*end)
        return -1;
    *(double *)dst = d * mul;
    return 0;
}

static void print_finding(FILE *out, int i, const ddp_check_finding_t *f)
{
    fprintf(out, "FINDING %d [%s] on %s: %s\n", i + 1, f->oracle, f->accel, f->sentence);
    fprintf(out, "  shrunk in %d step(s)\n", f->shrink_steps);
    fprintf(out, "  replay: %s\n", f->replay);
    fprintf(out, "  replay check: %s\n",
            f->replayed ? "reproduces it (the replay fails its expectation again)"
                        : "DOES NOT reproduce it (a bug of ddpsim's: please report it)");
    fprintf(out, "  --- %s ---\n%s  --- end ---\n", f->path[0] ? f->path : "scenario",
            f->scenario ? f->scenario : "(could not write the scenario)\n");
}

static int junit_fill(FILE *f, void *arg)
{
    const ddp_check_report_t *rep = arg;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n"
               "<testsuite name=\"ddpsim check\" tests=\"%d\" failures=\"%d\" time=\"%.3f\">\n",
            rep->nfindings + 1, rep->nfindings, rep->wall_s);
    fprintf(f, "<testcase classname=\"check\" name=\"%d baseline, %d aimed, %d random "
               "run(s)\"/>\n",
            rep->baseline_runs, rep->aimed_runs, rep->random_runs);
    for (int i = 0; i < rep->nfindings; i++) {
        const ddp_check_finding_t *x = &rep->findings[i];
        fprintf(f, "<testcase classname=\"check.%s\" name=\"finding %d on %s\">"
                   "<failure message=\"",
                x->oracle, i + 1, x->accel);
        ddp_tool_xml_text(f, x->sentence);
        fprintf(f, "\">");
        ddp_tool_xml_text(f, x->replay);
        fputc('\n', f);
        ddp_tool_xml_text(f, x->scenario);
        fprintf(f, "</failure></testcase>\n");
    }
    fprintf(f, "</testsuite>\n</testsuites>\n");
    return 0;
}

/* One finding as a run folder of `run --artifacts` (run again in the
 * simulator for its trace and per-rank lines; a real run's as found). */
static int finding_folder(const ddp_art_t *a, const ddp_check_finding_t *f, int i)
{
    ddp_scenario_t *s = NULL;
    char err[512];
    if (!f->scenario || ddp_scenario_parse(f->scenario, "finding.scn", NULL, &s, err,
                                           sizeof err))
        return -1;
    ddp_shard_row_t *row = calloc(1, sizeof *row);
    char *trace = NULL;
    int rc = -1;
    if (row) {
        row->s = s;
        snprintf(row->path, sizeof row->path, "%s", f->path);
        if (!f->path[0])
            snprintf(row->path, sizeof row->path, "finding-%d.scn", i + 1);
        snprintf(row->title, sizeof row->title, "%s", s->name);
        snprintf(row->accel, sizeof row->accel, "%s", f->accel);
        snprintf(row->expected, sizeof row->expected, "%s", f->oracle);
        snprintf(row->actual, sizeof row->actual, "finding");
        row->r = f->result;
        ddp_scn_run_opts_t ro = {.keep_trace = 1, .trace_out = &trace, .report = row->report,
                                 .report_len = sizeof row->report};
        if (!a->real)
            (void)ddp_scenario_run(s, f->accel, &ro, &row->r);
        snprintf(row->r.why, sizeof row->r.why, "[%s] %s", f->oracle, f->sentence);
        rc = ddp_art_write(a, row, trace);
    }
    free(trace);
    free(row);
    ddp_scenario_free(s);
    return rc;
}

/* --report DIR: a run folder per finding, then `ddpsim report DIR`. */
static int write_report(ddp_sys_t *sys, const char *dir, const ddp_check_opts_t *o,
                        const ddp_check_report_t *rep)
{
    ddp_art_t a = {.dir = dir, .real = o->exec != NULL, .netns = o->netns};
    for (int i = 0; i < rep->nfindings; i++)
        if (finding_folder(&a, &rep->findings[i], i) != 0) {
            fprintf(stderr, "ddpsim check: --report: %s\n", ddp_err_message());
            return 2;
        }
    if (rep->nfindings == 0)
        return 0;
    char *argv[] = {"report", (char *)dir, NULL};
    return ddp_cmd_report(sys, 2, argv);
}

/* --coverage: the plugin's coverage per accelerator and the parity gate
 * (a violation makes the exit 1, a failed pipeline 2). */
static int with_coverage(ddp_sys_t *sys, const ddp_check_opts_t *o, int rc)
{
    const char *lib = o->plugin ? ddp_plugin_library(ddp_plugin_find(o->plugin)) : NULL;
    if (!lib) {
        fprintf(stderr, "ddpsim check: --coverage needs --plugin PATH.so, a library built "
                        "with --coverage\n");
        return 2;
    }
    int st = ddp_check_coverage(sys, lib, o->out_dir);
    if (st < 0)
        fprintf(stderr, "ddpsim check: %s\n", ddp_err_message());
    return st < 0 || st > 1 ? 2 : st ? 1 : rc;
}

static void summary(const ddp_check_opts_t *o, const ddp_check_report_t *rep)
{
    fprintf(stdout, "check: %d baseline run(s) (%d failed), %d aimed and %d random run(s) "
                    "of %d candidate(s)%s, seed %llu: %d finding(s) in %.1f s\n",
            rep->baseline_runs, rep->baseline_failed, rep->aimed_runs, rep->random_runs,
            rep->candidates, rep->budget_hit ? " (stopped by --budget/--runs)" : "",
            (unsigned long long)(o->seed ? o->seed : 1), rep->nfindings, rep->wall_s);
}

/* The value of option `name` in argv ("--name V" or "--name=V"), or NULL. */
static const char *arg_of(int argc, char **argv, const char *name)
{
    size_t n = strlen(name);
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], name, n) && argv[i][n] == '=')
            return argv[i] + n + 1;
        else if (!strcmp(argv[i], name) && i + 1 < argc)
            return argv[i + 1];
    return NULL;
}

/* --sanitize, before the options are parsed: parsing loads the plugin,
 * and a library built with ASan loads only where its runtime is preloaded,
 * in the child this starts (the child sees DDPSIM_CHECK_CURRENT). */
static int sanitized(ddp_sys_t *sys, int argc, char **argv, int *rc)
{
    int want = 0;
    for (int i = 1; i < argc; i++)
        want |= !strcmp(argv[i], "--sanitize");
    if (!want || ddp_env_get(ddp_sys_env(sys), "DDPSIM_CHECK_CURRENT"))
        return 0;
    const char *lib = arg_of(argc, argv, "--plugin");
    const char *out = arg_of(argc, argv, "--out");
    char abs[4096];
    if (!lib || !ddp_plugin_is_library_path(lib) || !realpath(lib, abs)) {
        *rc = ddp_opt_bad("check", "--plugin", lib ? lib : "(missing)",
                          "with --sanitize, the path of a plugin library built with "
                          "-fsanitize=address");
        return 1;
    }
    *rc = ddp_check_sanitized(sys, argc, argv, out ? out : "ddpsim-check", 0, abs);
    if (*rc < 0)
        fprintf(stderr, "ddpsim check: %s\n", ddp_err_message());
    *rc = *rc < 0 ? 2 : *rc;
    return 1;
}

int ddp_cmd_check(ddp_sys_t *sys, int argc, char **argv)
{
    int src;
    if (sanitized(sys, argc, argv, &src))
        return src;
    ddp_check_opts_t o = {.seed = 1, .out_dir = "ddpsim-check", .self = ddp_tool_self,
                          .progress = isatty(2) ? 1 : 2};
    const char *junit = NULL, *report = NULL;
    int n, list = 0, sanitize = 0, port = 0, coverage = 0; /* sanitize: done by sanitized() */
    const ddp_opt_t opts[] = {
        OPT_FN("plugin", &o.plugin, ddp_opt_plugin_name, ddp_opt_plugin_form()),
        OPT_STR("exec", &o.exec, "a command line every rank runs"),
        OPT_FLAG("netns", 0, &o.netns, 1),
        OPT_FLAG("cold", 0, &o.cold, 1),
        OPT_INT("port", &port, 1024, 65535),
        OPT_FN("budget", &o.budget_s, parse_budget, "seconds, or a number and s, m or h"),
        OPT_INT("runs", &o.runs, 1, 100000000),
        OPT_INT("random-runs", &o.random_runs, 0, 100000000),
        OPT_U64("seed", &o.seed, 0),
        OPT_INT("max-findings", &o.max_findings, 1, 1000),
        OPT_FLAG("list", 0, &list, 1),
        OPT_FLAG("sanitize", 0, &sanitize, 1),
        OPT_FLAG("coverage", 0, &coverage, 1),
        OPT_FN("out", &o.out_dir, ddp_opt_dir, DDP_OPT_DIR_FORM),
        OPT_STR("junit", &junit, "a file to write"),
        OPT_STR("report", &report, "a folder that does not exist yet"),
        OPT_FN("shard", &o.shard, ddp_opt_shard, DDP_OPT_SHARD_FORM),
        OPT_FLAG("progress", 0, &o.progress, 1),
        OPT_FLAG("no-progress", 0, &o.progress, 0),
        OPT_HELP,
    };
    ddp_opt_spec_t sp = {DDP_OPT_SPEC("check", opts, check_usage), .max_operands = 0};
    DDP_OPT_PARSE_OR_RETURN(&sp, argc, argv, &n);
    if (!o.plugin == !o.exec)
        return ddp_opt_bad("check", o.plugin ? "--exec" : "--plugin", "(missing)",
                           "one of --plugin NAME|PATH.so or --exec 'CMD ARGS', not both");
    o.port = (unsigned)port;
    if (o.exec && ddp_real_check_exec(sys, o.exec) != 0) {
        fprintf(stderr, "ddpsim check: %s\n", ddp_err_message());
        return 127;
    }
    if (ddp_opt_writable("check", "--junit", junit))
        return 2;
    if (report && access(report, F_OK) == 0)
        return ddp_opt_bad("check", "--report", report, "a folder that does not exist yet");
    o.list_only = list;
    o.current_path = ddp_env_get(ddp_sys_env(sys), "DDPSIM_CHECK_CURRENT");
    ddp_check_report_t rep;
    if (ddp_check(&o, &rep) != 0) {
        fprintf(stderr, "ddpsim check: %s\n", ddp_err_message());
        return 2;
    }
    if (list)
        ddp_check_print_discovery(&rep.disc, stdout);
    for (int i = 0; i < rep.nfindings; i++)
        print_finding(stdout, i, &rep.findings[i]);
    summary(&o, &rep);
    int rc = rep.nfindings ? 1 : 0;
    if (junit && ddp_out_write(junit, "the JUnit XML", junit_fill, &rep) != 0) {
        fprintf(stderr, "ddpsim check: %s\n", ddp_err_message());
        rc = 2;
    }
    if (rc != 2 && report && write_report(sys, report, &o, &rep) != 0)
        rc = 2;
    if (rc != 2 && coverage)
        rc = with_coverage(sys, &o, rc);
    ddp_check_report_free(&rep);
    return rc;
}
