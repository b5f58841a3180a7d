/* accelerators/ddp2.c — `ddp2`: one process per node, started by an
 * external launcher; local_rank = global_rank = node_rank and world size =
 * number of nodes. */
#include "accel_priv.h"

static int ddp2_setup(ddp_ctx_t *ctx, ddp_run_result_t *res)
{
    (void)res;
    int node_rank = 0, rc = ddp_cluster_node_rank(ctx->cluster, &node_rank);
    if (rc)
        return rc;
    ctx->node_rank = ctx->local_rank = ctx->global_rank = node_rank;
    ctx->world_size = ddp__accel_num_nodes(ctx);
    return 0;
}

const ddp_accel_ops_t ddp__accel_ddp2 = {.name = "ddp2", .setup = ddp2_setup,
                                         .gpu = 1};
