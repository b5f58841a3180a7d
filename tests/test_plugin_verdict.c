/* tests/test_plugin_verdict.c — a custom plugin gets the same identity and
 * the same verdict under every accelerator: one whose init_ddp_connection
 * fails before it calls the default, and one that connects, splits the
 * world into groups, owns state and frees it in its own teardown. Also:
 * the first error (the root cause) is what every process reports, and the
 * teardown barrier waits for every rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/accel.h"
#include "ddp/err.h"
#include "ddp/plan.h"
#include "ddp/plugin.h"
#include "ddp/scenario.h"
#include "test.h"

static const char *const accels[] = {"ddp",     "ddp_spawn", "ddp_cpu",
                                     "ddp2",    "ddp_hpc",   "ddp_cpu_hpc"};
#define NACC (sizeof accels / sizeof accels[0])

/* Fails before the default connection runs: nothing of the plugin's
 * identity was set by the default yet. */
static int early_init(const ddp_plugin_t *self, ddp_ctx_t *ctx, ddp_cluster_t *env,
                      int global_rank, int world_size)
{
    (void)self, (void)ctx, (void)env, (void)global_rank, (void)world_size;
    return ddp_err_set(DDP_ECONFIG, "custom connection refused: no RPC_MASTER_PORT "
                                    "agreed between the ranks");
}
static const ddp_plugin_t early_fail = {.name = "test_early_fail",
                                        .init_ddp_connection = early_init};

/* Splits even and odd ranks into two groups after the default connection;
 * its state lives in plugin_state and its own teardown frees it. */
typedef struct {
    ddp_pg_t *half;
    int magic;
} halves_t;
static int g_teardowns, g_states;

static int halves_init(const ddp_plugin_t *self, ddp_ctx_t *ctx, ddp_cluster_t *env,
                       int global_rank, int world_size)
{
    int rc = ddp_plugin_default_init_ddp_connection(self, ctx, env, global_rank,
                                                    world_size);
    if (rc)
        return rc;
    halves_t *h = calloc(1, sizeof *h);
    if (!h)
        return ddp_err_set(-12, "out of memory");
    h->magic = 0x4a11;
    ctx->plugin_state = h;
    g_states++;
    ddp_ident_set_phase("halves split");
    return ddp_pg_split(ctx->pg, global_rank % 2, global_rank, "halves", &h->half,
                        ctx->deadline);
}

static int halves_configure(const ddp_plugin_t *self, ddp_ctx_t *ctx, ddp_model_t *m)
{
    halves_t *h = ctx->plugin_state;
    ctx->ddp_group = h ? h->half : NULL;
    return ddp_plugin_default_configure_ddp(self, ctx, m);
}

static void halves_teardown(const ddp_plugin_t *self, ddp_ctx_t *ctx)
{
    halves_t *h = ctx->plugin_state;
    if (h && h->magic == 0x4a11) {
        if (h->half)
            ddp_pg_destroy(h->half);
        free(h);
        g_teardowns++;
    }
    ctx->plugin_state = NULL;
    ctx->ddp_group = NULL;
    ddp_plugin_default_teardown(self, ctx);
}
static const ddp_plugin_t halves = {.name = "test_halves",
                                    .init_ddp_connection = halves_init,
                                    .configure_ddp = halves_configure,
                                    .teardown = halves_teardown};

/* Rank 2 is slow to finish: its teardown starts 5 s (virtual) after the
 * others'. */
static void slow_teardown(const ddp_plugin_t *self, ddp_ctx_t *ctx)
{
    if (ctx->global_rank == 2)
        ddp_sys_sleep_until(ctx->sys, ddp_sys_deadline_in(ctx->sys, 5 * DDP_NS_PER_S));
    ddp_plugin_default_teardown(self, ctx);
}
static const ddp_plugin_t slow = {.name = "test_slow_teardown", .teardown = slow_teardown};

static int suite_init(void)
{
    return ddp_plugin_register(&early_fail) || ddp_plugin_register(&halves) ||
           ddp_plugin_register(&slow);
}

static ddp_scenario_t *scenario(const char *text)
{
    char err[512];
    ddp_scenario_t *s = NULL;
    if (ddp_scenario_parse(text, "verdict.scn", NULL, &s, err, sizeof err))
        printf("\n  %s\n", err);
    return s;
}

static void test_early_failure_same_everywhere(void)
{
    ddp_scenario_t *s = scenario("scenario \"custom init fails before the default\"\n"
                                 "nodes 2\ndevices 2\ntimeout 30s\nplugin test_early_fail\n"
                                 "expect fail error=config mentions=\"RPC_MASTER_PORT\"\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    char first[NACC][640];
    for (size_t a = 0; a < NACC; a++) {
        ddp_scn_result_t r;
        CU_ASSERT_EQUAL(ddp_scenario_run(s, accels[a], NULL, &r), 0);
        if (!r.pass)
            printf("\n  %s: %s\n", accels[a], r.why);
        CU_ASSERT_TRUE(r.pass);
        CU_ASSERT_EQUAL(r.failed, r.ranks);
        CU_ASSERT_EQUAL(r.ranks, !strcmp(accels[a], "ddp2") ? 2 : 4);
        /* The failing member ran with its identity set: the message names
         * the rank and the phase. */
        CU_ASSERT_PTR_NOT_NULL(strstr(r.first_error,
                                      "rank 0, init_ddp_connection: custom connection"));
        snprintf(first[a], sizeof first[a], "%s", r.first_error);
        if (a)
            CU_ASSERT_STRING_EQUAL(first[a], first[0]);
    }
    ddp_scenario_free(s);
}

static void test_custom_groups_same_everywhere(void)
{
    ddp_scenario_t *s = scenario("scenario \"custom plugin: even/odd groups, own state\"\n"
                                 "nodes 2\ndevices 2\ntimeout 30s\nplugin test_halves\n"
                                 "expect ok\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    for (size_t a = 0; a < NACC; a++) {
        g_teardowns = g_states = 0;
        ddp_scn_result_t r;
        CU_ASSERT_EQUAL(ddp_scenario_run(s, accels[a], NULL, &r), 0);
        if (!r.pass)
            printf("\n  %s: %s\n", accels[a], r.why);
        CU_ASSERT_TRUE(r.pass);
        int world = !strcmp(accels[a], "ddp2") ? 2 : 4;
        CU_ASSERT_EQUAL(r.ok, world);
        /* every rank made its state and its own teardown freed it */
        CU_ASSERT_EQUAL(g_states, world);
        CU_ASSERT_EQUAL(g_teardowns, world);
    }
    ddp_scenario_free(s);
}

/* A rank that crashes before the barrier: every accelerator reports the
 * barrier's root cause, never a teardown error that followed it. */
static void test_root_cause_not_teardown(void)
{
    ddp_scenario_t *s = scenario("scenario \"rank 1 crashes before the barrier\"\n"
                                 "nodes 2\ndevices 2\ntimeout 30s\n"
                                 "fault crash ranks=1 phase=barrier\n"
                                 "expect crashed ranks=1\n"
                                 "expect fail ranks=others mentions=\"never reached the "
                                 "barrier\"\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    for (size_t a = 0; a < NACC; a++) {
        if (!strcmp(accels[a], "ddp2"))
            continue; /* two ranks: rank 1 is the only other one */
        ddp_scn_result_t r;
        CU_ASSERT_EQUAL(ddp_scenario_run(s, accels[a], NULL, &r), 0);
        if (!r.pass)
            printf("\n  %s: %s\n", accels[a], r.why);
        CU_ASSERT_TRUE(r.pass);
        CU_ASSERT_PTR_NULL(strstr(r.first_error, "teardown"));
    }
    ddp_scenario_free(s);
}

/* The teardown barrier is every rank's: rank 0 (the store) and the ranks
 * that are not rank 2's ring neighbours wait for rank 2 too. */
static void test_teardown_barrier_all_ranks(void)
{
    ddp_scenario_t *s = scenario("scenario \"rank 2 finishes 5 s after the others\"\n"
                                 "nodes 2\ndevices 3\ntimeout 30s\n"
                                 "plugin test_slow_teardown\nexpect ok\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    ddp_plan_t *plan = NULL;
    ddp_sim_t *sim = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_scenario_plan(s, "ddp_hpc", 0, &plan), 0);
    CU_ASSERT_EQUAL_FATAL(ddp_plan_simulate(plan, NULL, &sim, NULL), 0);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    int seen = 0;
    for (int t = 0; t < ddp_sim_task_count(sim); t++) {
        const ddp_sim_outcome_t *o = ddp_sim_outcome(sim, t);
        if (o->thread || o->rank < 0)
            continue;
        seen++;
        CU_ASSERT_EQUAL(o->rc, 0);
        /* nobody leaves before rank 2 reached the barrier */
        CU_ASSERT_TRUE(o->end_ns >= 5 * DDP_NS_PER_S);
        if (o->end_ns < 5 * DDP_NS_PER_S)
            printf("\n  rank %d left at %.3f s\n", o->rank, (double)o->end_ns / 1e9);
    }
    CU_ASSERT_EQUAL(seen, 6);
    ddp_sim_free(sim);
    ddp_plan_free(plan);
    ddp_scenario_free(s);
}

DDP_SUITE("plugin_verdict", suite_init, NULL,
          {"custom init failing before the default: same verdict, every accelerator",
           test_early_failure_same_everywhere},
          {"custom groups and state with own teardown: ok, every accelerator",
           test_custom_groups_same_everywhere},
          {"the root cause, not a teardown error, is reported", test_root_cause_not_teardown},
          {"teardown barrier: every rank waits for every other", test_teardown_barrier_all_ranks})
