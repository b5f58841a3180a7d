/* tools/cmd_run.c — `ddpsim run` (scenario files x accelerators in the
 * simulator, an outcome table, JUnit XML), `ddpsim replay` (one scenario,
 * exactly, with its per-rank outcomes and trace hash) and `ddpsim list`. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmds.h"
#include "ddp/accel.h"
#include "ddp/cluster.h"
#include "ddp/err.h"
#include "ddp/pg.h"
#include "ddp/plugin.h"
#include "ddp/real.h"
#include "ddp/scenario.h"
#include "ddp/launch.h"
#include "ddp/sim.h"
#include "ddp/sys.h"

static void run_usage(FILE *f)
{
    fprintf(f,
            "usage: ddpsim run FILE... [--accelerator NAME|all] [--seed N] [--tag TAG]\n"
            "                  [--trace FILE] [--trace-chrome FILE] [--junit FILE]\n"
            "                  [--jobs N] [--verbose] [--progress|--no-progress]\n"
            "                  [--real [--netns]]\n\n"
            "Runs each scenario file (docs/scenario-format.md) in the simulator for each\n"
            "selected accelerator it lists (default: all), checks its expectations and the\n"
            "invariants (no deadlock, deadlines kept, ranks agree, no leaked sockets,\n"
            "errors name a cause) and prints one row per run: scenario, accelerator,\n"
            "ok/FAIL, virtual time, connect retries, first error.\n\n"
            "  --accelerator NAME  only this accelerator (ddp, ddp_spawn, ddp_cpu, ddp2,\n"
            "                      ddp_hpc, ddp_cpu_hpc) or all (default)\n"
            "  --seed N            override every scenario's seed\n"
            "  --tag TAG           only scenarios carrying this tag (e.g. real)\n"
            "  --trace FILE        append every run's JSON-lines trace to FILE\n"
            "  --trace-chrome FILE Chrome/Perfetto trace of the run (exactly one run)\n"
            "  --junit FILE        JUnit XML: one testcase per scenario x accelerator\n"
            "  --jobs N            run in N worker processes (default 1)\n"
            "  --verbose           per-rank outcomes under each row\n"
            "  --progress          progress on stderr (default: when it is a terminal)\n"
            "  --real              run the processes for real (ddpsim train, POSIX sockets)\n"
            "                      on loopback: node i is 127.0.0.(i+1); faults through the\n"
            "                      same libfiu points and signals; what cannot be realised\n"
            "                      is reported as skip with the reason (docs/real-runs.md)\n"
            "  --netns             --real on one network namespace per node (root)\n"
            "  --compare           each run for real and in the simulator: the outcome\n"
            "                      classes side by side; exit 1 if any pair differs\n"
            "  --markdown FILE     with --compare: the table as Markdown\n\n"
            "Exit status: 0 every expectation and invariant held, 1 some did not,\n"
            "2 bad input (a scenario error is printed as file:line:col: expected ...),\n"
            "128+N when signal N (INT, TERM, HUP) stopped a real run; its processes are\n"
            "killed and its namespaces deleted first.\n");
}

static void replay_usage(FILE *f)
{
    fprintf(f,
            "usage: ddpsim replay FILE [--seed N] [--accelerator NAME] [--trace FILE]\n"
            "                     [--trace-chrome FILE] [--timeline]\n\n"
            "Runs one scenario exactly as `ddpsim run` or `ddpsim explore` did (same\n"
            "seed, same schedule) and prints every rank's outcome, the verdict and the\n"
            "trace hash: two replays with the same seed print the same hash.\n"
            "Without --accelerator it replays each accelerator the scenario lists.\n"
            "Exit status as for ddpsim run.\n");
}

static int bad(const char *cmd, const char *what, const char *val, const char *form)
{
    fprintf(stderr, "ddpsim %s: bad %s \"%s\"; expected %s (see ddpsim %s --help)\n",
            cmd, what, val ? val : "", form, cmd);
    return 2;
}

typedef struct job {
    const ddp_scenario_t *s;
    const char *path;
    const char *accel;
    ddp_scn_result_t r;
    int rc; /* ddp_scenario_run's return */
    char report[8192];
} job_t;

typedef struct run_opts {
    uint64_t seed;
    FILE *trace;
    const char *chrome;
    int verbose, timeline;
    int real, netns; /* --real [--netns]: real processes */
} run_opts_t;

/* The outcome class `--compare` puts side by side: ok, or the error class
 * of the lowest failing rank, or skip. */
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

static void run_job(ddp_sys_t *sys, job_t *j, const run_opts_t *ro)
{
    if (ro->real) {
        ddp_real_opts_t ropts = {.ddpsim = ddp_tool_self, .netns = ro->netns,
                                 .seed = ro->seed, .report = j->report,
                                 .report_len = sizeof j->report,
                                 .interrupted = &g_interrupted};
        int64_t t0 = ddp_sys_now(sys);
        j->rc = ddp_real_run(sys, j->s, j->accel, &ropts, &j->r);
        j->r.wall_s = (double)(ddp_sys_now(sys) - t0) / 1e9;
        if (j->rc && !j->r.why[0])
            snprintf(j->r.why, sizeof j->r.why, "%s", ddp_err_message());
        return;
    }
    char *tr = NULL;
    ddp_scn_run_opts_t o = {.seed = ro->seed, .trace = ro->trace,
                            .keep_trace = ro->chrome || ro->timeline,
                            .trace_out = ro->chrome || ro->timeline ? &tr : NULL,
                            .report = j->report, .report_len = sizeof j->report};
    int64_t t0 = ddp_sys_now(sys);
    j->rc = ddp_scenario_run(j->s, j->accel, &o, &j->r);
    j->r.wall_s = (double)(ddp_sys_now(sys) - t0) / 1e9;
    if (j->rc && !j->r.why[0])
        snprintf(j->r.why, sizeof j->r.why, "%s", ddp_err_message());
    if (tr && ro->timeline)
        ddp_sim_export_timeline(tr, stdout);
    if (tr && ro->chrome) {
        FILE *f = fopen(ro->chrome, "w");
        if (!f || ddp_sim_export_chrome(tr, f) != 0) {
            fprintf(stderr, "ddpsim: cannot write %s\n", ro->chrome);
            j->r.pass = 0;
        }
        if (f)
            fclose(f);
    }
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

static const char *base_name(const char *path, char *buf, size_t n)
{
    const char *b = strrchr(path, '/');
    snprintf(buf, n, "%s", b ? b + 1 : path);
    char *dot = strrchr(buf, '.');
    if (dot && !strcmp(dot, ".scn"))
        *dot = '\0';
    return buf;
}

static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\n' || *s == '\t')
                fputc(*s, f);
        }
    }
}

static int write_junit(const char *path, const job_t *jobs, int n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int failures = 0, skipped = 0;
    double total = 0;
    for (int i = 0; i < n; i++) {
        failures += !jobs[i].r.pass && !jobs[i].r.skipped;
        skipped += jobs[i].r.skipped;
        total += jobs[i].r.wall_s;
    }
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<testsuites name=\"ddpsim run\" tests=\"%d\" failures=\"%d\" "
               "time=\"%.3f\">\n<testsuite name=\"scenarios\" tests=\"%d\" "
               "failures=\"%d\" errors=\"0\" skipped=\"%d\" time=\"%.3f\">\n",
            n, failures, total, n, failures, skipped, total);
    for (int i = 0; i < n; i++) {
        char b[256];
        fprintf(f, "  <testcase classname=\"");
        xml_text(f, base_name(jobs[i].path, b, sizeof b));
        fprintf(f, "\" name=\"%s\" time=\"%.3f\"", jobs[i].accel, jobs[i].r.wall_s);
        if (jobs[i].r.skipped) {
            fprintf(f, ">\n    <skipped message=\"");
            xml_text(f, jobs[i].r.why);
            fprintf(f, "\"/>\n  </testcase>\n");
            continue;
        }
        if (jobs[i].r.pass) {
            fprintf(f, "/>\n");
            continue;
        }
        fprintf(f, ">\n    <failure message=\"");
        xml_text(f, jobs[i].r.why);
        fprintf(f, "\">");
        xml_text(f, jobs[i].report);
        fprintf(f, "</failure>\n  </testcase>\n");
    }
    fprintf(f, "</testsuite>\n</testsuites>\n");
    return fclose(f) ? -1 : 0;
}

static void print_row(const job_t *j, int name_w)
{
    char b[256], err[72];
    const ddp_scn_result_t *r = &j->r;
    const char *e = r->pass && !r->skipped ? r->first_error : r->why;
    snprintf(err, sizeof err, "%s", e);
    if (strlen(e) >= sizeof err)
        memcpy(err + sizeof err - 4, "...", 4);
    printf("%-*s %-12s %-5s %10.3f s %7d  %s\n", name_w, base_name(j->path, b, sizeof b),
           j->accel, r->skipped ? "skip" : r->pass ? "ok" : "FAIL",
           (double)r->virtual_ns / 1e9, r->retries, err);
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
    const char *accel, *trace_path, *chrome, *junit, *tag, *markdown;
    int compare;
    run_opts_t ro;
    int jobs, progress;
    char **files;
    int nfiles;
} cli_t;

static int parse_cli(const char *cmd, int argc, char **argv, cli_t *c,
                     void (*usage)(FILE *))
{
    c->accel = "all";
    c->jobs = 1;
    c->progress = isatty(2);
    c->files = calloc((size_t)argc, sizeof *c->files);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            c->ro.verbose = 1;
            continue;
        }
        if (!strcmp(a, "--timeline")) {
            c->ro.timeline = 1;
            continue;
        }
        if (!strcmp(a, "--compare")) {
            c->compare = c->ro.real = 1;
            continue;
        }
        if (!strcmp(a, "--real") || !strcmp(a, "--netns")) {
            c->ro.real = 1;
            c->ro.netns |= !strcmp(a, "--netns");
            continue;
        }
        if (!strcmp(a, "--progress") || !strcmp(a, "--no-progress")) {
            c->progress = !strcmp(a, "--progress");
            continue;
        }
        if (strncmp(a, "--", 2) != 0) {
            c->files[c->nfiles++] = argv[i];
            continue;
        }
        static const char *const with_value[] = {"--accelerator", "--seed", "--trace",
                                                 "--trace-chrome", "--junit", "--jobs",
                                                 "--tag", "--markdown"};
        size_t k = 0;
        while (k < sizeof with_value / sizeof with_value[0] && strcmp(a, with_value[k]))
            k++;
        if (k == sizeof with_value / sizeof with_value[0])
            return bad(cmd, "option", a, "one of the options of --help");
        if (!v)
            return bad(cmd, "option (missing value)", a, "a value after it");
        i++;
        char *end;
        if (!strcmp(a, "--accelerator")) {
            if (strcmp(v, "all") && !ddp_accel_find(v))
                return bad(cmd, "--accelerator", v,
                           "ddp, ddp_spawn, ddp_cpu, ddp2, ddp_hpc, ddp_cpu_hpc or all");
            c->accel = v;
        } else if (!strcmp(a, "--seed")) {
            c->ro.seed = strtoull(v, &end, 10);
            if (!*v || *end || *v == '-' || c->ro.seed == 0)
                return bad(cmd, "--seed", v, "a positive integer");
        } else if (!strcmp(a, "--jobs")) {
            c->jobs = (int)strtol(v, &end, 10);
            if (!*v || *end || c->jobs < 1 || c->jobs > 64)
                return bad(cmd, "--jobs", v, "an integer 1..64");
        } else if (!strcmp(a, "--trace")) {
            c->trace_path = v;
        } else if (!strcmp(a, "--trace-chrome")) {
            c->chrome = v;
        } else if (!strcmp(a, "--junit")) {
            c->junit = v;
        } else if (!strcmp(a, "--markdown")) {
            c->markdown = v;
        } else {
            c->tag = v;
        }
    }
    if (c->nfiles == 0) {
        usage(stderr);
        return 2;
    }
    return 0;
}

/* --compare: each job also in the simulator; both outcome classes side
 * by side (the real results are in jobs already). */
static int compare(ddp_sys_t *sys, const cli_t *c, job_t *jobs, int njobs, double wall)
{
    FILE *md = c->markdown ? fopen(c->markdown, "w") : NULL;
    if (c->markdown && !md) {
        fprintf(stderr, "ddpsim run: cannot write %s\n", c->markdown);
        return 2;
    }
    run_opts_t sim_ro = c->ro;
    sim_ro.real = sim_ro.netns = 0;
    int differ = 0, same = 0, skipped = 0;
    printf("%-28s %-12s %-12s %-12s %s\n", "scenario", "accelerator", "simulator",
           c->ro.netns ? "real (netns)" : "real", "same");
    if (md)
        fprintf(md, "| scenario | accelerator | simulator | real%s | same | note |\n"
                    "|---|---|---|---|---|---|\n", c->ro.netns ? " (netns)" : "");
    for (int i = 0; i < njobs; i++) {
        job_t sj = jobs[i];
        run_job(sys, &sj, &sim_ro);
        char a[32], b[32], name[256];
        outcome_class(&sj.r, a, sizeof a);
        outcome_class(&jobs[i].r, b, sizeof b);
        int sk = jobs[i].r.skipped, eq = !sk && !strcmp(a, b);
        differ += !sk && !eq;
        same += eq;
        skipped += sk;
        base_name(jobs[i].path, name, sizeof name);
        printf("%-28s %-12s %-12s %-12s %s\n", name, jobs[i].accel, a, b,
               sk ? "-" : eq ? "yes" : "NO");
        if (md) {
            char note[200] = "";
            if (sk)
                snprintf(note, sizeof note, "%.180s", jobs[i].r.why + 9);
            else if (!jobs[i].r.pass)
                snprintf(note, sizeof note, "real run: %.170s", jobs[i].r.why);
            for (char *p = note; *p; p++)
                if (*p == '|')
                    *p = '/';
            fprintf(md, "| %s | %s | %s | %s | %s | %s |\n", name, jobs[i].accel, a, b,
                    sk ? "-" : eq ? "yes" : "**no**", note);
        }
    }
    printf("%d pair(s): %d same, %d different, %d skipped (%.1f s real)\n", njobs, same,
           differ, skipped, wall);
    if (md) {
        fprintf(md, "\n%d pair(s): %d same, %d different, %d not realisable for real.\n",
                njobs, same, differ, skipped);
        fclose(md);
    }
    return differ ? 1 : 0;
}

static int run_or_replay(ddp_sys_t *sys, int argc, char **argv, int replay)
{
    const char *cmd = replay ? "replay" : "run";
    cli_t c = {0};
    int prc = parse_cli(cmd, argc, argv, &c, replay ? replay_usage : run_usage);
    if (prc) {
        free(c.files);
        return prc == 1 ? 0 : prc;
    }
    if (replay && c.nfiles != 1) {
        free(c.files);
        return bad(cmd, "arguments", argv[1], "exactly one scenario FILE");
    }
    ddp_scenario_t **sc = calloc((size_t)c.nfiles, sizeof *sc);
    job_t *jobs = NULL;
    int njobs = 0, rc = 0;
    if (load_all(c.files, c.nfiles, sc, cmd)) {
        rc = 2;
        goto out;
    }
    jobs = calloc((size_t)c.nfiles * ddp_accel_count(), sizeof *jobs);
    for (int i = 0; i < c.nfiles; i++) {
        if (c.tag && !ddp_scenario_has_tag(sc[i], c.tag))
            continue;
        for (size_t a = 0; a < ddp_accel_count(); a++) {
            const char *name = ddp_accel_at(a)->name;
            if ((strcmp(c.accel, "all") && strcmp(c.accel, name)) ||
                !ddp_scenario_has_accel(sc[i], name))
                continue;
            jobs[njobs++] = (job_t){.s = sc[i], .path = c.files[i], .accel = name};
        }
    }
    if (njobs == 0) {
        fprintf(stderr, "ddpsim %s: nothing to run: no scenario%s lists accelerator "
                        "%s\n", cmd, c.tag ? " with that tag" : "", c.accel);
        rc = 2;
        goto out;
    }
    if (c.chrome && njobs != 1) {
        fprintf(stderr, "ddpsim %s: --trace-chrome needs exactly one run, got %d "
                        "(choose one file and one --accelerator)\n", cmd, njobs);
        rc = 2;
        goto out;
    }
    if (c.trace_path && !(c.ro.trace = fopen(c.trace_path, "w"))) {
        rc = bad(cmd, "--trace file (cannot write)", c.trace_path, "a writable path");
        goto out;
    }
    c.ro.chrome = c.chrome;
    if (replay)
        c.ro.verbose = 1;
    int64_t t0 = ddp_sys_now(sys);
    if (c.ro.real && (c.chrome || c.trace_path || c.ro.timeline)) {
        fprintf(stderr, "ddpsim %s: --trace, --trace-chrome and --timeline are the "
                        "simulator's; real runs have none\n", cmd);
        rc = 2;
        goto out;
    }
    /* Real runs share ports and namespaces: one at a time. */
    if (c.jobs > 1 && njobs > 1 && !c.trace_path && !c.ro.timeline && !c.ro.real) {
        if (run_parallel(sys, jobs, njobs, c.jobs < njobs ? c.jobs : njobs, &c.ro) != 0)
            fprintf(stderr, "ddpsim %s: %s\n", cmd, ddp_err_message());
    } else {
        if (c.ro.real)
            ddp_tool_catch_signals(on_interrupt, 1);
        for (int i = 0; i < njobs; i++) {
            if (g_interrupted) {
                snprintf(jobs[i].r.accelerator, sizeof jobs[i].r.accelerator, "%s",
                         jobs[i].accel);
                snprintf(jobs[i].r.why, sizeof jobs[i].r.why, "not run: interrupted");
                continue;
            }
            if (c.progress)
                fprintf(stderr, "\r[%d/%d] %-40.40s %-12s", i + 1, njobs, jobs[i].path,
                        jobs[i].accel);
            run_job(sys, &jobs[i], &c.ro);
        }
        if (c.progress)
            fprintf(stderr, "\r%*s\r", 70, "");
    }
    double wall = (double)(ddp_sys_now(sys) - t0) / 1e9;
    if (c.compare) {
        rc = compare(sys, &c, jobs, njobs, wall);
        if (g_interrupted)
            rc = 128 + g_interrupted;
        goto out;
    }
    int name_w = 8, failed = 0, skipped = 0;
    for (int i = 0; i < njobs; i++) {
        char b[256];
        int l = (int)strlen(base_name(jobs[i].path, b, sizeof b));
        name_w = l > name_w ? l : name_w;
    }
    printf("%-*s %-12s %-5s %12s %7s  %s\n", name_w, "scenario", "accelerator", "result",
           "virtual", "retries", "first error / why it failed");
    for (int i = 0; i < njobs; i++) {
        print_row(&jobs[i], name_w);
        failed += !jobs[i].r.pass && !jobs[i].r.skipped;
        skipped += jobs[i].r.skipped;
        if (c.ro.verbose || (!jobs[i].r.pass && !jobs[i].r.skipped && !replay)) {
            if (!jobs[i].r.pass && !jobs[i].r.skipped)
                printf("    why: %s\n", jobs[i].r.why);
            if (c.ro.verbose)
                printf("%s", jobs[i].report);
        }
        if (replay)
            printf("    seed %llu, trace hash %016llx\n",
                   (unsigned long long)(c.ro.seed ? c.ro.seed : jobs[i].s->seed),
                   (unsigned long long)jobs[i].r.trace_hash);
    }
    if (skipped)
        printf("%d run(s) of %d scenario file(s): %d ok, %d failed, %d skipped (%.1f s)\n",
               njobs, c.nfiles, njobs - failed - skipped, failed, skipped, wall);
    else
        printf("%d run(s) of %d scenario file(s): %d ok, %d failed (%.1f s)\n", njobs,
               c.nfiles, njobs - failed, failed, wall);
    if (c.junit && write_junit(c.junit, jobs, njobs) != 0) {
        fprintf(stderr, "ddpsim %s: cannot write %s\n", cmd, c.junit);
        failed++;
    }
    rc = failed ? 1 : 0;
    if (g_interrupted) {
        fprintf(stderr, "ddpsim %s: interrupted by signal %d\n", cmd, (int)g_interrupted);
        rc = 128 + g_interrupted;
    }
out:
    if (c.ro.trace)
        fclose(c.ro.trace);
    for (int i = 0; sc && i < c.nfiles; i++)
        ddp_scenario_free(sc[i]);
    free(sc);
    free(jobs);
    free(c.files);
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
static void list_usage(FILE *f)
{
    fprintf(f, "usage: ddpsim list accelerators|backends|plugins|environments|faults|"
               "launchers\n\nPrints the names ddpsim knows, one per line (what scenario "
               "files and options accept).\n");
}

int ddp_cmd_list(ddp_sys_t *sys, int argc, char **argv)
{
    (void)sys;
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        list_usage(stdout);
        return 0;
    }
    if (argc != 2) {
        list_usage(stderr);
        return 2;
    }
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
        for (int i = 0; i < DDP_FAULT_KIND_COUNT; i++)
            printf("%s\n", ddp_sim_fault_kind_name((ddp_sim_fault_kind_t)i));
    } else if (!strcmp(w, "launchers")) {
        for (int i = 0; i < DDP_SIM_LAUNCH_COUNT; i++)
            printf("%s\n", ddp_sim_launcher_name((ddp_sim_launcher_t)i));
    } else {
        return bad("list", "what", w,
                   "accelerators, backends, plugins, environments, faults or launchers");
    }
    return 0;
}
