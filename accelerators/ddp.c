/* accelerators/ddp.c — `ddp`: the script relaunches itself. Local rank 0
 * (LOCAL_RANK unset) starts local ranks 1..N-1 as child processes with
 * MASTER_ADDR, MASTER_PORT (a free port if unset), NODE_RANK (GROUP_RANK
 * wins), LOCAL_RANK and WORLD_SIZE in their environment; every process then
 * trains as its local rank. */
#include "accel_priv.h"

#include <string.h>

static int ddp_setup(ddp_ctx_t *ctx, ddp_run_result_t *res)
{
    int child = ddp__accel_local_ranks(ctx, "LOCAL_RANK");
    /* A manual launch has no launcher to cross-check, but LOCAL_RANK alone
     * makes this process a relaunched worker: validate then, so that a
     * LOCAL_RANK nobody launched is named rather than waited on. Under the
     * other environments ddp_hpc validates the launcher's variables, and a
     * ddp that launches its own workers there (srun's tasks per node !=
     * devices, Lightning #4389) is judged by its duplicated ranks. */
    if (child == 1 && !strcmp(ctx->cluster->ops->name, "lightning")) {
        int rc = ddp_cluster_validate(ctx->cluster, ddp__accel_num_processes(ctx),
                                      ddp__accel_num_nodes(ctx));
        if (rc)
            return rc;
    }
    int nproc = ddp__accel_num_processes(ctx);
    if (child != 0 || nproc == 1)
        return child < 0 ? child : 0; /* error, relaunched child, or alone */
    return ddp_accel_launch_local(ctx, 1, nproc - 1, "LOCAL_RANK", res);
}

const ddp_accel_ops_t ddp__accel_ddp = {.name = "ddp", .setup = ddp_setup,
                                        .gpu = 1};
