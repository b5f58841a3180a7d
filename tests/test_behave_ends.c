/* tests/test_behave_ends.c — what a run starts, ends, and what waits, is
 * woken (issue 16; written for the mutation check's survivors,
 * docs/testing.md § 5). In the simulator, where a thread or a child that
 * outlives its owner is visible in the outcomes instead of a rare crash:
 *  - rank 0's store server runs on a thread of rank 0's process; teardown
 *    stops it and joins it before freeing it, so under every accelerator
 *    the thread ends, with status 0, no later than its process;
 *  - a launcher leaves no worker behind (torchrun kills hung workers): a
 *    worker still running when its launcher gives up waiting (the group
 *    timeout + 60 s after the launcher's own end, accelerators/accel.c) is
 *    killed then, not left to run on;
 *  - a SET ends every WAIT on its key, not only the first one queued
 *    (TCPStore: wait(keys) returns once the keys exist, for every waiter);
 *  - the store server's idle timeout ends only connections that make no
 *    progress (docs/store-protocol.md): a client that sends a large SET
 *    slowly, a piece a second, is served however long the whole takes.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/plan.h"
#include "ddp/scenario.h"
#include "ddp/sim.h"
#include "ddp/store.h"
#include "behave.h"
#include "store_wire.h"
#include "test.h"

#define S DDP_NS_PER_S
#define MS DDP_NS_PER_MS

/* The process (not a thread) with this global rank on this node. */
static const ddp_sim_outcome_t *process(const ddp_sim_t *sim, int rank, int node)
{
    for (int t = 0; t < ddp_sim_task_count(sim); t++) {
        const ddp_sim_outcome_t *o = ddp_sim_outcome(sim, t);
        if (!o->thread && o->rank == rank && o->node == node)
            return o;
    }
    return NULL;
}

/* ---- the store server's thread is joined at teardown ---- */

static void test_server_thread_joined(void)
{
    static const char *const accels[] = {"ddp",  "ddp_spawn", "ddp_cpu",
                                         "ddp2", "ddp_hpc",   "ddp_cpu_hpc"};
    ddp_scenario_t *s = NULL;
    char err[256] = "";
    CU_ASSERT_EQUAL_FATAL(ddp_scenario_load("scenarios/clean-start.scn", &s, err, sizeof err),
                          0);
    for (size_t a = 0; a < sizeof accels / sizeof accels[0]; a++) {
        ddp_plan_t *p = NULL;
        ddp_sim_t *sim = NULL;
        CU_ASSERT_EQUAL_FATAL(ddp_scenario_plan(s, accels[a], 0, &p), 0);
        CU_ASSERT_EQUAL_FATAL(ddp_plan_simulate(p, NULL, &sim, NULL), 0);
        CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
        const ddp_sim_outcome_t *rank0 = process(sim, 0, 0), *srv = NULL;
        int servers = 0;
        for (int t = 0; t < ddp_sim_task_count(sim); t++) {
            const ddp_sim_outcome_t *o = ddp_sim_outcome(sim, t);
            if (o->thread && !strcmp(o->name, "store-server")) {
                srv = o;
                servers++;
            }
        }
        CU_ASSERT_PTR_NOT_NULL_FATAL(rank0);
        CU_ASSERT_EQUAL(rank0->rc, 0);
        CU_ASSERT_EQUAL_FATAL(servers, 1);
        int good = srv->state == DDP_SIM_TASK_EXITED && srv->rc == 0 &&
                   srv->end_ns <= rank0->end_ns;
        if (!good)
            printf("\n  %s: the store server's thread ended at %.6f s (status %d), its "
                   "process (rank 0) at %.6f s\n",
                   accels[a], (double)srv->end_ns / 1e9, srv->rc,
                   (double)rank0->end_ns / 1e9);
        CU_ASSERT_TRUE(good);
        ddp_sim_free(sim);
        ddp_plan_free(p);
    }
    ddp_scenario_free(s);
}

/* ---- a hung worker is killed by its launcher ---- */

#define HUNG_TIMEOUT (10 * S)

static void test_hung_worker_killed(void)
{
    /* ddp: node 0's script is rank 0 and launches rank 1; ddp_spawn: node
     * 0's script only launches ranks 0 and 1. Rank 1 hangs from the start
     * (paused until 1000 s); rank 0 gives up on it after the 10 s timeout. */
    static const char *const accels[] = {"ddp", "ddp_spawn"};
    for (size_t a = 0; a < sizeof accels / sizeof accels[0]; a++) {
        ddp_plan_t *p = NULL;
        ddp_sim_t *sim = ddp_behave_scenario(
            "scenario \"rank 1 hangs, its launcher kills it\"\n"
            "include \"scenarios/common/base.inc\"\naccelerators ddp ddp_spawn\n"
            "timeout 10s\nfault pause ranks=1 start=0s end=1000s\nexpect fail\n",
            accels[a], NULL, &p);
        CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
        const ddp_sim_outcome_t *hung = process(sim, 1, 0), *rank0 = process(sim, 0, 0),
                                *launcher = process(sim, -1, 0);
        if (!launcher) /* ddp: rank 0 is the launcher */
            launcher = rank0;
        CU_ASSERT_PTR_NOT_NULL_FATAL(hung);
        CU_ASSERT_PTR_NOT_NULL_FATAL(rank0);
        /* The launcher waits until rank 0 ended + timeout + 60 s (1 s for
         * the kill and the exits), then kills rank 1: nothing of the node
         * runs on to the pause's end. */
        int64_t by = rank0->end_ns + HUNG_TIMEOUT + 60 * S + S;
        int good = hung->state == DDP_SIM_TASK_CRASHED && hung->end_ns <= launcher->end_ns &&
                   launcher->end_ns <= by;
        if (!good)
            printf("\n  %s: rank 1 ended at %.3f s (%s), its launcher at %.3f s; expected "
                   "rank 1 killed by %.3f s\n    rank 1: %s\n",
                   accels[a], (double)hung->end_ns / 1e9,
                   hung->state == DDP_SIM_TASK_CRASHED ? "killed" : "not killed",
                   (double)launcher->end_ns / 1e9, (double)by / 1e9, hung->message);
        CU_ASSERT_TRUE(good);
        ddp_sim_free(sim);
        ddp_plan_free(p);
    }
}

/* ---- a SET ends every wait on its key ---- */

#define WAITERS 3

typedef struct wake_run {
    atomic_int done;
    int rc[WAITERS];
    int64_t set_at, woke[WAITERS];
} wake_run_t;

static int wake_server(ddp_sys_t *sys, void *arg)
{
    wake_run_t *r = arg;
    (void)ddp_behave_serve(sys, 29500, &r->done, WAITERS + 1, 30 * S);
    return 0;
}

/* rank < WAITERS: waits for "go" (10 s); rank WAITERS: sets it at 1 s. */
static int wake_client(ddp_sys_t *sys, void *arg)
{
    ddp_behave_task_t *t = arg;
    wake_run_t *r = t->run;
    int rc = 0;
    ddp_store_t *st = ddp_behave_client(sys, 21 + (uint64_t)t->rank, 5 * S, &rc);
    if (st && t->rank < WAITERS) {
        const char *k[1] = {"go"};
        rc = ddp_store_wait(st, k, 1, ddp_sys_deadline_in(sys, 10 * S));
        r->rc[t->rank] = rc;
        r->woke[t->rank] = ddp_sys_now(sys);
    } else if (st) {
        (void)ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, S));
        r->set_at = ddp_sys_now(sys);
        rc = ddp_store_set_str(st, "go", "1", ddp_sys_deadline_in(sys, S));
    }
    ddp_store_free(st);
    atomic_fetch_add(&r->done, 1);
    return rc ? 1 : 0;
}

static void test_set_wakes_every_waiter(void)
{
    ddp_sim_opts_t so = {.seed = 3};
    ddp_sim_t *sim = ddp_behave_sim(&so, 2);
    wake_run_t r = {0};
    ddp_behave_task_t args[WAITERS + 1];
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "server", .rank = -1},
                     wake_server, &r);
    for (int i = 0; i <= WAITERS; i++) {
        char name[16];
        snprintf(name, sizeof name, i < WAITERS ? "waiter%d" : "setter", i);
        args[i] = (ddp_behave_task_t){.run = &r, .rank = i};
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = name, .rank = -1},
                         wake_client, &args[i]);
    }
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    CU_ASSERT_FATAL(r.set_at > 0);
    /* Every waiter returns within a round trip or two of the SET (100 us
     * links), long before its own 10 s. */
    for (int i = 0; i < WAITERS; i++) {
        int good = r.rc[i] == 0 && r.woke[i] >= r.set_at && r.woke[i] - r.set_at < 10 * MS;
        if (!good)
            printf("\n  waiter %d: %s, %.3f s after the SET\n", i, ddp_err_name(r.rc[i]),
                   (double)(r.woke[i] - r.set_at) / 1e9);
        CU_ASSERT_TRUE(good);
    }
    ddp_sim_free(sim);
}

/* ---- a slow client is not an idle one ---- */

#define IDLE_TIMEOUT (3 * S)
#define PIECE 4096
#define PIECES 12 /* one a second: 12 s of requests, 4 idle timeouts */

typedef struct slow_run {
    atomic_int done;
    int rc;          /* the client's: 0 when the value came back whole */
    int64_t got_len; /* the GET's reply length */
} slow_run_t;

static int slow_server(ddp_sys_t *sys, void *arg)
{
    slow_run_t *r = arg;
    ddp_store_server_opts_t so = {.port = 29500, .idle_timeout_ns = IDLE_TIMEOUT};
    (void)ddp_behave_serve_opts(sys, &so, &r->done, 1, 60 * S);
    return 0;
}

/* VALIDATE, then PIECES SETs of "/slow" to PIECE bytes, a second apart,
 * each sent with the first half of the next: the connection always has a
 * request in flight, and only its complete requests are progress. Then GET
 * it back. */
static int slow_client(ddp_sys_t *sys, void *arg)
{
    slow_run_t *r = arg;
    int64_t dl = ddp_sys_deadline_in(sys, 50 * S);
    int fd = ddp_sys_connect_host(sys, "node0", 29500, dl);
    int rc = fd < 0 ? fd : 0;
    static msg_t m;
    m.n = 0;
    m_u8(&m, DDP_STORE_OP_VALIDATE);
    m_u32(&m, DDP_STORE_MAGIC);
    static uint8_t piece[PIECE];
    memset(piece, 'v', sizeof piece);
    for (int i = 0; i <= PIECES && rc == 0; i++) {
        if (i > 0) { /* the rest of SET i - 1, a second after its start */
            (void)ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, S));
            m_raw(&m, piece, PIECE / 2);
        }
        if (i < PIECES) {
            m_u8(&m, DDP_STORE_OP_SET);
            m_str(&m, "/slow");
            m_u64(&m, (uint64_t)PIECE);
            m_raw(&m, piece, PIECE / 2);
        }
        rc = ddp_sys_send_all(sys, fd, m.b, m.n, dl);
        m.n = 0;
    }
    m.n = 0;
    m_u8(&m, DDP_STORE_OP_GET);
    m_str(&m, "/slow");
    uint64_t len = 0;
    if (rc == 0)
        rc = ddp_sys_send_all(sys, fd, m.b, m.n, dl);
    if (rc == 0)
        rc = ddp_sys_recv_all(sys, fd, &len, sizeof len, dl);
    r->got_len = rc ? -1 : (int64_t)len;
    r->rc = rc;
    if (fd >= 0)
        ddp_sys_close(sys, fd);
    atomic_fetch_add(&r->done, 1);
    return 0;
}

static void test_slow_client_served(void)
{
    ddp_sim_opts_t so = {.seed = 4};
    ddp_sim_t *sim = ddp_behave_sim(&so, 2);
    slow_run_t r = {0};
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "server", .rank = -1},
                     slow_server, &r);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "slow", .rank = -1},
                     slow_client, &r);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    if (r.rc || r.got_len != (int64_t)PIECE)
        printf("\n  SETs sent a half a second (idle timeout %.0f s): %s, %lld bytes back\n",
               (double)IDLE_TIMEOUT / 1e9, ddp_err_name(r.rc), (long long)r.got_len);
    CU_ASSERT_EQUAL(r.rc, 0);
    CU_ASSERT_EQUAL(r.got_len, (int64_t)PIECE);
    ddp_sim_free(sim);
}

DDP_SUITE("behave_ends", ddp_behave_suite_init, ddp_behave_suite_cleanup,
          {"the store server's thread is joined before its process ends",
           test_server_thread_joined},
          {"a hung worker is killed by its launcher", test_hung_worker_killed},
          {"one SET ends every WAIT on its key", test_set_wakes_every_waiter},
          {"the idle timeout spares a slow client that makes progress",
           test_slow_client_served})
