/* tools/artifacts.h — `ddpsim run --artifacts DIR`: a folder per failing
 * or vacuous run (every run with --artifacts-all) holding what reproduces
 * and explains it (docs/real-runs.md has the list), which `ddpsim report`
 * turns into HTML pages. */
#ifndef DDP_TOOLS_ARTIFACTS_H
#define DDP_TOOLS_ARTIFACTS_H

#include <stddef.h>
#include <stdint.h>

#include "ddp/scenario.h"

typedef struct ddp_art {
    const char *dir; /* --artifacts DIR (NULL: none) */
    int all;         /* --artifacts-all: every run, not only failing ones */
    int real, netns; /* the runs' executor */
    uint64_t seed;   /* --seed (0: each scenario's) */
} ddp_art_t;

/* Run j's folder name: SCENARIO.ACCEL (.netns for --netns), the stem of
 * its file: the name --keep-output gives a run's folder too. */
const char *ddp_art_name(const ddp_art_t *a, const ddp_shard_row_t *j, char *buf, size_t n);
/* Before the first run: no two runs of jobs share a folder name, and no
 * run's folder exists under a->dir (nothing there is ever replaced).
 * 0, or 2 with one line on stderr naming the clash. */
int ddp_art_check(const ddp_art_t *a, const ddp_shard_row_t *jobs, int njobs, const char *cmd);
/* Does run j keep a folder (failing or vacuous, or every run with all)? */
int ddp_art_keeps(const ddp_art_t *a, const ddp_shard_row_t *j);
/* Writes run j's folder (trace: the simulator's JSON-lines trace, or NULL
 * for a real run). 0, or < 0 with the error set. */
int ddp_art_write(const ddp_art_t *a, const ddp_shard_row_t *j, const char *trace);

#endif
