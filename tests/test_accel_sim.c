/* tests/test_accel_sim.c — every accelerator through the shared plugin in
 * the simulator, under the rendezvous faults of issue #4, on 2 nodes x 4. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/accel.h"
#include "ddp/err.h"
#include "ddp/launch.h"
#include "ddp/sim.h"
#include "ddp/store.h"
#include "test.h"

static const char *const accels[] = {"ddp", "ddp_spawn", "ddp_cpu",
                                     "ddp2", "ddp_hpc", "ddp_cpu_hpc"};
#define NACC (sizeof accels / sizeof accels[0])

typedef enum { F_NONE, F_MASTER_LATE, F_PORT_TAKEN, F_CRASH, F_HEAL, F_OUTLAST } fault_t;
static const char *const fault_names[] = {"none", "master late", "port taken",
                                          "rank crashed", "partition heals",
                                          "partition outlasts"};

typedef struct {
    int ok, failed, crashed, ranks;
    int64_t max_end;
    char rank0_msg[640], other_msg[640];
} summary_t;

static ddp_sim_t *new_cluster(int nodes, uint64_t seed)
{
    ddp_sim_opts_t o = {.seed = seed};
    ddp_sim_t *sim = ddp_sim_new(&o);
    for (int i = 0; i < nodes; i++) {
        char host[16], addr[20];
        snprintf(host, sizeof host, "node%d", i);
        snprintf(addr, sizeof addr, "10.%d.%d.1", i / 250, i % 250);
        ddp_sim_add_node(sim, host, addr, 0);
    }
    return sim;
}

static summary_t run_case(const char *accel, fault_t f, int nodes, int procs,
                          const ddp_plugin_t *plugin)
{
    ddp_sim_t *sim = new_cluster(nodes, 7);
    ddp_sim_launch_t l = {.accelerator = accel, .nodes = nodes, .procs = procs};
    int ddp2 = !strcmp(accel, "ddp2");
    if (ddp2)
        l.procs = 1; /* one process per node */
    l.cfg.timeout_ns = 60 * DDP_NS_PER_S;
    l.cfg.plugin = plugin;
    l.cfg.seed = 3;
    int world = nodes * l.procs;
    char crash_rank[8];
    snprintf(crash_rank, sizeof crash_rank, "%d", world > 2 ? world - 3 : world - 1);
    switch (f) {
    case F_MASTER_LATE:
        l.master_start_ns = 20 * DDP_NS_PER_S;
        break;
    case F_PORT_TAKEN:
        l.squat_port = 29500;
        break;
    case F_CRASH:
        ddp_sim_add_fault(sim, &(ddp_fault_t){.kind = DDP_FAULT_CRASH, .node = -1,
                                                  .task = -1, .phase = "wait for workers",
                                                  .ranks = crash_rank});
        break;
    case F_HEAL:
    case F_OUTLAST:
        ddp_sim_add_fault(sim, &(ddp_fault_t){
                                   .kind = DDP_FAULT_PARTITION, .node_set = 1u << 1,
                                   .end_ns = (f == F_HEAL ? 20 : 90) * DDP_NS_PER_S});
        break;
    default:
        break;
    }
    CU_ASSERT_EQUAL(ddp_sim_launch_build(sim, &l), 0);
    ddp_sim_result_t res = ddp_sim_run(sim);
    CU_ASSERT_EQUAL(res, DDP_SIM_DONE);
    summary_t s = {0};
    for (int i = 0; i < ddp_sim_task_count(sim); i++) {
        const ddp_sim_outcome_t *o = ddp_sim_outcome(sim, i);
        if (o->rank < 0 || o->thread)
            continue;
        s.ranks++;
        if (o->state == DDP_SIM_TASK_CRASHED) {
            s.crashed++;
            continue;
        }
        if (o->rc == 0 && o->state == DDP_SIM_TASK_EXITED && o->connect_ns >= 0)
            s.ok++;
        else
            s.failed++;
        if (o->end_ns > s.max_end)
            s.max_end = o->end_ns;
        if (o->rank == 0)
            snprintf(s.rank0_msg, sizeof s.rank0_msg, "%s", o->message);
        else if (o->rc && !s.other_msg[0])
            snprintf(s.other_msg, sizeof s.other_msg, "%s", o->message);
    }
    ddp_sim_free(sim);
    return s;
}

/* sample > 0: only the diagonal (accelerator a with fault a % 6). */
static void check_matrix(int nodes, int procs, int sample)
{
    for (size_t a = 0; a < NACC; a++) {
        int world = !strcmp(accels[a], "ddp2") ? nodes : nodes * procs;
        for (int f = F_NONE; f <= F_OUTLAST; f++) {
            if (sample && f != (int)(a % 6))
                continue;
            summary_t s = run_case(accels[a], (fault_t)f, nodes, procs, NULL);
            int good = 1;
            switch (f) {
            case F_NONE:
            case F_MASTER_LATE:
            case F_HEAL:
                good = s.ranks == world && s.ok == world;
                break;
            case F_PORT_TAKEN:
                good = s.ok == 0 && strstr(s.rank0_msg, "rank 0 could not bind") &&
                       strstr(s.rank0_msg, "address in use") &&
                       strstr(s.other_msg, "29500");
                break;
            case F_CRASH:
                good = s.crashed == 1 && s.ok == 0 && s.max_end <= 61 * DDP_NS_PER_S &&
                       strstr(s.rank0_msg, "never joined");
                break;
            case F_OUTLAST:
                good = s.ok == 0 && s.max_end <= 61 * DDP_NS_PER_S &&
                       strstr(s.rank0_msg, "never joined");
                break;
            }
            if (!good)
                printf("\n  %s x %s on %dx%d: ranks %d ok %d failed %d crashed %d "
                       "end %.1f s\n    rank0: %s\n    other: %s\n",
                       accels[a], fault_names[f], nodes, procs, s.ranks, s.ok,
                       s.failed, s.crashed, (double)s.max_end / 1e9, s.rank0_msg,
                       s.other_msg);
            CU_ASSERT_TRUE(good);
        }
    }
}

static void test_matrix_2x4(void) { check_matrix(2, 4, 0); }

/* 36 runs of 512 ranks: the plain build runs all of them; sanitizer builds
 * (5-20x slower) run the diagonal so `make test` stays within its budget. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
static void test_matrix_64x8(void) { check_matrix(64, 8, 1); }
#else
static void test_matrix_64x8(void) { check_matrix(64, 8, 0); }
#endif

/* A user plugin overriding only init_ddp_connection: it runs for every
 * accelerator, then hands over to the default. */
static int g_override_calls;
static int counting_init(const ddp_plugin_t *self, ddp_ctx_t *ctx,
                         ddp_cluster_t *env, int r, int n)
{
    g_override_calls++; /* ranks are threads on one scheduler: no race */
    return ddp_plugin_default_init_ddp_connection(self, ctx, env, r, n);
}

static void test_user_plugin_every_accelerator(void)
{
    static const ddp_plugin_t mine = {.name = "mine",
                                      .init_ddp_connection = counting_init};
    /* A launch plan names its plugin: it must be registered. */
    CU_ASSERT_EQUAL_FATAL(ddp_plugin_register(&mine), 0);
    for (size_t a = 0; a < NACC; a++) {
        g_override_calls = 0;
        summary_t s = run_case(accels[a], F_NONE, 2, 2, &mine);
        int world = !strcmp(accels[a], "ddp2") ? 2 : 4;
        CU_ASSERT_EQUAL(s.ok, world);
        CU_ASSERT_EQUAL(g_override_calls, world);
        if (g_override_calls != world)
            printf("\n  %s: override ran %d times for %d ranks\n", accels[a],
                   g_override_calls, world);
    }
}

static void test_example_plugins(void)
{
    const char *names[] = {"subgroups", "rpc"};
    for (int i = 0; i < 2; i++) {
        const ddp_plugin_t *p = ddp_plugin_find(names[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        summary_t s = run_case("ddp_hpc", F_NONE, 2, 4, p);
        if (s.ok != 8)
            printf("\n  plugin %s: ok %d: %s / %s\n", names[i], s.ok, s.rank0_msg,
                   s.other_msg);
        CU_ASSERT_EQUAL(s.ok, 8);
    }
}

static void test_selection(void)
{
    ddp_sys_t *sys = ddp_test_sys();
    ddp_env_t *e = ddp_sys_env(sys);
    ddp_cluster_t *c = NULL;
    ddp_trainer_cfg_t cfg = {.accelerator = "ddp", .num_nodes = 2, .num_processes = 4};
    CU_ASSERT_EQUAL_FATAL(ddp_cluster_open(sys, NULL, &c), 0);
    CU_ASSERT_STRING_EQUAL(ddp_accel_select(&cfg, c), "ddp");
    ddp_cluster_close(c);
    /* SLURM manages the tasks only when ntasks == devices * nodes. */
    ddp_env_set(e, "SLURM_NTASKS", "8");
    ddp_env_set(e, "SLURM_JOB_NAME", "train");
    CU_ASSERT_EQUAL_FATAL(ddp_cluster_open(sys, NULL, &c), 0);
    CU_ASSERT_STRING_EQUAL(ddp_accel_select(&cfg, c), "ddp_hpc");
    cfg.accelerator = "ddp_cpu";
    CU_ASSERT_STRING_EQUAL(ddp_accel_select(&cfg, c), "ddp_cpu_hpc");
    cfg.num_processes = 2; /* #4389: 8 tasks for 2 x 2 devices */
    CU_ASSERT_STRING_EQUAL(ddp_accel_select(&cfg, c), "ddp_cpu");
    ddp_cluster_close(c);
    ddp_env_set(e, "SLURM_JOB_NAME", "bash");
    cfg.num_processes = 4;
    cfg.accelerator = "ddp";
    CU_ASSERT_EQUAL_FATAL(ddp_cluster_open(sys, NULL, &c), 0);
    CU_ASSERT_STRING_EQUAL(ddp_accel_select(&cfg, c), "ddp");
    ddp_cluster_close(c);
    cfg.accelerator = "ddp2";
    CU_ASSERT_EQUAL_FATAL(ddp_cluster_open(sys, NULL, &c), 0);
    CU_ASSERT_STRING_EQUAL(ddp_accel_select(&cfg, c), "ddp2");
    ddp_cluster_close(c);
    /* The environment decides, not a name: ddp's own relaunched child
     * (LOCAL_RANK, Lightning environment) stays ddp; mpirun's and
     * torchrun's processes are ranks already. */
    ddp_env_unset(e, "SLURM_NTASKS");
    ddp_env_unset(e, "SLURM_JOB_NAME");
    ddp_env_set(e, "LOCAL_RANK", "1");
    cfg.accelerator = "ddp";
    CU_ASSERT_EQUAL_FATAL(ddp_cluster_open(sys, NULL, &c), 0);
    CU_ASSERT_STRING_EQUAL(c->ops->name, "lightning");
    CU_ASSERT_TRUE(ddp_cluster_creates_processes_externally(c));
    CU_ASSERT_FALSE(ddp_cluster_manages_tasks(c, 4, 2));
    CU_ASSERT_STRING_EQUAL(ddp_accel_select(&cfg, c), "ddp");
    ddp_cluster_close(c);
    ddp_env_unset(e, "LOCAL_RANK");
    ddp_env_set(e, "OMPI_COMM_WORLD_SIZE", "8");
    ddp_env_set(e, "OMPI_COMM_WORLD_RANK", "3");
    ddp_env_set(e, "OMPI_COMM_WORLD_LOCAL_RANK", "3");
    CU_ASSERT_EQUAL_FATAL(ddp_cluster_open(sys, NULL, &c), 0);
    CU_ASSERT_STRING_EQUAL(c->ops->name, "mpi");
    CU_ASSERT_STRING_EQUAL(ddp_accel_select(&cfg, c), "ddp_hpc");
    cfg.accelerator = "ddp_cpu";
    CU_ASSERT_STRING_EQUAL(ddp_accel_select(&cfg, c), "ddp_cpu_hpc");
    cfg.accelerator = "ddp_spawn";
    CU_ASSERT_STRING_EQUAL(ddp_accel_select(&cfg, c), "ddp_spawn");
    ddp_cluster_close(c);
    CU_ASSERT_PTR_NULL(ddp_accel_find("horovod"));
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "ddp_spawn"));
    ddp_sys_free(sys);
}

/* Another job's store (one of ours, with no rendezvous in it) on node 0's
 * MASTER_PORT for two minutes. */
static int foreign_store_main(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    ddp_store_server_opts_t o = {.port = 29500};
    ddp_store_server_t *srv = NULL;
    if (ddp_store_server_new(sys, &o, &srv) != 0)
        return 1;
    ddp_store_server_run(srv, ddp_sys_deadline_in(sys, 120 * DDP_NS_PER_S));
    ddp_store_server_free(srv);
    return 0;
}

/* pytorch#129367: rank 0 cannot bind MASTER_PORT because another job's
 * store holds it. Rank 0 leaves its cause in that store; node 1 (cut off
 * for its first 3 s, so it connects after that) finds it in its connect's
 * round trip and stops at once naming it, instead of waiting out the 60 s
 * timeout in the bootstrap as rank 1 (connected before) does. */
static void test_foreign_store_root_cause(void)
{
    ddp_sim_t *sim = new_cluster(2, 7);
    CU_ASSERT_FATAL(ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0,
                                                                 .name = "foreign",
                                                                 .rank = -1},
                                     foreign_store_main, NULL) >= 0);
    ddp_sim_add_fault(sim, &(ddp_fault_t){.kind = DDP_FAULT_PARTITION,
                                              .node_set = 1u << 1,
                                              .end_ns = 3 * DDP_NS_PER_S});
    ddp_sim_launch_t l = {.accelerator = "ddp", .nodes = 2, .procs = 2};
    l.cfg.timeout_ns = 60 * DDP_NS_PER_S;
    l.cfg.seed = 3;
    CU_ASSERT_EQUAL_FATAL(ddp_sim_launch_build(sim, &l), 0);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    int seen = 0;
    for (int i = 0; i < ddp_sim_task_count(sim); i++) {
        const ddp_sim_outcome_t *o = ddp_sim_outcome(sim, i);
        if (o->rank < 0 || o->thread)
            continue;
        CU_ASSERT_NOT_EQUAL(o->rc, 0);
        if (o->rank == 0)
            CU_ASSERT_PTR_NOT_NULL(strstr(o->message, "could not bind"));
        if (o->node != 1)
            continue;
        seen++;
        int named = strstr(o->message, "the master's store is not ours") &&
                    strstr(o->message, "rank 0 could not bind") &&
                    strstr(o->message, "address in use");
        if (!named || o->end_ns > 10 * DDP_NS_PER_S)
            printf("\n  rank %d ended at %.1f s: %s\n", o->rank,
                   (double)o->end_ns / 1e9, o->message);
        CU_ASSERT_TRUE(named);
        CU_ASSERT(o->end_ns <= 10 * DDP_NS_PER_S);
    }
    CU_ASSERT_EQUAL(seen, 2);
    ddp_sim_free(sim);
}

DDP_SUITE("accel_sim", NULL, NULL,
          {"accelerator selection order", test_selection},
          {"every accelerator x rendezvous faults, 2x4", test_matrix_2x4},
          {"every accelerator x rendezvous faults, 64x8 (512 ranks)", test_matrix_64x8},
          {"user plugin override used by every accelerator", test_user_plugin_every_accelerator},
          {"subgroups and rpc example plugins", test_example_plugins},
          {"another job's store on the port: later ranks name rank 0's cause",
           test_foreign_store_root_cause})
