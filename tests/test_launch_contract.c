/* tests/test_launch_contract.c — the launch-contract differential
 * (tests/launch_diff.c, docs/fidelity.md "Launch contracts"): torch 1.13's
 * worker environments against `ddpsim launch` and the elastic agent's.
 * Blocks recorded from torch's own code (launch_oracle.py) for the cases
 * ddpsim got wrong, a live sample of 300 generated configurations when
 * a Python with torch is here, and 4 through real mpirun when it is here
 * (each skipped otherwise). */
#include <stdio.h>
#include <string.h>

#include "../harness/elastic_priv.h"
#include "ddp/env.h"
#include "ddp/sys.h"
#include "launch_diff.h"
#include "extlaunch_diff.h"
#include "test.h"

/* torch's answer for the static worker variables both nodes share. */
#define T_COMMON "\tROLE_NAME=default\tNCCL_ASYNC_ERROR_HANDLING=1\tTORCHELASTIC_MAX_RESTARTS=0" \
                 "\tTORCHELASTIC_RESTART_COUNT=0\tTORCHELASTIC_RUN_ID=none"                   \
                 "\tTORCHELASTIC_USE_AGENT_STORE=True"

static launch_diff_t diff_of(const char *blocks)
{
    launch_diff_t d;
    memset(&d, 0, sizeof d);
    FILE *f = fmemopen((void *)blocks, strlen(blocks), "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(launch_diff_read(f, &d), 0);
    fclose(f);
    if (d.disagreed)
        printf("\n  %s\n", d.first);
    return d;
}

/* Each worker gets NCCL_ASYNC_ERROR_HANDLING (torch 1.13's name), not
 * TORCH_NCCL_ASYNC_ERROR_HANDLING (torch >= 2.2's). */
static void test_nccl_async_error_handling_name(void)
{
    launch_diff_t d = diff_of(
        "C\tstatic\t0\t1\t0\t--master_addr=node1\t--master_port=42010\n"
        "E\n"
        "W\tRANK=0\tLOCAL_RANK=0\tWORLD_SIZE=1\tLOCAL_WORLD_SIZE=1\tGROUP_RANK=0"
        "\tGROUP_WORLD_SIZE=1\tROLE_RANK=0\tROLE_WORLD_SIZE=1\tMASTER_ADDR=node1"
        "\tMASTER_PORT=42010" T_COMMON "\n");
    CU_ASSERT_EQUAL(d.configs, 1);
    CU_ASSERT_EQUAL(d.disagreed, 0);
    CU_ASSERT_EQUAL(d.why[LAUNCH_WHY_AGENT_STORE], 1);
}

/* --master_addr is read as torch reads the endpoint "ADDR:PORT": brackets
 * around an IPv6 address go, a host name with a space or "!" is refused. */
static void test_master_addr_as_torch_endpoint(void)
{
    launch_diff_t d = diff_of(
        "C\tstatic\t0\t1\t0\t--nproc_per_node=2\t--nnodes=2\t--node_rank=1"
        "\t--master_addr=[::1]\t--master_port=42010\n"
        "E\n"
        "W\tRANK=2\tLOCAL_RANK=0\tWORLD_SIZE=4\tLOCAL_WORLD_SIZE=2\tGROUP_RANK=1"
        "\tGROUP_WORLD_SIZE=2\tROLE_RANK=2\tROLE_WORLD_SIZE=4\tMASTER_ADDR=::1"
        "\tMASTER_PORT=42010\tOMP_NUM_THREADS=1" T_COMMON "\n"
        "W\tRANK=3\tLOCAL_RANK=1\tWORLD_SIZE=4\tLOCAL_WORLD_SIZE=2\tGROUP_RANK=1"
        "\tGROUP_WORLD_SIZE=2\tROLE_RANK=3\tROLE_WORLD_SIZE=4\tMASTER_ADDR=::1"
        "\tMASTER_PORT=42010\tOMP_NUM_THREADS=1" T_COMMON "\n"
        "C\tstatic\t0\t1\t0\t--master_addr=a b\t--master_port=42010\n"
        "E\n"
        "X\tValueError: The hostname of the rendezvous endpoint 'a b:42010' must be ...\n"
        "C\tstatic\t0\t1\t0\t--master_addr= 10.0.0.7 \t--master_port=42010\n"
        "E\n"
        "X\tValueError: The hostname of the rendezvous endpoint '10.0.0.7 :42010' must ...\n"
        "C\tstatic\t0\t1\t0\t--master_addr=\t--master_port=42010\n"
        "E\n"
        "X\tValueError: The hostname of the rendezvous endpoint ':42010' must be ...\n");
    CU_ASSERT_EQUAL(d.configs, 4);
    CU_ASSERT_EQUAL(d.torch_rejected, 3);
    CU_ASSERT_EQUAL(d.disagreed, 0);
}

static int no_worker(ddp_sys_t *sys, void *arg)
{
    (void)sys, (void)arg;
    return 0;
}

/* The elastic agent (c10d, one node of 2 workers, its store on a free port
 * of loopback) gives its workers torch 1.13's NCCL_ASYNC_ERROR_HANDLING and
 * torchrun's OMP_NUM_THREADS, as ddpsim launch does; they inherit an
 * OMP_NUM_THREADS of the agent's. */
static void test_elastic_agent_worker_env(void)
{
    for (int inherit = 0; inherit < 2; inherit++) {
        ddp_env_t *env = ddp_env_new();
        CU_ASSERT_PTR_NOT_NULL_FATAL(env);
        ddp_sys_t *probe = ddp_sys_posix_new(ddp_env_new()); /* frees its env */
        uint16_t port = 0;
        CU_ASSERT_EQUAL_FATAL(ddp_sys_free_port(probe, &port), 0);
        ddp_sys_free(probe);
        char endpoint[32];
        snprintf(endpoint, sizeof endpoint, "127.0.0.1:%u", (unsigned)port);
        ddp_env_set(env, "PET_NNODES", "1");
        ddp_env_set(env, "PET_NPROC_PER_NODE", "2");
        ddp_env_set(env, "PET_RDZV_ENDPOINT", endpoint);
        ddp_env_set(env, "PET_MONITOR_INTERVAL", "0.05");
        if (inherit)
            ddp_env_set(env, "OMP_NUM_THREADS", "3");
        ddp_sys_t *sys = launch_diff_recording_sys(env);
        CU_ASSERT_PTR_NOT_NULL_FATAL(sys);
        ddp_elastic_worker_t w = {no_worker, NULL};
        int restarts = -1, n = 0;
        CU_ASSERT_EQUAL(ddp__elastic_agent(sys, &w, &restarts), 0);
        ddp_env_t *const *got = launch_diff_recorded(&n);
        CU_ASSERT_EQUAL(n, 2);
        for (int i = 0; i < n; i++) {
            const char *nccl = ddp_env_get(got[i], "NCCL_ASYNC_ERROR_HANDLING");
            const char *omp = ddp_env_get(got[i], "OMP_NUM_THREADS");
            CU_ASSERT_STRING_EQUAL(nccl ? nccl : "(unset)", "1");
            CU_ASSERT_STRING_EQUAL(omp ? omp : "(unset)", inherit ? "3" : "1");
            CU_ASSERT_FALSE(ddp_env_has(got[i], "TORCH_NCCL_ASYNC_ERROR_HANDLING"));
        }
        launch_diff_clear();
        ddp_sys_free(sys);
    }
}

/* The elastic agent's worker environment (c10d: harness/worker_env.c) as
 * torch 1.13 writes it (local_elastic_agent.py _start_workers; run.py's
 * OMP_NUM_THREADS): node 1 of 2, second round of 3 restarts, the user's
 * own NCCL_ASYNC_ERROR_HANDLING kept (os.getenv with 1 as the default);
 * then one worker a node, which torchrun gives no OMP_NUM_THREADS. */
static void test_elastic_worker_env_as_torch(void)
{
#define T_RUN "\tMASTER_ADDR=node0\tMASTER_PORT=42010\tROLE_NAME=default" \
              "\tTORCHELASTIC_RUN_ID=job\tTORCHELASTIC_USE_AGENT_STORE=False"
    launch_diff_t d = diff_of(
        "C\tc10d\t1\t2\t1\t--nproc_per_node=2\n"
        "E\tNCCL_ASYNC_ERROR_HANDLING=0\n"
        "W\tRANK=2\tLOCAL_RANK=0\tWORLD_SIZE=4\tLOCAL_WORLD_SIZE=2\tGROUP_RANK=1"
        "\tGROUP_WORLD_SIZE=2\tROLE_RANK=2\tROLE_WORLD_SIZE=4\tOMP_NUM_THREADS=1"
        "\tNCCL_ASYNC_ERROR_HANDLING=0\tTORCHELASTIC_RESTART_COUNT=1"
        "\tTORCHELASTIC_MAX_RESTARTS=3" T_RUN "\n"
        "W\tRANK=3\tLOCAL_RANK=1\tWORLD_SIZE=4\tLOCAL_WORLD_SIZE=2\tGROUP_RANK=1"
        "\tGROUP_WORLD_SIZE=2\tROLE_RANK=3\tROLE_WORLD_SIZE=4\tOMP_NUM_THREADS=1"
        "\tNCCL_ASYNC_ERROR_HANDLING=0\tTORCHELASTIC_RESTART_COUNT=1"
        "\tTORCHELASTIC_MAX_RESTARTS=3" T_RUN "\n"
        "C\tc10d\t1\t2\t0\t--nproc_per_node=1\n"
        "W\tRANK=1\tLOCAL_RANK=0\tWORLD_SIZE=2\tLOCAL_WORLD_SIZE=1\tGROUP_RANK=1"
        "\tGROUP_WORLD_SIZE=2\tROLE_RANK=1\tROLE_WORLD_SIZE=2\tNCCL_ASYNC_ERROR_HANDLING=1"
        "\tTORCHELASTIC_RESTART_COUNT=0\tTORCHELASTIC_MAX_RESTARTS=3" T_RUN "\n");
#undef T_RUN
    CU_ASSERT_EQUAL(d.configs, 2);
    CU_ASSERT_EQUAL(d.workers, 3);
    CU_ASSERT_EQUAL(d.disagreed, 0);
}

/* A PET_ variable set but empty is torchrun's value, refused: not unset. */
static void test_empty_pet_variable_is_a_value(void)
{
    launch_diff_t d = diff_of(
        "C\tstatic\t0\t1\t0\t--master_port\t42010\n"
        "E\tPET_MASTER_ADDR=\n"
        "X\tValueError: The hostname of the rendezvous endpoint ':42010' must be ...\n"
        "C\tstatic\t0\t1\t0\t--nproc_per_node=1\n"
        "E\tPET_NNODES=\n"
        "X\tValueError: invalid literal for int() with base 10: ''\n");
    CU_ASSERT_EQUAL(d.torch_rejected, 2);
    CU_ASSERT_EQUAL(d.disagreed, 0);
}

/* 300 generated configurations through torch's own code, live. */
static void test_generated_sample(void)
{
    FILE *probe = popen("sh scripts/torch-python -c '' 2>/dev/null && echo yes", "r");
    char yes[8] = "";
    if (probe) {
        if (!fgets(yes, sizeof yes, probe))
            yes[0] = '\0';
        pclose(probe);
    }
    if (strncmp(yes, "yes", 3) != 0) {
        ddp_test_skip("no Python with torch here (sh scripts/deps.sh --torch)");
        return;
    }
    FILE *p = popen("sh scripts/torch-python tests/differential/launch_oracle.py 300 7", "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    launch_diff_t d;
    CU_ASSERT_EQUAL(launch_diff_read(p, &d), 0);
    CU_ASSERT_EQUAL(pclose(p), 0);
    CU_ASSERT_EQUAL(d.configs, 300);
    CU_ASSERT(d.workers > 300);
    if (d.disagreed)
        printf("\n  %ld disagreement(s); first: %s\n", d.disagreed, d.first);
    CU_ASSERT_EQUAL(d.disagreed, 0);
}

/* 4 generated configurations through each real external launcher here
 * (mpirun; srun when a SLURM cluster answers), live. */
static void test_external_launchers_sample(void)
{
    for (int k = 0; k < EXT_NKINDS; k++) {
        const char *missing = ext_missing(k);
        if (missing) {
            ddp_test_skip("%s: %s", ext_name(k), missing);
            continue;
        }
        ext_diff_t d, two;
        ext_diff_run(k, 7, 4, 1, &d);
        CU_ASSERT_EQUAL(d.configs, 4);
        CU_ASSERT(d.ranks > 0);
        if (d.disagreed)
            printf("\n  %s\n", d.first);
        CU_ASSERT_EQUAL(d.disagreed, 0);
        /* two launches at a time: the same configurations, the same figures */
        ext_diff_run(k, 7, 4, 2, &two);
        CU_ASSERT_EQUAL(two.configs, d.configs);
        CU_ASSERT_EQUAL(two.ranks, d.ranks);
        CU_ASSERT_EQUAL(two.refused, d.refused);
        CU_ASSERT_EQUAL(two.disagreed, 0);
    }
}

DDP_SUITE("launch_contract", NULL, NULL,
          {"nccl_async_error_handling_name", test_nccl_async_error_handling_name},
          {"master_addr_as_torch_endpoint", test_master_addr_as_torch_endpoint},
          {"empty_pet_variable_is_a_value", test_empty_pet_variable_is_a_value},
          {"elastic_agent_worker_env", test_elastic_agent_worker_env},
          {"elastic_worker_env_as_torch",
           test_elastic_worker_env_as_torch},
          {"generated_sample", test_generated_sample},
          {"external_launchers_sample", test_external_launchers_sample})
