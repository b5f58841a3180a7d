/* tests/extlaunch_diff.h — the external launchers' differential
 * (docs/fidelity.md, "Launch contracts"): real OpenMPI `mpirun` and real
 * SLURM `srun` (this host, one node) on generated configurations against
 * ddpsim's mpirun and srun launchers (harness/plan.c) and what ddpsim's
 * `mpi` and `slurm` cluster environments (core/cluster_envs.c) read from
 * each. Used by the launch_contract suite (a few, when the launcher is
 * here) and tests/differential/extlaunch.c (make differential). */
#ifndef DDP_TEST_EXTLAUNCH_DIFF_H
#define DDP_TEST_EXTLAUNCH_DIFF_H

#include <stdint.h>

enum { EXT_MPIRUN, EXT_SRUN, EXT_NKINDS };

typedef struct ext_diff {
    long configs, ranks;   /* configurations run; ranks compared */
    long refused;          /* configurations the real launcher refused */
    long explained;        /* of them, for resources a plan does not model */
    long disagreed;
    char first[600];       /* the first unexplained disagreement, in words */
} ext_diff_t;

const char *ext_name(int kind); /* "mpirun", "srun" */
/* Whether the launcher runs here: NULL, or why not. srun needs a running
 * cluster: SLURM_CONF naming one (tests/slurm/start.sh). */
const char *ext_missing(int kind);
/* count configurations from seed, each real run bounded by 30 s, jobs
 * (1 to EXT_MAX_JOBS) real launches at a time; the figures are the same
 * for every jobs. */
enum { EXT_MAX_JOBS = 16 };
void ext_diff_run(int kind, uint64_t seed, long count, int jobs, ext_diff_t *d);

#endif
