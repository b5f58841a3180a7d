/* plugins/rpc.c — the `rpc` example plugin (the seed PR's motivating case,
 * Lightning 1.1's RPCPlugin): after the default connection it opens a second
 * channel, a store on RPC_MASTER_PORT (default 15000) served by rank 0, where
 * every rank registers "rpc/worker/<rank>" and learns all the others. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/plugin.h"
#include "plugins_priv.h"

typedef struct {
    ddp_store_server_t *srv;
    ddp_thread_t th;
    int running;
    ddp_store_t *st;
} rpc_t;

static int rpc_server(ddp_sys_t *sys, void *arg)
{
    (void)sys;
    ddp_ident_set_phase("rpc server");
    return ddp_store_server_run(arg, DDP_DEADLINE_NEVER);
}

static int rpc_init(const ddp_plugin_t *self, ddp_ctx_t *ctx,
                    ddp_cluster_t *env, int global_rank, int world_size)
{
    int rc = ddp_plugin_default_init_ddp_connection(self, ctx, env,
                                                    global_rank, world_size);
    if (rc)
        return rc;
    ddp_env_t *e = ddp_sys_env(ctx->sys);
    long port = DDP_DEFAULT_RPC_PORT;
    if (ddp_env_has(e, "RPC_MASTER_PORT") &&
        (rc = ddp_env_get_long(e, "RPC_MASTER_PORT", 1, 65535, &port)))
        return rc;
    const char *addr = ddp_env_get(e, "MASTER_ADDR");
    rpc_t *r = calloc(1, sizeof *r);
    if (!r)
        return ddp_err_set(-12, "out of memory");
    ctx->plugin_state = r;
    ddp_ident_set_phase("rpc init");
    if (global_rank == 0) {
        ddp_store_server_opts_t so = {.port = (uint16_t)port};
        if ((rc = ddp_store_server_new(ctx->sys, &so, &r->srv)) != 0)
            return ddp_err_wrap("rpc channel on RPC_MASTER_PORT=%ld", port);
        if ((rc = ddp_sys_thread_start(ctx->sys, rpc_server, r->srv, "rpc-server",
                                       &r->th)) != 0)
            return rc;
        r->running = 1;
    }
    ddp_store_client_opts_t o = {.host = addr, .port = (uint16_t)port,
                                 .connect_deadline = ctx->deadline,
                                 .seed = (uint64_t)global_rank + 77};
    if (!(r->st = ddp_store_client_connect(ctx->sys, &o, &rc)))
        return ddp_err_wrap("rpc channel");
    char key[48], name[48];
    snprintf(key, sizeof key, "rpc/worker/%d", global_rank);
    snprintf(name, sizeof name, "worker%d", global_rank);
    if ((rc = ddp_store_set_str(r->st, key, name, ctx->deadline)) != 0)
        return rc;
    /* Every rank learns every worker's name, like rpc.init_rpc. */
    for (int i = 0; rc == 0 && i < world_size; i++) {
        ddp_buf_t v = {0};
        snprintf(key, sizeof key, "rpc/worker/%d", i);
        snprintf(name, sizeof name, "worker%d", i);
        rc = ddp_store_get(r->st, key, &v, ctx->deadline);
        if (rc == 0 && (v.len != strlen(name) || memcmp(v.data, name, v.len)))
            rc = ddp_err_set(DDP_EPROTOCOL, "rpc: worker %d registered as "
                                            "\"%.*s\"", i, (int)v.len,
                             (const char *)v.data);
        ddp_buf_free(&v);
    }
    if (rc == 0)
        rc = ddp_store_barrier(r->st, "rpc", world_size, ctx->deadline);
    return rc;
}

static void rpc_teardown(const ddp_plugin_t *self, ddp_ctx_t *ctx)
{
    rpc_t *r = ctx->plugin_state;
    /* Every rank passes the teardown barrier first: nobody still talks to
     * the rpc store when rank 0 stops it (the default teardown's own call
     * is then a no-op). */
    ctx->plugin_state = NULL;
    ddp_plugin_teardown_barrier(ctx);
    if (r) {
        ddp_store_free(r->st);
        if (r->running) {
            ddp_store_server_stop(r->srv);
            if (ddp__join_stopped(ctx->sys, r->th))
                r->srv = NULL; /* its thread still runs in it: left to the end */
        }
        if (r->srv)
            ddp_store_server_free(r->srv);
        free(r);
    }
    ddp_plugin_default_teardown(self, ctx);
}

static const char *const phases[] = {"rpc init", "rpc server", NULL};

const ddp_plugin_t ddp__plugin_rpc = {
    .name = "rpc",
    .phases = phases,
    .init_ddp_connection = rpc_init,
    .teardown = rpc_teardown,
};
