/* tools/cmd_explore.c — `ddpsim explore`: random fault schedules on a
 * simulated cluster, the invariants checked on every run, and a replay
 * command and a shrunk scenario for each violation (docs/explore.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmds.h"
#include "ddp/accel.h"
#include "ddp/err.h"
#include "ddp/plugin.h"
#include "ddp/scenario.h"
#include "ddp/sim.h"

static void explore_usage(FILE *f)
{
    fprintf(f,
            "usage: ddpsim explore [--ranks N] [--runs K] [--seed S] [--faults KINDS]\n"
            "                      [--max-faults M] [--accelerator NAME] [--plugin NAME]\n"
            "                      [--out DIR] [--progress | --no-progress]\n\n"
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
            "  --ranks N          world size (1..4096, default 16)\n"
            "  --runs K           runs (default 100)\n"
            "  --seed S           run i is drawn from S and i alone (default 1)\n"
            "  --faults KINDS     comma list of refuse, reset, blackhole, delay, partition,\n"
            "                     crash, pause, resolve, point, or all (default all)\n"
            "  --max-faults M     at most M faults per run (0..%d, default 3)\n"
            "  --accelerator NAME only this accelerator (default: drawn per run)\n"
            "  --plugin NAME      the DDP plugin (default, subgroups, rpc)\n"
            "  --out DIR          write each violation as scenario files into DIR\n"
            "  --progress         a progress bar on stderr (default when it is a terminal)\n"
            "  --no-progress      a plain line every 10 %% of the runs instead\n\n"
            "Same options, same runs: the output is deterministic (but for the times).\n\n"
            "Exit status: 0 no violation, 1 some violation, 2 bad input.\n",
            DDP_SCN_MAX_FAULTS);
}

static int bad(const char *opt, const char *val, const char *want)
{
    fprintf(stderr, "ddpsim explore: bad %s \"%s\": expected %s (see ddpsim explore "
                    "--help)\n", opt, val ? val : "", want);
    return 2;
}

/* A whole decimal number in [lo, hi]. */
static int parse_num(const char *v, long long lo, long long hi, long long *out)
{
    if (!v || !*v)
        return -1;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (*end || errno || x < lo || x > hi)
        return -1;
    *out = x;
    return 0;
}

static int parse_kinds(const char *v, unsigned *out)
{
    *out = 0;
    char buf[256];
    if (!v || !*v || strlen(v) >= sizeof buf)
        return -1;
    snprintf(buf, sizeof buf, "%s", v);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        ddp_sim_fault_kind_t k;
        if (!strcasecmp(tok, "all"))
            *out |= (1u << DDP_FAULT_KIND_COUNT) - 1;
        else if (ddp_sim_fault_kind_parse(tok, &k) == 0)
            *out |= 1u << k;
        else
            return -1;
    }
    return *out ? 0 : -1;
}

int ddp_cmd_explore(ddp_sys_t *sys, int argc, char **argv)
{
    (void)sys;
    ddp_explore_opts_t o = {.ranks = 16, .runs = 100, .seed = 1, .max_faults = 3,
                            .progress = isatty(2), .log = stdout};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long x;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            explore_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--progress")) {
            o.progress = 1;
            continue;
        } else if (!strcmp(a, "--no-progress")) {
            o.progress = 0;
            continue;
        }
        static const char *const valued[] = {"--ranks", "--runs", "--seed", "--faults",
                                             "--max-faults", "--accelerator",
                                             "--plugin", "--out"};
        size_t k = 0;
        while (k < sizeof valued / sizeof valued[0] && strcmp(a, valued[k]))
            k++;
        if (k == sizeof valued / sizeof valued[0])
            return bad("option", a, "one of --ranks, --runs, --seed, --faults, "
                                    "--max-faults, --accelerator, --plugin, --out, "
                                    "--progress, --no-progress, --help");
        if (!v)
            return bad(a, "", "a value after it");
        i++;
        if (!strcmp(a, "--ranks")) {
            if (parse_num(v, 1, 4096, &x))
                return bad(a, v, "a whole number of ranks in 1..4096");
            o.ranks = (int)x;
        } else if (!strcmp(a, "--runs")) {
            if (parse_num(v, 1, 100000000, &x))
                return bad(a, v, "a whole number of runs in 1..100000000");
            o.runs = (int)x;
        } else if (!strcmp(a, "--seed")) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (!*v || *end || errno || *v == '-')
                return bad(a, v, "a whole number (0..2^64-1)");
            o.seed = s;
        } else if (!strcmp(a, "--faults")) {
            if (parse_kinds(v, &o.kinds))
                return bad(a, v, "a comma list of refuse, reset, blackhole, delay, "
                                 "partition, crash, pause, resolve, point (or all)");
        } else if (!strcmp(a, "--max-faults")) {
            if (parse_num(v, 0, DDP_SCN_MAX_FAULTS, &x))
                return bad(a, v, "a whole number of faults in 0..32");
            o.max_faults = x ? (int)x : -1; /* the library's 0 means 3 */
        } else if (!strcmp(a, "--accelerator")) {
            if (!ddp_accel_find(v))
                return bad(a, v, "one of ddp, ddp_spawn, ddp_cpu, ddp2, ddp_hpc, "
                                 "ddp_cpu_hpc");
            o.accelerator = v;
        } else if (!strcmp(a, "--plugin")) {
            if (!ddp_plugin_find(v)) {
                const char *m = ddp_err_message();
                const char *one = strstr(m, "expected ");
                return bad(a, v, one ? one + 9 : "a registered plugin name");
            }
            o.plugin = v;
        } else if (!strcmp(a, "--out")) {
            struct stat sb;
            if (stat(v, &sb) != 0 && mkdir(v, 0777) != 0)
                return bad(a, v, "a directory that exists or can be made");
            if (stat(v, &sb) != 0 || !S_ISDIR(sb.st_mode))
                return bad(a, v, "a directory");
            o.out_dir = v;
        }
    }
    ddp_explore_stats_t st;
    int rc = ddp_explore(&o, &st);
    if (rc < 0)
        return 2;
    return st.violations ? 1 : 0;
}
