/* accelerators/ddp_hpc.c — `ddp_hpc` and `ddp_cpu_hpc`: an external
 * launcher (srun, torchrun, jsrun, mpirun) started every process; ranks come
 * from the detected cluster environment and nothing is launched here. */
#include "accel_priv.h"

static int hpc_setup(ddp_ctx_t *ctx, ddp_run_result_t *res)
{
    (void)res;
    int rc = ddp_cluster_validate(ctx->cluster, ddp__accel_num_processes(ctx),
                                  ddp__accel_num_nodes(ctx));
    if (rc == 0)
        rc = ddp_cluster_global_rank(ctx->cluster, &ctx->global_rank);
    if (rc == 0)
        rc = ddp_cluster_local_rank(ctx->cluster, &ctx->local_rank);
    if (rc == 0)
        rc = ddp_cluster_node_rank(ctx->cluster, &ctx->node_rank);
    if (rc == 0)
        rc = ddp_cluster_world_size(ctx->cluster, &ctx->world_size);
    return rc;
}

const ddp_accel_ops_t ddp__accel_ddp_hpc = {.name = "ddp_hpc",
                                            .setup = hpc_setup, .gpu = 1};
const ddp_accel_ops_t ddp__accel_ddp_cpu_hpc = {.name = "ddp_cpu_hpc",
                                                .setup = hpc_setup, .gpu = 0};
