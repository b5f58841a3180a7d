/* tests/test_behave_leaks.c — no socket and no memory left behind on any
 * error path of the store client, the store server and the tcp backend
 * (issue 16, "Resources").
 *
 * A faultsim loop in SQLite's style: for each fault point those paths
 * check (the names of docs/fault-points.md, the one list of them), a clean
 * run first counts how often the workload passes the point; then the run is
 * repeated once per call n, failing exactly the n-th call. After every run:
 * the simulation finished (no deadlock, no task left waiting), every
 * process exited with every socket it opened closed (the simulator counts
 * the ones still open at a normal exit), and a failure names a cause. Memory
 * is checked by LeakSanitizer where the build has it (`make test
 * SANITIZE=address,undefined`), after each point's runs; its report shows
 * where the leaked blocks came from. In the plain build, for a sample of
 * each point's calls, the heap in use (mallinfo2) must not grow from one
 * repeat of the faulted run to the next, which names point and call (under
 * TSan, whose allocator mallinfo2 does not see, only sockets are checked).
 *
 * Three workloads: over the simulator's sys, "store" is a server and two
 * clients going through every store operation and "plugin" two ranks
 * (ddp_cpu_hpc, torchrun, tcp backend) through init_ddp_connection,
 * configure_ddp and teardown; "real" is the store workload over real
 * loopback sockets (the POSIX sys), the process's open descriptors counted
 * before and after.
 */
#include <errno.h>
#include <fiu-control.h>
#include <fiu.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/plan.h"
#include "ddp/scenario.h"
#include "ddp/sim.h"
#include "ddp/store.h"
#include "behave.h"
#include "test.h"

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_LSAN 1
int __lsan_do_recoverable_leak_check(void);
#else
#define HAVE_LSAN 0
#endif
/* The heap check reads glibc's arenas (mallinfo2), which TSan's own
 * allocator bypasses: there it would see nothing, so it does not run. */
#if !HAVE_LSAN && !defined(__SANITIZE_THREAD__)
#define HEAP_CHECK 1
#else
#define HEAP_CHECK 0
#endif

/* ------------------------------------------------------- fault injection */

static struct {
    atomic_int calls;  /* calls of the point so far in this run */
    atomic_int target; /* the call that fails (0: none, count only) */
    atomic_int fired;
} g_fs;

static int fs_cb(const char *name, int *failnum, void **failinfo, unsigned int *flags)
{
    (void)name, (void)failnum, (void)failinfo, (void)flags;
    int n = atomic_fetch_add(&g_fs.calls, 1) + 1;
    if (n != atomic_load(&g_fs.target))
        return 0;
    atomic_store(&g_fs.fired, 1);
    return 1; /* failinfo 0: the point's own default errno */
}

static void fs_arm(const char *point, int target)
{
    atomic_store(&g_fs.calls, 0);
    atomic_store(&g_fs.fired, 0);
    atomic_store(&g_fs.target, target);
    ddp_fault_enable_external(point, 1, NULL, 0, fs_cb);
}

/* ---------------------------------------------------- workload: store */

typedef struct store_run {
    atomic_int done; /* clients finished */
    int rc[2];
    char msg[2][512];
} store_run_t;

static int64_t soon(ddp_sys_t *sys) { return ddp_sys_deadline_in(sys, DDP_NS_PER_S); }

static int server_main(ddp_sys_t *sys, void *arg)
{
    store_run_t *r = arg;
    /* a failed listen: the clients time out */
    (void)ddp_behave_serve(sys, 29500, &r->done, 2, 20 * DDP_NS_PER_S);
    return 0;
}

/* Every operation once; the first failure ends the client (its error path
 * frees what it holds). `alone`: the client also sets the key it waits for
 * (real runs, where a peer's failure must not stall it for seconds). */
static int ops(ddp_sys_t *sys, ddp_store_t *st, int me, int alone)
{
    char mine[16], theirs[16];
    snprintf(mine, sizeof mine, "%sk%d", alone ? "solo/" : "", me);
    snprintf(theirs, sizeof theirs, "%sk%d", alone ? "solo/" : "", alone ? me + 2 : 1 - me);
    const char *keys[2] = {mine, theirs};
    ddp_buf_t vals[1] = {{.data = (uint8_t *)"a", .len = 1}};
    ddp_buf_t v = {0}, cas = {0}, pop = {0}, got[2] = {{0}};
    int64_t n = 0;
    char **list = NULL;
    size_t nlist = 0;
    int rc;
    if ((rc = ddp_store_set_str(st, mine, "v", soon(sys))) ||
        (alone && (rc = ddp_store_set_str(st, theirs, "w", soon(sys)))) ||
        (rc = ddp_store_ping(st, soon(sys))) ||
        (rc = ddp_store_add(st, "counter", 1, &n, soon(sys))) ||
        (rc = ddp_store_wait(st, keys, 2, ddp_sys_deadline_in(sys, 3 * DDP_NS_PER_S))) ||
        (rc = ddp_store_get(st, theirs, &v, soon(sys))) ||
        (rc = ddp_store_check(st, keys, 2, soon(sys))) < 0 ||
        (rc = ddp_store_multi_get(st, keys, 2, got, soon(sys))) ||
        (rc = ddp_store_compare_set(st, "cas", "", 0, "x", 1, &cas, soon(sys))) ||
        (rc = ddp_store_append(st, "log", "z", 1, soon(sys))) ||
        (rc = ddp_store_multi_set(st, keys, vals, 1, soon(sys))) ||
        (rc = ddp_store_queue_push(st, "q", "m", 1, soon(sys))) ||
        (rc = ddp_store_queue_pop(st, "q", &pop, soon(sys))) ||
        (rc = ddp_store_queue_len(st, "q", &n, soon(sys))) ||
        (rc = ddp_store_num_keys(st, &n, soon(sys))) ||
        (rc = ddp_store_list_keys(st, &list, &nlist, soon(sys))) ||
        (rc = ddp_store_delete_key(st, "cas", soon(sys))) < 0) {
        /* the first failure ends the sequence */
    }
    ddp_buf_free(&v);
    ddp_buf_free(&cas);
    ddp_buf_free(&pop);
    ddp_buf_free(&got[0]);
    ddp_buf_free(&got[1]);
    ddp_store_free_keys(list, nlist);
    return rc < 0 ? rc : 0;
}

static int client_main(ddp_sys_t *sys, void *arg)
{
    ddp_behave_task_t *ca = arg;
    store_run_t *r = ca->run;
    int rc = 0;
    ddp_store_t *st = ddp_behave_client(sys, 3 + (uint64_t)ca->rank, 2 * DDP_NS_PER_S, &rc);
    if (st)
        rc = ops(sys, st, ca->rank, 0);
    r->rc[ca->rank] = rc;
    snprintf(r->msg[ca->rank], sizeof r->msg[0], "%s", rc ? ddp_err_message() : "");
    ddp_store_free(st);
    atomic_fetch_add(&r->done, 1);
    return rc ? 1 : 0;
}

static ddp_sim_t *store_sim(store_run_t *r, ddp_behave_task_t ca[2])
{
    ddp_sim_opts_t so = {.seed = 9};
    ddp_sim_t *sim = ddp_behave_sim(&so, 2);
    memset(r, 0, sizeof *r);
    ddp_sim_task_opts_t srv = {.node = 0, .name = "server", .rank = -1};
    ddp_sim_add_task(sim, &srv, server_main, r);
    for (int i = 0; i < 2; i++) {
        ca[i] = (ddp_behave_task_t){.run = r, .rank = i};
        ddp_sim_task_opts_t to = {.node = i, .name = i ? "client1" : "client0", .rank = i,
                                  .start_ns = DDP_NS_PER_MS};
        ddp_sim_add_task(sim, &to, client_main, &ca[i]);
    }
    return sim;
}

/* ------------------------------------ workload: real sockets (POSIX) */

typedef struct real_client {
    ddp_sys_t *sys;
    uint16_t port;
    int me, rc;
    char msg[512];
} real_client_t;

static void *real_client_main(void *arg)
{
    real_client_t *c = arg;
    ddp_store_client_opts_t o = {.host = "127.0.0.1", .port = c->port,
                                 .seed = 5 + (uint64_t)c->me,
                                 .connect_deadline = ddp_test_deadline_ms(c->sys, 2000)};
    int rc = 0;
    ddp_store_t *st = ddp_store_client_connect(c->sys, &o, &rc);
    if (st)
        rc = ops(c->sys, st, c->me, 1);
    c->rc = rc;
    snprintf(c->msg, sizeof c->msg, "%s", rc ? ddp_err_message() : "");
    ddp_store_free(st);
    return NULL;
}

/* The server's loop, in slices of 2 ms so that the end of a run does not
 * wait out run()'s 50 ms ones. */
typedef struct real_server {
    ddp_sys_t *sys;
    ddp_store_server_t *srv;
    atomic_int stop;
} real_server_t;

static void *real_server_main(void *arg)
{
    real_server_t *r = arg;
    while (!atomic_load(&r->stop))
        if (ddp_store_server_step(r->srv, ddp_test_deadline_ms(r->sys, 2)) < 0)
            break;
    return NULL;
}

/* A server thread on loopback and two client threads, real sockets; the
 * process's open descriptors are counted before and after. */
static int real_once(const char *point, int target, char *why, size_t n)
{
    ddp_sys_t *sys = ddp_test_sys();
    int fds = ddp_test_open_fds();
    ddp_store_server_opts_t so = {.host = "127.0.0.1"};
    real_server_t rs = {.sys = sys};
    int bad = 0;
    pthread_t sth;
    if (ddp_store_server_new(sys, &so, &rs.srv) != 0 ||
        pthread_create(&sth, NULL, real_server_main, &rs) != 0) {
        snprintf(why, n, "the server did not start: %s", ddp_err_message());
        ddp_store_server_free(rs.srv);
        ddp_sys_free(sys);
        return -1;
    }
    ddp_store_server_t *srv = rs.srv;
    real_client_t c[2];
    pthread_t th[2];
    fs_arm(point, target);
    for (int i = 0; i < 2; i++) {
        c[i] = (real_client_t){.sys = sys, .port = ddp_store_server_addr(srv).port, .me = i};
        pthread_create(&th[i], NULL, real_client_main, &c[i]);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    ddp_fault_disable(point);
    atomic_store(&rs.stop, 1);
    pthread_join(sth, NULL);
    ddp_store_server_free(srv);
    int calls = atomic_load(&g_fs.calls);
    for (int i = 0; i < 2 && !bad; i++)
        if (c[i].rc && (!atomic_load(&g_fs.fired) || strlen(c[i].msg) < 24)) {
            snprintf(why, n, "client %d failed%s: %s", i,
                     atomic_load(&g_fs.fired) ? " without a cause" : " without a fault",
                     c[i].msg);
            bad = 1;
        }
    int left = ddp_test_open_fds() - fds;
    if (!bad && left != 0) {
        snprintf(why, n, "%d descriptor(s) still open after teardown", left);
        bad = 1;
    }
    ddp_sys_free(sys);
    return bad ? -1 : calls;
}

/* ------------------------------------------------- workload: plugin */

static const char PLUGIN_SCN[] = "scenario \"faultsim: two ranks, tcp\"\n"
                                 "nodes 2\ndevices 1\nlauncher torchrun\n"
                                 "accelerators ddp_cpu_hpc\ntimeout 5s\nseed 4\n"
                                 "expect invariants\n";

/* ------------------------------------------------------------ the loop */

typedef enum { W_STORE, W_PLUGIN, W_REAL } workload_t;

typedef struct verdict {
    int bad;
    char why[700];
} verdict_t;

static void say(verdict_t *v, const char *fmt, const char *a, const char *b)
{
    if (!v->bad++)
        snprintf(v->why, sizeof v->why, fmt, a, b);
}

/* One run of workload w with call `target` of `point` failing (0: none):
 * the invariants of every run; returns how often the point was called. */
static int run_once(workload_t w, const char *point, int target, verdict_t *v)
{
    if (w == W_REAL) {
        char why[700] = "";
        int calls = real_once(point, target, why, sizeof why);
        if (calls < 0)
            say(v, "%s%s", why, "");
        return calls < 0 ? atomic_load(&g_fs.calls) : calls;
    }
    ddp_sim_t *sim = NULL;
    ddp_plan_t *plan = NULL;
    store_run_t r;
    ddp_behave_task_t ca[2];
    if (w == W_STORE) {
        sim = store_sim(&r, ca);
    } else {
        sim = ddp_behave_scenario(PLUGIN_SCN, "ddp_cpu_hpc", NULL, &plan);
    }
    fs_arm(point, target);
    ddp_sim_result_t res = ddp_sim_run(sim);
    ddp_fault_disable(point);
    int calls = atomic_load(&g_fs.calls);
    char who[128];
    if (res != DDP_SIM_DONE)
        say(v, "the run did not finish (%s): %s", res == DDP_SIM_DEADLOCK ? "deadlock"
                                                                            : "time limit",
            ddp_sim_deadlock_report(sim));
    if (ddp_behave_leaked(sim, who, sizeof who))
        say(v, "%s exited with a socket open%s", who, "");
    for (int t = 0; t < ddp_sim_task_count(sim); t++) {
        const ddp_sim_outcome_t *o = ddp_sim_outcome(sim, t);
        if (o->state != DDP_SIM_TASK_EXITED)
            say(v, "task %s did not exit normally%s", o->name, "");
        else if (o->rc && !o->thread && strlen(o->message) < 24)
            say(v, "task %s failed without a cause: \"%s\"", o->name, o->message);
    }
    if (w == W_STORE && !atomic_load(&g_fs.fired) && (r.rc[0] || r.rc[1]))
        say(v, "without a fault a client failed: %s%s", r.rc[0] ? r.msg[0] : r.msg[1], "");
    ddp_sim_free(sim);
    ddp_plan_free(plan);
    return calls;
}


/* Memory without LSan: the heap in use (mallinfo2) around a repeat of the
 * run made in a thread of its own: a thread's freed-block cache is given
 * back when it exits, so what is still in use afterwards was leaked (or is
 * a cache that settles: two runs warm up, then each of four repeats must
 * leave the heap where it found it). */
#if HEAP_CHECK
typedef struct rep {
    workload_t w;
    const char *point;
    int target;
} rep_t;

static void *repeat_thread(void *arg)
{
    rep_t *r = arg;
    verdict_t v = {0};
    run_once(r->w, r->point, r->target, &v);
    return NULL;
}

static ssize_t heap_delta_of_run(rep_t *r)
{
    size_t before = mallinfo2().uordblks;
    pthread_t th;
    if (pthread_create(&th, NULL, repeat_thread, r) != 0)
        return 0;
    pthread_join(th, NULL);
    return (ssize_t)(mallinfo2().uordblks - before);
}

static int leaks_after(workload_t w, const char *point, int target)
{
    rep_t r = {w, point, target};
    heap_delta_of_run(&r);
    heap_delta_of_run(&r);
    int grew = 0;
    for (int i = 0; i < 4; i++)
        grew += heap_delta_of_run(&r) > 0;
    return grew == 4;
}
#endif

typedef struct point {
    const char *name;
    workload_t w;
} point_t;

/* The points each workload's code paths check (include/ddp/faults.h). */
static const point_t g_points[] = {
    /* the sys seam, as the simulator implements it */
    {"sys/net/listen", W_STORE},     {"sys/net/accept", W_STORE},
    {"sys/net/connect", W_STORE},    {"sys/net/resolve", W_STORE},
    {"sys/net/send", W_STORE},       {"sys/net/recv", W_STORE},
    {"sys/net/poll", W_STORE},       {"sys/net/epoll", W_STORE},
    /* the store client and server */
    {"store/client/connect", W_STORE}, {"store/client/validate", W_STORE},
    {"store/client/wait", W_STORE},    {"store/client/send", W_STORE},
    {"store/client/recv", W_STORE},    {"store/server/accept", W_STORE},
    {"store/server/validate", W_STORE}, {"store/server/recv", W_STORE},
    {"store/server/reply", W_STORE},   {"store/server/send", W_STORE},
    /* the whole connection: plugin, store, tcp backend */
    {"sys/net/listen", W_PLUGIN},    {"sys/net/accept", W_PLUGIN},
    {"sys/net/connect", W_PLUGIN},   {"sys/net/send", W_PLUGIN},
    {"sys/net/recv", W_PLUGIN},      {"sys/net/poll", W_PLUGIN},
    {"sys/net/epoll", W_PLUGIN},
    {"sys/proc/thread", W_PLUGIN},   {"store/client/send", W_PLUGIN},
    {"store/client/recv", W_PLUGIN}, {"store/server/reply", W_PLUGIN},
    {"pg/tcp/connect", W_PLUGIN},    {"pg/tcp/handshake", W_PLUGIN},
    /* real sockets: the POSIX sys and the same store paths */
    {"sys/net/accept", W_REAL},      {"sys/net/connect", W_REAL},
    {"sys/net/send", W_REAL},        {"sys/net/recv", W_REAL},
    {"sys/net/poll", W_REAL},        {"sys/net/resolve", W_REAL},
    {"sys/net/epoll", W_REAL},
    {"store/client/connect", W_REAL},
    {"store/client/validate", W_REAL}, {"store/client/wait", W_REAL},
    {"store/client/send", W_REAL},   {"store/client/recv", W_REAL},
    {"store/server/accept", W_REAL}, {"store/server/validate", W_REAL},
    {"store/server/recv", W_REAL},   {"store/server/reply", W_REAL},
    {"store/server/send", W_REAL},
};
#define NPOINTS (sizeof g_points / sizeof g_points[0])

/* Points of include/ddp/faults.h this loop leaves to others, and why. */
static const char *const g_elsewhere[] = {
    "sys/time/sleep",   /* only a retry sleeps: no clean run reaches it */
    "sys/net/hostname", /* LSF's node rank only; POSIX only */
    "sys/proc/spawn",   /* ddp's relaunch: no socket or buffer of these paths */
    "sys/proc/wait",    "sys/proc/kill", "sys/fs/read",
    "pg/nccl/uid",      /* tests/test_behave_nccl.c (fake libnccl) */
    "pg/nccl/init",     "ddp/phase/enter", /* does nothing by itself */
};

/* The loop over workload w's points. */
static void faultsim(workload_t w)
{
    int runs = 0;
    for (size_t i = 0; i < NPOINTS; i++) {
        const point_t *p = &g_points[i];
        if (p->w != w)
            continue;
        verdict_t v = {0};
        int calls = run_once(w, p->name, 0, &v);
        CU_ASSERT_EQUAL(v.bad, 0);
        if (calls == 0) {
            printf("\n  %s: never called by the %s workload\n", p->name,
                   w == W_STORE ? "store" : w == W_PLUGIN ? "plugin" : "real");
            CU_FAIL("a listed point is never reached");
            continue;
        }
        int bad_at = 0;
        for (int n = 1; n <= calls; n++) {
            verdict_t vn = {0};
            run_once(w, p->name, n, &vn);
            runs++;
            if (vn.bad && !bad_at) {
                bad_at = n;
                printf("\n  %s, call %d of %d: %s\n", p->name, n, calls, vn.why);
            }
        }
        CU_ASSERT_EQUAL(bad_at, 0);
#if HAVE_LSAN
        /* Memory, once per point, after all its runs: LSan's report shows
         * where the leaked blocks were allocated. It reports them again at
         * every later check, so only the first leak is news. */
        static int g_leak_reported;
        if (!g_leak_reported && __lsan_do_recoverable_leak_check()) {
            g_leak_reported = 1;
            printf("\n  %s (the %s workload, calls 1..%d failed in turn): memory "
                   "leaked, LSan's report above; later points are not checked for "
                   "memory\n",
                   p->name, w == W_STORE ? "store" : w == W_PLUGIN ? "plugin" : "real", calls);
            CU_FAIL("memory leaked on an error path");
        }
#endif
#if HEAP_CHECK
        /* Without LSan: up to 8 calls (3 with real sockets), evenly spread,
         * first and last. */
        int most = w == W_REAL ? 3 : 8;
        int step = calls > most ? (calls + most - 2) / (most - 1) : 1;
        for (int n = 1; n <= calls; n = n + step > calls && n < calls ? calls : n + step)
            if (leaks_after(w, p->name, n)) {
                printf("\n  %s, call %d of %d: the heap grows run after run\n", p->name,
                       n, calls);
                CU_FAIL("memory leaked on an error path");
                break;
            }
#endif
    }
    CU_ASSERT(runs > 0);
}

static void test_store_faultsim(void) { faultsim(W_STORE); }
static void test_plugin_faultsim(void) { faultsim(W_PLUGIN); }
static void test_real_faultsim(void) { faultsim(W_REAL); }

/* The loop's list and the fault points of include/ddp/faults.h (the one
 * list; docs/fault-points.md is generated from it) agree: every point is
 * looped over here or left to another suite with a reason. */
static void test_points_are_the_documented_ones(void)
{
    for (size_t i = 0; i < NPOINTS; i++) {
        if (!ddp_fault_point_find(g_points[i].name))
            printf("\n  %s is not a point of include/ddp/faults.h\n", g_points[i].name);
        CU_ASSERT_PTR_NOT_NULL(ddp_fault_point_find(g_points[i].name));
    }
    for (int id = 0; id < DDP_FP_COUNT; id++) {
        const char *name = ddp_fault_name((ddp_fault_id_t)id);
        int known = 0;
        for (size_t i = 0; !known && i < NPOINTS; i++)
            known = !strcmp(name, g_points[i].name);
        for (size_t i = 0; !known && i < sizeof g_elsewhere / sizeof *g_elsewhere; i++)
            known = !strcmp(name, g_elsewhere[i]);
        if (!known)
            printf("\n  include/ddp/faults.h lists %s: loop over it here or say why not\n",
                   name);
        CU_ASSERT_TRUE(known);
    }
}

static int suite_init(void)
{
    fiu_init(0); /* before any fiu_enable, also when this suite runs alone */
    return ddp_behave_suite_init();
}

DDP_SUITE("behave_leaks", suite_init, ddp_behave_suite_cleanup,
          {"the loop's points are include/ddp/faults.h's", test_points_are_the_documented_ones},
          {"faultsim: store client and server, every point, every call", test_store_faultsim},
          {"faultsim: plugin, store and tcp backend, every point, every call",
           test_plugin_faultsim},
          {"faultsim: store over real loopback sockets, descriptors counted",
           test_real_faultsim})
