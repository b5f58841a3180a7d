/* tests/mpirun_diff.h — the mpirun launch-contract differential
 * (docs/fidelity.md, "Launch contracts"): real OpenMPI mpirun (this host,
 * one node) on generated configurations (-np, --map-by, --oversubscribe,
 * -x VAR) against ddpsim's mpirun launcher (harness/plan.c) and what
 * ddpsim's mpi cluster environment (core/cluster_envs.c) reads from each.
 * Used by the launch_contract suite (a few, when mpirun is here) and
 * tests/differential/mpirun.c (make differential). */
#ifndef DDP_TEST_MPIRUN_DIFF_H
#define DDP_TEST_MPIRUN_DIFF_H

#include <stdint.h>

typedef struct mpirun_diff {
    long configs, ranks;   /* configurations run; ranks compared */
    long refused;          /* configurations real mpirun refused */
    long explained;        /* refused for slots: ddpsim has no slot count */
    long disagreed;
    char first[600];       /* the first unexplained disagreement, in words */
} mpirun_diff_t;

/* Whether mpirun runs here (as root: --allow-run-as-root). */
int mpirun_here(void);
/* count configurations from seed, each real mpirun bounded by 30 s. */
void mpirun_diff_run(uint64_t seed, long count, mpirun_diff_t *d);

#endif
