/* tests/test_bounded.c — every simulation is bounded beside its virtual
 * deadline: a run whose virtual time stands still while its tasks keep
 * calling (a livelock) is stopped at the same point in every replay, and a
 * run over its wall-clock budget is stopped; both name the tasks that were
 * running and fail as harness failures, never spin. */
#include <stdio.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/plugin.h"
#include "ddp/scenario.h"
#include "ddp/sim.h"
#include "ddp/sys.h"
#include "test.h"
#include "../tools/cmds.h"

/* Calls the sim forever without letting virtual time move. */
static int spinner(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    int rc;
    while ((rc = ddp_sys_sleep_until(sys, ddp_sys_now(sys))) == 0)
        ;
    return rc;
}

static int sleeper(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    return ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 3600 * DDP_NS_PER_S));
}

static ddp_sim_result_t run_spin(const ddp_sim_opts_t *o, char *report, size_t n,
                                 uint64_t *hash)
{
    ddp_sim_t *sim = ddp_sim_new(o);
    ddp_sim_add_node(sim, "node0", "10.0.0.1", 0);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "spinner", .rank = 0},
                     spinner, NULL);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "sleeper", .rank = 1},
                     sleeper, NULL);
    ddp_sim_result_t res = ddp_sim_run(sim);
    snprintf(report, n, "%s", ddp_sim_deadlock_report(sim));
    ddp_sim_stats_t st;
    ddp_sim_stats(sim, &st);
    *hash = st.trace_hash;
    for (int t = 0; t < ddp_sim_task_count(sim); t++)
        CU_ASSERT_NOT_EQUAL(ddp_sim_outcome(sim, t)->state, DDP_SIM_TASK_RUNNING);
    ddp_sim_free(sim);
    return res;
}

static void test_livelock(void)
{
    char rep[1024];
    uint64_t h1, h2;
    ddp_sim_opts_t o = {.seed = 3, .livelock_calls = 100000, .keep_trace = 1};
    CU_ASSERT_EQUAL(run_spin(&o, rep, sizeof rep, &h1), DDP_SIM_LIVELOCK);
    CU_ASSERT_PTR_NOT_NULL(strstr(rep, "livelock: virtual time stood still for 100000"));
    CU_ASSERT_PTR_NOT_NULL(strstr(rep, "task spinner (node node0): running"));
    /* the spinner never blocks, so the sleeper never got the baton */
    CU_ASSERT_PTR_NOT_NULL(strstr(rep, ": 1 task(s) running"));
    CU_ASSERT_PTR_NULL(strstr(rep, "task sleeper"));
    /* a count, not a clock: the replay stops at the same point */
    CU_ASSERT_EQUAL(run_spin(&o, rep, sizeof rep, &h2), DDP_SIM_LIVELOCK);
    CU_ASSERT_EQUAL(h1, h2);
}

static void test_wall_limit(void)
{
    char rep[1024];
    uint64_t h;
    ddp_sys_t *wall = ddp_test_sys();
    ddp_sim_opts_t o = {.seed = 3, .livelock_calls = UINT64_MAX, .wall_clock = wall,
                        .wall_limit_ns = 200 * DDP_NS_PER_MS};
    CU_ASSERT_EQUAL(run_spin(&o, rep, sizeof rep, &h), DDP_SIM_WALL_LIMIT);
    CU_ASSERT_PTR_NOT_NULL(strstr(rep, "wall-clock limit: still running after 0.2 s"));
    CU_ASSERT_PTR_NOT_NULL(strstr(rep, "task spinner"));
    ddp_sys_free(wall);
}

/* 5,000 sim calls at each of 3 virtual instants: past the 4,096 at which
 * the wall clock is first read, short of the 8,192 of a second reading. */
static int stepper(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    int rc = 0;
    for (int step = 0; step < 3 && rc == 0; step++) {
        for (int i = 0; i < 5000 && rc == 0; i++)
            rc = ddp_sys_sleep_until(sys, ddp_sys_now(sys));
        if (rc == 0)
            rc = ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, DDP_NS_PER_MS));
    }
    return rc;
}

static ddp_sim_result_t run_stepper(int wall_stall)
{
    ddp_sys_t *wall = ddp_test_sys();
    ddp_sim_opts_t o = {.seed = 3, .wall_clock = wall, .wall_limit_ns = 1,
                        .wall_stall = wall_stall};
    ddp_sim_t *sim = ddp_sim_new(&o);
    ddp_sim_add_node(sim, "node0", "10.0.0.1", 0);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "stepper", .rank = 0},
                     stepper, NULL);
    ddp_sim_result_t res = ddp_sim_run(sim);
    ddp_sim_free(sim);
    ddp_sys_free(wall);
    return res;
}

/* wall_stall: only real time at one virtual instant counts, so a run that
 * moves on is never stopped, even with a limit of 1 ns; a stall is. */
static void test_wall_stall(void)
{
    CU_ASSERT_EQUAL(run_stepper(0), DDP_SIM_WALL_LIMIT); /* the run's time: stopped */
    CU_ASSERT_EQUAL(run_stepper(1), DDP_SIM_DONE);
    char rep[1024];
    uint64_t h;
    ddp_sys_t *wall = ddp_test_sys();
    ddp_sim_opts_t o = {.seed = 3, .livelock_calls = UINT64_MAX, .wall_clock = wall,
                        .wall_limit_ns = 1, .wall_stall = 1};
    CU_ASSERT_EQUAL(run_spin(&o, rep, sizeof rep, &h), DDP_SIM_WALL_LIMIT);
    CU_ASSERT_PTR_NOT_NULL(strstr(rep, "wall-clock limit: virtual time stood still for more "
                                       "than 1e-09 s of real time"));
    ddp_sys_free(wall);
}

/* A run stopped by its wall limit (1 ns: at the first reading of the
 * clock, 4,096 calls into a virtual instant of 1,024 ranks starting): its
 * one first error is the harness's, its cancelled ranks are `stopped',
 * neither failed nor reported with the errors of their cancelled waits. */
static void test_stopped_run_one_error(void)
{
    ddp_scenario_t *s = ddp_test_scenario("scenario \"big\"\nnodes 64\ndevices 16\nexpect invariants\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    static char report[1 << 20];
    ddp_scn_result_t r;
    ddp_scn_run_opts_t o = {.wall_limit_ns = 1, .report = report, .report_len = sizeof report};
    CU_ASSERT_EQUAL(ddp_scenario_run(s, "ddp", &o, &r), 0);
    CU_ASSERT_EQUAL(r.sim_result, DDP_SIM_WALL_LIMIT);
    CU_ASSERT_FALSE(r.pass);
    CU_ASSERT_TRUE(r.stopped > 0);
    CU_ASSERT_EQUAL(r.failed, 0);
    CU_ASSERT_EQUAL(r.first_rank, -1);
    CU_ASSERT_EQUAL(r.first_code, DDP_ECANCELED);
    CU_ASSERT_EQUAL(strncmp(r.first_error, "the harness stopped the run (wall-clock limit: "
                                           "still running after 1e-09 s", 71), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.first_error, "--wall-limit SEC"));
    CU_ASSERT_EQUAL(strncmp(r.classes, "stopped ", 8), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(report, " stopped "));
    CU_ASSERT_PTR_NULL(strstr(report, " FAIL "));
    CU_ASSERT_PTR_NULL(strstr(report, "master still alive"));
    if (r.failed || strncmp(r.first_error, "the harness", 11))
        printf("\n  %d failed; first error: %s\n", r.failed, r.first_error);
    ddp_scenario_free(s);
}

/* `ddpsim sim --wall-limit SEC`, as `run` has it: the summary counts the
 * stopped ranks and prints the harness's line once. */
static void test_sim_wall_limit_option(void)
{
    static char out[1 << 20];
    int rc = ddp_test_cmd_inproc(ddp_cmd_sim, "sim --nodes 64 --procs 16 --wall-limit 1e-9",
                                 out, sizeof out);
    CU_ASSERT_EQUAL(rc, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, " stopped; virtual "));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, " 0 failed, "));
    const char *line = strstr(out, "\n  the harness stopped the run (wall-clock limit");
    CU_ASSERT_PTR_NOT_NULL(line);
    CU_ASSERT_PTR_NULL(line ? strstr(line + 4, "the harness stopped the run") : NULL);
    if (rc != 1 || !line)
        printf("\n%.2000s\n", out);
}

/* A plugin whose connection spins: the scenario fails as a harness
 * failure naming the spinning ranks, under its wall budget. */
static int spin_init(const ddp_plugin_t *self, ddp_ctx_t *ctx, ddp_cluster_t *env, int r,
                     int n)
{
    (void)self, (void)env, (void)r, (void)n;
    return spinner(ctx->sys, NULL);
}
static const ddp_plugin_t spin = {.name = "test_spin", .init_ddp_connection = spin_init};

static void test_scenario_harness_failure(void)
{
    CU_ASSERT_EQUAL_FATAL(ddp_plugin_register(&spin), 0);
    ddp_scenario_t *s = ddp_test_scenario("scenario \"spins\"\nnodes 1\ndevices 2\n"
                                          "plugin test_spin\nexpect invariants\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    ddp_scn_result_t r;
    ddp_scn_run_opts_t o = {.wall_limit_ns = 300 * DDP_NS_PER_MS};
    CU_ASSERT_EQUAL(ddp_scenario_run(s, "ddp_hpc", &o, &r), 0);
    CU_ASSERT_FALSE(r.pass);
    CU_ASSERT_TRUE(r.sim_result == DDP_SIM_WALL_LIMIT || r.sim_result == DDP_SIM_LIVELOCK);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.why, "harness failure: the run was stopped"));
    /* the first rank to run spins and starves the other: it is named */
    CU_ASSERT_TRUE(strstr(r.why, "tasks rank0") || strstr(r.why, "tasks rank1"));
    if (!strstr(r.why, "tasks rank"))
        printf("\n  %s\n", r.why);
    ddp_scenario_free(s);
}

DDP_SUITE("bounded", NULL, NULL, {"livelock: stopped by count, same in a replay", test_livelock},
          {"wall-clock limit", test_wall_limit},
          {"wall-clock limit of a stall: progress is never stopped", test_wall_stall},
          {"a run stopped by its wall limit: one first error, ranks stopped",
           test_stopped_run_one_error},
          {"sim --wall-limit", test_sim_wall_limit_option},
          {"a spinning plugin: a harness failure naming the ranks",
           test_scenario_harness_failure})
