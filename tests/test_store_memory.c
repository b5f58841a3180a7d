/* tests/test_store_memory.c — the in-memory store: the shared conformance
 * table, plus what only it can show (its own errors, many threads on one
 * store). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/store.h"
#include "ddp/sys.h"
#include "store_conformance.h"
#include "test.h"

static ddp_sys_t *g_sys;

static int suite_init(void) { return ddp_test_suite_sys_init(&g_sys, 0); }
static int suite_cleanup(void) { return ddp_test_suite_sys_cleanup(&g_sys); }

static int64_t dl(int ms) { return ddp_test_deadline_ms(g_sys, ms); }

static void test_conformance(void)
{
    ddp_store_t *st = ddp_store_memory_new(g_sys);
    ddp_test_store_conformance(st, st, "mem");
    ddp_store_free(st);
}

static void test_fresh_store_is_empty(void)
{
    ddp_store_t *st = ddp_store_memory_new(g_sys);
    CU_ASSERT_PTR_NOT_NULL_FATAL(st);
    CU_ASSERT_STRING_EQUAL(st->ops->name, "memory");
    int64_t n = -1;
    CU_ASSERT_EQUAL(ddp_store_num_keys(st, &n, dl(10)), 0);
    CU_ASSERT_EQUAL(n, 0);
    char **ks = NULL;
    size_t nk = 99;
    CU_ASSERT_EQUAL(ddp_store_list_keys(st, &ks, &nk, dl(10)), 0);
    CU_ASSERT_EQUAL(nk, 0);
    ddp_store_free_keys(ks, nk);
    ddp_store_free(st);
    CU_ASSERT_PTR_NULL(ddp_store_memory_new(NULL));
}

static void test_add_errors(void)
{
    ddp_store_t *st = ddp_store_memory_new(g_sys);
    int64_t v = 0;
    CU_ASSERT_EQUAL(ddp_store_set_str(st, "txt", "abc", dl(10)), 0);
    CU_ASSERT_EQUAL(ddp_store_add(st, "txt", 1, &v, dl(10)), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "txt"));
    /* stoll-style parsing: white space and trailing junk are fine. */
    CU_ASSERT_EQUAL(ddp_store_set_str(st, "ws", "  12abc", dl(10)), 0);
    CU_ASSERT_EQUAL(ddp_store_add(st, "ws", 1, &v, dl(10)), 0);
    CU_ASSERT_EQUAL(v, 13);
    CU_ASSERT_EQUAL(ddp_store_set_str(st, "big", "9223372036854775807",
                                      dl(10)),
                    0);
    CU_ASSERT_EQUAL(ddp_store_add(st, "big", 1, &v, dl(10)), -ERANGE);
    CU_ASSERT_EQUAL(ddp_store_add(st, "big", -1, &v, dl(10)), 0);
    CU_ASSERT_EQUAL(v, INT64_MAX - 1);
    CU_ASSERT_EQUAL(ddp_store_set_str(st, "huge", "99999999999999999999",
                                      dl(10)),
                    0);
    CU_ASSERT_EQUAL(ddp_store_add(st, "huge", 0, &v, dl(10)), -ERANGE);
    ddp_store_free(st);
}

static void test_queue_and_value_share_a_name(void)
{
    ddp_store_t *st = ddp_store_memory_new(g_sys);
    CU_ASSERT_EQUAL(ddp_store_queue_push(st, "k", "q", 1, dl(10)), 0);
    CU_ASSERT_EQUAL(ddp_store_set_str(st, "k", "v", dl(10)), 0);
    CU_ASSERT_EQUAL(ddp_store_delete_key(st, "k", dl(10)), 1);
    int64_t n = -1;
    CU_ASSERT_EQUAL(ddp_store_queue_len(st, "k", &n, dl(10)), 0);
    CU_ASSERT_EQUAL(n, 1); /* DELETE_KEY leaves the queue */
    ddp_buf_t b = {0};
    /* A key present only as a queue reads as an empty value. */
    CU_ASSERT_EQUAL(ddp_store_get(st, "k", &b, dl(10)), 0);
    CU_ASSERT_EQUAL(b.len, 0);
    ddp_buf_free(&b);
    ddp_store_free(st);
}

static void test_many_keys_rehash(void)
{
    ddp_store_t *st = ddp_store_memory_new(g_sys);
    char k[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(k, sizeof k, "key%d", i);
        CU_ASSERT_EQUAL(ddp_store_set(st, k, &i, sizeof i, dl(1000)), 0);
    }
    int64_t n = 0;
    CU_ASSERT_EQUAL(ddp_store_num_keys(st, &n, dl(10)), 0);
    CU_ASSERT_EQUAL(n, 5000);
    for (int i = 0; i < 5000; i += 7) {
        snprintf(k, sizeof k, "key%d", i);
        ddp_buf_t b = {0};
        CU_ASSERT_EQUAL(ddp_store_get(st, k, &b, dl(10)), 0);
        CU_ASSERT(b.len == sizeof i && memcmp(b.data, &i, sizeof i) == 0);
        ddp_buf_free(&b);
    }
    char **ks = NULL;
    size_t nk = 0;
    CU_ASSERT_EQUAL(ddp_store_list_keys(st, &ks, &nk, dl(100)), 0);
    CU_ASSERT_EQUAL(nk, 5000);
    CU_ASSERT(nk == 5000 && !strcmp(ks[0], "key0") &&
              !strcmp(ks[4999], "key4999"));
    ddp_store_free_keys(ks, nk);
    ddp_store_free(st);
}

/* ---- many threads on one store ---- */

enum { THREADS = 16, ADDS = 500 };

typedef struct {
    ddp_store_t *st;
    int id;
    int rc;
} worker_t;

static void *adder(void *arg)
{
    worker_t *w = arg;
    for (int i = 0; i < ADDS && w->rc == 0; i++)
        w->rc = ddp_store_add(w->st, "ctr", 1, NULL, dl(5000));
    /* Then every thread waits for every other's key. */
    char mine[16];
    snprintf(mine, sizeof mine, "done%d", w->id);
    if (w->rc == 0)
        w->rc = ddp_store_set_str(w->st, mine, "1", dl(5000));
    char names[THREADS][16];
    const char *all[THREADS];
    for (int i = 0; i < THREADS; i++) {
        snprintf(names[i], sizeof names[i], "done%d", i);
        all[i] = names[i];
    }
    if (w->rc == 0)
        w->rc = ddp_store_wait(w->st, all, THREADS, dl(10000));
    return NULL;
}

static void test_threads(void)
{
    ddp_store_t *st = ddp_store_memory_new(g_sys);
    pthread_t th[THREADS];
    worker_t w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker_t){st, i, 0};
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, adder, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        CU_ASSERT_EQUAL(w[i].rc, 0);
    }
    int64_t v = 0;
    CU_ASSERT_EQUAL(ddp_store_add(st, "ctr", 0, &v, dl(10)), 0);
    CU_ASSERT_EQUAL(v, THREADS * ADDS);
    ddp_store_free(st);
}

static void *popper(void *arg)
{
    worker_t *w = arg;
    ddp_buf_t b = {0};
    w->rc = ddp_store_queue_pop(w->st, "jobs", &b, dl(1000));
    ddp_buf_free(&b);
    return NULL;
}

/* Each pushed element is popped exactly once. */
static void test_concurrent_pops(void)
{
    ddp_store_t *st = ddp_store_memory_new(g_sys);
    pthread_t th[4];
    worker_t w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker_t){st, i, -1};
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, popper, &w[i]), 0);
    }
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(ddp_store_queue_push(st, "jobs", "j", 1, dl(10)), 0);
    int ok = 0, timeouts = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ok += w[i].rc == 0;
        timeouts += w[i].rc == DDP_ETIMEOUT;
    }
    CU_ASSERT_EQUAL(ok, 3);
    CU_ASSERT_EQUAL(timeouts, 1);
    ddp_store_free(st);
}

static void test_unsupported_and_null(void)
{
    CU_ASSERT_EQUAL(ddp_store_ping(NULL, 0), -EINVAL);
    ddp_store_ops_t none = {.name = "none"};
    ddp_store_t st = {.ops = &none, .sys = g_sys};
    CU_ASSERT_EQUAL(ddp_store_ping(&st, 0), DDP_EUNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "none"));
    ddp_store_free(NULL);
    ddp_buf_free(NULL);
    ddp_store_free_keys(NULL, 3);
    CU_ASSERT_STRING_EQUAL(ddp_store_op_name(DDP_STORE_OP_CANCEL_WAIT),
                           "CANCEL_WAIT");
    CU_ASSERT_STRING_EQUAL(ddp_store_op_name(DDP_STORE_OP_LIST_KEYS),
                           "LIST_KEYS");
    CU_ASSERT_STRING_EQUAL(ddp_store_op_name(99), "UNKNOWN");
}

DDP_SUITE("store_memory", suite_init, suite_cleanup,
          {"conformance", test_conformance},
          {"fresh_store_is_empty", test_fresh_store_is_empty},
          {"add_errors", test_add_errors},
          {"queue_and_value_share_a_name", test_queue_and_value_share_a_name},
          {"many_keys_rehash", test_many_keys_rehash},
          {"threads", test_threads},
          {"concurrent_pops", test_concurrent_pops},
          {"unsupported_and_null", test_unsupported_and_null})
