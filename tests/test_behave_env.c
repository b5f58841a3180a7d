/* tests/test_behave_env.c — what every process an accelerator starts
 * receives, pinned process by process (issue 16, "Environments").
 *
 * For each accelerator on several cluster shapes (1 and 2+ nodes, devices
 * 1/2/4; launched once per node, by srun, torchrun, mpirun, jsrun, by hand
 * with Lightning's own variables, or as Kubeflow pods), the test writes down
 * the processes Lightning's rules say exist (shared/reference/
 * lightning-connection-setup.md): which node each runs on, whether it trains
 * or only launches, its global/local/node rank and world size, the exact
 * environment it receives, and the master address and port it must end up
 * with. The expectations are derived here from those rules, never from the
 * code's output. The run is a launch plan in the simulator whose Trainer
 * uses a recording plugin ("behave-recorder"): its init_ddp_connection notes
 * the rank's context and a copy of the environment it was started with,
 * then hands over to the default. Processes that only launch are read from
 * the simulator's outcome and their environment at exit.
 *
 * Every mismatch is printed as one line: case, process, field, expected,
 * actual.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/accel.h"
#include "ddp/cluster.h"
#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/plan.h"
#include "ddp/plugin.h"
#include "ddp/sim.h"
#include "behave.h"
#include "test.h"

/* The simulated jobs' identities (harness/plan.c gives every srun / jsrun
 * job the id 4242 and the name "train"; the rank file path is the plan's). */
#define JOB_ID "4242"
#define LSF_RANKFILE "/sim/lsf/rankfile"
/* Marks a value the code picks at run time (a free port): any port number,
 * the same in every process that received it from one launcher. */
#define FREE_PORT "<free port>"
#define MAXP 48

/* ------------------------------------------------------------ the cases */

typedef enum {
    S_SCRIPT,   /* the user runs the script once per node (NODE_RANK) */
    S_EXTERNAL, /* the launcher starts every rank (srun, torchrun, ...) */
    S_MANUAL,   /* every rank started by hand: Lightning's own variables */
    S_KUBEFLOW, /* one pod per rank, PyTorchJob's variables */
} shape_t;

typedef struct envcase {
    const char *name;
    const char *accel;   /* what the Trainer asks for */
    const char *chosen;  /* what Lightning's selection makes of it */
    shape_t shape;
    ddp_launcher_t launcher; /* S_EXTERNAL: which launcher */
    int nodes, devices;
    int tasks_per_node;  /* S_EXTERNAL: tasks per node (0: devices) */
    const char *master_addr; /* exported MASTER_ADDR ("" none) */
    const char *port;        /* exported MASTER_PORT (NULL none) */
    int group_rank;          /* S_MANUAL: 1 GROUP_RANK instead of NODE_RANK,
                                2 both, GROUP_RANK counting the nodes down */
    const char *hosts[4];    /* node host names (NULL: node0, node1, ...) */
    const char *nodelist;    /* S_EXTERNAL slurm: SLURM_NODELIST */
    /* Where every rank must end up connecting (the cluster environment's
     * main address and port). */
    const char *want_addr, *want_port;
} envcase_t;

static const char *host_of(const envcase_t *c, int n, char *buf, size_t len)
{
    if (n < 4 && c->hosts[n])
        return c->hosts[n];
    snprintf(buf, len, "node%d", n);
    return buf;
}

/* ------------------------------------------------ expected processes */

typedef enum { P_TRAINS, P_LAUNCHES } role_t;

typedef struct xproc {
    int node;
    int plan_index;   /* index among the plan's processes, -1: a child */
    int child_index;  /* among its parent's children (spawn order) */
    role_t role;
    int grank, lrank, nrank, world;
    ddp_env_t *env;   /* exactly what it receives */
    int nchildren;
} xproc_t;

typedef struct expect {
    xproc_t p[MAXP];
    int n;
} expect_t;

static void expect_free(expect_t *x)
{
    for (int i = 0; i < x->n; i++)
        ddp_env_free(x->p[i].env);
    x->n = 0;
}

static void setf(ddp_env_t *e, const char *k, int v) { ddp_env_setf(e, k, "%d", v); }

/* What the user exports plus what the launcher puts into task k of node n
 * (srun, torchrun, mpirun and jsrun's documented variables). */
static ddp_env_t *launched_env(const envcase_t *c, int n, int k)
{
    ddp_env_t *e = ddp_env_new();
    if (c->master_addr[0])
        ddp_env_set(e, "MASTER_ADDR", c->master_addr);
    if (c->port)
        ddp_env_set(e, "MASTER_PORT", c->port);
    int tpn = c->tasks_per_node ? c->tasks_per_node : c->devices;
    int rank = n * tpn + k, world = c->nodes * tpn;
    switch (c->shape) {
    case S_SCRIPT:
        setf(e, "NODE_RANK", n);
        break;
    case S_MANUAL:
        setf(e, c->group_rank == 1 ? "GROUP_RANK" : "NODE_RANK", n);
        if (c->group_rank == 2) /* a stale one: NODE_RANK wins (2.x) */
            setf(e, "GROUP_RANK", c->nodes - 1 - n);
        setf(e, "LOCAL_RANK", k);
        setf(e, "WORLD_SIZE", world);
        break;
    case S_KUBEFLOW:
        setf(e, "RANK", n);
        setf(e, "WORLD_SIZE", c->nodes);
        break;
    case S_EXTERNAL:
        switch (c->launcher) {
        case DDP_LAUNCH_SLURM:
            setf(e, "SLURM_NTASKS", world);
            setf(e, "SLURM_NTASKS_PER_NODE", tpn);
            setf(e, "SLURM_NNODES", c->nodes);
            setf(e, "SLURM_PROCID", rank);
            setf(e, "SLURM_LOCALID", k);
            setf(e, "SLURM_NODEID", n);
            ddp_env_set(e, "SLURM_NODELIST", c->nodelist);
            ddp_env_set(e, "SLURM_JOB_ID", JOB_ID);
            ddp_env_set(e, "SLURM_JOB_NAME", "train");
            break;
        case DDP_LAUNCH_TORCHRUN:
            setf(e, "RANK", rank);
            setf(e, "LOCAL_RANK", k);
            setf(e, "GROUP_RANK", n);
            setf(e, "LOCAL_WORLD_SIZE", tpn);
            setf(e, "WORLD_SIZE", world);
            break;
        case DDP_LAUNCH_MPI:
            setf(e, "OMPI_COMM_WORLD_SIZE", world);
            setf(e, "OMPI_COMM_WORLD_RANK", rank);
            setf(e, "OMPI_COMM_WORLD_LOCAL_RANK", k);
            setf(e, "OMPI_COMM_WORLD_LOCAL_SIZE", tpn);
            setf(e, "OMPI_COMM_WORLD_NODE_RANK", k);
            ddp_env_set(e, "PMIX_NAMESPACE", "prterun-sim-4242@1");
            break;
        case DDP_LAUNCH_LSF:
            ddp_env_set(e, "LSB_JOBID", JOB_ID);
            ddp_env_set(e, "LSB_DJOB_RANKFILE", LSF_RANKFILE);
            setf(e, "JSM_NAMESPACE_SIZE", world);
            setf(e, "JSM_NAMESPACE_RANK", rank);
            setf(e, "JSM_NAMESPACE_LOCAL_RANK", k);
            setf(e, "JSM_NAMESPACE_LOCAL_SIZE", tpn);
            break;
        default:
            break;
        }
        break;
    }
    return e;
}

static xproc_t *add(expect_t *x, int node, int plan_index, role_t role)
{
    xproc_t *p = &x->p[x->n++];
    memset(p, 0, sizeof *p);
    p->node = node;
    p->plan_index = plan_index;
    p->child_index = -1;
    p->role = role;
    p->grank = p->lrank = p->nrank = p->world = -1;
    return p;
}

static void ranks(xproc_t *p, int g, int l, int nr, int w)
{
    p->grank = g, p->lrank = l, p->nrank = nr, p->world = w;
}

/* Lightning's rules for the processes of case c (the reference's table):
 *  ddp        local rank 0 trains and relaunches the script for local ranks
 *             1..N-1 with MASTER_ADDR, MASTER_PORT, NODE_RANK, LOCAL_RANK
 *             and WORLD_SIZE; the master it resolved (MASTER_ADDR or
 *             127.0.0.1, MASTER_PORT or a free port) also goes into its own
 *             environment before it launches;
 *  ddp_spawn  the parent resolves MASTER_PORT, spawns N workers (index i
 *  ddp_cpu    = local rank i) and trains nothing itself;
 *  ddp2       one process per node: local = global = node rank, world =
 *             num_nodes;
 *  *_hpc      the launcher started every rank: ranks from its variables.
 * Otherwise global = node * N + local, world = nodes * N. */
static void expect_case(const envcase_t *c, expect_t *x)
{
    x->n = 0;
    int d = c->devices, nodes = c->nodes;
    const char *ch = c->chosen;
    int spawner = !strcmp(ch, "ddp_spawn") || !strcmp(ch, "ddp_cpu");
    int tpn = c->tasks_per_node ? c->tasks_per_node : d;
    int plan = 0;
    for (int n = 0; n < nodes; n++) {
        if (c->shape == S_SCRIPT) {
            ddp_env_t *base = launched_env(c, n, 0);
            xproc_t *s = add(x, n, plan++, spawner ? P_LAUNCHES : P_TRAINS);
            if (!strcmp(ch, "ddp2")) {
                ranks(s, n, n, n, nodes);
                s->env = base;
                continue;
            }
            /* The launching process resolves the master first and keeps
             * it in its own environment (ddp with N > 1, the spawners). */
            int launches = spawner || d > 1;
            if (launches) {
                if (!ddp_env_has(base, "MASTER_ADDR"))
                    ddp_env_set(base, "MASTER_ADDR", "127.0.0.1");
                if (!ddp_env_has(base, "MASTER_PORT"))
                    ddp_env_set(base, "MASTER_PORT", FREE_PORT);
            }
            s->env = base;
            if (!spawner)
                ranks(s, n * d, 0, n, nodes * d);
            int first = spawner ? 0 : 1;
            for (int i = first; i < d; i++) {
                xproc_t *k = add(x, n, -1, P_TRAINS);
                k->child_index = i - first;
                k->env = ddp_env_clone(base);
                setf(k->env, "NODE_RANK", n);
                setf(k->env, "WORLD_SIZE", nodes * d);
                setf(k->env, spawner ? "DDP_SPAWN_INDEX" : "LOCAL_RANK", i);
                ranks(k, n * d + i, i, n, nodes * d);
                s->nchildren++;
            }
            continue;
        }
        int per_node = c->shape == S_EXTERNAL ? tpn : c->shape == S_MANUAL ? d : 1;
        for (int k = 0; k < per_node; k++) {
            xproc_t *p = add(x, n, plan++, P_TRAINS);
            p->env = launched_env(c, n, k);
            if (c->shape == S_KUBEFLOW)
                ranks(p, n, 0, n, nodes); /* a pod is a node */
            else if (!strcmp(ch, "ddp2"))
                ranks(p, n, n, n, nodes);
            else
                ranks(p, n * per_node + k, k, n, nodes * per_node);
        }
    }
}

/* ------------------------------------------------------------ the run */

/* The plan of case c: its nodes, and its processes as its launcher (or the
 * user) starts them. */
static ddp_plan_t *plan_case(const envcase_t *c)
{
    ddp_plan_t *p = ddp_plan_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    char hb[16], addr[24];
    for (int n = 0; n < c->nodes; n++) {
        snprintf(addr, sizeof addr, "10.0.%d.1", n);
        CU_ASSERT_FATAL(ddp_plan_add_node(p, host_of(c, n, hb, sizeof hb), addr) >= 0);
    }
    ddp_plan_entry_t *e = &p->entry;
    snprintf(e->accelerator, sizeof e->accelerator, "%s", c->accel);
    snprintf(e->plugin, sizeof e->plugin, "%s", DDP_BEHAVE_RECORDER);
    e->num_nodes = c->nodes;
    e->num_processes = c->devices;
    e->timeout_ns = 60 * DDP_NS_PER_S;
    e->seed = 11;
    p->seed = 11;
    if (c->shape == S_KUBEFLOW)
        snprintf(e->cluster, sizeof e->cluster, "kubeflow");
    if (c->shape == S_SCRIPT || c->shape == S_EXTERNAL) {
        ddp_launch_t l = {.procs = c->devices,
                          .launcher = c->shape == S_SCRIPT ? DDP_LAUNCH_PER_NODE
                                                           : c->launcher,
                          .tasks_per_node = c->tasks_per_node,
                          .master_addr = c->master_addr,
                          .no_port = c->port == NULL};
        if (c->port)
            l.port = (uint16_t)atoi(c->port);
        int rc = ddp_plan_launch(p, &l);
        if (rc)
            printf("\n  %s: %s\n", c->name, ddp_err_message());
        CU_ASSERT_EQUAL_FATAL(rc, 0);
        return p;
    }
    /* By hand / pods: one plan process per rank, with the case's env. */
    int per_node = c->shape == S_MANUAL ? c->devices : 1;
    for (int n = 0; n < c->nodes; n++)
        for (int k = 0; k < per_node; k++) {
            ddp_env_t *env = launched_env(c, n, k);
            char name[16];
            snprintf(name, sizeof name, "rank%d", n * per_node + k);
            CU_ASSERT_FATAL(ddp_plan_add_proc(p, name, n, n * per_node + k,
                                              DDP_NS_PER_MS, DDP_PLAN_TRAINER,
                                              env) >= 0);
            ddp_env_free(env);
        }
    return p;
}

/* ------------------------------------------------------ the comparison */

typedef struct cmp {
    const envcase_t *c;
    char who[64];
    int bad;
    /* FREE_PORT as first seen on each node */
    char free_port[8][8];
} cmp_t;

static void mismatch(cmp_t *m, const char *field, const char *want, const char *got)
{
    if (m->bad++ == 0)
        printf("\n");
    printf("  %s: %s: %s: expected %s, got %s\n", m->c->name, m->who, field,
           want ? want : "(unset)", got ? got : "(unset)");
}

static void cmp_int(cmp_t *m, const char *field, int want, int got)
{
    if (want == got)
        return;
    char w[16], g[16];
    snprintf(w, sizeof w, "%d", want);
    snprintf(g, sizeof g, "%d", got);
    mismatch(m, field, w, g);
}

static void cmp_str(cmp_t *m, const char *field, const char *want, const char *got,
                    int node)
{
    if (want && !strcmp(want, FREE_PORT) && got) {
        long v = 0;
        if (ddp_env_parse_long(got, &v) || v < 1024 || v > 65535) {
            mismatch(m, field, "a free port (1024..65535)", got);
            return;
        }
        /* Every process given this node's free port got the same one. */
        if (!m->free_port[node][0])
            snprintf(m->free_port[node], sizeof m->free_port[node], "%s", got);
        want = m->free_port[node];
    }
    if ((want == NULL) != (got == NULL) || (want && strcmp(want, got)))
        mismatch(m, field, want, got);
}

typedef struct envdiff {
    cmp_t *m;
    const ddp_env_t *other;
    int node;
    int expected_side;
} envdiff_t;

static int diff_one(void *arg, const char *key, const char *value)
{
    envdiff_t *d = arg;
    char field[80];
    snprintf(field, sizeof field, "env %s", key);
    const char *o = ddp_env_get(d->other, key);
    if (d->expected_side)
        cmp_str(d->m, field, value, o, d->node);
    else if (!o)
        mismatch(d->m, field, NULL, value); /* a variable nobody gives it */
    return 0;
}

/* The received environment is exactly the expected one: every expected
 * variable with its value, and nothing else. */
static void cmp_env(cmp_t *m, const ddp_env_t *want, const ddp_env_t *got, int node)
{
    if (!got) {
        mismatch(m, "environment", "recorded", "not recorded");
        return;
    }
    envdiff_t a = {.m = m, .other = got, .node = node, .expected_side = 1};
    ddp_env_foreach(want, diff_one, &a);
    envdiff_t b = {.m = m, .other = want, .node = node, .expected_side = 0};
    ddp_env_foreach(got, diff_one, &b);
}

/* The environment after init_ddp_connection: what it was started with, plus
 * the master it connected to and the world size (step 1 of Lightning's
 * init_ddp_connection), nothing else. */
static void cmp_env_after(cmp_t *m, const xproc_t *x, const ddp_env_t *got)
{
    ddp_env_t *want = ddp_env_clone(x->env);
    const char *port = m->c->want_port;
    if (!strcmp(port, FREE_PORT) && m->free_port[0][0])
        port = m->free_port[0]; /* every rank uses rank 0's node's port */
    ddp_env_set(want, "MASTER_ADDR", m->c->want_addr);
    ddp_env_set(want, "MASTER_PORT", port);
    setf(want, "WORLD_SIZE", x->world);
    char who[64];
    snprintf(who, sizeof who, "%s", m->who);
    snprintf(m->who, sizeof m->who, "%s after init", who);
    cmp_env(m, want, got, x->node);
    snprintf(m->who, sizeof m->who, "%s", who);
    ddp_env_free(want);
}

/* Actual processes of the run: the plan's (task first + index), then the
 * children in the order they were spawned, per node. */
static int actual_task(const ddp_sim_t *sim, int first, int nplan, const xproc_t *x)
{
    if (x->plan_index >= 0)
        return first + x->plan_index;
    int seen = 0;
    for (int t = first + nplan; t < ddp_sim_task_count(sim); t++) {
        const ddp_sim_outcome_t *o = ddp_sim_outcome(sim, t);
        if (o->thread || o->node != x->node)
            continue;
        if (seen++ == x->child_index)
            return t;
    }
    return -1;
}

static void run_case(const envcase_t *c)
{
    expect_t x;
    expect_case(c, &x);
    ddp_plan_t *p = plan_case(c);
    ddp_behave_rec_reset();
    ddp_sim_t *sim = NULL;
    int first = 0;
    CU_ASSERT_EQUAL_FATAL(ddp_plan_simulate(p, NULL, &sim, &first), 0);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    cmp_t m = {.c = c};
    /* As many processes as Lightning starts: no more, no fewer. */
    int procs = 0;
    for (int t = first; t < ddp_sim_task_count(sim); t++)
        procs += !ddp_sim_outcome(sim, t)->thread;
    snprintf(m.who, sizeof m.who, "the run");
    cmp_int(&m, "processes", x.n, procs);
    for (int i = 0; i < x.n; i++) {
        const xproc_t *xp = &x.p[i];
        int t = actual_task(sim, first, p->nprocs, xp);
        if (xp->plan_index >= 0)
            snprintf(m.who, sizeof m.who, "process %s (node %d)",
                     p->procs[xp->plan_index].name, xp->node);
        else
            snprintf(m.who, sizeof m.who, "child %d of node %d", xp->child_index,
                     xp->node);
        if (t < 0) {
            mismatch(&m, "process", "started", "missing");
            continue;
        }
        const ddp_sim_outcome_t *o = ddp_sim_outcome(sim, t);
        const ddp_behave_rec_t *r = ddp_behave_rec(t);
        cmp_int(&m, "node", xp->node, o->node);
        if (o->rc != 0 || o->state != DDP_SIM_TASK_EXITED)
            mismatch(&m, "outcome", "ok", o->message[0] ? o->message : "failed");
        if (xp->role == P_LAUNCHES) {
            /* A pure launcher never enters the plugin. */
            cmp_int(&m, "init_ddp_connection calls", 0, r ? r->init_calls : 0);
            cmp_env(&m, xp->env, ddp_sim_task_env(sim, t), xp->node);
        } else {
            cmp_int(&m, "init_ddp_connection calls", 1, r ? r->init_calls : 0);
            if (!r)
                continue;
            cmp_str(&m, "accelerator", c->chosen, r->accel, 0);
            cmp_int(&m, "global rank", xp->grank, r->global_rank);
            cmp_int(&m, "local rank", xp->lrank, r->local_rank);
            cmp_int(&m, "node rank", xp->nrank, r->node_rank);
            cmp_int(&m, "world size", xp->world, r->world_size);
            cmp_int(&m, "outcome rank", xp->grank, o->rank);
            cmp_int(&m, "outcome world", xp->world, o->world);
            cmp_str(&m, "backend", "tcp", r->backend, 0);
            cmp_env(&m, xp->env, r->env_init, xp->node);
        }
        if (xp->plan_index >= 0 && xp->role == P_TRAINS && r)
            cmp_int(&m, "processes launched before init", xp->nchildren, r->children);
    }
    /* Each node's launcher started exactly its children. */
    for (int n = 0; n < c->nodes; n++) {
        int want = 0, got = 0;
        for (int i = 0; i < x.n; i++)
            want += x.p[i].plan_index < 0 && x.p[i].node == n;
        for (int t = first + p->nprocs; t < ddp_sim_task_count(sim); t++)
            got += !ddp_sim_outcome(sim, t)->thread && ddp_sim_outcome(sim, t)->node == n;
        snprintf(m.who, sizeof m.who, "node %d", n);
        cmp_int(&m, "children launched", want, got);
    }
    /* After init (once every free port is bound): the master written. */
    for (int i = 0; i < x.n; i++) {
        const xproc_t *xp = &x.p[i];
        int t = actual_task(sim, first, p->nprocs, xp);
        const ddp_behave_rec_t *r = t >= 0 ? ddp_behave_rec(t) : NULL;
        if (xp->role != P_TRAINS || !r)
            continue;
        snprintf(m.who, sizeof m.who, "rank %d", xp->grank);
        if (strcmp(c->want_port, FREE_PORT) || m.free_port[0][0])
            cmp_env_after(&m, xp, r->env_after);
    }
    CU_ASSERT_EQUAL(m.bad, 0);
    ddp_sim_free(sim);
    ddp_plan_free(p);
    ddp_behave_rec_reset();
    expect_free(&x);
}

/* ------------------------------------------------------------ the table */

#define PER_NODE(...) .shape = S_SCRIPT, __VA_ARGS__
static const envcase_t g_cases[] = {
    /* Lightning's own launch: the script once per node, NODE_RANK set. */
    {"ddp 1x1, master exported", "ddp", "ddp", PER_NODE(.nodes = 1, .devices = 1),
     .master_addr = "node0", .port = "29500", .want_addr = "node0", .want_port = "29500"},
    {"ddp 1x4, nothing exported", "ddp", "ddp", PER_NODE(.nodes = 1, .devices = 4),
     .master_addr = "", .want_addr = "127.0.0.1", .want_port = FREE_PORT},
    {"ddp 2x2, node0:29500", "ddp", "ddp", PER_NODE(.nodes = 2, .devices = 2),
     .master_addr = "node0", .port = "29500", .want_addr = "node0", .want_port = "29500"},
    {"ddp 2x4, custom port 31000", "ddp", "ddp", PER_NODE(.nodes = 2, .devices = 4),
     .master_addr = "node0", .port = "31000", .want_addr = "node0", .want_port = "31000"},
    {"ddp_spawn 1x2, nothing exported", "ddp_spawn", "ddp_spawn",
     PER_NODE(.nodes = 1, .devices = 2), .master_addr = "", .want_addr = "127.0.0.1",
     .want_port = FREE_PORT},
    {"ddp_spawn 2x2", "ddp_spawn", "ddp_spawn", PER_NODE(.nodes = 2, .devices = 2),
     .master_addr = "node0", .port = "29500", .want_addr = "node0", .want_port = "29500"},
    {"ddp_cpu 1x4, port exported", "ddp_cpu", "ddp_cpu", PER_NODE(.nodes = 1, .devices = 4),
     .master_addr = "", .port = "29511", .want_addr = "127.0.0.1", .want_port = "29511"},
    {"ddp_cpu 3x1", "ddp_cpu", "ddp_cpu", PER_NODE(.nodes = 3, .devices = 1),
     .master_addr = "node0", .port = "29500", .want_addr = "node0", .want_port = "29500"},
    {"ddp2 2 nodes, 4 devices each", "ddp2", "ddp2", PER_NODE(.nodes = 2, .devices = 4),
     .master_addr = "node0", .port = "29500", .want_addr = "node0", .want_port = "29500"},
    {"ddp2 1 node, 2 devices", "ddp2", "ddp2", PER_NODE(.nodes = 1, .devices = 2),
     .master_addr = "node0", .port = "29500", .want_addr = "node0", .want_port = "29500"},
    /* srun: the SLURM environment derives the master (first host of
     * SLURM_NODELIST, port 15000 + last four digits of SLURM_JOB_ID). */
    {"ddp_hpc srun 2x2, nothing exported", "ddp_hpc", "ddp_hpc", .shape = S_EXTERNAL,
     .launcher = DDP_LAUNCH_SLURM, .nodes = 2, .devices = 2, .master_addr = "",
     .nodelist = "node[0-1]", .want_addr = "node0", .want_port = "19242"},
    {"ddp_hpc srun 1x4 on gpu017", "ddp_hpc", "ddp_hpc", .shape = S_EXTERNAL,
     .launcher = DDP_LAUNCH_SLURM, .nodes = 1, .devices = 4, .master_addr = "",
     .hosts = {"gpu017"}, .nodelist = "gpu017", .want_addr = "gpu017",
     .want_port = "19242"},
    {"ddp srun 2x2 on gpu[001-002]: SLURM manages the tasks", "ddp", "ddp_hpc",
     .shape = S_EXTERNAL, .launcher = DDP_LAUNCH_SLURM, .nodes = 2, .devices = 2,
     .master_addr = "", .hosts = {"gpu001", "gpu002"}, .nodelist = "gpu[001-002]",
     .want_addr = "gpu001", .want_port = "19242"},
    {"ddp_cpu srun 2x1, MASTER_* exported win", "ddp_cpu", "ddp_cpu_hpc",
     .shape = S_EXTERNAL, .launcher = DDP_LAUNCH_SLURM, .nodes = 2, .devices = 1,
     .master_addr = "10.0.0.1", .port = "23456", .nodelist = "node[0-1]",
     .want_addr = "10.0.0.1", .want_port = "23456"},
    {"ddp2 srun 2 nodes x 1 task, 4 devices", "ddp2", "ddp2", .shape = S_EXTERNAL,
     .launcher = DDP_LAUNCH_SLURM, .nodes = 2, .devices = 4, .tasks_per_node = 1,
     .master_addr = "", .nodelist = "node[0-1]", .want_addr = "node0",
     .want_port = "19242"},
    /* torchrun */
    {"ddp_cpu_hpc torchrun 2x2", "ddp_cpu_hpc", "ddp_cpu_hpc", .shape = S_EXTERNAL,
     .launcher = DDP_LAUNCH_TORCHRUN, .nodes = 2, .devices = 2, .master_addr = "node0",
     .port = "29400", .want_addr = "node0", .want_port = "29400"},
    {"ddp torchrun 1x2, nothing exported", "ddp", "ddp_hpc", .shape = S_EXTERNAL,
     .launcher = DDP_LAUNCH_TORCHRUN, .nodes = 1, .devices = 2, .master_addr = "",
     .want_addr = "127.0.0.1", .want_port = "12910"},
    {"ddp_cpu torchrun 2x4", "ddp_cpu", "ddp_cpu_hpc", .shape = S_EXTERNAL,
     .launcher = DDP_LAUNCH_TORCHRUN, .nodes = 2, .devices = 4, .master_addr = "node0",
     .port = "29500", .want_addr = "node0", .want_port = "29500"},
    /* mpirun */
    {"ddp_hpc mpirun 2x2", "ddp_hpc", "ddp_hpc", .shape = S_EXTERNAL,
     .launcher = DDP_LAUNCH_MPI, .nodes = 2, .devices = 2, .master_addr = "node0",
     .port = "29500", .want_addr = "node0", .want_port = "29500"},
    {"ddp_cpu mpirun 1x4, no MASTER_ADDR", "ddp_cpu", "ddp_cpu_hpc", .shape = S_EXTERNAL,
     .launcher = DDP_LAUNCH_MPI, .nodes = 1, .devices = 4, .master_addr = "",
     .port = "29500", .want_addr = "127.0.0.1", .want_port = "29500"},
    /* jsrun: the first compute host of the rank file, port LSB_JOBID %
     * 1000 + 10000. */
    {"ddp_hpc jsrun 2x2 on batch[1-2]", "ddp_hpc", "ddp_hpc", .shape = S_EXTERNAL,
     .launcher = DDP_LAUNCH_LSF, .nodes = 2, .devices = 2, .master_addr = "",
     .hosts = {"batch1", "batch2"}, .want_addr = "batch1", .want_port = "10242"},
    {"ddp_cpu_hpc jsrun 1x2", "ddp_cpu_hpc", "ddp_cpu_hpc", .shape = S_EXTERNAL,
     .launcher = DDP_LAUNCH_LSF, .nodes = 1, .devices = 2, .master_addr = "",
     .hosts = {"batch7"}, .want_addr = "batch7", .want_port = "10242"},
    /* Every rank started by hand with Lightning's variables: LOCAL_RANK
     * set, so ddp launches nothing; NODE_RANK, or GROUP_RANK without it. */
    {"ddp by hand 2x2, NODE_RANK", "ddp", "ddp", .shape = S_MANUAL, .nodes = 2,
     .devices = 2, .master_addr = "node0", .port = "29500", .want_addr = "node0",
     .want_port = "29500"},
    {"ddp by hand 2x2, GROUP_RANK", "ddp", "ddp", .shape = S_MANUAL, .nodes = 2,
     .devices = 2, .master_addr = "node0", .port = "29501", .group_rank = 1,
     .want_addr = "node0", .want_port = "29501"},
    {"ddp by hand 2x1, NODE_RANK over GROUP_RANK", "ddp", "ddp", .shape = S_MANUAL,
     .nodes = 2, .devices = 1, .master_addr = "node0", .port = "29502", .group_rank = 2,
     .want_addr = "node0", .want_port = "29502"},
    /* Kubeflow PyTorchJob, chosen by name: one process per pod. */
    {"ddp_hpc kubeflow 3 pods", "ddp_hpc", "ddp_hpc", .shape = S_KUBEFLOW, .nodes = 3,
     .devices = 1, .master_addr = "node0", .port = "23456", .want_addr = "node0",
     .want_port = "23456"},
};
#define NCASES (sizeof g_cases / sizeof g_cases[0])

static void test_every_accelerator_covered(void)
{
    /* The table names every accelerator, each on 1 and 2+ nodes. */
    for (size_t a = 0; a < ddp_accel_count(); a++) {
        const char *name = ddp_accel_at(a)->name;
        int one = 0, more = 0;
        for (size_t i = 0; i < NCASES; i++)
            if (!strcmp(g_cases[i].chosen, name)) {
                one |= g_cases[i].nodes == 1;
                more |= g_cases[i].nodes > 1;
            }
        if (!one || !more)
            printf("\n  %s: no case on %s\n", name, one ? "2+ nodes" : "1 node");
        CU_ASSERT_TRUE(one && more);
    }
}

static void run_shape(shape_t s, ddp_launcher_t l)
{
    for (size_t i = 0; i < NCASES; i++)
        if (g_cases[i].shape == s && (s != S_EXTERNAL || g_cases[i].launcher == l))
            run_case(&g_cases[i]);
}

static void test_per_node(void) { run_shape(S_SCRIPT, 0); }
static void test_slurm(void) { run_shape(S_EXTERNAL, DDP_LAUNCH_SLURM); }
static void test_torchrun(void) { run_shape(S_EXTERNAL, DDP_LAUNCH_TORCHRUN); }
static void test_mpi(void) { run_shape(S_EXTERNAL, DDP_LAUNCH_MPI); }
static void test_lsf(void) { run_shape(S_EXTERNAL, DDP_LAUNCH_LSF); }
static void test_manual(void) { run_shape(S_MANUAL, 0); }
static void test_kubeflow(void) { run_shape(S_KUBEFLOW, 0); }

DDP_SUITE("behave_env", ddp_behave_suite_init, ddp_behave_suite_cleanup,
          {"the table covers every accelerator on 1 and 2+ nodes",
           test_every_accelerator_covered},
          {"script once per node: ddp, ddp_spawn, ddp_cpu, ddp2", test_per_node},
          {"srun: ddp_hpc, ddp, ddp_cpu, ddp2", test_slurm},
          {"torchrun: ddp_cpu_hpc, ddp, ddp_cpu", test_torchrun},
          {"mpirun: ddp_hpc, ddp_cpu", test_mpi},
          {"jsrun: ddp_hpc, ddp_cpu_hpc", test_lsf},
          {"by hand with Lightning's variables", test_manual},
          {"kubeflow pods", test_kubeflow})
