/* harness/launch.c — ddp_sim_launch_build (ddp/launch.h): a launch
 * described in code becomes a plan (ddp/plan.h) whose processes join an
 * existing simulation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/launch.h"
#include "ddp/plan.h"
#include "ddp/sim.h"

int ddp_sim_launch_build(ddp_sim_t *sim, ddp_sim_launch_t *l)
{
    if (!l->accelerator || l->nodes < 1 || l->nodes > ddp_sim_node_count(sim))
        return ddp_err_set(DDP_ECONFIG, "launch: need an accelerator and 1..%d nodes",
                           ddp_sim_node_count(sim));
    ddp_plan_t *p = ddp_plan_new();
    if (!p)
        return ddp_err_set(-12, "out of memory");
    int rc = ddp_plan_entry_of(&l->cfg, &p->entry);
    if (rc == 0 && !p->entry.accelerator[0])
        snprintf(p->entry.accelerator, sizeof p->entry.accelerator, "%s", l->accelerator);
    for (int n = 0; rc == 0 && n < l->nodes; n++)
        rc = ddp_plan_add_node(p, ddp_sim_node_hostname(sim, n), "") < 0 ? -12 : 0;
    ddp_launch_t la = {.procs = l->procs, .launcher = l->launcher,
                       .tasks_per_node = l->tasks_per_node, .port = l->port,
                       .no_port = l->no_port, .master_addr = l->master_addr,
                       .master_start_ns = l->master_start_ns,
                       .squat_port = (uint16_t)l->squat_port, .extra_env = l->extra_env,
                       .edit_env = l->edit_env, .edit_arg = l->edit_arg};
    if (rc == 0)
        rc = ddp_plan_launch(p, &la);
    if (rc == 0)
        rc = ddp_plan_add_tasks(p, sim, &l->first_task);
    ddp_plan_free(p);
    return rc;
}
