/* ddp/real.h — scenarios as real processes (docs/real-runs.md).
 *
 * A run executes the scenario's launch plan (ddp/plan.h), the one the
 * simulator executes: which processes, on which node, with which
 * environment, when. The runner writes the plan to a file and starts each
 * process as `ddpsim train --plan FILE --process N` with the POSIX sys,
 * on loopback (node i answers at 127.0.0.(i+1)) or, with netns, in a
 * network namespace of its own per node. Faults are realised with the same libfiu
 * point names inside each process (sys/net/connect, sys/net/resolve,
 * ddp/phase/enter), with signals from the runner (SIGKILL, SIGSTOP/SIGCONT),
 * delayed starts, a process holding a port, and, with netns, links taken
 * down (partitions) and netem delays. What cannot be realised is skipped
 * with the reason. Outcomes are judged exactly as simulated ones are.
 */
#ifndef DDP_REAL_H
#define DDP_REAL_H

#include "ddp/export.h"

#include <signal.h>
#include <stddef.h>

#include "ddp/accel.h"
#include "ddp/scenario.h"
#include "ddp/sys.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ddp_real_opts {
    const char *ddpsim; /* the ddpsim binary each process runs */
    int netns;          /* one network namespace per node (needs root) */
    const char *tmpdir; /* results files; NULL: /tmp */
    uint64_t seed;      /* 0: the scenario's */
    char *report;       /* per-process lines (or NULL) */
    size_t report_len;
    /* When set and *interrupted turns non-zero (a signal handler), the run
     * stops: its processes are killed, its namespaces deleted, and the
     * result fails with "interrupted". */
    volatile sig_atomic_t *interrupted;
    /* A foreign program (exec) still running this long past the scenario's
     * deadline is killed and reported as a timeout (0: 30 s). */
    int64_t exec_grace_ns;
    /* A foreign program's store is hosted by the run (a ddpsim store on
     * node 0 at MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE=True for the
     * ranks), so store events reach its faults; 1: the job hosts its own. */
    int no_host_store;
    /* A foreign program's environment starts empty instead of from the
     * runner's (less the launchers' variables); the plan's and the
     * harness's variables are set either way. */
    int env_clear;
    /* Where each foreign rank's stdout and stderr are kept: a folder per
     * run under it. NULL: under tmpdir, kept for failing and vacuous runs
     * only; set: kept for every run (for failing and vacuous runs only
     * with keep_failing). */
    const char *keep_output;
    int keep_failing;
    /* When set, every process records each distinct event it sees (a key
     * set or waited on at the hosted store, a join, a phase of ddpsim's
     * own ranks), and tap gets them all at the end of the run (node -1;
     * t: ns since the run's start): `ddpsim check --exec`'s discovery. */
    void (*tap)(void *arg, const ddp_fault_event_t *ev, int node, int64_t t);
    void *tap_arg;
    /* Every foreign rank starts as a fresh process (`--cold`). Else a
     * Python job (python3 or scripts/torch-python running a *.py script,
     * not under torch's agents) starts warm: one fork server per process
     * (a zygote, kept from run to run) imports $DDPSIM_WARM_IMPORT (default
     * "torch") once and forks each rank into the script (docs/real-runs.md,
     * "Warm start"). */
    int cold;
} ddp_real_opts_t;

/* NULL when s can run for real (with netns or not); else why not. */
DDP_API const char *ddp_real_unsupported(const ddp_scenario_t *s, const char *accel,
                                 int netns, char *buf, size_t n);

/* Runs s for accel as real processes and judges the outcomes. Returns 0
 * when it ran or was skipped (r->skipped, r->why), < 0 when it could not
 * be set up (the error names what failed: e.g. netns without root). */
DDP_API int ddp_real_run(ddp_sys_t *sys, const ddp_scenario_t *s, const char *accel,
                 const ddp_real_opts_t *o, ddp_scn_result_t *r);

/* Ends the warm start's fork server (the zygote ddp_real_run keeps for
 * the next run, a child of this process) and removes its output file;
 * the next warm run starts another. Call it after the last run. */
DDP_API void ddp_real_warm_release(void);

/* 0 if the program of an `exec` command line (its first word after any
 * VAR=value words) exists and is executable, as PATH finds it; else
 * -ENOENT with an error naming it (`ddpsim run --exec` exits 127 then). */
DDP_API int ddp_real_check_exec(ddp_sys_t *sys, const char *cmd);

/* One process of a real run, in the process itself (`ddpsim train --plan
 * FILE --process N`): reads the plan the runner wrote, arms its in-process
 * faults, runs process `index`'s entry and appends its result record to
 * the plan's results file. Returns the exit status (0 ok, 1 failed), or a
 * negative code when the plan cannot be read (the error names the file
 * and line). */
DDP_API int ddp_real_child(ddp_sys_t *sys, const char *plan_path, int index);

#ifdef __cplusplus
}
#endif
#endif
