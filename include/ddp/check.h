/* ddp/check.h — `ddpsim check`: tests the user's plugin with no scenario of
 * the user's (docs/check.md, DESIGN § 6c).
 *
 * A check is: fault-free baselines over the cluster shapes that matter;
 * discovery of what the plugin does (phases entered, store keys set and
 * waited on) from the baselines' events; faults aimed at each discovered
 * event for each rank class, alone and in pairs, then random schedules;
 * oracles that need no expectation of the user's; every finding shrunk to
 * a scenario file with a replay command that reproduces it (checked). The
 * generators aim, the oracles judge: they share no code path.
 */
#ifndef DDP_CHECK_H
#define DDP_CHECK_H

#include "ddp/export.h"

#include <stdint.h>
#include <stdio.h>

#include "ddp/scenario.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DDP_CHECK_MAX_PHASES 48
#define DDP_CHECK_MAX_KEYS 64

/* Rank classes: bit 0 rank 0, bit 1 another rank on node 0, bit 2 a rank
 * on another node. */
enum { DDP_CHECK_RANK0 = 1, DDP_CHECK_LOCAL = 2, DDP_CHECK_REMOTE = 4 };

/* What the baselines saw the plugin do. "user": the default plugin, run on
 * the same shapes, does not do it (the user's own step). */
typedef struct ddp_check_discovery {
    struct {
        char name[48];
        unsigned classes; /* DDP_CHECK_* of the ranks that entered it */
        int user;
    } phases[DDP_CHECK_MAX_PHASES];
    int nphases;
    struct {
        char glob[96];   /* digits generalised to a star */
        char example[96];
        unsigned ops;    /* 1 set (SET, ADD, ...), 2 waited on (WAIT, GET) */
        int keys;        /* distinct keys it stands for */
        int user;
    } keys[DDP_CHECK_MAX_KEYS];
    int nkeys;
    int connects[3];     /* store connects per rank class */
} ddp_check_discovery_t;

/* One finding: the oracle that failed, in a sentence; the shrunk scenario
 * and its replay. */
typedef struct ddp_check_finding {
    char oracle[24];     /* baseline, no-fault, invariant, transient,
                            agreement, cause, sanitizer */
    char sentence[1024];
    char accel[16];
    char *scenario;      /* the shrunk scenario's text (malloc'd) */
    char path[1024];     /* where it was written ("" not written) */
    char replay[1600];   /* the command that reproduces it */
    int replayed;        /* 1: its replay reproduced it, 0: not, -1 not tried */
    int shrink_steps;
    ddp_scn_result_t result; /* the shrunk run's */
} ddp_check_finding_t;

typedef struct ddp_check_opts {
    const char *plugin;  /* the user's plugin: a registered name */
    /* Or a foreign program every rank runs (`exec`), checked in real runs
     * on loopback (netns: a network namespace per node, as root) on
     * MASTER_PORT port (0: 31700); self is then the ddpsim binary that
     * runs the processes. */
    const char *exec;
    int netns;
    unsigned port;
    int cold;            /* exec: every rank a fresh interpreter, no warm
                            start (ddp_real_opts_t.cold) */
    uint64_t seed;       /* 0: 1 */
    int runs;            /* at most this many runs after the baselines
                            (0: 3,000) */
    double budget_s;     /* and at most this wall time (0: 300 s) */
    int random_runs;     /* random schedules after the aimed ones (0: 200;
                            < 0: none) */
    int max_findings;    /* 0: 10 */
    int list_only;       /* baselines and discovery only */
    const char *out_dir; /* findings' scenario files (NULL: none written) */
    const char *self;    /* the ddpsim command, for replay lines (NULL:
                            "ddpsim") */
    ddp_shard_t shard;   /* only the aimed and random runs i this shard
                            owns ({0, 0}: all) */
    /* Before each run, its accelerator (first line) and scenario are
     * written here (NULL: nowhere): what `check --sanitize` reads back when
     * a sanitizer ends the process in the middle of a run. */
    const char *current_path;
    int progress;        /* as explore's */
    FILE *log;           /* NULL: stdout */
} ddp_check_opts_t;

typedef struct ddp_check_report {
    ddp_check_discovery_t disc;
    int baseline_runs, baseline_failed;
    int aimed_runs, random_runs, candidates;
    int findings_total;          /* before deduplication */
    ddp_check_finding_t *findings;
    int nfindings;
    double wall_s;
    int budget_hit;              /* stopped by --budget / --runs */
} ddp_check_report_t;

/* Runs a check of o->plugin; fills rep (free with ddp_check_report_free).
 * 0 when it ran (rep->nfindings says what it found), < 0 with the error
 * set when it could not (no such plugin). */
DDP_API int ddp_check(const ddp_check_opts_t *o, ddp_check_report_t *rep);
DDP_API void ddp_check_report_free(ddp_check_report_t *rep);
/* Prints the discovery as `ddpsim check --list` does. */
DDP_API void ddp_check_print_discovery(const ddp_check_discovery_t *d, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
