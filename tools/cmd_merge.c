/* tools/cmd_merge.c — `ddpsim merge`: the result files of a sharded sweep
 * (ddpsim run / explore --shard K/N --results FILE) combined into what the
 * unsharded command prints (docs/sweeps.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "ddp/err.h"
#include "ddp/scenario.h"
#include "opt.h"

static void merge_usage(FILE *f)
{
    fprintf(f,
            "usage: ddpsim merge FILE... [--junit FILE] [--verbose] [--out DIR]\n\n"
            "Combines the result files of every shard of one sweep, as written by\n"
            "  ddpsim run ... --shard K/N --results FILE\n"
            "  ddpsim explore ... --shard K/N --results FILE\n"
            "and prints what the command without --shard prints. For ddpsim run: the\n"
            "outcome table in the order of the whole run list, the messages, the legend\n"
            "and the counts line (its time: the shards' times added up); --junit writes\n"
            "the JUnit XML the unsharded run writes (times aside). For ddpsim explore:\n"
            "each violation's report (with its shrunk scenario and replay command) in run\n"
            "order, then the summary line; --out DIR writes each violation's scenario\n"
            "files (explore-S-I.scn, explore-S-I-original.scn) there.\n\n"
            "Shards 1..N must all be there, once each, of one sweep (the same command\n"
            "with only --shard changed), and each complete; a file that is missing, cut\n"
            "short or of another sweep is named.\n\n"
            "  --junit FILE  JUnit XML of the merged runs (ddpsim run's shards)\n"
            "  --verbose, -v per-process outcomes under each row (ddpsim run's shards)\n"
            "  --out DIR     the violations' scenario files (ddpsim explore's shards)\n\n"
            "Exit status: that of the unsharded command (run: 0, 1, 3 every run skipped,\n"
            "128+N a shard was stopped by signal N; explore: 0, 1), or 2 bad input: a\n"
            "result file unreadable, of another sweep, a shard missing or given twice.\n");
}

int ddp_cmd_merge(struct ddp_sys *sys, int argc, char **argv)
{
    const char *junit = NULL, *dir = NULL;
    int verbose = 0, n;
    const ddp_opt_t opts[] = {
        OPT_STR("junit", &junit, "a file to write"),
        OPT_FLAG("verbose", 'v', &verbose, 1),
        OPT_FN("out", &dir, ddp_opt_dir, DDP_OPT_DIR_FORM),
        OPT_HELP,
    };
    ddp_opt_spec_t sp = {DDP_OPT_SPEC("merge", opts, merge_usage), .min_operands = 1,
                         .max_operands = -1,
                         .operands = "the result FILE of every shard"};
    DDP_OPT_PARSE_OR_RETURN(&sp, argc, argv, &n);
    if (ddp_opt_writable("merge", "--junit", junit))
        return 2;
    ddp_shard_file_t *parts = calloc((size_t)n, sizeof *parts);
    ddp_shard_file_t m = {0};
    int rc = 2;
    if (!parts) {
        fprintf(stderr, "ddpsim merge: out of memory for %d result file(s)\n", n);
        return 2;
    }
    for (int i = 0; i < n; i++)
        if (ddp_shard_read(argv[1 + i], &parts[i]) != 0) {
            fprintf(stderr, "ddpsim merge: %s\n", ddp_err_message());
            goto out;
        }
    if (ddp_shard_merge(parts, n, (const char *const *)argv + 1, &m) != 0) {
        fprintf(stderr, "ddpsim merge: %s\n", ddp_err_message());
        goto out;
    }
    int run = !strcmp(m.kind, "run");
    if (run && dir) {
        fprintf(stderr, "ddpsim merge: --out DIR is for explore's violations; these are "
                        "ddpsim run's shards (expected --junit FILE)\n");
        goto out;
    }
    if (!run && (junit || verbose)) {
        fprintf(stderr, "ddpsim merge: --junit and --verbose are for ddpsim run's "
                        "shards; these are ddpsim explore's (expected --out DIR)\n");
        goto out;
    }
    if (run) {
        ddp_run_report_t rep = {.cmd = "merge", .nfiles = m.files, .wall_s = m.wall_s,
                                .verbose = verbose, .junit = junit,
                                .interrupted = m.interrupted, .total = m.total,
                                .real = strstr(m.sweep, " --real") != NULL ||
                                        strstr(m.sweep, " --netns") != NULL};
        rc = ddp_run_report(sys, &rep, m.rows, m.nrows);
    } else {
        int v = ddp_explore_print_merged(&m, stdout, dir);
        rc = v < 0 ? 2 : v > 0 ? 1 : 0;
    }
out:
    for (int i = 0; i < n; i++)
        ddp_shard_file_free(&parts[i]);
    free(parts);
    ddp_shard_file_free(&m);
    return rc;
}
