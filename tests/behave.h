/* tests/behave.h — what the behaviour suites (tests/test_behave_*.c) share:
 * a recording plugin for simulated runs, and small readers of what a run
 * left behind (outcomes, the trace). */
#ifndef DDP_TEST_BEHAVE_H
#define DDP_TEST_BEHAVE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ddp/env.h"
#include "ddp/sim.h"
#include "ddp/sys.h"

struct ddp_plan;

/* The registered name of the recording plugin: a plan entry naming it runs
 * it in every process that connects. */
#define DDP_BEHAVE_RECORDER "behave-recorder"

/* What one simulated process showed the plugin. */
typedef struct ddp_behave_rec {
    int init_calls;            /* init_ddp_connection calls */
    char accel[16], cluster[16], backend[16];
    int global_rank, local_rank, node_rank, world_size;
    int init_rc;               /* what the default returned */
    int children;              /* processes it had launched by then */
    ddp_env_t *env_init;       /* its environment as init began */
    ddp_env_t *env_after;      /* ... and once the default returned */
} ddp_behave_rec_t;

/* The record of simulation task `task` (NULL: it never reached the
 * plugin). Valid until ddp_behave_rec_reset. */
const ddp_behave_rec_t *ddp_behave_rec(int task);
void ddp_behave_rec_reset(void);

/* Suite init/cleanup: registers the recorder; quiets logs below ERROR. */
int ddp_behave_suite_init(void);
int ddp_behave_suite_cleanup(void);

/* A simulation (options so, or the defaults) with nodes node0, node1, ...
 * at 10.0.<i>.1. */
ddp_sim_t *ddp_behave_sim(const ddp_sim_opts_t *so, int nodes);
/* A scenario written in the test, planned for accel and set up in a fresh
 * simulation (each step asserted); *plan is the caller's to free. */
ddp_sim_t *ddp_behave_scenario(const char *text, const char *accel,
                               const ddp_sim_opts_t *so, struct ddp_plan **plan);
/* Inside a task: a store server on `port` of its node, serving until *done
 * reaches want (or limit_ns passes), then freed. 0, or why it could not
 * listen. */
int ddp_behave_serve(ddp_sys_t *sys, uint16_t port, atomic_int *done, int want,
                     int64_t limit_ns);
/* The same with the server's options (their port included). */
struct ddp_store_server_opts;
int ddp_behave_serve_opts(ddp_sys_t *sys, const struct ddp_store_server_opts *so,
                          atomic_int *done, int want, int64_t limit_ns);

/* A client of the store at node0:29500 (seed: its backoff jitter), its
 * connect retried for within_ns; NULL with *rc set when it could not. */
struct ddp_store;
struct ddp_store *ddp_behave_client(ddp_sys_t *sys, uint64_t seed, int64_t within_ns,
                                    int *rc);
/* The argument of a test's task: the run it belongs to and its rank. */
typedef struct ddp_behave_task {
    void *run;
    int rank;
} ddp_behave_task_t;

/* How many processes (not threads) of sim ended with leaked sockets, and
 * the first one's name in who (may be NULL). */
int ddp_behave_leaked(const ddp_sim_t *sim, char *who, size_t n);

/* The virtual times (ns) of the trace events of `kind` by task `task`
 * (NULL: any task), in order; returns how many (at most max). */
int ddp_behave_trace_times(const char *trace, const char *task, const char *kind,
                           int64_t *out, int max);

#endif
