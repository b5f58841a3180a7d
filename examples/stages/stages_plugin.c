/* examples/stages/stages_plugin.c — a custom DDP plugin, written the way a
 * user of ddpsim writes one (docs/plugin.md walks through it).
 *
 * After the shared default connection, it splits the world into pipeline
 * stages: rank r belongs to stage r % STAGES (environment variable
 * STAGES_COUNT, default 2), and every stage gets a process group of its
 * own. Each rank also announces its stage in the rendezvous store. Its
 * state (the stage group) lives in ctx->plugin_state, so it overrides
 * teardown to free it. configure_ddp wraps the model over the stage group
 * instead of the whole world. Its own phase, "stage split", is named in
 * `phases` so that scenarios can aim faults at it.
 *
 * Built as a plugin library (make libstages.so): it exports the versioned
 * descriptor ddp_plugin_v1 at the end, which `ddpsim run --plugin
 * ./libstages.so` and a scenario's `plugin-library libstages.so` load. */
#include <stdio.h>
#include <stdlib.h>

#include <ddp/env.h>
#include <ddp/err.h>
#include <ddp/plugin.h>
#include <ddp/store.h>

typedef struct stages {
    ddp_pg_t *stage; /* the ranks of this rank's stage */
    int count, mine;
} stages_t;

static int stages_init(const ddp_plugin_t *self, ddp_ctx_t *ctx, ddp_cluster_t *env,
                       int global_rank, int world_size)
{
    /* The shared connection first: store, default group, barrier. */
    int rc = ddp_plugin_default_init_ddp_connection(self, ctx, env, global_rank,
                                                    world_size);
    if (rc)
        return rc;
    long count = 2;
    ddp_env_t *e = ddp_sys_env(ctx->sys);
    if (ddp_env_has(e, "STAGES_COUNT") &&
        (rc = ddp_env_get_long(e, "STAGES_COUNT", 1, world_size, &count)) != 0)
        return rc; /* the error names the variable, its value and the range */
    stages_t *st = calloc(1, sizeof *st);
    if (!st)
        return ddp_err_set(-12, "stages: out of memory");
    st->count = (int)count;
    st->mine = global_rank % st->count;
    ctx->plugin_state = st; /* freed by stages_teardown, whatever happens next */

    ddp_ident_set_phase("stage split");
    char key[64], val[16];
    snprintf(key, sizeof key, "stages/rank/%d", global_rank);
    snprintf(val, sizeof val, "%d", st->mine);
    if ((rc = ddp_store_set_str(ctx->store, key, val, ctx->deadline)) != 0)
        return rc;
    /* Every rank of the default group takes part in the split. */
    return ddp_pg_split(ctx->pg, st->mine, global_rank, "stage", &st->stage,
                        ctx->deadline);
}

static int stages_configure(const ddp_plugin_t *self, ddp_ctx_t *ctx, ddp_model_t *m)
{
    stages_t *st = ctx->plugin_state;
    ctx->ddp_group = st ? st->stage : NULL; /* DDP over the stage only */
    return ddp_plugin_default_configure_ddp(self, ctx, m);
}

static void stages_teardown(const ddp_plugin_t *self, ddp_ctx_t *ctx)
{
    stages_t *st = ctx->plugin_state;
    /* Every rank is done before anything goes down (a no-op after a
     * failure: no rank waits for a peer that may be gone). */
    ddp_plugin_teardown_barrier(ctx);
    if (st) {
        if (st->stage)
            ddp_pg_destroy(st->stage);
        free(st);
    }
    ctx->plugin_state = NULL;
    ctx->ddp_group = NULL;
    ddp_plugin_default_teardown(self, ctx); /* store, default group, server */
}

/* The phases this plugin enters besides the default's: a scenario may aim
 * `fault crash phase="stage split"` at it. */
static const char *const stages_phases[] = {"stage split", NULL};

static const ddp_plugin_t stages_plugin = {
    .name = "stages",
    .phases = stages_phases,
    .init_ddp_connection = stages_init,
    .configure_ddp = stages_configure,
    .teardown = stages_teardown,
};

/* What ddpsim looks for in the library: the ABI it was built for, the
 * plugin's name and its table (docs/plugin.md). */
DDP_PLUGIN_EXPORT const ddp_plugin_v1_t ddp_plugin_v1 = {DDP_PLUGIN_ABI_VERSION, "stages",
                                                         &stages_plugin};
