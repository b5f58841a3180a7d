/* tests/test_behave_nccl.c — the nccl backend's control flow without a
 * GPU, against the FAKE libnccl/libcudart pair of tests/fake_nccl/ (issue
 * 16, "The nccl backend without a GPU"). `make hw-test` on a GPU stays the
 * real check; tests/test_pg_nccl.c checks what this machine really has.
 *
 * The backend loads libnccl.so.2 and libcudart.so.13 once per process, by
 * name. So every test here runs in a process of its own: called from the
 * suite, a test starts this program again on itself alone, with
 * LD_LIBRARY_PATH beginning with the fakes' directory (DDP_FAKE_NCCL_DIR,
 * set by `make test`), and asserts that that child passed; the child first
 * makes sure it loaded the fakes, then runs the body. Outside `make test`,
 * or where the backend is not built (no nccl.h), the tests are skipped
 * (ddp_test_skip): there is nothing of the backend to run.
 *
 * What is pinned: the unique id goes through the store under
 * "<prefix>/nccl/uid" and a rank waits for it until its group deadline;
 * init is non-blocking and polled, and a communicator that does not form
 * by the deadline is aborted; a communicator error aborts the group, whose
 * later calls fail at once; split orders by (key, rank); every
 * communicator, device buffer and stream is released at teardown, through
 * finalize; the device is the local rank; every GPU accelerator connects
 * through the plugin on nccl.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fiu-control.h>
#include <fiu.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/pg.h"
#include "ddp/plan.h"
#include "ddp/scenario.h"
#include "ddp/sim.h"
#include "ddp/store.h"
#include "ddp/sys.h"
#include "behave.h"
#include "fake_nccl/fake.h"
#include "test.h"

#define S DDP_NS_PER_S
#define MS DDP_NS_PER_MS
#define CHILD_VAR "DDP_TEST_FAKE_NCCL_CHILD"

/* The fakes are the process's libnccl: the simulator hands those to the
 * backend, not its own simulated NCCL (sim/sim_nccl.c, tests/test_sim_nccl.c). */
static const ddp_sim_opts_t g_host_nccl = {.host_nccl = 1};

static fake_nccl_state_t *g_nccl;
static fake_cudart_state_t *g_cuda;

/* ------------------------------------------------ child or parent */

static int env_has(const char *key, char *val, size_t n)
{
    ddp_sys_t *sys = ddp_sys_posix_new(NULL);
    const char *v = sys ? ddp_env_get(ddp_sys_env(sys), key) : NULL;
    if (v && val)
        snprintf(val, n, "%s", v);
    ddp_sys_free(sys);
    return v != NULL;
}

static int in_child(void) { return env_has(CHILD_VAR, NULL, 0); }

/* In the parent: runs this test in a child with the fakes; returns 1. In
 * the child: returns 0 (run the body), after checking the fakes are the
 * ones loaded. */
static int delegated(void)
{
#ifndef DDP_HAVE_NCCL_H
    ddp_test_skip("the nccl backend is not built (no nccl.h at build time)");
    return 1;
#else
    if (in_child())
        return 0;
    char dir[512];
    if (!env_has("DDP_FAKE_NCCL_DIR", dir, sizeof dir)) {
        ddp_test_skip("no DDP_FAKE_NCCL_DIR (the fake libnccl's folder, set by `make test`)");
        return 1;
    }
    char sel[256], env[700], out[16384];
    snprintf(sel, sizeof sel, "%s/%s", CU_get_current_suite()->pName,
             CU_get_current_test()->pName);
    snprintf(env, sizeof env, "LD_LIBRARY_PATH='%s' %s=1", dir, CHILD_VAR);
    int rc = ddp_test_run_self(env, sel, out, sizeof out);
    if (rc != 0)
        printf("\n  in a child with the fake libnccl (exit %d):\n%s\n", rc, out);
    CU_ASSERT_EQUAL(rc, 0);
    return 1;
#endif
}

static int suite_init(void)
{
    fiu_init(0);
    if (in_child()) {
        /* Loaded here first, by the names the backend asks for: its own
         * dlopen then gets these very objects. */
        void *n = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
        void *c = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
        fake_nccl_state_t *(*ns)(void) = NULL;
        fake_cudart_state_t *(*cs)(void) = NULL;
        void *a = n ? dlsym(n, "fake_nccl_state") : NULL;
        void *b = c ? dlsym(c, "fake_cudart_state") : NULL;
        if (!a || !b) {
            fprintf(stderr, "libnccl.so.2 / libcudart.so.13 are not the fakes of "
                            "tests/fake_nccl (LD_LIBRARY_PATH?)\n");
            return -1;
        }
        memcpy(&ns, &a, sizeof a);
        memcpy(&cs, &b, sizeof b);
        g_nccl = ns();
        g_cuda = cs();
    }
    return ddp_behave_suite_init();
}

/* ----------------------------------------------- ranks on the pg API */

/* A store server on node 0 and `world` rank tasks (rank r on node r % 2),
 * each with a store client, forming the nccl group "g" and running body()
 * on it; `absent` ranks never start. */
typedef struct pgrun pgrun_t;
/* Runs on a rank whose group "g" (device rank / 2) formed; NULL: init only. */
typedef int (*body_fn)(pgrun_t *r, ddp_sys_t *sys, ddp_pg_t *pg, int64_t deadline);

struct pgrun {
    int world;
    int64_t timeout_ns;
    body_fn body;
    unsigned absent; /* bit r: rank r is not started */
    atomic_int done;
    int rc[16];
    char msg[16][700];
    int64_t end[16]; /* virtual, from the run's start */
    /* what bodies leave for the checks */
    int sub_rank[16], sub_world[16];
    int64_t value[16];
};

static int pg_server(ddp_sys_t *sys, void *arg)
{
    pgrun_t *r = arg;
    return ddp_behave_serve(sys, 29500, &r->done, r->world - __builtin_popcount(r->absent),
                            r->timeout_ns + 10 * S) != 0;
}

static int pg_rank(ddp_sys_t *sys, void *arg)
{
    ddp_behave_task_t *a = arg;
    pgrun_t *r = a->run;
    int rank = a->rank;
    int64_t t0 = ddp_sys_now(sys) - MS; /* the run's time 0: tasks start 1 ms in */
    int rc = 0;
    ddp_store_t *st = ddp_behave_client(sys, 1 + (uint64_t)rank, 10 * S, &rc);
    if (st) {
        ddp_pg_init_t in = {.sys = sys, .store = st, .prefix = "g", .rank = rank,
                            .world = r->world, .device = rank / 2,
                            .deadline = ddp_sys_deadline_in(sys, r->timeout_ns)};
        ddp_pg_t *pg = NULL;
        rc = ddp_pg_new("nccl", &in, &pg);
        if (rc == 0 && r->body)
            rc = r->body(r, sys, pg, in.deadline);
        char msg[sizeof r->msg[0]];
        snprintf(msg, sizeof msg, "%s", rc ? ddp_err_message() : "");
        if (pg)
            ddp_pg_destroy(pg);
        snprintf(r->msg[rank], sizeof r->msg[0], "%s", msg);
    } else {
        snprintf(r->msg[rank], sizeof r->msg[0], "%s", ddp_err_message());
    }
    r->rc[rank] = rc;
    r->end[rank] = ddp_sys_now(sys) - t0;
    ddp_store_free(st);
    atomic_fetch_add(&r->done, 1);
    return rc ? 1 : 0;
}

static void pg_run(pgrun_t *r)
{
    ddp_sim_opts_t so = {.seed = 3, .host_nccl = 1};
    ddp_sim_t *sim = ddp_behave_sim(&so, 2);
    ddp_sim_task_opts_t srv = {.node = 0, .name = "store", .rank = -1};
    ddp_sim_add_task(sim, &srv, pg_server, r);
    ddp_behave_task_t args[16];
    for (int k = 0; k < r->world; k++) {
        if (r->absent & (1u << k))
            continue;
        char name[16];
        snprintf(name, sizeof name, "rank%d", k);
        args[k] = (ddp_behave_task_t){.run = r, .rank = k};
        ddp_sim_task_opts_t to = {.node = k % 2, .name = name, .rank = k, .start_ns = MS};
        ddp_sim_add_task(sim, &to, pg_rank, &args[k]);
    }
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(ddp_behave_leaked(sim, NULL, 0), 0);
    ddp_sim_free(sim);
}

/* Everything the fakes handed out was given back. */
static void check_released(const char *what)
{
    int bad = g_nccl->live_comms || g_nccl->live_cliques || g_cuda->live_allocs ||
              g_cuda->live_streams;
    if (bad)
        printf("\n  %s: %d communicator(s), %d clique(s), %d device buffer(s), %d "
               "stream(s) left\n",
               what, g_nccl->live_comms, g_nccl->live_cliques, g_cuda->live_allocs,
               g_cuda->live_streams);
    CU_ASSERT_FALSE(bad);
}

static void check_msg(const char *who, const char *msg, const char *const *facts, int n)
{
    for (int i = 0; i < n && facts[i]; i++) {
        if (!strstr(msg, facts[i]))
            printf("\n  %s: expected \"%s\" in: %s\n", who, facts[i], msg);
        CU_ASSERT_PTR_NOT_NULL(strstr(msg, facts[i]));
    }
}

/* ------------------------------------------------------------ bodies */

/* init, every collective with values only a real exchange gives, destroy. */
static int body_collectives(pgrun_t *r, ddp_sys_t *sys, ddp_pg_t *pg, int64_t dl)
{
    (void)sys;
    int rank = ddp_pg_rank(pg), rc;
    int64_t v = rank + 1;
    char b[8] = "";
    if (rank == 2)
        snprintf(b, sizeof b, "root2");
    int32_t mine = 100 + rank, all[4] = {0};
    if ((rc = ddp_pg_allreduce(pg, &v, 1, DDP_INT64, DDP_SUM, dl)) == 0 &&
        (rc = ddp_pg_broadcast(pg, b, sizeof b, 2, dl)) == 0 &&
        (rc = ddp_pg_allgather(pg, &mine, sizeof mine, all, dl)) == 0)
        rc = ddp_pg_barrier(pg, dl);
    r->value[rank] = v;
    r->sub_rank[rank] = strcmp(b, "root2") == 0;
    for (int k = 0; k < 4; k++)
        r->sub_world[rank] += all[k] == 100 + k;
    return rc;
}

static void test_collectives_and_teardown(void)
{
    if (delegated())
        return;
    pgrun_t r = {.world = 4, .timeout_ns = 30 * S, .body = body_collectives};
    pg_run(&r);
    for (int k = 0; k < 4; k++) {
        if (r.rc[k])
            printf("\n  rank %d: %s\n", k, r.msg[k]);
        CU_ASSERT_EQUAL(r.rc[k], 0);
        CU_ASSERT_EQUAL(r.value[k], 1 + 2 + 3 + 4);
        CU_ASSERT_EQUAL(r.sub_rank[k], 1);  /* rank 2's bytes everywhere */
        CU_ASSERT_EQUAL(r.sub_world[k], 4); /* every rank's block in place */
    }
    /* One id, made by rank 0 only, four non-blocking inits, each on its
     * own device (the group's device argument), polled until ready. */
    CU_ASSERT_EQUAL(g_nccl->unique_ids, 1);
    CU_ASSERT_EQUAL(g_nccl->cliques, 1);
    CU_ASSERT_EQUAL(g_nccl->inits, 4);
    CU_ASSERT_EQUAL(g_nccl->inits_blocking, 0);
    CU_ASSERT(g_nccl->polls > 4);
    for (int i = 0; i < g_nccl->ninit; i++) {
        CU_ASSERT_EQUAL(g_nccl->init[i].nranks, 4);
        CU_ASSERT_EQUAL(g_nccl->init[i].device, g_nccl->init[i].rank / 2);
    }
    /* allreduce, broadcast, allgather, barrier (an allreduce) */
    CU_ASSERT_EQUAL(g_nccl->collectives, 4);
    /* Teardown: finalized, then destroyed; nothing aborted, nothing left. */
    CU_ASSERT_EQUAL(g_nccl->finalizes, 4);
    CU_ASSERT_EQUAL(g_nccl->destroys, 4);
    CU_ASSERT_EQUAL(g_nccl->destroyed_unfinalized, 0);
    CU_ASSERT_EQUAL(g_nccl->aborts, 0);
    check_released("after destroy");
}

/* Rank 0 never starts: the others wait for the id until the group deadline
 * (20 s), not the store's timeout, and name the key. */
#define body_init_only NULL

static void test_uid_waits_group_deadline(void)
{
    if (delegated())
        return;
    pgrun_t r = {.world = 3, .timeout_ns = 20 * S, .body = body_init_only, .absent = 1};
    pg_run(&r);
    for (int k = 1; k < 3; k++) {
        CU_ASSERT_EQUAL(r.rc[k], DDP_ETIMEOUT);
        static const char *const facts[] = {"unique id exchange",
                                            "no NCCL unique id under key \"g/nccl/uid\"",
                                            "after 20.0 s", "group deadline"};
        check_msg("rank waiting for the id", r.msg[k], facts, 4);
        /* started 1 ms in, gave up 20 s later */
        CU_ASSERT(r.end[k] >= 20 * S + MS && r.end[k] <= 20 * S + 50 * MS);
    }
    /* Nothing reached NCCL: the id never came. */
    CU_ASSERT_EQUAL(g_nccl->inits, 0);
    check_released("after the id wait");
}

/* Rank 2 never starts: 0 and 1 have the id and init, which stays in
 * progress; they poll it (never block) until the deadline, then abort. */
static void test_init_polls_then_aborts(void)
{
    if (delegated())
        return;
    pgrun_t r = {.world = 3, .timeout_ns = 5 * S, .body = body_init_only, .absent = 1u << 2};
    pg_run(&r);
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_EQUAL(r.rc[k], DDP_ETIMEOUT);
        static const char *const facts[] = {"NCCL communicator init did not complete after",
                                            "the communicator was aborted",
                                            "every rank must reach NCCL init"};
        check_msg("rank in init", r.msg[k], facts, 3);
        CU_ASSERT(r.end[k] >= 5 * S + MS && r.end[k] <= 5 * S + 50 * MS);
    }
    CU_ASSERT_EQUAL(g_nccl->inits, 2);
    CU_ASSERT_EQUAL(g_nccl->inits_blocking, 0);
    /* Polling with naps of at most 1 ms for 5 s: thousands of polls. */
    CU_ASSERT(g_nccl->polls > 2 * 1000);
    CU_ASSERT_EQUAL(g_nccl->aborts, 2);
    CU_ASSERT_EQUAL(g_nccl->destroys, 0);
    check_released("after the aborted init");
}

/* Rank 1's communicator fails during the first collective: rank 1 aborts
 * at once; rank 0's collective then never completes and is aborted at the
 * deadline; afterwards both groups fail fast. */
static int body_fault(pgrun_t *r, ddp_sys_t *sys, ddp_pg_t *pg, int64_t dl)
{
    int64_t v = 1;
    int rc = ddp_pg_allreduce(pg, &v, 1, DDP_INT64, DDP_SUM, dl);
    ddp_errctx_t first = *ddp_err_ctx();
    int64_t t = ddp_sys_now(sys);
    int again = ddp_pg_barrier(pg, dl);
    r->value[ddp_pg_rank(pg)] = again == DDP_ECANCELED && ddp_sys_now(sys) == t;
    *ddp_err_ctx() = first;
    return rc;
}

static void test_fault_aborts(void)
{
    if (delegated())
        return;
    g_nccl->error_rank = 1;
    g_nccl->error_after = 1;
    pgrun_t r = {.world = 2, .timeout_ns = 8 * S, .body = body_fault};
    pg_run(&r);
    CU_ASSERT_EQUAL(r.rc[1], DDP_EPEER_LOST);
    static const char *const f1[] = {"rank 1 of 2 (group \"g\"), allreduce",
                                     "NCCL error 6", "remote process exited"};
    check_msg("rank 1", r.msg[1], f1, 3);
    CU_ASSERT(r.end[1] < S); /* at once, not at the deadline */
    CU_ASSERT_EQUAL(r.rc[0], DDP_ETIMEOUT);
    static const char *const f0[] = {"allreduce of 8 bytes did not complete after",
                                     "the communicator was aborted"};
    check_msg("rank 0", r.msg[0], f0, 2);
    CU_ASSERT(r.end[0] >= 8 * S && r.end[0] <= 8 * S + 50 * MS);
    CU_ASSERT_EQUAL(r.value[0], 1); /* later calls: canceled, at once */
    CU_ASSERT_EQUAL(r.value[1], 1);
    CU_ASSERT_EQUAL(g_nccl->aborts, 2);
    check_released("after the abort");
}

/* pg/nccl/init without failinfo on rank 0: its communicator exists (so the
 * others' form) but it never takes it as ready, and aborts it at its
 * deadline; with failinfo it fails at once without joining. */
static int rank0_cb(const char *name, int *failnum, void **failinfo, unsigned int *flags)
{
    (void)name, (void)failnum, (void)flags;
    *failinfo = NULL;
    return ddp_ident_rank() == 0;
}

static void test_init_fault_point(void)
{
    if (delegated())
        return;
    ddp_fault_enable_external("pg/nccl/init", 1, NULL, 0, rank0_cb);
    pgrun_t r = {.world = 2, .timeout_ns = 4 * S, .body = body_init_only};
    pg_run(&r);
    ddp_fault_disable("pg/nccl/init");
    CU_ASSERT_EQUAL(r.rc[0], DDP_ETIMEOUT);
    static const char *const f0[] = {"rank 0 of 2", "NCCL communicator init did not complete",
                                     "the communicator was aborted"};
    check_msg("rank 0", r.msg[0], f0, 3);
    CU_ASSERT(r.end[0] >= 4 * S && r.end[0] <= 4 * S + 50 * MS);
    CU_ASSERT_EQUAL(r.rc[1], 0); /* its communicator formed */
    CU_ASSERT_EQUAL(g_nccl->aborts, 1);
    check_released("after the stalled init");
}

/* Split: colour = rank % 2, key = 3 - rank, so each subgroup is ordered by
 * falling rank; a no-colour split joins nothing. */
static int body_split(pgrun_t *r, ddp_sys_t *sys, ddp_pg_t *pg, int64_t dl)
{
    (void)sys;
    int rank = ddp_pg_rank(pg);
    ddp_pg_t *sub = NULL, *none = pg;
    int rc = ddp_pg_split(pg, rank % 2, 3 - rank, "half", &sub, dl);
    if (rc == 0)
        rc = ddp_pg_split(pg, DDP_PG_NO_COLOR, 0, "none", &none, dl);
    int64_t v = rank + 1;
    if (rc == 0 && sub)
        rc = ddp_pg_allreduce(sub, &v, 1, DDP_INT64, DDP_SUM, dl);
    if (rc == 0 && sub && strcmp(sub->prefix, "g/half"))
        rc = ddp_err_set(DDP_EPROTOCOL, "subgroup prefix %s", sub->prefix);
    if (rc == 0 && none)
        rc = ddp_err_set(DDP_EPROTOCOL, "a no-colour split made a group");
    r->sub_rank[rank] = sub ? ddp_pg_rank(sub) : -1;
    r->sub_world[rank] = sub ? ddp_pg_world(sub) : -1;
    r->value[rank] = v;
    if (sub)
        ddp_pg_destroy(sub);
    return rc;
}

static void test_split(void)
{
    if (delegated())
        return;
    pgrun_t r = {.world = 4, .timeout_ns = 30 * S, .body = body_split};
    pg_run(&r);
    /* colour 0: ranks 2 (key 1), 0 (key 3); colour 1: ranks 3, 1 */
    static const int want_rank[4] = {1, 1, 0, 0};
    static const int64_t want_sum[4] = {1 + 3, 2 + 4, 1 + 3, 2 + 4};
    for (int k = 0; k < 4; k++) {
        if (r.rc[k])
            printf("\n  rank %d: %s\n", k, r.msg[k]);
        CU_ASSERT_EQUAL(r.rc[k], 0);
        CU_ASSERT_EQUAL(r.sub_rank[k], want_rank[k]);
        CU_ASSERT_EQUAL(r.sub_world[k], 2);
        CU_ASSERT_EQUAL(r.value[k], want_sum[k]);
    }
    CU_ASSERT_EQUAL(g_nccl->splits, 8);
    CU_ASSERT_EQUAL(g_nccl->cliques, 3); /* the group and two halves */
    CU_ASSERT_EQUAL(g_nccl->finalizes, 8);
    CU_ASSERT_EQUAL(g_nccl->destroys, 8);
    CU_ASSERT_EQUAL(g_nccl->aborts, 0);
    check_released("after the split groups");
}

/* ---------------------------------------------- through the plugin */

/* Every GPU accelerator on 2 nodes x 2 GPUs: nccl chosen by default, one
 * device per local rank, every rank connected and configured, and at the
 * end every communicator finalized and destroyed. */
static void test_every_gpu_accelerator(void)
{
    if (delegated())
        return;
    static const char *const accels[] = {"ddp", "ddp_spawn", "ddp2", "ddp_hpc"};
    int inits = 0, destroys = 0;
    for (int a = 0; a < 4; a++) {
        int ddp2 = !strcmp(accels[a], "ddp2");
        int world = ddp2 ? 2 : 4;
        ddp_plan_t *plan = NULL;
        ddp_sim_t *sim = ddp_behave_scenario("scenario \"nccl\"\nnodes 2\ndevices 2\ngpus 2\n"
                                      "plugin behave-recorder\ntimeout 60s\n"
                                      "expect ok\n",
                                      accels[a], &g_host_nccl, &plan);
        CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
        int ok = 0;
        for (int t = 0; t < ddp_sim_task_count(sim); t++) {
            const ddp_sim_outcome_t *o = ddp_sim_outcome(sim, t);
            const ddp_behave_rec_t *rec = ddp_behave_rec(t);
            if (o->thread || !rec)
                continue;
            if (o->rc)
                printf("\n  %s, rank %d: %s\n", accels[a], o->rank, o->message);
            ok += o->rc == 0 && o->connect_ns >= 0;
            CU_ASSERT_STRING_EQUAL(rec->backend, "nccl");
        }
        CU_ASSERT_EQUAL(ok, world);
        /* The default group's inits: device = local rank (ddp2: one
         * process per node, its node rank). */
        for (int i = inits; i < g_nccl->ninit; i++) {
            const fake_init_rec_t *in = &g_nccl->init[i];
            CU_ASSERT_EQUAL(in->nranks, world);
            CU_ASSERT_EQUAL(in->blocking, 0);
            CU_ASSERT_EQUAL(in->device, ddp2 ? in->rank : in->rank % 2);
        }
        CU_ASSERT_EQUAL(g_nccl->inits - inits, world);
        CU_ASSERT_EQUAL(g_nccl->destroys - destroys, world);
        inits = g_nccl->inits;
        destroys = g_nccl->destroys;
        CU_ASSERT_EQUAL(g_nccl->aborts, 0);
        CU_ASSERT_EQUAL(g_nccl->destroyed_unfinalized, 0);
        check_released(accels[a]);
        ddp_behave_rec_reset();
        ddp_sim_free(sim);
        ddp_plan_free(plan);
    }
}

/* The subgroups plugin splits the nccl group twice; configure_ddp runs on
 * the data-parallel half; teardown frees all three levels. */
static void test_subgroups_plugin(void)
{
    if (delegated())
        return;
    ddp_plan_t *plan = NULL;
    ddp_sim_t *sim = ddp_behave_scenario("scenario \"nccl subgroups\"\nnodes 2\ndevices 2\ngpus 2\n"
                                  "plugin subgroups\ntimeout 60s\nexpect ok\n",
                                  "ddp_hpc", &g_host_nccl, &plan);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    for (int t = 0; t < ddp_sim_task_count(sim); t++) {
        const ddp_sim_outcome_t *o = ddp_sim_outcome(sim, t);
        if (o->thread)
            continue;
        if (o->rc)
            printf("\n  rank %d: %s\n", o->rank, o->message);
        CU_ASSERT_EQUAL(o->rc, 0);
    }
    CU_ASSERT_EQUAL(g_nccl->splits, 8);
    CU_ASSERT_EQUAL(g_nccl->cliques, 5); /* world, 2 model-, 2 data-parallel */
    CU_ASSERT_EQUAL(g_nccl->destroys, 12);
    check_released("after the subgroups teardown");
    ddp_sim_free(sim);
    ddp_plan_free(plan);
}

/* ---------------------------------------------- what the machine lacks */

static void test_machine_errors(void)
{
    if (delegated())
        return;
    pgrun_t r = {.world = 2, .timeout_ns = 5 * S, .body = body_init_only};
    g_cuda->devices = 0;
    pg_run(&r);
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_EQUAL(r.rc[k], DDP_ENOT_FOUND);
        static const char *const f[] = {"no CUDA device visible (cudaGetDeviceCount "
                                        "returned 0)",
                                        "use the tcp backend"};
        check_msg("no device", r.msg[k], f, 2);
        CU_ASSERT(r.end[k] < S); /* before the store: nobody waits */
    }
    CU_ASSERT_EQUAL(g_nccl->unique_ids, 0);
    /* One device, but rank 2 of a group wants device 1 (LOCAL_RANK). */
    g_cuda->devices = 1;
    pgrun_t r3 = {.world = 3, .timeout_ns = 5 * S, .body = body_init_only};
    pg_run(&r3);
    CU_ASSERT_EQUAL(r3.rc[2], DDP_ECONFIG);
    static const char *const f2[] = {"rank 2 wants CUDA device 1 (LOCAL_RANK) but 1 device "
                                     "is visible",
                                     "run at most 1 rank per node"};
    check_msg("device out of range", r3.msg[2], f2, 2);
    check_released("after the machine errors");
}

/* A libnccl older than 2.14 (no non-blocking init): refused at load. */
static void test_old_nccl(void)
{
    if (delegated())
        return;
    g_nccl->version = 21300;
    pgrun_t r = {.world = 2, .timeout_ns = 5 * S, .body = body_init_only};
    pg_run(&r);
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_EQUAL(r.rc[k], DDP_EUNSUPPORTED);
        static const char *const f[] = {"libnccl.so.2 is NCCL 2.13.0",
                                        "non-blocking init needs 2.14 or newer"};
        check_msg("old nccl", r.msg[k], f, 2);
    }
    CU_ASSERT_EQUAL(g_nccl->inits, 0);
}

DDP_SUITE("behave_nccl", suite_init, ddp_behave_suite_cleanup,
          {"collectives, then finalize and destroy", test_collectives_and_teardown},
          {"unique id: waited for until the group deadline", test_uid_waits_group_deadline},
          {"init: non-blocking, polled, aborted at the deadline", test_init_polls_then_aborts},
          {"a communicator error aborts the group", test_fault_aborts},
          {"pg/nccl/init stalls one rank: aborted at its deadline", test_init_fault_point},
          {"split: by colour, ordered by key", test_split},
          {"every GPU accelerator through the plugin", test_every_gpu_accelerator},
          {"subgroups plugin: nested splits torn down", test_subgroups_plugin},
          {"no device, a device out of range", test_machine_errors},
          {"NCCL older than 2.14", test_old_nccl})
