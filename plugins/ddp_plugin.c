/* plugins/ddp_plugin.c — the shared DDP plugin: the one place where a rank
 * connects. Every accelerator calls these members; none has connection code.
 *
 * Default init_ddp_connection, in Lightning's order (docs/plugin.md):
 *  1. MASTER_ADDR / MASTER_PORT / WORLD_SIZE into the rank's environment;
 *  2. backend: explicit, else nccl on GPU, else tcp;
 *  3. if no group exists: log "initializing ddp: GLOBAL_RANK: r, MEMBER:
 *     r+1/N"; rank 0 starts the store server (a bind failure is the root
 *     cause every rank reports, unlike pytorch#129367); all ranks connect,
 *     wait for workers, init the backend, pass the store-based barrier;
 *  4. rank 0 logs "All distributed processes registered. Starting with N
 *     processes".
 * Every wait has the group deadline (default 1800 s).
 */
#include "ddp/plugin.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/fmt.h"
#include "ddp/log.h"
#include "plugins_priv.h"

/* Keys of ddpsim's own in the rendezvous store. */
#define KEY_ROOT_CAUSE "ddpsim/root_cause"
#define KEY_JOINED "ddpsim/joined/"
#define KEY_AT_BARRIER "ddpsim/barrier/"
/* Rank 0's token in its own store (see claim_own_store). */
#define KEY_MASTER "ddpsim/master"
#define KEY_RUN "ddpsim/run" /* DDP_RUN_ID_ENV's value, preset by rank 0 */
/* Set when the default group's store barrier released its world (the
 * barrier's "last_worker" key, under the group's prefix). */
#define KEY_BARRIER_DONE "default_pg/store_based_barrier_key:default_pg:last_worker"

int64_t ddp_trainer_timeout_ns(const ddp_trainer_cfg_t *cfg)
{
    return cfg && cfg->timeout_ns > 0 ? cfg->timeout_ns
                                      : DDP_DEFAULT_PG_TIMEOUT_S * DDP_NS_PER_S;
}

int64_t ddp_trainer_store_timeout_ns(const ddp_trainer_cfg_t *cfg)
{
    return cfg && cfg->store_timeout_ns > 0 ? cfg->store_timeout_ns
                                            : DDP_DEFAULT_STORE_TIMEOUT_S * DDP_NS_PER_S;
}

int64_t ddp_plugin_store_deadline(const ddp_ctx_t *ctx)
{
    int64_t dl = ddp_sys_deadline_in(ctx->sys, ddp_trainer_store_timeout_ns(ctx->cfg));
    return dl < ctx->deadline ? dl : ctx->deadline;
}

/* The rank's identity (its errors and its outcome read it) and phase. */
static void enter(ddp_ctx_t *ctx, int global_rank, int world_size, const char *phase)
{
    ctx->global_rank = global_rank;
    ctx->world_size = world_size;
    ddp_ident_set_rank(global_rank);
    ddp_ident_set_world(world_size);
    ddp_ident_set_phase(phase);
}

static int get_if_set(ddp_store_t *st, const char *key, ddp_buf_t *v,
                      int64_t deadline);
static int joined_as_root(ddp_store_t *st, int64_t deadline);
static int duplicated_ranks_hint(void);

/* A rank 0 whose MASTER_ADDR names another host: is a rank 0 already
 * there (a store at MASTER_ADDR:MASTER_PORT where rank 0 joined)? Then
 * this process is a second rank 0, and the address is not what is wrong.
 * Connects (refused ones retried for 0.8 s), then up to 1.5 s in all for
 * that rank 0 to join. The error context is kept. */
DDP_NOINLINE static int other_root_serves(ddp_ctx_t *ctx, const char *addr, uint16_t port)
{
    ddp_errsave_t *saved = ddp_err_save();
    int64_t dl = ddp_sys_deadline_in(ctx->sys, 3 * DDP_NS_PER_S / 2);
    /* the first rank 0 may still be starting its store (a spawning
     * launcher starts its workers first): refused connects are retried for
     * 0.8 s, so a genuinely wrong address still fails within a second */
    int64_t retry_until = ddp_sys_deadline_in(ctx->sys, 8 * DDP_NS_PER_S / 10);
    int fd = ddp_sys_connect_host(ctx->sys, addr, port, dl), dup = 0;
    while (fd < 0 && ddp_sys_now(ctx->sys) < retry_until &&
           ddp_sys_sleep_until(ctx->sys, ddp_sys_deadline_in(ctx->sys, 50 * DDP_NS_PER_MS)) == 0)
        fd = ddp_sys_connect_host(ctx->sys, addr, port, dl);
    if (fd >= 0) {
        ddp_sys_close(ctx->sys, fd);
        ddp_store_client_opts_t o = {.host = addr, .port = port, .connect_deadline = dl,
                                     .seed = 1};
        int err;
        ddp_store_t *st = ddp_store_client_connect(ctx->sys, &o, &err);
        dup = st && joined_as_root(st, dl);
        ddp_store_free(st);
    }
    ddp_err_restore(saved);
    return dup;
}

/* The hint of a store connect that never succeeded, by how it failed: a
 * host that refused the connects is up with nothing on the port (rank 0
 * not started, or MASTER_PORT differing between nodes: pytorch #76069); one
 * that never answered drops the connects (a firewall or security group:
 * pytorch #58431). */
static int store_connect_hint(int rc, const char *addr, uint16_t port)
{
    if (rc == -ECONNREFUSED)
        return ddp_err_hint("rank 0 serves the store on MASTER_ADDR:MASTER_PORT "
                            "(%s:%u), and that host refused the connects: it is up "
                            "but nothing listened on the port: rank 0 was not "
                            "serving yet (late, or not started), or it serves "
                            "another port: MASTER_PORT must be the same on every "
                            "node (not a free port each picks)",
                            addr, (unsigned)port);
    if (rc == DDP_ETIMEOUT)
        return ddp_err_hint("%s:%u never answered: a firewall, security group or "
                            "partition drops the connects, or the host is down: "
                            "check that this host reaches it (nc -zv %s %u)",
                            addr, (unsigned)port, addr, (unsigned)port);
    return ddp_err_hint("rank 0 serves the store on MASTER_ADDR:MASTER_PORT "
                        "(%s:%u): is it running, reachable and did it bind "
                        "that port?", addr, (unsigned)port);
}

/* Step 1: the environment contract every backend reads. */
DDP_NOINLINE static int write_master_env(ddp_ctx_t *ctx, ddp_cluster_t *env, int world,
                                         char *addr, size_t an, uint16_t *port)
{
    int nodes = ctx->cfg && ctx->cfg->num_nodes > 0 ? ctx->cfg->num_nodes : 1;
    int rc = ddp_cluster_main_address(env, addr, an);
    if (rc == 0)
        rc = ddp_cluster_main_port(env, port);
    /* Before MASTER_ADDR is written: the check says whether the user set
     * it or the environment fell back to its default. */
    if (rc == 0)
        rc = ddp_cluster_check_master(env, addr, ctx->global_rank, nodes);
    if (rc == 0) /* MASTER_PORT unset: a port of this node's own */
        rc = ddp_cluster_check_port(env, nodes);
    /* A second rank 0 (NODE_RANK=0 on every node, #5651) fails the address
     * check on its own node: the duplicate is the cause to name. */
    if (rc == DDP_ECONFIG && ctx->global_rank == 0 && other_root_serves(ctx, addr, *port)) {
        ddp_err_set(DDP_ECONFIG, "a rank 0 already joined the store at %s:%u, on the host "
                                 "MASTER_ADDR names: this process (%s, node rank %d, local "
                                 "rank %d) is a second rank 0: ranks are duplicated",
                    addr, (unsigned)*port, ctx->accelerator, ctx->node_rank, ctx->local_rank);
        return duplicated_ranks_hint();
    }
    if (rc == 0 && *port == 0 && world > 1) {
        ddp_err_set(DDP_ECONFIG, "MASTER_PORT=0 asks rank 0's store for an ephemeral port, "
                                 "which serves a world of 1 only: the other %d rank(s) "
                                 "cannot know which port it picked", world - 1);
        return ddp_err_hint("set MASTER_PORT to one free port, the same on every node "
                            "(torch's default is 29500)");
    }
    if (rc)
        return rc;
    ddp_env_t *e = ddp_sys_env(ctx->sys);
    ddp_env_set(e, "MASTER_ADDR", addr);
    ddp_env_setf(e, "MASTER_PORT", "%u", (unsigned)*port);
    /* Always a number: Lightning 1.x could write "None" here. */
    return ddp_env_setf(e, "WORLD_SIZE", "%d", world);
}

/* Step 2. */
static int choose_backend(ddp_ctx_t *ctx)
{
    const char *b = ctx->cfg && ctx->cfg->backend && *ctx->cfg->backend
                        ? ctx->cfg->backend
                        : ctx->on_gpu ? "nccl" : "tcp";
    if (!ddp_pg_backend_find(b))
        return DDP_ECONFIG; /* the registry's error names the valid ones */
    ddp_fmt(ctx->backend, sizeof ctx->backend, "%s", b);
    return 0;
}

static int server_thread(ddp_sys_t *sys, void *arg)
{
    (void)sys;
    ddp_ident_set_phase("store server");
    /* Runs until teardown stops it (run() polls its stop flag). */
    return ddp_store_server_run(arg, DDP_DEADLINE_NEVER);
}

/* 0 when st is this run's store, or when this process or that store has
 * no run identity (the simulator, a launcher of one's own); 1 with the
 * error set (-EADDRINUSE) when it serves another ddpsim run: two runs that
 * chose one port at once must not mix their ranks; < 0 when a request
 * failed. */
DDP_NOINLINE static int check_run_identity(ddp_ctx_t *ctx, ddp_store_t *st,
                                           uint16_t port, int64_t deadline)
{
    const char *mine = ddp_env_get(ddp_sys_env(ctx->sys), DDP_RUN_ID_ENV);
    if (!mine || !*mine)
        return 0;
    ddp_buf_t v = {0};
    int rc = get_if_set(st, KEY_RUN, &v, deadline);
    if (rc == 1 && (v.len != strlen(mine) || memcmp(v.data, mine, v.len))) {
        const char *at = memchr(v.data, '@', v.len);
        int tn = at ? (int)(v.len - (size_t)(at + 1 - (const char *)v.data)) : 0;
        ddp_err_set(-EADDRINUSE, "port %u is serving another ddpsim run "
                                 "(started at %.*s): pick another port or wait",
                    (unsigned)port, at ? tn : 7, at ? at + 1 : "unknown");
        ddp_buf_free(&v);
        return 1;
    }
    ddp_buf_free(&v);
    return rc < 0 ? rc : 0;
}

/* Rank 0 cannot bind: tell whoever holds the port, if it is a TCPStore
 * (another job's master), so the ranks that reach it read the real cause
 * instead of timing out blind. Best effort, bounded by one second. If the
 * holder is a ddpsim store where a rank 0 already joined, this process is
 * a second rank 0 (duplicated ranks): publishing there would poison the
 * running job, so it returns 1 and publishes nothing. */
DDP_NOINLINE static int publish_root_cause(ddp_ctx_t *ctx, const char *addr,
                                           uint16_t port, const char *msg)
{
    ddp_errsave_t *saved = ddp_err_save();
    int64_t dl = ddp_sys_deadline_in(ctx->sys, DDP_NS_PER_S);
    ddp_store_client_opts_t o = {.host = addr, .port = port,
                                 .connect_deadline = dl, .seed = 1};
    /* Bounded by one second: the wait below must not eat the set's time. */
    int err, dup = 0;
    ddp_store_t *st = ddp_store_client_connect(ctx->sys, &o, &err);
    if (st && check_run_identity(ctx, st, port, dl) == 1) {
        ddp_store_free(st);
        ddp_err_forget(saved); /* its error says whose the store is */
        return 2; /* another run's store: nothing of ours goes there */
    }
    if (st) {
        dup = joined_as_root(st, dl);
        if (!dup)
            ddp_store_set_str(st, KEY_ROOT_CAUSE, msg, dl);
        ddp_store_free(st);
    }
    ddp_err_restore(saved);
    return dup;
}

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* A token for this rank 0's store: the host name (sets the simulator's
 * nodes apart) and the clock reading at bind (sets apart processes that
 * share a host name, as network namespaces do). Fixed width, and only
 * virtual quantities in the simulator, so traces stay byte-identical. */
DDP_NOINLINE static void master_token(ddp_ctx_t *ctx, char *out, size_t n)
{
    char host[256] = "", id[300];
    ddp_sys_hostname(ctx->sys, host, sizeof host);
    int len = snprintf(id, sizeof id, "%s/%" PRId64, host, ddp_sys_now(ctx->sys));
    snprintf(out, n, "%016" PRIx64, fnv1a((const uint8_t *)id, (size_t)len));
}

/* Rank 0 claims its rank in its own store before the store serves anyone,
 * and leaves a token there. Without it, which of two rank-0 processes
 * (NODE_RANK=0 on every node, #5651: each binds MASTER_PORT on its own
 * host) counts as the duplicate would depend on which joined first, and
 * when the loser is the one hosting the store at MASTER_ADDR, its exit
 * takes the store down under everyone else. */
static int claim_own_store(ddp_ctx_t *ctx, char *token, size_t n)
{
    master_token(ctx, token, n);
    int rc = ddp_store_server_preset(ctx->server, KEY_MASTER, token,
                                     strlen(token));
    if (rc == 0)
        rc = ddp_store_server_preset(ctx->server, KEY_JOINED "0", "1", 1);
    const char *run = ddp_env_get(ddp_sys_env(ctx->sys), DDP_RUN_ID_ENV);
    if (rc == 0 && run && *run)
        rc = ddp_store_server_preset(ctx->server, KEY_RUN, run, strlen(run));
    return rc;
}

/* 1 with the value in *v when key is set, 0 when it is not, < 0 when a
 * request failed. CHECK first: a GET of a missing key waits for it. */
static int get_if_set(ddp_store_t *st, const char *key, ddp_buf_t *v,
                      int64_t deadline)
{
    const char *k[1] = {key};
    int rc = ddp_store_check(st, k, 1, deadline);
    if (rc == 1 && (rc = ddp_store_get(st, key, v, deadline)) == 0)
        rc = 1;
    return rc;
}

/* Sets *own to 1 when the store this rank 0 reached through MASTER_ADDR
 * holds its own token: it has already joined (claim_own_store). *own stays
 * 0 when the store is someone else's: this process joins (and is refused)
 * like any other. A failed request is returned, not guessed past: joining
 * after it could count this rank 0 twice in its own store. */
DDP_NOINLINE static int reached_own_store(ddp_ctx_t *ctx, const char *token, int *own)
{
    *own = 0;
    if (!ctx->server)
        return 0;
    ddp_buf_t v = {0};
    int rc = get_if_set(ctx->store, KEY_MASTER, &v, ddp_plugin_store_deadline(ctx));
    *own = rc == 1 && v.len == strlen(token) &&
           memcmp(v.data, token, v.len) == 0;
    ddp_buf_free(&v);
    return rc < 0 ? rc : 0;
}

DDP_NOINLINE static int start_store_server(ddp_ctx_t *ctx, const char *addr, uint16_t port,
                                           char *token, size_t tn)
{
    ddp_ident_set_phase("store server");
    /* The job's own store, sized to the job (ddp_store_server_opts_t.world):
     * with the server's fixed defaults ranks past 32,767 were refused. */
    ddp_store_server_opts_t so = {.port = port, .world = ctx->world_size};
    int rc = ddp_store_server_new(ctx->sys, &so, &ctx->server);
    if (rc) {
        const char *why = rc == -EADDRINUSE ? "address in use" : ddp_strerror(rc);
        ddp_err_set(rc, "rank 0 could not bind %s:%u: %s", addr, (unsigned)port, why);
        char msg[DDP_ERR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", ddp_err_message());
        int held = rc == -EADDRINUSE ? publish_root_cause(ctx, addr, port, msg) : 0;
        if (held == 2)
            return -EADDRINUSE; /* check_run_identity said whose it is */
        if (held) {
            ddp_err_set(rc, "rank 0 could not bind %s:%u: %s: another rank 0 "
                            "already serves a rendezvous store there",
                        addr, (unsigned)port, why);
            return ddp_err_hint("ranks are duplicated (tasks per node must "
                                "equal devices: srun --ntasks-per-node, "
                                "Lightning #4389; NODE_RANK must differ per "
                                "node, #5651), or two jobs share MASTER_PORT");
        }
        ddp_err_set(rc, "rank 0 could not bind %s:%u: %s", addr, (unsigned)port, why);
        return ddp_err_hint("another job or a stale master holds port %u: "
                            "pick a free MASTER_PORT (or unset it to get one)",
                            (unsigned)port);
    }
    if ((rc = claim_own_store(ctx, token, tn)) != 0) {
        ddp_store_server_free(ctx->server);
        ctx->server = NULL;
        return rc;
    }
    rc = ddp_sys_thread_start(ctx->sys, server_thread, ctx->server,
                              "store-server", &ctx->server_thread);
    if (rc) {
        ddp_store_server_free(ctx->server);
        ctx->server = NULL;
        return rc;
    }
    ctx->server_running = 1;
    return 0;
}

/* 1 when a rank 0 joined the store st. The other rank 0 may have bound a
 * moment ago: it is given until deadline to join. */
static int joined_as_root(ddp_store_t *st, int64_t deadline)
{
    const char *k[1] = {KEY_JOINED "0"};
    return ddp_store_wait(st, k, 1, deadline) == 0;
}

/* "ranks 5, 9" — the ranks whose key under `prefix` is absent. A wait that
 * timed out may have left our connection unusable mid-reply, so this asks
 * over a fresh one (bounded by two seconds). */
DDP_NOINLINE static int missing_ranks(ddp_ctx_t *ctx, const char *prefix, int world,
                                      char *out, size_t n)
{
    ddp_errsave_t *saved = ddp_err_save();
    ddp_env_t *e = ddp_sys_env(ctx->sys);
    long port = 0;
    ddp_env_get_long(e, "MASTER_PORT", 1, 65535, &port);
    int64_t dl = ddp_sys_deadline_in(ctx->sys, 2 * DDP_NS_PER_S);
    ddp_store_client_opts_t o = {.host = ddp_env_get(e, "MASTER_ADDR"),
                                 .port = (uint16_t)port,
                                 .connect_deadline = dl, .seed = 7};
    int err;
    ddp_store_t *st = o.host && port ? ddp_store_client_connect(ctx->sys, &o, &err)
                                     : NULL;
    size_t off = 0;
    int count = 0;
    out[0] = '\0';
    for (int r = 0; st && r < world && off + 16 < n; r++) {
        char key[64];
        snprintf(key, sizeof key, "%s%d", prefix, r);
        const char *k[1] = {key};
        int rc = ddp_store_check(st, k, 1, dl);
        if (rc < 0)
            break; /* store gone: no list */
        if (rc == 0)
            off += (size_t)snprintf(out + off, n - off, "%s%d",
                                    count++ ? ", " : "", r);
    }
    if (off + 16 >= n)
        snprintf(out + off, n - off, ", ...");
    ddp_store_free(st);
    ddp_err_restore(saved);
    return count;
}

/* On a failed wait: name the ranks that never arrived, or the root cause
 * another rank published. Keeps the code. */
DDP_NOINLINE static int explain_wait_failure(ddp_ctx_t *ctx, int rc, const char *prefix,
                                             const char *what)
{
    if (rc != DDP_ETIMEOUT || !ctx->store)
        return rc;
    char ranks[256];
    int count = missing_ranks(ctx, prefix, ctx->world_size, ranks, sizeof ranks);
    if (ranks[0])
        ddp_err_wrap("rank%s %s never %s", count > 1 ? "s" : "", ranks, what);
    return rc;
}

/* A failed request is returned (as in reached_own_store): going on would
 * report it later, from the next request, as a lost connection. The
 * connect asked CHECK in its PING's round trip (opts.check_key): a key it
 * found absent costs no request here. */
DDP_NOINLINE static int check_root_cause(ddp_ctx_t *ctx)
{
    if (ddp_store_client_checked(ctx->store) == 0)
        return 0;
    ddp_buf_t v = {0};
    int rc = get_if_set(ctx->store, KEY_ROOT_CAUSE, &v, ddp_plugin_store_deadline(ctx));
    if (rc != 1) {
        ddp_buf_free(&v);
        return rc < 0 ? rc : 0;
    }
    ddp_err_set(-EADDRINUSE, "the master's store is not ours: %.*s",
                (int)v.len, (const char *)v.data);
    ddp_buf_free(&v);
    return -EADDRINUSE;
}

static int mark(ddp_ctx_t *ctx, const char *prefix)
{
    char key[64];
    ddp_fmt(key, sizeof key, "%s%d", prefix, ctx->global_rank);
    return ddp_store_set_str(ctx->store, key, "1", ddp_plugin_store_deadline(ctx));
}

/* Joins as global rank r: a counter, so a second process claiming the same
 * rank (a launcher starting the wrong number of tasks, Lightning #4389, or
 * NODE_RANK exported on every node, #5651) is named at once instead of
 * hanging the rendezvous. */
DDP_NOINLINE static int claim_rank(ddp_ctx_t *ctx)
{
    char key[64];
    int64_t n = 0;
    ddp_fmt(key, sizeof key, "%s%d", KEY_JOINED, ctx->global_rank);
    int64_t dl = ddp_plugin_store_deadline(ctx);
    int rc = ddp_store_add(ctx->store, key, 1, &n, dl);
    if (rc || n == 1)
        return rc;
    /* The store's own world had all met at its barrier before this
     * process came: a second job (same MASTER_ADDR:MASTER_PORT), not a
     * launch that doubled ranks. */
    ddp_buf_t v = {0};
    int done = get_if_set(ctx->store, KEY_BARRIER_DONE, &v, dl) == 1;
    ddp_buf_free(&v);
    int64_t workers = -1;
    if (done && ddp_store_worker_count(ctx->store, &workers, dl) == 0) {
        ddp_err_set(DDP_ECONFIG, "worker_count %" PRId64 " for world_size %d: another "
                                 "job's ranks joined this store (its world of %d had "
                                 "passed its barrier when this process joined as global "
                                 "rank %d)",
                    workers + 1, ctx->world_size, ctx->world_size, ctx->global_rank);
        return ddp_err_hint("give each job its own MASTER_PORT: two jobs on the same "
                            "nodes both take 29500 unless told otherwise");
    }
    ddp_err_set(DDP_ECONFIG, "another process already joined as global rank "
                             "%d (%s, node rank %d, local rank %d): ranks are "
                             "duplicated",
                ctx->global_rank, ctx->accelerator, ctx->node_rank,
                ctx->local_rank);
    return duplicated_ranks_hint();
}

/* The hint of every "ranks are duplicated". */
static int duplicated_ranks_hint(void)
{
    return ddp_err_hint("the launcher started more processes than the "
                        "Trainer expects (tasks per node must equal devices: "
                        "srun --ntasks-per-node, Lightning #4389), NODE_RANK "
                        "is the same on every node (#5651), or another job "
                        "uses this MASTER_ADDR:MASTER_PORT");
}

int ddp_plugin_default_init_ddp_connection(const ddp_plugin_t *self,
                                           ddp_ctx_t *ctx,
                                           ddp_cluster_t *cluster_env,
                                           int global_rank, int world_size)
{
    (void)self;
    /* Also when a custom member calls it directly, after phases of its own. */
    enter(ctx, global_rank, world_size, "init_ddp_connection");
    /* The group deadline counts from here: the launch-contract checks
     * below may wait (a resolve), and must not move it. */
    const int64_t t0 = ddp_sys_now(ctx->sys), timeout = ddp_trainer_timeout_ns(ctx->cfg);
    char addr[256];
    uint16_t port = 0;
    int rc = write_master_env(ctx, cluster_env, world_size, addr, sizeof addr,
                              &port);
    if (rc == 0)
        rc = choose_backend(ctx);
    if (rc || ctx->pg)
        return rc; /* a group exists: nothing to connect */

    ddp_info("initializing ddp: GLOBAL_RANK: %d, MEMBER: %d/%d", global_rank,
             global_rank + 1, world_size);
    int64_t start = ddp_sys_now(ctx->sys);
    ctx->deadline = timeout > DDP_DEADLINE_NEVER - t0 ? DDP_DEADLINE_NEVER : t0 + timeout;

    char token[24] = "";
    if (global_rank == 0 &&
        (rc = start_store_server(ctx, addr, port, token, sizeof token)) != 0)
        return rc;
    if (port == 0) { /* a world of 1: the port the store picked (torch: store.port) */
        port = ddp_store_server_addr(ctx->server).port;
        ddp_env_setf(ddp_sys_env(ctx->sys), "MASTER_PORT", "%u", (unsigned)port);
    }

    ddp_ident_set_phase("store connect");
    ddp_store_client_opts_t o = {
        .host = addr, .port = port, .connect_deadline = ctx->deadline,
        .seed = (ctx->cfg ? ctx->cfg->seed : 0) * 1000003u + (uint64_t)global_rank,
        .protocol = ctx->cfg ? ctx->cfg->store_protocol : DDP_STORE_PROTO_AUTO,
        .check_key = KEY_ROOT_CAUSE};
    ctx->store = ddp_store_client_connect(ctx->sys, &o, &rc);
    if (!ctx->store)
        return store_connect_hint(rc, addr, port);
    if ((rc = check_run_identity(ctx, ctx->store, port,
                                 ddp_plugin_store_deadline(ctx))) != 0)
        return rc == 1 ? -EADDRINUSE : rc;
    if ((rc = check_root_cause(ctx)) != 0)
        return rc;

    ddp_ident_set_phase("wait for workers");
    int own = 0;
    if ((rc = reached_own_store(ctx, token, &own)) != 0 ||
        (!own && (rc = claim_rank(ctx)) != 0))
        return rc;
    rc = ddp_store_wait_for_workers(ctx->store, global_rank, world_size,
                                    ctx->deadline);
    if (rc)
        return explain_wait_failure(ctx, rc, KEY_JOINED, "joined");

    ddp_ident_set_phase("process group init");
    ctx->pg_store = ddp_store_prefix_new(ctx->store, "default_pg");
    if (!ctx->pg_store)
        return ddp_err_set(-ENOMEM, "out of memory");
    ddp_pg_init_t pi = {.sys = ctx->sys, .store = ctx->store,
                        .prefix = "default_pg", .rank = global_rank,
                        .world = world_size, .deadline = ctx->deadline,
                        .device = ctx->on_gpu ? ctx->local_rank : -1};
    if ((rc = ddp_pg_new(ctx->backend, &pi, &ctx->pg)) != 0)
        return rc;

#ifdef DDP_PLANT_SKIP_BARRIER
    /* A planted regression, compiled only by `make coverage-plant-check`
     * (docs/coverage.md): the accelerator named by the macro skips the
     * barrier, and the parity gate must catch it. */
    if (strcmp(ctx->accelerator ? ctx->accelerator : "",
               DDP_PLANT_SKIP_BARRIER) != 0) {
#endif
    ddp_ident_set_phase("barrier");
    if ((rc = mark(ctx, KEY_AT_BARRIER)) != 0)
        return rc;
    rc = ddp_store_barrier(ctx->pg_store, "default_pg", world_size,
                           ctx->deadline);
    if (rc)
        return explain_wait_failure(ctx, rc, KEY_AT_BARRIER,
                                    "reached the barrier");
#ifdef DDP_PLANT_SKIP_BARRIER
    }
#endif
    if (global_rank == 0)
        ddp_info("All distributed processes registered. Starting with %d "
                 "processes (%.3f s)",
                 world_size, (double)(ddp_sys_now(ctx->sys) - start) / 1e9);
    ddp_ident_set_phase("connected");
    return 0;
}

/* FNV-1a over the parameters as 64-bit words (then the last bytes): the
 * same bytes give the same sum on every rank, at an eighth of the steps of
 * a byte-wise pass (the simulator runs thousands of ranks' models). */
uint64_t ddp_model_checksum(const ddp_model_t *m)
{
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i = 0;
    /* Unrolled (the same chain, so the same checksum): the loop's own add,
     * compare and branch were half of its instructions. */
#pragma GCC unroll 4
    for (; i + 8 <= m->bytes; i += 8) {
        uint64_t w;
        memcpy(&w, m->params + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
    }
    for (; i < m->bytes; i++)
        h = (h ^ m->params[i]) * 0x100000001b3ull;
    return h;
}

int ddp_model_init(ddp_model_t *m, size_t bytes, uint64_t seed)
{
    m->params = malloc(bytes ? bytes : 1);
    if (!m->params)
        return ddp_err_set(-ENOMEM, "model: out of memory");
    m->bytes = bytes;
    ddp_rng_t r;
    ddp_rng_seed(&r, seed);
    ddp_rng_fill(&r, m->params, bytes); /* 8 bytes per draw */
    m->checksum = 0;
    return 0;
}

void ddp_model_free(ddp_model_t *m)
{
    free(m->params);
    m->params = NULL;
}

int ddp_plugin_default_configure_ddp(const ddp_plugin_t *self, ddp_ctx_t *ctx,
                                     ddp_model_t *model)
{
    (void)self;
    ddp_pg_t *g = ctx->ddp_group ? ctx->ddp_group : ctx->pg;
    if (!g)
        return ddp_err_set(DDP_ECONFIG, "configure_ddp before "
                                        "init_ddp_connection: no process group");
    ddp_ident_set_phase("configure_ddp");
    /* What DDP does at wrap time: rank 0's parameters win... */
    int rc = ddp_pg_broadcast(g, model->params, model->bytes, 0, ctx->deadline);
    if (rc)
        return rc;
    /* ...and every rank must now hold the same bytes. One allreduce of
     * (c, ~c) under MAX gives the largest checksum and the complement of
     * the smallest: O(1) messages per rank on the tcp ring, where an
     * allgather of every checksum costs world-1 steps per rank. */
    uint64_t mine = ddp_model_checksum(model);
    int64_t mm[2] = {(int64_t)mine, (int64_t)~mine};
    rc = ddp_pg_allreduce(g, mm, 2, DDP_INT64, DDP_MAX, ctx->deadline);
    if (rc == 0 && mm[0] != ~mm[1]) {
        /* Only now, on every rank alike: the lowest group rank whose bytes
         * differ from rank 0's, named in each rank's error. */
        uint64_t root = mine;
        int32_t first = ddp_pg_world(g);
        rc = ddp_pg_broadcast(g, &root, sizeof root, 0, ctx->deadline);
        if (rc == 0) {
            first = root != mine ? ddp_pg_rank(g) : first;
            rc = ddp_pg_allreduce(g, &first, 1, DDP_INT32, DDP_MIN, ctx->deadline);
        }
        if (rc == 0)
            rc = ddp_err_set(DDP_EPROTOCOL,
                             "parameters differ after broadcast: group rank "
                             "%d holds bytes other than rank 0's (rank 0 has "
                             "checksum %016" PRIx64 "; the group's include "
                             "%016" PRIx64 " and %016" PRIx64 "), rank %d "
                             "has %016" PRIx64,
                             first, root, (uint64_t)mm[0], ~(uint64_t)mm[1],
                             ddp_pg_rank(g), mine);
    }
    if (rc == 0)
        model->checksum = mine;
    return rc;
}

int ddp_plugin_teardown_barrier(ddp_ctx_t *ctx)
{
    if (ctx->barrier_done || !ctx->pg || ctx->status)
        return 0;
    ctx->barrier_done = 1;
    int rc = ddp_pg_barrier(ctx->pg, ctx->deadline);
    if (rc) {
        ddp_err_wrap("teardown barrier: not every rank finished (rank 0 keeps the "
                     "store up until all have)");
        if (!ctx->status)
            ctx->status = rc;
    }
    return rc;
}

/* Joins a server thread that was told to stop: 10 s, twice (a process
 * stopped meanwhile, by SIGSTOP or a pause, finds its first deadline
 * passed when it resumes, its server thread not yet out). DDP_ETIMEOUT
 * when the thread still runs after both; else 0 (joined, or the join was
 * cancelled because this process is dying, its threads with it). */
int ddp__join_stopped(ddp_sys_t *sys, ddp_thread_t th)
{
    int rc = DDP_ETIMEOUT;
    for (int k = 0; k < 2 && rc == DDP_ETIMEOUT; k++)
        rc = ddp_sys_thread_join(sys, th, NULL, ddp_sys_deadline_in(sys, 10 * DDP_NS_PER_S));
    return rc == DDP_ETIMEOUT ? rc : 0;
}

/* Everything after the teardown barrier: the group, the stores, the
 * server. */
static void release_all(ddp_ctx_t *ctx)
{
    if (ctx->pg)
        ddp_pg_destroy(ctx->pg);
    ctx->pg = NULL;
    ddp_store_free(ctx->pg_store);
    ctx->pg_store = NULL;
    ddp_store_free(ctx->store);
    ctx->store = NULL;
    if (ctx->server_running) {
        ddp_store_server_stop(ctx->server);
        ctx->server_running = 0;
        if (ddp__join_stopped(ctx->sys, ctx->server_thread) == DDP_ETIMEOUT) {
            /* Its thread still runs in it (a paused or stalled process):
             * freeing it would pull the server from under that thread (a
             * use-after-free `ddpsim check` found). Left to the process's
             * end. */
            ddp_warn("rank %d: the store server's thread did not end within 10 s of "
                     "its stop; its memory is left to the end of the process",
                     ctx->global_rank);
            ctx->server = NULL;
        }
    }
    if (ctx->server)
        ddp_store_server_free(ctx->server);
    ctx->server = NULL;
}

/* The same, when the barrier failed: what follows must not overwrite its
 * error (kept by ddp_err_save, on the heap and only when there is one: a
 * copy on every rank's stack in every teardown was fifteen cache lines
 * written and read again per rank, 2.5 % of a 16,384-rank init's cache
 * misses). */
DDP_NOINLINE static void release_all_keeping_error(ddp_ctx_t *ctx)
{
    ddp_errsave_t *saved = ddp_err_save();
    release_all(ctx);
    ddp_err_restore(saved);
}

void ddp_plugin_default_teardown(const ddp_plugin_t *self, ddp_ctx_t *ctx)
{
    (void)self;
    ddp_ident_set_phase("teardown");
    /* Everyone is done with the store before rank 0 takes it down. */
    int was = ctx->status;
    ddp_plugin_teardown_barrier(ctx);
    if (!was && ctx->status)
        release_all_keeping_error(ctx);
    else
        release_all(ctx);
}

/* ---- dispatch: the plugin's member or the shared default ----
 * The dispatcher, not the default, gives the rank its identity and phase
 * around every member: a custom member that fails before it calls the
 * default (or never calls it) still fails as "rank N, phase: ...", with the
 * same verdict under every accelerator. */
int ddp_plugin_init_ddp_connection(const ddp_plugin_t *p, ddp_ctx_t *ctx,
                                   ddp_cluster_t *cluster_env, int global_rank,
                                   int world_size)
{
    ctx->init_calls++;
    enter(ctx, global_rank, world_size, "init_ddp_connection");
    if (p && p->init_ddp_connection)
        return p->init_ddp_connection(p, ctx, cluster_env, global_rank,
                                      world_size);
    return ddp_plugin_default_init_ddp_connection(p, ctx, cluster_env,
                                                  global_rank, world_size);
}

int ddp_plugin_configure_ddp(const ddp_plugin_t *p, ddp_ctx_t *ctx,
                             ddp_model_t *model)
{
    ddp_ident_set_phase("configure_ddp");
    if (p && p->configure_ddp)
        return p->configure_ddp(p, ctx, model);
    return ddp_plugin_default_configure_ddp(p, ctx, model);
}

void ddp_plugin_teardown(const ddp_plugin_t *p, ddp_ctx_t *ctx)
{
    ddp_ident_set_phase("teardown");
    /* Training took its time since init: teardown's waits get their own. */
    ctx->deadline = ddp_sys_deadline_in(ctx->sys, ddp_trainer_timeout_ns(ctx->cfg));
    ctx->barrier_done = 0;
    if (p && p->teardown)
        p->teardown(p, ctx);
    else
        ddp_plugin_default_teardown(p, ctx);
}
