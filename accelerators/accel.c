/* accelerators/accel.c — what every accelerator shares: the registry,
 * Lightning's selection order, launching children, and the one driver that
 * calls the DDP plugin. No connection code lives here or in any accelerator:
 * that is the plugin's (plugins/ddp_plugin.c). */
#include "ddp/accel.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel_priv.h"
#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/fmt.h"
#include "ddp/log.h"

static const ddp_accel_ops_t *const registry[] = {
    &ddp__accel_ddp,     &ddp__accel_ddp_spawn, &ddp__accel_ddp_cpu,
    &ddp__accel_ddp2,    &ddp__accel_ddp_hpc,   &ddp__accel_ddp_cpu_hpc,
};
#define NACCEL (sizeof registry / sizeof registry[0])

size_t ddp_accel_count(void) { return NACCEL; }
const ddp_accel_ops_t *ddp_accel_at(size_t i)
{
    return i < NACCEL ? registry[i] : NULL;
}
const ddp_accel_ops_t *ddp_accel_find(const char *name)
{
    for (size_t i = 0; name && i < NACCEL; i++)
        if (!strcmp(registry[i]->name, name))
            return registry[i];
    ddp_err_set(DDP_ENOT_FOUND,
                "unknown accelerator \"%s\"; expected one of ddp, ddp_spawn, "
                "ddp_cpu, ddp2, ddp_hpc, ddp_cpu_hpc",
                name ? name : "");
    return NULL;
}

int ddp__accel_num_nodes(const ddp_ctx_t *ctx)
{
    return ctx->cfg->num_nodes > 0 ? ctx->cfg->num_nodes : 1;
}
int ddp__accel_num_processes(const ddp_ctx_t *ctx)
{
    return ctx->cfg->num_processes > 0 ? ctx->cfg->num_processes : 1;
}

void ddp__accel_rank_math(ddp_ctx_t *ctx, int local_rank, int node_rank)
{
    int nproc = ddp__accel_num_processes(ctx);
    ctx->local_rank = local_rank;
    ctx->node_rank = node_rank;
    ctx->global_rank = node_rank * nproc + local_rank;
    ctx->world_size = ddp__accel_num_nodes(ctx) * nproc;
}

int ddp__accel_local_ranks(ddp_ctx_t *ctx, const char *var)
{
    ddp_env_t *env = ddp_sys_env(ctx->sys);
    int node_rank = 0, rc = ddp_cluster_node_rank(ctx->cluster, &node_rank);
    if (rc)
        return rc;
    long idx = 0;
    int set = ddp_env_has(env, var);
    if (set && (rc = ddp_env_get_long(env, var, 0,
                                      ddp__accel_num_processes(ctx) - 1, &idx)))
        return rc;
    ddp__accel_rank_math(ctx, (int)idx, node_rank);
    return set;
}

const char *ddp_accel_select(const ddp_trainer_cfg_t *cfg, ddp_cluster_t *env)
{
    const char *req = cfg->accelerator && *cfg->accelerator ? cfg->accelerator
                                                            : "ddp";
    int cpu = !strcmp(req, "ddp_cpu");
    /* 1.0.x order: ddp2 -> ddp_cpu+SLURM -> SLURM ddp -> ddp_cpu+TE ->
     * TE ddp -> ddp_spawn -> ddp_cpu spawn -> ddp. The environment says
     * whether its launcher started the Trainer's processes (SLURM: exactly
     * devices * nodes tasks, not an interactive shell; torchrun; and, which
     * 1.0.x did not know, mpirun and jsrun): then ddp / ddp_cpu launch
     * nothing of their own. */
    if ((!strcmp(req, "ddp") || cpu) &&
        ddp_cluster_manages_tasks(env, cfg->num_processes, cfg->num_nodes))
        return cpu ? "ddp_cpu_hpc" : "ddp_hpc";
    return req;
}

void ddp_child_env_set(ddp_child_env_t *e, const char *key, const char *fmt,
                       ...)
{
    if (e->n >= 8)
        return;
    e->keys[e->n] = key;
    va_list ap;
    va_start(ap, fmt);
    /* ddp_vfmt: five values a child, no printf for %s, %d, %u */
    ddp_vfmt(e->values[e->n], sizeof e->values[e->n], fmt, ap);
    va_end(ap);
    e->n++;
}

/* The result (2.1 KiB, most of it the message) is on the heap: on the
 * stack it put a simulated rank's deepest frames on a second page, 4 KiB
 * a rank where the heap costs 2.1 (docs/simulator.md § 1). */
static int child_main(ddp_sys_t *sys, void *arg)
{
    ddp_run_result_t *res = malloc(sizeof *res);
    if (!res)
        return ddp_err_set(-ENOMEM, "a launched process: out of memory for its %zu-byte "
                                    "result; free memory or launch fewer processes",
                           sizeof *res);
    int rc = ddp_accel_run(sys, arg, res);
    if (rc)
        ddp_error("%s", res->message);
    free(res);
    return rc ? 1 : 0;
}

int ddp_accel_launch(ddp_ctx_t *ctx, const ddp_child_env_t *envs, int n,
                     ddp_run_result_t *res)
{
    for (int i = 0; i < n; i++) {
        if (ctx->nchildren >= (int)(sizeof ctx->children / sizeof ctx->children[0]))
            return ddp_err_set(DDP_ELIMIT, "cannot launch more than %d "
                                           "processes per node",
                               (int)(sizeof ctx->children / sizeof ctx->children[0]));
        ddp_env_t *env = ddp_env_clone(ddp_sys_env(ctx->sys));
        if (!env)
            return ddp_err_set(-12, "out of memory");
        for (int k = 0; k < envs[i].n; k++)
            ddp_env_set(env, envs[i].keys[k], envs[i].values[k]);
        char name[32];
        snprintf(name, sizeof name, "%s-child%d", ctx->accelerator, i);
        /* The child runs the same "script": the cfg is this process's. */
        /* A worker ends with its launcher (a rank of a killed real run). */
        ddp_spawn_t sp = {.env = env, .entry = child_main,
                          .arg = (void *)ctx->cfg, .name = name,
                          .die_with_parent = 1};
        int rc = ddp_sys_spawn(ctx->sys, &sp, &ctx->children[ctx->nchildren]);
        ddp_env_free(env);
        if (rc)
            return rc;
        ctx->nchildren++;
        res->children++;
    }
    return 0;
}

/* A port this launcher picked for a world of several nodes is wrong
 * (MASTER_PORT unset): its workers get it exported and could not tell. A
 * wrong main address comes first, and each rank names that itself. */
static int check_launch_port(ddp_ctx_t *ctx, const char *addr)
{
    int nodes = ctx->cfg && ctx->cfg->num_nodes > 0 ? ctx->cfg->num_nodes : 1;
    ddp_errsave_t *before = ddp_err_save();
    int rc = ddp_cluster_check_port(ctx->cluster, nodes);
    if (rc == 0) {
        ddp_err_restore(before);
        return 0;
    }
    ddp_errsave_t *port_err = ddp_err_save();
    if (ddp_cluster_check_master(ctx->cluster, addr, 1, nodes) != 0) {
        ddp_err_forget(port_err);
        ddp_err_restore(before);
        return 0;
    }
    ddp_err_forget(before);
    ddp_err_restore(port_err);
    return rc;
}

int ddp_accel_launch_local(ddp_ctx_t *ctx, int first, int count,
                           const char *index_var, ddp_run_result_t *res)
{
    char addr[64];
    uint16_t port;
    int rc;
    if ((rc = ddp_cluster_main_address(ctx->cluster, addr, sizeof addr)) ||
        (rc = ddp_cluster_main_port(ctx->cluster, &port)) ||
        (rc = check_launch_port(ctx, addr)))
        return rc;
    enum { MAX_LOCAL = (int)(sizeof ctx->children / sizeof ctx->children[0]) };
    if (count > MAX_LOCAL)
        return ddp_err_set(DDP_ELIMIT, "%s: at most %d processes per node",
                           ctx->accelerator, MAX_LOCAL);
    ddp_env_t *env = ddp_sys_env(ctx->sys);
    ddp_env_set(env, "MASTER_ADDR", addr);
    ddp_env_setf(env, "MASTER_PORT", "%u", (unsigned)port);
    /* On the heap: MAX_LOCAL of them are 36 KiB, more than half a
     * simulated process's whole stack (docs/simulator.md § 1). */
    ddp_child_env_t *kids = calloc((size_t)(count > 0 ? count : 1), sizeof *kids);
    if (!kids)
        return ddp_err_set(-12, "out of memory for %d processes' environments", count);
    for (int i = 0; i < count; i++) {
        ddp_child_env_t *k = &kids[i];
        k->n = 0;
        ddp_child_env_set(k, "MASTER_ADDR", "%s", addr);
        ddp_child_env_set(k, "MASTER_PORT", "%u", (unsigned)port);
        ddp_child_env_set(k, "NODE_RANK", "%d", ctx->node_rank);
        ddp_child_env_set(k, "WORLD_SIZE", "%d", ctx->world_size);
        ddp_child_env_set(k, index_var, "%d", first + i);
    }
    rc = ddp_accel_launch(ctx, kids, count, res);
    free(kids);
    return rc;
}

static void wait_children(ddp_ctx_t *ctx, ddp_run_result_t *res,
                          int64_t deadline)
{
    for (int i = 0; i < ctx->nchildren; i++) {
        int st = -1;
        if (ddp_sys_wait(ctx->sys, ctx->children[i], &st, deadline) != 0) {
            ddp_sys_kill(ctx->sys, ctx->children[i], 9);
            ddp_sys_wait(ctx->sys, ctx->children[i], &st,
                         ddp_sys_deadline_in(ctx->sys, 10 * DDP_NS_PER_S));
        }
        res->children_failed += st != 0;
    }
    ctx->nchildren = 0;
}

static void fail(ddp_run_result_t *res, int rc)
{
    if (res->rc == 0) {
        res->rc = rc;
        snprintf(res->message, sizeof res->message, "%s", ddp_err_message());
    }
}

int ddp_accel_run(ddp_sys_t *sys, const ddp_trainer_cfg_t *cfg,
                  ddp_run_result_t *res)
{
    memset(res, 0, sizeof *res);
    res->global_rank = -1;
    res->world_size = -1;
    res->start_ns = ddp_sys_now(sys);
    res->connect_ns = -1;
    ddp_ctx_t ctx = {.sys = sys, .cfg = cfg};
    int rc = ddp_cluster_open(sys, cfg->cluster, &ctx.cluster);
    const ddp_accel_ops_t *a = NULL;
    if (rc == 0) {
        ctx.accelerator = ddp_accel_select(cfg, ctx.cluster);
        a = ddp_accel_find(ctx.accelerator);
        rc = a ? 0 : DDP_ENOT_FOUND;
    }
    if (rc) {
        fail(res, rc);
        ddp_cluster_close(ctx.cluster);
        res->end_ns = ddp_sys_now(sys);
        if (cfg->on_result)
            cfg->on_result(sys, res, cfg->on_result_arg);
        return rc;
    }
    res->accelerator = a->name;
    ctx.on_gpu = a->gpu && cfg->gpus > 0;
    int64_t timeout = ddp_trainer_timeout_ns(cfg);
    rc = a->setup(&ctx, res);
    if (rc == 1) { /* a pure launcher: its workers train */
        wait_children(&ctx, res, ddp_sys_deadline_in(sys, timeout + 60 * DDP_NS_PER_S));
        rc = res->children_failed ? DDP_EPEER_LOST : 0;
        if (rc)
            ddp_err_set(rc, "%d of %d worker process(es) failed",
                        res->children_failed, res->children);
    } else if (rc == 0) {
        ddp_cluster_set_world_size(ctx.cluster, ctx.world_size);
        ddp_cluster_set_global_rank(ctx.cluster, ctx.global_rank);
        res->global_rank = ctx.global_rank;
        res->world_size = ctx.world_size;
        res->local_rank = ctx.local_rank;
        res->node_rank = ctx.node_rank;
        rc = ddp_plugin_init_ddp_connection(cfg->plugin, &ctx, ctx.cluster,
                                            ctx.global_rank, ctx.world_size);
        ddp_fmt(res->backend, sizeof res->backend, "%s", ctx.backend);
        if (rc == 0)
            res->connect_ns = ddp_sys_now(sys);
        if (rc == 0) {
            ddp_model_t m;
            rc = ddp_model_init(&m, cfg->model_bytes ? cfg->model_bytes : 4096,
                                cfg->seed * 31 + (uint64_t)ctx.global_rank);
            if (rc == 0) {
                rc = ddp_plugin_configure_ddp(cfg->plugin, &ctx, &m);
                res->checksum = m.checksum;
                ddp_model_free(&m);
            }
        }
        if (rc == 0 && cfg->train_ns > 0) /* the training loop's time */
            (void)ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, cfg->train_ns));
        if (rc)
            fail(res, rc);
        /* The root cause is kept: teardown reports only a first failure. */
        ctx.status = rc;
        ddp_plugin_teardown(cfg->plugin, &ctx);
        if (rc == 0 && ctx.status)
            fail(res, rc = ctx.status);
        wait_children(&ctx, res, ddp_sys_deadline_in(sys, timeout + 60 * DDP_NS_PER_S));
    }
    if (rc)
        fail(res, rc);
    ddp_cluster_close(ctx.cluster);
    res->end_ns = ddp_sys_now(sys);
    if (cfg->on_result)
        cfg->on_result(sys, res, cfg->on_result_arg);
    return rc;
}
