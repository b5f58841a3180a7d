/* harness/launch.c — start an accelerator's processes on a simulated
 * cluster the way its real launcher would (see ddp/sim.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ddp/accel.h"
#include "ddp/cluster.h"
#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/launch.h"
#include "ddp/sim.h"

#define LSF_RANKFILE "/sim/lsf/rankfile"

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

static const char *const launcher_names[DDP_SIM_LAUNCH_COUNT] = {
    "auto", "per-node", "slurm", "torchrun", "mpi", "lsf"};

const char *ddp_sim_launcher_name(ddp_sim_launcher_t l)
{
    return l >= 0 && l < DDP_SIM_LAUNCH_COUNT ? launcher_names[l] : "?";
}

int ddp_sim_launcher_parse(const char *name, ddp_sim_launcher_t *out)
{
    for (int i = 0; i < DDP_SIM_LAUNCH_COUNT; i++)
        if (!strcasecmp(name, launcher_names[i])) {
            *out = (ddp_sim_launcher_t)i;
            return 0;
        }
    return ddp_err_set(DDP_ECONFIG, "unknown launcher \"%s\"; expected one of "
                                    "auto, per-node, slurm, torchrun, mpi, lsf",
                       name);
}

static ddp_sim_launcher_t auto_launcher(const char *accel)
{
    if (!strcmp(accel, "ddp_hpc"))
        return DDP_SIM_LAUNCH_SLURM;
    if (!strcmp(accel, "ddp_cpu_hpc"))
        return DDP_SIM_LAUNCH_TORCHRUN;
    return DDP_SIM_LAUNCH_PER_NODE;
}

/* What the launcher itself puts into task `p` of node `n`. */
static void launcher_env(ddp_env_t *env, ddp_sim_launcher_t kind, int n, int p,
                         int nodes, int per_node, const char *nodelist)
{
    int rank = n * per_node + p, world = nodes * per_node;
    switch (kind) {
    case DDP_SIM_LAUNCH_PER_NODE:
    case DDP_SIM_LAUNCH_AUTO:
    case DDP_SIM_LAUNCH_COUNT:
        ddp_env_setf(env, "NODE_RANK", "%d", n);
        break;
    case DDP_SIM_LAUNCH_SLURM:
        ddp_env_setf(env, "SLURM_NTASKS", "%d", world);
        ddp_env_setf(env, "SLURM_NTASKS_PER_NODE", "%d", per_node);
        ddp_env_setf(env, "SLURM_NNODES", "%d", nodes);
        ddp_env_setf(env, "SLURM_PROCID", "%d", rank);
        ddp_env_setf(env, "SLURM_LOCALID", "%d", p);
        ddp_env_setf(env, "SLURM_NODEID", "%d", n);
        ddp_env_set(env, "SLURM_NODELIST", nodelist);
        ddp_env_set(env, "SLURM_JOB_ID", "4242");
        ddp_env_set(env, "SLURM_JOB_NAME", "train");
        break;
    case DDP_SIM_LAUNCH_TORCHRUN:
        ddp_env_setf(env, "RANK", "%d", rank);
        ddp_env_setf(env, "LOCAL_RANK", "%d", p);
        ddp_env_setf(env, "GROUP_RANK", "%d", n);
        ddp_env_setf(env, "LOCAL_WORLD_SIZE", "%d", per_node);
        ddp_env_setf(env, "WORLD_SIZE", "%d", world);
        break;
    case DDP_SIM_LAUNCH_MPI:
        ddp_env_setf(env, "OMPI_COMM_WORLD_SIZE", "%d", world);
        ddp_env_setf(env, "OMPI_COMM_WORLD_RANK", "%d", rank);
        ddp_env_setf(env, "OMPI_COMM_WORLD_LOCAL_RANK", "%d", p);
        ddp_env_setf(env, "OMPI_COMM_WORLD_LOCAL_SIZE", "%d", per_node);
        ddp_env_setf(env, "OMPI_COMM_WORLD_NODE_RANK", "%d", p);
        ddp_env_set(env, "PMIX_NAMESPACE", "prterun-sim-4242@1");
        break;
    case DDP_SIM_LAUNCH_LSF:
        ddp_env_set(env, "LSB_JOBID", "4242");
        ddp_env_set(env, "LSB_DJOB_RANKFILE", LSF_RANKFILE);
        ddp_env_setf(env, "JSM_NAMESPACE_SIZE", "%d", world);
        ddp_env_setf(env, "JSM_NAMESPACE_RANK", "%d", rank);
        ddp_env_setf(env, "JSM_NAMESPACE_LOCAL_RANK", "%d", p);
        ddp_env_setf(env, "JSM_NAMESPACE_LOCAL_SIZE", "%d", per_node);
        break;
    }
}

/* The LSF rank file: the launch node first (it runs no rank), then one
 * line per rank slot. */
static int add_rankfile(ddp_sim_t *sim, int nodes, int per_node)
{
    size_t cap = 64, len = 0;
    char *text = malloc(cap);
    if (!text)
        return ddp_err_set(-12, "out of memory");
    text[0] = '\0';
    for (int i = -1; i < nodes * per_node; i++) {
        const char *h = i < 0 ? "launch" : ddp_sim_node_hostname(sim, i / per_node);
        size_t need = len + strlen(h) + 2;
        if (need > cap) {
            char *t = realloc(text, cap = need * 2);
            if (!t) {
                free(text);
                return ddp_err_set(-12, "out of memory");
            }
            text = t;
        }
        len += (size_t)sprintf(text + len, "%s\n", h);
    }
    int rc = ddp_sim_add_file(sim, LSF_RANKFILE, text);
    free(text);
    return rc;
}

static int copy_var(void *arg, const char *key, const char *value)
{
    return ddp_env_set(arg, key, value);
}

int ddp_sim_launch_build(ddp_sim_t *sim, ddp_sim_launch_t *l)
{
    if (!l->accelerator || l->nodes < 1 || l->procs < 1 ||
        l->nodes > ddp_sim_node_count(sim) || l->tasks_per_node < 0 ||
        l->launcher < 0 || l->launcher >= DDP_SIM_LAUNCH_COUNT)
        return ddp_err_set(DDP_ECONFIG, "launch: need an accelerator, 1..%d "
                                        "nodes and >= 1 process per node",
                           ddp_sim_node_count(sim));
    uint16_t port = l->port ? l->port : 29500;
    if (!l->cfg.accelerator)
        l->cfg.accelerator = l->accelerator;
    if (!l->cfg.num_nodes)
        l->cfg.num_nodes = l->nodes;
    if (!l->cfg.num_processes)
        l->cfg.num_processes = l->procs;
    l->first_task = ddp_sim_task_count(sim);
    if (l->squat_port)
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "squatter",
                                                     .rank = -1},
                         squatter_main, (void *)(intptr_t)l->squat_port);
    ddp_sim_launcher_t kind = l->launcher ? l->launcher : auto_launcher(l->accelerator);
    int per_node = kind == DDP_SIM_LAUNCH_PER_NODE ? 1
                   : l->tasks_per_node         ? l->tasks_per_node
                                               : l->procs;
    const char **hosts = malloc(sizeof *hosts * (size_t)l->nodes);
    char *nodelist = NULL;
    if (!hosts)
        return ddp_err_set(-12, "out of memory");
    for (int n = 0; n < l->nodes; n++)
        hosts[n] = ddp_sim_node_hostname(sim, n);
    int rc = ddp_hostlist_compress(hosts, (size_t)l->nodes, &nodelist);
    free(hosts);
    if (rc)
        return rc;
    if (kind == DDP_SIM_LAUNCH_LSF && (rc = add_rankfile(sim, l->nodes, per_node))) {
        free(nodelist);
        return rc;
    }
    const char *master = l->master_addr ? l->master_addr : ddp_sim_node_hostname(sim, 0);
    for (int n = 0; n < l->nodes; n++) {
        for (int p = 0; p < per_node; p++) {
            ddp_env_t *env = ddp_env_new();
            int rank = n * per_node + p;
            if (*master)
                ddp_env_set(env, "MASTER_ADDR", master);
            if (!l->no_port)
                ddp_env_setf(env, "MASTER_PORT", "%u", (unsigned)port);
            launcher_env(env, kind, n, p, l->nodes, per_node, nodelist);
            if (l->extra_env)
                ddp_env_foreach(l->extra_env, copy_var, env);
            if (l->edit_env)
                l->edit_env(env, n, l->edit_arg);
            char name[32];
            snprintf(name, sizeof name, per_node == 1 && kind == DDP_SIM_LAUNCH_PER_NODE
                                            ? "node%d" : "rank%d",
                     kind == DDP_SIM_LAUNCH_PER_NODE ? n : rank);
            ddp_sim_add_task(sim,
                             &(ddp_sim_task_opts_t){
                                 .node = n, .name = name,
                                 .rank = kind == DDP_SIM_LAUNCH_PER_NODE ? -1 : rank,
                                 .env = env,
                                 .start_ns = (n == 0 ? l->master_start_ns : 0) +
                                             DDP_NS_PER_MS},
                             script_main, &l->cfg);
            ddp_env_free(env);
        }
    }
    free(nodelist);
    return 0;
}
