/* bench/nccl_hw.c — the nccl backend on real GPUs (scripts/hw-test.sh).
 *
 *   nccl_hw [--deadline-ms N]       run every scenario, print a summary
 *   nccl_hw --probe                 (internal) exit status = GPU count
 *   nccl_hw --worker SCN RANK WORLD PORT DEVICE DEADLINE_MS   (internal)
 *
 * One process per rank on loopback (NCCL_SOCKET_IFNAME=lo unless set), the
 * store served by rank 0 (our TCPStore-protocol server on a thread), one
 * GPU per rank. Scenarios (G = visible GPUs):
 *   allreduce   world 1..G: init, a 4 MiB int32 allreduce checked element
 *               by element, a barrier; init time per world size
 *   uid-lost    world max(2, G): rank 0's unique-id publish fails
 *               (pg/nccl/uid), so the store never answers the others' GET;
 *               each must fail with DDP_ETIMEOUT naming the key within its
 *               deadline (the group deadline, not the store's 300 s)
 *   stall       world 1: pg/nccl/init without failinfo, so a real
 *               non-blocking init is never taken as ready and must be
 *               aborted (ncclCommAbort) at the deadline
 *   kill        world G >= 2: the last rank SIGKILLs itself at pg/nccl/init
 *               (after the id exchange, before joining); the others' init
 *               must end within its deadline with an error
 *   solo        4 independent 1-rank communicators side by side, one store
 *               (hosted by the first), each with its own prefix: the store
 *               under concurrent NCCL init
 * Each worker publishes "rc took_ms ..." under hw/<scn>/result/<rank>;
 * rank 0 collects, checks what the scenario expects and prints it. The
 * outcome checks (rc, error text, "ended within deadline + slack") decide
 * the exit status; times are figures only. Without a GPU it prints
 * "no GPU: skipped" and exits 0, so `make bench` passes anywhere. */
#include <errno.h>
#include <fiu-control.h>
#include <fiu.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dlfcn.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/log.h"
#include "ddp/pg.h"
#include "ddp/store.h"
#include "ddp/sys.h"

/* How late past its deadline a rank may return and still count as "within
 * the deadline": ncclCommAbort has to join NCCL's init thread. */
#define SLACK_MS 3000.0
#define AR_COUNT (1u << 20) /* int32 elements: 4 MiB */
#define AR_ITERS 5
#define SOLO_N 4

static ddp_sys_t *g_sys;
static const char *g_self;

static double ms_since(int64_t t0)
{
    return (double)(ddp_sys_now(g_sys) - t0) / 1e6;
}

/* ------------------------------------------------------------ worker */

typedef struct result {
    int rc;
    double took_ms; /* ddp_pg_new */
    double ar_ms;   /* one allreduce, mean of AR_ITERS */
    int ok;         /* allreduce result checked */
    char msg[600];
} result_t;

/* pg/nccl/init external callback for the kill scenario: dies the way a
 * crashed rank does, without any cleanup. */
static int die_cb(const char *name, int *failnum, void **failinfo,
                  unsigned int *flags)
{
    (void)name, (void)failnum, (void)failinfo, (void)flags;
    ddp_sys_kill(g_sys, (ddp_pid_t)getpid(), SIGKILL);
    return 1;
}

static void run_allreduce(ddp_pg_t *pg, result_t *r, int64_t deadline)
{
    int32_t *buf = malloc(AR_COUNT * sizeof *buf);
    if (!buf) {
        snprintf(r->msg, sizeof r->msg, "out of memory");
        return;
    }
    int w = ddp_pg_world(pg);
    int64_t want = (int64_t)w * (w + 1) / 2;
    r->ok = 1;
    double total = 0;
    for (int it = 0; it <= AR_ITERS && r->ok; it++) {
        for (size_t i = 0; i < AR_COUNT; i++)
            buf[i] = ddp_pg_rank(pg) + 1;
        int64_t t0 = ddp_sys_now(g_sys);
        int rc = ddp_pg_allreduce(pg, buf, AR_COUNT, DDP_INT32, DDP_SUM,
                                  deadline);
        if (it > 0) /* the first one warms up NCCL's channels */
            total += ms_since(t0);
        if (rc) {
            r->rc = rc, r->ok = 0;
            snprintf(r->msg, sizeof r->msg, "%s", ddp_err_message());
            break;
        }
        for (size_t i = 0; i < AR_COUNT && r->ok; i++)
            if (buf[i] != want) {
                r->ok = 0;
                snprintf(r->msg, sizeof r->msg,
                         "allreduce element %zu is %d, want %lld", i,
                         (int)buf[i], (long long)want);
            }
    }
    r->ar_ms = total / AR_ITERS;
    if (r->ok && (r->rc = ddp_pg_barrier(pg, deadline)) != 0) {
        r->ok = 0;
        snprintf(r->msg, sizeof r->msg, "%s", ddp_err_message());
    }
    free(buf);
}

static int expected(const char *scn, int rank, const result_t *r,
                    double deadline_ms)
{
    int in_time = r->took_ms <= deadline_ms + SLACK_MS;
    if (!strcmp(scn, "allreduce") || !strcmp(scn, "solo"))
        return r->rc == 0 && r->ok;
    if (!strcmp(scn, "uid-lost"))
        return rank == 0 ? r->rc == -ECONNRESET
                         : r->rc == DDP_ETIMEOUT &&
                               strstr(r->msg, "/nccl/uid\"") && in_time;
    if (!strcmp(scn, "stall"))
        return r->rc == DDP_ETIMEOUT && strstr(r->msg, "aborted") && in_time;
    if (!strcmp(scn, "kill"))
        return r->rc != 0 && in_time;
    return 0;
}

static void put_result(ddp_store_t *st, const char *scn, int rank,
                       const result_t *r, int64_t deadline)
{
    char key[64], val[1024];
    snprintf(key, sizeof key, "hw/%s/result/%d", scn, rank);
    snprintf(val, sizeof val, "%d %.3f %.4f %d %s", r->rc, r->took_ms,
             r->ar_ms, r->ok, r->msg);
    ddp_store_set_str(st, key, val, deadline);
}

static int get_result(ddp_store_t *st, const char *scn, int rank,
                      result_t *r, int64_t deadline)
{
    char key[64];
    ddp_buf_t v = {0};
    snprintf(key, sizeof key, "hw/%s/result/%d", scn, rank);
    memset(r, 0, sizeof *r);
    if (ddp_store_get(st, key, &v, deadline) != 0)
        return -1;
    char *s = malloc(v.len + 1);
    int n = 0, off = 0;
    if (s) {
        memcpy(s, v.data, v.len);
        s[v.len] = '\0';
        n = sscanf(s, "%d %lf %lf %d %n", &r->rc, &r->took_ms, &r->ar_ms,
                   &r->ok, &off);
        if (n == 4)
            snprintf(r->msg, sizeof r->msg, "%s", s + off);
    }
    free(s);
    ddp_buf_free(&v);
    return n == 4 ? 0 : -1;
}

/* Rank 0: everyone's outcome, checked and printed. Returns 0 when the
 * scenario went as expected. */
static int report(ddp_store_t *st, const char *scn, int world,
                  const result_t *mine, double deadline_ms)
{
    int victim = !strcmp(scn, "kill") ? world - 1 : -1;
    int bad = 0;
    double imin = 1e300, imax = 0, armax = 0;
    int64_t collect = ddp_sys_deadline_in(
        g_sys, (int64_t)(deadline_ms + 2 * SLACK_MS) * DDP_NS_PER_MS +
                   30 * DDP_NS_PER_S);
    for (int r = 0; r < world; r++) {
        result_t x;
        if (r == victim) {
            printf("    rank %d: killed itself at pg/nccl/init\n", r);
            continue;
        }
        if (r == 0)
            x = *mine;
        else if (get_result(st, scn, r, &x, collect) != 0) {
            printf("    rank %d: NO RESULT\n", r);
            bad = 1;
            continue;
        }
        int ok = expected(scn, r, &x, deadline_ms);
        bad |= !ok;
        if (x.took_ms < imin)
            imin = x.took_ms;
        if (x.took_ms > imax)
            imax = x.took_ms;
        if (x.ar_ms > armax)
            armax = x.ar_ms;
        printf("    rank %d: %s, init returned %s after %.1f ms%s%s\n", r,
               ok ? "as expected" : "UNEXPECTED",
               x.rc ? ddp_err_name(x.rc) : "0", x.took_ms,
               x.msg[0] ? ": " : "", x.msg);
    }
    if (!strcmp(scn, "allreduce") || !strcmp(scn, "solo"))
        printf("  %-9s world %d: %s; init %.1f..%.1f ms; allreduce %u x int32 "
               "%.3f ms (slowest rank)\n",
               scn, world, bad ? "FAIL" : "ok", imin, imax, AR_COUNT, armax);
    else
        printf("  %-9s world %d: %s; deadline %.0f ms, ranks returned after "
               "%.1f..%.1f ms\n",
               scn, world, bad ? "FAIL" : "ok", deadline_ms, imin, imax);
    fflush(stdout);
    return bad;
}

static int worker(const char *scn, int rank, int world, int port, int device,
                  int deadline_ms)
{
    int solo = !strcmp(scn, "solo");
    int host = rank == 0; /* serves the store and reports */
    ddp_store_server_t *srv = NULL;
    if (host) {
        ddp_store_server_opts_t so = {.host = "127.0.0.1",
                                      .port = (uint16_t)port};
        if (ddp_store_server_new(g_sys, &so, &srv) != 0 ||
            ddp_store_server_start_thread(srv) != 0) {
            fprintf(stderr, "nccl_hw: %s\n", ddp_err_message());
            return 1;
        }
    }
    ddp_store_client_opts_t co = {
        .host = "127.0.0.1", .port = (uint16_t)port,
        .connect_deadline = ddp_sys_deadline_in(g_sys, 60 * DDP_NS_PER_S),
        .seed = (uint64_t)rank + 1, .backoff_initial_ns = 20 * DDP_NS_PER_MS};
    int err = 0;
    ddp_store_t *st = ddp_store_client_connect(g_sys, &co, &err);
    if (!st) {
        fprintf(stderr, "nccl_hw: rank %d: %s\n", rank, ddp_err_message());
        return 1;
    }
    if (!strcmp(scn, "uid-lost") && rank == 0)
        fiu_enable("pg/nccl/uid", 1, NULL, 0);
    if (!strcmp(scn, "stall"))
        fiu_enable("pg/nccl/init", 1, NULL, 0);
    if (!strcmp(scn, "kill") && rank == world - 1)
        fiu_enable_external("pg/nccl/init", 1, NULL, 0, die_cb);

    char prefix[64];
    if (solo)
        snprintf(prefix, sizeof prefix, "hw/solo/%d", rank);
    else
        snprintf(prefix, sizeof prefix, "hw/%s/w%d", scn, world);
    ddp_ident_set_rank(rank);
    int64_t t0 = ddp_sys_now(g_sys);
    ddp_pg_init_t in = {.sys = g_sys, .store = st, .prefix = prefix,
                        .rank = solo ? 0 : rank, .world = solo ? 1 : world,
                        .deadline = ddp_sys_deadline_in(
                            g_sys, (int64_t)deadline_ms * DDP_NS_PER_MS),
                        .device = device};
    ddp_pg_t *pg = NULL;
    result_t r = {0};
    r.rc = ddp_pg_new("nccl", &in, &pg);
    r.took_ms = ms_since(t0);
    if (r.rc)
        snprintf(r.msg, sizeof r.msg, "%s", ddp_err_message());
    else if (!strcmp(scn, "allreduce") || solo)
        run_allreduce(pg, &r, ddp_sys_deadline_in(g_sys, 60 * DDP_NS_PER_S));
    ddp_pg_destroy(pg);

    int64_t dl = ddp_sys_deadline_in(g_sys, 30 * DDP_NS_PER_S);
    int bad;
    if (host) {
        bad = report(st, scn, solo ? SOLO_N : world, &r, deadline_ms);
    } else {
        put_result(st, scn, rank, &r, dl);
        bad = !expected(scn, rank, &r, deadline_ms);
    }
    ddp_store_free(st);
    if (srv) {
        ddp_store_server_join_thread(srv);
        ddp_store_server_free(srv);
    }
    return bad;
}

/* ------------------------------------------------------------ probe */

/* Exit status: the number of visible GPUs (0: none), 200 when there are
 * GPUs but the backend is not built. Runs in a child so the driver never
 * initialises CUDA (CUDA state does not survive fork, and the driver
 * spawns the ranks). */
static int probe(void)
{
    int n = 0;
    static const char *const names[] = {"libcudart.so.13", "libcudart.so.12",
                                        "libcudart.so"};
    void *rt = NULL;
    for (size_t i = 0; !rt && i < sizeof names / sizeof names[0]; i++)
        rt = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    void *sym = rt ? dlsym(rt, "cudaGetDeviceCount") : NULL;
    if (sym) {
        int (*count)(int *);
        memcpy(&count, &sym, sizeof sym);
        if (count(&n) != 0)
            n = 0;
    }
    /* A one-rank group on device 0: with GPUs it proves the backend works
     * before the scenarios start; without, its error says why not. */
    ddp_store_t *st = ddp_store_memory_new(g_sys);
    ddp_pg_init_t in = {.sys = g_sys, .store = st, .prefix = "hw/probe",
                        .rank = 0, .world = 1,
                        .deadline = ddp_sys_deadline_in(g_sys,
                                                        60 * DDP_NS_PER_S),
                        .device = 0};
    ddp_pg_t *pg = NULL;
    int rc = ddp_pg_new("nccl", &in, &pg);
    if (rc)
        printf("nccl_hw: %s\n", ddp_err_message());
    ddp_pg_destroy(pg);
    ddp_store_free(st);
    fflush(stdout);
    if (n > 0 && rc == DDP_ENOT_BUILT)
        return 200;
    if (n > 0 && rc)
        return 201;
    return n > 100 ? 100 : n;
}

/* ------------------------------------------------------------ driver */

static ddp_env_t *g_child_env;

/* Starts n processes (argvs[i] is process i's argument vector) and waits
 * for all of them until the deadline; overrunning ones are killed. */
static int spawn_wait(char **const *argvs, int n, int64_t deadline,
                      int *status)
{
    ddp_pid_t *pids = calloc((size_t)n, sizeof *pids);
    if (!pids)
        return -ENOMEM;
    int rc = 0;
    for (int i = 0; i < n; i++) {
        ddp_spawn_t sp = {.argv = argvs[i], .env = g_child_env,
                          .name = "nccl_hw worker"};
        if (ddp_sys_spawn(g_sys, &sp, &pids[i]) != 0) {
            fprintf(stderr, "nccl_hw: %s\n", ddp_err_message());
            pids[i] = 0;
            rc = -1;
        }
    }
    for (int i = 0; i < n; i++) {
        status[i] = -1;
        if (pids[i] && ddp_sys_wait(g_sys, pids[i], &status[i], deadline)) {
            ddp_sys_kill(g_sys, pids[i], SIGKILL);
            ddp_sys_wait(g_sys, pids[i], &status[i], DDP_DEADLINE_NEVER);
            fprintf(stderr, "nccl_hw: rank %d overran and was killed\n", i);
            rc = -1;
        }
    }
    free(pids);
    return rc;
}

typedef struct argvbuf {
    char s[7][32];
    char *v[9];
} argvbuf_t;

/* Runs one scenario: world processes, rank r on device dev(r). */
static int scenario(const char *scn, int world, int ngpu, int deadline_ms,
                    double *wall_ms)
{
    uint16_t port = 0;
    if (ddp_sys_free_port(g_sys, &port) != 0) {
        fprintf(stderr, "nccl_hw: %s\n", ddp_err_message());
        return 1;
    }
    argvbuf_t *a = calloc((size_t)world, sizeof *a);
    char ***argvs = calloc((size_t)world, sizeof *argvs);
    int *status = calloc((size_t)world, sizeof *status);
    if (!a || !argvs || !status) {
        free(a), free(argvs), free(status);
        return 1;
    }
    for (int r = 0; r < world; r++) {
        snprintf(a[r].s[0], sizeof a[r].s[0], "%s", scn);
        snprintf(a[r].s[1], sizeof a[r].s[1], "%d", r);
        snprintf(a[r].s[2], sizeof a[r].s[2], "%d", world);
        snprintf(a[r].s[3], sizeof a[r].s[3], "%u", (unsigned)port);
        snprintf(a[r].s[4], sizeof a[r].s[4], "%d", r % ngpu);
        snprintf(a[r].s[5], sizeof a[r].s[5], "%d", deadline_ms);
        a[r].v[0] = (char *)g_self;
        a[r].v[1] = (char *)"--worker";
        for (int k = 0; k < 6; k++)
            a[r].v[2 + k] = a[r].s[k];
        a[r].v[8] = NULL;
        argvs[r] = a[r].v;
    }
    fflush(stdout); /* the workers write to the same stdout */
    int64_t t0 = ddp_sys_now(g_sys);
    int64_t limit = ddp_sys_deadline_in(
        g_sys, (int64_t)deadline_ms * DDP_NS_PER_MS + 120 * DDP_NS_PER_S);
    int bad = spawn_wait(argvs, world, limit, status) != 0;
    *wall_ms = ms_since(t0);
    for (int r = 0; r < world; r++) {
        int want = !strcmp(scn, "kill") && r == world - 1 ? 128 + SIGKILL : 0;
        if (status[r] != want) {
            printf("    rank %d exited with status %d (expected %d)\n", r,
                   status[r], want);
            bad = 1;
        }
    }
    free(a), free(argvs), free(status);
    return bad;
}

int main(int argc, char **argv)
{
    g_self = argv[0];
    fiu_init(0);
    g_sys = ddp_sys_posix_new(NULL);
    if (!g_sys)
        return 1;
    ddp_log_init_from_env(ddp_sys_env(g_sys));
    int rc;
    if (argc == 8 && !strcmp(argv[1], "--worker")) {
        rc = worker(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]),
                    atoi(argv[6]), atoi(argv[7]));
        ddp_sys_free(g_sys);
        return rc;
    }
    if (argc == 2 && !strcmp(argv[1], "--probe")) {
        rc = probe();
        ddp_sys_free(g_sys);
        return rc;
    }
    int deadline_ms = 5000;
    if (argc == 3 && !strcmp(argv[1], "--deadline-ms"))
        deadline_ms = atoi(argv[2]);
    else if (argc != 1) {
        fprintf(stderr, "usage: %s [--deadline-ms N]\n", argv[0]);
        return 2;
    }
    if (deadline_ms < 100)
        deadline_ms = 100;

    g_child_env = ddp_env_clone(ddp_sys_env(g_sys));
    if (!g_child_env)
        return 1;
    /* NCCL reads its settings from the process environment, which a child
     * started with argv gets from this map. */
    if (!ddp_env_has(g_child_env, "NCCL_SOCKET_IFNAME"))
        ddp_env_set(g_child_env, "NCCL_SOCKET_IFNAME", "lo");

    char *pargv[] = {(char *)g_self, (char *)"--probe", NULL};
    char **const pv[] = {pargv};
    int ngpu = 0;
    fflush(stdout);
    if (spawn_wait(pv, 1, ddp_sys_deadline_in(g_sys, 120 * DDP_NS_PER_S),
                   &ngpu) != 0)
        ngpu = -1;
    if (ngpu == 0) {
        printf("no GPU: skipped\n");
        ddp_env_free(g_child_env);
        ddp_sys_free(g_sys);
        return 0;
    }
    if (ngpu < 0 || ngpu > 100) {
        printf("nccl_hw: GPUs are visible but the nccl backend is unusable "
               "(probe status %d)\n",
               ngpu);
        ddp_env_free(g_child_env);
        ddp_sys_free(g_sys);
        return 1;
    }

    printf("nccl_hw: %d GPU%s, fault deadline %d ms\n", ngpu,
           ngpu == 1 ? "" : "s", deadline_ms);
    int failed = 0, ran = 0;
    double wall;
    for (int w = 1; w <= ngpu; w++) {
        ran++;
        failed += scenario("allreduce", w, ngpu, 60000, &wall);
    }
    ran++;
    failed += scenario("uid-lost", ngpu < 2 ? 2 : ngpu, ngpu, deadline_ms,
                       &wall);
    ran++;
    failed += scenario("stall", 1, ngpu, deadline_ms, &wall);
    if (ngpu >= 2) {
        ran++;
        failed += scenario("kill", ngpu, ngpu, deadline_ms, &wall);
    } else {
        printf("  kill      needs 2 GPUs: not run\n");
    }
    ran++;
    failed += scenario("solo", SOLO_N, ngpu, 60000, &wall);
    printf("nccl_hw: %d/%d scenarios as expected\n", ran - failed, ran);
    ddp_env_free(g_child_env);
    ddp_sys_free(g_sys);
    return failed ? 1 : 0;
}
