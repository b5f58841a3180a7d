/* plugins/subgroups.c — the `subgroups` example plugin (Lightning 1.1's
 * DDPSequentialPlugin idea): after the default connection it splits the
 * world into model-parallel groups of DDP_MP_SIZE consecutive ranks (default
 * 2) and data-parallel groups across them; configure_ddp then syncs the
 * model over the data-parallel group only. */
#include <stdio.h>
#include <stdlib.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/plugin.h"
#include "plugins_priv.h"

typedef struct {
    ddp_pg_t *mp, *dp;
} subgroups_t;

static int sg_init(const ddp_plugin_t *self, ddp_ctx_t *ctx,
                   ddp_cluster_t *env, int global_rank, int world_size)
{
    int rc = ddp_plugin_default_init_ddp_connection(self, ctx, env,
                                                    global_rank, world_size);
    if (rc)
        return rc;
    long mp = 2;
    if (ddp_env_has(ddp_sys_env(ctx->sys), "DDP_MP_SIZE") &&
        (rc = ddp_env_get_long(ddp_sys_env(ctx->sys), "DDP_MP_SIZE", 1,
                               world_size, &mp)))
        return rc;
    if (world_size % mp)
        return ddp_err_set(DDP_ECONFIG,
                           "subgroups: DDP_MP_SIZE=%ld does not divide world "
                           "size %d", mp, world_size);
    subgroups_t *sg = calloc(1, sizeof *sg);
    if (!sg)
        return ddp_err_set(-12, "out of memory");
    ctx->plugin_state = sg;
    ddp_ident_set_phase("subgroups split");
    rc = ddp_pg_split(ctx->pg, global_rank / (int)mp, global_rank, "model_parallel",
                      &sg->mp, ctx->deadline);
    if (rc == 0)
        rc = ddp_pg_split(ctx->pg, global_rank % (int)mp, global_rank,
                          "data_parallel", &sg->dp, ctx->deadline);
    return rc;
}

static int sg_configure(const ddp_plugin_t *self, ddp_ctx_t *ctx,
                        ddp_model_t *model)
{
    subgroups_t *sg = ctx->plugin_state;
    ctx->ddp_group = sg ? sg->dp : NULL;
    return ddp_plugin_default_configure_ddp(self, ctx, model);
}

static void sg_teardown(const ddp_plugin_t *self, ddp_ctx_t *ctx)
{
    subgroups_t *sg = ctx->plugin_state;
    if (sg) {
        if (sg->mp)
            ddp_pg_destroy(sg->mp);
        if (sg->dp)
            ddp_pg_destroy(sg->dp);
        free(sg);
    }
    ctx->plugin_state = NULL;
    ctx->ddp_group = NULL;
    ddp_plugin_default_teardown(self, ctx);
}

static const char *const phases[] = {"subgroups split", NULL};

const ddp_plugin_t ddp__plugin_subgroups = {
    .name = "subgroups",
    .phases = phases,
    .init_ddp_connection = sg_init,
    .configure_ddp = sg_configure,
    .teardown = sg_teardown,
};
