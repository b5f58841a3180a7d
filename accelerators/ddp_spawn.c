/* accelerators/ddp_spawn.c — `ddp_spawn` and `ddp_cpu`: the parent chooses
 * MASTER_PORT, then spawns N workers (mp.spawn); worker i is local rank i.
 * The parent only launches and waits. ddp_cpu is the same on CPU (tcp). */
#include "accel_priv.h"

/* Which worker this process is (set by the parent, like mp.spawn's index). */
#define SPAWN_INDEX "DDP_SPAWN_INDEX"

static int spawn_setup(ddp_ctx_t *ctx, ddp_run_result_t *res)
{
    int worker = ddp__accel_local_ranks(ctx, SPAWN_INDEX);
    if (worker != 0)
        return worker < 0 ? worker : 0;
    int rc = ddp_accel_launch_local(ctx, 0, ddp__accel_num_processes(ctx),
                                    SPAWN_INDEX, res);
    return rc ? rc : 1; /* this process only launches and waits */
}

const ddp_accel_ops_t ddp__accel_ddp_spawn = {.name = "ddp_spawn",
                                              .setup = spawn_setup, .gpu = 1};
const ddp_accel_ops_t ddp__accel_ddp_cpu = {.name = "ddp_cpu",
                                            .setup = spawn_setup, .gpu = 0};
