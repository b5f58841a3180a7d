/* accelerators/ddp.c — `ddp`: the script relaunches itself. Local rank 0
 * (LOCAL_RANK unset) starts local ranks 1..N-1 as child processes with
 * MASTER_ADDR, MASTER_PORT (a free port if unset), NODE_RANK (GROUP_RANK
 * wins), LOCAL_RANK and WORLD_SIZE in their environment; every process then
 * trains as its local rank. */
#include <stdlib.h>

#include "accel_priv.h"
#include "ddp/env.h"
#include "ddp/err.h"

static int ddp_setup(ddp_ctx_t *ctx, ddp_run_result_t *res)
{
    ddp_env_t *env = ddp_sys_env(ctx->sys);
    int node_rank = 0, rc = ddp_cluster_node_rank(ctx->cluster, &node_rank);
    if (rc)
        return rc;
    long local = 0;
    if (ddp_env_has(env, "LOCAL_RANK")) {
        rc = ddp_env_get_long(env, "LOCAL_RANK", 0,
                              ddp__accel_num_processes(ctx) - 1, &local);
        if (rc)
            return rc;
        ddp__accel_rank_math(ctx, (int)local, node_rank);
        return 0; /* a relaunched child */
    }
    ddp__accel_rank_math(ctx, 0, node_rank);
    int nproc = ddp__accel_num_processes(ctx);
    if (nproc == 1)
        return 0;
    char addr[256];
    uint16_t port;
    if ((rc = ddp_cluster_main_address(ctx->cluster, addr, sizeof addr)) ||
        (rc = ddp_cluster_main_port(ctx->cluster, &port)))
        return rc;
    /* The children must agree with us on the master: write it down first. */
    ddp_env_set(env, "MASTER_ADDR", addr);
    ddp_env_setf(env, "MASTER_PORT", "%u", (unsigned)port);
    ddp_child_env_t kids[64];
    if (nproc - 1 > 64)
        return ddp_err_set(DDP_ELIMIT, "ddp: at most 65 processes per node");
    for (int i = 1; i < nproc; i++) {
        ddp_child_env_t *k = &kids[i - 1];
        k->n = 0;
        ddp_child_env_set(k, "MASTER_ADDR", "%s", addr);
        ddp_child_env_set(k, "MASTER_PORT", "%u", (unsigned)port);
        ddp_child_env_set(k, "NODE_RANK", "%d", node_rank);
        ddp_child_env_set(k, "LOCAL_RANK", "%d", i);
        ddp_child_env_set(k, "WORLD_SIZE", "%d", ctx->world_size);
    }
    return ddp_accel_launch(ctx, kids, nproc - 1, res);
}

const ddp_accel_ops_t ddp__accel_ddp = {.name = "ddp", .setup = ddp_setup,
                                        .gpu = 1};
