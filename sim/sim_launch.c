/* sim/sim_launch.c — start an accelerator's processes on a simulated
 * cluster the way its real launcher would (see ddp/sim.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/accel.h"
#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/sim.h"

static int script_main(ddp_sys_t *sys, void *arg)
{
    ddp_run_result_t res;
    int rc = ddp_accel_run(sys, arg, &res);
    if (rc)
        ddp_sim_report(sys, res.message);
    return rc;
}

static int squatter_main(ddp_sys_t *sys, void *arg)
{
    ddp_addr_t any;
    ddp_addr_parse("0.0.0.0", (uint16_t)(intptr_t)arg, &any);
    int fd = ddp_sys_listen(sys, &any, 16);
    if (fd < 0)
        return 1;
    /* Holds the port for the run's lifetime, accepting nothing. */
    ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 4 * 3600 * DDP_NS_PER_S));
    ddp_sys_close(sys, fd);
    return 0;
}

typedef enum { LAUNCH_PER_NODE, LAUNCH_SLURM, LAUNCH_TORCHRUN } launch_kind_t;

static launch_kind_t kind_of(const char *accel)
{
    if (!strcmp(accel, "ddp_hpc"))
        return LAUNCH_SLURM;
    if (!strcmp(accel, "ddp_cpu_hpc"))
        return LAUNCH_TORCHRUN;
    return LAUNCH_PER_NODE;
}

int ddp_sim_launch_build(ddp_sim_t *sim, ddp_sim_launch_t *l)
{
    if (!l->accelerator || l->nodes < 1 || l->procs < 1 ||
        l->nodes > ddp_sim_node_count(sim))
        return ddp_err_set(DDP_ECONFIG, "launch: need an accelerator, 1..%d "
                                        "nodes and >= 1 process per node",
                           ddp_sim_node_count(sim));
    uint16_t port = l->port ? l->port : 29500;
    l->cfg.accelerator = l->accelerator;
    l->cfg.num_nodes = l->nodes;
    l->cfg.num_processes = l->procs;
    l->first_task = ddp_sim_task_count(sim);
    if (l->squat_port)
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "squatter",
                                                     .rank = -1},
                         squatter_main, (void *)(intptr_t)l->squat_port);
    launch_kind_t kind = kind_of(l->accelerator);
    int per_node = kind == LAUNCH_PER_NODE ? 1 : l->procs;
    int world = l->nodes * l->procs;
    char nodelist[64];
    snprintf(nodelist, sizeof nodelist, l->nodes > 1 ? "node[0-%d]" : "node0",
             l->nodes - 1);
    for (int n = 0; n < l->nodes; n++) {
        for (int p = 0; p < per_node; p++) {
            ddp_env_t *env = l->extra_env ? ddp_env_clone(l->extra_env) : ddp_env_new();
            int rank = n * l->procs + p;
            ddp_env_set(env, "MASTER_ADDR", "node0");
            ddp_env_setf(env, "MASTER_PORT", "%u", (unsigned)port);
            if (kind == LAUNCH_PER_NODE) {
                ddp_env_setf(env, "NODE_RANK", "%d", n);
            } else if (kind == LAUNCH_SLURM) {
                ddp_env_setf(env, "SLURM_NTASKS", "%d", world);
                ddp_env_setf(env, "SLURM_NTASKS_PER_NODE", "%d", l->procs);
                ddp_env_setf(env, "SLURM_NNODES", "%d", l->nodes);
                ddp_env_setf(env, "SLURM_PROCID", "%d", rank);
                ddp_env_setf(env, "SLURM_LOCALID", "%d", p);
                ddp_env_setf(env, "SLURM_NODEID", "%d", n);
                ddp_env_set(env, "SLURM_NODELIST", nodelist);
                ddp_env_set(env, "SLURM_JOB_ID", "4242");
                ddp_env_set(env, "SLURM_JOB_NAME", "train");
            } else {
                ddp_env_setf(env, "RANK", "%d", rank);
                ddp_env_setf(env, "LOCAL_RANK", "%d", p);
                ddp_env_setf(env, "GROUP_RANK", "%d", n);
                ddp_env_setf(env, "LOCAL_WORLD_SIZE", "%d", l->procs);
                ddp_env_setf(env, "WORLD_SIZE", "%d", world);
            }
            char name[32];
            snprintf(name, sizeof name, per_node == 1 ? "node%d" : "rank%d",
                     per_node == 1 ? n : rank);
            ddp_sim_add_task(sim,
                             &(ddp_sim_task_opts_t){
                                 .node = n, .name = name,
                                 .rank = per_node == 1 ? -1 : rank, .env = env,
                                 .start_ns = (n == 0 ? l->master_start_ns : 0) +
                                             DDP_NS_PER_MS},
                             script_main, &l->cfg);
            ddp_env_free(env);
        }
    }
    return 0;
}
