/* accelerators/ddp_spawn.c — `ddp_spawn` and `ddp_cpu`: the parent chooses
 * MASTER_PORT, then spawns N workers (mp.spawn); worker i is local rank i.
 * The parent only launches and waits. ddp_cpu is the same on CPU (tcp). */
#include "accel_priv.h"
#include "ddp/env.h"
#include "ddp/err.h"

/* Which worker this process is (set by the parent, like mp.spawn's index). */
#define SPAWN_INDEX "DDP_SPAWN_INDEX"

static int spawn_setup(ddp_ctx_t *ctx, ddp_run_result_t *res)
{
    ddp_env_t *env = ddp_sys_env(ctx->sys);
    int node_rank = 0, rc = ddp_cluster_node_rank(ctx->cluster, &node_rank);
    if (rc)
        return rc;
    int nproc = ddp__accel_num_processes(ctx);
    if (ddp_env_has(env, SPAWN_INDEX)) {
        long idx;
        if ((rc = ddp_env_get_long(env, SPAWN_INDEX, 0, nproc - 1, &idx)))
            return rc;
        ddp__accel_rank_math(ctx, (int)idx, node_rank);
        return 0;
    }
    char addr[256];
    uint16_t port;
    if ((rc = ddp_cluster_main_address(ctx->cluster, addr, sizeof addr)) ||
        (rc = ddp_cluster_main_port(ctx->cluster, &port)))
        return rc;
    if (nproc > 64)
        return ddp_err_set(DDP_ELIMIT, "%s: at most 64 workers per node",
                           ctx->accelerator);
    ddp_child_env_t kids[64];
    for (int i = 0; i < nproc; i++) {
        kids[i].n = 0;
        ddp_child_env_set(&kids[i], "MASTER_ADDR", "%s", addr);
        ddp_child_env_set(&kids[i], "MASTER_PORT", "%u", (unsigned)port);
        ddp_child_env_set(&kids[i], SPAWN_INDEX, "%d", i);
    }
    rc = ddp_accel_launch(ctx, kids, nproc, res);
    return rc ? rc : 1;
}

const ddp_accel_ops_t ddp__accel_ddp_spawn = {.name = "ddp_spawn",
                                              .setup = spawn_setup, .gpu = 1};
const ddp_accel_ops_t ddp__accel_ddp_cpu = {.name = "ddp_cpu",
                                            .setup = spawn_setup, .gpu = 0};
