/* tests/test_sim.c — the simulator: scheduler, virtual clock, network,
 * faults, determinism, deadlock reports. Uses raw sys calls; the store-level
 * scenarios are in tests/test_sim_store.c. */
#include <errno.h>
#include <fiu-control.h>
#include <fiu.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/sim.h"
#include "ddp/sys.h"
#include "test.h"

#define PORT 29500

/* An echo server: accepts `clients` connections, echoes one message each. */
typedef struct {
    int clients;
    int64_t timeout_ns;
} echo_srv_t;

static int echo_server(ddp_sys_t *sys, void *arg)
{
    echo_srv_t *e = arg;
    ddp_addr_t any;
    ddp_addr_parse("0.0.0.0", PORT, &any);
    int l = ddp_sys_listen(sys, &any, 128);
    if (l < 0)
        return 1;
    int64_t dl = ddp_sys_deadline_in(sys, e->timeout_ns);
    for (int i = 0; i < e->clients; i++) {
        int c = ddp_sys_accept(sys, l, NULL, dl);
        if (c < 0)
            return 2;
        char buf[64];
        ssize_t n = ddp_sys_recv(sys, c, buf, sizeof buf, dl);
        if (n <= 0 || ddp_sys_send_all(sys, c, buf, (size_t)n, dl) != 0)
            return 3;
        ddp_sys_close(sys, c);
    }
    ddp_sys_close(sys, l);
    return 0;
}

typedef struct {
    const char *host;
    int64_t timeout_ns;
    int retry; /* retry refused connects until the deadline */
} echo_cli_t;

static int echo_client(ddp_sys_t *sys, void *arg)
{
    echo_cli_t *e = arg;
    int64_t dl = ddp_sys_deadline_in(sys, e->timeout_ns);
    int c;
    for (;;) {
        c = ddp_sys_connect_host(sys, e->host, PORT, dl);
        if (c >= 0 || !e->retry || ddp_sys_now(sys) >= dl)
            break;
        ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 100 * DDP_NS_PER_MS));
    }
    if (c < 0)
        return 1;
    ddp_sim_mark_connected(sys);
    if (ddp_sys_send_all(sys, c, "hello", 5, dl) != 0)
        return 2;
    char buf[5];
    if (ddp_sys_recv_all(sys, c, buf, 5, dl) != 0 || memcmp(buf, "hello", 5))
        return 3;
    char x;
    ssize_t eof = ddp_sys_recv(sys, c, &x, 1, dl); /* server closed */
    ddp_sys_close(sys, c);
    return eof == 0 ? 0 : 4;
}

static ddp_sim_t *two_nodes(uint64_t seed, int keep)
{
    ddp_sim_opts_t o = {.seed = seed, .keep_trace = keep};
    ddp_sim_t *sim = ddp_sim_new(&o);
    ddp_sim_add_node(sim, "node0", "10.0.0.1", 0);
    ddp_sim_add_node(sim, "node1", "10.0.0.2", 0);
    return sim;
}

static void test_echo(void)
{
    ddp_sim_t *sim = two_nodes(1, 0);
    echo_srv_t srv = {3, 10 * DDP_NS_PER_S};
    echo_cli_t cli = {"node0", 10 * DDP_NS_PER_S, 1};
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "server", .rank = -1},
                     echo_server, &srv);
    for (int i = 0; i < 3; i++)
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "client", .rank = i},
                         echo_client, &cli);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    for (int i = 0; i < ddp_sim_task_count(sim); i++) {
        const ddp_sim_outcome_t *o = ddp_sim_outcome(sim, i);
        CU_ASSERT_EQUAL(o->state, DDP_SIM_TASK_EXITED);
        CU_ASSERT_EQUAL(o->rc, 0);
    }
    ddp_sim_stats_t st;
    ddp_sim_stats(sim, &st);
    /* At least SYN + SYN-ACK + data + echo, each one link latency (100 us). */
    CU_ASSERT(ddp_sim_outcome(sim, 1)->connect_ns >= 200 * 1000);
    CU_ASSERT(st.handoffs > 0);
    ddp_sim_free(sim);
}

/* somaxconn reads the caller's node's setting (a node's sysctl), the
 * simulation's default elsewhere: a store server on a node whose somaxconn
 * was raised listens with the raised backlog. */
static int read_somaxconn(ddp_sys_t *sys, void *arg)
{
    *(int *)arg = ddp_sys_somaxconn(sys);
    return 0;
}

static void test_somaxconn_per_node(void)
{
    ddp_sim_t *sim = two_nodes(1, 0);
    CU_ASSERT_EQUAL(ddp_sim_set_somaxconn(sim, 0, 1 << 20), 0); /* past 16 bits, as the sysctl */
    CU_ASSERT_NOT_EQUAL(ddp_sim_set_somaxconn(sim, 1, 0), 0);
    int got[2] = {0, 0};
    for (int i = 0; i < 2; i++)
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = i, .name = "r", .rank = i},
                         read_somaxconn, &got[i]);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(got[0], 1 << 20);
    CU_ASSERT_EQUAL(got[1], 4096);
    ddp_sim_free(sim);
}

static void test_refused_and_late_start(void)
{
    /* No server at all: a single connect is refused at once. */
    ddp_sim_t *sim = two_nodes(2, 0);
    echo_cli_t once = {"10.0.0.1", DDP_NS_PER_S, 0};
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "c", .rank = 0},
                     echo_client, &once);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 0)->rc, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_sim_outcome(sim, 0)->message, "10.0.0.1:29500"));
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_sim_outcome(sim, 0)->message, "ECONNREFUSED"));
    ddp_sim_free(sim);

    /* Server starts 5 s late: the retrying client connects after that. */
    sim = two_nodes(3, 0);
    echo_srv_t srv = {1, 60 * DDP_NS_PER_S};
    echo_cli_t retry = {"node0", 60 * DDP_NS_PER_S, 1};
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "server", .rank = -1,
                                                 .start_ns = 5 * DDP_NS_PER_S},
                     echo_server, &srv);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "c", .rank = 0},
                     echo_client, &retry);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 1)->rc, 0);
    CU_ASSERT(ddp_sim_outcome(sim, 1)->connect_ns >= 5 * DDP_NS_PER_S);
    ddp_sim_free(sim);
}

static int hang_forever(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    ddp_addr_t any;
    ddp_addr_parse("0.0.0.0", 7777, &any);
    int l = ddp_sys_listen(sys, &any, 8);
    /* A planted bug: waits without a deadline for a peer that never comes. */
    int c = ddp_sys_accept(sys, l, NULL, DDP_DEADLINE_NEVER);
    return c >= 0 ? 0 : 1;
}

static void test_deadlock_report(void)
{
    ddp_sim_t *sim = two_nodes(4, 0);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "rank0", .rank = 0},
                     hang_forever, NULL);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DEADLOCK);
    const char *r = ddp_sim_deadlock_report(sim);
    CU_ASSERT_PTR_NOT_NULL(strstr(r, "task rank0"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r, "accept on port 7777"));
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 0)->state, DDP_SIM_TASK_CANCELED);
    ddp_sim_free(sim);
}

/* A task for each kind of wait a report words (sim/sim.c,
 * ddp__sim_wait_words): kept as parts at each park, worded at the report. */
static int wait_sleepy(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    return ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 3600 * DDP_NS_PER_S));
}

static int wait_listener(ddp_sys_t *sys, void *arg)
{
    int port = (int)(intptr_t)arg, conns = port == 7778 ? 3 : 1;
    ddp_addr_t any;
    ddp_addr_parse("0.0.0.0", (uint16_t)port, &any);
    int l = ddp_sys_listen(sys, &any, 8);
    for (int i = 0; l >= 0 && i < conns; i++)
        if (ddp_sys_accept(sys, l, NULL, DDP_DEADLINE_NEVER) < 0)
            return 1;
    ddp_spawn_t sp = {.entry = wait_sleepy, .name = "sleepy"};
    ddp_pid_t pid;
    int st;
    return ddp_sys_spawn(sys, &sp, &pid) || ddp_sys_wait(sys, pid, &st, DDP_DEADLINE_NEVER);
}

static int wait_client(ddp_sys_t *sys, void *arg)
{
    const char *how = arg;
    static char big[1 << 20];
    ddp_addr_t a;
    ddp_addr_parse(how[0] == 'c' ? "10.0.9.9" : "10.0.0.1", how[0] == 'c' ? 7000 : 7778, &a);
    if (how[0] == 'e') {
        ddp_epoll_event_t ev;
        int ep = ddp_sys_epoll_create(sys);
        return ep < 0 || ddp_sys_epoll_wait(sys, ep, &ev, 1, DDP_DEADLINE_NEVER) < 0;
    }
    int c = ddp_sys_connect(sys, &a, DDP_DEADLINE_NEVER);
    if (c < 0)
        return 1;
    ddp_pollfd_t pf = {.fd = c, .events = DDP_POLLIN};
    char x;
    return how[0] == 'r'   ? ddp_sys_recv(sys, c, &x, 1, DDP_DEADLINE_NEVER) < 0
           : how[0] == 'p' ? ddp_sys_poll(sys, &pf, 1, DDP_DEADLINE_NEVER) < 0
                           : ddp_sys_send_all(sys, c, big, sizeof big, DDP_DEADLINE_NEVER);
}

/* The time limit's report and each task's message say what it waited on,
 * for every kind of wait, with its address, port, count or name. */
static void test_wait_words_every_kind(void)
{
    static const struct {
        const char *name, *how, *words;
    } w[] = {{"reader", "r", "recv from 10.0.0.1:7778"},
             {"poller", "p", "poll on 1 socket(s)"},
             {"sender", "s", "send to 10.0.0.1:7778 (receive window full)"},
             {"connector", "c", "connect to 10.0.9.9:7000"},
             {"epoller", "e", "epoll_wait on set "}};
    ddp_sim_opts_t o = {.seed = 3, .time_limit_ns = 10 * DDP_NS_PER_S};
    ddp_sim_t *sim = ddp_sim_new(&o);
    ddp_sim_add_node(sim, "node0", "10.0.0.1", 0);
    ddp_sim_add_node(sim, "node1", "10.0.0.2", 0);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "waiter", .rank = -1},
                     wait_listener, (void *)(intptr_t)7778);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "acceptor", .rank = -1},
                     wait_listener, (void *)(intptr_t)7777);
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = w[i].name, .rank = -1},
                         wait_client, (void *)w[i].how);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_TIME_LIMIT);
    const char *r = ddp_sim_deadlock_report(sim);
    char line[160];
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        snprintf(line, sizeof line, "task %s (node node1): %s", w[i].name, w[i].words);
        CU_ASSERT_PTR_NOT_NULL(strstr(r, line));
        snprintf(line, sizeof line, "time limit: still waiting (%s", w[i].words);
        CU_ASSERT_PTR_NOT_NULL(strstr(ddp_sim_outcome(sim, (int)i + 2)->message, line));
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(r, "task waiter (node node0): wait for child sleepy, since"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r, "task acceptor (node node0): accept on port 7777, since"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r, "task sleepy (node node0): sleep, since"));
    ddp_sim_free(sim);
}

static int long_sleep(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    ddp_addr_t a;
    ddp_addr_parse("10.0.0.1", PORT, &a);
    /* A black-holed connect with a 30-minute deadline. */
    int c = ddp_sys_connect(sys, &a, ddp_sys_deadline_in(sys, 1800 * DDP_NS_PER_S));
    return c == DDP_ETIMEOUT ? 0 : 1;
}

static void test_thirty_minutes_virtual(void)
{
    ddp_sim_t *sim = two_nodes(5, 0);
    ddp_sim_add_fault(sim, &(ddp_fault_t){.kind = DDP_FAULT_BLACKHOLE, .node = -1,
                                              .task = -1, .peer_node = 0});
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "c", .rank = 0},
                     long_sleep, NULL);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 0)->rc, 0);
    ddp_sim_stats_t st;
    ddp_sim_stats(sim, &st);
    CU_ASSERT(st.virtual_ns >= 1800 * DDP_NS_PER_S);
    CU_ASSERT(st.virtual_ns < 1801 * DDP_NS_PER_S);
    ddp_sim_free(sim);
}

static uint64_t echo_run_hash(uint64_t seed, int clients)
{
    ddp_sim_t *sim = two_nodes(seed, 1);
    echo_srv_t srv = {clients, 10 * DDP_NS_PER_S};
    echo_cli_t cli = {"node0", 10 * DDP_NS_PER_S, 1};
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "server", .rank = -1},
                     echo_server, &srv);
    for (int i = 0; i < clients; i++) {
        char name[16];
        snprintf(name, sizeof name, "client%d", i);
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = name, .rank = i},
                         echo_client, &cli);
    }
    ddp_sim_run(sim);
    ddp_sim_stats_t st;
    ddp_sim_stats(sim, &st);
    size_t len;
    const char *tr = ddp_sim_trace(sim, &len);
    CU_ASSERT(len > 0);
    /* the hash is FNV-1a 64 of the trace's bytes, every one of them */
    uint64_t fnv = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < len; i++)
        fnv = (fnv ^ (uint8_t)tr[i]) * UINT64_C(0x100000001b3);
    CU_ASSERT_EQUAL(fnv, st.trace_hash);
    ddp_sim_free(sim);
    return st.trace_hash;
}

static void test_determinism(void)
{
    uint64_t h = echo_run_hash(42, 8);
    for (int i = 0; i < 20; i++)
        CU_ASSERT_EQUAL(echo_run_hash(42, 8), h);
    int differ = 0;
    for (uint64_t s = 1; s <= 5; s++)
        differ += echo_run_hash(s, 8) != h;
    CU_ASSERT(differ > 0);
}

static void test_partition(void)
{
    /* Partition node1 away for 3 s: a connect with a 10 s deadline succeeds
     * after the heal (SYN retransmits), one with a 2 s deadline times out. */
    for (int pass = 0; pass < 2; pass++) {
        ddp_sim_t *sim = two_nodes(6, 0);
        ddp_sim_add_fault(sim, &(ddp_fault_t){.kind = DDP_FAULT_PARTITION,
                                                  .node_set = 1u << 1,
                                                  .end_ns = 3 * DDP_NS_PER_S});
        echo_srv_t srv = {1, 20 * DDP_NS_PER_S};
        echo_cli_t cli = {"node0", (pass ? 2 : 10) * DDP_NS_PER_S, 0};
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "server", .rank = -1},
                         echo_server, &srv);
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "c", .rank = 0},
                         echo_client, &cli);
        ddp_sim_run(sim);
        const ddp_sim_outcome_t *o = ddp_sim_outcome(sim, 1);
        if (pass == 0) {
            CU_ASSERT_EQUAL(o->rc, 0);
            CU_ASSERT(o->connect_ns >= 3 * DDP_NS_PER_S);
        } else {
            CU_ASSERT_EQUAL(o->rc, 1);
            CU_ASSERT_PTR_NOT_NULL(strstr(o->message, "DDP_ETIMEOUT"));
        }
        ddp_sim_free(sim);
    }
}

/* Over a connection made before the cut: node 0 sends one byte to node 1
 * at 1 s, node 1 one byte back at 1 s; each side records when the other's
 * byte arrived. */
typedef struct {
    int64_t base;   /* node 1's start: virtual time 0 */
    int64_t got[2]; /* by node, from base */
} cut_run_t;

static int cut_side(ddp_sys_t *sys, cut_run_t *w, int node)
{
    int64_t dl = ddp_sys_deadline_in(sys, 20 * DDP_NS_PER_S);
    int c;
    if (node == 1)
        w->base = ddp_sys_now(sys);
    if (node == 1) {
        ddp_addr_t any;
        ddp_addr_parse("0.0.0.0", PORT, &any);
        int l = ddp_sys_listen(sys, &any, 4);
        c = l < 0 ? -1 : ddp_sys_accept(sys, l, NULL, dl);
        ddp_sys_close(sys, l);
    } else {
        c = ddp_sys_connect_host(sys, "node1", PORT, dl);
    }
    if (c < 0)
        return 1;
    ddp_sys_sleep_until(sys, w->base + DDP_NS_PER_S);
    char b = 'x';
    int rc = ddp_sys_send_all(sys, c, &b, 1, dl) != 0 || ddp_sys_recv_all(sys, c, &b, 1, dl) != 0;
    w->got[node] = ddp_sys_now(sys) - w->base;
    ddp_sys_close(sys, c);
    return rc ? 2 : 0;
}

static int cut_node0(ddp_sys_t *sys, void *arg) { return cut_side(sys, arg, 0); }
static int cut_node1(ddp_sys_t *sys, void *arg) { return cut_side(sys, arg, 1); }

/* Both sides on two nodes, under fault f (NULL: none); both must end well. */
static void cut_run(const ddp_fault_t *f, cut_run_t *w)
{
    ddp_sim_t *sim = two_nodes(6, 0);
    if (f)
        CU_ASSERT(ddp_sim_add_fault(sim, f) >= 0);
    *w = (cut_run_t){0, {0, 0}};
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "inside", .rank = -1},
                     cut_node1, w);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "outside", .rank = -1,
                                                 .start_ns = DDP_NS_PER_MS},
                     cut_node0, w);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 0)->rc, 0);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 1)->rc, 0);
    ddp_sim_free(sim);
}

/* A partition cuts both ways: node 1 cut off from 0.5 s to 3 s holds what
 * it sends and what is sent to it until the heal. */
static void test_partition_both_ways(void)
{
    cut_run_t w;
    cut_run(&(ddp_fault_t){.kind = DDP_FAULT_PARTITION, .node_set = 1u << 1,
                               .start_ns = DDP_NS_PER_S / 2, .end_ns = 3 * DDP_NS_PER_S},
            &w);
    CU_ASSERT(w.got[1] >= 3 * DDP_NS_PER_S); /* into the cut-off side */
    CU_ASSERT(w.got[0] >= 3 * DDP_NS_PER_S); /* out of it */
    CU_ASSERT(w.got[0] < 20 * DDP_NS_PER_S && w.got[1] < 20 * DDP_NS_PER_S);

    /* Without the partition both bytes arrive within a millisecond. */
    cut_run(NULL, &w);
    CU_ASSERT(w.got[0] < DDP_NS_PER_S + DDP_NS_PER_MS);
    CU_ASSERT(w.got[1] < DDP_NS_PER_S + DDP_NS_PER_MS);
}

/* p = 0.1 and p = 0.9 on 200 connects each: a refuse fault fires about as
 * often as its probability says (the draw is seeded, so the count is the
 * same every run; the bounds are six standard deviations wide). */
typedef struct {
    int tries, refused;
} prob_run_t;

static int prob_server(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    ddp_addr_t any;
    ddp_addr_parse("0.0.0.0", PORT, &any);
    int l = ddp_sys_listen(sys, &any, 256);
    for (int c; l >= 0 && (c = ddp_sys_accept(sys, l, NULL,
                                              ddp_sys_deadline_in(sys, DDP_NS_PER_S))) >= 0;)
        ddp_sys_close(sys, c);
    ddp_sys_close(sys, l);
    return l < 0;
}

static int prob_client(ddp_sys_t *sys, void *arg)
{
    prob_run_t *w = arg;
    for (int i = 0; i < w->tries; i++) {
        int c = ddp_sys_connect_host(sys, "node0", PORT, ddp_sys_deadline_in(sys, DDP_NS_PER_S));
        if (c == -ECONNREFUSED)
            w->refused++;
        else if (c < 0)
            return 1;
        else
            ddp_sys_close(sys, c);
    }
    return 0;
}

static void test_fault_probability(void)
{
    static const double ps[] = {0.1, 0.9};
    for (int k = 0; k < 2; k++) {
        ddp_sim_t *sim = two_nodes(12, 0);
        ddp_sim_add_fault(sim, &(ddp_fault_t){.kind = DDP_FAULT_REFUSE, .node = 1,
                                                  .task = -1, .peer_node = -1,
                                                  .probability = ps[k]});
        prob_run_t w = {200, 0};
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "server", .rank = -1},
                         prob_server, NULL);
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "client", .rank = -1,
                                                     .start_ns = DDP_NS_PER_MS},
                         prob_client, &w);
        CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
        CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 1)->rc, 0);
        double mean = 200 * ps[k];
        if (!(w.refused > mean - 26 && w.refused < mean + 26))
            printf("\n  p=%.1f: %d of 200 refused\n", ps[k], w.refused);
        CU_ASSERT(w.refused > mean - 26 && w.refused < mean + 26);
        ddp_sim_free(sim);
    }
}

static int crash_victim(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    ddp_ident_set_phase("rendezvous");
    /* Never reached past the crash: every sim call fails. */
    return ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, DDP_NS_PER_S)) ? 5 : 0;
}

static int peer_reader(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    ddp_addr_t any;
    ddp_addr_parse("0.0.0.0", PORT, &any);
    int l = ddp_sys_listen(sys, &any, 8);
    int64_t dl = ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_S);
    int c = ddp_sys_accept(sys, l, NULL, dl);
    if (c < 0)
        return 1;
    char b;
    ssize_t r = ddp_sys_recv(sys, c, &b, 1, dl);
    return r == 0 ? 0 : 2; /* EOF: the peer's process died */
}

static int connect_then_crash(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    int c = ddp_sys_connect_host(sys, "node0", PORT,
                                 ddp_sys_deadline_in(sys, DDP_NS_PER_S));
    if (c < 0)
        return 1;
    ddp_ident_set_phase("barrier"); /* the fault kills us here */
    char b;
    return ddp_sys_recv(sys, c, &b, 1, DDP_DEADLINE_NEVER) == DDP_ECANCELED ? 7 : 8;
}

static void test_crash_faults(void)
{
    ddp_sim_t *sim = two_nodes(7, 0);
    ddp_sim_add_fault(sim, &(ddp_fault_t){.kind = DDP_FAULT_CRASH, .node = -1,
                                              .task = 1, .phase = "barrier"});
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "reader", .rank = 0},
                     peer_reader, NULL);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "victim", .rank = 1,
                                                 .start_ns = DDP_NS_PER_MS},
                     connect_then_crash, NULL);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 0)->rc, 0);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 1)->state, DDP_SIM_TASK_CRASHED);
    ddp_sim_free(sim);

    /* A timed crash of a node: its task dies at 0.5 s. */
    sim = two_nodes(8, 0);
    ddp_sim_add_fault(sim, &(ddp_fault_t){.kind = DDP_FAULT_CRASH, .node = 1,
                                              .task = -1, .start_ns = DDP_NS_PER_S / 2});
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "v", .rank = 0},
                     crash_victim, NULL);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 0)->state, DDP_SIM_TASK_CRASHED);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 0)->end_ns, DDP_NS_PER_S / 2);
    ddp_sim_free(sim);
}

static int refused_client(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    int c = ddp_sys_connect_host(sys, "node0", PORT, ddp_sys_deadline_in(sys, DDP_NS_PER_S));
    return c == -ECONNREFUSED ? 0 : c >= 0 ? 1 : 2;
}

static void test_refuse_fault_and_resolve(void)
{
    ddp_sim_t *sim = two_nodes(9, 0);
    echo_srv_t srv = {1, 3 * DDP_NS_PER_S};
    ddp_sim_add_fault(sim, &(ddp_fault_t){.kind = DDP_FAULT_REFUSE, .node = 1,
                                              .task = -1, .peer_node = -1, .count = 1});
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "server", .rank = -1},
                     echo_server, &srv);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "c1", .rank = 0,
                                                 .start_ns = 1000},
                     refused_client, NULL);
    echo_cli_t cli = {"node0", 3 * DDP_NS_PER_S, 0};
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "c2", .rank = 1,
                                                 .start_ns = DDP_NS_PER_MS},
                     echo_client, &cli);
    ddp_sim_run(sim);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 1)->rc, 0); /* refused by the fault */
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 2)->rc, 0); /* count = 1: only once */
    ddp_sim_free(sim);

    sim = two_nodes(10, 0);
    ddp_sim_add_fault(sim, &(ddp_fault_t){.kind = DDP_FAULT_RESOLVE, .node = -1, .task = -1});
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "c", .rank = 0},
                     echo_client, &cli);
    ddp_sim_run(sim);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 0)->rc, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_sim_outcome(sim, 0)->message, "cannot resolve"));
    ddp_sim_free(sim);
}

static int child_main(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    const char *v = ddp_env_get(ddp_sys_env(sys), "LOCAL_RANK");
    return v ? atoi(v) + 10 : 99;
}

static int parent_main(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    int sum = 0;
    for (int i = 1; i <= 3; i++) {
        ddp_env_t *env = ddp_env_clone(ddp_sys_env(sys));
        ddp_env_setf(env, "LOCAL_RANK", "%d", i);
        ddp_spawn_t sp = {.env = env, .entry = child_main, .name = "child"};
        ddp_pid_t pid;
        int rc = ddp_sys_spawn(sys, &sp, &pid);
        ddp_env_free(env);
        if (rc)
            return 1;
        int st = -1;
        if (ddp_sys_wait(sys, pid, &st, ddp_sys_deadline_in(sys, DDP_NS_PER_S)))
            return 2;
        sum += st;
    }
    return sum == 11 + 12 + 13 ? 0 : 3;
}

static void test_spawn_in_sim(void)
{
    ddp_sim_t *sim = two_nodes(11, 0);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "parent", .rank = 0},
                     parent_main, NULL);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 0)->rc, 0);
    CU_ASSERT_EQUAL(ddp_sim_task_count(sim), 4);
    ddp_sim_free(sim);
}

static int skew_reader(ddp_sys_t *sys, void *arg)
{
    int64_t *out = arg;
    *out = ddp_sys_now(sys);
    return 0;
}

/* A 1 s wait by the task's own clock: how long it took by that clock. */
static int skew_sleeper(ddp_sys_t *sys, void *arg)
{
    int64_t *out = arg, t0 = ddp_sys_now(sys);
    int rc = ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, DDP_NS_PER_S));
    *out = ddp_sys_now(sys) - t0;
    return rc ? 1 : 0;
}

static void test_clock_skew(void)
{
    ddp_sim_opts_t o = {.seed = 1};
    ddp_sim_t *sim = ddp_sim_new(&o);
    ddp_sim_add_node(sim, "a", "10.0.0.1", 0);
    ddp_sim_add_node(sim, "b", "10.0.0.2", 7 * DDP_NS_PER_S);
    int64_t ta = 0, tb = 0;
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "a", .rank = 0}, skew_reader, &ta);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "b", .rank = 1}, skew_reader, &tb);
    ddp_sim_run(sim);
    CU_ASSERT_EQUAL(tb - ta, 7 * DDP_NS_PER_S);
    ddp_sim_free(sim);

    /* A skewed clock is offset, not slowed: a 1 s wait on a node 7 s ahead
     * (or 3 s behind: its clock reads below zero, and its deadlines once
     * overflowed to "never") lasts 1 s, by its clock and by the
     * simulation's. (A small livelock bound: a deadline taken the wrong
     * way round lands in the past, and the sleep would spin at one
     * instant until the default bound of 10 million calls.) */
    ddp_sim_opts_t o2 = {.seed = 1, .livelock_calls = 100000};
    sim = ddp_sim_new(&o2);
    ddp_sim_add_node(sim, "ahead", "10.0.0.1", 7 * DDP_NS_PER_S);
    ddp_sim_add_node(sim, "behind", "10.0.0.2", -3 * DDP_NS_PER_S);
    int64_t da = 0, db = 0;
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "a", .rank = 0}, skew_sleeper, &da);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "b", .rank = 1}, skew_sleeper, &db);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(da, DDP_NS_PER_S);
    CU_ASSERT_EQUAL(db, DDP_NS_PER_S);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 0)->end_ns, DDP_NS_PER_S);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 1)->end_ns, DDP_NS_PER_S);
    ddp_sim_free(sim);
}

static void test_trace_exports(void)
{
    ddp_sim_t *sim = two_nodes(12, 1);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "r0", .rank = 0},
                     crash_victim, NULL);
    ddp_sim_run(sim);
    const char *tr = ddp_sim_trace(sim, NULL);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CU_ASSERT_EQUAL(ddp_sim_export_chrome(tr, f), 0);
    fclose(f);
    /* The phase became a duration slice; exit an instant event. */
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"name\":\"rendezvous\",\"cat\":\"phase\",\"ph\":\"X\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"name\":\"exit\""));
    CU_ASSERT_EQUAL(strncmp(buf, "{\"displayTimeUnit\"", 18), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\n]}\n"));
    free(buf);
    f = open_memstream(&buf, &len);
    CU_ASSERT_EQUAL(ddp_sim_export_timeline(tr, f), 0);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "r0"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "phase"));
    free(buf);
    ddp_sim_free(sim);
}

/* ---- the receive window ---- */

#define WIN 4096
#define WIN_BYTES (64 * 1024)

typedef struct window_run {
    int64_t reader_starts; /* virtual, relative to the writer's clock */
    ssize_t first_send;    /* what one send of WIN_BYTES wrote */
    ssize_t try_once;      /* a send with a past deadline, window full */
    int pollout_full;      /* poll's POLLOUT on a full window (0: not set) */
    int timed_out;         /* send_all with a deadline before the reader */
    int64_t writer_done;   /* when send_all of the rest returned */
    int64_t reader_began;
    int intact;            /* the reader got every byte, in order */
} window_run_t;

static uint8_t wbyte(size_t i) { return (uint8_t)(i * 13 + 7); }

static int window_writer(ddp_sys_t *sys, void *arg)
{
    window_run_t *w = arg;
    int64_t dl = ddp_sys_deadline_in(sys, 30 * DDP_NS_PER_S);
    int c = ddp_sys_connect_host(sys, "node0", PORT, dl);
    if (c < 0)
        return 1;
    uint8_t *buf = malloc(WIN_BYTES);
    for (size_t i = 0; i < WIN_BYTES; i++)
        buf[i] = wbyte(i);
    size_t off = 0;
    w->first_send = ddp_sys_send(sys, c, buf, WIN_BYTES, dl);
    off += w->first_send > 0 ? (size_t)w->first_send : 0;
    w->try_once = ddp_sys_send(sys, c, buf + off, WIN_BYTES - off, ddp_sys_now(sys));
    ddp_pollfd_t p = {.fd = c, .events = DDP_POLLOUT};
    w->pollout_full = ddp_sys_poll(sys, &p, 1, ddp_sys_now(sys)) > 0 &&
                      (p.revents & DDP_POLLOUT);
    w->timed_out = ddp_sys_send_all(sys, c, buf + off, WIN_BYTES - off,
                                    ddp_sys_deadline_in(sys, DDP_NS_PER_S / 2)) ==
                   DDP_ETIMEOUT;
    /* No byte went out while timing out: the window was full throughout. */
    int rc = ddp_sys_send_all(sys, c, buf + off, WIN_BYTES - off, dl);
    w->writer_done = ddp_sys_now(sys);
    free(buf);
    ddp_sys_close(sys, c);
    return rc ? 2 : 0;
}

static int window_reader(ddp_sys_t *sys, void *arg)
{
    window_run_t *w = arg;
    ddp_addr_t any;
    ddp_addr_parse("0.0.0.0", PORT, &any);
    int l = ddp_sys_listen(sys, &any, 16);
    int64_t dl = ddp_sys_deadline_in(sys, 30 * DDP_NS_PER_S);
    int c = l < 0 ? l : ddp_sys_accept(sys, l, NULL, dl);
    if (c < 0)
        return 1;
    ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, DDP_NS_PER_S));
    w->reader_began = ddp_sys_now(sys);
    uint8_t *buf = malloc(WIN_BYTES);
    int rc = ddp_sys_recv_all(sys, c, buf, WIN_BYTES, dl);
    w->intact = rc == 0;
    for (size_t i = 0; rc == 0 && i < WIN_BYTES; i++)
        w->intact &= buf[i] == wbyte(i);
    free(buf);
    ddp_sys_close(sys, c);
    ddp_sys_close(sys, l);
    return rc ? 2 : 0;
}

/* A writer faster than its reader: every send stops at the window, a
 * try-once send and POLLOUT say "full", a deadline passes without a byte
 * moving, and the rest goes once the reader reads; the receive queues never
 * hold more than the window. */
/* Interfaces, routes and name resolution (scenario iface / resolve). */
typedef struct {
    const char *host; /* connect to (resolved on the task's node) */
    const char *bind; /* a listener's bind address (NULL: connect instead) */
    int rc;           /* the connect's result: >= 0 ok, else the code */
    int n;            /* answers the resolver gave */
    ddp_addr_t first;
    char ifs[128];    /* "name=addr/prefix " per interface */
} net_probe_t;

static int net_probe(ddp_sys_t *sys, void *arg)
{
    net_probe_t *p = arg;
    ddp_ifaddr_t ifs[16];
    int n = ddp_sys_ifaddrs(sys, ifs, 16);
    size_t off = 0;
    for (int i = 0; i < n && off < sizeof p->ifs; i++) {
        char a[DDP_ADDR_STRLEN];
        off += (size_t)snprintf(p->ifs + off, sizeof p->ifs - off, "%s=%s/%d ", ifs[i].name,
                                ddp_addr_format_host(&ifs[i].addr, a, sizeof a), ifs[i].prefix);
    }
    if (p->bind) {
        ddp_addr_t b;
        ddp_addr_parse(p->bind, PORT, &b);
        int l = ddp_sys_listen(sys, &b, 8);
        if (l < 0)
            return 1;
        ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_S));
        return 0;
    }
    ddp_addr_t a[4];
    p->n = ddp_sys_resolve(sys, p->host, PORT, a, 4);
    if (p->n > 0)
        p->first = a[0];
    ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, DDP_NS_PER_S)); /* listeners up */
    p->rc = p->n > 0 ? ddp_sys_connect(sys, &a[0], ddp_sys_deadline_in(sys, 2 * DDP_NS_PER_S))
                     : p->n;
    return 0;
}

static void test_interfaces_routes_names(void)
{
    ddp_sim_t *sim = two_nodes(5, 0);
    CU_ASSERT_EQUAL(ddp_sim_add_iface(sim, -1, "docker0", "172.17.0.1/16"), 0);
    CU_ASSERT_EQUAL(ddp_sim_add_iface(sim, 0, "eth0", "10.0.0.1/8"), 0);
    CU_ASSERT_EQUAL(ddp_sim_add_iface(sim, 0, "eth0", "fd00::1/64"), 0);
    CU_ASSERT_NOT_EQUAL(ddp_sim_add_iface(sim, 0, "eth0", "fd00::1/129"), 0);
    CU_ASSERT_NOT_EQUAL(ddp_sim_add_iface(sim, 7, "eth0", "10.0.0.9/8"), 0);
    CU_ASSERT_EQUAL(ddp_sim_add_hostent(sim, 1, "node0", "fd00::1"), 0);
    CU_ASSERT_EQUAL(ddp_sim_add_hostent(sim, 1, "node0", "10.0.0.1"), 0);
    CU_ASSERT_EQUAL(ddp_sim_add_hostent(sim, 0, "node0", "127.0.1.1"), 0);
    /* node 0 listens on IPv4 only (0.0.0.0); its docker0 and fd00::1 are its own */
    net_probe_t srv = {.bind = "0.0.0.0"}, v6 = {.host = "fd00::1"},
                own = {.host = "node0"}, bridge = {.host = "172.17.0.1"},
                ll = {.host = "fe80::1"}, v4 = {.host = "10.0.0.1"};
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "srv"}, net_probe, &srv);
    /* node 1 has no IPv6 but ::1: no route at all */
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "v6"}, net_probe, &v6);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "own"}, net_probe, &own);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "bridge"}, net_probe,
                     &bridge);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "ll"}, net_probe, &ll);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "v4"}, net_probe, &v4);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    CU_ASSERT_STRING_EQUAL(srv.ifs, "lo=127.0.0.1/8 lo=::1/128 docker0=172.17.0.1/16 "
                                    "eth0=10.0.0.1/8 eth0=fd00::1/64 ");
    CU_ASSERT_EQUAL(v6.rc, -ENETUNREACH);
    CU_ASSERT_EQUAL(own.n, 1); /* node 0's own /etc/hosts line */
    char a[DDP_ADDR_STRLEN];
    CU_ASSERT_STRING_EQUAL(ddp_addr_format_host(&own.first, a, sizeof a), "127.0.1.1");
    CU_ASSERT_TRUE(own.rc >= 0); /* 127.0.1.1 is loopback: its own listener */
    CU_ASSERT_EQUAL(bridge.rc, -ECONNREFUSED); /* node 1's own docker0: nobody listens */
    CU_ASSERT_EQUAL(ll.rc, -EINVAL);
    CU_ASSERT_TRUE(v4.rc >= 0);
    ddp_sim_free(sim);

    /* a v4-only listener refuses an IPv6 connect; "::" takes both */
    for (int dual = 0; dual < 2; dual++) {
        sim = two_nodes(6, 0);
        ddp_sim_add_iface(sim, 0, "eth0", "fd00::1/64");
        ddp_sim_add_iface(sim, 1, "eth0", "fd00::2/64");
        net_probe_t l = {.bind = dual ? "::" : "0.0.0.0"}, c = {.host = "node0"};
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "l"}, net_probe, &l);
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "c"}, net_probe, &c);
        CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
        CU_ASSERT_STRING_EQUAL(ddp_addr_format_host(&c.first, a, sizeof a), "fd00::1");
        CU_ASSERT_TRUE(dual ? c.rc >= 0 : c.rc == -ECONNREFUSED);
        ddp_sim_free(sim);
    }
}

static void test_receive_window(void)
{
    ddp_sim_opts_t o = {.seed = 5, .rcvbuf = WIN};
    ddp_sim_t *sim = ddp_sim_new(&o);
    ddp_sim_add_node(sim, "node0", "10.0.0.1", 0);
    ddp_sim_add_node(sim, "node1", "10.0.0.2", 0);
    window_run_t w = {0};
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "reader", .rank = -1},
                     window_reader, &w);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "writer", .rank = -1,
                                                 .start_ns = DDP_NS_PER_MS},
                     window_writer, &w);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 0)->rc, 0);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 1)->rc, 0);
    CU_ASSERT_EQUAL(w.first_send, WIN);
    CU_ASSERT_EQUAL(w.try_once, -EAGAIN);
    CU_ASSERT_EQUAL(w.pollout_full, 0);
    CU_ASSERT_EQUAL(w.timed_out, 1);
    CU_ASSERT(w.writer_done >= w.reader_began);
    CU_ASSERT_EQUAL(w.intact, 1);
    ddp_sim_stats_t st;
    ddp_sim_stats(sim, &st);
    CU_ASSERT(st.rx_peak_bytes > 0);
    CU_ASSERT(st.rx_peak_bytes <= WIN);
    ddp_sim_free(sim);
}

/* ---- bandwidth faults ---- */

#define BW_BYTES 1000
#define BW_RATE 80000 /* bit/s: 1000 bytes take 100 ms */

typedef struct {
    int64_t sent;        /* when the sender began its two sends */
    int64_t got[2];      /* when each connection's bytes had all arrived */
} bw_run_t;

static int bw_receiver(ddp_sys_t *sys, void *arg)
{
    bw_run_t *w = arg;
    ddp_addr_t any;
    ddp_addr_parse("0.0.0.0", PORT, &any);
    int l = ddp_sys_listen(sys, &any, 16), c[2] = {-1, -1}, rc = 0;
    int64_t dl = ddp_sys_deadline_in(sys, 30 * DDP_NS_PER_S);
    for (int i = 0; i < 2 && l >= 0; i++)
        c[i] = ddp_sys_accept(sys, l, NULL, dl);
    char buf[BW_BYTES];
    for (int i = 0; i < 2; i++) {
        rc |= c[i] < 0 || ddp_sys_recv_all(sys, c[i], buf, BW_BYTES, dl) != 0;
        w->got[i] = ddp_sys_now(sys);
        ddp_sys_close(sys, c[i]);
    }
    ddp_sys_close(sys, l);
    return rc;
}

/* Two connections, BW_BYTES on each, one right after the other. */
static int bw_sender(ddp_sys_t *sys, void *arg)
{
    bw_run_t *w = arg;
    int64_t dl = ddp_sys_deadline_in(sys, 30 * DDP_NS_PER_S);
    int c[2];
    for (int i = 0; i < 2; i++)
        if ((c[i] = ddp_sys_connect_host(sys, "node0", PORT, dl)) < 0)
            return 1;
    char buf[BW_BYTES];
    memset(buf, 'b', sizeof buf);
    w->sent = ddp_sys_now(sys);
    int rc = 0;
    for (int i = 0; i < 2; i++)
        rc |= ddp_sys_send_all(sys, c[i], buf, sizeof buf, dl) != 0;
    for (int i = 0; i < 2; i++)
        ddp_sys_close(sys, c[i]);
    return rc;
}

/* node 1 sends to node 0 under bandwidth faults f and g (NULL: none). */
static void bw_run2(const ddp_fault_t *f, const ddp_fault_t *g, bw_run_t *w,
                    uint64_t *hash)
{
    ddp_sim_t *sim = two_nodes(3, 0);
    if (f)
        CU_ASSERT(ddp_sim_add_fault(sim, f) >= 0);
    if (g)
        CU_ASSERT(ddp_sim_add_fault(sim, g) >= 0);
    memset(w, 0, sizeof *w);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "receiver", .rank = -1},
                     bw_receiver, w);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "sender", .rank = -1},
                     bw_sender, w);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 0)->rc, 0);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 1)->rc, 0);
    ddp_sim_stats_t st;
    ddp_sim_stats(sim, &st);
    *hash = st.trace_hash;
    ddp_sim_free(sim);
}

static void bw_run(const ddp_fault_t *f, bw_run_t *w, uint64_t *hash)
{
    bw_run2(f, NULL, w, hash);
}

/* N bytes at rate R reach the peer no earlier than N*8/R after the send;
 * a second send (on another connection) queues behind the first on the
 * uplink; the limit holds only on its node's uplink and in its window,
 * and the same run gives the same trace. Virtual time throughout. */
static void test_bandwidth_fault(void)
{
    const int64_t one = (int64_t)BW_BYTES * 8 * DDP_NS_PER_S / BW_RATE; /* 100 ms */
    bw_run_t w;
    uint64_t h0, h1, h2;
    bw_run(NULL, &w, &h0);
    CU_ASSERT(w.got[1] - w.sent < DDP_NS_PER_MS); /* 10 GB/s and 100 us */

    ddp_fault_t f = {.kind = DDP_FAULT_BANDWIDTH, .node = 1, .task = -1,
                         .peer_node = -1, .rate_bps = BW_RATE};
    bw_run(&f, &w, &h1);
    CU_ASSERT(w.got[0] - w.sent >= one);
    CU_ASSERT(w.got[0] - w.sent < one + DDP_NS_PER_MS);
    CU_ASSERT(w.got[1] - w.sent >= 2 * one); /* queued behind the first */
    CU_ASSERT(w.got[1] - w.sent < 2 * one + DDP_NS_PER_MS);
    bw_run(&f, &w, &h2);
    CU_ASSERT_EQUAL(h1, h2);
    CU_ASSERT_NOT_EQUAL(h0, h1);

    f.node = 0; /* the receiver's uplink: the data never uses it */
    bw_run(&f, &w, &h2);
    CU_ASSERT(w.got[1] - w.sent < DDP_NS_PER_MS);
    CU_ASSERT_EQUAL(h0, h2);

    f.node = -1; /* every uplink, but only until 1 ns: over before the sends */
    f.end_ns = 1;
    bw_run(&f, &w, &h2);
    CU_ASSERT(w.got[1] - w.sent < DDP_NS_PER_MS);

    /* Two limits on one uplink: the tighter holds, in either order. */
    f.end_ns = 0;
    f.node = 1;
    ddp_fault_t loose = f;
    loose.rate_bps = 10 * BW_RATE;
    for (int order = 0; order < 2; order++) {
        bw_run2(order ? &loose : &f, order ? &f : &loose, &w, &h2);
        CU_ASSERT(w.got[0] - w.sent >= one);
        CU_ASSERT(w.got[1] - w.sent >= 2 * one);
    }

    f.rate_bps = 0; /* no rate: refused */
    ddp_sim_t *sim = two_nodes(1, 0);
    CU_ASSERT_EQUAL(ddp_sim_add_fault(sim, &f), DDP_ECONFIG);
    f.rate_bps = DDP_SIM_RATE_MAX + 1;
    CU_ASSERT_EQUAL(ddp_sim_add_fault(sim, &f), DDP_ECONFIG);
    ddp_sim_free(sim);
}

/* ---- fault points (ddp/faults.h) ---- */

static void test_fault_point_table(void)
{
    for (int i = 0; i < DDP_FP_COUNT; i++) {
        const ddp_fault_info_t *f = ddp_fault_info((ddp_fault_id_t)i);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        CU_ASSERT_EQUAL(f->id, i);
        CU_ASSERT_PTR_EQUAL(ddp_fault_point_find(f->name), f);
        CU_ASSERT(f->fails && f->fails[0]);
        CU_ASSERT_STRING_NOT_EQUAL(ddp_fault_layer_name(f->layer), "?");
        for (int j = 0; j < i; j++)
            CU_ASSERT_STRING_NOT_EQUAL(ddp_fault_info((ddp_fault_id_t)j)->name, f->name);
    }
    CU_ASSERT_PTR_NULL(ddp_fault_info(DDP_FP_COUNT));
    CU_ASSERT_PTR_NULL(ddp_fault_point_find("sys/net/conect"));
    CU_ASSERT_PTR_NULL(ddp_fault_point_find(NULL));
    CU_ASSERT_EQUAL(ddp_fault_point_find("pg/tcp/handshake")->deferr, EPROTO);
    CU_ASSERT_EQUAL(ddp_fault_point_find("store/server/reply")->deferr, 0);
    CU_ASSERT(ddp_fault_point_matches("sys/net/*", DDP_FP_SYS_NET_SEND));
    CU_ASSERT(!ddp_fault_point_matches("sys/net/*", DDP_FP_SYS_FS_READ));
    CU_ASSERT(ddp_fault_point_matches("*", DDP_FP_PG_NCCL_INIT));
    CU_ASSERT(!ddp_fault_point_matches("sys/net/send", DDP_FP_SYS_NET_RECV));
}

/* A point enabled behind ddpsim's back (plain fiu_enable) fires in an
 * ordinary thread, is skipped in a thread that checks armed points only,
 * and fires there too once armed through ddp_fault_enable. */
static void test_fault_armed_points(void)
{
    fiu_enable("pg/tcp/connect", 1, NULL, 0);
    CU_ASSERT_EQUAL(ddp_fault_fire(DDP_FP_PG_TCP_CONNECT), -ECONNREFUSED);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "fault point pg/tcp/connect fired"));
    ddp_fault_thread_armed_only(1);
    CU_ASSERT_EQUAL(ddp_fault_armed(DDP_FP_PG_TCP_CONNECT), 0);
    CU_ASSERT_EQUAL(ddp_fault_fire(DDP_FP_PG_TCP_CONNECT), 0);
    CU_ASSERT_EQUAL(ddp_fault_enable("pg/tcp/*", 1, (void *)(intptr_t)EHOSTUNREACH, 0), 0);
    CU_ASSERT_EQUAL(ddp_fault_armed(DDP_FP_PG_TCP_HANDSHAKE), 1);
    CU_ASSERT_EQUAL(ddp_fault_fire(DDP_FP_PG_TCP_HANDSHAKE), -EHOSTUNREACH);
    /* libfiu prefers the exact entry: failinfo NULL, the default errno */
    CU_ASSERT_EQUAL(ddp_fault_fire(DDP_FP_PG_TCP_CONNECT), -ECONNREFUSED);
    CU_ASSERT_EQUAL(ddp_fault_disable("pg/tcp/*"), 0);
    CU_ASSERT_EQUAL(ddp_fault_armed(DDP_FP_PG_TCP_CONNECT), 0);
    CU_ASSERT_EQUAL(ddp_fault_fire(DDP_FP_PG_TCP_CONNECT), 0);
    ddp_fault_thread_armed_only(0);
    fiu_disable("pg/tcp/connect");
    CU_ASSERT_EQUAL(ddp_fault_fire(DDP_FP_PG_TCP_CONNECT), 0);
}

/* A `point` fault fires only in the tasks it aims at, the count times it
 * allows, and a point the simulator never checks is refused up front. */
typedef struct point_run {
    int rc[2][3];
} point_run_t;

static int point_task(ddp_sys_t *sys, void *arg)
{
    point_run_t *p = arg;
    int me = ddp_sim_task_of(sys);
    for (int i = 0; i < 3; i++) {
        char *data = NULL;
        p->rc[me][i] = ddp_sys_read_file(sys, "/etc/hosts", &data, NULL);
        free(data);
    }
    return 0;
}

static void test_point_faults(void)
{
    ddp_sim_t *sim = two_nodes(9, 1);
    ddp_sim_add_file(sim, "/etc/hosts", "x");
    point_run_t p;
    memset(&p, 0x55, sizeof p);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "r0", .rank = 0},
                     point_task, &p);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "r1", .rank = 1},
                     point_task, &p);
    ddp_fault_t f = {.kind = DDP_FAULT_POINT, .node = -1, .task = -1, .peer_node = -1,
                         .point = "sys/fs/read", .ranks = "1", .count = 2};
    CU_ASSERT_EQUAL(ddp_sim_add_fault(sim, &f), 0);
    f.point = "sys/time/sleep";
    CU_ASSERT_EQUAL(ddp_sim_add_fault(sim, &f), DDP_ECONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "checked only by the POSIX sys"));
    f.point = "ddp/phase/enter";
    CU_ASSERT_EQUAL(ddp_sim_add_fault(sim, &f), DDP_ECONFIG);
    f.point = "no/such/point";
    CU_ASSERT_EQUAL(ddp_sim_add_fault(sim, &f), DDP_ECONFIG);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(p.rc[0][i], 0);
    CU_ASSERT_EQUAL(p.rc[1][0], -EIO);
    CU_ASSERT_EQUAL(p.rc[1][1], -EIO);
    CU_ASSERT_EQUAL(p.rc[1][2], 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_sim_trace(sim, NULL),
                                  "\"fault\":\"point\",\"point\":\"sys/fs/read\""));
    ddp_sim_free(sim);
    /* Nothing stays armed after the run. */
    ddp_fault_thread_armed_only(1);
    CU_ASSERT_EQUAL(ddp_fault_armed(DDP_FP_SYS_FS_READ), 0);
    ddp_fault_thread_armed_only(0);
}

/* An outcome's message is stored only when there is one: an ok task's is
 * "" (never NULL), a failing task's its error, whole up to
 * DDP_ERR_MSG_MAX - 1 bytes as the array it replaced; set_message replaces
 * (an argument may be the old message), clear frees. */
static int fails_saying(ddp_sys_t *sys, void *arg)
{
    (void)sys;
    return ddp_err_set(DDP_ECONFIG, "%s", (const char *)arg);
}

static int ends_well(ddp_sys_t *sys, void *arg)
{
    (void)sys;
    (void)arg;
    return 0;
}

static void test_outcome_message_only_when_set(void)
{
    ddp_sim_t *sim = ddp_sim_new(NULL);
    ddp_sim_add_node(sim, "node0", "10.0.0.1", 0);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "ok", .rank = 0}, ends_well,
                     NULL);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "bad", .rank = 1},
                     fails_saying, "the reason");
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ddp_sim_outcome(sim, 0)->message);
    CU_ASSERT_STRING_EQUAL(ddp_sim_outcome(sim, 0)->message, "");
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_sim_outcome(sim, 1)->message, "rank 1: the reason"));
    ddp_sim_free(sim);

    ddp_sim_outcome_t o, p;
    ddp_sim_outcome_init(&o);
    ddp_sim_outcome_init(&p);
    CU_ASSERT_STRING_EQUAL(o.message, "");
    CU_ASSERT_PTR_EQUAL(o.message, p.message); /* one shared "", nothing stored */
    static char longer[DDP_ERR_MSG_MAX + 100];
    memset(longer, 'x', sizeof longer - 1);
    ddp_sim_outcome_set_message(&o, "%s", longer);
    CU_ASSERT_EQUAL(strlen(o.message), DDP_ERR_MSG_MAX - 1);
    ddp_sim_outcome_set_message(&o, "first line\nsecond");
    ddp_sim_outcome_set_message(&o, "%.*s", (int)strcspn(o.message, "\n"), o.message);
    CU_ASSERT_STRING_EQUAL(o.message, "first line");
    ddp_sim_outcome_set_message(&o, "%s", "");
    CU_ASSERT_PTR_EQUAL(o.message, p.message);
    ddp_sim_outcome_set_message(&o, "again");
    ddp_sim_outcome_clear(&o);
    CU_ASSERT_PTR_EQUAL(o.message, p.message);
}

/* ---- the two task implementations (docs/simulator.md § 1) ----
 * Contexts (the default) and threads make the same scheduling decisions, so
 * the same trace; each task keeps its own identity, error context, errno
 * and stack across switches; the calling thread's identity comes back. */

static ddp_sim_t *sim_with_tasks(uint64_t seed, ddp_sim_tasks_t tasks, size_t stack)
{
    ddp_sim_opts_t o = {.seed = seed, .keep_trace = 1, .tasks = tasks, .stack_size = stack};
    ddp_sim_t *sim = ddp_sim_new(&o);
    ddp_sim_add_node(sim, "node0", "10.0.0.1", 0);
    ddp_sim_add_node(sim, "node1", "10.0.0.2", 0);
    return sim;
}

/* Echo clients against one server, plus a parent that spawns children and
 * a process that starts and joins a thread: parks of every kind. */
static int worker_thread(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 3 * DDP_NS_PER_MS));
    return 7;
}

static int thread_owner(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    ddp_thread_t th;
    int rc = -1;
    if (ddp_sys_thread_start(sys, worker_thread, NULL, "worker", &th) ||
        ddp_sys_thread_join(sys, th, &rc, ddp_sys_deadline_in(sys, DDP_NS_PER_S)))
        return 1;
    return rc == 7 ? 0 : 2;
}

static char *mixed_run(uint64_t seed, ddp_sim_tasks_t tasks, uint64_t *hash)
{
    ddp_sim_t *sim = sim_with_tasks(seed, tasks, 0);
    static echo_srv_t srv = {40, 10 * DDP_NS_PER_S};
    static echo_cli_t cli = {"node0", 10 * DDP_NS_PER_S, 1};
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "server", .rank = -1,
                                                 .start_ns = 2 * DDP_NS_PER_MS},
                     echo_server, &srv);
    for (int i = 0; i < srv.clients; i++) {
        char name[16];
        snprintf(name, sizeof name, "client%d", i);
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = name, .rank = i},
                         echo_client, &cli);
    }
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "parent", .rank = 50},
                     parent_main, NULL);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "owner", .rank = 51},
                     thread_owner, NULL);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    for (int i = 0; i < ddp_sim_task_count(sim); i++)
        CU_ASSERT_EQUAL(ddp_sim_outcome(sim, i)->state, DDP_SIM_TASK_EXITED);
    ddp_sim_stats_t st;
    ddp_sim_stats(sim, &st);
    *hash = st.trace_hash;
    char *trace = strdup(ddp_sim_trace(sim, NULL));
    ddp_sim_free(sim);
    return trace;
}

static void test_tasks_same_trace(void)
{
    for (uint64_t seed = 1; seed <= 3; seed++) {
        uint64_t hc, ht, hd;
        char *c = mixed_run(seed, DDP_SIM_TASKS_CONTEXTS, &hc);
        char *t = mixed_run(seed, DDP_SIM_TASKS_THREADS, &ht);
        char *d = mixed_run(seed, DDP_SIM_TASKS_DEFAULT, &hd);
        CU_ASSERT_EQUAL(hc, ht);
        CU_ASSERT_EQUAL(hc, hd);
        CU_ASSERT_STRING_EQUAL(c, t);
        CU_ASSERT_PTR_NOT_NULL(strstr(c, "\"kind\":\"thread\""));
        CU_ASSERT_PTR_NOT_NULL(strstr(c, "\"kind\":\"spawn\""));
        free(c);
        free(t);
        free(d);
    }
}

/* Many tasks, each parking many times at its own moments; every one must
 * run to the end with its own loop state intact (arg: int done[task]). */
static int many_task(ddp_sys_t *sys, void *arg)
{
    int *done = arg;
    int me = ddp_sim_task_of(sys), steps = 0;
    for (int i = 0; i < 8; i++) {
        ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, (me % 7 + 1) * (i + 1) * 1000));
        steps += i;
    }
    done[me] = steps;
    return 0;
}

static void test_contexts_many_tasks(void)
{
    static int done[3000];
    memset(done, 0, sizeof done);
    ddp_sim_t *sim = sim_with_tasks(5, DDP_SIM_TASKS_CONTEXTS, 0);
    int n = 3000;
    for (int i = 0; i < n; i++)
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = i % 2, .name = "t", .rank = i},
                         many_task, done);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    int ok = 0;
    for (int i = 0; i < n; i++)
        ok += done[i] == 28 && ddp_sim_outcome(sim, i)->rc == 0;
    CU_ASSERT_EQUAL(ok, n);
    ddp_sim_stats_t st;
    ddp_sim_stats(sim, &st);
    CU_ASSERT(st.handoffs >= (uint64_t)n * 8);
    ddp_sim_free(sim);
}

/* Deep stacks: each task recurses through frames of 1 KiB, filled with a
 * pattern of its own, parks at the bottom, and checks every frame on the way
 * back after the other tasks ran on their stacks. */
__attribute__((noinline)) static int deep(ddp_sys_t *sys, int depth, int me)
{
    volatile unsigned char frame[1024];
    for (size_t i = 0; i < sizeof frame; i++)
        frame[i] = (unsigned char)(me * 31 + depth * 7 + (int)i);
    int bad = 0;
    if (depth > 0)
        bad = deep(sys, depth - 1, me);
    else
        for (int i = 0; i < 3; i++)
            ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, (me + 1) * 1000));
    for (size_t i = 0; i < sizeof frame; i++)
        bad += frame[i] != (unsigned char)(me * 31 + depth * 7 + (int)i);
    return bad;
}

typedef struct {
    int depth;
    int bad[16];
} deep_t;

static int deep_task(ddp_sys_t *sys, void *arg)
{
    deep_t *d = arg;
    int me = ddp_sim_task_of(sys);
    d->bad[me] = deep(sys, d->depth, me);
    return 0;
}

static void test_tasks_deep_stacks(void)
{
    /* ~12 KiB of frames in the default 16 KiB (the deepest bundled
     * scenario's task writes 9.9); ~400 KiB in 4 MiB (a thread under TSan
     * loses ~800 KiB of its stack to TSan's thread-local state). */
    struct {
        int depth;
        size_t stack;
    } cases[] = {{11, 0}, {400, 4 * 1024 * 1024}};
    for (int c = 0; c < 2; c++) {
        for (int mode = DDP_SIM_TASKS_CONTEXTS; mode <= DDP_SIM_TASKS_THREADS; mode++) {
            deep_t d = {.depth = cases[c].depth};
            memset(d.bad, 0x7f, sizeof d.bad);
            ddp_sim_t *sim = sim_with_tasks(3, (ddp_sim_tasks_t)mode, cases[c].stack);
            for (int i = 0; i < 16; i++)
                ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = i % 2, .name = "deep",
                                                             .rank = i},
                                 deep_task, &d);
            CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
            for (int i = 0; i < 16; i++)
                CU_ASSERT_EQUAL(d.bad[i], 0);
            ddp_sim_free(sim);
        }
    }
}

/* Identity, error context, message buffers and errno are per task: each
 * task sets its own, parks while the others set theirs, and finds its own
 * again (arg: int ok[task]). The thread that ran the simulation gets its
 * own back. */
static int ident_task(ddp_sys_t *sys, void *arg)
{
    int *oks = arg;
    int me = ddp_sim_task_of(sys);
    char phase[32], what[32], unknown[32];
    snprintf(phase, sizeof phase, "phase of %d", me);
    snprintf(what, sizeof what, "failure of task %d", me);
    snprintf(unknown, sizeof unknown, "E?%d", -20000 - me);
    int ok = ddp_ident_rank() == me && ddp_ident_phase()[0] == '\0' &&
             ddp_err_ctx()->code == 0;
    ddp_ident_set_rank(100 + me);
    ddp_ident_set_world(200 + me);
    ddp_ident_set_phase(phase);
    ddp_err_set(-1000 - me, "%s", what);
    ddp_err_peer(me);
    const char *msg = ddp_err_message(), *name = ddp_err_name(-20000 - me);
    char msg_copy[1024];
    snprintf(msg_copy, sizeof msg_copy, "%s", msg);
    for (int i = 0; i < 4; i++) {
        errno = 3000 + me;
        ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, (8 - me) * 1000 + i));
        ok = ok && errno == 3000 + me;
    }
    ok = ok && ddp_ident_rank() == 100 + me && ddp_ident_world() == 200 + me &&
         !strcmp(ddp_ident_phase(), phase) && ddp_err_ctx()->code == -1000 - me &&
         ddp_err_ctx()->peer == me && !strcmp(ddp_err_ctx()->what, what) &&
         !strcmp(ddp_err_ctx()->phase, phase) && ddp_err_ctx()->rank == 100 + me &&
         !strcmp(msg, msg_copy) && !strcmp(name, unknown);
    oks[me] = ok;
    return 0;
}

static void test_tasks_identity(void)
{
    for (int mode = DDP_SIM_TASKS_CONTEXTS; mode <= DDP_SIM_TASKS_THREADS; mode++) {
        ddp_ident_set_rank(77);
        ddp_ident_set_phase("the caller's phase");
        ddp_err_set(-4242, "the caller's error");
        int oks[8] = {0};
        ddp_sim_t *sim = sim_with_tasks(8, (ddp_sim_tasks_t)mode, 0);
        for (int i = 0; i < 8; i++)
            ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = i % 2, .name = "id", .rank = i},
                             ident_task, oks);
        CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
        for (int i = 0; i < 8; i++)
            CU_ASSERT_EQUAL(oks[i], 1);
        /* the phases reached the trace with the tasks' own ranks */
        CU_ASSERT_PTR_NOT_NULL(strstr(ddp_sim_trace(sim, NULL),
                                      "\"phase\":\"phase of 5\",\"rank\":105"));
        ddp_sim_free(sim);
        CU_ASSERT_EQUAL(ddp_ident_rank(), 77);
        CU_ASSERT_STRING_EQUAL(ddp_ident_phase(), "the caller's phase");
        CU_ASSERT_EQUAL(ddp_err_ctx()->code, -4242);
        CU_ASSERT_STRING_EQUAL(ddp_err_ctx()->what, "the caller's error");
        ddp_ident_set_rank(-1);
        ddp_ident_set_phase(NULL);
        ddp_err_set(0, "%s", "");
    }
}

/* A task's error context and ddp_err_message's buffer are allocated when
 * first written (core/err.c): an error set late, on one task of many,
 * after a short one, reads back whole, and stays whole while every other
 * task formats its own. Each task formats a short message, parks, then
 * (task LATE_TASK) a full context of ~1.9 KiB, parks again and compares;
 * its outcome carries it whole too. Every third task never writes its
 * context and reads a fresh one throughout; every third from 1 writes a
 * field through ddp_err_ctx()'s pointer and finds it after its parks. A
 * buffer or context shared by the tasks of a thread, or sized by the
 * first message, fails it. */
#define LATE_TASKS 200
#define LATE_TASK 137
typedef struct {
    int ok[LATE_TASKS];
    char expected[DDP_ERR_MSG_MAX];
} late_err_t;

static int late_err_task(ddp_sys_t *sys, void *arg)
{
    late_err_t *l = arg;
    int me = ddp_sim_task_of(sys);
    char exp[DDP_ERR_MSG_MAX], what[1024], hint[512];
    if (me % 3 == 0 && me != LATE_TASK) { /* never written: fresh throughout */
        int fresh = 1;
        for (int i = 0; i < 4; i++) {
            ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 700 + (me * 5 + i) % 300));
            fresh = fresh && strcmp(ddp_err_message(), "success") == 0;
        }
        l->ok[me] = fresh && ddp_err_ctx()->code == 0 && ddp_err_ctx()->rank == -1 &&
                    ddp_err_ctx()->peer == -1 && ddp_err_ctx()->waited_ns == -1;
        return 0;
    }
    ddp_err_set(-ECONNREFUSED, "short error of task %d", me);
    if (me % 3 == 1)
        ddp_err_ctx()->peer = 1000 + me; /* through the pointer */
    snprintf(exp, sizeof exp, "%s", ddp_err_message());
    int ok = strstr(exp, "short error of task") != NULL;
    ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 1000 + me));
    if (me == LATE_TASK) {
        memset(what, 'w', sizeof what - 1);
        what[sizeof what - 1] = '\0';
        memset(hint, 'h', sizeof hint - 1);
        hint[sizeof hint - 1] = '\0';
        ddp_ident_set_phase("late");
        ddp_err_set(DDP_ETIMEOUT, "%s", what);
        ddp_err_addr("10.0.0.2:29500");
        ddp_err_hint("%s", hint);
        ddp_err_format(ddp_err_ctx(), exp, sizeof exp);
        snprintf(l->expected, sizeof l->expected, "%s", exp);
        ok = ok && strlen(exp) > 1500;
    }
    const char *msg = ddp_err_message();
    ok = ok && strcmp(msg, exp) == 0;
    for (int i = 0; i < 3; i++)
        ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 500 + (me * 7 + i) % 300));
    l->ok[me] = ok && strcmp(msg, exp) == 0 && strcmp(ddp_err_message(), exp) == 0 &&
                (me % 3 != 1 || me == LATE_TASK || ddp_err_ctx()->peer == 1000 + me);
    return me == LATE_TASK ? DDP_ETIMEOUT : 0;
}

static void test_late_error_message_whole(void)
{
    static late_err_t l;
    memset(&l, 0, sizeof l);
    ddp_sim_t *sim = sim_with_tasks(5, DDP_SIM_TASKS_CONTEXTS, 0);
    for (int i = 0; i < LATE_TASKS; i++)
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = i % 2, .name = "t", .rank = i},
                         late_err_task, &l);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    int bad = 0;
    for (int i = 0; i < LATE_TASKS; i++)
        bad += l.ok[i] != 1;
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_TRUE(strlen(l.expected) > 1500);
    CU_ASSERT_STRING_EQUAL(ddp_sim_outcome(sim, LATE_TASK)->message, l.expected);
    ddp_sim_free(sim);
}

/* Children spawned one after another reuse the stacks of those that
 * exited; each starts with a fresh identity and error context whatever its
 * predecessor left. */
static int dirty_child(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    int fresh = ddp_ident_phase()[0] == '\0' && ddp_err_ctx()->code == 0 &&
                ddp_err_ctx()->what[0] == '\0' && ddp_ident_world() == -1;
    ddp_ident_set_phase("dirty");
    ddp_ident_set_world(9);
    ddp_err_set(-5, "left behind");
    ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 1000));
    return fresh ? 0 : 1;
}

static int serial_parent(ddp_sys_t *sys, void *arg)
{
    int *fresh = arg;
    for (int i = 0; i < 200; i++) {
        ddp_spawn_t sp = {.entry = dirty_child, .name = "child"};
        ddp_pid_t pid;
        int st = -1;
        if (ddp_sys_spawn(sys, &sp, &pid) ||
            ddp_sys_wait(sys, pid, &st, ddp_sys_deadline_in(sys, DDP_NS_PER_S)))
            return 1;
        *fresh += st == 0;
    }
    return 0;
}

/* A spawn that succeeds leaves the caller's error context as it was, with
 * RANK in the child's environment or not (the sim's spawn read RANK with
 * ddp_env_get_long, whose "RANK is not set" replaced the caller's error). */
static int spawn_keeps_error(ddp_sys_t *sys, void *arg)
{
    int *kept = arg;
    ddp_err_set(-ECONNREFUSED, "the caller's own error");
    ddp_env_t *bad = ddp_env_clone(ddp_sys_env(sys));
    ddp_env_set(bad, "RANK", "not-a-number");
    const ddp_env_t *envs[] = {NULL, bad};
    for (int i = 0; i < 2; i++) {
        ddp_spawn_t sp = {.entry = dirty_child, .name = "child", .env = envs[i]};
        ddp_pid_t pid;
        int st = -1;
        int rc = ddp_sys_spawn(sys, &sp, &pid);
        *kept += rc == 0 && ddp_err_ctx()->code == -ECONNREFUSED &&
                 !strcmp(ddp_err_ctx()->what, "the caller's own error");
        if (rc == 0)
            ddp_sys_wait(sys, pid, &st, ddp_sys_deadline_in(sys, DDP_NS_PER_S));
        ddp_err_set(-ECONNREFUSED, "the caller's own error");
    }
    ddp_env_free(bad);
    return 0;
}

static void test_spawn_keeps_error_context(void)
{
    int kept = 0;
    ddp_sim_t *sim = sim_with_tasks(6, DDP_SIM_TASKS_CONTEXTS, 0);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "parent", .rank = 0},
                     spawn_keeps_error, &kept);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(kept, 2);
    ddp_sim_free(sim);
}

static void test_contexts_stack_reuse(void)
{
    int fresh = 0;
    ddp_sim_t *sim = sim_with_tasks(4, DDP_SIM_TASKS_CONTEXTS, 0);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "parent", .rank = 0},
                     serial_parent, &fresh);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 0)->rc, 0);
    CU_ASSERT_EQUAL(fresh, 200);
    CU_ASSERT_EQUAL(ddp_sim_task_count(sim), 201);
    ddp_sim_free(sim);
}

/* Simulations run one after another share a process-wide cache of stack
 * slabs (sim/sim_ctx.c): a task must start clean on a slot an earlier
 * simulation left dirty, however many slots the simulations in between
 * used. With 8, then 3, then 8 tasks, slots 3..7 were last used two
 * simulations back: a cache that remembered only the last user of a slab
 * took them for new ones (zeros) and skipped their reset. 70 tasks take a
 * second slab. */
static int dirty_sims(uint64_t seed)
{
    static const int counts[] = {8, 3, 8, 1, 70, 8};
    int bad = 0;
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        ddp_sim_t *sim = sim_with_tasks(seed + k, DDP_SIM_TASKS_CONTEXTS, 0);
        for (int i = 0; i < counts[k]; i++)
            ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = i % 2, .name = "t", .rank = i},
                             dirty_child, NULL);
        bad += ddp_sim_run(sim) != DDP_SIM_DONE;
        for (int i = 0; i < counts[k]; i++)
            bad += ddp_sim_outcome(sim, i)->rc != 0;
        ddp_sim_free(sim);
    }
    return bad;
}

static void test_contexts_slab_cache(void)
{
    CU_ASSERT_EQUAL(dirty_sims(20), 0);
    CU_ASSERT_EQUAL(dirty_sims(30), 0);
}

/* Trace lines are formatted without printf where the fields allow: the
 * bytes must be printf's, for the handled conversions, for the others (the
 * printf fallback), and for a line cut at 1 KiB. */
static char long_text[1500];

static int trace_writer(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    ddp_sim_trace_event(sys, "k1", "\"a\":%d,\"b\":%u,\"c\":%lld,\"d\":%llu,\"e\":\"%s\",\"p\":\"%%\"",
                        -42, 7u, -9000000000LL, 18446744073709551615ULL, "x");
    ddp_sim_trace_event(sys, "k2", "\"w\":%5d,\"f\":%.2f,\"h\":%x", 3, 1.5, 255u);
    ddp_sim_trace_event(sys, "k3", "\"z\":%zu,\"l\":%ld,\"s\":\"%s\"", (size_t)12, -5L,
                        long_text);
    ddp_sim_trace_event(sys, "k4", "%s", "");
    /* the head written by hand (sim/sim_trace.c, put_head): a time of 12
     * digits; a kind too long for it (ddp_fmt writes that head, cut) */
    ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 123456789012LL));
    ddp_sim_trace_event(sys, "k5", "%s", "");
    ddp_sim_trace_event(sys, long_text + sizeof long_text - 1 - 990, "%s", "");
    return 0;
}

static void test_trace_line_bytes(void)
{
    memset(long_text, 'q', sizeof long_text - 1);
    ddp_sim_t *sim = two_nodes(2, 1);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "w", .rank = 0},
                     trace_writer, NULL);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    const char *tr = ddp_sim_trace(sim, NULL);
    char want[1100];
    snprintf(want, sizeof want, "{\"t\":0,\"task\":\"w\",\"id\":0,\"kind\":\"k1\",\"a\":%d,\"b\":%u,"
             "\"c\":%lld,\"d\":%llu,\"e\":\"%s\",\"p\":\"%%\"}\n",
             -42, 7u, -9000000000LL, 18446744073709551615ULL, "x");
    CU_ASSERT_PTR_NOT_NULL(strstr(tr, want));
    snprintf(want, sizeof want, "{\"t\":0,\"task\":\"w\",\"id\":0,\"kind\":\"k2\",\"w\":%5d,\"f\":%.2f,"
             "\"h\":%x}\n", 3, 1.5, 255u);
    CU_ASSERT_PTR_NOT_NULL(strstr(tr, want));
    /* cut: the first 1,021 bytes of the line, then "}\n" */
    int n = snprintf(want, sizeof want, "{\"t\":0,\"task\":\"w\",\"id\":0,\"kind\":\"k3\",\"z\":%zu,"
                     "\"l\":%ld,\"s\":\"%s", (size_t)12, -5L, long_text);
    CU_ASSERT(n > 1021);
    memcpy(want + 1021, "}\n", 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(tr, want));
    CU_ASSERT_PTR_NOT_NULL(strstr(tr, "{\"t\":0,\"task\":\"w\",\"id\":0,\"kind\":\"k4\",}\n"));
    CU_ASSERT_PTR_NOT_NULL(
        strstr(tr, "{\"t\":123456789012,\"task\":\"w\",\"id\":0,\"kind\":\"k5\",}\n"));
    n = snprintf(want, sizeof want, "{\"t\":123456789012,\"task\":\"w\",\"id\":0,\"kind\":\"%s\"",
                 long_text + sizeof long_text - 1 - 990);
    CU_ASSERT(n > 1021);
    memcpy(want + 1021, "}\n", 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(tr, want));
    ddp_sim_free(sim);
}

/* A crashed task that ignores DDP_ECANCELED is stopped after 100,000 calls
 * (its thread exits, or its context is left for good); the others go on,
 * and both task kinds give the same trace. */
static int stubborn(ddp_sys_t *sys, void *arg)
{
    const int64_t *wait_ns = arg; /* each wait's length */
    for (;;) /* never looks at the result */
        (void)ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, *wait_ns));
    return 0;
}

/* *arg waits of 1 ms each (NULL: 20). */
static int waits_of_1ms(ddp_sys_t *sys, void *arg)
{
    int n = arg ? *(const int *)arg : 20;
    for (int i = 0; i < n; i++)
        if (ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, DDP_NS_PER_MS)))
            return 1;
    return 0;
}

/* Waits of 1 ms, then of 1 s: the crash at 5 ms leaves the stubborn task's
 * last timeout pending (at 6 ms, at 1 s) and the task no longer parked on
 * it. That timeout must not move the clock: the run ends when the
 * bystander does, at 20 ms. */
static void test_tasks_ignoring_cancel(void)
{
    static const int64_t waits[] = {DDP_NS_PER_MS, DDP_NS_PER_S};
    for (int w = 0; w < 2; w++) {
        uint64_t hash[2];
        for (int mode = DDP_SIM_TASKS_CONTEXTS; mode <= DDP_SIM_TASKS_THREADS; mode++) {
            ddp_sim_t *sim = sim_with_tasks(6, (ddp_sim_tasks_t)mode, 0);
            int v = ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "stubborn",
                                                                 .rank = 0},
                                     stubborn, (void *)&waits[w]);
            ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "bystander",
                                                         .rank = 1},
                             waits_of_1ms, NULL);
            ddp_sim_add_fault(sim, &(ddp_fault_t){.kind = DDP_FAULT_CRASH, .node = -1,
                                                      .task = v, .peer_node = -1,
                                                      .start_ns = 5 * DDP_NS_PER_MS});
            ddp_sim_run(sim);
            CU_ASSERT_EQUAL(ddp_sim_outcome(sim, v)->state, DDP_SIM_TASK_CRASHED);
            CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 1)->state, DDP_SIM_TASK_EXITED);
            CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 1)->rc, 0);
            ddp_sim_stats_t st;
            ddp_sim_stats(sim, &st);
            CU_ASSERT_EQUAL(st.virtual_ns, 20 * DDP_NS_PER_MS);
            hash[mode - DDP_SIM_TASKS_CONTEXTS] = st.trace_hash;
            ddp_sim_free(sim);
        }
        CU_ASSERT_EQUAL(hash[0], hash[1]);
    }
}

/* ---- the scheduler's own rules (the sched-* mutants, docs/testing.md) ---- */

/* A 100 s wait by the task's clock: 0 when it ran to its end. */
static int sleep_100s(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    return ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 100 * DDP_NS_PER_S)) ? 1 : 0;
}

/* A process with a second thread (as rank 0 with its store server): both
 * wait 100 s. */
static int proc_with_thread(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    ddp_thread_t th;
    if (ddp_sys_thread_start(sys, sleep_100s, NULL, "server", &th) != 0)
        return 2;
    int rc = sleep_100s(sys, NULL), trc = 0;
    if (ddp_sys_thread_join(sys, th, &trc, ddp_sys_deadline_in(sys, 200 * DDP_NS_PER_S)))
        return 3;
    return rc || trc;
}

/* A crash takes the whole process, its other threads included, and at
 * once: both were parked for 100 s, both are crashed at 1 s, and the run
 * ends there (a crashed master's store thread must not serve on). */
static void test_crash_takes_threads(void)
{
    ddp_sim_t *sim = two_nodes(21, 0);
    ddp_sim_add_fault(sim, &(ddp_fault_t){.kind = DDP_FAULT_CRASH, .node = -1, .task = 0,
                                              .peer_node = -1, .start_ns = DDP_NS_PER_S});
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "master", .rank = 0},
                     proc_with_thread, NULL);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL_FATAL(ddp_sim_task_count(sim), 2);
    for (int i = 0; i < 2; i++) {
        const ddp_sim_outcome_t *o = ddp_sim_outcome(sim, i);
        CU_ASSERT_EQUAL(o->thread, i == 1);
        CU_ASSERT_EQUAL(o->state, DDP_SIM_TASK_CRASHED);
        CU_ASSERT_EQUAL(o->end_ns, DDP_NS_PER_S);
    }
    ddp_sim_stats_t st;
    ddp_sim_stats(sim, &st);
    CU_ASSERT_EQUAL(st.virtual_ns, DDP_NS_PER_S); /* not 100 s: woken by the kill */
    ddp_sim_free(sim);
}

typedef struct late_add {
    int64_t seen_ns; /* what the added task's clock said first */
} late_add_t;

static int read_clock(ddp_sys_t *sys, void *arg)
{
    ((late_add_t *)arg)->seen_ns = ddp_sys_now(sys);
    return 0;
}

/* At virtual 2 s, adds a task whose start time (0) has passed. */
static int add_task_late(ddp_sys_t *sys, void *arg)
{
    if (ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 2 * DDP_NS_PER_S)))
        return 1;
    ddp_sim_t *sim = ddp_sim_of(sys);
    return ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "late", .rank = 1},
                            read_clock, arg) < 0;
}

/* Virtual time never runs back: a task added while the run is under way,
 * with a start time already past, starts now. */
static void test_clock_never_runs_back(void)
{
    ddp_sim_t *sim = two_nodes(22, 0);
    late_add_t la = {-1};
    int64_t t0 = 0;
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "clock", .rank = -1},
                     skew_reader, &t0);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "adder", .rank = 0},
                     add_task_late, &la);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL_FATAL(ddp_sim_task_count(sim), 3);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 1)->rc, 0);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 2)->state, DDP_SIM_TASK_EXITED);
    CU_ASSERT_EQUAL(la.seen_ns - t0, 2 * DDP_NS_PER_S);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 2)->end_ns, 2 * DDP_NS_PER_S);
    ddp_sim_free(sim);
}

/* Waits for nothing, again and again, at one virtual instant. */
static int spin_at_an_instant(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    while (ddp_sys_sleep_until(sys, ddp_sys_now(sys)) == 0)
        ;
    return 0;
}

/* The livelock bound counts the calls made while virtual time stands
 * still, not the calls of the whole run: a run of 2,000 steps passes a
 * bound of 100; one that spins at an instant is stopped by it. */
static void test_livelock_bound_per_instant(void)
{
    ddp_sim_opts_t o = {.seed = 23, .livelock_calls = 100};
    static const int steps = 2000; /* many sim calls, never many at one instant */
    ddp_sim_t *sim = ddp_sim_new(&o);
    ddp_sim_add_node(sim, "node0", "10.0.0.1", 0);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "stepper", .rank = 0},
                     waits_of_1ms, (void *)&steps);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    CU_ASSERT_EQUAL(ddp_sim_outcome(sim, 0)->rc, 0);
    ddp_sim_stats_t st;
    ddp_sim_stats(sim, &st);
    CU_ASSERT_EQUAL(st.virtual_ns, 2000 * DDP_NS_PER_MS);
    ddp_sim_free(sim);

    sim = ddp_sim_new(&o);
    ddp_sim_add_node(sim, "node0", "10.0.0.1", 0);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "spinner", .rank = 0},
                     spin_at_an_instant, NULL);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_LIVELOCK);
    ddp_sim_free(sim);
}

/* ---- a task's stack ends at a guard page (the ctx-no-guard-page mutant) ---- */

static int guard_pipe = -1; /* the forked child's: the deep task says it returned */

/* n frames of about 1 KiB each, each touched at both ends: no page of the
 * way down is skipped. */
DDP_NOINLINE static int deep_frames(int n)
{
    volatile char buf[1024];
    buf[0] = (char)n;
    buf[sizeof buf - 1] = (char)n;
    if (n == 0)
        return buf[0];
    return deep_frames(n - 1) + buf[sizeof buf - 1];
}

/* Goes 16 KiB past the end of its stack (arg: the stack's size). */
static int overflow_stack(ddp_sys_t *sys, void *arg)
{
    (void)sys;
    int r = deep_frames((int)(*(const size_t *)arg / 1024) + 16);
    if (write(guard_pipe, "returned", 8) != 8)
        return 2;
    return r == -1; /* keeps the recursion's result used */
}

static int park_one_second(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    return ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, DDP_NS_PER_S)) ? 1 : 0;
}

/* Contexts mode: a task that recurses past the end of its stack is stopped
 * by the guard page below it, and does not write over the stack of the
 * task in the slot below (the neighbour, parked, started first so that it
 * holds that slot). In a forked child: the crash is the expected outcome
 * (a signal, or a sanitizer's report and exit 1), never "returned". */
static void test_contexts_guard_page(void)
{
    static const size_t stack = 520 * 1024; /* above every build's minimum;
                                                no other test's shape */
    int fds[2];
    CU_ASSERT_EQUAL_FATAL(pipe(fds), 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CU_ASSERT_TRUE_FATAL(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        guard_pipe = fds[1];
        setrlimit(RLIMIT_CORE, &(struct rlimit){0, 0});
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, 2); /* the sanitizers' report of the crash */
        ddp_sim_opts_t o = {.seed = 24, .tasks = DDP_SIM_TASKS_CONTEXTS, .stack_size = stack};
        ddp_sim_t *sim = ddp_sim_new(&o);
        ddp_sim_add_node(sim, "node0", "10.0.0.1", 0);
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "neighbour", .rank = 0},
                         park_one_second, NULL);
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "deep", .rank = 1,
                                                     .start_ns = DDP_NS_PER_MS},
                         overflow_stack, (void *)&stack);
        ddp_sim_run(sim);
        _exit(0);
    }
    close(fds[1]);
    char buf[16] = "";
    ssize_t r = read(fds[0], buf, sizeof buf - 1); /* 0 (EOF) when the child died */
    close(fds[0]);
    int st = 0;
    CU_ASSERT_EQUAL(waitpid(pid, &st, 0), pid);
    CU_ASSERT_TRUE(r <= 0);
    if (r > 0)
        printf("\n  the deep task came back from 16 KiB past its stack: no guard page\n");
    CU_ASSERT_FALSE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* KiB the process maps (/proc/self/statm), -1 unknown. */
static long long vm_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long long pages = -1;
    if (f && fscanf(f, "%lld", &pages) != 1)
        pages = -1;
    if (f)
        fclose(f);
    return pages < 0 ? -1 : pages * (sysconf(_SC_PAGESIZE) / 1024);
}

/* In a forked child, under an address-space limit 32 MiB above what it
 * maps, 8,192 parked tasks (~32 KiB of stack slot each: 256 MiB) cannot all start:
 * the run dies saying that the address space ran out, not memory, and
 * which `ulimit -v` it needs (more than the limit it had). */
static void test_oom_names_address_space(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    printf("\n  skipped: a sanitizer's shadow memory needs an unlimited address space\n");
    return;
#endif
    int fds[2];
    CU_ASSERT_EQUAL_FATAL(pipe(fds), 0);
    fflush(stdout);
    fflush(stderr);
    long long limit = vm_kib() + 32 * 1024;
    pid_t pid = fork();
    CU_ASSERT_TRUE_FATAL(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        setrlimit(RLIMIT_CORE, &(struct rlimit){0, 0});
        rlim_t as = (rlim_t)limit * 1024;
        setrlimit(RLIMIT_AS, &(struct rlimit){as, as});
        ddp_sim_t *sim = ddp_sim_new(&(ddp_sim_opts_t){.seed = 5});
        ddp_sim_add_node(sim, "node0", "10.0.0.1", 0);
        for (int i = 0; i < 8192; i++)
            ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "t", .rank = i},
                             park_one_second, NULL);
        ddp_sim_run(sim);
        _exit(0);
    }
    close(fds[1]);
    static char err[8192];
    size_t len = 0;
    for (ssize_t r; len + 1 < sizeof err && (r = read(fds[0], err + len, sizeof err - 1 - len)) > 0;)
        len += (size_t)r;
    err[len] = '\0';
    close(fds[0]);
    int st = 0;
    CU_ASSERT_EQUAL(waitpid(pid, &st, 0), pid);
    CU_ASSERT_FALSE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "ddpsim sim: out of memory: "));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "the address space ran out, not memory"));
    /* the slot: the stack, a guard page and the identity state */
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "Each task reserves a "));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, " KiB stack slot"));
    const char *u = strstr(err, "run under `ulimit -v ");
    long long need = u ? atoll(u + 21) : 0;
    CU_ASSERT_TRUE(need > limit);
    if (!u || need <= limit)
        printf("\n  limit %lld KiB; stderr: %s\n", limit, err);
}

DDP_SUITE("sim", NULL, NULL,
          {"chrome trace and timeline exports", test_trace_exports},
          {"out of memory: the address space, and the ulimit -v needed",
           test_oom_names_address_space},
          {"echo over the virtual network", test_echo},
          {"an outcome's message is stored only when there is one",
           test_outcome_message_only_when_set},
          {"refused connect, late-starting server", test_refused_and_late_start},
          {"deadlock report names task and wait", test_deadlock_report},
          {"time limit report words every kind of wait", test_wait_words_every_kind},
          {"30-minute timeout in virtual time", test_thirty_minutes_virtual},
          {"same seed same trace, 20 runs", test_determinism},
          {"partition healing before/after deadline", test_partition},
          {"partition: both directions held until the heal", test_partition_both_ways},
          {"fault probability: fires about as often as p says", test_fault_probability},
          {"crash at phase and node crash at time", test_crash_faults},
          {"refuse (count) and resolve faults", test_refuse_fault_and_resolve},
          {"spawn and wait for child tasks", test_spawn_in_sim},
          {"a spawn that succeeds keeps the caller's error context", test_spawn_keeps_error_context},
          {"node clock skew", test_clock_skew},
          {"receive window: a slow reader holds its writer", test_receive_window},
          {"interfaces, routes, per-node names, bind families", test_interfaces_routes_names},
          {"bandwidth fault: serialised on the uplink, queued, in its window", test_bandwidth_fault},
          {"fault point table and lookups", test_fault_point_table},
          {"fault points: armed-only threads skip unarmed points", test_fault_armed_points},
          {"point faults: aimed, counted, checked", test_point_faults},
          {"contexts and threads give the same trace", test_tasks_same_trace},
          {"contexts: 3,000 tasks", test_contexts_many_tasks},
          {"deep stacks survive switches (both task kinds)", test_tasks_deep_stacks},
          {"identity, error context and errno per task", test_tasks_identity},
          {"contexts: exited tasks' stacks reused, fresh state", test_contexts_stack_reuse},
          {"an error set late on one task of many reads back whole", test_late_error_message_whole},
          {"contexts: later simulations' tasks start clean on cached slabs", test_contexts_slab_cache},
          {"trace lines: printf's bytes, cut at 1 KiB", test_trace_line_bytes},
          {"a task ignoring cancellation is stopped (both kinds)", test_tasks_ignoring_cancel},
          {"a crash takes every thread of the process, at once", test_crash_takes_threads},
          {"virtual time never runs back (a task added with a past start)", test_clock_never_runs_back},
          {"the livelock bound counts calls at one instant, not in the run", test_livelock_bound_per_instant},
          {"contexts: a stack overflow stops at the guard page", test_contexts_guard_page},
          {"somaxconn is the caller's node's", test_somaxconn_per_node})
