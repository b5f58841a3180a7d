/* tests/behave.c — the recording plugin and trace readers of tests/behave.h. */
#include "behave.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/log.h"
#include "ddp/plan.h"
#include "ddp/plugin.h"
#include "ddp/scenario.h"
#include "ddp/store.h"
#include "test.h"

#define MAX_TASKS 1024

/* Simulated tasks run one at a time (the scheduler's baton orders them),
 * and the test reads the records after ddp_sim_run has joined them all. */
static ddp_behave_rec_t *g_recs[MAX_TASKS];

const ddp_behave_rec_t *ddp_behave_rec(int task)
{
    return task >= 0 && task < MAX_TASKS ? g_recs[task] : NULL;
}

void ddp_behave_rec_reset(void)
{
    for (int i = 0; i < MAX_TASKS; i++) {
        if (!g_recs[i])
            continue;
        ddp_env_free(g_recs[i]->env_init);
        ddp_env_free(g_recs[i]->env_after);
        free(g_recs[i]);
        g_recs[i] = NULL;
    }
}

static int record_init(const ddp_plugin_t *self, ddp_ctx_t *ctx, ddp_cluster_t *env,
                       int global_rank, int world_size)
{
    int t = ddp_sim_task_of(ctx->sys);
    ddp_behave_rec_t *r = NULL;
    if (t >= 0 && t < MAX_TASKS) {
        if (!g_recs[t])
            g_recs[t] = calloc(1, sizeof *g_recs[t]);
        r = g_recs[t];
    }
    if (r) {
        r->init_calls++;
        snprintf(r->accel, sizeof r->accel, "%s", ctx->accelerator ? ctx->accelerator : "");
        snprintf(r->cluster, sizeof r->cluster, "%s", env && env->ops ? env->ops->name : "");
        r->global_rank = global_rank;
        r->world_size = world_size;
        r->local_rank = ctx->local_rank;
        r->node_rank = ctx->node_rank;
        r->children = ctx->nchildren;
        ddp_env_free(r->env_init);
        r->env_init = ddp_env_clone(ddp_sys_env(ctx->sys));
    }
    int rc = ddp_plugin_default_init_ddp_connection(self, ctx, env, global_rank,
                                                    world_size);
    if (r) {
        r->init_rc = rc;
        snprintf(r->backend, sizeof r->backend, "%s", ctx->backend);
        ddp_env_free(r->env_after);
        r->env_after = ddp_env_clone(ddp_sys_env(ctx->sys));
    }
    return rc;
}

static const ddp_plugin_t g_recorder = {.name = DDP_BEHAVE_RECORDER,
                                        .init_ddp_connection = record_init};

static ddp_log_level_t g_level;

int ddp_behave_suite_init(void)
{
    g_level = ddp_log_level();
    ddp_log_set_level(DDP_LOG_ERROR);
    return ddp_plugin_register(&g_recorder) == 0 ? 0 : -1;
}

int ddp_behave_suite_cleanup(void)
{
    ddp_behave_rec_reset();
    ddp_log_set_level(g_level);
    return 0;
}

int ddp_behave_leaked(const ddp_sim_t *sim, char *who, size_t n)
{
    int bad = 0;
    for (int t = 0; t < ddp_sim_task_count(sim); t++) {
        const ddp_sim_outcome_t *o = ddp_sim_outcome(sim, t);
        if (!o->leaked_socks)
            continue;
        if (!bad++ && who)
            snprintf(who, n, "%s (node %d, %d socket(s))", o->name, o->node,
                     o->leaked_socks);
    }
    return bad;
}

int ddp_behave_trace_times(const char *trace, const char *task, const char *kind,
                           int64_t *out, int max)
{
    char want_task[96] = "", want_kind[64];
    if (task)
        snprintf(want_task, sizeof want_task, "\"task\":\"%s\",", task);
    snprintf(want_kind, sizeof want_kind, "\"kind\":\"%s\"", kind);
    int n = 0;
    for (const char *l = trace; l && *l && n < max;) {
        const char *nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) : strlen(l);
        char line[1100];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), l);
        long long t = 0;
        if ((!task || strstr(line, want_task)) && strstr(line, want_kind) &&
            sscanf(line, "{\"t\":%lld,", &t) == 1)
            out[n++] = t;
        l = nl ? nl + 1 : NULL;
    }
    return n;
}

ddp_sim_t *ddp_behave_sim(const ddp_sim_opts_t *so, int nodes)
{
    ddp_sim_t *sim = ddp_sim_new(so);
    CU_ASSERT_PTR_NOT_NULL_FATAL(sim);
    for (int i = 0; i < nodes; i++) {
        char host[16], addr[24];
        snprintf(host, sizeof host, "node%d", i);
        snprintf(addr, sizeof addr, "10.0.%d.1", i);
        CU_ASSERT_FATAL(ddp_sim_add_node(sim, host, addr, 0) >= 0);
    }
    return sim;
}

ddp_sim_t *ddp_behave_scenario(const char *text, const char *accel,
                               const ddp_sim_opts_t *so, ddp_plan_t **plan)
{
    ddp_scenario_t *s = NULL;
    char err[256] = "";
    int rc = ddp_scenario_parse(text, "behave", NULL, &s, err, sizeof err);
    if (rc)
        printf("\n  %s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL_FATAL(ddp_scenario_plan(s, accel, 0, plan), 0);
    ddp_sim_t *sim = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_plan_simulate(*plan, so, &sim, NULL), 0);
    ddp_scenario_free(s);
    return sim;
}

int ddp_behave_serve(ddp_sys_t *sys, uint16_t port, atomic_int *done, int want,
                     int64_t limit_ns)
{
    ddp_store_server_opts_t so = {.port = port};
    return ddp_behave_serve_opts(sys, &so, done, want, limit_ns);
}

int ddp_behave_serve_opts(ddp_sys_t *sys, const ddp_store_server_opts_t *so, atomic_int *done,
                          int want, int64_t limit_ns)
{
    ddp_store_server_t *srv = NULL;
    int rc = ddp_store_server_new(sys, so, &srv);
    if (rc)
        return rc;
    int64_t dl = ddp_sys_deadline_in(sys, limit_ns);
    while (atomic_load(done) < want && ddp_sys_now(sys) < dl)
        if (ddp_store_server_step(srv, dl) == DDP_ECANCELED)
            break;
    ddp_store_server_free(srv);
    return 0;
}

ddp_store_t *ddp_behave_client(ddp_sys_t *sys, uint64_t seed, int64_t within_ns, int *rc)
{
    ddp_store_client_opts_t o = {.host = "node0", .port = 29500, .seed = seed,
                                 .connect_deadline = ddp_sys_deadline_in(sys, within_ns)};
    *rc = 0;
    return ddp_store_client_connect(sys, &o, rc);
}
