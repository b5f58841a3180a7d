/* tests/test_store_helpers.c — wait_for_workers and the store-based barrier:
 * on the memory store (ranks as threads), their timeout errors, and 1,000
 * concurrent tcp clients rendezvousing on one server over loopback. */
#include <errno.h>
#include <fiu-control.h>
#include <fiu.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "ddp/err.h"
#include "ddp/log.h"
#include "ddp/store.h"
#include "ddp/sys.h"
#include "test.h"

static ddp_sys_t *g_sys;

static int suite_init(void)
{
    fiu_init(0);
    return ddp_test_suite_sys_init(&g_sys, 1);
}
static int suite_cleanup(void) { return ddp_test_suite_sys_cleanup(&g_sys); }

static int64_t dl(int ms) { return ddp_test_deadline_ms(g_sys, ms); }

/* ---- ranks as threads ---- */

typedef struct rank {
    pthread_t th;
    int rank, world;
    uint16_t port;       /* 0: use st */
    ddp_store_t *st;     /* shared memory store, or own client */
    int64_t deadline;
    int rc;
    char msg[512];
} rank_t;

static void *rank_main(void *arg)
{
    rank_t *r = arg;
    ddp_ident_set_rank(r->rank);
    ddp_store_t *st = r->st;
    if (r->port) {
        ddp_store_client_opts_t o = {.host = "127.0.0.1",
                                     .port = r->port,
                                     .connect_deadline = r->deadline,
                                     .seed = (uint64_t)r->rank + 1,
                                     .backoff_initial_ns =
                                         20 * DDP_NS_PER_MS};
        st = ddp_store_client_connect(g_sys, &o, &r->rc);
    }
    if (st)
        r->rc = ddp_store_wait_for_workers(st, r->rank, r->world, r->deadline);
    if (st && r->rc == 0)
        r->rc = ddp_store_barrier(st, "default_pg", r->world, r->deadline);
    if (r->rc)
        snprintf(r->msg, sizeof r->msg, "%s", ddp_err_message());
    if (r->port)
        ddp_store_free(st);
    return NULL;
}

/* Starts n rank threads with small stacks; ranks 0..n-1 of `world`. */
static rank_t *ranks_start(int n, int world, ddp_store_t *st, uint16_t port,
                           int deadline_ms)
{
    rank_t *rs = calloc((size_t)n, sizeof *rs);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rs);
    pthread_attr_t at;
    pthread_attr_init(&at);
    /* Thousands of ranks: small stacks (sanitizers need more). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    pthread_attr_setstacksize(&at, 512 << 10);
#else
    pthread_attr_setstacksize(&at, 64 << 10);
#endif
    int64_t deadline = dl(deadline_ms);
    for (int i = 0; i < n; i++) {
        rs[i] = (rank_t){.rank = i, .world = world, .port = port, .st = st,
                         .deadline = deadline};
        int rc = pthread_create(&rs[i].th, &at, rank_main, &rs[i]);
        CU_ASSERT_EQUAL_FATAL(rc, 0);
    }
    pthread_attr_destroy(&at);
    return rs;
}

/* Joins them; returns how many failed (printing the first failure). */
static int ranks_join(rank_t *rs, int n)
{
    int failed = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(rs[i].th, NULL);
        if (rs[i].rc && !failed++)
            fprintf(stderr, "rank %d: %s\n", i, rs[i].msg);
    }
    return failed;
}

static void test_memory_rendezvous(void)
{
    ddp_store_t *st = ddp_store_memory_new(g_sys);
    rank_t *rs = ranks_start(8, 8, st, 0, 10000);
    CU_ASSERT_EQUAL(ranks_join(rs, 8), 0);
    ddp_buf_t b = {0};
    CU_ASSERT_EQUAL(ddp_store_get(st, "init/", &b, dl(10)), 0);
    CU_ASSERT(b.len == 1 && b.data[0] == '8');
    ddp_buf_free(&b);
    CU_ASSERT_EQUAL(ddp_store_get(st, "store_based_barrier_key:default_pg",
                                  &b, dl(10)),
                    0);
    CU_ASSERT(b.len == 1 && b.data[0] == '8');
    ddp_buf_free(&b);
    const char *last = "store_based_barrier_key:default_pg:last_worker";
    CU_ASSERT_EQUAL(ddp_store_check(st, &last, 1, dl(10)), 1);
    free(rs);
    ddp_store_free(st);
}

static void test_wait_for_workers_timeout(void)
{
    ddp_store_t *st = ddp_store_memory_new(g_sys);
    /* Ranks 1 and 2 of 4 join; rank 3 never does. */
    CU_ASSERT_EQUAL(ddp_store_wait_for_workers(st, 1, 4, dl(100)), 0);
    CU_ASSERT_EQUAL(ddp_store_wait_for_workers(st, 2, 4, dl(100)), 0);
    CU_ASSERT_EQUAL(ddp_store_wait_for_workers(st, 0, 4, dl(100)),
                    DDP_ETIMEOUT);
    const char *msg = ddp_err_message();
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "Timed out after 0."));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, " seconds waiting for clients. 3/4 "
                                       "clients joined."));
    CU_ASSERT(ddp_err_ctx()->waited_ns > 0);
    CU_ASSERT_EQUAL(ddp_store_wait_for_workers(st, 4, 4, dl(100)),
                    DDP_ECONFIG);
    CU_ASSERT_EQUAL(ddp_store_wait_for_workers(st, 0, 0, dl(100)),
                    DDP_ECONFIG);
    ddp_store_free(st);
}

/* A second job's ranks on the first job's store (same MASTER_ADDR and
 * MASTER_PORT): the count passes the world size, and the rank that sees
 * it says so at once instead of waiting out its deadline. */
static void test_another_job(void)
{
    ddp_store_t *st = ddp_store_memory_new(g_sys);
    CU_ASSERT_EQUAL(ddp_store_wait_for_workers(st, 1, 2, dl(100)), 0);
    CU_ASSERT_EQUAL(ddp_store_wait_for_workers(st, 0, 2, dl(100)), 0);
    CU_ASSERT_EQUAL(ddp_store_wait_for_workers(st, 1, 2, dl(100)), DDP_ECONFIG);
    const char *msg = ddp_err_message();
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "worker_count 3 for world_size 2"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "another job's ranks joined this store"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "MASTER_PORT"));
    int64_t n = 0;
    CU_ASSERT_EQUAL(ddp_store_worker_count(st, &n, dl(100)), 0);
    CU_ASSERT_EQUAL(n, 3);
    /* The store barrier: two pass, a third is another job's. */
    CU_ASSERT_EQUAL(ddp_store_barrier(st, "g", 2, dl(100)), DDP_ETIMEOUT);
    CU_ASSERT_EQUAL(ddp_store_barrier(st, "g", 2, dl(100)), 0);
    CU_ASSERT_EQUAL(ddp_store_barrier(st, "g", 2, dl(100)), DDP_ECONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "worker_count 3 for world_size 2"));
    ddp_store_free(st);
}

static void test_barrier_timeout(void)
{
    ddp_store_t *st = ddp_store_memory_new(g_sys);
    ddp_store_t *p = ddp_store_prefix_new(st, "default_pg");
    /* Two of three ranks arrive (the first one in the past). */
    int64_t v = 0;
    CU_ASSERT_EQUAL(ddp_store_add(p, "store_based_barrier_key:g1", 1, &v,
                                  dl(10)),
                    0);
    CU_ASSERT_EQUAL(ddp_store_barrier(p, "g1", 3, dl(100)), DDP_ETIMEOUT);
    const char *msg = ddp_err_message();
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "store_based_barrier_key:g1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "world_size=3"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "num_workers_joined=2"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "Timed out after"));
    /* The third arrives: it releases the barrier for everyone after it. */
    CU_ASSERT_EQUAL(ddp_store_barrier(p, "g1", 3, dl(1000)), 0);
    CU_ASSERT_EQUAL(ddp_store_barrier(p, NULL, 3, dl(10)), DDP_ECONFIG);
    ddp_store_free(p);
    ddp_store_free(st);
}

/* A WAIT that gives up at once (store/client/wait armed for good) fails
 * the barrier at once, as docs/fault-points.md says, instead of the
 * barrier's slice loop retrying it with an ADD round trip and a progress
 * line until the deadline (`ddpsim explore`'s slowest runs: 750,000 round
 * trips for one rank, docs/explore.md). */
static void test_barrier_wait_gives_up(void)
{
    ddp_store_server_t *srv = ddp_test_server_start_loopback(g_sys, 0);
    ddp_store_client_opts_t co = {.host = "127.0.0.1",
                                  .port = ddp_store_server_addr(srv).port,
                                  .connect_deadline = dl(5000)};
    int err = 0;
    ddp_store_t *st = ddp_store_client_connect(g_sys, &co, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(st);
    ddp_store_server_stats_t before, after;
    ddp_store_server_stats(srv, &before);
    fiu_enable("store/client/wait", 1, NULL, 0);
    int rc = ddp_store_barrier(st, "g", 2, dl(2000));
    fiu_disable("store/client/wait");
    ddp_store_server_stats(srv, &after);
    CU_ASSERT_EQUAL(rc, DDP_ETIMEOUT);
    const char *msg = ddp_err_message();
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "store-based barrier"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "num_workers_joined=1"));
    /* ADD, WAIT, CANCEL_WAIT, and the ADD 0 that reads the count for the
     * error; the loop made one more ADD and WAIT per millisecond or so. */
    CU_ASSERT(after.requests - before.requests <= 6);
    ddp_store_free(st);
    ddp_test_server_end(srv);
}

/* ---- 1,000 tcp clients ---- */

enum { MANY = 1000 };

static void raise_nofile(rlim_t want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
        return;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want
                      ? want
                      : rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
}

static void test_thousand_clients(void)
{
    /* A client and a server socket per rank, plus slack. */
    raise_nofile(2 * MANY + 256);
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    int n = MANY;
    if (rl.rlim_cur < 2 * MANY + 64) {
        n = (int)(rl.rlim_cur - 64) / 2;
        fprintf(stderr, "thousand_clients: RLIMIT_NOFILE %lu, running %d\n",
                (unsigned long)rl.rlim_cur, n);
    }
    ddp_store_server_t *srv = ddp_test_server_start_loopback(g_sys, 0);
    uint16_t port = ddp_store_server_addr(srv).port;
    rank_t *rs = ranks_start(n, n, NULL, port, 60000);
    CU_ASSERT_EQUAL(ranks_join(rs, n), 0);
    ddp_store_server_stats_t s;
    ddp_store_server_stats(srv, &s);
    CU_ASSERT_EQUAL(s.protocol_errors, 0);
    /* Read the counters back through one more client. */
    ddp_store_client_opts_t co = {.host = "127.0.0.1", .port = port,
                                  .connect_deadline = dl(5000)};
    int err = 0;
    ddp_store_t *st = ddp_store_client_connect(g_sys, &co, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(st);
    int64_t v = 0;
    CU_ASSERT_EQUAL(ddp_store_add(st, "store_based_barrier_key:default_pg", 0,
                                  &v, dl(3000)),
                    0);
    CU_ASSERT_EQUAL(v, n);
    ddp_store_free(st);
    free(rs);
    ddp_test_server_end(srv);
}

DDP_SUITE("store_helpers", suite_init, suite_cleanup,
          {"memory_rendezvous", test_memory_rendezvous},
          {"wait_for_workers_timeout", test_wait_for_workers_timeout},
          {"another_job", test_another_job},
          {"barrier_timeout", test_barrier_timeout},
          {"barrier_wait_gives_up", test_barrier_wait_gives_up},
          {"thousand_clients", test_thousand_clients})
