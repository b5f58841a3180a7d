/* tests/test_behave_timeouts.c — each deadline reaches the wait it bounds
 * (issue 16, "Timeouts").
 *
 * The group timeout (Trainer timeout_ns, `timeout` in a scenario) bounds
 * every wait of the connection: the store connect, wait-for-workers, the
 * tcp bootstrap (the ring table, the connect to the ring successor) and the
 * store barrier. The store timeout (store_timeout_ns, `store_timeout`)
 * bounds each single store request, never past the group deadline
 * (ddp_plugin_store_deadline). Each case below makes exactly one of those
 * waits the one that expires, with the two timeouts far apart (group 33 or
 * 45 s, store 5 s), and checks in virtual time that the rank gave up when
 * that wait's own deadline passed, in the phase that owns it, saying how
 * long it waited. The nccl uid exchange is tests/test_behave_nccl.c's.
 */
#include <fiu-control.h>
#include <fiu.h>
#include <stdio.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/plan.h"
#include "ddp/scenario.h"
#include "ddp/sim.h"
#include "behave.h"
#include "test.h"

#define S DDP_NS_PER_S
#define MS DDP_NS_PER_MS

typedef struct tcase {
    const char *name;
    const char *text;  /* the scenario (accelerator ddp_hpc unless accel) */
    const char *accel;
    int rank;          /* the rank whose wait expires */
    int code;
    int64_t at, slack; /* it ends in [at, at + slack] (virtual, from t = 0) */
    const char *facts[4];
} tcase_t;

#define BASE "launcher slurm\nmaster_addr none\nport none\nseed 7\n"

static const tcase_t g_cases[] = {
    {"store connect: the group timeout, not the store's",
     "scenario \"t\"\n" BASE "timeout 33s\nstore_timeout 5s\nfault refuse peer=0 port=19242\n"
     "expect fail\n",
     "ddp_hpc", 2, -111 /* -ECONNREFUSED */, 33 * S, 100 * MS,
     {"rank 2, store connect: ", "after 33.0 s", "node0:19242"}},
    {"wait for workers: the group timeout",
     "scenario \"t\"\n" BASE "timeout 45s\nstore_timeout 5s\n"
     "fault crash ranks=3 phase=\"store connect\"\nexpect crashed ranks=3\nexpect fail\n",
     "ddp_hpc", 0, DDP_ETIMEOUT, 45 * S, 100 * MS,
     {"rank 0, wait for workers: ", "rank 3 never joined", "after 45.0 seconds"}},
    {"tcp bootstrap, the ring table: the group timeout",
     "scenario \"t\"\n" BASE "timeout 45s\nstore_timeout 5s\n"
     "fault crash ranks=3 phase=\"store connect\"\nexpect crashed ranks=3\nexpect fail\n",
     "ddp_hpc", 1, DDP_ETIMEOUT, 45 * S, 100 * MS,
     {"rank 1, process group init: ", "tcp/peers/1", "Timed out after 45.0 s"}},
    {"barrier: the group timeout",
     "scenario \"t\"\n" BASE "timeout 33s\nstore_timeout 5s\n"
     "fault crash ranks=2 phase=\"barrier\"\nexpect crashed ranks=2\nexpect fail\n",
     "ddp_hpc", 0, DDP_ETIMEOUT, 33 * S, 100 * MS,
     {"rank 0, barrier: ", "rank 2 never reached the barrier", "after 33.0 s"}},
    /* Messages between node 1 and node 0 take 20 s: the connect (a group
     * wait: SYN and SYN-ACK, VALIDATE+PING+CHECK for another job's root
     * cause and their replies) takes 80 s and succeeds; the next request,
     * the ADD that claims the rank, gives up after the store's 5 s, in the
     * wait-for-workers phase. */
    {"a store request: the store timeout",
     "scenario \"t\"\n" BASE "timeout 100s\nstore_timeout 5s\n"
     "fault delay node=1 peer=0 delay=20s\nexpect fail\n",
     "ddp_hpc", 2, DDP_ETIMEOUT, 85 * S, 100 * MS,
     {"rank 2, wait for workers: ", "reply to ADD", "after 5.0 s"}},
    /* The same request with the store timeout past the group deadline
     * (83 s from the start): the group deadline cuts it after 3 s. */
    {"a store request: never past the group deadline",
     "scenario \"t\"\n" BASE "timeout 83s\nstore_timeout 300s\n"
     "fault delay node=1 peer=0 delay=20s\nexpect fail\n",
     "ddp_hpc", 2, DDP_ETIMEOUT, 83 * S, 100 * MS,
     {"rank 2, wait for workers: ", "reply to ADD", "after 3.0 s"}},
};
#define NCASES (sizeof g_cases / sizeof g_cases[0])

static ddp_sim_t *simulate(const char *text, const char *accel, ddp_plan_t **plan)
{
    return ddp_behave_scenario(text, accel, NULL, plan);
}

static const ddp_sim_outcome_t *rank_outcome(const ddp_sim_t *sim, int rank)
{
    for (int t = 0; t < ddp_sim_task_count(sim); t++) {
        const ddp_sim_outcome_t *o = ddp_sim_outcome(sim, t);
        if (!o->thread && o->rank == rank && o->world > 0)
            return o;
    }
    return NULL;
}

static void check_rank(const char *name, const ddp_sim_t *sim, int rank, int code,
                       int64_t at, int64_t slack, const char *const *facts, int nfacts)
{
    const ddp_sim_outcome_t *o = rank_outcome(sim, rank);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    int bad = o->code != code || o->end_ns < at || o->end_ns > at + slack;
    for (int f = 0; f < nfacts && facts[f]; f++)
        bad |= !strstr(o->message, facts[f]);
    if (bad) {
        printf("\n  %s: rank %d ended at %.6f s (want %.3f .. %.3f s) with %s (want %s): "
               "%s\n",
               name, rank, (double)o->end_ns / 1e9, (double)at / 1e9,
               (double)(at + slack) / 1e9, ddp_err_name(o->code), ddp_err_name(code),
               o->message);
        for (int f = 0; f < nfacts && facts[f]; f++)
            if (!strstr(o->message, facts[f]))
                printf("    missing: %s\n", facts[f]);
    }
    CU_ASSERT_FALSE(bad);
}

static void run_case(const tcase_t *c)
{
    ddp_plan_t *plan = NULL;
    ddp_sim_t *sim = simulate(c->text, c->accel, &plan);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    check_rank(c->name, sim, c->rank, c->code, c->at, c->slack, c->facts, 4);
    ddp_sim_free(sim);
    ddp_plan_free(plan);
}

static void test_table(void)
{
    for (size_t i = 0; i < NCASES; i++)
        run_case(&g_cases[i]);
}

/* The store request case, closer, from the trace: the TCP connect took
 * 40 s (SYN, SYN-ACK) and the VALIDATE+PING handshake another 40 s, both
 * far past the store's 5 s (they are group waits); the CHECK sent when the
 * PONG arrived failed exactly 5 s later. */
static void test_request_waits_store_timeout(void)
{
    ddp_plan_t *plan = NULL;
    ddp_sim_opts_t so = {.keep_trace = 1};
    ddp_sim_t *sim = ddp_behave_scenario(g_cases[4].text, "ddp_hpc", &so, &plan);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    const ddp_sim_outcome_t *o = rank_outcome(sim, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    int64_t connected[4];
    int n = ddp_behave_trace_times(ddp_sim_trace(sim, NULL), "rank2", "connected_to",
                                   connected, 4);
    CU_ASSERT_EQUAL_FATAL(n, 1);
    int64_t pong = connected[0] + 40 * S; /* one round trip later */
    int good = connected[0] >= 40 * S && connected[0] <= 40 * S + 10 * MS &&
               o->end_ns >= pong + 5 * S && o->end_ns <= pong + 5 * S + 10 * MS;
    if (!good)
        printf("\n  TCP connected at %.6f s, failed at %.6f s\n", (double)connected[0] / 1e9,
               (double)o->end_ns / 1e9);
    CU_ASSERT_TRUE(good);
    ddp_sim_free(sim);
    ddp_plan_free(plan);
}

/* ---- the tcp bootstrap's connect to its ring successor ---- */

/* pg/tcp/connect fails every attempt of rank 1 (and only rank 1's). */
static int rank1_cb(const char *name, int *failnum, void **failinfo, unsigned int *flags)
{
    (void)name, (void)failnum, (void)failinfo, (void)flags;
    return ddp_ident_rank() == 1;
}

static void test_tcp_connect_waits_group_timeout(void)
{
    ddp_plan_t *plan = NULL;
    ddp_sim_t *sim = simulate("scenario \"t\"\n" BASE "timeout 33s\nstore_timeout 5s\n"
                              "expect fail\n",
                              "ddp_hpc", &plan);
    ddp_fault_enable_external("pg/tcp/connect", 1, NULL, 0, rank1_cb);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    ddp_fault_disable("pg/tcp/connect");
    static const char *const facts[] = {"rank 1, process group init: ",
                                        "ring successor rank 2", "after 33.0 s"};
    /* The deadline counts from init, a few ms in: the rendezvous before. */
    check_rank("tcp connect to the ring successor", sim, 1, DDP_ETIMEOUT, 33 * S,
               100 * MS, facts, 3);
    ddp_sim_free(sim);
    ddp_plan_free(plan);
}

static int suite_init(void)
{
    fiu_init(0);
    return ddp_behave_suite_init();
}

DDP_SUITE("behave_timeouts", suite_init, ddp_behave_suite_cleanup,
          {"each wait ends at its own deadline", test_table},
          {"a store request: 5 s after an 80 s connect", test_request_waits_store_timeout},
          {"tcp bootstrap: the connect to the ring successor",
           test_tcp_connect_waits_group_timeout})
