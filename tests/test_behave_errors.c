/* tests/test_behave_errors.c — every failure's message states its facts
 * (issue 16, "Errors").
 *
 * The failure scenarios of scenarios/ (and a few written here) run in the
 * simulator for one accelerator each; for the processes they name, the
 * error code and every fact of the message are asserted exactly: the rank
 * and phase it failed in, which ranks never arrived, which rank is
 * duplicated (with its node and local rank), the address and port it
 * tried, how long it waited, the variable and value at fault and the hint
 * that fixes it. Each fact comes from the scenario's own setup (its nodes,
 * timeout, port, fault), not from a previous run's output.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/plan.h"
#include "ddp/scenario.h"
#include "ddp/sim.h"
#include "behave.h"
#include "test.h"

#define ANY -1

typedef struct pfacts {
    int rank, node; /* the processes meant: this global rank (on this node) */
    int some;       /* one of them suffices (which one is the schedule's pick) */
    int code;
    const char *facts[8];
} pfacts_t;

/* What a case is about (one test each). */
typedef enum { G_MISSING, G_DUPLICATE, G_LAYOUT, G_ADDRESS, G_CONFIG } group_t;

typedef struct errcase {
    group_t group;
    const char *file; /* a scenario of scenarios/, or */
    const char *text; /* one written here */
    const char *accel;
    pfacts_t p[6];    /* ends at code 0 */
} errcase_t;

static const errcase_t g_cases[] = {
    /* Node 0 starts 90 s late: node 1's ranks give up connecting at their
     * 60 s deadline, rank 0 then waits its own 60 s for them. */
    {G_MISSING, "scenarios/master-too-late.scn", NULL, "ddp_hpc",
     {{0, 0, 0, DDP_ETIMEOUT,
       {"rank 0, wait for workers: ", "ranks 2, 3 never joined",
        "Timed out after 60.0 seconds waiting for clients", "2/4 clients joined",
        "[node0:29500]", "2 rank(s) never connected"}},
      {1, 0, 0, DDP_ETIMEOUT,
       {"rank 1, process group init: ", "\"default_pg/tcp/peers/1\" from rank 0",
        "Timed out after 60.0 s", "on node0:29500"}},
      {2, 1, 0, -ECONNREFUSED,
       {"rank 2, store connect: ", "could not connect to the store at node0:29500",
        "Connection refused", "after 60.0 s", "MASTER_ADDR:MASTER_PORT (node0:29500)"}},
      {3, 1, 0, -ECONNREFUSED,
       {"rank 3, store connect: ", "node0:29500", "after 60.0 s"}}}},
    /* Rank 1 dies joining: rank 0 names it after the 10 s timeout. */
    {G_MISSING, "scenarios/crash-joining.scn", NULL, "ddp",
     {{0, 0, 0, DDP_ETIMEOUT,
       {"rank 0, wait for workers: ", "rank 1 never joined", "3/4 clients joined",
        "Timed out after 10.0 seconds", "[node0:29500]"}},
      {2, 1, 0, DDP_ETIMEOUT,
       {"rank 2, process group init: ", "from rank 0", "after 10.0 s", "node0:29500"}}}},
    /* Rank 1 dies entering the barrier: rank 0 names it; rank 2 says how
     * long it waited and the barrier's key. */
    {G_MISSING, "scenarios/crash-before-barrier.scn", NULL, "ddp_spawn",
     {{0, 0, 0, DDP_ETIMEOUT,
       {"rank 0, barrier: ", "rank 1 never reached the barrier",
        "Timed out after 60.0 s in the store-based barrier",
        "store_based_barrier_key:default_pg", "world_size=4, num_workers_joined=3"}},
      {2, 1, 0, DDP_ETIMEOUT,
       {"rank 2, barrier: ", "Timed out after 60.0 s", "world_size=4"}}}},
    /* 200 ranks, so rank 0 gathers the listen addresses in two batches
     * (128 keys, then 72): rank 150, in the second, dies before it
     * publishes; rank 0 names it by its global rank. */
    {G_MISSING, NULL,
     "scenario \"200 ranks, rank 150 never publishes its address\"\n"
     "include \"scenarios/common/base.inc\"\naccelerators ddp_hpc\nnodes 25\ndevices 8\n"
     "timeout 10s\nfault crash ranks=150 phase=\"process group init\"\nexpect fail\n",
     "ddp_hpc",
     {{0, 0, 0, DDP_ETIMEOUT,
       {"rank 0, process group init: ", "timed out gathering the listen addresses",
        "1 rank(s) of 200 never published (150)", "after 10.0 s"}}}},
    /* Node 1 dies 1 ms in. */
    {G_MISSING, "scenarios/crash-node.scn", NULL, "ddp_cpu_hpc",
     {{0, 0, 0, DDP_ETIMEOUT,
       {"rank 0, wait for workers: ", "ranks 2, 3 never joined",
        "Timed out after 10.0 seconds", "2/4 clients joined"}},
      {1, 0, 0, DDP_ETIMEOUT, {"rank 1, process group init: ", "after 10.0 s"}}}},
    /* Rank 1 dies in configure_ddp: its ring neighbours name it. Rank 0,
     * the broadcast's root, sends into the dead socket without an error
     * (as TCP does: the data is only queued); the reset shows in its next
     * collective, the checksum allreduce. */
    {G_MISSING, "scenarios/crash-configure.scn", NULL, "ddp_hpc",
     {{0, 0, 0, DDP_EPEER_LOST,
       {"rank 0, configure_ddp: ", "tcp allreduce", "ring successor rank 1",
        "(peer rank 1)", "rank 1 exited or failed"}},
      {2, 1, 0, DDP_EPEER_LOST,
       {"rank 2, configure_ddp: ", "ring predecessor rank 1", "closed the connection (EOF)",
        "(peer rank 1)"}},
      /* Rank 3 is no neighbour of rank 1: it learns from rank 2, at once. */
      {3, 1, 0, DDP_EPEER_LOST,
       {"rank 3, configure_ddp: ", "ring predecessor rank 2", "closed the connection (EOF)",
        "(peer rank 2)", "after 0.0 s"}}}},
    /* A squatter holds 29500 on node 0. */
    {G_ADDRESS, "scenarios/port-taken.scn", NULL, "ddp_hpc",
     {{0, 0, 0, -EADDRINUSE,
       {"rank 0, store server: ", "rank 0 could not bind node0:29500: address in use",
        "holds port 29500", "pick a free MASTER_PORT"}},
      {1, 0, 0, DDP_ETIMEOUT,
       {"rank 1, store connect: ", "could not connect to the store at node0:29500",
        "after 10.0 s"}},
      {3, 1, 0, DDP_ETIMEOUT, {"rank 3, store connect: ", "node0:29500", "after 10.0 s"}}}},
    /* NODE_RANK=0 on every node (#5651): node 1's processes claim ranks 0
     * and 1 again; rank 0 on node 0 waits for 2 and 3. */
    {G_DUPLICATE, "scenarios/node-rank-misdetected.scn", NULL, "ddp",
     {{0, 0, 0, DDP_ETIMEOUT,
       {"rank 0, wait for workers: ", "ranks 2, 3 never joined", "2/4 clients joined",
        "after 10.0 seconds"}},
      /* node 1's rank 0 finds node 0's rank 0 at MASTER_ADDR: named a
       * duplicate before it serves, not told to "set MASTER_ADDR" */
      {0, 1, 0, DDP_ECONFIG,
       {"rank 0, init_ddp_connection: ", "a rank 0 already joined the store at node0:29500",
        "(ddp, node rank 0, local rank 0) is a second rank 0: ranks are duplicated",
        "NODE_RANK is the same on every node (#5651)"}},
      {1, 1, 0, DDP_ECONFIG,
       {"rank 1, wait for workers: ", "already joined as global rank 1",
        "(ddp, node rank 0, local rank 1)", "ranks are duplicated"}}}},
    {G_DUPLICATE, "scenarios/node-rank-misdetected.scn", NULL, "ddp_cpu",
     {{1, 1, 0, DDP_ECONFIG,
       {"rank 1, wait for workers: ", "already joined as global rank 1",
        "(ddp_cpu, node rank 0, local rank 1)"}}}},
    /* srun --ntasks-per-node 2 for 4 devices (#4389): both tasks of a node
     * are its local rank 0. */
    {G_DUPLICATE, "scenarios/slurm-ntasks-mismatch.scn", NULL, "ddp",
     {{0, 0, 1, -EADDRINUSE,
       {"rank 0, store server: ", "could not bind node0:19242",
        "another rank 0 already serves a rendezvous store there", "Lightning #4389"}},
      {4, 1, 1, DDP_ECONFIG,
       {"rank 4, wait for workers: ", "already joined as global rank 4",
        "(ddp, node rank 1, local rank 0)", "srun --ntasks-per-node"}}}},
    /* ddp_hpc validates the launcher's layout (#4389) before any rank
     * math. */
    {G_LAYOUT, NULL,
     "scenario \"ddp_hpc, srun 2 tasks per node for 4 devices\"\n"
     "include \"scenarios/common/slurm.inc\"\naccelerators ddp_hpc\n"
     "devices 4\ntasks_per_node 2\nexpect fail\n",
     "ddp_hpc",
     {{2, 1, 0, DDP_ECONFIG,
       {"rank 2: ", "devices=4 was requested but SLURM runs 2 tasks per node",
        "SLURM_NTASKS_PER_NODE=2", "set devices=2, or --ntasks-per-node=4"}}}},
    /* The check holds for devices=1 too: srun starting 2 tasks per node
     * for a 1-device Trainer duplicates local rank 0. */
    {G_LAYOUT, NULL,
     "scenario \"ddp_hpc, srun 2 tasks per node for 1 device\"\n"
     "include \"scenarios/common/slurm.inc\"\naccelerators ddp_hpc\n"
     "devices 1\ntasks_per_node 2\nexpect fail\n",
     "ddp_hpc",
     {{1, 0, 0, DDP_ECONFIG,
       {"rank 1: ", "devices=1 was requested but SLURM runs 2 tasks per node",
        "SLURM_NTASKS_PER_NODE=2", "set devices=2, or --ntasks-per-node=1"}}}},
    {G_LAYOUT, NULL,
     "scenario \"ddp_cpu_hpc, srun on 2 nodes for num_nodes 3\"\n"
     "include \"scenarios/common/slurm.inc\"\naccelerators ddp_cpu_hpc\n"
     "num_nodes 3\nexpect fail\n",
     "ddp_cpu_hpc",
     {{1, 0, 0, DDP_ECONFIG,
       {"rank 1: ", "num_nodes=3 was requested but the SLURM job has 2 nodes",
        "SLURM_NNODES=2", "set num_nodes=2, or --nodes=3"}}}},
    {G_LAYOUT, NULL,
     "scenario \"ddp_cpu_hpc, torchrun 1 process per node for 2 devices\"\n"
     "include \"scenarios/common/base.inc\"\nlauncher torchrun\naccelerators ddp_cpu_hpc\n"
     "tasks_per_node 1\nexpect fail\n",
     "ddp_cpu_hpc",
     {{1, 1, 0, DDP_ECONFIG,
       {"rank 1: ", "devices=2 and num_nodes=2 were requested", "product 4",
        "WORLD_SIZE=2 set by torchrun", "--nproc-per-node=2 --nnodes=2"}}}},
    /* Every connect to the master refused / its name never resolves /
     * node 1 cut off for longer than the deadline. */
    {G_ADDRESS, "scenarios/refuse-forever.scn", NULL, "ddp_hpc",
     {{1, 0, 0, -ECONNREFUSED,
       {"rank 1, store connect: ", "could not connect to the store at node0:29500",
        "Connection refused (injected)", "after 60.0 s"}},
      {3, 1, 0, -ECONNREFUSED, {"rank 3, store connect: ", "node0:29500", "after 60.0 s"}}}},
    {G_ADDRESS, "scenarios/resolve-fails.scn", NULL, "ddp",
     {{2, 1, 0, DDP_ENOT_FOUND,
       {"rank 2, store connect: ", "cannot resolve host \"node0\"", "node0:29500",
        "after 60.0 s"}}}},
    {G_MISSING, "scenarios/partition-outlasts.scn", NULL, "ddp2",
     {{0, 0, 0, DDP_ETIMEOUT,
       {"rank 0, wait for workers: ", "rank 1 never joined", "1/2 clients joined",
        "after 60.0 seconds"}},
      {1, 1, 0, DDP_ETIMEOUT,
       {"rank 1, store connect: ", "connect to 10.0.0.1:29500 did not complete in time",
        "node0:29500", "after 60.0 s"}}}},
    {G_MISSING, "scenarios/pause-outlasts.scn", NULL, "ddp_hpc",
     {{0, 0, 0, DDP_ETIMEOUT,
       {"rank 0, wait for workers: ", "rank 1 never joined", "3/4 clients joined",
        "after 60.0 seconds"}}}},
    /* No MASTER_PORT on a per-node launch of 2 nodes: each node would pick
     * a free port of its own (Lightning #2578), so every rank names the
     * variable at once instead of node 1 timing out on the wrong port. */
    {G_CONFIG, "scenarios/missing-master-port.scn", NULL, "ddp2",
     {{0, 0, 0, DDP_ECONFIG,
       {"MASTER_PORT is not set",
        "picked a free port of its own", "spans 2 nodes", "export MASTER_PORT="}},
      {1, 1, 0, DDP_ECONFIG, {"MASTER_PORT is not set", "spans 2 nodes"}}}},
    /* An interactive allocation: Lightning's environment, no MASTER_ADDR,
     * so node 1 would look for the master on itself: a loopback master for
     * a world of 2 nodes is named at once, on every rank. */
    {G_CONFIG, "scenarios/slurm-interactive-no-master.scn", NULL, "ddp",
     {{2, 1, 0, DDP_ECONFIG,
       {"rank 2, init_ddp_connection: ", "MASTER_ADDR \"127.0.0.1\" resolves to 127.0.0.1",
        "the world spans 2 nodes", "export MASTER_ADDR="}},
      {0, 0, 0, DDP_ECONFIG, {"rank 0, init_ddp_connection: ", "spans 2 nodes"}}}},
    /* Configuration errors name the variable, its value and the form. */
    {G_CONFIG, "scenarios/mpi-no-master-addr.scn", NULL, "ddp_hpc",
     {{3, 1, 0, DDP_ECONFIG,
       {"rank 3, init_ddp_connection: ",
        "MASTER_ADDR is not set and the 4 ranks span several nodes",
        "OMPI_COMM_WORLD_LOCAL_SIZE=2", "mpirun -x MASTER_ADDR="}}}},
    /* LOCAL_RANK exported into a per-node launch (an outer launcher's,
     * left in the job's environment): with devices 2 only 0 and 1 exist,
     * on every node. */
    {G_CONFIG, NULL,
     "scenario \"ddp, LOCAL_RANK=2 exported for devices 2\"\n"
     "include \"scenarios/common/base.inc\"\naccelerators ddp\nenv LOCAL_RANK=2\n"
     "expect fail\n",
     "ddp",
     {{-1, ANY, 0, DDP_ECONFIG,
       {"LOCAL_RANK=\"2\" is not valid", "expected an integer 0..1"}}}},
    {G_CONFIG, "scenarios/lsf-missing-rankfile.scn", NULL, "ddp_hpc",
     {{1, 0, 0, -ENOENT,
       {"rank 1: ", "LSB_DJOB_RANKFILE=\"/gone/rankfile\"",
        "cannot open \"/gone/rankfile\""}}}},
    {G_CONFIG, "scenarios/slurm-bad-nodelist.scn", NULL, "ddp_hpc",
     {{2, 1, 0, DDP_ECONFIG,
       {"rank 2, init_ddp_connection: ", "SLURM_NODELIST: invalid hostlist \"gpu[01-02\"",
        "unbalanced '[' at position 4"}}}},
    {G_CONFIG, "scenarios/torchrun-bad-world.scn", NULL, "ddp_cpu_hpc",
     {{0, 0, 0, DDP_ECONFIG,
       {"rank 0: ", "WORLD_SIZE=\"four\" is not a valid world size",
        "expected an integer >= 1"}}}},
};
#define NCASES (sizeof g_cases / sizeof g_cases[0])

static const char *case_name(const errcase_t *c)
{
    return c->file ? c->file : c->text + strlen("scenario \"");
}

static int check_facts(const errcase_t *c, const pfacts_t *pf, const ddp_sim_outcome_t *o)
{
    int bad = o->code != pf->code;
    for (int f = 0; f < 8 && pf->facts[f]; f++)
        bad |= strstr(o->message, pf->facts[f]) == NULL;
    if (bad && !pf->some) {
        printf("\n  %s (%s), rank %d on node %d: code %s (want %s)\n    message: %s\n",
               case_name(c), c->accel, o->rank, o->node, ddp_err_name(o->code),
               ddp_err_name(pf->code), o->message);
        for (int f = 0; f < 8 && pf->facts[f]; f++)
            if (!strstr(o->message, pf->facts[f]))
                printf("    missing: %s\n", pf->facts[f]);
    }
    return !bad;
}

static void run_case(const errcase_t *c)
{
    ddp_scenario_t *s = NULL;
    char err[512] = "";
    int rc = c->file ? ddp_scenario_load(c->file, &s, err, sizeof err)
                     : ddp_scenario_parse(c->text, "behave", NULL, &s, err, sizeof err);
    if (rc)
        printf("\n  %s: %s\n", case_name(c), err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    ddp_plan_t *p = NULL;
    ddp_sim_t *sim = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_scenario_plan(s, c->accel, 0, &p), 0);
    CU_ASSERT_EQUAL_FATAL(ddp_plan_simulate(p, NULL, &sim, NULL), 0);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    for (int i = 0; i < 6 && c->p[i].code; i++) {
        const pfacts_t *pf = &c->p[i];
        int matched = 0, good = 0;
        for (int t = 0; t < ddp_sim_task_count(sim); t++) {
            const ddp_sim_outcome_t *o = ddp_sim_outcome(sim, t);
            /* Processes that reached rank math (launchers have rank -1). */
            if (o->thread || o->rank != pf->rank ||
                (pf->node != ANY && o->node != pf->node) ||
                o->state == DDP_SIM_TASK_CRASHED)
                continue;
            matched++;
            good += check_facts(c, pf, o);
        }
        if (!matched)
            printf("\n  %s (%s): no process with rank %d on node %d\n", case_name(c),
                   c->accel, pf->rank, pf->node);
        CU_ASSERT(matched > 0);
        if (pf->some && matched && !good)
            printf("\n  %s (%s): no rank %d on node %d has every fact: %s, ...\n",
                   case_name(c), c->accel, pf->rank, pf->node, pf->facts[0]);
        CU_ASSERT(pf->some ? good > 0 : good == matched);
    }
    char who[96];
    if (ddp_behave_leaked(sim, who, sizeof who))
        printf("\n  %s (%s): %s leaked\n", case_name(c), c->accel, who);
    CU_ASSERT_EQUAL(ddp_behave_leaked(sim, NULL, 0), 0);
    ddp_sim_free(sim);
    ddp_plan_free(p);
    ddp_scenario_free(s);
}

static void run_group(group_t g)
{
    for (size_t i = 0; i < NCASES; i++)
        if (g_cases[i].group == g)
            run_case(&g_cases[i]);
}

static void test_missing_ranks(void) { run_group(G_MISSING); }
static void test_duplicated_ranks(void) { run_group(G_DUPLICATE); }
static void test_layout(void) { run_group(G_LAYOUT); }
static void test_address(void) { run_group(G_ADDRESS); }
static void test_config(void) { run_group(G_CONFIG); }

DDP_SUITE("behave_errors", ddp_behave_suite_init, ddp_behave_suite_cleanup,
          {"missing ranks: which, how many, where, how long", test_missing_ranks},
          {"duplicated ranks: which rank, node and local rank", test_duplicated_ranks},
          {"launcher layout against devices and num_nodes (#4389)", test_layout},
          {"the master's address and port, and how long", test_address},
          {"configuration: the variable, its value, the form", test_config})
