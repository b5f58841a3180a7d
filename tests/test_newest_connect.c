/* tests/test_newest_connect.c — the store client's connect against its
 * deadline (core/store_client.c), in the simulator (virtual clock, virtual
 * sockets: no port of this host, and the same figures on every host).
 *
 *  - dual stack: the master's name answers an IPv6 address that is silent
 *    from the client's node (it has IPv6, on another network: the SYN goes
 *    nowhere) before the IPv4 one that works. The IPv6 try gets only its
 *    share of the time left, so the IPv4 answer connects well inside the
 *    deadline (pytorch #131691);
 *  - the retry loop is bounded by its deadline: with nobody listening the
 *    client gives up at the deadline (refused connects retried with
 *    backoff until then), having moved the virtual clock to it and no
 *    further; a loop that forgot the bound would spin at one virtual
 *    instant until the simulator's livelock bound stops the run. */
#include <stdio.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/sim.h"
#include "ddp/store.h"
#include "test.h"

#define S DDP_NS_PER_S

typedef struct conn_run {
    int64_t deadline_ns; /* the client's connect deadline, from its start */
    int rc, attempts;
    int64_t done_ns; /* virtual time when the connect returned */
} conn_run_t;

static int serve(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    ddp_store_server_opts_t o = {.port = 29400};
    ddp_store_server_t *srv;
    if (ddp_store_server_new(sys, &o, &srv))
        return 1;
    ddp_store_server_run(srv, ddp_sys_deadline_in(sys, 60 * S));
    ddp_store_server_free(srv);
    return 0;
}

static int client(ddp_sys_t *sys, void *arg)
{
    conn_run_t *r = arg;
    int64_t start = ddp_sys_now(sys);
    ddp_store_client_opts_t o = {.host = "node0", .port = 29400, .seed = 1,
                                 .connect_deadline = start + r->deadline_ns};
    ddp_store_t *st = ddp_store_client_connect(sys, &o, &r->rc);
    r->done_ns = ddp_sys_now(sys) - start;
    if (st) {
        r->rc = 0;
        ddp_store_free(st);
    }
    return 0;
}

/* node0 has fd00::1 and 10.0.0.1; node1 has fd01::2 (another IPv6
 * network: fd00::1 is silent from it) and 10.0.0.2; the name node0
 * answers the IPv6 address first (answers, in order). */
static void test_silent_ipv6_first(void)
{
    static const char *const answers[][3] = {{"fd00::1", "10.0.0.1", NULL},
                                             {"fd00::1", "fd00::1:1", "10.0.0.1"}};
    for (size_t c = 0; c < sizeof answers / sizeof answers[0]; c++) {
        ddp_sim_opts_t so = {.seed = 2};
        ddp_sim_t *sim = ddp_sim_new(&so);
        ddp_sim_add_node(sim, "node0", "10.0.0.1", 0);
        ddp_sim_add_node(sim, "node1", "10.0.0.2", 0);
        ddp_sim_add_iface(sim, 0, "eth0", "10.0.0.1/8");
        ddp_sim_add_iface(sim, 0, "eth0", "fd00::1/64");
        ddp_sim_add_iface(sim, 1, "eth0", "10.0.0.2/8");
        ddp_sim_add_iface(sim, 1, "eth0", "fd01::2/64");
        for (int i = 0; i < 3 && answers[c][i]; i++)
            ddp_sim_add_hostent(sim, -1, "node0", answers[c][i]);
        conn_run_t r = {.deadline_ns = 30 * S, .rc = -1};
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "store", .rank = -1},
                         serve, NULL);
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "rank1", .rank = 1,
                                                     .start_ns = DDP_NS_PER_MS},
                         client, &r);
        ddp_sim_run(sim);
        /* each silent answer takes its share of the time left: of 2
         * answers the first half of 30 s; of 3, a third, then half of the
         * 20 s left */
        int64_t most = (c == 0 ? 15 : 20) * S + 100 * DDP_NS_PER_MS;
        int ok = r.rc == 0 && r.done_ns <= most;
        if (!ok)
            printf("\n  answers %s, %s%s%s: rc %d (%s) after %.3f s\n", answers[c][0],
                   answers[c][1], answers[c][2] ? ", " : "", answers[c][2] ? answers[c][2] : "",
                   r.rc, ddp_err_name(r.rc), (double)r.done_ns / 1e9);
        CU_ASSERT_TRUE(ok);
        ddp_sim_free(sim);
    }
}

/* Nobody listens: the refused connects are retried until the deadline,
 * and the client returns there (not before, not after: its last sleep
 * ends at the deadline). */
static void test_retry_bounded_by_deadline(void)
{
    static const int64_t deadlines[] = {3 * S, 10 * S + 7};
    for (size_t c = 0; c < sizeof deadlines / sizeof deadlines[0]; c++) {
        ddp_sim_opts_t so = {.seed = 4, .livelock_calls = 200000};
        ddp_sim_t *sim = ddp_sim_new(&so);
        ddp_sim_add_node(sim, "node0", "10.0.0.1", 0);
        ddp_sim_add_node(sim, "node1", "10.0.0.2", 0);
        conn_run_t r = {.deadline_ns = deadlines[c], .rc = 0};
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "rank1", .rank = 1},
                         client, &r);
        ddp_sim_result_t res = ddp_sim_run(sim);
        int ok = res == DDP_SIM_DONE && r.rc != 0 && r.done_ns >= deadlines[c] &&
                 r.done_ns <= deadlines[c] + DDP_NS_PER_MS &&
                 ddp_sim_outcome(sim, 0)->retries > 5;
        if (!ok)
            printf("\n  deadline %.3f s: sim result %d, rc %d (%s) after %.3f s, %d retries\n",
                   (double)deadlines[c] / 1e9, (int)res, r.rc, ddp_err_name(r.rc),
                   (double)r.done_ns / 1e9, ddp_sim_outcome(sim, 0)->retries);
        CU_ASSERT_TRUE(ok);
        ddp_sim_free(sim);
    }
}

DDP_SUITE("newest_connect", NULL, NULL,
          {"a silent IPv6 answer leaves the IPv4 one time to connect", test_silent_ipv6_first},
          {"the connect retry loop ends at its deadline", test_retry_bounded_by_deadline})
