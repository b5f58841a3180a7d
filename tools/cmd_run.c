/* tools/cmd_run.c — `ddpsim run` (scenario files x accelerators in the
 * simulator, an outcome table, JUnit XML), `ddpsim replay` (one scenario,
 * exactly, with its per-rank outcomes and trace hash) and `ddpsim list`. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "artifacts.h"
#include "cmds.h"
#include "ddp/accel.h"
#include "ddp/cluster.h"
#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/host.h"
#include "ddp/pg.h"
#include "ddp/plugin.h"
#include "ddp/real.h"
#include "ddp/scenario.h"
#include "ddp/launch.h"
#include "ddp/sim.h"
#include "ddp/sys.h"
#include "harness/progress.h"
#include "opt.h"

/* run --help, continued: real runs, foreign programs, artifacts, exit
 * status. */
static void run_usage_real(FILE *f)
{
    fprintf(f,
            "  --real              run the processes for real (ddpsim train, POSIX sockets)\n"
            "                      on loopback: node i is 127.0.0.(i+1); faults through the\n"
            "                      same libfiu points and signals; what cannot be realised\n"
            "                      is reported as skip with the reason (docs/real-runs.md)\n"
            "  --netns             --real on one network namespace per node (root)\n"
            "  --compare           each run for real and in the simulator: the outcome\n"
            "                      classes side by side, and under a failed real run its\n"
            "                      most causal rank's error beside the simulator's\n"
            "                      prediction for that rank; exit 1 if any pair differs\n"
            "  --markdown FILE     with --compare: the table as Markdown\n"
            "  --repeat N          with --compare: each real run N times (1..100); the\n"
            "                      real column is then the classes seen with their counts,\n"
            "                      and a pair is `race` where the simulator's class is\n"
            "                      only one of them\n"
            "  --exec 'CMD ARGS'   every rank's process runs this program instead (a real\n"
            "                      PyTorch job, say) with the environment the scenario's\n"
            "                      cluster and launcher give it; the simulator models it\n"
            "                      with ddpsim's own Trainer (docs/real-runs.md)\n"
            "  --wall-limit SEC    a simulated run still going after SEC of real time is\n"
            "                      stopped, a harness failure naming its running tasks\n"
            "                      (default: none while virtual time moves, 600 s at one\n"
            "                      virtual instant; a run whose virtual time stands still\n"
            "                      is stopped after 10,000,000 sim calls whatever this says)\n"
            "  --grace SEC         a foreign program still running SEC past the scenario's\n"
            "                      deadline is killed: hung (default 30)\n"
            "  --plugin NAME|PATH.so  the plugin of every scenario that names none: a\n"
            "                      built-in one, or yours, loaded from its library\n"
            "                      (docs/plugin.md); its processes load it too\n"
            "  --no-host-store     a foreign program hosts its own store (rank 0); by\n"
            "                      default the run hosts it on node 0 at MASTER_PORT and\n"
            "                      sets TORCHELASTIC_USE_AGENT_STORE=True, so store events\n"
            "                      (joined:N, set:, wait:, barrier, mark:) aim its faults\n"
            "  --cold              every foreign rank starts a fresh interpreter; by default\n"
            "                      a Python job (python3 or scripts/torch-python SCRIPT.py)\n"
            "                      starts warm: one fork server for the whole command\n"
            "                      imports $DDPSIM_WARM_IMPORT (default torch) once and\n"
            "                      forks each rank into the script (docs/real-runs.md)\n"
            "  --env-clear         a foreign program's environment starts empty, not from\n"
            "                      this one's; the scenario's and the harness's variables\n"
            "                      are set either way\n"
            "  --keep-output DIR   keep every run's foreign ranks' stdout and stderr in a\n"
            "                      folder per run under DIR (default: under $TMPDIR, for\n"
            "                      failing and vacuous runs only)\n"
            "  --artifacts DIR     a folder per failing or vacuous run, DIR/SCENARIO.ACCEL\n"
            "                      (.netns with --netns): the scenario as run, its seed,\n"
            "                      the replay command, its --results record, the trace\n"
            "                      (JSON lines and Chrome), per-rank logs, a foreign\n"
            "                      program's rank output; README says what a real run\n"
            "                      lacks. An existing run folder is refused before the\n"
            "                      first run. `ddpsim report DIR` makes HTML pages of them\n"
            "  --artifacts-all     with --artifacts: a folder for every run\n"
            "Every output FILE is checked before the first run.\n\n"
            "Exit status: 0 every expectation and invariant held (skips aside), 1 some\n"
            "did not, 2 bad input (one line naming the option; a scenario error is\n"
            "printed as file:line:col: expected ...; nothing runs), 127 the --exec (or\n"
            "`exec`) program does not exist (a real run; nothing runs), 3 every run was\n"
            "skipped (nothing was tested), 128+N when signal N (INT, TERM, HUP) stopped\n"
            "a real run; its processes are killed and its namespaces deleted first.\n");
}

static void run_usage(FILE *f)
{
    fprintf(f,
            "usage: ddpsim run FILE... [--accelerator NAME|all] [--seed N] [--tag TAG]\n"
            "                  [-k PATTERN] [-x] [--last-failed FILE]\n"
            "                  [--trace FILE] [--trace-chrome FILE] [--junit FILE]\n"
            "                  [--jobs N] [--verbose] [--progress|--no-progress]\n"
            "                  [--real [--netns]] [--compare [--markdown FILE] [--repeat N]]\n"
            "                  [--shard K/N] [--results FILE] [--exec 'CMD ARGS']\n"
            "                  [--wall-limit SEC] [--grace SEC] [--plugin NAME|PATH.so]\n"
            "                  [--env-clear] [--cold] [--keep-output DIR]\n"
            "                  [--artifacts DIR [--artifacts-all]]\n\n"
            "Runs each scenario file (docs/scenario-format.md) in the simulator for each\n"
            "selected accelerator it lists (default: all), checks its expectations and the\n"
            "invariants (no deadlock, deadlines kept, ranks agree, no leaked sockets,\n"
            "errors name a cause) and prints a table: each scenario's title, then one row\n"
            "per run: scenario, accelerator, the expected outcome (what its expect lines\n"
            "ask: ok, fail, crash, any), the actual one, the verdict (ok: as expected and\n"
            "the invariants held; FAIL, with a why: line; skip), virtual time (wall time\n"
            "for --real, headed wall) and connect retries. Under the table: each run's\n"
            "first error in full (wrapped to $COLUMNS, else the terminal's width, else 80),\n"
            "a legend and the counts.\n\n"
            "  --accelerator NAME  only this accelerator (ddp, ddp_spawn, ddp_cpu, ddp2,\n"
            "                      ddp_hpc, ddp_cpu_hpc), all (default), or first: each\n"
            "                      scenario's first listed accelerator\n"
            "  --seed N            override every scenario's seed (N >= 1)\n"
            "  --tag TAG           only scenarios carrying this tag (e.g. real)\n"
            "  -k, --keyword PATTERN  only the runs whose scenario file, title or\n"
            "                      accelerator contains PATTERN (case ignored)\n"
            "  -x, --exitfirst     stop after the first run that fails (the runs after\n"
            "                      it are left out of the table, JUnit and results)\n"
            "  --last-failed FILE  only the runs that failed in FILE (a --results file);\n"
            "                      all of them when it records no failure\n"
            "  --trace FILE        write every run's JSON-lines trace to FILE\n"
            "  --trace-chrome FILE Chrome/Perfetto trace (one track per rank, grouped by\n"
            "                      node); with several runs one file each, named FILE\n"
            "                      with the scenario and accelerator before its extension\n"
            "                      (t.json: t.clean-start.ddp.json)\n"
            "  --junit FILE        JUnit XML: one testcase per run, named SCENARIO[ACCEL],\n"
            "                      classname the scenario file, its time and outcome\n"
            "  --jobs N            run in N worker processes (1..64, default 1)\n"
            "  --shard K/N         only the runs i (0, 1, ... in the order of the table:\n"
            "                      files as given, accelerators in registry order) with\n"
            "                      i mod N = K-1; the other shards run the rest\n"
            "  --results FILE      a result file (JSON lines) of these runs for `ddpsim\n"
            "                      merge`, which prints the whole sweep's table and JUnit\n"
            "  --verbose, -v       per-process outcomes under each row\n"
            "  --progress          one progress line on stderr, redrawn: runs done/total,\n"
            "                      rate, ETA (default on a terminal; elsewhere a plain\n"
            "                      line every 10 s)\n"
            "  --no-progress       no progress line\n");
    run_usage_real(f);
}

static void replay_usage(FILE *f)
{
    fprintf(f,
            "usage: ddpsim replay FILE [--seed N] [--accelerator NAME] [--trace FILE]\n"
            "                     [--trace-chrome FILE] [--timeline] [--plugin NAME|PATH.so]\n\n"
            "Runs one scenario exactly as `ddpsim run` or `ddpsim explore` did (same\n"
            "seed, same schedule) and prints every rank's outcome, the verdict and the\n"
            "trace hash: two replays with the same seed print the same hash.\n"
            "Without --accelerator it replays each accelerator the scenario lists.\n"
            "It takes the options of ddpsim run too, but for those that select runs\n"
            "(-k, -x, --last-failed, --shard, --results). Exit status as for ddpsim run.\n");
}

/* A run of the list: its scenario and accelerator, its place in the whole
 * list (index) and on the command line (file), the table's columns and the
 * result: a row of a result file as it is (--results, ddpsim merge). */
typedef ddp_shard_row_t job_t;

typedef struct run_opts {
    uint64_t seed;
    FILE *trace;
    const char *chrome;
    int chrome_per_run; /* several runs: one --trace-chrome file each */
    int verbose, timeline;
    int real, netns; /* --real [--netns]: real processes */
    int64_t exec_grace_ns; /* --grace */
    int no_host_store;     /* --no-host-store */
    int env_clear;         /* --env-clear */
    int cold;              /* --cold */
    const char *keep_output; /* --keep-output DIR */
    int64_t wall_limit_ns; /* --wall-limit */
    int explain_rank;      /* --compare: rank + 1 whose simulated message to keep */
    ddp_art_t art;         /* --artifacts DIR [--artifacts-all] */
} run_opts_t;

/* The outcome class `--compare` puts side by side: ok, or the error class
 * of the most causal failing rank (harness/root_cause.c), or skip. */
static const char *outcome_class(const ddp_scn_result_t *r, char *buf, size_t n)
{
    if (r->skipped)
        snprintf(buf, n, "skip");
    else if (r->ranks && r->ok == r->ranks && !r->first_code)
        snprintf(buf, n, "ok");
    else
        snprintf(buf, n, "%s", r->first_code ? ddp_scn_error_class(r->first_code)
                               : r->crashed ? "crashed" : "failed");
    return buf;
}

/* Real runs: SIGINT/SIGTERM/SIGHUP stop the run in progress (its
 * processes killed, namespaces deleted) and the ones after it. */
static volatile sig_atomic_t g_interrupted;

static void on_interrupt(int sig)
{
    g_interrupted = sig;
}

static const char *base_name(const char *path, char *buf, size_t n)
{
    const char *b = strrchr(path, '/');
    snprintf(buf, n, "%s", b ? b + 1 : path);
    char *dot = strrchr(buf, '.');
    if (dot && !strcmp(dot, ".scn"))
        *dot = '\0';
    return buf;
}

/* --trace-chrome PATH of one run among several: PATH with the scenario and
 * the accelerator before its extension (t.json: t.clean-start.ddp.json),
 * so that every run's trace is kept. */
static const char *chrome_path(const run_opts_t *ro, const job_t *j, char *buf, size_t n)
{
    if (!ro->chrome_per_run)
        return ro->chrome;
    char b[256];
    const char *slash = strrchr(ro->chrome, '/');
    const char *dot = strrchr(slash ? slash : ro->chrome, '.');
    int stem = dot && dot != (slash ? slash + 1 : ro->chrome)
                   ? (int)(dot - ro->chrome) : (int)strlen(ro->chrome);
    snprintf(buf, n, "%.*s.%s.%s%s", stem, ro->chrome, base_name(j->path, b, sizeof b),
             j->accel, ro->chrome + stem);
    return buf;
}

/* Every run's --trace-chrome file before the first run (exit 2 when one
 * cannot be written): with several runs each has a name of its own, which
 * the check of PATH alone does not cover (too long, a folder there). */
static int check_chrome_paths(const char *cmd, const run_opts_t *ro, const job_t *jobs,
                              int njobs)
{
    for (int i = 0; ro->chrome && ro->chrome_per_run && i < njobs; i++) {
        char path[1200];
        if (ddp_opt_writable(cmd, "--trace-chrome", chrome_path(ro, &jobs[i], path,
                                                                sizeof path)))
            return 2;
    }
    return 0;
}

/* --artifacts: run j's folder, when it keeps one (a failure to write it
 * fails the run). */
static const char *actual_outcome(const job_t *j, char *buf, size_t n);
static void keep_artifacts(job_t *j, const run_opts_t *ro, const char *trace)
{
    if (!ddp_art_keeps(&ro->art, j))
        return;
    char a[32];
    snprintf(j->actual, sizeof j->actual, "%s", actual_outcome(j, a, sizeof a));
    if (ddp_art_write(&ro->art, j, trace) == 0)
        return;
    char name[400];
    fprintf(stderr, "ddpsim run: --artifacts: %s: %s\n",
            ddp_art_name(&ro->art, j, name, sizeof name), ddp_err_message());
    j->r.pass = 0;
}

static void run_job(ddp_sys_t *sys, job_t *j, const run_opts_t *ro)
{
    if (ro->real) {
        ddp_real_opts_t ropts = {.ddpsim = ddp_tool_self, .netns = ro->netns,
                                 .seed = ro->seed, .report = j->report,
                                 .report_len = sizeof j->report,
                                 .interrupted = &g_interrupted,
                                 .exec_grace_ns = ro->exec_grace_ns,
                                 .no_host_store = ro->no_host_store,
                                 .env_clear = ro->env_clear,
                                 .cold = ro->cold,
                                 .keep_output = ro->art.dir ? ro->art.dir : ro->keep_output,
                                 .keep_failing = ro->art.dir && !ro->art.all,
                                 /* per-run files: $TMPDIR, else /tmp */
                                 .tmpdir = ddp_env_get(ddp_sys_env(sys), "TMPDIR")};
        if (ropts.tmpdir && !*ropts.tmpdir)
            ropts.tmpdir = NULL;
        int64_t t0 = ddp_sys_now(sys);
        j->rc = ddp_real_run(sys, j->s, j->accel, &ropts, &j->r);
        j->r.wall_s = (double)(ddp_sys_now(sys) - t0) / 1e9;
        if (j->rc && !j->r.why[0])
            snprintf(j->r.why, sizeof j->r.why, "%s", ddp_err_message());
        keep_artifacts(j, ro, NULL);
        return;
    }
    char *tr = NULL;
    int keep = ro->chrome || ro->timeline || ro->art.dir;
    ddp_scn_run_opts_t o = {.seed = ro->seed, .trace = ro->trace,
                            .wall_limit_ns = ro->wall_limit_ns,
                            .explain_rank = ro->explain_rank,
                            .keep_trace = keep, .trace_out = keep ? &tr : NULL,
                            .report = j->report, .report_len = sizeof j->report};
    int64_t t0 = ddp_sys_now(sys);
    j->rc = ddp_scenario_run(j->s, j->accel, &o, &j->r);
    j->r.wall_s = (double)(ddp_sys_now(sys) - t0) / 1e9;
    if (j->rc && !j->r.why[0])
        snprintf(j->r.why, sizeof j->r.why, "%s", ddp_err_message());
    if (tr && ro->timeline)
        ddp_sim_export_timeline(tr, stdout);
    if (tr && ro->chrome) {
        char path[1200];
        const char *cp = chrome_path(ro, j, path, sizeof path);
        if (ddp_tool_write_chrome(tr, cp) != 0) {
            fprintf(stderr, "ddpsim: %s\n", ddp_err_message());
            j->r.pass = 0;
        }
    }
    keep_artifacts(j, ro, tr);
    free(tr);
}

/* --jobs: worker k runs jobs k, k+N, ... and writes them to its tmpfile. */
typedef struct worker {
    job_t *jobs;
    int njobs, k, n;
    const run_opts_t *ro;
    FILE *out;
} worker_t;

static int worker_main(ddp_sys_t *sys, void *arg)
{
    worker_t *w = arg;
    for (int i = w->k; i < w->njobs; i += w->n) {
        run_job(sys, &w->jobs[i], w->ro);
        if (fwrite(&w->jobs[i].r, sizeof w->jobs[i].r, 1, w->out) != 1 ||
            fwrite(&w->jobs[i].rc, sizeof w->jobs[i].rc, 1, w->out) != 1 ||
            fwrite(w->jobs[i].report, sizeof w->jobs[i].report, 1, w->out) != 1)
            return 1;
    }
    return fflush(w->out) ? 1 : 0;
}

static int run_parallel(ddp_sys_t *sys, job_t *jobs, int njobs, int n,
                        const run_opts_t *ro)
{
    worker_t *w = calloc((size_t)n, sizeof *w);
    ddp_pid_t *pids = calloc((size_t)n, sizeof *pids);
    int rc = 0;
    if (!w || !pids)
        rc = -12;
    for (int k = 0; rc == 0 && k < n; k++) {
        w[k] = (worker_t){.jobs = jobs, .njobs = njobs, .k = k, .n = n, .ro = ro,
                          .out = tmpfile()};
        if (!w[k].out) {
            rc = ddp_err_set(-5, "cannot create a temporary file for worker %d", k);
            break;
        }
        fflush(NULL);
        ddp_spawn_t sp = {.env = ddp_sys_env(sys), .entry = worker_main, .arg = &w[k],
                          .name = "ddpsim-run-worker"};
        if ((rc = ddp_sys_spawn(sys, &sp, &pids[k])) != 0)
            break;
    }
    for (int k = 0; k < n && w; k++) {
        if (!w[k].out)
            continue;
        int st = -1;
        if (pids[k])
            ddp_sys_wait(sys, pids[k], &st, DDP_DEADLINE_NEVER);
        rewind(w[k].out);
        for (int i = k; i < njobs; i += n) {
            if (st != 0 ||
                fread(&jobs[i].r, sizeof jobs[i].r, 1, w[k].out) != 1 ||
                fread(&jobs[i].rc, sizeof jobs[i].rc, 1, w[k].out) != 1 ||
                fread(jobs[i].report, sizeof jobs[i].report, 1, w[k].out) != 1) {
                snprintf(jobs[i].r.accelerator, sizeof jobs[i].r.accelerator, "%s",
                         jobs[i].accel);
                snprintf(jobs[i].r.why, sizeof jobs[i].r.why,
                         "worker process %d failed (exit status %d)", k, st);
                jobs[i].r.pass = 0;
                jobs[i].rc = -1;
            }
        }
        fclose(w[k].out);
    }
    free(w);
    free(pids);
    return rc;
}

static void xml_text(FILE *f, const char *s)
{
    ddp_tool_xml_text(f, s);
}

/* The scenario file as JUnit's classname: its path as given, without
 * ".scn" (viewers read a dot in a classname as a package separator). */
static const char *junit_class(const char *path, char *buf, size_t n)
{
    size_t len = strlen(path);
    int scn = len > 4 && !strcmp(path + len - 4, ".scn");
    snprintf(buf, n, "%.*s", (int)(scn ? len - 4 : len), path);
    return buf;
}

/* One testcase per run, named scenario[accelerator] and classed by its
 * file, so that a viewer groups an accelerator's runs under their
 * scenario; the outcome text (the table's row and the per-process lines)
 * goes to system-out. Valid against tests/junit.xsd (Jenkins' schema). */
static int write_junit(const char *path, const job_t *jobs, int n)
{
    ddp_out_t *o;
    int rc = ddp_out_open(path, "the JUnit file", &o);
    if (rc)
        return rc;
    FILE *f = ddp_out_file(o);
    int failures = 0, skipped = 0;
    double total = 0;
    for (int i = 0; i < n; i++) {
        failures += !jobs[i].r.pass && !jobs[i].r.skipped && !jobs[i].r.vacuous;
        skipped += jobs[i].r.skipped || jobs[i].r.vacuous;
        total += jobs[i].r.wall_s;
    }
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<testsuites name=\"ddpsim run\" tests=\"%d\" failures=\"%d\" errors=\"0\" "
               "skipped=\"%d\" time=\"%.3f\">\n<testsuite name=\"scenarios\" tests=\"%d\" "
               "failures=\"%d\" errors=\"0\" skipped=\"%d\" time=\"%.3f\">\n",
            n, failures, skipped, total, n, failures, skipped, total);
    for (int i = 0; i < n; i++) {
        const job_t *j = &jobs[i];
        char b[512];
        fprintf(f, "  <testcase classname=\"");
        xml_text(f, junit_class(j->path, b, sizeof b));
        fprintf(f, "\" name=\"");
        xml_text(f, base_name(j->path, b, sizeof b));
        fprintf(f, "[%s]\" time=\"%.3f\">\n", j->accel, j->r.wall_s);
        if (j->r.skipped || j->r.vacuous) { /* a vacuous run tested nothing */
            fprintf(f, "    <skipped message=\"");
            xml_text(f, j->r.why);
            fprintf(f, "\"/>\n");
        } else if (!j->r.pass) {
            fprintf(f, "    <failure message=\"");
            xml_text(f, j->r.why);
            fprintf(f, "\">");
            xml_text(f, j->r.first_error[0] ? j->r.first_error : j->r.why);
            fprintf(f, "</failure>\n");
        }
        fprintf(f, "    <system-out>");
        /* The table's row: its time column is virtual, a real run's wall. */
        snprintf(b, sizeof b, "%s: \"%s\"\nexpected %s, actual %s, verdict %s, time %.3f s, "
                              "%d connect retries\n",
                 j->path, j->title, j->expected, j->actual,
                 j->r.skipped ? "skip" : j->r.pass ? "ok" : j->r.vacuous ? "vacuous" : "FAIL",
                 (double)j->r.virtual_ns / 1e9, j->r.retries);
        xml_text(f, b);
        if (j->r.first_error[0]) {
            xml_text(f, "first error: ");
            xml_text(f, j->r.first_error);
            xml_text(f, "\n");
        }
        xml_text(f, j->report);
        fprintf(f, "</system-out>\n  </testcase>\n");
    }
    fprintf(f, "</testsuite>\n</testsuites>\n");
    return ddp_out_commit(o);
}

static int load_all(char **files, int nfiles, ddp_scenario_t **sc, const char *cmd)
{
    int bad_input = 0;
    for (int i = 0; i < nfiles; i++) {
        char err[1024];
        if (ddp_scenario_load(files[i], &sc[i], err, sizeof err) != 0) {
            fprintf(stderr, "ddpsim %s: %s\n", cmd, err);
            bad_input = 1;
        }
    }
    return bad_input;
}

/* Shared option parsing of run and replay. */
typedef struct cli {
    const char *accel, *trace_path, *chrome, *junit, *tag, *markdown, *exec, *results;
    const char *keyword, *last_failed;
    const char *plugin; /* --plugin: the scenarios that name none run it */
    int compare, exitfirst;
    int repeat; /* --compare --repeat N: each real run N times */
    ddp_shard_t shard;
    run_opts_t ro;
    int jobs, progress;
    char **files;
    int nfiles;
} cli_t;

/* --accelerator: a name, all, or first (each scenario's first listed). */
static int accel_choice(const char *value, void *dst)
{
    if (value && !strcmp(value, "first")) {
        *(const char **)dst = value;
        return 0;
    }
    return ddp_opt_accel_or_all(value, dst);
}

static const char *accel_choice_form(void)
{
    static char buf[320];
    snprintf(buf, sizeof buf, "%s, or first (each scenario's first accelerator)",
             ddp_opt_accel_form(1));
    return buf;
}

static int parse_cli(const char *cmd, int argc, char **argv, cli_t *c,
                     void (*usage)(FILE *), int replay)
{
    c->accel = "all";
    c->jobs = 1;
    c->progress = isatty(2) ? DDP_PROGRESS_BAR : DDP_PROGRESS_LINES;
    const char *file = "a file to write";
    const ddp_opt_t opts[] = {
        OPT_FN("accelerator", &c->accel, accel_choice, accel_choice_form()),
        OPT_U64("seed", &c->ro.seed, 1),
        OPT_STR("tag", &c->tag, "a tag word (real, netns, ...)"),
        OPT_STR_SHORT("keyword", 'k', &c->keyword, "a part of a scenario file, title or "
                                                  "accelerator"),
        OPT_FLAG("exitfirst", 'x', &c->exitfirst, 1),
        OPT_STR("last-failed", &c->last_failed, "a --results file of an earlier run"),
        OPT_STR("trace", &c->trace_path, file),
        OPT_STR("trace-chrome", &c->chrome, file),
        OPT_STR("junit", &c->junit, file),
        OPT_STR("markdown", &c->markdown, file),
        OPT_STR("exec", &c->exec, "a command line (every rank's program)"),
        OPT_FN("plugin", &c->plugin, ddp_opt_plugin_name, ddp_opt_plugin_form()),
        OPT_NS_POS("grace", &c->ro.exec_grace_ns, 3600),
        OPT_FLAG("no-host-store", 0, &c->ro.no_host_store, 1),
        OPT_FLAG("env-clear", 0, &c->ro.env_clear, 1),
        OPT_FLAG("cold", 0, &c->ro.cold, 1),
        OPT_FN("keep-output", &c->ro.keep_output, ddp_opt_dir, DDP_OPT_DIR_FORM),
        OPT_FN("artifacts", &c->ro.art.dir, ddp_opt_dir, DDP_OPT_DIR_FORM),
        OPT_FLAG("artifacts-all", 0, &c->ro.art.all, 1),
        OPT_NS_POS("wall-limit", &c->ro.wall_limit_ns, 86400),
        OPT_INT("jobs", &c->jobs, 1, 64),
        OPT_FN("shard", &c->shard, ddp_opt_shard, DDP_OPT_SHARD_FORM),
        OPT_STR("results", &c->results, file),
        OPT_FLAG("verbose", 'v', &c->ro.verbose, 1),
        OPT_FLAG("timeline", 0, &c->ro.timeline, 1),
        OPT_FLAG("progress", 0, &c->progress, 1),
        OPT_FLAG("no-progress", 0, &c->progress, 0),
        OPT_FLAG("real", 0, &c->ro.real, 1),
        OPT_FLAG("netns", 0, &c->ro.netns, 1),
        OPT_FLAG("compare", 0, &c->compare, 1),
        OPT_INT("repeat", &c->repeat, 1, 100),
        OPT_HELP,
    };
    ddp_opt_spec_t sp = {DDP_OPT_SPEC(cmd, opts, usage), .min_operands = 1,
                         .max_operands = replay ? 1 : -1,
                         .operands = replay ? "exactly one scenario FILE"
                                            : "at least one scenario FILE"};
    int rc = ddp_opt_parse(&sp, argc, argv, &c->nfiles);
    if (rc)
        return rc;
    c->files = argv + 1;
    c->ro.real |= c->ro.netns | c->compare; /* --netns and --compare run for real */
    if (c->markdown && !c->compare) {
        fprintf(stderr, "ddpsim %s: --markdown FILE writes the --compare table; expected "
                        "--compare with it\n", cmd);
        return 2;
    }
    if (replay && (c->shard.n || c->results)) {
        fprintf(stderr, "ddpsim replay: --shard and --results are ddpsim run's (replay "
                        "runs one scenario); expected neither\n");
        return 2;
    }
    if (replay && (c->keyword || c->exitfirst || c->last_failed)) {
        fprintf(stderr, "ddpsim replay: -k, -x and --last-failed select among ddpsim "
                        "run's runs (replay runs one scenario); expected none of them\n");
        return 2;
    }
    if (c->ro.art.all && !c->ro.art.dir) {
        fprintf(stderr, "ddpsim %s: --artifacts-all keeps a folder for every run under "
                        "--artifacts DIR; expected --artifacts DIR with it\n", cmd);
        return 2;
    }
    if (c->ro.art.dir && (replay || c->compare || c->ro.keep_output)) {
        fprintf(stderr, "ddpsim %s: --artifacts is ddpsim run's, and keeps a foreign "
                        "program's output itself; expected it without %s\n", cmd,
                replay ? "replay" : c->compare ? "--compare" : "--keep-output");
        return 2;
    }
    if (c->repeat > 1 && !c->compare) {
        fprintf(stderr, "ddpsim %s: --repeat N runs each real run of --compare N times; "
                        "expected --compare with it\n", cmd);
        return 2;
    }
    if (c->results && c->compare) {
        fprintf(stderr, "ddpsim %s: --results keeps the outcome table's runs, not the "
                        "--compare table; expected one of them\n", cmd);
        return 2;
    }
    /* Every output path before the first run: a bad one wastes no run. */
    if (ddp_opt_writable(cmd, "--results", c->results) ||
        ddp_opt_writable(cmd, "--trace", c->trace_path) ||
        ddp_opt_writable(cmd, "--trace-chrome", c->chrome) ||
        ddp_opt_writable(cmd, "--junit", c->junit) ||
        ddp_opt_writable(cmd, "--markdown", c->markdown))
        return 2;
    return 0;
}

/* ---- the table ---- */

/* The width messages are wrapped to: COLUMNS, else the terminal's, else 80. */
static int out_width(ddp_sys_t *sys)
{
    long long cols;
    const char *v = ddp_env_get(ddp_sys_env(sys), "COLUMNS");
    if (v && ddp_opt_int(v, 20, 10000, &cols) == 0)
        return (int)cols;
    struct winsize ws;
    if (isatty(1) && ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20)
        return ws.ws_col;
    return 80;
}

/* text, word-wrapped to width: the first line after first (already
 * printed, first_len columns), the others indented by indent. A word
 * longer than a line is printed whole: nothing is ever cut. */
static void wrap(const char *text, int first_len, int indent, int width)
{
    int col = first_len, at_start = 1;
    for (const char *p = text; *p;) {
        while (*p == ' ')
            p++;
        size_t w = strcspn(p, " ");
        if (!w)
            break;
        if (!at_start && col + 1 + (int)w > width) {
            printf("\n%*s", indent, "");
            col = indent;
            at_start = 1;
        }
        if (!at_start) {
            putchar(' ');
            col++;
        }
        printf("%.*s", (int)w, p);
        col += (int)w;
        at_start = 0;
        p += w;
    }
    putchar('\n');
}

/* "crash+fail+ok+any" from flags, in that order. */
static const char *outcome_words(int crash, int fail, int ok, int any, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s%s%s%s%s%s", crash ? "crash" : "",
             crash && (fail || ok || any) ? "+" : "", fail ? "fail" : "",
             fail && (ok || any) ? "+" : "", ok ? "ok" : "", ok && any ? "+" : "",
             any ? "any" : "");
    return buf;
}

/* What the scenario's expect lines ask for. */
static const char *expected_outcome(const ddp_scenario_t *s, char *buf, size_t n)
{
    int f[4] = {0};
    for (int i = 0; i < s->nexpect; i++)
        f[s->expect[i].kind] = 1;
    return outcome_words(f[DDP_EXPECT_CRASHED], f[DDP_EXPECT_FAIL], f[DDP_EXPECT_OK],
                         f[DDP_EXPECT_INVARIANTS], buf, n);
}

/* What happened: the ranks' outcomes (every process's when none got to be
 * a rank), "skip", or "-" for a run that did not run. */
static const char *actual_outcome(const job_t *j, char *buf, size_t n)
{
    const ddp_scn_result_t *r = &j->r;
    if (r->skipped)
        return "skip";
    if (j->rc || !strncmp(r->why, "not run", 7))
        return "-";
    int crash = r->crashed > 0, fail = r->failed || r->stopped || (!r->ranks && r->first_error[0]);
    int ok = r->ok > 0;
    /* The counts are of ranks; a run that passed also did what each expect
     * line says (a node that died before its processes became ranks). */
    for (int i = 0; (r->pass || r->vacuous) && i < j->s->nexpect; i++) {
        crash |= j->s->expect[i].kind == DDP_EXPECT_CRASHED;
        fail |= j->s->expect[i].kind == DDP_EXPECT_FAIL;
        ok |= j->s->expect[i].kind == DDP_EXPECT_OK;
    }
    if (!crash && !fail && !ok)
        return "none";
    return outcome_words(crash, fail, ok, 0, buf, n);
}

typedef struct table {
    int name_w, exp_w, act_w, width;
} table_t;

/* --artifacts: "DIR/NAME" of run j's folder, "" when it keeps none. */
static const char *folder_of(const ddp_art_t *a, const job_t *j, char *buf, size_t n)
{
    char name[400];
    buf[0] = '\0';
    if (a && ddp_art_keeps(a, j))
        snprintf(buf, n, "%s/%s", a->dir, ddp_art_name(a, j, name, sizeof name));
    return buf;
}

static void print_row(const job_t *j, const table_t *t, const ddp_art_t *art)
{
    char b[256];
    const ddp_scn_result_t *r = &j->r;
    char virt[32] = "-";
    if (!r->skipped)
        snprintf(virt, sizeof virt, "%.3f s", (double)r->virtual_ns / 1e9);
    printf("%-*s %-11s %-*s %-*s %-7s %10s %7d\n", t->name_w,
           base_name(j->path, b, sizeof b), j->accel, t->exp_w, j->expected, t->act_w,
           j->actual, r->skipped ? "skip" : r->pass ? "ok" : r->vacuous ? "vacuous" : "FAIL",
           virt, r->retries);
    if (!r->pass && !r->skipped) {
        printf("    why: ");
        wrap(r->why, 9, 9, t->width);
    }
    if (r->output[0] && !r->skipped) { /* a foreign job's kept output */
        printf("    output: ");
        wrap(r->output, 12, 12, t->width);
    }
    char folder[1400];
    if (*folder_of(art, j, folder, sizeof folder)) {
        printf("    folder: ");
        wrap(folder, 12, 12, t->width);
    }
}


/* The message a run leaves under the table: its first error, or why it
 * was skipped; "" none. */
static const char *message_of(const job_t *j)
{
    if (j->r.skipped)
        return !strncmp(j->r.why, "skipped: ", 9) ? j->r.why + 9 : j->r.why;
    return j->r.first_error;
}

/* Two runs share a message under the table: the same text, skipped or
 * not, and the same failure classes. */
static int same_message(const job_t *a, const job_t *b)
{
    return a->r.skipped == b->r.skipped && !strcmp(message_of(a), message_of(b)) &&
           !strcmp(a->r.classes, b->r.classes);
}

/* Under the table, each scenario's messages in full, once per distinct
 * text, with the accelerators that gave it. */
static void print_messages(const job_t *jobs, int njobs, int width, const ddp_art_t *art)
{
    int any = 0;
    for (int i = 0; i < njobs; i++) {
        const char *m = message_of(&jobs[i]);
        int seen = 0;
        for (int k = i - 1; k >= 0 && jobs[k].file == jobs[i].file && !seen; k--)
            seen = same_message(&jobs[k], &jobs[i]);
        if (!*m || seen)
            continue;
        if (!any++) {
            printf("\n");
            wrap("messages in full (each run's first error, of its most causal "
                 "failing rank, or why it was skipped; the runs of a scenario with "
                 "the same text share one):", 0, 0, width);
        }
        char b[256], head[512];
        int off = snprintf(head, sizeof head, "%s (", base_name(jobs[i].path, b, sizeof b));
        for (int k = i, nk = 0; k < njobs && jobs[k].file == jobs[i].file; k++)
            if (same_message(&jobs[k], &jobs[i]) &&
                off < (int)sizeof head)
                off += snprintf(head + off, sizeof head - (size_t)off, "%s%s",
                                nk++ ? ", " : "", jobs[k].accel);
        /* a run whose failures are of several classes names them all */
        int several = !jobs[i].r.skipped && strchr(jobs[i].r.classes, ',');
        if (off < (int)sizeof head)
            snprintf(head + off, sizeof head - (size_t)off, ")%s%s%s%s:",
                     jobs[i].r.skipped ? ", skipped" : jobs[i].r.first_code ? ", " : "",
                     jobs[i].r.skipped || !jobs[i].r.first_code
                         ? ""
                         : ddp_scn_error_class(jobs[i].r.first_code),
                     several ? "; failures: " : "", several ? jobs[i].r.classes : "");
        printf("  ");
        wrap(head, 2, 6, width);
        printf("      ");
        wrap(m, 6, 6, width);
        for (int k = i; k < njobs && jobs[k].file == jobs[i].file; k++) {
            char folder[1400];
            if (same_message(&jobs[k], &jobs[i]) && *folder_of(art, &jobs[k], folder,
                                                                sizeof folder)) {
                printf("      folder: ");
                wrap(folder, 14, 14, width);
            }
        }
    }
}

static void print_legend(int width, int ok, int expected_fail, int real)
{
    char tail[300] = "";
    if (expected_fail)
        snprintf(tail, sizeof tail, " %d of the %d ok runs are expected failures.",
                 expected_fail, ok);
    if (real) /* the column a simulated run calls virtual */
        snprintf(tail + strlen(tail), sizeof tail - strlen(tail),
                 " wall: the real time from the run's start until its last process "
                 "ended; retries: the failed connects of ddpsim's processes.");
    char text[1024];
    snprintf(text, sizeof text,
             "expected: what the scenario's expect lines ask for; actual: what its ranks "
             "did (ok: connected and ended cleanly; fail: failed with an error; crash: "
             "killed by a fault; any: only the invariants are checked). verdict ok: the "
             "expected outcome happened and every invariant held, so fail next to ok is "
             "a failure the scenario expects; FAIL: it did not (the why: line says which "
             "expectation or invariant); skip: it could not run (the reason is above).%s",
             tail);
    printf("\n");
    wrap(text, 0, 0, width);
}

/* The whole table: the header, each scenario's title, then its rows. */
static void print_table(ddp_sys_t *sys, const ddp_run_report_t *rep, const job_t *jobs,
                        int njobs, int ok, int expected_fail)
{
    table_t t = {.name_w = 8, .exp_w = 8, .act_w = 6, .width = out_width(sys)};
    for (int i = 0; i < njobs; i++) {
        char b[256];
        int l = (int)strlen(base_name(jobs[i].path, b, sizeof b));
        int el = (int)strlen(jobs[i].expected), al = (int)strlen(jobs[i].actual);
        t.name_w = l > t.name_w ? l : t.name_w;
        t.exp_w = el > t.exp_w ? el : t.exp_w;
        t.act_w = al > t.act_w ? al : t.act_w;
    }
    printf("%-*s %-11s %-*s %-*s %-7s %10s %7s\n", t.name_w, "scenario", "accelerator",
           t.exp_w, "expected", t.act_w, "actual", "verdict", rep->real ? "wall" : "virtual",
           "retries");
    for (int i = 0; i < njobs; i++) {
        if (i == 0 || jobs[i].file != jobs[i - 1].file) {
            char b[256];
            char title[sizeof jobs[i].title + 2];
            printf("%s: ", base_name(jobs[i].path, b, sizeof b));
            snprintf(title, sizeof title, "\"%s\"", jobs[i].title);
            wrap(title, (int)strlen(b) + 2, 4, t.width);
        }
        print_row(&jobs[i], &t, rep->art);
        if (rep->verbose)
            printf("%s", jobs[i].report);
        if (rep->replay)
            printf("    seed %llu, trace hash %016llx\n",
                   (unsigned long long)(rep->seed ? rep->seed : jobs[i].s->seed),
                   (unsigned long long)jobs[i].r.trace_hash);
    }
    print_messages(jobs, njobs, t.width, rep->art);
    print_legend(t.width, ok, expected_fail, rep->real);
}

int ddp_run_report(ddp_sys_t *sys, const ddp_run_report_t *rep, const job_t *jobs,
                   int njobs)
{
    const char *cmd = rep->cmd;
    int failed = 0, skipped = 0, expected_fail = 0, vacuous = 0;
    for (int i = 0; i < njobs; i++) {
        failed += !jobs[i].r.pass && !jobs[i].r.skipped && !jobs[i].r.vacuous;
        vacuous += jobs[i].r.vacuous;
        skipped += jobs[i].r.skipped;
        expected_fail += jobs[i].r.pass && !jobs[i].r.skipped && jobs[i].r.first_error[0];
    }
    print_table(sys, rep, jobs, njobs, njobs - failed - skipped - vacuous, expected_fail);
    printf("%d run(s) of %d scenario file(s)", njobs, rep->nfiles);
    if (rep->shard.n)
        printf(" (shard %d/%d of %lld run(s))", rep->shard.k, rep->shard.n, rep->total);
    printf(": %d ok, %d failed", njobs - failed - skipped - vacuous, failed);
    if (vacuous)
        printf(", %d vacuous", vacuous);
    if (skipped)
        printf(", %d skipped", skipped);
    printf(" (%.1f s)\n", rep->wall_s);
    if (rep->junit && write_junit(rep->junit, jobs, njobs) != 0) {
        fprintf(stderr, "ddpsim %s: %s\n", cmd, ddp_err_message());
        failed++;
    }
    int rc = failed || vacuous ? 1 : 0;
    if (!failed && !vacuous && njobs && skipped == njobs) {
        /* Nothing was tested: not a pass. */
        char b[256];
        fprintf(stderr, "ddpsim %s: every run was skipped (%d of %d), so nothing was tested "
                        "(exit 3); the first: %s %s: %s\n", cmd, skipped, njobs,
                base_name(jobs[0].path, b, sizeof b), jobs[0].accel, message_of(&jobs[0]));
        rc = 3;
    }
    if (rep->interrupted) {
        fprintf(stderr, "ddpsim %s: interrupted by signal %d\n", cmd, rep->interrupted);
        rc = 128 + rep->interrupted;
    }
    return rc;
}

/* A job of the list: what the table and a result file need of it. */
static void new_job(job_t *j, const ddp_scenario_t *s, int file, const char *path,
                    const char *accel, long long index)
{
    memset(j, 0, sizeof *j);
    j->s = s;
    j->file = file;
    j->index = index;
    snprintf(j->path, sizeof j->path, "%s", path);
    snprintf(j->title, sizeof j->title, "%s", s->name);
    snprintf(j->accel, sizeof j->accel, "%s", accel);
    expected_outcome(s, j->expected, sizeof j->expected);
}

/* FNV-1a over the run list's (file, accelerator) pairs: shards of one
 * sweep have the same. */
static uint64_t list_hash_add(uint64_t h, const char *path, const char *accel)
{
    for (int k = 0; k < 2; k++) {
        for (const char *p = k ? accel : path; *p; p++)
            h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
        h = (h ^ (unsigned char)(k ? '\n' : '\t')) * 0x100000001b3ull;
    }
    return h;
}

/* How --plugin reads on a command line: a loaded plugin's library path. */
static const char *plugin_arg(const char *name)
{
    const char *lib = ddp_plugin_library(ddp_plugin_find(name));
    return lib ? lib : name;
}

/* --results: the runs of this shard, and what its sweep is. */
static int write_results(const cli_t *c, job_t *jobs, int njobs, long long total,
                         uint64_t list_hash, double wall)
{
    ddp_shard_file_t f = {.shard = c->shard.n ? c->shard : (ddp_shard_t){1, 1},
                          .total = total, .runs = njobs, .files = c->nfiles,
                          .interrupted = (int)g_interrupted, .wall_s = wall,
                          .rows = jobs, .nrows = njobs, .cap = njobs};
    snprintf(f.kind, sizeof f.kind, "run");
    snprintf(f.sweep, sizeof f.sweep, "run %lld run(s) of %d file(s), list %016llx, "
             "--accelerator %s --tag %s --seed %llu%s%s%s%s%s", total, c->nfiles,
             (unsigned long long)list_hash, c->accel, c->tag ? c->tag : "(any)",
             (unsigned long long)c->ro.seed, c->ro.netns ? " --netns" : c->ro.real ? " --real" : "",
             c->exec ? " --exec " : "", c->exec ? c->exec : "",
             c->plugin ? " --plugin " : "", c->plugin ? plugin_arg(c->plugin) : "");
    if (ddp_shard_write(&f, c->results) != 0) {
        fprintf(stderr, "ddpsim run: %s\n", ddp_err_message());
        return -1;
    }
    return 0;
}

/* One pair of --compare: the real column (one class, or with --repeat N
 * the classes seen with their counts, the most frequent first), whether
 * it is the simulator's, and the first real run that failed its own
 * expectations (a pair with one is never `yes`). */
typedef struct pair {
    char real[128];
    const char *same; /* "-" (not realisable), yes, race, no */
    char note[200];
} pair_t;

static void pair_judge(pair_t *p, char seen[][32], int *cnt, int n, int runs,
                       const char *sim)
{
    int size = 0, has_sim = 0;
    for (int k = 0; k < n; k++) {
        for (int m = k + 1; m < n; m++) /* by count, ties in order seen */
            if (cnt[m] > cnt[k]) {
                char t[32];
                int c = cnt[m];
                memcpy(t, seen[m], 32), memcpy(seen[m], seen[k], 32), memcpy(seen[k], t, 32);
                cnt[m] = cnt[k], cnt[k] = c;
            }
        has_sim |= !strcmp(seen[k], sim);
        size += n == 1 ? snprintf(p->real + size, sizeof p->real - (size_t)size, "%s", seen[k])
                       : snprintf(p->real + size, sizeof p->real - (size_t)size, "%s%s %d/%d",
                                  k ? ", " : "", seen[k], cnt[k], runs);
        if (size >= (int)sizeof p->real)
            size = (int)sizeof p->real - 1;
    }
    p->same = p->note[0] || !has_sim ? "no" : n == 1 ? "yes" : "race";
}

static void pair_run(ddp_sys_t *sys, const cli_t *c, const job_t *j, const char *sim, pair_t *p)
{
    char seen[8][32];
    int cnt[8] = {0}, n = 0, runs = 0;
    memset(p, 0, sizeof *p);
    if (j->r.skipped) {
        snprintf(p->real, sizeof p->real, "skip");
        snprintf(p->note, sizeof p->note, "%.180s", j->r.why + 9);
        p->same = "-";
        return;
    }
    for (int k = 0; k < (c->repeat > 1 ? c->repeat : 1) && (!k || !g_interrupted); k++) {
        job_t rj = *j;
        if (k)
            run_job(sys, &rj, &c->ro);
        char cls[32];
        outcome_class(&rj.r, cls, sizeof cls);
        int at = 0;
        while (at < n && strcmp(seen[at], cls))
            at++;
        if (at == n && n < 8)
            snprintf(seen[n++], sizeof seen[0], "%s", cls);
        cnt[at < 8 ? at : 7]++;
        runs++;
        if (!rj.r.pass && !p->note[0])
            snprintf(p->note, sizeof p->note, "real run%s: %.160s", runs > 1 ? " (a repeat)" : "",
                     rj.r.why);
    }
    pair_judge(p, seen, cnt, n, runs, sim);
}

/* Under a failed real run: its most causal rank's error beside the
 * simulator's prediction for that rank. */
static void explain(ddp_sys_t *sys, const ddp_scn_result_t *rr, const ddp_scn_result_t *sr)
{
    int w = out_width(sys);
    int col = printf("    real rank %d: ", rr->first_rank);
    wrap(rr->first_error, col, 6, w);
    col = printf("    simulator:   ");
    wrap(sr->rank_error[0] ? sr->rank_error
         : sr->ranks > rr->first_rank ? "ok (it did not fail)"
                                      : "no such rank", col, 6, w);
}

static void md_row(FILE *md, const char *name, const job_t *j, const char *sim, pair_t *p)
{
    for (char *q = p->note; *q; q++)
        if (*q == '|')
            *q = '/';
    fprintf(md, "| %s | %s | %s | %s | %s | %s |\n", name, j->accel, sim, p->real,
            !strcmp(p->same, "no") ? "**no**" : p->same, p->note);
}

/* --compare: each job also in the simulator; both outcome classes side
 * by side (the real results are in jobs already; --repeat N runs each
 * real one N-1 times more). Exit 1 if any pair differs (a race is
 * counted apart: the simulator's class is among the real ones). */
static int compare(ddp_sys_t *sys, const cli_t *c, job_t *jobs, int njobs, double wall)
{
    ddp_out_t *mdo = NULL;
    if (c->markdown && ddp_out_open(c->markdown, "the Markdown table", &mdo)) {
        fprintf(stderr, "ddpsim run: %s\n", ddp_err_message());
        return 2;
    }
    FILE *md = mdo ? ddp_out_file(mdo) : NULL;
    run_opts_t sim_ro = c->ro;
    sim_ro.real = sim_ro.netns = 0;
    int n[4] = {0}; /* same, different, race, skipped */
    printf("%-28s %-12s %-12s %-12s %s\n", "scenario", "accelerator", "simulator",
           c->ro.netns ? "real (netns)" : "real", "same");
    if (md)
        fprintf(md, "| scenario | accelerator | simulator | real%s | same | note |\n"
                    "|---|---|---|---|---|---|\n", c->ro.netns ? " (netns)" : "");
    for (int i = 0; i < njobs; i++) {
        job_t sj = jobs[i];
        const ddp_scn_result_t *rr = &jobs[i].r;
        int why_rank = !rr->skipped && rr->first_error[0] && rr->first_rank >= 0;
        sim_ro.explain_rank = why_rank ? rr->first_rank + 1 : 0;
        run_job(sys, &sj, &sim_ro);
        char a[32], name[256];
        pair_t p;
        outcome_class(&sj.r, a, sizeof a);
        pair_run(sys, c, &jobs[i], a, &p);
        n[*p.same == '-' ? 3 : *p.same == 'y' ? 0 : *p.same == 'r' ? 2 : 1]++;
        base_name(jobs[i].path, name, sizeof name);
        printf("%-28s %-12s %-12s %-12s %s\n", name, jobs[i].accel, a, p.real,
               !strcmp(p.same, "no") ? "NO" : p.same);
        if (why_rank)
            explain(sys, rr, &sj.r);
        if (md)
            md_row(md, name, &jobs[i], a, &p);
    }
    printf("%d pair(s): %d same, %d different, %d race(s), %d skipped (%.1f s real)\n", njobs,
           n[0], n[1], n[2], n[3], wall);
    if (md) {
        fprintf(md, "\n%d pair(s): %d same, %d different, %d race(s), %d not realisable for "
                    "real.\n", njobs, n[0], n[1], n[2], n[3]);
        if (ddp_out_commit(mdo) != 0) {
            fprintf(stderr, "ddpsim run: %s\n", ddp_err_message());
            return 2;
        }
    }
    return n[1] ? 1 : 0;
}

/* -k: the run's scenario file, title or accelerator contains the pattern,
 * case ignored (pytest's -k, as a plain substring). */
static int keyword_matches(const char *kw, const char *path, const ddp_scenario_t *s,
                           const char *accel)
{
    return !kw || strcasestr(path, kw) || strcasestr(s->name, kw) || strcasestr(accel, kw);
}

/* --last-failed: 1 when the earlier results file f has (path, accel) as a
 * failed run (a skip is no failure). */
static int failed_before(const ddp_shard_file_t *f, const char *path, const char *accel)
{
    for (int i = 0; i < f->nrows; i++)
        if (!f->rows[i].r.pass && !f->rows[i].r.skipped && !strcmp(f->rows[i].path, path) &&
            !strcmp(f->rows[i].accel, accel))
            return 1;
    return 0;
}

/* Reads --last-failed FILE into *f: 1 when it records a failed run (then
 * only those run), 0 when it records none (then every run does, as under
 * pytest), -1 when it cannot be read (the error printed). */
static int read_last_failed(const char *cmd, const char *path, ddp_shard_file_t *f)
{
    if (ddp_shard_read(path, f) != 0) {
        fprintf(stderr, "ddpsim %s: --last-failed: %s; expected a `ddpsim run --results` "
                        "file\n", cmd, ddp_err_message());
        return -1;
    }
    if (strcmp(f->kind, "run")) {
        fprintf(stderr, "ddpsim %s: --last-failed: %s holds explore results; expected "
                        "a `ddpsim run --results` file\n", cmd, path);
        return -1;
    }
    for (int i = 0; i < f->nrows; i++)
        if (!f->rows[i].r.pass && !f->rows[i].r.skipped)
            return 1;
    fprintf(stderr, "ddpsim %s: --last-failed: %s records no failed run; running every "
                    "selected run\n", cmd, path);
    return 0;
}

/* --exec, --plugin and, for real runs, the programs scenarios exec: 0, or
 * the exit status (2, 127) after saying what was wrong. */
static int apply_overrides(ddp_sys_t *sys, const cli_t *c, ddp_scenario_t **sc, const char *cmd)
{
    /* --exec: every scenario's ranks run this program (as `exec` in the
     * file would say); a program that is not there runs nothing. */
    if (c->exec && strlen(c->exec) >= sizeof sc[0]->exec) {
        fprintf(stderr, "ddpsim %s: --exec: at most %zu characters\n", cmd,
                sizeof sc[0]->exec - 1);
        return 2;
    }
    for (int i = 0; c->exec && i < c->nfiles; i++)
        snprintf(sc[i]->exec, sizeof sc[i]->exec, "%s", c->exec);
    /* --plugin: what a scenario without a plugin line runs (those naming
     * one are about that plugin, its phases, and keep it). */
    for (int i = 0; c->plugin && i < c->nfiles; i++)
        if (!sc[i]->plugin[0])
            ddp_scenario_use_plugin(sc[i], ddp_plugin_find(c->plugin));
    for (int i = 0; c->ro.real && i < c->nfiles; i++)
        if (sc[i]->exec[0] && ddp_real_check_exec(sys, sc[i]->exec) != 0) {
            fprintf(stderr, "ddpsim %s: %s: %s\n", cmd, c->files[i], ddp_err_message());
            return 127;
        }
    return 0;
}

/* The run list: files as given, each times the accelerators in the
 * registry's order; --shard keeps the runs it owns (docs/sweeps.md).
 * *total counts the runs of the whole list (all shards), *list_hash
 * hashes them; jobs gets this shard's. last: --last-failed's runs (NULL:
 * every run). */
static int list_runs(const cli_t *c, ddp_scenario_t **sc, const ddp_shard_file_t *last,
                     job_t *jobs, long long *total, uint64_t *list_hash)
{
    int njobs = 0;
    for (int i = 0; i < c->nfiles; i++) {
        if (c->tag && !ddp_scenario_has_tag(sc[i], c->tag))
            continue;
        int first = !strcmp(c->accel, "first");
        for (size_t a = 0; a < ddp_accel_count(); a++) {
            const char *name = ddp_accel_at(a)->name;
            if (first && sc[i]->naccels && strcmp(sc[i]->accels[0], name))
                continue; /* its first listed (or, listing none, the first of all) */
            if ((!first && strcmp(c->accel, "all") && strcmp(c->accel, name)) ||
                !ddp_scenario_has_accel(sc[i], name))
                continue;
            if (!keyword_matches(c->keyword, c->files[i], sc[i], name) ||
                (last && !failed_before(last, c->files[i], name)))
                continue;
            if (ddp_shard_owns(&c->shard, *total))
                new_job(&jobs[njobs++], sc[i], i, c->files[i], name, *total);
            *list_hash = list_hash_add(*list_hash, c->files[i], name);
            (*total)++;
            if (first)
                break;
        }
    }
    return njobs;
}

/* A selection that leaves no run is an error (2); a shard without one
 * is only said. */
static int check_selection(const cli_t *c, const char *cmd, long long total, int njobs,
                           int only_failed)
{
    if (total == 0 && (c->keyword || only_failed)) {
        fprintf(stderr, "ddpsim %s: nothing to run: no run of these files matches%s%s%s%s; "
                        "expected a selection that leaves a run\n",
                cmd, c->keyword ? " -k " : "", c->keyword ? c->keyword : "",
                only_failed ? " --last-failed " : "", only_failed ? c->last_failed : "");
        return 2;
    }
    if (total == 0) {
        fprintf(stderr, "ddpsim %s: nothing to run: no scenario%s lists accelerator "
                        "%s\n", cmd, c->tag ? " with that tag" : "", c->accel);
        return 2;
    }
    if (njobs == 0)
        fprintf(stderr, "ddpsim %s: shard %d/%d has no run: the list has %lld (shard K "
                        "of N runs K-1, K-1+N, ...); nothing to do\n", cmd, c->shard.k,
                c->shard.n, total);
    return 0;
}

/* The trace, Chrome trace and artifact outputs, opened or checked: 0 or
 * 2 (said). *trace_out: the opened trace (the caller commits it). */
static int open_outputs(cli_t *c, const char *cmd, job_t *jobs, int njobs,
                        ddp_out_t **trace_out)
{
    if (c->ro.real && (c->chrome || c->trace_path || c->ro.timeline)) {
        fprintf(stderr, "ddpsim %s: --trace, --trace-chrome and --timeline are the "
                        "simulator's; real runs have none\n", cmd);
        return 2;
    }
    if (c->trace_path) {
        if (ddp_out_open(c->trace_path, "the trace", trace_out) != 0) {
            fprintf(stderr, "ddpsim %s: %s\n", cmd, ddp_err_message());
            return 2;
        }
        c->ro.trace = ddp_out_file(*trace_out);
    }
    c->ro.chrome = c->chrome;
    c->ro.chrome_per_run = njobs > 1;
    if (check_chrome_paths(cmd, &c->ro, jobs, njobs))
        return 2;
    c->ro.art.real = c->ro.real;
    c->ro.art.netns = c->ro.netns;
    c->ro.art.seed = c->ro.seed;
    if (ddp_art_check(&c->ro.art, jobs, njobs, cmd))
        return 2;
    return 0;
}

/* The runs one at a time, in order (real runs share ports and
 * namespaces; -x stops at the first failure). The runs done. */
static int run_serial(ddp_sys_t *sys, const cli_t *c, const char *cmd, job_t *jobs, int njobs)
{
    if (c->ro.real)
        ddp_tool_catch_signals(on_interrupt, 1);
    ddp_progress_t pg = {0};
    ddp_progress_start(&pg, cmd, "runs", njobs, c->progress, stderr);
    for (int i = 0; i < njobs; i++) {
        if (g_interrupted) {
            snprintf(jobs[i].r.accelerator, sizeof jobs[i].r.accelerator, "%s",
                     jobs[i].accel);
            snprintf(jobs[i].r.why, sizeof jobs[i].r.why, "not run: interrupted");
            continue;
        }
        char note[96];
        snprintf(note, sizeof note, "now %.50s %s", jobs[i].path, jobs[i].accel);
        ddp_progress_update(&pg, i, note);
        run_job(sys, &jobs[i], &c->ro);
        if (c->exitfirst && !jobs[i].r.pass && !jobs[i].r.skipped && i + 1 < njobs) {
            ddp_progress_clear(&pg);
            fprintf(stderr, "ddpsim %s: -x: stopped after the first failure, %d "
                            "run(s) of %d not run\n", cmd, njobs - i - 1, njobs);
            njobs = i + 1;
        }
    }
    ddp_progress_end(&pg, 0);
    return njobs;
}

static int run_or_replay(ddp_sys_t *sys, int argc, char **argv, int replay)
{
    const char *cmd = replay ? "replay" : "run";
    cli_t c = {0};
    int prc = parse_cli(cmd, argc, argv, &c, replay ? replay_usage : run_usage, replay);
    if (prc)
        return DDP_OPT_EXIT(prc);
    ddp_scenario_t **sc = calloc((size_t)c.nfiles, sizeof *sc);
    job_t *jobs = NULL;
    int njobs = 0, rc = 0;
    long long total = 0; /* runs in the whole list (all shards) */
    uint64_t list_hash = 0xcbf29ce484222325ull;
    ddp_out_t *trace_out = NULL;
    ddp_shard_file_t lf = {0};
    int only_failed = 0;
    if (load_all(c.files, c.nfiles, sc, cmd) ||
        (c.last_failed && (only_failed = read_last_failed(cmd, c.last_failed, &lf)) < 0)) {
        rc = 2;
        goto out;
    }
    if ((rc = apply_overrides(sys, &c, sc, cmd)) != 0)
        goto out;
    jobs = calloc((size_t)c.nfiles * ddp_accel_count(), sizeof *jobs);
    if (!jobs) {
        fprintf(stderr, "ddpsim %s: out of memory for %d scenario file(s)\n", cmd, c.nfiles);
        rc = 1;
        goto out;
    }
    njobs = list_runs(&c, sc, only_failed ? &lf : NULL, jobs, &total, &list_hash);
    if ((rc = check_selection(&c, cmd, total, njobs, only_failed)) != 0 ||
        (rc = open_outputs(&c, cmd, jobs, njobs, &trace_out)) != 0)
        goto out;
    if (replay)
        c.ro.verbose = 1;
    int64_t t0 = ddp_sys_now(sys);
    /* Real runs share ports and namespaces: one at a time. */
    /* -x needs the runs in order, one at a time, to know where to stop. */
    if (c.jobs > 1 && njobs > 1 && !c.trace_path && !c.ro.timeline && !c.ro.real &&
        !c.exitfirst) {
        if (run_parallel(sys, jobs, njobs, c.jobs < njobs ? c.jobs : njobs, &c.ro) != 0)
            fprintf(stderr, "ddpsim %s: %s\n", cmd, ddp_err_message());
    } else {
        njobs = run_serial(sys, &c, cmd, jobs, njobs);
    }
    double wall = (double)(ddp_sys_now(sys) - t0) / 1e9;
    for (int i = 0; i < njobs; i++) {
        char a[32];
        snprintf(jobs[i].actual, sizeof jobs[i].actual, "%s",
                 actual_outcome(&jobs[i], a, sizeof a));
    }
    if (c.compare) {
        rc = compare(sys, &c, jobs, njobs, wall);
        if (g_interrupted)
            rc = 128 + g_interrupted;
        goto out;
    }
    ddp_run_report_t rep = {.cmd = cmd, .nfiles = c.nfiles, .wall_s = wall,
                            .verbose = c.ro.verbose, .replay = replay, .seed = c.ro.seed,
                            .junit = c.junit, .interrupted = (int)g_interrupted,
                            .shard = c.shard, .total = total, .real = c.ro.real,
                            .art = &c.ro.art};
    rc = ddp_run_report(sys, &rep, jobs, njobs);
    if (c.results && write_results(&c, jobs, njobs, total, list_hash, wall) != 0)
        rc = 2;
out:
    ddp_real_warm_release(); /* the real runs' fork server, if one started */
    ddp_shard_file_free(&lf);
    if (trace_out && ddp_out_commit(trace_out) != 0) {
        fprintf(stderr, "ddpsim %s: %s\n", cmd, ddp_err_message());
        rc = rc ? rc : 2;
    }
    for (int i = 0; sc && i < c.nfiles; i++)
        ddp_scenario_free(sc[i]);
    free(sc);
    free(jobs);
    return rc;
}

int ddp_cmd_run(ddp_sys_t *sys, int argc, char **argv)
{
    return run_or_replay(sys, argc, argv, 0);
}

int ddp_cmd_replay(ddp_sys_t *sys, int argc, char **argv)
{
    return run_or_replay(sys, argc, argv, 1);
}

/* ---- ddpsim list ---- */
#define LIST_WHAT "one of accelerators, backends, plugins, environments, faults, " \
                  "launchers, phases or points"
static void list_usage(FILE *f)
{
    fprintf(f, "usage: ddpsim list accelerators|backends|plugins|environments|faults|"
               "launchers|phases|points\n\nPrints the names ddpsim knows, one per line "
               "(what scenario files and options accept).\n"
               "  phases  the phases a crash fault may name: PLUGIN PHASE, the default\n"
               "          plugin's in the order it enters them, then each registered\n"
               "          plugin's own\n"
               "  faults  the fault kinds (DDP_FAULT_KINDS, include/ddp/faults.h): KIND\n"
               "          EXECUTORS, the executors that can realise it (sim: the\n"
               "          simulator; the others real runs': inproc, nft, proxy,\n"
               "          signal, link, runner)\n"
               "  points  the libfiu fault points (include/ddp/faults.h): NAME LAYER\n\n"
               "Exit status: 0 ok, 2 anything else.\n");
}

int ddp_cmd_list(ddp_sys_t *sys, int argc, char **argv)
{
    (void)sys;
    int n;
    const ddp_opt_t opts[] = {OPT_HELP};
    ddp_opt_spec_t sp = {DDP_OPT_SPEC("list", opts, list_usage), .min_operands = 1,
                         .max_operands = 1,
                         .operands = LIST_WHAT};
    DDP_OPT_PARSE_OR_RETURN(&sp, argc, argv, &n);
    const char *w = argv[1];
    if (!strcmp(w, "accelerators")) {
        for (size_t i = 0; i < ddp_accel_count(); i++)
            printf("%s\n", ddp_accel_at(i)->name);
    } else if (!strcmp(w, "backends")) {
        for (size_t i = 0; i < ddp_pg_backend_count(); i++)
            printf("%s\n", ddp_pg_backend_at(i)->name);
    } else if (!strcmp(w, "plugins")) {
        for (size_t i = 0; i < ddp_plugin_count(); i++)
            printf("%s\n", ddp_plugin_at(i)->name);
    } else if (!strcmp(w, "environments")) {
        for (size_t i = 0; i < ddp_cluster_count(); i++)
            printf("%s\n", ddp_cluster_at(i)->name);
    } else if (!strcmp(w, "faults")) {
        char ex[160];
        for (int i = 0; i < DDP_FAULT_KIND_COUNT; i++) {
            const ddp_fault_kind_info_t *k = ddp_fault_kind_info((ddp_fault_kind_t)i);
            printf("%-10s %s\n", k->name, ddp_fault_exec_names(k->exec, ex, sizeof ex));
        }
    } else if (!strcmp(w, "launchers")) {
        for (int i = 0; i < DDP_SIM_LAUNCH_COUNT; i++)
            printf("%s\n", ddp_sim_launcher_name((ddp_sim_launcher_t)i));
    } else if (!strcmp(w, "phases")) {
        for (size_t i = 0; i < ddp_scenario_phase_count(); i++)
            printf("%-12s %s\n", "default", ddp_scenario_phase_at(i));
        for (size_t i = 0; i < ddp_plugin_count(); i++)
            for (const char *const *ph = ddp_plugin_at(i)->phases; ph && *ph; ph++)
                printf("%-12s %s\n", ddp_plugin_at(i)->name, *ph);
    } else if (!strcmp(w, "points")) {
        for (int i = 0; i < DDP_FP_COUNT; i++) {
            const ddp_fault_info_t *fi = ddp_fault_info((ddp_fault_id_t)i);
            printf("%-28s %s\n", fi->name, ddp_fault_layer_name(fi->layer));
        }
    } else {
        return ddp_opt_bad("list", "WHAT", w, LIST_WHAT);
    }
    return 0;
}
