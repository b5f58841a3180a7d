/* bench/store.c — store throughput and rendezvous time on loopback.
 *
 *   store [--ops N] [--ranks R]
 *
 * Our server on a thread (127.0.0.1, free port), then:
 *  - SET and GET ops/s with 1 and with 50 clients, each client its own
 *    thread and connection, N ops in all for 50 clients (default 200,000,
 *    split evenly, like `redis-benchmark -n 200000 -c 50`), N/10 for one.
 *    A SET has no reply in the TCPStore protocol, so each client ends its
 *    SETs with a PING and the clock stops when every SET was served. A GET of
 *    an existing key is CHECK + GET in one write, one round trip (our
 *    client's fast path; TCPStore's own client does WAIT, then GET). Like
 *    redis-benchmark, every client has exactly one request in flight and
 *    reads its whole reply before it sends the next one.
 *  - The client threads are SCHED_BATCH (Linux; no privilege needed). They
 *    are the load generator, and redis-benchmark's load generator is one
 *    event-loop thread that never competes with its server for a wake-up.
 *    Fifty ordinary threads, each woken by its reply, preempt the single
 *    server thread on a shared CPU about every other reply (measured: ~0.45
 *    involuntary switches of the server per GET on 2 CPUs), so the figure
 *    would measure the scheduler's treatment of the load generator rather
 *    than the server. Batch threads still get their fair CPU share; they
 *    just do not preempt on wake-up. GET c=50 is also run once with ordinary
 *    threads and printed as "GET c=50 (normal sched)", for comparison.
 *  - R-client rendezvous (default 1,024): each rank connects, runs
 *    wait_for_workers and the store-based barrier; time until all are done.
 * Figures only, no assertions; lines are "NAME: VALUE UNIT" so
 * bench/store.sh can read them. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "ddp/err.h"
#include "ddp/log.h"
#include "ddp/store.h"
#include "ddp/sys.h"

static ddp_sys_t *g_sys;
static uint16_t g_port;

typedef struct job {
    pthread_t th;
    int id, ops, get; /* get: GET phase, else SET */
    int batch;        /* run as SCHED_BATCH (see the top of the file) */
    ddp_store_t *st;
    pthread_barrier_t *start;
    int rc;
} job_t;

static ddp_store_t *connect_one(uint64_t seed)
{
    ddp_store_client_opts_t o = {
        .host = "127.0.0.1",
        .port = g_port,
        .connect_deadline = ddp_sys_deadline_in(g_sys, 60 * DDP_NS_PER_S),
        .seed = seed,
        .backoff_initial_ns = 10 * DDP_NS_PER_MS};
    int err = 0;
    ddp_store_t *st = ddp_store_client_connect(g_sys, &o, &err);
    if (!st)
        fprintf(stderr, "bench: %s\n", ddp_err_message());
    return st;
}

static void *job_main(void *arg)
{
    job_t *j = arg;
    char key[32];
    const char val[] = "xxx"; /* redis-benchmark default: 3 bytes */
    snprintf(key, sizeof key, "bench/%d", j->id);
    int64_t dl = DDP_DEADLINE_NEVER;
#ifdef SCHED_BATCH
    if (j->batch) {
        struct sched_param sp = {0};
        pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
    }
#endif
    pthread_barrier_wait(j->start);
    for (int i = 0; i < j->ops && j->rc == 0; i++) {
        if (j->get) {
            ddp_buf_t b = {0};
            j->rc = ddp_store_get(j->st, key, &b, dl);
            ddp_buf_free(&b);
        } else {
            j->rc = ddp_store_set(j->st, key, val, 3, dl);
        }
    }
    if (j->rc == 0 && !j->get)
        j->rc = ddp_store_ping(j->st, dl);
    return NULL;
}

/* ops/s of one phase with n clients (connections made beforehand). */
static double run_phase(ddp_store_t **sts, int n, int total, int get,
                        int batch)
{
    job_t *js = calloc((size_t)n, sizeof *js);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++) {
        js[i] = (job_t){.id = i, .ops = total / n, .get = get, .st = sts[i],
                        .batch = batch, .start = &start};
        pthread_create(&js[i].th, NULL, job_main, &js[i]);
    }
    pthread_barrier_wait(&start);
    int64_t t0 = ddp_sys_now(g_sys);
    int failed = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(js[i].th, NULL);
        failed |= js[i].rc != 0;
    }
    int64_t t1 = ddp_sys_now(g_sys);
    pthread_barrier_destroy(&start);
    free(js);
    if (failed)
        return -1;
    return (double)(total / n * n) / ((double)(t1 - t0) / 1e9);
}

static void bench_ops(int clients, int total)
{
    ddp_store_t **sts = calloc((size_t)clients, sizeof *sts);
    for (int i = 0; i < clients; i++)
        if (!(sts[i] = connect_one((uint64_t)i + 1)))
            goto out;
    double set = run_phase(sts, clients, total, 0, 1);
    double get = run_phase(sts, clients, total, 1, 1);
    double get_normal = clients > 1 ? run_phase(sts, clients, total, 1, 0) : 0;
    printf("SET c=%d: %.0f ops/s (%d ops, no reply: pipelined)\n", clients,
           set, total);
    printf("GET c=%d: %.0f ops/s (%d ops, one in flight per client; CHECK + "
           "GET in one round trip, the key exists)\n",
           clients, get, total);
    if (clients > 1)
        printf("GET c=%d (normal sched): %.0f ops/s (the same with ordinary "
               "client threads)\n",
               clients, get_normal);
out:
    for (int i = 0; i < clients; i++)
        ddp_store_free(sts[i]);
    free(sts);
}

typedef struct rank {
    pthread_t th;
    int rank, world, rc;
    int64_t connected, done;
} rank_t;

static void *rank_main(void *arg)
{
    rank_t *r = arg;
    int64_t dl = ddp_sys_deadline_in(g_sys, 120 * DDP_NS_PER_S);
    ddp_store_t *st = connect_one((uint64_t)r->rank + 1000);
    r->rc = st ? 0 : -1;
    r->connected = ddp_sys_now(g_sys);
    if (st && r->rc == 0)
        r->rc = ddp_store_wait_for_workers(st, r->rank, r->world, dl);
    if (st && r->rc == 0)
        r->rc = ddp_store_barrier(st, "bench", r->world, dl);
    if (r->rc)
        fprintf(stderr, "bench rank %d: %s\n", r->rank, ddp_err_message());
    r->done = ddp_sys_now(g_sys);
    ddp_store_free(st);
    return NULL;
}

static void bench_rendezvous(int world)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
        rl.rlim_cur < (rlim_t)(2 * world + 256)) {
        rl.rlim_cur = rl.rlim_max >= (rlim_t)(2 * world + 256)
                          ? (rlim_t)(2 * world + 256)
                          : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    rank_t *rs = calloc((size_t)world, sizeof *rs);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 256 << 10);
    int64_t t0 = ddp_sys_now(g_sys);
    for (int i = 0; i < world; i++) {
        rs[i] = (rank_t){.rank = i, .world = world};
        if (pthread_create(&rs[i].th, &at, rank_main, &rs[i]) != 0) {
            fprintf(stderr, "bench: cannot start rank %d\n", i);
            world = i;
            break;
        }
    }
    pthread_attr_destroy(&at);
    int failed = 0;
    int64_t last_conn = t0, last_done = t0;
    for (int i = 0; i < world; i++) {
        pthread_join(rs[i].th, NULL);
        failed += rs[i].rc != 0;
        if (rs[i].connected > last_conn)
            last_conn = rs[i].connected;
        if (rs[i].done > last_done)
            last_done = rs[i].done;
    }
    printf("rendezvous ranks=%d connected: %.1f ms\n", world,
           (double)(last_conn - t0) / 1e6);
    printf("rendezvous ranks=%d done: %.1f ms (%d failed)\n", world,
           (double)(last_done - t0) / 1e6, failed);
    free(rs);
}

int main(int argc, char **argv)
{
    int ops = 200000, ranks = 1024;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ops") && i + 1 < argc)
            ops = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
            ranks = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--ops N] [--ranks R]\n", argv[0]);
            return 2;
        }
    }
    if (ops < 50 || ranks < 1) {
        fprintf(stderr, "bench: --ops >= 50, --ranks >= 1\n");
        return 2;
    }
    g_sys = ddp_sys_posix_new(NULL);
    ddp_log_set_level(DDP_LOG_ERROR);
    ddp_store_server_opts_t so = {.host = "127.0.0.1"};
    ddp_store_server_t *srv = NULL;
    if (!g_sys || ddp_store_server_new(g_sys, &so, &srv) != 0 ||
        ddp_store_server_start_thread(srv) != 0) {
        fprintf(stderr, "bench: %s\n", ddp_err_message());
        return 1;
    }
    g_port = ddp_store_server_addr(srv).port;
    printf("store bench: server 127.0.0.1:%u, 3-byte values, client "
           "threads SCHED_BATCH\n",
           g_port);
    /* One client is latency-bound (one round trip per GET): fewer ops
     * give the same figure in a tenth of the time. */
    bench_ops(1, ops / 10 > 1000 ? ops / 10 : ops);
    bench_ops(50, ops);
    bench_rendezvous(ranks);
    ddp_store_server_join_thread(srv);
    ddp_store_server_free(srv);
    ddp_sys_free(g_sys);
    return 0;
}
