/* tests/test_pg_nccl.c — the nccl backend.
 *
 * What init must say depends on the machine, so the suite first probes it
 * the same way the backend does (nccl.h at build time, dlopen of
 * libnccl.so.2 and the CUDA runtime, cudaGetDeviceCount) and then asserts
 * the exact error for that machine: "not built", "libnccl.so.2 not found",
 * "CUDA runtime not found" or "no CUDA device visible". On a machine with a
 * GPU the same suite runs a one-rank group end to end and drives the
 * unique-id and init-abort paths through the fault points. Multi-GPU runs
 * and real process faults are scripts/hw-test.sh's job. */
#include <errno.h>
#include <fiu-control.h>
#include <fiu.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef DDP_HAVE_NCCL_H
#include <dlfcn.h>
#endif

#include "ddp/err.h"
#include "ddp/pg.h"
#include "ddp/store.h"
#include "ddp/sys.h"
#include "test.h"

typedef enum {
    M_NOT_BUILT,
    M_NO_NCCL,
    M_NO_CUDART,
    M_NO_DEVICE,
    M_GPU,
} machine_t;

static const char *const machine_names[] = {"not built", "no libnccl",
                                            "no CUDA runtime",
                                            "no CUDA device", "GPU"};

static ddp_sys_t *g_sys;
static ddp_store_t *g_store;
static machine_t g_machine;
static int g_ndev;

/* Probes without going through the backend, so a backend that misreads the
 * machine fails the suite instead of agreeing with itself. */
static machine_t probe(void)
{
#ifndef DDP_HAVE_NCCL_H
    return M_NOT_BUILT;
#else
    void *nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!nccl)
        return M_NO_NCCL;
    static const char *const names[] = {"libcudart.so.13", "libcudart.so.12",
                                        "libcudart.so"};
    void *rt = NULL;
    for (size_t i = 0; !rt && i < sizeof names / sizeof names[0]; i++)
        rt = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!rt)
        return M_NO_CUDART;
    void *sym = dlsym(rt, "cudaGetDeviceCount");
    int (*count)(int *) = NULL;
    if (!sym)
        return M_NO_CUDART;
    memcpy(&count, &sym, sizeof sym);
    int n = 0;
    if (count(&n) != 0 || n <= 0)
        return M_NO_DEVICE;
    g_ndev = n;
    return M_GPU; /* the handles stay open, as the backend's do */
#endif
}

static int suite_init(void)
{
    fiu_init(0);
    g_sys = ddp_test_sys();
    if (!g_sys)
        return -1;
    g_store = ddp_store_memory_new(g_sys);
    g_machine = probe();
    return g_store ? 0 : -1;
}

static int suite_cleanup(void)
{
    ddp_store_free(g_store);
    ddp_sys_free(g_sys);
    g_store = NULL;
    g_sys = NULL;
    return 0;
}

static int64_t dl(int ms) { return ddp_sys_deadline_in(g_sys, ms * DDP_NS_PER_MS); }

static ddp_pg_init_t args(const char *prefix, int rank, int world, int device,
                          int ms)
{
    ddp_pg_init_t in = {.sys = g_sys, .store = g_store, .prefix = prefix,
                        .rank = rank, .world = world, .deadline = dl(ms),
                        .device = device};
    return in;
}

/* The code and sentence init must give on a machine without a usable GPU. */
static int expected_code(void)
{
    switch (g_machine) {
    case M_NOT_BUILT: return DDP_ENOT_BUILT;
    case M_NO_NCCL:
    case M_NO_CUDART:
    case M_NO_DEVICE: return DDP_ENOT_FOUND;
    default: return 0;
    }
}

static const char *expected_text(void)
{
    switch (g_machine) {
    case M_NOT_BUILT:
        return "nccl backend: not built (nccl.h was not found at build time; "
               "install the CUDA toolkit and rebuild)";
    case M_NO_NCCL: return "nccl backend: libnccl.so.2 not found: ";
    case M_NO_CUDART: return "nccl backend: CUDA runtime not found";
    case M_NO_DEVICE: return "nccl backend: no CUDA device visible (";
    default: return "";
    }
}

static int has_key(const char *key)
{
    const char *keys[] = {key};
    return ddp_store_check(g_store, keys, 1, dl(100));
}

static void test_ops_table(void)
{
    const ddp_pg_ops_t *ops = ddp_pg_backend_find("nccl");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ops);
    CU_ASSERT_STRING_EQUAL(ops->name, "nccl");
    CU_ASSERT_PTR_NOT_NULL(ops->init);
    CU_ASSERT_PTR_NOT_NULL(ops->barrier);
    CU_ASSERT_PTR_NOT_NULL(ops->broadcast);
    CU_ASSERT_PTR_NOT_NULL(ops->allreduce);
    CU_ASSERT_PTR_NOT_NULL(ops->allgather);
    CU_ASSERT_PTR_NOT_NULL(ops->split);
    CU_ASSERT_PTR_NOT_NULL(ops->abort);
    CU_ASSERT_PTR_NOT_NULL(ops->destroy);
}

/* Every rank, root or not, fails at once with the machine's error: the
 * library and device checks come before the store is touched, so a non-root
 * rank does not wait out its deadline for an id nobody will publish, and a
 * root that cannot join publishes none. */
static void test_init_fails_clearly_here(void)
{
    if (g_machine == M_GPU) {
        ddp_test_skip("a GPU machine: the GPU cases cover it");
        return;
    }
    for (int rank = 0; rank < 2; rank++) {
        ddp_pg_init_t in = args("nccl_here", rank, 2, rank, 30000);
        ddp_pg_t *pg = (ddp_pg_t *)&in; /* must come back NULL */
        int64_t t0 = ddp_sys_now(g_sys);
        int rc = ddp_pg_new("nccl", &in, &pg);
        int64_t took = ddp_sys_now(g_sys) - t0;
        const char *msg = ddp_err_message();
        CU_ASSERT_EQUAL(rc, expected_code());
        CU_ASSERT_EQUAL(ddp_err_ctx()->code, expected_code());
        CU_ASSERT_PTR_NULL(pg);
        if (!strstr(msg, expected_text()))
            fprintf(stderr, "\n  machine: %s; expected \"%s\" in \"%s\"\n",
                    machine_names[g_machine], expected_text(), msg);
        CU_ASSERT_PTR_NOT_NULL(strstr(msg, expected_text()));
        CU_ASSERT_PTR_NOT_NULL(strstr(msg, "hint: "));
        if (g_machine == M_NO_DEVICE)
            CU_ASSERT_PTR_NOT_NULL(strstr(msg, "cudaGetDeviceCount"));
        /* Far below the 30 s deadline: nothing waited. */
        CU_ASSERT(took < 10 * DDP_NS_PER_S);
        CU_ASSERT_EQUAL(has_key("nccl_here/nccl/uid"), 0);
    }
}

/* The load result is cached once per process, but the error context is per
 * thread: a second thread (a simulated rank) must get the full sentence. */
typedef struct thr {
    int rc;
    char msg[1024];
} thr_t;

static void *init_in_thread(void *arg)
{
    thr_t *t = arg;
    ddp_pg_init_t in = args("nccl_thread", 1, 2, 0, 30000);
    ddp_pg_t *pg = NULL;
    t->rc = ddp_pg_new("nccl", &in, &pg);
    snprintf(t->msg, sizeof t->msg, "%s", ddp_err_message());
    if (pg)
        ddp_pg_destroy(pg);
    return NULL;
}

static void test_error_repeats_in_other_threads(void)
{
    if (g_machine == M_GPU) {
        ddp_test_skip("a GPU machine: the GPU cases cover it");
        return;
    }
    thr_t t[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, init_in_thread,
                                             &t[i]),
                              0);
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        CU_ASSERT_EQUAL(t[i].rc, expected_code());
        CU_ASSERT_PTR_NOT_NULL(strstr(t[i].msg, expected_text()));
    }
}

/* Argument errors name the field and come before any library work, so
 * they read the same on every machine that has the backend built. */
static void test_bad_arguments(void)
{
    int built = g_machine != M_NOT_BUILT;
    ddp_pg_t *pg = NULL;
    ddp_pg_init_t in = args("nccl_args", 0, 1, -1, 1000);
    int rc = ddp_pg_new("nccl", &in, &pg);
    CU_ASSERT_EQUAL(rc, built ? DDP_ECONFIG : DDP_ENOT_BUILT);
    CU_ASSERT_PTR_NULL(pg);
    if (built)
        CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "device -1"));

    /* The ops table called directly, bypassing ddp_pg_new's checks. */
    const ddp_pg_ops_t *ops = ddp_pg_backend_find("nccl");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ops);
    in = args("nccl_args", 2, 2, 0, 1000);
    pg = (ddp_pg_t *)&in;
    rc = ops->init(&in, &pg);
    CU_ASSERT_EQUAL(rc, built ? DDP_ECONFIG : DDP_ENOT_BUILT);
    CU_ASSERT_PTR_NULL(pg);

    if (g_machine == M_GPU) {
        in = args("nccl_args", 0, 1, g_ndev, 1000);
        rc = ddp_pg_new("nccl", &in, &pg);
        CU_ASSERT_EQUAL(rc, DDP_ECONFIG);
        CU_ASSERT_PTR_NULL(pg);
        char want[64];
        snprintf(want, sizeof want, "wants CUDA device %d", g_ndev);
        CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), want));
    }
}

/* ---------------------------------------------------------- with a GPU */

static void test_gpu_one_rank_group(void)
{
    if (g_machine != M_GPU) {
        ddp_test_skip("no usable GPU with NCCL here (%s)", machine_names[g_machine]);
        return;
    }
    ddp_pg_init_t in = args("nccl_gpu1", 0, 1, 0, 60000);
    ddp_pg_t *pg = NULL;
    int rc = ddp_pg_new("nccl", &in, &pg);
    if (rc)
        fprintf(stderr, "\n  %s\n", ddp_err_message());
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pg);
    CU_ASSERT_EQUAL(ddp_pg_rank(pg), 0);
    CU_ASSERT_EQUAL(ddp_pg_world(pg), 1);

    ddp_buf_t uid = {0};
    CU_ASSERT_EQUAL(ddp_store_get(g_store, "nccl_gpu1/nccl/uid", &uid, dl(100)),
                    0);
    CU_ASSERT_EQUAL(uid.len, 128);
    ddp_buf_free(&uid);

    /* World 1: every reduction is the identity, which still proves the
     * bytes went to the device and back through NCCL for each type. */
    int32_t i32[3] = {1, -2, 3};
    int64_t i64[2] = {INT64_C(1) << 40, -7};
    float f[2] = {1.5f, -0.25f};
    double d[2] = {3.25, -1e300};
    for (int op = 0; op < DDP_REDOP_COUNT; op++) {
        CU_ASSERT_EQUAL(ddp_pg_allreduce(pg, i32, 3, DDP_INT32, op, dl(10000)),
                        0);
        CU_ASSERT(i32[0] == 1 && i32[1] == -2 && i32[2] == 3);
        CU_ASSERT_EQUAL(ddp_pg_allreduce(pg, i64, 2, DDP_INT64, op, dl(10000)),
                        0);
        CU_ASSERT(i64[0] == INT64_C(1) << 40 && i64[1] == -7);
        CU_ASSERT_EQUAL(ddp_pg_allreduce(pg, f, 2, DDP_FLOAT, op, dl(10000)),
                        0);
        CU_ASSERT(f[0] == 1.5f && f[1] == -0.25f);
        CU_ASSERT_EQUAL(ddp_pg_allreduce(pg, d, 2, DDP_DOUBLE, op, dl(10000)),
                        0);
        CU_ASSERT(d[0] == 3.25 && d[1] == -1e300);
    }
    char b[5] = "abcd", g[5] = {0};
    CU_ASSERT_EQUAL(ddp_pg_broadcast(pg, b, 5, 0, dl(10000)), 0);
    CU_ASSERT_STRING_EQUAL(b, "abcd");
    CU_ASSERT_EQUAL(ddp_pg_allgather(pg, b, 5, g, dl(10000)), 0);
    CU_ASSERT_STRING_EQUAL(g, "abcd");
    CU_ASSERT_EQUAL(ddp_pg_barrier(pg, dl(10000)), 0);

    ddp_pg_t *sub = (ddp_pg_t *)&in;
    CU_ASSERT_EQUAL(ddp_pg_split(pg, DDP_PG_NO_COLOR, 0, "none", &sub,
                                 dl(30000)),
                    0);
    CU_ASSERT_PTR_NULL(sub);
    rc = ddp_pg_split(pg, 3, 0, "half", &sub, dl(30000));
    if (rc)
        fprintf(stderr, "\n  %s\n", ddp_err_message());
    CU_ASSERT_EQUAL(rc, 0);
    if (sub) {
        CU_ASSERT_STRING_EQUAL(sub->prefix, "nccl_gpu1/half");
        CU_ASSERT_EQUAL(ddp_pg_world(sub), 1);
        CU_ASSERT_EQUAL(ddp_pg_barrier(sub, dl(10000)), 0);
        ddp_pg_destroy(sub);
    }

    /* After abort every call fails fast. */
    ddp_pg_abort(pg);
    int64_t t0 = ddp_sys_now(g_sys);
    CU_ASSERT_EQUAL(ddp_pg_barrier(pg, dl(30000)), DDP_ECANCELED);
    CU_ASSERT(ddp_sys_now(g_sys) - t0 < 5 * DDP_NS_PER_S);
    ddp_pg_destroy(pg);
}

/* pg/nccl/uid on the root: nothing is published, and the error says so. */
static void test_gpu_uid_fault(void)
{
    if (g_machine != M_GPU) {
        ddp_test_skip("no usable GPU with NCCL here (%s)", machine_names[g_machine]);
        return;
    }
    fiu_enable("pg/nccl/uid", 1, (void *)(intptr_t)EPIPE, FIU_ONETIME);
    ddp_pg_init_t in = args("nccl_uidfault", 0, 1, 0, 10000);
    ddp_pg_t *pg = NULL;
    int rc = ddp_pg_new("nccl", &in, &pg);
    fiu_disable("pg/nccl/uid");
    CU_ASSERT_EQUAL(rc, -EPIPE);
    CU_ASSERT_PTR_NULL(pg);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "could not publish"));
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "pg/nccl/uid"));
    CU_ASSERT_EQUAL(has_key("nccl_uidfault/nccl/uid"), 0);
}

/* A non-root rank whose root never publishes waits exactly its group
 * deadline (not the store's 300 s) and names the key. */
static void test_gpu_uid_timeout(void)
{
    if (g_machine != M_GPU) {
        ddp_test_skip("no usable GPU with NCCL here (%s)", machine_names[g_machine]);
        return;
    }
    ddp_pg_init_t in = args("nccl_nouid", 1, 2, 0, 300);
    ddp_pg_t *pg = NULL;
    int64_t t0 = ddp_sys_now(g_sys);
    int rc = ddp_pg_new("nccl", &in, &pg);
    int64_t took = ddp_sys_now(g_sys) - t0;
    CU_ASSERT_EQUAL(rc, DDP_ETIMEOUT);
    CU_ASSERT_PTR_NULL(pg);
    const char *msg = ddp_err_message();
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "\"nccl_nouid/nccl/uid\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "rank 1 of 2"));
    CU_ASSERT(took >= 250 * DDP_NS_PER_MS);
    CU_ASSERT(took < 10 * DDP_NS_PER_S);
}

/* pg/nccl/init without failinfo: a real communicator that never turns
 * ready is aborted at the deadline. With failinfo: that errno, at once. */
static void test_gpu_init_abort(void)
{
    if (g_machine != M_GPU) {
        ddp_test_skip("no usable GPU with NCCL here (%s)", machine_names[g_machine]);
        return;
    }
    fiu_enable("pg/nccl/init", 1, NULL, FIU_ONETIME);
    ddp_pg_init_t in = args("nccl_stall", 0, 1, 0, 2000);
    ddp_pg_t *pg = NULL;
    int64_t t0 = ddp_sys_now(g_sys);
    int rc = ddp_pg_new("nccl", &in, &pg);
    int64_t took = ddp_sys_now(g_sys) - t0;
    fiu_disable("pg/nccl/init");
    CU_ASSERT_EQUAL(rc, DDP_ETIMEOUT);
    CU_ASSERT_PTR_NULL(pg);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(),
                                  "communicator was aborted"));
    CU_ASSERT(took >= 1900 * DDP_NS_PER_MS);
    CU_ASSERT(took < 20 * DDP_NS_PER_S);

    fiu_enable("pg/nccl/init", 1, (void *)(intptr_t)EIO, FIU_ONETIME);
    in = args("nccl_initfault", 0, 1, 0, 10000);
    rc = ddp_pg_new("nccl", &in, &pg);
    fiu_disable("pg/nccl/init");
    CU_ASSERT_EQUAL(rc, -EIO);
    CU_ASSERT_PTR_NULL(pg);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "pg/nccl/init"));
}

DDP_SUITE("pg_nccl", suite_init, suite_cleanup,
          {"ops table", test_ops_table},
          {"init fails clearly on this machine", test_init_fails_clearly_here},
          {"error repeats in other threads",
           test_error_repeats_in_other_threads},
          {"bad arguments", test_bad_arguments},
          {"gpu: one-rank group", test_gpu_one_rank_group},
          {"gpu: uid fault", test_gpu_uid_fault},
          {"gpu: uid timeout names the key", test_gpu_uid_timeout},
          {"gpu: init abort at the deadline", test_gpu_init_abort})
