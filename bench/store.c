/* bench/store.c — store throughput and rendezvous time on loopback.
 *
 *   store [--ops N] [--ranks R] [--idle N,N...] [--clients N,N...]
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
 *  - SET/GET as above at each --clients count beyond 1 (default 50,500).
 *  - GET with an event-loop load generator, as redis-benchmark drives
 *    redis: one thread, N connections through a readiness set, each with
 *    one plain TCPStore GET in flight (request: op + key; reply: 8-byte
 *    length + the 3 bytes), printed as "GET c=N (event loop)". The load
 *    generators then cost the same on both sides, and the figure is the
 *    server's, not the scheduler's treatment of N client threads.
 *  - R-client rendezvous (default 1,024): each rank connects, runs
 *    wait_for_workers and the store-based barrier; time until all are done.
 *  - Idle cost (--idle, default 2000,5000,10000; 0: skip): a child process
 *    (the bench's own fd limit holds the server's side) opens N validated
 *    connections that then say nothing; with all N connected, the server's
 *    CPU share over 2 s (this process's rusage: the server thread, as the
 *    main thread sleeps) and the GET latency of one more client (p50 and
 *    p99 of 2,000 GETs).
 * Figures only, no assertions; lines are "NAME: VALUE UNIT" so
 * bench/store.sh can read them. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "ddp/err.h"
#include "ddp/log.h"
#include "ddp/store.h"
#include "ddp/sys.h"

#include "bench_cpu.h"

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

/* One server's GET as the event-loop generator speaks it: what each
 * connection sends once (ours: VALIDATE; redis: nothing), the request, the
 * length of the reply. The same loop drives both servers, so the generator
 * costs the same on both sides: redis-benchmark is itself the bottleneck
 * (bench/store.sh prints it: 83-99 % of a CPU at -c 50 and -c 500, while
 * redis-server takes 58-72 %; docs/benchmarks.md section 14). */
typedef struct el_target {
    const char *name;
    uint16_t port;
    int pid; /* redis-server's, for its CPU time; 0: ours (this process) */
    const uint8_t *hello, *req;
    size_t hello_len, req_len, reply_len;
} el_target_t;

static uint8_t our_hello[5], our_req[1 + 8 + 7];
static el_target_t g_ours, g_redis; /* g_redis.port == 0: no redis */

/* CPU seconds of the target's server so far, -1 if unknown. Ours: this
 * process less the calling thread (the generator); the server thread is the
 * only other one running then. Redis: /proc/PID/stat, in clock ticks. */
static double server_cpu(const el_target_t *tg)
{
    if (!tg->pid)
        return bench_ru_cpu(RUSAGE_SELF) - bench_ru_cpu(RUSAGE_THREAD);
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", tg->pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(line, 1, sizeof line - 1, f) : 0;
    if (f)
        fclose(f);
    line[n] = 0;
    const char *p = strrchr(line, ')'); /* the name may hold spaces */
    unsigned long long ut, st;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                     &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void el_targets_init(uint16_t redis_port, int redis_pid)
{
    static const char redis_req[] = "*2\r\n$3\r\nGET\r\n$6\r\nel:key\r\n";
    uint32_t magic = DDP_STORE_MAGIC;
    uint64_t kl = 7;
    our_hello[0] = DDP_STORE_OP_VALIDATE;
    memcpy(our_hello + 1, &magic, 4);
    our_req[0] = DDP_STORE_OP_GET;
    memcpy(our_req + 1, &kl, 8);
    memcpy(our_req + 9, "/el/key", 7);
    g_ours = (el_target_t){"ours", g_port, 0, our_hello, our_req, sizeof our_hello,
                           sizeof our_req, 8 + 3}; /* 8-byte length + "xxx" */
    g_redis = (el_target_t){"redis", redis_port, redis_pid, NULL, (const uint8_t *)redis_req, 0,
                            sizeof redis_req - 1, 9}; /* "$3\r\nxxx\r\n" */
}

/* ops/s of `total` GETs over n connections driven by one thread; the
 * server's CPU time per GET in *srv_us (-1: unknown). */
static double event_loop_gets(const el_target_t *tg, int n, int total, double *srv_us)
{
    ddp_addr_t a;
    ddp_addr_parse("127.0.0.1", tg->port, &a);
    int *fd = calloc((size_t)n, sizeof *fd), *got = calloc((size_t)n, sizeof *got);
    int ep = ddp_sys_epoll_create(g_sys), done = 0, sent = 0, failed = 0;
    uint8_t buf[64];
    int64_t dl = ddp_sys_deadline_in(g_sys, 60 * DDP_NS_PER_S);
    int rl = (int)tg->reply_len;
    for (int i = 0; i < n && !failed; i++) {
        fd[i] = ddp_sys_connect(g_sys, &a, dl);
        failed = fd[i] < 0 ||
                 (tg->hello_len &&
                  ddp_sys_send_all(g_sys, fd[i], tg->hello, tg->hello_len, dl) != 0) ||
                 ddp_sys_epoll_ctl(g_sys, ep, DDP_EPOLL_ADD, fd[i], DDP_POLLIN,
                                   (uint64_t)i) != 0;
    }
    int64_t t0 = ddp_sys_now(g_sys);
    double c0 = server_cpu(tg);
    for (int i = 0; i < n && !failed; i++, sent++)
        failed = ddp_sys_send_all(g_sys, fd[i], tg->req, tg->req_len, dl) != 0;
    ddp_epoll_event_t ev[256];
    while (!failed && done < total) {
        int k = ddp_sys_epoll_wait(g_sys, ep, ev, 256, dl);
        failed = k <= 0;
        for (int e = 0; e < k && !failed; e++) {
            int i = (int)ev[e].data;
            ssize_t r = ddp_sys_recv(g_sys, fd[i], buf, sizeof buf, 0);
            if (r == -EAGAIN)
                continue;
            failed = r <= 0;
            got[i] += (int)r;
            while (!failed && got[i] >= rl) {
                got[i] -= rl;
                done++;
                if (sent < total) {
                    failed = ddp_sys_send_all(g_sys, fd[i], tg->req, tg->req_len, dl) != 0;
                    sent++;
                }
            }
        }
    }
    int64_t t1 = ddp_sys_now(g_sys);
    double c1 = server_cpu(tg);
    *srv_us = c0 >= 0 && c1 >= 0 && done ? (c1 - c0) * 1e6 / done : -1;
    for (int i = 0; i < n; i++)
        if (fd[i] > 0) {
            ddp_sys_epoll_ctl(g_sys, ep, DDP_EPOLL_DEL, fd[i], 0, 0);
            ddp_sys_close(g_sys, fd[i]);
        }
    ddp_sys_epoll_close(g_sys, ep);
    free(fd);
    free(got);
    if (failed)
        fprintf(stderr, "bench event loop (%s, port %u): %s\n", tg->name,
                (unsigned)tg->port, ddp_err_message());
    return failed ? -1 : (double)done / ((double)(t1 - t0) / 1e9);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The event-loop GET: ours alone, or with --redis ours and redis taken
 * in turn, EL_REPS times each; the medians of the rates and of the server's
 * CPU time per GET (what a server that saturates its CPU could serve: on
 * 2 CPUs the generator needs one, so the rate is the generator's as much
 * as the server's). */
#define EL_REPS 3
static double median3(double *v)
{
    qsort(v, EL_REPS, sizeof *v, cmp_dbl);
    return v[EL_REPS / 2];
}

/* A target's two lines: the median rate and the median server CPU per GET
 * (sorts both arrays), with their ranges. */
static void el_report(const char *who, int clients, double *rate, double *us,
                      const char *what)
{
    double rm = median3(rate), um = median3(us);
    printf("%sGET c=%d (event loop): %.0f ops/s (median of %d: %s; runs %.0f..%.0f)\n",
           who, clients, rm, EL_REPS, what, rate[0], rate[EL_REPS - 1]);
    printf("%sGET c=%d (event loop) server CPU: %.2f us/GET (median; %.2f..%.2f)\n", who,
           clients, um, us[0], us[EL_REPS - 1]);
}

static void bench_event_loop(int clients, int total)
{
    double o[EL_REPS], r[EL_REPS], ou[EL_REPS], ru[EL_REPS];
    if (!g_redis.port) {
        o[0] = event_loop_gets(&g_ours, clients, total, &ou[0]);
        printf("GET c=%d (event loop): %.0f ops/s (%d plain GETs from one "
               "thread, as redis-benchmark; server CPU %.2f us/GET)\n",
               clients, o[0], total, ou[0]);
        return;
    }
    for (int k = 0; k < EL_REPS; k++) {
        o[k] = event_loop_gets(&g_ours, clients, total, &ou[k]);
        r[k] = event_loop_gets(&g_redis, clients, total, &ru[k]);
    }
    el_report("", clients, o, ou, "plain GETs from one thread, taken in turn with redis");
    el_report("redis ", clients, r, ru, "the same generator, the same GETs, RESP; CPU "
                                        "from redis-server's /proc/PID/stat, 10 ms ticks");
}

/* redis's copy of the key the event loop GETs: one RESP SET. */
static int redis_set_key(void)
{
    static const char set[] = "*3\r\n$3\r\nSET\r\n$6\r\nel:key\r\n$3\r\nxxx\r\n";
    ddp_addr_t a;
    ddp_addr_parse("127.0.0.1", g_redis.port, &a);
    int64_t dl = ddp_sys_deadline_in(g_sys, 5 * DDP_NS_PER_S);
    char ok[5];
    int fd = ddp_sys_connect(g_sys, &a, dl);
    int rc = fd < 0 ? fd : ddp_sys_send_all(g_sys, fd, set, sizeof set - 1, dl);
    if (rc == 0)
        rc = ddp_sys_recv_all(g_sys, fd, ok, sizeof ok, dl);
    if (fd >= 0)
        ddp_sys_close(g_sys, fd);
    if (rc == 0 && memcmp(ok, "+OK\r\n", 5) != 0)
        rc = ddp_err_set(DDP_EPROTOCOL, "redis answered SET with \"%.5s\"", ok);
    if (rc)
        fprintf(stderr, "bench: redis on 127.0.0.1:%u: %s\n", (unsigned)g_redis.port,
                ddp_err_message());
    return rc;
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
    if (clients > 1)
        bench_event_loop(clients, total);
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

/* The idle clients' process: n validated connections, then silence until
 * it is killed. */
static int idle_child(ddp_sys_t *sys, void *arg)
{
    int n = *(int *)arg;
    ddp_addr_t a;
    ddp_addr_parse("127.0.0.1", g_port, &a);
    uint8_t v[5] = {DDP_STORE_OP_VALIDATE};
    uint32_t magic = DDP_STORE_MAGIC;
    memcpy(v + 1, &magic, 4);
    for (int i = 0; i < n; i++) {
        int fd = ddp_sys_connect(sys, &a, ddp_sys_deadline_in(sys, 10 * DDP_NS_PER_S));
        if (fd < 0 || ddp_sys_send_all(sys, fd, v, sizeof v,
                                       ddp_sys_deadline_in(sys, DDP_NS_PER_S)) != 0) {
            fprintf(stderr, "bench idle child: connection %d: %s\n", i, ddp_err_message());
            return 1;
        }
    }
    for (;;)
        ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 3600 * DDP_NS_PER_S));
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void bench_idle(ddp_store_server_t *srv, int n)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)n + 512) {
        rl.rlim_cur = rl.rlim_max >= (rlim_t)n + 512 ? (rlim_t)n + 512 : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    ddp_pid_t pid;
    ddp_spawn_t sp = {.entry = idle_child, .arg = &n, .name = "idle clients"};
    if (ddp_sys_spawn(g_sys, &sp, &pid) != 0) {
        fprintf(stderr, "bench: %s\n", ddp_err_message());
        return;
    }
    ddp_store_server_stats_t st;
    int64_t until = ddp_sys_deadline_in(g_sys, 120 * DDP_NS_PER_S);
    do {
        ddp_sys_sleep_until(g_sys, ddp_sys_deadline_in(g_sys, 50 * DDP_NS_PER_MS));
        ddp_store_server_stats(srv, &st);
    } while (st.clients < (size_t)n && ddp_sys_now(g_sys) < until);
    if (st.clients < (size_t)n) {
        printf("idle=%d: only %zu connected (fd limits?)\n", n, st.clients);
    } else {
        double c0 = bench_ru_cpu(RUSAGE_SELF);
        int64_t t0 = ddp_sys_now(g_sys);
        ddp_sys_sleep_until(g_sys, ddp_sys_deadline_in(g_sys, 2 * DDP_NS_PER_S));
        double share = (bench_ru_cpu(RUSAGE_SELF) - c0) / ((double)(ddp_sys_now(g_sys) - t0) / 1e9);
        ddp_store_t *cl = connect_one(99);
        enum { NGET = 2000 };
        static int64_t lat[NGET];
        int got = 0;
        for (int i = 0; cl && i < NGET; i++) {
            ddp_buf_t b = {0};
            int64_t a = ddp_sys_now(g_sys);
            if (ddp_store_get(cl, "idle/key", &b, ddp_sys_deadline_in(g_sys, 5 * DDP_NS_PER_S)))
                break;
            lat[got++] = ddp_sys_now(g_sys) - a;
            ddp_buf_free(&b);
        }
        ddp_store_free(cl);
        qsort(lat, (size_t)got, sizeof lat[0], cmp_i64);
        printf("idle=%d: server CPU %.2f %% of a core; GET p50 %.3f ms, p99 %.3f ms "
               "(%d GETs, one client)\n",
               n, share * 100, got ? (double)lat[got / 2] / 1e6 : -1.0,
               got ? (double)lat[got * 99 / 100] / 1e6 : -1.0, got);
    }
    ddp_sys_kill(g_sys, pid, SIGKILL);
    int status;
    ddp_sys_wait(g_sys, pid, &status, ddp_sys_deadline_in(g_sys, 10 * DDP_NS_PER_S));
    until = ddp_sys_deadline_in(g_sys, 30 * DDP_NS_PER_S);
    do { /* the server sees them go */
        ddp_sys_sleep_until(g_sys, ddp_sys_deadline_in(g_sys, 50 * DDP_NS_PER_MS));
        ddp_store_server_stats(srv, &st);
    } while (st.clients > 0 && ddp_sys_now(g_sys) < until);
}

/* "N,N,..." into out (at most max); the count, or -1. */
static int int_list(const char *s, int *out, int max)
{
    int n = 0;
    for (const char *p = s; *p && n < max;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > 1000000 || (*end && *end != ','))
            return -1;
        out[n++] = (int)v;
        p = *end ? end + 1 : end;
    }
    return n;
}

int main(int argc, char **argv)
{
    int ops = 200000, ranks = 1024, redis_port = 0, redis_pid = 0;
    int idle[8] = {2000, 5000, 10000}, nidle = 3;
    int clients[8] = {50, 500}, nclients = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ops") && i + 1 < argc)
            ops = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
            ranks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--redis") && i + 1 < argc)
            redis_port = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--redis-pid") && i + 1 < argc)
            redis_pid = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--idle") && i + 1 < argc &&
                 (nidle = int_list(argv[++i], idle, 8)) >= 0)
            ;
        else if (!strcmp(argv[i], "--clients") && i + 1 < argc &&
                 (nclients = int_list(argv[++i], clients, 8)) >= 0)
            ;
        else {
            fprintf(stderr, "usage: %s [--ops N] [--ranks R] [--idle N,N...] "
                            "[--clients N,N...] [--redis PORT [--redis-pid PID]]\n",
                    argv[0]);
            return 2;
        }
    }
    if (ops < 50 || ranks < 1 || redis_port < 0 || redis_port > 65535) {
        fprintf(stderr, "bench: --ops >= 50, --ranks >= 1, --redis 1..65535\n");
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
    ddp_store_t *setter = connect_one(98);
    int64_t sdl = ddp_sys_deadline_in(g_sys, 5 * DDP_NS_PER_S);
    if (!setter || ddp_store_set_str(setter, "idle/key", "xxx", sdl) != 0 ||
        ddp_store_set_str(setter, "el/key", "xxx", sdl) != 0 ||
        ddp_store_ping(setter, sdl) != 0)
        return 1;
    ddp_store_free(setter);
    el_targets_init((uint16_t)redis_port, redis_pid);
    if (redis_port && redis_set_key() != 0)
        return 1;
    /* One client is latency-bound (one round trip per GET): fewer ops
     * give the same figure in a tenth of the time. */
    bench_ops(1, ops / 10 > 1000 ? ops / 10 : ops);
    for (int i = 0; i < nclients; i++)
        if (clients[i] > 1)
            bench_ops(clients[i], ops);
    bench_rendezvous(ranks);
    for (int i = 0; i < nidle; i++)
        if (idle[i] > 0)
            bench_idle(srv, idle[i]);
    ddp_store_server_join_thread(srv);
    ddp_store_server_free(srv);
    ddp_sys_free(g_sys);
    return 0;
}
