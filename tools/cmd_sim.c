/* tools/cmd_sim.c — `ddpsim sim`: run an accelerator on a simulated cluster
 * through the shared plugin, with faults, and print each process's outcome.
 *
 * The options become a scenario (docs/scenario-format.md) in memory, one
 * statement per option, which the scenario parser validates and the
 * scenario runner runs: `sim`, `run` and `explore` share one fault syntax,
 * one validation and one runner. A parse error is mapped back to the
 * option that wrote the statement. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "ddp/accel.h"
#include "ddp/err.h"
#include "ddp/host.h"
#include "ddp/scenario.h"
#include "ddp/sim.h"
#include "opt.h"

static void sim_usage(FILE *f)
{
    char kinds[256];
    fprintf(f,
            "usage: ddpsim sim [--accelerator NAME|all] [--nodes N] [--procs P]\n"
            "                  [--seed S] [--timeout SEC] [--backend NAME]\n"
            "                  [--plugin NAME|PATH.so]\n"
            "                  [--fault SPEC]... [--master-late SEC] [--port-taken]\n"
            "                  [--somaxconn K] [--wall-limit SEC]\n"
            "                  [--trace FILE] [--trace-chrome FILE] [--timeline]\n"
            "                  [--print-scenario]\n\n"
            "Runs the accelerator (default ddp; all: each in turn) on N simulated nodes\n"
            "(1..16384, default 2) with P processes each (1..64, default 4; ddp2 runs 1):\n"
            "every rank connects through the shared DDP plugin (store, backend, store\n"
            "barrier, configure_ddp) on the virtual network. Prints one line per process,\n"
            "then the counts, the virtual time and the trace hash (same options, same\n"
            "hash). --seed S (default 1), --timeout SEC (the group deadline, > 0, default\n"
            "60), --master-late SEC (node 0 starts late), --port-taken (another process\n"
            "holds port 29500 on node 0), --somaxconn K (every node's listen backlog\n"
            "cap, 1..2147483647, default 4096: the store admits K connects of a burst, drops\n"
            "the SYNs of the rest, which retransmit at 1, 3, 7, ... s: 32,768 ranks need\n"
            "8 such rounds at the default, past a 60 s deadline), --wall-limit SEC (stop\n"
            "the run after SEC of real time; default: none while virtual time moves, 600\n"
            "s while it stands still). A stopped run's ranks are `stopped', not failed,\n"
            "and the harness's line says why.\n\n"
            "The options are turned into a scenario (docs/scenario-format.md) that the\n"
            "scenario parser checks and `ddpsim run`'s runner runs; --print-scenario\n"
            "prints it instead of running it.\n\n"
            "Fault SPEC (up to 32): KIND[,key=value...] or, as in a scenario file,\n"
            "\"KIND key=value...\".\nKIND: %s.\nKeys: node=N peer=N port=P nodes=I+J (a\n"
            "partition side) rate=R (bandwidth: 1mbit, 500kbit, 100kbps, ...)\n"
            "start=SEC end=SEC (seconds, or a duration such as 500ms) count=N p=PROB\n"
            "ms=DELAY (milliseconds; or delay=DURATION) after=BYTES phase=NAME and\n"
            "ranks=R[,R...] (last: it takes the rest of the spec). Examples:\n"
            "  --fault partition,nodes=1,end=20     node 1 cut off for 20 s\n"
            "  --fault crash,phase=barrier,ranks=5  rank 5 dies entering the barrier\n"
            "  --fault bandwidth,node=1,rate=1kbit  node 1's uplink carries 1 kbit/s\n"
            "  --fault 'crash ranks=5 phase=\"store connect\"'\n\n"
            "Exit status: 0 every rank connected and the invariants held, 1 some rank\n"
            "failed or an invariant did not hold, 2 bad input (one line naming the\n"
            "option).\n",
            ddp_fault_kind_list(kinds, sizeof kinds));
}

typedef struct sim_cli {
    const char *accel, *backend, *plugin, *trace_path, *chrome;
    int nodes, procs, somaxconn, port_taken, timeline, print;
    uint64_t seed;
    int64_t timeout_ns, master_late_ns, wall_limit_ns;
    const char *faults[DDP_SCN_MAX_FAULTS];
    int nfaults;
} sim_cli_t;

/* --fault: collected as given; the scenario parser judges them. */
static int add_fault(const char *v, void *dst)
{
    sim_cli_t *c = dst;
    if (!v || !*v || c->nfaults == DDP_SCN_MAX_FAULTS)
        return -1;
    for (const char *p = v; *p; p++)
        if ((unsigned char)*p < 0x20)
            return -1;
    c->faults[c->nfaults++] = v;
    return 0;
}

/* A word of scenario text: as it is when safe, else quoted and escaped,
 * so that no value can add a statement, a comment or a key. */
static void put_word(FILE *f, const char *s, size_t n)
{
    int safe = n > 0;
    for (size_t i = 0; i < n && safe; i++)
        safe = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.,+:/-",
                      s[i]) != NULL;
    if (safe) {
        fprintf(f, "%.*s", (int)n, s);
        return;
    }
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"' || s[i] == '\\')
            fputc('\\', f);
        fputc(s[i], f);
    }
    fputc('"', f);
}

/* One comma-form key=value as scenario words: start=SEC / end=SEC take a
 * unit when the value is a plain number, ms=MS becomes delay=MSms. */
static void put_fault_key(FILE *f, const char *tok, size_t len)
{
    const char *eq = memchr(tok, '=', len);
    fputc(' ', f);
    if (!eq) {
        put_word(f, tok, len);
        return;
    }
    size_t kl = (size_t)(eq - tok), vl = len - kl - 1;
    char val[512];
    snprintf(val, sizeof val, "%.*s", (int)vl, eq + 1);
    double d;
    int number = ddp_opt_num(val, -1e300, 1e300, 0, &d) == 0;
    int is_ms = kl == 2 && !strncmp(tok, "ms", 2);
    int is_sec = (kl == 5 && !strncmp(tok, "start", 5)) || (kl == 3 && !strncmp(tok, "end", 3));
    put_word(f, is_ms ? "delay" : tok, is_ms ? 5 : kl);
    fputc('=', f);
    if (number && (is_ms || is_sec))
        fprintf(f, "%s%s", val, is_ms ? "ms" : "s");
    else
        put_word(f, val, strlen(val));
}

/* --fault SPEC as a `fault` statement. */
static void put_fault(FILE *f, const char *spec)
{
    size_t k = strcspn(spec, ", ");
    if (spec[k] == ' ') { /* already in the scenario's syntax */
        fprintf(f, "fault %s\n", spec);
        return;
    }
    fprintf(f, "fault ");
    put_word(f, spec, k);
    for (const char *p = spec + k; *p == ',';) {
        p++;
        size_t len = strcspn(p, ",");
        if (!strncmp(p, "ranks=", 6)) /* a rank list: the rest of the spec */
            len = strlen(p);
        if (len)
            put_fault_key(f, p, len);
        p += len;
    }
    fputc('\n', f);
}

/* The option that wrote each line of the scenario text. */
typedef struct origin {
    const char *opt, *value;
} origin_t;

#define SIM_MAX_LINES (16 + DDP_SCN_MAX_FAULTS)

static void line(FILE *f, origin_t *org, int *n, const char *opt, const char *value,
                 const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void line(FILE *f, origin_t *org, int *n, const char *opt, const char *value,
                 const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    if (*n + 1 < SIM_MAX_LINES)
        org[++*n] = (origin_t){opt, value};
}

/* The options as scenario text (malloc'd); org[i]: line i's option. */
static char *to_scenario(const sim_cli_t *c, origin_t *org)
{
    char *text = NULL, num[32];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    int n = 0;
    line(f, org, &n, NULL, NULL, "scenario \"ddpsim sim\"\n");
    snprintf(num, sizeof num, "%d", c->nodes);
    line(f, org, &n, "--nodes", num, "nodes %d\n", c->nodes);
    snprintf(num, sizeof num, "%d", c->procs);
    line(f, org, &n, "--procs", num, "devices %d\n", c->procs);
    line(f, org, &n, "--seed", NULL, "seed %llu\n", (unsigned long long)c->seed);
    line(f, org, &n, "--timeout", NULL, "timeout %lldns\n", (long long)c->timeout_ns);
    line(f, org, &n, "--master-late", NULL, "master_late %lldns\n",
         (long long)c->master_late_ns);
    if (c->backend) {
        fprintf(f, "backend ");
        put_word(f, c->backend, strlen(c->backend));
        line(f, org, &n, "--backend", c->backend, "\n");
    }
    if (c->plugin) { /* a plugin from a library: the library's path */
        const char *lib = ddp_plugin_library(ddp_plugin_find(c->plugin));
        fprintf(f, lib ? "plugin-library " : "plugin ");
        put_word(f, lib ? lib : c->plugin, strlen(lib ? lib : c->plugin));
        line(f, org, &n, "--plugin", lib ? lib : c->plugin, "\n");
    }
    if (c->somaxconn) {
        snprintf(num, sizeof num, "%d", c->somaxconn);
        line(f, org, &n, "--somaxconn", num, "somaxconn %d\n", c->somaxconn);
    }
    if (c->port_taken)
        line(f, org, &n, "--port-taken", NULL, "port_taken\n");
    for (int i = 0; i < c->nfaults; i++) {
        put_fault(f, c->faults[i]);
        if (n + 1 < SIM_MAX_LINES)
            org[++n] = (origin_t){"--fault", c->faults[i]};
    }
    line(f, org, &n, NULL, NULL, "expect invariants\n");
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* "sim:LINE:COL: expected ..." -> one line naming the option. */
static int bad_scenario(const char *err, const origin_t *org)
{
    int ln = 0, off = 0;
    if (sscanf(err, "sim:%d:%*d: %n", &ln, &off) >= 1 && off > 0 && ln > 0 &&
        ln < SIM_MAX_LINES && org[ln].opt) {
        if (org[ln].value)
            fprintf(stderr, "ddpsim sim: bad %s \"%s\"; %s\n", org[ln].opt, org[ln].value,
                    err + off);
        else
            fprintf(stderr, "ddpsim sim: bad %s; %s\n", org[ln].opt, err + off);
    } else {
        fprintf(stderr, "ddpsim sim: %s\n", err);
    }
    return 2;
}

/* One accelerator: run, print, 0 when every rank connected and the
 * invariants held, 1 when not, 2 when it could not be built. */
static int run_one(const sim_cli_t *c, const ddp_scenario_t *s, const char *accel,
                   FILE *trace)
{
    char *tr = NULL;
    size_t cap = ((size_t)c->nodes * (size_t)(c->procs + 1) + 16) * 800;
    cap = cap > (64u << 20) ? 64u << 20 : cap;
    char *report = malloc(cap);
    if (!report) {
        fprintf(stderr, "ddpsim sim: out of memory\n");
        return 2;
    }
    int keep = c->chrome || c->timeline;
    ddp_scn_run_opts_t o = {.trace = trace, .keep_trace = keep,
                            .trace_out = keep ? &tr : NULL, .report = report,
                            .report_len = cap, .wall_limit_ns = c->wall_limit_ns};
    ddp_scn_result_t r;
    if (ddp_scenario_run(s, accel, &o, &r) != 0) {
        fprintf(stderr, "ddpsim sim: %s: %s\n", accel, r.why);
        free(report);
        return 2;
    }
    printf("%s on %d node(s) x %d, seed %llu\n%s", accel, c->nodes,
           strcmp(accel, "ddp2") ? c->procs : 1, (unsigned long long)c->seed, report);
    int failed = r.failed + r.crashed + r.stopped;
    char stopped[32] = "";
    if (r.stopped)
        snprintf(stopped, sizeof stopped, ", %d stopped", r.stopped);
    printf("  %d rank(s): %d ok, %d failed, %d crashed%s; virtual %.6f s; %d connect "
           "retries; trace hash %016llx%s\n",
           r.ranks, r.ok, r.failed, r.crashed, stopped, (double)r.virtual_ns / 1e9, r.retries,
           (unsigned long long)r.trace_hash,
           r.sim_result == DDP_SIM_DEADLOCK ? "; DEADLOCK" : "");
    if (r.stopped || r.sim_result == DDP_SIM_WALL_LIMIT || r.sim_result == DDP_SIM_LIVELOCK)
        printf("  %s\n", r.first_error); /* the one error of a stopped run */
    else if (!r.invariants_ok)
        printf("  %s\n", r.why);
    if (tr && c->timeline)
        ddp_sim_export_timeline(tr, stdout);
    if (tr && c->chrome && ddp_tool_write_chrome(tr, c->chrome) != 0) {
        fprintf(stderr, "ddpsim sim: %s\n", ddp_err_message());
        failed++;
    }
    free(tr);
    free(report);
    return failed || !r.ranks || r.ok != r.ranks || !r.invariants_ok ? 1 : 0;
}

int ddp_cmd_sim(ddp_sys_t *sys, int argc, char **argv)
{
    (void)sys;
    sim_cli_t c = {.accel = "ddp", .nodes = 2, .procs = 4, .seed = 1,
                   .timeout_ns = 60 * DDP_NS_PER_S};
    int n;
    const char *file = "a file to write";
    const ddp_opt_t opts[] = {
        OPT_FN("accelerator", &c.accel, ddp_opt_accel_or_all, ddp_opt_accel_form(1)),
        OPT_INT("nodes", &c.nodes, 1, 16384),
        OPT_INT("procs", &c.procs, 1, 64),
        OPT_U64("seed", &c.seed, 0),
        OPT_NS_POS("timeout", &c.timeout_ns, 1e7),
        OPT_STR("backend", &c.backend, "a backend name (tcp, nccl)"),
        OPT_FN("plugin", &c.plugin, ddp_opt_plugin_name, ddp_opt_plugin_form()),
        OPT_FN("fault", &c, add_fault,
               "KIND[,key=value...] (see ddpsim sim --help), at most 32 of them"),
        OPT_NS("master-late", &c.master_late_ns, 0, 1e7),
        OPT_INT("somaxconn", &c.somaxconn, 1, DDP_SIM_SOMAXCONN_MAX),
        OPT_NS_POS("wall-limit", &c.wall_limit_ns, 86400),
        OPT_FLAG("port-taken", 0, &c.port_taken, 1),
        OPT_STR("trace", &c.trace_path, file),
        OPT_STR("trace-chrome", &c.chrome, file),
        OPT_FLAG("timeline", 0, &c.timeline, 1),
        OPT_FLAG("print-scenario", 0, &c.print, 1),
        OPT_HELP,
    };
    ddp_opt_spec_t sp = {DDP_OPT_SPEC("sim", opts, sim_usage), .max_operands = 0};
    DDP_OPT_PARSE_OR_RETURN(&sp, argc, argv, &n);
    origin_t org[SIM_MAX_LINES] = {{0}};
    char *text = to_scenario(&c, org), err[1024];
    ddp_scenario_t *s = NULL;
    if (!text) {
        fprintf(stderr, "ddpsim sim: out of memory\n");
        return 2;
    }
    if (ddp_scenario_parse(text, "sim", NULL, &s, err, sizeof err) != 0) {
        free(text);
        return bad_scenario(err, org);
    }
    if (c.print) {
        fputs(text, stdout);
        free(text);
        ddp_scenario_free(s);
        return 0;
    }
    free(text);
    if (ddp_opt_writable("sim", "--trace", c.trace_path) ||
        ddp_opt_writable("sim", "--trace-chrome", c.chrome)) {
        ddp_scenario_free(s);
        return 2;
    }
    ddp_out_t *trace_out = NULL;
    if (c.trace_path && ddp_out_open(c.trace_path, "the trace", &trace_out)) {
        fprintf(stderr, "ddpsim sim: %s\n", ddp_err_message());
        ddp_scenario_free(s);
        return 2;
    }
    FILE *trace = trace_out ? ddp_out_file(trace_out) : NULL;
    int rc = 0;
    for (size_t i = 0; i < ddp_accel_count(); i++) {
        const char *name = strcmp(c.accel, "all") ? c.accel : ddp_accel_at(i)->name;
        int r = run_one(&c, s, name, trace);
        rc = r > rc ? r : rc;
        if (strcmp(c.accel, "all"))
            break;
    }
    if (trace_out && ddp_out_commit(trace_out) != 0) {
        fprintf(stderr, "ddpsim sim: %s\n", ddp_err_message());
        rc = 2;
    }
    ddp_scenario_free(s);
    return rc;
}
