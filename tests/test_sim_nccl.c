/* tests/test_sim_nccl.c — the simulator's NCCL (sim/sim_nccl.c), the
 * library the sim sys hands the nccl backend (ddp_sys_nccl_api).
 *
 * What is pinned:
 *  - interface choice: NCCL_SOCKET_IFNAME's prefixes, ^ exclusion and =
 *    exact names, NCCL_SOCKET_FAMILY, and NCCL's default (not lo) over a
 *    node's eth0 and lo; a setting that matches nothing fails with NCCL's
 *    "Bootstrap : no socket interface found" and names the setting and
 *    the node's interfaces; the unique id carries the address chosen;
 *  - bootstrap: non-blocking init is ncclInProgress until every rank has
 *    reached the root and its ring neighbour, then ncclSuccess with the
 *    right count and rank, and destroy leaves no socket open;
 *  - under a partition the bootstrap waits (never a false success), forms
 *    once the partition heals, and is aborted by ncclCommAbort when it
 *    does not heal;
 *  - a peer's abort reaches the others as an async error of their
 *    collective;
 *  - allreduce / broadcast / allgather results through the nccl backend.
 * Every run is a simulation with `gpus` virtual GPUs per node.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/nccl_api.h"
#include "ddp/pg.h"
#include "ddp/sim.h"
#include "ddp/store.h"
#include "behave.h"
#include "test.h"

#define S DDP_NS_PER_S
#define MS DDP_NS_PER_MS

#ifdef DDP_HAVE_NCCL_H

static const ddp_nccl_api_t *api_of(ddp_sys_t *sys)
{
    const ddp_nccl_api_t *a = NULL;
    CU_ASSERT_EQUAL(ddp_sys_nccl_api(sys, &a), 0);
    return a;
}

/* ------------------------------------------------ interface rules */

typedef struct ifrow {
    const char *ifname, *family; /* NULL: unset */
    const char *addr;            /* the root's address; NULL: no interface */
} ifrow_t;

typedef struct ifrun {
    const ifrow_t *row;
    ncclResult_t res;
    int has_addr, has_other;
    char err[300];
} ifrun_t;

static int ifname_main(ddp_sys_t *sys, void *arg)
{
    ifrun_t *r = arg;
    ddp_env_t *env = ddp_sys_env(sys);
    if (r->row->ifname)
        ddp_env_set(env, "NCCL_SOCKET_IFNAME", r->row->ifname);
    if (r->row->family)
        ddp_env_set(env, "NCCL_SOCKET_FAMILY", r->row->family);
    const ddp_nccl_api_t *a = api_of(sys);
    if (!a)
        return 1;
    ncclUniqueId uid;
    memset(&uid, 0, sizeof uid);
    r->res = a->get_unique_id(&uid);
    static const unsigned char eth[4] = {10, 0, 0, 1}, lo[4] = {127, 0, 0, 1};
    const unsigned char *want = r->row->addr && !strcmp(r->row->addr, "lo") ? lo : eth;
    const unsigned char *other = want == lo ? eth : lo;
    r->has_addr = memmem(&uid, sizeof uid, want, 4) != NULL;
    r->has_other = memmem(&uid, sizeof uid, other, 4) != NULL;
    snprintf(r->err, sizeof r->err, "%s", a->last_error(NULL));
    /* The root waits for ranks that never come: a rank of one ends it. */
    if (r->res == ncclSuccess) {
        ncclComm_t c = NULL;
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 0;
        a->init_rank_config(&c, 1, uid, 0, &cfg);
        ncclResult_t st = ncclInProgress;
        while (c && a->get_async_error(c, &st) == ncclSuccess && st == ncclInProgress)
            ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, MS));
        a->comm_destroy(c);
    }
    return 0;
}

static void test_ifname_rules(void)
{
    static const ifrow_t rows[] = {
        {NULL, NULL, "eth"},          /* NCCL's default: not lo */
        {"eth", NULL, "eth"},         /* a prefix */
        {"eth0", NULL, "eth"},
        {"=eth0", NULL, "eth"},       /* exact */
        {"=eth", NULL, NULL},         /* exact: no interface is named "eth" */
        {"^lo", NULL, "eth"},         /* anything but lo */
        {"lo", NULL, "lo"},
        {"^eth", NULL, "lo"},
        {"^=eth0", NULL, "lo"},
        {"ib0", NULL, NULL},          /* pytorch #68893, nccl #529 / #210 */
        {"ib,eth", NULL, "eth"},      /* a list: any entry */
        {"^eth,lo", NULL, NULL},
        {"docker0,lo", NULL, "lo"},
        {NULL, "AF_INET", "eth"},
        {"eth", "AF_INET6", NULL},    /* eth0 has IPv4 only (lo has ::1) */
        {"eth0:1234", NULL, "eth"},   /* a port after the name is ignored */
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        ifrun_t r = {.row = &rows[i]};
        ddp_sim_opts_t so = {.seed = 5, .gpus = 1};
        ddp_sim_t *sim = ddp_behave_sim(&so, 1);
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "rank0", .rank = 0},
                         ifname_main, &r);
        CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
        int ok = rows[i].addr ? r.res == ncclSuccess && r.has_addr && !r.has_other
                              : r.res == ncclInvalidUsage &&
                                    strstr(r.err, "Bootstrap : no socket interface found") &&
                                    strstr(r.err, "eth0 10.0.0.1") &&
                                    strstr(r.err, "lo 127.0.0.1");
        if (!rows[i].addr && rows[i].ifname) {
            char want[64];
            snprintf(want, sizeof want, "NCCL_SOCKET_IFNAME=%s", rows[i].ifname);
            ok = ok && strstr(r.err, want);
        }
        if (!ok)
            printf("\n  NCCL_SOCKET_IFNAME=%s NCCL_SOCKET_FAMILY=%s: result %d, %s (%s)\n",
                   rows[i].ifname ? rows[i].ifname : "(unset)",
                   rows[i].family ? rows[i].family : "(unset)", (int)r.res,
                   r.has_addr ? "the id has the address" : "the id lacks the address", r.err);
        CU_ASSERT(ok);
        CU_ASSERT_EQUAL(ddp_behave_leaked(sim, NULL, 0), 0);
        ddp_sim_free(sim);
    }
}

/* ------------------------------------------------ bootstrap */

#define W 3

typedef struct boot {
    ncclUniqueId uid;
    int uid_ready;
    int64_t give_up_ns; /* a rank aborts its init this long after it began */
    int coll;           /* after init: an allreduce; rank `aborter` aborts instead */
    int aborter;
    int late;        /* this rank (0: none) starts its init late_ns late */
    int64_t late_ns;
    ncclResult_t init[W], coll_res[W];
    char err[W][512]; /* ncclGetLastError after its init */
    int count[W], me[W], aborted[W];
    int32_t sum[W];
} boot_t;

static int boot_main(ddp_sys_t *sys, void *arg)
{
    ddp_behave_task_t *t = arg;
    boot_t *b = t->run;
    int r = t->rank;
    const ddp_nccl_api_t *a = api_of(sys);
    if (!a)
        return 1;
    a->set_device(0);
    if (r == 0) {
        CU_ASSERT_EQUAL(a->get_unique_id(&b->uid), ncclSuccess);
        b->uid_ready = 1;
    }
    while (!b->uid_ready) /* the store's part, by hand */
        ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, MS));
    if (r == b->late && r)
        ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, b->late_ns));
    ncclComm_t c = NULL;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    CU_ASSERT_EQUAL(a->init_rank_config(&c, W, b->uid, r, &cfg), ncclInProgress);
    int64_t give_up = ddp_sys_now(sys) + b->give_up_ns;
    ncclResult_t st = ncclInProgress;
    while (a->get_async_error(c, &st) == ncclSuccess && st == ncclInProgress &&
           ddp_sys_now(sys) < give_up)
        if (ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 10 * MS)) != 0)
            return 1; /* a fault crashed this rank */
    b->init[r] = st;
    snprintf(b->err[r], sizeof b->err[r], "%s", a->last_error(NULL));
    if (st == ncclInProgress) {
        CU_ASSERT_EQUAL(a->comm_abort(c), ncclSuccess);
        b->aborted[r] = 1;
        return 0;
    }
    a->comm_count(c, &b->count[r]);
    a->comm_user_rank(c, &b->me[r]);
    if (st == ncclSuccess && b->coll && r == b->aborter) {
        a->comm_abort(c);
        b->aborted[r] = 1;
        return 0;
    }
    if (st == ncclSuccess && b->coll) {
        cudaStream_t s;
        a->stream_create(&s);
        int32_t *d = NULL;
        a->cuda_malloc((void **)&d, sizeof *d);
        *d = r + 1;
        b->coll_res[r] = a->allreduce(d, d, 1, ncclInt32, ncclSum, c, s);
        ncclResult_t cs = ncclSuccess;
        while (a->get_async_error(c, &cs) == ncclSuccess && cs == ncclSuccess &&
               a->stream_query(s) == cudaErrorNotReady)
            ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, MS));
        if (cs != ncclSuccess)
            b->coll_res[r] = cs;
        b->sum[r] = *d;
        a->stream_destroy(s);
        a->cuda_free(d);
    }
    a->comm_destroy(c);
    return 0;
}

static ddp_sim_t *boot_sim(boot_t *b, ddp_behave_task_t *args)
{
    ddp_sim_opts_t so = {.seed = 9, .gpus = 2};
    ddp_sim_t *sim = ddp_behave_sim(&so, 2);
    for (int i = 0; i < W; i++) {
        char name[16];
        snprintf(name, sizeof name, "rank%d", i);
        args[i] = (ddp_behave_task_t){.run = b, .rank = i};
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = i * 2 / W, .name = name, .rank = i},
                         boot_main, &args[i]);
    }
    return sim;
}

static void end_sim(ddp_sim_t *sim)
{
    char who[64] = "";
    CU_ASSERT_EQUAL(ddp_behave_leaked(sim, who, sizeof who), 0);
    if (who[0])
        printf("\n  leaked sockets: %s\n", who);
    ddp_sim_free(sim);
}

static void test_bootstrap_ok(void)
{
    boot_t b = {.give_up_ns = 60 * S};
    ddp_behave_task_t args[W];
    ddp_sim_t *sim = boot_sim(&b, args);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    for (int r = 0; r < W; r++) {
        CU_ASSERT_EQUAL(b.init[r], ncclSuccess);
        CU_ASSERT_EQUAL(b.count[r], W);
        CU_ASSERT_EQUAL(b.me[r], r);
        CU_ASSERT_EQUAL(b.aborted[r], 0);
    }
    end_sim(sim);
}

/* Node 1 (rank 2) cut off from the start: nobody's ring can form. */
static void test_bootstrap_partition(void)
{
    for (int heal = 0; heal < 2; heal++) {
        boot_t b = {.give_up_ns = 20 * S};
        ddp_behave_task_t args[W];
        ddp_sim_t *sim = boot_sim(&b, args);
        CU_ASSERT_FATAL(ddp_sim_add_fault(sim, &(ddp_fault_t){
                                                   .kind = DDP_FAULT_PARTITION,
                                                   .node_set = 1u << 1,
                                                   .end_ns = heal ? 3 * S : 0}) >= 0);
        CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
        for (int r = 0; r < W; r++) {
            /* Healed: the retried connects get through; else no rank may
             * report a communicator, and each is aborted. */
            CU_ASSERT_EQUAL(b.init[r], heal ? ncclSuccess : ncclInProgress);
            CU_ASSERT_EQUAL(b.aborted[r], !heal);
        }
        end_sim(sim);
    }
}

/* Rank 2 (node 1) reaches the root, then its process dies while rank 1
 * is still on its way: the root reads the closed connection and rank 0's
 * init fails at once with ncclRemoteError, naming rank 2, its address and
 * interface in NCCL's words, instead of waiting for its deadline. */
static void test_bootstrap_peer_gone(void)
{
    boot_t b = {.give_up_ns = 20 * S, .late = 1, .late_ns = 5 * S};
    ddp_behave_task_t args[W];
    ddp_sim_t *sim = boot_sim(&b, args);
    int first = ddp_sim_task_count(sim) - W;
    CU_ASSERT_FATAL(ddp_sim_add_fault(sim, &(ddp_fault_t){.kind = DDP_FAULT_CRASH, .node = -1,
                                                          .peer_node = -1, .task = first + 2,
                                                          .start_ns = S}) >= 0);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, first + 2)->state, DDP_SIM_TASK_CRASHED);
    CU_ASSERT_EQUAL(b.init[0], ncclRemoteError);
    CU_ASSERT_EQUAL(b.aborted[0], 0); /* it did not wait for its give-up */
    static const char *const want[] = {
        "Bootstrap : rank 2 at 10.0.1.1:", "(its interface eth0) closed its connection to the root",
        "Connection closed by remote peer 10.0.1.1",
        "remote process exited or there was a network error", "this is rank 0 of 3"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(b.err[0], want[i])) {
            printf("\n  rank 0's last NCCL error \"%s\" lacks \"%s\"\n", b.err[0], want[i]);
            CU_FAIL("rank 0's last error does not name the rank that went");
        }
    CU_ASSERT_NOT_EQUAL(b.init[1], ncclSuccess); /* late: the root is gone */
    end_sim(sim);
}

/* Rank 1 aborts its communicator instead of joining the allreduce: its
 * neighbours' collective fails with an async error, never a sum. */
static void test_abort_async_error(void)
{
    boot_t b = {.give_up_ns = 60 * S, .coll = 1, .aborter = 1};
    ddp_behave_task_t args[W];
    ddp_sim_t *sim = boot_sim(&b, args);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(b.aborted[1], 1);
    for (int r = 0; r < W; r++) {
        CU_ASSERT_EQUAL(b.init[r], ncclSuccess);
        if (r != 1) {
            CU_ASSERT_EQUAL(b.coll_res[r], ncclRemoteError);
        }
    }
    end_sim(sim);
}

/* The same with every rank joining: the sum. */
static void test_allreduce_direct(void)
{
    boot_t b = {.give_up_ns = 60 * S, .coll = 1, .aborter = -1};
    ddp_behave_task_t args[W];
    ddp_sim_t *sim = boot_sim(&b, args);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    for (int r = 0; r < W; r++) {
        CU_ASSERT_EQUAL(b.coll_res[r], ncclSuccess);
        CU_ASSERT_EQUAL(b.sum[r], 1 + 2 + 3);
    }
    end_sim(sim);
}

/* ------------------------------------------------ through the backend */

#define BW 4
#define N 3000 /* elements: more than one ring chunk */

typedef struct brun {
    atomic_int done;
    int rc[BW];
    int ok_sum[BW], ok_bcast[BW], ok_gather[BW];
    char msg[BW][300];
} brun_t;

static int serve_main(ddp_sys_t *sys, void *arg)
{
    brun_t *r = arg;
    (void)ddp_behave_serve(sys, 29500, &r->done, BW, 120 * S);
    return 0;
}

static int pg_main(ddp_sys_t *sys, void *arg)
{
    ddp_behave_task_t *t = arg;
    brun_t *r = t->run;
    int me = t->rank, rc = 0;
    int64_t dl = ddp_sys_deadline_in(sys, 60 * S);
    ddp_store_t *st = ddp_behave_client(sys, 3 + (uint64_t)me, 10 * S, &rc);
    ddp_pg_t *pg = NULL;
    if (st) {
        ddp_pg_init_t in = {.sys = sys, .store = st, .prefix = "snccl", .rank = me,
                            .world = BW, .deadline = dl, .device = me % 2};
        rc = ddp_pg_new("nccl", &in, &pg);
    }
    int32_t *v = calloc(N, sizeof *v), *all = calloc((size_t)N * BW, sizeof *all);
    if (rc == 0 && v && all) {
        for (int i = 0; i < N; i++)
            v[i] = me * 1000 + i;
        rc = ddp_pg_allreduce(pg, v, N, DDP_INT32, DDP_SUM, dl);
        int ok = rc == 0;
        for (int i = 0; ok && i < N; i++)
            ok = v[i] == 6000 + 4 * i; /* (0+1+2+3)*1000 + 4i */
        r->ok_sum[me] = ok;
        for (int i = 0; i < N; i++)
            v[i] = me == 2 ? 7 * i : -1;
        if (rc == 0)
            rc = ddp_pg_broadcast(pg, v, N * sizeof *v, 2, dl);
        ok = rc == 0;
        for (int i = 0; ok && i < N; i++)
            ok = v[i] == 7 * i;
        r->ok_bcast[me] = ok;
        for (int i = 0; i < N; i++)
            v[i] = me * 100000 + i;
        if (rc == 0)
            rc = ddp_pg_allgather(pg, v, N * sizeof *v, all, dl);
        ok = rc == 0;
        for (int k = 0; ok && k < BW; k++)
            for (int i = 0; ok && i < N; i++)
                ok = all[k * N + i] == k * 100000 + i;
        r->ok_gather[me] = ok;
    }
    free(v);
    free(all);
    r->rc[me] = rc;
    snprintf(r->msg[me], sizeof r->msg[me], "%s", rc ? ddp_err_message() : "");
    ddp_pg_destroy(pg);
    ddp_store_free(st);
    atomic_fetch_add(&r->done, 1);
    return rc ? 1 : 0;
}

static void test_backend_collectives(void)
{
    brun_t r = {0};
    ddp_behave_task_t args[BW];
    ddp_sim_opts_t so = {.seed = 21, .gpus = 2};
    ddp_sim_t *sim = ddp_behave_sim(&so, 2);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "store", .rank = -1},
                     serve_main, &r);
    for (int i = 0; i < BW; i++) {
        char name[16];
        snprintf(name, sizeof name, "rank%d", i);
        args[i] = (ddp_behave_task_t){.run = &r, .rank = i};
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = i / 2, .name = name, .rank = i},
                         pg_main, &args[i]);
    }
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    for (int i = 0; i < BW; i++) {
        if (r.rc[i])
            printf("\n  rank %d: %s\n", i, r.msg[i]);
        CU_ASSERT_EQUAL(r.rc[i], 0);
        CU_ASSERT(r.ok_sum[i]);
        CU_ASSERT(r.ok_bcast[i]);
        CU_ASSERT(r.ok_gather[i]);
    }
    end_sim(sim);
}

/* No `gpus`: the simulated CUDA has no device, and the backend says so
 * before it touches the store. */
static int nogpu_main(ddp_sys_t *sys, void *arg)
{
    char *msg = arg;
    ddp_pg_t *pg = NULL;
    ddp_store_t *st = ddp_store_memory_new(sys);
    ddp_pg_init_t in = {.sys = sys, .store = st, .prefix = "x", .rank = 0, .world = 1,
                        .deadline = ddp_sys_deadline_in(sys, S), .device = 0};
    int rc = ddp_pg_new("nccl", &in, &pg);
    snprintf(msg, 300, "%s", ddp_err_message());
    ddp_store_free(st);
    return rc == DDP_ENOT_FOUND ? 0 : 1;
}

static void test_no_gpus(void)
{
    char msg[300] = "";
    ddp_sim_t *sim = ddp_behave_sim(&(ddp_sim_opts_t){.seed = 1}, 1);
    int t = ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "rank0", .rank = 0},
                             nogpu_main, msg);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, t)->rc, 0);
    if (!strstr(msg, "no CUDA device visible"))
        printf("\n  %s\n", msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "no CUDA device visible"));
    ddp_sim_free(sim);
}

#else

static void not_built(void) { ddp_test_skip("no nccl.h at build time: no simulated NCCL"); }
#define test_ifname_rules not_built
#define test_bootstrap_ok not_built
#define test_bootstrap_partition not_built
#define test_abort_async_error not_built
#define test_allreduce_direct not_built
#define test_backend_collectives not_built
#define test_no_gpus not_built

#endif

DDP_SUITE("sim_nccl", NULL, NULL,
          {"interface rules: NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY", test_ifname_rules},
          {"bootstrap: root gather and ring, then destroy", test_bootstrap_ok},
          {"bootstrap under a partition: heals or is aborted", test_bootstrap_partition},
          {"a peer's abort is an async error of the collective", test_abort_async_error},
          {"bootstrap: a rank that came and went fails the root's ranks at once, named",
           test_bootstrap_peer_gone},
          {"allreduce over the ring", test_allreduce_direct},
          {"through the backend: allreduce, broadcast, allgather", test_backend_collectives},
          {"no gpus: no CUDA device visible", test_no_gpus});
