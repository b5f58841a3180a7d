/* tests/launch_diff.h — the launch-contract differential (docs/fidelity.md,
 * "Launch contracts"): torch 1.13's per-worker environment, computed by
 * tests/differential/launch_oracle.py with torch's own code, against
 * ddpsim's launchers: `ddpsim launch` (run in-process over a sys whose
 * spawn records each worker's environment) for the static rendezvous, the
 * elastic agent's worker environment (harness/worker_env.c) for c10d.
 * Used by the launch_contract suite (a sample inside make test) and
 * tests/differential/launch.c (make differential). */
#ifndef DDP_TEST_LAUNCH_DIFF_H
#define DDP_TEST_LAUNCH_DIFF_H

#include <stdio.h>

typedef struct launch_diff {
    long configs, workers;     /* configurations read; workers compared */
    long torch_rejected;       /* of configs */
    long explained;            /* disagreements docs/fidelity.md names */
    long disagreed;            /* the others */
    long why[8];               /* explained, by LAUNCH_WHY_* */
    char first[600];           /* the first unexplained one, in words */
} launch_diff_t;

/* The documented differences (docs/fidelity.md, "Launch contracts"). */
enum {
    LAUNCH_WHY_AGENT_STORE, /* static: torch's agent hosts the store, ddpsim's does not */
    LAUNCH_WHY_NPROC_MAX,   /* more than 64 workers a node */
    LAUNCH_WHY_PORT_0,      /* --master_port 0 */
    LAUNCH_WHY_PY_INT,      /* Python int() forms: " 4", "4_0" */
    LAUNCH_NWHY
};
const char *launch_why_name(int why);

/* A POSIX sys over env (taken over) whose spawn records each child's
 * environment (the child is never started and "exits" 0 at once): for
 * running a launcher in-process. NULL when out of memory. */
struct ddp_sys;
struct ddp_env;
struct ddp_sys *launch_diff_recording_sys(struct ddp_env *env);
/* The environments recorded since the last clear (*n of them). */
struct ddp_env *const *launch_diff_recorded(int *n);
void launch_diff_clear(void);

/* Reads the oracle's blocks from f, compares each: 0, or -1 when f is not
 * in the oracle's format (d->first says where). */
int launch_diff_read(FILE *f, launch_diff_t *d);

#endif
