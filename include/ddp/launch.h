/* ddp/launch.h — the harness's launches on a simulated cluster: an
 * accelerator's processes started the way its real launcher would, and a
 * store rendezvous workload (tests, benchmarks). Built on the virtual OS of
 * ddp/sim.h; the simulator itself knows nothing of what runs on it. */
#ifndef DDP_LAUNCH_H
#define DDP_LAUNCH_H

#include <stdint.h>

#include "ddp/env.h"
#include "ddp/plugin.h"
#include "ddp/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- accelerators on a simulated cluster ----
 * Starts the processes the way a real launcher would. DDP_SIM_LAUNCH_AUTO
 * picks the accelerator's usual one: for ddp, ddp_spawn, ddp_cpu and ddp2
 * one script process per node (NODE_RANK set; ddp and the spawners launch
 * the rest themselves); for ddp_hpc a SLURM job (one task per rank with
 * SLURM_* set, as srun would) and for ddp_cpu_hpc a torchrun job (RANK,
 * LOCAL_RANK, GROUP_RANK, LOCAL_WORLD_SIZE, WORLD_SIZE). MPI sets OpenMPI's
 * OMPI_COMM_WORLD_* (+ PMIX_NAMESPACE), LSF jsrun's JSM_NAMESPACE_*, LSB_JOBID
 * and LSB_DJOB_RANKFILE (a virtual file: the launch node, then one line per
 * rank slot). Every process is also given MASTER_ADDR (node 0's host name
 * unless master_addr says otherwise) and MASTER_PORT, as a user exports
 * them, and runs ddp_accel_run. SLURM_NODELIST is the compressed hostlist of
 * the nodes' host names. */
typedef enum ddp_sim_launcher {
    DDP_SIM_LAUNCH_AUTO = 0,
    DDP_SIM_LAUNCH_PER_NODE, /* the user runs the script once per node */
    DDP_SIM_LAUNCH_SLURM,    /* srun */
    DDP_SIM_LAUNCH_TORCHRUN, /* torchrun / torch.distributed.run */
    DDP_SIM_LAUNCH_MPI,      /* mpirun (OpenMPI) */
    DDP_SIM_LAUNCH_LSF,      /* jsrun (LSF) */
    DDP_SIM_LAUNCH_COUNT
} ddp_sim_launcher_t;
const char *ddp_sim_launcher_name(ddp_sim_launcher_t l);
int ddp_sim_launcher_parse(const char *name, ddp_sim_launcher_t *out);

typedef struct ddp_sim_launch {
    const char *accelerator;
    int nodes, procs;        /* procs = processes (devices) per node */
    ddp_trainer_cfg_t cfg;   /* accelerator/num_nodes/num_processes are set
                                from the fields above unless already set */
    ddp_sim_launcher_t launcher;
    int tasks_per_node;      /* external launchers: tasks per node (0 ->
                                procs); a mismatch is SLURM's #4389 */
    uint16_t port;           /* MASTER_PORT; 0 -> 29500 */
    int no_port;             /* do not export MASTER_PORT */
    const char *master_addr; /* NULL -> node 0's host; "" -> not exported */
    int64_t master_start_ns; /* node 0's processes start late by this */
    int squat_port;          /* another process already listens on it */
    const ddp_env_t *extra_env; /* added to every process (may be NULL) */
    /* Last word on each process's environment (after everything above). */
    void (*edit_env)(ddp_env_t *env, int node, void *arg);
    void *edit_arg;
    int first_task;          /* filled: first task id it added */
} ddp_sim_launch_t;

int ddp_sim_launch_build(ddp_sim_t *sim, ddp_sim_launch_t *l);

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

int ddp_sim_rendezvous_build(ddp_sim_t *sim, ddp_sim_rendezvous_t *rv);

#ifdef __cplusplus
}
#endif
#endif
