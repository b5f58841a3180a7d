/* tests/test_newest_store_events.c — what the store server tells those
 * who watch it (core/store_server.c), over virtual sockets in the
 * simulator: the job's events (ddp_fault_notify: the fault windows and
 * `ddpsim check` read them through the simulator's tap) and each client's
 * progress (on_client: the real runner's hosted store reads it as "[store:
 * joined, left]"). Pinned: a MULTI_SET is one SET event per key, keys only,
 * in order; a client joins once, at its first completed request (VALIDATE
 * for the current protocol, any request for the legacy one), whatever it
 * sends after; JOINED events count the clients; BARRIER is the ADD that
 * reached the world; LEFT ends every connection. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/sim.h"
#include "ddp/store.h"
#include "test.h"

#define MAXN 64

typedef struct seen {
    char sets[MAXN][64]; /* SET events' keys */
    long long setv[MAXN];
    int nsets;
    long long joined[MAXN]; /* JOINED events' values */
    int njoined;
    int phase[8][8]; /* phase[client id][phase]: how often */
    int nclients;
} seen_t;

static void tap(void *arg, const ddp_fault_event_t *ev, int node, int64_t vt)
{
    seen_t *s = arg;
    (void)node, (void)vt;
    if (ev->kind == DDP_TRIG_SET && s->nsets < MAXN) {
        snprintf(s->sets[s->nsets], sizeof s->sets[0], "%s", ev->name ? ev->name : "");
        s->setv[s->nsets++] = ev->value;
    } else if (ev->kind == DDP_TRIG_JOINED && s->njoined < MAXN) {
        s->joined[s->njoined++] = ev->value;
    }
}

static void on_client(void *arg, const ddp_store_client_note_t *n)
{
    seen_t *s = arg;
    if (n->id < 8 && n->phase < 8)
        s->phase[n->id][n->phase]++;
    if ((int)n->id > s->nclients)
        s->nclients = (int)n->id;
}

static int server(ddp_sys_t *sys, void *arg)
{
    ddp_store_server_opts_t o = {.port = 29400, .on_client = on_client, .on_client_arg = arg,
                                 .world = 2};
    ddp_store_server_t *srv;
    if (ddp_store_server_new(sys, &o, &srv))
        return 1;
    ddp_store_server_run(srv, ddp_sys_deadline_in(sys, 20 * DDP_NS_PER_S));
    ddp_store_server_free(srv);
    return 0;
}

typedef struct client_arg {
    ddp_store_proto_t proto;
    int which;
} client_arg_t;

/* Client 0 (current protocol): MULTI_SET of three keys, a SET, a GET, the
 * barrier ADD. Client 1 starts later: its ADD completes the barrier. */
static int client(ddp_sys_t *sys, void *arg)
{
    const client_arg_t *c = arg;
    ddp_store_client_opts_t o = {.host = "node0", .port = 29400, .protocol = c->proto,
                                 .connect_deadline = ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_S)};
    int rc;
    ddp_store_t *st = ddp_store_client_connect(sys, &o, &rc);
    if (!st)
        return 1;
    int64_t dl = ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_S);
    int64_t n = 0;
    rc = 0;
    if (c->which == 0) {
        static const char *const keys[] = {"ka", "kb", "kc"};
        ddp_buf_t vals[3] = {{.data = (uint8_t *)"va", .len = 2},
                             {.data = (uint8_t *)"vbb", .len = 3},
                             {.data = (uint8_t *)"vccc", .len = 4}};
        rc = ddp_store_multi_set(st, keys, vals, 3, dl);
        rc = rc ? rc : ddp_store_set_str(st, "kd", "vd", dl);
        ddp_buf_t b = {0};
        rc = rc ? rc : ddp_store_get(st, "ka", &b, dl);
        ddp_buf_free(&b);
    }
    rc = rc ? rc : ddp_store_add(st, "store_based_barrier_key:1", 1, &n, dl);
    ddp_store_free(st);
    return rc ? 2 : 0;
}

static void run(ddp_store_proto_t proto1, seen_t *s)
{
    memset(s, 0, sizeof *s);
    ddp_sim_opts_t o = {.seed = 3, .tap = tap, .tap_arg = s};
    ddp_sim_t *sim = ddp_sim_new(&o);
    ddp_sim_add_node(sim, "node0", "10.0.0.1", 0);
    ddp_sim_add_node(sim, "node1", "10.0.0.2", 0);
    client_arg_t c0 = {DDP_STORE_PROTO_CURRENT, 0}, c1 = {proto1, 1};
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "store", .rank = -1},
                     server, s);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "c0", .rank = 0,
                                                 .start_ns = DDP_NS_PER_MS},
                     client, &c0);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "c1", .rank = 1,
                                                 .start_ns = DDP_NS_PER_S},
                     client, &c1);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    for (int i = 0; i < ddp_sim_task_count(sim); i++)
    {
        const ddp_sim_outcome_t *x = ddp_sim_outcome(sim, i);
        if (x->rc)
            printf("\n  task %d: rc %d: %s", i, x->rc, x->message);
        CU_ASSERT_EQUAL(x->rc, 0);
    }
    ddp_sim_free(sim);
}

/* The keys set, as the server saw them: "/ka" (TCPStore's "/" prefix). */
static void test_multi_set_events(void)
{
    seen_t *s = calloc(1, sizeof *s);
    run(DDP_STORE_PROTO_CURRENT, s);
    static const char *const want[] = {"/ka", "/kb", "/kc", "/kd",
                                       "/store_based_barrier_key:1",
                                       "/store_based_barrier_key:1"};
    int ok = s->nsets == 6;
    for (int i = 0; ok && i < 6; i++)
        ok = !strcmp(s->sets[i], want[i]) && s->setv[i] == (i < 4 ? -1 : i - 3);
    if (!ok)
        for (int i = 0; i < s->nsets; i++)
            printf("\n  SET event %d: %s (value %lld)", i, s->sets[i], s->setv[i]);
    CU_ASSERT_TRUE(ok);
    free(s);
}

/* Two clients, the second of either protocol: each joined once, JOINED
 * counted 1 then 2, the barrier passed by the second only, both left. */
static void test_joined_once(void)
{
    static const ddp_store_proto_t protos[] = {DDP_STORE_PROTO_CURRENT, DDP_STORE_PROTO_LEGACY};
    for (size_t p = 0; p < 2; p++) {
        seen_t *s = calloc(1, sizeof *s);
        run(protos[p], s);
        int ok = s->nclients == 2 && s->njoined == 2 && s->joined[0] == 1 && s->joined[1] == 2;
        for (int id = 1; id <= 2; id++)
            ok &= s->phase[id][DDP_STORE_CLIENT_CONNECTED] == 1 &&
                  s->phase[id][DDP_STORE_CLIENT_JOINED] == 1 &&
                  s->phase[id][DDP_STORE_CLIENT_BARRIER] == (id == 2) &&
                  s->phase[id][DDP_STORE_CLIENT_LEFT] == 1;
        if (!ok) {
            printf("\n  %s second client: %d clients, JOINED events:", p ? "legacy" : "current",
                   s->nclients);
            for (int i = 0; i < s->njoined; i++)
                printf(" %lld", s->joined[i]);
            for (int id = 1; id <= 2 && id < 8; id++)
                printf("\n  client %d: connected %d joined %d barrier %d left %d", id,
                       s->phase[id][1], s->phase[id][2], s->phase[id][3], s->phase[id][4]);
        }
        CU_ASSERT_TRUE(ok);
        free(s);
    }
}

DDP_SUITE("newest_store_events", NULL, NULL,
          {"MULTI_SET: one SET event per key, keys only, in order", test_multi_set_events},
          {"a client joins once, either protocol; barrier; left", test_joined_once})
