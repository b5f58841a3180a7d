/* ddp/launch.h — the harness's launches on a simulated cluster: an
 * accelerator's processes started the way its real launcher would, and a
 * store rendezvous workload (tests, benchmarks). Built on the virtual OS of
 * ddp/sim.h; the simulator itself knows nothing of what runs on it. */
#ifndef DDP_LAUNCH_H
#define DDP_LAUNCH_H

#include "ddp/export.h"

#include <stdint.h>

#include "ddp/env.h"
#include "ddp/plan.h"
#include "ddp/plugin.h"
#include "ddp/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- accelerators on a simulated cluster (from code) ----
 * A shorthand over launch plans (ddp/plan.h) for tests and benchmarks:
 * the sim's first `nodes` nodes, the Trainer configuration `cfg` (its
 * plugin must be registered: a plan names it) and the launch fields below
 * become a plan, whose processes are added as tasks. Scenarios build their
 * plans themselves (harness/scenario_run.c). */
typedef ddp_launcher_t ddp_sim_launcher_t;
#define DDP_SIM_LAUNCH_AUTO DDP_LAUNCH_AUTO
#define DDP_SIM_LAUNCH_PER_NODE DDP_LAUNCH_PER_NODE
#define DDP_SIM_LAUNCH_SLURM DDP_LAUNCH_SLURM
#define DDP_SIM_LAUNCH_TORCHRUN DDP_LAUNCH_TORCHRUN
#define DDP_SIM_LAUNCH_MPI DDP_LAUNCH_MPI
#define DDP_SIM_LAUNCH_LSF DDP_LAUNCH_LSF
#define DDP_SIM_LAUNCH_COUNT DDP_LAUNCH_COUNT
#define ddp_sim_launcher_name ddp_launcher_name
#define ddp_sim_launcher_parse ddp_launcher_parse

typedef struct ddp_sim_launch {
    const char *accelerator;
    int nodes, procs;        /* procs = processes (devices) per node */
    ddp_trainer_cfg_t cfg;   /* accelerator/num_nodes/num_processes are set
                                from the fields above unless already set */
    ddp_launcher_t launcher;
    int tasks_per_node;
    uint16_t port;
    int no_port;
    const char *master_addr;
    int64_t master_start_ns;
    int squat_port;
    const ddp_env_t *extra_env;
    void (*edit_env)(ddp_env_t *env, int node, void *arg);
    void *edit_arg;
    int first_task;          /* filled: first task id it added */
} ddp_sim_launch_t;

DDP_API int ddp_sim_launch_build(ddp_sim_t *sim, ddp_sim_launch_t *l);

/* ---- a store rendezvous workload (tests, benchmarks) ----
 * Adds a store-server task on node 0 (started at server_start_ns, or never
 * when server_start_ns < 0) and `ranks` rank tasks in equal blocks over the
 * nodes (rank r on node r * nodes / ranks); each rank connects to the store through the sim
 * sys (the real TCPStore client), runs wait-for-workers and the store
 * barrier, and records its outcome (rc, message, connect time). */
typedef struct ddp_sim_rendezvous {
    int ranks;
    const char *master; /* host name or address of the store; "node0"... */
    uint16_t port;      /* 0 -> 29500 */
    int64_t timeout_ns; /* each rank's deadline; 0 -> 300 s */
    int64_t server_start_ns; /* < 0: the server never starts */
    int64_t rank_start_ns;   /* every rank starts then */
    /* filled by the run */
    int done;                /* ranks that finished (ok or not) */
    int server_task;
    int first_rank_task;
} ddp_sim_rendezvous_t;

DDP_API int ddp_sim_rendezvous_build(ddp_sim_t *sim, ddp_sim_rendezvous_t *rv);

#ifdef __cplusplus
}
#endif
#endif
