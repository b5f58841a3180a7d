/* tests/test_sim_store.c — the real store (server + client, unmodified) in
 * the simulator: N ranks do wait-for-workers + store barrier under faults. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/launch.h"
#include "ddp/sim.h"
#include "ddp/store.h"
#include "epoll_contract.h"
#include "test.h"

typedef struct {
    ddp_sim_t *sim;
    ddp_sim_rendezvous_t rv;
    ddp_sim_result_t res;
} rdv_t;

static ddp_sim_t *cluster(uint64_t seed, int nodes, int keep)
{
    ddp_sim_opts_t o = {.seed = seed, .keep_trace = keep};
    ddp_sim_t *sim = ddp_sim_new(&o);
    for (int i = 0; i < nodes; i++) {
        char host[16], addr[16];
        snprintf(host, sizeof host, "node%d", i);
        snprintf(addr, sizeof addr, "10.0.%d.%d", i / 250, i % 250 + 1);
        ddp_sim_add_node(sim, host, addr, 0);
    }
    return sim;
}

static int count_ok(rdv_t *r)
{
    int ok = 0;
    for (int i = 0; i < r->rv.ranks; i++) {
        const ddp_sim_outcome_t *o = ddp_sim_outcome(r->sim, r->rv.first_rank_task + i);
        ok += o->state == DDP_SIM_TASK_EXITED && o->rc == 0;
    }
    return ok;
}

static const ddp_sim_outcome_t *rank_out(rdv_t *r, int rank)
{
    return ddp_sim_outcome(r->sim, r->rv.first_rank_task + rank);
}

static void run(rdv_t *r) { r->res = ddp_sim_run(r->sim); }

static void test_rendezvous_ok(void)
{
    rdv_t r = {.sim = cluster(1, 2, 0), .rv = {.ranks = 8, .timeout_ns = 60 * DDP_NS_PER_S}};
    CU_ASSERT_EQUAL_FATAL(ddp_sim_rendezvous_build(r.sim, &r.rv), 0);
    run(&r);
    CU_ASSERT_EQUAL(r.res, DDP_SIM_DONE);
    CU_ASSERT_EQUAL(count_ok(&r), 8);
    CU_ASSERT(rank_out(&r, 7)->connect_ns > 0);
    ddp_sim_free(r.sim);
}

static uint64_t rdv_hash(uint64_t seed)
{
    rdv_t r = {.sim = cluster(seed, 2, 1), .rv = {.ranks = 8, .timeout_ns = 60 * DDP_NS_PER_S,
                                                 .server_start_ns = DDP_NS_PER_S}};
    ddp_sim_rendezvous_build(r.sim, &r.rv);
    run(&r);
    ddp_sim_stats_t st;
    ddp_sim_stats(r.sim, &st);
    CU_ASSERT_EQUAL(count_ok(&r), 8);
    ddp_sim_free(r.sim);
    return st.trace_hash;
}

static void test_rendezvous_deterministic(void)
{
    uint64_t h = rdv_hash(99);
    int same = 0;
    for (int i = 0; i < 20; i++)
        same += rdv_hash(99) == h;
    CU_ASSERT_EQUAL(same, 20);
    CU_ASSERT_NOT_EQUAL(rdv_hash(100), h);
}

/* 8 ranks on 2 nodes, the store server starting at start_ns; run. */
static void run_late(rdv_t *r, uint64_t seed, int64_t timeout_ns,
                     int64_t start_ns)
{
    *r = (rdv_t){.sim = cluster(seed, 2, 0),
                 .rv = {.ranks = 8, .timeout_ns = timeout_ns,
                        .server_start_ns = start_ns}};
    ddp_sim_rendezvous_build(r->sim, &r->rv);
    run(r);
}

static void test_master_late(void)
{
    rdv_t r;
    run_late(&r, 2, 120 * DDP_NS_PER_S, 20 * DDP_NS_PER_S);
    CU_ASSERT_EQUAL(count_ok(&r), 8);
    CU_ASSERT(rank_out(&r, 3)->retries > 0);
    CU_ASSERT(rank_out(&r, 3)->connect_ns >= 20 * DDP_NS_PER_S);
    ddp_sim_free(r.sim);
}

/* The connect retry schedule starts small (docs/store-protocol.md): with
 * the master 30 ms late, ranks retry at 20 ms * [0.5, 1.5], then twice
 * that, ... so every rank is in within a few tens of ms of virtual time
 * (the old 500 ms first backoff put them at >= 250 ms). */
static void test_master_slightly_late(void)
{
    rdv_t r;
    run_late(&r, 5, 60 * DDP_NS_PER_S, 30 * DDP_NS_PER_MS);
    CU_ASSERT_EQUAL(count_ok(&r), 8);
    int retried = 0;
    for (int i = 1; i < 8; i++) {
        const ddp_sim_outcome_t *o = rank_out(&r, i);
        retried += o->retries > 0;
        CU_ASSERT(o->connect_ns < 200 * DDP_NS_PER_MS);
        if (o->connect_ns >= 200 * DDP_NS_PER_MS)
            fprintf(stderr, "rank %d connected at %.3f s after %d retries\n",
                    i, (double)o->connect_ns / 1e9, o->retries);
    }
    CU_ASSERT(retried > 0);
    ddp_sim_free(r.sim);
}

static void test_master_never(void)
{
    /* The 30-minute default init timeout: costs virtual time only. */
    rdv_t r = {.sim = cluster(3, 2, 0),
               .rv = {.ranks = 8, .timeout_ns = 1800 * DDP_NS_PER_S, .server_start_ns = -1}};
    ddp_sim_rendezvous_build(r.sim, &r.rv);
    run(&r);
    CU_ASSERT_EQUAL(r.res, DDP_SIM_DONE);
    CU_ASSERT_EQUAL(count_ok(&r), 0);
    for (int i = 0; i < 8; i++) {
        const ddp_sim_outcome_t *o = rank_out(&r, i);
        CU_ASSERT_PTR_NOT_NULL(strstr(o->message, "node0"));
        CU_ASSERT_PTR_NOT_NULL(strstr(o->message, "29500"));
        CU_ASSERT(o->end_ns >= 1800 * DDP_NS_PER_S);
        CU_ASSERT(o->end_ns <= 1801 * DDP_NS_PER_S);
    }
    ddp_sim_free(r.sim);
}

static void test_reset_during_wait(void)
{
    /* Connections from node1 reset once 60 bytes went out: after VALIDATE,
     * PING and the init ADD, inside the barrier's WAIT. */
    rdv_t r = {.sim = cluster(4, 2, 0), .rv = {.ranks = 8, .timeout_ns = 30 * DDP_NS_PER_S}};
    ddp_sim_add_fault(r.sim, &(ddp_fault_t){.kind = DDP_FAULT_RESET, .node = 1, .task = -1,
                                                .peer_node = 0, .after_bytes = 60});
    ddp_sim_rendezvous_build(r.sim, &r.rv);
    run(&r);
    CU_ASSERT_EQUAL(r.res, DDP_SIM_DONE); /* nobody hangs */
    for (int i = 4; i < 8; i++) {
        const ddp_sim_outcome_t *o = rank_out(&r, i);
        CU_ASSERT_NOT_EQUAL(o->rc, 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(o->message, "29500"));
    }
    ddp_sim_free(r.sim);
}

static void test_partition_heal(void)
{
    for (int late = 0; late < 2; late++) {
        rdv_t r = {.sim = cluster(5, 2, 0),
                   .rv = {.ranks = 8, .timeout_ns = 60 * DDP_NS_PER_S}};
        ddp_sim_add_fault(r.sim, &(ddp_fault_t){.kind = DDP_FAULT_PARTITION,
                                                    .node_set = 1u << 1,
                                                    .end_ns = (late ? 90 : 20) * DDP_NS_PER_S});
        ddp_sim_rendezvous_build(r.sim, &r.rv);
        run(&r);
        CU_ASSERT_EQUAL(r.res, DDP_SIM_DONE);
        if (!late) {
            CU_ASSERT_EQUAL(count_ok(&r), 8);
        } else {
            CU_ASSERT_EQUAL(count_ok(&r), 0);
            CU_ASSERT(rank_out(&r, 5)->end_ns <= 61 * DDP_NS_PER_S);
            CU_ASSERT_PTR_NOT_NULL(strstr(rank_out(&r, 0)->message, "4/8"));
        }
        ddp_sim_free(r.sim);
    }
}

static void test_crashed_client(void)
{
    rdv_t r = {.sim = cluster(6, 2, 0), .rv = {.ranks = 8, .timeout_ns = 60 * DDP_NS_PER_S}};
    ddp_sim_rendezvous_build(r.sim, &r.rv);
    ddp_sim_add_fault(r.sim, &(ddp_fault_t){.kind = DDP_FAULT_CRASH, .node = -1,
                                                .task = r.rv.first_rank_task + 5,
                                                .phase = "barrier"});
    run(&r);
    CU_ASSERT_EQUAL(r.res, DDP_SIM_DONE);
    CU_ASSERT_EQUAL(rank_out(&r, 5)->state, DDP_SIM_TASK_CRASHED);
    CU_ASSERT_EQUAL(count_ok(&r), 0);
    const char *m = rank_out(&r, 2)->message;
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "num_workers_joined=7"));
    CU_ASSERT(rank_out(&r, 2)->end_ns <= 61 * DDP_NS_PER_S);
    ddp_sim_free(r.sim);
}

/* The readiness-set contract of ddp/sys.h on simulated sockets, run by a
 * task (the same check as on POSIX sockets, tests/epoll_contract.c). */
static int epoll_task(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    return ddp_test_epoll_contract(sys, 0);
}

static uint64_t epoll_run(uint64_t seed, int short_io)
{
    ddp_sim_opts_t o = {.seed = seed, .keep_trace = 1, .short_io = short_io};
    ddp_sim_t *sim = ddp_sim_new(&o);
    ddp_sim_add_node(sim, "node0", "10.0.0.1", 0);
    int t = ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.name = "epoll", .rank = -1},
                             epoll_task, NULL);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    const ddp_sim_outcome_t *out = ddp_sim_outcome(sim, t);
    if (out->rc != 0)
        printf("\n  epoll (simulator, seed %llu): %s\n", (unsigned long long)seed,
               out->message);
    CU_ASSERT_EQUAL(out->state, DDP_SIM_TASK_EXITED);
    CU_ASSERT_EQUAL(out->rc, 0);
    ddp_sim_stats_t st;
    ddp_sim_stats(sim, &st);
    ddp_sim_free(sim);
    return st.trace_hash;
}

static void test_epoll_contract(void)
{
    for (uint64_t seed = 1; seed <= 4; seed++)
        epoll_run(seed, (int)(seed & 1));
    CU_ASSERT_EQUAL(epoll_run(9, 1), epoll_run(9, 1));
}

/* A WAIT on 32,768 keys nobody sets, in the simulator: ddpsim's server
 * there (as torch 1.13's) keeps it until the client's deadline, so the
 * client times out; it was dropped (max_wait_keys 16,384) and the client
 * blamed the master ("is the master (rank 0) still alive?"). Issue 41. */
#define WAIT_32K 32768

typedef struct {
    int done;
    char msg[512];
} wait32k_t;

/* ddpsim's server on node0 until the client is done (at most 10 s). */
static int wait_32k_server(ddp_sys_t *sys, void *arg)
{
    wait32k_t *w = arg;
    ddp_store_server_opts_t so = {.port = 29500};
    ddp_store_server_t *srv = NULL;
    int rc = ddp_store_server_new(sys, &so, &srv);
    int64_t deadline = ddp_sys_deadline_in(sys, 10 * DDP_NS_PER_S);
    while (rc == 0 && !w->done && ddp_sys_now(sys) < deadline)
        rc = ddp_store_server_step(srv, ddp_sys_deadline_in(sys, 50 * DDP_NS_PER_MS));
    ddp_store_server_free(srv);
    return 0;
}

static int wait_32k_client(ddp_sys_t *sys, void *arg)
{
    wait32k_t *w = arg;
    ddp_store_client_opts_t co = {.host = "10.0.0.1", .port = 29500,
                                  .connect_deadline = ddp_sys_deadline_in(sys, DDP_NS_PER_S)};
    int err = 0, rc = -1;
    ddp_store_t *st = ddp_store_client_connect(sys, &co, &err);
    char **keys = calloc(WAIT_32K, sizeof *keys);
    for (int i = 0; keys && i < WAIT_32K; i++)
        if ((keys[i] = malloc(16)) != NULL)
            snprintf(keys[i], 16, "/w%d", i);
    if (st && keys && keys[WAIT_32K - 1])
        rc = ddp_store_wait(st, (const char *const *)keys, WAIT_32K,
                            ddp_sys_deadline_in(sys, 2 * DDP_NS_PER_S));
    snprintf(w->msg, sizeof w->msg, "rc %d: %s", rc, ddp_err_message());
    for (int i = 0; keys && i < WAIT_32K; i++)
        free(keys[i]);
    free(keys);
    ddp_store_free(st);
    w->done = 1;
    return rc == DDP_ETIMEOUT ? 0 : 1;
}

static void test_wait_32k_keys(void)
{
    wait32k_t w = {0};
    ddp_sim_t *sim = cluster(41, 1, 0);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.name = "store", .rank = -1}, wait_32k_server,
                     &w);
    int t = ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.name = "wait32k", .rank = -1},
                             wait_32k_client, &w);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    if (ddp_sim_outcome(sim, t)->rc != 0)
        printf("\n  WAIT on %d keys in the simulator: %s\n", WAIT_32K, w.msg);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, t)->rc, 0);
    CU_ASSERT_PTR_NULL(strstr(w.msg, "still alive"));
    ddp_sim_free(sim);
}

DDP_SUITE("sim_store", NULL, NULL,
          {"8 ranks rendezvous on 2 nodes", test_rendezvous_ok},
          {"store rendezvous trace identical over 20 runs", test_rendezvous_deterministic},
          {"master starting late: retries then success", test_master_late},
          {"master 30 ms late: the first retries are small",
           test_master_slightly_late},
          {"master never starting: fail by the 30 min deadline", test_master_never},
          {"connection reset during WAIT", test_reset_during_wait},
          {"partition healing before vs after the deadline", test_partition_heal},
          {"crashed client: barrier times out", test_crashed_client},
          {"a WAIT on 32,768 keys times out, as torch 1.13's would", test_wait_32k_keys},
          {"readiness sets: the epoll contract on simulated sockets",
           test_epoll_contract})
