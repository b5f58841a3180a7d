/* tools/cmd_explore.c — `ddpsim explore`: random fault schedules on a
 * simulated cluster, the invariants checked on every run, and a replay
 * command and a shrunk scenario for each violation (docs/explore.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cmds.h"
#include "ddp/accel.h"
#include "ddp/err.h"
#include "ddp/plugin.h"
#include "ddp/scenario.h"
#include "ddp/sim.h"
#include "opt.h"

/* The kinds --faults takes (DDP_EXPLORE_KINDS_DRAWN), named by the kinds
 * table: "refuse, reset, ..., bandwidth". */
static const char *drawn_kinds(char *buf, size_t n)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int k = 0; k < DDP_FAULT_KIND_COUNT && off < n; k++)
        if (DDP_EXPLORE_KINDS_DRAWN >> k & 1)
            off += (size_t)snprintf(buf + off, n - off, "%s%s", off ? ", " : "",
                                    ddp_fault_kind_name((ddp_fault_kind_t)k));
    return buf;
}

static void explore_usage(FILE *f)
{
    char kinds[256];
    fprintf(f,
            "usage: ddpsim explore [--ranks N] [--runs K] [--seed S] [--faults KINDS]\n"
            "                      [--max-faults M] [--accelerator NAME] [--plugin NAME|PATH.so]\n"
            "                      [--out DIR] [--shard K/N] [--results FILE]\n"
            "                      [--progress | --no-progress]\n\n"
            "Runs K random fault schedules (default 100) on a simulated cluster of N ranks\n"
            "(default 16, split over 1-4 nodes of at most 64 processes), each through one\n"
            "accelerator drawn among ddp, ddp_spawn, ddp_cpu, ddp2, ddp_hpc and ddp_cpu_hpc\n"
            "(ddp2 runs one process per node: its world is the node count), with 0..M\n"
            "faults (default 3) of the given kinds, and checks the invariants on every run:\n"
            "no deadlock, every task ends by its deadline, the connected ranks agree on\n"
            "ranks 0..N-1 and the world size, no leaked sockets or tasks, every error names\n"
            "a cause. Random faults have no known outcome: ranks may fail, but only as the\n"
            "invariants allow.\n\n"
            "For each violation it prints the reason, a shrunk scenario (fewest faults,\n"
            "smallest cluster, simplest faults that still violate), a check that the\n"
            "written scenario replays identically, and the replay command\n"
            "  ddpsim replay DIR/explore-S-I.scn --seed SEED\n"
            "With --out DIR the shrunk scenario and the run as drawn are written there\n"
            "(explore-S-I.scn, explore-S-I-original.scn).\n\n"
            "Before the summary it names the costliest run: the one whose simulation\n"
            "made the most hand-offs between tasks (the same count every time), next\n"
            "to the mean run; a run that costs thousands of times the mean is a loop\n"
            "to read. With --out its scenario as drawn is written as\n"
            "explore-S-I-costliest.scn (replay it with --timeline).\n\n"
            "  --ranks N          world size (1..4096, default 16)\n"
            "  --runs K           runs (1..100000000, default 100)\n"
            "  --seed S           run i is drawn from S and i alone (default 1)\n"
            "  --faults KINDS     comma list of %s,\n"
            "                     or all (every kind but bandwidth; the default)\n"
            "  --max-faults M     at most M faults per run (0..%d, default 3)\n"
            "  --accelerator NAME only this accelerator (default: drawn per run)\n"
            "  --plugin NAME|PATH.so  the DDP plugin (default, subgroups, rpc), or yours\n"
            "                     from its library (docs/plugin.md)\n"
            "  --out DIR          write each violation as scenario files into DIR\n"
            "  --shard K/N        only the runs i with i mod N = K-1 (shard K of N; the\n"
            "                     other shards run the rest: docs/sweeps.md)\n"
            "  --results FILE     a result file (JSON lines) for `ddpsim merge`: every\n"
            "                     violation with its report and its scenarios\n"
            "  --progress         a progress bar on stderr: runs done/total, rate, ETA\n"
            "                     (default when it is a terminal; elsewhere the same\n"
            "                     as a plain line on stderr every 10 s)\n"
            "  --no-progress      neither: only the plain line every 10 %% of the runs\n"
            "                     on stdout (printed unless --progress)\n\n"
            "Same options, same runs: the output is deterministic (but for the times).\n\n"
            "Exit status: 0 no violation, 1 some violation, 2 bad input (or the result\n"
            "file could not be written).\n",
            drawn_kinds(kinds, sizeof kinds), DDP_SCN_MAX_FAULTS);
}

/* --faults: a comma list of kinds (or all) into a bit set. */
static int parse_kinds(const char *v, void *dst)
{
    unsigned *out = dst, set = 0;
    char buf[256];
    if (!v || !*v || strlen(v) >= sizeof buf)
        return -1;
    snprintf(buf, sizeof buf, "%s", v);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        ddp_fault_kind_t k;
        if (!strcasecmp(tok, "all"))
            set |= DDP_EXPLORE_KINDS_ALL;
        else if (ddp_fault_kind_parse(tok, &k) == 0 && (DDP_EXPLORE_KINDS_DRAWN >> k & 1))
            set |= 1u << k;
        else
            return -1;
    }
    *out = set;
    return set ? 0 : -1;
}

int ddp_cmd_explore(ddp_sys_t *sys, int argc, char **argv)
{
    (void)sys;
    ddp_explore_opts_t o = {.ranks = 16, .runs = 100, .seed = 1, .max_faults = 3,
                            .progress = isatty(2) ? 1 : 2, .log = stdout};
    int max_faults = 3, n;
    const char *results = NULL;
    char kinds[256], faults_form[320];
    snprintf(faults_form, sizeof faults_form,
             "a comma list of %s (or all: every kind but bandwidth)",
             drawn_kinds(kinds, sizeof kinds));
    const ddp_opt_t opts[] = {
        OPT_INT("ranks", &o.ranks, 1, 4096),
        OPT_INT("runs", &o.runs, 1, 100000000),
        OPT_U64("seed", &o.seed, 0),
        OPT_FN("faults", &o.kinds, parse_kinds, faults_form),
        OPT_INT("max-faults", &max_faults, 0, DDP_SCN_MAX_FAULTS),
        OPT_FN("accelerator", &o.accelerator, ddp_opt_accel, ddp_opt_accel_form(0)),
        OPT_FN("plugin", &o.plugin, ddp_opt_plugin_name, ddp_opt_plugin_form()),
        OPT_FN("out", &o.out_dir, ddp_opt_dir, DDP_OPT_DIR_FORM),
        OPT_FN("shard", &o.shard, ddp_opt_shard, DDP_OPT_SHARD_FORM),
        OPT_STR("results", &results, "a file to write"),
        OPT_FLAG("progress", 0, &o.progress, 1),
        OPT_FLAG("no-progress", 0, &o.progress, 0),
        OPT_HELP,
    };
    ddp_opt_spec_t sp = {DDP_OPT_SPEC("explore", opts, explore_usage), .max_operands = 0};
    DDP_OPT_PARSE_OR_RETURN(&sp, argc, argv, &n);
    if (ddp_opt_writable("explore", "--results", results))
        return 2;
    o.max_faults = max_faults ? max_faults : -1; /* the library's 0 means 3 */
    ddp_shard_file_t rf = {0};
    if (results)
        o.results = &rf;
    ddp_explore_stats_t st;
    int rc = ddp_explore(&o, &st) < 0 ? 2 : st.violations ? 1 : 0;
    if (rc != 2 && results && ddp_shard_write(&rf, results) != 0) {
        fprintf(stderr, "ddpsim explore: %s\n", ddp_err_message());
        rc = 2;
    }
    ddp_shard_file_free(&rf);
    return rc;
}
