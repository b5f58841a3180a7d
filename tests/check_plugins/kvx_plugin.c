/* tests/check_plugins/kvx_plugin.c — a small custom plugin written the way
 * users write them (a few store exchanges plus an extra process group),
 * and the realistic bugs `ddpsim check` must find in it, one per -D
 * (tests/test_check.c; Makefile: libkvx-*.so):
 *
 *   (none)             libkvx.so: correct, every wait bounded by the
 *                      group deadline, every error returned, a teardown
 *                      barrier before rank 0 cleans the store
 *   KVX_NO_DEADLINE    the exchange waits for its peers without a deadline
 *   KVX_WRONG_TIMEOUT  ... bounded by the default 1800 s, not the group's
 *   KVX_IGNORE_ERROR   the publish's store error is ignored
 *   KVX_NO_BARRIER     rank 0 deletes the keys in teardown without waiting
 *                      for the others to be done with them
 *   KVX_UAF            teardown reads its state after freeing it (on the
 *                      failure path only: found under --sanitize)
 *   KVX_WRONG_RANK     the extra group takes the local rank for the global
 *   KVX_RACE           ranks read rank 0's epoch with CHECK, not WAIT
 *
 * Phases: "kvx publish", "kvx exchange", "kvx group" (init), "kvx verify"
 * (configure_ddp), "kvx cleanup" (teardown). Built without -lddpsim. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ddp/err.h>
#include <ddp/log.h>
#include <ddp/plugin.h>
#include <ddp/store.h>

#ifndef KVX_NAME
#define KVX_NAME "kvx"
#endif

typedef struct kvx {
    ddp_pg_t *side; /* the extra group: every rank of the world */
    int peers;
} kvx_t;

static void key_of(char *buf, size_t n, int rank)
{
    snprintf(buf, n, "kvx/addr/%d", rank);
}

static int64_t wait_deadline(ddp_ctx_t *ctx)
{
#if defined KVX_NO_DEADLINE
    (void)ctx;
    return INT64_MAX; /* "the peers always come" */
#elif defined KVX_WRONG_TIMEOUT
    return ddp_sys_deadline_in(ctx->sys, (int64_t)DDP_DEFAULT_PG_TIMEOUT_S * DDP_NS_PER_S);
#else
    return ctx->deadline;
#endif
}

static int publish(ddp_ctx_t *ctx, int rank)
{
    ddp_ident_set_phase("kvx publish");
    char key[48], val[48];
    key_of(key, sizeof key, rank);
    snprintf(val, sizeof val, "rank%d:%d", rank, 15000 + rank);
    int rc = ddp_store_set_str(ctx->store, key, val, ddp_plugin_store_deadline(ctx));
#ifdef KVX_IGNORE_ERROR
    rc = 0; /* "a lost key shows up in the exchange anyway" */
#endif
    if (rc || rank != 0)
        return rc;
    return ddp_store_set_str(ctx->store, "kvx/epoch", "1", ddp_plugin_store_deadline(ctx));
}

static int read_epoch(ddp_ctx_t *ctx)
{
    const char *k = "kvx/epoch";
#ifdef KVX_RACE
    int rc = ddp_store_check(ctx->store, &k, 1, ddp_plugin_store_deadline(ctx));
    if (rc == 0)
        return ddp_err_set(DDP_ECONFIG, "kvx: rank 0 has not published the epoch");
    return rc < 0 ? rc : 0;
#else
    return ddp_store_wait(ctx->store, &k, 1, ctx->deadline);
#endif
}

static int exchange(ddp_ctx_t *ctx, int world)
{
    ddp_ident_set_phase("kvx exchange");
    int rc = read_epoch(ctx);
    for (int r = 0; rc == 0 && r < world; r++) {
        char key[48];
        const char *k = key;
        key_of(key, sizeof key, r);
        rc = ddp_store_wait(ctx->store, &k, 1, wait_deadline(ctx));
    }
    return rc;
}

static int side_group(ddp_ctx_t *ctx, kvx_t *st, int rank, int world)
{
    ddp_ident_set_phase("kvx group");
#ifdef KVX_WRONG_RANK
    rank = ctx->local_rank;
#endif
    ddp_pg_init_t in = {.sys = ctx->sys, .store = ctx->store, .prefix = "kvx_side",
                        .rank = rank, .world = world, .deadline = ctx->deadline,
                        .device = -1};
    return ddp_pg_new("tcp", &in, &st->side);
}

static int kvx_init(const ddp_plugin_t *self, ddp_ctx_t *ctx, ddp_cluster_t *env,
                    int global_rank, int world_size)
{
    int rc = ddp_plugin_default_init_ddp_connection(self, ctx, env, global_rank, world_size);
    if (rc)
        return rc;
    kvx_t *st = calloc(1, sizeof *st);
    if (!st)
        return ddp_err_set(-12, "kvx: out of memory");
    ctx->plugin_state = st;
    st->peers = world_size - 1;
    if ((rc = publish(ctx, global_rank)) || (rc = exchange(ctx, world_size)))
        return rc;
    return side_group(ctx, st, global_rank, world_size);
}

static int kvx_configure(const ddp_plugin_t *self, ddp_ctx_t *ctx, ddp_model_t *m)
{
    int rc = ddp_plugin_default_configure_ddp(self, ctx, m);
    ddp_ident_set_phase("kvx verify");
    for (int r = 0; rc == 0 && r < ctx->world_size; r++) {
        char key[48];
        ddp_buf_t b = {0};
        key_of(key, sizeof key, r);
        rc = ddp_store_get(ctx->store, key, &b, ddp_plugin_store_deadline(ctx));
        ddp_buf_free(&b);
    }
    return rc;
}

/* Rank 0 removes the keys once every rank is done with them. */
static void cleanup(ddp_ctx_t *ctx)
{
    ddp_ident_set_phase("kvx cleanup");
#ifndef KVX_NO_BARRIER
    ddp_plugin_teardown_barrier(ctx);
#endif
    if (ctx->global_rank != 0 || !ctx->store || ctx->status)
        return;
    for (int r = 0; r < ctx->world_size; r++) {
        char key[48];
        key_of(key, sizeof key, r);
        (void)ddp_store_delete_key(ctx->store, key, ddp_plugin_store_deadline(ctx));
    }
}

__attribute__((noinline)) static void release(kvx_t *st)
{
    if (st->side)
        ddp_pg_destroy(st->side);
    free(st);
}

static void kvx_teardown(const ddp_plugin_t *self, ddp_ctx_t *ctx)
{
    kvx_t *st = ctx->plugin_state;
    cleanup(ctx);
    if (st) {
        release(st);
#ifdef KVX_UAF
        if (ctx->status)
            ddp_log(DDP_LOG_INFO, "kvx: gave up with %d peer(s)", st->peers);
#endif
    }
    ctx->plugin_state = NULL;
    ddp_plugin_default_teardown(self, ctx);
}

static const char *const kvx_phases[] = {"kvx publish", "kvx exchange", "kvx group",
                                         "kvx verify", "kvx cleanup", NULL};

static const ddp_plugin_t kvx_plugin = {
    .name = KVX_NAME,
    .phases = kvx_phases,
    .init_ddp_connection = kvx_init,
    .configure_ddp = kvx_configure,
    .teardown = kvx_teardown,
};

DDP_PLUGIN_EXPORT const ddp_plugin_v1_t ddp_plugin_v1 = {DDP_PLUGIN_ABI_VERSION, KVX_NAME,
                                                         &kvx_plugin};
