/* tests/test_cluster.c — the cluster environments against the contracts of
 * shared/reference/lightning-connection-setup.md: detection priority, every
 * getter of every environment, every class of bad value, validation. Each
 * row gets its own empty environment map (never the CI's). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ddp/cluster.h"
#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/log.h"
#include "ddp/sys.h"
#include "test.h"

#define MAXENV 16

/* A sys whose environment holds exactly the "KEY=VALUE" entries of kv. */
static ddp_sys_t *sys_with(const char *const *kv)
{
    ddp_sys_t *sys = ddp_test_sys();
    CU_ASSERT_PTR_NOT_NULL_FATAL(sys);
    for (size_t i = 0; i < MAXENV && kv && kv[i]; i++) {
        char key[128];
        const char *eq = strchr(kv[i], '=');
        CU_ASSERT_PTR_NOT_NULL_FATAL(eq);
        snprintf(key, sizeof key, "%.*s", (int)(eq - kv[i]), kv[i]);
        CU_ASSERT_EQUAL_FATAL(ddp_env_set(ddp_sys_env(sys), key, eq + 1), 0);
    }
    return sys;
}

static ddp_cluster_t *open_or_fail(ddp_sys_t *sys, const char *name)
{
    ddp_cluster_t *c = NULL;
    int rc = ddp_cluster_open(sys, name, &c);
    if (rc != 0)
        fprintf(stderr, "\n  open %s: %s\n", name ? name : "auto",
                ddp_err_message());
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    return c;
}

#define SLURM_OK                                                               \
    "SLURM_NTASKS=8", "SLURM_PROCID=5", "SLURM_LOCALID=1", "SLURM_NODEID=2",   \
        "SLURM_NTASKS_PER_NODE=2", "SLURM_NNODES=4", "SLURM_JOB_ID=1234567",   \
        "SLURM_NODELIST=node[001-004]"
#define TE_OK                                                                  \
    "RANK=3", "GROUP_RANK=1", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2",            \
        "WORLD_SIZE=4"
#define LSF_OK                                                                 \
    "LSB_JOBID=12345", "LSB_DJOB_RANKFILE=/nonexistent/rankfile",              \
        "JSM_NAMESPACE_LOCAL_RANK=1", "JSM_NAMESPACE_SIZE=4",                  \
        "JSM_NAMESPACE_RANK=3"
#define MPI_OK                                                                 \
    "OMPI_COMM_WORLD_SIZE=8", "OMPI_COMM_WORLD_RANK=6",                        \
        "OMPI_COMM_WORLD_LOCAL_RANK=2", "OMPI_COMM_WORLD_LOCAL_SIZE=4"
#define KF_OK                                                                  \
    "MASTER_ADDR=pytorchjob-master-0", "MASTER_PORT=23456", "WORLD_SIZE=4",    \
        "RANK=2"

static void test_registry(void)
{
    static const char *const order[] = {"torchelastic", "slurm",     "lsf",
                                        "mpi",          "lightning", "kubeflow"};
    CU_ASSERT_EQUAL_FATAL(ddp_cluster_count(), 6);
    for (size_t i = 0; i < 6; i++) {
        CU_ASSERT_STRING_EQUAL(ddp_cluster_at(i)->name, order[i]);
        CU_ASSERT_PTR_EQUAL(ddp_cluster_find(order[i]), ddp_cluster_at(i));
    }
    CU_ASSERT_PTR_NULL(ddp_cluster_at(6));
    CU_ASSERT_PTR_NULL(ddp_cluster_find("SLURM"));
    CU_ASSERT_PTR_NULL(ddp_cluster_find(NULL));

    ddp_sys_t *sys = sys_with(NULL);
    ddp_cluster_t *c = (ddp_cluster_t *)1;
    CU_ASSERT_EQUAL(ddp_cluster_open(sys, "pbs", &c), DDP_ENOT_FOUND);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(),
                                  "unknown cluster environment \"pbs\"; "
                                  "expected one of auto, torchelastic, slurm, "
                                  "lsf, mpi, lightning, kubeflow"));
    ddp_sys_free(sys);
}

static void test_detection_priority(void)
{
    static const struct {
        const char *env[MAXENV];
        const char *want;
    } rows[] = {
        {{NULL}, "lightning"},
        {{"SLURM_NTASKS=4"}, "slurm"},
        {{"SLURM_NTASKS=4", "SLURM_JOB_NAME=train"}, "slurm"},
        {{"SLURM_NTASKS=4", "SLURM_JOB_NAME=bash"}, "lightning"},
        {{"SLURM_NTASKS=4", "SLURM_JOB_NAME=interactive"}, "lightning"},
        {{TE_OK}, "torchelastic"},
        {{TE_OK, SLURM_OK}, "torchelastic"},
        /* 3 of the 4 torchelastic variables: not torchelastic. */
        {{"RANK=0", "GROUP_RANK=0", "LOCAL_RANK=0"}, "lightning"},
        {{"RANK=0", "GROUP_RANK=0", "LOCAL_RANK=0", "SLURM_NTASKS=2"},
         "slurm"},
        {{LSF_OK}, "lsf"},
        {{LSF_OK, SLURM_OK}, "slurm"},
        {{"LSB_JOBID=1", "LSB_DJOB_RANKFILE=/x", "JSM_NAMESPACE_SIZE=2"},
         "lightning"},
        {{MPI_OK}, "mpi"},
        {{"OMPI_COMM_WORLD_SIZE=2"}, "lightning"},
        {{MPI_OK, LSF_OK}, "lsf"},
        {{MPI_OK, TE_OK}, "torchelastic"},
        /* Kubeflow's variables are a plain manual launch's too. */
        {{KF_OK}, "lightning"},
        {{"MASTER_ADDR=10.0.0.1", "MASTER_PORT=29500", "NODE_RANK=1"},
         "lightning"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        ddp_sys_t *sys = sys_with(rows[i].env);
        const char *names[] = {NULL, "", "auto"};
        for (size_t k = 0; k < 3; k++) {
            ddp_cluster_t *c = open_or_fail(sys, names[k]);
            CU_ASSERT_STRING_EQUAL(c->ops->name, rows[i].want);
            if (strcmp(c->ops->name, rows[i].want) != 0)
                fprintf(stderr, "\n  row %zu: detected %s, want %s\n", i,
                        c->ops->name, rows[i].want);
            ddp_cluster_close(c);
        }
        ddp_sys_free(sys);
    }
}

/* A name always wins over detection, even when that environment's own
 * variables are absent. */
static void test_override_by_name(void)
{
    static const char *const env[MAXENV] = {TE_OK, SLURM_OK};
    ddp_sys_t *sys = sys_with(env);
    for (size_t i = 0; i < ddp_cluster_count(); i++) {
        const char *name = ddp_cluster_at(i)->name;
        ddp_cluster_t *c = open_or_fail(sys, name);
        CU_ASSERT_STRING_EQUAL(c->ops->name, name);
        CU_ASSERT_PTR_EQUAL(c->sys, sys);
        CU_ASSERT_PTR_EQUAL(c->env, ddp_sys_env(sys));
        ddp_cluster_close(c);
    }
    ddp_sys_free(sys);
}

typedef struct getter_row {
    const char *cluster; /* NULL: detect */
    const char *env[MAXENV];
    const char *name, *addr;
    int port; /* 0: a free port (only checked to be non-zero) */
    int world, global, local, node, external;
} getter_row_t;

static const getter_row_t getter_rows[] = {
    /* lightning */
    {NULL, {NULL}, "lightning", "127.0.0.1", 0, 1, 0, 0, 0, 0},
    {NULL,
     {"MASTER_ADDR=10.0.0.1", "MASTER_PORT=29500", "LOCAL_RANK=2",
      "NODE_RANK=3", "GROUP_RANK=5"},
     "lightning", "10.0.0.1", 29500, 1, 0, 2, 3, 1},
    {NULL, {"GROUP_RANK=5"}, "lightning", "127.0.0.1", 0, 1, 0, 0, 5, 0},
    {NULL, {"LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2"}, "lightning", "127.0.0.1",
     0, 1, 0, 1, 0, 1},
    /* slurm: port = 15000 + last 4 digits of the job id */
    {NULL, {SLURM_OK}, "slurm", "node001", 19567, 8, 5, 1, 2, 1},
    {NULL, {SLURM_OK, "MASTER_ADDR=10.1.1.1", "MASTER_PORT=30000"}, "slurm",
     "10.1.1.1", 30000, 8, 5, 1, 2, 1},
    {NULL,
     {"SLURM_NTASKS=2", "SLURM_PROCID=1", "SLURM_LOCALID=0", "SLURM_NODEID=1",
      "SLURM_JOB_NODELIST=gpu[7,3]-ib", "SLURM_JOB_ID=42"},
     "slurm", "gpu7-ib", 15042, 2, 1, 0, 1, 1},
    {NULL,
     {"SLURM_NTASKS=1", "SLURM_PROCID=0", "SLURM_LOCALID=0", "SLURM_NODEID=0",
      "SLURM_NODELIST=alpha, host[5-9], gamma",
      "SLURM_JOB_NODELIST=ignored"},
     "slurm", "alpha", 12910, 1, 0, 0, 0, 1},
    {NULL,
     {"SLURM_NTASKS=1", "SLURM_PROCID=0", "SLURM_LOCALID=0", "SLURM_NODEID=0",
      "SLURM_NODELIST=n1", "SLURM_JOB_ID=20000"},
     "slurm", "n1", 15000, 1, 0, 0, 0, 1},
    /* interactive: chosen by name; the job id is not used for the port */
    {"slurm",
     {SLURM_OK, "SLURM_JOB_NAME=interactive"}, "slurm", "node001", 12910, 8,
     5, 1, 2, 1},
    /* torchelastic */
    {NULL, {TE_OK, "MASTER_ADDR=te-host", "MASTER_PORT=1234"},
     "torchelastic", "te-host", 1234, 4, 3, 1, 1, 1},
    {NULL, {TE_OK}, "torchelastic", "127.0.0.1", 12910, 4, 3, 1, 1, 1},
    /* integers as Python's int() reads them: blanks around, a sign, _ */
    {NULL,
     {"WORLD_SIZE= 4 ", "RANK=+3", "LOCAL_RANK=1\n", "GROUP_RANK=0_1",
      "LOCAL_WORLD_SIZE=\t2", "MASTER_PORT= 29_500 "},
     "torchelastic", "127.0.0.1", 29500, 4, 3, 1, 1, 1},
    {"torchelastic", {"WORLD_SIZE=2", "RANK=1", "LOCAL_RANK=1"},
     "torchelastic", "127.0.0.1", 12910, 2, 1, 1, 0, 1},
    /* lsf: the rank file is not read by these getters */
    {NULL, {LSF_OK, "MASTER_PORT=4000"}, "lsf", NULL, 4000, 4, 3, 1, -1, 1},
    {NULL, {LSF_OK}, "lsf", NULL, 10345, 4, 3, 1, -1, 1},
    /* mpi: node rank = rank / local size */
    {NULL, {MPI_OK, "MASTER_ADDR=mpi-host", "MASTER_PORT=5555"}, "mpi",
     "mpi-host", 5555, 8, 6, 2, 1, 1},
    {NULL,
     {"OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=2",
      "OMPI_COMM_WORLD_LOCAL_RANK=2", "OMPI_COMM_WORLD_LOCAL_SIZE=4"},
     "mpi", "127.0.0.1", 12910, 4, 2, 2, 0, 1},
    /* kubeflow: by name only; a pod is a node */
    {"kubeflow", {KF_OK}, "kubeflow", "pytorchjob-master-0", 23456, 4, 2, 0,
     2, 1},
};

static void test_getters_table(void)
{
    for (size_t i = 0; i < sizeof getter_rows / sizeof getter_rows[0]; i++) {
        const getter_row_t *r = &getter_rows[i];
        ddp_sys_t *sys = sys_with(r->env);
        ddp_log_level_t saved = ddp_log_level();
        ddp_log_set_level(DDP_LOG_ERROR); /* the defaults' warnings */
        ddp_cluster_t *c = open_or_fail(sys, r->cluster);
        CU_ASSERT_STRING_EQUAL(c->ops->name, r->name);
        char addr[128];
        uint16_t port = 0;
        int v, fails = 0;
        if (r->addr) {
            fails += ddp_cluster_main_address(c, addr, sizeof addr) != 0;
            CU_ASSERT_STRING_EQUAL(addr, r->addr);
            fails += strcmp(addr, r->addr) != 0;
        }
        fails += ddp_cluster_main_port(c, &port) != 0;
        if (r->port)
            CU_ASSERT_EQUAL(port, r->port);
        CU_ASSERT_NOT_EQUAL(port, 0);
        fails += r->port && port != r->port;
        const struct {
            int (*get)(ddp_cluster_t *, int *);
            int want;
        } ints[] = {{ddp_cluster_world_size, r->world},
                    {ddp_cluster_global_rank, r->global},
                    {ddp_cluster_local_rank, r->local},
                    {ddp_cluster_node_rank, r->node}};
        for (size_t k = 0; k < 4; k++) {
            if (ints[k].want < 0)
                continue;
            v = -99;
            CU_ASSERT_EQUAL(ints[k].get(c, &v), 0);
            CU_ASSERT_EQUAL(v, ints[k].want);
            fails += v != ints[k].want;
        }
        CU_ASSERT_EQUAL(ddp_cluster_creates_processes_externally(c),
                        r->external);
        if (fails)
            fprintf(stderr, "\n  getter row %zu (%s) failed: %s\n", i, r->name,
                    ddp_err_message());
        ddp_log_set_level(saved);
        ddp_cluster_close(c);
        ddp_sys_free(sys);
    }
}

enum { G_ADDR, G_PORT, G_WORLD, G_GLOBAL, G_LOCAL, G_NODE };

static int call_getter(ddp_cluster_t *c, int g)
{
    char addr[64];
    uint16_t port;
    int v;
    switch (g) {
    case G_ADDR: return ddp_cluster_main_address(c, addr, sizeof addr);
    case G_PORT: return ddp_cluster_main_port(c, &port);
    case G_WORLD: return ddp_cluster_world_size(c, &v);
    case G_GLOBAL: return ddp_cluster_global_rank(c, &v);
    case G_LOCAL: return ddp_cluster_local_rank(c, &v);
    default: return ddp_cluster_node_rank(c, &v);
    }
}

typedef struct bad_row {
    const char *cluster;
    const char *env[MAXENV];
    int getter, code;
    const char *what, *expected; /* both must appear in the message */
} bad_row_t;

static const bad_row_t bad_rows[] = {
    /* non-numeric, out of range, missing ranks */
    {NULL, {SLURM_OK, "SLURM_PROCID=abc"}, G_GLOBAL, DDP_ECONFIG,
     "SLURM_PROCID=\"abc\" is not a valid rank",
     "expected an integer 0..7 (SLURM_NTASKS=8)"},
    {NULL, {SLURM_OK, "SLURM_PROCID=8"}, G_GLOBAL, DDP_ECONFIG,
     "SLURM_PROCID=\"8\" is not a valid rank", "0..7"},
    {NULL, {SLURM_OK, "SLURM_PROCID=-1"}, G_GLOBAL, DDP_ECONFIG,
     "SLURM_PROCID=\"-1\"", "0..7"},
    {NULL, {SLURM_OK, "SLURM_PROCID="}, G_GLOBAL, DDP_ECONFIG,
     "SLURM_PROCID=\"\"", "0..7"},
    {NULL, {SLURM_OK, "SLURM_PROCID=3x"}, G_GLOBAL, DDP_ECONFIG,
     "SLURM_PROCID=\"3x\"", "0..7"},
    {NULL, {SLURM_OK, "SLURM_PROCID=3 x"}, G_GLOBAL, DDP_ECONFIG,
     "SLURM_PROCID=\"3 x\"", "0..7"},
    {NULL, {SLURM_OK, "SLURM_PROCID=3__0"}, G_GLOBAL, DDP_ECONFIG,
     "SLURM_PROCID=\"3__0\"", "0..7"},
    {NULL, {SLURM_OK, "SLURM_PROCID=+-3"}, G_GLOBAL, DDP_ECONFIG,
     "SLURM_PROCID=\"+-3\"", "0..7"},
    {NULL, {SLURM_OK, "SLURM_LOCALID=2"}, G_LOCAL, DDP_ECONFIG,
     "SLURM_LOCALID=\"2\" is not a valid local rank",
     "0..1 (SLURM_NTASKS_PER_NODE=2)"},
    {NULL, {SLURM_OK, "SLURM_NODEID=4"}, G_NODE, DDP_ECONFIG,
     "SLURM_NODEID=\"4\" is not a valid node rank", "0..3 (SLURM_NNODES=4)"},
    {"slurm", {"SLURM_PROCID=0"}, G_NODE, DDP_ECONFIG,
     "SLURM_NODEID is not set", "expected the node rank as an integer >= 0"},
    {NULL, {"SLURM_NTASKS=0"}, G_WORLD, DDP_ECONFIG,
     "SLURM_NTASKS=\"0\" is not a valid number of tasks",
     "expected an integer >= 1"},
    {NULL, {"SLURM_NTASKS=four"}, G_WORLD, DDP_ECONFIG,
     "SLURM_NTASKS=\"four\"", ">= 1"},
    {NULL, {"SLURM_NTASKS=99999999999"}, G_WORLD, DDP_ECONFIG,
     "SLURM_NTASKS=\"99999999999\"", ">= 1"},
    /* ports */
    /* 0 is torch's ephemeral port (a world of 1: the plugin checks) */
    {NULL, {SLURM_OK, "MASTER_PORT=0"}, G_PORT, 0, NULL, NULL},
    {NULL, {TE_OK, "MASTER_PORT=0"}, G_PORT, 0, NULL, NULL},
    {NULL, {SLURM_OK, "MASTER_PORT=65536"}, G_PORT, DDP_ECONFIG,
     "MASTER_PORT=\"65536\" is not a valid port", "expected an integer 0..65535"},
    {NULL, {"MASTER_PORT=http"}, G_PORT, DDP_ECONFIG, "MASTER_PORT=\"http\"",
     "0..65535"},
    {NULL, {TE_OK, "MASTER_PORT=-5"}, G_PORT, DDP_ECONFIG,
     "MASTER_PORT=\"-5\"", "0..65535"},
    {NULL, {SLURM_OK, "SLURM_JOB_ID=abc"}, G_PORT, DDP_ECONFIG,
     "SLURM_JOB_ID=\"abc\" is not a valid job id", "expected an integer >= 0"},
    {NULL, {LSF_OK, "LSB_JOBID=x1"}, G_PORT, DDP_ECONFIG,
     "LSB_JOBID=\"x1\" is not a valid job id",
     "Make sure you run your executable with jsrun"},
    /* node lists and addresses */
    {NULL, {SLURM_OK, "SLURM_NODELIST=node[1-"}, G_ADDR, DDP_ECONFIG,
     "SLURM_NODELIST: invalid hostlist \"node[1-\"",
     "unbalanced '[' at position 5"},
    {NULL, {SLURM_OK, "SLURM_NODELIST="}, G_ADDR, DDP_ECONFIG,
     "SLURM_NODELIST: invalid hostlist \"\"", "empty expression"},
    {NULL, {SLURM_OK, "SLURM_NODELIST=n[5-1]"}, G_ADDR, DDP_ECONFIG,
     "reversed range", "expected e.g. node[1-4,7]"},
    {NULL, {"SLURM_NTASKS=1"}, G_ADDR, DDP_ECONFIG,
     "SLURM_NODELIST (or SLURM_JOB_NODELIST) is set",
     "expected a SLURM hostlist"},
    {NULL, {"SLURM_NTASKS=1", "SLURM_JOB_NODELIST=a,,b"}, G_ADDR, DDP_ECONFIG,
     "SLURM_JOB_NODELIST: invalid hostlist", "empty host name"},
    {NULL, {"MASTER_ADDR="}, G_ADDR, DDP_ECONFIG, "MASTER_ADDR is set but empty",
     "expected the host name or IP address"},
    {NULL, {SLURM_OK, "MASTER_ADDR="}, G_ADDR, DDP_ECONFIG,
     "MASTER_ADDR is set but empty", "expected the host name"},
    /* lightning's optional variables */
    {NULL, {"LOCAL_RANK=x"}, G_LOCAL, DDP_ECONFIG,
     "LOCAL_RANK=\"x\" is not a valid local rank", "expected an integer >= 0"},
    {NULL, {"LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2"}, G_LOCAL, DDP_ECONFIG,
     "LOCAL_RANK=\"2\"", "0..1 (LOCAL_WORLD_SIZE=2)"},
    {NULL, {"NODE_RANK=-2", "GROUP_RANK=1"}, G_NODE, DDP_ECONFIG,
     "NODE_RANK=\"-2\" is not a valid node rank", ">= 0"},
    {NULL, {"GROUP_RANK=one"}, G_NODE, DDP_ECONFIG, "GROUP_RANK=\"one\"",
     ">= 0"},
    /* torchelastic */
    {"torchelastic", {"RANK=0"}, G_WORLD, DDP_ECONFIG,
     "WORLD_SIZE is not set", "expected the world size as an integer >= 1"},
    {NULL, {TE_OK, "RANK=4"}, G_GLOBAL, DDP_ECONFIG, "RANK=\"4\"",
     "0..3 (WORLD_SIZE=4)"},
    {NULL, {TE_OK, "LOCAL_RANK=2"}, G_LOCAL, DDP_ECONFIG, "LOCAL_RANK=\"2\"",
     "0..1 (LOCAL_WORLD_SIZE=2)"},
    {NULL, {TE_OK, "GROUP_RANK=z"}, G_NODE, DDP_ECONFIG, "GROUP_RANK=\"z\"",
     "expected an integer 0..3 (WORLD_SIZE=4)"},
    /* lsf: missing JSM variables end with the jsrun advice */
    {"lsf", {"LSB_JOBID=1"}, G_WORLD, DDP_ECONFIG,
     "JSM_NAMESPACE_SIZE is not set",
     "Make sure you run your executable with jsrun"},
    {"lsf", {"JSM_NAMESPACE_SIZE=4"}, G_GLOBAL, DDP_ECONFIG,
     "JSM_NAMESPACE_RANK is not set",
     "(JSM_NAMESPACE_SIZE=4). Make sure you run your executable with jsrun"},
    {NULL, {LSF_OK, "JSM_NAMESPACE_LOCAL_RANK=4"}, G_LOCAL, DDP_ECONFIG,
     "JSM_NAMESPACE_LOCAL_RANK=\"4\"", "0..3"},
    {"lsf", {"LSB_JOBID=1"}, G_PORT, DDP_OK, "", ""},
    {"lsf", {NULL}, G_PORT, DDP_ECONFIG, "LSB_JOBID is not set", "jsrun"},
    {NULL, {LSF_OK}, G_ADDR, -ENOENT, "LSB_DJOB_RANKFILE",
     "/nonexistent/rankfile"},
    {"lsf", {"LSB_DJOB_RANKFILE="}, G_ADDR, DDP_ECONFIG,
     "LSB_DJOB_RANKFILE is empty", "jsrun"},
    /* rank files are read bounded and only when regular */
    {NULL, {LSF_OK, "LSB_DJOB_RANKFILE=/dev/zero"}, G_ADDR, DDP_EUNSUPPORTED,
     "LSB_DJOB_RANKFILE=\"/dev/zero\"", "it is a character device"},
    {NULL, {LSF_OK, "LSB_DJOB_RANKFILE=/"}, G_NODE, -EISDIR,
     "LSB_DJOB_RANKFILE=\"/\"", "it is a directory"},
    /* mpi */
    {NULL, {MPI_OK, "OMPI_COMM_WORLD_RANK=9"}, G_GLOBAL, DDP_ECONFIG,
     "OMPI_COMM_WORLD_RANK=\"9\"", "0..7 (OMPI_COMM_WORLD_SIZE=8)"},
    {NULL, {"OMPI_COMM_WORLD_SIZE=8", "OMPI_COMM_WORLD_RANK=1"}, G_LOCAL,
     DDP_ECONFIG, "OMPI_COMM_WORLD_LOCAL_RANK is not set", "0..7"},
    {NULL, {"OMPI_COMM_WORLD_SIZE=8", "OMPI_COMM_WORLD_RANK=1",
            "OMPI_COMM_WORLD_LOCAL_RANK=1"},
     G_NODE, DDP_ECONFIG, "OMPI_COMM_WORLD_LOCAL_SIZE is not set", ">= 1"},
    /* round-robin placement (--map-by node): rank 1 is local rank 0 */
    {NULL, {"OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=1",
            "OMPI_COMM_WORLD_LOCAL_RANK=0", "OMPI_COMM_WORLD_LOCAL_SIZE=2"},
     G_NODE, DDP_ECONFIG, "cannot derive the node rank", "block placement"},
    {NULL, {"OMPI_COMM_WORLD_SIZE=5", "OMPI_COMM_WORLD_RANK=4",
            "OMPI_COMM_WORLD_LOCAL_RANK=0", "OMPI_COMM_WORLD_LOCAL_SIZE=2"},
     G_NODE, DDP_ECONFIG, "OMPI_COMM_WORLD_SIZE=5", "equal-sized nodes"},
    {NULL, {MPI_OK}, G_ADDR, DDP_ECONFIG,
     "MASTER_ADDR is not set and the 8 ranks span several nodes",
     "expected MASTER_ADDR to name rank 0's host"},
    /* kubeflow: everything required */
    {"kubeflow", {"MASTER_ADDR=m", "WORLD_SIZE=2", "RANK=0"}, G_PORT,
     DDP_ECONFIG, "MASTER_PORT is not set", "Kubeflow PyTorchJob operator"},
    {"kubeflow", {"MASTER_PORT=1"}, G_ADDR, DDP_ECONFIG,
     "MASTER_ADDR is not set", "Kubeflow"},
    {"kubeflow", {KF_OK, "RANK=4"}, G_GLOBAL, DDP_ECONFIG, "RANK=\"4\"",
     "0..3 (WORLD_SIZE=4)"},
    {"kubeflow", {KF_OK, "RANK=4"}, G_NODE, DDP_ECONFIG, "RANK=\"4\"",
     "0..3"},
    {"kubeflow", {"RANK=1"}, G_WORLD, DDP_ECONFIG, "WORLD_SIZE is not set",
     ">= 1"},
};

static void test_bad_values_table(void)
{
    for (size_t i = 0; i < sizeof bad_rows / sizeof bad_rows[0]; i++) {
        const bad_row_t *r = &bad_rows[i];
        ddp_sys_t *sys = sys_with(r->env);
        ddp_cluster_t *c = open_or_fail(sys, r->cluster);
        int rc = call_getter(c, r->getter);
        CU_ASSERT_EQUAL(rc, r->code);
        const char *m = ddp_err_message();
        if (r->code != 0) {
            CU_ASSERT_PTR_NOT_NULL(strstr(m, r->what));
            CU_ASSERT_PTR_NOT_NULL(strstr(m, r->expected));
        }
        if (rc != r->code ||
            (r->code && (!strstr(m, r->what) || !strstr(m, r->expected))))
            fprintf(stderr, "\n  bad row %zu (%s): rc %d, \"%s\"\n", i,
                    c->ops->name, rc, m);
        ddp_cluster_close(c);
        ddp_sys_free(sys);
    }
}

typedef struct validate_row {
    const char *cluster;
    const char *env[MAXENV];
    int devices, nodes, code;
    const char *what, *hint;
} validate_row_t;

static const validate_row_t validate_rows[] = {
    {NULL, {SLURM_OK}, 2, 4, 0, NULL, NULL},
    {NULL, {SLURM_OK}, 0, 0, 0, NULL, NULL},
    /* #4389: --ntasks without --ntasks-per-node */
    {NULL, {"SLURM_NTASKS=4"}, 0, 0, DDP_ECONFIG,
     "SLURM_NTASKS=4 is set but SLURM_NTASKS_PER_NODE is not",
     "hint: use --ntasks-per-node=4"},
    {NULL, {"SLURM_NTASKS=1"}, 1, 1, 0, NULL, NULL},
    {NULL, {SLURM_OK}, 4, 4, DDP_ECONFIG,
     "devices=4 was requested but SLURM runs 2 tasks per node",
     "hint: set devices=2, or --ntasks-per-node=4"},
    {NULL, {SLURM_OK}, 2, 1, DDP_ECONFIG,
     "num_nodes=1 was requested but the SLURM job has 4 nodes",
     "hint: set num_nodes=4, or --nodes=1"},
    {NULL, {SLURM_OK, "SLURM_NTASKS_PER_NODE=x"}, 2, 4, DDP_ECONFIG,
     "SLURM_NTASKS_PER_NODE=\"x\"", ">= 1"},
    /* interactive mode skips the comparison with the request */
    {"slurm", {SLURM_OK, "SLURM_JOB_NAME=bash"}, 4, 1, 0, NULL, NULL},
    {"slurm", {"SLURM_NTASKS=4", "SLURM_JOB_NAME=interactive"}, 0, 0,
     DDP_ECONFIG, "SLURM_NTASKS_PER_NODE is not", "--ntasks-per-node=4"},
    /* torchelastic: devices * num_nodes == WORLD_SIZE */
    {NULL, {TE_OK}, 2, 2, 0, NULL, NULL},
    {NULL, {TE_OK}, 4, 1, 0, NULL, NULL},
    {NULL, {TE_OK}, 2, 3, DDP_ECONFIG,
     "devices=2 and num_nodes=3 were requested, but their product 6 does "
     "not match the world size WORLD_SIZE=4",
     "hint: run torchrun with --nproc-per-node=2 --nnodes=3"},
    {NULL, {TE_OK}, 3, 0, 0, NULL, NULL},
    {"torchelastic", {"RANK=0"}, 1, 1, DDP_ECONFIG, "WORLD_SIZE is not set",
     ">= 1"},
    /* #20391: the world is SLURM_NTASKS, the local ranks count against
     * SLURM_NTASKS_PER_NODE: the product must match, whatever was asked */
    {NULL, {"SLURM_NTASKS=1", "SLURM_NTASKS_PER_NODE=2", "SLURM_NNODES=1"}, 2,
     1, DDP_ECONFIG,
     "SLURM_NTASKS=1 does not equal SLURM_NTASKS_PER_NODE=2 x SLURM_NNODES=1",
     "hint: drop --ntasks"},
    {NULL, {SLURM_OK, "SLURM_NTASKS=6"}, 0, 0, DDP_ECONFIG,
     "the world would be 6 rank(s) instead of 8", "--ntasks=8"},
    {NULL, {"SLURM_NTASKS=2", "SLURM_NTASKS_PER_NODE=2", "SLURM_NNODES=1"}, 2,
     1, 0, NULL, NULL},
    {NULL, {"SLURM_NTASKS=4", "SLURM_NTASKS_PER_NODE=2"}, 0, 0, 0, NULL, NULL},
    {NULL, {SLURM_OK, "SLURM_NNODES=zero"}, 0, 0, DDP_ECONFIG,
     "SLURM_NNODES=\"zero\"", ">= 1"},
    /* an interactive shell's tasks are not the Trainer's */
    {"slurm", {SLURM_OK, "SLURM_NTASKS=6", "SLURM_JOB_NAME=bash"}, 0, 0, 0,
     NULL, NULL},
    /* #8998: mpirun's ranks per node against the devices */
    {NULL, {MPI_OK}, 4, 2, 0, NULL, NULL},
    {NULL, {MPI_OK}, 0, 0, 0, NULL, NULL},
    {NULL, {"OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=1",
            "OMPI_COMM_WORLD_LOCAL_SIZE=1", "OMPI_COMM_WORLD_LOCAL_RANK=0"},
     4, 2, DDP_ECONFIG,
     "OMPI_COMM_WORLD_LOCAL_SIZE=1: mpirun started 1 rank(s) on this node but "
     "devices=4 was requested, so the world would be OMPI_COMM_WORLD_SIZE=2 "
     "rank(s) instead of 8",
     "hint: start 4 ranks per node (mpirun -npernode 4"},
    {NULL, {MPI_OK}, 8, 1, DDP_ECONFIG, "OMPI_COMM_WORLD_LOCAL_SIZE=4",
     "or set devices=4"},
    {"mpi", {"OMPI_COMM_WORLD_SIZE=8", "OMPI_COMM_WORLD_LOCAL_SIZE=0"}, 4, 2,
     DDP_ECONFIG, "OMPI_COMM_WORLD_LOCAL_SIZE=\"0\"", ">= 1"},
    /* a LOCAL_RANK that no launcher set: a baked-in LOCAL_RANK=0 */
    {NULL, {"LOCAL_RANK=0"}, 2, 1, DDP_ECONFIG,
     "LOCAL_RANK=\"0\" is set but no launcher's world size is",
     "hint: unset LOCAL_RANK"},
    {NULL, {"LOCAL_RANK=1", "WORLD_SIZE=2"}, 2, 1, 0, NULL, NULL},
    {NULL, {"LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2"}, 2, 1, 0, NULL, NULL},
    {"lightning", {"LOCAL_RANK=0", "SLURM_NTASKS=2"}, 2, 1, 0, NULL, NULL},
    {"lightning", {"LOCAL_RANK=0", "OMPI_COMM_WORLD_SIZE=2"}, 2, 1, 0, NULL,
     NULL},
    {"lightning", {"LOCAL_RANK=0", "JSM_NAMESPACE_SIZE=2"}, 2, 1, 0, NULL,
     NULL},
    /* the others accept any request; negative counts are refused */
    {NULL, {NULL}, 8, 8, 0, NULL, NULL},
    {NULL, {LSF_OK}, 8, 8, 0, NULL, NULL},
    {"kubeflow", {KF_OK}, 8, 8, 0, NULL, NULL},
    {NULL, {NULL}, -1, 1, DDP_ECONFIG, "devices=-1, num_nodes=1",
     "expected counts >= 1"},
};

static void test_validate_table(void)
{
    for (size_t i = 0; i < sizeof validate_rows / sizeof validate_rows[0];
         i++) {
        const validate_row_t *r = &validate_rows[i];
        ddp_sys_t *sys = sys_with(r->env);
        ddp_cluster_t *c = open_or_fail(sys, r->cluster);
        int rc = ddp_cluster_validate(c, r->devices, r->nodes);
        CU_ASSERT_EQUAL(rc, r->code);
        const char *m = ddp_err_message();
        if (r->code) {
            CU_ASSERT_PTR_NOT_NULL(strstr(m, r->what));
            CU_ASSERT_PTR_NOT_NULL(strstr(m, r->hint));
        }
        if (rc != r->code ||
            (r->code && (!strstr(m, r->what) || !strstr(m, r->hint))))
            fprintf(stderr, "\n  validate row %zu (%s): rc %d, \"%s\"\n", i,
                    c->ops->name, rc, m);
        ddp_cluster_close(c);
        ddp_sys_free(sys);
    }
}

/* Issue 41: every launch check says the variable, its value (or that it
 * is not set) and the fix. The rows above pin the variable and value in
 * the message; here each configuration error of both tables must also
 * carry a hint, the fix. */
static void test_checks_give_the_fix(void)
{
    for (size_t i = 0; i < sizeof bad_rows / sizeof bad_rows[0]; i++) {
        const bad_row_t *r = &bad_rows[i];
        if (r->code != DDP_ECONFIG)
            continue;
        ddp_sys_t *sys = sys_with(r->env);
        ddp_cluster_t *c = open_or_fail(sys, r->cluster);
        CU_ASSERT_EQUAL(call_getter(c, r->getter), DDP_ECONFIG);
        if (!ddp_err_ctx()->hint[0]) {
            fprintf(stderr, "\n  bad row %zu (%s): no fix: \"%s\"\n", i, c->ops->name,
                    ddp_err_message());
            CU_FAIL("a launch check without a fix (hint)");
        }
        ddp_cluster_close(c);
        ddp_sys_free(sys);
    }
    for (size_t i = 0; i < sizeof validate_rows / sizeof validate_rows[0]; i++) {
        const validate_row_t *r = &validate_rows[i];
        if (r->code != DDP_ECONFIG)
            continue;
        ddp_sys_t *sys = sys_with(r->env);
        ddp_cluster_t *c = open_or_fail(sys, r->cluster);
        CU_ASSERT_EQUAL(ddp_cluster_validate(c, r->devices, r->nodes), DDP_ECONFIG);
        if (!ddp_err_ctx()->hint[0]) {
            fprintf(stderr, "\n  validate row %zu (%s): no fix: \"%s\"\n", i,
                    c->ops->name, ddp_err_message());
            CU_FAIL("a validate check without a fix (hint)");
        }
        ddp_cluster_close(c);
        ddp_sys_free(sys);
    }
}

/* Master-address sanity (ddp_cluster_check_master) on the POSIX sys:
 * numeric addresses only, so no row depends on this machine's resolver. */
typedef struct master_row {
    const char *env[MAXENV];
    const char *addr;
    int rank, nodes, code;
    const char *what, *hint;
} master_row_t;

static const master_row_t master_rows[] = {
    /* one node: loopback is where rank 0 runs */
    {{NULL}, "127.0.0.1", 0, 1, 0, NULL, NULL},
    {{"MASTER_ADDR=127.0.1.1"}, "127.0.1.1", 0, 1, 0, NULL, NULL},
    {{NULL}, "0.0.0.0", 0, 1, 0, NULL, NULL},
    /* several nodes and a loopback master: every rank says so */
    {{NULL}, "127.0.0.1", 0, 2, DDP_ECONFIG,
     "the main address (MASTER_ADDR is not set; the launcher's default) "
     "\"127.0.0.1\" resolves to 127.0.0.1",
     "--rdzv-endpoint=HOST:PORT"},
    {{"MASTER_ADDR=127.0.0.1"}, "127.0.0.1", 3, 4, DDP_ECONFIG,
     "MASTER_ADDR \"127.0.0.1\" resolves to 127.0.0.1, an address that only "
     "reaches the host it is used on, but the world spans 4 nodes",
     "export MASTER_ADDR="},
    {{"MASTER_ADDR=::1"}, "::1", 1, 2, DDP_ECONFIG, "spans 2 nodes",
     "export MASTER_ADDR="},
    /* ... unless the nodes share this machine's loopback (real runs) */
    {{"DDPSIM_HOSTS=node0=127.0.0.1,node1=127.0.0.2"}, "127.0.0.1", 1, 2, 0,
     NULL, NULL},
    {{"DDPSIM_HOSTS=node0=127.0.0.1,node1=127.0.0.2"}, "node0", 0, 2, 0, NULL,
     NULL},
    /* rank 0 told to serve at an address that is not its own */
    {{"MASTER_ADDR=192.0.2.7"}, "192.0.2.7", 0, 1, DDP_ECONFIG,
     "MASTER_ADDR \"192.0.2.7\" resolves to 192.0.2.7, not an address of ",
     "set MASTER_ADDR to rank 0's host"},
    {{"DDPSIM_HOSTS=cpn583=192.0.2.8"}, "cpn583", 0, 2, DDP_ECONFIG,
     "\"cpn583\" resolves to 192.0.2.8, not an address of",
     "or start rank 0 on cpn583"},
    /* other ranks cannot know rank 0's addresses: nothing to say */
    {{"MASTER_ADDR=192.0.2.7"}, "192.0.2.7", 1, 1, 0, NULL, NULL},
    {{"MASTER_ADDR=192.0.2.7"}, "192.0.2.7", 5, 2, 0, NULL, NULL},
};

static void test_master_check_table(void)
{
    for (size_t i = 0; i < sizeof master_rows / sizeof master_rows[0]; i++) {
        const master_row_t *r = &master_rows[i];
        ddp_sys_t *sys = sys_with(r->env);
        ddp_cluster_t *c = open_or_fail(sys, "lightning");
        int rc = ddp_cluster_check_master(c, r->addr, r->rank, r->nodes);
        const char *m = ddp_err_message();
        int ok = rc == r->code &&
                 (!r->code || (strstr(m, r->what) && strstr(m, r->hint)));
        if (!ok)
            fprintf(stderr, "\n  master row %zu (%s): rc %d, \"%s\"\n", i,
                    r->addr, rc, m);
        CU_ASSERT_TRUE(ok);
        ddp_cluster_close(c);
        ddp_sys_free(sys);
    }
}

/* Rank 0 on one of its own (non-loopback) addresses passes; the seam lists
 * this host's addresses, loopback among them. */
static void test_master_check_own_address(void)
{
    ddp_sys_t *sys = sys_with(NULL);
    ddp_addr_t mine[16];
    int n = ddp_sys_local_addrs(sys, mine, 16), loop = 0;
    CU_ASSERT_TRUE_FATAL(n >= 1);
    ddp_cluster_t *c = open_or_fail(sys, "lightning");
    for (int i = 0; i < n; i++) {
        char h[DDP_ADDR_STRLEN];
        ddp_addr_format_host(&mine[i], h, sizeof h);
        loop |= ddp_addr_is_loopback(&mine[i]);
        if (mine[i].family == 6 && mine[i].ip[0] == 0xfe)
            continue; /* link-local: not an address a master is named by */
        int rc = ddp_cluster_check_master(c, h, 0, 1);
        if (rc)
            fprintf(stderr, "\n  own address %s: %s\n", h, ddp_err_message());
        CU_ASSERT_EQUAL(rc, 0);
    }
    CU_ASSERT_TRUE(loop);
    ddp_cluster_close(c);
    ddp_sys_free(sys);
}

/* A port Lightning picked (MASTER_PORT unset) is this node's own: right
 * for one node, a config error naming the variable for several (#2578);
 * an exported MASTER_PORT is never questioned. */
static void test_picked_port_check(void)
{
    static const char *const set[] = {"MASTER_PORT=29517", NULL};
    for (int exported = 0; exported < 2; exported++) {
        ddp_sys_t *sys = sys_with(exported ? set : NULL);
        ddp_cluster_t *c = open_or_fail(sys, "lightning");
        uint16_t port = 0;
        CU_ASSERT_EQUAL_FATAL(ddp_cluster_main_port(c, &port), 0);
        CU_ASSERT_EQUAL(ddp_cluster_check_port(c, 1), 0);
        int rc = ddp_cluster_check_port(c, 3);
        CU_ASSERT_EQUAL(rc, exported ? 0 : DDP_ECONFIG);
        if (!exported) {
            const char *m = ddp_err_message();
            char picked[16];
            snprintf(picked, sizeof picked, "(%u)", (unsigned)port);
            CU_ASSERT_PTR_NOT_NULL(strstr(m, "MASTER_PORT is not set"));
            CU_ASSERT_PTR_NOT_NULL(strstr(m, picked));
            CU_ASSERT_PTR_NOT_NULL(strstr(m, "spans 3 nodes"));
            CU_ASSERT_PTR_NOT_NULL(strstr(m, "export MASTER_PORT="));
        }
        ddp_cluster_close(c);
        ddp_sys_free(sys);
    }
    CU_ASSERT_EQUAL(ddp_cluster_check_port(NULL, 2), -EINVAL);
}

/* Lightning picks a free port once and keeps it: every local rank it
 * launches must be handed the same one. */
static void test_lightning_port_cache_and_setters(void)
{
    ddp_sys_t *sys = sys_with(NULL);
    ddp_cluster_t *c = open_or_fail(sys, "lightning");
    uint16_t p1 = 0, p2 = 0;
    CU_ASSERT_EQUAL(ddp_cluster_main_port(c, &p1), 0);
    CU_ASSERT_NOT_EQUAL(p1, 0);
    ddp_env_set(ddp_sys_env(sys), "MASTER_PORT", "1");
    CU_ASSERT_EQUAL(ddp_cluster_main_port(c, &p2), 0);
    CU_ASSERT_EQUAL(p1, p2);
    CU_ASSERT(c->port_cached);

    int v = -1;
    ddp_cluster_set_world_size(c, 4);
    ddp_cluster_set_global_rank(c, 3);
    CU_ASSERT_EQUAL(ddp_cluster_world_size(c, &v), 0);
    CU_ASSERT_EQUAL(v, 4);
    CU_ASSERT_EQUAL(ddp_cluster_global_rank(c, &v), 0);
    CU_ASSERT_EQUAL(v, 3);
    ddp_cluster_close(c);

    /* A fresh instance reads MASTER_PORT. */
    c = open_or_fail(sys, "lightning");
    CU_ASSERT_EQUAL(ddp_cluster_main_port(c, &p2), 0);
    CU_ASSERT_EQUAL(p2, 1);
    ddp_cluster_close(c);
    ddp_sys_free(sys);

    /* The other environments take the launcher's values. */
    static const char *const env[MAXENV] = {SLURM_OK};
    sys = sys_with(env);
    c = open_or_fail(sys, NULL);
    ddp_cluster_set_world_size(c, 2);
    ddp_cluster_set_global_rank(c, 0);
    CU_ASSERT_EQUAL(ddp_cluster_world_size(c, &v), 0);
    CU_ASSERT_EQUAL(v, 8);
    CU_ASSERT_EQUAL(ddp_cluster_global_rank(c, &v), 0);
    CU_ASSERT_EQUAL(v, 5);
    ddp_cluster_close(c);
    ddp_sys_free(sys);

    /* Argument checks. */
    CU_ASSERT_EQUAL(ddp_cluster_open(NULL, NULL, &c), -EINVAL);
    CU_ASSERT_EQUAL(ddp_cluster_world_size(NULL, &v), -EINVAL);
    CU_ASSERT_EQUAL(ddp_cluster_creates_processes_externally(NULL), 0);
    ddp_cluster_close(NULL);
}

static void test_address_buffer(void)
{
    static const char *const env[MAXENV] = {
        "MASTER_ADDR=a-rather-long-host-name.example.org"};
    ddp_sys_t *sys = sys_with(env);
    ddp_cluster_t *c = open_or_fail(sys, NULL);
    char small[8];
    CU_ASSERT_EQUAL(ddp_cluster_main_address(c, small, sizeof small),
                    DDP_ELIMIT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "MASTER_ADDR"));
    CU_ASSERT_EQUAL(ddp_cluster_main_address(c, small, 0), -EINVAL);
    ddp_cluster_close(c);
    ddp_sys_free(sys);
}

static char g_warnings[2048];

static void capture_warn(void *arg, ddp_log_level_t level, const char *line)
{
    (void)arg;
    if (level == DDP_LOG_WARN) {
        strncat(g_warnings, line, sizeof g_warnings - strlen(g_warnings) - 2);
        strcat(g_warnings, "\n");
    }
}

static void test_torchelastic_default_warnings(void)
{
    static const char *const env[MAXENV] = {TE_OK};
    ddp_sys_t *sys = sys_with(env);
    ddp_cluster_t *c = open_or_fail(sys, NULL);
    g_warnings[0] = '\0';
    ddp_log_level_t saved = ddp_log_level();
    ddp_log_set_level(DDP_LOG_WARN);
    ddp_log_set_sink(capture_warn, NULL);
    char addr[64];
    uint16_t port;
    CU_ASSERT_EQUAL(ddp_cluster_main_address(c, addr, sizeof addr), 0);
    CU_ASSERT_EQUAL(ddp_cluster_main_port(c, &port), 0);
    ddp_log_set_sink(NULL, NULL);
    ddp_log_set_level(saved);
    CU_ASSERT_STRING_EQUAL(addr, "127.0.0.1");
    CU_ASSERT_EQUAL(port, 12910);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_warnings, "MASTER_ADDR is not set; using "
                                              "127.0.0.1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(g_warnings, "MASTER_PORT is not set; using "
                                              "12910"));
    ddp_cluster_close(c);
    ddp_sys_free(sys);

    /* Set values: no warning. */
    static const char *const set[MAXENV] = {TE_OK, "MASTER_ADDR=h",
                                            "MASTER_PORT=7"};
    sys = sys_with(set);
    c = open_or_fail(sys, NULL);
    g_warnings[0] = '\0';
    ddp_log_set_level(DDP_LOG_WARN);
    ddp_log_set_sink(capture_warn, NULL);
    CU_ASSERT_EQUAL(ddp_cluster_main_address(c, addr, sizeof addr), 0);
    CU_ASSERT_EQUAL(ddp_cluster_main_port(c, &port), 0);
    ddp_log_set_sink(NULL, NULL);
    ddp_log_set_level(saved);
    CU_ASSERT_STRING_EQUAL(g_warnings, "");
    CU_ASSERT_EQUAL(port, 7);
    ddp_cluster_close(c);
    ddp_sys_free(sys);
}

/* SLURM's main address for Lightning's node-list table. */
static void test_slurm_root_node_table(void)
{
    static const struct {
        const char *list, *root;
    } rows[] = {
        {"1.2.3.[100-110]", "1.2.3.100"}, {"host[22]", "host22"},
        {"host[1,5-9]", "host1"},         {"host[5-9,1]", "host5"},
        {"alpha, host[5-9], gamma", "alpha"},
        {"alpha[3,1], beta", "alpha3"},   {"node[001-004,007]", "node001"},
        {"r[2-3]n[7-8]", "r2n7"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        ddp_sys_t *sys = sys_with(NULL);
        ddp_env_set(ddp_sys_env(sys), "SLURM_NTASKS", "1");
        ddp_env_set(ddp_sys_env(sys), "SLURM_NODELIST", rows[i].list);
        ddp_cluster_t *c = open_or_fail(sys, NULL);
        char addr[64] = "";
        CU_ASSERT_STRING_EQUAL(c->ops->name, "slurm");
        CU_ASSERT_EQUAL(ddp_cluster_main_address(c, addr, sizeof addr), 0);
        CU_ASSERT_STRING_EQUAL(addr, rows[i].root);
        ddp_cluster_close(c);
        ddp_sys_free(sys);
    }
}

static void test_slurm_port_rule(void)
{
    static const struct {
        const char *job_id;
        int port;
    } rows[] = {
        {"1", 15001},     {"9999", 24999},    {"10000", 15000},
        {"1234567", 19567}, {"4294967295", 22295}, {NULL, 12910},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        ddp_sys_t *sys = sys_with(NULL);
        ddp_env_set(ddp_sys_env(sys), "SLURM_NTASKS", "1");
        if (rows[i].job_id)
            ddp_env_set(ddp_sys_env(sys), "SLURM_JOB_ID", rows[i].job_id);
        ddp_cluster_t *c = open_or_fail(sys, NULL);
        uint16_t port = 0;
        CU_ASSERT_EQUAL(ddp_cluster_main_port(c, &port), 0);
        CU_ASSERT_EQUAL(port, rows[i].port);
        ddp_cluster_close(c);
        ddp_sys_free(sys);
    }
}

/* Writes text to a new temporary file; returns its path in buf. */
static const char *write_temp(char *buf, size_t n, const char *text)
{
    snprintf(buf, n, "/tmp/ddpsim-rankfile-XXXXXX");
    int fd = mkstemp(buf);
    CU_ASSERT_FATAL(fd >= 0);
    FILE *f = fdopen(fd, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
    return buf;
}

static void test_lsf_rankfile(void)
{
    ddp_sys_t *probe = sys_with(NULL);
    char self[256];
    CU_ASSERT_EQUAL_FATAL(ddp_sys_hostname(probe, self, sizeof self), 0);
    ddp_sys_free(probe);

    static const struct {
        const char *fmt; /* %1$s = this host */
        const char *root;
        int node, code;
        const char *why;
    } rows[] = {
        /* launch node dropped; blank lines skipped; hosts repeat per slot */
        {"launch\nhostA\nhostA\n\n%1$s\n%1$s\nhostB\n", "hostA", 1, 0, NULL},
        {"launch\n%1$s\n%1$s\nhostB\nhostB\n", NULL, 0, 0, NULL},
        {"%1$s\nhostA\nhostB\n%1$s\n", "hostA", 2, 0, NULL},
        {"launch\r\n  hostA \r\n\r\n%1$s\r\n", "hostA", 1, 0, NULL},
        {"launch\nhostA\nhostB", "hostA", -1, DDP_ECONFIG,
         "is not among the compute hosts"},
        {"launch\n\n\n", NULL, -1, DDP_ECONFIG, "lists no compute hosts"},
        {"", NULL, -1, DDP_ECONFIG, "lists no compute hosts"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char text[1024], path[64];
        snprintf(text, sizeof text, rows[i].fmt, self);
        write_temp(path, sizeof path, text);
        ddp_sys_t *sys = sys_with(NULL);
        ddp_env_t *e = ddp_sys_env(sys);
        ddp_env_set(e, "LSB_JOBID", "4242");
        ddp_env_set(e, "LSB_DJOB_RANKFILE", path);
        ddp_env_set(e, "JSM_NAMESPACE_LOCAL_RANK", "0");
        ddp_env_set(e, "JSM_NAMESPACE_SIZE", "4");
        ddp_env_set(e, "JSM_NAMESPACE_RANK", "0");
        ddp_cluster_t *c = open_or_fail(sys, NULL);
        CU_ASSERT_STRING_EQUAL(c->ops->name, "lsf");
        char addr[256] = "";
        int node = -1;
        int rc_addr = ddp_cluster_main_address(c, addr, sizeof addr);
        int rc_node = ddp_cluster_node_rank(c, &node);
        const char *root = rows[i].root ? rows[i].root : self;
        if (rows[i].code == 0 || strcmp(rows[i].why, "lists no compute hosts")) {
            CU_ASSERT_EQUAL(rc_addr, 0);
            CU_ASSERT_STRING_EQUAL(addr, root);
        } else {
            CU_ASSERT_EQUAL(rc_addr, rows[i].code);
        }
        CU_ASSERT_EQUAL(rc_node, rows[i].code);
        if (rows[i].code == 0) {
            CU_ASSERT_EQUAL(node, rows[i].node);
        } else {
            const char *m = ddp_err_message();
            CU_ASSERT_PTR_NOT_NULL(strstr(m, rows[i].why));
            CU_ASSERT_PTR_NOT_NULL(strstr(m, path));
            CU_ASSERT_PTR_NOT_NULL(strstr(m, "jsrun"));
        }
        uint16_t port = 0;
        CU_ASSERT_EQUAL(ddp_cluster_main_port(c, &port), 0);
        CU_ASSERT_EQUAL(port, 4242 % 1000 + 10000);
        ddp_cluster_close(c);
        ddp_sys_free(sys);
        unlink(path);
    }
    /* A FIFO as the rank file: refused at once, never waited on. */
    char fifo[] = "/tmp/ddpsim-rankfifo-XXXXXX";
    int fd = mkstemp(fifo);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    unlink(fifo);
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
    const char *env[MAXENV] = {LSF_OK};
    ddp_sys_t *sys = sys_with(env);
    ddp_env_set(ddp_sys_env(sys), "LSB_DJOB_RANKFILE", fifo);
    ddp_cluster_t *c = open_or_fail(sys, NULL);
    char addr[256];
    alarm(20);
    CU_ASSERT_EQUAL(ddp_cluster_main_address(c, addr, sizeof addr), DDP_EUNSUPPORTED);
    alarm(0);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "a FIFO (named pipe)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), fifo));
    ddp_cluster_close(c);
    ddp_sys_free(sys);
    unlink(fifo);
}

static void test_mpi_port(void)
{
    uint16_t ports[3] = {0};
    static const char *const ns[3] = {"PMIX_NAMESPACE=prterun-host-1234@1",
                                      "PMIX_NAMESPACE=prterun-host-1234@1",
                                      "PMIX_NAMESPACE=prterun-host-9876@1"};
    for (int r = 0; r < 3; r++) {
        const char *env[MAXENV] = {"OMPI_COMM_WORLD_SIZE=2", NULL, ns[r]};
        env[1] = r == 1 ? "OMPI_COMM_WORLD_RANK=1" : "OMPI_COMM_WORLD_RANK=0";
        ddp_sys_t *sys = sys_with(env);
        ddp_cluster_t *c = open_or_fail(sys, NULL);
        CU_ASSERT_EQUAL(ddp_cluster_main_port(c, &ports[r]), 0);
        CU_ASSERT(ports[r] >= 10000 && ports[r] <= 19999);
        ddp_cluster_close(c);
        ddp_sys_free(sys);
    }
    CU_ASSERT_EQUAL(ports[0], ports[1]); /* every rank of a job agrees */
    CU_ASSERT_NOT_EQUAL(ports[0], ports[2]); /* another job differs */

    /* The older ORTE variables are used when PMIx's is absent. */
    static const char *const orte[MAXENV] = {
        "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=0",
        "OMPI_MCA_orte_hnp_uri=1234.0;tcp://10.0.0.1:40000"};
    ddp_sys_t *sys = sys_with(orte);
    ddp_cluster_t *c = open_or_fail(sys, NULL);
    uint16_t p = 0;
    CU_ASSERT_EQUAL(ddp_cluster_main_port(c, &p), 0);
    CU_ASSERT(p >= 10000 && p <= 19999);
    ddp_cluster_close(c);
    ddp_sys_free(sys);
}

typedef struct lines {
    char buf[4096];
    int n;
} lines_t;

static void collect_line(void *arg, const char *line)
{
    lines_t *l = arg;
    strncat(l->buf, line, sizeof l->buf - strlen(l->buf) - 2);
    strcat(l->buf, "\n");
    l->n++;
}

static void test_describe(void)
{
    static const char *const env[MAXENV] = {SLURM_OK};
    ddp_sys_t *sys = sys_with(env);
    ddp_cluster_t *c = open_or_fail(sys, NULL);
    lines_t l = {.n = 0};
    l.buf[0] = '\0';
    ddp_cluster_describe(c, collect_line, &l);
    CU_ASSERT_STRING_EQUAL(l.buf, "cluster: slurm\n"
                                  "detected: yes\n"
                                  "main_address: node001\n"
                                  "main_port: 19567\n"
                                  "world_size: 8\n"
                                  "global_rank: 5\n"
                                  "local_rank: 1\n"
                                  "node_rank: 2\n"
                                  "creates_processes_externally: yes\n"
                                  "validate: ok\n");
    ddp_cluster_close(c);
    ddp_sys_free(sys);

    /* Chosen by name without its variables: every value says why. */
    sys = sys_with(NULL);
    c = open_or_fail(sys, "kubeflow");
    l.buf[0] = '\0';
    l.n = 0;
    ddp_cluster_describe(c, collect_line, &l);
    CU_ASSERT_EQUAL(l.n, 10);
    CU_ASSERT_PTR_NOT_NULL(strstr(l.buf, "detected: no\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(l.buf, "main_address: error: MASTER_ADDR is "
                                         "not set"));
    CU_ASSERT_PTR_NOT_NULL(strstr(l.buf, "main_port: error: MASTER_PORT is not "
                                         "set"));
    CU_ASSERT_PTR_NOT_NULL(strstr(l.buf, "world_size: error: WORLD_SIZE is not "
                                         "set"));
    CU_ASSERT_PTR_NOT_NULL(strstr(l.buf, "global_rank: error: RANK is not "
                                         "set"));
    CU_ASSERT_PTR_NOT_NULL(strstr(l.buf, "local_rank: 0\n"));
    ddp_cluster_close(c);
    ddp_sys_free(sys);
}

DDP_SUITE("cluster", NULL, NULL,
          {"registry", test_registry},
          {"detection priority", test_detection_priority},
          {"override by name", test_override_by_name},
          {"getters table", test_getters_table},
          {"bad values table", test_bad_values_table},
          {"validate table", test_validate_table},
          {"every launch check gives the variable, its value and the fix",
           test_checks_give_the_fix},
          {"master address table", test_master_check_table},
          {"master address: rank 0 on its own address", test_master_check_own_address},
          {"a picked port for several nodes names MASTER_PORT", test_picked_port_check},
          {"lightning port cache and setters",
           test_lightning_port_cache_and_setters},
          {"address buffer", test_address_buffer},
          {"torchelastic default warnings", test_torchelastic_default_warnings},
          {"slurm root node table", test_slurm_root_node_table},
          {"slurm port rule", test_slurm_port_rule},
          {"lsf rankfile", test_lsf_rankfile},
          {"mpi port", test_mpi_port},
          {"describe", test_describe})
