/* tools/cmd_sim.c — `ddpsim sim`: run an accelerator on a simulated cluster
 * through the shared plugin, with faults, and print each rank's outcome.
 * The scenario-file runner (`ddpsim run`) is built on the same calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "ddp/accel.h"
#include "ddp/err.h"
#include "ddp/launch.h"
#include "ddp/sim.h"

static void sim_usage(FILE *f)
{
    fprintf(f,
            "usage: ddpsim sim [--accelerator NAME|all] [--nodes N] [--procs P]\n"
            "                  [--seed S] [--timeout SEC] [--backend NAME] [--plugin NAME]\n"
            "                  [--fault SPEC]... [--master-late SEC] [--port-taken]\n"
            "                  [--trace FILE] [--trace-chrome FILE] [--timeline]\n\n"
            "Runs the accelerator (default ddp) on N simulated nodes (default 2) with P\n"
            "processes each (default 4): every rank connects through the shared DDP plugin\n"
            "(store, tcp backend, store barrier, configure_ddp) on the virtual network.\n"
            "Prints one line per rank, the virtual time and the trace hash.\n\n"
            "Fault SPEC: KIND[,key=value...], KIND one of refuse, reset, blackhole, delay,\n"
            "partition, crash, pause, resolve; keys: node=N peer=N ranks=R[,R] (last key)\n"
            "port=P start=SEC end=SEC count=N p=PROB ms=DELAY after=BYTES phase=NAME\n"
            "nodes=I+J (partition side). Examples:\n"
            "  --fault partition,nodes=1,end=20     node 1 cut off for 20 s\n"
            "  --fault crash,phase=barrier,ranks=5  rank 5 dies entering the barrier\n\n"
            "Exit status: 0 every rank connected, 1 some rank failed, 2 bad input.\n");
}

static int bad(const char *what, const char *val)
{
    fprintf(stderr, "ddpsim sim: bad %s \"%s\" (see ddpsim sim --help)\n", what, val);
    return 2;
}

static int parse_fault(char *spec, ddp_sim_fault_t *f)
{
    memset(f, 0, sizeof *f);
    f->node = f->task = f->peer_node = -1;
    char *save = NULL, *tok = strtok_r(spec, ",", &save);
    if (!tok || ddp_sim_fault_kind_parse(tok, &f->kind) != 0) {
        fprintf(stderr, "ddpsim sim: %s\n", ddp_err_message());
        return 2;
    }
    while ((tok = strtok_r(NULL, ",", &save))) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return bad("fault option (expected key=value)", tok);
        *eq = '\0';
        const char *k = tok, *v = eq + 1;
        double d = atof(v);
        if (!strcmp(k, "node")) f->node = atoi(v);
        else if (!strcmp(k, "peer")) f->peer_node = atoi(v);
        else if (!strcmp(k, "port")) f->port = (uint16_t)atoi(v);
        else if (!strcmp(k, "start")) f->start_ns = (int64_t)(d * 1e9);
        else if (!strcmp(k, "end")) f->end_ns = (int64_t)(d * 1e9);
        else if (!strcmp(k, "count")) f->count = atoi(v);
        else if (!strcmp(k, "p")) f->probability = d;
        else if (!strcmp(k, "ms")) f->delay_ns = (int64_t)(d * 1e6);
        else if (!strcmp(k, "after")) f->after_bytes = atoll(v);
        else if (!strcmp(k, "phase")) f->phase = v;
        else if (!strcmp(k, "ranks")) {
            /* ranks=5 may be followed by more ranks: the rest of the spec. */
            size_t l = strlen(v) + (save && *save ? strlen(save) + 1 : 0) + 1;
            char *r = malloc(l);
            snprintf(r, l, "%s%s%s", v, save && *save ? "," : "", save ? save : "");
            f->ranks = r;
            break;
        } else if (!strcmp(k, "nodes")) {
            for (const char *p = v; *p;) {
                int n = atoi(p);
                if (n < 0 || n > 63)
                    return bad("partition node", v);
                f->node_set |= 1ull << n;
                p = strchr(p, '+') ? strchr(p, '+') + 1 : p + strlen(p);
            }
        } else
            return bad("fault key", k);
    }
    return 0;
}

static int run_one(const char *accel, int nodes, int procs, uint64_t seed,
                   const ddp_trainer_cfg_t *base, ddp_sim_fault_t *faults,
                   int nfaults, double master_late, int port_taken,
                   FILE *trace, const char *chrome, int timeline)
{
    ddp_sim_opts_t o = {.seed = seed, .trace = trace,
                        .keep_trace = chrome != NULL || timeline};
    ddp_sim_t *sim = ddp_sim_new(&o);
    for (int i = 0; i < nodes; i++) {
        char host[16], addr[20];
        snprintf(host, sizeof host, "node%d", i);
        snprintf(addr, sizeof addr, "10.%d.%d.1", i / 250, i % 250);
        ddp_sim_add_node(sim, host, addr, 0);
    }
    for (int i = 0; i < nfaults; i++)
        ddp_sim_add_fault(sim, &faults[i]);
    ddp_sim_launch_t l = {.accelerator = accel, .nodes = nodes,
                          .procs = strcmp(accel, "ddp2") ? procs : 1,
                          .cfg = *base,
                          .master_start_ns = (int64_t)(master_late * 1e9),
                          .squat_port = port_taken ? 29500 : 0};
    if (ddp_sim_launch_build(sim, &l) != 0) {
        fprintf(stderr, "ddpsim sim: %s\n", ddp_err_message());
        ddp_sim_free(sim);
        return 2;
    }
    ddp_sim_result_t res = ddp_sim_run(sim);
    int failed = 0, ranks = 0;
    printf("%s on %d node(s) x %d, seed %llu\n", accel, nodes, l.procs,
           (unsigned long long)seed);
    printf("  %-5s %-7s %-9s %12s %7s  %s\n", "rank", "node", "outcome",
           "connected", "retries", "first error");
    /* In rank order: tasks are numbered in launch order, not rank order. */
    int nt = ddp_sim_task_count(sim);
    const ddp_sim_outcome_t **by_rank = calloc((size_t)nt, sizeof *by_rank);
    for (int i = 0; by_rank && i < nt; i++) {
        const ddp_sim_outcome_t *x = ddp_sim_outcome(sim, i);
        if (x->rank >= 0 && x->rank < nt && !x->thread && !by_rank[x->rank])
            by_rank[x->rank] = x;
    }
    for (int i = 0; by_rank && i < nt; i++) {
        const ddp_sim_outcome_t *x = by_rank[i];
        if (!x)
            continue;
        ranks++;
        int ok = x->rc == 0 && x->state == DDP_SIM_TASK_EXITED && x->connect_ns >= 0;
        failed += !ok;
        char conn[32] = "-";
        if (x->connect_ns >= 0)
            snprintf(conn, sizeof conn, "%.6f s", (double)x->connect_ns / 1e9);
        printf("  %-5d node%-3d %-9s %12s %7d  %s\n", x->rank, x->node,
               ok ? "ok" : x->state == DDP_SIM_TASK_CRASHED ? "CRASHED" : "FAIL",
               conn, x->retries, ok ? "" : x->message);
    }
    free(by_rank);
    ddp_sim_stats_t st;
    ddp_sim_stats(sim, &st);
    printf("  %d rank(s), %d failed; virtual %.6f s; %llu hand-offs; trace hash "
           "%016llx%s\n",
           ranks, failed, (double)st.virtual_ns / 1e9,
           (unsigned long long)st.handoffs, (unsigned long long)st.trace_hash,
           res == DDP_SIM_DEADLOCK ? "; DEADLOCK" : "");
    if (res == DDP_SIM_DEADLOCK)
        printf("%s", ddp_sim_deadlock_report(sim));
    const char *tr = ddp_sim_trace(sim, NULL);
    if (timeline)
        ddp_sim_export_timeline(tr, stdout);
    if (chrome) {
        FILE *f = fopen(chrome, "w");
        if (!f || ddp_sim_export_chrome(tr, f) != 0) {
            fprintf(stderr, "ddpsim sim: cannot write %s\n", chrome);
            failed++;
        }
        if (f)
            fclose(f);
    }
    ddp_sim_free(sim);
    return failed || ranks == 0 ? 1 : 0;
}

int ddp_cmd_sim(ddp_sys_t *sys, int argc, char **argv)
{
    (void)sys;
    const char *accel = "ddp", *trace_path = NULL, *chrome = NULL;
    int nodes = 2, procs = 4, timeline = 0, port_taken = 0, nfaults = 0, rc = 0;
    double master_late = 0;
    uint64_t seed = 1;
    ddp_trainer_cfg_t cfg = {.timeout_ns = 60 * DDP_NS_PER_S};
    ddp_sim_fault_t faults[32];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            sim_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--timeline")) {
            timeline = 1;
            continue;
        } else if (!strcmp(a, "--port-taken")) {
            port_taken = 1;
            continue;
        }
        if (!v)
            return bad("option (missing value)", a);
        i++;
        if (!strcmp(a, "--accelerator")) accel = v;
        else if (!strcmp(a, "--nodes") && (nodes = atoi(v)) < 1) return bad("--nodes", v);
        else if (!strcmp(a, "--procs") && (procs = atoi(v)) < 1) return bad("--procs", v);
        else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--timeout")) cfg.timeout_ns = (int64_t)(atof(v) * 1e9);
        else if (!strcmp(a, "--backend")) cfg.backend = v;
        else if (!strcmp(a, "--master-late")) master_late = atof(v);
        else if (!strcmp(a, "--trace")) trace_path = v;
        else if (!strcmp(a, "--trace-chrome")) chrome = v;
        else if (!strcmp(a, "--plugin")) {
            if (!(cfg.plugin = ddp_plugin_find(v)))
                return bad("--plugin", v);
        } else if (!strcmp(a, "--fault")) {
            if (nfaults == 32)
                return bad("--fault (at most 32)", v);
            if (parse_fault(argv[i], &faults[nfaults]) != 0)
                return 2;
            nfaults++;
        } else if (strncmp(a, "--", 2) || (strcmp(a, "--nodes") && strcmp(a, "--procs")))
            return bad("option", a);
    }
    if (strcmp(accel, "all") && !ddp_accel_find(accel))
        return bad("--accelerator", accel);
    FILE *trace = trace_path ? fopen(trace_path, "w") : NULL;
    if (trace_path && !trace)
        return bad("--trace file", trace_path);
    for (size_t i = 0; i < ddp_accel_count(); i++) {
        const char *name = strcmp(accel, "all") ? accel : ddp_accel_at(i)->name;
        int r = run_one(name, nodes, procs, seed, &cfg, faults, nfaults, master_late,
                        port_taken, trace, chrome, timeline);
        rc = r > rc ? r : rc;
        if (strcmp(accel, "all"))
            break;
    }
    if (trace)
        fclose(trace);
    for (int i = 0; i < nfaults; i++)
        free((char *)faults[i].ranks);
    return rc;
}
