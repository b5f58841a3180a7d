/* tests/test_newest_elastic.c — the elastic agent (harness/elastic.c) run
 * directly in the simulator, one agent task per node, with workers of the
 * test's own that record what each start of theirs got (RANK, WORLD_SIZE,
 * GROUP_RANK, MASTER_PORT, TORCHELASTIC_RESTART_COUNT, when) and fail on
 * cue. The facts pinned: a node joining restarts the group without costing
 * a restart; max_restarts counts failures exactly; min/max nodes and the
 * last call decide when a round completes and how large it is; group ranks
 * follow the sorted agent ids; each round's workers meet at that round's
 * MASTER_ADDR/PORT keys; the endpoint's host serves the store. Virtual time
 * only: every figure is the simulator's, the same on every host. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/sim.h"
#include "../harness/elastic_priv.h"
#include "test.h"

#define MAX_STARTS 64
#define S(x) ((int64_t)(x) * DDP_NS_PER_S)

typedef struct start {
    int node, rank, world, group_rank, restart, port, attempt;
    int64_t vt;
} start_t;

typedef struct script {
    int fail_rank;  /* this rank exits 1 ... */
    int fail_times; /* ... on its first fail_times starts */
    int failed;
    int64_t run_ns; /* a worker that does not fail runs this long */
    start_t s[MAX_STARTS];
    int n;
    char keys[32][96]; /* the rendezvous keys set, as the store saw them */
    int nkeys;
} script_t;

static int env_int(ddp_sys_t *sys, const char *name)
{
    const char *v = ddp_env_get(ddp_sys_env(sys), name);
    return v ? atoi(v) : -1;
}

static int worker(ddp_sys_t *sys, void *arg)
{
    script_t *sc = arg;
    char host[64] = "";
    ddp_sys_hostname(sys, host, sizeof host);
    start_t st = {.node = atoi(host + 4), .rank = env_int(sys, "RANK"),
                  .world = env_int(sys, "WORLD_SIZE"), .group_rank = env_int(sys, "GROUP_RANK"),
                  .restart = env_int(sys, "TORCHELASTIC_RESTART_COUNT"),
                  .port = env_int(sys, "MASTER_PORT"),
                  .attempt = env_int(sys, "DDPSIM_WORKER_ATTEMPT"), .vt = ddp_sys_now(sys)};
    if (sc->n < MAX_STARTS)
        sc->s[sc->n++] = st;
    if (st.rank == sc->fail_rank && sc->failed < sc->fail_times) {
        sc->failed++;
        return 1;
    }
    return ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, sc->run_ns)) ? 2 : 0;
}

static void tap(void *arg, const ddp_fault_event_t *ev, int node, int64_t vt)
{
    script_t *sc = arg;
    (void)node, (void)vt;
    if (ev->kind == DDP_TRIG_SET && ev->name && strstr(ev->name, "/MASTER_PORT") &&
        sc->nkeys < 32)
        snprintf(sc->keys[sc->nkeys++], sizeof sc->keys[0], "%s", ev->name);
}

typedef struct agent_arg {
    script_t *sc;
    int rc, restarts;
} agent_arg_t;

static int agent(ddp_sys_t *sys, void *arg)
{
    agent_arg_t *a = arg;
    ddp_elastic_worker_t w = {.fn = worker, .arg = a->sc};
    a->rc = ddp__elastic_agent(sys, &w, &a->restarts);
    return 0;
}

typedef struct run {
    int nodes;
    const char *env;      /* space-separated PET_* settings over the defaults */
    int64_t start[4];     /* each agent's start */
    const char *endpoint; /* NULL: node0:29400 */
    int v6;               /* every node also has fd00::(i+1)/64, its name's first answer */
} run_t;

/* Runs one agent per node to the end; out[i]: agent i's result. */
static ddp_sim_result_t run_agents(const run_t *r, script_t *sc, agent_arg_t *out)
{
    ddp_sim_opts_t o = {.seed = 1, .tap = tap, .tap_arg = sc,
                        .time_limit_ns = S(3600)};
    ddp_sim_t *sim = ddp_sim_new(&o);
    static const char *const addrs[] = {"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"};
    for (int i = 0; i < r->nodes; i++) {
        char name[16];
        snprintf(name, sizeof name, "node%d", i);
        ddp_sim_add_node(sim, name, addrs[i], 0);
        if (r->v6) {
            char cidr[32], v6[16];
            snprintf(cidr, sizeof cidr, "%s/8", addrs[i]);
            ddp_sim_add_iface(sim, i, "eth0", cidr);
            snprintf(v6, sizeof v6, "fd00::%d", i + 1);
            snprintf(cidr, sizeof cidr, "%s/64", v6);
            ddp_sim_add_iface(sim, i, "eth0", cidr);
            ddp_sim_add_hostent(sim, -1, name, v6);
            ddp_sim_add_hostent(sim, -1, name, addrs[i]);
        }
    }
    for (int i = 0; i < r->nodes; i++) {
        ddp_env_t *env = ddp_env_new();
        ddp_env_setf(env, "PET_NNODES", "%d", r->nodes);
        ddp_env_set(env, "PET_NPROC_PER_NODE", "2");
        ddp_env_set(env, "PET_RDZV_ENDPOINT", r->endpoint ? r->endpoint : "node0:29400");
        ddp_env_set(env, "PET_RDZV_ID", "t");
        ddp_env_set(env, "PET_MONITOR_INTERVAL", "1");
        ddp_env_setf(env, "DDPSIM_AGENT", "%d", i);
        char edits[256];
        snprintf(edits, sizeof edits, "%s", r->env ? r->env : "");
        for (char *save = NULL, *t = strtok_r(edits, " ", &save); t;
             t = strtok_r(NULL, " ", &save)) {
            char *eq = strchr(t, '=');
            *eq = '\0';
            ddp_env_set(env, t, eq + 1);
        }
        out[i] = (agent_arg_t){.sc = sc, .rc = -1};
        char name[16];
        snprintf(name, sizeof name, "agent%d", i);
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = i, .name = name, .rank = -1,
                                                     .env = env, .start_ns = r->start[i],
                                                     .agent = 1},
                         agent, &out[i]);
        ddp_env_free(env);
    }
    ddp_sim_result_t res = ddp_sim_run(sim);
    ddp_sim_free(sim);
    return res;
}

/* The starts recorded of the group's start `attempt` (0 first), with
 * restart count `restart` and world `world` (-1: any). */
static int count_starts(const script_t *sc, int attempt, int restart, int world)
{
    int n = 0;
    for (int i = 0; i < sc->n; i++)
        n += (attempt < 0 || sc->s[i].attempt == attempt) &&
             (restart < 0 || sc->s[i].restart == restart) &&
             (world < 0 || sc->s[i].world == world);
    return n;
}

static void dump(const char *what, const script_t *sc, const agent_arg_t *a, int nodes)
{
    printf("\n  %s: %d start(s):\n", what, sc->n);
    for (int i = 0; i < sc->n; i++)
        printf("    node %d rank %d world %d group %d attempt %d restart %d port %d at %.3f s\n",
               sc->s[i].node, sc->s[i].rank, sc->s[i].world, sc->s[i].group_rank,
               sc->s[i].attempt, sc->s[i].restart, sc->s[i].port, (double)sc->s[i].vt / 1e9);
    for (int i = 0; i < nodes; i++)
        printf("    agent %d: rc %d (%s), restarts %d\n", i, a[i].rc, ddp_err_name(a[i].rc),
               a[i].restarts);
}

/* Two nodes, node 0 two seconds late: node 0 is still group rank 0 (the
 * ranks follow the sorted agent ids, not who came first); every worker has
 * the world of 4, its rank from its group rank, one MASTER_PORT. */
static void test_clean_ranks_by_id(void)
{
    script_t *sc = calloc(1, sizeof *sc);
    sc->fail_rank = -1, sc->run_ns = S(3);
    agent_arg_t a[2];
    run_t r = {.nodes = 2, .start = {S(2), 0}};
    CU_ASSERT_EQUAL(run_agents(&r, sc, a), DDP_SIM_DONE);
    int ok = sc->n == 4 && a[0].rc == 0 && a[1].rc == 0 && a[0].restarts == 0;
    int seen = 0;
    for (int i = 0; ok && i < sc->n; i++) {
        const start_t *s = &sc->s[i];
        ok = s->world == 4 && s->group_rank == s->node && s->rank / 2 == s->node &&
             s->restart == 0 && s->port == sc->s[0].port && s->port > 0;
        seen |= 1 << s->rank;
    }
    ok = ok && seen == 0xf;
    if (!ok)
        dump("clean run, node 0 late", sc, a, 2);
    CU_ASSERT_TRUE(ok);
    free(sc);
}

/* A worker (rank 1, node 0) failing twice: with 2 restarts allowed the
 * third start runs (TORCHELASTIC_RESTART_COUNT 2 on node 0's workers; node
 * 1's agent restarted for the new round, which cost it none; each round's
 * workers at one MASTER_PORT, published under that round's keys); with 1
 * node 0's agent gives up after its one restart. */
static void test_max_restarts_exact(void)
{
    script_t *sc = calloc(1, sizeof *sc);
    sc->fail_rank = 1, sc->fail_times = 2, sc->run_ns = S(3);
    agent_arg_t a[2];
    run_t r = {.nodes = 2, .env = "PET_MAX_RESTARTS=2"};
    CU_ASSERT_EQUAL(run_agents(&r, sc, a), DDP_SIM_DONE);
    int ok = a[0].rc == 0 && a[1].rc == 0 && a[0].restarts == 2 && a[1].restarts == 0 &&
             count_starts(sc, 2, -1, 4) == 4 && count_starts(sc, 2, 2, 4) == 2 &&
             count_starts(sc, -1, -1, -1) == 12;
    for (int round = 0; ok && round <= 2; round++) {
        int port = -1;
        for (int i = 0; i < sc->n; i++)
            if (sc->s[i].attempt == round)
                ok &= port < 0 || sc->s[i].port == port, port = sc->s[i].port;
        char key[96];
        snprintf(key, sizeof key, "torch.rendezvous.t.%d/MASTER_PORT", round);
        int found = 0;
        for (int k = 0; k < sc->nkeys; k++)
            found |= !strcmp(sc->keys[k] + (sc->keys[k][0] == '/'), key); /* TCPStore's "/" */
        if (!found)
            printf("\n  no key %s set\n", key);
        ok &= found;
    }
    if (!ok)
        dump("2 failures, 2 restarts allowed", sc, a, 2);
    CU_ASSERT_TRUE(ok);

    memset(sc, 0, sizeof *sc);
    sc->fail_rank = 1, sc->fail_times = 2, sc->run_ns = S(3);
    r.env = "PET_MAX_RESTARTS=1";
    CU_ASSERT_EQUAL(run_agents(&r, sc, a), DDP_SIM_DONE);
    ok = a[0].rc == DDP_EPEER_LOST && a[0].restarts == 1 && count_starts(sc, 2, -1, -1) == 0 &&
         count_starts(sc, 1, 1, 4) == 2 && count_starts(sc, 1, -1, 4) == 4;
    if (!ok)
        dump("2 failures, 1 restart allowed", sc, a, 2);
    CU_ASSERT_TRUE(ok);
    free(sc);
}

/* --nnodes=1:2 with node 1 40 s late: node 0 starts alone at the last
 * call (30 s; 10 s with last_call_timeout=10), a world of 2; node 1
 * waiting makes node 0's agent restart the group, which costs no restart
 * (none is allowed here) and gives the group of 4 restart count 0. */
static void test_join_is_free(void)
{
    static const struct {
        const char *env;
        int64_t first; /* node 0's lone start, virtual */
    } cases[] = {{"PET_NNODES=1:2 PET_MAX_RESTARTS=0", S(30)},
                 {"PET_NNODES=1:2 PET_MAX_RESTARTS=0 PET_RDZV_CONF=last_call_timeout=10", S(10)}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        script_t *sc = calloc(1, sizeof *sc);
        sc->fail_rank = -1, sc->run_ns = S(60);
        agent_arg_t a[2];
        run_t r = {.nodes = 2, .env = cases[c].env, .start = {0, S(40)}};
        CU_ASSERT_EQUAL(run_agents(&r, sc, a), DDP_SIM_DONE);
        int lone = 0, ok = a[0].rc == 0 && a[1].rc == 0 && a[0].restarts == 0 &&
                           a[1].restarts == 0 && count_starts(sc, -1, 0, 4) == 4 &&
                           count_starts(sc, -1, -1, -1) == 6;
        for (int i = 0; i < sc->n; i++)
            if (sc->s[i].world == 2) {
                lone++;
                ok &= sc->s[i].node == 0 && sc->s[i].vt >= cases[c].first &&
                      sc->s[i].vt < cases[c].first + S(2);
            }
        ok &= lone == 2;
        if (!ok)
            dump(cases[c].env, sc, a, 2);
        CU_ASSERT_TRUE(ok);
        free(sc);
    }
}

/* --nnodes=1:2 with three nodes at once: the round completes at max
 * nodes without waiting for the last call, the group is 2 nodes, and the
 * third agent, never admitted, times out at its join timeout. --nnodes=2:3
 * with two nodes: they wait the last call (30 s from the second node's
 * arrival), then start as 2. */
static void test_min_max_nodes(void)
{
    script_t *sc = calloc(1, sizeof *sc);
    sc->fail_rank = -1, sc->run_ns = S(60);
    agent_arg_t a[3];
    run_t r = {.nodes = 3, .env = "PET_NNODES=1:2 PET_RDZV_CONF=join_timeout=20"};
    CU_ASSERT_EQUAL(run_agents(&r, sc, a), DDP_SIM_DONE);
    int timed_out = 0, fine = 0, ok = sc->n == 4 && count_starts(sc, 0, 0, 4) == 4;
    for (int i = 0; i < 3; i++) {
        timed_out += a[i].rc == DDP_ETIMEOUT;
        fine += a[i].rc == 0;
    }
    for (int i = 0; i < sc->n; i++)
        ok &= sc->s[i].vt < S(5);
    ok &= timed_out == 1 && fine == 2;
    if (!ok)
        dump("1:2 nodes, 3 come", sc, a, 3);
    CU_ASSERT_TRUE(ok);

    memset(sc, 0, sizeof *sc);
    sc->fail_rank = -1, sc->run_ns = S(3);
    r = (run_t){.nodes = 2, .env = "PET_NNODES=2:3"};
    CU_ASSERT_EQUAL(run_agents(&r, sc, a), DDP_SIM_DONE);
    ok = a[0].rc == 0 && a[1].rc == 0 && count_starts(sc, 0, 0, 4) == 4 && sc->n == 4;
    for (int i = 0; i < sc->n; i++)
        ok &= sc->s[i].vt >= S(30) && sc->s[i].vt < S(32);
    if (!ok)
        dump("2:3 nodes, 2 come", sc, a, 2);
    CU_ASSERT_TRUE(ok);

    /* the last call starts when the round reaches min nodes (node 1, 20 s
     * late), not when its first node joins */
    memset(sc, 0, sizeof *sc);
    sc->fail_rank = -1, sc->run_ns = S(3);
    r = (run_t){.nodes = 2, .env = "PET_NNODES=2:3", .start = {0, S(20)}};
    CU_ASSERT_EQUAL(run_agents(&r, sc, a), DDP_SIM_DONE);
    ok = a[0].rc == 0 && a[1].rc == 0 && count_starts(sc, 0, 0, 4) == 4 && sc->n == 4;
    for (int i = 0; i < sc->n; i++)
        ok &= sc->s[i].vt >= S(50) && sc->s[i].vt < S(52);
    if (!ok)
        dump("2:3 nodes, node 1 20 s late", sc, a, 2);
    CU_ASSERT_TRUE(ok);
    free(sc);
}

/* The endpoint names node 0 (or node 1) by its name or address (IPv4, or
 * IPv6: an address its host name resolves to, compared over all 16 bytes):
 * that node's agent serves the store and the run completes. An endpoint that only libc reads as node
 * 0's address (10.0.0.01, octal) is no address to torch's ip_address:
 * nobody serves, every agent times out. */
static void test_endpoint_host(void)
{
    static const struct {
        const char *endpoint;
        int served, v6;
    } cases[] = {{"10.0.0.1:29400", 1, 0},
                 {"10.0.0.01:29400", 0, 0},
                 {"[fd00::1]:29400", 1, 1},
                 {"[fd00:0:0:0::1]:29400", 1, 1},
                 {"node1:29400", 1, 0},     /* another node's name: node 1 serves */
                 {"10.0.0.2:29400", 1, 0},  /* its address */
                 {"[fd00::2]:29400", 1, 1},
                 {"10.0.0.1:29400", 1, 1}, /* the name's second answer */
                 {"[fd00::1]", 1, 1},       /* no port: torch's 29400 */
                 {"node0", 1, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        script_t *sc = calloc(1, sizeof *sc);
        sc->fail_rank = -1, sc->run_ns = S(1);
        agent_arg_t a[2];
        run_t r = {.nodes = 2, .endpoint = cases[c].endpoint, .v6 = cases[c].v6,
                   .env = "PET_RDZV_CONF=join_timeout=20"};
        CU_ASSERT_EQUAL(run_agents(&r, sc, a), DDP_SIM_DONE);
        int ok = cases[c].served ? a[0].rc == 0 && a[1].rc == 0 && sc->n == 4
                                 : a[0].rc != 0 && a[1].rc != 0 && sc->n == 0;
        if (!ok)
            dump(cases[c].endpoint, sc, a, 2);
        CU_ASSERT_TRUE(ok);
        free(sc);
    }
}

DDP_SUITE("newest_elastic", NULL, NULL,
          {"group ranks follow the sorted agent ids, one world and port", test_clean_ranks_by_id},
          {"max_restarts counts failures exactly; per-round master keys", test_max_restarts_exact},
          {"a node joining restarts the group without costing a restart", test_join_is_free},
          {"min/max nodes and the last call decide the round", test_min_max_nodes},
          {"the endpoint's host serves the store", test_endpoint_host})
