/* tests/test_pg_tcp.c — the tcp process-group backend: every collective with
 * exact results, over real processes on loopback and in the simulator, plus
 * crashes, strays, mismatched calls, abort, fault points, and the registry
 * and reduction kernel it builds on. */
#include <errno.h>
#include <fiu-control.h>
#include <fiu.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/log.h"
#include "ddp/pg.h"
#include "ddp/plugin.h"
#include "ddp/sim.h"
#include "ddp/store.h"
#include "ddp/sys.h"
#include "test.h"

#define WORLD 8
#define LARGE_BYTES (1 << 20)
#define SIM_PORT 29500

static ddp_log_level_t g_level;

static int suite_init(void)
{
    fiu_init(0);
    /* Rejected strays and failing ranks warn; the tests provoke many. */
    g_level = ddp_log_level();
    ddp_log_set_level(DDP_LOG_ERROR);
    return 0;
}

static int suite_cleanup(void)
{
    ddp_log_set_level(g_level);
    return 0;
}

/* ------------------------------------------------ checks a rank runs */

/* The first failure of a rank, as a sentence (rank code cannot use CU_*:
 * it runs in a child process or a simulated task). */
typedef struct why {
    char text[512];
} why_t;

static int failf(why_t *w, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int failf(why_t *w, int rc, const char *fmt, ...)
{
    if (!w->text[0]) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(w->text, sizeof w->text, fmt, ap);
        va_end(ap);
        if (rc && n > 0 && (size_t)n < sizeof w->text)
            snprintf(w->text + n, sizeof w->text - (size_t)n, ": %s",
                     ddp_err_message());
    }
    return rc ? rc : -1;
}

/* Element i on rank r: small integers, exact in every dtype and in any
 * summation order. */
static double val(int r, size_t i)
{
    return (double)((int)((i * 7 + (size_t)r * 13) % 101) - 50);
}

static void put_elem(void *buf, ddp_dtype_t t, size_t i, double v)
{
    switch (t) {
    case DDP_INT32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    case DDP_INT64:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    case DDP_FLOAT:
        ((float *)buf)[i] = (float)v;
        break;
    default:
        ((double *)buf)[i] = v;
    }
}

static double get_elem(const void *buf, ddp_dtype_t t, size_t i)
{
    switch (t) {
    case DDP_INT32:
        return ((const int32_t *)buf)[i];
    case DDP_INT64:
        return (double)((const int64_t *)buf)[i];
    case DDP_FLOAT:
        return ((const float *)buf)[i];
    default:
        return ((const double *)buf)[i];
    }
}

static double expect(ddp_redop_t op, int world, size_t i)
{
    double acc = val(0, i);
    for (int r = 1; r < world; r++) {
        double v = val(r, i);
        acc = op == DDP_SUM ? acc + v : op == DDP_MAX ? (v > acc ? v : acc)
                                                       : (v < acc ? v : acc);
    }
    return acc;
}

static uint8_t pattern(int who, size_t i)
{
    return (uint8_t)(i * 31 + (size_t)who * 17 + 5);
}

static int check_broadcast(ddp_pg_t *pg, size_t bytes, int root, int64_t dl, why_t *w)
{
    uint8_t *b = malloc(bytes ? bytes : 1);
    for (size_t i = 0; i < bytes; i++)
        b[i] = ddp_pg_rank(pg) == root ? pattern(root, i) : 0;
    int rc = ddp_pg_broadcast(pg, b, bytes, root, dl);
    if (rc)
        failf(w, rc, "broadcast of %zu bytes from root %d", bytes, root);
    for (size_t i = 0; rc == 0 && i < bytes; i++)
        if (b[i] != pattern(root, i))
            rc = failf(w, 0, "broadcast of %zu bytes: byte %zu is %u, want %u",
                       bytes, i, b[i], pattern(root, i));
    free(b);
    return rc;
}

static int check_allreduce(ddp_pg_t *pg, ddp_dtype_t t, ddp_redop_t op,
                           size_t count, int64_t dl, why_t *w)
{
    int me = ddp_pg_rank(pg), world = ddp_pg_world(pg);
    void *b = malloc(count * ddp_dtype_size(t) + 1);
    for (size_t i = 0; i < count; i++)
        put_elem(b, t, i, val(me, i));
    int rc = ddp_pg_allreduce(pg, b, count, t, op, dl);
    if (rc)
        failf(w, rc, "allreduce %s of %zu x %s", ddp_redop_name(op), count,
              ddp_dtype_name(t));
    for (size_t i = 0; rc == 0 && i < count; i++)
        if (get_elem(b, t, i) != expect(op, world, i))
            rc = failf(w, 0, "allreduce %s of %zu x %s: element %zu is %g, "
                             "want %g",
                       ddp_redop_name(op), count, ddp_dtype_name(t), i,
                       get_elem(b, t, i), expect(op, world, i));
    free(b);
    return rc;
}

static int check_allgather(ddp_pg_t *pg, size_t bytes, int in_place, int64_t dl,
                           why_t *w)
{
    int me = ddp_pg_rank(pg), world = ddp_pg_world(pg);
    uint8_t *out = calloc((size_t)world, bytes ? bytes : 1);
    uint8_t *in = in_place ? out + (size_t)me * bytes : malloc(bytes ? bytes : 1);
    for (size_t i = 0; i < bytes; i++)
        in[i] = pattern(me, i);
    int rc = ddp_pg_allgather(pg, in, bytes, out, dl);
    if (rc)
        failf(w, rc, "allgather of %zu bytes per rank", bytes);
    for (int r = 0; rc == 0 && r < world; r++)
        for (size_t i = 0; rc == 0 && i < bytes; i++)
            if (out[(size_t)r * bytes + i] != pattern(r, i))
                rc = failf(w, 0, "allgather of %zu bytes: rank %d's byte %zu "
                                 "is wrong",
                           bytes, r, i);
    if (!in_place)
        free(in);
    free(out);
    return rc;
}

/* Even and odd ranks form subgroups ordered by key = -rank (so the new
 * order is the reverse of the old one); each checks its membership with an
 * allgather and an allreduce. Then rank 0 stays out of a second split. */
static int check_split(ddp_pg_t *pg, int64_t dl, why_t *w)
{
    int me = ddp_pg_rank(pg), world = ddp_pg_world(pg);
    ddp_pg_t *sub = NULL;
    int rc = ddp_pg_split(pg, me % 2, -me, "parity", &sub, dl);
    if (rc)
        return failf(w, rc, "split into even/odd");
    int n = 0, want_rank = 0;
    int64_t sum = 0;
    for (int r = me % 2; r < world; r += 2) {
        n++;
        sum += r;
        want_rank += r > me;
    }
    if (!sub || ddp_pg_world(sub) != n || ddp_pg_rank(sub) != want_rank) {
        rc = failf(w, 0, "split: subgroup rank %d of %d, want %d of %d",
                   sub ? ddp_pg_rank(sub) : -1, sub ? ddp_pg_world(sub) : -1,
                   want_rank, n);
        ddp_pg_destroy(sub);
        return rc;
    }
    int32_t *ranks = calloc((size_t)n, sizeof *ranks);
    int32_t mine = me;
    rc = ddp_pg_allgather(sub, &mine, sizeof mine, ranks, dl);
    if (rc)
        failf(w, rc, "allgather in the subgroup");
    for (int i = 0; rc == 0 && i < n; i++) /* descending old ranks */
        if (ranks[i] != (world - 1 - (world - 1 - me % 2) % 2) - 2 * i)
            rc = failf(w, 0, "subgroup member %d is old rank %d", i, ranks[i]);
    free(ranks);
    int64_t v = me;
    if (rc == 0 && (rc = ddp_pg_allreduce(sub, &v, 1, DDP_INT64, DDP_SUM, dl)))
        failf(w, rc, "allreduce in the subgroup");
    if (rc == 0 && v != sum)
        rc = failf(w, 0, "subgroup sum is %lld, want %lld", (long long)v,
                   (long long)sum);
    if (rc == 0)
        rc = check_allreduce(sub, DDP_FLOAT, DDP_MAX, LARGE_BYTES / 16, dl, w);
    ddp_pg_destroy(sub);
    if (rc)
        return rc;
    sub = NULL;
    rc = ddp_pg_split(pg, me == 0 ? DDP_PG_NO_COLOR : 7, 0, "all_but_0", &sub, dl);
    if (rc)
        return failf(w, rc, "split leaving rank 0 out");
    if ((me == 0) != (sub == NULL) || (sub && ddp_pg_world(sub) != world - 1) ||
        (sub && ddp_pg_rank(sub) != me - 1))
        rc = failf(w, 0, "split leaving rank 0 out: got %s", sub ? "a group" : "NULL");
    if (rc == 0 && sub && (rc = ddp_pg_barrier(sub, dl)))
        failf(w, rc, "barrier in the subgroup without rank 0");
    ddp_pg_destroy(sub);
    return rc;
}

/* Every collective, with exact checks. 0 when all are correct. */
static int run_collectives(ddp_pg_t *pg, int64_t dl, why_t *w)
{
    static const ddp_dtype_t types[] = {DDP_INT32, DDP_INT64, DDP_FLOAT, DDP_DOUBLE};
    static const ddp_redop_t ops[] = {DDP_SUM, DDP_MAX, DDP_MIN};
    int rc = ddp_pg_barrier(pg, dl);
    if (rc)
        return failf(w, rc, "barrier");
    int root = 3 % ddp_pg_world(pg);
    if ((rc = check_broadcast(pg, 100, root, dl, w)) ||
        (rc = check_broadcast(pg, LARGE_BYTES + 13, root, dl, w)) ||
        (rc = check_broadcast(pg, 0, root, dl, w)))
        return rc;
    for (size_t ti = 0; ti < 4; ti++) {
        size_t es = ddp_dtype_size(types[ti]);
        /* one element, odd small, both sides of the small/ring switch
         * (4 KiB), and 1 MiB plus an odd tail (uneven ring blocks) */
        size_t counts[] = {1, 37, 4096 / es - 1, 4096 / es, LARGE_BYTES / es + 3};
        for (size_t oi = 0; oi < 3; oi++)
            for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
                if ((rc = check_allreduce(pg, types[ti], ops[oi], counts[ci], dl, w)))
                    return rc;
    }
    if ((rc = check_allgather(pg, 777, 0, dl, w)) ||
        (rc = check_allgather(pg, 128 * 1024 + 1, 1, dl, w)) ||
        (rc = check_split(pg, dl, w)))
        return rc;
    if ((rc = ddp_pg_barrier(pg, dl)))
        return failf(w, rc, "final barrier");
    return 0;
}

/* A rank's life: store client, group, body, teardown. */
typedef int (*rank_body_fn)(ddp_pg_t *pg, ddp_sys_t *sys, int64_t dl, why_t *w,
                            void *arg);

typedef struct rank_spec {
    const char *store_host;
    uint16_t store_port;
    const char *prefix;
    int rank, world;
    int64_t timeout_ns;
    rank_body_fn body;
    void *arg;
} rank_spec_t;

static int rank_life(ddp_sys_t *sys, const rank_spec_t *s, why_t *w)
{
    int64_t dl = ddp_sys_deadline_in(sys, s->timeout_ns);
    ddp_store_client_opts_t o = {.host = s->store_host, .port = s->store_port,
                                 .connect_deadline = dl,
                                 .seed = (uint64_t)s->rank + 1};
    int rc = 0;
    ddp_store_t *st = ddp_store_client_connect(sys, &o, &rc);
    if (!st)
        return failf(w, rc, "store connect");
    ddp_pg_init_t in = {.sys = sys, .store = st, .prefix = s->prefix,
                        .rank = s->rank, .world = s->world, .deadline = dl,
                        .device = -1};
    ddp_pg_t *pg = NULL;
    rc = ddp_pg_new("tcp", &in, &pg);
    if (rc)
        failf(w, rc, "tcp group init");
    else
        rc = s->body(pg, sys, dl, w, s->arg);
    ddp_pg_destroy(pg);
    ddp_store_free(st);
    return rc;
}

static int body_all(ddp_pg_t *pg, ddp_sys_t *sys, int64_t dl, why_t *w, void *arg)
{
    (void)sys, (void)arg;
    return run_collectives(pg, dl, w);
}

/* ------------------------------------------------ (a) real processes */

static int child_main(ddp_sys_t *sys, void *arg)
{
    rank_spec_t *s = arg;
    ddp_ident_set_rank(s->rank);
    why_t w = {{0}};
    int rc = rank_life(sys, s, &w);
    if (rc)
        fprintf(stderr, "pg_tcp child rank %d: %s\n", s->rank, w.text);
    return rc ? 1 : 0;
}

/* Runs `world` child processes, each a rank running body against a store
 * served by this process; returns how many exited 0. */
static int run_real(int world, const char *prefix, rank_body_fn body)
{
    ddp_sys_t *sys = ddp_test_sys();
    CU_ASSERT_PTR_NOT_NULL_FATAL(sys);
    /* Loopback on every host, whatever the host name resolves to. */
    ddp_env_set(ddp_sys_env(sys), "DDP_TCP_ADDR", "127.0.0.1");
    ddp_store_server_opts_t so = {.host = "127.0.0.1"};
    ddp_store_server_t *srv = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_store_server_new(sys, &so, &srv), 0);
    ddp_addr_t sa = ddp_store_server_addr(srv);
    rank_spec_t specs[WORLD];
    ddp_pid_t pids[WORLD] = {0};
    for (int r = 0; r < world; r++) {
        specs[r] = (rank_spec_t){"127.0.0.1", sa.port, prefix, r, world,
                                 60 * DDP_NS_PER_S, body, NULL};
        ddp_spawn_t sp = {.entry = child_main, .arg = &specs[r], .name = "rank"};
        CU_ASSERT_EQUAL(ddp_sys_spawn(sys, &sp, &pids[r]), 0);
    }
    /* Only now the server thread: a fork while another thread holds a lock
     * (libfiu's, inside every fault point) leaves the child blocked on it
     * forever. The listening socket already queues the children's
     * connections. */
    int started = ddp_store_server_start_thread(srv) == 0;
    CU_ASSERT(started);
    int64_t dl = ddp_sys_deadline_in(sys, ddp_test_wall_s(90) * DDP_NS_PER_S);
    int ok = 0;
    for (int r = 0; r < world; r++) {
        int status = -1;
        if (pids[r] && ddp_sys_wait(sys, pids[r], &status, dl) != 0) {
            ddp_sys_kill(sys, pids[r], 9);
            ddp_sys_wait(sys, pids[r], &status, ddp_sys_deadline_in(sys, DDP_NS_PER_S));
        }
        ok += status == 0;
    }
    if (started)
        ddp_store_server_join_thread(srv);
    ddp_store_server_free(srv);
    ddp_sys_free(sys);
    return ok;
}

static void test_real_processes(void)
{
    CU_ASSERT_EQUAL(run_real(WORLD, "real_pg", body_all), WORLD);
}

/* Rank 2 exits instead of joining the allreduce; on real sockets the
 * others must see it go (EOF / reset), not wait for the deadline. */
static int body_leave(ddp_pg_t *pg, ddp_sys_t *sys, int64_t dl, why_t *w, void *arg)
{
    (void)sys, (void)arg;
    int rc = ddp_pg_barrier(pg, dl);
    if (rc)
        return failf(w, rc, "barrier");
    if (ddp_pg_rank(pg) == 2)
        return 0;
    size_t n = LARGE_BYTES / sizeof(double);
    double *b = calloc(n, sizeof *b);
    rc = ddp_pg_allreduce(pg, b, n, DDP_DOUBLE, DDP_SUM, dl);
    free(b);
    return rc == DDP_EPEER_LOST ? 0 : failf(w, rc, "allreduce without rank 2 "
                                                   "returned %d", rc);
}

static void test_real_peer_exits(void)
{
    CU_ASSERT_EQUAL(run_real(4, "real_leave", body_leave), 4);
}

/* ------------------------------------------------ (b) the simulator */

typedef struct simrun {
    ddp_sim_t *sim;
    int ranks, done, expect_done;
    int first_rank;
    rank_spec_t specs[16];
    why_t why[16];
    int64_t timeout_ns;
} simrun_t;

typedef struct sim_rank_arg {
    simrun_t *run;
    int rank;
} sim_rank_arg_t;

static int sim_server(ddp_sys_t *sys, void *arg)
{
    simrun_t *s = arg;
    ddp_store_server_opts_t so = {.port = SIM_PORT};
    ddp_store_server_t *srv = NULL;
    int rc = ddp_store_server_new(sys, &so, &srv);
    if (rc)
        return rc;
    int64_t dl = ddp_sys_deadline_in(sys, s->timeout_ns + 10 * DDP_NS_PER_S);
    while (rc == 0 && s->done < s->expect_done && ddp_sys_now(sys) < dl)
        rc = ddp_store_server_step(srv, dl);
    ddp_store_server_free(srv);
    return rc == DDP_ECANCELED ? rc : 0;
}

static int sim_rank(ddp_sys_t *sys, void *arg)
{
    sim_rank_arg_t *a = arg;
    int rc = rank_life(sys, &a->run->specs[a->rank], &a->run->why[a->rank]);
    a->run->done++;
    return rc;
}

/* A store server on node0 and `ranks` ranks in blocks over `nodes` nodes,
 * each running body; rank_start_ns[r] delays a rank, envs[r] is its
 * environment (NULL: none). */
static void sim_setup_env(simrun_t *s, uint64_t seed, int nodes, int ranks,
                          rank_body_fn body, void *arg,
                          const int64_t *rank_start_ns,
                          const ddp_env_t *const *envs)
{
    memset(s, 0, sizeof *s);
    ddp_sim_opts_t o = {.seed = seed};
    s->sim = ddp_sim_new(&o);
    s->ranks = s->expect_done = ranks;
    s->timeout_ns = 60 * DDP_NS_PER_S;
    for (int i = 0; i < nodes; i++) {
        char host[16], addr[16];
        snprintf(host, sizeof host, "node%d", i);
        snprintf(addr, sizeof addr, "10.0.0.%d", i + 1);
        ddp_sim_add_node(s->sim, host, addr, 0);
    }
    ddp_sim_add_task(s->sim, &(ddp_sim_task_opts_t){.node = 0, .name = "store", .rank = -1},
                     sim_server, s);
    sim_rank_arg_t *args = calloc((size_t)ranks, sizeof *args);
    for (int r = 0; r < ranks; r++) {
        s->specs[r] = (rank_spec_t){"node0", SIM_PORT, "sim_pg", r, ranks,
                                    s->timeout_ns, body, arg};
        args[r] = (sim_rank_arg_t){s, r};
        char name[16];
        snprintf(name, sizeof name, "rank%d", r);
        int id = ddp_sim_add_task(
            s->sim,
            &(ddp_sim_task_opts_t){.node = r * nodes / ranks, .name = name, .rank = r,
                                   .start_ns = rank_start_ns ? rank_start_ns[r] : 0,
                                   .env = envs ? envs[r] : NULL},
            sim_rank, &args[r]);
        if (r == 0)
            s->first_rank = id;
    }
    ddp_sim_own(s->sim, args);
}

static void sim_setup(simrun_t *s, uint64_t seed, int nodes, int ranks,
                      rank_body_fn body, void *arg, const int64_t *rank_start_ns)
{
    sim_setup_env(s, seed, nodes, ranks, body, arg, rank_start_ns, NULL);
}

static const ddp_sim_outcome_t *sim_out(simrun_t *s, int rank)
{
    return ddp_sim_outcome(s->sim, s->first_rank + rank);
}

static int sim_count_ok(simrun_t *s)
{
    int ok = 0;
    for (int r = 0; r < s->ranks; r++) {
        const ddp_sim_outcome_t *o = sim_out(s, r);
        ok += o->state == DDP_SIM_TASK_EXITED && o->rc == 0;
        if (o->rc != 0 && s->why[r].text[0])
            ddp_debug("sim rank %d: %s", r, s->why[r].text);
    }
    return ok;
}

/* `ranks` ranks on 2 nodes run body; every one of them must succeed. */
static void sim_all_ok(uint64_t seed, int ranks, rank_body_fn body, void *arg)
{
    simrun_t s;
    sim_setup(&s, seed, 2, ranks, body, arg, NULL);
    CU_ASSERT_EQUAL(ddp_sim_run(s.sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(sim_count_ok(&s), ranks);
    for (int r = 0; r < ranks; r++)
        if (s.why[r].text[0])
            fprintf(stderr, "\n  sim seed %llu rank %d: %s", (unsigned long long)seed,
                    r, s.why[r].text);
    ddp_sim_free(s.sim);
}

/* Every collective, each size and type, in the simulator; no step of a
 * healthy run waits for a header held back (TCP_HDR_GRACE_NS, 1 s): the
 * whole run ends within 1 s of virtual time (0.032 s here; when every
 * rank held its header while it read its predecessor's first, each
 * allreduce and allgather waited the full second). */
static void test_sim_collectives(void)
{
    simrun_t s;
    sim_setup(&s, 11, 2, WORLD, body_all, NULL, NULL);
    CU_ASSERT_EQUAL(ddp_sim_run(s.sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(sim_count_ok(&s), WORLD);
    for (int r = 0; r < WORLD; r++) {
        if (s.why[r].text[0])
            fprintf(stderr, "\n  sim rank %d: %s", r, s.why[r].text);
        CU_ASSERT(sim_out(&s, r)->end_ns < DDP_NS_PER_S);
    }
    ddp_sim_free(s.sim);
}

/* Rank 5 dies as it enters the allreduce; nobody may hang. */
static int body_crash(ddp_pg_t *pg, ddp_sys_t *sys, int64_t dl, why_t *w, void *arg)
{
    (void)sys, (void)arg;
    int rc = ddp_pg_barrier(pg, dl);
    if (rc)
        return failf(w, rc, "barrier");
    ddp_ident_set_phase("allreduce");
    size_t n = LARGE_BYTES / sizeof(float);
    float *b = calloc(n, sizeof *b);
    rc = ddp_pg_allreduce(pg, b, n, DDP_FLOAT, DDP_SUM, dl);
    free(b);
    return rc;
}

static void test_sim_crash_mid_allreduce(void)
{
    simrun_t s;
    sim_setup(&s, 12, 2, WORLD, body_crash, NULL, NULL);
    s.expect_done = WORLD - 1;
    ddp_sim_add_fault(s.sim, &(ddp_fault_t){.kind = DDP_FAULT_CRASH, .node = -1,
                                                .task = s.first_rank + 5,
                                                .phase = "allreduce"});
    CU_ASSERT_EQUAL(ddp_sim_run(s.sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(sim_out(&s, 5)->state, DDP_SIM_TASK_CRASHED);
    for (int r = 0; r < WORLD; r++) {
        if (r == 5)
            continue;
        const ddp_sim_outcome_t *o = sim_out(&s, r);
        CU_ASSERT_EQUAL(o->state, DDP_SIM_TASK_EXITED);
        CU_ASSERT(o->rc == DDP_EPEER_LOST || o->rc == DDP_ETIMEOUT);
        CU_ASSERT_PTR_NOT_NULL(strstr(o->message, "tcp allreduce"));
        CU_ASSERT(strstr(o->message, "predecessor rank") ||
                  strstr(o->message, "successor rank"));
        CU_ASSERT(o->end_ns <= s.timeout_ns + DDP_NS_PER_S);
    }
    /* The crashed rank's successor saw it go. */
    CU_ASSERT_PTR_NOT_NULL(strstr(sim_out(&s, 6)->message, "predecessor rank 5"));
    ddp_sim_free(s.sim);
}

/* Rank 3 goes silent (paused, alive) before an allreduce with a 5 s
 * deadline: the others fail by that deadline, some with a timeout. */
static int body_pause(ddp_pg_t *pg, ddp_sys_t *sys, int64_t dl, why_t *w, void *arg)
{
    (void)arg;
    int rc = ddp_pg_barrier(pg, dl);
    if (rc)
        return failf(w, rc, "barrier");
    /* the pause starts 1 s into the run; be past it */
    ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 2 * DDP_NS_PER_S));
    int64_t v = 1;
    return ddp_pg_allreduce(pg, &v, 1, DDP_INT64, DDP_SUM,
                            ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_S));
}

static void test_sim_paused_rank_times_out(void)
{
    simrun_t s;
    sim_setup(&s, 23, 2, WORLD, body_pause, NULL, NULL);
    ddp_sim_add_fault(s.sim, &(ddp_fault_t){.kind = DDP_FAULT_PAUSE, .node = -1,
                                                .task = s.first_rank + 3,
                                                .start_ns = DDP_NS_PER_S,
                                                .end_ns = 100 * DDP_NS_PER_S});
    CU_ASSERT_EQUAL(ddp_sim_run(s.sim), DDP_SIM_DONE);
    int timeouts = 0;
    for (int r = 0; r < WORLD; r++) {
        const ddp_sim_outcome_t *o = sim_out(&s, r);
        CU_ASSERT(o->rc == DDP_EPEER_LOST || o->rc == DDP_ETIMEOUT);
        if (r != 3)
            CU_ASSERT(o->end_ns <= 9 * DDP_NS_PER_S);
        timeouts += o->rc == DDP_ETIMEOUT;
    }
    CU_ASSERT(timeouts >= 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(sim_out(&s, 4)->message, "rank 3"));
    ddp_sim_free(s.sim);
}

/* Same seed, same run: the backend adds no wall-clock or thread-timing
 * decision (its retry jitter comes from a seeded PRNG). */
static uint64_t crash_run_hash(uint64_t seed, char *msg6, size_t n)
{
    simrun_t s;
    sim_setup(&s, seed, 2, WORLD, body_crash, NULL, NULL);
    s.expect_done = WORLD - 1;
    ddp_sim_add_fault(s.sim, &(ddp_fault_t){.kind = DDP_FAULT_CRASH, .node = -1,
                                                .task = s.first_rank + 5,
                                                .phase = "allreduce"});
    ddp_sim_run(s.sim);
    ddp_sim_stats_t st;
    ddp_sim_stats(s.sim, &st);
    snprintf(msg6, n, "%s", sim_out(&s, 6)->message);
    ddp_sim_free(s.sim);
    return st.trace_hash;
}

static void test_sim_deterministic(void)
{
    char m0[512], m1[512];
    uint64_t h = crash_run_hash(21, m0, sizeof m0);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(crash_run_hash(21, m1, sizeof m1), h);
        CU_ASSERT_STRING_EQUAL(m1, m0);
    }
    CU_ASSERT_NOT_EQUAL(crash_run_hash(22, m1, sizeof m1), h);
}

/* Strays queue on rank 5's listen port before its real predecessor
 * (rank 4, started late) connects: one with a wrong magic, one silent. */
typedef struct stray_arg {
    int silent;
    int rejected; /* set when rank 5 closed the stray connection */
} stray_arg_t;

static int stray_main(ddp_sys_t *sys, void *arg)
{
    stray_arg_t *a = arg;
    int64_t dl = ddp_sys_deadline_in(sys, 30 * DDP_NS_PER_S);
    ddp_store_client_opts_t o = {.host = "node0", .port = SIM_PORT, .connect_deadline = dl};
    int rc = 0;
    ddp_store_t *st = ddp_store_client_connect(sys, &o, &rc);
    if (!st)
        return rc;
    int fd = ddp_test_connect_published(sys, st, "sim_pg/tcp/addr/5", dl);
    ddp_store_free(st);
    if (fd < 0)
        return fd;
    if (!a->silent) {
        uint8_t junk[24];
        memset(junk, 0xab, sizeof junk);
        rc = ddp_sys_send_all(sys, fd, junk, sizeof junk, dl);
    }
    uint8_t one;
    ssize_t r = rc ? rc : ddp_sys_recv(sys, fd, &one, 1, dl);
    a->rejected = r == 0; /* EOF: rank 5 read the hello and closed */
    ddp_sys_close(sys, fd);
    return a->rejected ? 0 : (int)(r < 0 ? r : DDP_EPROTOCOL);
}

static void test_sim_stray_connections(void)
{
    int64_t starts[WORLD] = {0};
    starts[4] = 2 * DDP_NS_PER_S;
    simrun_t s;
    sim_setup(&s, 13, 2, WORLD, body_all, NULL, starts);
    stray_arg_t strays[2] = {{.silent = 0}, {.silent = 1}};
    for (int i = 0; i < 2; i++)
        ddp_sim_add_task(s.sim,
                         &(ddp_sim_task_opts_t){.node = 1, .name = "stray", .rank = -1},
                         stray_main, &strays[i]);
    CU_ASSERT_EQUAL(ddp_sim_run(s.sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(sim_count_ok(&s), WORLD);
    CU_ASSERT_EQUAL(strays[0].rejected, 1);
    CU_ASSERT_EQUAL(strays[1].rejected, 1);
    ddp_sim_free(s.sim);
}

/* Ranks that disagree on a collective's size fail with a protocol error
 * naming the neighbour's call, instead of hanging or mixing data. */
static int body_mismatch(ddp_pg_t *pg, ddp_sys_t *sys, int64_t dl, why_t *w, void *arg)
{
    (void)sys, (void)arg, (void)w;
    int32_t b[11] = {0};
    return ddp_pg_allreduce(pg, b, ddp_pg_rank(pg) == 2 ? 11 : 10, DDP_INT32,
                            DDP_SUM, dl);
}

static void test_sim_mismatched_calls(void)
{
    simrun_t s;
    sim_setup(&s, 14, 2, 4, body_mismatch, NULL, NULL);
    CU_ASSERT_EQUAL(ddp_sim_run(s.sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(sim_count_ok(&s), 0);
    /* rank 3 sees its predecessor's different call */
    CU_ASSERT_EQUAL(sim_out(&s, 3)->rc, DDP_EPROTOCOL);
    CU_ASSERT_PTR_NOT_NULL(strstr(sim_out(&s, 3)->message, "11 x int32"));
    for (int r = 0; r < 4; r++)
        CU_ASSERT(sim_out(&s, r)->end_ns < s.timeout_ns);
    ddp_sim_free(s.sim);
}

/* Ranks that disagree on a broadcast's root so that none of them is the
 * root (rank r names r+2) and none the last rank either: nobody can start,
 * so no header rides on any data. Each rank sends its header alone once it
 * has waited TCP_HDR_GRACE_NS (1 s) and its successor names the mismatch:
 * every rank ends within 2 s, not at its 60 s deadline. */
static int body_no_root(ddp_pg_t *pg, ddp_sys_t *sys, int64_t dl, why_t *w, void *arg)
{
    (void)sys, (void)arg, (void)w;
    uint8_t b[64] = {0};
    return ddp_pg_broadcast(pg, b, sizeof b, (ddp_pg_rank(pg) + 2) % 4, dl);
}

static void test_sim_no_rank_can_start(void)
{
    simrun_t s;
    sim_setup(&s, 16, 2, 4, body_no_root, NULL, NULL);
    CU_ASSERT_EQUAL(ddp_sim_run(s.sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(sim_count_ok(&s), 0);
    int named = 0;
    for (int r = 0; r < 4; r++) {
        CU_ASSERT(sim_out(&s, r)->end_ns < 2 * DDP_NS_PER_S);
        named += sim_out(&s, r)->rc == DDP_EPROTOCOL &&
                 strstr(sim_out(&s, r)->message, "while this rank is in broadcast");
    }
    CU_ASSERT(named >= 1);
    ddp_sim_free(s.sim);
}

/* k broadcasts of 4 KiB from rank 0, every rank entering each at the same
 * virtual instant (as after the store barrier of the plugin's init). */
static int body_broadcasts(ddp_pg_t *pg, ddp_sys_t *sys, int64_t dl, why_t *w, void *arg)
{
    int k = *(const int *)arg;
    int64_t t0 = ddp_sys_now(sys) + 10 * DDP_NS_PER_MS; /* rank 0's wins */
    int rc = ddp_pg_broadcast(pg, &t0, sizeof t0, 0, dl);
    if (rc)
        return failf(w, rc, "broadcast of the start time");
    uint8_t b[4096];
    for (int i = 0; i < k; i++) {
        ddp_sys_sleep_until(sys, t0 + (int64_t)i * 10 * DDP_NS_PER_MS);
        memset(b, ddp_pg_rank(pg) == 0 ? i + 1 : 0, sizeof b);
        rc = ddp_pg_broadcast(pg, b, sizeof b, 0, dl);
        if (rc)
            return failf(w, rc, "broadcast %d", i);
        if (b[0] != (uint8_t)(i + 1) || b[sizeof b - 1] != (uint8_t)(i + 1))
            return failf(w, DDP_EPROTOCOL, "broadcast %d: wrong bytes", i);
    }
    return 0;
}

static uint64_t sim_handoffs(int k)
{
    simrun_t s;
    sim_setup(&s, 17, 2, WORLD, body_broadcasts, &k, NULL);
    CU_ASSERT_EQUAL(ddp_sim_run(s.sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(sim_count_ok(&s), WORLD);
    ddp_sim_stats_t st;
    ddp_sim_stats(s.sim, &st);
    ddp_sim_free(s.sim);
    return st.handoffs;
}

/* A collective's header leaves with the first bytes a rank sends, in the
 * same send: a rank that waits for its predecessor's data wakes once when
 * it comes, not first for the header alone. 40 rounds of a sleep and a
 * broadcast that every rank enters at once cost at most 2.5 hand-offs per
 * rank each (the scheduler's count, the same in every run): the wake from
 * the sleep and one for the data. A header sent on its own made it 3. */
static void test_sim_header_rides_with_data(void)
{
    uint64_t base = sim_handoffs(0), more = sim_handoffs(40);
    double per = (double)(more - base) / (40.0 * WORLD);
    if (per > 2.5)
        printf("\n  %.2f hand-offs per rank per round\n", per);
    CU_ASSERT(per <= 2.5);
}

/* After abort every call fails at once; a peer that did not abort sees
 * the ring go. */
static int body_abort(ddp_pg_t *pg, ddp_sys_t *sys, int64_t dl, why_t *w, void *arg)
{
    (void)sys, (void)arg;
    if (ddp_pg_rank(pg) == 1) {
        ddp_pg_abort(pg);
        int rc = ddp_pg_barrier(pg, dl);
        return rc == DDP_ECANCELED ? 0 : failf(w, rc, "barrier after abort");
    }
    int rc = ddp_pg_barrier(pg, dl);
    if (rc != DDP_EPEER_LOST)
        return failf(w, rc, "barrier with an aborted peer returned %d", rc);
    rc = ddp_pg_barrier(pg, dl); /* the group stays unusable */
    return rc == DDP_EPEER_LOST ? 0 : failf(w, rc, "second barrier");
}

static void test_sim_abort(void)
{
    simrun_t s;
    sim_setup(&s, 15, 2, 4, body_abort, NULL, NULL);
    CU_ASSERT_EQUAL(ddp_sim_run(s.sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(sim_count_ok(&s), 4);
    for (int r = 0; r < 4; r++)
        CU_ASSERT(sim_out(&s, r)->end_ns < s.timeout_ns);
    ddp_sim_free(s.sim);
}

/* The fault points: one failed connect and one failed handshake are
 * retried and the group forms; a connect that always fails ends at the
 * deadline with an error naming the successor. */
static int body_barrier(ddp_pg_t *pg, ddp_sys_t *sys, int64_t dl, why_t *w, void *arg)
{
    (void)sys, (void)arg;
    int rc = ddp_pg_barrier(pg, dl);
    return rc ? failf(w, rc, "barrier") : 0;
}

static void test_sim_fault_points(void)
{
    static const char *const points[] = {"pg/tcp/connect", "pg/tcp/handshake"};
    for (int i = 0; i < 2; i++) {
        simrun_t s;
        sim_setup(&s, 16 + (uint64_t)i, 2, 4, body_barrier, NULL, NULL);
        ddp_fault_enable(points[i], 1, NULL, FIU_ONETIME);
        CU_ASSERT_EQUAL(ddp_sim_run(s.sim), DDP_SIM_DONE);
        ddp_fault_disable(points[i]);
        CU_ASSERT_EQUAL(sim_count_ok(&s), 4);
        ddp_sim_free(s.sim);
    }
    simrun_t s;
    sim_setup(&s, 18, 2, 4, body_barrier, NULL, NULL);
    ddp_fault_enable("pg/tcp/connect", 1, (void *)(intptr_t)ECONNREFUSED, 0);
    CU_ASSERT_EQUAL(ddp_sim_run(s.sim), DDP_SIM_DONE);
    ddp_fault_disable("pg/tcp/connect");
    CU_ASSERT_EQUAL(sim_count_ok(&s), 0);
    const ddp_sim_outcome_t *o = sim_out(&s, 2);
    CU_ASSERT_EQUAL(o->rc, DDP_ETIMEOUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(o->message, "connect to ring successor rank 3"));
    CU_ASSERT(o->end_ns >= s.timeout_ns && o->end_ns <= s.timeout_ns + DDP_NS_PER_S);
    ddp_sim_free(s.sim);
}

/* A rank that cannot listen (its DDP_TCP_ADDR does not resolve) says so
 * through the store: the others fail with its cause at once, not at the
 * deadline (pytorch#129367). Rank 0 and a non-root rank. */
static void test_sim_listen_failure_propagates(void)
{
    for (int bad = 0; bad < 4; bad += 2) {
        ddp_env_t *env = ddp_env_new();
        ddp_env_set(env, "DDP_TCP_ADDR", "no-such-host");
        const ddp_env_t *envs[4] = {NULL};
        envs[bad] = env;
        simrun_t s;
        sim_setup_env(&s, 19, 2, 4, body_barrier, NULL, NULL, envs);
        ddp_env_free(env);
        CU_ASSERT_EQUAL(ddp_sim_run(s.sim), DDP_SIM_DONE);
        CU_ASSERT_EQUAL(sim_count_ok(&s), 0);
        for (int r = 0; r < 4; r++) {
            const ddp_sim_outcome_t *o = sim_out(&s, r);
            CU_ASSERT_PTR_NOT_NULL(strstr(o->message, "no-such-host"));
            CU_ASSERT(o->end_ns < s.timeout_ns / 2);
        }
        ddp_sim_free(s.sim);
    }
}

/* ------------------------------------------------ bootstrap and O(1) collectives */

/* Rank 0 hands each rank one entry with its ring neighbours and their
 * addresses (the ones they published); there is no whole-world table. */
static int body_entries(ddp_pg_t *pg, ddp_sys_t *sys, int64_t dl, why_t *w, void *arg)
{
    (void)sys, (void)arg;
    int me = ddp_pg_rank(pg), world = ddp_pg_world(pg);
    int prev = (me + world - 1) % world, next = (me + 1) % world;
    char key[64], want[256], got[256];
    ddp_buf_t a = {0}, b = {0}, e = {0};
    snprintf(key, sizeof key, "sim_pg/tcp/addr/%d", prev);
    int rc = ddp_store_get(pg->store, key, &a, dl);
    snprintf(key, sizeof key, "sim_pg/tcp/addr/%d", next);
    if (rc == 0)
        rc = ddp_store_get(pg->store, key, &b, dl);
    snprintf(key, sizeof key, "sim_pg/tcp/peers/%d", me);
    if (rc == 0)
        rc = ddp_store_get(pg->store, key, &e, dl);
    if (rc == 0) {
        /* published as "ADDR:PORT HOSTNAME": the entries carry the address */
        const char *as = memchr(a.data, ' ', a.len), *bs = memchr(b.data, ' ', b.len);
        int al = as ? (int)(as - (const char *)a.data) : (int)a.len;
        int bl = bs ? (int)(bs - (const char *)b.data) : (int)b.len;
        snprintf(want, sizeof want, "ddp-tcp-peers 1 %d %d %.*s %d %.*s", world, prev, al,
                 (const char *)a.data, next, bl, (const char *)b.data);
        snprintf(got, sizeof got, "%.*s", (int)e.len, (const char *)e.data);
        if (strcmp(got, want))
            rc = failf(w, 0, "entry \"%s\", want \"%s\"", got, want);
    } else {
        failf(w, rc, "reading the bootstrap keys");
    }
    ddp_buf_free(&a);
    ddp_buf_free(&b);
    ddp_buf_free(&e);
    const char *ring[1] = {"sim_pg/tcp/ring"};
    if (rc == 0 && ddp_store_check(pg->store, ring, 1, dl) != 0)
        rc = failf(w, 0, "a whole-ring table was published");
    int brc = ddp_pg_barrier(pg, dl);
    return rc ? rc : brc ? failf(w, brc, "barrier") : 0;
}

static void test_sim_bootstrap_entries(void) { sim_all_ok(31, WORLD, body_entries, NULL); }

/* The barrier (two passes along the ring) returns on no rank before the
 * last rank entered it; rank 3 enters 3 s late. */
typedef struct barrier_times {
    int64_t entered[WORLD], left[WORLD];
} barrier_times_t;

static int body_late_barrier(ddp_pg_t *pg, ddp_sys_t *sys, int64_t dl, why_t *w,
                             void *arg)
{
    barrier_times_t *bt = arg;
    int me = ddp_pg_rank(pg);
    if (me == 3)
        ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 3 * DDP_NS_PER_S));
    bt->entered[me] = ddp_sys_now(sys);
    int rc = ddp_pg_barrier(pg, dl);
    bt->left[me] = ddp_sys_now(sys);
    if (rc == 0)
        rc = ddp_pg_barrier(pg, dl); /* and the next one stays in step */
    return rc ? failf(w, rc, "barrier") : 0;
}

static void test_sim_barrier_waits_for_all(void)
{
    barrier_times_t bt = {{0}, {0}};
    sim_all_ok(32, WORLD, body_late_barrier, &bt);
    for (int r = 0; r < WORLD; r++) {
        CU_ASSERT(bt.left[r] >= bt.entered[3]);
        CU_ASSERT(bt.entered[r] > 0);
    }
}

/* Small allreduces fold the ranks' buffers in rank order, so floats come
 * out bit-identical on every rank and equal to a sequential left fold. */
static float fold_val(int r, size_t i)
{
    static const float v[] = {1e8f, 1.0f, -1e8f, 0.5f, 3.25f, 1e-3f, -7.0f, 2.0f};
    return v[((size_t)r + i) % (sizeof v / sizeof v[0])] * (float)(i + 1);
}

static int body_fold(ddp_pg_t *pg, ddp_sys_t *sys, int64_t dl, why_t *w, void *arg)
{
    (void)sys, (void)arg;
    enum { N = 5 };
    int me = ddp_pg_rank(pg), world = ddp_pg_world(pg);
    float b[N], want[N];
    for (size_t i = 0; i < N; i++) {
        b[i] = fold_val(me, i);
        want[i] = fold_val(0, i);
        for (int r = 1; r < world; r++)
            want[i] = want[i] + fold_val(r, i);
    }
    int rc = ddp_pg_allreduce(pg, b, N, DDP_FLOAT, DDP_SUM, dl);
    if (rc)
        return failf(w, rc, "allreduce");
    return memcmp(b, want, sizeof b) ? failf(w, 0, "not the left fold in rank order")
                                     : 0;
}

static void test_sim_small_allreduce_rank_order(void)
{
    sim_all_ok(33, WORLD, body_fold, NULL);
}

/* The handshake under random faults on pg/tcp/handshake: a rank whose hello
 * its successor rejected connects again even while it waits for its own
 * predecessor. Before, every rank of a ring could end up waiting in accept
 * for a predecessor that reconnects only after its own accept returned,
 * and the group failed at the deadline ("no valid connection from ring
 * predecessor ... rejected N stray connection(s)"); seed 1 of
 * scenarios/tcp-handshake-faults.scn was such a schedule. Finite faults
 * must never fail the group. */
static void test_sim_handshake_faults(void)
{
    int formed = 0, runs = 0;
    for (uint64_t seed = 1; seed <= 24; seed++) {
        simrun_t s;
        int world = 2 + (int)(seed % 3);
        sim_setup(&s, seed, 1, world, body_barrier, NULL, NULL);
        ddp_sim_add_fault(s.sim, &(ddp_fault_t){.kind = DDP_FAULT_POINT,
                                                    .node = -1, .task = -1,
                                                    .peer_node = -1,
                                                    .point = "pg/tcp/handshake",
                                                    .count = 6, .probability = 0.5});
        CU_ASSERT_EQUAL(ddp_sim_run(s.sim), DDP_SIM_DONE);
        formed += sim_count_ok(&s) == world;
        runs++;
        for (int r = 0; r < world; r++)
            if (sim_out(&s, r)->rc)
                fprintf(stderr, "\n  seed %llu rank %d: %s", (unsigned long long)seed,
                        r, sim_out(&s, r)->message);
        ddp_sim_free(s.sim);
    }
    CU_ASSERT_EQUAL(formed, runs);
}

/* configure_ddp's check: a backend whose broadcast corrupts group rank 2's
 * copy of the parameters must fail every rank with an error naming rank 2;
 * without the corruption every rank ends with rank 0's checksum. */
static int corrupt_broadcast(ddp_pg_t *pg, void *buf, size_t bytes, int root,
                             int64_t deadline)
{
    int rc = ddp_pg_backend_find("tcp")->broadcast(pg, buf, bytes, root, deadline);
    if (rc == 0 && bytes > sizeof(uint64_t) && ddp_pg_rank(pg) == 2)
        ((uint8_t *)buf)[bytes / 2] ^= 0x40;
    return rc;
}

static int body_configure(ddp_pg_t *pg, ddp_sys_t *sys, int64_t dl, why_t *w, void *arg)
{
    const int *corrupt = arg;
    static ddp_pg_ops_t ops;
    ops = *ddp_pg_backend_find("tcp");
    ops.broadcast = corrupt_broadcast;
    if (*corrupt)
        pg->ops = &ops;
    ddp_ctx_t ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.sys = sys;
    ctx.pg = pg;
    ctx.deadline = dl;
    ddp_model_t m;
    /* Each rank starts from other parameters; rank 0's must win. */
    if (ddp_model_init(&m, 4096, 100 + (uint64_t)ddp_pg_rank(pg)) != 0)
        return failf(w, -ENOMEM, "model");
    ddp_model_t ref;
    ddp_model_init(&ref, 4096, 100);
    int rc = ddp_plugin_default_configure_ddp(NULL, &ctx, &m);
    if (!*corrupt)
        rc = rc ? failf(w, rc, "configure_ddp")
             : m.checksum != ddp_model_checksum(&ref) ? failf(w, 0, "not rank 0's checksum")
                                                      : 0;
    else if (rc != DDP_EPROTOCOL)
        rc = failf(w, rc, "configure_ddp returned %d, want DDP_EPROTOCOL", rc);
    else if (!strstr(ddp_err_message(), "group rank 2 holds bytes other than rank 0's"))
        rc = failf(w, 0, "error \"%s\" does not name rank 2", ddp_err_message());
    else
        rc = 0;
    ddp_model_free(&m);
    ddp_model_free(&ref);
    pg->ops = ddp_pg_backend_find("tcp");
    return rc;
}

static void test_sim_configure_check(void)
{
    for (int corrupt = 0; corrupt < 2; corrupt++)
        sim_all_ok(34 + (uint64_t)corrupt, 6, body_configure, &corrupt);
}

/* ------------------------------------------------ local pieces */

static void test_reduce_kernel(void)
{
    int32_t a32[3] = {INT32_MAX, -5, 7}, b32[3] = {1, 9, -7};
    ddp_reduce_into(a32, b32, 3, DDP_INT32, DDP_SUM);
    CU_ASSERT_EQUAL(a32[0], INT32_MIN); /* wraps, no UB */
    CU_ASSERT_EQUAL(a32[1], 4);
    CU_ASSERT_EQUAL(a32[2], 0);
    int64_t a64[2] = {3, -8}, b64[2] = {-4, 2};
    ddp_reduce_into(a64, b64, 2, DDP_INT64, DDP_MAX);
    CU_ASSERT(a64[0] == 3 && a64[1] == 2);
    float af[2] = {1.5f, -2.0f}, bf[2] = {0.5f, -3.0f};
    ddp_reduce_into(af, bf, 2, DDP_FLOAT, DDP_MIN);
    CU_ASSERT(af[0] == 0.5f && af[1] == -3.0f);
    /* unaligned buffers are fine */
    uint8_t raw[2 * sizeof(double) + 1], rin[2 * sizeof(double) + 1];
    double d[2] = {1.25, 2.0}, e[2] = {0.75, 4.0}, r[2];
    memcpy(raw + 1, d, sizeof d);
    memcpy(rin + 1, e, sizeof e);
    ddp_reduce_into(raw + 1, rin + 1, 2, DDP_DOUBLE, DDP_SUM);
    memcpy(r, raw + 1, sizeof r);
    CU_ASSERT(r[0] == 2.0 && r[1] == 6.0);
    CU_ASSERT_EQUAL(ddp_dtype_size(DDP_INT64), 8);
    CU_ASSERT_EQUAL(ddp_dtype_size(DDP_FLOAT), 4);
    CU_ASSERT_STRING_EQUAL(ddp_dtype_name(DDP_DOUBLE), "double");
    CU_ASSERT_STRING_EQUAL(ddp_redop_name(DDP_MAX), "max");
    CU_ASSERT_EQUAL(ddp_dtype_size(DDP_DTYPE_COUNT), 0);
}

static void test_registry(void)
{
    CU_ASSERT(ddp_pg_backend_count() >= 2);
    CU_ASSERT_PTR_NOT_NULL(ddp_pg_backend_find("tcp"));
    CU_ASSERT_PTR_NOT_NULL(ddp_pg_backend_find("nccl"));
    CU_ASSERT_PTR_NULL(ddp_pg_backend_at(ddp_pg_backend_count()));
    CU_ASSERT_PTR_NULL(ddp_pg_backend_find("gloo"));
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "tcp, nccl"));
    ddp_sys_t *sys = ddp_test_sys();
    ddp_store_t *st = ddp_store_memory_new(sys);
    ddp_pg_t *pg = (ddp_pg_t *)1;
    ddp_pg_init_t in = {.sys = sys, .store = st, .prefix = "p", .rank = 2, .world = 2};
    CU_ASSERT_EQUAL(ddp_pg_new("tcp", &in, &pg), DDP_ECONFIG);
    CU_ASSERT_PTR_NULL(pg);
    CU_ASSERT_EQUAL(ddp_pg_new("gloo", &in, &pg), DDP_ECONFIG);
    /* world 1: no connections, every collective is local */
    in.rank = 0;
    in.world = 1;
    in.deadline = ddp_test_deadline_ms(sys, 5000);
    CU_ASSERT_EQUAL_FATAL(ddp_pg_new("tcp", &in, &pg), 0);
    why_t w = {{0}};
    CU_ASSERT_EQUAL(run_collectives(pg, in.deadline, &w), 0);
    if (w.text[0])
        fprintf(stderr, "\n  world 1: %s", w.text);
    CU_ASSERT_EQUAL(ddp_pg_broadcast(pg, &w, 1, 1, in.deadline), DDP_ECONFIG);
    ddp_pg_abort(pg);
    CU_ASSERT_EQUAL(ddp_pg_barrier(pg, in.deadline), DDP_ECANCELED);
    ddp_pg_destroy(pg);
    ddp_store_free(st);
    ddp_sys_free(sys);
}

DDP_SUITE("pg_tcp", suite_init, suite_cleanup,
          {"reduction kernel and dtype table", test_reduce_kernel},
          {"registry, argument checks, world of 1", test_registry},
          {"8 real processes on loopback: every collective", test_real_processes},
          {"real processes: a rank exits, the others see it", test_real_peer_exits},
          {"simulator, 8 ranks on 2 nodes: every collective", test_sim_collectives},
          {"simulator: rank crashes entering allreduce", test_sim_crash_mid_allreduce},
          {"simulator: same seed, same trace", test_sim_deterministic},
          {"simulator: paused rank, others time out", test_sim_paused_rank_times_out},
          {"simulator: stray connections rejected, group forms", test_sim_stray_connections},
          {"simulator: mismatched collective sizes", test_sim_mismatched_calls},
          {"simulator: no rank can start a broadcast: named within the grace",
           test_sim_no_rank_can_start},
          {"simulator: a header wakes nobody on its own", test_sim_header_rides_with_data},
          {"simulator: abort", test_sim_abort},
          {"simulator: pg/tcp fault points", test_sim_fault_points},
          {"simulator: a rank that cannot listen", test_sim_listen_failure_propagates},
          {"simulator: each rank gets only its ring neighbours", test_sim_bootstrap_entries},
          {"simulator: the barrier waits for the last rank", test_sim_barrier_waits_for_all},
          {"simulator: small allreduce folds in rank order", test_sim_small_allreduce_rank_order},
          {"simulator: handshake under pg/tcp/handshake faults", test_sim_handshake_faults},
          {"simulator: configure_ddp names a rank whose bytes differ", test_sim_configure_check})
